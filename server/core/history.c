/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Session diagnostics (MaxScale's): retain_last_statements keeps each
 * session's last N statements with the time they arrived, the time their
 * answer reached the client and the servers that answered them;
 * session_trace keeps each session's last N log lines; dump_last_statements
 * logs the statements when the session closes (on_close) or only when it
 * closes because of an error (on_error). An error close also logs the
 * session trace.
 *
 * Cost: with both off a session has NULL history and trace pointers and
 * every hook is one predictable branch in session.c. When on, each ring is
 * allocated once at session start; a statement's text buffer is reused by
 * the entry that next takes its slot (grown to at most
 * SL_HISTORY_TEXT_MAX), so a steady session allocates nothing. No locks:
 * the rings belong to the session's worker (in event_model=shared, to the
 * worker holding the session's lock); the REST reader builds the JSON on
 * that worker (dcb.c session_info).
 *
 * Context: worker-owned, like the session.
 */
#define SL_LOG_TAG "session"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/server.h>

#include "dcb_int.h"
#include "history.h"

struct hist_resp {
    const struct sl_server *srv;    /* held by the session's backend */
    uint64_t duration_us;
};

struct hist_entry {
    uint64_t seq;                   /* 0: empty */
    uint8_t cmd;
    bool answered;                  /* the client gets an answer */
    bool cut;                       /* text longer than SL_HISTORY_TEXT_MAX */
    uint32_t len;
    uint32_t cap;
    char *text;                     /* reused by the slot's next entry */
    uint64_t received_us;           /* wall clock */
    uint64_t completed_us;          /* 0: not answered yet */
    uint8_t nresp;
    struct hist_resp resp[SL_HISTORY_RESP_MAX];
};

struct sl_ses_history {
    uint32_t n;
    bool routing;                   /* inside sl_session_route_query */
    uint64_t next_seq;              /* the next entry's (first: 1) */
    uint64_t done_seq;              /* every seq <= this one is answered */
    struct hist_entry e[];
};


static struct {
    uint32_t retain;                /* global retain_last_statements */
    uint32_t trace;                 /* session_trace */
    enum sl_dump_statements dump;
} cfg;

void
sl__history_configure(const struct sl_global *g)
{
    cfg.retain = g->retain_last_statements;
    cfg.trace = g->session_trace;
    cfg.dump = g->dump_last_statements;
    atomic_store(&sl_log_session_trace, g->session_trace > 0);
}

static uint64_t
wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void
sl__history_session_init(struct sl_session *ses)
{
    uint32_t n = cfg.retain;

    if (ses->client == NULL || ses->service == NULL) {
        return;                     /* internal sessions keep nothing */
    }
    if (ses->service->retain_last_statements >= 0) {
        n = (uint32_t)ses->service->retain_last_statements;
    }
    if (n > 0) {
        ses->history = calloc(1, sizeof(*ses->history) +
                                     n * sizeof(ses->history->e[0]));
        if (ses->history == NULL) {
            sl_log_ses_error(ses, "no memory for %u retained statements",
                             n);
        } else {
            ses->history->n = n;
            ses->history->next_seq = 1;
        }
    }
    if (cfg.trace > 0) {
        struct sl_ses_trace *t = calloc(1, sizeof(*t));

        if (t != NULL &&
            (t->line = calloc(cfg.trace, sizeof(t->line[0]))) != NULL) {
            t->n = cfg.trace;
            ses->trace = t;
        } else {
            free(t);
            sl_log_ses_error(ses, "no memory for a session trace of %u "
                             "lines", cfg.trace);
        }
    }
}

void
sl__history_session_free(struct sl_session *ses)
{
    if (ses->history != NULL) {
        for (uint32_t i = 0; i < ses->history->n; i++) {
            free(ses->history->e[i].text);
        }
        free(ses->history);
        ses->history = NULL;
    }
    if (ses->trace != NULL) {
        free(ses->trace->line);
        free(ses->trace);
        ses->trace = NULL;
    }
}

static struct hist_entry *
slot(struct sl_ses_history *h, uint64_t seq)
{
    struct hist_entry *e = &h->e[(seq - 1) % h->n];

    return e->seq == seq ? e : NULL;
}

static bool
has_text(uint8_t cmd)
{
    return cmd == SL_COM_QUERY || cmd == SL_COM_STMT_PREPARE;
}

void
sl__history_query(struct sl_session *ses, const struct sl_buf *buf)
{
    struct sl_ses_history *h = ses->history;
    unsigned char hdr[SL_MDB_HDR_LEN + 1];
    struct hist_entry *e;
    size_t plen, want;

    h->routing = true;
    if (ses->stats.load_data ||
        sl_buf_copy_out(buf, 0, sizeof(hdr), hdr) != sizeof(hdr) ||
        hdr[SL_MDB_HDR_LEN] == SL_COM_QUIT) {
        return;                     /* LOAD DATA's file, or not a command */
    }
    e = &h->e[(h->next_seq - 1) % h->n];
    e->seq = h->next_seq++;
    e->cmd = hdr[SL_MDB_HDR_LEN];
    e->answered = e->cmd != SL_COM_STMT_CLOSE &&
                  e->cmd != SL_COM_STMT_SEND_LONG_DATA;
    e->received_us = wall_us();
    e->completed_us = e->answered ? 0 : e->received_us;
    e->nresp = 0;
    e->len = 0;
    e->cut = false;
    if (!has_text(e->cmd)) {
        return;
    }
    plen = hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16;
    want = plen > 0 ? plen - 1 : 0;
    e->cut = want > SL_HISTORY_TEXT_MAX;
    if (e->cut) {
        want = SL_HISTORY_TEXT_MAX;
    }
    if (want > e->cap) {
        uint32_t cap = (uint32_t)((want + 255) & ~(size_t)255);
        char *t = realloc(e->text, cap);

        if (t == NULL) {
            return;                 /* kept without its text */
        }
        e->text = t;
        e->cap = cap;
    }
    e->len = (uint32_t)sl_buf_copy_out(buf, SL_MDB_HDR_LEN + 1, want,
                                       e->text);
}

void
sl__history_route_end(struct sl_session *ses)
{
    ses->history->routing = false;
}

/* The oldest statement not answered yet (0: none kept). */
static uint64_t
oldest_pending(struct sl_ses_history *h)
{
    uint64_t first = h->next_seq > h->n ? h->next_seq - h->n : 1;
    uint64_t s = h->done_seq + 1 > first ? h->done_seq + 1 : first;

    for (; s < h->next_seq; s++) {
        struct hist_entry *e = slot(h, s);

        if (e != NULL && e->completed_us == 0) {
            return s;
        }
    }
    return 0;
}

void
sl__history_backend_write(struct sl_backend *b)
{
    struct sl_ses_history *h = b->ses->history;

    /* while routing, the statement being routed; later (a retry, a held
     * write) the oldest one still waiting */
    uint64_t seq = h->routing && h->next_seq > 1 ? h->next_seq - 1
                                                 : oldest_pending(h);

    if (seq != b->hist_seq) {   /* a second write for it keeps the start */
        b->hist_seq = seq;
        b->hist_t0_us = wall_us();
    }
}

void
sl__history_backend_reply(struct sl_backend *b)
{
    struct sl_ses_history *h = b->ses->history;
    struct hist_entry *e;

    if (b->hist_seq == 0) {
        return;
    }
    e = slot(h, b->hist_seq);
    b->hist_seq = 0;
    if (e == NULL || b->server == NULL) {
        return;
    }
    /* one response per server: a router's follow-up command on the same
     * connection (readwritesplit's GTID read after a write) extends it */
    for (uint8_t i = 0; i < e->nresp; i++) {
        if (e->resp[i].srv == b->server) {
            e->resp[i].duration_us = wall_us() - b->hist_t0_us;
            return;
        }
    }
    if (e->nresp < SL_HISTORY_RESP_MAX) {
        e->resp[e->nresp].srv = b->server;
        e->resp[e->nresp].duration_us = wall_us() - b->hist_t0_us;
        e->nresp++;
    }
}

void
sl__history_client_reply(struct sl_session *ses)
{
    struct sl_ses_history *h = ses->history;
    uint64_t s = oldest_pending(h);
    struct hist_entry *e;

    if (s != 0 && (e = slot(h, s)) != NULL) {
        e->completed_us = wall_us();
    }
    while (h->done_seq + 1 < h->next_seq) {
        e = slot(h, h->done_seq + 1);
        if (e != NULL && e->completed_us == 0) {
            break;
        }
        h->done_seq++;
    }
}

/* ---- readers ---- */

static const char *
iso_time(uint64_t us, char *buf, size_t len)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    size_t n;

    gmtime_r(&t, &tm);
    n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03uZ", (unsigned)(us / 1000 % 1000));
    return buf;
}

