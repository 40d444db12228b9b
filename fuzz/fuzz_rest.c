/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the REST API's request handling, without the
 * network. The input is split in two at the first newline:
 *
 *   [METHOD ' '] URL ("/v1/servers/db1/set?state=drain&x=%41")
 *   '\n'
 *   body (a JSON:API document, as POST/PATCH bodies arrive)
 *
 * Without a METHOD the request is a GET, or with a body a POST to a
 * collection (two segments) and a PATCH otherwise.
 *
 * 1. The request runs through the real handler: admin.c is compiled in
 *    and its MHD request callback (on_request) is called the way
 *    libmicrohttpd calls it (headers, then the body upload, then the
 *    final call), so dispatch, authentication, path splitting and every
 *    handler of runtime.c and admin_json.c run on it against a running
 *    configuration (three servers, reloaded for every input, so objects
 *    created by one input never leak into the next). Only
 *    libmicrohttpd's side is faked, by defining its functions here: the
 *    query string is split at '&' and '=' and unescaped with
 *    MHD_http_unescape as libmicrohttpd does before the handler sees the
 *    values, and the response is checked instead of sent.
 * 2. The body alone is turned into the ini section of a new object of
 *    every kind (sl__admin_body_to_ini, runtime.c's POST path) and validated
 *    by the configuration loader; the PATCH path checks
 *    data.attributes.parameters against the core tables.
 *
 * Invariants (abort on violation): every response has a status from 200
 * to 599 and a body that is a JSON object or none; a created object's ini
 * text has exactly one section and it is named data.id - a body can never
 * inject a second object or a [maxscale] section. (It found that ids were
 * not restricted: " x" became section "x", "../x" escaped PERSISTDIR; now
 * sl__admin_body_to_ini accepts names of [A-Za-z0-9_.-] only.)
 */
/* admin.c first: it defines _GNU_SOURCE and its own SL_LOG_TAG */
#include "../server/core/admin.c"

#include <dirent.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include <sluice/log.h>

#include "config_int.h"
#include "ini.h"
#include "internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* persistdir and datadir of the fuzzed configuration (made at start) */
static char tmpdir[] = "/tmp/sluice-fuzz-rest-XXXXXX";

static const char *const kinds[] = {
    "server", "service", "listener", "monitor", "filter",
};

/* The files runtime changes persisted (flat: persisted objects, passwd). */
static void
remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    char path[sizeof(tmpdir) + 300];

    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%.255s", tmpdir, e->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(tmpdir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atomic_store(&sl_log_max_level, -1);
    if (mkdtemp(tmpdir) == NULL || sl__admin_users_load(tmpdir) != 0 ||
        atexit(remove_tmpdir) != 0) {
        abort();
    }
    return 0;
}

static void
quiet(void *ctx, int line, const char *msg)
{
    (void)ctx;
    (void)line;
    (void)msg;
}

/* ---- libmicrohttpd's side: one fake connection per request ---- */

#define MAX_ARGS 32

static struct fake_conn {
    char *keys[MAX_ARGS];
    char *values[MAX_ARGS];
    int nargs;
    char clen[32];
    int status;                       /* of the queued response */
    char *resp;                       /* its body (we own it) */
} fc;

/* What libmicrohttpd does with "?a=b&c": split, unescape key and value. */
static void
split_query(char *q)
{
    char *save = NULL;

    for (char *kv = strtok_r(q, "&", &save); kv && fc.nargs < MAX_ARGS;
         kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');

        if (eq != NULL) {
            *eq++ = '\0';
            MHD_http_unescape(eq);
        }
        MHD_http_unescape(kv);
        fc.keys[fc.nargs] = kv;
        fc.values[fc.nargs++] = eq;
    }
}

