use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::lifeline::{step_in_group, Group};

/// Whether `pid` runs with exactly `argv` (a zombie or a reused pid does not).
fn runs(pid: i32, argv: &[&str]) -> bool {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
}

/// Polls `f` every 20 ms until it holds or `limit` passes.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// The pid a step wrote to `file` (renamed into place once whole); 0 if none came.
fn pid_in(file: &Path) -> i32 {
    let mut pid = 0;
    wait_for(Duration::from_secs(20), || {
        pid = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        pid > 0
    });
    pid
}

/// The state letter of `pid` (`Z` for a zombie).
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn kill(pid: i32) {
    // SAFETY: kill(2) of a pid this test started (or found by its unique command line).
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

#[test]
fn a_groups_end_ends_what_left_it_for_a_session_and_spares_the_other_children() {
    let tmp = tempfile::tempdir().unwrap();
    let id = std::process::id();
    let (daemon, stray, worker) = (
        format!("1011.{id}"),
        format!("1012.{id}"),
        format!("1013.{id}"),
    );
    let (stray_file, daemon_file) = (tmp.path().join("stray"), tmp.path().join("daemon"));
    let mut worker_child = Command::new("sleep")
        .arg(&worker)
        .process_group(0)
        .spawn()
        .unwrap();
    let mut exited = Command::new("sh")
        .args(["-c", "exit 7"])
        .process_group(0)
        .spawn()
        .unwrap();
    // A step that leaves a process in a session of its own and one in its group, both
    // orphaned when it exits; each writes its pid once it runs as it will.
    let script = format!(
        "setsid sh -c 'echo $$ > {d}.w; mv {d}.w {d}; exec sleep {daemon}' & \
         sleep {stray} & echo $! > {s}.w; mv {s}.w {s}",
        d = daemon_file.display(),
        s = stray_file.display(),
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut group = step_in_group(&mut cmd);
    assert!(group.id().is_some(), "no group was made");
    let status = cmd.status().unwrap();
    // (The other child has exited by now, its status not taken yet.)
    let zombie = wait_for(Duration::from_secs(20), || {
        state(exited.id() as i32) == Some('Z')
    });
    let pids = [pid_in(&stray_file), pid_in(&daemon_file)];
    let before = (
        wait_for(Duration::from_secs(20), || {
            runs(pids[0], &["sleep", &stray])
        }),
        wait_for(Duration::from_secs(20), || {
            runs(pids[1], &["sleep", &daemon])
        }),
    );
    // The daemon is in another session, so the group's kill alone would miss it.
    // SAFETY: getsid(2) only reads a process's session.
    let sid = |p: i32| unsafe { libc::getsid(p) };
    let escaped = sid(pids[1]) != sid(0);
    group.end();
    let gone = |p: &i32, argv: &[&str]| wait_for(Duration::from_secs(5), || !runs(*p, argv));
    let stray_gone = gone(&pids[0], &["sleep", &stray]);
    let daemon_gone = gone(&pids[1], &["sleep", &daemon]);
    let worker_alive = worker_child.try_wait().unwrap().is_none();
    let exit_code = exited.wait().unwrap().code();
    kill(worker_child.id() as i32);
    let _ = worker_child.wait();
    for (p, secs) in pids.into_iter().zip([&stray, &daemon]) {
        if runs(p, &["sleep", secs]) {
            kill(p);
        }
    }
    assert!(status.success() && zombie, "{status:?} {zombie}");
    assert_eq!(before, (true, true), "{pids:?}");
    assert!(escaped, "the daemon stayed in the session: {pids:?}");
    assert!(stray_gone, "the process left in the group outlived its end");
    assert!(
        daemon_gone,
        "the process that left for its own session outlived the end"
    );
    assert!(worker_alive, "a child in a group of its own was killed");
    assert_eq!(exit_code, Some(7), "another child's exit status was taken");
}

#[test]
fn a_group_made_and_ended_has_no_member_left_zombie_or_not() {
    // The watcher comes to this process (a subreaper while a group lives) and is reaped
    // when the group ends: no child in the group remains, zombie or not.
    let mut group = Group::new();
    let g = group.id().expect("a group is made");
    // SAFETY: signal 0 only asks whether the group has a member (its watcher).
    assert_eq!(unsafe { libc::kill(-g, 0) }, 0, "the group has no watcher");
    group.end();
    // SAFETY: as above.
    let left = unsafe { libc::kill(-g, 0) } == 0;
    assert!(!left, "group {g} has members after its end");
    assert!(group.id().is_none());
}
