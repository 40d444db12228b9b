/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the bundled filters; see fltutil.h.
 */
#define SL_LOG_TAG "filter"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sluice/buf.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/params.h>
#include <sluice/session.h>
#include <sluice/worker.h>

#include "fltutil.h"

const char *const flt_regex_options[] = {"ignorecase", "case", "extended",
                                         NULL};

int
flt_regex_init(struct flt_regex *re, const struct sl_params *p,
               const char *name, unsigned options, const char *filter)
{
    const char *s = sl_params_get(p, name);
    uint32_t flags = 0;
    size_t n;
    int err;
    PCRE2_SIZE off;

    re->code = NULL;
    if (s == NULL || s[0] == '\0') {
        return 0;
    }
    n = strlen(s);
    if (n >= 2 && s[0] == '/' && s[n - 1] == '/') {
        s++;
        n -= 2;
    }
    if ((options & FLT_OPT_IGNORECASE) && !(options & FLT_OPT_CASE)) {
        flags |= PCRE2_CASELESS;
    }
    if (options & FLT_OPT_EXTENDED) {
        flags |= PCRE2_EXTENDED;
    }
    re->code = pcre2_compile((PCRE2_SPTR)s, n, flags, &err, &off, NULL);
    if (re->code == NULL) {
        sl_log_error("filter '%s': invalid %s at offset %zu", filter, name,
                     (size_t)off);
        return -1;
    }
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return 0;
}

void
flt_regex_free(struct flt_regex *re)
{
    pcre2_code_free(re->code);
    re->code = NULL;
}

bool
flt_regex_match(const struct flt_regex *re, pcre2_match_data *md,
                const char *sql, size_t len)
{
    return pcre2_match(re->code, (PCRE2_SPTR)sql, len, 0, 0, md, NULL) >= 0;
}

bool
flt_wanted(const struct flt_regex *match, const struct flt_regex *excl,
           pcre2_match_data *md, const char *sql, size_t len)
{
    if (match->code != NULL && !flt_regex_match(match, md, sql, len)) {
        return false;
    }
    return excl->code == NULL || !flt_regex_match(excl, md, sql, len);
}

void
flt_who_init(struct flt_who *w, const struct sl_params *p)
{
    const char *u = sl_params_get(p, "user");
    const char *s = sl_params_get(p, "source");

    snprintf(w->user, sizeof(w->user), "%s", u ? u : "");
    snprintf(w->source, sizeof(w->source), "%s", s ? s : "");
}

/* MariaDB-style host pattern: '%' matches any run, '_' one character. */
static bool
like(const char *pat, const char *s)
{
    for (; *pat != '\0'; pat++, s++) {
        if (*pat == '%') {
            for (;; s++) {
                if (like(pat + 1, s)) {
                    return true;
                }
                if (*s == '\0') {
                    return false;
                }
            }
        }
        if (*s == '\0' || (*pat != '_' && *pat != *s)) {
            return false;
        }
    }
    return *s == '\0';
}

bool
flt_who_match(const struct flt_who *w, const struct sl_session *ses)
{
    const char *remote = sl_session_remote(ses);
    char host[256];
    const char *colon;

    if (w->user[0] != '\0' && strcmp(w->user, sl_session_user(ses)) != 0) {
        return false;
    }
    if (w->source[0] == '\0') {
        return true;
    }
    /* remote is "host:port" (or "[v6]:port"); compare the host part */
    snprintf(host, sizeof(host), "%s", remote ? remote : "");
    colon = strrchr(host, ':');
    if (colon != NULL && strchr(host, '.') != NULL) {
        host[colon - host] = '\0';
    }
    return like(w->source, host);
}

const char *
flt_query_sql(struct sl_buf *buf, size_t *len)
{
    size_t total = sl_buf_len(buf);
    size_t plen = sl_mdb_packet_len(buf);
    unsigned char *p;

    if (total < SL_MDB_HDR_LEN + 1 || plen != total ||
        sl_buf_byte(buf, SL_MDB_HDR_LEN) != SL_COM_QUERY) {
        return NULL;
    }
    p = sl_buf_pullup(buf, total);
    if (p == NULL) {
        return NULL;
    }
    *len = total - SL_MDB_HDR_LEN - 1;
    return (const char *)p + SL_MDB_HDR_LEN + 1;
}

int64_t
flt_now_us(void)
{
    return (int64_t)sl_monotonic_us();
}
