//! `[workload] worker = ["BINARY", …]`: an in-process workload's reps run in a binary of
//! its own, built with `gapscope_workload::binary` (`gapscope-hash-worker` for
//! `kind = "hash"`), so that the harness that schedules, stores and judges them need not
//! be built with the workload. One serving process per variant, started on its first
//! rep with the workload's settings and the variant's knobs (defaults filled in here);
//! a process that dies, answers garbage or outlives `rep_timeout_s` fails that rep with
//! the reason and its stderr's last lines, and the variant's next rep starts another.
//!
//! This process keeps the window only it can open around each request (NVML's GPU
//! samples: the device is the same from any process; CUPTI sees only its own process,
//! so a binary's kernels are not recorded), and turns the binary's answer into the
//! rep's rows by the same steps as an in-process rep ([`super::rep::finish_rows`]).

use std::collections::HashMap;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use gapscope_workload::binary::{protocol_line, RepReport, ServeArgs};
use gapscope_workload::phases::WorkloadKind;

use super::command::rows::MAX_SPANS_PER_REP;
use super::rep::{finish_rows, other_process_parts, Answer, RepOutput, TelemetryWindow};
use super::schedule::Slot;
use super::served::{ask_line, let_go, AskError};
use super::spec::ResolvedVariant;
use super::worker::{kill_group, request_line, Pipes};
use crate::counters::CounterMode;
use crate::store;
use crate::telemetry::Telemetry;

/// Asks `cmd __protocol` and refuses a binary that does not answer the workload
/// protocol for `kind`, before any rep; the error says what was answered.
pub fn probe(cmd: &[String], kind: WorkloadKind) -> Result<(), String> {
    let (prog, args) = cmd.split_first().ok_or("workload.worker names no binary")?;
    let out = Command::new(prog)
        .args(args)
        .arg("__protocol")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("workload.worker {prog:?} cannot be started: {e}"))?;
    let want = protocol_line(kind);
    let text = String::from_utf8_lossy(&out.stdout);
    let got = text.lines().next().unwrap_or("").trim();
    if out.status.success() && got == want {
        return Ok(());
    }
    Err(format!(
        "workload.worker {prog:?} is not a {} workload binary: asked `__protocol`, it \
         answered {:?} ({}), not {want:?}; build it with gapscope_workload::binary::main_for",
        kind.as_str(),
        got.chars().take(80).collect::<String>(),
        out.status
    ))
}

/// One variant's serving binary.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    pipes: Pipes,
    pid: u32,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let_go(&mut self.stdin, &mut self.child);
    }
}

/// The serving binaries of a run, by variant.
pub struct WorkloadBins {
    procs: HashMap<usize, Proc>,
    timeout: Option<Duration>,
}

impl WorkloadBins {
    pub fn new(timeout: Option<Duration>) -> WorkloadBins {
        WorkloadBins {
            procs: HashMap::new(),
            timeout,
        }
    }

    /// Rep `slot` of variant `v` in its serving binary `cmd` (started with `workload`,
    /// the workload's settings as JSON, and the variant's `knobs`, when the variant has
    /// none running). Never an
    /// error for the run: a rep that cannot be had is a failed row with the reason.
    pub fn run(
        &mut self,
        cmd: &[String],
        workload: &str,
        knobs: &gapscope_workload::Knobs,
        v: &ResolvedVariant,
        slot: Slot,
        telemetry: Option<&Telemetry>,
    ) -> RepOutput {
        let failed = |why: String| RepOutput::failed(v, slot, why);
        let p = match self.procs.entry(slot.variant) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => match start(cmd, workload, knobs, v) {
                Ok(p) => e.insert(p),
                Err(why) => return failed(why),
            },
        };
        let window = TelemetryWindow::open(telemetry, other_process_parts(v), v, slot);
        let line = ask_line(
            p.stdin.as_mut(),
            &p.pipes,
            &mut p.child,
            p.pid,
            &request_line(slot),
            self.timeout,
        );
        let (gpu, started_utc) = window.close();
        let report = line
            .map_err(|e| match e {
                AskError::NotTaken(w) | AskError::NoAnswer(w) => w,
            })
            .and_then(|l| decode(&l, slot));
        let report = match report {
            Ok(r) => r,
            Err(why) => {
                // Killed first, its pipes read to their end: the tail holds its last words.
                let mut tail = String::new();
                if let Some(mut p) = self.procs.remove(&slot.variant) {
                    kill_group(&mut p.child);
                    p.pipes.drain();
                    tail = p.pipes.tail();
                }
                return failed(format!("{why}; stderr: {tail}"));
            }
        };
        let spans: Result<Vec<_>, String> =
            report.spans.into_iter().map(|s| s.into_record()).collect();
        let spans = match spans {
            Ok(s) => s,
            Err(why) => return failed(format!("the workload binary's spans: {why}")),
        };
        let mut rows = store::span_rows(slot.rep, &v.name, &spans);
        let answer = Answer {
            trace_id: report.root,
            checked: report.checked,
            started_utc,
            pid: report.pid,
            rss_end_bytes: report.rss_end_bytes,
        };
        let run = finish_rows(telemetry, v, slot, &mut rows, &gpu, answer);
        RepOutput {
            run,
            spans: rows,
            gpu,
            setup_ns: Default::default(),
            profile: None,
        }
    }
}

