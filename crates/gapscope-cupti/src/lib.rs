//! CUPTI's activity records of GPU work (kernels, copies, memsets) read into a plain
//! [`Record`], and CUDA's shared libraries found at run time ([`dylib`]). Two users:
//! gapscope's in-process collector (`src/telemetry/cupti.rs`) and the injection library
//! that collects an external program's records (`crates/gapscope-cupti-inject`), so a
//! record is decoded the same way in both.
//!
//! CUPTI is reached through cudarc's `cupti` bindings with the library opened at run
//! time: nothing here needs CUDA to build.

pub mod dylib;

use std::ptr::addr_of;

pub use cudarc::cupti::{result, sys};
/// The context type of CUPTI's buffer callback.
pub use cudarc::driver::sys::CUcontext;
use sys::CUpti_ActivityKind as Kind;

/// The sonames tried for libcupti, newest first.
pub const CUPTI_NAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];

/// The record kinds of GPU work both collectors enable.
pub const GPU_KINDS: [Kind; 3] = [
    Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    Kind::CUPTI_ACTIVITY_KIND_MEMCPY,
    Kind::CUPTI_ACTIVITY_KIND_MEMSET,
];

/// CUPTI's buffer callbacks, as `cuptiActivityRegisterCallbacks` takes them.
pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(CUcontext, u32, *mut u8, usize, usize);

/// The steps both collectors take once libcupti is loaded: check that cudarc finds it,
/// subscribe (refused while another CUPTI client, such as Nsight Systems, is attached),
/// resolve the functions the buffer callback calls, and register the callbacks. Call it
/// under [`dylib::guard`]: cudarc resolves a symbol on its first use and panics when it
/// is missing, and a panic inside a CUPTI callback would abort the program, so the
/// callback's functions are resolved here by calls CUPTI rejects harmlessly (a null
/// buffer; a null context, which asks for the global count).
pub fn subscribe_and_register(
    library: &str,
    requested: BufferRequested,
    completed: BufferCompleted,
) -> Result<(), String> {
    // SAFETY: only probes for the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(format!(
            "libcupti was opened from {library} but cudarc cannot find it by name"
        ));
    }
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    // SAFETY: `handle` is a valid out-pointer; no callback function, no user data.
    unsafe { result::subscribe(&mut handle, None, std::ptr::null_mut()) }.map_err(|e| {
        if e.0 == sys::CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
            "cuptiSubscribe: another CUPTI client (a profiler such as Nsight Systems) is attached"
                .to_string()
        } else {
            format!("cuptiSubscribe failed: {e:?} (no usable GPU driver?)")
        }
    })?;
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: CUPTI rejects a null buffer without touching `record`.
    let _ = unsafe { result::activity::get_next_record(std::ptr::null_mut(), 0, &mut record) };
    let mut dropped = 0usize;
    // SAFETY: a null context asks for the global count; `dropped` is valid.
    let _ =
        unsafe { result::activity::get_num_dropped_records(std::ptr::null_mut(), 0, &mut dropped) };
    let _ = result::activity::flush_all(0);
    result::activity::register_callbacks(Some(requested), Some(completed))
        .map_err(|e| format!("cuptiActivityRegisterCallbacks: {e:?}"))
}

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    Kernel,
    Memcpy,
    Memset,
}

impl RecordKind {
    /// The name gpu_activity.csv's `kind` column and the span line protocol use.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Kernel => "kernel",
            RecordKind::Memcpy => "memcpy",
            RecordKind::Memset => "memset",
        }
    }
}

/// One record of GPU work as CUPTI reported it (timestamps on CUPTI's clock, which is
/// CLOCK_MONOTONIC where the collector registered its timestamp callback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub kind: RecordKind,
    /// Kernel name (as CUPTI gives it: mangled), copy direction, or "memset".
    pub name: String,
    pub device: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub start: u64,
    pub end: u64,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
}

