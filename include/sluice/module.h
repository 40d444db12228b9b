/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The module descriptor: what every loadable module (.so) exports.
 *
 * A module exports one function, SL_MODULE_ENTRY_NAME, returning a pointer
 * to a static struct sl_module. The loader (dlopen from module_dir, file
 * lib<name>.so) refuses, naming the file:
 *   - a wrong magic number,
 *   - another ABI major version, or a minor newer than the core's,
 *   - another build signature (struct layout of the ABI types),
 *   - a type other than the one the configuration asked for.
 * Ops tables start with their own size so a minor ABI version can append
 * callbacks; the core never calls past ops->size.
 *
 * Declare a module with SL_MODULE_DEFINE(...) and designated initializers:
 *
 *     static const struct sl_router_ops ops = {
 *         .size = sizeof(ops),
 *         .create_instance = ...,
 *     };
 *     SL_MODULE_DEFINE({
 *         .type = SL_MODULE_ROUTER,
 *         .name = "readconnroute",
 *         ...
 *         .ops = &ops,
 *     });
 */
#ifndef SLUICE_MODULE_H
#define SLUICE_MODULE_H

#include <sluice/ccdefs.h>
#include <sluice/params.h>

#define SL_MODULE_MAGIC 0x534c4d44u /* "SLMD" */

/*
 * The module ABI version. What it covers: the functions and variables
 * libsluice exports (exactly include/sluice/abi-symbols.txt, the output of
 * `nm -D --defined-only libsluice.so`; scripts/abi-check fails the test
 * command when the two differ), the layouts of the ABI structs (the build
 * signature below) and the meaning of both. libsluice is built with hidden
 * visibility: only what a header marks SL_EXPORT is exported.
 *
 * The rule, applied in the same commit as the change to abi-symbols.txt:
 *   - a symbol added, or a callback appended to an ops table: minor + 1;
 *   - a symbol removed or renamed, a signature or a meaning changed, a
 *     struct's layout changed: major + 1, minor back to 0.
 * Record each decision in the history below (newest last).
 *
 *   1.0  the first descriptor; every non-static core function exported.
 *   2.0  (the first release with an ABI boundary; everything below came in
 *        together, so one major version)
 *        hidden visibility: the 135 internal symbols (107 sl__, 28 admin_)
 *        are no longer exported; sl__log, sl__log_ses and sl__log_level
 *        renamed sl_log_message, sl_log_session_message and
 *        sl_log_max_level; sl_daemon_main added (the daemon's entry point,
 *        not for modules); sl_dcb_post (run work in a DCB's context, under
 *        its session's lock in the shared model); sl_mdb_make_resultset_for
 *        (answers for clients with extended metadata);
 *        sl_kernel_forwarding_available, sl_session_request_splice and
 *        sl_session_splice_stats (kernel forwarding);
 *        sl_worker_shared_model; struct sl_reply gained last_seq (a layout
 *        change).
 *   2.1  sl_monitor_passive added (the global passive mode, read by
 *        mariadbmon every tick); sl_service_auth_failed and
 *        sl_auth_failure_name (logins refused, by reason, for /metrics);
 *        sl_monitor_count_op and sl_monitor_count_error (monitor
 *        operations and loop errors); sl_session_count_query (statements
 *        by kind, from routers).
 *   2.2  sl_dcb_set_codec and sl_dcb_has_codec (a transform between a
 *        DCB's socket and its queues: the MariaDB protocol compression).
 *   2.3  sl_session_add_timer and sl_session_cancel_timer (a timer that
 *        runs under the session's lock and keeps the session allocated:
 *        safe in event_model=shared, unlike a plain worker timer);
 *        router capability SL_RCAP_QUERY_KINDS (a new flag bit): the core
 *        now counts statements by kind for routers without it, so a
 *        router that calls sl_session_count_query must set it (else they
 *        count twice).
 *   2.4  struct sl_protocol_ops gained backend_park and backend_reuse
 *        (appended, optional: backend connection pooling; the loader
 *        accepts protocol ops tables of the 2.3 size).
 *   2.5  struct sl_protocol_ops gained backend_forwarded_running
 *        (appended after the 2.4 members: kernel forwarding tells the
 *        protocol a statement it forwarded may still run, for
 *        kill_on_client_close); classifier bit SL_QC_PREV_RESULT.
 *   2.6  sl_server_mysql_connect (administrative connections through
 *        the server's extra_port).
 *   2.7  sl_server_rank (the server parameter rank, live),
 *        sl_server_max_routing_connections and sl_server_routing_full
 *        (the server parameter max_routing_connections).
 *   2.8  sl_listener_init_sql (the statements of a listener's
 *        connection_init_sql_file, read once when it is loaded);
 *        sl_log_session_trace (session_trace: the sl_log_ses_* macros
 *        also call the core when the level is off, for the session's
 *        trace; a module built against 2.7 or older just leaves its
 *        disabled levels out of the trace).
 */
