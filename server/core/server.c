/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Server accessors. The configuration fields are immutable after loading;
 * the status, lag, version, id and counters are atomics written by the
 * monitor thread (or the admin API) and read lock-free by workers.
 *
 * version_string is the one non-atomic field a monitor writes: it is only
 * ever read for diagnostics, and written by the single monitor that owns
 * the server, so a torn read shows at worst a mixed string.
 *
 * Context: any thread.
 */
#include <stdio.h>
#include <string.h>

#include <sluice/server.h>

#include "internal.h"

const char *
sl_server_name(const struct sl_server *s)
{
    return s->name;
}

const char *
sl_server_address(const struct sl_server *s)
{
    return s->address;
}

int
sl_server_port(const struct sl_server *s)
{
    return s->port;
}

const char *
sl_server_socket(const struct sl_server *s)
{
    return s->socket[0] ? s->socket : NULL;
}

const struct sl_params *
sl_server_params(const struct sl_server *s)
{
    return s->params;
}

int
sl_server_weight(const struct sl_server *s)
{
    /* PATCH /v1/servers/NAME changes it live (runtime.c). */
    return __atomic_load_n(&s->weight, __ATOMIC_RELAXED);
}

int
sl_server_rank(const struct sl_server *s)
{
    return __atomic_load_n(&s->rank, __ATOMIC_RELAXED);
}

int64_t
sl_server_max_routing_connections(const struct sl_server *s)
{
    return __atomic_load_n(&s->max_routing_conns, __ATOMIC_RELAXED);
}

bool
sl_server_routing_full(const struct sl_server *s)
{
    int64_t max = sl_server_max_routing_connections(s);

    return max > 0 && sl_server_connections(s) >= max;
}

uint32_t
sl_server_status(const struct sl_server *s)
{
    return atomic_load_explicit(&s->status, memory_order_acquire);
}

void
sl_server_set_status(struct sl_server *s, uint32_t status)
{
    atomic_store_explicit(&s->status, status, memory_order_release);
}

const char *
sl_server_status_str(uint32_t status, char *buf, size_t len)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {SL_SRV_MAINT, "Maintenance"}, {SL_SRV_DRAINING, "Draining"},
        {SL_SRV_MOVING, "Primary Moving"},
        {SL_SRV_MASTER, "Master"},     {SL_SRV_SLAVE, "Slave"},
        {SL_SRV_RELAY, "Relay Master"}, {SL_SRV_SYNCED, "Synced"},
        {SL_SRV_AUTH_ERROR, "Auth Error"},
        {SL_SRV_DISK_EXHAUSTED, "Disk Space Exhausted"},
        {SL_SRV_RUNNING, "Running"},
    };
    size_t off = 0;

    if (len == 0) {
        return buf;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
        if ((status & names[i].bit) && off < len) {
            off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                    off ? ", " : "", names[i].name);
        }
    }
    if (!(status & SL_SRV_RUNNING) && off < len) {
        snprintf(buf + off, len - off, "%s%s", off ? ", " : "", "Down");
    }
    return buf;
}

int64_t
sl_server_replication_lag(const struct sl_server *s)
{
    return atomic_load_explicit(&s->lag, memory_order_relaxed);
}

void
sl_server_set_replication_lag(struct sl_server *s, int64_t lag)
{
    atomic_store_explicit(&s->lag, lag, memory_order_relaxed);
}

uint64_t
sl_server_version(const struct sl_server *s)
{
    return atomic_load_explicit(&s->version, memory_order_relaxed);
}

void
sl_server_set_version(struct sl_server *s, uint64_t version,
                      const char *version_string)
{
    if (version_string &&
        strncmp(s->version_string, version_string,
                sizeof(s->version_string)) != 0) {
        snprintf(s->version_string, sizeof(s->version_string), "%s",
                 version_string);
    }
    atomic_store_explicit(&s->version, version, memory_order_release);
}

int64_t
sl_server_id(const struct sl_server *s)
{
    return atomic_load_explicit(&s->server_id, memory_order_relaxed);
}

void
sl_server_set_server_id(struct sl_server *s, int64_t id)
{
    atomic_store_explicit(&s->server_id, id, memory_order_relaxed);
}

int64_t
sl_server_connections(const struct sl_server *s)
{
    return atomic_load_explicit(&s->connections, memory_order_relaxed);
}

uint64_t
sl_server_total_connections(const struct sl_server *s)
{
    return atomic_load_explicit(&s->total_connections, memory_order_relaxed);
}

void
sl_server_count_route(struct sl_server *s, bool is_write)
{
    atomic_fetch_add_explicit(is_write ? &s->routed_writes
                                       : &s->routed_reads,
                              1, memory_order_relaxed);
}

static void
gtid_lock(struct sl_server *s)
{
    while (atomic_flag_test_and_set_explicit(&s->gtid_lock,
                                             memory_order_acquire)) {
        /* the holder copies at most 256 bytes */
    }
}

static void
gtid_unlock(struct sl_server *s)
{
    atomic_flag_clear_explicit(&s->gtid_lock, memory_order_release);
}

void
sl_server_set_gtid_pos(struct sl_server *s, const char *pos)
{
    gtid_lock(s);
    snprintf(s->gtid_pos, sizeof(s->gtid_pos), "%s", pos ? pos : "");
    gtid_unlock(s);
}

void
sl_server_gtid_pos(const struct sl_server *s, char *buf, size_t len)
{
    struct sl_server *w = (struct sl_server *)s;   /* the lock only */

    if (len == 0) {
        return;
    }
    gtid_lock(w);
    snprintf(buf, len, "%s", s->gtid_pos);
    gtid_unlock(w);
}
