/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The web dashboard's static files, served by the admin HTTP server: "/"
 * is index.html; /dashboard/app.js and /dashboard/style.css the rest.
 * Only these three names are served, read from admin_dashboard_dir (by
 * default the directory `make install` puts them in), so no request path
 * ever reaches the file system. They hold no data: the page asks the
 * REST API for everything with the account the user logs in with, so
 * they are served without credentials (the Host check still applies).
 *
 * Context: the libmicrohttpd thread.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_int.h"

static const struct {
    const char *url;
    const char *file;
    const char *ctype;
} files[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/dashboard/", "index.html", "text/html; charset=utf-8"},
    {"/dashboard/app.js", "app.js", "text/javascript; charset=utf-8"},
    {"/dashboard/style.css", "style.css", "text/css; charset=utf-8"},
};

static char dashboard_dir[4096];

void
sl__admin_static_init(const char *dir)
{
    snprintf(dashboard_dir, sizeof(dashboard_dir), "%s", dir ? dir : "");
}

bool
sl__admin_static_path(const char *url)
{
    for (size_t i = 0; i < SL_ARRAY_LEN(files); i++) {
        if (strcmp(url, files[i].url) == 0) {
            return true;
        }
    }
    return false;
}

struct admin_resp
sl__admin_static_get(struct admin_req *r)
{
    char path[4200];
    FILE *f;
    char *text;
    long len;

    for (size_t i = 0; i < SL_ARRAY_LEN(files); i++) {
        if (strcmp(r->url, files[i].url) != 0) {
            continue;
        }
        if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD")) {
            return sl__admin_error(405, "%s takes GET", r->url);
        }
        snprintf(path, sizeof(path), "%s/%s", dashboard_dir, files[i].file);
        f = fopen(path, "rb");
        if (f == NULL) {
            return sl__admin_error(404, "the dashboard is not installed (no "
                               "%s; see admin_dashboard_dir)", path);
        }
        if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
            len > 4 * 1024 * 1024 || fseek(f, 0, SEEK_SET) != 0 ||
            (text = malloc((size_t)len + 1)) == NULL) {
            fclose(f);
            return sl__admin_error(500, "cannot read %s", path);
        }
        if (fread(text, 1, (size_t)len, f) != (size_t)len) {
            fclose(f);
            free(text);
            return sl__admin_error(500, "cannot read %s", path);
        }
        fclose(f);
        text[len] = '\0';
        return (struct admin_resp){.status = 200, .text = text,
                                   .ctype = files[i].ctype};
    }
    return sl__admin_error(404, "unknown resource '%.200s'", r->url);
}
