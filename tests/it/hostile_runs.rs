//! Runs that meet the world: gapscope killed or interrupted while its program runs, a
//! program or a build that leaves a process behind, in its group, in another group (a
//! job of a shell with job control) or in a session of its own (nothing the program
//! started outlives its rep, nor gapscope, killed or not), a run folder that cannot be
//! made (nothing is left), a resume of a folder whose tables were gzipped (nothing is
//! measured again or changed), and a span tree 100,000 levels deep (every reader
//! finishes, in linear time). Every command runs under a time limit.

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
    let gapscope = |exp: &Path| common::run_process(t, exp).spawn().unwrap();
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
    let mut run = common::run_process(t, &exp).spawn().unwrap();
    let argv = ["sleep", secs.as_str()];
    let started = wait_for(LIMIT, || !pids_running(&argv).is_empty());
    run.kill().unwrap(); // SIGKILL: no handler of gapscope's runs
    run.wait().unwrap();
    assert!(started, "the program never started");
    let ended = wait_for(Duration::from_secs(20), || pids_running(&argv).is_empty());
    let left = pids_running(&argv);
    cleanup(&argv);
    assert!(
        ended,
        "sleep {secs} outlived the killed gapscope: pids {left:?}"
    );
}

/// The pids written to the files of `dir` whose names end with `suffix`.
fn pids_in(dir: &Path, suffix: &str) -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok()?.trim().parse().ok())
        .collect();
    pids.sort();
    pids
}

/// Whether `pid` runs with exactly `argv` (not a zombie, not a pid reused since).
fn runs(pid: i32, argv: &[&str]) -> bool {
    pids_running(argv).contains(&pid)
}

