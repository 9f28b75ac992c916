//! Exports a run folder to formats other tools open: after `store`, beside `plot` and
//! `report`. One [`Exporter`] per format; today the Chrome trace-event JSON that
//! Perfetto and chrome://tracing read.

pub mod chrome;

use std::path::{Path, PathBuf};

use crate::store::RunView;

/// Formats a run folder is exported in (`gapscope export --format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// Chrome trace-event JSON (opens in Perfetto and chrome://tracing).
    Chrome,
}

impl ExportFormat {
    /// The exporter that writes this format.
    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            ExportFormat::Chrome => &chrome::ChromeTrace,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{dir}: no rep {rep} in runs.csv (reps present: {available})")]
    NoSuchRep {
        dir: PathBuf,
        rep: u32,
        available: String,
    },
    #[error("{dir}: no spans to export (did the run finish a rep?)")]
    NoSpans { dir: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// Which reps to export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepSelection {
    /// Every rep in runs.csv, warm-ups and failed ones included (labelled as such).
    All,
    One(u32),
}

impl RepSelection {
    pub fn reps(&self, input: &RunView) -> Result<Vec<u32>, ExportError> {
        let mut all: Vec<u32> = input.data.runs.iter().map(|r| r.rep).collect();
        all.sort_unstable();
        all.dedup();
        match *self {
            RepSelection::All => Ok(all),
            RepSelection::One(rep) if all.contains(&rep) => Ok(vec![rep]),
            RepSelection::One(rep) => Err(ExportError::NoSuchRep {
                dir: input.data.dir.clone(),
                rep,
                available: all
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }
}

/// One output format.
pub trait Exporter {
    /// File name used when the caller names none.
    fn default_file_name(&self, selection: RepSelection) -> String;
    fn serialize(&self, input: &RunView, selection: RepSelection) -> Result<Vec<u8>, ExportError>;
}

/// Where an export goes without `--out`: `exports/<experiment>-<run id>/`, beside the
/// reports (the run folder itself is written only by `gapscope run`).
pub fn default_out_dir(input: &RunView) -> PathBuf {
    let m = &input.data.meta;
    PathBuf::from("exports").join(format!("{}-{}", m.experiment, m.run_id))
}

/// Serialises with `exporter` and writes atomically to `out` (or the default name in the
/// run folder). Returns the path written.
pub fn export_to_file(
    exporter: &dyn Exporter,
    input: &RunView,
    selection: RepSelection,
    out: Option<&Path>,
) -> Result<PathBuf, ExportError> {
    let path = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| default_out_dir(input).join(exporter.default_file_name(selection)));
    // Only `gapscope run` writes into a run folder: an export never replaces a result.
    crate::store::check_output_path(&path)?;
    let bytes = exporter.serialize(input, selection)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| ExportError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    crate::store::write_atomic(&path, &bytes).map_err(|source| ExportError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}
