//! External subjects: programs gapscope did not build (`[workload] command = […]`).
//!
//! Each rep spawns the program once ([`child`]) in its variant's folder, in a process
//! group of its own, with `GAPSCOPE_SPAN_FD` naming a pipe for its span lines
//! ([`crate::protocol`]); its stdout and stderr are read for span lines too. Its spans
//! become the rep's rows under a root span `prove` ([`rows`]), so `summary`, `diff` and
//! `report` read an external run as they read the prover's. A build command runs once
//! per folder before the reps ([`build_subjects`]). Every span gets the program's CPU
//! time ([`cpu`]), the rep's CPU lane is the program's, and `profile = true` samples the
//! program's threads with the same sampler, attribution and files as gapscope's own.
//!
//! Before the first rep every variant's program (and `prepare`) is looked up
//! ([`programs`]); `prepare` runs before each rep, outside its window. Spans timed on
//! another clock than the span clock are named, with the fix, in the rep's notes
//! ([`clock`]).
//!
//! The folder of a variant is [`ResolvedVariant::subject_dir`] when set (a worktree of
//! the variant's revision), else the workload's `dir`, else gapscope's working directory.

pub mod child;
pub mod clock;
pub mod cpu;
pub mod gpu;
pub mod members;
pub mod programs;
pub mod rows;
pub mod shell;
pub mod streams;
pub mod trace_file;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

pub mod workload;

pub use super::workload_file::WorkloadFile;
pub use workload::CommandWorkload;

use super::rep::{finish_rows, other_process_parts, Answer, RepOutput, TelemetryWindow};
use super::schedule::Slot;
use super::spec::ResolvedVariant;
use crate::counters::CounterMode;
use crate::protocol::LineCounts;
use crate::store::{BuildMeta, CommandMeta, CommandVariantMeta, PhaseSpec, VariantMeta};
use crate::telemetry::{RepTelemetry, Telemetry};

/// One rep of an external subject, and what its span lines held.
#[derive(Debug)]
pub struct CommandRep {
    pub out: RepOutput,
    pub lines: LineCounts,
    /// A few unparseable lines (shortened), for the user.
    pub samples: Vec<String>,
    /// Where the rep's GPU activity came from, or why it has none (`cupti = true`, or
    /// `G` lines the program wrote itself).
    pub gpu_activity: Option<String>,
}

