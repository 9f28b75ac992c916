//! The one reader of a run folder for the charts, the report and the trace export: a run
//! loaded once with its GPU lanes, and the selections they share (measured verified reps,
//! the median-wall rep of a variant, per-rep sums of a span's time).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::lanes::GpuRecords;
use super::{RepStatus, RunData, RunRow, SpanRow, StoreError};
use crate::stats::median;
use crate::trace::selftime::Coverage;

/// Which time of a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpanTime {
    /// Its whole duration.
    Total,
    /// Duration minus its children on its own thread (spans.csv's `self_ns`): for a
    /// wrapper, this includes time spent waiting on children that run on other threads.
    SelfTime,
    /// Duration minus its children on any thread: time inside the span that no child
    /// span accounts for. Equal to the self time when every child runs on its thread.
    Unattributed,
}

/// A run folder ready to draw.
#[derive(Debug)]
pub struct RunView {
    pub data: RunData,
    pub(crate) gpu: GpuRecords,
    by_rep: BTreeMap<u32, Vec<usize>>,
    /// Indices of the spans of each family, so that a per-name sum reads only its spans.
    by_family: HashMap<String, Vec<usize>>,
    wrappers: BTreeSet<String>,
    /// Unattributed time of every span with children, by (rep, span id).
    unattributed: HashMap<(u32, u64), u64>,
    memo: Memo,
}

/// What the view's readers derive from it more than once (a chart is asked for its size
/// and then drawn once per image format; several report sections and charts ask for the
/// same span order and per-rep sums), computed once per view. On a run of millions of
/// spans each of these is a pass over every span.
#[derive(Default)]
struct Memo(std::sync::Mutex<HashMap<(TypeId, String), Arc<dyn Any + Send + Sync>>>);

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Memo")
    }
}

/// `synthesis[3]` → `synthesis[*]`: per-item spans are grouped under one name.
pub fn family(name: &str) -> Cow<'_, str> {
    // `strip_suffix` first: a name ending in `[` (read from a damaged spans.csv) has no
    // index between the brackets, and slicing one out of it would panic.
    if let Some((stem, inner)) = name.strip_suffix(']').and_then(|n| n.rsplit_once('[')) {
        if !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()) {
            return Cow::Owned(format!("{stem}[*]"));
        }
    }
    Cow::Borrowed(name)
}

/// Length of the union of `intervals` clipped to `window`.
pub fn covered_ns(intervals: &[(u64, u64)], (lo, hi): (u64, u64)) -> u64 {
    Coverage::new(intervals.iter().copied()).within(lo, hi)
}

impl RunView {
    pub fn load(dir: &Path) -> Result<Self, StoreError> {
        Ok(Self::new(RunData::load(dir)?))
    }

    /// Wraps loaded data, reading the optional GPU files from its folder.
    pub fn new(data: RunData) -> Self {
        let gpu = GpuRecords::load(&data);
        Self::with_gpu(data, gpu)
    }

