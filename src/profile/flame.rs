//! Flame graphs from the stored stacks (inferno): one span's stacks summed over reps,
//! and the differential graph of one span between two sets of reps, with the functions
//! whose samples changed most.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};

use super::RepProfile;

/// Root frame of samples taken on a thread with no span of its own open.
pub const OTHER_THREADS: &str = "[other threads]";
/// Root frame of samples taken on the span's own thread.
pub const OWN_THREAD: &str = "[span's thread]";

/// One span's stacks summed over some reps: its own samples and those of the spans
/// below it, each stack under the path of spans from it down to the sample's span
/// (`[gpu_prove];[kernels];[other threads];frame;…`), so the graph's lowest layers are
/// the span tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanStacks {
    pub span: String,
    /// Reps that contributed (profiled and not unavailable).
    pub reps: usize,
    /// Folded stack (thread kind first) → samples summed over the reps.
    pub stacks: BTreeMap<String, u64>,
}

impl SpanStacks {
    pub fn total(&self) -> u64 {
        self.stacks.values().sum()
    }

    /// Samples per rep of each stack (rounded; at least one rep).
    fn per_rep_lines(&self) -> Vec<String> {
        let n = self.reps.max(1) as f64;
        self.stacks
            .iter()
            .filter_map(|(s, &c)| {
                let per = (c as f64 / n).round() as u64;
                (per > 0).then(|| format!("{s} {per}"))
            })
            .collect()
    }
}

/// Spans from a selected span down to a sample's span, by name; `None` where the
/// sample's span (rep, span id) is not under the selected one.
pub type SpanPath<'a> = &'a dyn Fn(u32, u64) -> Option<Vec<String>>;

/// The stacks under span `span` in `profiles` restricted to `reps`; `path` says which
/// samples' spans lie under it and along which spans.
pub fn span_stacks(
    profiles: &[RepProfile],
    reps: &[u32],
    span: &str,
    path: SpanPath,
) -> SpanStacks {
    let mut out = SpanStacks {
        span: span.to_string(),
        ..Default::default()
    };
    for p in profiles
        .iter()
        .filter(|p| reps.contains(&p.rep) && p.unavailable.is_none())
    {
        out.reps += 1;
        for r in &p.rows {
            let Some(spans) = path(p.rep, r.span_id) else {
                continue;
            };
            let kind = if r.foreign { OTHER_THREADS } else { OWN_THREAD };
            let key = spans
                .iter()
                .map(|s| format!("[{s}]"))
                .chain(std::iter::once(kind.to_string()))
                .chain(r.frames.iter().cloned())
                .collect::<Vec<_>>()
                .join(";");
            *out.stacks.entry(key).or_default() += r.count;
        }
    }
    out
}

fn options(title: String, subtitle: String) -> inferno::flamegraph::Options<'static> {
    let mut o = inferno::flamegraph::Options::default();
    o.title = title;
    o.subtitle = Some(subtitle);
    o.count_name = "samples".into();
    o.deterministic = true;
    o.hash = true;
    // Frames under one pixel wide (0.08% of a 1200-px graph) are left out: they make
    // most of the file and cannot be read.
    o.min_width = 1.0;
    o
}

/// Draws `s` as an SVG flame graph at `out` (written whole through [`crate::fsx`]).
pub fn draw(s: &SpanStacks, hz: u32, out: &Path) -> Result<()> {
    let mut o = options(
        format!("{}: sampled stacks", s.span),
        format!(
            "{} samples over {} reps at {hz} Hz of each thread's CPU time",
            s.total(),
            s.reps
        ),
    );
    let lines: Vec<String> = s.stacks.iter().map(|(k, c)| format!("{k} {c}")).collect();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut o, lines.iter().map(String::as_str), &mut svg)
        .with_context(|| format!("drawing {}", out.display()))?;
    crate::fsx::write_file(out, &svg)?;
    Ok(())
}

/// Draws the differential flame graph from `before` to `after` (samples per rep) at
/// `out`: the shape is `after`'s, red where a frame gained samples, blue where it lost.
pub fn draw_diff(before: &SpanStacks, after: &SpanStacks, out: &Path) -> Result<()> {
    let b = before.per_rep_lines().join("\n");
    let a = after.per_rep_lines().join("\n");
    let mut folded = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        b.as_bytes(),
        a.as_bytes(),
        &mut folded,
    )?;
    let mut o = options(
        format!("{}: change in sampled stacks (per rep)", after.span),
        format!(
            "red grew, blue shrank; baseline {} reps, candidate {} reps",
            before.reps, after.reps
        ),
    );
    let mut svg = Vec::new();
    inferno::flamegraph::from_reader(&mut o, folded.as_slice(), &mut svg)
        .with_context(|| format!("drawing {}", out.display()))?;
    crate::fsx::write_file(out, &svg)?;
    Ok(())
}

/// One function's samples per rep (inclusive: stacks it is on) in two sets of reps.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionChange {
    pub function: String,
    pub before: f64,
    pub after: f64,
}

impl FunctionChange {
    pub fn delta(&self) -> f64 {
        self.after - self.before
    }
}

fn inclusive_per_rep(s: &SpanStacks) -> BTreeMap<String, f64> {
    let n = s.reps.max(1) as f64;
    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    for (stack, &c) in &s.stacks {
        // Functions only (span and thread-kind frames are bracketed); a recursive
        // function counts once per stack.
        let frames: BTreeSet<&str> = stack.split(';').filter(|f| !f.starts_with('[')).collect();
        for f in frames {
            *m.entry(f.to_string()).or_default() += c as f64 / n;
        }
    }
    m
}

/// The `top` functions whose samples per rep changed most (by absolute change).
pub fn function_changes(
    before: &SpanStacks,
    after: &SpanStacks,
    top: usize,
) -> Vec<FunctionChange> {
    let b = inclusive_per_rep(before);
    let a = inclusive_per_rep(after);
    let names: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    let mut v: Vec<FunctionChange> = names
        .into_iter()
        .map(|f| FunctionChange {
            function: f.clone(),
            before: b.get(f).copied().unwrap_or(0.0),
            after: a.get(f).copied().unwrap_or(0.0),
        })
        .filter(|c| c.delta() != 0.0)
        .collect();
    v.sort_by(|x, y| {
        y.delta()
            .abs()
            .total_cmp(&x.delta().abs())
            .then_with(|| x.function.cmp(&y.function))
    });
    v.truncate(top);
    v
}

/// The `top` functions by self samples (innermost frame) per rep.
pub fn top_self(s: &SpanStacks, top: usize) -> Vec<(String, f64)> {
    let n = s.reps.max(1) as f64;
    let mut m: BTreeMap<&str, f64> = BTreeMap::new();
    for (stack, &c) in &s.stacks {
        let leaf = stack.rsplit(';').next().unwrap_or_default();
        *m.entry(leaf).or_default() += c as f64 / n;
    }
    let mut v: Vec<(String, f64)> = m.into_iter().map(|(k, c)| (k.to_string(), c)).collect();
    v.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    v.truncate(top);
    v
}
