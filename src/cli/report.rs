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
}

pub fn run(a: ReportArgs) -> Result<()> {
    let input = RunView::load(&a.run_dir)?;
    super::note_incomplete(&input.data);
    let out = a.out.unwrap_or_else(|| report::default_out_dir(&input));
    let done = report::write_report(&input, &out, &super::command_line())
        .with_context(|| format!("writing the report into {}", out.display()))?;
    for f in &done.chart_failures {
        eprintln!("warning: {f}");
    }
    println!("{}", done.report.display());
    Ok(())
}
