/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Backend connection pooling (server parameters persistpoolmax and
 * persistmaxtime, MaxScale's "persistent connections").
 *
 *   session closes --sl__pool_park--> POOLED (in the worker's pool, still
 *        polled: a close or a byte from the server drops it)
 *   POOLED --sl__pool_take (a new session, same server and client
 *        capabilities)--> RESETTING (COM_CHANGE_USER as the new session's
 *        user) --OK--> READY, as after a login
 *                  --ERR or close--> closed, a fresh connection opened
 *   POOLED --persistmaxtime, server down/maintenance/draining, pool over
 *        its size, shutdown--> closed (COM_QUIT)
 *
 * Each worker has its own pool (struct sl_pool in struct sl_worker):
 * parking puts a connection into the calling worker's pool and a new
 * session takes from its own worker's pool, so in the pinned model a pool
 * is touched by one thread only and nothing locks. In the shared model
 * any worker may handle a pooled DCB's event (a server closing it), so
 * the pool's lock guards its list and each DCB's pool fields; it is taken
 * at session start and end and on a pooled DCB's events, never per
 * statement. A pooled DCB has no session: dcb.c hands its events here
 * (sl__pool_events), and a DCB taken meanwhile gets its events in its
 * next turn, under its new session's lock.
 *
 * What is never pooled: connections of sessions that asked for kernel
 * forwarding (readconnroute's kernel_forwarding: Sluice cannot know the
 * protocol state of bytes it did not see), TLS and compressed
 * connections, connections to proxy_protocol servers (the PROXY header
 * named the first client's address for the connection's life), and
 * connections that are not idle and outside a transaction (the
 * protocol's backend_park says).
 *
 * Context: worker-owned (the calling worker's pool), see above.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "pool"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <sluice/log.h>
#include <sluice/server.h>

#include "dcb_int.h"
#include "splice_int.h"
#include "worker_int.h"

#define POOL_TICK_MS 1000

static void
pool_lock(struct sl_pool *pool)
{
    if (sl__workers_shared()) {
        pthread_mutex_lock(&pool->lock);
    }
}

static void
pool_unlock(struct sl_pool *pool)
{
    if (sl__workers_shared()) {
        pthread_mutex_unlock(&pool->lock);
    }
}

static bool
protocol_pools(const struct sl_protocol_ops *p)
{
    return p->size >= offsetof(struct sl_protocol_ops, backend_reuse) +
                          sizeof(p->backend_reuse) &&
           p->backend_park != NULL && p->backend_reuse != NULL;
}

/* Running, not in maintenance, not draining. */
static bool
server_takes(const struct sl_server *srv)
{
    uint32_t st = sl_server_status(srv);

    return sl_server_is_usable(st) && !(st & SL_SRV_DRAINING);
}

/* The share of persistpoolmax one worker keeps (MaxScale 2.5+ divides
 * the pool between its routing threads), at least 1. */
static size_t
worker_quota(const struct sl_server *srv)
{
    int64_t max = __atomic_load_n(&srv->persistpoolmax, __ATOMIC_RELAXED);
    int n = sl_worker_count();

    if (max <= 0) {
        return 0;
    }
    if (n < 1) {
        n = 1;
    }
    return (size_t)((max + n - 1) / n);
}

/* Is the socket still quiet: no byte, no EOF, no error? A pooled
 * connection the server spoke on (an error before closing: KILL,
 * shutdown, wait_timeout) is not reusable. */
static bool
socket_quiet(int fd)
{
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Unlink d from pool (lock held), and release what the pool held. */
static void
unlink_entry(struct sl_pool *pool, struct sl_dcb *d)
{
    for (struct sl_dcb **pp = &pool->head; *pp != NULL;
         pp = &(*pp)->pool_next) {
        if (*pp == d) {
            *pp = d->pool_next;
            break;
        }
    }
    d->pool_next = NULL;
    atomic_store(&d->pool, NULL);
    pool->n--;
    atomic_fetch_sub(&d->server->pool_size, 1);
}

/* Drop a pooled connection (lock held): out of the pool, closed with a
 * goodbye if it is still open, the pool's reference released. */
static void
drop_entry(struct sl_pool *pool, struct sl_dcb *d, const char *why)
{
    unlink_entry(pool, d);
    if (d->state != DCB_CLOSED) {
        sl_log_info("server '%s': closing a pooled connection: %s",
                    d->server->name, why);
        if (d->protocol->backend_close != NULL && socket_quiet(d->fd)) {
            d->protocol->backend_close(d);
        }
        sl__dcb_close_quiet(d);
    }
    sl_dcb_unref(d);
}

/* Once a second while the pool has connections: drop those past
 * persistmaxtime, those whose server no longer takes connections (or was
 * destroyed: runtime.c sets its persistpoolmax to 0), and those closed
 * meanwhile. */
static bool
pool_tick(void *arg)
{
    struct sl_pool *pool = arg;
    uint64_t now = sl_worker_now_ms();
    struct sl_dcb *d;
    struct sl_dcb *next;
    bool again;

    pool_lock(pool);
    for (d = pool->head; d != NULL; d = next) {
        uint64_t max = __atomic_load_n(&d->server->persistmaxtime_ms,
                                       __ATOMIC_RELAXED);

        next = d->pool_next;
        if (d->state == DCB_CLOSED) {
            unlink_entry(pool, d);
            sl_dcb_unref(d);
        } else if (max > 0 && now >= d->pooled_ms + max) {
            atomic_fetch_add(&d->server->pool_expired, 1);
            drop_entry(pool, d, "persistmaxtime reached");
        } else if (!server_takes(d->server) ||
                   __atomic_load_n(&d->server->persistpoolmax,
                                   __ATOMIC_RELAXED) <= 0) {
            atomic_fetch_add(&d->server->pool_lost, 1);
            drop_entry(pool, d, "the server is down, in maintenance, "
                                "draining or destroyed");
        }
    }
    again = pool->n > 0;
    pool->timer_armed = again;
    pool_unlock(pool);
    return again;
}

static size_t
count_for(const struct sl_pool *pool, const struct sl_server *srv)
{
    size_t n = 0;

    for (const struct sl_dcb *d = pool->head; d != NULL; d = d->pool_next) {
        n += d->server == srv;
    }
    return n;
}

/* Why b's connection cannot go to a pool (before asking the protocol),
 * NULL if it can. */
static const char *
not_parkable(const struct sl_backend *b)
{
    const struct sl_session *ses = b->ses;
    const struct sl_dcb *d = b->dcb;

    /* The one place that keeps kernel-forwarded sessions out: their
     * bytes passed without Sluice seeing them. (A server that pools is
     * never forwarded to in the first place: splice.c.) */
    if (sl__splice_ever(ses)) {
        return "kernel forwarding";
    }
    if (d == NULL || b->state != SL_BACKEND_READY || d->state != DCB_POLLING) {
        return "not logged in";
    }
    if (b->ping_pending || b->resetting || b->nheld > 0 ||
        d->readq.len > 0 || d->writeq.len > 0 || d->rawq.len > 0 ||
        d->reading_paused || d->congested ||
        (d->protocol->backend_pending != NULL &&
         d->protocol->backend_pending(d) > 0)) {
        return "busy";
    }
    if (d->spliced || d->tls != NULL || d->codec != NULL ||
        b->server->proxy_protocol || ses->protocol != d->protocol ||
        !protocol_pools(d->protocol)) {
        return "TLS, compression, PROXY protocol or its protocol";
    }
    /* Pooled connections count against max_routing_connections: one kept
     * at the limit would hold a slot only this worker's sessions can
     * reuse, so at the limit it is closed and the slot is free for any. */
    if (sl_server_routing_full(b->server)) {
        return "the server's max_routing_connections is reached";
    }
    return server_takes(b->server) ? NULL : "server down, in maintenance "
                                            "or draining";
}

static void
note_max(struct sl_server *srv, long long n)
{
    long long m = atomic_load(&srv->pool_max);

    while (n > m && !atomic_compare_exchange_weak(&srv->pool_max, &m, n)) {
    }
}

bool
sl__pool_park(struct sl_backend *b)
{
    struct sl_worker *w = sl_worker_current();
    struct sl_server *srv = b->server;
    struct sl_session *ses = b->ses;
    struct sl_dcb *d = b->dcb;
    struct sl_pool *pool;
    size_t quota = worker_quota(srv);
    const char *why;

    if (quota == 0 || w == NULL) {
        return false;
    }
    if ((why = not_parkable(b)) != NULL) {
        sl_log_ses_debug(ses, "server '%s': connection not pooled: %s",
                         srv->name, why);
        return false;
    }
    pool = &w->pool;
    pool_lock(pool);
    if (count_for(pool, srv) >= quota) {
        pool_unlock(pool);
        sl_log_ses_debug(ses, "server '%s': connection not pooled: the "
                         "pool is full", srv->name);
        return false;
    }
    if (!d->protocol->backend_park(d)) {
        pool_unlock(pool);
        sl_log_ses_debug(ses, "server '%s': connection not pooled: the "
                         "protocol says it is not idle or in a transaction",
                         srv->name);
        return false;
    }
    sl_dcb_ref(d);   /* the pool's */
    d->backend = NULL;
    b->dcb = NULL;
    b->closed_by_router = true;
    b->state = SL_BACKEND_CLOSED;
    atomic_store(&d->session, NULL);
    d->pooled_ms = sl_worker_now_ms();
    d->pool_caps = ses->client_caps;
    d->pool_next = pool->head;
    pool->head = d;
    pool->n++;
    atomic_store(&d->pool, pool);
    note_max(srv, atomic_fetch_add(&srv->pool_size, 1) + 1);
    if (!pool->timer_armed) {
        pool->timer_armed = sl_worker_add_timer(POOL_TICK_MS, pool_tick,
                                                pool) != 0;
    }
    pool_unlock(pool);
    sl_log_ses_debug(ses, "server '%s': connection parked in the pool",
                     srv->name);
    sl__session_unref(ses);   /* the backend DCB's reference */
    return true;
}

/* A pooled connection that can serve b: same server and protocol, still
 * quiet (the capabilities are compared once the session has them). Lock held. Dead ones met
 * on the way are dropped. */
static struct sl_dcb *
find_entry(struct sl_pool *pool, const struct sl_backend *b)
{
    struct sl_dcb *d;
    struct sl_dcb *next;

    for (d = pool->head; d != NULL; d = next) {
        next = d->pool_next;
        if (d->server != b->server || d->protocol != b->ses->protocol) {
            continue;
        }
        if (d->state != DCB_CLOSED && socket_quiet(d->fd)) {
            return d;
        }
        atomic_fetch_add(&d->server->pool_lost, 1);
        drop_entry(pool, d, "closed by the server");
    }
    return NULL;
}

/*
 * The reset, in the pooled DCB's first turn with its new session (under
 * that session's lock): the client protocol sets the session's user,
 * database, password hash and capabilities only once sl_session_create()
 * (and with it the router's connect) has returned. A connection parked
 * by a client with other capabilities cannot serve this one (the server
 * would answer in another format): it fails the reset, as does a reset
 * that cannot be sent, and the backend connects afresh.
 */
static void
reset_posted(struct sl_dcb *d, void *arg)
{
    struct sl_backend *b = arg;
    struct sl_session *ses = b->ses;

    if (d->state == DCB_CLOSED || b->dcb != d || !b->resetting ||
        ses->state == SL_SESSION_CLOSING) {
        return;
    }
    if (d->pool_caps != ses->client_caps) {
        sl_backend_failed(b, NULL, "the pooled connection was made for a "
                                   "client with other capabilities");
    } else if (d->protocol->backend_reuse(d, b) != SL_OK) {
        sl_backend_failed(b, NULL, "cannot send the reset");
    }
}

struct sl_dcb *
sl__pool_take(struct sl_backend *b)
{
    struct sl_worker *w = sl_worker_current();
    struct sl_session *ses = b->ses;
    struct sl_server *srv = b->server;
    struct sl_pool *pool;
    struct sl_dcb *d;

    if (w == NULL || worker_quota(srv) == 0 || !protocol_pools(ses->protocol)) {
        return NULL;
    }
    pool = &w->pool;
    pool_lock(pool);
    d = pool->n > 0 ? find_entry(pool, b) : NULL;
    if (d == NULL) {
        pool_unlock(pool);
        atomic_fetch_add(&srv->pool_empty, 1);
        return NULL;
    }
    /* The session first, then out of the pool: a worker handling this
     * DCB's event meanwhile either sees it pooled (and under the pool
     * lock waits for us), or sees the session and takes its lock. */
    atomic_fetch_add(&ses->refs, 1);   /* the backend DCB's */
    d->backend = b;
    atomic_store(&d->session, ses);
    unlink_entry(pool, d);
    pool_unlock(pool);
    sl_dcb_unref(d);   /* the pool's; the session's list holds it now */
    b->dcb = d;
    b->state = SL_BACKEND_AUTHENTICATING;
    b->resetting = true;
    atomic_fetch_add(&srv->pool_reused, 1);
    sl_log_ses_debug(ses, "server '%s': reusing a pooled connection",
                     srv->name);
    if (sl_dcb_post(d, reset_posted, b) != 0) {
        /* cannot reset it: close it, the caller connects afresh */
        atomic_fetch_add(&srv->pool_lost, 1);
        b->resetting = false;
        b->state = SL_BACKEND_CONNECTING;
        b->dcb = NULL;
        d->backend = NULL;
        sl__dcb_close_quiet(d);
        return NULL;
    }
    return d;
}

uint32_t
sl__pool_events(struct sl_dcb *dcb, uint32_t events)
{
    struct sl_pool *pool = atomic_load(&dcb->pool);

    if (pool == NULL) {
        /* taken by a session since this turn looked: its next turn */
        return events;
    }
    pool_lock(pool);
    if (atomic_load(&dcb->pool) != pool) {
        pool_unlock(pool);
        return events;
    }
    if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) &&
        !socket_quiet(dcb->fd)) {
        atomic_fetch_add(&dcb->server->pool_lost, 1);
        drop_entry(pool, dcb, "closed by the server");
    }
    pool_unlock(pool);
    return 0;
}

void
sl__pool_drain(struct sl_worker *w)
{
    struct sl_pool *pool = &w->pool;

    pool_lock(pool);
    while (pool->head != NULL) {
        drop_entry(pool, pool->head, "shutting down");
    }
    pool_unlock(pool);
}

void
sl__pool_reset_failed(struct sl_server *srv)
{
    atomic_fetch_add(&srv->pool_lost, 1);
}
