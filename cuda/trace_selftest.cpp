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

#include <thread>

// Opens `cpp_parent`, then a `cpp_worker` span on a thread of its own under it, the way
// the native prover's prep and drop threads open theirs.
extern "C" int gapscope_selftest_thread(void) {
    gapscope::Span parent("cpp_parent");
    gapscope_span_ctx ctx = gapscope_span_context();
    if (ctx.id != parent.handle()) return 1;
    int rc = 0;
    std::thread t([ctx, &rc] {
        gapscope::Span w("cpp_worker", ctx);
        if (w.handle() == 0) rc = 2;
        w.attr("rows", static_cast<uint64_t>(7));
    });
    t.join();
    return rc;
}
