/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sessions, backends and the filter chain.
 *
 *   STARTING --first backend ready (or no backend)--> STARTED
 *       |                                                |
 *       +------------------- sl_session_close ----------+--> CLOSING
 *                                                               |
 *          client DCB and every backend DCB reclaimed (refs 0) -> freed
 *
 * Closing stops I/O at once (backends get the protocol's goodbye, then
 * their DCBs close; the client DCB closes) but frees nothing: the router
 * session, filter sessions, backends and the session itself are released
 * when the last of its DCBs is reclaimed from the zombie lists. So
 * sl_session_close() is safe from inside any callback, however deep.
 *
 * Backends:
 *
 *   CONNECTING --connect ok--> AUTHENTICATING --sl_backend_ready--> READY
 *        \                          \                                 |
 *         +--------------------------+--> FAILED (router told) -------+
 *                                                         sl_backend_close
 *                                                                 -> CLOSED
 *
 * Shared event model: a worker holds the session's mutex while processing
 * any DCB of the session (sl__session_lock_for_event), so router and filter
 * code never runs concurrently for one session. Pinned: no lock at all.
 *
 * Context: worker-owned.
 */
#define SL_LOG_TAG "session"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>

#include "dcb_int.h"
#include "history.h"
#include "splice_int.h"
#include "worker_int.h"

static atomic_ullong next_session_id = 1;
static atomic_llong session_live;
static __thread struct sl_session *locked_ses;

int64_t
sl__session_count(void)
{
    return atomic_load(&session_live);
}

void
sl__session_lock_for_event(struct sl_session *ses)
{
    struct sl_session *root;

    /* NULL: a backend DCB parked in a pool since the caller looked */
    if (!sl__workers_shared() || locked_ses != NULL || ses == NULL) {
        return;
    }
    root = ses->lock_root != NULL ? ses->lock_root : ses;
    pthread_mutex_lock(&root->lock);
    locked_ses = root;
}

bool
sl__session_trylock_for_event(struct sl_session *ses)
{
    struct sl_session *root;

    if (!sl__workers_shared() || ses == NULL) {
        return true;
    }
    root = ses->lock_root != NULL ? ses->lock_root : ses;
    if (locked_ses != NULL) {
        return locked_ses == root;
    }
    if (pthread_mutex_trylock(&root->lock) != 0) {
        return false;
    }
    locked_ses = root;
    return true;
}

bool
sl__session_locked(const struct sl_session *ses)
{
    const struct sl_session *root;

    if (!sl__workers_shared()) {
        return true;
    }
    root = ses->lock_root != NULL ? ses->lock_root : ses;
    return locked_ses == root;
}

/* b's DCB is being freed: a worker reclaims it between turns, holding no
 * session lock. Shared model: the session's code on another worker reads
 * b->dcb under the session's lock (a closed DCB stays there until it is
 * freed: sl_backend_close, sl_session_close), so clear it under that lock;
 * the free then cannot happen between that code's load of b->dcb and its
 * use. */
void
sl__backend_forget_dcb(struct sl_backend *b)
{
    struct sl_session *root = b->ses->lock_root != NULL ? b->ses->lock_root
                                                        : b->ses;
    bool lock = sl__workers_shared() && locked_ses != root;

    if (lock) {
        pthread_mutex_lock(&root->lock);
    }
    b->dcb = NULL;
    if (lock) {
        pthread_mutex_unlock(&root->lock);
    }
}

void
sl__session_unlock_event(void)
{
    if (locked_ses != NULL) {
        pthread_mutex_unlock(&locked_ses->lock);
        locked_ses = NULL;
    }
}

static void
session_free(struct sl_session *ses)
{
    const struct sl_router_ops *r = ses->service->router;
    struct sl_backend *b;
    size_t i;

    if (ses->router_session != NULL && r->free_session != NULL) {
        r->free_session(ses->router_session);
    }
    sl__inst_ref_put(ses->router_ref);   /* may be the instance's last */
    for (i = ses->nfilters; i-- > 0;) {
        struct sl_filter_session *fs = &ses->filters[i];

        if (fs->data != NULL && fs->def->ops->free_session != NULL) {
            fs->def->ops->free_session(fs->data);
        }
        sl__inst_ref_put(fs->ref);
        sl__obj_unref(SL_OBJ_FILTER, (void *)fs->def);
    }
    free(ses->filters);
    /* may be the service's last reference: it is freed after an epoch,
     * so the rest of this function may still read it */
    sl__obj_unref(SL_OBJ_SERVICE, ses->service);
    sl__splice_free(ses);
    sl__stats_session_free(&ses->stats);
    sl__history_session_free(ses);
    while ((b = ses->backends) != NULL) {
        ses->backends = b->next;
        for (size_t j = 0; j < b->nheld; j++) {
            sl_buf_free(b->held[j]);
        }
        free(b->held);
        sl__obj_unref(SL_OBJ_SERVER, b->server);
        free(b);
    }
    if (locked_ses == ses) {
        sl__session_unlock_event();
    }
    pthread_mutex_destroy(&ses->lock);
    if (ses->lock_root != NULL && ses->lock_root != ses) {
        sl__session_unref(ses->lock_root);
    }
    free(ses);
    atomic_fetch_sub(&session_live, 1);
}

