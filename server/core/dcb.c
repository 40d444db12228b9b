/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Descriptor control blocks: sockets and their queues.
 *
 *   ALLOC --sl__dcb_add--> POLLING --sl_dcb_close--> CLOSED (zombie)
 *                                                      |
 *     refs == 0, out of the event queue, every worker  |
 *     started a turn since the close epoch ----------> freed
 *
 * Reading: an event puts the DCB on its worker's event queue (evq.c); its
 * turn reads at most sl__evq_read_budget bytes straight into the read queue
 * (sl_buf_reserve, no copy), hands them to the protocol, and asks to be
 * re-queued at the tail if the budget ran out before the socket drained.
 * Short reads mean drained: edge-triggered epoll reports every new arrival.
 *
 * Writing: sl_dcb_write appends to the write queue and writes at once
 * (one sendmsg over up to IOV_MAX segments); what the kernel does not take
 * waits for EPOLLOUT. A client write queue above writeq_high_water pauses
 * reading on the session's backends until it drains below writeq_low_water;
 * a backend write queue above it (a server slower than a client pipelining
 * commands) pauses reading the client the same way.
 *
 * Hangups: a client hangup closes its session; a backend hangup is reported
 * to the router (sl_backend_failed path) unless the router closed it.
 *
 * TLS (sl_dcb_tls_start): reads and writes go through tls.c. Writes queue
 * while the handshake runs. A TLS read never stops at a short record: it
 * reads until WANT_READ or the budget, so bytes OpenSSL already decrypted
 * (SSL_pending) are handled in the re-queued turn without a new
 * (edge-triggered) epoll event. A read that needs EPOLLOUT or a write that
 * needs EPOLLIN (TLS 1.3 key update) is retried on that event.
 *
 * Context: worker-owned. In the shared model the session lock (session.c)
 * is held while a DCB of a session is processed; the state checks after
 * taking it make a DCB closed meanwhile a no-op.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "dcb"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>
#include <sluice/log.h>

#include "buf_int.h"
#include "dcb_int.h"
#include "history.h"
#include "splice_int.h"
#include "stats.h"
#include "tls.h"
#include "worker_int.h"

#define ACCEPT_BUDGET 64
#define LISTEN_BACKLOG 1024
#define CONN_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

enum read_result {
    READ_DRAINED,   /* nothing more in the socket right now */
    READ_MORE,      /* budget used up, the socket may hold more */
    READ_EOF,       /* peer closed (or error) */
};

/* Listener DCBs that share one listening socket (one per worker when
 * pinned). The socket closes with the last of them. */
struct lrec {
    struct lrec *next;
    struct sl_listener *l;
    int ndcbs;
    int open;
    struct sl_dcb **dcbs;
};

static atomic_llong dcb_live;
static atomic_ullong dcb_freed;
static atomic_ullong next_dcb_id = 1;
static struct lrec *lrecs;
static pthread_mutex_t lrec_lock = PTHREAD_MUTEX_INITIALIZER;

static uint32_t dcb_handler(struct sl_evq_item *it, uint32_t events);
static void lrec_dcb_closed(struct sl_dcb *dcb);

int64_t
sl__dcb_count(void)
{
    return atomic_load(&dcb_live);
}

uint64_t
sl__dcb_freed_count(void)
{
    return atomic_load(&dcb_freed);
}

/* ---- allocation, registration, freeing ---- */

static struct sl_dcb *
dcb_alloc_on(enum sl_dcb_role role, int fd, struct sl_worker *w)
{
    struct sl_dcb *dcb = calloc(1, sizeof(*dcb));

    if (dcb == NULL) {
        return NULL;
    }
    sl__evq_item_init(&dcb->ev, dcb_handler);
    dcb->role = role;
    dcb->state = DCB_ALLOC;
    dcb->fd = fd;
    dcb->owns_fd = true;
    dcb->id = atomic_fetch_add(&next_dcb_id, 1);
    dcb->worker = w;
    atomic_init(&dcb->refs, 0);
    /* Connection setup and teardown only, never per packet; the main
     * thread adds listener DCBs to running workers, hence the lock. */
    pthread_mutex_lock(&w->dcb_lock);
    w->total_dcbs++;
    dcb->list_next = w->dcbs;
    if (w->dcbs != NULL) {
        w->dcbs->list_prev = dcb;
    }
    w->dcbs = dcb;
    pthread_mutex_unlock(&w->dcb_lock);
    atomic_fetch_add(&dcb_live, 1);
    return dcb;
}

struct sl_dcb *
sl__dcb_alloc(enum sl_dcb_role role, int fd)
{
    struct sl_worker *w = sl_worker_current();

    if (w == NULL) {
        w = sl_worker_get(0);
    }
    if (w == NULL) {
        return NULL;
    }
    return dcb_alloc_on(role, fd, w);
}

struct sl_dcb *
sl__dcb_new_internal(int fd, sl_dcb_internal_fn fn, void *arg)
{
    struct sl_dcb *dcb = sl__dcb_alloc(SL_DCB_INTERNAL, fd);

    if (dcb != NULL) {
        dcb->internal_fn = fn;
        dcb->internal_arg = arg;
    }
    return dcb;
}

int
sl__dcb_add(struct sl_dcb *dcb)
{
    struct epoll_event ev = {.events = CONN_EVENTS, .data.ptr = &dcb->ev};

    if (dcb->role == SL_DCB_LISTENER) {
        ev.events = EPOLLIN | EPOLLET;
        if (!sl__workers_shared()) {
            ev.events |= EPOLLEXCLUSIVE;
        }
    }
    /* Polling before it is in the set: once it is, a worker may handle
     * an event at once (a listener added by the admin thread). */
    dcb->state = DCB_POLLING;
    if (epoll_ctl(sl__worker_epfd(dcb->worker), EPOLL_CTL_ADD, dcb->fd,
                  &ev) != 0) {
        dcb->state = DCB_ALLOC;
        return -errno;
    }
    return 0;
}

/* Kernel forwarding (splice.c): a spliced DCB waits only for what Sluice
 * must see. EPOLLOUT would wake the worker for every ACK of what the
 * kernel sends on it; a write that blocks asks for it again (flush). The
 * client keeps EPOLLIN for the COM_CHANGE_USER the BPF program leaves to
 * Sluice (the kernel's sockmap code signals readability after each
 * redirected skb too: that wakes the epoll waiter in the kernel, which
 * finds nothing readable and sleeps on, without returning to Sluice).
 * The backend has nothing Sluice must read: a close (EPOLLRDHUP, EPOLLHUP,
 * EPOLLERR) is all it waits for. */
#define SPLICED_CLIENT_EVENTS (EPOLLIN | EPOLLRDHUP | EPOLLET)
#define SPLICED_BACKEND_EVENTS (EPOLLRDHUP | EPOLLET)

void
sl__dcb_set_spliced(struct sl_dcb *dcb, bool spliced)
{
    struct epoll_event ev = {
        .events = !spliced || dcb->write_blocked ? CONN_EVENTS
                  : dcb->role == SL_DCB_CLIENT   ? SPLICED_CLIENT_EVENTS
                                                 : SPLICED_BACKEND_EVENTS,
        .data.ptr = &dcb->ev};

    /* atomic: the sweep of dcb's worker reads it without the session's
     * lock (shared model) */
    __atomic_store_n(&dcb->spliced, spliced, __ATOMIC_RELAXED);
    if (dcb->state == DCB_POLLING && dcb->fd >= 0) {
        (void)epoll_ctl(sl__worker_epfd(dcb->worker), EPOLL_CTL_MOD,
                        dcb->fd, &ev);
    }
}

bool
sl__dcb_reclaimable(const struct sl_dcb *dcb, uint64_t min_epoch)
{
    if (dcb->zombie_epoch > min_epoch || atomic_load(&dcb->refs) != 0 ||
        atomic_load(&dcb->ev.state) != SL_EVQ_IDLE) {
        return false;
    }
    /* The client goes last so client_free can release session data the
     * backend side may still have used. */
    return dcb->role != SL_DCB_CLIENT || dcb->session == NULL ||
           atomic_load(&dcb->session->refs) <= 1;
}

static void
unlink_from_worker(struct sl_dcb *dcb)
{
    struct sl_worker *w = dcb->worker;

    pthread_mutex_lock(&w->dcb_lock);
    if (dcb->list_prev != NULL) {
        dcb->list_prev->list_next = dcb->list_next;
    } else {
        w->dcbs = dcb->list_next;
    }
    if (dcb->list_next != NULL) {
        dcb->list_next->list_prev = dcb->list_prev;
    }
    pthread_mutex_unlock(&w->dcb_lock);
}

/* The DCB holds its listener, service and server (whichever are set)
 * until sl__dcb_free: set in a worker's turn (or on the admin thread,
 * for listener DCBs) from objects that are held or published. */
static void
hold_objects(struct sl_dcb *dcb)
{
    if (dcb->listener != NULL) {
        sl__obj_ref(SL_OBJ_LISTENER, dcb->listener);
    }
    if (dcb->service != NULL) {
        sl__obj_ref(SL_OBJ_SERVICE, dcb->service);
    }
    if (dcb->server != NULL) {
        sl__obj_ref(SL_OBJ_SERVER, dcb->server);
    }
}

