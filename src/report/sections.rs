//! The analysis sections of report.md (phases, all spans, leak watch, counters), each a
//! pure function of the run. Comparisons and verdicts come from [`crate::analysis`], the
//! same diff `gapscope diff` prints; nothing here computes statistics of its own.

use std::fmt::Write;

use crate::analysis::{self, Diff, DiffError, DiffOptions, Section};
use crate::plot::verdict::{change_text, Changes, Quantity};
use crate::stats::median;
use crate::store::RunData;
use crate::store::{RunView, SpanRow, SpanTime};
use crate::units::fmt_ns_short;

/// A markdown table cell (or any line of text from the run folder): pipes escaped,
/// newlines flattened, links, HTML and reordering controls neutralised
/// ([`crate::markup::md_text`]).
pub fn cell(s: &str) -> String {
    crate::markup::md_text(s)
}

/// Most span families the "All spans" table lists (a program may send a million
/// distinct names; the trace has every span).
const MAX_SPAN_ROWS: usize = 400;

/// Whether a cell reads as a number (right-aligned): digits, signs, dashes for none.
fn numeric(s: &str) -> bool {
    s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit() || "+−-—±".contains(c))
}

/// A markdown table; columns whose cells all read as numbers are right-aligned.
pub(crate) fn table(out: &mut String, header: &[String], rows: &[Vec<String>]) {
    let _ = writeln!(
        out,
        "| {} |",
        header
            .iter()
            .map(|h| cell(h))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "|{}|",
        (0..header.len())
            .map(|i| {
                let all = rows.iter().all(|r| r.get(i).is_none_or(|c| numeric(c)));
                if i > 0 && all {
                    "---:"
                } else {
                    "---"
                }
            })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} |",
            r.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | ")
        );
    }
}

/// The report's comparisons: the baseline variant, chosen as `gapscope diff RUN_DIR`
/// chooses it, against every other variant of the run.
#[derive(Debug)]
pub struct Diffs {
    pub baseline: String,
    /// One per other variant, the candidate `gapscope diff RUN_DIR` would choose first:
    /// its diff, or why it could not be computed.
    pub results: Vec<(String, Result<Diff, DiffError>)>,
}

/// Diffs every other variant of `data` against its baseline with the default options.
/// Fails only when there is nothing to compare (a run of one variant).
pub fn diffs(data: &RunData) -> Result<Diffs, DiffError> {
    let (baseline, first) = analysis::pick_variants(data, None, None, None)?;
    let mut candidates = vec![first];
    for v in &data.meta.variants {
        if v.name != baseline && !candidates.contains(&v.name) {
            candidates.push(v.name.clone());
        }
    }
    let opts = DiffOptions::default();
    let results = candidates
        .into_iter()
        .map(|c| {
            let d = analysis::diff_runs(data, &baseline, data, &c, &opts);
            (c, d)
        })
        .collect();
    Ok(Diffs { baseline, results })
}

/// The phase section: per comparison, the diff's header, phase table with verdicts, gap
/// attribution and where the time went, exactly as `gapscope diff --format markdown`
/// prints them; a comparison that cannot be computed is a line saying why.
pub fn phase_section(diffs: &Result<Diffs, DiffError>) -> String {
    let mut out = String::new();
    let d = match diffs {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(
                out,
                "No comparison: {e}. The per-span medians below have no verdicts."
            );
            return out;
        }
    };
    let _ = writeln!(
        out,
        "Every other variant against `{}`, as `gapscope diff RUN_DIR --candidate VARIANT` \
         prints it: medians per rep, the change with its interval, and a verdict.",
        d.baseline
    );
    for (candidate, result) in &d.results {
        match result {
            Ok(diff) => {
                out.push('\n');
                out.push_str(&analysis::markdown_sections(
                    diff,
                    &[
                        Section::Title,
                        Section::Header,
                        Section::Phases,
                        Section::Gaps,
                        Section::Contributions,
                    ],
                    3,
                ));
            }
            Err(e) => {
                let _ = writeln!(
                    out,
                    "\n### {} vs {candidate}\n\n- ⚠ no comparison: {}",
                    d.baseline,
                    cell(&e.to_string())
                );
            }
        }
    }
    out
}

