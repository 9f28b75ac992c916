//! The files of a run folder, listed once: the names the writers use, and the list the
//! readers' hostile-file tests walk (a link, a FIFO, a device and a bomb under each).

use super::{EXPERIMENT_COPY, GPU_ACTIVITY, META, RUNS, SPANS, TELEMETRY};

/// The second part of spans.csv ([`super::part_name`]), which a run writes once
/// spans.csv reaches the part size.
pub const SPANS_PART_2: &str = "spans.2.csv";
/// The second parts of the GPU tables (their next parts are named and read alike).
pub const TELEMETRY_PART_2: &str = "telemetry.2.csv";
pub const GPU_ACTIVITY_PART_2: &str = "gpu_activity.2.csv";

/// The folder of a run's sampled stacks ([`STACKS_JSON`], [`STACKS_FOLDED`]).
pub const STACKS_DIR: &str = "stacks";

/// A file of a run folder: its name inside the folder (`{rep}` stands for a rep's
/// number), and whether it may be stored gzipped instead (`NAME.gz`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFile {
    pub name: &'static str,
    pub gzip: bool,
}

impl RunFile {
    /// The file's name for rep `rep` (the name itself for a file of the whole run).
    pub fn of_rep(&self, rep: u32) -> String {
        self.name.replace("{rep}", &rep.to_string())
    }

    /// The name of its gzipped form, for rep `rep`.
    pub fn gz_of_rep(&self, rep: u32) -> String {
        format!("{}.gz", self.of_rep(rep))
    }
}

/// A rep's sampling summary: rate, counts, threads, or why sampling was unavailable.
pub const STACKS_JSON: RunFile = RunFile {
    name: "stacks/rep{rep}.json",
    gzip: false,
};
/// A rep's sampled stacks in the folded format, gzipped past a size.
pub const STACKS_FOLDED: RunFile = RunFile {
    name: "stacks/rep{rep}.folded",
    gzip: true,
};

/// The log of a command workload's variant build: `build-<variant>.log` (read back only
/// for a failed build's tail, as any run folder file is: no link, no FIFO, capped).
pub fn build_log(variant: &str) -> String {
    format!("build-{variant}.log")
}

/// Every file gapscope writes into a run folder and reads back. A writer names its
/// files from here, and the tests plant a link, a FIFO, a device and a bomb under each
/// name on this list, so that a file added here is one no reader can open unhardened.
pub const RUN_FILES: &[RunFile] = &[
    RunFile {
        name: META,
        gzip: false,
    },
    RunFile {
        name: EXPERIMENT_COPY,
        gzip: false,
    },
    RunFile {
        name: RUNS,
        gzip: true,
    },
    RunFile {
        name: SPANS,
        gzip: true,
    },
    // The next parts of spans.csv (`spans.3.csv`, …) are named and read as this one.
    RunFile {
        name: SPANS_PART_2,
        gzip: true,
    },
    RunFile {
        name: TELEMETRY,
        gzip: true,
    },
    RunFile {
        name: TELEMETRY_PART_2,
        gzip: true,
    },
    RunFile {
        name: GPU_ACTIVITY,
        gzip: true,
    },
    RunFile {
        name: GPU_ACTIVITY_PART_2,
        gzip: true,
    },
    STACKS_JSON,
    STACKS_FOLDED,
];
