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
 * Context: noted per function.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "worker_int.h"

struct sl_inst_ref {
    atomic_long refs;
    void *instance;
    const struct sl_router_ops *router;   /* one of router / filter */
    const struct sl_filter_ops *filter;
    struct sl_params *params;             /* attached when retired */
    void *array;                          /* attached when retired */
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
    free(r->array);
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
sl__inst_ref_retire(struct sl_inst_ref *r, struct sl_params *params,
                    void *array)
{
    if (r == NULL) {
        sl__params_free(params);   /* nothing was made over them */
        free(array);
        return;
    }
    r->params = params;
    r->array = array;
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
sl__config_publish(struct sl_config *gen)
{
    struct sl_config *old = sl__config;

    __atomic_store_n(&sl__config, gen, __ATOMIC_RELEASE);
    if (old != NULL && sl__worker_defer(discard_deferred, old) < 0) {
        /* out of memory: the old arrays leak (never freed early) */
    }
}
