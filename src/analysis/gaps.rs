//! Gap attribution: time inside wrapper spans that no child accounts for, and the ranked
//! contributions of spans to the change in end-to-end time ("where the time went").
//!
//! Contributions use self time on the critical path. On the root span's thread, spans
//! nest without overlap, so a rep's end-to-end time is exactly the sum of the self times
//! of the spans on that thread; the change of end-to-end time therefore splits into
//! per-span changes of self time. Work on other threads enters only through the time the
//! critical path waits for it (e.g. `synthesis` waiting for `synthesis[i]`), and a span
//! that moves off the critical path (an async `drop`) contributes its whole former
//! self time. The per-span changes are changes of medians, which do not add exactly; the
//! remainder is reported as unexplained rather than spread over the spans.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::compare::{compare, fnv1a, Comparison, Measure, Unit};
use super::select::{present, Agg, Pairs, Side};
use super::DiffOptions;
use crate::stats::{self, median, Interval, Sample};
use crate::units::fmt_ns;

/// One side of a wrapper span's gap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GapSide {
    /// Median per-rep time not covered by any child, ns.
    pub unattributed_ns: f64,
    /// Median per-rep duration of the span, ns.
    pub span_ns: f64,
    /// `unattributed_ns` / `span_ns`.
    pub fraction: f64,
    /// Above the gap threshold of the span and above the noise floor of the end-to-end
    /// time (so a microsecond gap in a tiny helper is not flagged).
    pub flagged: bool,
}

/// Unattributed time of one wrapper span (a span with children) on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    pub span: String,
    pub baseline: Option<GapSide>,
    pub candidate: Option<GapSide>,
    /// Statistics of the change in unattributed time.
    pub change: Comparison,
    /// One line per flagged side, e.g. "gpu_prove: 10.2 s (28%) not covered by children
    /// (candidate)".
    pub flags: Vec<String>,
}

/// A span's share of the change in end-to-end time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contribution {
    /// Critical-path self time of the span (measure `critical_self`).
    pub comparison: Comparison,
    /// This span's change of medians over the total change (None when the total change
    /// has no verdict of regressed or improved, or is 0).
    pub share_of_change: Option<f64>,
    /// This span's change of medians as a fraction of the baseline's median end-to-end
    /// time (0.008 = the span added 0.8 % to the whole); None without a baseline total.
    /// It answers "does this cost more than 1 % of the whole?" with the precision of the
    /// span's own spread, which is often far tighter than the total's.
    #[serde(default)]
    pub of_total: Option<f64>,
    /// Bootstrap interval of the span's difference of medians over the same baseline
    /// median end-to-end time (the total's own median taken as fixed).
    #[serde(default)]
    pub of_total_ci: Option<Interval>,
    /// Reps in which the span had self time on the critical path, and reps counted, per
    /// side (baseline, candidate): whether the rep waited for it at all, a fact of the
    /// program's structure that no timing noise makes (an async drop: on it in every
    /// baseline rep, in no candidate rep).
    #[serde(default)]
    pub on_path: Option<OnPath>,
}

/// Reps with critical-path self time > 0 of a span, per side; [`Contribution::on_path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnPath {
    pub baseline: (usize, usize),
    pub candidate: (usize, usize),
}

impl OnPath {
    fn of(b: &[f64], c: &[f64]) -> OnPath {
        let on = |v: &[f64]| (v.iter().filter(|&&x| x > 0.0).count(), v.len());
        OnPath {
            baseline: on(b),
            candidate: on(c),
        }
    }

    /// The span left the critical path (`Some(true)`) or joined it (`Some(false)`): on
    /// it in every rep of one side and in none of the other's, with at least `min_reps`
    /// reps a side. With n reps a side that split has probability 1 / C(2n, n) if the
    /// side did not matter (Fisher's exact test; 0.008 at 5 reps a side), so an A/A run
    /// whose structure is the same on both sides cannot show it by chance.
    pub fn moved(&self, min_reps: usize) -> Option<bool> {
        let ((bo, bn), (co, cn)) = (self.baseline, self.candidate);
        if bn < min_reps || cn < min_reps {
            return None;
        }
        match (bo == bn, bo == 0, co == cn, co == 0) {
            (true, _, _, true) => Some(true),
            (_, true, true, _) => Some(false),
            _ => None,
        }
    }
}

/// Where the change in end-to-end time went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contributions {
    /// The end-to-end time: duration of the root span(s).
    pub total: Comparison,
    /// Spans whose critical-path self time changed, largest change first.
    pub items: Vec<Contribution>,
    /// Sum of the items' changes, ns.
    pub explained_ns: f64,
    /// Change of the total not accounted for by the items (medians do not add), ns.
    pub unexplained_ns: f64,
}

fn unattributed(a: &Agg) -> u64 {
    a.unattributed_ns
}

fn gap_side(side: &Side, name: &str, opts: &DiffOptions) -> Option<GapSide> {
    if !side.wrappers.contains(name) {
        return None;
    }
    let un = median(&present(&side.times(name, unattributed)))?;
    let span = median(&present(&side.times(name, |a| a.total_ns)))?;
    let end_to_end = median(
        &side
            .root_total_ns
            .iter()
            .map(|&t| t as f64)
            .collect::<Vec<_>>(),
    )
    .unwrap_or(0.0);
    let fraction = if span > 0.0 { un / span } else { 0.0 };
    Some(GapSide {
        unattributed_ns: un,
        span_ns: span,
        fraction,
        flagged: fraction > opts.gap_threshold && un >= opts.noise_floor * end_to_end && un > 0.0,
    })
}

