/*
 * libFuzzer target for the REST API's request parsing, without the
 * network or a running daemon. The input is split in two at the first
 * newline:
 *
 *   METHOD-less URL ("/v1/servers/db1/set?state=drain&x=%41")
 *   '\n'
 *   body (a JSON:API document, as POST/PATCH bodies arrive)
 *
 * The URL's path goes through admin_split_path (what admin.c dispatches
 * on); its query string is split at '&' and '=' and unescaped with
 * libmicrohttpd's own MHD_http_unescape, as libmicrohttpd does before
 * admin_query sees the values. The body is parsed with jansson exactly as
 * admin.c does (JSON_REJECT_DUPLICATES), then turned into the ini section
 * of a new object of every kind (admin_body_to_ini, runtime.c's POST path)
 * and that text is validated by the configuration loader
 * (sl__config_load_text; modules come from a directory that does not
 * exist, so nothing is loaded). The PATCH path checks
 * data.attributes.parameters against the core tables
 * (admin_check_params).
 *
 * Invariant checked (abort on violation): a created object's ini text has
 * exactly one section and it is named data.id - a body can never inject
 * a second object or a [maxscale] section. (It found that ids were not
 * restricted: " x" became section "x", "../x" escaped PERSISTDIR; now
 * admin_body_to_ini accepts names of [A-Za-z0-9_.-] only.)
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <microhttpd.h>

#include <sluice/log.h>

#include "admin_int.h"
#include "config_int.h"
#include "ini.h"
#include "internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kinds[] = {
    "server", "service", "listener", "monitor", "filter",
};

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atomic_store(&sl__log_level, -1);
    return 0;
}

static void
quiet(void *ctx, int line, const char *msg)
{
    (void)ctx;
    (void)line;
    (void)msg;
}

static void
fuzz_url(const char *url, size_t len)
{
    char *copy = strndup(url, len);
    char *q;
    char *pathbuf = NULL;
    char *seg[8];
    int nseg;

    if (copy == NULL) {
        return;
    }
    q = strchr(copy, '?');
    if (q != NULL) {
        char *save = NULL;

        *q++ = '\0';
        for (char *kv = strtok_r(q, "&", &save); kv;
             kv = strtok_r(NULL, "&", &save)) {
            char *eq = strchr(kv, '=');

            if (eq != NULL) {
                *eq = '\0';
                MHD_http_unescape(eq + 1);
            }
            MHD_http_unescape(kv);
        }
    }
    if (admin_split_path(copy, &pathbuf, seg, 8, &nseg) == 0) {
        for (int i = 0; i < nseg; i++) {
            if (seg[i][0] == '\0' || strchr(seg[i], '/') != NULL) {
                abort();
            }
        }
    }
    free(pathbuf);
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
        char *text = admin_body_to_ini(doc, kinds[k],
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
            if (admin_check_params(kinds[k], NULL, params, f, &res) < 0) {
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

    fuzz_url(s, ulen);
    if (nl != NULL) {
        fuzz_body(nl + 1, size - ulen - 1);
    }
    return 0;
}