void
sl__session_unref(struct sl_session *ses)
{
    if (atomic_fetch_sub(&ses->refs, 1) == 1) {
        session_free(ses);
    }
}

static void
session_started(struct sl_session *ses)
{
    ses->state = SL_SESSION_STARTED;
    sl_log_ses_info(ses, "session started");
    sl__splice_started(ses);   /* quiet point: before the client's OK */
    if (ses->client != NULL && ses->protocol->session_ready != NULL) {
        ses->protocol->session_ready(ses->client);
    }
}

/* The service's current router instance, with a reference for ses (a
 * service put together by hand, as in unit tests, has no ref). */
static void *
router_instance(struct sl_session *ses)
{
    ses->router_ref = sl__inst_ref_get(&ses->service->router_ref);
    return ses->router_ref != NULL
               ? sl__inst_ref_instance(ses->router_ref)
               : ses->service->router_instance;
}

static bool
create_filter_sessions(struct sl_session *ses)
{
    struct sl_service *svc = ses->service;
    size_t i;

    if (svc->nfilters == 0) {
        return true;
    }
    ses->filters = calloc(svc->nfilters, sizeof(*ses->filters));
    if (ses->filters == NULL) {
        return false;
    }
    ses->nfilters = svc->nfilters;
    for (i = 0; i < svc->nfilters; i++) {
        struct sl_filter_session *fs = &ses->filters[i];

        fs->ses = ses;
        fs->index = i;
        fs->def = svc->filters[i];
        sl__obj_ref(SL_OBJ_FILTER, svc->filters[i]);
        fs->ref = sl__inst_ref_get(&fs->def->ref);
        fs->data = fs->def->ops->new_session(
            fs->ref ? sl__inst_ref_instance(fs->ref) : fs->def->instance,
            ses, fs);
        if (fs->data == NULL) {
            sl_log_ses_error(ses, "filter '%s' refused the session",
                             fs->def->name);
            return false;
        }
    }
    return true;
}

/* One more session of svc: the counts, and the peak (a CAS only when a
 * new peak is reached). */
static void
count_session(struct sl_service *svc)
{
    long long n = atomic_fetch_add(&svc->sessions, 1) + 1;
    long long peak = atomic_load_explicit(&svc->peak_sessions,
                                          memory_order_relaxed);

    atomic_fetch_add(&svc->total_sessions, 1);
    while (n > peak && !atomic_compare_exchange_weak(&svc->peak_sessions,
                                                     &peak, n)) {
    }
}

static struct sl_session *
session_alloc(struct sl_dcb *client)
{
    struct sl_session *ses = calloc(1, sizeof(*ses));

    if (ses == NULL) {
        return NULL;
    }
    ses->id = atomic_fetch_add(&next_session_id, 1);
    ses->state = SL_SESSION_STARTING;
    atomic_init(&ses->refs, 1);   /* the client DCB's */
    ses->client = client;
    ses->service = client->service;
    sl__obj_ref(SL_OBJ_SERVICE, ses->service);   /* until session_free */
    ses->protocol = client->protocol;
    pthread_mutex_init(&ses->lock, NULL);
    ses->lock_root = ses;
    snprintf(ses->remote, sizeof(ses->remote), "%s", client->remote);
    ses->peer = client->peer;
    ses->local = client->local;
    atomic_fetch_add(&session_live, 1);
    return ses;
}

/* Undo a half-made session: nothing was started, the client stays open
 * (the protocol closes it after the NULL return). */
static void
session_abort(struct sl_session *ses)
{
    struct sl_backend *b;

    ses->state = SL_SESSION_CLOSING;
    for (b = ses->backends; b != NULL; b = b->next) {
        sl_backend_close(b);
    }
    if (ses->client != NULL) {
        ses->client->session = NULL;
    }
    atomic_fetch_sub(&ses->service->sessions, 1);
    if (locked_ses == ses) {
        sl__session_unlock_event();
    }
    sl__session_unref(ses);
}

struct sl_session *
sl_session_create(struct sl_dcb *client)
{
    struct sl_service *svc = client->service;
    int64_t max = __atomic_load_n(&svc->max_connections, __ATOMIC_RELAXED);
    struct sl_session *ses;

    sl__dcb_login_done(client);
    if (max > 0 && atomic_load(&svc->sessions) >= max) {
        sl_log_warn("service '%s': too many connections from %s", svc->name,
                    client->remote);
        client->protocol->client_error(client, 1040, "08004",
                                       "Too many connections");
        return NULL;
    }
    ses = session_alloc(client);
    if (ses == NULL) {
        return NULL;
    }
    client->session = ses;
    sl__session_lock_for_event(ses);   /* before any backend is polled */
    count_session(svc);
    sl__history_session_init(ses);
    if (!create_filter_sessions(ses)) {
        sl_session_send_error(ses, 1105, "HY000",
                              "Failed to create filter session");
        session_abort(ses);
        return NULL;
    }
    ses->router_session = svc->router->new_session(router_instance(ses),
                                                   ses);
    if (ses->router_session == NULL) {
        sl_log_ses_info(ses, "router of service '%s' refused the session",
                        svc->name);
        session_abort(ses);
        return NULL;
    }
    if (ses->state == SL_SESSION_STARTING && ses->backends == NULL) {
        session_started(ses);
    }
    return ses;
}

