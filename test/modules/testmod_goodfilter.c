/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A well-formed filter module for the loader and configuration tests: it
 * declares one parameter of each interesting kind and passes everything
 * through. Alias "TestFilterAlias" exercises alias lookup by directory scan.
 */
#include <stdlib.h>

#include <sluice/filter.h>
#include <sluice/module.h>
#include <sluice/params.h>

static int inits;

static void *
create_instance(const char *name, const struct sl_params *p)
{
    (void)name;
    (void)p;
    return &inits;
}

static void
destroy_instance(void *instance)
{
    (void)instance;
}

static int
process_init(void)
{
    inits++;
    return 0;
}

static const char *const modes[] = {"fast", "slow", NULL};
static const char *const aliases[] = {"TestFilterAlias", NULL};

static const struct sl_param_spec params[] = {
    {"match", SL_PARAM_REGEX, NULL, 0, NULL, "a pattern"},
    {"mode", SL_PARAM_ENUM, "fast", 0, modes, "speed"},
    {"needed", SL_PARAM_STRING, NULL, SL_PARAM_F_MANDATORY, NULL, "must"},
    SL_PARAM_END,
};

static const struct sl_filter_ops ops = {
    .size = sizeof(ops),
    .create_instance = create_instance,
    .destroy_instance = destroy_instance,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_FILTER,
    .status = SL_MODULE_EXPERIMENTAL,
    .name = "testmod_goodfilter",
    .version = "1.0",
    .description = "test filter",
    .aliases = aliases,
    .params = params,
    .process_init = process_init,
    .ops = &ops,
});
