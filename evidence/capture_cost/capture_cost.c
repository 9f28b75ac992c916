/* What one span costs a program on the capture paths gapscope cannot time itself:
 * NVTX ranges (through gapscope's injection library) and the program's own log lines.
 *
 *   capture_cost MODE SPANS
 *     none  an empty loop of SPANS iterations (the loop's own cost)
 *     nvtx  SPANS nvtxRangePushA / nvtxRangePop pairs; with NVTX_INJECTION64_PATH set to
 *           gapscope's libgapscope_nvtx.so and GAPSCOPE_SPAN_FD to a pipe, each range is
 *           a B and an E line on that pipe; without it, NVTX's own no-op cost
 *     log   SPANS pairs of timing lines ("12:00:00.123456 begin step 17" / "... end
 *           step 17") printed to stdout, line-buffered as through gapscope's pty
 *
 * Prints one JSON line: the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: user and
 * system, so the writes' system calls count) and wall time per span. The reading end of
 * each pipe is another process, as gapscope's reader is.
 *
 *   cc -O2 -I NVTX_INCLUDE -o capture_cost capture_cost.c -ldl   (evidence/capture_cost/run.sh)
 */
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static volatile uint64_t sink;

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: capture_cost none|nvtx|log SPANS\n");
        return 2;
    }
    const char *mode = argv[1];
    uint64_t n = strtoull(argv[2], NULL, 10);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Warm-up: NVTX's first call loads the injection library. */
    nvtxRangePushA("warmup");
    nvtxRangePop();
    uint64_t c0 = ns(CLOCK_THREAD_CPUTIME_ID), w0 = ns(CLOCK_MONOTONIC);
    if (strcmp(mode, "none") == 0) {
        for (uint64_t i = 0; i < n; i++) sink += i;
    } else if (strcmp(mode, "nvtx") == 0) {
        for (uint64_t i = 0; i < n; i++) {
            nvtxRangePushA("step");
            sink += i;
            nvtxRangePop();
        }
    } else if (strcmp(mode, "log") == 0) {
        for (uint64_t i = 0; i < n; i++) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            struct tm tm;
            localtime_r(&t.tv_sec, &tm);
            printf("%02d:%02d:%02d.%06ld begin step %llu\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
                   t.tv_nsec / 1000, (unsigned long long)i);
            sink += i;
            clock_gettime(CLOCK_REALTIME, &t);
            localtime_r(&t.tv_sec, &tm);
            printf("%02d:%02d:%02d.%06ld end step %llu\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
                   t.tv_nsec / 1000, (unsigned long long)i);
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    uint64_t c1 = ns(CLOCK_THREAD_CPUTIME_ID), w1 = ns(CLOCK_MONOTONIC);
    fprintf(stderr, "{\"mode\": \"%s\", \"spans\": %llu, \"cpu_ns_per_span\": %.1f, \"wall_ns_per_span\": %.1f}\n",
            mode, (unsigned long long)n, (double)(c1 - c0) / n, (double)(w1 - w0) / n);
    return 0;
}
