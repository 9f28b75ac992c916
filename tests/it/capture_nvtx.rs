//! `nvtx = true` end to end: a C program that uses only NVTX v3's header-only API
//! (cuda/nvtx_demo.c) runs under gapscope, whose injection library turns its ranges into
//! spans. NVTX's headers are NVIDIA's and not in this repository: the test takes them
//! from `NVTX_INCLUDE` (a folder holding nvtx3/), else from the `nvidia-nvtx` wheel on
//! PyPI, fetched with pip into the test's temporary folder.

use std::path::{Path, PathBuf};
use std::process::Command;

use gapscope::store::{RepStatus, RunData, SpanRow};

use crate::common;
use common::{gapscope, run_dir_of};

fn nvtx_include() -> PathBuf {
    if let Some(p) = std::env::var_os("NVTX_INCLUDE") {
        return PathBuf::from(p);
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nvtx-wheel");
    let inc = dir.join("nvidia/cu13/include");
    if inc.join("nvtx3/nvToolsExt.h").is_file() {
        return inc;
    }
    let ok = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "-q", "-d"])
        .arg(&dir)
        .arg("nvidia-nvtx")
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "NVTX headers: set NVTX_INCLUDE to a folder with nvtx3/, or let pip fetch nvidia-nvtx"
    );
    let unzip = "import glob,zipfile,sys; zipfile.ZipFile(glob.glob(sys.argv[1]+'/*.whl')[0]).extractall(sys.argv[1])";
    let ok = Command::new("python3")
        .args(["-c", unzip])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok && inc.join("nvtx3/nvToolsExt.h").is_file(),
        "no nvtx3 headers in the wheel"
    );
    inc
}

fn demo(dir: &Path) -> PathBuf {
    let exe = dir.join("nvtx_demo");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/nvtx_demo.c");
    let st = Command::new("cc")
        .arg("-I")
        .arg(nvtx_include())
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(src)
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(st.success());
    exe
}

fn run(dir: &Path, exe: &Path, env: &[(&str, &str)]) -> RunData {
    run_expecting(dir, exe, env, 0)
}

/// As [`run`], expecting exit status `code` (5: a variant had no successful rep).
fn run_expecting(dir: &Path, exe: &Path, env: &[(&str, &str)], code: i32) -> RunData {
    let exp = dir.join("nvtx.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"nvtx\"\n[workload]\ncommand = [\"{}\"]\nnvtx = true\n\
             [run]\nreps = 1\nwarmups = 0\n\
             [[variant]]\nname = \"plain\"\n\
             [[variant]]\nname = \"open\"\ncommand = [\"{0}\", \"open\"]\n\
             [[variant]]\nname = \"fork\"\ncommand = [\"{0}\", \"fork\"]\n",
            exe.display()
        ),
    )
    .unwrap();
    let mut cmd = gapscope(dir);
    cmd.arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(dir.join("results"))
        .env("XDG_CACHE_HOME", dir.join("cache"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.assert().code(code);
    RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap()
}

fn spans<'a>(d: &'a RunData, variant: &str) -> Vec<&'a SpanRow> {
    d.spans.iter().filter(|s| s.variant == variant).collect()
}

#[test]
fn nvtx_ranges_of_an_unmodified_program_become_nested_spans() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = demo(tmp.path());
    let d = run(tmp.path(), &exe, &[]);
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        d.runs
    );
    let pid_of = |v: &str| d.runs.iter().find(|r| r.variant == v).unwrap().pid as u64;
    for v in ["plain", "open", "fork"] {
        let s = spans(&d, v);
        let one = |n: &str| {
            *s.iter()
                .find(|x| x.name == n)
                .unwrap_or_else(|| panic!("{n} in {v}: {s:?}"))
        };
        let (outer, inner, dom) = (one("outer"), one("inner"), one("domain_range"));
        assert_eq!(inner.parent_id, Some(outer.span_id));
        assert!(inner.duration_ns >= 20_000_000);
        assert_eq!(dom.parent_id, Some(outer.span_id));
        assert!(
            dom.attrs.contains("\"payload\":4096") && dom.attrs.contains("gs_demo"),
            "{}",
            dom.attrs
        );
        let h = one("handoff");
        assert_eq!(
            h.thread_id,
            pid_of(v),
            "a start/end range is on its starting thread"
        );
        assert!(h.duration_ns >= 5_000_000);
        assert!(!outer.attrs.contains("unmatched_begin"));
    }
    let open = spans(&d, "open");
    let pushed = open.iter().find(|s| s.name == "left_pushed").unwrap();
    assert!(
        pushed.attrs.contains("\"unmatched_begin\":true"),
        "{}",
        pushed.attrs
    );
    let started = open.iter().find(|s| s.name == "left_started").unwrap();
    assert!(
        started.attrs.contains("nvtx_open_at_exit"),
        "{}",
        started.attrs
    );
    let fork = spans(&d, "fork");
    let child = fork.iter().find(|s| s.name == "child_range").unwrap();
    assert_ne!(
        child.thread_id,
        pid_of("fork"),
        "the child's range is on the child's thread"
    );
    // The child's extra pop closed nothing of the parent's.
    let root = fork.iter().find(|s| s.parent_id.is_none()).unwrap();
    assert!(
        root.attrs.contains("\"unmatched_ends\":0"),
        "{}",
        root.attrs
    );
}

/// By default a range's process CPU is interpolated from gapscope's readings of the
/// program's CPU clock (its lines carry none: the clock is a system call per end);
/// `GAPSCOPE_NVTX_CPU=exact` makes every B and E line carry the clock's reading, and
/// then the range's CPU is their difference.
#[test]
fn process_cpu_is_interpolated_unless_exact_is_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = demo(tmp.path());
    for (env, exact) in [
        (&[][..], false),
        (&[("GAPSCOPE_NVTX_CPU", "exact")][..], true),
    ] {
        let dir = tmp.path().join(if exact { "exact" } else { "default" });
        std::fs::create_dir_all(&dir).unwrap();
        let d = run(&dir, &exe, env);
        let inner = d
            .spans
            .iter()
            .find(|s| s.variant == "plain" && s.name == "inner")
            .unwrap();
        assert!(inner.process_cpu_ns.is_some(), "{inner:?}");
        assert_eq!(
            inner.attrs.contains("interpolated"),
            !exact,
            "exact {exact}: {}",
            inner.attrs
        );
        // The inner range busy-waits 20 ms of its thread's CPU time: at least that is CPU.
        assert!(
            inner.process_cpu_ns.get().unwrap() >= 5_000_000,
            "{inner:?}"
        );
    }
}

#[test]
fn a_missing_injection_library_fails_the_reps_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    // No program needs building: the reps fail before the spawn.
    // Every rep fails, so the run exits 5 and keeps its folder.
    let d = run_expecting(
        tmp.path(),
        Path::new("/bin/true"),
        &[("GAPSCOPE_NVTX_LIBRARY", "/nonexistent/libnvtx.so")],
        5,
    );
    assert_eq!(d.runs.len(), 3);
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Failed);
        assert!(
            r.error
                .contains("GAPSCOPE_NVTX_LIBRARY=/nonexistent/libnvtx.so does not exist"),
            "{}",
            r.error
        );
    }
}
