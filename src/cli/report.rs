//! `gapscope report`: the review report of a run folder.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::report;
use crate::store::RunView;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    run_dir: PathBuf,
    /// Report folder (default: reports/<experiment>-<run id>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Span whose sampled stacks to draw as flame graphs (default: the span below the
    /// root, `prove` for the prover, with the most self time of those with 1% of the samples or more). Needs
    /// a run with `profile = true`.
    #[arg(long, value_name = "SPAN")]
    flame_span: Option<String>,
}

pub fn run(a: ReportArgs) -> Result<()> {
    let input = RunView::load(&a.run_dir)?;
    super::note_incomplete(&input.data);
    let out = match a.out {
        Some(out) => out,
        None => report::default_out_dir(&input)?,
    };
    let done = report::write_report_with(
        &input,
        &out,
        &super::command_line(),
        a.flame_span.as_deref(),
    )
    .with_context(|| format!("writing the report into {}", out.display()))?;
    for f in &done.chart_failures {
        eprintln!("warning: {}", crate::markup::terminal_safe(f));
    }
    println!("{}", done.report.display());
    Ok(())
}
