// gapscope's native Groth16 prover over sppark's NTT and MSM (BLS12-381).
//
// The host side of each phase opens a span through the recorder's C ABI on the thread
// that does the work, so a run shows what happens inside the wrapper:
//
//   entry               lock, argument checks against the SRS, GPU memory check
//   prep                (prep thread) density-filtered scalars packed for the A and B
//                       queries, 0/1 census; overlaps with ntt_h and msm_h
//   split_vectors_alloc host vectors for the packed scalars, device buffers for H
//   kernels             per GPU thread: ntt_h, msm_h, msm_l, prep_wait, msm_a, msm_b_g1,
//                       msm_b_g2 (each with a CUDA-event `gpu_ms` attribute)
//   drop                gs_batch_drop: the batch's buffers, on the caller's thread or on
//                       the background drop thread
//
// The SRS is uploaded once (gs_srs_load) and stays on every GPU it was loaded on: one
// sppark msm_t per query and GPU, built with its points. Circuits of a batch are split in
// contiguous slices across those GPUs, GPU 0 on the calling thread.
//
// Errors never abort: sppark's cuda_error, std::bad_alloc and any std::exception become a
// gs_status by value.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <ff/bls12-381-fp2.hpp>
#include <ec/jacobian_t.hpp>
#include <ec/xyzz_t.hpp>

typedef jacobian_t<fp_t> point_t;
typedef xyzz_t<fp_t> bucket_t;
typedef bucket_t::affine_t affine_t;
typedef jacobian_t<fp2_t> point_fp2_t;
typedef xyzz_t<fp2_t> bucket_fp2_t;
typedef bucket_fp2_t::affine_t affine_fp2_t;
typedef fr_t scalar_t;

#include <ntt/ntt.cuh>
#include <util/gpu_t.cuh>
#include <util/slice_t.hpp>
#include <util/vec2d_t.hpp>
#include <cooperative_groups.h>

// sppark's MSM defines one kernel, `sort`, as a plain (non-template) function. Linked
// beside upstream's prover (feature `supraseal`), which instantiates the same header, its
// host stub is a duplicate symbol; the macro gives ours another name. Every header that
// could say std::sort is included above.
#define sort gs_msm_sort
#include <msm/pippenger.cuh>
#undef sort

// pippenger.cuh instantiates the G1 kernels at file scope. The G2 MSM is called only
// from host code, which nvcc's device pass skips (it sits in #ifndef __CUDA_ARCH__
// below), so without these lines the binary has no G2 kernels and the first G2 launch
// fails with "invalid device function".
template __global__ void accumulate<bucket_fp2_t, affine_fp2_t::mem_t>(
    bucket_fp2_t::mem_t buckets_[], uint32_t nwins, uint32_t wbits,
    affine_fp2_t::mem_t points_[], const vec2d_t<uint32_t> digits,
    const vec2d_t<uint32_t> histogram, uint32_t sid);
template __global__ void batch_addition<bucket_fp2_t>(bucket_fp2_t::mem_t buckets[],
                                                      const affine_fp2_t::mem_t points[],
                                                      size_t npoints, const uint32_t digits[],
                                                      const uint32_t &ndigits);
template __global__ void integrate<bucket_fp2_t>(bucket_fp2_t::mem_t buckets_[], uint32_t nwins,
                                                 uint32_t wbits, uint32_t nbits);

#include "gapscope_trace.h"
#include "gs_prover.h"

typedef msm_t<bucket_t, point_t, affine_t, scalar_t> msm_g1_t;
typedef msm_t<bucket_fp2_t, point_fp2_t, affine_fp2_t, scalar_t> msm_g2_t;

// Host layouts only: on the device an fp2_t is spread over two threads.
#ifndef __CUDA_ARCH__
static_assert(sizeof(fr_t) == 32, "Fr crosses the ABI as 32 bytes");
static_assert(sizeof(affine_t) == 96, "G1 affine crosses the ABI as 96 bytes");
static_assert(sizeof(affine_fp2_t) == 192, "G2 affine crosses the ABI as 192 bytes");
static_assert(sizeof(point_t) == 144, "G1 Jacobian crosses the ABI as 144 bytes");
static_assert(sizeof(point_fp2_t) == 288, "G2 Jacobian crosses the ABI as 288 bytes");
#endif

// ---------------------------------------------------------------------------------------
// Device kernels

