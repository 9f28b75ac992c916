//! NVTX: with `--nvtx`, every span is mirrored as an NVTX range (push on enter, pop on
//! exit, on the span's thread), so a run recorded by Nsight Systems shows gapscope's
//! phases over the GPU timeline.
//!
//! Two ways in, both at run time (cudarc's `nvtx` feature would link libnvToolsExt at
//! build time):
//! 1. `libnvToolsExt.so.1` (NVTX 2, shipped up to CUDA 11), which finds the tool itself;
//! 2. NVTX 3's injection protocol, which CUDA 12+ toolkits use instead of a library (their
//!    NVTX is headers only): a tool such as Nsight Systems names its library in
//!    `NVTX_INJECTION64_PATH`; gapscope opens it and calls `InitializeInjectionNvtx2` with
//!    an export table, and the tool writes its range functions into the table's slots
//!    ([`injection`]).
//!
//! Without a tool (`NVTX_INJECTION64_PATH` unset: no profiler attached) ranges would go
//! nowhere, so where gapscope's own CUPTI collector is running the mirror attaches to
//! that libcupti by the same protocol, without touching the environment ([`enable`]):
//! CUPTI then records every range as marker records, gpu_activity.csv gets them as
//! kind `nvtx` rows, and `gapscope gpu-selftest --nvtx` checks them against the spans.
//!
//! With none of these, the mirror is unavailable and meta.json says why.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};

use crate::trace::{self, SpanMirror};

use super::dylib;

type PushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type PopFn = unsafe extern "C" fn() -> c_int;

/// The variable through which a profiler names its NVTX tool library.
pub const INJECTION_ENV: &str = "NVTX_INJECTION64_PATH";

/// NVTX's range functions, from libnvToolsExt or from an injected tool.
pub struct Nvtx {
    push: PushFn,
    pop: PopFn,
    /// Keeps the functions' library loaded.
    _lib: Option<libloading::Library>,
    /// Where the functions come from.
    pub source: String,
}

thread_local! {
    /// NUL-terminated copies of span names, keyed by the interned name's address (span
    /// names are few and live for the whole process).
    static C_NAMES: RefCell<HashMap<usize, CString>> = RefCell::new(HashMap::new());
}

impl Nvtx {
    /// libnvToolsExt if present, else the tool named by `NVTX_INJECTION64_PATH`.
    pub fn load() -> Result<Nvtx, String> {
        let lib_err = match Self::load_library() {
            Ok(n) => return Ok(n),
            Err(e) => e,
        };
        match std::env::var_os(INJECTION_ENV) {
            Some(path) => {
                Self::load_injection(&path).map_err(|e| format!("{lib_err}; NVTX 3 injection: {e}"))
            }
            None => Err(format!(
                "{lib_err}, and no NVTX tool is attached (NVTX_INJECTION64_PATH is unset; \
                 Nsight Systems sets it: nsys profile -t cuda,nvtx gapscope run …)"
            )),
        }
    }

    /// Attaches to the NVTX 3 tool library at `path` (a file, or a soname the loader
    /// resolves), as if `NVTX_INJECTION64_PATH` named it.
    pub fn load_injection(path: &std::ffi::OsStr) -> Result<Nvtx, String> {
        let shown = std::path::Path::new(path).display().to_string();
        // SAFETY: the tool library is meant to be loaded into NVTX clients; its
        // initialisers have no preconditions on our side.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot open {shown}: {e:?}"))?;
        // SAFETY: NVTX 3 tools export this symbol with this signature (nvtxImpl.h).
        let init: injection::InitFn = unsafe {
            *lib.get::<injection::InitFn>(b"InitializeInjectionNvtx2\0")
                .map_err(|e| format!("{shown} has no InitializeInjectionNvtx2: {e:?}"))?
        };
        let (push, pop) = injection::attach(init)?;
        Ok(Nvtx {
            push,
            pop,
            _lib: Some(lib),
            source: format!("NVTX 3 injection: {shown}"),
        })
    }

    /// Opens libnvToolsExt (by soname, else from the CUDA toolkit's folders).
    fn load_library() -> Result<Nvtx, String> {
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
                        _lib: Some(lib),
                        source: c.clone(),
                    });
                }
                // A file that exists but does not load is worth reporting.
                Err(e) if c.starts_with('/') => last = format!("{c}: {e:?}"),
                Err(_) => {}
            }
        }
        Err(format!(
            "libnvToolsExt.so.1 not found in the loader path or the CUDA toolkit's folders{}",
            if last.is_empty() {
                String::new()
            } else {
                format!(" (present but not loadable: {last})")
            }
        ))
    }
}

