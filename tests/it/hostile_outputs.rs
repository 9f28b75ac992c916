//! Outputs pointed somewhere odd, and GPU tables and programs that send more than a run
//! keeps: each command that writes a file meets a link planted under the file's name (or
//! a device), and leaves the link, what it points to and its folder as they were; a
//! table row no run writes is left out with its line named; a program past the span cap
//! fails its rep with the count, the cap applied while it was read. Every command runs
//! under a time limit (see tests/hostile.rs).

use crate::common;
use crate::fixture;

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use gapscope::store::{self, GpuActivityRow, RunData, TelemetryRow};

const LIMIT: Duration = Duration::from_secs(120);

fn gapscope(tmp: &Path) -> Command {
    let mut c = common::gapscope(tmp);
    c.timeout(LIMIT);
    c
}

/// Exit 1 with a message (never a panic nor a kill at the limit); its stderr.
fn fails(c: &mut Command) -> String {
    let out = c.output().expect("gapscope runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// `t/victim.txt` holding "keep me", and a link to it at `at`.
fn plant_link(t: &Path, at: &Path) -> PathBuf {
    let victim = t.join("victim.txt");
    if !victim.exists() {
        std::fs::write(&victim, "keep me").unwrap();
    }
    std::os::unix::fs::symlink(&victim, at).unwrap();
    victim
}

fn untouched(victim: &Path, link: &Path) {
    assert_eq!(std::fs::read_to_string(victim).unwrap(), "keep me");
    assert!(
        std::fs::symlink_metadata(link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "{} was replaced",
        link.display()
    );
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_report_draws_no_chart_through_a_planted_link_nor_over_a_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = fixture::write(t, &fixture::Options::default());
    let out = t.join("report");
    std::fs::create_dir(&out).unwrap();
    let svg = out.join("phases.svg");
    let victim = plant_link(t, &svg);
    let png = out.join("timeline.png");
    plant_link(t, &png);
    std::fs::create_dir(out.join("gaps.svg")).unwrap();
    let done = gapscope(t)
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(done.status.success(), "{err}");
    assert!(
        err.contains("chart `phases` could not be drawn") && err.contains("is a symbolic link"),
        "{err}"
    );
    assert!(err.contains("chart `timeline` could not be drawn"), "{err}");
    assert!(
        err.contains("gaps.svg is a directory, not a regular file"),
        "{err}"
    );
    untouched(&victim, &svg);
    untouched(&victim, &png);
    assert!(out.join("gaps.svg").is_dir());
    // The other charts were drawn whole, and nothing was left beside them.
    let drawn = std::fs::read(out.join("distributions.png")).unwrap();
    assert!(drawn.starts_with(b"\x89PNG"), "not a PNG");
    let phases_png = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(phases_png.contains("<svg"));
    assert!(temp_files(&out).is_empty(), "{:?}", temp_files(&out));
}

#[test]
fn run_export_experiment_cuda_check_json_and_track_summary_refuse_links_and_devices() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = t.join("exp.toml");
    let victim = plant_link(t, &exp);
    let e = fails(
        gapscope(t)
            .args(["run", "--cmd", "true", "--reps", "1", "--warmups", "0"])
            .arg("--export-experiment")
            .arg(&exp)
            .arg("--results-dir")
            .arg(t.join("results")),
    );
    assert!(
        e.contains("--export-experiment") && e.contains("is a symbolic link"),
        "{e}"
    );
    untouched(&victim, &exp);
    assert!(!t.join("results").exists(), "it ran anyway");

    let json = t.join("checks.json");
    plant_link(t, &json);
    let e = fails(gapscope(t).args(["cuda-check", "--json"]).arg(&json));
    assert!(
        e.contains("--json") && e.contains("is a symbolic link"),
        "{e}"
    );
    untouched(&victim, &json);
    let e = fails(gapscope(t).args(["cuda-check", "--json", "-"]));
    assert!(
        e.contains("`-` stands for stdout") && e.contains("give a file path"),
        "{e}"
    );
    let e = fails(gapscope(t).args(["track", "x.toml", "--summary", "-"]));
    assert!(e.contains("`-` stands for stdout"), "{e}");
    assert!(!t.join("-").exists());

    let summary = t.join("summary.md");
    plant_link(t, &summary);
    let e = fails(
        gapscope(t)
            .arg("track")
            .arg(t.join("no-such.toml"))
            .arg("--summary")
            .arg(&summary),
    );
    assert!(
        e.contains("--summary") && e.contains("is a symbolic link"),
        "{e}"
    );
    untouched(&victim, &summary);
    assert!(temp_files(t).is_empty(), "{:?}", temp_files(t));

    // /dev/null is a device: as root, a plain write would have replaced it.
    for args in [
        vec!["cuda-check", "--json", "/dev/null"],
        vec!["track", "x.toml", "--summary", "/dev/null"],
        vec!["run", "--cmd", "true", "--export-experiment", "/dev/null"],
    ] {
        let e = fails(gapscope(t).args(&args));
        assert!(
            e.contains("a character device, not a regular file"),
            "{args:?}: {e}"
        );
    }
    let null = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(null.file_type().is_char_device(), "/dev/null was replaced");
    if is_root() {
        assert!(temp_files(Path::new("/dev")).is_empty());
    }
}

/// The program of [`spans_experiment`]: this test binary, sending
/// `GAPSCOPE_TEST_MANY_SPANS` complete spans through the emitter (a no-op test run
/// without it).
#[test]
fn many_spans_child() {
    let Some(n) = std::env::var("GAPSCOPE_TEST_MANY_SPANS")
        .ok()
        .and_then(|n| n.parse::<u32>().ok())
    else {
        return;
    };
    for i in 0..n {
        gapscope::emit::complete(&format!("s{}", i % 7), gapscope::emit::now_ns(), 1);
    }
}

/// An external experiment whose program sends `n` complete spans in one rep, keeping
/// at most `cap`.
fn spans_experiment(t: &Path, n: u32, cap: u32) -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let child = format!(
        "GAPSCOPE_TEST_MANY_SPANS={n} exec {} --exact hostile_outputs::many_spans_child --nocapture \
         --test-threads=1",
        me.display()
    );
    let p = t.join("many.toml");
    let text = format!(
        "name = \"many\"\n[workload]\ncommand = [\"sh\", \"-c\", {child:?}]\n\
         max_spans_per_rep = {cap}\n[run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n"
    );
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_program_past_the_span_cap_fails_its_rep_with_the_count_and_keeps_the_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = spans_experiment(t, 300, 40);
    let out = gapscope(t)
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(t.join("results"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("the program sent 300 spans in this rep, more than the 40 a rep keeps"),
        "{err}"
    );
    assert!(err.contains("the other 260 were counted"), "{err}");
    let dir = std::fs::read_dir(t.join("results").join("many"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join(store::META).exists())
        .expect("a run folder");
    let data = RunData::load(&dir).unwrap();
    assert_eq!(data.runs[0].status, store::RepStatus::Failed);
    // The root and the 40 spans kept while reading: never more in memory or on disk.
    assert_eq!(data.spans.len(), 41, "{:?}", data.spans.len());

    // A cap of 0, or above the most a rep keeps, is refused with the range.
    for cap in ["0", "2000001"] {
        let p = t.join("bad.toml");
        let text = std::fs::read_to_string(&exp).unwrap().replace(
            "max_spans_per_rep = 40",
            &format!("max_spans_per_rep = {cap}"),
        );
        std::fs::write(&p, text).unwrap();
        let e = fails(gapscope(t).arg("run").arg(&p));
        assert!(
            e.contains(&format!(
                "workload.max_spans_per_rep = {cap} is not within 1..=2000000"
            )),
            "{e}"
        );
    }
}

/// Rewrites a CSV table of `dir` after `edit`.
fn edit_table<T: serde::Serialize + serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    edit: impl FnOnce(&mut Vec<T>),
) {
    let path = dir.join(name);
    let mut rows: Vec<T> = store::read_csv(&path).unwrap();
    edit(&mut rows);
    let mut w = csv::Writer::from_path(&path).unwrap();
    for r in &rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
}

#[test]
fn impossible_gpu_rows_are_left_out_naming_the_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = fixture::write(
        t,
        &fixture::Options {
            gpu: true,
            all_failed: false,
        },
    );
    let before = RunData::load(&dir).unwrap();
    let (tel, _) = before.load_telemetry_checked().unwrap();
    let (act, dropped) = before.load_gpu_activity_checked().unwrap();
    assert!(dropped.is_empty(), "{dropped:?}");
    edit_table::<TelemetryRow>(&dir, store::TELEMETRY, |rows| {
        rows[0].sm_util_pct = Some(250);
        rows[1].t_ns = u64::MAX;
        rows[2].t_ns = rows[2].t_ns.saturating_add(7_200_000_000_000);
    });
    edit_table::<GpuActivityRow>(&dir, store::GPU_ACTIVITY, |rows| {
        let r = &mut rows[0];
        (r.start_ns, r.end_ns) = (r.end_ns, r.start_ns);
        rows[1].duration_ns = u64::MAX;
        rows[2].duration_ns = u64::MAX;
    });
    let data = RunData::load(&dir).unwrap();
    let (t2, why) = data.load_telemetry_checked().unwrap();
    assert_eq!(t2.len(), tel.len() - 3);
    let why = why.join("\n");
    for want in [
        "telemetry.csv, line 2: sm_util_pct = 250 is above 100 %",
        "telemetry.csv, line 3: t_ns = 18446744073709551615 is past the clock's range",
        "telemetry.csv, line 4: t_ns = ",
        "more than an hour outside rep",
    ] {
        assert!(why.contains(want), "{want}: {why}");
    }
    let (a2, why) = data.load_gpu_activity_checked().unwrap();
    assert_eq!(a2.len(), act.len() - 3);
    let why = why.join("\n");
    assert!(
        why.contains("gpu_activity.csv, line 2: ") && why.contains("before it starts"),
        "{why}"
    );
    assert!(
        why.contains("gpu_activity.csv, line 3: duration_ns = 18446744073709551615 is not")
            && why.contains("(and 1 more rows for the same reason)"),
        "{why}"
    );
    // A negative or NaN utilisation does not parse: the file is refused with its line,
    // and the report says so instead of failing.
    let path = dir.join(store::TELEMETRY);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = header.iter().position(|h| *h == "sm_util_pct").unwrap();
    let mut fields: Vec<String> = lines[1].split(',').map(String::from).collect();
    fields[col] = "NaN".into();
    lines[1] = fields.join(",");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let e = RunData::load(&dir)
        .unwrap()
        .load_telemetry()
        .unwrap_err()
        .to_string();
    assert!(e.contains("telemetry.csv") && e.contains("line 2"), "{e}");
    let out = t.join("report");
    gapscope(t)
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("telemetry.csv not used"), "{md}");
    assert!(md.contains("gpu_activity.csv, line 2: "), "{md}");
}
