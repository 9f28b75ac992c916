//! One Chrome trace event read by hand: the fields the importer reads ([`Event`]'s) found
//! in one pass over the event's bytes, strings borrowed where they hold no escape, plain
//! numbers parsed in place, the arguments written straight into their [`Args`]. Reading
//! with serde_json was about half of an import's CPU time.
//!
//! It answers only where the result is certain to be serde_json's: anything it does not
//! read itself (an escaped key, a duplicate field, a value of an unexpected type, a
//! number outside the plain forms) is either handed to serde_json on its own bytes (a
//! single value: the same code reads it as inside the event) or makes it answer `None`,
//! and the caller then parses the whole event with serde_json, which gives the same
//! event or the error it always gave. The tests hold the two to the same events.

use std::borrow::Cow;

use serde::de::{DeserializeSeed, IgnoredAny};

use super::chrome::{Event, Id};
use super::chrome_args::{self, Args, Text};

/// The event in `bytes` (one JSON value, as the cutter delimits it), or `None` where
/// serde_json is to read it.
#[cfg(test)]
pub fn event(bytes: &[u8]) -> Option<Event<'_>> {
    event_in(bytes, &mut String::new())
}

/// The event in `bytes` (one JSON value, as the cutter delimits it), or `None` where
/// serde_json is to read it; its arguments written in `buffer` (taken; its capacity is
/// reused), which gets it back where the event's arguments are not read.
pub fn event_in<'a>(bytes: &'a [u8], buffer: &mut String) -> Option<Event<'a>> {
    let mut c = Cur {
        b: bytes,
        i: 0,
        buffer: std::mem::take(buffer),
    };
    // The event is filled where it lies (an event is a few hundred bytes: each move of
    // one was a copy).
    let mut ev = Event::default();
    let read = read(&mut c, &mut ev);
    if c.buffer.capacity() > 0 {
        *buffer = c.buffer;
    }
    read.map(|()| ev)
}

