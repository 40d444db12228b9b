/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's internal types, shared by its source files:
 *   readwritesplit.c  module, parameters, instance, sessions, diagnostics
 *   rws_route.c       route_query: classification, transaction state,
 *                     hints, holds; rws_write and rws_route_to
 *   rws_target.c      which connection: primary, replica, named server
 *   rws_sescmd.c      session commands: history, its replay on new
 *                     connections, answers compared with the replier's
 *   rws_ps.c          prepared statements: our ids, COM_STMT_* routing,
 *                     PREPARE answers
 *   rws_gtid.c        causal_reads' own queries (GTID waits, @@last_gtid,
 *                     @@gtid_binlog_pos) and their answers
 *   rws_reply.c       client_reply: the answers' FIFO, the client's
 *                     answers, the safety net (lost track, reply_timeout)
 *   rws_error.c       handle_error: failed connections, read retries
 *   rws_trx.c         transaction_replay, and the timer of held commands
 *   rws_select.c      the replica choice (pure)
 *   rws_exec.c        COM_STMT_* rewriting: ids, parameter types (pure)
 *   rws_causal.c      causal_reads positions: the service's acknowledged
 *                     GTIDs, what each server is known to have applied
 *   rws_replay.c      transaction_replay's decisions (pure)
 * docs/design.md (## readwritesplit, "Source layout") has the calls
 * between them.
 *
 * Every backend connection has a FIFO of what its pending answers are for
 * (struct rws_expect): commands are pipelined, the server answers in
 * order, so the head of the FIFO says what to do with each answer.
 *
 * Context: everything on a session is worker-owned; the instance's
 * per-server counters are atomics read by the admin thread, its causal
 * positions atomics shared by all workers.
 */
#ifndef RWS_H
#define RWS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/buf-t.h>
#include <sluice/classifier.h>
#include <sluice/mariadb.h>
#include <sluice/reply.h>
#include <sluice/server.h>

#include "rws_select.h"

struct sl_service;
struct sl_session;
struct sl_backend;
struct sl_server;

#define RWS_ERR_CODE 1105
#define RWS_ERR_STATE "HY000"

/* transaction_replay_checksum: which answers of a transaction must be the
 * same when it is replayed (MaxScale's values). */
enum rws_checksum {
    RWS_CKS_FULL,          /* every answer, OK packets included */
    RWS_CKS_RESULT_ONLY,   /* result sets and errors; OK packets not */
    RWS_CKS_NO_INSERT_ID,  /* result_only, and results of statements
                            * that use LAST_INSERT_ID() not either */
};

enum rws_failure_mode {
    RWS_FAIL_INSTANTLY,
    RWS_FAIL_ON_WRITE,
    RWS_ERROR_ON_WRITE,
};

/* Where a read's required GTID comes from, and how a replica proves it
 * has it (see docs/modules.md, "causal_reads"). */
enum rws_causal {
    RWS_CAUSAL_NONE,
    RWS_CAUSAL_LOCAL,          /* session's last write; wait on replica */
    RWS_CAUSAL_RYW,            /* read_your_writes, fast: session's last
                                * write; a replica known to have it, else
                                * the primary; never waits */
    RWS_CAUSAL_GLOBAL,         /* service's acknowledged writes; wait */
    RWS_CAUSAL_FAST_GLOBAL,    /* service's; known replica, else primary */
    RWS_CAUSAL_UNIVERSAL,      /* primary's @@gtid_binlog_pos; wait */
    RWS_CAUSAL_FAST_UNIVERSAL, /* primary's; known replica, else primary */
    RWS_CAUSAL_CONSISTENT,     /* the default: service's; known replica,
                                * else a short wait, else the primary */
};

/* GTID domains tracked per service; a write in a further domain makes
 * the service-wide modes send reads to the primary (gtid_overflow). */
#define RWS_DOMAINS 8

/* A write's GTID could not be learnt: the service-wide modes send every
 * read to the primary for this long (the replicas will have applied the
 * write well before, unless they lag; lagging ones fail their waits). */
#define RWS_UNKNOWN_GTID_US 2000000u

/* A position: per domain slot (rws_instance.dom), the sequence number
 * (0: nothing required in that slot). */
struct rws_pos {
    uint64_t seq[RWS_DOMAINS];
};

struct rws_config {
    enum rws_criteria criteria;
    int64_t max_lag_s;            /* 0: no limit */
    bool master_accept_reads;
    unsigned max_slave_conns;     /* resolved from count or percent */
    unsigned initial_slaves;      /* slave_connections: opened at start */
    bool lazy_connect;
    enum rws_failure_mode failure_mode;
    bool retry_failed_reads;
    bool delayed_retry;
    uint64_t delayed_retry_ms;
    bool strict_multi_stmt;
    bool strict_sp_calls;
    bool vars_in_master;          /* use_sql_variables_in=master */
    enum rws_causal causal;
    int causal_index;             /* the value's spelling (diagnostics) */
    uint64_t causal_timeout_s;
    uint64_t causal_wait_ms;      /* causal_reads_wait: consistent's wait */
    bool trx_replay;
    uint64_t trx_replay_max;      /* bytes of statements kept */
    unsigned trx_replay_attempts;
    uint64_t trx_replay_timeout_ms; /* 0: only attempts count */
    bool retry_on_deadlock;       /* transaction_replay_retry_on_deadlock */
    bool retry_on_mismatch;       /* transaction_replay_retry_on_mismatch */
    bool safe_commit;             /* transaction_replay_safe_commit */
    enum rws_checksum checksum;   /* transaction_replay_checksum */
    bool master_reconnection;
    bool strict_tmp_tables;       /* no new primary while temp tables exist */
    bool optimistic;              /* optimistic_trx: BEGIN on a replica,
                                   * moved to the primary at a write */
    bool reuse_ps;                /* reuse_prepared_statements */
    unsigned max_history;
    bool prune_history;
    bool disable_history;
    uint64_t reply_timeout_ms;    /* 0: never; see rws_watch_start() */
};

/* Per-server state of one router instance shared by all its sessions:
 * read by the replica choice (LEAST_ROUTER_CONNECTIONS, ADAPTIVE_ROUTING)
 * and written on connect, disconnect and one answer in eight. A cache
 * line per server. */
struct rws_srv_stats {
    _Alignas(64) atomic_llong conns; /* this service's connections now */
    atomic_ullong resp_us;        /* moving average response time */
};

/*
 * The counters every routed command updates, per server and per worker
 * ("shard": worker index modulo RWS_SHARDS): a worker only writes its own
 * shard's cache lines, so two workers routing at once do not bounce a
 * shared line between their cores. Readers sum the shards. Updates stay
 * atomic: in event_model=shared a session's command and its answer may be
 * handled by different workers (a shard's `ops` can go below zero; the sum
 * is right), and workers beyond RWS_SHARDS share shards.
 */
struct rws_count {
    atomic_ullong ops;            /* commands awaiting an answer (the sum
                                   * read as int64_t) */
    atomic_ullong reads, writes, all;
    atomic_ullong causal_waits;   /* reads preceded by a GTID wait */
    atomic_ullong causal_known;   /* reads on a replica known to have the
                                   * position: no wait */
};

#define RWS_SHARDS 32

struct rws_instance {
    struct sl_service *svc;
    struct sl_server *const *servers;
    size_t nservers;
    struct rws_config cfg;
    struct rws_srv_stats *stats;  /* [nservers] */
    struct rws_count *counts;     /* [RWS_SHARDS][stride], see rws_count() */
    size_t stride;                /* nservers rounded up to whole lines */
    atomic_ullong sessions;
    atomic_ullong route_all;      /* session commands */
    atomic_ullong retried_reads, replayed_trx, causal_fallbacks;
    atomic_ullong optimistic_moves; /* optimistic_trx moved to the primary */
    atomic_ullong ps_reused;      /* PREPAREs answered from an earlier one */
    /* The replay barrier (rws_trx.c): sessions replaying after a primary
     * failure that have not yet taken their snapshot. Written only then;
     * read (relaxed) before each COMMIT and autocommit write. */
    _Alignas(64) atomic_uint replays_pending;

    /* Service-wide causal state (lock-free): dom[k] is the domain id + 1
     * owning slot k (claimed once by CAS, never released); acked[k] the
     * highest sequence number of a write acknowledged to a client of the
     * service; known[srv * RWS_DOMAINS + k] the highest one server srv
     * is known to have applied (its MASTER_GTID_WAIT answered 0, or the
     * monitor saw it). */
    _Alignas(64) atomic_ullong dom[RWS_DOMAINS];
    _Alignas(64) atomic_ullong acked[RWS_DOMAINS];
    atomic_ullong *known;         /* [nservers * RWS_DOMAINS] */
    atomic_bool gtid_overflow;    /* more domains than slots */
    atomic_llong unpublished;     /* writes acknowledged before their GTID
                                   * was known (pipelining clients): the
                                   * service-wide modes read from the
                                   * primary while > 0 */
    atomic_ullong unknown_until_us; /* a write's GTID was lost: the
                                     * service-wide modes read from the
                                     * primary until then */
};

/* A session command: kept while in the history or while answers are
 * pending (refcounted). */
struct rws_sescmd {
    uint64_t id;
    int refs;
    uint8_t cmd;
    uint32_t ps_id;               /* COM_STMT_PREPARE: the client's id */
    struct sl_buf *buf;
    struct sl_buf *prep;          /* a prepared session command's execute:
                                   * its PREPARE, replayed before it */
    int replier;                  /* backend whose answer the client gets */
    int8_t result;                /* 0 unknown, 1 OK, 2 ERR */
    int8_t *results;              /* [nservers]: results not yet checked */
    struct rws_sescmd *next;      /* history list */
};

enum rws_kind {
    RK_CLIENT,      /* the client's answer */
    RK_SESCMD,      /* a session command (answer to client if replier) */
    RK_REPLAY,      /* history replayed on a new connection: dropped */
    RK_IGNORE,      /* internal command: dropped */
    RK_LAST_GTID,   /* SELECT @@last_gtid after a write (causal_reads) */
    RK_GTID_WAIT,   /* MASTER_GTID_WAIT before a causal read */
    RK_TRX_REPLAY,  /* a transaction's statement replayed: checksummed */
    RK_PRIMARY_POS, /* SELECT @@gtid_binlog_pos before a universal read */
};

struct rws_expect {
    uint8_t kind;                 /* enum rws_kind */
    bool started;                 /* a piece of the answer arrived */
    struct rws_sescmd *sc;        /* RK_SESCMD, RK_REPLAY */
    size_t index;                 /* RK_TRX_REPLAY: statement number */
    uint64_t sent_us;
};

struct rws_be {
    struct sl_backend *b;         /* NULL when not connected */
    struct sl_server *srv;
    unsigned idx;
    bool is_master_conn;          /* connected as the session's master */
    uint32_t last_prepare;        /* client id of the last PREPARE sent */
    bool diverged;                /* a session command disagreed: unused */
    uint64_t last_rx_ms;          /* when a piece of an answer last came */
    struct rws_expect *q;         /* FIFO ring */
    size_t qcap, qhead, qlen;
};

struct rws_ps {
    uint32_t id;                  /* the client's statement id */
    bool is_read;                 /* SELECT outside transactions: replica */
    bool sescmd;                  /* SET ...: executed on every connection */
    uint32_t type;                /* the classifier's SL_QC_* of the text */
    uint16_t params;              /* the client's count (the replier's) */
    bool params_known;            /* the replier has answered */
    uint32_t *bids;               /* [nservers] backend ids, 0 none */
    uint16_t *bparams;            /* [nservers] each connection's count,
                                   * checked when the replier answers */
    uint64_t types_sent;          /* bit per server index < 64 */
    unsigned char *types;         /* 2 * ntypes bytes, from an execute */
    uint16_t ntypes;              /* params when types was filled */
    int last;                     /* backend of the last execution */
    struct rws_sescmd *sc;        /* its PREPARE, for the history */
    /* reuse_prepared_statements: a PREPARE of the same text in the same
     * default database is answered with this statement's answer */
    unsigned char *sql;           /* the PREPARE's payload (a copy) */
    size_t sql_len;
    char *db;                     /* the default database then */
    struct sl_buf *answer;        /* the client's answer (our id in it) */
    struct sl_reply answer_reply; /* its last piece's reply */
    bool answer_done;             /* complete, and a PREPARE OK */
};

struct rws_trx_stmt {
    struct sl_buf *buf;
    unsigned char sha1[20];
    bool no_cks;                  /* no_insert_id: uses LAST_INSERT_ID() */
    struct sl_buf *answer;        /* log_debug: the answer (rws_diag.c) */
};

struct rws_session {
    struct rws_instance *inst;
    struct sl_session *ses;
    struct rws_be *be;            /* [nservers] */
    int master;                   /* index of the master connection, -1 */
    bool closing;

    /* session commands */
    struct rws_sescmd *hist_head, *hist_tail;
    unsigned hist_len;
    bool hist_overflow;           /* history lost: no new connections */
    uint64_t next_sescmd;

    /* prepared statements */
    struct rws_ps *ps;
    size_t nps, cap_ps;
    uint32_t next_ps;

    /* transaction state */
    bool trx_active;
    bool wrote;             /* a statement that can change data was routed
                             * since the last @@last_gtid lookup: a
                             * COMMIT of a read-only transaction needs none */
    bool trx_ro;
    bool optimistic;              /* optimistic_trx: the read-write
                                   * transaction runs on ro_target (trx_ro
                                   * is set) until its first write */
    int trx_srv;                  /* where the open read-write
                                   * transaction's statements went, -1 */
    bool autocommit;
    int ro_target;                /* read-only transaction's backend */
    bool locked_to_master;        /* strict_multi_stmt/strict_sp_calls */
    char (*tmp)[SL_QC_NAME_MAX];
    size_t ntmp;

    /* the command being answered */
    struct sl_buf *cur;           /* a copy, to retry or replay */
    int cur_target;
    bool cur_is_read;
    bool cur_started;             /* bytes already went to the client */
    unsigned cur_retries;         /* retry_read()s of this command: at
                                   * most one per server, so connections
                                   * that keep failing (a login refused)
                                   * cannot be retried forever */
    bool cur_is_write;
    int last_used;
    unsigned rotate;
    uint32_t rnd;                 /* ADAPTIVE_ROUTING's random state */
    unsigned samples;             /* answers seen, to sample timings */

    /* the client's last command, for the logs of the safety net */
    uint8_t last_cmd;
    uint8_t last_len;
    char last_stmt[48];
    /* LOCAL INFILE: the connection the client's file packets go to, or
     * -1 (they are data, not commands) */
    int load_target;
    uint64_t watch;               /* the reply_timeout timer, 0 none */

    /* waiting: a command held back (causal GTID, delayed retry, replay) */
    struct sl_buf *waiting;
    struct sl_hint waiting_hint;
    uint64_t timer;
    uint64_t wait_deadline;
    bool no_hold;                 /* the last delayed attempt */

    /* causal_reads */
    char gtid[64];
    bool gtid_pending;
    struct sl_buf *gtid_buf;
    bool causal_failed;           /* next read answer dropped, re-sent */
    bool causal_killed;           /* ... and answered 1317 instead: a
                                   * KILL QUERY interrupted its wait */
    bool gtid_unknown;            /* last write's GTID unknown: primary */
    bool routing_read;            /* rws_route_to: this command is a read */
    struct sl_buf *held;          /* a write's last answer packet(s), held
                                   * until its GTID is published */
    struct sl_reply held_reply;
    bool unpublished;             /* counted in inst->unpublished */
    struct rws_pos req;           /* position the current read needs */
    bool req_any;                 /* req has a non-zero slot */
    bool req_primary;             /* the position is unknown: primary */
    bool pos_ready;               /* universal: req fetched for the held
                                   * read */
    int waited_on;                /* server of the last GTID wait sent */
    unsigned waits_pending;       /* GTID waits (rs->req) unanswered */
    struct rws_pos wait_pos;      /* the position the last one waits for */
    bool cur_pure_read;           /* the command being answered is one */

    /* transaction_replay */
    struct rws_trx_stmt *trx_log;
    size_t ntrx, cap_trx;
    size_t trx_bytes;
    bool trx_log_ok;              /* log complete: replay possible */
    void *sha;                    /* EVP_MD_CTX of the current answer */
    bool replaying;
    unsigned replay_attempts;
    size_t replay_left;
    bool replay_failed;
    bool replay_deadlock;         /* a replayed statement hit 1213 */
    uint64_t replay_start_ms;     /* first attempt of this transaction
                                   * (transaction_replay_timeout) */
    bool cks_skip;                /* the answer being checksummed does not
                                   * count (transaction_replay_checksum) */
    struct sl_buf *replay_answer; /* log_debug: the replayed answer */
    bool in_barrier;              /* counted in inst->replays_pending */
    bool replay_for_deadlock;     /* the replay hides a 1213 from the
                                   * client (retry_on_deadlock) */
    bool replay_snapshot;         /* statement 0 replayed as START
                                   * TRANSACTION WITH CONSISTENT SNAPSHOT */
    bool barrier_hold;            /* `waiting` is held by the barrier */
    bool barrier_passed;          /* routing what the barrier released */
    bool had_master;              /* master_reconnection=false: the
                                   * session's primary is first_master */
    unsigned first_master;
    const struct sl_buf *log_src; /* rws_route_to logs this (the client's
                                   * COM_STMT_EXECUTE: its statement id is
                                   * the client's, translated at replay),
                                   * not the connection's copy */
};

/* readwritesplit.c */
int rws_connect(struct rws_session *rs, unsigned idx, bool as_master);

/* The calling worker's counters of server srv. */
struct rws_count *rws_count(const struct rws_instance *inst, unsigned srv);
/* Server srv's counter summed over the shards; `field` is the offset of
 * an atomic 64-bit member of struct rws_count. */
uint64_t rws_count_sum(const struct rws_instance *inst, unsigned srv,
                       size_t field);
#define RWS_SUM(inst, srv, member) \
    rws_count_sum((inst), (srv), offsetof(struct rws_count, member))
void rws_send_error(struct rws_session *rs, const char *fmt, ...)
    SL_PRINTF(2, 3);
uint64_t rws_now_us(void);

/* rws_route.c: route_query, the entry point. */
int rws_route_query(void *rsession, struct sl_buf *buf);
int rws_route_cmd(struct rws_session *rs, struct sl_buf *buf,
                  const struct sl_hint *hint);
int rws_write(struct rws_session *rs, unsigned idx, struct sl_buf *buf,
              enum rws_kind kind, struct rws_sescmd *sc);
void rws_push(struct rws_be *be, const struct rws_expect *e);
/* Send the client's command (taken) to connection idx, keeping a copy
 * for a retry or a replay (rs->cur). SL_OK. */
int rws_route_to(struct rws_session *rs, int idx, struct sl_buf *buf,
                 bool is_write);
/* Transaction state before routing, from the classifier's type bits (the
 * answers refine it: rws_refresh_trx). */
void rws_track_trx(struct rws_session *rs, uint32_t type);
int rws_hold(struct rws_session *rs, struct sl_buf *buf,
             const struct sl_hint *hint);

/* rws_sescmd.c: session commands and their history. */
void rws_sescmd_unref(struct rws_session *rs, struct rws_sescmd *sc);
void rws_replay_history(struct rws_session *rs, unsigned idx);
void rws_history_free(struct rws_session *rs);
void rws_history_remove(struct rws_session *rs, struct rws_sescmd *sc);
void rws_history_add(struct rws_session *rs, struct rws_sescmd *sc);
struct rws_sescmd *rws_sescmd_new(struct rws_session *rs, int cmd);
bool rws_sescmd_send(struct rws_session *rs, struct rws_sescmd *sc,
                     unsigned i, struct sl_buf *out);
/* A session command (buf taken) to every live connection; ps_id: the
 * client's id for COM_STMT_PREPARE, else 0. SL_OK. */
int rws_exec_sescmd(struct rws_session *rs, struct sl_buf *buf,
                    uint32_t ps_id);

/* rws_ps.c: prepared statements. */
struct rws_ps *rws_ps_find(struct rws_session *rs, uint32_t id);
void rws_ps_free_all(struct rws_session *rs);
int rws_route_prepare(struct rws_session *rs, struct sl_buf *buf);
/* COM_STMT_EXECUTE, FETCH, RESET, CLOSE, SEND_LONG_DATA (buf taken). */
int rws_route_ps_cmd(struct rws_session *rs, struct sl_buf *buf, int cmd);
int rws_resend(struct rws_session *rs, int idx, struct sl_buf *buf);
/* A copy of the client's command buf (not taken) for connection idx:
 * prepared statement ids translated; NULL when idx lacks the statement. */
struct sl_buf *rws_for_backend(struct rws_session *rs, int idx,
                               const struct sl_buf *buf);

/* rws_target.c: which connection. */
int rws_master_index(struct rws_session *rs, bool connect);
int rws_slave_index(struct rws_session *rs, int exclude);
/*
 * The rank the session's replicas must have (MaxScale's rule for
 * readwritesplit, see modules.md "Server ranks"): its primary
 * connection's server's while it has one; otherwise the best rank among
 * the servers it is connected to, then among those that can be
 * connected to. Reads the servers' rank and status (atomics).
 */
int rws_current_rank(const struct rws_session *rs);
/* The usable server a hint names (connected to if needed), or -1. */
int rws_named_index(struct rws_session *rs, const char *name);
/* Server status st may take the session's primary work. */
bool rws_master_usable(uint32_t st);
/* A switchover is demoting a primary of the service (and holding is
 * possible: not in event_model=shared). */
bool rws_primary_moving(const struct rws_instance *inst);

/* rws_gtid.c: causal_reads' queries and their answers. */
/* causal_reads: precede the read about to go to idx with the GTID wait
 * its mode needs there, if any. */
void rws_causal_wait(struct rws_session *rs, int idx);
/* The position a read needs (rs->req); true when the read (buf taken) is
 * held while the primary's position is fetched (universal). */
bool rws_causal_position(struct rws_session *rs, struct sl_buf *buf,
                         const struct sl_hint *hint);

/* rws_gtid.c, the answers: each takes buf. */
void rws_ask_last_gtid(struct rws_session *rs, unsigned idx);
void rws_gtid_answer(struct rws_session *rs, struct sl_buf *buf,
                     const struct sl_reply *reply);
void rws_primary_pos_answer(struct rws_session *rs, struct sl_buf *buf,
                            const struct sl_reply *reply);
void rws_wait_answer(struct rws_session *rs, struct rws_be *be,
                     struct sl_buf *buf, const struct sl_reply *reply);
/* The held end of a write's answer goes to the client once its GTID is
 * published (known) or lost (!known). */
int rws_held_release(struct rws_session *rs, bool known);

/* rws_sescmd.c, the answers. */
/* A piece of the answer to a session command or a history replay (buf
 * taken): to the client when this connection is the replier. */
int rws_sescmd_answer(struct rws_session *rs, struct rws_be *be,
                      struct rws_expect *e, struct sl_buf *buf,
                      const struct sl_reply *reply);
/* Session commands whose replier failed get another replier; false when
 * the client already has part of an answer. */
bool rws_reassign_sescmds(struct rws_session *rs, struct rws_be *failed);

/* rws_ps.c, the answers. */
/* A PREPARE's answer on connection be: its id mapped, the client given
 * ours (buf, the first piece, when to_client; NULL otherwise). false: buf
 * could not be given our id (no memory) and must not reach the client. */
bool rws_prepare_answer(struct rws_session *rs, struct rws_be *be,
                        struct rws_sescmd *sc, struct sl_buf *buf,
                        const struct sl_reply *reply, bool to_client);
/* reuse_prepared_statements: keep a piece of the PREPARE answer the
 * client is given (buf not taken). */
void rws_prepare_keep(struct rws_session *rs, struct rws_sescmd *sc,
                      const struct sl_buf *buf, const struct sl_reply *reply);

/* rws_reply.c: client_reply and the safety net. */
int rws_client_reply(void *rsession, struct sl_backend *b,
                     struct sl_buf *buf, const struct sl_reply *reply);
void rws_queue_clear(struct rws_session *rs, struct rws_be *be);
/* The transaction state from the server status of an OK or EOF. */
void rws_refresh_trx(struct rws_session *rs, const struct sl_reply *reply);
/* Start the reply_timeout watch unless it runs (or is off). */
void rws_watch_start(struct rws_session *rs);
/* The reply tracker lost track (or a backend went quiet): answer the
 * client with an error naming why, log the statement's first bytes and
 * close the session. */
void rws_lost_track(struct rws_session *rs, struct rws_be *be,
                    const char *why);

/* rws_error.c: failures of connections. */
bool rws_handle_error(void *rsession, struct sl_backend *b,
                      const struct sl_buf *errpkt, const char *reason);
/* Let go of be's connection (closed when close_it, else the core closes
 * it), its pending expectations, and the master role if it had it. */
void rws_release_backend(struct rws_session *rs, struct rws_be *be,
                         bool close_it);
/* Close a connection whose session state diverged (never used again by
 * the session); a read waiting on it is retried elsewhere. */
void rws_drop_backend(struct rws_session *rs, struct rws_be *be,
                      const char *why);

/* rws_trx.c: transaction_replay and the session timer. */
void rws_trx_log_clear(struct rws_session *rs);
bool rws_trx_log_add(struct rws_session *rs, const struct sl_buf *buf);
/* Start checksumming the answer to statement i of the log / hash a piece
 * of it. */
void rws_cks_begin(struct rws_session *rs, const struct sl_buf *buf,
                   const struct sl_reply *reply, size_t i);
void rws_sha_update(struct rws_session *rs, const struct sl_buf *buf);

/* The replay barrier: leave it (the session's replay has its snapshot,
 * or ended); hold buf (a COMMIT, or a write outside a transaction) while
 * it is up: true when held. */
void rws_barrier_leave(struct rws_session *rs);
/* The barrier is up (the one load the normal path pays). */
static inline bool
rws_barrier_up(const struct rws_instance *inst)
{
    return atomic_load_explicit(&inst->replays_pending,
                                memory_order_relaxed) != 0;
}
bool rws_barrier_hold(struct rws_session *rs, struct sl_buf *buf,
                      const struct sl_hint *hint);

/* rws_diag.c (log_debug only): keep a piece of an answer (`first`: a new
 * answer); describe how statement i's replayed answer differs. */
void rws_diag_keep(struct sl_buf **acc, const struct sl_buf *buf,
                   bool first);
void rws_diag_mismatch(struct rws_session *rs, size_t i);
void rws_start_timer(struct rws_session *rs);
/* Route the held command, if any. */
int rws_release_waiting(struct rws_session *rs);
void rws_replay_answer(struct rws_session *rs, struct rws_expect *e,
                       const struct sl_buf *buf, const struct sl_reply *reply);
/* The primary, the session's, failed; pending: with the client's answer
 * outstanding. A replay, or master_failure_mode; false: close the
 * session. */
bool rws_master_failed(struct rws_session *rs, bool pending);
/* rws_error.c: a statement lost with the primary outside a transaction
 * (a read re-sent: 1; the session closed unanswered: 0; neither: -1),
 * and closing the session so the client sees a lost connection. */
int rws_lost_autocommit(struct rws_session *rs);
void rws_close_unanswered(struct rws_session *rs, const char *why);
/* An ERR from the primary that a replay or a hold hides from the client;
 * true: the error is dropped. */
bool rws_read_only_refusal(struct rws_session *rs, struct rws_be *be,
                           const struct sl_reply *reply);
bool rws_deadlock_retry(struct rws_session *rs, struct rws_be *be,
                        const struct sl_reply *reply);

/* optimistic_trx: the transaction on a replica meets its first write
 * (buf taken, held): ROLLBACK on the replica, the statements so far
 * replayed on the primary (checksums compared), then buf routed there.
 * SL_ERROR: it cannot move (the log is incomplete); the client has the
 * error. */
int rws_opt_to_primary(struct rws_session *rs, struct sl_buf *buf,
                       const struct sl_hint *hint);

/* rws_replay.c: transaction_replay's decisions (pure). */
/* Another replay attempt of a transaction whose first attempt started at
 * started_ms (attempts made so far: `attempts`) is allowed at now_ms:
 * transaction_replay_timeout alone decides when set, else
 * transaction_replay_attempts. */
bool rws_replay_allowed(const struct rws_config *c, unsigned attempts,
                        uint64_t started_ms, uint64_t now_ms);
/* The server rolled the transaction back for a deadlock: ER_LOCK_DEADLOCK
 * (1213, SQLSTATE 40001; also Galera's certification conflicts). */
bool rws_deadlock_error(uint16_t code);
/* An answer counts in the transaction's checksum under mode `m`: ok_only,
 * the answer is a lone OK packet; uses_lii, its statement calls
 * LAST_INSERT_ID(). */
bool rws_cks_counts(enum rws_checksum m, bool ok_only, bool uses_lii);
/* A COM_QUERY or COM_STMT_PREPARE packet (header included) mentions
 * LAST_INSERT_ID (case-insensitive). */
bool rws_uses_last_insert_id(const struct sl_buf *buf);
/* A COM_QUERY (header included) whose statement is a COMMIT: "COMMIT"
 * as its first word (COMMIT WORK, COMMIT AND CHAIN too; not behind a
 * leading comment, not XA COMMIT). */
bool rws_is_commit(const struct sl_buf *buf);
/* What a transaction's first logged statement is, for a replay that
 * takes a consistent snapshot (the replay barrier): RWS_BEGIN_PLAIN
 * "BEGIN [WORK]" or "START TRANSACTION", RWS_BEGIN_READ_WRITE "START
 * TRANSACTION READ WRITE" (either with a trailing ';'), else
 * RWS_BEGIN_OTHER (other characteristics, a comment: replayed as is). */
enum { RWS_BEGIN_OTHER, RWS_BEGIN_PLAIN, RWS_BEGIN_READ_WRITE };
int rws_plain_begin(const struct sl_buf *buf);

/* rws_causal.c: positions (struct rws_pos) of the causal_reads modes. */
/* "D-S-N,..." into out, claiming slots for new domains if `claim`; false
 * when malformed or a domain has no slot. */
bool rws_pos_parse(struct rws_instance *inst, const char *list,
                   struct rws_pos *out, bool claim);
/* A write's GTID acknowledged to a client: raise the service's position. */
void rws_publish(struct rws_instance *inst, const char *gtid);
/* The service's acknowledged position; false when it is empty. */
bool rws_acked(struct rws_instance *inst, struct rws_pos *out);
/* Server srv is known to have applied need (the monitor not asked). */
bool rws_known_covers(const struct rws_instance *inst, unsigned srv,
                      const struct rws_pos *need);
/* The same, asking the monitor's last @@gtid_current_pos when not. */
bool rws_known_covers_fresh(struct rws_instance *inst, unsigned srv,
                            const struct rws_pos *need);
void rws_known_learn(struct rws_instance *inst, unsigned srv,
                     const struct rws_pos *pos);
/* "D-0-N,..." for MASTER_GTID_WAIT; its length. */
size_t rws_pos_format(const struct rws_instance *inst,
                      const struct rws_pos *pos, char *out, size_t outlen);

/* rws_exec.c. The client's COM_STMT_* packet (header included) is read,
 * never taken; each returns a new packet or NULL (too short, allocation). */
/* A copy of buf with statement id bid (blocks after the id shared). */
struct sl_buf *rws_exec_with_id(const struct sl_buf *buf, uint32_t bid);
/* Offset in an execute packet of its "new params bound" flag. */
size_t rws_exec_flag_off(uint16_t params);
/* rws_ps.c: connection idx is gone: its statement ids mean nothing to a
 * new one there, which has seen no statement's parameter types either
 * (they go with its next execute). */
void rws_ps_forget_backend(struct rws_session *rs, unsigned idx);
/* An execute with flag 0 rebuilt with flag 1 and ps->types; NULL when the
 * packet is too short, its flag is not 0 or ps has no types. */
struct sl_buf *rws_exec_add_types(const struct sl_buf *exec,
                                  const struct rws_ps *ps);
/* Keep the parameter types of an execute that sends them (flag 1). */
void rws_exec_save_types(const struct sl_buf *exec, struct rws_ps *ps);

/* ---- Small helpers of the per-statement path: inline in every unit
 * (a call across units for a test of one field would cost more than the
 * test). */

/* An optimistic_trx transaction still on its replica. */
static inline bool
rws_optimistic(const struct rws_session *rs)
{
    return rs->optimistic && rs->trx_active && rs->trx_ro;
}

/* The connection is up (not given up or never opened). */
static inline bool
rws_be_live(const struct rws_be *be)
{
    return be->b != NULL;
}

/* A command the server answers. */
static inline bool
rws_expects_reply(int cmd)
{
    return cmd != SL_COM_QUIT && cmd != SL_COM_STMT_CLOSE &&
           cmd != SL_COM_STMT_SEND_LONG_DATA;
}

/* A statement after which the session's GTID may have moved on
 * (causal_reads asks the primary for it). */
static inline bool
rws_changes_data(uint32_t type)
{
    return (type & (SL_QC_WRITE | SL_QC_DDL | SL_QC_UNKNOWN | SL_QC_CALL |
                    SL_QC_LOAD_LOCAL | SL_QC_GSYSVAR_WRITE |
                    SL_QC_CREATE_TMP_TABLE | SL_QC_DROP_TABLE |
                    SL_QC_MULTI_STMT | SL_QC_EXEC_PREPARED)) != 0;
}

/* A statement of this type sets session state only: every connection
 * runs it (SET, SET NAMES, SET autocommit, PREPARE ... FROM, ...). */
static inline bool
rws_sescmd_type(uint32_t t)
{
    if (!(t & (SL_QC_SESSION_WRITE | SL_QC_ENABLE_AUTOCOMMIT |
               SL_QC_DISABLE_AUTOCOMMIT | SL_QC_PREPARE_NAMED |
               SL_QC_DEALLOC_PREPARE))) {
        return false;
    }
    if (!(t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_READ | SL_QC_MULTI_STMT |
               SL_QC_GSYSVAR_WRITE | SL_QC_UNKNOWN))) {
        return true;
    }
    /* SET @a = (SELECT ...) */
    return (t & SL_QC_USERVAR_WRITE) &&
           !(t & (SL_QC_WRITE | SL_QC_DDL | SL_QC_MULTI_STMT));
}

