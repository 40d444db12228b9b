/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache: a result-set cache for SELECTs, after MaxScale's cache filter.
 *
 * A COM_QUERY the classifier calls a plain read (a SELECT that reads no
 * variables, locks nothing and has no side effect), whose session may use
 * the cache (rules "use"), outside an explicit transaction and while the
 * session's default database is certain (sl_session_db_unsure), is looked
 * up by its key: the client's answer format (CLIENT_DEPRECATE_EOF,
 * CLIENT_SESSION_TRACK), with users=isolated the user name and client
 * host, and the default database, each length-prefixed so that no two
 * different tuples give the same bytes ("appshop" with no database is not
 * "app" in "shop"), then the SQL text.
 *
 *   hit, younger than soft_ttl:  the stored answer's bytes are replayed to
 *       the client as they came from the server (sequence numbers 1..n, as
 *       for any answer to a fresh command); no backend sees the statement
 *   miss, or older than soft_ttl: routed; the answer is collected while it
 *       streams to the client and stored when complete if it is one result
 *       set, not an error, within max_resultset_rows/max_resultset_size and
 *       the rules ("store") allow it
 *   older than hard_ttl: dropped at lookup
 *
 * Invalidation (invalidate=current): a statement classified as a write or
 * DDL drops every entry naming one of its tables (all entries if it names
 * none). Only writes passing through this cache are seen.
 *
 * Storage: one hash table per filter instance, shared by all workers under
 * a mutex (cached_data=shared; thread_specific is accepted and also
 * shared). Entries are evicted oldest first past max_size or max_count.
 * An entry's size is what it holds in memory: the answer, the key, the
 * table names and the entry itself; max_size (default 100Mi) bounds the
 * store, and an answer is no longer collected once it alone would
 * exceed max_size.
 *
 * Context: the store under inst->lock; sessions worker-owned.
 */
#define SL_LOG_TAG "cache"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/session.h>

#include "cache.h"
#include "fltutil.h"

#define CACHE_BUCKETS 4096u

static const char *const cache_invalidate[] = {"never", "current", NULL};
static const char *const cache_users[] = {"mixed", "isolated", NULL};
static const char *const cache_data[] = {"shared", "thread_specific", NULL};
static const char *const cache_selects[] = {"assume_cacheable",
                                            "verify_cacheable", NULL};

static const struct sl_param_spec cache_params[] = {
    {"storage", SL_PARAM_STRING, "storage_inmemory", 0, NULL,
     "Only storage_inmemory"},
    {"hard_ttl", SL_PARAM_DURATION, "0", SL_PARAM_F_SECONDS, NULL,
     "Entries older than this are never served (0: no limit)"},
    {"soft_ttl", SL_PARAM_DURATION, "0", SL_PARAM_F_SECONDS, NULL,
     "Entries older than this are refreshed from a server (0: no limit)"},
    {"max_resultset_rows", SL_PARAM_COUNT, "0", 0, NULL,
     "Larger results are not stored (0: no limit)"},
    {"max_resultset_size", SL_PARAM_SIZE, "0", 0, NULL,
     "Larger results are not stored (0: no limit)"},
    {"max_count", SL_PARAM_COUNT, "0", 0, NULL, "Entries (0: no limit)"},
    {"max_size", SL_PARAM_SIZE, "100Mi", 0, NULL,
     "Total bytes of the store (0: no limit)"},
    {"rules", SL_PARAM_PATH, NULL, 0, NULL, "JSON rules file"},
    {"invalidate", SL_PARAM_ENUM, "never", 0, cache_invalidate,
     "current: writes drop entries of their tables"},
    {"users", SL_PARAM_ENUM, "mixed", 0, cache_users,
     "isolated: one cache per user"},
    {"cached_data", SL_PARAM_ENUM, "thread_specific", 0, cache_data,
     "Accepted; the cache is always shared"},
    {"selects", SL_PARAM_ENUM, "assume_cacheable", 0, cache_selects,
     "Accepted; the classifier decides"},
    {"enabled", SL_PARAM_BOOL, "true", 0, NULL, "Cache at all"},
    {"debug", SL_PARAM_COUNT, "0", SL_PARAM_F_IGNORED, NULL,
     "debug output is not implemented"},
    SL_PARAM_END,
};

struct cache_entry {
    struct cache_entry *hnext;         /* hash chain */
    struct cache_entry *older, *newer; /* age list */
    uint64_t hash;
    char *key;
    size_t key_len;
    unsigned char *data;               /* the whole answer */
    size_t len;
    size_t cost;                       /* bytes counted against max_size */
    struct sl_reply reply;             /* its final reply view */
    int64_t created_us;
    unsigned ntables;
    char (*tables)[2 * SL_QC_NAME_MAX + 2];   /* db.table, lowercased */
};

