//! Command line: clap parses the arguments into one struct per subcommand, which turns
//! itself into the library's options; each subcommand's handler is in its own file.
//! `main` only calls [`run`] and maps its error to an exit status.

mod bisect;
mod completions;
mod diff;
mod export;
mod history;
mod import;
mod now;
mod prepare;
pub mod renamed;
mod report;
mod run;
mod run_cmd;
mod run_override;
mod selftest;
mod summary;
mod sweep;
mod track;
mod worker;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "gapscope",
    version,
    about = "Find where a program's time went (yours, or the built-in Groth16 prover): run, diff, report."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an experiment (variants × reps) and write results/<experiment>/<run>/.
    ///
    /// The experiment is a TOML file, or commands given with --cmd (hyperfine-style: one
    /// variant per command, the same schedule, statistics and headline as a file; add
    /// --export-experiment F to keep the file they stand for).
    ///
    /// Exit status: 0 when every variant has a successful measured rep, 1 on an error
    /// (a program that is not found: before the first rep), 2 on a usage error, 3 when a
    /// rep outlived rep_timeout_s in a shared process, 5 when a variant has no
    /// successful measured rep (the run folder is kept), 130 when stopped by Ctrl-C.
    Run(run::RunArgs),
    /// Build every `rev` and `patch` variant's worker of an experiment into the cache, so
    /// that `gapscope run` on a host without cargo (a GPU host) runs them.
    #[command(name = "build-workers", alias = "prepare")]
    BuildWorkers(prepare::PrepareArgs),
    /// Print the phase summary of a run folder.
    Summary(summary::SummaryArgs),
    /// Write a review report (report.md, SVG/PNG charts, Chrome trace) of a run folder.
    Report(report::ReportArgs),
    /// Export a run folder's spans, GPU intervals and NVML samples for another tool.
    Export(export::ExportArgs),
    /// Compare a baseline against a candidate: phase table, statistics with verdicts,
    /// unattributed time in wrapper spans and where the time went.
    ///
    /// With one run folder, compares two of its variants (`baseline` and `candidate`
    /// when so named, else the first two). With two, compares a variant of the first
    /// (baseline) with one of the second (candidate; by default the same name).
    ///
    /// Exit status: 0 when the diff was printed, 1 on an error, 2 on a usage error, 4 with
    /// --fail-on-regression when a row of the phase table is regressed.
    Diff(diff::DiffArgs),
    /// Turn trace files recorded elsewhere (Chrome/Kineto JSON, OTLP JSON, Nsight
    /// Systems SQLite; gzipped or not) into a run folder that summary, diff, report and
    /// export read: one rep per file, or per occurrence of --rep-span.
    Import(import::ImportArgs),
    /// Print a shell completion script (bash, zsh or fish) on stdout.
    Completions(completions::CompletionsArgs),
    /// Generates params into the cache (a run's child process: see obtain_params).
    #[cfg(feature = "groth16")]
    #[command(name = "__params", hide = true)]
    Params(crate::prover::commands::params::ParamsArgs),
    /// Runs one rep of a run folder and prints its result line (process = "per_rep").
    #[command(name = "__worker", hide = true)]
    Worker(worker::WorkerArgs),
    /// Prove with bellperson's own `cuda-supraseal` wrapper (its synthesis, hand-off and
    /// SRS loader) on the circuit and params file `backend = "supraseal"` uses, and
    /// verify every proof: the control that tells upstream's behaviour from ours. Needs a
    /// build with `--features supraseal` and a GPU.
    #[cfg(feature = "groth16")]
    #[command(name = "upstream-reference")]
    UpstreamReference(crate::prover::commands::upstream::UpstreamArgs),
    /// Check the native prover's GPU MSMs (G1, G2) and NTTs against the CPU on random
    /// inputs and on all-zero, all-one and 0/1 scalars; one line per check, all of them
    /// as JSON with --json. Needs a build with `--features cuda` and a GPU.
    #[cfg(feature = "groth16")]
    #[command(name = "cuda-check")]
    CudaCheck(crate::prover::commands::cuda_check::CudaCheckArgs),
    /// Check GPU telemetry on this machine with real kernels and copies (no prover
    /// backend needed); writes <out>/gpu-selftest/<run>/ and prints PASS/FAIL per check.
    ///
    /// Checks that NVML samples and CUPTI kernel and copy intervals land on the span clock
    /// where the kernels ran. Needs an NVIDIA GPU and driver; without one it says so and
    /// exits 1.
    ///
    /// Exit status: 0 when every check passed, 1 when one failed or no GPU was found.
    #[command(name = "gpu-selftest")]
    GpuSelftest(selftest::SelftestArgs),
    /// Find the first commit on --bad's first-parent history after --good (which must be
    /// on that history) where a metric grew: each step runs reps of the good end and the
    /// commit (and the bad end, unless the ends are twice apart or more) as `rev`
    /// variants and stops as soon as the commit is labelled (a confidence sequence of
    /// its place between the ends), or at a cap.
    /// Prints the first bad commit with its change against its parent, then every step.
    Bisect(bisect::BisectArgs),
    /// Judge one commit (default HEAD) as `gapscope bisect` does, for `git bisect start
    /// --first-parent BAD GOOD; git bisect run gapscope bisect-step …`: exit 0 good, 1
    /// bad, 125 skip (did not build, timed out, or cannot tell), 128 on an error (which
    /// stops `git bisect run`).
    #[command(name = "bisect-step")]
    BisectStep(bisect::StepArgs),
    /// Print the span clock (CLOCK_MONOTONIC) in nanoseconds, for shell scripts that
    /// write span lines: `t0=$(gapscope now)`. The cost of one call (a process start) is
    /// in docs/external-programs.md.
    Now(now::NowArgs),
    /// Sweep an experiment over axes (revisions, sizes, knobs, GPUs) as independent
    /// cells: plan them, run them here, as a Slurm job array or a Kubernetes Indexed
    /// Job, follow their state and collect their run folders.
    Sweep(sweep::SweepArgs),
    /// History across commits: store run folders (`add`, `import`), show a metric over
    /// first-parent commits with its steps (`show`), list steps (`regressions`), and
    /// bisect a step (`bisect`).
    History(history::HistoryArgs),
    /// For CI: run an experiment at HEAD, store it in the history, and judge HEAD against
    /// the last N commits on this host; a suspected step is re-run against its parent,
    /// interleaved. Prints a Markdown summary. Exit 4 only when a step is confirmed.
    Track(track::TrackArgs),
    /// Prints this build's worker protocol (asked of a `rev` variant's gapscope).
    #[command(name = "__protocol", hide = true)]
    Protocol,
    /// Prints whether this build's worker serves many reps (`process = "per_variant"`).
    #[command(name = "__serves", hide = true)]
    Serves,
}

