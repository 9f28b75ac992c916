//! C ABI of the span recorder, for C++/CUDA host code (header: `cuda/gapscope_trace.h`).
//!
//! Spans opened here nest inside the Rust spans open on the same thread, and Rust spans
//! opened by callbacks nest inside them, so the tree follows the code across the FFI.
//! Handles are span ids; 0 is never a valid id and is ignored everywhere.

use std::ffi::{c_char, CStr};

use super::{enter, exit, intern, set_attr, AttrValue};

/// # Safety
/// `ptr` must be null or point to a NUL-terminated string valid for this call.
unsafe fn name_from(ptr: *const c_char) -> Option<&'static str> {
    if ptr.is_null() {
        return None;
    }
    // C callers pass the same few literals again and again: a small per-thread table of
    // recent names, by pointer, skips the global intern table's lock (and `strlen`).
    // Entries are checked by content, so a buffer reused for another name is never
    // mistaken for the old one.
    let slot = ((ptr as usize) >> 3) % NAME_CACHE_LEN;
    let hit = NAME_CACHE.with(|c| {
        let (p, name) = c.borrow()[slot];
        // SAFETY: `ptr` is NUL-terminated per the caller's contract.
        (p == ptr as usize && unsafe { same_str(ptr, name) }).then_some(name)
    });
    if hit.is_some() {
        return hit;
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    let name = intern(&String::from_utf8_lossy(bytes));
    NAME_CACHE.with(|c| c.borrow_mut()[slot] = (ptr as usize, name));
    Some(name)
}

/// Whether the C string at `ptr` holds exactly `name`. Reads stop at the first byte
/// that differs, so never past the string's NUL (`name`, read from a C string, holds
/// none; the empty default entry never matches a pointer).
///
/// # Safety
/// `ptr` must point to a NUL-terminated string.
#[inline]
unsafe fn same_str(ptr: *const c_char, name: &str) -> bool {
    let b = name.as_bytes();
    for (i, &want) in b.iter().enumerate() {
        // SAFETY: every byte before index i matched `name` (none is NUL), so the
        // string's NUL lies at or after i.
        if unsafe { *ptr.add(i) } as u8 != want {
            return false;
        }
    }
    // SAFETY: as above, index b.len() is at most the string's NUL.
    unsafe { *ptr.add(b.len()) == 0 }
}

const NAME_CACHE_LEN: usize = 64;

thread_local! {
    static NAME_CACHE: std::cell::RefCell<[(usize, &'static str); NAME_CACHE_LEN]> =
        const { std::cell::RefCell::new([(0, ""); NAME_CACHE_LEN]) };
}

/// Opens a span named `name` on the calling thread; returns its handle (0 on a null name).
///
/// # Safety
/// `name` must be null or a NUL-terminated string valid for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn gapscope_span_enter(name: *const c_char) -> u64 {
    // SAFETY: forwarded caller contract.
    match unsafe { name_from(name) } {
        Some(n) => enter(n),
        None => 0,
    }
}

/// Where a span lives, for C: `gapscope_span_ctx` in the header.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CSpanContext {
    pub id: u64,
    pub trace: u64,
}

/// The innermost span open on the calling thread, `{0, 0}` if none.
#[no_mangle]
pub extern "C" fn gapscope_span_context() -> CSpanContext {
    match super::current() {
        Some(c) => CSpanContext {
            id: c.id,
            trace: c.trace,
        },
        None => CSpanContext { id: 0, trace: 0 },
    }
}

/// Opens a span on the calling thread as a child of `parent`, which may be open on
/// another thread; with `parent.id == 0` it nests like [`gapscope_span_enter`].
///
/// # Safety
/// `name` must be null or a NUL-terminated string valid for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn gapscope_span_enter_under(
    name: *const c_char,
    parent: CSpanContext,
) -> u64 {
    // SAFETY: forwarded caller contract.
    let Some(n) = (unsafe { name_from(name) }) else {
        return 0;
    };
    let ctx = (parent.id != 0).then_some(super::SpanContext {
        id: parent.id,
        trace: parent.trace,
    });
    super::enter_with_parent(n, ctx)
}

