//! False-discovery control over one diff: every comparison the diff makes (each span's
//! total, self and other times, each counter, each gap and critical-path share, the
//! carry-over rows) is one test of a family, and a verdict rests on its
//! Benjamini–Hochberg q-value over that family ([`crate::stats::bh_q_values`], where the
//! choice of BH over BY is argued). The end-to-end time is the primary comparison: it
//! stays out of the family and is judged at its own alpha, so adding spans to a program
//! never makes its end-to-end verdict harder to reach.
//!
//! The absolute floors are applied here too, since the time floor depends on the
//! baseline's end-to-end time ([`super::compare::abs_floor`]).

use serde::{Deserialize, Serialize};

use super::compare::{abs_floor, decide, Comparison, Measure, Unit, Verdict};
use super::gaps::{Contributions, Gap};
use super::DiffOptions;
use crate::stats;

/// The family a diff's verdicts were judged over.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Family {
    /// Comparisons with a p-value in the family (the end-to-end time not counted).
    pub comparisons: usize,
    /// How many of them have p < alpha before any correction.
    pub uncorrected: usize,
    /// How many of them are regressed or improved after it.
    pub survivors: usize,
    /// alpha × comparisons: how many would have p < alpha by chance alone if nothing
    /// changed.
    pub expected_by_chance: f64,
    /// The level q-values are compared with (alpha); false discoveries among the
    /// survivors are at most this share in expectation.
    pub alpha: f64,
    /// q-values were used (false when [`DiffOptions::fdr`] is off).
    pub controlled: bool,
}

impl Default for Family {
    fn default() -> Self {
        Family {
            comparisons: 0,
            uncorrected: 0,
            survivors: 0,
            expected_by_chance: 0.0,
            alpha: 0.05,
            controlled: false,
        }
    }
}

fn tested(c: &Comparison) -> bool {
    !c.exact
        && c.p_value.is_some()
        && c.tests.is_some()
        && !c.verdict.one_sided()
        && c.baseline.reps >= stats::MIN_REPS_FOR_CLAIM
        && c.candidate.reps >= stats::MIN_REPS_FOR_CLAIM
}

/// One metric of a diff given as per-rep values, for callers that judge a family of
/// their own (the verdict simulation, tests): what [`judge_rows`] compares.
#[derive(Debug, Clone, PartialEq)]
pub struct RowInput {
    pub span: String,
    pub measure: Measure,
    pub unit: Unit,
    /// Per-rep values of the baseline and the candidate (reps where the metric exists).
    pub base: Vec<f64>,
    pub cand: Vec<f64>,
    /// The (baseline, candidate) values of reps of one iteration, when the run paired them.
    pub pairs: Option<Vec<(f64, f64)>>,
    /// The end-to-end time: judged at its own alpha, outside the family.
    pub primary: bool,
}

/// Compares and judges rows as one diff does: each row by [`super::compare::compare`],
/// then the primary row alone and the others as one family.
pub fn judge_rows(rows: &[RowInput], opts: &DiffOptions) -> (Vec<Comparison>, Family) {
    let mut out: Vec<Comparison> = rows
        .iter()
        .map(|r| {
            super::compare::compare(
                &r.span,
                r.measure.clone(),
                r.unit,
                &r.base,
                &r.cand,
                r.pairs.as_deref(),
                opts,
            )
        })
        .collect();
    let end_to_end_ns = rows
        .iter()
        .zip(&out)
        .find(|(r, _)| r.primary)
        .and_then(|(_, c)| c.baseline.median);
    let (mut primary, mut family) = (Vec::new(), Vec::new());
    for (r, c) in rows.iter().zip(out.iter_mut()) {
        if r.primary {
            primary.push(c);
        } else {
            family.push(c);
        }
    }
    let fam = judge_family(primary, family, end_to_end_ns, None, opts);
    (out, fam)
}

/// A row's weight in the family: the times of spans (total, self, unattributed, on the
/// critical path, GPU busy) are what a diff is read for; the derived measures (process
/// CPU time, busy cores, counters) restate them or are read second, and get
/// [`DiffOptions::derived_weight`] of a time's weight.
fn weight(c: &Comparison, opts: &DiffOptions) -> f64 {
    match c.measure {
        Measure::Total
        | Measure::SelfTime
        | Measure::Unattributed
        | Measure::CriticalSelf
        | Measure::GpuBusy => 1.0,
        Measure::ProcessCpu | Measure::BusyCores | Measure::Counter(_) => opts.derived_weight,
    }
}

