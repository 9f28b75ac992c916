//! Two clusters among repeated measurements: reps that fall into a fast and a slow
//! group (a CPU frequency step, a page cache warm in some reps only) make a median and
//! its interval describe neither group, so the diff names them.
//!
//! Rule: sort the values and take the widest gap between neighbours. The values are two
//! groups when each side of that gap holds at least a fifth of them (and at least 2),
//! and the gap is both wider than 4 times the larger within-group spread (MAD, unscaled,
//! floored at 0.1% of the median so that identical values do not make every gap huge)
//! and wider than 2% of the median. A single straggler is not a mode: a fifth of the reps
//! must be on the far side. This is a screening rule, not a test: it says where to look.

use super::Sample;

/// The two groups of a bimodal sample: values at or above `threshold` are the upper
/// group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modes {
    pub lower_median: f64,
    pub upper_median: f64,
    /// Midpoint of the widest gap.
    pub threshold: f64,
    pub upper_count: usize,
    pub lower_count: usize,
}

/// The two groups of `x`, when it has two (see the module doc); None otherwise.
pub fn bimodal(x: &Sample) -> Option<Modes> {
    let v = x.sorted();
    let n = v.len();
    if n < 6 {
        return None;
    }
    let min_side = (n / 5).max(2);
    let (cut, gap) = (min_side..=n - min_side)
        .map(|i| (i, v[i] - v[i - 1]))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (lo, hi) = (
        Sample::new(v[..cut].to_vec()).ok()?,
        Sample::new(v[cut..].to_vec()).ok()?,
    );
    let med = x.median().abs();
    let spread = lo.mad().max(hi.mad()).max(med * 1e-3);
    (gap > 4.0 * spread && gap > 0.02 * med).then(|| Modes {
        lower_median: lo.median(),
        upper_median: hi.median(),
        threshold: (v[cut - 1] + v[cut]) / 2.0,
        upper_count: n - cut,
        lower_count: cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::new(v.to_vec()).unwrap()
    }

    #[test]
    fn two_groups_are_found_and_noise_or_one_straggler_is_not() {
        let two = [
            100.0, 101.0, 99.5, 100.4, 100.2, 130.0, 131.0, 129.6, 100.1, 130.3,
        ];
        let m = bimodal(&s(&two)).unwrap();
        assert_eq!((m.lower_count, m.upper_count), (6, 4));
        assert!(m.threshold > 101.0 && m.threshold < 129.6);
        assert!((m.upper_median - 130.15).abs() < 1e-9);
        // One slow rep of ten is an outlier, not a mode.
        let one = [
            100.0, 101.0, 99.5, 100.4, 100.2, 100.9, 99.8, 100.6, 100.1, 140.0,
        ];
        assert_eq!(bimodal(&s(&one)), None);
        // Spread without a gap.
        let even: Vec<f64> = (0..20).map(|i| 100.0 + i as f64).collect();
        assert_eq!(bimodal(&s(&even)), None);
        // A gap under 2% of the median is not worth a word.
        let close = [100.0, 100.0, 100.0, 101.5, 101.5, 101.5];
        assert_eq!(bimodal(&s(&close)), None);
        assert_eq!(bimodal(&s(&[1.0, 2.0, 3.0])), None);
    }
}
