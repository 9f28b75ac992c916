//! The verdict simulation of issue 37 (item 7): seeded prover-like diffs of ~150
//! correlated comparisons, judged by gapscope's rules (`analysis::judge_rows`, exactly as
//! `gapscope diff` judges a family) and, on the same generated data, by the rules of
//! benchstat, criterion, hyperfine + Welch's t and asv. Each cell (scenario × effect ×
//! reps a side) is scored on its false-alarm rate per diff, power, wrong-sign rate and
//! the coverage of the printed intervals.
//!
//! ```text
//! cargo bench --bench verdict_sim -- --diffs 10000 --out evidence/verdicts/sim
//! cargo bench --bench verdict_sim -- --diffs 200 --cells lognormal/aa --threads 2
//! ```
//!
//! The model, the rules and the scores are described in evidence/verdicts/sim/README.md.
//! Every random number comes from a generator seeded by (`--seed`, cell, diff index), so
//! a cell's numbers do not depend on the number of threads nor on the cell filter.
//! `VERDICT_SIM_DEBUG=1` prints each false alarm, wrong sign and (gapscope's rules) missed
//! change of the changed span's self time, with the verdict, interval and q-value.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use gapscope::analysis::{judge_rows, Comparison, DiffOptions, Measure, RowInput, Unit, Verdict};
use gapscope::stats::{mann_whitney, student_t_sf, student_t_two_sided, welch_t, Sample};
use rayon::prelude::*;

// ---------------------------------------------------------------------------------------
// Random numbers: xoshiro256++ seeded by SplitMix64, normal deviates by Box–Muller.

struct Rng {
    x: gapscope::stats::Xoshiro,
    spare: Option<f64>,
}

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng {
            x: gapscope::stats::Xoshiro::seed(seed),
            spare: None,
        }
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.x.next_f64()
    }

    fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        self.spare = Some(r * s);
        r * c
    }

    fn below(&mut self, k: usize) -> usize {
        ((self.uniform() * k as f64) as usize).min(k - 1)
    }
}

/// CPU time of the calling thread, seconds: the cost of a cell or of a rule's judging,
/// whatever else the machine runs beside it.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given; the clock id is valid.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// FNV-1a of a string, to derive a cell's seed from its name.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

// ---------------------------------------------------------------------------------------
// The prover's span tree.

struct SpanDef {
    name: &'static str,
    parent: Option<usize>,
    /// Nominal self time, seconds.
    self_s: f64,
    /// Sigma of the span's own lognormal noise per rep (0.005 = 0.5%).
    sigma: f64,
    /// Cores the process keeps busy during the span's self time (process CPU time).
    cores: f64,
    /// Page faults during the span's self time (the counter row is inclusive, as a
    /// span's counter deltas are).
    faults: f64,
    /// On the critical path (it has a critical_self row).
    critical: bool,
    /// Share of reps in which the span occurs at all.
    presence: f64,
    /// CPU-bound work (moves with the bimodal reps' slow mode and with load); the GPU
    /// kernels are not.
    cpu_bound: bool,
}

/// name, parent, self s, sigma, cores, page faults, critical, presence, cpu-bound
type SpanRow = (
    &'static str,
    &'static str,
    f64,
    f64,
    f64,
    f64,
    bool,
    f64,
    bool,
);

#[rustfmt::skip]
const TREE: &[SpanRow] = &[
    // name, parent, self s, sigma, cores, page faults, critical, presence, cpu-bound
    ("prove", "", 0.15, 0.03, 1.0, 500.0, true, 1.0, true),
    ("synthesis", "prove", 0.4, 0.04, 1.0, 2_000.0, true, 1.0, true),
    ("synth_circuit_0", "synthesis", 8.5, 0.020, 4.0, 1.5e6, true, 1.0, true),
    ("synth_circuit_1", "synthesis", 8.5, 0.025, 4.0, 1.5e6, true, 1.0, true),
    ("synth_circuit_2", "synthesis", 8.5, 0.030, 4.0, 1.5e6, true, 1.0, true),
    ("synth_circuit_3", "synthesis", 8.5, 0.035, 4.0, 1.5e6, true, 1.0, true),
    ("density", "synthesis", 0.8, 0.05, 1.0, 5.0e4, true, 1.0, true),
    ("gpu_prove", "prove", 0.3, 0.06, 1.0, 1_000.0, true, 1.0, true),
    ("entry", "gpu_prove", 0.01, 0.10, 1.0, 20.0, true, 1.0, true),
    ("lock", "entry", 0.002, 0.10, 1.0, 3.0, true, 1.0, true),
    ("srs_slices", "entry", 0.03, 0.08, 1.0, 300.0, true, 1.0, true),
    ("prep", "gpu_prove", 0.1, 0.05, 1.0, 100.0, false, 1.0, true),
    ("bitmaps", "prep", 1.0, 0.04, 2.0, 3.0e4, false, 1.0, true),
    ("tail_pack", "prep", 0.4, 0.05, 1.0, 1.0e4, false, 1.0, true),
    ("split_vectors_alloc", "gpu_prove", 2.0, 0.08, 1.0, 9.0e6, true, 1.0, true),
    ("realloc", "split_vectors_alloc", 0.3, 0.10, 1.0, 2.0e5, true, 0.7, true),
    ("pin_host", "gpu_prove", 1.5, 0.04, 1.0, 5_000.0, true, 1.0, true),
    ("kernels", "gpu_prove", 0.2, 0.02, 1.0, 100.0, true, 1.0, false),
    ("ntt_h", "kernels", 3.0, 0.005, 1.0, 50.0, true, 1.0, false),
    ("msm_h", "kernels", 4.0, 0.006, 1.0, 50.0, true, 1.0, false),
    ("msm_l", "kernels", 7.0, 0.007, 1.0, 50.0, true, 1.0, false),
    ("msm_a", "kernels", 4.5, 0.008, 1.0, 50.0, true, 1.0, false),
    ("msm_b_g1", "kernels", 3.5, 0.010, 1.0, 50.0, true, 1.0, false),
    ("batch_add", "kernels", 1.6, 0.012, 1.0, 20.0, true, 1.0, false),
    ("tail_msm", "kernels", 1.8, 0.015, 1.0, 20.0, true, 1.0, false),
    ("b_g2_msm", "gpu_prove", 3.0, 0.03, 8.0, 2.0e4, true, 1.0, true),
    ("assemble", "gpu_prove", 0.1, 0.05, 1.0, 200.0, true, 1.0, true),
    ("drop", "gpu_prove", 0.2, 0.08, 1.0, 100.0, true, 1.0, true),
    ("drop_split", "drop", 6.0, 0.10, 1.0, 1.0e3, true, 1.0, true),
    ("drop_bases", "drop", 4.0, 0.07, 1.0, 1.0e3, true, 1.0, true),
    ("drop_assignments", "prove", 3.0, 0.06, 1.0, 1.0e3, true, 1.0, true),
];

/// The span that appears (absent from the baseline) or disappears (absent from the
/// candidate) in those effects; present on both sides otherwise.
const ONE_SIDED_SPAN: &str = "pin_host";

/// Spans whose self time the timing effects change: one drawn per diff among the spans
/// of at least this self time (the phases a user would look at).
const TARGET_MIN_SELF_S: f64 = 1.5;

