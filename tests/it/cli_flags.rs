//! Every flag either applies or is refused with the reason (exit 2); none is silently
//! ignored. The walk goes over every subcommand's flags as clap defines them: each must
//! be listed below with what it does, so that a new flag fails this test until someone
//! decides. `gapscope run`'s flags, where a flag meant for `--cmd` was once ignored with
//! an experiment file, are each run against one and their effect or refusal checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use gapscope::cli::Cli;
use serde_json::Value;

use crate::common;

/// Every subcommand's flags, by subcommand path, with how each applies. For `run`, the
/// test below checks each one against an experiment file; the rest say what they change
/// in the work the subcommand does (they take no experiment file, or apply to it as
/// named).
const FLAGS: &[(&str, &[(&str, &str)])] = &[
    (
        "run",
        &[
            (
                "resume",
                "run: refused with a file (continues a run folder)",
            ),
            (
                "cmd",
                "run: refused with a file (the commands are the experiment)",
            ),
            ("name", "run: refused with a file"),
            ("reps", "run: overrides [run] reps"),
            ("warmups", "run: overrides [run] warmups"),
            ("prepare", "run: refused with a file"),
            ("shell", "run: refused with a file"),
            ("export-experiment", "run: refused with a file"),
            ("results-dir", "run: where the run folder goes"),
            (
                "params-dir",
                "run: the prover's params; refused for a command workload",
            ),
            ("until-decided", "run: adds pairs until decided"),
            ("max-reps", "run: the cap of --until-decided"),
            ("budget", "run: the wall-time budget of --until-decided"),
            ("quiet", "run: no summary table"),
            ("nvtx", "run: meta.json's gpu.nvtx says where the ranges go"),
            ("debug-corrupt-proofs", "test double"),
            ("debug-worker", "test double"),
            ("debug-leak-bytes-per-rep", "test double"),
            ("debug-deny-profile", "test double"),
            ("debug-late-span", "test double"),
        ],
    ),
    (
        "build-workers",
        &[
            ("results-dir", "the cache the workers go to"),
            ("features", "the workers' cargo features"),
            ("quiet", "no progress"),
        ],
    ),
    (
        "report",
        &[
            ("out", "the report folder"),
            ("flame-span", "the flame graphs' span"),
        ],
    ),
    (
        "export",
        &[
            ("format", "the output format"),
            ("chrome", "= --format chrome"),
            ("rep", "one rep"),
            ("out-file", "the output file"),
        ],
    ),
    (
        "diff",
        &[
            ("baseline", "the baseline variant"),
            ("candidate", "the candidate variant"),
            ("format", "the output format"),
            ("noise-floor", "statistics"),
            ("alpha", "statistics"),
            ("resamples", "statistics"),
            ("time-floor-ns", "statistics"),
            ("time-floor-share", "statistics"),
            ("count-floor", "statistics"),
            ("no-fdr", "statistics"),
            ("between-runs", "statistics, two run folders"),
            ("gap-threshold", "gap flags"),
            ("seed", "bootstrap seed"),
            ("force", "compare different workloads"),
            ("unpaired", "statistics"),
            ("welch", "statistics"),
            ("fail-on-regression", "exit 4"),
            ("flame-span", "differential flame graph"),
            ("flame-file", "its file"),
        ],
    ),
    (
        "import",
        &[
            ("name", "the experiment name of the imported run"),
            ("variant", "a variant's trace files"),
            ("results-dir", "where the run folder goes"),
            ("rep-span", "one rep per occurrence"),
            ("paired-by-order", "pairing"),
            ("name-map", "span renames"),
            ("no-default-names", "span names"),
            ("gpu-spans", "GPU spans"),
            ("max-file-bytes", "a limit"),
        ],
    ),
    (
        "__params",
        &[
            ("circuit", "hidden: a run's child"),
            ("log2-constraints", "hidden: a run's child"),
            ("gadget", "hidden: a run's child"),
            ("params-dir", "hidden: a run's child"),
            ("generator", "hidden: a run's child"),
            ("time-only", "hidden: a run's child"),
            ("toxic-seed", "hidden: a run's child"),
            ("digest", "hidden: a run's child"),
        ],
    ),
    (
        "__worker",
        &[
            ("run-dir", "hidden: a run's child"),
            ("params-dir", "hidden: a run's child"),
            ("variant", "hidden: a run's child"),
            ("rep", "hidden: a run's child"),
            ("iteration", "hidden: a run's child"),
            ("warmup", "hidden: a run's child"),
            ("nvtx", "hidden: a run's child"),
            ("emulated", "hidden: a run's child"),
            ("debug-corrupt-proofs", "test double"),
            ("debug-worker", "test double"),
            ("debug-deny-profile", "test double"),
            ("serve", "hidden: a run's child"),
        ],
    ),
    (
        "upstream-reference",
        &[
            ("circuit", "the circuit"),
            ("log2-constraints", "its size"),
            ("gadget", "its gadget"),
            ("batch", "circuits per proof call"),
            ("calls", "prover calls"),
            ("params-dir", "the params cache"),
        ],
    ),
    (
        "cuda-check",
        &[
            ("log2-sizes", "sizes"),
            ("seed", "inputs"),
            ("json", "a JSON file"),
        ],
    ),
    (
        "gpu-selftest",
        &[
            ("results-dir", "where the run folder goes"),
            ("reps", "measured reps"),
            ("launches", "kernel pairs"),
            ("spin-iters", "kernel length"),
            ("elements", "buffer size"),
            ("telemetry-period-ms", "NVML period"),
            ("nvtx", "NVTX check"),
        ],
    ),
    ("bisect", BISECT),
    ("bisect-step", BISECT_STEP),
    (
        "sweep run",
        &[
            ("local", "run here"),
            ("slurm", "a job array"),
            ("k8s", "manifests"),
            ("write-only", "with --slurm"),
            ("sbatch", "with --slurm"),
            ("out-file", "with --k8s"),
            ("root", "results root"),
            ("params-dir", "with --local"),
            ("quiet", "no progress"),
        ],
    ),
    ("sweep plan", &[("format", "text or JSON")]),
    (
        "sweep cell",
        &[
            ("index", "the cell"),
            ("task", "the task number"),
            ("task-env", "the task number's variable"),
            ("cells", "the job's cells"),
            ("params-dir", "the params cache"),
        ],
    ),
    (
        "sweep status",
        &[("root", "results root"), ("format", "text or JSON")],
    ),
    (
        "sweep collect",
        &[
            ("root", "results root"),
            ("partial", "succeed while unfinished"),
            ("history", "import into the history"),
            ("db", "the history file"),
            ("repo", "the repository"),
            ("branch", "its branch"),
            ("format", "text or JSON"),
        ],
    ),
    (
        "history add",
        &[
            ("db", "the history file"),
            ("repo", "the repository"),
            ("branch", "its branch"),
            ("debug-pause-in-folder", "test double"),
        ],
    ),
    (
        "history import",
        &[
            ("db", "the history file"),
            ("repo", "the repository"),
            ("branch", "its branch"),
            ("debug-pause-in-folder", "test double"),
        ],
    ),
    ("history show", HISTORY_SELECT_CHART),
    ("history regressions", HISTORY_SELECT_CONFIRMED),
    (
        "history bisect",
        &[
            ("db", "the history file"),
            ("min-segment", "change points"),
            ("experiment", "the experiment bisected"),
            ("threshold", "bisect's threshold"),
            ("reps", "bisect's cap per step"),
            ("repo", "the repository"),
            ("results-dir", "where step runs go"),
            ("params-dir", "the params cache"),
            ("format", "text or JSON"),
        ],
    ),
    ("history detect", &[("format", "text or JSON")]),
    (
        "track",
        &[
            ("metric", "the metric"),
            ("last", "commits compared"),
            ("confirm-reps", "re-run reps"),
            ("threshold", "the step threshold"),
            ("db", "the history file"),
            ("repo", "the repository"),
            ("branch", "its branch"),
            ("results-dir", "where runs go"),
            ("params-dir", "the params cache"),
            ("summary", "the Markdown file"),
        ],
    ),
];

