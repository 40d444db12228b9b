/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mariadbmon's decisions as pure functions over per-server views (see
 * mmon.h): GTID parsing and comparison, which server is the primary, which
 * are replicas, whether a primary that Sluice cannot reach is really gone,
 * whom to promote, and whether a returning server may rejoin.
 *
 * Nothing here does I/O or logs; the unit test (test_mariadbmon_decide.c)
 * includes this file and drives it with hand-built views.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mmon.h"

int
mmon_gtid_parse(const char *text, struct mmon_gtid_pos *out)
{
    const char *p = text ? text : "";

    out->n = 0;
    while (*p != '\0') {
        struct mmon_gtid g;
        char *end;

        while (*p == ' ' || *p == ',' || *p == '\n') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        g.domain = (uint32_t)strtoul(p, &end, 10);
        if (end == p || *end != '-') {
            return -EINVAL;
        }
        p = end + 1;
        g.server_id = (uint32_t)strtoul(p, &end, 10);
        if (end == p || *end != '-') {
            return -EINVAL;
        }
        p = end + 1;
        g.seq = strtoull(p, &end, 10);
        if (end == p) {
            return -EINVAL;
        }
        p = end;
        if (out->n == MMON_MAX_DOMAINS) {
            return -EINVAL;
        }
        out->g[out->n++] = g;
    }
    return 0;
}

const char *
mmon_gtid_format(const struct mmon_gtid_pos *p, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int i = 0; i < p->n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%" PRIu32 "-%" PRIu32
                         "-%" PRIu64, i ? "," : "", p->g[i].domain,
                         p->g[i].server_id, p->g[i].seq);
        if (w < 0) {
            break;
        }
        off += (size_t)w;
    }
    return buf;
}

const struct mmon_gtid *
mmon_gtid_domain(const struct mmon_gtid_pos *p, uint32_t domain)
{
    for (int i = 0; i < p->n; i++) {
        if (p->g[i].domain == domain) {
            return &p->g[i];
        }
    }
    return NULL;
}

static uint64_t
seq_of(const struct mmon_gtid_pos *p, uint32_t domain)
{
    const struct mmon_gtid *g = mmon_gtid_domain(p, domain);

    return g ? g->seq : 0;
}

int
mmon_gtid_compare(const struct mmon_gtid_pos *a,
                  const struct mmon_gtid_pos *b)
{
    bool ahead = false;
    bool behind = false;
    uint64_t suma = 0;
    uint64_t sumb = 0;
    const struct mmon_gtid_pos *sides[2] = {a, b};

    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < sides[s]->n; i++) {
            uint32_t d = sides[s]->g[i].domain;
            uint64_t x = seq_of(a, d);
            uint64_t y = seq_of(b, d);

            ahead |= x > y;
            behind |= x < y;
        }
    }
    if (ahead != behind) {
        return ahead ? 1 : -1;
    }
    for (int i = 0; i < a->n; i++) {
        suma += a->g[i].seq;
    }
    for (int i = 0; i < b->n; i++) {
        sumb += b->g[i].seq;
    }
    return suma > sumb ? 1 : (suma < sumb ? -1 : 0);
}

int
mmon_count_replicas(const struct mmon_view *v, int n, int i)
{
    int count = 0;

    for (int j = 0; j < n; j++) {
        if (j != i && v[j].running && v[j].slave.present &&
            v[j].slave.master == i) {
            count++;
        }
    }
    return count;
}

static bool
primary_candidate(const struct mmon_view *v, int n, int i)
{
    const struct mmon_view *s = &v[i];

    if (!s->running || s->maint || s->read_only) {
        return false;
    }
    /* A writable server replicating from a live monitored server is an
     * intermediate (relay) server, not the top of the topology. */
    if (s->slave.present && s->slave.master >= 0 && s->slave.master < n &&
        s->slave.master != i && v[s->slave.master].running &&
        (s->slave.io_running || s->slave.sql_running)) {
        return false;
    }
    return true;
}

int
mmon_locks_needed(bool of_all, int n, int running)
{
    return (of_all ? n : running) / 2 + 1;
}

int
mmon_pick_primary(const struct mmon_view *v, int n, int prev)
{
    int best = -1;
    int best_replicas = -1;

    if (prev >= 0 && prev < n && primary_candidate(v, n, prev)) {
        return prev;
    }
    for (int i = 0; i < n; i++) {
        int r;

        if (!primary_candidate(v, n, i)) {
            continue;
        }
        r = mmon_count_replicas(v, n, i);
        if (r > best_replicas) {
            best = i;
            best_replicas = r;
        }
    }
    return best;
}

bool
mmon_is_replica(const struct mmon_view *v, int n, int i)
{
    const struct mmon_slave_conn *c = &v[i].slave;

    return v[i].running && c->present && c->master >= 0 && c->master < n &&
           c->master != i && c->sql_running &&
           (c->io_running || c->io_connecting);
}

