//! The program's output streams (stdout, stderr, the span pipe), read so that each line
//! gets the time it was written as closely as gapscope can know it. A pipe keeps no
//! time of its writes: the time is when a read returns the line. So each stream has a
//! thread that does nothing but read and note the time of each read, asking the
//! scheduler to run it soon after the program writes even on a loaded host (a real-time
//! priority where allowed and needed, else short slices: [`quick_wakeups`]); one more
//! thread cuts the chunks into lines and parses
//! them (protocol lines, log lines, the stderr tail), out of the readers' way. A stream
//! is read to its end, also after the program exited: lines still in a pipe then were
//! written before the exit, and are kept.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::sync::mpsc::{sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};

use super::members::Members;
use crate::capture::log_spans::LogMatcher;
use crate::protocol::reader::{LineSplitter, ReadLine};
use crate::protocol::{Parser, MAX_LINE};
use crate::trace::now_ns;

/// What a stream's lines gave so far: its protocol parser, and the last lines kept (of
/// stderr, for a failed rep's error).
pub type StreamState = Arc<Mutex<(Parser, VecDeque<String>)>>;

/// Lines of the program's stderr kept for the error of a failed rep.
pub const STDERR_TAIL: usize = 20;
/// Chunks in flight between the readers and the parsing thread: a program that prints
/// faster than they are parsed waits on its pipe, as it would on a full one.
const IN_FLIGHT: usize = 256;
/// The slice asked of the scheduler for a reader thread (the least Linux grants).
const READER_SLICE_NS: u64 = 100_000;

enum Chunk {
    Data(usize, u64, Vec<u8>),
    End(usize),
}

/// One stream: its index (0 stdout, 1 stderr, 2 the span pipe), and the stream.
pub type Input = (usize, Box<dyn Read + Send>);

/// The chunks the readers of [`read`] hand over, each with the time its read returned,
/// and how the readers were scheduled.
pub struct Chunks(Receiver<Chunk>, pub Priority);

/// How the readers were scheduled: what the times of lines are worth on a busy host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// The lowest real-time priority: a reader runs as soon as a write wakes it.
    RealTime,
    /// An ordinary thread asking for the shortest slice (or not even that).
    Ordinary,
}

impl Priority {
    /// What a rep's notes say of the times of lines read this way.
    pub fn describe(self) -> &'static str {
        match self {
            Priority::RealTime => {
                "timed by reader threads at a real-time priority (as close to the writes as \
                 the host's scheduler allows)"
            }
            Priority::Ordinary => {
                "timed by reader threads at an ordinary priority (no real-time priority \
                 allowed: CAP_SYS_NICE or RLIMIT_RTPRIO): on a busy host a line may be timed \
                 ms late; give timing lines a ts group where that matters"
            }
        }
    }
}

/// Starts a reader for each of `inputs` and returns once each one runs, so that it
/// already waits in its `read` when the program first writes (on a loaded host a new
/// thread may wait tens of ms for its first run).
///
/// `timed`: some line's time is its reading (log lines without `ts`); only then do the
/// readers ask for a real-time priority (a reader that preempts the program at each of
/// its writes costs it a little: not worth it for lines that carry their own times).
pub fn read(inputs: Vec<Input>, timed: bool) -> Chunks {
    let (tx, rx) = sync_channel::<Chunk>(IN_FLIGHT);
    let (ready_tx, ready) = std::sync::mpsc::channel::<Priority>();
    let n = inputs.len();
    for (i, r) in inputs {
        let tx = tx.clone();
        let ready_tx = ready_tx.clone();
        std::thread::spawn(move || {
            let _ = ready_tx.send(quick_wakeups(timed));
            drop(ready_tx);
            read_chunks(r, i, tx)
        });
    }
    drop(ready_tx);
    let mut priority = Priority::RealTime;
    for _ in 0..n {
        match ready.recv() {
            Ok(Priority::RealTime) => {}
            _ => priority = Priority::Ordinary,
        }
    }
    Chunks(rx, priority)
}

/// Starts the thread that parses the readers' chunks into `states` (the last lines of
/// the streams whose `tails` is set kept); lines of stdout and stderr also go to `log`.
/// `ended` gets a stream's index once every line of it was parsed.
pub fn parse(
    chunks: Chunks,
    states: Vec<StreamState>,
    tails: [bool; 3],
    members: Arc<Members>,
    log: Option<Arc<Mutex<LogMatcher>>>,
    ended: Sender<usize>,
) {
    std::thread::spawn(move || {
        parse_chunks(chunks.0, &states, tails, &members, log.as_deref(), ended)
    });
}

