/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: one line per message, written with a single write(2) so lines
 * from different threads never interleave, to a file (append; created 0640:
 * lines may name accounts and hosts, never passwords) or to
 * stdout. SIGHUP reopens the file by path (log rotation).
 *
 *   2024-05-01 12:00:00.123   error : [tag] message
 *   2024-05-01 12:00:00.124   info  : [session] [42] bob@10.0.0.5: text
 *
 * Every message, and the session prefix, is escaped (sl_log_escape):
 * client-supplied strings may hold newlines or terminal escapes, and a log
 * line must stay one line that says only what Sluice wrote.
 *
 * Context: any thread. The current fd is an atomic int; a reopen swaps it
 * and closes the old one after a short grace, never under a writer's feet
 * in practice (a write on a just-closed fd fails harmlessly with EBADF).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sluice/log.h>

#include "dcb_int.h"
#include "history.h"

#define LINE_MAX_LEN 8192

atomic_int sl_log_max_level = SL_LOG_NOTICE;
atomic_int sl_log_session_trace;

static atomic_int log_fd = STDOUT_FILENO;
static char log_path[4096];
static pthread_mutex_t reopen_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_ullong rotations;   /* sl__log_reopen calls, for modules */

static const char *const level_names[] = {
    [SL_LOG_ERROR] = "error",  [SL_LOG_WARN] = "warning",
    [SL_LOG_NOTICE] = "notice", [SL_LOG_INFO] = "info",
    [SL_LOG_DEBUG] = "debug",
};

static int
open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

    return fd < 0 ? -errno : fd;
}

int
sl__log_init(const char *path, int level)
{
    int fd = STDOUT_FILENO;
    int old;

    if (path != NULL && path[0] != '\0') {
        fd = open_log(path);
        if (fd < 0) {
            return fd;
        }
        snprintf(log_path, sizeof(log_path), "%s", path);
    } else {
        log_path[0] = '\0';
    }
    if (level < SL_LOG_ERROR) {
        level = SL_LOG_ERROR;
    } else if (level > SL_LOG_DEBUG) {
        level = SL_LOG_DEBUG;
    }
    atomic_store(&sl_log_max_level, level);
    old = atomic_exchange(&log_fd, fd);
    if (old != STDOUT_FILENO && old != fd) {
        close(old);
    }
    return 0;
}

void
sl__log_reopen(void)
{
    int fd;
    int old;

    pthread_mutex_lock(&reopen_lock);
    if (log_path[0] != '\0') {
        fd = open_log(log_path);
        old = atomic_load(&log_fd);
        if (fd >= 0 && old != STDOUT_FILENO) {
            /* Workers write to log_fd without a lock: its number must
             * never be closed under them (a socket opened meanwhile could
             * get it). dup2 points the same number at the new file in one
             * step; a write goes wholly to the old file or the new. */
            if (dup2(fd, old) < 0) {
                sl_log_error("Could not reopen the log file '%s': %s",
                             log_path, strerror(errno));
            }
            close(fd);
        } else if (fd >= 0) {
            atomic_store(&log_fd, fd);
        }
    }
    pthread_mutex_unlock(&reopen_lock);
    atomic_fetch_add(&rotations, 1);
}

uint64_t
sl_log_rotation_count(void)
{
    return atomic_load(&rotations);
}

/* The log file's path, "" for stdout (admin API). Set before workers. */
const char *
sl__log_path(void)
{
    return log_path;
}

void
sl__log_finish(void)
{
    int old = atomic_exchange(&log_fd, STDOUT_FILENO);

    if (old != STDOUT_FILENO) {
        close(old);
    }
    log_path[0] = '\0';
}

/* Timestamp, level and tag into line; returns the length used. */
static size_t
line_prefix(char *line, size_t cap, int level, const char *tag)
{
    struct timeval tv;
    struct tm tm;
    size_t n;
    int r;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    n = strftime(line, cap, "%Y-%m-%d %H:%M:%S", &tm);
    if (level < SL_LOG_ERROR || level > SL_LOG_DEBUG) {
        level = SL_LOG_NOTICE;
    }
    r = snprintf(line + n, cap - n, ".%03ld %7s : ", (long)tv.tv_usec / 1000,
                 level_names[level]);
    n += (size_t)r;
    if (tag != NULL) {
        r = snprintf(line + n, cap - n, "[%s] ", tag);
        n += (size_t)r;
    }
    return n;
}

