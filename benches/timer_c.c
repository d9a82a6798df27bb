/* The loop of seed 000 section 3.1 in plain C, for comparison with `commbench timer`:
 * n back-to-back clock_gettime(CLOCK_MONOTONIC) pairs; prints min_ov (minimum non-negative
 * difference), res_timing (minimum positive difference), the median and the mean, in ns.
 *   cc -O2 -o /tmp/timer_c benches/timer_c.c && /tmp/timer_c 16777216 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define DENSE 4096
int main(int argc, char **argv) {
    long long n = argc > 1 ? atoll(argv[1]) : (1LL << 24);
    static unsigned long long counts[DENSE];
    unsigned long long over = 0;
    long double sum = 0;
    for (long long i = 0; i < n; i++) {
        long long t1 = ns();
        long long t2 = ns();
        long long d = t2 - t1;
        sum += d;
        if (d >= 0 && d < DENSE) counts[d]++; else over++;
    }
    long long min_ov = -1, res = 0, median = -1, seen = 0;
    for (int d = 0; d < DENSE; d++) {
        if (!counts[d]) continue;
        if (min_ov < 0) min_ov = d;
        if (!res && d > 0) res = d;
        seen += counts[d];
        if (median < 0 && seen * 2 > n) median = d;
    }
    printf("C clock_gettime loop: n=%lld min_ov=%lld ns res_timing=%lld ns median=%lld ns mean=%.2Lf ns (%llu >= %d ns)\n",
           n, min_ov, res, median, sum / n, over, DENSE);
    return 0;
}
