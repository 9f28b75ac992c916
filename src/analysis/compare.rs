//! Baseline against candidate on one metric: the [`Comparison`] record, what it measures
//! ([`Measure`], [`Unit`]) and the verdict rule ([`compare`]). Everything else in
//! analysis builds on this file; it depends only on the statistics.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::DiffOptions;
use crate::stats::{self, Interval, Sample};

/// Span label of whole-rep counter totals: the sum over every thread that recorded
/// spans (threads without spans, such as a library's own worker pool, are not counted).
pub const SPAN_THREADS: &str = "(span threads)";

/// Where the phase table's whole-rep counters were counted: every thread that recorded
/// a span, summed (a library's own thread pool without spans is not in it).
pub const THREADS_WITH_SPANS: &str = "threads with spans";

/// What a metric measures of a span.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum Measure {
    /// Duration, summed over the span's occurrences in a rep.
    Total,
    /// Duration minus the union of same-thread children (store's `self_ns`).
    SelfTime,
    /// Time covered by no child on any thread (gaps).
    Unattributed,
    /// Self time of the occurrences on the critical path (contributions).
    CriticalSelf,
    /// Time with a GPU kernel running inside the span (`gpu_busy_ns`, from CUPTI).
    GpuBusy,
    /// CPU time of the whole process over the span, every thread (`process_cpu_ns`).
    ProcessCpu,
    /// Process CPU time / wall: the cores the process kept busy over the span.
    BusyCores,
    /// A counter column (spans.csv name).
    Counter(String),
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Measure::Total => "total",
            Measure::SelfTime => "self",
            Measure::Unattributed => "unattributed",
            Measure::CriticalSelf => "critical_self",
            Measure::GpuBusy => "gpu_busy",
            Measure::ProcessCpu => "process_cpu",
            Measure::BusyCores => "busy_cores",
            Measure::Counter(c) => c,
        })
    }
}

impl From<Measure> for String {
    fn from(m: Measure) -> String {
        m.to_string()
    }
}

impl From<String> for Measure {
    fn from(s: String) -> Measure {
        match s.as_str() {
            "total" => Measure::Total,
            "self" => Measure::SelfTime,
            "unattributed" => Measure::Unattributed,
            "critical_self" => Measure::CriticalSelf,
            "gpu_busy" => Measure::GpuBusy,
            "process_cpu" => Measure::ProcessCpu,
            "busy_cores" => Measure::BusyCores,
            _ => Measure::Counter(s),
        }
    }
}

/// Unit of a metric's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Ns,
    Count,
    Bytes,
    /// Cores kept busy (CPU time / wall).
    Cores,
}

/// The outcome for one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The interval lies wholly above +noise floor and p < alpha.
    Regressed,
    /// The interval lies wholly below −noise floor and p < alpha.
    Improved,
    /// No change shown beyond the noise floor (this includes inconclusive intervals).
    Unchanged,
    /// A side has fewer reps than a verdict needs (`needed` per side).
    TooFewReps {
        needed: usize,
    },
    OnlyInBaseline,
    OnlyInCandidate,
}

impl Verdict {
    /// Regressed or improved.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Regressed | Verdict::Improved)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Regressed => f.write_str("regressed"),
            Verdict::Improved => f.write_str("improved"),
            Verdict::Unchanged => f.write_str("unchanged"),
            Verdict::TooFewReps { needed } => write!(f, "too few reps (need {needed}/side)"),
            Verdict::OnlyInBaseline => f.write_str("only in baseline"),
            Verdict::OnlyInCandidate => f.write_str("only in candidate"),
        }
    }
}

/// The thresholds a comparison's verdict was decided against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// The test value (q, or p for the primary comparison) had to be below this.
    pub alpha: f64,
    /// The relative interval had to clear ± this fraction.
    pub noise_floor: f64,
    /// The interval of the change in the metric's unit had to clear ± this.
    pub abs_floor: f64,
}

/// Location and spread of one side of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SideStats {
    pub reps: usize,
    pub median: Option<f64>,
    /// Median absolute deviation (unscaled), from 2 reps on.
    pub mad: Option<f64>,
}

impl SideStats {
    fn of(values: &[f64]) -> (SideStats, Option<Sample>) {
        let sample = Sample::new(values.to_vec()).ok();
        let stats = SideStats {
            reps: values.len(),
            median: sample
                .as_ref()
                .map(Sample::median)
                .or(values.first().copied()),
            mad: sample.as_ref().map(Sample::mad),
        };
        (stats, sample)
    }
}

