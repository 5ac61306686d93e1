//! One step of a read-only descent on an internal page read optimistically
//! (bufmgr's `BufferPool::read_optimistic`: no pin, no content lock, the
//! page's bytes copied out with relaxed atomic loads and validated by the
//! buffer's version afterwards). The header is copied out in one read and
//! parsed once per page; a probe copies one item pointer, then reads an
//! 8-byte key's item (every `i64` pivot) as words straight from the page,
//! or copies any other small item whole in one read. See "Optimistic descents" in the crate README.
//!
//! [`inner_step`] makes the decisions [`TreePage`](crate::page::TreePage)
//! makes under a shared lock (the header checks of `TreePage::parse`,
//! `beyond_high_key_at`, `child_for_at`), reading the layout drawn in
//! `page.rs` through the byte accessors of `OptimisticPage`. Until the read
//! is validated the bytes may be torn, so every offset and length taken
//! from the page is checked before use and any inconsistency is `None`
//! (never a panic, never an error): the caller then reads the page pinned
//! and under its shared lock, where a page that really breaks the layout is
//! reported as `Corrupt` by `TreePage::parse`. Nothing read here is acted
//! on before validation: the step is only a value the caller looks at once
//! `read_optimistic` has returned it.

use std::cmp::Ordering;

use bufmgr::{BlockNumber, OptimisticPage, PAGE_SIZE};
use heap::tuple::Tid;

use crate::page::{
    BTREE_MAGIC, CHILD_SIZE, DEDUP, FIXED, HAS_HIGH_KEY, HEADER_SIZE, ITEM_FIXED,
    ITEM_POINTER_SIZE, KNOWN_FLAGS, LEAF, Layout, MAX_KEY_SIZE, META_BLOCK, MINUS_INFINITY,
    NO_RIGHT, ROOT,
};

/// Where a descent goes from an internal page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// The position is at or beyond the high key: the right sibling.
    Right(BlockNumber),
    /// The child whose range holds the position.
    Child(BlockNumber),
}

/// What one internal page says to a descent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    /// The page is flagged `ROOT`.
    pub root: bool,
    pub next: Next,
}

/// The header fields a step needs, checked as `TreePage::parse` checks them.
struct Header {
    flags: u16,
    right: BlockNumber,
    upper: usize,
    nitems: usize,
}

/// The step of a descent for the position (`key`, `tid`) on the internal
/// page at `level` read through `p`; `None` if what was read is not a
/// consistent internal page at that level (torn, or really damaged).
pub(crate) fn inner_step(p: &OptimisticPage<'_>, key: &[u8], tid: Tid, level: u32) -> Option<Step> {
    let h = header(p, level)?;
    let root = h.flags & ROOT != 0;
    let has_high_key = h.flags & HAS_HIGH_KEY != 0;
    if has_high_key && cmp_item(p, &h, 0, key, tid)?.1 != Ordering::Greater {
        return Some(Step {
            root,
            next: Next::Right(h.right),
        });
    }
    let first = usize::from(has_high_key);
    let data_len = h.nitems - first;
    if data_len == 0 {
        return None;
    }
    // Index of the first pivot > position, minus one (`child_for_at`).
    // `lo` moves only past a pivot at or below the position, so the pivot
    // at `lo - 1` at the end is the last one found so: its child is kept
    // rather than read again.
    let (mut lo, mut hi) = (0, data_len);
    let mut below = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (child, ord) = cmp_item(p, &h, first + mid, key, tid)?;
        if ord != Ordering::Greater {
            lo = mid + 1;
            below = Some(child);
        } else {
            hi = mid;
        }
    }
    let child = match below {
        Some(child) => child,
        // No pivot at or below the position (the first is minus infinity
        // on a consistent page): the first pivot's child, as before.
        None => cmp_item(p, &h, first, key, tid)?.0,
    };
    if child == META_BLOCK {
        return None;
    }
    Some(Step {
        root,
        next: Next::Child(child),
    })
}

