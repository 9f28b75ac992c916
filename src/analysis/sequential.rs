//! Decisions that hold whenever a run stops: `gapscope run --until-decided` adds
//! counterbalanced pairs until end to end and every span on the critical path is
//! regressed, improved or equivalent, and looks after every pair. A fixed-n interval
//! looked at after every pair would cross a floor by chance sooner or later; the
//! confidence sequence of [`crate::stats::mean_confidence_sequence`] holds at its level
//! over every number of pairs at once, so stopping on it costs no false alarms.
//!
//! The rows watched share the error: each gets alpha / k (Bonferroni over the k rows),
//! so that the chance that any of them is ever wrong stays under alpha.

use serde::{Deserialize, Serialize};

use super::compare::{abs_floor, Comparison, Measure, Unit, Verdict};
use super::{Diff, DiffOptions, Interval};
use crate::stats;

/// One watched row: its decision so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchedRow {
    pub span: String,
    pub measure: Measure,
    /// Regressed, improved or equivalent once decided; inconclusive until then.
    pub verdict: Verdict,
    /// The relative change's interval of the confidence sequence at this many pairs.
    pub interval: Interval,
    /// Pairs this many more would decide it at the spread seen so far, where that can
    /// be estimated.
    pub pairs_left: Option<usize>,
}

/// Where a sequential run stands after some pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub pairs: usize,
    /// The level each row's sequence holds at: 1 − alpha / rows.
    pub level: f64,
    pub rows: Vec<WatchedRow>,
}

impl Progress {
    /// Every watched row is regressed, improved or equivalent.
    pub fn decided(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.verdict != Verdict::Inconclusive)
    }

    /// The most pairs any undecided row still needs, where all can be estimated.
    pub fn pairs_left(&self) -> Option<usize> {
        let open: Vec<&WatchedRow> = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Inconclusive)
            .collect();
        if open.is_empty() {
            return Some(0);
        }
        open.iter()
            .map(|r| r.pairs_left)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()
    }

    /// "12 pairs: prove (total) +3.1% [+1.2%, +5.0%] regressed; still open: msm_h
    /// (self on critical path), about 6 more pairs".
    pub fn line(&self) -> String {
        let open: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Inconclusive)
            .map(|r| format!("{} ({})", r.span, r.measure))
            .collect();
        let decided = self.rows.len() - open.len();
        let mut s = format!(
            "{} pairs: {decided} of {} watched rows decided",
            self.pairs,
            self.rows.len()
        );
        if let Some(e2e) = self.rows.first() {
            let pct = |x: Option<f64>| x.map_or("?".into(), |v| format!("{:+.1}%", v * 100.0));
            s.push_str(&format!(
                "; {} [{}, {}] {}",
                e2e.span,
                pct(e2e.interval.lo),
                pct(e2e.interval.hi),
                e2e.verdict
            ));
        }
        if !open.is_empty() {
            let shown: Vec<&str> = open.iter().take(4).map(String::as_str).collect();
            s.push_str(&format!("; open: {}", shown.join(", ")));
            if open.len() > 4 {
                s.push_str(&format!(" and {} more", open.len() - 4));
            }
            match self.pairs_left() {
                Some(n) => s.push_str(&format!("; about {n} more pairs")),
                None => s.push_str("; too few pairs to estimate how many more"),
            }
        }
        s
    }
}

/// The watched rows of a paired diff (end to end, then every span's self time on the
/// critical path) judged on their confidence sequences; None when the diff did not pair
/// its reps (a sequential run always alternates its variants).
pub fn progress(d: &Diff, opts: &DiffOptions) -> Option<Progress> {
    let pairs = d.pairs?;
    let end_to_end = d.contributions.total.baseline.median;
    let mut watched: Vec<&Comparison> = vec![&d.contributions.total];
    watched.extend(
        d.contributions
            .items
            .iter()
            .filter(|i| {
                i.comparison.baseline.median.unwrap_or(0.0) > 0.0
                    || i.comparison.candidate.median.unwrap_or(0.0) > 0.0
            })
            .map(|i| &i.comparison),
    );
    let alpha = opts.alpha / watched.len() as f64;
    let rows = watched
        .into_iter()
        .map(|c| watch(c, alpha, abs_floor(c.unit, opts, end_to_end), opts))
        .collect();
    Some(Progress {
        pairs,
        level: 1.0 - alpha,
        rows,
    })
}

