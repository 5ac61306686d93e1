//! The pool's page memory: one anonymous mapping holding every page.
//!
//! ```text
//!   mmap (len = nbuffers * 8 KiB, optionally 2 MiB huge pages via madvise;
//!   with huge pages, up to 2 MiB of slack before page 0 aligns it)
//!   +-------+-------+---------+---------+-----+-----------+-------+-------+
//!   | guard | slack | page 0  | page 1  | ... | page N-1  | slack | guard |
//!   +-------+-------+---------+---------+-----+-----------+-------+-------+
//! ```
//!
//! The two guard pages (4 KiB, no access) keep the kernel from merging the
//! mapping with a neighbouring one, so `/proc/self/smaps` lists the pool's
//! memory on its own (its huge page figure). Every page is touched at open
//! (`prefault`), or the kernel gives each as it is first used.
//!
//! This is one of the three modules with `unsafe` (with `guard` and `page`):
//! pages are shared between threads and their access rules are the buffer
//! manager's, not the borrow checker's, so the arena hands out raw pointers and
//! the guards turn them into slices only under the rules:
//!
//! 1. A `&[u8]` of a page exists only while its holder has a pin and the
//!    content lock in shared, share-exclusive or exclusive mode.
//! 2. A `&mut [u8]` exists only under the exclusive content lock, or while the
//!    holder is the one doing the read I/O (`IO_IN_PROGRESS`, page not yet valid).
//! 3. The one exception, as in PostgreSQL: hint bits and the page LSN set by a
//!    hint's full-page image are written under the buffer header lock while
//!    others may hold the shared content lock. Those writes are atomic
//!    (`AtomicU16::fetch_or`, `AtomicU64::store`) on naturally aligned fields,
//!    so readers see either the old or the new bits of that field.
//! 4. Optimistic reads (the crate README's rule 10) read a page with no pin
//!    and no content lock, so its bytes may be changing or the buffer may be
//!    taking another page meanwhile. They never make a slice of the page:
//!    [`Arena::load_bytes`] copies bytes out with relaxed atomic loads
//!    (aligned words where the range allows, bytes at its ragged ends)
//!    through the raw pointer, and the reader keeps the copy only
//!    if the buffer's version (desc rule 4) is unchanged afterwards. The
//!    memory stays mapped whatever happens to the buffer (the mapping lives
//!    as long as the pool, and a reader holds the pool), so a load is
//!    always of mapped, initialised bytes, and an offset outside the page
//!    is refused before any load. A writer under the exclusive lock writes
//!    through `&mut [u8]` with plain stores, so an optimistic load may race
//!    one: the seqlock pattern (crossbeam's `AtomicCell` fallback, and the
//!    atomic-memcpy proposal for Rust, RFC 3301, which exists to bless it).
//!    The bytes of a racing load are never used: the version check after
//!    the read, ordered by desc rule 4's fences, rejects them.
//! 5. A prefetch ([`Arena::prefetch`]) may name a line of any page at any
//!    time, pinned or not, locked or not: it is a hint to the CPU's cache,
//!    not a load the program sees (no value comes back, it never faults and
//!    it is no access in the language's memory model, so it races nothing).
//!    It only asks for a line early, for a reader that will take it under
//!    rules 1-4 a little later.

use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use memmap2::{MmapMut, MmapOptions};

use crate::desc::BufferId;
use crate::error::{Error, Result};
use crate::numa::{HUGE_PAGE, PlacementPlan};
use crate::tag::PAGE_SIZE;

/// Whether the kernel backed the pool with transparent huge pages.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HugePageStatus {
    /// Huge pages were asked for (`madvise(MADV_HUGEPAGE)`).
    pub requested: bool,
    /// Bytes of the pool the kernel backs with huge pages now, from
    /// `/proc/self/smaps` (`AnonHugePages`); `None` where that cannot be read.
    /// A pool not pre-faulted grows into its memory as its pages are first
    /// used, and this with it.
    pub huge_bytes: Option<u64>,
    /// Size of the pool mapping in bytes.
    pub pool_bytes: u64,
}

