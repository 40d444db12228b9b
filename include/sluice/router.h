/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router modules.
 *
 * A router instance is created per service from its parameters; a router
 * session per client session. Statements arrive whole (all packets of one
 * command) through route_query; answers arrive per chunk of complete
 * packets through client_reply with the reply tracker's view.
 *
 * Every session callback runs on the session's worker (worker-owned).
 * create_instance/destroy_instance run in the main thread; diagnostics
 * from the admin thread (read only atomics there).
 */
#ifndef SLUICE_ROUTER_H
#define SLUICE_ROUTER_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>
#include <sluice/reply.h>

struct sl_service;
struct sl_session;
struct sl_backend;
struct sl_params;

enum sl_router_caps {
    SL_RCAP_STMT_INPUT = 1u << 0,   /* wants whole statements (always true
                                     * in ABI 1: input is per command) */
    SL_RCAP_TRANSACTION_TRACKING = 1u << 1,
    SL_RCAP_SESSION_STATE_TRACKING = 1u << 2,
    SL_RCAP_REPLY_TRACKING = 1u << 3,
    /* The router counts every COM_QUERY by kind itself
     * (sl_session_count_query). Without it the core counts them from
     * the digest's lexing pass when query_digests=true (docs/metrics.md);
     * a router that sets it must count every COM_QUERY it gets. */
    SL_RCAP_QUERY_KINDS = 1u << 4,
};

struct sl_router_ops {
    size_t size;   /* sizeof(struct sl_router_ops) the module was built with */
    uint64_t capabilities;   /* enum sl_router_caps */

    /* NULL on error (logged). Main thread. */
    void *(*create_instance)(struct sl_service *svc,
                             const struct sl_params *params);
    void (*destroy_instance)(void *instance);

    /* A client session starts: pick servers and sl_backend_connect() to
     * them. NULL refuses the session; the router should have called
     * sl_session_send_error() to say why. */
    void *(*new_session)(void *instance, struct sl_session *ses);
    /* Close backends; the router session is freed right after. */
    void (*free_session)(void *rsession);

    /* Route one command; takes buf. SL_OK, or SL_ERROR to close the
     * session (send an error first if the client should get one). */
    int (*route_query)(void *rsession, struct sl_buf *buf);
    /* A piece of a backend's answer; takes buf. Pass it on with
     * sl_session_reply() (or drop it). SL_OK or SL_ERROR. */
    int (*client_reply)(void *rsession, struct sl_backend *b,
                        struct sl_buf *buf, const struct sl_reply *reply);
    /* Backend b failed (errpkt: the server's error or NULL). Return true
     * if the session can go on (e.g. another backend took over), false to
     * close it; the core then sends errpkt (or a generic error) to the
     * client if an answer was pending or the session was starting. */
    bool (*handle_error)(void *rsession, struct sl_backend *b,
                         const struct sl_buf *errpkt, const char *reason);

    /* Instance diagnostics as a json_t * (jansson), NULL if none. */
    void *(*diagnostics)(void *instance);
    /* Session diagnostics as a json_t *, NULL if none. */
    void *(*session_diagnostics)(void *rsession);
};

#endif