/// The header of an internal page at `level`, checked: its 16 bytes from
/// the magic on copied out in one read, then parsed from the copy.
fn header(p: &OptimisticPage<'_>, level: u32) -> Option<Header> {
    let b: [u8; HEADER_SIZE - 12] = p.array(12)?;
    let u16_at = |i: usize| u16::from_le_bytes([b[i - 12], b[i - 11]]);
    let u32_at = |i: usize| u32::from_le_bytes([b[i - 12], b[i - 11], b[i - 10], b[i - 9]]);
    if u16_at(12) != BTREE_MAGIC {
        return None;
    }
    let flags = u16_at(14);
    // FIXED and DEDUP are flags of compact leaves only (`TreePage::parse`
    // refuses them on any other page).
    if flags & !KNOWN_FLAGS != 0 || flags & (LEAF | FIXED | DEDUP) != 0 || level == 0 {
        return None;
    }
    if u32_at(16) != level {
        return None;
    }
    let right = u32_at(20);
    let lower = usize::from(u16_at(24));
    let upper = usize::from(u16_at(26));
    if lower < HEADER_SIZE
        || lower > upper
        || upper > PAGE_SIZE
        || !(lower - HEADER_SIZE).is_multiple_of(ITEM_POINTER_SIZE)
    {
        return None;
    }
    let nitems = (lower - HEADER_SIZE) / ITEM_POINTER_SIZE;
    let has_high_key = flags & HAS_HIGH_KEY != 0;
    if (has_high_key && nitems == 0) || has_high_key == (right == NO_RIGHT) {
        return None;
    }
    Some(Header {
        flags,
        right,
        upper,
        nitems,
    })
}

/// Items up to this many bytes (other than an 8-byte key's, read as words
/// by [`cmp_word_item`]) are copied out whole in one read; longer ones are
/// read field by field and their key compared in chunks.
const SMALL_ITEM: usize = 48;

/// Item `i`'s child block and its order against the position (`key`,
/// `tid`) (`Item::cmp_at`: minus infinity is below everything, else the
/// stored key bytes, then the TID), with `decode_item`'s checks, in the
/// page's item layout (its `COMPACT` flag).
fn cmp_item(
    p: &OptimisticPage<'_>,
    h: &Header,
    i: usize,
    key: &[u8],
    tid: Tid,
) -> Option<(BlockNumber, Ordering)> {
    if i >= h.nitems {
        return None;
    }
    let ptr: [u8; ITEM_POINTER_SIZE] = p.array(HEADER_SIZE + i * ITEM_POINTER_SIZE)?;
    let off = usize::from(u16::from_le_bytes([ptr[0], ptr[1]]));
    let len = usize::from(u16::from_le_bytes([ptr[2], ptr[3]]));
    let layout = Layout::of_flags(h.flags);
    let head = layout.header_len();
    let fixed = head + ITEM_FIXED + CHILD_SIZE;
    if off < h.upper || off + len > PAGE_SIZE || len < fixed {
        return None;
    }
    // A compact page's first data item is its minus-infinity pivot.
    let compact_first = i == usize::from(h.flags & HAS_HIGH_KEY != 0);
    if len == fixed + 8 {
        return cmp_word_item(p, off, layout, compact_first, key, tid);
    }
    if len <= SMALL_ITEM {
        let mut buf = [0u8; SMALL_ITEM];
        p.read(off, &mut buf[..len])?;
        return cmp_small_item(&buf[..len], layout, compact_first, key, tid);
    }
    let klen = len - fixed;
    let minus_infinity = match layout {
        Layout::Compact => compact_first,
        Layout::Headed => {
            let flags = p.u16_le(off + 2)?;
            if usize::from(p.u16_le(off)?) != klen || flags & !MINUS_INFINITY != 0 {
                return None;
            }
            flags & MINUS_INFINITY != 0
        }
    };
    if klen > MAX_KEY_SIZE {
        return None;
    }
    let t = off + head + klen;
    let child = p.u32_le(t + 6)?;
    if minus_infinity {
        return Some((child, Ordering::Less));
    }
    let ord = cmp_key(p, off + head, klen, key)?;
    let item_tid = Tid::new(p.u32_le(t)?, p.u16_le(t + 4)?);
    Some((child, ord.then(item_tid.cmp(&tid))))
}