void
sl__dcb_free(struct sl_dcb *dcb)
{
    unlink_from_worker(dcb);
    if (dcb->protocol != NULL) {
        if (dcb->role == SL_DCB_CLIENT && dcb->accept_done &&
            dcb->protocol->client_free != NULL) {
            dcb->protocol->client_free(dcb);
        } else if (dcb->role == SL_DCB_BACKEND && dcb->backend_inited &&
                   dcb->protocol->backend_free != NULL) {
            dcb->protocol->backend_free(dcb);
        }
    }
    sl_buf_reset(&dcb->readq);
    sl_buf_reset(&dcb->writeq);
    sl_buf_reset(&dcb->rawq);
    if (dcb->codec != NULL && dcb->codec->free != NULL) {
        dcb->codec->free(dcb->codec_ctx);
    }
    dcb->codec = NULL;
    sl__tls_conn_free(dcb->tls);
    dcb->tls = NULL;
    if (dcb->backend != NULL) {
        sl__backend_forget_dcb(dcb->backend);
    }
    if (dcb->session != NULL) {
        sl__session_unref(dcb->session);
    }
    sl__obj_unref(SL_OBJ_LISTENER, dcb->listener);
    sl__obj_unref(SL_OBJ_SERVICE, dcb->service);
    sl__obj_unref(SL_OBJ_SERVER, dcb->server);
    free(dcb);
    atomic_fetch_sub(&dcb_live, 1);
    atomic_fetch_add(&dcb_freed, 1);
}

/* ---- writing ---- */

/* The sweep's view of a client's activity (see struct sl_dcb). */
static inline void
stamp(_Atomic uint64_t *when)
{
    atomic_store_explicit(when, sl_worker_now_ms(), memory_order_relaxed);
}

static inline void
note_writeq(struct sl_dcb *dcb)
{
    atomic_store_explicit(&dcb->write_pending, dcb->writeq.len > 0,
                          memory_order_relaxed);
}

static void
write_failed(struct sl_dcb *dcb, int err)
{
    sl_log_debug("DCB %llu (%s): write failed: %s",
                 (unsigned long long)dcb->id, dcb->remote, strerror(err));
    sl_buf_reset(&dcb->writeq);
    note_writeq(dcb);
    /* handle it as a hangup in the DCB's own turn, not on this stack */
    sl__worker_notify(dcb->worker, &dcb->ev, EPOLLHUP);
}

/* TLS flavour of flush: one segment per SSL_write (at most 16 KiB, one
 * record); a retried write repeats the same length, as OpenSSL wants. */
static int
flush_tls(struct sl_dcb *dcb)
{
    const size_t rec = 16384;
    struct sl_seg *s;
    size_t want;
    ssize_t n;

    if (sl__tls_handshaking(dcb->tls)) {
        return 0;   /* conn_events flushes when the handshake is done */
    }
    while (dcb->writeq.len > 0 && !dcb->write_blocked) {
        s = dcb->writeq.head;
        want = (size_t)(s->end - s->start);
        want = want > rec ? rec : want;
        if (dcb->tls_write_len != 0) {
            want = dcb->tls_write_len;
        }
        n = sl__tls_write(dcb->tls, s->start, want);
        if (n < 0) {
            if (errno == EAGAIN) {
                dcb->tls_write_len = want;
                dcb->write_blocked = true;
                return 0;
            }
            return -errno;
        }
        dcb->tls_write_len = 0;
        sl_buf_consume(&dcb->writeq, (size_t)n);
        note_writeq(dcb);
        dcb->bytes_written += (uint64_t)n;
        if (dcb->server != NULL) {
            sl__stats_server_bytes(dcb->server, 0, (uint64_t)n);
        }
        stamp(&dcb->write_progress_ms);
    }
    return 0;
}

/* Write as much of the write queue as the kernel takes. 0 or -errno. */
static int
flush(struct sl_dcb *dcb)
{
    struct iovec iov[IOV_MAX];
    struct msghdr msg = {.msg_iov = iov};
    struct sl_seg *s;
    size_t want;
    ssize_t n;

    if (dcb->tls != NULL) {
        return flush_tls(dcb);
    }
    while (dcb->writeq.len > 0 && !dcb->write_blocked) {
        want = 0;
        msg.msg_iovlen = 0;
        for (s = dcb->writeq.head; s != NULL && msg.msg_iovlen < IOV_MAX;
             s = s->next) {
            iov[msg.msg_iovlen].iov_base = s->start;
            iov[msg.msg_iovlen++].iov_len = (size_t)(s->end - s->start);
            want += (size_t)(s->end - s->start);
        }
        n = sendmsg(dcb->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == ENOTSOCK) {
            n = writev(dcb->fd, iov, (int)msg.msg_iovlen);
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                dcb->write_blocked = true;
                if (dcb->spliced) {
                    sl__dcb_set_spliced(dcb, true);   /* with EPOLLOUT */
                }
                return 0;
            }
            return -errno;
        }
        sl_buf_consume(&dcb->writeq, (size_t)n);
        note_writeq(dcb);
        dcb->bytes_written += (uint64_t)n;
        if (dcb->server != NULL) {
            sl__stats_server_bytes(dcb->server, 0, (uint64_t)n);
        }
        stamp(&dcb->write_progress_ms);
        if ((size_t)n < want) {
            dcb->write_blocked = true;   /* EPOLLOUT will say when */
            if (dcb->spliced) {
                sl__dcb_set_spliced(dcb, true);   /* with EPOLLOUT */
            }
        }
    }
    return 0;
}

/* A backend's write queue crossed a water mark: tell its session. */
static void
backend_backpressure(struct sl_dcb *dcb, const struct sl_global *g)
{
    if (!dcb->congested && dcb->writeq.len > g->writeq_high_water) {
        dcb->congested = true;
        sl__session_congested(dcb->session, true);
    } else if (dcb->congested && dcb->writeq.len <= g->writeq_low_water) {
        dcb->congested = false;
        sl__session_congested(dcb->session, false);
    }
}

static void
check_backpressure(struct sl_dcb *dcb)
{
    const struct sl_config *cfg = sl__config_current();
    const struct sl_global *g;
    struct sl_session *ses = dcb->session;

    if (ses == NULL || cfg == NULL || cfg->global.writeq_high_water == 0) {
        return;
    }
    g = &cfg->global;
    if (dcb->role == SL_DCB_BACKEND) {
        backend_backpressure(dcb, g);
        return;
    }
    if (dcb->role != SL_DCB_CLIENT) {
        return;
    }
    if (!ses->throttled && dcb->writeq.len > g->writeq_high_water) {
        sl__session_throttle(ses, true);
    } else if (ses->throttled && dcb->writeq.len <= g->writeq_low_water) {
        sl__session_throttle(ses, false);
    }
}

int
sl_dcb_write(struct sl_dcb *dcb, struct sl_buf *buf)
{
    int rc;

    if (dcb->state == DCB_CLOSED) {
        sl_buf_free(buf);
        return -EPIPE;
    }
    if (dcb->codec != NULL && (buf = dcb->codec->encode(dcb->codec_ctx,
                                                        buf)) == NULL) {
        sl_log_error("DCB %llu (%s): cannot encode a write (out of memory)",
                     (unsigned long long)dcb->id, dcb->remote);
        write_failed(dcb, ENOMEM);
        return 0;
    }
    if (dcb->writeq.len == 0) {
        stamp(&dcb->write_progress_ms);
    }
    sl_buf_append(&dcb->writeq, buf);
    note_writeq(dcb);
    sl_buf_free(buf);
    if (dcb->connecting || dcb->write_blocked) {
        check_backpressure(dcb);
        return 0;
    }
    rc = flush(dcb);
    if (rc != 0) {
        write_failed(dcb, -rc);
        return 0;
    }
    check_backpressure(dcb);
    return 0;
}

/* ---- closing ---- */

/*
 * Shared model: a listener DCB is handled by any worker but closed by its
 * owner (listener stop, worker stop), and it has no session lock to
 * serialise the two; this lock does, so no worker calls accept() on a
 * descriptor being closed (or already reused). Pinned: not taken.
 */
static pthread_mutex_t listener_lock = PTHREAD_MUTEX_INITIALIZER;

static bool
lock_listener(const struct sl_dcb *dcb)
{
    if (dcb->role != SL_DCB_LISTENER || !sl__workers_shared()) {
        return false;
    }
    pthread_mutex_lock(&listener_lock);
    return true;
}

static void close_now(struct sl_dcb *dcb);

void
sl__dcb_close_quiet(struct sl_dcb *dcb)
{
    bool locked = lock_listener(dcb);

    close_now(dcb);
    if (locked) {
        pthread_mutex_unlock(&listener_lock);
    }
}

static void
close_now(struct sl_dcb *dcb)
{
    if (dcb->state == DCB_CLOSED) {
        return;
    }
    if (dcb->writeq.len > 0 && !dcb->connecting && dcb->fd >= 0) {
        dcb->write_blocked = false;
        (void)flush(dcb);   /* best effort, never blocks */
    }
    if (dcb->tls != NULL && dcb->fd >= 0 && dcb->writeq.len == 0) {
        sl__tls_shutdown(dcb->tls);
    }
    if (dcb->state == DCB_POLLING && dcb->fd >= 0) {
        epoll_ctl(sl__worker_epfd(dcb->worker), EPOLL_CTL_DEL, dcb->fd, NULL);
    }
    dcb->state = DCB_CLOSED;
    if (dcb->owns_fd && dcb->fd >= 0) {
        close(dcb->fd);
    }
    if (dcb->role == SL_DCB_LISTENER) {
        lrec_dcb_closed(dcb);
    } else if (dcb->role == SL_DCB_CLIENT && dcb->listener != NULL) {
        atomic_fetch_sub(&dcb->listener->connections, 1);
        sl__dcb_login_done(dcb);
    } else if (dcb->role == SL_DCB_BACKEND && dcb->server != NULL) {
        atomic_fetch_sub(&dcb->server->connections, 1);
    }
    if (dcb->congested) {
        dcb->congested = false;   /* its queue is gone: read the client */
        sl__session_congested(dcb->session, false);
    }
    dcb->fd = -1;
    sl__worker_add_zombie(dcb);
}

