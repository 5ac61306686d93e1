//! The write path: `FlushBuffer`, `SyncOneBuffer`, checkpoints (`BufferSync`)
//! and the fsync of written forks.

use super::read::StartIo;
use super::{BufferPool, PoolShared};

use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawRwLockUpgrade as _;

use crate::desc::*;
use crate::error::{Error, Result};
use crate::local::Local;
use crate::page;
use crate::stats::bump;
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
            let msg = e.to_string();
            *self.write_failure.lock() = Some(msg);
            self.write_failed.store(true, Ordering::Release);
            self.terminate_io(id, IO_ERROR, 0);
            return Err(e);
        }
        self.pending_sync.lock().insert(tag.relfork());
        self.terminate_io(id, 0, DIRTY | HINT_DIRTY | CHECKPOINT_NEEDED | IO_ERROR);
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
        Ok(())
    }

    /// After a failed write the pool refuses to write again.
    pub(super) fn check_writes_allowed(&self) -> Result<()> {
        if self.write_failed.load(Ordering::Acquire) {
            let msg = self.write_failure.lock().clone().unwrap_or_default();
            return Err(Error::WritesRefused(msg));
        }
        Ok(())
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
        let s = d.lock_header();
        let reusable = refcount(s) == 0 && s & USAGE_MASK == 0;
        let other_rel = only.is_some_and(|rf| d.tag().map(|t| t.relfork()) != Some(rf));
        if (skip_recently_used && !reusable) || other_rel || s & (VALID | DIRTY) != VALID | DIRTY {
            d.unlock_header(0, 0);
            return Ok(SyncResult {
                written: false,
                reusable,
            });
        }
        if refcount(s) == REFCOUNT_MASK {
            let tag = d.tag().expect("a valid buffer has a tag");
            d.unlock_header(0, 0);
            return Err(Self::too_many_pins(tag));
        }
        // PinBuffer_Locked: pin while releasing the header lock (no usage change).
        d.unlock_header_pinned();
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

    /// `BufferSync` for a checkpoint.
    pub(super) fn flush_all(&self, include_unlogged: bool) -> Result<usize> {
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
        for (_, id) in todo {
            if self.desc(id).load() & CHECKPOINT_NEEDED != 0 {
                written += usize::from(
                    self.sync_one_buffer(id, false, None, Writer::Checkpoint)?
                        .written,
                );
            }
        }
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
            if let Err(e) = self.storage.sync(*rf) {
                // A relation dropped since it was written has nothing to sync.
                if !self.storage.exists(*rf).unwrap_or(true) {
                    continue;
                }
                // Keep the rest pending: a later checkpoint must retry them.
                self.pending_sync.lock().extend(forks[i..].iter().copied());
                return Err(e);
            }
        }
        Ok(())
    }
}
