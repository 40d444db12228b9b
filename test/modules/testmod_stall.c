/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A router for the watchdog system test (test_systemd.py): it opens no
 * backend, and every statement blocks the worker that runs it for as long
 * as the file named by `stall_file` exists (at most a minute), then
 * answers OK. Blocking a worker is exactly what no real module may do; it
 * stands in for a worker stuck in a callback, which the systemd watchdog
 * must notice.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/router.h>
#include <sluice/session.h>

#define MAX_STALL_MS 60000

struct stall {
    char *file;
};

static void *
create_instance(struct sl_service *svc, const struct sl_params *p)
{
    struct stall *st = calloc(1, sizeof(*st));

    (void)svc;
    if (st == NULL) {
        return NULL;
    }
    st->file = strdup(sl_params_get(p, "stall_file"));
    if (st->file == NULL) {
        free(st);
        return NULL;
    }
    return st;
}

static void
destroy_instance(void *inst)
{
    struct stall *st = inst;

    free(st->file);
    free(st);
}

struct stall_session {
    struct stall *inst;
    struct sl_session *ses;
};

static void *
new_session(void *inst, struct sl_session *ses)
{
    struct stall_session *rs = calloc(1, sizeof(*rs));

    if (rs != NULL) {
        rs->inst = inst;
        rs->ses = ses;
    }
    return rs;
}

static void
free_session(void *rses)
{
    free(rses);
}

static int
route_query(void *rses, struct sl_buf *buf)
{
    struct stall_session *rs = rses;
    struct timespec ten_ms = {.tv_nsec = 10000000};
    struct sl_reply reply = {0};
    struct sl_buf *out;

    reply.command = (uint8_t)sl_mdb_command(buf);
    sl_buf_free(buf);
    for (int ms = 0; ms < MAX_STALL_MS && access(rs->inst->file, F_OK) == 0;
         ms += 10) {
        nanosleep(&ten_ms, NULL);
    }
    out = sl_mdb_make_ok(1, 0, 0, SL_SERVER_STATUS_AUTOCOMMIT, 0);
    if (out == NULL) {
        return SL_ERROR;
    }
    reply.is_ok = true;
    reply.state = SL_REPLY_DONE;
    reply.complete = true;
    return sl_session_reply(rs->ses, out, &reply);
}

static const struct sl_param_spec params[] = {
    {"stall_file", SL_PARAM_PATH, NULL, SL_PARAM_F_MANDATORY, NULL,
     "statements block while this file exists"},
    SL_PARAM_END,
};

static const struct sl_router_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
    .destroy_instance = destroy_instance,
    .new_session = new_session,
    .free_session = free_session,
    .route_query = route_query,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_ROUTER,
    .name = "testmod_stall",
    .version = "1.0",
    .params = params,
    .ops = &ops,
});
