/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small ini parser for MaxScale-style configuration files.
 *
 *   [section]          a section header; names are kept verbatim
 *   name = value       whitespace around name and value is trimmed
 *   # or ; comment     only when '#' or ';' is the first non-blank character
 *     continuation     a line starting with blanks continues the previous
 *                      value (joined with ',' unless either side already
 *                      ends/starts with ',' or '|')
 *
 * Every section and key records its line number, so the validator can
 * report "FILE:LINE: ...". Duplicate sections and duplicate keys within a
 * section are errors. The parser never stops at the first error: it
 * reports each one through the callback and goes on, so a user sees every
 * mistake at once.
 *
 * Context: pure functions on caller-owned memory; any thread.
 */
#ifndef SLUICE_CORE_INI_H
#define SLUICE_CORE_INI_H

#include <stddef.h>

struct sl_ini_kv {
    char *name;
    char *value;
    int line;
};

struct sl_ini_section {
    char *name;
    int line;                 /* line of the [header] */
    struct sl_ini_kv *kvs;
    size_t nkvs;
    size_t cap;
};

struct sl_ini {
    struct sl_ini_section *sections;
    size_t nsections;
    size_t cap;
};

/* Called once per syntax error; line is 1-based. */
typedef void (*sl_ini_error_fn)(void *ctx, int line, const char *msg);

/*
 * Parse len bytes of text into *out (zero it first). Returns the number of
 * errors reported through err (0 = clean), or -1 on allocation failure.
 * *out holds whatever parsed cleanly even when errors were reported; free
 * it with sl__ini_free() in every case.
 */
int sl__ini_parse(const char *text, size_t len, struct sl_ini *out,
                  sl_ini_error_fn err, void *ctx);
void sl__ini_free(struct sl_ini *ini);

/* The section named name (case-sensitive, as parsed), or NULL. */
const struct sl_ini_section *sl__ini_section(const struct sl_ini *ini,
                                             const char *name);
/* The key's entry in a section, or NULL. */
const struct sl_ini_kv *sl__ini_find(const struct sl_ini_section *s,
                                     const char *name);

#endif
