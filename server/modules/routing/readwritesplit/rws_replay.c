/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transaction_replay's decisions, kept pure (no session, no I/O) so that
 * test/unit/test_rwsplit_replay.c compiles this file in directly: whether
 * another attempt is allowed (transaction_replay_timeout,
 * transaction_replay_attempts), which errors count as a deadlock
 * (transaction_replay_retry_on_deadlock), which answers go into the
 * checksum (transaction_replay_checksum) and which statement is a COMMIT
 * (transaction_replay_safe_commit).
 *
 * Context: any thread; no state.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>

#include "rws.h"

bool
rws_replay_allowed(const struct rws_config *c, unsigned attempts,
                   uint64_t started_ms, uint64_t now_ms)
{
    if (c->trx_replay_timeout_ms > 0) {
        /* MaxScale: when set, the timeout alone limits the replay */
        return attempts == 0 || now_ms < started_ms ||
               now_ms - started_ms < c->trx_replay_timeout_ms;
    }
    return attempts < c->trx_replay_attempts;
}

bool
rws_deadlock_error(uint16_t code)
{
    return code == 1213;
}

bool
rws_cks_counts(enum rws_checksum m, bool ok_only, bool uses_lii)
{
    switch (m) {
    case RWS_CKS_FULL:
        return true;
    case RWS_CKS_RESULT_ONLY:
        return !ok_only;
    case RWS_CKS_NO_INSERT_ID:
        return !ok_only && !uses_lii;
    }
    return true;
}

bool
rws_uses_last_insert_id(const struct sl_buf *buf)
{
    /* "last_insert_id" has no prefix that is also a suffix: a mismatch
     * can restart the match at the current byte. */
    static const char pat[] = "last_insert_id";
    size_t skip = 5;   /* packet header and command byte */
    size_t k = 0;

    for (const struct sl_seg *s = buf != NULL ? buf->head : NULL; s != NULL;
         s = s->next) {
        for (const unsigned char *p = s->start; p < s->end; p++) {
            unsigned char c = *p;

            if (skip > 0) {
                skip--;
                continue;
            }
            if (c >= 'A' && c <= 'Z') {
                c = (unsigned char)(c - 'A' + 'a');
            }
            if (c != (unsigned char)pat[k]) {
                k = 0;
            }
            if (c == (unsigned char)pat[k] && ++k == sizeof(pat) - 1) {
                return true;
            }
        }
    }
    return false;
}

bool
rws_is_commit(const struct sl_buf *buf)
{
    unsigned char q[16];
    size_t n = buf != NULL ? sl_buf_copy_out(buf, 4, sizeof(q) - 1, q) : 0;
    size_t i = 1;
    unsigned char next;

    if (n < 7 || q[0] != SL_COM_QUERY) {
        return false;
    }
    while (i < n && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' ||
                     q[i] == '\r')) {
        i++;
    }
    if (n - i < 6 || strncasecmp((const char *)q + i, "COMMIT", 6) != 0) {
        return false;
    }
    if (i + 6 == n) {
        return true;
    }
    next = q[i + 6];   /* COMMITTED, COMMIT_LOG: another word */
    return !((next | 0x20) >= 'a' && (next | 0x20) <= 'z') &&
           !(next >= '0' && next <= '9') && next != '_' && next != '$';
}

/* Skip spaces from q[i]; the index of the next other byte. */
static size_t
skip_space(const unsigned char *q, size_t i, size_t n)
{
    while (i < n && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' ||
                     q[i] == '\r')) {
        i++;
    }
    return i;
}

/* q[i..] starts with the word w (case-insensitive, whole word): the index
 * past it, else 0. */
static size_t
word_at(const unsigned char *q, size_t i, size_t n, const char *w)
{
    size_t k = strlen(w);

    if (n - i < k || strncasecmp((const char *)q + i, w, k) != 0) {
        return 0;
    }
    if (i + k < n && ((q[i + k] | 0x20) >= 'a' && (q[i + k] | 0x20) <= 'z')) {
        return 0;
    }
    return i + k;
}

int
rws_plain_begin(const struct sl_buf *buf)
{
    unsigned char q[48];
    size_t n = buf != NULL ? sl_buf_copy_out(buf, 4, sizeof(q), q) : 0;
    size_t i, j;
    int kind = RWS_BEGIN_PLAIN;

    if (n < 2 || n == sizeof(q) || q[0] != SL_COM_QUERY) {
        return RWS_BEGIN_OTHER;
    }
    i = skip_space(q, 1, n);
    if ((j = word_at(q, i, n, "BEGIN")) != 0) {
        i = skip_space(q, j, n);
        if ((j = word_at(q, i, n, "WORK")) != 0) {
            i = skip_space(q, j, n);
        }
    } else if ((j = word_at(q, i, n, "START")) != 0 &&
               (j = word_at(q, skip_space(q, j, n), n, "TRANSACTION")) != 0) {
        i = skip_space(q, j, n);
        if ((j = word_at(q, i, n, "READ")) != 0 &&
            (j = word_at(q, skip_space(q, j, n), n, "WRITE")) != 0) {
            kind = RWS_BEGIN_READ_WRITE;
            i = skip_space(q, j, n);
        }
    } else {
        return RWS_BEGIN_OTHER;
    }
    if (i < n && q[i] == ';') {
        i = skip_space(q, i + 1, n);
    }
    return i == n ? kind : RWS_BEGIN_OTHER;
}
