/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A minimal router for the configuration tests: creates an instance that
 * remembers its service, and declares one typed parameter.
 */
#include <sluice/module.h>
#include <sluice/router.h>

static int instance;

static void *
create_instance(struct sl_service *svc, const struct sl_params *p)
{
    (void)svc;
    (void)p;
    return &instance;
}

static void
destroy_instance(void *inst)
{
    (void)inst;
}

static const struct sl_param_spec params[] = {
    {"opt_count", SL_PARAM_COUNT, "7", 0, NULL, "a number"},
    SL_PARAM_END,
};

static const struct sl_router_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
    .destroy_instance = destroy_instance,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_ROUTER,
    .name = "testmod_router",
    .version = "1.0",
    .params = params,
    .ops = &ops,
});