// a[i] = (a[i]·b[i] − c[i]) / Z on the coset, where Z = g^n − 1 is the same at every
// point of the coset g·⟨ω⟩.
__launch_bounds__(1024) __global__ void gs_h_eval(fr_t *a, const fr_t *b, const fr_t *c,
                                                  fr_t z_inv, size_t n)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += stride) {
        fr_t t = a[i] * b[i];
        t = t - c[i];
        a[i] = t * z_inv;
    }
}

#ifndef __CUDA_ARCH__

// ---------------------------------------------------------------------------------------
// Errors

namespace {

struct gs_failure : std::exception {
    int32_t code;
    std::string msg;
    gs_failure(int32_t c, std::string m) : code(c), msg(std::move(m)) {}
    const char *what() const noexcept override { return msg.c_str(); }
};

gs_status ok() { return gs_status{0, nullptr}; }

gs_status fail(int32_t code, const std::string &msg)
{
    return gs_status{code, strdup(msg.c_str())};
}

void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        std::string m = std::string(what) + ": " + cudaGetErrorString(e);
        if (e == cudaErrorMemoryAllocation) {
            size_t free_b = 0, total_b = 0;
            (void)cudaGetLastError();
            if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
                m += " (GPU memory: " + std::to_string(free_b >> 20) + " of " +
                     std::to_string(total_b >> 20) +
                     " MiB free; lower batch or log2_constraints)";
        }
        throw gs_failure((int32_t)e, m);
    }
}

void check_rust(const RustError &e, const char *what)
{
    if (e.code != 0) {
        std::string m = std::string(what) + ": " +
                        (e.message ? e.message : cudaGetErrorString((cudaError_t)e.code));
        free(e.message);
        throw gs_failure(e.code, m);
    }
}

// Runs `f`, turning every exception into a status.
template <class F> gs_status guarded(const char *where, F &&f)
{
    try {
        f();
        return ok();
    } catch (const gs_failure &e) {
        return fail(e.code, std::string(where) + ": " + e.msg);
    } catch (const cuda_error &e) {
        std::string m = std::string(where) + ": " + e.what();
        if (e.code() == cudaErrorMemoryAllocation)
            m += " (out of GPU memory: lower batch or log2_constraints)";
        return fail(e.code(), m);
    } catch (const std::bad_alloc &) {
        return fail(GS_E_HOST_MEMORY, std::string(where) + ": out of host memory");
    } catch (const std::exception &e) {
        return fail(GS_E_INTERNAL, std::string(where) + ": " + e.what());
    } catch (...) {
        return fail(GS_E_INTERNAL, std::string(where) + ": unknown exception");
    }
}

// ---------------------------------------------------------------------------------------
// Small helpers

// A CUDA-event pair timing the GPU work of one phase on one stream.
class gpu_timer {
    cudaEvent_t start_ = nullptr, stop_ = nullptr;

public:
    gpu_timer()
    {
        check(cudaEventCreate(&start_), "cudaEventCreate");
        check(cudaEventCreate(&stop_), "cudaEventCreate");
    }
    ~gpu_timer()
    {
        if (start_) (void)cudaEventDestroy(start_);
        if (stop_) (void)cudaEventDestroy(stop_);
    }
    gpu_timer(const gpu_timer &) = delete;
    gpu_timer &operator=(const gpu_timer &) = delete;
    void start(cudaStream_t s) { check(cudaEventRecord(start_, s), "cudaEventRecord"); }
    void stop(cudaStream_t s) { check(cudaEventRecord(stop_, s), "cudaEventRecord"); }
    // Waits for the stop event; milliseconds between the two.
    double ms()
    {
        check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        return ms;
    }
};

// Device memory owned here (cudaMalloc/cudaFree on the device it came from).
class dev_buf {
    void *p_ = nullptr;
    int dev_ = 0;
    size_t bytes_ = 0;

public:
    dev_buf() = default;
    dev_buf(int dev, size_t bytes) : dev_(dev), bytes_(bytes)
    {
        check(cudaSetDevice(dev), "cudaSetDevice");
        check(cudaMalloc(&p_, bytes), "cudaMalloc");
    }
    ~dev_buf() { reset(); }
    dev_buf(const dev_buf &) = delete;
    dev_buf &operator=(const dev_buf &) = delete;
    dev_buf(dev_buf &&o) noexcept : p_(o.p_), dev_(o.dev_), bytes_(o.bytes_) { o.p_ = nullptr; }
    void reset()
    {
        if (p_) {
            int cur = 0;
            (void)cudaGetDevice(&cur);
            if (cur != dev_) (void)cudaSetDevice(dev_);
            (void)cudaFree(p_);
            if (cur != dev_) (void)cudaSetDevice(cur);
            p_ = nullptr;
        }
    }
    template <class T> T *as() const { return static_cast<T *>(p_); }
    size_t bytes() const { return p_ ? bytes_ : 0; }
};

