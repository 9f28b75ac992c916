//! The prover's own commands, registered under the harness's command line in a build
//! with the prover (`gapscope __params`, `cuda-check`, `upstream-reference`): each an
//! argument struct (clap) and its handler.

pub mod cuda_check;
pub mod params;
pub mod upstream;

use std::path::PathBuf;

use anyhow::Result;

/// An enum value given by its snake_case name; serde's error names the valid ones (as
/// experiment files get them).
fn parse_name<T: serde::de::DeserializeOwned>(flag: &str, s: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|e| anyhow::anyhow!("--{flag} {s:?}: {e}"))
}

/// The params cache: `$GAPSCOPE_PARAMS_DIR`, else ./params (as the harness's own).
fn default_params_dir() -> PathBuf {
    std::env::var_os("GAPSCOPE_PARAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("params"))
}
