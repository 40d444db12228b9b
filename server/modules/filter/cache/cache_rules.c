/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache filter's rules file; see cache.h.
 */
#define SL_LOG_TAG "cache"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/log.h>

#include "cache.h"

static const char *const attr_names[] = {
    [CA_TABLE] = "table", [CA_DATABASE] = "database", [CA_QUERY] = "query",
    [CA_USER] = "user", [CA_COLUMN] = "column",
};
static const char *const op_names[] = {
    [CO_EQ] = "=", [CO_NE] = "!=", [CO_LIKE] = "like", [CO_UNLIKE] = "unlike",
};

static int
lookup(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], s) == 0) {
            return (int)i;
        }
    }
    return -1;
}

/* 'name'@'host' -> name */
static char *
user_name(const char *v)
{
    const char *b = v;
    size_t n;

    if (*b == '\'' || *b == '`' || *b == '"') {
        b++;
    }
    n = strcspn(b, "'`\"@");
    return strndup(b, n);
}

static int
parse_rule(json_t *o, struct cache_rule *r, const char *filter, bool use)
{
    const char *a = json_string_value(json_object_get(o, "attribute"));
    const char *op = json_string_value(json_object_get(o, "op"));
    const char *v = json_string_value(json_object_get(o, "value"));
    int ai, oi, err;
    PCRE2_SIZE off;

    if (a == NULL || op == NULL || v == NULL) {
        sl_log_error("filter '%s': a rule needs string attribute, op and "
                     "value", filter);
        return -1;
    }
    ai = lookup(attr_names, SL_ARRAY_LEN(attr_names), a);
    oi = lookup(op_names, SL_ARRAY_LEN(op_names), op);
    if (ai < 0 || oi < 0 || (use != (ai == CA_USER)) || ai == CA_COLUMN) {
        sl_log_error("filter '%s': unsupported %s rule: attribute '%s' op "
                     "'%s'", filter, use ? "use" : "store", a, op);
        return -1;
    }
    r->attr = (enum cache_attr)ai;
    r->op = (enum cache_op)oi;
    if (r->op == CO_LIKE || r->op == CO_UNLIKE) {
        r->re = pcre2_compile((PCRE2_SPTR)v, PCRE2_ZERO_TERMINATED,
                              PCRE2_CASELESS, &err, &off, NULL);
        if (r->re == NULL) {
            sl_log_error("filter '%s': invalid pattern '%s' at offset %zu",
                         filter, v, (size_t)off);
            return -1;
        }
        return 0;
    }
    r->value = r->attr == CA_USER ? user_name(v) : strdup(v);
    return r->value == NULL ? -1 : 0;
}

static int
parse_list(json_t *arr, struct cache_rule **out, size_t *n,
           const char *filter, bool use)
{
    size_t i;
    json_t *o;

    if (arr == NULL) {
        return 0;
    }
    if (!json_is_array(arr)) {
        sl_log_error("filter '%s': '%s' must be an array", filter,
                     use ? "use" : "store");
        return -1;
    }
    *out = calloc(json_array_size(arr) + 1, sizeof(**out));
    if (*out == NULL) {
        return -1;
    }
    json_array_foreach(arr, i, o) {
        if (parse_rule(o, &(*out)[*n], filter, use) != 0) {
            return -1;
        }
        (*n)++;
    }
    return 0;
}

int
cache_rules_load(const char *path, const char *filter,
                 struct cache_rules *out)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *obj;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (root == NULL) {
        sl_log_error("filter '%s': rules file '%s' line %d: %s", filter,
                     path, jerr.line, jerr.text);
        return -1;
    }
    obj = json_is_array(root) ? json_array_get(root, 0) : root;
    if (!json_is_object(obj)) {
        sl_log_error("filter '%s': rules file '%s' must hold an object",
                     filter, path);
    } else if (parse_list(json_object_get(obj, "store"), &out->store,
                          &out->nstore, filter, false) == 0 &&
               parse_list(json_object_get(obj, "use"), &out->use,
                          &out->nuse, filter, true) == 0) {
        rc = 0;
    }
    json_decref(root);
    if (rc != 0) {
        cache_rules_free(out);
    }
    return rc;
}

static void
free_list(struct cache_rule *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(r[i].value);
        pcre2_code_free(r[i].re);
    }
    free(r);
}

void
cache_rules_free(struct cache_rules *r)
{
    free_list(r->store, r->nstore);
    free_list(r->use, r->nuse);
    memset(r, 0, sizeof(*r));
}

/* Does subject satisfy the rule's op and value? */
static bool
test(const struct cache_rule *r, const char *s, size_t len,
     pcre2_match_data *md)
{
    bool hit;

    if (r->re != NULL) {
        hit = pcre2_match(r->re, (PCRE2_SPTR)s, len, 0, 0, md, NULL) >= 0;
        return r->op == CO_LIKE ? hit : !hit;
    }
    hit = strlen(r->value) == len && strncasecmp(r->value, s, len) == 0;
    return r->op == CO_EQ ? hit : !hit;
}

/* Table rule: "t" compares with the table part, "db.t" with db.t (the
 * statement's bare names qualified with the default database). */
static bool
test_table(const struct cache_rule *r, const char *table, const char *db,
           pcre2_match_data *md)
{
    char full[2 * SL_QC_NAME_MAX + 2];
    const char *dot = strchr(table, '.');
    bool qualified = r->value != NULL && strchr(r->value, '.') != NULL;

    if (dot == NULL) {
        snprintf(full, sizeof(full), "%s.%s", db, table);
    } else {
        snprintf(full, sizeof(full), "%s", table);
    }
    if (r->value != NULL && !qualified) {
        dot = strchr(full, '.');
        return test(r, dot + 1, strlen(dot + 1), md);
    }
    return test(r, full, strlen(full), md);
}

static bool
rule_matches(const struct cache_rule *r, const struct sl_qc_result *qc,
             const char *db, const char *sql, size_t len,
             pcre2_match_data *md)
{
    size_t n = qc->ntables < SL_QC_MAX_TABLES ? qc->ntables
                                              : SL_QC_MAX_TABLES;
    bool negative = r->op == CO_NE || r->op == CO_UNLIKE;

    switch (r->attr) {
    case CA_QUERY: return test(r, sql, len, md);
    case CA_DATABASE:
    case CA_TABLE:
        /* positive ops: any table matches; negative: all tables do */
        for (size_t i = 0; i < n; i++) {
            const char *t = qc->tables[i];
            bool ok;

            if (r->attr == CA_DATABASE) {
                const char *dot = strchr(t, '.');
                const char *d = dot ? t : db;
                size_t dl = dot ? (size_t)(dot - t) : strlen(db);

                ok = test(r, d, dl, md);
            } else {
                ok = test_table(r, t, db, md);
            }
            if (ok != negative) {
                return ok;
            }
        }
        return negative;
    default: return false;
    }
}

bool
cache_rules_store(const struct cache_rules *r, const struct sl_qc_result *qc,
                  const char *db, const char *sql, size_t len,
                  pcre2_match_data *md)
{
    if (r->nstore == 0) {
        return true;
    }
    for (size_t i = 0; i < r->nstore; i++) {
        if (rule_matches(&r->store[i], qc, db, sql, len, md)) {
            return true;
        }
    }
    return false;
}

bool
cache_rules_use(const struct cache_rules *r, const char *user,
                pcre2_match_data *md)
{
    if (r->nuse == 0) {
        return true;
    }
    for (size_t i = 0; i < r->nuse; i++) {
        if (test(&r->use[i], user, strlen(user), md)) {
            return true;
        }
    }
    return false;
}
