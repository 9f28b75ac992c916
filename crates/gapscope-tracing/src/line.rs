//! A finished span as one `X` line of gapscope's line protocol, and a thread's `T`
//! line, written straight into the thread's batch (no allocation, no formatting
//! machinery: numbers are written digit by digit).

use crate::attrs::{self, Value};
use crate::{Finished, Names};

/// Longest span name or thread name written, in bytes (the protocol's limit).
const MAX_NAME: usize = 128;
/// Longest line body after the prefix (the protocol's limit less the prefix).
const MAX_BODY: usize = gapscope_emit::MAX_BODY;

fn push_u64(b: &mut Vec<u8>, mut v: u64) {
    let mut d = [0u8; 20];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    b.extend_from_slice(&d[i..]);
}

#[derive(Clone, Copy)]
enum Word {
    Name,
    Key,
    Value,
    /// The rest of a line: spaces allowed.
    Rest,
}

/// Writes `s` as one word of a line, at most `max` bytes, with what the protocol cannot
/// carry replaced by '_': controls always, spaces except in [`Word::Rest`], '=' in a
/// name, and in a key anything but `A-Z a-z 0-9 _ .`. Returns the bytes written.
fn word(b: &mut Vec<u8>, s: &str, max: usize, kind: Word) -> usize {
    let start = b.len();
    let plain = |c: u8| match kind {
        Word::Key => c.is_ascii_alphanumeric() || c == b'_' || c == b'.',
        Word::Name => c > b' ' && c != 0x7f && c != b'=',
        Word::Value => c > b' ' && c != 0x7f,
        Word::Rest => c >= b' ' && c != 0x7f,
    };
    if s.len() <= max && s.bytes().all(|c| c.is_ascii() && plain(c)) {
        // The common case: nothing to replace.
        b.extend_from_slice(s.as_bytes());
    } else {
        for c in s.chars() {
            let ok = match kind {
                Word::Key => c.is_ascii_alphanumeric() || c == '_' || c == '.',
                Word::Name => !(c.is_whitespace() || c.is_control() || c == '='),
                Word::Value => !(c.is_whitespace() || c.is_control()),
                Word::Rest => !c.is_control(),
            };
            let c = if ok { c } else { '_' };
            if b.len() - start + c.len_utf8() > max {
                break;
            }
            let mut e = [0u8; 4];
            b.extend_from_slice(c.encode_utf8(&mut e).as_bytes());
        }
    }
    if b.len() == start {
        b.push(b'_');
    }
    b.len() - start
}

/// `T <tid> <pid> [<name>]`: the calling thread, its process (gapscope takes the thread
/// as the program's own even when the thread is gone before the line is read) and its
/// name, where it has one.
pub fn thread_line(b: &mut Vec<u8>, tid: u64) {
    b.extend_from_slice(gapscope_emit::LINE_PREFIX.as_bytes());
    b.extend_from_slice(b"T ");
    push_u64(b, tid);
    b.push(b' ');
    push_u64(b, u64::from(std::process::id()));
    if let Some(name) = std::thread::current().name() {
        b.push(b' ');
        word(b, name, MAX_NAME, Word::Rest);
    }
    b.push(b'\n');
}

/// The part of `target` that qualifies a name under `names`: `None` for none.
fn qualifier(names: Names, target: &str) -> Option<&str> {
    match names {
        Names::Plain => None,
        // The module the span is in, where it is not the crate's root.
        Names::Module => target.rsplit_once("::").map(|(_, m)| m),
        Names::Target => Some(target),
    }
}

