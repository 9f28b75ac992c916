//! Synthetic run folders with known effects, for tests and benchmarks of the analysis:
//! the canonical prover span tree with per-span scale factors, a controllable gap in
//! the GPU wrapper, sync or async drops, failed reps and multiplicative noise.
//! Nothing here is measured; it exists so that the diff can be checked against effects
//! that are known exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::counters::{Availability, CounterKind};
use crate::store::{
    CircuitMeta, GitInfo, GpuMeta, HostInfo, Meta, PhaseSpec, RepStatus, RunData, RunRow,
    RunWriter, SpanRow, StoreError, VariantMeta, WorkloadKind, WorkloadMeta, SCHEMA_VERSION,
};
use crate::trace::selftime::{self_times, union_within, Interval};

/// One variant of a synthetic run.
#[derive(Debug, Clone)]
pub struct SyntheticVariant {
    pub name: String,
    pub knobs: BTreeMap<String, String>,
    /// Multiplies the time a span spends itself (its self time), by span name.
    pub scale: BTreeMap<String, f64>,
    /// Extra unattributed time inside `gpu_prove`, ns.
    pub gpu_gap_ns: u64,
    /// `drop` and `drop_assignments` run on a background thread, off the critical path.
    pub async_drop: bool,
    /// The last this many measured reps fail (their spans are 10× slower, so a diff that
    /// let them in would show it).
    pub failed_reps: usize,
    /// Host RSS after each rep grows by this much per rep of the variant (a leak); it
    /// starts at 512 MiB.
    pub rss_growth_bytes_per_rep: u64,
    /// The rep after one of this variant (of any variant) is slower by this fraction: a
    /// carry-over, e.g. heap state left behind.
    pub slows_next_rep: f64,
}

impl SyntheticVariant {
    pub fn new(name: &str) -> Self {
        SyntheticVariant {
            name: name.into(),
            knobs: BTreeMap::from([("drop".to_string(), "sync".to_string())]),
            scale: BTreeMap::new(),
            gpu_gap_ns: 0,
            async_drop: false,
            failed_reps: 0,
            rss_growth_bytes_per_rep: 0,
            slows_next_rep: 0.0,
        }
    }

    /// Scales span `name`'s own time by `factor`.
    pub fn scaled(mut self, name: &str, factor: f64) -> Self {
        self.scale.insert(name.into(), factor);
        self
    }
}

/// A synthetic run: workload, machine, reps and variants.
#[derive(Debug, Clone)]
pub struct SyntheticRun {
    pub experiment: String,
    pub workload: CircuitMeta,
    pub hostname: String,
    /// Measured reps per variant.
    pub reps: usize,
    pub warmups: usize,
    pub variants: Vec<SyntheticVariant>,
    /// Relative standard deviation of every span's own time.
    pub noise: f64,
    /// instructions / branches / cycles recorded (else unavailable, as on a VM).
    pub hardware_counters: bool,
    /// Spans carry `gpu_busy_ns`: the kernel leaves' time inside them, as CUPTI would
    /// report it.
    pub gpu_activity: bool,
    /// Leaf spans added under `kernels` (kernel_0, kernel_1, …) to reach a span count.
    pub extra_kernels: usize,
    /// Machine drift between iterations: each iteration is, with probability ½, slower
    /// by this fraction for every variant alike (a CPU whose memory got slower for a
    /// while, as on a shared host). 0 = none.
    pub drift: f64,
    /// Schedule order: odd iterations run the variants in reverse (ABBA…), as gapscope's
    /// `order = "counterbalanced"`; else interleaved (ABAB…).
    pub counterbalanced: bool,
    pub seed: u64,
}

impl SyntheticRun {
    /// Two variants, `baseline` and `candidate`, identical unless changed; 10 reps,
    /// 1 warm-up, 0.5 % noise, the 18 spans of the canonical tree with batch 2.
    pub fn new() -> Self {
        SyntheticRun {
            experiment: "synthetic".into(),
            workload: CircuitMeta {
                circuit: "porep".into(),
                log2_constraints: 12,
                batch: 2,
                backend: "cpu".into(),
            },
            hostname: "synthetic-host".into(),
            reps: 10,
            warmups: 1,
            variants: vec![
                SyntheticVariant::new("baseline"),
                SyntheticVariant::new("candidate"),
            ],
            noise: 0.005,
            hardware_counters: false,
            gpu_activity: false,
            extra_kernels: 0,
            drift: 0.0,
            counterbalanced: false,
            seed: 1,
        }
    }

