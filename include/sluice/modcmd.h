/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Module commands: named operations a module offers to administrators,
 * e.g. mariadbmon's switchover, failover and rejoin. A module registers
 * them from its process_init; the admin API exposes them as
 * POST /v1/maxscale/modules/:module/:command and maxctrl as
 * `maxctrl call command MODULE COMMAND ARGS...`.
 *
 * Arguments arrive as strings, already checked against the declared
 * argument types (a monitor, server, service or filter name must exist and
 * is resolved to the object; optional arguments may be missing).
 *
 * Context: registration in the main thread; commands run in the caller's
 * thread (the admin API's), so a command touching worker-owned state must
 * post to workers, and a monitor command must hand its work to the
 * monitor's thread (see sl_monitor_run_in).
 */
#ifndef SLUICE_MODCMD_H
#define SLUICE_MODCMD_H

#include <sluice/ccdefs.h>

struct sl_monitor;
struct sl_server;
struct sl_service;
struct sl_filter_def;

enum sl_modcmd_arg_type {
    SL_MODCMD_ARG_STRING,
    SL_MODCMD_ARG_BOOL,
    SL_MODCMD_ARG_MONITOR,   /* resolved to struct sl_monitor * */
    SL_MODCMD_ARG_SERVER,    /* resolved to struct sl_server * */
    SL_MODCMD_ARG_SERVICE,   /* resolved to struct sl_service * */
    SL_MODCMD_ARG_FILTER,    /* resolved to struct sl_filter_def * */
};

struct sl_modcmd_arg_spec {
    enum sl_modcmd_arg_type type;
    bool optional;
    const char *description;
};

struct sl_modcmd_arg {
    enum sl_modcmd_arg_type type;
    const char *string;            /* the text given, NULL if omitted */
    union {
        bool boolean;
        struct sl_monitor *monitor;
        struct sl_server *server;
        struct sl_service *service;
        struct sl_filter_def *filter;
    } v;
};

/*
 * A command: returns 0 on success (optionally setting *output to a json_t *
 * the caller frees), or a negative value with *error set to a malloc'd
 * message the caller frees.
 */
typedef int (*sl_modcmd_fn)(const struct sl_modcmd_arg *args, int nargs,
                            void **output, char **error);

/*
 * Whether a command changes anything. The REST API runs an ACTIVE command
 * only for a POST by an admin account (a GET gets 405, a read-only user
 * 403); a PASSIVE one also for GET and for read-only users, so it must not
 * change state of any kind. Anything not PASSIVE counts as ACTIVE.
 */
enum sl_modcmd_kind {
    SL_MODCMD_ACTIVE,   /* changes something: admin POST only */
    SL_MODCMD_PASSIVE,  /* only reports: GET, any user */
};

/* Register module.command. 0, -EEXIST or -ENOMEM. Main thread. */
SL_EXPORT int sl_modcmd_register(const char *module, const char *command,
                                 enum sl_modcmd_kind kind, sl_modcmd_fn fn,
                                 const struct sl_modcmd_arg_spec *args,
                                 int nargs, const char *description);

/*
 * Find and call module.command with string arguments: checks the count and
 * types, resolves object names, calls fn. Trusted callers only: it does not
 * check the command's kind (the REST API does). 0 on success; -ENOENT (no such
 * command), -EINVAL (bad arguments; *error says which) or the command's
 * own error. Any thread.
 */
SL_EXPORT int sl_modcmd_call(const char *module, const char *command,
                             const char *const *argv, int argc,
                             void **output, char **error);

/* Iterate registered commands: false past the end; *it starts at 0. */
SL_EXPORT bool sl_modcmd_next(size_t *it, const char **module,
                              const char **command, const char **description,
                              enum sl_modcmd_kind *kind,
                              const struct sl_modcmd_arg_spec **args,
                              int *nargs);

#endif
