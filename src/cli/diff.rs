//! `gapscope diff`: baseline against candidate, printed in one of the diff's formats.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::analysis::{self, DiffOptions, Format, Verdict};

/// `gapscope diff --format`: the diff's formats, with `text` the name every subcommand
/// gives its plain output (`terminal`, its old name, still parses: [`super::renamed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffFormat {
    #[value(alias = "terminal")]
    Text,
    Markdown,
    Json,
    Csv,
}

impl From<DiffFormat> for Format {
    fn from(f: DiffFormat) -> Format {
        match f {
            DiffFormat::Text => Format::Terminal,
            DiffFormat::Markdown => Format::Markdown,
            DiffFormat::Json => Format::Json,
            DiffFormat::Csv => Format::Csv,
        }
    }
}
use crate::store::{RunData, RunView};

/// "1", "1%" or "0.5 %" → 0.01, 0.01, 0.005.
fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(format!(
            "{s:?} is not a percentage in [0, 100), e.g. 1 or 0.5%"
        )),
    }
}

/// Most bootstrap resamples a diff takes: each metric keeps that many values, and a
/// larger count once ended the process on a failed allocation.
const MAX_RESAMPLES: u64 = 1_000_000;

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// RUN_DIR, or RUN_A RUN_B.
    #[arg(required = true, num_args = 1..=2, value_name = "RUN_DIR")]
    runs: Vec<PathBuf>,
    /// Baseline variant (in the first run).
    #[arg(long)]
    baseline: Option<String>,
    /// Candidate variant (in the last run).
    #[arg(long)]
    candidate: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub(super) format: DiffFormat,
    /// Smallest relative change a verdict reports, in percent ("1" or "1%").
    #[arg(long, value_name = "PERCENT", default_value = "1", value_parser = parse_percent)]
    noise_floor: f64,
    /// Significance level of the tests; the interval has confidence 1 - alpha.
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Bootstrap resamples per metric (1 to 1,000,000).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=MAX_RESAMPLES))]
    resamples: u64,
    /// Smallest absolute change of a time a verdict reports, ns (whatever its relative
    /// size; docs/statistics.md, "Floors").
    #[arg(long, value_name = "NS", default_value_t = 1000.0)]
    time_floor_ns: f64,
    /// The time floor is at least this share of the baseline's end-to-end time, percent.
    #[arg(long, value_name = "PERCENT", default_value = "0.1", value_parser = parse_percent)]
    time_floor_share: f64,
    /// Smallest absolute change of a count (page faults, context switches) a verdict
    /// reports.
    #[arg(long, value_name = "EVENTS", default_value_t = 10.0)]
    count_floor: f64,
    /// Judge each comparison by its own p-value, without false-discovery control over
    /// the diff's comparisons (for a metric chosen before the run).
    #[arg(long)]
    no_fdr: bool,
    /// Spread of a run's level between runs of one build, percent (the standard
    /// deviation of a span's log time from run to run beyond its reps' spread): added
    /// to the test when the sides are two run folders, whose reps share what differs
    /// between runs. 0 turns it off; variants of one run are not affected. Default:
    /// the measured value in docs/statistics.md ("Two run folders").
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    between_runs: Option<f64>,
    /// Flag wrapper spans whose unattributed time exceeds this share, in percent.
    #[arg(long, value_name = "PERCENT", default_value = "5", value_parser = parse_percent)]
    gap_threshold: f64,
    /// Bootstrap seed (the output is reproducible for a given seed).
    #[arg(long)]
    seed: Option<u64>,
    /// Compare even when workloads, hosts or GPUs differ (the differences are listed).
    #[arg(long)]
    force: bool,
    /// Compare the sides as independent samples even when they are variants of one
    /// interleaved run (by default the reps of one iteration are paired, which
    /// cancels the machine's drift between iterations).
    #[arg(long)]
    unpaired: bool,
    /// Compare the two sides by Welch's t test even where they have as many reps (by
    /// default Student's pooled test, which has more power at a few reps and assumes
    /// the change moves a span's level, not its spread).
    #[arg(long)]
    welch: bool,
    /// Exit with status 4 when any row of the phase table is regressed (for CI); the
    /// diff is printed first and the regressed phases are named on stderr.
    #[arg(long)]
    fail_on_regression: bool,
    /// Also draw the differential flame graph of this span's sampled stacks (both sides
    /// need `profile = true`) and list the functions that changed most.
    #[arg(long, value_name = "SPAN", alias = "flame")]
    flame_span: Option<String>,
    /// Where to write that flame graph (default: flame-diff-<SPAN>.svg here).
    #[arg(
        long,
        value_name = "FILE",
        requires = "flame_span",
        alias = "flame-out"
    )]
    flame_file: Option<PathBuf>,
}

