//! Vacuum in two passes over the heap, with the indexes in between
//! (PostgreSQL's lazy vacuum: `lazy_scan_heap`, `lazy_vacuum_all_indexes`,
//! `lazy_vacuum_heap_rel`).
//!
//! ```text
//!  pass 1  Heap::lazy_scan_heap(horizon)      every page through the vacuum ring, exclusive lock:
//!          -> (stats, dead TIDs)              prune (dead versions -> Dead pointers, storage
//!                                             reclaimed, one PRUNE record per changed page),
//!                                             collect every Dead pointer, fsm[block] = free space
//!  caller  remove index entries whose TID is in the set (exactly those; nothing else)
//!  pass 2  Heap::free_dead(&dead TIDs)        the listed pages (a block-list read stream) through
//!                                             the vacuum ring, exclusive lock:
//!          -> FreeDeadStats                   listed pointers that are Dead -> Unused (others are
//!                                             left alone), one VACUUM record per changed page,
//!                                             fsm[block] = free space
//! ```
//!
//! Rules:
//! 1. Only pass 2 makes a pointer `Unused`, and only a pointer pass 1 (or an
//!    earlier prune) made `Dead`. Inserts reuse `Unused` pointers only, so
//!    a `Dead` pointer keeps its TID until pass 2: an index entry naming it
//!    can never come to name another tuple while it exists.
//! 2. A tuple that becomes dead after pass 1 (a rollback racing the vacuum)
//!    is not in the set: its index entries and its pointer both stay, for
//!    the next vacuum. So the caller's index pass needs no heap access and
//!    no lock against aborts.
//! 3. Pass 2 checks each listed pointer under the page's exclusive lock and
//!    frees it only if it is still `Dead` (a pointer already freed, or a TID
//!    past the page's pointers or the relation's end, is counted in
//!    `not_dead` and skipped). Redo of a VACUUM record refuses a pointer
//!    that is not dead (`page::apply_vacuum`).
//! 4. Two vacuums of one relation must not overlap (the second's set could
//!    name a pointer the first freed and an insert reused): the caller
//!    serialises them (the engine takes a per-table vacuum mutex, as
//!    PostgreSQL's `ShareUpdateExclusiveLock` does).
//!
//! [`Heap::vacuum`] runs both passes back to back, for relations that no
//! index refers to. The relation is never truncated.

use std::collections::BTreeSet;

use bufmgr::{BlockNumber, RingKind, StreamConfig};
use wal::Xid;

use crate::error::Result;
use crate::heap::Heap;
use crate::page::{self, HeapPage, LpState};
use crate::prune::PruneStats;
use crate::record::HeapRecord;
use crate::tuple::Tid;
use crate::txn::{INVALID_XID, TransactionStatus};

/// The TIDs whose line pointers pass 1 found dead, in TID order.
pub type DeadTids = BTreeSet<Tid>;

/// What a vacuum of a relation did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct VacuumStats {
    /// Pages visited by pass 1.
    pub pages_scanned: u64,
    /// Pages pass 1 changed (a PRUNE record each, when logged).
    pub pages_pruned: u64,
    /// Totals over all pages: tuples removed, bytes gained and recently
    /// dead tuples kept by pass 1, line pointers freed by pass 2.
    pub pruned: PruneStats,
    /// Dead line pointers pass 1 found (the TIDs handed to the indexes
    /// and to pass 2), including those an earlier prune left.
    pub dead_pointers: u64,
    /// Pages pass 2 changed (a VACUUM record each, when logged).
    pub pages_vacuumed: u64,
    /// Tuples pass 1 left in place (normal line pointers after pruning:
    /// live rows, versions some snapshot may still see, and those of
    /// transactions in progress). The engine's autovacuum takes it as the
    /// table's tuple estimate, PostgreSQL's `reltuples` (which counts live
    /// tuples only; ours is an upper bound of that).
    /// (Of those, `pruned.recently_dead` are versions kept only for
    /// snapshots that may still see them.)
    pub tuples_remaining: u64,
    /// Whether the vacuum ring was used.
    pub used_ring: bool,
}

/// What pass 2 ([`Heap::free_dead`]) did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct FreeDeadStats {
    /// Pages changed (a VACUUM record each, when logged).
    pub pages_vacuumed: u64,
    /// Line pointers made unused.
    pub line_pointers_freed: u64,
    /// Listed TIDs whose pointer was not dead (skipped).
    pub not_dead: u64,
}

impl VacuumStats {
    /// Add what pass 2 did.
    pub fn add_pass_two(&mut self, f: FreeDeadStats) {
        self.pages_vacuumed += f.pages_vacuumed;
        self.pruned.line_pointers_freed += f.line_pointers_freed;
    }
}

