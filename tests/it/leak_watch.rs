//! The leak watch against the debug leak hook: a run whose every rep leaks 4 MiB on
//! purpose (`--debug-leak-bytes-per-rep`) is flagged by its 10th measured rep, and the
//! same run without the hook is not. The plateau case (memory that rises, then stays) is
//! pinned in `src/telemetry/leak.rs` on the recorded shape of a native-prover run.

use std::path::Path;

use gapscope::store::RunData;
use gapscope::telemetry::leak_flags;

use crate::common;
use common::run_ok;

const EXPERIMENT: &str = r#"
name = "leak_watch"
[workload]
circuit = "chain"
log2_constraints = 4
batch = 1
backend = "cpu"
[run]
reps = 10
warmups = 1
process = "shared"
[[variant]]
name = "baseline"
[[variant]]
name = "candidate"
"#;

fn run(tmp: &Path, extra: &[&str]) -> RunData {
    let exp = tmp.join("leak.toml");
    std::fs::write(&exp, EXPERIMENT).unwrap();
    let args: Vec<&str> = ["--quiet"].iter().chain(extra).copied().collect();
    RunData::load(&run_ok(tmp, &exp, &args)).unwrap()
}

#[test]
fn a_leak_of_4_mib_per_rep_is_flagged_within_10_reps_and_a_clean_run_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let leaky = run(
        tmp.path(),
        &["--debug-leak-bytes-per-rep", &(4u64 << 20).to_string()],
    );
    let flags = leak_flags(&leaky);
    assert_eq!(flags.len(), 2, "both variants leak: {flags:?}");
    for f in &flags {
        assert!(f.reps <= 10, "{f:?}");
        // Both variants share the process: each of its reps sees 8 MiB more.
        assert!(f.rate_bytes_per_rep >= (4u64 << 20) as f64, "{f:?}");
    }
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = run(clean_dir.path(), &[]);
    assert!(leak_flags(&clean).is_empty(), "{:?}", leak_flags(&clean));
}
