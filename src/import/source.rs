//! Where the traces come from: a variant's patterns expanded to files (a quoted glob in
//! the file name, a folder, or files the shell expanded), each opened as the run-folder
//! readers open theirs (no link that leaves its folder, only a regular file, at most a
//! size cap, also after gzip), hashed while it is read, and its format told from its
//! first bytes.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::ImportError;

/// Default cap on the bytes of one trace, before and after decompression: the run-folder
/// readers' table cap ([`crate::store::MAX_TABLE_BYTES`]).
pub const MAX_FILE_BYTES: u64 = crate::store::MAX_TABLE_BYTES;

/// The files a pattern names, in natural order (`t2` before `t10`): the file itself, every
/// regular file of a folder, or the files of a folder whose name matches a pattern with
/// `*`, `?` or `[…]` in its last component.
pub fn expand(pattern: &str) -> Result<Vec<PathBuf>, ImportError> {
    let path = Path::new(pattern);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let wild = |s: &str| s.contains(['*', '?', '[']);
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if dir.is_some_and(|d| wild(&d.to_string_lossy())) {
        return Err(ImportError::Pattern {
            pattern: pattern.into(),
            why: "wildcards are read in the file name only, not in its folders".into(),
        });
    }
    let mut files = match name.filter(|n| wild(n)) {
        Some(n) => matching(dir.unwrap_or(Path::new(".")), &n, pattern)?,
        None if path.is_dir() => matching(path, "*", pattern)?,
        None => vec![path.to_path_buf()],
    };
    files.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    if files.is_empty() {
        return Err(ImportError::Pattern {
            pattern: pattern.into(),
            why: "it matches no file".into(),
        });
    }
    Ok(files)
}

/// Entries of `dir` whose name matches the glob `glob` (hidden files only when the
/// glob starts with a dot).
fn matching(dir: &Path, glob: &str, pattern: &str) -> Result<Vec<PathBuf>, ImportError> {
    let re = glob_regex(glob).map_err(|why| ImportError::Pattern {
        pattern: pattern.into(),
        why,
    })?;
    let entries = std::fs::read_dir(dir).map_err(|e| ImportError::Pattern {
        pattern: pattern.into(),
        why: format!("cannot list {}: {e}", dir.display()),
    })?;
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && !glob.starts_with('.') {
            continue;
        }
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if re.is_match(&name) && !is_dir {
            out.push(dir.join(name));
        }
    }
    Ok(out)
}

/// A glob of one file name as an anchored regex: `*` any run, `?` one character,
/// `[…]` a class (`[!…]` negated).
fn glob_regex(glob: &str) -> Result<regex::Regex, String> {
    let mut re = String::from("^");
    let mut chars = glob.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            '[' => {
                re.push('[');
                if chars.peek() == Some(&'!') {
                    chars.next();
                    re.push('^');
                }
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some('\\') => re.push_str("\\\\"),
                        Some(x) => re.push(x),
                        None => return Err(format!("{glob:?} has a '[' without ']'")),
                    }
                }
                re.push(']');
            }
            _ => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    regex::Regex::new(&re).map_err(|e| format!("{glob:?}: {e}"))
}

/// Compares names with runs of digits compared as numbers.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.chars().peekable(), b.chars().peekable());
    loop {
        match (x.peek().copied(), y.peek().copied()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(p), Some(q)) if p.is_ascii_digit() && q.is_ascii_digit() => {
                let take = |it: &mut std::iter::Peekable<std::str::Chars>| {
                    let mut s = String::new();
                    while let Some(c) = it.peek().copied().filter(char::is_ascii_digit) {
                        s.push(c);
                        it.next();
                    }
                    s
                };
                let (m, n) = (take(&mut x), take(&mut y));
                let (mt, nt) = (m.trim_start_matches('0'), n.trim_start_matches('0'));
                let o = mt.len().cmp(&nt.len()).then(mt.cmp(nt)).then(m.cmp(&n));
                if o.is_ne() {
                    return o;
                }
            }
            (Some(p), Some(q)) => {
                if p != q {
                    return p.cmp(&q);
                }
                x.next();
                y.next();
            }
        }
    }
}

/// Opens a trace: a link is followed only to a file inside the link's own folder or
/// below it (a link out of it is refused, naming its target), only a regular file is read, and a
/// file past `cap` is refused before a byte is read.
pub fn open(path: &Path, cap: u64) -> Result<(File, PathBuf), ImportError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| ImportError::io(path, e))?;
    let real = if meta.file_type().is_symlink() {
        let target = path.canonicalize().map_err(|e| ImportError::io(path, e))?;
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .canonicalize()
            .map_err(|e| ImportError::io(path, e))?;
        if !target.starts_with(&folder) {
            return Err(ImportError::LinkOut {
                path: path.to_path_buf(),
                target,
            });
        }
        target
    } else {
        path.to_path_buf()
    };
    let f = crate::fsx::read::open_no_follow(&real).map_err(ImportError::Read)?;
    let len = f.metadata().map_err(|e| ImportError::io(path, e))?.len();
    if len > cap {
        return Err(ImportError::TooLarge {
            path: path.to_path_buf(),
            cap,
            decompressed: false,
        });
    }
    Ok((f, real))
}