// Pinned host memory, kept for the SRS's lifetime (staging for a/b/c).
class pinned_buf {
    void *p_ = nullptr;
    size_t bytes_ = 0;

public:
    pinned_buf() = default;
    explicit pinned_buf(size_t bytes) : bytes_(bytes)
    {
        check(cudaHostAlloc(&p_, bytes, cudaHostAllocPortable), "cudaHostAlloc");
    }
    ~pinned_buf()
    {
        if (p_) (void)cudaFreeHost(p_);
    }
    pinned_buf(const pinned_buf &) = delete;
    pinned_buf &operator=(const pinned_buf &) = delete;
    template <class T> T *as() const { return static_cast<T *>(p_); }
    size_t bytes() const { return bytes_; }
};

inline bool bit(const uint64_t *words, size_t i) { return (words[i >> 6] >> (i & 63)) & 1; }

size_t popcount(const uint64_t *words, size_t bits)
{
    size_t n = 0;
    for (size_t w = 0; w < bits / 64; w++)
        n += __builtin_popcountll(words[w]);
    if (bits % 64) n += __builtin_popcountll(words[bits / 64] & ((1ull << (bits % 64)) - 1));
    return n;
}

uint32_t lg2_exact(size_t n)
{
    uint32_t lg = 0;
    while (((size_t)1 << lg) < n)
        lg++;
    return lg;
}

// Multithreaded copy: one thread moves about 10 GB/s, so a 32 MiB a/b/c vector takes
// milliseconds on its own.
void par_copy(void *dst, const void *src, size_t bytes)
{
    const size_t chunk = (size_t)8 << 20;
    size_t parts = std::min<size_t>((bytes + chunk - 1) / chunk,
                                    std::max(1u, std::thread::hardware_concurrency() / 2));
    if (parts <= 1) {
        memcpy(dst, src, bytes);
        return;
    }
    size_t per = (bytes + parts - 1) / parts;
    std::vector<std::thread> ts;
    for (size_t p = 1; p < parts; p++) {
        size_t off = p * per, len = std::min(per, bytes > off ? bytes - off : 0);
        if (len)
            ts.emplace_back([=] {
                memcpy((char *)dst + off, (const char *)src + off, len);
            });
    }
    memcpy(dst, src, std::min(per, bytes));
    for (auto &t : ts)
        t.join();
}

// ---------------------------------------------------------------------------------------
// Background drop thread

class drop_thread {
    std::mutex m_;
    std::condition_variable cv_, idle_;
    std::deque<std::function<void()>> q_;
    size_t busy_ = 0;
    std::thread t_;

    void loop()
    {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] { return !q_.empty(); });
                job = std::move(q_.front());
                q_.pop_front();
            }
            job();
            std::lock_guard<std::mutex> l(m_);
            if (--busy_ == 0) idle_.notify_all();
        }
    }

public:
    drop_thread() : t_([this] { loop(); }) { t_.detach(); }
    void push(std::function<void()> job)
    {
        std::lock_guard<std::mutex> l(m_);
        busy_++;
        q_.push_back(std::move(job));
        cv_.notify_one();
    }
    void wait_idle()
    {
        std::unique_lock<std::mutex> l(m_);
        idle_.wait(l, [&] { return busy_ == 0; });
    }
};

drop_thread &dropper()
{
    // Never destroyed: a detached thread may still hold it at exit.
    static drop_thread *d = new drop_thread();
    return *d;
}

} // namespace

// ---------------------------------------------------------------------------------------
// SRS resident on the GPUs

struct gs_device {
    int id;
    std::unique_ptr<msm_g1_t> h, l, a, b_g1;
    std::unique_ptr<msm_g2_t> b_g2;
    // host_memory = pinned: a, b, c staging, grown on demand and kept.
    std::unique_ptr<pinned_buf> stage[3];
};

struct gs_srs {
    size_t h_len, l_len, a_len, b_len;
    std::vector<std::unique_ptr<gs_device>> devices;
    std::mutex lock; // one proof at a time (taken in `entry`)
};

