//! The analysis sections of report.md (phases, gaps, counters), each a pure function of
//! the run.

use std::fmt::Write;

use crate::plot::canvas::{fmt_delta, fmt_ns};
use crate::plot::gaps::{rep_gaps, INNER, OUTER};
use crate::plot::gpu::GpuRecords;
use crate::plot::input::{median, Measure, PlotInput};
use crate::store::RunData;

/// A wrapper whose unattributed time reaches this share of its duration is flagged.
pub const GAP_FLAG_FRACTION: f64 = 0.10;
/// ...unless it is shorter than this (noise at small sizes).
pub const GAP_FLAG_MIN_NS: f64 = 1e6;

/// A markdown table cell: pipes escaped, newlines flattened.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

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

fn view(data: &RunData) -> PlotInput {
    PlotInput::with_gpu(
        RunData {
            dir: data.dir.clone(),
            meta: data.meta.clone(),
            runs: data.runs.clone(),
            spans: data.spans.clone(),
        },
        GpuRecords::default(),
    )
}

/// The phase table: per span (and per wrapper's unattributed time) the median over
/// measured verified reps of each variant, its range, and the change against the first
/// variant.
///
/// This is the one place to swap in `crate::analysis`'s diff (bootstrap intervals and
/// verdicts) once it exists: the report calls nothing else for phases.
pub fn phase_section(data: &RunData) -> String {
    let input = view(data);
    let variants = input.variants();
    let mut out = String::new();
    let mut header = vec!["phase".to_string()];
    for v in &variants {
        header.push(format!("{v} (median, min–max)"));
    }
    for v in variants.iter().skip(1) {
        header.push(format!("Δ {v} − {}", variants[0]));
    }
    let mut rows = Vec::new();
    for name in input.span_order() {
        let mut measures = vec![(Measure::Total, name.clone())];
        if input.is_wrapper(&name) {
            measures.push((Measure::Unattributed, format!("{name} · unattributed")));
        }
        for (m, label) in measures {
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
                        format!("{} ({}–{})", fmt_ns(md), fmt_ns(lo), fmt_ns(hi))
                    }
                    None => "—".into(),
                });
            }
            let base = median(&per[0]);
            for vals in per.iter().skip(1) {
                row.push(match (base, median(vals)) {
                    (Some(b), Some(x)) => fmt_delta(x - b, b),
                    _ => "—".into(),
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
            .filter(|r| &r.variant == v && !r.warmup && r.status != crate::store::RepStatus::Ok)
            .count();
        reps.push(format!("{ok} / {failed}"));
    }
    reps.extend(variants.iter().skip(1).map(|_| String::new()));
    rows.push(reps);
    table(&mut out, &header, &rows);
    let _ = writeln!(
        out,
        "\nTotal time per span summed over a rep, median over measured verified reps. \
         Verdicts (regressed / improved / unchanged with a confidence interval) are `gapscope diff`'s; \
         this table shows medians and ranges only. *unattributed*: time inside a span that none of \
         its children, on any thread, accounts for."
    );
    out
}

/// Gap flags: the wrapper against its kernels per variant, and every wrapper whose
/// unattributed share is large.
pub fn gap_section(input: &PlotInput) -> String {
    let variants = input.variants();
    let mut out = String::new();
    let mut rows = Vec::new();
    let mut base_gap = None;
    for (i, v) in variants.iter().enumerate() {
        let g = rep_gaps(input, v);
        let med = |f: &dyn Fn(&crate::plot::gaps::RepGap) -> u64| {
            median(&g.iter().map(|r| f(r) as f64).collect::<Vec<_>>())
        };
        let (Some(o), Some(k), Some(gp), Some(none)) = (
            med(&|r| r.outer_ns),
            med(&|r| r.inner_ns),
            med(&|r| r.gap_ns),
            med(&|r| r.unattributed_ns),
        ) else {
            let mut row = vec![v.clone()];
            row.extend(std::iter::repeat_n("—".to_string(), 6));
            row.push(format!("no {OUTER} span"));
            rows.push(row);
            continue;
        };
        let spanned = med(&|r| r.gap_ns.saturating_sub(r.unattributed_ns)).unwrap_or(0.0);
        if i == 0 {
            base_gap = Some(gp);
        }
        let flag = if none >= GAP_FLAG_MIN_NS && none / o.max(1.0) >= GAP_FLAG_FRACTION {
            "⚠ unattributed"
        } else {
            "ok"
        };
        let change = match (i, base_gap) {
            (0, _) | (_, None) => "baseline".to_string(),
            (_, Some(b)) => fmt_delta(gp - b, b),
        };
        rows.push(vec![
            v.clone(),
            fmt_ns(o),
            fmt_ns(k),
            format!("{} ({:.0}%)", fmt_ns(gp), 100.0 * gp / o.max(1.0)),
            fmt_ns(spanned),
            format!("{} ({:.0}%)", fmt_ns(none), 100.0 * none / o.max(1.0)),
            change,
            flag.into(),
        ]);
    }
    let _ = writeln!(
        out,
        "`{OUTER}` (the wrapper) against `{INNER}` (inner GPU time), medians over reps. \
         The gap is wrapper time outside `{INNER}`: part of it is in other child spans \
         (e.g. `b_g2_msm`, `drop`), the rest in no span at all.\n"
    );
    table(
        &mut out,
        &[
            "variant".into(),
            OUTER.into(),
            INNER.into(),
            "gap (share)".into(),
            "gap in other spans".into(),
            "gap in no span (share)".into(),
            "gap change".into(),
            "flag".into(),
        ],
        &rows,
    );
    // What the GPU itself says, where CUPTI saw the kernels.
    for v in &variants {
        let busy: Vec<f64> = input
            .measured_reps(v)
            .iter()
            .filter_map(|r| {
                let spans = input.spans_of(r.rep);
                let outer = spans.iter().find(|s| s.name == OUTER)?;
                outer.gpu_busy_ns.map(|b| b as f64)
            })
            .collect();
        if let (Some(b), Some(o)) = (median(&busy), input.median_of(v, OUTER, Measure::Total)) {
            let _ = writeln!(
                out,
                "\n{v}: CUPTI saw a kernel running for {} of `{OUTER}` (median), the GPU idle for the other {}.",
                fmt_ns(b),
                fmt_ns((o - b).max(0.0))
            );
        }
    }
    // Every wrapper's unattributed time.
    let mut flagged = Vec::new();
    for name in input.span_order().iter().filter(|n| input.is_wrapper(n)) {
        for v in &variants {
            let (Some(total), Some(own)) = (
                input.median_of(v, name, Measure::Total),
                input.median_of(v, name, Measure::Unattributed),
            ) else {
                continue;
            };
            if own >= GAP_FLAG_MIN_NS && own / total.max(1.0) >= GAP_FLAG_FRACTION {
                flagged.push(format!(
                    "- ⚠ `{name}` in {v}: {} of {} ({:.0}%) is in no child span",
                    fmt_ns(own),
                    fmt_ns(total),
                    100.0 * own / total.max(1.0)
                ));
            }
        }
    }
    let _ = writeln!(
        out,
        "\nFlagged when unattributed time is at least {:.0}% of the wrapper and at least {}.",
        GAP_FLAG_FRACTION * 100.0,
        fmt_ns(GAP_FLAG_MIN_NS)
    );
    if flagged.is_empty() {
        let _ = writeln!(
            out,
            "No wrapper has unattributed time above that threshold."
        );
    } else {
        let _ = writeln!(out, "\nWrappers with time no child span accounts for:\n");
        for f in flagged {
            let _ = writeln!(out, "{f}");
        }
    }
    out
}

/// Counter availability and, for the available ones, medians per variant over the
/// top-level spans.
pub fn counters_section(input: &PlotInput) -> String {
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
    let variants = input.variants();
    let mut spans = input.top_level_names();
    if input.span_order().iter().any(|n| n == INNER) && !spans.iter().any(|n| n == INNER) {
        spans.push(INNER.into());
    }
    let mut header = vec!["span · counter".to_string()];
    header.extend(variants.iter().map(|v| format!("{v} (median)")));
    let mut rows = Vec::new();
    for (column, a) in &meta.counters {
        if !a.available {
            continue;
        }
        for name in &spans {
            let mut row = vec![format!("{name} · {column}")];
            let mut any = false;
            for v in &variants {
                let vals: Vec<f64> = input
                    .measured_reps(v)
                    .iter()
                    .filter_map(|r| {
                        let xs: Vec<u64> = input
                            .spans_of(r.rep)
                            .iter()
                            .filter(|s| crate::plot::input::family(&s.name) == name.as_str())
                            .filter_map(|s| s.counter(column))
                            .collect();
                        (!xs.is_empty()).then(|| xs.iter().sum::<u64>() as f64)
                    })
                    .collect();
                row.push(match median(&vals) {
                    Some(m) => {
                        any = true;
                        if column.ends_with("_ns") {
                            fmt_ns(m)
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
    fn cells_escape_pipes() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
