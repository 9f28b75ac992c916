//! A measured program's whole process group ends when gapscope does, however gapscope
//! ends (SIGKILL included, which no handler sees).
//!
//! The parent-death signal ([`super::interrupt::die_with_parent`]) reaches only the
//! process gapscope started: `sh -c 'true && prog'` loses its `sh`, and `prog`,
//! reparented to init, runs on. So the program is started in a process group that a
//! watcher holds: gapscope forks a group leader that forks the watcher into its new
//! group and exits (so the watcher is nobody's child to wait for: the program's `wait`
//! never meets it), and the program then joins that group. The watcher blocks reading
//! a pipe whose write end only gapscope holds; the kernel closes that end when gapscope
//! exits, the read returns, and the watcher kills its group, itself last. While
//! gapscope lives the watcher stays blocked; gapscope kills the group when the rep
//! ends, the watcher with it. Its presence also keeps the group's id from being reused
//! while gapscope may still signal it. The group is made before the rep's window
//! opens: the forks it costs (about a millisecond for a debug build) are not the
//! program's time.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// The pipe: gapscope keeps both ends open for its whole life (close-on-exec, so no
/// program inherits them past its exec).
fn lifeline() -> Option<&'static (OwnedFd, OwnedFd)> {
    static PIPE: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();
    PIPE.get_or_init(|| {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which has room for them.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: both descriptors were just opened and are owned by nobody else.
        Some(unsafe {
            (
                std::os::fd::FromRawFd::from_raw_fd(fds[0]),
                std::os::fd::FromRawFd::from_raw_fd(fds[1]),
            )
        })
    })
    .as_ref()
}

/// A new process group for a program to join (`process_group(id)`), held by a watcher
/// that kills it when gapscope ends (see the module doc); `None` where it cannot be
/// made (no descriptors or processes left), and the program then leads a group of its
/// own, with its parent-death signal only.
pub fn group_ending_with_gapscope() -> Option<libc::pid_t> {
    let (read, _write) = lifeline()?;
    let read_fd = read.as_raw_fd();
    // SAFETY: the child of this fork (of a multi-threaded process) makes only
    // async-signal-safe calls (setpgid, fork, getpgrp and the watcher's close, read,
    // kill) and ends with _exit; it allocates nothing.
    let leader = unsafe { libc::fork() };
    match leader {
        -1 => None,
        0 => unsafe {
            if libc::setpgid(0, 0) != 0 {
                libc::_exit(1);
            }
            match libc::fork() {
                0 => watch(read_fd, libc::getpgrp()),
                -1 => libc::_exit(1),
                _ => libc::_exit(0),
            }
        },
        leader => {
            let mut status = 0;
            // SAFETY: waits for the child just forked, which exits at once.
            let waited = unsafe { libc::waitpid(leader, &mut status, 0) } == leader;
            (waited && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0).then_some(leader)
        }
    }
}

/// Puts `cmd` (a workload's `build` or `prepare` step) in a group of its own held by a
/// watcher ([`group_ending_with_gapscope`]), with its parent-death signal: what it starts
/// ends with gapscope, however gapscope ends; and when the returned [`StepGroup`] ends
/// (dropped, or [`StepGroup::end`]), whatever the step left running ends too.
pub fn step_in_group(cmd: &mut std::process::Command) -> StepGroup {
    use std::os::unix::process::CommandExt;
    let group = group_ending_with_gapscope();
    cmd.process_group(group.unwrap_or(0));
    super::interrupt::die_with_parent(cmd);
    StepGroup(group)
}

/// The process group of a step ([`step_in_group`]).
pub struct StepGroup(Option<libc::pid_t>);

impl StepGroup {
    /// SIGKILL to the group of a step that is over: its watcher, and whatever the step
    /// left running. Once only: after its end the group's id may be another's.
    pub fn end(&mut self) {
        if let Some(g) = self.0.take() {
            // SAFETY: kill(2) with a negative pid signals a process group; ESRCH is harmless.
            unsafe { libc::kill(-g, libc::SIGKILL) };
        }
    }
}

impl Drop for StepGroup {
    fn drop(&mut self) {
        self.end();
    }
}

/// The watcher: keeps only the pipe's read end (so that it holds none of the program's
/// pipes open, nor the write end it waits on), waits for the end of file that
/// gapscope's exit makes, and kills its group.
///
/// # Safety
/// Runs in a child forked from a multi-threaded process: async-signal-safe calls only.
unsafe fn watch(read_fd: libc::c_int, group: libc::pid_t) -> ! {
    // SAFETY: async-signal-safe calls only (close_range or close, read, errno, kill,
    // _exit), as this function's contract asks; `b` outlives the read into it.
    unsafe {
        close_all_but(read_fd);
        let mut b = 0u8;
        loop {
            let n = libc::read(read_fd, (&mut b as *mut u8).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        libc::kill(-group, libc::SIGKILL);
        libc::_exit(0)
    }
}

/// Closes every descriptor but `keep`.
///
/// # Safety
/// Async-signal-safe; closes descriptors the caller must no longer use.
unsafe fn close_all_but(keep: libc::c_int) {
    // SAFETY: close_range, getrlimit and close are async-signal-safe; the caller no
    // longer uses the descriptors they close (this function's contract); an all-zero
    // rlimit is a valid value of that plain C struct.
    unsafe {
        let keep = keep as libc::c_uint;
        let below = keep == 0 || libc::syscall(libc::SYS_close_range, 0, keep - 1, 0) == 0;
        let above = libc::syscall(libc::SYS_close_range, keep + 1, libc::c_uint::MAX, 0) == 0;
        if below && above {
            return;
        }
        // A kernel before 5.9 has no close_range: close one by one up to the limit.
        let mut lim: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1024
        };
        for fd in 0..max {
            if fd as libc::c_uint != keep {
                libc::close(fd);
            }
        }
    }
}
