//! Choosing and reducing the sides of a diff: which variants are compared, whether
//! their workloads may be compared at all, and the measured reps of one variant of one
//! run reduced to one number per rep for every span name, measure and counter.
//!
//! A span name may occur several times in a rep (`synthesis[i]` on worker threads, a
//! `drop` per buffer): its per-rep value is the sum over its occurrences. A rep that
//! lacks a span the variant records in other reps contributes no value: the span is
//! compared over the reps where it exists, and the tables show how many those were.
//! (Time on the critical path is the exception: a rep that did not wait for a span
//! waited 0 for it.)

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{DiffError, WorkloadDifference};
use crate::counters::CounterKind;
use crate::store::{Meta, RepStatus, RunData, Shared, SpanRow, StoreError, VariantMeta};
use crate::trace::selftime::union_within;

/// Counter columns in spans.csv order.
pub(crate) const COUNTERS: [CounterKind; 6] = CounterKind::ALL;

/// How many reps of a variant entered the diff and how many were left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepCounts {
    /// Measured reps that succeeded and verified: the only ones compared.
    pub used: usize,
    /// Measured reps that failed or did not verify (excluded).
    pub failed: usize,
    /// Warm-up reps (excluded).
    pub warmup: usize,
}

/// Per-rep values of one span name.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Agg {
    pub present: bool,
    pub total_ns: u64,
    pub self_ns: u64,
    /// Time not covered by any child on any thread (see [`unattributed_ns`]).
    pub unattributed_ns: u64,
    /// Self time of the occurrences on the critical path (the root span's thread).
    pub critical_self_ns: u64,
    pub counters: [Option<u64>; 6],
    /// The span's own-thread counts plus those of its descendants on other threads
    /// (each thread's outermost span below it): e.g. `synthesis` with its
    /// `synthesis[i]` on workers.
    pub tree_counters: [Option<u64>; 6],
    /// Time with a GPU kernel running inside the span (CUPTI), where collected.
    pub gpu_busy_ns: Option<u64>,
    /// CPU time of the whole process inside the span (every thread), where recorded.
    pub process_cpu_ns: Option<u64>,
}

/// The measured reps of one variant, aggregated.
pub(crate) struct Side {
    pub counts: RepCounts,
    /// Span names in order of first appearance (the order of the span tree).
    pub names: Vec<Shared>,
    /// Per span name, one entry per used rep.
    pub per_name: HashMap<Shared, Vec<Agg>>,
    /// Span names that had children in at least one rep.
    pub wrappers: HashSet<Shared>,
    /// Names of root spans (no parent).
    pub roots: HashSet<Shared>,
    /// Per rep: duration of the root span(s), the end-to-end time.
    pub root_total_ns: Vec<u64>,
    /// Per counter, per rep: the count over every thread that recorded spans (sum over each
    /// thread's outermost spans, so nested spans are not counted twice).
    pub thread_totals: [Vec<Option<u64>>; 6],
    /// Counters meta.json reports as available (for an emulated variant: instructions
    /// and branches, which the emulator counted).
    pub counter_available: [bool; 6],
    /// The variant's counter source as meta.json records it ("hardware" for runs made
    /// before it was recorded).
    pub counter_source: String,
    /// What its reps ran when not the whole prover ("synthesis": a GPU backend under the
    /// emulator), from meta.json.
    pub scope: Option<String>,
    /// Per used rep: its iteration in the run's schedule (what pairs reps of two
    /// variants of one interleaved run).
    pub iterations: Vec<u32>,
    /// Per used rep: its number in the run's schedule.
    pub reps: Vec<u32>,
    /// The cores the process could use when it ran (meta.json's host `cpu_cores`: the
    /// scheduler affinity and cgroup quota, as `available_parallelism` reads them); 0
    /// when unknown.
    pub cpu_cores: u32,
}

/// Shortest span whose busy cores the diff reports: the process CPU clock of the other
/// threads advances at the scheduler's tick (4 ms at 250 Hz) when they keep running, so
/// CPU time over a shorter wall time can read more cores than exist.
pub const BUSY_CORES_MIN_SPAN_NS: u64 = 20_000_000;

/// Why a span's busy cores were left out, per rep.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BusyWithheld {
    pub too_short: usize,
    pub over_cores: usize,
}

impl Side {
    pub fn build(data: &RunData, variant: &str) -> Result<Side, StoreError> {
        let (mut side, rep_index) = Side::empty(data, variant);
        // Rep by rep, each rep's spans in file order: the maps of a rep's spans are held
        // while that rep is added, never the side's (nor, where the folder's spans were
        // left in it, more than that rep's rows).
        data.for_each_rep(|spans| side.add_if_used(&rep_index, variant, spans))?;
        Ok(side)
    }

