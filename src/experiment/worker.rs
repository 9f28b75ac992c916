//! One rep in a fresh process (`process = "per_rep"`): the parent starts
//! `gapscope __worker`, which runs the rep and prints one result line; anything else the
//! child prints (C++ logging, say) is passed through to stderr. A child that dies, or a
//! result line that does not parse, makes the rep `failed` with the reason — the run
//! and every earlier rep go on.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::debug::{DebugHooks, WorkerDebug};
use super::emulation::Emulator;
use super::rep::{run_rep_here, RepContext, RepOutput};
use super::schedule::Slot;
use super::setup::{obtain_params, setup_backends};
use super::spec::{Experiment, ResolvedVariant};
use crate::store::{self, RunRow, SpanRow};
use crate::telemetry::{RepTelemetry, Telemetry, TelemetryConfig};

use gapscope_workload::worker::RESULT_PREFIX;
use gapscope_workload::worker::{self as protocol, Request};

#[derive(serde::Serialize, serde::Deserialize)]
struct WorkerResult {
    run: RunRow,
    spans: Vec<SpanRow>,
    /// The rep's GPU telemetry (CUPTI sees only the worker's own process).
    #[serde(default)]
    gpu: RepTelemetry,
    /// The worker's backend setup before the rep (meta.json `setup_ns` keys), in ns.
    #[serde(default)]
    setup_ns: std::collections::BTreeMap<String, u64>,
    /// The rep's sampled stacks, without their rows (the worker wrote those into the run
    /// folder itself).
    #[serde(default)]
    profile: Option<crate::profile::RepProfile>,
}

/// Arguments of the hidden `__worker` subcommand: the runner writes them, this parses
/// them, so one definition serves both ends.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    #[arg(long)]
    pub run_dir: std::path::PathBuf,
    #[arg(long)]
    pub params_dir: std::path::PathBuf,
    #[arg(long)]
    pub variant: String,
    #[arg(long)]
    pub rep: u32,
    #[arg(long)]
    pub iteration: u32,
    #[arg(long)]
    pub warmup: bool,
    #[arg(long)]
    pub nvtx: bool,
    /// The rep runs under callgrind, which dumps into this folder (`counters = "emulated"`).
    #[arg(long)]
    pub emulated: Option<std::path::PathBuf>,
    /// Corrupt this rep's proofs (a test double: see [`DebugHooks`]).
    #[arg(long, hide = true)]
    pub debug_corrupt_proofs: bool,
    /// What to do before the rep (a test double: see [`WorkerDebug`]).
    #[arg(long, hide = true, value_enum)]
    pub debug_worker: Option<WorkerDebug>,
    /// Refuse the stack sampler's perf events with this reason (a test double).
    #[arg(long, hide = true)]
    pub debug_deny_profile: Option<String>,
    /// Serve many reps of the variant (`process = "per_variant"`): set up once, then run
    /// one rep per request line on stdin (`rep REP ITERATION WARMUP`, WARMUP 0 or 1),
    /// answering each with its result line, until stdin ends. `--rep`, `--iteration`
    /// and `--warmup` are then unused.
    #[arg(long)]
    pub serve: bool,
}

/// One request line of a serving worker ([`Request::line`]). `gapscope __serves` prints
/// [`protocol::SERVE_PROTOCOL`]: builds from before it have no such command, and get a worker per
/// rep.
pub fn request_line(slot: Slot) -> String {
    Request {
        rep: slot.rep,
        iteration: slot.iteration,
        warmup: slot.warmup,
    }
    .line()
}

