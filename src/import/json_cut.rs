//! The array cutter's fast path: whole `{…}` elements cut off the front of the bytes read
//! so far, 64 bytes at a time. Each block's quotes, braces and newlines become bit masks
//! (SSE2 on x86-64, a byte loop elsewhere); which bytes lie inside strings follows from
//! the quotes by a prefix XOR, and an element ends where its braces outside strings
//! balance. Most of a trace's bytes are never looked at one by one.
//!
//! It takes only what it is sure of: an element it holds whole, with no backslash (an
//! escape could hide a quote), followed by `,` and the next `{`. Anything else (the last
//! element of what was read, an escape, `]`, a scalar, a stray byte) is left where it
//! starts, for the byte-by-byte cutter ([`super::json`]), which cuts and reports it as it
//! always did. Braces and brackets count alike, as that cutter counts them, so that a
//! malformed element is cut where it would cut it.

/// One 64-byte block's bytes of interest, bit `i` for byte `i`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    /// `{` and `[`; `}` and `]`.
    open: u64,
    close: u64,
    newline: u64,
}

#[cfg(target_arch = "x86_64")]
fn masks(b: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut m = Masks::default();
    for k in 0..4 {
        // SAFETY: SSE2 is part of every x86-64 CPU; the load reads bytes 16k..16k+16 of
        // `b`, which has 64 (an unaligned load is allowed).
        unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(16 * k).cast::<__m128i>());
            let eq = |c: u8| {
                let hits = _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8)));
                u64::from(hits as u16) << (16 * k)
            };
            m.quote |= eq(b'"');
            m.backslash |= eq(b'\\');
            m.open |= eq(b'{') | eq(b'[');
            m.close |= eq(b'}') | eq(b']');
            m.newline |= eq(b'\n');
        }
    }
    m
}

#[cfg(not(target_arch = "x86_64"))]
fn masks(b: &[u8; 64]) -> Masks {
    scalar_masks(b)
}

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn scalar_masks(b: &[u8; 64]) -> Masks {
    let mut m = Masks::default();
    for (i, &c) in b.iter().enumerate() {
        let bit = 1u64 << i;
        match c {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            b'{' | b'[' => m.open |= bit,
            b'}' | b']' => m.close |= bit,
            b'\n' => m.newline |= bit,
            _ => {}
        }
    }
    m
}

/// Bit `i` set where an odd number of bits `0..=i` of `x` are: with `x` a block's quotes,
/// the bytes inside a string (its opening quote in, its closing quote out).
fn prefix_xor(mut x: u64) -> u64 {
    for s in [1, 2, 4, 8, 16, 32] {
        x ^= x << s;
    }
    x
}

/// The length of the object that starts at `b[0]` (a `{`) and how many newlines it holds,
/// when `b` holds all of it and has no backslash before its end (an escaped quote would
/// be read as a string's end).
fn object(b: &[u8]) -> Option<(usize, usize)> {
    let mut depth = 0u32;
    let mut in_string = 0u64; // all ones where the block before ended inside a string
    let mut lines = 0usize;
    let mut at = 0;
    while at < b.len() {
        // A whole block is read where it lies; the last, short one padded with spaces.
        let m = match b.get(at..at + 64) {
            Some(whole) => masks(whole.try_into().expect("64 bytes")),
            None => {
                let mut block = [b' '; 64];
                block[..b.len() - at].copy_from_slice(&b[at..]);
                masks(&block)
            }
        };
        let inside = prefix_xor(m.quote) ^ in_string;
        in_string = 0u64.wrapping_sub(inside >> 63);
        let mut braces = (m.open | m.close) & !inside;
        while braces != 0 {
            let i = braces.trailing_zeros();
            braces &= braces - 1;
            if m.open >> i & 1 == 1 {
                depth += 1;
            } else {
                // A close before any open: not an object's start; the slow cutter says so.
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    let upto = if i == 63 { u64::MAX } else { (2u64 << i) - 1 };
                    // What lies after a backslash was read without its escape.
                    if m.backslash & upto != 0 {
                        return None;
                    }
                    lines += (m.newline & upto).count_ones() as usize;
                    return Some((at + i as usize + 1, lines));
                }
            }
        }
        if m.backslash != 0 {
            return None;
        }
        lines += m.newline.count_ones() as usize;
        at += 64;
    }
    None
}

