/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit: statement-level read/write splitting, as in MaxScale.
 *
 * A session keeps one connection to the primary and up to
 * max_slave_connections to replicas. Writes, transactions and anything
 * that must see the primary's state go to the primary; reads outside
 * transactions go to a replica chosen by slave_selection_criteria; session
 * commands go to every connection and are kept in a history replayed on
 * connections opened later. See rws.h for how the source is split and
 * docs/design.md (## readwritesplit) for the decisions.
 *
 * This file: the module descriptor and parameters, the instance, session
 * set-up and teardown, opening connections, diagnostics.
 *
 * Context: create/destroy_instance in the main thread; session callbacks
 * on the session's worker; diagnostics in the admin thread (atomics only).
 */
#define SL_LOG_TAG "readwritesplit"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/router.h>
#include <sluice/server.h>
#include <sluice/service.h>
#include <sluice/session.h>
#include <sluice/worker.h>

#include "rws.h"

static const char *const criteria_names[] = {
    "LEAST_CURRENT_OPERATIONS", "ADAPTIVE_ROUTING", "LEAST_BEHIND_MASTER",
    "LEAST_GLOBAL_CONNECTIONS", "LEAST_ROUTER_CONNECTIONS", NULL,
};
static const char *const failure_names[] = {
    "fail_instantly", "fail_on_write", "error_on_write", NULL,
};
static const char *const vars_names[] = {"all", "master", NULL};
/* in enum rws_checksum's order */
static const char *const checksum_names[] = {
    "full", "result_only", "no_insert_id", NULL,
};
/* MaxScale 2.5+ values, plus the old boolean spelling (true/on: local,
 * false/off: none), plus Sluice's read_your_writes (fast) and consistent
 * (the default). The index is the position in this list. */
static const char *const causal_names[] = {
    "none", "local", "global", "fast", "fast_global", "universal",
    "fast_universal", "true", "false", "on", "off", "read_your_writes",
    "consistent", NULL,
};
static const enum rws_causal causal_modes[] = {
    RWS_CAUSAL_NONE, RWS_CAUSAL_LOCAL, RWS_CAUSAL_GLOBAL, RWS_CAUSAL_RYW,
    RWS_CAUSAL_FAST_GLOBAL, RWS_CAUSAL_UNIVERSAL, RWS_CAUSAL_FAST_UNIVERSAL,
    RWS_CAUSAL_LOCAL, RWS_CAUSAL_NONE, RWS_CAUSAL_LOCAL, RWS_CAUSAL_NONE,
    RWS_CAUSAL_RYW, RWS_CAUSAL_CONSISTENT,
};

uint64_t
rws_now_us(void)
{
    return sl_monotonic_us();
}

/* "255", "50%": the number of replica connections for n servers. */
static unsigned
parse_max_slaves(const char *s, size_t nservers)
{
    char *end;
    long v = strtol(s != NULL ? s : "255", &end, 10);

    if (v < 0) {
        v = 0;
    }
    if (*end == '%') {
        size_t slaves = nservers > 0 ? nservers - 1 : 0;
        v = (long)((slaves * (size_t)v + 99) / 100);
    }
    return (unsigned)v;
}

static void
read_config(struct rws_config *c, const struct sl_params *p, size_t n)
{
    int causal = sl_params_enum(p, "causal_reads");

    c->causal_index = causal >= 0 ? causal : 12;

    c->criteria = (enum rws_criteria)sl_params_enum(
        p, "slave_selection_criteria");
    c->max_lag_s = (int64_t)(
        sl_params_duration_ms(p, "max_slave_replication_lag") / 1000);
    c->master_accept_reads = sl_params_bool(p, "master_accept_reads");
    c->max_slave_conns =
        parse_max_slaves(sl_params_get(p, "max_slave_connections"), n);
    c->lazy_connect = sl_params_bool(p, "lazy_connect");
    c->initial_slaves = (unsigned)sl_params_count(p, "slave_connections");
    c->failure_mode =
        (enum rws_failure_mode)sl_params_enum(p, "master_failure_mode");
    c->retry_failed_reads = sl_params_bool(p, "retry_failed_reads");
    c->delayed_retry = sl_params_bool(p, "delayed_retry");
    c->delayed_retry_ms = sl_params_duration_ms(p, "delayed_retry_timeout");
    c->reply_timeout_ms = sl_params_duration_ms(p, "reply_timeout");
    c->strict_multi_stmt = sl_params_bool(p, "strict_multi_stmt");
    c->strict_sp_calls = sl_params_bool(p, "strict_sp_calls");
    c->vars_in_master = sl_params_enum(p, "use_sql_variables_in") == 1;
    c->causal = causal >= 0 && (size_t)causal < sizeof(causal_modes) /
                                                  sizeof(causal_modes[0])
                    ? causal_modes[causal]
                    : RWS_CAUSAL_CONSISTENT;
    c->causal_wait_ms = sl_params_duration_ms(p, "causal_reads_wait");
    c->causal_timeout_s =
        sl_params_duration_ms(p, "causal_reads_timeout") / 1000;
    if (c->causal_timeout_s == 0) {
        c->causal_timeout_s = 1;
    }
    c->trx_replay = sl_params_bool(p, "transaction_replay");
    c->trx_replay_max = sl_params_size(p, "transaction_replay_max_size");
    c->trx_replay_attempts =
        (unsigned)sl_params_count(p, "transaction_replay_attempts");
    c->trx_replay_timeout_ms =
        sl_params_duration_ms(p, "transaction_replay_timeout");
    c->retry_on_deadlock =
        sl_params_bool(p, "transaction_replay_retry_on_deadlock");
    c->retry_on_mismatch =
        sl_params_bool(p, "transaction_replay_retry_on_mismatch");
    c->safe_commit = sl_params_bool(p, "transaction_replay_safe_commit");
    c->checksum = (enum rws_checksum)sl_params_enum(
        p, "transaction_replay_checksum");
    c->master_reconnection = sl_params_bool(p, "master_reconnection");
    c->strict_tmp_tables = sl_params_bool(p, "strict_tmp_tables");
    c->optimistic = sl_params_bool(p, "optimistic_trx");
    c->reuse_ps = sl_params_bool(p, "reuse_prepared_statements");
    c->max_history = (unsigned)sl_params_count(p, "max_sescmd_history");
    c->prune_history = sl_params_bool(p, "prune_sescmd_history");
    c->disable_history = sl_params_bool(p, "disable_sescmd_history");
    if (c->optimistic) {
        /* as MaxScale: moving a transaction to the primary is a replay */
        c->trx_replay = true;
    }
    if (c->trx_replay) {
        /* as MaxScale: replay implies both */
        c->delayed_retry = true;
        c->master_reconnection = true;
    }
    if (c->trx_replay_timeout_ms > c->delayed_retry_ms) {
        /* as MaxScale: the wait for a primary lasts the replay's time */
        c->delayed_retry_ms = c->trx_replay_timeout_ms;
    }
}

static void *
rws_create_instance(struct sl_service *svc, const struct sl_params *params)
{
    struct rws_instance *inst =
        aligned_alloc(64, (sizeof(*inst) + 63) / 64 * 64);
    size_t stats_size;

    if (inst != NULL) {
        memset(inst, 0, sizeof(*inst));
    }
    if (inst == NULL) {
        sl_log_error("Service '%s': out of memory", sl_service_name(svc));
        return NULL;
    }
    inst->svc = svc;
    inst->servers = sl_service_servers(svc, &inst->nservers);
    read_config(&inst->cfg, params, inst->nservers);
    if (!inst->cfg.trx_replay &&
        (inst->cfg.retry_on_deadlock || inst->cfg.retry_on_mismatch ||
         inst->cfg.trx_replay_timeout_ms > 0 || !inst->cfg.safe_commit ||
         inst->cfg.checksum != RWS_CKS_FULL)) {
        sl_log_warn("Service '%s': the transaction_replay_* parameters "
                    "take effect only with transaction_replay=true",
                    sl_service_name(svc));
    }
    /* Cache-line aligned (see struct rws_srv_stats). */
    stats_size = (inst->nservers ? inst->nservers : 1) * sizeof(*inst->stats);
    inst->stats = aligned_alloc(_Alignof(struct rws_srv_stats), stats_size);
    if (inst->stats == NULL) {
        sl_log_error("Service '%s': out of memory", sl_service_name(svc));
        free(inst);
        return NULL;
    }
    memset(inst->stats, 0, stats_size);
    /* Each shard starts on a line of its own (see struct rws_count). */
    inst->stride = (inst->nservers ? inst->nservers : 1);
    inst->stride = (inst->stride * sizeof(struct rws_count) + 63) / 64 * 64 /
                   sizeof(struct rws_count);
    stats_size = RWS_SHARDS * inst->stride * sizeof(struct rws_count);
    inst->counts = aligned_alloc(64, stats_size);
    if (inst->counts == NULL) {
        sl_log_error("Service '%s': out of memory", sl_service_name(svc));
        free(inst->stats);
        free(inst);
        return NULL;
    }
    memset(inst->counts, 0, stats_size);
    inst->known = calloc((inst->nservers ? inst->nservers : 1) * RWS_DOMAINS,
                         sizeof(*inst->known));
    if (inst->known == NULL) {
        sl_log_error("Service '%s': out of memory", sl_service_name(svc));
        free(inst->counts);
        free(inst->stats);
        free(inst);
        return NULL;
    }
    return inst;
}

static void
rws_destroy_instance(void *instance)
{
    struct rws_instance *inst = instance;

    if (inst == NULL) {
        return;
    }
    free(inst->stats);
    free(inst->counts);
    free(inst->known);
    free(inst);
}

struct rws_count *
rws_count(const struct rws_instance *inst, unsigned srv)
{
    struct sl_worker *w = sl_worker_current();
    unsigned shard = w != NULL ? (unsigned)sl_worker_index(w) % RWS_SHARDS
                               : 0;

    return &inst->counts[shard * inst->stride + srv];
}

uint64_t
rws_count_sum(const struct rws_instance *inst, unsigned srv, size_t field)
{
    int n = sl_worker_count();
    unsigned shards = n <= 0 ? 1 : n > RWS_SHARDS ? RWS_SHARDS : (unsigned)n;
    uint64_t sum = 0;

    for (unsigned k = 0; k < shards; k++) {
        const char *c = (const char *)&inst->counts[k * inst->stride + srv];
        sum += atomic_load_explicit((const atomic_ullong *)(c + field),
                                    memory_order_relaxed);
    }
    return sum;
}

void
rws_send_error(struct rws_session *rs, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sl_log_ses_warn(rs->ses, "%s", msg);
    sl_session_send_error(rs->ses, RWS_ERR_CODE, RWS_ERR_STATE, msg);
}

/*
 * Open a connection to server idx and replay the session command history
 * on it (its answers are checked and dropped). 0, or -1 when the
 * connection cannot start or the history was lost (hist_overflow: a new
 * connection would not have the session's state). Worker-owned.
 */
int
rws_connect(struct rws_session *rs, unsigned idx, bool as_master)
{
    struct rws_be *be = &rs->be[idx];
    struct sl_backend *b;

    if (rws_be_live(be)) {
        return 0;
    }
    if (rs->hist_overflow) {
        sl_log_ses_info(rs->ses, "Not connecting to '%s': the session command history was exceeded", sl_server_name(be->srv));
        return -1;
    }
    b = sl_backend_connect(rs->ses, be->srv);
    if (b == NULL) {
        return -1;
    }
    be->b = b;
    be->is_master_conn = as_master;
    sl_backend_set_router_data(b, be);
    atomic_fetch_add(&rs->inst->stats[idx].conns, 1);
    rws_replay_history(rs, idx);
    sl_log_ses_info(rs->ses, "Connected to '%s' as %s",
                    sl_server_name(be->srv), as_master ? "master" : "slave");
    return 0;
}

/* A server the monitor calls Master (not connected to), or -1. */
static int
master_server(const struct rws_session *rs)
{
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        uint32_t st = sl_server_status(rs->be[i].srv);

        if (sl_server_is_usable(st) && (st & SL_SRV_MASTER)) {
            return (int)i;
        }
    }
    return -1;
}

