/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the proxy sees, counted where it happens: response-time histograms
 * per server and per service, and query digests (stats.c, digest.c, and
 * what both use in stats_common.c). Read by the REST API
 * (admin_metrics.c, admin_queries.c) and /metrics.
 *
 * Everything is kept per worker and merged on read. A worker writes only
 * its own slot, with relaxed atomic loads and stores (plain moves on
 * x86-64, no lock prefix), so the hot path takes no lock and shares no
 * cache line with another worker; the admin thread reads the slots with
 * relaxed loads and adds them up. A sum read while workers count may be
 * a few events behind, never torn.
 *
 * Context: the record functions on workers only; the readers on the
 * libmicrohttpd thread; sl__stats_configure on main before the workers.
 */
#ifndef SLUICE_CORE_STATS_H
#define SLUICE_CORE_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_buf;
struct sl_reply;
struct sl_session;
struct sl_backend;
struct sl_global;
struct sl_server;

/* Fixed log-scale buckets (1-2.5-5 per decade) from 50 µs to 30 s, plus
 * +Inf: SL_HIST_BUCKETS counters, each counting the samples of its own
 * range (not cumulative; /metrics adds them up). */
#define SL_HIST_BUCKETS 21
extern const uint64_t sl__hist_le_ns[SL_HIST_BUCKETS - 1];
extern const char *const sl__hist_le_str[SL_HIST_BUCKETS - 1];

/* The bucket of a sample of ns nanoseconds (the last: +Inf). Inline: the
 * hot path of both stats.c and digest.c. */
static inline unsigned
sl__hist_bucket(uint64_t ns)
{
    unsigned i = 0;

    while (i < SL_HIST_BUCKETS - 1 && ns > sl__hist_le_ns[i]) {
        i++;
    }
    return i;
}

struct sl_hist {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t bucket[SL_HIST_BUCKETS];
};

/* One worker's counts for one server or service (a cache line apart). */
struct sl_obj_stats {
    _Alignas(64) struct sl_hist lat;   /* answers, by response time */
    uint64_t errors;                   /* answers that were ERR packets */
    uint64_t bytes_in;                 /* servers: read from its backends */
    uint64_t bytes_out;                /* servers: written to them */
    uint64_t queries[4];               /* services: by SL_STATS_Q_* */
};

/* Kinds of sl_session_count_query (order of the /metrics labels). */
enum { SL_STATS_Q_READ, SL_STATS_Q_WRITE, SL_STATS_Q_SESSION,
       SL_STATS_Q_OTHER, SL_STATS_Q_KINDS };
extern const char *const sl__stats_q_names[SL_STATS_Q_KINDS];
/* The kind of a classifier type (SL_QC_* bits). */
int sl__stats_query_kind(uint32_t qc_type);

/* Per-worker slots of one object, allocated on its first answer. */
struct sl_obj_slots {
    int n;                             /* workers when allocated */
    struct sl_obj_stats slot[];
};

/*
 * A statement the client prepared (COM_STMT_PREPARE), for the digests of
 * its executes: canonicalised once when prepared, its digest entry
 * remembered so that an execute on the same worker, user and database
 * counts into it without a lookup (digest.c checks the entry's
 * generation). Made when the PREPARE is sent, kept from its OK until
 * COM_STMT_CLOSE, COM_RESET_CONNECTION, COM_CHANGE_USER or the session's
 * end.
 */
/* A digest entry a session used, to count the same digest again without
 * a lookup while the entry is still that digest (digest.c checks). */
#define SL_DIGEST_LAST 4
struct sl_digest_ref {
    void *entry;              /* NULL: none */
    uint64_t gen;             /* entry's generation then */
    uint64_t seed;            /* the session's seed then (user, db) */
    uint64_t hash;            /* the canonical text's hash and length */
    size_t total;
    int worker;               /* the worker whose table has entry */
};

struct sl_ps_digest {
    uint32_t id;              /* the client's statement id */
    bool has_id;              /* id read from the PREPARE's answer */
    int8_t kind;              /* SL_STATS_Q_* of the statement */
    struct sl_digest_ref ref; /* where its executes counted last (hash and
                               * total: of text, as sl__qc_canonical
                               * gives them; text may be cut) */
    char text[];              /* canonical text, NUL-terminated */
};

/* At most this many prepared statements per session are remembered for
 * digests (the server's max_prepared_stmt_count bounds them first: only
 * a PREPARE the server answered with OK is kept); executes of others are
 * counted as untracked. */
#define SL_STATS_PS_MAX 1024

/* Per-session state: the commands waiting for their answer to the client
 * (a small FIFO; pipelined commands beyond it are not timed). */
