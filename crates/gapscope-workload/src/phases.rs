//! What a workload calls the parts of its span tree ([`PhaseSpec`]) and what kind of
//! workload a run measured ([`WorkloadKind`]). Whoever creates a run folder writes both
//! into meta.json (`workload.kind`, `phases`); the summary, diff, charts and report read
//! a run's phases from there, never from the code of the workload that ran. A folder
//! written before meta.json had them reads as the Groth16 prover's run with the phases
//! that prover had then ([`PhaseSpec::groth16`]). A leaf: it depends on no module of
//! the crate.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// What a run measured: the built-in Groth16 prover, a program gapscope did not build
/// (`command = […]`, `run --cmd`), `gapscope gpu-selftest`'s GPU work (a circuit
/// "gpu-selftest" in the prover's span names), or traces recorded elsewhere and read by
/// `gapscope import` (Chrome/Kineto, OTLP, Nsight Systems).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Groth16,
    Command,
    GpuSelftest,
    Import,
    /// `gapscope-hash`: digests of a buffer, the second in-process workload.
    Hash,
}

impl WorkloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Groth16 => "groth16",
            WorkloadKind::Command => "command",
            WorkloadKind::GpuSelftest => "gpu_selftest",
            WorkloadKind::Import => "import",
            WorkloadKind::Hash => "hash",
        }
    }
}

/// A phase of the end-of-run summary: its span and its depth below the root (0: the
/// root itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryPhase {
    pub span: String,
    pub depth: usize,
}

/// How tables label a phase: "`label` (`span`)". The label may depend on the backend
/// the reps ran (the Groth16 prover's `gpu_prove` is the CPU prover's call on the CPU
/// backend) and on whether the two sides of a comparison ran different backends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseLabel {
    /// The label for any backend not in `by_backend`.
    pub label: String,
    /// The label where every rep ran this backend.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_backend: BTreeMap<String, String>,
    /// The label where the reps compared ran different backends (absent: `label`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed: Option<String>,
}

/// meta.json's `phases`: the names of a workload's span tree that tables and charts
/// look up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    /// The span around a whole rep: its duration is the rep's wall time ("end to end").
    pub root: String,
    /// The phases the end-of-run summary lists, in tree order, the root first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<SummaryPhase>,
    /// The phases a diff's phase table compares, in tree order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review: Vec<String>,
    /// Labels of phases in tables, by span; a span without one is shown by its name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, PhaseLabel>,
    /// The wrapper: the call whose self time is the unattributed time (the summary's
    /// "unattributed" row, the busy cores of the phase table, the gaps chart's wrapper
    /// unless the experiment names another in `[workload] gaps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapper: Option<String>,
    /// The spans inside the wrapper that count as inner (compute) time in a rep without
    /// kernel records, the main one first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inner: Vec<String>,
    /// Spans that free memory; the report lists what each freed and what it cost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drops: Vec<String>,
    /// The phase a diff compares end to end when one side ran only part of the
    /// workload (a variant's `scope`, e.g. synthesis alone under the emulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
}

impl PhaseSpec {
    /// A workload with a root and nothing else named (a program's run: its own spans
    /// are its phases).
    pub fn root_only(root: &str) -> PhaseSpec {
        PhaseSpec {
            root: root.into(),
            summary: Vec::new(),
            review: Vec::new(),
            labels: BTreeMap::new(),
            wrapper: None,
            inner: Vec::new(),
            drops: Vec::new(),
            partial: None,
        }
    }

    /// The Groth16 prover's phases as every run folder of meta.json schema 1 was read:
    /// what a folder without `phases` reads as (also a command's, whose root was
    /// renamed `prove`). The prover's own (`gapscope::prover::spans::phase_spec`) are
    /// checked against these.
    pub fn groth16() -> PhaseSpec {
        let label = |label: &str, cpu: &str, mixed: &str| PhaseLabel {
            label: label.into(),
            by_backend: [("cpu".to_string(), cpu.to_string())].into(),
            mixed: Some(mixed.into()),
        };
        let s = |d: &[&str]| d.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        PhaseSpec {
            root: "prove".into(),
            summary: [
                ("prove", 0),
                ("synthesis", 1),
                ("gpu_prove", 1),
                ("kernels", 2),
                ("b_g2_msm", 2),
                ("drop", 2),
                ("drop_assignments", 1),
            ]
            .iter()
            .map(|&(span, depth)| SummaryPhase {
                span: span.into(),
                depth,
            })
            .collect(),
            review: s(&["synthesis", "gpu_prove", "kernels", "drop"]),
            labels: [
                (
                    "gpu_prove".to_string(),
                    label("GPU wrapper", "CPU prover call", "backend call"),
                ),
                (
                    "kernels".to_string(),
                    label("GPU kernels", "NTT and MSMs", "NTT and MSMs"),
                ),
            ]
            .into(),
            wrapper: Some("gpu_prove".into()),
            inner: s(&["kernels", "b_g2_msm"]),
            drops: s(&["drop", "drop_assignments"]),
            partial: Some("synthesis".into()),
        }
    }

