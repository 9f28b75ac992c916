//! Self time: a span's duration minus the union of its children's intervals on the same
//! thread. Children on other threads (worker synthesis, background drops) run
//! concurrently and do not cover the parent's time. The self time of a wrapper span is
//! its unattributed "ghost" time.

use std::collections::HashMap;

/// The fields self time needs from a span.
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    pub id: u64,
    pub parent: Option<u64>,
    pub thread_id: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Self time of every span, in input order.
pub fn self_times(spans: &[Interval]) -> Vec<u64> {
    let mut children: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    let thread_of: HashMap<u64, u64> = spans.iter().map(|s| (s.id, s.thread_id)).collect();
    for s in spans {
        if let Some(p) = s.parent {
            if thread_of.get(&p) == Some(&s.thread_id) {
                children.entry(p).or_default().push((s.start_ns, s.end_ns));
            }
        }
    }
    spans
        .iter()
        .map(|s| {
            let dur = s.end_ns.saturating_sub(s.start_ns);
            let covered = children
                .get_mut(&s.id)
                .map(|c| union_within(c, s.start_ns, s.end_ns))
                .unwrap_or(0);
            dur.saturating_sub(covered)
        })
        .collect()
}

/// Length of the union of `iv` clipped to [lo, hi).
pub fn union_within(iv: &mut [(u64, u64)], lo: u64, hi: u64) -> u64 {
    iv.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for &(a, b) in iv.iter() {
        let (a, b) = (a.max(lo), b.min(hi));
        if a >= b {
            continue;
        }
        match cur {
            Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((ca, cb)) = cur {
        total += cb - ca;
    }
    total
}

/// A union of intervals, answering "how much of [lo, hi) is covered" in O(log n).
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Disjoint, sorted half-open intervals.
    merged: Vec<(u64, u64)>,
    /// Their starts alone (searched: half the bytes of `merged`).
    starts: Vec<u64>,
    /// `prefix[i]` = total length of `merged[..i]`.
    prefix: Vec<u64>,
}

impl Coverage {
    pub fn new(intervals: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut v: Vec<(u64, u64)> = intervals.into_iter().filter(|(a, b)| b > a).collect();
        v.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match merged.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let mut prefix = Vec::with_capacity(merged.len() + 1);
        let mut acc = 0;
        prefix.push(0);
        for (a, b) in &merged {
            acc += b - a;
            prefix.push(acc);
        }
        let starts = merged.iter().map(|&(a, _)| a).collect();
        Coverage {
            merged,
            starts,
            prefix,
        }
    }

    /// How many intervals start before `t`, at least `from` of them doing so: searched
    /// from `from` in steps that double, so a short window costs a few steps.
    fn starting_before(&self, t: u64, from: usize) -> usize {
        let rest = &self.starts[from..];
        let mut bound = 1;
        while bound < rest.len() && rest[bound - 1] < t {
            bound *= 2;
        }
        from + rest[..bound.min(rest.len())].partition_point(|&a| a < t)
    }

    /// Covered length up to time `t`, `n` intervals starting before it.
    fn covered_before(&self, t: u64, n: usize) -> u64 {
        if n == 0 {
            return 0;
        }
        let (a, b) = self.merged[n - 1];
        self.prefix[n - 1] + (b.min(t) - a)
    }

    /// Length of the union clipped to `[lo, hi)`.
    pub fn within(&self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return 0;
        }
        let n_lo = self.starts.partition_point(|&a| a < lo);
        let n_hi = self.starting_before(hi, n_lo);
        self.covered_before(hi, n_hi) - self.covered_before(lo, n_lo)
    }

    pub fn total(&self) -> u64 {
        *self.prefix.last().unwrap_or(&0)
    }

    /// The union itself: disjoint, sorted, non-empty intervals.
    pub fn intervals(&self) -> &[(u64, u64)] {
        &self.merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(id: u64, parent: Option<u64>, t: u64, s: u64, e: u64) -> Interval {
        Interval {
            id,
            parent,
            thread_id: t,
            start_ns: s,
            end_ns: e,
        }
    }

    #[test]
    fn overlapping_children_count_once_and_other_threads_do_not_cover() {
        let spans = [
            iv(1, None, 1, 0, 100),
            iv(2, Some(1), 1, 10, 30),
            iv(3, Some(1), 1, 20, 40),  // overlaps 2
            iv(4, Some(1), 2, 0, 100),  // other thread
            iv(5, Some(1), 1, 90, 120), // runs past the parent: clipped
        ];
        let st = self_times(&spans);
        assert_eq!(st[0], 100 - 30 - 10);
        assert_eq!(st[1], 20);
        assert_eq!(st[3], 100);
    }

    #[test]
    fn union_matches_brute_force() {
        let mut seed = 7u64;
        for _ in 0..200 {
            let mut v = Vec::new();
            for _ in 0..6 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let a = (seed >> 33) % 100;
                let b = a + (seed >> 20) % 30;
                v.push((a, b));
            }
            let brute = (10..90)
                .filter(|&t| v.iter().any(|&(a, b)| a <= t && t < b))
                .count() as u64;
            assert_eq!(union_within(&mut v, 10, 90), brute);
        }
    }
}
