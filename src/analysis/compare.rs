//! Baseline against candidate on one metric: the [`Comparison`] record, what it measures
//! ([`Measure`], [`Unit`]) and the verdict rule ([`compare`]). Everything else in
//! analysis builds on this file; it depends on the statistics and the diff's options
//! (`DiffOptions`) alone.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Ns,
    Count,
    Bytes,
    /// Cores kept busy (CPU time / wall).
    Cores,
}

/// The outcome for one metric: four words, and two for a span on one side only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The test passed (q, or p for end to end, below alpha) and the whole interval lies
    /// above +floor, on the relative and the absolute scale.
    Regressed,
    /// The same, below −floor.
    Improved,
    /// The whole 1 − alpha interval lies inside ±floor on the relative or the absolute
    /// scale: the change is shown not to matter.
    Equivalent,
    /// Anything else: this run does not resolve it (with the reps that would, where an
    /// estimate exists, and why).
    #[serde(alias = "unchanged", alias = "too_few_reps")]
    Inconclusive,
    /// Measured in the candidate's reps only.
    #[serde(alias = "only_in_candidate")]
    New,
    /// Measured in the baseline's reps only.
    #[serde(alias = "only_in_baseline")]
    Gone,
}

impl Verdict {
    /// Regressed or improved.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Regressed | Verdict::Improved)
    }

    /// New or gone: on one side only.
    pub fn one_sided(self) -> bool {
        matches!(self, Verdict::New | Verdict::Gone)
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::Equivalent => "equivalent",
            Verdict::Inconclusive => "inconclusive",
            Verdict::New => "new",
            Verdict::Gone => "gone",
        })
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
    /// Geometric mean (of the values plus the unit's log offset, minus it again): the
    /// location the change statistic compares.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gmean: Option<f64>,
}

impl SideStats {
    fn of(values: &[f64], unit: Unit) -> SideStats {
        let sample = Sample::new(values.to_vec()).ok();
        let off = log_offset(unit);
        SideStats {
            reps: values.len(),
            median: sample
                .as_ref()
                .map(Sample::median)
                .or(values.first().copied()),
            mad: sample.as_ref().map(Sample::mad),
            gmean: (!values.is_empty()).then(|| {
                let l: Vec<f64> = values.iter().map(|&v| log_of(v, off)).collect();
                (l.iter().sum::<f64>() / l.len() as f64).exp() - off
            }),
        }
    }
}

/// What is added to a metric's values before their log, so that a zero has one: the
/// smallest amount of the unit that matters (1 µs, one event, 0.01 cores). For values far
/// above it the change is the ratio of geometric means; values near it count as near 0.
pub fn log_offset(unit: Unit) -> f64 {
    match unit {
        Unit::Ns => 1_000.0,
        Unit::Count | Unit::Bytes => 1.0,
        Unit::Cores => 0.01,
    }
}

fn log_of(v: f64, offset: f64) -> f64 {
    (v.max(0.0) + offset).ln()
}

/// The tests behind a comparison, on the log of the values (plus [`log_offset`]): what
/// its change and its intervals at any level are computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogTests {
    /// Added to every value before its log.
    pub offset: f64,
    /// exp(mean log(baseline + offset)).
    pub base_gm: f64,
    /// The two-sample t test on the two sides' logs (every rep that has the metric):
    /// Student's pooled test where the sides have as many reps, else Welch's
    /// ([`DiffOptions::welch`] asks for Welch's always).
    #[serde(alias = "welch")]
    pub unpaired: stats::TTest,
    /// `unpaired` is Student's pooled test (n_a + n_b − 2 degrees of freedom).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pooled: bool,
    /// The same two-sample test without the far-out values of either side
    /// ([`without_far_out`]), where a value is far out; it then replaces `unpaired` in
    /// the verdict: one rep 3× slower among five widens a t interval by the square of
    /// its distance and hides any change the others show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trimmed: Option<stats::TTest>,
    /// One-sample t on the per-pair log ratios, when the run paired the reps (at least
    /// [`stats::MIN_REPS_FOR_CLAIM`] pairs).
    pub paired: Option<stats::TTest>,
    /// The signed-rank test of the per-pair log ratios with its Hodges–Lehmann estimate
    /// and interval, in place of the paired t test where the ratios have a far value
    /// ([`far_out`]), from [`PAIRED_FROM`] pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<stats::SignedRankShift>,
    /// The spread of a run's level between runs ([`DiffOptions::between_runs`]) that
    /// Welch's test carries (its variance added twice) when the sides are two run
    /// folders; 0 for variants of one run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub between_runs: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// How far from the median of the per-pair log ratios, in robust spreads (1.4826 ×
