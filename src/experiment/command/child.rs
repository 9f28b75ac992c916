//! One run of an external program: spawned in its own process group with its span pipe
//! (`GAPSCOPE_SPAN_FD`), counted by perf events and (with `profile`) sampled from its
//! `exec` on, its CPU clock read every [`cpu::PERIOD`], its stdout, stderr and span pipe
//! read line by line ([`super::streams`]: each line timed as its read returned), and killed (the whole group) when it
//! outlives its limit. Its exit is seen without reaping it (`waitid` with `WNOWAIT`):
//! the last CPU reading and the sampler's end come while its pid is still its own.

use std::collections::VecDeque;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cpu::{self, CpuSeries};
use super::members::Members;
use super::streams::{self, StreamState};
use crate::capture::costs::Via;
use crate::capture::log_spans::{self, LogMatcher, LogPatterns};
use crate::capture::{ChildCapture, NameMap};
use crate::counters::process::ProcessCounters;
use crate::counters::CounterValues;
use crate::emit::FD_ENV;
use crate::profile::{Opener, RepSampling, Sampled, Target};
use crate::protocol::budget::SpanBudget;
use crate::protocol::{GpuLines, LineCounts, ParsedSpan, Parser};
use crate::trace::now_ns;
use crate::trace::AttrValue;

/// How long the readers may take to see the end of the program's pipes once it exited
/// (and what was left of its process group was killed).
const DRAIN: Duration = Duration::from_secs(2);

/// How the program ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    /// It exited or was killed by a signal on its own.
    Exited(ExitStatus),
    /// It outlived the limit; its process group was killed.
    TimedOut(Duration),
    /// It could not be started.
    NotStarted(String),
}

/// What one run of the program gave.
#[derive(Debug)]
pub struct ChildRun {
    pub pid: u32,
    /// Just before the spawn and just after the program was reaped, on the span clock.
    pub start_ns: u64,
    pub end_ns: u64,
    pub ending: Ending,
    /// Spans of every stream (stdout, stderr, the span pipe), each parsed on its own.
    pub spans: Vec<ParsedSpan>,
    pub counts: LineCounts,
    /// A few unparseable lines, shortened, to show the user.
    pub samples: Vec<String>,
    /// Perf-event counts of the program, its threads and its children; `None` when
    /// counters were off or none could be opened.
    pub counters: Option<CounterValues>,
    /// The last lines of its stderr that were not protocol lines.
    pub stderr_tail: Vec<String>,
    /// Its CPU clock, read at the spawn, every [`cpu::PERIOD`] and once it exited.
    pub cpu: CpuSeries,
    /// Its threads' samples, when sampling was asked for (not yet given to spans).
    pub sampled: Option<Sampled>,
    /// Thread ids of span lines that were not the program's own threads.
    pub outsiders: std::collections::BTreeSet<u64>,
    /// Names of the program's threads: from its `T` lines, else from `/proc` when a
    /// thread's first line was read.
    pub thread_names: crate::protocol::ThreadNames,
    /// GPU activity (`G`) and collector status (`S`) lines of every stream.
    pub gpu: GpuLines,
    /// The most spans the rep keeps, and how many the program sent past it (counted
    /// while reading, never stored).
    pub span_cap: usize,
    pub spans_over_cap: u64,
    /// Spans the rep's rows took from `spans` (0 before they are made).
    pub spans_read: usize,
    /// What `[workload.log_spans]` made of the program's lines, when it has entries.
    pub log: Option<LogLines>,
}

/// What the program's log lines gave in one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogLines {
    /// Lines that matched an entry, and spans kept of them.
    pub matched: u64,
    pub kept: u64,
    /// Why spans were dropped as outside the rep (the first reason).
    pub dropped: Option<String>,
    /// The first line that matched badly, with why.
    pub first_problem: Option<String>,
    /// How lines were timed, where an entry times them by their reading (no `ts`).
    pub timed: Option<&'static str>,
    /// What the patterns cost on lines slow to match (the matcher's time).
    pub slow: Option<String>,
}

