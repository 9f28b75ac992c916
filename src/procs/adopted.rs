//! What a program or step left behind outside its process group, in a session of its own
//! (`setsid`, `setsid -f`, a daemon's double fork), ends with its group too.
//!
//! A process group lives inside one session, so `setsid` takes a process out of the
//! group gapscope kills ([`super::lifeline`]). While a group lives (from
//! [`begin`] to [`finish`], counted: groups may overlap) gapscope is a child subreaper
//! (`prctl(PR_SET_CHILD_SUBREAPER)`): a descendant whose parent ends comes to gapscope
//! instead of to init. When a group ends, [`end`] kills every child of gapscope that is
//! in another session than gapscope's, with its process group, and reaps it; what those
//! leave orphaned comes to gapscope in turn and is ended in the next round, until a
//! round finds none (or a bounded wait passed).
//!
//! Which children are the escaped ones: those in another session. gapscope starts every
//! child in its own session (in a group of its own at most: a worker, a program's or a
//! step's group), so a child of gapscope in another session is either one it adopted or
//! a program or step it started that called `setsid` itself; a group is ended only once
//! its program or step was waited for, and programs and steps run one at a time, so the
//! latter is already reaped. The session is the kernel's own record, read from
//! `/proc/PID/stat` for a zombie as for a live process, so no registry of the pids
//! gapscope spawned is kept, and none can fall behind a spawn on another thread. Only
//! the pids killed here are reaped (`waitpid` of each): a child gapscope waits on (a
//! worker, a build) is in gapscope's session and never touched. The children are read
//! from `/proc/self/task/*/children` where the kernel has it, else from every
//! `/proc/PID/stat` (the parent's pid).
//!
//! Everything here makes system calls on stack values only (no allocation, no lock but
//! in [`begin`] and [`finish`]): the second Ctrl-C's handler runs [`end`].
//!
//! Ending a group runs [`super::cookie::end`] before [`end`]: every process that carries
//! the group's cookie in its environment is killed first, wherever it went; [`end`]
//! ends what left for a session of its own without the cookie (its environment
//! cleared), and what such processes leave.
//!
//! Limits (of this mechanism alone; [`super::cookie`] closes the first two for a
//! process that kept its environment):
//! - gapscope killed by SIGKILL (or by anything else no handler sees) has no turn to
//!   run [`end`]: its watcher kills the group, but a process that left for a session of
//!   its own is then reparented to init (or to a subreaper above gapscope). The watcher
//!   kills it by its cookie; one that cleared its environment runs on. Containing that
//!   needs a cgroup (`systemd-run --user --scope gapscope run …`, whose stop kills every
//!   process of the scope) or a PID namespace.
//! - A process that left the group for another group of gapscope's own session (a
//!   shell with job control, `set -m`, puts each background job in a group of its own)
//!   is neither killed by the group's kill nor taken here for an escaped one: it is
//!   killed by its cookie, and runs on past the rep, and past gapscope, where it cleared
//!   its environment.
//! - A process that makes itself unkillable for a while (uninterruptible sleep) is
//!   waited for a bounded time only; it is killed again, and reaped, at the next end.

use std::sync::Mutex;

/// Groups live, and whether this process was a subreaper before the first of them.
static ADOPTERS: Mutex<(usize, bool)> = Mutex::new((0, false));

/// A group begins: gapscope adopts orphaned descendants until the last group finishes.
pub(super) fn begin() {
    let mut a = ADOPTERS.lock().unwrap_or_else(|e| e.into_inner());
    if a.0 == 0 {
        let mut was: libc::c_int = 0;
        // SAFETY: PR_GET_CHILD_SUBREAPER writes an int through the pointer given; `was`
        // outlives the call.
        let read = unsafe { libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut was) } == 0;
        a.1 = read && was != 0;
        set_subreaper(true);
    }
    a.0 += 1;
}

/// A group finished: the last one gives the subreaper flag back as it was.
pub(super) fn finish() {
    let mut a = ADOPTERS.lock().unwrap_or_else(|e| e.into_inner());
    a.0 = a.0.saturating_sub(1);
    if a.0 == 0 && !a.1 {
        set_subreaper(false);
    }
}

fn set_subreaper(on: bool) {
    // SAFETY: PR_SET_CHILD_SUBREAPER changes only which process the kernel gives this
    // process's orphaned descendants to; it fails harmlessly (EINVAL) on an old kernel.
    unsafe {
        libc::prctl(
            libc::PR_SET_CHILD_SUBREAPER,
            libc::c_ulong::from(on),
            0,
            0,
            0,
        )
    };
}

