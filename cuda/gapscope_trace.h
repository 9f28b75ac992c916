/* gapscope span recorder: C ABI for C++/CUDA host code.
 *
 * Spans opened here nest inside whatever gapscope span is open on the calling thread
 * (Rust or C++), and close in LIFO order. Handles are span ids; 0 means "no span" and is
 * accepted (and ignored) by every call. Timestamps are CLOCK_MONOTONIC nanoseconds.
 */
#ifndef GAPSCOPE_TRACE_H
#define GAPSCOPE_TRACE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint64_t gapscope_span_enter(const char *name);
/* Where a span lives: its id and the id of its trace's root. Lets another thread open a
 * child of a span it did not open (a prep or drop thread under the caller's span). */
typedef struct {
    uint64_t id;
    uint64_t trace;
} gapscope_span_ctx;
/* Innermost span open on the calling thread ({0, 0} if none). */
gapscope_span_ctx gapscope_span_context(void);
/* Opens a span on the calling thread as a child of `parent` (which may live on another
 * thread); with parent.id == 0 it behaves as gapscope_span_enter. */
uint64_t gapscope_span_enter_under(const char *name, gapscope_span_ctx parent);
int32_t gapscope_span_exit(uint64_t handle);
void gapscope_span_attr_u64(uint64_t handle, const char *key, uint64_t value);
void gapscope_span_attr_f64(uint64_t handle, const char *key, double value);
void gapscope_span_attr_str(uint64_t handle, const char *key, const char *value);
/* Innermost span open on the calling thread (0 if none). */
uint64_t gapscope_span_current(void);
uint64_t gapscope_now_ns(void);

#ifdef __cplusplus
} /* extern "C" */

namespace gapscope {
/* RAII span: opens on construction, closes on destruction (exceptions included). */
class Span {
public:
    explicit Span(const char *name) : h_(gapscope_span_enter(name)) {}
    Span(const char *name, gapscope_span_ctx parent) : h_(gapscope_span_enter_under(name, parent)) {}
    ~Span() { gapscope_span_exit(h_); }
    Span(const Span &) = delete;
    Span &operator=(const Span &) = delete;
    void attr(const char *k, uint64_t v) const { gapscope_span_attr_u64(h_, k, v); }
    void attr(const char *k, double v) const { gapscope_span_attr_f64(h_, k, v); }
    void attr(const char *k, const char *v) const { gapscope_span_attr_str(h_, k, v); }
    uint64_t handle() const { return h_; }
private:
    uint64_t h_;
};
} /* namespace gapscope */
#endif

#endif /* GAPSCOPE_TRACE_H */
