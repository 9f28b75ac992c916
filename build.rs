//! Builds the C++ side that needs no GPU (the span ABI self-test). GPU code is compiled
//! only where nvcc is found; see scripts/ and README.md.

fn main() {
    println!("cargo:rerun-if-changed=cuda/gapscope_trace.h");
    println!("cargo:rerun-if-changed=cuda/trace_selftest.cpp");
    cc::Build::new()
        .cpp(true)
        .file("cuda/trace_selftest.cpp")
        .include("cuda")
        .flag_if_supported("-std=c++17")
        .warnings(true)
        .compile("gapscope_trace_selftest");
}