/* ---- the chain ---- */

static int
to_router(struct sl_session *ses, struct sl_buf *buf)
{
    int rc = ses->service->router->route_query(ses->router_session, buf);

    /* A hint applies to one command: drop it if the router did not take
     * it. ses may be closing but is still allocated here. */
    ses->hint.type = SL_HINT_NONE;
    return rc;
}

void
sl_session_set_hint(struct sl_session *ses, const struct sl_hint *hint)
{
    if (hint == NULL) {
        ses->hint.type = SL_HINT_NONE;
        return;
    }
    ses->hint = *hint;
}

bool
sl_session_take_hint(struct sl_session *ses, struct sl_hint *out)
{
    if (ses->hint.type == SL_HINT_NONE) {
        return false;
    }
    *out = ses->hint;
    ses->hint.type = SL_HINT_NONE;
    return true;
}

static int
to_client(struct sl_session *ses, struct sl_buf *buf,
          const struct sl_reply *reply)
{
    if (ses->reply_fn != NULL) {   /* an internal session */
        ses->reply_fn(ses->reply_arg, buf, reply);
        return SL_OK;
    }
    sl__stats_client_reply(ses, buf, reply);
    if (SL_UNLIKELY(ses->history != NULL) && reply != NULL &&
        reply->complete) {
        sl__history_client_reply(ses);
    }
    if (!sl_dcb_is_open(ses->client)) {
        sl_buf_free(buf);
        return SL_OK;
    }
    return ses->protocol->client_reply(ses->client, buf, reply);
}

static int
filter_down(struct sl_session *ses, size_t i, struct sl_buf *buf)
{
    struct sl_filter_session *fs;

    if (i >= ses->nfilters) {
        return to_router(ses, buf);
    }
    fs = &ses->filters[i];
    if (fs->def->ops->route_query == NULL) {
        return filter_down(ses, i + 1, buf);
    }
    return fs->def->ops->route_query(fs->data, buf);
}

/* Deliver to filter i-1 (counting from 1), or the client when i == 0. */
static int
filter_up(struct sl_session *ses, size_t i, struct sl_buf *buf,
          const struct sl_reply *reply)
{
    struct sl_filter_session *fs;

    while (i > 0) {
        fs = &ses->filters[i - 1];
        if (fs->def->ops->client_reply != NULL) {
            return fs->def->ops->client_reply(fs->data, buf, reply);
        }
        i--;
    }
    return to_client(ses, buf, reply);
}

int
sl_session_route_query(struct sl_session *ses, struct sl_buf *buf)
{
    int rc;

    if (ses->state == SL_SESSION_CLOSING) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    sl__stats_query(ses, buf);
    if (SL_UNLIKELY(ses->history != NULL)) {
        sl__history_query(ses, buf);
        rc = filter_down(ses, 0, buf);
        if (ses->history != NULL) {
            sl__history_route_end(ses);
        }
    } else {
        rc = filter_down(ses, 0, buf);
    }
    sl__stats_chain_end();
    return rc;
}

int
sl_session_reply(struct sl_session *ses, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    if (ses->state == SL_SESSION_CLOSING) {
        sl_buf_free(buf);
        return SL_OK;
    }
    return filter_up(ses, ses->nfilters, buf, reply);
}

int
sl_filter_route_next(struct sl_filter_session *fs, struct sl_buf *buf)
{
    if (fs->ses->state == SL_SESSION_CLOSING) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    return filter_down(fs->ses, fs->index + 1, buf);
}

int
sl_filter_reply_next(struct sl_filter_session *fs, struct sl_buf *buf,
                     const struct sl_reply *reply)
{
    if (fs->ses->state == SL_SESSION_CLOSING) {
        sl_buf_free(buf);
        return SL_OK;
    }
    return filter_up(fs->ses, fs->index, buf, reply);
}

struct sl_session *
sl_filter_session_session(const struct sl_filter_session *fs)
{
    return fs->ses;
}

void
sl_session_send_error(struct sl_session *ses, uint16_t code,
                      const char *sqlstate, const char *msg)
{
    if (ses->client != NULL && sl_dcb_is_open(ses->client) &&
        ses->protocol->client_error != NULL) {
        sl__stats_client_error(ses);
        if (SL_UNLIKELY(ses->history != NULL)) {
            sl__history_client_reply(ses);
        }
        ses->protocol->client_error(ses->client, code, sqlstate, msg);
    }
}

