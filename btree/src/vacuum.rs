//! Vacuum: remove leaf entries that point to dead heap tuples.
//!
//! Walk the leaf level left to right by right links, through the buffer
//! pool's vacuum ring (so a vacuum of a large index does not flood the pool),
//! one exclusively locked page at a time. On each leaf, ask `is_dead` about
//! every entry's TID, rebuild the page without the dead ones and log a
//! `VACUUM` record with their item numbers. A posting list loses its dead
//! TIDs (a rewritten list, or a plain item for the one TID left) and goes
//! as a whole when all are dead; a page where that happened is logged as
//! `REWRITE_LEAF` (removed item numbers and rewritten items) instead.
//!
//! A page split while vacuum runs moves entries only to the right, onto a
//! page between the one just cleaned and the saved right link: those entries
//! were cleaned already, so nothing is missed.
//!
//! Not done: pages are never merged or deleted, even when empty (an empty
//! leaf keeps its place in the chain and its downlink; later inserts in its
//! key range reuse it). PostgreSQL deletes empty pages in two stages; we do
//! not, so an index never shrinks. There is no "cycle ID" either: it is
//! only needed by PostgreSQL's physical-order scan.

use heap::tuple::Tid;

use crate::error::Result;
use crate::index::Index;
use crate::page::{self, Header, TreePage, build_page};
use crate::record;

/// What a vacuum did.
#[derive(Copy, Clone, PartialEq, Eq, Default, Debug)]
pub struct VacuumStats {
    /// Leaf pages visited.
    pub pages: u64,
    /// Leaf pages changed.
    pub pages_changed: u64,
    /// Entries removed.
    pub removed: u64,
    /// Entries left.
    pub remaining: u64,
}

impl Index {
    /// Remove every entry whose heap tuple `is_dead`.
    pub fn vacuum(&self, is_dead: impl Fn(Tid) -> bool) -> Result<VacuumStats> {
        let mut stats = VacuumStats::default();
        let mut ring = self.pool.ring(bufmgr::RingKind::Vacuum);
        let mut block = Some(self.leftmost(0)?);
        while let Some(b) = block {
            let mut page = self
                .pool
                .read_buffer(self.relfork(), b, ring.as_mut())?
                .lock_exclusive();
            let tp = TreePage::parse(&page, self.page_id(b))?;
            if !tp.is_leaf() {
                return Err(self
                    .page_id(b)
                    .corrupt("the leaf chain leads to an internal page"));
            }
            stats.pages += 1;
            block = tp.right_link();
            let mut dead: Vec<u16> = Vec::new();
            let mut repl: Vec<record::Replacement> = Vec::new();
            let mut keep: Vec<Vec<u8>> = Vec::new();
            if let Some(hk) = tp.high_key()? {
                keep.push(hk.raw.to_vec());
            }
            let id = self.page_id(b);
            for j in 0..tp.data_len() {
                let it = tp.data(j)?;
                if it.is_posting() {
                    let (gone, live): (Vec<Tid>, Vec<Tid>) =
                        it.tids(id)?.partition(|&t| is_dead(t));
                    stats.removed += gone.len() as u64;
                    stats.remaining += live.len() as u64;
                    if live.is_empty() {
                        dead.push(j as u16);
                    } else if gone.is_empty() {
                        keep.push(it.raw.to_vec());
                    } else {
                        let mut new = Vec::new();
                        page::encode_postings(it.key, &live, &mut new);
                        keep.extend(new.iter().cloned());
                        repl.push((j as u16, new));
                    }
                } else if is_dead(it.tid) {
                    stats.removed += 1;
                    dead.push(j as u16);
                } else {
                    stats.remaining += 1;
                    keep.push(it.raw.to_vec());
                }
            }
            if dead.is_empty() && repl.is_empty() {
                continue;
            }
            stats.pages_changed += 1;
            let h = Header {
                flags: tp.flags,
                level: tp.level,
                right: tp.right,
                layout: tp.layout(),
            };
            let refs: Vec<&[u8]> = keep.iter().map(Vec::as_slice).collect();
            build_page(&mut page, h, &refs);
            let (info, payload) = if repl.is_empty() {
                (record::VACUUM, record::encode_vacuum(&dead))
            } else {
                (record::REWRITE_LEAF, record::encode_rewrite(&dead, &repl))
            };
            record::log(self.wal.as_deref(), info, &mut [&mut page], &payload, false)?;
        }
        Ok(stats)
    }
}