#define SL_STATS_PENDING 8
struct sl_ses_stats {
    struct {
        uint64_t t0;          /* ns, monotonic */
        void *entry;          /* digest entry, NULL: none */
        uint64_t gen;         /* entry's generation when taken */
        int worker;           /* worker that took it */
        struct sl_ps_digest *prep;  /* a COM_STMT_PREPARE's statement,
                                     * owned here until its answer */
    } q[SL_STATS_PENDING];
    uint8_t head;
    uint8_t n;
    bool load_data;           /* LOAD DATA LOCAL: packets are not commands */
    bool seed_ok;             /* seed is the hash of user, db, service */
    uint64_t seed;            /* digest.c: hashed once, not per statement;
                               * sl_session_set_user/_db clear seed_ok */
    struct sl_ps_digest **ps; /* prepared statements, sorted by id */
    uint32_t nps, cap_ps;
    struct sl_ps_digest *ps_last;  /* the last one prepared (an execute's
                                    * id -1), in ps or pending */
    /* the digests of the last few text statements (applications tend to
     * cycle through a few: sysbench's four tables), reused round robin */
    struct sl_digest_ref last[SL_DIGEST_LAST];
    uint8_t last_next;
};

/* Configuration (main thread, before the workers start). */
struct sl_stats_config {
    bool histograms;          /* latency_histograms */
    bool digests;             /* query_digests */
    uint64_t max_entries;     /* digest_max_entries, per worker */
};
extern struct sl_stats_config sl__stats_cfg;
void sl__stats_configure(const struct sl_global *g);

uint64_t sl__stats_now_ns(void);

/* ---- hot-path hooks (session.c) ---- */
/* A command from the client enters the session's chain. */
void sl__stats_query(struct sl_session *ses, const struct sl_buf *buf);
/* An answer reaches the client (reply->complete ends the command). */
void sl__stats_client_reply(struct sl_session *ses, const struct sl_buf *buf,
                            const struct sl_reply *reply);
/* A command the client will not get an answer for from a backend (an
 * error Sluice made up): ends the oldest pending command as an error. */
void sl__stats_client_error(struct sl_session *ses);
/* The end of the call chain sl__stats_query or sl__stats_backend_reply
 * began (session.c, when sl_session_route_query or sl_backend_reply
 * returns): later hooks read the clock again. */
extern __thread uint64_t sl__stats_chain_ns;
static inline void
sl__stats_chain_end(void)
{
    sl__stats_chain_ns = 0;
}
/* A command goes to a backend / its answer is complete. */
void sl__stats_backend_write(struct sl_backend *b, const struct sl_buf *buf);
void sl__stats_backend_reply(struct sl_backend *b,
                             const struct sl_reply *reply);

/* The session's prepared statements (sl_ses_stats.ps), as stats.c keeps
 * them; exposed for the unit test and for other places that see
 * statements come and go. Workers only. */
/* Keep p (taken) under p->id, replacing a statement with that id. false
 * (p freed) when the session already keeps SL_STATS_PS_MAX. */
bool sl__stats_ps_add(struct sl_ses_stats *st, struct sl_ps_digest *p);
/* The statement with the client's id (0xffffffff: the last prepared),
 * NULL when not kept. */
struct sl_ps_digest *sl__stats_ps_find(struct sl_ses_stats *st,
                                       uint32_t id);
/* Forget one statement / all of them (and the pending PREPAREs' too). */
void sl__stats_ps_close(struct sl_ses_stats *st, uint32_t id);
void sl__stats_ps_forget(struct sl_ses_stats *st);
/* Everything a session's statistics hold (session_free). */
void sl__stats_session_free(struct sl_ses_stats *st);

/* Bytes read from / written to a backend connection of server srv (dcb.c,
 * after each read or write; counted whatever latency_histograms says).
 * Not the bytes kernel forwarding moves (splice.c counts those). */
void sl__stats_server_bytes(struct sl_server *srv, uint64_t in,
                            uint64_t out);

/* Add samples counted elsewhere (kernel forwarding's BPF histogram, in
 * the same buckets: splice.c) to an object's histogram, in the calling
 * worker's slot. */
void sl__stats_obj_add(struct sl_obj_slots **slotsp, const struct sl_hist *h);

/* ---- readers (admin thread) ---- */
/* The statements sl_session_count_query counted, by kind, all workers. */
void sl__stats_obj_queries(struct sl_obj_slots *const *slotsp,
                           uint64_t out[SL_STATS_Q_KINDS]);
/* The bytes sl__stats_server_bytes counted, all workers. */
void sl__stats_obj_bytes(struct sl_obj_slots *const *slotsp, uint64_t *in,
                         uint64_t *out);
