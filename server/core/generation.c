/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration generations and reference-counted module instances.
 *
 * A generation is a struct sl_config whose object arrays are never changed
 * once it is published. A run-time change (runtime.c, admin thread only)
 * takes sl__config_next() -- a copy of the current generation with arrays
 * of its own --, changes or extends it, validates it whole, and either
 * publishes it with one release store or discards it. Readers on any
 * thread take sl__config_current() (acquire) and use it for the rest of
 * their worker turn. The unpublished generation's arrays are freed through
 * the workers' epochs (sl__worker_defer) once no worker can still be
 * walking them. Objects are shared between generations; a generation's
 * shell frees only its arrays.
 *
 * A router or filter instance lives in a struct sl_inst_ref: one reference
 * for the object that publishes it (service or filter) and one for every
 * session created over it. A change publishes a new instance and retires
 * the old one: the object's reference is dropped after an epoch (a worker
 * that loaded the old pointer has taken its reference by then), and when
 * the last session lets go the instance, the parameter set and server
 * array it was made over are destroyed, again after an epoch (a worker may
 * still be reading sl_service_params() of the old set in its turn).
 *
 * Servers, services, listeners, filters and monitors are counted the same
 * way (sl__obj_ref, see internal.h): the configuration holds one reference
 * and every session, backend, DCB or object that keeps a pointer beyond a
 * worker's turn holds one. A destroyed object loses the configuration's
 * reference after an epoch; the last holder frees it after another.
 *
 * Context: noted per function.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SL_LOG_TAG "core"

#include <sluice/log.h>

#include "config_int.h"
#include "init_sql.h"
#include "stats.h"
#include "tls.h"
#include "worker_int.h"

struct sl_inst_ref {
    atomic_long refs;
    void *instance;
    const struct sl_router_ops *router;   /* one of router / filter */
    const struct sl_filter_ops *filter;
    struct sl_params *params;             /* attached when retired */
    struct sl_server **array;             /* attached when retired */
    size_t narray;                        /* its servers hold a reference */
    void *owner;                          /* retired: its service or filter,
                                           * held until the instance goes */
};

static atomic_long inst_live;   /* instances made through a ref, not freed */

struct sl_inst_ref *
sl__inst_ref_new(void *instance, const struct sl_router_ops *router,
                 const struct sl_filter_ops *filter)
{
    struct sl_inst_ref *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        return NULL;
    }
    atomic_init(&r->refs, 1);   /* the publishing object's */
    r->instance = instance;
    r->router = router;
    r->filter = filter;
    atomic_fetch_add(&inst_live, 1);
    return r;
}

void *
sl__inst_ref_instance(const struct sl_inst_ref *r)
{
    return r->instance;
}

static void
destroy_instance(struct sl_inst_ref *r)
{
    if (r->instance != NULL) {
        if (r->router != NULL && r->router->destroy_instance != NULL) {
            r->router->destroy_instance(r->instance);
        } else if (r->filter != NULL && r->filter->destroy_instance != NULL) {
            r->filter->destroy_instance(r->instance);
        }
    }
    sl__params_free(r->params);
    sl__servers_unref(r->array, r->narray);
    free(r->array);
    if (r->owner != NULL) {
        sl__obj_unref(r->router != NULL ? SL_OBJ_SERVICE : SL_OBJ_FILTER,
                      r->owner);
    }
    atomic_fetch_sub(&inst_live, 1);
    free(r);
}

static void
destroy_deferred(void *arg)
{
    destroy_instance(arg);
}

struct sl_inst_ref *
sl__inst_ref_get(struct sl_inst_ref *const *slot)
{
    struct sl_inst_ref *r = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

    if (r != NULL) {
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    }
    return r;
}

void
sl__inst_ref_put(struct sl_inst_ref *r)
{
    if (r == NULL || atomic_fetch_sub(&r->refs, 1) != 1) {
        return;
    }
    if (sl__worker_defer(destroy_deferred, r) < 0) {
        /* out of memory: leak the instance rather than free it early */
        atomic_fetch_sub(&inst_live, 1);
    }
}

