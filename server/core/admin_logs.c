/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /v1/maxscale/logs/data (and its alias .../logs/entries): the log
 * file as entries, newest page first, paged backwards with MaxScale's
 * `page[size]`, `page[cursor]` and `priority` parameters and `prev`,
 * `last` and `self` links. POST /v1/maxscale/logs/flush reopens the log
 * (MaxScale's name for .../logs/rotate).
 *
 * An entry is a line that starts with the log prefix written by log.c
 * ("YYYY-mm-dd HH:MM:SS.mmm   LEVEL : ") and the lines after it that do
 * not (a message with newlines). Its id is the byte offset of its first
 * line in the file; a cursor asks for the entries that start before it.
 * The file is read backwards in a window that doubles until the page is
 * full, the file starts or LOG_SCAN_MAX bytes were read, so a request
 * costs at most that much memory and reading whatever the log's size.
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin_int.h"
#include "internal.h"

#define LOG_PAGE_DEFAULT 50
#define LOG_PAGE_MAX 1000
#define LOG_SCAN_FIRST (64 * 1024)
#define LOG_SCAN_MAX (8 * 1024 * 1024)
#define LOG_TAIL_MAX (64 * 1024)    /* read past the cursor for its entry */
#define PREFIX_LEN 23               /* "YYYY-mm-dd HH:MM:SS.mmm" */

static const char *const priorities[] = {
    "alert", "error", "warning", "notice", "info", "debug", NULL,
};

struct entry {
    size_t off;         /* in the window */
    size_t len;         /* without the final newline */
    int prio;           /* index in priorities */
};

struct page {
    struct entry *e;    /* the newest matching entries, oldest first */
    size_t n;
    size_t first_off;   /* window offset of the first whole entry */
    bool have_first;
};

static bool
digits(const char *s, const char *pattern)
{
    for (; *pattern; s++, pattern++) {
        if (*pattern == 'd' ? (*s < '0' || *s > '9') : *s != *pattern) {
            return false;
        }
    }
    return true;
}

/* The priority index of a line that starts with the log prefix, or -1. */
static int
line_priority(const char *l, size_t len)
{
    const char *p;
    const char *end = l + len;

    if (len < PREFIX_LEN + 4 ||
        !digits(l, "dddd-dd-dd dd:dd:dd.ddd ")) {
        return -1;
    }
    p = l + PREFIX_LEN + 1;
    while (p < end && *p == ' ') {
        p++;
    }
    for (int i = 0; priorities[i]; i++) {
        size_t n = strlen(priorities[i]);

        if ((size_t)(end - p) >= n + 3 && memcmp(p, priorities[i], n) == 0 &&
            memcmp(p + n, " : ", 3) == 0) {
            return i;
        }
    }
    return -1;
}

/* Split buf[0..len) (whole lines from skip on) into entries that start
 * before limit; keep the last `want` whose priority is in mask. */
static int
scan(const char *buf, size_t len, size_t skip, size_t limit, unsigned mask,
     size_t want, struct page *pg)
{
    size_t cap = want;
    size_t total = 0;
    struct entry cur = {0, 0, -1};

    pg->n = 0;
    pg->have_first = false;
    pg->e = calloc(cap, sizeof(*pg->e));
    if (pg->e == NULL) {
        return -ENOMEM;
    }
    for (size_t at = skip; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (buf + at)) : len - at;
        int prio = line_priority(buf + at, ll);

        if (prio >= 0 && at >= limit) {
            break;             /* the entries from the cursor on */
        }
        if (prio >= 0) {
            if (cur.prio >= 0 && (mask & (1u << cur.prio))) {
                pg->e[total++ % cap] = cur;
            }
            if (!pg->have_first) {
                pg->first_off = at;
                pg->have_first = true;
            }
            cur = (struct entry){at, ll, prio};
        } else if (cur.prio >= 0) {
            cur.len = at + ll - cur.off;   /* a continuation line */
        }
        at += ll + 1;
    }
    if (cur.prio >= 0 && (mask & (1u << cur.prio))) {
        pg->e[total++ % cap] = cur;
    }
    /* the ring holds the last min(total, cap) in order from total % cap */
    if (total > cap) {
        struct entry *sorted = calloc(cap, sizeof(*sorted));

        if (sorted == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < cap; i++) {
            sorted[i] = pg->e[(total + i) % cap];
        }
        free(pg->e);
        pg->e = sorted;
    }
    pg->n = total < cap ? total : cap;
    return 0;
}

