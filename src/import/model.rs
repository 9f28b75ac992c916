//! What every importer makes of a trace file, whatever its format: spans on threads
//! (with their own ids and parents where the format has them), GPU intervals on
//! (device, stream) lanes, thread names, and the warnings met on the way. Names are
//! interned, so that a file of millions of events holds each distinct name once. The
//! floor of the import module: the formats write it, [`super::tree`] and
//! [`super::reps`] read it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The formats `gapscope import` reads (detected from a file's content).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Chrome trace event JSON (Kineto, tracing-chrome, Perfetto's JSON).
    Chrome,
    /// OpenTelemetry's OTLP JSON (one request, or one per line).
    Otlp,
    /// Nsight Systems' SQLite export (`nsys export --type sqlite`).
    Nsys,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Chrome => "chrome",
            Format::Otlp => "otlp",
            Format::Nsys => "nsys-sqlite",
        }
    }

    /// The clock the format's times are on, as meta.json records it.
    pub fn clock(self) -> &'static str {
        match self {
            Format::Chrome => "the producer's `ts` (microseconds, as written), in ns",
            Format::Otlp => "Unix epoch ns (startTimeUnixNano/endTimeUnixNano)",
            Format::Nsys => "the nsys session's ns timestamps (NVTX and CUPTI on one clock)",
        }
    }
}

/// Distinct names of one trace, each stored once.
#[derive(Debug, Default)]
pub struct Interner {
    ids: HashMap<Box<str>, u32, ahash::RandomState>,
    names: Vec<Box<str>>,
}

impl Interner {
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.into());
        self.ids.insert(name.into(), i);
        i
    }

    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// A thread (or an async track) of the trace: its process and its own id as the file
/// names them, and its name where the file gives one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    pub pid: String,
    pub tid: String,
    pub name: Option<String>,
}

/// One span as read: times in ns on the file's clock.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: u32,
    /// Index into [`Trace::threads`].
    pub thread: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The span's own id, where the format has ids (OTLP's spanId, interned).
    pub id: Option<u64>,
    /// Its parent's id, where the format says (OTLP's parentSpanId).
    pub parent: Option<u64>,
    /// The launch→GPU correlation id a runtime call carries (Kineto's `correlation`,
    /// CUPTI's correlationId), 0 for none.
    pub correlation: u64,
    /// Attributes as a JSON object's text, where there are any (in [`Trace::attrs`]).
    pub attrs: Option<AttrRef>,
}

impl Span {
    /// A span of `name` on `thread` from `start_ns` to `end_ns`, with no ids, no
    /// correlation and no attributes.
    pub fn plain(name: u32, thread: u32, start_ns: u64, end_ns: u64) -> Span {
        Span {
            name,
            thread,
            start_ns,
            end_ns,
            id: None,
            parent: None,
            correlation: 0,
            attrs: None,
        }
    }
}

/// Where a span's attribute text lies in its trace's [`AttrText`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrRef {
    block: u32,
    start: u32,
    len: u32,
}

/// Bytes of a block [`AttrText::keep`] appends to before it starts another.
const OPEN_BLOCK_BYTES: usize = 1 << 20;

/// Every span's attribute text of one trace, in a few large blocks: a file of millions
/// of spans makes (and frees) a block per thousand spans, not an allocation per span.
#[derive(Debug, Default)]
pub struct AttrText {
    blocks: Vec<String>,
    /// The block [`AttrText::keep`] appends to.
    open: Option<u32>,
}

impl AttrText {
    /// Adds a block of texts made elsewhere (a parsing thread's); its number, with which
    /// [`AttrText::at`] names the texts in it.
    pub fn add_block(&mut self, mut text: String) -> u32 {
        text.shrink_to_fit();
        self.blocks.push(text);
        self.blocks.len() as u32 - 1
    }

    /// Where text `start..start + len` of block `block` is kept.
    pub fn at(&self, block: u32, start: u32, len: u32) -> AttrRef {
        debug_assert!(self.blocks[block as usize]
            .get(start as usize..(start + len) as usize)
            .is_some());
        AttrRef { block, start, len }
    }