/// Sampling asked of a run: the rate, and how events are opened.
#[derive(Debug, Clone)]
pub struct ProfileAsk {
    pub hz: u32,
    pub opener: Opener,
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are open descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Runs `argv` in `dir` once and collects its spans, at most `span_cap` of them (the
/// rest are counted as they are read: [`ChildRun::spans_over_cap`]); never fails (a
/// program that cannot start is an [`Ending::NotStarted`]).
pub fn run_once(
    argv: &[String],
    dir: &Path,
    timeout: Option<Duration>,
    counters: bool,
    profile: Option<ProfileAsk>,
    capture: &ChildCapture,
    span_cap: usize,
) -> ChildRun {
    // One function for the program's whole life (pipes, spawn, readers, sampler, wait,
    // drain, then the streams' spans): the readers, the sampler and the wait share the
    // pipes, the start time and the members' table as locals, which a split would have
    // to thread through every part.
    let pipes = (|| Ok::<_, std::io::Error>([pipe()?, pipe()?, pipe()?, pipe()?, pipe()?]))();
    let start_ns = now_ns();
    let wall_offset_ns = log_spans::wall_offset_ns();
    let hz = profile.as_ref().map(|p| p.hz);
    let not_started = |why: String| ChildRun {
        pid: 0,
        start_ns,
        end_ns: now_ns(),
        ending: Ending::NotStarted(why),
        spans: Vec::new(),
        counts: LineCounts::default(),
        samples: Vec::new(),
        counters: None,
        stderr_tail: Vec::new(),
        cpu: CpuSeries::starting(start_ns),
        sampled: hz.map(|hz| Sampled::unavailable(hz, "the program did not start".into())),
        outsiders: Default::default(),
        thread_names: Default::default(),
        gpu: GpuLines::default(),
        span_cap,
        spans_over_cap: 0,
        spans_read: 0,
        log: None,
    };
    // Counters and the sampler open on the child between its fork and its exec.
    let handshake = counters || profile.is_some();
    let [(span_r, span_w), (pid_r, pid_w), (go_r, go_w), (out_r, out_w), (err_r, err_w)] =
        match pipes {
            Ok(p) => p,
            Err(e) => return not_started(format!("cannot create pipes: {e}")),
        };
    let span_fd = span_w.as_raw_fd();
    // The readers wait on the pipes before the program can write to them (and before the
    // rep's window opens: starting them is gapscope's time, not the program's).
    let by_reading = capture.log.as_ref().is_some_and(|p| p.stamps_by_arrival());
    let chunks = streams::read(
        vec![
            (0, Box::new(std::fs::File::from(out_r))),
            (1, Box::new(std::fs::File::from(err_r))),
            (2, Box::new(std::fs::File::from(span_r))),
        ],
        by_reading,
    );
    let readers = chunks.1;
    // The program's process group, made (with its watcher: see `lifeline`) before the
    // rep's window opens, so that the fork it costs is not the program's time. Dropped
    // on any return, it ends with whatever is left in it.
    let mut group = crate::procs::lifeline::Group::new();
    let start_ns = now_ns();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(dir)
        .env(FD_ENV, span_fd.to_string())
        .envs(capture.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w));
    // Its group, and its group's cookie in its environment (after the workload's own).
    group.attach(&mut cmd);
    crate::procs::die_with_parent(&mut cmd);
    let (pid_fd, go_fd) = (pid_w.as_raw_fd(), go_r.as_raw_fd());
    // SAFETY: runs in the forked child before exec and makes only async-signal-safe calls
    // (fcntl, getpid, write, read, _exit) on descriptors opened before the fork.
    unsafe {
        cmd.pre_exec(move || {
            // The span pipe's write end stays open across exec (every other is CLOEXEC).
            if libc::fcntl(span_fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if handshake {
                // Say who we are, then wait until the parent has opened its events.
                let pid = libc::getpid().to_ne_bytes();
                libc::write(pid_fd, pid.as_ptr().cast(), pid.len());
                let mut go = 0u8;
                if libc::read(go_fd, (&mut go as *mut u8).cast(), 1) != 1 {
                    libc::_exit(127);
                }
            }
            Ok(())
        });
    }
    // std's spawn returns only once the program exec'd, so a helper thread opens the
    // counters and the sampler's first event between the child's fork and its exec, while
    // this thread spawns (the child dies with the thread that spawned it: see
    // procs::die_with_parent).
    let opener = std::thread::spawn(move || {
        let (mut perf, mut sampling) = (None, None);
        let mut pid = [0u8; 4];
        let mut f = std::fs::File::from(pid_r);
        if handshake && f.read_exact(&mut pid).is_ok() {
            let pid = i32::from_ne_bytes(pid);
            if counters {
                let c = ProcessCounters::open(pid);
                perf = c.any().then_some(c);
            }
            sampling =
                profile.map(|p| RepSampling::begin_target(Target::process(pid), p.hz, p.opener));
        }
        let mut go = std::fs::File::from(go_w);
        let _ = std::io::Write::write_all(&mut go, &[1]);
        (perf, sampling)
    });
    let spawned = cmd.spawn();
    drop(pid_w); // the parent's copy: the opener reads EOF if no child ever wrote
    drop(cmd);
    let (mut perf, sampling) = opener.join().unwrap_or((None, None));
    drop(go_r);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            // The group's watcher goes with the program that did not start.
            group.end();
            drop(sampling.map(RepSampling::stop));
            return not_started(format!(
                "cannot start {:?} in {}: {e}",
                argv[0],
                dir.display()
            ));
        }
    };
    drop(span_w);
    let pid = child.id();
    group.or_led_by(pid as libc::pid_t);
    let (tx, rx) = std::sync::mpsc::channel::<usize>();
    let members = Arc::new(Members::new(pid));
    // One cap for every stream of the rep, applied as the lines are read.
    let budget = Arc::new(SpanBudget::new(span_cap));
    let states: Vec<StreamState> = (0..3)
        .map(|_| {
            Arc::new(Mutex::new((
                Parser::with_budget(budget.clone()),
                VecDeque::new(),
            )))
        })
        .collect();
    // One matcher for stdout and stderr: a begin and its end may come on either.
    let log = capture.log.clone().map(|p| {
        Arc::new(Mutex::new(
            LogMatcher::new(p, pid as u64, wall_offset_ns).with_budget(budget.clone()),
        ))
    });
    // stderr's last lines are kept for a failed rep's error.
    let tails = [false, true, false];
    streams::parse(
        chunks,
        states.clone(),
        tails,
        members.clone(),
        log.clone(),
        tx,
    );
    let started = Instant::now();
    let mut cpu = CpuSeries::starting(start_ns);
    // Until it exited (not reaped: its pid stays its own while the sampler stops).
    let why = loop {
        cpu.read(pid as i32);
        match exited(pid, false) {
            Ok(true) => break None,
            Ok(false) => {}
            Err(e) => {
                group.kill();
                break Some(Ending::NotStarted(format!(
                    "cannot wait for the program: {e}"
                )));
            }
        }
        if timeout.is_some_and(|t| started.elapsed() > t) {
            group.kill();
            let _ = exited(pid, true);
            break Some(Ending::TimedOut(timeout.unwrap_or_default()));
        }
        std::thread::sleep(cpu::PERIOD);
    };
    let end_ns = now_ns();
    cpu.read(pid as i32);
    let sampled = sampling
        .map(RepSampling::stop)
        .or_else(|| hz.map(|hz| Sampled::unavailable(hz, "the sampler did not start".into())));
    let status = child.wait();
    let ending = match (why, status) {
        (Some(e), _) => e,
        (None, Ok(s)) => Ending::Exited(s),
        (None, Err(e)) => Ending::NotStarted(format!("cannot wait for the program: {e}")),
    };
    let counters = perf.as_mut().map(ProcessCounters::read);
    // Whatever the program left behind goes too (in its group, or escaped to a session of
    // its own), so its pipes close.
    group.end();
    let mut ended: Vec<usize> = Vec::new();
    let drain_until = Instant::now() + DRAIN;
    while ended.len() < 3 {
        let left = drain_until.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(i) => ended.push(i),
            Err(_) => break,
        }
    }
    let unread: Vec<&str> = ["stdout", "stderr", "the span pipe"]
        .iter()
        .enumerate()
        .filter(|(i, _)| !ended.contains(i))
        .map(|(_, n)| *n)
        .collect();
    // Every stream's lines so far, ended or not: nothing read is lost.
    let streams = states.iter().enumerate().map(|(i, st)| {
        let mut g = st.lock().unwrap_or_else(|e| e.into_inner());
        // A reader still running (its stream held open) goes on into a parser under the
        // same cap, so it cannot grow without end either.
        let (p, tail) = std::mem::replace(
            &mut *g,
            (Parser::with_budget(budget.clone()), VecDeque::new()),
        );
        (i, (p, Vec::from(tail)))
    });
    let mut run = ChildRun {
        pid,
        start_ns,
        end_ns,
        ending,
        spans: Vec::new(),
        counts: LineCounts::default(),
        samples: Vec::new(),
        counters,
        stderr_tail: Vec::new(),
        cpu,
        sampled,
        outsiders: members.outsiders(),
        thread_names: members.names().into_iter().collect(),
        gpu: GpuLines::default(),
        span_cap,
        spans_over_cap: 0,
        spans_read: 0,
        log: None,
    };
    for (i, (mut parser, tail)) in streams {
        run.gpu.extend(parser.take_gpu());
        run.thread_names.extend(parser.take_threads());
        let (mut spans, counts, samples) = parser.finish(end_ns);
        tag_via(&mut spans, |s| via_of_line(s, capture));
        append(&mut run.spans, spans);
        run.counts.add(&counts);
        run.samples.extend(samples);
        if i == 1 {
            run.stderr_tail = tail;
        }
    }
    if let Some(m) = log {
        let m = std::mem::replace(
            &mut *m.lock().unwrap_or_else(|e| e.into_inner()),
            LogMatcher::new(Arc::new(LogPatterns::empty()), 0, 0),
        );
        let mut out = m.finish(start_ns, end_ns);
        tag_via(&mut out.spans, |_| Via::LogLines);
        append(&mut run.spans, out.spans);
        run.counts.add(&out.counts);
        run.samples.extend(out.samples.iter().cloned());
        run.log = Some(LogLines {
            timed: by_reading.then(|| readers.describe()),
            matched: out.matched,
            kept: out.kept,
            dropped: out.dropped,
            slow: out.slow,
            first_problem: out.samples.into_iter().next(),
        });
    }
    group_names(&mut run.spans, &capture.names);
    run.spans_over_cap = budget.over();
    if !unread.is_empty() {
        // A process outside the program's group holds them open (one that went to another
        // group of gapscope's session with an environment of its own: see procs::cookie).
        run.stderr_tail.push(format!(
            "[gapscope: {} still open {DRAIN:?} after the program exited; the lines read \
             until then are kept, later ones are not read]",
            unread.join(", ")
        ));
    }
    run
}

