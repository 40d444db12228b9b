/*
 * Filter modules: one step in a service's chain (filters=a|b|c, in that
 * order). A filter sees each command on the way down and each piece of an
 * answer on the way up, and passes it on, rewrites it, answers itself or
 * drops it.
 *
 *   route_query(fs, buf)  ... sl_filter_route_next(fs, buf)  -> next filter
 *                                                               or router
 *   client_reply(fs, buf, reply) ... sl_filter_reply_next(fs, buf, reply)
 *                                                -> previous filter / client
 *
 * A filter answers a command itself by calling sl_filter_reply_next() from
 * route_query with a complete answer (reply->complete set).
 *
 * Every session callback runs on the session's worker (worker-owned).
 * This is the API third parties write against: ABI major changes only when
 * a callback's meaning changes; new callbacks are appended (minor).
 */
#ifndef SLUICE_FILTER_H
#define SLUICE_FILTER_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>
#include <sluice/reply.h>

struct sl_session;
struct sl_filter_session;   /* the core's per-session chain link */
struct sl_params;
struct sl_filter_def;

struct sl_filter_ops {
    size_t size;   /* sizeof(struct sl_filter_ops) the module was built with */

    /* NULL on error (logged). Main thread. */
    void *(*create_instance)(const char *name, const struct sl_params *p);
    void (*destroy_instance)(void *instance);
    /* Per-session state; NULL refuses the session. */
    void *(*new_session)(void *instance, struct sl_session *ses,
                         struct sl_filter_session *fs);
    void (*free_session)(void *fsession);
    /* Takes buf. SL_OK or SL_ERROR (closes the session). */
    int (*route_query)(void *fsession, struct sl_buf *buf);
    /* Takes buf. SL_OK or SL_ERROR. */
    int (*client_reply)(void *fsession, struct sl_buf *buf,
                        const struct sl_reply *reply);
    void *(*diagnostics)(void *instance);   /* json_t * or NULL */
};

SL_EXPORT int sl_filter_route_next(struct sl_filter_session *fs,
                                   struct sl_buf *buf);
SL_EXPORT int sl_filter_reply_next(struct sl_filter_session *fs,
                                   struct sl_buf *buf,
                                   const struct sl_reply *reply);
SL_EXPORT struct sl_session *sl_filter_session_session(
    const struct sl_filter_session *fs);

#endif
