//! Output of a [`Diff`]: an aligned terminal table (default), markdown for a review,
//! JSON (the serde record itself) and CSV (one flat row per comparison).

use std::fmt::Write;

use super::compare::{Comparison, Measure, Unit};
use super::csv_rows;
use super::fmt::{
    delta_cell, fmt_p, fmt_value, measure_label, opt_value, pct, signed, verdict_cell,
};
use super::headline;
use super::{Diff, PhaseRow};
use crate::markup::md_text;
use crate::units::fmt_ns;

/// A line of text in the markdown format escaped ([`md_text`]: span names and notes come
/// from the run folder), as it is on the terminal.
fn md_line(s: &str, md: bool) -> String {
    if md {
        md_text(s)
    } else {
        s.to_string()
    }
}

/// Output format of [`render`] (`gapscope diff --format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Terminal,
    Markdown,
    Json,
    Csv,
}

/// Renders a diff. Every format carries the same record; the text formats print the
/// title and the headline first, then the header, the phase table, gaps, contributions
/// and every metric.
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
            // Span names come from the run folder: no links, HTML or controls.
            let cells: Vec<String> = r.iter().map(|c| md_text(c)).collect();
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
        let _ = writeln!(out, "\n{} {}\n", "#".repeat(level), md_text(title));
    } else {
        let _ = writeln!(out, "\n{title}");
    }
}