/// The span attribute that says which capture path a program's span came through
/// ([`Via`]): the diff's note on the recorder's own cost uses that path's cost.
pub const VIA: &str = "via";

/// Records on each span the capture path it came through (attribute [`VIA`]).
fn tag_via(spans: &mut [ParsedSpan], via: impl Fn(&ParsedSpan) -> Via) {
    for s in spans {
        s.via = Some(via(s).as_str());
    }
}

/// Appends `more` to `spans`, taking `more` whole where `spans` is empty (the usual
/// case: one stream sends every span) rather than copying a million spans into a new
/// list beside the old.
fn append(spans: &mut Vec<ParsedSpan>, mut more: Vec<ParsedSpan>) {
    if spans.is_empty() {
        std::mem::swap(spans, &mut more);
    } else {
        spans.append(&mut more);
    }
}

/// The path of a span read from a protocol stream: the `tracing` layer's lines carry
/// ids (`gs.id`); with `nvtx = true` the others are NVTX ranges; else a program's own
/// emitter (gapscope-emit, gapscope_emit.h, or hand-written lines).
fn via_of_line(s: &ParsedSpan, capture: &ChildCapture) -> Via {
    if s.attrs.iter().any(|(k, _)| k == log_spans::GS_ID) {
        Via::Tracing
    } else if capture.nvtx {
        Via::Nvtx
    } else {
        Via::Protocol
    }
}

