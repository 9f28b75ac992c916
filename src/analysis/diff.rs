//! [`diff_runs`]: assembles the whole [`Diff`] from per-metric comparisons
//! ([`super::compare`]), gaps and contributions ([`super::gaps`]).

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::compare::{
    add_between_runs, compare, compare_exact, Comparison, Measure, Unit, SPAN_THREADS,
    THREADS_WITH_SPANS,
};
use super::diff_notes::{alternates, load_words, notes, runs_differ};
use super::family;
use super::gaps;
use super::headline::headline;
use super::select::{present, same_run, variant, workload_differences, Pairs, Side, COUNTERS};
use super::{Diff, DiffError, DiffOptions, DiffSide, Excluded, PhaseRow, SideInfo, SideLeak};
use crate::counters::CounterKind;
use crate::phases::PhaseSpec;
use crate::stats;
use crate::store::{RunData, Shared, VariantMeta};

/// Suffix of a counter measure that adds a span's descendants on other threads.
pub const WITH_THREADS: &str = " (with threads)";

/// End-to-end time split by the variant of the rep that ran just before (variants of one
/// run in alternating order). Memory, caches or a background task one rep leaves behind
/// show up here. The paired change measures each rep's own cost. A candidate that slows
/// the rep after it does so in every rep of a run that uses it throughout, which the
/// `steady` comparison estimates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CarryOver {
    /// Baseline reps after a baseline rep (baseline side) against baseline reps after a
    /// candidate rep (candidate side).
    pub baseline: Comparison,
    /// Candidate reps after a baseline rep (baseline side) against candidate reps after
    /// a candidate rep (candidate side). With [`CarryOver::baseline`]: a positive change
    /// in both says a candidate rep slows the rep after it, whichever variant that is.
    pub candidate: Comparison,
    /// Baseline reps after a baseline rep against candidate reps after a candidate rep:
    /// the change when every rep runs one variant.
    pub steady: Comparison,
}

fn side_info(data: &RunData, v: &VariantMeta) -> SideInfo {
    SideInfo {
        run_dir: data.dir.clone(),
        experiment: data.meta.experiment.clone(),
        run_id: data.meta.run_id.clone(),
        variant: v.name.clone(),
        backend: v.backend.clone(),
        knobs: v.knobs.clone(),
    }
}

fn counter_unit(k: CounterKind) -> Unit {
    if k == CounterKind::TaskClockNs {
        Unit::Ns
    } else {
        Unit::Count
    }
}

/// A metric's per-rep values on both sides (None where a rep has no value), before the
/// statistics.
struct Spec {
    span: String,
    measure: Measure,
    unit: Unit,
    base: Vec<Option<f64>>,
    cand: Vec<Option<f64>>,
    /// Deterministic values (emulated counts): compared by [`compare_exact`].
    exact: bool,
}

/// Span rows (both runs together) past which [`diff_runs`] builds its two sides in turn
/// rather than at once: about 250 MB of maps a side at 2,000,000 spans.
const SIDES_IN_TURN_SPANS: usize = 1_000_000;