/// Runs one rep: spawns `ext.command` in the variant's folder with a limit of `timeout`
/// under a root span named `root` (the run folder's),
/// samples NVML around it when `telemetry` is given and the variant wants it (the CPU
/// lane then being the program's), counts perf events of the program and all its
/// threads unless the variant's counters are off, and samples its threads' stacks when
/// the variant's `profile` is on (events opened by `opener`).
/// A program that fails (non-zero exit, a signal, the limit) gives a failed rep with
/// the reason and its stderr's tail, never an error.
pub fn run_rep(
    ext: &CommandWorkload,
    root: &str,
    v: &ResolvedVariant,
    slot: Slot,
    timeout: Option<Duration>,
    telemetry: Option<&Telemetry>,
    opener: crate::profile::Opener,
) -> CommandRep {
    // Long because one rep's steps run in this order around the child's life (prepare,
    // the telemetry window, run, rows), each using the ones before. The window and the
    // last rows are every rep's (experiment/rep.rs); the rest is the program's own.
    let dir = ext.folder(v.subject_dir.as_deref());
    if let Some(p) = &ext.prepare {
        if let Err(why) = prepare(p, &dir, timeout) {
            return unbuilt_rep(v, slot, &why);
        }
    }
    let window = TelemetryWindow::open(telemetry, other_process_parts(v), v, slot);
    let command = v.command.as_ref().unwrap_or(&ext.command);
    let ask = v.profile.map(|hz| child::ProfileAsk { hz, opener });
    // Log patterns and the NVTX library; a failure fails this rep with the reason.
    let capture = match crate::capture::ChildCapture::prepare(&ext.capture) {
        Ok(c) => c,
        // (The window closes as it is dropped.)
        Err(why) => return unbuilt_rep(v, slot, &why),
    };
    let counters = v.counters != CounterMode::Off;
    let trace_before = ext
        .trace_file
        .as_deref()
        .map(|p| trace_file::before(&dir, p));
    let mut run = child::run_once(
        command,
        &dir,
        timeout,
        counters,
        ask,
        &capture,
        ext.span_cap(),
    );
    let clock_note = clock::diagnose(
        &run.spans,
        run.start_ns,
        run.end_ns,
        clock::realtime_offset_ns(),
    );
    // Log spans outside the rep were dropped when they were made, with their own reason
    // (gapscope timed them, so the span clock is not what to fix).
    // And the patterns' own time where lines were slow to match: the matcher's, said so.
    let log_note = run.log.as_ref().and_then(|l| match (&l.dropped, &l.slow) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.clone().or(b.clone()),
    });
    let clock_note = match (clock_note, log_note) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    let (mut gpu, started_utc) = window.close();
    if let (Some(t), true) = (telemetry, v.telemetry.nvml) {
        // The CPU lane is the program's, not gapscope's own (which mostly waits).
        let lane = crate::store::lanes::series::SOURCE_PROCESS_CPU;
        gpu.samples.retain(|r| r.source != lane);
        let period = t.period().as_nanos() as u64;
        gpu.samples
            .extend(run.cpu.lane_rows(slot.rep, &v.name, period));
    }
    let program = Path::new(&command[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| command[0].clone());
    let (mut spans, lines) = rows::rep_rows(&mut run, &program, root, slot.rep, &v.name);
    let trace_note = trace_before.map(|b| {
        let place = trace_file::RepPlace {
            rep: slot.rep,
            variant: &v.name,
            iteration: slot.iteration,
            start_ns: run.start_ns,
            end_ns: run.end_ns,
            realtime_offset_ns: clock::realtime_offset_ns(),
            root_thread: spans.first().map_or(0, |r| r.thread_id),
            root_id: rows::ROOT_ID,
            last_id: spans.iter().map(|r| r.span_id).max().unwrap_or(0),
        };
        let names = match ext.capture.names() {
            Ok(n) => n,
            Err(why) => return Some(why),
        };
        match trace_file::read(&b, &place, &names, trace_file::MAX_BYTES) {
            Ok(t) if spans.len() + t.spans.len() > ext.span_cap() => Some(format!(
                "trace_file: {} spans, more than a rep keeps with the program's {} \
                 (max_spans_per_rep = {}): none taken; trace fewer steps per rep",
                t.spans.len(),
                spans.len(),
                ext.span_cap()
            )),
            Ok(t) => {
                let note = t.note.clone();
                let activity = trace_file::merge(&mut spans, t);
                if !activity.is_empty() {
                    gpu.activity.extend(activity);
                    gpu.collected = true;
                }
                note
            }
            Err(why) => Some(why),
        }
    });
    let gpu_activity = gpu_rows(&run, &capture, slot.rep, &v.name, &mut gpu);
    let root_notes = [
        (clock::ATTR, clock_note),
        ("gpu_activity", gpu_activity.clone()),
        ("trace_file", trace_note.flatten()),
    ];
    if let Some(root) = spans.first_mut() {
        // On the root span, so that `gapscope run` says it at the end (and it stays).
        if let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str(&root.attrs) {
            for (k, note) in root_notes {
                if let Some(note) = note {
                    m.insert(k.into(), note.into());
                }
            }
            root.attrs = serde_json::Value::Object(m).to_string().into();
        }
    }
    let profile = run.sampled.take().map(|s| {
        let iv: Vec<_> = spans
            .iter()
            .map(crate::profile::SpanInterval::from)
            .collect();
        s.attribute(slot.rep, &v.name, &iv, rows::ROOT_ID)
    });
    let answer = Answer {
        trace_id: rows::ROOT_ID,
        checked: rows::checked(&run),
        started_utc,
        pid: run.pid,
        rss_end_bytes: None,
    };
    // (The GPU's busy time once, over the program's own records and its trace's alike.)
    let row = finish_rows(telemetry, v, slot, &mut spans, &gpu, answer);
    CommandRep {
        out: RepOutput {
            run: row,
            spans,
            gpu,
            setup_ns: BTreeMap::new(),
            profile,
        },
        lines,
        samples: run.samples,
        gpu_activity,
    }
}

