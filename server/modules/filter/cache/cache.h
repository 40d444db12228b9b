/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache filter's rules (cache_rules.c): MaxScale's JSON rules file,
 * a subset. A file holds one object or an array of objects:
 *
 *   { "store": [ {"attribute": "table", "op": "=", "value": "test.t"} ],
 *     "use":   [ {"attribute": "user",  "op": "!=", "value": "admin"} ] }
 *
 * store: a SELECT result is stored if ANY store rule matches (no store
 * rules: everything). Attributes: table, database, query; ops: =, !=,
 * like, unlike (pcre2). A table value "t" matches t in any database,
 * "db.t" only there.
 * use: a session may use the cache if ANY use rule matches (none: all).
 * Attribute: user ('name'@'host' or name; the host part is ignored).
 *
 * Context: immutable after loading; any thread.
 */
#ifndef SLUICE_CACHE_H
#define SLUICE_CACHE_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <sluice/ccdefs.h>
#include <sluice/classifier.h>

enum cache_attr { CA_TABLE, CA_DATABASE, CA_QUERY, CA_USER, CA_COLUMN };
enum cache_op { CO_EQ, CO_NE, CO_LIKE, CO_UNLIKE };

struct cache_rule {
    enum cache_attr attr;
    enum cache_op op;
    char *value;             /* for = and != (user: the name part) */
    pcre2_code *re;          /* for like and unlike */
};

struct cache_rules {
    struct cache_rule *store;
    size_t nstore;
    struct cache_rule *use;
    size_t nuse;
};

/* Load path into *out (zeroed first). 0, or -1 with the error logged. */
int cache_rules_load(const char *path, const char *filter,
                     struct cache_rules *out);
void cache_rules_free(struct cache_rules *r);

/* Should this SELECT be stored? db is the session's default database. */
bool cache_rules_store(const struct cache_rules *r,
                       const struct sl_qc_result *qc, const char *db,
                       const char *sql, size_t len, pcre2_match_data *md);
/* May this user use the cache? */
bool cache_rules_use(const struct cache_rules *r, const char *user,
                     pcre2_match_data *md);

#endif