/* An internal session closed: leave the parent's list, tell the owner,
 * drop the reference that stood for the missing client DCB. */
static void
internal_closed(struct sl_session *ses)
{
    struct sl_session **pp;

    if (ses->parent != NULL) {
        for (pp = &ses->parent->children; *pp != NULL; pp = &(*pp)->sibling) {
            if (*pp == ses) {
                *pp = ses->sibling;
                break;
            }
        }
        ses->parent = NULL;
    }
    if (ses->reply_fn != NULL) {
        sl_session_reply_fn fn = ses->reply_fn;

        ses->reply_fn = NULL;
        fn(ses->reply_arg, NULL, NULL);
    }
    sl__session_unref(ses);
}

struct sl_session *
sl_session_create_internal(struct sl_session *parent, struct sl_service *svc,
                           sl_session_reply_fn fn, void *arg)
{
    struct sl_session *ses = calloc(1, sizeof(*ses));

    if (ses == NULL) {
        return NULL;
    }
    ses->id = atomic_fetch_add(&next_session_id, 1);
    ses->state = SL_SESSION_STARTING;
    atomic_init(&ses->refs, 1);   /* the owner's, dropped at close */
    ses->service = svc;
    sl__obj_ref(SL_OBJ_SERVICE, svc);   /* found in this turn */
    ses->protocol = parent->protocol;
    ses->protocol_data = parent->protocol_data;   /* shared, not owned */
    ses->client_caps = parent->client_caps;
    pthread_mutex_init(&ses->lock, NULL);
    /* Shared model: the parent's worker routes into this session during
     * the parent's events, so this session's own DCB events must take the
     * same lock (set before the router connects any backend). */
    ses->lock_root = parent->lock_root != NULL ? parent->lock_root : parent;
    atomic_fetch_add(&ses->lock_root->refs, 1);
    snprintf(ses->remote, sizeof(ses->remote), "%s", parent->remote);
    ses->peer = parent->peer;
    ses->local = parent->local;
    if (ses->local.sa.sa_family == 0 && parent->client != NULL &&
        ses->peer.sa.sa_family != AF_UNIX && parent->client->fd >= 0) {
        socklen_t len = sizeof(ses->local);

        if (getsockname(parent->client->fd, &ses->local.sa, &len) != 0) {
            ses->local.sa.sa_family = 0;
        }
    }
    snprintf(ses->user, sizeof(ses->user), "%s", parent->user);
    snprintf(ses->db, sizeof(ses->db), "%s", parent->db);
    atomic_fetch_add(&session_live, 1);
    count_session(svc);
    if (!create_filter_sessions(ses) ||
        (ses->router_session = svc->router->new_session(
             router_instance(ses), ses)) == NULL) {
        sl_log_ses_warn(ses, "cannot start an internal session on service "
                        "'%s'", svc->name);
        session_abort(ses);
        return NULL;
    }
    ses->reply_fn = fn;
    ses->reply_arg = arg;
    ses->parent = parent;
    ses->sibling = parent->children;
    parent->children = ses;
    if (ses->state == SL_SESSION_STARTING && ses->backends == NULL) {
        session_started(ses);
    }
    return ses;
}

/* dump_last_statements=on_error and the session trace dump: a session
 * the client ended itself (COM_QUIT, or its connection closed) and one
 * closed at shutdown did not end with an error; any other reason (a
 * backend failure, a router's or filter's refusal, a timeout, a kill) is
 * an error. The reasons are the literal strings their callers pass. */
static bool
closed_by_client(const char *reason)
{
    static const char *const normal[] = {
        "client sent COM_QUIT", "client closed the connection",
        "parent session closed",
    };

    for (size_t i = 0; reason != NULL && i < SL_ARRAY_LEN(normal); i++) {
        if (strcmp(reason, normal[i]) == 0) {
            return true;
        }
    }
    return false;
}

void
sl_session_close(struct sl_session *ses, const char *reason)
{
    struct sl_backend *b;

    if (ses->state == SL_SESSION_CLOSING) {
        return;
    }
    ses->state = SL_SESSION_CLOSING;
    sl_log_ses_info(ses, "session closed: %s", reason ? reason : "");
    if (SL_UNLIKELY(ses->history != NULL || ses->trace != NULL)) {
        sl__history_session_close(ses, !closed_by_client(reason));
    }
    sl__splice_stop(ses);
    while (ses->children != NULL) {   /* each unlinks itself */
        sl_session_close(ses->children, "parent session closed");
    }
    for (b = ses->backends; b != NULL; b = b->next) {
        if (!sl__pool_park(b)) {
            sl_backend_close(b);
        }
    }
    atomic_fetch_sub(&ses->service->sessions, 1);
    if (ses->client != NULL) {
        sl__dcb_close_quiet(ses->client);
    } else {
        internal_closed(ses);
    }
}

void
sl__session_client_closed(struct sl_session *ses)
{
    sl_session_close(ses, "client closed the connection");
}