/// The program's GPU activity into the rep's rows (`gpu`), marked collected when a
/// collector ran; returns where the rows came from (`None` when nothing was asked and
/// nothing came).
fn gpu_rows(
    run: &child::ChildRun,
    capture: &crate::capture::ChildCapture,
    rep: u32,
    variant: &str,
    gpu: &mut RepTelemetry,
) -> Option<String> {
    let own = run.gpu.activity.len();
    let library = match (&capture.cupti, own) {
        (Some(lib), _) => lib.clone(),
        (None, 0) => return None,
        (None, _) => PathBuf::new(),
    };
    let g = gpu::rep_gpu(&run.gpu, rep, variant, (run.start_ns, run.end_ns), &library);
    let status = if capture.cupti.is_some() {
        g.status
    } else {
        format!(
            "the program's own G lines: {} record(s){}",
            g.rows.len(),
            if g.outside > 0 {
                format!(", {} outside the rep dropped", g.outside)
            } else {
                String::new()
            }
        )
    };
    let collected = g.collected || capture.cupti.is_none();
    gpu.activity.extend(g.rows);
    if collected {
        gpu.collected = true;
    }
    Some(status)
}

/// The rep of a variant whose build failed: failed, with the build's reason.
pub fn unbuilt_rep(v: &ResolvedVariant, slot: Slot, why: &str) -> CommandRep {
    CommandRep {
        out: RepOutput::failed(v, slot, why.to_string()),
        lines: LineCounts::default(),
        samples: Vec::new(),
        gpu_activity: None,
    }
}

/// Runs a workload's `prepare` in `dir` before a rep, killed past `timeout`; the error
/// is the reason its rep fails.
fn prepare(argv: &[String], dir: &Path, timeout: Option<Duration>) -> Result<(), String> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Whatever the step started ends with it (the group), however this function returns.
    let mut group = crate::procs::lifeline::step_in_group(&mut cmd);
    let shown = argv.join(" ");
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("prepare ({shown}) cannot start in {}: {e}", dir.display()))?;
    // Read to its end on a thread of its own, so that a chatty prepare never blocks on a
    // full pipe; only the last lines are kept.
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    if let Some(mut e) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut tail: Vec<u8> = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = std::io::Read::read(&mut e, &mut buf) {
                if n == 0 {
                    break;
                }
                tail.extend_from_slice(&buf[..n]);
                let cut = tail.len().saturating_sub(1 << 14);
                tail.drain(..cut);
            }
            let _ = tx.send(tail);
        });
    }
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if timeout.is_some_and(|t| started.elapsed() > t) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "prepare ({shown}) did not finish in {} s (rep_timeout_s) and was killed",
                    timeout.unwrap_or_default().as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("prepare ({shown}): cannot wait for it: {e}")),
        }
    };
    group.end();
    if status.success() {
        return Ok(());
    }
    // (A process it left behind may hold its stderr open: wait a little, not forever.)
    let err = rx.recv_timeout(Duration::from_secs(2)).unwrap_or_default();
    let text = String::from_utf8_lossy(&err);
    let tail: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &tail[tail.len().saturating_sub(BUILD_TAIL)..];
    Err(format!(
        "prepare ({shown}) exited with {status}; the rep was not run; stderr ends: {}",
        tail.join(" | ")
    ))
}

/// Looks up every variant's program and the workload's `prepare` before the first rep
/// (after the builds, which may make them); `unbuilt` says which variants' builds
/// failed (their reps fail with the build's reason instead).
pub fn check_programs(
    ext: &CommandWorkload,
    variants: &[ResolvedVariant],
    unbuilt: &[Option<String>],
) -> Result<(), programs::ProgramProblem> {
    for (v, failed) in variants.iter().zip(unbuilt) {
        if failed.is_some() {
            continue;
        }
        let dir = ext.folder(v.subject_dir.as_deref());
        let command = v.command.as_ref().unwrap_or(&ext.command);
        if let Some(why) = shell::span_fd_override(command) {
            return Err(programs::ProgramProblem::SpanFd {
                variant: v.name.clone(),
                why,
            });
        }
        let asks = [
            ("program", Some(command)),
            ("prepare program", ext.prepare.as_ref()),
        ];
        for (label, argv) in asks {
            let Some(argv) = argv else { continue };
            if let Some((what, program, why)) = programs::missing(argv, &dir) {
                return Err(programs::ProgramProblem::Missing(
                    programs::MissingProgram {
                        variant: v.name.clone(),
                        what: if label == "program" { what } else { label },
                        program,
                        why,
                        dir: dir.display().to_string(),
                    },
                ));
            }
        }
    }
    Ok(())
}

