/* SPDX-License-Identifier: Apache-2.0 */
/* A filter module whose process_init fails: the loader refuses it. */
#include <errno.h>

#include <sluice/filter.h>
#include <sluice/module.h>

static void *
create_instance(const char *name, const struct sl_params *p)
{
    (void)name;
    (void)p;
    return (void *)1;
}

static int
process_init(void)
{
    return -EIO;
}

static const struct sl_filter_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .name = "testmod_failinit",
    .process_init = process_init,
    .ops = &ops,
});
