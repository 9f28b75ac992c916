//! The NVTX injection library (cuda/nvtx_inject.c, built by build.rs with the host C
//! compiler) that a program's own NVTX loads through `NVTX_INJECTION64_PATH`. The
//! library is part of the gapscope binary and written out once per content to a cache
//! folder, so that a binary copied to a GPU host brings it along.

use std::path::PathBuf;

/// The variable NVTX v3 reads for the injection library (64-bit processes).
pub const NVTX_ENV: &str = "NVTX_INJECTION64_PATH";
/// A library to use instead of the built-in one (its path; it must exist).
pub const OVERRIDE_ENV: &str = "GAPSCOPE_NVTX_LIBRARY";

static LIBRARY: &[u8] = include_bytes!(env!("GAPSCOPE_NVTX_LIB"));

/// Why the NVTX library cannot be handed to a program.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error(
        "nvtx = true: {OVERRIDE_ENV}={0} does not exist; point it at a built \
         libgapscope_nvtx.so, or unset it to use the library built into gapscope"
    )]
    Missing(PathBuf),
    #[error(
        "nvtx = true: cannot write the NVTX injection library to {dir}: {why}; set \
         XDG_CACHE_HOME to a writable folder"
    )]
    Unwritable { dir: PathBuf, why: String },
}

fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("gapscope")
}

/// The library's path: the override, else the built-in library written to the cache
/// (once per content: its name carries a hash of the bytes).
pub fn nvtx_library() -> Result<PathBuf, InjectError> {
    if let Some(p) = std::env::var_os(OVERRIDE_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(std::path::absolute(&p).unwrap_or(p))
        } else {
            Err(InjectError::Missing(p))
        };
    }
    library_in(cache_dir())
}

/// The built-in library in `dir`, written there unless it already is.
fn library_in(dir: PathBuf) -> Result<PathBuf, InjectError> {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(LIBRARY);
    let tag: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!("libgapscope_nvtx-{tag}.so"));
    // Reused only when it is a plain file (not a link) holding exactly this library: a
    // file planted in a shared cache is never loaded into the program.
    let is_ours = crate::fsx::read::open_no_follow(&path)
        .ok()
        .and_then(|f| crate::fsx::read::read_all_capped(f, &path, LIBRARY.len() as u64, "").ok())
        .is_some_and(|bytes| bytes == LIBRARY);
    if is_ours {
        return Ok(path);
    }
    let unwritable = |e: std::io::Error| InjectError::Unwritable {
        dir: dir.clone(),
        why: e.to_string(),
    };
    std::fs::create_dir_all(&dir).map_err(unwritable)?;
    // An exclusive temp file beside it, renamed over it; a link or a non-regular file in
    // its place is refused rather than replaced.
    crate::fsx::write_file(&path, LIBRARY).map_err(|e| unwritable(e.into_io()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_file_or_link_in_the_cache_is_never_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("gapscope");
        let first = library_in(cache.clone()).unwrap();
        assert_eq!(std::fs::read(&first).unwrap(), LIBRARY);
        // Same size, other bytes: rewritten with the real library.
        std::fs::write(&first, vec![0u8; LIBRARY.len()]).unwrap();
        assert_eq!(library_in(cache.clone()).unwrap(), first);
        assert_eq!(std::fs::read(&first).unwrap(), LIBRARY);
        // A link in its place (to a copy of the library elsewhere) is refused, not
        // followed nor replaced.
        let elsewhere = dir.path().join("elsewhere.so");
        std::fs::write(&elsewhere, LIBRARY).unwrap();
        std::fs::remove_file(&first).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &first).unwrap();
        assert!(library_in(cache).is_err());
        assert!(std::fs::symlink_metadata(&first).unwrap().is_symlink());
    }

    #[test]
    fn the_library_is_an_elf_object_exporting_the_nvtx_entry_point() {
        assert!(LIBRARY.starts_with(b"\x7fELF"));
        let needle = b"InitializeInjectionNvtx2";
        assert!(LIBRARY.windows(needle.len()).any(|w| w == needle));
    }
}
