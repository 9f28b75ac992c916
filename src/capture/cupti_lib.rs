//! The CUPTI injection library (crates/gapscope-cupti-inject) that the CUDA driver loads
//! into a program through `CUDA_INJECTION64_PATH` (`cupti = true`): it writes the
//! program's kernels, copies and memsets as `G` lines of the span protocol. Unlike the
//! NVTX library it is a Rust cdylib, a dependency of gapscope that cargo builds with it
//! (`target/<profile>/deps/`), so an installed gapscope finds it where [`search_dirs`]
//! says, or where [`OVERRIDE_ENV`] names it.

use std::path::{Path, PathBuf};

/// The variable the CUDA driver reads for an injection library (64-bit processes).
pub const CUDA_ENV: &str = "CUDA_INJECTION64_PATH";
/// A library to use instead of the one [`search_dirs`] finds (its path).
pub const OVERRIDE_ENV: &str = "GAPSCOPE_CUPTI_LIBRARY";
/// The file cargo makes of crates/gapscope-cupti-inject.
pub const FILE_NAME: &str = "libgapscope_cupti_inject.so";
/// How to make it.
pub const BUILD_HINT: &str = "cargo build --release -p gapscope-cupti-inject";
/// The folder of an installed gapscope's own libraries, from the binary's folder:
/// `~/.cargo/bin/gapscope` looks in `~/.cargo/lib/gapscope/`.
pub const INSTALLED_DIR: &str = "../lib/gapscope";

/// The build's own output folder (`target/<profile>`), where cargo left the library when
/// it built this binary: what `cargo install --path .` keeps (it builds in the
/// workspace's target/); a registry or git install builds in a temporary folder that is
/// gone afterwards.
const BUILD_PROFILE_DIR: Option<&str> = option_env!("GAPSCOPE_BUILD_PROFILE_DIR");

/// Why the CUPTI library cannot be handed to a program.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CuptiLibError {
    #[error(
        "cupti = true: {OVERRIDE_ENV}={0} does not exist; point it at a built {FILE_NAME}, \
         or unset it to use the one installed with gapscope"
    )]
    Missing(PathBuf),
    #[error(
        "cupti = true: the CUPTI injection library {FILE_NAME} was not found (looked in \
         {looked}); build it with `{BUILD_HINT}` (it lands in target/release/ next to \
         gapscope; copy both together, or copy it into {INSTALLED_DIR}/ from gapscope's \
         folder), or set {OVERRIDE_ENV} to its path"
    )]
    NotBuilt { looked: String },
}

/// Folders searched, in order, for the binary `exe`: its own folder and `deps/` below it
/// (where cargo puts the library when it is built as a dependency, as for the tests);
/// [`INSTALLED_DIR`] from its folder; then the build's `target/<profile>` and its
/// `deps/`, where the binary was built by cargo (`build`, or `install --path`).
pub fn search_dirs(exe: &Path) -> Vec<PathBuf> {
    dirs_for(exe, BUILD_PROFILE_DIR.map(Path::new))
}

fn dirs_for(exe: &Path, build: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = exe.parent() {
        out.push(dir.to_path_buf());
        out.push(dir.join("deps"));
        // A test binary lives in target/<profile>/deps/: the library may be one up.
        if dir.file_name().is_some_and(|n| n == "deps") {
            if let Some(up) = dir.parent() {
                out.push(up.to_path_buf());
            }
        }
        // `<root>/bin/../lib/gapscope` written as `<root>/lib/gapscope`.
        out.push(match dir.parent() {
            Some(up) if !up.as_os_str().is_empty() => up.join("lib").join("gapscope"),
            _ => dir.join(INSTALLED_DIR),
        });
    }
    if let Some(b) = build {
        for d in [b.to_path_buf(), b.join("deps")] {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

/// The library's path: the override, else the first [`FILE_NAME`] in [`search_dirs`] of
/// this executable.
pub fn cupti_library() -> Result<PathBuf, CuptiLibError> {
    let exe = std::env::current_exe().unwrap_or_default();
    find(
        std::env::var_os(OVERRIDE_ENV).map(PathBuf::from),
        &search_dirs(&exe),
    )
}

fn find(over: Option<PathBuf>, dirs: &[PathBuf]) -> Result<PathBuf, CuptiLibError> {
    if let Some(p) = over {
        return if p.is_file() {
            Ok(std::path::absolute(&p).unwrap_or(p))
        } else {
            Err(CuptiLibError::Missing(p))
        };
    }
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

    fn lib_in(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(FILE_NAME);
        std::fs::write(&p, b"x").unwrap();
        p
    }

    #[test]
    fn the_library_is_found_beside_the_binary_or_named_with_how_to_build_it() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("gapscope");
        let e = find(None, &dirs_for(&exe, None)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(BUILD_HINT) && text.contains(FILE_NAME),
            "{text}"
        );
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        let deps = lib_in(&dir.path().join("deps"));
        assert_eq!(find(None, &dirs_for(&exe, None)).unwrap(), deps);
        let beside = lib_in(dir.path());
        assert_eq!(find(None, &dirs_for(&exe, None)).unwrap(), beside);
        let missing = dir.path().join("nope.so");
        assert_eq!(
            find(Some(missing.clone()), &dirs_for(&exe, None)),
            Err(CuptiLibError::Missing(missing))
        );
        // The override wins over the one beside the binary.
        let other = lib_in(&dir.path().join("elsewhere"));
        assert_eq!(find(Some(other.clone()), &dirs_for(&exe, None)), Ok(other));
    }

    /// An installed binary (`<root>/bin/gapscope`, as `cargo install` lays it out) finds
    /// the library in `<root>/lib/gapscope/`, else in the build's target folder, and the
    /// error names every folder it looked in.
    #[test]
    fn an_installed_binary_looks_in_lib_gapscope_then_in_its_build() {
        let root = tempfile::tempdir().unwrap();
        let exe = root.path().join("bin").join("gapscope");
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        let build = root.path().join("src/target/release");
        let dirs = dirs_for(&exe, Some(&build));
        let text = find(None, &dirs).unwrap_err().to_string();
        for d in [root.path().join("lib/gapscope"), build.join("deps")] {
            assert!(text.contains(&d.display().to_string()), "{text}");
        }
        let built = lib_in(&build.join("deps"));
        assert_eq!(find(None, &dirs).unwrap(), built);
        let installed = lib_in(&root.path().join("lib/gapscope"));
        assert_eq!(find(None, &dirs).unwrap(), installed);
    }

    /// This binary was built by cargo, so it knows its build folder, and that folder is
    /// searched; the tests' own build left the library in its `deps/`.
    #[test]
    fn the_build_folder_is_recorded_and_holds_the_library() {
        let build = Path::new(BUILD_PROFILE_DIR.expect("build.rs records the build folder"));
        let exe = std::env::current_exe().unwrap();
        assert!(
            exe.starts_with(build),
            "{} is not under {}",
            exe.display(),
            build.display()
        );
        let dirs = search_dirs(Path::new("/nonexistent/bin/gapscope"));
        assert!(dirs.contains(&build.join("deps")), "{dirs:?}");
        let found = find(None, &dirs).unwrap();
        assert!(
            found.parent() == Some(build) || found.parent() == Some(&build.join("deps")),
            "{}",
            found.display()
        );
    }
}
