//! The self-test's checks: plain functions over one rep's rows (spans annotated with
//! GPU-busy time, NVML samples, CUPTI activity), and the host reference the kernels'
//! result is compared with. Nothing here touches a GPU, so every check is tested on
//! synthetic reps, each defect failing its own check.

use std::collections::BTreeMap;
use std::fmt;

use super::spans;
use crate::store::{GpuActivityRow, SpanRow};
use crate::telemetry::RepTelemetry;

/// One verified property.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub rep: u32,
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rep {} {}: {}",
            if self.ok { "PASS" } else { "FAIL" },
            self.rep,
            self.name,
            self.detail
        )
    }
}

/// What a rep of the self-test launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    pub kernels: usize,
    pub htod: usize,
    pub dtoh: usize,
    pub memsets: usize,
    pub host_gap_ns: u64,
}

/// Checks one rep's spans (already annotated with GPU-busy time) and telemetry.
/// `slack_ns` widens host windows for clock-pairing uncertainty.
pub fn check_rep(
    rep: u32,
    spans: &[SpanRow],
    t: &RepTelemetry,
    exp: &Expected,
    slack_ns: u64,
) -> Vec<Check> {
    // A flat list of checks, each a few lines, in the order the self-test's output shows
    // them.
    let mut out = Vec::new();
    let mut check = |name: &'static str, ok: bool, detail: String| {
        out.push(Check {
            rep,
            name,
            ok,
            detail,
        })
    };
    let span = |n: &str| spans.iter().find(|s| s.name == n);
    let count = |kind: &str, name: Option<&str>| {
        t.activity
            .iter()
            .filter(|a| a.kind == kind && name.is_none_or(|n| a.name == n))
            .count()
    };
    check(
        "activity collected",
        t.collected,
        format!("CUPTI: {}", t.cupti_status.as_deref().unwrap_or("?")),
    );
    let k = count("kernel", None);
    check(
        "kernels recorded",
        k == exp.kernels,
        format!("{k} of {} launched", exp.kernels),
    );
    let (h, d) = (count("memcpy", Some("HtoD")), count("memcpy", Some("DtoH")));
    check(
        "copies recorded",
        h == exp.htod && d == exp.dtoh,
        format!("HtoD {h} of {}, DtoH {d} of {}", exp.htod, exp.dtoh),
    );
    let m = count("memset", None);
    check(
        "memsets recorded",
        m == exp.memsets,
        format!("{m} of {}", exp.memsets),
    );
    check(
        "no records dropped",
        t.dropped_records == 0,
        format!("{} dropped", t.dropped_records),
    );

    match span(spans::KERNELS) {
        Some(ks) => {
            let outside: Vec<String> = t
                .activity
                .iter()
                .filter(|a| a.kind == "kernel")
                .filter(|a| a.start_ns + slack_ns < ks.start_ns || a.end_ns > ks.end_ns + slack_ns)
                .map(|a| format!("{}..{}", a.start_ns, a.end_ns))
                .collect();
            check(
                "kernels inside their host window",
                outside.is_empty() && k > 0,
                if outside.is_empty() {
                    format!(
                        "window {}..{} ns, slack {slack_ns} ns",
                        ks.start_ns, ks.end_ns
                    )
                } else {
                    format!(
                        "{} outside {}..{}: {}",
                        outside.len(),
                        ks.start_ns,
                        ks.end_ns,
                        outside.join(", ")
                    )
                },
            );
            let busy = ks.gpu_busy_ns.unwrap_or(0);
            check(
                "kernels span busy",
                busy > 0 && busy <= ks.duration_ns,
                format!("busy {busy} of {} ns", ks.duration_ns),
            );
            let gpu_ms = serde_json::from_str::<serde_json::Value>(&ks.attrs)
                .ok()
                .and_then(|a| a.get("gpu_ms").and_then(|v| v.as_f64()));
            let ok = gpu_ms.is_some_and(|ms| {
                let ns = ms * 1e6;
                // Events bracket the launches: at least the kernels' busy time (less
                // timer resolution), at most the host window.
                ns >= busy as f64 * 0.95 - 10_000.0 && ns <= ks.duration_ns as f64 * 1.01 + 10_000.0
            });
            check(
                "CUDA-event gpu_ms attached",
                ok,
                format!("gpu_ms {gpu_ms:?}, busy {busy} ns"),
            );
        }
        None => check(
            "kernels inside their host window",
            false,
            "no `kernels` span".into(),
        ),
    }
    match span(spans::GPU_PROVE) {
        Some(g) => {
            let idle = g.gpu_idle_ns().unwrap_or(0);
            check(
                "gpu_prove idle covers the host gap",
                idle >= exp.host_gap_ns,
                format!("idle {idle} ns ≥ host gap {} ns", exp.host_gap_ns),
            );
        }
        None => check(
            "gpu_prove idle covers the host gap",
            false,
            "no `gpu_prove` span".into(),
        ),
    }
    let fast: Vec<_> = t.samples.iter().filter(|s| s.source == "nvml").collect();
    check(
        "NVML sampled",
        !fast.is_empty()
            && fast
                .iter()
                .any(|s| s.sm_util_pct.is_some() && s.mem_used_bytes.is_some()),
        format!(
            "{} samples, max SM util {:?} %, max power {:?} mW",
            fast.len(),
            fast.iter().filter_map(|s| s.sm_util_pct).max(),
            fast.iter().filter_map(|s| s.power_mw).max()
        ),
    );
    check(
        "leak-watch GPU memory read",
        t.gpu_mem_used_end_bytes.is_some(),
        format!("{:?} bytes", t.gpu_mem_used_end_bytes),
    );
    out
}

