/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Query digests: per (canonical statement, user, database, service), how
 * often it ran, its errors, rows sent, first/last seen and response times
 * (sum, min, max, a histogram for percentiles).
 *
 * Each worker has its own table (a chained hash on the key plus an LRU
 * list), touched only on that worker: no lock. A table holds at most
 * digest_max_entries entries; a new digest beyond that evicts the least
 * recently seen one and counts the eviction. The admin thread reads by
 * posting a copy job to every worker (sl__stats_on_workers) and merging
 * the copies by key; DELETE empties every table the same way.
 *
 * An entry taken when a command arrives is remembered by the session with
 * its generation; its answer is recorded only if the entry was not evicted
 * and reused in between and the same worker handles the answer (always in
 * the pinned event model; in the shared model a session's answer can reach
 * another worker, and that sample is counted as dropped instead).
 *
 * Context: the take/done hooks on workers; snapshot/reset on the admin
 * thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "digest"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/reply.h>
#include <sluice/worker.h>

#include "dcb_int.h"
#include "internal.h"
#include "stats.h"

#define MAX_WORKERS 256
#define COLLECT_TIMEOUT_MS 2000

struct dg_entry {
    struct dg_entry *hnext;
    struct dg_entry *prev, *next;    /* LRU: head most recent */
    uint64_t key;
    size_t total;                    /* length of the whole text */
    uint64_t gen;
    const struct sl_service *svc;
    struct sl_digest_row row;        /* text, names and counters */
};

struct dg_table {
    struct dg_entry **buckets;
    size_t nbuckets;                 /* power of two */
    size_t n;
    struct dg_entry *head, *tail;
    uint64_t evictions;
    uint64_t dropped;
    uint64_t untracked;              /* executes of statements not kept */
    uint64_t next_gen;
    struct dg_entry *free_list;      /* emptied by a reset (hnext) */
    int64_t wall_offset_ms;          /* unix time minus the monotonic */
};

/* Worker-owned: tables[i] is touched by worker i only. */
static struct dg_table *tables[MAX_WORKERS];

static uint64_t
mix(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    }
    return (h ^ 0xff) * 0x100000001b3ULL;   /* separator */
}

static uint64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Unix time in ms from the worker's turn clock (no clock read per
 * statement); the offset is taken when the table is made, so a step of
 * the wall clock afterwards is not followed (seen times are for people). */
static uint64_t
now_ms(const struct dg_table *t)
{
    return (uint64_t)((int64_t)sl_worker_now_ms() + t->wall_offset_ms);
}

static struct dg_table *
table_of(int w)
{
    struct dg_table *t;
    size_t nb = 16;

    if (w < 0 || w >= MAX_WORKERS) {
        return NULL;
    }
    if (tables[w] != NULL) {
        return tables[w];
    }
    while (nb < 2 * sl__stats_cfg.max_entries && nb < (1u << 20)) {
        nb *= 2;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL || (t->buckets = calloc(nb, sizeof(*t->buckets))) == NULL) {
        free(t);
        return NULL;
    }
    t->nbuckets = nb;
    t->next_gen = 1;
    t->wall_offset_ms = (int64_t)wall_ms() - (int64_t)sl_monotonic_ms();
    tables[w] = t;
    return t;
}

static void
lru_unlink(struct dg_table *t, struct dg_entry *e)
{
    if (e->prev) {
        e->prev->next = e->next;
    } else {
        t->head = e->next;
    }
    if (e->next) {
        e->next->prev = e->prev;
    } else {
        t->tail = e->prev;
    }
    e->prev = e->next = NULL;
}

static void
lru_push(struct dg_table *t, struct dg_entry *e)
{
    e->prev = NULL;
    e->next = t->head;
    if (t->head) {
        t->head->prev = e;
    } else {
        t->tail = e;
    }
    t->head = e;
}

static void
hash_unlink(struct dg_table *t, struct dg_entry *e)
{
    struct dg_entry **pp = &t->buckets[e->key & (t->nbuckets - 1)];

    while (*pp != NULL && *pp != e) {
        pp = &(*pp)->hnext;
    }
    if (*pp == e) {
        *pp = e->hnext;
    }
}

