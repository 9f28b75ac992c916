/* Stand-alone check of cuda/gpu_timer.cuh against the real CUDA runtime, with a stub
 * span recorder that keeps the attributes it is given. No nvcc needed: the timed work is
 * copies and memsets on a stream.
 *
 *   g++ -std=c++17 -Icuda -I/usr/local/cuda/include cuda/tests/gpu_timer_check.cpp \
 *       -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64 -o /tmp/gpu_timer_check
 *   /tmp/gpu_timer_check
 *
 * With a GPU it checks the timed path; without one, the error path. Exit status 0 when
 * every check passes.
 */
#include "gpu_timer.cuh"

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

static std::map<std::string, double> g_f64;
static std::map<std::string, std::string> g_str;
static uint64_t g_current = 42;

extern "C" {
uint64_t gapscope_span_enter(const char *) { return 0; }
int32_t gapscope_span_exit(uint64_t) { return 0; }
void gapscope_span_attr_u64(uint64_t, const char *, uint64_t) {}
void gapscope_span_attr_f64(uint64_t h, const char *k, double v) {
    g_f64[std::to_string(h) + "/" + k] = v;
}
void gapscope_span_attr_str(uint64_t h, const char *k, const char *v) {
    g_str[std::to_string(h) + "/" + k] = v;
}
uint64_t gapscope_span_current(void) { return g_current; }
uint64_t gapscope_now_ns(void) { return 0; }
}

static int failures = 0;
static void check(bool ok, const char *what, double value) {
    std::printf("%s %s (%g)\n", ok ? "PASS" : "FAIL", what, value);
    if (!ok) ++failures;
}

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        { gapscope::GpuTimer t(nullptr); }
        bool ok = g_str.count("42/gpu_ms_error") == 1 && g_f64.empty();
        check(ok, "no GPU: gpu_ms_error set on the enclosing span, no gpu_ms", 0);
        return failures ? 1 : 0;
    }
    const size_t bytes = size_t(256) << 20;
    void *a = nullptr, *b = nullptr;
    cudaStream_t s = nullptr;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaStreamCreate(&s) != cudaSuccess) {
        std::printf("FAIL setup\n");
        return 1;
    }
    double one = 0, two = 0;
    {
        gapscope::GpuTimer t(s);  // enclosing span 42, key gpu_ms
        cudaMemsetAsync(a, 1, bytes, s);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
    }
    one = g_f64.count("42/gpu_ms") ? g_f64["42/gpu_ms"] : -1;
    check(one > 0.0 && one < 1000.0, "one segment: gpu_ms on the enclosing span", one);
    {
        gapscope::GpuTimer t(s, "copy_ms", 7);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
        t.stop();
        cudaMemsetAsync(a, 2, bytes, s);  // not timed
        t.start();
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
        two = t.finish();
        check(t.finish() == two, "finish() is idempotent", two);
    }
    double attached = g_f64.count("7/copy_ms") ? g_f64["7/copy_ms"] : -1;
    check(attached == two && two > 0.0, "two segments summed under the named key and handle", two);
    check(g_str.empty(), "no errors reported", double(g_str.size()));
    cudaFree(a);
    cudaFree(b);
    cudaStreamDestroy(s);
    return failures ? 1 : 0;
}
