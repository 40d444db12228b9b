/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Micro-benchmark of what query digests and latency histograms add to
 * each command on the data path, without a network or a server: the
 * canonical text and its hash (sl__qc_canonical) of sysbench
 * oltp_point_select's statement with a different id each time, the same
 * with the statement's kind (what readconnroute's by-kind counter adds to
 * it), the data path's fast pass (hash, length and kind without the text,
 * sl__qc_canonical_fast: what a statement whose digest exists costs),
 * the classifier's full pass for comparison (what counting kinds would
 * cost a router that does not classify if it used sl_qc_classify),
 * and the two clock reads per statement (the command entering the session,
 * whose reading its backend write reuses, and the backend's answer, whose
 * reading the answer to the client reuses; a digest's last seen comes
 * from the worker's turn clock).
 *
 *   stats_bench [SECONDS]     (default 2)
 *
 * Prints nanoseconds of the thread's CPU time per statement for each part
 * and the sum of what Sluice does with query_digests and
 * latency_histograms on for a statement whose digest exists. Compare
 * with bench/run's "CPU ms/1000q" of Sluice (1 ms/1000q = 1000 ns per
 * query). Not a test: ctest never runs it. The digest entry's update (a
 * few cache lines) is not in the figure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/classifier.h>

#include "stats.h"

static double
cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char sql[64][64];
static uint64_t sink;

enum part { CANON, CANON_KIND, FAST_KIND, CLASSIFY, CLOCKS };

static void
one(enum part p, const char *s)
{
    char out[1024];
    uint64_t h = 0;
    int kind = 0;
    struct sl_qc_result qc;

    switch (p) {
    case CANON:
        sl__qc_canonical(s, strlen(s), out, sizeof(out), &h, NULL);
        sink += h;
        break;
    case CANON_KIND:
        sl__qc_canonical(s, strlen(s), out, sizeof(out), &h, &kind);
        sink += h + (uint64_t)kind;
        break;
    case FAST_KIND: {
        size_t total;

        if (!sl__qc_canonical_fast(s, strlen(s), &h, &total, &kind)) {
            abort();
        }
        sink += h + (uint64_t)kind + total;
        break;
    }
    case CLASSIFY:
        sl_qc_classify(s, strlen(s), &qc);
        sink += (uint64_t)sl__stats_query_kind(qc.type);
        break;
    case CLOCKS:
        sink += sl__stats_now_ns();
        sink += sl__stats_now_ns();
        break;
    }
}

/* ns of CPU per statement of part p over secs. */
static double
time_part(enum part p, double secs)
{
    uint64_t n = 0;
    double t0 = cpu_now(), t1;

    do {
        for (int i = 0; i < 1000; i++) {
            one(p, sql[(n + (uint64_t)i) % 64]);
        }
        n += 1000;
        t1 = cpu_now();
    } while (t1 - t0 < secs);
    return (t1 - t0) * 1e9 / (double)n;
}

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    double canon, kind, fast, classify, clocks;

    for (int i = 0; i < 64; i++) {
        snprintf(sql[i], sizeof(sql[i]),
                 "SELECT c FROM sbtest%d WHERE id=%d", i % 4 + 1,
                 rand() % 10000 + 1);
    }
    canon = time_part(CANON, secs);
    kind = time_part(CANON_KIND, secs);
    fast = time_part(FAST_KIND, secs);
    classify = time_part(CLASSIFY, secs);
    clocks = time_part(CLOCKS, secs);
    printf("canonical text + hash:        %6.0f ns/statement\n", canon);
    printf("  the same with its kind:     %6.0f ns/statement\n", kind);
    printf("fast pass (hash, kind, no text): %3.0f ns/statement\n", fast);
    printf("  (full classification:       %6.0f ns/statement)\n", classify);
    printf("two clock reads:              %6.0f ns/statement\n", clocks);
    printf("sum (a known digest: fast pass, clocks): %3.0f ns/statement "
           "(%llu)\n", fast + clocks, (unsigned long long)(sink & 1));
    return 0;
}
