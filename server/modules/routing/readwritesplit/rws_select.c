/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's replica choice (rules in rws_select.h). Pure: no
 * globals, no locks, no allocation. The inputs are snapshots of atomics,
 * so two workers choosing at the same moment may pick the same server;
 * the next choice corrects the balance.
 */
#include "rws_select.h"

static int64_t
score(const struct rws_cand *c, enum rws_criteria crit)
{
    switch (crit) {
    case RWS_LEAST_BEHIND_MASTER:
        return c->lag < 0 ? INT64_MAX / 2 : c->lag;
    case RWS_LEAST_GLOBAL_CONNECTIONS:
        return c->global_conns;
    case RWS_LEAST_ROUTER_CONNECTIONS:
        return c->router_conns;
    case RWS_LEAST_CURRENT_OPERATIONS:
    case RWS_ADAPTIVE_ROUTING:
    default:
        return c->operations;
    }
}

/* Weighted random choice by 1/t^2 (t in ms, at least 1). */
static int
adaptive(const struct rws_cand *c, size_t n, uint32_t rnd)
{
    double w[64];
    double total = 0;
    size_t m = n < 64 ? n : 64;
    double pick;

    for (size_t i = 0; i < m; i++) {
        double t = c[i].resp_us / 1000.0;

        w[i] = 0;
        if (!c[i].ok) {
            continue;
        }
        if (c[i].resp_us == 0) {
            return (int)i;   /* unmeasured: measure it */
        }
        if (t < 1.0) {
            t = 1.0;
        }
        w[i] = 1.0 / (t * t);
        total += w[i];
    }
    if (total <= 0) {
        return -1;
    }
    pick = total * ((double)rnd / 4294967296.0);
    for (size_t i = 0; i < m; i++) {
        if (w[i] > 0 && pick < w[i]) {
            return (int)i;
        }
        pick -= w[i];
    }
    for (size_t i = m; i-- > 0;) {
        if (w[i] > 0) {
            return (int)i;
        }
    }
    return -1;
}

/* Candidate a beats b on score, then on already being connected. */
static bool
better(const struct rws_cand *a, int64_t sa, const struct rws_cand *b,
       int64_t sb)
{
    return sa < sb || (sa == sb && a->connected && !b->connected);
}

int
rws_select(const struct rws_cand *c, size_t n, enum rws_criteria crit,
           unsigned rotate, uint32_t rnd, int prefer)
{
    int best = -1;
    int64_t best_score = 0;
    size_t ties = 0;

    if (n == 0) {
        return -1;
    }
    if (crit == RWS_ADAPTIVE_ROUTING) {
        int r = adaptive(c, n, rnd);
        if (r >= 0) {
            return r;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int64_t s;

        if (!c[i].ok) {
            continue;
        }
        s = score(&c[i], crit);
        if (best < 0 || better(&c[i], s, &c[best], best_score)) {
            best = (int)i;
            best_score = s;
        }
    }
    if (best < 0) {
        return -1;
    }
    /* Stay where the session read last while that is as good: one
     * operation more counts as as good for LEAST_CURRENT_OPERATIONS, whose
     * counts move with every query in flight. */
    if (prefer >= 0 && (size_t)prefer < n && c[prefer].ok &&
        c[prefer].connected) {
        int64_t s = score(&c[prefer], crit);
        int64_t slack = crit == RWS_LEAST_CURRENT_OPERATIONS ? 1 : 0;

        if (s <= best_score + slack) {
            return prefer;
        }
    }
    /* Otherwise the rotate-th of the equally good ones. */
    for (size_t i = 0; i < n; i++) {
        if (c[i].ok && score(&c[i], crit) == best_score &&
            c[i].connected == c[best].connected) {
            ties++;
        }
    }
    rotate %= (unsigned)ties;
    for (size_t i = 0; i < n; i++) {
        if (c[i].ok && score(&c[i], crit) == best_score &&
            c[i].connected == c[best].connected && rotate-- == 0) {
            return (int)i;
        }
    }
    return best;
}
