//! The write path: `FlushBuffer`, `SyncOneBuffer`, checkpoints (`BufferSync`)
//! and the fsync of written forks.

use super::read::StartIo;
use super::{BufferPool, PoolShared};

use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawRwLockUpgrade as _;

use super::local::Local;
use crate::desc::*;
use crate::error::{Error, Result};
use crate::io::WriteRequest;
use crate::page;
use crate::stats::bump;
use crate::tag::BufferTag;
use crate::tag::RelFork;

/// Who is writing a page (for the statistics that say who wrote what).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A thread that needed a victim and found it dirty.
    Backend,
    /// A thread recycling a dirty buffer of its own ring.
    Ring,
    Background,
    Checkpoint,
    /// Explicit flushes and evictions.
    Other,
}

impl BufferPool {
    /// Write every dirty page (permanent ones only unless `include_unlogged`)
    /// in (relation, fork, block) order, then fsync every file written since
    /// the last call. Pages dirtied after the call starts are not waited for.
    /// Returns the number of pages written.
    pub fn flush_all(&self, include_unlogged: bool) -> Result<usize> {
        self.shared.flush_all(include_unlogged)
    }

    /// Write the dirty pages of one relation fork and fsync it.
    pub fn flush_relation(&self, rf: RelFork) -> Result<usize> {
        let mut written = 0;
        for id in 0..self.size() as BufferId {
            let d = &self.shared.descs[id as usize];
            let s = d.lock_header();
            let mine = d.tag().is_some_and(|t| t.relfork() == rf);
            d.unlock_header(0, 0);
            if mine && s & (DIRTY | VALID) == DIRTY | VALID {
                written += usize::from(
                    self.shared
                        .sync_one_buffer(id, false, Some(rf), Writer::Other)?
                        .written,
                );
            }
        }
        self.shared.sync_pending(Some(rf))?;
        Ok(written)
    }
}

/// What `sync_one_buffer` found.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct SyncResult {
    pub written: bool,
    pub reusable: bool,
}

impl PoolShared {
    /// `FlushBuffer`: write a dirty page. The caller holds a pin and the
    /// content lock share-exclusive or exclusive.
    pub(crate) fn flush_buffer(
        &self,
        id: BufferId,
        writer: Writer,
        local: Option<&mut Local>,
    ) -> Result<()> {
        let d = self.desc(id);
        debug_assert!(d.content_locked());
        self.check_writes_allowed()?;
        if let StartIo::AlreadyDone = self.start_io(id, false) {
            return Ok(());
        }
        let tag = d.tag().expect("a dirty buffer has a tag");
        let s = d.load();
        if s & PERMANENT != 0 {
            let lsn = self.arena.lsn(id);
            if self.wal.needs_flush(lsn)
                && let Err(e) = self.wal.flush(lsn)
            {
                self.terminate_io(id, IO_ERROR, 0);
                return Err(Error::WalFlush {
                    lsn,
                    tag,
                    detail: e.to_string(),
                });
            }
        }
        if self.config.checksums {
            // SAFETY: arena rule 1: we hold a pin and share-exclusive; with
            // IO_IN_PROGRESS set no hint can change the page while we sum it.
            let sum = page::checksum(unsafe { self.arena.page(id) }, tag.block);
            self.arena.set_checksum(id, sum);
        }
        // SAFETY: as above.
        let result = self.storage.write(tag, unsafe { self.arena.page(id) });
        if let Err(e) = result {
            if !wrote_nothing(&e) {
                *self.write_failure.lock() = Some(e.to_string());
                self.write_failed.store(true, Ordering::Release);
            }
            self.terminate_io(id, IO_ERROR, 0);
            return Err(e);
        }
        self.pending_sync.lock().insert(tag.relfork());
        self.terminate_io(id, 0, DIRTY | HINT_DIRTY | CHECKPOINT_NEEDED | IO_ERROR);
        self.count_write(id, writer, local);
        Ok(())
    }