void *
sl__digest_take(struct sl_session *ses, int worker, uint64_t h,
                size_t total, const char *text, const char *sql,
                size_t sqllen, uint64_t *gen)
{
    struct dg_table *t = table_of(worker);
    uint64_t key;
    struct dg_entry *e;
    struct dg_entry **bp;

    if (t == NULL || sl__stats_cfg.max_entries == 0) {
        return NULL;
    }
    if (!ses->stats.seed_ok) {
        ses->stats.seed = mix(mix(mix(0xcbf29ce484222325ULL, ses->user),
                                  ses->db), ses->service->name);
        ses->stats.seed_ok = true;
    }
    /* the text's hash and the names': an odd multiply keeps both in the
     * low bits the buckets use */
    key = (h ^ ses->stats.seed) * 0x9e3779b97f4a7c15ULL;
    key ^= key >> 29;
    bp = &t->buckets[key & (t->nbuckets - 1)];
    /* By the text's 64-bit hash and length, not the text: the data path
     * then never writes or compares the text of a known digest (docs/
     * design.md, "Metrics and query digests"); names compared exactly. */
    for (e = *bp; e != NULL; e = e->hnext) {
        if (e->key == key && e->total == total && e->svc == ses->service &&
            strcmp(e->row.user, ses->user) == 0 &&
            strcmp(e->row.db, ses->db) == 0) {
            break;
        }
    }
    if (e == NULL) {
        if (t->n >= sl__stats_cfg.max_entries) {
            e = t->tail;                 /* least recently seen: reuse */
            lru_unlink(t, e);
            hash_unlink(t, e);
            t->evictions++;
        } else if (t->free_list != NULL) {
            e = t->free_list;
            t->free_list = e->hnext;
            t->n++;
        } else if ((e = malloc(sizeof(*e))) == NULL) {
            return NULL;
        } else {
            t->n++;
        }
        memset(e, 0, sizeof(*e));
        e->key = key;
        e->total = total;
        e->gen = t->next_gen++;
        e->svc = ses->service;
        if (text != NULL) {
            snprintf(e->row.text, sizeof(e->row.text), "%s", text);
        } else {     /* a new digest: now its text, once */
            uint64_t h2;

            sl__qc_canonical(sql, sqllen, e->row.text, sizeof(e->row.text),
                             &h2, NULL);
        }
        snprintf(e->row.user, sizeof(e->row.user), "%s", ses->user);
        snprintf(e->row.db, sizeof(e->row.db), "%s", ses->db);
        snprintf(e->row.service, sizeof(e->row.service), "%s",
                 ses->service->name);
        e->row.key = key;
        e->row.first_seen_ms = now_ms(t);
        e->hnext = *bp;
        *bp = e;
        lru_push(t, e);
    } else if (t->head != e) {
        lru_unlink(t, e);
        lru_push(t, e);
    }
    e->row.count++;
    e->row.last_seen_ms = now_ms(t);
    *gen = e->gen;
    return e;
}

/* The entry ref remembers, counted as seen, when it is still the digest
 * (same generation: not evicted, reused or reset) on this worker's table
 * for the same user and database; NULL otherwise. */
static struct dg_entry *
take_ref(struct sl_session *ses, int worker, const struct sl_digest_ref *ref,
         uint64_t *gen)
{
    struct dg_entry *e = ref->entry;
    struct dg_table *t;

    if (e == NULL || ref->worker != worker || e->gen != ref->gen ||
        !ses->stats.seed_ok || ref->seed != ses->stats.seed ||
        (t = tables[worker]) == NULL) {
        return NULL;
    }
    if (t->head != e) {
        lru_unlink(t, e);
        lru_push(t, e);
    }
    e->row.count++;
    e->row.last_seen_ms = now_ms(t);
    *gen = ref->gen;
    return e;
}