    /// Keeps `text`; where it is kept.
    pub fn keep(&mut self, text: &str) -> AttrRef {
        let open = self.open.filter(|&b| {
            let b = &self.blocks[b as usize];
            b.len() + text.len() <= b.capacity()
        });
        let block = match open {
            Some(b) => b,
            None => {
                self.blocks
                    .push(String::with_capacity(OPEN_BLOCK_BYTES.max(text.len())));
                self.blocks.len() as u32 - 1
            }
        };
        self.open = Some(block);
        let b = &mut self.blocks[block as usize];
        let start = b.len() as u32;
        b.push_str(text);
        AttrRef {
            block,
            start,
            len: text.len() as u32,
        }
    }

    /// The text kept at `r`.
    pub fn get(&self, r: AttrRef) -> &str {
        &self.blocks[r.block as usize][r.start as usize..(r.start + r.len) as usize]
    }
}

/// The `kind` column of a GPU interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuKind {
    Kernel,
    Memcpy,
    Memset,
}

impl GpuKind {
    pub fn as_str(self) -> &'static str {
        match self {
            GpuKind::Kernel => "kernel",
            GpuKind::Memcpy => "memcpy",
            GpuKind::Memset => "memset",
        }
    }
}

/// A kernel, copy or memset on a GPU lane, on the same clock as the spans.
#[derive(Debug, Clone)]
pub struct GpuRecord {
    pub kind: GpuKind,
    pub name: u32,
    pub device: u32,
    pub stream: u32,
    pub correlation: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
}

/// Most warnings kept word for word per file; the rest are counted.
pub const WARNINGS_KEPT: usize = 20;

/// What was left out of a file or repaired in it, for the user and meta.json.
#[derive(Debug, Default, Clone)]
pub struct Warnings {
    pub kept: Vec<String>,
    pub more: u64,
}

impl Warnings {
    pub fn push(&mut self, w: String) {
        if self.kept.len() < WARNINGS_KEPT {
            self.kept.push(w);
        } else {
            self.more += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.kept.len() as u64 + self.more
    }
}

/// Counts of what a file held besides spans and GPU intervals.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub events: u64,
    /// Instant events (`i`, `I`, `n`, NVTX marks): not spans, left out.
    pub instants: u64,
    /// Flow events (`s`, `t`, `f`; Kineto's `ac2g` launch→kernel links): the link is
    /// the correlation id the runtime call and the kernel both carry.
    pub flows: u64,
    /// Counter events (`C`) and other kinds not imported.
    pub other: u64,
}

/// One file's content, whatever its format.
#[derive(Debug)]
pub struct Trace {
    pub path: PathBuf,
    pub format: Format,
    pub names: Interner,
    pub threads: Vec<ThreadInfo>,
    pub spans: Vec<Span>,
    /// The spans' attribute texts.
    pub attrs: AttrText,
    pub gpu: Vec<GpuRecord>,
    pub warnings: Warnings,
    pub counts: Counts,
    /// Process names by pid (Chrome's `process_name` records).
    pub process_names: HashMap<String, String>,
    thread_ids: HashMap<(String, String), u32>,
}

impl Trace {
    pub fn new(path: &Path, format: Format) -> Trace {
        Trace {
            path: path.to_path_buf(),
            format,
            names: Interner::default(),
            threads: Vec::new(),
            spans: Vec::new(),
            attrs: AttrText::default(),
            gpu: Vec::new(),
            warnings: Warnings::default(),
            counts: Counts::default(),
            process_names: HashMap::new(),
            thread_ids: HashMap::new(),
        }
    }

    /// The index of thread `tid` of process `pid`, added on first sight.
    pub fn thread(&mut self, pid: &str, tid: &str) -> u32 {
        if let Some(&i) = self.thread_ids.get(&(pid.to_string(), tid.to_string())) {
            return i;
        }
        let i = self.threads.len() as u32;
        self.threads.push(ThreadInfo {
            pid: pid.into(),
            tid: tid.into(),
            name: None,
        });
        self.thread_ids.insert((pid.into(), tid.into()), i);
        i
    }

    /// Span `s`'s attributes (a JSON object's text), where it has any.
    pub fn attrs_of(&self, s: &Span) -> Option<&str> {
        s.attrs.map(|r| self.attrs.get(r))
    }

    /// A warning about this file, naming it.
    pub fn warn(&mut self, what: String) {
        self.warnings.push(what);
    }
}