void
sl_dcb_close(struct sl_dcb *dcb)
{
    if (dcb->state == DCB_CLOSED) {
        return;
    }
    if (dcb->role == SL_DCB_CLIENT && dcb->session != NULL &&
        dcb->session->state != SL_SESSION_CLOSING) {
        sl__session_client_closed(dcb->session);
        return;   /* the session closes this DCB */
    }
    if (dcb->role == SL_DCB_BACKEND && dcb->backend != NULL &&
        !dcb->backend->closed_by_router &&
        dcb->backend->state != SL_BACKEND_FAILED &&
        dcb->backend->state != SL_BACKEND_CLOSED) {
        sl__backend_dcb_failed(dcb->backend, "connection closed");
        return;
    }
    sl__dcb_close_quiet(dcb);
}

void
sl__dcb_close_all(struct sl_worker *w)
{
    struct sl_dcb **all = NULL;
    struct sl_dcb *d;
    size_t n = 0;
    size_t cap = 0;
    size_t i;

    sl__pool_drain(w);
    pthread_mutex_lock(&w->dcb_lock);
    for (d = w->dcbs; d != NULL; d = d->list_next) {
        /* A backend without a session belongs to a backend pool, maybe
         * another worker's (shared model): that pool's drain closes it. */
        if (d->state == DCB_CLOSED ||
            (d->role == SL_DCB_BACKEND && atomic_load(&d->session) == NULL &&
             d->backend_inited)) {
            continue;
        }
        if (n == cap) {
            struct sl_dcb **a;

            cap = cap ? cap * 2 : 64;
            a = realloc(all, cap * sizeof(*a));
            if (a == NULL) {
                break;
            }
            all = a;
        }
        sl_dcb_ref(d);
        all[n++] = d;
    }
    pthread_mutex_unlock(&w->dcb_lock);
    for (i = 0; i < n; i++) {
        d = all[i];
        if (d->session != NULL) {
            sl__session_lock_for_event(d->session);
        }
        sl_dcb_close(d);
        sl__session_unlock_event();
        sl_dcb_unref(d);
    }
    free(all);
}

/* ---- reading and events ---- */

/*
 * Read what the socket holds, up to the read budget. A read shorter than
 * asked for is taken as the end of what is there (no extra read() for
 * its EAGAIN), unless to_eof: the event said the peer closed, and with
 * edge-triggered epoll that close is reported once, so reading must go on
 * to the EOF behind the last bytes. A server that answers and closes at
 * once (an ERR 1927 for KILL CONNECTION_ID(), then its FIN) is otherwise
 * seen answering but not closing.
 */
static enum read_result
read_some(struct sl_dcb *dcb, bool to_eof)
{
    size_t budget = sl__evq_read_budget;
    size_t total = 0;
    size_t avail;
    unsigned char *p;
    ssize_t n;
    struct sl_buf *q = dcb->codec != NULL ? &dcb->rawq : &dcb->readq;

    while (total < budget) {
        p = sl_buf_reserve(q, 1, SL_BUF_BLOCK_SIZE, &avail);
        if (p == NULL) {
            sl_log_error("out of memory reading from %s", dcb->remote);
            return READ_EOF;
        }
        if (avail > budget - total) {
            avail = budget - total;
        }
        n = dcb->tls != NULL ? sl__tls_read(dcb->tls, p, avail)
                             : read(dcb->fd, p, avail);
        if (n > 0) {
            sl_buf_commit(q, (size_t)n);
            dcb->bytes_read += (uint64_t)n;
            if (dcb->server != NULL) {
                sl__stats_server_bytes(dcb->server, (uint64_t)n, 0);
            }
            stamp(&dcb->last_read_ms);
            total += (size_t)n;
            if ((size_t)n < avail && dcb->tls == NULL && !to_eof) {
                return READ_DRAINED;
            }
        } else if (n == 0) {
            return READ_EOF;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return READ_DRAINED;
        } else if (errno != EINTR) {
            return READ_EOF;
        }
    }
    return READ_MORE;
}

static void
hangup(struct sl_dcb *dcb, const char *why)
{
    if (dcb->role == SL_DCB_BACKEND && dcb->backend != NULL) {
        sl__backend_dcb_failed(dcb->backend, why);
    } else {
        sl_log_debug("DCB %llu (%s): %s", (unsigned long long)dcb->id,
                     dcb->remote, why);
        sl_dcb_close(dcb);
    }
}

/* c->remote: the address as text, an IPv4-mapped IPv6 address as IPv4. */
static void
set_remote(struct sl_dcb *c, int family, const void *a)
{
    inet_ntop(family, a, c->remote, sizeof(c->remote));
    if (strncmp(c->remote, "::ffff:", 7) == 0 && strchr(c->remote, '.')) {
        memmove(c->remote, c->remote + 7, strlen(c->remote + 7) + 1);
    }
}

/* Refuse a client's PROXY header: log why, answer an error, close. */
static void
pp_refuse(struct sl_dcb *c, uint16_t code, const char *what, const char *why)
{
    char msg[400];

    sl_log_warn("listener '%s': refused client %s: %s%s%s", c->listener->name,
                c->remote, what, why != NULL ? ": " : "",
                why != NULL ? why : "");
    snprintf(msg, sizeof(msg), "%s%s%s", what, why != NULL ? ": " : "",
             why != NULL ? why : "");
    c->protocol->client_error(c, code, "08S01", msg);
    sl_dcb_close(c);
}

/* A client from proxy_protocol_networks, admitted uncapped, has sent its
 * header (or none): re-count its pending login under the address it now
 * has, capped (max_pending_logins_per_host, max_connections). false if
 * refused (c closed). */
static bool
pp_readmit(struct sl_dcb *c, const char *old)
{
    int rc;

    if (!c->pending_login) {
        return true;
    }
    sl__pending_done(c->service, old);
    c->pending_login = false;
    rc = sl__pending_admit(c->service, c->remote, true);
    if (rc == 0) {
        c->pending_login = true;
        return true;
    }
    sl_log_warn("service '%s': refused %s (behind a PROXY header from %s): "
                "too many connections from it%s", c->service->name,
                c->remote, old,
                rc == -EUSERS ? " are logging in already "
                                "(max_pending_logins_per_host)" : "");
    c->protocol->client_error(c, 1040, "08004", "Too many connections");
    sl_dcb_close(c);
    return false;
}

/*
 * A client's first bytes: a PROXY protocol header (v1 or v2) is taken
 * only from the networks in its listener's proxy_protocol_networks; its
 * source address becomes the client's. 1: go on to the protocol (with
 * what follows the header), 0: wait for more bytes, -1: refused (closed).
 * A header that never completes is cut off by auth_timeout
 * (close_overdue).
 */
static int
pp_intake(struct sl_dcb *c)
{
    size_t len = c->readq.len < SL_PP_V2_MAX ? c->readq.len : SL_PP_V2_MAX;
    const uint8_t *p = sl_buf_pullup(&c->readq, len);
    struct sl_pp_header h;
    const char *why = NULL;
    char old[sizeof(c->remote)];
    int n;

    if (p == NULL) {
        return len == 0 ? 0 : -1;
    }
    switch (sl__pp_detect(p, len)) {
    case SL_PP_NOT_HEADER:
        c->pp_pending = false;
        return c->pp_trusted && !pp_readmit(c, c->remote) ? -1 : 1;
    case SL_PP_UNDECIDED:
        return 0;
    case SL_PP_IS_HEADER:
        break;
    }
    if (!c->pp_trusted) {
        pp_refuse(c, 1130, "PROXY protocol header from a host not in "
                  "proxy_protocol_networks", NULL);
        return -1;
    }
    n = sl__pp_parse(p, len, &h, &why);
    if (n == SL_PP_NEED_MORE) {
        return 0;
    }
    if (n < 0) {
        pp_refuse(c, 1043, "malformed PROXY protocol header", why);
        return -1;
    }
    sl_buf_consume(&c->readq, (size_t)n);
    c->pp_pending = false;
    snprintf(old, sizeof(old), "%s", c->remote);
    if (h.family == AF_UNSPEC) {
        sl_log_info("listener '%s': client %s: PROXY header v%d without "
                    "an address (LOCAL/UNKNOWN)", c->listener->name,
                    c->remote, h.version);
        return pp_readmit(c, old) ? 1 : -1;
    }
    memcpy(&c->peer, &h.src, sizeof(c->peer));
    memcpy(&c->local, &h.dst, sizeof(c->local));
    set_remote(c, h.family,
               h.family == AF_INET ? (const void *)&c->peer.in.sin_addr
                                   : (const void *)&c->peer.in6.sin6_addr);
    sl_log_info("listener '%s': client %s is %s (PROXY header v%d)",
                c->listener->name, old, c->remote, h.version);
    return pp_readmit(c, old) ? 1 : -1;
}

/* Decode what the codec can of rawq into readq. false if the input was
 * refused (the DCB is closed). */
static bool
decode(struct sl_dcb *dcb)
{
    if (dcb->codec == NULL || dcb->rawq.len == 0) {
        return true;
    }
    if (dcb->codec->decode(dcb->codec_ctx, &dcb->rawq, &dcb->readq) != 0) {
        if (dcb->state != DCB_CLOSED) {
            hangup(dcb, "undecodable input (protocol compression)");
        }
        return false;
    }
    return true;
}

/* Pass newly read bytes to the protocol. false if the DCB closed. */
static bool
deliver(struct sl_dcb *dcb)
{
    int rc;

    if (!decode(dcb)) {
        return false;
    }
    if (dcb->role == SL_DCB_CLIENT && dcb->pp_pending) {
        rc = pp_intake(dcb);
        if (rc <= 0 || dcb->readq.len == 0) {
            return rc >= 0 && dcb->state != DCB_CLOSED;
        }
    }
    if (dcb->role == SL_DCB_CLIENT) {
        rc = dcb->protocol->client_read(dcb);
    } else {
        rc = dcb->protocol->backend_read(dcb);
    }
    if (rc == SL_ERROR && dcb->state != DCB_CLOSED) {
        hangup(dcb, "protocol error");
    }
    return dcb->state != DCB_CLOSED;
}