static void
ref_set(struct sl_session *ses, int worker, struct sl_digest_ref *ref,
        void *e, uint64_t gen)
{
    ref->entry = e;
    ref->worker = worker;
    ref->gen = e != NULL ? gen : 0;
    ref->seed = ses->stats.seed;
}

void *
sl__digest_take_ps(struct sl_session *ses, int worker,
                   struct sl_ps_digest *p, uint64_t *gen)
{
    void *e = take_ref(ses, worker, &p->ref, gen);

    if (e == NULL) {
        e = sl__digest_take(ses, worker, p->ref.hash, p->ref.total, p->text,
                            NULL, 0, gen);
        ref_set(ses, worker, &p->ref, e, *gen);
    }
    return e;
}

void *
sl__digest_take_last(struct sl_session *ses, int worker, uint64_t h,
                     size_t total, const char *sql, size_t sqllen,
                     uint64_t *gen)
{
    struct sl_ses_stats *st = &ses->stats;
    struct sl_digest_ref *ref = NULL;
    void *e;

    for (unsigned i = 0; i < SL_DIGEST_LAST; i++) {
        if (st->last[i].hash == h && st->last[i].total == total) {
            ref = &st->last[i];
            if ((e = take_ref(ses, worker, ref, gen)) != NULL) {
                return e;
            }
            break;   /* stale (evicted, reset, another worker): renewed */
        }
    }
    if (ref == NULL) {
        ref = &st->last[st->last_next];
        st->last_next = (uint8_t)((st->last_next + 1) % SL_DIGEST_LAST);
    }
    e = sl__digest_take(ses, worker, h, total, NULL, sql, sqllen, gen);
    ref_set(ses, worker, ref, e, *gen);
    ref->hash = h;
    ref->total = total;
    return e;
}

void
sl__digest_untracked(int worker)
{
    struct dg_table *t = table_of(worker);

    if (t != NULL) {
        t->untracked++;
    }
}

void
sl__digest_done(void *entry, uint64_t gen, int worker, uint64_t ns,
                const struct sl_reply *reply)
{
    struct sl_worker *w = sl_worker_current();
    struct dg_entry *e = entry;
    struct sl_digest_row *r;

    if (w == NULL || sl_worker_index(w) != worker) {
        if (w != NULL && tables[sl_worker_index(w)] != NULL) {
            tables[sl_worker_index(w)]->dropped++;
        }
        return;
    }
    if (e->gen != gen) {
        tables[worker]->dropped++;   /* evicted and reused meanwhile */
        return;
    }
    r = &e->row;
    r->samples++;
    r->sum_ns += ns;
    if (r->min_ns == 0 || ns < r->min_ns) {
        r->min_ns = ns;
    }
    if (ns > r->max_ns) {
        r->max_ns = ns;
    }
    r->hist[sl__hist_bucket(ns)]++;
    if (reply == NULL || reply->is_err) {
        r->errors++;
    } else {
        r->rows += reply->rows;
    }
}

/* ---- the admin side ---- */

struct copy_job {
    struct {
        struct sl_digest_row *rows;
        size_t n;
        uint64_t evictions;
        uint64_t dropped;
        uint64_t untracked;
    } w[MAX_WORKERS];
};

static void
copy_job_free(void *p)
{
    struct copy_job *j = p;

    for (int i = 0; i < MAX_WORKERS; i++) {
        free(j->w[i].rows);
    }
    free(j);
}

static void
copy_on_worker(void *arg, int w)
{
    struct copy_job *j = arg;
    struct dg_table *t = w >= 0 && w < MAX_WORKERS ? tables[w] : NULL;
    size_t i = 0;

    if (t == NULL) {
        return;
    }
    j->w[w].evictions = t->evictions;
    j->w[w].dropped = t->dropped;
    j->w[w].untracked = t->untracked;
    j->w[w].rows = malloc((t->n ? t->n : 1) * sizeof(struct sl_digest_row));
    if (j->w[w].rows == NULL) {
        return;
    }
    for (struct dg_entry *e = t->head; e != NULL; e = e->next) {
        j->w[w].rows[i++] = e->row;
    }
    j->w[w].n = i;
}

