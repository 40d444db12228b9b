/* SPDX-License-Identifier: Apache-2.0 */
/*
 * namedserverfilter: route statements matching patterns to a chosen
 * server, as MaxScale's namedserverfilter (regexhintfilter) does.
 *
 *   match01=^SELECT.*FROM orders    target01=db3
 *   match02=/FOR UPDATE/            target02=->master
 *
 * Up to 25 pairs matchNN/targetNN (01..25), tried in order; the first
 * matching pattern attaches a routing hint for that statement: a server
 * name (SL_HINT_ROUTE_TO_NAMED_SERVER; the first when several are listed),
 * or ->master, ->slave, ->all. The legacy single pair match/server is also
 * accepted. `user`/`source` restrict which sessions are affected. Target
 * servers must exist (checked by the core at start, with file:line). The
 * hint takes effect only with a hint-aware router (readwritesplit).
 *
 * Context: the instance is immutable; match data is per session.
 */
#define SL_LOG_TAG "namedserverfilter"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/session.h>

#include "fltutil.h"

#define NSF_PAIRS 25

#define PAIR(nn)                                                               \
    {"match" nn, SL_PARAM_REGEX, NULL, 0, NULL, "Pattern " nn},                \
    {"target" nn, SL_PARAM_SERVERS, NULL, 0, NULL,                            \
     "Server(s) or ->master|->slave|->all for match" nn}

static const struct sl_param_spec nsf_params[] = {
    PAIR("01"), PAIR("02"), PAIR("03"), PAIR("04"), PAIR("05"),
    PAIR("06"), PAIR("07"), PAIR("08"), PAIR("09"), PAIR("10"),
    PAIR("11"), PAIR("12"), PAIR("13"), PAIR("14"), PAIR("15"),
    PAIR("16"), PAIR("17"), PAIR("18"), PAIR("19"), PAIR("20"),
    PAIR("21"), PAIR("22"), PAIR("23"), PAIR("24"), PAIR("25"),
    {"match", SL_PARAM_REGEX, NULL, SL_PARAM_F_DEPRECATED, NULL,
     "Legacy pattern (use match01)"},
    {"server", SL_PARAM_SERVERS, NULL, SL_PARAM_F_DEPRECATED, NULL,
     "Legacy target (use target01)"},
    {"options", SL_PARAM_ENUM_MASK, "", 0, flt_regex_options,
     "Pattern options"},
    {"user", SL_PARAM_STRING, NULL, 0, NULL, "Only this user's sessions"},
    {"source", SL_PARAM_STRING, NULL, 0, NULL, "Only this client host"},
    SL_PARAM_END,
};

struct nsf_rule {
    struct flt_regex re;
    struct sl_hint hint;
};

struct nsf_instance {
    struct nsf_rule rules[NSF_PAIRS + 1];
    size_t nrules;
    struct flt_who who;
};

struct nsf_session {
    struct nsf_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;
    pcre2_match_data *md;
    int active;
};

static void
nsf_target(struct sl_hint *h, const char *target)
{
    size_t n = strcspn(target, ", ");

    memset(h, 0, sizeof(*h));
    if (strcmp(target, "->master") == 0) {
        h->type = SL_HINT_ROUTE_TO_MASTER;
    } else if (strcmp(target, "->slave") == 0) {
        h->type = SL_HINT_ROUTE_TO_SLAVE;
    } else if (strcmp(target, "->all") == 0) {
        h->type = SL_HINT_ROUTE_TO_ALL;
    } else {
        h->type = SL_HINT_ROUTE_TO_NAMED_SERVER;
        snprintf(h->server, sizeof(h->server), "%.*s", (int)n, target);
    }
}

/* Add the rule for pattern parameter m and target parameter t. */
static int
nsf_add(struct nsf_instance *inst, const struct sl_params *p, const char *m,
        const char *t, unsigned opts, const char *name)
{
    struct nsf_rule *r = &inst->rules[inst->nrules];
    const char *target = sl_params_get(p, t);
    bool has_match = sl_params_get(p, m) != NULL;

    if (!has_match && target == NULL) {
        return 0;
    }
    if (!has_match || target == NULL) {
        sl_log_error("filter '%s': '%s' needs '%s' and vice versa", name, m,
                     t);
        return -1;
    }
    if (flt_regex_init(&r->re, p, m, opts, name) != 0) {
        return -1;
    }
    nsf_target(&r->hint, target);
    inst->nrules++;
    return 0;
}

static void nsf_destroy(void *instance);

static void *
nsf_create(const char *name, const struct sl_params *p)
{
    struct nsf_instance *inst = calloc(1, sizeof(*inst));
    unsigned opts = (unsigned)sl_params_enum_mask(p, "options");
    char m[16], t[16];

    if (inst == NULL) {
        return NULL;
    }
    flt_who_init(&inst->who, p);
    for (int i = 1; i <= NSF_PAIRS; i++) {
        snprintf(m, sizeof(m), "match%02d", i);
        snprintf(t, sizeof(t), "target%02d", i);
        if (nsf_add(inst, p, m, t, opts, name) != 0) {
            nsf_destroy(inst);
            return NULL;
        }
    }
    if (nsf_add(inst, p, "match", "server", opts, name) != 0) {
        nsf_destroy(inst);
        return NULL;
    }
    if (inst->nrules == 0) {
        sl_log_error("filter '%s': no matchNN/targetNN pair", name);
        nsf_destroy(inst);
        return NULL;
    }
    return inst;
}

static void
nsf_destroy(void *instance)
{
    struct nsf_instance *inst = instance;

    for (size_t i = 0; i < inst->nrules; i++) {
        flt_regex_free(&inst->rules[i].re);
    }
    free(inst);
}

static void *
nsf_new_session(void *instance, struct sl_session *ses,
                struct sl_filter_session *fs)
{
    struct nsf_session *ns = calloc(1, sizeof(*ns));

    if (ns == NULL) {
        return NULL;
    }
    ns->inst = instance;
    ns->ses = ses;
    ns->fs = fs;
    ns->active = -1;
    ns->md = pcre2_match_data_create(16, NULL);
    if (ns->md == NULL) {
        free(ns);
        return NULL;
    }
    return ns;
}

static void
nsf_free_session(void *fsession)
{
    struct nsf_session *ns = fsession;

    pcre2_match_data_free(ns->md);
    free(ns);
}

static int
nsf_route_query(void *fsession, struct sl_buf *buf)
{
    struct nsf_session *ns = fsession;
    struct nsf_instance *inst = ns->inst;
    const char *sql;
    size_t len;

    if (ns->active < 0) {
        ns->active = flt_who_match(&inst->who, ns->ses);
    }
    if (ns->active && (sql = flt_query_sql(buf, &len)) != NULL) {
        for (size_t i = 0; i < inst->nrules; i++) {
            if (flt_regex_match(&inst->rules[i].re, ns->md, sql, len)) {
                sl_session_set_hint(ns->ses, &inst->rules[i].hint);
                break;
            }
        }
    }
    return sl_filter_route_next(ns->fs, buf);
}

static const struct sl_filter_ops nsf_ops = {
    .size = sizeof(nsf_ops),
    .create_instance = nsf_create,
    .destroy_instance = nsf_destroy,
    .new_session = nsf_new_session,
    .free_session = nsf_free_session,
    .route_query = nsf_route_query,
};

static const char *const nsf_aliases[] = {"regexhintfilter", NULL};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "namedserverfilter",
    .version = "1.0.0",
    .description = "Routes statements matching patterns to named servers",
    .aliases = nsf_aliases,
    .params = nsf_params,
    .ops = &nsf_ops,
})
