//! `cupti = true` end to end without a GPU: gapscope starts the program with
//! `CUDA_INJECTION64_PATH` naming its CUPTI injection library (crates/gapscope-cupti-inject,
//! built beside the test binaries as a dev-dependency). cuda/cupti_inject_probe.c stands
//! in for the CUDA driver: it loads the library and calls `InitializeInjection`, as
//! `cuInit` does; the library then says over the span pipe whether it could collect
//! (here: no libcupti or no GPU, so "unavailable" with its reason) and the run keeps the
//! program's spans. A program that writes `G` lines itself gets them as gpu_activity.csv
//! rows. With a GPU, evidence/external_gpu/run_on_h200.sh shows real kernels.

use std::path::{Path, PathBuf};
use std::process::Command;

use gapscope::store::{RepStatus, RunData};

use crate::common;
use common::run_ok;

fn probe(dir: &Path) -> PathBuf {
    let exe = dir.join("cupti_inject_probe");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda/cupti_inject_probe.c");
    let st = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(src)
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(st.success());
    exe
}

fn experiment(dir: &Path, exe: &Path, cupti: bool) -> PathBuf {
    let exp = dir.join("cupti.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"cupti\"\n[workload]\ncommand = [\"{}\"]\ncupti = {cupti}\n\
             gaps = {{ wrapper = \"wrap\" }}\n\
             [run]\nreps = 2\nwarmups = 0\ncounters = false\n\
             [[variant]]\nname = \"probe\"\n\
             [[variant]]\nname = \"lines\"\ncommand = [\"{0}\", \"lines\"]\n",
            exe.display()
        ),
    )
    .unwrap();
    exp
}

fn meta_json(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.join("meta.json")).unwrap()).unwrap()
}

fn gpu_status(meta: &serde_json::Value, variant: &str) -> String {
    meta["external"]["variants"][variant]["gpu_activity"]
        .as_str()
        .unwrap_or_else(|| panic!("no gpu_activity for {variant}: {meta}"))
        .to_string()
}

fn activity_rows(run: &Path) -> Vec<String> {
    std::fs::read_to_string(run.join("gpu_activity.csv"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn cupti_without_a_gpu_is_unavailable_with_the_reason_and_the_spans_stay() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = probe(tmp.path());
    let run = run_ok(tmp.path(), &experiment(tmp.path(), &exe, true), &[]);
    let data = RunData::load(&run).unwrap();
    assert!(
        data.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        data.runs
    );
    for v in ["probe", "lines"] {
        let wraps = data
            .spans
            .iter()
            .filter(|s| s.variant == v && s.name == "wrap")
            .count();
        assert_eq!(wraps, 2, "{v}: the program's spans are recorded");
    }
    let meta = meta_json(&run);
    // The probe loaded the library, which said itself why it could not collect (or, on a
    // host with CUPTI and a GPU, that it started): not gapscope's "never loaded".
    let probe = gpu_status(&meta, "probe");
    assert!(
        probe.starts_with("unavailable: ") || probe.starts_with("cupti: "),
        "{probe}"
    );
    assert!(!probe.contains("never loaded"), "{probe}");
    // The lines variant never loads it: gapscope says why there is nothing.
    let lines = gpu_status(&meta, "lines");
    assert!(lines.starts_with("unavailable: "), "{lines}");
    assert!(lines.contains("never loaded"), "{lines}");
    assert!(lines.contains("libgapscope_cupti_inject"), "{lines}");
    let root = data
        .spans
        .iter()
        .find(|s| s.variant == "probe" && s.parent_id.is_none())
        .unwrap();
    assert!(root.attrs.contains("\"gpu_activity\""), "{}", root.attrs);
    // The gaps chart has a wrapper (gaps.wrapper = "wrap") and no inner time.
    assert_eq!(meta["gaps"]["wrapper"], "wrap");
}

#[test]
fn gpu_activity_lines_of_a_program_become_rows_and_bad_ones_are_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let exe = probe(tmp.path());
    let run = run_ok(tmp.path(), &experiment(tmp.path(), &exe, false), &[]);
    let meta = meta_json(&run);
    let rows = activity_rows(&run);
    assert_eq!(rows.len(), 2, "one kernel per rep of `lines`: {rows:?}");
    assert!(
        rows.iter()
            .all(|r| r.contains(",lines,kernel,") && r.contains("void scale<float>(float*, int)")),
        "{rows:?}"
    );
    let lines = gpu_status(&meta, "lines");
    assert_eq!(lines, "the program's own G lines: 1 record(s)");
    assert!(meta["external"]["variants"]["probe"]["gpu_activity"].is_null());
    let counts = &meta["external"]["variants"]["lines"]["lines"];
    assert_eq!(counts["gpu_records"], 2);
    assert_eq!(counts["unparseable"], 2, "the cut G line of each rep");
    // The kernel lies inside `wrap`, which gets it as its GPU-busy time.
    let data = RunData::load(&run).unwrap();
    let wrap = data
        .spans
        .iter()
        .find(|s| s.variant == "lines" && s.name == "wrap")
        .unwrap();
    let busy = wrap.gpu_busy_ns.get().expect("annotated");
    assert!(
        busy >= 2_000_000 && busy < wrap.duration_ns,
        "{busy} of {}",
        wrap.duration_ns
    );
}
