//! Conventions every subcommand keeps, checked over the subcommands clap knows (a new one
//! is covered without being listed): it has help text; the exit statuses its help states
//! are gapscope's and behave as stated; a usage error exits 2 (bisect-step: 128, for
//! `git bisect run`); `--format json` output parses; a closed stdout ends it quietly, never
//! with a panic (exit 101).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use clap::CommandFactory;
use gapscope::cli::{Cli, EXIT_ERROR, EXIT_NO_OK_REP, EXIT_REGRESSED, EXIT_STEP_ERROR, EXIT_USAGE};

use crate::common;

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("gapscope")
}

/// Every subcommand's name, hidden ones included.
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

/// Exit statuses gapscope has (README.md's table; `gapscope::cli`'s constants).
const DOCUMENTED: [i32; 9] = [0, 1, 2, 3, 4, 5, 125, 128, 130];

/// A run folder of two commands, `true` and `sleep 0.05`, 8 interleaved pairs: the
/// second is slower in every pair, so its diff regresses.
fn fixture() -> &'static (tempfile::TempDir, PathBuf) {
    static RUN: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    RUN.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let out = common::gapscope(tmp.path())
            .args(["run", "--quiet", "--reps", "8", "--warmups", "0"])
            .args(["--cmd", "true", "--cmd", "sleep 0.05", "--results-dir"])
            .arg(tmp.path().join("results"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = common::run_dir_of(&out.stdout);
        (tmp, dir)
    })
}

fn exp_file(tmp: &Path, body: &str) -> PathBuf {
    let p = tmp.join("e.toml");
    std::fs::write(&p, body).unwrap();
    p
}

/// What each subcommand does when it does its work, for the JSON and closed-pipe
/// checks: its arguments (run in `tmp`), or `None` where it needs a GPU, a git history
/// or a parent (then `--help` stands in).
fn invocation(name: &str, run: &Path, tmp: &Path) -> Option<Vec<String>> {
    let run = run.display().to_string();
    let s = |v: &[&str]| Some(v.iter().map(|x| x.to_string()).collect());
    match name {
        "run" => {
            let e = exp_file(
                tmp,
                "name = \"pipe\"\n[workload]\ncommand = [\"true\"]\n[run]\nreps = 1\nwarmups = 0\n\
                 [[variant]]\nname = \"a\"\n",
            );
            s(&["run", &e.display().to_string(), "--results-dir", "results"])
        }
        "summary" => s(&["summary", &run]),
        "diff" => s(&["diff", &run]),
        "report" => s(&["report", &run, "--out", "report"]),
        "export" => s(&["export", &run, "--out-file", "trace.json"]),
        "completions" => s(&["completions", "bash"]),
        "now" => s(&["now"]),
        "__protocol" => s(&["__protocol"]),
        // An experiment that does not exist: an error, on stderr, with stdout closed.
        "bisect" | "bisect-step" => s(&[
            name,
            "--good",
            "HEAD~1",
            "--bad",
            "HEAD",
            "--experiment",
            "missing.toml",
            "--metric",
            "prove.total",
        ]),
        _ => None,
    }
}

