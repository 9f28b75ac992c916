//! A JSON trace, read as a stream: the top level tells the format (an array or an
//! object with `traceEvents`: Chrome trace events; an object with `resourceSpans`:
//! OTLP, one request or one per line), and the events or spans are handed to their
//! format's reader one at a time, so that memory holds what was imported, never the
//! file's text or a tree of it.
//!
//! A file that ends mid-way (a profiler killed while writing) keeps every event read
//! before the cut, with a warning that says where it was cut; any other malformed JSON
//! is an error naming the file, the line and column, and the event it was in.

use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::error::Category;

use super::chrome::{ChromeSink, Events};
use super::model::{Format, Trace};
use super::otlp::{OtlpSink, ResourceSpansSeq};
use super::source::{Stream, OVER_CAP};
use super::ImportError;

/// What reads the events, once the top level told the format.
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

struct Top<'a> {
    sink: &'a mut Sink,
    path: &'a Path,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace: an array of events, or an object with traceEvents or resourceSpans")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        let mut c = self.chrome();
        let r = Events(&mut c).visit_seq(seq);
        *self.sink = Sink::Chrome(c);
        r
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" if !matches!(self.sink, Sink::Otlp(_)) => {
                    let mut c = match std::mem::replace(self.sink, Sink::None) {
                        Sink::Chrome(c) => c,
                        _ => self.chrome(),
                    };
                    let r = map.next_value_seed(Events(&mut c));
                    *self.sink = Sink::Chrome(c);
                    r?;
                }
                "resourceSpans" if !matches!(self.sink, Sink::Chrome(_)) => {
                    let mut o = match std::mem::replace(self.sink, Sink::None) {
                        Sink::Otlp(o) => o,
                        _ => OtlpSink::new(Trace::new(self.path, Format::Otlp)),
                    };
                    let r = map.next_value_seed(ResourceSpansSeq(&mut o));
                    *self.sink = Sink::Otlp(o);
                    r?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

impl Top<'_> {
    fn chrome(&self) -> ChromeSink {
        ChromeSink::new(Trace::new(self.path, Format::Chrome))
    }
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

/// Reads a JSON trace from `stream` (already decompressed and capped).
pub fn read(stream: &mut Stream, path: &Path) -> Result<Trace, ImportError> {
    let mut sink = Sink::None;
    let mut de = serde_json::Deserializer::from_reader(&mut *stream);
    let mut cut = None;
    // OTLP files of the collector's file exporter hold one request per line: read
    // top-level values until the end.
    loop {
        let r = Top {
            sink: &mut sink,
            path,
        }
        .deserialize(&mut de);
        match r {
            Ok(()) => {}
            Err(e) if e.classify() == Category::Eof => {
                cut = Some(e);
                break;
            }
            Err(e) => return Err(json_error(path, e, sink.events())),
        }
        match de.end() {
            Ok(()) => break,
            Err(_) if matches!(sink, Sink::Otlp(_)) => continue,
            Err(e) => return Err(json_error(path, e, sink.events())),
        }
    }
    let mut trace = match sink {
        Sink::Chrome(c) => c.finish(),
        Sink::Otlp(o) => o.finish(),
        Sink::None => {
            return Err(ImportError::NotATrace {
                path: path.to_path_buf(),
                why: match cut {
                    Some(e) => format!("the JSON ends before any trace event ({e})"),
                    None => "a JSON object with neither traceEvents (Chrome trace events) \
                             nor resourceSpans (OTLP)"
                        .into(),
                },
            })
        }
    };
    if let Some(e) = cut {
        trace.warn(format!(
            "the file ends in the middle of its JSON at line {}, column {} (cut while being \
             written?): the {} events before the cut are kept",
            e.line(),
            e.column(),
            trace.counts.events
        ));
    }
    Ok(trace)
}

/// A JSON error as the user reads it; an error of the size cap is the cap's.
fn json_error(path: &Path, e: serde_json::Error, events: u64) -> ImportError {
    if e.classify() == Category::Io {
        if e.to_string().contains(OVER_CAP) {
            return ImportError::from_io(path, std::io::Error::other(OVER_CAP));
        }
        return ImportError::io(path, std::io::Error::other(e.to_string()));
    }
    ImportError::Json {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        event: events + 1,
        message: e.to_string(),
    }
}
