//! Which thread ids of a program's span lines are threads of the program itself.
//!
//! gapscope reads the CPU clock of the process it spawned, and samples that process's
//! threads. A span sent by another process (a program that a wrapper script started,
//! say) would get that clock's CPU time — the wrapper's, near zero — as if it were its
//! own. So the first line of each thread id is checked against `/proc/<pid>/task` as it
//! arrives (its thread has just written it, so it is still there), and spans of thread
//! ids found elsewhere get no interpolated CPU time. A `T` line naming the program's
//! pid makes its thread one of the program's, also when the thread is gone by the time
//! the line is read (the `tracing` layer writes its lines in batches).
//!
//! The same look at `/proc` reads the thread's name (`comm`, at most 15 bytes), so that
//! spans of every capture path show their thread's name; a `T` line's name, where
//! one came, is preferred (`rows`).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use crate::protocol::{thread_line_pid, PREFIX};

/// The verdicts so far, shared by the readers of the program's streams.
#[derive(Debug)]
pub struct Members {
    pid: u32,
    seen: Mutex<HashMap<u64, bool>>,
    names: Mutex<HashMap<u64, String>>,
}

impl Members {
    pub fn new(pid: u32) -> Members {
        Members {
            pid,
            seen: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
        }
    }

    /// Looks at one line of the program's output: a protocol line's thread id is
    /// checked the first time it appears.
    pub fn note_line(&self, line: &[u8]) {
        let Some(tid) = tid_of(line) else { return };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let first = !seen.contains_key(&tid);
        let alive = first && self.read_name(tid);
        match thread_line_pid(line) {
            Some((t, pid)) if pid == self.pid => {
                seen.insert(t, true);
            }
            _ if first => {
                seen.insert(tid, tid == u64::from(self.pid) || alive);
            }
            _ => {}
        }
    }

    /// Reads the thread's name (`comm`) while it is there; whether it was.
    fn read_name(&self, tid: u64) -> bool {
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", self.pid));
        if let Ok(name) = &comm {
            self.names
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(tid, name.trim_end().to_string());
        }
        comm.is_ok()
    }

    /// The names (`comm`) of the program's threads seen, by thread id.
    pub fn names(&self) -> HashMap<u64, String> {
        self.names.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Thread ids whose lines came from outside the program's own threads (or from a
    /// thread that was gone by the time its first line was read).
    pub fn outsiders(&self) -> BTreeSet<u64> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.iter()
            .filter(|(_, ok)| !**ok)
            .map(|(t, _)| *t)
            .collect()
    }
}

/// The thread id of a protocol line (`@gapscope1 <kind> <tid> …`).
fn tid_of(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(PREFIX)?;
    let mut f = rest.split(|&b| b == b' ').filter(|w| !w.is_empty());
    f.next()?;
    std::str::from_utf8(f.next()?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_of_this_process_are_members_and_others_are_not() {
        let me = std::process::id();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u64;
        let m = Members::new(me);
        m.note_line(format!("@gapscope1 B {tid} 5 x").as_bytes());
        m.note_line(format!("@gapscope1 A {me} k=v").as_bytes());
        m.note_line(b"@gapscope1 E 1 9 x"); // pid 1's thread: not ours
        m.note_line(b"ordinary output 77");
        m.note_line(b"@gapscope1 B notanumber 5 x");
        // Gone threads: taken as the program's by a T line of its pid, not by another's.
        m.note_line(format!("@gapscope1 T 999999999 {me} worker").as_bytes());
        m.note_line(b"@gapscope1 T 999999998 1 worker");
        assert_eq!(m.outsiders(), BTreeSet::from([1, 999_999_998]));
        let comm = std::fs::read_to_string(format!("/proc/{me}/task/{tid}/comm")).unwrap();
        assert_eq!(m.names().get(&tid), Some(&comm.trim_end().to_string()));
        assert_eq!(tid_of(b"@gapscope1 X  42 1 2 n"), Some(42));
    }
}
