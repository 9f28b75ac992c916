//! The worker protocol: how a process that runs a workload's reps answers the harness
//! that measures them, so that any workload binary can be that process.
//!
//! The harness asks a binary two questions before it trusts it with reps:
//! `BINARY __protocol`, answered with [`WORKER_PROTOCOL`] on one line (a binary that
//! answers anything else is refused: it cannot run reps), and `BINARY __serves`,
//! answered with [`SERVE_PROTOCOL`] by a binary that can serve many reps in one process
//! (one that cannot gets a process per rep).
//!
//! A worker then answers each rep with one line on stdout: [`RESULT_PREFIX`] and the
//! rep's result as one line of JSON (the run's row, its spans, what it measured); any
//! other line it prints (a library's logging, say) is passed through by the harness as
//! text. A serving worker reads one request line per rep on stdin
//! ([`Request::line`]: `rep REP ITERATION WARMUP`) and answers each in turn, until its
//! stdin ends ([`serve`]). The JSON is the harness's business; the framing is here.

use std::io::{BufRead, Write};

/// What a binary that runs reps prints for `__protocol`.
pub const WORKER_PROTOCOL: &str = "gapscope-worker-protocol 1";

/// What a binary that can serve many reps in one process prints for `__serves`.
pub const SERVE_PROTOCOL: &str = "gapscope-worker-serve 1";

/// Prefix of the one line a worker prints with a rep's result.
pub const RESULT_PREFIX: &str = "gapscope-rep-v1 ";

/// One rep asked of a serving worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The rep's number in the run (runs.csv's `rep`).
    pub rep: u32,
    /// The variant's iteration this rep is.
    pub iteration: u32,
    /// A warm-up rep (run, not measured).
    pub warmup: bool,
}

impl Request {
    /// The request as the harness writes it (newline included).
    pub fn line(&self) -> String {
        format!(
            "rep {} {} {}\n",
            self.rep,
            self.iteration,
            u8::from(self.warmup)
        )
    }

    /// Reads a request line back; the error says what is wrong with it.
    pub fn parse(line: &str) -> Result<Request, String> {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["rep", rep, it, warm] => Ok(Request {
                rep: rep.parse().map_err(|_| format!("bad rep number {rep:?}"))?,
                iteration: it.parse().map_err(|_| format!("bad iteration {it:?}"))?,
                warmup: match *warm {
                    "0" => false,
                    "1" => true,
                    other => return Err(format!("bad warm-up flag {other:?}")),
                },
            }),
            _ => Err(format!(
                "not a request: {line:?} (want `rep REP ITERATION WARMUP`)"
            )),
        }
    }
}

/// Writes one result line (`payload`: the rep's result as one line of JSON) and flushes
/// it, so that the harness reads it while the worker waits for its next request.
pub fn write_result(out: &mut impl Write, payload: &str) -> std::io::Result<()> {
    if payload.contains(['\n', '\r']) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a rep's result must be one line (JSON without raw line breaks)",
        ));
    }
    writeln!(out, "{RESULT_PREFIX}{payload}")?;
    out.flush()
}

/// The JSON of a result line, or `None` for a line the worker printed otherwise.
pub fn result_payload(line: &str) -> Option<&str> {
    line.strip_prefix(RESULT_PREFIX)
}

/// Why [`serve`] stopped before its input ended.
#[derive(Debug, thiserror::Error)]
pub enum ServeError<E> {
    #[error("reading a request: {0}")]
    Read(std::io::Error),
    #[error("{0}")]
    Request(String),
    #[error("writing a result: {0}")]
    Write(std::io::Error),
    /// The rep itself could not be answered (what `answer` returned).
    #[error("answering a rep")]
    Answer(#[source] E),
}

/// Serves reps: reads request lines from `input` (blank lines skipped) and answers each
/// with the result line of `answer(request)`, until `input` ends. A request that does
/// not parse, or a rep `answer` cannot give a result for, stops the worker with that
/// error (the harness records the rep as failed with it, and starts another worker).
pub fn serve<E>(
    mut input: impl BufRead,
    out: &mut impl Write,
    mut answer: impl FnMut(Request) -> Result<String, E>,
) -> Result<(), ServeError<E>> {
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).map_err(ServeError::Read)? == 0 {
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        let request = Request::parse(&line).map_err(ServeError::Request)?;
        let payload = answer(request).map_err(ServeError::Answer)?;
        write_result(out, &payload).map_err(ServeError::Write)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_back_as_written_and_bad_ones_say_why() {
        for r in [
            Request {
                rep: 0,
                iteration: 0,
                warmup: true,
            },
            Request {
                rep: u32::MAX,
                iteration: 7,
                warmup: false,
            },
        ] {
            assert_eq!(Request::parse(&r.line()), Ok(r));
        }
        assert!(Request::parse("rep 1 2 3").unwrap_err().contains("warm-up"));
        assert!(Request::parse("rep x 2 0")
            .unwrap_err()
            .contains("rep number"));
        assert!(Request::parse("rep 1 -2 0")
            .unwrap_err()
            .contains("iteration"));
        assert!(Request::parse("stop")
            .unwrap_err()
            .contains("not a request"));
    }

    #[test]
    fn a_served_worker_answers_each_request_in_turn_until_its_input_ends() {
        let input = "rep 3 1 0\n\n  \nrep 4 2 1\n";
        let mut out = Vec::new();
        let mut seen = Vec::new();
        serve(input.as_bytes(), &mut out, |r| {
            seen.push(r);
            Ok::<_, String>(format!("{{\"rep\":{}}}", r.rep))
        })
        .unwrap();
        assert_eq!(seen.len(), 2);
        assert!(seen[1].warmup && seen[1].iteration == 2);
        let text = String::from_utf8(out).unwrap();
        let payloads: Vec<&str> = text.lines().filter_map(result_payload).collect();
        assert_eq!(payloads, ["{\"rep\":3}", "{\"rep\":4}"]);
    }

    #[test]
    fn a_bad_request_or_a_failed_rep_stops_the_worker_with_the_reason() {
        let mut out = Vec::new();
        let e = serve("rep 1 1 0\nbogus\nrep 2 2 0\n".as_bytes(), &mut out, |_| {
            Ok::<_, String>("{}".into())
        })
        .unwrap_err();
        assert!(
            matches!(e, ServeError::Request(ref m) if m.contains("bogus")),
            "{e}"
        );
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
        let e = serve("rep 1 1 0\n".as_bytes(), &mut Vec::new(), |_| {
            Err::<String, _>("out of memory")
        })
        .unwrap_err();
        assert!(matches!(e, ServeError::Answer("out of memory")), "{e}");
        // A payload with a raw line break would be two lines: refused, not written.
        let mut out = Vec::new();
        assert!(write_result(&mut out, "{\n}").is_err());
        assert!(out.is_empty());
    }
}