impl Heap {
    /// Pass 1: prune every page (tuples dead to every snapshot older than
    /// `horizon`, see [`crate::prune`], lose their storage; their pointers
    /// become `Dead`) and return the TIDs of every `Dead` pointer. Nothing
    /// becomes `Unused` here.
    pub fn lazy_scan_heap(
        &self,
        horizon: Xid,
        oracle: &dyn TransactionStatus,
    ) -> Result<(VacuumStats, DeadTids)> {
        let nblocks = self.nblocks()?;
        let ring = self.pool().ring(RingKind::Vacuum);
        let mut stats = VacuumStats {
            used_ring: ring.is_some(),
            ..VacuumStats::default()
        };
        let mut dead = DeadTids::new();
        // Pages come from a read stream (read ahead in combined reads,
        // through the vacuum ring); each is locked exclusively in turn.
        let mut stream =
            self.pool()
                .read_stream(self.relfork(), 0..nblocks, ring, StreamConfig::default());
        loop {
            let Some(buf) = stream.next_buffer() else {
                break;
            };
            let mut page = buf?.lock_exclusive();
            let block = page.block();
            let s = self.prune_locked(&mut page, horizon, oracle)?;
            stats.pages_scanned += 1;
            if s.tuples_removed > 0 {
                stats.pages_pruned += 1;
            }
            stats.pruned.tuples_removed += s.tuples_removed;
            stats.pruned.bytes_freed += s.bytes_freed;
            stats.pruned.add_kept(&s);
            let view = HeapPage::parse(&page, self.page_id(block))?;
            if !view.is_new() {
                for off in 1..=view.item_count() {
                    match view.item(off)?.state {
                        LpState::Dead => {
                            dead.insert(Tid::new(block, off));
                        }
                        LpState::Normal => stats.tuples_remaining += 1,
                        _ => {}
                    }
                }
            }
            self.fsm().update(block, view.free_space());
        }
        stats.dead_pointers = dead.len() as u64;
        Ok((stats, dead))
    }

    /// Pass 2 (PostgreSQL's `lazy_vacuum_heap_page` for each page): make
    /// the listed pointers that are `Dead` unused, one VACUUM record per
    /// changed page; anything else listed is skipped. Call it only once no
    /// index holds an entry for these TIDs.
    pub fn free_dead(&self, dead: &DeadTids) -> Result<FreeDeadStats> {
        let mut stats = FreeDeadStats::default();
        if dead.is_empty() {
            return Ok(stats);
        }
        let nblocks = self.nblocks()?;
        // The pages to visit, each with its listed offsets, in block order.
        let mut pages: Vec<(BlockNumber, Vec<u16>)> = Vec::new();
        for t in dead {
            if t.block >= nblocks {
                stats.not_dead += 1;
            } else if let Some((b, offs)) = pages.last_mut()
                && *b == t.block
            {
                offs.push(t.offset);
            } else {
                pages.push((t.block, vec![t.offset]));
            }
        }
        // A read stream over exactly those blocks (PostgreSQL 17's vacuum
        // pass 2 reads through one too): read ahead, adjacent ones as one
        // combined read, through the vacuum ring.
        let ring = self.pool().ring(RingKind::Vacuum);
        let blocks = pages.iter().map(|&(b, _)| b).collect();
        let mut stream =
            self.pool()
                .read_stream_blocks(self.relfork(), blocks, ring, StreamConfig::default());
        for (block, offsets) in pages {
            let Some(buf) = stream.next_buffer() else {
                unreachable!("a block-list stream yields every listed block");
            };
            let mut page = buf?.lock_exclusive();
            debug_assert_eq!(page.block(), block);
            let id = self.page_id(block);
            let view = HeapPage::parse(&page, id)?;
            let mut free = Vec::with_capacity(offsets.len());
            for off in offsets {
                let is_dead = !view.is_new()
                    && off >= 1
                    && off <= view.item_count()
                    && view.item(off)?.state == LpState::Dead;
                if is_dead {
                    free.push(off);
                } else {
                    stats.not_dead += 1;
                }
            }
            if !free.is_empty() {
                page::apply_vacuum(&mut page, id, &free)?;
                stats.pages_vacuumed += 1;
                stats.line_pointers_freed += free.len() as u64;
                self.log(
                    INVALID_XID,
                    &HeapRecord::Vacuum { offsets: free },
                    &mut [&mut page],
                    None,
                )?;
            }
            let view = HeapPage::parse(&page, id)?;
            self.fsm().update(block, view.free_space());
        }
        Ok(stats)
    }

    /// Both passes back to back: for a relation no index refers to.
    pub fn vacuum(&self, horizon: Xid, oracle: &dyn TransactionStatus) -> Result<VacuumStats> {
        let (mut stats, dead) = self.lazy_scan_heap(horizon, oracle)?;
        stats.add_pass_two(self.free_dead(&dead)?);
        Ok(stats)
    }
}
