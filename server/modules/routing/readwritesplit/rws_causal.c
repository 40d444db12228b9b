/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's GTID positions for causal_reads: the service's latest
 * acknowledged write per domain and what each server is known to have
 * applied. Lock-free: fixed domain slots claimed by CAS, sequence numbers
 * raised with an atomic max. Called from any worker.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/server.h>

#include "rws.h"

/* The slot of domain d, claiming a free one if `claim`; -1 if none. */
static int
dom_slot(struct rws_instance *inst, unsigned long d, bool claim)
{
    unsigned long long want = (unsigned long long)d + 1;

    for (int k = 0; k < RWS_DOMAINS; k++) {
        unsigned long long cur = atomic_load_explicit(&inst->dom[k],
                                                      memory_order_acquire);
        if (cur == want) {
            return k;
        }
        if (cur == 0) {
            if (!claim) {
                return -1;
            }
            if (atomic_compare_exchange_strong(&inst->dom[k], &cur, want) ||
                cur == want) {
                return k;
            }
        }
    }
    return -1;
}

static void
atomic_max(atomic_ullong *a, uint64_t v)
{
    unsigned long long cur = atomic_load_explicit(a, memory_order_relaxed);

    while (cur < v && !atomic_compare_exchange_weak_explicit(
                          a, &cur, v, memory_order_release,
                          memory_order_relaxed)) {
    }
}

bool
rws_pos_parse(struct rws_instance *inst, const char *list,
              struct rws_pos *out, bool claim)
{
    const char *p = list;
    bool ok = true;

    memset(out, 0, sizeof(*out));
    while (*p != '\0') {
        char *end;
        unsigned long d = strtoul(p, &end, 10);
        unsigned long long seq;
        int k;

        if (*end != '-') {
            return false;
        }
        (void)strtoul(end + 1, &end, 10);   /* server id: any */
        if (*end != '-') {
            return false;
        }
        seq = strtoull(end + 1, &end, 10);
        if (*end != '\0' && *end != ',') {
            return false;
        }
        k = dom_slot(inst, d, claim);
        if (k < 0) {
            ok = false;   /* a domain without a slot */
        } else if (seq > out->seq[k]) {
            out->seq[k] = seq;
        }
        p = *end == ',' ? end + 1 : end;
        while (*p == ' ' || *p == '\n') {
            p++;
        }
    }
    return ok;
}

void
rws_publish(struct rws_instance *inst, const char *gtid)
{
    struct rws_pos pos;

    if (!rws_pos_parse(inst, gtid, &pos, true)) {
        atomic_store(&inst->gtid_overflow, true);
    }
    for (int k = 0; k < RWS_DOMAINS; k++) {
        if (pos.seq[k] != 0) {
            atomic_max(&inst->acked[k], pos.seq[k]);
        }
    }
}

bool
rws_acked(struct rws_instance *inst, struct rws_pos *out)
{
    bool any = false;

    for (int k = 0; k < RWS_DOMAINS; k++) {
        out->seq[k] = atomic_load_explicit(&inst->acked[k],
                                           memory_order_acquire);
        any |= out->seq[k] != 0;
    }
    return any;
}

bool
rws_known_covers(const struct rws_instance *inst, unsigned srv,
                 const struct rws_pos *need)
{
    atomic_ullong *kn = &inst->known[(size_t)srv * RWS_DOMAINS];

    for (int k = 0; k < RWS_DOMAINS; k++) {
        if (need->seq[k] != 0 &&
            atomic_load_explicit(&kn[k], memory_order_relaxed) <
                need->seq[k]) {
            return false;
        }
    }
    return true;
}

void
rws_known_learn(struct rws_instance *inst, unsigned srv,
                const struct rws_pos *pos)
{
    atomic_ullong *kn = &inst->known[(size_t)srv * RWS_DOMAINS];

    for (int k = 0; k < RWS_DOMAINS; k++) {
        if (pos->seq[k] != 0) {
            atomic_max(&kn[k], pos->seq[k]);
        }
    }
}

bool
rws_known_covers_fresh(struct rws_instance *inst, unsigned srv,
                       const struct rws_pos *need)
{
    char buf[256];
    struct rws_pos mon;

    if (rws_known_covers(inst, srv, need)) {
        return true;
    }
    /* the monitor's @@gtid_current_pos: at most monitor_interval old */
    sl_server_gtid_pos(inst->servers[srv], buf, sizeof(buf));
    (void)rws_pos_parse(inst, buf, &mon, false);
    rws_known_learn(inst, srv, &mon);
    return rws_known_covers(inst, srv, need);
}

size_t
rws_pos_format(const struct rws_instance *inst, const struct rws_pos *pos,
               char *out, size_t outlen)
{
    size_t n = 0;

    out[0] = '\0';
    for (int k = 0; k < RWS_DOMAINS; k++) {
        unsigned long long d;
        int w;

        if (pos->seq[k] == 0) {
            continue;
        }
        d = atomic_load_explicit(&inst->dom[k], memory_order_acquire) - 1;
        /* the server id is not compared by MASTER_GTID_WAIT */
        w = snprintf(out + n, outlen - n, "%s%llu-0-%llu", n ? "," : "", d,
                     (unsigned long long)pos->seq[k]);
        if (w < 0 || (size_t)w >= outlen - n) {
            out[n] = '\0';
            return n;
        }
        n += (size_t)w;
    }
    return n;
}