/* The initial connections: the primary and up to slave_connections
 * replicas, at most max_slave_connections (none with lazy_connect); more
 * are opened when a read finds no usable connected replica. false when
 * the session must be refused (the client has the error). */
static bool
connect_initial(struct rws_session *rs)
{
    const struct rws_config *c = &rs->inst->cfg;
    int m = rws_master_index(rs, !c->lazy_connect);
    unsigned slaves = 0;
    int rank;

    if (m < 0 && c->lazy_connect) {
        m = master_server(rs);
    }
    if (m < 0 && c->failure_mode == RWS_FAIL_INSTANTLY) {
        int ms = master_server(rs);

        if (ms >= 0 && sl_server_routing_full(rs->be[ms].srv)) {
            rws_send_error(rs, "Service '%s': cannot connect to master "
                           "server '%s': its max_routing_connections "
                           "(%lld) is reached (master_failure_mode="
                           "fail_instantly)",
                           sl_service_name(rs->inst->svc),
                           sl_server_name(rs->be[ms].srv),
                           (long long)sl_server_max_routing_connections(
                               rs->be[ms].srv));
            return false;
        }
        rws_send_error(rs, "Service '%s': no master server available (master_failure_mode=fail_instantly)", sl_service_name(rs->inst->svc));
        return false;
    }
    if (c->lazy_connect) {
        return true;
    }
    rank = rws_current_rank(rs);   /* the replicas': the primary's */
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        uint32_t st = sl_server_status(rs->be[i].srv);

        if (slaves >= c->max_slave_conns || slaves >= c->initial_slaves) {
            break;
        }
        if ((int)i == m || sl_server_rank(rs->be[i].srv) != rank ||
            !sl_server_is_usable(st) ||
            !(st & SL_SRV_SLAVE) || (st & (SL_SRV_DRAINING | SL_SRV_MASTER))) {
            continue;
        }
        if (rws_connect(rs, i, false) == 0) {
            slaves++;
        }
    }
    if (m < 0 && slaves == 0) {
        rws_send_error(rs, "Service '%s': no servers available",
                       sl_service_name(rs->inst->svc));
        return false;
    }
    return true;
}