/// Kills every child of this process in another session than its own, with its
/// process group, and reaps it; again for what those leave, until none is found or
/// `deadline` ([`deadline`]) passed. Async-signal-safe.
pub fn end(deadline: i64) {
    // SAFETY: getsid(0) and getpgrp() read this process's own ids.
    let (own_sid, own_group) = unsafe { (libc::getsid(0), libc::getpgrp()) };
    if own_sid < 0 {
        return;
    }
    loop {
        let mut found = [0 as libc::pid_t; 64];
        let mut n = 0;
        for_each_child(|c| {
            if c.session == own_sid || n == found.len() {
                return;
            }
            found[n] = c.pid;
            n += 1;
            // SAFETY: kill(2) of a child of this process (its pid cannot be another's
            // before it is reaped), and of its group, which lies in the child's session
            // (never this process's): every member of that session descends from the
            // process that called setsid.
            unsafe {
                libc::kill(c.pid, libc::SIGKILL);
                if c.group > 1 && c.group != own_group {
                    libc::kill(-c.group, libc::SIGKILL);
                }
            }
        });
        if n == 0 {
            return;
        }
        // Reap each as it ends: an orphan it leaves comes to this process only then.
        loop {
            let mut left = false;
            for p in &mut found[..n] {
                if *p == 0 {
                    continue;
                }
                let mut status = 0;
                // SAFETY: waitpid(2) of one pid, a child this function just killed.
                let r = unsafe { libc::waitpid(*p, &mut status, libc::WNOHANG) };
                if r == *p || r < 0 {
                    *p = 0;
                } else {
                    left = true;
                }
            }
            if !left {
                break;
            }
            if past(deadline) {
                return;
            }
            pause();
        }
        if past(deadline) {
            return;
        }
    }
}

/// The monotonic clock `ns` from now, in nanoseconds, for [`past`].
pub(super) fn deadline(ns: i64) -> i64 {
    now_ns().saturating_add(ns)
}

/// Whether `deadline` passed.
pub(super) fn past(deadline: i64) -> bool {
    now_ns() >= deadline
}

/// A short wait (200 µs) between two looks at processes the kernel is ending.
pub(super) fn pause() {
    let t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 200_000,
    };
    // SAFETY: nanosleep reads `t`; a null remainder is allowed.
    unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
}

fn now_ns() -> i64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the time into `t`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    // (time_t and c_long are 64-bit on the targets gapscope builds for.)
    let (secs, ns): (i64, i64) = (t.tv_sec, t.tv_nsec);
    secs.saturating_mul(1_000_000_000).saturating_add(ns)
}

/// A child of this process, as its `/proc/PID/stat` says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Child {
    pub pid: libc::pid_t,
    pub group: libc::pid_t,
    pub session: libc::pid_t,
}

/// Calls `f` for each child of this process (every thread's), zombies included.
pub(super) fn for_each_child(mut f: impl FnMut(Child)) {
    // SAFETY: getpid() reads this process's id.
    let me = unsafe { libc::getpid() };
    let mut check = |pid: libc::pid_t| {
        if let Some((parent, group, session)) = stat_of(pid) {
            if parent == me {
                f(Child {
                    pid,
                    group,
                    session,
                });
            }
        }
    };
    // Every thread's children file, else (a kernel without them, or a thread gone while
    // they were read) every process's parent.
    let mut complete = true;
    let listed = each_entry(b"/proc/self/task\0", |name| {
        let Some(tid) = number(name) else { return };
        let mut path = PathBuf::new();
        path.push(b"/proc/self/task/");
        path.push_number(tid);
        path.push(b"/children\0");
        if complete && !each_number_in(&path, &mut |pid| check(pid)) {
            complete = false;
        }
    });
    if listed && complete {
        return;
    }
    each_entry(b"/proc\0", |name| {
        if let Some(pid) = number(name) {
            check(pid);
        }
    });
}

/// The parent, process group and session of `pid`, from `/proc/PID/stat`.
fn stat_of(pid: libc::pid_t) -> Option<(libc::pid_t, libc::pid_t, libc::pid_t)> {
    stat(pid).map(|s| (s.parent, s.group, s.session))
}

/// What `/proc/PID/stat` says of a process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stat {
    /// The state letter (`Z` for a zombie).
    pub state: u8,
    pub parent: libc::pid_t,
    pub group: libc::pid_t,
    pub session: libc::pid_t,
    /// When it started, in clock ticks since boot: with the pid, which process it is.
    pub start: u64,
}

