//! `process = "per_variant"`: each variant's reps run in one worker process of its own
//! (`gapscope __worker --serve`, of this build or of a `rev`/`patch` variant's), which
//! loads params and sets up its backend once and then runs one rep per request. A
//! per-rep worker pays that setup every rep (9.5 s of a 25 s rep for upstream's prover at
//! porep 2^22 on the H200); a served one pays it once, and the variants still interleave.
//!
//! A worker that dies, prints garbage instead of a result line, or outlives
//! `rep_timeout_s` fails that rep (with the reason and its stderr's last lines) and is
//! killed; the variant's next rep starts a new one. A build whose worker cannot serve
//! (older than [`gapscope_workload::worker::SERVE_PROTOCOL`]) gets a worker per rep instead, said
//! once.
//!
//! With `reps_per_worker = K` a variant's worker is let go after K measured reps; the
//! next one runs the run's `warmups` first (unrecorded: their results are dropped), so
//! that each process's lasting state (heap layout, GPU memory placement) is spread over
//! several processes per variant instead of staying with one variant for the whole run.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::debug::DebugHooks;
use super::rep::RepOutput;
use super::schedule::Slot;
use super::spec::ResolvedVariant;
use super::worker::{
    kill_group, parse_worker_output, request_line, run_rep_with, worker_args, Pipes,
};
use crate::store::RepStatus;

/// Whether the gapscope at `exe` can serve many reps per worker.
pub fn can_serve(exe: &Path) -> bool {
    std::process::Command::new(exe)
        .arg("__serves")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).trim()
                    == gapscope_workload::worker::SERVE_PROTOCOL
        })
}

/// One serving worker.
struct Served {
    child: Child,
    /// Taken when the worker is let go: closing it ends the serve loop.
    stdin: Option<ChildStdin>,
    pipes: Pipes,
    pid: u32,
    /// Measured reps it has run.
    measured: u32,
}

impl Drop for Served {
    fn drop(&mut self) {
        let_go(&mut self.stdin, &mut self.child);
    }
}

/// Lets a serving process go: closing its stdin ends its serve loop; one that has not
/// gone within 10 s is killed, with its group.
pub(super) fn let_go(stdin: &mut Option<ChildStdin>, child: &mut Child) {
    drop(stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => {
                kill_group(child);
                return;
            }
        }
    }
}

/// Where one variant's worker comes from.
pub struct WorkerSource<'a> {
    pub exe: &'a Path,
    /// The run folder its worker reads the experiment copy from.
    pub run_dir: &'a Path,
}

/// The serving workers of a run, one per variant, started on first use.
pub struct Pool {
    params_dir: PathBuf,
    nvtx: bool,
    timeout: Option<Duration>,
    workers: HashMap<usize, Served>,
    /// Per exe: whether it serves (asked once).
    serves: HashMap<PathBuf, bool>,
    /// Variants told that their build's worker serves one rep only.
    told: HashSet<usize>,
    rotation: Rotation,
}

/// When a variant's serving worker is let go and what its replacement runs first
/// (`reps_per_worker`): the rotation's rule, apart from the processes it starts, so
/// that it is tested without any.
#[derive(Debug, Default)]
struct Rotation {
    /// Measured reps per worker before it is replaced (`reps_per_worker`).
    reps_per_worker: Option<u32>,
    /// Warm-ups a replacement worker runs before its first measured rep.
    warmups: u32,
    /// Variants that have had a worker: the next one is a replacement.
    had_worker: HashSet<usize>,
}

/// What to do before a rep, by [`Rotation::before`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    /// Let the variant's worker go (it has run its share of measured reps).
    let_go: bool,
    /// Start a worker for the variant (it has none, or it was let go).
    start: bool,
    /// Unrecorded warm-ups the new worker runs before the rep.
    warmups: u32,
}

