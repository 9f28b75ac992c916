//! `gapscope __worker` (hidden): one rep of a run folder in a fresh process
//! (`process = "per_rep"`); the runner reads its result line.

use anyhow::Result;

pub use crate::experiment::worker::WorkerArgs;

pub fn run(a: WorkerArgs) -> Result<()> {
    // C++ of a patched crate reaches the recorder through weak symbols.
    crate::patches::link_recorder();
    crate::experiment::worker::worker_main(&a)
}