/* A spliced DCB (splice.c) had an event: a close, or bytes the BPF
 * program left to Sluice. Those go to the peer as they are (never parsed:
 * the protocol state stands still while the kernel forwards). */
static uint32_t
spliced_events(struct sl_dcb *dcb)
{
    enum read_result r = read_some(dcb, false);
    struct sl_dcb *peer;
    struct sl_buf *out;
    size_t skip = 0;
    int tb = 0;

    if (dcb->role == SL_DCB_CLIENT && dcb->readq.len > 0) {
        tb = sl__splice_take_back(dcb, &skip);
    }
    if (tb < 0) {
        sl_buf_reset(&dcb->readq);
        hangup(dcb, "kernel forwarding: the session could not be taken "
                    "back");
        return 0;
    } else if (tb > 0) {
        /* Back to user space for good: the BPF program left a command to
         * Sluice. The first skip bytes end a packet the kernel forwarded
         * the start of: they go to the server as they are (all of the
         * diverted skb is with the socket, so reading finds them). */
        while (dcb->readq.len < skip && r == READ_MORE) {
            r = read_some(dcb, false);
        }
        peer = skip > 0 ? sl__splice_backend(dcb->session) : NULL;
        if (skip > 0) {
            out = peer != NULL && dcb->readq.len >= skip ? sl_buf_new()
                                                          : NULL;
            if (out != NULL && sl_buf_split(&dcb->readq, skip, out) != 0) {
                sl_buf_free(out);
                out = NULL;
            }
            if (out == NULL || sl_dcb_write(peer, out) != 0) {
                sl_buf_reset(&dcb->readq);
                hangup(dcb, "kernel forwarding: the end of a forwarded "
                            "packet could not be passed on");
                return 0;
            }
        }
        if (dcb->readq.len > 0 && !deliver(dcb)) {
            return 0;
        }
    } else if (dcb->readq.len > 0) {
        peer = sl__splice_peer(dcb);
        out = peer != NULL ? sl_buf_new() : NULL;
        if (out == NULL) {
            sl_buf_reset(&dcb->readq);
            hangup(dcb, "kernel forwarding: bytes with no peer");
            return 0;
        }
        sl_buf_append(out, &dcb->readq);
        if (sl_dcb_write(peer, out) != 0) {
            hangup(dcb, "kernel forwarding: the peer is gone");
            return 0;
        }
    }
    if (r == READ_EOF) {
        hangup(dcb, "connection closed by peer");
        return 0;
    }
    return r == READ_MORE ? EPOLLIN : 0;
}

