//! The hash workload: a buffer of `bytes` pseudo-random bytes (made outside the measured
//! spans, different each rep) digested with SHA-256 or SHA-512, either whole or as a tree
//! (the buffer cut into `chunk_kib` chunks, digested on `threads` threads, then one
//! digest of the chunk digests). Every rep's digest is checked against a one-thread
//! recomputation outside the spans. It exists to show that [`Workload`] carries a
//! workload other than the Groth16 prover, and to A/B real knobs (algorithm, chunking,
//! threads) in a few milliseconds.
//!
//! ```text
//! hash                 the rep (attributes: algorithm, bytes, chunks, threads)
//! ├─ digest            the bytes digested (digest[t] per thread when chunked)
//! └─ combine           the digest of the chunk digests (chunked only)
//! ```
//!
//! Knobs (a variant's `knobs = { … }`): `algorithm` ("sha256", default, or "sha512"),
//! `chunk_kib` (0, default: one digest of the whole buffer), `threads` (1 to 64, default
//! 1; with chunks only).

use gapscope_trace::trace::{intern, Span};
use gapscope_workload::phases::{PhaseLabel, PhaseSpec, SummaryPhase, WorkloadKind};
use gapscope_workload::workload::refuse_unknown;
use gapscope_workload::{Checked, Knobs, Rep, Workload};
use sha2::{Digest, Sha256, Sha512};

/// The spans the workload opens.
pub const ROOT: &str = "hash";
pub const DIGEST: &str = "digest";
pub const COMBINE: &str = "combine";

const KNOBS: [&str; 3] = ["algorithm", "chunk_kib", "threads"];

/// Digests of `bytes` bytes per rep (as JSON, `{"bytes": N}`: what the harness sends
/// `gapscope-hash-worker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashWorkload {
    pub bytes: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algorithm {
    Sha256,
    Sha512,
}

impl Algorithm {
    fn name(self) -> &'static str {
        match self {
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Algorithm::Sha256 => Sha256::digest(data).to_vec(),
            Algorithm::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}

/// A variant's knobs, read and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Settings {
    algorithm: Algorithm,
    /// Chunk size in bytes (0: the whole buffer at once).
    chunk: usize,
    threads: usize,
}

fn settings(knobs: &Knobs) -> Result<Settings, String> {
    refuse_unknown("hash", knobs, &KNOBS)?;
    let algorithm = match knobs.get("algorithm").map(String::as_str) {
        None | Some("sha256") => Algorithm::Sha256,
        Some("sha512") => Algorithm::Sha512,
        Some(other) => {
            return Err(format!(
            "knob algorithm = {other:?}: the hash workload digests with \"sha256\" or \"sha512\""
        ))
        }
    };
    let number = |name: &str, default: usize, max: usize| -> Result<usize, String> {
        match knobs.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("knob {name} = {v:?}: give a whole number from 0 to {max}")),
        }
    };
    let chunk = number("chunk_kib", 0, 1 << 20)? * 1024;
    let threads = number("threads", 1, 64)?;
    if threads == 0 {
        return Err("knob threads = 0: give 1 or more".into());
    }
    if threads > 1 && chunk == 0 {
        return Err(format!(
            "knob threads = {threads} needs chunk_kib: the whole buffer is one digest on one \
             thread; give chunk_kib = 64 (say) to spread chunks over the threads"
        ));
    }
    Ok(Settings {
        algorithm,
        chunk,
        threads,
    })
}

impl Workload for HashWorkload {
    fn kind(&self) -> WorkloadKind {
        WorkloadKind::Hash
    }

    fn phases(&self) -> PhaseSpec {
        let mut p = PhaseSpec::root_only(ROOT);
        p.summary = [(ROOT, 0), (DIGEST, 1), (COMBINE, 1)]
            .iter()
            .map(|(span, depth)| SummaryPhase {
                span: span.to_string(),
                depth: *depth,
            })
            .collect();
        p.review = vec![DIGEST.into(), COMBINE.into()];
        p.labels.insert(
            COMBINE.into(),
            PhaseLabel {
                label: "digest of the chunk digests".into(),
                by_backend: Default::default(),
                mixed: None,
            },
        );
        p.inner = vec![DIGEST.into()];
        p
    }