// What one call allocated; freed in gs_batch_drop.
struct gs_batch {
    // Packed scalars of the A and B queries, one vector each per circuit.
    std::vector<std::vector<fr_t>> a_scalars, b_scalars;
    // Per circuit: the H evaluations on the device (domain size).
    std::vector<dev_buf> d_h;
    // Per GPU: b and c NTT buffers.
    std::vector<dev_buf> d_bc;
    size_t host_bytes() const
    {
        size_t n = 0;
        for (auto &v : a_scalars)
            n += v.capacity() * sizeof(fr_t);
        for (auto &v : b_scalars)
            n += v.capacity() * sizeof(fr_t);
        return n;
    }
    size_t device_bytes() const
    {
        size_t n = 0;
        for (auto &b : d_h)
            n += b.bytes();
        for (auto &b : d_bc)
            n += b.bytes();
        return n;
    }
};

namespace {

int usable_devices()
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw gs_failure(GS_E_NO_GPU, std::string("no usable GPU: ") + cudaGetErrorString(e));
    }
    if (n == 0) throw gs_failure(GS_E_NO_GPU, "no CUDA device found");
    return std::min<int>(n, (int)ngpus());
}

// Prep's progress, for the GPU threads that wait on it.
struct prep_state {
    std::mutex m;
    std::condition_variable cv;
    size_t done = 0;
    bool failed = false;
    std::string error;
    void finish_one()
    {
        std::lock_guard<std::mutex> l(m);
        done++;
        cv.notify_all();
    }
    void fail(std::string e)
    {
        std::lock_guard<std::mutex> l(m);
        failed = true;
        error = std::move(e);
        cv.notify_all();
    }
    // Waits until circuits [0, upto) are packed.
    void wait(size_t upto)
    {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] { return done >= upto || failed; });
        if (failed) throw gs_failure(GS_E_INTERNAL, "prep failed: " + error);
    }
};

// Packs circuit `c`'s scalars for the A query (all inputs, then aux by density) and the B
// query (inputs by density, then aux by density); counts 0 and 1 aux scalars.
void pack(const gs_circuit &c, std::vector<fr_t> &a, std::vector<fr_t> &b, uint64_t &zeros,
          uint64_t &ones)
{
    const fr_t *inp = static_cast<const fr_t *>(c.inputs);
    const fr_t *aux = static_cast<const fr_t *>(c.aux);
    size_t k = 0;
    for (size_t i = 0; i < c.num_inputs; i++)
        a[k++] = inp[i];
    for (size_t i = 0; i < c.num_aux; i++)
        if (bit(c.a_aux_density, i)) a[k++] = aux[i];
    k = 0;
    for (size_t i = 0; i < c.num_inputs; i++)
        if (bit(c.b_inp_density, i)) b[k++] = inp[i];
    for (size_t i = 0; i < c.num_aux; i++)
        if (bit(c.b_aux_density, i)) b[k++] = aux[i];
    for (size_t i = 0; i < c.num_aux; i++) {
        zeros += aux[i].is_zero() != 0;
        ones += aux[i].is_one();
    }
}

void check_shapes(const gs_srs &srs, const gs_circuit *cs, size_t n)
{
    auto bad = [](size_t i, const std::string &what, size_t got, size_t want) {
        throw gs_failure(GS_E_ARGUMENT, "circuit " + std::to_string(i) + ": " + what + " is " +
                                            std::to_string(got) + ", the SRS needs " +
                                            std::to_string(want) +
                                            " (params made for another circuit or size)");
    };
    if (n == 0) throw gs_failure(GS_E_ARGUMENT, "no circuits");
    size_t domain = srs.h_len + 1;
    for (size_t i = 0; i < n; i++) {
        const gs_circuit &c = cs[i];
        if (c.abc_len == 0 || c.abc_len > domain) bad(i, "the length of a/b/c", c.abc_len, domain);
        if (c.num_aux != srs.l_len) bad(i, "the number of aux variables", c.num_aux, srs.l_len);
        if (c.a_aux_bits != c.num_aux) bad(i, "the A aux density length", c.a_aux_bits, c.num_aux);
        if (c.b_aux_bits != c.num_aux) bad(i, "the B aux density length", c.b_aux_bits, c.num_aux);
        if (c.b_inp_bits != c.num_inputs)
            bad(i, "the B input density length", c.b_inp_bits, c.num_inputs);
        // Popcounts are recounted: the packing loops trust them for their sizes.
        size_t a_pop = popcount(c.a_aux_density, c.a_aux_bits);
        size_t b_pop = popcount(c.b_inp_density, c.b_inp_bits) +
                       popcount(c.b_aux_density, c.b_aux_bits);
        if (c.num_inputs + a_pop != srs.a_len)
            bad(i, "inputs + A aux density", c.num_inputs + a_pop, srs.a_len);
        if (b_pop != srs.b_len) bad(i, "the B density", b_pop, srs.b_len);
        if (!c.a || !c.b || !c.c || !c.aux || !c.inputs)
            throw gs_failure(GS_E_ARGUMENT, "circuit " + std::to_string(i) + ": null vector");
    }
}

