//! What gapscope asks of a workload, in a crate of its own so that a workload (the
//! built-in Groth16 prover in `gapscope-groth16`, or any other) depends on it and not on
//! the harness:
//!
//! - [`phases`]: what a workload calls the parts of its span tree ([`phases::PhaseSpec`])
//!   and what kind of workload a run measured ([`phases::WorkloadKind`]), both written
//!   into every run folder's meta.json;
//! - [`fsx`]: files as a hostile world hands them over (whole-file writes that never
//!   follow a link, capped reads that never leave their folder), for a workload's caches
//!   and the harness's run folders alike;
//! - [`units`]: times for people (s / ms / µs / ns picked in one place);
//! - [`workload`]: the [`Workload`] and [`Rep`] traits, the seam between the harness's
//!   rep lifecycle and an in-process workload (the built-in prover, `gapscope-hash`);
//! - [`worker`]: the worker protocol (its handshake, request and result lines, and the
//!   serving loop), so that any workload binary can run reps for the harness;
//! - [`binary`]: the whole `main` of such a binary for a [`Workload`]: it answers the
//!   harness's handshake and serves its reps, each run under the same lifecycle as in
//!   the harness's own process (prepare, run, settle, spans, check).
//!
//! The harness (`gapscope`) re-exports the three as `gapscope::phases`, `gapscope::fsx`
//! and `gapscope::units`.

pub mod binary;
pub mod fsx;
pub mod phases;
pub mod units;
pub mod worker;
pub mod workload;

pub use workload::{Checked, Knobs, Rep, Workload};
