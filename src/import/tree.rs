//! The span tree of one rep, whatever the format: a span nests under the parent its id
//! names where the format has ids (OTLP), else under the innermost span of its thread
//! whose interval holds it (Chrome, NVTX); a span with neither is a child of the rep's
//! root. Self time is as for gapscope's own spans: the duration minus the union of the
//! children on the same thread. Linear after one sort, so a rep of millions of spans
//! takes seconds.

use std::collections::HashMap;

use rayon::prelude::*;

use super::model::Span;

/// Marks the root in [`Tree::parent`].
pub const ROOT: u32 = u32::MAX;

/// Parents (positions in the rep's span list; [`ROOT`] for the root itself) and self
/// times of a rep's spans.
#[derive(Debug)]
pub struct Tree {
    pub parent: Vec<u32>,
    pub self_ns: Vec<u64>,
    /// Spans whose named parent was not in the rep (another rep, or not in the file):
    /// they hang under the root.
    pub orphans: u64,
    /// Parent links dropped because they made a loop (a damaged file).
    pub loops: u64,
}

/// The tree of `spans`, `spans[root]` being the rep's root (it contains the rep).
pub fn build(spans: &[&Span], root: usize) -> Tree {
    let n = spans.len();
    let mut parent = vec![root as u32; n];
    parent[root] = ROOT;
    // Most formats' spans carry no ids (Chrome, NVTX): nothing to place by them.
    let any_ids = spans.par_iter().any(|s| s.id.is_some());
    let (orphans, loops) = if any_ids {
        by_ids(spans, root, &mut parent)
    } else {
        (0, 0)
    };
    by_time(spans, root, &mut parent);
    let self_ns = self_times(spans, &parent);
    Tree {
        parent,
        self_ns,
        orphans,
        loops,
    }
}

/// Parents of spans that carry ids; returns (orphans, loops broken).
fn by_ids(spans: &[&Span], root: usize, parent: &mut [u32]) -> (u64, u64) {
    let pos: HashMap<u64, u32> = spans
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.id.map(|id| (id, i as u32)))
        .collect();
    let mut orphans = 0;
    for (i, s) in spans.iter().enumerate() {
        if i == root || s.id.is_none() {
            continue;
        }
        match s.parent.map(|p| pos.get(&p)) {
            Some(Some(&p)) if p as usize != i => parent[i] = p,
            Some(_) => orphans += 1,
            None => {}
        }
    }
    // A chain that loops (a damaged file) is cut where the walk meets itself.
    const NEW: u8 = 0;
    const ON_WALK: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; spans.len()];
    state[root] = DONE;
    let mut walk = Vec::new();
    let mut loops = 0;
    for start in 0..spans.len() {
        let mut cur = start;
        while state[cur] == NEW {
            state[cur] = ON_WALK;
            walk.push(cur);
            let p = parent[cur] as usize;
            if state[p] == ON_WALK {
                parent[cur] = root as u32;
                loops += 1;
                break;
            }
            cur = p;
        }
        for i in walk.drain(..) {
            state[i] = DONE;
        }
    }
    (orphans, loops)
}

/// Parents of spans without ids: the innermost span of the same thread that holds
/// them (ties: the longer, then the earlier in the file), else the root.
fn by_time(spans: &[&Span], root: usize, parent: &mut [u32]) {
    // Sorted on every core, each span's key beside it (not looked up through `spans`
    // at every comparison or in the walk): thread, start, end (the longer first), then
    // the root before any other span, then the earlier in the file. Its last field is
    // 0 for the root and 1 + the position of any other span (24 bytes in all).
    let mut order: Vec<(u32, u64, std::cmp::Reverse<u64>, u32)> = (0..spans.len())
        .into_par_iter()
        .filter(|&i| i == root || spans[i].id.is_none())
        .map(|i| {
            let s = spans[i];
            let tie = if i == root { 0 } else { i as u32 + 1 };
            (s.thread, s.start_ns, std::cmp::Reverse(s.end_ns), tie)
        })
        .collect();
    order.par_sort_unstable();
    let at = |tie: u32| if tie == 0 { root } else { tie as usize - 1 };
    // The open spans of the thread: (start, end, position).
    let mut stack: Vec<(u64, u64, u32)> = Vec::new();
    let mut thread = None;
    for &(t, start, std::cmp::Reverse(end), tie) in &order {
        if thread != Some(t) {
            stack.clear();
            thread = Some(t);
        }
        while let Some(&(a, b, _)) = stack.last() {
            if b >= end && a <= start {
                break;
            }
            stack.pop();
        }
        let i = at(tie);
        if i != root {
            if let Some(&(.., top)) = stack.last() {
                parent[i] = top;
            }
        }
        stack.push((start, end, i as u32));
    }
}

/// The (parent, start, end) of every span under a parent on its thread, sorted: placed
/// by parent in one pass (a count per parent, then each in its place), then each
/// parent's few sorted, rather than all of them sorted at once.
fn kids_by_parent(spans: &[&Span], parent: &[u32]) -> Vec<(u32, u64, u64)> {
    // Each span's parent where it is on the parent's thread, else ROOT (on every core).
    let kid_of: Vec<u32> = (spans.par_iter().zip(parent))
        .map(|(s, &p)| {
            let same = p != ROOT && spans[p as usize].thread == s.thread;
            if same {
                p
            } else {
                ROOT
            }
        })
        .collect();
    let mut at = vec![0usize; spans.len() + 1];
    for &p in &kid_of {
        if p != ROOT {
            at[p as usize + 1] += 1;
        }
    }
    for k in 1..at.len() {
        at[k] += at[k - 1];
    }
    let mut kids = vec![(0u32, 0u64, 0u64); at[spans.len()]];
    let mut next = at;
    for (i, &p) in kid_of.iter().enumerate() {
        if p != ROOT {
            let slot = &mut next[p as usize];
            kids[*slot] = (p, spans[i].start_ns, spans[i].end_ns);
            *slot += 1;
        }
    }
    kids.par_chunk_by_mut(|a, b| a.0 == b.0)
        .for_each(|same| same.sort_unstable());
    kids
}

