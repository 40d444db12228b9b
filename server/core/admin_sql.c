/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The REST API's SQL resource, /v1/sql (MaxScale's shapes): an admin opens
 * a libmariadb connection to a server, a service or a listener with
 * database credentials of its own, runs SQL on it and closes it.
 *
 *   POST   /v1/sql                   open: 201, the connection, meta.token
 *   GET    /v1/sql, /v1/sql/ID       the open connections (no token)
 *   POST   /v1/sql/ID/queries        run {"sql","max_rows"}: 201, results
 *   POST   /v1/sql/ID/reconnect      204, or 503
 *   POST   /v1/sql/ID/cancel         KILL QUERY its running query: 200
 *   DELETE /v1/sql/ID                204
 *
 * Every call on one connection needs its token (?token=, or the
 * conn_id_sig_ID cookie that persist=yes set): the token is 256 random
 * bits known only to whoever opened the connection, so one admin cannot
 * use another's connection by knowing its id (which GET lists).
 *
 * Bounds: at most SQL_MAX_CONNS connections; a result holds at most
 * max_rows rows (default 1000, at most SQL_MAX_ROWS) and SQL_MAX_BYTES of
 * row data, the rest is read and dropped ("complete": false); the SQL
 * text is bounded by the request body limit (SL_ADMIN_MAX_BODY, 413).
 *
 * Threads: the handlers run on libmicrohttpd's single thread. A query
 * does not: its HTTP connection is suspended (sl__admin_defer) and a
 * thread of its own runs it and hands the answer back (sl__admin_answer),
 * so other REST requests are served meanwhile; at most one query runs per
 * connection (busy: 503), so at most SQL_MAX_CONNS such threads. Opening
 * and reconnecting stay on the admin thread, bounded by the connection's
 * timeout (default 10 s, at most SQL_MAX_TIMEOUT), which also bounds
 * every wait of a query on the server (read and write timeouts: past it
 * the connection is lost, 503, and must be reconnected or closed). A
 * reaper thread closes connections idle for SQL_IDLE_TIMEOUT or whose
 * token is older than its max-age. The table is shared by these threads
 * under one mutex (admin requests only, no hot path); a busy connection
 * belongs to its query's thread alone, and the reaper leaves it.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <sluice/log.h>
#include <sluice/server.h>

#include "admin_int.h"

#define SQL_MAX_CONNS 32
#define SQL_MAX_ROWS 10000
#define SQL_DEFAULT_ROWS 1000
#define SQL_MAX_BYTES (16 * 1024 * 1024)
#define SQL_DEFAULT_TIMEOUT 10
#define SQL_MAX_TIMEOUT 60
#define SQL_IDLE_TIMEOUT 1800          /* seconds */
#define SQL_DEFAULT_MAX_AGE 28800      /* seconds, MaxScale's */
#define SQL_ID_LEN 36
#define SQL_TOKEN_LEN 64

