// Exercises the span C ABI from C++: used by the recorder's FFI test to show that spans
// nest across the boundary in both directions.
#include "gapscope_trace.h"

extern "C" int gapscope_selftest_nested(void (*callback)(void)) {
    gapscope::Span outer("cpp_outer");
    outer.attr("bytes", static_cast<uint64_t>(1) << 20);
    callback();  // Rust opens a span here; it must nest under cpp_outer.
    {
        gapscope::Span inner("cpp_inner");
        inner.attr("gpu_ms", 1.5);
        inner.attr("kernel", "ntt");
    }
    return 0;
}
