//! The experiment file's `[run]` table: reps, warm-ups, their order, the process that
//! runs them, and the defaults every variant starts from.

use serde::{Deserialize, Serialize};

use crate::counters::CounterMode;

/// Most measured reps per variant (`reps`, `--reps`): far past what a comparison needs,
/// and a schedule of them stays small.
pub const MAX_REPS: u32 = 100_000;
/// Most warm-ups per variant.
pub const MAX_WARMUPS: u32 = 10_000;
/// Most slots a schedule holds (variants × (warm-ups + reps)), checked when the
/// experiment is read, before anything is built.
pub const MAX_SCHEDULE_SLOTS: u64 = 1_000_000;
/// Longest `rep_timeout_s`: 30 days. A deadline past it is no deadline, and one near
/// 2^64 s would overflow the clock.
pub const MAX_REP_TIMEOUT_S: u64 = 30 * 24 * 3600;

/// `1`, as a serde default (warm-ups here, the batch of a workload).
pub(super) fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// ABAB…: every iteration runs the variants in the same order.
    Interleaved,
    /// ABBA…: even iterations run the variants in order, odd ones in reverse, so that no
    /// variant always runs first (or always follows the same one). A carry-over from one
    /// rep to the next (allocator state, caches, a background task) then lands on every
    /// variant alike and cancels in the paired comparison of `gapscope diff`.
    Counterbalanced,
    /// `block` reps of one variant in a row, then `block` of the next (AAAABBBBBBBBAAAA…,
    /// blocks counterbalanced like iterations): most reps follow a rep of their own
    /// variant, as in a run of that variant alone, while the blocks still alternate
    /// often enough to pair against the machine's drift. For effects that one rep
    /// leaves on the next.
    Blocks,
    Sequential,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessPolicy {
    /// Every rep in the runner's own process (variants of other builds: a worker per rep).
    Shared,
    /// A fresh worker process per rep.
    PerRep,
    /// One worker process per variant, set up once, serving all of its reps
    /// (`experiment::served`).
    PerVariant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPolicy {
    #[serde(default = "five")]
    pub reps: u32,
    #[serde(default = "one")]
    pub warmups: u32,
    #[serde(default = "interleaved")]
    pub order: Order,
    #[serde(default = "shared")]
    pub process: ProcessPolicy,
    /// Default counter source of every variant (a variant's `counters` overrides it).
    #[serde(default = "hardware")]
    pub counters: CounterMode,
    /// NVML sampling period of GPU telemetry.
    #[serde(default = "telemetry_period_ms")]
    pub telemetry_period_ms: u64,
    /// A rep still running after this many seconds is recorded as failed (a hung GPU
    /// call must not stall the run). With `process = "per_rep"` its worker is killed and
    /// the run goes on; with `process = "shared"` (which cannot abandon a call that never
    /// returns) the run stops after recording it, and `--resume` goes on. Shared
    /// processes apply the limit to backend setup too.
    #[serde(default)]
    pub rep_timeout_s: Option<u64>,
    /// Return the allocator's free memory to the kernel (`malloc_trim`) before every rep,
    /// so that no rep inherits the heap another left behind (each then faults its memory
    /// in afresh). Every rep's `prove` span carries the heap's figures either way.
    #[serde(default)]
    pub heap_trim: bool,
    /// Reps per block with `order = "blocks"` (default 5).
    #[serde(default)]
    pub block: Option<u32>,
    /// Default of every variant's `profile`: sampled stacks during the reps.
    #[serde(default)]
    pub profile: bool,
    /// Default of every variant's `profile_hz`.
    #[serde(default)]
    pub profile_hz: Option<u32>,
    /// Process CPU time per span: "interpolated" from 1 kHz samples (default, no system
    /// call in a span) or "exact" (two CLOCK_PROCESS_CPUTIME_ID reads per span).
    #[serde(default)]
    pub process_cpu: crate::trace::ProcessCpuMode,
    /// With `process = "per_variant"`: a variant's worker is let go after this many
    /// measured reps and the next rep starts a new one, which first runs `warmups`
    /// unrecorded warm-ups. State a process carries for its whole life (where the heap
    /// put the big vectors, GPU memory placement) is then spread over several processes
    /// per variant and becomes noise the interval covers, instead of a bias bound to one
    /// variant that pairing cannot cancel. None: one worker per variant for the run.
    #[serde(default)]
    pub reps_per_worker: Option<u32>,
    /// Keep every path in the run folder as this machine has it, instead of relative to
    /// the run folder or the repository with `~` for the home folder (`store::paths`).
    #[serde(default)]
    pub absolute_paths: bool,
}

fn telemetry_period_ms() -> u64 {
    crate::telemetry::DEFAULT_PERIOD_MS
}

fn five() -> u32 {
    5
}
fn interleaved() -> Order {
    Order::Interleaved
}
fn shared() -> ProcessPolicy {
    ProcessPolicy::Shared
}
fn hardware() -> CounterMode {
    CounterMode::Hardware
}

impl RunPolicy {
    /// The upper bounds of reps, warm-ups, the schedule of `variants` variants and the
    /// rep timeout, checked when the experiment is read: a schedule of 4e9 reps is an
    /// error at once, never a process that builds it until the kernel kills it.
    pub(super) fn check_bounds(&self, variants: usize) -> Result<(), String> {
        if let Some(t) = self.rep_timeout_s.filter(|&t| t > MAX_REP_TIMEOUT_S) {
            return Err(format!(
                "run.rep_timeout_s = {t} is more than {MAX_REP_TIMEOUT_S} (30 days): use a \
                 shorter limit, or leave it out for none"
            ));
        }
        if self.reps > MAX_REPS {
            return Err(format!(
                "run.reps = {} is more than {MAX_REPS}: use fewer reps (or several runs)",
                self.reps
            ));
        }
        if self.warmups > MAX_WARMUPS {
            return Err(format!(
                "run.warmups = {} is more than {MAX_WARMUPS}: use fewer warm-ups",
                self.warmups
            ));
        }
        match (self.reps_per_worker, self.process) {
            (Some(0), _) => {
                return Err(
                    "run.reps_per_worker must be at least 1 (measured reps per worker \
                            process)"
                        .into(),
                )
            }
            (Some(_), ProcessPolicy::PerVariant) | (None, _) => {}
            (Some(_), _) => {
                return Err(
                    "run.reps_per_worker applies only to process = \"per_variant\"; \
                            set that process, or remove it"
                        .into(),
                )
            }
        }
        let slots = variants as u64 * (u64::from(self.reps) + u64::from(self.warmups));
        if slots > MAX_SCHEDULE_SLOTS {
            return Err(format!(
                "the schedule would hold {slots} reps ({variants} variants × ({} reps + {} \
                 warm-ups)), more than {MAX_SCHEDULE_SLOTS}: use fewer reps, warm-ups or \
                 variants",
                self.reps, self.warmups
            ));
        }
        Ok(())
    }

    /// Reps per block of `order = "blocks"`.
    pub fn block_size(&self) -> u32 {
        self.block.unwrap_or(5)
    }
}

impl Default for RunPolicy {
    fn default() -> Self {
        RunPolicy {
            reps: 5,
            warmups: 1,
            order: Order::Interleaved,
            process: ProcessPolicy::Shared,
            counters: CounterMode::Hardware,
            telemetry_period_ms: telemetry_period_ms(),
            rep_timeout_s: None,
            heap_trim: false,
            block: None,
            profile: false,
            profile_hz: None,
            process_cpu: Default::default(),
            reps_per_worker: None,
            absolute_paths: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_past_their_bounds_are_refused_before_they_are_built() {
        let mut p = RunPolicy {
            reps: MAX_REPS,
            warmups: MAX_WARMUPS,
            ..RunPolicy::default()
        };
        assert!(p.check_bounds(9).is_ok());
        let e = p.check_bounds(10).unwrap_err();
        assert!(e.contains("the schedule would hold 1100000 reps"), "{e}");
        p.reps = u32::MAX;
        assert!(p
            .check_bounds(1)
            .unwrap_err()
            .contains("is more than 100000"));
        p.reps = 1;
        p.rep_timeout_s = Some(u64::MAX);
        assert!(p.check_bounds(1).unwrap_err().contains("30 days"));
        p.rep_timeout_s = None;
        p.reps_per_worker = Some(4);
        assert!(p
            .check_bounds(1)
            .unwrap_err()
            .contains("only to process = \"per_variant\""));
        p.process = ProcessPolicy::PerVariant;
        assert!(p.check_bounds(1).is_ok());
        p.reps_per_worker = Some(0);
        assert!(p.check_bounds(1).unwrap_err().contains("at least 1"));
    }
}