/// MAD), a ratio is far out: a rep disturbed as a whole (3× slower: a ratio of ln 3 ≈
/// 1.1 among ratios of a few hundredths) is 20 spreads out; among normal ratios one
/// beyond 6 spreads is rare (the MAD of 8 values can be half the true spread, so about
/// 1 in 10 runs of 8 pairs, fewer of more).
pub const FAR_OUT_SPREADS: f64 = 6.0;

/// How near the other side's median, in the same robust spreads, a value far from its
/// own side's median is still kept (the other side's typical rep).
pub const NEAR_OTHER_SPREADS: f64 = 4.0;

/// Whether any of `d` lies more than [`FAR_OUT_SPREADS`] robust spreads from their
/// median; with a MAD of 0 (most ratios equal), whether any differs from the median.
/// The rule sees only the distances from the median, not on which side a ratio lies,
/// so under no change it picks the test independently of the sign the tests judge.
pub fn far_out(d: &[f64]) -> bool {
    let Some(med) = stats::median(d) else {
        return false;
    };
    let dev: Vec<f64> = d.iter().map(|x| (x - med).abs()).collect();
    let mad = stats::median(&dev).unwrap_or(0.0);
    let limit = FAR_OUT_SPREADS * 1.4826 * mad;
    dev.iter().any(|&x| x > limit && x > 1e-12)
}

/// The two sides' logs without their far-out values: those more than
/// [`FAR_OUT_SPREADS`] robust spreads from their own side's median and more than
/// [`NEAR_OTHER_SPREADS`] from the other side's, the spread taken over both sides'
/// non-zero distances from their medians (so a change between the sides is not a
/// spread). A value near the other side's typical rep is kept: where reps fall into two
/// modes (a machine slow in a third of them), the minority mode of one side is the
/// majority of the other, and leaving it out would turn the luck of the draw into a
/// change (at 5 reps a side, two modes 8% apart in 35% of reps, 1% spread: p < 0.01 in
/// 2.6% of A/A comparisons, 1.2% with nothing left out, 1.3% under this rule). Nearer
/// than the far-out limit, because a rep disturbed as a whole can land near a changed
/// side's median by chance (3× slower against a candidate 2.7× slower: kept at 6
/// spreads, it left a 2.7× change unnamed in 10% of simulated diffs at 5 reps a side,
/// 8% at 4 spreads; evidence/verdicts/sim). `None` where no value is far out, or where more than a fifth of a side
/// (at least one) would go: several far-out values on one side may be the change itself
/// (a candidate that stalls in two reps of five), which the full test is left to judge.
/// The rule reads distances from each side's own median, never which side is higher, so
/// under no change it leaves out values of either side alike.
pub fn without_far_out(base: &[f64], cand: &[f64]) -> Option<(Vec<f64>, Vec<f64>)> {
    let mb = stats::median(base)?;
    let mc = stats::median(cand)?;
    let dev: Vec<f64> = base
        .iter()
        .map(|x| (x - mb).abs())
        .chain(cand.iter().map(|x| (x - mc).abs()))
        // A side's median value is 0 from itself (one of five): counted, it would
        // shrink the spread and leave out ordinary values (A/A p < 0.01 in 1.4% of
        // draws at 5 reps a side instead of 1.1%).
        .filter(|&d| d > 1e-12)
        .collect();
    let spread = 1.4826 * stats::median(&dev)?;
    let limit = FAR_OUT_SPREADS * spread;
    let limit_other = NEAR_OTHER_SPREADS * spread;
    let keep = |v: &[f64], m: f64, other: f64| -> Vec<f64> {
        v.iter()
            .copied()
            .filter(|&x| (x - m).abs() <= limit || (x - other).abs() <= limit_other)
            .collect()
    };
    let (kb, kc) = (keep(base, mb, mc), keep(cand, mc, mb));
    let most = |n: usize| (n / 5).max(1);
    let (ob, oc) = (base.len() - kb.len(), cand.len() - kc.len());
    if ob + oc == 0 || ob > most(base.len()) || oc > most(cand.len()) {
        return None;
    }
    (kb.len() >= 2 && kc.len() >= 2).then_some((kb, kc))
}

