/* SPDX-License-Identifier: Apache-2.0 */
/*
 * maxctrl commands: each maps to one or two REST API calls and prints an
 * aligned table (or tab-separated rows with --tsv), like MaxScale's
 * maxctrl. Table columns are JSON paths into the resources.
 */
#define _GNU_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "maxctrl.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_COLS 8

struct column {
    const char *header;
    const char *path;      /* "attributes/parameters/address"; a
                            * relationship path lists its ids */
};

/* ---- values and tables ---- */

static json_t *
walk(json_t *j, const char *path)
{
    char buf[256];
    char *save = NULL;

    snprintf(buf, sizeof(buf), "%s", path);
    for (char *t = strtok_r(buf, "/", &save); t && j;
         t = strtok_r(NULL, "/", &save)) {
        j = json_object_get(j, t);
    }
    return j;
}

/* Text of a JSON value; the caller frees. */
static char *
text_of(json_t *v)
{
    char *s = NULL;

    if (v == NULL || json_is_null(v)) {
        return strdup("");
    }
    if (json_is_string(v)) {
        return strdup(json_string_value(v));
    }
    if (json_is_integer(v)) {
        return asprintf(&s, "%lld", (long long)json_integer_value(v)) < 0
                   ? NULL : s;
    }
    if (json_is_boolean(v)) {
        return strdup(json_is_true(v) ? "true" : "false");
    }
    if (json_is_real(v)) {
        return asprintf(&s, "%.6f", json_real_value(v)) < 0 ? NULL : s;
    }
    if (json_is_object(v) && json_is_array(json_object_get(v, "data"))) {
        v = json_object_get(v, "data");
    }
    if (json_is_array(v)) {
        size_t len = 0;
        FILE *f = open_memstream(&s, &len);
        size_t i;
        json_t *e;

        json_array_foreach(v, i, e) {
            json_t *id = json_object_get(e, "id");
            char *t = text_of(id ? id : e);

            fprintf(f, "%s%s", i ? ", " : "", t);
            free(t);
        }
        fclose(f);
        return s;
    }
    return json_dumps(v, JSON_COMPACT);
}

static void
rule(const size_t *w, int n, const char *l, const char *m, const char *r)
{
    fputs(l, stdout);
    for (int c = 0; c < n; c++) {
        for (size_t i = 0; i < w[c] + 2; i++) {
            fputs("─", stdout);
        }
        fputs(c + 1 < n ? m : r, stdout);
    }
    fputc('\n', stdout);
}

static void
row(const size_t *w, int n, char **cells)
{
    for (int c = 0; c < n; c++) {
        if (mc_opts.tsv) {
            printf("%s%s", cells[c], c + 1 < n ? "\t" : "\n");
        } else {
            printf("│ %-*s ", (int)w[c], cells[c]);
        }
    }
    if (!mc_opts.tsv) {
        puts("│");
    }
}

/* Print rows x cols of strings (row 0 is the header). Frees them. */
static void
print_table(char ***cells, size_t nrows, int ncols)
{
    size_t w[MAX_COLS] = {0};

    for (size_t r = 0; r < nrows; r++) {
        for (int c = 0; c < ncols; c++) {
            size_t l = strlen(cells[r][c]);

            w[c] = l > w[c] ? l : w[c];
        }
    }
    for (size_t r = 0; r < nrows; r++) {
        if (mc_opts.tsv && r == 0) {
            continue;   /* maxctrl --tsv prints no header */
        }
        if (!mc_opts.tsv) {
            rule(w, ncols, r == 0 ? "┌" : "├", r == 0 ? "┬" : "┼",
                 r == 0 ? "┐" : "┤");
        }
        row(w, ncols, cells[r]);
    }
    if (!mc_opts.tsv) {
        rule(w, ncols, "└", "┴", "┘");
    }
    for (size_t r = 0; r < nrows; r++) {
        for (int c = 0; c < ncols; c++) {
            free(cells[r][c]);
        }
        free(cells[r]);
    }
    free(cells);
}

