/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Services: a router, its parameters, its filter chain and its servers.
 * Listeners bind ports to services.
 *
 * Context: services are immutable once published (any thread may read);
 * counters are atomics.
 */
#ifndef SLUICE_SERVICE_H
#define SLUICE_SERVICE_H

#include <sluice/ccdefs.h>

struct sl_service;
struct sl_listener;
struct sl_server;
struct sl_params;

SL_EXPORT const char *sl_service_name(const struct sl_service *svc);
SL_EXPORT const struct sl_params *sl_service_params(
    const struct sl_service *svc);
/* The servers the service routes to, in configuration order. */
SL_EXPORT struct sl_server *const *sl_service_servers(
    const struct sl_service *svc, size_t *count);
/* Credentials used to load user accounts (service user/password). */
SL_EXPORT const char *sl_service_user(const struct sl_service *svc);
SL_EXPORT const char *sl_service_password(const struct sl_service *svc);
/* The router instance returned by the router's create_instance. */
SL_EXPORT void *sl_service_router_instance(const struct sl_service *svc);
/* Per-service data of the protocol module (user accounts cache), created
 * by the protocol's service_data_create when the first listener of the
 * service is created. */
SL_EXPORT void *sl_service_protocol_data(const struct sl_service *svc);

/* Current client sessions of the service. */
SL_EXPORT int64_t sl_service_sessions(const struct sl_service *svc);

/* The configured service called name, or NULL. Worker threads, after the
 * configuration is published (services are never freed while running). */
/* A failed client login, counted per service and reason for /metrics
 * (sluice_service_auth_failures_total{reason}) and the service's REST
 * statistics (failed_auths). Any worker; a relaxed atomic add (logins
 * are not the per-query hot path). */
enum sl_auth_failure {
    SL_AUTH_FAIL_UNKNOWN_USER,      /* no account matches user@host */
    SL_AUTH_FAIL_WRONG_PASSWORD,    /* an account matches, the token not */
    SL_AUTH_FAIL_DENIED,            /* other denials (root not allowed) */
    SL_AUTH_FAIL_TLS_REQUIRED,      /* the account's REQUIRE clause */
    SL_AUTH_FAIL_ACCOUNT_LOCKED,
    SL_AUTH_FAIL_PASSWORD_EXPIRED,
    SL_AUTH_FAIL_RESOURCE_LIMIT,    /* max_user_connections and kin */
    SL_AUTH_FAIL_HOST_BLOCKED,      /* max_auth_errors_until_block */
    SL_AUTH_FAIL_OTHER,
    SL_AUTH_FAIL_COUNT
};
SL_EXPORT void sl_service_auth_failed(struct sl_service *svc,
                                      enum sl_auth_failure why);
/* Its label in /metrics ("unknown_user", "wrong_password", ...). */
SL_EXPORT const char *sl_auth_failure_name(enum sl_auth_failure why);
SL_EXPORT struct sl_service *sl_service_find(const char *name);

SL_EXPORT const char *sl_listener_name(const struct sl_listener *l);
SL_EXPORT struct sl_service *sl_listener_service(const struct sl_listener *l);
SL_EXPORT const struct sl_params *sl_listener_params(
    const struct sl_listener *l);
/* ABI 2.8: the statements of the listener's connection_init_sql_file, read
 * when the listener was loaded (*n of them; NULL and 0 without one, or for
 * l NULL). The backend protocol sends them on every backend connection of
 * the listener's sessions after the login, before anything else. Owned by
 * the listener; valid while the caller's session holds it. Any thread. */
SL_EXPORT const char *const *sl_listener_init_sql(const struct sl_listener *l,
                                                  size_t *n);

#endif
