//! gapscope's span recorder: the bottom of its pipeline (ARCHITECTURE.md).
//!
//! - [`trace`]: nested spans per thread on the span clock (CLOCK_MONOTONIC read from an
//!   invariant TSC), drained per trace; a C ABI (`cuda/gapscope_trace.h`) for C++/CUDA
//!   host code; what a span costs, measured at start-up.
//! - [`counters`]: per-span CPU counters (perf-event groups where a PMU exists, software
//!   counters always), exact counts under callgrind, heap statistics.
//!
//! The crate depends on nothing of the harness: a workload links it to record spans, and
//! the harness (`gapscope`) re-exports both modules as `gapscope::trace` and
//! `gapscope::counters`.

pub mod counters;
mod hot;
pub mod trace;
