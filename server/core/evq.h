/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event queue: separates polling from processing so that one busy
 * connection cannot starve the others.
 *
 * Polling calls sl__evq_notify() for each item with events; processing
 * pops the head and runs the item's handler, which does a bounded amount
 * of work (sl__evq_read_budget bytes) and returns the events it still has
 * work for. An item with work left goes to the TAIL; an event that arrives
 * while the item is being processed marks it PENDING and it is re-queued at
 * the tail when its turn ends. Per-item state (atomic):
 *
 *            notify                pop                  handler returns 0
 *   IDLE ------------> QUEUED ------------> PROCESSING ------------------> IDLE
 *                        ^                    |    ^ |
 *                        |        notify      |    | | handler returns
 *                        |                    v    | | events (work left)
 *                        |       PROCESSING+PENDING| |
 *                        +-----------(turn ends)---+-+  re-queued at tail
 *
 * Only the thread that moved an item to PROCESSING runs its handler, so no
 * item is ever processed by two threads at once.
 *
 * A queue is either private (pinned model: one thread notifies and
 * processes, no lock) or shared (any thread; the list is under a mutex that
 * is held only to link or unlink, never while a handler runs).
 *
 * The queue knows nothing about DCBs: unit tests drive it with fake items.
 */
#ifndef SLUICE_EVQ_H
#define SLUICE_EVQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <sluice/ccdefs.h>

enum sl_evq_state {
    SL_EVQ_IDLE = 0,
    SL_EVQ_QUEUED = 1,
    SL_EVQ_PROCESSING = 2,
    SL_EVQ_PENDING = 3,   /* processing, and an event arrived meanwhile */
};

struct sl_evq_item;

/* Do one budgeted turn of work for events; return the events that still
 * have work (0 when done). Runs on the processing thread. */
typedef uint32_t (*sl_evq_handler)(struct sl_evq_item *it, uint32_t events);

struct sl_evq_item {
    struct sl_evq_item *next;    /* queue link */
    atomic_int state;            /* enum sl_evq_state */
    atomic_uint events;          /* accumulated, not yet handled */
    sl_evq_handler handler;
};

struct sl_evq {
    struct sl_evq_item *head;
    struct sl_evq_item *tail;
    size_t count;                /* items linked */
    bool shared;
    pthread_mutex_t lock;        /* shared queues only */
};

/* Bytes a handler reads per turn before yielding. A variable (not a macro)
 * so tests can lower it. */
extern size_t sl__evq_read_budget;
#define SL_EVQ_DEFAULT_BUDGET (64u * 1024u)

void sl__evq_init(struct sl_evq *q, bool shared);
void sl__evq_destroy(struct sl_evq *q);
static inline void
sl__evq_item_init(struct sl_evq_item *it, sl_evq_handler handler)
{
    it->next = NULL;
    atomic_init(&it->state, SL_EVQ_IDLE);
    atomic_init(&it->events, 0);
    it->handler = handler;
}

/* Record events for it and queue it unless it is queued or being processed
 * (then it is marked PENDING). Private queue: its thread only; shared
 * queue: any thread. */
void sl__evq_notify(struct sl_evq *q, struct sl_evq_item *it,
                    uint32_t events);
/* Pop the head and run its handler once. false when the queue was empty. */
bool sl__evq_process_one(struct sl_evq *q);
/* Process at most max items (each at most once per call unless re-queued
 * items are reached again; re-queued items wait behind everything queued
 * before them). Returns the number processed. */
size_t sl__evq_process(struct sl_evq *q, size_t max);
/* Items linked right now (a hint for a shared queue). */
size_t sl__evq_count(struct sl_evq *q);

#endif
