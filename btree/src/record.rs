//! WAL records of the B-tree and their redo.
//!
//! Every change to an index page is logged while the page's exclusive lock is
//! held, in PostgreSQL's order: change the page, mark it dirty, insert the
//! record, set the page LSN to the record's *end* LSN. The first change to a
//! page after the checkpoint's redo point carries a full-page image (without
//! the hole between `lower` and `upper`), decided with
//! `wal.needs_full_page_image` and inserted with `insert_unless_image_needed`,
//! exactly as heap does.
//!
//! | info | record | blocks | payload | redo |
//! |---|---|---|---|---|
//! | 0x10 `CREATE` | new index | meta, root leaf | none | restore both images |
//! | 0x20 `INSERT_LEAF` | an entry added to a leaf | leaf | the item | insert at its (key, TID) place |
//! | 0x30 `INSERT_DOWNLINK` | a pivot added to an internal page, finishing the child's split | parent, child | the item | insert; clear the child's `INCOMPLETE_SPLIT` |
//! | 0x40 `SPLIT` | a page split in two (and, for an internal page, the child whose downlink it took) | left, right[, child] | none | restore the images |
//! | 0x50 `NEWROOT` | a new root above a split root | new root, old root, meta | none | restore the images |
//! | 0x60 `VACUUM` | entries removed from a leaf | leaf | u16 count, u16 item numbers | remove those items |
//! | 0x70 `NEWPAGES` | pages written by the sorted build (one finished page; at the end the leftmost leaf and the meta page together) | 1 or more | none | restore the images |
//!
//! Splits, new roots and index creation are logged with **full images of every
//! page they change**: the simplest record that is certainly enough to rebuild
//! both halves, at the price of up to 3 x 8 KiB of WAL per split (PostgreSQL
//! logs the right half's items and the left half's new contents instead).
//! A split happens once per few hundred inserts, so this is a small share of
//! the WAL. Inserts and vacuum are logged logically (an item, a list of item
//! numbers) and replayed only on pages whose LSN is older than the record.
//!
//! A split is two records: `SPLIT` (the left page gets `INCOMPLETE_SPLIT`)
//! and then `INSERT_DOWNLINK` or `SPLIT` at the parent level, or `NEWROOT`,
//! which clears the flag. A crash between them leaves the flag on disk:
//! searches still find everything (the right sibling is reached by moving
//! right), and the next insert that meets the flagged page finishes the split.

use bufmgr::{BufferPool, PAGE_SIZE, PageWrite};
use wal::{BlockRef, Hole, Lsn, Record, RmgrKind, Wal};

use crate::error::{BtreeError, Result};
use crate::page::{
    self, INCOMPLETE_SPLIT, META_END, PageId, TreePage, build_page, decode_item, insert_item,
};

pub const CREATE: u8 = 0x10;
pub const INSERT_LEAF: u8 = 0x20;
pub const INSERT_DOWNLINK: u8 = 0x30;
pub const SPLIT: u8 = 0x40;
pub const NEWROOT: u8 = 0x50;
pub const VACUUM: u8 = 0x60;
/// Full images of pages written by the sorted build (`Index::build_sorted`).
pub const NEWPAGES: u8 = 0x70;

/// The hole of a B-tree page's image: the free space of a tree page, the
/// tail of the meta page, none for anything else.
fn page_hole(page: &[u8]) -> Result<Hole> {
    Ok(match page::page_kind(page) {
        Some(k) if k.is_meta => Hole::new(META_END, PAGE_SIZE - META_END)?,
        Some(_) => {
            let lower = u16::from_le_bytes([page[24], page[25]]) as usize;
            let upper = u16::from_le_bytes([page[26], page[27]]) as usize;
            Hole::between(lower, upper).unwrap_or(Hole::NONE)
        }
        None => Hole::NONE,
    })
}