static void
free_rs(struct rws_session *rs)
{
    free(rs->be);
    free(rs->ps);
    free(rs->tmp);
    free(rs->trx_log);
    sl_buf_free(rs->replay_answer);
    EVP_MD_CTX_free(rs->sha);
    free(rs);
}

static void *
rws_new_session(void *instance, struct sl_session *ses)
{
    struct rws_instance *inst = instance;
    struct rws_session *rs = calloc(1, sizeof(*rs));

    if (rs == NULL || (rs->be = calloc(inst->nservers ? inst->nservers : 1,
                                       sizeof(*rs->be))) == NULL ||
        (rs->sha = EVP_MD_CTX_new()) == NULL) {
        sl_session_send_error(ses, RWS_ERR_CODE, RWS_ERR_STATE,
                              "Out of memory");
        if (rs != NULL) {
            free_rs(rs);
        }
        return NULL;
    }
    rs->inst = inst;
    rs->ses = ses;
    rs->master = -1;
    rs->waited_on = -1;
    rs->ro_target = -1;
    rs->trx_srv = -1;
    rs->cur_target = -1;
    rs->load_target = -1;
    rs->last_used = -1;
    rs->autocommit = true;
    rs->next_ps = 1;
    rs->rotate = (unsigned)atomic_fetch_add(&inst->sessions, 1);
    rs->rnd = (uint32_t)(sl_session_id(ses) * 2654435761u) | 1u;
    for (unsigned i = 0; i < inst->nservers; i++) {
        rs->be[i].srv = inst->servers[i];
        rs->be[i].idx = i;
    }
    if (!connect_initial(rs)) {
        for (unsigned i = 0; i < inst->nservers; i++) {
            if (rws_be_live(&rs->be[i])) {
                sl_backend_close(rs->be[i].b);
                atomic_fetch_sub(&inst->stats[i].conns, 1);
            }
            rws_queue_clear(rs, &rs->be[i]);
            free(rs->be[i].q);
        }
        rws_history_free(rs);
        free_rs(rs);
        return NULL;
    }
    return rs;
}