    /// [`Side::build`] of two variants of one run, read once, each rep's spans also
    /// handed to `also`.
    pub fn build_pair(
        data: &RunData,
        a: &str,
        b: &str,
        mut also: impl FnMut(&[&SpanRow]),
    ) -> Result<(Side, Side), StoreError> {
        let (mut sa, ia) = Side::empty(data, a);
        let (mut sb, ib) = Side::empty(data, b);
        data.for_each_rep(|spans| {
            sa.add_if_used(&ia, a, spans);
            sb.add_if_used(&ib, b, spans);
            also(spans);
        })?;
        Ok((sa, sb))
    }

    /// Adds a rep's spans of `variant` where the rep is one of the side's (`rep_index`).
    fn add_if_used(&mut self, rep_index: &HashMap<u32, usize>, variant: &str, spans: &[&SpanRow]) {
        let mine: Vec<&SpanRow> = spans
            .iter()
            .copied()
            .filter(|s| s.variant == variant)
            .collect();
        if let Some(&i) = mine.first().and_then(|s| rep_index.get(&s.rep)) {
            self.add_rep(i, &mine);
        }
    }

    /// The side of `variant` with its reps' tables sized and no span added yet, and the
    /// index of each used rep.
    fn empty(data: &RunData, variant: &str) -> (Side, HashMap<u32, usize>) {
        // One pass over the run's rows builds every per-rep table the comparisons read (counts,
        // iterations, totals, counters, busy cores), so the rows are read once and the tables
        // agree on which reps they hold.
        let mut counts = RepCounts::default();
        let mut rep_index: HashMap<u32, usize> = HashMap::new();
        let mut iterations = Vec::new();
        let mut rep_ids = Vec::new();
        for r in data.runs.iter().filter(|r| r.variant == variant) {
            if r.warmup {
                counts.warmup += 1;
            } else if rep_index.contains_key(&r.rep) {
                // A rep twice (the store refuses such a folder): its index is taken.
                continue;
            } else if r.status == RepStatus::Ok && r.checked {
                rep_index.insert(r.rep, rep_index.len());
                iterations.push(r.iteration);
                rep_ids.push(r.rep);
            } else {
                counts.failed += 1;
            }
        }
        counts.used = rep_index.len();
        let reps = counts.used;

        let counter_source = data
            .meta
            .variants
            .iter()
            .find(|v| v.name == variant)
            .and_then(|v| v.counters.clone())
            .unwrap_or_else(|| "hardware".into());
        let emulated = counter_source.starts_with("emulated");
        let counter_available = COUNTERS.map(|k| {
            if emulated {
                matches!(k, CounterKind::Instructions | CounterKind::Branches)
            } else {
                data.meta
                    .counters
                    .get(k.column())
                    .is_some_and(|a| a.available)
            }
        });
        let side = Side {
            counts,
            names: Vec::new(),
            per_name: HashMap::new(),
            wrappers: HashSet::new(),
            roots: HashSet::new(),
            root_total_ns: vec![0; reps],
            thread_totals: std::array::from_fn(|_| vec![Some(0); reps]),
            counter_available,
            counter_source,
            scope: data
                .meta
                .variants
                .iter()
                .find(|v| v.name == variant)
                .and_then(|v| v.scope.clone()),
            iterations,
            cpu_cores: data.meta.host.cpu_cores,
            reps: rep_ids,
        };
        (side, rep_index)
    }

