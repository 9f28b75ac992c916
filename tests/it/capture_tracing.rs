//! A program with `tracing` spans and the `gapscope-tracing` layer, run under gapscope:
//! this test binary is the program (the ignored test below), started by `gapscope run`.
//! Its spans arrive in batches and all of them are in the rep, `#[instrument]`ed methods
//! of two modules keep apart (`get::apply`, `set::apply`), a span made on a worker
//! thread under a parent on another thread nests under it, the worker's name comes
//! through, and names with a per-call id are grouped with the id kept.

use std::path::Path;

use gapscope::store::{RepStatus, RunData, SpanRow};
use tracing_subscriber::prelude::*;

use crate::common;
use common::{gapscope, run_dir_of};

mod get {
    #[tracing::instrument]
    pub fn apply(key: u64) -> u64 {
        std::hint::black_box(key * 3)
    }
}

mod set {
    #[tracing::instrument]
    pub fn apply(key: u64) -> u64 {
        std::hint::black_box(key + 1)
    }
}

const CALLS: u64 = 300;

/// The target of the spans made outside the two modules: a crate's root, as a program's
/// main.rs gives them (a one-part target, so their names carry no module). This file is
/// a module of the test binary, whose own paths have two parts.
const ROOT: &str = "capture_tracing";

/// The program: spans on the main thread, and on a worker named as tokio names its
/// workers, each under a parent on the main thread.
#[test]
#[ignore = "the program that capture_tracing runs under gapscope"]
fn program_with_tracing_spans() {
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(gapscope_tracing::layer()),
    )
    .unwrap();
    let request = tracing::info_span!(target: ROOT, "request", n = CALLS);
    let step = tracing::info_span!(target: ROOT, parent: &request, "ProfilerStep#3").entered();
    for i in 0..CALLS {
        set::apply(i);
    }
    let parent = request.clone();
    std::thread::Builder::new()
        .name("tokio-runtime-worker".into())
        .spawn(move || {
            let _h = tracing::info_span!(target: ROOT, parent: &parent, "handle").entered();
            for i in 0..CALLS {
                get::apply(i);
            }
        })
        .unwrap()
        .join()
        .unwrap();
    drop(step);
    drop(request);
}

fn run(dir: &Path) -> RunData {
    let exe = std::env::current_exe().unwrap();
    let exp = dir.join("tracing.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"tracing\"\n[workload]\ncommand = [\"{}\", \"--exact\", \
             \"capture_tracing::program_with_tracing_spans\", \"--ignored\", \"--nocapture\"]\n\
             [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
            exe.display()
        ),
    )
    .unwrap();
    let out = gapscope(dir)
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(dir.join("results"))
        .assert()
        .success();
    RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap()
}

#[test]
fn tracing_spans_arrive_nested_named_and_grouped() {
    let tmp = tempfile::tempdir().unwrap();
    let d = run(tmp.path());
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        d.runs
    );
    let named = |n: &str| -> Vec<&SpanRow> { d.spans.iter().filter(|s| s.name == n).collect() };
    let one = |n: &str| -> &SpanRow {
        let v = named(n);
        assert_eq!(
            v.len(),
            1,
            "{n}: {:?}",
            d.spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        v[0]
    };
    // Every span arrived (the main thread's lines are written at exit).
    assert_eq!(named("get::apply").len() as u64, CALLS);
    assert_eq!(named("set::apply").len() as u64, CALLS);
    let (request, handle, step) = (one("request"), one("handle"), one("ProfilerStep"));
    assert!(step.attrs.contains("\"step\":3"), "{}", step.attrs);
    assert_eq!(step.parent_id, Some(request.span_id));
    // Across threads: the worker's span under the main thread's, by id.
    assert_eq!(handle.parent_id, Some(request.span_id));
    assert_ne!(handle.thread_id, request.thread_id);
    assert_eq!(handle.thread_name, "tokio-runtime-worker");
    let gets = named("get::apply");
    assert!(gets.iter().all(|g| g.parent_id == Some(handle.span_id)));
    assert!(gets.iter().all(|g| g.thread_name == "tokio-runtime-worker"));
    let sets = named("set::apply");
    assert!(sets.iter().all(|s| s.parent_id == Some(step.span_id)));
    assert!(sets[0].attrs.contains("\"key\":0"), "{}", sets[0].attrs);
    for s in [request, handle, gets[0]] {
        assert!(s.attrs.contains("\"via\":\"tracing\""), "{}", s.attrs);
    }
}
