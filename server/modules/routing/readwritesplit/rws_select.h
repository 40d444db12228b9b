/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's replica choice, as a pure function so that the unit
 * test can exercise it without servers or sessions.
 *
 * The router fills one struct rws_cand per server of the service that may
 * take a read (see rws_target.c for which ones) and asks rws_select() for
 * the best one under the service's slave_selection_criteria.
 */
#ifndef RWS_SELECT_H
#define RWS_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In the order of the enum_values of slave_selection_criteria. */
enum rws_criteria {
    RWS_LEAST_CURRENT_OPERATIONS,
    RWS_ADAPTIVE_ROUTING,
    RWS_LEAST_BEHIND_MASTER,
    RWS_LEAST_GLOBAL_CONNECTIONS,
    RWS_LEAST_ROUTER_CONNECTIONS,
};

struct rws_cand {
    bool ok;              /* may be chosen at all */
    bool connected;       /* the session already has a connection to it */
    int64_t operations;   /* current operations on the server (router) */
    int64_t global_conns; /* all connections to the server */
    int64_t router_conns; /* this service's connections to the server */
    int64_t lag;          /* seconds, < 0 unknown */
    uint64_t resp_us;     /* average response time, 0 unknown */
};

/*
 * The index of the best candidate, or -1 when none is ok. Lower score
 * wins; connected candidates win ties against unconnected ones (a new
 * connection costs a login). `prefer` (the connection the session used
 * last, -1 none) keeps the read when it is as good as the best, or at most
 * one operation busier under LEAST_CURRENT_OPERATIONS: a session stays on
 * a warm connection and load still moves when one replica gets busier.
 * Other ties go to the `rotate % k`-th of the k equally good candidates,
 * so sessions with consecutive `rotate` values start on different
 * replicas. ADAPTIVE_ROUTING picks at random with a probability
 * proportional to 1/resp_us^2 using `rnd` (0..2^32-1); a server without
 * samples counts as the fastest so it gets measured. Pure; any thread.
 */
int rws_select(const struct rws_cand *c, size_t n, enum rws_criteria crit,
               unsigned rotate, uint32_t rnd, int prefer);

#endif
