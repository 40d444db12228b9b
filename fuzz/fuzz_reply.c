/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the reply tracker. Input layout:
 *   byte 0      capabilities selector (bit 0: CLIENT_DEPRECATE_EOF)
 *   bytes 1..8  commands pushed on the tracker's FIFO
 *   rest        packets (4-byte header + payload); a header may claim more
 *               bytes than remain, so 16 MiB continuations are exercised
 *               without 16 MiB inputs.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <sluice/mariadb.h>

#include "mdb_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mdb_tracker t;
    size_t off = 9;

    if (size < 9) {
        return 0;
    }
    mdb_tracker_init(&t, (data[0] & 1) ? SL_CAP_DEPRECATE_EOF : 0);
    for (int i = 1; i <= 8; i++) {
        mdb_tracker_expect(&t, data[i]);
    }
    while (off + 4 <= size) {
        uint32_t len = sl_mdb_get_len(data + off);
        size_t have = size - off - 4;
        size_t body = have < len ? have : len;

        if (data[off + 3] == 0xee) {
            len = SL_MDB_MAX_PAYLOAD;   /* pretend a 16 MiB packet */
        }
        mdb_tracker_packet(&t, len, data + off + 4,
                           body < MDB_PEEK ? body : MDB_PEEK);
        off += 4 + body;
        if (t.reply.state == SL_REPLY_LOAD_DATA && (data[0] & 2)) {
            mdb_tracker_expect(&t, SL_COM_QUERY);
        }
    }
    mdb_tracker_pending(&t);
    mdb_tracker_free(&t);
    return 0;
}
