//! Spans of a program timed on the wrong clock. A program's span lines carry its own
//! timestamps, which must be CLOCK_MONOTONIC nanoseconds (the span clock); a span outside
//! the rep's window is dropped ([`super::rows`]). This names why: CLOCK_REALTIME (what
//! `date +%s%N` prints) lies a fixed offset ahead, known from both clocks read at the rep;
//! anything else is off by more than the rep's window (another clock, or another unit).
//! The note says how to stamp spans right.

use crate::protocol::ParsedSpan;
use crate::units::fmt_ns;

/// How to stamp spans on the span clock, in each language a program is written in.
pub const FIX: &str = "stamp span lines on CLOCK_MONOTONIC in nanoseconds: `$(gapscope now)` \
    in a shell script (not `date +%s%N`, which is CLOCK_REALTIME), \
    clock_gettime(CLOCK_MONOTONIC) in C/C++, time.monotonic_ns() in Python, \
    std::time::Instant (gapscope-emit) in Rust";

/// Attribute of a rep's root span `prove` that holds the note, where there is one.
pub const ATTR: &str = "clock";

/// CLOCK_REALTIME − CLOCK_MONOTONIC now, in ns.
pub fn realtime_offset_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let real = ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128;
    real - crate::trace::now_ns() as i128
}

/// Slack around the rep's window within which a span is taken for CLOCK_REALTIME once
/// shifted back: the clocks' offset moves only by NTP's slew between the readings.
const REALTIME_SLACK_NS: i128 = 1_000_000_000;

/// What to tell the user of the spans of a rep in `[start_ns, end_ns]` that lie outside
/// it, `offset_ns` being [`realtime_offset_ns`] at the rep; `None` when all are inside.
pub fn diagnose(
    spans: &[ParsedSpan],
    start_ns: u64,
    end_ns: u64,
    offset_ns: i128,
) -> Option<String> {
    let (lo, hi) = (start_ns as i128, end_ns as i128);
    let outside: Vec<&ParsedSpan> = spans
        .iter()
        .filter(|s| s.start_ns < start_ns || s.end_ns > end_ns)
        .collect();
    let first = outside.first()?;
    let realtime = outside.iter().all(|s| {
        let (a, b) = (s.start_ns as i128 - offset_ns, s.end_ns as i128 - offset_ns);
        a >= lo - REALTIME_SLACK_NS && b <= hi + REALTIME_SLACK_NS
    });
    let n = outside.len();
    let of = spans.len();
    if realtime {
        return Some(format!(
            "{n} of {of} span(s) (first: {:?}) were timed on CLOCK_REALTIME, {} ahead of the \
             span clock, and were dropped; {FIX}",
            first.name,
            fmt_ns(offset_ns as f64)
        ));
    }
    let off = |s: &ParsedSpan| -> String {
        if s.start_ns < start_ns {
            format!(
                "starts {} before the rep",
                fmt_ns((start_ns - s.start_ns) as f64)
            )
        } else {
            format!("ends {} after the rep", fmt_ns((s.end_ns - end_ns) as f64))
        }
    };
    Some(format!(
        "{n} of {of} span(s) lie outside the rep's window of {} and were dropped (first: {:?} \
         {}): they were timed on another clock or in another unit; {FIX}",
        fmt_ns((end_ns - start_ns) as f64),
        first.name,
        off(first)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(name: &str, start_ns: u64, end_ns: u64) -> ParsedSpan {
        ParsedSpan {
            name: name.into(),
            tid: 1,
            start_ns,
            end_ns,
            attrs: Vec::new(),
            seq: 0,
            unmatched: false,
            via: None,
        }
    }

    #[test]
    fn spans_inside_the_rep_need_no_note() {
        assert_eq!(diagnose(&[span("a", 10, 20)], 5, 30, 1_000), None);
        assert_eq!(diagnose(&[], 5, 30, 1_000), None);
    }

    #[test]
    fn realtime_stamps_are_named_with_the_fix() {
        // The span clock at 100 s, the wall clock 1.7e9 s later, as on a real host.
        let offset = realtime_offset_ns();
        assert!(offset > 1_000_000_000_000_000_000, "{offset}");
        let start = crate::trace::now_ns();
        let end = start + 50_000_000;
        let real = |t: u64| (t as i128 + offset) as u64;
        let spans = [
            span("step", real(start + 1_000), real(start + 2_000)),
            span("inside", start + 10, start + 20),
        ];
        let note = diagnose(&spans, start, end, offset).unwrap();
        assert!(note.contains("1 of 2 span(s)"), "{note}");
        assert!(note.contains("CLOCK_REALTIME"), "{note}");
        assert!(note.contains("gapscope now"), "{note}");
        assert!(note.contains("\"step\""), "{note}");
    }

    #[test]
    fn other_clocks_are_named_by_how_far_off_they_are() {
        let (start, end) = (10_000_000_000, 10_050_000_000);
        // Microseconds instead of nanoseconds: far before the rep, not the wall clock.
        let note = diagnose(&[span("us", 10_000_000, 10_000_100)], start, end, 1 << 60).unwrap();
        assert!(!note.contains("CLOCK_REALTIME, "), "{note}");
        assert!(note.contains("before the rep"), "{note}");
        assert!(note.contains("gapscope now"), "{note}");
        let late = diagnose(
            &[span("late", start + 10, end + 3_000_000_000)],
            start,
            end,
            1 << 60,
        )
        .unwrap();
        assert!(late.contains("after the rep"), "{late}");
    }
}
