//! Values read from input never reach a command line as an option or a shell as code:
//! one test per gapscope command that spawns a process with such a value. Each plants a
//! hostile value where the command reads it (a run folder's meta.json, an experiment's
//! `rev` or `patch`, bisect's ends, a sweep file) and checks that a file the value
//! would create (`pwned`) never appears, and that the command refuses the value with a
//! clear message or passes it on as plain data.

use std::path::{Path, PathBuf};

use gapscope::analysis::synthetic::SyntheticRun;
use gapscope::store;

use crate::common;
use crate::history_cli::repo;
use common::gapscope;

/// A command's run folders and revision builds kept under the test's folder.
trait Isolated {
    fn isolated(&mut self, tmp: &Path) -> &mut Self;
}

impl Isolated for assert_cmd::Command {
    fn isolated(&mut self, tmp: &Path) -> &mut Self {
        self.arg("--results-dir")
            .arg(tmp.join("results"))
            .env("GAPSCOPE_REV_CACHE", tmp.join("cache"))
    }
}

/// Option-looking values that would write `pwned` if git or a shell took them as
/// options or code.
fn hostile(pwned: &Path) -> Vec<String> {
    let p = pwned.display();
    vec![
        format!("--output={p}"),
        format!("--upload-pack=touch {p}"),
        format!("--exec=touch {p}"),
        format!("-o{p}"),
        "-h".into(),
        format!("$(touch {p})"),
    ]
}

fn text(a: &assert_cmd::assert::Assert) -> String {
    let o = a.get_output();
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A synthetic run folder whose meta.json names `revision`, and (with `variant_commit`)
/// whose variant is a `rev` variant of that commit.
fn folder(dir: &Path, revision: &str, variant_commit: Option<&str>, seed: u64) {
    let mut r = SyntheticRun::new();
    r.experiment = "hs".into();
    r.reps = 2;
    r.seed = seed;
    r.variants.truncate(1);
    r.write(dir).unwrap();
    let mut meta = store::read_meta(dir).unwrap();
    meta.git.revision = Some(revision.into());
    meta.run_id = format!("{seed:03}");
    store::write_meta(dir, &meta).unwrap();
    if let Some(c) = variant_commit {
        let path = dir.join("meta.json");
        let mut j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        j["variants"][0]["revision"] = serde_json::json!({
            "rev": c, "repo": "--upload-pack=x", "commit": c, "dirty": false, "build": []
        });
        std::fs::write(&path, serde_json::to_string_pretty(&j).unwrap()).unwrap();
        let back = store::read_meta(dir).unwrap();
        assert_eq!(
            back.variants[0]
                .revision
                .as_ref()
                .map(|r| r.commit.as_str()),
            Some(c)
        );
    }
}

fn commits_stored(db: &Path) -> Vec<String> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut s = c.prepare("SELECT sha FROM commits").unwrap();
    let rows = s.query_map([], |r| r.get::<_, String>(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

#[test]
fn history_add_and_import_never_pass_a_run_folders_revision_to_git() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, shas) = repo(tmp.path(), 2);
    let pwned = tmp.path().join("pwned");
    let runs = tmp.path().join("runs");
    let db = tmp.path().join("h.sqlite");
    let mut n = 0u64;
    for v in hostile(&pwned) {
        // The run's own revision, then a rev variant's commit over a good run revision.
        for (rev, variant) in [(v.as_str(), None), (shas[0].as_str(), Some(v.as_str()))] {
            n += 1;
            let dir = runs.join(format!("r{n:02}"));
            folder(&dir, rev, variant, n);
            let a = gapscope(tmp.path())
                .args(["history", "add"])
                .arg(&dir)
                .arg("--repo")
                .arg(&repo)
                .arg("--db")
                .arg(&db)
                .assert();
            let t = text(&a);
            assert!(
                a.get_output().status.code().is_some(),
                "killed by a signal: {t}"
            );
            assert!(t.contains("not a commit id"), "{v:?}: {t}");
            assert!(!pwned.exists(), "{v:?} ran as an option: {t}");
        }
    }
    let a = gapscope(tmp.path())
        .args(["history", "import"])
        .arg(&runs)
        .arg("--repo")
        .arg(&repo)
        .arg("--db")
        .arg(&db)
        .assert();
    let t = text(&a);
    assert!(a.get_output().status.code().is_some(), "{t}");
    assert!(t.contains("not a commit id"), "{t}");
    assert!(
        !pwned.exists(),
        "an import ran a revision as an option: {t}"
    );
    if db.exists() {
        let stored = commits_stored(&db);
        assert!(
            stored
                .iter()
                .all(|c| c.bytes().all(|b| b.is_ascii_hexdigit())),
            "{stored:?}"
        );
    }
}

fn rev_experiment(tmp: &Path, repo: &Path, rev: &str) -> PathBuf {
    let p = tmp.join("rev.toml");
    let body = format!(
        "name = \"rv\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 1\n\
         [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"there\"\nrev = {}\nrepo = {}\n",
        toml_str(rev),
        toml_str(&repo.display().to_string())
    );
    std::fs::write(&p, body).unwrap();
    p
}

/// `s` as a TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

#[test]
fn a_rev_variant_naming_an_option_is_refused_before_git_runs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = repo(tmp.path(), 1);
    let pwned = tmp.path().join("pwned");
    for v in hostile(&pwned).into_iter().filter(|v| v.starts_with('-')) {
        let exp = rev_experiment(tmp.path(), &repo, &v);
        let a = gapscope(tmp.path())
            .arg("run")
            .arg(&exp)
            .isolated(tmp.path())
            .assert()
            .failure();
        let t = text(&a);
        assert!(
            t.contains(&format!("rev = {v:?} is not a revision")),
            "{v:?}: {t}"
        );
        assert!(!pwned.exists(), "{v:?} ran as an option: {t}");
    }
}

