//! The gap of a wrapper span, per rep ([`RepGap`]: the wrapper, its inner GPU time and the
//! time outside it), and what the host does while no kernel runs: the gap (the wrapper's
//! time outside the inner intervals) split by the spans inside the wrapper, on
//! any thread. Each span counts its *self* intervals (its time less its children's on its
//! own thread) that fall in the gap, so nested spans never count one instant twice on a
//! thread; spans of two threads that run at once both count (the gap's 10 ms can hold
//! 10 ms of NTT preparation on one thread and 10 ms of a CPU MSM on another). Upstream's
//! opaque call, instrumented from inside (`ntt_h`, `b_g2_msm`, `prep`, …), is the case it
//! is for: the gap chart names the host phases that fill the no-kernel time.

use std::collections::{BTreeMap, HashMap};

use crate::stats::median;
use crate::store::ActivityKind;
use crate::store::{RunView, SpanRow, SpanTime};
use crate::trace::selftime::Coverage;

/// The wrapper and inner spans a run's chart uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GapNames {
    pub wrapper: String,
    pub inner: Vec<String>,
    /// Named by the experiment (`[workload] gaps`), not the run's phases.
    pub configured: bool,
}

impl GapNames {
    /// The experiment's `gaps` where the run's meta.json has it, else the wrapper and
    /// inner spans of the run's phases (the prover's: `gpu_prove` and its compute
    /// children, `kernels` and `b_g2_msm`, so that without CUPTI records the chart's gap
    /// is the diff's unattributed time of the wrapper less its bookkeeping children).
    /// A run whose phases name no wrapper has an empty one, which no span matches.
    pub fn of(input: &RunView) -> GapNames {
        match &input.data.meta.gaps {
            Some(g) => GapNames {
                wrapper: g.wrapper.clone(),
                inner: g.inner.clone(),
                configured: true,
            },
            None => {
                let phases = input.data.meta.phases();
                GapNames {
                    wrapper: phases.wrapper.clone().unwrap_or_default(),
                    inner: phases.inner.clone(),
                    configured: false,
                }
            }
        }
    }

    pub(crate) fn is_inner(&self, name: &str) -> bool {
        self.inner.iter().any(|n| n == name)
    }

    pub(crate) fn inner_list(&self) -> String {
        if self.inner.is_empty() {
            "none named".into()
        } else {
            self.inner.join(", ")
        }
    }
}

/// Where a rep's inner GPU time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InnerSource {
    /// Kernel records of CUPTI, on the span clock.
    Cupti,
    /// The inner spans (the backend's compute children, or `gaps.inner`).
    Span,
}

impl InnerSource {
    pub fn describe(self, names: &GapNames) -> String {
        match self {
            InnerSource::Cupti => "GPU kernels (CUPTI)".into(),
            InnerSource::Span => format!("the inner spans ({})", names.inner_list()),
        }
    }
}

/// One rep's wrapper, its inner intervals (relative to the wrapper's start) and the gap.
#[derive(Debug, Clone, PartialEq)]
pub struct RepGap {
    pub rep: u32,
    pub iteration: u32,
    pub outer_ns: u64,
    pub inner: Vec<(u64, u64)>,
    pub source: InnerSource,
    pub inner_ns: u64,
    pub gap_ns: u64,
    /// The wrapper's other children on its thread, relative to its start: what part of
    /// the gap is measured by some other span.
    pub others: Vec<(String, u64, u64)>,
    /// The part of the wrapper no child span (on any thread) accounts for.
    pub unattributed_ns: u64,
}

impl RepGap {
    pub fn gap_fraction(&self) -> f64 {
        if self.outer_ns == 0 {
            0.0
        } else {
            self.gap_ns as f64 / self.outer_ns as f64
        }
    }
}

/// The gap of every measured rep of `variant` that has a wrapper span ([`GapNames`]).
pub fn rep_gaps(input: &RunView, variant: &str) -> Vec<RepGap> {
    rep_gaps_of(input, variant, &GapNames::of(input))
}

