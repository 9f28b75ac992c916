//! Experiments: the spec ([`spec`]) and the runner ([`runner`]) that proves every
//! variant rep by rep and hands each rep to the store.
//!
//! The runner walks the [`schedule`], sets up params and backends ([`setup`]) and runs
//! each [`rep`] in its own process or, for `process = "per_rep"`, in a [`worker`] child
//! that does the same setup and rep. runner and worker both depend on rep, schedule and
//! setup; those three depend on neither.

pub mod command;
pub mod debug;
pub mod emulation;
mod executor;
pub mod interrupt;
pub mod rep;
pub mod resume;
pub mod revs;
mod run_meta;
mod run_policy;
pub mod runner;
pub mod schedule;
mod served;
pub mod setup;
pub mod spec;
mod spec_checks;
pub mod until_decided;
pub mod watchdog;
pub mod worker;
mod workload_bin;
pub mod workload_file;

pub use debug::{DebugHooks, WorkerDebug};
pub use interrupt::{Interrupted, EXIT_INTERRUPTED};
pub use runner::{run, RunOptions, RunOutcome, StopWhen};
pub use spec::{Experiment, ResolvedVariant};
pub use until_decided::UntilDecided;
