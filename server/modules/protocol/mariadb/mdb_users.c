/*
 * The per-service account cache.
 *
 * Accounts (mysql.user) are loaded from one of the service's servers with
 * the service's user and password, by libmariadb in a loader thread of the
 * service, so no worker ever blocks on a backend. Workers authenticate
 * clients against the current table under a mutex; the table is replaced
 * whole after each load.
 *
 * A login that does not match (unknown user, wrong password) reloads the
 * accounts before the client is refused, so an account created a moment
 * ago works at once:
 *
 *   client --no match--> park (ref on DCB) --> loader: wait until 1 s since
 *   the last load --> load --> post mdb_client_resume(dcb) to the DCB's
 *   worker --> check again (no second reload) --> OK | refuse
 *
 * One load at a time per service, at most one per second; failed logins
 * trigger reloads through a token bucket per client host so one host
 * cannot keep the loader busy. Clients arriving before the first load
 * completes wait for it.
 *
 * Context: mdb_service_authenticate on workers; the loader thread; create
 * and free on the main thread.
 */
#include <errno.h>
#include <jansson.h>
#include <mysql.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SL_LOG_TAG "mariadbprotocol"
#include <sluice/dcb.h>
#include <sluice/log.h>
#include <sluice/server.h>
#include <sluice/service.h>
#include <sluice/worker.h>

#include "mdb.h"

#define MIN_RELOAD_INTERVAL_MS 1000
#define HOST_BUCKET_SIZE 10.0       /* reloads a host may trigger at once */
#define HOST_REFILL_MS 5000.0       /* one more every 5 s */
#define HOST_SLOTS 128

struct waiter {
    struct sl_dcb *dcb;
    struct waiter *next;
};

struct host_bucket {
    char host[64];
    double tokens;
    uint64_t stamp_ms;
};

struct mdb_service {
    struct sl_service *svc;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool thread_started;
    /* Below: protected by lock. */
    struct mdb_users users;
    bool loaded;              /* a load finished (successfully or not) */
    bool want_load;
    bool stop;
    uint64_t last_load_ms;    /* monotonic start time of the last load */
    struct waiter *waiters;
    struct host_bucket hosts[HOST_SLOTS];
    uint64_t loads;
    uint64_t load_errors;
    char last_error[256];
    char source[128];         /* server the last good load came from */
};

static uint64_t
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- loading (loader thread) ---- */

/* The auth string of a row: whichever column holds a `*HEX` hash. */
static const char *
pick_auth(const char *auth_string, const char *password)
{
    if (auth_string != NULL && auth_string[0] == '*') {
        return auth_string;
    }
    if (password != NULL && password[0] != '\0') {
        return password;
    }
    return auth_string != NULL ? auth_string : "";
}

static int
query_users(MYSQL *c, struct mdb_users *u)
{
    static const char *const queries[] = {
        "SELECT user, host, authentication_string, plugin, password "
        "FROM mysql.user WHERE is_role = 'N'",
        "SELECT user, host, authentication_string, plugin, password "
        "FROM mysql.user",
        "SELECT user, host, authentication_string, plugin, NULL "
        "FROM mysql.user",
    };
    MYSQL_RES *res = NULL;
    MYSQL_ROW row;

    for (size_t i = 0; i < SL_ARRAY_LEN(queries) && res == NULL; i++) {
        if (mysql_query(c, queries[i]) == 0) {
            res = mysql_store_result(c);
        }
    }
    if (res == NULL) {
        return -1;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        if (row[0] == NULL || row[1] == NULL || row[1][0] == '\0') {
            continue;   /* roles have an empty host */
        }
        if (mdb_users_add(u, row[0], row[1], pick_auth(row[2], row[4]),
                          row[3]) != 0) {
            mysql_free_result(res);
            return -1;
        }
    }
    mysql_free_result(res);
    mdb_users_sort(u);
    return 0;
}