/* Backend: the non-blocking connect finished. false if it failed. */
static bool
connect_done(struct sl_dcb *dcb)
{
    int err = 0;
    socklen_t len = sizeof(err);
    char why[256];

    if (getsockopt(dcb->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
    }
    if (err != 0) {
        snprintf(why, sizeof(why), SL_BACKEND_CONNECT_FAILED " '%s' failed: %s",
                 dcb->server != NULL ? dcb->server->name : "?",
                 strerror(err));
        sl__backend_dcb_failed(dcb->backend, why);
        return false;
    }
    dcb->connecting = false;
    if (dcb->backend->state == SL_BACKEND_CONNECTING) {
        dcb->backend->state = SL_BACKEND_AUTHENTICATING;
    }
    return true;
}

/* Drive a TLS handshake and map TLS's cross-direction needs onto the
 * event set. false if the DCB hung up or must wait for more I/O. */
static bool
tls_events(struct sl_dcb *dcb, uint32_t *ev)
{
    char who[300];
    enum sl_rc rc;

    if (sl__tls_handshaking(dcb->tls)) {
        snprintf(who, sizeof(who), "%s %s",
                 dcb->role == SL_DCB_CLIENT ? "client" : "server",
                 dcb->server != NULL ? dcb->server->name : dcb->remote);
        rc = sl__tls_handshake(dcb->tls, who);
        if (rc == SL_ERROR) {
            hangup(dcb, "TLS handshake failed");
            return false;
        }
        if (rc == SL_AGAIN) {
            return false;
        }
        /* done: send what queued up, read what may have come along */
        *ev |= EPOLLOUT | EPOLLIN;
    }
    if ((*ev & EPOLLOUT) && sl__tls_read_wants_write(dcb->tls)) {
        *ev |= EPOLLIN;
    }
    if ((*ev & EPOLLIN) && sl__tls_write_wants_read(dcb->tls)) {
        *ev |= EPOLLOUT;
    }
    return true;
}

/* A client still not logged in auth_timeout after its accept. */
static bool
login_overdue(const struct sl_dcb *c, uint64_t now)
{
    uint64_t limit;

    /* Clients only: a listener DCB that the admin thread is still setting
     * up (it is on the list from its allocation) is not read at all. */
    if (c->role != SL_DCB_CLIENT) {
        return false;
    }
    limit = c->service != NULL ? c->service->auth_timeout_ms : 0;
    /* now > accept_ms: in the shared model the accepting worker's clock
     * may be ahead of the one looking */
    return c->pending_login && c->state == DCB_POLLING && limit > 0 &&
           now > c->accept_ms && now - c->accept_ms > limit;
}

/* In the client's own turn (so no other worker is processing it, and in
 * the shared model it has no session lock to take): close it. */
static void
close_overdue(struct sl_dcb *c)
{
    if (c->pp_pending && c->readq.len > 0) {
        sl_log_warn("listener '%s': closing client %s: its PROXY protocol "
                    "header is incomplete after %llu s (auth_timeout)",
                    c->listener->name, c->remote,
                    (unsigned long long)(sl_worker_now_ms() - c->accept_ms) /
                        1000);
        sl_dcb_close(c);
        return;
    }
    sl_log_notice("closing client %s of service '%s': not logged in after "
                  "%llu s (auth_timeout)", c->remote, c->service->name,
                  (unsigned long long)(sl_worker_now_ms() - c->accept_ms) /
                      1000);
    sl_dcb_close(c);
}

static uint32_t
conn_events(struct sl_dcb *dcb, uint32_t ev)
{
    enum read_result r;
    size_t before;
    int rc;

    if (dcb->connecting) {
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) || !connect_done(dcb)) {
            return 0;
        }
        ev |= EPOLLOUT;
    }
    if (login_overdue(dcb, sl_worker_now_ms())) {
        close_overdue(dcb);
        return 0;
    }
    if (dcb->tls != NULL && !tls_events(dcb, &ev)) {
        return 0;
    }
    if (ev & EPOLLOUT) {
        dcb->write_blocked = false;
        rc = flush(dcb);
        if (rc != 0) {
            write_failed(dcb, -rc);
        }
        check_backpressure(dcb);
    }
    if (!(ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        return 0;
    }
    if (dcb->spliced) {
        return spliced_events(dcb);
    }
    if (dcb->reading_paused) {
        if (dcb->role == SL_DCB_CLIENT &&
            (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
            /* A client paused because a backend is congested still
             * hangs up at once: its session's statements must not run
             * on (kill_on_client_close) while nobody waits for them. */
            hangup(dcb, "connection closed by peer");
            return 0;
        }
        dcb->read_deferred = true;
        return 0;
    }
    before = dcb->readq.len + dcb->rawq.len;
    r = read_some(dcb, (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
    if (dcb->readq.len + dcb->rawq.len > before && !deliver(dcb)) {
        return 0;
    }
    if (r == READ_EOF) {
        hangup(dcb, "connection closed by peer");
        return 0;
    }
    if (r == READ_MORE) {
        if (dcb->reading_paused) {
            dcb->read_deferred = true;
            return 0;
        }
        return EPOLLIN;
    }
    return 0;
}

/* ---- client timeouts: one sweep a second per worker ----
 *
 * connection_timeout and net_write_timeout close sessions from the sweep
 * under the session lock; auth_timeout closes clients that never logged
 * in (no session, so no lock to serialise on in the shared model) by
 * queueing them for their own turn, which checks the deadline again. */

#define SWEEP_MS 1000

static __thread bool sweep_armed;

/* Why c must be closed now ("" = keep). */
static const char *
timed_out(const struct sl_dcb *c, uint64_t now, char *why, size_t len)
{
    const struct sl_service *svc = c->service;
    uint64_t read_ms, wrote_ms, idle_since, stalled, idle, nwt, ct;
    bool pending;

    why[0] = '\0';
    if (svc == NULL || c->state != DCB_POLLING || c->session == NULL) {
        return why;
    }
    read_ms = atomic_load_explicit(&c->last_read_ms, memory_order_relaxed);
    wrote_ms = atomic_load_explicit(&c->write_progress_ms,
                                    memory_order_relaxed);
    pending = atomic_load_explicit(&c->write_pending, memory_order_relaxed);
    idle_since = read_ms > wrote_ms ? read_ms : wrote_ms;
    /* Stamps may come from another worker's clock, a little ahead of
     * ours (shared model): that is no time at all, not 2^64 ms. */
    stalled = now > wrote_ms ? now - wrote_ms : 0;
    idle = now > idle_since ? now - idle_since : 0;
    /* both may be changed by a PATCH (runtime.c, relaxed stores) */
    nwt = __atomic_load_n(&svc->net_write_timeout_ms, __ATOMIC_RELAXED);
    ct = __atomic_load_n(&svc->connection_timeout_ms, __ATOMIC_RELAXED);
    if (nwt > 0 && pending && stalled > nwt) {
        snprintf(why, len, "no write progress for %llu s "
                 "(net_write_timeout)", (unsigned long long)stalled / 1000);
    } else if (ct > 0 && !pending && idle > ct) {
        snprintf(why, len, "idle for %llu s (connection_timeout)",
                 (unsigned long long)idle / 1000);
    }
    return why;
}

/* connection_keepalive: whether backend DCB d has moved no byte for its
 * service's connection_keepalive (the pre-check without the session
 * lock; sl__backend_keepalive checks everything again under it). */
static bool
keepalive_due(const struct sl_dcb *d, uint64_t now)
{
    const struct sl_session *ses = d->session;
    uint64_t ka;

    /* not internal (tee) sessions, nor kernel-forwarded ones (their
     * stamps never move): they would be due at every sweep */
    if (d->role != SL_DCB_BACKEND || d->state != DCB_POLLING ||
        ses == NULL || d->backend == NULL || ses->client == NULL ||
        __atomic_load_n(&ses->client->spliced, __ATOMIC_RELAXED) ||
        atomic_load_explicit(&d->write_pending, memory_order_relaxed)) {
        return false;
    }
    ka = __atomic_load_n(&ses->service->keepalive_ms, __ATOMIC_RELAXED);
    return ka > 0 && now >= sl__dcb_last_io_ms(d) + ka;
}

/* A kernel-forwarded client's once-a-second work (sl__splice_sweep: its
 * counters folded into the statistics, its timeouts): under the session's
 * lock, which in the shared model another worker running the session may
 * hold; then this sweep leaves it to the next (never waits on a session
 * while holding dcb_lock). True when the session is to be closed or
 * demoted (the caller acts on it, checking again under the lock). */
static bool
splice_due(struct sl_dcb *d, uint64_t now, char *why, size_t len)
{
    int rc;

    if (!sl__session_trylock_for_event(atomic_load(&d->session))) {
        return false;
    }
    rc = sl__splice_sweep(d, now, why, len);
    sl__session_unlock_event();
    return rc != SL__SPLICE_KEEP;
}

/* Close the client DCBs of this worker that timed out (at most 64 a
 * second, the rest at the next sweep), and ping the idle backends
 * (connection_keepalive; all that are due: a backend busy with a long
 * statement is due at every sweep and must not crowd out the others).
 * Collected under the list lock, handled outside it (as in
 * sl__dcb_close_all). */
static bool
sweep(void *arg)
{
    struct sl_worker *w = sl_worker_current();
    uint64_t now = sl_worker_now_ms();
    struct sl_dcb *late[64];
    struct sl_dcb *idle_stack[64];
    struct sl_dcb **idle = idle_stack;
    char why[128];
    size_t n = 0;
    size_t nidle = 0;
    size_t idle_cap = 64;

    (void)arg;
    pthread_mutex_lock(&w->dcb_lock);
    for (struct sl_dcb *d = w->dcbs; d != NULL; d = d->list_next) {
        if (login_overdue(d, now)) {
            /* Its own turn closes it (conn_events). A DCB closed by
             * another worker meanwhile stays allocated until this turn
             * ends (zombie epochs), and its handler ignores the event. */
            sl__worker_notify(d->worker, &d->ev, EPOLLIN);
        } else if (n < 64 && d->role == SL_DCB_CLIENT &&
                   ((__atomic_load_n(&d->spliced, __ATOMIC_RELAXED) &&
                     splice_due(d, now, why, sizeof(why))) ||
                    timed_out(d, now, why, sizeof(why))[0] != '\0')) {
            sl_dcb_ref(d);
            late[n++] = d;
        } else if (keepalive_due(d, now)) {
            if (nidle == idle_cap) {
                struct sl_dcb **more = malloc(2 * idle_cap * sizeof(*more));

                if (more == NULL) {
                    continue;   /* the next sweep */
                }
                memcpy(more, idle, nidle * sizeof(*more));
                if (idle != idle_stack) {
                    free(idle);
                }
                idle = more;
                idle_cap *= 2;
            }
            sl_dcb_ref(d);
            idle[nidle++] = d;
        }
    }
    pthread_mutex_unlock(&w->dcb_lock);
    for (size_t i = 0; i < nidle; i++) {
        struct sl_dcb *d = idle[i];
        struct sl_session *ses = atomic_load(&d->session);

        /* still that session's (a pooled backend has none, pool.c) */
        sl__session_lock_for_event(ses);
        if (ses != NULL && atomic_load(&d->session) == ses &&
            d->state == DCB_POLLING && d->backend != NULL) {
            sl__backend_keepalive(d->backend, sl_worker_now_ms());
        }
        sl__session_unlock_event();
        sl_dcb_unref(d);
    }
    if (idle != idle_stack) {
        free(idle);
    }
    for (size_t i = 0; i < n; i++) {
        struct sl_dcb *d = late[i];

        int sp = SL__SPLICE_KEEP;

        sl__session_lock_for_event(d->session);
        if (d->spliced) {
            sp = sl__splice_sweep(d, sl_worker_now_ms(), why, sizeof(why));
        }
        if (sp == SL__SPLICE_TIMED_OUT ||
            (sp == SL__SPLICE_KEEP &&
             timed_out(d, sl_worker_now_ms(), why, sizeof(why))[0] != '\0')) {
            sl_log_notice("closing client %s@%s of service '%s' (session "
                          "%llu): %s", sl_session_user(d->session),
                          d->remote, d->service->name,
                          (unsigned long long)sl_session_id(d->session), why);
            sl_dcb_close(d);
        } else if (sp == SL__SPLICE_ROLE_LOST) {
            sl__splice_role_lost(d);
        }
        sl__session_unlock_event();
        sl_dcb_unref(d);
    }
    return true;
}

static void
arm_sweep(void)
{
    if (!sweep_armed && sl_worker_current() != NULL) {
        sweep_armed = sl_worker_add_timer(SWEEP_MS, sweep, NULL) != 0;
    }
}

static struct sl_dcb *
new_client(struct sl_dcb *ldcb, int fd, const struct sockaddr_storage *ss)
{
    struct sl_dcb *c = sl__dcb_alloc(SL_DCB_CLIENT, fd);
    int one = 1;

    if (c == NULL) {
        close(fd);
        return NULL;
    }
    c->listener = ldcb->listener;
    c->service = ldcb->listener->service;
    hold_objects(c);
    c->protocol = ldcb->listener->protocol;
    c->pp_pending = true;
    if (ss->ss_family == AF_UNIX) {
        c->is_unix = true;
        c->peer.sa.sa_family = AF_UNIX;
        snprintf(c->remote, sizeof(c->remote), "localhost");
    } else {
        const void *a = ss->ss_family == AF_INET
                            ? (const void *)&((const struct sockaddr_in *)ss)
                                  ->sin_addr
                            : (const void *)&((const struct sockaddr_in6 *)ss)
                                  ->sin6_addr;

        memcpy(&c->peer, ss, ss->ss_family == AF_INET
                                 ? sizeof(struct sockaddr_in)
                                 : sizeof(struct sockaddr_in6));
        set_remote(c, ss->ss_family, a);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    }
    c->pp_trusted = sl__pp_networks_match(c->listener->pp_nets,
                                          c->listener->pp_nnets, &c->peer.sa);
    atomic_fetch_add(&c->listener->connections, 1);
    atomic_fetch_add(&c->listener->connections_total, 1);
    c->accept_ms = sl_worker_now_ms();
    atomic_store_explicit(&c->last_read_ms, c->accept_ms,
                          memory_order_relaxed);
    atomic_store_explicit(&c->write_progress_ms, c->accept_ms,
                          memory_order_relaxed);
    arm_sweep();
    return c;
}

void
sl__dcb_login_done(struct sl_dcb *dcb)
{
    if (dcb->pending_login) {
        dcb->pending_login = false;
        sl__pending_done(dcb->service, dcb->remote);
    }
}

/* Count c as a pending login, or refuse it in place of the greeting:
 * 1040 when the service is full (sessions and pending logins against
 * max_connections) or the host has max_pending_logins_per_host pending
 * (TCP clients only).
 * false if refused (c still to be closed). */
static bool
admit(struct sl_dcb *c)
{
    char msg[sizeof(c->remote) + 64];
    /* Unix-socket clients are local: a pool starting up on this host may
     * well have hundreds logging in at once (while the accounts load).
     * Clients that may send a PROXY header (a load balancer's) are capped
     * once it is read, by the address it carries (pp_readmit). */
    int rc = sl__pending_admit(c->service, c->remote,
                               !c->is_unix && !c->pp_trusted);

    if (rc == 0) {
        c->pending_login = true;
        return true;
    }
    if (rc == -EUSERS) {
        sl_log_warn("service '%s': refused %s: %u connections from it are "
                    "logging in already (max_pending_logins_per_host)",
                    c->service->name, c->remote,
                    c->service->max_pending_logins_per_host);
        snprintf(msg, sizeof(msg), "Too many connections from '%s' that "
                 "have not logged in yet", c->remote);
    } else {
        sl_log_warn("service '%s': too many connections from %s "
                    "(max_connections, counting the ones logging in)",
                    c->service->name, c->remote);
        snprintf(msg, sizeof(msg), "Too many connections");
    }
    c->protocol->client_error(c, 1040, "08004", msg);
    return false;
}

static void
accept_one(struct sl_dcb *ldcb, int fd, const struct sockaddr_storage *ss)
{
    struct sl_dcb *c = new_client(ldcb, fd, ss);
    int rc;

    if (c == NULL) {
        return;
    }
    if (!admit(c)) {
        sl_dcb_close(c);
        return;
    }
    c->accept_done = true;
    if (c->protocol->client_accept(c) == SL_ERROR) {
        sl_dcb_close(c);
        return;
    }
    /* registered only now: in the shared model no other thread may see
     * the DCB before client_accept has set it up */
    if (c->state != DCB_CLOSED && (rc = sl__dcb_add(c)) != 0) {
        sl_log_error("cannot poll client %s: %s", c->remote, strerror(-rc));
        sl_dcb_close(c);
    }
}

static uint32_t
listener_events(struct sl_dcb *ldcb)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fd;
    int i;

    for (i = 0; i < ACCEPT_BUDGET; i++) {
        len = sizeof(ss);
        fd = accept4(ldcb->fd, (struct sockaddr *)&ss, &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                sl_log_warn("listener '%s': accept failed: %s",
                            ldcb->listener->name, strerror(errno));
            }
            return 0;
        }
        if (sl_worker_current() != NULL) {
            sl_worker_current()->accepts++;
        }
        accept_one(ldcb, fd, &ss);
    }
    return EPOLLIN;   /* more may be waiting: back to the tail */
}

/* ---- work posted to a DCB's turn ---- */

struct dcb_post {
    struct dcb_post *next;
    sl_dcb_fn fn;
    void *arg;
};

/* Event bit of a DCB's queue item meaning "posts waiting" (not an epoll
 * bit: epoll uses the low 16 and the top four). */
#define DCB_EV_POSTED (1u << 24)

/* In dcb_handler, before anything else and whether or not the DCB is
 * closed (each post holds a reference): the posted functions, oldest
 * first. They run in the DCB's own event turn, so never beside another
 * worker handling the same DCB -- also when it has no session to lock (a
 * login parked for an accounts reload). */
static void
run_posts(struct sl_dcb *dcb)
{
    struct dcb_post *p = atomic_exchange(&dcb->posts, NULL);
    struct dcb_post *fifo = NULL;

    while (p != NULL) {
        struct dcb_post *next = p->next;

        p->next = fifo;
        fifo = p;
        p = next;
    }
    while ((p = fifo) != NULL) {
        fifo = p->next;
        p->fn(dcb, p->arg);
        sl_dcb_unref(dcb);
        free(p);
    }
}

/* A message on the DCB's worker: give the DCB a turn for its posts (the
 * message holds a reference: a turn may have run the posts meanwhile). */
static void
notify_posted(void *arg)
{
    struct sl_dcb *dcb = arg;

    sl__worker_notify(dcb->worker, &dcb->ev, DCB_EV_POSTED);
    sl_dcb_unref(dcb);
}

int
sl_dcb_post(struct sl_dcb *dcb, sl_dcb_fn fn, void *arg)
{
    struct dcb_post *p = malloc(sizeof(*p));
    struct dcb_post *head;

    if (p == NULL) {
        return -ENOMEM;
    }
    p->fn = fn;
    p->arg = arg;
    sl_dcb_ref(dcb);
    head = atomic_load(&dcb->posts);
    do {
        p->next = head;
    } while (!atomic_compare_exchange_weak(&dcb->posts, &head, p));
    sl_dcb_ref(dcb);
    if (sl_worker_post(dcb->worker, notify_posted, dcb) != 0) {
        /* cannot wake the owner: the post runs at the DCB's next event */
        sl_dcb_unref(dcb);
        sl_log_warn("out of memory: work for connection %s waits for its "
                    "next event", dcb->remote);
    }
    return 0;
}

/* A backend DCB's events go to the protocol only while the session whose
 * lock this turn holds (shared model) still has it; a connection in the
 * backend pool (pool.c) has no session, and one taken from the pool
 * since this turn looked is handled in its next turn, under its new
 * session's lock. */
static uint32_t
backend_events(struct sl_dcb *dcb, uint32_t events)
{
    struct sl_session *ses = atomic_load(&dcb->session);

    if (SL_LIKELY(ses != NULL && sl__session_locked(ses))) {
        return conn_events(dcb, events);
    }
    return sl__pool_events(dcb, events);
}

static uint32_t
dcb_handler(struct sl_evq_item *it, uint32_t events)
{
    struct sl_dcb *dcb = (struct sl_dcb *)it;
    uint32_t left = 0;

    if (events & DCB_EV_POSTED) {
        if (dcb->session != NULL) {
            sl__session_lock_for_event(dcb->session);
        }
        run_posts(dcb);   /* also for a closed DCB: each holds a ref */
        events &= ~DCB_EV_POSTED;
    }
    if (dcb->state == DCB_CLOSED) {
        sl__session_unlock_event();
        return 0;
    }
    if (dcb->session != NULL) {
        sl__session_lock_for_event(dcb->session);   /* once per turn */
    }
    if (dcb->state != DCB_CLOSED) {
        switch (dcb->role) {
        case SL_DCB_LISTENER:
            if (lock_listener(dcb)) {
                left = dcb->state != DCB_CLOSED ? listener_events(dcb) : 0;
                pthread_mutex_unlock(&listener_lock);
            } else {
                left = listener_events(dcb);
            }
            break;
        case SL_DCB_CLIENT:
            left = conn_events(dcb, events);
            break;
        case SL_DCB_BACKEND:
            left = backend_events(dcb, events);
            break;
        case SL_DCB_INTERNAL:
            left = dcb->internal_fn(dcb, events, dcb->internal_arg);
            break;
        }
    }
    sl__session_unlock_event();
    return dcb->state == DCB_CLOSED ? 0 : left;
}

/* ---- backends ---- */

static int
resolve(const struct sl_server *srv, struct sockaddr_storage *ss,
        socklen_t *len)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    char port[16];
    int rc;

    memset(ss, 0, sizeof(*ss));
    if (srv->socket[0] != '\0') {
        struct sockaddr_un *un = (struct sockaddr_un *)ss;

        un->sun_family = AF_UNIX;
        snprintf(un->sun_path, sizeof(un->sun_path), "%s", srv->socket);
        *len = sizeof(*un);
        return 0;
    }
    snprintf(port, sizeof(port), "%d", srv->port);
    hints.ai_flags = AI_NUMERICSERV;
    rc = getaddrinfo(srv->address, port, &hints, &res);
    if (rc != 0) {
        sl_log_error("server '%s': cannot resolve '%s': %s", srv->name,
                     srv->address, gai_strerror(rc));
        return -EHOSTUNREACH;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/*
 * proxy_protocol=true: queue the PROXY v1 header on a new backend
 * connection, sent first once the connect completes (the server speaks
 * first in the MariaDB protocol, so nothing else is queued before it):
 * the client's address (its PROXY header's if it sent one) and the
 * address it connected to; an internal session (tee) speaks for its
 * parent's client. A unix-socket client sends "PROXY UNKNOWN": the server
 * treats the connection as Sluice's own.
 */
int
sl__dcb_proxy_header(struct sl_dcb *dcb, const struct sl_session *ses)
{
    const struct sl_dcb *c = ses->client;
    union sl_pp_addr local = ses->local;
    int fam = ses->peer.sa.sa_family;
    char hdr[SL_PP_V1_MAX + 1];
    size_t n;

    if (local.sa.sa_family == 0 && c != NULL && !c->is_unix && c->fd >= 0) {
        socklen_t len = sizeof(local);

        if (getsockname(c->fd, &local.sa, &len) != 0) {
            local.sa.sa_family = 0;
        }
    }
    n = sl__pp_write_v1(hdr, sizeof(hdr),
                        fam == AF_INET || fam == AF_INET6 ? &ses->peer.sa
                                                          : NULL,
                        local.sa.sa_family != 0 ? &local.sa : NULL);
    if (n == 0 || sl_buf_append_data(&dcb->writeq, hdr, n) != 0) {
        sl_log_error("server '%s': cannot queue the PROXY protocol header",
                     dcb->server->name);
        return -1;
    }
    note_writeq(dcb);
    return 0;
}

/* ---- local_address ---- */

static struct {
    struct sockaddr_storage ss;
    socklen_t len;                    /* 0: unset */
    char text[INET6_ADDRSTRLEN];
} local_addr;

int
sl__local_address_set(const char *addr)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)&local_addr.ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&local_addr.ss;

    memset(&local_addr, 0, sizeof(local_addr));
    if (addr == NULL || addr[0] == '\0') {
        return 0;
    }
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        local_addr.len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        local_addr.len = sizeof(*v6);
    } else {
        return -1;
    }
    snprintf(local_addr.text, sizeof(local_addr.text), "%s", addr);
    return 0;
}

