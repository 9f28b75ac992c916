//! Steps that stop when decided. A step's run interleaves reps of the good end and the
//! commit (and of the bad end where the ends' distance is not known beforehand, as in
//! `bisect-step`); after each complete iteration the commit's log value minus the ends'
//! geometric midpoint (good + half the ends' distance measured by their own run, or the
//! mean of both ends' logs in that iteration) is one value of a sequence, and the confidence sequence of its mean
//! ([`crate::stats::mean_confidence_sequence`]: anytime-valid, so looking after every
//! iteration costs no coverage) labels the commit as soon as it excludes 0: above, the
//! commit is nearer the bad end; below, nearer the good one (values past twice the
//! half gap are clipped there: see [`Position::of`]). A 200× slowdown is told
//! from its midpoint at the first iteration where the sequence bounds a mean at all
//! ([`first_decidable`]: 5 at 95%), or from the first iteration on a second sequence
//! that takes the ends' own spread as known ([`KnownSpread`]); a commit halfway between
//! the ends is never decided and runs to the cap.
//!
//! The runs of two commits (the ends, the first bad commit against its parent) stop the
//! same way on the per-iteration log ratio once its sequence lies beyond the noise floor
//! or inside it. The cap on reps, where derived, is from the ends' distance and spread
//! ([`cap_for`]); the rep timeout from the ends' slowest rep ([`rep_timeout_s`]).

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stats;

/// Each sequence holds at 1 − ALPHA over every number of iterations.
pub const ALPHA: f64 = 0.05;

/// z₀.₈: the derived cap gives 80% power to a commit at either end.
const Z_POWER: f64 = 0.841_621;

/// Most reps a derived count asks for (`--reps` sets any number).
pub const MAX_AUTO_REPS: u32 = 100;

/// Which end a commit was found nearer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nearer {
    Good,
    Bad,
}

/// The fewest reps a derived cap gives: the ends' spread is measured once, and the
/// steps after it may run on a busier machine (seen on a shared 2-core VM: the ends at
/// 0.6% per rep, the steps after them at 5-8%). A step that decides sooner stops sooner.
pub const MIN_CAP: u32 = 50;

/// A step's timeout is this many times the ends' slowest rep …
pub const TIMEOUT_FACTOR: f64 = 10.0;
/// … and at least this many seconds (a loaded machine stalls short programs).
pub const MIN_TIMEOUT_S: u64 = 10;

/// A sequence's bounds in log units; `None` while the data cannot bound the mean yet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sequence {
    /// Complete iterations it rests on.
    pub iterations: usize,
    pub mean: f64,
    /// Standard deviation of the per-iteration values.
    pub sd: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Sequence {
    /// The sequence of the mean of `x` at level 1 − [`ALPHA`]; `None` without a value,
    /// no bounds (and a spread of 0) at one.
    pub fn of(x: &[f64]) -> Option<Sequence> {
        if let [v] = x {
            return v.is_finite().then_some(Sequence {
                iterations: 1,
                mean: *v,
                sd: 0.0,
                lo: None,
                hi: None,
            });
        }
        let (lo, hi) = stats::mean_confidence_sequence(x, ALPHA)?;
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let finite = |v: f64| v.is_finite().then_some(v);
        Some(Sequence {
            iterations: x.len(),
            mean,
            sd,
            lo: finite(lo),
            hi: finite(hi),
        })
    }

    /// Lies wholly above `v`.
    pub fn above(&self, v: f64) -> bool {
        self.lo.is_some_and(|lo| lo > v)
    }

    /// Lies wholly below `v`.
    pub fn below(&self, v: f64) -> bool {
        self.hi.is_some_and(|hi| hi < v)
    }

    /// Iterations after which a sequence at this spread would lie on one side of a
    /// value `distance` away from its mean (at least the iterations it has).
    pub fn iterations_to_clear(&self, distance: f64) -> Option<usize> {
        if self.iterations < 2 {
            return None;
        }
        iterations_for(distance, self.sd, 0.0).map(|n| n.max(self.iterations))
    }
}

/// The standard normal quantile at 0.975: [`KnownSpread`] bounds the spread from above
/// at 97.5%.
const Z_SPREAD: f64 = 1.959_964;

