use super::*;

#[test]
fn nested_spans_link_parents_and_nest_in_time() {
    let root = Span::enter("t_root");
    let trace = root.trace();
    {
        let a = Span::enter("t_a");
        a.set_attr("bytes", 42u64);
        let _b = Span::enter("t_b");
    }
    drop(root);
    let spans = drain_trace(trace);
    assert_eq!(spans.len(), 3);
    let by = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
    let (r, a, b) = (by("t_root"), by("t_a"), by("t_b"));
    assert_eq!(r.parent, None);
    assert_eq!(a.parent, Some(r.id));
    assert_eq!(b.parent, Some(a.id));
    assert!(r.start_ns <= a.start_ns && a.start_ns <= b.start_ns);
    assert!(b.end_ns <= a.end_ns && a.end_ns <= r.end_ns);
    assert_eq!(a.attrs, vec![("bytes", AttrValue::U64(42))]);
}

#[test]
fn cross_thread_children_keep_the_trace_and_parent() {
    let root = Span::enter("x_root");
    let ctx = root.context();
    let handles: Vec<_> = (0..3)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || {
                    let _s = Span::child_of("x_child", ctx);
                    let _inner = Span::enter("x_inner");
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    drop(root);
    let spans = drain_trace(ctx.trace);
    assert_eq!(spans.len(), 7);
    let children: Vec<_> = spans.iter().filter(|s| s.name == "x_child").collect();
    assert_eq!(children.len(), 3);
    for c in &children {
        assert_eq!(c.parent, Some(ctx.id));
        assert!(c.thread_name.starts_with("worker-"));
        let inner = spans
            .iter()
            .find(|s| s.name == "x_inner" && s.thread_id == c.thread_id)
            .unwrap();
        assert_eq!(inner.parent, Some(c.id));
    }
}

#[test]
fn traces_are_drained_separately() {
    let a = Span::enter("iso_a");
    let ta = a.trace();
    drop(a);
    let b = Span::enter("iso_b");
    let tb = b.trace();
    drop(b);
    assert_ne!(ta, tb);
    let sb = drain_trace(tb);
    assert_eq!(sb.len(), 1);
    assert_eq!(sb[0].name, "iso_b");
    let sa = drain_trace(ta);
    assert_eq!(sa.len(), 1);
    assert!(drain_trace(ta).is_empty());
}

#[test]
fn out_of_order_exit_still_closes_and_unknown_id_is_ignored() {
    let outer = enter("ooo_outer");
    let inner = enter("ooo_inner");
    assert!(exit(outer));
    assert!(exit(inner));
    assert!(!exit(inner));
    let spans = drain_trace(outer);
    assert_eq!(spans.len(), 2);
}

#[test]
fn a_drain_under_open_spans_takes_the_finished_ones_and_the_open_ones_still_close() {
    // An outer span stays open across drains (a worker's loop): the children finished
    // under it are drained, the open records stay where their spans can find them.
    let outer = enter("keep_outer");
    let a = enter("keep_a");
    let b = enter("keep_b");
    let done = enter("keep_done");
    assert!(exit(done));
    assert!(set_attr(b, "k", AttrValue::U64(7)));
    let first = drain_trace(outer);
    assert_eq!(
        first.iter().map(|s| s.name).collect::<Vec<_>>(),
        ["keep_done"]
    );
    // Out of order, after the records moved: a (under b's record) closes first.
    assert!(exit(a));
    assert!(set_attr(b, "k2", AttrValue::U64(8)));
    assert!(exit(b));
    let later = enter("keep_later");
    assert!(exit(later));
    assert!(exit(outer));
    let rest = drain_trace(outer);
    let names: Vec<&str> = rest.iter().map(|s| s.name).collect();
    assert_eq!(names, ["keep_outer", "keep_a", "keep_b", "keep_later"]);
    let b_rec = rest.iter().find(|s| s.name == "keep_b").unwrap();
    assert_eq!(b_rec.attrs.len(), 2);
    assert!(rest
        .iter()
        .all(|s| s.end_ns >= s.start_ns && s.end_ns != u64::MAX));
    let a_rec = rest.iter().find(|s| s.name == "keep_a").unwrap();
    assert_eq!(a_rec.parent, Some(outer));
    assert!(drain_trace(outer).is_empty());
}

#[test]
fn clock_matches_instant() {
    // Instant on Linux reads CLOCK_MONOTONIC; our timestamps must fall on the same axis.
    let before = now_ns();
    let i = std::time::Instant::now();
    let after = now_ns();
    // Instant is opaque; compare through elapsed time of a later reading instead.
    let mut x = 0u64;
    for k in 0..100_000u64 {
        x = x.wrapping_add(std::hint::black_box(k));
    }
    std::hint::black_box(x);
    let el = i.elapsed().as_nanos() as u64;
    let now = now_ns();
    assert!(now - after <= el + 1_000_000 && now - before >= el);
}

#[test]
fn spans_record_the_cpu_time_of_other_threads() {
    // A span on this thread waits while another thread burns at least 30 ms of CPU:
    // the span's process CPU time holds that thread's work.
    let outer = Span::enter("cpu_outer");
    let trace = outer.trace();
    std::thread::spawn(|| {
        let thread_cpu = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: valid, writable timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let start = thread_cpu();
        let mut x = 1u64;
        while thread_cpu() - start < 30_000_000 {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
    })
    .join()
    .unwrap();
    drop(outer);
    let spans = drain_trace(trace);
    let cpu = spans[0].process_cpu_ns.expect("process CPU clock readable");
    assert!(cpu >= 30_000_000, "{cpu} ns");
}