/// Closes the span `handle` (opened on this thread). Returns 1 if it was open, else 0.
#[no_mangle]
pub extern "C" fn gapscope_span_exit(handle: u64) -> i32 {
    (handle != 0 && exit(handle)) as i32
}

/// # Safety
/// `key` must be null or a NUL-terminated string valid for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn gapscope_span_attr_u64(handle: u64, key: *const c_char, value: u64) {
    // SAFETY: forwarded caller contract.
    if let Some(k) = unsafe { name_from(key) } {
        set_attr(handle, k, AttrValue::U64(value));
    }
}

/// # Safety
/// `key` must be null or a NUL-terminated string valid for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn gapscope_span_attr_f64(handle: u64, key: *const c_char, value: f64) {
    // SAFETY: forwarded caller contract.
    if let Some(k) = unsafe { name_from(key) } {
        set_attr(handle, k, AttrValue::F64(value));
    }
}

/// # Safety
/// `key` and `value` must be null or NUL-terminated strings valid for the call.
#[no_mangle]
pub unsafe extern "C" fn gapscope_span_attr_str(
    handle: u64,
    key: *const c_char,
    value: *const c_char,
) {
    // SAFETY: forwarded caller contract.
    let Some(k) = (unsafe { name_from(key) }) else {
        return;
    };
    if value.is_null() {
        return;
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    let v = unsafe { CStr::from_ptr(value) }
        .to_string_lossy()
        .into_owned();
    set_attr(handle, k, AttrValue::Str(v));
}

/// Handle of the innermost span open on the calling thread (Rust or C++), 0 if none:
/// lets C++ helpers attach attributes to the enclosing span.
#[no_mangle]
pub extern "C" fn gapscope_span_current() -> u64 {
    super::current().map(|c| c.id).unwrap_or(0)
}

/// CLOCK_MONOTONIC nanoseconds, the recorder's clock, for C++ code that times itself.
#[no_mangle]
pub extern "C" fn gapscope_now_ns() -> u64 {
    super::now_ns()
}

#[cfg(test)]
mod tests {
    use super::super::{drain_trace, Span, SpanRecord};

    extern "C" {
        /// In `native/trace_selftest.cpp`: opens `cpp_outer`, calls back into Rust (which
        /// opens `rust_callback`), opens `cpp_inner` inside the callback's span, returns.
        fn gapscope_selftest_nested(cb: extern "C" fn()) -> i32;
        /// In `native/trace_selftest.cpp`: opens `cpp_parent`, and `cpp_worker` under it on
        /// a thread of its own.
        fn gapscope_selftest_thread() -> i32;
    }

    #[test]
    fn a_cpp_thread_opens_a_child_of_the_callers_span() {
        let root = Span::enter("ffi_thread_root");
        let trace = root.trace();
        // SAFETY: no arguments; the C++ side joins its thread before returning.
        assert_eq!(unsafe { gapscope_selftest_thread() }, 0);
        drop(root);
        let spans = drain_trace(trace);
        let by = |n: &str| named(&spans, n);
        let parent = by("cpp_parent");
        let worker = by("cpp_worker");
        assert_eq!(worker.parent, Some(parent.id));
        assert_eq!(worker.trace, parent.trace);
        assert_ne!(worker.thread_id, parent.thread_id);
        assert!(worker.start_ns >= parent.start_ns && worker.end_ns <= parent.end_ns);
        // C++ spans carry the process CPU time too; the parent's interval holds the
        // worker's, so its share of the process clock does as well.
        let (p, w) = (
            parent.process_cpu_ns.unwrap(),
            worker.process_cpu_ns.unwrap(),
        );
        assert!(p >= w, "parent {p} ns < worker {w} ns");
    }

    #[test]
    fn context_is_zero_without_an_open_span() {
        // A fresh thread has no span open.
        let c = std::thread::spawn(|| super::gapscope_span_context())
            .join()
            .unwrap();
        assert_eq!(c, super::CSpanContext { id: 0, trace: 0 });
    }

    fn named<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("span {name} missing: {spans:?}"))
    }

    extern "C" fn rust_callback() {
        let s = Span::enter("rust_callback");
        s.set_attr("from", "rust");
        // SAFETY: literal is NUL-terminated.
        let h = unsafe { super::gapscope_span_enter(c"cpp_from_rust".as_ptr()) };
        assert_eq!(super::gapscope_span_exit(h), 1);
    }

    #[test]
    fn nesting_crosses_the_ffi_boundary_both_ways() {
        let root = Span::enter("ffi_root");
        let trace = root.trace();
        // SAFETY: the callback is a valid extern "C" fn for the whole call.
        let rc = unsafe { gapscope_selftest_nested(rust_callback) };
        assert_eq!(rc, 0);
        drop(root);
        let spans = drain_trace(trace);
        let by = |n: &str| named(&spans, n);
        let root = by("ffi_root");
        let outer = by("cpp_outer");
        let cb = by("rust_callback");
        let from_rust = by("cpp_from_rust");
        let inner = by("cpp_inner");
        assert_eq!(outer.parent, Some(root.id));
        assert_eq!(cb.parent, Some(outer.id));
        assert_eq!(from_rust.parent, Some(cb.id));
        assert_eq!(inner.parent, Some(outer.id));
        assert!(outer.start_ns <= cb.start_ns && cb.end_ns <= outer.end_ns);
        let attr = |s: &super::super::SpanRecord, k: &str| {
            s.attrs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(attr(outer, "bytes"), Some(super::AttrValue::U64(1 << 20)));
        assert_eq!(attr(inner, "gpu_ms"), Some(super::AttrValue::F64(1.5)));
        assert_eq!(
            attr(inner, "kernel"),
            Some(super::AttrValue::Str("ntt".into()))
        );
    }

    #[test]
    fn current_is_the_innermost_open_span_of_this_thread() {
        let outer = Span::enter("current_outer");
        assert_eq!(super::gapscope_span_current(), outer.id());
        {
            let inner = Span::enter("current_inner");
            assert_eq!(super::gapscope_span_current(), inner.id());
        }
        assert_eq!(super::gapscope_span_current(), outer.id());
        let t = outer.trace();
        drop(outer);
        drain_trace(t);
        assert_eq!(
            std::thread::spawn(|| super::gapscope_span_current())
                .join()
                .unwrap(),
            0
        );
    }

    #[test]
    fn a_name_buffer_reused_for_another_name_is_read_again() {
        let root = Span::enter("ffi_reuse_root");
        let trace = root.trace();
        let mut buf = *b"name_one\0";
        for _ in 0..2 {
            // SAFETY: buf is NUL-terminated and outlives the call.
            let h = unsafe { super::gapscope_span_enter(buf.as_ptr().cast()) };
            assert_eq!(super::gapscope_span_exit(h), 1);
        }
        buf[5..8].copy_from_slice(b"two");
        // SAFETY: as above; same pointer, new contents.
        let h = unsafe { super::gapscope_span_enter(buf.as_ptr().cast()) };
        assert_eq!(super::gapscope_span_exit(h), 1);
        drop(root);
        let names: Vec<&str> = drain_trace(trace).iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["ffi_reuse_root", "name_one", "name_one", "name_two"]
        );
    }

    #[test]
    fn null_and_zero_handles_are_ignored() {
        // SAFETY: null is allowed by the contract.
        assert_eq!(unsafe { super::gapscope_span_enter(std::ptr::null()) }, 0);
        assert_eq!(super::gapscope_span_exit(0), 0);
    }
}
