/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parameter sets: name=value pairs validated against typed spec tables.
 *
 * A struct sl_params is a flat array of entries (objects have a few dozen
 * parameters at most, so a linear search beats a hash table). Each entry
 * keeps the raw text, the line it came from (0 for defaults) and the spec
 * the validator matched, so the typed getters can interpret enums. Getters
 * parse on every call; callers that sit on a hot path cache the result at
 * instance creation.
 *
 * Context: built by the main thread; immutable once published, after which
 * getters may run on any thread.
 */
#define SL_LOG_TAG "config"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <sluice/disk_space.h>
#include <sluice/log.h>

#include "config_int.h"

struct param_entry {
    char *name;
    char *value;
    int line;
    const struct sl_param_spec *spec;   /* set by the validator */
};

struct sl_params {
    struct param_entry *v;
    size_t n;
    size_t cap;
};

struct sl_params *
sl__params_new(void)
{
    return calloc(1, sizeof(struct sl_params));
}

void
sl__params_free(struct sl_params *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].name);
        free(p->v[i].value);
    }
    free(p->v);
    free(p);
}

static struct param_entry *
find(const struct sl_params *p, const char *name)
{
    if (p == NULL || name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->v[i].name, name) == 0) {
            return &p->v[i];
        }
    }
    return NULL;
}

int
sl__params_set(struct sl_params *p, const char *name, const char *value,
               int line)
{
    struct param_entry *e = find(p, name);
    char *v = strdup(value);

    if (v == NULL) {
        return -ENOMEM;
    }
    if (e) {
        free(e->value);
        e->value = v;
        e->line = line;
        return 0;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        void *nv = realloc(p->v, cap * sizeof(*p->v));

        if (nv == NULL) {
            free(v);
            return -ENOMEM;
        }
        p->v = nv;
        p->cap = cap;
    }
    e = &p->v[p->n];
    e->name = strdup(name);
    if (e->name == NULL) {
        free(v);
        return -ENOMEM;
    }
    e->value = v;
    e->line = line;
    e->spec = NULL;
    p->n++;
    return 0;
}

int
sl__params_line(const struct sl_params *p, const char *name)
{
    const struct param_entry *e = find(p, name);

    return e ? e->line : 0;
}

const struct sl_param_spec *
sl__params_spec(const struct sl_params *p, const char *name)
{
    const struct param_entry *e = find(p, name);

    return e ? e->spec : NULL;
}

/* ---- value parsers ---- */

int
sl_param_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};

    for (size_t i = 0; i < SL_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

int
sl__param_parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (!isdigit((unsigned char)s[0]) && !(s[0] == '-' && isdigit(
            (unsigned char)s[1])) && !(s[0] == '+' && isdigit(
            (unsigned char)s[1]))) {
        return -EINVAL;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return -EINVAL;
    }
    *out = v;
    return 0;
}

