/* SPDX-License-Identifier: Apache-2.0 */
/* A filter module the loader must refuse: an operations table too small. */
#include <sluice/filter.h>
#include <sluice/module.h>

static void *
create_instance(const char *name, const struct sl_params *p)
{
    (void)name;
    (void)p;
    return (void *)1;
}

static const struct sl_filter_ops ops = {
    .size = sizeof(size_t),
    .create_instance = create_instance,
};

SL_MODULE_DEFINE({
    .magic = SL_MODULE_MAGIC,
    .abi_major = SL_MODULE_ABI_MAJOR,
    .abi_minor = SL_MODULE_ABI_MINOR,
    .signature = SL_MODULE_SIGNATURE,
    .type = SL_MODULE_FILTER,
    .name = "testmod_smallops",
    .ops = &ops,
});
