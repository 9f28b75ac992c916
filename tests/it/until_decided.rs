//! `gapscope run --until-decided`: a clear slowdown stops the run early with end to end
//! regressed, an A/A twin names no change, a run stopped at its budget resumes the same
//! loop, and flags or experiments that cannot be run pair by pair are refused (exit 2).

use crate::common;

use std::path::{Path, PathBuf};

use common::{gapscope, run_dir_of, timing_lock};
use gapscope::analysis::{self, sequential, DiffOptions, Verdict};
use gapscope::store::{self, RunData};

/// Busy work of `n` loop iterations in awk (about 35 ms per million on an idle core).
fn busy(n: u64) -> String {
    format!("awk 'BEGIN{{for(i=0;i<{n};i++)s+=i}}'")
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// An external-program experiment: `base` and `cand` as each variant's command.
fn experiment(dir: &Path, base: &str, cand: &str, extra_run: &str) -> PathBuf {
    let q = |c: &str| format!("[\"sh\", \"-c\", {c:?}]");
    write(
        dir,
        "seq.toml",
        &format!(
            "name = \"seq\"\n\n[workload]\ncommand = {}\n\n[run]\nreps = 5\nwarmups = 1\n\
             order = \"counterbalanced\"\n{extra_run}\n\n[[variant]]\nname = \"baseline\"\n\n\
             [[variant]]\nname = \"candidate\"\ncommand = {}\n",
            q(base),
            q(cand)
        ),
    )
}

/// `gapscope run ARGS --results-dir tmp/results`, with its exit status, stdout, stderr.
fn run(tmp: &Path, args: &[&str]) -> (i32, String, String) {
    let out = gapscope(tmp)
        .arg("run")
        .args(args)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The line after "until decided: " ("decided after N pairs", "stopped at … after N
/// pairs: …") in `text`.
fn stop_line(text: &str) -> &str {
    text.lines()
        .find_map(|l| l.strip_prefix("until decided: "))
        .unwrap_or_else(|| panic!("no stop line in:\n{text}"))
}

/// N of a stop line's "after N pairs".
fn pairs_in(line: &str) -> usize {
    let after = line.split(" after ").nth(1).expect(line);
    after.split(' ').next().unwrap().parse().expect(line)
}

/// The run folder's decisions on the confidence sequences, as the run judged them.
fn progress(dir: &Path) -> sequential::Progress {
    let data = RunData::load(dir).unwrap();
    let (b, c) = analysis::pick_variants(&data, None, None, None).unwrap();
    let opts = DiffOptions::default();
    let d = analysis::diff_runs(&data, &b, &data, &c, &opts).unwrap();
    sequential::progress(&d, &opts).expect("a paired diff")
}

fn measured(dir: &Path) -> usize {
    let data = RunData::load(dir).unwrap();
    data.runs.iter().filter(|r| !r.warmup).count()
}

#[test]
fn a_clear_slowdown_stops_well_before_the_cap_with_end_to_end_regressed() {
    let _t = timing_lock();
    let tmp = tempfile::tempdir().unwrap();
    // About 35 ms against 140 ms of busy work: long enough that the machine's other
    // work (a loaded 2-core VM) does not drown it.
    let exp = experiment(tmp.path(), &busy(1_000_000), &busy(4_000_000), "");
    let exp = exp.to_str().unwrap();
    let (code, out, err) = run(tmp.path(), &[exp, "--until-decided", "--max-reps", "60"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let line = stop_line(&out);
    assert!(line.starts_with("decided after "), "{line}\n{err}");
    assert!(
        line.contains(" pairs: program (total) regressed [+"),
        "{line}"
    );
    let pairs = pairs_in(line);
    assert!(pairs <= 30, "{line}: not well before the cap of 60\n{err}");
    // A progress line per pair on stderr, the last one with every watched row decided.
    assert!(
        err.contains("1 pairs: nothing is decided before 4 pairs"),
        "{err}"
    );
    assert!(err.contains(&format!("{pairs} pairs: ")), "{err}");
    let dir = run_dir_of(out.as_bytes());
    assert_eq!(measured(&dir), 2 * pairs, "one pair per look, none beyond");
    let p = progress(&dir);
    assert!(p.decided(), "{}", p.line());
    assert_eq!(p.rows[0].span, "program");
    assert_eq!(p.rows[0].verdict, Verdict::Regressed, "{}", p.line());
    let lo = p.rows[0].interval.lo.expect("a finite lower bound");
    assert!(lo > 0.01, "{}", p.line());
    // meta.json: the cap as the run's reps, and why it stopped.
    let meta = store::read_meta(&dir).unwrap();
    assert_eq!(meta.reps, 60);
    let u = meta.until_decided.expect("an until-decided run");
    assert_eq!(u.stopped.as_deref(), Some(line));
    assert!(meta.completed_utc.is_some());
    // The headline is the run's usual one, and says so too.
    assert!(out.contains("End to end: program (total)"), "{out}");
    // The review report's environment says how the run was bounded and why it stopped.
    let rep = tmp.path().join("report");
    gapscope(tmp.path())
        .args([
            "report",
            dir.to_str().unwrap(),
            "--out",
            rep.to_str().unwrap(),
        ])
        .assert()
        .success();
    let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
    assert!(
        md.contains("at most 60 measured reps (until decided) + 1 warm-up(s) per variant"),
        "{md}"
    );
    assert!(md.contains(line), "{md}");
    // A resume of a decided run runs nothing and says the same.
    let (code, out2, err2) = run(tmp.path(), &["--resume", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out2}\n{err2}");
    assert_eq!(stop_line(&out2), line);
    assert_eq!(measured(&dir), 2 * pairs);
}

#[test]
fn an_aa_twin_names_no_change() {
    let _t = timing_lock();
    let cmd = busy(300_000);
    // The sequence names a change in an A/A at the rate it allows (and more where a
    // loaded host drifts between reps): a first run that names one is run once more, and
    // the two must not both name one.
    let mut named = Vec::new();
    let (_tmp, dir) = loop {
        let tmp = tempfile::tempdir().unwrap();
        let (code, out, err) = run(
            tmp.path(),
            &[
                "--cmd",
                &cmd,
                "--cmd",
                &cmd,
                "--until-decided",
                "--max-reps",
                "8",
            ],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        let line = stop_line(&out);
        let pairs = pairs_in(line);
        assert!(pairs <= 8, "{line}");
        assert!(
            line.starts_with("decided after ")
                || line.starts_with("stopped at --max-reps 8 after 8"),
            "{line}"
        );
        let dir = run_dir_of(out.as_bytes());
        let p = progress(&dir);
        let quiet = (p.rows.iter())
            .all(|r| matches!(r.verdict, Verdict::Equivalent | Verdict::Inconclusive));
        if quiet {
            break (tmp, dir);
        }
        named.push(format!("{}\n{err}", p.line()));
        assert!(
            named.len() < 2,
            "two A/A runs named a change:\n{}",
            named.join("\n")
        );
    };
    // --cmd with --until-decided runs its pairs counterbalanced.
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.meta.order, "counterbalanced");
    let order: String = (data.runs.iter())
        .filter(|r| !r.warmup)
        .take(4)
        .map(|r| {
            if r.variant == data.meta.variants[0].name {
                'A'
            } else {
                'B'
            }
        })
        .collect();
    assert_eq!(order, "ABBA");
}

#[test]
fn a_run_stopped_at_its_budget_resumes_the_same_loop() {
    let tmp = tempfile::tempdir().unwrap();
    // Each rep sleeps 0.5 s: the warm-ups and the first pair (2 s) reach a budget of 2 s.
    let exp = experiment(tmp.path(), "sleep 0.5", "sleep 0.5", "");
    let exp = exp.to_str().unwrap();
    let (code, out, err) = run(
        tmp.path(),
        &[exp, "--until-decided", "--max-reps", "5", "--budget", "2s"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let line = stop_line(&out);
    assert_eq!(
        line,
        "stopped at the budget of 2s after 1 pairs: too few paired reps to compare"
    );
    let dir = run_dir_of(out.as_bytes());
    let d = dir.to_str().unwrap();
    assert_eq!(measured(&dir), 2);
    let meta = store::read_meta(&dir).unwrap();
    assert_eq!(meta.reps, 5);
    assert_eq!(meta.until_decided.as_ref().unwrap().budget_s, Some(2));
    // Resumed without flags: the same plan (the cap, the budget of 2 s: a pair takes 1 s,
    // two do not fit), one more pair.
    // Under --quiet: no progress lines, the stop line on stderr, stdout the folder alone.
    let (code, out, err) = run(tmp.path(), &["--resume", d, "--quiet"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        stop_line(&err).starts_with("stopped at the budget of 2s after 2 pairs"),
        "{err}"
    );
    assert!(!err.contains("pairs: nothing"), "{err}");
    assert_eq!(out.trim(), d);
    assert_eq!(measured(&dir), 4);
    // A larger budget on the command line replaces the recorded one: on to the cap, or
    // decided before it.
    let (code, out, err) = run(
        tmp.path(),
        &["--resume", d, "--until-decided", "--budget", "1h"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let line = stop_line(&out);
    let pairs = pairs_in(line);
    assert!(
        line.starts_with("decided after ") || line.starts_with("stopped at --max-reps 5 after 5"),
        "{line}"
    );
    assert_eq!(measured(&dir), 2 * pairs);
    assert!(err.contains("4 pairs: "), "{err}");
    let meta = store::read_meta(&dir).unwrap();
    assert_eq!(meta.until_decided.unwrap().budget_s, Some(3600));
}

#[test]
fn what_cannot_be_run_pair_by_pair_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = experiment(t, "true", "true", "");
    let exp = exp.to_str().unwrap();
    let refused = |args: &[&str], why: &str| {
        let (code, out, err) = run(t, args);
        assert_eq!(code, 2, "{args:?}: {out}\n{err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert!(!t.join("results").join("seq").exists() || args.contains(&"--resume"));
    };
    refused(&[exp, "--max-reps", "10"], "--until-decided");
    refused(&[exp, "--budget", "10m"], "--until-decided");
    refused(&[exp, "--until-decided", "--max-reps", "2"], "--max-reps");
    refused(&[exp, "--until-decided", "--budget", "10 minutes"], "1h30m");
    refused(
        &[
            "--cmd",
            "true",
            "--cmd",
            "true",
            "--reps",
            "5",
            "--until-decided",
        ],
        "--reps",
    );
    refused(&["--cmd", "true", "--until-decided"], "has 1 (");
    let three = write(
        t,
        "three.toml",
        "name = \"three\"\n[workload]\ncommand = [\"true\"]\n[[variant]]\nname = \"a\"\n\
         [[variant]]\nname = \"b\"\n[[variant]]\nname = \"c\"\n",
    );
    refused(
        &[three.to_str().unwrap(), "--until-decided"],
        "compares two variants pair by pair; experiment \"three\" has 3 (a, b, c)",
    );
    let seq = write(
        t,
        "sequential.toml",
        "name = \"sequential\"\n[workload]\ncommand = [\"true\"]\n[run]\norder = \"sequential\"\n\
         [[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n",
    );
    refused(
        &[seq.to_str().unwrap(), "--until-decided"],
        "order = \"counterbalanced\"",
    );
    // A run of fixed reps resumes as one, never as a run until decided.
    let (code, out, err) = run(t, &[exp, "--quiet"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let dir = run_dir_of(out.as_bytes());
    refused(
        &["--resume", dir.to_str().unwrap(), "--until-decided"],
        "is a run of a fixed 5 reps per variant",
    );
}