static void
put_deferred(void *arg)
{
    sl__inst_ref_put(arg);
}

void
sl__inst_ref_retire(struct sl_inst_ref *r, void *owner,
                    struct sl_params *params, struct sl_server **array,
                    size_t narray)
{
    if (r == NULL) {
        sl__params_free(params);   /* nothing was made over them */
        sl__servers_unref(array, narray);
        free(array);
        return;
    }
    r->params = params;
    r->array = array;
    r->narray = narray;
    r->owner = owner;   /* a module's destroy_instance may still read it */
    if (owner != NULL) {
        sl__obj_ref(r->router != NULL ? SL_OBJ_SERVICE : SL_OBJ_FILTER, owner);
    }
    if (sl__worker_defer(put_deferred, r) < 0) {
        atomic_fetch_sub(&inst_live, 1);   /* leaked, see above */
    }
}

void
sl__inst_ref_free_current(struct sl_inst_ref *r)
{
    if (r != NULL) {
        r->instance = NULL;   /* the owner destroys its current instance */
        destroy_instance(r);
    }
}

long
sl__inst_live(void)
{
    return atomic_load(&inst_live);
}

/* ---- generations ---- */

/* The current generation (internal.h): main sets it before the workers
 * start, sl__config_publish replaces it; readers use sl__config_current(). */
struct sl_config *sl__config;
struct sl_config *sl__config_live;
atomic_ullong sl__config_generations;

/* a batch in progress (the writer's own state: one writer at a time) */
static bool batching;
static struct obj_job *held;   /* destroyed in the batch, not yet given up */

static int
dup_array(void *arrp, size_t n)
{
    void ***arr = arrp;
    void **copy = malloc((n ? n : 1) * sizeof(void *));

    if (copy == NULL) {
        *arr = NULL;
        return -ENOMEM;
    }
    if (n > 0) {
        memcpy(copy, *arr, n * sizeof(void *));
    }
    *arr = copy;
    return 0;
}

void
sl__config_discard(struct sl_config *gen)
{
    if (gen == NULL) {
        return;
    }
    free(gen->servers);
    free(gen->services);
    free(gen->listeners);
    free(gen->monitors);
    free(gen->filters);
    free(gen);
}

struct sl_config *
sl__config_next(void)
{
    const struct sl_config *cur = sl__config;
    struct sl_config *gen = malloc(sizeof(*gen));
    int rc = 0;

    if (gen == NULL) {
        return NULL;
    }
    *gen = *cur;   /* global (its params pointer shared) and counts */
    rc |= dup_array(&gen->servers, gen->nservers);
    rc |= dup_array(&gen->services, gen->nservices);
    rc |= dup_array(&gen->listeners, gen->nlisteners);
    rc |= dup_array(&gen->monitors, gen->nmonitors);
    rc |= dup_array(&gen->filters, gen->nfilters);
    if (rc != 0) {
        sl__config_discard(gen);
        return NULL;
    }
    return gen;
}

static void
discard_deferred(void *arg)
{
    sl__config_discard(arg);
}

void
sl__config_set_initial(struct sl_config *gen)
{
    sl__config = gen;
    __atomic_store_n(&sl__config_live, gen, __ATOMIC_RELEASE);
    atomic_store(&sl__config_generations, gen != NULL ? 1 : 0);
}

static void
publish_live(struct sl_config *gen)
{
    struct sl_config *old = sl__config_live;

    __atomic_store_n(&sl__config_live, gen, __ATOMIC_RELEASE);
    atomic_fetch_add(&sl__config_generations, 1);
    if (old != NULL && sl__worker_defer(discard_deferred, old) < 0) {
        /* out of memory: the old arrays leak (never freed early) */
    }
}

