//! Bounded line reading: a program may print anything, so a line is held up to a limit
//! and the rest of a longer one is skipped (its head is reported), with no unbounded
//! buffer and no assumption of UTF-8.

use std::io::{ErrorKind, Read};

/// One line read from a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadLine<'a> {
    /// A whole line, without its newline.
    Whole(&'a [u8]),
    /// A line longer than the limit: its first `limit` bytes (the rest was skipped).
    Overlong(&'a [u8]),
}

/// Cuts a stream handed over in chunks into lines, holding at most `limit` bytes of one:
/// the same lines as [`for_each_line`], for a caller that reads the stream itself (and
/// notes when each chunk came).
#[derive(Debug)]
pub struct LineSplitter {
    line: Vec<u8>,
    skipping: bool,
    limit: usize,
}

impl LineSplitter {
    pub fn new(limit: usize) -> Self {
        LineSplitter {
            line: Vec::with_capacity(256),
            skipping: false,
            limit,
        }
    }

    /// Hands every line that `chunk` completes to `on_line`.
    pub fn push(&mut self, mut chunk: &[u8], mut on_line: impl FnMut(ReadLine<'_>)) {
        while !chunk.is_empty() {
            let nl = chunk.iter().position(|&b| b == b'\n');
            let (part, rest) = match nl {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if !self.skipping {
                let room = self.limit - self.line.len();
                if part.len() > room {
                    self.line.extend_from_slice(&part[..room]);
                    on_line(ReadLine::Overlong(&self.line));
                    self.line.clear();
                    self.skipping = true;
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            match rest {
                Some(rest) => {
                    if !self.skipping {
                        on_line(ReadLine::Whole(&self.line));
                    }
                    self.line.clear();
                    self.skipping = false;
                    chunk = rest;
                }
                None => chunk = &[],
            }
        }
    }

    /// At the stream's end: a last line without a newline counts as a line.
    pub fn finish(&mut self, mut on_line: impl FnMut(ReadLine<'_>)) {
        if !self.skipping && !self.line.is_empty() {
            on_line(ReadLine::Whole(&self.line));
        }
        self.line.clear();
        self.skipping = false;
    }
}

/// Reads `r` to its end, handing every line to `on_line`; lines longer than `limit`
/// bytes come as [`ReadLine::Overlong`]. A last line without a newline counts as a line.
/// Read errors other than interruption end the stream.
pub fn for_each_line(mut r: impl Read, limit: usize, mut on_line: impl FnMut(ReadLine<'_>)) {
    let mut lines = LineSplitter::new(limit);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        lines.push(&buf[..n], &mut on_line);
    }
    lines.finish(on_line);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize) -> Vec<(bool, Vec<u8>)> {
        let mut out = Vec::new();
        for_each_line(input, limit, |l| match l {
            ReadLine::Whole(b) => out.push((true, b.to_vec())),
            ReadLine::Overlong(b) => out.push((false, b.to_vec())),
        });
        out
    }

    #[test]
    fn lines_split_at_newlines_and_long_ones_are_cut_with_their_head() {
        let got = lines(b"ab\n\nabcdefgh\nxy", 4);
        assert_eq!(
            got,
            vec![
                (true, b"ab".to_vec()),
                (true, b"".to_vec()),
                (false, b"abcd".to_vec()),
                (true, b"xy".to_vec()),
            ]
        );
        // Exactly the limit is whole.
        assert_eq!(lines(b"abcd\n", 4), vec![(true, b"abcd".to_vec())]);
    }

    #[test]
    fn a_line_longer_than_the_read_buffer_is_held_to_the_limit_only() {
        let mut big = vec![b'z'; 1_000_000];
        big.extend_from_slice(b"\nok\n");
        let got = lines(&big, 10);
        assert_eq!(got, vec![(false, vec![b'z'; 10]), (true, b"ok".to_vec())]);
    }

    /// A reader that hands out one byte at a time: lines cross every read boundary.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.split_first() {
                Some((b, rest)) if !buf.is_empty() => {
                    buf[0] = *b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn reads_cut_anywhere_give_the_same_lines() {
        let input = b"one\ntwo-long-line\nthree";
        let mut out = Vec::new();
        for_each_line(Trickle(input), 5, |l| {
            out.push(format!("{l:?}"));
        });
        assert_eq!(out.len(), 3);
        assert_eq!(lines(input, 5).len(), 3);
    }
}
