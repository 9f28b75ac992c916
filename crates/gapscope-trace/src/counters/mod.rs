//! CPU counters per span, through perf_event_open on the calling thread.
//!
//! Hardware events (instructions, branches, cycles) need a PMU; on machines without one
//! (VMs, most CI) the kernel answers ENOENT and they are recorded as unavailable with
//! that reason. Software events (task-clock, page-faults, context-switches) are counted
//! by the kernel itself and work wherever perf_event_open is permitted. A count is never
//! invented: an unavailable counter is `None` in every row.
//!
//! Exclusions differ per event ([`CounterKind::include_kernel`]). Hardware events count
//! user space only (the prover's own instructions). Software events happen in the
//! kernel: a context switch is always taken there, and a page fault inside a system call
//! too, so excluding kernel events (perf-event2's default) counted every context switch
//! as 0. Counting kernel events needs `perf_event_paranoid` <= 1 or CAP_PERFMON; where
//! that is refused, page faults and task-clock fall back to user mode and context
//! switches are recorded unavailable with the reason.

pub mod emulated;
pub mod heap;
pub mod mode;
pub mod process;

pub use mode::CounterMode;

use std::cell::RefCell;
use std::collections::BTreeMap;

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, Group};

/// The counters gapscope knows, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CounterKind {
    Instructions,
    Branches,
    Cycles,
    TaskClockNs,
    PageFaults,
    ContextSwitches,
}

impl CounterKind {
    pub const ALL: [CounterKind; 6] = [
        CounterKind::Instructions,
        CounterKind::Branches,
        CounterKind::Cycles,
        CounterKind::TaskClockNs,
        CounterKind::PageFaults,
        CounterKind::ContextSwitches,
    ];

    /// Column name in spans.csv and meta.json.
    pub fn column(self) -> &'static str {
        match self {
            CounterKind::Instructions => "instructions",
            CounterKind::Branches => "branches",
            CounterKind::Cycles => "cycles",
            CounterKind::TaskClockNs => "task_clock_ns",
            CounterKind::PageFaults => "page_faults",
            CounterKind::ContextSwitches => "context_switches",
        }
    }

    pub fn is_hardware(self) -> bool {
        matches!(
            self,
            CounterKind::Instructions | CounterKind::Branches | CounterKind::Cycles
        )
    }

    /// Whether the event must count in kernel mode to mean anything: a context switch
    /// only ever happens there; page faults and task-clock are counted in full where
    /// permitted. Hardware events stay user-space only.
    pub fn include_kernel(self) -> KernelMode {
        match self {
            CounterKind::Instructions | CounterKind::Branches | CounterKind::Cycles => {
                KernelMode::Excluded
            }
            CounterKind::TaskClockNs | CounterKind::PageFaults => KernelMode::Preferred,
            CounterKind::ContextSwitches => KernelMode::Required,
        }
    }

    /// The builders to try, in order of preference.
    pub(crate) fn builders(self) -> Vec<Builder<'static>> {
        let base = || match self {
            CounterKind::Instructions => Builder::new(Hardware::INSTRUCTIONS),
            CounterKind::Branches => Builder::new(Hardware::BRANCH_INSTRUCTIONS),
            CounterKind::Cycles => Builder::new(Hardware::CPU_CYCLES),
            CounterKind::TaskClockNs => Builder::new(Software::TASK_CLOCK),
            CounterKind::PageFaults => Builder::new(Software::PAGE_FAULTS),
            CounterKind::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
        };
        let with_kernel = || {
            let mut b = base();
            b.include_kernel();
            b
        };
        match self.include_kernel() {
            KernelMode::Excluded => vec![base()],
            KernelMode::Preferred => vec![with_kernel(), base()],
            KernelMode::Required => vec![with_kernel()],
        }
    }
}

/// How a counter treats events that happen in kernel mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelMode {
    /// User space only.
    Excluded,
    /// Kernel included where permitted, else user space only.
    Preferred,
    /// The event only happens in the kernel: without kernel counting it is unavailable.
    Required,
}

/// Counter values (or deltas); `None` where the counter is unavailable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CounterValues(pub [Option<u64>; 6]);

