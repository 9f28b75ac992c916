//! The prover's knobs as an experiment names them: which circuit, which backend, and the
//! options a backend honours. Plain values with no proving code behind them, so that a
//! build of the harness without the prover (`--no-default-features`) still reads every
//! experiment and run folder that names them.

/// Which circuit a workload proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitKind {
    /// SHA-256 over a preimage (bellperson's gadget), digest packed into public inputs.
    Sha256,
    /// PoRep-shaped: node labels decomposed into bits, XOR-mixed, re-packed and
    /// compressed (x^5), summed into one public input; uses our packing gadgets.
    Porep,
    /// Dense squaring chain over the whole domain, one public input (no booleans).
    Chain,
}

impl CircuitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CircuitKind::Sha256 => "sha256",
            CircuitKind::Porep => "porep",
            CircuitKind::Chain => "chain",
        }
    }

    /// Smallest supported log2 size.
    pub const fn min_log2(self) -> u32 {
        match self {
            CircuitKind::Sha256 => 15,
            CircuitKind::Porep => 10,
            CircuitKind::Chain => 2,
        }
    }
}

/// How bit-packing linear combinations are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gadget {
    Lc,
    AddToLc,
}

impl Gadget {
    pub fn as_str(self) -> &'static str {
        match self {
            Gadget::Lc => "lc",
            Gadget::AddToLc => "add_to_lc",
        }
    }
}

/// When buffers are freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropPolicy {
    Sync,
    Async,
}

impl DropPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            DropPolicy::Sync => "sync",
            DropPolicy::Async => "async",
        }
    }
}

/// The backends gapscope knows (not all are compiled into every build).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    Cpu,
    Cuda,
    Supraseal,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Supraseal => "supraseal",
        }
    }
}

/// Where a GPU backend stages host data before copying it to the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    /// Copies straight from the Rust vectors (the driver stages pageable memory itself).
    Pageable,
    /// a/b/c copied into pinned buffers kept for the process, then to the GPU.
    Pinned,
}

impl HostMemory {
    pub fn as_str(self) -> &'static str {
        match self {
            HostMemory::Pageable => "pageable",
            HostMemory::Pinned => "pinned",
        }
    }
}

/// cuda: when the NTTs that make H's scalars run against the MSMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NttSchedule {
    /// Every circuit's NTTs first, then the MSMs.
    First,
    /// The NTTs on their own host thread, circuit by circuit, each circuit's H MSM
    /// starting as soon as its NTTs are done: the staging of later circuits' a/b/c
    /// overlaps earlier circuits' MSMs.
    Overlap,
}

impl NttSchedule {
    pub fn as_str(self) -> &'static str {
        match self {
            NttSchedule::First => "first",
            NttSchedule::Overlap => "overlap",
        }
    }
}

/// Per-call options a backend honours (those that do not apply to it are ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProveOptions {
    pub drop: DropPolicy,
    /// cuda: how a/b/c reach the GPU.
    pub host_memory: HostMemory,
    /// cuda: streams for the NTTs of a, b and c (1 or 2).
    pub streams: u32,
    /// cuda: GPUs a batch is split over (0: every GPU the SRS is on).
    pub gpus: u32,
    /// cuda: host threads for the split MSMs (1, 4 or 8).
    pub msm_threads: u32,
    /// cuda: NTTs before the MSMs, or overlapping them.
    pub ntt: NttSchedule,
    /// cuda: host threads for the H MSMs (1 or 2).
    pub h_threads: u32,
    /// cuda: prep's worker threads (0: half the cores).
    pub prep_threads: u32,
}

impl Default for ProveOptions {
    fn default() -> Self {
        ProveOptions {
            drop: DropPolicy::Sync,
            host_memory: HostMemory::Pageable,
            streams: 2,
            gpus: 0,
            msm_threads: 1,
            ntt: NttSchedule::First,
            h_threads: 1,
            prep_threads: 0,
        }
    }
}
