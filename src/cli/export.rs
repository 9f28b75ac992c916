//! `gapscope export`: a run folder's spans, GPU intervals and NVML samples in another
//! tool's format.

use std::path::PathBuf;

use anyhow::Result;

use crate::export::{self, ExportFormat, RepSelection};
use crate::store::RunView;

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    run_dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ExportFormat::Chrome)]
    format: ExportFormat,
    /// Same as `--format chrome`.
    #[arg(long, hide = true, conflicts_with = "format")]
    chrome: bool,
    /// Only this rep (the `rep` column of runs.csv); default: every rep.
    #[arg(long, value_name = "N")]
    rep: Option<u32>,
    /// Output file, or `-` for stdout (default: exports/<experiment>-<run id>/trace.json,
    /// or trace-rep<N>.json). A path inside a run folder, a link or a file that is not
    /// regular is refused. (`--out` names a folder in every subcommand.)
    #[arg(long, value_name = "FILE", alias = "out")]
    out_file: Option<PathBuf>,
}

pub fn run(a: ExportArgs) -> Result<()> {
    let format = if a.chrome {
        ExportFormat::Chrome
    } else {
        a.format
    };
    let input = RunView::load(&a.run_dir)?;
    // The GPU tables are optional to the export, not silently: one it could not read,
    // or rows it left out, are named.
    for p in &input.gpu.problems {
        eprintln!(
            "warning: {} (the export has no GPU rows from it)",
            crate::markup::terminal_text(p)
        );
    }
    let selection = a.rep.map_or(RepSelection::All, RepSelection::One);
    match export::export_to_file(format.exporter(), &input, selection, a.out_file.as_deref())? {
        export::Written::File(path) => println!("{}", path.display()),
        export::Written::Stdout => {}
    }
    Ok(())
}
