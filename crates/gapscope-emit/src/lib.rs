//! Emits spans in gapscope's line protocol (`@gapscope1`, docs/external-programs.md) from a
//! Rust program that gapscope runs as an external subject (`[workload] command = […]`).
//! A crate with no dependencies: a program adds it and never pulls in the harness.
//!
//! Lines go to the pipe whose descriptor gapscope passes in `GAPSCOPE_SPAN_FD`, or to
//! stderr where that is not set. Begin and end lines carry the process's CPU time
//! (`process_cpu_at_ns`, CLOCK_PROCESS_CPUTIME_ID), from which gapscope takes the span's
//! exact CPU time. Each line is one `write(2)` of at most 4096 bytes
//! below a lock, so lines of different threads never mix; [`write_lines`] writes a batch
//! of lines in chunks of that size, cut at line ends.
//!
//! ```no_run
//! let _whole = gapscope_emit::Scope::new("load");
//! gapscope_emit::attr("bytes", 4096);
//! ```

use std::fmt::Display;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// The environment variable naming the span pipe's file descriptor.
pub const FD_ENV: &str = "GAPSCOPE_SPAN_FD";
const PREFIX: &str = "@gapscope1 ";
const MAX_LINE: usize = 4096;
/// Longest line body (after the prefix) [`write_line_bytes`] writes.
pub const MAX_BODY: usize = MAX_LINE - PREFIX.len();

// The two libc calls this crate needs, declared here so that it has no dependencies
// (std links libc on Linux already).
#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}
const CLOCK_MONOTONIC: i32 = 1;
const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    fn gettid() -> i32;
}

fn read_clock(clock: i32) -> Option<u64> {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec of the C layout on 64-bit Linux.
    let rc = unsafe { clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC nanoseconds: the clock of gapscope's spans.
pub fn now_ns() -> u64 {
    read_clock(CLOCK_MONOTONIC).unwrap_or(0)
}

/// CPU time of every thread of this process so far (CLOCK_PROCESS_CPUTIME_ID), in ns
/// (0 where the clock cannot be read).
pub fn process_cpu_ns() -> u64 {
    read_clock(CLOCK_PROCESS_CPUTIME_ID).unwrap_or(0)
}

/// The attribute of begin and end lines that gives a span its exact CPU time.
pub const CPU_AT: &str = "process_cpu_at_ns";

/// The calling thread's id (gettid).
pub fn thread_id() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { gettid() as u64 }
}

enum Sink {
    Fd(std::fs::File),
    Stderr,
}

fn sink() -> &'static Mutex<Sink> {
    static SINK: OnceLock<Mutex<Sink>> = OnceLock::new();
    SINK.get_or_init(|| {
        let fd = std::env::var(FD_ENV)
            .ok()
            .and_then(|v| v.parse::<i32>().ok());
        Mutex::new(match fd {
            Some(fd) if fd > 2 => {
                use std::os::fd::FromRawFd;
                // SAFETY: gapscope opened this descriptor for the program and hands it over;
                // nothing else in the process owns it.
                Sink::Fd(unsafe { std::fs::File::from_raw_fd(fd) })
            }
            _ => Sink::Stderr,
        })
    })
}

/// Writes one protocol line (`body` without prefix or newline); a line over the
/// protocol's limit is not written. Errors (a closed pipe) are ignored: measuring must
/// never break the program.
pub fn write_line(body: &str) {
    let mut line = String::with_capacity(PREFIX.len() + body.len() + 1);
    line.push_str(PREFIX);
    line.push_str(body);
    if line.len() > MAX_LINE {
        return;
    }
    line.push('\n');
    let mut s = sink().lock().unwrap_or_else(|e| e.into_inner());
    let _ = match &mut *s {
        Sink::Fd(f) => f.write_all(line.as_bytes()),
        Sink::Stderr => std::io::stderr().write_all(line.as_bytes()),
    };
}