const BISECT_COMMON: [(&str, &str); 12] = [
    ("good", "the good end"),
    ("bad", "the bad end"),
    ("experiment", "the experiment each step runs"),
    ("metric", "the metric"),
    ("threshold", "the threshold"),
    ("reps", "the cap per step"),
    ("retry-timeouts", "timeouts"),
    ("quiet", "no progress"),
    ("repo", "the repository"),
    ("patch", "a patch variant"),
    ("results-dir", "where step runs go"),
    ("params-dir", "the params cache"),
];
const BISECT: &[(&str, &str)] = &{
    let mut a = [("format", "text or JSON"); 13];
    let mut i = 0;
    while i < 12 {
        a[i] = BISECT_COMMON[i];
        i += 1;
    }
    a
};
const BISECT_STEP: &[(&str, &str)] = &{
    let mut a = [("rev", "the commit judged"); 13];
    let mut i = 0;
    while i < 12 {
        a[i] = BISECT_COMMON[i];
        i += 1;
    }
    a
};
const HISTORY_SELECT: [(&str, &str); 8] = [
    ("db", "the history file"),
    ("metric", "the metric"),
    ("workload", "selection"),
    ("variant", "selection"),
    ("host", "selection"),
    ("last", "selection"),
    ("min-segment", "change points"),
    ("format", "text or JSON"),
];
const HISTORY_SELECT_CHART: &[(&str, &str)] = &{
    let mut a = [("chart", "an SVG of the series"); 9];
    let mut i = 0;
    while i < 8 {
        a[i] = HISTORY_SELECT[i];
        i += 1;
    }
    a
};
const HISTORY_SELECT_CONFIRMED: &[(&str, &str)] = &{
    let mut a = [("confirmed", "confirmed steps only"); 9];
    let mut i = 0;
    while i < 8 {
        a[i] = HISTORY_SELECT[i];
        i += 1;
    }
    a
};