/// Starts variant `v`'s serving binary: `cmd __serve --workload=… --knobs=…`, in a
/// process group of its own that ends with gapscope.
fn start(
    cmd: &[String],
    workload: &str,
    knobs: &gapscope_workload::Knobs,
    v: &ResolvedVariant,
) -> Result<Proc, String> {
    let (prog, args) = cmd.split_first().ok_or("workload.worker names no binary")?;
    let knobs = serde_json::to_string(knobs).map_err(|e| e.to_string())?;
    let serve = ServeArgs {
        workload: workload.to_string(),
        knobs,
        counters: v.counters != CounterMode::Off,
    };
    let mut c = Command::new(prog);
    c.args(args)
        .args(serve.to_args())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    crate::procs::die_with_parent(&mut c);
    let mut child = c
        .spawn()
        .map_err(|e| format!("workload.worker {prog:?} cannot be started: {e}"))?;
    let pid = child.id();
    let pipes = Pipes::read(&mut child, &format!("[{} pid {pid}]", v.name));
    let stdin = child.stdin.take();
    Ok(Proc {
        child,
        stdin,
        pipes,
        pid,
    })
}

/// A result line's report, checked to answer rep `slot`.
fn decode(line: &str, slot: Slot) -> Result<RepReport, String> {
    let json = gapscope_workload::worker::result_payload(line).unwrap_or(line);
    let r: RepReport = serde_json::from_str(json).map_err(|e| {
        format!(
            "malformed result line from the workload binary ({e}); starts with {:?}",
            json.chars().take(60).collect::<String>()
        )
    })?;
    if r.rep != slot.rep {
        return Err(format!(
            "the workload binary answered rep {} when asked for rep {}",
            r.rep, slot.rep
        ));
    }
    if r.spans.len() > MAX_SPANS_PER_REP {
        return Err(format!(
            "the workload binary sent {} spans for one rep, more than {} a rep keeps",
            r.spans.len(),
            MAX_SPANS_PER_REP
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(rep: u32) -> Slot {
        Slot {
            rep,
            variant: 0,
            iteration: 1,
            warmup: false,
        }
    }

    const SPAN: &str = r#"{"id":1,"trace":1,"name":"prove","thread_id":1,"thread_name":"main","start_ns":10,"end_ns":20}"#;

    fn line(rep: u32, span: &str) -> String {
        format!(
            "gapscope-rep-v1 {{\"rep\":{rep},\"root\":1,\"spans\":[{span}],\"checked\":{{\"ok\":true,\"checked\":true,\"outputs\":1,\"error\":\"\"}},\"pid\":7}}"
        )
    }

    #[test]
    fn a_binarys_answer_is_read_only_when_it_answers_the_rep_asked_in_the_form_asked() {
        let r = decode(&line(3, SPAN), slot(3)).unwrap();
        assert_eq!((r.rep, r.root, r.pid, r.spans.len()), (3, 1, 7, 1));
        let e = decode(&line(4, SPAN), slot(3)).unwrap_err();
        assert!(e.contains("answered rep 4 when asked for rep 3"), "{e}");
        for bad in [
            "gapscope-rep-v1 {",
            "gapscope-rep-v1 []",
            "gapscope-rep-v1 {\"rep\":3}",
        ] {
            let e = decode(bad, slot(3)).unwrap_err();
            assert!(e.contains("malformed result line"), "{bad}: {e}");
        }
        // A span that ends before it starts is refused when the spans are taken.
        let backwards = SPAN.replace("\"end_ns\":20", "\"end_ns\":5");
        let r = decode(&line(3, &backwards), slot(3)).unwrap();
        let e = r
            .spans
            .into_iter()
            .next()
            .unwrap()
            .into_record()
            .unwrap_err();
        assert!(e.contains("before it starts"), "{e}");
    }
}
