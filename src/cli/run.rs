//! `gapscope run`: runs an experiment (a file, or commands given with `--cmd`), then
//! prints its summary and run folder. It exits with [`super::EXIT_NO_OK_REP`] when a
//! variant has no successful measured rep.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::experiment::until_decided::{self, MIN_MAX_REPS};
use crate::experiment::{self, DebugHooks, RunOptions, UntilDecided, WorkerDebug};
use crate::store::RunData;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Experiment TOML (omit with --resume or --cmd).
    experiment: Option<PathBuf>,
    /// Continue a killed run in this folder; finished reps are kept.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "experiment")]
    resume: Option<PathBuf>,
    #[command(flatten)]
    adhoc: super::run_cmd::AdHocArgs,
    /// Where run folders go [default: results] (a resumed run continues in its own).
    #[arg(long, value_name = "DIR")]
    results_dir: Option<PathBuf>,
    /// Params cache of the prover's workloads (defaults to $GAPSCOPE_PARAMS_DIR or
    /// ./params); a command workload has none.
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// Add counterbalanced pairs of reps (one per variant) until end to end and every
    /// span's self time on the critical path is regressed, improved or equivalent, or
    /// --max-reps or --budget is spent; after each pair a progress line says what is still
    /// open. Its intervals hold however often they are looked at (confidence sequences),
    /// so stopping early costs no false alarms. Two variants only; `--resume` continues
    /// such a run.
    #[arg(long, conflicts_with = "reps")]
    until_decided: bool,
    /// With --until-decided: most measured reps per variant, i.e. pairs [default: 50; on
    /// --resume, the run's own].
    #[arg(
        long,
        value_name = "N",
        requires = "until_decided",
        value_parser = clap::value_parser!(u32).range(MIN_MAX_REPS as i64..=experiment::spec::MAX_REPS as i64)
    )]
    max_reps: Option<u32>,
    /// With --until-decided: no pair is started that would end past this wall time since
    /// the command started (e.g. 30m, 1h30m, 90s).
    #[arg(long, value_name = "DURATION", requires = "until_decided", value_parser = until_decided::parse_budget)]
    budget: Option<Duration>,
    /// No progress bar or summary table.
    #[arg(long, short)]
    quiet: bool,
    /// Mirror every span as an NVTX range, so that Nsight Systems shows the phases
    /// (under `nsys profile -t cuda,nvtx`; without a profiler the ranges go to
    /// gapscope's CUPTI, as `nvtx` rows of gpu_activity.csv; meta.json says where, or
    /// why the mirror is unavailable).
    #[arg(long)]
    nvtx: bool,
    /// Test double: corrupt the proofs of this variant (repeatable), so its reps fail
    /// verification.
    #[arg(long, hide = true, value_name = "VARIANT")]
    debug_corrupt_proofs: Vec<String>,
    /// Test double: what each per_rep worker does before its rep.
    #[arg(long, hide = true, value_enum)]
    debug_worker: Option<WorkerDebug>,
    /// Test double: bytes each rep (shared process) leaks, for the leak watch to flag.
    #[arg(long, hide = true, value_name = "BYTES", default_value_t = 0)]
    debug_leak_bytes_per_rep: u64,
    /// Test double: the stack sampler's perf events are refused with this reason.
    #[arg(long, hide = true, value_name = "REASON")]
    debug_deny_profile: Option<String>,
    /// Test double: each rep (shared process) leaves a span open on a thread of its own,
    /// closed when the next rep starts.
    #[arg(long, hide = true)]
    debug_late_span: bool,
}

impl RunArgs {
    fn options(&self) -> RunOptions {
        RunOptions {
            results_dir: self
                .results_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("results")),
            params_dir: self
                .params_dir
                .clone()
                .unwrap_or_else(super::default_params_dir),
            resume: self.resume.clone(),
            progress: !self.quiet,
            command: super::command_line(),
            nvtx: self.nvtx,
            until_decided: self.until_decided.then_some(UntilDecided {
                max_reps: self.max_reps,
                budget: self.budget,
            }),
            stop_when: None,
            debug: DebugHooks {
                corrupt_proofs: self.debug_corrupt_proofs.clone(),
                worker: self.debug_worker,
                leak_bytes_per_rep: self.debug_leak_bytes_per_rep,
                deny_profile: self.debug_deny_profile.clone(),
                late_span: self.debug_late_span,
            },
        }
    }
}

/// A run in which a variant has no successful measured rep: its folder is kept, but
/// that variant cannot be compared.
#[derive(Debug, thiserror::Error)]
#[error(
    "no successful rep of {}: every measured rep failed (see the error column of {}/runs.csv; \
     the run folder is kept)",
    variants.join(", "),
    dir
)]
pub struct NoOkRep {
    pub variants: Vec<String>,
    pub dir: String,
}