/// The gap of every measured rep of `variant` that has a span named `names.wrapper`.
pub fn rep_gaps_of(input: &RunView, variant: &str, names: &GapNames) -> Vec<RepGap> {
    input
        .measured_reps(variant)
        .iter()
        .filter_map(|r| {
            let spans = input.spans_of(r.rep);
            let outer = spans
                .iter()
                .filter(|s| s.name == names.wrapper)
                .min_by_key(|s| s.start_ns)?;
            let (lo, hi) = (outer.start_ns, outer.end_ns.max(outer.start_ns));
            let clip =
                |a: u64, b: u64| (b > lo && a < hi).then(|| (a.max(lo) - lo, b.min(hi) - lo));
            let kernels: Vec<(u64, u64)> = input
                .gpu
                .activity_of(r.rep)
                .iter()
                .filter(|a| a.kind == ActivityKind::Kernel.as_str())
                .filter_map(|a| clip(a.start_ns, a.end_ns))
                .collect();
            let (inner, source) = if kernels.is_empty() {
                let spans: Vec<(u64, u64)> = spans
                    .iter()
                    .filter(|s| names.is_inner(&s.name))
                    .filter_map(|s| clip(s.start_ns, s.end_ns))
                    .collect();
                (spans, InnerSource::Span)
            } else {
                (kernels, InnerSource::Cupti)
            };
            // Overlapping inner intervals count once.
            let merged = Coverage::new(inner).intervals().to_vec();
            let others = spans
                .iter()
                .filter(|s| {
                    s.parent_id == Some(outer.span_id)
                        && s.thread_id == outer.thread_id
                        && !names.is_inner(&s.name)
                })
                .filter(|s| s.end_ns > lo && s.start_ns < hi)
                .map(|s| {
                    (
                        s.name.to_string(),
                        s.start_ns.max(lo) - lo,
                        s.end_ns.min(hi) - lo,
                    )
                })
                .collect();
            let inner_ns: u64 = merged.iter().map(|(a, b)| b - a).sum();
            let outer_ns = hi - lo;
            Some(RepGap {
                rep: r.rep,
                iteration: r.iteration,
                outer_ns,
                inner: merged,
                source,
                inner_ns,
                gap_ns: outer_ns.saturating_sub(inner_ns),
                others,
                unattributed_ns: input.measure(outer, SpanTime::Unattributed),
            })
        })
        .collect()
}

/// One span name's share of a variant's gap.
#[derive(Debug, Clone, PartialEq)]
pub struct Filler {
    pub name: String,
    /// Median over the variant's reps of the span's self time inside the gap, ns (reps
    /// without the span count 0).
    pub median_ns: f64,
}

/// `[a, b)` minus the union of `cover` (sorted, disjoint), as disjoint intervals.
fn minus(a: u64, b: u64, cover: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = a;
    for &(x, y) in cover {
        if y <= at || x >= b {
            continue;
        }
        if x > at {
            out.push((at, x));
        }
        at = at.max(y);
        if at >= b {
            break;
        }
    }
    if at < b {
        out.push((at, b));
    }
    out
}

