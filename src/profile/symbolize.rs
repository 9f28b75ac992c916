//! Addresses to function names. [`Symbolizer`] is what `attribute` asks; [`InProcess`]
//! answers for this process's own address space through the backtrace crate (DWARF
//! where present, the symbol table otherwise; Rust and C++ names demangled; inlined
//! calls expanded to their own frames). A child process's addresses need its maps
//! (`/proc/<pid>/maps`) and files instead: another implementation of the same trait.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Names for code addresses.
pub trait Symbolizer {
    /// The frames at `addr`, outermost first (more than one where calls were inlined).
    /// `return_address`: the address follows a call (every call-chain entry but the
    /// first), so the call itself is at the byte before.
    fn frames(&mut self, addr: u64, return_address: bool) -> Arc<[String]>;
}

/// This process's addresses, cached for the life of the process (they do not move).
#[derive(Default)]
pub struct InProcess;

fn cache() -> &'static Mutex<HashMap<u64, Arc<[String]>>> {
    static CACHE: OnceLock<Mutex<HashMap<u64, Arc<[String]>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

impl Symbolizer for InProcess {
    fn frames(&mut self, addr: u64, return_address: bool) -> Arc<[String]> {
        let a = if return_address {
            addr.saturating_sub(1)
        } else {
            addr
        };
        if let Some(f) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&a) {
            return f.clone();
        }
        let mut names = Vec::new();
        backtrace::resolve(a as usize as *mut std::ffi::c_void, |sym| {
            let name = match sym.name() {
                Some(n) => format!("{n:#}"),
                None => "[unknown]".to_string(),
            };
            names.push(clean(&name));
        });
        if names.is_empty() {
            names.push("[unknown]".to_string());
        }
        // backtrace reports the innermost inlined frame first.
        names.reverse();
        let f: Arc<[String]> = names.into();
        cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(a, f.clone());
        f
    }
}

/// A frame name safe inside a folded stack: no ';' (the frame separator), no line or
/// tab breaks.
pub fn clean(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

/// Folds one call chain (innermost first) into frames, outermost first.
pub fn fold(chain: &[u64], sym: &mut dyn Symbolizer) -> Vec<String> {
    let mut out = Vec::new();
    for (i, &a) in chain.iter().enumerate().rev() {
        out.extend(sym.frames(a, i > 0).iter().cloned());
    }
    if out.is_empty() {
        out.push("[no stack]".to_string());
    }
    out
}
