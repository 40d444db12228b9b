/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A monitor for the runner tests: tick() marks its first server running
 * and start()/stop() are recorded in the instance, which the test reads
 * through the exported testmod_monitor_state().
 */
#include <stdatomic.h>

#include <sluice/module.h>
#include <sluice/monitor.h>
#include <sluice/server.h>

struct state {
    struct sl_monitor *mon;
    atomic_int started;
    atomic_int stopped;
};

static struct state st;

SL_EXPORT const int *testmod_monitor_state(void);

const int *
testmod_monitor_state(void)
{
    static int out[2];

    out[0] = atomic_load(&st.started);
    out[1] = atomic_load(&st.stopped);
    return out;
}

static void *
create_instance(struct sl_monitor *mon, const struct sl_params *p)
{
    (void)p;
    st.mon = mon;
    return &st;
}

static void
destroy_instance(void *inst)
{
    (void)inst;
}

static void
start(void *inst)
{
    atomic_fetch_add(&((struct state *)inst)->started, 1);
}

static void
stop(void *inst)
{
    atomic_fetch_add(&((struct state *)inst)->stopped, 1);
}

static void
tick(void *inst)
{
    struct state *s = inst;
    size_t n;
    struct sl_server *const *srv = sl_monitor_servers(s->mon, &n);

    if (n > 0) {
        sl_server_set_status(srv[0], SL_SRV_RUNNING | SL_SRV_MASTER);
    }
}

static const struct sl_monitor_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
    .destroy_instance = destroy_instance,
    .start = start,
    .stop = stop,
    .tick = tick,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_MONITOR,
    .name = "testmod_monitor",
    .version = "1.0",
    .ops = &ops,
});
