//! The `main` of a workload binary: a program of its own that runs one [`Workload`]'s
//! reps for the harness, so that the harness that schedules, stores and judges them
//! need not be built with the workload (`[workload] worker = ["path/to/binary"]`).
//!
//! The harness asks `BINARY __protocol` first, answered with [`WORKLOAD_PROTOCOL`] and
//! the workload's kind on one line; then it starts `BINARY __serve --workload JSON
//! --knobs JSON [--counters]` once per variant and sends it one request line per rep
//! ([`crate::worker::Request`]). Each rep runs under the lifecycle the harness's own
//! process gives an in-process rep, minus the windows only the harness opens (GPU
//! telemetry, which it samples from its own process around the request): the rep's
//! inputs made outside the spans, its run under one root span, what it left running
//! awaited, its spans drained, then its check. The answer is one result line holding a
//! [`RepReport`]: the spans (names as text, [`gapscope_trace::trace::owned::OwnedSpan`]),
//! what the check found, the process and its resident memory.

use std::io::Write;
use std::process::ExitCode;

use gapscope_trace::trace::owned::OwnedSpan;
use serde::{Deserialize, Serialize};

use crate::phases::WorkloadKind;
use crate::worker::{self, Request};
use crate::workload::{Checked, Knobs, Workload};

/// What a workload binary prints for `__protocol`, before its kind (`… 1 hash`).
pub const WORKLOAD_PROTOCOL: &str = "gapscope-workload-worker 1";

/// The `__protocol` line of a binary of workload `kind`.
pub fn protocol_line(kind: WorkloadKind) -> String {
    format!("{WORKLOAD_PROTOCOL} {}", kind.as_str())
}

/// One rep as a workload binary answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepReport {
    /// The rep asked for (the harness checks the answer is to its question).
    pub rep: u32,
    /// The root span's id: the spans of the rep are its trace.
    pub root: u64,
    pub spans: Vec<OwnedSpan>,
    pub checked: Checked,
    pub pid: u32,
    /// Resident memory of the binary when the rep was done.
    #[serde(default)]
    pub rss_end_bytes: Option<u64>,
}

/// How the harness starts a serving binary (`__serve`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServeArgs {
    /// The workload's own `[workload]` settings, as JSON (the binary's business).
    pub workload: String,
    /// The variant's knobs, defaults filled in by the harness, as a JSON object of texts.
    pub knobs: String,
    /// Per-span counters on (the variant's `counters` is not "off").
    pub counters: bool,
}

impl ServeArgs {
    /// The arguments after the binary's path, as the harness passes them.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            "__serve".to_string(),
            format!("--workload={}", self.workload),
            format!("--knobs={}", self.knobs),
        ];
        if self.counters {
            a.push("--counters".into());
        }
        a
    }

    /// Reads the arguments after `__serve` back; the error says which is wrong.
    pub fn parse(args: &[String]) -> Result<ServeArgs, String> {
        let mut out = ServeArgs::default();
        let (mut workload, mut knobs) = (false, false);
        for a in args {
            if let Some(v) = a.strip_prefix("--workload=") {
                (out.workload, workload) = (v.to_string(), true);
            } else if let Some(v) = a.strip_prefix("--knobs=") {
                (out.knobs, knobs) = (v.to_string(), true);
            } else if a == "--counters" {
                out.counters = true;
            } else {
                return Err(format!(
                    "unknown argument {a:?} (want --workload=JSON --knobs=JSON [--counters])"
                ));
            }
        }
        match (workload, knobs) {
            (true, true) => Ok(out),
            _ => Err("__serve needs --workload=JSON and --knobs=JSON".into()),
        }
    }
}

/// The whole `main` of a binary serving workload `kind`: `make` builds the workload from
/// the `--workload` JSON the harness sends. Exit status 0 when the harness closed the
/// request stream, 2 on a bad command line, 1 when a rep could not be answered (the
/// reason on stderr, which the harness records with the rep).
pub fn main_for(
    kind: WorkloadKind,
    make: impl Fn(&str) -> Result<Box<dyn Workload>, String>,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__protocol") => {
            println!("{}", protocol_line(kind));
            ExitCode::SUCCESS
        }
        Some("__serve") => {
            let parsed = ServeArgs::parse(&args[1..]).and_then(|a| {
                let w = make(&a.workload)?;
                let knobs: Knobs = serde_json::from_str(&a.knobs)
                    .map_err(|e| format!("--knobs is not a JSON object of texts: {e}"))?;
                Ok((w, knobs, a.counters))
            });
            let (w, knobs, counters) = match parsed {
                Ok(p) => p,
                Err(why) => {
                    eprintln!("error: {why}");
                    return ExitCode::from(2);
                }
            };
            gapscope_trace::trace::set_counters_enabled(counters);
            let stdin = std::io::stdin().lock();
            let mut stdout = std::io::stdout().lock();
            match serve_reps(w.as_ref(), &knobs, stdin, &mut stdout) {
                Ok(()) => ExitCode::SUCCESS,
                Err(why) => {
                    let _ = stdout.flush();
                    eprintln!("error: {why}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!(
                "a gapscope workload binary ({}): the harness runs it; `__protocol` \
                 prints its protocol, `__serve --workload=JSON --knobs=JSON [--counters]` \
                 serves reps requested on stdin",
                kind.as_str()
            );
            ExitCode::from(2)
        }
    }
}

