/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readconnroute: connection-based load balancing, as in MaxScale.
 *
 * Each client session gets one backend, chosen when the session starts and
 * kept for its whole life; every command is passed through unchanged. The
 * router parameter router_options says which servers may be chosen
 * (master, slave, running, synced; see rcr_select.h for the exact rules and
 * the least-connections choice weighted by the servers' `weight`).
 *
 * Counting: the instance keeps its own count of current sessions per server
 * (atomics: new_session and free_session of any worker update them, the
 * admin thread reads them for diagnostics). Selection uses these counts,
 * so a service balances its own sessions whatever other services do with
 * the same servers.
 *
 * Hot path: route_query does no copy, allocation or lock. A master-only
 * session pays one atomic load of the server status per command, so that a
 * session never keeps writing to a server the monitor demoted (MaxScale
 * closes such a session on its next command with an error).
 *
 * Context: create/destroy_instance in the main thread; session callbacks on
 * the session's worker; diagnostics in the admin thread (atomics only).
 */
#define SL_LOG_TAG "readconnroute"

#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/router.h>
#include <sluice/server.h>
#include <sluice/service.h>
#include <sluice/session.h>

#include "rcr_select.h"
#include "rcr_splice.h"

/* Snapshot size kept on the stack in new_session; larger services
 * allocate. */
#define RCR_STACK_SERVERS 64

/* MySQL ER_UNKNOWN_ERROR: MaxScale answers routing failures with it. */
#define RCR_ERR_CODE 1105
#define RCR_ERR_STATE "HY000"

/* What a master-only session requires of its server on every command. */
#define RCR_MASTER_MASK (SL_SRV_MASTER | SL_SRV_RUNNING | SL_SRV_MAINT)
#define RCR_MASTER_OK (SL_SRV_MASTER | SL_SRV_RUNNING)

static const char *const rcr_option_names[] = {
    "master", "slave", "running", "synced", NULL,
};

struct rcr_instance {
    struct sl_service *svc;
    struct sl_server *const *servers;   /* the service's, config order */
    size_t nservers;
    uint32_t options;                   /* enum rcr_option bits */
    int64_t max_lag_s;                  /* max_replication_lag; 0 off */
    bool no_master;                     /* master_accept_reads=false and
                                         * router_options without master */
    char options_str[64];               /* "master,slave" for diagnostics */
    atomic_llong *sessions;             /* [nservers]: current sessions */
    atomic_ullong total_sessions;       /* sessions ever started */
    int kfwd_mode;                      /* kernel_forwarding: 0 auto */
    bool kfwd;                          /* kernel forwarding (rcr_splice.c) */
};

struct rcr_session {
    struct rcr_instance *inst;
    struct sl_session *ses;
    struct sl_backend *backend;
    struct sl_server *server;
    size_t index;                       /* of server in inst->servers */
    bool is_write;   /* server was Master when chosen: count as writes */
    bool check_master;   /* master-only: close if the role is lost */
    bool failed;         /* handle_error ran: the core owns the backend */
};

static void
options_to_str(uint32_t options, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; rcr_option_names[i] != NULL; i++) {
        if (!(options & (1u << i))) {
            continue;
        }
        int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                         rcr_option_names[i]);
        if (n < 0 || (size_t)n >= len - used) {
            break;
        }
        used += (size_t)n;
    }
}

static void *
rcr_create_instance(struct sl_service *svc, const struct sl_params *params)
{
    struct rcr_instance *inst = calloc(1, sizeof(*inst));

    if (inst == NULL) {
        sl_log_error("Service '%s': out of memory", sl_service_name(svc));
        return NULL;
    }
    inst->svc = svc;
    inst->kfwd_mode = sl_params_enum(params, "kernel_forwarding");
    inst->kfwd = rcr_kfwd_enabled(params);
    inst->servers = sl_service_servers(svc, &inst->nservers);
    inst->options =
        (uint32_t)sl_params_enum_mask(params, "router_options") & 0xfu;
    inst->max_lag_s =
        (int64_t)(sl_params_duration_ms(params, "max_replication_lag") /
                  1000);
    if (inst->options == 0) {
        inst->options = RCR_OPT_RUNNING;
    }
    inst->no_master = !sl_params_bool(params, "master_accept_reads") &&
                      !(inst->options & RCR_OPT_MASTER);
    options_to_str(inst->options, inst->options_str,
                   sizeof(inst->options_str));
    inst->sessions = calloc(inst->nservers ? inst->nservers : 1,
                            sizeof(*inst->sessions));
    if (inst->sessions == NULL) {
        sl_log_error("Service '%s': out of memory", sl_service_name(svc));
        free(inst);
        return NULL;
    }
    for (size_t i = 0; i < inst->nservers; i++) {
        atomic_init(&inst->sessions[i], 0);
    }
    atomic_init(&inst->total_sessions, 0);
    return inst;
}

