//! Exact instruction and branch counts per span without a PMU, from valgrind's callgrind.
//!
//! A rep with `counters = "emulated"` runs in a worker process under
//! `valgrind --tool=callgrind --separate-threads=yes --branch-sim=yes --instr-atstart=no`
//! (experiment::emulation builds that command). Inside, the rep switches instrumentation
//! on for exactly its proving ([`RepWindow`]), and the span recorder asks callgrind to
//! dump the calling thread's costs at every span start and end ([`boundary`]). With
//! separate threads, each dump holds only its own thread's costs since that thread's
//! previous dump, and zeroes them; so a span's count on its own thread is the sum of its
//! thread's dumps after its start dump, up to and including its end dump
//! ([`span_counts`]). That is the same per-thread attribution the perf-event counters
//! make, with callgrind's exact counts: `Ir` for instructions, `Bc + Bi` (conditional
//! and indirect branches executed) for branches.
//!
//! The client requests are valgrind's own macros, compiled by build.rs into
//! native/callgrind_requests.c. Outside valgrind they cost a few instructions and do
//! nothing; a build without valgrind's headers says so through [`built`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::hot;

extern "C" {
    fn gapscope_cg_built() -> i32;
    fn gapscope_cg_running() -> u32;
    fn gapscope_cg_dump_at(label: *const std::ffi::c_char);
    fn gapscope_cg_instrument(on: i32);
}

/// Prefix of the trigger label of every span-boundary dump.
pub const LABEL_PREFIX: &str = "gapscope-span";

static ARMED: AtomicBool = AtomicBool::new(false);

/// Whether this build carries callgrind's client requests (valgrind's headers were found
/// when it was compiled).
pub fn built() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { gapscope_cg_built() != 0 }
}

/// Whether this process runs under valgrind.
pub fn running_on_valgrind() -> bool {
    // SAFETY: a client request with no arguments; 0 outside valgrind.
    unsafe { gapscope_cg_running() != 0 }
}

/// Makes this process's reps emulated: checks that it runs under valgrind with a build
/// that can talk to it. Called once by the worker before its rep.
pub fn arm() -> Result<(), String> {
    if !built() {
        return Err(format!(
            "this gapscope was built without valgrind's headers (valgrind/callgrind.h), so it \
             cannot mark spans for the emulator; {INSTALL_HINT}, then rebuild"
        ));
    }
    if !running_on_valgrind() {
        return Err(
            "emulated counters need the worker to run under valgrind's callgrind \
             (gapscope run starts it so); this process is not"
                .into(),
        );
    }
    ARMED.store(true, Ordering::Release);
    Ok(())
}

/// Whether [`arm`] succeeded in this process: its reps run under the emulator.
pub fn armed() -> bool {
    ARMED.load(Ordering::Acquire)
}

/// How to install valgrind, for messages.
pub const INSTALL_HINT: &str =
    "install valgrind (Debian/Ubuntu: `apt-get install valgrind`; Fedora: `dnf install valgrind`)";

/// Whether span boundaries are being sent to the emulator now.
#[inline]
pub fn active() -> bool {
    hot::get() & hot::EMULATED != 0
}

/// Which end of a span a dump marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    Start,
    End,
}

impl Edge {
    fn letter(self) -> char {
        match self {
            Edge::Start => 's',
            Edge::End => 'e',
        }
    }
}

/// Dumps this thread's costs, labelled with the span and edge. The recorder calls it as
/// the last thing when a span opens and the first when it closes, so the span's count
/// holds as little of the recorder as possible, and always the same amount: the label is
/// written into a stack buffer with a fixed number of digits, so neither the allocator's
/// state nor the id's length changes the count by an instruction (tests/it/emulated.rs
/// checks that every span carries the same overhead).
pub fn boundary(span_id: u64, edge: Edge) {
    let label = label(span_id, edge);
    // SAFETY: `label` is NUL-terminated and lives for the whole call.
    unsafe { gapscope_cg_dump_at(label.as_ptr().cast()) };
}