/// CUPTI's memcpy kind (`CUpti_ActivityMemcpyKind`) as a direction name.
pub fn copy_direction(kind: u8) -> &'static str {
    match kind {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => "unknown",
    }
}

/// Reads one CUPTI activity record into a [`Record`]; `None` for kinds other than
/// kernels, copies and memsets.
///
/// Only fields that every record version since CUDA 11 keeps at the same offset are
/// read (newer versions append fields), each with an unaligned read, so a record of a
/// newer or older CUPTI than the bindings' CUDA 13.0 layout decodes the same.
///
/// # Safety
/// `rec` must point to a complete CUPTI activity record (at least as long as its kind's
/// CUDA 13.0 struct up to `name` for kernels), valid for the call; a kernel record's
/// `name`, when non-null, must be a NUL-terminated string.
pub unsafe fn decode(rec: *const u8) -> Option<Record> {
    // SAFETY (whole body): field addresses are computed from `rec` with addr_of! (no
    // reference to packed fields) and read unaligned, within the record per the caller.
    unsafe {
        let kind = (rec as *const u32).read_unaligned();
        if kind == Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32
            || kind == Kind::CUPTI_ACTIVITY_KIND_KERNEL as u32
        {
            let k = rec as *const sys::CUpti_ActivityKernel10;
            let name_ptr = addr_of!((*k).name).read_unaligned();
            let name = if name_ptr.is_null() {
                String::from("<unnamed kernel>")
            } else {
                std::ffi::CStr::from_ptr(name_ptr)
                    .to_string_lossy()
                    .into_owned()
            };
            let u = |v: i32| v.max(0) as u32;
            Some(Record {
                kind: RecordKind::Kernel,
                name,
                device: addr_of!((*k).deviceId).read_unaligned(),
                stream: addr_of!((*k).streamId).read_unaligned(),
                correlation_id: addr_of!((*k).correlationId).read_unaligned(),
                start: addr_of!((*k).start).read_unaligned(),
                end: addr_of!((*k).end).read_unaligned(),
                grid: Some([
                    u(addr_of!((*k).gridX).read_unaligned()),
                    u(addr_of!((*k).gridY).read_unaligned()),
                    u(addr_of!((*k).gridZ).read_unaligned()),
                ]),
                block: Some([
                    u(addr_of!((*k).blockX).read_unaligned()),
                    u(addr_of!((*k).blockY).read_unaligned()),
                    u(addr_of!((*k).blockZ).read_unaligned()),
                ]),
                bytes: None,
            })
        } else if kind == Kind::CUPTI_ACTIVITY_KIND_MEMCPY as u32 {
            let m = rec as *const sys::CUpti_ActivityMemcpy6;
            Some(Record {
                kind: RecordKind::Memcpy,
                name: copy_direction(addr_of!((*m).copyKind).read_unaligned()).into(),
                device: addr_of!((*m).deviceId).read_unaligned(),
                stream: addr_of!((*m).streamId).read_unaligned(),
                correlation_id: addr_of!((*m).correlationId).read_unaligned(),
                start: addr_of!((*m).start).read_unaligned(),
                end: addr_of!((*m).end).read_unaligned(),
                grid: None,
                block: None,
                bytes: Some(addr_of!((*m).bytes).read_unaligned()),
            })
        } else if kind == Kind::CUPTI_ACTIVITY_KIND_MEMSET as u32 {
            let m = rec as *const sys::CUpti_ActivityMemset4;
            Some(Record {
                kind: RecordKind::Memset,
                name: "memset".into(),
                device: addr_of!((*m).deviceId).read_unaligned(),
                stream: addr_of!((*m).streamId).read_unaligned(),
                correlation_id: addr_of!((*m).correlationId).read_unaligned(),
                start: addr_of!((*m).start).read_unaligned(),
                end: addr_of!((*m).end).read_unaligned(),
                grid: None,
                block: None,
                bytes: Some(addr_of!((*m).bytes).read_unaligned()),
            })
        } else {
            None
        }
    }
}
