//! The diff's headline, pinned on run folders with known effects: synthetic runs written
//! deterministically by the store's own writer (an improvement, a regression, an A/A run,
//! a change too small for its noise, a drop moved off the critical path) and the
//! committed quickstart run recorded on the CPU backend. Each test pins the three lines
//! exactly, so a change of wording or of the selection shows here.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gapscope::analysis::synthetic::{SyntheticRun, SyntheticVariant};

fn diff(dir: &Path, format: &str) -> String {
    let out = Command::cargo_bin("gapscope")
        .unwrap()
        .args([
            "diff".as_ref(),
            dir.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

/// The title and the three headline lines of the terminal output.
fn headline_of(run: &SyntheticRun) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    run.write(&dir).unwrap();
    first_lines(&dir)
}

fn first_lines(dir: &Path) -> Vec<String> {
    let out = diff(dir, "terminal");
    let lines: Vec<String> = out.lines().take(4).map(str::to_string).collect();
    for l in &lines {
        eprintln!("{l}");
    }
    lines
}

fn candidate(f: impl FnOnce(SyntheticVariant) -> SyntheticVariant) -> SyntheticRun {
    let mut run = SyntheticRun::new();
    *run.variant_mut("candidate") = f(SyntheticVariant::new("candidate"));
    run
}

#[test]
fn an_improvement() {
    let run = candidate(|v| {
        v.scaled("msm_h", 0.8)
            .scaled("synthesis[0]", 0.9)
            .scaled("synthesis[1]", 0.9)
    });
    let h = headline_of(&run);
    assert!(
        h[1].starts_with("End to end: prove (total) medians 1.132 s → 992.5 ms; geometric mean of per-pair ratios -138.9 ms -12.3% [")
            && h[1].ends_with(": improved (p<0.001)"),
        "{}",
        h[1]
    );
    assert!(
        h[2].starts_with("Significant changes: msm_h (total) -137.6 ms -20.0% [")
            && h[2].contains("improved (q")
            && h[2].contains(" comparisons; "),
        "{}",
        h[2]
    );
    assert!(
        h[3].starts_with("Critical path: msm_h -137.6 ms"),
        "{}",
        h[3]
    );
}

#[test]
fn a_regression() {
    let mut run = candidate(|v| v.scaled("msm_h", 1.05));
    run.variant_mut("candidate").gpu_gap_ns = 100_000_000;
    let h = headline_of(&run);
    assert!(
        h[1].starts_with("End to end: prove (total) medians 1.132 s → 1.266 s; geometric mean of per-pair ratios +134.8 ms +11.9% [")
            && h[1].ends_with(": regressed (p<0.001)"),
        "{}",
        h[1]
    );
    assert!(
        h[2].starts_with("Significant changes: gpu_prove (self) +100.0 ms ")
            && h[2].contains("msm_h (total) +34.86 ms")
            && h[2].contains("regressed (q"),
        "{}",
        h[2]
    );
    assert!(
        h[3].starts_with("Critical path: gpu_prove +100.0 ms, msm_h +34.86 ms"),
        "{}",
        h[3]
    );
}

#[test]
fn an_a_a_run() {
    let mut run = SyntheticRun::new();
    run.noise = 0.02;
    let h = headline_of(&run);
    assert!(
        h[1].contains("; geometric mean of per-pair ratios ")
            && h[1].contains(": inconclusive (p="),
        "{}",
        h[1]
    );
    assert!(
        h[2].starts_with("Significant changes: none (q < 0.05 over "),
        "{}",
        h[2]
    );
    assert_eq!(
        h[3],
        "Critical path: no span's self time on it changed significantly"
    );
}

#[test]
fn an_unresolved_change() {
    let mut run = candidate(|v| v.scaled("msm_h", 0.97));
    run.noise = 0.15;
    run.reps = 6;
    let h = headline_of(&run);
    assert!(
        h[1].starts_with("End to end: prove (total) medians 1.077 s → 1.113 s; geometric mean of per-pair ratios +22.39 ms +2.0% [")
            && h[1].contains(": inconclusive (p=0.724"),
        "{}",
        h[1]
    );
    assert!(
        h[2].starts_with("Significant changes: none (q < 0.05 over "),
        "{}",
        h[2]
    );
    assert_eq!(
        h[3],
        "Critical path: no span's self time on it changed significantly"
    );
}

#[test]
fn a_drop_moved_off_the_critical_path() {
    // The drop leaves the critical path (-25 µs, -100%) and the wrapper's self time grows
    // by 120 µs: both real, both under the time floor of 0.1% of a 1.13 s rep, so the
    // headline names neither; the tables keep them.
    let mut run = candidate(|v| v.scaled("gpu_prove", 3.0));
    run.variant_mut("candidate").async_drop = true;
    run.variant_mut("candidate")
        .knobs
        .insert("drop".into(), "async".into());
    let h = headline_of(&run);
    assert!(h[1].contains(": equivalent (p="), "{}", h[1]);
    assert!(
        h[2].starts_with("Significant changes: none (q < 0.05 over "),
        "{}",
        h[2]
    );
    // The move itself is structure, not timing: on the path in every baseline rep and
    // in no candidate rep, so the headline names it, outside the net.
    assert!(
        h[3].starts_with(
            "Critical path: drop left it (on it in 10 of 10 baseline reps, 0 of 10 candidate \
             reps; -25.05 µs of self time, under the verdict rule)"
        ) && h[3].ends_with("; no self time on it changed significantly"),
        "{}",
        h[3]
    );
    let out = output_of(&run);
    // Where the time went keeps the drop: all of its 25 µs left the critical path.
    let row = out
        .lines()
        .find(|l| l.contains(" drop ") && l.contains("self on critical path"))
        .unwrap_or_else(|| panic!("no drop row: {out}"));
    assert!(row.contains(" 0 ns ") && row.contains("-25.05 µs"), "{row}");
}

#[test]
fn the_recorded_quickstart_run() {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu");
    let h = first_lines(&dir);
    assert_eq!(
        h[1..],
        [
            "End to end: prove (total) medians 1.123 s → 1.157 s; geometric mean of per-pair ratios +70.78 ms +5.5% [-6.6%, +19.2%]: inconclusive (p=0.326)",
            "Significant changes: none (q < 0.05 over 65 comparisons; 3.2 would pass p < 0.05 by chance alone, 5 did)",
            "Critical path: drop left it (on it in 5 of 5 baseline reps, 0 of 5 candidate reps; -33.16 µs of self time, under the verdict rule), drop_assignments left it (on it in 5 of 5 baseline reps, 0 of 5 candidate reps; -7.951 µs of self time, under the verdict rule); no self time on it changed significantly",
        ]
    );
}

/// Terminal output of `run`'s diff.
fn output_of(run: &SyntheticRun) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    run.write(&dir).unwrap();
    diff(&dir, "terminal")
}

const MEASURES: [&str; 8] = [
    "total",
    "self",
    "self on critical path",
    "unattributed",
    "counter",
    "task_clock_ns",
    "process CPU time",
    "busy cores (process CPU / wall)",
];

#[test]
fn every_verdict_has_its_measure_beside_it() {
    // The async drop: `drop` is improved on the critical path and slower in total (its
    // span on the background thread), so the same name carries opposite verdicts.
    // A drop of 5 ms (200 × the fixture's), 1.5 × longer on the background thread: both
    // changes clear the time floor (0.1% of a 1.13 s rep).
    let mut run = candidate(|v| v.scaled("gpu_prove", 3.0).scaled("drop", 300.0));
    run.variant_mut("baseline")
        .scale
        .insert("drop".into(), 200.0);
    run.variant_mut("candidate").async_drop = true;
    let out = output_of(&run);
    let drop_rows: Vec<&str> = out
        .lines()
        .filter(|l| l.split("  ").map(str::trim).any(|c| c == "drop"))
        .filter(|l| l.contains("improved") || l.contains("regressed"))
        .collect();
    assert!(drop_rows.iter().any(|l| l.contains("improved")), "{out}");
    assert!(drop_rows.iter().any(|l| l.contains("regressed")), "{out}");
    for l in out
        .lines()
        .filter(|l| l.contains("improved") || l.contains("regressed"))
    {
        if l.starts_with("End to end:")
            || l.starts_with("Significant changes:")
            || l.starts_with("verdict:")
        {
            continue;
        }
        let cells: Vec<&str> = l.split("  ").map(str::trim).collect();
        assert!(
            cells
                .iter()
                .any(|c| MEASURES.contains(c) || *c == "total = self"),
            "no measure beside the verdict: {l}"
        );
    }
    // In the headline, each named change carries its measure in parentheses.
    let named = out.lines().nth(2).unwrap();
    assert!(named.contains("drop (self on critical path)"), "{named}");
    assert!(named.contains("drop (total)"), "{named}");
}

#[test]
fn shares_only_of_a_resolved_change() {
    let resolved = output_of(&candidate(|v| v.scaled("msm_h", 1.1)));
    assert!(resolved.contains("  Share  "), "{resolved}");
    assert!(resolved.contains("Share: each span's part of the end-to-end change."));
    assert!(!resolved.contains("No shares"));

    let mut noisy = candidate(|v| v.scaled("msm_h", 0.97));
    noisy.noise = 0.15;
    noisy.reps = 6;
    let unresolved = output_of(&noisy);
    assert!(!unresolved.contains("Share"), "{unresolved}");
    assert!(
        unresolved.contains("No shares of the end-to-end change: it is inconclusive (")
            && unresolved.contains(", so parts of it would divide by noise."),
        "{unresolved}"
    );
    let json = {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        noisy.write(&dir).unwrap();
        serde_json::from_str::<serde_json::Value>(&diff(&dir, "json")).unwrap()
    };
    assert!(json["contributions"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|i| i["share_of_change"].is_null()));
}

#[test]
fn a_leaf_span_prints_one_row() {
    let out = output_of(&candidate(|v| v.scaled("msm_h", 1.1)));
    let metrics = &out[out.find("All metrics").unwrap()..];
    let rows = |span: &str| -> Vec<String> {
        metrics
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(span))
            .map(|l| {
                l.split("  ")
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .nth(1)
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    // msm_h has no children: its time is its self time, one row; kernels has both.
    let leaf = rows("msm_h");
    assert!(leaf.contains(&"total = self".to_string()), "{leaf:?}");
    assert!(
        !leaf.iter().any(|m| m == "self" || m == "total"),
        "{leaf:?}"
    );
    let wrapper = rows("kernels");
    assert!(wrapper.contains(&"total".to_string()) && wrapper.contains(&"self".to_string()));
}

#[test]
fn too_few_reps_for_any_verdict() {
    let mut run = candidate(|v| v.scaled("msm_h", 0.8));
    run.reps = 3;
    let h = headline_of(&run);
    // msm_h 20% faster, 3 reps a side: no claim, but the spans that separated in every
    // rep are named, with how many spreads apart.
    assert!(
        h[1].ends_with(": inconclusive (3 reps a side: no claim below 4)"),
        "{}",
        h[1]
    );
    assert!(
        h[2].starts_with(
            "Significant changes: no claim of significance at 3 reps a side (a claim needs 4); \
             separated in every rep: "
        ) && h[2].contains("msm_h (total) -20.1%, faster in every rep by "),
        "{}",
        h[2]
    );
    assert_eq!(h[3], "Critical path: no verdicts for the same reason");
}

/// A/A runs recorded with both variants identical: the CPU quickstart's A/A twin
/// (evidence/verdicts/aa_quickstart.toml) on the 2-core build VM, the two of its 20 runs
/// with the most comparisons at p < 0.05 before correction (10 and 19 of 149), and, once
/// recorded on the H200 host by evidence/verdicts/run_aa_h200.sh, the native prover's
/// (tests/fixtures/aa-gpu-h200), and the same with each variant's reps spread over four
/// worker processes (`reps_per_worker = 4`, evidence/verdicts/run_aa_h200_rotate.sh; of
/// its eight runs, the one with the most comparisons at p < 0.05 before correction, 19 of
/// 195, tests/fixtures/aa-gpu-h200-rotate). No headline may name a change.
#[test]
fn committed_a_a_runs_name_no_change() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dirs = vec![
        root.join("aa-cpu-a"),
        root.join("aa-cpu-b"),
        root.join("aa-gpu-h200-rotate"),
    ];
    let gpu = root.join("aa-gpu-h200");
    if gpu.join("spans.csv").exists() {
        dirs.push(gpu);
    } else {
        eprintln!(
            "no GPU A/A fixture at {}: evidence/verdicts/run_aa_h200.sh records it",
            gpu.display()
        );
    }
    for dir in dirs {
        let h = first_lines(&dir);
        assert!(
            h[1].contains(": inconclusive") || h[1].contains(": equivalent"),
            "{}: {}",
            dir.display(),
            h[1]
        );
        assert!(
            h[2].starts_with("Significant changes: none (q < 0.05 over "),
            "{}: {}",
            dir.display(),
            h[2]
        );
        assert_eq!(
            h[3],
            "Critical path: no span's self time on it changed significantly",
            "{}",
            dir.display()
        );
        let json: serde_json::Value = serde_json::from_str(&diff(&dir, "json")).unwrap();
        let fam = &json["headline"]["family"];
        assert_eq!(fam["survivors"], 0, "{}", dir.display());
        assert!(
            fam["uncorrected"].as_u64().unwrap() > 0,
            "the fixture shows what correction removes"
        );
        // Every tested comparison carries a q-value of at most 1; a derived measure's
        // (weighed a quarter of a time's in the weighted procedure) is at least its
        // p-value, a time's at least its p-value times the mean weight.
        for c in json["metrics"].as_array().unwrap() {
            if let (Some(p), Some(q)) = (c["p_value"].as_f64(), c["q_value"].as_f64()) {
                let derived = !matches!(
                    c["measure"].as_str().unwrap(),
                    "total" | "self" | "unattributed" | "critical_self" | "gpu_busy"
                );
                let floor = if derived { p } else { p * 0.25 };
                assert!(q >= floor - 1e-12 && q <= 1.0, "{c}");
            }
        }
    }
}

/// A run whose machine was loaded beyond its cores says so on the headline line, in one
/// clause; at a load under its cores it says nothing of load.
#[test]
fn a_load_beyond_the_cores_is_on_the_headline_line() {
    let with_load = |load: f64| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        SyntheticRun::new().write(&dir).unwrap();
        let path = dir.join("meta.json");
        let mut meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        meta["drift"] = serde_json::json!({
            "start": { "utc": "2026-01-01T00:00:00Z", "load_avg": [3.0, 3.0, 3.0] },
            "end": { "utc": "2026-01-01T00:01:00Z", "load_avg": [load, 3.0, 3.0] },
        });
        std::fs::write(&path, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
        first_lines(&dir)
    };
    let h = with_load(37.5);
    assert!(
        h[1].ends_with(
            " — note: the machine's load reached 37.5 on 16 cores during the run: other work \
             shared its cores, so times spread wider than on a quiet machine"
        ),
        "{}",
        h[1]
    );
    let h = with_load(12.0);
    assert!(!h[1].contains("load"), "{}", h[1]);
}

/// Exact counts (emulated, one rep a side) decide without reps: the headline names their
/// changes and makes no claim of the emulator's times.
#[test]
fn exact_counts_are_named_at_one_rep_a_side() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("evidence/gadget/gadget_emulated/20261130T123131Z-cde3ed");
    let h = first_lines(&dir);
    assert!(
        h[2].starts_with("Significant changes: synthesis[0] (branches) -657.8 k -10.0% improved;")
            && h[2].contains("synthesis[0] (instructions) -5.038 M -9.0% improved")
            && h[2].contains(
                " (exact counts: one rep a side decides); times: no claim at 1 rep a side (a claim needs 4)"
            ),
        "{}",
        h[2]
    );
}