/// Compares variant `base_variant` of `base` (baseline) against `cand_variant` of `cand`
/// (candidate). Pass the same [`RunData`] twice to compare variants of one run.
///
/// Long because it is the diff's one assembly line, in pipeline order: the sides, the
/// specs of every metric, their comparisons, gaps and contributions, the family's
/// judgement, the tables, the headline and the notes; each step is a call into the
/// module that owns it, and splitting the sequence would only pass its locals around.
pub fn diff_runs(
    base: &RunData,
    base_variant: &str,
    cand: &RunData,
    cand_variant: &str,
    opts: &DiffOptions,
) -> Result<Diff, DiffError> {
    opts.validate()?;
    let (va, vb) = (variant(base, base_variant)?, variant(cand, cand_variant)?);
    // The phases of the baseline's run name the phase table's rows.
    let phases = base.meta.phases();
    if base_variant == cand_variant && same_run(base, cand) {
        return Err(DiffError::SameVariant(base_variant.into()));
    }
    let workload_differences = workload_differences(base, va, cand, vb);
    if !workload_differences.is_empty() && !opts.force {
        return Err(DiffError::WorkloadMismatch {
            differences: workload_differences,
        });
    }
    // Each side's build holds maps of its spans (by id, children, the critical-path
    // memo) until it ends: for runs of millions of spans the two are built one after
    // the other, so that only one side's maps are held beside the rows at a time (and,
    // where the spans are read from the folder a rep at a time, one rep's rows).
    let rows = match std::ptr::eq(base, cand) {
        true => base.spans.len(),
        false => base.spans.len() + cand.spans.len(),
    };
    let on_disk = base.spans_on_disk || cand.spans_on_disk;
    let mut recorder = None;
    let (sb, sc) = if on_disk && same_run(base, cand) {
        // Both sides and the recorder's cost from one reading of the folder.
        let mut cost = super::diff_notes::RecorderCost::default();
        let (sb, sc) = Side::build_pair(base, base_variant, cand_variant, |spans| {
            cost.add_rep(base, spans)
        })?;
        recorder = Some(cost.note());
        (Ok(sb), Ok(sc))
    } else if rows > SIDES_IN_TURN_SPANS || on_disk {
        (
            Side::build(base, base_variant),
            Side::build(cand, cand_variant),
        )
    } else {
        rayon::join(
            || Side::build(base, base_variant),
            || Side::build(cand, cand_variant),
        )
    };
    let (sb, sc) = (sb?, sc?);
    for (data, v, s) in [(base, base_variant, &sb), (cand, cand_variant, &sc)] {
        if s.counts.used == 0 {
            return Err(DiffError::NoReps {
                run: data.dir.clone(),
                variant: v.into(),
                failed: s.counts.failed,
                warmup: s.counts.warmup,
            });
        }
    }

    let mut names: Vec<&str> = sb.names.iter().map(Shared::as_str).collect();
    let known: HashSet<&str> = names.iter().copied().collect();
    names.extend((sc.names.iter().map(Shared::as_str)).filter(|n| !known.contains(n)));
    // Counts of different sources (emulated against hardware, or two emulator versions)
    // are never compared.
    let same_source = sb.counter_source == sc.counter_source;
    let exact = same_source && sb.counter_source.starts_with("emulated");
    let counters: Vec<usize> = (0..COUNTERS.len())
        .filter(|&k| sb.counter_available[k] && sc.counter_available[k])
        .filter(|&k| same_source || !COUNTERS[k].is_hardware())
        .collect();

    let mut specs = Vec::new();
    for &name in &names {
        for (measure, f) in [
            (
                Measure::Total,
                (|a| a.total_ns) as fn(&super::select::Agg) -> u64,
            ),
            (Measure::SelfTime, |a| a.self_ns),
        ] {
            specs.push(Spec {
                span: name.into(),
                measure,
                unit: Unit::Ns,
                base: sb.times(name, f),
                cand: sc.times(name, f),
                exact: false,
            });
        }
        let (gb, gc) = (sb.span_gpu_busy(name), sc.span_gpu_busy(name));
        if gb.iter().any(Option::is_some) && gc.iter().any(Option::is_some) {
            specs.push(Spec {
                span: name.into(),
                measure: Measure::GpuBusy,
                unit: Unit::Ns,
                base: gb,
                cand: gc,
                exact: false,
            });
        }
        let (pb, pc) = (sb.span_process_cpu(name), sc.span_process_cpu(name));
        if pb.iter().any(Option::is_some) && pc.iter().any(Option::is_some) {
            specs.push(Spec {
                span: name.into(),
                measure: Measure::ProcessCpu,
                unit: Unit::Ns,
                base: pb,
                cand: pc,
                exact: false,
            });
            specs.push(Spec {
                span: name.into(),
                measure: Measure::BusyCores,
                unit: Unit::Cores,
                base: sb.span_busy_cores(name),
                cand: sc.span_busy_cores(name),
                exact: false,
            });
        }
        for &k in &counters {
            specs.push(Spec {
                span: name.into(),
                measure: Measure::Counter(COUNTERS[k].column().into()),
                unit: counter_unit(COUNTERS[k]),
                base: sb.span_counter(name, k),
                cand: sc.span_counter(name, k),
                exact,
            });
        }
    }
    // Emulated counts of the review phases with their work on other threads (synthesis
    // with its synthesis[i] on workers), for the phase table.
    if exact {
        for name in phases.review.iter().filter(|n| names.contains(&n.as_str())) {
            for &k in &counters {
                specs.push(Spec {
                    span: name.clone(),
                    measure: Measure::Counter(format!("{}{WITH_THREADS}", COUNTERS[k].column())),
                    unit: counter_unit(COUNTERS[k]),
                    base: sb.span_tree_counter(name, k),
                    cand: sc.span_tree_counter(name, k),
                    exact,
                });
            }
        }
    }
    for &k in &counters {
        specs.push(Spec {
            span: SPAN_THREADS.into(),
            measure: Measure::Counter(COUNTERS[k].column().into()),
            unit: counter_unit(COUNTERS[k]),
            base: sb.thread_total(k),
            cand: sc.thread_total(k),
            exact,
        });
    }
    // Pairing needs as many pairs as a claim needs reps (4); fewer are compared as
    // independent samples.
    let alternating = same_run(base, cand) && alternates(&base.meta.order);
    let pairable = (opts.paired && alternating).then(|| Pairs::of(&sb, &sc));
    let few_pairs = pairable
        .as_ref()
        .map(Pairs::len)
        .filter(|&n| n < stats::MIN_REPS_FOR_CLAIM);
    let pairs = pairable.filter(|_| few_pairs.is_none());
    let mut metrics: Vec<Comparison> = specs
        .into_par_iter()
        .map(|s| {
            if s.exact {
                let (b, c) = (present(&s.base), present(&s.cand));
                return compare_exact(&s.span, s.measure, s.unit, &b, &c, opts);
            }
            let paired = pairs.as_ref().map(|p| p.values(&s.base, &s.cand));
            compare(
                &s.span,
                s.measure,
                s.unit,
                &present(&s.base),
                &present(&s.cand),
                paired.as_deref(),
                opts,
            )
        })
        .collect();
    // A metric no rep of either side has is no row.
    metrics.retain(|c| c.baseline.reps + c.candidate.reps > 0);
    // Two run folders: each side's reps share their run's level, which differs from run
    // to run by more than the reps' spread shows.
    if !same_run(base, cand) {
        for c in &mut metrics {
            add_between_runs(c, opts.between_runs, opts);
        }
    }

    let mut contributions = gaps::contributions(&sb, &sc, &names, pairs.as_ref(), opts);
    let mut carry_over = alternating
        .then(|| {
            carry_over(
                base,
                &sb,
                &sc,
                base_variant,
                cand_variant,
                &contributions,
                opts,
            )
        })
        .flatten();
    let mut gaps = gaps::gaps(&sb, &sc, &names, pairs.as_ref(), opts);
    let family = family::judge(
        &mut metrics,
        &mut contributions,
        &mut gaps,
        carry_over
            .as_mut()
            .map(|c| vec![&mut c.baseline, &mut c.candidate, &mut c.steady])
            .unwrap_or_default(),
        // Two runs whose machines differed beyond what either run's spread covers:
        // neither a change nor its absence is shown, and the reason stands beside each.
        runs_differ([base, cand]).as_deref(),
        opts,
    );
    let backend = (va.backend == vb.backend).then_some(va.backend.as_str());
    let phase_table = phase_table(&metrics, &contributions.total, &counters, backend, phases);
    let leaf_spans: Vec<String> = names
        .iter()
        .filter(|n| !sb.wrappers.contains(**n) && !sc.wrappers.contains(**n))
        .map(|n| n.to_string())
        .collect();
    let mut headline = headline(
        &metrics,
        &contributions,
        &leaf_spans,
        stats::MIN_REPS_FOR_CLAIM,
    );
    headline.family = family;
    headline.load = load_words([base, cand]);
    headline.swing = pairs.as_ref().and_then(|p| {
        let as_f64 = |v: &[u64]| v.iter().map(|&t| t as f64).collect::<Vec<_>>();
        let v = p.values_all(&as_f64(&sb.root_total_ns), &as_f64(&sc.root_total_ns));
        swing_words(&v, &headline.end_to_end)
    });
    if sb.scope != sc.scope {
        // One side ran synthesis alone: the largest scope both ran is synthesis.
        if let Some(c) = metrics
            .iter()
            .find(|c| Some(&c.span) == phases.partial.as_ref() && c.measure == Measure::Total)
        {
            headline.end_to_end = c.clone();
        }
    }
    let mut notes = notes(
        [base, cand],
        &sb,
        &sc,
        &workload_differences,
        pairs.as_ref(),
        few_pairs,
        recorder.unwrap_or_else(|| super::diff_notes::recorder_cost_note([base, cand])),
        opts,
    );
    notes.extend(super::diff_notes::far_out_note(&metrics));
    let leaks = [
        (DiffSide::Baseline, base, base_variant),
        (DiffSide::Candidate, cand, cand_variant),
    ]
    .into_iter()
    .flat_map(|(side, data, v)| {
        crate::telemetry::leak_flags(data)
            .into_iter()
            .filter(move |f| f.variant == v)
            .map(move |flag| SideLeak { side, flag })
    })
    .collect();
    let mut d = Diff {
        baseline: side_info(base, va),
        candidate: side_info(cand, vb),
        options: opts.clone(),
        headline,
        workload: base.meta.workload.clone(),
        workload_differences,
        excluded: Excluded {
            baseline: sb.counts,
            candidate: sc.counts,
        },
        reps_needed: stats::MIN_REPS_FOR_CLAIM,
        pairs: pairs.as_ref().map(Pairs::len),
        carry_over,
        phase_table,
        metrics,
        leaf_spans,
        gaps,
        contributions,
        notes,
        leaks,
    };
    // A run that stopped when its answer was known: its watched rows are judged on the
    // confidence sequences it stopped on, which hold at a stop chosen by looking.
    if same_run(base, cand) && base.meta.until_decided.is_some() {
        super::sequential::apply(&mut d, opts);
    }
    Ok(d)
}

