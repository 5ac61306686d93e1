//! [`Heap`]: one relation's tuples, with insert, fetch, delete and update.
//!
//! # Writing a page (PostgreSQL's critical-section order)
//! Every change to a page of a logged relation happens in this order, all
//! while the exclusive content lock is held:
//! 1. change the page;
//! 2. mark the buffer dirty (so a checkpoint that takes its redo point from
//!    now on writes the page);
//! 3. insert the WAL record; a block gets a full-page image (without the hole
//!    between `lower` and `upper`) if the page has not been logged since the
//!    redo point (`wal.needs_full_page_image(page_lsn)`), and the record is
//!    inserted with `insert_unless_image_needed` so that a checkpoint that
//!    moved the redo point since that decision makes us decide again;
//! 4. set the page LSN to the record's *end* LSN (bufmgr rule 5: the page
//!    cannot be written before the WAL up to there is durable).
//!
//! Unlogged relations (and heaps opened without a WAL) do steps 1 and 2 only.
//!
//! # Lock order
//! One page at a time, except an update whose new version goes to another
//! page: then the two exclusive locks are taken in ascending block order
//! (PostgreSQL's `RelationGetBufferForTuple`). The relation's extension lock
//! (inside `pool.extend`) is taken holding no content lock.
//!
//! # Free space
//! Inserts ask the [`FreeSpaceMap`] for a block with room; a page that turns
//! out fuller than the map said is corrected and the next candidate tried;
//! when the map knows none, the relation is extended by one page.

use std::sync::Arc;

use bufmgr::{BlockNumber, BufferPool, PageWrite, RelFork, RelId};
use wal::{BlockRef, Hole, Lsn, Record, RmgrKind, Wal, Xid};

use crate::error::{HeapError, Result};
use crate::fsm::FreeSpaceMap;
use crate::page::{self, HeapPage, MAX_ROW_LEN, PageId};
use crate::record::HeapRecord;
use crate::tuple::{TUPLE_HEADER_SIZE, Tid, TupleHeader};
use crate::txn::{CommandId, Snapshot, TransactionStatus};
use crate::visibility::{HintContext, HintMode, UpdateVerdict, tuple_visibility, update_verdict};

/// One heap relation. Share it between threads by reference or `Arc`.
#[derive(Debug)]
pub struct Heap {
    pool: Arc<BufferPool>,
    /// `None` for an unlogged relation or a heap without a WAL.
    wal: Option<Arc<Wal>>,
    rel: RelId,
    logged: bool,
    fsm: FreeSpaceMap,
    /// How fetches set hints (scans take theirs from `ScanOptions`).
    hint_mode: HintMode,
}

impl Heap {
    /// Open (creating its file if needed) relation `rel`. An unlogged
    /// relation is declared to the pool (`set_unlogged`) and writes no WAL.
    pub fn open(
        pool: Arc<BufferPool>,
        wal: Option<Arc<Wal>>,
        rel: RelId,
        logged: bool,
    ) -> Result<Heap> {
        let rf = RelFork::main(rel);
        pool.create_fork(rf)?;
        pool.set_unlogged(rel, !logged);
        let nblocks = pool.nblocks(rf)?;
        Ok(Heap {
            wal: if logged { wal } else { None },
            rel,
            logged,
            fsm: FreeSpaceMap::new(nblocks, page::MAX_TUPLE_LEN),
            hint_mode: HintMode::default(),
            pool,
        })
    }

    /// Use `mode` for the hints fetches set (default [`HintMode::PerPage`],
    /// which for a single tuple is one call, as `PerTuple`).
    pub fn with_hint_mode(mut self, mode: HintMode) -> Heap {
        self.hint_mode = mode;
        self
    }

    pub fn rel(&self) -> RelId {
        self.rel
    }

    pub fn is_logged(&self) -> bool {
        self.logged
    }

    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// The WAL this heap logs to (`None` if unlogged).
    pub fn wal(&self) -> Option<&Arc<Wal>> {
        self.wal.as_ref()
    }

    pub fn fsm(&self) -> &FreeSpaceMap {
        &self.fsm
    }

    pub(crate) fn relfork(&self) -> RelFork {
        RelFork::main(self.rel)
    }

    pub(crate) fn page_id(&self, block: BlockNumber) -> PageId {
        PageId {
            rel: self.rel,
            block,
        }
    }

    /// Number of pages in the relation.
    pub fn nblocks(&self) -> Result<BlockNumber> {
        Ok(self.pool.nblocks(self.relfork())?)
    }