/// `gapscope-span <id, 20 digits> <s|e>\0`.
fn label(span_id: u64, edge: Edge) -> [u8; LABEL_LEN] {
    let mut buf = [0u8; LABEL_LEN];
    let p = LABEL_PREFIX.len();
    buf[..p].copy_from_slice(LABEL_PREFIX.as_bytes());
    buf[p] = b' ';
    let mut n = span_id;
    for i in (0..20).rev() {
        buf[p + 1 + i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    buf[p + 21] = b' ';
    buf[p + 22] = edge.letter() as u8;
    buf
}

const LABEL_LEN: usize = LABEL_PREFIX.len() + 24;

/// The rep's proving under the emulator: instrumentation and span dumps on from
/// [`RepWindow::open`] to the drop of the guard; a no-op unless [`arm`]ed.
#[must_use = "instrumentation stops when the window is dropped"]
pub struct RepWindow {
    on: bool,
}

impl RepWindow {
    pub fn open() -> RepWindow {
        let on = ARMED.load(Ordering::Acquire);
        if on {
            // SAFETY: a client request; valgrind is running (checked by `arm`).
            unsafe { gapscope_cg_instrument(1) };
            hot::set(hot::EMULATED, true);
        }
        RepWindow { on }
    }
}

impl Drop for RepWindow {
    fn drop(&mut self) {
        if self.on {
            hot::set(hot::EMULATED, false);
            // SAFETY: as in `open`.
            unsafe { gapscope_cg_instrument(0) };
        }
    }
}

/// One callgrind dump file, as far as span counts need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// Global sequence number of the dump (`part:`).
    pub part: u64,
    /// valgrind's thread number (`thread:`).
    pub thread: u64,
    /// The trigger (`desc: Trigger: …`), e.g. `Client Request: gapscope-span 12 s`.
    pub trigger: String,
    /// Event totals by name (`events:` and `totals:`/`summary:`); events a line leaves
    /// out are 0.
    pub totals: BTreeMap<String, u64>,
}

impl Dump {
    /// The span and edge of a span-boundary dump.
    pub fn span_edge(&self) -> Option<(u64, Edge)> {
        let rest = self.trigger.split(LABEL_PREFIX).nth(1)?;
        let mut it = rest.split_whitespace();
        let id = it.next()?.parse().ok()?;
        let edge = match it.next()? {
            "s" => Edge::Start,
            "e" => Edge::End,
            _ => return None,
        };
        Some((id, edge))
    }

    fn event(&self, name: &str) -> u64 {
        self.totals.get(name).copied().unwrap_or(0)
    }
}

/// Reads the header of a callgrind output file (its cost lines are not needed).
pub fn parse_dump(text: &str) -> Result<Dump, String> {
    let mut part = None;
    let mut thread = None;
    let mut trigger = String::new();
    let mut events: Vec<String> = Vec::new();
    let mut totals: Option<Vec<u64>> = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("part:") {
            part = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("thread:") {
            thread = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("desc: Trigger:") {
            trigger = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("events:") {
            events = v.split_whitespace().map(str::to_string).collect();
        } else if let Some(v) = line
            .strip_prefix("totals:")
            .or_else(|| line.strip_prefix("summary:"))
        {
            let vals: Result<Vec<u64>, _> = v.split_whitespace().map(str::parse).collect();
            totals = Some(vals.map_err(|e| format!("bad totals line {line:?}: {e}"))?);
        }
    }
    if events.is_empty() {
        return Err("no `events:` line (not a callgrind output file?)".into());
    }
    let totals = totals.ok_or("no `totals:` or `summary:` line")?;
    if totals.len() > events.len() {
        return Err(format!(
            "{} totals for {} events",
            totals.len(),
            events.len()
        ));
    }
    Ok(Dump {
        part: part.ok_or("no `part:` line")?,
        thread: thread.ok_or("no `thread:` line (run callgrind with --separate-threads=yes)")?,
        trigger,
        totals: events.into_iter().zip(totals).collect(),
    })
}

/// Instructions and branches a span executed on its own thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpanCounts {
    pub instructions: u64,
    pub branches: u64,
}

/// Counts of every span with both boundary dumps on one thread, by span id.
pub fn span_counts(dumps: &[Dump]) -> Result<BTreeMap<u64, SpanCounts>, String> {
    let mut by_thread: BTreeMap<u64, Vec<&Dump>> = BTreeMap::new();
    for d in dumps {
        by_thread.entry(d.thread).or_default().push(d);
    }
    let mut out = BTreeMap::new();
    for seq in by_thread.values_mut() {
        seq.sort_by_key(|d| d.part);
        // Running sums over this thread's dumps: prefix[i] = costs of dumps 0..i. A sum
        // past 64 bits is no rep's count: the dumps were damaged or made up.
        let mut prefix = vec![SpanCounts::default()];
        for d in seq.iter() {
            let last = *prefix.last().expect("non-empty");
            let add = |a: u64, b: u64| {
                a.checked_add(b).ok_or_else(|| {
                    format!(
                        "the costs of thread {} pass 2^64 at dump {}: these are not the \
                         dumps of one rep",
                        d.thread, d.part
                    )
                })
            };
            prefix.push(SpanCounts {
                instructions: add(last.instructions, d.event("Ir"))?,
                branches: add(add(last.branches, d.event("Bc"))?, d.event("Bi"))?,
            });
        }
        let mut starts: BTreeMap<u64, usize> = BTreeMap::new();
        for (i, d) in seq.iter().enumerate() {
            match d.span_edge() {
                Some((id, Edge::Start)) => {
                    starts.insert(id, i);
                }
                Some((id, Edge::End)) => {
                    let s = starts.remove(&id).ok_or_else(|| {
                        format!(
                            "span {id} ends in dump {} on thread {} without a start dump there",
                            d.part, d.thread
                        )
                    })?;
                    // Dumps after the start dump, up to and including the end dump.
                    out.insert(
                        id,
                        SpanCounts {
                            instructions: prefix[i + 1].instructions - prefix[s + 1].instructions,
                            branches: prefix[i + 1].branches - prefix[s + 1].branches,
                        },
                    );
                }
                None => {}
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(part: u64, thread: u64, label: &str, ir: u64, bc: u64, bi: u64) -> String {
        format!(
            "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd: x\n\
             part: {part}\n\n\ndesc: I1 cache: \ndesc: Trigger: Client Request: {label}\n\n\
             positions: line\nevents: Ir Bc Bcm Bi Bim\nsummary: {ir} {bc} 0 {bi}\n\n\
             fn=(1) main\n0 {ir} {bc} 0 {bi}\n\ntotals: {ir} {bc} 0 {bi}\nthread: {thread}\n"
        )
    }

    #[test]
    fn labels_have_a_fixed_length_and_parse_back() {
        let l = label(4096, Edge::End);
        let text = std::ffi::CStr::from_bytes_until_nul(&l)
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(text, "gapscope-span 00000000000000004096 e");
        let d = parse_dump(&dump(1, 1, text, 1, 0, 0)).unwrap();
        assert_eq!(d.span_edge(), Some((4096, Edge::End)));
        let l = label(u64::MAX, Edge::Start);
        assert_eq!(l.iter().position(|&b| b == 0), Some(LABEL_LEN - 1));
    }

    #[test]
    fn parses_the_header_and_short_totals_lines() {
        let d = parse_dump(&dump(4, 2, "gapscope-span 4096 e", 2018, 1000, 0)).unwrap();
        assert_eq!((d.part, d.thread), (4, 2));
        assert_eq!(d.span_edge(), Some((4096, Edge::End)));
        assert_eq!(
            (d.event("Ir"), d.event("Bc"), d.event("Bim")),
            (2018, 1000, 0)
        );
        // callgrind drops trailing zero events from a totals line.
        let short = "part: 5\nthread: 1\ndesc: Trigger: Client Request: m\n\
                     events: Ir Bc Bcm Bi Bim\ntotals: 8\n";
        let d = parse_dump(short).unwrap();
        assert_eq!((d.event("Ir"), d.event("Bi")), (8, 0));
        assert_eq!(d.span_edge(), None);
        let e = parse_dump("part: 1\nevents: Ir\ntotals: 1\n").unwrap_err();
        assert!(e.contains("separate-threads"), "{e}");
        assert!(parse_dump("hello\n").unwrap_err().contains("events"));
    }

    #[test]
    fn a_span_sums_its_threads_dumps_between_its_edges_and_nothing_of_other_threads() {
        let texts = [
            dump(1, 1, "gapscope-span 10 s", 5000, 9, 9), // before the span: not counted
            dump(2, 1, "gapscope-span 11 s", 100, 10, 1), // parent's own work, child opens
            dump(3, 2, "gapscope-span 20 s", 777, 7, 7),  // other thread, before its span
            dump(4, 2, "gapscope-span 20 e", 300, 30, 0), // other thread's span
            dump(5, 1, "gapscope-span 11 e", 40, 4, 0),   // child ends
            dump(6, 1, "gapscope-span 10 e", 2, 0, 1),    // parent ends
            dump(7, 1, "Program termination", 99, 9, 9),
        ];
        let dumps: Vec<Dump> = texts.iter().map(|t| parse_dump(t).unwrap()).collect();
        let c = span_counts(&dumps).unwrap();
        assert_eq!(
            c[&11],
            SpanCounts {
                instructions: 40,
                branches: 4
            }
        );
        assert_eq!(
            c[&10],
            SpanCounts {
                instructions: 142,
                branches: 16
            }
        );
        assert_eq!(
            c[&20],
            SpanCounts {
                instructions: 300,
                branches: 30
            }
        );
        let orphan = [parse_dump(&dump(1, 1, "gapscope-span 3 e", 1, 0, 0)).unwrap()];
        assert!(span_counts(&orphan)
            .unwrap_err()
            .contains("without a start"));
    }

    #[test]
    fn costs_past_64_bits_are_an_error_not_an_overflow() {
        let big = u64::MAX - 1;
        let texts = [
            dump(1, 1, "gapscope-span 10 s", big, 0, 0),
            dump(2, 1, "gapscope-span 10 e", 2, 0, 0),
        ];
        let dumps: Vec<Dump> = texts.iter().map(|t| parse_dump(t).unwrap()).collect();
        let e = span_counts(&dumps).unwrap_err();
        assert!(e.contains("pass 2^64 at dump 2"), "{e}");
        let texts = [dump(1, 1, "gapscope-span 10 s", 0, big, 2)];
        let dumps: Vec<Dump> = texts.iter().map(|t| parse_dump(t).unwrap()).collect();
        assert!(span_counts(&dumps).unwrap_err().contains("thread 1"));
    }

    #[test]
    fn outside_valgrind_the_requests_do_nothing_and_arming_is_refused() {
        if running_on_valgrind() {
            return;
        }
        boundary(1, Edge::Start);
        let _w = RepWindow::open();
        assert!(!active());
        let e = arm().unwrap_err();
        assert!(e.contains("valgrind"), "{e}");
    }
}