/// Baseline against candidate on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub span: String,
    pub measure: Measure,
    pub unit: Unit,
    pub baseline: SideStats,
    pub candidate: SideStats,
    /// Candidate median − baseline median, in `unit`; when paired, the median of the
    /// per-pair differences (candidate − baseline of one iteration).
    pub delta: Option<f64>,
    /// `delta` / baseline median (0.02 = +2 %).
    pub relative: Option<f64>,
    /// Percentile bootstrap interval of `relative` (over resampled pairs, when paired).
    pub ci: Option<Interval>,
    /// Percentile bootstrap interval of `delta`, in `unit`, from the same resamples as
    /// `ci`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_ci: Option<Interval>,
    /// Two-sided p-value: Mann–Whitney U, or Wilcoxon signed-rank when paired.
    pub p_value: Option<f64>,
    /// Benjamini–Hochberg q-value over the diff's family of comparisons; for the
    /// end-to-end time, the primary comparison tested at its own alpha, its p-value.
    /// None outside a diff or without a p-value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_value: Option<f64>,
    /// What the verdict had to clear (set by [`decide`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Rule>,
    pub verdict: Verdict,
    /// Pairs compared, when the comparison is paired (see [`super::DiffOptions::paired`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    /// The values are deterministic (emulated counts, see [`compare_exact`]): the change
    /// is exact, with no interval nor p-value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
}

impl Comparison {
    /// The comparison's change statistic, in words (it labels every change printed).
    pub fn statistic(&self) -> &'static str {
        if self.pairs.is_some() {
            "median of per-pair differences"
        } else {
            "difference of medians"
        }
    }

    /// Paired, the median of the per-pair differences and the difference of the two
    /// medians can point opposite ways (neither is wrong: they answer different
    /// questions); true when both are non-zero and they do.
    pub fn medians_disagree(&self) -> bool {
        match (
            self.pairs,
            self.delta,
            self.baseline.median,
            self.candidate.median,
        ) {
            (Some(_), Some(d), Some(b), Some(k)) => d != 0.0 && k != b && (d > 0.0) != (k > b),
            _ => false,
        }
    }

    /// A comparison with its medians' change filled in and no verdict yet (unchanged).
    fn of_medians(
        span: &str,
        measure: Measure,
        unit: Unit,
        baseline: SideStats,
        candidate: SideStats,
        exact: bool,
    ) -> Comparison {
        let (delta, relative) = match (baseline.median, candidate.median) {
            (Some(b), Some(m)) => (Some(m - b), (b != 0.0).then(|| m / b - 1.0)),
            _ => (None, None),
        };
        Comparison {
            span: span.to_string(),
            measure,
            unit,
            baseline,
            candidate,
            delta,
            relative,
            ci: None,
            delta_ci: None,
            p_value: None,
            q_value: None,
            rule: None,
            verdict: Verdict::Unchanged,
            pairs: None,
            exact,
        }
    }
}