/// The normal mixture's precision, in iterations, of [`known_sd_half_width`]: small, so
/// that the sequence is tightest at the first few iterations.
const KNOWN_MIXTURE: f64 = 0.5;

/// The fewest iterations of the ends behind a [`KnownSpread`].
pub const KNOWN_FROM: usize = 4;

/// How far one iteration's value of a step can spread, known from the ends' own run: an
/// upper confidence bound (level 97.5%, [`Z_SPREAD`]) on the standard deviation of
/// their per-iteration log ratio. A step's value (its commit's log minus the good
/// end's, or minus the ends' mean) spreads no more than that when its commit behaves
/// as one of the ends, so a step can be told from the midpoint on a sequence with this
/// spread taken as known: from the first iteration, where the sequence of an unknown
/// spread needs [`first_decidable`] (5). A 200× slowdown is then labelled at the first
/// iteration when the ends spread by up to about 20% per rep. The bound holds only for
/// commits that spread like the ends: a step whose own values spread more (from its
/// second iteration) is judged by the sequence of an unknown spread alone.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct KnownSpread {
    /// The bound: the ends' standard deviation × √((n − 1) / χ²₍₀.₀₂₅, n − 1₎).
    pub sd: f64,
    /// The standard deviation of the ends' per-iteration log ratios, and their count.
    pub ends_sd: f64,
    pub ends_iterations: usize,
    /// The fewest iterations of a step it judges ([`KnownSpread::judging_from`]).
    #[serde(default = "one")]
    pub from: usize,
}

fn one() -> usize {
    1
}

impl KnownSpread {
    /// From the ends' comparison (its paired t test on the per-iteration log ratios);
    /// `None` below [`KNOWN_FROM`] iterations or without spread.
    pub fn from_ends(ends: &crate::analysis::Comparison) -> Option<KnownSpread> {
        let t = ends.tests.as_ref()?.paired?;
        let n = t.df + 1.0;
        KnownSpread::of(t.se * n.sqrt(), n.round() as usize)
    }

    /// From a standard deviation `sd` of `n` values. The χ² quantile is Wilson and
    /// Hilferty's (Proc. Natl. Acad. Sci. 17 (1931)), below the exact one from 3
    /// degrees of freedom (4: 0.449 against 0.484), so the bound errs wide.
    pub fn of(sd: f64, n: usize) -> Option<KnownSpread> {
        if n < KNOWN_FROM || !(sd.is_finite() && sd > 0.0) {
            return None;
        }
        let k = (n - 1) as f64;
        let a = 2.0 / (9.0 * k);
        let q = k * (1.0 - a - Z_SPREAD * a.sqrt()).powi(3);
        (q > 0.0).then(|| KnownSpread {
            sd: sd * (k / q).sqrt(),
            ends_sd: sd,
            ends_iterations: n,
            from: 1,
        })
    }

    /// Judges from `n` iterations on. One iteration cannot show that a commit's values
    /// spread like the ends': where the ends are nearer than [`GOOD_END_ONLY_RATIO`], a
    /// single stalled rep can carry a commit across their midpoint (seen: a rep +48%
    /// with the ends 31% apart, labelled bad at its first iteration), so the bisect
    /// judges from 2 there, when the commit's own spread is checked against the bound.
    pub fn judging_from(mut self, n: usize) -> KnownSpread {
        self.from = n.max(1);
        self
    }

    /// Bounds of the mean of `s`'s values with this spread taken as known, at level
    /// 1 − [`ALPHA`] over every number of values; `None` when the values' own spread
    /// exceeds it.
    pub fn bounds(&self, s: &Sequence) -> Option<(f64, f64)> {
        if s.iterations < self.from.max(1) || !s.mean.is_finite() || s.sd > self.sd {
            return None;
        }
        let hw = known_sd_half_width(self.sd, s.iterations, ALPHA);
        Some((s.mean - hw, s.mean + hw))
    }

    /// Iterations after which values of this spread lie `distance` from a point.
    fn iterations_to_clear(&self, distance: f64) -> Option<usize> {
        (distance > 0.0)
            .then(|| {
                (self.from.max(1)..=100_000)
                    .find(|&n| known_sd_half_width(self.sd, n, ALPHA) < distance)
            })
            .flatten()
    }
}