/// Steps 2-4 of the module docs for the changed, exclusively locked `pages`.
/// `images` forces a full image of every page (splits, new roots).
pub(crate) fn log(
    wal: Option<&Wal>,
    info: u8,
    pages: &mut [&mut PageWrite<'_>],
    payload: &[u8],
    images: bool,
) -> Result<()> {
    for p in pages.iter_mut() {
        p.mark_dirty();
    }
    let Some(wal) = wal else {
        return Ok(());
    };
    loop {
        // Index changes are not undone at abort, so they belong to no transaction.
        let mut builder = Record::builder(RmgrKind::Btree, info, 0);
        let mut fpw_lsn: Option<Lsn> = None;
        for p in pages.iter() {
            let lsn = Lsn(p.lsn());
            let block = if images || wal.needs_full_page_image(lsn) {
                BlockRef::with_image(p.tag(), p, page_hole(p)?)?
            } else {
                fpw_lsn = Some(fpw_lsn.map_or(lsn, |m| m.min(lsn)));
                BlockRef::new(p.tag())
            };
            builder = builder.block(block);
        }
        let record = builder.payload(payload.to_vec()).build()?;
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
        // A checkpoint moved the redo point since we decided: decide again.
    }
}

/// Replay one B-tree record whose end is `end_lsn` into `pool`. Pages whose
/// LSN is at or past `end_lsn` already hold the change and are left alone;
/// images are always restored (replay runs forward from the redo point, so a
/// later record brings the page up to date again).
pub fn redo(record: &Record, end_lsn: Lsn, pool: &BufferPool) -> Result<()> {
    if record.kind() != RmgrKind::Btree {
        return Err(BtreeError::BadRecord(format!(
            "{:?} record given to B-tree redo",
            record.kind()
        )));
    }
    let info = record.info();
    let nblocks = record.blocks().len();
    let expected = match info {
        CREATE => 2..=2,
        INSERT_LEAF | VACUUM => 1..=1,
        INSERT_DOWNLINK => 2..=2,
        SPLIT => 2..=3,
        NEWROOT => 3..=3,
        NEWPAGES => 1..=wal::record::MAX_BLOCK_REFS,
        other => {
            return Err(BtreeError::BadRecord(format!(
                "unknown info code {other:#x}"
            )));
        }
    };
    if !expected.contains(&nblocks) {
        return Err(BtreeError::BadRecord(format!(
            "record {info:#x} references {nblocks} blocks"
        )));
    }
    for (i, bref) in record.blocks().iter().enumerate() {
        let tag = bref.tag();
        let image = record.restore_page(i);
        if matches!(info, CREATE | SPLIT | NEWROOT | NEWPAGES) && image.is_none() {
            return Err(BtreeError::BadRecord(format!(
                "record {info:#x} block {i} ({tag}) has no image"
            )));
        }
        let mut page = pool.read_buffer_for_redo(tag.relfork(), tag.block, image.is_some())?;
        if let Some(img) = image {
            page.copy_from_slice(&img[..]);
        } else if Lsn(page.lsn()) >= end_lsn {
            continue;
        } else {
            let id = PageId {
                rel: tag.rel,
                block: tag.block,
            };
            apply(info, i, record.payload(), &mut page, id)?;
        }
        page.set_lsn(end_lsn.as_u64());
        page.mark_dirty();
    }
    Ok(())
}

/// Apply a logical record to block reference `i`.
fn apply(info: u8, i: usize, payload: &[u8], page: &mut PageWrite<'_>, id: PageId) -> Result<()> {
    let tp = TreePage::parse(page, id)?;
    match (info, i) {
        (INSERT_LEAF, 0) | (INSERT_DOWNLINK, 0) => {
            let item = decode_item(payload, !tp.is_leaf(), tp.layout(), id)?;
            let pos = tp.lower_bound(&item.search_key())?;
            if tp
                .slot_len(payload.len())
                .is_none_or(|slot| tp.free_space() < slot)
            {
                return Err(id.corrupt("redo: no room for a logged insert"));
            }
            let index = pos + usize::from(tp.has_high_key());
            let payload = payload.to_vec();
            insert_item(page, index, &payload);
        }
        (INSERT_DOWNLINK, 1) => {
            let flags = tp.flags & !INCOMPLETE_SPLIT;
            page::set_flags(page, flags);
        }
        (VACUUM, 0) => {
            let dead = decode_vacuum(payload)?;
            let mut items = tp.all_items()?;
            let first = usize::from(tp.has_high_key());
            for &d in dead.iter().rev() {
                let at = first + d as usize;
                if at >= items.len() {
                    return Err(id.corrupt(format!("redo: vacuum of item {d} beyond the page")));
                }
                items.remove(at);
            }
            let h = page::Header {
                flags: tp.flags,
                level: tp.level,
                right: tp.right,
                layout: tp.layout(),
            };
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            build_page(page, h, &refs);
        }
        _ => {
            return Err(BtreeError::BadRecord(format!(
                "record {info:#x} has no block {i}"
            )));
        }
    }
    Ok(())
}

/// Payload of a `VACUUM` record: the data item numbers removed, ascending.
pub(crate) fn encode_vacuum(dead: &[u16]) -> Vec<u8> {
    let mut v = Vec::with_capacity(2 + 2 * dead.len());
    v.extend_from_slice(&(dead.len() as u16).to_le_bytes());
    for d in dead {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v
}

fn decode_vacuum(p: &[u8]) -> Result<Vec<u16>> {
    let bad = || BtreeError::BadRecord(format!("vacuum payload of {} bytes", p.len()));
    if p.len() < 2 {
        return Err(bad());
    }
    let n = u16::from_le_bytes([p[0], p[1]]) as usize;
    if p.len() != 2 + 2 * n {
        return Err(bad());
    }
    let v: Vec<u16> = p[2..]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    if v.windows(2).any(|w| w[0] >= w[1]) {
        return Err(BtreeError::BadRecord(
            "vacuum item numbers not ascending".into(),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vacuum_payload_round_trips_and_rejects_garbage() {
        let p = encode_vacuum(&[1, 4, 9]);
        assert_eq!(decode_vacuum(&p).unwrap(), vec![1, 4, 9]);
        assert!(decode_vacuum(&p[..3]).is_err());
        assert!(decode_vacuum(&encode_vacuum(&[4, 1])).is_err());
    }
}