void
sl__config_publish(struct sl_config *gen)
{
    struct sl_config *old = sl__config;

    sl__config = gen;
    if (!batching) {
        publish_live(gen);
    } else if (old != sl__config_live) {
        sl__config_discard(old);   /* made in this batch, never seen */
    }
}

void
sl__config_batch_begin(void)
{
    batching = true;
}

/* ---- object references ---- */

struct obj_job {
    enum sl_obj_kind kind;
    void *obj;
    struct obj_job *next;   /* held in a batch */
};

static atomic_long destroyed_live;   /* destroyed, not freed yet */

static atomic_long *
refs_of(enum sl_obj_kind kind, void *obj)
{
    switch (kind) {
    case SL_OBJ_SERVER:
        return &((struct sl_server *)obj)->refs;
    case SL_OBJ_SERVICE:
        return &((struct sl_service *)obj)->refs;
    case SL_OBJ_LISTENER:
        return &((struct sl_listener *)obj)->refs;
    case SL_OBJ_FILTER:
        return &((struct sl_filter_def *)obj)->refs;
    case SL_OBJ_MONITOR:
    default:
        return &((struct sl_monitor *)obj)->refs;
    }
}

static void
free_object(enum sl_obj_kind kind, void *obj)
{
    switch (kind) {
    case SL_OBJ_SERVER:
        sl__server_free(obj);
        break;
    case SL_OBJ_SERVICE:
        sl__service_free(obj);
        break;
    case SL_OBJ_LISTENER:
        sl__listener_free(obj);
        break;
    case SL_OBJ_FILTER:
        sl__filter_free(obj);
        break;
    case SL_OBJ_MONITOR:
        sl__monitor_free(obj);
        break;
    }
}

/* Run fn(job) after an epoch; false (logged, obj leaked) when out of
 * memory: never free early. */
static bool
defer_job(void (*fn)(void *), enum sl_obj_kind kind, void *obj)
{
    struct obj_job *j = malloc(sizeof(*j));

    if (j != NULL) {
        j->kind = kind;
        j->obj = obj;
        if (sl__worker_defer(fn, j) == 0) {
            return true;
        }
        free(j);
    }
    sl_log_error("out of memory: a destroyed object is never freed");
    return false;
}

static void
free_job(void *arg)
{
    struct obj_job *j = arg;

    free_object(j->kind, j->obj);
    atomic_fetch_sub(&destroyed_live, 1);
    free(j);
}

void
sl__obj_ref(enum sl_obj_kind kind, void *obj)
{
    atomic_fetch_add_explicit(refs_of(kind, obj), 1, memory_order_relaxed);
}

void
sl__obj_unref(enum sl_obj_kind kind, void *obj)
{
    /* 0 before the decrement: that was the last reference (see refs) */
    if (obj != NULL &&
        atomic_fetch_sub_explicit(refs_of(kind, obj), 1,
                                  memory_order_acq_rel) == 0 &&
        !defer_job(free_job, kind, obj)) {
        atomic_fetch_sub(&destroyed_live, 1);
    }
}

static void
unref_job(void *arg)
{
    struct obj_job *j = arg;

    sl__obj_unref(j->kind, j->obj);
    free(j);
}

void
sl__obj_destroyed(enum sl_obj_kind kind, void *obj)
{
    struct obj_job *j;

    /* in a batch the workers still see obj in the published generation:
     * the configuration's reference goes only after the batch ends */
    if (batching && (j = malloc(sizeof(*j))) != NULL) {
        *j = (struct obj_job){.kind = kind, .obj = obj, .next = held};
        held = j;
        return;
    }
    atomic_fetch_add(&destroyed_live, 1);
    if (!defer_job(unref_job, kind, obj)) {
        atomic_fetch_sub(&destroyed_live, 1);
    }
}

long
sl__obj_destroyed_live(void)
{
    return atomic_load(&destroyed_live);
}

