/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /v1/maxscale/query_classifier/classify?sql=...: what Sluice's
 * classifier makes of a statement, in the shape of MaxScale's resource
 * (`canonical`, `operation`, `type_mask`, `parse_result`) plus what
 * Sluice's classifier also finds (`tables`, `hint`, `name`).
 * GET /v1/maxscale/query_classifier/cache: MaxScale lists its
 * classification cache there; Sluice's classifier keeps none (it
 * tokenizes each statement, no parse to save), so the list is empty and
 * `meta` says why. docs/rest-api.md has both.
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/classifier.h>

#include "admin_int.h"
#include "stats.h"

#define CLASSIFY_MAX (1024 * 1024)   /* longest statement taken */

static const char *const op_names[] = {
    [SL_QC_OP_UNDEFINED] = "UNDEFINED", [SL_QC_OP_SELECT] = "SELECT",
    [SL_QC_OP_INSERT] = "INSERT", [SL_QC_OP_UPDATE] = "UPDATE",
    [SL_QC_OP_DELETE] = "DELETE", [SL_QC_OP_REPLACE] = "REPLACE",
    [SL_QC_OP_CALL] = "CALL", [SL_QC_OP_SET] = "SET",
    [SL_QC_OP_USE] = "CHANGE_DB", [SL_QC_OP_SHOW] = "SHOW",
    [SL_QC_OP_CREATE] = "CREATE", [SL_QC_OP_ALTER] = "ALTER",
    [SL_QC_OP_DROP] = "DROP", [SL_QC_OP_TRUNCATE] = "TRUNCATE",
    [SL_QC_OP_RENAME] = "RENAME", [SL_QC_OP_GRANT] = "GRANT",
    [SL_QC_OP_REVOKE] = "REVOKE", [SL_QC_OP_BEGIN] = "BEGIN",
    [SL_QC_OP_COMMIT] = "COMMIT", [SL_QC_OP_ROLLBACK] = "ROLLBACK",
    [SL_QC_OP_PREPARE] = "PREPARE", [SL_QC_OP_EXECUTE] = "EXECUTE",
    [SL_QC_OP_DEALLOCATE] = "DEALLOCATE", [SL_QC_OP_LOAD] = "LOAD",
    [SL_QC_OP_LOCK] = "LOCK", [SL_QC_OP_UNLOCK] = "UNLOCK",
    [SL_QC_OP_XA] = "XA", [SL_QC_OP_EXPLAIN] = "EXPLAIN",
    [SL_QC_OP_KILL] = "KILL", [SL_QC_OP_FLUSH] = "FLUSH",
    [SL_QC_OP_HANDLER] = "HANDLER", [SL_QC_OP_DO] = "DO",
    [SL_QC_OP_SAVEPOINT] = "SAVEPOINT", [SL_QC_OP_OTHER] = "OTHER",
};

static const char *const hint_names[] = {
    [SL_HINT_NONE] = NULL, [SL_HINT_ROUTE_TO_MASTER] = "route to master",
    [SL_HINT_ROUTE_TO_SLAVE] = "route to slave",
    [SL_HINT_ROUTE_TO_LAST_USED] = "route to last",
    [SL_HINT_ROUTE_TO_NAMED_SERVER] = "route to server",
    [SL_HINT_ROUTE_TO_ALL] = "route to all",
};

/* "QUERY_TYPE_READ|QUERY_TYPE_MASTER_READ" from Sluice's bit names. */
static json_t *
type_mask_json(uint32_t type)
{
    char names[1024];
    char out[2048];
    size_t used = 0;
    char *save = NULL;

    sl_qc_type_str(type, names, sizeof(names));
    out[0] = '\0';
    for (char *w = strtok_r(names, "|", &save); w;
         w = strtok_r(NULL, "|", &save)) {
        int n = snprintf(out + used, sizeof(out) - used, "%sQUERY_TYPE_%s",
                         used ? "|" : "", w);

        if (n < 0 || (size_t)n >= sizeof(out) - used) {
            break;
        }
        used += (size_t)n;
    }
    return json_string(out);
}

static struct admin_resp
classify(struct admin_req *r)
{
    const char *sql = sl__admin_query(r, "sql");
    struct sl_qc_result qc;
    size_t len;
    char *canon;
    uint64_t hash;
    json_t *tables;
    json_t *attrs;
    char op[48];
    unsigned nt;

    if (sql == NULL) {
        return sl__admin_error(400, "the statement is missing: "
                               "classify?sql=STATEMENT");
    }
    len = strlen(sql);
    if (len > CLASSIFY_MAX) {
        return sl__admin_error(400, "the statement is longer than %d bytes",
                               CLASSIFY_MAX);
    }
    canon = malloc(len + 1);
    if (canon == NULL) {
        return sl__admin_error(500, "out of memory");
    }
    sl_qc_classify(sql, len, &qc);
    snprintf(op, sizeof(op), "QUERY_OP_%s",
             qc.op <= SL_QC_OP_OTHER ? op_names[qc.op] : "UNDEFINED");
    sl__qc_canonical(sql, len, canon, len + 1, &hash, NULL);
    tables = json_array();
    nt = qc.ntables < SL_QC_MAX_TABLES ? qc.ntables : SL_QC_MAX_TABLES;
    for (unsigned i = 0; i < nt; i++) {
        json_t *t = json_string(qc.tables[i]);

        json_array_append_new(tables, t ? t : json_string("?"));
    }
    attrs = json_pack(
        "{s:s?, s:s, s:o, s:s, s:o, s:b}",
        "canonical", canon, "operation", op,
        "type_mask", type_mask_json(qc.type),
        /* a tokenizer, not a parser: MaxScale's name for that result */
        "parse_result", qc.type & SL_QC_UNKNOWN ? "QC_QUERY_INVALID"
                                                : "QC_QUERY_TOKENIZED",
        "tables", tables, "tables_truncated",
        qc.ntables > SL_QC_MAX_TABLES);
    free(canon);
    if (attrs == NULL) {   /* a canonical text that is not UTF-8 */
        return sl__admin_error(400, "the statement is not valid UTF-8");
    }
    if (qc.hint.type != SL_HINT_NONE && qc.hint.type <= SL_HINT_ROUTE_TO_ALL) {
        json_object_set_new(attrs, "hint", json_pack(
            "{s:s, s:s?}", "type", hint_names[qc.hint.type], "server",
            qc.hint.type == SL_HINT_ROUTE_TO_NAMED_SERVER ? qc.hint.server
                                                          : NULL));
    }
    if (qc.name[0] != '\0') {
        json_t *n = json_string(qc.name);

        if (n != NULL) {
            json_object_set_new(attrs, "name", n);
        }
    }
    return sl__admin_ok(json_pack(
        "{s:{s:s, s:s, s:o}, s:{s:o}}", "data", "id", "classify", "type",
        "classify", "attributes", attrs, "links", "self",
        sl__admin_link(r, "maxscale/query_classifier/classify")));
}

/* GET maxscale/query_classifier/classify|cache */
struct admin_resp
sl__rest_query_classifier(struct admin_req *r)
{
    if (strcmp(r->seg[2], "classify") == 0) {
        return classify(r);
    }
    return sl__admin_ok(json_pack(
        "{s:[], s:{s:b, s:s}, s:{s:o}}", "data", "meta", "cache", 0,
        "detail", "Sluice's classifier keeps no cache: it tokenizes each "
        "statement once, with nothing parsed to keep "
        "(query_classifier_cache_size is accepted with a warning)",
        "links", "self", sl__admin_link(r, "maxscale/query_classifier/"
                                           "cache")));
}
