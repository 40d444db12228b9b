/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's internal types, shared by its source files:
 *   readwritesplit.c  module, parameters, instance, sessions, diagnostics
 *   rws_route.c       route_query: classification, targets, session
 *                     commands and their history, prepared statements
 *   rws_reply.c       client_reply, handle_error, retries, causal reads,
 *                     transaction replay
 *   rws_select.c      the replica choice (pure)
 *   rws_exec.c        COM_STMT_* rewriting: ids, parameter types (pure)
 *
 * Every backend connection has a FIFO of what its pending answers are for
 * (struct rws_expect): commands are pipelined, the server answers in
 * order, so the head of the FIFO says what to do with each answer.
 *
 * Context: everything on a session is worker-owned; the instance's
 * per-server counters are atomics read by the admin thread.
 */
#ifndef RWS_H
#define RWS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/buf-t.h>
#include <sluice/classifier.h>
#include <sluice/reply.h>

#include "rws_select.h"

struct sl_service;
struct sl_session;
struct sl_backend;
struct sl_server;

#define RWS_ERR_CODE 1105
#define RWS_ERR_STATE "HY000"

enum rws_failure_mode {
    RWS_FAIL_INSTANTLY,
    RWS_FAIL_ON_WRITE,
    RWS_ERROR_ON_WRITE,
};

enum rws_causal {
    RWS_CAUSAL_NONE,
    RWS_CAUSAL_LOCAL,
    RWS_CAUSAL_RYW,     /* read_your_writes: replica with the GTID, else
                         * the primary; never waits */
};

struct rws_config {
    enum rws_criteria criteria;
    int64_t max_lag_s;            /* 0: no limit */
    bool master_accept_reads;
    unsigned max_slave_conns;     /* resolved from count or percent */
    bool lazy_connect;
    enum rws_failure_mode failure_mode;
    bool retry_failed_reads;
    bool delayed_retry;
    uint64_t delayed_retry_ms;
    bool strict_multi_stmt;
    bool strict_sp_calls;
    bool vars_in_master;          /* use_sql_variables_in=master */
    enum rws_causal causal;
    uint64_t causal_timeout_s;
    bool trx_replay;
    uint64_t trx_replay_max;      /* bytes of statements kept */
    unsigned trx_replay_attempts;
    unsigned max_history;
    bool prune_history;
    bool disable_history;
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
};

struct rws_trx_stmt {
    struct sl_buf *buf;
    unsigned char sha1[20];
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
    bool autocommit;
    int ro_target;                /* read-only transaction's backend */
    bool locked_to_master;        /* strict_multi_stmt/strict_sp_calls */
    char (*tmp)[SL_QC_NAME_MAX];
    size_t ntmp;

    /* the command being answered */
    struct sl_buf *cur;           /* a copy, to retry or replay */
    int cur_target;
    int load_target;              /* LOCAL INFILE: the server the client's
                                   * file packets go to, or -1 */
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
    bool gtid_unknown;            /* last write's GTID unknown: primary */
    bool routing_read;            /* route_to: this command is a read */
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
};

/* readwritesplit.c */
int rws_connect(struct rws_session *rs, unsigned idx, bool as_master);
bool rws_be_live(const struct rws_be *be);

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

/* rws_route.c */
int rws_route_query(void *rsession, struct sl_buf *buf);
int rws_route_cmd(struct rws_session *rs, struct sl_buf *buf,
                  const struct sl_hint *hint);
int rws_write(struct rws_session *rs, unsigned idx, struct sl_buf *buf,
              enum rws_kind kind, struct rws_sescmd *sc);
void rws_push(struct rws_be *be, const struct rws_expect *e);
void rws_sescmd_unref(struct rws_session *rs, struct rws_sescmd *sc);
void rws_replay_history(struct rws_session *rs, unsigned idx);
int rws_master_index(struct rws_session *rs, bool connect);
int rws_slave_index(struct rws_session *rs, int exclude);
struct rws_ps *rws_ps_find(struct rws_session *rs, uint32_t id);
void rws_ps_free_all(struct rws_session *rs);
void rws_history_free(struct rws_session *rs);
int rws_resend(struct rws_session *rs, int idx, struct sl_buf *buf);
int rws_hold(struct rws_session *rs, struct sl_buf *buf,
             const struct sl_hint *hint);

/* rws_reply.c */
int rws_client_reply(void *rsession, struct sl_backend *b,
                     struct sl_buf *buf, const struct sl_reply *reply);
bool rws_handle_error(void *rsession, struct sl_backend *b,
                      const struct sl_buf *errpkt, const char *reason);
void rws_queue_clear(struct rws_session *rs, struct rws_be *be);
void rws_trx_log_clear(struct rws_session *rs);
void rws_start_timer(struct rws_session *rs);
bool rws_trx_log_add(struct rws_session *rs, const struct sl_buf *buf);

/* rws_exec.c. The client's COM_STMT_* packet (header included) is read,
 * never taken; each returns a new packet or NULL (too short, allocation). */
/* A copy of buf with statement id bid (blocks after the id shared). */
struct sl_buf *rws_exec_with_id(const struct sl_buf *buf, uint32_t bid);
/* Offset in an execute packet of its "new params bound" flag. */
size_t rws_exec_flag_off(uint16_t params);
/* An execute with flag 0 rebuilt with flag 1 and ps->types; NULL when the
 * packet is too short, its flag is not 0 or ps has no types. */
struct sl_buf *rws_exec_add_types(const struct sl_buf *exec,
                                  const struct rws_ps *ps);
/* Keep the parameter types of an execute that sends them (flag 1). */
void rws_exec_save_types(const struct sl_buf *exec, struct rws_ps *ps);

#endif