fn tree() -> Vec<SpanDef> {
    let index = |n: &str| TREE.iter().position(|t| t.0 == n);
    TREE.iter()
        .map(|t| SpanDef {
            name: t.0,
            parent: index(t.1),
            self_s: t.2,
            sigma: t.3,
            cores: t.4,
            faults: t.5,
            critical: t.6,
            presence: t.7,
            cpu_bound: t.8,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Scenarios and effects.

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    /// Per-rep machine factor (1%) × each span's own lognormal noise.
    Lognormal,
    /// As lognormal, plus whole reps 3× slower (2% of reps) and a span 3× slower in a
    /// rep (1% of span-reps).
    HeavyTails,
    /// As lognormal, plus a slow mode in 35% of reps: CPU-bound spans 8% slower.
    Bimodal,
    /// As lognormal, plus the machine 10% slower at the run's end than at its start and
    /// load swings (a two-state load, +6% on CPU-bound spans, switching with
    /// probability 0.2 between reps).
    Drift,
    /// Wrong-sign stress: a 30% rise over the run and load swings of +15% switching with
    /// probability 0.3.
    DriftStress,
}

const SCENARIOS: [Scenario; 5] = [
    Scenario::Lognormal,
    Scenario::HeavyTails,
    Scenario::Bimodal,
    Scenario::Drift,
    Scenario::DriftStress,
];

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Lognormal => "lognormal",
            Scenario::HeavyTails => "heavy_tails",
            Scenario::Bimodal => "bimodal",
            Scenario::Drift => "drift",
            Scenario::DriftStress => "drift_stress",
        }
    }

    /// (rise over the run, load step, load switch probability)
    fn drift(self) -> (f64, f64, f64) {
        match self {
            Scenario::Drift => (0.10, 0.06, 0.2),
            Scenario::DriftStress => (0.30, 0.15, 0.3),
            _ => (0.0, 0.0, 0.0),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Effect {
    /// A/A: nothing changes.
    None,
    /// The target span's self time × (1 + x).
    Relative(f64, &'static str),
    /// The target span's self time + k × its per-rep spread (1.4826 · MAD).
    Spreads(f64),
    /// `ONE_SIDED_SPAN` absent from the baseline.
    Appear,
    /// `ONE_SIDED_SPAN` absent from the candidate.
    Disappear,
}

const EFFECTS: [Effect; 8] = [
    Effect::None,
    Effect::Relative(0.01, "+1%"),
    Effect::Relative(0.05, "+5%"),
    Effect::Relative(0.20, "+20%"),
    Effect::Relative(1.7, "2.7x"),
    Effect::Spreads(5.0),
    Effect::Appear,
    Effect::Disappear,
];

impl Effect {
    fn name(self) -> String {
        match self {
            Effect::None => "aa".into(),
            Effect::Relative(_, n) => n.into(),
            Effect::Spreads(k) => format!("{k}spreads"),
            Effect::Appear => "appear".into(),
            Effect::Disappear => "disappear".into(),
        }
    }
}

const NS: [usize; 5] = [3, 5, 8, 13, 20];

// ---------------------------------------------------------------------------------------
// One simulated run: n counterbalanced iterations, each a baseline and a candidate rep.

/// Per-rep values of every span on one side (None where the span did not occur).
struct SideData {
    self_ns: Vec<Vec<Option<f64>>>,
    total: Vec<Vec<Option<f64>>>,
    cpu: Vec<Vec<Option<f64>>>,
    faults: Vec<Vec<Option<f64>>>,
}

impl SideData {
    fn new(spans: usize, n: usize) -> SideData {
        let v = || vec![vec![None; n]; spans];
        SideData {
            self_ns: v(),
            total: v(),
            cpu: v(),
            faults: v(),
        }
    }
}

struct Model {
    spans: Vec<SpanDef>,
    targets: Vec<usize>,
    one_sided: usize,
}

impl Model {
    fn new() -> Model {
        let spans = tree();
        for (i, s) in spans.iter().enumerate() {
            assert!(s.parent.is_none_or(|p| p < i), "parents come first");
        }
        let targets = (0..spans.len())
            .filter(|&i| spans[i].self_s >= TARGET_MIN_SELF_S && spans[i].name != ONE_SIDED_SPAN)
            .collect();
        let one_sided = spans.iter().position(|s| s.name == ONE_SIDED_SPAN).unwrap();
        Model {
            spans,
            targets,
            one_sided,
        }
    }
}

/// What changed in one diff.
struct Change {
    /// Span whose self time changes, and its self-time factor on the candidate side.
    target: Option<(usize, f64)>,
    /// Span absent from the baseline (appear) or the candidate (disappear).
    absent_base: Option<usize>,
    absent_cand: Option<usize>,
}

/// Simulates one run of `n` iterations: iteration i runs baseline then candidate when i
/// is even, candidate then baseline when odd; the machine state (drift, load) follows
/// the reps' order in time.
fn simulate(
    m: &Model,
    sc: Scenario,
    n: usize,
    change: &Change,
    rng: &mut Rng,
) -> (SideData, SideData) {
    let k = m.spans.len();
    let mut sides = [SideData::new(k, n), SideData::new(k, n)];
    let (rise, load_step, load_switch) = sc.drift();
    let mut load_high = rng.uniform() < 0.5;
    let reps = 2 * n;
    let mut self_v = vec![0.0; k];
    let mut present = vec![false; k];
    for t in 0..reps {
        let iter = t / 2;
        let first = t % 2 == 0;
        // side 0 = baseline, 1 = candidate
        let side = if (iter % 2 == 0) == first { 0 } else { 1 };
        if t > 0 && rng.uniform() < load_switch {
            load_high = !load_high;
        }
        let mut machine = (0.01 * rng.normal()).exp();
        machine *= 1.0 + rise * t as f64 / (reps - 1).max(1) as f64;
        let mut cpu_mode = 1.0;
        match sc {
            Scenario::HeavyTails if rng.uniform() < 0.02 => machine *= 3.0,
            Scenario::Bimodal if rng.uniform() < 0.35 => cpu_mode = 1.08,
            _ => {}
        }
        if load_high {
            cpu_mode *= 1.0 + load_step;
        }
        for (i, s) in m.spans.iter().enumerate() {
            let parent_present = s.parent.is_none_or(|p| present[p]);
            let absent = (side == 0 && change.absent_base == Some(i))
                || (side == 1 && change.absent_cand == Some(i));
            present[i] =
                parent_present && !absent && (s.presence >= 1.0 || rng.uniform() < s.presence);
            if !present[i] {
                continue;
            }
            let mut v = s.self_s * 1e9 * machine * (s.sigma * rng.normal()).exp();
            if s.cpu_bound {
                v *= cpu_mode;
            }
            if sc == Scenario::HeavyTails && rng.uniform() < 0.01 {
                v *= 3.0;
            }
            if let Some((ti, f)) = change.target {
                if side == 1 && ti == i {
                    v *= f;
                }
            }
            self_v[i] = v;
        }
        // Inclusive values, children before parents (children have larger indices).
        let d = &mut sides[side];
        let mut tot = vec![0.0; k];
        let mut cpu = vec![0.0; k];
        let mut flt = vec![0.0; k];
        for i in (0..k).rev() {
            if !present[i] {
                continue;
            }
            let s = &m.spans[i];
            tot[i] += self_v[i];
            cpu[i] += self_v[i] * s.cores * (0.02 * rng.normal()).exp();
            let f = s.faults * (0.05 * rng.normal()).exp() + s.faults.sqrt() * rng.normal();
            flt[i] += f.round().max(0.0);
            d.self_ns[i][iter] = Some(self_v[i]);
            d.total[i][iter] = Some(tot[i]);
            d.cpu[i][iter] = Some(cpu[i]);
            d.faults[i][iter] = Some(flt[i]);
            if let Some(p) = s.parent {
                tot[p] += tot[i];
                cpu[p] += cpu[i];
                flt[p] += flt[i];
            }
        }
    }
    let [b, c] = sides;
    (b, c)
}

/// The true change of a row: none, a relative change, or the row exists on one side only.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Truth {
    Null,
    Rel(f64),
    OneSided(Sign),
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Sign {
    Up,
    Down,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Total,
    SelfTime,
    CriticalSelf,
    ProcessCpu,
    Faults,
}

const KINDS: [Kind; 5] = [
    Kind::Total,
    Kind::SelfTime,
    Kind::CriticalSelf,
    Kind::ProcessCpu,
    Kind::Faults,
];

/// Nominal (noise-free, median) value of every span's rows on one side: the truth the
/// rows' changes are scored against. Exact for the changed span's self time and for the
/// rows that do not change (0); to first order for the totals that contain the change.
fn nominal(m: &Model, change: &Change, side: usize) -> [Vec<f64>; 5] {
    let k = m.spans.len();
    let mut out: [Vec<f64>; 5] = std::array::from_fn(|_| vec![0.0; k]);
    for i in (0..k).rev() {
        let s = &m.spans[i];
        let absent = (side == 0 && change.absent_base == Some(i))
            || (side == 1 && change.absent_cand == Some(i));
        if absent {
            continue;
        }
        let mut v = s.self_s;
        if let Some((ti, f)) = change.target {
            if side == 1 && ti == i {
                v *= f;
            }
        }
        out[1][i] = v;
        out[2][i] = v;
        out[0][i] += v;
        out[3][i] += v * s.cores;
        out[4][i] += s.faults;
        if let Some(p) = s.parent {
            let w = s.presence;
            let (t, c, f) = (out[0][i], out[3][i], out[4][i]);
            out[0][p] += w * t;
            out[3][p] += w * c;
            out[4][p] += w * f;
        }
    }
    out
}

struct Diff {
    rows: Vec<RowInput>,
    truth: Vec<Truth>,
    /// Rows of the changed span: (self row, total row) indices.
    target_rows: Option<(usize, usize)>,
    /// The primary row (end to end).
    primary: usize,
}

fn build_diff(m: &Model, sc: Scenario, n: usize, change: &Change, rng: &mut Rng) -> Diff {
    let (b, c) = simulate(m, sc, n, change, rng);
    let nb = nominal(m, change, 0);
    let nc = nominal(m, change, 1);
    let mut rows = Vec::with_capacity(160);
    let mut truth = Vec::with_capacity(160);
    let mut target_rows = (usize::MAX, usize::MAX);
    let mut primary = 0;
    for (i, s) in m.spans.iter().enumerate() {
        for (ki, kind) in KINDS.iter().enumerate() {
            if *kind == Kind::CriticalSelf && !s.critical {
                continue;
            }
            let (vals_b, vals_c, measure, unit) = match kind {
                Kind::Total => (&b.total[i], &c.total[i], Measure::Total, Unit::Ns),
                Kind::SelfTime => (&b.self_ns[i], &c.self_ns[i], Measure::SelfTime, Unit::Ns),
                Kind::CriticalSelf => (
                    &b.self_ns[i],
                    &c.self_ns[i],
                    Measure::CriticalSelf,
                    Unit::Ns,
                ),
                Kind::ProcessCpu => (&b.cpu[i], &c.cpu[i], Measure::ProcessCpu, Unit::Ns),
                Kind::Faults => (
                    &b.faults[i],
                    &c.faults[i],
                    Measure::Counter("page_faults".into()),
                    Unit::Count,
                ),
            };
            let base: Vec<f64> = vals_b.iter().flatten().copied().collect();
            let cand: Vec<f64> = vals_c.iter().flatten().copied().collect();
            if base.is_empty() && cand.is_empty() {
                continue;
            }
            let pairs: Vec<(f64, f64)> = vals_b
                .iter()
                .zip(vals_c)
                .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
                .collect();
            let (tb, tc) = (nb[ki][i], nc[ki][i]);
            let t = if tb == 0.0 && tc > 0.0 {
                Truth::OneSided(Sign::Up)
            } else if tc == 0.0 && tb > 0.0 {
                Truth::OneSided(Sign::Down)
            } else if tb == tc {
                Truth::Null
            } else {
                Truth::Rel(tc / tb - 1.0)
            };
            let is_primary = i == 0 && *kind == Kind::Total;
            if is_primary {
                primary = rows.len();
            }
            if change.target.map(|t| t.0) == Some(i) {
                match kind {
                    Kind::SelfTime => target_rows.0 = rows.len(),
                    Kind::Total => target_rows.1 = rows.len(),
                    _ => {}
                }
            }
            if change.target.is_none() && Some(i) == change.absent_base.or(change.absent_cand) {
                match kind {
                    Kind::SelfTime => target_rows.0 = rows.len(),
                    Kind::Total => target_rows.1 = rows.len(),
                    _ => {}
                }
            }
            rows.push(RowInput {
                span: s.name.to_string(),
                measure,
                unit,
                base,
                cand,
                pairs: Some(pairs),
                primary: is_primary,
            });
            truth.push(t);
        }
    }
    Diff {
        rows,
        truth,
        target_rows: (target_rows.0 != usize::MAX).then_some(target_rows),
        primary,
    }
}

// ---------------------------------------------------------------------------------------
// Rules: what each tool names, per row.

#[derive(Clone, Copy, PartialEq)]
enum Rule {
    /// gapscope's rules on the counterbalanced pairs.
    Gapscope,
    /// gapscope's rules on the same reps as independent samples (`--unpaired`).
    GapscopeUnpaired,
    /// benchstat: Mann–Whitney U two-sided p < 0.05 per row.
    Benchstat,
    /// criterion: t-test p < 0.05, then the interval of the relative change of means
    /// wholly beyond ±1% (the noise threshold).
    Criterion,
    /// hyperfine's results + Welch's t-test (its scripts/welch_ttest.py), p < 0.05.
    HyperfineWelch,
    /// asv: ratio of medians beyond 1.1 (or 1/1.1) and Mann–Whitney p < 0.002.
    Asv,
}

const RULES: [Rule; 6] = [
    Rule::Gapscope,
    Rule::GapscopeUnpaired,
    Rule::Benchstat,
    Rule::Criterion,
    Rule::HyperfineWelch,
    Rule::Asv,
];

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Gapscope => "gapscope",
            Rule::GapscopeUnpaired => "gapscope_unpaired",
            Rule::Benchstat => "benchstat",
            Rule::Criterion => "criterion",
            Rule::HyperfineWelch => "hyperfine_welch",
            Rule::Asv => "asv",
        }
    }
}

