//! The read path: `ReadBuffer` and its variants, the optimistic hit, a
//! miss, and the start and end of a read's I/O.
//!
//! # A miss, step by step (`BufferAlloc` + `GetVictimBuffer`)
//! 1. Look the tag up in the mapping table's lock-free read index; pin the
//!    buffer it names (the evictor's pin rule) and validate it: pinned, it
//!    must be `TAG_VALID` with our tag (`PoolShared::pin_if_tagged`). If
//!    the index has nothing or the candidate fails, look up under the mapping
//!    partition's shared lock and pin before releasing it; but not when the
//!    partition's index holds every entry of its map (`BufTable::all_indexed`):
//!    the page is then all but surely not resident, and step 5's exclusive
//!    lookup decides. On a hit, done (waiting for the read if it is still
//!    in progress).
//! 2. Otherwise get a victim without holding any mapping lock: from the ring if
//!    the caller has one and its current slot is reusable, else from the clock
//!    sweep of the partition chosen for this thread. The victim comes back
//!    pinned by us alone.
//! 3. If the victim is dirty: take its content lock share-exclusive *without
//!    waiting* (waiting could deadlock against a thread that pinned it and
//!    waits for us), ask the ring whether to reject it, else write it.
//! 4. Invalidate the victim's old identity: its old mapping partition lock
//!    exclusive, then its header lock; give up and retry from 2 if someone
//!    else pinned or dirtied it meanwhile.
//! 5. Insert the new tag under the new partition's exclusive lock. If another
//!    thread inserted it first, unpin our victim (it is clean and tagless, the
//!    sweep finds it at once) and pin theirs, as a hit.
//! 6. Set the tag with `TAG_VALID | IO_IN_PROGRESS` in one header-lock hold, so
//!    a thread that finds the tag before the read completes waits for it
//!    instead of reading the block a second time. Read, verify the checksum,
//!    set `VALID`, wake the waiters.
//!
//! `read_buffer` does all six steps and reads at once. `start_buffer` (the
//! start step of a read stream, see `pool::stream`) stops after step 6's
//! tagging: the caller owns the read and issues it, combined with others.

use super::{BufferPool, PoolShared};

use std::sync::atomic::Ordering;

use super::guard::{PageWrite, PinnedBuffer};
use super::local::{Local, with_local};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::page;
use crate::replacement::ring::Ring;
use crate::stats::bump;
use crate::table::HashedTag;
use crate::tag::{BlockNumber, BufferTag, RelFork};

/// Record an access in the thread's trace (the caller has checked that
/// there is one): out of line, so the hit path carries only the test.
#[cold]
#[inline(never)]
pub(super) fn trace_access(
    local: &mut Local,
    tag: BufferTag,
    id: BufferId,
    hit: bool,
    ring: Option<&Ring>,
) {
    if let Some(t) = local.trace.as_mut() {
        t.access(tag, id, hit, ring.map(Ring::kind));
    }
}

impl PoolShared {
    /// The miss-ratio sampler's filter, on every counted access: a multiply
    /// and a compare with the thread's copy of the threshold (0 when the
    /// sampler is off); only a sampled access goes further.
    #[inline(always)]
    pub(crate) fn mrc_filter(&self, local: &mut Local, tag_hash: u64, tag: BufferTag) {
        let h = crate::mrc::sample_hash(tag_hash);
        if h < local.mrc_threshold {
            self.mrc_note(local, tag, h);
        }
    }

    /// A sampled access: into the thread's batch, handed over when full.
    #[cold]
    #[inline(never)]
    fn mrc_note(&self, local: &mut Local, tag: BufferTag, h: u64) {
        local.mrc_batch.push((tag, h));
        if local.mrc_batch.len() >= crate::mrc::MRC_BATCH {
            self.mrc_flush(local);
        }
    }

    /// Hand the thread's sampled accesses to the sampler, and take its
    /// threshold now (lower once the sample has been full).
    pub(crate) fn mrc_flush(&self, local: &mut Local) {
        let Some(sampler) = &self.mrc else {
            local.mrc_batch.clear();
            return;
        };
        let mut sampler = sampler.lock();
        for (tag, h) in local.mrc_batch.drain(..) {
            sampler.access(tag, h);
        }
        let t = sampler.threshold();
        self.mrc_threshold.store(t, Ordering::Relaxed);
        local.mrc_threshold = t;
    }
}

