/* SPDX-License-Identifier: Apache-2.0 */
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
 * Accounts come from mysql.global_priv (MariaDB 10.4+; the service user
 * needs SELECT on it; rows decoded by mdb_priv.c, auth_or lists
 * included) with what the server enforces beyond the password:
 * REQUIRE, ACCOUNT LOCK, password expiry and connection limits. Sluice
 * checks those itself because the server sees only Sluice's connection
 * (its TLS, its certificate). Without global_priv (MySQL, older MariaDB,
 * no grant) the loader falls back to mysql.user and the password alone.
 * Connection limits count this service's sessions per account in a list
 * that survives reloads.
 *
 * The service's user_accounts_file (mdb_accfile.c) is a second source,
 * read by the loader at every load: with add_when_load_ok after a good
 * server load, its accounts added where the servers gave no account of
 * the same user and host; with file_only_always instead of the servers.
 * A file that cannot be used fails the load (the previous table stays).
 *
 * A client's proof is a native token, a client_ed25519 signature (the
 * account's ed25519 key, on ed25519auth listeners), a caching_sha2_password
 * fast-path token (checked against SHA256(password) cached from an
 * earlier full authentication of the same account: at most
 * SHA2_CACHE_MAX entries per service, least recently used evicted,
 * wiped on eviction, when the account's stored hash changes and when
 * a reload drops it) or its password in clear (caching_sha2_password's
 * full authentication over TLS or RSA: the native hash, or with
 * ed_mode=sha256 the ed25519 key). What the backends then log in
 * with comes from the listener's user_mapping_file when it maps the
 * user (read here, under the lock, on first use after each load), else
 * from the proof itself; an ed25519 signature alone gives nothing, and
 * that login is refused (docs/authentication.md).
 *
 * Context: mdb_service_authenticate on workers; the loader thread; create
 * and free on the main thread.
 */
#include <errno.h>
#include <jansson.h>
#include <mysql.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SL_LOG_TAG "mariadbprotocol"
#include <sluice/dcb.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/params.h>
#include <sluice/server.h>
#include <sluice/service.h>
#include <sluice/worker.h>

#include "mdb.h"
#include "mdb_accfile.h"

#define MIN_RELOAD_INTERVAL_MS 1000
#define HOST_BUCKET_SIZE 10.0       /* reloads a host may trigger at once */
#define HOST_REFILL_MS 5000.0       /* one more every 5 s */
#define HOST_SLOTS 128
#define MDB_USERMAP_MAX (1024 * 1024)   /* user_mapping_file size limit */
#define SHA2_CACHE_MAX 1024             /* caching_sha2_password entries */

struct waiter {
    struct sl_dcb *dcb;
    struct waiter *next;
};

/* One account's sessions through this service (MAX_USER_CONNECTIONS,
 * MAX_CONNECTIONS_PER_HOUR). Lives until the service is freed. */
struct mdb_usage {
    struct mdb_usage *next;
    uint32_t active;          /* sessions logged in now */
    uint32_t hour_count;      /* logins since hour_start_ms */
    uint64_t hour_start_ms;
    char *host;               /* points into name */
    char name[];              /* user NUL host NUL */
};

struct host_bucket {
    char host[64];
    double tokens;
    uint64_t stamp_ms;
};

/* A user_mapping_file as last read (listeners of a service may name
 * different files). Re-read when first used after a load of the
 * accounts, so that an edited file takes effect with the next reload
 * (users_refresh_interval, or a login that triggers one). */
struct usermap_file {
    struct usermap_file *next;
    char *path;
    struct mdb_usermap map;
    bool ok;                  /* parsed; else err says why */
    char err[256];
    uint64_t loads;           /* s->loads when read */
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
    char last_error[768];
    char source[128];         /* server the last good load came from */
    struct mdb_usage *usage;  /* accounts with connection limits */
    struct usermap_file *maps;
    uint64_t refresh_ms;      /* users_refresh_time: least time between
                               * reloads a failed login may cause */
    uint64_t interval_ms;     /* users_refresh_interval: periodic, 0 off */
    uint64_t query_retries;   /* global query_retries, query_retry_timeout */
    uint64_t query_retry_timeout_ms;
    struct mdb_sha2_cache sha2;
    uint64_t sha2_fast;       /* logins by the fast path */
    uint64_t sha2_full;       /* full authentications that passed */
    /* Set at creation, read-only after. */
    char *accounts_file;      /* user_accounts_file, or NULL */
    bool file_only;           /* user_accounts_file_usage=file_only_always */
};

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