/// Writes one protocol line from `body` (without prefix or newline) with no allocation:
/// the line is put together on the stack, for emitters whose hot path must not allocate
/// (the `tracing` layer). Same limit and error handling as [`write_line`].
pub fn write_line_bytes(body: &[u8]) {
    let len = PREFIX.len() + body.len();
    if len > MAX_LINE {
        return;
    }
    let mut line = [0u8; MAX_LINE + 1];
    line[..PREFIX.len()].copy_from_slice(PREFIX.as_bytes());
    line[PREFIX.len()..len].copy_from_slice(body);
    line[len] = b'\n';
    let mut s = sink().lock().unwrap_or_else(|e| e.into_inner());
    let _ = match &mut *s {
        Sink::Fd(f) => f.write_all(&line[..=len]),
        Sink::Stderr => std::io::stderr().write_all(&line[..=len]),
    };
}

/// The bytes one `write(2)` of [`write_lines`] carries at most: what a pipe writes
/// atomically (PIPE_BUF on Linux), so that a batch never mixes with another writer's
/// lines on the same pipe (a C emitter, NVTX ranges, a forked child).
pub const ATOMIC_WRITE: usize = 4096;

/// Writes complete protocol lines (each with its prefix and newline) in as few
/// `write(2)`s as the pipe takes atomically: chunks of at most [`ATOMIC_WRITE`] bytes cut
/// at line ends (a longer line goes alone). `to`: that file instead of the span pipe
/// (tests, benchmarks). Errors are ignored, as in [`write_line`].
pub fn write_lines(to: Option<&std::fs::File>, lines: &[u8]) {
    let mut rest = lines;
    // The span pipe is opened (from the environment) only when it is written to.
    let mut sink = to
        .is_none()
        .then(|| sink().lock().unwrap_or_else(|e| e.into_inner()));
    while !rest.is_empty() {
        let cut = match rest.len() <= ATOMIC_WRITE {
            true => rest.len(),
            false => rest[..ATOMIC_WRITE]
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|i| i + 1)
                .or_else(|| rest.iter().position(|&b| b == b'\n').map(|i| i + 1))
                .unwrap_or(rest.len()),
        };
        let (chunk, next) = rest.split_at(cut);
        let _ = match (to, sink.as_deref_mut()) {
            (Some(mut f), _) => f.write_all(chunk),
            (None, Some(Sink::Fd(f))) => f.write_all(chunk),
            (None, _) => std::io::stderr().write_all(chunk),
        };
        rest = next;
    }
}

/// The prefix of every protocol line (version 1), with its space.
pub const LINE_PREFIX: &str = PREFIX;

/// Whether `GAPSCOPE_SPAN_FD` names a span pipe (a descriptor above 2): the program runs
/// under gapscope.
pub fn span_fd_set() -> bool {
    std::env::var(FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .is_some_and(|fd| fd > 2)
}

/// Name as the protocol takes it: spaces and '=' become '_', at most 128 bytes.
fn clean(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '=' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    while s.len() > 128 {
        s.pop();
    }
    if s.is_empty() {
        s.push('_');
    }
    s
}

/// Opens a span named `name` on this thread.
pub fn begin(name: &str) {
    write_line(&format!(
        "B {} {} {} {CPU_AT}={}",
        thread_id(),
        now_ns(),
        clean(name),
        process_cpu_ns()
    ));
}

/// Closes the innermost open span named `name` on this thread.
pub fn end(name: &str) {
    // The CPU reading first: the span's CPU time ends before its end time is read.
    let cpu = process_cpu_ns();
    write_line(&format!(
        "E {} {} {} {CPU_AT}={cpu}",
        thread_id(),
        now_ns(),
        clean(name)
    ));
}

/// A finished span, from its start time (CLOCK_MONOTONIC ns, [`now_ns`]) and duration.
pub fn complete(name: &str, start_ns: u64, duration_ns: u64) {
    write_line(&format!(
        "X {} {start_ns} {duration_ns} {}",
        thread_id(),
        clean(name)
    ));
}

/// Attaches `key=value` to this thread's innermost open span (spaces in the value
/// become '_').
pub fn attr(key: &str, value: impl Display) {
    let v: String = value
        .to_string()
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    write_line(&format!("A {} {}={v}", thread_id(), clean(key)));
}

/// Longest name of a GPU activity line, in bytes (kernel names are long).
pub const MAX_GPU_NAME: usize = 1024;

/// One interval of GPU work for a `G` line: a kernel, a copy or a memset, timed on
/// CLOCK_MONOTONIC like every span line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuActivity<'a> {
    /// `kernel`, `memcpy` or `memset`.
    pub kind: &'a str,
    pub device: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
    /// The kernel's name, the copy's direction, `memset`: the rest of the line (spaces
    /// allowed), control characters become '_', at most [`MAX_GPU_NAME`] bytes.
    pub name: &'a str,
}