#[test]
fn bisect_refuses_an_end_that_looks_like_an_option() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = repo(tmp.path(), 3);
    let pwned = tmp.path().join("pwned");
    let exp = rev_experiment(tmp.path(), &repo, "main");
    for v in hostile(&pwned).into_iter().filter(|v| v.starts_with('-')) {
        for (good, bad) in [(v.as_str(), "main"), ("main~2", v.as_str())] {
            let a = gapscope(tmp.path())
                .arg("bisect")
                .arg(format!("--good={good}"))
                .arg(format!("--bad={bad}"))
                .arg("--experiment")
                .arg(&exp)
                .args(["--metric", "prove.total"])
                .arg("--repo")
                .arg(&repo)
                .isolated(tmp.path())
                .assert()
                .failure();
            let t = text(&a);
            assert!(t.contains("may not start with '-'"), "{v:?}: {t}");
            assert!(!pwned.exists(), "{v:?} ran as an option: {t}");
        }
        // bisect-step's commit under test; 128 tells `git bisect run` to stop.
        let a = gapscope(tmp.path())
            .args(["bisect-step", "--good", "main~2", "--bad", "main"])
            .arg(format!("--rev={v}"))
            .arg("--experiment")
            .arg(&exp)
            .args(["--metric", "prove.total"])
            .arg("--repo")
            .arg(&repo)
            .isolated(tmp.path())
            .timeout(std::time::Duration::from_secs(120))
            .assert()
            .code(128);
        let t = text(&a);
        assert!(t.contains("may not start with '-'"), "{v:?}: {t}");
        assert!(!pwned.exists(), "{v:?} ran as an option: {t}");
    }
}

#[test]
fn a_patch_variant_naming_an_option_never_reaches_git_or_cargo_as_one() {
    let tmp = tempfile::tempdir().unwrap();
    let pwned = tmp.path().join("pwned");
    let p = pwned.display();
    for patch in [
        format!(
            "itoa = {{ path = \"{}\", rev = \"--upload-pack=touch {p}\" }}",
            tmp.path().display()
        ),
        format!(
            "itoa = {{ path = \"{}\", rev = \"-h\" }}",
            tmp.path().display()
        ),
        format!("itoa = {{ git = \"--upload-pack=touch {p}\" }}"),
        format!("itoa = {{ git = \"-u touch {p}\", rev = \"main\" }}"),
        format!("itoa = {{ path = \"--config=build.rustc-wrapper='touch {p}'\" }}"),
        "itoa = { path = \"-h\" }".to_string(),
    ] {
        let exp = tmp.path().join("pv.toml");
        std::fs::write(
            &exp,
            format!(
                "name = \"pv\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 1\n\
                 [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"p\"\npatch = {{ {patch} }}\n"
            ),
        )
        .unwrap();
        let a = gapscope(tmp.path())
            .arg("run")
            .arg(&exp)
            .isolated(tmp.path())
            .env("CARGO_NET_OFFLINE", "true")
            .assert();
        let t = text(&a);
        let code = a.get_output().status.code();
        assert!(
            matches!(code, Some(c) if c != 0),
            "{patch}: a patch that cannot be found ran: {code:?} {t}"
        );
        assert!(!pwned.exists(), "{patch} ran as an option: {t}");
        // Refused as it is read (rev), or passed as the repository after `--` (git), or
        // looked up as a folder (path): never taken as an option.
        assert!(
            t.contains("is not a revision")
                || t.contains("does not exist")
                || t.contains("is not on this host"),
            "{patch}: {t}"
        );
    }
}

