/* A small C program that reports spans through gapscope_emit.h: the test subject of
 * gapscope's external-subject tests and of the example in docs/external-programs.md. build.rs compiles it
 * (with the host C compiler) into the build folder as `gapscope-emit-demo`.
 *
 *   gapscope-emit-demo work [STEPS] [SPIN_MS]  spans on two threads, attributes, output
 *   gapscope-emit-demo crash                   opens a span, then dies of SIGSEGV
 *   gapscope-emit-demo hang                    opens a span, then never returns
 *   gapscope-emit-demo fail [CODE]             prints an error on stderr, exits CODE
 *   gapscope-emit-demo junk                    malformed and unmatched span lines
 */
#include "gapscope_emit.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keeps the CPU busy for `ms` milliseconds (work, not a sleep: task-clock counts it). */
static uint64_t spin_ms(unsigned ms) {
    uint64_t end = gapscope_emit_now_ns() + (uint64_t)ms * 1000000ull, x = 1;
    while (gapscope_emit_now_ns() < end)
        for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

/* CPU time of the whole process (every thread), ns: reported as the attribute
 * process_cpu_ns, which gapscope puts in the span's process_cpu_ns column. */
static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;
static unsigned g_spin = 5;

static void *worker(void *arg) {
    (void)arg;
    gapscope_emit_begin("background");
    sink += spin_ms(g_spin);
    gapscope_emit_attr_str("role", "helper");
    gapscope_emit_end("background");
    return NULL;
}

static int work(int steps, unsigned spin) {
    g_spin = spin;
    printf("emit-demo: %d steps of %u ms\n", steps, spin); /* ordinary output */
    fflush(stdout);
    pthread_t t;
    uint64_t cpu0 = process_cpu_ns();
    gapscope_emit_begin("run");
    gapscope_emit_attr_u64("steps", (uint64_t)steps);
    pthread_create(&t, NULL, worker, NULL);
    for (int i = 0; i < steps; i++) {
        gapscope_emit_begin("step");
        /* A buffer the step touches: page faults the counters see. */
        size_t n = 1 << 20;
        char *buf = malloc(n);
        memset(buf, i, n);
        sink += (uint64_t)buf[n / 2];
        free(buf);
        uint64_t t0 = gapscope_emit_now_ns();
        sink += spin_ms(spin);
        gapscope_emit_complete("inner", t0, gapscope_emit_now_ns() - t0);
        gapscope_emit_attr_i64("index", i);
        gapscope_emit_end("step");
    }
    pthread_join(t, NULL);
    gapscope_emit_attr_f64("ratio", 0.25);
    gapscope_emit_attr_u64("process_cpu_ns", process_cpu_ns() - cpu0);
    gapscope_emit_end("run");
    printf("emit-demo: done\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "work";
    if (strcmp(mode, "work") == 0)
        return work(argc > 2 ? atoi(argv[2]) : 3, argc > 3 ? (unsigned)atoi(argv[3]) : 5);
    if (strcmp(mode, "crash") == 0) {
        gapscope_emit_begin("doomed");
        fprintf(stderr, "emit-demo: about to crash\n");
        fflush(stderr);
        raise(SIGSEGV);
        return 0;
    }
    if (strcmp(mode, "hang") == 0) {
        gapscope_emit_begin("forever");
        fprintf(stderr, "emit-demo: hanging\n");
        for (;;) pause();
    }
    if (strcmp(mode, "fail") == 0) {
        gapscope_emit_begin("checks");
        gapscope_emit_end("checks");
        fprintf(stderr, "emit-demo: error: input file missing\n");
        return argc > 2 ? atoi(argv[2]) : 3;
    }
    if (strcmp(mode, "junk") == 0) {
        gapscope_emit_write_("@gapscope1 B not-a-number\n", 26);
        gapscope_emit_write_("@gapscope1 \xff\xfe\n", 14);
        gapscope_emit_end("never_begun");
        gapscope_emit_begin("left_open");
        gapscope_emit_begin("ok");
        gapscope_emit_end("ok");
        printf("just output, not a span line\n");
        return 0;
    }
    fprintf(stderr, "usage: %s work [STEPS] [SPIN_MS] | crash | hang | fail [CODE] | junk\n",
            argv[0]);
    return 2;
}
