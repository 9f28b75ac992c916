//! The CSV output of a [`Diff`]: one flat row per comparison, with the section it
//! belongs to, for spreadsheets and scripts.

use serde::Serialize;

use super::compare::{Comparison, Unit};
use super::{Diff, DiffSide};

/// One CSV row: a comparison in one section of the diff.
#[derive(Serialize)]
struct CsvRow<'a> {
    section: &'a str,
    label: &'a str,
    span: &'a str,
    measure: String,
    unit: Unit,
    baseline_reps: usize,
    baseline_median: Option<f64>,
    baseline_mad: Option<f64>,
    candidate_reps: usize,
    candidate_median: Option<f64>,
    candidate_mad: Option<f64>,
    delta: Option<f64>,
    relative: Option<f64>,
    ci_lo: Option<f64>,
    ci_hi: Option<f64>,
    p_value: Option<f64>,
    /// Benjamini–Hochberg q-value over the diff's family (end to end: its p-value).
    q_value: Option<f64>,
    /// The change statistic: "ratio of geometric means", "geometric mean of per-pair
    /// ratios" or, for exact counts, "difference of medians".
    statistic: &'a str,
    delta_ci_lo: Option<f64>,
    delta_ci_hi: Option<f64>,
    verdict: String,
    share_of_change: Option<f64>,
    of_total: Option<f64>,
    of_total_ci_lo: Option<f64>,
    of_total_ci_hi: Option<f64>,
    /// Pairs compared, when paired (delta is then the median per-pair difference).
    pairs: Option<usize>,
}

impl<'a> CsvRow<'a> {
    fn of(section: &'a str, label: &'a str, c: &'a Comparison) -> Self {
        CsvRow {
            section,
            label,
            span: &c.span,
            measure: c.measure.to_string(),
            unit: c.unit,
            baseline_reps: c.baseline.reps,
            baseline_median: c.baseline.median,
            baseline_mad: c.baseline.mad,
            candidate_reps: c.candidate.reps,
            candidate_median: c.candidate.median,
            candidate_mad: c.candidate.mad,
            delta: c.delta,
            relative: c.relative,
            ci_lo: c.ci.and_then(|i| i.lo),
            ci_hi: c.ci.and_then(|i| i.hi),
            p_value: c.p_value,
            q_value: c.q_value,
            statistic: c.statistic(),
            delta_ci_lo: c.delta_ci.and_then(|i| i.lo),
            delta_ci_hi: c.delta_ci.and_then(|i| i.hi),
            verdict: c.verdict.to_string(),
            share_of_change: None,
            of_total: None,
            of_total_ci_lo: None,
            of_total_ci_hi: None,
            pairs: c.pairs,
        }
    }
}

/// The CSV of a diff: a header and one row per comparison.
pub(super) fn rows(d: &Diff) -> String {
    // The rows in the order a reader meets them (metrics, gaps, contributions and what
    // they leave unexplained, leak checks), then written; one function so that the order
    // and the writer stay together.
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut rows: Vec<CsvRow> = Vec::new();
    rows.extend(
        d.phase_table
            .iter()
            .map(|r| CsvRow::of("phase", &r.phase, &r.comparison)),
    );
    rows.extend(d.metrics.iter().map(|c| CsvRow::of("metric", &c.span, c)));
    rows.extend(d.gaps.iter().map(|g| CsvRow::of("gap", &g.span, &g.change)));
    rows.push(CsvRow::of("contribution", "total", &d.contributions.total));
    for item in &d.contributions.items {
        let mut r = CsvRow::of("contribution", &item.comparison.span, &item.comparison);
        r.share_of_change = item.share_of_change;
        r.of_total = item.of_total;
        r.of_total_ci_lo = item.of_total_ci.and_then(|i| i.lo);
        r.of_total_ci_hi = item.of_total_ci.and_then(|i| i.hi);
        rows.push(r);
    }
    let leaks: Vec<(String, String)> = d
        .leaks
        .iter()
        .map(|l| (l.side.to_string(), l.flag.metric.column().to_string()))
        .collect();
    let mut leak_rows = Vec::new();
    for (l, (side, column)) in d.leaks.iter().zip(&leaks) {
        let f = &l.flag;
        let growth = f.growth_bytes() as f64;
        let on = |s: DiffSide| if l.side == s { f.reps } else { 0 };
        leak_rows.push(CsvRow {
            section: "leak",
            label: side,
            span: &f.variant,
            measure: column.clone(),
            unit: Unit::Bytes,
            baseline_reps: on(DiffSide::Baseline),
            baseline_median: None,
            baseline_mad: None,
            candidate_reps: on(DiffSide::Candidate),
            candidate_median: None,
            candidate_mad: None,
            delta: Some(growth),
            relative: (f.first_bytes > 0).then(|| growth / f.first_bytes as f64),
            ci_lo: None,
            ci_hi: None,
            p_value: None,
            q_value: None,
            statistic: "",
            delta_ci_lo: None,
            delta_ci_hi: None,
            verdict: "possible leak".into(),
            share_of_change: None,
            of_total: None,
            of_total_ci_lo: None,
            of_total_ci_hi: None,
            pairs: None,
        });
    }
    for r in &rows {
        w.serialize(r).expect("csv row serialises");
    }
    let mut unexplained = CsvRow::of("contribution", "unexplained", &d.contributions.total);
    unexplained.span = "";
    unexplained.delta = Some(d.contributions.unexplained_ns);
    unexplained.relative = None;
    unexplained.ci_lo = None;
    unexplained.ci_hi = None;
    unexplained.p_value = None;
    unexplained.q_value = None;
    unexplained.delta_ci_lo = None;
    unexplained.delta_ci_hi = None;
    unexplained.verdict = String::new();
    unexplained.baseline_median = None;
    unexplained.candidate_median = None;
    unexplained.baseline_mad = None;
    unexplained.candidate_mad = None;
    w.serialize(&unexplained).expect("csv row serialises");
    // One row per leak-watch flag: the growth, last − first, in `delta`.
    for r in &leak_rows {
        w.serialize(r).expect("csv row serialises");
    }
    String::from_utf8(w.into_inner().expect("in memory")).expect("utf8")
}
