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
//! | 0x80 `REWRITE_LEAF` | items of a leaf removed or replaced: a TID added to a posting list (which may become two), a vacuum that removes TIDs from posting lists | leaf | u16 count, u16 item numbers removed; u16 count, per replaced item: u16 item number, u16 count, per new item u16 length and bytes | rebuild the leaf with those changes |
//! | 0x90 `DEDUP` | a leaf whose runs of equal keys were merged into posting lists (a dedup pass instead of a split) | leaf | none | restore the image |
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
/// Leaf items removed or replaced (posting lists changed).
pub const REWRITE_LEAF: u8 = 0x80;
/// A leaf's dedup pass, as a full image.
pub const DEDUP: u8 = 0x90;

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
        INSERT_LEAF | VACUUM | REWRITE_LEAF | DEDUP => 1..=1,
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
        if matches!(info, CREATE | SPLIT | NEWROOT | NEWPAGES | DEDUP) && image.is_none() {
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
        (REWRITE_LEAF, 0) => {
            let (dead, repl) = decode_rewrite(payload)?;
            if !tp.is_leaf() {
                return Err(id.corrupt("redo: a leaf rewrite on an internal page"));
            }
            let old: Vec<Vec<u8>> = (0..tp.data_len())
                .map(|j| tp.data(j).map(|it| it.raw.to_vec()))
                .collect::<Result<_>>()?;
            if let Some(&d) = dead
                .iter()
                .chain(repl.iter().map(|(j, _)| j))
                .find(|&&d| usize::from(d) >= old.len())
            {
                return Err(id.corrupt(format!(
                    "redo: rewrite of item {d} of {} on the page",
                    old.len()
                )));
            }
            let mut items = Vec::with_capacity(old.len());
            for (j, raw) in old.into_iter().enumerate() {
                if dead.binary_search(&(j as u16)).is_ok() {
                    continue;
                }
                match repl.iter().find(|(r, _)| usize::from(*r) == j) {
                    Some((_, new)) => items.extend(new.iter().cloned()),
                    None => items.push(raw),
                }
            }
            let hk = tp.high_key()?.map(|h| h.raw.to_vec());
            if page::space_for(hk.iter().chain(items.iter()).map(Vec::as_slice))
                > page::PAGE_CAPACITY
            {
                return Err(id.corrupt("redo: no room for a logged leaf rewrite"));
            }
            let frame = crate::insert::leaf_frame(&tp)?;
            crate::insert::rebuild_leaf(page, frame, &items);
        }
        _ => {
            return Err(BtreeError::BadRecord(format!(
                "record {info:#x} has no block {i}"
            )));
        }
    }
    Ok(())
}

/// A data item number and the items that replace it.
pub(crate) type Replacement = (u16, Vec<Vec<u8>>);

/// Payload of a `REWRITE_LEAF` record: data item numbers removed
/// (ascending), then replaced items (ascending item numbers) with their
/// new items.
pub(crate) fn encode_rewrite(dead: &[u16], repl: &[Replacement]) -> Vec<u8> {
    let mut v = encode_vacuum(dead);
    v.extend_from_slice(&(repl.len() as u16).to_le_bytes());
    for (j, items) in repl {
        v.extend_from_slice(&j.to_le_bytes());
        v.extend_from_slice(&(items.len() as u16).to_le_bytes());
        for it in items {
            v.extend_from_slice(&(it.len() as u16).to_le_bytes());
            v.extend_from_slice(it);
        }
    }
    v
}

fn decode_rewrite(p: &[u8]) -> Result<(Vec<u16>, Vec<Replacement>)> {
    let bad = |what: &str| BtreeError::BadRecord(format!("leaf rewrite payload: {what}"));
    let u16_at = |at: usize| -> Result<u16> {
        p.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .ok_or_else(|| bad("shorter than its counts say"))
    };
    let ndead = usize::from(u16_at(0)?);
    let mut at = 2 + 2 * ndead;
    let dead = decode_vacuum(p.get(..at).ok_or_else(|| bad("dead list cut short"))?)?;
    let nrepl = usize::from(u16_at(at)?);
    at += 2;
    let mut repl: Vec<Replacement> = Vec::with_capacity(nrepl.min(1024));
    for _ in 0..nrepl {
        let j = u16_at(at)?;
        let m = usize::from(u16_at(at + 2)?);
        at += 4;
        if m == 0 {
            return Err(bad("a replacement by no item"));
        }
        if repl.last().is_some_and(|(r, _)| *r >= j) || dead.binary_search(&j).is_ok() {
            return Err(bad("replaced item numbers not ascending or also removed"));
        }
        let mut items = Vec::with_capacity(m.min(16));
        for _ in 0..m {
            let len = usize::from(u16_at(at)?);
            at += 2;
            let it = p
                .get(at..at + len)
                .ok_or_else(|| bad("an item runs past the end"))?;
            items.push(it.to_vec());
            at += len;
        }
        repl.push((j, items));
    }
    if at != p.len() {
        return Err(bad("bytes after the last replacement"));
    }
    Ok((dead, repl))
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

    #[test]
    fn rewrite_payload_round_trips_and_rejects_garbage() {
        let repl = vec![
            (2u16, vec![vec![1u8, 2, 3], vec![4u8]]),
            (5, vec![vec![9u8]]),
        ];
        let p = encode_rewrite(&[1, 3], &repl);
        assert_eq!(decode_rewrite(&p).unwrap(), (vec![1, 3], repl.clone()));
        for cut in 0..p.len() {
            assert!(decode_rewrite(&p[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_rewrite(&encode_rewrite(&[2], &repl)).is_err());
        let mut long = p.clone();
        long.push(0);
        assert!(decode_rewrite(&long).is_err());
    }
}