/// NVTX 3's side of the tool-injection handshake (the part of nvtxImpl.h a client
/// compiles in): export tables whose callback slots the tool fills.
pub mod injection {
    use std::ffi::{c_int, c_uint, c_void};
    use std::sync::atomic::{AtomicPtr, Ordering};
    use std::sync::OnceLock;

    use super::{PopFn, PushFn};

    pub type GetExportTableFn = unsafe extern "C" fn(u32) -> *const c_void;
    /// `InitializeInjectionNvtx2`: 1 on success.
    pub type InitFn = unsafe extern "C" fn(GetExportTableFn) -> c_int;
    type GetModuleFunctionTableFn =
        unsafe extern "C" fn(c_int, *mut *mut *mut *mut c_void, *mut c_uint) -> c_int;

    /// Export table ids (nvtxTypes.h).
    pub const ETID_CALLBACKS: u32 = 1;
    pub const ETID_VERSIONINFO: u32 = 3;
    /// Callback ids per module, modules 1..=6: CORE, CUDA, OPENCL, CUDART, CORE2, SYNC
    /// (`NVTX_CBID_<module>_SIZE`; id 0 is INVALID in every module).
    pub const MODULE_SIZES: [usize; 6] = [16, 9, 15, 7, 16, 7];
    pub const MODULE_CORE: c_int = 1;
    pub const CBID_CORE_RANGE_PUSH_A: usize = 9;
    pub const CBID_CORE_RANGE_POP: usize = 11;

    #[repr(C)]
    pub struct ExportTableCallbacks {
        pub struct_size: usize,
        pub get_module_function_table: GetModuleFunctionTableFn,
    }

    #[repr(C)]
    pub struct ExportTableVersionInfo {
        pub struct_size: usize,
        pub version: u32,
        pub reserved0: u32,
        pub set_injection_nvtx_version: unsafe extern "C" fn(u32),
    }

    static CALLBACKS: ExportTableCallbacks = ExportTableCallbacks {
        struct_size: std::mem::size_of::<ExportTableCallbacks>(),
        get_module_function_table,
    };

    static VERSION_INFO: ExportTableVersionInfo = ExportTableVersionInfo {
        struct_size: std::mem::size_of::<ExportTableVersionInfo>(),
        version: 3,
        reserved0: 0,
        set_injection_nvtx_version,
    };

    /// Every module's slots, and the tables of slot addresses handed to the tool.
    struct Tables {
        /// `MODULE_SIZES[m]` slots per module, back to back (slot 0 of each unused).
        slots: &'static [AtomicPtr<c_void>],
        /// Per module, `MODULE_SIZES[m] + 1` entries, laid out as nvtxImpl.h's
        /// `functionTable_<module>`: entry 0 (INVALID) null, entries 1.. the slots'
        /// addresses, and a null after the last, so a tool that walks a table to its
        /// terminator stops at its end.
        slot_addrs: &'static [usize],
    }

    /// Where module `m`'s (0-based) slots and address table start.
    fn offsets(m: usize) -> (usize, usize) {
        let slots: usize = MODULE_SIZES[..m].iter().sum();
        (slots, slots + m)
    }

