//! Finding CUDA's shared libraries at run time.
//!
//! cudarc opens its libraries by bare name (`libcupti.so.13`, `libnvrtc.so.13`, …), which
//! only the dynamic loader's search path resolves, and it panics when none is found. The
//! CUDA toolkit's libraries usually live outside that path (/usr/local/cuda/lib64,
//! …/extras/CUPTI/lib64). So before cudarc is asked, the library is opened here by full
//! path and kept open: glibc then resolves a later open by the same soname to the copy
//! already loaded, and cudarc finds it.

use std::path::PathBuf;
use std::sync::Mutex;

/// Libraries opened here stay loaded for the life of the process.
static KEPT: Mutex<Vec<libloading::Library>> = Mutex::new(Vec::new());

/// Directories a CUDA toolkit keeps its libraries in: `$CUDA_PATH`, `$CUDA_HOME`,
/// `$CUDA_ROOT`, then /usr/local/cuda, each with lib64, lib, extras/CUPTI/lib64 and
/// targets/x86_64-linux/lib.
pub fn cuda_lib_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    let mut out = Vec::new();
    for r in roots {
        for sub in [
            "lib64",
            "lib",
            "extras/CUPTI/lib64",
            "targets/x86_64-linux/lib",
        ] {
            let d = r.join(sub);
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

/// Opens the first of `names` that the loader finds by name or that exists in one of
/// `dirs`, and keeps it open. Returns where it was found, or why nothing was.
pub fn preload(names: &[&str], dirs: &[PathBuf]) -> Result<String, String> {
    let mut errors = Vec::new();
    for name in names {
        // A name the loader does not resolve is looked for in the toolkit's folders next.
        // SAFETY: loading a CUDA library runs its initialisers, which have no
        // preconditions on our side.
        if let Ok(lib) = unsafe { libloading::Library::new(*name) } {
            KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(lib);
            return Ok((*name).to_string());
        }
    }
    for dir in dirs {
        for name in names {
            let p = dir.join(name);
            if !p.exists() {
                continue;
            }
            // SAFETY: as above.
            match unsafe { libloading::Library::new(&p) } {
                Ok(lib) => {
                    KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(lib);
                    return Ok(p.display().to_string());
                }
                Err(e) => errors.push(format!("{}: {e:?}", p.display())),
            }
        }
    }
    let searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(format!(
        "{} not found (loader path, then {}){}",
        names.first().copied().unwrap_or("library"),
        searched.join(", "),
        errors
            .first()
            .map(|e| format!("; present but not loadable: {e}"))
            .unwrap_or_default()
    ))
}

/// Runs `f`, turning a panic (cudarc panics when a library or symbol is missing) into
/// an error message.
pub fn guard<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("{what} panicked: {msg}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_an_error_that_names_it_and_where_it_looked() {
        let dirs = vec![PathBuf::from("/nonexistent/lib64")];
        let e = preload(&["libgapscope-no-such-lib.so.1"], &dirs).unwrap_err();
        assert!(
            e.contains("libgapscope-no-such-lib.so.1") && e.contains("/nonexistent/lib64"),
            "{e}"
        );
    }

    #[test]
    fn a_present_library_loads_and_says_where_from() {
        let dir = [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib64",
            "/usr/lib64",
        ]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("libc.so.6").exists());
        if let Some(d) = dir {
            let at = preload(&["libc.so.6"], &[d]).unwrap();
            assert!(at.contains("libc.so.6"), "{at}");
        }
    }

    #[test]
    fn guard_turns_panics_into_errors() {
        let r: Result<(), String> = guard("probe", || panic!("Unable to dynamically load"));
        assert!(r
            .unwrap_err()
            .contains("probe panicked: Unable to dynamically load"));
        assert_eq!(guard("ok", || Ok::<_, String>(3)), Ok(3));
    }

    #[test]
    fn lib_dirs_include_the_cupti_folder() {
        assert!(cuda_lib_dirs()
            .iter()
            .any(|d| d.ends_with("extras/CUPTI/lib64")));
    }
}