/// Compares per-rep values of one metric; with `pairs` (the (baseline, candidate) values
/// of reps of one iteration), through the per-pair differences.
///
/// The change statistic is the difference of medians, or, paired, the median of the
/// per-pair differences; the relative change is that statistic over the baseline median
/// (paired: the median of the paired reps' baseline values), and its interval is taken
/// resample by resample ([`stats::bootstrap_pairs`], [`stats::bootstrap_relative_change`]),
/// so it never falls below −100%. The verdict is [`decide`]'s, here on the comparison's
/// own p-value and the absolute floors that need no other comparison; the diff decides
/// again on the family's q-value and the floor relative to the end-to-end time.
pub(crate) fn compare(
    span: &str,
    measure: Measure,
    unit: Unit,
    base: &[f64],
    cand: &[f64],
    pairs: Option<&[(f64, f64)]>,
    opts: &DiffOptions,
) -> Comparison {
    let (bs, b_sample) = SideStats::of(base);
    let (cs, c_sample) = SideStats::of(cand);
    let mut c = Comparison::of_medians(span, measure, unit, bs, cs, false);
    c.verdict = match (base.is_empty(), cand.is_empty()) {
        (true, true) => Verdict::Unchanged,
        (false, true) => Verdict::OnlyInBaseline,
        (true, false) => Verdict::OnlyInCandidate,
        _ => Verdict::Unchanged,
    };
    let (Some(b), Some(k)) = (b_sample, c_sample) else {
        if !base.is_empty() && !cand.is_empty() {
            c.verdict = Verdict::TooFewReps {
                needed: stats::min_reps_for_verdict(opts.alpha),
            };
        }
        return c;
    };
    let seed = opts.seed
        ^ fnv1a(span.as_bytes())
        ^ fnv1a(c.measure.to_string().as_bytes()).rotate_left(17);
    let level = 1.0 - opts.alpha;
    let (needed, enough) = match pairs {
        Some(pairs) => {
            let d: Vec<f64> = pairs.iter().map(|(x, y)| y - x).collect();
            let needed = stats::min_pairs_for_verdict(opts.alpha);
            c.pairs = Some(pairs.len());
            c.p_value = Some(stats::signed_rank(&d).p_value);
            // With fewer than 2 pairs the change of medians stays (no verdict follows).
            if let Ok(d) = Sample::new(d) {
                let pb: Vec<f64> = pairs.iter().map(|p| p.0).collect();
                let base_median = stats::median(&pb).unwrap_or(0.0);
                c.delta = Some(d.median());
                c.relative = (base_median != 0.0).then(|| d.median() / base_median);
                if let Some(i) =
                    stats::bootstrap_pairs(pairs, opts.bootstrap_resamples, level, seed)
                {
                    c.delta_ci = Some(i.difference);
                    c.ci = i.relative.filter(|_| base_median != 0.0);
                }
            }
            (needed, pairs.len() >= needed)
        }
        None => {
            c.ci = stats::bootstrap_relative_change(&b, &k, opts.bootstrap_resamples, level, seed);
            c.delta_ci = stats::bootstrap_difference(&b, &k, opts.bootstrap_resamples, level, seed);
            c.p_value = Some(stats::mann_whitney(&b, &k).p_value);
            let needed = stats::min_reps_for_verdict(opts.alpha);
            (needed, b.len() >= needed && k.len() >= needed)
        }
    };
    if !enough {
        c.verdict = Verdict::TooFewReps { needed };
        return c;
    }
    let p = c.p_value.unwrap_or(1.0);
    decide(&mut c, p, abs_floor(unit, opts, None), opts);
    c
}

/// The smallest absolute change a verdict in `unit` must clear (see
/// [`DiffOptions::time_floor_ns`]): for times the larger of the fixed time floor and the
/// share of the baseline's median end-to-end time `end_to_end_ns`, for counts the count
/// floor, for cores the cores floor.
pub(crate) fn abs_floor(unit: Unit, opts: &DiffOptions, end_to_end_ns: Option<f64>) -> f64 {
    match unit {
        Unit::Ns => opts
            .time_floor_ns
            .max(opts.time_floor_fraction * end_to_end_ns.unwrap_or(0.0)),
        Unit::Count => opts.count_floor,
        Unit::Cores => opts.cores_floor,
        Unit::Bytes => 0.0,
    }
}

/// The verdict rule, on test p-value (or q-value) `p` and absolute floor `floor`:
/// regressed (improved) only when `p` < alpha, the 1 − alpha bootstrap interval of the
/// relative change lies wholly above +noise floor (below −noise floor), *and* the
/// interval of the change statistic in the metric's unit lies wholly above +`floor`
/// (below −`floor`); otherwise unchanged. A baseline median of 0 has no relative
/// change ("new"): the absolute interval alone decides. A relative interval with an
/// undefined bound (resamples of the baseline with median 0) gives no verdict. A
/// comparison without enough reps, or on one side only, keeps its verdict.
pub(crate) fn decide(c: &mut Comparison, p: f64, floor: f64, opts: &DiffOptions) {
    if c.exact
        || matches!(
            c.verdict,
            Verdict::TooFewReps { .. } | Verdict::OnlyInBaseline | Verdict::OnlyInCandidate
        )
    {
        return;
    }
    c.rule = Some(Rule {
        alpha: opts.alpha,
        noise_floor: opts.noise_floor,
        abs_floor: floor,
    });
    let clears = |lo: Option<f64>, hi: Option<f64>, f: f64| match (lo, hi) {
        (Some(lo), _) if lo > f => Some(true),
        (_, Some(hi)) if hi < -f => Some(false),
        _ => None,
    };
    let up_abs = match c.delta_ci {
        Some(i) => clears(i.lo, i.hi, floor),
        None => c.delta.and_then(|d| clears(Some(d), Some(d), floor)),
    };
    let up_rel = match (c.ci, c.baseline.median) {
        (Some(i), _) if i.is_defined() => clears(i.lo, i.hi, opts.noise_floor),
        (Some(_), _) => None,
        // No relative change from a zero baseline: the absolute interval decides.
        (None, Some(0.0)) => up_abs,
        (None, _) => None,
    };
    c.verdict = match (p < opts.alpha, up_rel, up_abs) {
        (true, Some(true), Some(true)) => Verdict::Regressed,
        (true, Some(false), Some(false)) => Verdict::Improved,
        _ => Verdict::Unchanged,
    };
}

