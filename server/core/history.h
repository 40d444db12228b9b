/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A session's diagnostics history (history.c): its last statements
 * (retain_last_statements) and its last log messages (session_trace), and
 * their dump at close (dump_last_statements; the trace on an error close).
 * Both are NULL in a session when off, so the hot path pays one predictable
 * branch per hook. Worker-owned like the session (the shared model: under
 * the session's lock); the REST reader builds its JSON on the owning
 * worker (dcb.c session_info).
 */
#ifndef SLUICE_CORE_HISTORY_H
#define SLUICE_CORE_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

struct sl_session;
struct sl_backend;
struct sl_buf;
struct sl_reply;
struct sl_service;
struct sl_global;
struct json_t;

/* Longest statement text kept per entry (longer ones are cut). */
#define SL_HISTORY_TEXT_MAX 4096
/* Servers remembered per statement (one per backend that answered it). */
#define SL_HISTORY_RESP_MAX 4
/* Longest session trace line kept. */
#define SL_TRACE_LINE_MAX 512
/* Upper bound of retain_last_statements and session_trace. */
#define SL_HISTORY_MAX 10000

enum sl_dump_statements {
    SL_DUMP_NEVER = 0,
    SL_DUMP_ON_CLOSE = 1,
    SL_DUMP_ON_ERROR = 2,
};

struct sl_ses_history;

/* A session's session_trace ring: written by log.c (trace_record) for
 * every line logged on behalf of the session, read by history.c. */
struct sl_ses_trace {
    uint32_t n;
    uint64_t next;                  /* lines recorded so far */
    char (*line)[SL_TRACE_LINE_MAX];
};

/* Main thread, before the workers start: the global parameters. */
void sl__history_configure(const struct sl_global *g);

/* At session creation: allocate what the configuration asks for (service
 * retain_last_statements, else the global one; session_trace). A failed
 * allocation leaves that part off (logged). */
void sl__history_session_init(struct sl_session *ses);
void sl__history_session_free(struct sl_session *ses);

/* Hooks (session.c), each behind `if (SL_UNLIKELY(ses->history))`. */
void sl__history_query(struct sl_session *ses, const struct sl_buf *buf);
void sl__history_route_end(struct sl_session *ses);
void sl__history_backend_write(struct sl_backend *b);
void sl__history_backend_reply(struct sl_backend *b);
void sl__history_client_reply(struct sl_session *ses);

/* The session is closing; error: it did not end by the client's own
 * close (COM_QUIT or disconnect). Logs what dump_last_statements says and,
 * on an error close, the session trace. */
void sl__history_session_close(struct sl_session *ses, bool error);

/* REST (on the owning worker): MaxScale's `queries` and `log` arrays, new
 * references (empty arrays when off). */
struct json_t *sl__history_queries_json(const struct sl_session *ses);
struct json_t *sl__history_log_json(const struct sl_session *ses);

#endif