/// A usage error of `gapscope run`: clap's message and usage line, exit status 2.
fn usage(kind: clap::error::ErrorKind, message: String) -> anyhow::Error {
    use clap::CommandFactory;
    let mut run = super::Cli::command()
        .find_subcommand("run")
        .expect("the run subcommand")
        .clone()
        .bin_name("gapscope run");
    anyhow::Error::new(run.error(kind, message))
}

impl RunArgs {
    /// The flags given that do not apply to what is run (commands, an experiment file or
    /// a run folder to continue), each with the reason and what to do instead.
    fn refusals(&self) -> Vec<String> {
        let what = if self.resume.is_some() {
            "with --resume"
        } else {
            "with an experiment file"
        };
        let mut out = Vec::new();
        if !self.adhoc.given() {
            let h = &self.adhoc;
            let cmd_only = [
                (
                    !h.names.is_empty(),
                    "--name",
                    "names the variants of --cmd; an experiment file names each with \
                     `name = \"...\"` under its [[variant]]",
                ),
                (
                    h.prepare.is_some(),
                    "--prepare",
                    "runs before each rep of --cmd's commands; in an experiment file, write \
                     `prepare = [\"sh\", \"-c\", \"...\"]` under [workload]",
                ),
                (
                    h.shell.is_some(),
                    "--shell",
                    "says how --cmd's commands run; an experiment file's commands are \
                     argument lists (write [\"bash\", \"-c\", \"...\"] there)",
                ),
                (
                    h.export_experiment.is_some(),
                    "--export-experiment",
                    "writes the experiment file that --cmd stands for; this run has one \
                     already",
                ),
            ];
            for (given, flag, why) in cmd_only {
                if given {
                    out.push(format!("{flag} does not apply {what}: it {why}"));
                }
            }
        }
        if self.resume.is_some() {
            for (given, flag) in [
                (self.adhoc.reps.is_some(), "--reps"),
                (self.adhoc.warmups.is_some(), "--warmups"),
            ] {
                if given {
                    out.push(format!(
                        "{flag} does not apply with --resume: a resumed run keeps the schedule \
                         it started with (its experiment.toml); start a new run to change it"
                    ));
                }
            }
            if let Some(why) = self.results_dir_elsewhere() {
                out.push(why);
            }
        }
        out
    }

    /// With --resume: why `--results-dir` is refused when it names another folder than
    /// the one holding the run (which it continues in); the same folder is accepted.
    fn results_dir_elsewhere(&self) -> Option<String> {
        let (given, run) = (self.results_dir.as_ref()?, self.resume.as_ref()?);
        let holder = run.parent().and_then(|p| p.parent())?;
        let same =
            |a: &std::path::Path, b: &std::path::Path| match (a.canonicalize(), b.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
        (!same(given, holder)).then(|| {
            format!(
                "--results-dir does not apply with --resume: the run continues in its own \
                 folder, under {}",
                holder.display()
            )
        })
    }
}

/// Whether the experiment run from `file` or resumed from `resume` is a command workload
/// (false where it cannot be read: the run then says why).
fn command_workload(file: Option<&std::path::Path>, resume: Option<&std::path::Path>) -> bool {
    let loaded = match (resume, file) {
        (Some(dir), _) => {
            crate::experiment::Experiment::load_copy(dir, crate::store::EXPERIMENT_COPY).ok()
        }
        (None, Some(f)) => crate::experiment::Experiment::load(f).ok(),
        (None, None) => None,
    };
    loaded.is_some_and(|(e, _)| e.workload.command.is_some())
}

/// Refuses a command line that names nothing to run, or flags that do not apply to what
/// it names (usage errors, exit 2); says so of `--params-dir` where nothing uses it.
fn check_usage(a: &RunArgs) -> Result<()> {
    use clap::error::ErrorKind;
    if a.experiment.is_none() && a.resume.is_none() && !a.adhoc.given() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "nothing to run: give an experiment file (gapscope run experiments/quickstart.toml), \
             commands to compare (gapscope run --cmd 'COMMAND' --cmd 'COMMAND'), or a run folder \
             to continue (gapscope run --resume RUN_DIR)"
                .into(),
        ));
    }
    let refused = a.refusals();
    if !refused.is_empty() {
        return Err(usage(
            ErrorKind::ArgumentConflict,
            refused.join("\n       "),
        ));
    }
    if a.params_dir.is_some()
        && (a.adhoc.given() || command_workload(a.experiment.as_deref(), a.resume.as_deref()))
    {
        eprintln!("{}", super::PARAMS_DIR_UNUSED);
    }
    Ok(())
}

