/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hand-written ini parser (see ini.h for the accepted syntax).
 *
 * Why not libinih: Debian's build reports the handler's line only through
 * a compile-time option it does not enable, and we need the line of every
 * key for "FILE:LINE:" errors. This parser is ~250 lines, keeps all state
 * in the caller's struct sl_ini and is fed untrusted bytes by the fuzzer,
 * so it bounds-checks every step and never reads past len.
 *
 * Line handling: a line ends at '\n'; a trailing '\r' is dropped. A NUL
 * byte anywhere is an error for that line (the line is skipped).
 */
#include "ini.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    struct sl_ini *ini;
    sl_ini_error_fn err;
    void *ctx;
    int errors;
    bool oom;
    struct sl_ini_section *cur;   /* NULL before the first header */
    struct sl_ini_kv *last;       /* key a continuation line extends */
};

static void report(struct parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool
is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r';
}

static void
report(struct parser *p, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    p->errors++;
    if (p->err) {
        p->err(p->ctx, line, msg);
    }
}

/* Copy [s, s+n) trimmed of blanks on both ends into a new string. */
static char *
dup_trimmed(const char *s, size_t n)
{
    char *out;

    while (n > 0 && is_blank(*s)) {
        s++;
        n--;
    }
    while (n > 0 && is_blank(s[n - 1])) {
        n--;
    }
    out = malloc(n + 1);
    if (out) {
        memcpy(out, s, n);
        out[n] = '\0';
    }
    return out;
}

static void
free_section(struct sl_ini_section *s)
{
    for (size_t i = 0; i < s->nkvs; i++) {
        free(s->kvs[i].name);
        free(s->kvs[i].value);
    }
    free(s->kvs);
    free(s->name);
}

void
sl__ini_free(struct sl_ini *ini)
{
    for (size_t i = 0; i < ini->nsections; i++) {
        free_section(&ini->sections[i]);
    }
    free(ini->sections);
    memset(ini, 0, sizeof(*ini));
}

const struct sl_ini_kv *
sl__ini_find(const struct sl_ini_section *s, const char *name)
{
    for (size_t i = 0; i < s->nkvs; i++) {
        if (strcmp(s->kvs[i].name, name) == 0) {
            return &s->kvs[i];
        }
    }
    return NULL;
}

const struct sl_ini_section *
sl__ini_section(const struct sl_ini *ini, const char *name)
{
    for (size_t i = 0; i < ini->nsections; i++) {
        if (strcmp(ini->sections[i].name, name) == 0) {
            return &ini->sections[i];
        }
    }
    return NULL;
}

static void
start_section(struct parser *p, const char *s, size_t n, int line)
{
    const char *close = memchr(s, ']', n);
    struct sl_ini *ini = p->ini;
    const struct sl_ini_section *dup;
    char *name;

    p->cur = NULL;
    p->last = NULL;
    if (close == NULL) {
        report(p, line, "missing ']' in section header");
        return;
    }
    for (const char *c = close + 1; c < s + n; c++) {
        if (!is_blank(*c)) {
            report(p, line, "unexpected text after section header");
            return;
        }
    }
    name = dup_trimmed(s + 1, (size_t)(close - s - 1));
    if (name == NULL) {
        p->oom = true;
        return;
    }
    if (name[0] == '\0') {
        report(p, line, "empty section name");
        free(name);
        return;
    }
    if ((dup = sl__ini_section(ini, name)) != NULL) {
        report(p, line, "duplicate section '[%s]' (first defined at line %d)",
               name, dup->line);
        free(name);
        return;
    }
    if (ini->nsections == ini->cap) {
        size_t cap = ini->cap ? ini->cap * 2 : 8;
        void *v = realloc(ini->sections, cap * sizeof(*ini->sections));

        if (v == NULL) {
            free(name);
            p->oom = true;
            return;
        }
        ini->sections = v;
        ini->cap = cap;
    }
    p->cur = &ini->sections[ini->nsections++];
    memset(p->cur, 0, sizeof(*p->cur));
    p->cur->name = name;
    p->cur->line = line;
}