/// Renames spans whose names carry a per-call id ([`crate::capture::names`]), keeping
/// the id as attributes (the rule's named groups); each distinct name is matched once.
fn group_names(spans: &mut [ParsedSpan], names: &NameMap) {
    type Mapped = Option<(std::sync::Arc<str>, Vec<(String, AttrValue)>)>;
    let mut seen: std::collections::HashMap<std::sync::Arc<str>, Mapped> = Default::default();
    for s in spans {
        let m = seen.entry(s.name.clone()).or_insert_with(|| {
            names.apply(&s.name).map(|(n, attrs)| {
                let attrs = attrs
                    .into_iter()
                    .map(|(k, v)| (k, crate::protocol::value(&v)))
                    .collect();
                (n.into(), attrs)
            })
        });
        if let Some((n, attrs)) = m {
            s.attrs.extend(attrs.iter().cloned());
            s.name = n.clone();
        }
    }
}

/// Whether the process `pid` (a child of this one) has exited, without reaping it;
/// `block`: wait until it has.
fn exited(pid: u32, block: bool) -> std::io::Result<bool> {
    // SAFETY: an all-zero siginfo_t is valid; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
    // SAFETY: `info` is valid and writable; P_PID names one child.
    if unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: waitid filled `info` (si_pid is 0 when no child changed state).
    Ok(unsafe { info.si_pid() } != 0)
}
