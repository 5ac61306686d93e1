//! Relation operations (extend, drop, truncate, invalidate) and
//! pg_buffercache (inspection and eviction).

use super::write::Writer;
use super::{BufferPool, PoolShared};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, lock_api::RawRwLockUpgrade as _};

use super::guard::{PageWrite, PinnedBuffer};
use super::local::{Local, with_local};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::page;
use crate::replacement::ring::Ring;
use crate::stats::{BufferCacheSummary, BufferRow, EvictCounts};
use crate::table::HashedTag;
use crate::tag::{BlockNumber, BufferTag, Fork, RelFork, RelId};

/// How long `drop_relation` waits for a pinned buffer of the relation to be released.
const DROP_PIN_WAIT: Duration = Duration::from_secs(10);

impl BufferPool {
    /// Append a zeroed page to `rf` and return it exclusively locked. The
    /// caller initialises it and marks it dirty. The file grows by one page
    /// at once, so a later extension never reuses this block number.
    pub fn extend(&self, rf: RelFork, ring: Option<&mut Ring>) -> Result<PageWrite<'_>> {
        let (id, mark) = with_local(&self.shared, |local| self.shared.extend(local, rf, ring))?;
        Ok(PageWrite::from_locked(
            PinnedBuffer::new(&self.shared, id),
            mark,
        ))
    }

    /// Forget every page of `rel` (all forks) in the pool, dirty or not, and
    /// delete its files. Waits briefly for pins on its pages to be released.
    pub fn drop_relation(&self, rel: RelId) -> Result<()> {
        self.shared.invalidate_where(|t| t.rel == rel)?;
        for fork in Fork::ALL {
            let rf = RelFork { rel, fork };
            self.shared.pending_sync.lock().remove(&rf);
            self.shared.storage.unlink(rf)?;
        }
        self.shared.unlogged.write().remove(&rel);
        self.shared.forget_durable(rel);
        self.shared.dropped_rels.note(rel);
        Ok(())
    }

    /// Cut `rf` to `nblocks` blocks, forgetting the pages beyond.
    pub fn truncate_relation(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        let ext = self.shared.ext_lock(rf);
        let _g = ext.lock();
        self.shared
            .invalidate_where(|t| t.relfork() == rf && t.block >= nblocks)?;
        self.shared.truncate_durable(rf, nblocks);
        self.shared.storage.truncate(rf, nblocks)
    }

    /// One row per buffer, each read under its header lock (pg_buffercache).
    /// `numa_node` is where the page's memory sits now, asked of the kernel
    /// for all pages in one pass (pg_buffercache_numa).
    pub fn buffercache(&self) -> Vec<BufferRow> {
        let s = &self.shared;
        let nodes = s.arena.page_nodes();
        (0..s.descs.len() as BufferId)
            .map(|id| {
                let d = &s.descs[id as usize];
                let st = d.lock_header();
                // The same decoding as the live view's relaxed snapshot.
                let b = crate::desc::BufferState::from_word(st, s.evictor);
                let tag = if b.valid { d.tag() } else { None };
                d.unlock_header(0, 0);
                BufferRow {
                    id,
                    tag,
                    dirty: b.dirty,
                    usage: b.usage,
                    pins: b.pins,
                    partition: s.parts.partition_of(id),
                    numa_node: nodes[id as usize],
                    probation: b.probation,
                }
            })
            .collect()
    }

    /// pg_buffercache_summary and usage counts.
    pub fn buffercache_summary(&self) -> BufferCacheSummary {
        BufferCacheSummary::from_rows(&self.buffercache(), self.shared.evictor)
    }

    /// Number of buffers pinned right now (0 once every guard is gone).
    pub fn pinned_buffers(&self) -> usize {
        self.shared
            .descs
            .iter()
            .filter(|d| refcount(d.load()) > 0)
            .count()
    }

    /// Number of buffers with I/O in progress right now (0 when the pool is
    /// quiet: no read or write left unfinished).
    pub fn io_in_progress(&self) -> usize {
        self.shared
            .descs
            .iter()
            .filter(|d| d.load() & IO_IN_PROGRESS != 0)
            .count()
    }

    /// Pages of each relation fork resident in the pool.
    pub fn resident_pages(&self) -> HashMap<RelFork, usize> {
        let mut m = HashMap::new();
        for r in self.buffercache() {
            if let Some(t) = r.tag {
                *m.entry(t.relfork()).or_insert(0) += 1;
            }
        }
        m
    }

    /// Evict one buffer: write it if dirty, then forget it. Returns
    /// (evicted, flushed); a pinned or invalid buffer is not evicted.
    pub fn evict_buffer(&self, id: BufferId) -> Result<(bool, bool)> {
        if id as usize >= self.size() {
            return Err(Error::InvalidConfig(format!(
                "buffer {id} does not exist (pool of {} buffers)",
                self.size()
            )));
        }
        self.shared.evict_one(id, None)
    }

    /// Evict every buffer of a relation fork that is not pinned.
    pub fn evict_relation(&self, rf: RelFork) -> Result<EvictCounts> {
        let mut c = EvictCounts::default();
        for id in 0..self.size() as BufferId {
            let d = &self.shared.descs[id as usize];
            d.lock_header();
            let mine = d.tag().is_some_and(|t| t.relfork() == rf);
            d.unlock_header(0, 0);
            if mine {
                match self.shared.evict_one(id, Some(rf))? {
                    (true, flushed) => {
                        c.evicted += 1;
                        c.flushed += usize::from(flushed);
                    }
                    (false, _) => c.skipped += 1,
                }
            }
        }
        Ok(c)
    }

    /// Evict every unpinned buffer.
    pub fn evict_all(&self) -> Result<EvictCounts> {
        let mut c = EvictCounts::default();
        for id in 0..self.size() as BufferId {
            match self.shared.evict_one(id, None)? {
                (true, flushed) => {
                    c.evicted += 1;
                    c.flushed += usize::from(flushed);
                }
                (false, _) => {
                    if self.shared.descs[id as usize].load() & VALID != 0 {
                        c.skipped += 1;
                    }
                }
            }
        }
        Ok(c)
    }
}

