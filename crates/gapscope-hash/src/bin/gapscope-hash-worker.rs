//! The hash workload as a binary of its own: it serves the harness's reps
//! (`[workload] kind = "hash"`, `worker = ["…/gapscope-hash-worker"]`), so that the
//! harness measuring it need not be built with it. Everything but making the workload
//! from the harness's `--workload` JSON is `gapscope_workload::binary`'s.

use std::process::ExitCode;

use gapscope_hash::HashWorkload;
use gapscope_workload::phases::WorkloadKind;

fn main() -> ExitCode {
    gapscope_workload::binary::main_for(WorkloadKind::Hash, |json| {
        let w: HashWorkload = serde_json::from_str(json)
            .map_err(|e| format!("--workload is not the hash workload's settings: {e}"))?;
        if w.bytes == 0 {
            return Err("--workload: bytes must be at least 1".into());
        }
        Ok(Box::new(w))
    })
}