/// The experiment file to run: `--cmd`'s (the file its flags stand for), the file given
/// with `--reps`/`--warmups` applied (said on stderr), or the file as given; none with
/// `--resume`. The guard removes a temporary file.
fn experiment_file(a: &RunArgs) -> Result<(Option<PathBuf>, Option<tempfile::TempPath>)> {
    if a.adhoc.given() {
        let (p, g) = a.adhoc.write(a.until_decided)?;
        return Ok((Some(p), g));
    }
    let (reps, warmups) = (a.adhoc.reps, a.adhoc.warmups);
    match &a.experiment {
        Some(f) if reps.is_some() || warmups.is_some() => {
            let (exp, text) = crate::experiment::Experiment::load(f)?;
            let overrides = super::run_override::overrides(&exp, reps, warmups);
            let text = super::run_override::apply(&text, f, &overrides)?;
            for o in &overrides {
                eprintln!("note: {}", o.note(f));
            }
            let (p, g) = super::run_override::write_temp("gapscope-run-", &text)?;
            Ok((Some(p), Some(g)))
        }
        _ => Ok((a.experiment.clone(), None)),
    }
}

pub fn run(a: RunArgs) -> Result<()> {
    check_usage(&a)?;
    let (file, _guard) = experiment_file(&a)?;
    let out = experiment::run(file.as_deref(), &a.options())?;
    // The reps' memory is free but held by the allocator (in the arenas of the threads
    // that read the program's lines); returned before the run folder is read back, so
    // that the end's table and headline do not stack on top of it.
    crate::counters::heap::trim();
    // The table and the headline reduce each rep to a few numbers: read a rep at a time,
    // the end of a run holds one rep's rows, not the run's.
    let data = RunData::load_spans_by_rep(&out.dir)?;
    let mut clock = ClockNotes::default();
    let table = crate::summary::phase_table_and(&data, |spans| clock.add_rep(spans))?;
    // Span names and a program's notes come from the run folder: shown, never obeyed by
    // the terminal (as `summary` and `diff` print them).
    let shown = crate::markup::terminal_text;
    if !a.quiet {
        print!("{}", shown(&table));
        print!("{}", shown(&headline(&data)));
    }
    if let Some(s) = &out.stopped {
        // With the headline when it is printed; on stderr, as notes are, under --quiet.
        if a.quiet {
            eprintln!("until decided: {s}");
        } else {
            println!("until decided: {s}");
        }
    }
    for (variant, note) in clock.0 {
        eprintln!("{}", shown(&format!("{variant}: {note}")));
    }
    for f in crate::telemetry::leak_flags(&data) {
        eprintln!("{}", shown(&format!("leak watch: {f}")));
    }
    println!("{}", out.dir.display());
    if out.failed > 0 {
        eprintln!(
            "warning: {} rep(s) failed; see error column of runs.csv",
            out.failed
        );
    }
    let none_ok: Vec<String> = (data.meta.variants.iter())
        .map(|v| v.name.clone())
        .filter(|name| {
            !out.rows
                .iter()
                .any(|r| &r.variant == name && !r.warmup && r.status == crate::store::RepStatus::Ok)
        })
        .collect();
    if !none_ok.is_empty() {
        return Err(NoOkRep {
            variants: none_ok,
            dir: out.dir.display().to_string(),
        }
        .into());
    }
    Ok(())
}

/// Per variant of a command workload, the first rep's note on spans timed on another
/// clock (the root span's `clock` attribute), gathered a rep at a time.
#[derive(Default)]
struct ClockNotes(Vec<(String, String)>);

impl ClockNotes {
    fn add_rep(&mut self, spans: &[&crate::store::SpanRow]) {
        let key = crate::experiment::command::clock::ATTR;
        for root in spans.iter().filter(|s| s.parent_id.is_none()) {
            if self.0.iter().any(|(v, _)| *v == root.variant) || !root.attrs.contains(key) {
                continue;
            }
            let attrs: serde_json::Value = serde_json::from_str(&root.attrs).unwrap_or_default();
            if let Some(n) = attrs.get(key).and_then(|n| n.as_str()) {
                (self.0).push((root.variant.to_string(), format!("rep {}: {n}", root.rep)));
            }
        }
    }
}

/// For a run of two or more variants, the title and headline of `gapscope diff RUN_DIR`
/// (the answer first), and where the rest is; nothing for a run of one variant.
fn headline(data: &RunData) -> String {
    use crate::analysis::{self, DiffOptions, Section};
    let Ok((b, c)) = analysis::pick_variants(data, None, None, None) else {
        return String::new();
    };
    match analysis::diff_runs(data, &b, data, &c, &DiffOptions::default()) {
        Ok(d) => format!(
            "\n{}(the whole comparison: gapscope diff {})\n",
            analysis::render_sections(&d, &[Section::Title, Section::Headline]),
            data.dir.display()
        ),
        Err(e) => format!("\nno comparison: {e}\n"),
    }
}
