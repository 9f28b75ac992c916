/* The floor under a span's cost on this host: what one `rdtsc` and one
 * clock_gettime(CLOCK_MONOTONIC) cost when issued back to back, with no recorder around
 * them. A span reads the clock at both ends, so it cannot cost less than two of the
 * cheaper one. Prints one JSON line per round (5 rounds of 20 million rdtsc and 2 million
 * clock_gettime calls) and the best of each.
 *
 *   gcc -O2 -o rdtsc_floor evidence/span_cost/rdtsc_floor.c && ./rdtsc_floor
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(void) {
    const uint64_t n_tsc = 20000000, n_gettime = 2000000;
    double best_tsc = 1e9, best_gettime = 1e9;
    uint64_t sink = 0;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = mono_ns();
        for (uint64_t i = 0; i < n_tsc; i++) sink += __rdtsc();
        uint64_t t1 = mono_ns();
        for (uint64_t i = 0; i < n_gettime; i++) sink += mono_ns();
        uint64_t t2 = mono_ns();
        double tsc = (double)(t1 - t0) / n_tsc, gt = (double)(t2 - t1) / n_gettime;
        if (tsc < best_tsc) best_tsc = tsc;
        if (gt < best_gettime) best_gettime = gt;
        printf("{\"round\": %d, \"rdtsc_ns\": %.2f, \"clock_gettime_ns\": %.2f}\n", round, tsc, gt);
    }
    printf("{\"best_rdtsc_ns\": %.2f, \"best_clock_gettime_ns\": %.2f, \"two_reads_floor_ns\": %.2f, \"sink\": %llu}\n",
           best_tsc, best_gettime, 2 * (best_tsc < best_gettime ? best_tsc : best_gettime),
           (unsigned long long)(sink & 1));
    return 0;
}
