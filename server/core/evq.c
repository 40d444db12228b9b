/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Event queue (see evq.h for the state machine).
 *
 * Ordering argument for the lock-free state word: notify() ORs the events
 * in before it reads the state; the processor publishes PROCESSING before
 * it takes the events. So an event is either taken by the running turn or
 * seen as arriving during it (PENDING) and re-queued; it is never lost.
 */
#include "evq.h"

size_t sl__evq_read_budget = SL_EVQ_DEFAULT_BUDGET;

void
sl__evq_init(struct sl_evq *q, bool shared)
{
    q->head = q->tail = NULL;
    q->count = 0;
    q->shared = shared;
    if (shared) {
        pthread_mutex_init(&q->lock, NULL);
    }
}

void
sl__evq_destroy(struct sl_evq *q)
{
    if (q->shared) {
        pthread_mutex_destroy(&q->lock);
    }
    q->head = q->tail = NULL;
    q->count = 0;
}

static void
push_tail(struct sl_evq *q, struct sl_evq_item *it)
{
    it->next = NULL;
    if (q->shared) {
        pthread_mutex_lock(&q->lock);
    }
    if (q->tail != NULL) {
        q->tail->next = it;
    } else {
        q->head = it;
    }
    q->tail = it;
    __atomic_store_n(&q->count, q->count + 1, __ATOMIC_RELAXED);
    if (q->shared) {
        pthread_mutex_unlock(&q->lock);
    }
}

static struct sl_evq_item *
pop_head(struct sl_evq *q)
{
    struct sl_evq_item *it;

    if (q->shared) {
        pthread_mutex_lock(&q->lock);
    }
    it = q->head;
    if (it != NULL) {
        q->head = it->next;
        if (q->head == NULL) {
            q->tail = NULL;
        }
        __atomic_store_n(&q->count, q->count - 1, __ATOMIC_RELAXED);
        it->next = NULL;
    }
    if (q->shared) {
        pthread_mutex_unlock(&q->lock);
    }
    return it;
}

void
sl__evq_notify(struct sl_evq *q, struct sl_evq_item *it, uint32_t events)
{
    int s;

    atomic_fetch_or(&it->events, events);
    s = atomic_load(&it->state);
    for (;;) {
        switch (s) {
        case SL_EVQ_IDLE:
            if (atomic_compare_exchange_weak(&it->state, &s,
                                             SL_EVQ_QUEUED)) {
                push_tail(q, it);
                return;
            }
            break;
        case SL_EVQ_PROCESSING:
            if (atomic_compare_exchange_weak(&it->state, &s,
                                             SL_EVQ_PENDING)) {
                return;
            }
            break;
        default:   /* QUEUED or PENDING: the events wait in it->events */
            return;
        }
    }
}

/* End of a turn: back to IDLE, or to the tail when work is left or an
 * event arrived during the turn. */
static void
finish_turn(struct sl_evq *q, struct sl_evq_item *it, uint32_t left)
{
    int s = SL_EVQ_PROCESSING;

    if (left != 0) {
        atomic_fetch_or(&it->events, left);
    } else if (atomic_compare_exchange_strong(&it->state, &s, SL_EVQ_IDLE)) {
        return;
    }
    atomic_store(&it->state, SL_EVQ_QUEUED);
    push_tail(q, it);
}

bool
sl__evq_process_one(struct sl_evq *q)
{
    struct sl_evq_item *it = pop_head(q);
    uint32_t events;

    if (it == NULL) {
        return false;
    }
    atomic_store(&it->state, SL_EVQ_PROCESSING);
    events = atomic_exchange(&it->events, 0);
    finish_turn(q, it, it->handler(it, events));
    return true;
}

/* The items queued now; without the lock in the shared model: a moment's
 * figure, as the callers use it (how much to process this turn, whether
 * to wake another worker, a statistic). */
size_t
sl__evq_count(struct sl_evq *q)
{
    return __atomic_load_n(&q->count, __ATOMIC_RELAXED);
}

size_t
sl__evq_process(struct sl_evq *q, size_t max)
{
    size_t n = sl__evq_count(q);
    size_t done = 0;

    /* Only what was queued when we started: re-queued items wait for the
     * next loop turn, so polling runs between two turns of a busy item. */
    if (n > max) {
        n = max;
    }
    while (done < n && sl__evq_process_one(q)) {
        done++;
    }
    return done;
}
