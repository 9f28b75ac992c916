//! The notes under a diff's headline: how the reps were chosen and paired, which
//! comparisons a difference between the two sides rules out (workload, params origin,
//! scope, counter sources), and which counters are not compared and why.

use super::select::{same_run, Pairs, Side, COUNTERS};
use super::{DiffOptions, WorkloadDifference};
use crate::stats;
use crate::store::envinfo::MachineState;
use crate::store::{RunData, SpanRow};
use crate::units::fmt_ns;

/// One side's end-to-end times in two groups ([`stats::bimodal`]): which reps are in
/// the smaller group, and both groups' medians.
fn bimodal_note(label: &str, side: &Side) -> Option<String> {
    let x = stats::Sample::new(side.root_total_ns.iter().map(|&t| t as f64).collect()).ok()?;
    let m = stats::bimodal(&x)?;
    let upper_smaller = m.upper_count <= m.lower_count;
    let mut reps: Vec<u32> = side
        .root_total_ns
        .iter()
        .zip(&side.reps)
        .filter(|(&t, _)| ((t as f64) >= m.threshold) == upper_smaller)
        .map(|(_, &r)| r)
        .collect();
    reps.sort_unstable();
    let list: Vec<String> = reps.iter().map(u32::to_string).collect();
    Some(format!(
        "the {label}'s end-to-end times form two groups: {} reps near {} and {} near {}; \
         the {} group is reps {} (rep numbers of runs.csv). A median and its interval \
         describe neither group: find what differs in those reps (CPU frequency, another \
         process, a cold cache) before trusting a verdict",
        m.lower_count,
        fmt_ns(m.lower_median),
        m.upper_count,
        fmt_ns(m.upper_median),
        if upper_smaller { "slower" } else { "faster" },
        list.join(", ")
    ))
}

/// Busy cores left out of the comparison, and why ([`Side::busy_cores_of`]).
fn busy_cores_note(sb: &Side, sc: &Side) -> Option<String> {
    let (mut short, mut over, mut spans) = (0usize, 0usize, Vec::new());
    for side in [sb, sc] {
        for name in side.names.iter().map(|n| n.as_str()) {
            let (_, w) = side.busy_cores_of(name);
            short += w.too_short;
            over += w.over_cores;
            if w.over_cores > 0 && !spans.contains(&name) {
                spans.push(name);
            }
        }
    }
    if short + over == 0 {
        return None;
    }
    let mut parts = Vec::new();
    if short > 0 {
        parts.push(format!(
            "{short} span occurrence(s) shorter than {} (the process CPU clock of running \
             threads advances at the scheduler's tick, too coarse for them)",
            fmt_ns(super::select::BUSY_CORES_MIN_SPAN_NS as f64)
        ));
    }
    if over > 0 {
        parts.push(format!(
            "{over} where CPU time over wall time exceeded the {} core(s) the process may use \
             ({}): a reading, not a measurement",
            sb.cpu_cores,
            spans.join(", ")
        ));
    }
    Some(format!("busy cores withheld for {}", parts.join("; ")))
}

fn state_words(s: &MachineState) -> String {
    let mut parts = Vec::new();
    if let Some(l) = s.load_avg {
        parts.push(format!("load {:.2}", l[0]));
    }
    if let Some(c) = s.cpu_mhz {
        parts.push(format!("CPU {:.0} MHz", c.median));
    }
    if let Some(g) = &s.governor {
        parts.push(format!("governor {g}"));
    }
    for g in &s.gpus {
        let mut t = format!("GPU {}", g.index);
        if let Some(mhz) = g.sm_clock_mhz {
            t.push_str(&format!(" SM {mhz} MHz"));
        }
        if !g.throttle_reasons.is_empty() {
            t.push_str(&format!(" throttled: {}", g.throttle_reasons.join("+")));
        }
        parts.push(t);
    }
    if parts.is_empty() {
        "nothing readable".into()
    } else {
        parts.join(", ")
    }
}

/// What each run's meta.json recorded of the machine at its start and end.
fn drift_words(d: &RunData) -> Option<String> {
    let drift = d.meta.drift.as_ref()?;
    let mut s = format!("start {}", state_words(&drift.start));
    if let Some(e) = &drift.end {
        s.push_str(&format!("; end {}", state_words(e)));
    }
    Some(s)
}