struct cache_instance {
    char name[128];
    int64_t hard_us, soft_us;
    uint64_t max_rows, max_rsize, max_count, max_size;
    bool invalidate, isolated, enabled;
    struct cache_rules rules;
    pthread_mutex_t lock;
    struct cache_entry *buckets[CACHE_BUCKETS];
    struct cache_entry *oldest, *newest;
    uint64_t count, size;
    uint64_t hits, misses;
};

struct cache_session {
    struct cache_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;
    pcre2_match_data *md;
    int use;                    /* -1: not decided yet */
    bool in_trx;
    /* the answer being collected */
    struct sl_buf *collect;
    char *key;
    size_t key_len;
    bool storing;
    struct sl_qc_result qc;
};

static uint64_t
hash_key(const char *k, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */

    for (size_t i = 0; i < n; i++) {
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    }
    return h;
}

/* ---- the store (inst->lock held) ---- */

static void
entry_unlink(struct cache_instance *inst, struct cache_entry *e)
{
    struct cache_entry **pp = &inst->buckets[e->hash % CACHE_BUCKETS];

    while (*pp != e) {
        pp = &(*pp)->hnext;
    }
    *pp = e->hnext;
    if (e->older) {
        e->older->newer = e->newer;
    } else {
        inst->oldest = e->newer;
    }
    if (e->newer) {
        e->newer->older = e->older;
    } else {
        inst->newest = e->older;
    }
    inst->count--;
    inst->size -= e->cost;
    free(e->key);
    free(e->data);
    free(e->tables);
    free(e);
}

static struct cache_entry *
store_find(struct cache_instance *inst, const char *key, size_t n,
           uint64_t h)
{
    struct cache_entry *e = inst->buckets[h % CACHE_BUCKETS];

    for (; e != NULL; e = e->hnext) {
        if (e->hash == h && e->key_len == n && memcmp(e->key, key, n) == 0) {
            return e;
        }
    }
    return NULL;
}

static void
store_insert(struct cache_instance *inst, struct cache_entry *e)
{
    struct cache_entry *old = store_find(inst, e->key, e->key_len, e->hash);

    if (old != NULL) {
        entry_unlink(inst, old);
    }
    e->hnext = inst->buckets[e->hash % CACHE_BUCKETS];
    inst->buckets[e->hash % CACHE_BUCKETS] = e;
    e->older = inst->newest;
    e->newer = NULL;
    if (inst->newest) {
        inst->newest->newer = e;
    } else {
        inst->oldest = e;
    }
    inst->newest = e;
    inst->count++;
    inst->size += e->cost;
    while (inst->oldest != e &&
           ((inst->max_size && inst->size > inst->max_size) ||
            (inst->max_count && inst->count > inst->max_count))) {
        entry_unlink(inst, inst->oldest);
    }
}

/* Drop entries naming any of tables (all entries when n == 0). */
static void
store_invalidate(struct cache_instance *inst,
                 char (*tables)[2 * SL_QC_NAME_MAX + 2], unsigned n)
{
    struct cache_entry *e = inst->oldest;

    while (e != NULL) {
        struct cache_entry *next = e->newer;
        bool drop = n == 0;

        for (unsigned i = 0; !drop && i < e->ntables; i++) {
            for (unsigned j = 0; !drop && j < n; j++) {
                drop = strcmp(e->tables[i], tables[j]) == 0;
            }
        }
        if (drop) {
            entry_unlink(inst, e);
        }
        e = next;
    }
}

/* ---- instance ---- */

static void cache_destroy(void *instance);

