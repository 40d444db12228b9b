/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker threads: the poll loop, the per-worker message queue, timers and
 * zombie reclamation.
 *
 * One loop turn:
 *
 *   observe epoch -> reap zombies -> epoll_wait -> queue DCBs with events
 *        ^                                             |
 *        +---- timers <- messages <- process the event queue (budgeted)
 *
 * event_model=pinned: each worker has a private epoll set and event queue;
 * its DCBs are only ever touched by its thread, so nothing locks.
 * event_model=shared: DCBs live in one shared epoll set whose fd sits in
 * every worker's private set; whoever wakes harvests it into the shared
 * event queue and any worker processes any DCB (one at a time per DCB, see
 * evq.h; one at a time per session, see session.c).
 *
 * Zombies: a closed DCB is tagged with a fresh global epoch. Every worker
 * stores the epoch it saw at the start of each turn; a zombie whose tag is
 * <= the minimum of those is not referenced by any poll result or stack
 * anywhere and may be freed (once its refcount is 0 and it is out of the
 * event queue). A sleeping worker that has not seen a new epoch is nudged
 * through its eventfd, and a worker holding zombies polls with a short
 * timeout, so idle workers never stall reclamation.
 *
 * Cross-thread entry points: sl_worker_post/broadcast (mutex on the message
 * list only) and the atomics. Everything else is worker-owned.
 */
#define SL_LOG_TAG "worker"

#include <errno.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <sluice/log.h>

#include "buf_int.h"
#include "dcb_int.h"
#include "module_int.h"
#include "worker_int.h"

#define MAX_EVENTS 256
#define SHARED_BATCH 64
#define ZOMBIE_TIMEOUT_MS 10
#define STOP_GRACE_MS 2000

/* How long an idle worker sleeps in epoll_wait (worker_int.h). */
int sl__worker_idle_timeout_ms = 1000;

struct wmsg {
    struct wmsg *next;
    sl_worker_fn fn;
    void *arg;
};

struct wtimer {
    uint64_t deadline;
    uint64_t interval;
    uint64_t id;
    sl_timer_fn fn;   /* NULL once cancelled */
    void *arg;
    void (*drop)(void *arg);   /* if set: called for a timer that ends
                                * without its last run (the worker stops,
                                * or it could not be re-armed) */
};

static struct sl_worker **workers;
static int nworkers;
static enum sl_event_model model;
static int shared_epfd = -1;
static struct sl_evq shared_evq;
static atomic_ullong global_epoch = 1;
static atomic_ullong next_timer_id = 1;
static atomic_bool running;
static atomic_long zombies_total;   /* on every worker's list together */
static char shared_marker;   /* epoll tag of the shared set in a private one */
static __thread struct sl_worker *tls_worker;

bool
sl__workers_shared(void)
{
    return model == SL_EVENT_MODEL_SHARED;
}

bool
sl_worker_shared_model(void)
{
    return sl__workers_shared();
}

bool
sl__workers_running(void)
{
    return atomic_load(&running);
}

int
sl__worker_epfd(const struct sl_worker *w)
{
    return model == SL_EVENT_MODEL_SHARED ? shared_epfd : w->epfd;
}

void
sl__worker_notify(struct sl_worker *w, struct sl_evq_item *it,
                  uint32_t events)
{
    sl__evq_notify(w->evq, it, events);
}

struct sl_worker *
sl_worker_current(void)
{
    return tls_worker;
}

int
sl_worker_count(void)
{
    return nworkers;
}

struct sl_worker *
sl_worker_get(int index)
{
    if (index < 0 || index >= nworkers) {
        return NULL;
    }
    return workers[index];
}

int
sl_worker_index(const struct sl_worker *w)
{
    return w->index;
}

uint64_t
sl_worker_now_ms(void)
{
    return tls_worker != NULL ? tls_worker->now_ms : sl_monotonic_ms();
}

