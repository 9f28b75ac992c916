//! Experiments: the spec ([`spec`]) and the runner ([`runner`]) that proves every
//! variant rep by rep and hands each rep to the store.

pub mod runner;
pub mod spec;
pub mod watchdog;
pub mod worker;

pub use runner::{run, RunOptions, RunOutcome};
pub use spec::{Experiment, ResolvedVariant};
