/* The subject of the tests of sampled stacks and CPU time for external programs
 * (tests/it/external_profile.rs compiles it with the host C compiler, with frame pointers).
 *
 *   child-profile-demo spans BURN_MS   spans over gapscope_emit.h:
 *       `phase` (main thread) opens, a thread it starts runs span `worker_burn` around
 *       BURN_MS of its own CPU time in child_demo_burn_leaf; after it, a thread with no
 *       spans at all burns BURN_MS in child_demo_foreign_leaf while `foreign_phase` is
 *       open on the main thread. Each burn reports its thread's CPU time as the
 *       attribute burn_cpu_ns (not process_cpu_ns: gapscope's own reading is tested).
 *   child-profile-demo quiet BURN_MS   no span lines: BURN_MS of CPU time on the main
 *       thread, then exits.
 */
#include "gapscope_emit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

/* Burns `ms` of this thread's CPU time; noinline so that samples name it. */
__attribute__((noinline)) static uint64_t child_demo_burn_leaf(unsigned ms) {
    uint64_t start = thread_cpu_ns(), x = 1;
    while (thread_cpu_ns() - start < (uint64_t)ms * 1000000ull)
        for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

__attribute__((noinline)) static uint64_t child_demo_foreign_leaf(unsigned ms) {
    uint64_t start = thread_cpu_ns(), x = 3;
    while (thread_cpu_ns() - start < (uint64_t)ms * 1000000ull)
        for (int i = 0; i < 20000; i++) x = x * 2862933555777941757ull + 3037000493ull;
    return x;
}

static unsigned g_ms;
static uint64_t g_foreign_cpu;

static void *worker(void *arg) {
    (void)arg;
    gapscope_emit_begin("worker_burn");
    uint64_t c0 = thread_cpu_ns();
    sink += child_demo_burn_leaf(g_ms);
    gapscope_emit_attr_u64("burn_cpu_ns", thread_cpu_ns() - c0);
    gapscope_emit_end("worker_burn");
    return NULL;
}

static void *silent(void *arg) {
    (void)arg;
    uint64_t c0 = thread_cpu_ns();
    sink += child_demo_foreign_leaf(g_ms);
    g_foreign_cpu = thread_cpu_ns() - c0;
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "spans";
    g_ms = argc > 2 ? (unsigned)atoi(argv[2]) : 200;
    if (strcmp(mode, "quiet") == 0) {
        sink += child_demo_burn_leaf(g_ms);
        return 0;
    }
    if (strcmp(mode, "spans") != 0) {
        fprintf(stderr, "usage: %s spans|quiet [BURN_MS]\n", argv[0]);
        return 2;
    }
    pthread_t t;
    gapscope_emit_begin("phase");
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    gapscope_emit_end("phase");
    gapscope_emit_begin("foreign_phase");
    pthread_create(&t, NULL, silent, NULL);
    pthread_join(t, NULL);
    gapscope_emit_attr_u64("burn_cpu_ns", g_foreign_cpu);
    gapscope_emit_end("foreign_phase");
    return 0;
}