    /// Adds the spans of the rep at index `i` (in file order) to the side's tables.
    fn add_rep(&mut self, i: usize, spans: &[&SpanRow]) {
        let side = self;
        let by_id: HashMap<u64, &SpanRow> = spans.iter().map(|&s| (s.span_id, s)).collect();
        let mut children: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        for &s in spans {
            if let Some(p) = s.parent_id {
                children.entry(p).or_default().push((s.start_ns, s.end_ns));
            }
        }
        let reps = side.root_total_ns.len();
        let mut critical_memo: HashMap<u64, bool> = HashMap::new();
        for &s in spans {
            let parent = s.parent_id.and_then(|p| by_id.get(&p));
            if s.parent_id.is_none() {
                side.roots.insert(s.name.clone());
                side.root_total_ns[i] = side.root_total_ns[i].saturating_add(s.duration_ns);
            }
            if parent.is_none_or(|p| p.thread_id != s.thread_id) {
                for (k, total) in side.thread_totals.iter_mut().enumerate() {
                    total[i] = total[i]
                        .zip(s.counter(COUNTERS[k].column()))
                        .map(|(a, b)| a.saturating_add(b));
                }
            }
            let kids = children.get_mut(&s.span_id);
            if kids.is_some() && !side.wrappers.contains(s.name.as_str()) {
                side.wrappers.insert(s.name.clone());
            }
            let unattributed =
                unattributed_ns(s, kids.map(|k| k.as_mut_slice()).unwrap_or_default());
            let critical = on_critical_path(s, &by_id, &mut critical_memo);
            if !side.per_name.contains_key(s.name.as_str()) {
                side.names.push(s.name.clone());
                (side.per_name).insert(s.name.clone(), vec![Agg::default(); reps]);
            }
            let per_rep = (side.per_name.get_mut(s.name.as_str())).expect("just added");
            let a = &mut per_rep[i];
            let values = COUNTERS.map(|k| s.counter(k.column()));
            if a.present {
                for (acc, v) in a.counters.iter_mut().zip(values) {
                    *acc = acc.zip(v).map(|(x, y)| x.saturating_add(y));
                }
                a.gpu_busy_ns = a
                    .gpu_busy_ns
                    .zip(s.gpu_busy_ns.get())
                    .map(|(x, y)| x.saturating_add(y));
                a.process_cpu_ns = a
                    .process_cpu_ns
                    .zip(s.process_cpu_ns.get())
                    .map(|(x, y)| x.saturating_add(y));
            } else {
                a.present = true;
                a.counters = values;
                a.gpu_busy_ns = s.gpu_busy_ns.get();
                a.process_cpu_ns = s.process_cpu_ns.get();
            }
            add_counts(&mut a.tree_counters, values);

            a.total_ns = a.total_ns.saturating_add(s.duration_ns);
            a.self_ns = a.self_ns.saturating_add(s.self_ns);
            a.unattributed_ns = a.unattributed_ns.saturating_add(unattributed);
            if critical {
                a.critical_self_ns = a.critical_self_ns.saturating_add(s.self_ns);
            }
            // An outermost span of its thread counts into every ancestor on other threads,
            // up to the first on its own thread (whose count holds it already).
            if parent.is_some_and(|p| p.thread_id != s.thread_id) {
                let mut up = parent.copied();
                while let Some(p) = up.filter(|p| p.thread_id != s.thread_id) {
                    if let Some(agg) = side.per_name.get_mut(p.name.as_str()) {
                        add_counts(&mut agg[i].tree_counters, values);
                    }
                    up = p.parent_id.and_then(|q| by_id.get(&q)).copied();
                }
            }
        }
    }

    /// Per-rep values of `name` under `f`, None for reps without the span; empty when
    /// the variant never recorded it.
    pub fn times(&self, name: &str, f: impl Fn(&Agg) -> u64) -> Vec<Option<f64>> {
        self.per_name
            .get(name)
            .map(|v| v.iter().map(|a| a.present.then(|| f(a) as f64)).collect())
            .unwrap_or_default()
    }

    /// Per-rep counts of `name` for counter `k` (None where the rep has no value).
    pub fn span_counter(&self, name: &str, k: usize) -> Vec<Option<f64>> {
        self.per_name
            .get(name)
            .map(|v| v.iter().map(|a| a.counters[k].map(|c| c as f64)).collect())
            .unwrap_or_default()
    }

    /// Per-rep counts of `name` and its descendants on other threads for counter `k`.
    pub fn span_tree_counter(&self, name: &str, k: usize) -> Vec<Option<f64>> {
        self.per_name
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|a| a.tree_counters[k].map(|c| c as f64))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Per-rep GPU-busy time of `name` (None where the rep has no value).
    pub fn span_gpu_busy(&self, name: &str) -> Vec<Option<f64>> {
        self.per_name
            .get(name)
            .map(|v| v.iter().map(|a| a.gpu_busy_ns.map(|c| c as f64)).collect())
            .unwrap_or_default()
    }

    /// Per-rep process CPU time of `name` (None where the rep has no value).
    pub fn span_process_cpu(&self, name: &str) -> Vec<Option<f64>> {
        self.per_name
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|a| a.process_cpu_ns.map(|c| c as f64))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Per-rep busy cores of `name`: process CPU time over the span's summed duration
    /// (None where the rep has no CPU time or no duration).
    pub fn span_busy_cores(&self, name: &str) -> Vec<Option<f64>> {
        self.busy_cores_of(name).0
    }