static void *
cache_create(const char *name, const struct sl_params *p)
{
    struct cache_instance *inst = calloc(1, sizeof(*inst));
    const char *rules = sl_params_get(p, "rules");
    const char *storage = sl_params_string(p, "storage");

    if (inst == NULL) {
        return NULL;
    }
    pthread_mutex_init(&inst->lock, NULL);
    snprintf(inst->name, sizeof(inst->name), "%s", name);
    inst->hard_us = (int64_t)sl_params_duration_ms(p, "hard_ttl") * 1000;
    inst->soft_us = (int64_t)sl_params_duration_ms(p, "soft_ttl") * 1000;
    inst->max_rows = sl_params_count(p, "max_resultset_rows");
    inst->max_rsize = sl_params_size(p, "max_resultset_size");
    inst->max_count = sl_params_count(p, "max_count");
    inst->max_size = sl_params_size(p, "max_size");
    inst->invalidate = sl_params_enum(p, "invalidate") == 1;
    inst->isolated = sl_params_enum(p, "users") == 1;
    inst->enabled = sl_params_bool(p, "enabled");
    if (strcmp(storage, "storage_inmemory") != 0) {
        sl_log_error("filter '%s': storage '%s' is not supported (only "
                     "storage_inmemory)", name, storage);
        cache_destroy(inst);
        return NULL;
    }
    if (rules != NULL && rules[0] != '\0' &&
        cache_rules_load(rules, name, &inst->rules) != 0) {
        cache_destroy(inst);
        return NULL;
    }
    return inst;
}

static void
cache_destroy(void *instance)
{
    struct cache_instance *inst = instance;

    while (inst->oldest != NULL) {
        entry_unlink(inst, inst->oldest);
    }
    cache_rules_free(&inst->rules);
    pthread_mutex_destroy(&inst->lock);
    free(inst);
}

/* {"entries", "size", "max_count", "max_size", "hits", "misses"}. Admin
 * thread. */
static void *
cache_diagnostics(void *instance)
{
    struct cache_instance *inst = instance;
    json_t *j;

    pthread_mutex_lock(&inst->lock);
    j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "entries",
                  (json_int_t)inst->count, "size", (json_int_t)inst->size,
                  "max_count", (json_int_t)inst->max_count, "max_size",
                  (json_int_t)inst->max_size, "hits", (json_int_t)inst->hits,
                  "misses", (json_int_t)inst->misses);
    pthread_mutex_unlock(&inst->lock);
    return j;
}

/* ---- sessions ---- */

static void *
cache_new_session(void *instance, struct sl_session *ses,
                  struct sl_filter_session *fs)
{
    struct cache_session *cs = calloc(1, sizeof(*cs));

    if (cs == NULL) {
        return NULL;
    }
    cs->inst = instance;
    cs->ses = ses;
    cs->fs = fs;
    cs->use = -1;
    cs->md = pcre2_match_data_create(16, NULL);
    if (cs->md == NULL) {
        free(cs);
        return NULL;
    }
    return cs;
}

static void
collect_reset(struct cache_session *cs)
{
    sl_buf_free(cs->collect);
    cs->collect = NULL;
    free(cs->key);
    cs->key = NULL;
    cs->storing = false;
}

static void
cache_free_session(void *fsession)
{
    struct cache_session *cs = fsession;

    collect_reset(cs);
    pcre2_match_data_free(cs->md);
    free(cs);
}

/* db.table, lowercased, for each table the statement names. */
static unsigned
qualify_tables(const struct sl_qc_result *qc, const char *db,
               char (*out)[2 * SL_QC_NAME_MAX + 2])
{
    unsigned n = qc->ntables < SL_QC_MAX_TABLES ? qc->ntables
                                                : SL_QC_MAX_TABLES;

    for (unsigned i = 0; i < n; i++) {
        const char *t = qc->tables[i];

        if (strchr(t, '.') != NULL) {
            snprintf(out[i], sizeof(out[i]), "%s", t);
        } else {
            snprintf(out[i], sizeof(out[i]), "%s.%s", db, t);
        }
        for (char *c = out[i]; *c; c++) {
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        }
    }
    return n;
}

static bool
cacheable(const struct sl_qc_result *qc)
{
    const uint32_t bad = SL_QC_WRITE | SL_QC_DDL | SL_QC_SESSION_WRITE |
                         SL_QC_USERVAR_WRITE | SL_QC_USERVAR_READ |
                         SL_QC_SYSVAR_READ | SL_QC_MASTER_READ |
                         SL_QC_MULTI_STMT | SL_QC_UNKNOWN | SL_QC_CALL;

    return qc->op == SL_QC_OP_SELECT && (qc->type & SL_QC_READ) &&
           !(qc->type & bad) && qc->ntables > 0 &&
           qc->ntables <= SL_QC_MAX_TABLES;
}

/* Append a field as a 4-byte length and its bytes. */
static char *
put_field(char *k, const char *f, size_t n)
{
    k[0] = (char)(n & 0xff);
    k[1] = (char)((n >> 8) & 0xff);
    k[2] = (char)((n >> 16) & 0xff);
    k[3] = (char)((n >> 24) & 0xff);
    memcpy(k + 4, f, n);
    return k + 4 + n;
}