/// Lines of a failed build's log quoted in its reps' errors.
const BUILD_TAIL: usize = 10;

/// Runs `build` in `dir`, its stdout and stderr into `log`.
pub fn build_in(build: &[String], dir: &Path, log: &Path) -> BuildMeta {
    let started = std::time::Instant::now();
    let status = (|| -> std::io::Result<std::process::ExitStatus> {
        let f = crate::fsx::create_fresh(log).map_err(crate::fsx::WriteError::into_io)?;
        let mut cmd = Command::new(&build[0]);
        cmd.args(&build[1..])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(f.try_clone()?)
            .stderr(f);
        // Its processes end with it (the group, dropped here), and with gapscope however
        // gapscope ends.
        let _group = crate::procs::lifeline::step_in_group(&mut cmd);
        cmd.status()
    })();
    let (ok, status) = match status {
        Ok(s) => (s.success(), s.to_string()),
        Err(e) => (
            false,
            format!("cannot run {:?} in {}: {e}", build[0], dir.display()),
        ),
    };
    BuildMeta {
        ok,
        wall_ns: started.elapsed().as_nanos() as u64,
        log: log.display().to_string(),
        status,
        reused: false,
    }
}

/// Builds of revisions' worktrees done by this process, by (worktree, build command):
/// the worktree's `.git` file as it was when built (a worktree made again has a new one,
/// and its build outputs are gone), the outcome, and the log's text.
type Builds = HashMap<(PathBuf, Vec<String>), (Option<SystemTime>, BuildMeta, Vec<u8>)>;
static REV_BUILDS: Mutex<Option<Builds>> = Mutex::new(None);

fn worktree_stamp(dir: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(dir.join(".git"))
        .and_then(|m| m.modified())
        .ok()
}

/// The outcome of this process's earlier `build` in a revision's worktree `dir`, its
/// log copied to `log`: a commit's files do not change, so a bisect builds each commit
/// once however many of its steps run it (the good end is in every step). `None` when
/// there was none, or the worktree was made again since (its `.git` file is new).
fn earlier_build(build: &[String], dir: &Path, log: &Path) -> Option<BuildMeta> {
    let builds = REV_BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    let (at, meta, text) = builds.as_ref()?.get(&(dir.to_path_buf(), build.to_vec()))?;
    let stamp = worktree_stamp(dir);
    (stamp.is_some() && *at == stamp && crate::fsx::write_file(log, text).is_ok()).then(|| {
        BuildMeta {
            log: log.display().to_string(),
            reused: true,
            ..meta.clone()
        }
    })
}

/// The revision's worktree this process built last with success, and its build
/// command: the next revision's worktree is seeded from it ([`seed_from_last`]).
static LAST_BUILT: Mutex<Option<(PathBuf, Vec<String>)>> = Mutex::new(None);

/// Seeds the new worktree `dir` from the one built last with the same `build`
/// ([`crate::revisions::seed_worktree`]): its outputs, and the times of the files the two
/// commits share, so that the build redoes only what the commits' difference touches,
/// as after `git checkout` in one folder. `None`: nothing to seed from (or it failed).
fn seed_from_last(build: &[String], dir: &Path) -> Option<(PathBuf, crate::revisions::Seeded)> {
    let (from, cmd) = LAST_BUILT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()?;
    if cmd != build || from == dir || !from.is_dir() {
        return None;
    }
    let seeded = crate::revisions::seed_worktree(&from, dir).ok()?;
    Some((from, seeded))
}

/// Keeps a revision's build for [`earlier_build`].
fn remember_build(build: &[String], dir: &Path, meta: &BuildMeta, log: &Path) {
    let text = std::fs::read(log).unwrap_or_default();
    let mut builds = REV_BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    builds.get_or_insert_with(HashMap::new).insert(
        (dir.to_path_buf(), build.to_vec()),
        (worktree_stamp(dir), meta.clone(), text),
    );
}

/// Rewrites build log `log` with its paths as the run folder's are written. A log that
/// cannot be read or written back stays as the build left it.
fn portable_log(log: &Path, paths: &crate::store::paths::PathBases) {
    let Ok(bytes) = std::fs::read(log) else {
        return;
    };
    let text = String::from_utf8_lossy(&bytes);
    let portable = paths.text(&text);
    if portable != text {
        let _ = crate::fsx::write_file(log, portable.as_bytes());
    }
}