/// What became of the pool's NUMA placement (see `numa`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One node: the pages have nowhere else to go.
    OneNode,
    /// Every range of the plan was bound (or interleaved) before any page
    /// was touched.
    Applied(PlacementPlan),
    /// The kernel refused (the reason); pages are where first touch put them.
    Refused(PlacementPlan, String),
}

/// The page memory of a pool.
#[derive(Debug)]
pub struct Arena {
    map: MmapMut,
    base: *mut u8,
    npages: usize,
    /// Huge pages were asked for.
    huge: bool,
    /// `AnonHugePages` as last read ([`Arena::huge_pages`]; at open first),
    /// [`UNKNOWN`] where it could not be read.
    huge_bytes_read: AtomicU64,
    /// Every page was touched at open: the reading at open stays true.
    prefaulted: bool,
    /// When the arena was made, and milliseconds since then of the last
    /// reading of `huge_bytes_read`.
    opened: Instant,
    huge_read_at_ms: AtomicU64,
    placement: Placement,
}

/// How old a reading of the huge page figure the pool's counters take
/// before reading it again (`PoolStats::huge_pages`).
pub const HUGE_PAGES_REFRESH_MS: u64 = 1000;

/// The page of no access at each end of the pool's mapping.
const GUARD: usize = 4096;

/// `huge_bytes_read` when `/proc/self/smaps` could not be read.
const UNKNOWN: u64 = u64::MAX;

// SAFETY: the arena is a block of plain bytes; every access to it goes through
// `page_ptr` and the rules in the module docs, which the pool enforces with pins,
// content locks and the header lock. Sending or sharing the pointer is fine.
unsafe impl Send for Arena {}
// SAFETY: see `Send` above.
unsafe impl Sync for Arena {}

impl Arena {
    /// Map `npages` pages, ask for huge pages if `huge`, and pre-fault every
    /// page so first-touch page faults never land inside a measurement.
    pub fn new(npages: usize, huge: bool) -> Result<Arena> {
        Self::placed(npages, huge, true, None)
    }

    /// Like [`new`](Self::new), applying a NUMA placement `plan` (offsets
    /// relative to the first page) before any page is touched, so that each
    /// page is faulted in on its node. With huge pages the first page is
    /// 2 MiB aligned, so the plan's 2 MiB boundaries are real huge page
    /// boundaries. A refused plan is logged once and the arena works.
    ///
    /// `prefault` writes one byte of every 4 KiB now, so that no page fault
    /// is left for later (the pool's measurements want none in their
    /// windows). Without it the kernel gives the memory as it is first
    /// touched (a read of a page never written finds zeros, as the
    /// pre-fault's would), and an open costs no zeroing of memory a short
    /// run may never use (a 292 MiB pool's was a third of the samples of
    /// a 1 M-row bulk load's profile here).
    pub fn placed(
        npages: usize,
        huge: bool,
        prefault: bool,
        plan: Option<PlacementPlan>,
    ) -> Result<Arena> {
        let len = npages.checked_mul(PAGE_SIZE).ok_or_else(|| {
            Error::InvalidConfig(format!("{npages} pages overflow the address space"))
        })?;
        // Room to move the start to a huge page boundary.
        let slack = if huge { HUGE_PAGE } else { 0 };
        let mut map = MmapOptions::new()
            .len(
                len.checked_add(slack)
                    .and_then(|l| l.checked_add(2 * GUARD))
                    .ok_or_else(|| {
                        Error::InvalidConfig(format!("{npages} pages overflow the address space"))
                    })?,
            )
            .map_anon()
            .map_err(|e| {
                Error::io(
                    "map",
                    format!("buffer pool of {len} bytes"),
                    "anonymous memory",
                    e,
                )
            })?;
        // A page of no access at each end: the kernel merges neighbouring
        // anonymous mappings of the same flags into one (another pool's
        // memory, an allocator's), and `/proc/self/smaps` then lists them
        // as one, so this pool's figures could not be told from theirs.
        #[cfg(target_os = "linux")]
        {
            let total = map.len();
            let start = map.as_mut_ptr();
            for at in [0, total - GUARD] {
                // SAFETY: a whole page inside the mapping, which no one
                // reads or writes: only the pool's pages between the guards
                // are ever handed out.
                let rc = unsafe {
                    libc::mprotect(start.add(at).cast::<libc::c_void>(), GUARD, libc::PROT_NONE)
                };
                if rc != 0 {
                    return Err(Error::io(
                        "protect",
                        format!("buffer pool of {len} bytes"),
                        "a guard page",
                        std::io::Error::last_os_error(),
                    ));
                }
            }
        }
        // SAFETY: the mapping is GUARD + slack + len + GUARD bytes long.
        let start = unsafe { map.as_mut_ptr().add(GUARD) };
        let skip = (start as usize).next_multiple_of(slack.max(1)) - start as usize;
        debug_assert!(skip <= slack);
        // SAFETY: skip <= slack, and slack + len bytes follow `start`.
        let base = unsafe { start.add(skip) };
        #[cfg(target_os = "linux")]
        if huge {
            // The pool's pages only: the slack around them is never used,
            // and a huge page asked for over the pool's end would be given
            // whole at the pool's last page (2 MiB backing a 128 KiB pool,
            // and counted as the pool's). A refusal only means normal
            // pages; the status below reports it.
            let _ = map.advise_range(memmap2::Advice::HugePage, GUARD + skip, len);
        }
        let placement = match plan {
            None => Placement::OneNode,
            Some(plan) => match crate::numa::apply(&plan, base) {
                Ok(()) => Placement::Applied(plan),
                Err(why) => {
                    crate::numa::log_refused(&why);
                    Placement::Refused(plan, why)
                }
            },
        };
        if prefault {
            // One byte per 4 KiB of the pool.
            for off in (GUARD + skip..GUARD + skip + len).step_by(4096) {
                map[off] = 0;
            }
        }
        let arena = Arena {
            map,
            base,
            npages,
            huge,
            huge_bytes_read: AtomicU64::new(UNKNOWN),
            prefaulted: prefault,
            opened: Instant::now(),
            huge_read_at_ms: AtomicU64::new(0),
            placement,
        };
        arena.huge_pages();
        Ok(arena)
    }

