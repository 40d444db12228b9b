/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Response-time histograms per server and per service, and the per-session
 * bookkeeping that times each client command (stats.h).
 *
 *   client command -> sl__stats_query: pushed on the session's FIFO with
 *                     its start time (and its digest entry, COM_QUERY)
 *   answer to the client, complete -> sl__stats_client_reply: popped,
 *                     timed into the service's histogram and the digest
 *   command to a backend -> sl__stats_backend_write: start time kept on
 *                     the backend when none is running
 *   its answer, complete -> sl__stats_backend_reply: timed into the
 *                     server's histogram
 *
 * A service's time is what the client waits (filters, routing and the
 * server included); a server's is from the write to the backend to the
 * end of its answer. Commands with no answer (COM_STMT_CLOSE,
 * COM_STMT_SEND_LONG_DATA, COM_QUIT) and the file packets of LOAD DATA
 * LOCAL are not timed. Internal sessions (tee) are not timed at the
 * service level (their parent is).
 *
 * Context: hooks on workers; readers on the admin thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "stats"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>
#include <sluice/reply.h>
#include <sluice/router.h>
#include <sluice/worker.h>

#include "dcb_int.h"
#include "internal.h"
#include "stats.h"

uint64_t
sl__stats_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * The clock reading of the hook that began the current call chain on this
 * thread: a command entering a session (sl__stats_query; the chain ends
 * when sl_session_route_query returns) or a backend's complete answer
 * (sl__stats_backend_reply; until sl_backend_reply returns). A backend
 * write or an answer to the client inside the chain is the same instant
 * to well under a microsecond, and reuses it instead of reading the
 * clock again: two clock reads per routed statement instead of four.
 * 0 outside a chain.
 */
__thread uint64_t sl__stats_chain_ns;
#define chain_ns sl__stats_chain_ns

static inline uint64_t
chain_now(void)
{
    return chain_ns != 0 ? chain_ns : sl__stats_now_ns();
}

/* Relaxed single-writer increment: a plain load, add and store. */
#define BUMP(field, by)                                                   \
    __atomic_store_n(&(field),                                            \
                     __atomic_load_n(&(field), __ATOMIC_RELAXED) + (by),  \
                     __ATOMIC_RELAXED)

static void
hist_add(struct sl_hist *h, uint64_t ns)
{
    BUMP(h->count, 1);
    BUMP(h->sum_ns, ns);
    BUMP(h->bucket[sl__hist_bucket(ns)], 1);
}

/* The calling worker's slot of an object, allocated on first use. */
static struct sl_obj_stats *
obj_slot(struct sl_obj_slots **slotsp, int w)
{
    struct sl_obj_slots *s = __atomic_load_n(slotsp, __ATOMIC_ACQUIRE);

    if (s == NULL) {
        int n = sl_worker_count();
        struct sl_obj_slots *mine;

        if (posix_memalign((void **)&mine, 64, sizeof(*mine) +
                           (size_t)n * sizeof(mine->slot[0])) != 0) {
            return NULL;
        }
        memset(mine, 0, sizeof(*mine) + (size_t)n * sizeof(mine->slot[0]));
        mine->n = n;
        if (!__atomic_compare_exchange_n(slotsp, &s, mine, false,
                                         __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE)) {
            free(mine);   /* another worker was first: s is its array */
        } else {
            s = mine;
        }
    }
    return w < s->n ? &s->slot[w] : NULL;
}

static void
obj_record(struct sl_obj_slots **slotsp, uint64_t ns, bool err)
{
    struct sl_worker *w = sl_worker_current();
    struct sl_obj_stats *o;

    if (w == NULL || (o = obj_slot(slotsp, sl_worker_index(w))) == NULL) {
        return;
    }
    hist_add(&o->lat, ns);
    if (err) {
        BUMP(o->errors, 1);
    }
}

