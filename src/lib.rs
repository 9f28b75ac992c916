//! gapscope: a performance-regression investigation harness for a Groth16 prover.
//!
//! Pipeline (ARCHITECTURE.md has a paragraph per module): [`cli`] parses the command
//! line → [`experiment`] runs the variants of an experiment rep by rep → [`prover`] does
//! the work inside the canonical span tree ([`prover::spans`], recorded in the run
//! folder as its [`phases`]) → [`trace`] and [`counters`] record spans, [`telemetry`]
//! the GPU's view → [`store`] writes the run folder and reads it back ([`store::RunView`]) → [`analysis`] compares a baseline with
//! a candidate → [`plot`], [`report`] and [`export`] show where the time went;
//! [`summary`] is the end-of-run table. [`stats`] and [`units`] serve every layer, as
//! [`fsx`] (files written whole and read within their folder) and [`markup`] (folder
//! text in Markdown) do.
//! Dependencies point one way, from the command line toward the recorder
//! (ARCHITECTURE.md draws them).

pub mod analysis;
pub mod bisect;
pub mod capture;
pub mod cli;
pub use gapscope_emit as emit;
pub use gapscope_trace::counters;
pub mod experiment;
pub mod export;
pub use gapscope_workload::fsx;
pub mod history;
pub mod import;
pub mod markup;
pub mod patches;
pub use gapscope_workload::phases;
pub mod plot;
pub mod procs;
pub mod profile;
pub mod protocol;
pub use gapscope_groth16 as prover;
pub mod report;
pub mod revisions;
pub mod stats;
pub mod store;
pub mod summary;
pub mod sweep;
pub mod telemetry;
pub use gapscope_trace::trace;
pub use gapscope_workload::units;
