//! Builds the native side.
//!
//! - Always: the span emitter's two test programs
//!   (cuda/emit_demo.c, cuda/emit_scope_demo.cpp) as executables in OUT_DIR, their paths
//!   in `GAPSCOPE_EMIT_DEMO` and `GAPSCOPE_EMIT_SCOPE_DEMO` for the tests; and the stack
//!   sampler's self-test (cuda/profile_selftest.c).
//! - The NVTX injection library (cuda/nvtx_inject.c) as a shared object, with the host C
//!   compiler.
//!
//! No nvcc runs here: the prover's CUDA is built by its own crate's build script
//! (crates/gapscope-groth16/build.rs), only in builds with the `groth16` feature.

use std::env;
use std::path::PathBuf;

fn main() {
    build_profile_dir();
    println!("cargo:rerun-if-changed=cuda/gapscope_trace.h");
    println!("cargo:rerun-if-changed=cuda/gapscope_emit.h");
    emit_demos();
    nvtx_injection();
    // The stack sampler's self-test: a busy thread started from C (src/profile/tests.rs).
    println!("cargo:rerun-if-changed=cuda/profile_selftest.c");
    cc::Build::new()
        .file("cuda/profile_selftest.c")
        .flag("-fno-omit-frame-pointer")
        .warnings(true)
        .compile("gapscope_profile_selftest");
    // Whether Rust code keeps frame pointers (the sampler's call chains follow them).
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let fp = ["yes", "y", "on", "true"]
        .iter()
        .any(|v| flags.contains(&format!("force-frame-pointers={v}")));
    println!("cargo:rustc-env=GAPSCOPE_FRAME_POINTERS={}", u8::from(fp));
}

/// Compiles the emitter's test programs (gapscope_emit.h from C and from C++) into
/// executables with the host compiler, and tells the tests where they are.
fn emit_demos() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    for (src, exe, var, cpp) in [
        (
            "cuda/emit_demo.c",
            "gapscope-emit-demo",
            "GAPSCOPE_EMIT_DEMO",
            false,
        ),
        (
            "cuda/emit_scope_demo.cpp",
            "gapscope-emit-scope-demo",
            "GAPSCOPE_EMIT_SCOPE_DEMO",
            true,
        ),
    ] {
        println!("cargo:rerun-if-changed={src}");
        let mut b = cc::Build::new();
        b.cpp(cpp).warnings(true).opt_level(1);
        if cpp {
            b.flag_if_supported("-std=c++17");
        }
        let path = out.join(exe);
        let status = b
            .get_compiler()
            .to_command()
            .args(["-Icuda", "-pthread", "-o"])
            .arg(&path)
            .arg(src)
            .status()
            .unwrap_or_else(|e| panic!("cannot run the C compiler for {src}: {e}"));
        assert!(status.success(), "compiling {src} failed ({status})");
        println!("cargo:rustc-env={var}={}", path.display());
    }
}

/// Records `target/<profile>` (three folders above OUT_DIR) as `GAPSCOPE_BUILD_PROFILE_DIR`:
/// cargo builds the CUPTI injection library there (a dependency, in `deps/`), and an
/// installed binary looks for it there when it is not installed beside it
/// (src/capture/cupti_lib.rs).
fn build_profile_dir() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    if let Some(dir) = out.ancestors().nth(3) {
        println!(
            "cargo:rustc-env=GAPSCOPE_BUILD_PROFILE_DIR={}",
            dir.display()
        );
    }
}

/// Builds the NVTX injection library (cuda/nvtx_inject.c) as a shared object with the
/// host C compiler: no CUDA needed. src/capture/inject.rs embeds it.
fn nvtx_injection() {
    let src = "cuda/nvtx_inject.c";
    println!("cargo:rerun-if-changed={src}");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("libgapscope_nvtx.so");
    let mut b = cc::Build::new();
    b.warnings(true).opt_level(2);
    let status = b
        .get_compiler()
        .to_command()
        .args(["-shared", "-fPIC", "-fvisibility=hidden", "-pthread", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {src}: {e}"));
    assert!(status.success(), "compiling {src} failed ({status})");
    println!("cargo:rustc-env=GAPSCOPE_NVTX_LIB={}", out.display());
}