const char *
sl__local_address(void)
{
    return local_addr.len ? local_addr.text : NULL;
}

int
sl__local_address_bind(int fd, int fam)
{
    int one = 1;

    if (local_addr.len == 0) {
        return 0;
    }
    if (fam != local_addr.ss.ss_family) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    /* the port is chosen by connect(), per destination: bind() alone
     * would reserve one port per connection for every destination */
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    return bind(fd, (struct sockaddr *)&local_addr.ss, local_addr.len);
}

/*
 * max_routing_connections: count one more backend connection to srv
 * (server->connections: open and pooled ones, every worker) unless that
 * would pass the limit. One atomic add, then a check: two workers racing
 * for the last slot may both be refused for a moment, never both let in,
 * so the server never sees more than the limit from Sluice. false (logged,
 * counted) when the limit is reached.
 */
static bool
routing_slot_take(struct sl_server *srv)
{
    int64_t max = __atomic_load_n(&srv->max_routing_conns, __ATOMIC_RELAXED);
    int64_t n = atomic_fetch_add(&srv->connections, 1) + 1;

    if (max > 0 && n > max) {
        atomic_fetch_sub(&srv->connections, 1);
        atomic_fetch_add_explicit(&srv->routing_conns_refused, 1,
                                  memory_order_relaxed);
        sl_log_warn("server '%s': max_routing_connections (%lld) reached; "
                    "a session's connection to it is refused", srv->name,
                    (long long)max);
        return false;
    }
    return true;
}

static void
routing_slot_give(struct sl_server *srv)
{
    atomic_fetch_sub(&srv->connections, 1);
}

