//! Sampled stacks in the report and the diff: a flame graph per variant of one span (by
//! default the span below the root with the most self time) with its top functions, and the
//! differential flame graph of one span between a baseline and a candidate.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::markup::{md_code, md_code_cell, md_text, terminal_safe};
use crate::profile::flame::{self, SpanStacks, OTHER_THREADS};
use crate::profile::{folded, RepProfile};
use crate::store::{family, RunData, RunView, SpanTime};

/// Each stored span's name (family) and parent, by (rep, span id).
pub struct SpanTree {
    spans: HashMap<(u32, u64), (String, Option<u64>)>,
}

impl SpanTree {
    pub fn new(data: &RunData) -> SpanTree {
        SpanTree {
            spans: data
                .spans
                .iter()
                .map(|s| {
                    (
                        (s.rep, s.span_id),
                        (family(&s.name).into_owned(), s.parent_id),
                    )
                })
                .collect(),
        }
    }

    /// Span families from the nearest span named `span` above (or at) `id` down to `id`;
    /// `None` if there is none.
    pub fn path(&self, rep: u32, id: u64, span: &str) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut cur = Some(id);
        while let Some(c) = cur {
            let (name, parent) = self.spans.get(&(rep, c))?;
            out.push(name.clone());
            if name == span {
                out.reverse();
                return Some(out);
            }
            cur = *parent;
        }
        None
    }
}

/// The least share of a run's samples a span must hold to be drawn by default.
pub const MIN_SHARE: f64 = 0.01;

/// The span below the root with the most self time (the largest median over the
/// variants' measured reps): an opaque call such as `supraseal_c2`, whose whole time is
/// its own, or the wrapper whose own time its children do not explain. Of the spans that
/// hold at least [`MIN_SHARE`] of the samples, where any do: an external program's span
/// whose thread only waits for another thread's spans has self time but (nearly) no
/// samples.
pub fn default_span(input: &RunView, profiles: &[RepProfile]) -> Option<String> {
    let variants = input.variants();
    let mut per_span: std::collections::BTreeMap<&str, u64> = Default::default();
    for r in profiles.iter().flat_map(|p| p.rows.iter()) {
        *per_span.entry(r.span.as_str()).or_default() += r.count;
    }
    let total: u64 = per_span.values().sum();
    let sampled: std::collections::BTreeSet<&str> = per_span
        .iter()
        .filter(|(_, &n)| n as f64 >= MIN_SHARE * total as f64)
        .map(|(s, _)| *s)
        .collect();
    input
        .span_order()
        .into_iter()
        .filter(|n| n != &input.data.meta.phases().root)
        .filter(|n| sampled.is_empty() || sampled.contains(n.as_str()))
        .map(|n| {
            let best = variants
                .iter()
                .filter_map(|v| input.median_of(v, &n, SpanTime::SelfTime))
                .fold(0.0, f64::max);
            (n, best)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, _)| n)
}

/// The stacks under `span` of `variant`'s measured reps.
pub fn variant_stacks(
    data: &RunData,
    profiles: &[RepProfile],
    variant: &str,
    span: &str,
) -> SpanStacks {
    let reps: Vec<u32> = data
        .runs
        .iter()
        .filter(|r| r.variant == variant && !r.warmup && r.status == crate::store::RepStatus::Ok)
        .map(|r| r.rep)
        .collect();
    let tree = SpanTree::new(data);
    flame::span_stacks(profiles, &reps, span, &|rep, id| tree.path(rep, id, span))
}

/// Samples per rep in the span's own time (not in a span below it), and on threads
/// with no span of their own.
fn shares(s: &SpanStacks) -> (f64, f64) {
    let n = s.reps.max(1) as f64;
    let (mut own, mut other) = (0u64, 0u64);
    for (k, &c) in &s.stacks {
        let mut f = k.split(';');
        f.next();
        let second = f.next().unwrap_or_default();
        if !second.starts_with('[') || second == OTHER_THREADS || second == flame::OWN_THREAD {
            own += c;
        }
        if k.split(';').any(|f| f == OTHER_THREADS) {
            other += c;
        }
    }
    (own as f64 / n, other as f64 / n)
}

