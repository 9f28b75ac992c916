//! What the `gapscope run` test files share: the command, run in a temp folder with its
//! own params cache, and the run folder it prints last.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// `gapscope` with `tmp` as its working folder and params cache `tmp/params`.
pub fn gapscope(tmp: &Path) -> Command {
    let mut c = Command::cargo_bin("gapscope").unwrap();
    c.current_dir(tmp)
        .env("GAPSCOPE_PARAMS_DIR", tmp.join("params"));
    c
}

/// `gapscope run EXP` with results under `tmp/results`, as a process for a test to
/// spawn, signal and kill: working folder `tmp`, params cache `tmp/params`, stdout and
/// stderr discarded (a test that reads stderr pipes it instead).
#[allow(dead_code)] // not every test file that shares this module spawns runs
pub fn run_process(tmp: &Path, exp: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("gapscope"));
    c.arg("run")
        .arg(exp)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .current_dir(tmp)
        .env("GAPSCOPE_PARAMS_DIR", tmp.join("params"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

/// The run folder `gapscope run` printed as its last line of stdout.
pub fn run_dir_of(stdout: &[u8]) -> PathBuf {
    PathBuf::from(
        std::str::from_utf8(stdout)
            .expect("gapscope run's stdout is UTF-8")
            .lines()
            .last()
            .expect("gapscope run printed its run folder")
            .trim(),
    )
}

/// `gapscope run EXP` with results under `tmp/results`, expected to succeed; its run folder.
#[allow(dead_code)] // not every test file that shares this module runs experiments
pub fn run_ok(tmp: &Path, exp: &Path, extra: &[&str]) -> PathBuf {
    let out = gapscope(tmp)
        .arg("run")
        .arg(exp)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .args(extra)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    run_dir_of(&out)
}

/// `gapscope run EXP` with results under `tmp/results`, expected to exit with `code`
/// (5: a variant had no successful rep); the run folder it printed.
#[allow(dead_code)]
pub fn run_exit(tmp: &Path, exp: &Path, extra: &[&str], code: i32) -> PathBuf {
    let out = gapscope(tmp)
        .arg("run")
        .arg(exp)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .args(extra)
        .assert()
        .code(code)
        .get_output()
        .stdout
        .clone();
    run_dir_of(&out)
}

/// `gapscope run EXP` expected to be refused before any run folder exists (a bad
/// experiment file); what it printed on stderr.
#[allow(dead_code)]
pub fn run_refused(tmp: &Path, exp: &Path) -> String {
    let out = gapscope(tmp)
        .arg("run")
        .arg(exp)
        .arg("--results-dir")
        .arg(tmp.join("results"))
        .assert()
        .failure();
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

/// Held by the tests that judge timings (bisect, A/B verdicts), so that they do not share
/// the machine's cores with each other while they measure (every file's tests run in the
/// one test process, so the lock holds across files).
#[allow(dead_code)]
pub fn timing_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `git -C dir ARGS` with a fixed author, asserted to succeed; its stdout, trimmed.
#[allow(dead_code)]
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `gapscope diff RUN --baseline B --candidate C --format json`'s metric of `span` and
/// `measure` (its JSON object); the command must succeed and the metric be there.
#[allow(dead_code)]
pub fn diff_metric(
    tmp: &Path,
    run: &Path,
    baseline: &str,
    candidate: &str,
    span: &str,
    measure: &str,
) -> serde_json::Value {
    let out = gapscope(tmp)
        .arg("diff")
        .arg(run)
        .args([
            "--baseline",
            baseline,
            "--candidate",
            candidate,
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    j["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["span"] == span && m["measure"] == measure)
        .unwrap_or_else(|| panic!("no metric {span} {measure} in the diff"))
        .clone()
}

/// A binary of another workspace package (`gapscope-hash-worker`,
/// `gapscope-groth16-worker`), in the test binary's own profile folder. `cargo test` builds
/// only the binaries of packages with integration tests, so each test process runs one
/// `cargo build` of it first: this builds it where it is missing and rebuilds it where its
/// sources changed since (an old binary would be tested otherwise).
#[allow(dead_code)]
pub fn workspace_bin(package: &str, name: &str) -> PathBuf {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    // target/<profile>/deps/it-HASH → target/<profile>
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary sits in target/<profile>/deps");
    let path = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built
        .get_or_insert_with(HashSet::new)
        .insert(name.to_string())
    {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "--locked", "-p", package, "--bin", name]);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("running cargo build");
        assert!(
            status.success(),
            "cargo build -p {package} --bin {name} failed"
        );
    }
    assert!(
        path.exists(),
        "{} is missing after its build",
        path.display()
    );
    path
}