/* Open a non-blocking connection for backend b and poll it. */
struct sl_dcb *
sl__dcb_connect_backend(struct sl_backend *b)
{
    struct sockaddr_storage ss;
    socklen_t len;
    struct sl_dcb *dcb;
    int one = 1;
    int fd;

    if (!routing_slot_take(b->server)) {
        return NULL;
    }
    if (resolve(b->server, &ss, &len) != 0) {
        routing_slot_give(b->server);
        return NULL;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        sl_log_error("server '%s': socket: %s", b->server->name,
                     strerror(errno));
        routing_slot_give(b->server);
        return NULL;
    }
    if (ss.ss_family != AF_UNIX) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        if (sl__local_address_bind(fd, ss.ss_family) != 0) {
            sl_log_error("server '%s': cannot bind to local_address %s: %s",
                         b->server->name, sl__local_address(),
                         strerror(errno));
            close(fd);
            routing_slot_give(b->server);
            return NULL;
        }
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 &&
        errno != EINPROGRESS) {
        sl_log_error("server '%s': connect: %s", b->server->name,
                     strerror(errno));
        close(fd);
        routing_slot_give(b->server);
        return NULL;
    }
    dcb = sl__dcb_alloc(SL_DCB_BACKEND, fd);
    if (dcb == NULL) {
        close(fd);
        routing_slot_give(b->server);
        return NULL;
    }
    dcb->connecting = true;   /* EPOLLOUT + SO_ERROR tell the outcome */
    dcb->is_unix = ss.ss_family == AF_UNIX;
    dcb->server = b->server;
    hold_objects(dcb);
    dcb->backend = b;
    snprintf(dcb->remote, sizeof(dcb->remote), "%s",
             dcb->is_unix ? "localhost" : b->server->address);
    /* server->connections was counted by routing_slot_take; the close
     * (sl__dcb_close) gives it back */
    atomic_fetch_add(&b->server->total_connections, 1);
    return dcb;
}

/* ---- listeners ---- */

static int
listen_socket(struct sl_listener *l)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    char port[16];
    int one = 1;
    int fd;
    int rc;

    snprintf(port, sizeof(port), "%d", l->port);
    rc = getaddrinfo(l->address[0] ? l->address : NULL, port, &hints, &res);
    if (rc != 0) {
        sl_log_error("listener '%s': cannot resolve '%s': %s", l->name,
                     l->address, gai_strerror(rc));
        return -EINVAL;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        rc = -errno;
        goto out_free;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
        listen(fd, LISTEN_BACKLOG) != 0) {
        rc = -errno;
        close(fd);
        goto out_free;
    }
    rc = fd;
out_free:
    freeaddrinfo(res);
    if (rc < 0) {
        sl_log_error("listener '%s': cannot listen on %s:%d: %s", l->name,
                     l->address[0] ? l->address : "*", l->port,
                     strerror(-rc));
    }
    return rc;
}

static int
listen_unix(struct sl_listener *l)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    int fd;
    int rc;

    snprintf(un.sun_path, sizeof(un.sun_path), "%s", l->socket);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        goto out_log;
    }
    unlink(l->socket);   /* a stale socket from an earlier run */
    if (bind(fd, (struct sockaddr *)&un, sizeof(un)) != 0 ||
        chmod(l->socket, 0777) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
        rc = -errno;
        close(fd);
        goto out_log;
    }
    return fd;
out_log:
    sl_log_error("listener '%s': cannot listen on socket %s: %s", l->name,
                 l->socket, strerror(-rc));
    return rc;
}