/// Exit status of `gapscope diff --fail-on-regression` when a phase regressed: a code of
/// its own, so that CI tells a regression from a usage error (2, clap's) or a failure (1).
pub const EXIT_REGRESSED: i32 = 4;

/// Exit statuses of gapscope (docs/troubleshooting.md, "Exit status"): 0 ok, [`EXIT_ERROR`],
/// [`EXIT_USAGE`] (clap's own), 3 a rep outlived `rep_timeout_s` in a shared process
/// ([`crate::experiment::runner::EXIT_TIMED_OUT`]), [`EXIT_REGRESSED`],
/// [`EXIT_NO_OK_REP`], and 130 for a run stopped by Ctrl-C
/// ([`crate::experiment::EXIT_INTERRUPTED`]).
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
/// Exit status of `gapscope run` when a variant has no successful measured rep: the run
/// folder is written and kept, but nothing of that variant can be compared.
pub const EXIT_NO_OK_REP: i32 = 5;
/// Exit status of `gapscope bisect-step` on an error, a usage error included: 128 stops
/// `git bisect run`, where 2 would mark the commit bad.
pub const EXIT_STEP_ERROR: i32 = 128;

/// A closed stdout or stderr (`gapscope diff RUN | head -1`) ends the process quietly
/// by SIGPIPE, as it ends `cat`, instead of a panic in the first `println!` that fails.
/// The one pipe of a child's that gapscope writes to, a serving worker's stdin, is
/// written with SIGPIPE held off (`experiment::served`), so that a
/// worker that died fails its rep rather than ending the run; other children's stdin is
/// /dev/null, and the span, pid and handshake pipes are read or kept open by this
/// process. Children get the default disposition from `exec` anyway.
pub fn quiet_on_closed_pipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler; it runs before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Prints `e` for the user and returns the exit status it stands for.
pub fn report_error(e: &anyhow::Error) -> i32 {
    if let Some(c) = e.downcast_ref::<clap::Error>() {
        // A usage error found after parsing: clap's message, usage line and status (2).
        let _ = c.print();
        return c.exit_code();
    }
    if let Some(r) = e.downcast_ref::<Regressed>() {
        eprintln!("{}", crate::markup::terminal_safe(&r.to_string()));
        return EXIT_REGRESSED;
    }
    if let Some(s) = e.downcast_ref::<bisect::StepExit>() {
        eprintln!("{s}");
        return s.code;
    }
    if let Some(n) = e.downcast_ref::<run::NoOkRep>() {
        eprintln!("Error: {n}");
        return EXIT_NO_OK_REP;
    }
    if let Some(r) = e.downcast_ref::<crate::experiment::until_decided::Refused>() {
        eprintln!("error: {r}");
        return EXIT_USAGE;
    }
    if let Some(i) = e.downcast_ref::<crate::experiment::Interrupted>() {
        eprintln!("{i}");
        return crate::experiment::EXIT_INTERRUPTED;
    }
    // An error may quote a run folder (a span name, a path, a line): shown, not obeyed.
    eprintln!("Error: {}", crate::markup::terminal_text(&error_chain(e)));
    EXIT_ERROR
}