/// Why the reps of a variant whose build failed fail.
pub fn build_failure(b: &BuildMeta) -> String {
    let text = build_log_tail(Path::new(&b.log)).unwrap_or_else(|e| e.to_string());
    let text = crate::markup::terminal_text(&String::from_utf8_lossy(text.as_bytes()));
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(BUILD_TAIL)..];
    format!(
        "build failed ({}); log {} ends: {}",
        b.status,
        b.log,
        tail.join(" | ")
    )
}

/// The last [`BUILD_LOG_TAIL_BYTES`] of a build log: a log a run folder names may be
/// any file, so it is opened as every file of a run folder is (no link, only a regular
/// file, never waiting on a FIFO) and never read whole.
fn build_log_tail(path: &Path) -> Result<String, crate::fsx::ReadError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = crate::fsx::read::open_no_follow(path)?;
    let io = |e: std::io::Error| crate::fsx::ReadError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let len = f.metadata().map_err(io)?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(BUILD_LOG_TAIL_BYTES)))
        .map_err(io)?;
    let mut bytes = Vec::new();
    f.take(BUILD_LOG_TAIL_BYTES)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The most of a failed build's log read for its tail.
const BUILD_LOG_TAIL_BYTES: u64 = 64 << 10;

/// Builds every variant's folder once (variants sharing a folder share its build), the
/// logs in `run_dir` as `build-<variant>.log`, and says what the run's meta.json records
/// of each variant. Per variant: `None` when it can run, else why its reps fail.
/// With `paths`, each log's paths are then written as the run folder's are
/// (`store::paths`): a compiler's output names the machine's folders.
pub fn build_subjects(
    ext: &CommandWorkload,
    variants: &[ResolvedVariant],
    run_dir: &Path,
    progress: bool,
    paths: Option<&crate::store::paths::PathBases>,
) -> (CommandMeta, Vec<Option<String>>) {
    // Long because every folder is built once, in the variants' order, and each
    // variant's meta.json record and failure come from its folder's one build (reused,
    // seeded, or retried clean): the loop keeps those builds by folder.
    let mut meta = CommandMeta {
        command: ext.command.clone(),
        build: ext.build.clone(),
        protocol: String::from_utf8_lossy(crate::protocol::PREFIX)
            .trim()
            .to_string(),
        span_fd_env: crate::emit::FD_ENV.into(),
        variants: BTreeMap::new(),
    };
    let mut built: BTreeMap<PathBuf, BuildMeta> = BTreeMap::new();
    let mut failures = Vec::new();
    for v in variants {
        let dir = ext.folder(v.subject_dir.as_deref());
        let mut failure = None;
        if !dir.is_dir() {
            failure = Some(format!(
                "the subject's folder {} does not exist (workload.dir, or the variant's \
                 revision)",
                dir.display()
            ));
        }
        let build = match (&ext.build, &failure) {
            (Some(b), None) => {
                let m = built.entry(dir.clone()).or_insert_with(|| {
                    let log = run_dir.join(crate::store::build_log(&v.name));
                    let revision = v.rev.is_some() && v.subject_dir.is_some();
                    let shown = || format!("{} in {}", b.join(" "), dir.display());
                    if let Some(m) = revision.then(|| earlier_build(b, &dir, &log)).flatten() {
                        if progress {
                            eprintln!("{}: built earlier by this process", shown());
                        }
                        return m;
                    }
                    if progress {
                        eprintln!("building {}", shown());
                    }
                    let seeded = revision.then(|| seed_from_last(b, &dir)).flatten();
                    if let (true, Some((from, s))) = (progress, &seeded) {
                        eprintln!(
                            "  seeded from {}: {} outputs copied, {} files differ",
                            from.display(),
                            s.copied,
                            s.changed
                        );
                    }
                    let mut m = build_in(b, &dir, &log);
                    if !m.ok && seeded.is_some() {
                        // Outputs of another commit can fail a build that a clean tree
                        // passes (a build folder that records its path): once more, clean.
                        let first = m.wall_ns;
                        if crate::revisions::clean_worktree(&dir).is_ok() {
                            m = build_in(b, &dir, &log);
                            m.wall_ns += first;
                        }
                    }
                    if revision && m.ok {
                        *LAST_BUILT.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some((dir.clone(), b.to_vec()));
                    }
                    if let Some(p) = paths {
                        portable_log(&log, p);
                    }
                    if revision {
                        remember_build(b, &dir, &m, &log);
                    }
                    m
                });
                if !m.ok {
                    failure = Some(build_failure(m));
                }
                Some(m.clone())
            }
            _ => None,
        };
        meta.variants.insert(
            v.name.clone(),
            CommandVariantMeta {
                dir: dir.display().to_string(),
                build,
                ..Default::default()
            },
        );
        failures.push(failure);
    }
    (meta, failures)
}

