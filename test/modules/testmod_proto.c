/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A protocol module for the configuration tests: only the per-service data
 * hooks do anything; they count calls so a test can check that a service
 * with two listeners gets its data created once.
 */
#include <stdlib.h>

#include <sluice/module.h>
#include <sluice/protocol.h>

static int created;

SL_EXPORT int testmod_proto_created(void);

int
testmod_proto_created(void)
{
    return created;
}

static void *
service_data_create(struct sl_service *svc)
{
    (void)svc;
    created++;
    return malloc(1);
}

static void
service_data_free(void *data)
{
    free(data);
}

static const char *const aliases[] = {"TestClient", NULL};

static const struct sl_protocol_ops ops = {
    .size = sizeof(ops),
    .service_data_create = service_data_create,
    .service_data_free = service_data_free,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_PROTOCOL,
    .name = "testmod_proto",
    .version = "1.0",
    .aliases = aliases,
    .ops = &ops,
});
