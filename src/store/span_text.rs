//! A span row as a line of spans.csv, and a GPU activity row as a line of
//! gpu_activity.csv, written directly: the same bytes the `csv` crate writes for
//! [`SpanRow`] and [`GpuActivityRow`] (fields in the struct's order, a field quoted only
//! where it holds a comma, a quote or a line break, quotes doubled), at a fraction of
//! the cost of serde's field-by-field path. An import writes millions of rows; the tests
//! below hold the two writers to the same bytes.

use super::{Count, GpuActivityRow, Shared, SpanRow};

/// A span row with its texts borrowed: what [`SpanLine::write_csv_line`] writes is
/// [`SpanRow`]'s line, made without a shared text looked up for every row.
#[derive(Debug, Clone, Copy)]
pub struct SpanLine<'a> {
    pub rep: u32,
    pub variant: &'a str,
    pub span_id: u64,
    pub parent_id: Option<u64>,
    pub name: &'a str,
    pub thread_id: u64,
    pub thread_name: &'a str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub self_ns: u64,
    /// instructions, branches, cycles, task_clock_ns, page_faults, context_switches
    pub counters: [Count; 6],
    pub attrs: &'a str,
    pub gpu_busy_ns: Count,
    pub process_cpu_ns: Count,
}

impl SpanRow {
    /// Appends the row's spans.csv line (with its `\n`) to `out`.
    pub fn write_csv_line(&self, out: &mut Vec<u8>) {
        self.line().write_csv_line(out);
    }

    /// The row with its texts borrowed.
    pub fn line(&self) -> SpanLine<'_> {
        SpanLine {
            rep: self.rep,
            variant: &self.variant,
            span_id: self.span_id,
            parent_id: self.parent_id,
            name: &self.name,
            thread_id: self.thread_id,
            thread_name: &self.thread_name,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            duration_ns: self.duration_ns,
            self_ns: self.self_ns,
            counters: [
                self.instructions,
                self.branches,
                self.cycles,
                self.task_clock_ns,
                self.page_faults,
                self.context_switches,
            ],
            attrs: &self.attrs,
            gpu_busy_ns: self.gpu_busy_ns,
            process_cpu_ns: self.process_cpu_ns,
        }
    }

    /// Sets every field to `line`'s (a text the row already holds is kept, so that rows
    /// made one after another share theirs).
    pub fn set_from(&mut self, line: &SpanLine) {
        let set = |to: &mut Shared, from: &str| {
            if *to != from {
                *to = from.into();
            }
        };
        self.rep = line.rep;
        set(&mut self.variant, line.variant);
        self.span_id = line.span_id;
        self.parent_id = line.parent_id;
        set(&mut self.name, line.name);
        self.thread_id = line.thread_id;
        set(&mut self.thread_name, line.thread_name);
        self.start_ns = line.start_ns;
        self.end_ns = line.end_ns;
        self.duration_ns = line.duration_ns;
        self.self_ns = line.self_ns;
        [
            self.instructions,
            self.branches,
            self.cycles,
            self.task_clock_ns,
            self.page_faults,
            self.context_switches,
        ] = line.counters;
        set(&mut self.attrs, line.attrs);
        self.gpu_busy_ns = line.gpu_busy_ns;
        self.process_cpu_ns = line.process_cpu_ns;
    }
}

impl SpanLine<'_> {
    /// Appends the row's spans.csv line (with its `\n`) to `out`.
    pub fn write_csv_line(&self, out: &mut Vec<u8>) {
        let mut num = itoa::Buffer::new();
        let mut n = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(num.format(v).as_bytes());
        n(out, self.rep.into());
        out.push(b',');
        text(out, self.variant);
        out.push(b',');
        n(out, self.span_id);
        out.push(b',');
        if let Some(p) = self.parent_id {
            n(out, p);
        }
        out.push(b',');
        text(out, self.name);
        out.push(b',');
        n(out, self.thread_id);
        out.push(b',');
        text(out, self.thread_name);
        for v in [self.start_ns, self.end_ns, self.duration_ns, self.self_ns] {
            out.push(b',');
            n(out, v);
        }
        for v in self.counters {
            out.push(b',');
            if let Some(v) = v.get() {
                n(out, v);
            }
        }
        out.push(b',');
        text(out, self.attrs);
        for v in [self.gpu_busy_ns, self.process_cpu_ns] {
            out.push(b',');
            if let Some(v) = v.get() {
                n(out, v);
            }
        }
        out.push(b'\n');
    }
}