/// A reader that fails once more than `cap` bytes came through (a gzip bomb's
/// output), with an error [`ImportError::from_io`] names as such.
pub struct Capped<R> {
    inner: R,
    left: u64,
}

/// The message of the error a [`Capped`] reader returns.
pub const OVER_CAP: &str = "decompressed past the size cap";

impl<R: Read> Capped<R> {
    pub fn new(inner: R, cap: u64) -> Self {
        Capped { inner, left: cap }
    }
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            return Err(std::io::Error::other(OVER_CAP));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The first bytes of gzip, and of an SQLite database.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
pub const SQLITE_MAGIC: &[u8] = b"SQLite format 3\0";

/// What a file's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    Json,
    Sqlite,
}

/// Whether the stream starts with gzip's magic bytes (nothing consumed).
pub fn is_gzip<R: BufRead>(r: &mut R) -> std::io::Result<bool> {
    Ok(r.fill_buf()?.starts_with(&GZIP_MAGIC))
}

/// What the (decompressed) stream holds, from its first bytes: JSON (an object or an
/// array after white space), an SQLite database, or neither (with what it starts with).
pub fn sniff<R: BufRead>(r: &mut R, path: &Path) -> Result<Sniffed, ImportError> {
    let head = r.fill_buf().map_err(|e| ImportError::from_io(path, e))?;
    if head.starts_with(SQLITE_MAGIC) {
        return Ok(Sniffed::Sqlite);
    }
    let first = head.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'{') | Some(b'[') => Ok(Sniffed::Json),
        _ => {
            let shown: String = String::from_utf8_lossy(&head[..head.len().min(24)])
                .chars()
                .map(|c| if c.is_control() { '.' } else { c })
                .collect();
            Err(ImportError::NotATrace {
                path: path.to_path_buf(),
                why: if head.is_empty() {
                    "the file is empty".into()
                } else {
                    format!(
                        "it starts with {shown:?}, neither JSON (Chrome trace events, \
                         OTLP) nor an SQLite database (nsys export)"
                    )
                },
            })
        }
    }
}

/// Reading buffer: large, so that a multi-GB trace is read in few system calls.
pub const BUF_BYTES: usize = 1 << 20;

/// A trace's bytes, decompressed where it is gzip, capped, hashed as they are on disk.
pub type Stream = BufReader<Capped<Box<dyn Read>>>;

/// Opens `path` as a stream of its content (gunzipped where its magic bytes say gzip),
/// with the hasher of its bytes on disk.
pub fn stream(path: &Path, cap: u64) -> Result<(Stream, Hasher), ImportError> {
    let (f, _) = open(path, cap)?;
    let hashing = SharedHash::new(f);
    let hasher = Hasher(hashing.state.clone());
    let mut raw = BufReader::with_capacity(BUF_BYTES, hashing);
    let gz = is_gzip(&mut raw).map_err(|e| ImportError::io(path, e))?;
    let inner: Box<dyn Read> = if gz {
        Box::new(flate2::bufread::MultiGzDecoder::new(raw))
    } else {
        Box::new(raw)
    };
    Ok((
        BufReader::with_capacity(BUF_BYTES, Capped::new(inner, cap)),
        hasher,
    ))
}

/// The SHA-256 of a file's bytes as read from disk, shared with the reader that reads it.
pub struct Hasher(std::rc::Rc<std::cell::RefCell<(Sha256, u64)>>);

impl Hasher {
    /// The hex digest and byte count of the file: `rest` (the stream the hashed bytes
    /// feed) is read to its end first, so that the digest covers the whole file.
    pub fn finish(self, rest: &mut dyn Read) -> std::io::Result<(String, u64)> {
        std::io::copy(rest, &mut std::io::sink())?;
        let (h, n) = self.0.borrow().clone();
        Ok((format!("{:x}", h.finalize()), n))
    }
}

struct SharedHash<R> {
    inner: R,
    state: std::rc::Rc<std::cell::RefCell<(Sha256, u64)>>,
}

impl<R: Read> SharedHash<R> {
    fn new(inner: R) -> Self {
        SharedHash {
            inner,
            state: std::rc::Rc::new(std::cell::RefCell::new((Sha256::new(), 0))),
        }
    }
}

impl<R: Read> Read for SharedHash<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut s = self.state.borrow_mut();
        s.0.update(&buf[..n]);
        s.1 += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_puts_2_before_10_and_globs_match_names() {
        let mut v = vec!["t10.json", "t2.json", "t1.json", "a.json"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["a.json", "t1.json", "t2.json", "t10.json"]);
        let re = glob_regex("t?.json*").unwrap();
        assert!(re.is_match("t1.json.gz") && !re.is_match("t10.json"));
        assert!(glob_regex("[!a]*").unwrap().is_match("b"));
        assert!(!glob_regex("[!a]*").unwrap().is_match("a"));
        assert!(glob_regex("x[").is_err());
    }
}