    fn resolve_knobs(&self, knobs: &Knobs) -> Result<Knobs, String> {
        let s = settings(knobs)?;
        Ok([
            ("algorithm", s.algorithm.name().to_string()),
            ("chunk_kib", (s.chunk / 1024).to_string()),
            ("threads", s.threads.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect())
    }

    fn prepare(&self, knobs: &Knobs, index: u64) -> Result<Box<dyn Rep>, String> {
        let settings = settings(knobs)?;
        Ok(Box::new(HashRep {
            input: input(self.bytes, index),
            settings,
            made: None,
        }))
    }
}

/// `len` bytes of xorshift64* output seeded by `index`: another buffer every rep.
fn input(len: usize, index: u64) -> Vec<u8> {
    let mut x = index.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

struct HashRep {
    input: Vec<u8>,
    settings: Settings,
    made: Option<Vec<u8>>,
}

impl Rep for HashRep {
    fn run(&mut self) -> u64 {
        let s = self.settings;
        let root = Span::enter(ROOT);
        root.set_attr("algorithm", s.algorithm.name());
        root.set_attr("bytes", self.input.len());
        root.set_attr("threads", s.threads);
        let trace = root.trace();
        let digest = if s.chunk == 0 {
            let _d = Span::enter(DIGEST);
            s.algorithm.digest(&self.input)
        } else {
            let chunks: Vec<&[u8]> = self.input.chunks(s.chunk).collect();
            root.set_attr("chunks", chunks.len());
            let leaves = {
                let d = Span::enter(DIGEST);
                let ctx = d.context();
                let mut leaves = vec![Vec::new(); chunks.len()];
                let mut slots: Vec<_> = leaves.iter_mut().enumerate().collect();
                let per = chunks.len().div_ceil(s.threads).max(1);
                std::thread::scope(|scope| {
                    for (t, mine) in (0..).zip(slots.chunks_mut(per)) {
                        let chunks = &chunks;
                        scope.spawn(move || {
                            let _g = Span::child_of(intern(&format!("{DIGEST}[{t}]")), ctx);
                            for (i, slot) in mine.iter_mut() {
                                **slot = s.algorithm.digest(chunks[*i]);
                            }
                        });
                    }
                });
                leaves
            };
            let _c = Span::enter(COMBINE);
            s.algorithm.digest(&leaves.concat())
        };
        drop(root);
        self.made = Some(digest);
        trace
    }

    fn check(self: Box<Self>) -> Checked {
        let Some(made) = &self.made else {
            return Checked::failed(0, "the rep made no digest");
        };
        // Recomputed on this thread, chunk after chunk: no thread split to agree with.
        let s = self.settings;
        let want = if s.chunk == 0 {
            s.algorithm.digest(&self.input)
        } else {
            let mut leaves = Vec::new();
            for c in self.input.chunks(s.chunk) {
                leaves.extend(s.algorithm.digest(c));
            }
            s.algorithm.digest(&leaves)
        };
        if *made == want {
            Checked::passed(1)
        } else {
            Checked::failed(1, "the digest differs from its one-thread recomputation")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(pairs: &[(&str, &str)]) -> Knobs {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_chunked_rep_on_threads_matches_its_recomputation_and_records_its_spans() {
        let w = HashWorkload { bytes: 300_000 };
        let k = knobs(&[
            ("algorithm", "sha512"),
            ("chunk_kib", "16"),
            ("threads", "3"),
        ]);
        let mut rep = w.prepare(&k, 7).unwrap();
        let trace = rep.run();
        rep.settle();
        assert_eq!(rep.check(), Checked::passed(1));
        let spans = gapscope_trace::trace::drain_trace(trace);
        let names: Vec<&str> = spans.iter().map(|s| s.name).collect();
        for n in [ROOT, DIGEST, COMBINE, "digest[0]", "digest[1]", "digest[2]"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
    }

    #[test]
    fn a_whole_buffer_digest_is_sha256_of_the_input() {
        let w = HashWorkload { bytes: 1000 };
        let mut rep = w.prepare(&Knobs::new(), 1).unwrap();
        rep.run();
        assert_eq!(rep.check(), Checked::passed(1));
        assert_eq!(input(1000, 1).len(), 1000);
        assert_ne!(
            input(64, 1),
            input(64, 2),
            "each rep digests another buffer"
        );
    }

    #[test]
    fn wrong_knobs_are_refused_with_what_to_write() {
        let w = HashWorkload { bytes: 10 };
        let e = w
            .resolve_knobs(&knobs(&[("algoritm", "sha512")]))
            .unwrap_err();
        assert!(e.contains("algorithm, chunk_kib, threads"), "{e}");
        let e = w
            .resolve_knobs(&knobs(&[("algorithm", "md5")]))
            .unwrap_err();
        assert!(e.contains("\"sha512\""), "{e}");
        let e = w.resolve_knobs(&knobs(&[("threads", "4")])).unwrap_err();
        assert!(e.contains("chunk_kib"), "{e}");
        assert!(w.resolve_knobs(&knobs(&[("threads", "x")])).is_err());
    }

    #[test]
    fn resolved_knobs_name_every_default() {
        let w = HashWorkload { bytes: 10 };
        let k = w.resolve_knobs(&Knobs::new()).unwrap();
        assert_eq!(
            k,
            knobs(&[
                ("algorithm", "sha256"),
                ("chunk_kib", "0"),
                ("threads", "1")
            ])
        );
    }

    #[test]
    fn its_phases_are_an_outline_under_its_root() {
        let p = HashWorkload { bytes: 1 }.phases();
        assert_eq!(p.root, ROOT);
        assert_eq!(p.summary[0].span, ROOT);
        assert!(p.check().is_ok(), "{:?}", p.check());
    }
}
