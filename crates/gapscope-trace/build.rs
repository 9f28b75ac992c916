//! The recorder's native side: callgrind's client requests (native/callgrind_requests.c)
//! over valgrind's headers where they are installed, and the C++ self-test of the span
//! ABI (native/trace_selftest.cpp, linked only by the tests). The ABI's header stays at
//! the workspace's `cuda/gapscope_trace.h`, the path C++/CUDA code and forks include.

fn main() {
    let header_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../cuda");
    println!("cargo:rerun-if-changed=native/trace_selftest.cpp");
    println!(
        "cargo:rerun-if-changed={}",
        header_dir.join("gapscope_trace.h").display()
    );
    cc::Build::new()
        .cpp(true)
        .file("native/trace_selftest.cpp")
        .include(&header_dir)
        .flag_if_supported("-std=c++17")
        .warnings(true)
        .compile("gapscope_trace_selftest");
    // Without valgrind's headers the functions are no-ops that say so at run time.
    println!("cargo:rerun-if-changed=native/callgrind_requests.c");
    cc::Build::new()
        .file("native/callgrind_requests.c")
        .warnings(true)
        .compile("gapscope_callgrind");
}
