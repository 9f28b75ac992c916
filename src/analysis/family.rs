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
        && !matches!(
            c.verdict,
            Verdict::TooFewReps { .. } | Verdict::OnlyInBaseline | Verdict::OnlyInCandidate
        )
}

/// Judges every comparison of a diff again: the end-to-end time (`contributions.total`
/// and its twin in `metrics`) on its own p-value, the others (with `others`, the
/// carry-over rows) on their q-value over the family, each against its absolute floor.
pub(crate) fn judge(
    metrics: &mut [Comparison],
    contributions: &mut Contributions,
    gaps: &mut [Gap],
    others: Vec<&mut Comparison>,
    opts: &DiffOptions,
) -> Family {
    let end_to_end_ns = contributions.total.baseline.median;
    let primary_span = contributions.total.span.clone();
    let is_primary = |c: &Comparison| {
        c.span == primary_span && c.measure == Measure::Total && c.unit == Unit::Ns
    };
    let judge_alone = |c: &mut Comparison| {
        if tested(c) {
            c.q_value = c.p_value;
            let p = c.p_value.unwrap_or(1.0);
            decide(c, p, abs_floor(c.unit, opts, end_to_end_ns), opts);
        }
    };
    judge_alone(&mut contributions.total);
    let mut family: Vec<&mut Comparison> = Vec::new();
    for c in metrics.iter_mut() {
        if is_primary(c) {
            judge_alone(c);
        } else if tested(c) {
            family.push(c);
        }
    }
    family.extend(
        contributions
            .items
            .iter_mut()
            .map(|i| &mut i.comparison)
            .filter(|c| tested(c)),
    );
    family.extend(gaps.iter_mut().map(|g| &mut g.change).filter(|c| tested(c)));
    family.extend(others.into_iter().filter(|c| tested(c)));
    let p: Vec<f64> = family.iter().map(|c| c.p_value.unwrap_or(1.0)).collect();
    let q = if opts.fdr {
        stats::bh_q_values(&p)
    } else {
        p.clone()
    };
    for (c, &q) in family.iter_mut().zip(&q) {
        c.q_value = Some(q);
        let floor = abs_floor(c.unit, opts, end_to_end_ns);
        decide(c, q, floor, opts);
    }
    let out = Family {
        comparisons: family.len(),
        uncorrected: p.iter().filter(|&&p| p < opts.alpha).count(),
        survivors: family.iter().filter(|c| c.verdict.is_change()).count(),
        expected_by_chance: opts.alpha * family.len() as f64,
        alpha: opts.alpha,
        controlled: opts.fdr,
    };
    drop(family);
    // A share of the end-to-end change exists only when that change has a verdict.
    let total = &contributions.total;
    let total_delta = total.delta.unwrap_or(0.0);
    for item in &mut contributions.items {
        item.share_of_change = (total.verdict.is_change() && total_delta != 0.0)
            .then(|| item.comparison.delta.unwrap_or(0.0) / total_delta);
    }
    out
}