static void
table(json_t *data, const struct column *cols, int ncols)
{
    size_t n = json_array_size(data);
    char ***cells = calloc(n + 1, sizeof(*cells));

    for (size_t r = 0; r <= n; r++) {
        cells[r] = calloc((size_t)ncols, sizeof(char *));
        for (int c = 0; c < ncols; c++) {
            cells[r][c] = r == 0 ? strdup(cols[c].header)
                          : text_of(walk(json_array_get(data, r - 1),
                                         cols[c].path));
        }
    }
    print_table(cells, n + 1, ncols);
}

/* Key/value table of one resource: id, then attributes, relationships. */
static void
show_resource(json_t *res)
{
    const char *k;
    json_t *v;
    size_t n = 0;
    char ***cells = calloc(256, sizeof(*cells));

    cells[n] = calloc(2, sizeof(char *));
    cells[n][0] = strdup("Id");
    cells[n++][1] = text_of(json_object_get(res, "id"));
    json_object_foreach(json_object_get(res, "attributes"), k, v) {
        if (n == 255) {
            break;
        }
        if (json_is_object(v)) {
            const char *k2;
            json_t *v2;

            /* One level flattened: parameters.address, ... */
            json_object_foreach(v, k2, v2) {
                if (n == 255) {
                    break;
                }
                cells[n] = calloc(2, sizeof(char *));
                if (asprintf(&cells[n][0], "%s.%s", k, k2) < 0) {
                    cells[n][0] = NULL;
                }
                cells[n++][1] = text_of(v2);
            }
            continue;
        }
        cells[n] = calloc(2, sizeof(char *));
        cells[n][0] = strdup(k);
        cells[n++][1] = text_of(v);
    }
    json_object_foreach(json_object_get(res, "relationships"), k, v) {
        if (n == 255) {
            break;
        }
        cells[n] = calloc(2, sizeof(char *));
        cells[n][0] = strdup(k);
        cells[n++][1] = text_of(v);
    }
    /* Header-less: print as rows with a dummy header row first. */
    if (mc_opts.tsv) {
        for (size_t r = 0; r < n; r++) {
            printf("%s\t%s\n", cells[r][0], cells[r][1]);
        }
        for (size_t r = 0; r < n; r++) {
            free(cells[r][0]);
            free(cells[r][1]);
            free(cells[r]);
        }
        free(cells);
        return;
    }
    memmove(cells + 1, cells, n * sizeof(*cells));
    cells[0] = calloc(2, sizeof(char *));
    cells[0][0] = strdup("Key");
    cells[0][1] = strdup("Value");
    print_table(cells, n + 1, 2);
}

/* ---- list / show ---- */

static const struct {
    const char *what;
    const char *path;
    struct column cols[MAX_COLS];
    int ncols;
} lists[] = {
    {"servers", "servers", {
        {"Server", "id"}, {"Address", "attributes/parameters/address"},
        {"Port", "attributes/parameters/port"},
        {"Connections", "attributes/statistics/connections"},
        {"State", "attributes/state"}, {"GTID", "attributes/gtid"}}, 6},
    {"services", "services", {
        {"Service", "id"}, {"Router", "attributes/router"},
        {"Connections", "attributes/connections"},
        {"Total Connections", "attributes/total_connections"},
        {"Targets", "relationships/servers"}}, 5},
    {"listeners", "listeners", {
        {"Name", "id"}, {"Port", "attributes/parameters/port"},
        {"Host", "attributes/parameters/address"},
        {"State", "attributes/state"},
        {"Service", "relationships/services"}}, 5},
    {"monitors", "monitors", {
        {"Monitor", "id"}, {"Module", "attributes/module"},
        {"State", "attributes/state"},
        {"Servers", "relationships/servers"}}, 4},
    {"filters", "filters", {
        {"Filter", "id"}, {"Service", "relationships/services"},
        {"Module", "attributes/module"}}, 3},
    {"sessions", "sessions", {
        {"Id", "id"}, {"User", "attributes/user"},
        {"Host", "attributes/remote"}, {"Database", "attributes/database"},
        {"Service", "attributes/service"},
        {"Backends", "attributes/backends"}}, 6},
    {"threads", "maxscale/threads", {
        {"Id", "id"},
        {"Current Descriptors", "attributes/stats/current_descriptors"},
        {"Total Descriptors", "attributes/stats/total_descriptors"},
        {"Sessions", "attributes/stats/sessions"},
        {"Load (1s)", "attributes/stats/load/last_second"},
        {"Load (1m)", "attributes/stats/load/last_minute"},
        {"Load (1h)", "attributes/stats/load/last_hour"},
        {"Zombies", "attributes/stats/zombies"}}, 8},
    {"users", "users/inet", {
        {"Name", "id"}, {"Type", "type"},
        {"Privileges", "attributes/account"}}, 3},
    {"modules", "maxscale/modules", {
        {"Module", "id"}, {"Type", "attributes/module_type"},
        {"Version", "attributes/version"}}, 3},
    {"commands", "maxscale/modules", {
        {"Module", "id"}, {"Commands", "attributes/commands"}}, 2},
};