/// A GPU activity row with its texts borrowed: what [`GpuLine::write_csv_line`] writes
/// is [`GpuActivityRow`]'s line, made without a string of its own for every row.
#[derive(Debug, Clone, Copy)]
pub struct GpuLine<'a> {
    pub rep: u32,
    pub variant: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    pub device: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub duration_ns: u64,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
}

impl GpuLine<'_> {
    /// Appends the row's gpu_activity.csv line (with its `\n`) to `out`.
    pub fn write_csv_line(&self, out: &mut Vec<u8>) {
        let mut num = itoa::Buffer::new();
        let mut n = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(num.format(v).as_bytes());
        n(out, self.rep.into());
        for t in [self.variant, self.kind, self.name] {
            out.push(b',');
            text(out, t);
        }
        for v in [self.device, self.stream, self.correlation_id] {
            out.push(b',');
            n(out, v.into());
        }
        for v in [self.start_ns, self.end_ns, self.duration_ns] {
            out.push(b',');
            n(out, v);
        }
        for triple in [self.grid, self.block] {
            for k in 0..3 {
                out.push(b',');
                if let Some(t) = triple {
                    n(out, t[k].into());
                }
            }
        }
        out.push(b',');
        if let Some(v) = self.bytes {
            n(out, v);
        }
        out.push(b'\n');
    }

    /// The row with its texts its own.
    pub fn to_row(&self) -> GpuActivityRow {
        let [grid_x, grid_y, grid_z] = self.grid.map_or([None; 3], |t| t.map(Some));
        let [block_x, block_y, block_z] = self.block.map_or([None; 3], |t| t.map(Some));
        GpuActivityRow {
            rep: self.rep,
            variant: self.variant.into(),
            kind: self.kind.into(),
            name: self.name.into(),
            device: self.device,
            stream: self.stream,
            correlation_id: self.correlation_id,
            start_ns: self.start_ns,
            end_ns: self.end_ns,
            duration_ns: self.duration_ns,
            grid_x,
            grid_y,
            grid_z,
            block_x,
            block_y,
            block_z,
            bytes: self.bytes,
        }
    }
}

/// A text field: as it is, or quoted (quotes doubled) where it holds a comma, a quote or
/// a line break.
fn text(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    // One pass over the bytes, in pieces the compiler makes wide: quotes counted, the
    // other bytes that call for quoting noted.
    let (mut quotes, mut other) = (0usize, false);
    for piece in b.chunks(64) {
        let (mut q, mut o) = (0u8, 0u8);
        for &c in piece {
            q += u8::from(c == b'"');
            o |= u8::from(c == b',') | u8::from(c == b'\n') | u8::from(c == b'\r');
        }
        quotes += usize::from(q);
        other |= o != 0;
    }
    if quotes == 0 && !other {
        out.extend_from_slice(b);
        return;
    }
    // Written into room made at once, eight bytes at a time up to the next quote: an
    // attributes' JSON has a quote every few bytes, and a push per byte was most of a
    // row's cost. (The room has eight bytes to spare for the last whole word.)
    let (at, len) = (out.len(), b.len() + quotes + 2);
    out.resize(at + len + 8, b'"');
    let room = &mut out[at + 1..];
    let (mut i, mut j) = (0, 0);
    while let Some(eight) = b.get(i..i + 8) {
        room[j..j + 8].copy_from_slice(eight);
        // The lowest flag is the first quote (a flag may be set wrongly only above it).
        let x = u64::from_le_bytes(eight.try_into().expect("eight bytes")) ^ QUOTES;
        let flags = x.wrapping_sub(ONES) & !x & HIGHS;
        if flags == 0 {
            (i, j) = (i + 8, j + 8);
        } else {
            let k = (flags.trailing_zeros() / 8) as usize + 1;
            room[j + k] = b'"';
            (i, j) = (i + k, j + k + 1);
        }
    }
    for &c in &b[i..] {
        room[j] = c;
        j += 1;
        if c == b'"' {
            room[j] = b'"';
            j += 1;
        }
    }
    room[j] = b'"';
    out.truncate(at + len);
}

