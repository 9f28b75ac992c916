//! What a program or step started ends with its group wherever it went, found by a mark
//! in its environment (a cookie, as Jenkins' ProcessTreeKiller finds a build's
//! processes).
//!
//! A process group and a session are the program's to leave: a shell with job control
//! (`set -m`) puts each background job in a group of its own, in gapscope's session, which
//! neither the group's kill ([`super::lifeline`]) nor the end of other sessions
//! ([`super::adopted`]) reaches; and once gapscope is killed by SIGKILL nothing ends what
//! left for a session of its own. The environment goes with a process wherever it goes:
//! each group gets a random [`Cookie`] (128 bits from `getrandom`), the program or step
//! is started with `GAPSCOPE_GROUP_COOKIE=<32 hex digits>` ([`ENV`]) in its environment,
//! and every descendant inherits it. When the group ends ([`end`], from
//! [`super::lifeline`], before the end of other sessions), and in the group's watcher
//! once gapscope is gone ([`end_unreaped`], before the watcher kills its group), every
//! `/proc/PID/environ` is read for that exact entry and each process that has it gets
//! SIGKILL; again, until a round finds none (or a bounded wait passed), so that a child
//! forked while a round ran is found by the next one. This process, the caller (the
//! watcher), and pid 1 are never signalled. A process found is signalled through a pidfd
//! opened before its environment is read a second time, so a pid reused in between is
//! not touched (plain `kill` where the kernel has no pidfds).
//!
//! Only the processes killed here that are gapscope's children when dead are reaped
//! (each checked by its pid and start time): those gapscope adopted. The program or
//! step the group was made for carries the cookie too, but was waited for before its
//! group ends; a worker or a build gapscope waits on carries no cookie of this group.
//!
//! The scan runs between reps (at a group's end), never inside a rep's measured window.
//! One round over `/proc` takes about 0.4 ms on a 2-core VM with 70 processes (the
//! crate built with opt-level 3; 0.55 to 0.7 ms unoptimized): about 6 µs a process, an
//! open, a read and a close of its environ (and a pidfd, a `stat` and a second read for
//! a process that has the cookie). A group's end with nothing left to kill costs one
//! round.
//!
//! Everything here makes system calls on stack values only (no allocation, no lock):
//! the second Ctrl-C's handler and the watcher (a child forked from a multi-threaded
//! process) run it.
//!
//! Limits:
//! - a process that clears or replaces its environment (`env -i`, an `execve` with an
//!   environment of its own) carries no cookie: where it also left the group (for another
//!   group of gapscope's session, or for a session of its own once gapscope is killed by
//!   SIGKILL) it runs on;
//! - the environment of another user's process cannot be read (reading it asks for the
//!   access `ptrace` would need): a set-uid program's process, or one that changed its
//!   user, is not found;
//! - a process that overwrites its initial environment block in memory (the kernel reads
//!   `environ` from there) can erase its mark.

use super::adopted::{self, each_entry, number, PathBuf};

/// The environment variable that carries a group's cookie.
pub const ENV: &str = "GAPSCOPE_GROUP_COOKIE";

/// The name as the environment block holds it, before the value.
const NAME: &[u8] = b"GAPSCOPE_GROUP_COOKIE=";

/// One entry of an environment block: `GAPSCOPE_GROUP_COOKIE=<hex>` and its NUL.
const ENTRY: usize = NAME.len() + 32 + 1;

/// A group's mark: 128 random bits, never zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie(u128);

impl Cookie {
    /// A fresh cookie from the kernel's random source; `None` where it gives none.
    pub fn new() -> Option<Cookie> {
        let mut b = [0u8; 16];
        let mut got = 0;
        while got < b.len() {
            // SAFETY: getrandom writes at most `b.len() - got` bytes from `b[got]`.
            let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
            match usize::try_from(n) {
                Ok(n) => got += n,
                // SAFETY: errno is this thread's.
                Err(_) if unsafe { *libc::__errno_location() } == libc::EINTR => {}
                Err(_) => return None,
            }
        }
        Cookie::from_bits(u128::from_ne_bytes(b))
    }

    /// The cookie with these bits (none for zero, which marks no cookie).
    pub fn from_bits(bits: u128) -> Option<Cookie> {
        (bits != 0).then_some(Cookie(bits))
    }