void
sl__session_throttle(struct sl_session *ses, bool pause)
{
    struct sl_backend *b;

    ses->throttled = pause;
    sl_log_ses_debug(ses, "%s backends (client write queue %zu bytes)",
                     pause ? "pausing" : "resuming",
                     sl_dcb_writeq_len(ses->client));
    for (b = ses->backends; b != NULL; b = b->next) {
        if (b->dcb == NULL || !sl_dcb_is_open(b->dcb)) {
            continue;
        }
        if (pause) {
            sl_dcb_pause_reading(b->dcb);
        } else {
            sl_dcb_resume_reading(b->dcb);
        }
    }
}

void
sl__session_congested(struct sl_session *ses, bool more)
{
    bool change = more ? ses->congested_backends++ == 0
                       : ses->congested_backends > 0 &&
                             --ses->congested_backends == 0;

    if (!change || ses->client == NULL || !sl_dcb_is_open(ses->client)) {
        return;
    }
    sl_log_ses_debug(ses, "%s the client (a backend write queue %s)",
                     more ? "pausing" : "resuming",
                     more ? "is full" : "drained");
    if (more) {
        sl_dcb_pause_reading(ses->client);
    } else {
        sl_dcb_resume_reading(ses->client);
    }
}

/* ---- accessors ---- */

uint64_t
sl_session_id(const struct sl_session *ses)
{
    return ses->id;
}

enum sl_session_state
sl_session_state(const struct sl_session *ses)
{
    return ses->state;
}

struct sl_dcb *
sl_session_client(const struct sl_session *ses)
{
    return ses->client;
}

struct sl_service *
sl_session_service(const struct sl_session *ses)
{
    return ses->service;
}

const char *
sl_session_user(const struct sl_session *ses)
{
    return ses->user;
}

const char *
sl_session_remote(const struct sl_session *ses)
{
    return ses->remote;
}

const char *
sl_session_db(const struct sl_session *ses)
{
    return ses->db;
}

void
sl_session_set_user(struct sl_session *ses, const char *user)
{
    snprintf(ses->user, sizeof(ses->user), "%s", user ? user : "");
    ses->stats.seed_ok = false;     /* the digest key's names changed */
}

void
sl_session_set_db(struct sl_session *ses, const char *db)
{
    snprintf(ses->db, sizeof(ses->db), "%s", db ? db : "");
    ses->stats.seed_ok = false;
}

bool
sl_session_db_unsure(const struct sl_session *ses)
{
    return ses->db_unsure;
}

void
sl_session_set_db_unsure(struct sl_session *ses, bool unsure)
{
    ses->db_unsure = unsure;
}

uint64_t
sl_session_answers_pending(const struct sl_session *ses)
{
    return ses->answers_pending;
}

void
sl_session_set_answers_pending(struct sl_session *ses, uint64_t n)
{
    ses->answers_pending = n;
}

uint64_t
sl_session_client_caps(const struct sl_session *ses)
{
    return ses->client_caps;
}

void
sl_session_set_client_caps(struct sl_session *ses, uint64_t caps)
{
    ses->client_caps = caps;
}

void *
sl_session_protocol_data(const struct sl_session *ses)
{
    return ses->protocol_data;
}

void
sl_session_set_protocol_data(struct sl_session *ses, void *p)
{
    ses->protocol_data = p;
}

/* ---- backends ---- */

static void
backend_drop(struct sl_backend *b)
{
    if (b->dcb != NULL) {
        sl__dcb_close_quiet(b->dcb);
    }
}

/* Open a fresh connection for b (already in its session's list) and poll
 * it. 0, or -1 with b CLOSED (logged). */
static int
backend_open(struct sl_backend *b)
{
    struct sl_session *ses = b->ses;
    struct sl_server *srv = b->server;
    struct sl_dcb *dcb = sl__dcb_connect_backend(b);

    if (dcb == NULL) {
        b->state = SL_BACKEND_CLOSED;
        return -1;
    }
    b->dcb = dcb;
    dcb->session = ses;
    dcb->protocol = ses->protocol;
    atomic_fetch_add(&ses->refs, 1);   /* the backend DCB's */
    if (srv->proxy_protocol && sl__dcb_proxy_header(dcb, ses) != 0) {
        b->state = SL_BACKEND_CLOSED;
        backend_drop(b);
        return -1;
    }
    if (ses->protocol->backend_init(dcb, b) == SL_ERROR) {
        b->state = SL_BACKEND_CLOSED;
        backend_drop(b);
        return -1;
    }
    dcb->backend_inited = true;
    if (sl__dcb_add(dcb) != 0) {
        sl_log_ses_error(ses, "cannot poll connection to '%s'", srv->name);
        b->state = SL_BACKEND_CLOSED;
        backend_drop(b);
        return -1;
    }
    sl_log_ses_debug(ses, "connecting to server '%s'", srv->name);
    return 0;
}

