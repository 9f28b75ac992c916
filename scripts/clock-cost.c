/* Cost of the clocks every span reads at both ends: CLOCK_MONOTONIC (the span clock) and
 * CLOCK_PROCESS_CPUTIME_ID (process CPU time), per read, with N idle threads alive in the
 * process (the process CPU clock sums every thread, so its cost may grow with them).
 *
 *   gcc -O2 -static -o clock-cost scripts/clock-cost.c -lpthread
 *   ./clock-cost            prints one line per (clock, threads): median ns per read
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static void *idle(void *arg) {
    (void)arg;
    while (!stop) usleep(1000);
    return NULL;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over 21 batches of ns per read. */
static double per_read(clockid_t clk) {
    enum { BATCHES = 21, READS = 100000 };
    double m[BATCHES];
    struct timespec t;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (int i = 0; i < READS; i++) clock_gettime(clk, &t);
        m[b] = (now_ns() - t0) / READS;
    }
    qsort(m, BATCHES, sizeof m[0], cmp);
    return m[BATCHES / 2];
}

int main(void) {
    static const int counts[] = {0, 16, 64};
    pthread_t th[64];
    int alive = 0;
    for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        while (alive < counts[c]) pthread_create(&th[alive++], NULL, idle, NULL);
        printf("threads=%d monotonic_ns=%.1f process_cputime_ns=%.1f\n", alive,
               per_read(CLOCK_MONOTONIC), per_read(CLOCK_PROCESS_CPUTIME_ID));
        fflush(stdout);
    }
    stop = 1;
    for (int i = 0; i < alive; i++) pthread_join(th[i], NULL);
    return 0;
}
