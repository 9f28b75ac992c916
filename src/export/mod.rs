//! Exports a run folder to formats other tools open: after `store`, beside `plot` and
//! `report`. One [`Exporter`] per format; today the Chrome trace-event JSON that
//! Perfetto and chrome://tracing read.

pub mod chrome;

use std::io::Write;
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
    #[error(transparent)]
    Write(Box<crate::fsx::WriteError>),
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
    /// Writes the export to `w` as it is serialised (nothing is written when the run
    /// has nothing to export: that error comes first).
    fn write_to(
        &self,
        input: &RunView,
        selection: RepSelection,
        w: &mut dyn Write,
    ) -> Result<(), ExportError>;
    /// The export in memory.
    fn serialize(&self, input: &RunView, selection: RepSelection) -> Result<Vec<u8>, ExportError> {
        let mut out = Vec::new();
        self.write_to(input, selection, &mut out)?;
        Ok(out)
    }
}

/// Where an export goes without `--out-file`: `exports/<experiment>-<run id>/`, beside the
/// reports (the run folder itself is written only by `gapscope run`). The name comes
/// from meta.json only once it passes the rule of names ([`crate::store::output_name`]).
pub fn default_out_dir(input: &RunView) -> Result<PathBuf, ExportError> {
    let name = crate::store::output_name(&input.data.dir, &input.data.meta)?;
    Ok(PathBuf::from("exports").join(name))
}

/// Where an export went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    File(PathBuf),
    Stdout,
}

/// Serialises with `exporter` and writes to `out`: `-` is stdout, another path a file
/// written whole ([`crate::fsx::write_file_with`]: never over a link or a file that is
/// not regular, no temp file left on failure); without `out`, the default name under
/// [`default_out_dir`].
pub fn export_to_file(
    exporter: &dyn Exporter,
    input: &RunView,
    selection: RepSelection,
    out: Option<&Path>,
) -> Result<Written, ExportError> {
    if out.is_some_and(crate::fsx::write::is_stdout) {
        let stdout = std::io::stdout();
        let mut w = std::io::BufWriter::new(stdout.lock());
        exporter.write_to(input, selection, &mut w)?;
        w.flush().map_err(|source| ExportError::Io {
            path: "-".into(),
            source,
        })?;
        return Ok(Written::Stdout);
    }
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => default_out_dir(input)?.join(exporter.default_file_name(selection)),
    };
    // Only `gapscope run` writes into a run folder: an export never replaces a result.
    crate::store::check_output_path(&path)?;
    // Refused before anything is made: a run without spans, a rep that is not there.
    let reps = selection.reps(input)?;
    if reps.iter().all(|&r| input.spans_of(r).is_empty()) {
        return Err(ExportError::NoSpans {
            dir: input.data.dir.clone(),
        });
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| ExportError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let mut failed = None;
    let written = crate::fsx::write::write_file_with(&path, |w| {
        exporter.write_to(input, selection, w).map_err(|e| {
            let text = e.to_string();
            failed = Some(e);
            std::io::Error::other(text)
        })
    });
    if let Some(e) = failed {
        return Err(e);
    }
    written.map_err(|e| ExportError::Write(Box::new(e)))?;
    Ok(Written::File(path))
}