static void
lrec_dcb_closed(struct sl_dcb *dcb)
{
    struct lrec *r;
    int i;

    pthread_mutex_lock(&lrec_lock);
    for (r = lrecs; r != NULL && r->l != dcb->listener; r = r->next) {
    }
    for (i = 0; r != NULL && i < r->ndcbs; i++) {
        if (r->dcbs[i] == dcb) {
            r->dcbs[i] = NULL;
            sl_dcb_unref(dcb);   /* the record's reference */
        }
    }
    if (r != NULL && --r->open == 0 && r->l->fd >= 0) {
        close(r->l->fd);
        if (r->l->socket[0] != '\0') {
            unlink(r->l->socket);
        }
        /* the REST thread waits for this (runtime.c, listener_closed) to
         * bind the address again: a release store, after close/unlink */
        __atomic_store_n(&r->l->fd, -1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&lrec_lock);
}

static struct lrec *
lrec_new(struct sl_listener *l, int n)
{
    struct lrec *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    r->dcbs = calloc((size_t)n, sizeof(*r->dcbs));
    if (r->dcbs == NULL) {
        free(r);
        return NULL;
    }
    r->l = l;
    pthread_mutex_lock(&lrec_lock);
    r->next = lrecs;
    lrecs = r;
    pthread_mutex_unlock(&lrec_lock);
    return r;
}

int
sl__listener_start(struct sl_listener *l)
{
    int n = sl__workers_shared() ? 1 : sl_worker_count();
    struct lrec *r;
    struct sl_dcb *d;
    int fd;
    int rc;
    int i;

    fd = l->socket[0] != '\0' ? listen_unix(l) : listen_socket(l);
    if (fd < 0) {
        return fd;
    }
    l->fd = fd;
    r = lrec_new(l, n);
    if (r == NULL) {
        close(fd);
        l->fd = -1;
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        d = dcb_alloc_on(SL_DCB_LISTENER, fd, sl_worker_get(i));
        if (d == NULL) {
            return -ENOMEM;
        }
        d->owns_fd = false;
        d->listener = l;
        d->service = l->service;
        hold_objects(d);
        d->protocol = l->protocol;
        snprintf(d->remote, sizeof(d->remote), "%s", l->name);
        sl_dcb_ref(d);   /* held by the record until the listener stops */
        pthread_mutex_lock(&lrec_lock);
        r->dcbs[r->ndcbs++] = d;
        r->open++;
        pthread_mutex_unlock(&lrec_lock);
        rc = sl__dcb_add(d);
        if (rc != 0) {
            sl_log_error("listener '%s': cannot poll: %s", l->name,
                         strerror(-rc));
            return rc;
        }
    }
    if (l->socket[0] != '\0') {
        sl_log_notice("listening on %s (listener '%s')", l->socket, l->name);
    } else {
        sl_log_notice("listening on %s:%d (listener '%s')",
                      l->address[0] ? l->address : "*", l->port, l->name);
    }
    return 0;
}

static void
close_listener_msg(void *arg)
{
    struct sl_dcb *d = arg;

    sl_dcb_close(d);
    sl_dcb_unref(d);
}

void
sl__listener_stop(struct sl_listener *l)
{
    struct sl_dcb **todo;
    struct lrec *r;
    int n = 0;
    int i;

    pthread_mutex_lock(&lrec_lock);
    for (r = lrecs; r != NULL && r->l != l; r = r->next) {
    }
    todo = calloc(r != NULL ? (size_t)r->ndcbs + 1 : 1, sizeof(*todo));
    for (i = 0; todo != NULL && r != NULL && i < r->ndcbs; i++) {
        if (r->dcbs[i] != NULL) {
            sl_dcb_ref(r->dcbs[i]);   /* the message's reference */
            todo[n++] = r->dcbs[i];
        }
    }
    pthread_mutex_unlock(&lrec_lock);
    for (i = 0; i < n; i++) {
        if (sl__workers_running() &&
            sl_worker_post(todo[i]->worker, close_listener_msg, todo[i]) == 0) {
            continue;
        }
        close_listener_msg(todo[i]);
    }
    free(todo);
}

/* ---- accessors ---- */

void
sl_dcb_ref(struct sl_dcb *dcb)
{
    atomic_fetch_add(&dcb->refs, 1);
}

void
sl_dcb_unref(struct sl_dcb *dcb)
{
    /* the reaper frees it once it is a zombie and this reached 0 */
    atomic_fetch_sub(&dcb->refs, 1);
}

bool
sl_dcb_is_open(const struct sl_dcb *dcb)
{
    return dcb->state != DCB_CLOSED;
}

struct sl_buf *
sl_dcb_readq(struct sl_dcb *dcb)
{
    return &dcb->readq;
}

size_t
sl_dcb_writeq_len(const struct sl_dcb *dcb)
{
    return dcb->writeq.len;
}

enum sl_dcb_role
sl_dcb_role(const struct sl_dcb *dcb)
{
    return dcb->role;
}

int
sl_dcb_fd(const struct sl_dcb *dcb)
{
    return dcb->fd;
}

uint64_t
sl_dcb_id(const struct sl_dcb *dcb)
{
    return dcb->id;
}

struct sl_worker *
sl_dcb_worker(const struct sl_dcb *dcb)
{
    return dcb->worker;
}

void *
sl_dcb_protocol_data(const struct sl_dcb *dcb)
{
    return dcb->protocol_data;
}

void
sl_dcb_set_protocol_data(struct sl_dcb *dcb, void *data)
{
    dcb->protocol_data = data;
}

struct sl_session *
sl_dcb_session(const struct sl_dcb *dcb)
{
    return dcb->session;
}

struct sl_listener *
sl_dcb_listener(const struct sl_dcb *dcb)
{
    return dcb->listener;
}

struct sl_service *
sl_dcb_service(const struct sl_dcb *dcb)
{
    return dcb->service;
}

struct sl_backend *
sl_dcb_backend(const struct sl_dcb *dcb)
{
    return dcb->backend;
}

struct sl_server *
sl_dcb_server(const struct sl_dcb *dcb)
{
    return dcb->server;
}

const char *
sl_dcb_remote(const struct sl_dcb *dcb)
{
    return dcb->remote;
}

bool
sl_dcb_is_unix(const struct sl_dcb *dcb)
{
    return dcb->is_unix;
}

void
sl_dcb_pause_reading(struct sl_dcb *dcb)
{
    dcb->reading_paused = true;
}

void
sl_dcb_resume_reading(struct sl_dcb *dcb)
{
    if (!dcb->reading_paused) {
        return;
    }
    dcb->reading_paused = false;
    if (dcb->read_deferred && dcb->state != DCB_CLOSED) {
        /* edge-triggered: the data that came while paused raises no new
         * event, so queue the DCB ourselves */
        dcb->read_deferred = false;
        sl__worker_notify(dcb->worker, &dcb->ev, EPOLLIN);
    }
}

int
sl_dcb_set_codec(struct sl_dcb *dcb, const struct sl_dcb_codec *codec,
                 void *ctx)
{
    if (dcb->codec != NULL) {
        if (codec->free != NULL) {
            codec->free(ctx);
        }
        return -EBUSY;
    }
    dcb->codec = codec;
    dcb->codec_ctx = ctx;
    /* Bytes after the last plain packet were sent encoded. */
    sl_buf_append(&dcb->rawq, &dcb->readq);
    if (dcb->codec->decode(ctx, &dcb->rawq, &dcb->readq) != 0) {
        return -EPROTO;
    }
    return 0;
}

bool
sl_dcb_has_codec(const struct sl_dcb *dcb)
{
    return dcb->codec != NULL;
}

uint64_t
sl_dcb_bytes_read(const struct sl_dcb *dcb)
{
    return dcb->bytes_read;
}

uint64_t
sl_dcb_bytes_written(const struct sl_dcb *dcb)
{
    return dcb->bytes_written;
}

/* ---- TLS ---- */

static struct sl_tls *
tls_config(const struct sl_dcb *dcb)
{
    if (dcb->role == SL_DCB_CLIENT && dcb->listener != NULL) {
        return dcb->listener->tls;
    }
    if (dcb->role == SL_DCB_BACKEND && dcb->server != NULL) {
        return dcb->server->tls;
    }
    return NULL;
}

bool
sl_dcb_tls_configured(const struct sl_dcb *dcb)
{
    return tls_config(dcb) != NULL;
}

bool
sl_dcb_tls_required(const struct sl_dcb *dcb)
{
    return dcb->role == SL_DCB_CLIENT && sl__tls_required(tls_config(dcb));
}

bool
sl_dcb_is_tls(const struct sl_dcb *dcb)
{
    return dcb->tls != NULL;
}

int
sl_dcb_tls_start(struct sl_dcb *dcb)
{
    struct sl_tls *t = tls_config(dcb);
    bool accept = dcb->role == SL_DCB_CLIENT;
    char who[300];

    if (t == NULL) {
        return -ENOTSUP;
    }
    if (dcb->tls != NULL || dcb->state == DCB_CLOSED) {
        return -EINVAL;
    }
    /*
     * A server says nothing between its greeting and our SSLRequest, so
     * bytes already read on a backend were sent in the clear by someone
     * who wants them taken for the TLS-protected login reply. (A client's
     * early bytes are its ClientHello: they go to the TLS layer below.)
     */
    if (!accept && dcb->readq.len > 0) {
        sl_log_warn("server %s: %zu plaintext bytes arrived before TLS "
                    "started; closing the connection", dcb->server != NULL
                    ? dcb->server->name : dcb->remote, dcb->readq.len);
        return -EBADMSG;
    }
    /* the plain SSLRequest must be on the wire before TLS bytes */
    if (dcb->writeq.len > 0 && (flush(dcb) != 0 || dcb->writeq.len > 0)) {
        return -EAGAIN;
    }
    dcb->tls = sl__tls_conn_new(t, dcb->fd, accept,
                                accept ? &dcb->readq : NULL,
                                dcb->server != NULL ? dcb->server->address
                                                    : NULL);
    if (dcb->tls == NULL) {
        return -ENOMEM;
    }
    snprintf(who, sizeof(who), "%s %s", accept ? "client" : "server",
             dcb->server != NULL ? dcb->server->name : dcb->remote);
    return sl__tls_handshake(dcb->tls, who) == SL_ERROR ? -EPROTO : 0;
}

/* The cipher of a TLS DCB, "" when plain (diagnostics, tests). */
const char *
sl__dcb_tls_cipher(const struct sl_dcb *dcb)
{
    return dcb->tls != NULL ? sl__tls_cipher(dcb->tls) : "";
}

const char *
sl_dcb_tls_cipher(const struct sl_dcb *dcb)
{
    return sl__dcb_tls_cipher(dcb);
}

bool
sl_dcb_tls_peer(const struct sl_dcb *dcb, char *issuer, size_t ilen,
                char *subject, size_t slen)
{
    if (dcb->tls == NULL || ilen == 0 || slen == 0) {
        if (ilen > 0) {
            issuer[0] = '\0';
        }
        if (slen > 0) {
            subject[0] = '\0';
        }
        return false;
    }
    return sl__tls_peer_names(dcb->tls, issuer, ilen, subject, slen);
}

/* ---- graceful shutdown ---- */

static bool
client_busy(const struct sl_dcb *c)
{
    const struct sl_backend *b;

    if (c->writeq.len > 0) {
        return true;
    }
    if (c->spliced) {
        return sl__splice_drain_busy(c);
    }
    for (b = c->session->backends; b != NULL; b = b->next) {
        if (b->in_flight && b->state != SL_BACKEND_FAILED &&
            b->state != SL_BACKEND_CLOSED) {
            return true;
        }
    }
    return false;
}

int64_t
sl__dcb_drain_clients(struct sl_worker *w)
{
    struct sl_dcb **all = NULL;
    struct sl_dcb *d;
    size_t n = 0;
    size_t cap = 0;
    int64_t busy = 0;

    pthread_mutex_lock(&w->dcb_lock);
    for (d = w->dcbs; d != NULL; d = d->list_next) {
        if (d->role != SL_DCB_CLIENT || d->state == DCB_CLOSED) {
            continue;
        }
        if (n == cap) {
            struct sl_dcb **a;

            cap = cap ? cap * 2 : 64;
            a = realloc(all, cap * sizeof(*a));
            if (a == NULL) {
                break;
            }
            all = a;
        }
        sl_dcb_ref(d);
        all[n++] = d;
    }
    pthread_mutex_unlock(&w->dcb_lock);
    for (size_t i = 0; i < n; i++) {
        d = all[i];
        if (d->session != NULL) {
            sl__session_lock_for_event(d->session);
        }
        if (d->state != DCB_CLOSED) {
            if (d->session != NULL && client_busy(d)) {
                busy++;
            } else {
                sl_dcb_close(d);
            }
        }
        sl__session_unlock_event();
        sl_dcb_unref(d);
    }
    free(all);
    return busy;
}

/* ---- snapshots for the REST API (admin_json.c) ---- */

/* The session's statement history and trace as JSON. Pinned: this is the
 * session's worker, nothing else touches them. Shared: the worker holding
 * the session's lock may be writing them; take the lock if it is free
 * (never wait on it while holding this worker's dcb_lock), else leave the
 * arrays out (null) for this answer. */
static void
history_info(struct sl_session *ses, struct sl_session_info *info)
{
    struct sl_session *root = ses->lock_root != NULL ? ses->lock_root : ses;
    bool shared = sl__workers_shared();

    if (shared && pthread_mutex_trylock(&root->lock) != 0) {
        return;
    }
    info->queries = sl__history_queries_json(ses);
    info->log = sl__history_log_json(ses);
    if (shared) {
        pthread_mutex_unlock(&root->lock);
    }
}

static void
session_info(struct sl_session *ses, sl_session_info_fn fn, void *arg)
{
    const char *names[256];
    struct sl_session_info info = {
        .id = ses->id,
        .service = ses->service->name,
        .state = ses->state == SL_SESSION_STARTING  ? "Starting"
                 : ses->state == SL_SESSION_STARTED ? "Started"
                                                    : "Closing",
        .user = ses->user,
        .remote = ses->remote,
        .db = ses->db,
        .backends = names,
        .bytes_read = ses->client->bytes_read,
        .bytes_written = ses->client->bytes_written,
    };
    uint64_t now = sl_worker_now_ms();
    uint64_t io = sl__dcb_last_io_ms(ses->client);

    info.alive_ms = now > ses->client->accept_ms
                        ? now - ses->client->accept_ms : 0;
    info.idle_ms = now > io ? now - io : 0;

    for (struct sl_backend *b = ses->backends;
         b != NULL && info.nbackends < SL_ARRAY_LEN(names); b = b->next) {
        names[info.nbackends++] = b->server->name;
    }
    info.has_kfwd = sl_session_splice_stats(ses, &info.kfwd);
    history_info(ses, &info);
    fn(&info, arg);
    json_decref(info.queries);   /* NULL-safe; fn took its own */
    json_decref(info.log);
}

void
sl__worker_snapshot(struct sl_worker_stats *st, uint64_t session_id,
                    sl_session_info_fn fn, void *arg)
{
    struct sl_worker *w = sl_worker_current();

    memset(st, 0, sizeof(*st));
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->dcb_lock);
    for (struct sl_dcb *d = w->dcbs; d != NULL; d = d->list_next) {
        if (d->state == DCB_CLOSED) {
            continue;
        }
        switch (d->role) {
        case SL_DCB_LISTENER:
            st->listeners++;
            break;
        case SL_DCB_CLIENT:
            st->clients++;
            break;
        case SL_DCB_BACKEND:
            st->backends++;
            break;
        default:
            st->other++;
            break;
        }
        st->bytes_read += d->bytes_read;
        st->bytes_written += d->bytes_written;
        if (fn != NULL && d->role == SL_DCB_CLIENT && d->session != NULL &&
            (session_id == 0 || session_id == d->session->id)) {
            session_info(d->session, fn, arg);
        }
    }
    st->total_descriptors = w->total_dcbs;
    pthread_mutex_unlock(&w->dcb_lock);
    st->zombies = w->nzombies;
    st->event_queue_length = sl__evq_count(w->evq);
    st->reads = w->ev_reads;
    st->writes = w->ev_writes;
    st->errors = w->ev_errors;
    st->hangups = w->ev_hangups;
    st->accepts = w->accepts;
    st->events = w->events;
    st->polls = w->polls;
    st->max_batch = w->max_batch;
    st->has_load = sl__worker_load(w, &st->load[0], &st->load[1],
                                   &st->load[2]);
}
