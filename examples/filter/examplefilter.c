/* SPDX-License-Identifier: Apache-2.0 */
/*
 * examplefilter: the smallest complete third-party Sluice filter.
 *
 * It answers one statement itself and passes every other one on:
 *
 *   SELECT example_greeting()   ->  one row, one column "greeting",
 *                                   the value of the `greeting` parameter
 *
 * and counts the statements it has seen per session. Build it out of tree
 * against the installed SDK (see Makefile and docs/writing-a-filter.md),
 * copy libexamplefilter.so into Sluice's module_dir and configure:
 *
 *   [Example]
 *   type=filter
 *   module=examplefilter
 *   greeting=hello from a filter
 *
 *   [Some-Service]
 *   ...
 *   filters=Example
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sluice/buf.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/session.h>

#define EXAMPLE_SQL "SELECT example_greeting()"

/* The parameters: the core validates them and applies the default. */
static const struct sl_param_spec example_params[] = {
    {"greeting", SL_PARAM_STRING, "hello", 0, NULL, "The answer's text"},
    SL_PARAM_END,
};

struct example_instance {
    char greeting[256];
};

struct example_session {
    struct example_instance *inst;
    struct sl_session *ses;
    struct sl_filter_session *fs;   /* our link in the chain */
    unsigned long statements;
};

static void *
example_create(const char *name, const struct sl_params *p)
{
    struct example_instance *inst = calloc(1, sizeof(*inst));

    (void)name;
    if (inst != NULL) {
        snprintf(inst->greeting, sizeof(inst->greeting), "%s",
                 sl_params_string(p, "greeting"));
    }
    return inst;
}

static void
example_destroy(void *instance)
{
    free(instance);
}

static void *
example_new_session(void *instance, struct sl_session *ses,
                    struct sl_filter_session *fs)
{
    struct example_session *es = calloc(1, sizeof(*es));

    if (es != NULL) {
        es->inst = instance;
        es->ses = ses;
        es->fs = fs;
    }
    return es;
}

static void
example_free_session(void *fsession)
{
    struct example_session *es = fsession;

    sl_log_ses_info(es->ses, "examplefilter saw %lu statements",
                    es->statements);
    free(es);
}

/* Is buf the COM_QUERY "SELECT example_greeting()"? */
static bool
is_ours(struct sl_buf *buf)
{
    size_t len = sl_buf_len(buf);
    size_t n = strlen(EXAMPLE_SQL);
    unsigned char *p;

    if (len != SL_MDB_HDR_LEN + 1 + n || sl_mdb_command(buf) != SL_COM_QUERY) {
        return false;
    }
    p = sl_buf_pullup(buf, len);
    return p != NULL &&
           strncasecmp((char *)p + SL_MDB_HDR_LEN + 1, EXAMPLE_SQL, n) == 0;
}

/* Answer with a one-row result set instead of passing the statement on. */
static int
answer(struct example_session *es, struct sl_buf *buf)
{
    const char *names[] = {"greeting"};
    const char *values[] = {es->inst->greeting};
    struct sl_reply reply = {0};
    struct sl_buf *rs;

    sl_buf_free(buf);   /* we own it: nobody else will */
    /* The client's capabilities decide the answer's format (EOF packets,
     * MariaDB extended metadata). */
    rs = sl_mdb_make_resultset_for(1, sl_session_client_caps(es->ses),
                                   SL_SERVER_STATUS_AUTOCOMMIT, 1, names, 1,
                                   values);
    if (rs == NULL) {
        return SL_ERROR;
    }
    reply.command = SL_COM_QUERY;
    reply.state = SL_REPLY_DONE;
    reply.complete = true;
    reply.results = 1;
    reply.rows = 1;
    reply.field_count = 1;
    return sl_filter_reply_next(es->fs, rs, &reply);
}

static int
example_route_query(void *fsession, struct sl_buf *buf)
{
    struct example_session *es = fsession;

    es->statements++;
    if (is_ours(buf)) {
        return answer(es, buf);
    }
    return sl_filter_route_next(es->fs, buf);
}

static const struct sl_filter_ops example_ops = {
    .size = sizeof(example_ops),
    .create_instance = example_create,
    .destroy_instance = example_destroy,
    .new_session = example_new_session,
    .free_session = example_free_session,
    .route_query = example_route_query,
    /* no client_reply: answers pass through untouched */
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_EXPERIMENTAL,
    .name = "examplefilter",
    .version = "1.0.0",
    .description = "Answers SELECT example_greeting() itself",
    .params = example_params,
    .ops = &example_ops,
})
