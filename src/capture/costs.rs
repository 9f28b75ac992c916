//! The capture paths a span can come through, and what one span costs the program on
//! each, as measured: the diff's note on the recorder's own cost
//! (`analysis::diff_notes`) charges a parent's self time with its children's spans at
//! the cost of the path they came through, not the native recorder's.
//!
//! The native recorder measures itself at the start of every run (meta.json's
//! `recorder.span_cost_ns`); the other paths' costs are benchmark results, given here
//! with the machine and the command they came from.

/// How a span reached gapscope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// gapscope's own recorder (the prover, the C ABI): rows without a `via` attribute.
    Native,
    /// Protocol lines a program wrote itself (gapscope-emit, gapscope_emit.h).
    Protocol,
    /// The `gapscope-tracing` layer's lines.
    Tracing,
    /// NVTX ranges, through gapscope's injection library.
    Nvtx,
    /// Timing lines of the program's log (`log_spans`).
    LogLines,
}

/// What one span of a path costs, where it was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathCost {
    pub per_span_ns: f64,
    /// Machine and command of the measurement, for the note.
    pub measured: &'static str,
}

impl Via {
    /// The attribute value rows carry (`via`).
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Native => "native",
            Via::Protocol => "protocol",
            Via::Tracing => "tracing",
            Via::Nvtx => "nvtx",
            Via::LogLines => "log_lines",
        }
    }

    pub fn parse(s: &str) -> Option<Via> {
        [
            Via::Native,
            Via::Protocol,
            Via::Tracing,
            Via::Nvtx,
            Via::LogLines,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }

    /// The path of a spans.csv row, from its attributes (JSON): native where none says.
    pub fn of_row_attrs(attrs: &str) -> Via {
        let Some(i) = attrs.find("\"via\":\"") else {
            return Via::Native;
        };
        let rest = &attrs[i + 7..];
        rest.split('"')
            .next()
            .and_then(Via::parse)
            .unwrap_or(Via::Native)
    }

    /// The measured cost of one span on this path; `None` for [`Via::Native`], whose
    /// cost each run measures itself.
    pub fn measured_cost(self) -> Option<PathCost> {
        match self {
            // evidence/tracing_overhead: CPU time of the process per span, registry
            // included, lines to /dev/null.
            Via::Tracing => Some(PathCost {
                per_span_ns: 379.1,
                measured: "CPU time per span on the 2-core VM, `cargo bench -p \
                           gapscope-tracing --bench layer_overhead` (cpu/gapscope_lines)",
            }),
            // evidence/tracing_overhead: gapscope-emit's Scope (a begin and an end line,
            // each with a process CPU clock read and a write); the C header does the same.
            Via::Protocol => Some(PathCost {
                per_span_ns: 2842.9,
                measured: "CPU time per gapscope-emit Scope on the 2-core VM, `cargo bench -p \
                           gapscope-tracing --bench layer_overhead` (cpu/emit_scope)",
            }),
            // evidence/capture_cost: a push and a pop through gapscope's injection
            // library, lines batched per thread, process CPU interpolated (the default).
            Via::Nvtx => Some(PathCost {
                per_span_ns: 665.4,
                measured: "CPU time per NVTX push and pop on the 2-core VM, lines batched, \
                           `evidence/capture_cost/run.sh` (nvtx_gapscope; 2.63 µs with \
                           GAPSCOPE_NVTX_CPU=exact)",
            }),
            // evidence/capture_cost: a begin and an end line with a time of day, printed
            // line-buffered to a pipe, what a program's own timing lines cost it.
            Via::LogLines => Some(PathCost {
                per_span_ns: 2170.9,
                measured: "CPU time per pair of timed log lines printed line-buffered on the \
                           2-core VM, `evidence/capture_cost/run.sh` (log_lines)",
            }),
            Via::Native => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_path_is_read_from_its_attributes() {
        assert_eq!(
            Via::of_row_attrs(r#"{"via":"tracing","x":1}"#),
            Via::Tracing
        );
        assert_eq!(
            Via::of_row_attrs(r#"{"a":"b","via":"log_lines"}"#),
            Via::LogLines
        );
        assert_eq!(Via::of_row_attrs(r#"{"x":1}"#), Via::Native);
        assert_eq!(Via::of_row_attrs(r#"{"via":"other"}"#), Via::Native);
        assert!(Via::Tracing.measured_cost().is_some());
        assert!(Via::Protocol.measured_cost().is_some());
        assert!(Via::Nvtx.measured_cost().is_some());
        assert!(Via::LogLines.measured_cost().is_some());
        assert!(Via::Native.measured_cost().is_none());
    }
}
