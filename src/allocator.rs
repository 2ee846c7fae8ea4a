//! The process's allocator, chosen by command: mimalloc for the HTTP edges, the system allocator
//! for the rest.
//!
//! `serve` and `proxy` allocate on one runtime worker and free on another; glibc's arenas then
//! contend (on the serve bench, 1.28 futex calls per request went to malloc's arena locks; 0.10
//! with mimalloc). The batch commands free where they allocate or hand buffers over in bulk, and
//! there mimalloc's per-thread heaps hold freed memory longer: `replay` of the 92.7 MB bench
//! trace peaked at 57–172 MB on 1–8 threads with it, against 22–39 MB with glibc
//! (benches/README.md).
//!
//! The choice is made once, in `main`, before any other thread starts: allocations before it
//! (the parsed command line) are the system allocator's, every one after it the chosen one's.
//! A block is freed or resized by the allocator that holds it, which mimalloc can tell from the
//! address alone: mimalloc v3 (the `mimalloc` crate's default) answers from a page map over the
//! whole address space. (v2's map stops at 48 TiB, past which a block of its own could read as
//! the system's: do not switch the crate to its `v2` feature.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// Whether new blocks come from mimalloc. Set once, before any thread but `main` exists, so a
/// relaxed load sees it on every thread (spawning a thread orders it before the thread's start).
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// Makes mimalloc the allocator of every block allocated from now on. Call it from `main`
/// before any thread is started.
pub fn use_mimalloc() {
    MIMALLOC.store(true, Ordering::Relaxed);
}

/// The global allocator: the system's, or mimalloc's after [`use_mimalloc`].
pub struct ByCommand;

/// Whether mimalloc holds the block at `ptr`: never before [`use_mimalloc`]; after it, when the
/// address is in mimalloc's heap (blocks allocated before the switch are the system's).
fn mimalloc_holds(ptr: *mut u8) -> bool {
    // SAFETY: mi_is_in_heap_region only looks the address up in mimalloc's page map; any
    // address may be asked about.
    MIMALLOC.load(Ordering::Relaxed) && unsafe { libmimalloc_sys::mi_is_in_heap_region(ptr.cast()) }
}

// SAFETY: every block is allocated by one of the two allocators and freed or resized by the
// same one: `alloc` picks by the flag, which only ever goes from false to true, and the others
// pick by which allocator holds the address.
unsafe impl GlobalAlloc for ByCommand {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a non-zero size) is passed on unchanged.
        unsafe {
            match MIMALLOC.load(Ordering::Relaxed) {
                true => MiMalloc.alloc(layout),
                false => System.alloc(layout),
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            match MIMALLOC.load(Ordering::Relaxed) {
                true => MiMalloc.alloc_zeroed(layout),
                false => System.alloc_zeroed(layout),
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by the allocator that holds it, with `layout`.
        unsafe {
            match mimalloc_holds(ptr) {
                true => MiMalloc.dealloc(ptr, layout),
                false => System.dealloc(ptr, layout),
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`; the block stays with the allocator that holds it.
        unsafe {
            match mimalloc_holds(ptr) {
                true => MiMalloc.realloc(ptr, layout, new_size),
                false => System.realloc(ptr, layout, new_size),
            }
        }
    }
}