// Uploads one of a/b/c (zero-padded to the domain) and brings it to the coset:
// inverse NTT (natural in, bit-reversed out), then coset NTT (bit-reversed in, natural out).
void to_coset(stream_t &s, fr_t *d, const fr_t *host, size_t len, uint32_t lg,
              pinned_buf *stage, cudaEvent_t staged)
{
    size_t domain = (size_t)1 << lg;
    if (stage) {
        // The staging buffer may still feed the previous circuit's copy.
        check(cudaEventSynchronize(staged), "cudaEventSynchronize");
        par_copy(stage->as<fr_t>(), host, len * sizeof(fr_t));
        host = stage->as<fr_t>();
    }
    check(cudaMemcpyAsync(d, host, len * sizeof(fr_t), cudaMemcpyHostToDevice, s),
          "copy of a/b/c to the GPU");
    if (stage) check(cudaEventRecord(staged, s), "cudaEventRecord");
    if (len < domain)
        check(cudaMemsetAsync(d + len, 0, (domain - len) * sizeof(fr_t), s), "cudaMemsetAsync");
    NTT::Base_dev_ptr(s, d, lg, NTT::InputOutputOrder::NR, NTT::Direction::inverse,
                      NTT::Type::standard);
    NTT::Base_dev_ptr(s, d, lg, NTT::InputOutputOrder::RN, NTT::Direction::forward,
                      NTT::Type::coset);
}

fr_t z_inverse(uint32_t lg)
{
    fr_t g = group_gen;
    for (uint32_t i = 0; i < lg; i++)
        g ^= 2;
    return (g - fr_t::one()).reciprocal();
}

// MSM over points resident in `m`, with scalars in host memory.
void run_msm(msm_g1_t &m, point_t &out, size_t n, const fr_t *host)
{
    check_rust(m.invoke(out, (const affine_t *)nullptr, n, host, true), "MSM");
}

void run_msm(msm_g2_t &m, point_fp2_t &out, size_t n, const fr_t *host)
{
    check_rust(m.invoke(out, (const affine_fp2_t *)nullptr, n, host, true), "MSM");
}