    /// Busy cores per rep (process CPU time over the span's wall time), withheld (None)
    /// where the span is shorter than [`BUSY_CORES_MIN_SPAN_NS`] or the value exceeds
    /// the cores the process could use (2% over, for the clocks' reading times); how
    /// many were withheld for each reason.
    pub fn busy_cores_of(&self, name: &str) -> (Vec<Option<f64>>, BusyWithheld) {
        let mut w = BusyWithheld::default();
        let cap = self.cpu_cores as f64 * 1.02;
        let v = self
            .per_name
            .get(name)
            .map(|v| {
                v.iter()
                    .map(|a| {
                        let c = a.process_cpu_ns.filter(|_| a.total_ns > 0)?;
                        if a.total_ns < BUSY_CORES_MIN_SPAN_NS {
                            w.too_short += 1;
                            return None;
                        }
                        let cores = c as f64 / a.total_ns as f64;
                        if self.cpu_cores > 0 && cores > cap {
                            w.over_cores += 1;
                            return None;
                        }
                        Some(cores)
                    })
                    .collect()
            })
            .unwrap_or_default();
        (v, w)
    }

    /// Per-rep count of counter `k` over every span thread (None where not counted).
    pub fn thread_total(&self, k: usize) -> Vec<Option<f64>> {
        self.thread_totals[k]
            .iter()
            .map(|c| c.map(|c| c as f64))
            .collect()
    }
}

/// Adds `values` to `acc`, treating a first value as the start (an absent counter stays
/// absent once a value is missing).
fn add_counts(acc: &mut [Option<u64>; 6], values: [Option<u64>; 6]) {
    for (a, v) in acc.iter_mut().zip(values) {
        *a = match (*a, v) {
            (Some(x), Some(y)) => Some(x.saturating_add(y)),
            (None, v) => v,
            (Some(_), None) => None,
        };
    }
}

/// Reps of two variants of one interleaved run that belong together: the baseline's and
/// the candidate's rep of the same iteration, as indices into each [`Side`]'s reps.
/// Only variants of one run whose schedule alternates them (interleaved or
/// counterbalanced) are paired: their reps of one iteration ran back to back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pairs(Vec<(usize, usize)>);

impl Pairs {
    pub fn of(base: &Side, cand: &Side) -> Pairs {
        let at: HashMap<u32, usize> = cand
            .iterations
            .iter()
            .enumerate()
            .map(|(j, &it)| (it, j))
            .collect();
        Pairs(
            base.iterations
                .iter()
                .enumerate()
                .filter_map(|(i, it)| at.get(it).map(|&j| (i, j)))
                .collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// (baseline, candidate) values of each pair where both reps have one.
    pub fn values(&self, base: &[Option<f64>], cand: &[Option<f64>]) -> Vec<(f64, f64)> {
        self.0
            .iter()
            .filter_map(|&(i, j)| Some((base.get(i).copied()??, cand.get(j).copied()??)))
            .collect()
    }

    /// [`Pairs::values`] of per-rep values every rep has.
    pub fn values_all(&self, base: &[f64], cand: &[f64]) -> Vec<(f64, f64)> {
        self.0
            .iter()
            .filter_map(|&(i, j)| Some((*base.get(i)?, *cand.get(j)?)))
            .collect()
    }
}

/// The values of the reps that have one.
pub(crate) fn present(v: &[Option<f64>]) -> Vec<f64> {
    v.iter().flatten().copied().collect()
}

/// Time of `s` covered by none of its children, on any thread, clipped to `s`.
///
/// Unlike `self_ns` (children on the same thread only), a parent that waits for workers
/// (`synthesis` over `synthesis[i]`) is covered by them here: a gap is time in which no
/// recorded work of the span was running at all.
pub(crate) fn unattributed_ns(s: &SpanRow, children: &mut [(u64, u64)]) -> u64 {
    let covered = union_within(children, s.start_ns, s.end_ns);
    s.duration_ns.saturating_sub(covered)
}

/// A span is on the critical path when it and every ancestor up to the root ran on the
/// root's thread (the thread whose duration is the end-to-end time). `memo` holds the
/// answers found so far in the rep whose spans `by_id` holds, so that a deep tree is
/// walked once.
fn on_critical_path(
    s: &SpanRow,
    by_id: &HashMap<u64, &SpanRow>,
    memo: &mut HashMap<u64, bool>,
) -> bool {
    s.on_critical_path_memo(|id| by_id.get(&id).copied(), by_id.len(), memo)
}

/// Default variants: for one run, `baseline` and `candidate` when so named, otherwise
/// the first and the next variant of meta.json; for two runs, the baseline is chosen in
/// the first the same way and the candidate is the second run's variant of the same
/// name, else its first. Explicit names win.
pub fn pick_variants(
    a: &RunData,
    b: Option<&RunData>,
    baseline: Option<&str>,
    candidate: Option<&str>,
) -> Result<(String, String), DiffError> {
    let names = |d: &RunData| {
        d.meta
            .variants
            .iter()
            .map(|v| v.name.clone())
            .collect::<Vec<_>>()
    };
    let na = names(a);
    let first = |n: &[String]| n.first().cloned().unwrap_or_default();
    let base = match baseline {
        Some(s) => s.to_string(),
        None if na.iter().any(|n| n == "baseline") => "baseline".into(),
        None => first(&na),
    };
    let cand = match (candidate, b) {
        (Some(s), _) => s.to_string(),
        (None, Some(other)) => {
            let nb = names(other);
            if nb.contains(&base) {
                base.clone()
            } else {
                first(&nb)
            }
        }
        (None, None) if na.iter().any(|n| n == "candidate") && base != "candidate" => {
            "candidate".into()
        }
        (None, None) => match na.iter().find(|n| **n != base) {
            Some(n) => n.clone(),
            None => {
                return Err(DiffError::OneVariant {
                    run: a.dir.clone(),
                    name: base,
                })
            }
        },
    };
    Ok((base, cand))
}

pub(crate) fn variant<'a>(data: &'a RunData, name: &str) -> Result<&'a VariantMeta, DiffError> {
    data.meta
        .variants
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| DiffError::UnknownVariant {
            run: data.dir.clone(),
            name: name.to_string(),
            available: data.meta.variants.iter().map(|v| v.name.clone()).collect(),
        })
}