/// [`cmp_item`] on an item of an 8-byte key (every `i64` key's pivot, the
/// common case) at `off`: its fields read as words straight from the
/// page (`OptimisticPage::u64_le`), nothing copied out. The same checks
/// and the same order as [`cmp_small_item`].
fn cmp_word_item(
    p: &OptimisticPage<'_>,
    off: usize,
    layout: Layout,
    compact_first: bool,
    key: &[u8],
    tid: Tid,
) -> Option<(BlockNumber, Ordering)> {
    let head = layout.header_len();
    let minus_infinity = match layout {
        Layout::Compact => compact_first,
        Layout::Headed => {
            let h = p.u32_le(off)?;
            let (klen, flags) = (h as u16, (h >> 16) as u16);
            if klen != 8 || flags & !MINUS_INFINITY != 0 {
                return None;
            }
            flags & MINUS_INFINITY != 0
        }
    };
    let t = off + head + 8;
    // The TID's 6 bytes, then the child's 4: bytes t..t + 10 as the low
    // 6 bytes of one word and the high 4 of another (t + 10 is the item's
    // end, inside the page: checked by the caller).
    let tid_word = p.u64_le(t)?;
    let child = (p.u64_le(t + 2)? >> 32) as u32;
    if minus_infinity {
        return Some((child, Ordering::Less));
    }
    // The key's bytes in page order; `page::cmp_keys` compares two 8-byte
    // keys as one big-endian integer.
    let stored = p.u64_le(off + head)?.to_le_bytes();
    let ord = crate::page::cmp_keys(&stored, key);
    let item_tid = Tid::new(tid_word as u32, (tid_word >> 32) as u16);
    Some((child, ord.then(item_tid.cmp(&tid))))
}

/// [`cmp_item`] on an item copied out whole (`item` is its `len` bytes,
/// at least the layout's fixed part: checked by the caller).
fn cmp_small_item(
    item: &[u8],
    layout: Layout,
    compact_first: bool,
    key: &[u8],
    tid: Tid,
) -> Option<(BlockNumber, Ordering)> {
    let head = layout.header_len();
    let klen = item.len().checked_sub(head + ITEM_FIXED + CHILD_SIZE)?;
    let minus_infinity = match layout {
        Layout::Compact => compact_first,
        Layout::Headed => {
            let flags = u16::from_le_bytes([item[2], item[3]]);
            if usize::from(u16::from_le_bytes([item[0], item[1]])) != klen
                || flags & !MINUS_INFINITY != 0
            {
                return None;
            }
            flags & MINUS_INFINITY != 0
        }
    };
    let t = head + klen;
    let child = u32::from_le_bytes(item[t + 6..t + 10].try_into().ok()?);
    if minus_infinity {
        return Some((child, Ordering::Less));
    }
    // An 8-byte key (an `i64`'s order-preserving big-endian encoding)
    // compares as one integer (`page::cmp_keys`).
    let ord = crate::page::cmp_keys(&item[head..t], key);
    let block = u32::from_le_bytes(item[t..t + 4].try_into().ok()?);
    let item_tid = Tid::new(block, u16::from_le_bytes([item[t + 4], item[t + 5]]));
    Some((child, ord.then(item_tid.cmp(&tid))))
}