/* ---- syslog / maxlog ----
 *
 * syslog=true also sends every line to the local syslog socket (/dev/log,
 * or $SLUICE_SYSLOG_SOCKET for tests) as an RFC 3164 datagram, facility
 * user, without our timestamp (syslog adds its own). Sent with
 * MSG_DONTWAIT: a full or missing syslog drops the line, it never blocks a
 * worker. maxlog=false stops the writes to Sluice's own log. */

#define TIMESTAMP_LEN 24   /* "YYYY-mm-dd HH:MM:SS.mmm " (line_prefix) */

static atomic_bool to_syslog;
static atomic_bool to_maxlog = true;
static atomic_int syslog_fd = -1;
static struct sockaddr_un syslog_addr;

void
sl__log_set_destinations(bool use_syslog, bool use_maxlog)
{
    const char *path = getenv("SLUICE_SYSLOG_SOCKET");

    if (use_syslog && atomic_load(&syslog_fd) < 0) {
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        memset(&syslog_addr, 0, sizeof(syslog_addr));
        syslog_addr.sun_family = AF_UNIX;
        snprintf(syslog_addr.sun_path, sizeof(syslog_addr.sun_path), "%s",
                 path && path[0] ? path : "/dev/log");
        atomic_store(&syslog_fd, fd);
    }
    atomic_store(&to_syslog, use_syslog);
    atomic_store(&to_maxlog, use_maxlog);
}

static void
send_syslog(int level, const char *line, size_t n)
{
    static const int prio[] = {3, 4, 5, 6, 7};   /* err warning notice info
                                                  * debug */
    char msg[LINE_MAX_LEN + 64];
    int fd = atomic_load_explicit(&syslog_fd, memory_order_relaxed);
    int h;

    if (fd < 0 || n <= TIMESTAMP_LEN) {
        return;
    }
    if (level < SL_LOG_ERROR || level > SL_LOG_DEBUG) {
        level = SL_LOG_NOTICE;
    }
    h = snprintf(msg, sizeof(msg), "<%d>sluice[%ld]: ",
                 8 + prio[level - SL_LOG_ERROR], (long)getpid());
    n -= TIMESTAMP_LEN;
    if (n > sizeof(msg) - (size_t)h) {
        n = sizeof(msg) - (size_t)h;
    }
    memcpy(msg + h, line + TIMESTAMP_LEN, n);
    (void)sendto(fd, msg, (size_t)h + n, MSG_DONTWAIT | MSG_NOSIGNAL,
                 (const struct sockaddr *)&syslog_addr, sizeof(syslog_addr));
}

static void
emit_level(int level, char *line, size_t n, size_t cap)
{
    ssize_t w;

    if (n >= cap - 1) {
        n = cap - 2;   /* truncated line */
    }
    if (atomic_load_explicit(&to_syslog, memory_order_relaxed)) {
        send_syslog(level, line, n);
    }
    if (!atomic_load_explicit(&to_maxlog, memory_order_relaxed)) {
        return;
    }
    line[n++] = '\n';
    do {
        w = write(atomic_load(&log_fd), line, n);
    } while (w < 0 && errno == EINTR);
}

/* Escape in[0..len) into out[cap]; the length written (out is always
 * NUL-terminated, an escape that does not fit whole is left out). */
static size_t
escape(char *out, size_t cap, const char *in, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

    if (cap == 0) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];

        if (c >= 0x20 && c != 0x7f) {
            if (n + 1 >= cap) {
                break;
            }
            out[n++] = (char)c;
        } else {
            if (n + 4 >= cap) {
                break;
            }
            out[n++] = '\\';
            out[n++] = 'x';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 0xf];
        }
    }
    out[n] = '\0';
    return n;
}

const char *
sl_log_escape(char *out, size_t cap, const char *s)
{
    escape(out, cap, s, strlen(s));
    return out;
}

/* Keep a line (len bytes) in a session's trace ring (history.h). */
static void
trace_record(struct sl_ses_trace *t, const char *line, size_t len)
{
    char *dst = t->line[t->next % t->n];

    if (len >= SL_TRACE_LINE_MAX) {
        len = SL_TRACE_LINE_MAX - 1;
    }
    memcpy(dst, line, len);
    dst[len] = '\0';
    t->next++;
}

