//! gapscope's CUPTI injection library. The CUDA driver loads it into a program when
//! `CUDA_INJECTION64_PATH` names it and calls [`InitializeInjection`] from the program's
//! first `cuInit`; gapscope sets the variable for a command workload with `cupti = true`
//! (docs/external-programs.md, "GPU activity of an external program").
//!
//! It enables CUPTI's kernel, memcpy and memset records, has CUPTI stamp them with
//! CLOCK_MONOTONIC (the span clock) through the timestamp callback, and writes each
//! record as one `G` line of the span line protocol to the pipe in `GAPSCOPE_SPAN_FD`
//! as CUPTI hands over its buffers; at exit it flushes the rest. `S cupti …` lines say
//! how it went: `started` (with the library and the clock), `unavailable <why>` (no
//! libcupti, another CUPTI client attached, …), `flushed records=N dropped=D` at exit.
//! Nothing here may break the program: every failure is a status line, never a crash.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use gapscope_cupti::dylib;
use gapscope_cupti::result::{activity, get_timestamp};
use gapscope_cupti::sys;

/// The `source` of this library's `S` lines.
pub const SOURCE: &str = "cupti";
/// Buffer size handed to CUPTI (as its own samples use).
const BUFFER_SIZE: usize = 8 * 1024 * 1024;

static STARTED: AtomicBool = AtomicBool::new(false);
static RECORDS: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Added to CUPTI's timestamps: 0 with the timestamp callback, else CLOCK_MONOTONIC −
/// CUPTI's clock measured at start.
static OFFSET_NS: AtomicI64 = AtomicI64::new(0);

/// Called by the CUDA driver (from the program's first `cuInit`) once the library is
/// loaded; returns 1 (success) always, so that the program runs on whatever happens here.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    if STARTED.swap(true, Ordering::SeqCst) {
        return 1;
    }
    let outcome = dylib::guard("CUPTI injection", start);
    match outcome {
        Ok(how) => gapscope_emit::status(SOURCE, "started", &how),
        Err(why) => gapscope_emit::status(SOURCE, "unavailable", &why),
    }
    1
}

/// Sets CUPTI up in this process; says where libcupti came from and how records are
/// timed, or why it cannot collect.
fn start() -> Result<String, String> {
    let library = dylib::preload(&gapscope_cupti::CUPTI_NAMES, &dylib::cuda_lib_dirs())
        .map_err(|e| format!("no CUPTI library: {e}; set CUDA_PATH to the toolkit"))?;
    gapscope_cupti::subscribe_and_register(&library, buffer_requested, buffer_completed)?;
    let clock = if activity::register_timestamp_callback(Some(monotonic_ns)).is_ok() {
        "CLOCK_MONOTONIC (CUPTI's timestamp callback)".to_string()
    } else {
        let offset = monotonic_minus_cupti();
        OFFSET_NS.store(offset, Ordering::Relaxed);
        format!("CUPTI's clock shifted by {offset} ns to CLOCK_MONOTONIC (no timestamp callback)")
    };
    for k in gapscope_cupti::GPU_KINDS {
        activity::enable(k).map_err(|e| format!("cuptiActivityEnable({k:?}): {e:?}"))?;
    }
    // SAFETY: registers a plain `extern "C" fn()`; it runs once, at exit.
    if unsafe { libc::atexit(flush_at_exit) } != 0 {
        return Err("atexit failed: records could not be flushed at exit".into());
    }
    Ok(format!("{library}; timestamps: {clock}"))
}

/// CLOCK_MONOTONIC − CUPTI's timestamp, from the closest of a few paired readings.
fn monotonic_minus_cupti() -> i64 {
    let mut best: Option<(u64, i64)> = None;
    for _ in 0..5 {
        let before = gapscope_emit::now_ns();
        let mut ts = 0u64;
        // SAFETY: `ts` is a valid out-pointer.
        if unsafe { get_timestamp(&mut ts) }.is_err() {
            continue;
        }
        let after = gapscope_emit::now_ns();
        let mid = before / 2 + after / 2;
        let window = after - before;
        if best.is_none_or(|(w, _)| window < w) {
            best = Some((window, mid as i64 - ts as i64));
        }
    }
    best.map(|(_, o)| o).unwrap_or(0)
}

/// CUPTI's timestamps: CLOCK_MONOTONIC, the clock of gapscope's spans.
unsafe extern "C" fn monotonic_ns() -> u64 {
    gapscope_emit::now_ns()
}