/// The backend a command workload's variants record in meta.json (its command is in
/// meta.json's `external`).
pub const WORKLOAD_KIND: &str = crate::store::command::COMMAND_WORKLOAD;

/// meta.json's `phases` of a command workload: its root ([`rows::ROOT`], spawn to
/// exit), and the wrapper and inner spans the experiment names in `[workload] gaps`;
/// the program's own spans are its phases.
pub fn phase_spec(gaps: Option<&crate::store::GapsSpec>) -> PhaseSpec {
    let mut p = PhaseSpec::root_only(rows::ROOT);
    if let Some(g) = gaps {
        p.wrapper = Some(g.wrapper.clone());
        p.inner = g.inner.clone();
    }
    p
}

/// meta.json's record of a variant of a command workload: its knobs are telemetry, the
/// command it runs, and the folder override (set for a variant of another revision).
pub fn variant_meta(v: &ResolvedVariant, ext: &CommandWorkload, counters: String) -> VariantMeta {
    let mut knobs = BTreeMap::new();
    knobs.insert("telemetry".into(), v.telemetry.as_str().into());
    // The command it ran (its own, else the workload's), so that a diff's title names
    // the difference between two variants' commands.
    let command = v.command.as_ref().unwrap_or(&ext.command);
    knobs.insert("command".into(), command.join(" "));
    if let Some(d) = &v.subject_dir {
        knobs.insert("subject_dir".into(), d.display().to_string());
    }
    if let Some(rev) = &v.rev {
        knobs.insert("rev".into(), rev.clone());
    }
    VariantMeta {
        name: v.name.clone(),
        backend: WORKLOAD_KIND.into(),
        knobs,
        counters: Some(counters),
        scope: None,
        revision: None,
        patches: Vec::new(),
        patch_failed: None,
    }
}

/// Unparseable lines meta.json keeps per variant, as examples.
const EXAMPLES: usize = 3;

/// Adds a rep's line counts (and the first unparseable lines) to its variant's in
/// meta.json's `external`.
pub fn record_lines(meta: Option<&mut CommandMeta>, v: &ResolvedVariant, rep: &CommandRep) {
    // Reps whose program ran: the ones with a root span (not those of a failed build).
    if rep.out.spans.is_empty() {
        return;
    }
    if let Some(m) = meta.and_then(|m| m.variants.get_mut(&v.name)) {
        m.lines.add(&rep.lines);
        m.reps += 1;
        if rep.gpu_activity.is_some() {
            m.gpu_activity.clone_from(&rep.gpu_activity);
        }
        for e in &rep.samples {
            if m.examples.len() < EXAMPLES {
                m.examples.push(format!("rep {}: {e}", rep.out.run.rep));
            }
        }
    }
}

/// Carries the line counts of a resumed run's finished reps into its fresh `external`.
pub fn keep_line_counts(
    meta: Option<&mut CommandMeta>,
    kept: BTreeMap<String, CommandVariantMeta>,
    run_dir: &Path,
) {
    let Some(m) = meta else { return };
    if kept.is_empty() {
        return;
    }
    for (name, old) in kept {
        if let Some(v) = m.variants.get_mut(&name) {
            v.lines = old.lines;
            v.reps = old.reps;
            v.examples = old.examples;
            v.gpu_activity = old.gpu_activity;
        }
    }
    // meta.json is written before a rep's row commits it: a run killed in between
    // counted a rep that `--resume` runs again. The committed reps' root spans carry
    // their own counts; where the folder reads back, those are the truth.
    if let Ok(data) = crate::store::RunData::load(run_dir) {
        for v in m.variants.values_mut() {
            v.lines = LineCounts::default();
            v.reps = 0;
        }
        for root in data.spans.iter().filter(|s| s.parent_id.is_none()) {
            if let Some(v) = m.variants.get_mut(root.variant.as_str()) {
                v.lines.add(&rows::counts_of_root(&root.attrs));
                v.reps += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests;