/// The JSON each subcommand prints or writes where it has `--format json`: the command,
/// and the file it writes (`None`: stdout). `Err`: why it is checked elsewhere.
fn json_invocation(
    name: &str,
    run: &Path,
) -> Result<(Vec<String>, Option<&'static str>), &'static str> {
    let run = run.display().to_string();
    match name {
        "diff" => Ok((
            vec!["diff".into(), run, "--format".into(), "json".into()],
            None,
        )),
        // (A Chrome trace is JSON.)
        "export" => Ok((
            vec![
                "export".into(),
                run,
                "--out-file".into(),
                "trace.json".into(),
            ],
            Some("trace.json"),
        )),
        "bisect" => Err("needs a git history with a slowdown: tests/bisect_external.rs parses it"),
        "cuda-check" => Err("needs a GPU: scripts run it on the GPU host"),
        _ => Err("no json invocation listed: add one to json_invocation"),
    }
}

/// Whether `name` takes `--format json` or `--json`, as clap defines it.
fn has_json(name: &str) -> bool {
    let cmd = Cli::command();
    let sub = cmd.find_subcommand(name).unwrap();
    let found = sub.get_arguments().any(|a| {
        let long = a.get_long().unwrap_or("");
        long == "json"
            || (long == "format"
                && a.get_possible_values()
                    .iter()
                    .any(|v| v.get_name() == "json"))
    });
    found
}

fn run_in(tmp: &Path, args: &[String], stdout: Stdio) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(tmp)
        .env("GAPSCOPE_PARAMS_DIR", tmp.join("params"))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Runs `args` with stdout a pipe whose reader is already closed: every write fails.
fn with_closed_stdout(tmp: &Path, args: &[String]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    run_in(tmp, args, Stdio::from(writer))
}

fn long_help(name: &str) -> String {
    let out = Command::new(bin()).args([name, "--help"]).output().unwrap();
    assert!(out.status.success(), "{name} --help: {:?}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The numbers a help text gives as exit statuses: those in a sentence that speaks of
/// exiting.
fn stated_codes(help: &str) -> Vec<i32> {
    let re = regex::Regex::new(r"(?i)\bexit(s|ing)?\b[^.]*").unwrap();
    let num = regex::Regex::new(r"\b(\d{1,3})\b").unwrap();
    let text = help.split_whitespace().collect::<Vec<_>>().join(" ");
    re.find_iter(&text)
        .flat_map(|m| {
            num.captures_iter(m.as_str())
                .map(|c| c[1].parse::<i32>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_subcommand_has_help_and_states_only_gapscope_s_exit_statuses() {
    let names = subcommands();
    assert!(names.len() >= 15, "{names:?}");
    for name in &names {
        let help = long_help(name);
        assert!(help.contains("Usage: gapscope"), "{name}: {help}");
        // A line of its own above the usage: what it does.
        let about = help.lines().next().unwrap_or("");
        assert!(about.len() > 10, "{name} has no about text: {help}");
        for code in stated_codes(&help) {
            assert!(
                DOCUMENTED.contains(&code),
                "{name}'s help states exit status {code}, which gapscope does not have: {help}"
            );
        }
    }
}

#[test]
fn exit_statuses_the_help_states_are_what_the_commands_do() {
    let (_, run) = fixture();
    let tmp = tempfile::tempdir().unwrap();
    // diff --fail-on-regression: the help says 4, a regression exits 4.
    let help = long_help("diff");
    // The flag's own entry under Options (the about text names it too).
    let flag = &help[help.rfind("\n      --fail-on-regression").unwrap()..];
    let flag = &flag[..flag[1..].find("\n\n").map_or(flag.len(), |i| i + 1)];
    assert!(stated_codes(flag).contains(&EXIT_REGRESSED), "{flag}");
    assert!(!stated_codes(flag).contains(&EXIT_USAGE), "{flag}");
    let args: Vec<String> = ["diff", &run.display().to_string(), "--fail-on-regression"]
        .map(String::from)
        .to_vec();
    let out = run_in(tmp.path(), &args, Stdio::piped());
    assert_eq!(
        out.status.code(),
        Some(EXIT_REGRESSED),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("regressed: ") && err.contains("--fail-on-regression"),
        "{err}"
    );
    // run: 5 when a variant has no successful rep, as its help says.
    assert!(stated_codes(&long_help("run")).contains(&EXIT_NO_OK_REP));
    let args: Vec<String> = ["run", "--cmd", "true", "--cmd", "exit 3", "--reps", "2"]
        .map(String::from)
        .to_vec();
    let out = run_in(tmp.path(), &args, Stdio::piped());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(EXIT_NO_OK_REP), "{err}");
    assert!(err.contains("no successful rep of exit_3"), "{err}");
    // bisect-step: 128 on an error, as its help says.
    assert!(stated_codes(&long_help("bisect-step")).contains(&EXIT_STEP_ERROR));
    let args: Vec<String> = [
        "bisect-step",
        "--good",
        "a",
        "--bad",
        "b",
        "--experiment",
        "missing.toml",
        "--metric",
        "prove.total",
    ]
    .map(String::from)
    .to_vec();
    let out = run_in(tmp.path(), &args, Stdio::piped());
    assert_eq!(out.status.code(), Some(EXIT_STEP_ERROR));
    // An error elsewhere: 1.
    let args: Vec<String> = ["summary", "no-such-run"].map(String::from).to_vec();
    assert_eq!(
        run_in(tmp.path(), &args, Stdio::piped()).status.code(),
        Some(EXIT_ERROR)
    );
}

#[test]
fn usage_errors_exit_with_the_usage_status() {
    let tmp = tempfile::tempdir().unwrap();
    for name in subcommands() {
        let want = if name == "bisect-step" {
            EXIT_STEP_ERROR
        } else {
            EXIT_USAGE
        };
        let args = vec![name.clone(), "--no-such-flag".to_string()];
        let out = run_in(tmp.path(), &args, Stdio::piped());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(want), "{name}: {err}");
        assert!(err.contains("--no-such-flag"), "{name}: {err}");
    }
    // Missing arguments are usage errors too: `gapscope run` alone, `gapscope diff` alone.
    for args in [&["run"][..], &["diff"], &["summary"], &[]] {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let out = run_in(tmp.path(), &args, Stdio::piped());
        assert_eq!(out.status.code(), Some(EXIT_USAGE), "{args:?}");
    }
    // `gapscope run` alone names its three ways in: a file, --cmd and --resume.
    let out = run_in(tmp.path(), &["run".into()], Stdio::piped());
    let err = String::from_utf8_lossy(&out.stderr);
    for way in ["EXPERIMENT", "--cmd", "--resume", "Usage: gapscope run"] {
        assert!(err.contains(way), "{way}: {err}");
    }
}

#[test]
fn json_output_parses_wherever_a_subcommand_has_it() {
    let (_, run) = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in subcommands().iter().filter(|n| has_json(n)) {
        match json_invocation(name, run) {
            Ok((args, file)) => {
                let out = run_in(tmp.path(), &args, Stdio::piped());
                assert!(
                    out.status.success(),
                    "{name}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let bytes = match file {
                    Some(f) => std::fs::read(tmp.path().join(f)).unwrap(),
                    None => out.stdout,
                };
                let v: Result<serde_json::Value, _> = serde_json::from_slice(&bytes);
                assert!(v.is_ok(), "{name}: {:?}", v.err());
                checked += 1;
            }
            Err(why) => assert!(
                !why.starts_with("no json invocation"),
                "{name} has --format json: {why}"
            ),
        }
    }
    assert!(checked >= 1, "diff at least");
    // export has no --format json, but its Chrome trace is JSON.
    let (args, file) = json_invocation("export", run).unwrap();
    let out = run_in(tmp.path(), &args, Stdio::piped());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(tmp.path().join(file.unwrap())).unwrap();
    serde_json::from_slice::<serde_json::Value>(&bytes).unwrap();
}

#[test]
fn a_closed_stdout_ends_every_subcommand_without_a_panic() {
    let (_, run) = fixture();
    for name in subcommands() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cases = vec![vec![name.clone(), "--help".to_string()]];
        cases.extend(invocation(&name, run, tmp.path()));
        for args in cases {
            let out = with_closed_stdout(tmp.path(), &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?}: {err}");
            assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        }
    }
}

#[test]
fn a_closed_stdout_still_keeps_the_run_it_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let args: Vec<String> = ["run", "--cmd", "true", "--reps", "2", "--warmups", "0"]
        .map(String::from)
        .to_vec();
    let out = with_closed_stdout(tmp.path(), &args);
    assert_ne!(out.status.code(), Some(101));
    let runs: Vec<_> = std::fs::read_dir(tmp.path().join("results/cmd"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 1);
    let dir = runs[0].as_ref().unwrap().path();
    let d = gapscope::store::RunData::load(&dir).unwrap();
    assert_eq!(d.runs.len(), 2);
    assert!(d.meta.completed_utc.is_some());
}