int
sl__param_parse_count(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (!isdigit((unsigned char)s[0])) {
        return -EINVAL;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* Split "123Ki" into the number and the suffix; the number must exist. */
static int
split_number(const char *s, uint64_t *num, const char **suffix)
{
    const char *p = s;
    char buf[32];

    while (isdigit((unsigned char)*p)) {
        p++;
    }
    if (p == s || (size_t)(p - s) >= sizeof(buf)) {
        return -EINVAL;
    }
    memcpy(buf, s, (size_t)(p - s));
    buf[p - s] = '\0';
    *suffix = p;
    return sl__param_parse_count(buf, num);
}

static int
mul_checked(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b != 0 && a > UINT64_MAX / b) {
        return -EINVAL;
    }
    *out = a * b;
    return 0;
}

int
sl_param_parse_size(const char *s, uint64_t *out)
{
    static const char units[] = "kmgt";
    const char *suf;
    const char *u;
    uint64_t n;
    uint64_t mult = 1;

    if (split_number(s, &n, &suf) < 0) {
        return -EINVAL;
    }
    if (*suf != '\0') {
        u = strchr(units, tolower((unsigned char)*suf));
        if (u == NULL) {
            return -EINVAL;
        }
        for (const char *c = units; c <= u; c++) {
            mult *= 1024;
        }
        suf++;
        if (*suf == 'i' || *suf == 'I') {
            suf++;
        }
        if (*suf == 'b' || *suf == 'B') {
            suf++;
        }
        if (*suf != '\0') {
            return -EINVAL;
        }
    }
    return mul_checked(n, mult, out);
}

int
sl_param_parse_duration(const char *s, bool bare_seconds, uint64_t *ms_out)
{
    const char *suf;
    uint64_t n;
    uint64_t mult;

    if (split_number(s, &n, &suf) < 0) {
        return -EINVAL;
    }
    if (*suf == '\0') {
        mult = bare_seconds ? 1000 : 1;
    } else if (strcasecmp(suf, "ms") == 0) {
        mult = 1;
    } else if (strcasecmp(suf, "s") == 0) {
        mult = 1000;
    } else if (strcasecmp(suf, "m") == 0 || strcasecmp(suf, "min") == 0) {
        mult = 60 * 1000;
    } else if (strcasecmp(suf, "h") == 0) {
        mult = 3600 * 1000;
    } else {
        return -EINVAL;
    }
    return mul_checked(n, mult, ms_out);
}

/* Trimmed item [b, e) of a separated list. */
static void
trim_range(const char **b, const char **e)
{
    while (*b < *e && isspace((unsigned char)**b)) {
        (*b)++;
    }
    while (*e > *b && isspace((unsigned char)(*e)[-1])) {
        (*e)--;
    }
}

static int
enum_index(const char *const *values, const char *s, size_t n)
{
    for (int i = 0; values && values[i]; i++) {
        if (strlen(values[i]) == n && strncasecmp(values[i], s, n) == 0) {
            return i;
        }
    }
    return -1;
}

/* Bit mask of a comma separated enum list; -EINVAL on an unknown item. */
static int
parse_enum_mask(const char *const *values, const char *s, uint64_t *mask)
{
    *mask = 0;
    while (*s) {
        const char *e = strchr(s, ',');
        const char *b = s;
        const char *end = e ? e : s + strlen(s);
        int i;

        trim_range(&b, &end);
        i = enum_index(values, b, (size_t)(end - b));
        if (i < 0 || i >= 64) {
            return -EINVAL;
        }
        *mask |= 1ull << i;
        s = e ? e + 1 : end + strlen(end);
    }
    return 0;
}

/* Every item of a sep-separated list must be non-empty. */
static bool
list_ok(const char *s, char sep)
{
    for (;;) {
        const char *e = strchr(s, sep);
        const char *b = s;
        const char *end = e ? e : s + strlen(s);

        trim_range(&b, &end);
        if (b == end) {
            return false;
        }
        if (e == NULL) {
            return true;
        }
        s = e + 1;
    }
}

static void
enum_expect(const struct sl_param_spec *spec, char *why, size_t len)
{
    size_t off = (size_t)snprintf(why, len, "expected %s",
                                  spec->type == SL_PARAM_ENUM
                                      ? "one of" : "a comma separated list of");

    for (int i = 0; spec->enum_values && spec->enum_values[i]; i++) {
        if (off < len) {
            off += (size_t)snprintf(why + off, len - off, "%s '%s'",
                                    i ? "," : "", spec->enum_values[i]);
        }
    }
}

static bool
regex_ok(const char *s, char *why, size_t len)
{
    size_t n = strlen(s);
    int err;
    PCRE2_SIZE off;
    pcre2_code *re;

    if (n >= 2 && s[0] == '/' && s[n - 1] == '/') {
        s++;
        n -= 2;
    }
    re = pcre2_compile((PCRE2_SPTR)s, n, 0, &err, &off, NULL);
    if (re == NULL) {
        char msg[128];

        pcre2_get_error_message(err, (PCRE2_UCHAR *)msg, sizeof(msg));
        snprintf(why, len, "invalid regular expression at offset %zu: %s",
                 (size_t)off, msg);
        return false;
    }
    pcre2_code_free(re);
    return true;
}

int
sl__param_check(const struct sl_param_spec *spec, const char *v, char *why,
                size_t len)
{
    const char *expect = NULL;
    union {
        int64_t i;
        uint64_t u;
        bool b;
    } tmp;

    switch (spec->type) {
    case SL_PARAM_STRING:
        if (strcmp(spec->name, "disk_space_threshold") == 0 &&
            !(spec->flags & SL_PARAM_F_REFUSED)) {
            /* one syntax wherever the name appears (the server's table,
             * mariadbmon's): checked here, at load and at PATCH */
            struct sl_disk_limits lim;

            return sl_disk_limits_parse(v, &lim, why, len) < 0 ? -EINVAL
                                                                : 0;
        }
        return 0;
    case SL_PARAM_PASSWORD:
        return 0;
    case SL_PARAM_PATH:
    case SL_PARAM_SERVICE:
        expect = v[0] ? NULL : "expected a non-empty value";
        break;
    case SL_PARAM_INT:
        expect = sl__param_parse_int(v, &tmp.i) ? "expected an integer"
                                                 : NULL;
        break;
    case SL_PARAM_COUNT:
        expect = sl__param_parse_count(v, &tmp.u)
                     ? "expected a non-negative integer" : NULL;
        break;
    case SL_PARAM_BOOL:
        expect = sl_param_parse_bool(v, &tmp.b)
                     ? "expected a boolean: true/false, yes/no, on/off, 1/0"
                     : NULL;
        break;
    case SL_PARAM_SIZE:
        expect = sl_param_parse_size(v, &tmp.u)
                     ? "expected a size such as 65536, 64Ki or 16M" : NULL;
        break;
    case SL_PARAM_DURATION:
        expect = sl_param_parse_duration(v, spec->flags & SL_PARAM_F_SECONDS,
                                         &tmp.u)
                     ? "expected a duration such as 10s, 500ms, 5m or 1h"
                     : NULL;
        break;
    case SL_PARAM_ENUM:
        if (enum_index(spec->enum_values, v, strlen(v)) < 0) {
            enum_expect(spec, why, len);
            return -EINVAL;
        }
        return 0;
    case SL_PARAM_ENUM_MASK:
        if (parse_enum_mask(spec->enum_values, v, &tmp.u) < 0) {
            enum_expect(spec, why, len);
            return -EINVAL;
        }
        return 0;
    case SL_PARAM_SERVERS:
    case SL_PARAM_TARGETS:
        expect = list_ok(v, ',') ? NULL
                                 : "expected a comma separated list of names";
        break;
    case SL_PARAM_FILTERS:
        expect = list_ok(v, '|') ? NULL
                                 : "expected filter names separated by '|'";
        break;
    case SL_PARAM_REGEX:
        return regex_ok(v, why, len) ? 0 : -EINVAL;
    default:
        expect = "unsupported parameter type";
        break;
    }
    if (expect) {
        snprintf(why, len, "%s", expect);
        return -EINVAL;
    }
    return 0;
}

/* ---- typed getters ---- */

const char *
sl_params_get(const struct sl_params *p, const char *name)
{
    const struct param_entry *e = find(p, name);

    return e ? e->value : NULL;
}

bool
sl_params_has(const struct sl_params *p, const char *name)
{
    return find(p, name) != NULL;
}

const char *
sl_params_string(const struct sl_params *p, const char *name)
{
    return sl_params_get(p, name);
}

int64_t
sl_params_int(const struct sl_params *p, const char *name)
{
    const char *v = sl_params_get(p, name);
    int64_t out = 0;

    if (v == NULL || sl__param_parse_int(v, &out) < 0) {
        return 0;
    }
    return out;
}

uint64_t
sl_params_count(const struct sl_params *p, const char *name)
{
    const char *v = sl_params_get(p, name);
    uint64_t out = 0;

    if (v == NULL || sl__param_parse_count(v, &out) < 0) {
        return 0;
    }
    return out;
}

bool
sl_params_bool(const struct sl_params *p, const char *name)
{
    const char *v = sl_params_get(p, name);
    bool out = false;

    if (v == NULL || sl_param_parse_bool(v, &out) < 0) {
        return false;
    }
    return out;
}

uint64_t
sl_params_size(const struct sl_params *p, const char *name)
{
    const char *v = sl_params_get(p, name);
    uint64_t out = 0;

    if (v == NULL || sl_param_parse_size(v, &out) < 0) {
        return 0;
    }
    return out;
}

uint64_t
sl_params_duration_ms(const struct sl_params *p, const char *name)
{
    const struct param_entry *e = find(p, name);
    uint64_t out = 0;
    bool secs;

    if (e == NULL) {
        return 0;
    }
    secs = e->spec && (e->spec->flags & SL_PARAM_F_SECONDS);
    if (sl_param_parse_duration(e->value, secs, &out) < 0) {
        return 0;
    }
    return out;
}

int
sl_params_enum(const struct sl_params *p, const char *name)
{
    const struct param_entry *e = find(p, name);

    if (e == NULL || e->spec == NULL) {
        return -1;
    }
    return enum_index(e->spec->enum_values, e->value, strlen(e->value));
}

uint64_t
sl_params_enum_mask(const struct sl_params *p, const char *name)
{
    const struct param_entry *e = find(p, name);
    uint64_t mask = 0;

    if (e == NULL || e->spec == NULL ||
        parse_enum_mask(e->spec->enum_values, e->value, &mask) < 0) {
        return 0;
    }
    return mask;
}

bool
sl_params_next(const struct sl_params *p, size_t *it, const char **name,
               const char **value)
{
    if (p == NULL || *it >= p->n) {
        return false;
    }
    *name = p->v[*it].name;
    *value = p->v[*it].value;
    (*it)++;
    return true;
}

/* ---- validation ---- */

const struct sl_param_spec *
sl__param_spec_find(const struct sl_param_spec *table, const char *name)
{
    for (const struct sl_param_spec *s = table; s && s->name; s++) {
        if (strcmp(s->name, name) == 0) {
            return s;
        }
    }
    return NULL;
}

static const struct sl_param_spec *
lookup_spec(const struct sl_param_spec *const *tables, size_t ntables,
            const char *name)
{
    for (size_t t = 0; t < ntables; t++) {
        const struct sl_param_spec *s = sl__param_spec_find(tables[t], name);

        if (s != NULL) {
            return s;
        }
    }
    return NULL;
}

size_t
sl__edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a);
    size_t lb = strlen(b);
    size_t row[65];

    if (la > 64 || lb > 64) {
        return SIZE_MAX;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) !=
                          tolower((unsigned char)b[j - 1]);
            size_t best = diag + cost;

            if (up + 1 < best) {
                best = up + 1;
            }
            if (row[j - 1] + 1 < best) {
                best = row[j - 1] + 1;
            }
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The closest spec name within a small distance, or NULL. */
static const char *
suggest(const struct sl_param_spec *const *tables, size_t ntables,
        const char *name)
{
    const char *best = NULL;
    size_t best_d = strlen(name) / 3 + 1;

    if (best_d > 3) {
        best_d = 3;
    }
    for (size_t t = 0; t < ntables; t++) {
        for (const struct sl_param_spec *s = tables[t]; s && s->name; s++) {
            size_t dist = sl__edit_distance(name, s->name);

            if (dist <= best_d) {
                best = s->name;
                best_d = dist;
            }
        }
    }
    return best;
}

