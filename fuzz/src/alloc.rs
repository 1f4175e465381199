//! A counting global allocator: how many bytes are live and the most that were live since the
//! last reset, so a campaign can flag an input that makes a parser allocate far more than its
//! size, or that leaves memory behind.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    // Per thread, so what the watchdog or another test allocates is not counted against the
    // input running on this thread. Const-initialised cells: no allocation, no destructor.
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// The system allocator, counting per thread. `ski-fuzz` installs it with `#[global_allocator]`.
pub struct CountingAllocator;

// SAFETY: every call is passed to `System` unchanged; only counters are added.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            count(layout.size() as isize);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            count(layout.size() as isize);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: as `alloc`.
        unsafe { System.dealloc(pointer, layout) };
        count(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `alloc`.
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        moved
    }
}

fn count(change: isize) {
    INSTALLED.store(true, Ordering::Relaxed);
    // `try_with`: nothing is counted while the thread's locals are torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + change;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

/// Whether the counting allocator is the global allocator of this program.
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}

/// Bytes this thread has allocated and not freed (memory freed by another thread counts there).
pub fn live() -> isize {
    LIVE.try_with(Cell::get).unwrap_or(0)
}

/// Starts a new peak for this thread at its bytes live now, and returns them.
pub fn reset_peak() -> isize {
    let live = live();
    let _ = PEAK.try_with(|peak| peak.set(live));
    live
}

/// The most bytes live on this thread since its last [`reset_peak`].
pub fn peak() -> isize {
    PEAK.try_with(Cell::get).unwrap_or(0)
}
