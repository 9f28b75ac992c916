//! Fault tests: what a run folder looks like after a kill -9 at random points, a full
//! disk, two resumes at once, a cut or edited folder, a worker that crashes or hangs,
//! Ctrl-C, and a kill while params are generated. Each ends with the folder checked
//! whole: every scheduled rep once, every committed rep with all of its spans, the
//! files under the headers of a fresh run.
//!
//! The runs prove a dense chain circuit of 2^4 constraints (about 0.1 s per rep in a
//! debug build), so that the suite takes seconds; what is tested is the store and the
//! runner, not the prover.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gapscope::store::{RunData, RunRow};

use crate::common;
use common::{gapscope, run_ok};

const EXP: &str = r#"name = "faults"
[workload]
circuit = "chain"
log2_constraints = 4
batch = 2
backend = "cpu"
[run]
reps = 8
warmups = 1
[[variant]]
name = "baseline"
[[variant]]
name = "candidate"
drop = "async"
"#;

/// Slots in EXP's schedule: (reps + warmups) per variant.
const SLOTS: u32 = 18;

fn write_exp(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("faults.toml");
    std::fs::write(&p, body).unwrap();
    p
}

/// `gapscope ARGS` started in `tmp` (params cache `tmp/params`), not waited for.
fn spawn(tmp: &Path, args: &[&std::ffi::OsStr]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("gapscope"))
        .current_dir(tmp)
        .env("GAPSCOPE_PARAMS_DIR", tmp.join("params"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run_args<'a>(exp: &'a Path, results: &'a Path) -> Vec<&'a std::ffi::OsStr> {
    vec![
        "run".as_ref(),
        exp.as_os_str(),
        "--quiet".as_ref(),
        "--results-dir".as_ref(),
        results.as_os_str(),
    ]
}

fn resume_args(dir: &Path) -> Vec<&std::ffi::OsStr> {
    vec![
        "run".as_ref(),
        "--resume".as_ref(),
        dir.as_os_str(),
        "--quiet".as_ref(),
    ]
}

/// The one run folder under `results/faults/`, if made yet.
fn run_folder(results: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results.join("faults"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        // A folder still being made is hidden (`.<run id>.partial`) until complete.
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert!(dirs.len() <= 1, "one run folder expected: {dirs:?}");
    dirs.pop()
}

/// Committed rows of runs.csv (complete lines after the header).
fn committed(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs.csv"))
        .map(|t| t.matches('\n').count().saturating_sub(1))
        .unwrap_or(0)
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// First line of each CSV of a run folder.
fn headers(dir: &Path) -> Vec<String> {
    ["runs.csv", "spans.csv", "telemetry.csv", "gpu_activity.csv"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(dir.join(f))
                .unwrap()
                .lines()
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The folder read whole (the reader refuses duplicates and cut spans), every slot of
/// the schedule once, extra reps only as resume warm-ups, and `headers` as a fresh run's.
fn assert_whole(dir: &Path, fresh_headers: &[String]) -> RunData {
    let d = RunData::load(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let by_rep: HashMap<u32, &RunRow> = d.runs.iter().map(|r| (r.rep, r)).collect();
    for rep in 0..SLOTS {
        assert!(
            by_rep.contains_key(&rep),
            "rep {rep} lost: {:?}",
            by_rep.keys()
        );
    }
    for r in d.runs.iter().filter(|r| r.rep >= SLOTS) {
        assert!(
            r.warmup,
            "a rep past the schedule is a resume warm-up: {r:?}"
        );
    }
    for r in &d.runs {
        let n = d.spans.iter().filter(|s| s.rep == r.rep).count();
        assert_eq!(Some(n as u32), r.span_rows, "rep {} spans", r.rep);
        assert_eq!(
            d.spans
                .iter()
                .filter(|s| s.rep == r.rep && s.name == "prove")
                .count(),
            1,
            "rep {}",
            r.rep
        );
    }
    assert_eq!(headers(dir), fresh_headers, "schema of {}", dir.display());
    assert!(d.meta.completed_utc.is_some());
    d
}

/// A complete reference run under `tmp/ref` (which also fills the params cache): its
/// duration and headers.
fn reference(tmp: &Path, exp: &Path) -> (Duration, Vec<String>) {
    let t = Instant::now();
    gapscope(tmp)
        .args(run_args(exp, &tmp.join("ref")))
        .assert()
        .success();
    let took = t.elapsed();
    (took, headers(&run_folder(&tmp.join("ref")).unwrap()))
}

/// A small xorshift generator; the seed is printed so that a failure can be replayed
/// (GAPSCOPE_FAULT_SEED).
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("GAPSCOPE_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("fault seed: GAPSCOPE_FAULT_SEED={seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[test]
fn kill_9_at_random_points_then_resume_loses_and_repeats_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = write_exp(t, EXP);
    let (full, fresh) = reference(t, &exp);
    let results = t.join("results");
    let mut rng = Rng::new();
    let mut kills = 0;
    for _ in 0..40 {
        if kills == 4 || run_folder(&results).is_some_and(|d| committed(&d) >= SLOTS as usize) {
            break;
        }
        let args = match run_folder(&results) {
            Some(dir) => {
                let owned: Vec<std::ffi::OsString> =
                    resume_args(&dir).iter().map(|a| a.to_os_string()).collect();
                owned
            }
            None => run_args(&exp, &results)
                .iter()
                .map(|a| a.to_os_string())
                .collect(),
        };
        let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let mut child = spawn(t, &refs);
        // Anywhere in the first 60% of a whole run: during setup, a rep or a write.
        let ms = rng.below(full.as_millis() as u64 * 6 / 10);
        std::thread::sleep(Duration::from_millis(ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        if !finished {
            kills += 1;
        }
    }
    eprintln!("{kills} kills");
    let dir = run_folder(&results).expect("a run folder after the kills");
    gapscope(t).args(resume_args(&dir)).assert().success();
    assert_whole(&dir, &fresh);
}

#[test]
fn two_resumes_of_one_folder_at_once_one_runs_and_the_other_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = write_exp(t, EXP);
    let (_, fresh) = reference(t, &exp);
    let results = t.join("results");
    // A run stopped after its third rep.
    let mut first = spawn(t, &run_args(&exp, &results));
    let dir = loop {
        if let Some(d) = run_folder(&results).filter(|d| committed(d) >= 3) {
            break d;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    first.kill().unwrap();
    first.wait().unwrap();
    let a = spawn(t, &resume_args(&dir));
    let b = spawn(t, &resume_args(&dir));
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let ok = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "exactly one resume runs: {outs:?}");
    let refused = outs.iter().find(|o| !o.status.success()).unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let e = String::from_utf8_lossy(&refused.stderr);
    assert!(
        e.contains("being written by another gapscope process"),
        "{e}"
    );
    assert_whole(&dir, &fresh);
}

#[test]
fn a_full_disk_stops_the_run_with_the_file_named_and_resume_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = write_exp(t, EXP);
    let (_, fresh) = reference(t, &exp);
    let spans_bytes = std::fs::metadata(run_folder(&t.join("ref")).unwrap().join("spans.csv"))
        .unwrap()
        .len();
    // No file may grow past a third of a whole run's spans.csv: the disk is full then.
    // (RLIMIT_FSIZE with SIGXFSZ ignored: a write past it fails with EFBIG, as one on a
    // full disk fails with ENOSPC.)
    let limit = spans_bytes / 3;
    let results = t.join("results");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gapscope"));
    cmd.current_dir(t)
        .env("GAPSCOPE_PARAMS_DIR", t.join("params"))
        .args(run_args(&exp, &results));
    // SAFETY: setrlimit and signal are async-signal-safe; the closure allocates nothing.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("spans.csv") && e.contains("disk") && e.contains("--resume"),
        "{e}"
    );
    let dir = run_folder(&results).unwrap();
    let kept = committed(&dir);
    assert!(kept > 0 && kept < SLOTS as usize, "{kept} reps kept");
    // The finished reps read as they are; the resume finishes the run.
    RunData::load(&dir).unwrap();
    gapscope(t).args(resume_args(&dir)).assert().success();
    assert_whole(&dir, &fresh);
}

#[test]
fn a_cut_or_edited_folder_is_repaired_or_refused_by_resume_saying_why() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = write_exp(t, EXP);
    let (_, fresh) = reference(t, &exp);
    let dir = t.join(run_ok(t, &exp, &["--quiet"]));
    let copy = |name: &str| {
        let to = t.join(name);
        let status = Command::new("cp").arg("-r").arg(&dir).arg(&to).status();
        assert!(status.unwrap().success());
        to
    };

    // spans.csv cut mid-file (what the truncation error once advised resuming): the reps
    // whose spans went are run again, none stays with its spans missing.
    let cut = copy("cut");
    let spans = cut.join("spans.csv");
    let text = std::fs::read(&spans).unwrap();
    std::fs::write(&spans, &text[..text.len() / 2]).unwrap();
    gapscope(t)
        .args(["diff".as_ref(), cut.as_os_str()])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("was cut or edited"));
    let out = gapscope(t).args(resume_args(&cut)).assert().success();
    let e = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(e.contains("runs again: spans.csv holds"), "{e}");
    assert_whole(&cut, &fresh);
    let out = gapscope(t)
        .args(["diff".as_ref(), cut.as_os_str()])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let total = text
        .lines()
        .find(|l| l.starts_with("end to end (prove)"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        !total.contains(" 0 ns "),
        "reps without spans entered the diff: {total}"
    );

    // An emptied runs.csv: nothing was committed; the resume starts over under a header.
    let empty = copy("empty");
    std::fs::write(empty.join("runs.csv"), b"").unwrap();
    gapscope(t).args(resume_args(&empty)).assert().success();
    assert_whole(&empty, &fresh);

    // An edited experiment copy (batch 2 -> 1): refused, naming the difference.
    let edited = copy("edited");
    let toml = edited.join("experiment.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(&toml, text.replace("batch = 2", "batch = 1")).unwrap();
    std::fs::write(edited.join("runs.csv"), b"").unwrap();
    gapscope(t)
        .args(resume_args(&edited))
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "batch: 2 in meta.json, 1 in experiment.toml",
        ));

    // Resumed from another working folder: its params are not there; refused, not
    // regenerated (new params would not be those the first reps were proved with).
    let elsewhere = t.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let moved = copy("moved");
    std::fs::write(moved.join("runs.csv"), b"").unwrap();
    Command::new(assert_cmd::cargo::cargo_bin("gapscope"))
        .current_dir(&elsewhere)
        .env_remove("GAPSCOPE_PARAMS_DIR")
        .args(resume_args(&moved))
        .output()
        .map(|o| {
            assert_eq!(o.status.code(), Some(1), "{o:?}");
            let e = String::from_utf8_lossy(&o.stderr);
            assert!(
                e.contains("--params-dir") && e.contains("are not in"),
                "{e}"
            );
        })
        .unwrap();
    assert!(
        !elsewhere.join("params").exists(),
        "no params were generated"
    );
}

#[test]
fn a_worker_that_crashes_or_hangs_fails_its_rep_and_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let body = EXP.replace("reps = 8", "reps = 1").replace(
        "warmups = 1",
        "warmups = 0\nprocess = \"per_rep\"\nrep_timeout_s = 2",
    );
    let exp = write_exp(t, &body);
    for (debug, why) in [("crash", "signal"), ("hang", "timed out")] {
        let out = gapscope(t)
            .args(run_args(&exp, &t.join(debug)))
            .args(["--debug-worker", debug])
            .assert()
            // No variant has a successful rep.
            .code(gapscope::cli::EXIT_NO_OK_REP);
        let o = out.get_output();
        let dir = common::run_dir_of(&o.stdout);
        let d = RunData::load(&dir).unwrap();
        assert_eq!(d.runs.len(), 2, "{debug}: every rep recorded");
        for r in &d.runs {
            assert!(!r.checked, "{debug}: {r:?}");
            assert!(r.error.contains(why), "{debug}: {}", r.error);
        }
        assert!(String::from_utf8_lossy(&o.stderr).contains("2 rep(s) failed"));
    }
}

/// Sends `sig` to `child`.
fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

#[test]
fn ctrl_c_finishes_the_rep_in_progress_prints_how_to_resume_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let exp = write_exp(t, EXP);
    let (_, fresh) = reference(t, &exp);
    let results = t.join("results");
    let child = spawn(t, &run_args(&exp, &results));
    assert!(wait_until(Duration::from_secs(60), || {
        run_folder(&results).is_some_and(|d| committed(&d) >= 2)
    }));
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    let dir = run_folder(&results).unwrap();
    assert!(
        e.contains("finishing the rep in progress")
            && e.contains(&format!("gapscope run --resume {}", dir.display())),
        "{e}"
    );
    // Stopped between reps: nothing half-written, and the folder reads as it is.
    let kept = committed(&dir);
    assert!(kept < SLOTS as usize, "stopped early: {kept}");
    let text = std::fs::read_to_string(dir.join("spans.csv")).unwrap();
    assert!(text.ends_with('\n'));
    gapscope(t)
        .args(["summary".as_ref(), dir.as_os_str()])
        .assert()
        .success()
        .stderr(predicates::str::contains("incomplete run"));
    // A second Ctrl-C abandons the rep in progress at once, with the same hint.
    let child = spawn(t, &resume_args(&dir));
    assert!(wait_until(Duration::from_secs(60), || committed(&dir) > kept));
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(50));
    signal(&child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--resume"), "{e}");
    gapscope(t).args(resume_args(&dir)).assert().success();
    assert_whole(&dir, &fresh);
}

/// Children of `pid` (from /proc) whose command line contains `arg`.
fn children_with(pid: u32, arg: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        // pid (comm) state ppid …: the comm may hold spaces, so split after its ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        if ppid == Some(pid) && String::from_utf8_lossy(&cmdline).contains(arg) {
            out.push(p);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

#[test]
fn killing_the_run_while_params_are_generated_kills_the_generation_too() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // Params for porep 2^13 take seconds to generate in a debug build.
    let exp = write_exp(
        t,
        &EXP.replace("circuit = \"chain\"", "circuit = \"porep\"")
            .replace("log2_constraints = 4", "log2_constraints = 13"),
    );
    let mut parent = spawn(t, &run_args(&exp, &t.join("results")));
    let mut child = Vec::new();
    assert!(
        wait_until(Duration::from_secs(60), || {
            child = children_with(parent.id(), "__params");
            !child.is_empty()
        }),
        "no __params child seen"
    );
    parent.kill().unwrap();
    parent.wait().unwrap();
    let gone = wait_until(Duration::from_secs(3), || !alive(child[0]));
    if !gone {
        // SAFETY: kill(2) of the orphan this test made, so that it does not run on.
        unsafe { libc::kill(child[0] as libc::pid_t, libc::SIGKILL) };
    }
    assert!(gone, "__params child {} outlived its parent", child[0]);
}

#[test]
fn a_span_closing_after_its_rep_was_collected_is_counted_on_the_next_rep_and_never_misfiled() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let body = EXP
        .replace("reps = 8", "reps = 2")
        .replace("warmups = 1", "warmups = 0");
    let exp = write_exp(t, &body);
    let out = gapscope(t)
        .args(run_args(&exp, &t.join("results")))
        .arg("--debug-late-span")
        .assert()
        .success();
    let o = out.get_output();
    let d = RunData::load(&common::run_dir_of(&o.stdout)).unwrap();
    // The late span belongs to no rep's rows: its rep was written before it closed.
    assert!(d.spans.iter().all(|s| s.name != "late_span"));
    let root = |rep: u32| {
        let r = d
            .spans
            .iter()
            .find(|s| s.rep == rep && s.parent_id.is_none() && s.name == "prove")
            .unwrap();
        serde_json::from_str::<serde_json::Value>(&r.attrs).unwrap()
    };
    assert!(root(0).get("late_spans").is_none(), "{}", root(0));
    for rep in 1..4u32 {
        let a = root(rep);
        assert_eq!(a["late_spans"], 1, "{a}");
        assert_eq!(a["late_spans_rep"], rep - 1, "{a}");
        assert_eq!(a["late_span_names"][0], "late_span", "{a}");
    }
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("rep 0 (baseline): 1 span(s) closed after the rep was collected (late_span)"),
        "{e}"
    );
}