static void
unknown_param(const struct sl_param_spec *const *tables, size_t ntables,
              struct sl_cfg_diag *d, const char *what,
              const struct param_entry *e)
{
    const char *near = suggest(tables, ntables, e->name);

    if (near) {
        sl__cfg_error(d, e->line, "unknown parameter '%s' in %s (did you "
                      "mean '%s'?)", e->name, what, near);
    } else {
        sl__cfg_error(d, e->line, "unknown parameter '%s' in %s", e->name,
                      what);
    }
}

/* A refused parameter set to the value that is Sluice's behaviour (the
 * row's default) is accepted: "sql_mode=default" is what Sluice does. */
static bool
same_as_default(const struct sl_param_spec *spec, const char *value)
{
    const char *def = spec->default_value;
    bool a, b;
    uint64_t x, y;
    int64_t i, j;

    if (def == NULL) {
        return false;
    }
    switch (spec->type) {
    case SL_PARAM_BOOL:
        return sl_param_parse_bool(value, &a) == 0 &&
               sl_param_parse_bool(def, &b) == 0 && a == b;
    case SL_PARAM_DURATION:
        return sl_param_parse_duration(value, spec->flags &
                                       SL_PARAM_F_SECONDS, &x) == 0 &&
               sl_param_parse_duration(def, spec->flags &
                                       SL_PARAM_F_SECONDS, &y) == 0 &&
               x == y;
    case SL_PARAM_SIZE:
        return sl_param_parse_size(value, &x) == 0 &&
               sl_param_parse_size(def, &y) == 0 && x == y;
    case SL_PARAM_COUNT:
        return sl__param_parse_count(value, &x) == 0 &&
               sl__param_parse_count(def, &y) == 0 && x == y;
    case SL_PARAM_INT:
        return sl__param_parse_int(value, &i) == 0 &&
               sl__param_parse_int(def, &j) == 0 && i == j;
    default:
        return strcasecmp(value, def) == 0;
    }
}

