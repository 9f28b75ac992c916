/* gapscope GPU timer: CUDA events around a group of launches, attached to a span.
 *
 * The span recorder (gapscope_trace.h) measures host time. Where the host only enqueues
 * work, the GPU's own time of that work is what CUDA events measure: a GpuTimer records
 * an event before and after a group of launches on a stream and, when finished, sets
 * the elapsed milliseconds as an attribute ("gpu_ms" unless named otherwise) of the span
 * that encloses it.
 *
 *     {
 *         gapscope::Span span("msm_h");
 *         gapscope::GpuTimer timer(stream);   // start event on `stream`
 *         bucket_sum<<<g, b, 0, stream>>>(...);
 *         accumulate<<<g, b, 0, stream>>>(...);
 *     }   // ~GpuTimer: stop event, wait for it, span "msm_h" gets gpu_ms
 *
 * - The enclosing span is the innermost gapscope span open on this thread when the timer
 *   is made (gapscope_span_current()), or the handle passed in.
 * - Several segments add up: stop() and start() again around launches in a loop, and the
 *   attribute is the sum of the segments.
 * - finish() waits for the last stop event, i.e. synchronises the host with `stream` at
 *   that point. Put timers where the code waits for the GPU anyway, or call stop() early
 *   and finish() where it waits. The destructor finishes a timer not yet finished.
 * - Nothing throws: a CUDA error while timing leaves the attribute unset and sets
 *   "<key>_error" to the error's name instead.
 *
 * Host code only (the CUDA runtime C API); include it from .cu or .cpp files.
 */
#ifndef GAPSCOPE_GPU_TIMER_CUH
#define GAPSCOPE_GPU_TIMER_CUH

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "gapscope_trace.h"

namespace gapscope {

class GpuTimer {
public:
    explicit GpuTimer(cudaStream_t stream, const char *key = "gpu_ms",
                      uint64_t span = gapscope_span_current())
        : stream_(stream), key_(key ? key : "gpu_ms"), span_(span) {
        start();
    }

    ~GpuTimer() {
        finish();
        for (cudaEvent_t e : events_) cudaEventDestroy(e);
    }

    GpuTimer(const GpuTimer &) = delete;
    GpuTimer &operator=(const GpuTimer &) = delete;

    /* Begins a segment (no-op while one is open or after finish()). */
    void start() {
        if (finished_ || running_ || error_ != cudaSuccess) return;
        cudaEvent_t e = record();
        if (e == nullptr) return;
        running_ = true;
    }

    /* Ends the open segment (no-op when none is open). */
    void stop() {
        if (!running_) return;
        running_ = false;
        record();
    }

    /* Ends the open segment, waits for it, attaches the sum of all segments to the span
     * and returns it in milliseconds (negative on a CUDA error). Idempotent. */
    double finish() {
        if (finished_) return total_ms_;
        stop();
        finished_ = true;
        total_ms_ = 0.0;
        if (error_ == cudaSuccess && events_.size() >= 2) {
            error_ = cudaEventSynchronize(events_.back());
            for (std::size_t i = 0; error_ == cudaSuccess && i + 1 < events_.size(); i += 2) {
                float ms = 0.0f;
                error_ = cudaEventElapsedTime(&ms, events_[i], events_[i + 1]);
                total_ms_ += ms;
            }
        }
        if (error_ != cudaSuccess) {
            total_ms_ = -1.0;
            std::string k = key_ + "_error";
            gapscope_span_attr_str(span_, k.c_str(), cudaGetErrorName(error_));
        } else if (events_.size() >= 2) {
            gapscope_span_attr_f64(span_, key_.c_str(), total_ms_);
        }
        return total_ms_;
    }

    uint64_t span() const { return span_; }

private:
    /* Creates and records one event on the stream; nullptr (and error_ set) on failure. */
    cudaEvent_t record() {
        cudaEvent_t e = nullptr;
        cudaError_t rc = cudaEventCreate(&e);
        if (rc == cudaSuccess) {
            events_.push_back(e);
            rc = cudaEventRecord(e, stream_);
        }
        if (rc != cudaSuccess) {
            error_ = rc;
            running_ = false;
            return nullptr;
        }
        return e;
    }

    cudaStream_t stream_;
    std::string key_;
    uint64_t span_;
    std::vector<cudaEvent_t> events_;  /* start, stop, start, stop, ... */
    bool running_ = false;
    bool finished_ = false;
    cudaError_t error_ = cudaSuccess;
    double total_ms_ = 0.0;
};

}  // namespace gapscope

#endif /* GAPSCOPE_GPU_TIMER_CUH */