/* Client capabilities that change an answer's bytes: the EOF after the
 * column definitions, session-state data in the final OK (and MariaDB's
 * extended metadata in the column definitions, folded in by make_key). */
#define FORMAT_CAPS (SL_CAP_DEPRECATE_EOF | SL_CAP_SESSION_TRACK)

/*
 * The lookup key (malloc'd, *n bytes): the answer format, [user, client
 * host,] database, each length-prefixed, then the SQL text. The lengths
 * keep the fields apart: joined bare, user "appshop" without a database
 * and user "app" in "shop" would share entries. The format keeps an
 * answer stored for a CLIENT_DEPRECATE_EOF client from one without it.
 */
static char *
make_key(struct cache_session *cs, const char *sql, size_t len, size_t *n)
{
    const char *db = sl_session_db(cs->ses);
    const char *user = cs->inst->isolated ? sl_session_user(cs->ses) : "";
    const char *host = cs->inst->isolated ? sl_session_remote(cs->ses) : "";
    uint64_t caps = sl_session_client_caps(cs->ses);
    /* bit 0 (CLIENT_MYSQL, never a format bit): extended metadata */
    uint32_t fmt = (uint32_t)(caps & FORMAT_CAPS) |
                   ((caps & SL_CAP_MARIADB_EXTENDED_METADATA) ? 1u : 0);
    size_t dl = strlen(db), ul = strlen(user), hl = strlen(host);
    char *k = malloc(4 + 12 + ul + hl + dl + len);
    char *p;

    if (k == NULL) {
        return NULL;
    }
    memcpy(k, &fmt, 4);
    p = put_field(k + 4, user, ul);
    p = put_field(p, host, hl);
    p = put_field(p, db, dl);
    memcpy(p, sql, len);
    *n = (size_t)(p - k) + len;
    return k;
}

/* Serve key from the store if fresh: true when answered. */
static bool
serve_hit(struct cache_session *cs, const char *key, size_t n, int *rc)
{
    struct cache_instance *inst = cs->inst;
    uint64_t h = hash_key(key, n);
    int64_t now = flt_now_us();
    struct cache_entry *e;
    struct sl_buf *out = NULL;
    struct sl_reply reply;

    pthread_mutex_lock(&inst->lock);
    e = store_find(inst, key, n, h);
    if (e != NULL && inst->hard_us > 0 &&
        now - e->created_us > inst->hard_us) {
        entry_unlink(inst, e);
        e = NULL;
    }
    if (e != NULL &&
        (inst->soft_us == 0 || now - e->created_us <= inst->soft_us)) {
        out = sl_buf_from(e->data, e->len);
        reply = e->reply;
    }
    if (out != NULL) {
        inst->hits++;
    } else {
        inst->misses++;
    }
    pthread_mutex_unlock(&inst->lock);
    if (out == NULL) {
        return false;
    }
    sl_log_ses_debug(cs->ses, "cache hit");
    *rc = sl_filter_reply_next(cs->fs, out, &reply);
    return true;
}

static void
maybe_invalidate(struct cache_session *cs, const struct sl_qc_result *qc)
{
    char tables[SL_QC_MAX_TABLES][2 * SL_QC_NAME_MAX + 2];
    unsigned n;

    if (!(qc->type & (SL_QC_WRITE | SL_QC_DDL))) {
        return;
    }
    n = qc->ntables > SL_QC_MAX_TABLES || sl_session_db_unsure(cs->ses)
            ? 0
            : qualify_tables(qc, sl_session_db(cs->ses), tables);
    pthread_mutex_lock(&cs->inst->lock);
    store_invalidate(cs->inst, tables, n);
    pthread_mutex_unlock(&cs->inst->lock);
}

