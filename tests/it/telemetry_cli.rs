//! GPU telemetry through the command line, on whatever machine runs the tests: on one
//! without a GPU (build machines, CI) every GPU source must say why it is unavailable
//! while runs go on; on a GPU machine the same runs carry samples and activity.

use std::path::{Path, PathBuf};

use gapscope::plot::{self, ImageFormat};
use gapscope::store::lanes::series::{busy_cores, SOURCE_PROCESS_CPU};
use gapscope::store::{RepStatus, RunData, RunView, TelemetryRow};

use crate::common;
use common::{gapscope, run_ok};

const AB: &str = r#"name = "tel_ab"
[workload]
circuit = "porep"
log2_constraints = 10
batch = 1
backend = "cpu"
[run]
reps = 1
warmups = 0
process = "PROCESS"
telemetry_period_ms = 5
[[variant]]
name = "on"
[[variant]]
name = "off"
telemetry = false
"#;

fn run_ab(tmp: &Path, process: &str, extra: &[&str]) -> PathBuf {
    let exp = tmp.join(format!("ab_{process}.toml"));
    std::fs::write(&exp, AB.replace("PROCESS", process)).unwrap();
    let args: Vec<&str> = ["--quiet"].iter().chain(extra).copied().collect();
    run_ok(tmp, &exp, &args)
}

fn check_run(dir: &Path, process: &str) {
    assert!(dir.join("telemetry.csv").exists() && dir.join("gpu_activity.csv").exists());
    let d = RunData::load(dir).unwrap();
    assert!(
        d.runs.iter().all(|r| r.status == RepStatus::Ok),
        "{:?}",
        d.runs
    );
    let knob =
        |v: &str| d.meta.variants.iter().find(|x| x.name == v).unwrap().knobs["telemetry"].clone();
    assert_eq!(
        (knob("on").as_str(), knob("off").as_str()),
        ("true", "false")
    );
    let g = &d.meta.gpu;
    assert_eq!(g.sample_period_ms, Some(5));
    let activity = d.load_gpu_activity().unwrap();
    let samples = d.load_telemetry().unwrap();
    check_cpu_lane(dir, &samples);
    // The "off" variant never collects, on any machine.
    assert!(activity.iter().all(|a| a.variant == "on"));
    assert!(samples.iter().all(|s| s.variant == "on"));
    assert!(d
        .spans
        .iter()
        .filter(|s| s.variant == "off")
        .all(|s| s.gpu_busy_ns.is_none()));
    if g.available {
        // A GPU machine: the CPU backend launches no kernels, but NVML samples the GPU.
        assert!(
            !samples.is_empty(),
            "NVML samples expected on a GPU machine ({process})"
        );
        return;
    }
    let reason = g.reason.as_deref().unwrap_or("");
    let nvml = g.nvml.as_deref().unwrap_or("");
    assert!(nvml.starts_with("unavailable: "), "{g:?}");
    if nvml.contains("libnvidia-ml") && nvml.contains("cannot open shared object file") {
        // No driver: one plain sentence; NVML's status keeps the loader's words.
        assert_eq!(reason, "no NVIDIA GPU/driver on this host", "{g:?}");
    } else {
        assert!(reason.starts_with("unavailable: "), "{reason}");
    }
    assert!(
        g.cupti
            .as_deref()
            .unwrap_or("")
            .starts_with("unavailable: ")
            || g.cupti.as_deref().unwrap_or("").starts_with("off"),
        "{g:?}"
    );
    // Without a GPU only the process's CPU time is sampled.
    assert!(activity.is_empty());
    assert!(samples.iter().all(|s| s.source == SOURCE_PROCESS_CPU));
    assert!(d
        .runs
        .iter()
        .all(|r| r.gpu_mem_used_end_bytes.is_none() && r.rss_end_bytes.is_some()));
}

/// The CPU lane, on every machine: the process's CPU time at each period of the "on"
/// variant's rep, busy cores between them, drawn under the GPU lanes of the timeline.
fn check_cpu_lane(dir: &Path, samples: &[TelemetryRow]) {
    let cpu: Vec<&TelemetryRow> = samples
        .iter()
        .filter(|s| s.source == SOURCE_PROCESS_CPU)
        .collect();
    assert!(cpu.len() >= 2, "{} process CPU samples", cpu.len());
    assert!(cpu
        .iter()
        .all(|s| s.variant == "on" && s.process_cpu_ns.is_some()));
    let cores = busy_cores(&cpu);
    // Proving keeps at least one thread busy somewhere in the rep.
    assert!(cores.iter().any(|c| c.2 > 0.2), "{cores:?}");
    let out = dir.with_extension("charts");
    plot::render(
        &plot::timeline::Timeline,
        &RunView::load(dir).unwrap(),
        &out,
        &[ImageFormat::Svg],
    )
    .unwrap();
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(
        svg.contains("CPU busy cores"),
        "no CPU lane in the timeline"
    );
}

#[test]
fn runs_record_telemetry_status_and_go_on_without_a_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_ab(tmp.path(), "shared", &["--nvtx"]);
    check_run(&dir, "shared");
    let d = RunData::load(&dir).unwrap();
    let nvtx = d.meta.gpu.nvtx.clone().unwrap_or_default();
    assert!(
        nvtx.starts_with("available") || nvtx.starts_with("unavailable: "),
        "{nvtx}"
    );
}

#[test]
fn per_rep_workers_return_their_telemetry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_ab(tmp.path(), "per_rep", &[]);
    check_run(&dir, "per_rep");
    let d = RunData::load(&dir).unwrap();
    assert_eq!(d.meta.gpu.nvtx.as_deref(), Some("off (run with --nvtx)"));
    // CUPTI's status comes from the workers, where it is loaded (or not).
    let cupti = d.meta.gpu.cupti.clone().unwrap_or_default();
    assert!(cupti.ends_with("(in worker processes)"), "{cupti}");
}

#[test]
fn gpu_selftest_explains_a_missing_gpu() {
    let tmp = tempfile::tempdir().unwrap();
    let out = gapscope(tmp.path())
        .args(["gpu-selftest", "--reps", "1", "--results-dir"])
        .arg(tmp.path().join("results"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.success() {
        // A GPU machine: every check passed and the run folder exists.
        assert!(
            stdout.contains("PASS") && !stdout.contains("FAIL"),
            "{stdout}"
        );
        return;
    }
    if stdout.contains("FAIL") {
        panic!("gpu-selftest failed on a GPU machine:\n{stdout}\n{stderr}");
    }
    assert!(
        stderr.contains("Error: gpu-selftest needs an NVIDIA GPU"),
        "{stderr}"
    );
    assert!(!tmp.path().join("results").join("gpu-selftest").exists());
}

#[test]
fn experiment_files_load_and_telemetry_ones_differ_only_in_telemetry() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for path in &files {
        let (e, _) = gapscope::experiment::Experiment::load(path)
            .unwrap_or_else(|err| panic!("{}: {err:#}", path.display()));
        let name = path.file_name().unwrap().to_string_lossy();
        if !name.starts_with("telemetry_") {
            continue;
        }
        let v = e.resolved_variants();
        assert!(v.iter().any(|v| v.telemetry.any()), "{name}");
        if name.contains("overhead") {
            assert_eq!(
                v.iter().filter(|v| !v.telemetry.any()).count(),
                1,
                "{name}: one variant with telemetry off"
            );
            assert!(
                v.iter().all(|x| x.backend == v[0].backend
                    && x.gadget == v[0].gadget
                    && x.prove.drop == v[0].prove.drop),
                "{name}: variants differ only in telemetry"
            );
        }
    }
}