    /// What became of the NUMA placement.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The node each page's memory sits on now, asked of the kernel
    /// (`move_pages(2)` on the page's first 4 KiB), one entry per page;
    /// `None` where the kernel cannot say.
    pub fn page_nodes(&self) -> Vec<Option<usize>> {
        let addrs: Vec<*const u8> = (0..self.npages as BufferId)
            .map(|id| self.page_ptr(id).cast_const())
            .collect();
        addrs.chunks(4096).flat_map(crate::numa::nodes_of).collect()
    }

    /// Whether huge pages were asked for, and how much of the pool the
    /// kernel backs with them now: read from `/proc/self/smaps` at each
    /// call, which walks the process's page tables (milliseconds for a
    /// large process), so not for a hot path.
    pub fn huge_pages(&self) -> HugePageStatus {
        let read = self.smaps_bytes("AnonHugePages:");
        self.huge_bytes_read
            .store(read.unwrap_or(UNKNOWN), Ordering::Relaxed);
        self.huge_read_at_ms
            .store(self.ms_since_open(), Ordering::Relaxed);
        self.status(read)
    }

    /// [`huge_pages`](Self::huge_pages) as read at most about
    /// [`HUGE_PAGES_REFRESH_MS`] ago, for the pool's counters: a pool not
    /// pre-faulted grows into its memory after open, so a reading older
    /// than that is taken again (by one caller, the others keep the last
    /// one meanwhile); a pre-faulted pool's reading at open stays true and
    /// is never taken again here. Reading `/proc/self/smaps` on every call
    /// would cost every progress report milliseconds; at most once a second
    /// it costs nothing to speak of.
    pub(crate) fn huge_pages_recent(&self) -> HugePageStatus {
        if !self.prefaulted {
            let last = self.huge_read_at_ms.load(Ordering::Relaxed);
            let now = self.ms_since_open();
            if now.saturating_sub(last) >= HUGE_PAGES_REFRESH_MS
                && self
                    .huge_read_at_ms
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return self.huge_pages();
            }
        }
        let read = self.huge_bytes_read.load(Ordering::Relaxed);
        self.status((read != UNKNOWN).then_some(read))
    }

    fn ms_since_open(&self) -> u64 {
        u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The field `field` of `/proc/self/smaps` summed over the mappings
    /// that hold the pool's pages (one, or one per NUMA range where a
    /// placement split it).
    fn smaps_bytes(&self, field: &str) -> Option<u64> {
        let start = self.base as usize;
        smaps_bytes(start..start + self.npages * PAGE_SIZE, field)
    }

    fn status(&self, huge_bytes: Option<u64>) -> HugePageStatus {
        HugePageStatus {
            requested: self.huge,
            huge_bytes,
            pool_bytes: (self.npages * PAGE_SIZE) as u64,
        }
    }

    pub fn len(&self) -> usize {
        self.npages
    }

    pub fn is_empty(&self) -> bool {
        self.npages == 0
    }

    /// Pointer to the first byte of a page.
    #[inline]
    pub fn page_ptr(&self, id: BufferId) -> *mut u8 {
        assert!((id as usize) < self.npages, "buffer {id} out of range");
        debug_assert!(self.map.len() >= self.npages * PAGE_SIZE);
        // SAFETY: id < npages, so the offset stays inside the mapping.
        unsafe { self.base.add(id as usize * PAGE_SIZE) }
    }

    /// Ask the CPU for the cache line holding byte `offset` of page `id`
    /// (rule 5): a hint that returns at once, so the line's miss (and the
    /// page's TLB miss) overlaps whatever the caller does next instead of
    /// following it. Nothing is read or written; an `id` or `offset` outside
    /// the pool asks for nothing. A no-op where no prefetch instruction is
    /// available.
    #[inline(always)]
    pub fn prefetch(&self, id: BufferId, offset: usize) {
        if id as usize >= self.npages || offset >= PAGE_SIZE {
            return;
        }
        // In bounds (checked above), so the address is inside the mapping.
        let p = self
            .base
            .wrapping_add(id as usize * PAGE_SIZE + offset)
            .cast_const();
        #[cfg(target_arch = "x86_64")]
        // SAFETY: PREFETCHT0 reads nothing into the program and never
        // faults, whatever the address; this one is inside the mapping,
        // which lives as long as `self` (rule 5). SSE is part of the x86_64
        // baseline, so the instruction exists on every x86_64 CPU.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
    }

    /// A shared view of a page.
    ///
    /// # Safety
    /// The caller follows rule 1 of the module docs for the lifetime of the slice.
    #[inline]
    pub unsafe fn page(&self, id: BufferId) -> &[u8] {
        // SAFETY: the pointer is valid for PAGE_SIZE bytes for the arena's
        // lifetime; the caller guarantees no `&mut` to it exists meanwhile.
        unsafe { std::slice::from_raw_parts(self.page_ptr(id), PAGE_SIZE) }
    }

    /// An exclusive view of a page.
    ///
    /// # Safety
    /// The caller follows rule 2 of the module docs for the lifetime of the slice.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn page_mut(&self, id: BufferId) -> &mut [u8] {
        // SAFETY: as for `page`; the caller guarantees it is the only accessor.
        unsafe { std::slice::from_raw_parts_mut(self.page_ptr(id), PAGE_SIZE) }
    }

    /// The 8 bytes of page `id` at `offset` (any alignment) as a
    /// little-endian `u64`, for an optimistic read (rule 4): the one or two
    /// aligned words that hold them, loaded with relaxed atomic loads and
    /// shifted together in registers (no copy through memory, whose narrow
    /// stores a wide reload would wait on). `None` (nothing read) if the
    /// range leaves the page.
    #[inline]
    pub fn load_u64_le(&self, id: BufferId, offset: usize) -> Option<u64> {
        if offset > PAGE_SIZE - 8 {
            return None;
        }
        let base = self.page_ptr(id);
        let aligned = offset & !7;
        let shift = (offset & 7) * 8;
        // SAFETY: `aligned` is a multiple of 8 at or below `offset`, and
        // `aligned + 8 <= PAGE_SIZE`, so the word lies inside the page,
        // inside the mapping, which lives as long as `self`; pages start at
        // multiples of PAGE_SIZE from the page-aligned base, so the address
        // is 8-aligned as `from_ptr` requires. The load may race a writer's
        // plain store (rule 4); the caller validates before using it.
        let low = u64::from_le(unsafe {
            AtomicU64::from_ptr(base.add(aligned).cast::<u64>()).load(Ordering::Relaxed)
        });
        if shift == 0 {
            return Some(low);
        }
        // SAFETY: as above for the next word: `offset` is not a multiple
        // of 8 and `offset + 8 <= PAGE_SIZE`, so `aligned + 16 <= PAGE_SIZE`.
        let high = u64::from_le(unsafe {
            AtomicU64::from_ptr(base.add(aligned + 8).cast::<u64>()).load(Ordering::Relaxed)
        });
        Some((low >> shift) | (high << (64 - shift)))
    }

    /// Copy `out.len()` bytes of page `id` from `offset` into `out` with
    /// relaxed atomic loads, for an optimistic read (rule 4): no slice of
    /// the page is made, so the bytes may change meanwhile and the caller
    /// validates the copy. Each load is the widest of 8, 4, 2 and 1 bytes
    /// that is aligned at its address and fits in what is left, so a run of
    /// aligned words costs one load per word. `false` (nothing read) if the
    /// range leaves the page.
    #[inline]
    pub fn load_bytes(&self, id: BufferId, offset: usize, out: &mut [u8]) -> bool {
        if offset > PAGE_SIZE || out.len() > PAGE_SIZE - offset {
            return false;
        }
        let base = self.page_ptr(id);
        let mut i = 0;
        while i < out.len() {
            let at = offset + i;
            let left = out.len() - i;
            // SAFETY: at..at + width lies inside the page (offset + out.len()
            // <= PAGE_SIZE, checked above, and each width is at most `left`),
            // so inside the mapping, which lives as long as `self`. The page
            // starts at a multiple of PAGE_SIZE from the mapping's page-aligned
            // base, so `at` aligned to a width makes the address aligned to it,
            // as `from_ptr` requires. The load may race a plain store of an
            // exclusive writer, or an atomic hint-bit / LSN store of another
            // width (rule 4); its value is used only after the caller's
            // version check says no such store happened, hint bits and the
            // LSN excepted as under a shared lock (rule 3).
            let width = unsafe {
                let p = base.add(at);
                if at.is_multiple_of(8) && left >= 8 {
                    let w = AtomicU64::from_ptr(p.cast::<u64>()).load(Ordering::Relaxed);
                    out[i..i + 8].copy_from_slice(&w.to_ne_bytes());
                    8
                } else if at.is_multiple_of(4) && left >= 4 {
                    let w = AtomicU32::from_ptr(p.cast::<u32>()).load(Ordering::Relaxed);
                    out[i..i + 4].copy_from_slice(&w.to_ne_bytes());
                    4
                } else if at.is_multiple_of(2) && left >= 2 {
                    let w = AtomicU16::from_ptr(p.cast::<u16>()).load(Ordering::Relaxed);
                    out[i..i + 2].copy_from_slice(&w.to_ne_bytes());
                    2
                } else {
                    out[i] = AtomicU8::from_ptr(p).load(Ordering::Relaxed);
                    1
                }
            };
            i += width;
        }
        true
    }

    /// Atomically OR `bits` into the 16-bit field at `offset` (rule 3). The
    /// caller holds a pin, a content lock and the header lock.
    #[inline]
    pub fn or_u16(&self, id: BufferId, offset: usize, bits: u16) -> bool {
        if !offset.is_multiple_of(2) || offset > PAGE_SIZE - 2 {
            return false;
        }
        // SAFETY: in bounds (checked above) and 2-aligned (pages are 8 KiB
        // aligned, offset is even); only accessed atomically or under the
        // content lock that excludes hint setters (exclusive, or an I/O in flight).
        let a = unsafe { AtomicU16::from_ptr(self.page_ptr(id).add(offset) as *mut u16) };
        a.fetch_or(bits.to_le(), Ordering::Relaxed);
        true
    }

    /// Read the page LSN (bytes 0..8, little-endian) atomically (rule 3).
    #[inline]
    pub fn lsn(&self, id: BufferId) -> u64 {
        // SAFETY: 8-aligned, in bounds; see `or_u16`.
        let a = unsafe { AtomicU64::from_ptr(self.page_ptr(id) as *mut u64) };
        u64::from_le(a.load(Ordering::Relaxed))
    }

    /// Store the page LSN atomically (rule 3).
    #[inline]
    pub fn set_lsn(&self, id: BufferId, lsn: u64) {
        // SAFETY: 8-aligned, in bounds; see `or_u16`.
        let a = unsafe { AtomicU64::from_ptr(self.page_ptr(id) as *mut u64) };
        a.store(lsn.to_le(), Ordering::Relaxed);
    }

    /// Store the page checksum field (bytes 8..12) atomically. The caller
    /// holds at least share-exclusive and has set `IO_IN_PROGRESS`, so nobody
    /// but readers under the shared lock can be looking, and they never read
    /// this field of a valid page.
    #[inline]
    pub fn set_checksum(&self, id: BufferId, sum: u32) {
        // SAFETY: 4-aligned (offset 8), in bounds; see `or_u16`.
        let a = unsafe { AtomicU32::from_ptr(self.page_ptr(id).add(8) as *mut u32) };
        a.store(sum.to_le(), Ordering::Relaxed);
    }
}

