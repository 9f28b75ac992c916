//! Traces already on disk as a run folder: `gapscope import` reads Chrome trace event
//! JSON (PyTorch's profiler, tracing-chrome, Perfetto), OTLP JSON and Nsight Systems'
//! SQLite export, each file as one rep (or one rep per occurrence of a span), and writes
//! the run folder `summary`, `diff`, `report` and `export` read.
//!
//! Where it sits: beside `experiment/` (which makes run folders by running things),
//! above `store/` (the one writer of run folders). Per file: [`source`] finds and opens
//! it (links, size caps, gzip, its hash, its format), [`json`] / [`nsys`] read it into
//! the format-free [`model::Trace`], [`NameMap`] (`crate::capture::names`) groups names, [`reps`] cuts it into reps,
//! [`tree`] nests each rep's spans, and [`write`] turns them into rows.

pub mod chrome;
pub mod chrome_args;
pub mod chrome_scan;
pub mod json;
pub mod json_cut;
pub mod model;
pub mod nsys;
pub mod otlp;
pub mod reps;
pub mod rows;
pub mod source;
pub mod tree;
pub mod write;

use std::path::{Path, PathBuf};

pub use crate::capture::names::NameMap;
pub use write::{import, ImportOptions, Imported, VariantInput};

/// The version of the importer's reading rules, recorded in meta.json's `import`: a
/// change in how a format's events become spans gives a new version.
pub const IMPORTER_VERSION: u32 = 1;

/// Why a trace could not be imported; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{pattern:?}: {why}")]
    Pattern { pattern: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Read(crate::fsx::ReadError),
    #[error(
        "{path} is a symbolic link to {target}, outside the link's folder: a trace is read \
         only inside the folder it was named in; copy the file there instead"
    )]
    LinkOut { path: PathBuf, target: PathBuf },
    #[error(
        "{path} holds more than {cap} bytes{}, the most gapscope reads from one trace \
         (--max-file-bytes); split the trace, or raise the cap if the machine has the memory",
        if *decompressed { " once decompressed" } else { "" }
    )]
    TooLarge {
        path: PathBuf,
        cap: u64,
        decompressed: bool,
    },
    #[error("{path} is not a trace gapscope imports: {why}")]
    NotATrace { path: PathBuf, why: String },
    #[error(
        "{path}, line {line}, in trace event {event}: {message}; nothing of this file was \
         imported"
    )]
    Json {
        path: PathBuf,
        line: usize,
        event: u64,
        message: String,
    },
    #[error("{path}: {why}")]
    Nsys { path: PathBuf, why: String },
}

impl ImportError {
    pub fn io(path: &Path, source: std::io::Error) -> ImportError {
        ImportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// An I/O error of a trace's stream: the size cap's own error says so.
    pub fn from_io(path: &Path, e: std::io::Error) -> ImportError {
        if e.to_string().contains(source::OVER_CAP) {
            return ImportError::TooLarge {
                path: path.to_path_buf(),
                cap: 0,
                decompressed: true,
            };
        }
        ImportError::io(path, e)
    }
}

/// Reads one trace file, whatever its format.
pub fn read_trace(path: &Path, cap: u64) -> Result<(model::Trace, FileDigest), ImportError> {
    let (mut stream, hasher) = source::stream(path, cap)?;
    let fixed_cap = |e: ImportError| match e {
        ImportError::TooLarge { path, .. } => ImportError::TooLarge {
            path,
            cap,
            decompressed: true,
        },
        e => e,
    };
    let kind = source::sniff(&mut stream, path).map_err(fixed_cap)?;
    let trace = match kind {
        source::Sniffed::Json => json::read(&mut stream, path).map_err(fixed_cap)?,
        source::Sniffed::Sqlite => nsys::read_stream(&mut stream, path, cap).map_err(fixed_cap)?,
    };
    let (sha256, bytes) = hasher
        .finish(&mut stream)
        .map_err(|e| fixed_cap(ImportError::from_io(path, e)))?;
    Ok((trace, FileDigest { sha256, bytes }))
}

/// A file's SHA-256 and size on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDigest {
    pub sha256: String,
    pub bytes: u64,
}

#[cfg(test)]
mod tests;