impl CounterValues {
    pub fn get(&self, k: CounterKind) -> Option<u64> {
        self.0[k as usize]
    }

    pub fn delta_since(&self, earlier: &CounterValues) -> CounterValues {
        let mut out = [None; 6];
        for (i, slot) in out.iter_mut().enumerate() {
            if let (Some(b), Some(a)) = (self.0[i], earlier.0[i]) {
                *slot = Some(b.saturating_sub(a));
            }
        }
        CounterValues(out)
    }
}

/// Whether a counter can be read on this machine, and why not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Availability {
    pub available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Probes every counter once (each on its own) and reports what works, with the reason
/// for what does not. Written to meta.json.
pub fn probe() -> BTreeMap<String, Availability> {
    CounterKind::ALL
        .iter()
        .map(|&k| {
            let mut last = None;
            for b in k.builders() {
                match b.build() {
                    Ok(_) => {
                        last = None;
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            let a = match last {
                None => Availability {
                    available: true,
                    reason: None,
                },
                Some(e) => Availability {
                    available: false,
                    reason: Some(explain(k, &e)),
                },
            };
            (k.column().to_string(), a)
        })
        .collect()
}

fn explain(k: CounterKind, e: &std::io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) if k.is_hardware() => {
            "this CPU exposes no hardware performance counters (no PMU, e.g. a VM)"
        }
        Some(libc::EACCES) | Some(libc::EPERM) if k.include_kernel() == KernelMode::Required => {
            "counting it needs kernel events (it only happens in the kernel): lower \
             /proc/sys/kernel/perf_event_paranoid to <= 1 or run with CAP_PERFMON"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "not permitted: lower /proc/sys/kernel/perf_event_paranoid (<= 2) or run with CAP_PERFMON"
        }
        Some(libc::ENOSYS) => "perf_event_open is not supported by this kernel",
        _ => "perf_event_open failed",
    };
    format!("{hint} (perf_event_open: {e})")
}

struct ThreadCounters {
    group: Group,
    members: Vec<(CounterKind, Counter)>,
}

thread_local! {
    static THREAD: RefCell<Option<Option<ThreadCounters>>> = const { RefCell::new(None) };
}

fn open_thread_counters() -> Option<ThreadCounters> {
    let mut group = Group::new().ok()?;
    let mut members = Vec::new();
    for k in CounterKind::ALL {
        if let Some(c) = k.builders().iter().find_map(|b| group.add(b).ok()) {
            members.push((k, c));
        }
    }
    if members.is_empty() {
        return None;
    }
    group.enable().ok()?;
    Some(ThreadCounters { group, members })
}

/// Reads this thread's counters (opened on first use). `None` if none can be opened.
pub fn read_thread() -> Option<CounterValues> {
    THREAD.with(|t| {
        let mut t = t.borrow_mut();
        let tc = t.get_or_insert_with(open_thread_counters).as_mut()?;
        let data = tc.group.read().ok()?;
        let mut v = [None; 6];
        for (k, c) in &tc.members {
            v[*k as usize] = data.get(c).map(|e| e.value());
        }
        Some(CounterValues(v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{drain_trace, set_counters_enabled, Span};

    fn software_available() -> bool {
        probe()["page_faults"].available
    }

    #[test]
    fn page_faults_rise_when_touching_a_fresh_buffer_and_not_in_an_empty_span() {
        if !software_available() {
            eprintln!(
                "skipped: software perf events not permitted here: {:?}",
                probe()
            );
            return;
        }
        set_counters_enabled(true);
        let root = Span::enter("pf_root");
        let trace = root.trace();
        {
            let _s = Span::enter("pf_empty");
        }
        {
            let _s = Span::enter("pf_touch");
            let mut buf = vec![0u8; 256 << 20];
            for i in (0..buf.len()).step_by(4096) {
                buf[i] = 1;
            }
            std::hint::black_box(&buf);
        }
        drop(root);
        let spans = drain_trace(trace);
        let get = |n: &str| {
            spans
                .iter()
                .find(|s| s.name == n)
                .unwrap()
                .counters
                .unwrap()
        };
        let empty = get("pf_empty").get(CounterKind::PageFaults).unwrap();
        let touch = get("pf_touch").get(CounterKind::PageFaults).unwrap();
        // 256 MiB of 4 KiB pages is 65,536 faults without huge pages; THP can fold them.
        assert!(touch >= 100, "touch faults {touch}");
        assert!(empty <= 2, "empty span faults {empty}");
        let tc = get("pf_touch").get(CounterKind::TaskClockNs).unwrap();
        assert!(tc > 0);
    }

    /// A context switch is a kernel event: counted with kernel events excluded it read
    /// 0 in every span. Sleeping switches the thread out once per sleep.
    #[test]
    fn context_switches_rise_when_sleeping_and_not_in_an_empty_span() {
        let p = probe();
        if !p["context_switches"].available {
            eprintln!("skipped: context switches not countable here: {p:?}");
            return;
        }
        set_counters_enabled(true);
        let root = Span::enter("cs_root");
        let trace = root.trace();
        {
            let _s = Span::enter("cs_empty");
        }
        {
            let _s = Span::enter("cs_sleep");
            for _ in 0..20 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        drop(root);
        let spans = drain_trace(trace);
        let get = |n: &str| {
            spans
                .iter()
                .find(|s| s.name == n)
                .unwrap()
                .counters
                .unwrap()
                .get(CounterKind::ContextSwitches)
        };
        let slept = get("cs_sleep").expect("context switches counted");
        let empty = get("cs_empty").expect("context switches counted");
        assert!(slept >= 20, "20 sleeps counted {slept} context switches");
        assert!(empty <= 1, "empty span counted {empty} context switches");
    }

    #[test]
    fn software_events_that_happen_in_the_kernel_are_not_excluded() {
        assert_eq!(
            CounterKind::ContextSwitches.include_kernel(),
            KernelMode::Required
        );
        for k in CounterKind::ALL {
            let excluded = k.builders()[0].attrs().exclude_kernel() != 0;
            assert_eq!(excluded, k.is_hardware(), "{k:?}");
        }
    }

    #[test]
    fn unavailable_counters_are_none_not_zero() {
        let p = probe();
        let v = read_thread();
        if let Some(v) = v {
            for k in CounterKind::ALL {
                assert_eq!(v.get(k).is_some(), p[k.column()].available, "{k:?}");
            }
        }
        for (name, a) in &p {
            assert_eq!(a.available, a.reason.is_none(), "{name}");
        }
    }

    /// The perf-event path for hardware events, where a PMU exists: the span group's
    /// instructions and branches must cover a loop of known length. Elsewhere (VMs, most
    /// CI) it skips with the kernel's reason, as meta.json records it.
    #[test]
    fn hardware_events_count_a_known_loop_where_the_kernel_allows_them() {
        let p = probe();
        for k in [CounterKind::Instructions, CounterKind::Branches] {
            let a = &p[k.column()];
            if !a.available {
                eprintln!(
                    "skipped: {} unavailable: {}",
                    k.column(),
                    a.reason.as_deref().unwrap_or("no reason given")
                );
                return;
            }
        }
        set_counters_enabled(true);
        const N: u64 = 1_000_000;
        let s = Span::enter("hw_loop");
        let trace = s.trace();
        let mut acc = 0u64;
        for i in 0..N {
            acc = std::hint::black_box(acc.wrapping_add(i));
        }
        drop(s);
        let spans = drain_trace(trace);
        let c = spans[0].counters.expect("counters on");
        let (ins, br) = (
            c.get(CounterKind::Instructions).unwrap(),
            c.get(CounterKind::Branches).unwrap(),
        );
        // At least one instruction and one branch per iteration; an unoptimised build
        // spends a few dozen instructions on each.
        assert!((N..100 * N).contains(&ins), "instructions {ins}");
        assert!((N..20 * N).contains(&br), "branches {br}");
    }

    #[test]
    fn delta_keeps_unavailable_as_none() {
        let a = CounterValues([None, Some(1), None, Some(10), Some(3), Some(0)]);
        let b = CounterValues([None, Some(5), Some(9), Some(25), Some(3), Some(2)]);
        let d = b.delta_since(&a);
        assert_eq!(d.0, [None, Some(4), None, Some(15), Some(0), Some(2)]);
    }
}
