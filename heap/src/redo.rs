//! Redo: repeating heap WAL records on pages after a crash.
//!
//! For each block a record references, in order:
//! 1. If the reference carries a full-page image, the page becomes the image
//!    (zeros in the hole), whatever was there: this is how torn pages are
//!    repaired. Such a page, and one an initialising record rebuilds, is
//!    never read from disk (`BufferPool::read_buffer_zeroed`, PostgreSQL's
//!    `RBM_ZERO_AND_LOCK`): the copy there may be torn.
//! 2. Else, if the page LSN is at or past the record's end LSN, the change is
//!    already on the page: skip it (redo is idempotent).
//! 3. Else apply the change with the same page functions the live path used
//!    ([`crate::page`]), so the page gets the same bytes (hint bits aside:
//!    they are not logged).
//! 4. Set the page LSN to the record's end LSN and mark the buffer dirty.
//!
//! A block past the end of the relation's file (the file lost writes, or is
//! empty) is created by extending the relation. Records carry everything
//! needed: offsets, whole tuple bytes, the pointers a prune changed.

use bufmgr::BufferPool;
use wal::{Lsn, Record, RmgrKind};

use crate::error::{HeapError, Result};
use crate::page::{self, HeapPage, PageId};
use crate::record::HeapRecord;
use crate::tuple::{Tid, TupleHeader};

/// Replay one heap record that ends at `lsn_end` into `pool`.
pub fn redo(record: &Record, lsn_end: Lsn, pool: &BufferPool) -> Result<()> {
    if record.kind() != RmgrKind::Heap {
        return Err(HeapError::BadRecord(format!(
            "{:?} record given to heap redo",
            record.kind()
        )));
    }
    let rec = HeapRecord::decode(record.info(), record.payload())?;
    let expected_blocks: &[usize] = match rec {
        HeapRecord::Update { .. } => &[1, 2],
        _ => &[1],
    };
    if !expected_blocks.contains(&record.blocks().len()) {
        return Err(HeapError::BadRecord(format!(
            "heap record {rec:?} references {} blocks",
            record.blocks().len()
        )));
    }
    for (i, bref) in record.blocks().iter().enumerate() {
        let tag = bref.tag();
        let image = record.restore_page(i);
        let rewrites_page = image.is_some() || initializes(&rec, i, record.blocks().len());
        let mut page = pool.read_buffer_for_redo(tag.relfork(), tag.block, rewrites_page)?;
        if let Some(img) = image {
            page.copy_from_slice(&img[..]);
        } else if Lsn(page.lsn()) >= lsn_end {
            continue;
        } else {
            apply(
                &rec,
                record,
                i,
                &mut page,
                PageId {
                    rel: tag.rel,
                    block: tag.block,
                },
            )?;
        }
        page.set_lsn(lsn_end.as_u64());
        page.mark_dirty();
    }
    Ok(())
}

/// The change `rec` makes to its block number `i`.
fn apply(rec: &HeapRecord, record: &Record, i: usize, page: &mut [u8], id: PageId) -> Result<()> {
    let xid = record.xid();
    match rec {
        HeapRecord::Insert {
            offset,
            init,
            tuple,
        } => {
            if *init {
                page::init(page);
            }
            page::add_tuple(page, id, *offset, tuple)
        }
        HeapRecord::Delete { offset } => {
            set_xmax(page, id, *offset, xid, Tid::new(id.block, *offset))
        }
        HeapRecord::Update {
            old_offset,
            new_offset,
            init,
            tuple,
        } => {
            let blocks = record.blocks();
            let new_block = blocks.last().expect("checked: 1 or 2 blocks").tag().block;
            let new_tid = Tid::new(new_block, *new_offset);
            let old_page = i == 0;
            let new_page = i + 1 == blocks.len();
            if new_page {
                if *init {
                    page::init(page);
                }
                page::add_tuple(page, id, *new_offset, tuple)?;
            }
            if old_page {
                set_xmax(page, id, *old_offset, xid, new_tid)?;
            }
            Ok(())
        }
        HeapRecord::Prune { prune_xid, changes } => {
            page::apply_prune(page, id, changes, *prune_xid)
        }
        HeapRecord::Vacuum { offsets } => page::apply_vacuum(page, id, offsets),
    }
}

fn set_xmax(page: &mut [u8], id: PageId, offset: u16, xid: u64, ctid: Tid) -> Result<()> {
    let (_, mut h): (usize, TupleHeader) = HeapPage::parse(page, id)?
        .header(offset)?
        .ok_or_else(|| id.corrupt(format!("redo: line pointer {offset} has no tuple")))?;
    h.set_xmax(xid, ctid);
    page::put_header(page, id, offset, &h)?;
    page::set_prunable(page, xid);
    Ok(())
}

/// Does `rec` initialise its block number `i` from scratch (a "will init"
/// insert or update target)? Such a page is never read before redo.
fn initializes(rec: &HeapRecord, i: usize, nblocks: usize) -> bool {
    match rec {
        HeapRecord::Insert { init, .. } => *init,
        HeapRecord::Update { init, .. } => *init && i + 1 == nblocks,
        _ => false,
    }
}
