//! A JSON trace, read as a stream: the top level tells the format (an array, or an
//! object with `traceEvents`: Chrome trace events; an object with `resourceSpans`:
//! OTLP, one request or one per line). A byte scanner cuts the events (or resources)
//! out of their array without parsing them, and each batch of them is parsed on every
//! core at once, then handed to its format's reader in file order: memory holds one
//! batch of text and what was imported, never the file or a tree of it.
//!
//! A file that ends mid-way (a profiler killed while writing) keeps every event read
//! before the cut, with a warning that says where it was cut; any other malformed JSON
//! is an error naming the file, the line and column, and the event it was in.

use std::io::BufRead;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rayon::prelude::*;

use super::chrome::{ChromeSink, Event, Parsed, RunNames};
use super::chrome_scan;
use super::model::{Format, Interner, Trace};
use super::otlp::{OtlpSink, ResourceSpans};
use super::source::Stream;
use super::ImportError;

/// Bytes of events parsed together (on every core).
const BATCH_BYTES: usize = 8 << 20;
/// The first batch's bytes; each next one has twice as many, up to [`BATCH_BYTES`].
const FIRST_BATCH_BYTES: usize = 512 << 10;
/// Events one parsing task takes (a batch holds about 40,000 Kineto events).
const EVENTS_PER_TASK: usize = 1024;

/// Where the scanner stopped short: the file ended (cut), or a byte no JSON has there.
enum Stop {
    Eof,
    /// What was wrong, and where when known (the line and event of a piece that did not
    /// parse; else where the scanner stands).
    Bad(String),
    Piece {
        line: usize,
        event: u64,
        why: String,
    },
    Io(std::io::Error),
}

/// Cuts a JSON text into the pieces the readers want, counting lines.
struct Scanner<'a> {
    r: &'a mut Stream,
    line: usize,
    /// Whole objects are cut 64 bytes at a time ([`super::json_cut`]); off, every
    /// element byte by byte (the tests hold the two to the same cuts).
    fast: bool,
}

impl Scanner<'_> {
    /// The next byte that is not white space, not consumed; None at the end.
    fn peek(&mut self) -> Result<Option<u8>, Stop> {
        loop {
            let buf = self.r.fill_buf().map_err(Stop::Io)?;
            if buf.is_empty() {
                return Ok(None);
            }
            match buf.iter().position(|b| !b.is_ascii_whitespace()) {
                Some(i) => {
                    self.line += buf[..i].iter().filter(|&&b| b == b'\n').count();
                    let b = buf[i];
                    self.r.consume(i);
                    return Ok(Some(b));
                }
                None => {
                    let n = buf.len();
                    self.line += buf.iter().filter(|&&b| b == b'\n').count();
                    self.r.consume(n);
                }
            }
        }
    }

    /// Consumes `want` (after white space), or says what stood there instead.
    fn expect(&mut self, want: u8) -> Result<(), Stop> {
        match self.peek()? {
            Some(b) if b == want => {
                self.r.consume(1);
                Ok(())
            }
            Some(b) => Err(Stop::Bad(format!(
                "expected {:?}, found {:?}",
                want as char, b as char
            ))),
            None => Err(Stop::Eof),
        }
    }

    /// Appends the next JSON value's bytes to `out` (or only skips it when `out` is
    /// None), without parsing it: strings, nesting and scalars are only delimited.
    /// Strings are skipped to their next quote or backslash at once (most of an event's
    /// bytes are in its strings), and lines are counted over each piece taken.
    fn value(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<(), Stop> {
        let first = self.peek()?.ok_or(Stop::Eof)?;
        let nested = matches!(first, b'{' | b'[');
        let (mut depth, mut in_str, mut esc, mut started) = (0usize, false, false, false);
        loop {
            let buf = self.r.fill_buf().map_err(Stop::Io)?;
            if buf.is_empty() {
                return if !nested && started && !in_str {
                    Ok(()) // a scalar ends with the file
                } else {
                    Err(Stop::Eof)
                };
            }
            let mut end = None;
            let mut i = 0;
            while i < buf.len() {
                if in_str {
                    if esc {
                        esc = false;
                        i += 1;
                        continue;
                    }
                    match memchr::memchr2(b'"', b'\\', &buf[i..]) {
                        None => i = buf.len(),
                        Some(k) if buf[i + k] == b'\\' => {
                            esc = true;
                            i += k + 1;
                        }
                        Some(k) => {
                            in_str = false;
                            i += k + 1;
                            if !nested {
                                end = Some(i);
                                break;
                            }
                        }
                    }
                    continue;
                }
                let b = buf[i];
                match b {
                    b'"' if started && !nested => {
                        return Err(Stop::Bad("a string right after a value".into()))
                    }
                    b'"' => in_str = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if nested => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n' if !nested => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
                started = true;
                i += 1;
            }
            let take = end.unwrap_or(buf.len());
            self.line += memchr::memchr_iter(b'\n', &buf[..take]).count();
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(&buf[..take]);
            }
            self.r.consume(take);
            if end.is_some() {
                return Ok(());
            }
        }
    }

    /// An object's key (a JSON string), decoded.
    fn key(&mut self) -> Result<String, Stop> {
        let mut raw = Vec::new();
        self.value(Some(&mut raw))?;
        serde_json::from_slice(&raw)
            .map_err(|e| Stop::Bad(format!("a key that is not a string: {e}")))
    }
}