/* --format json: the document's data as the API gave it. */
static void
print_json(json_t *doc)
{
    char *text = json_dumps(json_object_get(doc, "data"),
                            JSON_INDENT(2) | JSON_PRESERVE_ORDER);

    printf("%s\n", text ? text : "null");
    free(text);
}

/* list queries [--sort KEY] [--limit N] */
static int
list_queries(int argc, char **argv)
{
    static const struct column cols[] = {
        {"Digest", "attributes/digest_text"}, {"Count", "attributes/count"},
        {"Errors", "attributes/errors"},
        {"Total Time", "attributes/total_time"},
        {"Avg Time", "attributes/avg_time"}, {"P95", "attributes/p95"},
        {"User", "attributes/user"}, {"Service", "attributes/service"},
    };   /* at most MAX_COLS; --format json has every attribute */
    _Static_assert(ARRAY_LEN(cols) <= MAX_COLS, "too many columns");
    const char *sort = "total_time";
    const char *limit = NULL;
    char path[256];
    json_t *doc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sort") == 0 && i + 1 < argc) {
            sort = argv[++i];
        } else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            limit = argv[++i];
        } else {
            mc_error("usage: list queries [--sort KEY] [--limit N]");
            return 1;
        }
    }
    snprintf(path, sizeof(path), "sluice/queries?sort=%.64s%s%.32s", sort,
             limit ? "&limit=" : "", limit ? limit : "");
    if (mc_request("GET", path, NULL, &doc) < 0) {
        return 1;
    }
    if (mc_opts.json) {
        print_json(doc);
    } else {
        table(json_object_get(doc, "data"), cols, (int)ARRAY_LEN(cols));
    }
    json_decref(doc);
    return 0;
}

static int
cmd_list(int argc, char **argv)
{
    json_t *doc;

    if (argc >= 1 && strcmp(argv[0], "queries") == 0) {
        return list_queries(argc, argv);
    }

    for (size_t i = 0; argc >= 1 && i < ARRAY_LEN(lists); i++) {
        if (strcmp(argv[0], lists[i].what) != 0) {
            continue;
        }
        if (mc_request("GET", lists[i].path, NULL, &doc) < 0) {
            return 1;
        }
        if (mc_opts.json) {
            print_json(doc);
        } else if (strcmp(argv[0], "commands") == 0) {
            json_t *data = json_object_get(doc, "data");
            json_t *keep = json_array();
            size_t k;
            json_t *m;

            json_array_foreach(data, k, m) {
                if (json_array_size(walk(m, "attributes/commands"))) {
                    json_array_append(keep, m);
                }
            }
            table(keep, lists[i].cols, lists[i].ncols);
            json_decref(keep);
        } else {
            table(json_object_get(doc, "data"), lists[i].cols,
                  lists[i].ncols);
        }
        json_decref(doc);
        return 0;
    }
    mc_error("unknown list '%s' (servers, services, listeners, monitors, "
             "filters, sessions, threads, users, commands, modules, "
             "queries)",
             argc ? argv[0] : "");
    return 1;
}

