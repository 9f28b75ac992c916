//! `gapscope run --cmd` measures the command, not a shell waiting for it: a command with
//! no shell syntax is run directly, and one with shell syntax through a shell that
//! `exec`s its last command, so the process whose CPU clock gapscope reads is the one
//! doing the work.

use gapscope::store::{RepStatus, RunData};

use crate::common;

/// About 80 ms of CPU in the shell that runs it (on the 2-core build VM).
const BUSY: &str = "sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'";

#[test]
fn the_process_measured_is_the_commands_with_or_without_shell_syntax() {
    let tmp = tempfile::tempdir().unwrap();
    let with_syntax = format!("cd . && {BUSY}");
    let out = common::gapscope(tmp.path())
        .args(["run", "--cmd", BUSY, "--cmd", &with_syntax])
        .args(["--name", "plain", "--name", "syntax"])
        .args(["--reps", "2", "--warmups", "0", "--quiet", "--results-dir"])
        .arg(tmp.path().join("results"))
        .assert()
        .success();
    let d = RunData::load(&common::run_dir_of(&out.get_output().stdout)).unwrap();
    let knob = |v: &str| {
        let m = d.meta.variants.iter().find(|m| m.name == v).unwrap();
        m.knobs["command"].clone()
    };
    // Split into words as a shell would: its quotes are gone, the script is one word.
    assert_eq!(knob("plain"), BUSY.replace('\'', ""));
    assert_eq!(knob("syntax"), format!("sh -c cd . && exec {BUSY}"));
    for r in &d.runs {
        assert_eq!(r.status, RepStatus::Ok, "{}", r.error);
        let root = d
            .spans
            .iter()
            .find(|s| s.rep == r.rep && s.parent_id.is_none())
            .unwrap();
        // A shell that forked and waited would show about 1 ms of its own CPU.
        let cpu = root
            .process_cpu_ns
            .get()
            .expect("the program's CPU clock was read");
        assert!(
            cpu >= 30_000_000,
            "{}: {cpu} ns of CPU: {root:?}",
            r.variant
        );
    }
}