/// SIGKILL to what a test left running (found by its unique command line), after its
/// checks were taken.
fn cleanup(argv: &[&str]) {
    for pid in pids_running(argv) {
        // SAFETY: kill(2) of a pid this test found by its unique command line.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// A program that leaves a process in a session of its own (`setsid`, as a daemon
/// does), which writes its pid to `daemon.<program's pid>.pid` once it runs; the program
/// then exits, or with `hang` as its argument sleeps `hung` seconds.
fn escaping_program(dir: &Path, daemon: &str, hung: &str) -> std::path::PathBuf {
    let p = dir.join("escape.sh");
    std::fs::write(
        &p,
        format!(
            "f=daemon.$$\n\
             setsid sh -c \"echo \\$\\$ > $f.w; mv $f.w $f.pid; exec sleep {daemon}\" &\n\
             while [ ! -s $f.pid ]; do :; done\n\
             if [ \"$1\" = hang ]; then exec sleep {hung}; fi\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_process_a_program_leaves_in_a_session_of_its_own_ends_with_its_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let id = std::process::id();
    let (daemon, hung) = (format!("1031.{id}"), format!("1032.{id}"));
    escaping_program(t, &daemon, &hung);
    // Two reps of a program that escapes, and two of one that does not (whose reps,
    // run between theirs, are untouched).
    let exp = t.join("escape.toml");
    std::fs::write(
        &exp,
        "name = \"escape\"\n[workload]\ncommand = [\"sh\", \"escape.sh\"]\n\
         [run]\nreps = 2\nwarmups = 0\n[[variant]]\nname = \"escapes\"\n\
         [[variant]]\nname = \"plain\"\ncommand = [\"sh\", \"-c\", \"true && sleep 0.2\"]\n",
    )
    .unwrap();
    let dir = common::run_ok(t, &exp, &["--quiet"]);
    let argv = ["sleep", daemon.as_str()];
    let pids = pids_in(t, ".pid");
    let left = || -> Vec<i32> { pids.iter().copied().filter(|&p| runs(p, &argv)).collect() };
    wait_for(Duration::from_secs(20), || left().is_empty());
    let running = left();
    cleanup(&argv);
    assert_eq!(pids.len(), 2, "one process left per rep: {pids:?}");
    assert!(
        running.is_empty(),
        "sleep {daemon} outlived its rep: {running:?} of {pids:?}"
    );
    let rows: Vec<RunRow> = store::read_csv(&dir.join(store::RUNS)).unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert!(
        rows.iter().all(|r| r.checked && r.error.is_empty()),
        "{rows:?}"
    );
    // A rep past its limit: the program is killed, and what it left outside its group.
    for e in std::fs::read_dir(t).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("daemon.") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let exp = t.join("hang.toml");
    std::fs::write(
        &exp,
        "name = \"hang\"\n[workload]\ncommand = [\"sh\", \"escape.sh\", \"hang\"]\n\
         [run]\nreps = 1\nwarmups = 0\nrep_timeout_s = 1\n[[variant]]\nname = \"a\"\n",
    )
    .unwrap();
    let dir = common::run_exit(t, &exp, &["--quiet"], gapscope::cli::EXIT_NO_OK_REP);
    let pids = pids_in(t, ".pid");
    let left = || -> Vec<i32> { pids.iter().copied().filter(|&p| runs(p, &argv)).collect() };
    wait_for(Duration::from_secs(20), || left().is_empty());
    let running = left();
    cleanup(&argv);
    cleanup(&["sleep", hung.as_str()]);
    assert_eq!(pids.len(), 1, "{pids:?}");
    assert!(
        running.is_empty(),
        "sleep {daemon} outlived the rep that timed out: {running:?}"
    );
    let rows: Vec<RunRow> = store::read_csv(&dir.join(store::RUNS)).unwrap();
    assert!(
        rows.len() == 1 && rows[0].error.contains("rep_timeout_s"),
        "{rows:?}"
    );
}

#[test]
fn a_job_a_program_puts_in_a_group_of_its_own_ends_with_its_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let secs = format!("1061.{}", std::process::id());
    // A shell with job control: its background job runs in a group of its own, in
    // gapscope's session, and is disowned; the shell writes the job's pid and group and
    // exits at once. Only the group's cookie, in the job's environment, says whose it is.
    let exp = t.join("job.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"job\"\n[workload]\ncommand = [\"bash\", \"-c\", \
             \"set -m; sleep {secs} & read -r _ _ _ _ g _ < /proc/$!/stat; \
             echo $! $g > job.w; mv job.w job.ids; disown\"]\n\
             [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n"
        ),
    )
    .unwrap();
    let dir = common::run_ok(t, &exp, &["--quiet"]);
    let argv = ["sleep", secs.as_str()];
    let ids: Vec<i32> = std::fs::read_to_string(t.join("job.ids"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    // gapscope has exited: nothing of the rep may be left.
    let gone = wait_for(Duration::from_secs(10), || {
        ids.first().is_some_and(|&p| !runs(p, &argv))
    });
    let running = pids_running(&argv);
    cleanup(&argv);
    // The job led a group of its own (its group is its pid): the rep's group's kill
    // could not reach it.
    assert!(ids.len() == 2 && ids[0] == ids[1], "pid and group: {ids:?}");
    assert!(
        gone,
        "sleep {secs} (pid {ids:?}), a job in a group of its own, outlived its rep and \
         gapscope: {running:?}"
    );
    let rows: Vec<RunRow> = store::read_csv(&dir.join(store::RUNS)).unwrap();
    assert!(
        rows.len() == 1 && rows[0].checked && rows[0].error.is_empty(),
        "{rows:?}"
    );
}

#[test]
fn a_process_a_program_leaves_in_a_session_of_its_own_ends_when_gapscope_is_killed() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let id = std::process::id();
    let (daemon, hung) = (format!("1062.{id}"), format!("1063.{id}"));
    // The program leaves `sleep {daemon}` in a session of its own (setsid, not a group
    // leader, calls setsid(2) and execs: $! is its pid) and hangs.
    let exp = t.join("killed.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"killed\"\n[workload]\ncommand = [\"sh\", \"-c\", \
             \"setsid sleep {daemon} & echo $! > d.w; mv d.w d.pid; exec sleep {hung}\"]\n\
             [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n"
        ),
    )
    .unwrap();
    let mut run = common::run_process(t, &exp).spawn().unwrap();
    let (argv, hung_argv) = (["sleep", daemon.as_str()], ["sleep", hung.as_str()]);
    let mut pid = 0;
    let started = wait_for(LIMIT, || {
        pid = pids_in(t, ".pid").first().copied().unwrap_or(0);
        pid > 0 && runs(pid, &argv) && !pids_running(&hung_argv).is_empty()
    });
    // SAFETY: getsid(2) only reads a process's session.
    let (sid, gapscope_sid) = unsafe { (libc::getsid(pid), libc::getsid(run.id() as i32)) };
    run.kill().unwrap(); // SIGKILL: no handler of gapscope's runs
    run.wait().unwrap();
    let gone = wait_for(Duration::from_secs(10), || !runs(pid, &argv));
    let hung_gone = wait_for(Duration::from_secs(10), || {
        pids_running(&hung_argv).is_empty()
    });
    cleanup(&argv);
    cleanup(&hung_argv);
    assert!(started, "the program never started");
    assert!(
        sid > 0 && sid != gapscope_sid,
        "{pid} stayed in the session"
    );
    assert!(
        gone,
        "sleep {daemon} (pid {pid}), in a session of its own, outlived the killed gapscope"
    );
    assert!(hung_gone, "sleep {hung} outlived the killed gapscope");
}

#[test]
fn what_a_revisions_build_leaves_running_ends_with_the_build() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let id = std::process::id();
    let (stray, daemon) = (format!("1041.{id}"), format!("1042.{id}"));
    // A repository whose build leaves a process in its group and one in a session of
    // its own, each writing its pid here.
    let repo = t.join("repo");
    std::fs::create_dir(&repo).unwrap();
    let out = t.display();
    std::fs::write(
        repo.join("build.sh"),
        format!(
            "sleep {stray} & echo $! > {out}/stray.pid\n\
             setsid sh -c 'echo $$ > {out}/d.w; mv {out}/d.w {out}/daemon.pid; \
             exec sleep {daemon}' &\n\
             while [ ! -s {out}/daemon.pid ]; do :; done\n"
        ),
    )
    .unwrap();
    common::git(&repo, &["init", "-q", "-b", "main"]);
    common::git(&repo, &["add", "build.sh"]);
    common::git(&repo, &["commit", "-q", "-m", "build"]);
    let exp = t.join("rev.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"rev\"\n[workload]\ncommand = [\"true\"]\nbuild = [\"sh\", \"build.sh\"]\n\
             [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"there\"\nrev = \"main\"\n\
             repo = \"{}\"\n",
            repo.display()
        ),
    )
    .unwrap();
    let mut c = gapscope(t);
    c.arg("run")
        .arg(&exp)
        .arg("--results-dir")
        .arg(t.join("results"))
        .arg("--quiet")
        .env("GAPSCOPE_REV_CACHE", t.join("revs"));
    let out = c.output().expect("gapscope runs");
    let all = [
        (pids_in(t, "stray.pid"), stray.as_str()),
        (pids_in(t, "daemon.pid"), daemon.as_str()),
    ];
    let left = || -> Vec<i32> {
        all.iter()
            .flat_map(|(pids, secs)| pids.iter().filter(|&&p| runs(p, &["sleep", secs])))
            .copied()
            .collect()
    };
    wait_for(Duration::from_secs(20), || left().is_empty());
    let running = left();
    cleanup(&["sleep", stray.as_str()]);
    cleanup(&["sleep", daemon.as_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.iter().all(|(pids, _)| pids.len() == 1),
        "the build never wrote its pids: {all:?}"
    );
    assert!(
        running.is_empty(),
        "left running after the revision's build: {running:?} of {all:?}"
    );
}

#[test]
fn ctrl_c_twice_during_a_programs_rep_ends_its_processes_and_keeps_the_reps_before() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let secs = format!("1051.{}", std::process::id());
    // The first rep ends at once; the second records its shell's pid and hangs in a
    // process of that shell's.
    std::fs::write(
        t.join("prog.sh"),
        format!(
            "if [ -e first.done ]; then echo $$ > prog.pid; true && sleep {secs}; \
             else touch first.done; fi\n"
        ),
    )
    .unwrap();
    let exp = t.join("hang.toml");
    std::fs::write(
        &exp,
        "name = \"hang\"\n[workload]\ncommand = [\"sh\", \"prog.sh\"]\n\
         [run]\nreps = 2\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
    )
    .unwrap();
    let results = t.join("results");
    let mut run = common::run_process(t, &exp)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let (mut pipe, err) = (run.stderr.take().unwrap(), err.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut pipe, &mut buf) {
                if n == 0 {
                    break;
                }
                err.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let said = |what: &str| err.lock().unwrap().contains(what);
    let argv = ["sleep", secs.as_str()];
    let started = wait_for(LIMIT, || !pids_running(&argv).is_empty());
    let shell: i32 = std::fs::read_to_string(t.join("prog.pid"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let sig = |run: &std::process::Child| {
        // SAFETY: kill(2) of the gapscope this test started and has not reaped.
        unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGINT) };
    };
    sig(&run);
    // The second once the first was taken (two at once may arrive as one).
    let first = wait_for(LIMIT, || said("finishing the rep in progress"));
    sig(&run);
    let asked = std::time::Instant::now();
    let mut status = None;
    wait_for(Duration::from_secs(20), || {
        status = run.try_wait().unwrap();
        status.is_some()
    });
    let took = asked.elapsed();
    if status.is_none() {
        run.kill().unwrap();
    }
    run.wait().unwrap();
    let sleep_gone = wait_for(Duration::from_secs(20), || pids_running(&argv).is_empty());
    let shell_gone = wait_for(Duration::from_secs(20), || {
        !std::fs::read(format!("/proc/{shell}/cmdline")).is_ok_and(|c| c == b"sh\0prog.sh\0")
    });
    cleanup(&argv);
    reader.join().unwrap();
    let err = err.lock().unwrap().clone();
    assert!(
        started && shell > 0 && first,
        "{started} {shell} {first}: {err}"
    );
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{took:?}: {err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(sleep_gone, "sleep {secs} outlived gapscope");
    assert!(shell_gone, "the program's shell {shell} outlived gapscope");
    // The rep before is kept, and the folder reads as an incomplete run.
    let dir = std::fs::read_dir(results.join("hang"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    assert!(
        err.contains(&format!("--resume {}", dir.display())),
        "{err}"
    );
    let rows: Vec<RunRow> = store::read_csv(&dir.join(store::RUNS)).unwrap();
    assert!(rows.len() == 1 && rows[0].checked, "{rows:?}");
    gapscope(t)
        .arg("summary")
        .arg(&dir)
        .assert()
        .success()
        .stderr(predicates::str::contains("incomplete run"));
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