/// Two run folders: the machine may have changed between them, which the reps' spread
/// does not show (the tests add a typical between-runs spread for it).
fn between_runs_note(data: [&RunData; 2]) -> Option<String> {
    if same_run(data[0], data[1]) {
        return None;
    }
    let mut s = format!(
        "the sides come from two runs (baseline started {}, candidate {}): drift of the \
         machine between them (clock, load, temperature, other tenants) is not in the \
         reps' spread; the tests add a typical between-runs spread (`--between-runs`, \
         docs/statistics.md), which a larger drift exceeds; put both variants in one \
         interleaved run to measure it",
        data[0].meta.created_utc, data[1].meta.created_utc
    );
    for (label, d) in [("baseline", data[0]), ("candidate", data[1])] {
        if let Some(w) = drift_words(d) {
            s.push_str(&format!("; {label} run: {w}"));
        }
    }
    Some(s)
}

/// Each side's measured reps ran in one process of its own (`process = "per_variant"`
/// without `reps_per_worker`): whatever that process keeps for its life (where the heap
/// put the big vectors, GPU memory placement) stays with one variant for every rep, a
/// bias that pairing cannot cancel and the interval does not cover.
fn one_process_note(data: [&RunData; 2], sb: &Side, sc: &Side) -> Option<String> {
    let pids = |d: &RunData, side: &Side| -> Vec<u32> {
        let mut p: Vec<u32> = d
            .runs
            .iter()
            .filter(|r| side.reps.contains(&r.rep) && r.pid != 0)
            .map(|r| r.pid)
            .collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    let (b, c) = (pids(data[0], sb), pids(data[1], sc));
    let two_reps = sb.reps.len() >= 2 && sc.reps.len() >= 2;
    if !(two_reps && same_run(data[0], data[1]) && b.len() == 1 && c.len() == 1 && b != c) {
        return None;
    }
    Some(format!(
        "every measured rep of the baseline ran in one process (pid {}) and every rep of \
         the candidate in another (pid {}): what a process keeps for its life (where the \
         heap put its vectors, GPU memory placement) stays with one variant and is not \
         covered by the intervals; set run.reps_per_worker below the reps per variant \
         (e.g. 4) to spread each variant over several processes",
        b[0], c[0]
    ))
}

/// Whether a run's schedule puts the variants' reps of one iteration back to back.
pub(super) fn alternates(order: &str) -> bool {
    matches!(
        order,
        "interleaved" | "counterbalanced" | "blocks" | "imported_paired"
    )
}

/// How each run's process got its params, as meta.json's `params` entries say:
/// "generated in the process" (`generated`, `regenerated: …`) or "loaded" (`loaded`, or
/// `generated in a child process` and then loaded).
fn params_origin(d: &RunData) -> String {
    let mut o: Vec<&str> = d
        .meta
        .params
        .iter()
        .filter_map(|p| p.get("source").and_then(|s| s.as_str()))
        .map(|s| {
            if s == "generated" || s.starts_with("regenerated") {
                "generated in the process"
            } else {
                "loaded"
            }
        })
        .collect();
    o.sort_unstable();
    o.dedup();
    o.join(" and ")
}

/// Two runs whose params came one from the cache and one from generation in the same
/// process: the process's heap then differs, and with it synthesis's page faults and
/// time, so the two are not comparable (the measured size of the effect is in
/// evidence/telemetry-overhead/telemetry_overhead_gpu/README.md).
fn params_origin_note(data: [&RunData; 2]) -> Option<String> {
    let (b, c) = (params_origin(data[0]), params_origin(data[1]));
    (!b.is_empty() && !c.is_empty() && b != c).then(|| {
        format!(
            "params were {b} in the baseline's run and {c} in the candidate's: generating \
             params in the process leaves its heap in another state than loading them, \
             which changes synthesis's page faults and time; compare runs whose params \
             came the same way (run each once more with the params cached)"
        )
    })
}

/// The named rows whose tests include the two-sample test without far-out values
/// ([`super::compare::without_far_out`]): a reader should know that a rep was set aside
/// for one of the tests, and which rows that concerns.
pub(super) fn far_out_note(metrics: &[super::compare::Comparison]) -> Option<String> {
    const SHOWN: usize = 5;
    let rows: Vec<String> = metrics
        .iter()
        .filter(|c| c.verdict.is_change())
        .filter(|c| c.tests.as_ref().is_some_and(|t| t.trimmed.is_some()))
        .map(|c| format!("{} ({})", c.span, c.measure))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let more = match rows.len().saturating_sub(SHOWN) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "far-out reps: {} of the rows named had a rep more than {} robust spreads from its \
         side's median; for them the two-sample test without it replaced the test on every \
         rep, and the change is the typical rep's: {}{more}",
        rows.len(),
        super::compare::FAR_OUT_SPREADS,
        rows[..rows.len().min(SHOWN)].join(", ")
    ))
}

