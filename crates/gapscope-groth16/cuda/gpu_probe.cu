// Can this process run our GPU code? Asked before handing work to code that aborts the
// process on CUDA errors (upstream supraseal), so that a missing driver, a driver too old
// for this binary's runtime, no device, or machine code that does not load on the device
// become an error message instead of a crash.
//
// Nothing here throws: CUDA's C API returns codes, and each function returns its status by
// value (sppark's habit), with cudaGetErrorName/String filled in.

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

extern "C" {

// A CUDA status: code 0 is success; `message` is "<name>: <description>".
struct gapscope_gpu_status {
    int code;
    char message[240];
};

struct gapscope_gpu_versions {
    int driver;   // cudaDriverGetVersion: 1000*major + 10*minor; 0 when no driver is loaded
    int runtime;  // cudaRuntimeGetVersion: the runtime linked into this binary
};

struct gapscope_gpu_device {
    char name[256];
    int major;
    int minor;
    int cooperative_launch;
    int multiprocessors;
    unsigned long long total_bytes;
    unsigned long long free_bytes;
    int pci_bus;
    int pci_device;
};

}  // extern "C"

static gapscope_gpu_status status_of(cudaError_t e)
{
    gapscope_gpu_status s;
    s.code = (int)e;
    s.message[0] = '\0';
    if (e != cudaSuccess) {
        const char* name = cudaGetErrorName(e);
        const char* text = cudaGetErrorString(e);
        std::snprintf(s.message, sizeof s.message, "%s: %s", name ? name : "cudaError",
                      text ? text : "unknown");
    }
    return s;
}

extern "C" gapscope_gpu_status gapscope_gpu_versions_get(gapscope_gpu_versions* out)
{
    out->driver = 0;
    out->runtime = 0;
    // Succeeds with 0 when no driver is installed (documented), so this never fails
    // for a missing libcuda; the device count below reports why.
    cudaError_t e = cudaDriverGetVersion(&out->driver);
    if (e != cudaSuccess)
        return status_of(e);
    return status_of(cudaRuntimeGetVersion(&out->runtime));
}

extern "C" gapscope_gpu_status gapscope_gpu_device_count(int* count)
{
    *count = 0;
    cudaError_t e = cudaGetDeviceCount(count);
    if (e != cudaSuccess)
        *count = 0;
    return status_of(e);
}

// Properties, and free/total memory (creates the device's primary context, which the
// first GPU call of the prover would do anyway).
extern "C" gapscope_gpu_status gapscope_gpu_device_get(int device, gapscope_gpu_device* out)
{
    std::memset(out, 0, sizeof *out);
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return status_of(e);
    std::snprintf(out->name, sizeof out->name, "%s", p.name);
    out->major = p.major;
    out->minor = p.minor;
    out->cooperative_launch = p.cooperativeLaunch;
    out->multiprocessors = p.multiProcessorCount;
    out->pci_bus = p.pciBusID;
    out->pci_device = p.pciDeviceID;
    out->total_bytes = p.totalGlobalMem;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    e = cudaSetDevice(device);
    if (e == cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        e = cudaMemGetInfo(&free_b, &total_b);
        if (e == cudaSuccess) {
            out->free_bytes = free_b;
            out->total_bytes = total_b;
        }
    }
    (void)cudaSetDevice(prev);
    return status_of(e);
}

// Free and total memory of `device` only: cheap enough for a measured path once the
// device's context exists.
extern "C" gapscope_gpu_status gapscope_gpu_mem_get(int device, unsigned long long* free_bytes,
                                                    unsigned long long* total_bytes)
{
    *free_bytes = 0;
    *total_bytes = 0;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    cudaError_t e = cudaSetDevice(device);
    if (e == cudaSuccess) {
        size_t f = 0, t = 0;
        e = cudaMemGetInfo(&f, &t);
        *free_bytes = f;
        *total_bytes = t;
    }
    (void)cudaSetDevice(prev);
    return status_of(e);
}

__global__ void gapscope_probe_kernel(unsigned int* out, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = i * 2654435761u + 12345u;
}

// Launches a kernel of this binary on `device` and checks what it wrote: proves that the
// embedded machine code (or PTX, through the driver's JIT) loads and runs there.
extern "C" gapscope_gpu_status gapscope_gpu_launch_probe(int device)
{
    const unsigned int n = 1024;
    int prev = 0;
    (void)cudaGetDevice(&prev);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return status_of(e);
    unsigned int* d = nullptr;
    unsigned int host[n];
    e = cudaMalloc(&d, n * sizeof(unsigned int));
    if (e == cudaSuccess) {
        gapscope_probe_kernel<<<(n + 255) / 256, 256>>>(d, n);
        e = cudaGetLastError();
        if (e == cudaSuccess)
            e = cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost);
        (void)cudaFree(d);
    }
    (void)cudaSetDevice(prev);
    if (e != cudaSuccess)
        return status_of(e);
    for (unsigned int i = 0; i < n; i++) {
        if (host[i] != i * 2654435761u + 12345u) {
            gapscope_gpu_status s;
            s.code = -1;
            std::snprintf(s.message, sizeof s.message,
                          "probe kernel wrote %u at index %u, expected %u", host[i], i,
                          i * 2654435761u + 12345u);
            return s;
        }
    }
    return status_of(cudaSuccess);
}
