//! [`CpuFixedBase`]: k_i·G on every core, by signed fixed windows. For a window width w,
//! a table holds d·2^(w·j)·G (affine) for every window j and digit 1 ≤ d ≤ 2^(w−1); a
//! scalar recoded into signed digits is then one addition per window, about 255/w of
//! them, against the ~255 doublings and ~40 additions of the wNAF that bellperson's
//! generator runs per point. The additions are affine, a chunk of scalars at a time
//! sharing one field inversion per window, so results need no normalization. Tables
//! are kept for the next call with the same base (a run multiplies G1 five times).

use std::sync::{Arc, Mutex};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::prime::PrimeCurveAffine;
use group::Group;
use rayon::prelude::*;

use super::fixed_base::FixedBase;
use super::normalize::{batch_normalize, invert_all, Jacobian};

/// Scalars are below r < 2^255.
const SCALAR_BITS: usize = 255;
/// Points per batch normalization: one inversion per chunk, and chunks small enough
/// that rayon spreads a query over every thread.
const CHUNK: usize = 1024;
/// Below this many scalars a table does not pay for itself: plain multiplication.
const DIRECT_BELOW: usize = 64;
/// Widest window: a G1 table of 16 windows × 2^15 points is 48 MiB (G2: 96 MiB).
const MAX_WINDOW: u32 = 16;
/// Tables kept per group (by base and width).
const CACHED_TABLES: usize = 2;

/// Multithreaded fixed-base multiplication on the CPU (rayon's pool).
pub struct CpuFixedBase {
    window: Option<u32>,
    g1: Mutex<Vec<Arc<Table<G1Projective>>>>,
    g2: Mutex<Vec<Arc<Table<G2Projective>>>>,
}

impl Default for CpuFixedBase {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuFixedBase {
    /// Window width chosen per call from the number of scalars.
    pub fn new() -> Self {
        CpuFixedBase {
            window: None,
            g1: Mutex::new(Vec::new()),
            g2: Mutex::new(Vec::new()),
        }
    }

    /// A fixed window width (2..=16) for every table-based call, for measurements.
    pub fn with_window(w: u32) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (2..=MAX_WINDOW).contains(&w),
            "fixed-base window {w} is out of range: use 2 to {MAX_WINDOW}"
        );
        Ok(CpuFixedBase {
            window: Some(w),
            ..Self::new()
        })
    }

    fn window_for(&self, n: usize, point_bytes: usize) -> u32 {
        self.window.unwrap_or_else(|| choose_window(n, point_bytes))
    }
}

/// Cost model: n·windows(w) mixed additions for the scalars, plus building the table
/// (windows(w)·2^(w−1) additions and normalizations, counted twice), under the size cap.
fn choose_window(n: usize, point_bytes: usize) -> u32 {
    let table_cap_bytes = 64usize << 20;
    let cost = |w: u32| {
        let windows = windows(w);
        let table = windows << (w - 1);
        (n * windows + 2 * table, table * point_bytes)
    };
    (2..=MAX_WINDOW)
        .filter(|&w| w == 2 || cost(w).1 <= table_cap_bytes)
        .min_by_key(|&w| cost(w).0)
        .unwrap_or(2)
}

/// Windows of width w that hold a 255-bit scalar in signed digits (the top one takes
/// the last carry).
fn windows(w: u32) -> usize {
    SCALAR_BITS / w as usize + 1
}

/// The canonical little-endian 64-bit limbs of `k`.
fn limbs(k: &Scalar) -> [u64; 4] {
    let b = k.to_bytes_le();
    std::array::from_fn(|i| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap()))
}

/// Bits [start, start + w) of `l` (bits past 256 read as zero); w ≤ 32.
fn bits(l: &[u64; 4], start: usize, w: u32) -> u64 {
    let (i, off) = (start / 64, start % 64);
    if i >= 4 {
        return 0;
    }
    let mut v = l[i] >> off;
    if off + w as usize > 64 && i + 1 < 4 {
        v |= l[i + 1] << (64 - off);
    }
    v & ((1u64 << w) - 1)
}