#define SL_MODULE_ABI_MAJOR 2
#define SL_MODULE_ABI_MINOR 8

enum sl_module_type {
    SL_MODULE_PROTOCOL = 1,
    SL_MODULE_ROUTER = 2,
    SL_MODULE_FILTER = 3,
    SL_MODULE_MONITOR = 4,
    SL_MODULE_AUTHENTICATOR = 5,
};

enum sl_module_status {
    SL_MODULE_ALPHA,
    SL_MODULE_BETA,
    SL_MODULE_GA,
    SL_MODULE_EXPERIMENTAL,
};

/*
 * The build signature: sizes of the ABI structs mixed into one number, so a
 * module built against different headers is refused even when someone
 * forgot to bump the ABI version.
 */
#define SL_MODULE_SIGNATURE                                                    \
    ((uint32_t)(sizeof(struct sl_buf) * 1u + sizeof(struct sl_seg) * 7u +      \
                sizeof(struct sl_block) * 31u +                                \
                sizeof(struct sl_param_spec) * 127u +                          \
                sizeof(struct sl_reply) * 8191u))

struct sl_module {
    uint32_t magic;              /* SL_MODULE_MAGIC */
    uint16_t abi_major;          /* SL_MODULE_ABI_MAJOR */
    uint16_t abi_minor;          /* SL_MODULE_ABI_MINOR */
    uint32_t signature;          /* SL_MODULE_SIGNATURE */
    enum sl_module_type type;
    enum sl_module_status status;
    const char *name;            /* lowercase; the file is lib<name>.so */
    const char *version;         /* the module's own version, free text */
    const char *description;
    const char *const *aliases;  /* other accepted names (NULL-terminated),
                                  * e.g. "MariaDBClient"; may be NULL */
    const struct sl_param_spec *params;  /* SL_PARAM_END-terminated or NULL */
    /* Optional hooks: process_init runs once in the main thread after
     * loading (0 or negative errno), worker_init in each worker thread. */
    int (*process_init)(void);
    void (*process_finish)(void);
    int (*worker_init)(void);
    void (*worker_finish)(void);
    const void *ops;             /* struct sl_<type>_ops for the type */
    void *reserved[4];           /* zero; for ABI minor growth */
};

#define SL_MODULE_ENTRY_NAME "sl_module_entry"

#include <sluice/buf-t.h>
#include <sluice/reply.h>

#define SL_MODULE_DEFINE(...)                                                  \
    SL_EXPORT const struct sl_module *sl_module_entry(void);                   \
    const struct sl_module *sl_module_entry(void)                              \
    {                                                                          \
        static const struct sl_module info_ = __VA_ARGS__;                     \
        return &info_;                                                         \
    }

/* Fill the fixed header fields inside SL_MODULE_DEFINE({ SL_MODULE_HEADER,
 * .type = ..., ... }). */
#define SL_MODULE_HEADER                                                       \
    .magic = SL_MODULE_MAGIC, .abi_major = SL_MODULE_ABI_MAJOR,                \
    .abi_minor = SL_MODULE_ABI_MINOR, .signature = SL_MODULE_SIGNATURE

#endif
