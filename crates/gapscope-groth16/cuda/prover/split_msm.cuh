// MSMs over scalars that are mostly 0 and 1, as a circuit's witness is: the bases of the
// scalars equal to 1 are summed by batch addition over a bitmap, scalars equal to 0 are
// skipped, and only the rest (the tail) goes through Pippenger, over its bases gathered
// into a packed buffer. Host pass of gs_prover.cu only.
#ifndef GS_SPLIT_MSM_CUH
#define GS_SPLIT_MSM_CUH

namespace {

// Bitmap words for n scalars: batch_addition reads whole 1024-bit chunks.
inline size_t bitmap_words(size_t n) { return ((n + 1023) / 1024) * 32; }

// One query's scalars for one circuit, split by value. The vectors are reserved for the
// worst case (every scalar in the tail) when the batch is allocated, as split vectors
// are, and filled by push() on the prep thread.
struct split_t {
    size_t n = 0;               // scalars pushed so far
    std::vector<uint32_t> ones; // bit k: scalar k is 1
    std::vector<uint32_t> idx;  // tail: index of each scalar in the query
    std::vector<fr_t> tail;     // tail: the scalars themselves
    uint64_t zeros = 0, n_ones = 0;

    void alloc(size_t len)
    {
        ones.assign(bitmap_words(len), 0);
        idx.reserve(len);
        tail.reserve(len);
    }
    void push(const fr_t &v)
    {
        size_t k = n++;
        if (v.is_zero() != 0) {
            zeros++;
        } else if (v.is_one()) {
            ones[k >> 5] |= 1u << (k & 31);
            n_ones++;
        } else {
            idx.push_back((uint32_t)k);
            tail.push_back(v);
        }
    }
    size_t bytes() const
    {
        return ones.capacity() * sizeof(uint32_t) + idx.capacity() * sizeof(uint32_t) +
               tail.capacity() * sizeof(fr_t);
    }
};

// sppark's Pippenger window for n points, as its constructor picks it: the key under which
// a split scratch keeps one Pippenger (its buckets) for the tail MSMs.
inline uint32_t pippenger_wbits(size_t n)
{
    size_t np = (n + WARP_SZ - 1) & ((size_t)0 - WARP_SZ);
    if (np <= 192) return np ? 10 : 17;
    uint32_t lg = 0;
    for (size_t v = np + np / 2; v >>= 1;)
        lg++;
    return std::max<uint32_t>(10, std::min<uint32_t>(lg - 8, 18));
}

// One Pippenger kept between tail MSMs of the same window size: made anew (and its
// buckets allocated) only when the window changes. Destroying an msm_t waits for every
// stream of the GPU, other threads' work included, so one per call would line the
// concurrent split queries up behind each other.
template <class M> struct cached_msm {
    std::unique_ptr<M> m;
    uint32_t wbits = 0;
    M &get(size_t n, int dev)
    {
        uint32_t w = pippenger_wbits(n);
        if (!m || w != wbits) {
            m.reset();
            m.reset(new M(nullptr, n, 0, dev));
            wbits = w;
        }
        return *m;
    }
};

// A stream of the device's highest priority: the split MSMs' short kernels (batch addition
// over the bitmap, the gather) go ahead of the blocks the H MSM has queued, so that the
// split queries, whose host work leaves the GPU waiting, finish while H keeps it busy.
class prio_stream {
    cudaStream_t s_ = nullptr;

public:
    explicit prio_stream(int dev)
    {
        check(cudaSetDevice(dev), "cudaSetDevice");
        int least = 0, greatest = 0;
        check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
        check(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, greatest),
              "cudaStreamCreateWithPriority");
    }
    ~prio_stream()
    {
        if (s_) (void)cudaStreamDestroy(s_);
    }
    prio_stream(const prio_stream &) = delete;
    prio_stream &operator=(const prio_stream &) = delete;
    operator cudaStream_t() const { return s_; }
    void sync() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }
};

