/* A program that reports many spans through gapscope's span pipe, for the benchmark
 * of evidence/hostile/bench.sh. Usage: spans N_BATCHES ITEMS_PER_BATCH [flat]
 *
 * Default shape: N_BATCHES spans `batch_<b % 50>` on the main thread, each holding
 * ITEMS_PER_BATCH spans `item_<j % 100>`: N_BATCHES * (ITEMS_PER_BATCH + 1) spans, 150
 * names, two levels. With `flat`, N_BATCHES * ITEMS_PER_BATCH spans with a name each,
 * all directly under the root: the shape that makes a per-name pass quadratic. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N_BATCHES ITEMS_PER_BATCH [flat]\n", argv[0]);
        return 2;
    }
    long batches = atol(argv[1]), items = atol(argv[2]);
    int flat = argc > 3 && strcmp(argv[3], "flat") == 0;
    const char *fd_env = getenv("GAPSCOPE_SPAN_FD");
    if (!fd_env) {
        fprintf(stderr, "GAPSCOPE_SPAN_FD is not set: run me under gapscope\n");
        return 2;
    }
    FILE *out = fdopen(atoi(fd_env), "w");
    if (!out) {
        perror("fdopen");
        return 2;
    }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    long tid = syscall(SYS_gettid);
    unsigned long long t0 = now_ns() + 1000;
    /* Spans 10 ns apart inside a batch, batches (items + 1) * 10 ns apart. */
    unsigned long long step = (unsigned long long)(items + 1) * 10;
    for (long b = 0; b < batches; b++) {
        unsigned long long bs = t0 + b * step;
        if (!flat)
            fprintf(out, "@gapscope1 X %ld %llu %llu batch_%ld\n", tid, bs, step - 5, b % 50);
        for (long j = 0; j < items; j++) {
            if (flat)
                fprintf(out, "@gapscope1 X %ld %llu 5 s%ld\n", tid, bs + 5 + j * 10, b * items + j);
            else
                fprintf(out, "@gapscope1 X %ld %llu 5 item_%ld\n", tid, bs + 5 + j * 10, j % 100);
        }
    }
    fflush(out);
    /* Every span must end before the program does. */
    unsigned long long end = t0 + batches * step + 1000;
    while (now_ns() < end) {
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    return 0;
}
