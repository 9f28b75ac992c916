//! Sampled stacks (`profile = true`): which functions the CPU ran during each span, on
//! every thread of the process, including threads a C/C++ library started.
//!
//! `sampler` samples a target process's threads (the kernel's cpu-clock event with call
//! chains): this process, or an external program's; `symbolize` names this process's
//! addresses, `child_symbols` another process's from its `maps` and files; `attribute`
//! gives each sample to a span of the rep by its timestamp and thread; `folded` writes and reads the per-rep files of
//! the run folder; `flame` draws flame graphs (plain and differential) from them.
//! Depends on `trace` only (ARCHITECTURE.md); the experiment drives it, the report and
//! the diff read its files.

pub mod attribute;
pub mod child_symbols;
pub mod flame;
pub mod folded;
pub mod maps;
pub mod sampler;
pub mod symbolize;

use serde::{Deserialize, Serialize};

pub use attribute::SpanInterval;
pub use sampler::{Opener, Target};

/// Default sampling rate (per second of each thread's CPU time).
pub const DEFAULT_HZ: u32 = 1000;
/// Highest rate an experiment may ask for.
pub const MAX_HZ: u32 = 10_000;

/// Samples of one (span, own/foreign, stack).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldedRow {
    pub span_id: u64,
    pub span: String,
    /// The sample ran on a thread with no span of its own open (counted to the prove
    /// thread's innermost span).
    pub foreign: bool,
    /// Frames, outermost first.
    pub frames: Vec<String>,
    pub count: u64,
}

/// How a rep's samples were attributed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileCounts {
    pub samples: u64,
    /// On the span's own thread.
    pub own: u64,
    /// On another thread, counted to the prove thread's innermost span.
    pub foreign: u64,
    /// Before or after the rep's root span.
    pub outside: u64,
}

/// One rep's profile: where it stands and what it found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepProfile {
    pub rep: u32,
    pub variant: String,
    pub hz: u32,
    /// `None`: sampled. `Some(reason)`: sampling was unavailable; the rep's other data
    /// is recorded as usual.
    pub unavailable: Option<String>,
    pub counts: ProfileCounts,
    /// Samples the kernel dropped (a ring buffer was full).
    pub lost: u64,
    /// Threads sampled, and threads whose event could not be opened.
    pub threads: usize,
    pub threads_failed: usize,
    /// The build kept frame pointers (`-C force-frame-pointers=yes`): without them a
    /// stack's innermost frame is right but callers above it can be missing.
    #[serde(default)]
    pub frame_pointers: bool,
    /// CPU time of the sampler's own thread over the rep, in ns (not sampled itself).
    #[serde(default)]
    pub sampler_cpu_ns: u64,
    /// Why the first of `threads_failed` could not be sampled (e.g. the locked-memory
    /// limit for ring buffers, kernel.perf_event_mlock_kb, when not root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_failure: Option<String>,
    /// The sampled process was an external program (not gapscope's own): its frame
    /// pointers are its build's business, and its names come from its symbol tables.
    #[serde(
        rename = "external",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub of_program: bool,
    /// Stacks (folded rows) not written, and the samples they counted: a rep with more
    /// distinct stacks than the folded file's readers take ([`folded::MAX_FOLDED_BYTES`])
    /// keeps those with the most samples.
    #[serde(default, skip_serializing_if = "LeftOut::is_none")]
    pub left_out: LeftOut,
    #[serde(skip)]
    pub rows: Vec<FoldedRow>,
}

/// Stacks a rep's folded file does not hold ([`RepProfile::left_out`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    pub stacks: u64,
    pub samples: u64,
}

impl LeftOut {
    pub fn is_none(&self) -> bool {
        self.stacks == 0
    }
}

impl RepProfile {
    /// Where sampling stands, for meta.json: "sampled at H Hz" or "unavailable: why".
    pub fn status(&self) -> String {
        match &self.unavailable {
            Some(why) => format!("unavailable: {why}"),
            None if self.of_program => format!(
                "sampled at {} Hz (the program's threads; names from its symbol tables, \
                 callers above a stack's innermost frame need frame pointers in its build)",
                self.hz
            ),
            None if self.frame_pointers => format!("sampled at {} Hz", self.hz),
            None => format!(
                "sampled at {} Hz; this build has no frame pointers, so callers above a \
                 stack's innermost frame can be missing (docs/sampled-stacks.md)",
                self.hz
            ),
        }
    }

    /// One line for the run's output and the summary.
    pub fn describe(&self) -> String {
        match &self.unavailable {
            Some(why) => format!("sampled stacks unavailable: {why}"),
            None => format!(
                "{} samples at {} Hz on {} threads{} ({} on other threads, {} outside the rep, {} lost); \
                 the sampler's thread used {:.1} ms of CPU",
                self.counts.samples,
                self.hz,
                self.threads,
                match &self.thread_failure {
                    Some(why) => format!(" ({} not sampled: {why})", self.threads_failed),
                    None => String::new(),
                },
                self.counts.foreign,
                self.counts.outside,
                self.lost,
                self.sampler_cpu_ns as f64 / 1e6
            ) + &if self.left_out.is_none() {
                String::new()
            } else {
                format!(
                    "; {} stacks ({} samples) not written, the file keeping those with the \
                     most samples within what its readers take",
                    self.left_out.stacks, self.left_out.samples
                )
            },
        }
    }
}

/// Whether this build's Rust code keeps frame pointers (build.rs reads RUSTFLAGS).
pub fn frame_pointers() -> bool {
    env!("GAPSCOPE_FRAME_POINTERS") == "1"
}