/// Gaps of every span that has children on either side, in span-tree order.
pub(crate) fn gaps(
    base: &Side,
    cand: &Side,
    names: &[&str],
    pairs: Option<&Pairs>,
    opts: &DiffOptions,
) -> Vec<Gap> {
    names
        .par_iter()
        .filter(|n| base.wrappers.contains(**n) || cand.wrappers.contains(**n))
        .map(|&name| {
            let (b, c) = (gap_side(base, name, opts), gap_side(cand, name, opts));
            let flags = [("baseline", b), ("candidate", c)]
                .iter()
                .filter_map(|(label, g)| {
                    g.filter(|g| g.flagged).map(|g| {
                        format!(
                            "{name}: {} ({:.0}%) not covered by children ({label})",
                            fmt_ns(g.unattributed_ns),
                            g.fraction * 100.0
                        )
                    })
                })
                .collect();
            let (ub, uc) = (
                base.times(name, unattributed),
                cand.times(name, unattributed),
            );
            let paired = pairs.map(|p| p.values(&ub, &uc));
            Gap {
                span: name.into(),
                baseline: b,
                candidate: c,
                change: compare(
                    name,
                    Measure::Unattributed,
                    Unit::Ns,
                    &present(&ub),
                    &present(&uc),
                    paired.as_deref(),
                    opts,
                ),
                flags,
            }
        })
        .collect()
}

/// Name of the end-to-end span: the root's name, or "(roots)" when reps have several.
fn root_name(side: &Side) -> Option<String> {
    let roots: Vec<&str> = side
        .names
        .iter()
        .map(|n| n.as_str())
        .filter(|n| side.roots.contains(*n))
        .collect();
    match roots.as_slice() {
        [one] => Some(one.to_string()),
        [] => None,
        _ => Some("(roots)".into()),
    }
}

/// The bootstrap interval of the span's change (difference of medians of `base` and
/// `cand`, or the median of the paired differences), divided by `whole`; None when
/// either side has too few reps.
fn of_total_interval(
    base: &[f64],
    cand: &[f64],
    paired: Option<&[(f64, f64)]>,
    whole: f64,
    name: &str,
    opts: &DiffOptions,
) -> Option<Interval> {
    let seed = opts.seed ^ fnv1a(name.as_bytes()) ^ fnv1a(b"of_total").rotate_left(29);
    let level = 1.0 - opts.alpha;
    let i = match paired {
        Some(p) => {
            let d = Sample::new(p.iter().map(|(x, y)| y - x).collect()).ok()?;
            stats::bootstrap_median(&d, opts.bootstrap_resamples, level, seed)?
        }
        None => {
            let (b, c) = (
                Sample::new(base.to_vec()).ok()?,
                Sample::new(cand.to_vec()).ok()?,
            );
            stats::bootstrap_difference(&b, &c, opts.bootstrap_resamples, level, seed)?
        }
    };
    Some(i.divided_by(whole))
}

/// Ranked contributions of spans' critical-path self time to the change of the total.
pub(crate) fn contributions(
    base: &Side,
    cand: &Side,
    names: &[&str],
    pairs: Option<&Pairs>,
    opts: &DiffOptions,
) -> Contributions {
    let as_f64 = |v: &[u64]| v.iter().map(|&t| t as f64).collect::<Vec<_>>();
    let root = root_name(base)
        .or_else(|| root_name(cand))
        .unwrap_or_else(|| "(roots)".into());
    let (tb, tc) = (as_f64(&base.root_total_ns), as_f64(&cand.root_total_ns));
    let paired = pairs.map(|p| p.values_all(&tb, &tc));
    let total = compare(
        &root,
        Measure::Total,
        Unit::Ns,
        &tb,
        &tc,
        paired.as_deref(),
        opts,
    );
    let values = |side: &Side, name: &str| -> Vec<f64> {
        // A rep that did not wait for the span waited 0 for it.
        let v: Vec<f64> = side
            .times(name, |a| a.critical_self_ns)
            .into_iter()
            .map(|x| x.unwrap_or(0.0))
            .collect();
        if v.is_empty() {
            vec![0.0; side.counts.used]
        } else {
            v
        }
    };
    let mut items: Vec<Contribution> = names
        .par_iter()
        .filter_map(|&name| {
            let (b, c) = (values(base, name), values(cand, name));
            if b.iter().chain(&c).all(|&x| x == 0.0) {
                return None;
            }
            let paired = pairs.map(|p| p.values_all(&b, &c));
            let comparison = compare(
                name,
                Measure::CriticalSelf,
                Unit::Ns,
                &b,
                &c,
                paired.as_deref(),
                opts,
            );
            let delta = comparison.delta.unwrap_or(0.0);
            let total_delta = total.delta.unwrap_or(0.0);
            let whole = total.baseline.median.filter(|&m| m > 0.0);
            Some(Contribution {
                // A share of a change within noise would divide by noise.
                share_of_change: (total.verdict.is_change() && total_delta != 0.0)
                    .then(|| delta / total_delta),
                of_total: whole.and_then(|w| comparison.delta.map(|d| d / w)),
                of_total_ci: whole
                    .and_then(|w| of_total_interval(&b, &c, paired.as_deref(), w, name, opts)),
                on_path: Some(OnPath::of(&b, &c)),
                comparison,
            })
        })
        .collect();
    items.sort_by(|x, y| {
        let d = |c: &Contribution| c.comparison.delta.unwrap_or(0.0).abs();
        d(y).total_cmp(&d(x))
            .then_with(|| x.comparison.span.cmp(&y.comparison.span))
    });
    let explained_ns: f64 = items.iter().filter_map(|c| c.comparison.delta).sum();
    Contributions {
        unexplained_ns: total.delta.unwrap_or(0.0) - explained_ns,
        total,
        items,
        explained_ns,
    }
}
