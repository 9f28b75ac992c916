//! CUPTI activity: every kernel, memcpy and memset of this process, through cudarc's
//! `cupti` bindings with `libcupti` opened at run time. This is the one place where
//! CUPTI's records are read; everything downstream works on [`ActivityRecord`].
//!
//! With `--nvtx` and CUPTI as the NVTX tool ([`super::nvtx`]), the marker records of the
//! span mirror's ranges are collected too: a START record (with the range's name) and an
//! END record per range, paired by id into one [`ActivityKind::NvtxRange`] record
//! ([`pair_markers`]), which is how `gapscope gpu-selftest --nvtx` checks the mirror.
//!
//! CUPTI hands over records in buffers through two C callbacks without user data, so the
//! collector is process-global: [`Cupti::get`] sets it up once (or says why it cannot),
//! [`Cupti::start`] enables the record kinds at a rep's start, [`Cupti::stop`] flushes,
//! disables and returns what the rep produced. CUPTI only sees its own process: with
//! `process = "per_rep"` the worker process collects and returns its records.

use std::ptr::addr_of;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use cudarc::cupti::result::{activity, get_timestamp};
use cudarc::cupti::sys::{self, CUpti_ActivityKind as Kind};

use super::activity::ActivityRecord;
use super::clock::ClockPair;
use super::dylib;
use crate::store::ActivityKind;

/// Buffer size of CUPTI's own samples (helper_cupti_activity.h).
const BUFFER_SIZE: usize = 8 * 1024 * 1024;

/// Records delivered by CUPTI since the last [`Cupti::stop`].
static RECORDS: Mutex<Vec<ActivityRecord>> = Mutex::new(Vec::new());
/// Records CUPTI reported as dropped (buffers full), since the last stop.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// NVTX marker records delivered since the last stop, in delivery order.
static MARKERS: Mutex<Vec<Marker>> = Mutex::new(Vec::new());
/// Marker records are enabled (since the last [`Cupti::start`] that asked for them).
static MARKERS_ON: AtomicBool = AtomicBool::new(false);

/// The NVTX range [`super::Telemetry::begin_rep`] sends through the span mirror right
/// after CUPTI's marker records are enabled: CUPTI sets itself up on the first range after
/// each enable (about 0.85 ms on the H200), which would otherwise land inside the rep's
/// first span. Its records are dropped.
pub const NVTX_PRIMER: &str = "gapscope: NVTX primer";

const KINDS: [Kind; 3] = gapscope_cupti::GPU_KINDS;

/// CUPTI's record buffers, mapped straight from the kernel and kept for the process's
/// life: a buffer CUPTI hands back goes to the free list for its next request.
///
/// Not `malloc`: an 8 MiB block that comes and goes with every rep moves glibc's dynamic
/// mmap and trim thresholds and the top of the main heap, so the prover's next
/// allocations would fault their pages in afresh and telemetry would slow the rep after
/// it. Mapped buffers leave the process heap alone.
struct BufferPool {
    free: Mutex<Vec<usize>>,
}

static POOL: BufferPool = BufferPool {
    free: Mutex::new(Vec::new()),
};

impl BufferPool {
    /// A buffer of [`BUFFER_SIZE`] bytes, or null when none can be mapped.
    fn take(&self) -> *mut u8 {
        if let Some(p) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return p as *mut u8;
        }
        // SAFETY: an anonymous private mapping; no existing memory is touched.
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
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p as *mut u8
        }
    }

    /// Takes back a buffer from [`BufferPool::take`] for reuse.
    fn give(&self, p: *mut u8) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(p as usize);
    }
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
    // Page-aligned (more than CUPTI's 8 bytes); returned to the pool in buffer_completed,
    // which CUPTI calls for every buffer it was given.
    let ptr = POOL.take();
    // SAFETY: out-pointers are valid per CUPTI's contract.
    unsafe {
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_SIZE };
        *max_num_records = 0; // as many as fit
    }
}

/// CUPTI hands back a filled buffer: decode every record, then free it.
///
/// # Safety
/// Called by CUPTI with a buffer from [`buffer_requested`] and its valid size.
unsafe extern "C" fn buffer_completed(
    context: cudarc::driver::sys::CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut out = Vec::new();
    let mut markers = Vec::new();
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: `buffer` holds `valid_size` bytes of records written by CUPTI; `record`
    // points into it while the loop runs.
    while unsafe { activity::get_next_record(buffer, valid_size, &mut record) }.is_ok() {
        // SAFETY (both): CUPTI returned a pointer to a complete record inside the buffer.
        if let Some(r) = unsafe { decode(record as *const u8) } {
            out.push(r);
        } else if let Some(m) = unsafe { decode_marker(record as *const u8) } {
            markers.push(m);
        }
    }
    let mut dropped = 0usize;
    // SAFETY: `context` and `stream_id` are the ones CUPTI passed in; `dropped` is valid.
    if unsafe { activity::get_num_dropped_records(context, stream_id, &mut dropped) }.is_ok() {
        DROPPED.fetch_add(dropped as u64, Ordering::Relaxed);
    }
    RECORDS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(out);
    if !markers.is_empty() {
        MARKERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(markers);
    }
    POOL.give(buffer);
}