/// A sweep of one cell in `dir` whose sweep file ends with `extra`.
fn sweep(dir: &Path, name: &str, extra: &str) {
    std::fs::write(
        dir.join("exp.toml"),
        "name = \"tiny\"\n[workload]\ncircuit = \"chain\"\nlog2_constraints = 4\nbatch = 1\n\
         [run]\nreps = 1\nwarmups = 0\n[[variant]]\nname = \"a\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("s.toml"),
        format!(
            "name = {}\nexperiment = \"exp.toml\"\nresults_root = \"root\"\n[axes]\nbatch = [1]\n{extra}",
            toml_str(name)
        ),
    )
    .unwrap();
}

/// An executable shell script at `path` that appends its arguments, one a line, to
/// `log` and prints `out`.
fn recorder(path: &Path, log: &Path, out: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> '{}'; done\necho {out}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_slurm_sweep_quotes_every_value_and_refuses_a_line_break_or_nul() {
    let tmp = tempfile::tempdir().unwrap();
    let pwned = tmp.path().join("pwned");
    // The gapscope the nodes run: a recorder whose file name is shell code.
    let fake = tmp.path().join("g'$(touch pwned)`touch pwned`;touch pwned");
    let calls = tmp.path().join("calls");
    recorder(&fake, &calls, "ok");
    let sbatch_log = tmp.path().join("sbatch-args");
    let sbatch = tmp.path().join("fake-sbatch");
    recorder(&sbatch, &sbatch_log, "4242");
    let code = "$(touch pwned)`touch pwned`';touch pwned;'";
    sweep(
        tmp.path(),
        "s",
        &format!(
            "[slurm]\npartition = {}\naccount = {}\ntime = {}\nmem = {}\nparams_dir = {}\ngapscope = {}\n",
            toml_str(&format!("p{code}")),
            toml_str(&format!("a{code}")),
            toml_str(&format!("t{code}")),
            toml_str(&format!("m{code}")),
            toml_str(&format!("params{code}")),
            toml_str(&fake.display().to_string()),
        ),
    );
    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--slurm", "--sbatch"])
        .arg(&sbatch)
        .assert()
        .success();
    let t = text(&a);
    assert!(!pwned.exists(), "{t}");
    // sbatch is asked its version, then given the script: no value of the sweep file.
    let args = std::fs::read_to_string(&sbatch_log).unwrap();
    let script = tmp.path().join("root/s/slurm-g0.sbatch");
    let script_s = script.display().to_string();
    assert!(
        args.lines()
            .all(|l| ["--version", "--parsable", &script_s].contains(&l))
            && args.ends_with(&format!("--parsable\n{script_s}\n")),
        "{args}\n{t}"
    );
    let body = std::fs::read_to_string(&script).unwrap();
    let n = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(n.status.success(), "{n:?}\n{body}");
    // Run it as a node would: the recorder gets every value as one plain argument.
    let run = std::process::Command::new("bash")
        .arg(&script)
        .current_dir(tmp.path())
        .env("SLURM_ARRAY_TASK_ID", "0")
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}\n{body}");
    assert!(!pwned.exists(), "the script ran a value as code:\n{body}");
    let got: Vec<String> = std::fs::read_to_string(&calls)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(
        got[..3],
        [
            "sweep",
            "cell",
            &tmp.path().join("root/s").display().to_string()
        ]
    );
    assert_eq!(got.last().unwrap(), &format!("params{code}"), "{body}");

    // A line break or a NUL in any value is refused before a script is written.
    for bad in ["p\ntouch pwned", "p\rtouch pwned", "p\0touch pwned"] {
        for key in [
            "partition",
            "account",
            "time",
            "mem",
            "params_dir",
            "gapscope",
        ] {
            let sub = tmp.path().join(format!("b-{key}-{}", bad.len()));
            std::fs::create_dir_all(&sub).unwrap();
            sweep(
                &sub,
                "s",
                &format!(
                    "[slurm]\n{key} = {}\nextra = [{}]\n",
                    toml_str(bad),
                    toml_str("--x")
                ),
            );
            let a = gapscope(&sub)
                .args(["sweep", "run", "s.toml", "--slurm", "--write-only"])
                .assert()
                .failure();
            let t = text(&a);
            assert!(
                t.contains("newline") || t.contains("carriage-return") || t.contains("NUL"),
                "{key} = {bad:?}: {t}"
            );
            assert!(!sub.join("root/s/slurm-g0.sbatch").exists(), "{key}: {t}");
        }
        let sub = tmp.path().join(format!("b-extra-{}", bad.len()));
        std::fs::create_dir_all(&sub).unwrap();
        sweep(
            &sub,
            "s",
            &format!("[slurm]\nextra = [{}]\n", toml_str(bad)),
        );
        let a = gapscope(&sub)
            .args(["sweep", "run", "s.toml", "--slurm", "--write-only"])
            .assert()
            .failure();
        assert!(!sub.join("root/s/slurm-g0.sbatch").exists(), "{}", text(&a));
    }
    assert!(!pwned.exists());
}