void
sl__stats_obj_add(struct sl_obj_slots **slotsp, const struct sl_hist *h)
{
    struct sl_worker *w = sl_worker_current();
    struct sl_obj_stats *o;

    if (w == NULL || (o = obj_slot(slotsp, sl_worker_index(w))) == NULL) {
        return;
    }
    BUMP(o->lat.count, h->count);
    BUMP(o->lat.sum_ns, h->sum_ns);
    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        if (h->bucket[b] != 0) {
            BUMP(o->lat.bucket[b], h->bucket[b]);
        }
    }
}

void
sl__stats_obj_read(struct sl_obj_slots *const *slotsp, struct sl_hist *out,
                   uint64_t *errors)
{
    const struct sl_obj_slots *s = __atomic_load_n(slotsp, __ATOMIC_ACQUIRE);

    memset(out, 0, sizeof(*out));
    *errors = 0;
    for (int i = 0; s != NULL && i < s->n; i++) {
        const struct sl_obj_stats *o = &s->slot[i];

        out->count += __atomic_load_n(&o->lat.count, __ATOMIC_RELAXED);
        out->sum_ns += __atomic_load_n(&o->lat.sum_ns, __ATOMIC_RELAXED);
        for (int b = 0; b < SL_HIST_BUCKETS; b++) {
            out->bucket[b] += __atomic_load_n(&o->lat.bucket[b],
                                              __ATOMIC_RELAXED);
        }
        *errors += __atomic_load_n(&o->errors, __ATOMIC_RELAXED);
    }
}

void
sl__stats_server_bytes(struct sl_server *srv, uint64_t in, uint64_t out)
{
    struct sl_worker *w = sl_worker_current();
    struct sl_obj_stats *o;

    if (w == NULL || (o = obj_slot(&srv->stats, sl_worker_index(w))) == NULL) {
        return;
    }
    if (in != 0) {
        BUMP(o->bytes_in, in);
    }
    if (out != 0) {
        BUMP(o->bytes_out, out);
    }
}

void
sl__stats_obj_bytes(struct sl_obj_slots *const *slotsp, uint64_t *in,
                    uint64_t *out)
{
    const struct sl_obj_slots *s = __atomic_load_n(slotsp, __ATOMIC_ACQUIRE);

    *in = 0;
    *out = 0;
    for (int i = 0; s != NULL && i < s->n; i++) {
        *in += __atomic_load_n(&s->slot[i].bytes_in, __ATOMIC_RELAXED);
        *out += __atomic_load_n(&s->slot[i].bytes_out, __ATOMIC_RELAXED);
    }
}

const char *const sl__stats_q_names[SL_STATS_Q_KINDS] = {
    "read", "write", "session", "other"};

int
sl__stats_query_kind(uint32_t t)
{
    if (t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_CALL | SL_QC_LOAD_LOCAL |
             SL_QC_GSYSVAR_WRITE | SL_QC_UNKNOWN)) {
        return SL_STATS_Q_WRITE;
    }
    if (t & (SL_QC_SESSION_WRITE | SL_QC_USERVAR_WRITE | SL_QC_BEGIN_TRX |
             SL_QC_COMMIT | SL_QC_ROLLBACK | SL_QC_ENABLE_AUTOCOMMIT |
             SL_QC_DISABLE_AUTOCOMMIT | SL_QC_PREPARE_NAMED |
             SL_QC_DEALLOC_PREPARE)) {
        return SL_STATS_Q_SESSION;
    }
    if (t & (SL_QC_READ | SL_QC_SHOW | SL_QC_SYSVAR_READ |
             SL_QC_USERVAR_READ | SL_QC_MASTER_READ)) {
        return SL_STATS_Q_READ;
    }
    return SL_STATS_Q_OTHER;
}

void
sl_session_count_query(struct sl_session *ses, uint32_t qc_type)
{
    struct sl_worker *w = sl_worker_current();
    struct sl_obj_stats *o;

    if (ses == NULL || ses->service == NULL || w == NULL ||
        (o = obj_slot(&ses->service->stats, sl_worker_index(w))) == NULL) {
        return;
    }
    BUMP(o->queries[sl__stats_query_kind(qc_type)], 1);
}