/// What a rule said of one row.
#[derive(Clone, Copy, PartialEq)]
enum Named {
    No,
    Up,
    Down,
    /// A change without a direction (a verdict for a row on one side only).
    OneSided,
}

/// A rule's outcome for one row: the word, and the printed interval of the relative
/// change when the rule prints one (whether it holds the true change).
#[derive(Clone, Copy)]
struct Outcome {
    named: Named,
    covers: Option<bool>,
    /// gapscope only: the sides separated in every rep, candidate above (+1) or below (−1)
    /// (what a diff says at 3 reps a side instead of a claim).
    separated: Option<i8>,
}

fn gapscope_outcomes(cmp: &[Comparison], truth: &[Truth]) -> Vec<Outcome> {
    cmp.iter()
        .zip(truth)
        .map(|(c, t)| {
            let v = c.verdict;
            let named = if matches!(v, Verdict::Regressed) {
                Named::Up
            } else if matches!(v, Verdict::Improved) {
                Named::Down
            } else if v.is_change() || matches!(v, Verdict::New | Verdict::Gone) {
                Named::OneSided
            } else {
                Named::No
            };
            let covers = match (t, c.ci) {
                (Truth::Null, Some(i)) if i.is_defined() => Some(i.contains(0.0)),
                (Truth::Rel(r), Some(i)) if i.is_defined() => Some(i.contains(*r)),
                _ => None,
            };
            Outcome {
                named,
                covers,
                separated: c.separation.map(|s| s.direction),
            }
        })
        .collect()
}

/// Largest sample size of the cached null distributions of Mann–Whitney's U.
const MW_MAX: usize = 20;