/// The half-width at `n` values of the confidence sequence of a mean of normal values
/// whose standard deviation `sd` is known, valid at 1 − `alpha` over every `n`: the
/// normal mixture boundary |S_n| ≤ sd·√((n + ρ)·ln((n + ρ)/(ρ·α²))) (Robbins, Ann.
/// Math. Stat. 41 (1970); Howard, Ramdas, McAuliffe & Sekhon, Ann. Stat. 49 (2021)),
/// divided by n, with ρ = [`KNOWN_MIXTURE`]: 3.26 sd at one value, 2.18 sd at two.
pub fn known_sd_half_width(sd: f64, n: usize, alpha: f64) -> f64 {
    let (t, r) = (n as f64, KNOWN_MIXTURE);
    sd * ((t + r) * ((t + r) / (r * alpha * alpha)).ln()).sqrt() / t
}

/// Where a commit sits between the ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The commit's log minus the ends' mean log, per iteration.
    pub midpoint: Sequence,
    /// Half the ends' distance in these iterations (the median of (ln bad − ln good) / 2).
    pub half_gap: f64,
    /// The ends' spread, taken as known where the commit's own values spread no more
    /// ([`Position::known`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<KnownSpread>,
}

impl Position {
    /// From per-rep (iteration, log value) of each variant; iterations missing a
    /// variant's value are left out. `None` below 2 complete iterations.
    ///
    /// The half gap is the median over the iterations (one stalled rep of an end does
    /// not move it), and each value is clipped to ±2 half gaps: a commit at either end
    /// sits one half gap from the midpoint, and a rep that stalled (a load spike on a
    /// shared machine, seen at +40% in one rep of 26) then moves the sequence no more
    /// than a rep a whole gap away would, instead of widening it for every later look.
    pub fn of(good: &[(u32, f64)], step: &[(u32, f64)], bad: &[(u32, f64)]) -> Option<Position> {
        let g: HashMap<u32, f64> = good.iter().copied().collect();
        let b: HashMap<u32, f64> = bad.iter().copied().collect();
        let (mut mid, mut half) = (Vec::new(), Vec::new());
        for (it, s) in step {
            if let (Some(g), Some(b)) = (g.get(it), b.get(it)) {
                mid.push(s - (g + b) / 2.0);
                half.push((b - g) / 2.0);
            }
        }
        half.sort_by(f64::total_cmp);
        let half_gap = match half.len() {
            0 => 0.0,
            n if n % 2 == 1 => half[n / 2],
            n => (half[n / 2 - 1] + half[n / 2]) / 2.0,
        };
        let bound = 2.0 * half_gap.abs();
        if bound > 0.0 {
            mid.iter_mut().for_each(|m| *m = m.clamp(-bound, bound));
        }
        Some(Position {
            midpoint: Sequence::of(&mid)?,
            half_gap,
            spread: None,
        })
    }

    /// From per-rep (iteration, log value) of the good end and the commit alone, against
    /// the ends' `half_gap` as their own run measured it (log units, positive): per
    /// iteration the commit's log minus the good end's minus the half gap, clipped as in
    /// [`Position::of`]. The bad end need not run: for a regression it is the slow one.
    pub fn against_good(
        good: &[(u32, f64)],
        step: &[(u32, f64)],
        half_gap: f64,
    ) -> Option<Position> {
        let mut mid = ratios(good, step);
        let bound = 2.0 * half_gap.abs();
        for m in &mut mid {
            *m -= half_gap;
            if bound > 0.0 {
                *m = m.clamp(-bound, bound);
            }
        }
        Some(Position {
            midpoint: Sequence::of(&mid)?,
            half_gap,
            spread: None,
        })
    }

    /// The same position judged also with the ends' spread taken as known, where the
    /// commit's own values spread no more ([`KnownSpread`]).
    pub fn with_known(mut self, spread: Option<&KnownSpread>) -> Position {
        self.spread = spread.copied();
        self
    }

    /// The bounds of the midpoint's mean with the ends' spread taken as known
    /// ([`KnownSpread::bounds`]), where it applies.
    pub fn known(&self) -> Option<(f64, f64)> {
        self.spread.and_then(|k| k.bounds(&self.midpoint))
    }