/// Checks one rep's NVTX ranges (gpu_activity rows of kind `nvtx`) against its spans:
/// every span on the rep's main thread (the root span's) has a range of the same name
/// whose start and end lie within `tolerance_ns` of the span's (one clock: CUPTI's
/// timestamps are CLOCK_MONOTONIC, or converted to it), and the ranges nest as the spans
/// do. `tool` is the NVTX tool that recorded them, or why none did: then the check fails
/// with that reason (the mirror was asked for).
pub fn check_nvtx(
    rep: u32,
    tool: Result<&str, &str>,
    spans: &[SpanRow],
    activity: &[GpuActivityRow],
    tolerance_ns: u64,
) -> Check {
    // Each main-thread span matched to a range, the nesting checked, then one Check naming
    // every problem: the matching's state (ranges used, worst offsets) makes the verdict.
    let check = |ok: bool, detail: String| Check {
        rep,
        name: "NVTX ranges match the spans",
        ok,
        detail,
    };
    let tool = match tool {
        Ok(t) => t,
        Err(reason) => return check(false, format!("no NVTX tool recorded the ranges: {reason}")),
    };
    let Some(root) = spans
        .iter()
        .filter(|s| s.parent_id.is_none())
        .min_by_key(|s| s.start_ns)
    else {
        return check(false, "no root span".into());
    };
    let mut main: Vec<&SpanRow> = spans
        .iter()
        .filter(|s| s.thread_id == root.thread_id)
        .collect();
    main.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    let ranges: Vec<&GpuActivityRow> = activity
        .iter()
        .filter(|a| a.kind == crate::store::ActivityKind::NvtxRange.as_str())
        .collect();
    let diff = |a: u64, b: u64| a as i128 - b as i128;
    let mut used = vec![false; ranges.len()];
    let mut matched: BTreeMap<u64, &GpuActivityRow> = BTreeMap::new();
    let (mut missing, mut shifted) = (Vec::new(), Vec::new());
    let (mut worst_start, mut worst_end) = (0u128, 0u128);
    for s in &main {
        let best = (0..ranges.len())
            .filter(|&i| !used[i] && ranges[i].name == s.name)
            .min_by_key(|&i| diff(ranges[i].start_ns, s.start_ns).unsigned_abs());
        let Some(i) = best else {
            missing.push(s.name.clone());
            continue;
        };
        used[i] = true;
        let r = ranges[i];
        matched.insert(s.span_id, r);
        let (ds, de) = (diff(r.start_ns, s.start_ns), diff(r.end_ns, s.end_ns));
        worst_start = worst_start.max(ds.unsigned_abs());
        worst_end = worst_end.max(de.unsigned_abs());
        if ds.unsigned_abs() > tolerance_ns as u128 || de.unsigned_abs() > tolerance_ns as u128 {
            shifted.push(format!("{} (start {ds:+} ns, end {de:+} ns)", s.name));
        }
    }
    let unnested: Vec<String> = main
        .iter()
        .filter_map(|s| {
            let parent = spans.iter().find(|p| Some(p.span_id) == s.parent_id)?;
            let (c, p) = (matched.get(&s.span_id)?, matched.get(&parent.span_id)?);
            (c.start_ns < p.start_ns || c.end_ns > p.end_ns)
                .then(|| format!("{} outside {}", s.name, parent.name))
        })
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("no range for {}", missing.join(", ")));
    }
    if !shifted.is_empty() {
        problems.push(format!("beyond ±{tolerance_ns} ns: {}", shifted.join(", ")));
    }
    if !unnested.is_empty() {
        problems.push(format!("not nested as the spans: {}", unnested.join(", ")));
    }
    if problems.is_empty() {
        check(
            true,
            format!(
                "{} spans of thread {} matched by NVTX ranges ({tool}): starts within {worst_start} ns, ends within {worst_end} ns (tolerance {tolerance_ns} ns), nested as the spans",
                main.len(),
                root.thread_id
            ),
        )
    } else {
        check(
            false,
            format!(
                "{} spans of thread {}, {} NVTX ranges ({tool}): {}",
                main.len(),
                root.thread_id,
                ranges.len(),
                problems.join("; ")
            ),
        )
    }
}