static void
rws_free_session(void *rsession)
{
    struct rws_session *rs = rsession;

    rs->closing = true;
    rws_barrier_leave(rs);
    /* Session timers end before the session is freed (each holds a
     * reference), so these are no-ops unless free_session comes from
     * somewhere else. */
    if (rs->timer != 0) {
        sl_session_cancel_timer(rs->ses, rs->timer);
        rs->timer = 0;
    }
    if (rs->watch != 0) {
        sl_session_cancel_timer(rs->ses, rs->watch);
        rs->watch = 0;
    }
    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        struct rws_be *be = &rs->be[i];

        if (rws_be_live(be)) {
            if (sl_backend_state(be->b) != SL_BACKEND_CLOSED &&
                sl_backend_state(be->b) != SL_BACKEND_FAILED) {
                sl_backend_close(be->b);
            }
            be->b = NULL;
            atomic_fetch_sub(&rs->inst->stats[i].conns, 1);
        }
        rws_queue_clear(rs, be);
        free(be->q);
    }
    rws_ps_free_all(rs);
    rws_history_free(rs);
    rws_trx_log_clear(rs);
    sl_buf_free(rs->cur);
    sl_buf_free(rs->waiting);
    sl_buf_free(rs->gtid_buf);
    sl_buf_free(rs->held);
    free_rs(rs);
}