impl Rotation {
    /// Before rep `slot` of a variant whose worker has run `measured` measured reps
    /// (`None`: the variant has no worker).
    fn before(&mut self, measured: Option<u32>, slot: Slot) -> Step {
        let let_go =
            measured.is_some_and(|m| !slot.warmup && self.reps_per_worker.is_some_and(|k| m >= k));
        let start = measured.is_none() || let_go;
        // A replacement's warm-ups; the first worker's are the schedule's own.
        let replacement = start && !self.had_worker.insert(slot.variant);
        Step {
            let_go,
            start,
            warmups: if replacement && !slot.warmup {
                self.warmups
            } else {
                0
            },
        }
    }
}

const POLL: Duration = Duration::from_millis(5);

impl Pool {
    pub fn new(params_dir: &Path, nvtx: bool, timeout: Option<Duration>) -> Pool {
        Pool {
            params_dir: params_dir.to_path_buf(),
            nvtx,
            timeout,
            workers: HashMap::new(),
            serves: HashMap::new(),
            told: HashSet::new(),
            rotation: Rotation::default(),
        }
    }

    /// Replace each variant's worker after `reps` measured reps; a replacement first
    /// runs `warmups` unrecorded warm-ups.
    pub fn rotate(mut self, reps: Option<u32>, warmups: u32) -> Pool {
        let reps = reps.filter(|&r| r > 0);
        // Without rotation a new worker (after a crash) starts cold, as documented.
        self.rotation.warmups = if reps.is_some() { warmups } else { 0 };
        self.rotation.reps_per_worker = reps;
        self
    }

    /// Runs rep `slot` of variant `v`: in its serving worker, or, where the build of
    /// `src` cannot serve, in a worker of its own (`say` tells that once per variant).
    pub fn run(
        &mut self,
        src: &WorkerSource<'_>,
        v: &ResolvedVariant,
        slot: Slot,
        debug: &DebugHooks,
        say: impl FnOnce(String),
    ) -> anyhow::Result<RepOutput> {
        if self.serves(src.exe) {
            return Ok(self.rep(src, v, slot, debug));
        }
        if self.told.insert(slot.variant) {
            say(format!(
                "variant {:?}: its build's worker serves one rep only (it predates \
                 `process = \"per_variant\"`): a worker per rep",
                v.name
            ));
        }
        run_rep_with(
            src.exe,
            src.run_dir,
            &self.params_dir,
            v,
            slot,
            self.nvtx,
            self.timeout,
            debug,
            None,
        )
    }

    /// Whether `exe` serves; the first answer per exe is kept. `false` means: run this
    /// variant's reps each in a worker of its own.
    fn serves(&mut self, exe: &Path) -> bool {
        *self
            .serves
            .entry(exe.to_path_buf())
            .or_insert_with(|| can_serve(exe))
    }

    fn start(
        &self,
        src: &WorkerSource<'_>,
        v: &ResolvedVariant,
        debug: &DebugHooks,
    ) -> anyhow::Result<Served> {
        let mut cmd = Command::new(src.exe);
        cmd.arg("__worker").arg("--serve");
        let zero = Slot {
            rep: 0,
            variant: 0,
            iteration: 0,
            warmup: false,
        };
        worker_args(
            &mut cmd,
            src.run_dir,
            &self.params_dir,
            v,
            zero,
            self.nvtx,
            debug,
        );
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start a worker process: {e}"))?;
        let pid = child.id();
        let pipes = Pipes::read(&mut child, &format!("[worker {} pid {pid}]", v.name));
        let stdin = child.stdin.take().expect("piped");
        Ok(Served {
            child,
            stdin: Some(stdin),
            pipes,
            pid,
            measured: 0,
        })
    }

    /// Runs rep `slot` of variant `v` in its serving worker (started when it has none).
    /// Never an error for the run: a rep that cannot be had is a failed row with the
    /// reason, and its worker is gone.
    fn rep(
        &mut self,
        src: &WorkerSource<'_>,
        v: &ResolvedVariant,
        slot: Slot,
        debug: &DebugHooks,
    ) -> RepOutput {
        let failed = |why: String| RepOutput::failed(v, slot, why);
        let measured = self.workers.get(&slot.variant).map(|w| w.measured);
        let step = self.rotation.before(measured, slot);
        if step.let_go {
            // Let go (closing its stdin ends it): the next worker starts afresh.
            self.workers.remove(&slot.variant);
        }
        if step.start {
            match self.start(src, v, debug) {
                Ok(w) => {
                    self.workers.insert(slot.variant, w);
                }
                Err(e) => return failed(e.to_string()),
            }
            for _ in 0..step.warmups {
                let warm = Slot {
                    warmup: true,
                    ..slot
                };
                let out = self.ask(v, warm);
                if out.run.status == RepStatus::Failed {
                    self.kill(slot.variant);
                    return failed(format!(
                        "the new worker's warm-up failed: {}",
                        out.run.error
                    ));
                }
            }
        }
        let out = self.ask(v, slot);
        if let Some(w) = self.workers.get_mut(&slot.variant) {
            w.measured += u32::from(!slot.warmup);
        }
        out
    }

