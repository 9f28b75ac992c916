//! Output of a [`Diff`]: an aligned terminal table (default), markdown for a review,
//! JSON (the serde record itself) and CSV (one flat row per comparison).

use std::fmt::Write;

use super::compare::{Comparison, Unit};
use super::csv_rows;
use super::{Diff, PhaseRow};
use crate::units::{fmt_ns, sig4};

/// Output format of [`render`] (`gapscope diff --format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Terminal,
    Markdown,
    Json,
    Csv,
}

/// Renders a diff. Every format carries the same record; the text formats print the
/// phase table first, then gaps, contributions and every metric.
pub fn render(diff: &Diff, format: Format) -> String {
    match format {
        Format::Terminal => text(diff, false),
        Format::Markdown => text(diff, true),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(diff).expect("a diff serialises");
            s.push('\n');
            s
        }
        Format::Csv => csv_rows::rows(diff),
    }
}

fn fmt_count(c: f64) -> String {
    let a = c.abs();
    if a >= 1e9 {
        format!("{} G", sig4(c / 1e9))
    } else if a >= 1e6 {
        format!("{} M", sig4(c / 1e6))
    } else if a >= 1e4 {
        format!("{} k", sig4(c / 1e3))
    } else if c.fract() == 0.0 {
        format!("{c:.0}")
    } else {
        format!("{c:.1}")
    }
}

fn fmt_value(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ns => fmt_ns(v),
        Unit::Count => fmt_count(v),
        Unit::Bytes => format!("{} MiB", sig4(v / (1u64 << 20) as f64)),
    }
}

fn signed(unit: Unit, v: f64) -> String {
    let s = fmt_value(unit, v);
    if v > 0.0 {
        format!("+{s}")
    } else {
        s
    }
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", r * 100.0)
}

fn opt_value(unit: Unit, v: Option<f64>) -> String {
    v.map(|v| fmt_value(unit, v)).unwrap_or_else(|| "-".into())
}

fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.001 => "p<0.001".into(),
        Some(p) => format!("p={p:.3}"),
        None => String::new(),
    }
}

/// "+5.15 ms +42.8% [+30.1%, +55.0%]" (relative part only where defined).
fn delta_cell(c: &Comparison) -> String {
    let mut s = c
        .delta
        .map(|d| signed(c.unit, d))
        .unwrap_or_else(|| "-".into());
    if let Some(r) = c.relative {
        let _ = write!(s, " {}", pct(r));
    }
    if let Some(ci) = c.ci {
        let bound = |b: Option<f64>| b.map(pct).unwrap_or_else(|| "n/a".into());
        let _ = write!(s, " [{}, {}]", bound(ci.lo), bound(ci.hi));
    }
    s
}

/// A contribution's change as a share of the baseline's end-to-end median, with its
/// interval: "+0.83% [+0.67%, +0.98%]" (two decimals: these are often below 1 %).
fn of_total_cell(item: &super::Contribution) -> String {
    let p2 = |r: f64| format!("{:+.2}%", r * 100.0);
    let mut s = item.of_total.map(p2).unwrap_or_else(|| "-".into());
    if let Some(ci) = item.of_total_ci {
        let bound = |b: Option<f64>| b.map(p2).unwrap_or_else(|| "n/a".into());
        let _ = write!(s, " [{}, {}]", bound(ci.lo), bound(ci.hi));
    }
    s
}

fn verdict_cell(c: &Comparison) -> String {
    let p = fmt_p(c.p_value);
    if c.exact {
        format!("{} (exact)", c.verdict)
    } else if p.is_empty() {
        c.verdict.to_string()
    } else {
        format!("{} ({p})", c.verdict)
    }
}