/* The merged histogram and error count of an object's slots. */
void sl__stats_obj_read(struct sl_obj_slots *const *slotsp,
                        struct sl_hist *out, uint64_t *errors);
/* The q-quantile (0..1) of h in seconds, interpolated in its bucket and
 * clamped to [min, max] when those are known (max 0: unknown). */
double sl__hist_quantile(const struct sl_hist *h, double q, uint64_t min_ns,
                         uint64_t max_ns);
void sl__stats_obj_free(struct sl_obj_slots *slots);

/*
 * Run fn(arg) on every worker and wait (at most timeout_ms) until all
 * have: fn runs on the worker's thread, can read its worker-local data.
 * 0 (the caller owns arg again), or -1 when a worker could not be asked
 * or did not answer in time: the caller must not touch arg any more; it
 * is freed with arg_free after the last worker ran fn.
 */
int sl__stats_on_workers(void (*fn)(void *arg, int worker), void *arg,
                         void (*arg_free)(void *arg), int timeout_ms);

/* ---- digests (digest.c) ---- */
struct sl_digest_row {
    uint64_t key;             /* hash of text, user, db, service */
    char text[1024];
    char user[388];           /* sizes of the session's fields */
    char db[196];
    char service[128];
    uint64_t count, errors, rows, samples;
    uint64_t sum_ns, min_ns, max_ns;
    uint64_t first_seen_ms, last_seen_ms;  /* unix time */
    uint64_t hist[SL_HIST_BUCKETS];
};
struct sl_digest_snapshot {
    struct sl_digest_row *rows;
    size_t n;
    uint64_t evictions;       /* all workers, since start or reset */
    uint64_t entries;         /* before merging */
    uint64_t dropped;         /* latency samples not recorded */
    uint64_t untracked;       /* executes of statements not kept */
};
/* The merged table (rows with the same key summed). 0 or -1. */
int sl__digest_snapshot(struct sl_digest_snapshot *out);
void sl__digest_snapshot_free(struct sl_digest_snapshot *s);
/* Empty every worker's table. 0 or -1 (a worker did not answer). */
int sl__digest_reset(void);

/* The worker-local parts digest.c keeps (stats.c calls these). */
/* The entry of the canonical text whose hash is h and whole length total
 * for ses on worker (the calling one), counted as seen; NULL when digests
 * keep no entries. A new entry's text is text, or when NULL made from
 * sql (sqllen bytes) by sl__qc_canonical. */
void *sl__digest_take(struct sl_session *ses, int worker, uint64_t h,
                      size_t total, const char *text, const char *sql,
                      size_t sqllen, uint64_t *gen);
/* The same for an execute of prepared statement p: the entry p
 * remembers when still valid for this worker and the session's names
 * (no lookup), else looked up by p's text and remembered. */
void *sl__digest_take_ps(struct sl_session *ses, int worker,
                         struct sl_ps_digest *p, uint64_t *gen);
/* A text statement's: the session's last digest when h and total are
 * its (a statement repeated: no lookup), else sl__digest_take (text made
 * from sql when new) and remembered. */
void *sl__digest_take_last(struct sl_session *ses, int worker, uint64_t h,
                           size_t total, const char *sql, size_t sqllen,
                           uint64_t *gen);
/* An execute of a statement the session does not keep (counted). */
void sl__digest_untracked(int worker);
void sl__digest_done(void *entry, uint64_t gen, int worker, uint64_t ns,
                     const struct sl_reply *reply);

/* classifier.c: the canonical text of sql (literals as ?, IN lists of
 * literals as (...), comments dropped, one space between tokens) into
 * out (NUL-terminated, truncated to outlen-1); *hash covers all of it,
 * truncated or not. Its length. With kind: the statement's SL_STATS_Q_*
 * from the leading keyword of each ';'-separated statement (for routers
 * that do not classify; docs/metrics.md has the table), in the same pass. */
size_t sl__qc_canonical(const char *sql, size_t len, char *out,
                        size_t outlen, uint64_t *hash, int *kind);
/* The same, and *total: the length of the whole canonical text (written
 * to out or not; what the fast form gives). */
size_t sl__qc_canonical_len(const char *sql, size_t len, char *out,
                            size_t outlen, uint64_t *hash, int *kind,
                            size_t *total);
/* The data path's form: the hash, whole length and kind sl__qc_canonical
 * would give, without writing the text, for the statements made only of
 * words, numbers, strings, spaces and plain punctuation; false for any
 * other (comments, backticks, variables, ';', IN, introducers): run
 * sl__qc_canonical then. Equal results are checked by test_digest and
 * fuzz_classifier. */
bool sl__qc_canonical_fast(const char *sql, size_t len, uint64_t *hash,
                           size_t *total, int *kind);

#endif