    pub(crate) fn with_gpu(data: RunData, gpu: GpuRecords) -> Self {
        let mut by_rep: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut by_family: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, s) in data.spans.iter().enumerate() {
            by_rep.entry(s.rep).or_default().push(i);
            by_family
                .entry(family(&s.name).into_owned())
                .or_default()
                .push(i);
        }
        // The spans that some span names as its parent: a set of the parents only, not
        // a map of every span, which would hold more than the rows' own indices.
        let parents: HashSet<(u32, u64)> = data
            .spans
            .iter()
            .filter_map(|s| Some((s.rep, s.parent_id?)))
            .collect();
        let wrappers = data
            .spans
            .iter()
            .filter(|s| parents.contains(&(s.rep, s.span_id)))
            .map(|s| family(&s.name).into_owned())
            .collect();
        drop(parents);
        let mut children: HashMap<(u32, u64), Vec<(u64, u64)>> = HashMap::new();
        for s in &data.spans {
            if let Some(p) = s.parent_id {
                children
                    .entry((s.rep, p))
                    .or_default()
                    .push((s.start_ns, s.end_ns));
            }
        }
        let unattributed = data
            .spans
            .iter()
            .filter_map(|s| {
                let kids = children.get(&(s.rep, s.span_id))?;
                let covered = covered_ns(kids, (s.start_ns, s.end_ns));
                Some(((s.rep, s.span_id), s.duration_ns.saturating_sub(covered)))
            })
            .collect();
        RunView {
            data,
            gpu,
            by_rep,
            by_family,
            wrappers,
            unattributed,
            memo: Memo::default(),
        }
    }

    /// `make()`'s value for `key`, made the first time it is asked for and kept with the
    /// view (the view's data does not change). `key` names what is made and from what
    /// besides the view; values of different types never share a key.
    pub fn memo<T: Any + Send + Sync>(&self, key: &str, make: impl FnOnce() -> T) -> Arc<T> {
        let id = (TypeId::of::<T>(), key.to_string());
        let lock = || self.memo.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = lock().get(&id) {
            return Arc::clone(v).downcast::<T>().expect("keyed by its type");
        }
        // Made without the lock held: making one value may ask for another.
        let v = Arc::new(make());
        lock().insert(id, v.clone() as Arc<dyn Any + Send + Sync>);
        v
    }

    /// A span's time under `measure`.
    pub fn measure(&self, s: &SpanRow, measure: SpanTime) -> u64 {
        match measure {
            SpanTime::Total => s.duration_ns,
            SpanTime::SelfTime => s.self_ns,
            SpanTime::Unattributed => self
                .unattributed
                .get(&(s.rep, s.span_id))
                .copied()
                .unwrap_or(s.duration_ns),
        }
    }

    /// Variant names in the order of meta.json (the first is the baseline), then any
    /// that only runs.csv knows.
    pub fn variants(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .data
            .meta
            .variants
            .iter()
            .map(|v| v.name.clone())
            .collect();
        for r in &self.data.runs {
            if !v.contains(&r.variant) {
                v.push(r.variant.clone());
            }
        }
        v
    }

    /// Measured (not warm-up), verified reps of a variant, in iteration order.
    pub fn measured_reps(&self, variant: &str) -> Vec<&RunRow> {
        let mut v: Vec<&RunRow> = self
            .data
            .runs
            .iter()
            .filter(|r| r.variant == variant && !r.warmup && r.status == RepStatus::Ok && r.checked)
            .collect();
        v.sort_by_key(|r| (r.iteration, r.rep));
        v
    }

    /// The rep whose end-to-end wall time (runs.csv's `wall_ns`, the `prove` span) is the
    /// median of the variant's measured verified reps: for an even count, the lower of
    /// the two middle ones (equal times by rep number), so one picture stands for the
    /// variant. Every chart that draws "the median rep" draws this one.
    pub fn representative_rep(&self, variant: &str) -> Option<&RunRow> {
        let mut reps = self.measured_reps(variant);
        reps.sort_by_key(|r| (r.wall_ns, r.rep));
        let n = reps.len();
        if n == 0 {
            None
        } else {
            Some(reps[(n - 1) / 2])
        }
    }

    pub fn run_row(&self, rep: u32) -> Option<&RunRow> {
        self.data.runs.iter().find(|r| r.rep == rep)
    }

    /// Spans of one rep, in file order.
    pub fn spans_of(&self, rep: u32) -> Vec<&SpanRow> {
        self.by_rep
            .get(&rep)
            .map(|ix| ix.iter().map(|&i| &self.data.spans[i]).collect())
            .unwrap_or_default()
    }

    /// Whether spans of this name (family) have children: its self time is then the
    /// wrapper's unattributed time.
    pub fn is_wrapper(&self, name: &str) -> bool {
        self.wrappers.contains(name)
    }

    /// What to show of spans named `name`, each with its label: the total, and for a
    /// wrapper also its unattributed time, labelled `name` + `unattributed_label`.
    pub fn span_measures(&self, name: &str, unattributed_label: &str) -> Vec<(SpanTime, String)> {
        let mut out = vec![(SpanTime::Total, name.to_string())];
        if self.is_wrapper(name) {
            out.push((
                SpanTime::Unattributed,
                format!("{name}{unattributed_label}"),
            ));
        }
        out
    }

    /// The thread of a rep's root span (the run's phases' root): the critical path.
    pub fn root_thread(&self, rep: u32) -> Option<u64> {
        let spans = self.spans_of(rep);
        let root = &self.data.meta.phases().root;
        spans
            .iter()
            .find(|s| &s.name == root)
            .or_else(|| spans.iter().find(|s| s.parent_id.is_none()))
            .map(|s| s.thread_id)
    }

    /// Per measured rep of `variant`: the sum of `measure` over spans of family `name`.
    /// Reps without such a span are left out.
    /// Reads only the spans of that family, so a table of every family stays linear.
    pub fn per_rep(&self, variant: &str, name: &str, measure: SpanTime) -> Vec<(u32, u64)> {
        if !self.by_family.contains_key(name) {
            return Vec::new();
        }
        let sums = self.rep_sums(name, measure);
        self.measured_reps(variant)
            .iter()
            .filter_map(|r| sums.get(&r.rep).map(|&ns| (r.rep, ns)))
            .collect()
    }

    /// Per rep (every variant's): the sum of `measure` over spans of family `name`.
    fn rep_sums(&self, name: &str, measure: SpanTime) -> Arc<HashMap<u32, u64>> {
        self.memo(&format!("rep_sums {measure:?} {name}"), || {
            let mut sums: HashMap<u32, u64> = HashMap::new();
            for s in self.family_spans(name) {
                let e = sums.entry(s.rep).or_default();
                *e = e.saturating_add(self.measure(s, measure));
            }
            sums
        })
    }

    /// Spans of family `name` (every rep), in file order.
    pub fn family_spans(&self, name: &str) -> impl Iterator<Item = &SpanRow> {
        self.by_family
            .get(name)
            .into_iter()
            .flatten()
            .map(|&i| &self.data.spans[i])
    }

    /// Median of [`per_rep`](Self::per_rep), in ns.
    pub fn median_of(&self, variant: &str, name: &str, measure: SpanTime) -> Option<f64> {
        let v: Vec<f64> = self
            .per_rep(variant, name, measure)
            .iter()
            .map(|&(_, ns)| ns as f64)
            .collect();
        median(&v)
    }

    /// Span families in tree order: depth first from the roots, siblings by start time,
    /// over the representative rep of each variant (then any other rep), so names come
    /// in the order the prover reaches them.
    pub fn span_order(&self) -> Vec<String> {
        self.memo("span_order", || self.walk_span_order()).to_vec()
    }

    fn walk_span_order(&self) -> Vec<String> {
        let mut reps: Vec<u32> = self
            .variants()
            .iter()
            .filter_map(|v| self.representative_rep(v))
            .map(|r| r.rep)
            .collect();
        reps.extend(self.by_rep.keys().copied());
        let mut out: Vec<String> = Vec::new();
        let mut known: HashSet<String> = HashSet::new();
        let mut done: HashSet<u32> = HashSet::new();
        for rep in reps {
            if !done.insert(rep) {
                continue;
            }
            let spans = self.spans_of(rep);
            // A rep whose every name is known adds nothing: its tree is not walked (the
            // reps after the representative ones mostly repeat their names).
            if spans
                .iter()
                .all(|s| known.contains(family(&s.name).as_ref()))
            {
                continue;
            }
            let mut children: HashMap<Option<u64>, Vec<&SpanRow>> = HashMap::new();
            let ids: HashSet<u64> = spans.iter().map(|s| s.span_id).collect();
            for s in &spans {
                let parent = s.parent_id.filter(|p| ids.contains(p));
                children.entry(parent).or_default().push(s);
            }
            for c in children.values_mut() {
                c.sort_by_key(|s| (s.start_ns, s.span_id));
            }
            let mut stack: Vec<&SpanRow> = children.get(&None).cloned().unwrap_or_default();
            stack.reverse();
            while let Some(s) = stack.pop() {
                let f = family(&s.name);
                if !known.contains(f.as_ref()) {
                    known.insert(f.clone().into_owned());
                    out.push(f.into_owned());
                }
                if let Some(c) = children.get(&Some(s.span_id)) {
                    stack.extend(c.iter().rev());
                }
            }
        }
        out
    }

    /// Direct children of the root span (`prove`): the names every summary must show.
    pub fn top_level_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut known: HashSet<String> = HashSet::new();
        for (&rep, _) in self.by_rep.iter() {
            let spans = self.spans_of(rep);
            let Some(root) = spans.iter().find(|s| s.parent_id.is_none()) else {
                continue;
            };
            for name in std::iter::once(&root.name).chain(
                spans
                    .iter()
                    .filter(|s| s.parent_id == Some(root.span_id))
                    .map(|s| &s.name),
            ) {
                let f = family(name);
                if !known.contains(f.as_ref()) {
                    known.insert(f.clone().into_owned());
                    out.push(f.into_owned());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_group_indexed_names_only() {
        assert_eq!(family("synthesis[12]"), "synthesis[*]");
        assert_eq!(family("synthesis"), "synthesis");
        assert_eq!(family("a[b]"), "a[b]");
        assert_eq!(family("x[]"), "x[]");
        // Names from a damaged spans.csv: no panic, no family.
        assert_eq!(family("x["), "x[");
        assert_eq!(family("["), "[");
        assert_eq!(family("]"), "]");
    }

    #[test]
    fn coverage_counts_overlaps_once_and_clips_to_the_window() {
        assert_eq!(covered_ns(&[(0, 10), (5, 15), (30, 40)], (2, 35)), 13 + 5);
        assert_eq!(covered_ns(&[(50, 60)], (0, 40)), 0);
        assert_eq!(covered_ns(&[(0, 100), (10, 20)], (0, 100)), 100);
        assert_eq!(covered_ns(&[], (0, 1)), 0);
    }
}
