//! Runs that meet the world: gapscope killed while its program runs (nothing the
//! program started outlives it), a run folder that cannot be made (nothing is left),
//! a resume of a folder whose tables were gzipped (nothing is measured again or
//! changed), and a span tree 100,000 levels deep (every reader finishes, in linear
//! time). Every command runs under a time limit.

use crate::common;
use crate::fixture;

use std::path::Path;
use std::time::Duration;

use gapscope::store::{self, RunRow, SpanRow};

const LIMIT: Duration = Duration::from_secs(120);

/// `gapscope` in `tmp` under [`LIMIT`].
fn gapscope(tmp: &Path) -> assert_cmd::Command {
    let mut c = common::gapscope(tmp);
    c.timeout(LIMIT);
    c
}

/// Exit 1 with a message (never a panic nor a kill at the limit); its stderr.
fn fails(c: &mut assert_cmd::Command) -> String {
    let out = c.output().expect("gapscope runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

const TINY: &str = "name = \"tiny\"\n[workload]\ncircuit = \"porep\"\nlog2_constraints = 10\n\
                    batch = 1\nbackend = \"cpu\"\n[run]\nreps = 1\nwarmups = 0\n\
                    [[variant]]\nname = \"a\"\n";

// --- Programs end with their run. ---

/// Pids of the processes whose command line is exactly `argv` (zombies left out: they
/// have ended, and wait only for their reaper).
fn pids_running(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next());
            !matches!(state, Some(Some('Z')) | None)
        })
        .collect()
}

/// Polls `f` every 50 ms until it holds or `limit` passes.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

#[test]
fn what_a_build_or_prepare_step_starts_ends_with_the_step_and_with_a_killed_gapscope() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let id = std::process::id();
    // A prepare that leaves a process behind and exits, and a build that hangs (its
    // own process started by a shell): durations no other process sleeps for.
    let (left, hung) = (format!("1001.{id}"), format!("1002.{id}"));
    let exp = |name: &str, step: &str| {
        let p = t.join(format!("{name}.toml"));
        std::fs::write(
            &p,
            format!(
                "name = \"{name}\"\n[workload]\ncommand = [\"true\"]\n{step}\n\
                 [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n"
            ),
        )
        .unwrap();
        p
    };
    let gapscope = |exp: &Path| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("gapscope"))
            .arg("run")
            .arg(exp)
            .arg("--results-dir")
            .arg(t.join("results"))
            .current_dir(t)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let cleanup = |argv: &[&str]| {
        for pid in pids_running(argv) {
            // SAFETY: kill(2) of a pid this test found by its unique command line.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    };
    // The prepare's leftover ends when the step does, gapscope still running.
    let prepare = exp(
        "prep",
        &format!("prepare = [\"sh\", \"-c\", \"sleep {left} & true\"]"),
    );
    let status = gapscope(&prepare).wait().unwrap();
    let argv = ["sleep", left.as_str()];
    let gone = wait_for(Duration::from_secs(20), || pids_running(&argv).is_empty());
    cleanup(&argv);
    assert!(
        status.success() && gone,
        "{status:?}: sleep {left} outlived its prepare"
    );
    // The hanging build's process ends when gapscope is killed (SIGKILL).
    let build = exp(
        "build",
        &format!("build = [\"sh\", \"-c\", \"true && sleep {hung}\"]"),
    );
    let mut run = gapscope(&build);
    let argv = ["sleep", hung.as_str()];
    let started = wait_for(LIMIT, || !pids_running(&argv).is_empty());
    run.kill().unwrap();
    run.wait().unwrap();
    let gone = wait_for(Duration::from_secs(20), || pids_running(&argv).is_empty());
    cleanup(&argv);
    assert!(started, "the build never started");
    assert!(gone, "sleep {hung} outlived the killed gapscope");
}

#[test]
fn a_program_a_shell_started_ends_when_gapscope_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // A duration no other process on the machine sleeps for.
    let secs = format!("1000.{}", std::process::id());
    let exp = t.join("sleepy.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"sleepy\"\n[workload]\ncommand = [\"sh\", \"-c\", \"true && sleep {secs}\"]\n\
             [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n"
        ),
    )
    .unwrap();
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("gapscope"))
        .arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(t.join("results"))
        .current_dir(t)
        .env("GAPSCOPE_PARAMS_DIR", t.join("params"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let argv = ["sleep", secs.as_str()];
    let started = wait_for(LIMIT, || !pids_running(&argv).is_empty());
    run.kill().unwrap(); // SIGKILL: no handler of gapscope's runs
    run.wait().unwrap();
    assert!(started, "the program never started");
    let ended = wait_for(Duration::from_secs(20), || pids_running(&argv).is_empty());
    let left = pids_running(&argv);
    for pid in &left {
        // SAFETY: kill(2) of a pid this test found by its unique command line.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(
        ended,
        "sleep {secs} outlived the killed gapscope: pids {left:?}"
    );
}

#[test]
fn a_run_folder_that_cannot_be_written_leaves_no_hidden_partial_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = t.join("t.toml");
    std::fs::write(
        &exp,
        "name = \"t\"\n[workload]\ncommand = [\"true\"]\n[run]\nreps = 1\nwarmups = 0\n\
         [[variant]]\nname = \"a\"\n",
    )
    .unwrap();
    let results = t.join("results");
    // No file may grow past 0 bytes, as on a full disk (EFBIG where ENOSPC would be).
    let mut c = assert_cmd::Command::new("sh");
    c.args([
        "-c",
        "trap '' XFSZ; ulimit -f 0; exec \"$0\" run \"$1\" --results-dir \"$2\"",
    ])
    .arg(assert_cmd::cargo::cargo_bin("gapscope"))
    .arg(&exp)
    .arg(&results)
    .current_dir(t)
    .timeout(LIMIT);
    let e = fails(&mut c);
    assert!(e.contains("File too large"), "{e}");
    let left: Vec<String> = std::fs::read_dir(results.join("t"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_resume_of_a_complete_run_whose_spans_are_gzipped_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = t.join("tiny.toml");
    std::fs::write(&exp, TINY).unwrap();
    let dir = common::run_ok(t, &exp, &["--quiet"]);
    let spans = dir.join(store::SPANS);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &std::fs::read(&spans).unwrap()).unwrap();
    std::fs::write(dir.join("spans.csv.gz"), gz.finish().unwrap()).unwrap();
    std::fs::remove_file(&spans).unwrap();
    let files = |d: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let before = files(&dir);
    let out = gapscope(t)
        .arg("run")
        .arg("--resume")
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("runs again"), "{err}");
    assert!(
        files(&dir) == before,
        "the resume changed the folder: {err}"
    );
}

