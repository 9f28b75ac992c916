//! NVTX: with `--nvtx`, every span is mirrored as an NVTX range (push on enter, pop on
//! exit, on the span's thread), so a run recorded by Nsight Systems shows gapscope's
//! phases over the GPU timeline.
//!
//! `libnvToolsExt.so.1` is opened at run time (cudarc's `nvtx` feature would link it at
//! build time). CUDA 12 and later ship NVTX 3 as headers only; where no library is
//! present the mirror is unavailable and meta.json says why.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};

use crate::trace::{self, SpanMirror};

use super::dylib;

type PushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PopFn = unsafe extern "C" fn() -> c_int;

/// NVTX's range functions from a loaded library.
pub struct Nvtx {
    push: PushFn,
    pop: PopFn,
    /// Keeps the functions' library loaded.
    _lib: libloading::Library,
    pub library: String,
}

thread_local! {
    /// NUL-terminated copies of span names, keyed by the interned name's address (span
    /// names are few and live for the whole process).
    static C_NAMES: RefCell<HashMap<usize, CString>> = RefCell::new(HashMap::new());
}

impl Nvtx {
    /// Opens libnvToolsExt (by soname, else from the CUDA toolkit's folders).
    pub fn load() -> Result<Nvtx, String> {
        let names = ["libnvToolsExt.so.1", "libnvToolsExt.so"];
        let mut candidates: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        for d in dylib::cuda_lib_dirs() {
            for n in names {
                candidates.push(d.join(n).display().to_string());
            }
        }
        let mut last = String::new();
        for c in &candidates {
            if c.starts_with('/') && !std::path::Path::new(c).exists() {
                continue;
            }
            // SAFETY: loading libnvToolsExt runs no initialiser with preconditions.
            match unsafe { libloading::Library::new(c) } {
                Ok(lib) => {
                    // SAFETY: the symbols have these C signatures in nvToolsExt.h.
                    let (push, pop) = unsafe {
                        let push = lib
                            .get::<PushFn>(b"nvtxRangePushA\0")
                            .map_err(|e| e.to_string())?;
                        let pop = lib
                            .get::<PopFn>(b"nvtxRangePop\0")
                            .map_err(|e| e.to_string())?;
                        (*push, *pop)
                    };
                    return Ok(Nvtx {
                        push,
                        pop,
                        _lib: lib,
                        library: c.clone(),
                    });
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!(
            "libnvToolsExt.so.1 not found in the loader path or the CUDA toolkit's folders \
             (CUDA 12+ ships NVTX 3 as headers only; install a libnvToolsExt.so.1, e.g. from \
             an older toolkit, and add its folder to LD_LIBRARY_PATH){}",
            if last.is_empty() || last.contains("No such file") {
                String::new()
            } else {
                format!("; {last}")
            }
        ))
    }
}

impl SpanMirror for Nvtx {
    fn enter(&self, name: &'static str) {
        C_NAMES.with(|m| {
            let mut m = m.borrow_mut();
            let c = m
                .entry(name.as_ptr() as usize)
                .or_insert_with(|| CString::new(name.replace('\0', " ")).unwrap_or_default());
            // SAFETY: `c` is a NUL-terminated string alive for the call.
            unsafe { (self.push)(c.as_ptr()) };
        });
    }

    fn exit(&self, _name: &'static str) {
        // SAFETY: no arguments; NVTX ignores a pop without a push.
        unsafe { (self.pop)() };
    }
}

/// Switches NVTX mirroring on for this process; returns meta.json's status line.
pub fn enable() -> String {
    match Nvtx::load() {
        Ok(n) => {
            let lib = n.library.clone();
            if trace::set_mirror(Box::new(n)) {
                format!("available ({lib})")
            } else {
                trace::set_mirror_enabled(true);
                "available (mirror already installed)".into()
            }
        }
        Err(e) => format!("unavailable: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the mirror calls of spans whose names start with "mirror_probe".
    struct Probe(Mutex<Vec<String>>);

    impl SpanMirror for Probe {
        fn enter(&self, name: &'static str) {
            if name.starts_with("mirror_probe") {
                self.0.lock().unwrap().push(format!("+{name}"));
            }
        }
        fn exit(&self, name: &'static str) {
            if name.starts_with("mirror_probe") {
                self.0.lock().unwrap().push(format!("-{name}"));
            }
        }
    }

    #[test]
    fn the_recorder_mirrors_enter_and_exit_only_while_enabled() {
        let probe: &'static Probe = Box::leak(Box::new(Probe(Mutex::new(Vec::new()))));
        struct Fwd(&'static Probe);
        impl SpanMirror for Fwd {
            fn enter(&self, n: &'static str) {
                self.0.enter(n)
            }
            fn exit(&self, n: &'static str) {
                self.0.exit(n)
            }
        }
        // The only test in this binary that installs a mirror.
        assert!(trace::set_mirror(Box::new(Fwd(probe))));
        assert!(
            !trace::set_mirror(Box::new(Fwd(probe))),
            "a second mirror is refused"
        );
        {
            let outer = trace::Span::enter("mirror_probe_outer");
            let _inner = trace::Span::enter("mirror_probe_inner");
            drop(_inner);
            drop(outer);
        }
        trace::set_mirror_enabled(false);
        drop(trace::Span::enter("mirror_probe_off"));
        trace::set_mirror_enabled(true);
        let calls = probe.0.lock().unwrap().clone();
        assert_eq!(
            calls,
            [
                "+mirror_probe_outer",
                "+mirror_probe_inner",
                "-mirror_probe_inner",
                "-mirror_probe_outer"
            ]
        );
        trace::set_mirror_enabled(false);
    }

    #[test]
    fn without_a_library_nvtx_is_unavailable_with_a_reason() {
        if Nvtx::load().is_err() {
            let s = enable();
            assert!(
                s.starts_with("unavailable: libnvToolsExt.so.1 not found"),
                "{s}"
            );
        }
    }
}