static void
wake(struct sl_worker *w)
{
    uint64_t one = 1;

    /* EAGAIN means the counter is already non-zero: it is awake anyway */
    if (write(w->efd, &one, sizeof(one)) < 0 && errno != EAGAIN) {
        sl_log_error("eventfd write failed: %s", strerror(errno));
    }
}

/* ---- messages ---- */

int
sl_worker_post(struct sl_worker *w, sl_worker_fn fn, void *arg)
{
    struct wmsg *m = malloc(sizeof(*m));

    if (m == NULL) {
        return -ENOMEM;
    }
    m->next = NULL;
    m->fn = fn;
    m->arg = arg;
    pthread_mutex_lock(&w->msg_lock);
    if (w->msg_tail != NULL) {
        w->msg_tail->next = m;
    } else {
        atomic_store_explicit(&w->msg_head, m, memory_order_relaxed);
    }
    w->msg_tail = m;
    pthread_mutex_unlock(&w->msg_lock);
    wake(w);
    return 0;
}

int
sl_worker_broadcast(sl_worker_fn fn, void *arg)
{
    int rc = 0;
    int i;

    for (i = 0; i < nworkers; i++) {
        int r = sl_worker_post(workers[i], fn, arg);

        if (r != 0 && rc == 0) {
            rc = r;
        }
    }
    return rc;
}

/*
 * Owner thread, without msg_lock: a hint only (see worker_int.h), for the
 * loop's "run the queue?" after each epoll_wait.
 */
static bool
messages_waiting(struct sl_worker *w)
{
    return atomic_load_explicit(&w->msg_head, memory_order_relaxed) != NULL;
}

/* As messages_waiting, exact (under msg_lock): for the drain at stop. */
static bool
messages_queued(struct sl_worker *w)
{
    bool queued;

    pthread_mutex_lock(&w->msg_lock);
    queued = atomic_load_explicit(&w->msg_head, memory_order_relaxed) != NULL;
    pthread_mutex_unlock(&w->msg_lock);
    return queued;
}

static void
run_messages(struct sl_worker *w)
{
    struct wmsg *m;
    struct wmsg *next;

    pthread_mutex_lock(&w->msg_lock);
    m = atomic_load_explicit(&w->msg_head, memory_order_relaxed);
    atomic_store_explicit(&w->msg_head, NULL, memory_order_relaxed);
    w->msg_tail = NULL;
    pthread_mutex_unlock(&w->msg_lock);
    for (; m != NULL; m = next) {
        next = m->next;
        m->fn(m->arg);
        free(m);
    }
}

/* ---- timers (binary min-heap on deadline) ---- */

static void
heap_swap(struct wtimer *h, size_t a, size_t b)
{
    struct wtimer t = h[a];

    h[a] = h[b];
    h[b] = t;
}