/// Per span (and per wrapper's unattributed time) the median over measured verified reps
/// of each variant, its range, and each candidate's change as the diff computed it
/// (`changes`: the same statistic, interval and verdict as the headline, the phase table
/// and the charts); a span the diff did not compare reads "—".
pub fn spans_section(input: &RunView, changes: &Changes) -> String {
    // One table: its header, a row per span (medians, ranges, changes), the reps row, then
    // the notes on rows left out or not compared and the GPU-busy lines.
    let data = &input.data;
    let variants = input.variants();
    let mut out = String::new();
    let mut header = vec!["span".to_string()];
    for v in &variants {
        header.push(format!("{v} (median, min–max)"));
    }
    let statistic = changes.statistic();
    let base = changes
        .baseline
        .clone()
        .unwrap_or_else(|| variants[0].clone());
    let candidates: Vec<&String> = variants.iter().filter(|v| **v != base).collect();
    for v in &candidates {
        header.push(match &statistic {
            Some(s) => format!("Δ {v} − {base} ({s})"),
            None => format!("Δ {v} − {base}"),
        });
    }
    let mut not_compared = 0usize;
    let mut rows = Vec::new();
    let order = input.span_order();
    let left_out = order.len().saturating_sub(MAX_SPAN_ROWS);
    for name in order.into_iter().take(MAX_SPAN_ROWS) {
        for (m, label) in input.span_measures(&name, " · unattributed") {
            let per: Vec<Vec<f64>> = variants
                .iter()
                .map(|v| {
                    input
                        .per_rep(v, &name, m)
                        .iter()
                        .map(|&(_, ns)| ns as f64)
                        .collect()
                })
                .collect();
            let mut row = vec![label];
            for vals in &per {
                row.push(match median(vals) {
                    Some(md) => {
                        let lo = vals.iter().copied().fold(f64::MAX, f64::min);
                        let hi = vals.iter().copied().fold(f64::MIN, f64::max);
                        format!(
                            "{} ({}–{})",
                            fmt_ns_short(md),
                            fmt_ns_short(lo),
                            fmt_ns_short(hi)
                        )
                    }
                    None => "—".into(),
                });
            }
            let q = match m {
                SpanTime::Unattributed => Quantity::Unattributed,
                _ => Quantity::Total,
            };
            for v in &candidates {
                row.push(match changes.span(v, &name, q) {
                    Some(c) => format!("{} {}", change_text(c), c.verdict),
                    None => {
                        not_compared += 1;
                        "—".into()
                    }
                });
            }
            rows.push(row);
        }
    }
    let mut reps = vec!["measured reps ok / failed".to_string()];
    for v in &variants {
        let ok = input.measured_reps(v).len();
        let failed = data
            .runs
            .iter()
            .filter(|r| {
                &r.variant == v
                    && !r.warmup
                    && !(r.status == crate::store::RepStatus::Ok && r.checked)
            })
            .count();
        reps.push(format!("{ok} / {failed}"));
    }
    reps.extend(candidates.iter().map(|_| String::new()));
    rows.push(reps);
    table(&mut out, &header, &rows);
    if left_out > 0 {
        let _ = writeln!(
            out,
            "\n… and {left_out} more span names, left out here (the first {MAX_SPAN_ROWS} in \
             tree order are listed); trace.json holds every span."
        );
    }
    let _ = writeln!(
        out,
        "\nTotal time per span summed over a rep, median over measured verified reps, with \
         its range; each Δ is the diff's change of that span (its interval is in the \
         comparisons above). *unattributed*: time inside a span that none of its children, \
         on any thread, accounts for."
    );
    if not_compared > 0 {
        let _ = writeln!(
            out,
            "\n{not_compared} cell(s) read \"—\": the diff made no comparison of that span \
             (e.g. it compares `synthesis[*]` item by item, or nothing was compared)."
        );
    }
    for line in gpu_busy_lines(input)
        .into_iter()
        .chain(busy_cores_lines(input))
        .chain(h2d_lines(input))
        .chain(drop_lines(input))
    {
        let _ = writeln!(out, "\n{line}");
    }
    out
}