impl PoolShared {
    /// The extension lock of a relation fork.
    pub(super) fn ext_lock(&self, rf: RelFork) -> Arc<Mutex<()>> {
        self.ext_locks.lock().entry(rf).or_default().clone()
    }

    pub(super) fn extend(
        &self,
        local: &mut Local,
        rf: RelFork,
        ring: Option<&mut Ring>,
    ) -> Result<(BufferId, ExclusiveMark)> {
        self.check_writes_allowed()?;
        let ext = self.ext_lock(rf);
        let _g = ext.lock();
        let block = self.storage.nblocks(rf)?;
        let tag = BufferTag::new(rf, block);
        let victim = self.get_victim(local, ring)?;
        let d = self.desc(victim);
        // We are the only pinner and the buffer has no tag: the lock is free.
        // Desc rule 4: the version is odd while the blank page is written,
        // and stays odd until the caller's `PageWrite` is dropped.
        let mark = d.lock_content_exclusive();
        // SAFETY: arena rule 2: exclusive content lock, buffer invisible to others.
        let blank = unsafe { self.arena.page_mut(victim) };
        if self.config.checksums {
            // A blank page verifies; an all-zero one is damage (`page`).
            page::stamp_blank(blank, block);
        } else {
            blank.fill(0);
        }
        // Claim the block's tag in the mapping before the file grows: from
        // the moment the write below makes the block part of the file, a
        // reader may look it up (a scan up to the new length), and it must
        // find this buffer, not read the blank page into a second one (which
        // would leave the tag taken and fail this extension). Tagged with
        // `IO_IN_PROGRESS` (read path step 6), a reader that finds it waits
        // for the write's outcome.
        let ht = HashedTag::new(tag);
        let mut map = self.table.write(ht.partition());
        if let Some(&stale) = map.get(&ht)
            && self.forget_if_never_valid(stale, &ht)
        {
            map.remove(&ht);
        }
        if map.contains_key(&ht) {
            drop(map);
            // SAFETY: we hold it exclusively, from `lock_content_exclusive`.
            unsafe { d.unlock_content_exclusive(mark) };
            d.unpin();
            return Err(Error::CorruptFile {
                relfork: rf,
                path: self.storage.path(rf),
                detail: format!(
                    "a page beyond the end of the file (block {block}) is already in the buffer pool"
                ),
            });
        }
        map.insert(ht, victim);
        let s = d.lock_header();
        d.set_tag(Some(tag));
        let perm = if self.is_permanent(rf.rel) {
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
        // Reserve the block on disk: on a failure the block stays outside
        // the file and the buffer is given up as after a failed read (a
        // reader waiting on it retries the read and finds no such block).
        // SAFETY: arena rule 2: IO_IN_PROGRESS is ours and the page is not
        // VALID, so nobody else reads these bytes while we write them out.
        if let Err(e) = self.storage.write(tag, unsafe { self.arena.page(victim) }) {
            self.terminate_io(victim, IO_ERROR, 0);
            // SAFETY: we hold it exclusively, from `lock_content_exclusive`.
            unsafe { d.unlock_content_exclusive(mark) };
            self.release_failed(victim);
            return Err(e);
        }
        self.pending_sync.lock().insert(rf);
        self.terminate_io(victim, VALID, IO_ERROR);
        Ok((victim, mark))
    }

    /// Clear the identity of `id` if it holds `ht` but never became valid and
    /// nobody pins it (a failed read left it). The caller holds `ht`'s mapping
    /// partition lock exclusive and removes the entry if this returns true.
    pub(super) fn forget_if_never_valid(&self, id: BufferId, ht: &HashedTag) -> bool {
        let d = self.desc(id);
        let s = d.lock_header();
        if d.tag() != Some(ht.tag) || s & VALID != 0 || refcount(s) != 0 {
            d.unlock_header(0, 0);
            return false;
        }
        d.set_tag(None);
        d.unlock_header(0, FLAG_MASK | USAGE_MASK);
        true
    }

    /// Forget every buffer whose tag satisfies `pred` (`InvalidateBuffer`),
    /// discarding dirty contents.
    pub(super) fn invalidate_where(&self, pred: impl Fn(&BufferTag) -> bool) -> Result<()> {
        for id in 0..self.descs.len() as BufferId {
            let d = self.desc(id);
            let started = Instant::now();
            loop {
                let s = d.lock_header();
                let Some(tag) = d.tag().filter(|t| s & TAG_VALID != 0 && pred(t)) else {
                    d.unlock_header(0, 0);
                    break;
                };
                d.unlock_header(0, 0);
                let ht = HashedTag::new(tag);
                let mut map = self.table.write(ht.partition());
                let s = d.lock_header();
                if d.tag() != Some(tag) {
                    d.unlock_header(0, 0);
                    break;
                }
                if refcount(s) != 0 {
                    d.unlock_header(0, 0);
                    drop(map);
                    if started.elapsed() > DROP_PIN_WAIT {
                        return Err(Error::InvalidConfig(format!(
                            "{tag} is still pinned after {DROP_PIN_WAIT:?}; cannot forget it"
                        )));
                    }
                    if s & IO_IN_PROGRESS != 0 {
                        self.wait_io(id);
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    continue;
                }
                d.set_tag(None);
                d.unlock_header(0, FLAG_MASK | USAGE_MASK);
                map.remove(&ht);
                break;
            }
        }
        Ok(())
    }

    /// `EvictUnpinnedBuffer`.
    /// With `only`, a buffer holding another relation fork's page is left alone.
    pub(super) fn evict_one(&self, id: BufferId, only: Option<RelFork>) -> Result<(bool, bool)> {
        let d = self.desc(id);
        let s = d.lock_header();
        let other_rel = only.is_some_and(|rf| d.tag().map(|t| t.relfork()) != Some(rf));
        if s & VALID == 0 || refcount(s) != 0 || other_rel {
            d.unlock_header(0, 0);
            return Ok((false, false));
        }
        d.unlock_header_pinned();
        let mut flushed = false;
        if d.load() & DIRTY != 0 {
            let mark = d.content.lock_upgradable();
            let r = self.flush_buffer(id, Writer::Other, None);
            // SAFETY: taken just above.
            unsafe { d.content.unlock_upgradable(mark) };
            if let Err(e) = r {
                d.unpin();
                return Err(e);
            }
            flushed = true;
        }
        let evicted = self.invalidate_victim(id, false);
        d.unpin();
        Ok((evicted, flushed))
    }
}
