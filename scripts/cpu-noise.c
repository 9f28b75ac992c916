// Single-thread speed of each CPU of this machine, and of an unpinned thread over time:
// tells host noise (some CPUs or some moments slower) from noise of the program measured.
//
//   gcc -O2 -o cpu-noise scripts/cpu-noise.c && ./cpu-noise > cpu-noise.csv
//
// Output CSV: phase,cpu_start,cpu_end,workload,iteration,ns
//   percpu:   every CPU in turn, pinned, `per_cpu` iterations of each workload
//   unpinned: the thread as the scheduler places it, `series` iterations
//   pinned:   pinned to CPU `pin` (argv[1], default 0), `series` iterations
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static volatile uint64_t sink;

// Register-only integer work.
static void compute(void) {
    uint64_t x = 88172645463325252ull, acc = 0;
    for (long i = 0; i < 40000000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        acc += x * 0x9E3779B97F4A7C15ull;
    }
    sink = acc;
}

// Allocation plus dependent random reads over 64 MiB, like building and walking big vectors.
static void memory(void) {
    size_t n = (64u << 20) / sizeof(uint64_t);
    uint64_t *v = malloc(n * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) v[i] = (i * 2654435761u) % n;
    uint64_t j = 0, acc = 0;
    for (long i = 0; i < 4000000; i++) { j = v[j]; acc += j; }
    sink = acc;
    free(v);
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s)) { perror("sched_setaffinity"); exit(1); }
}

static void unpin(int ncpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c = 0; c < ncpu; c++) CPU_SET(c, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void run(const char *phase, const char *name, void (*f)(void), int iters) {
    for (int i = 0; i < iters; i++) {
        int c0 = sched_getcpu();
        uint64_t t0 = now_ns();
        f();
        uint64_t t1 = now_ns();
        printf("%s,%d,%d,%s,%d,%llu\n", phase, c0, sched_getcpu(), name, i,
               (unsigned long long)(t1 - t0));
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    int target = argc > 1 ? atoi(argv[1]) : 0;
    int per_cpu = argc > 2 ? atoi(argv[2]) : 8;
    int series = argc > 3 ? atoi(argv[3]) : 150;
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    printf("phase,cpu_start,cpu_end,workload,iteration,ns\n");
    for (int c = 0; c < ncpu; c++) {
        pin(c);
        run("percpu", "compute", compute, per_cpu);
        run("percpu", "memory", memory, per_cpu);
    }
    unpin(ncpu);
    run("unpinned", "compute", compute, series);
    run("unpinned", "memory", memory, series);
    pin(target);
    run("pinned", "compute", compute, series);
    run("pinned", "memory", memory, series);
    return 0;
}