// The recorder's note comes in made: a folder read a rep at a time gives it from the
// reading that built the sides.
#[allow(clippy::too_many_arguments)]
pub(super) fn notes(
    data: [&RunData; 2],
    sb: &Side,
    sc: &Side,
    differences: &[WorkloadDifference],
    pairs: Option<&Pairs>,
    few_pairs: Option<usize>,
    recorder: Option<String>,
    opts: &DiffOptions,
) -> Vec<String> {
    // One note after another in the order the diff prints them; each is a few lines reading
    // the same two runs and sides, and splitting them would pass that context around for
    // no reuse, hence one long function.
    let mut notes = Vec::new();
    if let Some(n) = busy_cores_note(sb, sc) {
        notes.push(n);
    }
    if let Some(n) = between_runs_note(data) {
        notes.push(n);
    }
    notes.extend(one_process_note(data, sb, sc));
    for (label, side) in [("baseline", sb), ("candidate", sc)] {
        if let Some(n) = bimodal_note(label, side) {
            notes.push(n);
        }
    }
    if let Some(p) = pairs {
        notes.push(format!(
            "paired by iteration ({} pairs, {} order): each change is the geometric mean of \
             the ratios of the candidate's to the baseline's rep of one iteration; its test \
             is the paired t test on those log ratios and the two-sample t test on the two \
             sides' logs ({}), combined by Simes, its interval where both intervals agree; \
             pass --unpaired for the two-sample test alone",
            p.len(),
            data[0].meta.order,
            super::compare::two_sample_words(opts.welch)
        ));
        if data[0].meta.order == "interleaved" {
            notes.push(
                "in interleaved order the baseline always runs first in an iteration; \
                 order = \"counterbalanced\" (ABBA) keeps a carry-over from one rep to the \
                 next out of the paired change"
                    .into(),
            );
        }
    }
    if !differences.is_empty() {
        let list: Vec<String> = differences
            .iter()
            .map(|d| format!("{} {} vs {}", d.field, d.baseline, d.candidate))
            .collect();
        notes.push(format!(
            "compared despite different workloads (forced): {}",
            list.join("; ")
        ));
    }
    if let Some(n) = few_pairs {
        notes.push(format!(
            "compared as independent samples: only {n} iterations have a successful rep of \
             both variants, and a paired comparison needs at least {0} (rerun with reps >= {0} \
             to pair them)",
            stats::MIN_REPS_FOR_CLAIM
        ));
    }
    if let Some(n) = params_origin_note(data) {
        notes.push(n);
    }
    notes.extend(recorder);
    let needed = stats::MIN_REPS_FOR_CLAIM;
    if sb.counts.used < needed || sc.counts.used < needed {
        notes.push(format!(
            "too few reps for a claim: {} (baseline) and {} (candidate) successful reps; a claim of significance needs at least {needed} per side, so rerun with reps >= {needed} (the headline says which spans separated in every rep)",
            sb.counts.used, sc.counts.used
        ));
    }
    if sb.counts.failed + sc.counts.failed > 0 {
        notes.push(format!(
            "{} failed rep(s) excluded ({} baseline, {} candidate); see the error column of runs.csv",
            sb.counts.failed + sc.counts.failed,
            sb.counts.failed,
            sc.counts.failed
        ));
    }
    if sb.scope != sc.scope {
        let what = |s: &Option<String>| match s {
            Some(s) => format!("ran {s} alone"),
            None => "ran the whole prover".to_string(),
        };
        notes.push(format!(
            "the baseline {}, the candidate {} (a GPU backend under the emulator runs \
             synthesis alone): compare their synthesis spans, not `prove` or its total",
            what(&sb.scope),
            what(&sc.scope)
        ));
    } else if let Some(s) = &sb.scope {
        notes.push(format!(
            "both sides ran {s} alone (a GPU backend under the emulator): `prove` holds \
             synthesis only"
        ));
    }
    if sb.counter_source != sc.counter_source {
        notes.push(format!(
            "instructions, branches and cycles not compared: the baseline's counters are {}, \
             the candidate's {}; counts of different sources are never compared",
            sb.counter_source, sc.counter_source
        ));
    } else if sb.counter_source.starts_with("emulated") {
        notes.push(format!(
            "instructions and branches are {}: exact counts of what ran, so one rep per \
             side decides; their change has no interval nor p-value, and a verdict when it \
             passes the noise floor ({}%) and {} events, what moves between runs. Times \
             under the emulator are the emulator's, not the machine's",
            sb.counter_source,
            opts.noise_floor * 100.0,
            super::compare::EXACT_MIN_DELTA
        ));
    }
    let mut unavailable: Vec<(String, String)> = Vec::new();
    for (k, kind) in COUNTERS.iter().enumerate() {
        if sb.counter_source.starts_with("emulated") && !sb.counter_available[k] {
            // Under the emulator only its own counts are recorded (see the note above).
            continue;
        }
        if !(sb.counter_available[k] && sc.counter_available[k]) {
            let reason = data
                .iter()
                .find_map(|d| {
                    d.meta
                        .counters
                        .get(kind.column())
                        .and_then(|a| a.reason.clone())
                })
                .unwrap_or_else(|| "not recorded on both sides".into());
            match unavailable.iter_mut().find(|(_, r)| *r == reason) {
                Some((cols, _)) => cols.push_str(&format!(", {}", kind.column())),
                None => unavailable.push((kind.column().into(), reason)),
            }
        }
    }
    for (cols, reason) in unavailable {
        notes.push(format!("counters not compared ({cols}): {reason}"));
    }
    notes
}