fn read<'a>(c: &mut Cur<'a>, ev: &mut Event<'a>) -> Option<()> {
    let bytes = c.b;
    let mut seen = 0u16;
    c.ws();
    c.eat(b'{')?;
    c.ws();
    if c.peek() == Some(b'}') {
        c.i += 1;
    } else {
        loop {
            let field = match c.known_key() {
                Some(f) => Some(f),
                None => {
                    let (key, escaped) = c.string()?;
                    if escaped {
                        return None;
                    }
                    field_of(key)
                }
            };
            c.ws();
            c.eat(b':')?;
            c.ws();
            if let Some(f) = field {
                // serde refuses a field given twice.
                if seen & (1 << f) != 0 {
                    return None;
                }
                seen |= 1 << f;
            }
            match field {
                Some(0) => ev.name = c.text()?,
                Some(1) => ev.cat = c.text()?,
                Some(2) => ev.ph = c.text()?,
                Some(3) => ev.ts = c.float()?,
                Some(4) => ev.dur = c.float()?,
                Some(5) => ev.pid = c.id()?,
                Some(6) => ev.tid = c.id()?,
                Some(7) => ev.id = c.id()?,
                Some(8) => c.args(&mut ev.args)?,
                _ => c.skip()?,
            }
            c.ws();
            match c.next()? {
                b',' => c.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    c.ws();
    (c.i == bytes.len()).then_some(())
}

/// The keys of [`Event`]'s fields, each at the bit of `seen` it has.
const FIELDS: [&str; 9] = ["name", "cat", "ph", "ts", "dur", "pid", "tid", "id", "args"];

/// Which of [`Event`]'s fields a key names, as the bit of `seen` it has.
fn field_of(key: &[u8]) -> Option<usize> {
    FIELDS.iter().position(|f| f.as_bytes() == key)
}

/// Eight bytes of ones, and of high bits, for the eight-at-a-time string scan.
const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// Flags (high bits) on the bytes of the eight in `w` (little-endian: the first byte
/// lowest) that a string's scan stops at: a quote, a backslash, a control character
/// (below 0x20) or a byte of a non-ASCII character. The lowest flag is the first such
/// byte (a flag may be set wrongly only above a byte rightly flagged); none, none is.
fn stops_in(w: u64) -> u64 {
    let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = zero_in(w ^ (ONES * b'"' as u64));
    let backslash = zero_in(w ^ (ONES * b'\\' as u64));
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    quote | backslash | control | (w & HIGHS)
}

/// Exact powers of ten (every one up to 1e22 is an f64 exactly).
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
    /// Where the arguments' members are written (its capacity reused).
    buffer: String,
}

/// [`FIELDS`] with their quotes, as [`Cur::known_key`] matches them in the eight bytes
/// at a key's opening quote: (the quoted key's bytes, their mask), in the same order.
const KNOWN_KEYS: [(u64, u64); FIELDS.len()] = {
    let mut out = [(0u64, 0u64); FIELDS.len()];
    let mut f = 0;
    while f < FIELDS.len() {
        let k = FIELDS[f].as_bytes();
        let mut w = b'"' as u64 | (b'"' as u64) << (8 * (k.len() + 1));
        let mut i = 0;
        while i < k.len() {
            w |= (k[i] as u64) << (8 * (i + 1));
            i += 1;
        }
        out[f] = (w, u64::MAX >> (64 - 8 * (k.len() + 2)));
        f += 1;
    }
    out
};

impl<'a> Cur<'a> {
    /// The field of [`Event`] whose key (quotes and all) stands here, passed over; None,
    /// having read nothing, where it is another key or fewer than eight bytes are left.
    /// What [`Cur::string`] and [`field_of`] would give, at a fraction of their cost.
    fn known_key(&mut self) -> Option<usize> {
        let eight = self.b.get(self.i..self.i + 8)?;
        let w = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
        let field = KNOWN_KEYS.iter().position(|&(k, m)| w & m == k)?;
        self.i += FIELDS[field].len() + 2;
        Some(field)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }

    /// JSON's white space.
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A string (at its quote): its bytes between the quotes, and whether it holds an
    /// escape. A string without one is checked as serde_json checks it (no control
    /// character, UTF-8); a control character, which serde_json refuses in any string,
    /// gives None.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        self.eat(b'"')?;
        let (b, start) = (self.b, self.i);
        let (mut i, mut escaped, mut ascii) = (start, false, true);
        loop {
            // Eight bytes at a time up to the first that stops the scan.
            while let Some(eight) = b.get(i..i + 8) {
                let flags = stops_in(u64::from_le_bytes(eight.try_into().expect("eight bytes")));
                if flags != 0 {
                    i += (flags.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            match *b.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                0..=0x1f => return None,
                0x80.. => {
                    ascii = false;
                    i += 1;
                }
                _ => i += 1,
            }
        }
        let s = &b[start..i];
        self.i = i + 1;
        if !escaped && !ascii && std::str::from_utf8(s).is_err() {
            return None;
        }
        Some((s, escaped))
    }

    /// A string's text, unescaped (by serde_json) where it holds escapes.
    fn string_text(&mut self) -> Option<Cow<'a, str>> {
        let at = self.i;
        let (s, escaped) = self.string()?;
        if escaped {
            let owned: String = serde_json::from_slice(&self.b[at..self.i]).ok()?;
            return Some(Cow::Owned(owned));
        }
        // SAFETY: `string` returned it unescaped only where it is ASCII or was found UTF-8.
        Some(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(s) }))
    }

    /// `null`, `true` or `false` when it stands here.
    fn literal(&mut self) -> Option<&'static str> {
        let rest = &self.b[self.i..];
        let word = ["null", "true", "false"]
            .into_iter()
            .find(|w| rest.starts_with(w.as_bytes()))?;
        self.i += word.len();
        Some(word)
    }

    /// An optional string field (name, cat, ph): `Some(None)` for null.
    fn text(&mut self) -> Option<Option<Text<'a>>> {
        match self.peek()? {
            b'"' => Some(Some(Text(self.string_text()?))),
            b'n' => (self.literal()? == "null").then_some(None),
            _ => None,
        }
    }

    /// The bytes of a number (only delimited: the characters numbers are made of).
    fn number(&mut self) -> &'a [u8] {
        let start = self.i;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.peek() {
            self.i += 1;
        }
        &self.b[start..self.i]
    }

    /// An optional number field (ts, dur).
    fn float(&mut self) -> Option<Option<f64>> {
        match self.peek()? {
            b'0'..=b'9' => {
                if let Some(v) = self.plain_decimal() {
                    return Some(Some(v));
                }
                let tok = self.number();
                match plain_decimal(tok) {
                    Some(v) => Some(Some(v)),
                    None => serde_json::from_slice::<f64>(tok).ok().map(Some),
                }
            }
            b'-' => serde_json::from_slice::<f64>(self.number()).ok().map(Some),
            b'n' => (self.literal()? == "null").then_some(None),
            _ => None,
        }
    }

    /// [`plain_decimal`] of the number that starts here, read in one pass (and passed
    /// over); None, having read nothing, where it is not one.
    fn plain_decimal(&mut self) -> Option<f64> {
        let b = self.b;
        let digits = |mut i: usize, n: &mut u64| {
            while let Some(&c @ b'0'..=b'9') = b.get(i) {
                *n = n.checked_mul(10)?.checked_add((c - b'0') as u64)?;
                i += 1;
            }
            Some(i)
        };
        let mut n = 0u64;
        let int_end = digits(self.i, &mut n)?;
        let int_len = int_end - self.i;
        if int_len == 0 || (b[self.i] == b'0' && int_len > 1) {
            return None;
        }
        let (end, k) = match b.get(int_end) {
            Some(b'.') => {
                let end = digits(int_end + 1, &mut n)?;
                (end, end - int_end - 1)
            }
            _ => (int_end, 0),
        };
        let fraction_ok = b.get(int_end) != Some(&b'.') || (1..POW10.len()).contains(&k);
        let ends = !matches!(
            b.get(end),
            Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        );
        if !fraction_ok || !ends || n >= 1 << 53 {
            return None;
        }
        self.i = end;
        Some(n as f64 / POW10[k])
    }

    /// An optional pid, tid or id.
    fn id(&mut self) -> Option<Option<Id>> {
        match self.peek()? {
            b'"' => Some(Some(Id::Str(self.string_text()?.into_owned()))),
            b'0'..=b'9' | b'-' => {
                let tok = self.number();
                match plain_whole(tok).and_then(|n| i64::try_from(n).ok()) {
                    Some(n) => Some(Some(Id::Num(n))),
                    None => serde_json::from_slice::<Id>(tok).ok().map(Some),
                }
            }
            b'n' => (self.literal()? == "null").then_some(None),
            _ => None,
        }
    }

    /// Skips any value, checked by serde_json where it is not a plain string.
    fn skip(&mut self) -> Option<()> {
        if self.peek()? == b'"' {
            self.string_text()?;
            return Some(());
        }
        let v = self.value()?;
        serde_json::from_slice::<IgnoredAny>(v).ok()?;
        Some(())
    }

    /// The bytes of the value that starts here, only delimited (nesting and strings
    /// followed; checked by whoever reads them).
    fn value(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
            }
        }
        (self.i > start).then(|| &self.b[start..self.i])
    }

    /// The `args` field into `slot`: an object of arguments, or null (no arguments).
    fn args(&mut self, slot: &mut Option<Args>) -> Option<()> {
        match self.peek()? {
            b'{' => {}
            b'n' => {
                *slot = None;
                return (self.literal()? == "null").then_some(());
            }
            _ => return None,
        }
        self.i += 1;
        let a = slot.insert(Args::in_buffer(std::mem::take(&mut self.buffer)));
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.string_text()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            self.arg(a, &key)?;
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// One argument's value into `a`: plain strings and whole numbers here, the rest
    /// through the reader serde_json uses inside an event.
    fn arg(&mut self, a: &mut Args, key: &str) -> Option<()> {
        match self.peek()? {
            b'"' => {
                let v = self.string_text()?;
                a.string(key, &v);
                return Some(());
            }
            b'0'..=b'9' => {
                let at = self.i;
                let tok = self.number();
                if let Some(n) = plain_whole(tok) {
                    // A whole number without leading zeros is written as it was.
                    // SAFETY: plain_whole took only ASCII digits.
                    let text = unsafe { std::str::from_utf8_unchecked(tok) };
                    a.number(key, text, Some(n));
                    return Some(());
                }
                self.i = at;
            }
            b't' | b'f' | b'n' => {
                let at = self.i;
                if let Some(w) = self.literal() {
                    if self.delimited() {
                        a.push(key, w);
                        return Some(());
                    }
                }
                self.i = at;
            }
            b'[' => {
                let at = self.i;
                if let Some(triple) = self.plain_array(0) {
                    match key {
                        "grid" => a.grid = triple,
                        "block" => a.block = triple,
                        _ => {}
                    }
                    return Some(());
                }
                self.i = at;
            }
            _ => {}
        }
        let v = self.value()?;
        let mut de = serde_json::Deserializer::from_slice(v);
        chrome_args::value_seed(a, key).deserialize(&mut de).ok()?;
        de.end().ok()
    }

    /// An array (at its `[`) of whole numbers ≥ 0, strings without escapes and such
    /// arrays, a few deep (Kineto's shapes, types, grids and blocks), passed over: its
    /// three numbers where it is three whole numbers (a grid or block, as
    /// [`chrome_args`] reads one), else `Some(None)`. None where it holds anything
    /// else; the caller then reads it with serde_json.
    fn plain_array(&mut self, depth: u32) -> Option<Option<[u32; 3]>> {
        if depth > 8 {
            return None;
        }
        self.eat(b'[')?;
        let (mut v, mut n, mut numeric) = ([0u32; 3], 0usize, true);
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(None);
        }
        loop {
            match self.peek()? {
                b'0'..=b'9' => {
                    let x = plain_whole(self.number())?;
                    match v.get_mut(n) {
                        Some(slot) => *slot = x as u32,
                        None => numeric = false,
                    }
                    n += 1;
                }
                b'"' => {
                    if self.string()?.1 {
                        return None;
                    }
                    numeric = false;
                }
                b'[' => {
                    self.plain_array(depth + 1)?;
                    numeric = false;
                }
                _ => return None,
            }
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b']' => break,
                _ => return None,
            }
        }
        Some((numeric && n == 3).then_some(v))
    }

    /// Whether what stands here may follow a value.
    fn delimited(&self) -> bool {
        matches!(
            self.peek(),
            None | Some(b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r')
        )
    }
}

