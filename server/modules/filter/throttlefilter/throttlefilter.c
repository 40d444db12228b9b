/* SPDX-License-Identifier: Apache-2.0 */
/*
 * throttlefilter: limit the statements per second of each session, with
 * MaxScale's parameters.
 *
 * The rate is measured over a sliding window of `sampling_duration`: at
 * most max_qps * sampling_duration statements (COM_QUERY, COM_STMT_EXECUTE)
 * in any such window. MaxScale delays statements past the limit; Sluice,
 * whose data path never sleeps, answers such a statement at once with
 * error 1105 "Query rate limit exceeded" and sends nothing to the server,
 * so the client sees the limit instead of a stall. A session
 * that stays over the limit for longer than `throttling_duration` is
 * disconnected (as MaxScale does); one that has been under it for
 * `continuous_duration` is no longer throttled.
 *
 *   NORMAL --rate > max_qps--> THROTTLING --below for continuous_duration-->
 *     ^                            |                               NORMAL
 *     |                            +--over for throttling_duration--> close
 *
 * Context: per session state only; nothing shared.
 */
#define SL_LOG_TAG "throttlefilter"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/filter.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/module.h>
#include <sluice/params.h>
#include <sluice/session.h>

#include "fltutil.h"

#define THR_ERR_CODE 1105
#define THR_ERR_STATE "HY000"
#define THR_MAX_SLOTS 4096   /* timestamps kept per session */

static const struct sl_param_spec thr_params[] = {
    {"max_qps", SL_PARAM_COUNT, NULL, SL_PARAM_F_MANDATORY, NULL,
     "Statements per second allowed per session"},
    {"sampling_duration", SL_PARAM_DURATION, "250ms", 0, NULL,
     "Window over which the rate is measured"},
    {"throttling_duration", SL_PARAM_DURATION, NULL, SL_PARAM_F_MANDATORY,
     NULL, "Disconnect a session throttled for this long"},
    {"continuous_duration", SL_PARAM_DURATION, "2s", 0, NULL,
     "Stop throttling after this long under the limit"},
    SL_PARAM_END,
};

struct thr_instance {
    uint64_t max_qps;
    int64_t sampling_us, throttling_us, continuous_us;
    size_t slots;   /* statements allowed per window */
};

struct thr_session {
    struct thr_instance *inst;
    struct sl_filter_session *fs;
    struct sl_session *ses;
    int64_t *times;    /* ring of the last `slots` admitted statements */
    size_t head, count;
    int64_t throttled_since;   /* 0 when not throttling */
    int64_t last_over;         /* last statement refused */
};

static void *
thr_create(const char *name, const struct sl_params *p)
{
    struct thr_instance *inst = calloc(1, sizeof(*inst));
    uint64_t slots;

    if (inst == NULL) {
        return NULL;
    }
    inst->max_qps = sl_params_count(p, "max_qps");
    inst->sampling_us = (int64_t)sl_params_duration_ms(p, "sampling_duration")
                        * 1000;
    inst->throttling_us =
        (int64_t)sl_params_duration_ms(p, "throttling_duration") * 1000;
    inst->continuous_us =
        (int64_t)sl_params_duration_ms(p, "continuous_duration") * 1000;
    slots = inst->max_qps * (uint64_t)inst->sampling_us / 1000000;
    if (inst->max_qps == 0 || inst->sampling_us <= 0 || slots == 0 ||
        slots > THR_MAX_SLOTS) {
        sl_log_error("filter '%s': max_qps * sampling_duration must allow "
                     "between 1 and %d statements per window", name,
                     THR_MAX_SLOTS);
        free(inst);
        return NULL;
    }
    inst->slots = (size_t)slots;
    return inst;
}

static void
thr_destroy(void *instance)
{
    free(instance);
}

static void *
thr_new_session(void *instance, struct sl_session *ses,
                struct sl_filter_session *fs)
{
    struct thr_instance *inst = instance;
    struct thr_session *ts = calloc(1, sizeof(*ts));

    if (ts == NULL) {
        return NULL;
    }
    ts->times = calloc(inst->slots, sizeof(*ts->times));
    if (ts->times == NULL) {
        free(ts);
        return NULL;
    }
    ts->inst = inst;
    ts->fs = fs;
    ts->ses = ses;
    return ts;
}

static void
thr_free_session(void *fsession)
{
    struct thr_session *ts = fsession;

    free(ts->times);
    free(ts);
}

/* Admit a statement at `now` if the window has room. */
static bool
thr_admit(struct thr_session *ts, int64_t now)
{
    struct thr_instance *inst = ts->inst;
    size_t oldest = (ts->head + inst->slots - ts->count) % inst->slots;

    if (ts->count == inst->slots &&
        now - ts->times[oldest] < inst->sampling_us) {
        return false;
    }
    ts->times[ts->head] = now;
    ts->head = (ts->head + 1) % inst->slots;
    if (ts->count < inst->slots) {
        ts->count++;
    }
    return true;
}

static int
thr_route_query(void *fsession, struct sl_buf *buf)
{
    struct thr_session *ts = fsession;
    struct thr_instance *inst = ts->inst;
    int64_t now = flt_now_us();
    struct sl_buf *err;
    struct sl_reply reply = {0};
    int cmd = sl_mdb_command(buf);

    if (cmd != SL_COM_QUERY && cmd != SL_COM_STMT_EXECUTE) {
        return sl_filter_route_next(ts->fs, buf);
    }
    if (ts->throttled_since != 0 &&
        now - ts->last_over > inst->continuous_us) {
        ts->throttled_since = 0;
    }
    if (thr_admit(ts, now)) {
        return sl_filter_route_next(ts->fs, buf);
    }
    ts->last_over = now;
    if (ts->throttled_since == 0) {
        ts->throttled_since = now;
        sl_log_ses_notice(ts->ses, "over max_qps=%llu: throttling",
                          (unsigned long long)inst->max_qps);
    } else if (now - ts->throttled_since > inst->throttling_us) {
        sl_buf_free(buf);
        sl_session_send_error(ts->ses, THR_ERR_CODE, THR_ERR_STATE,
                              "Query rate limit exceeded for too long: "
                              "disconnecting");
        sl_session_close(ts->ses, "throttled for too long");
        return SL_OK;
    }
    if (sl_session_answers_pending(ts->ses) > 1) {
        /* Pipelined: an error now would overtake the answers of earlier
         * commands and be read as one of them. */
        sl_buf_free(buf);
        sl_session_close(ts->ses, "over max_qps while pipelining");
        return SL_OK;
    }
    reply.command = (uint8_t)cmd;
    sl_buf_free(buf);
    reply.state = SL_REPLY_DONE;
    reply.complete = true;
    reply.is_err = true;
    reply.error_code = THR_ERR_CODE;
    memcpy(reply.sqlstate, THR_ERR_STATE, 6);
    err = sl_mdb_make_err(1, THR_ERR_CODE, THR_ERR_STATE,
                          "Query rate limit exceeded");
    if (err == NULL) {
        return SL_ERROR;
    }
    return sl_filter_reply_next(ts->fs, err, &reply);
}

static const struct sl_filter_ops thr_ops = {
    .size = sizeof(thr_ops),
    .create_instance = thr_create,
    .destroy_instance = thr_destroy,
    .new_session = thr_new_session,
    .free_session = thr_free_session,
    .route_query = thr_route_query,
};

static const char *const thr_aliases[] = {"throttle", NULL};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_GA,
    .name = "throttlefilter",
    .version = "1.0.0",
    .description = "Limits statements per second per session",
    .aliases = thr_aliases,
    .params = thr_params,
    .ops = &thr_ops,
})