struct sl_backend *
sl_backend_connect(struct sl_session *ses, struct sl_server *srv)
{
    struct sl_backend *b = calloc(1, sizeof(*b));

    if (b == NULL) {
        return NULL;
    }
    b->ses = ses;
    b->server = srv;
    b->state = SL_BACKEND_CONNECTING;
    sl__obj_ref(SL_OBJ_SERVER, srv);   /* until session_free */
    b->next = ses->backends;
    ses->backends = b;
    /* A pooled connection is reset for this session (pool.c); its
     * answer makes the backend ready, as a login's would. */
    if (sl__pool_take(b) != NULL) {
        return b;
    }
    if (backend_open(b) == 0) {
        return b;
    }
    if (b->dcb == NULL) {   /* no DCB points to it: forget it */
        ses->backends = b->next;
        sl__obj_unref(SL_OBJ_SERVER, srv);
        free(b);
    }
    return NULL;
}

/* The reset of a pooled connection failed (pool.c): close it and connect
 * afresh, invisibly to the router; the commands held meanwhile queue on
 * the new connection until its login. true if that is under way. */
static bool
backend_reset_failed(struct sl_backend *b, const char *reason)
{
    struct sl_dcb *old = b->dcb;
    size_t n = b->nheld;

    sl_log_ses_notice(b->ses, "server '%s': reset of a pooled connection "
                      "failed (%s); connecting afresh", b->server->name,
                      reason != NULL ? reason : "?");
    sl__pool_reset_failed(b->server);
    b->resetting = false;
    if (old != NULL) {
        old->backend = NULL;   /* its close reports nothing */
        b->dcb = NULL;
        sl__dcb_close_quiet(old);
    }
    b->state = SL_BACKEND_CONNECTING;
    if (backend_open(b) != 0) {
        b->state = SL_BACKEND_CONNECTING;   /* fail it the usual way */
        return false;
    }
    b->nheld = 0;
    for (size_t i = 0; i < n; i++) {
        sl__stats_backend_write(b, b->held[i]);
        if (b->ses->protocol->backend_write(b->dcb, b->held[i]) != SL_OK) {
            for (size_t j = i + 1; j < n; j++) {
                sl_buf_free(b->held[j]);
            }
            break;
        }
    }
    return true;
}

/* A router's command while a keepalive ping is unanswered: it waits for
 * the ping's answer, so the two are never in flight together. */
static int
hold(struct sl_backend *b, struct sl_buf *buf)
{
    if (b->nheld == b->held_cap) {
        size_t cap = b->held_cap ? b->held_cap * 2 : 4;
        struct sl_buf **h = realloc(b->held, cap * sizeof(*h));

        if (h == NULL) {
            sl_buf_free(buf);
            return SL_ERROR;
        }
        b->held = h;
        b->held_cap = cap;
    }
    b->held[b->nheld++] = buf;
    b->in_flight = true;
    return SL_OK;
}

int
sl_backend_write(struct sl_backend *b, struct sl_buf *buf)
{
    if (b->state == SL_BACKEND_FAILED || b->state == SL_BACKEND_CLOSED ||
        b->dcb == NULL || !sl_dcb_is_open(b->dcb)) {
        sl_buf_free(buf);
        return SL_ERROR;
    }
    if (SL_UNLIKELY(b->ping_pending | b->resetting)) {
        if (b->ses->history != NULL) {
            sl__history_backend_write(b);
        }
        return hold(b, buf);
    }
    b->in_flight = true;
    sl__stats_backend_write(b, buf);
    if (SL_UNLIKELY(b->ses->history != NULL)) {
        sl__history_backend_write(b);
    }
    return b->ses->protocol->backend_write(b->dcb, buf);
}

void
sl_backend_close(struct sl_backend *b)
{
    const struct sl_protocol_ops *p = b->ses->protocol;

    if (b->state == SL_BACKEND_CLOSED) {
        return;
    }
    b->closed_by_router = true;
    if (b->state == SL_BACKEND_READY && b->dcb != NULL &&
        sl_dcb_is_open(b->dcb) && p->backend_close != NULL) {
        p->backend_close(b->dcb);
    }
    b->state = SL_BACKEND_CLOSED;
    backend_drop(b);
}

struct sl_server *
sl_backend_server(const struct sl_backend *b)
{
    return b->server;
}

struct sl_session *
sl_backend_session(const struct sl_backend *b)
{
    return b->ses;
}

struct sl_dcb *
sl_backend_dcb(const struct sl_backend *b)
{
    return b->dcb;
}

enum sl_backend_state
sl_backend_state(const struct sl_backend *b)
{
    return b->state;
}

void *
sl_backend_router_data(const struct sl_backend *b)
{
    return b->router_data;
}

void
sl_backend_set_router_data(struct sl_backend *b, void *p)
{
    b->router_data = p;
}

/* Write the commands held while a ping or a reset was unanswered, in
 * order (a write failure fails the backend through its DCB). */
