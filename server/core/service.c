/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Service and listener accessors. Both objects are immutable once the
 * configuration is published; the session counter is an atomic maintained
 * by the session code.
 *
 * Context: any thread.
 */
#include <string.h>

#include <sluice/service.h>

#include "internal.h"

const char *
sl_service_name(const struct sl_service *svc)
{
    return svc->name;
}

const struct sl_params *
sl_service_params(const struct sl_service *svc)
{
    return __atomic_load_n(&svc->params, __ATOMIC_ACQUIRE);
}

struct sl_server *const *
sl_service_servers(const struct sl_service *svc, size_t *count)
{
    /* runtime.c publishes a longer array before a larger count and a
     * smaller count before a shorter array: any pair stays in bounds */
    if (count) {
        *count = __atomic_load_n(&svc->nservers, __ATOMIC_ACQUIRE);
    }
    return __atomic_load_n(&svc->servers, __ATOMIC_ACQUIRE);
}

const char *
sl_service_user(const struct sl_service *svc)
{
    return svc->user;
}

const char *
sl_service_password(const struct sl_service *svc)
{
    return svc->password;
}

void *
sl_service_router_instance(const struct sl_service *svc)
{
    return __atomic_load_n(&svc->router_instance, __ATOMIC_ACQUIRE);
}

void *
sl_service_protocol_data(const struct sl_service *svc)
{
    return svc->protocol_data;
}

int64_t
sl_service_sessions(const struct sl_service *svc)
{
    return atomic_load_explicit(&svc->sessions, memory_order_relaxed);
}

const char *
sl_listener_name(const struct sl_listener *l)
{
    return l->name;
}

struct sl_service *
sl_listener_service(const struct sl_listener *l)
{
    return l->service;
}

const struct sl_params *
sl_listener_params(const struct sl_listener *l)
{
    return l->params;
}

struct sl_service *
sl_service_find(const char *name)
{
    return sl__find_service(sl__config_current(), name);
}

void
sl_service_auth_failed(struct sl_service *svc, enum sl_auth_failure why)
{
    if (svc == NULL) {
        return;
    }
    if ((unsigned)why >= SL_AUTH_FAIL_COUNT) {
        why = SL_AUTH_FAIL_OTHER;
    }
    atomic_fetch_add_explicit(&svc->auth_failures[why], 1,
                              memory_order_relaxed);
}

const char *
sl_auth_failure_name(enum sl_auth_failure why)
{
    static const char *const names[SL_AUTH_FAIL_COUNT] = {
        "unknown_user", "wrong_password", "denied", "tls_required",
        "account_locked", "password_expired", "resource_limit",
        "host_blocked", "other",
    };

    return (unsigned)why < SL_AUTH_FAIL_COUNT ? names[why] : "other";
}