/// How a miss fills the buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadMode {
    /// Read the block from storage and verify its checksum.
    Normal,
    /// Zero the buffer instead of reading (PostgreSQL's `RBM_ZERO_AND_LOCK`).
    ZeroNoRead,
    /// Read without failing on a checksum mismatch (counted all the same).
    NoVerify,
}

/// What starting the read of one block found ([`PoolShared::start_buffer`]).
/// The buffer is pinned by the caller in every case.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Started {
    /// The page is valid.
    Hit(BufferId),
    /// Tagged but not valid: another thread's read is in flight, or a read
    /// failed. [`hit_not_valid`](PoolShared::hit_not_valid) waits or reads.
    NotValid(BufferId),
    /// A victim tagged `TAG_VALID | IO_IN_PROGRESS` by us: ours to read.
    Miss(BufferId),
}

impl Started {
    pub(crate) fn id(self) -> BufferId {
        match self {
            Started::Hit(id) | Started::NotValid(id) | Started::Miss(id) => id,
        }
    }
}

/// Outcome of starting I/O on a buffer.
pub(super) enum StartIo {
    /// Someone else did it (the page is valid / no longer dirty).
    AlreadyDone,
    /// We own the I/O now (`IO_IN_PROGRESS` is set by us).
    Ready,
}