/// Share of a parent's self time above which the recorder's own cost is noted.
const RECORDER_NOTE_SHARE: f64 = 0.01;

/// How much of a parent span's self time is the recorder's own cost: each child's enter
/// and exit run on the parent's time, about one span cost each, at the cost of the path
/// the child came through (`crate::capture::costs::Via`): the native recorder's as
/// meta.json's `recorder.span_cost_ns` (measured at the run's start), every other path's
/// (`tracing`, protocol lines, NVTX, log lines) as its benchmark measured it. Notes the
/// parent where that share is largest, when it reaches [`RECORDER_NOTE_SHARE`]: many
/// children, or a short parent.
pub(super) fn recorder_cost_note(data: [&RunData; 2]) -> Option<String> {
    let mut cost = RecorderCost::default();
    for (i, d) in data.iter().enumerate() {
        if i == 1 && d.dir == data[0].dir {
            continue;
        }
        // Its sides were read before, so this read finds what they found.
        d.for_each_rep(|spans| cost.add_rep(d, spans)).ok()?;
    }
    cost.note()
}

/// [`recorder_cost_note`] a rep at a time: the parent with the largest share so far.
#[derive(Default)]
pub(super) struct RecorderCost {
    worst: Option<(f64, String)>,
}

impl RecorderCost {
    /// Adds the spans of one rep of the run `d` (parents and children are of one rep).
    pub(super) fn add_rep(&mut self, d: &RunData, spans: &[&SpanRow]) {
        use crate::capture::costs::Via;
        // Per parent: children per path, and whether a native child read counters.
        type Kids = std::collections::BTreeMap<&'static str, (u64, bool)>;
        let mut children: std::collections::HashMap<(u32, &str, u64), Kids> = Default::default();
        for &s in spans {
            if let Some(p) = s.parent_id {
                let via = Via::of_row_attrs(&s.attrs).as_str();
                let e = children
                    .entry((s.rep, s.variant.as_str(), p))
                    .or_default()
                    .entry(via)
                    .or_default();
                e.0 += 1;
                e.1 |= s.task_clock_ns.is_some() || s.instructions.is_some();
            }
        }
        for s in spans.iter().filter(|s| s.self_ns > 0) {
            let Some(kids) = children.get(&(s.rep, s.variant.as_str(), s.span_id)) else {
                continue;
            };
            let mut cost = 0.0;
            let mut parts = Vec::new();
            for (via, &(n, counted)) in kids {
                let via = Via::parse(via).unwrap_or(Via::Native);
                let (per, how) = match (via, &d.meta.recorder) {
                    (Via::Native, Some(rec)) => {
                        let per = match (counted, rec.span_cost_counters_ns) {
                            (true, Some(c)) => c,
                            _ => rec.span_cost_ns,
                        };
                        (
                            per,
                            format!("measured at the run's start, clock {}", rec.clock),
                        )
                    }
                    (Via::Native, None) => continue,
                    (v, _) => match v.measured_cost() {
                        Some(c) => (c.per_span_ns, c.measured.to_string()),
                        None => continue,
                    },
                };
                cost += n as f64 * per;
                parts.push(format!(
                    "{n} child spans ({}) at {} each ({how})",
                    via.as_str(),
                    crate::units::fmt_ns(per)
                ));
            }
            let share = cost / s.self_ns as f64;
            if share >= RECORDER_NOTE_SHARE && self.worst.as_ref().is_none_or(|w| share > w.0) {
                self.worst = Some((
                    share,
                    format!(
                        "recorder cost: about {:.1}% of `{}`'s self time ({} of {}, variant \
                         {}, rep {}) is the span recorder's own: {}; its children's enters \
                         and exits run on its time",
                        share * 100.0,
                        s.name,
                        crate::units::fmt_ns(cost),
                        crate::units::fmt_ns(s.self_ns as f64),
                        s.variant,
                        s.rep,
                        parts.join(", ")
                    ),
                ));
            }
        }
    }