fn watch(c: &Comparison, alpha: f64, floor: f64, opts: &DiffOptions) -> WatchedRow {
    let undefined = Interval {
        lo: None,
        hi: None,
        level: 1.0 - alpha,
    };
    let mut row = WatchedRow {
        span: c.span.clone(),
        measure: c.measure.clone(),
        verdict: Verdict::Inconclusive,
        interval: undefined,
        pairs_left: None,
    };
    let Some((tests, p)) = c.tests.clone().and_then(|t| t.paired.map(|p| (t, p))) else {
        return row;
    };
    let n = c.pairs.unwrap_or(0);
    if n < 2 {
        return row;
    }
    let sd = p.se * (n as f64).sqrt();
    let (lo, hi) = stats::confidence_sequence_of(p.estimate, sd, n, alpha);
    let rel = |x: f64| (x.is_finite()).then(|| x.exp() - 1.0);
    row.interval = Interval {
        lo: rel(lo),
        hi: rel(hi),
        level: 1.0 - alpha,
    };
    // Floors in log units: the relative floor, and the absolute one over the baseline.
    let base = tests.base_gm;
    let rel_floor = (1.0 + opts.noise_floor).ln();
    let abs_rel = if base > 0.0 { floor / base } else { 0.0 };
    let abs_floor = (1.0 + abs_rel).ln();
    let beyond = lo > rel_floor.max(abs_floor) || hi < -rel_floor.max(abs_floor);
    let inside = |f: f64| lo >= -f && hi <= f;
    row.verdict = if beyond && c.unit != Unit::Cores {
        if lo > 0.0 {
            Verdict::Regressed
        } else {
            Verdict::Improved
        }
    } else if inside(rel_floor) || inside(abs_floor) {
        Verdict::Equivalent
    } else {
        Verdict::Inconclusive
    };
    if row.verdict == Verdict::Inconclusive {
        // The pairs at which the sequence, at this spread, would be narrow enough to
        // lie beyond the nearer floor or inside the farther one.
        let fl = rel_floor.max(abs_floor);
        let target = (p.estimate.abs() - fl).abs();
        if target > 1e-12 && sd > 0.0 {
            row.pairs_left = (n + 1..=100_000)
                .find(|&m| {
                    let (a, b) = stats::confidence_sequence_of(0.0, sd, m, alpha);
                    b.is_finite() && (b - a) / 2.0 <= target
                })
                .map(|m| m - n);
        }
    }
    row
}

/// Judges the watched rows of a diff of a run that stopped when its answer was known
/// (`run --until-decided`) on their confidence sequences: a fixed-n test at a stop chosen
/// by looking does not hold its level, and could contradict the decision the run stopped
/// on. The rows' intervals become the sequence's; the headline follows; a note says so.
pub(crate) fn apply(d: &mut Diff, opts: &DiffOptions) {
    let Some(p) = progress(d, opts) else {
        return;
    };
    let why = format!(
        "confidence sequence at {:.2}% (the run stopped when its answer was known)",
        p.level * 100.0
    );
    let set = |c: &mut Comparison, r: &WatchedRow| {
        c.verdict = r.verdict;
        c.ci = Some(r.interval);
        c.delta_ci = c.tests.as_ref().map(|t| Interval {
            lo: r.interval.lo.map(|x| x * t.base_gm),
            hi: r.interval.hi.map(|x| x * t.base_gm),
            level: r.interval.level,
        });
        c.why = Some(why.clone());
        c.more_reps = r.pairs_left;
    };
    let mut rows = p.rows.iter();
    if let Some(r) = rows.next() {
        set(&mut d.contributions.total, r);
        d.headline.end_to_end = d.contributions.total.clone();
        for c in d
            .metrics
            .iter_mut()
            .filter(|c| c.span == r.span && c.measure == Measure::Total && c.unit == Unit::Ns)
        {
            set(c, r);
        }
    }
    for r in rows {
        if let Some(i) = d
            .contributions
            .items
            .iter_mut()
            .find(|i| i.comparison.span == r.span)
        {
            set(&mut i.comparison, r);
        }
    }
    d.notes.push(format!(
        "this run stopped when its answer was known (--until-decided, {} pairs): end to end \
         and the spans' self time on the critical path are judged on their confidence \
         sequences ({:.2}% each), which hold wherever the run stopped; the other rows' \
         verdicts are fixed-n tests, which do not account for the choice of when to stop",
        p.pairs,
        p.level * 100.0
    ));
}