/// Signed digits of `l` in windows of width w, low window first: each in
/// [−2^(w−1), 2^(w−1)], Σ d_j·2^(w·j) = l (the top window takes the last carry).
fn recode(l: &[u64; 4], w: u32, out: &mut Vec<i32>) {
    let half = 1u64 << (w - 1);
    let mut carry = 0u64;
    for j in 0..windows(w) {
        let v = bits(l, j * w as usize, w) + carry;
        if v > half {
            out.push(v as i32 - (1i32 << w));
            carry = 1;
        } else {
            out.push(v as i32);
            carry = 0;
        }
    }
    debug_assert_eq!(carry, 0, "the top window absorbs the last carry");
}

/// What one thread reuses from chunk to chunk.
struct Scratch<F> {
    digits: Vec<i32>,
    /// Each scalar's running sum in affine coordinates (None: the identity).
    acc: Vec<Option<(F, F)>>,
    /// Additions of this window that share the inversion: scalar, the table point.
    pending: Vec<(usize, F, F)>,
    den: Vec<F>,
    prefix: Vec<F>,
}

impl<F> Default for Scratch<F> {
    fn default() -> Self {
        Scratch {
            digits: Vec::new(),
            acc: Vec::new(),
            pending: Vec::new(),
            den: Vec::new(),
            prefix: Vec::new(),
        }
    }
}

/// d·2^(w·j)·G for every window j and 1 ≤ d ≤ 2^(w−1), row by row.
struct Table<G: Jacobian>
where
    G::AffineRepr: PrimeCurveAffine + Copy + Send + Sync,
{
    base: G::AffineRepr,
    w: u32,
    entries: Vec<G::AffineRepr>,
}

impl<G: Jacobian> Table<G>
where
    G::AffineRepr: PrimeCurveAffine<Curve = G> + Copy + Send + Sync + PartialEq,
{
    fn new(base: &G::AffineRepr, w: u32) -> Self {
        let half = 1usize << (w - 1);
        let mut row_bases = Vec::with_capacity(windows(w));
        let mut b = base.to_curve();
        for _ in 0..windows(w) {
            row_bases.push(b);
            for _ in 0..w {
                b = b.double();
            }
        }
        let mut entries = vec![G::AffineRepr::identity(); windows(w) * half];
        entries
            .par_chunks_mut(half)
            .zip(row_bases.par_iter())
            .for_each(|(row, b)| {
                let step = b.to_affine();
                let mut acc = *b;
                let mut proj = Vec::with_capacity(half);
                proj.push(acc);
                for _ in 1..half {
                    acc += &step;
                    proj.push(acc);
                }
                batch_normalize(&proj, row, &mut Vec::new());
            });
        Table {
            base: *base,
            w,
            entries,
        }
    }

    /// k_i·G for a chunk of scalars, accumulated in affine coordinates: per window, every
    /// point's addition shares one field inversion (Montgomery's trick), which makes an
    /// addition cost about 6 multiplications against 11 for a mixed Jacobian one, and
    /// leaves no normalization at the end.
    fn mul_chunk(&self, scalars: &[Scalar], out: &mut [G::AffineRepr], s: &mut Scratch<G::Base>) {
        let n = scalars.len();
        let nw = windows(self.w);
        let half = 1usize << (self.w - 1);
        s.digits.clear();
        for k in scalars {
            recode(&limbs(k), self.w, &mut s.digits);
        }
        s.acc.clear();
        s.acc.resize(n, None);
        for (j, row) in self.entries.chunks_exact(half).enumerate() {
            s.pending.clear();
            s.den.clear();
            for (k, acc) in s.acc.iter_mut().enumerate() {
                let d = s.digits[k * nw + j];
                if d == 0 {
                    continue;
                }
                let (tx, ty) = G::affine_xy(&row[d.unsigned_abs() as usize - 1]);
                let ty = if d < 0 { -ty } else { ty };
                match acc {
                    None => *acc = Some((tx, ty)),
                    Some((x, y)) if *x == tx => {
                        // Doubling or cancellation: not for the shared inversion.
                        let mut p = G::affine_from(*x, *y).to_curve();
                        p += &G::affine_from(tx, ty);
                        let p = p.to_affine();
                        *acc = (!bool::from(p.is_identity())).then(|| G::affine_xy(&p));
                    }
                    Some((x, _)) => {
                        s.den.push(tx - *x);
                        s.pending.push((k, tx, ty));
                    }
                }
            }
            invert_all(&mut s.den, &mut s.prefix);
            for (&(k, tx, ty), inv) in s.pending.iter().zip(&s.den) {
                let (x, y) = s.acc[k]
                    .as_mut()
                    .expect("pending points have an accumulator");
                let l = (ty - *y) * inv;
                let x3 = l.square() - *x - tx;
                *y = l * (*x - x3) - *y;
                *x = x3;
            }
        }
        for (o, acc) in out.iter_mut().zip(&s.acc) {
            *o = match acc {
                Some((x, y)) => G::affine_from(*x, *y),
                None => G::AffineRepr::identity(),
            };
        }
    }
}

