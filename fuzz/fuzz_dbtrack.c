/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the default-database tracker (mdb_dbtrack.c):
 * the input is a script of operations on one tracker -- commands (a
 * command byte and a length-prefixed argument, made into a packet),
 * answers (OK or ERR) and COM_CHANGE_USERs. Checked after every step: a
 * database the tracker hands out is NUL-terminated within MDB_DB_MAX, the
 * FIFO never holds more than MDB_DBTRACK_MAX, answers never outrun
 * commands, and "unsure" is set whenever a change is queued. For a
 * COM_QUERY the classifier calls a single USE, the tracker must have
 * queued it (its cheap "use" scan may say yes too often, never too
 * rarely).
 */
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>

#include "mdb_dbtrack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const struct mdb_dbtrack *t, struct mdb_db_verdict v)
{
    if (v.db != NULL && strnlen(v.db, MDB_DB_MAX) == MDB_DB_MAX) {
        abort();
    }
    if (t->len > MDB_DBTRACK_MAX || t->answered > t->sent ||
        (t->len > 0 && !v.unsure)) {
        abort();
    }
}

static void
one_command(struct mdb_dbtrack *t, uint8_t cmd, const uint8_t *arg,
            size_t n)
{
    unsigned char *p = malloc(n + 1);
    struct sl_buf *buf;
    struct sl_qc_result qc;
    struct mdb_db_verdict v;
    uint64_t sent = t->sent;

    if (p == NULL) {
        return;
    }
    p[0] = cmd;
    memcpy(p + 1, arg, n);
    buf = sl_mdb_make_packet(0, p, n + 1);
    free(p);
    if (buf == NULL) {
        return;
    }
    v = mdb_dbtrack_command(t, buf);
    check(t, v);
    if (cmd == SL_COM_QUERY && t->sent == sent + 1 &&
        sl_qc_classify_buf(buf, &qc) && qc.op == SL_QC_OP_USE &&
        !(qc.type & SL_QC_MULTI_STMT) && !v.unsure) {
        abort();   /* a USE the tracker did not see */
    }
    sl_buf_free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mdb_dbtrack t = {0};
    size_t i = 0;

    while (i < size) {
        uint8_t op = data[i++];
        size_t n = i < size ? data[i++] : 0;

        n = n < size - i ? n : size - i;
        switch (op % 4) {
        case 0:   /* COM_QUERY with text */
        case 1:   /* any command byte (the first argument byte) */
            if (op % 4 == 0) {
                one_command(&t, SL_COM_QUERY, data + i, n);
            } else if (n > 0) {
                one_command(&t, data[i], data + i + 1, n - 1);
            }
            i += n;
            break;
        case 2:
            check(&t, mdb_dbtrack_answered(&t, (op & 4) != 0));
            break;
        default: {
            char db[MDB_DB_MAX];
            size_t k = n < sizeof(db) - 1 ? n : sizeof(db) - 1;

            memcpy(db, data + i, k);
            db[k] = '\0';
            i += n;
            check(&t, mdb_dbtrack_change_user(&t, db));
            break;
        }
        }
    }
    mdb_dbtrack_free(&t);
    return 0;
}
