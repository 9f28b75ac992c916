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
    #[error(
        "{path} decompresses to more than {limit_bytes} bytes from {compressed_bytes} \
         (over {GZ_RATIO} times its size, which no table gapscope writes does): a \
         decompression bomb? Decompress it yourself if it is genuine"
    )]
    Bomb {
        path: PathBuf,
        compressed_bytes: u64,
        limit_bytes: u64,
    },
}

/// Most bytes a `.gz` of a folder may decompress to per byte of it. Gapscope's tables
/// compress 5 to 20 times; gzip's best is about 1,000 (long runs of one byte), so a
/// file past this ratio is built to fill memory, and is stopped before it does.
pub const GZ_RATIO: u64 = 200;
/// Below this many decompressed bytes the ratio is not applied (a small, very regular
/// table may compress better than [`GZ_RATIO`]).
pub const GZ_RATIO_FLOOR_BYTES: u64 = 64 << 20;

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
    read_no_follow(&dir.join(name), cap_bytes)
}

/// Reads `path` whole ([`open_no_follow`]), at most `cap_bytes`: a file whose size is
/// already past the cap is refused before a byte is read.
pub fn read_no_follow(path: &Path, cap_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let f = open_no_follow(path)?;
    let len = f.metadata().map_err(io(path))?.len();
    if len > cap_bytes {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            cap_bytes,
            decompressed: "",
        });
    }
    read_all_capped(f, path, cap_bytes, "")
}

/// Reads the gzip file `path` ([`open_no_follow`]) decompressed, every member of it (a
/// `.gz` made by concatenating gzip files is one stream to `gzip -d`, and to gapscope),
/// at most `cap_bytes` and at most [`GZ_RATIO`] times its compressed size (past
/// [`GZ_RATIO_FLOOR_BYTES`]), so that a small bomb is stopped early.
pub fn read_gz_no_follow(path: &Path, cap_bytes: u64) -> Result<Vec<u8>, ReadError> {
    let f = open_no_follow(path)?;
    let compressed = f.metadata().map_err(io(path))?.len();
    let limit = compressed
        .saturating_mul(GZ_RATIO)
        .max(GZ_RATIO_FLOOR_BYTES)
        .min(cap_bytes);
    let gz = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f));
    match read_all_capped(gz, path, limit, " decompressed") {
        Err(ReadError::TooLarge { .. }) if limit < cap_bytes => Err(ReadError::Bomb {
            path: path.to_path_buf(),
            compressed_bytes: compressed,
            limit_bytes: limit,
        }),
        other => other,
    }
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

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut gz, bytes).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn a_gz_is_read_to_the_end_of_its_last_member_and_a_bomb_stops_early() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t.csv.gz");
        let mut two = gz(b"a,b\n1,2\n");
        two.extend(gz(b"3,4\n"));
        std::fs::write(&p, &two).unwrap();
        assert_eq!(read_gz_no_follow(&p, 1 << 20).unwrap(), b"a,b\n1,2\n3,4\n");
        // 80 MiB of zeros in some 80 KiB: past the floor and the ratio, refused as a
        // bomb long before the 2 GiB cap.
        std::fs::write(&p, gz(&vec![0u8; 80 << 20])).unwrap();
        let e = read_gz_no_follow(&p, 2 << 30).unwrap_err();
        assert!(matches!(e, ReadError::Bomb { .. }), "{e}");
        assert!(e.to_string().contains("decompression bomb"), "{e}");
        // A plain file past the cap is refused by its size, unread.
        let big = tmp.path().join("big.csv");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        let e = read_no_follow(&big, 1 << 20).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { .. }), "{e}");
    }
}
