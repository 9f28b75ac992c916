//! The stack sampler: the kernel's software `cpu-clock` event, one per thread of a target
//! process, sampling every `1/hz` s of that thread's CPU time with a timestamp on
//! CLOCK_MONOTONIC (the span clock), the thread id and the user-space call chain (walked
//! by the kernel along frame pointers).
//!
//! Why per thread and not one inherited event: the kernel refuses to map the ring buffer
//! of an inherited per-task event (`mmap` fails with EINVAL), and an inherited event would
//! miss threads started before it anyway (a C++ library's pool, started before `main`).
//! So the sampler opens one event per entry of `/proc/<pid>/task` and rescans that
//! folder every [`RESCAN`]: threads started later get their own event from then on;
//! a thread that lives shorter than one rescan is not seen.
//!
//! The target is a process id ([`Target`]): this process, or a child such as an
//! external program's, with the same code. For another process the drain thread also
//! keeps that process's maps ([`ProcessMaps`]): read whenever a drained sample's address
//! is not in those read so far, since they are gone once the process exited.
//! Nothing here knows spans; see `attribute`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use perf_event::data::Record;
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag};

use super::maps::ProcessMaps;

/// How often the drain thread empties the ring buffers and looks for new threads.
pub const RESCAN: Duration = Duration::from_millis(10);
/// Data bytes of each thread's ring buffer (plus one page of header). At 1 kHz a busy
/// thread writes about 40 KB/s, so one rescan period fills well under 1% of it.
const RING_BYTES: usize = 64 * 1024;
/// Call-chain entries at and above this value are context markers, not addresses.
const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;

/// The process whose threads are sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub pid: i32,
}

impl Target {
    /// This process.
    pub fn this_process() -> Target {
        Target {
            pid: std::process::id() as i32,
        }
    }

    /// Another process (a child: the kernel allows it to the parent under
    /// `perf_event_paranoid` ≤ 2 when both run as the same user).
    pub fn process(pid: i32) -> Target {
        Target { pid }
    }

    /// Whether the target is this process (its addresses are named in-process).
    pub fn is_this_process(&self) -> bool {
        self.pid == std::process::id() as i32
    }

    /// The target's threads now.
    pub fn threads(&self) -> io::Result<Vec<i32>> {
        let mut tids = Vec::new();
        for e in std::fs::read_dir(format!("/proc/{}/task", self.pid))? {
            if let Some(t) = e?.file_name().to_str().and_then(|s| s.parse().ok()) {
                tids.push(t);
            }
        }
        Ok(tids)
    }
}

/// How events are opened: the kernel's, or a refusal with a given reason (a machine
/// that forbids perf events, simulated for tests and `--debug-deny-profile`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opener {
    Perf,
    Deny(String),
}

impl Opener {
    fn open(&self, tid: i32, hz: u32) -> io::Result<perf_event::Sampler> {
        if let Opener::Deny(why) = self {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, why.clone()));
        }
        let mut b = Builder::new(Software::CPU_CLOCK);
        b.observe_pid(tid)
            .any_cpu()
            .exclude_kernel(true)
            .exclude_hv(true)
            .sample_period(1_000_000_000 / u64::from(hz.max(1)))
            .clockid(Clock::MONOTONIC)
            .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CALLCHAIN)
            .enabled(true);
        b.build()?.sampled(RING_BYTES)
    }
}

/// One sample: when (CLOCK_MONOTONIC ns), on which thread, and the user call chain,
/// innermost address first (return addresses after the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    pub time_ns: u64,
    pub tid: u32,
    pub chain: Vec<u64>,
}

/// What a sampling window collected.
#[derive(Debug, Default)]
pub struct RawProfile {
    pub samples: Vec<RawSample>,
    /// Samples the kernel dropped because a ring buffer was full.
    pub lost: u64,
    /// Threads that had an event.
    pub threads: usize,
    /// Threads whose event could not be opened (they exited first, or the kernel refused
    /// a later one), with the first reason.
    pub threads_failed: usize,
    pub first_failure: Option<String>,
    /// CPU time of the sampler's own thread (rescans and draining), which it does not
    /// sample: part of the cost of sampling.
    pub sampler_cpu_ns: u64,
    /// Another process's maps, for naming its addresses; `None` for this process.
    pub maps: Option<ProcessMaps>,
}

