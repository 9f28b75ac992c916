// gapscope's native Groth16 prover over sppark's NTT and MSM (BLS12-381).
//
// The host side of each phase opens a span through the recorder's C ABI on the thread
// that does the work, so a run shows what happens inside the wrapper:
//
//   entry               lock, argument checks against the SRS, GPU memory check
//   split_vectors_alloc host split vectors (bitmaps, tail indices and scalars) for the L,
//                       A and B queries; device buffers for H
//   prep                (prep thread, with `pack` spans on its workers) each query's
//                       scalars split into 0, 1 and the rest; overlaps ntt_h and msm_h
//   kernels             per GPU thread: ntt_h, msm_h, prep_wait, msm_l, msm_a, msm_b_g1,
//                       msm_b_g2 (each with a CUDA-event `gpu_ms` attribute)
//   drop                gs_batch_drop: the batch's buffers, on the caller's thread or on
//                       the background drop thread
//
// H is a dense MSM. L, A and B are split (split_msm.cuh): the bases of scalars equal to 1
// are summed by batch addition, 0 scalars are skipped, and Pippenger runs over the rest.
//
// The SRS is uploaded once (gs_srs_load) and stays on every GPU it was loaded on. Circuits
// of a batch are split in contiguous slices across those GPUs, GPU 0 on the calling thread.
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
#include <system_error>
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
// The bitmap form of batch_addition (sum of the points whose bit is set: the bases of
// scalars equal to one) is launched only from host code as well.
template __global__ void batch_addition<bucket_t, affine_t::mem_t>(
    bucket_t::mem_t ret[], const affine_t::mem_t points[], uint32_t npoints,
    const uint32_t bitmap[], bool accumulate, uint32_t sid);
template __global__ void batch_addition<bucket_fp2_t, affine_fp2_t::mem_t>(
    bucket_fp2_t::mem_t ret[], const affine_fp2_t::mem_t points[], uint32_t npoints,
    const uint32_t bitmap[], bool accumulate, uint32_t sid);

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

// dst[i] = src[idx[i]]: the bases of the scalars that are neither 0 nor 1, packed for
// the tail MSM.
template <class affine_h>
__launch_bounds__(256) __global__ void gs_gather(affine_h *dst, const affine_h *src,
                                                 const uint32_t *idx, size_t n)
{
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = threadIdx.x + (size_t)blockIdx.x * blockDim.x; i < n; i += stride)
        dst[i] = src[idx[i]];
}
template __global__ void gs_gather<affine_t::mem_t>(affine_t::mem_t *, const affine_t::mem_t *,
                                                    const uint32_t *, size_t);
template __global__ void gs_gather<affine_fp2_t::mem_t>(affine_fp2_t::mem_t *,
                                                        const affine_fp2_t::mem_t *,
                                                        const uint32_t *, size_t);

#ifndef __CUDA_ARCH__

#include "gs_util.cuh"
#include "split_msm.cuh"


// ---------------------------------------------------------------------------------------
// SRS resident on the GPUs

// One query's bases on one GPU.
struct gs_query {
    dev_buf pts;
    size_t n = 0;
    // Uploads `count` affine points of `size` bytes each to device `dev`.
    void load(int dev, const void *points, size_t count, size_t size)
    {
        pts = dev_buf(dev, std::max<size_t>(count, 1) * size);
        pts.upload(points, count * size);
        n = count;
    }
    template <class affine_T> const typename affine_T::mem_t *as() const
    {
        return pts.as<typename affine_T::mem_t>();
    }
};

struct gs_device {
    int id;
    gs_query h, l, a, b_g1, b_g2;
    // Pippenger sized for the dense H query (its points are passed at each call).
    std::unique_ptr<msm_g1_t> h_msm;
    // h_threads = 2: a second Pippenger for H (its own buckets), made at the first such
    // call and kept.
    std::unique_ptr<msm_g1_t> h_msm2;
    split_scratch scratch;
    // split_threads > 1: scratch for the second to eighth concurrent split workers, made
    // at the first such call and kept.
    std::unique_ptr<split_scratch> extra_scratch[7];
    size_t max_split = 0;
    // host_memory = pinned: a, b, c staging, grown on demand and kept.
    std::unique_ptr<pinned_buf> stage[3];
    // The NTTs' own streams (a; b and c), apart from Pippenger's, so that with
    // ntt = overlap a circuit's NTTs queue beside another circuit's MSM.
    std::unique_ptr<stream_t> ntt_streams[2];
};

