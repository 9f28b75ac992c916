//! A measured program's whole process group ends when gapscope does, however gapscope
//! ends (SIGKILL included, which no handler sees).
//!
//! The parent-death signal ([`super::die_with_parent`]) reaches only the process
//! gapscope started: `sh -c 'true && prog'` loses its `sh`, and `prog`, reparented, runs
//! on. So the program is started in a process group that a watcher holds: gapscope forks
//! a group leader that forks the watcher into its new group and exits (so the watcher is
//! nobody's child to wait for: the program's `wait` never meets it), and the program
//! then joins that group. The watcher blocks reading a pipe whose write end only
//! gapscope holds; the kernel closes that end when gapscope exits, the read returns, and
//! the watcher kills its group, itself last. While gapscope lives the watcher stays
//! blocked; gapscope ends the group when the rep ends ([`Group::end`]), the watcher with
//! it. Its presence also keeps the group's id from being reused while gapscope may still
//! signal it. The group is made before the rep's window opens: the forks it costs (about
//! a millisecond for a debug build) are not the program's time.
//!
//! While a [`Group`] lives gapscope is a child subreaper ([`super::adopted`]): the
//! watcher, and whatever the program leaves behind when the process that started it
//! ends, become gapscope's children. Ending a group therefore kills it, reaps those of
//! its members that became gapscope's (waiting, a bounded time, until the group has no
//! member left, so that every orphan it makes has come to gapscope), then kills what
//! still carries the group's cookie in its environment, wherever it went
//! ([`super::cookie::end`]), and then kills and reaps what left the group for a session
//! of its own ([`super::adopted::end`]). A second Ctrl-C ends the groups still live the
//! same way before gapscope exits ([`end_live_groups`]). A watcher that outlives
//! gapscope kills the processes that carry its group's cookie before its group
//! ([`super::cookie::end_unreaped`]): what left the group, even for a session of its
//! own, ends with gapscope too.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;