static const char *
command_name(uint8_t cmd)
{
    static const char *const names[] = {
        [SL_COM_SLEEP] = "COM_SLEEP", [SL_COM_QUIT] = "COM_QUIT",
        [SL_COM_INIT_DB] = "COM_INIT_DB", [SL_COM_QUERY] = "COM_QUERY",
        [SL_COM_FIELD_LIST] = "COM_FIELD_LIST",
        [SL_COM_CREATE_DB] = "COM_CREATE_DB",
        [SL_COM_DROP_DB] = "COM_DROP_DB", [SL_COM_REFRESH] = "COM_REFRESH",
        [SL_COM_SHUTDOWN] = "COM_SHUTDOWN",
        [SL_COM_STATISTICS] = "COM_STATISTICS",
        [SL_COM_PROCESS_INFO] = "COM_PROCESS_INFO",
        [SL_COM_CONNECT] = "COM_CONNECT",
        [SL_COM_PROCESS_KILL] = "COM_PROCESS_KILL",
        [SL_COM_DEBUG] = "COM_DEBUG", [SL_COM_PING] = "COM_PING",
        [SL_COM_TIME] = "COM_TIME",
        [SL_COM_DELAYED_INSERT] = "COM_DELAYED_INSERT",
        [SL_COM_CHANGE_USER] = "COM_CHANGE_USER",
        [SL_COM_BINLOG_DUMP] = "COM_BINLOG_DUMP",
        [SL_COM_TABLE_DUMP] = "COM_TABLE_DUMP",
        [SL_COM_CONNECT_OUT] = "COM_CONNECT_OUT",
        [SL_COM_REGISTER_SLAVE] = "COM_REGISTER_SLAVE",
        [SL_COM_STMT_PREPARE] = "COM_STMT_PREPARE",
        [SL_COM_STMT_EXECUTE] = "COM_STMT_EXECUTE",
        [SL_COM_STMT_SEND_LONG_DATA] = "COM_STMT_SEND_LONG_DATA",
        [SL_COM_STMT_CLOSE] = "COM_STMT_CLOSE",
        [SL_COM_STMT_RESET] = "COM_STMT_RESET",
        [SL_COM_SET_OPTION] = "COM_SET_OPTION",
        [SL_COM_STMT_FETCH] = "COM_STMT_FETCH",
        [SL_COM_DAEMON] = "COM_DAEMON",
        [SL_COM_BINLOG_DUMP_GTID] = "COM_BINLOG_DUMP_GTID",
        [SL_COM_RESET_CONNECTION] = "COM_RESET_CONNECTION",
    };

    if (cmd == SL_COM_STMT_BULK_EXECUTE) {
        return "COM_STMT_BULK_EXECUTE";
    }
    return cmd < SL_ARRAY_LEN(names) && names[cmd] ? names[cmd]
                                                    : "COM_UNKNOWN";
}