    /// Count a page written by `writer` in the statistics.
    fn count_write(&self, id: BufferId, writer: Writer, local: Option<&mut Local>) {
        let part = self.desc(id).partition();
        match (writer, local) {
            (Writer::Backend, Some(l)) => bump(&l.stats.parts[part].writes_backend, 1),
            (Writer::Ring, Some(l)) => bump(&l.stats.parts[part].writes_ring, 1),
            (Writer::Background, _) => {
                self.counters
                    .writes_bgwriter
                    .fetch_add(1, Ordering::Relaxed);
            }
            (Writer::Checkpoint, _) => {
                self.counters
                    .writes_checkpoint
                    .fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.counters.writes_other.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// After a failed write the pool refuses to write again.
    pub(super) fn check_writes_allowed(&self) -> Result<()> {
        if self.write_failed.load(Ordering::Acquire) {
            let msg = self.write_failure.lock().clone().unwrap_or_default();
            return Err(Error::WritesRefused(msg));
        }
        Ok(())
    }

    /// The first half of `SyncOneBuffer`: if buffer `id` is valid and dirty
    /// (and, with `skip_recently_used`, unpinned at the bottom usage step;
    /// with `only`, a page of that fork), pin it while releasing its header
    /// lock (`PinBuffer_Locked`: no usage change) and return its tag and
    /// whether it was reusable; else `Err` with what was found.
    fn pin_if_dirty(
        &self,
        id: BufferId,
        skip_recently_used: bool,
        only: Option<RelFork>,
    ) -> Result<std::result::Result<(BufferTag, bool), SyncResult>> {
        let d = self.desc(id);
        let s = d.lock_header();
        let reusable = self.evictor.reusable(s);
        let other_rel = only.is_some_and(|rf| d.tag().map(|t| t.relfork()) != Some(rf));
        if (skip_recently_used && !reusable) || other_rel || s & (VALID | DIRTY) != VALID | DIRTY {
            d.unlock_header(0, 0);
            return Ok(Err(SyncResult {
                written: false,
                reusable,
            }));
        }
        let tag = d.tag().expect("a valid buffer has a tag");
        if refcount(s) == REFCOUNT_MASK {
            d.unlock_header(0, 0);
            return Err(Self::too_many_pins(tag));
        }
        d.unlock_header_pinned();
        Ok(Ok((tag, reusable)))
    }

    /// `SyncOneBuffer`: write buffer `id` if it is valid and dirty (and, with
    /// `skip_recently_used`, only if it is unpinned at the bottom usage step).
    /// With `only`, a buffer that holds a page of another relation fork by
    /// the time its header is locked is left alone.
    pub(crate) fn sync_one_buffer(
        &self,
        id: BufferId,
        skip_recently_used: bool,
        only: Option<RelFork>,
        writer: Writer,
    ) -> Result<SyncResult> {
        let d = self.desc(id);
        let reusable = match self.pin_if_dirty(id, skip_recently_used, only)? {
            Ok((_, reusable)) => reusable,
            Err(skipped) => return Ok(skipped),
        };
        let mark = d.content.lock_upgradable();
        let r = self.flush_buffer(id, writer, None);
        // SAFETY: taken just above.
        unsafe { d.content.unlock_upgradable(mark) };
        d.unpin();
        r.map(|()| SyncResult {
            written: true,
            reusable,
        })
    }

    /// `BufferSync` for a checkpoint: the dirty pages in tag order, written
    /// in batches (see [`WriteBatch`]).
    pub(super) fn flush_all(&self, include_unlogged: bool) -> Result<usize> {
        // After a failed write or fsync no checkpoint may succeed, not even
        // one with nothing dirty (see `sync_pending`).
        self.check_writes_allowed()?;
        let mask = if include_unlogged {
            DIRTY
        } else {
            DIRTY | PERMANENT
        };
        let mut todo = Vec::new();
        for (id, d) in self.descs.iter().enumerate() {
            let s = d.lock_header();
            if s & mask == mask {
                let tag = d.tag();
                d.unlock_header(CHECKPOINT_NEEDED, 0);
                if let Some(tag) = tag {
                    todo.push((tag, id as BufferId));
                }
            } else {
                d.unlock_header(0, 0);
            }
        }
        todo.sort_unstable();
        let mut written = 0;
        let mut batch = WriteBatch::new(self, Writer::Checkpoint);
        for (_, id) in todo {
            if self.desc(id).load() & CHECKPOINT_NEEDED != 0 {
                batch.add(id, false)?;
                if batch.is_full() {
                    written += batch.submit()?;
                }
            }
        }
        written += batch.submit()?;
        self.sync_pending(None)?;
        Ok(written)
    }

    /// fsync the forks written since the last sync (all, or just `only`).
    pub(super) fn sync_pending(&self, only: Option<RelFork>) -> Result<()> {
        let forks: Vec<RelFork> = {
            let mut p = self.pending_sync.lock();
            match only {
                Some(rf) => p.take(&rf).into_iter().collect(),
                None => p.drain().collect(),
            }
        };
        for (i, rf) in forks.iter().enumerate() {
            // Every block below this was written (at least blank) before the
            // fsync begins; unknown if the file is gone (nothing to note).
            let nblocks = self.storage.nblocks(*rf).ok();
            if let Err(e) = self.storage.sync(*rf) {
                // A relation dropped since it was written has nothing to sync.
                if !self.storage.exists(*rf).unwrap_or(true) {
                    continue;
                }
                if wrote_nothing(&e) {
                    // The file could not even be opened: no fsync ran, no
                    // page was dropped; the forks wait for the next sync.
                    self.pending_sync.lock().extend(forks[i..].iter().copied());
                    return Err(e);
                }
                // Fatal, as in PostgreSQL since "fsyncgate": after a failed
                // fsync Linux may have marked the dirty pages clean without
                // writing them, so a retry would succeed and prove nothing,
                // and a checkpoint that then moved the redo point past their
                // WAL would lose them. Refuse every later write and
                // checkpoint; recovery after a reopen replays them.
                *self.write_failure.lock() = Some(e.to_string());
                self.write_failed.store(true, Ordering::Release);
                self.pending_sync.lock().extend(forks[i..].iter().copied());
                return Err(e);
            }
            if let Some(n) = nblocks {
                self.synced(*rf, n);
            }
        }
        Ok(())
    }
}

/// Did a failed write or sync leave the file untouched? True of a file that
/// could not be opened for want of descriptors (`EMFILE`, `ENFILE`: kind
/// `ResourceExhausted`): that is the call's error only, the page stays dirty
/// (the fork stays to be synced) and nothing refuses later writes. Any other
/// failure may have lost data and is fatal, as the module docs say.
fn wrote_nothing(e: &Error) -> bool {
    e.kind() == crate::ErrorKind::ResourceExhausted
}

/// Pages a [`WriteBatch`] holds before it is submitted (at most; see
/// [`WRITE_BATCH_POOL_SHARE`]).
pub(crate) const WRITE_BATCH: usize = 32;
/// A batch pins at most 1/16 of the pool (at least one buffer), so the
/// writers never starve the threads that need victims of a small pool.
pub(crate) const WRITE_BATCH_POOL_SHARE: usize = 16;

/// Batched write-back for the checkpoint and the background writer
/// (PostgreSQL 18 submits its checkpoint writes asynchronously the same way).
/// A batch holds up to 32 pages, and at most 1/16 of the pool.
///
/// 1. `add`: a buffer that is valid and dirty (and, for the bgwriter,
///    unpinned at the bottom usage step) is pinned, its content lock taken
///    share-exclusive, and its output I/O started (`IO_IN_PROGRESS`). From
///    here until its write completes no hint can change it (`set_hints` is
///    refused while a write is in flight) and no other writer starts on it.
///    Only the first buffer of a batch may wait for its content lock: a later
///    one whose lock is taken makes the batch submit first, so a batch never
///    waits for a lock while holding others (no cycle with a thread that
///    holds an exclusive lock and wants one of ours).
/// 2. `submit`: one WAL flush up to the highest LSN of the batch's permanent
///    pages, checksums set in place, one `write_batch` to the backend (all
///    writes in flight at once where it can), then per page: written ->
///    clean (`DIRTY`, `HINT_DIRTY`, `CHECKPOINT_NEEDED` cleared), failed ->
///    still dirty with `IO_ERROR`, the pool's write-failure latch set; the
///    locks and pins are released either way. The first error is returned.
/// 3. Dropping a batch submits what it holds (errors ignored).
pub(crate) struct WriteBatch<'p> {
    pool: &'p PoolShared,
    writer: Writer,
    items: Vec<(BufferId, BufferTag, UpgradableMark)>,
    max: usize,
}

impl std::fmt::Debug for WriteBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<BufferId> = self.items.iter().map(|i| i.0).collect();
        f.debug_struct("WriteBatch")
            .field("writer", &self.writer)
            .field("buffers", &ids)
            .finish()
    }
}

