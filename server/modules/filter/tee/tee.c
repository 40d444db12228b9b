/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tee: duplicate statements to another service (shadow traffic), as
 * MaxScale's tee filter.
 *
 * Each COM_QUERY of a session that passes `match`/`exclude` and the
 * `user`/`source` restrictions is copied (sl_buf_clone: the bytes are
 * shared, not copied) and sent to the service named by `target` (or the
 * older `service`) through an internal session opened on the first such
 * statement: it logs in as the same user, and COM_INIT_DB is always copied
 * so both sides use the same default database. The original goes on
 * unchanged; the client only ever sees the answers of its own service.
 * Answers from the tee'd service are discarded, so a slow or failing
 * target never delays the client (MaxScale's sync=false). If the internal
 * session fails, copying stops for this session and a warning is logged.
 *
 * A target slower than the client would make the copies pile up in
 * Sluice's memory (queued towards its server). So each session counts the
 * bytes of the copies not answered yet; past max_pending_bytes a copy is
 * dropped, counted (diagnostics "dropped") and the session warns once. The
 * sizes are kept in a ring on the routing side; the answer callback only
 * bumps an atomic count of complete answers, since in the shared event
 * model it may run on another worker (see sl_session_create_internal).
 *
 * Context: session state worker-owned; the internal session lives on the
 * same worker. The answer callback only frees buffers (see
 * sl_session_create_internal for the shared event model).
 */
#define SL_LOG_TAG "tee"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/service.h>
#include <sluice/session.h>

#include "fltutil.h"

static const struct sl_param_spec tee_params[] = {
    {"target", SL_PARAM_SERVICE, NULL, 0, NULL,
     "Service that receives the copies"},
    {"service", SL_PARAM_SERVICE, NULL, SL_PARAM_F_DEPRECATED, NULL,
     "Old name of target"},
    {"match", SL_PARAM_REGEX, NULL, 0, NULL, "Copy only matching statements"},
    {"exclude", SL_PARAM_REGEX, NULL, 0, NULL, "Do not copy these"},
    {"options", SL_PARAM_ENUM_MASK, "", 0, flt_regex_options,
     "Pattern options"},
    {"user", SL_PARAM_STRING, NULL, 0, NULL, "Only this user's sessions"},
    {"source", SL_PARAM_STRING, NULL, 0, NULL, "Only this client host"},
    {"sync", SL_PARAM_BOOL, "false", SL_PARAM_F_REFUSED, NULL,
     "synchronous mode is not implemented: the target's answers are "
     "always discarded without waiting"},
    {"max_pending_bytes", SL_PARAM_SIZE, "8Mi", 0, NULL,
     "Copies of a session not yet answered by the target may hold this "
     "much; more are dropped (0 = no limit)"},
    SL_PARAM_END,
};

/* What a queued copy costs beyond its bytes (buffer and queue links). */
#define COPY_OVERHEAD 64

struct tee_instance {
    char name[128];
    char target[128];
    struct flt_regex match, exclude;
    struct flt_who who;
    uint64_t max_pending;     /* max_pending_bytes, 0 = no limit */
    atomic_ullong copied;
    atomic_ullong dropped;
};

/* Sizes of the copies sent and not answered yet, oldest first. */
struct pending_ring {
    uint32_t *size;
    size_t cap, head, n;
    uint64_t bytes;           /* their sum */
    uint64_t retired;         /* answers already taken off the ring */
};

struct tee_session {
    struct tee_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;
    pcre2_match_data *md;
    int active;               /* -1: not decided (user unknown yet) */
    struct sl_session *child; /* NULL until opened, or once it closed */
    bool failed;              /* the internal session is gone for good */
    struct pending_ring ring; /* routing side only */
    atomic_ullong answered;   /* complete answers (answer callback) */
    uint64_t dropped;         /* copies this session dropped */
};

static void *
tee_create(const char *name, const struct sl_params *p)
{
    struct tee_instance *inst = calloc(1, sizeof(*inst));
    const char *target = sl_params_get(p, "target");
    unsigned opts = (unsigned)sl_params_enum_mask(p, "options");

    if (inst == NULL) {
        return NULL;
    }
    if (target == NULL) {
        target = sl_params_get(p, "service");
    }
    if (target == NULL) {
        sl_log_error("filter '%s': 'target' is required", name);
        free(inst);
        return NULL;
    }
    snprintf(inst->name, sizeof(inst->name), "%s", name);
    snprintf(inst->target, sizeof(inst->target), "%s", target);
    inst->max_pending = sl_params_size(p, "max_pending_bytes");
    flt_who_init(&inst->who, p);
    if (flt_regex_init(&inst->match, p, "match", opts, name) != 0 ||
        flt_regex_init(&inst->exclude, p, "exclude", opts, name) != 0) {
        flt_regex_free(&inst->match);
        free(inst);
        return NULL;
    }
    return inst;
}

static void
tee_destroy(void *instance)
{
    struct tee_instance *inst = instance;

    flt_regex_free(&inst->match);
    flt_regex_free(&inst->exclude);
    free(inst);
}

static void *
tee_new_session(void *instance, struct sl_session *ses,
                struct sl_filter_session *fs)
{
    struct tee_session *ts = calloc(1, sizeof(*ts));

    if (ts == NULL) {
        return NULL;
    }
    ts->inst = instance;
    ts->ses = ses;
    ts->fs = fs;
    ts->active = -1;
    ts->md = pcre2_match_data_create(16, NULL);
    if (ts->md == NULL) {
        free(ts);
        return NULL;
    }
    return ts;
}

static void
tee_free_session(void *fsession)
{
    struct tee_session *ts = fsession;

    /* The parent closed before this: its internal session is closed and
     * child was reset by tee_answer(NULL). */
    if (ts->dropped > 0) {
        sl_log_notice("filter '%s': %llu copies of a session dropped "
                      "(max_pending_bytes)", ts->inst->name,
                      (unsigned long long)ts->dropped);
    }
    pcre2_match_data_free(ts->md);
    free(ts->ring.size);
    free(ts);
}

/* {"copied", "dropped"}. Admin thread. */
static void *
tee_diagnostics(void *instance)
{
    struct tee_instance *inst = instance;

    return json_pack("{s:I, s:I}", "copied",
                     (json_int_t)atomic_load(&inst->copied), "dropped",
                     (json_int_t)atomic_load(&inst->dropped));
}

/* Take the copies answered since the last look off the ring. */
static void
ring_settle(struct tee_session *ts)
{
    struct pending_ring *r = &ts->ring;
    uint64_t answered = atomic_load(&ts->answered);

    while (r->retired < answered && r->n > 0) {
        r->bytes -= r->size[r->head];
        r->head = (r->head + 1) % r->cap;
        r->n--;
        r->retired++;
    }
}

/* Remember a copy of len bytes; -1 on allocation failure. */
static int
ring_push(struct pending_ring *r, uint32_t len)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        uint32_t *p = malloc(cap * sizeof(*p));

        if (p == NULL) {
            return -1;
        }
        for (size_t i = 0; i < r->n; i++) {
            p[i] = r->size[(r->head + i) % r->cap];
        }
        free(r->size);
        r->size = p;
        r->cap = cap;
        r->head = 0;
    }
    r->size[(r->head + r->n) % r->cap] = len;
    r->n++;
    r->bytes += len;
    return 0;
}