static int
cmd_show(int argc, char **argv)
{
    static const char *const kinds[][2] = {
        {"server", "servers"}, {"service", "services"},
        {"listener", "listeners"}, {"monitor", "monitors"},
        {"filter", "filters"}, {"session", "sessions"},
        {"module", "maxscale/modules"}, {"thread", "maxscale/threads"},
    };
    char path[512];
    json_t *doc;

    if (argc >= 1 && strcmp(argv[0], "maxscale") == 0) {
        snprintf(path, sizeof(path), "maxscale");
    } else if (argc >= 1 && strcmp(argv[0], "threads") == 0) {
        snprintf(path, sizeof(path), "maxscale/threads");   /* all */
    } else {
        size_t i;

        for (i = 0; argc >= 2 && i < ARRAY_LEN(kinds); i++) {
            if (strcmp(argv[0], kinds[i][0]) == 0) {
                break;
            }
        }
        if (argc < 2 || i == ARRAY_LEN(kinds)) {
            mc_error("usage: show server|service|listener|monitor|filter|"
                     "session|module|thread NAME, or show maxscale|threads");
            return 1;
        }
        snprintf(path, sizeof(path), "%s/%s", kinds[i][1], argv[1]);
    }
    if (mc_request("GET", path, NULL, &doc) < 0) {
        return 1;
    }
    if (mc_opts.json) {
        print_json(doc);
    } else if (json_is_array(json_object_get(doc, "data"))) {
        size_t i;
        json_t *one;

        json_array_foreach(json_object_get(doc, "data"), i, one) {
            if (i > 0) {
                putchar('\n');
            }
            show_resource(one);
        }
    } else {
        show_resource(json_object_get(doc, "data"));
    }
    json_decref(doc);
    return 0;
}

/* ---- writes ---- */

/* parameters object from KEY=VALUE arguments; stops at "--x" options. */
static json_t *
kv_params(int argc, char **argv, int *used)
{
    json_t *p = json_object();
    int i;

    for (i = 0; i < argc && strncmp(argv[i], "--", 2) != 0; i++) {
        char *eq = strchr(argv[i], '=');

        if (eq == NULL) {
            break;
        }
        *eq = '\0';
        json_object_set_new(p, argv[i], json_string(eq + 1));
        *eq = '=';
    }
    *used = i;
    return p;
}

/* {"data":[{"id":x,"type":type},...]} from names up to the next "--". */
static json_t *
rel_list(int argc, char **argv, const char *type, int *used)
{
    json_t *data = json_array();
    int i;

    for (i = 0; i < argc && strncmp(argv[i], "--", 2) != 0; i++) {
        json_array_append_new(data, json_pack("{s:s, s:s}", "id", argv[i],
                                              "type", type));
    }
    *used = i;
    return json_pack("{s:o}", "data", data);
}

static int
send_simple(const char *method, const char *path, json_t *body)
{
    int rc = mc_request(method, path, body, NULL);

    json_decref(body);
    if (rc == 0) {
        puts("OK");
    }
    return rc < 0 ? 1 : 0;
}

/* Remaining arguments: KEY=VALUE pairs and --servers/--filters/--services
 * lists, merged into attributes.parameters and relationships. */
static int
collect_extras(int argc, char **argv, json_t *params, json_t *rels)
{
    int i = 0;

    while (i < argc) {
        int used = 0;

        /* MaxScale's `create monitor ... --monitor-user U
         * --monitor-password P` (also --monitor-user=U). */
        if (strncmp(argv[i], "--monitor-user", 14) == 0 ||
            strncmp(argv[i], "--monitor-password", 18) == 0) {
            const char *key = argv[i][10] == 'u' ? "user" : "password";
            const char *eq = strchr(argv[i], '=');

            if (eq == NULL && i + 1 >= argc) {
                mc_error("option '%s' needs a value", argv[i]);
                return -1;
            }
            json_object_set_new(params, key, json_string(eq ? eq + 1
                                                            : argv[i + 1]));
            i += eq ? 1 : 2;
            continue;
        }
        if (strcmp(argv[i], "--servers") == 0 ||
            strcmp(argv[i], "--filters") == 0 ||
            strcmp(argv[i], "--services") == 0) {
            const char *type = argv[i] + 2;

            json_object_set_new(rels, type, rel_list(argc - i - 1,
                                                     argv + i + 1, type,
                                                     &used));
            i += used + 1;
            continue;
        }
        {
            json_t *kv = kv_params(argc - i, argv + i, &used);

            json_object_update(params, kv);
            json_decref(kv);
        }
        if (used == 0) {
            mc_error("unexpected argument '%s' (expected KEY=VALUE)",
                     argv[i]);
            return -1;
        }
        i += used;
    }
    return 0;
}

