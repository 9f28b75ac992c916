//! `gapscope summary`: the end-of-run phase table of a run folder, again.

use std::path::PathBuf;

use anyhow::Result;

use crate::store::RunData;

#[derive(clap::Args, Debug)]
pub struct SummaryArgs {
    run_dir: PathBuf,
}

pub fn run(a: SummaryArgs) -> Result<()> {
    let data = RunData::load(&a.run_dir)?;
    super::note_incomplete(&data);
    // Span names come from the run folder: shown, never obeyed by the terminal.
    print!(
        "{}",
        crate::markup::terminal_text(&crate::summary::phase_table(&data))
    );
    Ok(())
}
