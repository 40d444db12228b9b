/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Blocking hosts after repeated authentication failures (MaxScale's
 * max_auth_errors_until_block, a [maxscale] parameter, default 10, 0 =
 * off). Each (service, client host) pair counts failed logins; failures
 * more than MDB_BLOCK_WINDOW_MS apart start a new count. When the count
 * reaches the limit the host is blocked for MDB_BLOCK_MS: its connections
 * get ERR 1129 in place of the handshake, so a storm of bad logins never
 * costs a backend connection or an account reload. Every failed
 * authentication counts, a COM_CHANGE_USER's too.
 *
 * Unlike MariaDB's max_connect_errors, a successful login does not clear
 * the count (MaxScale's rule): otherwise a host holding one valid account
 * could interleave good logins with guesses at other accounts for ever.
 * The count ends when the host has had no failure for the window.
 *
 * Context: any worker; one mutex guards the table (taken only at
 * connection start and on failed logins, never per query).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SL_LOG_TAG "mariadbprotocol"
#include <sluice/log.h>
#include <sluice/params.h>
#include <sluice/worker.h>

#include "mdb.h"

#define MDB_BLOCK_MS 60000          /* how long a host stays blocked */
#define MDB_BLOCK_WINDOW_MS 60000   /* failures this close count together */
#define MDB_BLOCK_SLOTS 4096        /* hosts tracked at once */

struct slot {
    const void *svc;                /* NULL = free */
    char host[64];
    unsigned failures;
    uint64_t last_ms;
    uint64_t blocked_until_ms;
};

static struct slot slots[MDB_BLOCK_SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint used;            /* slots in use: 0 skips the lookup */

static unsigned
limit(void)
{
    const struct sl_params *g = sl_global_params();

    return g != NULL ? (unsigned)sl_params_count(
                           g, "max_auth_errors_until_block")
                     : 10;
}

/* The slot of (svc, host), or a free / stale one to reuse when create. */
static struct slot *
find(const void *svc, const char *host, uint64_t now, bool create)
{
    struct slot *spare = NULL;

    for (size_t i = 0; i < MDB_BLOCK_SLOTS; i++) {
        struct slot *s = &slots[i];
        bool stale = s->svc == NULL ||
                     (now > s->blocked_until_ms &&
                      now - s->last_ms > MDB_BLOCK_WINDOW_MS);

        if (s->svc == svc && strcmp(s->host, host) == 0) {
            return s;
        }
        if (stale && spare == NULL) {
            spare = s;
        }
    }
    if (!create || spare == NULL) {
        return NULL;
    }
    if (spare->svc == NULL) {
        atomic_fetch_add(&used, 1);
    }
    memset(spare, 0, sizeof(*spare));
    spare->svc = svc;
    snprintf(spare->host, sizeof(spare->host), "%s", host);
    return spare;
}

bool
mdb_host_blocked(const struct sl_service *svc, const char *host)
{
    uint64_t now = sl_worker_now_ms();
    struct slot *s;
    bool blocked;

    if (atomic_load(&used) == 0 || limit() == 0) {
        return false;
    }
    pthread_mutex_lock(&lock);
    s = find(svc, host, now, false);
    blocked = s != NULL && now < s->blocked_until_ms;
    pthread_mutex_unlock(&lock);
    return blocked;
}

void
mdb_host_auth_failed(const struct sl_service *svc, const char *host)
{
    uint64_t now = sl_worker_now_ms();
    unsigned max = limit();
    struct slot *s;

    if (max == 0) {
        return;
    }
    pthread_mutex_lock(&lock);
    s = find(svc, host, now, true);
    if (s != NULL) {
        if (now - s->last_ms > MDB_BLOCK_WINDOW_MS) {
            s->failures = 0;
        }
        s->last_ms = now;
        if (++s->failures >= max && now >= s->blocked_until_ms) {
            s->blocked_until_ms = now + MDB_BLOCK_MS;
            sl_log_warn("host '%s' blocked for %d seconds after %u failed "
                        "logins (max_auth_errors_until_block)", host,
                        MDB_BLOCK_MS / 1000, s->failures);
        }
    }
    pthread_mutex_unlock(&lock);
}
