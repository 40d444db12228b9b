/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker internals shared by worker.c and dcb.c (not installed).
 */
#ifndef SLUICE_WORKER_INT_H
#define SLUICE_WORKER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sluice/worker.h>

#include "evq.h"
#include "internal.h"

struct sl_dcb;
struct wmsg;
struct wtimer;

/* A worker's pool of idle backend connections (pool.c). */
struct sl_pool {
    pthread_mutex_t lock;          /* event_model=shared only: another
                                    * worker may handle a pooled DCB's
                                    * event (pinned: never taken) */
    struct sl_dcb *head;           /* newest first, via dcb->pool_next */
    size_t n;
    bool timer_armed;              /* the once-a-second expiry check */
};

struct sl_worker {
    int index;
    pthread_t thread;
    bool started;
    int epfd;                      /* private epoll: eventfd, own DCBs
                                    * (pinned) or the shared epoll fd */
    int efd;                       /* eventfd: messages and nudges */
    struct sl_evq own_evq;
    struct sl_evq *evq;            /* own_evq, or the shared queue */
    atomic_ullong observed_epoch;  /* epoch seen at the last turn start */
    atomic_bool sleeping;          /* in epoll_wait with a timeout */
    bool stopping;                 /* stop message seen: drain and exit */
    uint64_t stop_deadline;

    pthread_mutex_t msg_lock;      /* the only cross-thread queue */
    /* Changed under msg_lock; atomic because the owner also peeks at it
     * without the lock (is there work? -- a hint: a post always writes
     * the eventfd too, so a stale NULL costs one epoll_wait wake-up). */
    _Atomic(struct wmsg *) msg_head;
    struct wmsg *msg_tail;         /* under msg_lock */

    struct wtimer *timers;         /* binary min-heap on deadline */
    size_t ntimers;
    size_t timers_cap;

    struct sl_dcb *zombies;        /* closed here, not freed yet */
    size_t nzombies;

    struct sl_dcb *dcbs;           /* every DCB this worker created */
    pthread_mutex_t dcb_lock;      /* guards dcbs (setup/teardown only) */
    struct sl_pool pool;           /* idle backend connections (pool.c) */

    uint64_t now_ms;

    /* Where the loop's time goes (/metrics, sluice_worker_*): written by
     * the worker only, read by a job posted to it (admin_metrics.c). */
    uint64_t busy_us;              /* turns minus the time in epoll_wait */
    uint64_t idle_us;              /* in epoll_wait */
    uint64_t turn_end_us;          /* when the last turn ended */
    uint64_t timers_run;           /* timer callbacks run */
    uint64_t timer_lag_us;         /* their lateness past the deadline */
    uint64_t events;               /* epoll events taken (own DCBs) */

    /* GET /v1/maxscale/threads (MaxScale's thread stats): the worker's
     * own fields too, read by a job on the worker (admin_json.c). */
    uint64_t ev_reads;             /* events with EPOLLIN */
    uint64_t ev_writes;            /* with EPOLLOUT */
    uint64_t ev_errors;            /* with EPOLLERR */
    uint64_t ev_hangups;           /* with EPOLLHUP or EPOLLRDHUP */
    uint64_t polls;                /* epoll_waits that returned events */
    uint64_t max_batch;            /* most events one of them returned */
    uint64_t accepts;              /* client connections accepted here */
    uint64_t total_dcbs;           /* DCBs created here (under dcb_lock) */
    /* Load: busy share of the wall time, sampled once a second or so. */
    uint64_t load_t0_us;           /* start of the current sample */
    uint64_t load_busy0_us;        /* busy_us then */
    uint8_t load_sec[60];          /* percent, the last 60 samples */
    uint8_t load_min[60];          /* their averages, the last 60 minutes */
    unsigned load_nsec;            /* samples taken (ring index: % 60) */
    unsigned load_nmin;            /* minutes completed */
};

/* The worker's load in percent over its last sample (about a second),
 * minute and hour; false before the first sample. Worker only. */
bool sl__worker_load(const struct sl_worker *w, unsigned *second,
                     unsigned *minute, unsigned *hour);

/* True in event_model=shared. */
bool sl__workers_shared(void);
/* The epoll set a DCB of worker w is registered with. */
int sl__worker_epfd(const struct sl_worker *w);
/* Queue events for a DCB item (from outside the poller, e.g. resume). */
void sl__worker_notify(struct sl_worker *w, struct sl_evq_item *it,
                       uint32_t events);
/* Put a closed DCB on the calling worker's zombie list (tagged with a new
 * epoch) and nudge sleeping workers that have not seen that epoch. */
void sl__worker_add_zombie(struct sl_dcb *dcb);
/* Reclaim everything now (only when no worker runs). */
void sl__worker_reap_all(struct sl_worker *w);

/* Run fn(arg) once no worker can hold a pointer loaded before this call
 * (every worker has started a new turn): for unpublished configuration
 * generations and module instances. 0, or -ENOMEM (fn never runs: the
 * caller's object leaks, it is never freed early). Any thread. */
int sl__worker_defer(void (*fn)(void *), void *arg);
/* sl_worker_add_timer with a drop function, called with arg if the timer
 * ends without its last run: the worker stops with it still queued, or it
 * could not be re-armed (what the timer holds is released there). */
uint64_t sl__worker_add_timer_drop(uint64_t ms, sl_timer_fn fn,
                                   void (*drop)(void *), void *arg);
/* Run the deferred functions whose epoch every worker has passed (all of
 * them with all=true: only once the workers have stopped). Returns how
 * many ran. Admin thread or main. */
size_t sl__worker_reclaim(bool all);
/* A thread that is not a worker (main, while it waits for the first
 * monitor ticks) and reads the configuration holds back reclamation
 * between hold=true and hold=false. */
void sl__worker_reclaim_hold(bool hold);
/* Deferred functions not run yet (tests, diagnostics). */
size_t sl__worker_deferred(void);
/* True while worker threads are running. */
bool sl__workers_running(void);
/* Milliseconds an idle worker (no events, timers or zombies) sleeps in
 * epoll_wait; 1000. A variable (not a macro) so tests can raise it and
 * prove that reclamation never waits for this timeout. Set before
 * sl__workers_start(). */
extern int sl__worker_idle_timeout_ms;

#endif
