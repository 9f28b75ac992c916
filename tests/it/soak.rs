//! Soak: a long run of the CPU backend must not grow its memory, as the leak watch sees
//! it (host RSS after every rep). `evidence/soak/soak_cpu_2e14.toml` is the full soak (200
//! measured reps at porep 2^14, for a release build); this test runs the same experiment
//! at porep 2^10 so that a debug build in CI finishes it in a few minutes, next to a
//! control run that leaks on purpose, which the same check must flag.

use std::path::Path;

use gapscope::experiment::Experiment;
use gapscope::store::{RepStatus, RunData};
use gapscope::telemetry::leak_flags;

use crate::common;
use common::run_ok;

fn soak_text() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/evidence/soak/soak_cpu_2e14.toml"
    ))
    .unwrap()
}

fn run(tmp: &Path, text: &str, extra: &[&str]) -> RunData {
    let exp = tmp.join("soak.toml");
    std::fs::write(&exp, text).unwrap();
    let args: Vec<&str> = ["--quiet"].iter().chain(extra).copied().collect();
    RunData::load(&run_ok(tmp, &exp, &args)).unwrap()
}

#[test]
fn the_soak_experiments_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/soak");
    for f in ["soak_cpu_2e14.toml", "soak_cuda_2e16.toml"] {
        let (e, _) = Experiment::load(&root.join(f)).unwrap();
        let measured = e.run.reps as usize * e.variants.len();
        assert_eq!(measured, if f.contains("cuda") { 500 } else { 200 }, "{f}");
    }
}

#[test]
fn two_hundred_reps_of_the_cpu_backend_do_not_grow_host_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let text = soak_text().replace("log2_constraints = 14", "log2_constraints = 10");
    assert_ne!(text, soak_text());
    let d = run(tmp.path(), &text, &[]);
    let measured: Vec<_> = d.runs.iter().filter(|r| !r.warmup).collect();
    assert_eq!(measured.len(), 200);
    assert!(measured
        .iter()
        .all(|r| r.status == RepStatus::Ok && r.checked));
    assert!(measured.iter().all(|r| r.rss_end_bytes.is_some()));
    let flags = leak_flags(&d);
    assert!(flags.is_empty(), "leak watch: {flags:?}");
    // What the leak watch saw, for the log: first and last RSS per variant.
    for v in &d.meta.variants {
        let rss: Vec<u64> = measured
            .iter()
            .filter(|r| r.variant == v.name)
            .filter_map(|r| r.rss_end_bytes)
            .collect();
        eprintln!(
            "{}: rss {} -> {} MiB over {} reps (max {} MiB)",
            v.name,
            rss[0] >> 20,
            rss[rss.len() - 1] >> 20,
            rss.len(),
            rss.iter().max().unwrap() >> 20
        );
    }
}

#[test]
fn the_same_check_flags_a_run_that_leaks_4_mib_per_rep() {
    let tmp = tempfile::tempdir().unwrap();
    let text = soak_text()
        .replace("circuit = \"porep\"", "circuit = \"chain\"")
        .replace("log2_constraints = 14", "log2_constraints = 4")
        .replace("reps = 100", "reps = 30");
    let d = run(
        tmp.path(),
        &text,
        &["--debug-leak-bytes-per-rep", &(4u64 << 20).to_string()],
    );
    let flags = leak_flags(&d);
    assert_eq!(flags.len(), 2, "both variants flagged: {flags:?}");
    assert!(
        flags.iter().all(|f| f.growth_bytes() > 64 << 20),
        "{flags:?}"
    );
}