/// What reads the pieces, once the top level told the format.
enum Sink {
    None,
    Chrome(ChromeSink),
    Otlp(OtlpSink),
}

impl Sink {
    fn events(&self) -> u64 {
        match self {
            Sink::None => 0,
            Sink::Chrome(c) => c.trace.counts.events,
            Sink::Otlp(o) => o.trace.counts.events,
        }
    }
}

/// One batch of an array's elements: their bytes back to back, each one's end and line.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    ends: Vec<(usize, usize)>,
}

impl Batch {
    /// Each element's start, end and line.
    fn pieces(&self) -> Vec<(usize, usize, usize)> {
        self.ends
            .iter()
            .scan(0, |start, &(end, line)| {
                let s = *start;
                *start = end;
                Some((s, end, line))
            })
            .collect()
    }

    /// Emptied and sent back to be filled again (its memory reused), where the cutter
    /// still takes batches.
    fn give_back(mut self, back: &SyncSender<Batch>) {
        self.bytes.clear();
        self.ends.clear();
        let _ = back.try_send(self);
    }
}

struct Reader<'a, 'b> {
    s: Scanner<'b>,
    sink: Sink,
    path: &'a Path,
}

impl Reader<'_, '_> {
    /// The elements of the array that starts here, parsed batch by batch: this thread
    /// cuts the batches out while another parses the one before (on every core) and
    /// hands its pieces to the sink in file order.
    fn array(&mut self) -> Result<(), Stop> {
        self.s.expect(b'[')?;
        let (tx, rx) = sync_channel::<Batch>(1);
        // Parsed batches go back to be filled again: their memory is reused, not
        // grown and paged in anew for every batch.
        let (back, spare) = sync_channel::<Batch>(2);
        let sink = &mut self.sink;
        let scanner = &mut self.s;
        std::thread::scope(|scope| {
            let parser = scope.spawn(move || -> Result<(), Stop> {
                let o = match sink {
                    Sink::Chrome(c) => return chrome_batches(c, rx, back),
                    Sink::Otlp(o) => o,
                    Sink::None => unreachable!("an array read before its format was told"),
                };
                for batch in rx {
                    otlp_batch(o, &batch)?;
                    batch.give_back(&back);
                }
                Ok(())
            });
            let cut = elements(scanner, &tx, &spare);
            drop(tx);
            // A piece that did not parse lies before where the cutting stopped.
            let parsed = parser
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            parsed.and(cut)
        })
    }

    /// The top level: an array of events, or objects (one per line for OTLP).
    fn top(&mut self) -> Result<(), Stop> {
        match self.s.peek()? {
            Some(b'[') => {
                self.sink = Sink::Chrome(ChromeSink::new(Trace::new(self.path, Format::Chrome)));
                self.array()?;
            }
            Some(b'{') => self.object()?,
            Some(b) => return Err(Stop::Bad(format!("{:?} where a trace starts", b as char))),
            None => return Err(Stop::Eof),
        }
        loop {
            match self.s.peek()? {
                None => return Ok(()),
                Some(b'{') if matches!(self.sink, Sink::Otlp(_)) => self.object()?,
                Some(b) => return Err(Stop::Bad(format!("{:?} after the trace's end", b as char))),
            }
        }
    }

