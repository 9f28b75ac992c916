//! The layer's open spans, keyed by tracing's span id: a fixed number of shards, each a
//! vector under its own lock. A slot is reused once its span closed, so after the first
//! spans have grown the shards no span allocates (tracing-subscriber's own extensions
//! box every value, which would cost an allocation per span).
//!
//! A lookup scans its shard: cheap while few spans are open at once (nested sync code,
//! a few hundred tasks); with many thousands of open async spans it grows linearly.

use std::sync::Mutex;

use crate::attrs::Attrs;

const SHARDS: usize = 64;

/// What the layer keeps of an open span.
#[derive(Clone, Copy)]
pub struct Open {
    /// The layer's id of the span (tracing reuses its ids; these are never reused).
    pub id: u64,
    /// The layer's id of its parent, or the host recorder's; 0: none.
    pub parent: u64,
    /// The host recorder's trace the span belongs to; 0: none (span-line mode).
    pub trace: u64,
    pub name: &'static str,
    /// Its `tracing` target (the module path, unless the span named another).
    pub target: &'static str,
    /// The thread (gettid) that created the span.
    pub tid: u64,
    /// Its name, in host mode.
    pub thread_name: Option<&'static str>,
    pub start_ns: u64,
    pub cpu_start_ns: u64,
    pub attrs: Attrs,
}

pub struct Table {
    shards: Vec<Mutex<Vec<(u64, Open)>>>,
}

fn shard_of(key: u64) -> usize {
    // Fibonacci hashing: tracing's ids are slab indices, dense in their low bits.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
}

impl Default for Table {
    fn default() -> Self {
        Self::new()
    }
}

impl Table {
    pub fn new() -> Self {
        Table {
            shards: (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    pub fn insert(&self, key: u64, open: Open) {
        let mut s = self.shards[shard_of(key)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // A key can only be open once: tracing hands an id out again only after close.
        if let Some(slot) = s.iter_mut().find(|(k, _)| *k == key) {
            slot.1 = open;
        } else {
            s.push((key, open));
        }
    }

    /// Runs `f` on the open span `key`, if the layer knows it.
    pub fn with<R>(&self, key: u64, f: impl FnOnce(&mut Open) -> R) -> Option<R> {
        let mut s = self.shards[shard_of(key)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        s.iter_mut().find(|(k, _)| *k == key).map(|(_, o)| f(o))
    }

    pub fn remove(&self, key: u64) -> Option<Open> {
        let mut s = self.shards[shard_of(key)]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let i = s.iter().position(|(k, _)| *k == key)?;
        Some(s.swap_remove(i).1)
    }
}
