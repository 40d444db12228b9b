/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hintfilter: honour MaxScale's routing-hint comments.
 *
 *   SELECT ... -- maxscale route to master
 *   SELECT ... -- maxscale route to slave
 *   SELECT ... -- maxscale route to server db2
 *   SELECT ... / * maxscale route to last * /
 *
 * The query classifier parses the comment (struct sl_qc_result.hint); the
 * filter attaches it to the session with sl_session_set_hint() so that a
 * hint-aware router (readwritesplit) routes that statement accordingly. A
 * statement without a hint comment is passed on untouched. The named
 * hint types MaxScale also accepts (`-- maxscale <name> begin`, stacks of
 * hints) are not supported.
 *
 * Context: stateless apart from the session pointers.
 */
#define SL_LOG_TAG "hintfilter"

#include <stdlib.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/classifier.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/session.h>

#include "fltutil.h"

struct hint_session {
    struct sl_session *ses;
    struct sl_filter_session *fs;
};

static void *
hint_create(const char *name, const struct sl_params *p)
{
    static int token;

    (void)name;
    (void)p;
    return &token;   /* no instance state */
}

static void
hint_destroy(void *instance)
{
    (void)instance;
}

static void *
hint_new_session(void *instance, struct sl_session *ses,
                 struct sl_filter_session *fs)
{
    struct hint_session *hs = calloc(1, sizeof(*hs));

    (void)instance;
    if (hs != NULL) {
        hs->ses = ses;
        hs->fs = fs;
    }
    return hs;
}

static void
hint_free_session(void *fsession)
{
    free(fsession);
}

/* Does sql[0..len) contain "maxscale", in any case? */
static bool
mentions_maxscale(const char *sql, size_t len)
{
    for (size_t i = 0; i + 8 <= len; i++) {
        if ((sql[i] == 'm' || sql[i] == 'M') &&
            strncasecmp(sql + i, "maxscale", 8) == 0) {
            return true;
        }
    }
    return false;
}

static int
hint_route_query(void *fsession, struct sl_buf *buf)
{
    struct hint_session *hs = fsession;
    struct sl_qc_result qc;
    const char *sql;
    size_t len;

    /* Cheap pre-check: no "maxscale" in the text, no hint. */
    if ((sql = flt_query_sql(buf, &len)) != NULL &&
        mentions_maxscale(sql, len)) {
        sl_qc_classify(sql, len, &qc);
        if (qc.hint.type != SL_HINT_NONE) {
            sl_log_ses_debug(hs->ses, "hint %d %s", (int)qc.hint.type,
                             qc.hint.server);
            sl_session_set_hint(hs->ses, &qc.hint);
        }
    }
    return sl_filter_route_next(hs->fs, buf);
}

static const struct sl_filter_ops hint_ops = {
    .size = sizeof(hint_ops),
    .create_instance = hint_create,
    .destroy_instance = hint_destroy,
    .new_session = hint_new_session,
    .free_session = hint_free_session,
    .route_query = hint_route_query,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "hintfilter",
    .version = "1.0.0",
    .description = "Routing hints from '-- maxscale route to ...' comments",
    .ops = &hint_ops,
})
