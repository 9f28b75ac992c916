//! Names for the code addresses of another process (an external program's samples):
//! the address's mapping in that process's maps ([`ProcessMaps`]) gives the file and
//! the offset in it; the file's loadable segments give the address the linker gave that
//! offset; the file's symbol table (or its dynamic symbols where it was stripped) gives
//! the function. Rust and C++ names are demangled as for this process's frames.
//!
//! Unlike [`super::symbolize::InProcess`] this reads no debug information: one frame per
//! address, no inlined calls. An address with no mapping is `[unknown]`; one in a file
//! without a symbol for it is `[<file name>]`, so the flame graph still says which
//! library ran.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSegment};

use super::maps::ProcessMaps;
use super::symbolize::{clean, Symbolizer};

/// One file's functions, by the address the linker gave them, and its loadable segments.
struct FileSymbols {
    /// (start address, size, demangled name), sorted by start.
    symbols: Vec<(u64, u64, String)>,
    /// (file offset, size in the file, address) of each loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl FileSymbols {
    fn read(path: &Path) -> Result<FileSymbols, String> {
        let data = std::fs::read(path).map_err(|e| e.to_string())?;
        let file = object::File::parse(&*data).map_err(|e| e.to_string())?;
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let map = file.symbol_map();
        let symbols = map
            .symbols()
            .iter()
            .map(|s| {
                let name = backtrace::SymbolName::new(s.name().as_bytes());
                (s.address(), s.size(), clean(&format!("{name:#}")))
            })
            .collect();
        Ok(FileSymbols { symbols, segments })
    }

    /// The function holding the linker's address `addr`: the last symbol at or below it,
    /// if `addr` lies within its size (where a stripped library kept only its exported
    /// symbols, a local function's address is in none, rather than in the exported
    /// function before it).
    fn function(&self, addr: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= addr);
        let (start, size, name) = self.symbols.get(i.checked_sub(1)?)?;
        (size == &0 || addr - start < *size).then_some(name.as_str())
    }

    /// The linker's address of file offset `off` (the file as the process mapped it).
    fn address_of_offset(&self, off: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(o, size, _)| o <= off && off < o + size)
            .map(|&(o, _, a)| off - o + a)
    }
}

/// Addresses of one other process, named from its maps and files. Files are read once.
pub struct ChildProcess {
    maps: ProcessMaps,
    files: HashMap<PathBuf, Option<FileSymbols>>,
    cache: HashMap<u64, Arc<[String]>>,
}

impl ChildProcess {
    pub fn new(maps: ProcessMaps) -> ChildProcess {
        ChildProcess {
            maps,
            files: HashMap::new(),
            cache: HashMap::new(),
        }
    }

    fn name(&mut self, a: u64) -> String {
        let Some(m) = self.maps.find(a) else {
            return "[unknown]".into();
        };
        let file_name = || {
            let n = m.path.file_name().map_or_else(
                || m.path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            // `[vdso]` is already a pseudo-name.
            clean(&if n.starts_with('[') {
                n
            } else {
                format!("[{n}]")
            })
        };
        let path = m.path.clone();
        let off = m.file_offset(a);
        let fallback = file_name();
        if !path.is_absolute() {
            // [vdso], [vsyscall]: no file to read.
            return fallback;
        }
        let syms = self
            .files
            .entry(path.clone())
            .or_insert_with(|| FileSymbols::read(&path).ok());
        syms.as_ref()
            .and_then(|s| s.function(s.address_of_offset(off)?))
            .map(str::to_string)
            .unwrap_or(fallback)
    }
}

impl Symbolizer for ChildProcess {
    fn frames(&mut self, addr: u64, return_address: bool) -> Arc<[String]> {
        let a = if return_address {
            addr.saturating_sub(1)
        } else {
            addr
        };
        if let Some(f) = self.cache.get(&a) {
            return f.clone();
        }
        let f: Arc<[String]> = vec![self.name(a)].into();
        self.cache.insert(a, f.clone());
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    #[no_mangle]
    pub extern "C" fn gapscope_child_symbols_probe(x: u64) -> u64 {
        std::hint::black_box(x).wrapping_mul(3)
    }

    #[test]
    fn an_address_past_a_symbols_size_is_in_no_function_and_offsets_map_to_addresses() {
        let f = FileSymbols {
            symbols: vec![(0x100, 0x10, "a".into()), (0x200, 0, "b".into())],
            segments: vec![(0x1000, 0x2000, 0x40_1000)],
        };
        assert_eq!(f.function(0x10f), Some("a"));
        assert_eq!(
            f.function(0x110),
            None,
            "a stripped local function after `a`"
        );
        assert_eq!(f.function(0x250), Some("b"), "size unknown: up to the next");
        assert_eq!(f.function(0xff), None);
        assert_eq!(f.address_of_offset(0x1010), Some(0x40_1010));
        assert_eq!(f.address_of_offset(0x3000), None);
    }

    #[test]
    fn this_processes_addresses_are_named_from_its_maps_and_files() {
        let mut maps = ProcessMaps::new(std::process::id() as i32);
        maps.refresh();
        let mut sym = ChildProcess::new(maps);
        let here = gapscope_child_symbols_probe as *const () as usize as u64;
        assert_eq!(
            &*sym.frames(here + 1, false),
            ["gapscope_child_symbols_probe".to_string()]
        );
        // A Rust function: demangled, without its hash.
        let rust = crate::profile::maps::parse as *const () as usize as u64;
        let f = sym.frames(rust, false);
        assert!(f[0].ends_with("profile::maps::parse"), "{f:?}");
        // libc's code, stripped or not: a name or at least the library's.
        let libc_addr = libc::getpid as *const () as usize as u64;
        let f = sym.frames(libc_addr, false);
        assert!(f[0].contains("getpid") || f[0].contains("libc"), "{f:?}");
        assert_eq!(&*sym.frames(8, false), ["[unknown]".to_string()]);
    }
}
