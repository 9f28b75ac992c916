//! Cost of `gapscope diff` on a large run: 50 spans per rep, every counter recorded, so
//! each side yields 50 × (total, self, 6 counters) + 6 whole-rep metrics, each with a
//! 2,000-resample bootstrap and a rank test, plus gaps and contributions. Target: under
//! a second for 1,000 reps.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gapscope::analysis::synthetic::SyntheticRun;
use gapscope::analysis::{diff_runs, DiffOptions};

fn large_run(reps_per_variant: usize) -> SyntheticRun {
    let mut run = SyntheticRun::new();
    run.reps = reps_per_variant;
    run.hardware_counters = true;
    run.extra_kernels = 50 - run.spans_per_rep();
    run.variant_mut("candidate")
        .scale
        .insert("msm_h".into(), 1.02);
    assert_eq!(run.spans_per_rep(), 50);
    run
}

fn diff(c: &mut Criterion) {
    let mut group = c.benchmark_group("diff_50_spans");
    group.sample_size(10);
    // 1,000 reps in the run (500 per variant), and 1,000 per variant.
    for reps_per_variant in [500usize, 1000] {
        let data = large_run(reps_per_variant).build();
        let opts = DiffOptions::default();
        group.bench_with_input(
            BenchmarkId::new("reps_per_variant", reps_per_variant),
            &data,
            |b, data| {
                b.iter(|| diff_runs(data, "baseline", data, "candidate", &opts).expect("diff"))
            },
        );
    }
    group.finish();
}

criterion_group!(benches, diff);
criterion_main!(benches);