/// CUPTI's timestamps: CLOCK_MONOTONIC, the span recorder's clock.
unsafe extern "C" fn monotonic_timestamp() -> u64 {
    crate::trace::now_ns()
}

/// Reads one CUPTI activity record into an [`ActivityRecord`] through the decoder
/// gapscope shares with its injection library ([`gapscope_cupti::decode`]); `None` for
/// kinds not collected.
///
/// # Safety
/// As [`gapscope_cupti::decode`]: `rec` points to a complete CUPTI activity record.
pub unsafe fn decode(rec: *const u8) -> Option<ActivityRecord> {
    // SAFETY: the caller's promise is the decoder's.
    unsafe { gapscope_cupti::decode(rec) }.map(ActivityRecord::from)
}

/// Which end of an NVTX range a marker record is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerEdge {
    /// The range's start, with its message (CUPTI names only the start record).
    Start(String),
    End,
}

/// One NVTX marker record (`CUpti_ActivityMarker2`) of a push/pop or start/end range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Shared by a range's START and END records.
    pub id: u32,
    /// On CUPTI's clock, like every activity timestamp.
    pub timestamp: u64,
    pub edge: MarkerEdge,
}

/// Reads one CUPTI marker record; `None` for other kinds and for markers that are not a
/// range's start or end (instantaneous marks, synchronisation markers).
///
/// `CUpti_ActivityMarker2` has kept its layout since CUDA 8; fields are read unaligned,
/// and `flags` as a plain u32 (it is a bit set, not one enum value).
///
/// # Safety
/// `rec` must point to a complete CUPTI activity record, valid for the call, at least as
/// long as `CUpti_ActivityMarker2` when its kind is `CUPTI_ACTIVITY_KIND_MARKER`; a
/// marker's `name`, when non-null, must be a NUL-terminated string.
pub unsafe fn decode_marker(rec: *const u8) -> Option<Marker> {
    // SAFETY (whole body): as in `decode`: addresses from addr_of!, unaligned reads
    // within the record per the caller.
    unsafe {
        let kind = (rec as *const u32).read_unaligned();
        if kind != Kind::CUPTI_ACTIVITY_KIND_MARKER as u32 {
            return None;
        }
        let m = rec as *const sys::CUpti_ActivityMarker2;
        let flags = (addr_of!((*m).flags) as *const u32).read_unaligned();
        let start = sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_MARKER_START as u32;
        let end = sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_MARKER_END as u32;
        let edge = if flags & start != 0 {
            let name_ptr = addr_of!((*m).name).read_unaligned();
            MarkerEdge::Start(if name_ptr.is_null() {
                String::from("<unnamed range>")
            } else {
                std::ffi::CStr::from_ptr(name_ptr)
                    .to_string_lossy()
                    .into_owned()
            })
        } else if flags & end != 0 {
            MarkerEdge::End
        } else {
            return None;
        };
        Some(Marker {
            id: addr_of!((*m).id).read_unaligned(),
            timestamp: addr_of!((*m).timestamp).read_unaligned(),
            edge,
        })
    }
}

/// Pairs START and END marker records by id into one [`ActivityKind::NvtxRange`] record
/// each (name from the START, start and end from the two timestamps), sorted by start.
/// Records arrive buffer by buffer, so a range's two ends may come in any order. Also
/// returns how many records found no pair: a range open when collection started or
/// stopped has only one of them.
pub fn pair_markers(mut markers: Vec<Marker>) -> (Vec<ActivityRecord>, u64) {
    markers.sort_by_key(|m| (m.id, m.timestamp, m.edge == MarkerEdge::End));
    let mut ranges = Vec::new();
    let mut unpaired = 0u64;
    let mut open: Option<(u32, String, u64)> = None;
    for m in markers {
        if open.as_ref().is_some_and(|(id, _, _)| *id != m.id) {
            open = None;
            unpaired += 1;
        }
        match m.edge {
            MarkerEdge::Start(name) => {
                if open.replace((m.id, name, m.timestamp)).is_some() {
                    unpaired += 1;
                }
            }
            MarkerEdge::End => match open.take() {
                Some((id, name, start)) => ranges.push(ActivityRecord {
                    kind: ActivityKind::NvtxRange,
                    name,
                    device: 0,
                    stream: 0,
                    correlation_id: id,
                    start,
                    end: m.timestamp,
                    grid: None,
                    block: None,
                    bytes: None,
                }),
                None => unpaired += 1,
            },
        }
    }
    unpaired += u64::from(open.is_some());
    ranges.sort_by_key(|r| (r.start, r.correlation_id));
    (ranges, unpaired)
}