/// A whole number ≥ 0 written plainly (digits, no leading zero) that fits in a u64.
fn plain_whole(tok: &[u8]) -> Option<u64> {
    if tok.is_empty() || (tok[0] == b'0' && tok.len() > 1) {
        return None;
    }
    let mut n = 0u64;
    for &c in tok {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(n)
}

/// A number ≥ 0 written `123` or `123.456` whose digits make less than 2^53 with at
/// most 22 after the point: the f64 nearest to it is one division of exact numbers, the
/// value serde_json gives (whether or not it rounds every number exactly).
fn plain_decimal(tok: &[u8]) -> Option<f64> {
    let (int, frac) = match memchr::memchr(b'.', tok) {
        Some(p) => (&tok[..p], Some(&tok[p + 1..])),
        None => (tok, None),
    };
    if int.is_empty() || (int[0] == b'0' && int.len() > 1) {
        return None;
    }
    let mut n = 0u64;
    for &c in int.iter().chain(frac.unwrap_or_default()) {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    let k = match frac {
        Some(f) if f.is_empty() || f.len() >= POW10.len() => return None,
        Some(f) => f.len(),
        None => 0,
    };
    if n >= 1 << 53 {
        return None;
    }
    Some(n as f64 / POW10[k])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;

    /// What serde_json makes of `text`, and what the scanner does where it answers:
    /// the two must be the same event (compared in full through Debug, which tells
    /// -0.0 from 0.0).
    fn agree(text: &str) -> bool {
        let mine = event(text.as_bytes());
        let theirs = serde_json::from_slice::<Event>(text.as_bytes());
        match (&mine, &theirs) {
            (None, _) => false,
            (Some(m), Ok(t)) => {
                assert_eq!(format!("{m:?}"), format!("{t:?}"), "{text}");
                true
            }
            (Some(m), Err(e)) => panic!("{text}: the scanner read {m:?}, serde_json: {e}"),
        }
    }

    #[test]
    fn kineto_events_are_read_by_the_scanner_as_serde_json_reads_them() {
        for text in [
            r#"{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 1, "ts": 1700000000000.125, "dur": 6.5, "args": {"External id": 3, "Sequence number": 3, "Input Dims": [[256, 256], [256, 256]]}}"#,
            r#"{"ph": "X", "cat": "kernel", "name": "void k<4>", "pid": 0, "tid": 7, "ts": 3, "dur": 20.25, "args": {"device": 0, "stream": 7, "correlation": 12, "grid": [1024, 1, 1], "block": [128, 1, 1]}}"#,
            r#"{"ph":"M","name":"thread_name","pid":100,"tid":1,"args":{"name":"MainThread"}}"#,
            r#"{"ph": "b", "name": "req", "cat": "net", "id": "0x1", "pid": 1, "ts": 1}"#,
            r#"{"ph": "E", "pid": 1, "tid": 2, "ts": 25, "s": "t", "bp": {"x": [1, "]"]}}"#,
            r#" { } "#,
            r#"{"name": null, "ts": null, "args": null, "pid": null}"#,
            r#"{"args": {}, "ts": 0, "dur": 0.0}"#,
            r#"{"args": {"a": true, "b": false, "c": null, "d": -1, "e": 1.5e3, "f": "x\"y", "g": {"h": 1}}}"#,
            r#"{"name": "caf\u00e9 \ud83d\ude00", "cat": "é", "tid": "worker\n", "id": 1.5}"#,
            r#"{"pid": 18446744073709551615, "tid": -3, "id": -0, "ts": 12345678901234567890}"#,
            r#"{"ts": 1e3, "dur": -0.0, "args": {"n": 18446744073709551616, "z": 0}}"#,
            r#"{"args": {"grid": [1, 2, 3, 4], "block": [1, "a", 3], "Input Dims": [[256, 256], []]}}"#,
            r#"{"args": {"grid": [[1, 2, 3]], "block": [4294967297, 0, 7], "Input type": ["float", ""]}}"#,
            r#"{"args": {"grid": [], "block": [ 1 ,2,3 ], "grid": [5, 6, 7], "s": [[[[[[[[[[1]]]]]]]]]]}}"#,
        ] {
            assert!(agree(text), "the scanner left {text} to serde_json");
        }
    }

    #[test]
    fn what_the_scanner_leaves_is_what_serde_json_refuses_or_reads_otherwise() {
        for text in [
            r#"{"name": "a", "name": "b"}"#,
            r#"{"n\u0061me": "a"}"#,
            r#"{"ts": "12"}"#,
            r#"{"ts": 01}"#,
            r#"{"args": [1]}"#,
            r#"{"name": "a"} x"#,
            r#"{"name": "a",}"#,
            "{\"name\": \"a\tb\"}",
            r#"["a", "b", "X"]"#,
            r#"{"ts": 1,"#,
            r#"{"args": {"a": tru}}"#,
            r#"{"args": {"a": 1.}}"#,
        ] {
            let mine = event(text.as_bytes());
            assert!(mine.is_none(), "{text}: {mine:?}");
        }
        // Bytes that are not UTF-8 in a string.
        assert!(event(b"{\"name\": \"\xff\"}").is_none());
    }

    #[test]
    fn known_keys_are_matched_whole_and_others_left_to_the_string_reader() {
        let at = |text: &str| {
            let mut c = Cur {
                b: text.as_bytes(),
                i: 0,
                buffer: String::new(),
            };
            (c.known_key(), c.i)
        };
        for key in ["name", "cat", "ph", "ts", "dur", "pid", "tid", "id", "args"] {
            let text = format!("\"{key}\": 1234567");
            assert_eq!(
                at(&text),
                (field_of(key.as_bytes()), key.len() + 2),
                "{text}"
            );
        }
        for text in [
            "\"names\": 1234",
            "\"nam\": 12345",
            "\"Name\": 1234",
            "\"p\": 1234567",
            "\"tsx\": 12345",
            "\"i\\u0064\": 12",
            "\"args\"",
            "\"other\": 1",
        ] {
            assert_eq!(at(text), (None, 0), "{text}");
        }
    }

    fn text_value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_:#<> ]{0,12}",
            "\\PC{0,12}",
            "(\\PC|[\"\\\\/\u{8}\u{c}\n\r\t\u{1}\u{1f}]){0,12}",
        ]
    }

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (0u64..1 << 20).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            (0u64..1 << 50, 0u32..6)
                .prop_map(|(n, k)| Value::from(n as f64 / 10f64.powi(k as i32))),
        ]
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            number(),
            text_value().prop_map(Value::from),
        ]
    }

    fn arg_value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(3, 12, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::vec((text_value(), inner), 0..3)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    prop_compose! {
        fn generated()(
            fields in prop::collection::vec(
                (prop::sample::select(vec!["name", "cat", "ph", "ts", "dur", "pid", "tid",
                                           "id", "args", "s", "bp", "other"]),
                 any::<u8>()), 0..10),
            texts in prop::collection::vec(text_value(), 10),
            nums in prop::collection::vec(number(), 10),
            args in prop::collection::vec((text_value(), arg_value()), 0..6),
            triple in prop::collection::vec(0u32..5000, 3),
            spaces in prop::collection::vec(prop::sample::select(vec!["", " ", "\n", "\t ", "\r\n"]), 60),
        ) -> String {
            // Members written by hand, so that fields may repeat and white space vary.
            let mut out = String::from("{");
            let sp = |i: usize| spaces[i % spaces.len()];
            for (n, (key, pick)) in fields.iter().enumerate() {
                let value = match (*key, pick % 4) {
                    ("args", 0) => Value::Null,
                    ("args", 3) => json!({"grid": triple, "block": [1, 2], "correlation": nums[0]}),
                    ("args", _) => Value::Object(args.iter().cloned().collect()),
                    (_, 0) => Value::Null,
                    (_, 1) => Value::from(texts[n % texts.len()].as_str()),
                    (_, _) => nums[n % nums.len()].clone(),
                };
                if n > 0 {
                    out.push_str(sp(3 * n));
                    out.push(',');
                }
                out.push_str(sp(3 * n + 1));
                out.push_str(&serde_json::to_string(key).unwrap());
                out.push(':');
                out.push_str(sp(3 * n + 2));
                out.push_str(&serde_json::to_string(&value).unwrap());
            }
            out.push_str(sp(59));
            out.push('}');
            out
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn scanner_and_serde_json_read_generated_events_alike(text in generated()) {
            agree(&text);
        }

        #[test]
        fn scanner_never_reads_what_serde_json_refuses(
            text in generated(), at in any::<prop::sample::Index>(), byte in any::<u8>()
        ) {
            // A byte changed anywhere: the scanner answers only as serde_json does.
            let mut b = text.into_bytes();
            let i = at.index(b.len());
            b[i] = byte;
            if let Some(m) = event(&b) {
                let t = serde_json::from_slice::<Event>(&b);
                prop_assert!(t.is_ok(), "{:?}: scanner {m:?}, serde_json {t:?}", String::from_utf8_lossy(&b));
                prop_assert_eq!(format!("{m:?}"), format!("{:?}", t.unwrap()));
            }
        }
    }
}
