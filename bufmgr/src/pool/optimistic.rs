//! Optimistic reads: a resident page read with no pin and no content lock,
//! validated by the buffer's version afterwards (the crate README's rule
//! 10; desc rule 4; arena rule 4), as LeanStore's and vmcache's optimistic
//! latches and Leis et al.'s optimistic lock coupling do.
//!
//! ```text
//!   read index -> buffer B holding the tag?   (no pin: a guess)
//!   v = B.version, even; B VALID, TAG_VALID, tag = ours     else decline
//!   a pin now would raise B's usage?                        then decline
//!   f(&OptimisticPage)   relaxed atomic loads (words where aligned), every range checked
//!   fence; B.version == v, still VALID with our tag?        else decline
//!   count the access and the hit; Some(f's result)
//! ```
//!
//! A declined read (`None`) writes nothing and counts nothing: the caller
//! takes the pinned path (`read_buffer` and a content lock), which also
//! reads a page that is not resident and records the touch a declined read
//! skipped.

use super::BufferPool;
use super::local::with_local;
use crate::desc::{BufferId, REFCOUNT_ONE};
use crate::stats::bump;
use crate::table::HashedTag;
use crate::tag::{BlockNumber, BufferTag, PAGE_SIZE, RelFork};

/// A page being read optimistically: byte copies out of pool memory that
/// may be changing (arena rule 4). Everything read through it is a guess
/// until [`BufferPool::read_optimistic`] has validated it; code that runs
/// inside the read must check every offset it takes from the page (the
/// accessors refuse a range outside the page rather than panic) and must
/// not act on what it read (follow a pointer into another page, hand out
/// a result) before the read returns.
#[derive(Debug)]
pub struct OptimisticPage<'a> {
    arena: &'a crate::arena::Arena,
    id: BufferId,
}

impl OptimisticPage<'_> {
    /// Copy `out.len()` bytes from `offset`; `None` if the range leaves the page.
    #[inline]
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Option<()> {
        self.arena.load_bytes(self.id, offset, out).then_some(())
    }

    /// `N` bytes from `offset`; `None` if the range leaves the page.
    #[inline]
    pub fn array<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        let mut a = [0u8; N];
        self.read(offset, &mut a)?;
        Some(a)
    }

    /// The little-endian `u16` at `offset`.
    #[inline]
    pub fn u16_le(&self, offset: usize) -> Option<u16> {
        self.array(offset).map(u16::from_le_bytes)
    }

    /// The little-endian `u32` at `offset`.
    #[inline]
    pub fn u32_le(&self, offset: usize) -> Option<u32> {
        self.array(offset).map(u32::from_le_bytes)
    }

    /// The little-endian `u64` of the 8 bytes at `offset`, any alignment
    /// (two word loads at most, combined in registers).
    #[inline]
    pub fn u64_le(&self, offset: usize) -> Option<u64> {
        self.arena.load_u64_le(self.id, offset)
    }

    /// The page's size.
    pub const fn len(&self) -> usize {
        PAGE_SIZE
    }

    /// Never: a page has `PAGE_SIZE` bytes.
    pub const fn is_empty(&self) -> bool {
        false
    }
}

