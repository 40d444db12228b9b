/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Filter modules: the API third parties write against.
 *
 * A filter is one step in a service's chain (filters=a|b|c, applied in
 * the order written). It sees each command on the way down and each piece
 * of an answer on the way up:
 *
 *   client -> a.route_query -> b.route_query -> c.route_query -> router
 *   client <- a.client_reply <- b.client_reply <- c.client_reply <- router
 *
 * In route_query a filter owns the command it is given (one complete
 * command, all its packets, header included) and does exactly one of:
 *
 *   pass it on     return sl_filter_route_next(fs, buf);
 *   rewrite it     build a new command (sl_mdb_make_query()), free buf,
 *                  return sl_filter_route_next(fs, newbuf);
 *   answer it      free buf, build a complete answer (sl_mdb_make_err(),
 *                  sl_mdb_make_ok(), sl_mdb_make_resultset(); sequence
 *                  numbers from 1) and return sl_filter_reply_next(fs,
 *                  answer, &reply) with reply->complete set. The answer
 *                  goes to the filters before this one and the client;
 *                  the router and the servers never see the command.
 *   hint it        sl_session_set_hint(ses, &hint) (session.h), then pass
 *                  it on: a hint-aware router (readwritesplit) routes
 *                  this one command to the master, a slave or a named
 *                  server.
 *   drop it        free buf and return SL_OK. The client then waits for
 *                  an answer that never comes: only for commands that have
 *                  none (COM_STMT_CLOSE) or when closing the session.
 *
 * In client_reply a filter owns the piece of the answer it is given
 * (whole packets) and normally passes it on with sl_filter_reply_next().
 * `reply` is the reply tracker's view (reply.h): the command answered,
 * whether this is the last piece (complete), OK/ERR with the error code,
 * rows so far. A filter may keep a copy (sl_buf_clone() shares the bytes)
 * to replay later, as the cache does. Answers arrive in the order the
 * commands were sent.
 *
 * Returning SL_ERROR from either callback closes the session (send an
 * error to the client first with sl_session_send_error() if it should
 * know why). A filter may also close it with sl_session_close(); it is
 * safe from inside a callback and later callbacks of this session only
 * free buffers.
 *
 * Lifetime:
 *   create_instance   once per [filter] section, main thread, before the
 *                     workers start; the parameters were already checked
 *                     against the module's sl_param_spec table (unknown
 *                     names, bad values and invalid regexes fail the start
 *                     with FILE:LINE); return NULL to refuse (log why).
 *   new_session       per client session, on its worker, while the
 *                     session is created: the user name and database are
 *                     not known yet, read them at the first route_query.
 *   free_session      when the session is freed (after the client and
 *                     every backend connection closed).
 *   destroy_instance  at shutdown, main thread.
 *   diagnostics       admin thread: read only atomics or take a lock.
 *
 * Threads: every session callback runs on the session's worker
 * (worker-owned): session state needs no lock. The instance is shared by
 * all workers: treat it as read-only after create_instance, or protect
 * what changes (counters: atomics; shared stores: a mutex).
 *
 * Files a filter keeps open should be reopened when the log is rotated:
 * compare sl_log_rotation_count() (log.h) with the value seen at open.
 *
 * Versioning: this table is part of the module ABI (module.h). A callback
 * whose meaning changes bumps SL_MODULE_ABI_MAJOR (old modules are
 * refused); new callbacks are appended and bump the minor. The core never
 * calls a callback past ops->size, so a module built against older
 * headers keeps working. Unused callbacks may be NULL: a NULL route_query
 * or client_reply passes everything through.
 */
#ifndef SLUICE_FILTER_H
#define SLUICE_FILTER_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>
#include <sluice/reply.h>

struct sl_session;
struct sl_filter_session;   /* the core's per-session chain link */
struct sl_params;
struct sl_filter_def;

struct sl_filter_ops {
    size_t size;   /* sizeof(struct sl_filter_ops) the module was built with */

    /* name: the [section]; p: its validated parameters (params.h). The
     * instance pointer returned is passed to the other callbacks. NULL on
     * error (log why first): Sluice refuses to start. Main thread. */
    void *(*create_instance)(const char *name, const struct sl_params *p);
    void (*destroy_instance)(void *instance);
    /* Per-session state; keep fs to call sl_filter_*_next(). NULL refuses
     * the session (the client gets error 1105). Worker-owned. */
    void *(*new_session)(void *instance, struct sl_session *ses,
                         struct sl_filter_session *fs);
    void (*free_session)(void *fsession);
    /* One complete command; takes buf. SL_OK or SL_ERROR (closes the
     * session). NULL: pass through. */
    int (*route_query)(void *fsession, struct sl_buf *buf);
    /* A piece of an answer (whole packets); takes buf. SL_OK or SL_ERROR.
     * NULL: pass through. */
    int (*client_reply)(void *fsession, struct sl_buf *buf,
                        const struct sl_reply *reply);
    /* Instance diagnostics as a json_t * (jansson), or NULL. Admin
     * thread. */
    void *(*diagnostics)(void *instance);
};

/* Pass a command to the next filter or the router; takes buf. Returns
 * what they returned (SL_OK, or SL_ERROR when the session must close). If
 * the session is closing, frees buf and returns SL_ERROR. Worker-owned. */
SL_EXPORT int sl_filter_route_next(struct sl_filter_session *fs,
                                   struct sl_buf *buf);
/* Pass (a piece of) an answer to the previous filter or the client; takes
 * buf. Also how a filter answers a command itself, from route_query --
 * only when sl_session_answers_pending() is 1, or the answer would
 * overtake those of earlier, pipelined commands. SL_OK or SL_ERROR.
 * Worker-owned. */
SL_EXPORT int sl_filter_reply_next(struct sl_filter_session *fs,
                                   struct sl_buf *buf,
                                   const struct sl_reply *reply);
/* The session this chain link belongs to. */
SL_EXPORT struct sl_session *sl_filter_session_session(
    const struct sl_filter_session *fs);

#endif