#[test]
fn a_k8s_sweep_passes_every_value_as_one_argument_without_a_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let code = "$(touch pwned)`touch pwned`';touch pwned;'\n--x";
    sweep(
        tmp.path(),
        "s",
        &format!(
            "[k8s]\nimage = {}\nclaim = {}\nnamespace = {}\ngapscope = {}\ngpu_resource = {}\n",
            toml_str(&format!("img{code}")),
            toml_str(&format!("claim{code}")),
            toml_str(&format!("ns{code}")),
            toml_str(&format!("g{code}")),
            toml_str(&format!("r{code}")),
        ),
    );
    let out = tmp.path().join("job.json");
    let a = gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--k8s", "--out-file"])
        .arg(&out)
        .assert();
    let t = text(&a);
    assert!(!tmp.path().join("pwned").exists(), "{t}");
    if !a.get_output().status.success() {
        // Refused: it must say which value.
        assert!(t.contains("newline") || t.contains("[k8s]"), "{t}");
        return;
    }
    let body = std::fs::read_to_string(&out).unwrap();
    let docs: Vec<serde_json::Value> = body
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(!docs.is_empty(), "{body}");
    for job in &docs {
        let c = &job["spec"]["template"]["spec"]["containers"][0];
        let cmd: Vec<&str> = c["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        // The command is an argv (no shell): the value is its program, verbatim.
        assert_eq!(cmd[0], format!("g{code}"));
        assert_eq!(cmd[1..3], ["sweep", "cell"]);
        assert!(c.get("args").is_none(), "{c}");
        assert!(
            !cmd.iter().any(|a| *a == "-c" || a.ends_with("sh")),
            "{cmd:?}"
        );
        let name = job["metadata"]["name"].as_str().unwrap();
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{name}"
        );
    }
}

#[test]
fn a_sweep_whose_name_is_shell_code_or_an_option_is_refused_before_a_script_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let pwned = tmp.path().join("pwned");
    let sbatch_log = tmp.path().join("sbatch-args");
    let sbatch = tmp.path().join("fake-sbatch");
    recorder(&sbatch, &sbatch_log, "4242");
    for name in [
        "s$(touch pwned)",
        "s`touch pwned`",
        "s';touch pwned;'",
        "s\ntouch pwned",
        "s\0x",
        "--output=pwned",
        "-h",
    ] {
        sweep(tmp.path(), name, "");
        for how in ["--slurm", "--k8s"] {
            let a = gapscope(tmp.path())
                .args(["sweep", "run", "s.toml", how, "--sbatch"])
                .arg(&sbatch)
                .assert()
                .failure();
            let t = text(&a);
            assert!(t.contains("is not allowed"), "{name:?} {how}: {t}");
            assert!(!tmp.path().join("root").exists(), "{name:?} {how}: {t}");
            assert!(!pwned.exists(), "{name:?} {how}: {t}");
        }
    }
    // sbatch, asked at most its version, was given no script.
    let args = std::fs::read_to_string(&sbatch_log).unwrap_or_default();
    assert!(args.lines().all(|l| l == "--version"), "{args}");
}

