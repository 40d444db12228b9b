/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration synchronization between Sluice instances
 * (config_sync_cluster, MaxScale semantics; docs/config-sync.md).
 *
 * The shared document is one row of <config_sync_db>.maxscale_config on
 * the primary of the monitor named by config_sync_cluster: (cluster,
 * version, config, origin, nodes). config is {"changes": [...]}: every
 * synchronized REST change since the cluster's row was created, in order,
 * each {"version", "origin", "method", "path", "body"}. A change made
 * here runs inside a transaction holding that row (SELECT ... FOR
 * UPDATE): it is refused (409) unless this instance has applied the
 * cluster's current version, it is applied locally by the ordinary REST
 * handler (runtime.c, one new generation), and only then is the row moved
 * to version+1 with UPDATE ... WHERE version = current and committed; a
 * handler that refuses the change rolls the transaction back. A second
 * instance changing at the same time waits for the row, then finds the
 * version moved and is refused without applying anything.
 *
 * Every config_sync_interval the sync thread reads the row; a newer
 * version is checked whole (shape, contiguous versions, every path a
 * synchronized REST route) and its new changes are replayed through the
 * same REST handlers, in order, inside one configuration batch
 * (generation.c): the workers get one new generation for all of them. A document that does not pass the check is refused
 * without applying anything; a change a handler refuses stops the replay
 * there (what it would have changed is unchanged). Either way the error is
 * kept for /v1/maxscale and logged once, and this instance stays at the
 * version it last applied (PERSISTDIR/.config_sync_version), which is
 * also how an instance started after changes catches up.
 *
 * Locking: sl__csync_lock serializes the REST API's request handling
 * (admin.c, libmicrohttpd's thread) with the sync thread's replays, so
 * runtime.c still sees one change at a time; generations are published
 * and reclaimed only under it, so the sync thread (not a worker, outside
 * the epochs) walks the configuration only while holding it. Status
 * fields are guarded by a second mutex. None of this is on the workers'
 * path.
 *
 * Context: sl__csync_set_routing/start/stop main (before the REST API
 * starts and after it stopped); sl__csync_change and
 * sl__csync_json the REST thread (holding sl__csync_lock for the first);
 * the rest the sync thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "config_sync"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <sluice/log.h>
#include <sluice/monitor.h>
#include <sluice/params.h>
#include <sluice/server.h>

#include <openssl/crypto.h>

#include "admin_int.h"
#include "config_files.h"
#include "config_int.h"
#include "worker_int.h"

static pthread_mutex_t admin_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t st_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t st_cond = PTHREAD_COND_INITIALIZER;

static struct {
    bool enabled;
    bool running;               /* thread started */
    bool stop;                  /* under st_lock */
    pthread_t thread;
    char cluster[SL_NAME_MAX];
    char user[256];
    char password[256];
    char db[128];
    char node[320];             /* this instance's name in "nodes" */
    char version_file[4200];
    uint64_t interval_ms;
    unsigned timeout_s;
    atomic_bool table_ok;       /* CREATE TABLE IF NOT EXISTS done */
    bool have_key;              /* a .secrets key: passwords encrypted */
    unsigned char key[SL_SECRETS_KEY_LEN];
    char key_path[4200];
    /* status: st_lock */
    long long local;            /* version applied here */
    long long cluster_version;  /* last read from the cluster */
    char origin[320];
    json_t *nodes;
    char error[1024];           /* "" = OK */
    long long refused;          /* version whose refusal was logged */
} S = {.refused = -1};

void
sl__csync_lock(void)
{
    pthread_mutex_lock(&admin_lock);
}

void
sl__csync_unlock(void)
{
    pthread_mutex_unlock(&admin_lock);
}

bool
sl__csync_enabled(void)
{
    return S.enabled;
}

static void
set_error(const char *fmt, ...) SL_PRINTF(1, 2);

static void
set_error(const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&st_lock);
    va_start(ap, fmt);
    vsnprintf(S.error, sizeof(S.error), fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&st_lock);
}

static void
save_local(long long v)
{
    char tmp[4300];
    FILE *f;

    pthread_mutex_lock(&st_lock);
    S.local = v;
    pthread_mutex_unlock(&st_lock);
    snprintf(tmp, sizeof(tmp), "%s.tmp", S.version_file);
    f = fopen(tmp, "w");
    if (f == NULL) {
        sl_log_error("cannot write '%s': %s", tmp, strerror(errno));
        return;
    }
    fprintf(f, "%lld\n", v);
    if (fclose(f) != 0 || rename(tmp, S.version_file) != 0) {
        sl_log_error("cannot write '%s': %s", S.version_file,
                     strerror(errno));
        unlink(tmp);
    }
}

