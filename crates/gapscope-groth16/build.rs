//! Builds the prover's CUDA.
//!
//! - Where nvcc is found (`NVCC`, then `PATH`, then the project-local toolkit that
//!   scripts/cuda-toolkit.sh installs in the workspace's .toolchain/cuda): cuda/*.cu (the
//!   GPU self-test's probe), for the GPUs listed in `GENCODE`, and the cfg `gapscope_cuda`
//!   that the Rust side keys its GPU code on. Without nvcc no GPU code is built, a
//!   `cargo:warning` says so, and everything else (tests included) works as before.
//! - With feature `cuda`: the native Groth16 prover (cuda/prover/) over sppark's headers
//!   (`DEP_SPPARK_ROOT`) and blst's (`DEP_BLST_C_SRC`), and the cfg `gapscope_prover`.
//! - Features that cannot exist without CUDA (`cuda`, `supraseal`) stop the build with the
//!   two commands that install the toolkit and rebuild.
//!
//! The recorder's C ABI (`cuda/gapscope_trace.h`) stays at the workspace's root, where
//! C++/CUDA code and forks include it from.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Project-local toolkit, relative to the workspace (scripts/cuda-toolkit.sh installs it).
const LOCAL_NVCC: &str = ".toolchain/cuda/nvidia/cu13/bin/nvcc";
/// The workspace root, relative to this crate's manifest.
const WORKSPACE: &str = "../..";
/// Oldest toolkit that knows sm_90 (the H200) and the newest PTX the GPU host's driver
/// (580, CUDA 13.0) can JIT. A newer toolkit still builds; the warning says what to expect.
const MIN_CUDA: (u32, u32) = (12, 0);
const DRIVER_CUDA: (u32, u32) = (13, 0);

/// (nvcc -gencode value, architecture probed with `-arch=`). sm_90 is the H200's, as SASS
/// plus PTX so a newer driver can still JIT it; the rest is sppark's list (sm_80 + PTX,
/// sm_75, compute_100 PTX, sm_120), each kept only where this nvcc supports it.
const GENCODE: &[(&str, &str)] = &[
    ("arch=compute_90,code=[sm_90,compute_90]", "sm_90"),
    ("arch=compute_80,code=[sm_80,compute_80]", "sm_80"),
    ("arch=compute_75,code=sm_75", "sm_75"),
    ("arch=compute_100,code=compute_100", "sm_100"),
    ("arch=compute_120,code=sm_120", "sm_120"),
];

const INSTALL_HINT: &str =
    "install the CUDA 13.0 compiler with `eval \"$(scripts/cuda-toolkit.sh)\"` \
     (no GPU needed), then rebuild; docs/gpu.md";