/// Body of `gapscope __worker`: runs one rep and prints its result line.
pub fn worker_main(a: &WorkerArgs) -> Result<()> {
    // The worker's whole life: the experiment copy loaded, counters and telemetry set up,
    // params made, then one rep answered or, serving, one per request line on stdin. Both
    // ways use the same setup, so they stay in one function.
    if let Some(w) = a.debug_worker {
        w.act();
    }
    // `tracing` spans of the code this worker runs (a patched dependency) are recorded.
    crate::capture::tracing_sink::install();
    let (exp, _) = Experiment::load_copy(&a.run_dir, store::EXPERIMENT_COPY)?;
    let (vi, v) = exp
        .resolved_variants()
        .into_iter()
        .enumerate()
        .find(|(_, v)| v.name == a.variant)
        .with_context(|| format!("variant {:?} not in the experiment", a.variant))?;
    // Emulated: spans read no perf events (under the emulator they would count the
    // emulator); a variant whose emulation fell back to perf events runs here unwrapped.
    if a.emulated.is_some() {
        crate::counters::emulated::arm().map_err(anyhow::Error::msg)?;
    }
    crate::trace::set_counters_enabled(
        a.emulated.is_none() && v.counters != crate::counters::CounterMode::Off,
    );
    crate::trace::process_cpu::set_mode(exp.run.process_cpu);
    let (params, origins) = obtain_params(&exp, &a.params_dir, false, false)?;
    // Under the emulator nothing of the GPU runs: no telemetry, and a GPU backend runs
    // synthesis alone (see emulation::synthesis_only), so it needs no setup.
    let emulated = a.emulated.is_some();
    let telemetry = Telemetry::start(TelemetryConfig {
        period: std::time::Duration::from_millis(exp.run.telemetry_period_ms),
        nvml: !emulated,
        cupti: v.telemetry.cupti && !emulated,
        nvtx: a.nvtx && !emulated,
    });
    // Outside the rep: telemetry collects only between begin_rep and end_rep.
    let setup_ns = if super::emulation::synthesis_only(v.backend, emulated) {
        Default::default()
    } else {
        setup_backends(&exp, std::slice::from_ref(&v), &params, &origins, false)
    };
    let debug = DebugHooks {
        corrupt_proofs: if a.debug_corrupt_proofs {
            vec![v.name.clone()]
        } else {
            Vec::new()
        },
        deny_profile: a.debug_deny_profile.clone(),
        ..DebugHooks::default()
    };
    let ctx = RepContext {
        exp: &exp,
        params: &params,
        telemetry: Some(&telemetry),
        debug: &debug,
    };
    // Not locked across reps: a rep's own threads may print to stdout while it runs (a
    // held lock would stop them, and the rep waiting on them); each result line is one
    // write under the lock.
    let mut out = std::io::stdout();
    if !a.serve {
        let slot = Slot {
            rep: a.rep,
            variant: vi,
            iteration: a.iteration,
            warmup: a.warmup,
        };
        let line = answer(a, &ctx, &v, slot, setup_ns)?;
        return protocol::write_result(&mut out, &line).context("writing the result");
    }
    // Serving: the setup is reported with the first rep only.
    let mut setup_ns = Some(setup_ns);
    protocol::serve(std::io::stdin().lock(), &mut out, |r: Request| {
        let slot = Slot {
            rep: r.rep,
            variant: vi,
            iteration: r.iteration,
            warmup: r.warmup,
        };
        answer(a, &ctx, &v, slot, setup_ns.take().unwrap_or_default())
    })
    .map_err(|e| match e {
        protocol::ServeError::Answer(e) => e,
        other => anyhow::Error::msg(other.to_string()),
    })
}

/// Runs one rep here; its result line's JSON.
fn answer(
    a: &WorkerArgs,
    ctx: &RepContext<'_>,
    v: &ResolvedVariant,
    slot: Slot,
    setup_ns: std::collections::BTreeMap<String, u64>,
) -> Result<String> {
    let RepOutput {
        mut run,
        mut spans,
        gpu,
        profile,
        ..
    } = run_rep_here(ctx, v, slot)?;
    if let Some(p) = &profile {
        crate::profile::folded::write_rep(&a.run_dir, p)?;
    }
    if let Some(dir) = &a.emulated {
        if let Err(why) = super::emulation::fill_counts(&mut spans, dir) {
            run.status = store::RepStatus::Failed;
            run.error = format!("emulated counts: {why}");
        }
    }
    Ok(serde_json::to_string(&WorkerResult {
        run,
        spans,
        gpu,
        setup_ns,
        profile,
    })?)
}

/// Parses a worker's stdout: exactly one result line; other lines are returned as
/// passthrough text.
pub fn parse_worker_output(stdout: &str) -> Result<(RepOutput, Vec<String>), String> {
    let mut result = None;
    let mut other = Vec::new();
    for (i, line) in stdout.lines().enumerate() {
        if let Some(json) = protocol::result_payload(line) {
            if result.is_some() {
                return Err(format!("line {}: a second result line", i + 1));
            }
            let r: WorkerResult = serde_json::from_str(json).map_err(|e| {
                format!(
                    "line {}: malformed result line ({e}); starts with {:?}",
                    i + 1,
                    json.chars().take(60).collect::<String>()
                )
            })?;
            result = Some(r);
        } else {
            other.push(line.to_string());
        }
    }
    let r = result.ok_or_else(|| "no result line in the worker's output".to_string())?;
    Ok((
        RepOutput {
            run: r.run,
            spans: r.spans,
            gpu: r.gpu,
            setup_ns: r.setup_ns,
            profile: r.profile,
        },
        other,
    ))
}

