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

#include <cstdint>

// A loop whose instruction count is known: on x86-64, `dec; jnz` per iteration, so n
// iterations execute 2n instructions and n conditional branches. Emulated counters are
// checked against it (tests/emulated_cli.rs): the emulator's own count for this function
// and the span around its call must agree.
extern "C" __attribute__((noinline)) uint64_t gapscope_selftest_known_loop(uint64_t n) {
#if defined(__x86_64__)
    uint64_t left = n;
    if (left > 0) {
        __asm__ volatile("1: dec %0\n\tjnz 1b" : "+r"(left) : : "cc");
    }
    return n;
#else
    volatile uint64_t i = 0;
    while (i < n) i = i + 1;
    return i;
#endif
}

// Opens `empty` (nothing inside) and then `loop` around gapscope_selftest_known_loop(n),
// both through the C ABI: the difference of their counts is the loop's call.
extern "C" uint64_t gapscope_selftest_loop_spans(uint64_t n) {
    uint64_t r = 0;
    {
        gapscope::Span s("known_loop_empty");
        r += gapscope_selftest_known_loop(0);
    }
    {
        gapscope::Span s("known_loop");
        r += gapscope_selftest_known_loop(n);
    }
    return r;
}
