//! The diff's changes as the charts draw them: for each candidate against the baseline,
//! the change statistic of each span's quantity with its verdict, as plain data. The
//! report fills it from the diffs (`report::chart_changes`), so every Δ a chart prints
//! is the number the diff printed for that span and measure, coloured by the diff's
//! verdict (after false-discovery control and the effect floors), and plot needs no
//! analysis. A chart drawn without it prints medians and no Δ.

use std::collections::BTreeMap;

use plotters::style::RGBColor;

use super::canvas::{BETTER, MUTED, WORSE};
use crate::units::fmt_ns_short;

/// How the diff judged a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Improved,
    Regressed,
    /// The change is shown to lie inside the floors.
    Equivalent,
    /// Not resolved by the run (too few reps, an interval across a floor, or the span on
    /// one side only).
    Inconclusive,
}

impl Judged {
    pub fn word(self) -> &'static str {
        match self {
            Judged::Improved => "improved",
            Judged::Regressed => "regressed",
            Judged::Equivalent => "equivalent",
            Judged::Inconclusive => "inconclusive",
        }
    }
}

/// Colour of a verdict: green improved, red regressed, grey equivalent, amber inconclusive.
/// Charts colour a change by this alone, never by its sign.
pub fn verdict_color(j: Judged) -> RGBColor {
    match j {
        Judged::Improved => BETTER,
        Judged::Regressed => WORSE,
        Judged::Equivalent => MUTED,
        Judged::Inconclusive => RGBColor(176, 120, 0),
    }
}

/// Which time of a span a change is of (the diff's measures of times).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quantity {
    /// Duration, summed over the span's occurrences in a rep.
    Total,
    /// Self time, every occurrence.
    SelfTime,
    /// Self time of the occurrences on the critical path.
    CriticalSelf,
    /// Time covered by no child on any thread.
    Unattributed,
}

/// One change as the diff computed it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanChange {
    /// The change statistic, ns (the change of geometric means, paired or not; else the
    /// difference of medians).
    pub delta_ns: f64,
    /// `delta_ns` over the baseline median.
    pub relative: Option<f64>,
    /// The statistic's interval, ns.
    pub interval_ns: Option<(f64, f64)>,
    pub judged: Judged,
    /// The verdict in words with what it was judged on, e.g. "improved (q=0.008)".
    pub verdict: String,
    /// The difference of the two medians, when it points the other way than `delta_ns`.
    pub medians_disagree: Option<f64>,
}

/// One candidate against the baseline.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VariantChanges {
    pub candidate: String,
    /// The change statistic's name, which labels every Δ drawn.
    pub statistic: String,
    /// End to end (the root span's duration), with the root's name.
    pub end_to_end: Option<(String, SpanChange)>,
    /// Per span name and quantity.
    pub spans: BTreeMap<(String, Quantity), SpanChange>,
}

/// Every comparison of a report: the baseline and each candidate's changes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Changes {
    /// The diffs' baseline; None when nothing was compared.
    pub baseline: Option<String>,
    pub candidates: Vec<VariantChanges>,
}

impl Changes {
    pub fn of(&self, candidate: &str) -> Option<&VariantChanges> {
        self.candidates.iter().find(|c| c.candidate == candidate)
    }

    pub fn span(&self, candidate: &str, span: &str, q: Quantity) -> Option<&SpanChange> {
        self.of(candidate)?.spans.get(&(span.to_string(), q))
    }

    /// The statistic's name(s), for a chart's subtitle ("ratio of geometric means").
    pub fn statistic(&self) -> Option<String> {
        let mut names: Vec<&str> = self
            .candidates
            .iter()
            .map(|c| c.statistic.as_str())
            .collect();
        names.dedup();
        (!names.is_empty()).then(|| names.join(" / "))
    }

    /// The note of a change whose statistic and medians point opposite ways.
    pub fn disagreement_note(what: &str, c: &SpanChange) -> Option<String> {
        let m = c.medians_disagree?;
        Some(format!(
            "{what}: the change drawn, the ratio of geometric means ({}), and the \
             difference of the medians ({}) point opposite ways; the verdict is on the \
             geometric means",
            signed(c.delta_ns),
            signed(m)
        ))
    }
}

/// "+5.15 ms" / "−3.20 µs" / "±0".
pub fn signed(ns: f64) -> String {
    if ns == 0.0 {
        "±0".into()
    } else if ns > 0.0 {
        format!("+{}", fmt_ns_short(ns))
    } else {
        format!("−{}", fmt_ns_short(-ns))
    }
}

/// "+5.15 ms (+42.8%)": a change as every chart prints it.
pub fn change_text(c: &SpanChange) -> String {
    match c.relative {
        Some(r) => format!("{} ({})", signed(c.delta_ns), percent(r)),
        None => signed(c.delta_ns),
    }
}

/// "+42.8%" / "−3.1%" from a fraction.
pub fn percent(r: f64) -> String {
    let p = 100.0 * r;
    if p >= 0.0 {
        format!("+{p:.1}%")
    } else {
        format!("−{:.1}%", -p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_written_with_their_sign_and_share() {
        let c = SpanChange {
            delta_ns: -29_500_000.0,
            relative: Some(-0.0262),
            interval_ns: None,
            judged: Judged::Equivalent,
            verdict: "unchanged (p=0.4)".into(),
            medians_disagree: Some(30_900_000.0),
        };
        assert_eq!(change_text(&c), "−29.5 ms (−2.6%)");
        assert_eq!(signed(0.0), "±0");
        let note = Changes::disagreement_note("b end to end", &c).unwrap();
        assert!(
            note.contains("(−29.5 ms)") && note.contains("(+30.9 ms)"),
            "{note}"
        );
        // Colour follows the verdict, not the sign.
        assert_eq!(verdict_color(Judged::Equivalent), MUTED);
        assert_ne!(verdict_color(Judged::Inconclusive), MUTED);
    }
}