impl BufferPool {
    /// Pin block `block` of `rf`, reading it on a miss. With a ring, pins
    /// never raise usage past the first step and victims come from the ring.
    ///
    /// The hit is inline and takes the thread's state only to count it:
    /// the lookup and the pin need none. Anything else (a page not valid
    /// yet, a miss) is out of line.
    #[inline]
    pub fn read_buffer(
        &self,
        rf: RelFork,
        block: BlockNumber,
        ring: Option<&mut Ring>,
    ) -> Result<PinnedBuffer<'_>> {
        let s = &self.shared;
        let ht = HashedTag::new(BufferTag::new(rf, block));
        let id = match s.find_pinned(&ht, ring.as_deref()) {
            Some((id, state)) if state & VALID != 0 => {
                with_local(s, |local| {
                    s.count_found(local, &ht, id, state, ring.as_deref())
                });
                id
            }
            found => self.read_buffer_slow(ht, found, ring)?,
        };
        Ok(PinnedBuffer::new(s, id))
    }

    /// [`read_buffer`](Self::read_buffer) (no ring) that also asks the CPU
    /// for the cache lines holding bytes `lines` of the page (arena rule 5)
    /// as soon as the lookup names a candidate buffer, before its
    /// descriptor is read and pinned: the page's lines then arrive while
    /// the pin's miss on the descriptor is outstanding, instead of one miss
    /// after another once the caller reads the page. For a reader that
    /// knows which bytes it is about to read (a heap fetch: the page header
    /// and the tuple's line pointer). The result, the pin and the counting
    /// are `read_buffer`'s; offsets past the page ask for nothing, and a
    /// miss prefetches nothing (the read fills the page anyway).
    #[inline]
    pub fn read_buffer_prefetching(
        &self,
        rf: RelFork,
        block: BlockNumber,
        lines: &[usize],
    ) -> Result<PinnedBuffer<'_>> {
        let s = &self.shared;
        let ht = HashedTag::new(BufferTag::new(rf, block));
        let found = s.table.find_unlocked(&ht, |id| {
            for &off in lines {
                s.arena.prefetch(id, off);
            }
            s.pin_if_tagged(id, ht.tag, false)
        });
        let id = match found {
            Some((id, state)) if state & VALID != 0 => {
                with_local(s, |local| s.count_found(local, &ht, id, state, None));
                id
            }
            found => self.read_buffer_slow(ht, found, None)?,
        };
        Ok(PinnedBuffer::new(s, id))
    }

    /// [`read_buffer`](Self::read_buffer) past the valid hit: `found` is the
    /// buffer the lookup pinned on a page that is not valid yet, or `None`
    /// (nothing pinned: the locked lookup, then the miss).
    #[cold]
    #[inline(never)]
    fn read_buffer_slow(
        &self,
        ht: HashedTag,
        found: Option<(BufferId, u64)>,
        ring: Option<&mut Ring>,
    ) -> Result<BufferId> {
        let s = &self.shared;
        with_local(s, |local| match found {
            Some((id, state)) => {
                s.count_found(local, &ht, id, state, ring.as_deref());
                s.hit_not_valid(local, id, ht.tag, ReadMode::Normal)
            }
            None => s.read_buffer_locked(local, ht, ring, ReadMode::Normal),
        })
    }

    /// Block `block` of `rf`, exclusively locked, *without reading it* on a
    /// miss: the buffer is zeroed instead (PostgreSQL's `RBM_ZERO_AND_LOCK`).
    /// For redo of a record that rewrites the whole page (a full-page image,
    /// or a record that initialises the page): the copy on disk may be torn
    /// and must not be read. If the page is already in the pool it is
    /// returned as it is. The block must exist in the file (extend first).
    pub fn read_buffer_zeroed(&self, rf: RelFork, block: BlockNumber) -> Result<PageWrite<'_>> {
        let nblocks = self.shared.storage.nblocks(rf)?;
        if block >= nblocks {
            return Err(Error::BlockOutOfRange {
                relfork: rf,
                block,
                nblocks,
                path: self.shared.storage.path(rf),
            });
        }
        let tag = BufferTag::new(rf, block);
        let id = with_local(&self.shared, |local| {
            self.shared
                .read_buffer(local, tag, None, ReadMode::ZeroNoRead)
        })?;
        Ok(PinnedBuffer::new(&self.shared, id).lock_exclusive())
    }

    /// Pin block `block` of `rf` like [`read_buffer`](Self::read_buffer),
    /// but accept a page whose checksum does not match (the mismatch is still
    /// counted in the statistics). For redo of pages that replay makes whole
    /// again without a full-page image: the commit log, whose status bits are
    /// only ever set once and whose every change since the redo point is in
    /// the WAL, so a torn copy (half old, half new) is repaired by replaying
    /// onto it. Its checksum is recomputed when the page is next written.
    pub fn read_buffer_unverified(
        &self,
        rf: RelFork,
        block: BlockNumber,
    ) -> Result<PinnedBuffer<'_>> {
        let tag = BufferTag::new(rf, block);
        let id = with_local(&self.shared, |local| {
            self.shared
                .read_buffer(local, tag, None, ReadMode::NoVerify)
        })?;
        Ok(PinnedBuffer::new(&self.shared, id))
    }

    /// The page a WAL record is about to be replayed on, exclusively locked
    /// (PostgreSQL's `XLogReadBufferForRedo`): the fork is created and the
    /// relation extended with zero pages up to `block` if its file is shorter
    /// (it lost writes, or replay starts from empty files). With
    /// `rewrites_whole_page` (a full-page image, or a record that
    /// initialises the page) the copy on disk, which may be torn, is not
    /// read: see [`read_buffer_zeroed`](Self::read_buffer_zeroed).
    pub fn read_buffer_for_redo(
        &self,
        rf: RelFork,
        block: BlockNumber,
        rewrites_whole_page: bool,
    ) -> Result<PageWrite<'_>> {
        self.create_fork(rf)?;
        let mut nblocks = self.nblocks(rf)?;
        while nblocks <= block {
            let page = self.extend(rf, None)?;
            if page.block() == block {
                return Ok(page);
            }
            nblocks = page.block() + 1;
        }
        if rewrites_whole_page {
            self.read_buffer_zeroed(rf, block)
        } else {
            Ok(self.read_buffer(rf, block, None)?.lock_exclusive())
        }
    }
}

