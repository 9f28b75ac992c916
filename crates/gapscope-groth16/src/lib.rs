//! gapscope's built-in workload, the prover under test: synthesis on the CPU, then a
//! backend behind the `gpu_prove` wrapper, with the canonical span tree every backend
//! shares:
//!
//! ```text
//! prove
//! ├─ synthesis            (synthesis[i] per circuit, on worker threads)
//! ├─ gpu_prove            the backend call
//! │  ├─ entry, prep, split_vectors_alloc, kernels (ntt_h, msm_*), b_g2_msm, assemble
//! │  └─ drop              backend-side buffers (on a background thread when async)
//! └─ drop_assignments     the Rust-side assignments (same policy)
//! ```
//!
//! A crate of its own: it records through `gapscope-trace` and names its phases through
//! `gapscope-workload`, never through the harness. The harness (`gapscope`) links it
//! through its `groth16` feature (on by default) and re-exports it as `gapscope::prover`;
//! the crate's build script compiles its CUDA (cuda/gpu_probe.cu where nvcc is found,
//! cuda/prover/ with feature `cuda`).

// The recorder and the workload's support, under the names the prover's modules use.
#[cfg(feature = "prove")]
use gapscope_trace::trace;
use gapscope_workload::phases;
#[cfg(feature = "prove")]
use gapscope_workload::{fsx, units};

// Always built: what an experiment names (knobs) and what a run folder records (spans).
pub mod knobs;
pub mod spans;

// The prover itself (feature `prove`, which the harness's `groth16` feature turns on).
#[cfg(feature = "prove")]
pub mod assemble;
#[cfg(feature = "prove")]
mod batch;
#[cfg(feature = "prove")]
pub mod circuits;
#[cfg(feature = "prove")]
pub mod commands;
#[cfg(feature = "prove")]
pub mod cpu;
#[cfg(feature = "prove")]
pub mod cs;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "prove")]
pub mod dropper;
#[cfg(feature = "prove")]
pub mod gpu_probe;
#[cfg(feature = "prove")]
pub mod paramgen;
#[cfg(feature = "prove")]
pub mod params;
#[cfg(feature = "supraseal")]
pub mod reference;
#[cfg(feature = "prove")]
pub mod rep;
#[cfg(feature = "supraseal")]
pub mod supraseal;
#[cfg(any(feature = "cuda", feature = "supraseal"))]
pub mod warmup;
#[cfg(feature = "prove")]
pub mod workload;

pub use knobs::{
    BackendKind, CircuitKind, DropPolicy, Gadget, HostMemory, NttSchedule, ProveOptions,
};

#[cfg(feature = "prove")]
pub use batch::*;
/// The field of the circuits' public inputs.
#[cfg(feature = "prove")]
pub use blstrs::Scalar;
#[cfg(feature = "prove")]
pub use circuits::CircuitInstance;
#[cfg(feature = "prove")]
pub use cs::Assignment;
#[cfg(feature = "prove")]
pub use params::Groth16Params;

#[cfg(all(test, feature = "prove"))]
mod tests;

#[cfg(all(test, feature = "prove"))]
#[path = "params_tests.rs"]
mod params_tests;