static int
load_from(struct mdb_service *s, struct sl_server *srv,
          struct mdb_users *u, char *err, size_t errlen)
{
    unsigned timeout = 5;
    MYSQL *c = mysql_init(NULL);
    const char *sock = sl_server_socket(srv);
    int rc = -1;

    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    mysql_options(c, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    mysql_options(c, MYSQL_OPT_READ_TIMEOUT, &timeout);
    mysql_options(c, MYSQL_OPT_WRITE_TIMEOUT, &timeout);
    if (sl_server_mysql_tls(srv, c) != 0) {
        snprintf(err, errlen, "server %s: cannot set its TLS options",
                 sl_server_name(srv));
        mysql_close(c);
        return -1;
    }
    if (mysql_real_connect(c, sock != NULL ? NULL : sl_server_address(srv),
                           sl_service_user(s->svc),
                           sl_service_password(s->svc), NULL,
                           (unsigned)sl_server_port(srv), sock, 0) == NULL ||
        query_users(c, u) != 0) {
        snprintf(err, errlen, "server %s: %s", sl_server_name(srv),
                 mysql_error(c));
        mdb_users_free(u);
    } else {
        rc = 0;
    }
    mysql_close(c);
    return rc;
}

/* Try the servers: masters first, then running ones, then any. */
static int
load_users(struct mdb_service *s, struct mdb_users *u, char *src,
           size_t srclen, char *err, size_t errlen)
{
    size_t n = 0;
    struct sl_server *const *srv = sl_service_servers(s->svc, &n);

    snprintf(err, errlen, "service has no servers");
    for (int pass = 0; pass < 3; pass++) {
        for (size_t i = 0; i < n; i++) {
            uint32_t st = sl_server_status(srv[i]);
            bool master = (st & SL_SRV_MASTER) && sl_server_is_usable(st);
            bool running = sl_server_is_usable(st);
            bool pick = pass == 0 ? master
                        : pass == 1 ? running && !master
                                    : !running;

            if (pick && load_from(s, srv[i], u, err, errlen) == 0) {
                snprintf(src, srclen, "%s", sl_server_name(srv[i]));
                return 0;
            }
        }
    }
    return -1;
}

static void
wake_waiters(struct waiter *w)
{
    while (w != NULL) {
        struct waiter *next = w->next;

        if (sl_worker_post(sl_dcb_worker(w->dcb), mdb_client_resume,
                           w->dcb) != 0) {
            /* Cannot resume it: drop it (the client times out). */
            sl_dcb_unref(w->dcb);
        }
        free(w);
        w = next;
    }
}

/* Wait for a request, honour the reload interval. false on stop. */
static bool
wait_for_request(struct mdb_service *s)
{
    uint64_t now;
    struct timespec ts;

    while (!s->stop && !s->want_load) {
        pthread_cond_wait(&s->cond, &s->lock);
    }
    while (!s->stop && s->loads > 0 &&
           (now = mono_ms()) < s->last_load_ms + MIN_RELOAD_INTERVAL_MS) {
        uint64_t ms = s->last_load_ms + MIN_RELOAD_INTERVAL_MS - now;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    return !s->stop;
}

static void *
loader_main(void *arg)
{
    struct mdb_service *s = arg;
    struct mdb_users fresh;
    char err[256], src[128];
    struct waiter *w;
    int rc;

    pthread_mutex_lock(&s->lock);
    while (wait_for_request(s)) {
        s->want_load = false;
        s->last_load_ms = mono_ms();
        pthread_mutex_unlock(&s->lock);

        memset(&fresh, 0, sizeof(fresh));
        rc = load_users(s, &fresh, src, sizeof(src), err, sizeof(err));

        pthread_mutex_lock(&s->lock);
        s->loads++;
        s->loaded = true;
        if (rc == 0) {
            mdb_users_free(&s->users);
            s->users = fresh;
            snprintf(s->source, sizeof(s->source), "%s", src);
            sl_log_info("service %s: loaded %zu accounts from %s",
                        sl_service_name(s->svc), s->users.n, src);
        } else {
            s->load_errors++;
            snprintf(s->last_error, sizeof(s->last_error), "%s", err);
            sl_log_error("service %s: cannot load user accounts: %s",
                         sl_service_name(s->svc), err);
        }
        w = s->waiters;
        s->waiters = NULL;
        pthread_mutex_unlock(&s->lock);
        wake_waiters(w);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

struct mdb_service *
mdb_service_create(struct sl_service *svc)
{
    struct mdb_service *s = calloc(1, sizeof(*s));

    if (s == NULL) {
        return NULL;
    }
    s->svc = svc;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->want_load = true;   /* the initial load, asynchronous */
    if (pthread_create(&s->thread, NULL, loader_main, s) != 0) {
        sl_log_error("service %s: cannot start the account loader",
                     sl_service_name(svc));
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    s->thread_started = true;
    return s;
}

void
mdb_service_free(struct mdb_service *s)
{
    struct waiter *w;

    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (s->thread_started) {
        pthread_join(s->thread, NULL);
    }
    while ((w = s->waiters) != NULL) {
        s->waiters = w->next;
        sl_dcb_unref(w->dcb);
        free(w);
    }
    mdb_users_free(&s->users);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void *
mdb_service_diagnostics(struct mdb_service *s)
{
    json_t *j;

    pthread_mutex_lock(&s->lock);
    j = json_pack("{s:I, s:I, s:I, s:b, s:s, s:s}", "users",
                  (json_int_t)s->users.n, "loads", (json_int_t)s->loads,
                  "load_errors", (json_int_t)s->load_errors, "loaded",
                  s->loaded, "source", s->source, "last_error",
                  s->last_error);
    pthread_mutex_unlock(&s->lock);
    return j;
}

/* ---- authentication (workers) ---- */

/* Token bucket of the client host; true if it may trigger a reload. */
static bool
host_may_reload(struct mdb_service *s, const char *host, uint64_t now)
{
    struct host_bucket *b = NULL;
    struct host_bucket *oldest = &s->hosts[0];

    for (size_t i = 0; i < HOST_SLOTS && b == NULL; i++) {
        if (strcmp(s->hosts[i].host, host) == 0 && s->hosts[i].host[0]) {
            b = &s->hosts[i];
        } else if (s->hosts[i].stamp_ms < oldest->stamp_ms) {
            oldest = &s->hosts[i];
        }
    }
    if (b == NULL) {
        b = oldest;
        snprintf(b->host, sizeof(b->host), "%s", host);
        b->tokens = HOST_BUCKET_SIZE;
    } else {
        b->tokens += (double)(now - b->stamp_ms) / HOST_REFILL_MS;
        if (b->tokens > HOST_BUCKET_SIZE) {
            b->tokens = HOST_BUCKET_SIZE;
        }
    }
    b->stamp_ms = now;
    if (b->tokens < 1.0) {
        return false;
    }
    b->tokens -= 1.0;
    return true;
}

/* Park dcb until the next load completes. Called with the lock held. */
static enum mdb_auth_rc
park(struct mdb_service *s, struct sl_dcb *dcb)
{
    struct waiter *w = malloc(sizeof(*w));

    if (w == NULL) {
        return MDB_AUTH_DENIED;
    }
    sl_dcb_ref(dcb);
    w->dcb = dcb;
    w->next = s->waiters;
    s->waiters = w;
    s->want_load = true;
    pthread_cond_signal(&s->cond);
    return MDB_AUTH_WAIT;
}

enum mdb_auth_rc
mdb_service_authenticate(struct mdb_service *s, struct sl_dcb *dcb,
                         const struct mdb_auth_req *req,
                         struct mdb_session *sd)
{
    const struct mdb_account *a;
    enum mdb_auth_rc rc = MDB_AUTH_DENIED;

    pthread_mutex_lock(&s->lock);
    if (!s->loaded) {
        rc = park(s, dcb);
        goto out;
    }
    a = mdb_users_find(&s->users, req->user, req->client, req->is_unix);
    if (a != NULL && a->native &&
        mdb_native_check(req->token, req->token_len, req->scramble,
                         a->has_pw, a->stored, sd->sha1pw)) {
        sd->has_pw = a->has_pw;
        rc = MDB_AUTH_OK;
    } else if (req->may_reload &&
               host_may_reload(s, req->is_unix ? "localhost" : req->client,
                               mono_ms())) {
        rc = park(s, dcb);
    }
out:
    pthread_mutex_unlock(&s->lock);
    return rc;
}