    fn tables() -> &'static Tables {
        static T: OnceLock<Tables> = OnceLock::new();
        T.get_or_init(|| {
            let n: usize = MODULE_SIZES.iter().sum();
            let slots: &'static [AtomicPtr<c_void>] = Box::leak(
                (0..n)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect(),
            );
            // AtomicPtr<c_void> has the layout of *mut c_void: the tool writes through
            // these addresses as into plain function-pointer slots.
            let mut addrs = Vec::with_capacity(n + MODULE_SIZES.len());
            for (m, size) in MODULE_SIZES.iter().enumerate() {
                let (first, _) = offsets(m);
                addrs.push(0);
                addrs.extend((1..*size).map(|i| slots[first + i].as_ptr() as usize));
                addrs.push(0);
            }
            Tables {
                slots,
                slot_addrs: Box::leak(addrs.into_boxed_slice()),
            }
        })
    }

    unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

    unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
        match id {
            ETID_CALLBACKS => &CALLBACKS as *const ExportTableCallbacks as *const c_void,
            ETID_VERSIONINFO => &VERSION_INFO as *const ExportTableVersionInfo as *const c_void,
            _ => std::ptr::null(),
        }
    }

    /// # Safety
    /// Called by the tool with valid (or null) out-pointers.
    unsafe extern "C" fn get_module_function_table(
        module: c_int,
        out_table: *mut *mut *mut *mut c_void,
        out_size: *mut c_uint,
    ) -> c_int {
        if module < 1 || module as usize > MODULE_SIZES.len() {
            return 0;
        }
        let m = module as usize - 1;
        let (_, offset) = offsets(m);
        let t = tables();
        // SAFETY: out-pointers are valid or null per the protocol; the table lives
        // forever and holds MODULE_SIZES[m] + 1 entries from `offset`.
        unsafe {
            if !out_table.is_null() {
                *out_table = t.slot_addrs.as_ptr().add(offset) as *mut *mut *mut c_void;
            }
            if !out_size.is_null() {
                *out_size = MODULE_SIZES[m] as c_uint;
            }
        }
        1
    }

    /// Runs the tool's initialiser against fresh (empty) slots and returns the range
    /// functions it installed.
    pub fn attach(init: InitFn) -> Result<(PushFn, PopFn), String> {
        let t = tables();
        for s in t.slots {
            s.store(std::ptr::null_mut(), Ordering::SeqCst);
        }
        // SAFETY: the tool's initialiser takes our export-table getter, per NVTX 3.
        let rc = unsafe { init(get_export_table) };
        if rc != 1 {
            return Err(format!("the tool's InitializeInjectionNvtx2 returned {rc}"));
        }
        let push = t.slots[CBID_CORE_RANGE_PUSH_A].load(Ordering::SeqCst);
        let pop = t.slots[CBID_CORE_RANGE_POP].load(Ordering::SeqCst);
        if push.is_null() || pop.is_null() {
            return Err("the tool installed no nvtxRangePushA/nvtxRangePop".into());
        }
        // SAFETY: the tool wrote functions of these NVTX signatures into these slots.
        Ok(unsafe {
            (
                std::mem::transmute::<*mut c_void, PushFn>(push),
                std::mem::transmute::<*mut c_void, PopFn>(pop),
            )
        })
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

/// What [`enable`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror {
    /// meta.json's `gpu.nvtx`: "available (<where the ranges go>)" or
    /// "unavailable: <reason>".
    pub status: String,
    /// The ranges go to CUPTI, so its marker records hold them.
    pub to_cupti: bool,
}

/// Switches NVTX mirroring on for this process. `cupti_library` is the libcupti that
/// gapscope's CUPTI collector opened, if it runs in this process: with no tool named in
/// `NVTX_INJECTION64_PATH` the ranges go to it (libnvToolsExt would find no tool either);
/// otherwise libnvToolsExt or the named tool, as [`Nvtx::load`] finds them.
pub fn enable(cupti_library: Option<&str>) -> Mirror {
    let (loaded, to_cupti) = match (std::env::var_os(INJECTION_ENV), cupti_library) {
        (None, Some(lib)) => (
            Nvtx::load_injection(lib.as_ref()).map_err(|e| {
                format!(
                    "no NVTX tool is attached ({INJECTION_ENV} is unset), and CUPTI as the tool: {e}"
                )
            }),
            true,
        ),
        // The variable may name libcupti itself (CUPTI's documented way to record NVTX);
        // libnvToolsExt, too, hands the ranges to the tool it names.
        (Some(path), _) => (Nvtx::load(), names_cupti(&path)),
        (None, None) => (Nvtx::load(), false),
    };
    install(loaded, to_cupti)
}

/// Whether a tool path names a CUPTI library (`…/libcupti.so.13`).
fn names_cupti(path: &std::ffi::OsStr) -> bool {
    std::path::Path::new(path)
        .file_name()
        .and_then(|f| f.to_str())
        .is_some_and(|f| f.starts_with("libcupti"))
}

/// Installs a loaded mirror; `to_cupti`: its ranges go to CUPTI.
fn install(loaded: Result<Nvtx, String>, to_cupti: bool) -> Mirror {
    match loaded {
        Ok(n) => {
            let mut source = n.source.clone();
            if to_cupti {
                source.push_str(" (CUPTI markers)");
            }
            if trace::set_mirror(Box::new(n)) {
                Mirror {
                    status: format!("available ({source})"),
                    to_cupti,
                }
            } else {
                // Another mirror (GAPSCOPE_LOG_SPANS) holds the slot: spans are not
                // mirrored to this tool.
                trace::set_mirror_enabled(true);
                Mirror {
                    status: "available (mirror already installed)".into(),
                    to_cupti: false,
                }
            }
        }
        Err(e) => Mirror {
            status: format!("unavailable: {e}"),
            to_cupti: false,
        },
    }
}

#[cfg(test)]
#[path = "nvtx_tests.rs"]
mod tests;
