//! A span row as a line of spans.csv, written directly: the same bytes the `csv` crate
//! writes for [`SpanRow`] (fields in the struct's order, a field quoted only where it
//! holds a comma, a quote or a line break, quotes doubled), at a fraction of the cost
//! of serde's field-by-field path. An import writes millions of rows; the tests below
//! hold the two writers to the same bytes.

use super::SpanRow;

impl SpanRow {
    /// Appends the row's spans.csv line (with its `\n`) to `out`.
    pub fn write_csv_line(&self, out: &mut Vec<u8>) {
        self.write_csv_line_attrs(&self.attrs, out);
    }

    /// [`SpanRow::write_csv_line`] with `attrs` in place of the row's attributes.
    pub fn write_csv_line_attrs(&self, attrs: &str, out: &mut Vec<u8>) {
        let mut num = itoa::Buffer::new();
        let mut n = |out: &mut Vec<u8>, v: u64| out.extend_from_slice(num.format(v).as_bytes());
        n(out, self.rep.into());
        out.push(b',');
        text(out, &self.variant);
        out.push(b',');
        n(out, self.span_id);
        out.push(b',');
        if let Some(p) = self.parent_id {
            n(out, p);
        }
        out.push(b',');
        text(out, &self.name);
        out.push(b',');
        n(out, self.thread_id);
        out.push(b',');
        text(out, &self.thread_name);
        for v in [self.start_ns, self.end_ns, self.duration_ns, self.self_ns] {
            out.push(b',');
            n(out, v);
        }
        for v in [
            self.instructions,
            self.branches,
            self.cycles,
            self.task_clock_ns,
            self.page_faults,
            self.context_switches,
        ] {
            out.push(b',');
            if let Some(v) = v.get() {
                n(out, v);
            }
        }
        out.push(b',');
        text(out, attrs);
        for v in [self.gpu_busy_ns, self.process_cpu_ns] {
            out.push(b',');
            if let Some(v) = v.get() {
                n(out, v);
            }
        }
        out.push(b'\n');
    }
}

/// A text field: as it is, or quoted (quotes doubled) where it holds a comma, a quote or
/// a line break.
fn text(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    if !b.iter().any(|&c| matches!(c, b',' | b'"' | b'\n' | b'\r')) {
        out.extend_from_slice(b);
        return;
    }
    // Byte by byte into room made once: an attributes' JSON has a quote every few bytes.
    out.reserve(2 * b.len() + 2);
    out.push(b'"');
    for &c in b {
        out.push(c);
        if c == b'"' {
            out.push(b'"');
        }
    }
    out.push(b'"');
}

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
            let (a, b) = (mine(&r), by_csv(&r));
            prop_assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
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
    }
}