    fn object(&mut self) -> Result<(), Stop> {
        self.s.expect(b'{')?;
        let mut first = true;
        loop {
            match self.s.peek()? {
                Some(b'}') => {
                    self.s.r.consume(1);
                    return Ok(());
                }
                Some(b',') if !first => self.s.r.consume(1),
                Some(_) if first => {}
                Some(b) => {
                    return Err(Stop::Bad(format!(
                        "expected ',' or '}}', found {:?}",
                        b as char
                    )))
                }
                None => return Err(Stop::Eof),
            }
            first = false;
            let key = self.s.key()?;
            self.s.expect(b':')?;
            match (key.as_str(), &self.sink) {
                ("traceEvents", Sink::None | Sink::Chrome(_)) => {
                    if matches!(self.sink, Sink::None) {
                        let t = Trace::new(self.path, Format::Chrome);
                        self.sink = Sink::Chrome(ChromeSink::new(t));
                    }
                    self.array()?;
                }
                ("resourceSpans", Sink::None | Sink::Otlp(_)) => {
                    if matches!(self.sink, Sink::None) {
                        self.sink = Sink::Otlp(OtlpSink::new(Trace::new(self.path, Format::Otlp)));
                    }
                    self.array()?;
                }
                _ => self.s.value(None)?,
            }
        }
    }
}

/// Cuts the elements of an array (its `[` consumed) into batches sent to `tx`; the
/// last batch goes before an error or the end is returned.
fn elements(s: &mut Scanner, tx: &SyncSender<Batch>, spare: &Receiver<Batch>) -> Result<(), Stop> {
    let fresh = || {
        spare.try_recv().unwrap_or_else(|_| Batch {
            bytes: Vec::with_capacity(BATCH_BYTES + (BATCH_BYTES >> 3)),
            ends: Vec::new(),
        })
    };
    let mut batch = fresh();
    // The first batches are smaller, so that parsing starts soon after the file is
    // opened (the cores would wait for a whole batch to be cut).
    let mut target = FIRST_BATCH_BYTES;
    let mut first = true;
    let stop = loop {
        match s.peek() {
            Err(e) => break Err(e),
            Ok(Some(b']')) => {
                s.r.consume(1);
                break Ok(());
            }
            Ok(Some(b',')) if !first => s.r.consume(1),
            Ok(Some(_)) if first => {}
            Ok(Some(b)) => {
                break Err(Stop::Bad(format!(
                    "expected ',' or ']', found {:?}",
                    b as char
                )))
            }
            Ok(None) => break Err(Stop::Eof),
        }
        first = false;
        // White space before the element: its line is where it starts.
        match s.peek() {
            Err(e) => break Err(e),
            Ok(None) => break Err(Stop::Eof),
            Ok(Some(_)) => {}
        }
        // Whole objects of what was read, 64 bytes at a time; the rest one by one.
        let fast = match s.r.fill_buf() {
            Ok(_) if !s.fast => (0, s.line),
            Ok(buf) => {
                super::json_cut::objects(buf, s.line, &mut batch.bytes, &mut batch.ends, target)
            }
            Err(e) => break Err(Stop::Io(e)),
        };
        if fast.0 > 0 {
            s.r.consume(fast.0);
            s.line = fast.1;
        } else {
            let line = s.line;
            if let Err(e) = s.value(Some(&mut batch.bytes)) {
                break Err(e);
            }
            batch.ends.push((batch.bytes.len(), line));
        }
        if batch.bytes.len() >= target {
            target = (2 * target).min(BATCH_BYTES);
            let full = std::mem::replace(&mut batch, fresh());
            if tx.send(full).is_err() {
                // The parser stopped at a piece that did not parse: its error stands.
                return Ok(());
            }
        }
    };
    if !batch.ends.is_empty() {
        let _ = tx.send(batch);
    }
    stop
}

/// A run of Chrome events parsed by one task: each event (or the error of a piece that
/// did not parse), and the texts their names and attributes are in.
struct ParsedRun {
    events: Vec<Result<Parsed, Stop>>,
    names: Interner,
    attrs: String,
}