/// Eight bytes of ones, of high bits and of quotes, for the eight-at-a-time copy.
const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn by_csv(row: &SpanRow) -> Vec<u8> {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.serialize(row).unwrap();
        w.into_inner().unwrap()
    }

    fn mine(row: &SpanRow) -> Vec<u8> {
        let mut out = Vec::new();
        row.write_csv_line(&mut out);
        out
    }

    fn text_field() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[a-z_:#]{1,12}",
            "[ -~]{0,40}",
            "(\\PC|[,\"\r\n\t ]){0,24}",
        ]
    }

    fn opt() -> impl Strategy<Value = Option<u64>> {
        prop_oneof![Just(None), any::<u64>().prop_map(Some)]
    }

    prop_compose! {
        fn row()(rep in any::<u32>(), variant in text_field(), ids in any::<(u64, u64)>(),
                 parent in opt(), name in text_field(), thread_name in text_field(),
                 times in any::<[u64; 4]>(), counters in proptest::array::uniform6(opt()),
                 attrs in text_field(), tail in (opt(), opt())) -> SpanRow {
            SpanRow {
                rep,
                variant: variant.into(),
                span_id: ids.0,
                parent_id: parent,
                name: name.into(),
                thread_id: ids.1,
                thread_name: thread_name.into(),
                start_ns: times[0],
                end_ns: times[1],
                duration_ns: times[2],
                self_ns: times[3],
                instructions: counters[0].into(),
                branches: counters[1].into(),
                cycles: counters[2].into(),
                task_clock_ns: counters[3].into(),
                page_faults: counters[4].into(),
                context_switches: counters[5].into(),
                attrs: attrs.into(),
                gpu_busy_ns: tail.0.into(),
                process_cpu_ns: tail.1.into(),
            }
        }
    }

    proptest! {
        #[test]
        fn a_row_is_written_as_the_csv_crate_writes_it(r in row()) {
            let mut again = SpanRow::sample();
            again.set_from(&r.line());
            prop_assert_eq!(&again, &r);
            let (a, b) = (mine(&r), by_csv(&r));
            prop_assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
        }
    }

    fn gpu_by_csv(row: &GpuActivityRow) -> Vec<u8> {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        w.serialize(row).unwrap();
        w.into_inner().unwrap()
    }

    /// The row as a [`GpuLine`] (its grid and block whole or empty).
    fn line_of(r: &GpuActivityRow) -> GpuLine<'_> {
        let triple = |v: [Option<u32>; 3]| match v {
            [Some(x), Some(y), Some(z)] => Some([x, y, z]),
            _ => None,
        };
        GpuLine {
            rep: r.rep,
            variant: &r.variant,
            kind: &r.kind,
            name: &r.name,
            device: r.device,
            stream: r.stream,
            correlation_id: r.correlation_id,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
            duration_ns: r.duration_ns,
            grid: triple([r.grid_x, r.grid_y, r.grid_z]),
            block: triple([r.block_x, r.block_y, r.block_z]),
            bytes: r.bytes,
        }
    }

    fn triple() -> impl Strategy<Value = [Option<u32>; 3]> {
        prop_oneof![Just([None; 3]), any::<[u32; 3]>().prop_map(|t| t.map(Some))]
    }

    prop_compose! {
        fn gpu_row()(rep in any::<u32>(), texts in proptest::array::uniform3(text_field()),
                     lane in any::<[u32; 3]>(), times in any::<[u64; 3]>(),
                     grid in triple(), block in triple(), bytes in opt()) -> GpuActivityRow {
            let [variant, kind, name] = texts;
            GpuActivityRow {
                rep,
                variant,
                kind,
                name,
                device: lane[0],
                stream: lane[1],
                correlation_id: lane[2],
                start_ns: times[0],
                end_ns: times[1],
                duration_ns: times[2],
                grid_x: grid[0],
                grid_y: grid[1],
                grid_z: grid[2],
                block_x: block[0],
                block_y: block[1],
                block_z: block[2],
                bytes,
            }
        }
    }

    proptest! {
        #[test]
        fn a_gpu_row_is_written_as_the_csv_crate_writes_it(r in gpu_row()) {
            let line = line_of(&r);
            prop_assert_eq!(&line.to_row(), &r);
            let mut mine = Vec::new();
            line.write_csv_line(&mut mine);
            let theirs = gpu_by_csv(&r);
            prop_assert_eq!(String::from_utf8_lossy(&mine), String::from_utf8_lossy(&theirs));
        }
    }

    #[test]
    fn quotes_commas_and_line_breaks_are_quoted_and_empty_fields_stay_empty() {
        let mut r = SpanRow::sample();
        r.name = "a,\"b\"\r\nc".into();
        r.attrs = r#"{"k":"v"}"#.into();
        r.thread_name = String::new().into();
        assert_eq!(mine(&r), by_csv(&r));
        r.variant = "\"".into();
        assert_eq!(mine(&r), by_csv(&r));
        for t in [
            "\"\"",
            "a\"",
            "\"a",
            ",",
            "\r",
            "\n\"\n",
            "\"\"\"x\"\"\"",
            "12345678\"",
            "1234567\"",
        ] {
            r.attrs = t.into();
            assert_eq!(mine(&r), by_csv(&r), "{t:?}");
        }
    }
}
