//! This test binary's global allocator: the system allocator, plus a record of the largest single
//! allocation (or reallocation) a thread makes while it measures. Only the measuring thread's
//! requests count, so tests running in parallel do not see each other's.

// `GlobalAlloc` is an unsafe trait; this module only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Requests above this while measuring fail (the process aborts with "memory allocation of N
/// bytes failed") instead of taking the machine's memory: no decoder under test may come near.
const REFUSE_ABOVE: usize = 2 << 30;

thread_local! {
    // Const-initialised and without destructors: safe to use inside the allocator.
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, recording the largest request of a measuring thread.
#[derive(Debug)]
pub struct PeakAlloc;

/// Note a request of `size` bytes; false when it must be refused.
fn note(size: usize) -> bool {
    MEASURING
        .try_with(|m| {
            if !m.get() {
                return true;
            }
            PEAK.with(|p| p.set(p.get().max(size)));
            size <= REFUSE_ABOVE
        })
        .unwrap_or(true)
}

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !note(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: as in `dealloc`; the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Ends a measurement even when the measured code panics.
struct Measuring;

impl Drop for Measuring {
    fn drop(&mut self) {
        MEASURING.with(|m| m.set(false));
    }
}

/// Run `f` and return its result with the largest single allocation it made on this thread.
pub fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    PEAK.with(|p| p.set(0));
    MEASURING.with(|m| m.set(true));
    let guard = Measuring;
    let out = f();
    drop(guard);
    (out, PEAK.with(Cell::get))
}
