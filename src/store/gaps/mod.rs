//! Gaps, the one home of the word: a wrapper span's time that no kernel (or inner span)
//! explains. Here, what a run calls its wrapper and inner spans; in [`fill`], each rep's
//! gap and the host spans that fill it, which the gaps chart (`plot::gaps`), the report
//! and `gapscope diff` read alike. (`analysis::gaps` compares the wrapper's unexplained
//! time between two runs.)
//!
//! `[workload] gaps = { wrapper = "…", inner = ["…"] }`: which span the gaps chart takes
//! as each rep's wrapper, and which spans inside it count as inner time where a rep has
//! no CUPTI kernel records. Kept in meta.json (`gaps`) so that a report of the run draws
//! what the experiment named; without it the chart uses the prover's own phases
//! (`gpu_prove` and its compute children), and a run with no span of that name gets no
//! chart at all.

pub mod fill;

use serde::{Deserialize, Serialize};

/// The gaps chart's wrapper and inner spans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GapsSpec {
    /// The span whose time is split into inner time and the gap.
    pub wrapper: String,
    /// Spans counted as inner time (their union inside the wrapper) in a rep without
    /// CUPTI kernel records; may be empty when the program's kernels are recorded.
    #[serde(default)]
    pub inner: Vec<String>,
}

impl GapsSpec {
    /// Checks the names as written; the error says what to write instead. Whether the
    /// names occur in a run is only known from its spans (the chart says so).
    pub fn check(&self) -> Result<(), String> {
        let example = "gaps = { wrapper = \"step\", inner = [\"compute\"] }";
        let bad = |n: &str| n.trim().is_empty() || n.chars().any(|c| c.is_whitespace());
        if bad(&self.wrapper) {
            return Err(format!(
                "workload.gaps.wrapper {:?} must name one span (no spaces): {example}",
                self.wrapper
            ));
        }
        for (i, n) in self.inner.iter().enumerate() {
            if bad(n) {
                return Err(format!(
                    "workload.gaps.inner[{i}] {n:?} must name one span (no spaces): {example}"
                ));
            }
            if *n == self.wrapper {
                return Err(format!(
                    "workload.gaps.inner names {n:?}, the wrapper itself: list the spans \
                     inside it ({example})"
                ));
            }
            if self.inner[..i].contains(n) {
                return Err(format!("workload.gaps.inner names {n:?} twice"));
            }
        }
        Ok(())
    }
}

impl super::Meta {
    /// The meta with the experiment's gaps chart spans.
    pub fn with_gaps(mut self, gaps: Option<GapsSpec>) -> Self {
        self.gaps = gaps;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(toml_text: &str) -> Result<GapsSpec, String> {
        let g: GapsSpec = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        g.check().map(|_| g)
    }

    #[test]
    fn gaps_names_a_wrapper_and_its_inner_spans() {
        let g = spec("wrapper = \"step\"\ninner = [\"kernels\", \"copy\"]").unwrap();
        assert_eq!(g.wrapper, "step");
        assert_eq!(g.inner, vec!["kernels", "copy"]);
        assert!(spec("wrapper = \"step\"").unwrap().inner.is_empty());
        for (text, says) in [
            ("inner = [\"k\"]", "wrapper"),
            ("wrapper = \"\"", "must name one span"),
            ("wrapper = \"a b\"", "no spaces"),
            ("wrapper = \"s\"\ninner = [\"s\"]", "the wrapper itself"),
            ("wrapper = \"s\"\ninner = [\"k\", \"k\"]", "twice"),
            ("wrapper = \"s\"\ninners = [\"k\"]", "unknown field"),
        ] {
            let e = spec(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
