//! `gapscope sweep` without a scheduler: plan, a local run of tiny CPU cells and its
//! re-run (finished cells skipped), status and collect, the errors found before anything
//! is submitted, and the Kubernetes manifest checked against the batch/v1 Job schema
//! (`kubernetes-validate`, from PyPI: that check is `#[ignore]`d, so that a machine
//! without it lists it as ignored rather than passed; `.ci/run` installs it and runs the
//! check with `--ignored`).

use std::path::Path;
use std::process::Command;

use crate::common;
use common::gapscope;

const EXP: &str = r#"name = "tiny"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 1
backend = "cpu"
[run]
reps = 1
warmups = 0
[[variant]]
name = "baseline"
drop = "sync"
[[variant]]
name = "candidate"
drop = "async"
"#;

fn sweep(dir: &Path, axes: &str, extra: &str) {
    std::fs::write(dir.join("exp.toml"), EXP).unwrap();
    std::fs::write(
        dir.join("s.toml"),
        format!("name = \"s\"\nexperiment = \"exp.toml\"\nresults_root = \"root\"\n[axes]\n{axes}\n{extra}"),
    )
    .unwrap();
}

fn stdout(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(a.get_output().stdout.clone()).unwrap()
}

fn stderr(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(a.get_output().stderr.clone()).unwrap()
}

/// The files of a sweep folder that `sweep::SWEEP_FILES` does not list (so that no
/// hostile-input test plants them): every file of the sweep folder and of its cells'
/// folders; the cells' run folders are the store's (its own list), `logs/` the
/// scheduler's.
pub fn unlisted_sweep_files(sweep_dir: &Path) -> Vec<String> {
    use gapscope::sweep::{SweepAt, SWEEP_FILES};
    let listed = |name: &str, at: SweepAt| {
        SWEEP_FILES.iter().any(|f| {
            let p = format!("^{}$", regex::escape(f.name).replace(r"\{gpus\}", r"\d+"));
            f.at == at && regex::Regex::new(&p).unwrap().is_match(name)
        })
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(sweep_dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let t = e.file_type().unwrap();
        if t.is_dir() && name.starts_with("cell-") {
            for c in std::fs::read_dir(e.path()).unwrap().flatten() {
                let cn = c.file_name().to_string_lossy().into_owned();
                if !c.file_type().unwrap().is_dir() && !listed(&cn, SweepAt::Cell) {
                    out.push(format!("{name}/{cn}"));
                }
            }
        } else if !(t.is_dir() && name == "logs" || listed(&name, SweepAt::Sweep)) {
            out.push(name);
        }
    }
    out
}

#[test]
fn a_local_sweep_runs_every_cell_once_and_a_rerun_skips_them() {
    let tmp = tempfile::tempdir().unwrap();
    sweep(tmp.path(), "batch = [1, 2]", "");
    let plan = gapscope(tmp.path())
        .args(["sweep", "plan", "s.toml"])
        .assert()
        .success();
    let p = stdout(&plan);
    assert!(
        p.contains("2 cells") && p.contains("batch=1") && p.contains("porep 2^10 x 2"),
        "{p}"
    );
    let json = gapscope(tmp.path())
        .args(["sweep", "plan", "s.toml", "--format", "json"])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(v["cells"].as_array().unwrap().len(), 2);

    let run = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "-q"])
        .assert()
        .success();
    assert!(stderr(&run).contains("cell 1: ran"), "{}", stderr(&run));
    let again = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "-q"])
        .assert()
        .success();
    let e = stderr(&again);
    assert!(
        e.contains("cell 0: already complete") && e.contains("cell 1: already complete"),
        "{e}"
    );

    let st = gapscope(tmp.path())
        .args(["sweep", "status", "s.toml"])
        .assert()
        .success();
    assert!(stdout(&st).contains("2 cells: 2 done"), "{}", stdout(&st));
    let unlisted = unlisted_sweep_files(&tmp.path().join("root/s"));
    assert!(
        unlisted.is_empty(),
        "files no hostile-input test plants: {unlisted:?}"
    );
    let col = gapscope(tmp.path())
        .args(["sweep", "collect", "s.toml"])
        .assert()
        .success();
    let folders: Vec<String> = stdout(&col).lines().map(str::to_string).collect();
    assert!(
        folders.iter().all(|f| Path::new(f).is_absolute()),
        "{folders:?}"
    );
    assert_eq!(folders.len(), 2);
    for f in &folders {
        let d = gapscope::store::RunData::load(Path::new(f)).unwrap();
        assert_eq!(d.runs.len(), 2, "one rep per variant, measured once");
    }
}