impl<'p> WriteBatch<'p> {
    pub(crate) fn new(pool: &'p PoolShared, writer: Writer) -> WriteBatch<'p> {
        let max = (pool.descs.len() / WRITE_BATCH_POOL_SHARE).clamp(1, WRITE_BATCH);
        WriteBatch {
            pool,
            writer,
            items: Vec::with_capacity(max),
            max,
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.items.len() >= self.max
    }

    /// Claim buffer `id` for this batch if it needs writing (rule 1). The
    /// result says whether it was claimed (`written`: it will be written by
    /// `submit`) and whether it was reusable.
    pub(crate) fn add(&mut self, id: BufferId, skip_recently_used: bool) -> Result<SyncResult> {
        let pool = self.pool;
        let d = pool.desc(id);
        let (tag, reusable) = match pool.pin_if_dirty(id, skip_recently_used, None)? {
            Ok(found) => found,
            Err(skipped) => return Ok(skipped),
        };
        let mark = match d.content.try_lock_upgradable() {
            Some(m) => m,
            None => {
                // Never wait for a lock while holding others (rule 1).
                if let Err(e) = self.submit() {
                    d.unpin();
                    return Err(e);
                }
                d.content.lock_upgradable()
            }
        };
        if let Err(e) = pool.check_writes_allowed() {
            // SAFETY: taken just above.
            unsafe { d.content.unlock_upgradable(mark) };
            d.unpin();
            return Err(e);
        }
        if let StartIo::AlreadyDone = pool.start_io(id, false) {
            // SAFETY: taken just above.
            unsafe { d.content.unlock_upgradable(mark) };
            d.unpin();
            return Ok(SyncResult {
                written: false,
                reusable,
            });
        }
        self.items.push((id, tag, mark));
        Ok(SyncResult {
            written: true,
            reusable,
        })
    }

    /// Write every claimed page (rule 2); returns how many were written.
    pub(crate) fn submit(&mut self) -> Result<usize> {
        if self.items.is_empty() {
            return Ok(0);
        }
        let pool = self.pool;
        let items = std::mem::take(&mut self.items);
        // One WAL flush for the batch.
        let mut flush_to = 0u64;
        let mut flush_tag = None;
        for &(id, tag, _) in &items {
            if pool.desc(id).load() & PERMANENT != 0 {
                let lsn = pool.arena.lsn(id);
                if lsn > flush_to {
                    (flush_to, flush_tag) = (lsn, Some(tag));
                }
            }
        }
        let mut first_error = None;
        if let Some(tag) = flush_tag
            && pool.wal.needs_flush(flush_to)
            && let Err(e) = pool.wal.flush(flush_to)
        {
            first_error = Some(Error::WalFlush {
                lsn: flush_to,
                tag,
                detail: e.to_string(),
            });
        }
        let results: Vec<Result<()>> = if first_error.is_some() {
            Vec::new()
        } else {
            if pool.config.checksums {
                for &(id, tag, _) in &items {
                    // SAFETY: arena rule 1: we hold a pin and share-exclusive;
                    // with IO_IN_PROGRESS set no hint can change the page.
                    let sum = page::checksum(unsafe { pool.arena.page(id) }, tag.block);
                    pool.arena.set_checksum(id, sum);
                }
            }
            let reqs: Vec<WriteRequest<'_>> = items
                .iter()
                .map(|&(id, tag, _)| WriteRequest {
                    tag,
                    // SAFETY: as above: nobody changes the page until its
                    // I/O is terminated below.
                    page: unsafe { pool.arena.page(id) },
                })
                .collect();
            pool.storage.write_batch(&reqs)
        };
        let mut written = 0;
        for (i, (id, tag, mark)) in items.into_iter().enumerate() {
            let d = pool.desc(id);
            match results.get(i) {
                Some(Ok(())) => {
                    pool.pending_sync.lock().insert(tag.relfork());
                    pool.terminate_io(id, 0, DIRTY | HINT_DIRTY | CHECKPOINT_NEEDED | IO_ERROR);
                    pool.count_write(id, self.writer, None);
                    written += 1;
                }
                Some(Err(e)) => {
                    if !wrote_nothing(e) {
                        *pool.write_failure.lock() = Some(e.to_string());
                        pool.write_failed.store(true, Ordering::Release);
                    }
                    pool.terminate_io(id, IO_ERROR, 0);
                }
                // Not written (the WAL flush failed): still dirty.
                None => pool.terminate_io(id, IO_ERROR, 0),
            }
            // SAFETY: taken in `add`, released once here.
            unsafe { d.content.unlock_upgradable(mark) };
            d.unpin();
        }
        let failed = results.into_iter().find_map(Result::err);
        match first_error.or(failed) {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }
}

impl Drop for WriteBatch<'_> {
    fn drop(&mut self) {
        let _ = self.submit();
    }
}