/// The arguments every worker gets (a serving one with `slot` 0), in its own process
/// group, so that a kill reaches whatever the worker started too (nothing may keep its
/// pipes open after it is gone), and killed with its parent.
pub(super) fn worker_args(
    cmd: &mut Command,
    run_dir: &Path,
    params_dir: &Path,
    v: &ResolvedVariant,
    slot: Slot,
    nvtx: bool,
    debug: &DebugHooks,
) {
    cmd.arg("--run-dir")
        .arg(run_dir)
        .arg("--params-dir")
        .arg(params_dir)
        .arg("--variant")
        .arg(&v.name)
        .arg("--rep")
        .arg(slot.rep.to_string())
        .arg("--iteration")
        .arg(slot.iteration.to_string());
    if nvtx {
        cmd.arg("--nvtx");
    }
    if debug.corrupts(&v.name) {
        cmd.arg("--debug-corrupt-proofs");
    }
    if let Some(w) = debug.worker {
        cmd.arg("--debug-worker").arg(w.as_str());
    }
    if let Some(why) = &debug.deny_profile {
        cmd.arg("--debug-deny-profile").arg(why);
    }
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    crate::procs::die_with_parent(cmd);
}

/// Runs one rep in a worker process of gapscope `exe` (this binary, or a `rev`
/// variant's build), which reads the experiment copy in `run_dir`; with `emulator`,
/// under callgrind (its dumps in a folder of the run folder, removed once the worker is
/// done).
#[allow(clippy::too_many_arguments)]
pub fn run_rep_with(
    exe: &Path,
    run_dir: &Path,
    params_dir: &Path,
    v: &ResolvedVariant,
    slot: Slot,
    nvtx: bool,
    timeout: Option<std::time::Duration>,
    debug: &DebugHooks,
    emulator: Option<&Emulator>,
) -> Result<RepOutput> {
    // The worker spawned (under the emulator where asked), then one poll loop for its
    // result line, its exit, the grace after the result and the rep's deadline, then the
    // result or why the rep failed. What the loop saw (the result, when, a kill) is read
    // after it, so it stays here.
    let dump_dir = run_dir.join(format!(".callgrind-rep{}", slot.rep));
    let mut cmd = match emulator {
        Some(em) => {
            std::fs::create_dir_all(&dump_dir)
                .with_context(|| format!("cannot create {}", dump_dir.display()))?;
            let mut c = em.command(exe, &dump_dir);
            c.arg("__worker").arg("--emulated").arg(&dump_dir);
            c
        }
        None => {
            let mut c = Command::new(exe);
            c.arg("__worker");
            c
        }
    };
    worker_args(&mut cmd, run_dir, params_dir, v, slot, nvtx, debug);
    if slot.warmup {
        cmd.arg("--warmup");
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start a worker process")?;
    let tag = format!("[worker rep {}]", slot.rep);
    let pipes = Pipes::read(&mut child, &tag);
    let rx = &pipes.results;
    let started = std::time::Instant::now();
    let deadline = timeout.map(|t| started + t);
    let mut result: Option<String> = None;
    let mut result_at = None;
    let mut killed: Option<String> = None;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for the worker")? {
            break Some(status);
        }
        if result.is_none() {
            if let Ok(line) = rx.try_recv() {
                result = Some(line);
                result_at = Some(std::time::Instant::now());
            }
        }
        let now = std::time::Instant::now();
        if result_at.is_some_and(|t| now.duration_since(t) > EXIT_GRACE) {
            kill_group(&mut child);
            eprintln!(
                "{tag} did not exit {EXIT_GRACE:?} after its result; killed (its result is kept)"
            );
            break None;
        }
        if deadline.is_some_and(|d| now > d) && result.is_none() {
            kill_group(&mut child);
            killed = Some(format!(
                "worker timed out after {} s (rep_timeout_s) and was killed",
                started.elapsed().as_secs()
            ));
            break None;
        }
        // Polling keeps the deadline and the grace period simple; a rep lasts seconds.
        std::thread::sleep(POLL);
    };
    let (late, tail) = pipes.finish();
    if result.is_none() {
        result = late;
    }
    if emulator.is_some() {
        // The worker read its span dumps; what is left (program-end dumps) is not needed.
        let _ = std::fs::remove_dir_all(&dump_dir);
    }
    let parsed = match (&killed, &result) {
        (Some(why), _) => Err(why.clone()),
        (None, Some(line)) => parse_worker_output(line).map(|(out, _)| out),
        (None, None) => Err("no result line in the worker's output".to_string()),
    };
    match parsed {
        Ok(out) => Ok(out),
        Err(why) => {
            let msg = match status {
                Some(s) if s.success() => format!("worker output unusable: {why}"),
                Some(s) => format!("worker exited with {s}: {why}; stderr: {tail}"),
                None => format!("{why}; stderr: {tail}"),
            };
            Ok(RepOutput::failed(v, slot, msg))
        }
    }
}

