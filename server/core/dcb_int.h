/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DCB, session and backend layouts shared by dcb.c, session.c and worker.c
 * (not installed; modules see these objects only through accessors).
 */
#ifndef SLUICE_DCB_INT_H
#define SLUICE_DCB_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sluice/buf.h>
#include <sluice/dcb.h>
#include <sluice/classifier.h>
#include <sluice/session.h>

#include "evq.h"
#include "proxyproto.h"
#include "stats.h"
#include "internal.h"

enum dcb_state {
    DCB_ALLOC,     /* created, not polled yet */
    DCB_POLLING,   /* registered with epoll */
    DCB_CLOSED,    /* out of epoll, fd closed, on a zombie list */
};

/* Handler of an internal DCB (timers, tests): events in, events left out. */
typedef uint32_t (*sl_dcb_internal_fn)(struct sl_dcb *dcb, uint32_t events,
                                       void *arg);

struct sl_dcb {
    struct sl_evq_item ev;          /* first: epoll data points here */
    enum sl_dcb_role role;
    /* Atomic: in the shared model another worker's handler and the
     * owner's timeout sweep look at it before taking the session lock. */
    _Atomic(enum dcb_state) state;
    int fd;
    bool owns_fd;                   /* listener DCBs share the socket */
    uint64_t id;
    struct sl_worker *worker;       /* creator / owner */
    atomic_uint refs;

    struct sl_buf readq;
    struct sl_buf writeq;
    void *protocol_data;
    const struct sl_protocol_ops *protocol;

    _Atomic(struct sl_session *) session; /* atomic: the shared model's
                                    * sweep tests it unlocked */
    struct sl_listener *listener;   /* listener and client DCBs */
    struct sl_service *service;
    struct sl_backend *backend;     /* backend DCBs */
    struct sl_server *server;

    sl_dcb_internal_fn internal_fn;
    void *internal_arg;
    /* sl_dcb_post work waiting for this DCB's next turn (a LIFO pushed by
     * the owner's message handler, taken whole by dcb_handler). */
    _Atomic(struct dcb_post *) posts;

    char remote[256];
    /* client: the address it presented (accept()'s, or the one its PROXY
     * header carried) and, if a header said, the one it connected to
     * (sa_family 0: ask getsockname); both for the header sent onward to
     * proxy_protocol servers */
    union sl_pp_addr peer;
    union sl_pp_addr local;
    bool pp_pending;                /* client: its first bytes not yet
                                     * checked for a PROXY header */
    bool pp_trusted;                /* client: from proxy_protocol_networks
                                     * (may send a header) */
    bool is_unix;
    bool connecting;                /* backend: connect() in progress */
    bool write_blocked;             /* waiting for EPOLLOUT */
    bool reading_paused;
    bool read_deferred;             /* EPOLLIN arrived while paused */
    bool congested;                 /* backend: write queue went above
                                     * writeq_high_water, not yet back
                                     * below writeq_low_water */
    bool accept_done;               /* client_accept ran (free hook due) */
    bool backend_inited;            /* backend_init ran */
    _Atomic bool pending_login;     /* client: counted in pending.c until
                                     * its session is created (atomic: the
                                     * owner's sweep reads it, shared model) */
    bool spliced;                   /* in the kernel-forwarding sockhash
                                     * (splice.c): reads bypass the
                                     * protocol */

    uint64_t bytes_read;
    uint64_t bytes_written;

    struct sl_dcb *zombie_next;
    uint64_t zombie_epoch;
    struct sl_dcb *list_prev;       /* worker's list of its DCBs */
    struct sl_dcb *list_next;
    struct sl_tls_conn *tls;        /* NULL = plain socket (tls.c) */
    size_t tls_write_len;           /* length of an SSL_write to retry */
    uint64_t accept_ms;             /* client: when accepted */
    /* The timeout sweep (dcb.c) reads these three without the session
     * lock first (shared model: another worker writes them), so they are
     * atomic; stores are relaxed (plain moves on x86). */
    _Atomic uint64_t last_read_ms;  /* last bytes read */
    _Atomic uint64_t write_progress_ms; /* last write progress, or when the
                                     * write queue became non-empty */
    atomic_bool write_pending;      /* writeq.len > 0 (note_writeq) */
    /* A transform between the socket and the queues (sl_dcb_set_codec:
     * protocol compression): NULL = none. With one, reads go to rawq and
     * are decoded into readq before the protocol sees them; writes are
     * encoded before they join writeq. */
    const struct sl_dcb_codec *codec;
    void *codec_ctx;
    struct sl_buf rawq;
    /* Backend connection pool (pool.c): the pool holding this idle
     * backend (NULL while a session has it; atomic: in the shared model a
     * worker handling its event reads it before taking that pool's lock,
     * under which it and the fields below change). */
    _Atomic(struct sl_pool *) pool;
    struct sl_dcb *pool_next;
    uint64_t pooled_ms;             /* when it was parked */
    uint64_t pool_caps;             /* the parking session's client caps:
                                     * reused only for the same */
};