/// Every (subcommand path, flag) clap defines, hidden ones included.
fn walk(cmd: &clap::Command, path: &str, out: &mut BTreeSet<(String, String)>) {
    for a in cmd.get_arguments() {
        match a.get_long() {
            Some("help") | Some("version") | None => {}
            Some(l) => {
                out.insert((path.to_string(), l.to_string()));
            }
        }
    }
    for s in cmd.get_subcommands() {
        let p = match path {
            "" => s.get_name().to_string(),
            _ => format!("{path} {}", s.get_name()),
        };
        walk(s, &p, out);
    }
}

#[test]
fn every_flag_of_every_subcommand_is_listed_with_what_it_does() {
    let mut defined = BTreeSet::new();
    walk(&Cli::command(), "", &mut defined);
    assert!(defined.len() > 150, "{}", defined.len());
    let listed: BTreeSet<(String, String)> = FLAGS
        .iter()
        .flat_map(|(path, flags)| flags.iter().map(|(f, _)| (path.to_string(), f.to_string())))
        .collect();
    let new: Vec<_> = defined.difference(&listed).collect();
    assert!(
        new.is_empty(),
        "flags not listed in tests/cli_flags.rs: {new:?}. Decide for each whether it applies \
         (and, for `gapscope run`, check it against an experiment file below) or is refused \
         with the reason"
    );
    let gone: Vec<_> = listed.difference(&defined).collect();
    assert!(gone.is_empty(), "listed flags clap no longer has: {gone:?}");
    // Every `run` flag that is not a test double is exercised below.
    let run = FLAGS.iter().find(|(p, _)| *p == "run").unwrap().1;
    for (flag, what) in run {
        assert!(
            what.starts_with("run: ") || *what == "test double",
            "run --{flag}: {what}"
        );
        assert!(
            *what == "test double" || RUN_CHECKED.contains(flag),
            "run --{flag} is not checked against an experiment file"
        );
    }
}

/// The `run` flags [`run_flags_apply_or_are_refused_with_an_experiment_file`] checks.
const RUN_CHECKED: &[&str] = &[
    "resume",
    "cmd",
    "name",
    "reps",
    "warmups",
    "prepare",
    "shell",
    "export-experiment",
    "results-dir",
    "params-dir",
    "until-decided",
    "max-reps",
    "budget",
    "quiet",
    "nvtx",
];

const COMMAND_EXP: &str = "name = \"flags\"\n[workload]\ncommand = [\"true\"]\n[run]\nreps = 4\n\
                           warmups = 0\norder = \"counterbalanced\"\n[[variant]]\nname = \"a\"\n\
                           [[variant]]\nname = \"b\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n";

const PROVER_EXP: &str =
    "name = \"prover\"\n[workload]\ncircuit = \"porep\"\nlog2_constraints = 10\n\
                          batch = 1\nbackend = \"cpu\"\n[run]\nreps = 1\nwarmups = 0\n\
                          [[variant]]\nname = \"baseline\"\n";

