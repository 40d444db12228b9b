/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A filter module with worker hooks that count their calls; worker_init
 * fails with -EIO while TESTMOD_WORKER_INIT_FAIL is set. create_instance
 * returns the address of the counters, so test_module can read them.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <sluice/filter.h>
#include <sluice/module.h>

static atomic_int counters[2];   /* [0] worker_init calls that succeeded,
                                  * [1] worker_finish calls */

static void *
create_instance(const char *name, const struct sl_params *p)
{
    (void)name;
    (void)p;
    return counters;
}

static int
worker_init(void)
{
    if (getenv("TESTMOD_WORKER_INIT_FAIL") != NULL) {
        return -EIO;
    }
    atomic_fetch_add(&counters[0], 1);
    return 0;
}

static void
worker_finish(void)
{
    atomic_fetch_add(&counters[1], 1);
}

static const struct sl_filter_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .name = "testmod_workerhooks",
    .worker_init = worker_init,
    .worker_finish = worker_finish,
    .ops = &ops,
});