/// An aligned table (terminal) or a pipe table (markdown). `right[i]`: right-align
/// column i.
fn table(out: &mut String, md: bool, headers: &[&str], right: &[bool], rows: &[Vec<String>]) {
    if md {
        let _ = writeln!(out, "| {} |", headers.join(" | "));
        let seps: Vec<&str> = right
            .iter()
            .map(|&r| if r { "---:" } else { "---" })
            .collect();
        let _ = writeln!(out, "|{}|", seps.join("|"));
        for r in rows {
            let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        return;
    }
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(width[i].saturating_sub(c.chars().count()));
                if right[i] {
                    format!("{pad}{c}")
                } else {
                    format!("{c}{pad}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(headers.to_vec()));
    for r in rows {
        let _ = writeln!(out, "{}", line(r.iter().map(String::as_str).collect()));
    }
}

/// A heading: markdown at `level` (2 = `##`), a plain line on the terminal.
fn heading(out: &mut String, md: bool, level: usize, title: &str) {
    if md {
        let _ = writeln!(out, "\n{} {title}\n", "#".repeat(level));
    } else {
        let _ = writeln!(out, "\n{title}");
    }
}

/// Parts of the text formats, in the order [`render`] prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Title, run folders, reps used, the verdict rule, notes and a line per leak-watch
    /// flag.
    Header,
    /// The phase table with verdicts.
    Phases,
    /// Unattributed time of wrapper spans, and the flags.
    Gaps,
    /// Where the change in end-to-end time went.
    Contributions,
    /// Every metric.
    Metrics,
}

impl Section {
    pub const ALL: [Section; 5] = [
        Section::Header,
        Section::Phases,
        Section::Gaps,
        Section::Contributions,
        Section::Metrics,
    ];
}

/// Markdown of some sections of a diff: the title at heading level `level` (2 = `##`),
/// each section's heading one level below. The report embeds its diffs this way.
pub fn markdown_sections(diff: &Diff, sections: &[Section], level: usize) -> String {
    let mut out = String::new();
    for &s in sections {
        section(&mut out, diff, s, true, level);
    }
    out
}

/// Knobs that differ between the sides, e.g. "drop=sync" / "drop=async".
fn knob_labels(d: &Diff) -> (String, String) {
    let (b, c) = (&d.baseline.knobs, &d.candidate.knobs);
    let keys: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
    let (mut lb, mut lc) = (Vec::new(), Vec::new());
    for k in keys {
        let (x, y) = (b.get(k), c.get(k));
        if x != y {
            lb.push(format!("{k}={}", x.map(String::as_str).unwrap_or("-")));
            lc.push(format!("{k}={}", y.map(String::as_str).unwrap_or("-")));
        }
    }
    let wrap = |v: Vec<String>| {
        if v.is_empty() {
            String::new()
        } else {
            format!(" ({})", v.join(", "))
        }
    };
    (wrap(lb), wrap(lc))
}

fn text(d: &Diff, md: bool) -> String {
    let mut out = String::new();
    for s in Section::ALL {
        section(&mut out, d, s, md, 2);
    }
    out
}

fn section(out: &mut String, d: &Diff, s: Section, md: bool, level: usize) {
    match s {
        Section::Header => header(out, d, md, level),
        Section::Phases => {
            heading(out, md, level + 1, "Phases (median per rep)");
            let rows: Vec<Vec<String>> = d.phase_table.iter().map(phase_row).collect();
            table(
                out,
                md,
                &["Phase", "Baseline", "Candidate", "Delta", "Verdict"],
                &[false, true, true, false, false],
                &rows,
            );
            if let Some(c) = &d.carry_over {
                carry_over(out, d, c, md, level + 1);
            }
        }
        Section::Gaps => gaps(out, d, md, level + 1),
        Section::Contributions => contributions(out, md, level + 1, d),
        Section::Metrics => metrics(out, d, md, level + 1),
    }
}

/// End-to-end time by the variant of the rep before: each side's reps after a baseline
/// rep on the left, after a candidate rep on the right, then the steady state.
fn carry_over(out: &mut String, d: &Diff, c: &super::CarryOver, md: bool, level: usize) {
    let (b, k) = (&d.baseline.variant, &d.candidate.variant);
    heading(
        out,
        md,
        level,
        &format!(
            "Carry-over: {} by the variant of the rep before",
            c.steady.span
        ),
    );
    let rows = vec![
        comparison_row(format!("{b}: after {b} → after {k}"), &c.baseline),
        comparison_row(format!("{k}: after {b} → after {k}"), &c.candidate),
        comparison_row(format!("steady: {b} after {b} → {k} after {k}"), &c.steady),
    ];
    table(
        out,
        md,
        &["Reps", "Left", "Right", "Delta", "Verdict"],
        &[false, true, true, false, false],
        &rows,
    );
    if md {
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "A variant that slows the rep after it shows in the first two rows; the paired \
         change counts only each rep's own time, the steady row what a run of one variant \
         would see (independent samples)."
    );
}

fn header(out: &mut String, d: &Diff, md: bool, level: usize) {
    let (kb, kc) = knob_labels(d);
    let w = &d.workload;
    let title = format!(
        "{}: {}{kb} vs {}{kc} — {} 2^{} × {} on {}",
        d.baseline.experiment,
        d.baseline.variant,
        d.candidate.variant,
        w.circuit,
        w.log2_constraints,
        w.batch,
        w.backend
    );
    if md {
        let _ = writeln!(out, "{} {title}\n", "#".repeat(level));
    } else {
        let _ = writeln!(out, "{title}");
    }
    let bullet = if md { "- " } else { "" };
    if d.baseline.run_dir == d.candidate.run_dir {
        let _ = writeln!(out, "{bullet}run: {}", d.baseline.run_dir.display());
    } else {
        let _ = writeln!(
            out,
            "{bullet}baseline run: {}",
            d.baseline.run_dir.display()
        );
        let _ = writeln!(
            out,
            "{bullet}candidate run: {}",
            d.candidate.run_dir.display()
        );
    }
    let (eb, ec) = (d.excluded.baseline, d.excluded.candidate);
    let _ = writeln!(
        out,
        "{bullet}reps used: {} baseline, {} candidate (excluded: {} + {} failed, {} + {} warm-up)",
        eb.used, ec.used, eb.failed, ec.failed, eb.warmup, ec.warmup
    );
    let o = &d.options;
    let (change, test) = match d.pairs {
        Some(_) => ("median per-pair difference", "Wilcoxon signed-rank"),
        None => ("change of medians", "Mann–Whitney"),
    };
    let _ = writeln!(
        out,
        "{bullet}verdict: the {:.0}% bootstrap interval of the {change} must lie outside ±{}% and {test} p < {}",
        (1.0 - o.alpha) * 100.0,
        o.noise_floor * 100.0,
        o.alpha
    );
    for n in &d.notes {
        let _ = writeln!(out, "{bullet}note: {n}");
    }
    for l in &d.leaks {
        let mark = if md { "- ⚠ " } else { "! " };
        let _ = writeln!(out, "{mark}leak watch ({}): {}", l.side, l.flag);
    }
}

fn gaps(out: &mut String, d: &Diff, md: bool, level: usize) {
    heading(
        out,
        md,
        level,
        "Gaps: wrapper time not covered by children (median per rep)",
    );
    let gap_side = |g: Option<super::GapSide>| {
        g.map(|g| format!("{} ({:.1}%)", fmt_ns(g.unattributed_ns), g.fraction * 100.0))
            .unwrap_or_else(|| "-".into())
    };
    let rows: Vec<Vec<String>> = d
        .gaps
        .iter()
        .map(|g| {
            vec![
                g.span.clone(),
                gap_side(g.baseline),
                gap_side(g.candidate),
                delta_cell(&g.change),
                verdict_cell(&g.change),
            ]
        })
        .collect();
    table(
        out,
        md,
        &["Span", "Baseline", "Candidate", "Delta", "Verdict"],
        &[false, true, true, false, false],
        &rows,
    );
    let flags: Vec<&String> = d.gaps.iter().flat_map(|g| &g.flags).collect();
    if flags.is_empty() {
        let _ = writeln!(
            out,
            "{}no wrapper has more than {}% of its time unattributed (and above the noise floor)",
            if md { "\n" } else { "" },
            d.options.gap_threshold * 100.0
        );
    } else {
        if md {
            out.push('\n');
        }
        for f in flags {
            let _ = writeln!(out, "{}{f}", if md { "- ⚠ unattributed: " } else { "! " });
        }
    }
}

fn metrics(out: &mut String, d: &Diff, md: bool, level: usize) {
    heading(out, md, level, "All metrics (median, MAD)");
    let rows: Vec<Vec<String>> = d
        .metrics
        .iter()
        .map(|c| {
            let side = |s: super::SideStats| match s.mad {
                Some(m) => format!("{} ±{}", opt_value(c.unit, s.median), fmt_value(c.unit, m)),
                None => opt_value(c.unit, s.median),
            };
            vec![
                c.span.clone(),
                c.measure.to_string(),
                format!("{}/{}", c.baseline.reps, c.candidate.reps),
                side(c.baseline),
                side(c.candidate),
                delta_cell(c),
                verdict_cell(c),
            ]
        })
        .collect();
    table(
        out,
        md,
        &[
            "Span",
            "Measure",
            "Reps",
            "Baseline",
            "Candidate",
            "Delta",
            "Verdict",
        ],
        &[false, false, true, true, true, false, false],
        &rows,
    );
}

fn phase_row(r: &PhaseRow) -> Vec<String> {
    comparison_row(r.phase.clone(), &r.comparison)
}

/// A label, both medians, the change and the verdict.
fn comparison_row(label: String, c: &Comparison) -> Vec<String> {
    vec![
        label,
        opt_value(c.unit, c.baseline.median),
        opt_value(c.unit, c.candidate.median),
        delta_cell(c),
        verdict_cell(c),
    ]
}

/// How many contributions the text formats list (JSON and CSV carry all).
const TOP: usize = 12;

fn contributions(out: &mut String, md: bool, level: usize, d: &Diff) {
    let c = &d.contributions;
    let t = &c.total;
    heading(
        out,
        md,
        level,
        &format!(
            "Where the time went: {} {} ({}), by critical-path self time",
            t.span,
            t.delta
                .map(|x| signed(Unit::Ns, x))
                .unwrap_or_else(|| "-".into()),
            t.relative.map(pct).unwrap_or_else(|| "-".into())
        ),
    );
    let rows: Vec<Vec<String>> = c
        .items
        .iter()
        .take(TOP)
        .enumerate()
        .map(|(i, item)| {
            let x = &item.comparison;
            vec![
                (i + 1).to_string(),
                x.span.clone(),
                opt_value(x.unit, x.baseline.median),
                opt_value(x.unit, x.candidate.median),
                x.delta.map(|v| signed(x.unit, v)).unwrap_or_default(),
                of_total_cell(item),
                item.share_of_change
                    .map(|s| format!("{:.1}%", s * 100.0))
                    .unwrap_or_default(),
                verdict_cell(x),
            ]
        })
        .collect();
    table(
        out,
        md,
        &[
            "#",
            "Span",
            "Baseline",
            "Candidate",
            "Delta",
            "Of total [95% CI]",
            "Share",
            "Verdict",
        ],
        &[true, false, true, true, true, true, true, false],
        &rows,
    );
    let sep = if md { "\n" } else { "" };
    if c.items.len() > TOP {
        let rest: f64 = c.items[TOP..]
            .iter()
            .filter_map(|i| i.comparison.delta)
            .sum();
        let _ = writeln!(
            out,
            "{sep}… {} more span(s), together {}",
            c.items.len() - TOP,
            signed(Unit::Ns, rest)
        );
    }
    let _ = writeln!(
        out,
        "{sep}explained {} of {}; unexplained {} (medians of parts do not add up exactly to the median of the total)",
        signed(Unit::Ns, c.explained_ns),
        t.delta.map(|x| signed(Unit::Ns, x)).unwrap_or_else(|| "-".into()),
        signed(Unit::Ns, c.unexplained_ns)
    );
}