/// Which two-sample t test a diff uses, in words for its notes and method line.
pub fn two_sample_words(welch: bool) -> &'static str {
    if welch {
        "Welch's, as --welch asks"
    } else {
        "Student's where the sides have as many reps, else Welch's"
    }
}

/// Pairs from which a paired analysis joins Welch's in a verdict: the paired t test, or
/// where a pair is far out the signed-rank test. Below, the paired test's n − 1 degrees of freedom cost more than
/// pairing gains: in the verdict simulation at 5 pairs, Welch's test alone named a
/// 5-spread change in 84% of diffs and the combination in 74% (lognormal reps), and under
/// drift within the run 89% against 88% (evidence/verdicts/sim); and no signed-rank test
/// of fewer than 6 pairs can reach p < 0.05. The paired t test is still computed
/// (sequential runs read it).
pub const PAIRED_FROM: usize = 8;

impl LogTests {
    /// The two-sample test without far-out values, where one was left out: it replaces
    /// the two-sample test on every rep, as the signed-rank test replaces the paired t
    /// test where a pair is far out. Combined with that test (Simes' min(2·p₍₁₎,
    /// p₍₂₎)) instead, it named a 5-spread change at 5 reps a side in 87% of simulated
    /// diffs with heavy tails; in its place, 90% (the A/A rate there 2.7% → 3.3% of
    /// diffs; evidence/verdicts/sim). It serves the paired analyses too: a rep
    /// disturbed as a whole makes its pair far out, and the signed-rank test that then
    /// replaces the paired t test cannot go below 2/2ⁿ (0.0078 at 8 pairs).
    pub fn trimmed_in_use(&self) -> Option<stats::TTest> {
        self.trimmed
    }

    /// The paired t test, where there are [`PAIRED_FROM`] pairs or more and no
    /// signed-rank analysis replaces it.
    pub fn paired_in_use(&self) -> Option<stats::TTest> {
        if self.rank_in_use().is_some() {
            return None;
        }
        self.paired.filter(|p| p.df + 1.0 >= PAIRED_FROM as f64)
    }

    /// The signed-rank analysis, where a pair is far out, there are [`PAIRED_FROM`] pairs
    /// or more, and its Walsh averages are at hand (not when read back from a file).
    pub fn rank_in_use(&self) -> Option<&stats::SignedRankShift> {
        self.rank
            .as_ref()
            .filter(|r| r.n >= PAIRED_FROM && r.interval(0.5).is_some())
    }

    /// The two-sample test in use: the one without far-out values where one was left
    /// out, else the one on every rep.
    pub fn two_sample_in_use(&self) -> stats::TTest {
        self.trimmed_in_use().unwrap_or(self.unpaired)
    }

    /// The p-values of the analyses in use: the two-sample test's, then the paired t's
    /// or the signed-rank's where in use.
    fn p_values(&self) -> Vec<f64> {
        let mut p = vec![self.two_sample_in_use().p_value];
        p.extend(self.paired_in_use().map(|t| t.p_value));
        p.extend(self.rank_in_use().map(|r| r.p_value));
        p
    }

    /// The test's two-sided p-value: the two-sample test's alone, or paired, Simes'
    /// combination of the two analyses in use, min(2·p₍₁₎, p₍₂₎): each analysis is
    /// valid, and the combination holds its level when they are positively dependent,
    /// as tests of one difference of logs are (Simes, Biometrika 73 (1986); Sarkar,
    /// Ann. Stat. 26 (1998)). The paired t test is the more powerful on well-behaved
    /// pairs, the signed-rank test where a few pairs are far out (a t interval widens
    /// with an outlier's square).
    pub fn p_value(&self) -> f64 {
        let mut p = self.p_values();
        p.sort_unstable_by(f64::total_cmp);
        let k = p.len() as f64;
        p.iter()
            .enumerate()
            .map(|(i, &pi)| k * pi / (i + 1) as f64)
            .fold(1.0f64, f64::min)
    }