static long long
load_local(void)
{
    FILE *f = fopen(S.version_file, "r");
    long long v = 0;

    if (f != NULL) {
        if (fscanf(f, "%lld", &v) != 1 || v < 0) {
            v = 0;
        }
        fclose(f);
    }
    return v;
}

/* ---- the cluster connection ---- */

static int
run(MYSQL *c, char *msg, size_t len, const char *fmt, ...) SL_PRINTF(4, 5);

/* A connection to the config_sync_cluster monitor's primary, or NULL with
 * msg set. The configuration is walked under sl__csync_lock (take_lock:
 * the sync thread; the REST thread already holds it): generations are
 * published and their arrays reclaimed only under that lock, and this
 * thread is not one of the workers whose epochs protect readers. What the
 * connection needs is copied before the lock is released. */
static MYSQL *
connect_primary(bool take_lock, char *msg, size_t len)
{
    const struct sl_config *cfg;
    const struct sl_monitor *m = NULL;
    struct sl_server *primary = NULL;
    const struct sl_params *sp;
    char addr[256];
    char sock[108];
    char name[SL_NAME_MAX];
    int port;
    bool tls;
    unsigned proto;
    MYSQL *c = NULL;

    if (take_lock) {
        sl__csync_lock();
    }
    cfg = sl__config_current();
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        if (strcmp(cfg->monitors[i]->name, S.cluster) == 0) {
            m = cfg->monitors[i];
        }
    }
    for (size_t i = 0; m != NULL && i < m->nservers && !primary; i++) {
        if (sl_server_status(m->servers[i]) & SL_SRV_MASTER) {
            primary = m->servers[i];
        }
    }
    if (m == NULL) {
        snprintf(msg, len, "monitor '%s' (config_sync_cluster) does not "
                 "exist", S.cluster);
    } else if (primary == NULL) {
        snprintf(msg, len, "monitor '%s' reports no primary server",
                 S.cluster);
    } else if ((c = mysql_init(NULL)) == NULL) {
        snprintf(msg, len, "out of memory");
    } else {
        snprintf(addr, sizeof(addr), "%s", sl_server_address(primary));
        snprintf(sock, sizeof(sock), "%s", sl_server_socket(primary)
                                               ? sl_server_socket(primary)
                                               : "");
        snprintf(name, sizeof(name), "%s", sl_server_name(primary));
        port = sl_server_port(primary);
        sp = sl_server_params(primary);
        tls = sp != NULL && sl_params_bool(sp, "ssl");
        if (sl_server_mysql_tls(primary, c) != 0) {
            snprintf(msg, len, "cannot set the TLS options of server %s",
                     name);
            mysql_close(c);
            c = NULL;
        }
    }
    if (take_lock) {
        sl__csync_unlock();
    }
    if (c == NULL) {
        return NULL;
    }
    proto = sock[0] ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    mysql_optionsv(c, MYSQL_OPT_CONNECT_TIMEOUT, &S.timeout_s);
    mysql_optionsv(c, MYSQL_OPT_READ_TIMEOUT, &S.timeout_s);
    mysql_optionsv(c, MYSQL_OPT_WRITE_TIMEOUT, &S.timeout_s);
    mysql_optionsv(c, MYSQL_OPT_PROTOCOL, &proto);
    if (mysql_real_connect(c, sock[0] ? NULL : addr, S.user, S.password,
                           NULL, sock[0] ? 0 : (unsigned)port,
                           sock[0] ? sock : NULL, 0) == NULL) {
        snprintf(msg, len, "cannot connect to %s (primary of '%s'): %s",
                 name, S.cluster, mysql_error(c));
        mysql_close(c);
        return NULL;
    }
    if (tls && mysql_get_ssl_cipher(c) == NULL) {
        snprintf(msg, len, "%s (primary of '%s') does not support TLS but "
                 "ssl=true is set", name, S.cluster);
        mysql_close(c);
        return NULL;
    }
    /* a wait for the row (another instance's change) is bounded too */
    if (run(c, msg, len, "SET SESSION innodb_lock_wait_timeout = %u",
            S.timeout_s) < 0) {
        mysql_close(c);
        return NULL;
    }
    return c;
}


static int
run(MYSQL *c, char *msg, size_t len, const char *fmt, ...)
{
    char *q = NULL;
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vasprintf(&q, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    rc = mysql_query(c, q) == 0 ? 0 : -1;
    if (rc < 0) {
        snprintf(msg, len, "%s", mysql_error(c));
    }
    free(q);
    return rc;
}

/* s escaped for a quoted SQL string (malloc). */
static char *
esc(MYSQL *c, const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n * 2 + 1);

    if (out != NULL) {
        mysql_real_escape_string(c, out, s, (unsigned long)n);
    }
    return out;
}

