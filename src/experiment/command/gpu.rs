//! The GPU activity of an external program (`cupti = true`): the `G` lines gapscope's
//! CUPTI injection library wrote become the rep's gpu_activity.csv rows (the columns and
//! kinds of gapscope's own: kernel, memcpy, memset), and its `S` lines, or their
//! absence, say where the rows came from or why there are none.

use std::path::Path;

use crate::protocol::{GpuLines, ParsedStatus};
use crate::store::GpuActivityRow;

/// The `source` of the injection library's status lines.
pub const SOURCE: &str = "cupti";

/// What one rep's lines gave.
#[derive(Debug, Default, PartialEq)]
pub struct RepGpu {
    /// Rows on the span clock, inside the rep's window, by start.
    pub rows: Vec<GpuActivityRow>,
    /// Records outside the rep's window (another clock): dropped.
    pub outside: u64,
    /// "cupti: …" (how it collected, how many records), or "unavailable: <reason>".
    pub status: String,
    /// The collector ran in the program: spans get their GPU-busy time.
    pub collected: bool,
}

/// The rows and the status of one rep from `lines`, the rep's window being
/// `start_ns..=end_ns`; `library` is the injection library the program was started with.
pub fn rep_gpu(
    lines: &GpuLines,
    rep: u32,
    variant: &str,
    (start_ns, end_ns): (u64, u64),
    library: &Path,
) -> RepGpu {
    let mut out = RepGpu::default();
    for a in &lines.activity {
        if a.start_ns < start_ns || a.end_ns > end_ns {
            out.outside += 1;
            continue;
        }
        out.rows.push(GpuActivityRow {
            rep,
            variant: variant.to_string(),
            kind: a.kind.clone(),
            name: a.name.clone(),
            device: a.device,
            stream: a.stream,
            correlation_id: a.correlation_id,
            start_ns: a.start_ns,
            end_ns: a.end_ns,
            duration_ns: a.end_ns - a.start_ns,
            grid_x: a.grid.map(|g| g[0]),
            grid_y: a.grid.map(|g| g[1]),
            grid_z: a.grid.map(|g| g[2]),
            block_x: a.block.map(|b| b[0]),
            block_y: a.block.map(|b| b[1]),
            block_z: a.block.map(|b| b[2]),
            bytes: a.bytes,
        });
    }
    out.rows.sort_by_key(|r| (r.start_ns, r.correlation_id));
    let mine: Vec<&ParsedStatus> = lines.status.iter().filter(|s| s.source == SOURCE).collect();
    let of = |state: &str| {
        mine.iter()
            .find(|s| s.state == state)
            .map(|s| s.text.as_str())
    };
    out.collected = of("started").is_some();
    out.status = match (of("started"), of("unavailable")) {
        (Some(how), _) => {
            let mut s = format!("cupti: {how}; {} record(s)", out.rows.len());
            if out.outside > 0 {
                s.push_str(&format!(
                    ", {} outside the rep dropped (not on CLOCK_MONOTONIC)",
                    out.outside
                ));
            }
            match (of("flushed"), of("flush_failed")) {
                (Some(counts), _) => s.push_str(&format!(" (at exit: {counts})")),
                (None, Some(e)) => s.push_str(&format!(" (flush at exit failed: {e})")),
                (None, None) => s.push_str(
                    " (no flush at exit: the program did not exit normally, so its last \
                     records may be missing)",
                ),
            }
            s
        }
        (None, Some(why)) => format!("unavailable: {why}"),
        (None, None) => format!("unavailable: {}", never_loaded(library)),
    };
    out
}