// Everything one GPU thread does for its slice [lo, hi) of the batch.
void device_work(gs_srs &srs, gs_device &dev, const gs_circuit *cs, size_t lo, size_t hi,
                 const gs_options &opts, gs_results &out, gs_batch &batch, size_t dev_index,
                 prep_state &prep, gapscope_span_ctx parent)
{
    const gpu_t &gpu = select_gpu(dev.id);
    gpu.select();
    size_t domain = srs.h_len + 1;
    uint32_t lg = lg2_exact(domain);
    fr_t z_inv = z_inverse(lg);
    point_t *out_h = static_cast<point_t *>(out.h);
    point_t *out_l = static_cast<point_t *>(out.l);
    point_t *out_a = static_cast<point_t *>(out.a);
    point_t *out_b1 = static_cast<point_t *>(out.b_g1);
    point_fp2_t *out_b2 = static_cast<point_fp2_t *>(out.b_g2);

    gapscope::Span kernels("kernels", parent);
    kernels.attr("gpu", (uint64_t)dev.id);
    kernels.attr("circuits", (uint64_t)(hi - lo));

    {
        gapscope::Span s("ntt_h");
        s.attr("domain", (uint64_t)domain);
        s.attr("pinned", (uint64_t)opts.pinned);
        s.attr("streams", (uint64_t)opts.streams);
        stream_t &s0 = gpu[0];
        stream_t &s1 = opts.streams > 1 ? gpu[1] : gpu[0];
        gpu_timer t;
        t.start(s0);
        cudaEvent_t staged[3] = {nullptr, nullptr, nullptr}, bc_ready = nullptr;
        struct events_guard {
            cudaEvent_t *e;
            size_t n;
            ~events_guard()
            {
                for (size_t i = 0; i < n; i++)
                    if (e[i]) (void)cudaEventDestroy(e[i]);
            }
        } g1{staged, 3}, g2{&bc_ready, 1};
        for (auto &e : staged)
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
        check(cudaEventCreateWithFlags(&bc_ready, cudaEventDisableTiming), "cudaEventCreate");
        fr_t *d_b = batch.d_bc[dev_index].as<fr_t>();
        fr_t *d_c = d_b + domain;
        uint64_t copied = 0;
        for (size_t i = lo; i < hi; i++) {
            const gs_circuit &c = cs[i];
            fr_t *d_a = batch.d_h[i].as<fr_t>();
            pinned_buf *st[3] = {nullptr, nullptr, nullptr};
            if (opts.pinned)
                for (int k = 0; k < 3; k++)
                    st[k] = dev.stage[k].get();
            // b and c reuse one pair of buffers: the previous circuit's evaluation must
            // be done with them.
            if (i > lo) check(cudaStreamWaitEvent(s1, bc_ready, 0), "cudaStreamWaitEvent");
            to_coset(s0, d_a, static_cast<const fr_t *>(c.a), c.abc_len, lg, st[0],
                     staged[0]);
            to_coset(s1, d_b, static_cast<const fr_t *>(c.b), c.abc_len, lg, st[1],
                     staged[1]);
            to_coset(s1, d_c, static_cast<const fr_t *>(c.c), c.abc_len, lg, st[2],
                     staged[2]);
            if (&s1 != &s0) {
                check(cudaEventRecord(bc_ready, s1), "cudaEventRecord");
                check(cudaStreamWaitEvent(s0, bc_ready, 0), "cudaStreamWaitEvent");
            }
            gs_h_eval<<<gpu.sm_count() * 2, 1024, 0, s0>>>(d_a, d_b, d_c, z_inv, domain);
            check(cudaGetLastError(), "h evaluation kernel");
            check(cudaEventRecord(bc_ready, s0), "cudaEventRecord");
            NTT::Base_dev_ptr(s0, d_a, lg, NTT::InputOutputOrder::NN, NTT::Direction::inverse,
                              NTT::Type::coset);
            copied += 3 * c.abc_len * sizeof(fr_t);
        }
        t.stop(s0);
        check(cudaStreamSynchronize(s1), "NTT stream");
        s.attr("gpu_ms", t.ms());
        s.attr("h2d_bytes", copied);
    }

    auto msm_phase = [&](const char *name, auto &&body) {
        gapscope::Span s(name);
        gpu_timer t;
        t.start(gpu[2]);
        body();
        t.stop(gpu[2]);
        s.attr("gpu_ms", t.ms());
    };

    // H: scalars already on the device, the first domain − 1 coefficients.
    msm_phase("msm_h", [&] {
        for (size_t i = lo; i < hi; i++) {
            dev_ptr_t<fr_t> d_h(batch.d_h[i].as<fr_t>());
            check_rust(dev.h->invoke(out_h[i], (const affine_t *)nullptr, srs.h_len, d_h, true),
                       "MSM H");
        }
    });
    // L: every aux scalar, straight from the caller's vector.
    msm_phase("msm_l", [&] {
        for (size_t i = lo; i < hi; i++)
            run_msm(*dev.l, out_l[i], srs.l_len, static_cast<const fr_t *>(cs[i].aux));
    });
    {
        gapscope::Span s("prep_wait");
        prep.wait(hi);
    }
    msm_phase("msm_a", [&] {
        for (size_t i = lo; i < hi; i++)
            run_msm(*dev.a, out_a[i], srs.a_len, batch.a_scalars[i].data());
    });
    msm_phase("msm_b_g1", [&] {
        for (size_t i = lo; i < hi; i++)
            run_msm(*dev.b_g1, out_b1[i], srs.b_len, batch.b_scalars[i].data());
    });
    msm_phase("msm_b_g2", [&] {
        for (size_t i = lo; i < hi; i++)
            run_msm(*dev.b_g2, out_b2[i], srs.b_len, batch.b_scalars[i].data());
    });
}

} // namespace

// ---------------------------------------------------------------------------------------
// C ABI

extern "C" gs_status gs_device_count(uint32_t *count)
{
    *count = 0;
    return guarded("gs_device_count", [&] { *count = (uint32_t)usable_devices(); });
}