struct gs_srs {
    size_t h_len, l_len, a_len, b_len;
    std::vector<std::unique_ptr<gs_device>> devices;
    std::mutex lock; // one proof at a time (taken in `entry`)
};

// What one call allocated; freed in gs_batch_drop.
struct gs_batch {
    // Split scalars of the L, A and B queries, one per circuit (the split vectors).
    std::vector<split_t> l, a, b;
    // Per circuit: the H evaluations on the device (domain size).
    std::vector<dev_buf> d_h;
    // Per GPU: b and c NTT buffers.
    std::vector<dev_buf> d_bc;
    size_t host_bytes() const
    {
        size_t n = 0;
        for (auto *v : {&l, &a, &b})
            for (auto &s : *v)
                n += s.bytes();
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

// The queries prep splits for each circuit.
enum { Q_L, Q_A, Q_B, QUERIES };

// What a thread waits on another for: a mutex, its condition and a failure to pass on.
struct progress {
    std::mutex m;
    std::condition_variable cv;
    bool failed = false;
    std::string error;
    void fail(std::string e)
    {
        std::lock_guard<std::mutex> l(m);
        failed = true;
        error = std::move(e);
        cv.notify_all();
    }
};

// Prep's progress, for the GPU threads that wait on it: per circuit, the queries still
// to split.
struct prep_state : progress {
    std::vector<uint8_t> left;
    explicit prep_state(size_t n) : left(n, QUERIES) {}
    void finish_one(size_t circuit)
    {
        std::lock_guard<std::mutex> l(m);
        left[circuit]--;
        cv.notify_all();
    }
    // Whether circuit i is split, without waiting.
    bool ready(size_t i)
    {
        std::lock_guard<std::mutex> l(m);
        return !failed && left[i] == 0;
    }
    // Waits until circuits [lo, hi) are split.
    void wait(size_t lo, size_t hi)
    {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] {
            return failed || std::all_of(left.begin() + lo, left.begin() + hi,
                                         [](uint8_t q) { return q == 0; });
        });
        if (failed) throw gs_failure(GS_E_INTERNAL, "prep failed: " + error);
    }
};

// The NTT thread's progress (ntt = overlap), for the H MSM that waits on it: per circuit,
// an event recorded after its last NTT.
struct ntt_state : progress {
    std::vector<cudaEvent_t> done;
    size_t queued = 0; // circuits whose event is recorded
    explicit ntt_state(size_t n) : done(n, nullptr)
    {
        for (auto &e : done)
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    }
    ~ntt_state()
    {
        for (auto &e : done)
            if (e) (void)cudaEventDestroy(e);
    }
    ntt_state(const ntt_state &) = delete;
    ntt_state &operator=(const ntt_state &) = delete;
    void recorded(size_t k, cudaStream_t s)
    {
        check(cudaEventRecord(done[k], s), "cudaEventRecord");
        std::lock_guard<std::mutex> l(m);
        queued = k + 1;
        cv.notify_all();
    }
    // Whether circuit k's H scalars are on the device, without waiting.
    bool ready(size_t k)
    {
        {
            std::lock_guard<std::mutex> l(m);
            if (failed || queued <= k) return false;
        }
        return cudaEventQuery(done[k]) == cudaSuccess;
    }
    // Waits until circuit k's NTTs are done on the GPU.
    void wait(size_t k)
    {
        {
            std::unique_lock<std::mutex> l(m);
            cv.wait(l, [&] { return failed || queued > k; });
            if (failed) throw gs_failure(GS_E_INTERNAL, "NTT failed: " + error);
        }
        check(cudaEventSynchronize(done[k]), "NTT of H");
    }
};