#[test]
fn a_cell_stopped_mid_run_resumes_its_folder_and_measures_no_rep_twice() {
    let tmp = tempfile::tempdir().unwrap();
    sweep(tmp.path(), "\"run.reps\" = [20]", "");
    // Params first, so that the cell's reps start at once.
    gapscope(tmp.path())
        .args(["run", "exp.toml", "-q", "--results-dir", "warm"])
        .assert()
        .success();
    // Materialise without running: --slurm --write-only writes the scripts only.
    gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--slurm", "--write-only"])
        .assert()
        .success();
    let cell = tmp.path().join("root/s/cell-0000");
    let bin = assert_cmd::cargo::cargo_bin("gapscope");
    let mut child = Command::new(&bin)
        .current_dir(tmp.path())
        .env("GAPSCOPE_PARAMS_DIR", tmp.path().join("params"))
        .args(["sweep", "cell", "root/s", "--index", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    loop {
        let rows = gapscope::sweep::cell_run_folders(&cell)
            .first()
            .and_then(|r| std::fs::read_to_string(r.join("runs.csv")).ok())
            .map(|t| t.lines().count().saturating_sub(1))
            .unwrap_or(0);
        if rows >= 2 {
            break;
        }
        assert!(
            t0.elapsed().as_secs() < 120,
            "the cell measured nothing in 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // As a scheduler stops a preempted task.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert!(!st.success(), "a stopped cell exits non-zero ({st})");
    let run = gapscope::sweep::cell_run_folders(&cell).remove(0);
    let part = gapscope::store::RunData::load(&run).unwrap();
    assert!(
        part.meta.completed_utc.is_none() && part.runs.len() < 40,
        "{}",
        part.runs.len()
    );
    let st = gapscope(tmp.path())
        .args(["sweep", "status", "root/s"])
        .assert()
        .success();
    assert!(stdout(&st).contains("partial"), "{}", stdout(&st));

    let again = gapscope(tmp.path())
        .args(["sweep", "cell", "root/s", "--task", "0", "--cells", "0"])
        .assert()
        .success();
    assert!(
        stderr(&again).contains("cell 0: resumed"),
        "{}",
        stderr(&again)
    );
    let d = gapscope::store::RunData::load(&run).unwrap();
    assert!(d.meta.completed_utc.is_some());
    // Measured reps: each (variant, iteration) once. (A resumed shared process first runs
    // one warm-up rep, recorded as such under a rep number past the schedule.)
    let measured: Vec<_> = d.runs.iter().filter(|r| !r.warmup).collect();
    let mut keys: Vec<(String, u32)> = measured
        .iter()
        .map(|r| (r.variant.clone(), r.iteration))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!((keys.len(), measured.len()), (40, 40), "every rep once");
    assert!(
        d.runs.len() <= 41,
        "at most the one warm-up of the resumed process"
    );
    assert_eq!(
        gapscope::sweep::cell_run_folders(&cell).len(),
        1,
        "resumed in place"
    );
}

#[test]
fn bad_sweeps_fail_before_anything_is_written_or_submitted() {
    let tmp = tempfile::tempdir().unwrap();
    sweep(tmp.path(), "speed = [1]", "");
    let a = gapscope(tmp.path())
        .args(["sweep", "plan", "s.toml"])
        .assert()
        .failure();
    assert!(
        stderr(&a).contains("unknown axis \"speed\""),
        "{}",
        stderr(&a)
    );

    sweep(tmp.path(), "batch = []", "");
    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml"])
        .assert()
        .failure();
    assert!(stderr(&a).contains("no values"), "{}", stderr(&a));

    sweep(tmp.path(), "\"variant.*.dorp\" = [\"sync\"]", "");
    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml"])
        .assert()
        .failure();
    assert!(stderr(&a).contains("cell 0"), "{}", stderr(&a));

    sweep(tmp.path(), "batch = [1]", "");
    let a = gapscope(tmp.path())
        .args([
            "sweep",
            "run",
            "s.toml",
            "--slurm",
            "--sbatch",
            "/nonexistent/sbatch",
        ])
        .assert()
        .failure();
    assert!(stderr(&a).contains("cannot be run"), "{}", stderr(&a));
    // A refusing sbatch: a script that fails like one.
    let fake = tmp.path().join("sbatch");
    std::fs::write(&fake, "#!/bin/sh\n[ \"$1\" = --version ] && { echo slurm 22; exit 0; }\necho 'sbatch: error: invalid partition' >&2; exit 1\n").unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(
        &mut std::fs::metadata(&fake).unwrap().permissions(),
        0o755,
    );
    Command::new("chmod")
        .arg("755")
        .arg(&fake)
        .status()
        .unwrap();
    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--slurm", "--sbatch"])
        .arg(&fake)
        .assert()
        .failure();
    assert!(stderr(&a).contains("invalid partition"), "{}", stderr(&a));
    assert!(
        tmp.path().join("root/s/slurm-g0.sbatch").is_file(),
        "the script is kept to read"
    );

    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--k8s"])
        .assert()
        .failure();
    assert!(
        stderr(&a).contains("image") && stderr(&a).contains("claim"),
        "{}",
        stderr(&a)
    );

    // A root that cannot be written: a regular file where the folder should be.
    std::fs::write(tmp.path().join("notadir"), "x").unwrap();
    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--root", "notadir/sub"])
        .assert()
        .failure();
    assert!(stderr(&a).contains("not writable"), "{}", stderr(&a));
}

/// The manifest of a two-GPU-count sweep, written to `jobs.yaml` in `dir`.
fn k8s_manifest(dir: &Path) -> std::path::PathBuf {
    sweep(
        dir,
        "batch = [1, 2]\n\"variant.*.gpus\" = [1, 2]\nbackend = [\"cuda\"]",
        "[k8s]\nimage = \"registry.example/gapscope:1\"\nclaim = \"results\"\nnamespace = \"provers\"\n",
    );
    let a = gapscope(dir)
        .args(["sweep", "run", "s.toml", "--k8s", "--out-file", "jobs.yaml"])
        .assert()
        .success();
    assert!(stderr(&a).contains("Job(s)"), "{}", stderr(&a));
    dir.join("jobs.yaml")
}

#[test]
fn the_k8s_manifest_is_an_indexed_job() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(k8s_manifest(tmp.path())).unwrap();
    assert!(text.contains("\"completionMode\": \"Indexed\""), "{text}");
}

#[test]
#[ignore = "needs kubernetes-validate (pip install kubernetes-validate): .ci/run runs it with --ignored"]
fn the_k8s_manifest_is_a_valid_batch_v1_job() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = k8s_manifest(tmp.path());
    let o = Command::new("kubernetes-validate")
        .args(["--strict", "--quiet"])
        .arg(&manifest)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubernetes-validate cannot run ({e}): pip install kubernetes-validate; \
                 `cargo test` without --ignored leaves this check out"
            )
        });
    assert!(
        o.status.success(),
        "the manifest does not validate:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
