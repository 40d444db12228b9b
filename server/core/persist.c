/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Persistence of run-time changes: objects created or changed through the
 * REST API are written to PERSISTDIR/NAME.cnf (one ini section each,
 * written to NAME.cnf.tmp and renamed, mode 0600); at the next start the
 * configuration loader lays them over the main file (sl__persist_merge:
 * the main file's sections of the same name are blanked, keeping line
 * numbers for its messages).
 *
 * Called by the loader (config.c, main thread while loading) and by the
 * REST layer (runtime.c, admin thread); it calls neither.
 */
#define _GNU_SOURCE
#define SL_LOG_TAG "admin"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sluice/log.h>

#include "config_int.h"
#include "ini.h"

#define PERSIST_DEFAULT "/var/lib/sluice/sluice.cnf.d"

static const char *
persistdir(void)
{
    return sl__config_current()->global.persistdir;
}

/* Write [name] with the given params (line > 0 only: explicit values)
 * plus overrides "key=value\n..." (which win). 0 or -errno. */
int
sl__persist_write(const char *name, const struct sl_params *p,
              const char *overrides)
{
    char path[4400];
    char tmp[4500];
    const char *k;
    const char *v;
    size_t it = 0;
    FILE *f;

    mkdir(persistdir(), 0750);
    snprintf(path, sizeof(path), "%.4000s/%s.cnf", persistdir(), name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL) {
        sl_log_error("cannot persist '%s' to '%s': %s", name, path,
                     strerror(errno));
        return -errno;
    }
    fchmod(fileno(f), 0600);
    fprintf(f, "# Written by the Sluice REST API at run time.\n[%s]\n",
            name);
    while (p && sl_params_next(p, &it, &k, &v)) {
        char needle[SL_NAME_MAX + 3];

        snprintf(needle, sizeof(needle), "%s=", k);
        if (sl__params_line(p, k) > 0 &&
            (overrides == NULL || strncmp(overrides, needle,
                                          strlen(needle)) != 0) &&
            (overrides == NULL || strstr(overrides, needle) == NULL ||
             strstr(overrides, needle)[-1] != '\n')) {
            fprintf(f, "%s=%s\n", k, v);
        }
    }
    fputs(overrides ? overrides : "", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -EIO;
    }
    return 0;
}

void
sl__persist_remove(const char *name)
{
    char path[4400];

    snprintf(path, sizeof(path), "%.4000s/%s.cnf", persistdir(), name);
    unlink(path);
}

/* Blank every line of the sections of text whose name is in names[]. */
static void
blank_sections(char *text, size_t len, char **names, size_t n)
{
    bool blank = false;
    char *line = text;

    while (line < text + len) {
        char *eol = memchr(line, '\n', (size_t)(text + len - line));
        char *end = eol ? eol : text + len;
        char *s = line;

        while (s < end && isspace((unsigned char)*s)) {
            s++;
        }
        if (s < end && *s == '[') {
            char *close = memchr(s, ']', (size_t)(end - s));

            blank = false;
            for (size_t i = 0; close && i < n; i++) {
                if (strlen(names[i]) == (size_t)(close - s - 1) &&
                    strncmp(names[i], s + 1, (size_t)(close - s - 1)) == 0) {
                    blank = true;
                }
            }
        }
        if (blank) {
            memset(line, ' ', (size_t)(end - line));
        }
        line = end + 1;
    }
}

static void
quiet_error(void *ctx, int line, const char *msg)
{
}

static void
find_persistdir(const char *text, size_t len, char *out, size_t outlen)
{
    struct sl_ini ini = {0};

    snprintf(out, outlen, "%s", PERSIST_DEFAULT);
    if (sl__ini_parse(text, len, &ini, quiet_error, NULL) < 0) {
        return;
    }
    for (size_t i = 0; i < ini.nsections; i++) {
        if (strcasecmp(ini.sections[i].name, "maxscale") == 0) {
            const struct sl_ini_kv *kv = sl__ini_find(&ini.sections[i],
                                                      "persistdir");

            if (kv != NULL) {
                snprintf(out, outlen, "%s", kv->value);
            }
        }
    }
    sl__ini_free(&ini);
}

static int
add_file(const char *path, char **buf, size_t *len, char ***names,
         size_t *nnames)
{
    FILE *f = fopen(path, "rb");
    char chunk[65536];
    size_t n;
    char *nb;
    struct sl_ini ini = {0};

    if (f == NULL) {
        return -errno;
    }
    n = fread(chunk, 1, sizeof(chunk) - 1, f);
    fclose(f);
    chunk[n] = '\0';
    nb = realloc(*buf, *len + n + 64);
    if (nb == NULL) {
        return -ENOMEM;
    }
    *buf = nb;
    *len += (size_t)sprintf(*buf + *len, "\n%.*s\n", (int)n, chunk);
    if (sl__ini_parse(chunk, n, &ini, quiet_error, NULL) == 0) {
        for (size_t i = 0; i < ini.nsections; i++) {
            char **nn = realloc(*names, (*nnames + 1) * sizeof(*nn));

            if (nn != NULL) {
                *names = nn;
                nn[(*nnames)++] = strdup(ini.sections[i].name);
            }
        }
        sl__ini_free(&ini);
    }
    return 0;
}

char *
sl__persist_merge(char *text, size_t *len)
{
    char dir[4096];
    char path[4400];
    struct dirent *de;
    char *extra = NULL;
    size_t extralen = 0;
    char **names = NULL;
    size_t nnames = 0;
    DIR *d;
    char *out;

    find_persistdir(text, *len, dir, sizeof(dir));
    d = opendir(dir);
    if (d == NULL) {
        return text;
    }
    while ((de = readdir(d)) != NULL) {
        size_t n = strlen(de->d_name);

        if (n > 4 && strcmp(de->d_name + n - 4, ".cnf") == 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            add_file(path, &extra, &extralen, &names, &nnames);
        }
    }
    closedir(d);
    blank_sections(text, *len, names, nnames);
    out = realloc(text, *len + extralen + 1);
    if (out != NULL && extralen > 0) {
        memcpy(out + *len, extra, extralen);
        *len += extralen;
        out[*len] = '\0';
        sl_log_notice("loaded %zu persisted object(s) from '%s'", nnames,
                      dir);
    }
    for (size_t i = 0; i < nnames; i++) {
        free(names[i]);
    }
    free(names);
    free(extra);
    return out ? out : text;
}
