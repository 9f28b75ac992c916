//! A measured program's whole process group ends when gapscope does, however gapscope
//! ends (SIGKILL included, which no handler sees).
//!
//! The parent-death signal ([`super::interrupt::die_with_parent`]) reaches only the
//! process gapscope started: `sh -c 'true && prog'` loses its `sh`, and `prog`,
//! reparented to init, runs on. So every program started in a process group of its own
//! also gets a watcher in that group: a process forked (twice, so that it is nobody's
//! child to wait for) before the program's exec, that blocks reading a pipe whose write
//! end only gapscope holds. The kernel closes that end when gapscope exits, the read
//! returns, and the watcher kills its group, itself last. While gapscope lives, the
//! watcher stays blocked; gapscope kills the group when the rep ends, and the watcher
//! with it. Its presence also keeps the group's id from being reused while gapscope may
//! still signal it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Command;
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

/// Makes the process group that `cmd`'s child leads end with gapscope (see the module
/// doc). Call after `process_group(0)` and before any pre-exec hook that lets the
/// program start (the watcher must exist before the program runs). Without the pipe
/// (no descriptors left) the child still gets its parent-death signal.
pub fn end_group_with_gapscope(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let Some((read, _write)) = lifeline() else {
        return;
    };
    let read_fd = read.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and makes only
    // async-signal-safe calls (getpgrp, getpid, fork, waitpid, _exit and, in the
    // watcher, close_range/close, read, kill); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            let group = libc::getpgrp();
            // Only a group of the program's own: never gapscope's.
            if group != libc::getpid() {
                return Ok(());
            }
            match libc::fork() {
                -1 => Err(std::io::Error::last_os_error()),
                0 => {
                    if libc::fork() == 0 {
                        watch(read_fd, group);
                    }
                    libc::_exit(0)
                }
                mid => {
                    let mut status = 0;
                    libc::waitpid(mid, &mut status, 0);
                    Ok(())
                }
            }
        });
    }
}

/// The watcher: keeps only the pipe's read end (so that it holds none of the program's
/// pipes open, nor the write end it waits on), waits for the end of file that
/// gapscope's exit makes, and kills its group.
///
/// # Safety
/// Runs in a child forked from a multi-threaded process: async-signal-safe calls only.
unsafe fn watch(read_fd: libc::c_int, group: libc::pid_t) -> ! {
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

/// Closes every descriptor but `keep`.
///
/// # Safety
/// Async-signal-safe; closes descriptors the caller must no longer use.
unsafe fn close_all_but(keep: libc::c_int) {
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