    /// The interval of the log ratio at `level`: the two-sample test's, or paired, the
    /// intersection of the k analyses' intervals at 1 − (1 − level)/k each (all cover
    /// together at least at `level`); `None` when they do not meet.
    pub fn log_interval(&self, level: f64) -> Option<(f64, f64)> {
        let k = self.p_values().len() as f64;
        let each = 1.0 - (1.0 - level) / k;
        let mut parts = vec![self.two_sample_in_use().interval(each)];
        parts.extend(self.paired_in_use().map(|p| p.interval(each)));
        // Too few pairs for a signed-rank bound at this level: it bounds nothing.
        parts.extend(self.rank_in_use().and_then(|r| r.interval(each)));
        let lo = parts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
        let hi = parts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        (lo <= hi).then_some((lo, hi))
    }

    /// The point estimate of the log ratio: the Hodges–Lehmann estimate when the
    /// signed-rank analysis is in use, else the paired mean when paired, else the
    /// two-sample test's difference of mean logs (without the far-out values where
    /// they were left out: the typical rep's change).
    pub fn estimate(&self) -> f64 {
        if let Some(r) = self.rank_in_use() {
            return r.estimate;
        }
        if let Some(t) = self.trimmed_in_use() {
            return t.estimate;
        }
        self.paired_in_use()
            .map_or(self.unpaired.estimate, |p| p.estimate)
    }

    /// Intervals of the relative change and of the change in the unit at `level`.
    pub fn intervals(&self, level: f64) -> (Interval, Interval) {
        let (lo, hi) = match self.log_interval(level) {
            Some((lo, hi)) => (Some(lo.exp() - 1.0), Some(hi.exp() - 1.0)),
            None => (None, None),
        };
        let rel = Interval { lo, hi, level };
        let abs = Interval {
            lo: lo.map(|r| r * self.base_gm),
            hi: hi.map(|r| r * self.base_gm),
            level,
        };
        (rel, abs)
    }
}

/// Two sides that separated in every rep: every candidate value above every baseline
/// value (or below), by `spreads` times the sides' MAD-based spread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Separation {
    /// +1: the candidate above, −1: below.
    pub direction: i8,
    /// The gap between the sides over 1.4826 × the mean of the sides' MADs; infinite
    /// when neither side varies.
    pub spreads: f64,
}

/// `base` and `cand` with their sides' MADs (`SideStats::mad`, none below 2 values).
/// `None` below 2 values a side: one value against one is apart whenever the two differ
/// at all, which says nothing of the variants.
fn separation(base: (&[f64], Option<f64>), cand: (&[f64], Option<f64>)) -> Option<Separation> {
    let ((base, base_mad), (cand, cand_mad)) = (base, cand);
    if base.len() < 2 || cand.len() < 2 {
        return None;
    }
    let (bmin, bmax) = min_max(base)?;
    let (cmin, cmax) = min_max(cand)?;
    let (direction, gap) = if cmin > bmax {
        (1, cmin - bmax)
    } else if cmax < bmin {
        (-1, bmin - cmax)
    } else {
        return None;
    };
    let spread = 1.4826 * (base_mad.unwrap_or(0.0) + cand_mad.unwrap_or(0.0)) / 2.0;
    Some(Separation {
        direction,
        spreads: if spread > 0.0 {
            gap / spread
        } else {
            f64::INFINITY
        },
    })
}

fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo <= hi).then_some((lo, hi))
}

/// Baseline against candidate on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub span: String,
    pub measure: Measure,
    pub unit: Unit,
    pub baseline: SideStats,
    pub candidate: SideStats,
    /// The change in `unit`: the baseline's geometric mean times the relative change
    /// (exact counts: the difference of medians).
    pub delta: Option<f64>,
    /// The relative change (0.02 = +2 %): the ratio of geometric means − 1.
    pub relative: Option<f64>,
    /// Interval of `relative`: the t interval of the mean log ratio (see [`LogTests`]),
    /// mapped back (the level is in the interval).
    pub ci: Option<Interval>,
    /// Interval of `delta`, in `unit`: `ci` times the baseline's geometric mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_ci: Option<Interval>,
    /// Two-sided p-value of the t tests on logs ([`LogTests::p_value`]).
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
    /// The t tests on logs the change, the p-value and the intervals come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<LogTests>,
    /// Inconclusive: about how many more reps a side (pairs, when paired) would resolve
    /// it at the spread seen, to a verdict or to equivalence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more_reps: Option<usize>,
    /// Why a verdict is what it is, in words, where the diff records it: too few reps,
    /// the floor an equivalent row lies inside (set by the family), two runs' machines,
    /// a sequential stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The sides separated in every rep (shown where too few reps allow a claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separation: Option<Separation>,
}