static void
add_key(struct parser *p, char *name, char *value, int line)
{
    struct sl_ini_section *s = p->cur;
    const struct sl_ini_kv *dup = sl__ini_find(s, name);

    if (dup) {
        report(p, line, "duplicate parameter '%s' in section '%s' (first "
               "set at line %d)", name, s->name, dup->line);
        goto out_free;
    }
    if (s->nkvs == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        void *v = realloc(s->kvs, cap * sizeof(*s->kvs));

        if (v == NULL) {
            p->oom = true;
            goto out_free;
        }
        s->kvs = v;
        s->cap = cap;
    }
    p->last = &s->kvs[s->nkvs++];
    p->last->name = name;
    p->last->value = value;
    p->last->line = line;
    return;

out_free:
    free(name);
    free(value);
}

static void
key_value(struct parser *p, const char *s, size_t n, int line)
{
    const char *eq = memchr(s, '=', n);
    char *name;
    char *value;

    p->last = NULL;
    if (eq == NULL) {
        report(p, line, "expected 'name=value', '[section]' or a comment");
        return;
    }
    if (p->cur == NULL) {
        /* Either before any header or inside a header that was refused. */
        if (p->ini->nsections == 0) {
            report(p, line, "parameter outside of any section");
        }
        return;
    }
    name = dup_trimmed(s, (size_t)(eq - s));
    value = dup_trimmed(eq + 1, (size_t)(s + n - eq - 1));
    if (name == NULL || value == NULL) {
        free(name);
        free(value);
        p->oom = true;
        return;
    }
    if (name[0] == '\0') {
        report(p, line, "missing parameter name before '='");
        free(name);
        free(value);
        return;
    }
    add_key(p, name, value, line);
}

/* A blank-led line extends the previous key's value. */
static void
continuation(struct parser *p, const char *s, size_t n, int line)
{
    struct sl_ini_kv *kv = p->last;
    char *more = dup_trimmed(s, n);
    size_t a;
    size_t b;
    bool glue;
    char *joined;

    if (more == NULL) {
        p->oom = true;
        return;
    }
    a = strlen(kv->value);
    b = strlen(more);
    glue = a == 0 || kv->value[a - 1] == ',' || kv->value[a - 1] == '|' ||
           more[0] == ',' || more[0] == '|';
    joined = malloc(a + b + 2);
    if (joined == NULL) {
        free(more);
        p->oom = true;
        return;
    }
    snprintf(joined, a + b + 2, "%s%s%s", kv->value, glue ? "" : ",", more);
    free(kv->value);
    kv->value = joined;
    free(more);
    (void)line;
}

static void
parse_line(struct parser *p, const char *s, size_t n, int line)
{
    size_t i = 0;

    if (memchr(s, '\0', n)) {
        report(p, line, "NUL byte in line");
        p->last = NULL;
        return;
    }
    while (i < n && is_blank(s[i])) {
        i++;
    }
    if (i == n || s[i] == '#' || s[i] == ';') {
        return;   /* blank or comment: does not end a continuation */
    }
    if (i > 0 && p->last) {
        continuation(p, s + i, n - i, line);
    } else if (s[i] == '[') {
        start_section(p, s + i, n - i, line);
    } else {
        key_value(p, s + i, n - i, line);
    }
}

int
sl__ini_parse(const char *text, size_t len, struct sl_ini *out,
              sl_ini_error_fn err, void *ctx)
{
    struct parser p = {.ini = out, .err = err, .ctx = ctx};
    size_t pos = 0;
    int line = 0;

    while (pos < len && !p.oom) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;

        line++;
        if (line == 1 && n >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
            parse_line(&p, text + 3, n - 3, line);   /* UTF-8 BOM */
        } else {
            parse_line(&p, text + pos, n, line);
        }
        pos += n + 1;
    }
    return p.oom ? -1 : p.errors;
}