static void *
rws_diagnostics(void *instance)
{
    struct rws_instance *inst = instance;
    json_t *servers = json_array();
    uint64_t reads = 0, writes = 0, waits = 0, known = 0;

    for (size_t i = 0; i < inst->nservers; i++) {
        struct rws_srv_stats *s = &inst->stats[i];
        uint64_t r = RWS_SUM(inst, i, reads), w = RWS_SUM(inst, i, writes);

        reads += r;
        writes += w;
        waits += RWS_SUM(inst, i, causal_waits);
        known += RWS_SUM(inst, i, causal_known);
        json_array_append_new(
            servers,
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:f}", "id",
                      sl_server_name(inst->servers[i]), "connections",
                      (json_int_t)atomic_load(&s->conns), "current_operations",
                      (json_int_t)RWS_SUM(inst, i, ops), "route_all",
                      (json_int_t)RWS_SUM(inst, i, all), "route_master",
                      (json_int_t)w, "route_slave", (json_int_t)r,
                      "avg_response_ms",
                      (double)atomic_load(&s->resp_us) / 1000.0));
    }
    return json_pack(
        "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, "
        "s:s, s:o}",
        "connections",
        (json_int_t)atomic_load(&inst->sessions), "queries",
        (json_int_t)(reads + writes + atomic_load(&inst->route_all)),
        "route_master", (json_int_t)writes, "route_slave", (json_int_t)reads,
        "route_all",
        (json_int_t)atomic_load(&inst->route_all), "retried_reads",
        (json_int_t)atomic_load(&inst->retried_reads), "replayed_transactions",
        (json_int_t)atomic_load(&inst->replayed_trx),
        "optimistic_transactions_moved",
        (json_int_t)atomic_load(&inst->optimistic_moves),
        "prepared_statements_reused",
        (json_int_t)atomic_load(&inst->ps_reused), "causal_fallbacks",
        (json_int_t)atomic_load(&inst->causal_fallbacks), "causal_waits",
        (json_int_t)waits, "causal_known", (json_int_t)known,
        "slave_selection_criteria", criteria_names[inst->cfg.criteria],
        "causal_reads", causal_names[inst->cfg.causal_index],
        "server_query_statistics", servers);
}

