// The gaps chart's demo for an external CUDA program (evidence/external_gpu/): NVTX ranges
// of NVTX v3's header-only API, nothing of gapscope. Each run:
//
//   warm-up (outside every range: context creation, first launch)
//   step                                  <- the wrapper (gaps.wrapper)
//     compute   20 kernels, synchronised  <- inner (gaps.inner), and CUPTI's kernels
//     (pause)   PAUSE_MS of busy host CPU with no range and no GPU work: the gap to find
//     compute   20 kernels, synchronised
//     copy      the result back (a memcpy record)
//
// Usage: gaps_demo [PAUSE_MS]   (default 50; 0 for a run without the pause)
// Build: nvcc -O2 -arch=sm_90 -o gaps_demo gaps_demo.cu -ldl
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                                                     \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,               \
                    cudaGetErrorString(e_));                                            \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

// A few hundred microseconds of arithmetic per launch on 16 M floats.
__global__ void scale(float *x, size_t n, float a, int rounds) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int r = 0; r < rounds; r++) v = v * a + 1.0f / (1.0f + r);
    x[i] = v;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Busy host CPU: the deliberate pause inside the wrapper (the workload being measured).
static volatile double sink;
static void host_pause(int ms) {
    double end = now_s() + ms * 1e-3, acc = 0;
    while (now_s() < end) acc += 1e-9;
    sink = acc;
}

static void compute(float *d, size_t n) {
    nvtxRangePushA("compute");
    unsigned threads = 256, blocks = (unsigned)((n + threads - 1) / threads);
    for (int k = 0; k < 20; k++) scale<<<blocks, threads>>>(d, n, 0.999f, 64);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    nvtxRangePop();
}

int main(int argc, char **argv) {
    int pause_ms = argc > 1 ? atoi(argv[1]) : 50;
    const size_t n = (size_t)1 << 24;
    float *d = NULL;
    float *h = (float *)malloc(n * sizeof(float));
    if (!h) return 1;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemset(d, 0, n * sizeof(float)));
    scale<<<1, 32>>>(d, 32, 1.0f, 1);  // warm-up, outside the wrapper
    CHECK(cudaDeviceSynchronize());

    nvtxRangePushA("step");
    compute(d, n);
    host_pause(pause_ms);
    compute(d, n);
    nvtxRangePushA("copy");
    CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    nvtxRangePop();
    nvtxRangePop();

    printf("gaps_demo: pause %d ms, x[0] = %g\n", pause_ms, h[0]);
    CHECK(cudaFree(d));
    free(h);
    return 0;
}
