//! The diffs' changes handed to the charts ([`crate::plot::verdict`]): one conversion,
//! [`span_change`], from a diff's [`Comparison`] to what a chart draws, so the change
//! chart, the phase chart and the distributions print the diff's own numbers and
//! verdicts for each span and measure.

use super::sections::Diffs;
use crate::analysis::{Comparison, Diff, DiffError, Measure, Verdict};
use crate::plot::verdict::{Changes, Judged, Quantity, SpanChange, VariantChanges};

/// The chart's verdict of a diff's verdict: a span on one side only is inconclusive as
/// a change (its size is drawn, its verdict is new or gone).
pub fn judged(v: Verdict) -> Judged {
    match v {
        Verdict::Improved => Judged::Improved,
        Verdict::Regressed => Judged::Regressed,
        Verdict::Equivalent => Judged::Equivalent,
        Verdict::Inconclusive | Verdict::New | Verdict::Gone => Judged::Inconclusive,
    }
}

/// "improved (q=0.008)": the verdict with the value it was judged on (the q-value over
/// the diff's family; end to end, its own p-value).
pub fn verdict_words(c: &Comparison) -> String {
    let (name, v) = match (c.q_value, c.p_value) {
        (Some(q), Some(p)) if q != p => ("q", q),
        (_, Some(p)) => ("p", p),
        _ => return c.verdict.to_string(),
    };
    if v < 0.001 {
        format!("{} ({name}<0.001)", c.verdict)
    } else {
        format!("{} ({name}={v:.3})", c.verdict)
    }
}

/// A diff's comparison as every chart draws it: its change statistic, interval and
/// verdict, and the medians' difference when it points the other way.
pub fn span_change(c: &Comparison) -> SpanChange {
    let medians = c
        .candidate
        .median
        .zip(c.baseline.median)
        .map(|(k, b)| k - b);
    SpanChange {
        delta_ns: c.delta.unwrap_or(0.0),
        relative: c.relative,
        interval_ns: c.delta_ci.and_then(|i| Some((i.lo?, i.hi?))),
        judged: judged(c.verdict),
        verdict: verdict_words(c),
        medians_disagree: medians.filter(|_| c.medians_disagree()),
    }
}

fn quantity(m: &Measure) -> Option<Quantity> {
    match m {
        Measure::Total => Some(Quantity::Total),
        Measure::SelfTime => Some(Quantity::SelfTime),
        Measure::CriticalSelf => Some(Quantity::CriticalSelf),
        Measure::Unattributed => Some(Quantity::Unattributed),
        _ => None,
    }
}

/// One candidate's changes: every time the diff compared (each span's total and self
/// time, its critical-path self time, a wrapper's unattributed time) and end to end.
pub fn variant_changes(diff: &Diff) -> VariantChanges {
    let total = &diff.contributions.total;
    let mut out = VariantChanges {
        candidate: diff.candidate.variant.clone(),
        statistic: total.statistic().to_string(),
        end_to_end: Some((total.span.clone(), span_change(total))),
        spans: Default::default(),
    };
    let comparisons = diff
        .metrics
        .iter()
        .chain(diff.contributions.items.iter().map(|i| &i.comparison))
        .chain(diff.gaps.iter().map(|g| &g.change));
    for c in comparisons {
        if let Some(q) = quantity(&c.measure) {
            out.spans.insert((c.span.clone(), q), span_change(c));
        }
    }
    out
}

/// The changes of every comparison the report makes; empty when none could be made.
pub fn changes(diffs: &Result<Diffs, DiffError>) -> Changes {
    let Ok(d) = diffs else {
        return Changes::default();
    };
    Changes {
        baseline: Some(d.baseline.clone()),
        candidates: d
            .results
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(variant_changes)
            .collect(),
    }
}
