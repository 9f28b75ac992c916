//! Tests of [`super`] (nvtx.rs), kept beside it.

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
    trace::mirror_mark("mirror_probe_mark");
    trace::set_mirror_enabled(false);
    drop(trace::Span::enter("mirror_probe_off"));
    trace::mirror_mark("mirror_probe_mark_off");
    trace::set_mirror_enabled(true);
    let calls = probe.0.lock().unwrap().clone();
    assert_eq!(
        calls,
        [
            "+mirror_probe_outer",
            "+mirror_probe_inner",
            "-mirror_probe_inner",
            "-mirror_probe_outer",
            "+mirror_probe_mark",
            "-mirror_probe_mark"
        ]
    );
    trace::set_mirror_enabled(false);
}

#[test]
fn without_a_library_nvtx_is_unavailable_with_a_reason() {
    if Nvtx::load().is_err() {
        let m = enable(None);
        let s = &m.status;
        assert!(
            s.starts_with("unavailable: libnvToolsExt.so.1 not found"),
            "{s}"
        );
        if std::env::var_os(INJECTION_ENV).is_none() {
            assert!(s.contains("NVTX_INJECTION64_PATH is unset"), "{s}");
        }
        assert!(!m.to_cupti);
    }
}

/// With no tool named, the mirror goes to the CUPTI library gapscope opened; one
/// that cannot serve as the tool is an error naming it, never a panic.
#[test]
fn a_cupti_tool_that_does_not_load_is_unavailable_with_a_reason() {
    if std::env::var_os(INJECTION_ENV).is_some() {
        return; // a profiler's tool takes precedence
    }
    let m = enable(Some("/nonexistent/libcupti.so.13"));
    assert!(!m.to_cupti);
    assert!(
        m.status.starts_with(
            "unavailable: no NVTX tool is attached (NVTX_INJECTION64_PATH is unset), \
                 and CUPTI as the tool: cannot open /nonexistent/libcupti.so.13"
        ),
        "{}",
        m.status
    );
    // A library without the NVTX 3 entry point (libc) is refused by name.
    let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    if let Some(libc) = libc {
        let e = Nvtx::load_injection(libc.as_ref()).err().unwrap();
        assert!(e.contains("has no InitializeInjectionNvtx2"), "{e}");
    }
    assert!(names_cupti(
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13".as_ref()
    ));
    assert!(names_cupti("libcupti.so".as_ref()));
    assert!(!names_cupti("/opt/nsys/libToolsInjection64.so".as_ref()));
}

static TOOL_CALLS: Mutex<Vec<String>> = Mutex::new(Vec::new());

