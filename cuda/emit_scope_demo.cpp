// The C++ side of gapscope_emit.h: RAII scopes, nested, with attributes, on two
// threads. build.rs compiles it as `gapscope-emit-scope-demo` for gapscope's tests.
#include "gapscope_emit.h"

#include <cstdio>
#include <thread>

int main() {
    gapscope::emit::Scope outer("outer");
    outer.attr("answer", 42);
    std::thread t([] {
        gapscope::emit::Scope s("on_thread");
        s.attr("label", "worker thread");
    });
    {
        gapscope::emit::Scope inner("inner");
        inner.attr("share", 0.5);
        inner.attr("bytes", sizeof(long) * 1024);  // size_t
        inner.attr("delta", static_cast<int64_t>(-3));
        inner.attr("ok", true);
        std::puts("emit-scope-demo: inside inner");
    }
    t.join();
    return 0;
}
