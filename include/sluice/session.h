/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sessions and backend connections.
 *
 * A session ties one client DCB to its filter sessions, its router session
 * and its backend connections. The client protocol creates it once the
 * client has authenticated. The path of a statement:
 *
 *   client protocol -> sl_session_route_query()
 *       -> filter 1 .. n route_query -> router route_query
 *       -> sl_backend_write() -> backend protocol -> server
 *
 * and of the answer:
 *
 *   backend protocol -> sl_backend_reply() -> router client_reply
 *       -> sl_session_reply() -> filter n .. 1 client_reply
 *       -> client protocol client_reply -> client DCB
 *
 * Session start: sl_session_create() calls the router's new_session, which
 * usually opens backends with sl_backend_connect(). The session is STARTING
 * until the first backend reports sl_backend_ready() (or at once if the
 * router opened none); then the client protocol's session_ready sends the
 * client its OK. A backend failure while STARTING that the router cannot
 * absorb sends the backend's error (e.g. 1049 Unknown database) to the
 * client and closes the session.
 *
 *   STARTING --first backend ready--> STARTED --close--> CLOSING -> freed
 *
 * Context: worker-owned. A session and its DCBs belong to one worker in the
 * pinned model; in the shared model the core serialises all processing of
 * one session's DCBs.
 */
#ifndef SLUICE_SESSION_H
#define SLUICE_SESSION_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>
#include <sluice/reply.h>
#include <sluice/worker.h>

struct sl_session;
struct sl_backend;
struct sl_dcb;
struct sl_service;
struct sl_server;

enum sl_session_state {
    SL_SESSION_STARTING,
    SL_SESSION_STARTED,
    SL_SESSION_CLOSING,
};

/*
 * Create a session for an authenticated client: sets up the filter
 * sessions and the router session. NULL when the router refuses (the error
 * has then been sent to the client) or on allocation failure. Worker-owned.
 */
SL_EXPORT struct sl_session *sl_session_create(struct sl_dcb *client);
SL_EXPORT uint64_t sl_session_id(const struct sl_session *ses);
SL_EXPORT enum sl_session_state sl_session_state(const struct sl_session *ses);
SL_EXPORT struct sl_dcb *sl_session_client(const struct sl_session *ses);
SL_EXPORT struct sl_service *sl_session_service(const struct sl_session *ses);
/* Authenticated user, client host and current default database. */
SL_EXPORT const char *sl_session_user(const struct sl_session *ses);
SL_EXPORT const char *sl_session_remote(const struct sl_session *ses);
SL_EXPORT const char *sl_session_db(const struct sl_session *ses);
SL_EXPORT void sl_session_set_user(struct sl_session *ses, const char *user);
SL_EXPORT void sl_session_set_db(struct sl_session *ses, const char *db);
/* Is the default database uncertain right now: a change of it is still
 * waiting for its answer (pipelined commands), or the server may have
 * changed it without Sluice being able to tell (a multi-statement with
 * USE)? sl_session_db() is then the last one known. Set by the client
 * protocol; a filter keying anything on the database (the cache) must
 * not use it while true. Worker-owned. */
SL_EXPORT bool sl_session_db_unsure(const struct sl_session *ses);
SL_EXPORT void sl_session_set_db_unsure(struct sl_session *ses, bool unsure);
/* Commands the client sent that still wait for (the end of) their
 * answers, the one being routed included: in route_query it is 1 unless
 * the client pipelined. A filter that answers a command itself (the
 * cache) must do so only when it is 1, or its answer would overtake
 * earlier ones. Set by the client protocol. Worker-owned. */
SL_EXPORT uint64_t sl_session_answers_pending(const struct sl_session *ses);
SL_EXPORT void sl_session_set_answers_pending(struct sl_session *ses,
                                              uint64_t n);
/* The capability flags the client negotiated (SL_CAP_*, see mariadb.h),
 * set by the client protocol when the session starts; 0 before. A filter
 * that answers with a result set needs SL_CAP_DEPRECATE_EOF from here. */
SL_EXPORT uint64_t sl_session_client_caps(const struct sl_session *ses);
SL_EXPORT void sl_session_set_client_caps(struct sl_session *ses,
                                          uint64_t caps);
/* The protocol module's per-session data (shared by its client and
 * backend sides, e.g. the SHA1 of the password for backend logins). The
 * protocol frees it in its client_free. */
SL_EXPORT void *sl_session_protocol_data(const struct sl_session *ses);
SL_EXPORT void sl_session_set_protocol_data(struct sl_session *ses, void *p);

/*
 * Routing hints for the next command routed in this session: a filter (or
 * the client protocol) attaches one before passing the command on; the
 * router takes it when it routes that command. A hint not taken by the
 * next route_query is dropped. NULL clears.
 */
struct sl_hint;
SL_EXPORT void sl_session_set_hint(struct sl_session *ses,
                                   const struct sl_hint *hint);
/* Copy the pending hint into *out and clear it; false if none. */
SL_EXPORT bool sl_session_take_hint(struct sl_session *ses,
                                    struct sl_hint *out);

/*
 * Internal sessions: a session on another service without a client
 * socket, e.g. for the tee filter's shadow traffic. It logs in to that
 * service's servers as the parent session's user (sharing the parent's
 * protocol data: user, database, password hash, capabilities), runs that
 * service's filters and router, and delivers every piece of every answer
 * to fn(arg, buf, reply), which takes buf. When the internal session
 * closes (by sl_session_close, a backend failure, or because its parent
 * closed: a parent always closes its internal sessions first), fn is
 * called once more with buf == NULL and reply == NULL; the pointer must
 * not be used after that. Commands are sent with sl_session_route_query()
 * and may be sent at once: the router queues them until its backends have
 * logged in.
 *
 * Returns NULL when the router refuses the session or on allocation
 * failure (fn is then never called). Worker-owned: the internal session
 * and its backends live on the caller's worker (pinned model). In the
 * shared event model its answers may be delivered on another worker than
 * the parent's current one, so fn must touch no parent state beyond
 * freeing the buffer (the tee filter only discards them).
 */