/// Chrome events batch by batch: each batch is parsed on every core (here) while the
/// one before is handed to the sink in file order (on a thread of its own), so that
/// taking events in order, which only one thread can do, is never all that runs.
fn chrome_batches(
    c: &mut ChromeSink,
    rx: Receiver<Batch>,
    back: SyncSender<Batch>,
) -> Result<(), Stop> {
    let (tx, parsed) = sync_channel::<Vec<ParsedRun>>(1);
    std::thread::scope(|scope| {
        let taker = scope.spawn(move || -> Result<(), Stop> {
            for runs in parsed {
                for run in runs {
                    let block = c.trace.attrs.add_block(run.attrs);
                    let mut names = RunNames::new(run.names);
                    for ev in run.events {
                        c.add_parsed(ev?, &mut names, block);
                    }
                }
            }
            Ok(())
        });
        let mut seen = 0u64;
        for batch in rx {
            let runs = parse_chrome(&batch, seen);
            seen += batch.ends.len() as u64;
            batch.give_back(&back);
            // The taker stopped at a piece that did not parse: its error stands.
            if tx.send(runs).is_err() {
                break;
            }
        }
        drop(tx);
        taker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// A batch of Chrome events parsed on every core, `before` events coming before it in
/// the file; each task parses a run of events, writing their names and attributes into
/// texts of its own, which the trace keeps whole.
fn parse_chrome(batch: &Batch, before: u64) -> Vec<ParsedRun> {
    let pieces = batch.pieces();
    let bytes = &batch.bytes;
    pieces
        .par_chunks(EVENTS_PER_TASK)
        .enumerate()
        .map(|(k, run)| {
            let first = before + (k * EVENTS_PER_TASK) as u64;
            let mut attrs = String::with_capacity(run[run.len() - 1].1 - run[0].0);
            let mut names = Interner::default();
            let mut spare = String::new();
            let events = run
                .iter()
                .enumerate()
                .map(|(i, &(a, b, line))| {
                    let piece = &bytes[a..b];
                    // Each event goes from the scanner to its record with no move
                    // between (an event is a few hundred bytes).
                    if let Some(ev) = chrome_scan::event_in(piece, &mut spare) {
                        return Ok(ev.parsed(&mut names, &mut attrs, &mut spare));
                    }
                    serde_json::from_slice::<Event>(piece)
                        .map(|ev| ev.parsed(&mut names, &mut attrs, &mut spare))
                        .map_err(|e| bad_piece(&e, line, first + i as u64))
                })
                .collect();
            ParsedRun {
                events,
                names,
                attrs,
            }
        })
        .collect()
}

/// A batch of OTLP requests handed to `o` in order; a piece that does not parse is an
/// error naming its line and number.
fn otlp_batch(o: &mut OtlpSink, batch: &Batch) -> Result<(), Stop> {
    let before = o.trace.counts.events;
    for (i, &(a, b, line)) in batch.pieces().iter().enumerate() {
        let r = serde_json::from_slice::<ResourceSpans>(&batch.bytes[a..b]);
        o.add(r.map_err(|e| bad_piece(&e, line, before + i as u64))?);
    }
    Ok(())
}

/// A piece that did not parse: the line is the file's (the piece's first line plus the
/// error's), the event its number in the file.
fn bad_piece(e: &serde_json::Error, line: usize, index: u64) -> Stop {
    let text = e.to_string();
    let why = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(w, _)| w);
    Stop::Piece {
        line: line + e.line(),
        event: index + 1,
        why: why.to_string(),
    }
}

/// Reads a JSON trace from `stream` (already decompressed and capped).
pub fn read(stream: &mut Stream, path: &Path) -> Result<Trace, ImportError> {
    let mut r = Reader {
        s: Scanner {
            r: stream,
            line: 0,
            fast: true,
        },
        sink: Sink::None,
        path,
    };
    let cut = match r.top() {
        Ok(()) => None,
        Err(Stop::Eof) => Some(r.s.line + 1),
        Err(Stop::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Some(r.s.line + 1),
        Err(Stop::Io(e)) => return Err(ImportError::from_io(path, e)),
        Err(Stop::Bad(why)) => {
            return Err(ImportError::Json {
                path: path.to_path_buf(),
                line: r.s.line + 1,
                event: r.sink.events() + 1,
                message: why,
            })
        }
        Err(Stop::Piece { line, event, why }) => {
            return Err(ImportError::Json {
                path: path.to_path_buf(),
                line,
                event,
                message: why,
            })
        }
    };
    let mut trace = match r.sink {
        Sink::Chrome(c) => c.finish(),
        Sink::Otlp(o) => o.finish(),
        Sink::None => {
            return Err(ImportError::NotATrace {
                path: path.to_path_buf(),
                why: match cut {
                    Some(_) => "the JSON ends before any trace event".into(),
                    None => "a JSON object with neither traceEvents (Chrome trace events) \
                             nor resourceSpans (OTLP)"
                        .into(),
                },
            })
        }
    };
    if let Some(line) = cut {
        trace.warn(format!(
            "the file ends in the middle of its JSON at line {line} (cut while being \
             written?): the {} events before the cut are kept",
            trace.counts.events
        ));
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each batch's bytes and its elements' (end, line).
    type Cuts = Vec<(Vec<u8>, Vec<(usize, usize)>)>;

    /// The batches `elements` cuts from `text` (after its `[`), how it stopped and the
    /// line it stopped on.
    fn cut(text: &[u8], fast: bool) -> (Cuts, String, usize) {
        let inner: Box<dyn std::io::Read> = Box::new(std::io::Cursor::new(text.to_vec()));
        // A small buffer: elements cross its end often.
        let mut r = std::io::BufReader::with_capacity(
            97,
            super::super::source::Capped::new(inner, u64::MAX),
        );
        let mut s = Scanner {
            r: &mut r,
            line: 0,
            fast,
        };
        s.expect(b'[').ok().expect("an array");
        let (tx, rx) = sync_channel::<Batch>(4);
        let (_back, spare) = sync_channel::<Batch>(1);
        let stop = match elements(&mut s, &tx, &spare) {
            Ok(()) => "end".to_string(),
            Err(Stop::Eof) => "eof".into(),
            Err(Stop::Bad(w)) => format!("bad {w}"),
            Err(Stop::Piece { why, .. }) => format!("piece {why}"),
            Err(Stop::Io(e)) => format!("io {e}"),
        };
        drop(tx);
        let batches = rx.iter().map(|b| (b.bytes, b.ends)).collect();
        (batches, stop, s.line)
    }

    /// Pieces of JSON-like text that trouble a cutter: strings with braces, brackets,
    /// escapes and newlines, nesting, scalars, stray bytes.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("{\"a\": 1}".to_string()),
            Just("{\"s\": \"}{][\"}".to_string()),
            Just("{\"e\": \"\\\"}\"}".to_string()),
            Just("{\"n\": {\"m\": [1, {\"k\": \"\\\\\"}]}}".to_string()),
            Just("{\n\"x\":\n 2\n}".to_string()),
            Just("{}".to_string()),
            Just("7".to_string()),
            Just("\"str\"".to_string()),
            Just("[1, 2]".to_string()),
            Just("{\"a\": [}".to_string()),
            Just("}".to_string()),
            "[a-z{}\\[\\]\"\\\\ ,:\n]{0,40}".prop_map(|s| s),
            "[a-z ]{0,200}".prop_map(|s| format!("{{\"long\": \"{s}\"}}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        #[test]
        fn the_fast_cutter_cuts_as_the_byte_by_byte_one(
            pieces in prop::collection::vec(piece(), 0..12),
            seps in prop::collection::vec("[ \n]{0,3},[ \n]{0,3}", 12),
            end in prop_oneof![Just("]"), Just(""), Just("\n]\n"), Just(", ")],
        ) {
            let mut text = String::from("[");
            for (i, p) in pieces.iter().enumerate() {
                if i > 0 {
                    text.push_str(&seps[i]);
                }
                text.push_str(p);
            }
            text.push_str(end);
            let slow = cut(text.as_bytes(), false);
            let fast = cut(text.as_bytes(), true);
            prop_assert_eq!(fast, slow, "{}", text);
        }
    }

    #[test]
    fn a_trace_of_many_lines_cuts_alike_both_ways() {
        let mut text = String::from("[\n");
        for i in 0..2000 {
            if i > 0 {
                text.push_str(",\n");
            }
            text.push_str(&format!(
                "  {{\n    \"ph\": \"X\", \"name\": \"op{{{i}}}\", \"ts\": {i},\n    \"args\": {{\"a\": [1, 2]}}\n  }}"
            ));
        }
        text.push_str("\n]\n");
        let (fast, slow) = (cut(text.as_bytes(), true), cut(text.as_bytes(), false));
        assert_eq!(fast.0.iter().map(|b| b.1.len()).sum::<usize>(), 2000);
        assert_eq!(fast, slow);
    }
}