static void
check_entry(const struct sl_param_spec *const *tables, size_t ntables,
            struct sl_cfg_diag *d, const char *what, struct param_entry *e)
{
    char why[512];

    e->spec = lookup_spec(tables, ntables, e->name);
    if (e->spec == NULL) {
        if (!d->skip_unknown) {
            unknown_param(tables, ntables, d, what, e);
        }
        return;
    }
    if (sl__param_check(e->spec, e->value, why, sizeof(why)) < 0) {
        sl__cfg_error(d, e->line, "invalid value '%s' for parameter '%s' "
                      "in %s (%s)",
                      e->spec->type == SL_PARAM_PASSWORD ? "***" : e->value,
                      e->name, what, why);
        return;
    }
    if ((e->spec->flags & SL_PARAM_F_REFUSED) &&
        !same_as_default(e->spec, e->value)) {
        sl__cfg_error(d, e->line, "parameter '%s' in %s is not supported by "
                      "Sluice: %s", e->name, what,
                      e->spec->description && e->spec->description[0]
                          ? e->spec->description : "not implemented");
    } else if (e->spec->flags & SL_PARAM_F_REFUSED) {
        return;
    } else if (e->spec->flags & SL_PARAM_F_DEPRECATED) {
        sl__cfg_warn(d, e->line, "parameter '%s' in %s is deprecated",
                     e->name, what);
    } else if (e->spec->flags & SL_PARAM_F_IGNORED) {
        sl__cfg_ignored(d, e->line, e->name, what,
                        e->spec->description && e->spec->description[0]
                            ? e->spec->description : "no effect in Sluice");
    }
}

