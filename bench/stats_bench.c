/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Micro-benchmark of what query digests and latency histograms add to
 * each command on the data path, without a network or a server: the
 * canonical text and its hash (sl__qc_canonical) of sysbench
 * oltp_point_select's statement with a different id each time, and the
 * four clock reads (two monotonic at the session, two at the backend)
 * plus the two wall-clock reads of a digest entry's first/last seen.
 *
 *   stats_bench [SECONDS]     (default 2)
 *
 * Prints nanoseconds of the thread's CPU time per statement for each part
 * and their sum. Compare with bench/run's "CPU ms/1000q" of Sluice
 * (1 ms/1000q = 1000 ns per query). Not a test: ctest never runs it.
 * The hash-table lookup and LRU move of the digest (a few cache lines)
 * are not in the figure.
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

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    char sql[64][64];
    char out[1024];
    uint64_t h = 0;
    uint64_t n = 0;
    uint64_t sink = 0;
    double t0, t1, canon_ns, clock_ns, kind_ns;
    struct sl_qc_result qc;
    struct timespec ts;

    for (int i = 0; i < 64; i++) {
        snprintf(sql[i], sizeof(sql[i]),
                 "SELECT c FROM sbtest%d WHERE id=%d", i % 4 + 1,
                 rand() % 10000 + 1);
    }
    t0 = cpu_now();
    do {
        for (int i = 0; i < 1000; i++) {
            const char *s = sql[(n + (uint64_t)i) % 64];

            sl__qc_canonical(s, strlen(s), out, sizeof(out), &h, NULL);
            sink += h;
        }
        n += 1000;
        t1 = cpu_now();
    } while (t1 - t0 < secs);
    canon_ns = (t1 - t0) * 1e9 / (double)n;
    n = 0;
    t0 = cpu_now();
    do {
        for (int i = 0; i < 1000; i++) {
            sink += sl__stats_now_ns();
            sink += sl__stats_now_ns();
            sink += sl__stats_now_ns();
            sink += sl__stats_now_ns();
            clock_gettime(CLOCK_REALTIME, &ts);
            sink += (uint64_t)ts.tv_nsec;
            clock_gettime(CLOCK_REALTIME, &ts);
            sink += (uint64_t)ts.tv_nsec;
        }
        n += 1000;
        t1 = cpu_now();
    } while (t1 - t0 < secs);
    clock_ns = (t1 - t0) * 1e9 / (double)n;
    n = 0;
    t0 = cpu_now();
    do {
        for (int i = 0; i < 1000; i++) {
            const char *s = sql[(n + (uint64_t)i) % 64];

            sl_qc_classify(s, strlen(s), &qc);
            sink += (uint64_t)sl__stats_query_kind(qc.type);
        }
        n += 1000;
        t1 = cpu_now();
    } while (t1 - t0 < secs);
    kind_ns = (t1 - t0) * 1e9 / (double)n;
    printf("canonical text + hash: %6.0f ns/statement (\"%s\")\n", canon_ns,
           out);
    printf("kind (classifier):     %6.0f ns/statement (readconnroute only)\n",
           kind_ns);
    printf("six clock reads:       %6.0f ns/statement\n", clock_ns);
    printf("sum:                   %6.0f ns/statement (%llu)\n",
           canon_ns + clock_ns, (unsigned long long)(sink & 1));
    return 0;
}
