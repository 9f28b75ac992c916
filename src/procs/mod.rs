//! The processes gapscope starts, and what they start: none outlives the rep or step it
//! belongs to, nor gapscope itself.
//!
//! Four mechanisms, each for what the ones before cannot reach:
//!
//! - [`die_with_parent`]: the kernel's parent-death signal, for the process gapscope
//!   started (a worker, the params generation, a measured program);
//! - [`lifeline`]: the process group a measured program or a `build`/`prepare` step runs
//!   in, held by a watcher that kills the group when gapscope ends, however it ends, and
//!   killed by gapscope when the rep or step ends;
//! - [`adopted`]: what left the group for a session of its own (`setsid`, a daemon):
//!   while a group lives gapscope is a child subreaper, so such a process comes to
//!   gapscope when its parent ends, and is killed when the group ends;
//! - [`cookie`]: what left the group wherever it went (another group of gapscope's
//!   session, a session of its own once gapscope is killed by SIGKILL): each group's
//!   program or step carries a random cookie in its environment, which its descendants
//!   inherit; the group's end, and its watcher once gapscope is gone, kill every process
//!   whose environment holds it.
//!
//! This module sits below `experiment` and `revisions`, which both start programs in
//! groups; it knows nothing of either.

pub mod adopted;
pub mod cookie;
pub mod lifeline;

use std::process::Command;

/// Makes the child of `cmd` get SIGKILL when this process ends, however it ends (the
/// kernel's parent-death signal), so that a killed run leaves no params generation or
/// worker behind.
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid() is read before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec and makes only
    // async-signal-safe calls (prctl, getppid, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then no signal comes.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests;