/// Cumulative null distribution of U without ties, for every n1, n2 ≤ [`MW_MAX`]:
/// `cdf[n1][n2][u]` = P(U ≤ u).
fn mw_table() -> &'static Vec<Vec<Vec<f64>>> {
    static T: std::sync::OnceLock<Vec<Vec<Vec<f64>>>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        // counts[n1][n2][u]: arrangements of n1 + n2 values with U = u, by
        // f(n1, n2, u) = f(n1 − 1, n2, u − n2) + f(n1, n2 − 1, u).
        let mut f = vec![vec![Vec::<f64>::new(); MW_MAX + 1]; MW_MAX + 1];
        for n1 in 0..=MW_MAX {
            for n2 in 0..=MW_MAX {
                let mut v = vec![0.0; n1 * n2 + 1];
                if n1 == 0 || n2 == 0 {
                    v[0] = 1.0;
                } else {
                    for (u, x) in f[n1 - 1][n2].iter().enumerate() {
                        v[u + n2] += x;
                    }
                    for (u, x) in f[n1][n2 - 1].iter().enumerate() {
                        v[u] += x;
                    }
                }
                f[n1][n2] = v;
            }
        }
        f.into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|v| {
                        let total: f64 = v.iter().sum();
                        let mut acc = 0.0;
                        v.iter()
                            .map(|x| {
                                acc += x;
                                acc / total
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    })
}

/// Two-sided exact Mann–Whitney p-value of two sorted samples from the cached null
/// distribution; `None` when values tie or a side is larger than [`MW_MAX`] (then
/// `gapscope::stats::mann_whitney` is used, which gives the same p-value without ties).
fn mw_fast(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len(), b.len());
    if n1 > MW_MAX || n2 > MW_MAX || n1 == 0 || n2 == 0 {
        return None;
    }
    // U = pairs (x from a, y from b) with x > y.
    let (mut u, mut j) = (0usize, 0usize);
    for &x in a {
        while j < n2 && b[j] < x {
            j += 1;
        }
        if j < n2 && b[j] == x {
            return None;
        }
        u += j;
    }
    let m = n1 * n2;
    if 2 * u == m {
        return Some(1.0);
    }
    let k = u.min(m - u);
    Some((2.0 * mw_table()[n1][n2][k]).min(1.0))
}