    /// Sends rep `slot` to variant `v`'s running worker and waits for its result line.
    fn ask(&mut self, v: &ResolvedVariant, slot: Slot) -> RepOutput {
        let failed = |why: String| RepOutput::failed(v, slot, why);
        let Some(w) = self.workers.get_mut(&slot.variant) else {
            return failed("its worker is gone".into());
        };
        let outcome = ask_line(
            w.stdin.as_mut(),
            &w.pipes,
            &mut w.child,
            w.pid,
            &request_line(slot),
            self.timeout,
        );
        if let Err(AskError::NotTaken(why)) = &outcome {
            let why = why.clone();
            self.workers.remove(&slot.variant);
            return failed(why);
        }
        let outcome = outcome.map_err(|e| e.to_string());
        match outcome.and_then(|line| parse_worker_output(&line).map(|(out, _)| out)) {
            Ok(out) if out.run.rep == slot.rep && out.run.variant == v.name => out,
            Ok(out) => {
                let why = format!(
                    "the worker answered rep {} of {:?} when asked for rep {}",
                    out.run.rep, out.run.variant, slot.rep
                );
                self.kill(slot.variant);
                failed(why)
            }
            Err(why) => {
                let tail = self.kill(slot.variant);
                failed(format!("{why}; stderr: {tail}"))
            }
        }
    }

    /// Kills variant `variant`'s worker (and its group), reads its pipes to their end and
    /// returns the last lines of its stderr: all it wrote before it was killed.
    fn kill(&mut self, variant: usize) -> String {
        let Some(mut w) = self.workers.remove(&variant) else {
            return String::new();
        };
        kill_group(&mut w.child);
        w.pipes.drain();
        w.pipes.tail()
    }
}

/// Why a serving worker gave no result line.
#[derive(Debug)]
pub(super) enum AskError {
    /// It took no request (its stdin is closed or broken): the reason, stderr included.
    NotTaken(String),
    /// It ended, or outlived the timeout, before answering.
    NoAnswer(String),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::NotTaken(w) | AskError::NoAnswer(w) => f.write_str(w),
        }
    }
}

/// Sends one request line to a serving process (gapscope's own worker, or a workload
/// binary) and waits for its result line, polling its exit and `timeout`.
pub(super) fn ask_line(
    stdin: Option<&mut ChildStdin>,
    pipes: &Pipes,
    child: &mut Child,
    pid: u32,
    line: &str,
    timeout: Option<Duration>,
) -> Result<String, AskError> {
    let sent = match stdin {
        Some(i) => write_to_worker(i, line.as_bytes()),
        None => Err(std::io::Error::other("its stdin is closed")),
    };
    if let Err(e) = sent {
        return Err(AskError::NotTaken(format!(
            "the worker (pid {pid}) took no request ({e}); stderr: {}",
            pipes.tail()
        )));
    }
    let started = Instant::now();
    loop {
        match pipes.results.recv_timeout(POLL * 20) {
            Ok(line) => return Ok(line),
            Err(RecvTimeoutError::Disconnected) => {
                let status = child.try_wait().ok().flatten();
                return Err(AskError::NoAnswer(format!(
                    "the worker (pid {pid}) ended without a result line{}",
                    status.map(|s| format!(" ({s})")).unwrap_or_default()
                )));
            }
            Err(RecvTimeoutError::Timeout) => {
                if timeout.is_some_and(|t| started.elapsed() > t) {
                    return Err(AskError::NoAnswer(format!(
                        "worker timed out after {} s (rep_timeout_s) and was killed",
                        started.elapsed().as_secs()
                    )));
                }
            }
        }
    }
}

