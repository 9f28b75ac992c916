use proptest::prelude::*;

use super::reader::{for_each_line, ReadLine};
use super::*;

fn parse_all(input: &[u8], end_ns: u64) -> (Vec<ParsedSpan>, LineCounts, Vec<String>) {
    let mut p = Parser::new();
    for_each_line(input, MAX_LINE, |l| match l {
        ReadLine::Whole(b) => {
            p.feed(b);
        }
        ReadLine::Overlong(b) => {
            p.feed_overlong(b);
        }
    });
    p.finish(end_ns)
}

#[test]
fn ordinary_output_is_ignored_and_garbage_after_the_prefix_is_counted() {
    let input = b"hello world\n\
        progress 10%\n\
        @gapscope1 B 7 100 load\n\
        @gapscope1 nonsense\n\
        @gapscope1 B x 100 load\n\
        @gapscope1 Q 7 1 a\n\
        @gapscope1 B 7 100\n\
        @gapscope1 E 7 250 load bytes=4096\n\
        @gapscope1\n";
    let (spans, c, samples) = parse_all(input, 1000);
    assert_eq!(spans.len(), 1);
    assert_eq!(&*spans[0].name, "load");
    assert_eq!((spans[0].start_ns, spans[0].end_ns), (100, 250));
    assert_eq!(spans[0].attrs, vec![("bytes".into(), AttrValue::U64(4096))]);
    // "@gapscope1" without its space is not the prefix: ordinary output.
    assert_eq!(c.unparseable, 4);
    assert_eq!((c.unmatched_begins, c.unmatched_ends), (0, 0));
    assert_eq!(samples.len(), 3);
    assert!(samples[1].contains("thread id"), "{samples:?}");
}

#[test]
fn lines_run_together_by_two_threads_or_after_output_are_each_read() {
    // Two threads that each write a line and then its newline (Python's print) can put
    // both lines on one; a line can also follow output that had no newline yet.
    let input = b"@gapscope1 X 7 100 30 work_thread@gapscope1 X 8 90 20 main_part\n\n\
        step 3 of 5 ...@gapscope1 X 8 200 5 tail n=2\n\
        no protocol here\n";
    let (spans, c, _) = parse_all(input, 1000);
    assert_eq!(c.unparseable, 0);
    assert_eq!(c.protocol_lines, 3);
    let mut names: Vec<_> = spans
        .iter()
        .map(|s| (&*s.name, s.start_ns, s.end_ns))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("main_part", 90, 110),
            ("tail", 200, 205),
            ("work_thread", 100, 130)
        ]
    );
}

#[test]
fn interleaved_threads_nest_per_thread() {
    let input = b"@gapscope1 B 1 10 outer\n\
        @gapscope1 B 2 11 worker\n\
        @gapscope1 B 1 12 inner\n\
        @gapscope1 B 2 13 inner\n\
        @gapscope1 E 1 20 inner\n\
        @gapscope1 E 2 21 inner\n\
        @gapscope1 E 1 30 outer\n\
        @gapscope1 E 2 31 worker\n";
    let (spans, c, _) = parse_all(input, 100);
    assert!(!c.any_problem(), "{c:?}");
    let get = |tid: u64, name: &str| {
        spans
            .iter()
            .find(|s| s.tid == tid && &*s.name == name)
            .map(|s| (s.start_ns, s.end_ns))
            .unwrap()
    };
    assert_eq!(get(1, "inner"), (12, 20));
    assert_eq!(get(2, "inner"), (13, 21));
    assert_eq!(get(1, "outer"), (10, 30));
    assert_eq!(get(2, "worker"), (11, 31));
}

#[test]
fn unmatched_ends_are_dropped_and_unmatched_begins_closed_at_the_end() {
    let input = b"@gapscope1 E 1 5 never_begun\n\
        @gapscope1 B 1 10 a\n\
        @gapscope1 B 1 11 left_open\n\
        @gapscope1 E 1 20 a\n\
        @gapscope1 E 2 21 a\n\
        @gapscope1 E 1 25 a\n";
    let (spans, c, _) = parse_all(input, 99);
    assert_eq!(c.unmatched_ends, 3, "{c:?}");
    assert_eq!(c.unmatched_begins, 1);
    let open = spans.iter().find(|s| &*s.name == "left_open").unwrap();
    assert!(open.unmatched);
    assert_eq!((open.start_ns, open.end_ns), (11, 99));
    let a = spans.iter().find(|s| &*s.name == "a").unwrap();
    assert_eq!((a.start_ns, a.end_ns, a.unmatched), (10, 20, false));
}