#[test]
fn history_bisect_refuses_a_damaged_databases_commit_that_is_no_commit_id() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, shas) = repo(tmp.path(), 14);
    let pwned = tmp.path().join("pwned");
    let runs = tmp.path().join("runs");
    for (i, sha) in shas.iter().enumerate() {
        let scale = if i >= 8 { 1.3 } else { 1.0 };
        crate::history_cli::folder(&runs.join(format!("r{i:02}")), sha, scale, i as u64);
    }
    let clean = tmp.path().join("clean.sqlite");
    gapscope(tmp.path())
        .args(["history", "import"])
        .arg(&runs)
        .arg("--repo")
        .arg(&repo)
        .arg("--db")
        .arg(&clean)
        .assert()
        .success();
    let exp = rev_experiment(tmp.path(), &repo, "main");
    // The step's side before (commit 7), then its side after (commit 8), rewritten.
    for (i, bad) in [
        (7, format!("--output={}", pwned.display())),
        (8, format!("--upload-pack=touch {}", pwned.display())),
        (7, "-h".to_string()),
        // Names git would resolve to some other commit.
        (8, "HEAD~1".to_string()),
        (7, "main".to_string()),
    ] {
        let db = tmp.path().join(format!("h{i}-{}.sqlite", bad.len()));
        std::fs::copy(&clean, &db).unwrap();
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
        c.execute(
            "UPDATE samples SET commit_sha = ?2 WHERE commit_sha = ?1",
            [&shas[i], &bad],
        )
        .unwrap();
        c.execute(
            "UPDATE commits SET sha = ?2 WHERE sha = ?1",
            [&shas[i], &bad],
        )
        .unwrap();
        drop(c);
        let out = gapscope(tmp.path())
            .args([
                "history",
                "show",
                "--metric",
                "prove.total",
                "--format",
                "json",
            ])
            .arg("--db")
            .arg(&db)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let step = j[0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"]["verdict"] == "regressed")
            .unwrap_or_else(|| panic!("no step: {j}"))
            .clone();
        let side = if i == 7 { "last_before" } else { "first_after" };
        assert_eq!(step[side], bad.as_str(), "{step}");
        let id = step["id"].as_str().unwrap_or_else(|| panic!("{step}"));
        let a = gapscope(tmp.path())
            .args(["history", "bisect", id])
            .arg("--db")
            .arg(&db)
            .arg("--experiment")
            .arg(&exp)
            .arg("--repo")
            .arg(&repo)
            .isolated(tmp.path())
            .assert()
            .failure();
        let t = text(&a);
        assert!(
            t.contains("not a commit id (7 to 64 hex digits)"),
            "{bad:?}: {t}"
        );
        assert!(!pwned.exists(), "{bad:?} ran as an option: {t}");
    }
}

#[test]
fn sweep_status_passes_squeue_and_sacct_only_the_job_ids_of_slurm_json() {
    let tmp = tempfile::tempdir().unwrap();
    let pwned = tmp.path().join("pwned");
    let sbatch = tmp.path().join("fake-sbatch");
    recorder(&sbatch, &tmp.path().join("sbatch-args"), "4242");
    sweep(tmp.path(), "s", "[slurm]\npartition = \"p\"\n");
    gapscope(tmp.path())
        .args(["sweep", "run", "s.toml", "--slurm", "--sbatch"])
        .arg(&sbatch)
        .assert()
        .success();
    // slurm.json edited: a second job whose id is an option and shell code.
    let jobs_file = tmp.path().join("root/s/slurm.json");
    let mut jobs: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&jobs_file).unwrap()).unwrap();
    let mut evil = jobs[0].clone();
    evil["job_id"] = format!("--help;touch {}", pwned.display()).into();
    jobs.push(evil);
    std::fs::write(&jobs_file, serde_json::to_vec(&jobs).unwrap()).unwrap();
    // squeue and sacct: recorders first on PATH.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let asked = tmp.path().join("asked");
    recorder(&bin.join("squeue"), &asked, "");
    recorder(&bin.join("sacct"), &asked, "");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let a = gapscope(tmp.path())
        .args(["sweep", "status", "root/s"])
        .env("PATH", path)
        .assert()
        .success();
    let t = text(&a);
    assert!(
        t.contains("which is not a Slurm job id (digits): left out"),
        "{t}"
    );
    let args = std::fs::read_to_string(&asked).unwrap();
    assert!(args.lines().any(|l| l == "--jobs=4242"), "{args}");
    assert!(!args.contains("help") && !pwned.exists(), "{args}");
}

