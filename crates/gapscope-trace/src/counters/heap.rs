//! The process heap as glibc's allocator sees it, read before each rep's `prove`. One
//! rep can leave heap state behind that changes the next rep's page faults (freed
//! memory kept, or trimmed back to the kernel). These readings, on the `prove` span's
//! attributes, show whether reps started from the same heap. `[run] heap_trim = true`
//! makes every rep start from a trimmed heap.

use serde::Serialize;

/// `mallinfo2()` of every arena, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HeapStats {
    /// Non-mmapped space held from the kernel (`arena`).
    pub heap_arena_bytes: u64,
    /// Free space inside it (`fordblks`): memory a new allocation can reuse without
    /// faulting pages in.
    pub heap_free_bytes: u64,
    /// Releasable free space at the top of the main heap (`keepcost`).
    pub heap_top_bytes: u64,
    /// Blocks mapped on their own (`hblkhd`): large allocations, unmapped when freed.
    pub heap_mmapped_bytes: u64,
}

impl HeapStats {
    /// The allocator's current figures; None where the C library is not glibc.
    pub fn read() -> Option<HeapStats> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: mallinfo2 takes no arguments and only reads allocator state.
            let m = unsafe { libc::mallinfo2() };
            Some(HeapStats {
                heap_arena_bytes: m.arena as u64,
                heap_free_bytes: m.fordblks as u64,
                heap_top_bytes: m.keepcost as u64,
                heap_mmapped_bytes: m.hblkhd as u64,
            })
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            None
        }
    }
}

/// Returns free heap memory to the kernel (`malloc_trim(0)`); false where the C library
/// has no such call.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
        unsafe { libc::malloc_trim(0) };
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glibc_reports_the_heap_and_trims_it() {
        let Some(h) = HeapStats::read() else {
            assert!(!trim());
            return; // not glibc
        };
        // Other test threads allocate and free meanwhile, so only invariants are checked.
        assert!(h.heap_arena_bytes > 0, "{h:?}");
        assert!(h.heap_arena_bytes >= h.heap_free_bytes, "{h:?}");
        assert!(h.heap_free_bytes >= h.heap_top_bytes, "{h:?}");
        assert!(trim());
    }
}