impl BufferPool {
    /// Read block `block` of `rf` optimistically (rule 10): if the page is
    /// resident and valid, run `f` over it without pinning it or taking its
    /// content lock, and return `f`'s result if the page did not change
    /// meanwhile (no exclusive lock was taken on it, the buffer was not
    /// evicted or retagged). `None` (nothing counted, nothing written) when
    /// the page is not in the pool, is being changed, changed during the
    /// read, or would have its usage raised by a pin (the caller's pinned
    /// read then records that touch), and always when the pool was opened
    /// with optimistic reads off (`PoolConfig::optimistic_reads`): the
    /// caller reads it the pinned way.
    ///
    /// A validated result is what `f` would have returned on the page under
    /// a shared content lock at one moment between the start and the end of
    /// the read. Hint bits and the LSN are the exception, as under a shared
    /// lock: they may be set during the read (arena rule 3).
    #[inline]
    pub fn read_optimistic<T>(
        &self,
        rf: RelFork,
        block: BlockNumber,
        f: impl FnOnce(&OptimisticPage<'_>) -> T,
    ) -> Option<T> {
        let shared = &*self.shared;
        if !shared.config.optimistic_reads {
            return None;
        }
        let tag = BufferTag::new(rf, block);
        let ht = HashedTag::new(tag);
        let (id, version) = shared.table.find_unlocked(&ht, |id| {
            let d = shared.descs.get(id as usize)?;
            let (version, state) = d.optimistic_begin(tag)?;
            // A pin would raise the usage: decline, so the pinned path
            // keeps the evictor's view of a hot page true (rule 10).
            if shared.evictor.on_pin(state, false) != state + REFCOUNT_ONE {
                return None;
            }
            Some((id, version))
        })?;
        let out = f(&OptimisticPage {
            arena: &shared.arena,
            id,
        });
        let d = &shared.descs[id as usize];
        if !d.optimistic_validate(version, tag) {
            return None;
        }
        with_local(&self.shared, |local| {
            shared.mrc_filter(local, ht.hash, tag);
            let c = &local.stats.parts[d.partition()];
            bump(&c.accesses, 1);
            bump(&c.hits, 1);
            bump(&c.optimistic_hits, 1);
            let r = local.stats.rels.get(tag.rel);
            bump(&r.accesses, 1);
            bump(&r.hits, 1);
            if local.trace.is_some() {
                super::read::trace_access(local, tag, id, true, None);
            }
        });
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use super::*;
    use crate::config::PoolConfig;
    use crate::io::FileStorage;
    use crate::tag::RelId;

    const REL: RelFork = RelFork::main(RelId(7));

    fn pool(buffers: usize) -> (tempfile::TempDir, BufferPool) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = Arc::new(FileStorage::open(dir.path()).expect("storage"));
        let pool = BufferPool::new(PoolConfig::new(buffers), storage).expect("pool");
        (dir, pool)
    }

    /// Extend `rf` by `n` pages, page `b` filled with the byte `b as u8`.
    fn fill(pool: &BufferPool, n: u32) {
        pool.create_fork(REL).expect("fork");
        for b in 0..n {
            let mut w = pool.extend(REL, None).expect("extend");
            w[crate::page::OWNER_HEADER_OFFSET..].fill(b as u8);
            w.mark_dirty();
        }
    }

    fn first_byte(pool: &BufferPool, block: BlockNumber) -> Option<u8> {
        pool.read_optimistic(REL, block, |p| p.array::<1>(100).map(|a| a[0]))
            .flatten()
    }

    #[test]
    fn an_optimistic_read_of_a_resident_page_sees_its_bytes_and_pins_nothing() {
        let (_dir, pool) = pool(16);
        fill(&pool, 3);
        // The pins of `extend` raised the usage; read each page once the
        // pinned way so a pin would not raise it further (clock: up to 5).
        for _ in 0..5 {
            for b in 0..3 {
                drop(pool.read_buffer(REL, b, None).expect("read"));
            }
        }
        for b in 0..3 {
            assert_eq!(first_byte(&pool, b), Some(b as u8));
        }
        assert!(pool.buffercache().iter().all(|r| r.pins == 0));
        // Ranges outside the page are refused, not read.
        let r = pool.read_optimistic(REL, 1, |p| {
            (
                p.read(PAGE_SIZE - 1, &mut [0u8; 2]),
                p.u32_le(PAGE_SIZE - 4),
                p.u16_le(usize::MAX),
            )
        });
        assert_eq!(r, Some((None, Some(0x0101_0101), None)));
    }

    #[test]
    fn an_optimistic_read_declines_a_page_that_is_not_resident_or_is_locked_exclusively() {
        let (_dir, pool) = pool(16);
        fill(&pool, 2);
        for _ in 0..5 {
            drop(pool.read_buffer(REL, 0, None).expect("read"));
        }
        assert_eq!(first_byte(&pool, 5), None, "block 5 does not exist");
        let w = pool
            .read_buffer(REL, 0, None)
            .expect("read")
            .lock_exclusive();
        assert_eq!(first_byte(&pool, 0), None, "a write is open");
        drop(w);
        assert_eq!(first_byte(&pool, 0), Some(0));
        pool.evict_relation(REL).expect("evict");
        assert_eq!(first_byte(&pool, 0), None, "evicted");
    }

    #[test]
    fn an_optimistic_read_declines_when_a_pin_would_raise_the_usage() {
        let (_dir, pool) = pool(16);
        fill(&pool, 1);
        // Fresh from extend: usage below the clock's ceiling.
        assert_eq!(first_byte(&pool, 0), None);
        for _ in 0..5 {
            drop(pool.read_buffer(REL, 0, None).expect("read"));
        }
        assert_eq!(first_byte(&pool, 0), Some(0));
    }

    #[test]
    fn a_pool_opened_with_optimistic_reads_off_declines_every_optimistic_read() {
        let (_on_dir, on) = pool(16);
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = Arc::new(FileStorage::open(dir.path()).expect("storage"));
        let off =
            BufferPool::new(PoolConfig::new(16).optimistic_reads(false), storage).expect("pool");
        for p in [&on, &off] {
            fill(p, 1);
            for _ in 0..5 {
                drop(p.read_buffer(REL, 0, None).expect("read"));
            }
        }
        assert_eq!(first_byte(&on, 0), Some(0), "on: the page is read");
        let mut ran = false;
        assert_eq!(off.read_optimistic(REL, 0, |_| ran = true), None);
        assert!(!ran, "off: the closure never runs");
        assert_eq!(off.stats().totals().optimistic_hits, 0);
    }

    #[test]
    fn a_write_during_an_optimistic_read_makes_it_decline() {
        let (_dir, pool) = pool(16);
        fill(&pool, 1);
        for _ in 0..5 {
            drop(pool.read_buffer(REL, 0, None).expect("read"));
        }
        let r = pool.read_optimistic(REL, 0, |p| {
            let before = p.array::<1>(100);
            let mut w = pool
                .read_buffer(REL, 0, None)
                .expect("read")
                .lock_exclusive();
            w[100] = 9;
            drop(w);
            before
        });
        assert_eq!(r, None, "the version moved during the read");
        // A write that only took the lock and released it also moves it.
        let r = pool.read_optimistic(REL, 0, |_| {
            drop(
                pool.read_buffer(REL, 0, None)
                    .expect("read")
                    .lock_exclusive(),
            );
        });
        assert_eq!(r, None);
        assert_eq!(first_byte(&pool, 0), Some(9));
    }

    /// Sets the flag when dropped.
    struct StopOnDrop<'a>(&'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// Writers keep every page's bytes equal (all `g`, then all `g + 1`,
    /// written under the exclusive lock one byte at a time) while a tiny
    /// pool evicts and re-reads the pages; readers read a page's bytes
    /// optimistically: a validated read must see one value everywhere,
    /// and the value of that block's generation (block in the high byte).
    #[test]
    fn validated_optimistic_reads_never_see_a_torn_or_foreign_page() {
        const PAGES: u32 = 24;
        let (_dir, pool) = pool(8);
        pool.create_fork(REL).expect("fork");
        for b in 0..PAGES {
            let mut w = pool.extend(REL, None).expect("extend");
            w[crate::page::OWNER_HEADER_OFFSET..].fill(b as u8);
            w.mark_dirty();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let validated = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for t in 0..2u32 {
                let (pool, stop) = (&pool, &stop);
                s.spawn(move || {
                    let mut i = t;
                    while !stop.load(Ordering::Relaxed) {
                        let b = i % PAGES;
                        i = i.wrapping_mul(31).wrapping_add(7);
                        let mut w = pool
                            .read_buffer(REL, b, None)
                            .expect("read")
                            .lock_exclusive();
                        // Keep the low 5 bits the block, bump the rest.
                        let g = w[100].wrapping_add(32);
                        for x in &mut w[crate::page::OWNER_HEADER_OFFSET..] {
                            *x = g;
                        }
                        w.mark_dirty();
                    }
                });
            }
            for t in 0..2u32 {
                let (pool, stop, validated) = (&pool, &stop, &validated);
                s.spawn(move || {
                    // The writers stop when a reader ends, also by a panic.
                    let _stop = StopOnDrop(stop);
                    let mut buf = vec![0u8; PAGE_SIZE - 12];
                    for n in 0..3_000u32 {
                        let b = (n * 7 + t) % PAGES;
                        let got = pool.read_optimistic(REL, b, |p| p.read(12, &mut buf));
                        match got {
                            Some(Some(())) => {
                                assert!(
                                    buf.iter().all(|&x| x == buf[0]),
                                    "block {b}: a validated read saw a torn page"
                                );
                                assert_eq!(
                                    u32::from(buf[0] % 32),
                                    b,
                                    "block {b}: another page's bytes"
                                );
                                validated.fetch_add(1, Ordering::Relaxed);
                            }
                            Some(None) => panic!("a whole-page range was refused"),
                            None => {
                                // Declined: read it pinned (and raise its usage).
                                let r = pool.read_buffer(REL, b, None).expect("read").lock_shared();
                                assert_eq!(u32::from(r[100] % 32), b);
                            }
                        }
                    }
                });
            }
        });
        let validated = validated.load(Ordering::Relaxed);
        assert!(validated > 0, "no optimistic read was ever validated");
        assert!(pool.stats().totals().optimistic_hits >= validated);
    }
}