/// Judges the primary comparisons each on its own p-value and the others on their
/// q-value over `family`, each against its absolute floor.
fn judge_family<'a>(
    mut primary: Vec<&'a mut Comparison>,
    family: Vec<&'a mut Comparison>,
    end_to_end_ns: Option<f64>,
    across: Option<&str>,
    opts: &DiffOptions,
) -> Family {
    // The weighted Benjamini–Hochberg step and the verdicts it feeds must see the same
    // family and the same floors in one pass: one function, long because of the bookkeeping
    // of primary and family rows side by side.
    for c in primary.iter_mut() {
        if tested(c) {
            c.q_value = c.p_value;
            let p = c.p_value.unwrap_or(1.0);
            let floor = abs_floor(c.unit, opts, end_to_end_ns);
            decide(c, p, 1.0 - opts.alpha, floor, opts);
        }
    }
    let (mut family, mut untested): (Vec<_>, Vec<_>) = family.into_iter().partition(|c| tested(c));
    // One test per distinct measurement: a leaf span's self time is its total, row for
    // row; the copy takes the first one's q-value instead of counting twice. Rows are
    // keyed by the span, the unit and the bits of their tests, in one pass.
    let key = |c: &Comparison| {
        let bits = |t: &stats::TTest| [t.estimate, t.se, t.df, t.p_value].map(f64::to_bits);
        let t = c.tests.as_ref();
        (
            c.span.clone(),
            c.unit,
            t.map(|t| (t.offset.to_bits(), t.base_gm.to_bits(), bits(&t.unpaired))),
            t.and_then(|t| t.paired.as_ref().map(bits)),
        )
    };
    let mut seen = std::collections::HashMap::new();
    let first_of: Vec<usize> = (0..family.len())
        .map(|i| *seen.entry(key(family[i])).or_insert(i))
        .collect();
    let distinct: Vec<usize> = (0..family.len()).filter(|&i| first_of[i] == i).collect();
    let p: Vec<f64> = family.iter().map(|c| c.p_value.unwrap_or(1.0)).collect();
    let q_distinct = if opts.fdr {
        let w: Vec<f64> = distinct.iter().map(|&i| weight(family[i], opts)).collect();
        let mean = w.iter().sum::<f64>() / w.len().max(1) as f64;
        // Weighted BH (Genovese, Roeder & Wasserman, Biometrika 93 (2006)): p / w with
        // the weights scaled to mean 1, which keeps the FDR at alpha.
        let pw: Vec<f64> = distinct
            .iter()
            .zip(&w)
            .map(|(&i, w)| (p[i] * mean / w).min(1.0))
            .collect();
        stats::bh_q_values(&pw)
    } else {
        distinct.iter().map(|&i| p[i]).collect()
    };
    let mut q = vec![1.0; family.len()];
    for (k, &i) in distinct.iter().enumerate() {
        q[i] = q_distinct[k];
    }
    for i in 0..family.len() {
        q[i] = q[first_of[i]];
    }
    // The rows the procedure selects get intervals at the false-coverage-adjusted level
    // 1 − R·alpha/m (Benjamini & Yekutieli 2005), so that the intervals printed for the
    // selected rows keep their coverage on average; the others keep 1 − alpha.
    let m = distinct.len().max(1) as f64;
    let selected = distinct.iter().filter(|&&i| q[i] < opts.alpha).count() as f64;
    let fcr_level = if opts.fdr {
        1.0 - selected * opts.alpha / m
    } else {
        1.0 - opts.alpha
    };
    for (c, &q) in family.iter_mut().zip(&q) {
        c.q_value = Some(q);
        let floor = abs_floor(c.unit, opts, end_to_end_ns);
        let level = if q < opts.alpha && opts.fcr_intervals {
            fcr_level
        } else {
            1.0 - opts.alpha
        };
        decide(c, q, level, floor, opts);
    }
    // An equivalent row records which floor it lies inside, as its reason.
    for c in primary.iter_mut().chain(family.iter_mut()) {
        if c.why.is_none() {
            c.why = super::fmt::equivalent_because(c);
        }
    }
    if let Some(why) = across {
        let all = primary
            .iter_mut()
            .chain(family.iter_mut())
            .chain(untested.iter_mut());
        for c in all.filter(|c| !c.verdict.one_sided() && !c.exact) {
            c.verdict = Verdict::Inconclusive;
            c.why = Some(why.to_string());
            c.more_reps = None;
        }
    }
    Family {
        comparisons: distinct.len(),
        uncorrected: distinct.iter().filter(|&&i| p[i] < opts.alpha).count(),
        survivors: family.iter().filter(|c| c.verdict.is_change()).count(),
        expected_by_chance: opts.alpha * distinct.len() as f64,
        alpha: opts.alpha,
        controlled: opts.fdr,
    }
}

/// Judges every comparison of a diff again: the end-to-end time (`contributions.total`
/// and its twin in `metrics`) on its own p-value, the others (with `others`, the
/// carry-over rows) on their q-value over the family, each against its absolute floor.
/// With `across` (why two runs' machines differed), no comparison is shown changed or
/// equivalent: each is inconclusive with that reason.
pub(crate) fn judge(
    metrics: &mut [Comparison],
    contributions: &mut Contributions,
    gaps: &mut [Gap],
    others: Vec<&mut Comparison>,
    across: Option<&str>,
    opts: &DiffOptions,
) -> Family {
    let end_to_end_ns = contributions.total.baseline.median;
    let primary_span = contributions.total.span.clone();
    let is_primary = |c: &Comparison| {
        c.span == primary_span && c.measure == Measure::Total && c.unit == Unit::Ns
    };
    let mut primary: Vec<&mut Comparison> = vec![&mut contributions.total];
    let mut family: Vec<&mut Comparison> = Vec::new();
    for c in metrics.iter_mut() {
        if is_primary(c) {
            primary.push(c);
        } else {
            family.push(c);
        }
    }
    family.extend(contributions.items.iter_mut().map(|i| &mut i.comparison));
    family.extend(gaps.iter_mut().map(|g| &mut g.change));
    family.extend(others);
    let out = judge_family(primary, family, end_to_end_ns, across, opts);
    // A share of the end-to-end change exists only when that change has a verdict.
    let total = &contributions.total;
    let total_delta = total.delta.unwrap_or(0.0);
    for item in &mut contributions.items {
        item.share_of_change = (total.verdict.is_change() && total_delta != 0.0)
            .then(|| item.comparison.delta.unwrap_or(0.0) / total_delta);
    }
    out
}