    /// [`PhaseSpec::groth16`], built once.
    pub fn groth16_ref() -> &'static PhaseSpec {
        static SPEC: OnceLock<PhaseSpec> = OnceLock::new();
        SPEC.get_or_init(PhaseSpec::groth16)
    }

    /// A phase's label in tables for reps of `backend` (None: the sides compared ran
    /// different backends): "label (span)", or the span's name where it has none.
    pub fn label(&self, span: &str, backend: Option<&str>) -> String {
        let Some(l) = self.labels.get(span) else {
            return span.to_string();
        };
        let text = match backend {
            Some(b) => l.by_backend.get(b).unwrap_or(&l.label),
            None => l.mixed.as_ref().unwrap_or(&l.label),
        };
        format!("{text} ({span})")
    }

    /// The wrapper's main inner span (the first of `inner`).
    pub fn main_inner(&self) -> Option<&str> {
        self.inner.first().map(String::as_str)
    }

    /// Checks the record as read from a run folder; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        let bad = |n: &str| n.trim().is_empty() || n.chars().any(char::is_control);
        let name = |field: &str, n: &str| -> Result<(), String> {
            if bad(n) {
                return Err(format!("phases.{field} {n:?} must name a span"));
            }
            Ok(())
        };
        name("root", &self.root)?;
        let mut above = 0;
        for (i, p) in self.summary.iter().enumerate() {
            name(&format!("summary[{i}].span"), &p.span)?;
            // An outline: each phase at most one level below the one above it (the
            // table indents by depth, so a depth is also a width).
            if p.depth > above + 1 {
                return Err(format!(
                    "phases.summary[{i}]: {:?} at depth {} lies more than one level below \
                     the phase above it (depth {above})",
                    p.span, p.depth
                ));
            }
            above = p.depth;
            if (p.depth == 0) != (p.span == self.root) {
                return Err(format!(
                    "phases.summary[{i}]: depth 0 is the root {:?} alone ({:?} at depth {})",
                    self.root, p.span, p.depth
                ));
            }
        }
        for (field, list) in [
            ("review", &self.review),
            ("inner", &self.inner),
            ("drops", &self.drops),
        ] {
            for (i, n) in list.iter().enumerate() {
                name(&format!("{field}[{i}]"), n)?;
                if list[..i].contains(n) {
                    return Err(format!("phases.{field} names {n:?} twice"));
                }
            }
        }
        for span in self.labels.keys() {
            name("labels", span)?;
        }
        if let Some(w) = &self.wrapper {
            name("wrapper", w)?;
            if self.inner.contains(w) {
                return Err(format!("phases.inner names the wrapper {w:?} itself"));
            }
        }
        if let Some(p) = &self.partial {
            name("partial", p)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groth16_labels_read_as_the_prover_labelled_its_phases() {
        let g = PhaseSpec::groth16();
        assert_eq!(
            g.label("gpu_prove", Some("cpu")),
            "CPU prover call (gpu_prove)"
        );
        assert_eq!(
            g.label("gpu_prove", Some("cuda")),
            "GPU wrapper (gpu_prove)"
        );
        assert_eq!(
            g.label("gpu_prove", Some("command")),
            "GPU wrapper (gpu_prove)"
        );
        assert_eq!(g.label("gpu_prove", None), "backend call (gpu_prove)");
        assert_eq!(g.label("kernels", Some("cpu")), "NTT and MSMs (kernels)");
        assert_eq!(
            g.label("kernels", Some("supraseal")),
            "GPU kernels (kernels)"
        );
        assert_eq!(g.label("kernels", None), "NTT and MSMs (kernels)");
        assert_eq!(g.label("synthesis", Some("cpu")), "synthesis");
        assert_eq!(g.main_inner(), Some("kernels"));
        g.check().unwrap();
    }

    #[test]
    fn a_spec_round_trips_through_json_and_bad_ones_are_named() {
        let g = PhaseSpec::groth16();
        let text = serde_json::to_string(&g).unwrap();
        assert_eq!(serde_json::from_str::<PhaseSpec>(&text).unwrap(), g);
        let root: PhaseSpec = serde_json::from_str(r#"{"root": "step"}"#).unwrap();
        assert_eq!(root, PhaseSpec::root_only("step"));
        assert_eq!(serde_json::to_string(&root).unwrap(), r#"{"root":"step"}"#);
        let e = serde_json::from_str::<PhaseSpec>(r#"{"root": "a", "wraper": "b"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `wraper`"), "{e}");
        for (edit, says) in [
            (r#"{"root": ""}"#, "phases.root"),
            (
                r#"{"root": "a", "review": ["b", "b"]}"#,
                "names \"b\" twice",
            ),
            (
                r#"{"root": "a", "wrapper": "w", "inner": ["w"]}"#,
                "the wrapper \"w\" itself",
            ),
            (
                r#"{"root": "a", "summary": [{"span": "b", "depth": 0}]}"#,
                "depth 0 is the root",
            ),
            (
                r#"{"root": "a", "summary": [{"span": "a", "depth": 1}]}"#,
                "depth 0 is the root",
            ),
            (
                r#"{"root": "a", "summary": [{"span": "a", "depth": 0}, {"span": "b", "depth": 18446744073709551615}]}"#,
                "more than one level below",
            ),
        ] {
            let p: PhaseSpec = serde_json::from_str(edit).unwrap();
            let e = p.check().unwrap_err();
            assert!(e.contains(says), "{edit}: {e}");
        }
    }
}
