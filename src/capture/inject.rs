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
    use sha2::Digest;
    let hash = sha2::Sha256::digest(LIBRARY);
    let tag: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    let dir = cache_dir();
    let path = dir.join(format!("libgapscope_nvtx-{tag}.so"));
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == LIBRARY.len() as u64) {
        return Ok(path);
    }
    let unwritable = |e: std::io::Error| InjectError::Unwritable {
        dir: dir.clone(),
        why: e.to_string(),
    };
    std::fs::create_dir_all(&dir).map_err(unwritable)?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(unwritable)?;
    std::io::Write::write_all(&mut tmp, LIBRARY).map_err(unwritable)?;
    tmp.persist(&path).map_err(|e| unwritable(e.error))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_an_elf_object_exporting_the_nvtx_entry_point() {
        assert!(LIBRARY.starts_with(b"\x7fELF"));
        let needle = b"InitializeInjectionNvtx2";
        assert!(LIBRARY.windows(needle.len()).any(|w| w == needle));
    }
}
