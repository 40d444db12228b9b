/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parser of KILL statements (mdb_kill.h), pure: part of
 * sl_mariadb_parse, so the fuzz targets run it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "mdb_kill.h"

static const char *
skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
    }
    return p;
}

/* The word at p (letters, digits, _), case-insensitively equal to w? */
static bool
word_is(const char *p, const char *end, const char *w, const char **next)
{
    size_t n = strlen(w);

    if ((size_t)(end - p) < n || strncasecmp(p, w, n) != 0) {
        return false;
    }
    if (p + n < end && (p[n] == '_' || (p[n] >= '0' && p[n] <= '9') ||
                        ((p[n] | 0x20) >= 'a' && (p[n] | 0x20) <= 'z'))) {
        return false;
    }
    *next = skip_ws(p + n, end);
    return true;
}

/* Only blanks and semicolons left? */
static bool
at_end(const char *p, const char *end)
{
    while (p < end && (*p == ';' || *p == ' ' || *p == '\t' || *p == '\n' ||
                       *p == '\r')) {
        p++;
    }
    return p == end;
}

bool
mdb_kill_parse(const char *sql, size_t len, struct mdb_kill_stmt *k)
{
    const char *p = skip_ws(sql, sql + len), *end = sql + len, *q;
    unsigned long long id = 0;

    memset(k, 0, sizeof(*k));
    if (!word_is(p, end, "KILL", &p)) {
        return false;
    }
    if (word_is(p, end, "HARD", &q) || word_is(p, end, "SOFT", &q)) {
        k->hard = (*p | 0x20) == 'h';
        p = q;
    }
    if (word_is(p, end, "CONNECTION", &q)) {
        p = q;
    } else if (word_is(p, end, "QUERY", &q)) {
        if (word_is(q, end, "ID", &q)) {
            return false;   /* KILL QUERY ID: the server's query ids */
        }
        k->query = true;
        p = q;
    }
    if (word_is(p, end, "USER", &q)) {
        /* The user spec goes to the servers as written: they parse it. */
        size_t n = (size_t)(end - q);

        while (n > 0 && (q[n - 1] == ';' || q[n - 1] == ' ' ||
                         q[n - 1] == '\n' || q[n - 1] == '\t' ||
                         q[n - 1] == '\r')) {
            n--;
        }
        if (n == 0 || n >= sizeof(k->user_spec)) {
            return false;
        }
        memcpy(k->user_spec, q, n);
        k->user_spec[n] = '\0';
        k->by_user = true;
        return true;
    }
    if (p >= end || *p < '0' || *p > '9') {
        return false;   /* KILL (SELECT ...), variables: the server's */
    }
    while (p < end && *p >= '0' && *p <= '9') {
        id = id * 10 + (unsigned)(*p++ - '0');
        if (id > UINT32_MAX) {
            return false;
        }
    }
    if (!at_end(p, end)) {
        return false;
    }
    k->id = (uint32_t)id;
    return true;
}