void
sl__servers_unref(struct sl_server *const *arr, size_t n)
{
    for (size_t i = 0; arr != NULL && i < n; i++) {
        sl__obj_unref(SL_OBJ_SERVER, arr[i]);
    }
}

/* ---- freeing objects: at exit, or when the last reference goes ---- */
void
sl__service_hold_links(struct sl_service *svc, bool hold)
{
    void (*fn)(enum sl_obj_kind, void *) = hold ? sl__obj_ref : sl__obj_unref;

    if (svc->links_held == hold) {
        return;
    }
    svc->links_held = hold;
    for (size_t i = 0; i < svc->nservers; i++) {
        fn(SL_OBJ_SERVER, svc->servers[i]);
    }
    for (size_t i = 0; i < svc->nfilters; i++) {
        fn(SL_OBJ_FILTER, svc->filters[i]);
    }
}

void
sl__listener_hold_links(struct sl_listener *l, bool hold)
{
    if (l->links_held != hold) {
        l->links_held = hold;
        (hold ? sl__obj_ref : sl__obj_unref)(SL_OBJ_SERVICE, l->service);
    }
}

void
sl__service_free(struct sl_service *svc)
{
    if (svc->protocol_data && svc->protocol->service_data_free) {
        svc->protocol->service_data_free(svc->protocol_data);
    }
    sl__inst_ref_free_current(svc->router_ref);
    if (svc->router_instance && svc->router->destroy_instance) {
        svc->router->destroy_instance(svc->router_instance);
    }
    sl__service_hold_links(svc, false);
    sl__params_free(svc->params);
    sl__stats_obj_free(svc->stats);
    free(svc->servers);
    free(svc->filters);
    free(svc);
}

void
sl__listener_free(struct sl_listener *l)
{
    sl__listener_hold_links(l, false);
    sl__tls_free(l->tls);
    free(l->pp_nets);
    sl__init_sql_free(l->init_sql, l->ninit_sql);
    sl__params_free(l->params);
    free(l);
}

void
sl__filter_free(struct sl_filter_def *f)
{
    sl__inst_ref_free_current(f->ref);
    if (f->instance && f->ops->destroy_instance) {
        f->ops->destroy_instance(f->instance);
    }
    sl__params_free(f->params);
    free(f);
}

void
sl__server_free(struct sl_server *srv)
{
    sl__tls_free(srv->tls);
    sl__params_free(srv->params);
    sl__stats_obj_free(srv->stats);
    free(srv);
}

/* Its thread is joined (at exit, or when it was destroyed). */
void
sl__monitor_free(struct sl_monitor *m)
{
    if (m->instance && m->ops->destroy_instance) {
        m->ops->destroy_instance(m->instance);
    }
    sl__params_free(m->params);
    free(m->servers);
    free(m);
}

void
sl__config_free_objects(struct sl_config *cfg)
{
    /* monitors first (their threads are joined, their instances may use
     * servers), then services (their links to filters and servers are
     * dropped, never the last reference of a published object), listeners
     * (each drops its service's link), filters, servers */
    for (size_t i = 0; i < cfg->nmonitors; i++) {
        sl__monitor_free(cfg->monitors[i]);
    }
    for (size_t i = 0; i < cfg->nlisteners; i++) {
        sl__listener_free(cfg->listeners[i]);
    }
    for (size_t i = 0; i < cfg->nservices; i++) {
        sl__service_free(cfg->services[i]);
    }
    for (size_t i = 0; i < cfg->nfilters; i++) {
        sl__filter_free(cfg->filters[i]);
    }
    for (size_t i = 0; i < cfg->nservers; i++) {
        sl__server_free(cfg->servers[i]);
    }
}

void
sl__config_batch_end(void)
{
    struct obj_job *j;

    batching = false;
    if (sl__config != sl__config_live) {
        publish_live(sl__config);
    }
    while ((j = held) != NULL) {
        held = j->next;
        sl__obj_destroyed(j->kind, j->obj);
        free(j);
    }
}
