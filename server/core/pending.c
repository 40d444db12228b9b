/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client connections that have not logged in yet ("pending"): counted per
 * service, against max_connections, and per (service, client host),
 * against max_pending_logins_per_host, so TCP connections that read the
 * greeting and stall cannot exhaust file descriptors or a service's
 * connection slots. The authentication deadline (auth_timeout) that ends
 * them is enforced by the client sweep in dcb.c.
 *
 *   accept --sl__pending_admit--> pending --login (sl_session_create)
 *                                         or close--> sl__pending_done
 *
 * The per-host counts live in a small chained hash table; an entry exists
 * while its host has a pending connection, so the table never holds more
 * entries than there are pending connections.
 *
 * Context: any worker; one mutex guards the table. Taken at accept and at
 * login or close of a pending client, never per packet.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NBUCKETS 1024

struct host_count {
    struct host_count *next;
    const struct sl_service *svc;
    unsigned pending;
    char host[];
};

static struct host_count *buckets[NBUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t
bucket_of(const struct sl_service *svc, const char *host)
{
    uint64_t h = 1469598103934665603ull ^ (uintptr_t)svc;

    for (const unsigned char *p = (const unsigned char *)host; *p; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    return (size_t)(h % NBUCKETS);
}

/* The entry of (svc, host) and the link pointing at it, or NULL. */
static struct host_count *
find(const struct sl_service *svc, const char *host, struct host_count ***link)
{
    struct host_count **pp = &buckets[bucket_of(svc, host)];

    for (; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->svc == svc && strcmp((*pp)->host, host) == 0) {
            break;
        }
    }
    *link = pp;
    return *pp;
}

/* One more pending connection of host, unless it has cap already (0 = no
 * cap). 0, -EUSERS over the cap, -ENOMEM. Lock held. */
static int
host_add(const struct sl_service *svc, const char *host, unsigned cap)
{
    struct host_count **link;
    struct host_count *e = find(svc, host, &link);
    size_t n;

    if (e == NULL) {
        n = strlen(host) + 1;
        e = malloc(sizeof(*e) + n);
        if (e == NULL) {
            return -ENOMEM;
        }
        e->next = NULL;
        e->svc = svc;
        e->pending = 0;
        memcpy(e->host, host, n);
        *link = e;
    }
    if (cap > 0 && e->pending >= cap) {
        return -EUSERS;
    }
    e->pending++;
    return 0;
}

int
sl__pending_admit(struct sl_service *svc, const char *host, bool capped)
{
    int64_t max = __atomic_load_n(&svc->max_connections, __ATOMIC_RELAXED);
    int rc;

    /* A soft check: workers admitting at once may overshoot by a few,
     * which sl_session_create's check catches at login. */
    if (max > 0 && atomic_load(&svc->sessions) +
                           atomic_load(&svc->pending_logins) >= max) {
        return -EMFILE;
    }
    pthread_mutex_lock(&lock);
    rc = host_add(svc, host, capped ? svc->max_pending_logins_per_host : 0);
    pthread_mutex_unlock(&lock);
    if (rc == 0) {
        atomic_fetch_add(&svc->pending_logins, 1);
    }
    return rc;
}

void
sl__pending_done(struct sl_service *svc, const char *host)
{
    struct host_count **link;
    struct host_count *e;

    atomic_fetch_sub(&svc->pending_logins, 1);
    pthread_mutex_lock(&lock);
    e = find(svc, host, &link);
    if (e != NULL && --e->pending == 0) {
        *link = e->next;
        free(e);
    }
    pthread_mutex_unlock(&lock);
}
