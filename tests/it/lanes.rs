//! The timeline's lanes under the GPU intervals: a utilisation lane per GPU, labelled
//! with how it is placed, and the CPU lane; in the chart and in the Chrome trace, for new
//! run folders and for folders written before these columns.

use crate::fixture;

use std::path::{Path, PathBuf};

use gapscope::plot::{self, ImageFormat};
use gapscope::store::lanes::series::{
    PLACED_DRIVER_SAMPLE, PLACED_READ_TIME, SOURCE_DRIVER_SAMPLES, SOURCE_PROCESS_CPU,
};
use gapscope::store::{RunData, RunView, TelemetryRow};

const US: u64 = 1_000;

fn timeline_svg(run: &Path, out: &Path) -> String {
    plot::render(
        &plot::timeline::Timeline,
        &RunView::load(run).unwrap(),
        out,
        &[ImageFormat::Svg],
    )
    .unwrap();
    std::fs::read_to_string(out.join("timeline.svg")).unwrap()
}

fn write_telemetry(run: &Path, rows: &[TelemetryRow]) {
    let mut w = csv::Writer::from_path(run.join("telemetry.csv")).unwrap();
    for r in rows {
        w.serialize(r).unwrap();
    }
    w.flush().unwrap();
}

/// The GPU fixture turned into a two-GPU run: GPU 0 with the driver's samples (and
/// its reads), GPU 1 with reads shifted by a known window, and the process's CPU time
/// every 250 µs at three busy cores.
fn two_gpu_run(dir: &Path) -> PathBuf {
    let run = fixture::write(
        dir,
        &fixture::Options {
            gpu: true,
            ..Default::default()
        },
    );
    let old = RunData::load(&run).unwrap().load_telemetry().unwrap();
    let mut rows = Vec::new();
    for r in &old {
        let read = |gpu: u32| TelemetryRow {
            gpu,
            util_placement: Some(PLACED_READ_TIME.into()),
            util_window_ns: Some(500 * US),
            ..r.clone()
        };
        rows.push(read(0));
        rows.push(read(1));
        rows.push(TelemetryRow {
            source: SOURCE_DRIVER_SAMPLES.into(),
            mem_used_bytes: None,
            power_mw: None,
            util_placement: Some(PLACED_DRIVER_SAMPLE.into()),
            util_window_ns: Some(250 * US),
            ..r.clone()
        });
        rows.push(TelemetryRow {
            source: SOURCE_PROCESS_CPU.into(),
            process_cpu_ns: Some((r.t_ns - old[0].t_ns) * 3),
            ..TelemetryRow::sample()
        });
        let last = rows.len() - 1;
        rows[last].rep = r.rep;
        rows[last].variant = r.variant.clone();
        rows[last].t_ns = r.t_ns;
    }
    write_telemetry(&run, &rows);
    run
}

#[test]
fn each_gpu_has_its_lane_labelled_with_its_placement_and_the_cpu_lane_is_beneath() {
    let tmp = tempfile::tempdir().unwrap();
    let run = two_gpu_run(&tmp.path().join("a"));
    let svg = timeline_svg(&run, &tmp.path().join("charts"));
    for s in [
        "GPU 0 util %",
        "GPU 1 util %",
        "driver samples",
        "reads − 500 µs",
        "CPU busy cores",
        // The legend's lines (apostrophes aside, which SVG may escape).
        "GPU 0 utilisation (SM solid, memory faint): the driver",
        "samples, each at the middle of its 250 µs window",
        "GPU 1 utilisation (SM solid, memory faint): values read every period, shifted back",
        "500 µs window",
        "CPU lane: the process",
        "on the scale of the machine",
    ] {
        assert!(svg.contains(s), "timeline.svg lacks {s:?}");
    }
    assert!(!svg.contains("no GPU activity recorded"));
    // How close the placed lane is to CUPTI's kernels, in the chart's notes (report.md).
    let r = plot::render(
        &plot::timeline::Timeline,
        &RunView::load(&run).unwrap(),
        &tmp.path().join("again"),
        &[ImageFormat::Svg],
    )
    .unwrap();
    let agreement: Vec<&String> = r
        .notes
        .0
        .iter()
        .filter(|n| n.contains("SM utilisation against CUPTI"))
        .collect();
    assert!(
        agreement.iter().any(|n| n.starts_with("baseline: GPU 0 ")
            && n.contains("250 µs window")
            && n.contains("as drawn (driver samples")),
        "{:?}",
        r.notes
    );
    assert!(
        !agreement.iter().any(|n| n.contains("GPU 1")),
        "no kernels on device 1"
    );
    // The lanes come in order: GPU 0, GPU 1, then the CPU.
    let at = |s: &str| svg.find(s).unwrap();
    assert!(at("GPU 0 util %") < at("GPU 1 util %"));
    assert!(at("GPU 1 util %") < at("CPU busy cores"));

    let view = RunView::load(&run).unwrap();
    let trace =
        gapscope::export::chrome::trace(&view, &[view.measured_reps("baseline")[0].rep]).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let counter = |name: &str| -> Vec<f64> {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .map(|e| e["args"]["value"].as_f64().unwrap())
            .collect()
    };
    let cores = counter("process busy cores");
    assert!(!cores.is_empty());
    assert!(cores.iter().all(|c| (c - 3.0).abs() < 1e-9), "{cores:?}");
    assert!(!counter("GPU 0 sm_util_pct (driver samples)").is_empty());
    assert!(!counter("GPU 1 sm_util_pct").is_empty());
}

#[test]
fn a_folder_from_before_the_lane_columns_loads_and_draws_at_read_time() {
    let tmp = tempfile::tempdir().unwrap();
    let run = fixture::write(
        &tmp.path().join("a"),
        &fixture::Options {
            gpu: true,
            ..Default::default()
        },
    );
    // telemetry.csv as written before the three last columns.
    let path = run.join("telemetry.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let old: String = text
        .lines()
        .map(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            cols[..cols.len() - 3].join(",") + "\n"
        })
        .collect();
    assert!(
        old.starts_with("rep,") && old.lines().next().unwrap().ends_with("pcie_rx_bytes_per_s")
    );
    std::fs::write(&path, old).unwrap();
    let rows = RunData::load(&run).unwrap().load_telemetry().unwrap();
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|r| r.util_placement.is_none() && r.process_cpu_ns.is_none()));
    let svg = timeline_svg(&run, &tmp.path().join("charts"));
    assert!(svg.contains("GPU 0 util %") && svg.contains("at read time"));
    assert!(
        !svg.contains("CPU busy cores"),
        "no CPU lane without its column"
    );
}

/// A committed two-GPU H200 run (driver 580, before these columns): both GPUs get their
/// lane, drawn at read time.
#[test]
fn the_committed_two_gpu_run_draws_a_lane_per_gpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/gpu-scale/cuda_two_gpus_2e22");
    let Some(run) = std::fs::read_dir(&root)
        .ok()
        .and_then(|mut d| d.next())
        .map(|e| e.unwrap().path())
    else {
        panic!("{} missing", root.display());
    };
    let tmp = tempfile::tempdir().unwrap();
    let svg = timeline_svg(&run, tmp.path());
    for s in ["GPU 0 util %", "GPU 1 util %", "at read time"] {
        assert!(svg.contains(s), "timeline.svg lacks {s:?}");
    }
    assert!(!svg.contains("CPU busy cores"));
}
