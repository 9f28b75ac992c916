//! `gapscope history` end to end on synthetic run folders placed on the commits of a
//! throwaway git repository: add, again (nothing changes), import of a tree with bad
//! folders, show with its chart and JSON, regressions, and an import killed inside a
//! folder's transaction, which must leave every finished folder and nothing of the
//! one it was in.

use std::path::{Path, PathBuf};
use std::process::{Command as Std, Stdio};

use gapscope::analysis::synthetic::SyntheticRun;
use gapscope::store;

use crate::common;
use common::{gapscope, git};

/// A repository of `n` empty commits; their shas, oldest first (also the hostile-input
/// tests' repository).
pub(crate) fn repo(tmp: &Path, n: usize) -> (PathBuf, Vec<String>) {
    let r = tmp.join("repo");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    for i in 0..n {
        git(
            &r,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("commit {i}"),
            ],
        );
    }
    let shas = git(&r, &["rev-list", "--reverse", "main"])
        .lines()
        .map(String::from)
        .collect();
    (r, shas)
}

/// A synthetic run folder of commit `sha` whose `prove` grows with `scale` (also the
/// hostile-input tests' history).
pub(crate) fn folder(dir: &Path, sha: &str, scale: f64, seed: u64) {
    let mut r = SyntheticRun::new();
    r.experiment = "hist".into();
    r.reps = 3;
    r.noise = 0.01;
    r.seed = seed;
    r.variants.truncate(1);
    let name = r.variants[0].name.clone();
    // Unattributed time in the GPU wrapper: prove.total (about 1.1 s) grows by
    // (scale - 1) x 1 s.
    r.variant_mut(&name).gpu_gap_ns = ((scale - 1.0) * 1e9) as u64;
    r.write(dir).unwrap();
    let mut meta = store::read_meta(dir).unwrap();
    meta.git.revision = Some(sha.into());
    meta.run_id = format!("{seed:03}");
    store::write_meta(dir, &meta).unwrap();
}

fn history(tmp: &Path, _repo: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    gapscope(tmp)
        .arg("history")
        .args(args)
        .arg("--db")
        .arg(tmp.join("h.sqlite"))
        .assert()
}

