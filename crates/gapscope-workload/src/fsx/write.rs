//! Whole-file writes: the bytes go to a temp file created exclusively (a random name,
//! O_EXCL, in the target's folder, so the rename stays on one file system), which is
//! fsynced and renamed over the target. The target is never replaced when it is not a
//! regular file (a device such as /dev/null, a FIFO, a folder) nor when it is a symbolic
//! link (renaming over a link would replace the link, writing through it would leave the
//! folder); the temp file is removed on every failure (a full disk does not stay full).

use std::fs::FileType;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is a symbolic link{target}: gapscope does not write through links; remove \
         it or choose another path"
    )]
    Link { path: PathBuf, target: String },
    #[error(
        "{path} is {kind}, not a regular file: gapscope writes only regular files and never \
         replaces anything else (to print to stdout, pass `--out-file -` where a command takes it)"
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "`-` stands for stdout, and this output is a file (stdout carries something else \
         here): give a file path (`./-` for a file named `-`)"
    )]
    Stdout,
}

impl WriteError {
    /// The error as a `std::io::Error` (for callers that name the path themselves).
    pub fn into_io(self) -> std::io::Error {
        match self {
            WriteError::Io { source, .. } => source,
            WriteError::Link { target, .. } => std::io::Error::other(format!(
                "it is a symbolic link{target}: gapscope does not write through links; \
                 remove it or choose another path"
            )),
            WriteError::NotRegular { kind, .. } => std::io::Error::other(format!(
                "it is {kind}, not a regular file: gapscope writes only regular files and \
                 never replaces anything else"
            )),
            e @ WriteError::Stdout => std::io::Error::other(e.to_string()),
        }
    }
}

/// What a file type is, for messages ("a FIFO", "a character device", …).
pub fn kind_of(t: &FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// `--out-file -`: the command's output goes to stdout.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Whether `path` may be (re)placed: absent, or a regular file (and not `-`, which a
/// user means as stdout: [`write_file_or_stdout`] takes it). Returns whether it exists.
pub fn check_target(path: &Path) -> Result<bool, WriteError> {
    if is_stdout(path) {
        return Err(WriteError::Stdout);
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(WriteError::Link {
            path: path.to_path_buf(),
            target: std::fs::read_link(path)
                .map(|t| format!(" (to {})", t.display()))
                .unwrap_or_default(),
        }),
        Ok(m) if !m.is_file() => Err(WriteError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&m.file_type()),
        }),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(WriteError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `bytes` to `path` as one whole file (see the module doc).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_file_with(path, |w| w.write_all(bytes))
}

/// [`write_file`] of what `fill` writes (through a buffer), for files too large to hold.
pub fn write_file_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    write_file_mode(path, None, true, fill)
}

/// [`write_file`] without the fsync: the file reaches the disk in the kernel's time.
/// For a file that is made again from its sources where a crash loses it (an imported
/// run folder's meta.json, which its traces make again). On ext4 an fsync commits the
/// journal, which waits for every file written before it, so one fsync at the end of a
/// large import waits for all its rows.
pub fn write_file_unsynced(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_file_mode(path, None, false, |w| w.write_all(bytes))
}

/// Copies the file `from` (followed where it is a link: the source is the caller's
/// choice) to `to` as [`write_file`] writes, with `from`'s permission bits (a built
/// program stays executable).
pub fn copy_file(from: &Path, to: &Path) -> Result<(), WriteError> {
    let src_err = |source| WriteError::Io {
        path: from.to_path_buf(),
        source,
    };
    let mut src = std::fs::File::open(from).map_err(src_err)?;
    let mode = src.metadata().map_err(src_err)?.permissions().mode() & 0o777;
    write_file_mode(to, Some(mode), true, |w| {
        std::io::copy(&mut src, w).map(drop)
    })
}

