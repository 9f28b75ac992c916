//! The top of report.md: the diff's headline for each comparison, and the chart of where
//! the time went between the baseline and the first candidate, both ahead of any table.

use std::fmt::Write;

use super::sections::Diffs;
use crate::analysis::{self, Diff, DiffError, Section, Verdict};
use crate::plot::change::{Change, ChangeRow, Judged};

/// Span rows the change chart draws under the end-to-end row.
const CHART_SPANS: usize = 10;

/// The headline of every comparison, as `gapscope diff` opens with it; a comparison that
/// cannot be computed says why (the phase section repeats it with the details).
pub fn headline_section(diffs: &Result<Diffs, DiffError>) -> String {
    let mut out = String::new();
    let d = match diffs {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(out, "No comparison: {e}.\n");
            return out;
        }
    };
    let several = d.results.len() > 1;
    for (candidate, result) in &d.results {
        if several {
            let _ = writeln!(out, "`{candidate}` against `{}`:\n", d.baseline);
        }
        match result {
            Ok(diff) => out.push_str(&analysis::markdown_sections(diff, &[Section::Headline], 3)),
            Err(e) => {
                let _ = writeln!(out, "- no comparison: {e}\n");
            }
        }
    }
    out
}

fn judged(v: Verdict) -> Judged {
    match v {
        Verdict::Improved => Judged::Better,
        Verdict::Regressed => Judged::Worse,
        _ => Judged::Unresolved,
    }
}

/// "improved (q=0.008)": the verdict with the value it was judged on (the q-value over
/// the diff's family; end to end, its own p-value).
fn verdict_words(c: &analysis::Comparison) -> String {
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

/// The change chart of a diff: the end-to-end change, then the changes of self time on
/// the critical path (the diff's contributions; resolved ones first), with their
/// intervals in ns.
pub fn change_chart(diff: &Diff) -> Change {
    let t = &diff.contributions.total;
    let base = t.baseline.median.unwrap_or(0.0);
    let mut rows = vec![ChangeRow {
        label: format!("end to end ({})", t.span),
        delta_ns: t.delta.unwrap_or(0.0),
        // The interval of the change statistic itself, in ns: the same statistic and
        // resamples as the headline's.
        interval_ns: t.delta_ci.and_then(|i| Some((i.lo?, i.hi?))),
        judged: judged(t.verdict),
        verdict: verdict_words(t),
    }];
    // Resolved changes first, each group largest first (the contributions' order).
    let mut items: Vec<&analysis::Contribution> = diff.contributions.items.iter().collect();
    items.sort_by_key(|i| !i.comparison.verdict.is_change());
    for item in items.into_iter().take(CHART_SPANS) {
        let c = &item.comparison;
        rows.push(ChangeRow {
            label: c.span.clone(),
            delta_ns: c.delta.unwrap_or(0.0),
            interval_ns: c.delta_ci.and_then(|i| Some((i.lo?, i.hi?))).or_else(|| {
                item.of_total_ci
                    .and_then(|i| Some((i.lo? * base, i.hi? * base)))
            }),
            judged: judged(c.verdict),
            verdict: verdict_words(c),
        });
    }
    Change {
        title: format!(
            "Where the time went: {} against {}",
            diff.candidate.variant, diff.baseline.variant
        ),
        rows,
    }
}