/// The stored key of `klen` bytes at `at` against `key`, byte by byte as
/// `page::cmp_keys` orders them (an 8-byte big-endian compare is the same
/// order as the bytes'), read in chunks so nothing is allocated.
fn cmp_key(p: &OptimisticPage<'_>, at: usize, klen: usize, key: &[u8]) -> Option<Ordering> {
    const CHUNK: usize = 16;
    let common = klen.min(key.len());
    let mut done = 0;
    while done < common {
        let n = (common - done).min(CHUNK);
        let mut buf = [0u8; CHUNK];
        p.read(at + done, &mut buf[..n])?;
        match buf[..n].cmp(&key[done..done + n]) {
            Ordering::Equal => done += n,
            other => return Some(other),
        }
    }
    Some(klen.cmp(&key.len()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bufmgr::{BufferPool, FileStorage, PoolConfig, RelId};

    use super::*;
    use crate::index::{Index, IndexOptions};
    use crate::key::{Key, KeyType};
    use crate::page::TreePage;

    /// An index of `n` keys (`key(i)` for i in 0..n, TID (i, 1)) in
    /// `layout`, built bottom-up in a pool that holds all of it.
    fn built(
        key_type: KeyType,
        layout: Layout,
        n: u32,
        key: impl Fn(u32) -> Key,
    ) -> (tempfile::TempDir, Index) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let storage = Arc::new(FileStorage::open(dir.path()).expect("storage"));
        let pool = Arc::new(BufferPool::new(PoolConfig::new(1024), storage).expect("pool"));
        // Without posting lists: repeated keys keep their own items, so
        // the tree keeps its height.
        let index = Index::create_in_format(
            pool,
            None,
            IndexOptions {
                name: "optimistic".into(),
                rel: RelId(3),
                key_type,
                unique: false,
            },
            layout,
            false,
        )
        .expect("create");
        let stats = index
            .build_sorted((0..n).map(|i| (key(i), Tid::new(i, 1))))
            .expect("build");
        assert!(stats.root_level >= 2, "three levels at least: {stats:?}");
        (dir, index)
    }

    /// The step `TreePage` gives under a shared lock for the position
    /// (`key`, `tid`) on internal page `block` at `level` (a page at
    /// another level is `Corrupt`, as `inner_step` declines it).
    fn locked_step(
        index: &Index,
        block: BlockNumber,
        level: u32,
        key: &[u8],
        tid: Tid,
    ) -> crate::error::Result<Step> {
        let page = index.read_shared(block)?;
        let tp = TreePage::parse(&page, index.page_id(block))?;
        if tp.level != level {
            return Err(index.page_id(block).corrupt("level"));
        }
        Ok(Step {
            root: tp.is_root(),
            next: if tp.beyond_high_key_at(key, tid)? {
                Next::Right(tp.right)
            } else {
                Next::Child(tp.child_for_at(key, tid)?)
            },
        })
    }

    /// Every internal page, read optimistically and under its shared lock,
    /// gives the same step for every probe position (keys present, between,
    /// below and above, TIDs below and above).
    fn agree(index: &Index, probes: &[(Vec<u8>, Tid)]) {
        let rf = index.relfork();
        let nblocks = index.pool().nblocks(rf).expect("nblocks");
        let mut internal = 0;
        let mut compared = 0u64;
        for block in 1..nblocks {
            let level = {
                let page = index.read_shared(block).expect("read");
                TreePage::parse(&page, index.page_id(block))
                    .expect("parse")
                    .level
            };
            if level == 0 {
                continue;
            }
            internal += 1;
            // Touch the page until a pin no longer raises its usage, so the
            // pool does not decline the optimistic reads.
            for _ in 0..8 {
                drop(index.read_shared(block).expect("read"));
            }
            for (k, tid) in probes {
                let pinned = locked_step(index, block, level, k, *tid).expect("locked step");
                let optimistic = index
                    .pool()
                    .read_optimistic(rf, block, |p| inner_step(p, k, *tid, level))
                    .expect("a quiet resident page is read optimistically");
                assert_eq!(
                    optimistic,
                    Some(pinned),
                    "block {block}, key {k:?}, {tid:?}"
                );
                // The wrong level is refused, not answered.
                let wrong = index
                    .pool()
                    .read_optimistic(rf, block, |p| inner_step(p, k, *tid, level + 1));
                assert_eq!(wrong, Some(None));
                compared += 1;
            }
        }
        assert!(internal > 1 && compared > 0);
    }

    #[test]
    fn the_optimistic_step_agrees_with_the_locked_page_on_i64_keys_in_both_layouts() {
        for layout in [Layout::Compact, Layout::Headed] {
            i64_keys(layout);
        }
    }

    fn i64_keys(layout: Layout) {
        let (_dir, index) = built(KeyType::I64, layout, 200_000, |i| {
            Key::I64(i64::from(i) * 2)
        });
        assert_eq!(index.layout(), layout);
        let mut probes = Vec::new();
        for k in (-4..400_004i64).step_by(997) {
            for tid in [
                Tid::new(0, 0),
                Tid::new(k.max(0) as u32 / 2, 1),
                Tid::new(u32::MAX, u16::MAX),
            ] {
                probes.push((Key::I64(k).encode(), tid));
            }
        }
        agree(&index, &probes);
    }

    #[test]
    fn the_optimistic_step_agrees_with_the_locked_page_on_repeated_i64_keys_in_both_layouts() {
        for layout in [Layout::Compact, Layout::Headed] {
            repeated_i64_keys(layout);
        }
    }

    /// Each key 100 times (TIDs (i, 1) in order), so pivots share keys and
    /// their TIDs decide: probes at every key with TIDs just below, at and
    /// just above each of its rows', in both fields of the TID.
    fn repeated_i64_keys(layout: Layout) {
        const REPEATS: u32 = 100;
        let (_dir, index) = built(KeyType::I64, layout, 200_000, |i| {
            Key::I64(i64::from(i / REPEATS))
        });
        let mut probes = Vec::new();
        for k in (0..2_000u32).step_by(13) {
            let key = Key::I64(i64::from(k)).encode();
            for i in (k * REPEATS..(k + 1) * REPEATS).step_by(7) {
                for tid in [
                    Tid::new(i, 0),
                    Tid::new(i, 1),
                    Tid::new(i, 2),
                    Tid::new(i, 0x100),
                    Tid::new(i.saturating_sub(1), u16::MAX),
                ] {
                    probes.push((key.clone(), tid));
                }
            }
        }
        agree(&index, &probes);
    }

    #[test]
    fn the_optimistic_step_agrees_with_the_locked_page_on_short_byte_keys_of_every_length() {
        for layout in [Layout::Compact, Layout::Headed] {
            short_byte_keys(layout);
        }
    }

    fn short_byte_keys(layout: Layout) {
        // Keys of 1 to 30 bytes (items copied out whole), prefixes of one
        // another included, so the compare stops at every length, 8 too.
        let key = |i: u32| {
            let s = format!("{i:06}{}", "x".repeat(i as usize % 25));
            s.as_bytes()[(i as usize % 6)..].to_vec()
        };
        // 150,000 of them: truncated pivots of a few bytes make internal
        // pages fan out so far that fewer keys do not give three levels.
        let mut all: Vec<Vec<u8>> = (0..150_000).map(key).collect();
        all.sort();
        let (_dir, index) = built(KeyType::Bytes, layout, all.len() as u32, |i| {
            Key::Bytes(all[i as usize].clone())
        });
        let mut probes = Vec::new();
        for (i, k) in all.iter().enumerate().step_by(211) {
            let e = Key::Bytes(k.clone()).encode();
            probes.push((e.clone(), Tid::new(i as u32, 1)));
            probes.push((e.clone(), Tid::new(i as u32, 2)));
            probes.push((e[..e.len() / 2].to_vec(), Tid::new(0, 0)));
        }
        agree(&index, &probes);
    }

    #[test]
    fn the_optimistic_step_agrees_with_the_locked_page_on_long_byte_keys_in_both_layouts() {
        for layout in [Layout::Compact, Layout::Headed] {
            long_byte_keys(layout);
        }
    }

    fn long_byte_keys(layout: Layout) {
        // Keys of 100 to 300 bytes sharing long prefixes: compares run over
        // several chunks and stop at every length.
        let key = |i: u32| {
            let mut b = vec![b'k'; 100 + (i as usize % 3) * 100];
            b.extend_from_slice(format!("{i:08}").as_bytes());
            b
        };
        let mut all: Vec<Vec<u8>> = (0..6_000).map(key).collect();
        all.sort();
        let (_dir, index) = built(KeyType::Bytes, layout, all.len() as u32, |i| {
            Key::Bytes(all[i as usize].clone())
        });
        let mut probes = Vec::new();
        for (i, k) in all.iter().enumerate().step_by(37) {
            let e = Key::Bytes(k.clone()).encode();
            probes.push((e.clone(), Tid::new(i as u32, 1)));
            probes.push((e[..e.len() - 1].to_vec(), Tid::new(0, 0)));
            let mut longer = e.clone();
            longer.push(0xFF);
            probes.push((longer, Tid::new(0, 0)));
        }
        probes.push((Vec::new(), Tid::new(0, 0)));
        probes.push((vec![0xFF; 400], Tid::new(0, 0)));
        agree(&index, &probes);
    }

    #[test]
    fn the_optimistic_step_never_answers_where_the_locked_page_differs_on_damaged_i64_pivots() {
        for layout in [Layout::Compact, Layout::Headed] {
            damaged_i64_pivots(layout);
        }
    }

    /// Internal pages of an `i64` index damaged at random (item pointer
    /// offsets moved by a few bytes either way or to the page's end, lengths
    /// set to the 8-byte-key item's and its neighbours', key length and flag
    /// bytes, key, TID and child bytes, header flags): wherever the locked
    /// page answers, the optimistic step says the same or declines; where
    /// the locked page is `Corrupt`, it declines.
    fn damaged_i64_pivots(layout: Layout) {
        use rand::{RngExt, SeedableRng};
        let (_dir, index) = built(KeyType::I64, layout, 200_000, |i| {
            Key::I64(i64::from(i / 3) * 3 - 100_000)
        });
        let rf = index.relfork();
        let nblocks = index.pool().nblocks(rf).expect("nblocks");
        let head = layout.header_len();
        let word_len = head + 8 + ITEM_FIXED + CHILD_SIZE;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed + head as u64);
        let mut probes = Vec::new();
        for k in (-100_010..100_010i64).step_by(4_999) {
            for tid in [
                Tid::new(0, 0),
                Tid::new(66_000, 1),
                Tid::new(u32::MAX, u16::MAX),
            ] {
                probes.push((Key::I64(k).encode(), tid));
            }
        }
        let (mut answered, mut refused) = (0u64, 0u64);
        for block in 1..nblocks {
            let (level, original) = {
                let page = index.read_shared(block).expect("read");
                let tp = TreePage::parse(&page, index.page_id(block)).expect("parse");
                (tp.level, page.to_vec())
            };
            if level == 0 {
                continue;
            }
            let lower = usize::from(u16::from_le_bytes([original[24], original[25]]));
            let nitems = (lower - HEADER_SIZE) / ITEM_POINTER_SIZE;
            for _ in 0..300 {
                let mut page = original.clone();
                for _ in 0..rng.random_range(1..4) {
                    let i = rng.random_range(0..nitems);
                    let ptr = HEADER_SIZE + i * ITEM_POINTER_SIZE;
                    let off = usize::from(u16::from_le_bytes([page[ptr], page[ptr + 1]]));
                    match rng.random_range(0..8) {
                        0 => {
                            let d = rng.random_range(-9i64..=9) as usize;
                            let o = off.wrapping_add(d) as u16;
                            page[ptr..ptr + 2].copy_from_slice(&o.to_le_bytes());
                        }
                        1 => {
                            let len = (word_len as i64 + rng.random_range(-2i64..=2)) as u16;
                            page[ptr + 2..ptr + 4].copy_from_slice(&len.to_le_bytes());
                        }
                        2 => {
                            let back = rng.random_range(0..word_len + 2) as u16;
                            let o = PAGE_SIZE as u16 - back;
                            page[ptr..ptr + 2].copy_from_slice(&o.to_le_bytes());
                            page[ptr + 2..ptr + 4]
                                .copy_from_slice(&(word_len as u16).to_le_bytes());
                        }
                        3 => page[14] ^= 1 << rng.random_range(0..8),
                        _ => {
                            let at = (off + rng.random_range(0..word_len)).min(PAGE_SIZE - 1);
                            page[at] ^= 1 << rng.random_range(0..8);
                        }
                    }
                }
                {
                    let mut w = index
                        .pool()
                        .read_buffer(rf, block, None)
                        .expect("read")
                        .lock_exclusive();
                    w.copy_from_slice(&page);
                }
                for _ in 0..8 {
                    drop(index.read_shared(block).expect("read"));
                }
                for (k, tid) in &probes {
                    let pinned = locked_step(&index, block, level, k, *tid);
                    let optimistic = index
                        .pool()
                        .read_optimistic(rf, block, |p| inner_step(p, k, *tid, level))
                        .expect("a quiet resident page is read optimistically");
                    match (&pinned, optimistic) {
                        (_, None) => refused += 1,
                        (Ok(p), Some(o)) if *p == o => answered += 1,
                        _ => panic!(
                            "block {block}, key {k:?}, {tid:?}: optimistic {optimistic:?}, \
                             locked {pinned:?}"
                        ),
                    }
                }
            }
            let mut w = index
                .pool()
                .read_buffer(rf, block, None)
                .expect("read")
                .lock_exclusive();
            w.copy_from_slice(&original);
        }
        assert!(
            answered > 0 && refused > 0,
            "{answered} answered, {refused} refused"
        );
    }
}
