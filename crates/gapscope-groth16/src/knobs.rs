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

/// A variant's prover knobs as a workload binary receives them: name → text, every
/// knob given (what [`from_knobs`] reads back).
pub fn to_knobs(
    backend: BackendKind,
    gadget: Gadget,
    o: &ProveOptions,
) -> std::collections::BTreeMap<String, String> {
    [
        ("backend", backend.as_str().to_string()),
        ("gadget", gadget.as_str().to_string()),
        ("drop", o.drop.as_str().to_string()),
        ("host_memory", o.host_memory.as_str().to_string()),
        ("streams", o.streams.to_string()),
        ("gpus", o.gpus.to_string()),
        ("msm_threads", o.msm_threads.to_string()),
        ("ntt", o.ntt.as_str().to_string()),
        ("h_threads", o.h_threads.to_string()),
        ("prep_threads", o.prep_threads.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Reads [`to_knobs`]'s map back; a knob left out takes its default, an unknown one or a
/// value that is not one of the knob's is refused, naming it.
pub fn from_knobs(
    k: &std::collections::BTreeMap<String, String>,
) -> Result<(BackendKind, Gadget, ProveOptions), String> {
    const KNOWN: [&str; 10] = [
        "backend",
        "gadget",
        "drop",
        "host_memory",
        "streams",
        "gpus",
        "msm_threads",
        "ntt",
        "h_threads",
        "prep_threads",
    ];
    if let Some(bad) = k.keys().find(|n| !KNOWN.contains(&n.as_str())) {
        return Err(format!(
            "knob {bad:?} is not one of the prover's ({})",
            KNOWN.join(", ")
        ));
    }
    fn pick<T: Copy>(
        k: &std::collections::BTreeMap<String, String>,
        name: &str,
        all: &[T],
        text: fn(T) -> &'static str,
        default: T,
    ) -> Result<T, String> {
        match k.get(name) {
            None => Ok(default),
            Some(v) => all.iter().copied().find(|x| text(*x) == v).ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(|x| text(*x)).collect();
                format!("knob {name} = {v:?}: give one of {}", names.join(", "))
            }),
        }
    }
    fn number(
        k: &std::collections::BTreeMap<String, String>,
        name: &str,
        default: u32,
    ) -> Result<u32, String> {
        k.get(name).map_or(Ok(default), |v| {
            v.parse()
                .map_err(|_| format!("knob {name} = {v:?}: give a whole number"))
        })
    }
    let d = ProveOptions::default();
    let backend = pick(
        k,
        "backend",
        &[BackendKind::Cpu, BackendKind::Cuda, BackendKind::Supraseal],
        BackendKind::as_str,
        BackendKind::Cpu,
    )?;
    let gadget = pick(
        k,
        "gadget",
        &[Gadget::Lc, Gadget::AddToLc],
        Gadget::as_str,
        Gadget::Lc,
    )?;
    let options = ProveOptions {
        drop: pick(
            k,
            "drop",
            &[DropPolicy::Sync, DropPolicy::Async],
            DropPolicy::as_str,
            d.drop,
        )?,
        host_memory: pick(
            k,
            "host_memory",
            &[HostMemory::Pageable, HostMemory::Pinned],
            HostMemory::as_str,
            d.host_memory,
        )?,
        streams: number(k, "streams", d.streams)?,
        gpus: number(k, "gpus", d.gpus)?,
        msm_threads: number(k, "msm_threads", d.msm_threads)?,
        ntt: pick(
            k,
            "ntt",
            &[NttSchedule::First, NttSchedule::Overlap],
            NttSchedule::as_str,
            d.ntt,
        )?,
        h_threads: number(k, "h_threads", d.h_threads)?,
        prep_threads: number(k, "prep_threads", d.prep_threads)?,
    };
    Ok((backend, gadget, options))
}

#[cfg(test)]
mod knob_map_tests {
    use super::*;

    #[test]
    fn knobs_read_back_as_written_and_bad_ones_are_named() {
        let o = ProveOptions {
            drop: DropPolicy::Async,
            host_memory: HostMemory::Pinned,
            streams: 1,
            gpus: 2,
            msm_threads: 8,
            ntt: NttSchedule::Overlap,
            h_threads: 2,
            prep_threads: 3,
        };
        let k = to_knobs(BackendKind::Cuda, Gadget::AddToLc, &o);
        assert_eq!(from_knobs(&k), Ok((BackendKind::Cuda, Gadget::AddToLc, o)));
        let mut bad = k.clone();
        bad.insert("ntt".into(), "sideways".into());
        assert!(from_knobs(&bad).unwrap_err().contains("first, overlap"));
        bad = k.clone();
        bad.insert("streams".into(), "two".into());
        assert!(from_knobs(&bad).unwrap_err().contains("streams"));
        bad = k;
        bad.insert("colour".into(), "red".into());
        assert!(from_knobs(&bad).unwrap_err().contains("colour"));
        assert_eq!(
            from_knobs(&Default::default()),
            Ok((BackendKind::Cpu, Gadget::Lc, ProveOptions::default()))
        );
    }
}