static int
create_object(const char *path, const char *id, json_t *attrs, int argc,
              char **argv)
{
    json_t *params = json_object();
    json_t *rels = json_object();
    json_t *body;

    if (collect_extras(argc, argv, params, rels) < 0) {
        json_decref(params);
        json_decref(rels);
        json_decref(attrs);
        return 1;
    }
    json_object_update(params, json_object_get(attrs, "parameters"));
    json_object_set_new(attrs, "parameters", params);
    body = json_pack("{s:{s:s, s:o, s:o}}", "data", "id", id, "attributes",
                     attrs, "relationships", rels);
    return send_simple("POST", path, body);
}

static int
cmd_create(int argc, char **argv)
{
    const char *k = argc ? argv[0] : "";

    if (strcmp(k, "server") == 0 && argc >= 4) {
        return create_object("servers", argv[1], json_pack(
            "{s:{s:s, s:s}}", "parameters", "address", argv[2], "port",
            argv[3]), argc - 4, argv + 4);
    }
    if (strcmp(k, "service") == 0 && argc >= 3) {
        return create_object("services", argv[1], json_pack(
            "{s:s}", "router", argv[2]), argc - 3, argv + 3);
    }
    if (strcmp(k, "listener") == 0 && argc >= 4) {
        char path[300];

        snprintf(path, sizeof(path), "services/%s/listeners", argv[1]);
        return create_object(path, argv[2], json_pack(
            "{s:{s:s}}", "parameters", "port", argv[3]), argc - 4,
            argv + 4);
    }
    if ((strcmp(k, "filter") == 0 || strcmp(k, "monitor") == 0) &&
        argc >= 3) {
        return create_object(k[0] == 'f' ? "filters" : "monitors", argv[1],
                             json_pack("{s:s}", "module", argv[2]),
                             argc - 3, argv + 3);
    }
    if (strcmp(k, "user") == 0 && argc >= 3) {
        const char *type = "basic";

        for (int i = 3; i < argc; i++) {
            if (strncmp(argv[i], "--type=", 7) == 0) {
                type = argv[i] + 7;
            }
        }
        return send_simple("POST", "users/inet", json_pack(
            "{s:{s:s, s:{s:s, s:s}}}", "data", "id", argv[1],
            "attributes", "password", argv[2], "account", type));
    }
    mc_error("usage: create server NAME HOST PORT | create service NAME "
             "ROUTER | create listener SERVICE NAME PORT | create filter "
             "NAME MODULE | create monitor NAME MODULE [--servers S...] "
             "[--monitor-user U --monitor-password P] | create user NAME "
             "PASSWORD");
    return 1;
}

static const char *
plural(const char *k)
{
    static const char *const map[][2] = {
        {"server", "servers"}, {"service", "services"},
        {"listener", "listeners"}, {"monitor", "monitors"},
        {"filter", "filters"},
    };

    for (size_t i = 0; i < ARRAY_LEN(map); i++) {
        if (strcmp(k, map[i][0]) == 0) {
            return map[i][1];
        }
    }
    return NULL;
}