/* The server-wide settings an account check depends on. */
static void
query_globals(MYSQL *c, struct mdb_users *u)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_query(c, "SELECT @@global.default_password_lifetime, "
                       "@@global.disconnect_on_expired_password") != 0 ||
        (res = mysql_store_result(c)) == NULL) {
        return;
    }
    if ((row = mysql_fetch_row(res)) != NULL) {
        u->default_pw_lifetime = row[0] != NULL ? atoi(row[0]) : 0;
        u->disconnect_expired = row[1] != NULL && atoi(row[1]) != 0;
    }
    mysql_free_result(res);
}

/* Accounts from mysql.global_priv. 1 when the table cannot be read (the
 * caller falls back to mysql.user), 0 done, -1 out of memory. */
static int
query_global_priv(MYSQL *c, struct mdb_users *u)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_query(c, "SELECT User, Host, Priv FROM mysql.global_priv") !=
            0 ||
        (res = mysql_store_result(c)) == NULL) {
        return 1;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        if (row[0] == NULL || row[1] == NULL || row[1][0] == '\0') {
            continue;   /* roles have an empty host */
        }
        if (mdb_users_add_priv(u, row[0], row[1], row[2]) != 0) {
            mysql_free_result(res);
            return -1;
        }
    }
    mysql_free_result(res);
    query_globals(c, u);
    mdb_users_sort(u);
    return 0;
}

/* Accounts from mysql.user: passwords only, no requirements. *limited is
 * set (the caller warns) when this path is taken. */
static int
query_users(MYSQL *c, struct mdb_users *u, bool *limited)
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
    int rc = query_global_priv(c, u);

    *limited = rc > 0;
    if (rc <= 0) {
        return rc;
    }
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
load_once(struct mdb_service *s, struct sl_server *srv,
          struct mdb_users *u, char *err, size_t errlen, unsigned *cerr)
{
    unsigned timeout = 5;
    MYSQL *c = mysql_init(NULL);
    bool limited = false;
    int rc = -1;

    *cerr = 0;
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
    if (sl_server_mysql_connect(srv, c, sl_service_user(s->svc),
                                sl_service_password(s->svc)) == NULL) {
        snprintf(err, errlen, "server %s: %s", sl_server_name(srv),
                 mysql_error(c));
    } else if (!sl_server_mysql_tls_ok(srv, c)) {
        snprintf(err, errlen, "server %s: does not support TLS but "
                 "ssl=true is set", sl_server_name(srv));
    } else if (query_users(c, u, &limited) != 0) {
        snprintf(err, errlen, "server %s: %s", sl_server_name(srv),
                 mysql_error(c));
        *cerr = mysql_errno(c);     /* query_retries: only after login */
        mdb_users_free(u);
    } else {
        rc = 0;
    }
    if (rc == 0 && limited) {
        sl_log_warn("service %s: cannot read mysql.global_priv on %s (grant "
                    "SELECT on it to the service user): account locks, "
                    "REQUIRE clauses, password expiry and connection limits "
                    "are not checked by Sluice", sl_service_name(s->svc),
                    sl_server_name(srv));
    }
    mysql_close(c);
    return rc;
}

/* load_once, again on a new connection while query_retries allows (the
 * account queries only read). */
static int
load_from(struct mdb_service *s, struct sl_server *srv,
          struct mdb_users *u, char *err, size_t errlen)
{
    unsigned cerr;
    uint64_t first = 0;
    uint64_t done = 0;
    int rc;

