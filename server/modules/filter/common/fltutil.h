/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the bundled filters (compiled into each filter module;
 * not part of the installed SDK): pcre2 patterns with MaxScale's `options`,
 * the `user`/`source` restrictions, and the SQL text of a COM_QUERY.
 *
 * Context: a struct flt_regex is immutable after flt_regex_init (shared by
 * every session of an instance); a struct flt_match (pcre2 match data) is
 * per session, so matching never locks or allocates.
 */
#ifndef SLUICE_FLTUTIL_H
#define SLUICE_FLTUTIL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>

struct sl_params;
struct sl_session;

/* MaxScale's `options` values, in this order, for SL_PARAM_ENUM_MASK. */
extern const char *const flt_regex_options[];
#define FLT_OPT_IGNORECASE (1u << 0)
#define FLT_OPT_CASE (1u << 1)
#define FLT_OPT_EXTENDED (1u << 2)

struct flt_regex {
    pcre2_code *code;   /* NULL: no pattern configured */
};

/* Compile parameter `name` of p (a /slashed/ or bare pattern) with the
 * option bits. An unset parameter leaves re->code NULL. 0, or -1 with the
 * error logged naming the filter. Main thread. */
int flt_regex_init(struct flt_regex *re, const struct sl_params *p,
                   const char *name, unsigned options, const char *filter);
void flt_regex_free(struct flt_regex *re);

/* Does re match sql[0..len)? md is the session's match data. */
bool flt_regex_match(const struct flt_regex *re, pcre2_match_data *md,
                     const char *sql, size_t len);

/* match/exclude as MaxScale applies them: an unset match matches all, an
 * unset exclude excludes nothing. */
bool flt_wanted(const struct flt_regex *match, const struct flt_regex *excl,
                pcre2_match_data *md, const char *sql, size_t len);

/* The `user` and `source` restrictions (empty = anyone; '%' is a
 * wildcard as in MariaDB host names). */
struct flt_who {
    char user[128];
    char source[256];
};
void flt_who_init(struct flt_who *w, const struct sl_params *p);
/* Does the session's user and client address pass? */
bool flt_who_match(const struct flt_who *w, const struct sl_session *ses);

/*
 * The SQL of a COM_QUERY command chain: a pointer to contiguous text and
 * its length (the chain's first packet is made contiguous). NULL when buf
 * is not a COM_QUERY or spans several packets (statements of 16 MiB and
 * more are passed on unexamined).
 */
const char *flt_query_sql(struct sl_buf *buf, size_t *len);

/* Wall clock in microseconds (CLOCK_MONOTONIC) for durations. */
int64_t flt_now_us(void);

#endif