/* Format a line; emit it when emit, and keep it in ses's trace
 * (session_trace) when ses has one. */
static void
vlog(int level, const char *tag, const struct sl_session *ses, bool emit,
     const char *fmt, va_list ap)
{
    char line[LINE_MAX_LEN];
    char raw[LINE_MAX_LEN];
    size_t n = line_prefix(line, sizeof(line), level, tag);
    int r;

    if (ses != NULL) {
        r = snprintf(raw, sizeof(raw), "[%llu] %s@%s: ",
                     (unsigned long long)ses->id, ses->user, ses->remote);
        if (r > 0) {
            n += escape(line + n, sizeof(line) - n, raw,
                        (size_t)r < sizeof(raw) ? (size_t)r
                                                : sizeof(raw) - 1);
        }
    }
    r = vsnprintf(raw, sizeof(raw), fmt, ap);
    if (r > 0) {
        /* by length: a %c may have put a NUL in the middle */
        n += escape(line + n, sizeof(line) - n, raw,
                    (size_t)r < sizeof(raw) ? (size_t)r : sizeof(raw) - 1);
    }
    if (ses != NULL && ses->trace != NULL) {
        /* the session's own worker logs for it: no lock */
        trace_record(ses->trace, line, n);
    }
    if (emit) {
        emit_level(level, line, n, sizeof(line));
    }
}

/* ---- log_throttling ----
 *
 * Per call site, keyed by the format string's address (one per sl_log_*
 * call). Slots are a small open hash; the counters are relaxed atomics, so
 * two workers logging the same site at once may let a line more through or
 * restart a window: the throttle is approximate and never blocks. Only
 * errors and warnings are throttled (MaxScale's rule). */

#define THROTTLE_SLOTS 512

struct throttle_slot {
    _Atomic(const char *) site;
    atomic_ullong window_start_ms;
    atomic_uint count;
    atomic_ullong suppressed_until_ms;
};

static struct throttle_slot throttle[THROTTLE_SLOTS];
static atomic_uint throttle_count;          /* 0: off */
static atomic_ullong throttle_window_ms;
static atomic_ullong throttle_suppress_ms;

void
sl__log_set_throttling(unsigned count, uint64_t window_ms,
                       uint64_t suppress_ms)
{
    atomic_store(&throttle_window_ms, window_ms);
    atomic_store(&throttle_suppress_ms, suppress_ms);
    atomic_store(&throttle_count, count);
}

static uint64_t
log_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 0: log it; 1: log it and say the site is now suppressed; -1: drop. */
static int
throttled(int level, const char *site)
{
    unsigned max = atomic_load_explicit(&throttle_count,
                                        memory_order_relaxed);
    struct throttle_slot *t;
    uint64_t now, start;
    unsigned n;

    if (max == 0 || level > SL_LOG_WARN) {
        return 0;
    }
    t = &throttle[((uintptr_t)site >> 3) % THROTTLE_SLOTS];
    now = log_mono_ms();
    if (atomic_load_explicit(&t->site, memory_order_relaxed) != site) {
        /* a new site takes the slot over (a collision only resets) */
        atomic_store_explicit(&t->site, site, memory_order_relaxed);
        atomic_store_explicit(&t->window_start_ms, now,
                              memory_order_relaxed);
        atomic_store_explicit(&t->count, 0, memory_order_relaxed);
        atomic_store_explicit(&t->suppressed_until_ms, 0,
                              memory_order_relaxed);
    }
    if (now < atomic_load_explicit(&t->suppressed_until_ms,
                                   memory_order_relaxed)) {
        return -1;
    }
    start = atomic_load_explicit(&t->window_start_ms, memory_order_relaxed);
    if (now - start > atomic_load_explicit(&throttle_window_ms,
                                           memory_order_relaxed)) {
        atomic_store_explicit(&t->window_start_ms, now,
                              memory_order_relaxed);
        atomic_store_explicit(&t->count, 0, memory_order_relaxed);
    }
    n = atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed) + 1;
    if (n < max) {
        return 0;
    }
    atomic_store_explicit(&t->suppressed_until_ms, now +
                          atomic_load_explicit(&throttle_suppress_ms,
                                               memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&t->count, 0, memory_order_relaxed);
    return 1;
}

