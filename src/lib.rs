//! gapscope: a performance-regression investigation harness for a Groth16 prover.
//!
//! Pipeline: [`trace`] and [`counters`] record spans, [`telemetry`] the GPU's view →
//! [`prover`] does the work → [`experiment`] runs variants → [`store`] writes results.

pub mod cli;
pub mod counters;
pub mod envinfo;
pub mod experiment;
pub mod prover;
pub mod store;
pub mod summary;
pub mod telemetry;
pub mod trace;
