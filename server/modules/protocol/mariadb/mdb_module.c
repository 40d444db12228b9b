/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mariadbprotocol module descriptor: the MariaDB/MySQL client-server
 * protocol on both sides of the proxy. The client side lives in
 * mdb_client.c, the backend side in mdb_backend.c, the account cache in
 * mdb_users.c and all pure parsing in the sl_mariadb_parse library.
 */
#include <mysql.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
 * plain connections (and of ed_mode=sha256): generated once per process,
 * kept in memory only. Generating 2048 bits takes 0.2 to 1 s, so a
 * thread started by process_init makes it while Sluice starts, and the
 * first login that needs it (a client asking for the key) waits for it
 * if it is not done yet. Read-only afterwards: workers share it without
 * a lock (each decryption has its own EVP_PKEY_CTX).
 */
#define RSA_BITS 2048
static struct evp_pkey_st *rsa_key;
static char rsa_pem[2048];
static atomic_bool rsa_done;        /* rsa_key and rsa_pem are final */
static pthread_mutex_t rsa_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rsa_cond = PTHREAD_COND_INITIALIZER;
static pthread_t rsa_thread;
static bool rsa_started;

static void *
rsa_main(void *arg)
{
    struct evp_pkey_st *key = mdb_rsa_generate(RSA_BITS);

    (void)arg;
    if (key == NULL ||
        mdb_rsa_public_pem(key, rsa_pem, sizeof(rsa_pem)) == 0) {
        sl_log_error("cannot generate the RSA key of "
                     "caching_sha2_password: clients on plain connections "
                     "that need it will be refused");
        mdb_rsa_free(key);
        key = NULL;
    }
    pthread_mutex_lock(&rsa_lock);
    rsa_key = key;
    atomic_store(&rsa_done, true);
    pthread_cond_broadcast(&rsa_cond);
    pthread_mutex_unlock(&rsa_lock);
    return NULL;
}

/* Wait (the first time only) until the key is made. */
static void
rsa_wait(void)
{
    if (atomic_load(&rsa_done)) {
        return;
    }
    pthread_mutex_lock(&rsa_lock);
    while (!atomic_load(&rsa_done)) {
        pthread_cond_wait(&rsa_cond, &rsa_lock);
    }
    pthread_mutex_unlock(&rsa_lock);
}

struct evp_pkey_st *
mdb_server_rsa_key(void)
{
    rsa_wait();
    return rsa_key;
}

const char *
mdb_server_rsa_pem(void)
{
    rsa_wait();
    return rsa_key != NULL ? rsa_pem : NULL;
}

/* libmariadb must be initialised once before threads use it. */
static int
process_init(void)
{
    if (mysql_library_init(0, NULL, NULL) != 0) {
        return -1;
    }
    if (pthread_create(&rsa_thread, NULL, rsa_main, NULL) != 0) {
        rsa_main(NULL);   /* make it now, then */
    } else {
        rsa_started = true;
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
    if (rsa_started) {
        pthread_join(rsa_thread, NULL);
        rsa_started = false;
    }
    mdb_rsa_free(rsa_key);
    rsa_key = NULL;
    atomic_store(&rsa_done, false);
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