impl PoolShared {
    /// The optimistic pin of the hit path: pin buffer `id` (the evictor's pin
    /// rule) if, pinned, it is the buffer of `tag` in the mapping table.
    /// Returns `(id, state after the pin)`, or `None` with nothing pinned.
    ///
    /// Why a pin validated afterwards is as good as a pin under the mapping
    /// lock (desc rule 3): the CAS pins only a state with `TAG_VALID`, and
    /// once our pin is in, nobody can clear `TAG_VALID` or change the tag —
    /// every path that does (`invalidate_victim`, `forget_if_never_valid`,
    /// `invalidate_where`) checks under the header lock that no pin but its
    /// own is held, and a pin CAS never succeeds while the header lock is
    /// held. So a tag read *after* the pin is stable, and `TAG_VALID` with
    /// the wanted tag means the map holds `tag -> id` (both change together
    /// under the partition lock). Since only `TAG_VALID` states are pinned,
    /// a tagless victim that someone else holds is never pinned here.
    ///
    /// The tag is also read before pinning, so a stale index entry (the
    /// buffer holds another page now) costs two loads and no write. A failed
    /// validation after the pin (the buffer was retagged between that read
    /// and the CAS) unpins; the usage bump its pin gave the buffer stays, as
    /// if the new page had been touched once: harmless to correctness and
    /// confined to that race. Nothing is counted in the statistics here; the
    /// caller counts the access once it has a buffer.
    #[inline]
    pub(super) fn pin_if_tagged(
        &self,
        id: BufferId,
        tag: BufferTag,
        ring: bool,
    ) -> Option<(BufferId, u64)> {
        let d = self.descs.get(id as usize)?;
        if !d.has_tag(tag) {
            return None;
        }
        let mut s = d.load();
        let pinned = loop {
            if s & TAG_VALID == 0 || refcount(s) == REFCOUNT_MASK {
                return None;
            }
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            let new = self.evictor.on_pin(s, ring);
            match d
                .state
                .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => break new,
                Err(actual) => s = actual,
            }
        };
        // Pinned with TAG_VALID: the tag cannot change now; is it ours?
        if !d.has_tag(tag) {
            d.unpin();
            return None;
        }
        Some((id, pinned))
    }

    /// Step 1's optimistic half: the read index without a lock, validated
    /// after pinning (table rule 1). Returns the pinned buffer and the state
    /// its pin saw, or `None` with nothing pinned. A ring of another pool
    /// finds nothing here; the locked lookup refuses it before anything is
    /// pinned.
    #[inline(always)]
    pub(super) fn find_pinned(
        &self,
        ht: &HashedTag,
        ring: Option<&Ring>,
    ) -> Option<(BufferId, u64)> {
        if ring.is_some_and(|r| r.pool_id() != self.id) {
            return None;
        }
        let use_ring = ring.is_some();
        self.table
            .find_unlocked(ht, |id| self.pin_if_tagged(id, ht.tag, use_ring))
    }

    /// Count an access that [`find_pinned`](Self::find_pinned) found: the
    /// miss-ratio sampler's filter, the partition's and the relation's
    /// access counters and, for a valid page, their hit counters (a page
    /// not valid yet has its hit counted, or not, by
    /// [`hit_not_valid`](Self::hit_not_valid)), and the trace. Inlined into
    /// each caller: as a call of its own it cost the hit path several ns.
    #[inline(always)]
    pub(super) fn count_found(
        &self,
        local: &mut Local,
        ht: &HashedTag,
        id: BufferId,
        state: u64,
        ring: Option<&Ring>,
    ) {
        self.mrc_filter(local, ht.hash, ht.tag);
        let c = &local.stats.parts[self.desc(id).partition()];
        let r = local.stats.rels.get(ht.tag.rel);
        bump(&c.accesses, 1);
        bump(&r.accesses, 1);
        let valid = state & VALID != 0;
        if valid {
            bump(&c.hits, 1);
            bump(&r.hits, 1);
        }
        if local.trace.is_some() {
            trace_access(local, ht.tag, id, valid, ring);
        }
    }

    /// `ReadBuffer` with the thread's state in hand (streams, and the
    /// zeroing and unverified reads): the hit inline, the rest out of line.
    #[inline]
    pub(super) fn read_buffer(
        &self,
        local: &mut Local,
        tag: BufferTag,
        ring: Option<&mut Ring>,
        mode: ReadMode,
    ) -> Result<BufferId> {
        let ht = HashedTag::new(tag);
        if let Some((id, state)) = self.find_pinned(&ht, ring.as_deref()) {
            self.count_found(local, &ht, id, state, ring.as_deref());
            if state & VALID != 0 {
                return Ok(id);
            }
            return self.hit_not_valid(local, id, tag, mode);
        }
        self.read_buffer_locked(local, ht, ring, mode)
    }

    /// Pin the buffer of `tag` if it is resident and valid, counting
    /// nothing: for a page the caller already counted (a stream's block
    /// read ahead and unpinned by `release_ahead`). `None` (nothing pinned)
    /// if it is not there, or not valid.
    pub(crate) fn repin_valid(&self, tag: BufferTag, ring: bool) -> Option<BufferId> {
        let ht = HashedTag::new(tag);
        let (id, state) = self
            .table
            .find_unlocked(&ht, |id| self.pin_if_tagged(id, tag, ring))
            .or_else(|| {
                let map = self.table.read(ht.partition());
                let &id = map.get(&ht)?;
                self.pin(id, ring).map(|s| (id, s))
            })?;
        if state & VALID == 0 {
            self.desc(id).unpin();
            return None;
        }
        Some(id)
    }

    /// [`repin_valid`](Self::repin_valid) for a page last seen in buffer
    /// `id`: pinned there without a lookup if the buffer still holds it
    /// (`pin_if_tagged`'s validation), else looked up.
    #[inline]
    pub(crate) fn repin_valid_at(
        &self,
        id: BufferId,
        tag: BufferTag,
        ring: bool,
    ) -> Option<BufferId> {
        match self.pin_if_tagged(id, tag, ring) {
            Some((id, state)) if state & VALID != 0 => Some(id),
            Some((id, _)) => {
                // Retagged to this page and being read again: the caller's
                // read waits for that read.
                self.desc(id).unpin();
                None
            }
            None => self.repin_valid(tag, ring),
        }
    }

    /// A hit on a page that is not valid: being read by someone else, or
    /// their read failed. Wait, or retry the read. The access is counted.
    #[cold]
    pub(crate) fn hit_not_valid(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
    ) -> Result<BufferId> {
        match self.finish_read(local, id, tag, mode) {
            Ok(read_by_us) => {
                if !read_by_us {
                    bump(&local.stats.parts[self.desc(id).partition()].hits, 1);
                    bump(&local.stats.rels.get(tag.rel).hits, 1);
                }
                Ok(id)
            }
            Err(e) => {
                self.release_failed(id);
                Err(e)
            }
        }
    }

    /// The lookup under the mapping lock, then the miss (steps 1-6).
    #[inline(never)]
    pub(super) fn read_buffer_locked(
        &self,
        local: &mut Local,
        ht: HashedTag,
        ring: Option<&mut Ring>,
        mode: ReadMode,
    ) -> Result<BufferId> {
        match self.start_locked(local, ht, ring)? {
            Started::Hit(id) => Ok(id),
            Started::NotValid(id) => self.hit_not_valid(local, id, ht.tag, mode),
            Started::Miss(victim) => {
                if let Err(e) = self.do_read(local, victim, ht.tag, mode) {
                    self.release_failed(victim);
                    return Err(e);
                }
                Ok(victim)
            }
        }
    }

    /// Release a buffer whose read failed (its I/O is over, with `IO_ERROR`).
    /// Leave no tag-valid, never-valid entry behind (it would stand in the
    /// way of extending the relation to this block). If others are waiting
    /// on it they retry the read themselves.
    pub(super) fn release_failed(&self, id: BufferId) {
        self.invalidate_victim(id, false);
        self.desc(id).unpin();
    }

    /// Steps 1-6 of a read without the read itself (the first half of
    /// PostgreSQL 17's `StartReadBuffers` for one block): the optimistic
    /// lookup, then [`start_locked`](Self::start_locked). Never waits for
    /// I/O (a victim's write is not a wait on another reader), so a thread
    /// may start several blocks before reading any of them.
    pub(crate) fn start_buffer(
        &self,
        local: &mut Local,
        tag: BufferTag,
        ring: Option<&mut Ring>,
    ) -> Result<Started> {
        let ht = HashedTag::new(tag);
        if let Some((id, state)) = self.find_pinned(&ht, ring.as_deref()) {
            self.count_found(local, &ht, id, state, ring.as_deref());
            if state & VALID != 0 {
                return Ok(Started::Hit(id));
            }
            return Ok(Started::NotValid(id));
        }
        self.start_locked(local, ht, ring)
    }

    /// The lookup under the mapping lock, then steps 2-6 of a miss, stopping
    /// before the read: a [`Started::Miss`] buffer is tagged with
    /// `TAG_VALID | IO_IN_PROGRESS` owned by the caller, who must read it
    /// (or end its I/O with `IO_ERROR`) before waiting for anything else.
    /// The access is counted (and the hit, for a valid page).
    pub(super) fn start_locked(
        &self,
        local: &mut Local,
        ht: HashedTag,
        ring: Option<&mut Ring>,
    ) -> Result<Started> {
        if let Some(r) = ring.as_deref()
            && r.pool_id() != self.id
        {
            return Err(Error::InvalidConfig(
                "a ring was used with a pool it does not belong to".into(),
            ));
        }
        let tag = ht.tag;
        let use_ring = ring.is_some();
        let ring_kind = ring.as_deref().map(Ring::kind);
        // 1. The index had nothing (or only stale candidates): the map,
        // unless the partition's index holds every entry of it (table,
        // "Whether the index holds everything"): then the page is all but
        // surely not resident, and step 5 looks again under the exclusive
        // lock before inserting, so a shared lookup now would only repeat
        // the probe at the price of a lock round trip.
        if !self.table.all_indexed(ht.partition()) {
            let hit = {
                let map = self.table.read(ht.partition());
                map.get(&ht).map(|&id| (id, self.pin(id, use_ring)))
            };
            if let Some((id, state)) = hit {
                let state = state.ok_or_else(|| Self::too_many_pins(tag))?;
                return Ok(self.count_hit(local, id, state, &ht, ring_kind));
            }
        }

        // 2-4. A clean, tagless victim, pinned by us.
        let victim = self.get_victim(local, ring)?;

        // 5. Insert the new identity.
        let mut map = self.table.write(ht.partition());
        if let Some(&existing) = map.get(&ht) {
            // Somebody else read it meanwhile: give our victim back, use theirs.
            self.desc(victim).unpin();
            let state = self
                .pin(existing, use_ring)
                .ok_or_else(|| Self::too_many_pins(tag))?;
            drop(map);
            return Ok(self.count_hit(local, existing, state, &ht, ring_kind));
        }
        map.insert(ht, victim);
        // 6. Tag it, with the read already marked in progress.
        let d = self.desc(victim);
        let s = d.lock_header();
        // Ours alone: the optimistic pin of a hit (`pin_if_tagged`) pins only
        // TAG_VALID states, and this victim has been tagless since step 4.
        debug_assert_eq!(refcount(s), 1);
        debug_assert_eq!(s & (TAG_VALID | VALID | DIRTY | IO_IN_PROGRESS), 0);
        d.set_tag(Some(tag));
        let perm = if self.is_permanent(tag.rel) {
            PERMANENT
        } else {
            0
        };
        let admit = self.admit(&mut map, &ht, s);
        d.unlock_header(
            TAG_VALID | IO_IN_PROGRESS | perm | admit,
            USAGE_MASK | FLAG_MASK & !(TAG_VALID | IO_IN_PROGRESS | PERMANENT),
        );
        self.admitted(victim, s, admit);
        drop(map);
        self.mrc_filter(local, ht.hash, tag);
        let c = &local.stats.parts[self.desc(victim).partition()];
        bump(&c.accesses, 1);
        bump(&local.stats.rels.get(tag.rel).accesses, 1);
        if let Some(t) = local.trace.as_mut() {
            t.access(tag, victim, false, ring_kind);
        }
        Ok(Started::Miss(victim))
    }

    /// Count the access to a buffer found pinned (and the hit if it is
    /// valid); which kind of start it is. `ht` carries the tag's hash the
    /// lookup computed, reused by the sampler's filter.
    fn count_hit(
        &self,
        local: &mut Local,
        id: BufferId,
        state: u64,
        ht: &HashedTag,
        ring: Option<crate::replacement::ring::RingKind>,
    ) -> Started {
        let tag = ht.tag;
        self.mrc_filter(local, ht.hash, tag);
        let c = &local.stats.parts[self.desc(id).partition()];
        let r = local.stats.rels.get(tag.rel);
        bump(&c.accesses, 1);
        bump(&r.accesses, 1);
        if let Some(t) = local.trace.as_mut() {
            t.access(tag, id, state & VALID != 0, ring);
        }
        if state & VALID != 0 {
            bump(&c.hits, 1);
            bump(&r.hits, 1);
            Started::Hit(id)
        } else {
            Started::NotValid(id)
        }
    }

    /// Wait for another thread's read of `id`, or do it ourselves if there is
    /// none and the page is not valid. Returns whether we read it.
    pub(super) fn finish_read(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
    ) -> Result<bool> {
        match self.start_io(id, true) {
            StartIo::AlreadyDone => Ok(false),
            StartIo::Ready => self.do_read(local, id, tag, mode).map(|()| true),
        }
    }

    /// Read the page into buffer `id`; we hold `IO_IN_PROGRESS` on it.
    pub(super) fn do_read(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
    ) -> Result<()> {
        // SAFETY: arena rule 2: IO_IN_PROGRESS is ours and the page is not
        // VALID, so nobody else reads or writes these bytes until we finish.
        let page = unsafe { self.arena.page_mut(id) };
        if mode == ReadMode::ZeroNoRead {
            page.fill(0);
            // Counted as a read: the buffer was filled, not found.
            bump(&local.stats.parts[self.desc(id).partition()].reads, 1);
            self.terminate_io(id, VALID, IO_ERROR);
            return Ok(());
        }
        let result = self.storage.read(tag, page);
        self.complete_read(local, id, tag, mode, result)
    }

    /// The end of a read into buffer `id` (whose `IO_IN_PROGRESS` we own):
    /// verify the checksum of what `result` says was read, count the read,
    /// and end the I/O with `VALID` or with `IO_ERROR` (the buffer stays
    /// pinned by us either way; on an error the caller releases it with
    /// [`release_failed`](Self::release_failed)).
    pub(crate) fn complete_read(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
        result: Result<()>,
    ) -> Result<()> {
        bump(&local.stats.parts[self.desc(id).partition()].reads, 1);
        self.end_read(id, tag, mode, result)
    }

    /// [`complete_read`](Self::complete_read) without counting the read
    /// (for a stream's read finished by whichever thread reaps it; the
    /// stream counts it).
    pub(crate) fn end_read(
        &self,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
        result: Result<()>,
    ) -> Result<()> {
        // SAFETY: arena rule 2: IO_IN_PROGRESS is held for us (ours, or the
        // stream operation's we are finishing under its lock) and the page
        // is not VALID; only this thread looks at these bytes until we end
        // the I/O.
        let page = unsafe { self.arena.page(id) };
        let mut new_page = false;
        let result = result.and_then(|()| {
            if !self.config.checksums {
                return Ok(());
            }
            let Err(damage) = page::verify(page, tag.block) else {
                return Ok(());
            };
            if damage == page::Damage::Zeroed && self.zeroed_page_is_new(tag) {
                // Extended, never described by the WAL, lost with the
                // power: a new page (`durable` rule 3). It becomes the
                // blank page extension meant to write, dirty, so the next
                // checkpoint writes it before its fsync makes the block
                // durable (zeros there would then be damage).
                // SAFETY: as above: the I/O is ours and the page not VALID.
                page::stamp_blank(unsafe { self.arena.page_mut(id) }, tag.block);
                self.zeroed_new_pages.fetch_add(1, Ordering::Relaxed);
                new_page = true;
                return Ok(());
            }
            self.counters
                .checksum_failures
                .fetch_add(1, Ordering::Relaxed);
            if mode == ReadMode::NoVerify {
                return Ok(());
            }
            let path = self.storage.path(tag.relfork());
            let err = match damage {
                page::Damage::Checksum { stored, computed } => Error::ChecksumMismatch {
                    tag,
                    path,
                    stored,
                    computed,
                },
                page::Damage::Zeroed => Error::ZeroedPage { tag, path },
            };
            if self.config.zero_damaged_pages {
                // PostgreSQL's zero_damaged_pages: "invalid page ...;
                // zeroing out page". Its owner reads it as a new page.
                eprintln!("bufmgr: WARNING: {err}; zeroing out page (zero_damaged_pages)");
                // SAFETY: as above: the I/O is ours and the page not VALID.
                unsafe { self.arena.page_mut(id) }.fill(0);
                self.counters
                    .zeroed_damaged_pages
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(err)
        });
        match result {
            Ok(()) => {
                let dirty = if new_page { DIRTY } else { 0 };
                self.terminate_io(id, VALID | dirty, IO_ERROR);
                Ok(())
            }
            Err(e) => {
                self.terminate_io(id, IO_ERROR, 0);
                Err(e)
            }
        }
    }

    /// `StartBufferIO`: wait for any I/O in flight on `id`; then claim it
    /// unless it is no longer needed (page valid for input, clean for output).
    pub(super) fn start_io(&self, id: BufferId, for_input: bool) -> StartIo {
        let d = self.desc(id);
        loop {
            let s = d.lock_header();
            if s & IO_IN_PROGRESS == 0 {
                let done = if for_input {
                    s & VALID != 0
                } else {
                    s & DIRTY == 0
                };
                if done {
                    d.unlock_header(0, 0);
                    return StartIo::AlreadyDone;
                }
                d.unlock_header(IO_IN_PROGRESS, 0);
                return StartIo::Ready;
            }
            d.unlock_header(0, 0);
            self.wait_io(id);
        }
    }

    /// Wait until `id`'s I/O is over; if it is a stream's submitted read,
    /// finish that stream's operation here (reap, verify, end the I/O), so
    /// nobody waits on a consumer that may itself be waiting for us.
    pub(crate) fn wait_io(&self, id: BufferId) {
        let d = self.desc(id);
        if let Some(op) = d.wait_io_unless(|| self.in_flight.get(id)) {
            op.complete(self);
        }
    }

    /// `TerminateBufferIO`: clear `IO_IN_PROGRESS` (with `set`/`unset`) and
    /// wake waiters.
    pub(crate) fn terminate_io(&self, id: BufferId, set: u64, unset: u64) {
        let d = self.desc(id);
        d.lock_header();
        d.unlock_header_end_io(set, unset);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::PoolConfig;
    use crate::io::FileStorage;
    use crate::tag::{PAGE_SIZE, RelId};

    const REL: RelFork = RelFork::main(RelId(9));

    /// The byte at offset 100 of block `b` read through
    /// `read_buffer_prefetching` asking for `lines`.
    fn byte_at(pool: &BufferPool, b: BlockNumber, lines: &[usize]) -> Result<u8> {
        let page = pool.read_buffer_prefetching(REL, b, lines)?.lock_shared();
        assert_eq!(page.block(), b);
        Ok(page[100])
    }

    #[test]
    fn a_prefetching_read_is_read_buffer_whatever_the_lines_it_asks_for() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = Arc::new(FileStorage::open(dir.path()).expect("storage"));
        let pool = BufferPool::new(PoolConfig::new(8), storage).expect("pool");
        pool.create_fork(REL).expect("fork");
        for b in 0..3u8 {
            let mut w = pool.extend(REL, None).expect("extend");
            w[crate::page::OWNER_HEADER_OFFSET..].fill(b + 1);
            w.mark_dirty();
        }
        // Hits: lines in the page, at its last byte, and past it (which
        // ask for nothing), each counted once as an access and a hit.
        let before = pool.stats().totals();
        let all: [&[usize]; 4] = [&[], &[0], &[0, PAGE_SIZE - 1], &[PAGE_SIZE, usize::MAX]];
        for lines in all {
            for b in 0..3 {
                assert_eq!(byte_at(&pool, b, lines).expect("hit"), b as u8 + 1);
            }
        }
        let hits = pool.stats().totals();
        assert_eq!(hits.accesses - before.accesses, 12);
        assert_eq!(hits.hits - before.hits, 12);
        assert_eq!(hits.reads, before.reads);
        // A miss reads the page from storage, as `read_buffer` does.
        pool.flush_relation(REL).expect("flush");
        pool.evict_relation(REL).expect("evict");
        assert_eq!(byte_at(&pool, 1, &[0, 64]).expect("miss"), 2);
        assert_eq!(pool.stats().totals().reads, hits.reads + 1);
        // Past the end of the relation: read_buffer's error, nothing pinned.
        assert!(matches!(
            byte_at(&pool, 3, &[0]),
            Err(Error::BlockOutOfRange { block: 3, .. })
        ));
        assert!(pool.buffercache().iter().all(|r| r.pins == 0));
    }
}