/// Writes `bytes` to a serving worker's stdin so that a worker that has died cannot end
/// this process: gapscope takes SIGPIPE's default action (`cli::quiet_on_closed_pipe`),
/// and a write to a pipe nobody reads raises it. SIGPIPE is blocked on this thread for
/// the write, the one a failed write leaves pending is taken, and the write reports
/// `BrokenPipe` instead, which fails that rep only.
fn write_to_worker(w: &mut impl std::io::Write, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: the sets are local and initialised by sigemptyset before use;
    // pthread_sigmask changes only this thread's mask, and it is restored before return.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
        let r = w.write_all(bytes).and_then(|_| w.flush());
        if matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            let now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::sigtimedwait(&pipe, std::ptr::null_mut(), &now);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rotation over a run's slots, as the pool would run them with workers that
    /// never crash: per slot, (variant, rep, a worker started, warm-ups it ran first).
    fn walk(rotation: &mut Rotation, slots: &[Slot]) -> Vec<(usize, u32, bool, u32)> {
        let mut measured: HashMap<usize, u32> = HashMap::new();
        slots
            .iter()
            .map(|&slot| {
                let step = rotation.before(measured.get(&slot.variant).copied(), slot);
                if step.start {
                    measured.insert(slot.variant, 0);
                }
                *measured.get_mut(&slot.variant).expect("started") += u32::from(!slot.warmup);
                (slot.variant, slot.rep, step.start, step.warmups)
            })
            .collect()
    }

    #[test]
    fn a_worker_is_replaced_after_its_share_and_the_replacement_warms_up_first() {
        // Two variants, one warm-up, five reps each, interleaved; a new worker every two
        // measured reps, each replacement first running the run's one warm-up.
        let slots = crate::experiment::schedule::schedule(
            2,
            1,
            5,
            crate::experiment::spec::Order::Interleaved,
            1,
        );
        let mut r = Rotation {
            reps_per_worker: Some(2),
            warmups: 1,
            had_worker: HashSet::new(),
        };
        let steps = walk(&mut r, &slots);
        let starts: Vec<(usize, u32)> = steps.iter().filter(|s| s.2).map(|s| (s.0, s.3)).collect();
        // Per variant: the first worker (its warm-up is the schedule's), then two
        // replacements, each after two measured reps and with one warm-up of its own:
        // 2 + 2 + 1 measured reps, three workers a variant.
        assert_eq!(starts, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 1), (1, 1)]);
        for (variant, _, start, warmups) in &steps {
            assert!(
                *start || *warmups == 0,
                "variant {variant}: warm-ups only when starting"
            );
        }
    }

    #[test]
    fn without_rotation_one_worker_serves_every_rep() {
        let slots = crate::experiment::schedule::schedule(
            2,
            2,
            6,
            crate::experiment::spec::Order::Interleaved,
            1,
        );
        let steps = walk(&mut Rotation::default(), &slots);
        assert_eq!(
            steps.iter().filter(|s| s.2).count(),
            2,
            "one start per variant"
        );
        // A worker started after a crash is the variant's second: without rotation it
        // starts cold (no warm-ups), as documented.
        let mut r = Rotation::default();
        r.before(None, slots[0]);
        let again = r.before(None, slots[4]);
        assert_eq!((again.start, again.warmups), (true, 0));
    }

    #[test]
    fn a_request_to_a_worker_that_has_died_is_an_error_not_a_sigpipe() {
        let mut child = Command::new("sh")
            .args(["-c", "exit 0"])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        child.wait().unwrap();
        // As gapscope's own process has it: SIGPIPE would end it. Were the signal not
        // held off, this test binary would die here.
        // SAFETY: signal(2) installs no handler; the disposition is put back below.
        let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let r = write_to_worker(&mut stdin, b"rep 0 0 0\n");
        // SAFETY: as above.
        unsafe { libc::signal(libc::SIGPIPE, before) };
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    }
}