/// Smallest absolute change of an emulated count that a verdict reports. The emulator
/// counts exactly what ran, but what runs moves a little between runs (allocator state,
/// how often a waiting thread loops): two runs of experiments/gadget_emulated.toml
/// differed by at most 4,489 instructions in any span (`gpu_prove`'s 12.8 M; 420 in
/// synthesis's 56 M), and spans of a few thousand instructions by up to 14% of
/// themselves (evidence/gadget/gadget_emulated/README.md).
pub const EXACT_MIN_DELTA: f64 = 10_000.0;

/// Compares a metric whose values are deterministic: instructions and branches counted by
/// an emulator, which gives the same count for the same code and input up to the small
/// run-to-run differences of [`EXACT_MIN_DELTA`]. One rep per side decides. The change
/// is the change of medians, with no interval and no p-value, since there is no sampling
/// noise to bound. The verdict is by the noise floor alone: regressed (improved) when the
/// relative change exceeds +noise floor (is below −noise floor) and the absolute change
/// exceeds [`EXACT_MIN_DELTA`]; a rise from a baseline of 0 past that is regressed.
pub(crate) fn compare_exact(
    span: &str,
    measure: Measure,
    unit: Unit,
    base: &[f64],
    cand: &[f64],
    opts: &DiffOptions,
) -> Comparison {
    let (bs, _) = SideStats::of(base);
    let (cs, _) = SideStats::of(cand);
    let mut c = Comparison::of_medians(span, measure, unit, bs, cs, true);
    c.verdict = match (bs.median, cs.median) {
        (Some(b), Some(m)) => match c.relative {
            _ if (m - b).abs() <= EXACT_MIN_DELTA => Verdict::Unchanged,
            Some(r) if r > opts.noise_floor => Verdict::Regressed,
            Some(r) if r < -opts.noise_floor => Verdict::Improved,
            Some(_) => Verdict::Unchanged,
            None => Verdict::Regressed,
        },
        (Some(_), None) => Verdict::OnlyInBaseline,
        (None, Some(_)) => Verdict::OnlyInCandidate,
        (None, None) => Verdict::Unchanged,
    };
    c
}

pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod exact_tests {
    use super::*;

    #[test]
    fn deterministic_counts_give_an_exact_change_decided_by_the_noise_floor_alone() {
        let o = DiffOptions::default();
        let m = || Measure::Counter("instructions".into());
        // One rep per side: 13,670,323 against 12,459,840 is -8.86 %, past the 1 % floor.
        let c = compare_exact(
            "synthesis",
            m(),
            Unit::Count,
            &[13_670_323.0],
            &[12_459_840.0],
            &o,
        );
        assert_eq!(c.verdict, Verdict::Improved);
        assert_eq!(c.delta, Some(-1_210_483.0));
        assert!(
            (c.relative.unwrap() + 0.08855).abs() < 1e-4,
            "{:?}",
            c.relative
        );
        assert!(c.ci.is_none() && c.p_value.is_none() && c.exact);
        // Inside the relative floor: unchanged however exact.
        let c = compare_exact("s", m(), Unit::Count, &[3e6], &[3.015e6], &o);
        assert_eq!(c.verdict, Verdict::Unchanged);
        let c = compare_exact("s", m(), Unit::Count, &[3e6, 3e6], &[3.06e6], &o);
        assert_eq!(c.verdict, Verdict::Regressed);
        // Past the relative floor but within the run-to-run movement: unchanged.
        let c = compare_exact("drop", m(), Unit::Count, &[3214.0], &[3504.0], &o);
        assert_eq!(c.verdict, Verdict::Unchanged);
        let c = compare_exact("s", m(), Unit::Count, &[0.0], &[3e4], &o);
        assert_eq!((c.verdict, c.relative), (Verdict::Regressed, None));
        let c = compare_exact("s", m(), Unit::Count, &[], &[3.0], &o);
        assert_eq!(c.verdict, Verdict::OnlyInCandidate);
        // The statistical rule would refuse a verdict on one rep per side.
        let s = compare("s", m(), Unit::Count, &[1000.0], &[2000.0], None, &o);
        assert!(matches!(s.verdict, Verdict::TooFewReps { .. }) && !s.exact);
    }
}