static void
flush_held(struct sl_backend *b)
{
    const struct sl_protocol_ops *p = b->ses->protocol;
    size_t n = b->nheld;

    b->resetting = false;
    b->nheld = 0;
    for (size_t i = 0; i < n; i++) {
        struct sl_buf *h = b->held[i];

        if (b->dcb == NULL || !sl_dcb_is_open(b->dcb)) {
            sl_buf_free(h);
            continue;
        }
        sl__stats_backend_write(b, h);
        if (p->backend_write(b->dcb, h) != SL_OK) {
            for (size_t j = i + 1; j < n; j++) {
                sl_buf_free(b->held[j]);
            }
            return;
        }
    }
}

void
sl_backend_ready(struct sl_backend *b)
{
    if (b->state == SL_BACKEND_FAILED || b->state == SL_BACKEND_CLOSED) {
        return;
    }
    b->state = SL_BACKEND_READY;
    sl_log_ses_debug(b->ses, "logged in to server '%s'", b->server->name);
    if (SL_UNLIKELY(b->resetting)) {
        flush_held(b);   /* what the router sent during the reset */
    }
    if (b->ses->state == SL_SESSION_STARTING) {
        session_started(b->ses);
    }
}

/* Tell the client why: the server's own error packet when there is one
 * (header included or not), else a generic lost-connection error. */
static void
send_backend_error(struct sl_session *ses, struct sl_buf *errpkt,
                   const char *reason)
{
    const unsigned char *p = NULL;
    const char *msg;
    size_t len = errpkt != NULL ? errpkt->len : 0;
    size_t mlen;
    uint16_t code;
    char state[6];
    char text[512];

    if (len > 0) {
        p = sl_buf_pullup(errpkt, len);
    }
    if (p != NULL && len > 4 && p[0] != 0xff && p[4] == 0xff) {
        p += 4;
        len -= 4;
    }
    if (p != NULL && p[0] == 0xff &&
        sl_mdb_parse_err(p, len, &code, state, &msg, &mlen)) {
        snprintf(text, sizeof(text), "%.*s", (int)mlen, msg);
        sl_session_send_error(ses, code, state, text);
        return;
    }
    snprintf(text, sizeof(text), "Lost connection to backend server: %s",
             reason != NULL ? reason : "connection closed");
    if (ses->state == SL_SESSION_STARTING) {
        sl_session_send_error(ses, 2013, "HY000", text);
    } else {
        /* A statement was running: ER_CONNECTION_KILLED, what the server
         * itself sends a killed connection. A client-side code here (2013)
         * is read by libmariadb as 2027 "Received malformed packet". */
        sl_session_send_error(ses, 1927, "70100", text);
    }
}

static bool
backend_pending(const struct sl_backend *b)
{
    const struct sl_protocol_ops *p = b->ses->protocol;

    if (p->backend_pending != NULL && b->dcb != NULL) {
        return p->backend_pending(b->dcb) > 0;
    }
    return b->in_flight;
}

static void
backend_fail(struct sl_backend *b, struct sl_buf *errpkt, const char *reason)
{
    struct sl_session *ses = b->ses;
    const struct sl_router_ops *r = ses->service->router;
    bool pending;
    bool go_on = false;

    if (b->state == SL_BACKEND_FAILED || b->state == SL_BACKEND_CLOSED) {
        sl_buf_free(errpkt);
        return;
    }
    if (SL_UNLIKELY(b->resetting) && ses->state != SL_SESSION_CLOSING &&
        backend_reset_failed(b, reason)) {
        sl_buf_free(errpkt);
        return;
    }
    /* an unanswered keepalive ping alone is nobody's answer */
    pending = b->ping_pending && b->nheld == 0 ? false : backend_pending(b);
    b->state = SL_BACKEND_FAILED;
    backend_drop(b);
    if (ses->state == SL_SESSION_CLOSING) {
        sl_buf_free(errpkt);
        return;
    }
    sl_log_ses_notice(ses, "server '%s': %s", b->server->name,
                      reason ? reason : "failed");
    if (r->handle_error != NULL && ses->router_session != NULL) {
        go_on = r->handle_error(ses->router_session, b, errpkt, reason);
    }
    if (!go_on) {
        if (ses->state == SL_SESSION_STARTING || pending) {
            send_backend_error(ses, errpkt, reason);
        } else {
            /* kernel forwarding: a forwarded command got no answer */
            sl__splice_lost_answer(ses, reason);
        }
        sl_session_close(ses, reason);
    }
    sl_buf_free(errpkt);
}

void
sl_backend_failed(struct sl_backend *b, struct sl_buf *errpkt,
                  const char *reason)
{
    backend_fail(b, errpkt, reason);
}

void
sl__backend_dcb_failed(struct sl_backend *b, const char *reason)
{
    backend_fail(b, NULL, reason);
}