// Splits one query of circuit `c`: L is every aux scalar; A is every input, then the aux
// scalars in the A density; B is the inputs, then the aux scalars, in the B density.
void pack(const gs_circuit &c, int query, split_t &s)
{
    const fr_t *inp = static_cast<const fr_t *>(c.inputs);
    const fr_t *aux = static_cast<const fr_t *>(c.aux);
    switch (query) {
    case Q_L:
        for (size_t i = 0; i < c.num_aux; i++)
            s.push(aux[i]);
        break;
    case Q_A:
        for (size_t i = 0; i < c.num_inputs; i++)
            s.push(inp[i]);
        for (size_t i = 0; i < c.num_aux; i++)
            if (bit(c.a_aux_density, i)) s.push(aux[i]);
        break;
    default:
        for (size_t i = 0; i < c.num_inputs; i++)
            if (bit(c.b_inp_density, i)) s.push(inp[i]);
        for (size_t i = 0; i < c.num_aux; i++)
            if (bit(c.b_aux_density, i)) s.push(aux[i]);
    }
}

// The prep thread: splits every (circuit, query) pair on a few worker threads, each pair
// in its own `pack` span under `prep`.
void run_prep(const gs_circuit *cs, size_t n, gs_batch &b, prep_state &prep,
              uint32_t threads, gapscope_span_ctx parent)
{
    gapscope::Span s("prep", parent);
    gapscope_span_ctx here = gapscope_span_context();
    size_t items = n * QUERIES;
    // threads = 0: half the cores. Fewer threads split fewer circuits at once, each sooner
    // (the packing is bound by memory bandwidth), so the split MSMs can start earlier.
    size_t want = threads ? threads : std::max(1u, std::thread::hardware_concurrency() / 2);
    size_t workers = std::min<size_t>(items, want);
    std::atomic<size_t> next{0};
    auto work = [&] {
        for (size_t j; (j = next++) < items;) {
            size_t i = j / QUERIES;
            int q = (int)(j % QUERIES);
            split_t &sp = q == Q_L ? b.l[i] : q == Q_A ? b.a[i] : b.b[i];
            {
                static const char *names[] = {"l", "a", "b"};
                gapscope::Span p("pack", here);
                p.attr("circuit", (uint64_t)i);
                p.attr("query", names[q]);
                pack(cs[i], q, sp);
                p.attr("ones", sp.n_ones);
                p.attr("zeros", sp.zeros);
                p.attr("tail", (uint64_t)sp.tail.size());
            }
            prep.finish_one(i);
        }
    };
    auto guarded_work = [&] {
        try {
            work();
        } catch (const std::exception &e) {
            prep.fail(e.what());
        }
    };
    std::vector<std::thread> ts;
    try {
        for (size_t w = 1; w < workers; w++)
            ts.emplace_back(guarded_work);
    } catch (const std::system_error &) {
        // Fewer threads than asked: the items left are split below, on this one.
    }
    guarded_work();
    for (auto &t : ts)
        t.join();
    uint64_t zeros = 0, ones = 0, tail = 0;
    for (auto &sp : b.l) {
        zeros += sp.zeros;
        ones += sp.n_ones;
    }
    for (auto *v : {&b.l, &b.a, &b.b})
        for (auto &sp : *v)
            tail += sp.tail.size();
    s.attr("aux_zero_scalars", zeros);
    s.attr("aux_one_scalars", ones);
    s.attr("tail_scalars", tail);
    s.attr("circuits", (uint64_t)n);
    s.attr("threads", (uint64_t)workers);
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
        // Whole, then copied: staged in pieces with each piece's DMA beside the staging of
        // the next, the copies ran at 35–41 GB/s instead of 52 on the H200 host (the DMA
        // and the host copy share the host's memory bandwidth): evidence/native-cuda.
        par_copy(stage->as<fr_t>(), host, len * sizeof(fr_t));
        check(cudaMemcpyAsync(d, stage->as<fr_t>(), len * sizeof(fr_t), cudaMemcpyHostToDevice,
                              s),
              "copy of a/b/c to the GPU");
        check(cudaEventRecord(staged, s), "cudaEventRecord");
    } else {
        check(cudaMemcpyAsync(d, host, len * sizeof(fr_t), cudaMemcpyHostToDevice, s),
              "copy of a/b/c to the GPU");
    }
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