static int
row_key_cmp(const void *a, const void *b)
{
    const struct sl_digest_row *x = a, *y = b;
    int c = x->key < y->key ? -1 : x->key > y->key;

    if (c == 0) {
        c = strcmp(x->service, y->service);
    }
    if (c == 0) {
        c = strcmp(x->user, y->user);
    }
    if (c == 0) {
        c = strcmp(x->db, y->db);
    }
    return c == 0 ? strcmp(x->text, y->text) : c;
}

static void
merge_row(struct sl_digest_row *into, const struct sl_digest_row *r)
{
    into->count += r->count;
    into->errors += r->errors;
    into->rows += r->rows;
    into->samples += r->samples;
    into->sum_ns += r->sum_ns;
    if (r->min_ns && (into->min_ns == 0 || r->min_ns < into->min_ns)) {
        into->min_ns = r->min_ns;
    }
    if (r->max_ns > into->max_ns) {
        into->max_ns = r->max_ns;
    }
    if (r->first_seen_ms < into->first_seen_ms) {
        into->first_seen_ms = r->first_seen_ms;
    }
    if (r->last_seen_ms > into->last_seen_ms) {
        into->last_seen_ms = r->last_seen_ms;
    }
    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        into->hist[b] += r->hist[b];
    }
}

int
sl__digest_snapshot(struct sl_digest_snapshot *out)
{
    struct copy_job *j = calloc(1, sizeof(*j));
    size_t total = 0;
    size_t k = 0;
    struct sl_digest_row *all;

    memset(out, 0, sizeof(*out));
    if (j == NULL) {
        return -1;
    }
    if (sl__stats_on_workers(copy_on_worker, j, copy_job_free,
                             COLLECT_TIMEOUT_MS) < 0) {
        return -1;
    }
    for (int i = 0; i < MAX_WORKERS; i++) {
        total += j->w[i].n;
        out->evictions += j->w[i].evictions;
        out->dropped += j->w[i].dropped;
        out->untracked += j->w[i].untracked;
    }
    out->entries = total;
    all = malloc((total ? total : 1) * sizeof(*all));
    if (all == NULL) {
        copy_job_free(j);
        return -1;
    }
    for (int i = 0; i < MAX_WORKERS; i++) {
        if (j->w[i].n > 0) {
            memcpy(all + k, j->w[i].rows, j->w[i].n * sizeof(*all));
            k += j->w[i].n;
        }
    }
    copy_job_free(j);
    qsort(all, total, sizeof(*all), row_key_cmp);
    k = 0;
    for (size_t i = 0; i < total; i++) {
        if (k > 0 && row_key_cmp(&all[k - 1], &all[i]) == 0) {
            merge_row(&all[k - 1], &all[i]);
        } else {
            if (k != i) {
                all[k] = all[i];
            }
            k++;
        }
    }
    out->rows = all;
    out->n = k;
    return 0;
}

void
sl__digest_snapshot_free(struct sl_digest_snapshot *s)
{
    free(s->rows);
    s->rows = NULL;
    s->n = 0;
}

/* Entries go to the free list, not free(): sessions may still hold a
 * pointer to one (a command in flight); its generation changes, so that
 * answer is dropped. */
static void
reset_on_worker(void *arg, int w)
{
    struct dg_table *t = w >= 0 && w < MAX_WORKERS ? tables[w] : NULL;
    struct dg_entry *e;
    struct dg_entry *next;

    (void)arg;
    if (t == NULL) {
        return;
    }
    for (e = t->head; e != NULL; e = next) {
        next = e->next;
        e->gen = t->next_gen++;
        e->hnext = t->free_list;
        t->free_list = e;
    }
    memset(t->buckets, 0, t->nbuckets * sizeof(*t->buckets));
    t->head = t->tail = NULL;
    t->n = 0;
    t->evictions = 0;
    t->dropped = 0;
    t->untracked = 0;
}

int
sl__digest_reset(void)
{
    return sl__stats_on_workers(reset_on_worker, NULL, NULL,
                                COLLECT_TIMEOUT_MS);
}