// --- Linear in depth. ---

/// The fixture's run folder rewritten so that each rep's root holds one chain of
/// `depth` spans, each the only child of the one before (on the root's thread).
fn deep_run(t: &Path, depth: u64) -> std::path::PathBuf {
    let src = fixture::write(&t.join("src"), &fixture::Options::default());
    let meta = store::read_meta(&src).unwrap();
    let runs: Vec<RunRow> = store::read_csv(&src.join(store::RUNS)).unwrap();
    let dir = t.join("deep").join("20260101T000000Z-deep");
    let mut w = store::RunWriter::create(&dir, &meta, "name = \"deep\"\n").unwrap();
    for r in &runs {
        let spans: Vec<SpanRow> = (0..=depth)
            .map(|i| {
                let mut s = SpanRow::sample();
                s.rep = r.rep;
                s.variant = r.variant.clone().into();
                s.span_id = i + 1;
                s.parent_id = (i > 0).then_some(i);
                s.name = if i == 0 { "prove" } else { "level" }.into();
                s.thread_id = fixture::MAIN_TID;
                s.start_ns = r.start_ns + i;
                s.end_ns = r.start_ns + r.wall_ns - i;
                s.duration_ns = s.end_ns - s.start_ns;
                s.self_ns = if i == depth { s.duration_ns } else { 2 };
                s
            })
            .collect();
        w.append_rep(r, &spans).unwrap();
    }
    dir
}

#[test]
fn a_span_tree_100_000_levels_deep_is_read_summarised_and_diffed() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = deep_run(t, 100_000);
    let started = std::time::Instant::now();
    // The summary shows the phases (the root here), the diff every span family.
    for (cmd, shows) in [("summary", "total (prove)"), ("diff", "level")] {
        let out = gapscope(t)
            .arg(cmd)
            .arg(&dir)
            .output()
            .expect("gapscope runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{cmd}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(shows), "{cmd}: {text}");
    }
    eprintln!("summary and diff at depth 100,000: {:?}", started.elapsed());
}