// Brings every circuit of [lo, hi) to H's scalars on device: a, b and c uploaded and
// taken to the coset, (a·b − c)/Z, back from the coset. With `ready`, each circuit's end
// is recorded there as soon as it is queued, for the H MSM to start on it.
void ntt_h_phase(const gs_srs &srs, gs_device &dev, const gs_circuit *cs, size_t lo, size_t hi,
                 const gs_options &opts, gs_batch &batch, size_t dev_index, ntt_state *ready,
                 gapscope_span_ctx parent)
{
    size_t domain = srs.h_len + 1;
    uint32_t lg = lg2_exact(domain);
    fr_t z_inv = z_inverse(lg);
    const gpu_t &gpu = select_gpu(dev.id);
    gapscope::Span s("ntt_h", parent);
    s.attr("domain", (uint64_t)domain);
    s.attr("pinned", (uint64_t)opts.pinned);
    s.attr("streams", (uint64_t)opts.streams);
    stream_t &s0 = *dev.ntt_streams[0];
    stream_t &s1 = opts.streams > 1 ? *dev.ntt_streams[1] : s0;
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
        if (ready) ready->recorded(i - lo, s0);
    }
    t.stop(s0);
    check(cudaStreamSynchronize(s1), "NTT stream");
    s.attr("gpu_ms", t.ms());
    s.attr("h2d_bytes", copied);
}

// Joins a thread when the scope ends, on every path out of it.
struct join_on_exit {
    std::thread &t;
    ~join_on_exit()
    {
        if (t.joinable()) t.join();
    }
};

