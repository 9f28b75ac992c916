//! The top of report.md: the diff's headline for each comparison, and the chart of where
//! the time went between the baseline and the first candidate, both ahead of any table.

use std::fmt::Write;

use super::chart_changes::span_change;
use super::sections::Diffs;
use crate::analysis::{self, Diff, DiffError, Section};
use crate::plot::change::{Change, ChangeRow};

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

/// The change chart of a diff: the end-to-end change, then the changes of self time on
/// the critical path (the diff's contributions; resolved ones first), with their
/// intervals in ns.
pub fn change_chart(diff: &Diff) -> Change {
    let t = &diff.contributions.total;
    let base = t.baseline.median.unwrap_or(0.0);
    // The interval of the change statistic itself, in ns: the same statistic and
    // resamples as the headline's.
    let mut rows = vec![ChangeRow {
        label: format!("end to end ({})", t.span),
        change: span_change(t),
        interval_words: None,
    }];
    // Resolved changes first, each group largest first (the contributions' order).
    let mut items: Vec<&analysis::Contribution> = diff.contributions.items.iter().collect();
    items.sort_by_key(|i| !i.comparison.verdict.is_change());
    let left_out = items.len().saturating_sub(CHART_SPANS);
    for item in items.into_iter().take(CHART_SPANS) {
        let mut change = span_change(&item.comparison);
        let mut interval_words = None;
        if change.interval_ns.is_none() {
            change.interval_ns = item
                .of_total_ci
                .and_then(|i| Some((i.lo? * base, i.hi? * base)));
            interval_words = change
                .interval_ns
                .map(|_| "the interval of its share of end to end".to_string());
        }
        rows.push(ChangeRow {
            label: item.comparison.span.clone(),
            change,
            interval_words,
        });
    }
    Change {
        title: format!(
            "Where the time went: {} against {}",
            diff.candidate.variant, diff.baseline.variant
        ),
        statistic: t.statistic().to_string(),
        rows,
        left_out,
    }
}

#[cfg(test)]
#[path = "change_chart_tests.rs"]
mod change_chart_tests;
