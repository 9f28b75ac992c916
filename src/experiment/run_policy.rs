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
    Shared,
    PerRep,
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
        }
    }
}
