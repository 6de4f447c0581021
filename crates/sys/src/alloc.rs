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
use std::ffi::{c_int, c_long, c_void};

/// What every mimalloc block is aligned to: a machine word.
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as the global allocator (`#[global_allocator] static A: Mimalloc = Mimalloc;`).
pub struct Mimalloc;

/// `mi_option_page_full_retain`: its place in mimalloc 3's `mi_option_t` (include/mimalloc.h;
/// the `extended` bindings of libmimalloc-sys stop before it). A test holds the number to the
/// option's default.
const PAGE_FULL_RETAIN: c_int = 36;

/// How many full pages of each size class a thread keeps in its own page queue (mimalloc's
/// most; its default is 2).
const FULL_PAGES_KEPT: c_long = 32;

// mimalloc's option call: a plain C function of the library libmimalloc-sys links.
unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// Makes the threads started after this call keep up to [`FULL_PAGES_KEPT`] full pages per size
/// class in their own page queues, where mimalloc 3 by default abandons every full page past
/// the second (a thread reads the option when it first allocates, so the calling thread keeps
/// the default).
///
/// Why: a UDP receiver thread allocates what a transaction keeps (its entry, context and key
/// boxes) and the worker thread's timers free it tens of seconds later. Those pages are full
/// by then and abandoned, and a free into an abandoned page from another thread claims the
/// page, collects its other freed blocks, tries to reclaim it and gives it up again: ~280
/// instructions a free (`mi_free_try_collect_mt`), about 5 frees per proxied call. A page its
/// thread kept takes the same free as one atomic push, and the owner collects the pushed blocks
/// when it next looks for room in that size class. Memory stays bounded: a kept page is looked
/// at (and its freed blocks taken back) on each search for room, the 33rd full page is
/// abandoned as before. Measured (callgrind, `scripts/instructions-vs-kamailio.sh`, 500 calls,
/// one worker, the option set through the environment on one binary): UDP 69,425 / 69,275 ->
/// 68,553 / 68,206 instructions per call (mimalloc's own functions 3.0k -> 2.3k); TCP, where
/// one thread allocates and frees, 75,927 / 75,443 -> 76,114 / 76,107 / 75,558, within the
/// runs' spread (mimalloc's own 1,728 -> 1,752 / 1,786). Kept: 16 pages (UDP 68,597), 8
/// (69,072); reclaiming abandoned pages across threads on a free as well changed nothing.
pub fn keep_full_pages() {
    // SAFETY: sets one of mimalloc's options, which it reads with a relaxed atomic load; any
    // value in 0..=32 is valid for this one (mimalloc clamps it to -1..=32).
    unsafe { mi_option_set(PAGE_FULL_RETAIN, FULL_PAGES_KEPT) }
}

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

    unsafe extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
    }

    /// Option 36 is `page_full_retain`: its neighbours read their own defaults (generic_collect
    /// 10,000 at 34, page_reclaim_on_free 0 at 35, page_max_candidates 4 at 37), and it reads
    /// 2 until [`keep_full_pages`] sets it (a shifted numbering would set another option).
    #[test]
    fn page_full_retain_is_the_option_set() {
        // SAFETY: reads and sets mimalloc options by number (plain C calls).
        unsafe {
            assert_eq!([mi_option_get(34), mi_option_get(35), mi_option_get(37)], [10_000, 0, 4]);
            assert!(matches!(mi_option_get(PAGE_FULL_RETAIN), 2 | FULL_PAGES_KEPT));
            keep_full_pages();
            assert_eq!(mi_option_get(PAGE_FULL_RETAIN), FULL_PAGES_KEPT);
        }
    }

    /// With full pages kept, blocks one thread allocates and another frees long after (the
    /// receiver-to-timer pattern) are reused: 400,000 blocks of 448 octets (180 MB) pass
    /// through a window of 4,000 live ones (1.8 MB) and the process grows by far less than what
    /// passed through. A kept page whose blocks only other threads free must not be lost:
    /// mimalloc's -1 (keep every full page, abandon none) loses them, and grows 160 MB here.
    #[test]
    fn blocks_freed_by_another_thread_are_reused() {
        keep_full_pages();
        let resident = || {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
            let pages: usize = statm.split(' ').nth(1).unwrap().parse().unwrap();
            pages * crate::page_size().unwrap()
        };
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<usize>>(4);
        let freer = std::thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            for batch in rx {
                held.push_back(batch);
                while held.len() > 40 {
                    for p in held.pop_front().unwrap() {
                        // SAFETY: allocated by mi_malloc on the other thread, freed once here.
                        unsafe { mi::mi_free(p as *mut c_void) }
                    }
                }
            }
            for p in held.into_iter().flatten() {
                // SAFETY: as above.
                unsafe { mi::mi_free(p as *mut c_void) }
            }
        });
        // A thread of its own, started after the option was set, allocates.
        let allocator = std::thread::spawn(move || {
            let mut at_start = 0;
            for round in 0..4_000 {
                if round == 400 {
                    at_start = resident();
                }
                // SAFETY: plain allocations, written within their size, freed by the freer.
                let batch = (0..100)
                    .map(|_| unsafe {
                        let p = mi::mi_malloc(448).cast::<u8>();
                        assert!(!p.is_null());
                        p.write_bytes(round as u8, 448);
                        p as usize
                    })
                    .collect();
                tx.send(batch).unwrap();
            }
            at_start
        });
        let at_start = allocator.join().unwrap();
        freer.join().unwrap();
        let grown = resident().saturating_sub(at_start);
        assert!(grown < 40 << 20, "grew by {grown} octets while 180 MB passed through");
    }

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