static int
add_defaults(struct sl_params *p, const struct sl_param_spec *const *tables,
             size_t ntables, struct sl_cfg_diag *d, const char *what,
             int section_line)
{
    int errors = 0;

    for (size_t t = 0; t < ntables; t++) {
        for (const struct sl_param_spec *s = tables[t]; s && s->name; s++) {
            if (find(p, s->name) || lookup_spec(tables, t, s->name)) {
                continue;   /* set, or shadowed by an earlier table */
            }
            if (s->flags & SL_PARAM_F_MANDATORY) {
                sl__cfg_error(d, section_line, "missing mandatory parameter "
                              "'%s' in %s", s->name, what);
                errors++;
            } else if (s->default_value) {
                if (sl__params_set(p, s->name, s->default_value, 0) < 0) {
                    sl__cfg_error(d, section_line, "out of memory");
                    return errors + 1;
                }
                p->v[p->n - 1].spec = s;
            }
        }
    }
    return errors;
}

/*
 * Two names of one setting (MaxScale renamed it; configurations use both).
 * Where an object's tables declare both, setting one sets the other (line 0:
 * derived, like a default, so it is neither persisted nor carried into a
 * PATCH), and setting both is an error.
 */
static const struct {
    const char *name;
    const char *other;
} same_setting[] = {
    {"max_replication_lag", "max_slave_replication_lag"},
};

const char *
sl__params_same_setting(const char *name)
{
    for (size_t i = 0; i < sizeof(same_setting) / sizeof(same_setting[0]);
         i++) {
        if (strcmp(name, same_setting[i].name) == 0) {
            return same_setting[i].other;
        }
        if (strcmp(name, same_setting[i].other) == 0) {
            return same_setting[i].name;
        }
    }
    return NULL;
}

void
sl__params_unset(struct sl_params *p, const char *name)
{
    struct param_entry *e = find(p, name);

    if (e == NULL) {
        return;
    }
    free(e->name);
    free(e->value);
    *e = p->v[--p->n];
}

static void
mirror_same_settings(struct sl_params *p,
                     const struct sl_param_spec *const *tables,
                     size_t ntables, struct sl_cfg_diag *d, const char *what)
{
    for (size_t i = 0; i < sizeof(same_setting) / sizeof(same_setting[0]);
         i++) {
        const char *a = same_setting[i].name;
        const char *b = same_setting[i].other;
        const struct sl_param_spec *sb = lookup_spec(tables, ntables, b);
        const struct sl_param_spec *sa = lookup_spec(tables, ntables, a);
        struct param_entry *ea = find(p, a);
        struct param_entry *eb = find(p, b);
        struct param_entry *set = ea ? ea : eb;
        char *value;

        if (sa == NULL || sb == NULL || set == NULL) {
            continue;
        }
        if (ea && eb) {
            sl__cfg_error(d, ea->line > eb->line ? ea->line : eb->line,
                          "parameters '%s' and '%s' in %s are the same "
                          "setting (MaxScale's new and old name); set one",
                          a, b, what);
            continue;
        }
        value = strdup(set->value);
        if (value == NULL || sl__params_set(p, set == ea ? b : a, value,
                                            0) < 0) {
            sl__cfg_error(d, 0, "out of memory");
        } else {
            p->v[p->n - 1].spec = set == ea ? sb : sa;
        }
        free(value);
    }
}

int
sl__params_validate(struct sl_params *p,
                    const struct sl_param_spec *const *tables,
                    size_t ntables, struct sl_cfg_diag *d, const char *what,
                    int section_line)
{
    int before = d->errors;
    size_t n = p->n;

    for (size_t i = 0; i < n; i++) {
        check_entry(tables, ntables, d, what, &p->v[i]);
    }
    mirror_same_settings(p, tables, ntables, d, what);
    add_defaults(p, tables, ntables, d, what, section_line);
    return d->errors - before;
}