unsafe extern "C" fn tool_push(msg: *const c_char) -> c_int {
    // SAFETY: NVTX passes a NUL-terminated message.
    let m = unsafe { std::ffi::CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    TOOL_CALLS.lock().unwrap().push(format!("push {m}"));
    0
}

unsafe extern "C" fn tool_pop() -> c_int {
    TOOL_CALLS.lock().unwrap().push("pop".into());
    0
}

/// A tool as Nsight Systems' injection library behaves: reads the version table,
/// asks for the CORE and CORE2 modules' tables, checks their sizes, fills slots.
unsafe extern "C" fn good_tool(get: injection::GetExportTableFn) -> c_int {
    use injection::*;
    // SAFETY (whole body): the export tables and slot addresses come from the client
    // under test and are valid for the process's life.
    unsafe {
        let v = get(ETID_VERSIONINFO) as *const ExportTableVersionInfo;
        if v.is_null() || (*v).version < 2 {
            return 0;
        }
        ((*v).set_injection_nvtx_version)(3);
        let cb = get(ETID_CALLBACKS) as *const ExportTableCallbacks;
        if cb.is_null() || (*cb).struct_size < std::mem::size_of::<ExportTableCallbacks>() {
            return 0;
        }
        let (mut core, mut core_size) = (std::ptr::null_mut(), 0);
        if ((*cb).get_module_function_table)(MODULE_CORE, &mut core, &mut core_size) == 0
            || core_size <= 11
        {
            return 0;
        }
        let (mut core2, mut core2_size) = (std::ptr::null_mut(), 0);
        if ((*cb).get_module_function_table)(5, &mut core2, &mut core2_size) == 0
            || core2_size != 16
        {
            return 0;
        }
        let (mut none, mut none_size) = (std::ptr::null_mut(), 0);
        if ((*cb).get_module_function_table)(7, &mut none, &mut none_size) != 0 {
            return 0; // no such module: must be refused
        }
        **core.add(CBID_CORE_RANGE_PUSH_A) = tool_push as *mut std::ffi::c_void;
        **core.add(CBID_CORE_RANGE_POP) = tool_pop as *mut std::ffi::c_void;
        // CORE2's slots lie after CORE's: filling one must not touch CORE's.
        **core2.add(CBID_CORE_RANGE_PUSH_A) = std::ptr::null_mut();
        1
    }
}

unsafe extern "C" fn refusing_tool(_get: injection::GetExportTableFn) -> c_int {
    0
}

unsafe extern "C" fn tool_other() {}

/// A tool that implements every callback it is offered (as CUPTI may): walks each
/// module's table as nvtxImpl.h lays it out (entry 0 null, then the slots, then a
/// null terminator), fills every slot, CORE's range functions with its own.
unsafe extern "C" fn walking_tool(get: injection::GetExportTableFn) -> c_int {
    use injection::*;
    // SAFETY (whole body): as in good_tool; reads stop at each table's terminator.
    unsafe {
        let cb = get(ETID_CALLBACKS) as *const ExportTableCallbacks;
        for module in 1..=MODULE_SIZES.len() as c_int {
            let (mut table, mut size) = (std::ptr::null_mut(), 0);
            if ((*cb).get_module_function_table)(module, &mut table, &mut size) == 0
                || size as usize != MODULE_SIZES[module as usize - 1]
                || !(*table).is_null()
                || !(*table.add(size as usize)).is_null()
            {
                return 0;
            }
            let mut i = 1;
            while !(*table.add(i)).is_null() {
                **table.add(i) = match (module, i) {
                    (MODULE_CORE, CBID_CORE_RANGE_PUSH_A) => tool_push as *mut std::ffi::c_void,
                    (MODULE_CORE, CBID_CORE_RANGE_POP) => tool_pop as *mut std::ffi::c_void,
                    _ => tool_other as *mut std::ffi::c_void,
                };
                i += 1;
            }
            if i != size as usize {
                return 0;
            }
        }
        1
    }
}

unsafe extern "C" fn empty_tool(_get: injection::GetExportTableFn) -> c_int {
    1
}

#[test]
fn the_nvtx3_injection_handshake_installs_the_tools_range_functions() {
    let (push, pop) = injection::attach(good_tool).unwrap();
    let n = Nvtx {
        push,
        pop,
        _lib: None,
        source: "test tool".into(),
    };
    n.enter("gpu_prove");
    n.enter("kernels");
    n.exit("kernels");
    n.exit("gpu_prove");
    assert_eq!(
        *TOOL_CALLS.lock().unwrap(),
        ["push gpu_prove", "push kernels", "pop", "pop"]
    );
    let e = injection::attach(refusing_tool).err().unwrap();
    assert!(e.contains("returned 0"), "{e}");
    let e = injection::attach(empty_tool).err().unwrap();
    assert!(e.contains("no nvtxRangePushA"), "{e}");
    // Filling every module's every slot leaves CORE's range functions in place.
    let (push, pop) = injection::attach(walking_tool).unwrap();
    assert_eq!(
        (push as usize, pop as usize),
        (
            tool_push as *const () as usize,
            tool_pop as *const () as usize
        )
    );
}