static void
rcr_destroy_instance(void *instance)
{
    struct rcr_instance *inst = instance;

    if (inst == NULL) {
        return;
    }
    free(inst->sessions);
    free(inst);
}

/* Snapshot the servers and pick one; -1 when none can be used. */
static int
choose_server(struct rcr_instance *inst, uint32_t *status_out)
{
    struct rcr_candidate stack[RCR_STACK_SERVERS] = {0};
    struct rcr_candidate *c = stack;
    int idx;

    if (inst->nservers > RCR_STACK_SERVERS) {
        c = malloc(inst->nservers * sizeof(*c));
        if (c == NULL) {
            return -1;
        }
    }
    for (size_t i = 0; i < inst->nservers; i++) {
        c[i].status = sl_server_status(inst->servers[i]);
        if (inst->no_master && (c[i].status & SL_SRV_MASTER)) {
            c[i].status = 0;   /* not a candidate, not even the fallback */
        }
        c[i].weight = sl_server_weight(inst->servers[i]);
        c[i].rank = sl_server_rank(inst->servers[i]);
        c[i].sessions = atomic_load_explicit(&inst->sessions[i],
                                             memory_order_relaxed);
        c[i].lag = inst->max_lag_s > 0
                       ? sl_server_replication_lag(inst->servers[i])
                       : SL_SERVER_LAG_UNKNOWN;
    }
    idx = rcr_select(c, inst->nservers, inst->options, inst->max_lag_s);
    if (idx >= 0) {
        *status_out = c[idx].status;
    }
    if (c != stack) {
        free(c);
    }
    return idx;
}

/*
 * Start a session: choose a server and open the backend. When no server
 * qualifies or the connection cannot even start, the client gets an error
 * and the session is refused (NULL). Worker-owned.
 */
static void *
rcr_new_session(void *instance, struct sl_session *ses)
{
    struct rcr_instance *inst = instance;
    uint32_t status = 0;
    int idx = choose_server(inst, &status);
    char msg[512];

    if (idx < 0) {
        snprintf(msg, sizeof(msg), "Service '%s' has no eligible servers",
                 sl_service_name(inst->svc));
        sl_log_ses_error(ses, "%s (router_options=%s)", msg,
                         inst->options_str);
        sl_session_send_error(ses, RCR_ERR_CODE, RCR_ERR_STATE, msg);
        return NULL;
    }

    struct rcr_session *rs = calloc(1, sizeof(*rs));
    if (rs == NULL) {
        sl_session_send_error(ses, RCR_ERR_CODE, RCR_ERR_STATE,
                              "Out of memory");
        return NULL;
    }
    rs->inst = inst;
    rs->ses = ses;
    rs->index = (size_t)idx;
    rs->server = inst->servers[idx];
    rs->is_write = (status & SL_SRV_MASTER) != 0;
    rs->check_master = inst->options == RCR_OPT_MASTER;

    /* Count before connecting so concurrent choices already see it. */
    atomic_fetch_add_explicit(&inst->sessions[idx], 1, memory_order_relaxed);
    rs->backend = sl_backend_connect(ses, rs->server);
    if (rs->backend == NULL) {
        atomic_fetch_sub_explicit(&inst->sessions[idx], 1,
                                  memory_order_relaxed);
        if (sl_server_routing_full(rs->server)) {
            snprintf(msg, sizeof(msg), "Could not connect to server '%s' "
                     "of service '%s': its max_routing_connections (%lld) "
                     "is reached", sl_server_name(rs->server),
                     sl_service_name(inst->svc),
                     (long long)sl_server_max_routing_connections(
                         rs->server));
        } else {
            snprintf(msg, sizeof(msg), "Could not connect to server '%s' "
                     "of service '%s'", sl_server_name(rs->server),
                     sl_service_name(inst->svc));
        }
        sl_session_send_error(ses, RCR_ERR_CODE, RCR_ERR_STATE, msg);
        free(rs);
        return NULL;
    }
    atomic_fetch_add_explicit(&inst->total_sessions, 1, memory_order_relaxed);
    rcr_kfwd_session(inst->kfwd, ses, rs->backend, rs->check_master);
    sl_log_ses_info(ses, "Routing to server '%s'", sl_server_name(rs->server));
    return rs;
}

static void
rcr_free_session(void *rsession)
{
    struct rcr_session *rs = rsession;

    /* A failed backend is closed by the core with the session; touching
     * it here could race with that. */
    if (rs->backend != NULL && !rs->failed &&
        sl_backend_state(rs->backend) != SL_BACKEND_CLOSED) {
        sl_backend_close(rs->backend);
    }
    rs->backend = NULL;
    atomic_fetch_sub_explicit(&rs->inst->sessions[rs->index], 1,
                              memory_order_relaxed);
    free(rs);
}

/* Cold path of route_query: the master-only session's server is no longer
 * a usable master. Takes buf. */