// Everything one GPU thread does for its slice [lo, hi) of the batch.
void device_work(gs_srs &srs, gs_device &dev, const gs_circuit *cs, size_t lo, size_t hi,
                 const gs_options &opts, gs_results &out, gs_batch &batch, size_t dev_index,
                 prep_state &prep, gapscope_span_ctx parent)
{
    const gpu_t &gpu = select_gpu(dev.id);
    gpu.select();
    point_t *out_h = static_cast<point_t *>(out.h);
    point_t *out_l = static_cast<point_t *>(out.l);
    point_t *out_a = static_cast<point_t *>(out.a);
    point_t *out_b1 = static_cast<point_t *>(out.b_g1);
    point_fp2_t *out_b2 = static_cast<point_fp2_t *>(out.b_g2);

    gapscope::Span kernels("kernels", parent);
    kernels.attr("gpu", (uint64_t)dev.id);
    kernels.attr("circuits", (uint64_t)(hi - lo));

    const gapscope_span_ctx here{0, 0};
    gapscope_span_ctx kctx = gapscope_span_context();
    bool overlap = opts.ntt_overlap != 0;

    // ntt = overlap: the NTTs run on their own thread and each circuit's H MSM starts on
    // this one as soon as that circuit's NTTs are done, so the staging of the next
    // circuit's a/b/c on the host overlaps the GPU's work on this one.
    std::unique_ptr<ntt_state> ntt_ready;
    std::thread ntt_thread;
    if (overlap) {
        ntt_ready.reset(new ntt_state(hi - lo));
        ntt_state *ready = ntt_ready.get();
        ntt_thread = std::thread([&, ready, kctx] {
            std::string e = guarded_message("NTT", [&] {
                gpu.select();
                ntt_h_phase(srs, dev, cs, lo, hi, opts, batch, dev_index, ready, kctx);
            });
            if (!e.empty()) ready->fail(e);
        });
    } else {
        ntt_h_phase(srs, dev, cs, lo, hi, opts, batch, dev_index, nullptr, here);
    }
    // Declared after ntt_ready: joined before its events are destroyed, on every path.
    join_on_exit join_ntt{ntt_thread};

    // Circuit i's split scalars, with a `prep_wait` span only when prep is not done yet.
    auto wait_prep = [&](size_t i, gapscope_span_ctx parent) {
        if (prep.ready(i)) return;
        gapscope::Span w("prep_wait", parent);
        w.attr("circuit", (uint64_t)i);
        prep.wait(i, i + 1);
    };

    // One MSM phase in a span under `parent` (id 0: nested on this thread), timed by
    // CUDA events on Pippenger's stream.
    auto msm_phase = [&](const char *name, gapscope_span_ctx parent, auto &&body) {
        gapscope::Span s(name, parent);
        gpu_timer t;
        t.start(gpu[2]);
        body(s);
        t.stop(gpu[2]);
        s.attr("gpu_ms", t.ms());
    };
    // The split queries: batch addition of the bases of 1 scalars, Pippenger over the tail.
    // Query q of circuits first, first + step, … of the slice.
    auto split_query = [&](int q, split_scratch &sc, gapscope_span_ctx parent, size_t first,
                           size_t step) {
        static const char *names[] = {"msm_l", "msm_a", "msm_b_g1", "msm_b_g2"};
        std::vector<split_t> &splits = q == 0 ? batch.l : q == 1 ? batch.a : batch.b;
        msm_phase(names[q], parent, [&](const gapscope::Span &s) {
            uint64_t ones = 0, zeros = 0, tail = 0;
            for (size_t i = first; i < hi; i += step) {
                if (i > first) wait_prep(i, here);
                const split_t &sp = splits[i];
                if (q == 0)
                    split_msm<bucket_t, point_t, affine_t>(gpu, dev.l.as<affine_t>(), sp, sc,
                                                           out_l[i]);
                else if (q == 1)
                    split_msm<bucket_t, point_t, affine_t>(gpu, dev.a.as<affine_t>(), sp, sc,
                                                           out_a[i]);
                else if (q == 2)
                    split_msm<bucket_t, point_t, affine_t>(gpu, dev.b_g1.as<affine_t>(), sp, sc,
                                                           out_b1[i]);
                else
                    split_msm<bucket_fp2_t, point_fp2_t, affine_fp2_t>(
                        gpu, dev.b_g2.as<affine_fp2_t>(), sp, sc, out_b2[i]);
                ones += sp.n_ones;
                zeros += sp.zeros;
                tail += sp.tail.size();
            }
            s.attr("ones", ones);
            s.attr("zeros", zeros);
            s.attr("tail", tail);
            if (opts.split_threads > 1) s.attr("concurrent", (uint64_t)1);
        });
    };

    // split_threads > 1: the four split queries run on their own host threads (8: two per
    // query, each with every other circuit), each waiting for prep, while this thread runs
    // the H MSM. Their GPU work interleaves on the
    // GPU's streams; their host work (bucket sums, Pippenger's final reduction) overlaps
    // the other queries' kernels.
    std::vector<std::thread> workers;
    std::vector<std::string> errors(opts.split_threads);
    struct joiner {
        std::vector<std::thread> &ts;
        ~joiner()
        {
            for (auto &t : ts)
                if (t.joinable()) t.join();
        }
    } join_all{workers};
    if (opts.split_threads > 1) {
        size_t step = opts.split_threads / 4;
        for (uint32_t w = 0; w < opts.split_threads; w++) {
            int q = (int)(w % 4);
            size_t first = lo + w / 4;
            if (first >= hi) continue;
            workers.emplace_back([&, w, q, first, step, kctx] {
                errors[w] = guarded_message("split MSM", [&] {
                    gpu.select();
                    wait_prep(first, kctx);
                    split_query(q, w == 0 ? dev.scratch : *dev.extra_scratch[w - 1], kctx, first,
                                step);
                });
            });
        }
    }

    // H: dense, scalars already on the device (the first domain − 1 coefficients).
    // Circuit i's H scalars (ntt = overlap), with an `ntt_wait` span only when its NTTs
    // are not done yet; wait() also passes on the NTT thread's failure.
    auto wait_ntt = [&](size_t i) {
        if (ntt_ready->ready(i - lo)) return ntt_ready->wait(i - lo);
        gapscope::Span w("ntt_wait");
        w.attr("circuit", (uint64_t)i);
        ntt_ready->wait(i - lo);
    };
    // Circuits first, first + step, … of the slice, through Pippenger `m`.
    auto h_msms = [&](msm_g1_t &m, size_t first, size_t step) {
        for (size_t i = first; i < hi; i += step) {
            if (overlap) wait_ntt(i);
            dev_ptr_t<fr_t> d_h(batch.d_h[i].as<fr_t>());
            dev_ptr_t<affine_t> d_pts(dev.h.pts.as<affine_t>()); // as in split_msm
            check_rust(m.invoke(out_h[i], d_pts, srs.h_len, d_h, true), "MSM H");
        }
    };
    // h_threads = 2: every other circuit's H MSM on a second host thread, so that one
    // MSM's host-side final reduction overlaps the other's kernels.
    bool two_h = opts.h_threads > 1 && hi - lo > 1;
    std::thread h_thread;
    std::string h_error;
    join_on_exit join_h{h_thread};
    if (two_h)
        h_thread = std::thread([&, kctx] {
            h_error = guarded_message("MSM H", [&] {
                gpu.select();
                msm_phase("msm_h", kctx, [&](const gapscope::Span &s) {
                    s.attr("circuits_from", (uint64_t)(lo + 1));
                    h_msms(*dev.h_msm2, lo + 1, 2);
                });
            });
        });
    msm_phase("msm_h", here, [&](const gapscope::Span &) {
        h_msms(*dev.h_msm, lo, two_h ? 2 : 1);
    });
    if (two_h) {
        h_thread.join();
        if (!h_error.empty()) throw gs_failure(GS_E_INTERNAL, h_error);
    }
    if (overlap) {
        // A failure after the last circuit's event (its final synchronisation) reaches no
        // wait(): raised here.
        ntt_thread.join();
        if (ntt_ready->failed) throw gs_failure(GS_E_INTERNAL, "NTT failed: " + ntt_ready->error);
    }
    if (opts.split_threads > 1) {
        for (auto &t : workers)
            t.join();
        for (auto &e : errors)
            if (!e.empty()) throw gs_failure(GS_E_INTERNAL, e);
        return;
    }
    wait_prep(lo, here);
    for (int q = 0; q < 4; q++)
        split_query(q, dev.scratch, here, lo, 1);
}

} // namespace

