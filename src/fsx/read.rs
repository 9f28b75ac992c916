//! Reads that stay where they were pointed and end: a file of a folder is opened without
//! following a link (O_NOFOLLOW) and only when it is a regular file, and every read has
//! a size cap, so that a planted link cannot embed another file, and /dev/zero or a
//! bomb of a .gz cannot fill the memory.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::write::kind_of;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is a symbolic link{target}: the files of a run folder are read only as \
         regular files inside it (a link could point anywhere); replace the link with a copy \
         of the file"
    )]
    Link { path: PathBuf, target: String },
    #[error("{path} is {kind}, not a regular file: only regular files are read here")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{path} holds more than {cap_bytes} bytes{decompressed}, more than gapscope reads \
         from such a file: is it the right file?"
    )]
    TooLarge {
        path: PathBuf,
        cap_bytes: u64,
        decompressed: &'static str,
    },
}

impl ReadError {
    /// Whether the file is not there (a reader of an optional file then goes on).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens `dir/name` for reading without following a link, and only a regular file.
pub fn open_in_dir(dir: &Path, name: &str) -> Result<File, ReadError> {
    let path = dir.join(name);
    open_no_follow(&path)
}

/// Opens `path` (a file inside a folder gapscope reads) without following a link in its
/// last component, and only a regular file. Non-blocking, so that a FIFO planted under
/// the name does not wait for a writer.
pub fn open_no_follow(path: &Path) -> Result<File, ReadError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path);
    let f = match f {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            let target = std::fs::read_link(path)
                .map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default();
            return Err(ReadError::Link {
                path: path.to_path_buf(),
                target,
            });
        }
        Err(e) => return Err(io(path)(e)),
    };
    let meta = f.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta.file_type()),
        });
    }
    Ok(f)
}

/// Reads `dir/name` whole ([`open_in_dir`]), at most `cap_bytes`.
pub fn read_in_dir(dir: &Path, name: &str, cap_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let path = dir.join(name);
    let f = open_no_follow(&path)?;
    read_all_capped(f, &path, cap_bytes, "")
}

/// Reads a file the user named (an experiment file: a link, a pipe or a device is the
/// user's choice), at most `cap_bytes`.
pub fn read_capped(path: &Path, cap_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let f = File::open(path).map_err(io(path))?;
    read_all_capped(f, path, cap_bytes, "")
}

/// Reads `r` to its end, refusing more than `cap_bytes` (`decompressed` says in the error
/// when the bytes are a decompressed stream's, e.g. " decompressed").
pub fn read_all_capped<R: Read>(
    r: R,
    path: &Path,
    cap_bytes: u64,
    decompressed: &'static str,
) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    r.take(cap_bytes.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(io(path))?;
    if out.len() as u64 > cap_bytes {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            cap_bytes,
            decompressed,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_devices_and_oversized_files_are_refused_with_the_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(d.join("secret"), d.join("link")).unwrap();
        std::fs::write(d.join("ok"), "12345").unwrap();
        std::fs::create_dir(d.join("sub")).unwrap();
        let e = read_in_dir(d, "link", 100).unwrap_err();
        assert!(matches!(e, ReadError::Link { .. }), "{e}");
        assert!(e.to_string().contains("symbolic link (to "), "{e}");
        let e = read_in_dir(d, "sub", 100).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert_eq!(read_in_dir(d, "ok", 5).unwrap(), b"12345");
        let e = read_in_dir(d, "ok", 4).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
        assert!(read_in_dir(d, "missing", 4).unwrap_err().is_not_found());
        // A small .gz that decompresses past the cap is cut at the cap, not inflated.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &vec![0u8; 4 << 20]).unwrap();
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 64 << 10);
        let e = read_all_capped(
            flate2::read::GzDecoder::new(&bomb[..]),
            Path::new("spans.csv.gz"),
            1 << 20,
            " decompressed",
        )
        .unwrap_err();
        assert!(e.to_string().contains("1048576 bytes decompressed"), "{e}");
        // /dev/zero never ends: the cap ends it.
        let e = read_capped(Path::new("/dev/zero"), 1 << 10).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
    }
}