extern "C" gs_status gs_srs_load(const gs_srs_points *p, uint32_t max_gpus, gs_srs **out)
{
    *out = nullptr;
    std::unique_ptr<gs_srs> srs(new gs_srs());
    gs_status st = guarded("SRS upload", [&] {
        if (p->b_g1_len != p->b_g2_len)
            throw gs_failure(GS_E_ARGUMENT, "b_g1 and b_g2 have different lengths");
        size_t domain = p->h_len + 1;
        if (p->h_len == 0 || (domain & (domain - 1)) != 0)
            throw gs_failure(GS_E_ARGUMENT, "h has " + std::to_string(p->h_len) +
                                                " points: not a power of two minus one");
        srs->h_len = p->h_len;
        srs->l_len = p->l_len;
        srs->a_len = p->a_len;
        srs->b_len = p->b_g1_len;
        int n = usable_devices();
        if (max_gpus && (int)max_gpus < n) n = (int)max_gpus;
        for (int d = 0; d < n; d++) {
            std::unique_ptr<gs_device> dev(new gs_device());
            dev->id = d;
            select_gpu(d).select();
            dev->h.reset(new msm_g1_t(static_cast<const affine_t *>(p->h), p->h_len,
                                      sizeof(affine_t), d));
            dev->l.reset(new msm_g1_t(static_cast<const affine_t *>(p->l), p->l_len,
                                      sizeof(affine_t), d));
            dev->a.reset(new msm_g1_t(static_cast<const affine_t *>(p->a), p->a_len,
                                      sizeof(affine_t), d));
            dev->b_g1.reset(new msm_g1_t(static_cast<const affine_t *>(p->b_g1), p->b_g1_len,
                                         sizeof(affine_t), d));
            dev->b_g2.reset(new msm_g2_t(static_cast<const affine_fp2_t *>(p->b_g2),
                                         p->b_g2_len, sizeof(affine_fp2_t), d));
            select_gpu(d).sync();
            srs->devices.push_back(std::move(dev));
        }
    });
    if (st.code == 0) *out = srs.release();
    return st;
}

extern "C" void gs_srs_free(gs_srs *srs)
{
    try {
        delete srs;
    } catch (...) {
    }
}

extern "C" uint32_t gs_srs_gpus(const gs_srs *srs) { return srs ? (uint32_t)srs->devices.size() : 0; }

extern "C" gs_status gs_prove(gs_srs *srs, const gs_circuit *cs, size_t n, const gs_options *opts,
                              gs_results *out, gs_batch **batch_out)
{
    *batch_out = nullptr;
    std::unique_ptr<gs_batch> batch(new (std::nothrow) gs_batch());
    if (!batch) return fail(GS_E_HOST_MEMORY, "gs_prove: out of host memory");
    gs_batch &b = *batch;
    std::unique_lock<std::mutex> guard;
    std::thread prep_thread;
    prep_state prep;
    gs_status st = guarded("native prover", [&] {
        gapscope_span_ctx parent = gapscope_span_context();
        size_t ngpu = 0, domain = 0;
        {
            gapscope::Span s("entry");
            guard = std::unique_lock<std::mutex>(srs->lock);
            check_shapes(*srs, cs, n);
            ngpu = std::min(srs->devices.size(), n);
            if (opts->gpus) ngpu = std::min<size_t>(ngpu, opts->gpus);
            domain = srs->h_len + 1;
            size_t free_total = 0;
            for (size_t d = 0; d < ngpu; d++) {
                size_t f = 0, t = 0;
                select_gpu(srs->devices[d]->id).select();
                check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
                free_total += f;
            }
            s.attr("circuits", (uint64_t)n);
            s.attr("domain", (uint64_t)domain);
            s.attr("gpus", (uint64_t)ngpu);
            s.attr("gpu_free_bytes", (uint64_t)free_total);
            // Pinned staging sized once for this domain, kept afterwards.
            if (opts->pinned)
                for (size_t d = 0; d < ngpu; d++)
                    for (auto &stg : srs->devices[d]->stage)
                        if (!stg || stg->bytes() < domain * sizeof(fr_t))
                            stg.reset(new pinned_buf(domain * sizeof(fr_t)));
        }
        {
            gapscope::Span s("split_vectors_alloc");
            b.a_scalars.resize(n);
            b.b_scalars.resize(n);
            for (size_t i = 0; i < n; i++) {
                b.a_scalars[i].resize(srs->a_len);
                b.b_scalars[i].resize(srs->b_len);
            }
            size_t per = (n + ngpu - 1) / ngpu;
            for (size_t i = 0; i < n; i++)
                b.d_h.emplace_back(srs->devices[i / per]->id, domain * sizeof(fr_t));
            for (size_t d = 0; d < ngpu; d++)
                b.d_bc.emplace_back(srs->devices[d]->id, 2 * domain * sizeof(fr_t));
            s.attr("host_bytes", (uint64_t)b.host_bytes());
            s.attr("device_bytes", (uint64_t)b.device_bytes());
        }
        prep_thread = std::thread([&, parent] {
            gapscope::Span s("prep", parent);
            uint64_t zeros = 0, ones = 0;
            try {
                for (size_t i = 0; i < n; i++) {
                    pack(cs[i], b.a_scalars[i], b.b_scalars[i], zeros, ones);
                    prep.finish_one();
                }
            } catch (const std::exception &e) {
                prep.fail(e.what());
            }
            s.attr("aux_zero_scalars", zeros);
            s.attr("aux_one_scalars", ones);
            s.attr("circuits", (uint64_t)n);
        });
        size_t per = (n + ngpu - 1) / ngpu;
        std::vector<std::thread> others;
        std::vector<std::string> errors(ngpu);
        for (size_t d = 1; d < ngpu; d++) {
            size_t lo = d * per, hi = std::min(n, lo + per);
            if (lo >= hi) continue;
            others.emplace_back([&, d, lo, hi] {
                gs_status e = guarded("GPU", [&] {
                    device_work(*srs, *srs->devices[d], cs, lo, hi, *opts, *out, b, d, prep,
                                parent);
                });
                if (e.code) {
                    errors[d] = e.message ? e.message : "error";
                    free(e.message);
                }
            });
        }
        gs_status e0 = guarded("GPU", [&] {
            device_work(*srs, *srs->devices[0], cs, 0, std::min(n, per), *opts, *out, b, 0, prep,
                        parent);
        });
        if (e0.code) {
            errors[0] = e0.message ? e0.message : "error";
            free(e0.message);
        }
        for (auto &t : others)
            t.join();
        for (size_t d = 0; d < ngpu; d++)
            if (!errors[d].empty())
                throw gs_failure(e0.code ? e0.code : GS_E_INTERNAL,
                                 "GPU " + std::to_string(srs->devices[d]->id) + ": " + errors[d]);
    });
    if (prep_thread.joinable()) {
        // A GPU failure must not leave prep writing into a batch being freed.
        prep_thread.join();
    }
    *batch_out = batch.release();
    return st;
}