/// [`write_file_with`], the new file taking `mode` where given (else the mode of the
/// file it replaces, or 0644), fsynced before the rename where `sync` says.
fn write_file_mode(
    path: &Path,
    mode: Option<u32>,
    sync: bool,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let existed = check_target(path)?;
    let err = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    // Dropped (and so removed) on every early return below.
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)?;
    {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file());
        fill(&mut w).map_err(err)?;
        w.flush().map_err(err)?;
    }
    // A temp file is made 0600; the file it becomes keeps the mode of the one it
    // replaces, or the usual 0644.
    let mode = mode.unwrap_or_else(|| {
        std::fs::symlink_metadata(path)
            .ok()
            .filter(|_| existed)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o644)
    });
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(err)?;
    if sync {
        tmp.as_file().sync_all().map_err(err)?;
    }
    // Checked again just before the rename: what appeared meanwhile is not replaced.
    let persisted = if existed && check_target(path)? {
        tmp.persist(path)
    } else {
        tmp.persist_noclobber(path)
    };
    persisted.map_err(|e| err(e.error))?;
    Ok(())
}

/// Writes `bytes` to stdout when `path` is `-` ([`is_stdout`]), else as a whole file
/// ([`write_file`]): for commands whose `--out-file` names one file.
pub fn write_file_or_stdout(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    if !is_stdout(path) {
        return write_file(path, bytes);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Opens `path` as a new, empty file to stream into (a log a child process writes while
/// it runs, too long-lived for [`write_file`]'s temp file and rename): a regular file
/// there is removed first, a link or anything else is refused ([`check_target`]), and
/// the file is created exclusively without following a link (`O_EXCL | O_NOFOLLOW`), so
/// that a link planted between the check and the open is not written through.
pub fn create_fresh(path: &Path) -> Result<std::fs::File, WriteError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    if check_target(path)? {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            // Something appeared between the removal and the open: say what it is.
            std::io::ErrorKind::AlreadyExists => check_target(path).err().unwrap_or(err(e)),
            _ => err(e),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn replaces_regular_files_and_refuses_links_and_special_files() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let f = d.join("out.json");
        write_file(&f, b"one").unwrap();
        write_file(&f, b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        std::fs::write(d.join("victim"), "keep").unwrap();
        std::os::unix::fs::symlink(d.join("victim"), d.join("link")).unwrap();
        let e = write_file(&d.join("link"), b"x").unwrap_err();
        assert!(matches!(e, WriteError::Link { .. }), "{e}");
        assert_eq!(std::fs::read(d.join("victim")).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(d.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
        let e = write_file(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        std::fs::create_dir(d.join("sub")).unwrap();
        let e = write_file(&d.join("sub"), b"x").unwrap_err();
        assert!(matches!(e, WriteError::NotRegular { .. }), "{e}");
        assert!(leftovers(d).is_empty(), "{:?}", leftovers(d));
    }

    #[test]
    fn a_failed_write_leaves_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("big.bin");
        let e = write_file_with(&f, |w| {
            w.write_all(&[0u8; 4096])?;
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk full"), "{e}");
        assert!(!f.exists());
        assert!(leftovers(tmp.path()).is_empty());
    }

    #[test]
    fn a_fresh_log_replaces_a_regular_file_and_refuses_links_and_devices() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let log = d.join("build.log");
        std::fs::write(&log, "old attempt").unwrap();
        let mut f = create_fresh(&log).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&log).unwrap(), b"new");
        std::fs::write(d.join("victim"), "keep").unwrap();
        std::os::unix::fs::symlink(d.join("victim"), d.join("link.log")).unwrap();
        let e = create_fresh(&d.join("link.log")).unwrap_err();
        assert!(matches!(e, WriteError::Link { .. }), "{e}");
        assert_eq!(std::fs::read(d.join("victim")).unwrap(), b"keep");
        let e = create_fresh(Path::new("/dev/null")).unwrap_err();
        assert!(matches!(e, WriteError::NotRegular { .. }), "{e}");
        assert!(std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let e = write_file(Path::new("-"), b"x").unwrap_err();
        assert!(matches!(e, WriteError::Stdout), "{e}");
    }
}