const char *
MHD_lookup_connection_value(struct MHD_Connection *c, enum MHD_ValueKind k,
                            const char *key)
{
    if (k == MHD_GET_ARGUMENT_KIND) {
        for (int i = 0; i < fc.nargs; i++) {
            if (strcmp(fc.keys[i], key) == 0) {
                return fc.values[i] ? fc.values[i] : "";
            }
        }
        return NULL;
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        return fc.clen;
    }
    return strcasecmp(key, "Host") == 0 ? "localhost:8989" : NULL;
}

int
MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind k,
                          MHD_KeyValueIterator it, void *cls)
{
    int i;

    for (i = 0; k == MHD_GET_ARGUMENT_KIND && i < fc.nargs; i++) {
        if (it != NULL &&
            it(cls, k, fc.keys[i], fc.values[i]) != MHD_YES) {
            break;
        }
    }
    return i;
}

const union MHD_ConnectionInfo *
MHD_get_connection_info(struct MHD_Connection *c,
                        enum MHD_ConnectionInfoType t, ...)
{
    static struct sockaddr_in lo;
    static union MHD_ConnectionInfo ci;

    lo.sin_family = AF_INET;
    lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ci.client_addr = (struct sockaddr *)&lo;
    return &ci;
}

struct MHD_Response *
MHD_create_response_from_buffer(size_t size, void *buf,
                                enum MHD_ResponseMemoryMode mode)
{
    static char resp_obj;

    free(fc.resp);
    fc.resp = mode == MHD_RESPMEM_MUST_FREE ? buf : strndup(buf, size);
    return (struct MHD_Response *)&resp_obj;
}

enum MHD_Result
MHD_add_response_header(struct MHD_Response *r, const char *h,
                        const char *v)
{
    return MHD_YES;
}

enum MHD_Result
MHD_queue_response(struct MHD_Connection *c, unsigned int status,
                   struct MHD_Response *r)
{
    fc.status = (int)status;
    return MHD_YES;
}

void MHD_destroy_response(struct MHD_Response *r) {}

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT",
                                      "PATCH", "DELETE"};

static const char *
take_method(const char **url, size_t *len, bool has_body)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        size_t m = strlen(methods[i]);

        if (*len > m && memcmp(*url, methods[i], m) == 0 &&
            (*url)[m] == ' ') {
            *url += m + 1;
            *len -= m + 1;
            return methods[i];
        }
    }
    if (!has_body) {
        return "GET";
    }
    /* "/v1/servers" creates, "/v1/servers/db1" updates */
    return memchr(*url, '/', *len) && *len > 4 &&
                   memchr(*url + 4, '/', *len - 4) != NULL ? "PATCH"
                                                             : "POST";
}

static void
check_response(void)
{
    json_error_t jerr;
    json_t *doc;

    if (fc.status < 200 || fc.status > 599) {
        abort();
    }
    if (fc.resp != NULL && fc.resp[0] != '\0') {
        doc = json_loads(fc.resp, 0, &jerr);
        if (doc == NULL || !json_is_object(doc)) {
            abort();
        }
        json_decref(doc);
    }
}

static const char base_config[] =
    "[maxscale]\nthreads=1\n"
    "[db1]\ntype=server\naddress=127.0.0.1\nport=3306\n"
    "[db2]\ntype=server\naddress=127.0.0.1\nport=3307\n"
    "[db3]\ntype=server\naddress=127.0.0.1\nport=3308\n";

/* The running configuration, new for every input. */
static void
fresh_config(void)
{
    struct sl_cfg_diag d = {
        .file = "fuzz",
        .quiet = true,
        .module_dir = "/nonexistent/sluice-fuzz-modules",
    };
    char text[1024];

    snprintf(text, sizeof(text), "%s", base_config);
    sl__admin_runtime_free();
    sl__config_free(sl__config);
    sl__config_set_initial(sl__config_load_text(text, strlen(text), true,
                                                &d));
    sl__config_loading_done();
    sl__cfg_diag_free(&d);
    if (sl__config == NULL) {
        abort();
    }
    snprintf(sl__config->global.persistdir,
             sizeof(sl__config->global.persistdir), "%s", tmpdir);
    snprintf(sl__config->global.datadir,
             sizeof(sl__config->global.datadir), "%s", tmpdir);
}