/// The NVTX tool of a self-test rep, as [`check_nvtx`] takes it: the mirror's status
/// when CUPTI recorded its ranges this rep, else why not.
pub(super) fn nvtx_tool(status: &str, to_cupti: bool, collected: bool) -> Result<&str, String> {
    match (to_cupti, collected) {
        (true, true) => Ok(status
            .strip_prefix("available (")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or(status)),
        (true, false) => Err("CUPTI collected nothing in this rep".into()),
        (false, _) if status.starts_with("available") => Err(format!(
            "the mirror's tool is not CUPTI ({status}); only CUPTI's record can be checked here"
        )),
        (false, _) => Err(format!("NVTX mirror {status}")),
    }
}

/// The host-side reference of one element after `launches` saxpy+spin pairs.
pub(super) fn expected_value(x: f32, launches: u32, iters: u32) -> f32 {
    let mut y = 1.0f32;
    for _ in 0..launches {
        y += 2.0 * x;
        for _ in 0..iters {
            y = y * 0.999 + 0.001;
        }
    }
    y
}

/// The input value of element `i`.
pub(super) fn x_of(i: usize) -> f32 {
    (i % 7) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{GpuActivityRow, TelemetryRow};
    use crate::telemetry::activity;

    fn span(name: &str, start: u64, end: u64, attrs: &str) -> SpanRow {
        let mut s = SpanRow::sample();
        s.name = name.into();
        (s.start_ns, s.end_ns, s.duration_ns) = (start, end, end - start);
        s.attrs = attrs.into();
        s
    }

    fn act(kind: &str, name: &str, start: u64, end: u64) -> GpuActivityRow {
        let mut a = GpuActivityRow::sample();
        a.kind = kind.into();
        a.name = name.into();
        (a.start_ns, a.end_ns, a.duration_ns) = (start, end, end - start);
        a
    }

    const EXP: Expected = Expected {
        kernels: 2,
        htod: 2,
        dtoh: 1,
        memsets: 1,
        host_gap_ns: 300,
    };

    /// A rep as the GPU machine should produce it: gpu_prove 0..2000 with copies,
    /// a memset, two kernels inside `kernels` (1000..1500) and a host gap.
    fn good() -> (Vec<SpanRow>, RepTelemetry) {
        let mut spans = vec![
            span("prove", 0, 2_100, "{}"),
            span("gpu_prove", 0, 2_000, "{}"),
            span("kernels", 1_000, 1_500, r#"{"gpu_ms":0.00045}"#),
        ];
        let mut nvml = TelemetryRow::sample();
        (nvml.source, nvml.sm_util_pct, nvml.mem_used_bytes) =
            ("nvml".into(), Some(90), Some(1 << 30));
        let t = RepTelemetry {
            activity: vec![
                act("memcpy", "HtoD", 100, 200),
                act("memcpy", "HtoD", 200, 300),
                act("memset", "memset", 400, 410),
                act("kernel", "saxpy", 1_010, 1_200),
                act("kernel", "spin", 1_200, 1_450),
                act("memcpy", "DtoH", 1_900, 1_990),
            ],
            collected: true,
            samples: vec![nvml],
            gpu_mem_used_end_bytes: Some(5),
            ..Default::default()
        };
        activity::annotate_gpu_busy(&mut spans, &t.activity);
        (spans, t)
    }

    fn failed(checks: &[Check]) -> Vec<&'static str> {
        checks.iter().filter(|c| !c.ok).map(|c| c.name).collect()
    }

    #[test]
    fn a_good_rep_passes_every_check() {
        let (s, t) = good();
        let c = check_rep(1, &s, &t, &EXP, 0);
        assert!(failed(&c).is_empty(), "{c:#?}");
        assert!(c.len() >= 10);
    }

    #[test]
    fn each_defect_fails_its_own_check() {
        // A kernel CUPTI missed.
        let (s, mut t) = good();
        t.activity.retain(|a| a.name != "spin");
        let mut s2 = s.clone();
        activity::annotate_gpu_busy(&mut s2, &t.activity);
        assert_eq!(
            failed(&check_rep(1, &s2, &t, &EXP, 0)),
            ["kernels recorded"]
        );

        // Clocks misaligned: kernels land 1 µs late, outside the host window.
        let (mut s, mut t) = good();
        for a in t.activity.iter_mut() {
            a.start_ns += 1_000;
            a.end_ns += 1_000;
        }
        activity::annotate_gpu_busy(&mut s, &t.activity);
        let f = failed(&check_rep(1, &s, &t, &EXP, 0));
        assert!(f.contains(&"kernels inside their host window"), "{f:?}");
        // … which a pairing uncertainty of that size excuses.
        let f = failed(&check_rep(1, &s, &t, &EXP, 1_000));
        assert!(!f.contains(&"kernels inside their host window"), "{f:?}");

        // No CUDA-event time on the span, a missing copy, dropped records, no NVML.
        let (mut s, mut t) = good();
        s[2].attrs = "{}".into();
        t.activity.retain(|a| a.name != "DtoH");
        t.dropped_records = 3;
        t.samples.clear();
        assert_eq!(
            failed(&check_rep(1, &s, &t, &EXP, 0)),
            [
                "copies recorded",
                "no records dropped",
                "CUDA-event gpu_ms attached",
                "NVML sampled"
            ]
        );

        // A host gap larger than the idle time measured.
        let (s, t) = good();
        let exp = Expected {
            host_gap_ns: 5_000,
            ..EXP
        };
        assert_eq!(
            failed(&check_rep(1, &s, &t, &exp, 0)),
            ["gpu_prove idle covers the host gap"]
        );

        // Nothing collected at all.
        let (s, _) = good();
        let t = RepTelemetry::default();
        let f = failed(&check_rep(1, &s, &t, &EXP, 0));
        assert!(
            f.contains(&"activity collected") && f.contains(&"kernels recorded"),
            "{f:?}"
        );
    }

    /// A rep's span tree: prove > gpu_prove > (copy, kernels, copy, d2h) on thread 7,
    /// and a helper span on thread 8.
    fn tree() -> Vec<SpanRow> {
        let s = |id: u64, parent: Option<u64>, thread: u64, name: &str, a: u64, b: u64| {
            let mut r = span(name, a, b, "{}");
            (r.span_id, r.parent_id, r.thread_id) = (id, parent, thread);
            r
        };
        vec![
            s(1, None, 7, "prove", 0, 2_100),
            s(2, Some(1), 7, "gpu_prove", 10, 2_000),
            s(3, Some(2), 7, "copy", 20, 200),
            s(4, Some(2), 7, "kernels", 1_000, 1_500),
            s(5, Some(2), 7, "copy", 1_600, 1_700),
            s(6, Some(2), 7, "d2h", 1_900, 2_000),
            s(7, Some(2), 8, "helper", 300, 900),
        ]
    }

    /// The NVTX ranges a tool records for the spans of thread 7: a few ns after each
    /// span's own timestamps (the mirror runs right after the recorder), plus a
    /// kernel record and a range of another thread, which the check ignores.
    fn ranges(spans: &[SpanRow]) -> Vec<GpuActivityRow> {
        let mut out: Vec<GpuActivityRow> = spans
            .iter()
            .filter(|s| s.thread_id == 7)
            .map(|s| act("nvtx", &s.name, s.start_ns + 3, s.end_ns + 5))
            .collect();
        out.push(act("kernel", "spin", 1_010, 1_400));
        out.push(act("nvtx", "other thread", 400, 800));
        out
    }

    const TOOL: Result<&str, &str> = Ok("NVTX 3 injection: libcupti.so.13 (CUPTI markers)");

    #[test]
    fn nvtx_ranges_that_mirror_the_spans_pass() {
        let spans = tree();
        let c = check_nvtx(2, TOOL, &spans, &ranges(&spans), 50);
        assert!(c.ok, "{c}");
        assert_eq!((c.rep, c.name), (2, "NVTX ranges match the spans"));
        assert!(
            c.detail.starts_with("6 spans of thread 7 matched by NVTX ranges (NVTX 3 injection: libcupti.so.13 (CUPTI markers)): starts within 3 ns, ends within 5 ns"),
            "{c}"
        );
        // Delivery order does not matter.
        let mut r = ranges(&spans);
        r.reverse();
        assert!(check_nvtx(2, TOOL, &spans, &r, 50).ok);
    }

    #[test]
    fn each_nvtx_defect_fails_the_check() {
        let spans = tree();
        let fails = |r: &[GpuActivityRow], needle: &str| {
            let c = check_nvtx(2, TOOL, &spans, r, 50);
            assert!(!c.ok, "{c}");
            assert!(c.detail.contains(needle), "{needle:?} not in {c}");
        };
        // A span without its range.
        let mut r = ranges(&spans);
        r.retain(|a| a.name != "kernels");
        fails(&r, "no range for kernels");
        // A range under another name.
        let mut r = ranges(&spans);
        r.iter_mut()
            .filter(|a| a.name == "d2h")
            .for_each(|a| a.name = "D2H".into());
        fails(&r, "no range for d2h");
        // One of two same-named ranges missing.
        let mut r = ranges(&spans);
        let second = r.iter().rposition(|a| a.name == "copy").unwrap();
        r.remove(second);
        fails(&r, "no range for copy");
        // A range 100 ns late (the clocks disagree).
        let mut r = ranges(&spans);
        r.iter_mut().filter(|a| a.name == "kernels").for_each(|a| {
            a.start_ns += 100;
            a.end_ns += 100;
        });
        fails(&r, "beyond ±50 ns: kernels (start +103 ns, end +105 ns)");
        // … which a tolerance of that size excuses.
        assert!(check_nvtx(2, TOOL, &spans, &r, 110).ok);
        // Within tolerance, yet ending after its parent: not nested as the spans.
        let mut r = ranges(&spans);
        r.iter_mut()
            .filter(|a| a.name == "d2h")
            .for_each(|a| a.end_ns += 20);
        fails(&r, "not nested as the spans: d2h outside gpu_prove");
        // No ranges at all, e.g. a tool that dropped them.
        let only_kernels: Vec<_> = ranges(&spans)
            .into_iter()
            .filter(|a| a.kind == "kernel")
            .collect();
        fails(&only_kernels, "no range for prove, gpu_prove, copy");
        // No spans.
        let c = check_nvtx(2, TOOL, &[], &ranges(&spans), 50);
        assert_eq!((c.ok, c.detail.as_str()), (false, "no root span"));
    }

    #[test]
    fn without_an_nvtx_tool_the_check_fails_with_the_reason() {
        let spans = tree();
        let c = check_nvtx(
            1,
            Err("NVTX mirror unavailable: x"),
            &spans,
            &ranges(&spans),
            50,
        );
        assert!(!c.ok);
        assert_eq!(
            c.detail,
            "no NVTX tool recorded the ranges: NVTX mirror unavailable: x"
        );

        let status = "available (NVTX 3 injection: libcupti.so.13 (CUPTI markers))";
        assert_eq!(
            nvtx_tool(status, true, true),
            Ok("NVTX 3 injection: libcupti.so.13 (CUPTI markers)")
        );
        assert!(nvtx_tool(status, true, false)
            .unwrap_err()
            .contains("CUPTI collected nothing"));
        let e = nvtx_tool("available (/usr/lib/libnvToolsExt.so.1)", false, true).unwrap_err();
        assert!(e.contains("not CUPTI"), "{e}");
        let e = nvtx_tool("unavailable: no tool", false, true).unwrap_err();
        assert_eq!(e, "NVTX mirror unavailable: no tool");
    }

    #[test]
    fn the_host_reference_follows_the_kernels() {
        // One pair with no spin: y = 1 + 2x.
        assert_eq!(expected_value(3.0, 1, 0), 7.0);
        // Spinning converges towards 1.
        let v = expected_value(0.0, 1, 10_000);
        assert!((v - 1.0).abs() < 1e-3, "{v}");
    }
}
