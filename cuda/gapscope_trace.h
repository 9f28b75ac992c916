/* gapscope span recorder: C ABI for C, C++ and CUDA host code. A standalone header:
 * copy it into any project, which then needs nothing else of gapscope.
 *
 * The recorder's functions are declared as weak symbols. In a program without gapscope
 * they stay unresolved (null), and every wrapper below (gapscope_enter, gapscope_exit,
 * ..., and the C++ class gapscope::Span) does nothing and returns 0: the code still
 * builds, links and runs anywhere. Linked into a gapscope worker (a crate built by
 * `gapscope run` with a `patch` variant, or gapscope's own C++), they resolve to the
 * recorder, and spans opened here nest inside whatever gapscope span is open on the
 * calling thread (Rust or C++), e.g. under gpu_prove, and close in LIFO order.
 *
 * Handles are span ids; 0 means "no span" and is accepted (and ignored) by every call.
 * Timestamps are CLOCK_MONOTONIC nanoseconds.
 *
 *     #include "gapscope_trace.h"
 *     gapscope::Span s("tail_msm");               // C++: closes at the end of the scope
 *     uint64_t h = gapscope_enter("prep"); ...; gapscope_exit(h);      // C
 *
 * Call the recorder through the wrappers: the raw gapscope_span_* functions are null
 * outside gapscope. Define GAPSCOPE_TRACE_STRONG before including it to declare them as
 * ordinary (strong) symbols instead, for code that is only ever linked with gapscope.
 */
#ifndef GAPSCOPE_TRACE_H
#define GAPSCOPE_TRACE_H

#include <stdint.h>

#if defined(GAPSCOPE_TRACE_STRONG) || !(defined(__GNUC__) || defined(__clang__))
#define GAPSCOPE_TRACE_WEAK
#else
#define GAPSCOPE_TRACE_WEAK __attribute__((weak))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Where a span lives: its id and the id of its trace's root. Lets another thread open a
 * child of a span it did not open (a prep or drop thread under the caller's span). */
typedef struct {
    uint64_t id;
    uint64_t trace;
} gapscope_span_ctx;

/* The recorder (src/trace/ffi.rs). Null outside gapscope: use the wrappers below. */
GAPSCOPE_TRACE_WEAK uint64_t gapscope_span_enter(const char *name);
/* Innermost span open on the calling thread ({0, 0} if none). */
GAPSCOPE_TRACE_WEAK gapscope_span_ctx gapscope_span_context(void);
/* Opens a span on the calling thread as a child of `parent` (which may live on another
 * thread); with parent.id == 0 it behaves as gapscope_span_enter. */
GAPSCOPE_TRACE_WEAK uint64_t gapscope_span_enter_under(const char *name, gapscope_span_ctx parent);
GAPSCOPE_TRACE_WEAK int32_t gapscope_span_exit(uint64_t handle);
GAPSCOPE_TRACE_WEAK void gapscope_span_attr_u64(uint64_t handle, const char *key, uint64_t value);
GAPSCOPE_TRACE_WEAK void gapscope_span_attr_f64(uint64_t handle, const char *key, double value);
GAPSCOPE_TRACE_WEAK void gapscope_span_attr_str(uint64_t handle, const char *key, const char *value);
/* Innermost span open on the calling thread (0 if none). */
GAPSCOPE_TRACE_WEAK uint64_t gapscope_span_current(void);
GAPSCOPE_TRACE_WEAK uint64_t gapscope_now_ns(void);

/* 1 when the recorder is linked in (a gapscope worker), else 0. */
static inline int gapscope_present(void) { return gapscope_span_enter != 0; }

static inline uint64_t gapscope_enter(const char *name)
{
    return gapscope_span_enter ? gapscope_span_enter(name) : 0;
}
static inline gapscope_span_ctx gapscope_context(void)
{
    gapscope_span_ctx none = {0, 0};
    return gapscope_span_context ? gapscope_span_context() : none;
}
static inline uint64_t gapscope_enter_under(const char *name, gapscope_span_ctx parent)
{
    return gapscope_span_enter_under ? gapscope_span_enter_under(name, parent) : 0;
}
static inline int32_t gapscope_exit(uint64_t handle)
{
    return gapscope_span_exit ? gapscope_span_exit(handle) : 0;
}
static inline void gapscope_attr_u64(uint64_t handle, const char *key, uint64_t value)
{
    if (gapscope_span_attr_u64) gapscope_span_attr_u64(handle, key, value);
}
static inline void gapscope_attr_f64(uint64_t handle, const char *key, double value)
{
    if (gapscope_span_attr_f64) gapscope_span_attr_f64(handle, key, value);
}
static inline void gapscope_attr_str(uint64_t handle, const char *key, const char *value)
{
    if (gapscope_span_attr_str) gapscope_span_attr_str(handle, key, value);
}

#ifdef __cplusplus
} /* extern "C" */

namespace gapscope {
/* RAII span: opens on construction, closes on destruction (exceptions included), or
 * earlier with end(). Outside gapscope it does nothing. */
class Span {
public:
    explicit Span(const char *name) : h_(gapscope_enter(name)) {}
    Span(const char *name, gapscope_span_ctx parent) : h_(gapscope_enter_under(name, parent)) {}
    ~Span() { end(); }
    Span(const Span &) = delete;
    Span &operator=(const Span &) = delete;
    void attr(const char *k, uint64_t v) const { gapscope_attr_u64(h_, k, v); }
    void attr(const char *k, double v) const { gapscope_attr_f64(h_, k, v); }
    void attr(const char *k, const char *v) const { gapscope_attr_str(h_, k, v); }
    /* Closes the span now (once; later calls and the destructor do nothing). */
    void end() { if (h_) { gapscope_exit(h_); h_ = 0; } }
    uint64_t handle() const { return h_; }
private:
    uint64_t h_;
};
} /* namespace gapscope */
#endif

#endif /* GAPSCOPE_TRACE_H */
