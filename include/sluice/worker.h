/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker threads.
 *
 * `threads=auto|N` workers each run an epoll loop: poll, push the DCBs with
 * events onto an event queue, process the queue with a budget per DCB
 * (a DCB with more work goes back to the tail), run messages and timers,
 * then mark the worker's passage for zombie reclamation.
 *
 * event_model=pinned: one epoll and one event queue per worker; a session
 * and its DCBs live on one worker and no lock is taken on the hot path.
 * event_model=shared: one epoll and one event queue shared by all workers;
 * any worker processes any DCB, never two at once.
 *
 * Cross-thread work goes through sl_worker_post(): a per-worker message
 * queue woken by an eventfd. Nothing else crosses threads.
 */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <time.h>

#include <sluice/ccdefs.h>

struct sl_worker;

typedef void (*sl_worker_fn)(void *arg);
/* A timer callback returns true to run again after the same interval. */
typedef bool (*sl_timer_fn)(void *arg);

/* The worker running the calling thread, NULL outside workers. Any thread. */
SL_EXPORT struct sl_worker *sl_worker_current(void);
SL_EXPORT int sl_worker_count(void);
/* Worker by index 0..count-1. Any thread. */
SL_EXPORT struct sl_worker *sl_worker_get(int index);
SL_EXPORT int sl_worker_index(const struct sl_worker *w);

/*
 * Run fn(arg) on worker w's thread, soon. Any thread. 0 or -ENOMEM (then
 * fn is never called). Messages to one worker run in posting order.
 */
SL_EXPORT int sl_worker_post(struct sl_worker *w, sl_worker_fn fn, void *arg);
/* Post to every worker; fn runs once on each. 0 or the first error. */
SL_EXPORT int sl_worker_broadcast(sl_worker_fn fn, void *arg);

/*
 * Call fn(arg) on the current worker after ms milliseconds, repeating while
 * it returns true. Worker-owned. Returns a non-zero id or 0 on failure.
 */
SL_EXPORT uint64_t sl_worker_add_timer(uint64_t ms, sl_timer_fn fn,
                                       void *arg);
/* Cancel a timer of the current worker; no-op if it already ended. */
SL_EXPORT void sl_worker_cancel_timer(uint64_t id);

/*
 * True in event_model=shared. A plain worker timer there runs on the
 * worker that added it, without the lock of any session, while another
 * worker may handle (and free) the session: a timer that touches session
 * state must be a session timer (sl_session_add_timer, session.h). Any
 * thread.
 */
SL_EXPORT bool sl_worker_shared_model(void);

/* Monotonic clock in milliseconds, cached once per loop turn. */
SL_EXPORT uint64_t sl_worker_now_ms(void);

/*
 * The monotonic clock (CLOCK_MONOTONIC) now, not cached: microseconds and
 * milliseconds. Any thread; for the data path prefer sl_worker_now_ms().
 */
static inline uint64_t
sl_monotonic_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline uint64_t
sl_monotonic_ms(void)
{
    return sl_monotonic_us() / 1000u;
}

#endif