/// `e` and its causes joined by ": ", as `{:#}` writes them, but without a cause whose
/// text the message before it already ends with (an error that quotes its source, as
/// many do, would otherwise print it twice).
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `gapscope diff --fail-on-regression` found regressed phases: not a failure of the
/// tool, so `main` exits with [`EXIT_REGRESSED`] rather than 1.
#[derive(Debug, thiserror::Error)]
#[error("regressed: {} (phase table; --fail-on-regression)", phases.join(", "))]
pub struct Regressed {
    pub phases: Vec<String>,
}

/// What `--params-dir` given for a command workload gets: a note, not a refusal (device
/// scripts pass it to every experiment they run), saying that it is not used.
pub const PARAMS_DIR_UNUSED: &str = "note: --params-dir is not used: this experiment runs a \
     program of yours, which has no params (they are the prover's)";

/// Says on stderr that `--params-dir` is not used, for an experiment that runs a program
/// of the user's: only the prover's workloads have params.
fn note_params_dir(given: bool, exp: &crate::experiment::Experiment) {
    if given && exp.workload.command.is_some() {
        eprintln!("{PARAMS_DIR_UNUSED}");
    }
}

/// The params cache when no `--params-dir` is given: $GAPSCOPE_PARAMS_DIR, else ./params.
fn default_params_dir() -> PathBuf {
    std::env::var_os("GAPSCOPE_PARAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("params"))
}

/// Says on stderr that a run folder holds a run that stopped early (or is still
/// running), and how to continue it; its finished reps are read all the same.
fn note_incomplete(data: &crate::store::RunData) {
    if let Some(n) = crate::store::RunProgress::of(data).note(&data.dir) {
        eprintln!("note: {}", crate::markup::terminal_text(&n));
    }
}

/// The command line as given, kept in meta.json and the report.
fn command_line() -> Vec<String> {
    std::env::args().collect()
}

/// Parses the command line and runs the subcommand.
pub fn run() -> Result<()> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // `git bisect run` takes 2 for "bad": a usage error of bisect-step stops it.
            let step = std::env::args().nth(1).as_deref() == Some("bisect-step");
            if step && e.use_stderr() {
                let _ = e.print();
                std::process::exit(EXIT_STEP_ERROR);
            }
            e.exit()
        }
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for note in renamed::notes(&args) {
        eprintln!("{note}");
    }
    if std::env::var_os("GAPSCOPE_LOG_SPANS").is_some_and(|v| v != "0") {
        crate::trace::set_mirror(Box::new(crate::trace::StderrSpanLog));
    }
    match cli.command {
        Command::Run(a) => run::run(a),
        Command::BuildWorkers(a) => prepare::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Report(a) => report::run(a),
        Command::Export(a) => export::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Import(a) => import::run(a),
        Command::Completions(a) => completions::run(a),
        #[cfg(feature = "groth16")]
        Command::Params(a) => crate::prover::commands::params::run(a),
        Command::Worker(a) => worker::run(a),
        #[cfg(feature = "groth16")]
        Command::UpstreamReference(a) => crate::prover::commands::upstream::run(a),
        #[cfg(feature = "groth16")]
        Command::CudaCheck(a) => crate::prover::commands::cuda_check::run(a),
        Command::GpuSelftest(a) => selftest::run(a),
        Command::Bisect(a) => bisect::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::BisectStep(a) => bisect::run_step(a),
        Command::Now(a) => now::run(a),
        Command::History(a) => history::run(a),
        Command::Track(a) => track::run(a),
        Command::Protocol => {
            println!("{}", gapscope_workload::worker::WORKER_PROTOCOL);
            Ok(())
        }
        Command::Serves => {
            println!("{}", gapscope_workload::worker::SERVE_PROTOCOL);
            Ok(())
        }
    }
}