/// The table for (`base`, `w`) from `cache`, built and kept if missing.
fn table<G: Jacobian>(
    cache: &Mutex<Vec<Arc<Table<G>>>>,
    base: &G::AffineRepr,
    w: u32,
) -> Arc<Table<G>>
where
    G::AffineRepr: PrimeCurveAffine<Curve = G> + Copy + Send + Sync + PartialEq,
{
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = c.iter().find(|t| t.w == w && t.base == *base) {
        return t.clone();
    }
    let t = Arc::new(Table::new(base, w));
    if c.len() >= CACHED_TABLES {
        c.remove(0);
    }
    c.push(t.clone());
    t
}

/// k_i·base for every scalar, chunk by chunk on rayon's pool.
fn mul_many<G: Jacobian + Group<Scalar = Scalar>>(
    cache: &Mutex<Vec<Arc<Table<G>>>>,
    w: u32,
    base: &G::AffineRepr,
    scalars: &[Scalar],
) -> Vec<G::AffineRepr>
where
    G::AffineRepr: PrimeCurveAffine<Curve = G, Scalar = Scalar> + Copy + Send + Sync + PartialEq,
{
    let mut out = vec![G::AffineRepr::identity(); scalars.len()];
    if bool::from(base.is_identity()) {
        return out;
    }
    let table = (scalars.len() >= DIRECT_BELOW).then(|| table(cache, base, w));
    match &table {
        Some(t) => out
            .par_chunks_mut(CHUNK)
            .zip(scalars.par_chunks(CHUNK))
            .for_each_init(Scratch::default, |scratch, (o, s)| {
                t.mul_chunk(s, o, scratch)
            }),
        None => {
            let proj: Vec<G> = scalars.iter().map(|k| base.to_curve() * k).collect();
            batch_normalize(&proj, &mut out, &mut Vec::new());
        }
    }
    out
}

impl FixedBase for CpuFixedBase {
    fn describe(&self) -> String {
        let threads = rayon::current_num_threads();
        let s = if threads == 1 { "" } else { "s" };
        match self.window {
            Some(w) => format!("cpu ({threads} thread{s}, window {w})"),
            None => format!("cpu ({threads} thread{s})"),
        }
    }

    fn mul_g1(&self, base: &G1Affine, scalars: &[Scalar]) -> anyhow::Result<Vec<G1Affine>> {
        let w = self.window_for(scalars.len(), std::mem::size_of::<G1Affine>());
        Ok(mul_many(&self.g1, w, base, scalars))
    }

    fn mul_g2(&self, base: &G2Affine, scalars: &[Scalar]) -> anyhow::Result<Vec<G2Affine>> {
        let w = self.window_for(scalars.len(), std::mem::size_of::<G2Affine>());
        Ok(mul_many(&self.g2, w, base, scalars))
    }
}

#[cfg(test)]
pub(super) fn window_choice(n: usize, point_bytes: usize) -> u32 {
    choose_window(n, point_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;

    /// Real tables never make a running sum meet its next point (the digits' sums stay
    /// apart); a table whose second window repeats the first does, so the doubling and
    /// cancellation path is checked here.
    #[test]
    fn doubling_and_cancellation_leave_the_shared_inversion() {
        let g = G1Projective::generator().to_affine();
        let mut t = Table::<G1Projective>::new(&g, 2);
        let (row0, rest) = t.entries.split_at_mut(2);
        rest[..2].copy_from_slice(row0);
        // Digits: 5 → (1, 1): P + P; 3 → (−1, 1): −P + P; 1 → (1).
        let s = [Scalar::from(5u64), Scalar::from(3u64), Scalar::from(1u64)];
        let mut out = vec![G1Affine::identity(); 3];
        t.mul_chunk(&s, &mut out, &mut Scratch::default());
        assert_eq!(out[0], (g * Scalar::from(2u64)).to_affine());
        assert!(bool::from(out[1].is_identity()));
        assert_eq!(out[2], g);
    }
}