/* The entry's statement as text, passwords masked, into out. */
static const char *
statement(const struct hist_entry *e, char *out, size_t outlen)
{
    char raw[SL_HISTORY_TEXT_MAX + 1];

    if (e->len == 0 || e->text == NULL) {
        out[0] = '\0';
        return out;
    }
    memcpy(raw, e->text, e->len);
    raw[e->len] = '\0';        /* a NUL inside ends the text shown */
    return sl_log_mask_passwords(raw, NULL, out, outlen);
}

json_t *
sl__history_queries_json(const struct sl_session *ses)
{
    struct sl_ses_history *h = ses->history;
    json_t *arr = json_array();
    char text[SL_HISTORY_TEXT_MAX + 1];
    char t1[48], t2[48];

    if (h == NULL || arr == NULL) {
        return arr;
    }
    for (uint64_t s = h->next_seq > h->n ? h->next_seq - h->n : 1;
         s < h->next_seq; s++) {
        const struct hist_entry *e = slot(h, s);
        json_t *resp, *o;

        if (e == NULL) {
            continue;
        }
        resp = json_array();
        for (uint8_t i = 0; i < e->nresp; i++) {
            json_array_append_new(resp, json_pack(
                "{s:s, s:f}", "server", sl_server_name(e->resp[i].srv),
                "duration", (double)e->resp[i].duration_us / 1000.0));
        }
        o = json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}",
                      "command", command_name(e->cmd),
                      "statement", statement(e, text, sizeof(text)),
                      "statement_truncated", e->cut,
                      "received", iso_time(e->received_us, t1, sizeof(t1)),
                      "completed", e->completed_us
                          ? json_string(iso_time(e->completed_us, t2,
                                                 sizeof(t2)))
                          : json_null(),
                      "responses", resp);
        json_array_append_new(arr, o);
    }
    return arr;
}