/// Total overlap of two sorted, disjoint interval lists.
fn overlap(x: &[(u64, u64)], y: &[(u64, u64)]) -> u64 {
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < x.len() && j < y.len() {
        let (a, b) = (x[i].0.max(y[j].0), x[i].1.min(y[j].1));
        if b > a {
            sum += b - a;
        }
        if x[i].1 < y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

/// Ids of the spans below the span `wrapper` (its descendants). Each span's parent chain
/// is walked only up to the first span already decided, and every span it passed gets
/// that answer: linear in the spans however deep the tree. A chain longer than the rep
/// has spans (a cycle: refused when a run folder is read) is not below it.
fn below_wrapper(
    spans: &[&SpanRow],
    by_id: &HashMap<u64, &SpanRow>,
    wrapper: u64,
) -> std::collections::HashSet<u64> {
    let mut known: HashMap<u64, bool> = HashMap::from([(wrapper, true)]);
    let mut below = std::collections::HashSet::new();
    for s in spans {
        let mut walked = Vec::new();
        let mut p = s.parent_id;
        let answer = loop {
            match p {
                Some(id) if walked.len() <= spans.len() => {
                    if let Some(&k) = known.get(&id) {
                        break k;
                    }
                    walked.push(id);
                    p = by_id.get(&id).and_then(|q| q.parent_id);
                }
                _ => break false,
            }
        };
        // The ancestors passed are below the wrapper when their own parent is.
        for id in walked {
            known.insert(id, answer);
        }
        if answer {
            below.insert(s.span_id);
        }
    }
    below
}

/// Self time inside the gap of every span under the rep's wrapper, by name: the gap is
/// `gap` (relative to the wrapper's start `lo`).
fn rep_fill(spans: &[&SpanRow], wrapper: &SpanRow, gap: &[(u64, u64)]) -> BTreeMap<String, u64> {
    let by_id: HashMap<u64, &SpanRow> = spans.iter().map(|s| (s.span_id, *s)).collect();
    let below = below_wrapper(spans, &by_id, wrapper.span_id);
    let mut children: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    for s in spans {
        if let Some(p) = s.parent_id.and_then(|id| by_id.get(&id)) {
            if p.thread_id == s.thread_id {
                children
                    .entry(p.span_id)
                    .or_default()
                    .push((s.start_ns, s.end_ns.max(s.start_ns)));
            }
        }
    }
    let lo = wrapper.start_ns;
    let mut fill = BTreeMap::new();
    // Inner spans need no exclusion: with CUPTI's kernels as the inner time a span named
    // `kernels` has host time outside them like any other, and with the inner spans as
    // the inner time the gap lies outside them already.
    for s in spans.iter().filter(|s| below.contains(&s.span_id)) {
        let kids = children.remove(&s.span_id).unwrap_or_default();
        let cover = Coverage::new(kids);
        let own: Vec<(u64, u64)> = minus(s.start_ns, s.end_ns.max(s.start_ns), cover.intervals())
            .into_iter()
            .filter_map(|(a, b)| {
                let (a, b) = (a.max(lo), b.min(wrapper.end_ns));
                (b > a).then(|| (a - lo, b - lo))
            })
            .collect();
        let ns = overlap(&own, gap);
        if ns > 0 {
            *fill.entry(s.name.to_string()).or_insert(0) += ns;
        }
    }
    fill
}

/// The gap of one rep as intervals relative to the wrapper's start.
fn gap_intervals(r: &RepGap) -> Vec<(u64, u64)> {
    minus(0, r.outer_ns, &r.inner)
}

/// The spans that fill the gaps of `reps` (one variant's, from [`rep_gaps_of`]), largest
/// median first; the wrapper itself never fills them.
pub fn fillers(input: &RunView, reps: &[RepGap], names: &GapNames) -> Vec<Filler> {
    let mut per_name: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (k, r) in reps.iter().enumerate() {
        let spans = input.spans_of(r.rep);
        let Some(wrapper) = spans
            .iter()
            .filter(|s| s.name == names.wrapper)
            .min_by_key(|s| s.start_ns)
        else {
            continue;
        };
        for (name, ns) in rep_fill(&spans, wrapper, &gap_intervals(r)) {
            let v = per_name
                .entry(name)
                .or_insert_with(|| vec![0.0; reps.len()]);
            v[k] += ns as f64;
        }
    }
    let mut out: Vec<Filler> = per_name
        .into_iter()
        .filter_map(|(name, v)| {
            Some(Filler {
                name,
                median_ns: median(&v)?,
            })
        })
        .filter(|f| f.median_ns > 0.0)
        .collect();
    out.sort_by(|a, b| {
        b.median_ns
            .total_cmp(&a.median_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// How many spans [`fill_lines`] names per side.
pub const FILL_ROWS: usize = 6;

/// What fills the wrapper's no-kernel time on each side, as text lines for the diff and
/// the report ("no-kernel time of gpu_prove, by span …"); `None` where neither side has
/// CUPTI kernel records (without them the gap is the span-based one the diff's Gaps
/// table already splits).
pub fn fill_lines(sides: [(&RunView, &str); 2]) -> Option<Vec<String>> {
    let gaps = sides.map(|(view, variant)| {
        let names = GapNames::of(view);
        let reps = rep_gaps_of(view, variant, &names);
        (names, reps)
    });
    if !gaps
        .iter()
        .any(|(_, reps)| reps.iter().any(|r| r.source == InnerSource::Cupti))
    {
        return None;
    }
    let mut lines = vec![format!(
        "No-kernel time of {} by span (each span's self time while no kernel ran, on any \
         thread; median per rep; spans on two threads at once both count):",
        gaps[0].0.wrapper
    )];
    for ((label, (view, variant)), (names, reps)) in
        ["baseline", "candidate"].iter().zip(sides).zip(&gaps)
    {
        let gap_ns: Vec<f64> = reps.iter().map(|r| r.gap_ns as f64).collect();
        let fill = fillers(view, reps, names);
        let named: Vec<String> = fill
            .iter()
            .take(FILL_ROWS)
            .map(|f| format!("{} {}", f.name, crate::units::fmt_ns(f.median_ns)))
            .collect();
        let gap = median(&gap_ns).map_or("no gap".to_string(), |g| {
            format!("gap {}", crate::units::fmt_ns(g))
        });
        lines.push(format!(
            "  {label} ({variant}, {gap}): {}",
            if named.is_empty() {
                "no span inside the wrapper ran in it".to_string()
            } else {
                named.join(", ")
            }
        ));
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_arithmetic() {
        assert_eq!(minus(0, 10, &[(2, 3), (5, 7)]), [(0, 2), (3, 5), (7, 10)]);
        assert_eq!(minus(0, 10, &[(0, 10)]), []);
        assert_eq!(minus(4, 6, &[(0, 5)]), [(5, 6)]);
        assert_eq!(overlap(&[(0, 4), (6, 10)], &[(2, 7)]), 3);
        assert_eq!(overlap(&[], &[(0, 1)]), 0);
    }

    fn span(id: u64, parent: Option<u64>, name: &str, thread: u64, a: u64, b: u64) -> SpanRow {
        SpanRow {
            span_id: id,
            parent_id: parent,
            name: name.into(),
            thread_id: thread,
            start_ns: a,
            end_ns: b,
            duration_ns: b - a,
            ..SpanRow::sample()
        }
    }

    #[test]
    fn self_time_in_the_gap_counts_once_per_thread_and_every_thread_counts() {
        // gpu_prove [0, 100); kernels run in [40, 60): the gap is [0, 40) and [60, 100).
        // On the wrapper's thread: call [0, 100) with prep [0, 30) inside it.
        // On another thread: msm [20, 80), a child of call.
        let w = span(1, None, "gpu_prove", 1, 0, 100);
        let call = span(2, Some(1), "call", 1, 0, 100);
        let prep = span(3, Some(2), "prep", 1, 0, 30);
        let msm = span(4, Some(2), "msm", 2, 20, 80);
        let kernels = span(5, Some(2), "kernels", 1, 40, 60);
        let outside = span(6, None, "synthesis", 1, 0, 100);
        let all = [&w, &call, &prep, &msm, &kernels, &outside];
        let gap = minus(0, 100, &[(40, 60)]);
        let fill = rep_fill(&all, &w, &gap);
        // prep: [0, 30) all in the gap. call's self time on its thread: [30, 40) and
        // [60, 100) in the gap (the kernels span is its child there). msm: [20, 40) and
        // [60, 80). The kernels span lies outside the gap; the span outside the wrapper
        // and the wrapper itself never count.
        assert_eq!(fill.get("prep"), Some(&30));
        assert_eq!(fill.get("call"), Some(&50));
        assert_eq!(fill.get("msm"), Some(&40));
        assert_eq!(fill.get("kernels"), None);
        assert_eq!(fill.get("synthesis"), None);
        assert_eq!(fill.get("gpu_prove"), None);
    }
}
