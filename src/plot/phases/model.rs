//! The phase chart's numbers: per variant, the median self time of each span on the
//! critical path (a wrapper's split into waiting and unattributed) and on other
//! threads, and the table's rows with the diff's change of each row's quantity.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::plot::verdict::{Changes, Quantity, SpanChange};
use crate::stats::median;
use crate::store::family;
use crate::store::{RunView, SpanRow, SpanTime};

/// Which part of a span's self time a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    /// A wrapper waiting while its children run on other threads.
    Waiting,
    /// A wrapper's time that no child covers.
    Unattributed,
    /// A leaf's own time.
    Own,
}

/// One stacked segment: a span family and a part of its self time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Seg {
    pub name: String,
    pub part: Part,
}

impl Seg {
    pub fn label(&self) -> String {
        match self.part {
            Part::Own => self.name.clone(),
            Part::Waiting => format!("{} (waiting on other threads)", self.name),
            Part::Unattributed => format!("{} (unattributed)", self.name),
        }
    }
}

/// Median self time per segment, on the critical path and elsewhere.
#[derive(Debug, Default, Clone)]
pub(crate) struct VariantPhases {
    pub variant: String,
    pub reps: usize,
    pub critical: BTreeMap<Seg, f64>,
    pub other: BTreeMap<Seg, f64>,
    /// Median over reps of each span's whole self time on the critical path (its parts
    /// together): the diff's `critical_self`.
    pub critical_self: BTreeMap<String, f64>,
    /// Span names with time on the critical path in some rep.
    pub on_critical: BTreeSet<String>,
    pub wall_ns: Option<f64>,
}

/// Ids of the spans of one rep on the critical path: those whose ancestors on their own
/// thread reach a root span (the diff's rule).
pub(crate) fn critical_ids(spans: &[&SpanRow]) -> BTreeSet<u64> {
    let by_id: HashMap<u64, &SpanRow> = spans.iter().map(|s| (s.span_id, *s)).collect();
    let mut known: HashMap<u64, bool> = HashMap::new();
    for s in spans {
        let mut chain = Vec::new();
        let mut cur = *s;
        let on = loop {
            if let Some(&k) = known.get(&cur.span_id) {
                break k;
            }
            chain.push(cur.span_id);
            match cur.parent_id {
                None => break true,
                Some(p) => match by_id.get(&p) {
                    Some(parent)
                        if parent.thread_id == cur.thread_id && chain.len() <= spans.len() =>
                    {
                        cur = parent
                    }
                    _ => break false,
                },
            }
        };
        for id in chain {
            known.insert(id, on);
        }
    }
    known
        .into_iter()
        .filter(|&(_, on)| on)
        .map(|(id, _)| id)
        .collect()
}

pub(crate) fn variant_phases(input: &RunView, variant: &str) -> VariantPhases {
    let reps = input.measured_reps(variant);
    let mut crit: BTreeMap<Seg, Vec<f64>> = BTreeMap::new();
    let mut other: BTreeMap<Seg, Vec<f64>> = BTreeMap::new();
    let mut whole: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut on_critical = BTreeSet::new();
    for (i, r) in reps.iter().enumerate() {
        let spans = input.spans_of(r.rep);
        let critical = critical_ids(&spans);
        for s in spans {
            let name = family(&s.name).into_owned();
            let map = if critical.contains(&s.span_id) {
                on_critical.insert(name.clone());
                let v = whole.entry(name.clone()).or_default();
                v.resize(i + 1, 0.0);
                v[i] += s.self_ns as f64;
                &mut crit
            } else {
                &mut other
            };
            let parts = if input.is_wrapper(&name) {
                let none = input.measure(s, SpanTime::Unattributed).min(s.self_ns);
                vec![
                    (Part::Waiting, s.self_ns - none),
                    (Part::Unattributed, none),
                ]
            } else {
                vec![(Part::Own, s.self_ns)]
            };
            for (part, ns) in parts {
                let v = map
                    .entry(Seg {
                        name: name.clone(),
                        part,
                    })
                    .or_default();
                // A segment absent from earlier reps counts as zero there.
                v.resize(i + 1, 0.0);
                v[i] += ns as f64;
            }
        }
    }
    fn finish<K: Ord>(m: BTreeMap<K, Vec<f64>>, reps: usize) -> BTreeMap<K, f64> {
        m.into_iter()
            .map(|(k, mut v)| {
                v.resize(reps, 0.0);
                (k, median(&v).unwrap_or(0.0))
            })
            .collect()
    }
    let walls: Vec<f64> = reps.iter().map(|r| r.wall_ns as f64).collect();
    VariantPhases {
        variant: variant.to_string(),
        reps: reps.len(),
        critical: finish(crit, reps.len()),
        other: finish(other, reps.len()),
        critical_self: finish(whole, reps.len()),
        on_critical,
        wall_ns: median(&walls),
    }
}

/// What a table row of the phase chart shows: a span's time on the critical path (its
/// parts together), one part of a wrapper's, or its time on other threads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Row {
    Critical(String),
    Part(Seg),
    Other(Seg),
}

impl Row {
    pub(crate) fn label(&self) -> String {
        match self {
            Row::Critical(n) => format!("{n} (self time on the critical path)"),
            Row::Part(seg) => match seg.part {
                Part::Waiting => "   of it waiting on other threads".into(),
                Part::Unattributed => "   of it in no child span".into(),
                Part::Own => seg.name.clone(),
            },
            Row::Other(seg) => format!("{} · other threads", seg.label()),
        }
    }