    while ((rc = load_once(s, srv, u, err, errlen, &cerr)) != 0) {
        first = first == 0 ? sl_monotonic_ms() : first;
        if (!sl_query_retry_ok(cerr, done++, first, s->query_retries,
                               s->query_retry_timeout_ms)) {
            break;
        }
        sl_log_notice("service %s: loading user accounts: %s; retry %llu of query_retries", sl_service_name(s->svc), err, (unsigned long long)done);
    }
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

/* user_accounts_file: add an entry unless the servers gave that account
 * (theirs wins, as in MaxScale); roles cannot log in. */
struct file_ctx {
    struct mdb_users *u;
    size_t server_n;          /* u->v[0..server_n) came from a server */
    size_t added;
};

static int
add_file_account(void *arg, const struct mdb_accfile_user *e)
{
    struct file_ctx *c = arg;

    if (e->is_role) {
        return 0;
    }
    for (size_t i = 0; i < c->server_n; i++) {
        if (strcmp(c->u->v[i].user, e->user) == 0 &&
            strcasecmp(c->u->v[i].host, e->host) == 0) {
            return 0;
        }
    }
    if (mdb_users_add(c->u, e->user, e->host,
                      pick_auth(e->auth_string, e->password),
                      e->plugin) != 0) {
        return -1;
    }
    c->added++;
    return 0;
}

/* Add the file's accounts to u and sort it. 0, or -1 with err (every
 * entry is checked before the first is added, so only running out of
 * memory leaves u partly extended: the caller frees u on error). */
static int
load_file(struct mdb_service *s, struct mdb_users *u, size_t *added,
          char *err, size_t errlen)
{
    struct file_ctx c = {u, u->n, 0};
    char why[512];

    if (mdb_accfile_read(s->accounts_file, add_file_account, &c, why,
                         sizeof(why)) != 0) {
        snprintf(err, errlen, "user_accounts_file '%s' %s",
                 s->accounts_file, why);
        return -1;
    }
    mdb_users_sort(u);
    *added = c.added;
    return 0;
}

/* One load: the servers and/or the file, as user_accounts_file_usage
 * says. A file that cannot be used fails the load (the accounts loaded
 * before stay). */
static int
load_accounts(struct mdb_service *s, struct mdb_users *u, size_t *added,
              char *src, size_t srclen, char *err, size_t errlen)
{
    *added = 0;
    if (s->file_only) {
        snprintf(src, srclen, "user_accounts_file");
        if (load_file(s, u, added, err, errlen) != 0) {
            mdb_users_free(u);
            return -1;
        }
        return 0;
    }
    if (load_users(s, u, src, srclen, err, errlen) != 0) {
        return -1;   /* add_when_load_ok: the file is not used */
    }
    if (s->accounts_file != NULL) {
        if (load_file(s, u, added, err, errlen) != 0) {
            mdb_users_free(u);
            return -1;
        }
        snprintf(src + strlen(src), srclen - strlen(src),
                 " + user_accounts_file");
    }
    return 0;
}

/* sl_dcb_post's callback: the parked login goes on (mdb_client.c). */
static void
resume_parked(struct sl_dcb *dcb, void *arg)
{
    (void)arg;
    mdb_client_resume(dcb);
}

static void
wake_waiters(struct waiter *w)
{
    while (w != NULL) {
        struct waiter *next = w->next;

        if (sl_dcb_post(w->dcb, resume_parked, NULL) != 0) {
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
        if (s->interval_ms == 0 || s->loads == 0) {
            pthread_cond_wait(&s->cond, &s->lock);
            continue;
        }
        /* users_refresh_interval: reload when it has passed */
        now = sl_monotonic_ms();
        if (now >= s->last_load_ms + s->interval_ms) {
            s->want_load = true;
            return true;   /* periodic: users_refresh_time does not apply */
        }
        uint64_t ms = s->last_load_ms + s->interval_ms - now;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cond, &s->lock, &ts);
    }
    while (!s->stop && s->loads > 0 &&
           (now = sl_monotonic_ms()) < s->last_load_ms + s->refresh_ms) {
        uint64_t ms = s->last_load_ms + s->refresh_ms - now;

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
    char err[768], src[128];
    struct waiter *w;
    size_t added;
    int rc;

    pthread_mutex_lock(&s->lock);
    while (wait_for_request(s)) {
        s->want_load = false;
        s->last_load_ms = sl_monotonic_ms();
        pthread_mutex_unlock(&s->lock);

        memset(&fresh, 0, sizeof(fresh));
        rc = load_accounts(s, &fresh, &added, src, sizeof(src), err,
                           sizeof(err));

        pthread_mutex_lock(&s->lock);
        s->loads++;
        s->loaded = true;
        if (rc == 0) {
            mdb_users_free(&s->users);
            s->users = fresh;
            mdb_sha2_cache_sweep(&s->sha2, &s->users);
            snprintf(s->source, sizeof(s->source), "%s", src);
            sl_log_info("service %s: loaded %zu accounts from %s (%zu from "
                        "the file)", sl_service_name(s->svc), s->users.n,
                        src, added);
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
    if (mdb_sha2_cache_init(&s->sha2, SHA2_CACHE_MAX) != 0) {
        free(s);
        return NULL;
    }
    s->svc = svc;
    if (sl_service_params(svc) != NULL) {
        const struct sl_params *p = sl_service_params(svc);
        const char *path = sl_params_get(p, "user_accounts_file");
        const char *usage = sl_params_get(p, "user_accounts_file_usage");

        if (path != NULL && path[0] != '\0' &&
            (s->accounts_file = strdup(path)) == NULL) {
            mdb_sha2_cache_free(&s->sha2);
            free(s);
            return NULL;
        }
        /* the configuration check refused file_only_always alone */
        s->file_only = s->accounts_file != NULL && usage != NULL &&
                       strcmp(usage, "file_only_always") == 0;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->want_load = true;   /* the initial load, asynchronous */
    s->refresh_ms = MIN_RELOAD_INTERVAL_MS;
    if (sl_global_params() != NULL) {
        s->refresh_ms = sl_params_duration_ms(sl_global_params(),
                                              "users_refresh_time");
        s->interval_ms = sl_params_duration_ms(sl_global_params(),
                                               "users_refresh_interval");
        s->query_retries = sl_params_count(sl_global_params(),
                                           "query_retries");
        s->query_retry_timeout_ms = sl_params_duration_ms(
            sl_global_params(), "query_retry_timeout");
    }
    if (pthread_create(&s->thread, NULL, loader_main, s) != 0) {
        sl_log_error("service %s: cannot start the account loader",
                     sl_service_name(svc));
        mdb_sha2_cache_free(&s->sha2);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s->accounts_file);
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
    struct mdb_usage *u;

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
    mdb_sha2_cache_free(&s->sha2);
    mdb_users_free(&s->users);
    while ((u = s->usage) != NULL) {
        s->usage = u->next;
        free(u);
    }
    while (s->maps != NULL) {
        struct usermap_file *f = s->maps;

        s->maps = f->next;
        mdb_usermap_free(&f->map);
        free(f->path);
        free(f);
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s->accounts_file);
    free(s);
}

void *
mdb_service_diagnostics(struct mdb_service *s)
{
    json_t *j;

    pthread_mutex_lock(&s->lock);
    j = json_pack("{s:I, s:I, s:I, s:b, s:s, s:s, s:I, s:I, s:I}", "users",
                  (json_int_t)s->users.n, "loads", (json_int_t)s->loads,
                  "load_errors", (json_int_t)s->load_errors, "loaded",
                  s->loaded, "source", s->source, "last_error",
                  s->last_error, "sha2_cached", (json_int_t)s->sha2.n,
                  "sha2_fast_auth", (json_int_t)s->sha2_fast,
                  "sha2_full_auth", (json_int_t)s->sha2_full);
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

/* Park dcb until the next load completes. Called with the lock held.
 * When users_refresh_time keeps the next reload more than a second away,
 * the login is not held that long: it is refused now (as in MaxScale). */
static enum mdb_auth_rc
park(struct mdb_service *s, struct sl_dcb *dcb)
{
    struct waiter *w;

    if (s->loaded && s->loads > 0 &&
        sl_monotonic_ms() + 1000 < s->last_load_ms + s->refresh_ms) {
        return MDB_AUTH_DENIED;
    }
    w = malloc(sizeof(*w));
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

static enum mdb_auth_rc
refuse(struct mdb_refusal *why, uint16_t code, const char *sqlstate,
       const char *msg)
{
    why->code = code;
    snprintf(why->sqlstate, sizeof(why->sqlstate), "%s", sqlstate);
    snprintf(why->msg, sizeof(why->msg), "%s", msg);
    return MDB_AUTH_REFUSED;
}

/* The client's TLS, as the account's REQUIRE clause looks at it. */
static bool
tls_ok(struct sl_dcb *dcb, const struct mdb_account *a)
{
    char issuer[512], subject[512];
    struct mdb_peer p = {
        .tls = sl_dcb_is_tls(dcb),
        .cipher = sl_dcb_tls_cipher(dcb),
        .issuer = issuer,
        .subject = subject,
    };

    if (a->ssl_type >= MDB_SSL_X509) {
        p.cert_ok = sl_dcb_tls_peer(dcb, issuer, sizeof(issuer), subject,
                                    sizeof(subject));
    } else {
        issuer[0] = subject[0] = '\0';
    }
    return mdb_account_tls_ok(a, &p);
}

static struct mdb_usage *
usage_of(struct mdb_service *s, const struct mdb_account *a)
{
    size_t ulen = strlen(a->user) + 1;
    size_t hlen = strlen(a->host) + 1;
    struct mdb_usage *u;

    for (u = s->usage; u != NULL; u = u->next) {
        if (strcmp(u->name, a->user) == 0 && strcmp(u->host, a->host) == 0) {
            return u;
        }
    }
    if ((u = calloc(1, sizeof(*u) + ulen + hlen)) == NULL) {
        return NULL;
    }
    memcpy(u->name, a->user, ulen);
    u->host = u->name + ulen;
    memcpy(u->host, a->host, hlen);
    u->hour_start_ms = sl_monotonic_ms();
    u->next = s->usage;
    s->usage = u;
    return u;
}

/* MAX_USER_CONNECTIONS and MAX_CONNECTIONS_PER_HOUR: count the login in
 * sd->usage, or refuse with 1226 as the server does. Lock held. */
static enum mdb_auth_rc
take_slot(struct mdb_service *s, const struct mdb_account *a,
          struct mdb_session *sd, struct mdb_refusal *why)
{
    uint64_t now = sl_monotonic_ms();
    const char *what = NULL;
    uint32_t limit = 0;
    struct mdb_usage *u;
    char msg[256];

    sd->usage = NULL;
    if (a->max_user_connections == 0 && a->max_connections_hour == 0) {
        return MDB_AUTH_OK;
    }
    if ((u = usage_of(s, a)) == NULL) {
        return MDB_AUTH_DENIED;
    }
    if (now - u->hour_start_ms >= 3600 * 1000) {
        u->hour_start_ms = now;
        u->hour_count = 0;
    }
    if (a->max_user_connections > 0 &&
        u->active >= a->max_user_connections) {
        what = "max_user_connections";
        limit = a->max_user_connections;
    } else if (a->max_connections_hour > 0 &&
               u->hour_count >= a->max_connections_hour) {
        what = "max_connections_per_hour";
        limit = a->max_connections_hour;
    }
    if (what != NULL) {
        snprintf(msg, sizeof(msg), "User '%s' has exceeded the '%s' resource "
                 "(current value: %u)", a->user, what, limit);
        return refuse(why, 1226, "42000", msg);
    }
    u->active++;
    u->hour_count++;
    sd->usage = u;
    return MDB_AUTH_OK;
}

/* The password matched: what else the server would check, in its order.
 * Lock held. */
static enum mdb_auth_rc
admit(struct mdb_service *s, struct sl_dcb *dcb, const struct mdb_account *a,
      const struct mdb_auth_req *req, struct mdb_session *sd,
      struct mdb_refusal *why)
{
    if (!tls_ok(dcb, a)) {
        return refuse(why, 1045, "28000", "");   /* Access denied */
    }
    if (a->locked) {
        return refuse(why, 4151, "HY000",
                      "Access denied, this account is locked");
    }
    /* Otherwise the server logs an expired account in to its sandbox
     * mode (only SET PASSWORD), which it enforces on our backends. */
    if (s->users.disconnect_expired &&
        !(req->caps & SL_CAP_CAN_HANDLE_EXPIRED_PASSWORDS) &&
        mdb_account_pw_expired(a, s->users.default_pw_lifetime,
                               (int64_t)time(NULL))) {
        return refuse(why, 1862, "HY000", "Your password has expired. To "
                      "log in you must change it using a client that "
                      "supports expired passwords");
    }
    return take_slot(s, a, sd, why);
}

/* Read a user_mapping_file into f (lock held: a small local file, read
 * once per load of the accounts). */
static void
read_usermap(struct mdb_service *s, struct usermap_file *f)
{
    FILE *fp = fopen(f->path, "r");
    char *text = NULL;
    size_t n = 0;

    mdb_usermap_free(&f->map);
    f->ok = false;
    f->loads = s->loads;
    if (fp == NULL) {
        snprintf(f->err, sizeof(f->err), "cannot open it: %s",
                 strerror(errno));
        return;
    }
    text = malloc(MDB_USERMAP_MAX + 1);
    if (text != NULL) {
        n = fread(text, 1, MDB_USERMAP_MAX + 1, fp);
    }
    fclose(fp);
    if (text == NULL || n > MDB_USERMAP_MAX) {
        snprintf(f->err, sizeof(f->err), "larger than %d bytes",
                 MDB_USERMAP_MAX);
    } else {
        f->ok = mdb_usermap_parse(text, n, &f->map, f->err,
                                  sizeof(f->err)) == 0;
    }
    if (text != NULL) {
        OPENSSL_cleanse(text, n);   /* it holds passwords */
    }
    free(text);
    if (!f->ok) {
        sl_log_error("service %s: user_mapping_file '%s': %s; logins "
                     "through it are refused", sl_service_name(s->svc),
                     f->path, f->err);
    }
}

/* The parsed map of path, read if needed (NULL: unreadable, logged). Lock
 * held. */
static const struct mdb_usermap *
usermap_of(struct mdb_service *s, const char *path)
{
    struct usermap_file *f;

    for (f = s->maps; f != NULL && strcmp(f->path, path) != 0;
         f = f->next) {
    }
    if (f == NULL) {
        if ((f = calloc(1, sizeof(*f))) == NULL ||
            (f->path = strdup(path)) == NULL) {
            free(f);
            return NULL;
        }
        f->next = s->maps;
        s->maps = f;
        read_usermap(s, f);
    } else if (f->loads != s->loads) {
        read_usermap(s, f);
    }
    return f->ok ? &f->map : NULL;
}

/* How the client's proof stands against an account. */
enum proof {
    PROOF_NO,           /* it does not match */
    PROOF_NATIVE,       /* the native hash (a token, a password in clear
                         * or the fast path): sd->sha1pw, sd->has_pw set */
    PROOF_ED25519,      /* the ed25519 key (a signature, or with
                         * ed_mode=sha256 the password in clear) */
    PROOF_SWITCH_ED,    /* it does not, but a client_ed25519 signature
                         * may */
    PROOF_SHA2_FULL,    /* caching_sha2_password: ask for the password */
    PROOF_PAM,          /* the account's PAM conversation succeeded */
    PROOF_SWITCH_PAM,   /* it does not, but a PAM conversation may */
};

/* No proof yet: what the client may be asked for instead. */
static enum proof
other_proof(const struct mdb_account *a, const struct mdb_auth_req *req,
            bool may_switch_ed)
{
    if (may_switch_ed) {
        return PROOF_SWITCH_ED;
    }
    if (a->pam && req->pam_ok && (req->caps & SL_CAP_PLUGIN_AUTH)) {
        return PROOF_SWITCH_PAM;
    }
    return PROOF_NO;
}

/* Keep the password in clear pw[len] for a backend's caching_sha2_password
 * (its SHA-256 for the fast path, itself for the full authentication). */
static void
keep_clear(struct mdb_session *sd, const void *pw, size_t len)
{
    if (len >= sizeof(sd->clearpw)) {
        return;
    }
    memcpy(sd->clearpw, pw, len);
    sd->clearpw[len] = '\0';
    sd->clearpw_len = len;
    sd->has_clear = true;
    mdb_sha256_password(pw, len, sd->sha256pw);
    sd->has_sha256 = true;
}

/*
 * The client's proof matched account a: the credential the backends
 * get. The listener's user_mapping_file may map the user to another
 * account (any plugin the client used); otherwise a native login keeps
 * SHA1(password), a password in clear matched against the ed25519 key
 * (ed_mode=sha256) SHA-512(password), and an ed25519 signature gives
 * nothing to log in with. Lock held.
 */
static enum mdb_auth_rc
backend_credential(struct mdb_service *s, const struct mdb_account *a,
                   const struct mdb_auth_req *req, enum proof kind,
                   struct mdb_session *sd, struct mdb_refusal *why)
{
    const struct mdb_usermap *m = NULL;
    const struct mdb_usermap_cred *c;
    const char *to = NULL;

    sd->backend_user[0] = '\0';
    sd->has_ed = false;
    sd->has_clear = false;
    if (req->map_path != NULL &&
        (m = usermap_of(s, req->map_path)) == NULL) {
        why->no_credential = true;
        return refuse(why, 1045, "28000", "its listener's "
                      "user_mapping_file cannot be used (see the error "
                      "logged when it was read)");
    }
    if (m != NULL && (to = mdb_usermap_find(m, req->user, &c)) != NULL) {
        snprintf(sd->backend_user, sizeof(sd->backend_user), "%s", to);
        sd->has_pw = c != NULL && c->password[0] != '\0' && !c->ed25519;
        sd->has_sha256 = false;
        if (sd->has_pw) {
            mdb_sha1(c->password, strlen(c->password), sd->sha1pw);
            keep_clear(sd, c->password, strlen(c->password));
        } else if (c != NULL && c->ed25519) {
            sd->has_ed = mdb_ed25519_hash_password(
                             c->password, strlen(c->password),
                             sd->ed_hash) == 0;
        }
        return MDB_AUTH_OK;
    }
    if (kind == PROOF_ED25519 && req->cleartext) {
        /* ed_mode=sha256: the password itself is the credential */
        sd->has_ed = mdb_ed25519_hash_password((const char *)req->token,
                                               req->token_len,
                                               sd->ed_hash) == 0;
        keep_clear(sd, req->token, req->token_len);
        return MDB_AUTH_OK;
    }
    if (kind == PROOF_ED25519) {
        sl_log_warn("account '%s'@'%s' logged in with ed25519, but Sluice "
                    "has no password to log in to the servers as it: map "
                    "the user to a backend account in the listener's "
                    "user_mapping_file (see docs/authentication.md)",
                    a->user, a->host);
        why->no_credential = true;
        return refuse(why, 1045, "28000", "no backend credential for an "
                      "ed25519 login (user_mapping_file)");
    }
    if (kind == PROOF_NATIVE && req->cleartext) {
        keep_clear(sd, req->token, req->token_len);
    }
    return MDB_AUTH_OK;
}

/* caching_sha2_password's fast path against the cache. Lock held. */
static bool
sha2_fast_ok(struct mdb_service *s, const struct mdb_account *a,
             const struct mdb_auth_req *req, struct mdb_session *sd)
{
    const struct mdb_sha2_entry *e = mdb_sha2_cache_find(&s->sha2, a);

    if (e == NULL ||
        !mdb_sha2_fast_check(req->token, req->token_len, req->scramble,
                             MDB_SCRAMBLE_LEN, e->sha256pw)) {
        return false;
    }
    memcpy(sd->sha1pw, e->sha1pw, MDB_SHA1_LEN);
    sd->has_pw = true;
    memcpy(sd->sha256pw, e->sha256pw, MDB_SHA256_LEN);
    sd->has_sha256 = true;
    s->sha2_fast++;
    return true;
}

/* Does the client's proof match a? Lock held. */
static enum proof
proof_check(struct mdb_service *s, const struct mdb_account *a,
            const struct mdb_auth_req *req, struct mdb_session *sd)
{
    bool native_ok = a->native && req->native_ok;
    bool ed_ok = a->ed25519 && req->ed25519_ok;
    bool may_switch_ed = ed_ok && (req->caps & SL_CAP_PLUGIN_AUTH);
    uint8_t pk[MDB_ED25519_KEY_LEN];

    sd->has_sha256 = false;   /* set by the fast path or a cleartext */
    if (req->pam_done) {
        return a->pam && req->pam_ok ? PROOF_PAM : PROOF_NO;
    }
    if (req->sha2) {
        if (native_ok && sha2_fast_ok(s, a, req, sd)) {
            return PROOF_NATIVE;
        }
        if (native_ok || (ed_ok && req->ed_cleartext_ok)) {
            return PROOF_SHA2_FULL;
        }
        return other_proof(a, req, may_switch_ed);
    }
    if (req->cleartext) {
        if (native_ok &&
            mdb_native_check_password(req->token, req->token_len,
                                      a->has_pw, a->stored, sd->sha1pw)) {
            sd->has_pw = a->has_pw;
            return PROOF_NATIVE;
        }
        return ed_ok && req->ed_cleartext_ok &&
                       mdb_ed25519_public_key((const char *)req->token,
                                              req->token_len, pk) == 0 &&
                       CRYPTO_memcmp(pk, a->ed_pk, sizeof(pk)) == 0
                   ? PROOF_ED25519
                   : PROOF_NO;
    }
    if (req->ed25519) {
        return ed_ok && mdb_ed25519_verify(a->ed_pk, req->nonce,
                                           MDB_ED25519_NONCE_LEN,
                                           req->token, req->token_len)
                   ? PROOF_ED25519
                   : PROOF_NO;
    }
    if (native_ok &&
        mdb_native_check(req->token, req->token_len, req->scramble,
                         a->has_pw, a->stored, sd->sha1pw)) {
        sd->has_pw = a->has_pw;
        return PROOF_NATIVE;
    }
    return other_proof(a, req, may_switch_ed);
}

enum mdb_auth_rc
mdb_service_authenticate(struct mdb_service *s, struct sl_dcb *dcb,
                         const struct mdb_auth_req *req,
                         struct mdb_session *sd, struct mdb_refusal *why)
{
    const struct mdb_account *a = NULL;
    enum mdb_auth_rc rc = MDB_AUTH_DENIED;
    bool unknown = true;   /* no usable account matched (under the lock) */
    enum proof kind = PROOF_NO;

    why->no_credential = false;
    pthread_mutex_lock(&s->lock);
    if (!s->loaded) {
        rc = park(s, dcb);
        goto out;
    }
    a = mdb_users_find(&s->users, req->user, req->client, req->is_unix);
    unknown = a == NULL || !((a->native && req->native_ok) ||
                             (a->ed25519 && req->ed25519_ok) ||
                             (a->pam && req->pam_ok));
    if (a != NULL) {
        kind = proof_check(s, a, req, sd);
    }
    if (kind == PROOF_NATIVE || kind == PROOF_ED25519 || kind == PROOF_PAM) {
        if (kind != PROOF_NATIVE) {
            sd->has_pw = false;
        }
        if (kind == PROOF_NATIVE && req->cleartext && a->has_pw) {
            /* caching_sha2_password's full authentication passed */
            mdb_sha2_cache_put(&s->sha2, a, req->token, req->token_len);
            s->sha2_full++;
        }
        rc = backend_credential(s, a, req, kind, sd, why);
        if (rc == MDB_AUTH_OK) {
            rc = admit(s, dcb, a, req, sd, why);
        }
        /* A stale cache must not keep refusing an account just unlocked
         * or altered: reload once, as for a wrong password. */
        if (rc == MDB_AUTH_REFUSED && why->code != 1226 && req->may_reload &&
            host_may_reload(s, req->is_unix ? "localhost" : req->client,
                            sl_monotonic_ms()) &&
            park(s, dcb) == MDB_AUTH_WAIT) {
            rc = MDB_AUTH_WAIT;   /* else the refusal stands */
        }
    } else if (kind == PROOF_SWITCH_ED) {
        rc = MDB_AUTH_SWITCH_ED25519;
    } else if (kind == PROOF_SWITCH_PAM) {
        snprintf(why->pam_service, sizeof(why->pam_service), "%s",
                 a->pam_service);
        rc = MDB_AUTH_SWITCH_PAM;
    } else if (kind == PROOF_SHA2_FULL) {
        rc = MDB_AUTH_SHA2_FULL;
    } else if (req->may_reload &&
               host_may_reload(s, req->is_unix ? "localhost" : req->client,
                               sl_monotonic_ms())) {
        rc = park(s, dcb);
    }
    if (rc == MDB_AUTH_DENIED && a != NULL && unknown) {
        /* Say why, once the login is finally refused. */
        sl_log_warn("account '%s'@'%s' authenticates with %s: the "
                    "listener's authenticators cannot check it (Sluice "
                    "checks mysql_native_password, ed25519 on listeners "
                    "with authenticator=ed25519auth, and pam on listeners "
                    "with authenticator=PAMAuth; see "
                    "docs/authentication.md)", a->user, a->host,
                    a->plugins != NULL ? a->plugins : "an unknown plugin");
    }
out:
    pthread_mutex_unlock(&s->lock);
    if (rc == MDB_AUTH_DENIED) {
        why->unknown_user = unknown;
    }
    return rc;
}

void
mdb_service_retake(struct mdb_service *s, struct mdb_usage *u)
{
    if (s == NULL || u == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    u->active++;
    pthread_mutex_unlock(&s->lock);
}

void
mdb_service_release(struct mdb_service *s, struct mdb_usage *u)
{
    if (s == NULL || u == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    if (u->active > 0) {
        u->active--;
    }
    pthread_mutex_unlock(&s->lock);
}