static int
ensure_table(MYSQL *c, char *msg, size_t len)
{
    if (atomic_load(&S.table_ok)) {
        return 0;
    }
    if (run(c, msg, len,
            "CREATE TABLE IF NOT EXISTS `%s`.maxscale_config ("
            "cluster VARCHAR(256) PRIMARY KEY, version BIGINT NOT NULL, "
            "config JSON NOT NULL, origin VARCHAR(256) NOT NULL, "
            "nodes JSON NOT NULL) ENGINE=InnoDB", S.db) < 0) {
        return -1;
    }
    atomic_store(&S.table_ok, true);
    return 0;
}

/* The cluster's row: version and (malloc) config, origin, nodes; 0 with
 * *version = 0 and NULLs when there is none; -1 on error. */
static int
read_row(MYSQL *c, bool for_update, long long *version, char **config,
         char **origin, char **nodes, char *msg, size_t len)
{
    char *cl = esc(c, S.cluster);
    MYSQL_RES *res;
    MYSQL_ROW row;
    int rc;

    *version = 0;
    *config = *origin = *nodes = NULL;
    if (cl == NULL) {
        snprintf(msg, len, "out of memory");
        return -1;
    }
    rc = run(c, msg, len, "SELECT version, config, origin, nodes FROM "
             "`%s`.maxscale_config WHERE cluster = '%s'%s", S.db, cl,
             for_update ? " FOR UPDATE" : "");
    free(cl);
    if (rc < 0) {
        return -1;
    }
    res = mysql_store_result(c);
    if (res == NULL) {
        snprintf(msg, len, "%s", mysql_error(c));
        return -1;
    }
    if ((row = mysql_fetch_row(res)) != NULL) {
        *version = row[0] ? strtoll(row[0], NULL, 10) : 0;
        *config = strdup(row[1] ? row[1] : "");
        *origin = strdup(row[2] ? row[2] : "");
        *nodes = strdup(row[3] ? row[3] : "{}");
    }
    mysql_free_result(res);
    return 0;
}

static void
set_seen(long long version, const char *origin, const char *nodes)
{
    json_t *n = nodes ? json_loads(nodes, 0, NULL) : NULL;

    pthread_mutex_lock(&st_lock);
    S.cluster_version = version;
    snprintf(S.origin, sizeof(S.origin), "%s", origin ? origin : "");
    if (n != NULL && json_is_object(n)) {
        json_decref(S.nodes);
        S.nodes = n;
        n = NULL;
    }
    pthread_mutex_unlock(&st_lock);
    json_decref(n);
}

/* ---- which REST changes are synchronized ---- */

/* The REST API's routing (main hands it over before sl__csync_start:
 * config_sync.c calls neither admin.c nor admin_routes.c, which call
 * it). */
static sl__csync_route_fn route_find;
static sl__csync_split_fn split_path;

void
sl__csync_set_routing(sl__csync_route_fn find, sl__csync_split_fn split)
{
    route_find = find;
    split_path = split;
}

