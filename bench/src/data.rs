//! The benchmark relations: plain pages that name themselves, built through
//! the pool's public API and checked after every run.
//!
//! ```text
//!  offset  size  field
//!  0       12    page LSN and checksum: the pool's (left alone here)
//!  12      4     block number (LE u32): checked on every access of a run
//!  16      4     relation number (LE u32)
//!  20      ...   "bufbench" repeated to the end of the page
//! ```
//!
//! A relation is built once and reused by later runs while its file in the
//! data directory has exactly the wanted number of blocks (and a sample of
//! its pages checks out); otherwise it is dropped and built again. Building
//! extends the relation page by page through a bulk-write ring, as COPY
//! would, then checkpoints (`flush_all`) so the pages are on disk with their
//! checksums before any measured run reads them.

use std::sync::Arc;

use bufmgr::page::OWNER_HEADER_OFFSET;
use bufmgr::{BlockNumber, BufferPool, FileStorage, PoolConfig, RelFork, RelId, RingKind};

use crate::common::progress_bar;
use crate::error::{BenchError, Result};

/// Where the block number lives in a benchmark page.
pub const BLOCK_OFFSET: usize = OWNER_HEADER_OFFSET;
/// Where the relation number lives.
pub const REL_OFFSET: usize = BLOCK_OFFSET + 4;
/// Where the repeated pattern starts.
pub const PATTERN_OFFSET: usize = REL_OFFSET + 4;
/// The pattern that fills the rest of the page: easy to spot in a hex dump.
pub const PATTERN: &[u8; 8] = b"bufbench";

/// Pages sampled from a cached relation before trusting it (first, last and
/// evenly spaced ones between).
const REUSE_SAMPLE: u32 = 16;

/// Write a benchmark page's contents (everything past the pool's header).
pub fn fill_page(page: &mut [u8], rel: RelId, block: BlockNumber) {
    page[BLOCK_OFFSET..REL_OFFSET].copy_from_slice(&block.to_le_bytes());
    page[REL_OFFSET..PATTERN_OFFSET].copy_from_slice(&rel.0.to_le_bytes());
    for chunk in page[PATTERN_OFFSET..].chunks_mut(PATTERN.len()) {
        chunk.copy_from_slice(&PATTERN[..chunk.len()]);
    }
}

/// The block number a benchmark page says it is (the hot-loop check).
#[inline]
pub fn page_block(page: &[u8]) -> BlockNumber {
    let mut b = [0u8; 4];
    b.copy_from_slice(&page[BLOCK_OFFSET..REL_OFFSET]);
    BlockNumber::from_le_bytes(b)
}

/// The whole-page check: block number, relation and pattern. `Err` says what
/// is wrong.
pub fn check_page(page: &[u8], rel: RelId, block: BlockNumber) -> Result<(), String> {
    let found = page_block(page);
    if found != block {
        return Err(format!("block {block} holds block number {found}"));
    }
    let mut r = [0u8; 4];
    r.copy_from_slice(&page[REL_OFFSET..PATTERN_OFFSET]);
    let found_rel = u32::from_le_bytes(r);
    if found_rel != rel.0 {
        return Err(format!(
            "block {block} holds relation number {found_rel}, not {}",
            rel.0
        ));
    }
    let bad = page[PATTERN_OFFSET..]
        .chunks(PATTERN.len())
        .position(|c| c != &PATTERN[..c.len()]);
    if let Some(i) = bad {
        return Err(format!(
            "block {block}: pattern damaged at byte {}",
            PATTERN_OFFSET + i * PATTERN.len()
        ));
    }
    Ok(())
}

/// Read `blocks` of `rel` through `pool` and check each page whole.
/// Returns the descriptions of the bad ones (at most `limit`) and their count.
fn check_blocks(
    pool: &BufferPool,
    rel: RelId,
    blocks: impl Iterator<Item = BlockNumber>,
    limit: usize,
    mut progress: impl FnMut(),
) -> Result<(u64, Vec<String>)> {
    let rf = RelFork::main(rel);
    let mut bad = 0u64;
    let mut first_bad = Vec::new();
    for block in blocks {
        let page = pool.read_buffer(rf, block, None)?.lock_shared();
        if let Err(e) = check_page(&page, rel, block) {
            bad += 1;
            if first_bad.len() < limit {
                first_bad.push(e);
            }
        }
        progress();
    }
    Ok((bad, first_bad))
}