    pub(super) fn note(self) -> Option<String> {
        self.worst.map(|w| w.1)
    }
}

/// A run's machine state at its start and at its end, where it recorded them.
fn machine_states(d: &RunData) -> Vec<crate::store::drift::MachineState> {
    d.meta
        .drift
        .as_ref()
        .map(|dr| {
            std::iter::once(dr.start.clone())
                .chain(dr.end.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// For the variants of one run: the highest 1-minute load average the run recorded, in
/// words, where it exceeded the cores the run could use; None otherwise (and for two
/// runs, whose loads [`runs_differ`] weighs). Both variants shared that load, so it
/// does not bias a paired comparison, but it widens every interval and can move a
/// rep's level from one pair to the next: the reader of the headline should know it.
pub(super) fn load_words(data: [&RunData; 2]) -> Option<String> {
    if !same_run(data[0], data[1]) {
        return None;
    }
    let cores = data[0].meta.host.cpu_cores;
    let hi = machine_states(data[0])
        .iter()
        .filter_map(|m| m.load_avg.map(|l| l[0]))
        .fold(f64::NEG_INFINITY, f64::max);
    (cores > 0 && hi > cores as f64).then(|| {
        format!(
            "the machine's load reached {hi:.1} on {cores} core{} during the run: other work \
             shared its cores, so times spread wider than on a quiet machine",
            if cores == 1 { "" } else { "s" }
        )
    })
}

/// Why two run folders' machines differed beyond what each run's own spread covers, in
/// words; None for variants of one run, or when neither run recorded its machine state
/// (older folders), or when the states agree.
///
/// Each run's state is taken at its start and its end, and each quantity's range over
/// those readings is the within-run drift the reps saw. Two runs differ when either ran
/// on a machine loaded beyond its cores (1-minute load average above the cores it could
/// use), or when the ranges are apart by more than a tolerance: the load by more than 0.5
/// and a fifth of the larger, the CPUs' median frequency or a GPU's SM clock by more than
/// 2%.
/// The reps' intervals cover only the spread within each run, so a change measured
/// across such runs can be the machine's.
pub(super) fn runs_differ(data: [&RunData; 2]) -> Option<String> {
    if same_run(data[0], data[1]) {
        return None;
    }
    let (a, b) = (machine_states(data[0]), machine_states(data[1]));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let range = |v: Vec<f64>| -> Option<(f64, f64)> {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo <= hi).then_some((lo, hi))
    };
    let apart = |x: (f64, f64), y: (f64, f64)| -> f64 {
        if x.1 < y.0 {
            y.0 - x.1
        } else if y.1 < x.0 {
            x.0 - y.1
        } else {
            0.0
        }
    };
    let mut why = Vec::new();
    let load = |s: &[crate::store::drift::MachineState]| {
        range(s.iter().filter_map(|m| m.load_avg.map(|l| l[0])).collect())
    };
    // A machine running more than it has cores shares them among other work from moment
    // to moment: what a run measured then depends on which work, and two such runs
    // differ by more than either run's spread shows.
    for (label, d, states) in [("baseline", data[0], &a), ("candidate", data[1], &b)] {
        let cores = d.meta.host.cpu_cores;
        if let (Some((_, hi)), true) = (load(states), cores > 0) {
            if hi > cores as f64 {
                why.push(format!(
                    "the {label} run's load reached {hi:.1} on {cores} core{}",
                    if cores == 1 { "" } else { "s" }
                ));
            }
        }
    }
    if let (Some(x), Some(y)) = (load(&a), load(&b)) {
        let tol = 0.5f64.max(0.2 * x.1.max(y.1));
        if apart(x, y) > tol {
            why.push(format!(
                "load {:.1}–{:.1} vs {:.1}–{:.1}",
                x.0, x.1, y.0, y.1
            ));
        }
    }
    let mhz = |s: &[crate::store::drift::MachineState]| {
        range(
            s.iter()
                .filter_map(|m| m.cpu_mhz.map(|c| c.median))
                .collect(),
        )
    };
    if let (Some(x), Some(y)) = (mhz(&a), mhz(&b)) {
        if apart(x, y) > 0.02 * x.1.max(y.1) {
            why.push(format!("CPU {:.0} vs {:.0} MHz", x.0, y.0));
        }
    }
    let sm = |s: &[crate::store::drift::MachineState]| {
        range(
            s.iter()
                .flat_map(|m| m.gpus.iter().filter_map(|g| g.sm_clock_mhz.map(f64::from)))
                .collect(),
        )
    };
    if let (Some(x), Some(y)) = (sm(&a), sm(&b)) {
        if apart(x, y) > 0.02 * x.1.max(y.1) {
            why.push(format!("GPU SM clock {:.0} vs {:.0} MHz", x.0, y.0));
        }
    }
    (!why.is_empty()).then(|| format!("the two runs' machines differed ({})", why.join("; ")))
}

#[cfg(test)]
mod recorder_cost_tests {
    use super::*;
    use crate::store::{Meta, SpanRow};

    fn run(children: u64, parent_self_ns: u64) -> RunData {
        let mut meta = Meta::sample();
        meta.recorder = Some(crate::trace::cost::RecorderMeta {
            clock: "tsc".into(),
            clock_reason: None,
            tsc_khz: None,
            clock_error_ns: None,
            clock_checks: 0,
            process_cpu: "interpolated".into(),
            process_cpu_sample_period_ns: 1_000_000,
            span_cost_ns: 20.0,
            span_cost_counters_ns: None,
        });
        let parent = SpanRow {
            span_id: 1,
            name: "parent".into(),
            self_ns: parent_self_ns,
            ..SpanRow::sample()
        };
        let kids = (0..children).map(|i| SpanRow {
            span_id: 2 + i,
            parent_id: Some(1),
            name: "child".into(),
            ..SpanRow::sample()
        });
        RunData {
            dir: "r".into(),
            meta,
            runs: vec![],
            spans: std::iter::once(parent).chain(kids).collect(),
            spans_on_disk: false,
        }
    }

    #[test]
    fn children_are_charged_at_the_cost_of_the_path_they_came_through() {
        // 1000 tracing children × 379 ns of a 10 ms self time: 3.8%, where the native
        // recorder's 20 ns would have said 0.2% (no note).
        let mut d = run(1000, 10_000_000);
        for s in d.spans.iter_mut().filter(|s| s.parent_id.is_some()) {
            s.attrs = r#"{"via":"tracing"}"#.into();
        }
        let n = recorder_cost_note([&d, &d]).expect("noted");
        assert!(n.contains("3.8% of `parent`"), "{n}");
        assert!(n.contains("(tracing) at 379 ns"), "{n}");
        // NVTX children: at the injection library's measured 665 ns, 6.7%.
        for s in d.spans.iter_mut().filter(|s| s.parent_id.is_some()) {
            s.attrs = r#"{"via":"nvtx"}"#.into();
        }
        let n = recorder_cost_note([&d, &d]).expect("noted");
        assert!(n.contains("6.7% of `parent`"), "{n}");
        assert!(n.contains("(nvtx) at 665 ns"), "{n}");
    }

    #[test]
    fn many_children_of_a_short_parent_are_noted_and_few_are_not() {
        // 1000 children × 20 ns = 20 µs of a 1 ms self time: 2%.
        let d = run(1000, 1_000_000);
        let n = recorder_cost_note([&d, &d]).expect("noted");
        assert!(n.contains("2.0% of `parent`"), "{n}");
        // 10 children: 200 ns of 1 ms, 0.02%.
        let d = run(10, 1_000_000);
        assert_eq!(recorder_cost_note([&d, &d]), None);
    }
}