    pub fn bits(self) -> u128 {
        self.0
    }

    /// The value, 32 lowercase hex digits.
    pub fn hex(self) -> [u8; 32] {
        let mut h = [0u8; 32];
        for (i, d) in h.iter_mut().enumerate() {
            let nibble = (self.0 >> (4 * (31 - i))) & 0xf;
            *d = b"0123456789abcdef"[nibble as usize];
        }
        h
    }

    /// Starts the child of `cmd` with this cookie in its environment ([`ENV`]).
    pub fn mark(self, cmd: &mut std::process::Command) {
        let hex = self.hex();
        cmd.env(ENV, std::str::from_utf8(&hex).unwrap_or_default());
    }

    /// The entry an environment block holds for this cookie.
    fn entry(self) -> [u8; ENTRY] {
        let mut e = [0u8; ENTRY];
        e[..NAME.len()].copy_from_slice(NAME);
        e[NAME.len()..ENTRY - 1].copy_from_slice(&self.hex());
        e
    }
}

/// The processes one round killed (pid and start time), for their reaping.
struct Killed {
    pids: [(libc::pid_t, u64); 256],
    n: usize,
}

/// Kills every process marked with `cookie` and reaps those of them that are this
/// process's children once dead; again, until a round finds none or `deadline`
/// ([`adopted::deadline`]) passed. Async-signal-safe.
pub fn end(cookie: Cookie, deadline: i64) {
    rounds(cookie, deadline, true);
}

/// Kills every process marked with `cookie`, until a round finds none or `deadline`
/// passed, reaping none (the watcher: gapscope is gone). Async-signal-safe.
pub fn end_unreaped(cookie: Cookie, deadline: i64) {
    rounds(cookie, deadline, false);
}

fn rounds(cookie: Cookie, deadline: i64, reap: bool) {
    let entry = cookie.entry();
    // SAFETY: getpid() reads this process's id.
    let me = unsafe { libc::getpid() };
    loop {
        let mut killed = Killed {
            pids: [(0, 0); 256],
            n: 0,
        };
        kill_marked(&entry, me, &mut killed);
        if killed.n == 0 {
            return;
        }
        // Until each is dead (a zombie, or gone): an orphan it leaves has come to its new
        // parent by then.
        let mut dead = false;
        while !dead && !adopted::past(deadline) {
            dead = killed.pids[..killed.n].iter().all(|&(pid, start)| {
                adopted::stat(pid).is_none_or(|s| s.start != start || s.state == b'Z')
            });
            if !dead {
                adopted::pause();
            }
        }
        if reap {
            for &(pid, start) in &killed.pids[..killed.n] {
                if adopted::stat(pid)
                    .is_some_and(|s| s.start == start && s.state == b'Z' && s.parent == me)
                {
                    let mut status = 0;
                    // SAFETY: waitpid(2) of one pid: a child of this process that this
                    // function killed and found dead (its pid is its own until reaped).
                    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                }
            }
        }
        if adopted::past(deadline) {
            return;
        }
    }
}

/// One round: SIGKILL to each process (but `me` and pid 1) whose environment holds
/// `entry`, recorded in `killed` (the round stops when it is full; the next takes the
/// rest).
fn kill_marked(entry: &[u8; ENTRY], me: libc::pid_t, killed: &mut Killed) {
    each_entry(b"/proc\0", |name| {
        let Some(pid) = number(name) else { return };
        if pid <= 1 || pid == me || killed.n == killed.pids.len() {
            return;
        }
        if !environ_holds(pid, entry) {
            return;
        }
        // Read again once a pidfd names the process: the one read is the one signalled.
        // SAFETY: pidfd_open of a pid: a descriptor that names that process (or fails).
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
        let start = adopted::stat(pid).map(|s| s.start);
        if let (Some(start), true) = (start, environ_holds(pid, entry)) {
            let sent = if pidfd >= 0 {
                // SAFETY: pidfd_send_signal through a descriptor opened before the
                // environment was read: the process read is the one signalled, or none.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        pidfd,
                        libc::SIGKILL,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    ) == 0
                }
            } else {
                // SAFETY: kill(2) of a pid whose environment was just read (a kernel
                // without pidfds).
                unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
            };
            if sent {
                killed.pids[killed.n] = (pid, start);
                killed.n += 1;
            }
        }
        close(pidfd);
    });
}