/// The first span named `name` in each measured rep of variant `v`, with its rep.
fn span_per_rep<'a>(input: &'a RunView, v: &str, name: &str) -> Vec<(u32, &'a SpanRow)> {
    input
        .measured_reps(v)
        .iter()
        .filter_map(|r| {
            let s = input.spans_of(r.rep).into_iter().find(|s| s.name == name)?;
            Some((r.rep, s))
        })
        .collect()
}

/// What the GPU itself says, where CUPTI saw the kernels: per variant, kernel time
/// inside the GPU wrapper against the wrapper's duration (medians over reps).
fn gpu_busy_lines(input: &RunView) -> Vec<String> {
    // The run's wrapper (the prover's `gpu_prove`); none named: nothing to say.
    let Some(outer) = input.data.meta.phases().wrapper.as_deref() else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    let names = crate::plot::gaps::GapNames::of(input);
    for v in &input.variants() {
        let busy: Vec<f64> = span_per_rep(input, v, outer)
            .into_iter()
            .filter_map(|(_, outer)| outer.gpu_busy_ns.map(|b| b as f64))
            .collect();
        if let (Some(b), Some(o)) = (median(&busy), input.median_of(v, outer, SpanTime::Total)) {
            let reps = crate::plot::gaps::rep_gaps_of(input, v, &names);
            let fill: Vec<String> = crate::store::gaps::fill::fillers(input, &reps, &names)
                .iter()
                .take(crate::store::gaps::fill::FILL_ROWS)
                .map(|f| format!("`{}` {}", f.name, fmt_ns_short(f.median_ns)))
                .collect();
            let filled = if fill.is_empty() {
                String::new()
            } else {
                format!(
                    " While no kernel ran, the spans inside it spent (self time, median per \
                     rep; threads at once each count): {}.",
                    fill.join(", ")
                )
            };
            lines.push(format!(
                "{v}: CUPTI saw a kernel running for {} of `{outer}` (median), the GPU idle for the other {}.{filled}",
                fmt_ns_short(b),
                fmt_ns_short((o - b).max(0.0))
            ));
        }
    }
    lines
}

/// What the host did meanwhile: per variant, the cores the whole process (every thread,
/// a library's own included) kept busy over the GPU wrapper, and the share of the
/// wrapper with a kernel running where CUPTI saw them (medians over reps).
fn busy_cores_lines(input: &RunView) -> Vec<String> {
    // The run's wrapper (the prover's `gpu_prove`); none named: nothing to say.
    let Some(outer) = input.data.meta.phases().wrapper.as_deref() else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for v in &input.variants() {
        let (mut cores, mut gpu) = (Vec::new(), Vec::new());
        for (_, outer) in span_per_rep(input, v, outer) {
            cores.extend(outer.busy_cores());
            if outer.duration_ns > 0 {
                gpu.extend(
                    outer
                        .gpu_busy_ns
                        .map(|b| b as f64 / outer.duration_ns as f64),
                );
            }
        }
        let Some(c) = median(&cores) else { continue };
        let gpu = match median(&gpu) {
            Some(g) => format!(", the GPU busy {:.0}% of it", g * 100.0),
            None => String::new(),
        };
        lines.push(format!(
            "{v}: `{outer}` kept {c:.1} cores busy (process CPU time / wall, median){gpu}."
        ));
    }
    lines
}

/// Host-to-GPU copies of at least this many bytes count as bulk transfers (the a/b/c
/// vectors, SRS chunks), not small control copies whose time is mostly latency.
const BULK_COPY_BYTES: u64 = 1 << 20;