/// Writes `f` as one `X` line: `X <tid> <start> <duration> <name> gs.id=… gs.parent=…
/// [process_cpu_ns=…] fields…`, the name qualified by `target` as `names` says. A line
/// that would pass the protocol's limit loses fields from the end rather than the span.
pub fn span_line(b: &mut Vec<u8>, f: &Finished<'_>, names: Names, target: &str) {
    let line_start = b.len();
    b.extend_from_slice(gapscope_emit::LINE_PREFIX.as_bytes());
    let body = b.len();
    b.extend_from_slice(b"X ");
    push_u64(b, f.tid);
    b.push(b' ');
    push_u64(b, f.start_ns);
    b.push(b' ');
    push_u64(b, f.end_ns - f.start_ns);
    b.push(b' ');
    let name_start = b.len();
    if let Some(q) = qualifier(names, target) {
        word(b, q, MAX_NAME, Word::Name);
        b.extend_from_slice(b"::");
    }
    let room = MAX_NAME.saturating_sub(b.len() - name_start).max(1);
    word(b, f.name, room, Word::Name);
    b.extend_from_slice(b" gs.id=");
    push_u64(b, f.id);
    if f.parent != 0 {
        b.extend_from_slice(b" gs.parent=");
        push_u64(b, f.parent);
    }
    if let Some(cpu) = f.process_cpu_ns {
        b.extend_from_slice(b" process_cpu_ns=");
        push_u64(b, cpu);
    }
    for (k, v) in f.attrs.iter() {
        let keep = b.len();
        b.push(b' ');
        word(b, k, 64, Word::Key);
        b.push(b'=');
        match v {
            Value::Str(s) => {
                word(b, s.as_str(), attrs::MAX_STR, Word::Value);
            }
            Value::U64(n) => push_u64(b, *n),
            Value::I64(n) => {
                if *n < 0 {
                    b.push(b'-');
                }
                push_u64(b, n.unsigned_abs());
            }
            Value::Bool(x) => b.extend_from_slice(if *x { b"true" } else { b"false" }),
            Value::F64(x) => {
                use std::io::Write as _;
                let _ = write!(b, "{x}");
            }
        }
        if b.len() - body > MAX_BODY {
            b.truncate(keep);
            break;
        }
    }
    debug_assert!(b.len() - line_start <= gapscope_emit::LINE_PREFIX.len() + MAX_BODY);
    b.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::Attrs;

    fn finished<'a>(name: &'static str, attrs: &'a Attrs) -> Finished<'a> {
        Finished {
            id: 7,
            parent: 3,
            trace: 0,
            name,
            tid: 42,
            thread_name: None,
            start_ns: 1_000,
            end_ns: 1_500,
            process_cpu_ns: Some(90),
            attrs,
        }
    }

    #[test]
    fn a_span_is_one_line_with_its_name_qualified_as_asked() {
        let a = Attrs::default();
        let f = finished("apply", &a);
        let mut b = Vec::new();
        span_line(&mut b, &f, Names::Module, "mini_redis::cmd::get");
        span_line(&mut b, &f, Names::Plain, "mini_redis::cmd::get");
        span_line(&mut b, &f, Names::Module, "server");
        span_line(&mut b, &f, Names::Target, "a::b");
        let text = String::from_utf8(b).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "@gapscope1 X 42 1000 500 get::apply gs.id=7 gs.parent=3 process_cpu_ns=90"
        );
        assert!(lines[1].contains(" 500 apply gs.id=7"), "{}", lines[1]);
        assert!(lines[2].contains(" 500 apply gs.id=7"), "{}", lines[2]);
        assert!(
            lines[3].contains(" 500 a::b::apply gs.id=7"),
            "{}",
            lines[3]
        );
    }

    #[test]
    fn words_are_cleaned_and_numbers_written_exactly() {
        let mut b = Vec::new();
        for v in [0u64, 9, 10, 1234567890123, u64::MAX] {
            push_u64(&mut b, v);
            b.push(b',');
        }
        assert_eq!(b, b"0,9,10,1234567890123,18446744073709551615,");
        let mut b = Vec::new();
        word(&mut b, "a b=c\u{1}é", 128, Word::Name);
        assert_eq!(String::from_utf8(b).unwrap(), "a_b_c_é");
        let mut b = Vec::new();
        word(&mut b, "tokio runtime\tworker", 128, Word::Rest);
        assert_eq!(String::from_utf8(b).unwrap(), "tokio runtime_worker");
        let mut b = Vec::new();
        word(&mut b, &"x".repeat(300), 128, Word::Name);
        assert_eq!(b.len(), 128);
    }
}
