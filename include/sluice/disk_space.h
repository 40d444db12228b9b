/* SPDX-License-Identifier: Apache-2.0 */
/*
 * disk_space_threshold (MaxScale 24.02, a server and a monitor parameter):
 * "path:percent,path:percent,...", where path is a mount point as
 * information_schema.DISKS lists it (its Path column) or `*` for every
 * disk without an entry of its own, and percent (0-100) is how full that
 * disk may be. The core checks the syntax when it loads a configuration
 * (file:line:parameter on an error); a monitor parses the value again
 * with the same function to use it. Header-only, no exported symbol.
 *
 * Context: pure functions, any thread.
 */
#ifndef SLUICE_DISK_SPACE_H
#define SLUICE_DISK_SPACE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SL_DISK_LIMITS_MAX 16
#define SL_DISK_PATH_MAX 256

struct sl_disk_limits {
    int n;
    int any;                      /* the `*` entry's percent, -1 none */
    struct {
        char path[SL_DISK_PATH_MAX];
        int percent;
    } e[SL_DISK_LIMITS_MAX];
};

/*
 * Parse `text` into *out. 0, or -EINVAL with why[] saying what is wrong (an
 * empty entry, no colon, an empty path, a percent that is not a whole
 * number from 0 to 100, a path given twice, too many entries). An empty
 * or all-blank text is no limit at all (n = 0, any = -1).
 */
static inline int
sl_disk_limits_parse(const char *text, struct sl_disk_limits *out,
                     char *why, size_t whylen)
{
    const char *p = text;

    out->n = 0;
    out->any = -1;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p == '\0') {
        return 0;
    }
    for (;;) {
        const char *end = p + strcspn(p, ",");
        const char *colon;
        const char *ps, *pe, *ns, *ne;
        int pct = 0;

        ps = p;
        pe = end;
        while (ps < pe && (*ps == ' ' || *ps == '\t')) {
            ps++;
        }
        while (pe > ps && (pe[-1] == ' ' || pe[-1] == '\t')) {
            pe--;
        }
        if (ps == pe) {
            snprintf(why, whylen, "an empty entry: expected path:percent, "
                     "entries separated by commas");
            return -EINVAL;
        }
        colon = NULL;
        for (const char *q = pe; q > ps; q--) {
            if (q[-1] == ':') {
                colon = q - 1;
                break;
            }
        }
        if (colon == NULL) {
            snprintf(why, whylen, "'%.*s' has no ':percent' (expected "
                     "path:percent, e.g. /data:80 or *:90)", (int)(pe - ps),
                     ps);
            return -EINVAL;
        }
        ns = colon + 1;
        ne = pe;
        while (ns < ne && (*ns == ' ' || *ns == '\t')) {
            ns++;
        }
        if (ns == ne || ne - ns > 3) {
            snprintf(why, whylen, "'%.*s': the percent must be a whole "
                     "number from 0 to 100", (int)(pe - ps), ps);
            return -EINVAL;
        }
        for (const char *q = ns; q < ne; q++) {
            if (*q < '0' || *q > '9') {
                snprintf(why, whylen, "'%.*s': the percent must be a whole "
                         "number from 0 to 100", (int)(pe - ps), ps);
                return -EINVAL;
            }
            pct = pct * 10 + (*q - '0');
        }
        if (pct > 100) {
            snprintf(why, whylen, "'%.*s': percent %d is outside 0-100",
                     (int)(pe - ps), ps, pct);
            return -EINVAL;
        }
        while (colon > ps && (colon[-1] == ' ' || colon[-1] == '\t')) {
            colon--;
        }
        if (colon == ps) {
            snprintf(why, whylen, "'%.*s' has an empty path (a mount point "
                     "such as /data, or *)", (int)(pe - ps), ps);
            return -EINVAL;
        }
        if (colon - ps >= SL_DISK_PATH_MAX) {
            snprintf(why, whylen, "a path longer than %d characters",
                     SL_DISK_PATH_MAX - 1);
            return -EINVAL;
        }
        if (colon - ps == 1 && *ps == '*') {
            if (out->any >= 0) {
                snprintf(why, whylen, "'*' is given twice");
                return -EINVAL;
            }
            out->any = pct;
        } else {
            for (int i = 0; i < out->n; i++) {
                if (strlen(out->e[i].path) == (size_t)(colon - ps) &&
                    memcmp(out->e[i].path, ps, (size_t)(colon - ps)) == 0) {
                    snprintf(why, whylen, "path '%s' is given twice",
                             out->e[i].path);
                    return -EINVAL;
                }
            }
            if (out->n == SL_DISK_LIMITS_MAX) {
                snprintf(why, whylen, "more than %d paths",
                         SL_DISK_LIMITS_MAX);
                return -EINVAL;
            }
            memcpy(out->e[out->n].path, ps, (size_t)(colon - ps));
            out->e[out->n].path[colon - ps] = '\0';
            out->e[out->n].percent = pct;
            out->n++;
        }
        if (*end == '\0') {
            return 0;
        }
        p = end + 1;
    }
}

/* Any limit at all? */
static inline bool
sl_disk_limits_set(const struct sl_disk_limits *l)
{
    return l->n > 0 || l->any >= 0;
}

/* The percent that applies to the disk mounted at `path`: its own entry,
 * else `*`'s; -1 when neither. */
static inline int
sl_disk_limit_for(const struct sl_disk_limits *l, const char *path)
{
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->e[i].path, path) == 0) {
            return l->e[i].percent;
        }
    }
    return l->any;
}

/*
 * Is a disk of `total` bytes with `available` free exhausted under
 * `limit` percent (-1: no limit)? Used is total - available (reserved
 * blocks count as used); exhausted when the used share exceeds the
 * limit (`*:100` never trips, `*:0` trips on any disk with a byte used).
 */
static inline bool
sl_disk_exhausted(uint64_t total, uint64_t available, int limit)
{
    uint64_t used;

    if (limit < 0 || total == 0) {
        return false;
    }
    used = available < total ? total - available : 0;
    /* used / total > limit / 100, in integers (DISKS counts kilobytes:
     * no overflow) */
    return used * 100 > (uint64_t)limit * total;
}

#endif