/// Sampling around one rep: [`RepSampling::begin`] before the proving,
/// [`RepSampling::finish`] after its spans are drained. For an external program,
/// [`RepSampling::begin_target`] on its pid, [`RepSampling::stop`] once it exited (before
/// it is reaped, so that its pid cannot be another process's yet), and
/// [`Sampled::attribute`] once its spans are known.
pub struct RepSampling {
    hz: u32,
    sampler: Result<sampler::Sampler, String>,
}

/// A stopped sampling window, not yet given to spans.
#[derive(Debug)]
pub struct Sampled {
    hz: u32,
    raw: Result<sampler::RawProfile, String>,
}

impl RepSampling {
    /// Starts sampling every thread of this process; never fails (an unavailable sampler
    /// is recorded by `finish`).
    pub fn begin(hz: u32, opener: Opener) -> RepSampling {
        Self::begin_target(Target::this_process(), hz, opener)
    }

    /// Starts sampling every thread of `target` (this process or another).
    pub fn begin_target(target: Target, hz: u32, opener: Opener) -> RepSampling {
        RepSampling {
            hz,
            sampler: sampler::Sampler::start(target, hz, opener),
        }
    }

    /// Stops sampling and attributes the samples to `spans` (`root`: the rep's root span).
    pub fn finish(self, rep: u32, variant: &str, spans: &[SpanInterval], root: u64) -> RepProfile {
        self.stop().attribute(rep, variant, spans, root)
    }

    /// Stops sampling; the samples wait for their spans.
    pub fn stop(self) -> Sampled {
        Sampled {
            hz: self.hz,
            raw: self.sampler.map(sampler::Sampler::stop),
        }
    }
}

impl Sampled {
    /// Sampling that never started (`why`).
    pub fn unavailable(hz: u32, why: String) -> Sampled {
        Sampled { hz, raw: Err(why) }
    }

    /// Attributes the samples to `spans` (`root`: the rep's root span), naming this
    /// process's addresses in-process and another's from the maps read while it ran.
    pub fn attribute(
        self,
        rep: u32,
        variant: &str,
        spans: &[SpanInterval],
        root: u64,
    ) -> RepProfile {
        let mut p = RepProfile {
            rep,
            variant: variant.to_string(),
            hz: self.hz,
            unavailable: None,
            counts: ProfileCounts::default(),
            lost: 0,
            threads: 0,
            threads_failed: 0,
            frame_pointers: frame_pointers(),
            sampler_cpu_ns: 0,
            thread_failure: None,
            of_program: false,
            left_out: Default::default(),
            rows: Vec::new(),
        };
        match self.raw {
            Err(why) => p.unavailable = Some(why),
            Ok(raw) => {
                let mut sym: Box<dyn symbolize::Symbolizer> = match raw.maps.clone() {
                    None => Box::new(symbolize::InProcess),
                    Some(maps) => {
                        p.of_program = true;
                        p.frame_pointers = false;
                        Box::new(child_symbols::ChildProcess::new(maps))
                    }
                };
                let (rows, counts) = attribute::attribute(spans, root, &raw.samples, &mut *sym);
                p.rows = rows;
                p.counts = counts;
                p.lost = raw.lost;
                p.threads = raw.threads;
                p.threads_failed = raw.threads_failed;
                p.sampler_cpu_ns = raw.sampler_cpu_ns;
                p.thread_failure = raw.first_failure;
            }
        }
        p
    }
}

/// The summary's lines on sampled stacks: per variant in `statuses` (meta.json's
/// `profile`), its status and the median samples per rep, and the share of them taken
/// on threads with no span of their own.
pub fn summary_lines(
    run_dir: &std::path::Path,
    statuses: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    if statuses.is_empty() {
        return Vec::new();
    }
    let reps = folded::read_run(run_dir, false).unwrap_or_default();
    let mut out = Vec::new();
    for (variant, status) in statuses {
        let mut n: Vec<u64> = reps
            .iter()
            .filter(|p| &p.variant == variant && p.unavailable.is_none())
            .map(|p| p.counts.own + p.counts.foreign)
            .collect();
        let foreign: u64 = reps
            .iter()
            .filter(|p| &p.variant == variant)
            .map(|p| p.counts.foreign)
            .sum();
        let total: u64 = n.iter().sum();
        let mut own_cpu: Vec<u64> = reps
            .iter()
            .filter(|p| &p.variant == variant && p.unavailable.is_none())
            .map(|p| p.sampler_cpu_ns)
            .collect();
        own_cpu.sort_unstable();
        let own_cpu_ms = own_cpu
            .get(own_cpu.len().saturating_sub(1) / 2)
            .map_or(0.0, |&ns| ns as f64 / 1e6);
        n.sort_unstable();
        let line = match n.get(n.len().saturating_sub(1) / 2) {
            Some(med) if !n.is_empty() => format!(
                "sampled stacks ({variant}): {status}; {} reps, median {med} samples per rep in \
                 its spans, {:.0}% on threads with no span of their own, {own_cpu_ms:.1} ms of \
                 CPU per rep in the sampler's own thread; files in stacks/",
                n.len(),
                100.0 * foreign as f64 / total.max(1) as f64
            ),
            _ => format!("sampled stacks ({variant}): {status}"),
        };
        out.push(line);
    }
    out
}

impl From<&crate::trace::SpanRecord> for SpanInterval {
    fn from(s: &crate::trace::SpanRecord) -> Self {
        SpanInterval {
            id: s.id,
            name: s.name.to_string(),
            thread_id: s.thread_id,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        }
    }
}

impl From<&crate::store::SpanRow> for SpanInterval {
    fn from(r: &crate::store::SpanRow) -> Self {
        SpanInterval {
            id: r.span_id,
            name: r.name.to_string(),
            thread_id: r.thread_id,
            start_ns: r.start_ns,
            end_ns: r.end_ns,
        }
    }
}

#[cfg(test)]
mod tests;