/// Both sides come from one run folder (the same data, or the same folder on disk).
pub(crate) fn same_run(a: &RunData, b: &RunData) -> bool {
    std::ptr::eq(a, b)
        || a.dir == b.dir
        || matches!((a.dir.canonicalize(), b.dir.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// A host as a refusal names it: its fingerprint's id and what it stands for.
fn host_label(m: &Meta) -> String {
    let h = crate::store::host::of(m);
    format!("{} [{}]", h.id, h.fingerprint)
}

/// Every difference of workload (circuit, size, batch, backend) and machine (host, CPU,
/// GPU) between two sides. Variants of one run share everything but the backend, which
/// the experiment chose on purpose, so they are never refused.
pub(crate) fn workload_differences(
    a: &RunData,
    va: &VariantMeta,
    b: &RunData,
    vb: &VariantMeta,
) -> Vec<WorkloadDifference> {
    if same_run(a, b) {
        return Vec::new();
    }
    let (ma, mb) = (&a.meta, &b.meta);
    let gpu_names = |m: &Meta| -> String {
        let names: Vec<String> = m
            .gpu
            .devices
            .iter()
            .map(|d| {
                d.get("name")
                    .and_then(|n| n.as_str())
                    .map(str::to_string)
                    .unwrap_or_else(|| d.to_string())
            })
            .collect();
        if m.gpu.available {
            format!("{} GPU(s): {}", names.len(), names.join(", "))
        } else {
            "no GPU".into()
        }
    };
    let fields = [
        (
            "kind",
            ma.workload.kind().as_str().to_string(),
            mb.workload.kind().as_str().to_string(),
        ),
        (
            "circuit",
            ma.workload.field("circuit"),
            mb.workload.field("circuit"),
        ),
        (
            "log2_constraints",
            ma.workload.field("log2_constraints"),
            mb.workload.field("log2_constraints"),
        ),
        (
            "batch",
            ma.workload.field("batch"),
            mb.workload.field("batch"),
        ),
        ("backend", va.backend.clone(), vb.backend.clone()),
        // The host fingerprint (store::host), not the hostname: a reboot or a new VM of
        // the same machine type is the same host, a driver upgrade is not.
        ("host", host_label(ma), host_label(mb)),
        (
            "cpu_model",
            ma.host.cpu_model.clone(),
            mb.host.cpu_model.clone(),
        ),
        (
            "cpu_cores",
            ma.host.cpu_cores.to_string(),
            mb.host.cpu_cores.to_string(),
        ),
        ("gpu", gpu_names(ma), gpu_names(mb)),
    ];
    fields
        .into_iter()
        .filter(|(_, x, y)| x != y)
        .map(|(field, baseline, candidate)| WorkloadDifference {
            field: field.into(),
            baseline,
            candidate,
        })
        .collect()
}