struct sl_filter_session {
    struct sl_session *ses;
    size_t index;                   /* position in the chain */
    const struct sl_filter_def *def;
    struct sl_inst_ref *ref;        /* the instance data was made over */
    void *data;                     /* the filter's session */
};

struct sl_backend {
    struct sl_session *ses;
    struct sl_server *server;
    struct sl_dcb *dcb;
    enum sl_backend_state state;
    bool in_flight;                 /* a command is waiting for its answer */
    bool closed_by_router;
    /* connection_keepalive: a COM_PING the core sent is unanswered; its
     * answer is swallowed, and what the router writes meanwhile waits in
     * held[] (sent in order when the answer is in). */
    bool ping_pending;
    struct sl_buf **held;
    size_t nheld;
    size_t held_cap;
    uint64_t t_sent;                /* stats.c: the timed command's start */
    /* A pooled connection being reset for this session (pool.c): what
     * the router writes meanwhile waits in held[], as for a ping. */
    bool resetting;
    void *router_data;
    /* retain_last_statements (history.c): the statement this connection
     * is answering and when it was sent */
    uint64_t hist_seq;
    uint64_t hist_t0_us;
    struct sl_backend *next;        /* session's list */
};

struct sl_session {
    uint64_t id;
    enum sl_session_state state;
    atomic_uint refs;               /* client DCB + each backend DCB */
    struct sl_dcb *client;
    /* The client's addresses for PROXY headers (sl__dcb_proxy_header):
     * its dcb->peer and dcb->local, copied so internal sessions (no
     * client) speak for their parent's client. */
    union sl_pp_addr peer;
    union sl_pp_addr local;
    struct sl_service *service;
    const struct sl_protocol_ops *protocol;
    void *router_session;
    struct sl_inst_ref *router_ref; /* the instance router_session is of */
    struct sl_filter_session *filters;
    size_t nfilters;
    struct sl_backend *backends;
    void *protocol_data;
    bool throttled;                 /* backends paused for backpressure */
    unsigned congested_backends;    /* backend DCBs over high water: the
                                     * client is not read while > 0 */
    bool counted;                   /* counted in service->sessions */
    pthread_mutex_t lock;           /* shared model: held while processing
                                     * any DCB of this session */
    struct sl_session *lock_root;   /* whose lock that is: the session
                                     * itself, or for an internal session
                                     * its parent's lock_root (one of its
                                     * references held), since the parent
                                     * drives it from the parent's events */
    char user[388];                 /* 128 characters of utf8mb3 */
    char remote[256];
    char db[196];                   /* 64 characters of utf8mb3 */
    bool db_unsure;                 /* sl_session_db_unsure() */
    uint64_t answers_pending;       /* sl_session_answers_pending() */
    struct sl_hint hint;            /* for the next routed command */
    uint64_t client_caps;           /* SL_CAP_* the client negotiated */
    /* Internal sessions (no client DCB; sl_session_create_internal): */
    sl_session_reply_fn reply_fn;   /* their answers go here */
    void *reply_arg;
    struct sl_session *parent;      /* closes them when it closes */
    struct sl_session *children;    /* internal sessions of this one */
    struct sl_session *sibling;     /* next in parent->children */
    struct sl_ses_stats stats;      /* stats.c: commands being timed */
    struct ses_timer *timers;       /* sl_session_add_timer's, running */
    struct sl_splice *splice;       /* kernel forwarding (splice.c) */
    /* history.c: retain_last_statements and session_trace, NULL when off */
    struct sl_ses_history *history;
    struct sl_ses_trace *trace;
};

/* ---- dcb.c ---- */

/* A new DCB owned by the calling worker (or worker 0 outside workers).
 * Takes fd. NULL on allocation failure. */
struct sl_dcb *sl__dcb_alloc(enum sl_dcb_role role, int fd);
/* An internal DCB over fd whose events run fn(dcb, events, arg). */
struct sl_dcb *sl__dcb_new_internal(int fd, sl_dcb_internal_fn fn, void *arg);
/* Register with the owner's epoll set. 0 or -errno. */
int sl__dcb_add(struct sl_dcb *dcb);
/* Free a reclaimable zombie (called by the worker's reaper). */
void sl__dcb_free(struct sl_dcb *dcb);
bool sl__dcb_reclaimable(const struct sl_dcb *dcb, uint64_t min_epoch);
/* Open a non-blocking connection for backend b (not polled yet). */
/* proxy_protocol=true: queue the PROXY v1 header for ses's client on
 * the new backend DCB (sent first). -1 on failure (logged). */