/// CUPTI asks for an empty buffer.
///
/// # Safety
/// Called by CUPTI with valid out-pointers.
unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_num_records: *mut usize,
) {
    // Page-aligned (CUPTI needs 8 bytes); unmapped in buffer_completed.
    // SAFETY: an anonymous private mapping touches no existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BUFFER_SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    let ok = p != libc::MAP_FAILED;
    // SAFETY: the out-pointers are valid per CUPTI's contract.
    unsafe {
        *buffer = if ok { p.cast() } else { std::ptr::null_mut() };
        *size = if ok { BUFFER_SIZE } else { 0 };
        *max_num_records = 0;
    }
}

/// CUPTI hands back a filled buffer: one `G` line per record, then the buffer goes.
///
/// # Safety
/// Called by CUPTI with a buffer from [`buffer_requested`] and its valid size.
unsafe extern "C" fn buffer_completed(
    context: gapscope_cupti::CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    let offset = OFFSET_NS.load(Ordering::Relaxed);
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: `buffer` holds `valid_size` bytes of records written by CUPTI.
    while unsafe { activity::get_next_record(buffer, valid_size, &mut record) }.is_ok() {
        // SAFETY: CUPTI returned a pointer to a complete record inside the buffer.
        if let Some(r) = unsafe { gapscope_cupti::decode(record as *const u8) } {
            RECORDS.fetch_add(1, Ordering::Relaxed);
            gapscope_emit::gpu_activity(&line_of(&r, offset));
        }
    }
    let mut dropped = 0usize;
    // SAFETY: `context` and `stream_id` are CUPTI's own; `dropped` is valid.
    if unsafe { activity::get_num_dropped_records(context, stream_id, &mut dropped) }.is_ok() {
        DROPPED.fetch_add(dropped as u64, Ordering::Relaxed);
    }
    // SAFETY: the buffer was mapped by buffer_requested with this size.
    unsafe { libc::munmap(buffer.cast(), BUFFER_SIZE) };
}

/// A record as a `G` line's fields, its times moved by `offset_ns` onto CLOCK_MONOTONIC.
pub fn line_of(r: &gapscope_cupti::Record, offset_ns: i64) -> gapscope_emit::GpuActivity<'_> {
    let shift = |t: u64| t.saturating_add_signed(offset_ns);
    gapscope_emit::GpuActivity {
        kind: r.kind.as_str(),
        device: r.device,
        stream: r.stream,
        correlation_id: r.correlation_id,
        start_ns: shift(r.start),
        end_ns: shift(r.end).max(shift(r.start)),
        grid: r.grid,
        block: r.block,
        bytes: r.bytes,
        name: &r.name,
    }
}

/// At exit: hand over every buffer, finished or not, then say how many records went out.
extern "C" fn flush_at_exit() {
    let flushed = dylib::guard("CUPTI flush at exit", || {
        // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1: partly filled buffers too; the completion
        // callback runs before flush_all returns.
        activity::flush_all(1).map_err(|e| format!("cuptiActivityFlushAll: {e:?}"))
    });
    let counts = format!(
        "records={} dropped={}",
        RECORDS.load(Ordering::Relaxed),
        DROPPED.load(Ordering::Relaxed)
    );
    match flushed {
        Ok(()) => gapscope_emit::status(SOURCE, "flushed", &counts),
        Err(e) => gapscope_emit::status(SOURCE, "flush_failed", &format!("{e}; {counts}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_become_lines_on_the_monotonic_clock() {
        let r = gapscope_cupti::Record {
            kind: gapscope_cupti::RecordKind::Kernel,
            name: "_Z5scalePfi".into(),
            device: 0,
            stream: 13,
            correlation_id: 5,
            start: 1_000,
            end: 1_600,
            grid: Some([80, 1, 1]),
            block: Some([256, 1, 1]),
            bytes: None,
        };
        assert_eq!(
            gapscope_emit::gpu_activity_body(&line_of(&r, 0)),
            "G kernel 0 13 5 1000 1600 80x1x1 256x1x1 - _Z5scalePfi"
        );
        let moved = line_of(&r, 10_000);
        assert_eq!((moved.start_ns, moved.end_ns), (11_000, 11_600));
        let back = line_of(&r, -5_000);
        assert_eq!((back.start_ns, back.end_ns), (0, 0), "clamped at zero");
    }
}