/// Where the pairs' level (the mean log of each pair's two reps) swung over the run by
/// more than the end-to-end change named, the swing in words. Pairing cancels what both
/// reps of a pair share; a swing that falls inside a pair lands on one variant, and one
/// larger than the change could have set its sign.
fn swing_words(pairs: &[(f64, f64)], total: &Comparison) -> Option<String> {
    let rel = total.relative?;
    if !total.verdict.is_change() || pairs.len() < 2 {
        return None;
    }
    let levels: Vec<f64> = pairs
        .iter()
        .filter(|(b, c)| *b > 0.0 && *c > 0.0)
        .map(|(b, c)| (b.ln() + c.ln()) / 2.0)
        .collect();
    let lo = levels.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = levels.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let swing = (hi - lo).exp() - 1.0;
    (swing.is_finite() && swing > rel.abs()).then(|| {
        format!(
            "the run's level swung {:.0}% between its pairs, more than this change ({:+.1}%): \
             pairing cancels a swing both reps of a pair share, not one inside a pair",
            swing * 100.0,
            rel * 100.0
        )
    })
}

/// The hand-written table of every review: the prover's phases, the end-to-end total,
/// then whole-rep counters (hardware ones where the CPU has them, else the software ones).
/// Phases are the run's ([`PhaseSpec`]), labelled for `backend`.
fn phase_table(
    metrics: &[Comparison],
    total: &Comparison,
    counters: &[usize],
    backend: Option<&str>,
    phases: &PhaseSpec,
) -> Vec<PhaseRow> {
    // One function for the table, its rows built in the order they print: the phases,
    // the busy cores in the backend call and end to end, then the counters.
    let find = |span: &str, m: &Measure| {
        metrics
            .iter()
            .find(|c| c.span == span && &c.measure == m)
            .cloned()
    };
    let mut rows: Vec<PhaseRow> = phases
        .review
        .iter()
        .filter_map(|span| {
            find(span, &Measure::Total).map(|comparison| PhaseRow {
                phase: phases.label(span, backend),
                comparison,
            })
        })
        .collect();
    rows.push(PhaseRow {
        phase: format!("end to end ({})", total.span),
        comparison: total.clone(),
    });
    // The cores the whole process kept busy (every thread, a library's own included)
    // in the backend call and end to end, where the process CPU time was recorded.
    let wrapper = phases
        .wrapper
        .as_deref()
        .map(|w| (w, phases.label(w, backend)));
    let end_to_end = (total.span.as_str(), format!("end to end ({})", total.span));
    for (span, label) in wrapper.into_iter().chain([end_to_end]) {
        if let Some(comparison) = find(span, &Measure::BusyCores) {
            rows.push(PhaseRow {
                phase: format!("{label} busy cores"),
                comparison,
            });
        }
    }
    let hw: Vec<usize> = [CounterKind::Instructions, CounterKind::Branches]
        .iter()
        .map(|&k| k as usize)
        .filter(|k| counters.contains(k))
        .collect();
    let chosen = if hw.is_empty() {
        [
            CounterKind::TaskClockNs,
            CounterKind::PageFaults,
            CounterKind::ContextSwitches,
        ]
        .iter()
        .map(|&k| k as usize)
        .filter(|k| counters.contains(k))
        .collect()
    } else {
        hw
    };
    // Emulated counts: each phase's instructions and branches, worker threads included.
    for span in &phases.review {
        for k in &chosen {
            let m = Measure::Counter(format!("{}{WITH_THREADS}", COUNTERS[*k].column()));
            if let Some(comparison) = find(span, &m) {
                rows.push(PhaseRow {
                    phase: format!("{span} {}", COUNTERS[*k].column()),
                    comparison,
                });
            }
        }
    }
    for k in chosen {
        let column = COUNTERS[k].column();
        if let Some(comparison) = find(SPAN_THREADS, &Measure::Counter(column.into())) {
            rows.push(PhaseRow {
                phase: format!("{column} ({THREADS_WITH_SPANS})"),
                comparison,
            });
        }
    }
    rows
}