typedef void (*sl_session_reply_fn)(void *arg, struct sl_buf *buf,
                                    const struct sl_reply *reply);
SL_EXPORT struct sl_session *sl_session_create_internal(
    struct sl_session *parent, struct sl_service *svc, sl_session_reply_fn fn,
    void *arg);

/* Client protocol -> first filter or router. Takes buf: one complete
 * command (all its packets). Returns SL_OK, or SL_ERROR when the session
 * must close. */
SL_EXPORT int sl_session_route_query(struct sl_session *ses,
                                     struct sl_buf *buf);
/* Router -> last filter or client protocol. Takes buf. */
SL_EXPORT int sl_session_reply(struct sl_session *ses, struct sl_buf *buf,
                               const struct sl_reply *reply);
/* Send an error packet to the client (protocol-formatted), e.g. from a
 * router that cannot route. */
SL_EXPORT void sl_session_send_error(struct sl_session *ses, uint16_t code,
                                     const char *sqlstate, const char *msg);
/* Close the session: router session, filter sessions, backends, client. */
SL_EXPORT void sl_session_close(struct sl_session *ses, const char *reason);

/*
 * Backends: one connection from a session to a server.
 *
 *   CONNECTING -> AUTHENTICATING -> READY -> CLOSED
 *                      \-> FAILED -> CLOSED
 */
enum sl_backend_state {
    SL_BACKEND_CONNECTING,
    SL_BACKEND_AUTHENTICATING,
    SL_BACKEND_READY,
    SL_BACKEND_FAILED,
    SL_BACKEND_CLOSED,
};

/* Start a connection (non-blocking connect + protocol login) to srv for
 * the session. NULL on immediate failure (logged). Worker-owned. */
SL_EXPORT struct sl_backend *sl_backend_connect(struct sl_session *ses,
                                                struct sl_server *srv);
/* Send a command; takes buf. Written once the login completes if it has
 * not yet. SL_OK or SL_ERROR (backend closed). */
SL_EXPORT int sl_backend_write(struct sl_backend *b, struct sl_buf *buf);
/* Close a backend the router no longer wants (no handle_error call). */
SL_EXPORT void sl_backend_close(struct sl_backend *b);
SL_EXPORT struct sl_server *sl_backend_server(const struct sl_backend *b);
SL_EXPORT struct sl_session *sl_backend_session(const struct sl_backend *b);
SL_EXPORT struct sl_dcb *sl_backend_dcb(const struct sl_backend *b);
SL_EXPORT enum sl_backend_state sl_backend_state(const struct sl_backend *b);
/* Router-private pointer. */
SL_EXPORT void *sl_backend_router_data(const struct sl_backend *b);
SL_EXPORT void sl_backend_set_router_data(struct sl_backend *b, void *p);

/* Backend protocol -> core: the login succeeded. */
SL_EXPORT void sl_backend_ready(struct sl_backend *b);
/* Backend protocol -> core: the connection failed or the server sent an
 * error during login or hung up. errpkt (taken, may be NULL) is the
 * server's error packet. Calls the router's handle_error. */
SL_EXPORT void sl_backend_failed(struct sl_backend *b, struct sl_buf *errpkt,
                                 const char *reason);
/* The reason a backend gets from the core (as its prefix) when its TCP
 * connect failed: nothing it was given reached the server. */
#define SL_BACKEND_CONNECT_FAILED "connect to server"
/* Backend protocol -> core: a piece of an answer; takes buf (whole
 * packets). Calls the router's client_reply. */
SL_EXPORT int sl_backend_reply(struct sl_backend *b, struct sl_buf *buf,
                               const struct sl_reply *reply);

/*
 * A statement a router classified (its SL_QC_* type bits): counted for
 * /metrics by kind (sluice_service_queries_total{kind}) as write (data
 * or schema changes, CALL, LOAD DATA, SET GLOBAL, unclassifiable),
 * session (session state: SET, user variables, transaction control,
 * PREPARE/DEALLOCATE), read (SELECT, SHOW, variable reads), or other.
 * The session's worker, per-worker slot, no lock: the data path. A
 * router that calls it sets SL_RCAP_QUERY_KINDS and calls it for every
 * COM_QUERY and COM_STMT_EXECUTE (with the prepared statement's type);
 * for routers without that capability the core counts them.
 */
SL_EXPORT void sl_session_count_query(struct sl_session *ses,
                                      uint32_t qc_type);

/*
 * A timer of the session: fn(arg) after ms milliseconds, on the worker
 * that adds it, repeating while fn returns true. Unlike a plain worker
 * timer it is safe in both event models: fn runs under the session's lock
 * (event_model=shared, where another worker may be handling the session's
 * connections), never once the session is closing, and the session stays
 * allocated until the timer has ended (so router and filter session data
 * freed in free_session outlive it). Returns a non-zero id, 0 on failure.
 * Call from the session's own events.
 */
SL_EXPORT uint64_t sl_session_add_timer(struct sl_session *ses, uint64_t ms,
                                        sl_timer_fn fn, void *arg);
/* Stop a timer of the session: fn is not called again. No-op for an id
 * that has ended. Call from the session's own events (or free_session). */
SL_EXPORT void sl_session_cancel_timer(struct sl_session *ses, uint64_t id);

#endif