impl DiffArgs {
    pub(super) fn options(&self) -> DiffOptions {
        let defaults = DiffOptions::default();
        DiffOptions {
            noise_floor: self.noise_floor,
            alpha: self.alpha,
            bootstrap_resamples: self.resamples as usize,
            gap_threshold: self.gap_threshold,
            force: self.force,
            paired: !self.unpaired,
            seed: self.seed.unwrap_or(defaults.seed),
            time_floor_ns: self.time_floor_ns,
            time_floor_fraction: self.time_floor_share,
            count_floor: self.count_floor,
            fdr: !self.no_fdr,
            between_runs: self.between_runs.unwrap_or(defaults.between_runs),
            welch: self.welch,
            ..defaults
        }
    }
}

pub fn run(a: DiffArgs) -> Result<()> {
    let load = |dir: &PathBuf| {
        // The reader's error names the folder where it can; say it once.
        let d = RunData::load(dir).map_err(|e| {
            let path = dir.display().to_string();
            if e.to_string().contains(&path) {
                anyhow::Error::new(e).context("cannot read a run folder")
            } else {
                anyhow::Error::new(e).context(format!("cannot read run folder {path}"))
            }
        })?;
        super::note_incomplete(&d);
        anyhow::Ok(d)
    };
    let base = load(&a.runs[0])?;
    let other = a.runs.get(1).map(load).transpose()?;
    let cand = other.as_ref().unwrap_or(&base);
    let (bv, cv) = analysis::pick_variants(
        &base,
        other.as_ref(),
        a.baseline.as_deref(),
        a.candidate.as_deref(),
    )?;
    let diff = analysis::diff_runs(&base, &bv, cand, &cv, &a.options())?;
    let format = Format::from(a.format);
    let text = analysis::render(&diff, format);
    // Span names and knobs come from run folders: shown, never obeyed by the terminal.
    match format {
        Format::Terminal | Format::Markdown => print!("{}", crate::markup::terminal_text(&text)),
        _ => print!("{text}"),
    }
    if let Some(span) = &a.flame_span {
        let out = a.flame_file.clone().unwrap_or_else(|| {
            PathBuf::from(format!("flame-diff-{}.svg", span.replace(['/', ' '], "_")))
        });
        let f = crate::report::flame::diff_flame(&base, &bv, cand, &cv, span, &out)
            .with_context(|| format!("differential flame graph of {span:?}"))?;
        println!();
        for l in analysis::span_lines(&diff, span) {
            println!("{}", crate::markup::terminal_safe(&l));
        }
        print!("{}", f.render());
    }
    let phases: Vec<String> = diff
        .phase_table
        .iter()
        .filter(|r| r.comparison.verdict == Verdict::Regressed)
        .map(|r| r.phase.clone())
        .collect();
    if matches!(format, Format::Terminal | Format::Markdown) {
        // What the host did while no kernel ran: read from the folders' CUPTI records,
        // which the diff's statistics do not use.
        let vb = RunView::new(base);
        let vc = other.map(RunView::new);
        let sides = [
            (&vb, bv.as_str()),
            (vc.as_ref().unwrap_or(&vb), cv.as_str()),
        ];
        if let Some(lines) = crate::store::gaps::fill::fill_lines(sides) {
            println!();
            for l in lines {
                println!("{}", crate::markup::terminal_safe(&l));
            }
        }
    }
    if a.fail_on_regression && !phases.is_empty() {
        return Err(super::Regressed { phases }.into());
    }
    Ok(())
}