    /// The variant named `name` (panics when absent: a test-setup mistake).
    pub fn variant_mut(&mut self, name: &str) -> &mut SyntheticVariant {
        self.variants
            .iter_mut()
            .find(|v| v.name == name)
            .expect("no such synthetic variant")
    }

    /// Spans per rep.
    pub fn spans_per_rep(&self) -> usize {
        16 + self.workload.batch as usize + self.extra_kernels
    }

    fn meta(&self) -> Meta {
        let counters = CounterKind::ALL
            .iter()
            .map(|k| {
                let available = !k.is_hardware() || self.hardware_counters;
                let reason = (!available)
                    .then(|| "no hardware performance counters (synthetic run)".to_string());
                (k.column().to_string(), Availability { available, reason })
            })
            .collect();
        Meta {
            schema_version: SCHEMA_VERSION,
            gapscope_version: env!("CARGO_PKG_VERSION").into(),
            experiment: self.experiment.clone(),
            run_id: format!("synthetic-{}", self.seed),
            created_utc: "2026-01-01T00:00:00Z".into(),
            command: vec!["synthetic".into()],
            host: HostInfo {
                hostname: self.hostname.clone(),
                os: "Linux".into(),
                kernel: "6".into(),
                cpu_model: "Synthetic CPU".into(),
                // Enough cores for the fixture's three busy ones (busy cores above the
                // host's cores are withheld as impossible).
                cpu_cores: 16,
                memory_bytes: 1 << 34,
            },
            git: GitInfo::default(),
            counters,
            gpu: GpuMeta::default(),
            workload: WorkloadMeta {
                kind: Some(WorkloadKind::Groth16),
                circuit: Some(self.workload.clone()),
            },
            variants: self
                .variants
                .iter()
                .map(|v| VariantMeta {
                    name: v.name.clone(),
                    backend: self.workload.backend.clone(),
                    knobs: v.knobs.clone(),
                    counters: None,
                    scope: None,
                    revision: None,
                    patches: Vec::new(),
                    patch_failed: None,
                })
                .collect(),
            reps: self.reps as u32,
            warmups: self.warmups as u32,
            order: if self.counterbalanced {
                "counterbalanced"
            } else {
                "interleaved"
            }
            .into(),
            process: "shared".into(),
            params: Vec::new(),
            setup_ns: BTreeMap::new(),
            completed_utc: Some("2026-01-01T00:01:00Z".into()),
            experiment_sha256: None,
            command_workload: None,
            profile: Default::default(),
            recorder: None,
            drift: None,
            gaps: None,
            until_decided: None,
            phases: Some(PhaseSpec::groth16()),
            paths: None,
        }
    }

    /// Every rep in schedule order (interleaved or counterbalanced), with its spans.
    fn reps(&self) -> Vec<(RunRow, Vec<SpanRow>)> {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let mut out = Vec::new();
        let mut drift_rng = StdRng::seed_from_u64(self.seed ^ 0xd21f7);
        let (mut clock, mut next_id) = (1_000_000_000u64, 1u64);
        let mut carried = 0.0;
        for iteration in 0..self.warmups + self.reps {
            let drift = if self.drift > 0.0 && drift_rng.gen_bool(0.5) {
                1.0 + self.drift
            } else {
                1.0
            };
            let mut order: Vec<&SyntheticVariant> = self.variants.iter().collect();
            if self.counterbalanced && iteration % 2 == 1 {
                order.reverse();
            }
            for v in order {
                let slow = drift * (1.0 + carried);
                carried = v.slows_next_rep;
                let rep = out.len() as u32;
                let warmup = iteration < self.warmups;
                let measured = iteration.saturating_sub(self.warmups);
                let failed = !warmup && measured >= self.reps - v.failed_reps.min(self.reps);
                // A failed rep's spans are 10× slower.
                let slow = if failed { 10.0 } else { slow };
                let spans = self.rep_spans(v, rep, clock, &mut next_id, slow, &mut rng);
                let prove = &spans[0];
                let row = RunRow {
                    rep,
                    variant: v.name.clone(),
                    iteration: if warmup { iteration } else { measured } as u32,
                    warmup,
                    status: if failed {
                        RepStatus::Failed
                    } else {
                        RepStatus::Ok
                    },
                    checked: !failed,
                    outputs: self.workload.batch,
                    start_ns: prove.start_ns,
                    wall_ns: if failed { 0 } else { prove.duration_ns },
                    started_utc: String::new(),
                    pid: 1,
                    rss_end_bytes: Some(
                        (512 << 20) + iteration as u64 * v.rss_growth_bytes_per_rep,
                    ),
                    gpu_mem_used_end_bytes: None,
                    error: if failed {
                        "proof did not verify (synthetic)".into()
                    } else {
                        String::new()
                    },
                    span_rows: None,
                };
                clock = spans.iter().map(|s| s.end_ns).max().unwrap_or(clock) + 1_000_000;
                out.push((row, spans));
            }
        }
        out
    }

