//! One span's comparisons as plain lines (`gapscope diff --flame` prints them beside the
//! span's sampled stacks).

use super::fmt::{delta_cell, fmt_p, measure_label, opt_value, verdict_cell};
use super::Diff;

/// Every metric the diff compared for span `span`: measure, both medians, change,
/// p-value and verdict.
pub fn span_lines(diff: &Diff, span: &str) -> Vec<String> {
    let rows: Vec<String> = diff
        .metrics
        .iter()
        .filter(|c| c.span == span)
        .map(|c| {
            format!(
                "{span} {}: {} → {} ({}, {}) {}",
                measure_label(&c.measure),
                opt_value(c.unit, c.baseline.median),
                opt_value(c.unit, c.candidate.median),
                delta_cell(c),
                fmt_p(c.p_value),
                verdict_cell(c)
            )
        })
        .collect();
    if rows.is_empty() {
        vec![format!(
            "{span}: no statistics (no span of that name on both sides)"
        )]
    } else {
        rows
    }
}
