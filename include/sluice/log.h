/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging. The macros test the level before evaluating their arguments.
 * Each .c file may define SL_LOG_TAG before including this header; it is
 * printed in every line ("[readconnroute]").
 *
 * Context: any thread. A line is written with one write(2) so lines from
 * different threads never interleave.
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stdatomic.h>
#include <sluice/ccdefs.h>

enum sl_log_level {
    SL_LOG_ERROR = 0,
    SL_LOG_WARN = 1,
    SL_LOG_NOTICE = 2,
    SL_LOG_INFO = 3,
    SL_LOG_DEBUG = 4,
};

#ifndef SL_LOG_TAG
#define SL_LOG_TAG NULL
#endif

struct sl_session;

/*
 * The most verbose level written (SL_LOG_ERROR..SL_LOG_DEBUG; -1: none).
 * Read by sl_log_enabled() inline; set by the core only (configuration,
 * REST). Modules read it, never store to it.
 */
extern SL_EXPORT atomic_int sl_log_max_level;

/*
 * Nonzero when session_trace is on: the sl_log_ses_* macros then call
 * sl_log_session_message at every level, which keeps the line in the
 * session's trace even when the log level leaves it out of the log.
 * Set by the core only, at start-up.
 */
extern SL_EXPORT atomic_int sl_log_session_trace;

/*
 * Write one log line at level from file:line under tag (SL_LOG_TAG). Use
 * the sl_log_* macros, which test sl_log_enabled() first so the arguments
 * of a disabled level are not evaluated. Any thread.
 */
SL_EXPORT void sl_log_message(int level, const char *tag, const char *file,
                              int line, const char *fmt, ...) SL_PRINTF(5, 6);
/* As sl_log_message, prefixed with the session id, user and client address;
 * the line is also kept in the session's trace (session_trace), whatever
 * the log level. */
SL_EXPORT void sl_log_session_message(int level, const char *tag,
                                      const struct sl_session *ses,
                                      const char *fmt, ...) SL_PRINTF(4, 5);

/*
 * Log rotation (SIGHUP, `maxctrl rotate logs`) bumps this counter after the
 * core has reopened its own log. A module that keeps files of its own (the
 * qlafilter's query logs) compares it with the value it saw when it opened
 * them and reopens them by path when it changed; each file is reopened by
 * the thread that writes it, so no cross-thread signalling is needed. Any
 * thread.
 */
SL_EXPORT uint64_t sl_log_rotation_count(void);

/*
 * Copy the NUL-terminated s into out[cap] (always terminated, truncated
 * if need be) with every control character and DEL written as \xNN, so
 * client-supplied text (user names, database names, queries) cannot
 * break a log line or forge one. Bytes from 0x80 up pass (UTF-8). The
 * core's own log applies this to every message and session prefix; use it
 * for files a module writes itself. Returns out. Any thread.
 */
SL_EXPORT const char *sl_log_escape(char *out, size_t cap, const char *s);

static inline bool
sl_log_enabled(int level)
{
    return level <=
           atomic_load_explicit(&sl_log_max_level, memory_order_relaxed);
}

#define SL_LOG_(lvl, ...)                                                      \
    do {                                                                       \
        if (sl_log_enabled(lvl)) {                                             \
            sl_log_message(lvl, SL_LOG_TAG, __FILE__, __LINE__, __VA_ARGS__);  \
        }                                                                      \
    } while (0)

#define SL_LOG_SES_(lvl, ses, ...)                                             \
    do {                                                                       \
        if (sl_log_enabled(lvl) ||                                             \
            atomic_load_explicit(&sl_log_session_trace,                        \
                                 memory_order_relaxed)) {                      \
            sl_log_session_message(lvl, SL_LOG_TAG, ses, __VA_ARGS__);         \
        }                                                                      \
    } while (0)

#define sl_log_error(...) SL_LOG_(SL_LOG_ERROR, __VA_ARGS__)
#define sl_log_warn(...) SL_LOG_(SL_LOG_WARN, __VA_ARGS__)
#define sl_log_notice(...) SL_LOG_(SL_LOG_NOTICE, __VA_ARGS__)
#define sl_log_info(...) SL_LOG_(SL_LOG_INFO, __VA_ARGS__)
#define sl_log_debug(...) SL_LOG_(SL_LOG_DEBUG, __VA_ARGS__)

#define sl_log_ses_error(ses, ...) SL_LOG_SES_(SL_LOG_ERROR, ses, __VA_ARGS__)
#define sl_log_ses_warn(ses, ...) SL_LOG_SES_(SL_LOG_WARN, ses, __VA_ARGS__)
#define sl_log_ses_notice(ses, ...) SL_LOG_SES_(SL_LOG_NOTICE, ses, __VA_ARGS__)
#define sl_log_ses_info(ses, ...) SL_LOG_SES_(SL_LOG_INFO, ses, __VA_ARGS__)
#define sl_log_ses_debug(ses, ...) SL_LOG_SES_(SL_LOG_DEBUG, ses, __VA_ARGS__)

/*
 * Copy text into out (outlen > 0: always terminated, truncated to fit) with
 * every password replaced by *****: the quoted literal after the word
 * PASSWORD (MASTER_PASSWORD='x', PASSWORD('x'), IDENTIFIED BY PASSWORD
 * 'hash') or IDENTIFIED BY, case-insensitive; and every occurrence of
 * secret (NULL or "": none), for text that quotes a password without a
 * keyword, such as a server's error message. For SQL and errors that go
 * to a log line, a command's error or a REST answer. Returns out. Any
 * thread.
 */
SL_EXPORT char *sl_log_mask_passwords(const char *text, const char *secret,
                                      char *out, size_t outlen);

/* Log at most once per call site for the life of the process. */
#define sl_log_warn_once(...)                                                  \
    do {                                                                       \
        static atomic_flag once_ = ATOMIC_FLAG_INIT;                           \
        if (!atomic_flag_test_and_set(&once_)) {                               \
            sl_log_warn(__VA_ARGS__);                                          \
        }                                                                      \
    } while (0)

#endif