#endif // !__CUDA_ARCH__

// Kernels and host driver of the parameter generator's fixed-base multiplication.
#include "fixed_base.cuh"

#ifndef __CUDA_ARCH__

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
            dev->h.load(d, p->h, p->h_len, sizeof(affine_t));
            dev->l.load(d, p->l, p->l_len, sizeof(affine_t));
            dev->a.load(d, p->a, p->a_len, sizeof(affine_t));
            dev->b_g1.load(d, p->b_g1, p->b_g1_len, sizeof(affine_t));
            dev->b_g2.load(d, p->b_g2, p->b_g2_len, sizeof(affine_fp2_t));
            dev->h_msm.reset(new msm_g1_t(nullptr, p->h_len, sizeof(affine_t), d));
            for (auto &st : dev->ntt_streams)
                st.reset(new stream_t(d));
            dev->max_split = std::max({p->l_len, p->a_len, p->b_g1_len});
            dev->scratch.alloc(d, dev->max_split, select_gpu(d).sm_count());
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
    prep_state prep(n);
    gs_status st = guarded("native prover", [&] {
        gapscope_span_ctx parent = gapscope_span_context();
        size_t ngpu = 0, domain = 0, per = 0; // per: circuits per GPU
        {
            gapscope::Span s("entry");
            guard = std::unique_lock<std::mutex>(srs->lock);
            check_shapes(*srs, cs, n);
            ngpu = std::min(srs->devices.size(), n);
            if (opts->gpus) ngpu = std::min<size_t>(ngpu, opts->gpus);
            per = (n + ngpu - 1) / ngpu;
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
            if (opts->split_threads > 1)
                for (size_t d = 0; d < ngpu; d++) {
                    gs_device &dev = *srs->devices[d];
                    for (uint32_t w = 1; w < opts->split_threads; w++)
                        if (auto &sc = dev.extra_scratch[w - 1]; !sc) {
                            sc.reset(new split_scratch());
                            sc->alloc(dev.id, dev.max_split, select_gpu(dev.id).sm_count());
                        }
                }
            if (opts->h_threads > 1)
                for (size_t d = 0; d < ngpu; d++) {
                    gs_device &dev = *srs->devices[d];
                    if (!dev.h_msm2) {
                        select_gpu(dev.id).select();
                        dev.h_msm2.reset(
                            new msm_g1_t(nullptr, srs->h_len, sizeof(affine_t), dev.id));
                    }
                }
            // Pinned staging sized once for this domain, kept afterwards.
            if (opts->pinned)
                for (size_t d = 0; d < ngpu; d++)
                    for (auto &stg : srs->devices[d]->stage)
                        if (!stg || stg->bytes() < domain * sizeof(fr_t))
                            stg.reset(new pinned_buf(domain * sizeof(fr_t)));
        }
        {
            gapscope::Span s("split_vectors_alloc");
            b.l.resize(n);
            b.a.resize(n);
            b.b.resize(n);
            for (size_t i = 0; i < n; i++) {
                b.l[i].alloc(cs[i].num_aux);
                b.a[i].alloc(srs->a_len);
                b.b[i].alloc(srs->b_len);
            }
            for (size_t i = 0; i < n; i++)
                b.d_h.emplace_back(srs->devices[i / per]->id, domain * sizeof(fr_t));
            for (size_t d = 0; d < ngpu; d++)
                b.d_bc.emplace_back(srs->devices[d]->id, 2 * domain * sizeof(fr_t));
            s.attr("host_bytes", (uint64_t)b.host_bytes());
            s.attr("device_bytes", (uint64_t)b.device_bytes());
        }
        prep_thread = std::thread([&, parent] {
            try {
                run_prep(cs, n, b, prep, opts->prep_threads, parent);
            } catch (const std::exception &e) {
                prep.fail(e.what());
            }
        });
        std::vector<std::thread> others;
        std::vector<std::string> errors(ngpu);
        for (size_t d = 1; d < ngpu; d++) {
            size_t lo = d * per, hi = std::min(n, lo + per);
            if (lo >= hi) continue;
            others.emplace_back([&, d, lo, hi] {
                errors[d] = guarded_message("GPU", [&] {
                    device_work(*srs, *srs->devices[d], cs, lo, hi, *opts, *out, b, d, prep,
                                parent);
                });
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

namespace {

// A check MSM on device 0 through the prover's own path (split, batch addition, tail).
template <class bucket_T, class point_T, class affine_T>
void check_msm(const void *points, const void *scalars, size_t n, void *out)
{
    usable_devices();
    const gpu_t &gpu = select_gpu(0);
    gpu.select();
    gs_query q;
    q.load(0, points, n, sizeof(affine_T));
    split_t sp;
    sp.alloc(n);
    for (size_t i = 0; i < n; i++)
        sp.push(static_cast<const fr_t *>(scalars)[i]);
    split_scratch sc;
    sc.alloc(0, n, gpu.sm_count());
    split_msm<bucket_T, point_T, affine_T>(gpu, q.as<affine_T>(), sp, sc,
                                           *static_cast<point_T *>(out));
}

} // namespace

extern "C" gs_status gs_msm_g1(const void *points, const void *scalars, size_t n, void *out)
{
    return guarded("G1 MSM", [&] { check_msm<bucket_t, point_t, affine_t>(points, scalars, n, out); });
}

extern "C" gs_status gs_msm_g2(const void *points, const void *scalars, size_t n, void *out)
{
    return guarded("G2 MSM", [&] {
        check_msm<bucket_fp2_t, point_fp2_t, affine_fp2_t>(points, scalars, n, out);
    });
}

extern "C" gs_status gs_fixed_base_g1(const void *base, const void *scalars, size_t n, void *out)
{
    return guarded("G1 fixed-base multiplication", [&] {
        fixed_base<bucket_t, point_t, affine_t, fp_t>(base, scalars, n, out);
    });
}

extern "C" gs_status gs_fixed_base_g2(const void *base, const void *scalars, size_t n, void *out)
{
    return guarded("G2 fixed-base multiplication", [&] {
        fixed_base<bucket_fp2_t, point_fp2_t, affine_fp2_t, fp2_t>(base, scalars, n, out);
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