    fn rep_spans(
        &self,
        v: &SyntheticVariant,
        rep: u32,
        t0: u64,
        next_id: &mut u64,
        slow: f64,
        rng: &mut StdRng,
    ) -> Vec<SpanRow> {
        // The whole span tree of one synthetic rep, parent before child, with its noise and
        // drift drawn in that order so a seed gives the same run: long because the tree is
        // written out, not because it branches.
        let mut tr = Tree {
            spans: Vec::new(),
            next_id,
            rng,
            variant: v,
            slow,
            noise: self.noise,
            t: t0,
        };
        let prove = tr.open("prove", None, MAIN);
        tr.t += tr.own("prove", 40e3);
        let synth = tr.open("synthesis", Some(prove), MAIN);
        let (start, mut workers_end) = (tr.t + 50_000, tr.t);
        for i in 0..self.workload.batch as u64 {
            let name = format!("synthesis[{i}]");
            let w = tr.open_at(&name, Some(synth), 10 + i, start);
            let end = start + tr.own(&name, 12e6);
            tr.close_at(w, end);
            workers_end = workers_end.max(end);
        }
        tr.t = workers_end + tr.own("synthesis", 150e3);
        tr.close(synth);

        let gpu = tr.open("gpu_prove", Some(prove), MAIN);
        tr.t += tr.own("gpu_prove", 60e3);
        tr.leaf("entry", gpu, 6e3);
        tr.leaf("prep", gpu, 1.2e6);
        tr.leaf("split_vectors_alloc", gpu, 130e3);
        let kernels = tr.open("kernels", Some(gpu), MAIN);
        tr.t += tr.own("kernels", 270e3);
        for (name, base) in [
            ("ntt_h", 38e6),
            ("msm_h", 690e6),
            ("msm_l", 75e6),
            ("msm_a", 89e6),
            ("msm_b_g1", 85e6),
        ] {
            tr.leaf(name, kernels, base);
        }
        for k in 0..self.extra_kernels {
            tr.leaf(&format!("kernel_{k}"), kernels, 1e6);
        }
        tr.close(kernels);
        tr.leaf("b_g2_msm", gpu, 140e6);
        tr.leaf("assemble", gpu, 1.6e6);
        // Unmeasured work at the end of the wrapper (e.g. freeing vectors untraced).
        tr.t += (v.gpu_gap_ns as f64 * tr.slow) as u64;
        let mut bg = tr.t;
        tr.drop_span("drop", gpu, 25e3, &mut bg);
        tr.close(gpu);
        tr.drop_span("drop_assignments", prove, 8e3, &mut bg);
        tr.close(prove);

        let spans = tr.spans;
        let intervals: Vec<Interval> = spans.iter().map(|s| s.0).collect();
        let selfs = self_times(&intervals);
        let kernel_leaves: Vec<(u64, u64)> = intervals
            .iter()
            .filter(|iv| iv.parent == Some(kernels))
            .map(|iv| (iv.start_ns, iv.end_ns))
            .collect();
        let busy = |iv: &Interval| {
            self.gpu_activity
                .then(|| union_within(&mut kernel_leaves.clone(), iv.start_ns, iv.end_ns))
        };
        spans
            .into_iter()
            .zip(selfs)
            .map(|((iv, name), self_ns)| {
                let d = iv.end_ns - iv.start_ns;
                let gpu_busy_ns = busy(&iv);
                let hw = |per_ns: f64| self.hardware_counters.then_some((d as f64 * per_ns) as u64);
                SpanRow {
                    rep,
                    variant: v.name.clone().into(),
                    span_id: iv.id,
                    parent_id: iv.parent,
                    name: name.into(),
                    thread_id: iv.thread_id,
                    thread_name: match iv.thread_id {
                        MAIN => "main".into(),
                        DROP_THREAD => "gapscope-drop".into(),
                        t => format!("thread-{t}").into(),
                    },
                    start_ns: iv.start_ns,
                    end_ns: iv.end_ns,
                    duration_ns: d,
                    self_ns,
                    instructions: hw(2.0).into(),
                    branches: hw(0.25).into(),
                    cycles: hw(3.0).into(),
                    task_clock_ns: Some(d * 19 / 20).into(),
                    page_faults: Some(d / 1_000_000).into(),
                    context_switches: Some(d / 50_000_000).into(),
                    attrs: "{}".into(),
                    gpu_busy_ns: gpu_busy_ns.into(),
                    // A host that keeps about three cores busy throughout.
                    process_cpu_ns: Some(d * 3).into(),
                }
            })
            .collect()
    }