static int
master_lost(struct rcr_session *rs, struct sl_buf *buf)
{
    char msg[512];

    sl_buf_free(buf);
    snprintf(msg, sizeof(msg), "Server '%s' is no longer the master of service '%s', closing the session",
             sl_server_name(rs->server), sl_service_name(rs->inst->svc));
    sl_log_ses_warn(rs->ses, "%s", msg);
    sl_session_send_error(rs->ses, RCR_ERR_CODE, RCR_ERR_STATE, msg);
    return SL_ERROR;
}

/*
 * Pass one command to the session's backend; takes buf. SL_OK, or
 * SL_ERROR when the backend is gone or a master-only session's server lost
 * its role (the client then has an error). Worker-owned, hot path.
 */
static int
rcr_route_query(void *rsession, struct sl_buf *buf)
{
    struct rcr_session *rs = rsession;

    if (rs->check_master) {
        uint32_t st = sl_server_status(rs->server);
        if (SL_UNLIKELY((st & RCR_MASTER_MASK) != RCR_MASTER_OK)) {
            return master_lost(rs, buf);
        }
    }
    sl_server_count_route(rs->server, rs->is_write);
    return sl_backend_write(rs->backend, buf);
}

static int
rcr_client_reply(void *rsession, struct sl_backend *b, struct sl_buf *buf,
                 const struct sl_reply *reply)
{
    struct rcr_session *rs = rsession;

    return sl_session_reply(rs->ses, buf, reply);
}

/* The only backend failed: nothing to fail over to, the session closes and
 * the core tells the client. */
static bool
rcr_handle_error(void *rsession, struct sl_backend *b,
                 const struct sl_buf *errpkt, const char *reason)
{
    struct rcr_session *rs = rsession;

    rs->failed = true;
    sl_log_ses_info(rs->ses, "Server '%s' failed: %s",
                    sl_server_name(rs->server), reason ? reason : "unknown");
    return false;
}

static void *
rcr_diagnostics(void *instance)
{
    struct rcr_instance *inst = instance;
    json_t *servers = json_array();

    for (size_t i = 0; i < inst->nservers; i++) {
        json_t *s = json_pack(
            "{s:s, s:I, s:i}", "name", sl_server_name(inst->servers[i]),
            "current_sessions",
            (json_int_t)atomic_load(&inst->sessions[i]), "weight",
            sl_server_weight(inst->servers[i]));
        json_array_append_new(servers, s);
    }
    return json_pack("{s:s, s:I, s:I, s:o, s:o}", "router_options",
                     inst->options_str, "max_replication_lag",
                     (json_int_t)inst->max_lag_s, "total_sessions",
                     (json_int_t)atomic_load(&inst->total_sessions),
                     "servers", servers, "kernel_forwarding",
                     rcr_kfwd_json(inst->kfwd_mode, inst->kfwd));
}

static void *
rcr_session_diagnostics(void *rsession)
{
    struct rcr_session *rs = rsession;

    return json_pack("{s:s, s:b}", "server", sl_server_name(rs->server),
                     "master", rs->is_write);
}

static const struct sl_param_spec rcr_params[] = {
    {"router_options", SL_PARAM_ENUM_MASK, "running", 0, rcr_option_names,
     "Roles a server must have to be chosen: master, slave, running, "
     "synced (any of the listed)"},
    {"kernel_forwarding", SL_PARAM_ENUM, "auto", 0, rcr_kfwd_names,
     "auto: once a session has started, forward its bytes in the kernel "
     "(BPF sockhash) when nothing needs to see them (KILL, COM_QUIT and "
     "COM_CHANGE_USER still reach Sluice; no query digests); off: always "
     "in user space"},
    {"max_replication_lag", SL_PARAM_DURATION, "0s", SL_PARAM_F_SECONDS,
     NULL, "New sessions avoid a replica whose lag (as the monitor measures "
     "it) is unknown or larger; the primary when none qualifies; 0: off"},
    {"master_accept_reads", SL_PARAM_BOOL, "true", 0, NULL,
     "false: a service whose router_options lack master never uses the "
     "primary (not even when no replica is usable: the session is "
     "refused); no effect with router_options=master"},
    SL_PARAM_END,
};

static const struct sl_router_ops rcr_ops = {
    .size = sizeof(struct sl_router_ops),
    .capabilities = 0,
    .create_instance = rcr_create_instance,
    .destroy_instance = rcr_destroy_instance,
    .new_session = rcr_new_session,
    .free_session = rcr_free_session,
    .route_query = rcr_route_query,
    .client_reply = rcr_client_reply,
    .handle_error = rcr_handle_error,
    .diagnostics = rcr_diagnostics,
    .session_diagnostics = rcr_session_diagnostics,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_ROUTER,
    .status = SL_MODULE_GA,
    .name = "readconnroute",
    .version = "1.0.0",
    .description = "Connection-based load balancing: one server per session",
    .aliases = NULL,
    .params = rcr_params,
    .ops = &rcr_ops,
})