/// The end-to-end time of each side's reps by the variant of the rep before (see
/// [`CarryOver`]); None unless each side has at least 2 reps after either variant
/// (interleaved order never runs a variant after itself).
fn carry_over(
    data: &RunData,
    sb: &Side,
    sc: &Side,
    base_variant: &str,
    cand_variant: &str,
    contributions: &gaps::Contributions,
    opts: &DiffOptions,
) -> Option<CarryOver> {
    let before: HashMap<u32, &str> = data
        .runs
        .iter()
        .map(|r| (r.rep + 1, r.variant.as_str()))
        .collect();
    // The side's end-to-end times of reps that follow a rep of `prev`.
    let after = |side: &Side, prev: &str| -> Vec<f64> {
        side.reps
            .iter()
            .zip(&side.root_total_ns)
            .filter(|(rep, _)| before.get(*rep) == Some(&prev))
            .map(|(_, &t)| t as f64)
            .collect()
    };
    let span = &contributions.total.span;
    let cmp = |b: &[f64], c: &[f64]| compare(span, Measure::Total, Unit::Ns, b, c, None, opts);
    let (bb, bc) = (after(sb, base_variant), after(sb, cand_variant));
    let (cc, cb) = (after(sc, cand_variant), after(sc, base_variant));
    if [&bb, &bc, &cc, &cb].iter().any(|g| g.len() < 2) {
        return None;
    }
    Some(CarryOver {
        baseline: cmp(&bb, &bc),
        candidate: cmp(&cb, &cc),
        steady: cmp(&bb, &cc),
    })
}