static void
fuzz_request(const char *url, size_t ulen, const char *body, size_t blen)
{
    const char *method = take_method(&url, &ulen, body != NULL);
    char *copy = strndup(url, ulen);
    char *q;
    void *cls = NULL;
    size_t up = 0;

    if (copy == NULL) {
        return;
    }
    memset(&fc, 0, sizeof(fc));
    fc.status = -1;
    if ((q = strchr(copy, '?')) != NULL) {
        *q++ = '\0';
        split_query(q);
    }
    snprintf(fc.clen, sizeof(fc.clen), "%zu", body ? blen : 0);
    fresh_config();
    auth_required = false;               /* as admin_auth=false */
    /* headers, then the body, then the end: as libmicrohttpd calls it */
    on_request(NULL, NULL, copy, method, "HTTP/1.1", NULL, &up, &cls);
    if (fc.status < 0 && body != NULL && blen > 0) {
        up = blen;
        on_request(NULL, NULL, copy, method, "HTTP/1.1", body, &up, &cls);
        if (up != 0) {
            abort();                     /* the upload was not consumed */
        }
    }
    if (fc.status < 0) {
        up = 0;
        on_request(NULL, NULL, copy, method, "HTTP/1.1", NULL, &up, &cls);
    }
    on_completed(NULL, NULL, &cls, MHD_REQUEST_TERMINATED_COMPLETED_OK);
    check_response();
    free(fc.resp);
    free(copy);
}

static void
check_one_section(const char *text, const char *id)
{
    struct sl_ini ini = {0};

    /* Errors are fine (a duplicate key is refused by the loader: 400),
     * a second section or another name is not. */
    if (sl__ini_parse(text, strlen(text), &ini, quiet, NULL) < 0) {
        sl__ini_free(&ini);
        return;
    }
    if (ini.nsections != 1 || strcmp(ini.sections[0].name, id) != 0) {
        abort();
    }
    sl__ini_free(&ini);
}

static void
fuzz_body(const char *body, size_t len)
{
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    char err[512];

    if (doc == NULL) {
        return;
    }
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        struct sl_cfg_diag d = {
            .file = "runtime",
            .quiet = true,
            .module_dir = "/nonexistent/sluice-fuzz-modules",
        };
        const char *id = NULL;
        char *text = sl__admin_body_to_ini(doc, kinds[k],
                                       k == 2 ? "svc" : NULL, &id, err,
                                       sizeof(err));
        struct sl_config *cfg;

        if (text == NULL) {
            continue;
        }
        check_one_section(text, id);
        cfg = sl__config_load_text(text, strlen(text), false, &d);
        sl__config_free(cfg);
        sl__cfg_diag_free(&d);
        free(text);
    }
    {
        json_t *params = json_object_get(json_object_get(json_object_get(
            doc, "data"), "attributes"), "parameters");
        struct admin_resp res = {0};
        char *out = NULL;
        size_t olen = 0;
        FILE *f = open_memstream(&out, &olen);

        for (size_t k = 0; f && params && k < 5; k++) {
            if (sl__admin_check_params(kinds[k], NULL, params, f, &res) < 0) {
                json_decref(res.doc);
                res.doc = NULL;
            }
        }
        if (f) {
            fclose(f);
        }
        free(out);
    }
    json_decref(doc);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    size_t ulen = nl ? (size_t)(nl - s) : size;

    fuzz_request(s, ulen, nl ? nl + 1 : NULL, nl ? size - ulen - 1 : 0);
    if (nl != NULL) {
        fuzz_body(nl + 1, size - ulen - 1);
    }
    return 0;
}