    /// The bounds of the midpoint's mean: the sequence's, narrowed by the known
    /// spread's where it applies.
    pub fn bounds(&self) -> (Option<f64>, Option<f64>) {
        narrow(&self.midpoint, self.known())
    }

    /// Bad above the midpoint, good below; `None` while the bounds hold it.
    pub fn label(&self) -> Option<Nearer> {
        match self.bounds() {
            (Some(lo), _) if lo > 0.0 => Some(Nearer::Bad),
            (_, Some(hi)) if hi < 0.0 => Some(Nearer::Good),
            _ => None,
        }
    }

    /// A log value as a place between the ends: 0 the good end, 1 the bad one.
    fn place(&self, v: f64) -> f64 {
        if self.half_gap == 0.0 {
            return f64::NAN;
        }
        0.5 + v / (2.0 * self.half_gap)
    }

    /// "0.02 [-0.04, 0.08] (good 0, bad 1)", or "[no bound yet]" in place of the
    /// interval before the sequence bounds the mean.
    pub fn describe(&self) -> String {
        let m = &self.midpoint;
        let interval = match self.bounds() {
            (Some(lo), Some(hi)) => {
                format!("[{:.2}, {:.2}]", self.place(lo), self.place(hi))
            }
            _ => "[no bound yet]".into(),
        };
        let known = if self.known().is_some() {
            ", the ends' spread"
        } else {
            ""
        };
        format!(
            "{:.2} {interval} between the ends (good 0, bad 1{known})",
            self.place(m.mean)
        )
    }

    /// Iterations after which the sequence would exclude the midpoint at this spread
    /// (or, sooner, the sequence of the known spread where it applies).
    pub fn iterations_to_decide(&self) -> Option<usize> {
        let known = self.known().and(self.spread);
        iterations_to_clear(&self.midpoint, known, self.midpoint.mean.abs())
    }
}

/// Iterations after which `s` would lie `distance` from a point: the sooner of its own
/// sequence and that of the `known` spread (where it applies).
fn iterations_to_clear(s: &Sequence, known: Option<KnownSpread>, distance: f64) -> Option<usize> {
    let unknown = s.iterations_to_clear(distance);
    let known = known
        .and_then(|k| k.iterations_to_clear(distance))
        .map(|n| n.max(s.iterations));
    match (unknown, known) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A sequence's bounds narrowed by those of the known spread, where it applies.
fn narrow(m: &Sequence, known: Option<(f64, f64)>) -> (Option<f64>, Option<f64>) {
    match known {
        Some((lo, hi)) => (
            Some(m.lo.map_or(lo, |l| l.max(lo))),
            Some(m.hi.map_or(hi, |h| h.min(hi))),
        ),
        None => (m.lo, m.hi),
    }
}

/// How a run of two commits (the ends; the first bad commit against its parent) stands:
/// the sequence of its per-iteration log ratios (candidate − baseline), narrowed by the
/// ends' spread taken as known where its own values spread no more
/// ([`KnownSpread::bounds`]), with an anytime-valid p-value against no change. A 200×
/// change is then decided at the first iteration, as a step is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairSequence {
    pub ratios: Sequence,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<KnownSpread>,
    /// Against a mean log ratio of 0, valid at whatever iteration the run stopped:
    /// 1 / the largest mixture likelihood ratio so far of each sequence, the smaller
    /// doubled where both apply (Bonferroni); `None` before either bounds anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
}

impl PairSequence {
    /// Of the per-iteration log ratios `r`; `None` without a finite one.
    pub fn of(r: &[f64], spread: Option<&KnownSpread>) -> Option<PairSequence> {
        let ratios = Sequence::of(r)?;
        let spread = spread.copied();
        let known = spread
            .filter(|k| k.bounds(&ratios).is_some())
            .map(|k| known_sd_p_value(r, k.sd));
        let unknown = (r.len() >= 2).then(|| unknown_sd_p_value(r));
        let p_value = match (known, unknown) {
            (Some(a), Some(b)) => Some((2.0 * a.min(b)).min(1.0)),
            (a, b) => a.or(b),
        };
        Some(PairSequence {
            ratios,
            spread,
            p_value,
        })
    }