/// The check that the samples match the spans: CPU time the samples under `span` stand
/// for (samples / rate) against the process CPU time spans.csv recorded over the span,
/// both summed over `variant`'s measured, profiled reps. `None` where the span occurs
/// more than once in a rep (overlapping occurrences count the process twice) or has no
/// process CPU time.
pub fn cpu_check(
    data: &RunData,
    profiles: &[RepProfile],
    variant: &str,
    span: &str,
) -> Option<(f64, f64)> {
    let tree = SpanTree::new(data);
    let (mut sampled_s, mut recorded_s) = (0.0, 0.0);
    for p in profiles
        .iter()
        .filter(|p| p.variant == variant && p.unavailable.is_none() && p.hz > 0)
    {
        let measured = data
            .runs
            .iter()
            .any(|r| r.rep == p.rep && !r.warmup && r.status == crate::store::RepStatus::Ok);
        if !measured {
            continue;
        }
        let occ: Vec<_> = data
            .spans
            .iter()
            .filter(|s| s.rep == p.rep && family(&s.name) == span)
            .collect();
        let [one] = occ.as_slice() else {
            return None;
        };
        recorded_s += one.process_cpu_ns.get()? as f64 / 1e9;
        let n: u64 = p
            .rows
            .iter()
            .filter(|r| tree.path(p.rep, r.span_id, span).is_some())
            .map(|r| r.count)
            .sum();
        sampled_s += n as f64 / f64::from(p.hz);
    }
    (recorded_s > 0.0).then_some((sampled_s, recorded_s))
}

/// The same check per leaf span (no spans below it) under the drawn span: a table of
/// the CPU time its samples stand for against its recorded process CPU time.
fn leaf_check(input: &RunView, profiles: &[RepProfile], variant: &str, s: &SpanStacks) -> String {
    let mut leaves = std::collections::BTreeSet::new();
    for k in s.stacks.keys() {
        let spans: Vec<&str> = k
            .split(';')
            .take_while(|f| *f != OTHER_THREADS && *f != flame::OWN_THREAD)
            .collect();
        if let Some(last) = spans.last() {
            let name = last.trim_start_matches('[').trim_end_matches(']');
            if !input.is_wrapper(name) {
                leaves.insert(name.to_string());
            }
        }
    }
    let mut rows = Vec::new();
    for leaf in leaves {
        if let Some((sampled, recorded)) = cpu_check(&input.data, profiles, variant, &leaf) {
            rows.push((leaf, sampled, recorded));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let mut t = String::from(
        "| leaf span | CPU time of its samples | process CPU time over it | ratio |\n|---|---:|---:|---:|\n",
    );
    for (leaf, sampled, recorded) in rows {
        let _ = writeln!(
            t,
            "| {} | {sampled:.3} s | {recorded:.3} s | {:.0}% |",
            md_code_cell(&leaf),
            100.0 * sampled / recorded
        );
    }
    t.push('\n');
    t
}

fn file_name(prefix: &str, variant: &str, span: &str) -> String {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{prefix}-{}-{}.svg", safe(variant), safe(span))
}

/// report.md's section on sampled stacks; draws one flame graph per profiled variant
/// into `out`. Empty where the run has no sampled stacks.
pub fn section(input: &RunView, out: &Path, span: Option<&str>) -> String {
    // The samples read and the span chosen once, then per profiled variant its flame graph,
    // the samples' counts, the check against the spans' CPU time and the table of functions
    // with the most self time: one variant's parts share its stacks.
    let data = &input.data;
    if data.meta.profile.is_empty() {
        return String::new();
    }
    let mut md = String::from("## Sampled stacks\n\n");
    let profiles = match folded::read_run(&data.dir, true) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(
                md,
                "- ⚠ the sampled stacks could not be read: {}\n",
                md_text(&format!("{e:#}"))
            );
            return md;
        }
    };
    let chosen = span.is_some();
    let Some(span) = span
        .map(str::to_string)
        .or_else(|| default_span(input, &profiles))
    else {
        let _ = writeln!(md, "No span to draw.\n");
        return md;
    };
    let _ = writeln!(
        md,
        "Flame graphs of {}{}: every thread's stacks while it was open, under the spans \
         they ran in (bracketed frames). `[other threads]` holds samples from threads with no \
         span of their own (a C/C++ library's, or a pool's between tasks). Widths are samples \
         over the measured reps.\n",
        md_code(&span),
        if chosen {
            String::new()
        } else {
            format!(
                " (the span below {} with the most self time of those with 1% of the samples or more; `gapscope report --flame-span NAME` picks another)",
                md_code(&data.meta.phases().root)
            )
        }
    );
    for variant in input.variants() {
        let Some(status) = data.meta.profile.get(&variant) else {
            continue;
        };
        let _ = writeln!(md, "### {}\n", md_text(&variant));
        let status = md_text(status);
        let s = variant_stacks(data, &profiles, &variant, &span);
        if s.total() == 0 {
            let _ = writeln!(md, "No samples under {} ({status}).\n", md_code(&span));
            continue;
        }
        let name = file_name("flame", &variant, &span);
        let hz = profiles
            .iter()
            .find(|p| p.variant == variant)
            .map_or(0, |p| p.hz);
        if let Err(e) = flame::draw(&s, hz, &out.join(&name)) {
            let _ = writeln!(
                md,
                "- ⚠ the flame graph could not be drawn: {}\n",
                md_text(&format!("{e:#}"))
            );
            continue;
        }
        let (own, other) = shares(&s);
        let per_rep = s.total() as f64 / s.reps.max(1) as f64;
        let _ = writeln!(
            md,
            "[{name}]({name}): {per_rep:.0} samples per rep under {} ({status}, {} reps); \
             {own:.0} in its own time, {other:.0} on threads with no span of their own.\n",
            md_code(&span),
            s.reps
        );
        if let Some((sampled, recorded)) = cpu_check(data, &profiles, &variant, &span) {
            let _ = writeln!(
                md,
                "Check against the spans: the samples stand for {sampled:.3} s of CPU time \
                 (samples / rate); spans.csv recorded {recorded:.3} s of process CPU time over \
                 {} in the same reps ({:.0}%; the sampler's own thread is not sampled).\n",
                md_code(&span),
                100.0 * sampled / recorded
            );
        }
        md.push_str(&leaf_check(input, &profiles, &variant, &s));
        let _ = writeln!(
            md,
            "| function (innermost frame) | samples per rep | share |\n|---|---:|---:|"
        );
        for (f, c) in flame::top_self(&s, 10) {
            let _ = writeln!(
                md,
                "| {} | {c:.1} | {:.1}% |",
                md_code_cell(&f),
                100.0 * c / per_rep.max(1e-9)
            );
        }
        md.push('\n');
    }
    md
}

