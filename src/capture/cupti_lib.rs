//! The CUPTI injection library (crates/gapscope-cupti-inject) that the CUDA driver loads
//! into a program through `CUDA_INJECTION64_PATH` (`cupti = true`): it writes the
//! program's kernels, copies and memsets as `G` lines of the span protocol. Unlike the
//! NVTX library it is a Rust cdylib, built by cargo beside the gapscope binary, so it is
//! looked up there (or named by [`OVERRIDE_ENV`]).

use std::path::{Path, PathBuf};

/// The variable the CUDA driver reads for an injection library (64-bit processes).
pub const CUDA_ENV: &str = "CUDA_INJECTION64_PATH";
/// A library to use instead of the one beside the gapscope binary (its path).
pub const OVERRIDE_ENV: &str = "GAPSCOPE_CUPTI_LIBRARY";
/// The file cargo makes of crates/gapscope-cupti-inject.
pub const FILE_NAME: &str = "libgapscope_cupti_inject.so";
/// How to make it.
pub const BUILD_HINT: &str = "cargo build --release -p gapscope-cupti-inject";

/// Why the CUPTI library cannot be handed to a program.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CuptiLibError {
    #[error(
        "cupti = true: {OVERRIDE_ENV}={0} does not exist; point it at a built {FILE_NAME}, \
         or unset it to use the one beside the gapscope binary"
    )]
    Missing(PathBuf),
    #[error(
        "cupti = true: the CUPTI injection library {FILE_NAME} is not beside the gapscope \
         binary (looked in {looked}); build it with `{BUILD_HINT}` (it lands in \
         target/release/ next to gapscope; copy both together), or set {OVERRIDE_ENV} to \
         its path"
    )]
    NotBuilt { looked: String },
}

/// Folders searched beside `exe`: its own, and `deps/` below it (where cargo puts the
/// library when it is built as a dependency, as for the tests).
pub fn search_dirs(exe: &Path) -> Vec<PathBuf> {
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut out = vec![dir.to_path_buf(), dir.join("deps")];
    // A test binary lives in target/<profile>/deps/: the library may be one up.
    if dir.file_name().is_some_and(|n| n == "deps") {
        if let Some(up) = dir.parent() {
            out.push(up.to_path_buf());
        }
    }
    out
}

/// The library's path: the override, else the first [`FILE_NAME`] in [`search_dirs`] of
/// this executable.
pub fn cupti_library() -> Result<PathBuf, CuptiLibError> {
    let exe = std::env::current_exe().unwrap_or_default();
    find(std::env::var_os(OVERRIDE_ENV).map(PathBuf::from), &exe)
}

fn find(over: Option<PathBuf>, exe: &Path) -> Result<PathBuf, CuptiLibError> {
    if let Some(p) = over {
        return if p.is_file() {
            Ok(std::path::absolute(&p).unwrap_or(p))
        } else {
            Err(CuptiLibError::Missing(p))
        };
    }
    let dirs = search_dirs(exe);
    dirs.iter()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
        .ok_or_else(|| CuptiLibError::NotBuilt {
            looked: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_found_beside_the_binary_or_named_with_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("gapscope");
        let e = find(None, &exe).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(BUILD_HINT) && text.contains(FILE_NAME),
            "{text}"
        );
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        std::fs::create_dir(dir.path().join("deps")).unwrap();
        std::fs::write(dir.path().join("deps").join(FILE_NAME), b"x").unwrap();
        assert_eq!(
            find(None, &exe).unwrap(),
            dir.path().join("deps").join(FILE_NAME)
        );
        std::fs::write(dir.path().join(FILE_NAME), b"x").unwrap();
        assert_eq!(find(None, &exe).unwrap(), dir.path().join(FILE_NAME));
        let missing = dir.path().join("nope.so");
        assert_eq!(
            find(Some(missing.clone()), &exe),
            Err(CuptiLibError::Missing(missing))
        );
    }
}
