//! The prover as a binary of its own: it serves the harness's reps (`[workload] worker =
//! ["…/gapscope-groth16-worker"]`), so that a change to the prover (or to a dependency
//! it is built against) rebuilds this binary only, and the harness that schedules,
//! stores and judges the reps stays the one the user runs. Everything but making the
//! prover from the harness's `--workload` JSON is `gapscope_workload::binary`'s.

use std::process::ExitCode;

use gapscope_groth16::workload::{Groth16Settings, Groth16Workload};
use gapscope_workload::phases::WorkloadKind;

fn main() -> ExitCode {
    gapscope_workload::binary::main_for(WorkloadKind::Groth16, |json| {
        let s: Groth16Settings = serde_json::from_str(json)
            .map_err(|e| format!("--workload is not the prover's settings: {e}"))?;
        Ok(Box::new(Groth16Workload::new(s)?))
    })
}