static void
heap_up(struct wtimer *h, size_t i)
{
    while (i > 0 && h[(i - 1) / 2].deadline > h[i].deadline) {
        heap_swap(h, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void
heap_down(struct wtimer *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1;
        size_t m = i;

        if (l < n && h[l].deadline < h[m].deadline) {
            m = l;
        }
        if (l + 1 < n && h[l + 1].deadline < h[m].deadline) {
            m = l + 1;
        }
        if (m == i) {
            return;
        }
        heap_swap(h, i, m);
        i = m;
    }
}

static int
heap_push(struct sl_worker *w, struct wtimer t)
{
    if (w->ntimers == w->timers_cap) {
        size_t cap = w->timers_cap ? w->timers_cap * 2 : 16;
        struct wtimer *h = realloc(w->timers, cap * sizeof(*h));

        if (h == NULL) {
            return -ENOMEM;
        }
        w->timers = h;
        w->timers_cap = cap;
    }
    w->timers[w->ntimers] = t;
    heap_up(w->timers, w->ntimers++);
    return 0;
}

uint64_t
sl__worker_add_timer_drop(uint64_t ms, sl_timer_fn fn, void (*drop)(void *),
                          void *arg)
{
    struct sl_worker *w = tls_worker;
    struct wtimer t;

    if (w == NULL || fn == NULL) {
        return 0;
    }
    t.deadline = sl_monotonic_ms() + ms;
    t.interval = ms;
    t.id = atomic_fetch_add(&next_timer_id, 1);
    t.fn = fn;
    t.arg = arg;
    t.drop = drop;
    return heap_push(w, t) == 0 ? t.id : 0;
}

uint64_t
sl_worker_add_timer(uint64_t ms, sl_timer_fn fn, void *arg)
{
    return sl__worker_add_timer_drop(ms, fn, NULL, arg);
}

void
sl_worker_cancel_timer(uint64_t id)
{
    struct sl_worker *w = tls_worker;
    size_t i;

    if (w == NULL) {
        return;
    }
    for (i = 0; i < w->ntimers; i++) {
        if (w->timers[i].id == id) {
            w->timers[i].fn = NULL;
            return;
        }
    }
}

/* now_us: the clock now (not the turn's cached now_ms), for the loop lag
 * (how late each timer runs past its deadline). */
static void
run_timers(struct sl_worker *w, uint64_t now_us)
{
    struct wtimer t;

    while (w->ntimers > 0 && w->timers[0].deadline <= w->now_ms) {
        t = w->timers[0];
        w->timers_run++;
        if (now_us > t.deadline * 1000u) {
            w->timer_lag_us += now_us - t.deadline * 1000u;
        }
        w->timers[0] = w->timers[--w->ntimers];
        heap_down(w->timers, w->ntimers, 0);
        if (t.fn != NULL && t.fn(t.arg)) {
            t.deadline = w->now_ms + (t.interval ? t.interval : 1);
            if (heap_push(w, t) != 0) {
                sl_log_error("cannot re-arm timer %llu",
                             (unsigned long long)t.id);
                if (t.drop != NULL) {
                    t.drop(t.arg);
                }
            }
        }
    }
}

/* ---- zombies ---- */

static uint64_t
min_observed_epoch(void)
{
    uint64_t min = UINT64_MAX;
    uint64_t e;
    int i;

    for (i = 0; i < nworkers; i++) {
        e = atomic_load(&workers[i]->observed_epoch);
        if (e < min) {
            min = e;
        }
    }
    return min;
}

static void
reap(struct sl_worker *w, uint64_t min_epoch)
{
    struct sl_dcb **pp = &w->zombies;
    struct sl_dcb *d;

    while ((d = *pp) != NULL) {
        if (sl__dcb_reclaimable(d, min_epoch)) {
            *pp = d->zombie_next;
            w->nzombies--;
            atomic_fetch_sub(&zombies_total, 1);
            sl__dcb_free(d);
        } else {
            pp = &d->zombie_next;
        }
    }
}

void
sl__worker_reap_all(struct sl_worker *w)
{
    reap(w, UINT64_MAX);
}

static void
post_zombie(void *arg)
{
    sl__worker_add_zombie(arg);
}

void
sl__worker_add_zombie(struct sl_dcb *dcb)
{
    struct sl_worker *w = tls_worker;
    uint64_t e;
    int i;

    if (w == NULL) {
        w = dcb->worker;
        if (atomic_load(&running) && w != NULL) {
            /* not on a worker thread: hand it to the owner */
            if (sl_worker_post(w, post_zombie, dcb) == 0) {
                return;
            }
        }
    }
    e = atomic_fetch_add(&global_epoch, 1) + 1;
    dcb->zombie_epoch = e;
    dcb->zombie_next = w->zombies;
    w->zombies = dcb;
    w->nzombies++;
    atomic_fetch_add(&zombies_total, 1);
    for (i = 0; i < nworkers; i++) {
        struct sl_worker *o = workers[i];

        if (o != w && atomic_load(&o->sleeping) &&
            atomic_load(&o->observed_epoch) < e) {
            wake(o);
        }
    }
}

/* ---- deferred frees (configuration generations, module instances) ----
 *
 * The same epochs as the zombies: an entry tagged with epoch e is run once
 * every worker has started a turn at or after e, so no worker can still
 * hold a pointer it loaded before the object was unpublished (workers keep
 * no such pointer across turns). The list has its own mutex: it is touched
 * when the configuration changes and when a replaced instance loses its
 * last session, never on the routing path. Entries are run by
 * sl__worker_reclaim (the admin thread before each change, main at exit). */

struct deferred {
    struct deferred *next;
    uint64_t epoch;
    void (*fn)(void *);
    void *arg;
};

static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static struct deferred *deferred_head;
static atomic_size_t deferred_count;
static atomic_int reclaim_holds;

int
sl__worker_defer(void (*fn)(void *), void *arg)
{
    struct deferred *d = malloc(sizeof(*d));
    uint64_t e;

    if (d == NULL) {
        return -ENOMEM;   /* the caller leaks rather than frees early */
    }
    e = atomic_fetch_add(&global_epoch, 1) + 1;
    d->epoch = e;
    d->fn = fn;
    d->arg = arg;
    pthread_mutex_lock(&deferred_lock);
    d->next = deferred_head;
    deferred_head = d;
    pthread_mutex_unlock(&deferred_lock);
    atomic_fetch_add(&deferred_count, 1);
    /* stopped workers need no nudge, and sl__workers_finish frees them
     * one by one while their zombies still drop references */
    for (int i = 0; atomic_load(&running) && i < nworkers; i++) {
        if (atomic_load(&workers[i]->sleeping) &&
            atomic_load(&workers[i]->observed_epoch) < e) {
            wake(workers[i]);
        }
    }
    return 0;
}

size_t
sl__worker_reclaim(bool all)
{
    uint64_t min = all ? UINT64_MAX : min_observed_epoch();
    struct deferred *ready = NULL;
    struct deferred **pp;
    struct deferred *d;
    size_t n = 0;

    if (atomic_load(&deferred_count) == 0 ||
        (!all && atomic_load(&reclaim_holds) > 0)) {
        return 0;
    }
    pthread_mutex_lock(&deferred_lock);
    pp = &deferred_head;
    while ((d = *pp) != NULL) {
        if (d->epoch <= min) {
            *pp = d->next;
            d->next = ready;
            ready = d;
        } else {
            pp = &d->next;
        }
    }
    pthread_mutex_unlock(&deferred_lock);
    /* outside the lock: a function may defer again (an instance losing
     * the last reference of a generation) */
    while ((d = ready) != NULL) {
        ready = d->next;
        atomic_fetch_sub(&deferred_count, 1);
        d->fn(d->arg);
        free(d);
        n++;
    }
    return n;
}

void
sl__worker_reclaim_hold(bool hold)
{
    atomic_fetch_add(&reclaim_holds, hold ? 1 : -1);
}

size_t
sl__worker_deferred(void)
{
    return atomic_load(&deferred_count);
}

/* ---- the loop ---- */

static int
turn_timeout(struct sl_worker *w)
{
    uint64_t t = (uint64_t)sl__worker_idle_timeout_ms;

    if (sl__evq_count(w->evq) > 0 || (w->stopping && w->nzombies == 0)) {
        return 0;
    }
    /* while zombies wait anywhere, come round often to publish our epoch
     * (and to recheck refcounts dropped by other threads) */
    if (atomic_load(&zombies_total) > 0 || w->stopping) {
        t = ZOMBIE_TIMEOUT_MS;
    }
    if (w->ntimers > 0) {
        uint64_t d = w->timers[0].deadline;
        uint64_t left = d > w->now_ms ? d - w->now_ms : 0;

        if (left < t) {
            t = left;
        }
    }
    return (int)t;
}

static void
wake_one_sleeper(struct sl_worker *self)
{
    int i;

    for (i = 0; i < nworkers; i++) {
        if (workers[i] != self && atomic_load(&workers[i]->sleeping)) {
            wake(workers[i]);
            return;
        }
    }
}

/* The MaxScale-style event counters of one epoll event (own DCBs). */
static inline void
count_event(struct sl_worker *w, uint32_t ev)
{
    w->events++;
    w->ev_reads += (ev & EPOLLIN) != 0;
    w->ev_writes += (ev & EPOLLOUT) != 0;
    w->ev_errors += (ev & EPOLLERR) != 0;
    w->ev_hangups += (ev & (EPOLLHUP | EPOLLRDHUP)) != 0;
}

/* One epoll_wait's worth of events (n of them for DCBs). */
static inline void
count_batch(struct sl_worker *w, uint64_t n)
{
    if (n > 0) {
        w->polls++;
        if (n > w->max_batch) {
            w->max_batch = n;
        }
    }
}

static void
harvest_shared(struct sl_worker *w)
{
    struct epoll_event evs[SHARED_BATCH];
    int n = epoll_wait(shared_epfd, evs, SHARED_BATCH, 0);
    int i;

    for (i = 0; i < n; i++) {
        sl__evq_notify(&shared_evq, evs[i].data.ptr, evs[i].events);
        count_event(w, evs[i].events);
    }
    count_batch(w, n > 0 ? (uint64_t)n : 0);
    if (sl__evq_count(&shared_evq) > 1) {
        wake_one_sleeper(w);
    }
}

/* One read takes an eventfd's whole count (a second one only ever found
 * EAGAIN: a syscall per wake-up); a write after it makes the fd readable
 * again for the next epoll_wait. */
static void
drain_eventfd(struct sl_worker *w)
{
    uint64_t v;

    if (read(w->efd, &v, sizeof(v)) < 0) {
        return;   /* EAGAIN: another wake-up's read took it */
    }
}

/* Wait for events and queue them. Returns true if messages are waiting. */
static bool
poll_events(struct sl_worker *w, int timeout)
{
    struct epoll_event evs[MAX_EVENTS];
    uint64_t seen = atomic_load(&w->observed_epoch);
    bool msgs = false;
    uint64_t t0, t1;
    uint64_t own = 0;
    int n;
    int i;

    if (timeout != 0) {
        /* Dekker with sl__worker_add_zombie: set sleeping, then look for
         * an epoch published before a closer could see the flag. */
        atomic_store(&w->sleeping, true);
        if (atomic_load(&global_epoch) != seen) {
            timeout = 0;
        }
    }
    t0 = sl_monotonic_us();
    n = epoll_wait(w->epfd, evs, MAX_EVENTS, timeout);
    atomic_store(&w->sleeping, false);
    t1 = sl_monotonic_us();
    w->idle_us += t1 - t0;
    w->now_ms = t1 / 1000u;
    for (i = 0; i < n; i++) {
        void *p = evs[i].data.ptr;

        if (p == &w->efd) {
            drain_eventfd(w);
            msgs = true;
        } else if (p == &shared_marker) {
            harvest_shared(w);
        } else {
            sl__evq_notify(w->evq, p, evs[i].events);
            count_event(w, evs[i].events);
            own++;
        }
    }
    count_batch(w, own);
    return msgs || messages_waiting(w);
}

static bool
loop_done(struct sl_worker *w)
{
    if (!w->stopping) {
        return false;
    }
    if (w->now_ms > w->stop_deadline) {
        return true;
    }
    return w->nzombies == 0 && !messages_queued(w) &&
           (sl__workers_shared() || sl__evq_count(w->evq) == 0);
}

/* Once a second or so (a turn ends at least every idle timeout): the busy
 * share since the last sample into the minute ring; each 60 samples,
 * their average into the hour ring. */
static void
load_sample(struct sl_worker *w, uint64_t now_us)
{
    uint64_t wall = now_us - w->load_t0_us;
    uint64_t busy;
    unsigned sum = 0;

    if (w->load_t0_us == 0) {
        w->load_t0_us = now_us;
        w->load_busy0_us = w->busy_us;
        return;
    }
    if (wall < 1000000u) {
        return;
    }
    busy = w->busy_us - w->load_busy0_us;
    w->load_sec[w->load_nsec % 60] =
        (uint8_t)(busy >= wall ? 100 : busy * 100 / wall);
    w->load_nsec++;
    w->load_t0_us = now_us;
    w->load_busy0_us = w->busy_us;
    if (w->load_nsec % 60 == 0) {
        for (int i = 0; i < 60; i++) {
            sum += w->load_sec[i];
        }
        w->load_min[w->load_nmin % 60] = (uint8_t)(sum / 60);
        w->load_nmin++;
    }
}

bool
sl__worker_load(const struct sl_worker *w, unsigned *second,
                unsigned *minute, unsigned *hour)
{
    unsigned ns = w->load_nsec < 60 ? w->load_nsec : 60;
    unsigned nm = w->load_nmin < 60 ? w->load_nmin : 60;
    unsigned sum = 0;

    if (ns == 0) {
        return false;
    }
    *second = w->load_sec[(w->load_nsec - 1) % 60];
    for (unsigned i = 0; i < ns; i++) {
        sum += w->load_sec[i];
    }
    *minute = sum / ns;
    if (nm == 0) {
        *hour = *minute;   /* less than a minute yet: what there is */
        return true;
    }
    sum = 0;
    for (unsigned i = 0; i < nm; i++) {
        sum += w->load_min[i];
    }
    *hour = sum / nm;
    return true;
}

static void
loop_turn(struct sl_worker *w)
{
    uint64_t idle0 = w->idle_us;
    uint64_t start = w->turn_end_us;
    uint64_t end;

    w->now_ms = sl_monotonic_ms();
    if (start == 0) {
        start = w->now_ms * 1000u;
    }
    atomic_store(&w->observed_epoch, atomic_load(&global_epoch));
    if (w->nzombies > 0) {
        reap(w, min_observed_epoch());
    }
    if (poll_events(w, turn_timeout(w))) {
        run_messages(w);
    }
    sl__evq_process(w->evq, sl__workers_shared() ? SHARED_BATCH : SIZE_MAX);
    end = sl_monotonic_us();
    run_timers(w, end);
    /* The timers' own run is counted in the next turn's busy time. */
    if (end > start + (w->idle_us - idle0)) {
        w->busy_us += end - start - (w->idle_us - idle0);
    }
    w->turn_end_us = end;
    load_sample(w, end);
}

/*
 * The modules' worker hooks, in this worker's thread: worker_init of every
 * loaded module (the registry: protocols, routers, filters, monitors) in
 * load order. Stops at the first failure, which is fatal at start-up
 * (sl__workers_start). Returns 0 or that module's negative errno, with
 * *ninit the number of modules initialised; modules_finish undoes exactly
 * those, in reverse (a module loaded later through the REST API gets
 * neither hook).
 */
static int
modules_init(struct sl_worker *w, size_t *ninit)
{
    size_t n = sl__module_count();
    size_t i;

    for (i = 0; i < n; i++) {
        const struct sl_module *m = sl__module_at(i)->info;
        int rc = m->worker_init != NULL ? m->worker_init() : 0;

        if (rc != 0) {
            rc = rc < 0 ? rc : -EINVAL;
            sl_log_error("worker %d: module %s: worker_init failed: %s",
                         w->index, m->name, strerror(-rc));
            *ninit = i;
            return rc;
        }
    }
    *ninit = n;
    return 0;
}

static void
modules_finish(size_t ninit)
{
    while (ninit > 0) {
        const struct sl_module *m = sl__module_at(--ninit)->info;

        if (m->worker_finish != NULL) {
            m->worker_finish();
        }
    }
}

/*
 * Start-up handshake: each worker reports the result of its modules'
 * worker_init once; sl__workers_start waits for all of them and fails
 * (stopping the workers) if any failed.
 */
static sem_t init_sem;
static atomic_int init_rc;

static void
init_done(int rc)
{
    int none = 0;

    if (rc != 0) {
        atomic_compare_exchange_strong(&init_rc, &none, rc);
    }
    sem_post(&init_sem);
}

static void *
worker_main(void *arg)
{
    struct sl_worker *w = arg;
    size_t ninit;

    tls_worker = w;
    w->now_ms = sl_monotonic_ms();
    init_done(modules_init(w, &ninit));
    while (!loop_done(w)) {
        loop_turn(w);
    }
    if (w->nzombies > 0) {
        sl_log_warn("worker %d: %zu DCBs still referenced at exit", w->index,
                    w->nzombies);
    }
    modules_finish(ninit);
    /* an exited worker must not hold back the others' reclamation */
    atomic_store(&w->observed_epoch, UINT64_MAX);
    sl__buf_thread_cleanup();
    tls_worker = NULL;
    return NULL;
}

/* ---- lifecycle ---- */

static int
epoll_add_ptr(int epfd, int fd, uint32_t events, void *ptr)
{
    struct epoll_event ev = {.events = events, .data.ptr = ptr};

    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

static void worker_delete(struct sl_worker *w);

static struct sl_worker *
worker_new(int index)
{
    struct sl_worker *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        return NULL;
    }
    w->index = index;
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&w->msg_lock, NULL);
    pthread_mutex_init(&w->dcb_lock, NULL);
    pthread_mutex_init(&w->pool.lock, NULL);
    atomic_init(&w->observed_epoch, 0);
    sl__evq_init(&w->own_evq, false);
    w->evq = model == SL_EVENT_MODEL_SHARED ? &shared_evq : &w->own_evq;
    /* The shared set is level-triggered in each private set: whoever
     * wakes harvests it; EPOLLEXCLUSIVE is not allowed on epoll fds. */
    if (w->epfd < 0 || w->efd < 0 ||
        epoll_add_ptr(w->epfd, w->efd, EPOLLIN | EPOLLET, &w->efd) != 0 ||
        (model == SL_EVENT_MODEL_SHARED &&
         epoll_add_ptr(w->epfd, shared_epfd, EPOLLIN, &shared_marker) != 0)) {
        sl_log_error("worker %d: cannot set up polling: %s", index,
                     strerror(errno));
        worker_delete(w);
        return NULL;
    }
    return w;
}

/* The worker has stopped: its queued timers end without running; those
 * with a drop function release what they hold (a session timer's
 * session reference, which may free the session). */
static void
drop_timers(struct sl_worker *w)
{
    size_t n = w->ntimers;

    w->ntimers = 0;
    for (size_t i = 0; i < n; i++) {
        if (w->timers[i].drop != NULL) {
            w->timers[i].drop(w->timers[i].arg);
        }
    }
}

static void
worker_delete(struct sl_worker *w)
{
    struct wmsg *m;

    sl__worker_reap_all(w);
    m = atomic_load_explicit(&w->msg_head, memory_order_relaxed);
    while (m != NULL) {
        struct wmsg *next = m->next;

        free(m);
        m = next;
    }
    if (w->epfd >= 0) {
        close(w->epfd);
    }
    if (w->efd >= 0) {
        close(w->efd);
    }
    sl__evq_destroy(&w->own_evq);
    pthread_mutex_destroy(&w->msg_lock);
    pthread_mutex_destroy(&w->dcb_lock);
    pthread_mutex_destroy(&w->pool.lock);
    free(w->timers);
    free(w);
}

int
sl__workers_init(int n, enum sl_event_model m)
{
    int i;

    if (n < 1 || workers != NULL) {
        return -EINVAL;
    }
    model = m;
    if (m == SL_EVENT_MODEL_SHARED) {
        shared_epfd = epoll_create1(EPOLL_CLOEXEC);
        if (shared_epfd < 0) {
            return -errno;
        }
        sl__evq_init(&shared_evq, true);
    }
    workers = calloc((size_t)n, sizeof(*workers));
    if (workers == NULL) {
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        workers[i] = worker_new(i);
        nworkers = i + 1;
        if (workers[i] == NULL) {
            sl__workers_finish();
            return -ENOMEM;
        }
    }
    return 0;
}

int
sl__workers_start(void)
{
    int i;
    int rc;

    if (sem_init(&init_sem, 0, 0) != 0) {
        return -errno;
    }
    atomic_store(&init_rc, 0);
    atomic_store(&running, true);
    for (i = 0; i < nworkers; i++) {
        rc = pthread_create(&workers[i]->thread, NULL, worker_main,
                            workers[i]);
        if (rc != 0) {
            sl_log_error("cannot start worker %d: %s", i, strerror(rc));
            sl__workers_stop();
            sem_destroy(&init_sem);
            return -rc;
        }
        workers[i]->started = true;
    }
    for (i = 0; i < nworkers; i++) {
        while (sem_wait(&init_sem) != 0 && errno == EINTR) {
        }
    }
    sem_destroy(&init_sem);
    rc = atomic_load(&init_rc);
    if (rc != 0) {
        sl_log_error("a module's worker_init failed: not starting");
        sl__workers_stop();
        return rc;
    }
    return 0;
}

static void
stop_msg(void *arg)
{
    struct sl_worker *w = tls_worker;

    w->stopping = true;
    w->stop_deadline = w->now_ms + STOP_GRACE_MS;
    sl__dcb_close_all(w);
}

void
sl__workers_stop(void)
{
    int i;

    if (!atomic_load(&running)) {
        return;
    }
    sl_worker_broadcast(stop_msg, NULL);
    for (i = 0; i < nworkers; i++) {
        if (workers[i]->started) {
            pthread_join(workers[i]->thread, NULL);
            workers[i]->started = false;
        }
    }
    atomic_store(&running, false);
}

void
sl__workers_finish(void)
{
    int i;

    sl__workers_stop();
    for (i = 0; i < nworkers; i++) {
        if (workers[i] != NULL) {
            sl__dcb_close_all(workers[i]);
        }
    }
    /* closed DCBs still linked in a queue are released by one last pass:
     * their handlers see them closed and do nothing */
    for (i = 0; i < nworkers; i++) {
        if (workers[i] != NULL) {
            while (sl__evq_process_one(workers[i]->evq)) {
            }
        }
    }
    /* Timers end (a session timer's reference may free its session and
     * so make DCBs reclaimable), then every worker's zombies are freed
     * while all workers still exist: in the shared model a zombie may be
     * on another worker's list than the one that owns it. */
    for (i = 0; i < nworkers; i++) {
        if (workers[i] != NULL) {
            drop_timers(workers[i]);
        }
    }
    for (int round = 0; round < 8; round++) {
        size_t left = 0;

        for (i = 0; i < nworkers; i++) {
            if (workers[i] != NULL) {
                sl__worker_reap_all(workers[i]);
                left += workers[i]->nzombies;
            }
        }
        if (left == 0) {
            break;
        }
    }
    for (i = 0; i < nworkers; i++) {
        if (workers[i] != NULL) {
            worker_delete(workers[i]);
        }
    }
    free(workers);
    workers = NULL;
    nworkers = 0;
    if (shared_epfd >= 0) {
        close(shared_epfd);
        shared_epfd = -1;
        sl__evq_destroy(&shared_evq);
    }
}
