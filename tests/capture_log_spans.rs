//! `[workload.log_spans]` end to end: a program that prints the motivating case's own
//! timing lines ("GPU prove time: …s" from the kernels, "GPU prove complete gpu_ms=…"
//! from the wrapper once the call returned) gets those phases as spans, and the
//! wrapper's unattributed time is the time its kernels did not cover.

use std::path::{Path, PathBuf};

use gapscope::store::{RepStatus, RunData, SpanRow};

#[allow(dead_code)]
mod common;
use common::{gapscope, run_dir_of};

/// Spins (real work) through an entry phase, the kernels and a drop, timing each like
/// the prover's own logging does, and prints the two lines at the ends of its phases.
const FIXTURE: &str = r#"
now() { local t=${EPOCHREALTIME/./}; echo $((10#$t)); }
spin() { local end=$(( $(now) + $1 )); while (( $(now) < end )); do :; done; }
echo "loading params"
t0=$(now)
spin 20000
k0=$(now)
spin 80000
k=$(( $(now) - k0 ))
printf 'GPU prove time: %d.%06ds\n' $((k / 1000000)) $((k % 1000000)) >&2
spin 40000
w=$(( $(now) - t0 ))
echo "GPU prove complete gpu_ms=$(( w / 1000 ))" >&2
"#;

fn experiment(dir: &Path, body: &str) -> PathBuf {
    let script = dir.join("prover.sh");
    std::fs::write(&script, FIXTURE).unwrap();
    let p = dir.join("logs.toml");
    std::fs::write(
        &p,
        format!(
            "name = \"logs\"\n[workload]\ncommand = [\"bash\", \"{}\"]\n{body}\n\
             [run]\nreps = 2\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
            script.display()
        ),
    )
    .unwrap();
    p
}

const RULES: &str = r#"
[workload.log_spans]
gpu_prove = { duration = 'GPU prove complete gpu_ms=(?P<ms>\d+)' }
kernels = { duration = 'GPU prove time: (?P<s>[0-9.]+)s', parent = "gpu_prove" }
"#;

#[test]
fn the_gap_between_the_two_lines_is_the_wrappers_unattributed_time() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(tmp.path(), RULES);
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let mine: Vec<&SpanRow> = d.spans.iter().filter(|s| s.rep == r.rep).collect();
        let one = |n: &str| -> &SpanRow {
            let v: Vec<_> = mine.iter().filter(|s| s.name == n).collect();
            assert_eq!(v.len(), 1, "one {n}: {mine:?}");
            v[0]
        };
        let (w, k) = (one("gpu_prove"), one("kernels"));
        assert_eq!(k.parent_id, Some(w.span_id));
        assert_eq!(w.duration_ns % 1_000_000, 0, "gpu_ms is whole ms");
        assert!(k.duration_ns >= 80_000_000, "{k:?}");
        assert!(w.duration_ns >= 140_000_000, "{w:?}");
        // The kernels lie inside the wrapper, on its thread: its self time is the rest.
        assert_eq!(w.self_ns, w.duration_ns - k.duration_ns);
        assert!(w.self_ns >= 55_000_000, "entry 20 ms + drop 40 ms: {w:?}");
        let root = mine.iter().find(|s| s.parent_id.is_none()).unwrap();
        assert_eq!(w.parent_id, Some(root.span_id));
        assert!(
            root.attrs.contains("\"unparseable_lines\":0"),
            "{}",
            root.attrs
        );
    }
}

#[test]
fn a_bad_pattern_is_refused_before_any_rep_with_the_entry_named() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = experiment(
        tmp.path(),
        "[workload.log_spans]\nkernels = { duration = 'took (?P<ms>[0-9+ ms' }\n",
    );
    let err = common::run_refused(tmp.path(), &exp);
    assert!(
        err.contains("workload.log_spans.kernels.duration: regex parse error"),
        "{err}"
    );
}

#[test]
fn lines_that_match_badly_are_counted_and_the_rep_still_counts() {
    let tmp = tempfile::tempdir().unwrap();
    // The wrapper's line is read with a group that cannot be a duration.
    let exp = experiment(
        tmp.path(),
        "[workload.log_spans]\ngpu_prove = { duration = 'GPU prove (?P<ms>complete)' }\n",
    );
    let out = gapscope(tmp.path())
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let d = RunData::load(&run_dir_of(&out.get_output().stdout)).unwrap();
    assert!(d.runs.iter().all(|r| r.status == RepStatus::Ok));
    for root in d.spans.iter().filter(|s| s.parent_id.is_none()) {
        assert!(
            root.attrs.contains("\"unparseable_lines\":1"),
            "{}",
            root.attrs
        );
    }
}