fn close(fd: libc::c_int) {
    if fd >= 0 {
        // SAFETY: closes a descriptor this module opened and no longer uses.
        unsafe { libc::close(fd) };
    }
}

/// Whether `/proc/PID/environ` holds `entry` as one of its entries (not inside
/// another's value); false where it cannot be read (another user's process, a zombie).
fn environ_holds(pid: libc::pid_t, entry: &[u8; ENTRY]) -> bool {
    let mut path = PathBuf::new();
    path.push(b"/proc/");
    path.push_number(pid);
    path.push(b"/environ\0");
    // SAFETY: the path ends with a NUL; `buf` is writable for its length; the
    // descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let mut finder = Finder { entry, at: Some(0) };
        let mut found = false;
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            if finder.feed(&buf[..n]) {
                found = true;
                break;
            }
        }
        libc::close(fd);
        found
    }
}

/// Looks for one entry in an environment block read in pieces.
struct Finder<'a> {
    entry: &'a [u8; ENTRY],
    /// How much of `entry` the entry being read (which may span two pieces) matched so
    /// far; None once it differs, until the NUL that ends it.
    at: Option<usize>,
}

impl Finder<'_> {
    /// Reads the next piece of the block; whether the entry was found.
    fn feed(&mut self, piece: &[u8]) -> bool {
        let mut i = 0;
        while i < piece.len() {
            match self.at {
                Some(k) => {
                    let take = (ENTRY - k).min(piece.len() - i);
                    if piece[i..i + take] == self.entry[k..k + take] {
                        if k + take == ENTRY {
                            return true;
                        }
                        self.at = Some(k + take);
                        i += take;
                    } else {
                        // `entry` holds no NUL but its last byte: the entry being read
                        // goes on to a NUL at or after `i`.
                        self.at = None;
                    }
                }
                None => match piece[i..].iter().position(|&b| b == 0) {
                    Some(p) => {
                        i += p + 1;
                        self.at = Some(0);
                    }
                    None => i = piece.len(),
                },
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Whether `pid` runs with exactly `argv` (a zombie or a reused pid does not).
    fn runs(pid: u32, argv: &[&str]) -> bool {
        let want: Vec<u8> = argv
            .iter()
            .flat_map(|a| [a.as_bytes(), b"\0"].concat())
            .collect();
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')));
        !zombie && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
    }

    /// One `sleep SECS` per entry of `sleepers`, each in a session of its own with
    /// `NAME=VALUE` added to its environment where given, and their pids. They are
    /// children of one `sh` in this process's session, not of this process: another
    /// test's group ending at the same time kills every child of this process in another
    /// session ([`super::super::adopted::end`]), and would take them for escaped ones.
    fn sleepers(sleepers: &[(&str, Option<(&str, String)>)]) -> (std::process::Child, Vec<u32>) {
        use std::io::BufRead;
        let mut script = String::new();
        for (secs, env) in sleepers {
            let env = env
                .as_ref()
                .map(|(k, v)| format!("{k}={v} "))
                .unwrap_or_default();
            // `$!` is the sleeper's pid: env and setsid (not a group leader) exec in place.
            script +=
                &format!("env {env}setsid sleep {secs} </dev/null >/dev/null 2>&1 & echo $!\n");
        }
        script += "wait\n";
        let mut sh = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(sh.stdout.take().unwrap());
        let pids = out
            .lines()
            .take(sleepers.len())
            .map(|l| l.unwrap().trim().parse().unwrap())
            .collect();
        (sh, pids)
    }

    #[test]
    fn cookies_are_random_hex_and_entries_exact() {
        let (a, b) = (Cookie::new().unwrap(), Cookie::new().unwrap());
        assert_ne!(a, b);
        let c = Cookie::from_bits(0xab).unwrap();
        assert_eq!(&c.hex(), b"000000000000000000000000000000ab");
        assert_eq!(
            &c.entry()[..],
            b"GAPSCOPE_GROUP_COOKIE=000000000000000000000000000000ab\0"
        );
        assert_eq!(Cookie::from_bits(0), None);
        assert_eq!(Cookie::from_bits(a.bits()), Some(a));
    }

    #[test]
    fn an_entry_is_found_whole_wherever_the_reads_split_the_block() {
        let entry = Cookie::from_bits(0xab).unwrap().entry();
        let hex = "000000000000000000000000000000ab";
        let with = format!("A=1\0X={ENV}={hex}\0{ENV}={hex}\0B=2\0");
        let without = [
            format!("A=1\0X={ENV}={hex}\0{ENV}={hex}0\0B=2\0"),
            format!("{ENV}={hex}"),
            format!("{ENV}=0{hex}\0"),
            format!("A=1\0G{ENV}={hex}\0"),
        ];
        let found = |block: &[u8], at: &[usize]| {
            let mut f = Finder {
                entry: &entry,
                at: Some(0),
            };
            let mut from = 0;
            for &to in at.iter().chain([&block.len()]) {
                if f.feed(&block[from..to]) {
                    return true;
                }
                from = to;
            }
            false
        };
        for a in 0..=with.len() {
            for b in a..=with.len() {
                assert!(found(with.as_bytes(), &[a, b]), "split at {a} and {b}");
            }
        }
        let bytes: Vec<usize> = (1..with.len()).collect();
        assert!(found(with.as_bytes(), &bytes));
        for w in &without {
            for a in 0..=w.len() {
                assert!(!found(w.as_bytes(), &[a]), "{w:?} split at {a}");
            }
        }
    }

    #[test]
    fn the_scan_kills_a_marked_process_of_another_session_and_spares_the_rest() {
        let cookie = Cookie::new().unwrap();
        let hex = String::from_utf8(cookie.hex().to_vec()).unwrap();
        let id = std::process::id();
        let secs = |n: u32| format!("{n}.{id}");
        let (marked, plain, longer, inside) = (secs(1071), secs(1072), secs(1073), secs(1074));
        let (mut sh, pids) = sleepers(&[
            (&marked, Some((ENV, hex.clone()))),
            (&plain, None),
            // The same name with another value, and the entry inside another's value.
            (&longer, Some((ENV, format!("{hex}0")))),
            (&inside, Some(("OTHER", format!("{ENV}={hex}")))),
        ]);
        let argvs = [&marked, &plain, &longer, &inside].map(|s| ["sleep", s.as_str()]);
        // SAFETY: getsid(2) only reads a process's session.
        let own = unsafe { libc::getsid(0) };
        let started = Instant::now();
        let ready = loop {
            let all = pids.iter().zip(&argvs).all(|(&p, a)| runs(p, a));
            if all || started.elapsed() > Duration::from_secs(20) {
                break all;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        // SAFETY: as above.
        let sessions: Vec<_> = pids
            .iter()
            .map(|&p| unsafe { libc::getsid(p as libc::pid_t) })
            .collect();
        end(cookie, adopted::deadline(5_000_000_000));
        // Killed: it runs no more (its parent, the `sh`, reaps it).
        let gone = !runs(pids[0], &argvs[0]);
        let spared = pids[1..]
            .iter()
            .zip(&argvs[1..])
            .map(|(&p, a)| runs(p, a))
            .collect::<Vec<_>>();
        for (&p, a) in pids.iter().zip(&argvs) {
            if runs(p, a) {
                // SAFETY: kill(2) of a sleeper this test started, still running as one.
                unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
            }
        }
        let _ = sh.wait();
        assert!(ready, "the sleepers did not start");
        assert!(sessions.iter().all(|&s| s != own), "{sessions:?} in {own}");
        assert!(gone, "the marked process {} outlived the scan", pids[0]);
        assert_eq!(spared, [true; 3], "an unmarked process was killed");
    }

    #[test]
    fn one_round_over_proc_is_timed() {
        // A cookie no process has: the cost of one scan between reps.
        let cookie = Cookie::new().unwrap();
        let entry = cookie.entry();
        let mut killed = Killed {
            pids: [(0, 0); 256],
            n: 0,
        };
        let procs = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count();
        let rounds = 50;
        let started = Instant::now();
        for _ in 0..rounds {
            kill_marked(&entry, std::process::id() as libc::pid_t, &mut killed);
        }
        let each = started.elapsed() / rounds;
        println!("one round over /proc ({procs} processes): {each:?}");
        assert_eq!(killed.n, 0);
    }
}