impl Comparison {
    /// The comparison's change statistic, in words (it labels every change printed).
    pub fn statistic(&self) -> &'static str {
        match (self.exact, self.pairs.is_some()) {
            (true, _) => "difference of medians",
            (false, true) => "geometric mean of per-pair ratios",
            (false, false) => "ratio of geometric means",
        }
    }

    /// The change statistic (a ratio of geometric means) and the difference of the two
    /// medians can point opposite ways (neither is wrong: they answer different
    /// questions); true when both are non-zero and they do.
    pub fn medians_disagree(&self) -> bool {
        match (self.delta, self.baseline.median, self.candidate.median) {
            (Some(d), Some(b), Some(k)) => d != 0.0 && k != b && (d > 0.0) != (k > b),
            _ => false,
        }
    }

    /// A comparison with its medians' change filled in and no verdict yet (inconclusive).
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
            verdict: Verdict::Inconclusive,
            pairs: None,
            exact,
            tests: None,
            more_reps: None,
            why: None,
            separation: None,
        }
    }
}

/// Compares per-rep values of one metric (each side: the reps where it exists); with
/// `pairs` (the (baseline, candidate) values of reps of one iteration), through the
/// per-pair ratios as well.
///
/// The change statistic is the ratio of geometric means (of the values plus the unit's
/// [`log_offset`]): Welch's t on the logs of the two sides, and, paired, the one-sample t
/// on the per-pair log ratios, their p-values combined by Bonferroni and their intervals
/// intersected ([`LogTests`]). Both have continuous p-values at any number of reps, so a
/// change large against its spread is significant at 4 or 5 reps a side, which no rank
/// test can be. Fewer than [`stats::MIN_REPS_FOR_CLAIM`] reps a side give no claim
/// (inconclusive, with whether the sides separated in every rep). The verdict here is
/// [`decide`]'s on the comparison's own p-value and the absolute floors that need no
/// other comparison; the diff decides again over its family.
pub(crate) fn compare(
    span: &str,
    measure: Measure,
    unit: Unit,
    base: &[f64],
    cand: &[f64],
    pairs: Option<&[(f64, f64)]>,
    opts: &DiffOptions,
) -> Comparison {
    // One function from the values to a decided comparison: the medians, the tests on
    // logs (paired where the reps pair, Welch's otherwise, the rank analysis beside them)
    // and their intervals are computed once and kept on the comparison for the verdict.
    let bs = SideStats::of(base, unit);
    let cs = SideStats::of(cand, unit);
    let mut c = Comparison::of_medians(span, measure, unit, bs, cs, false);
    if let (Some(b), Some(k)) = (bs.gmean, cs.gmean) {
        c.delta = Some(k - b);
    }
    match (base.is_empty(), cand.is_empty()) {
        (false, true) => {
            c.verdict = Verdict::Gone;
            return c;
        }
        (true, false) => {
            c.verdict = Verdict::New;
            return c;
        }
        (true, true) => return c,
        _ => {}
    }
    let off = log_offset(unit);
    let lb: Vec<f64> = base.iter().map(|&v| log_of(v, off)).collect();
    let lc: Vec<f64> = cand.iter().map(|&v| log_of(v, off)).collect();
    let min = stats::MIN_REPS_FOR_CLAIM;
    let ratios: Option<Vec<f64>> = pairs.filter(|p| p.len() >= min).map(|p| {
        c.pairs = Some(p.len());
        p.iter()
            .map(|&(x, y)| log_of(y, off) - log_of(x, off))
            .collect()
    });
    let paired = ratios.as_deref().and_then(stats::one_sample_t);
    let rank = ratios
        .as_deref()
        .filter(|d| d.len() >= PAIRED_FROM && far_out(d))
        .and_then(stats::SignedRankShift::of);
    let pooled = lb.len() == lc.len() && !opts.welch;
    let two_sample = if pooled {
        stats::pooled_t
    } else {
        stats::welch_t
    };
    let Some(unpaired) = two_sample(&lb, &lc) else {
        c.separation = separation((base, bs.mad), (cand, cs.mad));
        c.why = Some(too_few(base.len().min(cand.len())));
        return c;
    };
    let trimmed = without_far_out(&lb, &lc).and_then(|(b, c)| two_sample(&b, &c));
    let tests = LogTests {
        offset: off,
        base_gm: (lb.iter().sum::<f64>() / lb.len() as f64).exp(),
        unpaired,
        pooled,
        trimmed,
        paired,
        rank,
        between_runs: 0.0,
    };
    let est = tests.estimate();
    c.relative = Some(est.exp() - 1.0);
    c.delta = Some(tests.base_gm * (est.exp() - 1.0));
    c.p_value = Some(tests.p_value());
    let (rel, abs) = tests.intervals(1.0 - opts.alpha);
    c.tests = Some(tests);
    c.separation = separation((base, bs.mad), (cand, cs.mad));
    c.ci = Some(rel);
    c.delta_ci = Some(abs);
    if base.len() < min || cand.len() < min {
        // No claim: no p-value either, only the change, its interval and the separation.
        c.p_value = None;
        c.why = Some(too_few(base.len().min(cand.len())));
        return c;
    }
    let p = c.p_value.unwrap_or(1.0);
    decide(
        &mut c,
        p,
        1.0 - opts.alpha,
        abs_floor(unit, opts, None),
        opts,
    );
    c
}