/*
 * A read-write transaction open on a primary that a switchover is
 * demoting goes on there (*m set): the monitor drains the old primary's
 * transactions before it sets read_only, and one still open then gets
 * 1290 for its next write or COMMIT, which replays it on the new primary
 * (transaction_replay; see rws_read_only_refusal). New transactions and
 * autocommit writes are held (rws_master_index skips a moving primary).
 */
static inline void
rws_trx_on_moving_master(struct rws_session *rs, int *m)
{
    struct rws_be *be;

    *m = -1;
    if (!rs->trx_active || rs->trx_ro || rs->master < 0 ||
        rs->trx_srv != rs->master) {
        return;   /* none, or a new one: held */
    }
    be = &rs->be[rs->master];
    if (rws_be_live(be) && (sl_server_status(be->srv) & SL_SRV_MOVING) &&
        rws_primary_moving(rs->inst)) {
        *m = rs->master;
    }
}

/* causal_reads: a read while the write's GTID is being fetched waits for
 * it (buf taken). */
static inline bool
rws_causal_hold(struct rws_session *rs, struct sl_buf *buf,
                const struct sl_hint *hint)
{
    if (rws_causal_position(rs, buf, hint)) {
        return true;
    }
    if (rs->inst->cfg.causal != RWS_CAUSAL_LOCAL || !rs->gtid_pending) {
        return false;
    }
    rs->waiting = buf;   /* routed when the write's GTID is known */
    rs->waiting_hint = hint != NULL ? *hint : (struct sl_hint){.type = 0};
    return true;
}

/* The causal_reads modes that read the service's acknowledged writes. */
static inline bool
rws_causal_service_wide(enum rws_causal m)
{
    return m == RWS_CAUSAL_GLOBAL || m == RWS_CAUSAL_FAST_GLOBAL ||
           m == RWS_CAUSAL_CONSISTENT;
}

/* Errors that end a statement because someone stopped it, whatever the
 * data: KILL QUERY (1317), KILL CONNECTION (1927), max_statement_time
 * (1969), MySQL's max_execution_time (3024). */
static inline bool
rws_interrupted(uint16_t code)
{
    return code == 1317 || code == 1927 || code == 1969 || code == 3024;
}

#endif
