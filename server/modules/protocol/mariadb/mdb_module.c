/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mariadbprotocol module descriptor: the MariaDB/MySQL client-server
 * protocol on both sides of the proxy. The client side lives in
 * mdb_client.c, the backend side in mdb_backend.c, the account cache in
 * mdb_users.c and all pure parsing in the sl_mariadb_parse library.
 */
#include <mysql.h>
#include <string.h>

#define SL_LOG_TAG "mariadbprotocol"
#include <sluice/log.h>
#include <sluice/module.h>
#include <sluice/protocol.h>

#include "mdb.h"
#include "mdb_kill.h"

static void *
service_data_create(struct sl_service *svc)
{
    return mdb_service_create(svc);
}

static void
service_data_free(void *data)
{
    mdb_service_free(data);
}

static void *
service_diagnostics(void *data)
{
    return data != NULL ? mdb_service_diagnostics(data) : NULL;
}

/*
 * The RSA key pair of caching_sha2_password's full authentication on
 * plain connections (and of ed_mode=sha256): generated once per process
 * at start-up, kept in memory only, read-only afterwards (workers share
 * it without a lock; each decryption has its own EVP_PKEY_CTX).
 */
#define RSA_BITS 2048
static struct evp_pkey_st *rsa_key;
static char rsa_pem[2048];

struct evp_pkey_st *
mdb_server_rsa_key(void)
{
    return rsa_key;
}

const char *
mdb_server_rsa_pem(void)
{
    return rsa_key != NULL ? rsa_pem : NULL;
}

/* libmariadb must be initialised once before threads use it. */
static int
process_init(void)
{
    if (mysql_library_init(0, NULL, NULL) != 0) {
        return -1;
    }
    rsa_key = mdb_rsa_generate(RSA_BITS);
    if (rsa_key == NULL ||
        mdb_rsa_public_pem(rsa_key, rsa_pem, sizeof(rsa_pem)) == 0) {
        sl_log_error("cannot generate the RSA key of caching_sha2_password");
        mdb_rsa_free(rsa_key);
        rsa_key = NULL;
        return -1;
    }
    return 0;
}

/* Before the module is unloaded: no KILL job thread may still run its
 * code (a crash at exit under ASan in test_filter_tee, shared model:
 * kill_on_client_close started a job while the daemon stopped). */
static void
process_finish(void)
{
    mdb_kill_wait_jobs();
    mdb_rsa_free(rsa_key);
    rsa_key = NULL;
    memset(rsa_pem, 0, sizeof(rsa_pem));
}

static const struct sl_protocol_ops ops = {
    .size = sizeof(struct sl_protocol_ops),
    .service_data_create = service_data_create,
    .service_data_free = service_data_free,
    .client_accept = mdb_client_accept,
    .client_read = mdb_client_read,
    .session_ready = mdb_session_ready,
    .client_reply = mdb_client_reply,
    .client_error = mdb_client_error,
    .client_free = mdb_client_free,
    .backend_init = mdb_backend_init,
    .backend_read = mdb_backend_read,
    .backend_write = mdb_backend_write,
    .backend_close = mdb_backend_close,
    .backend_free = mdb_backend_free,
    .backend_pending = mdb_backend_pending,
    .service_diagnostics = service_diagnostics,
    .backend_park = mdb_backend_park,
    .backend_reuse = mdb_backend_reuse,
    .backend_forwarded_running = mdb_backend_forwarded_running,
};

static const char *const aliases[] = {
    "MariaDBClient", "mariadbclient", "MySQLClient", "mysqlclient",
    "mariadb",       "MariaDBProtocol", NULL,
};

SL_MODULE_DEFINE({
    SL_MODULE_HEADER,
    .type = SL_MODULE_PROTOCOL,
    .status = SL_MODULE_GA,
    .name = "mariadbprotocol",
    .version = "1.0.0",
    .description = "MariaDB/MySQL client-server protocol",
    .aliases = aliases,
    .params = NULL,
    .process_init = process_init,
    .process_finish = process_finish,
    .ops = &ops,
})