extern "C" void gs_batch_drop(gs_batch *batch, int async)
{
    if (!batch) return;
    // With parent.id == 0 the span nests on the calling thread (sync).
    auto free_it = [batch](gapscope_span_ctx parent, bool bg) {
        gapscope::Span s("drop", parent);
        s.attr("bytes", (uint64_t)batch->host_bytes());
        s.attr("device_bytes", (uint64_t)batch->device_bytes());
        if (bg) s.attr("async", (uint64_t)1);
        try {
            delete batch;
        } catch (...) {
        }
    };
    if (!async) {
        free_it(gapscope_span_ctx{0, 0}, false);
        return;
    }
    gapscope_span_ctx parent = gapscope_span_context();
    dropper().push([free_it, parent] { free_it(parent, true); });
}

extern "C" void gs_drop_wait(void) { dropper().wait_idle(); }

extern "C" gs_status gs_msm_g1(const void *points, const void *scalars, size_t n, void *out)
{
    return guarded("G1 MSM", [&] {
        usable_devices();
        msm_g1_t m(nullptr, n, sizeof(affine_t), 0);
        check_rust(m.invoke(*static_cast<point_t *>(out), static_cast<const affine_t *>(points),
                            n, static_cast<const fr_t *>(scalars), true),
                   "MSM");
    });
}

extern "C" gs_status gs_msm_g2(const void *points, const void *scalars, size_t n, void *out)
{
    return guarded("G2 MSM", [&] {
        usable_devices();
        msm_g2_t m(nullptr, n, sizeof(affine_fp2_t), 0);
        check_rust(m.invoke(*static_cast<point_fp2_t *>(out),
                            static_cast<const affine_fp2_t *>(points), n,
                            static_cast<const fr_t *>(scalars), true),
                   "MSM");
    });
}

extern "C" gs_status gs_ntt(void *scalars, uint32_t lg, int inverse, int coset)
{
    return guarded("NTT", [&] {
        usable_devices();
        check_rust(NTT::Base(select_gpu(0), static_cast<fr_t *>(scalars), lg,
                             NTT::InputOutputOrder::NN,
                             inverse ? NTT::Direction::inverse : NTT::Direction::forward,
                             coset ? NTT::Type::coset : NTT::Type::standard),
                   "NTT");
    });
}

#endif // !__CUDA_ARCH__
