//! Another process's memory map (`/proc/<pid>/maps`): which file (and where in it) each
//! code address of that process came from, for naming the addresses of its samples.
//!
//! A process's maps are gone once it exited (an exited, unreaped process has none), so
//! the sampler reads them while the process runs: at its start, and again whenever a
//! sample's address is not in the maps read so far (a library loaded later, a thread's
//! new code). [`ProcessMaps`] keeps every mapping ever read, the newest first, so an
//! address of a library unloaded later still finds its file.

use std::path::PathBuf;

/// One executable mapping of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// The file, or a pseudo-name such as `[vdso]`.
    pub path: PathBuf,
}

impl Mapping {
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The file offset of `addr`.
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }
}

/// Parses the executable mappings of a `/proc/<pid>/maps` text (anonymous ones, such
/// as JIT code, have no file and are left out: their addresses stay unnamed).
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        // start-end perms offset dev inode [path]
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path: Vec<&str> = f.skip(2).collect();
        if !perms.contains('x') || path.is_empty() {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let hex = |x: &str| u64::from_str_radix(x, 16).ok();
        let (Some(start), Some(end), Some(offset)) = (hex(s), hex(e), hex(offset)) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            offset,
            path: PathBuf::from(path.join(" ")),
        });
    }
    out
}

/// Every executable mapping read of one process, newest reading first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessMaps {
    pub pid: i32,
    mappings: Vec<Mapping>,
    /// (start, end) of every mapping, sorted by start: the drain thread asks whether
    /// each new sample's addresses are known, thousands of times a second.
    ranges: Vec<(u64, u64)>,
    /// Times the maps were read, and the first reason a reading failed.
    pub reads: u32,
    pub failure: Option<String>,
}

impl ProcessMaps {
    pub fn new(pid: i32) -> ProcessMaps {
        ProcessMaps {
            pid,
            ..Default::default()
        }
    }

    /// Made of given mappings (tests).
    pub fn from_mappings(pid: i32, mappings: Vec<Mapping>) -> ProcessMaps {
        let mut m = ProcessMaps {
            pid,
            mappings,
            ranges: Vec::new(),
            reads: 1,
            failure: None,
        };
        m.index();
        m
    }

    /// Reads the process's maps now and puts them before the older ones.
    pub fn refresh(&mut self) {
        match std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) {
            Ok(text) => {
                let mut new = parse(&text);
                if new.is_empty() {
                    // An exited process: keep what was read while it ran.
                    return;
                }
                self.reads += 1;
                // Drop older copies of unchanged mappings, keep the rest behind the new.
                self.mappings.retain(|m| !new.contains(m));
                new.append(&mut self.mappings);
                self.mappings = new;
                self.index();
            }
            Err(e) => {
                self.failure
                    .get_or_insert_with(|| format!("cannot read /proc/{}/maps: {e}", self.pid));
            }
        }
    }

    /// The newest mapping holding `addr`.
    pub fn find(&self, addr: u64) -> Option<&Mapping> {
        self.mappings.iter().find(|m| m.contains(addr))
    }

    fn index(&mut self) {
        self.ranges = self.mappings.iter().map(|m| (m.start, m.end)).collect();
        self.ranges.sort_unstable();
    }

    /// Whether every address is in some mapping read so far.
    pub fn covers(&self, addrs: impl IntoIterator<Item = u64>) -> bool {
        addrs.into_iter().all(|a| {
            let i = self.ranges.partition_point(|r| r.0 <= a);
            // The range starting last at or below `a`; older overlapping ones, rarely.
            (i > 0 && a < self.ranges[i - 1].1) || self.find(a).is_some()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executable_file_mappings_are_read_and_newer_readings_win() {
        let text = "\
5600-5700 r--p 00000000 fe:00 1 /usr/bin/prog
5700-5800 r-xp 00001000 fe:00 1 /usr/bin/prog
7f00-7f10 r-xp 00000000 00:00 0
7ff0-7ff2 r-xp 00000000 00:00 0 [vdso]
7e00-7e80 r-xp 00002000 fe:00 2 /opt/my lib/libx.so
garbage line
";
        let m = parse(text);
        assert_eq!(m.len(), 3, "{m:?}");
        assert_eq!(m[0].start, 0x5700);
        assert_eq!(m[0].file_offset(0x5710), 0x1010);
        assert_eq!(m[1].path, PathBuf::from("[vdso]"));
        assert_eq!(m[2].path, PathBuf::from("/opt/my lib/libx.so"));
        let mut pm = ProcessMaps::from_mappings(1, m);
        assert!(pm.covers([0x5700, 0x7e10]));
        assert!(!pm.covers([0x5600]), "a mapping that is not executable");
        // This process's own maps: its code is found after a refresh.
        pm.pid = std::process::id() as i32;
        let here = a_function_of_this_program as *const () as usize as u64;
        assert!(pm.find(here).is_none());
        pm.refresh();
        let f = pm.find(here).expect("this function's mapping");
        assert!(f.path.exists(), "{f:?}");
        assert_eq!(pm.reads, 2);
        // A process that is gone: the maps read so far are kept, the reason recorded.
        let mut gone = ProcessMaps::from_mappings(-1, pm.mappings.clone());
        gone.refresh();
        assert!(gone.find(here).is_some());
        assert!(gone.failure.is_some());
    }

    #[inline(never)]
    fn a_function_of_this_program() {}
}