static void
throttle_note(int level, const char *tag)
{
    char line[256];
    size_t n = line_prefix(line, sizeof(line), level, tag);
    int r = snprintf(line + n, sizeof(line) - n, "The previous message was "
                     "logged %u times within %llu ms; suppressing it for "
                     "%llu ms (log_throttling)",
                     atomic_load(&throttle_count),
                     (unsigned long long)atomic_load(&throttle_window_ms),
                     (unsigned long long)atomic_load(&throttle_suppress_ms));

    if (r > 0) {
        n += (size_t)r < sizeof(line) - n ? (size_t)r : sizeof(line) - n - 1;
    }
    emit_level(level, line, n, sizeof(line));
}

void
sl_log_message(int level, const char *tag, const char *file, int line,
               const char *fmt, ...)
{
    va_list ap;
    int th = throttled(level, fmt);

    (void)file;
    (void)line;
    if (th < 0) {
        return;
    }
    va_start(ap, fmt);
    vlog(level, tag, NULL, true, fmt, ap);
    va_end(ap);
    if (th > 0) {
        throttle_note(level, tag);
    }
}

void
sl_log_session_message(int level, const char *tag,
                       const struct sl_session *ses, const char *fmt, ...)
{
    va_list ap;
    bool emit = sl_log_enabled(level);
    int th;

    /* session_trace: the macros call here for every level; a line the
     * log level leaves out still goes to the session's trace */
    if (!emit && (ses == NULL || ses->trace == NULL)) {
        return;
    }
    th = emit ? throttled(level, fmt) : 0;
    if (th < 0) {
        emit = false;
        if (ses == NULL || ses->trace == NULL) {
            return;
        }
    }
    va_start(ap, fmt);
    vlog(level, tag, ses, emit, fmt, ap);
    va_end(ap);
    if (th > 0) {
        throttle_note(level, tag);
    }
}

/* ---- masking passwords ---- */

struct mask_out {
    char *buf;
    size_t cap;   /* bytes in buf, the terminator included */
    size_t n;
};

static void
mask_put(struct mask_out *o, const char *s, size_t len)
{
    size_t room = o->cap - 1 - o->n;

    len = len < room ? len : room;
    memcpy(o->buf + o->n, s, len);
    o->n += len;
}

/* Length of a keyword that introduces a password at s, or 0. */
static size_t
password_keyword(const char *s)
{
    static const char *const words[] = {"PASSWORD", "IDENTIFIED BY"};

    for (size_t i = 0; i < SL_ARRAY_LEN(words); i++) {
        if (strncasecmp(s, words[i], strlen(words[i])) == 0) {
            return strlen(words[i]);
        }
    }
    return 0;
}

/* s at a quote: emit the quotes around ***** and return the text past
 * the literal (\-escapes and doubled quotes stay inside it). */
static const char *
mask_literal(struct mask_out *o, const char *s)
{
    char q = *s++;

    mask_put(o, &q, 1);
    mask_put(o, "*****", 5);
    while (*s != '\0') {
        if (*s == '\\' && s[1] != '\0') {
            s += 2;
        } else if (*s == q && s[1] == q) {
            s += 2;
        } else if (*s++ == q) {
            mask_put(o, &q, 1);
            break;
        }
    }
    return s;
}

char *
sl_log_mask_passwords(const char *text, const char *secret, char *out,
                      size_t outlen)
{
    struct mask_out o = {out, outlen, 0};
    size_t slen = secret ? strlen(secret) : 0;
    const char *s = text;

    while (*s != '\0' && o.n + 1 < o.cap) {
        size_t kw = password_keyword(s);

        if (slen > 0 && strncmp(s, secret, slen) == 0) {
            mask_put(&o, "*****", 5);
            s += slen;
        } else if (kw > 0) {
            mask_put(&o, s, kw);
            s += kw;
            while (*s == ' ' || *s == '\t' || *s == '=' || *s == '(') {
                mask_put(&o, s++, 1);
            }
            if (*s == '\'' || *s == '"') {
                s = mask_literal(&o, s);
            }
        } else {
            mask_put(&o, s++, 1);
        }
    }
    out[o.n] = '\0';
    return out;
}