/// `track`: the commits of a history database (which `history import` fills from other
/// hosts' folders) and its `--branch` reach git only as commit ids or not at all. The
/// database's earlier commits are rewritten to option-looking values and shell code;
/// HEAD, four times the work, is then suspected, and its re-run against the parent (git
/// worktrees of both) spawns git with the revisions track reads.
#[test]
fn track_never_passes_a_databases_commit_or_its_branch_to_git_as_an_option() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let pwned = t.join("pwned");
    let repo = t.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    common::git(&repo, &["init", "-q", "-b", "main"]);
    let exp = t.join("track_hostile.toml");
    std::fs::write(
        &exp,
        "name = \"track_hostile\"\n[workload]\ncommand = [\"sh\", \"work.sh\"]\n[run]\n\
         reps = 2\nwarmups = 0\norder = \"interleaved\"\nrep_timeout_s = 60\n\
         [[variant]]\nname = \"only\"\n",
    )
    .unwrap();
    let commit = |loops: u32, msg: &str| {
        std::fs::write(
            repo.join("work.sh"),
            format!("i=0\nwhile [ $i -lt {loops} ]; do i=$((i+1)); done\n"),
        )
        .unwrap();
        common::git(&repo, &["add", "work.sh"]);
        common::git(&repo, &["commit", "-q", "--allow-empty", "-m", msg]);
        common::git(&repo, &["rev-parse", "HEAD"])
    };
    let db = t.join("h.sqlite");
    let track = |branch: Option<&str>| {
        let mut c = gapscope(t);
        c.current_dir(&repo)
            .arg("track")
            .arg(&exp)
            .args(["--metric", "program.process_cpu", "--last", "10"])
            .args(["--confirm-reps", "3"])
            .arg("--db")
            .arg(&db)
            .isolated(t);
        if let Some(b) = branch {
            c.arg(format!("--branch={b}"));
        }
        c.assert()
    };
    let mut shas = Vec::new();
    for i in 0..5 {
        shas.push(commit(20_000, &format!("steady {i}")));
        let a = track(None);
        assert!(a.get_output().status.success(), "{}", text(&a));
    }
    assert_eq!(commits_stored(&db).len(), 5);
    // Two stored commits become values git would take as options or a shell as code.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    for (sha, bad) in shas[1..3].iter().zip(hostile(&pwned)) {
        c.execute(
            "UPDATE samples SET commit_sha = ?2 WHERE commit_sha = ?1",
            [sha, &bad],
        )
        .unwrap();
        c.execute("UPDATE commits SET sha = ?2 WHERE sha = ?1", [sha, &bad])
            .unwrap();
    }
    drop(c);
    commit(80_000, "four times the work");
    // An option-looking branch is refused before anything runs.
    for b in hostile(&pwned).into_iter().filter(|b| b.starts_with('-')) {
        let a = track(Some(&b)).code(2);
        let out = text(&a);
        assert!(out.contains("is not a branch name"), "{b:?}: {out}");
        assert!(!pwned.exists(), "--branch {b:?} ran as an option: {out}");
    }
    // The database's rewritten commits: HEAD is still judged (and re-run against its
    // parent where it stands out), and nothing ran them.
    let a = track(None);
    let t_out = text(&a);
    assert!(
        matches!(a.get_output().status.code(), Some(0 | 4)),
        "{t_out}"
    );
    assert!(
        t_out.contains("### gapscope track: track_hostile"),
        "{t_out}"
    );
    assert!(!pwned.exists(), "a stored commit ran as an option: {t_out}");
}