static int
cmd_alter(int argc, char **argv)
{
    char path[300];
    json_t *params = json_object();
    int first = argc >= 1 && strcmp(argv[0], "maxscale") == 0 ? 1 : 2;

    if (argc >= 3 && strcmp(argv[0], "user") == 0) {
        json_decref(params);
        snprintf(path, sizeof(path), "users/inet/%s", argv[1]);
        return send_simple("PATCH", path, json_pack(
            "{s:{s:{s:s}}}", "data", "attributes", "password", argv[2]));
    }
    if (argc < first + 2 || (first == 2 && plural(argv[0]) == NULL) ||
        (argc - first) % 2 != 0) {
        json_decref(params);
        mc_error("usage: alter server|service|listener|monitor|filter NAME "
                 "KEY VALUE [KEY VALUE...] | alter maxscale KEY VALUE...");
        return 1;
    }
    for (int i = first; i + 1 < argc; i += 2) {
        json_object_set_new(params, argv[i], json_string(argv[i + 1]));
    }
    if (first == 1) {
        snprintf(path, sizeof(path), "maxscale");
    } else {
        snprintf(path, sizeof(path), "%s/%s", plural(argv[0]), argv[1]);
    }
    return send_simple("PATCH", path, json_pack(
        "{s:{s:{s:o}}}", "data", "attributes", "parameters", params));
}

static int
cmd_destroy(int argc, char **argv)
{
    char path[300];

    if (argc >= 2 && strcmp(argv[0], "user") == 0) {
        snprintf(path, sizeof(path), "users/inet/%s", argv[1]);
        return send_simple("DELETE", path, NULL);
    }
    if (argc < 2 || plural(argv[0]) == NULL) {
        mc_error("usage: destroy server|service|listener|monitor|filter|"
                 "user NAME");
        return 1;
    }
    /* MaxScale's form: destroy listener SERVICE NAME. */
    snprintf(path, sizeof(path), "%s/%s", plural(argv[0]),
             argc >= 3 && strcmp(argv[0], "listener") == 0 ? argv[2]
                                                           : argv[1]);
    return send_simple("DELETE", path, NULL);
}

static int
cmd_link(bool add, int argc, char **argv)
{
    char path[300];
    json_t *doc;
    json_t *cur;
    json_t *data = json_array();
    size_t i;
    json_t *e;

    if (argc < 3 || plural(argv[0]) == NULL) {
        json_decref(data);
        mc_error("usage: %s service|monitor NAME SERVER...",
                 add ? "link" : "unlink");
        return 1;
    }
    snprintf(path, sizeof(path), "%s/%s", plural(argv[0]), argv[1]);
    if (mc_request("GET", path, NULL, &doc) < 0) {
        json_decref(data);
        return 1;
    }
    cur = walk(json_object_get(doc, "data"), "relationships/servers/data");
    json_array_foreach(cur, i, e) {
        bool drop = false;

        for (int a = 2; !add && a < argc; a++) {
            drop = drop || strcmp(json_string_value(json_object_get(e, "id")),
                                  argv[a]) == 0;
        }
        if (!drop) {
            json_array_append(data, e);
        }
    }
    json_decref(doc);
    for (int a = 2; add && a < argc; a++) {
        json_array_append_new(data, json_pack("{s:s, s:s}", "id", argv[a],
                                              "type", "servers"));
    }
    snprintf(path, sizeof(path), "%s/%s/relationships/servers",
             plural(argv[0]), argv[1]);
    return send_simple("PATCH", path, json_pack("{s:o}", "data", data));
}

static int
cmd_set(bool set, int argc, char **argv)
{
    char path[400];

    if (argc < 3 || strcmp(argv[0], "server") != 0) {
        mc_error("usage: %s server NAME maintenance|drain|running|master|"
                 "slave", set ? "set" : "clear");
        return 1;
    }
    snprintf(path, sizeof(path), "servers/%s/%s?state=%s", argv[1],
             set ? "set" : "clear", argv[2]);
    return send_simple("PUT", path, NULL);
}

static int
cmd_stop_start(const char *verb, int argc, char **argv)
{
    char path[300];

    if (argc < 2 || plural(argv[0]) == NULL || strcmp(argv[0], "server") == 0
        || strcmp(argv[0], "filter") == 0) {
        mc_error("usage: %s service|listener|monitor NAME", verb);
        return 1;
    }
    snprintf(path, sizeof(path), "%s/%s/%s", plural(argv[0]), argv[1], verb);
    return send_simple("PUT", path, NULL);
}