static int
cache_route_query(void *fsession, struct sl_buf *buf)
{
    struct cache_session *cs = fsession;
    struct cache_instance *inst = cs->inst;
    const char *sql;
    size_t len;
    int rc = SL_OK;

    collect_reset(cs);
    if (!inst->enabled || (sql = flt_query_sql(buf, &len)) == NULL) {
        return sl_filter_route_next(cs->fs, buf);
    }
    if (cs->use < 0) {
        cs->use = cache_rules_use(&inst->rules, sl_session_user(cs->ses),
                                  cs->md);
    }
    sl_qc_classify(sql, len, &cs->qc);
    if (inst->invalidate) {
        maybe_invalidate(cs, &cs->qc);
    }
    if (!cs->use || cs->in_trx || sl_session_db_unsure(cs->ses) ||
        !cacheable(&cs->qc)) {
        return sl_filter_route_next(cs->fs, buf);
    }
    cs->key = make_key(cs, sql, len, &cs->key_len);
    if (cs->key == NULL) {
        return sl_filter_route_next(cs->fs, buf);
    }
    /* A hit answers at once: not while earlier commands of a pipeline
     * still wait for theirs. */
    if (sl_session_answers_pending(cs->ses) <= 1 &&
        serve_hit(cs, cs->key, cs->key_len, &rc)) {
        sl_buf_free(buf);
        collect_reset(cs);
        return rc;
    }
    /* The answer collected next must be this command's: not when earlier
     * pipelined commands still wait for theirs (collect_reset() above
     * also drops a collection overtaken by this command). */
    cs->storing = sl_session_answers_pending(cs->ses) <= 1 &&
                  cache_rules_store(&inst->rules, &cs->qc,
                                    sl_session_db(cs->ses), sql, len, cs->md);
    if (!cs->storing) {
        collect_reset(cs);
    }
    return sl_filter_route_next(cs->fs, buf);
}

static void
store_answer(struct cache_session *cs, const struct sl_reply *reply)
{
    struct cache_instance *inst = cs->inst;
    struct cache_entry *e = calloc(1, sizeof(*e));
    unsigned nt = cs->qc.ntables < SL_QC_MAX_TABLES ? cs->qc.ntables
                                                    : SL_QC_MAX_TABLES;

    if (e == NULL) {
        return;
    }
    e->tables = nt > 0 ? calloc(nt, sizeof(*e->tables)) : NULL;
    e->len = sl_buf_len(cs->collect);
    e->data = malloc(e->len ? e->len : 1);
    e->cost = sizeof(*e) + nt * sizeof(*e->tables) + e->len + cs->key_len;
    if ((nt > 0 && e->tables == NULL) || e->data == NULL ||
        (inst->max_size && e->cost > inst->max_size)) {
        free(e->tables);
        free(e->data);
        free(e);
        return;
    }
    sl_buf_copy_out(cs->collect, 0, e->len, e->data);
    e->ntables = qualify_tables(&cs->qc, sl_session_db(cs->ses), e->tables);
    e->reply = *reply;
    e->created_us = flt_now_us();
    e->key = cs->key;
    e->key_len = cs->key_len;
    e->hash = hash_key(e->key, e->key_len);
    cs->key = NULL;
    pthread_mutex_lock(&inst->lock);
    store_insert(inst, e);
    pthread_mutex_unlock(&inst->lock);
}

/* Collect a piece of a storable answer; stop collecting past a limit
 * (max_resultset_size, or max_size: an answer that could never be stored
 * is not held in memory either). */
static void
collect(struct cache_session *cs, const struct sl_buf *buf,
        const struct sl_reply *reply)
{
    struct cache_instance *inst = cs->inst;
    size_t have = cs->collect ? sl_buf_len(cs->collect) : 0;
    size_t next = have + sl_buf_len(buf);

    if ((inst->max_rsize && next > inst->max_rsize) ||
        (inst->max_size && next > inst->max_size) ||
        (inst->max_rows && reply->rows > inst->max_rows) || reply->is_err ||
        reply->more_results || reply->results > 1) {
        collect_reset(cs);
        return;
    }
    if (cs->collect == NULL && (cs->collect = sl_buf_new()) == NULL) {
        collect_reset(cs);
        return;
    }
    if (sl_buf_clone(buf, cs->collect) != 0) {
        collect_reset(cs);
        return;
    }
    if (reply->complete) {
        store_answer(cs, reply);
        collect_reset(cs);
    }
}

static int
cache_client_reply(void *fsession, struct sl_buf *buf,
                   const struct sl_reply *reply)
{
    struct cache_session *cs = fsession;

    if (reply->complete) {
        cs->in_trx = (reply->server_status & SL_SERVER_STATUS_IN_TRANS) != 0;
    }
    if (cs->storing) {
        collect(cs, buf, reply);
    }
    return sl_filter_reply_next(cs->fs, buf, reply);
}

static const struct sl_filter_ops cache_ops = {
    .size = sizeof(cache_ops),
    .create_instance = cache_create,
    .destroy_instance = cache_destroy,
    .new_session = cache_new_session,
    .free_session = cache_free_session,
    .route_query = cache_route_query,
    .client_reply = cache_client_reply,
    .diagnostics = cache_diagnostics,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "cache",
    .version = "1.0.0",
    .description = "Result-set cache for SELECT statements",
    .params = cache_params,
    .ops = &cache_ops,
})