fn main() {
    // Without the prover (the harness built with --no-default-features) the crate is its
    // knobs and span names: nothing to compile, and nvcc is never looked for.
    if env::var_os("CARGO_FEATURE_PROVE").is_none() {
        return;
    }
    println!("cargo::rustc-check-cfg=cfg(gapscope_cuda)");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.join(WORKSPACE);
    let local = workspace.join(LOCAL_NVCC);
    // Installing the toolkit rewrites this stamp, which brings the GPU code in.
    let stamp = workspace.join(".toolchain/cuda/.installed");
    if stamp.exists() {
        println!("cargo:rerun-if-changed={}", stamp.display());
    }
    println!("cargo::rustc-check-cfg=cfg(gapscope_prover)");
    let prover = env::var_os("CARGO_FEATURE_CUDA").is_some();
    let needs_cuda = prover || env::var_os("CARGO_FEATURE_SUPRASEAL").is_some();

    let found = match find_nvcc(&local) {
        Ok(f) => f,
        Err(why) => {
            if needs_cuda {
                fail(&format!(
                    "features `cuda` and `supraseal` need the CUDA compiler: {why}; {INSTALL_HINT}"
                ));
            }
            println!("cargo:warning=building without GPU code: {why}; to build it, {INSTALL_HINT}");
            return;
        }
    };
    if needs_cuda && found.source == Source::Local {
        // sppark's build script looks only at NVCC and PATH.
        fail(&format!(
            "features `cuda` and `supraseal` need nvcc on PATH or in NVCC (found only {}); run \
             `eval \"$(scripts/cuda-toolkit.sh)\"` in this shell, then rebuild",
            found.path.display()
        ));
    }
    let version = match nvcc_version(&found.path) {
        Ok(v) => v,
        Err(why) => fail(&format!(
            "{} is not a usable nvcc: {why}; {INSTALL_HINT}",
            found.path.display()
        )),
    };
    if version < MIN_CUDA {
        fail(&format!(
            "{} is CUDA {}.{}; gapscope needs CUDA {}.{} or newer (sm_90); {INSTALL_HINT}",
            found.path.display(),
            version.0,
            version.1,
            MIN_CUDA.0,
            MIN_CUDA.1
        ));
    }
    if version > DRIVER_CUDA {
        println!(
            "cargo:warning=nvcc is CUDA {}.{}: the GPU host's driver 580 runs CUDA {}.{} code; sm_90 \
             machine code still runs there, but its PTX will not JIT",
            version.0, version.1, DRIVER_CUDA.0, DRIVER_CUDA.1
        );
    }
    compile_cuda(&manifest, &workspace, &found.path);
    println!("cargo:rustc-cfg=gapscope_cuda");
    if prover {
        compile_prover(&manifest, &workspace, &found.path);
        println!("cargo:rustc-cfg=gapscope_prover");
    }
}

/// The native prover: one translation unit over sppark's NTT and MSM templates. Built for
/// the H200 (sm_90 machine code) plus compute_80 PTX that newer GPUs JIT: each further
/// machine-code target adds about a minute of nvcc per build on a 2-core machine.
fn compile_prover(manifest: &Path, workspace: &Path, nvcc: &Path) {
    let dir = manifest.join("cuda/prover");
    println!("cargo:rerun-if-changed={}", dir.display());
    let root = env::var_os("DEP_SPPARK_ROOT")
        .unwrap_or_else(|| fail("feature `cuda`: sppark did not export DEP_SPPARK_ROOT"));
    let blst = env::var_os("DEP_BLST_C_SRC")
        .unwrap_or_else(|| fail("feature `cuda`: blst did not export DEP_BLST_C_SRC"));
    let mut b = nvcc_build(workspace, nvcc);
    b.include(&root)
        .include(&blst)
        .define("FEATURE_BLS12_381", None)
        .define("TAKE_RESPONSIBILITY_FOR_ERROR_MESSAGE", None)
        // Our own prover only ever links with the recorder: strong references, so the
        // linker keeps the recorder's C ABI (cuda/gapscope_trace.h).
        .define("GAPSCOPE_TRACE_STRONG", None)
        .flag("-Xcompiler")
        .flag("-Wno-unused-function")
        .flag("-gencode")
        .flag("arch=compute_90,code=sm_90")
        .flag("-gencode")
        .flag("arch=compute_80,code=compute_80");
    // blst's host-side field arithmetic must use the same instructions blst was built
    // with; blst's build script enables ADX when the build host has it.
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("adx") {
        b.define("__ADX__", None);
    }
    b.file(dir.join("gs_prover.cu"));
    b.compile("gapscope_prover");
}

#[derive(Debug, PartialEq, Eq)]
enum Source {
    Env,
    Path,
    Local,
}

struct Found {
    path: PathBuf,
    source: Source,
}

fn fail(msg: &str) -> ! {
    // A panic would bury the message under a backtrace hint; `cargo::error` needs 1.84+.
    eprintln!("error: {msg}");
    println!("cargo:warning={msg}");
    std::process::exit(1);
}