/// A worker's output, read on two threads. Its stderr is shown as it comes (a long GPU
/// setup is visible while it runs), with the last lines kept for the error of a failed
/// rep; on stdout, other lines pass through and each result line is handed over as soon
/// as it arrives, so that a child that hangs on its way out cannot hold the run.
pub(super) struct Pipes {
    pub results: std::sync::mpsc::Receiver<String>,
    tail: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
    /// stdout's reader first: it hands over the last result line.
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pipes {
    /// Takes `child`'s piped stdout and stderr; `tag` starts every line passed through.
    pub fn read(child: &mut std::process::Child, tag: &str) -> Pipes {
        let tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let stderr = child.stderr.take().expect("piped");
        let (err_tag, err_tail) = (tag.to_string(), tail.clone());
        let err = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{err_tag} {line}");
                let mut t = err_tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_back(line);
                if t.len() > 5 {
                    t.pop_front();
                }
            }
        });
        let stdout = child.stdout.take().expect("piped");
        let (tx, results) = std::sync::mpsc::channel::<String>();
        let out_tag = tag.to_string();
        let out = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with(RESULT_PREFIX) {
                    if tx.send(line).is_err() {
                        return;
                    }
                } else if !line.trim().is_empty() {
                    eprintln!("{out_tag} {line}");
                }
            }
        });
        Pipes {
            results,
            tail,
            threads: vec![out, err],
        }
    }

    /// The last lines of stderr so far, joined.
    pub fn tail(&self) -> String {
        let t = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        Vec::from(t.clone()).join(" | ")
    }

    /// After the child is gone: waits for both pipes to end, and returns a result line
    /// not yet taken, and the last lines of stderr.
    pub fn finish(mut self) -> (Option<String>, String) {
        self.drain();
        (self.results.try_iter().next(), self.tail())
    }

    /// After the child (and its group) is gone: waits for both pipes to end, so that
    /// [`Pipes::tail`] holds everything it wrote.
    pub fn drain(&mut self) {
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
    }
}

pub(super) fn kill_group(child: &mut std::process::Child) {
    // SAFETY: kill(2) with a negative pid signals the process group the child leads.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    let _ = child.kill();
    let _ = child.wait();
}

/// How long a worker may take to exit after printing its result.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);
const POLL: std::time::Duration = std::time::Duration::from_millis(5);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_lines_pass_through_and_bad_result_lines_are_reported() {
        let good = serde_json::to_string(&WorkerResult {
            run: RunRow::sample(),
            spans: vec![SpanRow::sample()],
            gpu: RepTelemetry::default(),
            setup_ns: Default::default(),
            profile: None,
        })
        .unwrap();
        let out = format!("noise from C++\n{RESULT_PREFIX}{good}\nmore\n");
        let (rep, other) = parse_worker_output(&out).unwrap();
        assert_eq!(rep.spans.len(), 1);
        assert_eq!(other, vec!["noise from C++", "more"]);
        let bad = format!("x\n{RESULT_PREFIX}{{\"run\": 3\n");
        let e = parse_worker_output(&bad).unwrap_err();
        assert!(e.contains("line 2") && e.contains("malformed"), "{e}");
        assert!(parse_worker_output("just noise\n")
            .unwrap_err()
            .contains("no result line"));
    }

    #[test]
    fn gpu_telemetry_travels_in_the_result_line_and_older_lines_still_parse() {
        let mut gpu = RepTelemetry {
            collected: true,
            gpu_mem_used_end_bytes: Some(42),
            ..Default::default()
        };
        let mut a = crate::store::GpuActivityRow::sample();
        a.name = "_Z3msmv".into();
        gpu.activity.push(a);
        gpu.samples.push(crate::store::TelemetryRow::sample());
        let line = serde_json::to_string(&WorkerResult {
            run: RunRow::sample(),
            spans: vec![],
            gpu: gpu.clone(),
            setup_ns: [("supraseal/gpu".to_string(), 7_300_000_000u64)].into(),
            profile: None,
        })
        .unwrap();
        let (rep, _) = parse_worker_output(&format!("{RESULT_PREFIX}{line}\n")).unwrap();
        assert_eq!(rep.gpu, gpu);
        assert_eq!(rep.setup_ns["supraseal/gpu"], 7_300_000_000);
        // A worker of an older revision (variant with `rev`) sends no `gpu` field.
        let old = format!(
            "{RESULT_PREFIX}{{\"run\":{},\"spans\":[]}}\n",
            serde_json::to_string(&RunRow::sample()).unwrap()
        );
        let (rep, _) = parse_worker_output(&old).unwrap();
        assert_eq!(rep.gpu, RepTelemetry::default());
        assert!(rep.setup_ns.is_empty());
    }
}