/// Whole objects cut off the front of `buf`, which starts at an element's `{` on line
/// `line`: each is appended to `out` with its end in `out` and its line pushed to `ends`,
/// until `out` holds `limit` bytes or the next element is one to leave to the slow
/// cutter. Returns how many bytes of `buf` were taken (up to the last element's `}`,
/// never its separator) and the line after them.
pub fn objects(
    buf: &[u8],
    line: usize,
    out: &mut Vec<u8>,
    ends: &mut Vec<(usize, usize)>,
    limit: usize,
) -> (usize, usize) {
    let (mut taken, mut line_after) = (0, line);
    let (mut at, mut line_at) = (0, line);
    while buf.get(at) == Some(&b'{') {
        let Some((len, nl)) = object(&buf[at..]) else {
            break;
        };
        out.extend_from_slice(&buf[at..at + len]);
        ends.push((out.len(), line_at));
        taken = at + len;
        line_after = line_at + nl;
        if out.len() >= limit {
            break;
        }
        // The separator, looked at only: the next element is taken only whole.
        let (mut j, mut l) = (taken, line_after);
        let mut comma = false;
        while let Some(&c) = buf.get(j) {
            match c {
                b'\n' => l += 1,
                b' ' | b'\t' | b'\r' => {}
                b',' if !comma => comma = true,
                _ => break,
            }
            j += 1;
        }
        if !comma {
            break;
        }
        (at, line_at) = (j, l);
    }
    (taken, line_after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simd_masks_are_the_byte_loops() {
        let mut b = [0u8; 64];
        for (i, x) in b.iter_mut().enumerate() {
            *x = b"{\"a\\}\n x"[i % 8].wrapping_add((i / 8 % 2) as u8 * 128);
        }
        assert_eq!(masks(&b), scalar_masks(&b));
    }

    #[test]
    fn objects_are_cut_whole_and_the_rest_is_left() {
        let text = b"{\"a\": \"}{\", \"b\": [1, {\"c\": 2}]},\n  {\"d\": 1}\n, {\"e\": \"\\\"\"}, {\"f\": 2}";
        let (mut out, mut ends) = (Vec::new(), Vec::new());
        let (taken, line) = objects(text, 5, &mut out, &mut ends, usize::MAX);
        // The third element has an escape: left with all after it.
        assert_eq!(
            &text[..taken],
            b"{\"a\": \"}{\", \"b\": [1, {\"c\": 2}]},\n  {\"d\": 1}"
        );
        assert_eq!(out, b"{\"a\": \"}{\", \"b\": [1, {\"c\": 2}]}{\"d\": 1}");
        assert_eq!(ends, [(31, 5), (39, 6)]);
        assert_eq!(line, 6);
        // An element the buffer does not hold whole is left.
        let (taken, _) = objects(b"{\"a\": 1}, {\"b\"", 0, &mut out, &mut ends, usize::MAX);
        assert_eq!(taken, 8);
        // `]`, a scalar, a stray `}` are left.
        for t in [&b"]"[..], b"1, {}", b"}"] {
            assert_eq!(objects(t, 0, &mut out, &mut ends, usize::MAX).0, 0);
        }
    }

    #[test]
    fn long_objects_cross_blocks_inside_strings() {
        let long = "x{".repeat(100);
        let text = format!("{{\"a\": \"{long}\", \"n\": {{\n\"m\": \"}}\"}}\n}}, {{}}");
        let (mut out, mut ends) = (Vec::new(), Vec::new());
        let (taken, line) = objects(text.as_bytes(), 0, &mut out, &mut ends, usize::MAX);
        assert_eq!(taken, text.len());
        assert_eq!(ends.len(), 2);
        assert_eq!(line, 2);
        assert_eq!(ends[1].1, 2);
    }
}