/// Serves reps of `w` with `knobs` until `input` ends: each request answered with its
/// [`RepReport`] as a result line.
pub fn serve_reps(
    w: &dyn Workload,
    knobs: &Knobs,
    input: impl std::io::BufRead,
    out: &mut impl Write,
) -> Result<(), String> {
    worker::serve(input, out, |r| {
        let report = run_rep(w, knobs, r)?;
        serde_json::to_string(&report).map_err(|e| e.to_string())
    })
    .map_err(|e| match e {
        worker::ServeError::Answer(why) => why,
        e => e.to_string(),
    })
}

/// One rep of `w`: inputs made outside the spans, run, settled, spans drained, checked.
pub fn run_rep(w: &dyn Workload, knobs: &Knobs, r: Request) -> Result<RepReport, String> {
    let mut rep = w
        .prepare(knobs, u64::from(r.rep))
        .map_err(|why| format!("rep {}: its inputs could not be made: {why}", r.rep))?;
    let root = rep.run();
    rep.settle();
    let spans = gapscope_trace::trace::drain_trace(root)
        .iter()
        .map(OwnedSpan::from)
        .collect();
    let checked = rep.check();
    Ok(RepReport {
        rep: r.rep,
        root,
        spans,
        checked,
        pid: std::process::id(),
        rss_end_bytes: rss_bytes(),
    })
}

/// This process's resident memory, from /proc/self/statm (None where unreadable).
fn rss_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    (page > 0).then(|| pages * page as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::PhaseSpec;
    use crate::workload::Rep;

    /// A workload whose rep records a root and a child span and "makes" `outputs`.
    struct Tiny;
    struct TinyRep(u32);

    impl Workload for Tiny {
        fn kind(&self) -> WorkloadKind {
            WorkloadKind::Hash
        }
        fn phases(&self) -> PhaseSpec {
            PhaseSpec::root_only("tiny")
        }
        fn resolve_knobs(&self, k: &Knobs) -> Result<Knobs, String> {
            Ok(k.clone())
        }
        fn prepare(&self, k: &Knobs, _: u64) -> Result<Box<dyn Rep>, String> {
            let n = k
                .get("outputs")
                .map_or(Ok(1), |v| v.parse().map_err(|_| "outputs"))?;
            Ok(Box::new(TinyRep(n)))
        }
    }

    impl Rep for TinyRep {
        fn run(&mut self) -> u64 {
            let root = gapscope_trace::trace::Span::enter("tiny");
            let id = root.trace();
            {
                let _c = gapscope_trace::trace::Span::enter("tiny_child");
            }
            drop(root);
            id
        }
        fn check(self: Box<Self>) -> Checked {
            Checked::passed(self.0)
        }
    }

    #[test]
    fn a_served_rep_answers_its_spans_and_its_check_and_bad_knobs_say_why() {
        let knobs: Knobs = [("outputs".to_string(), "3".to_string())].into();
        let mut out = Vec::new();
        serve_reps(&Tiny, &knobs, "rep 4 1 0\nrep 5 2 0\n".as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let reports: Vec<RepReport> = text
            .lines()
            .filter_map(worker::result_payload)
            .map(|j| serde_json::from_str(j).unwrap())
            .collect();
        assert_eq!(reports.len(), 2);
        assert_eq!(reports[1].rep, 5);
        assert_eq!(reports[0].checked, Checked::passed(3));
        let names: Vec<&str> = reports[0].spans.iter().map(|s| s.name.as_str()).collect();
        assert!(
            names.contains(&"tiny") && names.contains(&"tiny_child"),
            "{names:?}"
        );
        assert!(reports[0].spans.iter().all(|s| s.trace == reports[0].root));
        let bad: Knobs = [("outputs".to_string(), "many".to_string())].into();
        let e = serve_reps(&Tiny, &bad, "rep 1 1 0\n".as_bytes(), &mut Vec::new()).unwrap_err();
        assert!(e.contains("rep 1") && e.contains("outputs"), "{e}");
    }

    #[test]
    fn serve_arguments_read_back_as_written() {
        let a = ServeArgs {
            workload: "{\"bytes\":4096}".into(),
            knobs: "{\"threads\":\"2\"}".into(),
            counters: true,
        };
        assert_eq!(ServeArgs::parse(&a.to_args()[1..]), Ok(a));
        assert!(ServeArgs::parse(&["--knobs={}".into()])
            .unwrap_err()
            .contains("--workload"));
        assert!(ServeArgs::parse(&["--evil".into()])
            .unwrap_err()
            .contains("unknown argument"));
    }
}