void
sl__stats_obj_queries(struct sl_obj_slots *const *slotsp,
                      uint64_t out[SL_STATS_Q_KINDS])
{
    const struct sl_obj_slots *s = __atomic_load_n(slotsp, __ATOMIC_ACQUIRE);

    memset(out, 0, SL_STATS_Q_KINDS * sizeof(out[0]));
    for (int i = 0; s != NULL && i < s->n; i++) {
        for (int k = 0; k < SL_STATS_Q_KINDS; k++) {
            out[k] += __atomic_load_n(&s->slot[i].queries[k],
                                      __ATOMIC_RELAXED);
        }
    }
}

void
sl__stats_obj_free(struct sl_obj_slots *slots)
{
    free(slots);
}

double
sl__hist_quantile(const struct sl_hist *h, double q, uint64_t min_ns,
                  uint64_t max_ns)
{
    uint64_t total = 0;
    double rank;
    uint64_t seen = 0;

    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        total += h->bucket[b];
    }
    if (total == 0) {
        return 0.0;
    }
    rank = q * (double)total;
    for (int b = 0; b < SL_HIST_BUCKETS; b++) {
        uint64_t c = h->bucket[b];
        double lo, hi, v;

        if (c == 0 || (double)(seen + c) < rank) {
            seen += c;
            continue;
        }
        lo = b == 0 ? 0.0 : (double)sl__hist_le_ns[b - 1];
        hi = b == SL_HIST_BUCKETS - 1 ? (double)(max_ns ? max_ns : (uint64_t)lo * 2)
                                      : (double)sl__hist_le_ns[b];
        if (min_ns && lo < (double)min_ns) {
            lo = (double)min_ns;
        }
        if (max_ns && hi > (double)max_ns) {
            hi = (double)max_ns;
        }
        if (hi < lo) {
            hi = lo;
        }
        v = lo + (hi - lo) * ((rank - (double)seen) / (double)c);
        return v / 1e9;
    }
    return (double)max_ns / 1e9;
}

/* ---- hooks ---- */

static uint8_t
command_byte(const struct sl_buf *buf)
{
    size_t n;
    const unsigned char *head = sl_buf_head_data(buf, &n);
    unsigned char hdr[SL_MDB_HDR_LEN + 1];

    if (head != NULL && n > SL_MDB_HDR_LEN) {
        return head[SL_MDB_HDR_LEN];
    }
    if (sl_buf_copy_out(buf, 0, sizeof(hdr), hdr) < sizeof(hdr)) {
        return 0xff;
    }
    return hdr[4];
}