/// Mann–Whitney's two-sided p-value as benchstat computes it (golang.org/x/perf's
/// `MannWhitneyUTest`): exact without ties, exact given the ties up to 25 values in all,
/// else the normal approximation with the tie-corrected variance and a continuity
/// correction.
fn mw_p(a: &Sample, b: &Sample) -> f64 {
    if let Some(p) = mw_fast(a.sorted(), b.sorted()) {
        return p;
    }
    let (n1, n2) = (a.len(), b.len());
    if n1 + n2 <= 25 {
        return mann_whitney(a, b).p_value;
    }
    // U of `a` and the tie groups of the pooled values, by a merge of the sorted sides.
    let (x, y) = (a.sorted(), b.sorted());
    let (mut i, mut j, mut u, mut ties) = (0, 0, 0.0, 0.0);
    while i < n1 || j < n2 {
        let v = match (x.get(i), y.get(j)) {
            (Some(&p), Some(&q)) => p.min(q),
            (Some(&p), None) => p,
            (None, Some(&q)) => q,
            (None, None) => unreachable!(),
        };
        let (i0, j0) = (i, j);
        while i < n1 && x[i] == v {
            i += 1;
        }
        while j < n2 && y[j] == v {
            j += 1;
        }
        let (ca, cb) = ((i - i0) as f64, (j - j0) as f64);
        u += ca * (j0 as f64 + cb / 2.0);
        let t = ca + cb;
        ties += t * t * t - t;
    }
    let (m1, m2) = (n1 as f64, n2 as f64);
    let n = m1 + m2;
    let var = m1 * m2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - m1 * m2 / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
    gapscope::stats::erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The cached Mann–Whitney p-values against gapscope's own on random samples.
fn check_mw() {
    let mut rng = Rng::new(7);
    for _ in 0..300 {
        let (n1, n2) = (2 + rng.below(MW_MAX - 1), 2 + rng.below(MW_MAX - 1));
        let shift = 0.5 * rng.normal();
        let a = Sample::new((0..n1).map(|_| rng.normal()).collect()).expect("a");
        let b = Sample::new((0..n2).map(|_| rng.normal() + shift).collect()).expect("b");
        let (fast, slow) = (mw_p(&a, &b), mann_whitney(&a, &b).p_value);
        assert!(
            (fast - slow).abs() < 1e-9 * slow.max(1e-3),
            "Mann–Whitney p {fast} against gapscope's {slow} at {n1}, {n2}"
        );
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The peers' outcomes for one row, all four rules from one set of statistics. Long
/// because the four rules share the statistics computed once at its top; one function per
/// rule would compute them four times.
fn peer_outcomes(row: &RowInput, truth: Truth, rules: &[Rule]) -> Vec<Outcome> {
    let none = Outcome {
        named: Named::No,
        covers: None,
        separated: None,
    };
    let (Ok(b), Ok(c)) = (Sample::new(row.base.clone()), Sample::new(row.cand.clone())) else {
        return vec![none; rules.len()];
    };
    let (mb, mc) = (median_sorted(b.sorted()), median_sorted(c.sorted()));
    let need_mw = rules
        .iter()
        .any(|r| matches!(r, Rule::Benchstat | Rule::Asv));
    let mw_p = if need_mw { mw_p(&b, &c) } else { 1.0 };
    let need_t = rules
        .iter()
        .any(|r| matches!(r, Rule::Criterion | Rule::HyperfineWelch));
    let welch = if need_t {
        welch_t(&row.base, &row.cand)
    } else {
        None
    };
    let mean_b = row.base.iter().sum::<f64>() / row.base.len() as f64;
    let sign = |d: f64| {
        if d > 0.0 {
            Named::Up
        } else if d < 0.0 {
            Named::Down
        } else {
            Named::No
        }
    };
    rules
        .iter()
        .map(|r| match r {
            Rule::Benchstat => Outcome {
                named: if mw_p < 0.05 {
                    sign(mc - mb)
                } else {
                    Named::No
                },
                covers: None,
                separated: None,
            },
            Rule::Asv => {
                let ratio = if mb > 0.0 { mc / mb } else { f64::NAN };
                let named = if mw_p < 0.002 && ratio > 1.1 {
                    Named::Up
                } else if mw_p < 0.002 && ratio < 1.0 / 1.1 {
                    Named::Down
                } else {
                    Named::No
                };
                Outcome {
                    named,
                    covers: None,
                    separated: None,
                }
            }
            Rule::HyperfineWelch => Outcome {
                named: match welch {
                    Some(w) if w.p_value < 0.05 => sign(w.estimate),
                    _ => Named::No,
                },
                covers: None,
                separated: None,
            },
            Rule::Criterion => {
                let Some(w) = welch.filter(|_| mean_b > 0.0) else {
                    return none;
                };
                // The 95% interval of the difference of means (Welch) over the baseline
                // mean; bounds compared through the t distribution, no quantile needed.
                let floor = 0.01 * mean_b;
                let (named, covers) = if w.se > 0.0 {
                    let beyond = |x: f64| student_t_sf(x / w.se, w.df) < 0.025;
                    let named = if w.p_value >= 0.05 {
                        Named::No
                    } else if beyond(w.estimate - floor) {
                        Named::Up
                    } else if beyond(-w.estimate - floor) {
                        Named::Down
                    } else {
                        Named::No
                    };
                    let covers = match truth {
                        Truth::Null => Some(student_t_two_sided(w.estimate / w.se, w.df) >= 0.05),
                        Truth::Rel(t) => Some(
                            student_t_two_sided((w.estimate - t * mean_b) / w.se, w.df) >= 0.05,
                        ),
                        Truth::OneSided(_) => None,
                    };
                    (named, covers)
                } else {
                    let rel = w.estimate / mean_b;
                    let named = if rel > 0.01 {
                        Named::Up
                    } else if rel < -0.01 {
                        Named::Down
                    } else {
                        Named::No
                    };
                    (named, None)
                };
                Outcome {
                    named,
                    covers,
                    separated: None,
                }
            }
            Rule::Gapscope | Rule::GapscopeUnpaired => none,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Scores.

#[derive(Default, Clone)]
struct Score {
    diffs: u64,
    /// Diffs with any truly unchanged row named regressed/improved.
    false_alarm_diffs: u64,
    /// Truly unchanged rows named, summed over diffs.
    false_alarm_rows: u64,
    /// New/gone said of a row that exists on both sides in truth (an intermittent span
    /// absent from every rep of one side by chance): not a claim of change, counted apart.
    one_sided_null: u64,
    /// The changed span's self-time row separated in every rep the right way; rows
    /// without a true change separated (gapscope's rules only).
    separated_target: u64,
    separated_null: u64,
    /// The changed span's self and total rows named with the right sign.
    power_self: u64,
    power_total: u64,
    /// Diffs whose changed span had a self/total row (denominator of power).
    power_diffs: u64,
    /// End to end named with the right sign, among diffs where it truly changed.
    e2e_hits: u64,
    e2e_changed: u64,
    named: u64,
    wrong_sign: u64,
    cover_all: u64,
    cover_all_n: u64,
    cover_named: u64,
    cover_named_n: u64,
    /// CPU seconds spent in this rule's judging (gapscope's rules only).
    seconds: f64,
}

impl Score {
    fn add(&mut self, o: &Score) {
        self.diffs += o.diffs;
        self.false_alarm_diffs += o.false_alarm_diffs;
        self.false_alarm_rows += o.false_alarm_rows;
        self.one_sided_null += o.one_sided_null;
        self.separated_target += o.separated_target;
        self.separated_null += o.separated_null;
        self.power_self += o.power_self;
        self.power_total += o.power_total;
        self.power_diffs += o.power_diffs;
        self.e2e_hits += o.e2e_hits;
        self.e2e_changed += o.e2e_changed;
        self.named += o.named;
        self.wrong_sign += o.wrong_sign;
        self.cover_all += o.cover_all;
        self.cover_all_n += o.cover_all_n;
        self.cover_named += o.cover_named;
        self.cover_named_n += o.cover_named_n;
        self.seconds += o.seconds;
    }
}

fn right(named: Named, truth: Truth) -> bool {
    match truth {
        Truth::Rel(r) => (r > 0.0 && named == Named::Up) || (r < 0.0 && named == Named::Down),
        Truth::OneSided(s) => {
            named == Named::OneSided
                || (s == Sign::Up && named == Named::Up)
                || (s == Sign::Down && named == Named::Down)
        }
        Truth::Null => false,
    }
}

fn score_diff(s: &mut Score, d: &Diff, out: &[Outcome]) {
    s.diffs += 1;
    let mut alarm = false;
    for (ri, (o, t)) in out.iter().zip(&d.truth).enumerate() {
        if *t == Truth::Null && o.separated.is_some() {
            s.separated_null += 1;
        }
        if let Some(c) = o.covers {
            s.cover_all_n += 1;
            s.cover_all += c as u64;
        }
        if o.named == Named::No {
            continue;
        }
        s.named += 1;
        if let Some(c) = o.covers {
            s.cover_named_n += 1;
            s.cover_named += c as u64;
        }
        match t {
            Truth::Null | Truth::Rel(_) if o.named == Named::OneSided => s.one_sided_null += 1,
            Truth::Null => {
                if std::env::var_os("VERDICT_SIM_DEBUG").is_some() {
                    eprintln!("false alarm: {} {}", d.rows[ri].span, d.rows[ri].measure);
                }
                alarm = true;
                s.false_alarm_rows += 1;
            }
            _ if !right(o.named, *t) => {
                if std::env::var_os("VERDICT_SIM_DEBUG").is_some() {
                    eprintln!(
                        "wrong sign: {} {} (truth {:?})",
                        d.rows[ri].span, d.rows[ri].measure, t
                    );
                }
                s.wrong_sign += 1
            }
            _ => {}
        }
    }
    s.false_alarm_diffs += alarm as u64;
    if let Some((si, ti)) = d.target_rows {
        s.power_diffs += 1;
        s.power_self += right(out[si].named, d.truth[si]) as u64;
        s.power_total += right(out[ti].named, d.truth[ti]) as u64;
        let dir = match d.truth[si] {
            Truth::Rel(r) if r > 0.0 => Some(1),
            Truth::Rel(r) if r < 0.0 => Some(-1),
            _ => None,
        };
        s.separated_target += (dir.is_some() && out[si].separated == dir) as u64;
    }
    if !matches!(d.truth[d.primary], Truth::Null) {
        s.e2e_changed += 1;
        s.e2e_hits += right(out[d.primary].named, d.truth[d.primary]) as u64;
    }
}

// ---------------------------------------------------------------------------------------
// Cells.

#[derive(Clone)]
struct Cell {
    scenario: Scenario,
    effect: Effect,
    n: usize,
}

impl Cell {
    fn name(&self) -> String {
        format!("{}/{}/{}", self.scenario.name(), self.effect.name(), self.n)
    }
}

struct CellResult {
    cell: Cell,
    scores: Vec<Score>,
    /// Wall and CPU time of the cell (all rules, the data's generation included).
    seconds: f64,
    cpu_seconds: f64,
}

/// Relative per-rep spread (1.4826 · MAD / median) of every span's self time in a
/// scenario, from 400 simulated A/A runs of 10 iterations (baseline reps pooled).
fn spreads(m: &Model, sc: Scenario, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed ^ fnv(sc.name()) ^ 0x5350_5245_4144);
    let k = m.spans.len();
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); k];
    let none = Change {
        target: None,
        absent_base: None,
        absent_cand: None,
    };
    for _ in 0..400 {
        let (b, _) = simulate(m, sc, 10, &none, &mut rng);
        for (i, v) in vals.iter_mut().enumerate() {
            v.extend(b.self_ns[i].iter().flatten());
        }
    }
    vals.into_iter()
        .map(|v| {
            let s = Sample::new(v).expect("values");
            1.4826 * s.mad() / s.median()
        })
        .collect()
}

/// One cell: its diffs generated, judged by every rule and scored. Long because the
/// scores of all rules are gathered in one pass over the same diffs.
fn run_cell(
    m: &Model,
    cell: &Cell,
    spread: &[f64],
    diffs: usize,
    seed: u64,
    rules: &[Rule],
    opts: &DiffOptions,
) -> CellResult {
    let start = Instant::now();
    let cpu0 = thread_cpu();
    let mut scores = vec![Score::default(); rules.len()];
    let peers: Vec<Rule> = rules
        .iter()
        .copied()
        .filter(|r| !matches!(r, Rule::Gapscope | Rule::GapscopeUnpaired))
        .collect();
    let cell_seed = seed ^ fnv(&cell.name());
    for i in 0..diffs {
        let mut rng = Rng::new(cell_seed.wrapping_add((i as u64).wrapping_mul(0x9e37_79b9)));
        let target = m.targets[rng.below(m.targets.len())];
        let change = match cell.effect {
            Effect::None => Change {
                target: None,
                absent_base: None,
                absent_cand: None,
            },
            Effect::Relative(x, _) => Change {
                target: Some((target, 1.0 + x)),
                absent_base: None,
                absent_cand: None,
            },
            Effect::Spreads(k) => Change {
                target: Some((target, 1.0 + k * spread[target])),
                absent_base: None,
                absent_cand: None,
            },
            Effect::Appear => Change {
                target: None,
                absent_base: Some(m.one_sided),
                absent_cand: None,
            },
            Effect::Disappear => Change {
                target: None,
                absent_base: None,
                absent_cand: Some(m.one_sided),
            },
        };
        let d = build_diff(m, cell.scenario, cell.n, &change, &mut rng);
        let peer_rows: Vec<Vec<Outcome>> = if peers.is_empty() {
            Vec::new()
        } else {
            d.rows
                .iter()
                .zip(&d.truth)
                .map(|(r, t)| peer_outcomes(r, *t, &peers))
                .collect()
        };
        let mut peer_i = 0;
        for (ri, rule) in rules.iter().enumerate() {
            let out: Vec<Outcome> = match rule {
                Rule::Gapscope | Rule::GapscopeUnpaired => {
                    let t0 = thread_cpu();
                    let cmp = if *rule == Rule::Gapscope {
                        judge_rows(&d.rows, opts).0
                    } else {
                        let rows: Vec<RowInput> = d
                            .rows
                            .iter()
                            .map(|r| RowInput {
                                pairs: None,
                                ..r.clone()
                            })
                            .collect();
                        judge_rows(&rows, opts).0
                    };
                    scores[ri].seconds += thread_cpu() - t0;
                    if std::env::var_os("VERDICT_SIM_DEBUG").is_some() {
                        if let Some((si, _)) = d.target_rows {
                            let c = &cmp[si];
                            if !c.verdict.is_change() {
                                eprintln!(
                                    "missed: {} {} {} {:?} rel {:?} ci {:?} p {:?} q {:?} ({})",
                                    rule.name(),
                                    c.span,
                                    c.verdict,
                                    c.why,
                                    c.relative,
                                    c.ci.map(|i| (i.lo, i.hi, i.level)),
                                    c.p_value,
                                    c.q_value,
                                    match d.truth[si] {
                                        Truth::Rel(r) => format!("true {r:+.4}"),
                                        t => format!("{t:?}"),
                                    }
                                );
                                if std::env::var_os("VERDICT_SIM_VALUES").is_some() {
                                    let r = &d.rows[si];
                                    let ln = |v: &[f64]| -> Vec<String> {
                                        v.iter().map(|x| format!("{:.3}", x.ln())).collect()
                                    };
                                    eprintln!(
                                        "  base {:?}\n  cand {:?}\n  tests {:?}",
                                        ln(&r.base),
                                        ln(&r.cand),
                                        c.tests.as_ref().map(|t| (
                                            t.unpaired.p_value,
                                            t.trimmed.map(|x| x.p_value)
                                        ))
                                    );
                                }
                            }
                        }
                    }
                    gapscope_outcomes(&cmp, &d.truth)
                }
                _ => {
                    let o = peer_rows.iter().map(|r| r[peer_i]).collect();
                    peer_i += 1;
                    o
                }
            };
            score_diff(&mut scores[ri], &d, &out);
        }
    }
    CellResult {
        cell: cell.clone(),
        scores,
        seconds: start.elapsed().as_secs_f64(),
        cpu_seconds: thread_cpu() - cpu0,
    }
}

// ---------------------------------------------------------------------------------------
// Output.

fn rate(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

fn fmt_opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.4}")).unwrap_or_default()
}

/// Wall and CPU time of the run: per diff (all rules, the data's generation included),
/// per rule (gapscope's judging), per n, and the CPU time the whole grid would take at
/// 10,000 diffs a cell.
fn timing_summary(results: &[CellResult], args: &Args, wall: f64) -> String {
    let diffs = args.diffs as f64;
    let total_diffs = results.len() as f64 * diffs;
    let cpu: f64 = results.iter().map(|r| r.cpu_seconds).sum();
    let mut t = format!(
        "wall {wall:.1} s for {} cells × {} diffs on {} threads; CPU time per diff (all \
         rules, data generation included): {:.3} ms\n",
        results.len(),
        args.diffs,
        args.threads,
        1e3 * cpu / total_diffs
    );
    let rule_cpu = |ri: usize, n: Option<usize>| {
        let rs: Vec<&CellResult> = results
            .iter()
            .filter(|r| n.is_none_or(|n| r.cell.n == n))
            .collect();
        let s: f64 = rs.iter().map(|r| r.scores[ri].seconds).sum();
        1e3 * s / (rs.len() as f64 * diffs)
    };
    for (ri, rule) in args.rules.iter().enumerate() {
        if matches!(rule, Rule::Gapscope | Rule::GapscopeUnpaired) {
            let _ = writeln!(
                t,
                "{}: {:.3} ms of CPU per diff in judge_rows",
                rule.name(),
                rule_cpu(ri, None)
            );
        }
    }
    t.push_str("per n: CPU ms per diff, all rules");
    for (ri, rule) in args.rules.iter().enumerate() {
        if matches!(rule, Rule::Gapscope | Rule::GapscopeUnpaired) {
            let _ = write!(t, " | {}", rule.name());
            let _ = ri;
        }
    }
    t.push('\n');
    let mut per_n = Vec::new();
    for n in NS {
        let rs: Vec<&CellResult> = results.iter().filter(|r| r.cell.n == n).collect();
        if rs.is_empty() {
            continue;
        }
        let c = 1e3 * rs.iter().map(|r| r.cpu_seconds).sum::<f64>() / (rs.len() as f64 * diffs);
        per_n.push(c);
        let _ = write!(t, "  n={n}: {c:.3}");
        for (ri, rule) in args.rules.iter().enumerate() {
            if matches!(rule, Rule::Gapscope | Rule::GapscopeUnpaired) {
                let _ = write!(t, " | {:.3}", rule_cpu(ri, Some(n)));
            }
        }
        t.push('\n');
    }
    if per_n.len() == NS.len() {
        let mean = per_n.iter().sum::<f64>() / per_n.len() as f64;
        let grid = (SCENARIOS.len() * EFFECTS.len() * NS.len()) as f64;
        let secs = mean * 1e-3 * grid * 10_000.0;
        let _ = writeln!(
            t,
            "whole grid ({grid} cells) at 10,000 diffs with these rules: {:.0} CPU minutes, \
             {:.0} minutes on 2 cores",
            secs / 60.0,
            secs / 120.0
        );
    }
    t
}

/// The model's spans: nominal self time, own noise, and the per-rep spread of the self
/// time in each scenario (what "5 spreads" adds).
fn spans_csv(m: &Model, spread: &[Vec<f64>]) -> String {
    let mut out =
        String::from("span,parent,self_s,sigma,cores,page_faults,critical,presence,target");
    for sc in SCENARIOS {
        let _ = write!(out, ",spread_{}", sc.name());
    }
    out.push('\n');
    for (i, s) in m.spans.iter().enumerate() {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            s.name,
            s.parent.map_or("", |p| m.spans[p].name),
            s.self_s,
            s.sigma,
            s.cores,
            s.faults,
            s.critical,
            s.presence,
            m.targets.contains(&i)
        );
        for sp in spread {
            let _ = write!(out, ",{:.4}", sp[i]);
        }
        out.push('\n');
    }
    out
}

const CSV_HEADER: &str = "scenario,effect,n,rule,false_alarm_rate,power,wrong_sign_rate,coverage_all,coverage_named,diffs,power_self,power_total,power_end_to_end,false_alarm_rows_per_diff,named_per_diff,new_gone_by_chance_per_diff,separated_target,separated_null_per_diff";

fn csv_line(r: &CellResult, rule: Rule, s: &Score) -> String {
    let gs = matches!(rule, Rule::Gapscope | Rule::GapscopeUnpaired);
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        r.cell.scenario.name(),
        r.cell.effect.name(),
        r.cell.n,
        rule.name(),
        fmt_opt(rate(s.false_alarm_diffs, s.diffs)),
        fmt_opt(rate(s.power_self + s.power_total, 2 * s.power_diffs)),
        fmt_opt(rate(s.wrong_sign, s.named)),
        fmt_opt(rate(s.cover_all, s.cover_all_n)),
        fmt_opt(rate(s.cover_named, s.cover_named_n)),
        s.diffs,
        fmt_opt(rate(s.power_self, s.power_diffs)),
        fmt_opt(rate(s.power_total, s.power_diffs)),
        fmt_opt(rate(s.e2e_hits, s.e2e_changed)),
        fmt_opt(rate(s.false_alarm_rows, s.diffs)),
        fmt_opt(rate(s.named, s.diffs)),
        fmt_opt(rate(s.one_sided_null, s.diffs)),
        fmt_opt(
            gs.then(|| rate(s.separated_target, s.power_diffs))
                .flatten()
        ),
        fmt_opt(gs.then(|| rate(s.separated_null, s.diffs)).flatten()),
    )
}

fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) => format!("{:.1}", 100.0 * v),
        None => "–".into(),
    }
}

/// Markdown tables: A/A false alarms per scenario and n, power per effect and n
/// (lognormal), wrong signs per scenario over all effects. Long because it writes each
/// table in turn, as the README shows them.
fn tables(results: &[CellResult], rules: &[Rule]) -> String {
    let mut md = String::new();
    let find = |sc: Scenario, e: Effect, n: usize| {
        results
            .iter()
            .find(|r| r.cell.scenario == sc && r.cell.effect == e && r.cell.n == n)
    };
    let ns: Vec<usize> = NS
        .iter()
        .copied()
        .filter(|&n| results.iter().any(|r| r.cell.n == n))
        .collect();
    let header = |md: &mut String, first: &str| {
        let _ = write!(md, "| {first} | rule |");
        for n in &ns {
            let _ = write!(md, " n={n} |");
        }
        md.push_str("\n|---|---|");
        for _ in &ns {
            md.push_str("---:|");
        }
        md.push('\n');
    };
    md.push_str("### A/A: diffs with any false alarm (%)\n\n");
    header(&mut md, "scenario");
    for sc in SCENARIOS {
        for (ri, rule) in rules.iter().enumerate() {
            if find(sc, Effect::None, ns[0]).is_none()
                && ns.iter().all(|&n| find(sc, Effect::None, n).is_none())
            {
                continue;
            }
            let _ = write!(md, "| {} | {} |", sc.name(), rule.name());
            for &n in &ns {
                let v = find(sc, Effect::None, n)
                    .and_then(|r| rate(r.scores[ri].false_alarm_diffs, r.scores[ri].diffs));
                let _ = write!(md, " {} |", pct(v));
            }
            md.push('\n');
        }
    }
    md.push_str("\n### Power: the changed span's self and total rows named with the right sign (%), lognormal\n\n");
    header(&mut md, "effect");
    for e in EFFECTS.iter().skip(1) {
        for (ri, rule) in rules.iter().enumerate() {
            if ns
                .iter()
                .all(|&n| find(Scenario::Lognormal, *e, n).is_none())
            {
                continue;
            }
            let _ = write!(md, "| {} | {} |", e.name(), rule.name());
            for &n in &ns {
                let v = find(Scenario::Lognormal, *e, n).and_then(|r| {
                    let s = &r.scores[ri];
                    rate(s.power_self + s.power_total, 2 * s.power_diffs)
                });
                let _ = write!(md, " {} |", pct(v));
            }
            md.push('\n');
        }
    }
    md.push_str("\n### Wrong sign: verdicts with the wrong direction, all effects pooled (per 1,000 verdicts)\n\n");
    md.push_str("| scenario | rule | wrong / named | per 1,000 |\n|---|---|---:|---:|\n");
    for sc in SCENARIOS {
        for (ri, rule) in rules.iter().enumerate() {
            let mut s = Score::default();
            for r in results.iter().filter(|r| r.cell.scenario == sc) {
                s.add(&r.scores[ri]);
            }
            if s.diffs == 0 {
                continue;
            }
            let per = rate(s.wrong_sign, s.named).map(|v| format!("{:.2}", 1000.0 * v));
            let _ = writeln!(
                md,
                "| {} | {} | {} / {} | {} |",
                sc.name(),
                rule.name(),
                s.wrong_sign,
                s.named,
                per.unwrap_or_else(|| "–".into())
            );
        }
    }
    if let Some(gi) = rules.iter().position(|r| *r == Rule::Gapscope) {
        if ns.contains(&3) {
            md.push_str("\n### gapscope at 3 reps a side (no claim): separated in every rep\n\n");
            md.push_str(
                "| scenario | changed span's self row separated, right way, 5 spreads (%) | the same, +20% (%) | rows without change separated, A/A (per diff) |\n|---|---:|---:|---:|\n",
            );
            for sc in SCENARIOS {
                let sep = |e: Effect| {
                    find(sc, e, 3).and_then(|r| {
                        let s = &r.scores[gi];
                        rate(s.separated_target, s.power_diffs)
                    })
                };
                let null = find(sc, Effect::None, 3)
                    .and_then(|r| rate(r.scores[gi].separated_null, r.scores[gi].diffs));
                if find(sc, Effect::None, 3).is_none() && sep(Effect::Spreads(5.0)).is_none() {
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} |",
                    sc.name(),
                    pct(sep(Effect::Spreads(5.0))),
                    pct(sep(Effect::Relative(0.20, "+20%"))),
                    null.map_or("–".into(), |v| format!("{v:.2}"))
                );
            }
        }
    }
    md.push_str("\n### Coverage of the printed 95% interval, all cells pooled (%)\n\n");
    md.push_str("| rule | all rows | rows named |\n|---|---:|---:|\n");
    for (ri, rule) in rules.iter().enumerate() {
        let mut s = Score::default();
        for r in results {
            s.add(&r.scores[ri]);
        }
        if s.cover_all_n == 0 {
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} |",
            rule.name(),
            pct(rate(s.cover_all, s.cover_all_n)),
            pct(rate(s.cover_named, s.cover_named_n))
        );
    }
    md
}