int
mmon_primary_still_replicating(const struct mmon_view *v, int n,
                               int primary, int64_t within_ms)
{
    for (int i = 0; i < n; i++) {
        const struct mmon_slave_conn *c = &v[i].slave;
        int64_t limit = within_ms;

        /* An idle primary that is alive sends only heartbeats: a window
         * shorter than two heartbeat periods would fail it over while
         * it still serves its replicas (two writable primaries). So the
         * window is at least that (a difference from MaxScale). */
        if (limit >= 0 && c->heartbeat_period_ms > 0 &&
            2 * c->heartbeat_period_ms > limit) {
            limit = 2 * c->heartbeat_period_ms;
        }
        if (i != primary && v[i].running && c->present &&
            c->master == primary && c->io_running &&
            (limit < 0 ||
             (c->event_age_ms >= 0 && c->event_age_ms <= limit))) {
            return i;
        }
    }
    return -1;
}

/* How far a replica has received: the later of Gtid_IO_Pos and
 * gtid_current_pos (a replica may have applied more than its IO thread
 * reports after a restart). */
static const struct mmon_gtid_pos *
received_pos(const struct mmon_view *s)
{
    if (mmon_gtid_compare(&s->slave.io_pos, &s->current_pos) >= 0) {
        return &s->slave.io_pos;
    }
    return &s->current_pos;
}

static int
pick_promotion(const struct mmon_view *v, int n, int old, bool disk_ok_only,
               char *why, size_t whylen)
{
    int best = -1;
    int excluded = 0;
    int low_disk = 0;

    snprintf(why, whylen, "no running replica of the failed primary");
    for (int i = 0; i < n; i++) {
        const struct mmon_view *s = &v[i];

        if (i == old || !s->running || !s->slave.present ||
            s->slave.master != old) {
            continue;
        }
        if (s->maint || s->no_promotion) {
            excluded++;
            continue;
        }
        if (disk_ok_only && s->disk_low) {
            low_disk++;
            continue;
        }
        if (best < 0) {
            best = i;
        } else {
            int c = mmon_gtid_compare(received_pos(s),
                                      received_pos(&v[best]));

            /* MaxScale's order: the GTID first, then disk space not low */
            if (c > 0 || (c == 0 && v[best].disk_low && !s->disk_low)) {
                best = i;
            }
        }
    }
    if (best < 0 && (excluded > 0 || low_disk > 0)) {
        snprintf(why, whylen, "%d replica(s) excluded by maintenance or "
                 "servers_no_promotion, %d low on disk space, no other "
                 "candidate", excluded, low_disk);
    }
    return best;
}

int
mmon_pick_promotion(const struct mmon_view *v, int n, int old, char *why,
                    size_t whylen)
{
    return pick_promotion(v, n, old, false, why, whylen);
}

int
mmon_pick_promotion_disk_ok(const struct mmon_view *v, int n, int old,
                            char *why, size_t whylen)
{
    return pick_promotion(v, n, old, true, why, whylen);
}

bool
mmon_failover_safe(const struct mmon_gtid_pos *primary_binlog,
                   const struct mmon_view *cand, char *why, size_t whylen)
{
    for (int i = 0; i < primary_binlog->n; i++) {
        const struct mmon_gtid *g = &primary_binlog->g[i];
        const struct mmon_gtid *io = mmon_gtid_domain(&cand->slave.io_pos,
                                                      g->domain);
        const struct mmon_gtid *cur = mmon_gtid_domain(&cand->current_pos,
                                                       g->domain);
        uint64_t has = 0;

        if (io != NULL) {
            has = io->seq;
        }
        if (cur != NULL && cur->seq > has) {
            has = cur->seq;
        }
        if (has < g->seq) {
            snprintf(why, whylen, "in domain %u it has received up to "
                     "sequence %llu, the primary had written %u-%u-%llu: "
                     "%llu transaction(s) would be lost", g->domain,
                     (unsigned long long)has, g->domain, g->server_id,
                     (unsigned long long)g->seq,
                     (unsigned long long)(g->seq - has));
            return false;
        }
    }
    return true;
}

bool
mmon_can_rejoin(const struct mmon_gtid_pos *server_binlog,
                const struct mmon_gtid_pos *primary_binlog,
                const struct mmon_gtid_pos *primary_slave,
                int64_t primary_id, char *why, size_t whylen)
{
    for (int i = 0; i < server_binlog->n; i++) {
        const struct mmon_gtid *g = &server_binlog->g[i];
        const struct mmon_gtid *p = mmon_gtid_domain(primary_binlog,
                                                     g->domain);
        const struct mmon_gtid *st = mmon_gtid_domain(primary_slave,
                                                      g->domain);
        bool ok;

        if (p == NULL || g->seq > p->seq) {
            ok = false;
        } else if (g->seq == p->seq) {
            ok = g->server_id == p->server_id;
        } else {
            ok = (int64_t)g->server_id == primary_id ||
                 (st != NULL && g->seq <= st->seq);
        }
        if (!ok) {
            snprintf(why, whylen, "its GTID %" PRIu32 "-%" PRIu32 "-%" PRIu64
                     " is not in the primary's history (primary at %s"
                     "%" PRIu64 ", replicated up to %" PRIu64 ")",
                     g->domain, g->server_id, g->seq, p ? "" : "none/",
                     p ? p->seq : 0, st ? st->seq : 0);
            return false;
        }
    }
    return true;
}
