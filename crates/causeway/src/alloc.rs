//! The process's global allocator: mimalloc, entered the way its own `malloc` is.
//!
//! `mimalloc::MiMalloc` sends every allocation through `mi_malloc_aligned`, which looks for
//! a free block of the right alignment and, when the one at hand is not, takes the generic
//! path (about 150 instructions instead of 20: a node under redis-benchmark's INCR made 50
//! allocations per request, 6 of them on that path; BENCHMARKS.md, issue 14's twenty-fifth
//! session). Every mimalloc block is a whole number of machine words from a word-aligned
//! start, so an alignment of at most a word needs nothing more than `mi_malloc` (glibc's
//! `System` allocator makes the same split); larger alignments keep the aligned calls.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use libmimalloc_sys as mi;

/// The alignment every `mi_malloc` block has (a machine word).
const WORD_ALIGN: usize = core::mem::size_of::<usize>();

pub struct Allocator;

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks of
// either entry); blocks of alignments above a word come from its aligned calls.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD_ALIGN {
            unsafe { mi::mi_malloc(layout.size()) as *mut u8 }
        } else {
            unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8 }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= WORD_ALIGN {
            unsafe { mi::mi_zalloc(layout.size()) as *mut u8 }
        } else {
            unsafe { mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8 }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        unsafe { mi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= WORD_ALIGN {
            unsafe { mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8 }
        } else {
            unsafe {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every small size and alignment come back aligned, hold what was written,
    /// and survive a growth by `realloc`.
    #[test]
    fn blocks_are_aligned_and_keep_their_bytes() {
        let a = Allocator;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [align, align * 3, 24, 1000, 1500, 70_000] {
                let size = size.max(align);
                let layout = Layout::from_size_align(size, align).unwrap();
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    p.write_bytes(0xab, size);
                    let q = a.realloc(p, layout, size * 2);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xab));
                    a.dealloc(q, Layout::from_size_align(size * 2, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