static int
parse_size(const char *s, long long lo, long long hi, long long *out)
{
    char *end;

    if (s == NULL) {
        return 0;
    }
    errno = 0;
    *out = strtoll(s, &end, 10);
    return *s == '\0' || *end != '\0' || errno || *out < lo || *out > hi
               ? -1 : 0;
}

/* The priority parameter as a bit mask; 0 for a bad value. */
static unsigned
parse_priorities(const char *s)
{
    unsigned mask = 0;
    char buf[256];
    char *rest = buf;
    char *w;

    if (s == NULL) {
        return ~0u;
    }
    if (strlen(s) >= sizeof(buf)) {
        return 0;
    }
    strcpy(buf, s);
    while ((w = strsep(&rest, ",")) != NULL) {   /* "a,,b" has an empty one */
        int i = 0;

        while (priorities[i] && strcmp(priorities[i], w) != 0) {
            i++;
        }
        if (priorities[i] == NULL) {
            return 0;
        }
        mask |= 1u << i;
    }
    return mask;
}

/* The message as a JSON string; bytes that are not UTF-8 (a client's
 * user name or statement quoted in the log) become '?'. */
static json_t *
message_json(const char *msg, size_t len)
{
    json_t *s = json_stringn(msg, len);
    char *copy;

    if (s != NULL || (copy = malloc(len + 1)) == NULL) {
        return s ? s : json_string("");
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)msg[i];

        copy[i] = c >= 0x80 || c == 0 ? '?' : (char)c;
    }
    s = json_stringn(copy, len);
    free(copy);
    return s;
}

static json_t *
entry_json(const char *buf, const struct entry *e, size_t base)
{
    const char *l = buf + e->off;
    const char *msg = strstr(l, " : ") + 3;   /* line_priority found it */
    char id[32];
    char ts[20];

    snprintf(id, sizeof(id), "%zu", base + e->off);
    memcpy(ts, l, 19);
    ts[19] = '\0';
    return json_pack("{s:s, s:o, s:s, s:s}", "id", id, "message",
                     message_json(msg, (size_t)(l + e->len - msg)),
                     "priority", priorities[e->prio], "timestamp", ts);
}

/* "&priority=..." for links, or "" (the value was checked: no escaping
 * needed beyond what the names and commas are). */
static void
priority_arg(const char *prio, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", prio ? "&priority=" : "", prio ? prio : "");
}