/// Reads `r` to its end, each chunk with the time its read returned.
fn read_chunks(mut r: Box<dyn Read + Send>, i: usize, tx: SyncSender<Chunk>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let t = now_ns();
                if tx.send(Chunk::Data(i, t, buf[..n].to_vec())).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let _ = tx.send(Chunk::End(i));
}

/// Cuts every stream's chunks into lines, each line with its chunk's time.
fn parse_chunks(
    rx: Receiver<Chunk>,
    states: &[StreamState],
    tails: [bool; 3],
    members: &Members,
    log: Option<&Mutex<LogMatcher>>,
    ended: Sender<usize>,
) {
    let mut lines: Vec<LineSplitter> = (0..3).map(|_| LineSplitter::new(MAX_LINE)).collect();
    for c in rx {
        let (i, t, data) = match c {
            Chunk::Data(i, t, d) => (i, t, Some(d)),
            Chunk::End(i) => (i, now_ns(), None),
        };
        let mut g = states[i].lock().unwrap_or_else(|e| e.into_inner());
        let log = log.filter(|_| i < 2);
        let mut on_line = |l: ReadLine<'_>| one_line(&mut g, l, t, tails[i], members, log);
        match &data {
            Some(d) => lines[i].push(d, &mut on_line),
            None => {
                lines[i].finish(&mut on_line);
                drop(g);
                let _ = ended.send(i);
            }
        }
    }
}

/// One line of a stream, read at `t`: a protocol line to the parser, the program's own
/// lines to the log patterns (and stderr's to the tail).
fn one_line(
    state: &mut (Parser, VecDeque<String>),
    l: ReadLine<'_>,
    t: u64,
    keep_tail: bool,
    members: &Members,
    log: Option<&Mutex<LogMatcher>>,
) {
    let (p, tail) = state;
    let (protocol, text) = match l {
        ReadLine::Whole(b) => (p.feed(b), b),
        ReadLine::Overlong(b) => (p.feed_overlong(b), b),
    };
    if protocol {
        members.note_line(text);
    } else if let Some(m) = log {
        // The program's own lines: timing lines become spans, and the lines stay the
        // program's output (the tail below keeps them as any other).
        m.lock().unwrap_or_else(|e| e.into_inner()).feed(text, t);
    }
    if keep_tail && !protocol && !text.is_empty() {
        let s = String::from_utf8_lossy(&text[..text.len().min(300)]).into_owned();
        tail.push_back(s);
        if tail.len() > STDERR_TAIL {
            tail.pop_front();
        }
    }
}

/// Asks the scheduler to run the calling thread soon after it wakes: with `realtime`,
/// the lowest real-time priority where this process may take one; else (or where it may
/// not) a short slice (EEVDF, Linux 6.12 and later: `sched_setattr` with a runtime, which
/// needs no privilege), which gives it an early deadline, so it tends to preempt busy
/// threads when the program's write wakes it; on older kernels that call fails and
/// nothing changes. Says which it got.
fn quick_wakeups(realtime: bool) -> Priority {
    // SAFETY: sched_getscheduler and getpriority read the calling thread's settings.
    let (policy, nice) = unsafe {
        (
            libc::sched_getscheduler(0),
            libc::getpriority(libc::PRIO_PROCESS, 0),
        )
    };
    if policy != libc::SCHED_OTHER {
        return Priority::Ordinary;
    }
    // Where gapscope may (CAP_SYS_NICE, or an RLIMIT_RTPRIO above 0), the lowest
    // real-time priority: the reader then runs as soon as the write wakes it, ahead of
    // every ordinary thread. It cannot hog a core: past `IN_FLIGHT` unparsed chunks it
    // waits for the (ordinary) parsing thread.
    let fifo = libc::sched_param { sched_priority: 1 };
    // SAFETY: `fifo` is a valid sched_param; pid 0 is this thread.
    if realtime && unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } == 0 {
        return Priority::RealTime;
    }
    // struct sched_attr, SCHED_ATTR_SIZE_VER0 (48 bytes): size, policy, flags, nice,
    // priority, runtime, deadline, period.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        // Its nice as it is (lowering it would need a privilege).
        nice,
        priority: 0,
        runtime: READER_SLICE_NS,
        deadline: 0,
        period: 0,
    };
    // SAFETY: `attr` is a valid sched_attr of the size it states; pid 0 is this thread.
    unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    Priority::Ordinary
}
