//! Samples to spans. Each sample goes to the innermost span open at its timestamp on its
//! own thread. A sample on a thread with no span open then (a thread a C/C++ library
//! started, or a pool worker between tasks) goes to the innermost span open on the
//! prove thread at that time, marked `foreign`. Samples outside the rep's root span
//! count as `outside` and are not kept.

use std::collections::BTreeMap;

use super::sampler::RawSample;
use super::symbolize::{fold, Symbolizer};
use super::{FoldedRow, ProfileCounts};

/// One span's interval, as the recorder drained it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanInterval {
    pub id: u64,
    pub name: String,
    pub thread_id: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

impl SpanInterval {
    fn contains(&self, t: u64) -> bool {
        self.start_ns <= t && t < self.end_ns
    }
}

/// The innermost span of `spans` (one thread's) open at `t`: of those open, the one that
/// started last (spans nest on a thread).
fn innermost(spans: &[&SpanInterval], t: u64) -> Option<u64> {
    spans
        .iter()
        .filter(|s| s.contains(t))
        .max_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)))
        .map(|s| s.id)
}

/// Attributes `samples` to `spans` (one rep's, `root` its root span) and folds their
/// stacks into rows, counted per (span, own/foreign, stack).
pub fn attribute(
    spans: &[SpanInterval],
    root: u64,
    samples: &[RawSample],
    sym: &mut dyn Symbolizer,
) -> (Vec<FoldedRow>, ProfileCounts) {
    let mut by_thread: BTreeMap<u64, Vec<&SpanInterval>> = BTreeMap::new();
    for s in spans {
        by_thread.entry(s.thread_id).or_default().push(s);
    }
    let names: BTreeMap<u64, &str> = spans.iter().map(|s| (s.id, s.name.as_str())).collect();
    let prove_thread = spans.iter().find(|s| s.id == root).map(|s| s.thread_id);
    let none = Vec::new();
    let prove_spans = prove_thread
        .and_then(|t| by_thread.get(&t))
        .unwrap_or(&none);
    let mut counts = ProfileCounts {
        samples: samples.len() as u64,
        ..Default::default()
    };
    let mut folded: BTreeMap<(u64, bool, Vec<String>), u64> = BTreeMap::new();
    for smp in samples {
        let own = by_thread
            .get(&u64::from(smp.tid))
            .and_then(|v| innermost(v, smp.time_ns));
        let (span, foreign) = match own {
            Some(id) => (id, false),
            None => match innermost(prove_spans, smp.time_ns) {
                Some(id) => (id, true),
                None => {
                    counts.outside += 1;
                    continue;
                }
            },
        };
        if foreign {
            counts.foreign += 1;
        } else {
            counts.own += 1;
        }
        *folded
            .entry((span, foreign, fold(&smp.chain, sym)))
            .or_default() += 1;
    }
    let rows = folded
        .into_iter()
        .map(|((span_id, foreign, frames), count)| FoldedRow {
            span_id,
            span: names.get(&span_id).copied().unwrap_or("?").to_string(),
            foreign,
            frames,
            count,
        })
        .collect();
    (rows, counts)
}
