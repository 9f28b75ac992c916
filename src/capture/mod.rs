//! Spans of programs and libraries nobody rewrote for gapscope, taken from the
//! instrumentation they already have: `tracing` spans ([`tracing_sink`], the recorder's
//! end of the `gapscope-tracing` layer), timing lines of a program's log
//! ([`log_spans`]) and NVTX ranges of a CUDA program through an injection library
//! ([`inject`]); and the GPU work of a CUDA program, through CUPTI's injection library
//! ([`cupti_lib`]).
//!
//! Span names that carry a per-call id are grouped ([`names`]), whatever path
//! they came through.
//!
//! The experiment's command workload holds a [`CaptureSpec`] (its `[workload]` keys
//! `log_spans`, `nvtx`, `cupti`, `name_map` and `tracing_names`) and, per rep, makes a [`ChildCapture`] of it: the patterns
//! its line readers apply and the environment the program starts with. This module
//! depends on `trace` and `protocol` only.

pub mod costs;
pub mod cupti_lib;
pub mod inject;
pub mod log_spans;
pub mod names;
pub mod tracing_sink;

/// Most bytes a user's regular expression may compile to (the `regex` crate's own
/// default is 10 MiB). The crate matches in time linear in the line's length whatever
/// the pattern, so the compiled size is what a hostile or careless pattern can blow up:
/// `(a{1000}){1000}` is refused with what to do.
pub const USER_REGEX_BYTES: usize = 1 << 20;

/// A regular expression from a user's configuration or command line (log-line spans,
/// name maps), compiled within [`USER_REGEX_BYTES`]; the error says what to do.
pub fn user_regex(re: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(re)
        .size_limit(USER_REGEX_BYTES)
        .dfa_size_limit(2 * USER_REGEX_BYTES)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => format!(
                "it compiles to more than {limit} bytes (counted repetitions multiply: \
                 `(a{{1000}}){{1000}}` is a million states); write it with fewer or smaller \
                 repetitions, or `+`/`*` where any count will do"
            ),
            e => e.to_string().replace('\n', " "),
        })
}

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use log_spans::{LogPatterns, LogSpanRule};
pub use names::NameMap;

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
    /// `name_map = { "regex" = "name" }`: span names grouped, whatever path the spans
    /// came through, before the defaults ([`names::DEFAULTS`]); named groups of the
    /// regex become attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub name_map: BTreeMap<String, String>,
    /// `tracing_names = "plain" | "module" | "target"`: how the `tracing` layer in the
    /// program qualifies span names (`GAPSCOPE_TRACING_NAMES`); unset: the layer's
    /// default, `module`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing_names: Option<TracingNames>,
}

/// How the `tracing` layer qualifies span names (`gapscope_tracing::Names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TracingNames {
    /// `apply`.
    Plain,
    /// `get::apply` (the last part of the span's module path).
    Module,
    /// `mini_redis::cmd::get::apply`.
    Target,
}

impl TracingNames {
    fn env_value(self) -> &'static str {
        match self {
            TracingNames::Plain => "plain",
            TracingNames::Module => "module",
            TracingNames::Target => "target",
        }
    }
}

impl CaptureSpec {
    /// Checks the patterns (the error says which entry and what to write).
    pub fn check(&self) -> Result<(), String> {
        LogPatterns::new(&self.log_spans)
            .map(drop)
            .map_err(|e| e.to_string())?;
        self.names().map(drop)
    }

    /// The workload's name map, then the defaults.
    pub fn names(&self) -> Result<NameMap, String> {
        let pairs: Vec<(String, String)> = self
            .name_map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        NameMap::from_pairs(&pairs, true).map_err(|e| {
            format!(
                "workload.name_map {e}: give a regex and the name it maps to, e.g. \
                 name_map = {{ '^step_(?P<step>\\d+)$' = \"step\" }}"
            )
        })
    }
}

/// What one run of the program gets: patterns for its lines, and its extra environment.
#[derive(Default, Clone)]
pub struct ChildCapture {
    pub log: Option<Arc<LogPatterns>>,
    pub env: Vec<(OsString, OsString)>,
    /// The CUPTI injection library the program was started with (`cupti = true`).
    pub cupti: Option<std::path::PathBuf>,
    /// Names grouped (the workload's `name_map`, then the defaults).
    pub names: Arc<NameMap>,
    /// The program's NVTX ranges are captured (`nvtx = true`).
    pub nvtx: bool,
}

impl ChildCapture {
    /// Everything a rep of `spec` needs; an error (a pattern, the NVTX library) says
    /// what to do, and fails only that rep.
    pub fn prepare(spec: &CaptureSpec) -> Result<Self, String> {
        let mut c = ChildCapture {
            names: Arc::new(spec.names()?),
            ..ChildCapture::default()
        };
        if let Some(n) = spec.tracing_names {
            c.env
                .push((gapscope_tracing::NAMES_ENV.into(), n.env_value().into()));
        }
        if !spec.log_spans.is_empty() {
            let p = LogPatterns::new(&spec.log_spans).map_err(|e| e.to_string())?;
            c.log = Some(Arc::new(p));
        }
        if spec.nvtx {
            c.nvtx = true;
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

#[cfg(test)]
mod user_regex_tests {
    use super::*;

    #[test]
    fn a_pattern_that_compiles_too_big_is_refused_with_what_to_do() {
        let e = user_regex("(a{1000}){1000}").unwrap_err();
        assert!(
            e.starts_with(&format!(
                "it compiles to more than {USER_REGEX_BYTES} bytes"
            )),
            "{e}"
        );
        // An ordinary pattern compiles.
        assert!(user_regex(r"GPU prove time: (?P<s>[0-9.]+)s").is_ok());
        let e =
            names::NameMap::from_pairs(&[("(x{500}){500}".into(), "x".into())], false).unwrap_err();
        assert!(e.contains("compiles to more than"), "{e}");
        // A syntax error keeps the crate's words, on one line.
        let e = user_regex("(unclosed").unwrap_err();
        assert!(!e.contains('\n') && e.contains("unclosed"), "{e}");
    }
}
