//! Counters of a whole child process: every thread it has and every process it starts,
//! from its `exec` to its exit (perf_event_open on its pid with `inherit` and
//! `enable_on_exec`). Opened while the child waits between fork and exec, so nothing
//! it runs is missed; read once it is gone (the kernel adds an inherited counter's
//! counts to it as each thread and child process exits).

use perf_event::Counter;

use super::{CounterKind, CounterValues};

/// Counters open on one child process.
pub struct ProcessCounters {
    members: Vec<(CounterKind, Counter)>,
}

impl ProcessCounters {
    /// Opens every counter this machine allows on `pid` (which must not have exec'd
    /// yet), disabled until its `exec`. Counters that cannot be opened are left out
    /// (their values read `None`, as [`super::probe`] explains in meta.json).
    pub fn open(pid: i32) -> ProcessCounters {
        let mut members = Vec::new();
        for k in CounterKind::ALL {
            let counter = k.builders().into_iter().find_map(|mut b| {
                b.observe_pid(pid)
                    .any_cpu()
                    .inherit(true)
                    .enabled(false)
                    .enable_on_exec(true)
                    .build()
                    .ok()
            });
            if let Some(c) = counter {
                members.push((k, c));
            }
        }
        ProcessCounters { members }
    }

    /// Whether any counter is open.
    pub fn any(&self) -> bool {
        !self.members.is_empty()
    }

    /// The counts so far (after the child exited: its whole life).
    pub fn read(&mut self) -> CounterValues {
        let mut v = [None; 6];
        for (k, c) in &mut self.members {
            v[*k as usize] = c.read().ok();
        }
        CounterValues(v)
    }
}