struct Ran {
    /// The folder it ran in (run folders are printed relative to it).
    cwd: PathBuf,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn dir(&self) -> PathBuf {
        assert_eq!(self.code, Some(0), "{}", self.stderr);
        self.cwd.join(common::run_dir_of(self.stdout.as_bytes()))
    }

    fn refused(&self, flag: &str, why: &str) {
        assert_eq!(self.code, Some(2), "{flag}: {}{}", self.stdout, self.stderr);
        assert!(self.stderr.contains(why), "{flag}: {}", self.stderr);
        assert!(
            self.stderr.contains("Usage: gapscope run"),
            "{flag}: {}",
            self.stderr
        );
    }
}

fn run(tmp: &Path, exp: &str, extra: &[&str]) -> Ran {
    let out = common::gapscope(tmp)
        .arg("run")
        .arg(exp)
        .args(extra)
        .output()
        .unwrap();
    Ran {
        cwd: tmp.to_path_buf(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn meta(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap()
}

/// Measured and warm-up reps per variant, from runs.csv.
fn reps(dir: &Path, variant: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (v, w) = (col("variant"), col("warmup"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let of = |warm: &str| {
        rows.iter()
            .filter(|r| r[v] == variant && r[w] == warm)
            .count()
    };
    (of("false"), of("true"))
}

#[test]
fn run_flags_apply_or_are_refused_with_an_experiment_file() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("e.toml"), COMMAND_EXP).unwrap();
    let base = run(t, "e.toml", &["--quiet"]).dir();

    // Flags of --cmd: refused, with what to write in the file.
    for (flag, value) in [
        ("--name", "x"),
        ("--prepare", "exit 3"),
        ("--shell", "bash"),
        ("--export-experiment", "x.toml"),
    ] {
        let r = run(t, "e.toml", &[flag, value]);
        r.refused(
            flag,
            &format!("{flag} does not apply with an experiment file"),
        );
    }
    assert!(!t.join("x.toml").exists());
    // --cmd and --resume are other ways in: clap refuses them together with a file.
    run(t, "e.toml", &["--cmd", "true"]).refused("--cmd", "--cmd");
    let b = base.to_str().unwrap();
    run(t, "e.toml", &["--resume", b]).refused("--resume", "--resume");
    // A program of one's own has no params: said, and nothing made.
    let r = run(t, "e.toml", &["--quiet", "--params-dir", "p"]);
    r.dir();
    assert!(
        r.stderr.contains(gapscope::cli::PARAMS_DIR_UNUSED),
        "{}",
        r.stderr
    );
    assert!(!t.join("p").exists());

    // --reps and --warmups: the file's values replaced, said, and kept in the run folder.
    let r = run(t, "e.toml", &["--quiet", "--reps", "2", "--warmups", "1"]);
    let dir = r.dir();
    assert!(
        r.stderr
            .contains("--reps 2 overrides [run] reps = 4 of e.toml"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("--warmups 1 overrides [run] warmups = 0"),
        "{}",
        r.stderr
    );
    assert_eq!(reps(&dir, "a"), (2, 1));
    assert_eq!(reps(&dir, "b"), (2, 1));
    let m = meta(&dir);
    assert_eq!(
        (m["reps"].as_u64(), m["warmups"].as_u64()),
        (Some(2), Some(1))
    );
    let copy = std::fs::read_to_string(dir.join("experiment.toml")).unwrap();
    assert!(
        copy.contains("reps = 2") && copy.contains("the file says 4"),
        "{copy}"
    );
    assert_eq!(
        reps(&base, "a"),
        (4, 0),
        "without the flags, the file's schedule"
    );
    // ... and refused where the run keeps its own schedule and folder (its own folder
    // may be named: that is where it continues).
    let own = common::gapscope(t)
        .args(["run", "--quiet", "--resume", b, "--results-dir", "results"])
        .output()
        .unwrap();
    assert!(
        own.status.success(),
        "{}",
        String::from_utf8_lossy(&own.stderr)
    );
    for flag in ["--reps", "--warmups", "--results-dir"] {
        let value = if flag == "--results-dir" { "r2" } else { "3" };
        let out = common::gapscope(t)
            .args(["run", "--resume", b, flag, value])
            .output()
            .unwrap();
        let r = Ran {
            cwd: t.to_path_buf(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        r.refused(flag, &format!("{flag} does not apply with --resume"));
    }

    // --results-dir: where the run folder goes.
    let dir = run(t, "e.toml", &["--quiet", "--results-dir", "elsewhere"]).dir();
    assert!(
        dir.starts_with(t.join("elsewhere/flags")),
        "{}",
        dir.display()
    );
    // --quiet: the run folder alone on stdout; without it, the summary too.
    let r = run(t, "e.toml", &["--quiet"]);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    let r = run(t, "e.toml", &[]);
    assert!(r.stdout.lines().count() > 3, "{}", r.stdout);
    // --nvtx: meta.json says where the ranges went, or why they could not.
    let off = meta(&base)["gpu"]["nvtx"].as_str().unwrap().to_string();
    let dir = run(t, "e.toml", &["--quiet", "--nvtx"]).dir();
    let on = meta(&dir)["gpu"]["nvtx"].as_str().unwrap().to_string();
    assert!(
        off.starts_with("off") && !on.starts_with("off"),
        "{off} / {on}"
    );
    // --until-decided with --max-reps and --budget: recorded; the cap bounds the reps.
    let dir = run(
        t,
        "e.toml",
        &[
            "--quiet",
            "--until-decided",
            "--max-reps",
            "4",
            "--budget",
            "1h",
        ],
    )
    .dir();
    let m = meta(&dir);
    assert_eq!(m["until_decided"]["budget_s"].as_u64(), Some(3600), "{m}");
    assert_eq!(m["reps"].as_u64(), Some(4), "{m}");
    assert!(reps(&dir, "a").0 <= 4);
    // Their own rules: the cap and budget only with --until-decided, which takes no --reps.
    for extra in [
        &["--max-reps", "4"][..],
        &["--budget", "1h"],
        &["--until-decided", "--reps", "4"],
    ] {
        let r = run(t, "e.toml", extra);
        assert_eq!(r.code, Some(2), "{extra:?}: {}", r.stderr);
    }
}

/// `--params-dir` applies to the prover's workload: the params go there.
#[test]
fn params_dir_applies_to_the_prover_s_workload() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("p.toml"), PROVER_EXP).unwrap();
    run(t, "p.toml", &["--quiet", "--params-dir", "mine"]).dir();
    let made = std::fs::read_dir(t.join("mine")).unwrap().count();
    assert!(made > 0, "no params in the --params-dir");
    assert!(
        !t.join("params").exists(),
        "params went to the default folder too"
    );
}

/// The old spellings docs/troubleshooting.md lists are the ones gapscope accepts.
#[test]
fn every_renamed_spelling_is_in_the_troubleshooting_guide() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/troubleshooting.md"),
    )
    .unwrap();
    let section = doc
        .split("## Old option names")
        .nth(1)
        .expect("the section");
    for r in gapscope::cli::renamed::RENAMED {
        let old = r.old.split(' ').next().unwrap();
        let new = r.new.split(' ').next().unwrap();
        assert!(
            section.contains(old) && section.contains(new),
            "{} → {} is not in docs/troubleshooting.md",
            r.old,
            r.new
        );
    }
}

/// `--params-dir` with a command workload, wherever one is run (bisect, its step, track):
/// a note says it is not used (device scripts pass it to every experiment), before any
/// git work.
#[test]
fn params_dir_is_said_unused_for_a_command_workload_wherever_one_is_run() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("e.toml"), COMMAND_EXP).unwrap();
    let ends = [
        "--good",
        "HEAD~1",
        "--bad",
        "HEAD",
        "--experiment",
        "e.toml",
    ];
    let metric = ["--metric", "program.total", "--params-dir", "p"];
    let runs = [
        vec!["bisect"]
            .into_iter()
            .chain(ends)
            .chain(metric)
            .collect::<Vec<_>>(),
        vec!["bisect-step"]
            .into_iter()
            .chain(ends)
            .chain(metric)
            .collect(),
        vec!["track", "e.toml"].into_iter().chain(metric).collect(),
    ];
    for args in runs {
        // Not a git repository: each fails after the note.
        let out = common::gapscope(t).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(gapscope::cli::PARAMS_DIR_UNUSED),
            "{args:?}: {err}"
        );
    }
    assert!(!t.join("p").exists());
}