fn dims(d: Option<[u32; 3]>) -> String {
    d.map(|[x, y, z]| format!("{x}x{y}x{z}"))
        .unwrap_or_else(|| "-".into())
}

/// Text as the rest of a line: control characters become '_', cut to `max` bytes (at a
/// character boundary), never empty.
fn rest_of_line(text: &str, max: usize) -> String {
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { '_' } else { c })
        .collect();
    while s.len() > max {
        s.pop();
    }
    if s.trim().is_empty() {
        s = "_".into();
    }
    s
}

/// The body of a `G` line (without prefix):
/// `G <kind> <device> <stream> <correlation_id> <start_ns> <end_ns> <grid> <block> <bytes> <name>`,
/// grid and block as `XxYxZ`, `-` where a record has none.
pub fn gpu_activity_body(a: &GpuActivity<'_>) -> String {
    format!(
        "G {} {} {} {} {} {} {} {} {} {}",
        clean(a.kind),
        a.device,
        a.stream,
        a.correlation_id,
        a.start_ns,
        a.end_ns,
        dims(a.grid),
        dims(a.block),
        a.bytes.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
        rest_of_line(a.name, MAX_GPU_NAME)
    )
}

/// Writes one `G` line: an interval of GPU work becomes a row of the rep's
/// gpu_activity.csv.
pub fn gpu_activity(a: &GpuActivity<'_>) {
    write_line(&gpu_activity_body(a));
}

/// The body of an `S` line (without prefix): `S <source> <state> <text>`, where the text
/// is the rest of the line.
pub fn status_body(source: &str, state: &str, text: &str) -> String {
    format!(
        "S {} {} {}",
        clean(source),
        clean(state),
        rest_of_line(text, 2048)
    )
}

/// Writes one `S` line: what a collector in the program (such as gapscope's CUPTI
/// injection library) says about itself, e.g. `S cupti started …` or
/// `S cupti unavailable <why>`.
pub fn status(source: &str, state: &str, text: &str) {
    write_line(&status_body(source, state, text));
}

/// A span from construction to drop.
pub struct Scope {
    name: String,
}

impl Scope {
    pub fn new(name: &str) -> Scope {
        let name = clean(name);
        begin(&name);
        Scope { name }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        end(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cleaned_to_what_the_protocol_takes() {
        assert_eq!(clean("a b=c"), "a_b_c");
        assert_eq!(clean(""), "_");
        assert_eq!(clean(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn gpu_activity_lines_put_the_name_last_and_mark_missing_fields() {
        let k = GpuActivity {
            kind: "kernel",
            device: 0,
            stream: 7,
            correlation_id: 42,
            start_ns: 1_000,
            end_ns: 2_500,
            grid: Some([64, 2, 1]),
            block: Some([256, 1, 1]),
            bytes: None,
            name: "void scale<float>(float*, int)",
        };
        assert_eq!(
            gpu_activity_body(&k),
            "G kernel 0 7 42 1000 2500 64x2x1 256x1x1 - void scale<float>(float*, int)"
        );
        let c = GpuActivity {
            kind: "memcpy",
            grid: None,
            block: None,
            bytes: Some(4096),
            name: "Hto\nD\n",
            ..k.clone()
        };
        assert_eq!(
            gpu_activity_body(&c),
            "G memcpy 0 7 42 1000 2500 - - 4096 Hto_D_"
        );
        let long = "k".repeat(5000);
        let body = gpu_activity_body(&GpuActivity { name: &long, ..k });
        assert!(body.len() < MAX_BODY && body.ends_with(&"k".repeat(MAX_GPU_NAME)));
        assert_eq!(
            status_body("cupti", "unavailable", "no libcupti\nhere"),
            "S cupti unavailable no libcupti_here"
        );
    }
}