static void *
rws_session_diagnostics(void *rsession)
{
    struct rws_session *rs = rsession;
    json_t *conns = json_array();

    for (unsigned i = 0; i < rs->inst->nservers; i++) {
        if (rws_be_live(&rs->be[i])) {
            json_array_append_new(conns,
                                  json_string(sl_server_name(rs->be[i].srv)));
        }
    }
    return json_pack("{s:o, s:s?, s:b, s:b, s:b, s:I, s:I}", "backends",
                     conns,
                     "master", rs->master >= 0
                                   ? sl_server_name(rs->be[rs->master].srv)
                                   : NULL,
                     "trx_open", rs->trx_active, "trx_read_only", rs->trx_ro,
                     "trx_optimistic", rws_optimistic(rs),
                     "sescmd_history", (json_int_t)rs->hist_len,
                     "prepared_statements", (json_int_t)rs->nps);
}

static const struct sl_param_spec rws_params[] = {
    {"slave_selection_criteria", SL_PARAM_ENUM, "LEAST_CURRENT_OPERATIONS",
     0, criteria_names, "How a replica is chosen for a read"},
    {"max_slave_replication_lag", SL_PARAM_DURATION, "0s", SL_PARAM_F_SECONDS,
     NULL, "Replicas lagging more (or of unknown lag) take no reads; 0: off "
     "(also max_replication_lag)"},
    {"master_accept_reads", SL_PARAM_BOOL, "false", 0, NULL,
     "The primary is a candidate for reads too"},
    {"max_slave_connections", SL_PARAM_STRING, "255", 0, NULL,
     "Replica connections per session: a count or a percentage"},
    {"slave_connections", SL_PARAM_COUNT, "255", 0, NULL,
     "Replica connections a session opens when it starts (at most "
     "max_slave_connections); more are opened when a read finds no "
     "usable connected replica"},
    {"lazy_connect", SL_PARAM_BOOL, "false", 0, NULL,
     "Connect to servers only when a statement needs them"},
    {"master_failure_mode", SL_PARAM_ENUM, "fail_on_write", 0,
     failure_names, "What a session does when the primary is lost"},
    {"retry_failed_reads", SL_PARAM_BOOL, "true", 0, NULL,
     "Retry a read on another server when its server fails"},
    {"delayed_retry", SL_PARAM_BOOL, "false", 0, NULL,
     "Hold a statement that has no server until one appears"},
    {"delayed_retry_timeout", SL_PARAM_DURATION, "10s", SL_PARAM_F_SECONDS,
     NULL, "How long delayed_retry waits"},
    {"reply_timeout", SL_PARAM_DURATION, "1h", SL_PARAM_F_SECONDS, NULL,
     "Longest a server may send nothing while the client waits for its "
     "answer; then the client gets an error and the session closes "
     "(0: wait forever)"},
    {"strict_multi_stmt", SL_PARAM_BOOL, "false", 0, NULL,
     "After a multi-statement, route everything to the primary"},
    {"strict_sp_calls", SL_PARAM_BOOL, "false", 0, NULL,
     "After a CALL, route everything to the primary"},
    {"use_sql_variables_in", SL_PARAM_ENUM, "all", 0, vars_names,
     "Where reads of user variables go"},
    {"causal_reads", SL_PARAM_ENUM, "consistent", 0, causal_names,
     "Which writes a read sees: consistent (every write acknowledged to "
     "any client of the service), read_your_writes (the session's own), "
     "MaxScale's none, local, global, fast, fast_global, universal, "
     "fast_universal"},
    {"causal_reads_timeout", SL_PARAM_DURATION, "10s", SL_PARAM_F_SECONDS,
     NULL, "Longest GTID wait (local, global, universal) before the read "
     "goes to the primary"},
    {"causal_reads_wait", SL_PARAM_DURATION, "5ms", 0, NULL,
     "causal_reads=consistent: longest GTID wait on a replica before the "
     "read goes to the primary"},
    {"transaction_replay", SL_PARAM_BOOL, "false", 0, NULL,
     "Replay a transaction interrupted by a primary failure"},
    {"transaction_replay_max_size", SL_PARAM_SIZE, "1Mi", 0, NULL,
     "Largest transaction (statement bytes) kept for replay"},
    {"transaction_replay_attempts", SL_PARAM_COUNT, "5", 0, NULL,
     "Replays of one transaction before giving up"},
    {"transaction_replay_timeout", SL_PARAM_DURATION, "0s",
     SL_PARAM_F_SECONDS, NULL,
     "Longest time a transaction's replay may take, over all its attempts "
     "(then the attempts do not count); 0: transaction_replay_attempts "
     "limits it"},
    {"transaction_replay_retry_on_deadlock", SL_PARAM_BOOL, "false", 0,
     NULL, "Replay a transaction the server rolled back for a deadlock "
     "(1213) instead of passing the error on"},
    {"transaction_replay_retry_on_mismatch", SL_PARAM_BOOL, "false", 0,
     NULL, "Replay again (within the attempts and timeouts) when a "
     "replay's results differ from the original's"},
    {"transaction_replay_safe_commit", SL_PARAM_BOOL, "true", 0, NULL,
     "A COMMIT whose answer was lost is not replayed: the client gets an "
     "error (false: replayed)"},
    {"transaction_replay_checksum", SL_PARAM_ENUM, "full", 0,
     checksum_names, "What a replay must reproduce: full (every answer), "
     "result_only (result sets and errors), no_insert_id (result_only "
     "less results of statements using LAST_INSERT_ID())"},
    {"strict_tmp_tables", SL_PARAM_BOOL, "true", 0, NULL,
     "Close the session when its primary connection is lost while it has "
     "temporary tables (false: connect to a primary again, the tables are "
     "gone)"},
    {"master_reconnection", SL_PARAM_BOOL, "true", 0, NULL,
     "A session may connect to a primary again after losing its primary "
     "connection (false: it closes when it next needs the primary; "
     "transaction_replay turns it on)"},
    {"max_sescmd_history", SL_PARAM_COUNT, "50", 0, NULL,
     "Session commands kept for replay on new connections"},
    {"prune_sescmd_history", SL_PARAM_BOOL, "true", 0, NULL,
     "Drop the oldest command when the history is full"},
    {"disable_sescmd_history", SL_PARAM_BOOL, "false", 0, NULL,
     "Keep no history (no connections opened later)"},
    /* MaxScale names not implemented (docs/configuration.md) */
    {"max_replication_lag", SL_PARAM_DURATION, "0s", SL_PARAM_F_SECONDS,
     NULL, "MaxScale's current name of max_slave_replication_lag (the same "
     "setting; set one of the two)"},
    {"optimistic_trx", SL_PARAM_BOOL, "false", 0, NULL,
     "Run read-write transactions on a replica until their first write, "
     "then replay them on the primary (implies transaction_replay)"},
    {"reuse_prepared_statements", SL_PARAM_BOOL, "false", 0, NULL,
     "A COM_STMT_PREPARE of a text the session already prepared (in the "
     "same default database) is answered with that statement, without "
     "a round trip; COM_STMT_CLOSE leaves statements open"},
    {"sync_transaction", SL_PARAM_STRING, "none", SL_PARAM_F_REFUSED,
     NULL, "not implemented"},
    SL_PARAM_END,
};

static const struct sl_router_ops rws_ops = {
    .size = sizeof(struct sl_router_ops),
    .capabilities = SL_RCAP_TRANSACTION_TRACKING | SL_RCAP_REPLY_TRACKING |
                    SL_RCAP_QUERY_KINDS,
    .create_instance = rws_create_instance,
    .destroy_instance = rws_destroy_instance,
    .new_session = rws_new_session,
    .free_session = rws_free_session,
    .route_query = rws_route_query,
    .client_reply = rws_client_reply,
    .handle_error = rws_handle_error,
    .diagnostics = rws_diagnostics,
    .session_diagnostics = rws_session_diagnostics,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_ROUTER,
    .status = SL_MODULE_GA,
    .name = "readwritesplit",
    .version = "1.0.0",
    .description = "Statement-level read/write splitting",
    .aliases = NULL,
    .params = rws_params,
    .ops = &rws_ops,
})