    /// Pin and exclusively lock the page of `tid`, or say the TID is bad.
    fn lock_page(&self, tid: Tid) -> Result<PageWrite<'_>> {
        if tid.offset == 0 {
            return Err(HeapError::BadTid {
                rel: self.rel,
                tid,
                reason: "offset 0 names no tuple",
            });
        }
        match self.pool.read_buffer(self.relfork(), tid.block, None) {
            Ok(pin) => Ok(pin.lock_exclusive()),
            Err(bufmgr::Error::BlockOutOfRange { .. }) => Err(HeapError::BadTid {
                rel: self.rel,
                tid,
                reason: "block past the end of the relation",
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Insert a row for transaction `xid` (as its command 0); returns its
    /// TID.
    pub fn insert(&self, xid: Xid, data: &[u8]) -> Result<Tid> {
        self.insert_command(xid, 0, data)
    }

    /// Insert a row for transaction `xid` as its command `cid` (the tuple's
    /// cmin: the transaction's reads see it from command `cid + 1` on).
    pub fn insert_command(&self, xid: Xid, cid: CommandId, data: &[u8]) -> Result<Tid> {
        self.check_row(data)?;
        let mut page = self.page_with_room(TUPLE_HEADER_SIZE + data.len())?;
        let (tid, was_new) = self.add_version(&mut page, xid, cid, data, false)?;
        let rec = HeapRecord::Insert {
            offset: tid.offset,
            init: false,
            tuple: Vec::new(),
        };
        self.log(xid, &rec, &mut [&mut page], Some((tid, was_new)))?;
        self.note_free_space(&page);
        Ok(tid)
    }

    pub(crate) fn check_row(&self, data: &[u8]) -> Result<()> {
        if data.len() > MAX_ROW_LEN {
            return Err(HeapError::RowTooLarge {
                rel: self.rel,
                len: data.len(),
                max: MAX_ROW_LEN,
            });
        }
        Ok(())
    }

    /// Put a new tuple version on a locked page with room; returns its TID
    /// and whether the page was new (never initialised) before.
    fn add_version(
        &self,
        page: &mut PageWrite<'_>,
        xid: Xid,
        cid: CommandId,
        data: &[u8],
        updated: bool,
    ) -> Result<(Tid, bool)> {
        let id = self.page_id(page.block());
        let view = HeapPage::parse(page, id)?;
        let was_new = view.is_new();
        let off = page::next_offset(&view)?;
        let tid = Tid::new(page.block(), off);
        let mut header = TupleHeader::new_insert(xid, tid, updated);
        header.cmin = cid;
        page::add_row(page, id, off, &header, data)?;
        Ok((tid, was_new))
    }

    /// Record the page's free space in the map.
    fn note_free_space(&self, page: &PageWrite<'_>) {
        if let Ok(view) = HeapPage::parse(page, self.page_id(page.block())) {
            self.fsm.update(page.block(), view.free_space());
        }
    }

    /// An exclusively locked page with room for a tuple of `len` bytes
    /// (header included): from the free-space map, else a new page.
    fn page_with_room(&self, len: usize) -> Result<PageWrite<'_>> {
        let need = page::align_tuple(len);
        while let Some(block) = self.fsm.find(need) {
            let page = self
                .pool
                .read_buffer(self.relfork(), block, None)?
                .lock_exclusive();
            let free = HeapPage::parse(&page, self.page_id(block))?.free_space();
            if free >= need {
                return Ok(page);
            }
            self.fsm.update(block, free);
        }
        Ok(self.pool.extend(self.relfork(), None)?)
    }

    /// The row at `tid` if `snap` sees it, handed to `f` (under the page's
    /// shared lock: `f` must not call back into the heap).
    pub fn fetch_with<R>(
        &self,
        tid: Tid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>> {
        if tid.offset == 0 {
            return Err(HeapError::BadTid {
                rel: self.rel,
                tid,
                reason: "offset 0 names no tuple",
            });
        }
        // The page header and the tuple's line pointer are read first: ask
        // for both lines as soon as the buffer is known, so their misses
        // overlap the pin's (the tuple's line is known only from the line
        // pointer).
        let lines = [0, page::lp_offset(tid.offset)];
        let pin = match self
            .pool
            .read_buffer_prefetching(self.relfork(), tid.block, &lines)
        {
            Ok(pin) => pin,
            Err(bufmgr::Error::BlockOutOfRange { .. }) => {
                return Err(HeapError::BadTid {
                    rel: self.rel,
                    tid,
                    reason: "block past the end of the relation",
                });
            }
            Err(e) => return Err(e.into()),
        };
        let page = pin.lock_shared();
        let view = HeapPage::parse(&page, self.page_id(tid.block))?;
        let Some((start, bytes)) = view.tuple(tid.offset)? else {
            return Ok(None);
        };
        // The tuple's first 64 bytes (its header, then the first columns)
        // lie on at most two lines: ask for the second while the header's
        // miss is outstanding (the same line again if they lie on one).
        page.prefetch(start + bytes.len().min(64) - 1);
        let h = TupleHeader::decode(bytes).expect("tuple() checked the length");
        let ctx = HintContext {
            unlogged: !self.logged,
            page_lsn: Lsn(page.lsn()),
        };
        let v = tuple_visibility(&h, snap, oracle, ctx)?;
        if v.hints != 0 && self.hint_mode != HintMode::Never {
            page.set_hints(&[(start + crate::tuple::INFOMASK_OFFSET, v.hints)])?;
        }
        Ok(v.visible.then(|| f(&bytes[TUPLE_HEADER_SIZE..])))
    }

    /// The row at `tid` if `snap` sees it.
    pub fn fetch(
        &self,
        tid: Tid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
    ) -> Result<Option<Vec<u8>>> {
        self.fetch_with(tid, snap, oracle, <[u8]>::to_vec)
    }

    /// May transaction `snap.own` update or delete the row at `tid` now?
    /// `Ok` if so; [`HeapError::WriteConflict`] if a concurrent transaction
    /// changed it; [`HeapError::NotVisible`] if it cannot see it. A pre-check
    /// for callers with other checks to make first (the engine's unique
    /// checks, which must not report a write conflict as a duplicate key);
    /// `update` and `delete` decide again under their own lock.
    pub fn check_updatable(
        &self,
        tid: Tid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
    ) -> Result<()> {
        let page = self.lock_page(tid)?;
        self.check_writable(&page, tid, snap, oracle).map(drop)
    }

    /// Check that `snap.own` may change the tuple at `off` of a locked page.
    fn check_writable(
        &self,
        page: &PageWrite<'_>,
        tid: Tid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
    ) -> Result<TupleHeader> {
        let view = HeapPage::parse(page, self.page_id(tid.block))?;
        let not_visible = HeapError::NotVisible {
            rel: self.rel,
            tid,
            xid: snap.own,
        };
        let Some((_, h)) = view.header(tid.offset)? else {
            return Err(not_visible);
        };
        match update_verdict(&h, snap, oracle)? {
            UpdateVerdict::MayUpdate => Ok(h),
            UpdateVerdict::Invisible => Err(not_visible),
            UpdateVerdict::Conflict => Err(HeapError::WriteConflict { rel: self.rel, tid }),
        }
    }

    /// Delete the row at `tid` as transaction `xid` (whose snapshot is
    /// `snap`, `snap.own == xid`), in command `snap.cid` (the cmax). A
    /// concurrent change is a [`HeapError::WriteConflict`].
    pub fn delete(
        &self,
        xid: Xid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
        tid: Tid,
    ) -> Result<()> {
        debug_assert_eq!(
            snap.own, xid,
            "the snapshot must belong to the deleting transaction"
        );
        let mut page = self.lock_page(tid)?;
        let mut h = self.check_writable(&page, tid, snap, oracle)?;
        let id = self.page_id(tid.block);
        h.set_xmax(xid, tid);
        h.cmax = snap.write_cid();
        page::put_header(&mut page, id, tid.offset, &h)?;
        page::set_prunable(&mut page, xid);
        self.log(
            xid,
            &HeapRecord::Delete { offset: tid.offset },
            &mut [&mut page],
            None,
        )
    }

    /// Replace the row at `tid` with `data` as transaction `xid`: a new
    /// version (flagged `HEAP_UPDATED`), the old one's xmax set and its ctid
    /// pointing at the new one; both stamped with command `snap.cid` (the
    /// old one's cmax, the new one's cmin). Returns the new TID.
    pub fn update(
        &self,
        xid: Xid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
        tid: Tid,
        data: &[u8],
    ) -> Result<Tid> {
        debug_assert_eq!(
            snap.own, xid,
            "the snapshot must belong to the updating transaction"
        );
        self.check_row(data)?;
        let len = TUPLE_HEADER_SIZE + data.len();
        let need = page::align_tuple(len);
        loop {
            let mut old = self.lock_page(tid)?;
            self.check_writable(&old, tid, snap, oracle)?;
            let free = HeapPage::parse(&old, self.page_id(tid.block))?.free_space();
            if free >= need {
                let new = self.add_version(&mut old, xid, snap.write_cid(), data, true)?;
                self.finish_update(&mut old, None, xid, snap, oracle, tid, new)?;
                let new_tid = new.0;
                self.note_free_space(&old);
                return Ok(new_tid);
            }
            self.fsm.update(tid.block, free);
            drop(old);
            // Another page: lock both in ascending block order.
            let target = self.page_with_room(len)?;
            let target_block = target.block();
            if target_block == tid.block {
                continue; // space appeared on the old page meanwhile: start over
            }
            let (mut old, mut target) = if target_block > tid.block {
                let pin = target.unlock();
                let old = self.lock_page(tid)?;
                (old, pin.lock_exclusive())
            } else {
                (self.lock_page(tid)?, target)
            };
            let target_free = HeapPage::parse(&target, self.page_id(target_block))?.free_space();
            if target_free < need {
                self.fsm.update(target_block, target_free);
                continue;
            }
            // The old tuple may have changed while it was unlocked.
            self.check_writable(&old, tid, snap, oracle)?;
            let new = self.add_version(&mut target, xid, snap.write_cid(), data, true)?;
            self.finish_update(&mut old, Some(&mut target), xid, snap, oracle, tid, new)?;
            let new_tid = new.0;
            self.note_free_space(&target);
            self.note_free_space(&old);
            return Ok(new_tid);
        }
    }

    /// Second half of an update: point the old version at the new one, log.
    #[allow(clippy::too_many_arguments)]
    fn finish_update<'p>(
        &self,
        old: &mut PageWrite<'p>,
        target: Option<&mut PageWrite<'p>>,
        xid: Xid,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
        tid: Tid,
        new: (Tid, bool),
    ) -> Result<()> {
        let new_tid = new.0;
        let mut h = self.check_writable(old, tid, snap, oracle)?;
        h.set_xmax(xid, new_tid);
        h.cmax = snap.write_cid();
        let id = self.page_id(tid.block);
        page::put_header(old, id, tid.offset, &h)?;
        page::set_prunable(old, xid);
        let rec = HeapRecord::Update {
            old_offset: tid.offset,
            new_offset: new_tid.offset,
            init: false,
            tuple: Vec::new(),
        };
        match target {
            Some(t) => self.log(xid, &rec, &mut [old, t], Some(new)),
            None => self.log(xid, &rec, &mut [old], Some(new)),
        }
    }

    /// Steps 2-4 of the module docs for the locked, changed `pages`.
    /// `new_tuple` names the tuple an insert or update added and whether its
    /// page was new: its bytes go into the record, and a new page is
    /// initialised by redo (`WILL_INIT`, no image needed).
    pub(crate) fn log<'p>(
        &self,
        xid: Xid,
        rec: &HeapRecord,
        pages: &mut [&mut PageWrite<'p>],
        new_tuple: Option<(Tid, bool)>,
    ) -> Result<()> {
        for p in pages.iter_mut() {
            p.mark_dirty();
        }
        let Some(wal) = &self.wal else {
            return Ok(());
        };
        // Fill in the new tuple's bytes and whether its page was new.
        let mut rec = rec.clone();
        let mut init_block = None;
        if let Some((nt, init)) = new_tuple {
            let p = pages
                .iter()
                .find(|p| p.block() == nt.block)
                .expect("the new tuple's page is locked");
            let view = HeapPage::parse(p, self.page_id(nt.block))?;
            let (_, bytes) = view.tuple(nt.offset)?.ok_or_else(|| {
                self.page_id(nt.block)
                    .corrupt("the tuple just added is gone")
            })?;
            // A new page needs no image only if this record is all of it:
            // an update onto the old tuple's own page never counts as new.
            let init = init && pages.iter().filter(|p| p.block() == nt.block).count() == 1;
            if init {
                init_block = Some(nt.block);
            }
            match &mut rec {
                HeapRecord::Insert { tuple, init: i, .. }
                | HeapRecord::Update { tuple, init: i, .. } => {
                    *tuple = bytes.to_vec();
                    *i = init;
                }
                _ => unreachable!("only inserts and updates add tuples"),
            }
        }
        let (info, payload) = rec.encode();
        loop {
            let mut builder = Record::builder(RmgrKind::Heap, info, xid);
            let mut fpw_lsn: Option<Lsn> = None;
            for p in pages.iter() {
                let lsn = Lsn(p.lsn());
                let block = if Some(p.block()) == init_block {
                    BlockRef::new(p.tag()).will_init()
                } else if wal.needs_full_page_image(lsn) {
                    let view = HeapPage::parse(p, self.page_id(p.block()))?;
                    BlockRef::with_image(p.tag(), p, Hole::between(view.lower(), view.upper())?)?
                } else {
                    fpw_lsn = Some(fpw_lsn.map_or(lsn, |m| m.min(lsn)));
                    BlockRef::new(p.tag())
                };
                builder = builder.block(block);
            }
            let record = builder.payload(payload.clone()).build()?;
            let placed = match fpw_lsn {
                None => Some(wal.insert(&record)?),
                Some(lsn) => wal.insert_unless_image_needed(&record, lsn)?,
            };
            if let Some((_start, end)) = placed {
                for p in pages.iter_mut() {
                    p.set_lsn(end.as_u64());
                }
                return Ok(());
            }
            // A checkpoint moved the redo point: decide the images again.
        }
    }
}
