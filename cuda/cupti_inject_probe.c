/*
 * Stands in for the CUDA driver where there is none (tests/it/capture_cupti.rs): loads the
 * library named by CUDA_INJECTION64_PATH and calls its InitializeInjection, as cuInit
 * does, inside a span `wrap` (without the variable: nothing). With the argument `lines` it loads nothing and writes one
 * GPU activity line of its own (a kernel inside `wrap`) instead.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void spin_us(uint64_t us) {
    uint64_t end = now_ns() + us * 1000;
    while (now_ns() < end) {
    }
}

int main(int argc, char **argv) {
    long tid = syscall(SYS_gettid);
    int rc = 0;
    printf("@gapscope1 B %ld %llu wrap\n", tid, (unsigned long long)now_ns());
    if (argc > 1 && strcmp(argv[1], "lines") == 0) {
        uint64_t k0 = now_ns();
        spin_us(2000);
        uint64_t k1 = now_ns();
        printf("@gapscope1 G kernel 0 7 1 %llu %llu 80x1x1 256x1x1 - void scale<float>(float*, int)\n",
               (unsigned long long)k0, (unsigned long long)k1);
        printf("@gapscope1 G kernel 0 7 oops\n");
    } else if (getenv("CUDA_INJECTION64_PATH")) {
        const char *path = getenv("CUDA_INJECTION64_PATH");
        void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        int (*init)(void) = lib ? (int (*)(void))dlsym(lib, "InitializeInjection") : NULL;
        if (!init) {
            fprintf(stderr, "cannot load InitializeInjection from %s: %s\n", path, dlerror());
            rc = 2;
        } else if (init() != 1 || init() != 1) {
            /* The driver may call it more than once; each call must succeed. */
            rc = 3;
        }
    }
    spin_us(1000);
    printf("@gapscope1 E %ld %llu wrap\n", tid, (unsigned long long)now_ns());
    fflush(stdout);
    return rc;
}
