//! Upstream's view of a params file: its verifying key and the point count of every
//! section, checked against the file's size before upstream reads it.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;

use super::err;
use crate::{Groth16Params, ProverError};

/// Point counts of a params file, section by section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SrsCounts {
    pub ic: usize,
    pub h: usize,
    pub l: usize,
    pub a: usize,
    pub b_g1: usize,
    pub b_g2: usize,
}

impl SrsCounts {
    pub fn of(p: &Groth16Params) -> Self {
        SrsCounts {
            ic: p.vk.ic.len(),
            h: p.h.len(),
            l: p.l.len(),
            a: p.a.len(),
            b_g1: p.b_g1.len(),
            b_g2: p.b_g2.len(),
        }
    }
}

/// What upstream will find in a params file: its verifying key and section sizes.
#[derive(Debug, Clone)]
pub struct SrsHeader {
    pub vk: VerifyingKey<Bls12>,
    pub counts: SrsCounts,
    pub file_bytes: u64,
}

const G1_BYTES: u64 = 96;
const G2_BYTES: u64 = 192;

/// Reads the verifying key and section counts of a params file in bellperson's
/// `Parameters::write` layout, and checks that the sections add up to the file's size
/// exactly (upstream's own check is looser, and it reads past a short file).
pub fn read_header(path: &Path) -> Result<SrsHeader, ProverError> {
    let f = File::open(path).map_err(|e| {
        err(format!(
            "params file {} cannot be opened ({e}); it is written by the runner's params step \
             (`gapscope run` generates missing params)",
            path.display()
        ))
    })?;
    let file_bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    let bad = |what: String| {
        err(format!(
            "{} is not a complete params file in bellperson's layout ({what}); delete it and its \
             .json sidecar to have it regenerated",
            path.display()
        ))
    };
    let mut r = BufReader::new(f);
    let vk = VerifyingKey::<Bls12>::read(&mut r).map_err(|e| bad(format!("verifying key: {e}")))?;
    let count =
        |r: &mut BufReader<File>, what: &str, point_bytes: u64| -> Result<usize, ProverError> {
            let mut b = [0u8; 4];
            r.read_exact(&mut b)
                .map_err(|e| bad(format!("{what} count: {e}")))?;
            let n = u32::from_be_bytes(b) as u64;
            r.seek_relative((n * point_bytes) as i64)
                .map_err(|e| bad(format!("{what} points: {e}")))?;
            Ok(n as usize)
        };
    let h = count(&mut r, "h", G1_BYTES)?;
    let l = count(&mut r, "l", G1_BYTES)?;
    let a = count(&mut r, "a", G1_BYTES)?;
    let b_g1 = count(&mut r, "b_g1", G1_BYTES)?;
    let b_g2 = count(&mut r, "b_g2", G2_BYTES)?;
    let end = r.stream_position().map_err(|e| bad(e.to_string()))?;
    if end != file_bytes {
        return Err(bad(format!(
            "sections end at byte {end}, the file has {file_bytes}"
        )));
    }
    let ic = vk.ic.len();
    Ok(SrsHeader {
        vk,
        counts: SrsCounts {
            ic,
            h,
            l,
            a,
            b_g1,
            b_g2,
        },
        file_bytes,
    })
}
