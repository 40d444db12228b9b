/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Micro-benchmark of the query classifier on sysbench oltp_read_write's
 * statements: per transaction BEGIN, 10 point selects, one each of the
 * simple, SUM, ORDER BY and DISTINCT ranges, an index and a non-index
 * UPDATE, a DELETE, an INSERT and COMMIT (20 statements), with values
 * substituted as sysbench sends them over COM_QUERY.
 *
 *   classifier_bench [SECONDS]     (default 2)
 *
 * Classifies the pre-generated statements round-robin on one thread for
 * about SECONDS of wall time and prints statements per second of the
 * thread's CPU time (one core), and per wall-clock second. Not a test:
 * nothing is asserted beyond a sanity check of the read/write split, and
 * ctest never runs it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sluice/classifier.h>

#define NTRX 1000
#define PER_TRX 20
#define NSTMT (NTRX * PER_TRX)

struct stmt {
    const char *sql;
    size_t len;
};

static struct stmt stmts[NSTMT];
static char *arena;
static size_t arena_used;
static unsigned long long rng = 88172645463325252ull;

static unsigned
rnd(unsigned max)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % max) + 1;
}

/* sysbench's c/pad values: groups of 11 digits joined by '-'. */
static void
digits(char *dst, int groups)
{
    for (int g = 0; g < groups; g++) {
        for (int i = 0; i < 11; i++) {
            *dst++ = (char)('0' + rnd(10) - 1);
        }
        *dst++ = g + 1 < groups ? '-' : '\0';
    }
}

static void
add(size_t *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
add(size_t *n, const char *fmt, ...)
{
    va_list ap;
    int w;

    va_start(ap, fmt);
    w = vsnprintf(arena + arena_used, 1024, fmt, ap);
    va_end(ap);
    stmts[*n].sql = arena + arena_used;
    stmts[*n].len = (size_t)w;
    arena_used += (size_t)w + 1;
    (*n)++;
}

static void
generate(void)
{
    size_t n = 0;
    char c[130], pad[70];

    arena = malloc((size_t)NSTMT * 256);
    if (arena == NULL) {
        exit(1);
    }
    for (int trx = 0; trx < NTRX; trx++) {
        unsigned t = rnd(10), id = rnd(100000);

        add(&n, "BEGIN");
        for (int i = 0; i < 10; i++) {
            add(&n, "SELECT c FROM sbtest%u WHERE id=%u", rnd(10),
                rnd(100000));
        }
        add(&n, "SELECT c FROM sbtest%u WHERE id BETWEEN %u AND %u", t, id,
            id + 99);
        add(&n, "SELECT SUM(k) FROM sbtest%u WHERE id BETWEEN %u AND %u", t,
            id, id + 99);
        add(&n, "SELECT c FROM sbtest%u WHERE id BETWEEN %u AND %u "
                "ORDER BY c", t, id, id + 99);
        add(&n, "SELECT DISTINCT c FROM sbtest%u WHERE id BETWEEN %u AND %u "
                "ORDER BY c", t, id, id + 99);
        add(&n, "UPDATE sbtest%u SET k=k+1 WHERE id=%u", t, rnd(100000));
        digits(c, 10);
        add(&n, "UPDATE sbtest%u SET c='%s' WHERE id=%u", t, c, rnd(100000));
        add(&n, "DELETE FROM sbtest%u WHERE id=%u", t, id);
        digits(c, 10);
        digits(pad, 5);
        add(&n, "INSERT INTO sbtest%u (id, k, c, pad) VALUES "
                "(%u, %u, '%s', '%s')", t, id, rnd(100000), c, pad);
        add(&n, "COMMIT");
    }
}

static double
now(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    double start, elapsed, cpu0, cpu;
    struct sl_qc_result r;
    unsigned long long done = 0, reads = 0, writes = 0;

    generate();
    start = now(CLOCK_MONOTONIC);
    cpu0 = now(CLOCK_THREAD_CPUTIME_ID);
    do {
        for (size_t i = 0; i < NSTMT; i++) {
            sl_qc_classify(stmts[i].sql, stmts[i].len, &r);
            reads += (r.type & SL_QC_READ) != 0;
            writes += (r.type & SL_QC_WRITE) != 0;
        }
        done += NSTMT;
        elapsed = now(CLOCK_MONOTONIC) - start;
    } while (elapsed < secs);
    cpu = now(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    /* 14 of every 20 statements read, 4 write. */
    if (reads * 20 != done * 14 || writes * 20 != done * 4) {
        fprintf(stderr, "classifier_bench: unexpected split: %llu reads, "
                "%llu writes of %llu\n", reads, writes, done);
        return 1;
    }
    /* CPU time of this thread is the one-core figure even on a busy
     * machine; wall-clock time is printed too. */
    printf("classifier_bench: %llu statements, %.0f statements/s per core "
           "(%.0f ns of CPU each; %.2f s CPU in %.2f s wall: %.0f/s wall), "
           "%zu bytes average\n", done, (double)done / cpu,
           cpu * 1e9 / (double)done, cpu, elapsed, (double)done / elapsed,
           arena_used / NSTMT);
    return 0;
}
