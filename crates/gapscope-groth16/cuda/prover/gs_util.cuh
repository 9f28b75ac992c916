// Host-side helpers of the native prover: errors as statuses, CUDA-event timers, owned
// device and pinned buffers, a parallel copy, and the background drop thread.
// Included by gs_prover.cu (one translation unit), host pass only.
#ifndef GS_UTIL_CUH
#define GS_UTIL_CUH
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

// Runs `f` on a helper thread: the message of its failure, empty if none, for the thread
// that joins it to raise.
template <class F> std::string guarded_message(const char *where, F &&f)
{
    gs_status st = guarded(where, std::forward<F>(f));
    if (!st.code) return std::string();
    std::string m = st.message ? st.message : "error";
    free(st.message);
    return m;
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
    dev_buf &operator=(dev_buf &&o) noexcept
    {
        if (this != &o) {
            reset();
            p_ = o.p_;
            dev_ = o.dev_;
            bytes_ = o.bytes_;
            o.p_ = nullptr;
        }
        return *this;
    }
    // Copies `bytes` from host memory (synchronous).
    void upload(const void *src, size_t bytes)
    {
        check(cudaMemcpy(p_, src, bytes, cudaMemcpyHostToDevice), "copy to the GPU");
    }
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
// milliseconds on its own. A thread per 8 MiB, up to half the cores.
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

#endif // GS_UTIL_CUH
