//! `gapscope diff` end to end: a committed real run (tests/fixtures/quickstart-cpu, the
//! quickstart experiment on the CPU backend) and synthetic run folders with known
//! effects written by the store's own writer.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use gapscope::analysis::synthetic::{SyntheticRun, SyntheticVariant};
use predicates::prelude::*;
use predicates::str::contains;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quickstart-cpu")
}

/// `gapscope diff --format json` of the committed quickstart run, parsed.
fn fixture_json() -> serde_json::Value {
    let json = stdout_of(&[
        "diff".as_ref(),
        fixture().as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    serde_json::from_str(&json).unwrap()
}

fn gapscope() -> Command {
    Command::cargo_bin("gapscope").unwrap()
}

/// Writes `run` under a fresh temp dir and returns (guard, run folder).
fn write(run: &SyntheticRun) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    run.write(&dir).unwrap();
    (tmp, dir)
}

fn stdout_of(args: &[&std::ffi::OsStr]) -> String {
    let out = gapscope()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_real_run_prints_the_phase_table_first() {
    let out = stdout_of(&["diff".as_ref(), fixture().as_os_str()]);
    assert!(
        out.starts_with("quickstart: baseline (drop=sync) vs candidate (drop=async)"),
        "{out}"
    );
    assert!(
        out.contains("reps used: 5 baseline, 5 candidate (excluded: 0 + 0 failed, 1 + 1 warm-up)")
    );
    // No PMU on the machine that recorded it: the note says why, and the phase table
    // shows the software counters instead.
    assert!(out.contains("counters not compared (instructions, branches, cycles): this CPU exposes no hardware performance counters"));
    let tables: Vec<&str> = out
        .lines()
        .filter(|l| l.split_whitespace().next() == Some("Phase"))
        .collect();
    assert_eq!(tables.len(), 1);
    let phase_at = out.find(tables[0]).unwrap();
    for later in ["Gaps:", "Where the time went:", "All metrics"] {
        assert!(
            out.find(later).unwrap() > phase_at,
            "{later} before the phase table"
        );
    }
    let rows: Vec<&str> = out[phase_at..]
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let labels: Vec<&str> = rows
        .iter()
        .map(|r| r.split("  ").next().unwrap().trim())
        .collect();
    assert_eq!(
        labels,
        [
            "synthesis",
            "CPU prover call (gpu_prove)",
            "NTT and MSMs (kernels)",
            "drop",
            "end to end (prove)",
            "task_clock_ns (threads with spans)",
            "page_faults (threads with spans)",
            "context_switches (threads with spans)"
        ]
    );
}

#[test]
fn every_format_of_a_real_run() {
    let v = fixture_json();
    assert_eq!(v["baseline"]["variant"], "baseline");
    assert_eq!(v["candidate"]["knobs"]["drop"], "async");
    assert_eq!(v["excluded"]["candidate"]["warmup"], 1);
    assert_eq!(v["phase_table"][4]["comparison"]["span"], "prove");
    assert!(v["metrics"].as_array().unwrap().len() > 50);
    // Async drop leaves the critical path: its critical self time drops to 0 in every rep
    // (-25 µs, "gone"), which is under the time floor of 0.1% of the 1.1 s rep: unchanged,
    // with the floor it missed recorded beside it.
    let drop = v["contributions"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["comparison"]["span"] == "drop")
        .unwrap();
    assert_eq!(drop["comparison"]["candidate"]["median"], 0.0);
    assert_eq!(drop["comparison"]["verdict"], "equivalent");
    let floor = drop["comparison"]["rule"]["abs_floor"].as_f64().unwrap();
    assert!(floor > 1e6 && drop["comparison"]["delta"].as_f64().unwrap().abs() < floor);

    let md = stdout_of(&[
        "diff".as_ref(),
        fixture().as_os_str(),
        "--format".as_ref(),
        "markdown".as_ref(),
    ]);
    assert!(md.contains(
        "| Phase | Measure | Baseline | Candidate | Delta | Verdict |\n|---|---|---:|---:|---|---|\n| synthesis | total |"
    ));

    let csv = stdout_of(&[
        "diff".as_ref(),
        fixture().as_os_str(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]);
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let headers: Vec<String> = rdr.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(headers[..3], ["section", "label", "span"]);
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(&rows[0][1], "synthesis");
    assert!(rows
        .iter()
        .any(|r| &r[0] == "contribution" && &r[1] == "unexplained"));
}

#[test]
fn the_output_is_reproducible() {
    let a = stdout_of(&["diff".as_ref(), fixture().as_os_str()]);
    let b = stdout_of(&["diff".as_ref(), fixture().as_os_str()]);
    assert_eq!(a, b);
}

#[test]
fn a_regression_between_variants_is_reported() {
    let mut run = SyntheticRun::new();
    *run.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", 1.1);
    let (_tmp, dir) = write(&run);
    let out = stdout_of(&["diff".as_ref(), dir.as_os_str()]);
    let row = |label: &str| {
        out.lines()
            .find(|l| l.starts_with(label))
            .unwrap()
            .to_string()
    };
    assert!(
        row("NTT and MSMs (kernels) ").contains("regressed"),
        "{out}"
    );
    assert!(row("end to end (prove)").contains("regressed"));
    assert!(row("drop ").contains("equivalent"));
    let top = out
        .lines()
        .skip_while(|l| !l.starts_with("Where the time went"))
        .nth(2)
        .unwrap();
    assert!(top.contains("msm_h") && top.contains("regressed"), "{top}");
}

#[test]
fn two_runs_compare_a_variant_of_each() {
    let (_ta, a) = write(&SyntheticRun::new());
    let mut later = SyntheticRun::new();
    later.seed = 7;
    later.variant_mut("baseline").gpu_gap_ns = 300_000_000;
    let (_tb, b) = write(&later);
    let out = stdout_of(&["diff".as_ref(), a.as_os_str(), b.as_os_str()]);
    assert!(out.starts_with("synthetic: baseline vs baseline"), "{out}");
    assert!(out.contains(&format!("baseline run: {}", a.display())));
    assert!(out.contains(&format!("candidate run: {}", b.display())));
    assert!(out.contains("! gpu_prove: 300."), "{out}");
    assert!(out.contains("not covered by children (candidate)"));
    let gap = out
        .lines()
        .skip_while(|l| !l.starts_with("Gaps:"))
        .find(|l| l.starts_with("gpu_prove"))
        .unwrap();
    assert!(gap.contains("regressed"), "{gap}");

    let out = stdout_of(&[
        "diff".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--baseline".as_ref(),
        "candidate".as_ref(),
        "--candidate".as_ref(),
        "candidate".as_ref(),
    ]);
    assert!(out.starts_with("synthetic: candidate vs candidate"));
    assert!(!out.contains("! gpu_prove"));
}

#[test]
fn different_workloads_are_refused_unless_forced() {
    let (_ta, a) = write(&SyntheticRun::new());
    let mut other = SyntheticRun::new();
    other.workload.circuit = "sha256".into();
    other.workload.batch = 4;
    other.hostname = "other-host".into();
    let (_tb, b) = write(&other);
    gapscope()
        .args(["diff".as_ref(), a.as_os_str(), b.as_os_str()])
        .assert()
        .failure()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(contains("Error: refusing to compare different workloads:"))
        .stderr(contains("circuit: porep (baseline) vs sha256 (candidate)"))
        .stderr(contains("batch: 2 (baseline) vs 4 (candidate)"))
        // A new hostname of the same machine (a rebooted or new VM) is the same host:
        // hosts are told apart by their fingerprint (CPU, cores, GPUs, driver, memory).
        .stderr(contains("host:").not())
        .stderr(contains("log2_constraints").not())
        .stderr(contains("pass --force to compare anyway"));
    gapscope()
        .args(["diff".as_ref(), a.as_os_str(), b.as_os_str(), "--force".as_ref()])
        .assert()
        .success()
        .stdout(contains("note: compared despite different workloads (forced): circuit porep vs sha256; batch 2 vs 4"));
}

#[test]
fn spans_cut_off_a_committed_rep_are_refused_and_name_the_rep_and_the_repair() {
    let (_tmp, dir) = write(&SyntheticRun::new());
    let spans = dir.join("spans.csv");
    let text = std::fs::read_to_string(&spans).unwrap();
    // Cut the last row in half: the last rep's row in runs.csv counts one span more.
    let last_start = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    let cut = last_start + (text.len() - last_start) / 2;
    std::fs::write(&spans, &text[..cut]).unwrap();
    for cmd in ["diff", "summary", "report"] {
        gapscope()
            .args([cmd.as_ref(), dir.as_os_str()])
            .assert()
            .failure()
            .code(1)
            .stderr(contains(format!("{}: rep ", spans.display())))
            .stderr(contains("was cut or edited"))
            .stderr(contains("gapscope run --resume"))
            .stderr(contains("panicked").not());
    }
    // A line cut in the middle of the file is a parse error naming its line.
    let mid = text.lines().take(3).collect::<Vec<_>>().join("\n") + "\nnot,a,row\n";
    std::fs::write(&spans, mid).unwrap();
    gapscope()
        .args(["diff".as_ref(), dir.as_os_str()])
        .assert()
        .failure()
        .stderr(contains(format!("{}, line 4:", spans.display())));
}

#[test]
fn a_duplicated_rep_row_is_refused_by_diff_and_report_without_a_panic() {
    let (tmp, dir) = write(&SyntheticRun::new());
    let runs = dir.join("runs.csv");
    let text = std::fs::read_to_string(&runs).unwrap();
    let row = text.lines().nth(5).unwrap().to_string();
    std::fs::write(&runs, format!("{text}{row}\n")).unwrap();
    for args in [vec!["diff"], vec!["report", "--out"]] {
        let mut c = gapscope();
        c.args(&args);
        if args.len() > 1 {
            c.arg(tmp.path().join("rep"));
        }
        c.arg(&dir)
            .assert()
            .code(1)
            .stderr(contains("has two rows"))
            .stderr(contains("panicked").not());
    }
}

#[test]
fn a_killed_run_can_be_diffed_as_it_is_with_an_incomplete_run_note() {
    let (_tmp, dir) = write(&SyntheticRun::new());
    // What a kill leaves: meta.json never completed, half a line at the end of runs.csv.
    let meta = dir.join("meta.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    m["completed_utc"] = serde_json::Value::Null;
    std::fs::write(&meta, serde_json::to_vec(&m).unwrap()).unwrap();
    let runs = dir.join("runs.csv");
    let text = std::fs::read_to_string(&runs).unwrap();
    let last_start = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    std::fs::write(&runs, &text[..last_start + 8]).unwrap();
    for cmd in ["diff", "summary"] {
        gapscope()
            .args([cmd.as_ref(), dir.as_os_str()])
            .assert()
            .success()
            .stderr(contains("incomplete run:"))
            .stderr(contains("gapscope run --resume"));
    }
}

#[test]
fn failed_reps_are_excluded_and_counted() {
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate").failed_reps = 2;
    let (_tmp, dir) = write(&run);
    let out = stdout_of(&["diff".as_ref(), dir.as_os_str()]);
    assert!(
        out.contains("reps used: 10 baseline, 8 candidate (excluded: 0 + 2 failed, 1 + 1 warm-up)"),
        "{out}"
    );
    assert!(out.contains("note: 2 failed rep(s) excluded (0 baseline, 2 candidate)"));
    // The failed reps are 10x slower; left out, the total is shown equivalent.
    let total = out
        .lines()
        .find(|l| l.starts_with("end to end (prove)"))
        .unwrap();
    assert!(total.contains("equivalent"), "{total}");
}

#[test]
fn too_few_reps_say_how_many_are_needed() {
    let mut run = SyntheticRun::new();
    run.reps = 3;
    let (_tmp, dir) = write(&run);
    gapscope()
        .args(["diff".as_ref(), dir.as_os_str()])
        .assert()
        .success()
        .stdout(contains(
            "a claim of significance needs at least 4 per side, so rerun with reps >= 4",
        ))
        .stdout(contains("inconclusive (3 reps a side: no claim below 4)"));
}

#[test]
fn a_variant_without_successful_reps_is_an_error() {
    let mut run = SyntheticRun::new();
    run.variant_mut("candidate").failed_reps = 10;
    let (_tmp, dir) = write(&run);
    gapscope()
        .args(["diff".as_ref(), dir.as_os_str()])
        .assert()
        .failure()
        .stderr(contains(
            "variant candidate has no successful measured rep (10 failed, 1 warm-up)",
        ));
}

#[test]
fn unknown_variants_and_bad_folders_say_what_to_do() {
    gapscope()
        .args([
            "diff".as_ref(),
            fixture().as_os_str(),
            "--candidate".as_ref(),
            "nope".as_ref(),
        ])
        .assert()
        .failure()
        .stderr(contains(
            "no variant named \"nope\"; variants are: baseline, candidate",
        ));
    let tmp = tempfile::tempdir().unwrap();
    gapscope()
        .args(["diff".as_ref(), tmp.path().as_os_str()])
        .assert()
        .failure()
        .stderr(contains("not a gapscope run folder"));
    gapscope()
        .args([
            "diff".as_ref(),
            fixture().as_os_str(),
            "--noise-floor".as_ref(),
            "150%".as_ref(),
        ])
        .assert()
        .failure()
        .stderr(contains("not a percentage"));
}

#[test]
fn options_change_the_verdict_rule() {
    let mut run = SyntheticRun::new();
    *run.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", 1.03);
    let (_tmp, dir) = write(&run);
    // msm_h is ~62% of the total: +3% there is ~+1.9% end to end.
    let total = |args: &[&str]| {
        let mut all: Vec<&std::ffi::OsStr> = vec!["diff".as_ref(), dir.as_os_str()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        let out = stdout_of(&all);
        out.lines()
            .find(|l| l.starts_with("end to end (prove)"))
            .unwrap()
            .to_string()
    };
    assert!(total(&[]).contains("regressed"));
    assert!(total(&["--noise-floor", "5%"]).contains("equivalent"));
    let out = stdout_of(&[
        "diff".as_ref(),
        dir.as_os_str(),
        "--noise-floor".as_ref(),
        "5".as_ref(),
    ]);
    assert!(out.contains(
        "every change is the geometric mean of per-pair ratios; regressed/improved: its 95% interval lies outside ±5% and outside the absolute floor"
    ));
    assert!(out.contains(
        "(the signed-rank test where a pair is far out) and the two-sample t test (without a far-out rep where one is), combined by Simes, gives its weighted Benjamini–Hochberg q-value over the diff's"
    ));
    let out = stdout_of(&["diff".as_ref(), dir.as_os_str(), "--unpaired".as_ref()]);
    assert!(out.contains(
        "every change is the ratio of geometric means; regressed/improved: its 95% interval lies outside ±1%"
    ));
    assert!(out.contains(
        "the two-sample t test on logs (Student's where the sides have as many reps, else Welch's; where a rep is far out, the same test without it in its place) gives its weighted Benjamini–Hochberg q-value"
    ));
    assert!(!out.contains("paired by iteration"));
    let out = stdout_of(&[
        "diff".as_ref(),
        dir.as_os_str(),
        "--unpaired".as_ref(),
        "--welch".as_ref(),
    ]);
    assert!(out.contains(
        "the two-sample t test on logs (Welch's, as --welch asks; where a rep is far out"
    ));
}

#[test]
fn a_leak_is_a_line_in_every_format() {
    let mut run = SyntheticRun::new();
    // 100 MiB more after every rep of the candidate: 1 GiB over its 11 reps.
    run.variant_mut("candidate").rss_growth_bytes_per_rep = 100 << 20;
    let (_tmp, dir) = write(&run);
    let format = |f: &str| {
        stdout_of(&[
            "diff".as_ref(),
            dir.as_os_str(),
            "--format".as_ref(),
            f.as_ref(),
        ])
    };
    let line = "leak watch (candidate): variant \"candidate\": rss_end_bytes grew in 9/9 steps over its last 10 reps, 612.0 → 1512.0 MiB (+900.0 MiB, 100.0 MiB/rep), still growing at the end: possible leak";
    let terminal = format("terminal");
    assert!(terminal.contains(&format!("\n! {line}\n")), "{terminal}");
    assert_eq!(terminal.matches("leak watch").count(), 1);
    assert!(format("markdown").contains(&format!("\n- ⚠ {line}\n")));

    let v: serde_json::Value = serde_json::from_str(&format("json")).unwrap();
    let leaks = v["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1);
    assert_eq!(leaks[0]["side"], "candidate");
    assert_eq!(leaks[0]["flag"]["metric"], "rss_end_bytes");
    assert_eq!(leaks[0]["flag"]["last_bytes"], 1512u64 << 20);

    let csv = format("csv");
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let rows: Vec<csv::StringRecord> = rdr
        .records()
        .map(Result::unwrap)
        .filter(|r| &r[0] == "leak")
        .collect();
    assert_eq!(rows.len(), 1, "{csv}");
    let r = &rows[0];
    assert_eq!(
        (&r[1], &r[2], &r[3], &r[4]),
        ("candidate", "candidate", "rss_end_bytes", "bytes")
    );
    assert_eq!(r[11].parse::<f64>().unwrap(), (900u64 << 20) as f64);

    // The baseline's flat RSS: no line at all.
    let flat = write(&SyntheticRun::new());
    assert!(!stdout_of(&["diff".as_ref(), flat.1.as_os_str()]).contains("leak watch"));
}

#[test]
fn a_json_diff_without_leaks_reads_back() {
    // Records written before the leak watch have no `leaks` field.
    let mut v = fixture_json();
    assert_eq!(v["leaks"], serde_json::json!([]));
    v.as_object_mut().unwrap().remove("leaks");
    let d: gapscope::analysis::Diff = serde_json::from_value(v).unwrap();
    assert!(d.leaks.is_empty());
}

#[test]
fn fail_on_regression_exits_4_only_when_a_phase_regressed() {
    let mut run = SyntheticRun::new();
    *run.variant_mut("candidate") = SyntheticVariant::new("candidate").scaled("msm_h", 1.1);
    let (_tmp, slower) = write(&run);
    let flag: &std::ffi::OsStr = "--fail-on-regression".as_ref();
    gapscope()
        .args(["diff".as_ref(), slower.as_os_str(), flag])
        .assert()
        .code(4)
        .stdout(contains("Phases (median per rep)"))
        // Synthetic counters follow span durations, so they regress too; synthesis and
        // drop do not, nor do context switches, whose change is under the count floor.
        .stderr(contains(
            "regressed: CPU prover call (gpu_prove), NTT and MSMs (kernels), end to end (prove), \
             task_clock_ns (threads with spans), page_faults (threads with spans) \
             (phase table; --fail-on-regression)",
        ))
        .stderr(contains("Error").not());
    // Without the flag the same diff succeeds.
    gapscope()
        .args(["diff".as_ref(), slower.as_os_str()])
        .assert()
        .success();
    // Faster is not a regression.
    gapscope()
        .args([
            "diff".as_ref(),
            slower.as_os_str(),
            flag,
            "--baseline".as_ref(),
            "candidate".as_ref(),
            "--candidate".as_ref(),
            "baseline".as_ref(),
        ])
        .assert()
        .success();
    // An error is still 1.
    gapscope()
        .args([
            "diff".as_ref(),
            slower.as_os_str(),
            flag,
            "--candidate".as_ref(),
            "nope".as_ref(),
        ])
        .assert()
        .code(1);
    // A usage error is 2 (a typo is not a regression), also for a resample count that
    // once aborted the process on a failed allocation.
    gapscope()
        .args([
            "diff".as_ref(),
            slower.as_os_str(),
            "--fail-on-regresion".as_ref(),
        ])
        .assert()
        .code(2);
    gapscope()
        .args([
            "diff".as_ref(),
            slower.as_os_str(),
            "--resamples".as_ref(),
            "99999999999".as_ref(),
        ])
        .assert()
        .code(2)
        .stderr(contains("1..=1000000"));
    gapscope()
        .args(["diff", "--help"])
        .assert()
        .success()
        .stdout(contains("--fail-on-regression"))
        .stdout(contains(
            "4 with --fail-on-regression when a row of the phase table is regressed",
        ));
}