/// Bulk host-to-GPU copy throughput inside the GPU wrapper, from CUPTI's memcpy records:
/// per variant, the median over reps of bytes / time spent copying.
fn h2d_lines(input: &RunView) -> Vec<String> {
    // The run's wrapper (the prover's `gpu_prove`); none named: nothing to say.
    let Some(outer) = input.data.meta.phases().wrapper.as_deref() else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for v in &input.variants() {
        let (mut gbps, mut bytes) = (Vec::new(), Vec::new());
        for (rep, outer) in span_per_rep(input, v, outer) {
            let (b, ns) = input
                .gpu
                .activity_of(rep)
                .iter()
                .filter(|a| a.kind == "memcpy" && a.name == "HtoD")
                .filter(|a| a.start_ns >= outer.start_ns && a.end_ns <= outer.end_ns)
                .filter_map(|a| {
                    a.bytes
                        .filter(|&b| b >= BULK_COPY_BYTES)
                        .map(|b| (b, a.duration_ns))
                })
                .fold((0u64, 0u64), |(b, t), (bb, tt)| (b + bb, t + tt));
            if ns > 0 {
                gbps.push(b as f64 / ns as f64);
                bytes.push(b as f64);
            }
        }
        if let (Some(g), Some(b)) = (median(&gbps), median(&bytes)) {
            lines.push(format!(
                "{v}: host-to-GPU copies of 1 MiB or more inside `{outer}` moved {:.1} MB per rep at {g:.1} GB/s while copying (CUPTI memcpy records, median).",
                b / 1e6
            ));
        }
    }
    lines
}

/// What each drop span freed and what it cost, per variant (medians over reps): the bytes
/// come from the span's `bytes` (host) and `device_bytes` attributes; a drop with
/// `async` ran on a background thread, off the critical path.
fn drop_lines(input: &RunView) -> Vec<String> {
    let mut lines = Vec::new();
    for v in &input.variants() {
        for name in &input.data.meta.phases().drops {
            let (mut ns, mut host, mut device, mut background) = (vec![], vec![], vec![], 0);
            for (_, s) in span_per_rep(input, v, name) {
                let attrs: serde_json::Value = serde_json::from_str(&s.attrs).unwrap_or_default();
                let Some(b) = attrs.get("bytes").and_then(|b| b.as_u64()) else {
                    continue;
                };
                ns.push(s.duration_ns as f64);
                host.push(b as f64);
                device.push(
                    attrs
                        .get("device_bytes")
                        .and_then(|b| b.as_u64())
                        .unwrap_or(0) as f64,
                );
                background += attrs.get("async").is_some() as usize;
            }
            let (Some(t), Some(h), Some(d)) = (median(&ns), median(&host), median(&device)) else {
                continue;
            };
            let gpu = if d > 0.0 {
                format!(" and {:.1} MB of GPU memory", d / 1e6)
            } else {
                String::new()
            };
            let place = if background * 2 > ns.len() {
                "on a background thread, off the critical path"
            } else {
                "on the proving thread, on the critical path"
            };
            lines.push(format!(
                "{v}: `{name}` freed {:.1} MB of host memory{gpu} in {} per rep, {place} (median).",
                h / 1e6,
                fmt_ns_short(t)
            ));
        }
    }
    lines
}

/// Leak watch: the flags of [`crate::telemetry::leak_flags`] over every variant.
pub fn leak_section(data: &RunData) -> String {
    let flags = crate::telemetry::leak_flags(data);
    if flags.is_empty() {
        return "No monotonic growth of host RSS or GPU memory across reps \
                (`rss_end_bytes`, `gpu_mem_used_end_bytes` of runs.csv).\n"
            .into();
    }
    let mut out = String::new();
    for f in flags {
        let _ = writeln!(out, "- ⚠ {}", cell(&f.to_string()));
    }
    out
}