    /// The known spread's bounds, where they apply.
    pub fn known(&self) -> Option<(f64, f64)> {
        self.spread.and_then(|k| k.bounds(&self.ratios))
    }

    /// The bounds of the mean log ratio, narrowed by the known spread's where it applies.
    pub fn bounds(&self) -> (Option<f64>, Option<f64>) {
        narrow(&self.ratios, self.known())
    }

    /// Beyond ±`floor` (a fraction): a change; inside it: none; `None`: not decided.
    pub fn verdict(&self, floor: f64) -> Option<crate::analysis::Verdict> {
        use crate::analysis::Verdict;
        let f = (1.0 + floor).ln();
        match self.bounds() {
            (Some(lo), _) if lo > f => Some(Verdict::Regressed),
            (_, Some(hi)) if hi < -f => Some(Verdict::Improved),
            (Some(lo), Some(hi)) if lo > -f && hi < f => Some(Verdict::Equivalent),
            _ => None,
        }
    }

    /// Iterations after which the bounds would clear the floor at this spread.
    pub fn iterations_to_decide(&self, floor: f64) -> Option<usize> {
        let f = (1.0 + floor).ln();
        let known = self.known().and(self.spread);
        iterations_to_clear(&self.ratios, known, (self.ratios.mean.abs() - f).abs())
    }

    /// "+8.1% [+6.0%, +10.3%]" (", the ends' spread" where it narrowed them), or
    /// "[no bound yet]" in place of the interval.
    pub fn describe(&self) -> String {
        let pct = |v: f64| format!("{:+.1}%", (v.exp() - 1.0) * 100.0);
        let known = if self.known().is_some() {
            " (the ends' spread)"
        } else {
            ""
        };
        match self.bounds() {
            (Some(lo), Some(hi)) => format!(
                "{} [{}, {}]{known}",
                pct(self.ratios.mean),
                pct(lo),
                pct(hi)
            ),
            _ => format!("{} [no bound yet]", pct(self.ratios.mean)),
        }
    }
}

/// 1 / the largest over n of the normal mixture's likelihood ratio against mean 0 with
/// the standard deviation `sd` known: E_n = √(ρ/(n + ρ))·exp(S_n² / (2·sd²·(n + ρ))),
/// the martingale whose boundary E_n = 1/α is [`known_sd_half_width`]'s. By Ville's
/// inequality P(sup E_n ≥ 1/p) ≤ p under no change, so it holds at any stopping time.
pub fn known_sd_p_value(x: &[f64], sd: f64) -> f64 {
    let r = KNOWN_MIXTURE;
    let mut sum = 0.0;
    let mut best = f64::NEG_INFINITY;
    for (i, v) in x.iter().enumerate() {
        sum += v;
        let t = (i + 1) as f64 + r;
        let log_e = 0.5 * (r / t).ln() + sum * sum / (2.0 * sd * sd * t);
        best = best.max(log_e);
    }
    (-best).exp().min(1.0)
}

/// The same for [`stats::mean_confidence_sequence`]'s mixture (the standard deviation
/// unknown), from 2 values: M_n = (1 + nc²)^(−1/2)·(Q/(Q − c²S²/(1 + nc²)))^(n/2) with
/// S and Q the sum and sum of squares of the values.
pub fn unknown_sd_p_value(x: &[f64]) -> f64 {
    let c2 = stats::SEQUENCE_MIXTURE;
    let (mut s, mut q) = (0.0, 0.0);
    let mut best = f64::NEG_INFINITY;
    for (i, v) in x.iter().enumerate() {
        s += v;
        q += v * v;
        let n = (i + 1) as f64;
        if n < 2.0 {
            continue;
        }
        let rest = q - c2 * s * s / (1.0 + n * c2);
        let log_m = if rest <= 0.0 {
            f64::INFINITY
        } else {
            -0.5 * (1.0 + n * c2).ln() + 0.5 * n * (q / rest).ln()
        };
        best = best.max(log_m);
    }
    (-best).exp().min(1.0)
}

/// The per-iteration log ratios (candidate − baseline) of two variants' reps.
pub fn ratios(base: &[(u32, f64)], cand: &[(u32, f64)]) -> Vec<f64> {
    let b: HashMap<u32, f64> = base.iter().copied().collect();
    cand.iter()
        .filter_map(|(it, c)| Some(c - b.get(it)?))
        .collect()
}