/* classify STATEMENT...: the words joined by spaces, percent-encoded. */
static int
cmd_classify(int argc, char **argv)
{
    char *path = NULL;
    size_t len = 0;
    FILE *f;
    json_t *doc;
    int rc;

    if (argc < 1) {
        mc_error("usage: classify STATEMENT");
        return 1;
    }
    f = open_memstream(&path, &len);
    fputs("maxscale/query_classifier/classify?sql=", f);
    for (int i = 0; i < argc; i++) {
        for (const unsigned char *c = (const unsigned char *)argv[i]; *c;
             c++) {
            if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                (*c >= '0' && *c <= '9') || strchr("-_.~", *c)) {
                fputc(*c, f);
            } else {
                fprintf(f, "%%%02X", *c);
            }
        }
        if (i + 1 < argc) {
            fputs("%20", f);
        }
    }
    fclose(f);
    rc = mc_request("GET", path, NULL, &doc);
    free(path);
    if (rc < 0) {
        return 1;
    }
    if (mc_opts.json) {
        print_json(doc);
    } else {
        show_resource(json_object_get(doc, "data"));
    }
    json_decref(doc);
    return 0;
}

static int
cmd_call(int argc, char **argv)
{
    char *path = NULL;
    size_t len = 0;
    FILE *f;
    json_t *doc;
    int rc;

    if (argc < 3 || strcmp(argv[0], "command") != 0) {
        mc_error("usage: call command MODULE COMMAND [ARGS...]");
        return 1;
    }
    f = open_memstream(&path, &len);
    fprintf(f, "maxscale/modules/%s/%s", argv[1], argv[2]);
    for (int i = 3; i < argc; i++) {
        fprintf(f, "%c%s", i == 3 ? '?' : '&', argv[i]);
    }
    fclose(f);
    rc = mc_request("POST", path, NULL, &doc);
    free(path);
    if (rc < 0) {
        return 1;
    }
    if (json_object_get(doc, "meta")) {
        char *s = json_dumps(json_object_get(doc, "meta"), JSON_INDENT(4));

        puts(s);
        free(s);
    } else {
        puts("OK");
    }
    json_decref(doc);
    return 0;
}

int
mc_run(int argc, char **argv)
{
    const char *cmd = argv[0];

    argc--;
    argv++;
    if (strcmp(cmd, "list") == 0) {
        return cmd_list(argc, argv);
    }
    if (strcmp(cmd, "show") == 0) {
        return cmd_show(argc, argv);
    }
    if (strcmp(cmd, "create") == 0) {
        return cmd_create(argc, argv);
    }
    if (strcmp(cmd, "alter") == 0) {
        return cmd_alter(argc, argv);
    }
    if (strcmp(cmd, "destroy") == 0) {
        return cmd_destroy(argc, argv);
    }
    if (strcmp(cmd, "link") == 0 || strcmp(cmd, "unlink") == 0) {
        return cmd_link(cmd[0] == 'l', argc, argv);
    }
    if (strcmp(cmd, "set") == 0 || strcmp(cmd, "clear") == 0) {
        return cmd_set(cmd[0] == 's', argc, argv);
    }
    if (strcmp(cmd, "stop") == 0 || strcmp(cmd, "start") == 0) {
        return cmd_stop_start(cmd, argc, argv);
    }
    if (strcmp(cmd, "call") == 0) {
        return cmd_call(argc, argv);
    }
    if (strcmp(cmd, "classify") == 0) {
        return cmd_classify(argc, argv);
    }
    if (strcmp(cmd, "rotate") == 0 && argc >= 1 &&
        strcmp(argv[0], "logs") == 0) {
        return send_simple("POST", "maxscale/logs/rotate", NULL);
    }
    mc_error("unknown command '%s' (see maxctrl --help)", cmd);
    return 1;
}