/// `/proc/PID/stat`, read with one system call on a stack buffer.
pub(super) fn stat(pid: libc::pid_t) -> Option<Stat> {
    let mut path = PathBuf::new();
    path.push(b"/proc/");
    path.push_number(pid);
    path.push(b"/stat\0");
    let mut buf = [0u8; 512];
    let n = read_start(&path, &mut buf)?;
    let text = &buf[..n];
    // `pid (comm) state ppid pgrp session …`: comm may hold spaces and parentheses.
    let close = text.iter().rposition(|&b| b == b')')?;
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let parent = number(fields.next()?)?;
    let group = number(fields.next()?)?;
    let session = number(fields.next()?)?;
    // starttime is the 22nd field, the 16th after the session.
    let start = fields.nth(15)?.iter().try_fold(0u64, |v, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })?;
    Some(Stat {
        state,
        parent,
        group,
        session,
        start,
    })
}

/// The first bytes of a file (one read), how many.
fn read_start(path: &PathBuf, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: the path ends with a NUL (PathBuf::push of "…\0"); `buf` is writable for
    // its length; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        usize::try_from(n).ok()
    }
}

/// Calls `f` with each space-separated number of a file; false when it cannot be
/// opened.
fn each_number_in(path: &PathBuf, f: &mut impl FnMut(libc::pid_t)) -> bool {
    // SAFETY: the path ends with a NUL; `buf` is writable for its length; the
    // descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 512];
        let mut acc: Option<libc::pid_t> = None;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            for &b in &buf[..n] {
                if b.is_ascii_digit() {
                    let d = libc::pid_t::from(b - b'0');
                    acc = acc
                        .unwrap_or(0)
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(d));
                } else if let Some(v) = acc.take() {
                    f(v);
                }
            }
        }
        if let Some(v) = acc {
            f(v);
        }
        libc::close(fd);
        true
    }
}

/// Calls `f` with the name of each entry of a folder (`path` ends with a NUL); false
/// when it cannot be opened.
pub(super) fn each_entry(path: &[u8], mut f: impl FnMut(&[u8])) -> bool {
    // SAFETY: `path` ends with a NUL; getdents64 writes at most `buf.len()` bytes into
    // `buf`, whole records each starting with their length; the descriptor is closed
    // before returning.
    unsafe {
        let fd = libc::open(
            path.as_ptr().cast(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), name.
            let mut at = 0;
            while at + 19 <= n {
                let len = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
                if len < 19 || at + len > n {
                    break;
                }
                let name = &buf[at + 19..at + len];
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                f(&name[..end]);
                at += len;
            }
        }
        libc::close(fd);
        true
    }
}

/// A decimal number of ASCII digits only.
pub(super) fn number(s: &[u8]) -> Option<libc::pid_t> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    s.iter().try_fold(0 as libc::pid_t, |v, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(libc::pid_t::from(b - b'0'))
    })
}

/// A path on the stack (no allocation), built by pushes; the last push ends it with a
/// NUL.
pub(super) struct PathBuf {
    bytes: [u8; 64],
    len: usize,
}

impl PathBuf {
    pub(super) fn new() -> Self {
        PathBuf {
            bytes: [0; 64],
            len: 0,
        }
    }

    pub(super) fn push(&mut self, s: &[u8]) {
        for &b in s {
            if self.len < self.bytes.len() - 1 {
                self.bytes[self.len] = b;
                self.len += 1;
            }
        }
    }

    pub(super) fn push_number(&mut self, mut v: libc::pid_t) {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    pub(super) fn as_ptr(&self) -> *const libc::c_char {
        self.bytes.as_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_paths_are_read_and_made_without_allocation() {
        assert_eq!(number(b"4194304"), Some(4_194_304));
        assert_eq!(number(b""), None);
        assert_eq!(number(b"12a"), None);
        assert_eq!(number(b"99999999999"), None);
        let mut p = PathBuf::new();
        p.push(b"/proc/");
        p.push_number(0);
        p.push(b"/");
        p.push_number(1_234_567);
        p.push(b"/stat\0");
        assert_eq!(&p.bytes[..p.len], b"/proc/0/1234567/stat\0");
        // SAFETY: getpid() reads this process's id.
        let me = unsafe { libc::getpid() };
        let (_, group, session) = stat_of(me).unwrap();
        // SAFETY: getpgrp() and getsid(0) read this process's own ids.
        assert_eq!((group, session), unsafe {
            (libc::getpgrp(), libc::getsid(0))
        });
    }
}
