/* Self-test of the stack sampler (src/profile/tests.rs): a thread started from C, with
 * no span of its own, that spins for a given amount of its own CPU time. Its samples
 * must go to the span the calling thread has open meanwhile, marked foreign. Built with
 * frame pointers so the kernel can walk its stack. */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) uint64_t gapscope_profile_spin_leaf(uint64_t x) {
    for (int i = 0; i < 10000; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static void *spin(void *arg) {
    uint64_t cpu_ns = *(uint64_t *)arg, start = thread_cpu_ns(), x = 1;
    while (thread_cpu_ns() - start < cpu_ns) {
        x = gapscope_profile_spin_leaf(x);
    }
    *(uint64_t *)arg = x;
    return 0;
}

/* Starts a thread that spins for `cpu_ms` of its CPU time and waits for it; 0 on
 * success. */
int gapscope_profile_spin_thread(uint32_t cpu_ms) {
    uint64_t arg = (uint64_t)cpu_ms * 1000000u;
    pthread_t t;
    if (pthread_create(&t, 0, spin, &arg) != 0) {
        return -1;
    }
    return pthread_join(t, 0) == 0 ? 0 : -2;
}