/* The statement id of a COM_STMT_* command (payload bytes 1..4). */
static uint32_t
command_stmt_id(const struct sl_buf *buf)
{
    unsigned char b[4] = {0xff, 0xff, 0xff, 0xff};

    sl_buf_copy_out(buf, SL_MDB_HDR_LEN + 1, 4, b);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

/* ---- the session's prepared statements ---- */

/* Index of id in st->ps, or where it would go (binary search: ids mostly
 * grow, but a server may reuse one, so no append-only shortcut). */
static uint32_t
ps_pos(const struct sl_ses_stats *st, uint32_t id, bool *found)
{
    uint32_t lo = 0, hi = st->nps;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (st->ps[mid]->id == id) {
            *found = true;
            return mid;
        }
        if (st->ps[mid]->id < id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

static void
ps_free(struct sl_ses_stats *st, struct sl_ps_digest *p)
{
    if (st->ps_last == p) {
        st->ps_last = NULL;
    }
    free(p);
}

bool
sl__stats_ps_add(struct sl_ses_stats *st, struct sl_ps_digest *p)
{
    bool found;
    uint32_t i = ps_pos(st, p->id, &found);

    if (found) {                 /* the id names another statement now */
        ps_free(st, st->ps[i]);
        st->ps[i] = p;
        st->ps_last = p;
        return true;
    }
    if (st->nps >= SL_STATS_PS_MAX) {
        ps_free(st, p);
        return false;
    }
    if (st->nps == st->cap_ps) {
        uint32_t cap = st->cap_ps ? st->cap_ps * 2 : 8;
        struct sl_ps_digest **v = realloc(st->ps, cap * sizeof(*v));

        if (v == NULL) {
            ps_free(st, p);
            return false;
        }
        st->ps = v;
        st->cap_ps = cap;
    }
    memmove(&st->ps[i + 1], &st->ps[i], (st->nps - i) * sizeof(*st->ps));
    st->ps[i] = p;
    st->nps++;
    st->ps_last = p;
    return true;
}

struct sl_ps_digest *
sl__stats_ps_find(struct sl_ses_stats *st, uint32_t id)
{
    bool found;
    uint32_t i;

    if (id == 0xffffffffu) {     /* MariaDB: the statement prepared last */
        return st->ps_last != NULL && st->ps_last->has_id ? st->ps_last
                                                           : NULL;
    }
    i = ps_pos(st, id, &found);
    return found ? st->ps[i] : NULL;
}

void
sl__stats_ps_close(struct sl_ses_stats *st, uint32_t id)
{
    bool found;
    uint32_t i = ps_pos(st, id, &found);

    if (found) {
        ps_free(st, st->ps[i]);
        memmove(&st->ps[i], &st->ps[i + 1],
                (st->nps - i - 1) * sizeof(*st->ps));
        st->nps--;
    }
}

void
sl__stats_ps_forget(struct sl_ses_stats *st)
{
    for (uint32_t i = 0; i < st->nps; i++) {
        ps_free(st, st->ps[i]);
    }
    st->nps = 0;
    for (unsigned k = 0; k < st->n; k++) {
        unsigned i = (st->head + k) % SL_STATS_PENDING;

        if (st->q[i].prep != NULL) {
            ps_free(st, st->q[i].prep);
            st->q[i].prep = NULL;
        }
    }
    st->ps_last = NULL;
}

void
sl__stats_session_free(struct sl_ses_stats *st)
{
    sl__stats_ps_forget(st);
    free(st->ps);
    st->ps = NULL;
    st->cap_ps = 0;
}

static bool
answered(uint8_t cmd)
{
    return cmd != SL_COM_STMT_CLOSE && cmd != SL_COM_STMT_SEND_LONG_DATA &&
           cmd != SL_COM_QUIT && cmd != 0xff;
}

/* The SQL of a COM_QUERY (its first 16 KiB), contiguous: in the buffer's
 * head or copied to tmp. */
static const char *
query_sql(const struct sl_buf *buf, char *tmp, size_t tmplen, size_t *len)
{
    size_t n;
    const unsigned char *head = sl_buf_head_data(buf, &n);
    size_t plen;

    if (head == NULL || n < SL_MDB_HDR_LEN + 1) {
        return NULL;
    }
    plen = head[0] | (size_t)head[1] << 8 | (size_t)head[2] << 16;
    if (plen == 0) {
        return NULL;
    }
    if (n >= SL_MDB_HDR_LEN + plen && plen - 1 <= tmplen) {
        *len = plen - 1;
        return (const char *)head + SL_MDB_HDR_LEN + 1;
    }
    *len = sl_buf_copy_out(buf, SL_MDB_HDR_LEN + 1,
                           plen - 1 < tmplen ? plen - 1 : tmplen, tmp);
    return tmp;
}

/* A COM_STMT_PREPARE with query_digests on: its canonical text and kind,
 * once, into a statement record its answer will key by id (NULL: no
 * memory). */
static struct sl_ps_digest *
prepare_digest(const struct sl_buf *buf)
{
    char tmp[16384];
    char text[sizeof(((struct sl_digest_row *)0)->text)];
    size_t len = 0;
    const char *sql = query_sql(buf, tmp, sizeof(tmp), &len);
    struct sl_ps_digest *p;
    uint64_t h;
    int kind;
    size_t n, total;

    if (sql == NULL) {
        return NULL;
    }
    n = sl__qc_canonical_len(sql, len, text, sizeof(text), &h, &kind,
                             &total);
    if ((p = malloc(sizeof(*p) + n + 1)) == NULL) {
        return NULL;
    }
    memset(p, 0, sizeof(*p));
    p->kind = (int8_t)kind;
    p->ref.worker = -1;
    p->ref.hash = h;
    p->ref.total = total;
    memcpy(p->text, text, n + 1);
    return p;
}

/* A COM_STMT_EXECUTE with query_digests on: the digest entry of its
 * statement (into *entry, *gen) and its kind counted for a router that
 * does not classify; no lexing, no copy: the statement's record has both.
 * An execute of a statement the session does not keep is counted as
 * untracked (the server answers an unknown id with an error). */
static void
execute_digest(struct sl_session *ses, const struct sl_buf *buf, int wi,
               bool timed, void **entry, uint64_t *gen)
{
    struct sl_ps_digest *p = sl__stats_ps_find(&ses->stats,
                                               command_stmt_id(buf));
    struct sl_obj_stats *o;

    if (p == NULL) {
        sl__digest_untracked(wi);
        return;
    }
    if (!(ses->service->router->capabilities & SL_RCAP_QUERY_KINDS) &&
        (o = obj_slot(&ses->service->stats, wi)) != NULL) {
        BUMP(o->queries[p->kind], 1);
    }
    if (timed) {
        *entry = sl__digest_take_ps(ses, wi, p, gen);
    }
}

/* A COM_QUERY with query_digests on: its digest entry (into *entry,
 * *gen) and its kind counted for a router that does not classify, from
 * one pass over the SQL: the fast one, which writes no text, when it
 * takes the statement (the entry is found by hash; only a new digest's
 * text is made), else the full one. */
static void
query_digest(struct sl_session *ses, const struct sl_buf *buf, int wi,
             bool timed, void **entry, uint64_t *gen)
{
    char tmp[16384];
    size_t len = 0;
    const char *sql = query_sql(buf, tmp, sizeof(tmp), &len);
    bool count = !(ses->service->router->capabilities & SL_RCAP_QUERY_KINDS);
    struct sl_obj_stats *o;
    uint64_t h;
    size_t total;
    int kind;

    if (sql == NULL || (!timed && !count)) {
        return;
    }
    if (sl__qc_canonical_fast(sql, len, &h, &total, count ? &kind : NULL)) {
        if (count && (o = obj_slot(&ses->service->stats, wi)) != NULL) {
            BUMP(o->queries[kind], 1);
        }
        if (timed) {
            *entry = sl__digest_take_last(ses, wi, h, total, sql, len, gen);
        }
    } else {
        char text[sizeof(((struct sl_digest_row *)0)->text)];

        sl__qc_canonical_len(sql, len, text, sizeof(text), &h,
                             count ? &kind : NULL, &total);
        if (count && (o = obj_slot(&ses->service->stats, wi)) != NULL) {
            BUMP(o->queries[kind], 1);
        }
        if (timed) {
            *entry = sl__digest_take(ses, wi, h, total, text, NULL, 0, gen);
        }
    }
}

void
sl__stats_query(struct sl_session *ses, const struct sl_buf *buf)
{
    struct sl_ses_stats *st = &ses->stats;
    struct sl_worker *w;
    uint8_t cmd;
    unsigned i;
    bool timed;

    if (ses->reply_fn != NULL || st->load_data || ses->service == NULL ||
        (!sl__stats_cfg.histograms && !sl__stats_cfg.digests)) {
        return;
    }
    cmd = command_byte(buf);
    if (cmd == SL_COM_STMT_CLOSE) {
        if (st->nps > 0) {
            sl__stats_ps_close(st, command_stmt_id(buf));
        }
        return;
    }
    if (cmd == SL_COM_RESET_CONNECTION || cmd == SL_COM_CHANGE_USER) {
        sl__stats_ps_forget(st);   /* the server drops them all */
    }
    if (!answered(cmd) || (w = sl_worker_current()) == NULL) {
        return;
    }
    timed = st->n < SL_STATS_PENDING;
    i = (st->head + st->n) % SL_STATS_PENDING;
    if (timed) {
        st->q[i].t0 = chain_ns = sl__stats_now_ns();
        st->q[i].entry = NULL;
        st->q[i].prep = NULL;
        st->q[i].worker = sl_worker_index(w);
    }
    if (sl__stats_cfg.digests) {
        if (cmd == SL_COM_QUERY) {
            query_digest(ses, buf, sl_worker_index(w), timed,
                         &st->q[i].entry, &st->q[i].gen);
        } else if (cmd == SL_COM_STMT_EXECUTE) {
            execute_digest(ses, buf, sl_worker_index(w), timed,
                           &st->q[i].entry, &st->q[i].gen);
        } else if (cmd == SL_COM_STMT_PREPARE && timed) {
            st->q[i].prep = prepare_digest(buf);
            if (st->q[i].prep != NULL) {
                st->ps_last = st->q[i].prep;   /* an execute's id -1 */
            }
        }
    }
    if (timed) {
        st->n++;
    }
}

static void
pop(struct sl_session *ses, const struct sl_reply *reply)
{
    struct sl_ses_stats *st = &ses->stats;
    uint64_t ns = chain_now() - st->q[st->head].t0;
    bool err = reply == NULL || reply->is_err;

    if (sl__stats_cfg.histograms && ses->service != NULL) {
        obj_record(&ses->service->stats, ns, err);
    }
    if (st->q[st->head].entry != NULL) {
        sl__digest_done(st->q[st->head].entry, st->q[st->head].gen,
                        st->q[st->head].worker, ns, reply);
    }
    if (st->q[st->head].prep != NULL) {
        struct sl_ps_digest *p = st->q[st->head].prep;

        st->q[st->head].prep = NULL;
        if (reply != NULL && !reply->is_err && p->has_id) {
            sl__stats_ps_add(st, p);
        } else {
            ps_free(st, p);      /* refused: the server keeps nothing */
        }
    }
    st->head = (uint8_t)((st->head + 1) % SL_STATS_PENDING);
    st->n--;
}

/* The first packet of a PREPARE's answer as the client gets it (after
 * readwritesplit put its own id in): an OK carries the statement id. */
static void
prepare_answer(struct sl_ps_digest *p, const struct sl_buf *buf)
{
    unsigned char hdr[SL_MDB_HDR_LEN + 5];

    if (buf != NULL &&
        sl_buf_copy_out(buf, 0, sizeof(hdr), hdr) == sizeof(hdr) &&
        hdr[SL_MDB_HDR_LEN] == 0x00) {
        p->id = (uint32_t)hdr[5] | (uint32_t)hdr[6] << 8 |
                (uint32_t)hdr[7] << 16 | (uint32_t)hdr[8] << 24;
        p->has_id = true;
    }
}

void
sl__stats_client_reply(struct sl_session *ses, const struct sl_buf *buf,
                       const struct sl_reply *reply)
{
    struct sl_ses_stats *st = &ses->stats;

    if (reply == NULL) {
        return;
    }
    if (st->n > 0 && st->q[st->head].prep != NULL &&
        !st->q[st->head].prep->has_id && reply->command ==
        SL_COM_STMT_PREPARE) {
        prepare_answer(st->q[st->head].prep, buf);
    }
    if (reply->state == SL_REPLY_LOAD_DATA && !reply->complete) {
        st->load_data = true;
        return;
    }
    if (!reply->complete) {
        return;
    }
    st->load_data = false;
    if (st->n > 0) {
        pop(ses, reply);
    }
}

void
sl__stats_client_error(struct sl_session *ses)
{
    if (ses->reply_fn == NULL && ses->stats.n > 0 &&
        ses->state == SL_SESSION_STARTED) {
        ses->stats.load_data = false;
        pop(ses, NULL);
    }
}

void
sl__stats_backend_write(struct sl_backend *b, const struct sl_buf *buf)
{
    if (sl__stats_cfg.histograms && b->t_sent == 0 &&
        answered(command_byte(buf))) {
        b->t_sent = chain_now();
    }
}

void
sl__stats_backend_reply(struct sl_backend *b, const struct sl_reply *reply)
{
    if (reply != NULL && reply->complete && b->t_sent != 0 &&
        b->server != NULL) {
        chain_ns = sl__stats_now_ns();
        obj_record(&b->server->stats, chain_ns - b->t_sent, reply->is_err);
        b->t_sent = 0;
    }
}