fn samples(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("SELECT COUNT(*) FROM samples", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn add_again_import_show_and_regressions() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, shas) = repo(tmp.path(), 14);
    let runs = tmp.path().join("runs");
    for (i, sha) in shas.iter().enumerate() {
        folder(
            &runs.join(format!("r{i:02}")),
            sha,
            if i >= 8 { 1.3 } else { 1.0 },
            i as u64,
        );
    }
    // A folder without meta.json and one cut short are skipped with the reason.
    std::fs::create_dir_all(runs.join("zz-empty/inner")).unwrap();
    std::fs::write(runs.join("zz-empty/inner/meta.json"), "{").unwrap();
    let first = runs.join("r00");
    let repo_s = repo.to_str().unwrap();
    let out = history(
        tmp.path(),
        &repo,
        &["add", first.to_str().unwrap(), "--repo", repo_s],
    )
    .success()
    .get_output()
    .stdout
    .clone();
    assert!(String::from_utf8_lossy(&out).contains("values stored"));
    let n1 = samples(&tmp.path().join("h.sqlite"));
    let again = history(
        tmp.path(),
        &repo,
        &["add", first.to_str().unwrap(), "--repo", repo_s],
    )
    .success()
    .get_output()
    .stdout
    .clone();
    assert!(
        String::from_utf8_lossy(&again).contains("already stored"),
        "{}",
        String::from_utf8_lossy(&again)
    );
    assert_eq!(samples(&tmp.path().join("h.sqlite")), n1);
    let out = history(
        tmp.path(),
        &repo,
        &["import", runs.to_str().unwrap(), "--repo", repo_s],
    )
    .success()
    .get_output()
    .stdout
    .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("zz-empty/inner: skipped: "), "{text}");
    assert!(text.contains("r00: already stored"), "{text}");
    let charts = tmp.path().join("charts");
    let out = history(
        tmp.path(),
        &repo,
        &[
            "show",
            "--metric",
            "prove.total",
            "--format",
            "json",
            "--chart",
            charts.to_str().unwrap(),
        ],
    )
    .success()
    .get_output()
    .stdout
    .clone();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let series = j.as_array().unwrap();
    assert_eq!(series.len(), 1);
    let steps = series[0]["steps"].as_array().unwrap();
    let regressed: Vec<_> = steps
        .iter()
        .filter(|s| s["step"]["verdict"] == "regressed")
        .collect();
    assert_eq!(regressed.len(), 1, "{steps:?}");
    assert_eq!(regressed[0]["first_after"], shas[8].as_str());
    assert_eq!(regressed[0]["last_before"], shas[7].as_str());
    let change = regressed[0]["step"]["change"].as_f64().unwrap();
    assert!(change > 0.1, "{change}");
    let pngs: Vec<_> = std::fs::read_dir(&charts).unwrap().flatten().collect();
    assert_eq!(pngs.len(), 2, "{pngs:?}");
    // Drawn again over a link planted under the chart's name: the link and what it
    // points to stay, and nothing is left beside them.
    let svg = pngs
        .iter()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "svg"))
        .unwrap();
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    std::fs::remove_file(&svg).unwrap();
    std::os::unix::fs::symlink(&victim, &svg).unwrap();
    let show = [
        "show",
        "--metric",
        "prove.total",
        "--chart",
        charts.to_str().unwrap(),
    ];
    let err = history(tmp.path(), &repo, &show)
        .success()
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains("not drawn") && err.contains("is a symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&svg)
        .unwrap()
        .file_type()
        .is_symlink());
    let names: Vec<String> = std::fs::read_dir(&charts)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let out = history(tmp.path(), &repo, &["regressions", "--confirmed"])
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("prove.total of porep"), "{text}");
    assert!(text.contains(&shas[8][..12]), "{text}");
    // An unknown metric is refused with what to write.
    history(tmp.path(), &repo, &["show", "--metric", "synthesis.wall"])
        .failure()
        .stderr(predicates::str::contains("SPAN.MEASURE"));
}

#[test]
fn a_killed_import_keeps_finished_folders_and_nothing_of_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, shas) = repo(tmp.path(), 3);
    let runs = tmp.path().join("runs");
    for (i, sha) in shas.iter().enumerate() {
        folder(&runs.join(format!("r{i}")), sha, 1.0, i as u64);
    }
    let db = tmp.path().join("h.sqlite");
    // Reference: the first folder alone.
    let ref_db = tmp.path().join("ref.sqlite");
    gapscope(tmp.path())
        .args(["history", "add"])
        .arg(runs.join("r0"))
        .arg("--db")
        .arg(&ref_db)
        .arg("--repo")
        .arg(&repo)
        .assert()
        .success();
    let mut child = Std::new(assert_cmd::cargo::cargo_bin("gapscope"))
        .current_dir(tmp.path())
        .args(["history", "import"])
        .arg(&runs)
        .arg("--db")
        .arg(&db)
        .arg("--repo")
        .arg(&repo)
        .args(["--debug-pause-in-folder", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the line that says it is inside the second folder's transaction.
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.contains("paused inside the transaction"), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
    let c = rusqlite::Connection::open(&db).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let runs_stored: i64 = c
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs_stored, 1);
    assert_eq!(samples(&db), samples(&ref_db));
    // Importing again finishes the rest, and the first folder's values are unchanged.
    gapscope(tmp.path())
        .args(["history", "import"])
        .arg(&runs)
        .arg("--db")
        .arg(&db)
        .arg("--repo")
        .arg(&repo)
        .assert()
        .success();
    let runs_stored: i64 = c
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs_stored, 3);
}