static bool
is_kind(const char *s)
{
    static const char *const kinds[] = {"servers", "services", "listeners",
                                        "monitors", "filters"};

    for (size_t i = 0; i < SL_ARRAY_LEN(kinds); i++) {
        if (strcmp(s, kinds[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* [maxscale] parameters each instance keeps its own when a PATCH
 * /v1/maxscale is synchronized: passive (which instance acts is the
 * operator's choice per instance), the synchronization's own settings,
 * the REST API's address and the source address (per host). */
static bool
global_is_local(const char *name)
{
    return strcmp(name, "passive") == 0 ||
           strncmp(name, "config_sync_", 12) == 0 ||
           strncmp(name, "admin_", 6) == 0 ||
           strcmp(name, "local_address") == 0;
}

/* The synchronized part of a PATCH /v1/maxscale body: a new body with its
 * parameters minus the instance-local ones, or NULL when none is left. */
static json_t *
global_body(json_t *body)
{
    json_t *params = json_object_get(json_object_get(json_object_get(
        body, "data"), "attributes"), "parameters");
    json_t *keep = json_object();
    const char *k;
    json_t *v;

    json_object_foreach(params, k, v) {
        if (!global_is_local(k)) {
            json_object_set(keep, k, v);
        }
    }
    if (json_object_size(keep) == 0) {
        json_decref(keep);
        return NULL;
    }
    return json_pack("{s:{s:{s:o}}}", "data", "attributes", "parameters",
                     keep);
}

/* The first instance-local parameter a global body sets, or NULL. */
static const char *
global_local_param(json_t *body)
{
    json_t *params = json_object_get(json_object_get(json_object_get(
        body, "data"), "attributes"), "parameters");
    const char *k;
    json_t *v;

    json_object_foreach(params, k, v) {
        if (global_is_local(k)) {
            return k;
        }
    }
    return NULL;
}

static bool
is_global(const char *m, char *const *seg, int nseg)
{
    return nseg == 1 && strcmp(seg[0], "maxscale") == 0 &&
           strcmp(m, "PATCH") == 0;
}

/* Create, alter, relink and destroy of the five object kinds, and PATCH
 * maxscale (its parameters that are not instance-local); not states,
 * stop/start, users or module commands. */
bool
sl__csync_synced_path(const char *m, char *const *seg, int nseg)
{
    bool listeners = nseg >= 3 && strcmp(seg[0], "services") == 0 &&
                     strcmp(seg[2], "listeners") == 0;

    if (is_global(m, seg, nseg)) {
        return true;
    }
    if (nseg < 1 || !is_kind(seg[0])) {
        return false;
    }
    if (strcmp(m, "POST") == 0) {
        return nseg == 1 || (nseg == 3 && listeners);
    }
    if (strcmp(m, "PATCH") == 0) {
        return nseg == 2 ||
               (nseg == 4 && strcmp(seg[2], "relationships") == 0 &&
                strcmp(seg[3], "servers") == 0 &&
                (strcmp(seg[0], "monitors") == 0 ||
                 strcmp(seg[0], "services") == 0));
    }
    if (strcmp(m, "DELETE") == 0) {
        return nseg == 2 || (nseg == 4 && listeners);
    }
    return false;
}

bool
sl__csync_synced(const struct admin_req *r)
{
    return S.enabled && sl__csync_synced_path(r->method, r->seg, r->nseg);
}

/* ---- passwords in the document ---- */

/* A copy of body with every password parameter (monitorpw, *password)
 * of data.attributes.parameters encrypted (dec false) or decrypted (dec
 * true) with the .secrets key; NULL with msg set on failure. */
static json_t *
crypt_body(json_t *body, bool dec, char *msg, size_t len)
{
    json_t *copy = json_deep_copy(body);
    json_t *params = json_object_get(json_object_get(json_object_get(
        copy, "data"), "attributes"), "parameters");
    const char *k;
    json_t *v;

    if (copy == NULL) {
        snprintf(msg, len, "out of memory");
        return NULL;
    }
    json_object_foreach(params, k, v) {
        const char *in = json_string_value(v);
        char *out;

        if (in == NULL || !sl__is_password_name(k)) {
            continue;
        }
        out = dec ? sl__secret_decrypt(S.key, in)
                  : sl__secret_encrypt(S.key, in);
        if (out == NULL) {
            snprintf(msg, len, "parameter '%.100s' %s", k,
                     dec ? "does not decrypt with this instance's .secrets "
                           "key (every instance needs the same key)"
                         : "cannot be encrypted");
            json_decref(copy);
            return NULL;
        }
        json_object_set_new(params, k, json_string(out));
        OPENSSL_cleanse(out, strlen(out));
        free(out);
    }
    return copy;
}

/* ---- a change made here ---- */

static struct admin_resp change(struct admin_req *r, sl_admin_handler h,
                                json_t *stored);

static struct admin_resp
refuse(MYSQL *c, int status, const char *what, const char *msg)
{
    if (c != NULL) {
        mysql_query(c, "ROLLBACK");
        mysql_close(c);
    }
    return sl__admin_error(status, "configuration synchronization: %s%s%s",
                           what, msg ? ": " : "", msg ? msg : "");
}

struct admin_resp
sl__csync_change(struct admin_req *r, sl_admin_handler h)
{
    json_t *stored = r->body;   /* what goes into the document */
    json_t *global = NULL;
    struct admin_resp res;

    if (is_global(r->method, r->seg, r->nseg)) {
        global = global_body(r->body);
        if (global == NULL) {
            return h(r);   /* only instance-local parameters */
        }
        stored = global;
    }
    res = change(r, h, stored);
    json_decref(global);
    return res;
}

static struct admin_resp
change(struct admin_req *r, sl_admin_handler h, json_t *stored)
{
    char msg[1024];
    long long version;
    long long local;
    char *config = NULL, *origin = NULL, *nodes = NULL;
    char *cl = NULL, *doc_esc = NULL, *node_esc = NULL;
    json_t *doc = NULL;
    json_t *enc = NULL;
    json_t *entry;
    char *text = NULL;
    struct admin_resp res;
    MYSQL *c = connect_primary(false, msg, sizeof(msg));
    int rc;

    if (c == NULL) {
        set_error("%s", msg);
        return refuse(NULL, 503, "the change is not applied", msg);
    }
    if (ensure_table(c, msg, sizeof(msg)) < 0 ||
        run(c, msg, sizeof(msg), "START TRANSACTION") < 0 ||
        read_row(c, true, &version, &config, &origin, &nodes, msg,
                 sizeof(msg)) < 0) {
        return refuse(c, 503, "the change is not applied", msg);
    }
    pthread_mutex_lock(&st_lock);
    local = S.local;
    pthread_mutex_unlock(&st_lock);
    if (config == NULL) {
        cl = esc(c, S.cluster);
        rc = cl ? run(c, msg, sizeof(msg), "INSERT INTO `%s`.maxscale_config "
                      "VALUES ('%s', 0, '{\"changes\": []}', '', '{}')",
                      S.db, cl) : -1;
        free(cl);
        cl = NULL;
        if (rc < 0) {
            return refuse(c, 409, "the change is not applied (another "
                          "instance created the cluster's row at the same "
                          "time; retry)", msg);
        }
        config = strdup("{\"changes\": []}");
    }
    set_seen(version, origin, nodes);
    free(origin);
    free(nodes);
    if (version != local) {
        free(config);
        snprintf(msg, sizeof(msg), "the cluster's configuration is at "
                 "version %lld and this instance at %lld: the change is not "
                 "applied; retry once this instance has caught up", version,
                 local);
        return refuse(c, 409, "conflict", msg);
    }
    doc = config ? json_loads(config, 0, NULL) : NULL;
    free(config);
    if (doc == NULL || !json_is_array(json_object_get(doc, "changes"))) {
        json_decref(doc);
        return refuse(c, 500, "the cluster's document is not valid, the "
                      "change is not applied", NULL);
    }
    /* with a .secrets key the document holds encrypted passwords */
    if (S.have_key && stored != NULL) {
        enc = crypt_body(stored, false, msg, sizeof(msg));
        if (enc == NULL) {
            json_decref(doc);
            return refuse(c, 500, "the change is not applied", msg);
        }
        stored = enc;
    }
    /* apply here, inside the transaction that holds the row */
    res = h(r);
    if (res.status >= 300) {
        mysql_query(c, "ROLLBACK");
        mysql_close(c);
        json_decref(doc);
        json_decref(enc);
        return res;
    }
    entry = json_pack("{s:I, s:s, s:s, s:s, s:O?}", "version",
                      (json_int_t)(version + 1), "origin", S.node, "method",
                      r->method, "path", r->url + (strncmp(r->url, "/v1/",
                                                           4) == 0 ? 4 : 0),
                      "body", stored);
    if (enc != NULL) {
        json_object_set_new(entry, "encrypted", json_true());
        json_decref(enc);
    }
    json_array_append_new(json_object_get(doc, "changes"), entry);
    text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    cl = esc(c, S.cluster);
    doc_esc = text ? esc(c, text) : NULL;
    node_esc = esc(c, S.node);
    rc = cl && doc_esc && node_esc
             ? run(c, msg, sizeof(msg), "UPDATE `%s`.maxscale_config SET "
                   "version = %lld, config = '%s', origin = '%s', nodes = "
                   "JSON_SET(nodes, CONCAT('$.\"', '%s', '\"'), %lld) WHERE "
                   "cluster = '%s' AND version = %lld", S.db, version + 1,
                   doc_esc, node_esc, node_esc, version + 1, cl, version)
             : -1;
    if (rc == 0 && mysql_affected_rows(c) != 1) {
        snprintf(msg, sizeof(msg), "the version moved during the change");
        rc = -1;
    }
    if (rc == 0) {
        rc = run(c, msg, sizeof(msg), "COMMIT");
    }
    free(text);
    free(cl);
    free(doc_esc);
    free(node_esc);
    if (rc < 0) {
        /* applied here but not stored: the instances now differ */
        sl_log_error("configuration synchronization: %s %s was applied "
                     "here but could not be stored in the cluster: %s",
                     r->method, r->url, msg);
        set_error("version %lld not stored: %s", version + 1, msg);
        mysql_close(c);
        free(res.text);
        json_decref(res.doc);
        return sl__admin_error(500, "configuration synchronization: the "
                               "change was applied on this instance but "
                               "could not be stored in the cluster: %s", msg);
    }
    mysql_close(c);
    save_local(version + 1);
    set_seen(version + 1, S.node, NULL);
    pthread_mutex_lock(&st_lock);
    if (S.nodes == NULL) {
        S.nodes = json_object();
    }
    json_object_set_new(S.nodes, S.node, json_integer(version + 1));
    S.error[0] = '\0';
    pthread_mutex_unlock(&st_lock);
    sl_log_notice("configuration version %lld: %s %s", version + 1,
                  r->method, r->url);
    return res;
}

/* ---- a newer version from the cluster ---- */

/* Check doc whole: 0, or -1 with msg. */
int
sl__csync_check_doc(json_t *doc, long long version, char *msg, size_t len)
{
    json_t *changes = json_object_get(doc, "changes");
    size_t i;
    json_t *e;

    if (!json_is_object(doc) || !json_is_array(changes)) {
        snprintf(msg, len, "not an object with a \"changes\" array");
        return -1;
    }
    if ((long long)json_array_size(changes) != version) {
        snprintf(msg, len, "%zu changes for version %lld",
                 json_array_size(changes), version);
        return -1;
    }
    json_array_foreach(changes, i, e) {
        json_t *v = json_object_get(e, "version");
        const char *m = json_string_value(json_object_get(e, "method"));
        const char *p = json_string_value(json_object_get(e, "path"));
        json_t *body = json_object_get(e, "body");
        char url[1100];
        char *buf = NULL;
        char *seg[8];
        int nseg = 0;
        bool known;
        const struct sl_admin_route *route = NULL;

        if (!json_is_integer(v) || json_integer_value(v) != (long long)i + 1) {
            snprintf(msg, len, "change %zu: \"version\" is not %zu", i + 1,
                     i + 1);
            return -1;
        }
        if (m == NULL || p == NULL || strlen(p) > 1000 ||
            (body != NULL && !json_is_object(body) && !json_is_null(body))) {
            snprintf(msg, len, "change %zu: needs \"method\" and \"path\" "
                     "strings and an object or null \"body\"", i + 1);
            return -1;
        }
        snprintf(url, sizeof(url), "/v1/%s", p);
        if (split_path(url, &buf, seg, 8, &nseg) == 0) {
            route = route_find(m, seg, nseg, &known);
        }
        if (route == NULL || !sl__csync_synced_path(m, seg, nseg)) {
            snprintf(msg, len, "change %zu: %.16s %.200s is not a "
                     "synchronized REST change", i + 1, m, p);
            free(buf);
            return -1;
        }
        if (json_object_get(e, "encrypted") != NULL &&
            !json_is_boolean(json_object_get(e, "encrypted"))) {
            snprintf(msg, len, "change %zu: \"encrypted\" is not a boolean",
                     i + 1);
            free(buf);
            return -1;
        }
        if (json_is_true(json_object_get(e, "encrypted")) && !S.have_key) {
            snprintf(msg, len, "change %zu has encrypted passwords and "
                     "this instance has no .secrets key (every instance "
                     "needs the same key)", i + 1);
            free(buf);
            return -1;
        }
        if (is_global(m, seg, nseg) && global_local_param(body) != NULL) {
            snprintf(msg, len, "change %zu: PATCH maxscale sets '%.100s', "
                     "a parameter each instance keeps its own", i + 1,
                     global_local_param(body));
            free(buf);
            return -1;
        }
        free(buf);
    }
    return 0;
}

static const char *
origin_of(json_t *e)
{
    const char *o = json_string_value(json_object_get(e, "origin"));

    return o ? o : "?";
}

/* Replay changes (local, version] through the REST handlers. The version
 * applied last, with msg set when a change was refused. */
static long long
replay(json_t *doc, long long local, long long version, char *msg,
       size_t len)
{
    json_t *changes = json_object_get(doc, "changes");

    msg[0] = '\0';
    for (long long v = local + 1; v <= version; v++) {
        json_t *e = json_array_get(changes, (size_t)(v - 1));
        struct admin_req r = {0};
        json_t *plain = NULL;   /* body with decrypted passwords */
        const struct sl_admin_route *route;
        struct admin_resp res;
        char url[1100];
        bool known;
        json_t *body = json_object_get(e, "body");

        snprintf(url, sizeof(url), "/v1/%s",
                 json_string_value(json_object_get(e, "path")));
        r.method = json_string_value(json_object_get(e, "method"));
        r.url = url;
        r.is_admin = true;
        r.body = json_is_object(body) ? body : NULL;
        if (r.body != NULL &&
            json_is_true(json_object_get(e, "encrypted"))) {
            char why[512];

            plain = crypt_body(r.body, true, why, sizeof(why));
            if (plain == NULL) {
                snprintf(msg, len, "change %lld (%.8s %.200s from %.100s) "
                         "refused: %s", v, r.method, url + 4, origin_of(e),
                         why);
                return v - 1;
            }
            r.body = plain;
        }
        if (split_path(url, &r.pathbuf, r.seg, 8, &r.nseg) < 0 ||
            (route = route_find(r.method, r.seg, r.nseg, &known)) == NULL) {
            free(r.pathbuf);
            json_decref(plain);
            snprintf(msg, len, "change %lld: no route", v);
            return v - 1;
        }
        sl__worker_reclaim(false);
        res = route->handler(&r);
        free(r.pathbuf);
        json_decref(plain);   /* the handler does not keep the body */
        if (res.status >= 300) {
            const char *d = json_string_value(json_object_get(
                json_array_get(json_object_get(res.doc, "errors"), 0),
                "detail"));

            snprintf(msg, len, "change %lld (%.8s %.200s from %.100s) refused: "
                     "%.500s", v,
                     r.method, url + 4,
                     origin_of(e), d ? d : "error");
            json_decref(res.doc);
            free(res.text);
            return v - 1;
        }
        json_decref(res.doc);
        free(res.text);
        sl_log_notice("configuration version %lld from %s applied: %s %s", v,
                      origin_of(e),
                      r.method, url);
    }
    return version;
}

/* One poll; false when the row could not be read. */
static bool
poll_once(void)
{
    char msg[1024];
    long long version, local, done;
    char *config = NULL, *origin = NULL, *nodes = NULL;
    MYSQL *c = connect_primary(true, msg, sizeof(msg));
    json_t *n;

    if (c == NULL) {
        set_error("%s", msg);
        return false;
    }
    if (ensure_table(c, msg, sizeof(msg)) < 0 ||
        read_row(c, false, &version, &config, &origin, &nodes, msg,
                 sizeof(msg)) < 0) {
        set_error("%s", msg);
        mysql_close(c);
        return false;
    }
    set_seen(version, origin, nodes);
    pthread_mutex_lock(&st_lock);
    local = S.local;
    pthread_mutex_unlock(&st_lock);
    done = local;
    msg[0] = '\0';
    if (version > local) {
        json_error_t jerr;
        json_t *doc = json_loads(config ? config : "", 0, &jerr);

        if (doc == NULL) {
            snprintf(msg, sizeof(msg), "invalid JSON: %s", jerr.text);
        } else if (sl__csync_check_doc(doc, version, msg,
                                       sizeof(msg)) == 0) {
            sl__csync_lock();
            pthread_mutex_lock(&st_lock);
            local = S.local;   /* a REST change may have moved it */
            pthread_mutex_unlock(&st_lock);
            /* the missed changes as one generation: the workers see the
             * configuration before them, then after all of them */
            sl__config_batch_begin();
            done = local >= version ? local
                                    : replay(doc, local, version, msg,
                                             sizeof(msg));
            sl__config_batch_end();
            if (done != local) {
                save_local(done);
            }
            sl__csync_unlock();
        }
        json_decref(doc);
        if (msg[0] != '\0') {
            if (S.refused != version) {
                sl_log_error("configuration version %lld from %s refused: "
                             "%s (this instance stays at version %lld)",
                             version, origin ? origin : "?", msg, done);
                S.refused = version;
            }
            set_error("version %lld refused: %s", version, msg);
        }
    }
    if (version < local) {
        snprintf(msg, sizeof(msg), "the cluster's version %lld is older "
                 "than this instance's %lld (the row was reset?): changes "
                 "here are refused until %.300s is removed", version, local,
                 S.version_file);
        set_error("%s", msg);
    } else if (msg[0] == '\0') {
        set_error("%s", "");
    }
    /* report this instance's version in the row's "nodes" */
    n = nodes ? json_loads(nodes, 0, NULL) : NULL;
    if (config != NULL &&
        json_integer_value(json_object_get(n, S.node)) != done) {
        char *cl = esc(c, S.cluster);
        char *ne = esc(c, S.node);

        if (cl && ne &&
            run(c, msg, sizeof(msg), "UPDATE `%s`.maxscale_config SET nodes "
                "= JSON_SET(nodes, CONCAT('$.\"', '%s', '\"'), %lld) WHERE "
                "cluster = '%s'", S.db, ne, done, cl) == 0) {
            pthread_mutex_lock(&st_lock);
            if (json_is_object(S.nodes)) {
                json_object_set_new(S.nodes, S.node, json_integer(done));
            }
            pthread_mutex_unlock(&st_lock);
        }
        free(cl);
        free(ne);
    }
    json_decref(n);
    free(config);
    free(origin);
    free(nodes);
    mysql_close(c);
    return true;
}

static void *
sync_main(void *arg)
{
    bool read_once = false;

    (void)arg;
    mysql_thread_init();
    for (;;) {
        struct timespec ts;
        uint64_t wait_ms;

        read_once |= poll_once();
        /* until the first read (the monitor may not have found the
         * primary yet at start-up): retry soon, so a restarted instance
         * catches up at once */
        wait_ms = read_once || S.interval_ms < 250 ? S.interval_ms : 250;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(wait_ms / 1000);
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&st_lock);
        while (!S.stop &&
               pthread_cond_timedwait(&st_cond, &st_lock, &ts) == 0) {
        }
        if (S.stop) {
            pthread_mutex_unlock(&st_lock);
            break;
        }
        pthread_mutex_unlock(&st_lock);
    }
    mysql_thread_end();
    return NULL;
}

/* ---- start, stop, status ---- */

/* The .secrets key of the configuration (secretsdir, else datadir), as
 * the configuration's passwords use it: 0 with or without one, -1 when
 * the file exists but cannot be read. */
static int
load_key(const struct sl_params *p)
{
    const char *dir = sl_params_get(p, "secretsdir");
    char err[4400];
    int rc;

    if (dir == NULL || dir[0] == '\0') {
        dir = sl_params_get(p, "datadir");
    }
    snprintf(S.key_path, sizeof(S.key_path), "%.4000s/.secrets",
             dir ? dir : "");
    rc = sl__secrets_read(S.key_path, S.key, err, sizeof(err));
    if (rc == -ENOENT) {
        S.have_key = false;
        return 0;
    }
    if (rc < 0) {
        sl_log_error("configuration synchronization: %s", err);
        return -1;
    }
    S.have_key = true;
    sl_log_notice("configuration synchronization: passwords in the "
                  "cluster's document are encrypted with '%s'", S.key_path);
    return 0;
}

int
sl__csync_start(const struct sl_config *cfg)
{
    const struct sl_params *p = cfg->global.params;
    const char *cluster = sl_params_get(p, "config_sync_cluster");
    const char *user = sl_params_get(p, "config_sync_user");
    const char *pw = sl_params_get(p, "config_sync_password");
    const char *db = sl_params_get(p, "config_sync_db");
    char host[256] = "localhost";
    bool found = false;

    if (cluster == NULL || cluster[0] == '\0') {
        return 0;
    }
    if (route_find == NULL || split_path == NULL) {
        sl_log_error("configuration synchronization: no REST routing");
        return -1;
    }
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        found |= strcmp(cfg->monitors[i]->name, cluster) == 0;
    }
    if (!found) {
        sl_log_error("config_sync_cluster: no monitor named '%s'", cluster);
        return -1;
    }
    if (user == NULL || user[0] == '\0') {
        sl_log_error("config_sync_cluster needs config_sync_user");
        return -1;
    }
    if (db == NULL || db[0] == '\0' || strchr(db, '`') != NULL ||
        strlen(db) >= sizeof(S.db)) {
        sl_log_error("invalid config_sync_db '%s'", db ? db : "");
        return -1;
    }
    gethostname(host, sizeof(host) - 1);
    snprintf(S.cluster, sizeof(S.cluster), "%s", cluster);
    snprintf(S.user, sizeof(S.user), "%s", user);
    snprintf(S.password, sizeof(S.password), "%s", pw ? pw : "");
    snprintf(S.db, sizeof(S.db), "%s", db);
    snprintf(S.node, sizeof(S.node), "%s:%d", host, cfg->global.admin_port);
    snprintf(S.version_file, sizeof(S.version_file),
             "%.4000s/.config_sync_version", cfg->global.persistdir);
    S.interval_ms = sl_params_duration_ms(p, "config_sync_interval");
    S.interval_ms = S.interval_ms ? S.interval_ms : 1000;
    S.timeout_s = (unsigned)((sl_params_duration_ms(p, "config_sync_timeout")
                              + 999) / 1000);
    S.timeout_s = S.timeout_s ? S.timeout_s : 1;
    S.local = load_local();
    if (load_key(p) < 0) {
        return -1;
    }
    sl_log_notice("configuration synchronization with cluster '%s' as "
                  "node '%s' (local version %lld)", S.cluster, S.node,
                  S.local);
    /* before the REST API starts (its thread then sees S whole) */
    S.enabled = true;
    if (pthread_create(&S.thread, NULL, sync_main, NULL) != 0) {
        sl_log_error("cannot start the configuration synchronization "
                     "thread");
        S.enabled = false;
        return -1;
    }
    S.running = true;
    return 0;
}

void
sl__csync_stop(void)
{
    if (!S.running) {
        return;
    }
    pthread_mutex_lock(&st_lock);
    S.stop = true;
    pthread_cond_broadcast(&st_cond);
    pthread_mutex_unlock(&st_lock);
    pthread_join(S.thread, NULL);
    S.running = false;
    OPENSSL_cleanse(S.key, sizeof(S.key));
    pthread_mutex_lock(&st_lock);
    json_decref(S.nodes);
    S.nodes = NULL;
    pthread_mutex_unlock(&st_lock);
}

json_t *
sl__csync_json(void)
{
    json_t *o;

    if (!S.enabled) {
        return json_null();
    }
    pthread_mutex_lock(&st_lock);
    /* a copy: S.nodes changes in place while the response is written */
    o = json_pack("{s:I, s:s, s:o?, s:s, s:s?, s:s, s:I, s:s}", "version",
                  (json_int_t)S.cluster_version, "origin", S.origin,
                  "nodes", json_deep_copy(S.nodes), "status",
                  S.error[0] ? "Error" : "OK", "error",
                  S.error[0] ? S.error : NULL, "name", S.node,
                  "local_version", (json_int_t)S.local, "cluster",
                  S.cluster);
    pthread_mutex_unlock(&st_lock);
    if (o != NULL && json_is_null(json_object_get(o, "nodes"))) {
        json_object_set_new(o, "nodes", json_object());
    }
    return o;
}