/// The fewest iterations at which a sequence at level 1 − `alpha` bounds a mean at all:
/// no commit is labelled before.
pub fn first_decidable(alpha: f64) -> usize {
    (2..10_000)
        .find(|&n| {
            stats::confidence_sequence_of(0.0, 1.0, n, alpha)
                .1
                .is_finite()
        })
        .unwrap_or(10_000)
}

/// The iterations at which a sequence of values spread by `sd` excludes a point
/// `distance` from their mean, with `z` standard errors to spare (0: at the mean).
fn iterations_for(distance: f64, sd: f64, z: f64) -> Option<usize> {
    if !(distance > 0.0 && sd.is_finite()) {
        return None;
    }
    (first_decidable(ALPHA)..=100_000).find(|&n| {
        let hw = stats::confidence_sequence_of(0.0, sd, n, ALPHA).1;
        hw + z * sd / (n as f64).sqrt() <= distance
    })
}

/// The iterations at which a commit at either end is told from the midpoint with 80%
/// power: the ends `half_gap` from it (log units), each rep's log spread by `cv`.
/// The midpoint's value has the commit's variance and a quarter of each end's, 1.5
/// times a rep's.
pub fn iterations_to_label(half_gap: f64, cv: f64) -> Option<usize> {
    iterations_for(half_gap, cv * 1.5f64.sqrt(), Z_POWER)
}

/// The cap on reps per step and why: twice [`iterations_to_label`] (room for a commit
/// noisier than the ends), at least [`MIN_CAP`], at most [`MAX_AUTO_REPS`].
pub fn cap_for(ratio: f64, cv: f64) -> (u32, String) {
    let half_gap = ratio.ln().abs() / 2.0;
    let floor = MIN_CAP;
    let ends = format!(
        "the ends differ by ×{ratio:.3} and spread by {:.2}% per rep (1.4826·MAD/median)",
        cv * 100.0
    );
    match iterations_to_label(half_gap, cv) {
        Some(n) if 2 * n as u32 <= MAX_AUTO_REPS => {
            let cap = (2 * n as u32).max(floor);
            (
                cap,
                format!(
                    "derived: {ends}; a commit at either end is told from their midpoint in \
                     about {n} reps (80% power), and the cap is {}",
                    if cap == 2 * n as u32 {
                        "twice that".to_string()
                    } else {
                        format!(
                            "{cap}, the fewest a derived cap gives (the steps may run on a \
                             busier machine than the ends did)"
                        )
                    }
                ),
            )
        }
        n => (
            MAX_AUTO_REPS,
            format!(
                "capped: {ends}; telling a commit at either end from their midpoint needs {} \
                 (80% power); {MAX_AUTO_REPS} is the most a derived cap asks (--reps sets any)",
                n.map_or("more than 100,000 reps".to_string(), |n| format!(
                    "about {n} reps, twice that as a cap"
                ))
            ),
        ),
    }
}

/// Ends this many times apart make a step pair its commit with the good end alone
/// ([`Position::against_good`]): the bad end's reps then cost more than the others
/// together would, and an error of the ends' own run in their distance is small
/// against it. Nearer ends run in every iteration, so that the midpoint moves with the
/// machine ([`Position::of`]).
pub const GOOD_END_ONLY_RATIO: f64 = 2.0;

/// The half gap (log units) a step places its commit against when the ends (good
/// against bad) are [`GOOD_END_ONLY_RATIO`] apart or more; `None`: both ends run.
pub fn good_end_only(ends: &crate::analysis::Comparison) -> Option<f64> {
    let ratio = 1.0 + ends.relative?;
    (ratio >= GOOD_END_ONLY_RATIO).then(|| ratio.ln() / 2.0)
}

/// A step's timeout from the ends' slowest rep: [`TIMEOUT_FACTOR`] times it, at least
/// [`MIN_TIMEOUT_S`].
pub fn rep_timeout_s(slowest: Duration) -> u64 {
    ((slowest.as_secs_f64() * TIMEOUT_FACTOR).ceil() as u64).max(MIN_TIMEOUT_S)
}

#[cfg(test)]
#[path = "sequential_tests.rs"]
mod tests;