use super::cookie::Cookie;

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
/// that kills it, and the processes marked with `cookie`, when gapscope ends (see the
/// module doc); `None` where it cannot be made (no descriptors or processes left).
/// [`Group::new`] makes one and ends it.
fn group_ending_with_gapscope(cookie: Option<Cookie>) -> Option<libc::pid_t> {
    let (read, _write) = lifeline()?;
    let read_fd = read.as_raw_fd();
    // SAFETY: the child of this fork (of a multi-threaded process) makes only
    // async-signal-safe calls (setpgid, fork, getpgrp and the watcher's close, read,
    // open, getdents64, pidfd_open, pidfd_send_signal, kill, clock_gettime, nanosleep)
    // and ends with _exit; it allocates nothing.
    let leader = unsafe { libc::fork() };
    match leader {
        -1 => None,
        0 => unsafe {
            if libc::setpgid(0, 0) != 0 {
                libc::_exit(1);
            }
            match libc::fork() {
                0 => watch(read_fd, libc::getpgrp(), cookie),
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

/// Puts `cmd` (a workload's `build` or `prepare` step, a revision's build) in a group
/// of its own held by a watcher ([`Group::new`], [`Group::attach`]), with its
/// parent-death signal: what it starts ends with gapscope, however gapscope ends; and
/// when the returned [`Group`] ends (dropped, or [`Group::end`], once the step was
/// waited for), whatever the step left running ends too.
pub fn step_in_group(cmd: &mut std::process::Command) -> Group {
    let group = Group::new();
    group.attach(cmd);
    super::die_with_parent(cmd);
    group
}

/// The process group of a program or a step: made held by a watcher
/// ([`group_ending_with_gapscope`]), ended by [`Group::end`] (or when dropped).
pub struct Group {
    id: Option<libc::pid_t>,
    /// The mark its program or step carries in its environment ([`super::cookie`]),
    /// until the group ends.
    cookie: Option<Cookie>,
    /// Whether the id is among the live groups ([`end_live_groups`]).
    listed: bool,
    /// Whether this group counts among those that keep gapscope a subreaper.
    adopting: bool,
}

impl Group {
    /// A new group for a program or step to join (`process_group(id)`); gapscope is a
    /// child subreaper until it ends. Its id is `None` where no group could be made (no
    /// descriptors or processes left): the program then leads a group of its own
    /// ([`Group::or_led_by`]), with its parent-death signal only.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Group {
        super::adopted::begin();
        let cookie = Cookie::new();
        let id = group_ending_with_gapscope(cookie);
        let listed = id.is_some_and(|g| live_insert(g, cookie));
        Group {
            id,
            cookie,
            listed,
            adopting: true,
        }
    }

    /// Makes `cmd`'s child join the group (or lead a group of its own where none could
    /// be made: [`Group::or_led_by`]) and carry the group's cookie in its environment
    /// ([`super::cookie::ENV`]), after whatever environment `cmd` was given.
    pub fn attach(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        cmd.process_group(self.id.unwrap_or(0));
        if let Some(c) = self.cookie {
            c.mark(cmd);
        }
    }

    /// The group's id, while it is not ended.
    pub fn id(&self) -> Option<libc::pid_t> {
        self.id
    }

    /// The group led by `pid` (a program started with `process_group(0)`), where no
    /// watcher's group could be made.
    pub fn or_led_by(&mut self, pid: libc::pid_t) {
        if self.id.is_none() && pid > 0 {
            self.id = Some(pid);
            self.listed = live_insert(pid, self.cookie);
        }
    }

    /// SIGKILL to every member now, the program included; the group stays this one's to
    /// end once the program was waited for.
    pub fn kill(&self) {
        if let Some(g) = self.id {
            // SAFETY: kill(2) with a negative pid signals a process group; ESRCH is harmless.
            unsafe { libc::kill(-g, libc::SIGKILL) };
        }
    }

    /// Ends the group of a program or step that is over (waited for): SIGKILL to its
    /// watcher and whatever it left running, those of them adopted reaped, then what
    /// carries its cookie and what left it for a session of its own (see the module
    /// doc). Once only: after its end the group's id may be another's.
    pub fn end(&mut self) {
        let cookie = self.cookie.take();
        match self.id.take() {
            // Whoever takes it from the live ones ends it: this, or a second Ctrl-C.
            Some(g) => {
                if !std::mem::take(&mut self.listed) || live_remove(g) {
                    end_group(g, cookie);
                }
            }
            // A step that led a group of its own (none could be made) may still have
            // left marked processes.
            None => {
                if let Some(c) = cookie {
                    super::cookie::end(c, super::adopted::deadline(END_WAIT_NS));
                }
            }
        }
        if std::mem::take(&mut self.adopting) {
            super::adopted::finish();
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.end();
    }
}

/// How long ending a group waits for its members to be gone, and then for what left it.
const END_WAIT_NS: i64 = 2_000_000_000;

/// Groups made and not yet ended (0: a free slot), for a second Ctrl-C to end
/// ([`end_live_groups`]); a group past the slots is still ended by its watcher.
static LIVE: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];

/// The cookie of each slot's group (its high and low 64 bits; 0: none), written once its
/// id is in the slot. A second Ctrl-C that takes the id in between reads the cookie of
/// the slot's group before, already ended, or none: that group's watcher still kills
/// it when gapscope exits, but a process it marked and that left it is not ended.
static LIVE_COOKIES: [[AtomicU64; 2]; 16] = [const { [AtomicU64::new(0), AtomicU64::new(0)] }; 16];

/// Lists `g` (marked with `cookie`) among the live groups; whether there was a free
/// slot.
fn live_insert(g: libc::pid_t, cookie: Option<Cookie>) -> bool {
    let Some(i) = LIVE.iter().position(|slot| {
        slot.compare_exchange(0, g, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }) else {
        return false;
    };
    let bits = cookie.map_or(0, Cookie::bits);
    LIVE_COOKIES[i][0].store((bits >> 64) as u64, Ordering::SeqCst);
    LIVE_COOKIES[i][1].store(bits as u64, Ordering::SeqCst);
    true
}

/// Takes `g` out of the live groups; whether it was still there (a second Ctrl-C may
/// have taken it to end it).
fn live_remove(g: libc::pid_t) -> bool {
    LIVE.iter().any(|slot| {
        slot.compare_exchange(g, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })
}

/// Ends every group still live (each as [`Group::end`] does), then what left them.
/// Async-signal-safe (system calls on stack values only): the second Ctrl-C's handler
/// calls it before the process exits.
pub fn end_live_groups() {
    for (slot, cookie) in LIVE.iter().zip(&LIVE_COOKIES) {
        let g = slot.swap(0, Ordering::SeqCst);
        if g != 0 {
            let bits = (u128::from(cookie[0].load(Ordering::SeqCst)) << 64)
                | u128::from(cookie[1].load(Ordering::SeqCst));
            end_group(g, Cookie::from_bits(bits));
        }
    }
    super::adopted::end(super::adopted::deadline(END_WAIT_NS));
}

/// SIGKILL to group `g`; its members gapscope adopted (its watcher, orphans of the
/// program) are reaped as they end, until none is left or [`END_WAIT_NS`] passed; then
/// what carries its `cookie`, and what left it for another session, are ended.
/// Async-signal-safe.
fn end_group(g: libc::pid_t, cookie: Option<Cookie>) {
    let deadline = super::adopted::deadline(END_WAIT_NS);
    // SAFETY: kill(2) with a negative pid signals a process group; ESRCH is harmless.
    unsafe { libc::kill(-g, libc::SIGKILL) };
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) of the members of group `g` that are this process's
        // children: the program or step the group was made for was waited for before
        // (or the process is about to exit), so what is reaped here is what gapscope
        // adopted from the group.
        while unsafe { libc::waitpid(-g, &mut status, libc::WNOHANG) } > 0 {}
        // SAFETY: signal 0 only asks whether the group has a member left.
        let left = unsafe { libc::kill(-g, 0) } == 0;
        if !left || super::adopted::past(deadline) {
            break;
        }
        super::adopted::pause();
    }
    if let Some(c) = cookie {
        super::cookie::end(c, deadline);
    }
    super::adopted::end(deadline);
}

/// How long a watcher goes on killing what carries its group's cookie once gapscope is
/// gone (until a round finds none, at most this).
const WATCHER_WAIT_NS: i64 = 5_000_000_000;

/// The watcher: keeps only the pipe's read end (so that it holds none of the program's
/// pipes open, nor the write end it waits on), waits for the end of file that
/// gapscope's exit makes, kills the processes marked with `cookie` (wherever they went),
/// and then its group, itself included.
///
/// # Safety
/// Runs in a child forked from a multi-threaded process: async-signal-safe calls only.
unsafe fn watch(read_fd: libc::c_int, group: libc::pid_t, cookie: Option<Cookie>) -> ! {
    // SAFETY: async-signal-safe calls only (close_range or close, read, errno, the
    // cookie's scan of /proc (open, getdents64, read, close, pidfd_open,
    // pidfd_send_signal, kill, clock_gettime, nanosleep), kill, _exit), as this
    // function's contract asks; `b` outlives the read into it.
    unsafe {
        close_all_but(read_fd);
        let mut b = 0u8;
        loop {
            let n = libc::read(read_fd, (&mut b as *mut u8).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        if let Some(c) = cookie {
            super::cookie::end_unreaped(c, super::adopted::deadline(WATCHER_WAIT_NS));
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
