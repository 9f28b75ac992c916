//! Spans of programs and libraries nobody rewrote for gapscope, taken from the
//! instrumentation they already have: `tracing` spans ([`tracing_sink`], the recorder's
//! end of the `gapscope-tracing` layer), timing lines of a program's log
//! ([`log_spans`]) and NVTX ranges of a CUDA program through an injection library
//! ([`inject`]); and the GPU work of a CUDA program, through CUPTI's injection library
//! ([`cupti_lib`]).
//!
//! The experiment's command workload holds a [`CaptureSpec`] (its `[workload]` keys
//! `log_spans`, `nvtx` and `cupti`) and, per rep, makes a [`ChildCapture`] of it: the patterns
//! its line readers apply and the environment the program starts with. This module
//! depends on `trace` and `protocol` only.

pub mod cupti_lib;
pub mod inject;
pub mod log_spans;
pub mod tracing_sink;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use log_spans::{LogPatterns, LogSpanRule};

/// What a command workload asks to be captured besides its span lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureSpec {
    /// `[workload.log_spans]`: span name → patterns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub log_spans: BTreeMap<String, LogSpanRule>,
    /// `nvtx = true`: the program's NVTX ranges become spans.
    #[serde(default)]
    pub nvtx: bool,
    /// `cupti = true`: the program's kernels, copies and memsets become the rep's GPU
    /// activity (CUPTI, through `CUDA_INJECTION64_PATH`).
    #[serde(default)]
    pub cupti: bool,
}

impl CaptureSpec {
    /// Checks the patterns (the error says which entry and what to write).
    pub fn check(&self) -> Result<(), String> {
        LogPatterns::new(&self.log_spans)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// What one run of the program gets: patterns for its lines, and its extra environment.
#[derive(Default, Clone)]
pub struct ChildCapture {
    pub log: Option<Arc<LogPatterns>>,
    pub env: Vec<(OsString, OsString)>,
    /// The CUPTI injection library the program was started with (`cupti = true`).
    pub cupti: Option<std::path::PathBuf>,
}

impl ChildCapture {
    /// Everything a rep of `spec` needs; an error (a pattern, the NVTX library) says
    /// what to do, and fails only that rep.
    pub fn prepare(spec: &CaptureSpec) -> Result<Self, String> {
        let mut c = ChildCapture::default();
        if !spec.log_spans.is_empty() {
            let p = LogPatterns::new(&spec.log_spans).map_err(|e| e.to_string())?;
            c.log = Some(Arc::new(p));
        }
        if spec.nvtx {
            let lib = inject::nvtx_library().map_err(|e| e.to_string())?;
            c.env.push((inject::NVTX_ENV.into(), lib.into_os_string()));
        }
        if spec.cupti {
            let lib = cupti_lib::cupti_library().map_err(|e| e.to_string())?;
            c.env
                .push((cupti_lib::CUDA_ENV.into(), lib.clone().into_os_string()));
            c.cupti = Some(lib);
        }
        Ok(c)
    }
}
