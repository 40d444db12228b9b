/*
 * libFuzzer target: the client command decoder. The input is split into
 * chain segments of varying sizes (as socket reads would), then complete
 * commands are cut off the head the way the client protocol does it
 * (sl_mdb_command_len, including 16 MiB continuations), classified, and
 * COM_CHANGE_USER payloads are decoded.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>

#include "mdb_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
decode(struct sl_buf *rq, uint32_t caps)
{
    struct mdb_hello h;
    size_t n;

    while ((n = sl_mdb_command_len(rq)) > 0) {
        struct sl_buf cmd = {0};

        if (sl_buf_split(rq, n, &cmd) != 0) {
            break;
        }
        if (sl_mdb_command(&cmd) == SL_COM_CHANGE_USER && n < 65536) {
            unsigned char *p = sl_buf_pullup(&cmd, n);

            if (p != NULL) {
                mdb_parse_change_user(p + 4, n - 4, caps, &h);
            }
        }
        sl_buf_reset(&cmd);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_buf rq = {0};
    size_t off = 2, step;

    if (size < 2) {
        return 0;
    }
    step = (size_t)data[0] % 17 + 1;
    while (off < size) {
        size_t n = size - off < step ? size - off : step;

        sl_buf_append_data(&rq, data + off, n);
        off += n;
        decode(&rq, (uint32_t)data[1] << 8 | 0x00028200u);
    }
    sl_mdb_complete_packets_len(&rq, NULL);
    sl_mdb_packet_len(&rq);
    sl_buf_reset(&rq);
    return 0;
}