/// Why a program started with `CUDA_INJECTION64_PATH` said nothing: the driver loads the
/// library at the program's first `cuInit`, so either there was none, or no CUDA driver.
pub fn never_loaded(library: &Path) -> String {
    let driver = ["libcuda.so.1", "libcuda.so"].iter().any(|n| {
        // SAFETY: opening the CUDA driver runs its initialisers, which need nothing of us.
        unsafe { libloading::Library::new(*n) }.is_ok()
    });
    let lib = library.display();
    if driver {
        format!(
            "the injection library ({lib}) was never loaded: the program did not initialise \
             CUDA (no cuInit), or it ran in a process the CUDA driver does not inject \
             (CUDA_INJECTION64_PATH removed from its environment)"
        )
    } else {
        format!(
            "no CUDA driver (libcuda.so.1) on this host, so the injection library ({lib}) \
             was never loaded"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ParsedActivity;

    fn activity(kind: &str, start_ns: u64, end_ns: u64) -> ParsedActivity {
        ParsedActivity {
            kind: kind.into(),
            device: 0,
            stream: 7,
            correlation_id: 3,
            start_ns,
            end_ns,
            grid: (kind == "kernel").then_some([80, 1, 1]),
            block: (kind == "kernel").then_some([256, 1, 1]),
            bytes: (kind != "kernel").then_some(4096),
            name: if kind == "kernel" {
                "_Z5scalePfi"
            } else {
                "HtoD"
            }
            .into(),
        }
    }

    fn status(state: &str, text: &str) -> ParsedStatus {
        ParsedStatus {
            source: SOURCE.into(),
            state: state.into(),
            text: text.into(),
        }
    }

    #[test]
    fn records_become_rows_of_the_rep_and_the_status_says_where_from() {
        let lines = GpuLines {
            activity: vec![
                activity("kernel", 300, 400),
                activity("memcpy", 150, 250),
                activity("kernel", 5, 9), // before the rep: another clock
            ],
            status: vec![
                status("started", "libcupti.so.13; timestamps: CLOCK_MONOTONIC"),
                status("flushed", "records=3 dropped=0"),
            ],
        };
        let g = rep_gpu(&lines, 4, "v", (100, 1_000), Path::new("/x/lib.so"));
        assert!(g.collected);
        assert_eq!(g.outside, 1);
        assert_eq!(g.rows.len(), 2);
        let (copy, kernel) = (&g.rows[0], &g.rows[1]);
        assert_eq!(
            (copy.kind.as_str(), copy.bytes, copy.grid_x),
            ("memcpy", Some(4096), None)
        );
        assert_eq!(
            (kernel.rep, kernel.variant.as_str(), kernel.duration_ns),
            (4, "v", 100)
        );
        assert_eq!(
            (kernel.grid_x, kernel.block_x, kernel.name.as_str()),
            (Some(80), Some(256), "_Z5scalePfi")
        );
        assert!(
            g.status.starts_with("cupti: libcupti.so.13"),
            "{}",
            g.status
        );
        assert!(g.status.contains("2 record(s)"), "{}", g.status);
        assert!(g.status.contains("1 outside the rep"), "{}", g.status);
        assert!(g.status.contains("records=3 dropped=0"), "{}", g.status);
    }

    #[test]
    fn no_collector_or_a_failed_one_is_unavailable_with_the_reason() {
        let said = GpuLines {
            activity: vec![],
            status: vec![status(
                "unavailable",
                "no CUPTI library: libcupti.so.13 not found",
            )],
        };
        let g = rep_gpu(&said, 0, "v", (0, 10), Path::new("/x/lib.so"));
        assert!(!g.collected);
        assert_eq!(
            g.status,
            "unavailable: no CUPTI library: libcupti.so.13 not found"
        );
        let silent = rep_gpu(
            &GpuLines::default(),
            0,
            "v",
            (0, 10),
            Path::new("/x/lib.so"),
        );
        assert!(!silent.collected && silent.rows.is_empty());
        assert!(
            silent.status.starts_with("unavailable: "),
            "{}",
            silent.status
        );
        assert!(silent.status.contains("/x/lib.so"), "{}", silent.status);
        // Started but never flushed: the status says the last records may be missing.
        let cut = GpuLines {
            activity: vec![],
            status: vec![status("started", "libcupti.so.13")],
        };
        let g = rep_gpu(&cut, 0, "v", (0, 10), Path::new("/x/lib.so"));
        assert!(
            g.collected && g.status.contains("no flush at exit"),
            "{}",
            g.status
        );
    }
}