struct sql_conn {
    char id[SQL_ID_LEN + 1];
    char token[SQL_TOKEN_LEN + 1];
    char target[SL_NAME_MAX];
    char user[256];
    char *password;
    char *db;                  /* NULL: none */
    char *last_sql;            /* NULL: none yet */
    unsigned timeout;
    MYSQL *mysql;              /* NULL: lost (reconnect or close it) */
    unsigned long thread_id;
    double last_used;          /* monotonic seconds */
    double expires;            /* monotonic seconds: max-age */
    uint64_t nqueries;
    bool busy;                 /* a query or reconnect runs: reaper keeps */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reaper_cv = PTHREAD_COND_INITIALIZER;
static struct sql_conn *conns[SQL_MAX_CONNS];
static pthread_t reaper;
static bool reaper_running;
static bool reaper_stop;

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
conn_free(struct sql_conn *c)
{
    if (c == NULL) {
        return;
    }
    if (c->mysql != NULL) {
        mysql_close(c->mysql);
    }
    if (c->password != NULL) {
        explicit_bzero(c->password, strlen(c->password));
        free(c->password);
    }
    explicit_bzero(c->token, sizeof(c->token));
    free(c->db);
    free(c->last_sql);
    free(c);
}

/* ---- the reaper ---- */

static void *
reaper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    while (!reaper_stop) {
        struct timespec ts;
        double now = now_s();

        for (int i = 0; i < SQL_MAX_CONNS; i++) {
            struct sql_conn *c = conns[i];

            if (c == NULL || c->busy) {
                continue;
            }
            if (now - c->last_used >= SQL_IDLE_TIMEOUT || now >= c->expires) {
                conns[i] = NULL;
                sl_log_notice("REST API: SQL connection %s to %s closed (%s)",
                              c->id, c->target,
                              now >= c->expires ? "token expired"
                                                : "idle");
                pthread_mutex_unlock(&lock);
                conn_free(c);   /* COM_QUIT may wait: not under the lock */
                pthread_mutex_lock(&lock);
            }
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&reaper_cv, &lock, &ts);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* Start the reaper with the first connection (admin thread). */
static void
reaper_start(void)
{
    if (reaper_running) {
        return;
    }
    reaper_stop = false;
    if (pthread_create(&reaper, NULL, reaper_main, NULL) == 0) {
        reaper_running = true;
    } else {
        sl_log_error("REST API: cannot start the SQL connection reaper");
    }
}

void
sl__admin_sql_stop(void)
{
    if (reaper_running) {
        pthread_mutex_lock(&lock);
        reaper_stop = true;
        pthread_cond_signal(&reaper_cv);
        pthread_mutex_unlock(&lock);
        pthread_join(reaper, NULL);
        reaper_running = false;
    }
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        conn_free(conns[i]);
        conns[i] = NULL;
    }
}

/* ---- ids, tokens ---- */

static int
random_hex(char *out, size_t nbytes)
{
    unsigned char buf[64];
    size_t got = 0;

    if (nbytes > sizeof(buf)) {
        return -1;
    }
    while (got < nbytes) {
        ssize_t n = getrandom(buf + got, nbytes - got, 0);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < nbytes; i++) {
        sprintf(out + 2 * i, "%02x", buf[i]);
    }
    explicit_bzero(buf, sizeof(buf));
    return 0;
}

/* A version 4 UUID, as MaxScale's ids look. */
static int
new_id(char *out)
{
    char hex[33];

    if (random_hex(hex, 16) < 0) {
        return -1;
    }
    hex[12] = '4';
    hex[16] = "89ab"[hex[16] % 4];
    snprintf(out, SQL_ID_LEN + 1, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8,
             hex + 12, hex + 16, hex + 20);
    return 0;
}

static bool
token_equal(const char *a, const char *b)
{
    size_t la = strlen(a);
    unsigned char diff = la != SQL_TOKEN_LEN;

    for (size_t i = 0; i < SQL_TOKEN_LEN; i++) {
        diff |= (unsigned char)(i < la ? a[i] : 0) ^ (unsigned char)b[i];
    }
    return diff == 0;
}

/* ---- connecting ---- */

/* Where target points: a server (srv set), or a service's first listener
 * or a listener (host/port or socket). 0, or -1 with msg. */
struct sql_dest {
    const struct sl_server *srv;
    char host[256];
    int port;
    char socket[108];
};

static const char *
connect_host(const char *addr)
{
    if (addr[0] == '\0' || strcmp(addr, "0.0.0.0") == 0) {
        return "127.0.0.1";
    }
    if (strcmp(addr, "::") == 0) {
        return "::1";
    }
    return addr;
}

static int
find_dest(const char *target, struct sql_dest *d, char *msg, size_t len)
{
    const struct sl_listener *l = NULL;
    const struct sl_service *svc;

    memset(d, 0, sizeof(*d));
    if ((d->srv = sl__admin_find_server(target)) != NULL) {
        return 0;
    }
    if ((svc = sl__admin_find_service(target)) != NULL) {
        for (size_t i = 0; i < sl__config->nlisteners; i++) {
            if (sl__config->listeners[i]->service == svc) {
                l = sl__config->listeners[i];
                break;
            }
        }
        if (l == NULL) {
            snprintf(msg, len, "service '%s' has no listener to connect to",
                     target);
            return -1;
        }
    } else if ((l = sl__admin_find_listener(target)) == NULL) {
        snprintf(msg, len, "no server, service or listener named '%s'",
                 target);
        return -1;
    }
    snprintf(d->host, sizeof(d->host), "%s", connect_host(l->address));
    d->port = l->port;
    snprintf(d->socket, sizeof(d->socket), "%s", l->socket);
    return 0;
}

/* Open c->mysql as c's user. 0, or -1 with *err (the error number, 0 for
 * one of ours) and msg and *sqlstate. */
static int
conn_open(struct sql_conn *c, unsigned *err, char *msg, size_t len,
          char *sqlstate)
{
    struct sql_dest d;
    MYSQL *m;
    MYSQL *ok;

    *err = 0;
    snprintf(sqlstate, 6, "HY000");
    if (find_dest(c->target, &d, msg, len) < 0) {
        return -1;
    }
    m = mysql_init(NULL);
    if (m == NULL) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    mysql_optionsv(m, MYSQL_OPT_CONNECT_TIMEOUT, &c->timeout);
    mysql_optionsv(m, MYSQL_OPT_READ_TIMEOUT, &c->timeout);
    mysql_optionsv(m, MYSQL_OPT_WRITE_TIMEOUT, &c->timeout);
    mysql_optionsv(m, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (d.srv != NULL) {
        unsigned proto = d.srv->socket[0] ? MYSQL_PROTOCOL_SOCKET
                                                    : MYSQL_PROTOCOL_TCP;

        mysql_optionsv(m, MYSQL_OPT_PROTOCOL, &proto);
        if (sl_server_mysql_tls(d.srv, m) != 0) {
            snprintf(msg, len, "cannot set the TLS options of server %s",
                     c->target);
            mysql_close(m);
            return -1;
        }
        ok = sl_server_mysql_connect(d.srv, m, c->user, c->password);
        if (ok != NULL && !sl_server_mysql_tls_ok(d.srv, m)) {
            snprintf(msg, len, "server %s does not support TLS but ssl=true "
                     "is set", c->target);
            mysql_close(m);
            return -1;
        }
    } else {
        unsigned proto = d.socket[0] ? MYSQL_PROTOCOL_SOCKET
                                     : MYSQL_PROTOCOL_TCP;

        mysql_optionsv(m, MYSQL_OPT_PROTOCOL, &proto);
        ok = mysql_real_connect(m, d.socket[0] ? NULL : d.host, c->user,
                                c->password, NULL, (unsigned)d.port,
                                d.socket[0] ? d.socket : NULL, 0);
    }
    if (ok != NULL && c->db != NULL && mysql_select_db(m, c->db) != 0) {
        ok = NULL;
    }
    if (ok != NULL &&
        mysql_set_server_option(m, MYSQL_OPTION_MULTI_STATEMENTS_ON) != 0) {
        ok = NULL;
    }
    if (ok == NULL) {
        *err = mysql_errno(m);
        snprintf(msg, len, "%s", mysql_error(m));
        snprintf(sqlstate, 6, "%s", mysql_sqlstate(m));
        mysql_close(m);
        return -1;
    }
    pthread_mutex_lock(&lock);   /* cancel_all reads it */
    c->mysql = m;
    c->thread_id = mysql_thread_id(m);
    pthread_mutex_unlock(&lock);
    return 0;
}

/* ---- JSON ---- */

static json_t *
conn_json(struct admin_req *r, const struct sql_conn *c, double now)
{
    json_t *attrs = json_pack(
        "{s:f, s:o, s:s, s:I}", "seconds_idle", now - c->last_used,
        "sql", c->last_sql ? json_string(c->last_sql) : json_null(),
        "target", c->target, "thread_id", (json_int_t)c->thread_id);

    return json_pack("{s:s, s:s, s:o, s:{s:o, s:o}}", "id", c->id, "type",
                     "sql", "attributes", attrs, "links", "self",
                     sl__admin_link(r, "sql/%s/", c->id), "related",
                     sl__admin_link(r, "sql/%s/queries/", c->id));
}

static struct admin_resp
one_conn_doc(struct admin_req *r, const struct sql_conn *c, int status,
             bool with_token)
{
    json_t *doc = json_pack("{s:o, s:{s:o}}", "data",
                            conn_json(r, c, now_s()), "links", "self",
                            sl__admin_link(r, "sql/%s/", c->id));
    struct admin_resp res;

    if (doc != NULL && with_token) {
        json_object_set_new(doc, "meta", json_pack("{s:s}", "token",
                                                   c->token));
    }
    res = sl__admin_ok(doc);
    if (res.status == 200) {
        res.status = status;
    }
    return res;
}

/* The error document, with the database's errno and sqlstate in meta. */
static struct admin_resp
db_error(int status, unsigned err, const char *sqlstate, const char *msg)
{
    struct admin_resp res = sl__admin_error(status, "%s", msg);
    json_t *e = json_array_get(json_object_get(res.doc, "errors"), 0);

    if (e != NULL && err != 0) {
        json_object_set_new(e, "meta", json_pack("{s:I, s:s}", "errno",
                                                  (json_int_t)err, "sqlstate",
                                                  sqlstate));
    }
    return res;
}

/* ---- lookup ---- */

/* The connection named by seg[1] whose token the request carries, marked
 * busy; NULL with *res set (404 unknown, 400 missing or wrong token). */
static struct sql_conn *
take_conn(struct admin_req *r, struct admin_resp *res)
{
    const char *id = r->seg[1];
    const char *token = sl__admin_query(r, "token");
    struct sql_conn *found = NULL;
    char cookie[64];

    if (token == NULL) {
        snprintf(cookie, sizeof(cookie), "conn_id_sig_%.40s", id);
        token = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND,
                                            cookie);
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        if (conns[i] != NULL && strcmp(conns[i]->id, id) == 0) {
            found = conns[i];
            break;
        }
    }
    if (found == NULL) {
        pthread_mutex_unlock(&lock);
        *res = sl__admin_error(404, "no SQL connection '%.64s'", id);
        return NULL;
    }
    if (token == NULL || !token_equal(token, found->token)) {
        pthread_mutex_unlock(&lock);
        *res = sl__admin_error(400, "%s connection token for SQL "
                               "connection '%s'",
                               token ? "invalid" : "missing", found->id);
        return NULL;
    }
    if (found->busy) {   /* not while the admin thread is the only user */
        pthread_mutex_unlock(&lock);
        *res = sl__admin_error(503, "SQL connection '%s' is busy", id);
        return NULL;
    }
    found->busy = true;
    pthread_mutex_unlock(&lock);
    return found;
}

static void
release_conn(struct sql_conn *c)
{
    pthread_mutex_lock(&lock);
    c->busy = false;
    c->last_used = now_s();
    pthread_mutex_unlock(&lock);
}

/* ---- POST /v1/sql ---- */

static bool
opt_string(json_t *body, const char *key, const char **out,
           struct admin_resp *res)
{
    json_t *v = json_object_get(body, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return true;
    }
    if (!json_is_string(v) || strlen(json_string_value(v)) !=
                                  json_string_length(v)) {
        *res = sl__admin_error(400, "'%s' must be a string", key);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

static struct admin_resp
sql_open(struct admin_req *r)
{
    const char *user, *password, *target, *db;
    const char *persist = sl__admin_query(r, "persist");
    const char *max_age_s = sl__admin_query(r, "max-age");
    long long max_age = SQL_DEFAULT_MAX_AGE;
    json_t *tmo;
    struct admin_resp res;
    struct sql_conn *c;
    int slot = -1;
    unsigned err;
    char msg[512];
    char sqlstate[6];

    if (!json_is_object(r->body)) {
        return sl__admin_error(400, "the body must be a JSON object with "
                               "user, password and target");
    }
    if (!opt_string(r->body, "user", &user, &res) ||
        !opt_string(r->body, "password", &password, &res) ||
        !opt_string(r->body, "target", &target, &res) ||
        !opt_string(r->body, "db", &db, &res)) {
        return res;
    }
    if (user == NULL || password == NULL || target == NULL) {
        return sl__admin_error(400, "'user', 'password' and 'target' are "
                               "required");
    }
    if (strlen(user) >= sizeof(c->user) || strlen(target) >= SL_NAME_MAX) {
        return sl__admin_error(400, "'user' or 'target' is too long");
    }
    if (persist != NULL && strcmp(persist, "yes") != 0) {
        return sl__admin_error(400, "persist takes only the value 'yes'");
    }
    if (max_age_s != NULL) {
        char *end;
        long long v = strtoll(max_age_s, &end, 10);

        /* MaxScale ignores a bad value; a bad request gets a 400 here,
         * as a bad persist does */
        if (*end != '\0' || end == max_age_s || v <= 0) {
            return sl__admin_error(400, "max-age must be a positive whole "
                                   "number of seconds");
        }
        max_age = v;
    }
    tmo = json_object_get(r->body, "timeout");
    if (tmo != NULL && (!json_is_integer(tmo) ||
                        json_integer_value(tmo) < 1 ||
                        json_integer_value(tmo) > SQL_MAX_TIMEOUT)) {
        return sl__admin_error(400, "'timeout' must be an integer from 1 to "
                               "%d (seconds)", SQL_MAX_TIMEOUT);
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        if (conns[i] == NULL) {
            slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (slot < 0) {
        return sl__admin_error(503, "too many open SQL connections (at most "
                               "%d): close one with DELETE /v1/sql/ID",
                               SQL_MAX_CONNS);
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL || new_id(c->id) < 0 ||
        random_hex(c->token, SQL_TOKEN_LEN / 2) < 0 ||
        (c->password = strdup(password)) == NULL ||
        (db != NULL && db[0] != '\0' && (c->db = strdup(db)) == NULL)) {
        conn_free(c);
        return sl__admin_error(500, "out of memory or no randomness");
    }
    snprintf(c->user, sizeof(c->user), "%s", user);
    snprintf(c->target, sizeof(c->target), "%s", target);
    c->timeout = tmo ? (unsigned)json_integer_value(tmo)
                     : SQL_DEFAULT_TIMEOUT;
    if (conn_open(c, &err, msg, sizeof(msg), sqlstate) < 0) {
        conn_free(c);
        if (err == 0) {   /* ours: the request named nothing to reach */
            return sl__admin_error(400, "%s", msg);
        }
        /* the database refused (1045 ...) or could not be reached */
        return db_error(err >= 2000 && err < 3000 ? 503 : 403, err, sqlstate,
                        msg);
    }
    c->last_used = now_s();
    c->expires = c->last_used + (double)max_age;
    pthread_mutex_lock(&lock);
    if (conns[slot] != NULL) {   /* only this thread fills slots */
        pthread_mutex_unlock(&lock);
        conn_free(c);
        return sl__admin_error(500, "SQL connection table changed");
    }
    conns[slot] = c;
    reaper_start();
    /* under the lock: the reaper may close it once unlocked */
    res = one_conn_doc(r, c, 201, persist == NULL);
    if (res.status == 201) {
        char cookie[256];
        json_t *self = sl__admin_link(r, "sql/%s/", c->id);

        res.location = self ? strdup(json_string_value(self)) : NULL;
        json_decref(self);
        if (persist != NULL) {
            snprintf(cookie, sizeof(cookie),
                     "conn_id_sig_%s=%s; Path=/v1/sql/%s; Max-Age=%lld; "
                     "HttpOnly; SameSite=Strict", c->id, c->token, c->id,
                     max_age);
            res.cookie = strdup(cookie);
        }
    }
    pthread_mutex_unlock(&lock);
    return res;
}

/* ---- GET ---- */

static struct admin_resp
sql_get(struct admin_req *r)
{
    double now = now_s();
    json_t *doc;

    pthread_mutex_lock(&lock);
    if (r->nseg == 1) {
        json_t *data = json_array();

        for (int i = 0; i < SQL_MAX_CONNS; i++) {
            if (conns[i] != NULL) {
                json_array_append_new(data, conn_json(r, conns[i], now));
            }
        }
        pthread_mutex_unlock(&lock);
        doc = json_pack("{s:o, s:{s:o}}", "data", data, "links", "self",
                        sl__admin_link(r, "sql/"));
        return sl__admin_ok(doc);
    }
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        if (conns[i] != NULL && strcmp(conns[i]->id, r->seg[1]) == 0) {
            struct admin_resp res = one_conn_doc(r, conns[i], 200, false);

            pthread_mutex_unlock(&lock);
            return res;
        }
    }
    pthread_mutex_unlock(&lock);
    return sl__admin_error(404, "no SQL connection '%.64s'", r->seg[1]);
}

/* ---- DELETE, reconnect ---- */

static struct admin_resp
sql_close(struct admin_req *r)
{
    struct admin_resp res;
    struct sql_conn *c = take_conn(r, &res);

    if (c == NULL) {
        return res;
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        if (conns[i] == c) {
            conns[i] = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    conn_free(c);
    return sl__admin_no_content();
}

static struct admin_resp
sql_reconnect(struct admin_req *r)
{
    struct admin_resp res;
    struct sql_conn *c = take_conn(r, &res);
    unsigned err;
    char msg[512];
    char sqlstate[6];

    if (c == NULL) {
        return res;
    }
    if (c->mysql != NULL) {
        MYSQL *m = c->mysql;

        pthread_mutex_lock(&lock);
        c->mysql = NULL;
        c->thread_id = 0;
        pthread_mutex_unlock(&lock);
        mysql_close(m);
    }
    if (conn_open(c, &err, msg, sizeof(msg), sqlstate) < 0) {
        res = db_error(503, err, sqlstate, msg);
    } else {
        res = sl__admin_no_content();
    }
    release_conn(c);
    return res;
}

/* POST /v1/sql/ID/cancel: KILL QUERY the connection's running query
 * through a second connection with the same credentials (MaxScale's). */
static struct admin_resp
sql_cancel(struct admin_req *r)
{
    const char *token = sl__admin_query(r, "token");
    struct sql_conn *side = calloc(1, sizeof(*side));
    struct sql_conn *c = NULL;
    unsigned long tid = 0;
    bool busy = false;
    struct admin_resp res;
    unsigned err;
    char msg[512];
    char sqlstate[6];
    char cookie[64];
    char kill[64];

    if (side == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    if (token == NULL) {
        snprintf(cookie, sizeof(cookie), "conn_id_sig_%.40s", r->seg[1]);
        token = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND,
                                            cookie);
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        if (conns[i] != NULL && strcmp(conns[i]->id, r->seg[1]) == 0) {
            c = conns[i];
        }
    }
    if (c != NULL && token != NULL && token_equal(token, c->token)) {
        busy = c->busy && c->mysql != NULL;
        tid = c->thread_id;
        snprintf(side->target, sizeof(side->target), "%s", c->target);
        snprintf(side->user, sizeof(side->user), "%s", c->user);
        side->password = strdup(c->password);
        side->timeout = c->timeout;
    }
    pthread_mutex_unlock(&lock);
    if (c == NULL) {
        free(side);
        return sl__admin_error(404, "no SQL connection '%.64s'", r->seg[1]);
    }
    if (side->timeout == 0) {   /* not copied: no or a wrong token */
        free(side);
        return sl__admin_error(400, "%s connection token for SQL "
                               "connection '%.64s'",
                               token ? "invalid" : "missing", r->seg[1]);
    }
    if (!busy || side->password == NULL) {
        conn_free(side);
        return sl__admin_ok(json_pack("{s:{s:b}}", "meta", "canceled", 0));
    }
    if (conn_open(side, &err, msg, sizeof(msg), sqlstate) < 0) {
        conn_free(side);
        return db_error(503, err, sqlstate, msg);
    }
    snprintf(kill, sizeof(kill), "KILL QUERY %lu", tid);
    if (mysql_query(side->mysql, kill) != 0) {
        res = db_error(503, mysql_errno(side->mysql),
                       mysql_sqlstate(side->mysql), mysql_error(side->mysql));
    } else {
        res = sl__admin_ok(json_pack("{s:{s:b}}", "meta", "canceled", 1));
    }
    conn_free(side);
    return res;
}

/* ---- POST /v1/sql/ID/queries ---- */

static json_t *
cell_json(const MYSQL_FIELD *f, const char *v, unsigned long len)
{
    json_t *j;

    if (v == NULL) {
        return json_null();
    }
    switch (f->type) {
    case MYSQL_TYPE_TINY:
    case MYSQL_TYPE_SHORT:
    case MYSQL_TYPE_LONG:
    case MYSQL_TYPE_INT24:
    case MYSQL_TYPE_LONGLONG:
    case MYSQL_TYPE_YEAR: {
        char *end;
        long long n;

        errno = 0;
        n = strtoll(v, &end, 10);
        if (errno == 0 && *end == '\0' && end != v) {
            return json_integer(n);
        }
        break;   /* a BIGINT UNSIGNED above 2^63: as text */
    }
    case MYSQL_TYPE_FLOAT:
    case MYSQL_TYPE_DOUBLE: {
        char *end;
        double d = strtod(v, &end);

        if (*end == '\0' && end != v) {
            return json_real(d);
        }
        break;
    }
    default:
        break;
    }
    j = json_stringn(v, len);
    if (j == NULL) {   /* not UTF-8 (binary data): as 0x-hex */
        char *hex = malloc(2 * len + 3);

        if (hex == NULL) {
            return json_null();
        }
        memcpy(hex, "0x", 2);
        for (unsigned long i = 0; i < len; i++) {
            sprintf(hex + 2 + 2 * i, "%02x", (unsigned char)v[i]);
        }
        j = json_stringn(hex, 2 * len + 2);
        free(hex);
    }
    return j;
}

static json_t *
error_json(MYSQL *m)
{
    return json_pack("{s:I, s:s, s:s}", "errno", (json_int_t)mysql_errno(m),
                     "message", mysql_error(m), "sqlstate", mysql_sqlstate(m));
}

static bool
fatal(MYSQL *m)
{
    unsigned e = mysql_errno(m);

    return e >= 2000 && e < 3000;   /* the client's: the connection is gone */
}

/* One result set, read row by row; rows past max_rows or *bytes past
 * SQL_MAX_BYTES are read and dropped. */
static json_t *
resultset_json(MYSQL *m, MYSQL_RES *rs, long long max_rows, size_t *bytes)
{
    unsigned nf = mysql_num_fields(rs);
    MYSQL_FIELD *f = mysql_fetch_fields(rs);
    json_t *fields = json_array();
    json_t *data = json_array();
    json_t *out;
    bool complete = true;
    long long n = 0;
    MYSQL_ROW row;

    for (unsigned i = 0; i < nf; i++) {
        json_array_append_new(fields, json_stringn(f[i].name,
                                                   f[i].name_length));
    }
    while ((row = mysql_fetch_row(rs)) != NULL) {
        unsigned long *len = mysql_fetch_lengths(rs);
        size_t rowbytes = 16;
        json_t *jr;

        for (unsigned i = 0; i < nf; i++) {
            rowbytes += len[i] + 8;
        }
        if (n >= max_rows || *bytes + rowbytes > SQL_MAX_BYTES) {
            complete = false;
            continue;   /* drain the rest */
        }
        jr = json_array();
        for (unsigned i = 0; i < nf; i++) {
            json_array_append_new(jr, cell_json(&f[i], row[i], len[i]));
        }
        json_array_append_new(data, jr);
        *bytes += rowbytes;
        n++;
    }
    out = json_pack("{s:o, s:o, s:b}", "fields", fields, "data", data,
                    "complete", complete);
    if (mysql_errno(m) != 0) {   /* ended by an error: its fields too */
        json_t *e = error_json(m);

        json_object_update(out, e);
        json_decref(e);
        json_object_set_new(out, "complete", json_false());
    }
    return out;
}

/* Run sql on m: the results array; *lost when the connection broke. */
static json_t *
run_sql(MYSQL *m, const char *sql, size_t len, long long max_rows,
        bool *lost)
{
    json_t *results = json_array();
    size_t bytes = 0;
    int st;

    *lost = false;
    if (mysql_real_query(m, sql, (unsigned long)len) != 0) {
        *lost = fatal(m);
        json_array_append_new(results, error_json(m));
        return results;
    }
    do {
        if (mysql_field_count(m) > 0) {
            MYSQL_RES *rs = mysql_use_result(m);

            if (rs == NULL) {
                *lost = fatal(m);
                json_array_append_new(results, error_json(m));
                return results;
            }
            json_array_append_new(results,
                                  resultset_json(m, rs, max_rows, &bytes));
            mysql_free_result(rs);
            if (fatal(m)) {
                *lost = true;
                return results;
            }
        } else {
            json_array_append_new(
                results,
                json_pack("{s:I, s:I, s:I}", "affected_rows",
                          (json_int_t)mysql_affected_rows(m),
                          "last_insert_id", (json_int_t)mysql_insert_id(m),
                          "warnings", (json_int_t)mysql_warning_count(m)));
        }
        st = mysql_next_result(m);
        if (st > 0) {
            *lost = fatal(m);
            json_array_append_new(results, error_json(m));
            return results;
        }
    } while (st == 0);
    return results;
}

/* A query run on a thread of its own while its HTTP connection is
 * suspended (sl__admin_defer), so the REST API goes on answering. */
struct sql_job {
    struct sql_conn *c;        /* busy: this job's alone */
    char *sql;
    size_t len;
    long long max_rows;
    char qid[SQL_ID_LEN + 32];
    char *self;                /* the query's links.self */
    struct admin_deferred *answer;   /* sl__admin_defer's */
};

static int running;            /* jobs not finished (under lock) */
static bool stopping;          /* cancel_all ran: no new jobs */
static pthread_cond_t jobs_cv = PTHREAD_COND_INITIALIZER;

static struct admin_resp
job_run(struct sql_job *j)
{
    struct sql_conn *c = j->c;
    struct admin_resp res;
    json_t *results;
    json_t *doc;
    double t0 = now_s();
    double took;
    bool lost;

    results = run_sql(c->mysql, j->sql, j->len, j->max_rows, &lost);
    took = now_s() - t0;
    if (lost) {
        MYSQL *m = c->mysql;

        res = db_error(503, mysql_errno(m), mysql_sqlstate(m),
                       mysql_error(m));
        json_decref(results);
        pthread_mutex_lock(&lock);
        c->mysql = NULL;   /* cancel_all reads it under the lock */
        c->thread_id = 0;
        pthread_mutex_unlock(&lock);
        mysql_close(m);
        return res;
    }
    doc = json_pack("{s:{s:s, s:s, s:{s:f, s:o, s:s%}}, s:{s:s}}", "data",
                    "id", j->qid, "type", "queries", "attributes",
                    "execution_time", took, "results", results, "sql",
                    j->sql, j->len, "links", "self", j->self);
    res = sl__admin_ok(doc);
    if (res.status == 200) {
        res.status = 201;
    }
    return res;
}

static void
job_finish(struct sql_job *j, struct admin_resp res)
{
    struct admin_deferred *answer = j->answer;

    release_conn(j->c);
    free(j->sql);
    free(j->self);
    free(j);
    sl__admin_answer(answer, res);
    pthread_mutex_lock(&lock);
    running--;
    pthread_cond_broadcast(&jobs_cv);
    pthread_mutex_unlock(&lock);
}

static void *
job_main(void *arg)
{
    struct sql_job *j = arg;

    job_finish(j, job_run(j));
    return NULL;
}

void
sl__admin_sql_cancel_all(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    for (int i = 0; i < SQL_MAX_CONNS; i++) {
        struct sql_conn *c = conns[i];

        if (c != NULL && c->busy && c->mysql != NULL) {
            /* the job's wait on the server ends at once (2013) */
            shutdown(mysql_get_socket(c->mysql), SHUT_RDWR);
        }
    }
    while (running > 0) {
        pthread_cond_wait(&jobs_cv, &lock);
    }
    pthread_mutex_unlock(&lock);
}

static struct admin_resp
sql_query(struct admin_req *r)
{
    json_t *jsql = json_object_get(r->body, "sql");
    json_t *jmax = json_object_get(r->body, "max_rows");
    long long max_rows = SQL_DEFAULT_ROWS;
    struct admin_resp res;
    struct sql_conn *c;
    struct sql_job *j;
    json_t *self;
    pthread_attr_t attr;
    pthread_t tid;
    bool counted;
    int rc;

    if (sl__admin_query(r, "async") != NULL) {
        return sl__admin_error(400, "async queries are not supported: run "
                               "the query without async");
    }
    if (!json_is_object(r->body) || !json_is_string(jsql) ||
        json_string_length(jsql) == 0) {
        return sl__admin_error(400, "the body must be a JSON object with a "
                               "non-empty 'sql' string");
    }
    if (jmax != NULL) {
        if (!json_is_integer(jmax) || json_integer_value(jmax) < 0 ||
            json_integer_value(jmax) > SQL_MAX_ROWS) {
            return sl__admin_error(400, "'max_rows' must be an integer from "
                                   "0 to %d (0: %d)", SQL_MAX_ROWS,
                                   SQL_MAX_ROWS);
        }
        max_rows = json_integer_value(jmax);
        max_rows = max_rows == 0 ? SQL_MAX_ROWS : max_rows;
    }
    if ((c = take_conn(r, &res)) == NULL) {
        return res;
    }
    if (c->mysql == NULL) {
        release_conn(c);
        return sl__admin_error(503, "SQL connection '%s' was lost: "
                               "reconnect (POST /v1/sql/%s/reconnect) or "
                               "close it", c->id, c->id);
    }
    j = calloc(1, sizeof(*j));
    if (j == NULL || (j->sql = malloc(json_string_length(jsql) + 1)) == NULL) {
        free(j);
        release_conn(c);
        return sl__admin_error(500, "out of memory");
    }
    j->c = c;
    j->len = json_string_length(jsql);
    memcpy(j->sql, json_string_value(jsql), j->len + 1);
    j->max_rows = max_rows;
    c->nqueries++;
    snprintf(j->qid, sizeof(j->qid), "%s.%" PRIu64, c->id, c->nqueries);
    self = sl__admin_link(r, "sql/%s/queries/%s/", c->id, j->qid);
    j->self = strdup(self ? json_string_value(self) : "");
    json_decref(self);
    free(c->last_sql);
    c->last_sql = strndup(j->sql, 4096);
    pthread_mutex_lock(&lock);
    counted = !stopping;
    running += counted ? 1 : 0;
    pthread_mutex_unlock(&lock);
    j->answer = counted ? sl__admin_defer(r) : NULL;
    if (j->answer == NULL) {
        release_conn(c);
        free(j->sql);
        free(j->self);
        free(j);
        pthread_mutex_lock(&lock);
        running -= counted ? 1 : 0;
        pthread_cond_broadcast(&jobs_cv);
        pthread_mutex_unlock(&lock);
        return sl__admin_error(503, "%s", counted ? "out of memory"
                                                  : "Sluice is stopping");
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, job_main, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        job_finish(j, sl__admin_error(503, "cannot start a thread for the "
                                      "query: %s", strerror(rc)));
    }
    return (struct admin_resp){.status = SL_ADMIN_DEFERRED};
}

/* ---- the routes' entry ---- */

struct admin_resp
sl__rest_sql(struct admin_req *r)
{
    const char *m = r->method;

    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
        return sql_get(r);
    }
    if (strcmp(m, "DELETE") == 0) {
        return sql_close(r);
    }
    if (r->nseg == 1) {
        return sql_open(r);
    }
    if (strcmp(r->seg[2], "queries") == 0) {
        return sql_query(r);
    }
    if (strcmp(r->seg[2], "cancel") == 0) {
        return sql_cancel(r);
    }
    return sql_reconnect(r);
}
