//! gapscope: a performance-regression investigation harness for a Groth16 prover.
//!
//! Pipeline: [`trace`] and [`counters`] record spans, [`telemetry`] the GPU's view →
//! [`prover`] does the work → [`experiment`] runs variants → [`store`] writes results →
//! [`plot`] and [`report`] show where the time went; [`export`] hands traces to other
//! tools; [`analysis`] compares a baseline with a candidate.

pub mod analysis;
pub mod cli;
pub mod counters;
pub mod experiment;
pub mod export;
pub mod plot;
pub mod prover;
pub mod report;
pub mod stats;
pub mod store;
pub mod summary;
pub mod telemetry;
pub mod trace;
pub mod units;