void
sl__backend_keepalive(struct sl_backend *b, uint64_t now_ms)
{
    static const uint8_t ping[] = {1, 0, 0, 0, 0x0e};   /* COM_PING */
    struct sl_session *ses = b->ses;
    struct sl_dcb *d = b->dcb;
    uint64_t ka = __atomic_load_n(&ses->service->keepalive_ms,
                                  __ATOMIC_RELAXED);
    uint64_t last;
    struct sl_buf *buf;

    /* backend_pending, not in_flight: the protocol counts the answers it
     * expects, in_flight stays set after a command that has none
     * (COM_STMT_CLOSE) */
    if (ka == 0 || b->state != SL_BACKEND_READY || b->ping_pending ||
        d == NULL || !sl_dcb_is_open(d) ||
        ses->state != SL_SESSION_STARTED || ses->client == NULL ||
        ses->client->spliced || backend_pending(b)) {
        return;   /* busy, not ready, or its bytes bypass Sluice */
    }
    last = sl__dcb_last_io_ms(d);
    if (now_ms < last + ka || (buf = sl_buf_from(ping, sizeof(ping))) ==
                                  NULL) {
        return;
    }
    sl_log_ses_debug(ses, "server '%s': idle for %llu ms, sending a "
                     "keepalive COM_PING", b->server->name,
                     (unsigned long long)(now_ms - last));
    b->ping_pending = true;
    if (ses->protocol->backend_write(d, buf) != SL_OK) {
        b->ping_pending = false;   /* the write failure fails the backend */
    }
}

/* The answer to a keepalive ping: swallowed; once complete, the commands
 * held meanwhile go out in order. */
static int
keepalive_reply(struct sl_backend *b, struct sl_buf *buf,
                const struct sl_reply *reply)
{
    sl_buf_free(buf);
    if (reply == NULL || !reply->complete) {
        return SL_OK;
    }
    b->ping_pending = false;
    flush_held(b);
    return SL_OK;
}

int
sl_backend_reply(struct sl_backend *b, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    struct sl_session *ses = b->ses;
    int rc;

    if (SL_UNLIKELY(b->ping_pending)) {
        return keepalive_reply(b, buf, reply);
    }
    if (reply != NULL && reply->complete) {
        b->in_flight = false;
        if (SL_UNLIKELY(ses->history != NULL)) {
            sl__history_backend_reply(b);
        }
    }
    sl__stats_backend_reply(b, reply);
    if (ses->state == SL_SESSION_CLOSING || b->state == SL_BACKEND_CLOSED) {
        sl__stats_chain_end();
        sl_buf_free(buf);
        return SL_OK;
    }
    rc = ses->service->router->client_reply(ses->router_session, b, buf,
                                            reply);
    sl__stats_chain_end();
    if (rc == SL_ERROR) {
        sl_session_close(ses, "router failed to handle a reply");
    }
    return rc;
}

/* ---- session timers ---- */

struct ses_timer {
    struct ses_timer *next;     /* in ses->timers */
    struct sl_session *ses;     /* referenced until the timer ends */
    sl_timer_fn fn;
    void *arg;
    uint64_t id;                /* the worker timer's */
    bool cancelled;
};

static void
timer_unlink(struct sl_session *ses, struct ses_timer *t)
{
    for (struct ses_timer **pp = &ses->timers; *pp != NULL;
         pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            return;
        }
    }
}

/* A timer ending without its last run (its worker stopped): release
 * what it holds. */
static void
ses_timer_drop(void *arg)
{
    struct ses_timer *t = arg;
    struct sl_session *ses = t->ses;

    timer_unlink(ses, t);
    free(t);
    sl__session_unref(ses);
}

/* The worker timer: under the session's lock (shared model) call fn while
 * the session is open and the timer not cancelled; when it ends, drop
 * it and its reference (the session may be freed then, unlocked). */
static bool
ses_timer_fire(void *arg)
{
    struct ses_timer *t = arg;
    struct sl_session *ses = t->ses;
    bool again = false;

    sl__session_lock_for_event(ses);
    if (!t->cancelled && ses->state != SL_SESSION_CLOSING) {
        again = t->fn(t->arg);
    }
    if (!again) {
        timer_unlink(ses, t);
    }
    sl__session_unlock_event();
    if (!again) {
        free(t);
        sl__session_unref(ses);
    }
    return again;
}

uint64_t
sl_session_add_timer(struct sl_session *ses, uint64_t ms, sl_timer_fn fn,
                     void *arg)
{
    struct ses_timer *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        return 0;
    }
    t->ses = ses;
    t->fn = fn;
    t->arg = arg;
    atomic_fetch_add(&ses->refs, 1);   /* the timer's */
    t->id = sl__worker_add_timer_drop(ms, ses_timer_fire, ses_timer_drop, t);
    if (t->id == 0) {
        atomic_fetch_sub(&ses->refs, 1);   /* the caller holds one */
        free(t);
        return 0;
    }
    t->next = ses->timers;
    ses->timers = t;
    return t->id;
}

/* The worker timer stays queued (another worker may own it, shared
 * model); it ends at its next expiry without calling fn. */
void
sl_session_cancel_timer(struct sl_session *ses, uint64_t id)
{
    for (struct ses_timer *t = ses->timers; t != NULL; t = t->next) {
        if (t->id == id) {
            t->cancelled = true;
            return;
        }
    }
}
