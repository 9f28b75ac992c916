//! Tests of [`super`] (telemetry/mod.rs), kept beside it.

use super::*;

fn pair(c: u64, m: u64) -> ClockPair {
    ClockPair {
        cupti_ns: c,
        mono_ns: m,
        window_ns: 40,
    }
}

#[test]
fn clock_map_converts_only_without_the_callback() {
    let (b, e) = (Some(pair(1_000, 501_000)), Some(pair(2_001_000, 2_501_000)));
    let (m, cal) = clock_map(false, b, e, 7);
    assert_eq!(m.to_span_ns(1_001_000), 1_501_000);
    let cal = cal.unwrap();
    assert_eq!(
        (
            cal.rep,
            cal.mode.as_str(),
            cal.offset_begin_ns,
            cal.uncertainty_ns
        ),
        (7, "linear", 500_000, 40)
    );
    let (m, cal) = clock_map(true, b, e, 7);
    assert_eq!(
        m.to_span_ns(1_001_000),
        1_001_000,
        "callback timestamps are already monotonic"
    );
    assert_eq!(cal.unwrap().mode, "callback");
    let (m, cal) = clock_map(false, None, Some(pair(10, 20)), 0);
    assert_eq!(m.to_span_ns(15), 25);
    assert_eq!(cal.unwrap().drift_ppm, 0.0);
    let (m, cal) = clock_map(false, None, None, 0);
    assert_eq!((m.to_span_ns(5), cal), (5, None));
}

#[test]
fn versions_and_statuses_read_well() {
    assert_eq!(cuda_version(13000), "13.0");
    assert_eq!(cuda_version(12040), "12.4");
    assert_eq!(status::<()>(&Ok(())), "available");
    assert_eq!(
        status::<()>(&Err("no driver".into())),
        "unavailable: no driver"
    );
    assert_eq!(status::<()>(&Err("off (x)".into())), "off (x)");
}

/// On a machine without a GPU (build machines, CI) telemetry starts, says why it
/// has nothing, and a rep still ends cleanly.
#[test]
fn without_a_gpu_everything_is_unavailable_and_reps_go_on() {
    let t = Telemetry::start(TelemetryConfig::default());
    let m = t.gpu_meta();
    if m.available {
        return; // a GPU machine: covered by `gapscope gpu-selftest`
    }
    let nvml = m.nvml.as_deref().unwrap_or("");
    assert!(nvml.starts_with("unavailable: "), "{m:?}");
    let no_gpu = crate::store::lanes::NO_GPU;
    if crate::store::lanes::is_no_driver(nvml) {
        // No driver: said in one plain sentence; the loader's text stays in `nvml`.
        assert_eq!(m.reason.as_deref(), Some(no_gpu), "{m:?}");
        assert_eq!(m.cupti, Some(format!("unavailable: {no_gpu}")), "{m:?}");
    } else {
        let reason = m.reason.as_deref().unwrap_or("");
        assert!(reason.starts_with("unavailable: "), "{m:?}");
        let cupti = m.cupti.as_deref().unwrap_or("");
        assert!(cupti.starts_with("unavailable: no GPU"), "{m:?}");
    }
    assert_eq!(m.nvtx.as_deref(), Some("off (run with --nvtx)"));
    assert_eq!(m.sample_period_ms, Some(20));
    assert!(t.begin_rep(TelemetryParts::ALL).is_empty());
    // Work for a few periods: the sampler still reads the process's CPU time.
    let t0 = std::time::Instant::now();
    let mut x = 0u64;
    while t0.elapsed() < Duration::from_millis(80) {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    let ending = std::time::Instant::now();
    let r = t.end_rep(0, "v");
    // No driver samples, so no wait for a last window (which would last 1.5 windows of
    // a GPU's driver, up to 500 ms).
    assert!(
        ending.elapsed() < Duration::from_millis(250),
        "{:?}",
        ending.elapsed()
    );
    assert!(!r.collected && r.activity.is_empty() && r.gpu_mem_used_end_bytes.is_none());
    assert!(r.samples.len() >= 2, "{:?}", r.samples);
    assert!(r.samples.iter().all(|s| s.source == "process_cpu"
        && s.process_cpu_ns.is_some()
        && s.sm_util_pct.is_none()));
    let rows: Vec<&TelemetryRow> = r.samples.iter().collect();
    let busy = crate::store::lanes::series::busy_cores(&rows);
    assert!(busy.iter().any(|b| b.2 > 0.0), "{busy:?}");
    assert!(r.util_placement.is_empty(), "no GPU, no utilisation lane");
    let r = t.end_rep(1, "v");
    assert_eq!(r.notes, ["end_rep without begin_rep"]);
}