/// The field `field` (`"Rss:"`, `"AnonHugePages:"`) of `/proc/self/smaps`,
/// in bytes, summed over the mappings that overlap `range`; `None` if none
/// is listed or a figure cannot be read.
fn smaps_bytes(range: std::ops::Range<usize>, field: &str) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut in_region = false;
    let mut found = false;
    let mut total = 0u64;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let Ok(start) = usize::from_str_radix(start, 16)
            && let Ok(end) = usize::from_str_radix(end, 16)
            && !first.ends_with(':')
        {
            in_region = start < range.end && range.start < end;
            continue;
        }
        if in_region && let Some(rest) = line.strip_prefix(field) {
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            total += kb * 1024;
            found = true;
            in_region = false;
        }
    }
    found.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pre-faulted, the whole pool is resident at open; not, only what was
    /// touched is, and a page never written reads as zeros either way.
    #[test]
    fn memory_is_given_at_open_only_when_prefaulted() {
        let pages = 1024; // 8 MiB
        let len = (pages * PAGE_SIZE) as u64;
        for prefault in [true, false] {
            let a = Arena::placed(pages, false, prefault, None).unwrap();
            let rss = || a.smaps_bytes("Rss:").expect("smaps lists the pool");
            if prefault {
                assert!(
                    rss() >= len,
                    "pre-faulted pool resident: {} of {len}",
                    rss()
                );
            } else {
                assert!(
                    rss() < len / 8,
                    "untouched pool resident: {} of {len}",
                    rss()
                );
            }
            // SAFETY: single-threaded test, no other view exists.
            unsafe {
                assert!(a.page(700).iter().all(|&b| b == 0));
                a.page_mut(3)[100] = 5;
                assert_eq!(a.page(3)[100], 5);
            }
            assert!(rss() > 0, "the written page is resident");
        }
    }

    #[test]
    fn pages_are_disjoint_and_zeroed() {
        let a = Arena::new(4, false).unwrap();
        // SAFETY: single-threaded test, no other view exists.
        unsafe {
            a.page_mut(1)[0] = 7;
            a.page_mut(2)[PAGE_SIZE - 1] = 9;
            assert_eq!(a.page(1)[0], 7);
            assert_eq!(a.page(0)[PAGE_SIZE - 1], 0);
            assert_eq!(a.page(2)[PAGE_SIZE - 1], 9);
        }
    }

    #[test]
    fn load_bytes_copies_every_range_exactly_at_every_alignment() {
        let a = Arena::new(2, false).unwrap();
        // SAFETY: single-threaded test, no other view exists.
        let page = unsafe { a.page_mut(1) };
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i * 7 + i / 251) as u8;
        }
        // SAFETY: as above; the mutable view is no longer used.
        let page = unsafe { a.page(1) };
        let mut out = [0u8; 40];
        for offset in (0..64).chain(PAGE_SIZE - 48..=PAGE_SIZE) {
            for len in 0..=40 {
                let fits = offset + len <= PAGE_SIZE;
                out.fill(0xAA);
                assert_eq!(
                    a.load_bytes(1, offset, &mut out[..len]),
                    fits,
                    "{offset}+{len}"
                );
                if fits {
                    assert_eq!(&out[..len], &page[offset..offset + len], "{offset}+{len}");
                } else {
                    assert!(
                        out.iter().all(|&b| b == 0xAA),
                        "a refused range reads nothing"
                    );
                }
            }
        }
        assert!(!a.load_bytes(1, usize::MAX, &mut out[..1]), "no overflow");
    }

    #[test]
    fn load_u64_le_reads_the_8_bytes_at_every_offset() {
        let a = Arena::new(2, false).unwrap();
        // SAFETY: single-threaded test, no other view exists.
        let page = unsafe { a.page_mut(1) };
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i * 7 + i / 251) as u8;
        }
        // SAFETY: as above; the mutable view is no longer used.
        let page = unsafe { a.page(1) };
        for offset in (0..64).chain(PAGE_SIZE - 24..=PAGE_SIZE) {
            let want = page
                .get(offset..offset + 8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()));
            assert_eq!(a.load_u64_le(1, offset), want, "offset {offset}");
        }
        assert_eq!(a.load_u64_le(1, usize::MAX), None, "no overflow");
    }

    #[test]
    fn lsn_and_hint_fields_are_little_endian() {
        let a = Arena::new(1, false).unwrap();
        a.set_lsn(0, 0x0102_0304_0506_0708);
        assert_eq!(a.lsn(0), 0x0102_0304_0506_0708);
        assert!(a.or_u16(0, 100, 0x0100));
        assert!(a.or_u16(0, 100, 0x0800));
        assert!(!a.or_u16(0, 101, 1), "odd offset refused");
        assert!(!a.or_u16(0, PAGE_SIZE - 1, 1), "out of bounds refused");
        assert!(!a.or_u16(0, usize::MAX - 1, 1), "no overflow");
        // SAFETY: single-threaded test.
        let p = unsafe { a.page(0) };
        assert_eq!(
            u64::from_le_bytes(p[0..8].try_into().unwrap()),
            0x0102_0304_0506_0708
        );
        assert_eq!(u16::from_le_bytes([p[100], p[101]]), 0x0900);
    }

    #[test]
    fn pages_report_the_node_they_sit_on() {
        let a = Arena::new(64, false).unwrap();
        assert_eq!(*a.placement(), Placement::OneNode);
        let nodes = a.page_nodes();
        assert_eq!(nodes.len(), 64);
        if cfg!(target_os = "linux") {
            // Pre-touched, so every page has a node, and it is a real one.
            let real = crate::numa::topology::Topology::from_sysfs(std::path::Path::new(
                crate::numa::topology::SYSFS_NODE_ROOT,
            ));
            for n in nodes {
                let n = n.expect("a pre-touched page has a node");
                if let Some(t) = &real {
                    assert!(t.nodes.iter().any(|x| x.id == n), "node {n} of {t:?}");
                }
            }
        }
    }

    #[test]
    fn a_refused_plan_leaves_a_working_arena() {
        let t = crate::numa::topology::Topology::synthetic("numa:2 pu:1").unwrap();
        let spec = crate::numa::partition::PartitionSpec {
            count: Some(2),
            floor: None,
            balancing: false,
        };
        let m = crate::numa::partition::PartitionMap::build(8, &spec, &t).unwrap();
        let mut plan = PlacementPlan::compute(&m, &t, false, false).unwrap();
        // A node no machine has.
        plan.ranges[1].policy = crate::numa::Policy::Bind(999);
        let a = Arena::placed(8, false, true, Some(plan)).unwrap();
        match a.placement() {
            Placement::Refused(_, why) => assert!(why.contains("node 999"), "{why}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        // SAFETY: single-threaded test.
        unsafe {
            a.page_mut(7)[5] = 3;
            assert_eq!(a.page(7)[5], 3);
        }
    }

    #[test]
    fn huge_page_status_is_reported() {
        let a = Arena::new(1024, true).unwrap();
        assert_eq!(a.page_ptr(0) as usize % HUGE_PAGE, 0, "huge page aligned");
        let s = a.huge_pages();
        assert!(s.requested);
        assert_eq!(s.pool_bytes, 1024 * PAGE_SIZE as u64);
        if cfg!(target_os = "linux") {
            assert!(s.huge_bytes.is_some(), "smaps should list the mapping");
        }
    }
}