/// Counter availability and, for the available ones, medians per variant over the
/// top-level spans.
pub fn counters_section(input: &RunView) -> String {
    // Three tables in order (the counters' availability, their medians per span, resident
    // memory), with the emulation's note between: they share the variants and the spans.
    let meta = &input.data.meta;
    let mut out = String::new();
    let rows: Vec<Vec<String>> = meta
        .counters
        .iter()
        .map(|(k, a)| {
            vec![
                k.clone(),
                if a.available {
                    "yes".into()
                } else {
                    "no".into()
                },
                a.reason.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "No counters were probed for this run.");
        return out;
    }
    table(
        &mut out,
        &["counter".into(), "available".into(), "reason".into()],
        &rows,
    );
    // Emulated variants count instructions and branches without a PMU.
    let sources: Vec<String> = meta
        .variants
        .iter()
        .filter_map(|v| {
            let scope = match v.scope.as_deref() {
                Some(s) => format!(", {s} alone (gpu_prove is not run under the emulator)"),
                None => String::new(),
            };
            let source = super::counter_source::counter_source(meta, v.counters.as_deref()?);
            Some(format!("{}: {source}{scope}", v.name))
        })
        .collect();
    if !sources.is_empty() {
        let _ = writeln!(
            out,
            "\nCounter source per variant: {}.\n",
            sources.join("; ")
        );
    }
    let emulated = meta.variants.iter().any(|v| {
        v.counters
            .as_deref()
            .is_some_and(|c| c.starts_with("emulated"))
    });
    let variants = input.variants();
    let mut spans = input.top_level_names();
    spans.truncate(MAX_SPAN_ROWS);
    if let Some(inner) = meta.phases().main_inner() {
        if input.span_order().iter().any(|n| n == inner) && !spans.iter().any(|n| n == inner) {
            spans.push(inner.into());
        }
    }
    let mut header = vec!["span · counter".to_string()];
    header.extend(variants.iter().map(|v| format!("{v} (median)")));
    let mut rows = Vec::new();
    for (column, a) in &meta.counters {
        let counted = emulated && matches!(column.as_str(), "instructions" | "branches");
        if !(a.available || counted) {
            continue;
        }
        for name in &spans {
            let mut row = vec![format!("{name} · {column}")];
            let mut any = false;
            // The family's spans only (not every span of every rep): linear overall.
            let mut per_rep: std::collections::HashMap<u32, u64> = Default::default();
            for s in input.family_spans(name) {
                if let Some(x) = s.counter(column) {
                    let e = per_rep.entry(s.rep).or_default();
                    *e = e.saturating_add(x);
                }
            }
            for v in &variants {
                let vals: Vec<f64> = input
                    .measured_reps(v)
                    .iter()
                    .filter_map(|r| per_rep.get(&r.rep).map(|&x| x as f64))
                    .collect();
                row.push(match median(&vals) {
                    Some(m) => {
                        any = true;
                        if column.ends_with("_ns") {
                            fmt_ns_short(m)
                        } else {
                            format!("{m:.0}")
                        }
                    }
                    None => "—".into(),
                });
            }
            if any {
                rows.push(row);
            }
        }
    }
    if !rows.is_empty() {
        let _ = writeln!(out, "\nCounter deltas over each span, on its own thread:\n");
        table(&mut out, &header, &rows);
        if rows.iter().any(|r| r[0].ends_with("· task_clock_ns")) {
            let _ = writeln!(
                out,
                "\ntask_clock_ns of a span is the CPU time of the thread that opened it alone: \
                 work it hands to pool threads (synthesis workers, prep and MSM threads) is not \
                 in it, so `{}` shows little of the batch's CPU time. The CPU time of the whole \
                 process (every thread) over a span is its process CPU time, shown as busy \
                 cores in the spans section.\n",
                meta.phases().root
            );
        }
    }
    let mut rss = vec!["resident set after the rep".to_string()];
    for v in &variants {
        let vals: Vec<f64> = input
            .measured_reps(v)
            .iter()
            .filter_map(|r| r.rss_end_bytes)
            .map(|b| b as f64)
            .collect();
        rss.push(
            median(&vals)
                .map(|b| format!("{:.1} MiB", b / (1u64 << 20) as f64))
                .unwrap_or_else(|| "—".into()),
        );
    }
    let mut header = vec!["memory".to_string()];
    header.extend(variants.iter().map(|v| format!("{v} (median)")));
    let _ = writeln!(out);
    table(&mut out, &header, &[rss]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_escape_pipes_links_and_html() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(cell("[x](http://e)<b>"), "[x]\\(http://e)&lt;b>");
    }
}