#[test]
fn complete_spans_and_attribute_lines() {
    let input = b"@gapscope1 B 3 100 phase\n\
        @gapscope1 A 3 n=12 ratio=0.5 label=msm delta=-4\n\
        @gapscope1 X 3 110 40 kernel grid=256\n\
        @gapscope1 E 3 200 phase\n\
        @gapscope1 A 3 late=1\n\
        @gapscope1 X 3 18446744073709551615 2 overflow\n";
    let (spans, c, _) = parse_all(input, 1000);
    assert_eq!(c.unparseable, 2, "{c:?}");
    let phase = spans.iter().find(|s| &*s.name == "phase").unwrap();
    assert_eq!(
        phase.attrs,
        vec![
            ("n".into(), AttrValue::U64(12)),
            ("ratio".into(), AttrValue::F64(0.5)),
            ("label".into(), AttrValue::Str("msm".into())),
            ("delta".into(), AttrValue::I64(-4)),
        ]
    );
    let k = spans.iter().find(|s| &*s.name == "kernel").unwrap();
    assert_eq!((k.start_ns, k.end_ns), (110, 150));
}

#[test]
fn huge_lines_are_cut_counted_and_do_not_grow_memory() {
    let mut input = Vec::new();
    input.extend_from_slice(b"@gapscope1 B 1 5 ");
    input.extend(std::iter::repeat_n(b'a', 10 * 1024 * 1024));
    input.extend_from_slice(b"\n");
    // A long line of ordinary output is not counted.
    input.extend(std::iter::repeat_n(b'b', 100_000));
    input.extend_from_slice(b"\n@gapscope1 X 1 5 5 ok\n");
    let (spans, c, _) = parse_all(&input, 100);
    assert_eq!(c.unparseable, 1);
    assert_eq!(spans.len(), 1);
    // A name past MAX_NAME on a line under MAX_LINE is unparseable too.
    let long = format!("@gapscope1 X 1 5 5 {}\n", "n".repeat(MAX_NAME + 1));
    let (spans, c, _) = parse_all(long.as_bytes(), 100);
    assert_eq!((spans.len(), c.unparseable), (0, 1));
}

#[test]
fn binary_junk_is_ignored_or_counted_never_fatal() {
    let mut input = vec![0u8, 0xff, 0xfe, b'\n', 0x80, 0x81, b'\n'];
    input.extend_from_slice(b"@gapscope1 B 1 5 \xff\xfe\n");
    input.extend_from_slice(b"@gapscope1 X 1 5 5 fine\r\n");
    let (spans, c, _) = parse_all(&input, 100);
    assert_eq!(c.unparseable, 1);
    assert_eq!(spans.len(), 1);
    assert_eq!(&*spans[0].name, "fine");
}

#[test]
fn an_end_before_its_begin_is_unparseable_and_the_begin_stays_open() {
    let (spans, c, _) = parse_all(b"@gapscope1 B 1 50 a\n@gapscope1 E 1 40 a\n", 60);
    assert_eq!((c.unparseable, c.unmatched_begins), (1, 1));
    assert_eq!((spans[0].start_ns, spans[0].end_ns), (50, 60));
}

// Random streams of well-formed spans among junk, lines run together and nested
// threads interleaved are fuzz targets of the integration tests
// (tests/it/readers_fuzz_lines.rs), which run them for a time budget in CI.
proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(any::<u8>(), 0..4000)) {
        let _ = parse_all(&input, 0);
    }
}

fn gpu_of(input: &[u8]) -> (GpuLines, LineCounts, Vec<ParsedSpan>, Vec<String>) {
    let mut p = Parser::new();
    for_each_line(input, MAX_LINE, |l| match l {
        ReadLine::Whole(b) => {
            p.feed(b);
        }
        ReadLine::Overlong(b) => {
            p.feed_overlong(b);
        }
    });
    let gpu = p.take_gpu();
    let (spans, counts, samples) = p.finish(10_000);
    (gpu, counts, spans, samples)
}