    /// The run in memory (its `dir` is a placeholder).
    pub fn build(&self) -> RunData {
        let (runs, spans): (Vec<RunRow>, Vec<Vec<SpanRow>>) = self.reps().into_iter().unzip();
        RunData {
            dir: PathBuf::from(format!(
                "<synthetic {} seed {}>",
                self.experiment, self.seed
            )),
            meta: self.meta(),
            runs,
            spans: spans.into_iter().flatten().collect(),
            spans_on_disk: false,
        }
    }

    /// Writes the run as a real run folder at `dir` (which must not exist) and reads it back.
    pub fn write(&self, dir: &Path) -> Result<RunData, StoreError> {
        let mut w = RunWriter::create(dir, &self.meta(), "# synthetic run\n")?;
        for (row, spans) in self.reps() {
            w.append_rep(&row, &spans)?;
        }
        RunData::load(dir)
    }
}

impl Default for SyntheticRun {
    fn default() -> Self {
        SyntheticRun::new()
    }
}

const MAIN: u64 = 1;
const DROP_THREAD: u64 = 99;

/// The spans of one rep under construction, with the main thread's clock.
struct Tree<'a> {
    spans: Vec<(Interval, String)>,
    next_id: &'a mut u64,
    rng: &'a mut StdRng,
    variant: &'a SyntheticVariant,
    slow: f64,
    noise: f64,
    t: u64,
}

impl Tree<'_> {
    /// A span's own time: base × the variant's scale × noise.
    fn own(&mut self, name: &str, base_ns: f64) -> u64 {
        let (u1, u2): (f64, f64) = (self.rng.gen_range(f64::EPSILON..1.0), self.rng.gen());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let f = self.variant.scale.get(name).copied().unwrap_or(1.0)
            * self.slow
            * (1.0 + self.noise * z);
        (base_ns * f).max(1.0) as u64
    }

    fn open_at(&mut self, name: &str, parent: Option<u64>, thread_id: u64, start_ns: u64) -> u64 {
        let id = *self.next_id;
        *self.next_id += 1;
        let iv = Interval {
            id,
            parent,
            thread_id,
            start_ns,
            end_ns: start_ns,
        };
        self.spans.push((iv, name.to_string()));
        id
    }

    fn open(&mut self, name: &str, parent: Option<u64>, thread_id: u64) -> u64 {
        self.open_at(name, parent, thread_id, self.t)
    }

    fn close_at(&mut self, id: u64, end_ns: u64) {
        if let Some(s) = self.spans.iter_mut().find(|s| s.0.id == id) {
            s.0.end_ns = end_ns;
        }
    }

    fn close(&mut self, id: u64) {
        self.close_at(id, self.t);
    }

    fn leaf(&mut self, name: &str, parent: u64, base_ns: f64) {
        let id = self.open(name, Some(parent), MAIN);
        self.t += self.own(name, base_ns);
        self.close(id);
    }

    /// A drop: on the main thread (sync) or after `bg` on the background thread (async).
    fn drop_span(&mut self, name: &str, parent: u64, base_ns: f64, bg: &mut u64) {
        if self.variant.async_drop {
            *bg = (*bg).max(self.t) + 20_000;
            let id = self.open_at(name, Some(parent), DROP_THREAD, *bg);
            *bg += self.own(name, base_ns);
            self.close_at(id, *bg);
        } else {
            self.leaf(name, parent, base_ns);
        }
    }
}
