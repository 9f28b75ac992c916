//! The span clock against CLOCK_MONOTONIC over a long run, and, where a GPU is present,
//! against CUPTI's kernel timestamps (`trace::clock_check`; docs/span-cost.md).
//!
//! ```text
//! clock_check [--seconds 600] [--period-ms 10] [--gpu-every-s 60] [--out DIR]
//! ```
//! Writes `DIR/clock_check.json` (default: the current folder) and exits 1 when the
//! clock strayed more than 1 µs from CLOCK_MONOTONIC or a GPU check failed. Under
//! `cargo bench` (which passes `--bench`) without `--seconds` it runs 5 s.
//!
//! The GPU part runs the GPU self-test (`telemetry::selftest`, one rep, in `DIR`) every
//! `--gpu-every-s` seconds in this same process while the clock is sampled: CUPTI stamps
//! kernels through its timestamp callback, which returns the span clock (the TSC line
//! where it is calibrated), and the self-test's check "kernels inside their host window"
//! puts every kernel's interval inside the host span that launched and synchronised it.
//! A span clock drifting from the clock CUPTI maps the GPU's timer onto shows there as
//! kernels outside their window, at whatever minute of the run the drift had grown.

use std::path::PathBuf;
use std::time::Duration;

use gapscope::telemetry::selftest::{self, SelftestOptions};
use gapscope::trace::{self, clock_check};

#[derive(serde::Serialize)]
struct GpuCheck {
    at_s: f64,
    /// "kernels inside their host window": passed, or why not.
    ok: bool,
    detail: String,
}

#[derive(serde::Serialize)]
struct Report {
    clock: clock_check::ClockCheck,
    /// Empty where no GPU self-test could run (see `gpu_unavailable`).
    gpu_checks: Vec<GpuCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu_unavailable: Option<String>,
    passed: bool,
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let v = args
        .get(i + 1)
        .unwrap_or_else(|| die(&format!("{name} needs a value")));
    Some(
        v.parse()
            .unwrap_or_else(|_| die(&format!("{name}: cannot read {v:?}"))),
    )
}

fn die(msg: &str) -> ! {
    eprintln!("Error: {msg} (usage: clock_check [--seconds N] [--period-ms N] [--gpu-every-s N] [--out DIR])");
    std::process::exit(2)
}

fn gpu_checks(out: PathBuf, every_s: u64, seconds: f64) -> (Vec<GpuCheck>, Option<String>) {
    let start = trace::now_ns();
    let mut done = Vec::new();
    let mut k = 0u64;
    loop {
        let at_ns = k * every_s * 1_000_000_000;
        if at_ns as f64 > seconds * 1e9 {
            return (done, None);
        }
        let wait = (start + at_ns).saturating_sub(trace::now_ns());
        std::thread::sleep(Duration::from_nanos(wait));
        let o = SelftestOptions {
            results_dir: out.clone(),
            reps: 1,
            ..Default::default()
        };
        let at_s = (trace::now_ns() - start) as f64 / 1e9;
        match selftest::run(&o) {
            Ok(outcome) => {
                let c = outcome
                    .checks
                    .iter()
                    .filter(|c| c.name == "kernels inside their host window")
                    .collect::<Vec<_>>();
                let ok = !c.is_empty() && c.iter().all(|c| c.ok);
                let detail = c
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join("; ");
                eprintln!("clock_check: GPU at {at_s:.0} s: {detail}");
                done.push(GpuCheck { at_s, ok, detail });
            }
            Err(e) if done.is_empty() => return (done, Some(format!("{e:#}"))),
            Err(e) => done.push(GpuCheck {
                at_s,
                ok: false,
                detail: format!("self-test failed: {e:#}"),
            }),
        }
        k += 1;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let under_cargo_bench = args.iter().any(|a| a == "--bench");
    let seconds: f64 =
        arg(&args, "--seconds").unwrap_or(if under_cargo_bench { 5.0 } else { 600.0 });
    let period_ms: u64 = arg(&args, "--period-ms").unwrap_or(10);
    let every_s: u64 = arg(&args, "--gpu-every-s").unwrap_or(60);
    let out: PathBuf = arg(&args, "--out").unwrap_or_else(|| PathBuf::from("."));
    if seconds.is_nan() || seconds <= 0.0 || period_ms == 0 {
        die("--seconds and --period-ms must be positive");
    }
    std::fs::create_dir_all(&out).unwrap_or_else(|e| die(&format!("{}: {e}", out.display())));
    let gpu = (every_s > 0).then(|| {
        let out = out.clone();
        std::thread::spawn(move || gpu_checks(out, every_s, seconds))
    });
    let clock = clock_check::run(seconds, Duration::from_millis(period_ms), |c| {
        eprintln!(
            "clock_check: minute {}: max error {} ns ({} samples, clock {})",
            c.per_minute_max_error_ns.len(),
            c.per_minute_max_error_ns.last().copied().unwrap_or(0),
            c.samples,
            trace::clock_info(0).source
        );
    });
    let (gpu_checks, gpu_unavailable) = match gpu {
        Some(h) => h
            .join()
            .unwrap_or_else(|_| (Vec::new(), Some("GPU check panicked".into()))),
        None => (Vec::new(), Some("--gpu-every-s 0".into())),
    };
    let passed = clock.passed && gpu_checks.iter().all(|g| g.ok);
    let report = Report {
        clock,
        gpu_checks,
        gpu_unavailable,
        passed,
    };
    let json = serde_json::to_string_pretty(&report).expect("serialisable");
    let path = out.join("clock_check.json");
    std::fs::write(&path, &json).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
    println!("{json}");
    if !passed {
        std::process::exit(1);
    }
}