#[test]
fn gpu_activity_and_status_lines_parse_and_written_lines_read_back() {
    let kernel = crate::emit::GpuActivity {
        kind: "kernel",
        device: 1,
        stream: 13,
        correlation_id: 9,
        start_ns: 1_000,
        end_ns: 1_500,
        grid: Some([80, 2, 1]),
        block: Some([256, 1, 1]),
        bytes: None,
        name: "void scale<float>(float*, int)",
    };
    let copy = crate::emit::GpuActivity {
        kind: "memcpy",
        grid: None,
        block: None,
        bytes: Some(1 << 20),
        name: "HtoD",
        ..kernel.clone()
    };
    let input = format!(
        "@gapscope1 {}\n@gapscope1 {}\n@gapscope1 {}\n@gapscope1 B 7 100 wrap\n@gapscope1 E 7 200 wrap\n",
        crate::emit::status_body("cupti", "started", "libcupti.so.13; timestamps: CLOCK_MONOTONIC"),
        crate::emit::gpu_activity_body(&kernel),
        crate::emit::gpu_activity_body(&copy),
    );
    let (gpu, c, spans, _) = gpu_of(input.as_bytes());
    assert!(!c.any_problem(), "{c:?}");
    assert_eq!((c.protocol_lines, c.gpu_records), (5, 2));
    assert_eq!(spans.len(), 1, "G and S lines are not spans");
    let k = &gpu.activity[0];
    assert_eq!(
        (k.kind.as_str(), k.device, k.stream, k.correlation_id),
        ("kernel", 1, 13, 9)
    );
    assert_eq!((k.start_ns, k.end_ns), (1_000, 1_500));
    assert_eq!(
        (k.grid, k.block, k.bytes),
        (Some([80, 2, 1]), Some([256, 1, 1]), None)
    );
    assert_eq!(k.name, "void scale<float>(float*, int)", "spaces kept");
    let m = &gpu.activity[1];
    assert_eq!(
        (m.kind.as_str(), m.grid, m.bytes, m.name.as_str()),
        ("memcpy", None, Some(1 << 20), "HtoD")
    );
    assert_eq!(
        gpu.status,
        vec![ParsedStatus {
            source: "cupti".into(),
            state: "started".into(),
            text: "libcupti.so.13; timestamps: CLOCK_MONOTONIC".into(),
        }]
    );
}

#[test]
fn garbage_and_truncated_gpu_lines_are_unparseable_and_lose_nothing_else() {
    let good = "@gapscope1 G memset 0 7 3 10 20 - - 4096 memset";
    let lines = [
        good,
        "@gapscope1 G",                                      // no fields
        "@gapscope1 G kernel 0 7 3 10",                      // cut short
        "@gapscope1 G kernel 0 7 3 10 20 64x1x1 256x1x1 -",  // no name
        "@gapscope1 G warp 0 7 3 10 20 - - - x",             // unknown kind
        "@gapscope1 G kernel 0 7 3 20 10 - - - backwards",   // end before start
        "@gapscope1 G kernel 0 7 3 10 20 64x1 256x1x1 - k",  // grid of two
        "@gapscope1 G kernel 0 7 99999999999 10 20 - - - k", // id too large
        "@gapscope1 G memcpy 0 7 3 10 20 - - many HtoD",     // bytes not a number
        "@gapscope1 S cupti",                                // no state
        "@gapscope1 S cu pti=1 x",                           // '=' in the state
        "@gapscope1 B 7 100 wrap",
        "@gapscope1 E 7 200 wrap",
    ];
    let mut input = lines.join("\n");
    input.push('\n');
    // A G line longer than the protocol's limit, then one cut by the program's exit.
    input.push_str(&format!(
        "@gapscope1 G kernel 0 7 3 10 20 - - - {}\n",
        "k".repeat(MAX_LINE)
    ));
    input.push_str("@gapscope1 G kernel 0 7 3 1");
    let (gpu, c, spans, samples) = gpu_of(input.as_bytes());
    assert_eq!(gpu.activity.len(), 1);
    assert_eq!(gpu.activity[0].name, "memset");
    assert!(gpu.status.is_empty());
    assert_eq!(c.unparseable, 12, "{samples:?}");
    assert_eq!((c.gpu_records, spans.len()), (1, 1));
    assert!(samples.iter().any(|s| s.contains("missing")), "{samples:?}");
}

#[test]
fn thread_lines_name_threads_and_malformed_ones_are_counted() {
    let mut p = Parser::new();
    for l in [
        "@gapscope1 T 12 7 tokio-runtime-worker",
        "@gapscope1 T 13 7",
        "@gapscope1 T 14 7 a name with spaces",
        "@gapscope1 T 15",           // no pid
        "@gapscope1 T x 7 name",     // tid not a number
        "@gapscope1 T",              // nothing
        "@gapscope1 T 12 7 renamed", // the last one wins
    ] {
        assert!(p.feed(l.as_bytes()));
    }
    let names = p.take_threads();
    assert_eq!(names.get(&12).map(String::as_str), Some("renamed"));
    assert_eq!(names.get(&13), None);
    assert_eq!(
        names.get(&14).map(String::as_str),
        Some("a name with spaces")
    );
    let (_, c, samples) = p.finish(0);
    assert_eq!((c.protocol_lines, c.unparseable), (4, 3), "{samples:?}");
    assert_eq!(thread_line_pid(b"@gapscope1 T 12 7 w"), Some((12, 7)));
    assert_eq!(thread_line_pid(b"@gapscope1 X 12 7 1 w"), None);
}