#[cfg(test)]
mod swing_tests {
    use super::*;
    use crate::analysis::synthetic::SyntheticRun;
    use crate::analysis::Verdict;

    #[test]
    fn a_swing_between_pairs_larger_than_the_change_is_said_beside_it() {
        let data = SyntheticRun::new().build();
        let d = diff_runs(
            &data,
            "baseline",
            &data,
            "candidate",
            &DiffOptions::default(),
        )
        .unwrap();
        let mut total = d.headline.end_to_end.clone();
        total.verdict = Verdict::Regressed;
        total.relative = Some(0.05);
        // Pairs at 1.0 s and, later, at 1.5 s: a 50% swing against a 5% change.
        let pairs = [(1.00e9, 1.05e9), (1.02e9, 1.07e9), (1.50e9, 1.57e9)];
        let w = swing_words(&pairs, &total).unwrap();
        assert!(
            w.starts_with(
                "the run's level swung 50% between its pairs, more than this change (+5.0%)"
            ),
            "{w}"
        );
        // A steady run, or no change named: nothing to say.
        assert!(swing_words(&[(1.0e9, 1.05e9), (1.01e9, 1.06e9)], &total).is_none());
        total.verdict = Verdict::Inconclusive;
        assert!(swing_words(&pairs, &total).is_none());
    }
}