/// A differential flame graph of one span, and the functions that changed most.
pub struct DiffFlame {
    pub file: PathBuf,
    pub baseline: SpanStacks,
    pub candidate: SpanStacks,
    pub changes: Vec<flame::FunctionChange>,
}

/// Draws the differential flame graph of `span` from `bv` in `base` to `cv` in `cand`
/// into `out`.
pub fn diff_flame(
    base: &RunData,
    bv: &str,
    cand: &RunData,
    cv: &str,
    span: &str,
    out: &Path,
) -> Result<DiffFlame> {
    let side = |d: &RunData, v: &str| -> Result<SpanStacks> {
        if !d.meta.profile.contains_key(v) {
            bail!(
                "variant {v:?} of {} has no sampled stacks: run it with profile = true",
                d.dir.display()
            );
        }
        let s = variant_stacks(d, &folded::read_run(&d.dir, true)?, v, span);
        if s.total() == 0 {
            bail!(
                "variant {v:?} of {} has no samples under span {span:?} ({})",
                d.dir.display(),
                d.meta.profile[v]
            );
        }
        Ok(s)
    };
    let (b, c) = (side(base, bv)?, side(cand, cv)?);
    flame::draw_diff(&b, &c, out)?;
    Ok(DiffFlame {
        file: out.to_path_buf(),
        changes: flame::function_changes(&b, &c, 10),
        baseline: b,
        candidate: c,
    })
}

impl DiffFlame {
    /// The diff's lines on the span's sampled stacks, for a terminal (span and frame
    /// names from the run folders with their control characters shown, not obeyed).
    pub fn render(&self) -> String {
        let per = |s: &SpanStacks| s.total() as f64 / s.reps.max(1) as f64;
        let mut t = format!(
            "Sampled stacks of `{}`: {:.0} → {:.0} samples per rep ({} vs {} reps). \
             Differential flame graph: {}\n",
            terminal_safe(&self.baseline.span),
            per(&self.baseline),
            per(&self.candidate),
            self.baseline.reps,
            self.candidate.reps,
            terminal_safe(&self.file.display().to_string())
        );
        t.push_str("  functions whose samples per rep changed most (inclusive):\n");
        for c in &self.changes {
            let _ = writeln!(
                t,
                "  {:>+9.1}  {:>9.1} → {:<9.1} {}",
                c.delta(),
                c.before,
                c.after,
                terminal_safe(&c.function)
            );
        }
        t
    }
}
