use super::*;
use crate::import::model::{Format, Span};

fn place(start_ns: u64, end_ns: u64, realtime_offset_ns: i128) -> RepPlace<'static> {
    RepPlace {
        rep: 0,
        variant: "a",
        iteration: 0,
        start_ns,
        end_ns,
        realtime_offset_ns,
        root_thread: 1,
        root_id: 1,
        last_id: 1,
    }
}

fn trace_from(first_ns: u64) -> Trace {
    let mut t = Trace::new(Path::new("t.json"), Format::Chrome);
    t.spans
        .push(Span::plain(0, 0, first_ns, first_ns + 5_000_000));
    t
}

#[test]
fn each_clock_a_trace_can_be_on_is_placed_on_the_span_clock() {
    // The rep ran from 100 s to 101 s of CLOCK_MONOTONIC; the wall clock is 1.7e9 s ahead.
    let (start, end) = (100_000_000_000u64, 101_000_000_000u64);
    let offset: i128 = 1_700_000_000_000_000_000;
    let p = place(start, end, offset);
    // Wall-clock times (PyTorch's profiler): moved back by the offset, no note.
    let wall = trace_from((start as i128 + offset + 2_000_000) as u64);
    assert_eq!(shift_of(&wall, &p), (-offset, None));
    // Already CLOCK_MONOTONIC: as they are.
    assert_eq!(shift_of(&trace_from(start + 2_000_000), &p), (0, None));
    // A clock of its own (tracing-chrome counts from 0): the first event at the start.
    let (shift, note) = shift_of(&trace_from(1_000), &p);
    assert_eq!(shift, start as i128 - 1_000);
    assert!(note.unwrap().contains("clock of its own"));
}

#[test]
fn a_file_the_rep_did_not_write_is_not_taken_again() {
    let tmp = tempfile::tempdir().unwrap();
    let path = Path::new("trace.json");
    std::fs::write(tmp.path().join(path), r#"{"traceEvents":[]}"#).unwrap();
    let b = before(tmp.path(), path);
    assert!(b.modified.is_some());
    let names = NameMap::from_pairs(&[], true).unwrap();
    let why = read(&b, &place(0, 1, 0), &names, MAX_BYTES).unwrap_err();
    assert!(why.contains("not written in this rep"), "{why}");
    let gone = before(tmp.path(), Path::new("none.json"));
    let why = read(&gone, &place(0, 1, 0), &names, MAX_BYTES).unwrap_err();
    assert!(why.contains("not there after the rep"), "{why}");
}
