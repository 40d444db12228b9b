/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transaction_replay's mismatch diagnosis, at debug level only: while
 * `log_debug` is on, the answers of a logged transaction and of its
 * replay are kept (clones sharing the blocks, no copy), and a replayed
 * statement whose checksum differs is described in the log — which
 * packet of the answer differs first and how (OK: affected rows, insert
 * id, status, warnings, session-state info; an error; column count,
 * column definitions, rows, the final EOF/OK), with both packets in hex.
 * Without `log_debug` nothing is kept and nothing here runs.
 *
 * Context: worker-owned (the session's).
 */
#define SL_LOG_TAG "readwritesplit"

#include <stdio.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/session.h>

#include "rws.h"

void
rws_diag_keep(struct sl_buf **acc, const struct sl_buf *buf, bool first)
{
    if (!sl_log_enabled(SL_LOG_DEBUG)) {
        return;
    }
    if (first || *acc == NULL) {
        sl_buf_free(*acc);
        *acc = sl_buf_new();
    }
    if (*acc != NULL && sl_buf_clone(buf, *acc) != 0) {
        sl_buf_free(*acc);
        *acc = NULL;
    }
}

/* Packet k of an answer: its payload offset and length; false past the
 * end. */
static bool
packet_at(const struct sl_buf *b, unsigned k, size_t *off, size_t *len)
{
    size_t pos = 0, total = sl_buf_len(b);
    unsigned char h[4];

    for (unsigned j = 0;; j++) {
        if (pos + 4 > total || sl_buf_copy_out(b, pos, 4, h) != 4) {
            return false;
        }
        *len = (size_t)h[0] | (size_t)h[1] << 8 | (size_t)h[2] << 16;
        *off = pos + 4;
        if (j == k) {
            return true;
        }
        pos += 4 + *len;
    }
}

static void
hex(char *out, size_t cap, const unsigned char *p, size_t n)
{
    size_t w = 0;

    for (size_t i = 0; i < n && w + 3 < cap; i++) {
        w += (size_t)snprintf(out + w, cap - w, "%02x", p[i]);
    }
    out[w] = '\0';
}

/* What packet k of an answer is, with an OK's fields decoded. */
static void
describe(char *out, size_t cap, const unsigned char *p, size_t n,
         unsigned k)
{
    uint64_t aff = 0, iid = 0;
    size_t a, b;

    if (n == 0) {
        snprintf(out, cap, "empty packet");
    } else if (p[0] == 0xff && n >= 3) {
        snprintf(out, cap, "ERR %u", (unsigned)(p[1] | p[2] << 8));
    } else if ((p[0] == 0x00 && k == 0) || (p[0] == 0xfe && n < 0xffffff)) {
        if (p[0] == 0xfe && n < 7) {
            snprintf(out, cap, "EOF warnings %u status 0x%04x",
                     n >= 3 ? (unsigned)(p[1] | p[2] << 8) : 0,
                     n >= 5 ? (unsigned)(p[3] | p[4] << 8) : 0);
            return;
        }
        a = sl_mdb_get_lenenc(p + 1, n - 1, &aff);
        b = a ? sl_mdb_get_lenenc(p + 1 + a, n - 1 - a, &iid) : 0;
        if (a == 0 || b == 0 || 1 + a + b + 4 > n) {
            snprintf(out, cap, "%s (%zu bytes)",
                     k == 0 ? "OK?" : "row or terminator", n);
            return;
        }
        p += 1 + a + b;
        snprintf(out, cap,
                 "%s affected %llu insert_id %llu status 0x%04x warnings %u "
                 "info+state %zu bytes",
                 k == 0 ? "OK" : "terminator OK", (unsigned long long)aff,
                 (unsigned long long)iid, (unsigned)(p[0] | p[1] << 8),
                 (unsigned)(p[2] | p[3] << 8), n - (1 + a + b + 4));
    } else if (k == 0) {
        snprintf(out, cap, "result set, first byte %u (column count)", p[0]);
    } else {
        snprintf(out, cap, "column definition or row (%zu bytes)", n);
    }
}

/* Log one side's packet k. */
static void
log_packet(struct sl_session *ses, const char *side,
           const struct sl_buf *b, unsigned k)
{
    unsigned char p[48];
    char h[2 * sizeof(p) + 1], d[160];
    size_t off, len, n;

    if (b == NULL || !packet_at(b, k, &off, &len)) {
        sl_log_ses_debug(ses, "  %s: no packet %u", side, k);
        return;
    }
    n = sl_buf_copy_out(b, off, len < sizeof(p) ? len : sizeof(p), p);
    hex(h, sizeof(h), p, n);
    describe(d, sizeof(d), p, n < len ? n : len, k);
    sl_log_ses_debug(ses, "  %s packet %u: %s: %s%s", side, k, d, h, len > n ? "..." : "");
}

static unsigned
packet_count(const struct sl_buf *b)
{
    size_t off, len;
    unsigned k = 0;

    while (b != NULL && packet_at(b, k, &off, &len)) {
        k++;
    }
    return k;
}

void
rws_diag_mismatch(struct rws_session *rs, size_t i)
{
    const struct sl_buf *o, *r = rs->replay_answer;
    unsigned char q[64], a[256], c[256];
    char qs[sizeof(q) + 1];
    size_t qn, oo, ol, ro, rl;
    unsigned k;

    if (!sl_log_enabled(SL_LOG_DEBUG) || i >= rs->ntrx) {
        return;
    }
    o = rs->trx_log[i].answer;
    qn = sl_buf_copy_out(rs->trx_log[i].buf, 4, sizeof(q), q);
    for (size_t j = 0; j < qn; j++) {
        qs[j] = q[j] >= 0x20 && q[j] < 0x7f ? (char)q[j] : '.';
    }
    qs[qn] = '\0';
    sl_log_ses_debug(rs->ses, "Replay mismatch at statement %zu of %zu (command 0x%02x: %s): original %u packets %zu bytes, replay %u packets %zu bytes", i, rs->ntrx, qn ? q[0] : 0, qn > 1 ? qs + 1 : "", packet_count(o), o ? sl_buf_len(o) : 0, packet_count(r), r ? sl_buf_len(r) : 0);
    for (k = 0;; k++) {
        bool ho = o != NULL && packet_at(o, k, &oo, &ol);
        bool hr = r != NULL && packet_at(r, k, &ro, &rl);
        size_t n;

        if (!ho && !hr) {
            sl_log_ses_debug(rs->ses, "  the kept answers are equal (checksum of a part not kept?)");
            return;
        }
        if (ho != hr || ol != rl) {
            break;
        }
        for (size_t at = 0; at < ol; at += n) {
            n = ol - at < sizeof(a) ? ol - at : sizeof(a);
            sl_buf_copy_out(o, oo + at, n, a);
            sl_buf_copy_out(r, ro + at, n, c);
            if (memcmp(a, c, n) != 0) {
                goto differ;
            }
        }
    }
differ:
    log_packet(rs->ses, "original", o, k);
    log_packet(rs->ses, "replay", r, k);
}