/// The process-wide CUPTI collector.
#[derive(Debug)]
pub struct Cupti {
    /// CUPTI reads CLOCK_MONOTONIC through our callback: records need no conversion.
    pub callback_clock: bool,
    /// Where libcupti was found.
    pub library: String,
}

/// What one rep's collection produced.
#[derive(Debug, Default)]
pub struct Collected {
    /// GPU activity, then the NVTX ranges (when markers were enabled).
    pub records: Vec<ActivityRecord>,
    pub dropped: u64,
    /// Marker records whose range's other end was not recorded.
    pub unpaired_markers: u64,
}

impl Cupti {
    /// Sets CUPTI up once per process: opens libcupti (by soname, else from the CUDA
    /// toolkit's folders), subscribes (which fails when another CUPTI client, such as a
    /// profiler, is attached), registers the buffer and timestamp callbacks.
    pub fn get() -> Result<&'static Cupti, String> {
        static CUPTI: OnceLock<Result<Cupti, String>> = OnceLock::new();
        CUPTI.get_or_init(init).as_ref().map_err(|e| e.clone())
    }

    /// Enables kernel, memcpy and memset records, and with `markers` NVTX marker records
    /// (not GPU work: only when the NVTX mirror's tool is this CUPTI). Returns notes: a
    /// marker kind that cannot be enabled does not stop the GPU records.
    pub fn start(&self, markers: bool) -> Result<Vec<String>, String> {
        dylib::guard("CUPTI enable", || {
            RECORDS.lock().unwrap_or_else(|e| e.into_inner()).clear();
            MARKERS.lock().unwrap_or_else(|e| e.into_inner()).clear();
            DROPPED.store(0, Ordering::Relaxed);
            for k in KINDS {
                activity::enable(k).map_err(|e| format!("cuptiActivityEnable({k:?}): {e:?}"))?;
            }
            let mut notes = Vec::new();
            if markers {
                let k = Kind::CUPTI_ACTIVITY_KIND_MARKER;
                match activity::enable(k) {
                    Ok(()) => MARKERS_ON.store(true, Ordering::Relaxed),
                    Err(e) => notes.push(format!(
                        "cuptiActivityEnable({k:?}): {e:?}; NVTX ranges are not recorded"
                    )),
                }
            }
            Ok(notes)
        })
    }

    /// NVTX marker records are on (between a [`Cupti::start`] with markers and the next
    /// [`Cupti::stop`]).
    pub fn markers_on(&self) -> bool {
        MARKERS_ON.load(Ordering::Relaxed)
    }

    /// Flushes every buffer (records of finished work), disables the kinds and returns
    /// the records since [`Cupti::start`].
    pub fn stop(&self) -> Result<Collected, String> {
        dylib::guard("CUPTI flush", || {
            // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1: hand over partly filled buffers too;
            // the completion callback runs before flush_all returns.
            let flushed =
                activity::flush_all(1).map_err(|e| format!("cuptiActivityFlushAll: {e:?}"));
            for k in KINDS {
                let _ = activity::disable(k);
            }
            if MARKERS_ON.swap(false, Ordering::Relaxed) {
                let _ = activity::disable(Kind::CUPTI_ACTIVITY_KIND_MARKER);
            }
            flushed?;
            let mut records =
                std::mem::take(&mut *RECORDS.lock().unwrap_or_else(|e| e.into_inner()));
            let markers = std::mem::take(&mut *MARKERS.lock().unwrap_or_else(|e| e.into_inner()));
            let (ranges, unpaired_markers) = pair_markers(markers);
            records.extend(ranges.into_iter().filter(|r| r.name != NVTX_PRIMER));
            Ok(Collected {
                records,
                dropped: DROPPED.swap(0, Ordering::Relaxed),
                unpaired_markers,
            })
        })
    }

    /// A simultaneous reading of CUPTI's timestamp and CLOCK_MONOTONIC.
    pub fn clock_pair(&self) -> Option<ClockPair> {
        dylib::guard("CUPTI timestamp", || {
            Ok(ClockPair::measure(
                5,
                || {
                    let mut ts = 0u64;
                    // SAFETY: `ts` is a valid out-pointer.
                    unsafe { get_timestamp(&mut ts) }.ok().map(|_| ts)
                },
                crate::trace::now_ns,
            ))
        })
        .ok()
        .flatten()
    }
}

fn init() -> Result<Cupti, String> {
    let library = dylib::preload(&gapscope_cupti::CUPTI_NAMES, &dylib::cuda_lib_dirs())
        .map_err(|e| format!("CUPTI library: {e}"))?;
    dylib::guard("CUPTI setup", || {
        gapscope_cupti::subscribe_and_register(&library, buffer_requested, buffer_completed)?;
        let callback_clock =
            activity::register_timestamp_callback(Some(monotonic_timestamp)).is_ok();
        Ok(Cupti {
            callback_clock,
            library,
        })
    })
}

#[cfg(test)]
#[path = "cupti_tests.rs"]
mod tests;