/// Parts of the text formats, in the order [`render`] prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The title: experiment, variants and the knobs that differ, workload.
    Title,
    /// Three lines: the end-to-end change, the largest significant changes with their
    /// measures, the net change on the critical path.
    Headline,
    /// Run folders, reps used, the verdict rule, notes and a line per leak-watch flag.
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
    pub const ALL: [Section; 7] = [
        Section::Title,
        Section::Headline,
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

/// Terminal text of some sections of a diff, e.g. the title and headline that
/// `gapscope run` prints at its end.
pub fn render_sections(diff: &Diff, sections: &[Section]) -> String {
    let mut out = String::new();
    for &s in sections {
        section(&mut out, diff, s, false, 2);
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
        Section::Title => title(out, d, md, level),
        Section::Headline => {
            let bullet = if md { "- " } else { "" };
            for l in headline::lines(&d.headline, md) {
                let _ = writeln!(out, "{bullet}{}", md_line(&l, md));
            }
            if md {
                out.push('\n');
            }
        }
        Section::Header => header(out, d, md),
        Section::Phases => {
            heading(out, md, level + 1, "Phases (median per rep)");
            let rows: Vec<Vec<String>> = d.phase_table.iter().map(phase_row).collect();
            table(
                out,
                md,
                &[
                    "Phase",
                    "Measure",
                    "Baseline",
                    "Candidate",
                    "Delta",
                    "Verdict",
                ],
                &[false, false, true, true, false, false],
                &rows,
            );
            let _ = writeln!(
                out,
                "\ntotal: a span's duration, on whichever thread it ran (a background drop \
                 included); where the time went, below, counts only the critical path"
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

fn title(out: &mut String, d: &Diff, md: bool, level: usize) {
    let (kb, kc) = knob_labels(d);
    let w = &d.workload;
    let title = format!(
        "{}: {}{kb} vs {}{kc} — {}",
        d.baseline.experiment,
        d.baseline.variant,
        d.candidate.variant,
        w.describe()
    );
    if md {
        let _ = writeln!(out, "{} {}\n", "#".repeat(level), md_text(&title));
    } else {
        let _ = writeln!(out, "{title}");
    }
}

fn header(out: &mut String, d: &Diff, md: bool) {
    // The header's lines in the order they print (what was compared, the reps used and
    // left out, then how changes are tested and judged, whose wording depends on the
    // options and the pairing); one function so that it reads as it prints.
    let bullet = if md { "- " } else { "" };
    if d.baseline.run_dir == d.candidate.run_dir {
        let _ = writeln!(
            out,
            "{bullet}run: {}",
            md_line(&d.baseline.run_dir.display().to_string(), md)
        );
    } else {
        let _ = writeln!(
            out,
            "{bullet}baseline run: {}",
            md_line(&d.baseline.run_dir.display().to_string(), md)
        );
        let _ = writeln!(
            out,
            "{bullet}candidate run: {}",
            md_line(&d.candidate.run_dir.display().to_string(), md)
        );
    }
    let (eb, ec) = (d.excluded.baseline, d.excluded.candidate);
    let _ = writeln!(
        out,
        "{bullet}reps used: {} baseline, {} candidate (excluded: {} + {} failed, {} + {} warm-up)",
        eb.used, ec.used, eb.failed, ec.failed, eb.warmup, ec.warmup
    );
    let o = &d.options;
    let two_runs = d.baseline.run_dir != d.candidate.run_dir && o.between_runs > 0.0;
    let base = format!(
        "the two-sample t test on logs ({}; where a rep is far out, the same test without \
         it in its place)",
        super::compare::two_sample_words(o.welch)
    );
    let alone = base.clone();
    let across = format!(
        "{base}, with a between-runs spread of ±{}% a run added (two run folders),",
        o.between_runs * 100.0
    );
    let short = format!("{base} (the paired test joins from 8 pairs)");
    let (change, test) = match d.pairs {
        Some(n) if n >= super::compare::PAIRED_FROM => (
            "geometric mean of per-pair ratios",
            "the paired t test on logs (the signed-rank test where a pair is far out) and the two-sample t test (without a far-out rep where one is), combined by Simes,",
        ),
        Some(_) => ("geometric mean of per-pair ratios", short.as_str()),
        None if two_runs => ("ratio of geometric means", across.as_str()),
        None => ("ratio of geometric means", alone.as_str()),
    };
    let family = if o.fdr {
        format!(
            "its weighted Benjamini–Hochberg q-value over the diff's {} comparisons < {} (end to end: its own p < {})",
            d.headline.family.comparisons, o.alpha, o.alpha
        )
    } else {
        format!("its p < {} (no false-discovery control)", o.alpha)
    };
    let _ = writeln!(
        out,
        "{bullet}verdict: every change is the {change}; regressed/improved: its {:.0}% interval{} lies outside ±{}% and outside the absolute floor (times: {} or {}% of end to end, whichever is larger; counts: {} events; busy cores: {}), and {test} gives {family}; equivalent: the interval lies inside either floor; inconclusive: anything else (with the reps that would resolve it); no claim below {} reps a side",
        (1.0 - o.alpha) * 100.0,
        if o.fcr_intervals {
            " (for a row the family names, the false-coverage-adjusted one)"
        } else {
            ""
        },
        o.noise_floor * 100.0,
        crate::units::fmt_ns(o.time_floor_ns),
        o.time_floor_fraction * 100.0,
        o.count_floor,
        o.cores_floor,
        crate::stats::MIN_REPS_FOR_CLAIM,
    );
    for n in &d.notes {
        let _ = writeln!(out, "{bullet}note: {}", md_line(n, md));
    }
    for l in &d.leaks {
        let mark = if md { "- ⚠ " } else { "! " };
        let flag = md_line(&l.flag.to_string(), md);
        let _ = writeln!(out, "{mark}leak watch ({}): {flag}", l.side);
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
                measure_label(&g.change.measure),
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
        &[
            "Span",
            "Measure",
            "Baseline",
            "Candidate",
            "Delta",
            "Verdict",
        ],
        &[false, false, true, true, false, false],
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
            let mark = if md { "- ⚠ unattributed: " } else { "! " };
            let _ = writeln!(out, "{mark}{}", md_line(f, md));
        }
    }
}

fn metrics(out: &mut String, d: &Diff, md: bool, level: usize) {
    heading(out, md, level, "All metrics (median, MAD)");
    // A set, not the list: a run of many span names has as many leaves as rows.
    let leaves: std::collections::HashSet<&str> = d.leaf_spans.iter().map(String::as_str).collect();
    let leaf = |c: &Comparison| leaves.contains(c.span.as_str());
    let rows: Vec<Vec<String>> = d
        .metrics
        .iter()
        // A span without children spends all its time itself: one row says both.
        .filter(|c| !(c.measure == Measure::SelfTime && leaf(c)))
        .map(|c| {
            let side = |s: super::SideStats| match s.mad {
                Some(m) => format!("{} ±{}", opt_value(c.unit, s.median), fmt_value(c.unit, m)),
                None => opt_value(c.unit, s.median),
            };
            vec![
                c.span.clone(),
                if c.measure == Measure::Total && leaf(c) {
                    "total = self".into()
                } else {
                    measure_label(&c.measure)
                },
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
    let mut row = comparison_row(r.phase.clone(), &r.comparison);
    let measure = match &r.comparison.measure {
        // The label names the counter already.
        Measure::Counter(_) => "counter".into(),
        m => measure_label(m),
    };
    row.insert(1, measure);
    row
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
    // One function for one section, in reading order (heading, table, the spans left out,
    // then the note on shares or on their absence): each part reads the same total and
    // whether the change is resolved.
    let c = &d.contributions;
    let t = &c.total;
    // Shares of a change exist only when the change does.
    let resolved = t.verdict.is_change();
    heading(
        out,
        md,
        level,
        &format!(
            "Where the time went: {} {} ({}, {}), by self time on the critical path",
            t.span,
            t.delta
                .map(|x| signed(Unit::Ns, x))
                .unwrap_or_else(|| "-".into()),
            t.relative.map(pct).unwrap_or_else(|| "-".into()),
            t.verdict
        ),
    );
    let rows: Vec<Vec<String>> = c
        .items
        .iter()
        .take(TOP)
        .enumerate()
        .map(|(i, item)| {
            let x = &item.comparison;
            let mut row = vec![
                (i + 1).to_string(),
                x.span.clone(),
                measure_label(&x.measure),
                opt_value(x.unit, x.baseline.median),
                opt_value(x.unit, x.candidate.median),
                x.delta.map(|v| signed(x.unit, v)).unwrap_or_default(),
                of_total_cell(item),
            ];
            if resolved {
                row.push(
                    item.share_of_change
                        .map(|s| format!("{:.1}%", s * 100.0))
                        .unwrap_or_default(),
                );
            }
            row.push(verdict_cell(x));
            row
        })
        .collect();
    let mut headers = vec![
        "#",
        "Span",
        "Measure",
        "Baseline",
        "Candidate",
        "Delta",
        "Of total [95% CI]",
    ];
    let mut right = vec![true, false, false, true, true, true, true];
    if resolved {
        headers.push("Share");
        right.push(true);
    }
    headers.push("Verdict");
    right.push(false);
    table(out, md, &headers, &right, &rows);
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
    let total_delta = t
        .delta
        .map(|x| signed(Unit::Ns, x))
        .unwrap_or_else(|| "-".into());
    if resolved {
        let _ = writeln!(
            out,
            "{sep}Share: each span's part of the end-to-end change. The spans' changes add up \
             to {}, the end-to-end median moved {total_delta}: the {} between them is how far \
             a median of parts is from the median of the whole.",
            signed(Unit::Ns, c.explained_ns),
            signed(Unit::Ns, c.unexplained_ns)
        );
    } else {
        let ci =
            t.ci.map(|i| {
                let b = |x: Option<f64>| x.map(pct).unwrap_or_else(|| "n/a".into());
                format!(", interval [{}, {}]", b(i.lo), b(i.hi))
            })
            .unwrap_or_default();
        let p = fmt_p(t.p_value);
        let _ = writeln!(
            out,
            "{sep}No shares of the end-to-end change: it is {} ({total_delta}{ci}{}), so \
             parts of it would divide by noise. Of total compares each span's change with the \
             baseline's end-to-end time instead.",
            t.verdict,
            if p.is_empty() {
                String::new()
            } else {
                format!(", {p}")
            }
        );
    }
}
