/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for readwritesplit's rewriting of client COM_STMT_*
 * packets (server/modules/routing/readwritesplit/rws_exec.c, compiled in:
 * the functions are pure). Input:
 *
 *   byte 0-1   the statement's parameter count (little endian)
 *   byte 2     where to cut the packet into two buffer blocks
 *   rest       a client packet, header included, as the router gets it
 *
 * The packet goes through what route_execute does with it: keep its types
 * (rws_exec_save_types), add the types to it (rws_exec_add_types) and
 * swap the statement id (rws_exec_with_id). Invariants (abort on
 * violation): a rebuilt execute is the input with flag 1 and the 2*params
 * type bytes inserted after it, every other byte unchanged, its header
 * length matching; a re-id'd packet differs from the input only in the
 * four id bytes; the input is never modified.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../server/modules/routing/readwritesplit/rws_exec.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_add_types(const struct sl_buf *in, const uint8_t *pkt, size_t n,
                const struct rws_ps *ps)
{
    struct sl_buf *out = rws_exec_add_types(in, ps);
    size_t off = rws_exec_flag_off(ps->params);
    size_t tl = 2 * (size_t)ps->params;
    unsigned char *got;
    size_t len;

    if (out == NULL) {
        return;
    }
    len = sl_buf_len(out);
    got = malloc(len ? len : 1);
    if (got == NULL || sl_buf_copy_out(out, 0, len, got) != len ||
        len != n + tl || sl_mdb_get_len(got) != len - 4 ||
        memcmp(got + 4, pkt + 4, off - 4) != 0 || got[off] != 1 ||
        memcmp(got + off + 1, ps->types, tl) != 0 ||
        memcmp(got + off + 1 + tl, pkt + off + 1, n - off - 1) != 0) {
        abort();
    }
    free(got);
    sl_buf_free(out);
}

static void
check_with_id(const struct sl_buf *in, const uint8_t *pkt, size_t n)
{
    struct sl_buf *out = rws_exec_with_id(in, 0xa1b2c3d4u);
    unsigned char *got;

    if (out == NULL) {
        if (n >= 9) {
            abort();
        }
        return;
    }
    got = malloc(n);
    if (got == NULL || sl_buf_len(out) != n ||
        sl_buf_copy_out(out, 0, n, got) != n ||
        memcmp(got, pkt, 5) != 0 || memcmp(got + 5, "\xd4\xc3\xb2\xa1", 4) ||
        memcmp(got + 9, pkt + 9, n - 9) != 0) {
        abort();
    }
    free(got);
    sl_buf_free(out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rws_ps ps = {0};
    const uint8_t *pkt = data + 3;
    size_t n, cut;
    struct sl_buf *in, *tail;
    unsigned char *again;

    if (size < 3) {
        return 0;
    }
    ps.params = (uint16_t)(data[0] | data[1] << 8);
    n = size - 3;
    cut = n ? data[2] % (n + 1) : 0;
    in = sl_buf_new();
    tail = sl_buf_new();
    if (in == NULL || tail == NULL ||
        (cut > 0 && sl_buf_append_data(in, pkt, cut) != 0) ||
        (n > cut && sl_buf_append_data(tail, pkt + cut, n - cut) != 0)) {
        abort();
    }
    sl_buf_append(in, tail);           /* two blocks: cut inside fields */
    sl_buf_free(tail);
    rws_exec_save_types(in, &ps);
    if (ps.types == NULL && ps.params > 0) {
        /* types from an earlier execute: any bytes will do */
        ps.types = calloc(2 * (size_t)ps.params, 1);
    }
    check_add_types(in, pkt, n, &ps);
    check_with_id(in, pkt, n);
    again = malloc(n ? n : 1);
    if (again == NULL || sl_buf_len(in) != n ||
        sl_buf_copy_out(in, 0, n, again) != n || memcmp(again, pkt, n)) {
        abort();                        /* the client's packet changed */
    }
    free(again);
    free(ps.types);
    sl_buf_free(in);
    return 0;
}