// Device buffers one GPU reuses for every split MSM: gathered bases (sized for G2), their
// indices, the bitmap and batch addition's partial sums; its own stream (of the highest
// priority) for the bitmap's batch addition and the gather, so that waiting for them
// waits for nothing else; and the
// tail's Pippenger, per group.
struct split_scratch {
    dev_buf pts, idx, bits, ret;
    std::unique_ptr<prio_stream> stream;
    cached_msm<msm_g1_t> g1;
    cached_msm<msm_g2_t> g2;
    void alloc(int dev, size_t max_n, size_t sm_count)
    {
        pts = dev_buf(dev, std::max<size_t>(max_n, 1) * sizeof(affine_fp2_t));
        idx = dev_buf(dev, std::max<size_t>(max_n, 1) * sizeof(uint32_t));
        bits = dev_buf(dev, bitmap_words(std::max<size_t>(max_n, 1)) * sizeof(uint32_t));
        ret = dev_buf(dev, sm_count * BATCH_ADD_BLOCK_SIZE / WARP_SZ * sizeof(bucket_fp2_t));
        stream.reset(new prio_stream(dev));
    }
    size_t bytes() const { return pts.bytes() + idx.bytes() + bits.bytes() + ret.bytes(); }
    cached_msm<msm_g1_t> &tail(const bucket_t *) { return g1; }
    cached_msm<msm_g2_t> &tail(const bucket_fp2_t *) { return g2; }
};

// out = Σ scalar_k · base_k over one split query whose bases d_pts stay on the GPU. The
// bitmap's batch addition and the gather run on the scratch's stream, the tail's
// Pippenger on sppark's streams; returns when the result is on the host.
template <class bucket_T, class point_T, class affine_T>
void split_msm(const gpu_t &gpu, const typename affine_T::mem_t *d_pts, const split_t &sp,
               split_scratch &sc, point_T &out)
{
    typedef typename affine_T::mem_t affine_h;
    typedef typename bucket_T::mem_t bucket_h;
    const prio_stream &s = *sc.stream;
    out.inf();
    if (sp.n_ones) {
        check(cudaMemcpyAsync(sc.bits.as<uint32_t>(), sp.ones.data(),
                              sp.ones.size() * sizeof(uint32_t), cudaMemcpyHostToDevice, s),
              "bitmap upload");
        void (*kernel)(bucket_h *, const affine_h *, uint32_t, const uint32_t *, bool,
                       uint32_t) = batch_addition<bucket_T, affine_h>;
        bucket_h *ret = sc.ret.as<bucket_h>();
        uint32_t npoints = (uint32_t)sp.n, sid = 0;
        const uint32_t *bits = sc.bits.as<uint32_t>();
        bool accumulate = false;
        void *args[] = {&ret, &d_pts, &npoints, &bits, &accumulate, &sid};
        check(cudaLaunchCooperativeKernel((const void *)kernel, dim3(gpu.sm_count()),
                                          dim3(BATCH_ADD_BLOCK_SIZE), args, 0, s),
              "batch addition kernel");
        std::vector<bucket_T> part(gpu.sm_count() * BATCH_ADD_BLOCK_SIZE / WARP_SZ);
        static_assert(sizeof(bucket_T) == sizeof(bucket_h), "partial sums copy as they are");
        check(cudaMemcpyAsync(part.data(), ret, part.size() * sizeof(bucket_T),
                              cudaMemcpyDeviceToHost, s),
              "partial sums readback");
        s.sync();
        point_T one = sum_up(part);
        out.add(one);
    }
    if (!sp.tail.empty()) {
        size_t t = sp.tail.size();
        check(cudaMemcpyAsync(sc.idx.as<uint32_t>(), sp.idx.data(), t * sizeof(uint32_t),
                              cudaMemcpyHostToDevice, s),
              "index upload");
        gs_gather<affine_h><<<gpu.sm_count() * 4, 256, 0, s>>>(sc.pts.as<affine_h>(), d_pts,
                                                               sc.idx.as<uint32_t>(), t);
        check(cudaGetLastError(), "gather kernel");
        s.sync(); // the Pippenger below reads the gathered bases from other streams
        auto &m = sc.tail((const bucket_T *)nullptr).get(t, gpu.id());
        point_T p;
        // Device points go in as dev_ptr_t<affine_T>: sppark's templated invoke hands them
        // on as `const affine_T*` to the overload that runs; typed as affine_h it would call
        // itself.
        check_rust(m.invoke(p, dev_ptr_t<affine_T>(sc.pts.as<affine_T>()), t, sp.tail.data(),
                            true),
                   "tail MSM");
        out.add(p);
    }
}

} // namespace

#endif // GS_SPLIT_MSM_CUH