/// Each span's duration minus the union of its same-thread children's intervals.
fn self_times(spans: &[&Span], parent: &[u32]) -> Vec<u64> {
    let kids = kids_by_parent(spans, parent);
    let mut self_ns: Vec<u64> = spans.iter().map(|s| s.end_ns - s.start_ns).collect();
    let mut k = 0;
    while k < kids.len() {
        let p = kids[k].0;
        let (lo, hi) = (spans[p as usize].start_ns, spans[p as usize].end_ns);
        let mut covered = 0;
        let mut cur: Option<(u64, u64)> = None;
        while k < kids.len() && kids[k].0 == p {
            let (a, b) = (kids[k].1.max(lo), kids[k].2.min(hi));
            k += 1;
            if a >= b {
                continue;
            }
            match cur {
                Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
                Some((ca, cb)) => {
                    covered += cb - ca;
                    cur = Some((a, b));
                }
                None => cur = Some((a, b)),
            }
        }
        if let Some((ca, cb)) = cur {
            covered += cb - ca;
        }
        self_ns[p as usize] = self_ns[p as usize].saturating_sub(covered);
    }
    self_ns
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn span(thread: u32, start_ns: u64, end_ns: u64) -> Span {
        Span::plain(0, thread, start_ns, end_ns)
    }

    #[test]
    fn spans_nest_by_time_per_thread_and_self_time_subtracts_same_thread_children() {
        let v = [
            span(0, 0, 100), // root
            span(0, 10, 60), // a
            span(0, 20, 30), // a's child
            span(0, 50, 90), // overlaps a's end: not inside a, so under the root
            span(1, 15, 95), // another thread: under the root, not covering it
            span(1, 20, 40), // under the thread-1 span
        ];
        let refs: Vec<&Span> = v.iter().collect();
        let t = build(&refs, 0);
        assert_eq!(t.parent, vec![ROOT, 0, 1, 0, 0, 4]);
        // Root: 100 minus the union of [10,60) and [50,90) on its thread = 20.
        assert_eq!(t.self_ns, vec![20, 40, 10, 40, 60, 20]);
    }

    #[test]
    fn ids_name_parents_across_threads_and_a_loop_is_cut() {
        let mut v = [
            span(0, 0, 100),
            span(0, 10, 20),
            span(1, 12, 18),
            span(2, 1, 2),
        ];
        v[1].id = Some(1);
        v[2].id = Some(2);
        v[2].parent = Some(1);
        v[3].id = Some(3);
        v[3].parent = Some(99);
        let refs: Vec<&Span> = v.iter().collect();
        let t = build(&refs, 0);
        assert_eq!(t.parent, vec![ROOT, 0, 1, 0]);
        assert_eq!(t.orphans, 1);
        // Other thread: span 1 keeps its whole duration.
        assert_eq!(t.self_ns[1], 10);
        v[1].parent = Some(2);
        let refs: Vec<&Span> = v.iter().collect();
        let t = build(&refs, 0);
        assert_eq!(t.loops, 1);
        assert!(
            t.parent.iter().filter(|&&p| p == 0).count() >= 2,
            "{:?}",
            t.parent
        );
    }

    proptest! {
        /// Spans of two threads whose intervals nest or are apart (identical ones
        /// included): each one's parent is the innermost span of its thread that holds
        /// it, of those before it (by start, the longer first, then the file's order),
        /// else the root; found here by looking at every pair.
        #[test]
        fn nested_spans_get_the_innermost_holder_of_their_thread_as_parent(
            raw in prop::collection::vec((0u32..2, 0u64..60, 0u64..30), 1..60)
        ) {
            let mut v = vec![span(0, 0, 1000)];
            for (thread, start, len) in raw {
                let (a, b) = (start, start + len);
                let apart_or_nested = v[1..].iter().filter(|s| s.thread == thread).all(|s| {
                    b <= s.start_ns || a >= s.end_ns || (a >= s.start_ns && b <= s.end_ns)
                        || (s.start_ns >= a && s.end_ns <= b)
                });
                if apart_or_nested {
                    v.push(span(thread, a, b));
                }
            }
            let refs: Vec<&Span> = v.iter().collect();
            let t = build(&refs, 0);
            let key = |i: usize| (v[i].start_ns, std::cmp::Reverse(v[i].end_ns), i);
            for i in 1..v.len() {
                let holder = (1..v.len())
                    .filter(|&j| j != i && v[j].thread == v[i].thread && key(j) < key(i))
                    .filter(|&j| v[j].start_ns <= v[i].start_ns && v[j].end_ns >= v[i].end_ns)
                    .max_by_key(|&j| key(j));
                // The root (thread 0) holds what no span of thread 0 holds.
                prop_assert_eq!(t.parent[i], holder.unwrap_or(0) as u32, "span {} of {:?}", i, v);
            }
        }
    }
}