const COLORS: [(u8, u8, u8); 6] = [
    (200, 30, 30),
    (230, 140, 40),
    (30, 90, 200),
    (40, 160, 70),
    (140, 60, 180),
    (90, 90, 90),
];

/// power.svg and power.png: power against n per rule at two effects (lognormal), and the
/// A/A false-alarm rate per diff against n per rule (lognormal).
fn chart(dir: &Path, results: &[CellResult], rules: &[Rule]) -> Result<(), String> {
    use plotters::prelude::*;
    gapscope::plot::register_font().map_err(|e| e.to_string())?;
    let size = (1500, 460);
    let svg = dir.join("power.svg");
    draw(
        SVGBackend::new(&svg, size).into_drawing_area(),
        results,
        rules,
    )?;
    let png = dir.join("power.png");
    draw(
        BitMapBackend::new(&png, size).into_drawing_area(),
        results,
        rules,
    )
}

/// The chart: power against n and the A/A rate per rule. Long because plotters wants
/// each panel's axes, series and legend spelled out.
fn draw<DB: plotters::prelude::DrawingBackend>(
    root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    results: &[CellResult],
    rules: &[Rule],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    use plotters::prelude::*;
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let panels = root.split_evenly((1, 3));
    let specs: [(Scenario, Effect, &str, bool); 3] = [
        (
            Scenario::Lognormal,
            Effect::Spreads(5.0),
            "Power, 5 spreads, lognormal",
            true,
        ),
        (
            Scenario::Lognormal,
            Effect::Relative(0.20, "+20%"),
            "Power, +20%, lognormal",
            true,
        ),
        (
            Scenario::Lognormal,
            Effect::None,
            "A/A: diffs with a false alarm",
            false,
        ),
    ];
    for (area, (sc, eff, title, power)) in panels.iter().zip(specs) {
        let mut ch = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(2f64..21f64, 0f64..1.02f64)
            .map_err(|e| e.to_string())?;
        ch.configure_mesh()
            .x_desc("reps a side (n)")
            .y_desc(if power {
                "power"
            } else {
                "false-alarm rate per diff"
            })
            .x_labels(10)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(|e| e.to_string())?;
        for (ri, rule) in rules.iter().enumerate() {
            let ci = RULES.iter().position(|r| r == rule).unwrap_or(ri);
            let (r, g, b) = COLORS[ci % COLORS.len()];
            let color = RGBColor(r, g, b);
            let pts: Vec<(f64, f64)> = NS
                .iter()
                .filter_map(|&n| {
                    let res = results
                        .iter()
                        .find(|x| x.cell.scenario == sc && x.cell.effect == eff && x.cell.n == n)?;
                    let s = &res.scores[ri];
                    let v = if power {
                        rate(s.power_self + s.power_total, 2 * s.power_diffs)
                    } else {
                        rate(s.false_alarm_diffs, s.diffs)
                    }?;
                    Some((n as f64, v))
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            ch.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(rule.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            ch.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
        if !power {
            ch.draw_series(LineSeries::new(
                vec![(2.0, 0.05), (21.0, 0.05)],
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(|e| e.to_string())?
            .label("goal: 1 in 20")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5)));
        }
        ch.configure_series_labels()
            .position(if power {
                SeriesLabelPosition::LowerRight
            } else {
                // Between the peers' rates (0.3 and above) and gapscope's and asv's (near 0).
                SeriesLabelPosition::Coordinate(230, 190)
            })
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Command line.

struct Args {
    diffs: usize,
    threads: usize,
    seed: u64,
    cells: Vec<String>,
    rules: Vec<Rule>,
    out: Option<PathBuf>,
    resamples: usize,
}

fn usage() -> ! {
    eprintln!(
        "verdict_sim [--diffs N] [--threads N] [--seed N] [--cells SUBSTR,...] \
         [--rules NAME,...] [--resamples N] [--out DIR]\n\
         cells are named scenario/effect/n, e.g. lognormal/5spreads/5; a cell runs when its \
         name contains any SUBSTR. rules: {}",
        RULES.map(Rule::name).join(",")
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        diffs: 200,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        seed: 37,
        cells: Vec::new(),
        rules: RULES.to_vec(),
        out: None,
        resamples: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--diffs" => a.diffs = val().parse().unwrap_or_else(|_| usage()),
            "--threads" => a.threads = val().parse().unwrap_or_else(|_| usage()),
            "--seed" => a.seed = val().parse().unwrap_or_else(|_| usage()),
            "--resamples" => a.resamples = val().parse().unwrap_or_else(|_| usage()),
            "--cells" => a.cells = val().split(',').map(String::from).collect(),
            "--rules" => {
                a.rules = val()
                    .split(',')
                    .map(|n| {
                        RULES
                            .iter()
                            .copied()
                            .find(|r| r.name() == n)
                            .unwrap_or_else(|| usage())
                    })
                    .collect()
            }
            "--out" => a.out = Some(PathBuf::from(val())),
            // cargo bench passes --bench to harness-less benches.
            "--bench" => {}
            _ => usage(),
        }
    }
    a
}

/// The checkout's revision when the run starts (the rules it was built from; a run can
/// outlast commits made beside it), marked where tracked files had uncommitted changes.
fn git_revision() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(s) if !s.is_empty() => format!("{head} with uncommitted changes"),
        _ => head,
    }
}

/// Long because it is the whole run in order: arguments, cells, the parallel run, the
/// files written and the time per diff.
fn main() {
    let args = parse_args();
    check_mw();
    let m = Model::new();
    // Variants of the rules to compare: VERDICT_SIM_DERIVED_WEIGHT (weighted BH) and
    // VERDICT_SIM_FCR=1 (false-coverage-adjusted intervals for the rows named).
    let env_f64 = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
    let defaults = DiffOptions::default();
    let opts = DiffOptions {
        bootstrap_resamples: args.resamples,
        derived_weight: env_f64("VERDICT_SIM_DERIVED_WEIGHT").unwrap_or(defaults.derived_weight),
        welch: std::env::var("VERDICT_SIM_WELCH").is_ok_and(|v| v == "1"),
        fcr_intervals: std::env::var("VERDICT_SIM_FCR")
            .map_or(defaults.fcr_intervals, |v| v == "1"),
        ..defaults
    };
    let revision = git_revision();
    let mut cells = Vec::new();
    for sc in SCENARIOS {
        for e in EFFECTS {
            for n in NS {
                let cell = Cell {
                    scenario: sc,
                    effect: e,
                    n,
                };
                let name = cell.name();
                if args.cells.is_empty() || args.cells.iter().any(|f| name.contains(f.as_str())) {
                    cells.push(cell);
                }
            }
        }
    }
    if cells.is_empty() {
        eprintln!("no cell matches {:?}", args.cells);
        std::process::exit(2);
    }
    let spread: Vec<Vec<f64>> = SCENARIOS
        .iter()
        .map(|&sc| spreads(&m, sc, args.seed))
        .collect();
    let rows_per_diff = {
        let none = Change {
            target: None,
            absent_base: None,
            absent_cand: None,
        };
        build_diff(&m, Scenario::Lognormal, 5, &none, &mut Rng::new(1))
            .rows
            .len()
    };
    eprintln!(
        "{} cells × {} diffs, {} comparisons per diff, {} threads, rules {}",
        cells.len(),
        args.diffs,
        rows_per_diff,
        args.threads,
        args.rules
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(",")
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build()
        .expect("thread pool");
    let done = AtomicUsize::new(0);
    let start = Instant::now();
    // Longest cells first (n = 20), so the last ones running are short.
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cells[i].n));
    let mut results: Vec<(usize, CellResult)> = pool.install(|| {
        order
            .par_iter()
            .map(|&i| {
                let c = &cells[i];
                let si = SCENARIOS.iter().position(|s| *s == c.scenario).unwrap();
                let r = run_cell(
                    &m,
                    c,
                    &spread[si],
                    args.diffs,
                    args.seed,
                    &args.rules,
                    &opts,
                );
                let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                eprintln!(
                    "[{k}/{}] {} {:.1}s wall, {:.2} ms of CPU per diff",
                    cells.len(),
                    c.name(),
                    r.seconds,
                    1e3 * r.cpu_seconds / args.diffs as f64
                );
                (i, r)
            })
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    let results: Vec<CellResult> = results.into_iter().map(|(_, r)| r).collect();
    let wall = start.elapsed();

    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    for r in &results {
        for (ri, rule) in args.rules.iter().enumerate() {
            csv.push_str(&csv_line(r, *rule, &r.scores[ri]));
            csv.push('\n');
        }
    }
    let md = tables(&results, &args.rules);
    let timing = timing_summary(&results, &args, wall.as_secs_f64());
    eprint!("{timing}");
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).expect("output folder");
            let cmd: Vec<String> = std::env::args()
                .skip(1)
                .filter(|a| a != "--bench")
                .collect();
            let run = format!(
                "cargo bench --bench verdict_sim -- {}\nrevision {}\nmachine: {} threads, {} cores visible\nresamples per bootstrap {}\n{}",
                cmd.join(" "),
                revision,
                args.threads,
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                args.resamples,
                timing
            );
            std::fs::write(dir.join("results.csv"), csv).expect("results.csv");
            std::fs::write(dir.join("spans.csv"), spans_csv(&m, &spread)).expect("spans.csv");
            std::fs::write(dir.join("tables.md"), md).expect("tables.md");
            std::fs::write(dir.join("run.txt"), run).expect("run.txt");
            if let Err(e) = chart(dir, &results, &args.rules) {
                eprintln!("chart: {e}");
            }
            eprintln!("wrote {}", dir.display());
        }
        None => print!("{csv}\n{md}"),
    }
}