/* Room for a copy of len more bytes towards the target? Counts and warns
 * (once per session) when not. */
static bool
tee_room(struct tee_session *ts, uint64_t len)
{
    uint64_t max = ts->inst->max_pending;

    ring_settle(ts);
    if (max == 0 || ts->ring.bytes + len <= max) {
        return true;
    }
    if (ts->dropped++ == 0) {
        sl_log_ses_warn(ts->ses, "filter '%s': service '%s' is %llu bytes "
                        "behind; dropping copies (max_pending_bytes)",
                        ts->inst->name, ts->inst->target,
                        (unsigned long long)ts->ring.bytes);
    }
    atomic_fetch_add(&ts->inst->dropped, 1);
    return false;
}

/* Answers of the tee'd service: discarded. NULL: it closed. */
static void
tee_answer(void *arg, struct sl_buf *buf, const struct sl_reply *reply)
{
    struct tee_session *ts = arg;

    if (buf == NULL) {
        ts->child = NULL;
        ts->failed = true;
        return;
    }
    if (reply != NULL && reply->complete) {
        atomic_fetch_add(&ts->answered, 1);
    }
    sl_buf_free(buf);
}

static struct sl_session *
tee_child(struct tee_session *ts)
{
    struct tee_instance *inst = ts->inst;
    struct sl_service *svc;

    if (ts->child != NULL || ts->failed) {
        return ts->child;
    }
    svc = sl_service_find(inst->target);
    /* copying to its own service would recurse */
    if (svc != NULL && svc != sl_session_service(ts->ses)) {
        ts->child = sl_session_create_internal(ts->ses, svc, tee_answer, ts);
    }
    if (ts->child == NULL) {
        ts->failed = true;
        sl_log_ses_warn(ts->ses, "filter '%s': cannot open a session on "
                        "service '%s'; not copying", inst->name, inst->target);
    }
    return ts->child;
}

/* Should this command be copied? */
static bool
tee_wanted(struct tee_session *ts, struct sl_buf *buf)
{
    int cmd = sl_mdb_command(buf);
    const char *sql;
    size_t len;

    if (cmd == SL_COM_INIT_DB) {
        return true;
    }
    if (cmd != SL_COM_QUERY || (sql = flt_query_sql(buf, &len)) == NULL) {
        return false;
    }
    return flt_wanted(&ts->inst->match, &ts->inst->exclude, ts->md, sql,
                      len);
}

static int
tee_route_query(void *fsession, struct sl_buf *buf)
{
    struct tee_session *ts = fsession;
    uint64_t cost = sl_buf_len(buf) + COPY_OVERHEAD;
    struct sl_session *child;
    struct sl_buf *copy;

    if (ts->active < 0) {
        ts->active = flt_who_match(&ts->inst->who, ts->ses);
    }
    if (ts->active && !ts->failed && tee_wanted(ts, buf) &&
        tee_room(ts, cost) && (child = tee_child(ts)) != NULL &&
        (copy = sl_buf_clone_new(buf)) != NULL) {
        if (ring_push(&ts->ring, (uint32_t)cost) != 0) {
            sl_buf_free(copy);
        } else {
            atomic_fetch_add(&ts->inst->copied, 1);
            sl_session_route_query(child, copy);
        }
    }
    return sl_filter_route_next(ts->fs, buf);
}

static const struct sl_filter_ops tee_ops = {
    .size = sizeof(tee_ops),
    .create_instance = tee_create,
    .destroy_instance = tee_destroy,
    .new_session = tee_new_session,
    .free_session = tee_free_session,
    .route_query = tee_route_query,
    .diagnostics = tee_diagnostics,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "tee",
    .version = "1.0.0",
    .description = "Copies statements to another service",
    .params = tee_params,
    .ops = &tee_ops,
})