int sl__dcb_proxy_header(struct sl_dcb *dcb, const struct sl_session *ses);
struct sl_dcb *sl__dcb_connect_backend(struct sl_backend *b);
/* Close without reporting a backend failure (session/backends internal). */
void sl__dcb_close_quiet(struct sl_dcb *dcb);
/* Close every DCB this worker owns (shutdown). Worker thread. */
void sl__dcb_close_all(struct sl_worker *w);
/* DCBs freed since start (tests). */
uint64_t sl__dcb_freed_count(void);
/* Graceful shutdown, on worker w: close w's idle client sessions and
 * count those still busy (a statement in flight or output queued). */
int64_t sl__dcb_drain_clients(struct sl_worker *w);
/* The client logged in (its session is being created): it no longer
 * counts as pending. Idempotent. */
void sl__dcb_login_done(struct sl_dcb *dcb);
/* Kernel forwarding: mark dcb spliced or not and wait for the events
 * that need (reads only while spliced). Owner's thread. */
void sl__dcb_set_spliced(struct sl_dcb *dcb, bool spliced);
/* The negotiated TLS cipher, "" for a plain DCB. */
const char *sl__dcb_tls_cipher(const struct sl_dcb *dcb);

/* ---- pool.c: backend connection pooling ---- */

struct sl_pool;
/* At session close, for each backend: park its connection in the
 * calling worker's pool if the server pools and the connection is clean
 * and idle. True if parked (b is then CLOSED without a DCB). */
bool sl__pool_park(struct sl_backend *b);
/* For a new backend b: a pooled connection to b's server, attached to b
 * and its session (reference taken) with its reset sent; NULL if none. */
struct sl_dcb *sl__pool_take(struct sl_backend *b);
/* An event of a backend DCB no session holds (dcb.c's dispatch): a
 * pooled connection the server closed or wrote to is dropped. Events
 * left over to re-queue. */
uint32_t sl__pool_events(struct sl_dcb *dcb, uint32_t events);
/* Close every connection in w's pool (shutdown). */
void sl__pool_drain(struct sl_worker *w);
/* A reset of a pooled connection failed: counted (pool_lost). */
void sl__pool_reset_failed(struct sl_server *srv);

/* ---- session.c ---- */

void sl__session_unref(struct sl_session *ses);
/* Shared model: does this thread hold ses's lock for its event? (True in
 * the pinned model, which has no lock.) */
bool sl__session_locked(const struct sl_session *ses);
/* Shared model: lock ses for the rest of the current event, once. */
void sl__session_lock_for_event(struct sl_session *ses);
/* Shared model: lock ses as sl__session_lock_for_event does if its lock is
 * free; false (nothing locked) when another thread holds it. True without
 * locking in the pinned model, for NULL, or when this thread holds it. */
bool sl__session_trylock_for_event(struct sl_session *ses);
/* Release the session locked for the current event, if any. */
void sl__session_unlock_event(void);
/* Clear b->dcb as its DCB is freed, under the session's lock (shared). */
void sl__backend_forget_dcb(struct sl_backend *b);
/* The client DCB hung up or was closed by the protocol. */
void sl__session_client_closed(struct sl_session *ses);
/* Backend DCB hung up / failed (from dcb.c). */
void sl__backend_dcb_failed(struct sl_backend *b, const char *reason);
/* When d last moved a byte either way: the later of its two stamps
 * (relaxed loads; the timeout and keepalive sweeps). */
static inline uint64_t
sl__dcb_last_io_ms(const struct sl_dcb *d)
{
    uint64_t r = atomic_load_explicit(&d->last_read_ms, memory_order_relaxed);
    uint64_t w = atomic_load_explicit(&d->write_progress_ms,
                                      memory_order_relaxed);

    return r > w ? r : w;
}

/* connection_keepalive (the sweep, under the session lock): ping b if it
 * is ready, has nothing in flight and has been idle (no byte either way)
 * for the service's connection_keepalive. */
void sl__backend_keepalive(struct sl_backend *b, uint64_t now_ms);
/* Backpressure: the client's write queue crossed a water mark. */
void sl__session_throttle(struct sl_session *ses, bool pause);
/* Backpressure the other way: a backend's write queue went above the
 * high mark (more) or back below the low mark; the client is not read
 * while any backend of the session is congested. */
void sl__session_congested(struct sl_session *ses, bool more);

#endif
