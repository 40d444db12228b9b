/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the query classifier: arbitrary bytes are
 * classified as SQL text (never read past the given length: the input is
 * copied to an exact-size heap buffer so ASan sees any overread), and as a
 * COM_QUERY packet through sl_qc_classify_buf. The result's invariants are
 * checked: op in range, names NUL-terminated within SL_QC_NAME_MAX, a hint
 * server only for a named-server hint, UNKNOWN set when op is undefined;
 * the digests' fast canonical pass agrees with the full one.
 *
 * classifier.c is compiled into this target (taking precedence over
 * libsluice's copy), so it is coverage-instrumented whether or not the
 * build instruments libsluice too; buffer helpers come from libsluice.
 */
#include "../server/core/classifier.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const struct sl_qc_result *r)
{
    char buf[512];

    if (r->op > SL_QC_OP_OTHER || r->hint.type > SL_HINT_ROUTE_TO_ALL) {
        abort();
    }
    if (r->op == SL_QC_OP_UNDEFINED && !(r->type & SL_QC_UNKNOWN)) {
        abort();
    }
    if (strnlen(r->name, SL_QC_NAME_MAX) == SL_QC_NAME_MAX
        || strnlen(r->hint.server, SL_QC_NAME_MAX) == SL_QC_NAME_MAX) {
        abort();
    }
    if (r->hint.type != SL_HINT_ROUTE_TO_NAMED_SERVER
        && r->hint.server[0] != '\0') {
        abort();
    }
    for (unsigned i = 0; i < r->ntables && i < SL_QC_MAX_TABLES; i++) {
        if (strnlen(r->tables[i], SL_QC_NAME_MAX) == SL_QC_NAME_MAX) {
            abort();
        }
    }
    sl_qc_type_str(r->type, buf, sizeof(buf));
    sl_qc_type_str(r->type, buf, 7);
}

/* The digests' fast canonical pass, whenever it takes a statement, gives
 * what the full pass gives: hash, whole length and kind. */
static void
check_canonical(const char *sql, size_t size)
{
    char out[1024];
    uint64_t h, hf;
    size_t total, tf, n;
    int kind, kf;

    n = canonical(sql, size, out, sizeof(out), &h, &kind, &total);
    if (n > sizeof(out) - 1 ||
        n != (total < sizeof(out) - 1 ? total : sizeof(out) - 1)) {
        abort();
    }
    if (sl__qc_canonical_fast(sql, size, &hf, &tf, &kf) &&
        (hf != h || tf != total || kf != kind)) {
        abort();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_qc_result r, rb;
    char *copy = malloc(size ? size : 1);
    unsigned char hdr[5];
    struct sl_buf *buf;

    if (copy == NULL) {
        return 0;
    }
    memcpy(copy, data, size);
    sl_qc_classify(copy, size, &r);
    check(&r);
    check_canonical(copy, size);
    free(copy);

    if (size + 1 >= SL_MDB_MAX_PAYLOAD) {
        return 0;
    }
    hdr[0] = (unsigned char)((size + 1) & 0xff);
    hdr[1] = (unsigned char)(((size + 1) >> 8) & 0xff);
    hdr[2] = (unsigned char)(((size + 1) >> 16) & 0xff);
    hdr[3] = 0;
    hdr[4] = SL_COM_QUERY;
    buf = sl_buf_from(hdr, sizeof(hdr));
    if (buf != NULL && sl_buf_append_data(buf, data, size) == 0) {
        if (!sl_qc_classify_buf(buf, &rb) || rb.type != r.type
            || rb.op != r.op || rb.ntables != r.ntables) {
            abort();
        }
    }
    sl_buf_free(buf);
    return 0;
}