json_t *
sl__history_log_json(const struct sl_session *ses)
{
    const struct sl_ses_trace *t = ses->trace;
    json_t *arr = json_array();

    if (t == NULL || arr == NULL) {
        return arr;
    }
    for (uint64_t i = t->next > t->n ? t->next - t->n : 0; i < t->next;
         i++) {
        json_array_append_new(arr, json_string(t->line[i % t->n]));
    }
    return arr;
}

/* ---- dumps at close ---- */

static void
dump_statements(struct sl_session *ses)
{
    struct sl_ses_history *h = ses->history;
    char text[SL_HISTORY_TEXT_MAX + 1];
    uint64_t first = h->next_seq > h->n ? h->next_seq - h->n : 1;
    unsigned k = 0, total = (unsigned)(h->next_seq - first);

    sl_log_session_message(SL_LOG_NOTICE, SL_LOG_TAG, ses,
                           "Last %u statements of the session:", total);
    for (uint64_t s = first; s < h->next_seq; s++) {
        const struct hist_entry *e = slot(h, s);

        if (e == NULL) {
            continue;
        }
        k++;
        sl_log_session_message(SL_LOG_NOTICE, SL_LOG_TAG, ses,
                               "Statement %u/%u: %s%s%s", k, total,
                               e->len ? "" : command_name(e->cmd),
                               statement(e, text, sizeof(text)),
                               e->cut ? "..." : "");
    }
}

static void
dump_trace(struct sl_session *ses)
{
    struct sl_ses_trace *t = ses->trace;
    uint64_t first = t->next > t->n ? t->next - t->n : 0;
    uint64_t end = t->next;
    char (*copy)[SL_TRACE_LINE_MAX];
    size_t n = (size_t)(end - first);

    if (n == 0) {
        return;
    }
    /* the dump's own lines go to the trace too: log a copy */
    if ((copy = malloc(n * sizeof(copy[0]))) == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(copy[i], t->line[(first + i) % t->n], sizeof(copy[0]));
    }
    sl_log_session_message(SL_LOG_NOTICE, SL_LOG_TAG, ses,
                           "Session trace (%zu lines):", n);
    for (size_t i = 0; i < n; i++) {
        sl_log_session_message(SL_LOG_NOTICE, SL_LOG_TAG, ses,
                               "Trace %zu/%zu: %s", i + 1, n, copy[i]);
    }
    free(copy);
}

void
sl__history_session_close(struct sl_session *ses, bool error)
{
    if (ses->trace != NULL && error) {
        dump_trace(ses);
    }
    if (ses->history != NULL &&
        (cfg.dump == SL_DUMP_ON_CLOSE ||
         (cfg.dump == SL_DUMP_ON_ERROR && error))) {
        dump_statements(ses);
    }
}
