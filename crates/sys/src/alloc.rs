//! The process's allocator: mimalloc, asked the way its fast path wants to be asked.
//!
//! The `mimalloc` crate's `GlobalAlloc` passes every request to `mi_malloc_aligned`, whatever
//! its alignment. mimalloc 3 serves an aligned request from its small-object fast path only when
//! the free block at hand happens to be aligned and the size is at most 1 KiB; a larger request
//! whose size is not a power of two (a message buffer, a `Vec<u8>` of 1,500 octets, alignment 1)
//! goes through its over-allocating path: about 100 instructions per allocation on average
//! instead of about 30, some 2.7k instructions per proxied call over 31 allocations (callgrind,
//! issue 21). Every mimalloc block is word-aligned (its size classes are whole words, its pages
//! start 16-aligned), so a request whose alignment is at most a word needs no aligned call at
//! all: it goes to `mi_malloc` / `mi_zalloc` / `mi_realloc`, as std's `System` allocator sends
//! such requests to plain `malloc`. Larger alignments keep the aligned calls.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// What every mimalloc block is aligned to: a machine word.
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator (`#[global_allocator] static A: Mimalloc = Mimalloc;`).
pub struct Mimalloc;

// SAFETY: every method hands mimalloc a request it serves with memory of at least `size` bytes
// aligned to `layout.align()` (or null): plain calls only for alignments of at most a word,
// which every mimalloc block has; the aligned calls otherwise. Memory from either family is
// freed and reallocated by `mi_free` / `mi_realloc*`, which accept both.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: a plain allocation call with no preconditions.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract), i.e. from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract); the
        // block keeps `layout`'s alignment, which the plain call gives when it is at most a word.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size and alignment a program asks for comes back aligned, writable over its whole
    /// size, zeroed when asked, and with its contents kept by a reallocation that grows or
    /// shrinks it (each alignment from 1 to 4 KiB, sizes around the 1 KiB small-object limit
    /// and the power-of-two sizes where mimalloc's paths part).
    #[test]
    fn blocks_are_aligned_usable_and_keep_their_contents() {
        let a = Mimalloc;
        let sizes = [1, 7, 8, 9, 15, 16, 17, 24, 31, 64, 100, 1000, 1024, 1025, 1500, 4096, 5000, 70_000];
        for align in (0..13).map(|s| 1usize << s) {
            for &size in &sizes {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; every block is checked, filled within its size and
                // freed with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "alloc {size} aligned {align}");
                    for i in 0..size {
                        p.add(i).write(i as u8);
                    }
                    let grown = size * 3 + 5;
                    let q = a.realloc(p, layout, grown);
                    assert_eq!(q as usize % align, 0, "realloc {size}->{grown} aligned {align}");
                    assert!((0..size).all(|i| q.add(i).read() == i as u8), "contents kept");
                    let shrunk = size.div_ceil(2);
                    let r = a.realloc(q, Layout::from_size_align(grown, align).unwrap(), shrunk);
                    assert_eq!(r as usize % align, 0, "shrunk aligned {align}");
                    assert!((0..shrunk).all(|i| r.add(i).read() == i as u8), "contents kept");
                    a.dealloc(r, Layout::from_size_align(shrunk, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0, "zeroed {size} aligned {align}");
                    assert!((0..size).all(|i| z.add(i).read() == 0), "zeroed");
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
