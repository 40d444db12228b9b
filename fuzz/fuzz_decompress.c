/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the compressed protocol's decoder (mdb_compress.c)
 * on hostile bytes: the first input byte picks zlib or zstd and the role,
 * the second the size of the reads the rest arrives in (as from a
 * socket). Checked: decoding never leaves more than its limit decoded,
 * bytes only leave the raw queue as whole packets, a refused stream stays
 * refused, and what was decoded, encoded again and decoded by a fresh
 * state, comes back byte for byte (the encoder and decoder agree).
 */
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>

#include "mdb_compress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define LIMIT (1024u * 1024u)

static void
check_round_trip(enum mdb_zalgo algo, const struct sl_buf *out)
{
    struct mdb_zstate *tx = mdb_z_new(algo, 1, false, 0, 0);
    struct mdb_zstate *rx = mdb_z_new(algo, 1, true, 0, 0);
    struct sl_buf *copy = sl_buf_clone_new(out);
    struct sl_buf *enc;
    struct sl_buf raw = {0}, back = {0};
    size_t n = sl_buf_len(out);
    unsigned char *a, *b;

    if (tx == NULL || rx == NULL || copy == NULL) {
        abort();
    }
    enc = mdb_z_encode(tx, copy);
    if (enc == NULL) {
        abort();
    }
    sl_buf_append(&raw, enc);
    sl_buf_free(enc);
    if (mdb_z_decode(rx, &raw, &back) != 0 || sl_buf_len(&raw) != 0 ||
        sl_buf_len(&back) != n) {
        abort();
    }
    a = malloc(n + 1);
    b = malloc(n + 1);
    sl_buf_copy_out(out, 0, n, a);
    sl_buf_copy_out(&back, 0, n, b);
    if (memcmp(a, b, n) != 0) {
        abort();
    }
    free(a);
    free(b);
    sl_buf_reset(&back);
    mdb_z_free(tx);
    mdb_z_free(rx);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum mdb_zalgo algo;
    struct mdb_zstate *z;
    struct sl_buf raw = {0}, out = {0};
    size_t step, off;
    int rc = 0;

    if (size < 2) {
        return 0;
    }
    algo = (data[0] & 1) ? MDB_Z_ZSTD : MDB_Z_ZLIB;
    z = mdb_z_new(algo, 1, (data[0] & 2) != 0, 0, LIMIT);
    if (z == NULL) {
        abort();
    }
    step = (size_t)data[1] + 1;
    data += 2;
    size -= 2;
    for (off = 0; off < size && rc == 0; off += step) {
        size_t n = size - off < step ? size - off : step;
        struct sl_buf *part = sl_buf_from(data + off, n);

        sl_buf_append(&raw, part);
        sl_buf_free(part);
        rc = mdb_z_decode(z, &raw, &out);
        if (sl_buf_len(&out) > LIMIT) {
            abort();
        }
        if (rc == 0 && sl_buf_len(&raw) >= MDB_Z_HDR_LEN) {
            /* what is left is one incomplete packet */
            unsigned char h[3];

            sl_buf_copy_out(&raw, 0, 3, h);
            if (MDB_Z_HDR_LEN + (h[0] | h[1] << 8 | (size_t)h[2] << 16) <=
                sl_buf_len(&raw)) {
                abort();
            }
        }
        if (rc != 0 && (mdb_z_error(z) == MDB_ZERR_NONE ||
                        mdb_z_decode(z, &raw, &out) != -1)) {
            abort();
        }
    }
    if (sl_buf_len(&out) > 0) {
        check_round_trip(algo, &out);
    }
    sl_buf_reset(&raw);
    sl_buf_reset(&out);
    mdb_z_free(z);
    return 0;
}