/// `NVCC` (a path or a command name; `off` disables GPU code), then `nvcc` on `PATH`, then
/// the project-local toolkit.
fn find_nvcc(local: &Path) -> Result<Found, String> {
    if let Some(v) = env::var_os("NVCC") {
        if v == "off" {
            return Err("NVCC=off".into());
        }
        let p = PathBuf::from(&v);
        return match which(&p) {
            Some(path) => Ok(Found {
                path,
                source: Source::Env,
            }),
            None => Err(format!(
                "NVCC={} does not exist or is not executable",
                p.display()
            )),
        };
    }
    if let Some(path) = which(Path::new("nvcc")) {
        return Ok(Found {
            path,
            source: Source::Path,
        });
    }
    if is_executable(local) {
        return Ok(Found {
            path: local.to_path_buf(),
            source: Source::Local,
        });
    }
    Err("nvcc not found (looked at NVCC, PATH and .toolchain/cuda)".into())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn which(p: &Path) -> Option<PathBuf> {
    if p.components().count() > 1 {
        return is_executable(p).then(|| p.to_path_buf());
    }
    env::split_paths(&env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|c| is_executable(c))
}

/// Parses "release X.Y," from `nvcc --version`.
fn nvcc_version(nvcc: &Path) -> Result<(u32, u32), String> {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("`--version` exited with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let rest = text
        .split("release ")
        .nth(1)
        .ok_or_else(|| format!("no \"release X.Y\" in {text:?}"))?;
    let ver = rest.split(',').next().unwrap_or_default().trim();
    let mut it = ver.split('.').map(|s| s.parse::<u32>());
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b))) => Ok((a, b)),
        _ => Err(format!("cannot parse CUDA version {ver:?}")),
    }
}

fn arch_supported(nvcc: &Path, arch: &str) -> bool {
    Command::new(nvcc)
        .arg(format!("-arch={arch}"))
        .args(["--dryrun", "-c", "-x", "cu", "/dev/null"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// An nvcc build of our CUDA code: cudart linked statically, headers from this crate's
/// cuda/ and the workspace's (the recorder's ABI), C++17.
fn nvcc_build(workspace: &Path, nvcc: &Path) -> cc::Build {
    // cc runs the CUDA compiler named by NVCC (`compiler()` would treat it as a host compiler).
    env::set_var("NVCC", nvcc);
    let mut b = cc::Build::new();
    // No `-G` even in a profile with debug info (cc adds it then): debug device code is
    // unoptimised and changes timing; `-lineinfo` keeps source lines for profilers.
    b.cuda(true)
        .cudart("static")
        .debug(false)
        .include("cuda")
        .include(workspace.join("cuda"))
        .flag("-std=c++17")
        .flag("-lineinfo");
    b
}

fn compile_cuda(manifest: &Path, workspace: &Path, nvcc: &Path) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest.join("cuda"))
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cu"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    println!("cargo:rerun-if-changed=cuda");
    if files.is_empty() {
        return;
    }
    let mut b = nvcc_build(workspace, nvcc);
    for (gencode, arch) in GENCODE {
        if arch_supported(nvcc, arch) {
            b.flag("-gencode").flag(gencode);
        } else if *arch == "sm_90" {
            fail(&format!(
                "{} cannot compile for sm_90 (the H200); {INSTALL_HINT}",
                nvcc.display()
            ));
        }
    }
    for f in &files {
        b.file(f);
    }
    b.compile("gapscope_cuda");
    // cc derives the cudart search path from a system install's layout (targets/<arch>/lib);
    // the PyPI toolkit keeps it in lib/, a system install may use lib64/.
    if let Some(root) = nvcc.parent().and_then(Path::parent) {
        for lib in ["lib64", "lib"] {
            let d = root.join(lib);
            if d.join("libcudart_static.a").exists() {
                println!("cargo:rustc-link-search=native={}", d.display());
            }
        }
    }
}