/// Make sure `rel` holds exactly `nblocks` benchmark pages. Returns whether a
/// cached relation was reused. `pool_buffers` sizes the pool used to build.
pub fn ensure_relation(
    storage: &Arc<FileStorage>,
    rel: RelId,
    nblocks: BlockNumber,
    pool_buffers: usize,
    progress: bool,
) -> Result<bool> {
    let rf = RelFork::main(rel);
    let pool = BufferPool::new(PoolConfig::new(pool_buffers), storage.clone())?;
    if pool.storage().exists(rf)? && pool.nblocks(rf)? == nblocks && nblocks > 0 {
        let step = (nblocks / REUSE_SAMPLE).max(1);
        let sample = (0..nblocks).step_by(step as usize).chain([nblocks - 1]);
        let (bad, _) = check_blocks(&pool, rel, sample, 0, || {})?;
        if bad == 0 {
            println!(
                "reusing {} ({nblocks} blocks) in {}",
                rf,
                storage.base_dir().display()
            );
            return Ok(true);
        }
    }
    pool.drop_relation(rel)?;
    pool.create_fork(rf)?;
    let pb = progress_bar(
        u64::from(nblocks),
        progress,
        &format!("building {rf}: {nblocks} blocks"),
    );
    let mut ring = pool.ring(RingKind::BulkWrite);
    for block in 0..nblocks {
        let mut page = pool.extend(rf, ring.as_mut())?;
        if page.block() != block {
            return Err(BenchError::Data(format!(
                "extending {rf} gave block {}, expected {block}",
                page.block()
            )));
        }
        fill_page(&mut page, rel, block);
        page.mark_dirty();
        drop(page);
        if block % 1024 == 0 {
            pb.set_position(u64::from(block));
        }
    }
    drop(ring);
    pb.set_message(format!("building {rf}: checkpoint"));
    pool.flush_all(true)?;
    pb.finish_and_clear();
    println!(
        "built {rf}: {nblocks} blocks ({} MiB) in {}",
        (u64::from(nblocks) * bufmgr::PAGE_SIZE as u64) >> 20,
        storage.base_dir().display()
    );
    Ok(false)
}

/// The end-of-run data check: every block of `rel` read once through a fresh
/// pool of `pool_buffers` and checked whole. Returns the number of blocks
/// checked, or [`BenchError::Data`] naming the first bad pages.
pub fn verify_relation(
    storage: &Arc<FileStorage>,
    rel: RelId,
    nblocks: BlockNumber,
    pool_buffers: usize,
    progress: bool,
) -> Result<u64> {
    let rf = RelFork::main(rel);
    let pool = BufferPool::new(PoolConfig::new(pool_buffers), storage.clone())?;
    let on_disk = pool.nblocks(rf)?;
    if on_disk != nblocks {
        return Err(BenchError::Data(format!(
            "{rf} has {on_disk} blocks, expected {nblocks}"
        )));
    }
    let pb = progress_bar(u64::from(nblocks), progress, &format!("data check {rf}"));
    let mut n = 0u64;
    let (bad, first) = check_blocks(&pool, rel, 0..nblocks, 5, || {
        n += 1;
        if n.is_multiple_of(1024) {
            pb.set_position(n);
        }
    })?;
    pb.finish_and_clear();
    if bad > 0 {
        return Err(BenchError::Data(format!(
            "{bad} of {nblocks} blocks of {rf} are wrong, first: {}",
            first.join("; ")
        )));
    }
    Ok(u64::from(nblocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_page_checks_and_a_damaged_one_does_not() {
        let mut p = vec![0u8; bufmgr::PAGE_SIZE];
        fill_page(&mut p, RelId(3), 77);
        assert_eq!(page_block(&p), 77);
        check_page(&p, RelId(3), 77).unwrap();
        assert!(check_page(&p, RelId(3), 78).unwrap_err().contains("78"));
        assert!(check_page(&p, RelId(4), 77).is_err());
        p[5000] ^= 1;
        assert!(
            check_page(&p, RelId(3), 77)
                .unwrap_err()
                .contains("pattern")
        );
    }
}
