//! The most spans one rep keeps, shared by every parser of the rep's streams (stdout,
//! stderr, the span pipe, log lines): each span takes its room when it is read (a begin
//! when it opens), and once the rep has its cap a span is counted and dropped at once,
//! so that a program sending without end fills neither gapscope's memory nor the run
//! folder. What was dropped is told at the end of the rep ([`SpanBudget::over`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[derive(Debug)]
pub struct SpanBudget {
    cap: usize,
    kept: AtomicUsize,
    over: AtomicU64,
}

impl SpanBudget {
    pub fn new(cap: usize) -> Self {
        SpanBudget {
            cap,
            kept: AtomicUsize::new(0),
            over: AtomicU64::new(0),
        }
    }

    /// Takes room for one span: `false` once the cap is reached (the span is then
    /// counted as over the cap and must not be kept).
    pub fn take(&self) -> bool {
        let took = self
            .kept
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                (k < self.cap).then_some(k + 1)
            })
            .is_ok();
        if !took {
            self.over.fetch_add(1, Ordering::Relaxed);
        }
        took
    }

    /// Whether spans were dropped already.
    pub fn exhausted(&self) -> bool {
        self.over.load(Ordering::Relaxed) > 0
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Spans kept so far.
    pub fn kept(&self) -> usize {
        self.kept.load(Ordering::Relaxed)
    }

    /// Spans sent past the cap: counted, not kept.
    pub fn over(&self) -> u64 {
        self.over.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Parser;
    use std::sync::Arc;

    #[test]
    fn parsers_sharing_a_budget_keep_the_cap_and_count_the_rest() {
        let b = Arc::new(SpanBudget::new(5));
        let mut p = Parser::with_budget(b.clone());
        let mut q = Parser::with_budget(b.clone());
        for i in 0..4u64 {
            assert!(p.feed(format!("@gapscope1 X 1 {} 5 x{i}", 100 + i).as_bytes()));
        }
        // Two begins: one takes the last room, the other is over the cap; both ends
        // are consumed without being counted as unmatched.
        q.feed(b"@gapscope1 B 2 100 a");
        q.feed(b"@gapscope1 B 2 101 b");
        q.feed(b"@gapscope1 E 2 102 b");
        q.feed(b"@gapscope1 E 2 103 a");
        for i in 0..1000u64 {
            p.feed(format!("@gapscope1 X 1 {} 5 y{i}", 200 + i).as_bytes());
        }
        let (ps, pc, _) = p.finish(10_000);
        let (qs, qc, _) = q.finish(10_000);
        assert_eq!(ps.len() + qs.len(), 5);
        assert_eq!(b.kept(), 5);
        assert_eq!(b.over(), 1001);
        assert!(b.exhausted());
        assert_eq!(&*qs[0].name, "a");
        assert_eq!(pc.unmatched_ends + qc.unmatched_ends, 0, "{pc:?} {qc:?}");
    }
}