    pub(crate) fn value(&self, p: &VariantPhases) -> Option<f64> {
        match self {
            Row::Critical(n) => p.critical_self.get(n).copied(),
            Row::Part(seg) => p.critical.get(seg).copied(),
            Row::Other(seg) => p.other.get(seg).copied(),
        }
    }

    /// The diff's change of this row's quantity, where the diff compares it: a span's
    /// critical-path self time, or its self time when it never runs on the critical path
    /// in either variant. None for parts of a wrapper's time, for time off the critical
    /// path of a span that also runs on it, and for per-item families (`synthesis[*]`),
    /// which the diff compares item by item.
    pub(crate) fn change<'a>(
        &self,
        changes: &'a Changes,
        base: &VariantPhases,
        cand: &VariantPhases,
    ) -> Option<&'a SpanChange> {
        match self {
            Row::Critical(n) => changes.span(&cand.variant, n, Quantity::CriticalSelf),
            Row::Other(seg)
                if !base.on_critical.contains(&seg.name)
                    && !cand.on_critical.contains(&seg.name) =>
            {
                changes.span(&cand.variant, &seg.name, Quantity::SelfTime)
            }
            _ => None,
        }
    }
}

/// The table's rows: each critical-path span, its parts when it is a wrapper with both,
/// then the spans on other threads.
pub(crate) fn table_rows(crit: &[Seg], other: &[Seg]) -> Vec<Row> {
    let mut rows = Vec::new();
    for name in names_in_order(crit) {
        rows.push(Row::Critical(name.clone()));
        let parts: Vec<&Seg> = crit.iter().filter(|s| s.name == *name).collect();
        if parts.len() > 1 {
            rows.extend(parts.into_iter().cloned().map(Row::Part));
        }
    }
    rows.extend(other.iter().cloned().map(Row::Other));
    rows
}

/// Most span names the chart draws on the critical path, and most segments off it; the
/// rest are summed into one "+N other names" segment, so that a run with thousands of
/// names draws at a fixed size.
pub(crate) const MAX_NAMES: usize = 40;

/// Keeps the [`MAX_NAMES`] − 1 names with the most time on the critical path (in any
/// variant) and as many of the largest segments off it, in their order, and sums the
/// rest of each into one segment named "+N other names" (of every variant's medians:
/// a sum of medians, as the bar is).
pub(crate) fn fold_rest(
    phases: &mut [VariantPhases],
    crit: Vec<Seg>,
    other: Vec<Seg>,
) -> (Vec<Seg>, Vec<Seg>) {
    let names: Vec<String> = names_in_order(&crit).into_iter().cloned().collect();
    let crit = if names.len() <= MAX_NAMES {
        crit
    } else {
        let kept = largest(&names, |n| {
            phases
                .iter()
                .filter_map(|p| p.critical_self.get(n).copied())
                .fold(0.0, f64::max)
        });
        let rest = names.len() - kept.len();
        let agg = Seg {
            name: format!("+{rest} other names"),
            part: Part::Own,
        };
        for p in phases.iter_mut() {
            let sum = take_rest(&mut p.critical, |s| kept.contains(&s.name));
            p.critical_self.retain(|n, _| kept.contains(n));
            p.critical.insert(agg.clone(), sum);
            p.critical_self.insert(agg.name.clone(), sum);
        }
        let mut out: Vec<Seg> = crit
            .into_iter()
            .filter(|s| kept.contains(&s.name))
            .collect();
        out.push(agg);
        out
    };
    let other = if other.len() <= MAX_NAMES {
        other
    } else {
        let kept = largest(&other, |s| {
            phases
                .iter()
                .filter_map(|p| p.other.get(s).copied())
                .fold(0.0, f64::max)
        });
        let agg = Seg {
            name: format!("+{} other names", other.len() - kept.len()),
            part: Part::Own,
        };
        for p in phases.iter_mut() {
            let sum = take_rest(&mut p.other, |s| kept.contains(s));
            p.other.insert(agg.clone(), sum);
        }
        let mut out: Vec<Seg> = other.into_iter().filter(|s| kept.contains(s)).collect();
        out.push(agg);
        out
    };
    (crit, other)
}

/// Each name of `segs` once, in the order it first appears.
fn names_in_order(segs: &[Seg]) -> Vec<&String> {
    let mut seen = std::collections::HashSet::new();
    segs.iter()
        .map(|seg| &seg.name)
        .filter(|n| seen.insert(*n))
        .collect()
}

/// The [`MAX_NAMES`] − 1 items of `items` with the largest `size`.
fn largest<T: Ord + Clone>(items: &[T], size: impl Fn(&T) -> f64) -> BTreeSet<T> {
    let mut ranked: Vec<&T> = items.iter().collect();
    ranked.sort_by(|a, b| size(b).total_cmp(&size(a)));
    ranked[..MAX_NAMES - 1]
        .iter()
        .map(|t| (*t).clone())
        .collect()
}

/// Removes the entries of `map` that `keep` refuses, and returns the sum of their values.
fn take_rest(map: &mut BTreeMap<Seg, f64>, keep: impl Fn(&Seg) -> bool) -> f64 {
    let mut sum = 0.0;
    map.retain(|s, v| {
        let k = keep(s);
        if !k {
            sum += *v;
        }
        k
    });
    sum
}