fn too_few(n: usize) -> String {
    format!(
        "{n} rep{} a side: no claim below {}",
        if n == 1 { "" } else { "s" },
        stats::MIN_REPS_FOR_CLAIM
    )
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

/// The verdict rule, on test p-value (or q-value) `p`, the interval's confidence `level`
/// (1 − alpha, or the false-coverage-adjusted level of a row the family selected) and
/// the absolute floor `floor`:
/// - regressed (improved): `p` < alpha and the interval at `level` lies wholly above
///   +floor (below −floor) on both scales, relative (the noise floor) and absolute;
/// - equivalent: the 1 − alpha interval lies wholly inside ±floor on either scale (the
///   change, whatever it is, is too small to matter);
/// - inconclusive otherwise, with about how many more reps would resolve it.
///
/// The intervals printed are those the verdict used. A comparison without enough reps,
/// on one side only, or exact keeps its verdict.
pub(crate) fn decide(c: &mut Comparison, p: f64, level: f64, floor: f64, opts: &DiffOptions) {
    // One function for the verdict rule: the intervals it prints, the four verdicts and
    // the reps that would resolve an inconclusive one read the same tests and floors, and
    // the order of the checks is the rule; split, each piece would recompute them.
    let Some(tests) = c.tests.clone() else {
        return;
    };
    if c.exact
        || c.verdict.one_sided()
        || c.baseline.reps < stats::MIN_REPS_FOR_CLAIM
        || c.candidate.reps < stats::MIN_REPS_FOR_CLAIM
    {
        return;
    }
    c.rule = Some(Rule {
        alpha: opts.alpha,
        noise_floor: opts.noise_floor,
        abs_floor: floor,
    });
    c.more_reps = None;
    c.why = None;
    let (rel, abs) = tests.intervals(level);
    c.ci = Some(rel);
    c.delta_ci = Some(abs);
    let beyond = |i: &Interval, f: f64| match (i.lo, i.hi) {
        (Some(lo), _) if lo > f => Some(true),
        (_, Some(hi)) if hi < -f => Some(false),
        _ => None,
    };
    let up = match (beyond(&rel, opts.noise_floor), beyond(&abs, floor)) {
        (Some(a), Some(b)) if a == b => Some(a),
        _ => None,
    };
    if p < opts.alpha {
        if let Some(up) = up {
            c.verdict = if up {
                Verdict::Regressed
            } else {
                Verdict::Improved
            };
            return;
        }
    }
    let (rel, abs) = tests.intervals(1.0 - opts.alpha);
    let inside =
        |i: &Interval, f: f64| matches!((i.lo, i.hi), (Some(lo), Some(hi)) if lo >= -f && hi <= f);
    if inside(&rel, opts.noise_floor) || inside(&abs, floor) {
        c.verdict = Verdict::Equivalent;
        c.ci = Some(rel);
        c.delta_ci = Some(abs);
        return;
    }
    c.verdict = Verdict::Inconclusive;
    if tests.log_interval(level).is_none() {
        c.why = Some(disagree_words(&tests));
        return;
    }
    // Reps that would resolve it: the interval's half-width shrinks as 1/√n; it must
    // shrink to the distance between the estimate and the floor (the larger of the
    // relative floor and the absolute one as a share of the baseline).
    let fl = opts.noise_floor.max(if tests.base_gm > 0.0 {
        floor / tests.base_gm
    } else {
        0.0
    });
    let fl = (1.0 + fl).ln();
    if let Some((lo, hi)) = tests.log_interval(1.0 - opts.alpha) {
        let est = tests.estimate().abs();
        let target = (est - fl).abs();
        let half = (hi - lo) / 2.0;
        let n = c.pairs.unwrap_or(c.baseline.reps.min(c.candidate.reps)) as f64;
        // Across runs, the between-run part of the half-width stays whatever the reps.
        let fixed = 2.0 * tests.between_runs * tests.between_runs;
        let se = tests.two_sample_in_use().se;
        let se2 = se * se;
        let sample = (1.0 - fixed / se2).clamp(0.0, 1.0).sqrt() * half;
        let fixed_half = half * (fixed / se2).clamp(0.0, 1.0).sqrt();
        if fixed > 0.0 && target <= fixed_half {
            c.why = Some(format!(
                "two runs differ by about ±{}% (the between-runs spread) whatever their \
                 reps: compare variants of one run to resolve ±{}%",
                sig_pct(2f64.sqrt() * tests.between_runs),
                sig_pct(opts.noise_floor)
            ));
        } else if target > 1e-12 && half.is_finite() && n > 0.0 {
            let room = (target * target - fixed_half * fixed_half)
                .max(1e-300)
                .sqrt();
            let need = n * (sample / room).powi(2);
            c.more_reps = Some((need - n).ceil().clamp(1.0, 1e6) as usize);
        }
    }
}

/// `x` (a fraction) as a percentage of two significant digits at most: "1.4".
fn sig_pct(x: f64) -> String {
    let s = format!("{:.1}", x * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Adds the spread of a run's level between runs (`sd`, of the log) to a comparison of
/// two run folders' reps: Welch's variance grows by 2·sd² (each side's run level is off
/// by sd), at the same degrees of freedom; the p-value, the intervals and the verdict
/// follow. Paired and exact comparisons, and those without a test, are left alone.
pub(crate) fn add_between_runs(c: &mut Comparison, sd: f64, opts: &DiffOptions) {
    if sd <= 0.0 || c.exact || c.pairs.is_some() {
        return;
    }
    let Some(tests) = c.tests.as_mut() else {
        return;
    };
    tests.unpaired = tests.unpaired.with_extra_variance(2.0 * sd * sd);
    tests.trimmed = tests.trimmed.map(|t| t.with_extra_variance(2.0 * sd * sd));
    tests.between_runs = sd;
    let tests = tests.clone();
    let (rel, abs) = tests.intervals(1.0 - opts.alpha);
    c.ci = Some(rel);
    c.delta_ci = Some(abs);
    if c.p_value.is_none() {
        // Too few reps for a claim: the interval widens, no verdict follows.
        return;
    }
    let p = tests.p_value();
    c.p_value = Some(p);
    decide(c, p, 1.0 - opts.alpha, abs_floor(c.unit, opts, None), opts);
}

/// Why a comparison whose analyses' intervals do not meet has no interval: the analyses
/// in use disagree on where the change lies.
fn disagree_words(tests: &LogTests) -> String {
    if tests.rank_in_use().is_some() {
        "the two-sample and the signed-rank intervals do not meet: far-out pairs move the mean \
         ratio, not the typical pair's"
            .to_string()
    } else if tests.trimmed_in_use().is_some() {
        "the two-sample interval without the far-out reps and the paired interval do not \
         meet: the pairs' differences and the typical reps disagree"
            .to_string()
    } else {
        "the two-sample and the paired intervals do not meet: the pairs' differences and the \
         sides' spreads disagree"
            .to_string()
    }
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
    let bs = SideStats::of(base, unit);
    let cs = SideStats::of(cand, unit);
    let mut c = Comparison::of_medians(span, measure, unit, bs, cs, true);
    c.verdict = match (bs.median, cs.median) {
        (Some(b), Some(m)) => match c.relative {
            _ if (m - b).abs() <= EXACT_MIN_DELTA => Verdict::Equivalent,
            Some(r) if r > opts.noise_floor => Verdict::Regressed,
            Some(r) if r < -opts.noise_floor => Verdict::Improved,
            Some(_) => Verdict::Equivalent,
            None => Verdict::Regressed,
        },
        (Some(_), None) => Verdict::Gone,
        (None, Some(_)) => Verdict::New,
        (None, None) => Verdict::Inconclusive,
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
        assert_eq!(c.verdict, Verdict::Equivalent);
        let c = compare_exact("s", m(), Unit::Count, &[3e6, 3e6], &[3.06e6], &o);
        assert_eq!(c.verdict, Verdict::Regressed);
        // Past the relative floor but within the run-to-run movement: unchanged.
        let c = compare_exact("drop", m(), Unit::Count, &[3214.0], &[3504.0], &o);
        assert_eq!(c.verdict, Verdict::Equivalent);
        let c = compare_exact("s", m(), Unit::Count, &[0.0], &[3e4], &o);
        assert_eq!((c.verdict, c.relative), (Verdict::Regressed, None));
        let c = compare_exact("s", m(), Unit::Count, &[], &[3.0], &o);
        assert_eq!(c.verdict, Verdict::New);
        // The statistical rule makes no claim on one rep per side, nor calls one value
        // against one apart in every rep; two a side that do not overlap are.
        let s = compare("s", m(), Unit::Count, &[1000.0], &[2000.0], None, &o);
        assert!(s.verdict == Verdict::Inconclusive && !s.exact && s.why.is_some());
        assert_eq!(s.separation, None);
        let s = compare(
            "s",
            m(),
            Unit::Count,
            &[1000.0, 1010.0],
            &[2000.0, 2030.0],
            None,
            &o,
        );
        assert_eq!(s.separation.map(|p| p.direction), Some(1));
    }
}

#[cfg(test)]
mod rank_tests {
    use super::*;

    /// 16 pairs of a span 8% slower, two of them disturbed (a rep 3× slower on either
    /// side): the t tests on logs lose it in the outliers' variance, the signed-rank
    /// analysis does not, and the combination names it with an interval near +8%.
    #[test]
    fn two_far_reps_do_not_hide_a_consistent_change() {
        let o = DiffOptions::default();
        let wobble = |i: usize| 1.0 + 0.01 * ((i * 5 % 16) as f64 - 7.5) / 7.5;
        let mut pairs: Vec<(f64, f64)> = (0..16)
            .map(|i| (4.5e6 * wobble(i), 4.5e6 * 1.08 * wobble((i * 3 + 1) % 16)))
            .collect();
        pairs[2].1 *= 3.0;
        pairs[9].0 *= 3.0;
        let (a, b): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        let c = compare("work", Measure::Total, Unit::Ns, &a, &b, Some(&pairs), &o);
        let t = c.tests.clone().unwrap();
        assert!(
            t.unpaired.p_value > 0.05 && t.paired.unwrap().p_value > 0.05,
            "{t:?}"
        );
        let rank = t.rank_in_use().unwrap();
        assert!(rank.p_value < 0.01, "{}", rank.p_value);
        assert_eq!(c.verdict, Verdict::Regressed, "{c:?}");
        let (lo, hi) = (c.ci.unwrap().lo.unwrap(), c.ci.unwrap().hi.unwrap());
        assert!(lo > 0.05 && hi < 0.11, "[{lo}, {hi}]");
        assert!((c.relative.unwrap() - 0.08).abs() < 0.01, "{c:?}");
        // Without a far pair, the paired t test.
        let clean: Vec<(f64, f64)> = (0..16)
            .map(|i| (4.5e6 * wobble(i), 4.5e6 * 1.08 * wobble((i * 3 + 1) % 16)))
            .collect();
        let (a, b): (Vec<f64>, Vec<f64>) = clean.iter().copied().unzip();
        let c = compare("work", Measure::Total, Unit::Ns, &a, &b, Some(&clean), &o);
        let t = c.tests.unwrap();
        assert!(t.rank.is_none() && t.paired_in_use().is_some());
        // Below PAIRED_FROM pairs the signed-rank analysis is not in use.
        let few = &pairs[..7];
        let (a, b): (Vec<f64>, Vec<f64>) = few.iter().copied().unzip();
        let c = compare("work", Measure::Total, Unit::Ns, &a, &b, Some(few), &o);
        assert!(c.tests.unwrap().rank.is_none());
    }
}