static struct admin_resp
log_data(struct admin_req *r)
{
    const char *path = sl__log_path();
    const char *prio_s = sl__admin_query(r, "priority");
    long long size = LOG_PAGE_DEFAULT;
    long long cursor = -1;
    unsigned mask = parse_priorities(prio_s);
    char parg[300];
    struct stat st;
    struct page pg = {0};
    char *buf = NULL;
    size_t start = 0;
    size_t end;
    size_t win;
    int fd;
    json_t *log;
    json_t *links;

    if (parse_size(sl__admin_query(r, "page[size]"), 1, LOG_PAGE_MAX,
                   &size) < 0) {
        return sl__admin_error(400, "page[size] must be a number from 1 to "
                               "%d", LOG_PAGE_MAX);
    }
    if (parse_size(sl__admin_query(r, "page[cursor]"), 0, INT64_MAX,
                   &cursor) < 0) {
        return sl__admin_error(400, "page[cursor] must be a number >= 0 "
                               "(an entry's id)");
    }
    if (mask == 0) {
        return sl__admin_error(400, "priority must be a comma-separated "
                               "list of alert, error, warning, notice, "
                               "info, debug");
    }
    if (path[0] == '\0') {
        return sl__admin_error(409, "Sluice logs to its standard output "
                               "(no log file): there is no log to read");
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        int err = errno;

        if (fd >= 0) {
            close(fd);
        }
        return sl__admin_error(500, "cannot read the log file %s: %s", path,
                               strerror(err));
    }
    if (cursor < 0 || cursor > (long long)st.st_size) {
        cursor = st.st_size;
    }
    /* the entry the cursor falls in may go on past it: read its rest */
    end = (size_t)st.st_size - (size_t)cursor > LOG_TAIL_MAX
              ? (size_t)cursor + LOG_TAIL_MAX : (size_t)st.st_size;
    for (win = LOG_SCAN_FIRST;; win *= 2) {
        ssize_t got;
        size_t skip = 0;

        if (win > LOG_SCAN_MAX) {
            win = LOG_SCAN_MAX;
        }
        start = (size_t)cursor > win ? (size_t)cursor - win : 0;
        free(buf);
        free(pg.e);
        pg.e = NULL;
        buf = malloc(end - start + 1);
        got = buf ? pread(fd, buf, end - start, (off_t)start) : -1;
        if (got < 0) {
            int err = buf ? errno : ENOMEM;

            close(fd);
            free(buf);
            return sl__admin_error(500, "cannot read the log file %s: %s",
                                   path, strerror(err));
        }
        buf[got] = '\0';
        if (start > 0) {   /* the first line may be cut: from the next */
            const char *nl = memchr(buf, '\n', (size_t)got);

            skip = nl ? (size_t)(nl - buf) + 1 : (size_t)got;
        }
        if (scan(buf, (size_t)got, skip, (size_t)cursor - start, mask,
                 (size_t)size, &pg) < 0) {
            close(fd);
            free(buf);
            free(pg.e);
            return sl__admin_error(500, "out of memory");
        }
        if (pg.n >= (size_t)size || start == 0 || win >= LOG_SCAN_MAX) {
            break;
        }
    }
    close(fd);
    log = json_array();
    for (size_t i = 0; i < pg.n; i++) {
        json_array_append_new(log, entry_json(buf, &pg.e[i], start));
    }
    priority_arg(prio_s, parg, sizeof(parg));
    links = json_pack(
        "{s:o, s:o}", "self", sl__admin_link(
            r, "maxscale/logs/data?page%%5Bcursor%%5D=%lld&page%%5Bsize%%5D="
            "%lld%s", cursor, size, parg),
        "last", sl__admin_link(r, "maxscale/logs/data?page%%5Bsize%%5D=%lld%s",
                               size, parg));
    {
        /* older entries exist before the oldest one returned (a full
         * page) or before the window's first entry (the scan limit) */
        size_t older = pg.n >= (size_t)size ? start + pg.e[0].off
                       : pg.have_first ? start + pg.first_off : start;

        if (older > 0 && (pg.n >= (size_t)size || start > 0)) {
            json_object_set_new(links, "prev", sl__admin_link(
                r, "maxscale/logs/data?page%%5Bcursor%%5D=%zu&page%%5Bsize"
                "%%5D=%lld%s", older, size, parg));
        }
    }
    free(buf);
    free(pg.e);
    return sl__admin_ok(json_pack(
        "{s:{s:s, s:s, s:{s:o, s:s}}, s:o}", "data", "id", "log_data",
        "type", "log_data", "attributes", "log", log, "log_source", "maxlog",
        "links", links));
}

/* GET maxscale/logs/data|entries */
struct admin_resp
sl__rest_log_data(struct admin_req *r)
{
    return log_data(r);
}