/// A running sampler; [`Sampler::stop`] returns what it collected.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<RawProfile>>,
}

impl Sampler {
    /// Opens an event on every thread of `target` now and starts the drain thread. Fails
    /// (with the kernel's reason) only if no thread's event could be opened: the caller
    /// records sampling as unavailable and goes on.
    pub fn start(target: Target, hz: u32, opener: Opener) -> Result<Sampler, String> {
        let tids = target
            .threads()
            .map_err(|e| format!("cannot list the threads of pid {}: {e}", target.pid))?;
        let mut events = HashMap::new();
        let mut first_error = None;
        for tid in tids {
            match opener.open(tid, hz) {
                Ok(s) => {
                    events.insert(tid, s);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if events.is_empty() {
            let e = first_error.map(|e| describe(&e)).unwrap_or_default();
            return Err(format!("perf_event_open(cpu-clock) refused: {e}"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("gapscope-profile".into())
            .spawn(move || drain_loop(target, hz, opener, events, &flag))
            .map_err(|e| format!("cannot start the sampler's thread: {e}"))?;
        Ok(Sampler {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops sampling and returns everything collected.
    pub fn stop(mut self) -> RawProfile {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A perf error with what to do about the usual one.
fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "{e} (perf events are forbidden here: kernel.perf_event_paranoid is {} — 2 or less \
             lets a process sample itself — or a seccomp profile blocks perf_event_open)",
            std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unreadable".into())
        ),
        Some(libc::ENOENT) | Some(libc::ENOSYS) => {
            format!("{e} (this kernel has no perf events or no cpu-clock event)")
        }
        _ => e.to_string(),
    }
}

fn drain_loop(
    target: Target,
    hz: u32,
    opener: Opener,
    mut events: HashMap<i32, perf_event::Sampler>,
    stop: &AtomicBool,
) -> RawProfile {
    // SAFETY: gettid has no preconditions.
    let own_tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
    let mut out = RawProfile {
        // Read at the first samples, not now: the sampler may start before the target's
        // exec (an external program's events open between its fork and its exec).
        maps: (!target.is_this_process()).then(|| ProcessMaps::new(target.pid)),
        ..Default::default()
    };
    let mut tried: std::collections::HashSet<i32> = events.keys().copied().collect();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        if !stopping {
            if let Ok(tids) = target.threads() {
                for tid in tids {
                    if tid == own_tid || !tried.insert(tid) {
                        continue;
                    }
                    match opener.open(tid, hz) {
                        Ok(s) => {
                            events.insert(tid, s);
                        }
                        // The thread ended between the listing and the open.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(e) => {
                            out.threads_failed += 1;
                            out.first_failure.get_or_insert_with(|| describe(&e));
                        }
                    }
                }
            }
        } else {
            for s in events.values_mut() {
                let _ = s.disable();
            }
        }
        let seen = out.samples.len();
        for s in events.values_mut() {
            drain(s, &mut out);
        }
        if let Some(m) = out.maps.as_mut() {
            let addrs = out.samples[seen..]
                .iter()
                .flat_map(|s| s.chain.iter().copied());
            if !m.covers(addrs) {
                m.refresh();
            }
        }
        if stopping {
            break;
        }
        std::thread::sleep(RESCAN);
    }
    out.threads = events.len();
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
        out.sampler_cpu_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    }
    out
}

fn drain(s: &mut perf_event::Sampler, out: &mut RawProfile) {
    while let Some(rec) = s.next_record() {
        match rec.parse_record() {
            Ok(Record::Sample(smp)) => {
                let (Some(time_ns), Some(tid)) = (smp.time(), smp.tid()) else {
                    continue;
                };
                let chain = smp
                    .callchain()
                    .unwrap_or(&[])
                    .iter()
                    .copied()
                    .filter(|&a| a < PERF_CONTEXT_MAX && a != 0)
                    .collect();
                out.samples.push(RawSample {
                    time_ns,
                    tid,
                    chain,
                });
            }
            Ok(Record::Lost(l)) => out.lost += l.lost,
            _ => {}
        }
    }
}
