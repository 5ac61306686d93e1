//! Page layouts: the meta page, and the leaf and internal pages of the tree.
//!
//! Every page starts with the 12 bytes that belong to the buffer pool (page
//! LSN and checksum). Block 0 of an index is its **meta page**; every other
//! block is a **tree page**. All integers are little-endian.
//!
//! ```text
//! meta page (block 0)
//!   0  .. 8   page LSN            (pool)
//!   8  .. 12  checksum            (pool)
//!   12 .. 14  magic 0xB7EE        (as on tree pages: identifies a B-tree page)
//!   14 .. 16  flags = META
//!   16 .. 20  format version: the index's item layout (1 headed, 2 compact,
//!             3 compact with deduplicated leaves: posting lists)
//!   20 .. 24  root block
//!   24 .. 28  root level          (0 while the root is a leaf)
//!   28        key type            (1 I64, 2 Bytes, 3 Tuple)
//!   29        unique              (0 or 1)
//!   30        tuple: column count n (1 ..= 8); otherwise 0
//!   31 .. 31+n  tuple: each column's type tag (see `key`)
//!   39 ..     zeros
//!
//! tree page (leaf or internal)
//!   0  .. 12  pool's LSN and checksum
//!   12 .. 14  magic 0xB7EE
//!   14 .. 16  flags: LEAF 0x1, ROOT 0x2, INCOMPLETE_SPLIT 0x4, HAS_HIGH_KEY 0x8,
//!             COMPACT 0x20 (the item layout), FIXED 0x40 (see below),
//!             DEDUP 0x80 (a compact leaf whose items may be posting lists)
//!   16 .. 20  level               (0 = leaf)
//!   20 .. 24  right link          (0 = none: block 0 is the meta page)
//!   24 .. 26  lower               (end of the item pointer array)
//!   26 .. 28  upper               (start of the item bytes)
//!   28 ..     item pointers, 4 bytes each: offset u16, length u16
//!   lower .. upper   free space (the hole a full-page image leaves out)
//!   upper .. 8192    items, packed towards the end of the page
//!
//! a FIXED page (a COMPACT leaf whose items, high key included, are all
//! FIXED_ITEM_LEN = 14 bytes: an 8-byte key and a TID, as every entry of
//! an `i64` index): no item pointers; the items are a sorted array
//!   28 + 14 i .. 28 + 14 (i+1)   item i
//!   lower = 28 + 14 n, upper = 8192 (the free space is lower .. 8192)
//!
//! item on a COMPACT page (no header: the pointer's length gives the
//! key's, k = length - 6 on a leaf, length - 10 on an internal page)
//!   0  .. k      key, in its order-preserving form (see `key`)
//!   k  .. k+6    heap TID: block u32, offset u16
//!   k+6 .. k+10  child block u32 (internal pages only, high key included)
//!
//! posting list on a DEDUP leaf (one key, two or more heap TIDs, ascending)
//!   0  .. k        key
//!   k  .. k+6      the last (largest) TID: block u32, offset u16
//!   k+6 .. len-6   every TID in ascending order: the first as varint block,
//!                  varint offset; each next one as varint (block - previous
//!                  block), then varint (offset - previous offset) if that
//!                  was 0, else varint offset (LEB128 varints)
//!   len-6 .. len   k u16, TID count u16, 0xFFFF u16 (POSTING_MARK)
//!   A plain item ends with its TID, whose offset is never 0xFFFF (a heap
//!   page holds at most 2041 line pointers, and inserts into a DEDUP
//!   index refuse that offset), so the last two bytes tell the kinds apart;
//!   pages without DEDUP are never read for posting lists at all.
//!
//! item on a page without COMPACT (the headed layout, format 1)
//!   0  .. 2      key length k
//!   2  .. 4      item flags: MINUS_INFINITY 0x1
//!   4  .. 4+k    key
//!   4+k .. 10+k  heap TID
//!   10+k .. 14+k child block (internal pages only)
//! ```
//!
//! The layout is a property of the page (its `COMPACT` flag), so every
//! decoder, redo and the optimistic descent read any page by itself; all
//! pages of one index share it, and its meta page records it as the format
//! version (1 headed, 2 compact), from which new pages take it. Indexes are
//! created compact; an index written in the headed layout stays headed,
//! readable and writable. An `i64` entry takes 14 bytes and its pointer 4
//! compact: 18 bytes on a leaf, against 22 headed, and 14 on a FIXED leaf
//! (an `i64` index's leaves), whose search also reads one contiguous
//! array instead of following pointers (and interpolates: see
//! [`TreePage::fixed_lower_bound`]). Compact pages have no
//! item flags: minus infinity is positional, the first data item of an
//! internal page; both layouts store it with an empty key and the smallest
//! TID (and the headed one also flags it).
//!
//! Invariants of a tree page (checked by `verify`):
//!
//! 1. With `HAS_HIGH_KEY`, item 0 is the **high key**: every entry on the page
//!    sorts strictly below it. A page without one is the rightmost of its
//!    level (its upper bound is +infinity) and has no right link. High keys
//!    and pivots are separators, not necessarily entries: leaf splits store
//!    the shortest one ([`separator`]: a prefix of the right key and the
//!    smallest TID), compared like any key, as bytes and then TID.
//! 2. The data items (from item 1 with a high key, else item 0) are in
//!    strictly ascending (key, TID) order.
//! 3. On an internal page every data item is a *pivot*: a separator (key,
//!    TID) and a child block; the child holds the entries from its separator
//!    up to the next one (the last: up to the page's high key). The first data
//!    item's separator is minus infinity (by its position; stored with an
//!    empty key and the smallest TID): its lower bound is the page's own
//!    lower bound, as in PostgreSQL.
//! 4. `INCOMPLETE_SPLIT` on a page means its right sibling has no downlink in
//!    the parent level yet.
//!
//! Decoders check every offset and length; a page that breaks the layout is
//! [`BtreeError::Corrupt`] naming relation and block, never a panic.

use bufmgr::{BlockNumber, PAGE_SIZE, RelId};
use heap::tuple::Tid;

use crate::error::{BtreeError, Result};
use crate::key::{KeyType, SearchKey};

/// Identifies both kinds of B-tree page (bytes 12..14).
pub const BTREE_MAGIC: u16 = 0xB7EE;
/// Block of the meta page.
pub const META_BLOCK: BlockNumber = 0;
/// A right link of 0 means "no right sibling" (block 0 is the meta page,
/// never a tree page: PostgreSQL's `P_NONE`).
pub const NO_RIGHT: BlockNumber = 0;

/// The first bytes of every page belong to the buffer pool (LSN, checksum).
pub const POOL_HEADER: usize = 12;
/// Size of the tree page header, including the pool's 12 bytes.
pub const HEADER_SIZE: usize = 28;
/// Size of one item pointer.
pub const ITEM_POINTER_SIZE: usize = 4;
/// Bytes of a compact item besides its key (and its child on internal
/// pages): the TID. A headed item has [`HEADED_ITEM_HEADER`] more.
pub const ITEM_FIXED: usize = 6;
/// The headed layout's item header: key length and flags.
pub const HEADED_ITEM_HEADER: usize = 4;
/// The child block on internal pages.
pub const CHILD_SIZE: usize = 4;
/// Room for item pointers and items on a tree page.
pub const PAGE_CAPACITY: usize = PAGE_SIZE - HEADER_SIZE;
/// End of the meta page's contents (the rest is its image's hole).
pub const META_END: usize = 31 + crate::key::MAX_KEY_COLUMNS;

/// The largest key, in bytes of its stored form. A page must hold three of
/// the largest items with their pointers (two entries and a high key), so
/// that splitting a full page into balanced halves always leaves room for
/// the new entry and each half's high key: `3 * (MAX_KEY_SIZE +
/// HEADED_ITEM_HEADER + ITEM_FIXED + CHILD_SIZE + ITEM_POINTER_SIZE) <=
/// PAGE_CAPACITY` in the larger, headed layout. That is 2703 bytes; we keep
/// 100 bytes spare. PostgreSQL's limit is the same third of a page (2704
/// bytes for `BTMaxItemSize`).
pub const MAX_KEY_SIZE: usize = 2600;
const _: () = assert!(
    3 * (MAX_KEY_SIZE + HEADED_ITEM_HEADER + ITEM_FIXED + CHILD_SIZE + ITEM_POINTER_SIZE)
        <= PAGE_CAPACITY
);

// Page flags.
pub const LEAF: u16 = 0x1;
pub const ROOT: u16 = 0x2;
pub const INCOMPLETE_SPLIT: u16 = 0x4;
pub const HAS_HIGH_KEY: u16 = 0x8;
pub const META: u16 = 0x10;
/// The page's items are in the compact layout (see the module docs).
pub const COMPACT: u16 = 0x20;
/// A compact leaf of [`FIXED_ITEM_LEN`]-byte items without item pointers.
pub const FIXED: u16 = 0x40;
/// A compact leaf of an index with deduplication: its items may be
/// posting lists (see the module docs).
pub const DEDUP: u16 = 0x80;
pub const KNOWN_FLAGS: u16 =
    LEAF | ROOT | INCOMPLETE_SPLIT | HAS_HIGH_KEY | COMPACT | FIXED | DEDUP;
/// The last two bytes of a posting-list item (where a plain item has its
/// TID's offset, which is never 0xFFFF).
pub const POSTING_MARK: u16 = 0xFFFF;
/// Bytes of a posting list besides its key and its TID stream: the last
/// TID and the trailer (key length, count, mark).
pub const POSTING_OVERHEAD: usize = 12;
/// The largest posting-list item, in bytes: a sixth of a page, as
/// PostgreSQL's dedup pass caps posting lists at half of `BTMaxItemSize`.
/// Runs of equal keys longer than that become several posting lists.
/// Below [`MAX_KEY_SIZE`], so every split rule that holds for the largest
/// plain item holds for a posting list.
pub const MAX_POSTING_ITEM: usize = PAGE_CAPACITY / 6;
const _: () = assert!(MAX_POSTING_ITEM < MAX_KEY_SIZE);
/// The length of every item of a [`FIXED`] page: an 8-byte key and a TID.
pub const FIXED_ITEM_LEN: usize = 8 + ITEM_FIXED;
/// Interpolation probes of [`TreePage::fixed_lower_bound`] before it
/// gallops.
pub const INTERPOLATION_ROUNDS: usize = 3;
/// Up to this many candidate items, [`TreePage::fixed_lower_bound`]
/// searches by bisection alone (they span about three cache lines).
const FIXED_BINARY_MAX: usize = 12;

/// The (key, TID) order of an entry with an 8-byte key as one integer:
/// the stored key read big-endian (byte order is integer order) above the
/// block and the offset, so comparing words compares entries as
/// `Item::cmp_at` does (a `FIXED` page holds no posting lists).
#[inline]
pub fn fixed_word(key: u64, tid: Tid) -> u128 {
    (u128::from(key) << 48) | (u128::from(tid.block) << 16) | u128::from(tid.offset)
}

#[cfg(test)]
thread_local! {
    /// Byte offsets of the items `fixed_word_at` read (tests count them).
    static FIXED_PROBES: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[inline]
fn word_key(w: u128) -> u64 {
    (w >> 48) as u64
}

/// The meta page's format version of a compact index whose leaves
/// deduplicate (posting lists).
pub const DEDUP_FORMAT: u32 = 3;
/// The newest meta page format version this crate writes (and the one
/// `Index::create` gives a non-unique index with deduplication): data
/// built by an older crate may have another, so a cache of data sets
/// keyed on it is rebuilt when the index layout changes.
pub const NEWEST_FORMAT: u32 = DEDUP_FORMAT;

// Item flags of the headed layout.
pub const MINUS_INFINITY: u16 = 0x1;

/// How a tree page stores its items: a property of the page (its
/// [`COMPACT`] flag) shared by every page of an index and recorded on the
/// index's meta page as the format version.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Layout {
    /// Format 1: each item begins with its key length (u16) and flags (u16).
    Headed,
    /// Format 2: no item header; the item pointer's length gives the key's.
    Compact,
}

impl Layout {
    /// The layout of a page with these flags.
    #[inline]
    pub fn of_flags(flags: u16) -> Layout {
        if flags & COMPACT != 0 {
            Layout::Compact
        } else {
            Layout::Headed
        }
    }

    /// The page flag that says this layout.
    #[inline]
    pub fn flag(self) -> u16 {
        match self {
            Layout::Headed => 0,
            Layout::Compact => COMPACT,
        }
    }

    /// The meta page's format version for an index in this layout.
    pub fn format_version(self) -> u32 {
        match self {
            Layout::Headed => 1,
            Layout::Compact => 2,
        }
    }

    /// Bytes before an item's key.
    #[inline]
    pub fn header_len(self) -> usize {
        match self {
            Layout::Headed => HEADED_ITEM_HEADER,
            Layout::Compact => 0,
        }
    }
}

#[inline]
fn u16_at(p: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([p[off], p[off + 1]])
}
#[inline]
fn u32_at(p: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([p[off], p[off + 1], p[off + 2], p[off + 3]])
}
fn put_u16(p: &mut [u8], off: usize, v: u16) {
    p[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(p: &mut [u8], off: usize, v: u32) {
    p[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Which page of which relation: for error messages.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct PageId {
    pub rel: RelId,
    pub block: BlockNumber,
}

impl PageId {
    pub fn corrupt(self, detail: impl Into<String>) -> BtreeError {
        BtreeError::Corrupt {
            rel: self.rel,
            block: self.block,
            detail: detail.into(),
        }
    }
}

/// What a raw page is, as far as the B-tree is concerned (for residency counts).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub struct PageKind {
    /// The meta page (block 0).
    pub is_meta: bool,
    /// Level of a tree page (0 = leaf); 0 for the meta page.
    pub level: u32,
}

/// Tell from raw page bytes whether this is a B-tree page, and which: the
/// index-residency scenario counts resident index pages per level with it.
/// `None` for anything else (heap pages, zeroed pages, short slices).
pub fn page_kind(page: &[u8]) -> Option<PageKind> {
    if page.len() != PAGE_SIZE || u16_at(page, 12) != BTREE_MAGIC {
        return None;
    }
    let flags = u16_at(page, 14);
    if flags & META != 0 {
        return Some(PageKind {
            is_meta: true,
            level: 0,
        });
    }
    Some(PageKind {
        is_meta: false,
        level: u32_at(page, 16),
    })
}

// ---------------------------------------------------------------- meta page

/// The meta page's contents.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Meta {
    pub root: BlockNumber,
    pub root_level: u32,
    pub key_type: KeyType,
    pub unique: bool,
    /// The item layout of every tree page of the index.
    pub layout: Layout,
    /// Leaves deduplicate equal keys into posting lists (format 3; only
    /// with the compact layout).
    pub dedup: bool,
}

impl Meta {
    pub fn read(page: &[u8], id: PageId) -> Result<Meta> {
        if page.len() != PAGE_SIZE {
            return Err(id.corrupt("meta page of the wrong size"));
        }
        if u16_at(page, 12) != BTREE_MAGIC || u16_at(page, 14) != META {
            return Err(id.corrupt("not a B-tree meta page (bad magic or flags)"));
        }
        let version = u32_at(page, 16);
        let (layout, dedup) = match version {
            1 => (Layout::Headed, false),
            2 => (Layout::Compact, false),
            DEDUP_FORMAT => (Layout::Compact, true),
            _ => {
                return Err(id.corrupt(format!(
                    "meta page format version {version}, this engine reads 1, 2 and 3"
                )));
            }
        };
        let key_type = KeyType::from_code(page[28], &page[30..META_END]).ok_or_else(|| {
            id.corrupt(format!(
                "unknown key type code {} (column list {:?})",
                page[28],
                &page[30..META_END]
            ))
        })?;
        let unique = match page[29] {
            0 => false,
            1 => true,
            u => return Err(id.corrupt(format!("unique flag {u} is neither 0 nor 1"))),
        };
        let root = u32_at(page, 20);
        if root == META_BLOCK {
            return Err(id.corrupt("meta page names block 0 as the root"));
        }
        Ok(Meta {
            root,
            root_level: u32_at(page, 24),
            key_type,
            unique,
            layout,
            dedup,
        })
    }

    pub fn write(&self, page: &mut [u8]) {
        page[POOL_HEADER..].fill(0);
        put_u16(page, 12, BTREE_MAGIC);
        put_u16(page, 14, META);
        let version = if self.dedup {
            DEDUP_FORMAT
        } else {
            self.layout.format_version()
        };
        put_u32(page, 16, version);
        put_u32(page, 20, self.root);
        put_u32(page, 24, self.root_level);
        page[28] = self.key_type.code();
        page[29] = u8::from(self.unique);
        if let KeyType::Tuple(t) = self.key_type {
            page[30] = t.kinds().len() as u8;
            for (i, k) in t.kinds().iter().enumerate() {
                page[31 + i] = k.tag();
            }
        }
    }
}

// ---------------------------------------------------------------- items

/// One decoded item, borrowing the page.
#[derive(Copy, Clone, Debug)]
pub struct Item<'a> {
    pub key: &'a [u8],
    pub tid: Tid,
    /// Minus infinity: the first data item of an internal page.
    pub minus_infinity: bool,
    /// The child block (internal pages; 0 on leaves and in high keys).
    pub child: BlockNumber,
    /// The item's bytes as stored.
    pub raw: &'a [u8],
    /// The largest TID of the item: `tid` for a plain item, the last of
    /// a posting list's.
    pub last: Tid,
    /// A posting list's TID stream and count (`tid` is its first TID).
    pub posting: Option<(&'a [u8], u16)>,
}

impl<'a> Item<'a> {
    /// Compare this item with a search key; minus infinity is below everything.
    pub fn cmp_search(&self, skey: &SearchKey) -> std::cmp::Ordering {
        self.cmp_at(&skey.key, skey.tid)
    }

    /// Compare this item with the position (`key`, `tid`) given by borrowed
    /// stored key bytes: the same order as [`Item::cmp_search`], without a
    /// [`SearchKey`] (nothing allocated). A posting list compares by its
    /// last TID, so a binary search for a position finds the item holding
    /// it (or the first entry after it).
    #[inline]
    pub fn cmp_at(&self, key: &[u8], tid: Tid) -> std::cmp::Ordering {
        if self.minus_infinity {
            std::cmp::Ordering::Less
        } else {
            cmp_keys(self.key, key).then(self.last.cmp(&tid))
        }
    }

    /// Is this item a posting list?
    #[inline]
    pub fn is_posting(&self) -> bool {
        self.posting.is_some()
    }

    /// Number of heap TIDs the item holds (1 for a plain item).
    #[inline]
    pub fn tid_count(&self) -> usize {
        self.posting.map_or(1, |(_, n)| usize::from(n))
    }

    /// The item's heap TIDs in ascending order, after checking a posting
    /// list's whole stream (sorted, its count and last TID as stored); a
    /// damaged one is `Corrupt` naming the page.
    pub fn tids(&self, id: PageId) -> Result<Tids<'a>> {
        let Some((stream, n)) = self.posting else {
            return Ok(Tids {
                single: Some(self.tid),
                stream: &[],
                left: 0,
                prev: None,
            });
        };
        let mut it = Tids {
            single: None,
            stream,
            left: usize::from(n),
            prev: None,
        };
        let mut count = 0usize;
        let mut prev: Option<Tid> = None;
        loop {
            match it.step() {
                Step::Done => break,
                Step::Bad(what) => {
                    return Err(id.corrupt(format!("posting list: {what}")));
                }
                Step::Tid(t) => {
                    if prev.is_some_and(|p| p >= t) {
                        return Err(id.corrupt("posting list TIDs not ascending"));
                    }
                    prev = Some(t);
                    count += 1;
                }
            }
        }
        if !it.stream.is_empty() {
            return Err(id.corrupt(format!(
                "posting list has {} bytes after its {n} TIDs",
                it.stream.len()
            )));
        }
        if count != usize::from(n) || prev != Some(self.last) {
            return Err(id.corrupt(format!(
                "posting list of {count} TIDs ending at {prev:?}, but it says {n} ending at {}",
                self.last
            )));
        }
        Ok(Tids {
            single: None,
            stream,
            left: usize::from(n),
            prev: None,
        })
    }

    pub fn search_key(&self) -> SearchKey {
        SearchKey::new(self.key.to_vec(), self.tid)
    }
}

/// The heap TIDs of an item, ascending (see [`Item::tids`]).
#[derive(Clone, Debug)]
pub struct Tids<'a> {
    single: Option<Tid>,
    stream: &'a [u8],
    left: usize,
    prev: Option<Tid>,
}

enum Step {
    Tid(Tid),
    Done,
    Bad(&'static str),
}

fn read_varint(s: &mut &[u8]) -> Option<u32> {
    let mut v: u64 = 0;
    for i in 0..5 {
        let (&b, rest) = s.split_first()?;
        *s = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return u32::try_from(v).ok();
        }
    }
    None
}

fn put_varint(v: &mut Vec<u8>, mut x: u32) {
    while x >= 0x80 {
        v.push((x as u8) | 0x80);
        x >>= 7;
    }
    v.push(x as u8);
}

impl Tids<'_> {
    fn step(&mut self) -> Step {
        if self.left == 0 {
            return Step::Done;
        }
        let (Some(a), Some(b)) = (read_varint(&mut self.stream), read_varint(&mut self.stream))
        else {
            return Step::Bad("a TID runs off the item or overflows");
        };
        let t = match self.prev {
            None => match u16::try_from(b) {
                Ok(o) => Tid::new(a, o),
                Err(_) => return Step::Bad("an offset over 65535"),
            },
            Some(p) => {
                let Some(block) = p.block.checked_add(a) else {
                    return Step::Bad("a block past the largest");
                };
                let off = if a == 0 { u32::from(p.offset) + b } else { b };
                match u16::try_from(off) {
                    Ok(o) => Tid::new(block, o),
                    Err(_) => return Step::Bad("an offset over 65535"),
                }
            }
        };
        self.left -= 1;
        self.prev = Some(t);
        Step::Tid(t)
    }
}

impl Iterator for Tids<'_> {
    type Item = Tid;

    fn next(&mut self) -> Option<Tid> {
        if let Some(t) = self.single.take() {
            return Some(t);
        }
        match self.step() {
            Step::Tid(t) => Some(t),
            // Checked by `Item::tids` before the iterator was handed out.
            Step::Done | Step::Bad(_) => None,
        }
    }
}

/// Encode a leaf entry for `tids` (ascending, at least one) of `key` in
/// the compact layout: a plain item for one TID, a posting list (see the
/// module docs) for more.
pub fn encode_posting(key: &[u8], tids: &[Tid]) -> Vec<u8> {
    match tids {
        [] | [_] => encode_item(
            Layout::Compact,
            key,
            tids.first().copied().unwrap_or(Tid::new(0, 0)),
            None,
            false,
        ),
        [.., last] => {
            let mut v = Vec::with_capacity(key.len() + POSTING_OVERHEAD + 3 * tids.len());
            v.extend_from_slice(key);
            v.extend_from_slice(&last.block.to_le_bytes());
            v.extend_from_slice(&last.offset.to_le_bytes());
            let mut prev: Option<Tid> = None;
            for &t in tids {
                match prev {
                    None => {
                        put_varint(&mut v, t.block);
                        put_varint(&mut v, u32::from(t.offset));
                    }
                    Some(p) => {
                        let db = t.block - p.block;
                        put_varint(&mut v, db);
                        put_varint(
                            &mut v,
                            if db == 0 {
                                u32::from(t.offset - p.offset)
                            } else {
                                u32::from(t.offset)
                            },
                        );
                    }
                }
                prev = Some(t);
            }
            v.extend_from_slice(&(key.len() as u16).to_le_bytes());
            v.extend_from_slice(&(tids.len() as u16).to_le_bytes());
            v.extend_from_slice(&POSTING_MARK.to_le_bytes());
            v
        }
    }
}

/// Encode the entries (`key`, `tids`) as leaf items of at most
/// [`MAX_POSTING_ITEM`] bytes each where a posting list is made: runs cut
/// into consecutive posting lists (a single TID stays a plain item).
pub fn encode_postings(key: &[u8], tids: &[Tid], out: &mut Vec<Vec<u8>>) {
    let varint_len = |x: u32| match x {
        0..0x80 => 1,
        0x80..0x4000 => 2,
        0x4000..0x20_0000 => 3,
        0x20_0000..0x1000_0000 => 4,
        _ => 5,
    };
    let mut start = 0;
    while start < tids.len() {
        // Grow the run while the posting list stays within the limit,
        // counting each TID's varints as `encode_posting` writes them.
        let first = tids[start];
        let mut len = key.len()
            + POSTING_OVERHEAD
            + varint_len(first.block)
            + varint_len(first.offset.into());
        let mut end = start + 1;
        while end < tids.len() {
            let (p, t) = (tids[end - 1], tids[end]);
            let db = t.block.wrapping_sub(p.block);
            let off = if db == 0 {
                u32::from(t.offset.wrapping_sub(p.offset))
            } else {
                u32::from(t.offset)
            };
            let next = len + varint_len(db) + varint_len(off);
            if next > MAX_POSTING_ITEM {
                break;
            }
            len = next;
            end += 1;
        }
        out.push(encode_posting(key, &tids[start..end]));
        start = end;
    }
}

/// Compare two stored keys; 8-byte keys (every `i64` key) as one
/// big-endian integer instead of a `memcmp` call: the same order.
#[inline]
pub fn cmp_keys(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    match (<&[u8; 8]>::try_from(a), <&[u8; 8]>::try_from(b)) {
        (Ok(a), Ok(b)) => u64::from_be_bytes(*a).cmp(&u64::from_be_bytes(*b)),
        _ => a.cmp(b),
    }
}

/// Encode an item in `layout`. `child` is `Some` exactly on internal
/// pages. A `minus_infinity` pivot is stored with an empty key whatever
/// `key` is (what it means comes from its place, the first data item; the
/// headed layout also flags it).
pub fn encode_item(
    layout: Layout,
    key: &[u8],
    tid: Tid,
    child: Option<BlockNumber>,
    minus_infinity: bool,
) -> Vec<u8> {
    let key = if minus_infinity { &[][..] } else { key };
    let mut v = Vec::with_capacity(item_len(layout, key.len(), true));
    if layout == Layout::Headed {
        v.extend_from_slice(&(key.len() as u16).to_le_bytes());
        v.extend_from_slice(&(if minus_infinity { MINUS_INFINITY } else { 0 }).to_le_bytes());
    }
    v.extend_from_slice(key);
    v.extend_from_slice(&tid.block.to_le_bytes());
    v.extend_from_slice(&tid.offset.to_le_bytes());
    if let Some(c) = child {
        v.extend_from_slice(&c.to_le_bytes());
    }
    v
}

/// Decode an item's bytes in `layout`; `internal` says whether a child
/// block follows. A compact item is not minus infinity: that depends on its
/// place on a page ([`TreePage::item`] says); a headed one says it in its
/// flags.
#[inline]
pub fn decode_item(raw: &[u8], internal: bool, layout: Layout, id: PageId) -> Result<Item<'_>> {
    decode_item_on(raw, internal, layout, false, id)
}

/// [`decode_item`] on a page whose flags may allow posting lists
/// (`postings`: a `DEDUP` leaf).
#[inline]
pub fn decode_item_on(
    raw: &[u8],
    internal: bool,
    layout: Layout,
    postings: bool,
    id: PageId,
) -> Result<Item<'_>> {
    if postings && raw.len() >= 2 && u16_at(raw, raw.len() - 2) == POSTING_MARK {
        return decode_posting(raw, id);
    }
    let head = layout.header_len();
    let fixed = head + ITEM_FIXED + if internal { CHILD_SIZE } else { 0 };
    if raw.len() < fixed {
        return Err(id.corrupt(format!(
            "item of {} bytes is shorter than its fixed part ({fixed} bytes)",
            raw.len()
        )));
    }
    let klen = raw.len() - fixed;
    if klen > MAX_KEY_SIZE {
        return Err(id.corrupt(format!(
            "item of {} bytes holds a {klen}-byte key, over the limit of {MAX_KEY_SIZE}",
            raw.len()
        )));
    }
    let mut minus_infinity = false;
    if layout == Layout::Headed {
        let stored = u16_at(raw, 0) as usize;
        if stored != klen {
            return Err(id.corrupt(format!(
                "item of {} bytes, but its key length {stored} makes {}",
                raw.len(),
                stored + fixed
            )));
        }
        let flags = u16_at(raw, 2);
        if flags & !MINUS_INFINITY != 0 {
            return Err(id.corrupt(format!("unknown item flags {flags:#x}")));
        }
        minus_infinity = flags & MINUS_INFINITY != 0;
    }
    let key = &raw[head..head + klen];
    let t = head + klen;
    let tid = Tid::new(u32_at(raw, t), u16_at(raw, t + 4));
    let child = if internal { u32_at(raw, t + 6) } else { 0 };
    Ok(Item {
        key,
        tid,
        minus_infinity,
        child,
        raw,
        last: tid,
        posting: None,
    })
}

/// Decode a posting list (its header fields; the stream is checked by
/// [`Item::tids`]).
fn decode_posting(raw: &[u8], id: PageId) -> Result<Item<'_>> {
    let len = raw.len();
    if !(POSTING_OVERHEAD + 2..=MAX_POSTING_ITEM).contains(&len) {
        return Err(id.corrupt(format!(
            "posting list of {len} bytes (a posting list takes {} to {MAX_POSTING_ITEM})",
            POSTING_OVERHEAD + 2
        )));
    }
    let klen = u16_at(raw, len - 6) as usize;
    let n = u16_at(raw, len - 4);
    if klen + POSTING_OVERHEAD + 2 > len || n < 2 {
        return Err(id.corrupt(format!(
            "posting list of {len} bytes says its key takes {klen} and it holds {n} TIDs"
        )));
    }
    let key = &raw[..klen];
    let last = Tid::new(u32_at(raw, klen), u16_at(raw, klen + 4));
    let mut stream = &raw[klen + 6..len - 6];
    let first = match (read_varint(&mut stream), read_varint(&mut stream)) {
        (Some(b), Some(o)) => u16::try_from(o).ok().map(|o| Tid::new(b, o)),
        _ => None,
    }
    .ok_or_else(|| id.corrupt("posting list: its first TID is damaged"))?;
    Ok(Item {
        key,
        tid: first,
        minus_infinity: false,
        child: 0,
        raw,
        last,
        posting: Some((&raw[klen + 6..len - 6], n)),
    })
}

/// Does this raw leaf item, from a `DEDUP` page, hold a posting list?
#[inline]
pub fn is_posting_raw(raw: &[u8]) -> bool {
    raw.len() >= 2 && u16_at(raw, raw.len() - 2) == POSTING_MARK
}

/// The high key made from an item: its key and TID (child 0 on internal
/// pages), in `layout`. An internal split moves its first right pivot up
/// this way, unchanged (pivots come from leaf splits, already truncated).
pub fn high_key_from(layout: Layout, item: &Item<'_>, internal: bool) -> Vec<u8> {
    encode_item(layout, item.key, item.tid, internal.then_some(0), false)
}

/// The separator between two neighbouring leaf items, `left` (the last kept
/// on the left page) and `right` (the first on the right page): the
/// shortest (key bytes, TID) strictly above every entry of `left` and at or
/// below `right`'s first entry (PostgreSQL 12's suffix truncation,
/// `_bt_truncate`, on stored keys compared as bytes, a shorter key below
/// every longer one it begins):
///
/// - keys equal (a run of equal keys split in its middle): `right`'s key
///   and its first TID, whole;
/// - keys differ: the shortest prefix of `right`'s key above `left`'s
///   (one byte past their common prefix) and the smallest TID,
///   [`TID_MIN`](crate::key::TID_MIN), for the TID part ("minus
///   infinity": every entry with that very key, if one is inserted later,
///   is at or above it and goes right, where it belongs). With
///   `full_width` (a `FIXED` leaf, whose items must all be
///   [`FIXED_ITEM_LEN`] bytes, high key included) the key stays whole and
///   only the TID is truncated.
///
/// `left` < `right` in (key, TID) order is the caller's (the items come
/// from a page in order); for keys that differ the result is then never
/// empty, so it is never mistaken for minus infinity.
pub fn separator<'a>(left: &Item<'_>, right: &Item<'a>, full_width: bool) -> (&'a [u8], Tid) {
    if left.key == right.key {
        return (right.key, right.tid);
    }
    if full_width {
        return (right.key, crate::key::TID_MIN);
    }
    let common = left
        .key
        .iter()
        .zip(right.key)
        .take_while(|(a, b)| a == b)
        .count();
    (
        &right.key[..(common + 1).min(right.key.len())],
        crate::key::TID_MIN,
    )
}

// ---------------------------------------------------------------- tree pages

/// A checked view of a tree page.
#[derive(Copy, Clone, Debug)]
pub struct TreePage<'a> {
    page: &'a [u8],
    pub id: PageId,
    pub flags: u16,
    pub level: u32,
    pub right: BlockNumber,
    pub lower: usize,
    pub upper: usize,
    nitems: usize,
}

impl<'a> TreePage<'a> {
    /// Check the header and return a view; items are checked when read.
    pub fn parse(page: &'a [u8], id: PageId) -> Result<TreePage<'a>> {
        if page.len() != PAGE_SIZE {
            return Err(id.corrupt(format!("page of {} bytes", page.len())));
        }
        if u16_at(page, 12) != BTREE_MAGIC {
            return Err(id.corrupt(format!(
                "not a B-tree page (magic {:#06x}, expected {BTREE_MAGIC:#06x})",
                u16_at(page, 12)
            )));
        }
        let flags = u16_at(page, 14);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(id.corrupt(format!("unknown page flags {flags:#x} (or the meta page)")));
        }
        let level = u32_at(page, 16);
        if (flags & LEAF != 0) != (level == 0) {
            return Err(id.corrupt(format!("LEAF flag disagrees with level {level}")));
        }
        let right = u32_at(page, 20);
        let lower = u16_at(page, 24) as usize;
        let upper = u16_at(page, 26) as usize;
        if lower < HEADER_SIZE || lower > upper || upper > PAGE_SIZE {
            return Err(id.corrupt(format!("bad lower {lower} / upper {upper}")));
        }
        if flags & DEDUP != 0 && flags & (LEAF | COMPACT) != LEAF | COMPACT {
            return Err(id.corrupt(format!(
                "DEDUP on a page that is not a compact leaf (flags {flags:#x})"
            )));
        }
        let slot = if flags & FIXED != 0 {
            if flags & (LEAF | COMPACT) != LEAF | COMPACT {
                return Err(id.corrupt(format!(
                    "FIXED on a page that is not a compact leaf (flags {flags:#x})"
                )));
            }
            if upper != PAGE_SIZE {
                return Err(id.corrupt(format!("upper {upper} on a FIXED page")));
            }
            FIXED_ITEM_LEN
        } else {
            ITEM_POINTER_SIZE
        };
        if !(lower - HEADER_SIZE).is_multiple_of(slot) {
            return Err(id.corrupt(format!("lower {lower} is not at an item boundary")));
        }
        let nitems = (lower - HEADER_SIZE) / slot;
        let tp = TreePage {
            page,
            id,
            flags,
            level,
            right,
            lower,
            upper,
            nitems,
        };
        if tp.has_high_key() && nitems == 0 {
            return Err(id.corrupt("HAS_HIGH_KEY set on a page without items"));
        }
        if tp.has_high_key() == (right == NO_RIGHT) {
            return Err(id.corrupt(format!(
                "high key {} but right link {right}: only the rightmost page lacks a high key",
                if tp.has_high_key() {
                    "present"
                } else {
                    "absent"
                }
            )));
        }
        Ok(tp)
    }

    pub fn is_leaf(&self) -> bool {
        self.flags & LEAF != 0
    }
    pub fn is_root(&self) -> bool {
        self.flags & ROOT != 0
    }
    pub fn is_incomplete_split(&self) -> bool {
        self.flags & INCOMPLETE_SPLIT != 0
    }
    pub fn has_high_key(&self) -> bool {
        self.flags & HAS_HIGH_KEY != 0
    }
    pub fn right_link(&self) -> Option<BlockNumber> {
        (self.right != NO_RIGHT).then_some(self.right)
    }
    /// The page's item layout (its `COMPACT` flag).
    #[inline]
    pub fn layout(&self) -> Layout {
        Layout::of_flags(self.flags)
    }
    /// A leaf of fixed-length items without pointers (`FIXED`).
    #[inline]
    pub fn is_fixed(&self) -> bool {
        self.flags & FIXED != 0
    }
    /// A leaf whose items may be posting lists (`DEDUP`).
    #[inline]
    pub fn is_dedup(&self) -> bool {
        self.flags & DEDUP != 0
    }
    /// Bytes an item of `len` bytes takes on this page, its pointer
    /// included; `None` if it cannot go on this page at all (an item of
    /// another length on a `FIXED` page).
    #[inline]
    pub fn slot_len(&self, len: usize) -> Option<usize> {
        slot_len(self.flags, len)
    }

    /// Raw item `i` (0-based over all items, high key included).
    #[inline]
    pub fn item(&self, i: usize) -> Result<Item<'a>> {
        if i >= self.nitems {
            return Err(self.id.corrupt(format!("item {i} of {}", self.nitems)));
        }
        let (off, len) = if self.is_fixed() {
            (HEADER_SIZE + i * FIXED_ITEM_LEN, FIXED_ITEM_LEN)
        } else {
            let p = HEADER_SIZE + i * ITEM_POINTER_SIZE;
            (
                u16_at(self.page, p) as usize,
                u16_at(self.page, p + 2) as usize,
            )
        };
        if !self.is_fixed() && off < self.upper || off + len > PAGE_SIZE {
            return Err(self.id.corrupt(format!(
                "item {i} at {off}..{} lies outside the item area {}..{PAGE_SIZE}",
                off + len,
                self.upper
            )));
        }
        let raw = &self.page[off..off + len];
        if self.is_fixed() && self.is_dedup() && is_posting_raw(raw) {
            // A FIXED leaf holds plain entries only: this one's TID offset
            // was damaged into the mark (its bytes may even parse as a
            // posting list header).
            return Err(self.id.corrupt(format!(
                "item {i} of a FIXED leaf ends in the posting list mark"
            )));
        }
        let layout = self.layout();
        let mut it = decode_item_on(raw, !self.is_leaf(), layout, self.is_dedup(), self.id)?;
        if layout == Layout::Compact {
            it.minus_infinity = !self.is_leaf() && i == self.first_data();
        }
        Ok(it)
    }

    /// The high key, if the page has one.
    #[inline]
    pub fn high_key(&self) -> Result<Option<Item<'a>>> {
        if self.has_high_key() {
            self.item(0).map(Some)
        } else {
            Ok(None)
        }
    }

    #[inline]
    fn first_data(&self) -> usize {
        usize::from(self.has_high_key())
    }

    /// Number of data items (entries or pivots; the high key not counted).
    pub fn data_len(&self) -> usize {
        self.nitems - self.first_data()
    }

    /// Data item `j` (0-based, high key not counted).
    #[inline]
    pub fn data(&self, j: usize) -> Result<Item<'a>> {
        self.item(j + self.first_data())
    }

    /// Is `skey` at or beyond this page's high key (so it belongs to the
    /// right: L&Y's move-right test)?
    pub fn beyond_high_key(&self, skey: &SearchKey) -> Result<bool> {
        self.beyond_high_key_at(&skey.key, skey.tid)
    }

    /// [`TreePage::beyond_high_key`] for the position (`key`, `tid`).
    pub fn beyond_high_key_at(&self, key: &[u8], tid: Tid) -> Result<bool> {
        if let Some(k) = self.fixed_key(key) {
            return Ok(self.has_high_key() && self.fixed_item_word(0) <= fixed_word(k, tid));
        }
        Ok(match self.high_key()? {
            Some(hk) => hk.cmp_at(key, tid) != std::cmp::Ordering::Greater,
            None => false,
        })
    }

    /// First data index whose item is >= `skey` (`data_len()` if none).
    pub fn lower_bound(&self, skey: &SearchKey) -> Result<usize> {
        self.lower_bound_at(&skey.key, skey.tid)
    }

    /// `key` as the integer a `FIXED` page's search compares, if this page
    /// is `FIXED` and `key` has 8 bytes (an `i64` key's stored form).
    #[inline]
    pub fn fixed_key(&self, key: &[u8]) -> Option<u64> {
        if self.is_fixed() {
            <&[u8; 8]>::try_from(key)
                .ok()
                .map(|k| u64::from_be_bytes(*k))
        } else {
            None
        }
    }

    /// Data item `j` of a `FIXED` page, read in place: its key as
    /// [`TreePage::fixed_key`] gives it, and its TID. `j` must be below
    /// `data_len()` (as for [`TreePage::data`], which decodes the same
    /// item; a `FIXED` page holds plain items only, no posting lists).
    #[inline]
    pub fn fixed_entry(&self, j: usize) -> Option<(u64, Tid)> {
        if !self.is_fixed() || j >= self.data_len() {
            return None;
        }
        let w = self.fixed_word_at(j);
        Some((word_key(w), Tid::new((w >> 16) as u32, w as u16)))
    }

    /// [`TreePage::lower_bound`] for the position (`key`, `tid`). On a
    /// `FIXED` page with an 8-byte key, [`TreePage::fixed_lower_bound`]
    /// (interpolation, then galloping, comparing words read in place);
    /// otherwise [`TreePage::binary_lower_bound_at`]. Both give the same
    /// index on every page.
    pub fn lower_bound_at(&self, key: &[u8], tid: Tid) -> Result<usize> {
        if let Some(k) = self.fixed_key(key) {
            return Ok(self.fixed_lower_bound(fixed_word(k, tid)));
        }
        self.binary_lower_bound_at(key, tid)
    }

    /// The order word of data item `j` of a `FIXED` page (see
    /// [`fixed_word`]), read in place without decoding an [`Item`]. `j` is
    /// below `data_len()`, so the 14 bytes lie below `lower` (which
    /// `parse` checked against the page's size).
    #[inline]
    fn fixed_word_at(&self, j: usize) -> u128 {
        self.fixed_item_word(j + self.first_data())
    }

    /// [`TreePage::fixed_word_at`] by item number (the high key is item 0
    /// when the page has one); `i` is below the item count.
    #[inline]
    fn fixed_item_word(&self, i: usize) -> u128 {
        let off = HEADER_SIZE + i * FIXED_ITEM_LEN;
        #[cfg(test)]
        FIXED_PROBES.with(|p| p.borrow_mut().push(off));
        let p = &self.page[off..off + FIXED_ITEM_LEN];
        let key = u64::from_be_bytes([p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]]);
        fixed_word(key, Tid::new(u32_at(p, 8), u16_at(p, 12)))
    }

    /// The first data index of a `FIXED` page whose item is at or above
    /// the order word `t` (`data_len()` if none): the same answer as a
    /// binary search, with fewer cache lines touched when the keys are
    /// spread evenly. The page's items are one sorted array, its first
    /// entry (in the header's cache line) and its high key (item 0, same
    /// line) bracket every key on it; up to [`INTERPOLATION_ROUNDS`]
    /// probes are placed where the key would sit if the keys between the
    /// brackets were evenly spread, each narrowing the brackets; then a
    /// galloping search (steps 1, 2, 4, ...) from the side the last probe
    /// moved, and a binary search within the last step. Whatever the keys
    /// (equal, clustered, skewed, at `i64::MIN` or `MAX`), that is at most
    /// `INTERPOLATION_ROUNDS + 2 log2(n) + 2` probes.
    pub fn fixed_lower_bound(&self, t: u128) -> usize {
        let n = self.data_len();
        if n <= FIXED_BINARY_MAX {
            return self.fixed_binary(t, 0, n);
        }
        // Invariant: items [0, lo) are below `t`, items [hi, n) are at or
        // above it; `klo` is the key of item lo - 1, `khi` the key of item
        // hi (the high key's when hi = n: above every item of the page).
        let w0 = self.fixed_word_at(0);
        if w0 >= t {
            return 0;
        }
        let (mut lo, mut klo) = (1, word_key(w0));
        let (mut hi, mut khi) = if self.has_high_key() {
            let off = HEADER_SIZE;
            let p = &self.page[off..off + 8];
            (
                n,
                u64::from_be_bytes([p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]]),
            )
        } else {
            let wl = self.fixed_word_at(n - 1);
            if wl < t {
                return n;
            }
            (n - 1, word_key(wl))
        };
        let tk = word_key(t);
        let mut moved_lo = true;
        for _ in 0..INTERPOLATION_ROUNDS {
            if hi - lo <= FIXED_BINARY_MAX || khi <= klo {
                break;
            }
            // Items lo - 1 and hi are `span` apart; the key's share of
            // their key range says how far from lo - 1 it should sit.
            let span = (hi - lo + 1) as u128;
            let num = u128::from(tk.saturating_sub(klo)) * span;
            let step = (num / u128::from(khi - klo)).min(span) as usize;
            let g = (lo - 1 + step).clamp(lo, hi - 1);
            let wg = self.fixed_word_at(g);
            if wg < t {
                (lo, klo, moved_lo) = (g + 1, word_key(wg), true);
            } else {
                (hi, khi, moved_lo) = (g, word_key(wg), false);
            }
        }
        // Gallop from the side the last probe moved: the answer is most
        // likely near it.
        let mut step = 1;
        if moved_lo {
            while lo + step - 1 < hi {
                let probe = lo + step - 1;
                if self.fixed_word_at(probe) >= t {
                    hi = probe;
                    break;
                }
                lo = probe + 1;
                step *= 2;
            }
        } else {
            while hi >= lo + step {
                let probe = hi - step;
                if self.fixed_word_at(probe) < t {
                    lo = probe + 1;
                    break;
                }
                hi = probe;
                step *= 2;
            }
        }
        self.fixed_binary(t, lo, hi)
    }

    /// Binary search for `t` among data items [lo, hi) of a `FIXED` page,
    /// every item before `lo` below it and every one from `hi` on at or
    /// above it.
    #[inline]
    fn fixed_binary(&self, t: u128, mut lo: usize, mut hi: usize) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.fixed_word_at(mid) < t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// [`TreePage::lower_bound_at`] as a plain binary search over decoded
    /// items, for any page (the reference the `FIXED` search is checked
    /// against).
    pub fn binary_lower_bound_at(&self, key: &[u8], tid: Tid) -> Result<usize> {
        let (mut lo, mut hi) = (0, self.data_len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.data(mid)?.cmp_at(key, tid) == std::cmp::Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// [`TreePage::lower_bound_at`] for a read that starts at (`key`,
    /// `tid`) and skips every item before the result. The search trusts
    /// each posting list's stored last TID; the item just before the result,
    /// if it is a posting list of `key`, is skipped on that word alone, so
    /// its stream is decoded here and checked against it: a damaged last
    /// TID is `Corrupt` naming the page, never entries silently passed over.
    pub fn start_at(&self, key: &[u8], tid: Tid) -> Result<usize> {
        let j = self.lower_bound_at(key, tid)?;
        if j > 0 && self.is_dedup() {
            let before = self.data(j - 1)?;
            if before.is_posting() && before.key == key {
                before.tids(self.id)?;
            }
        }
        Ok(j)
    }

    /// On an internal page: the child whose range holds `skey` (the last
    /// pivot <= `skey`; the first pivot is minus infinity).
    pub fn child_for(&self, skey: &SearchKey) -> Result<BlockNumber> {
        self.child_for_at(&skey.key, skey.tid)
    }

    /// [`TreePage::child_for`] for the position (`key`, `tid`).
    pub fn child_for_at(&self, key: &[u8], tid: Tid) -> Result<BlockNumber> {
        if self.is_leaf() || self.data_len() == 0 {
            return Err(self
                .id
                .corrupt("looking for a child on a leaf or an empty internal page"));
        }
        // Index of the first pivot > skey, minus one.
        let (mut lo, mut hi) = (0, self.data_len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.data(mid)?.cmp_at(key, tid) != std::cmp::Ordering::Greater {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let child = self.data(lo.saturating_sub(1))?.child;
        if child == META_BLOCK {
            return Err(self
                .id
                .corrupt("a downlink points at block 0 (the meta page)"));
        }
        Ok(child)
    }

    /// Free bytes between the item pointers and the items.
    pub fn free_space(&self) -> usize {
        self.upper - self.lower
    }

    /// Every item's raw bytes, high key included (for a rebuild).
    pub fn all_items(&self) -> Result<Vec<Vec<u8>>> {
        (0..self.nitems)
            .map(|i| self.item(i).map(|it| it.raw.to_vec()))
            .collect()
    }
}

/// Header fields of a tree page being written.
#[derive(Copy, Clone, Debug)]
pub struct Header {
    /// Flags besides `COMPACT`, which `layout` sets or clears.
    pub flags: u16,
    pub level: u32,
    pub right: BlockNumber,
    /// The layout of `items` (the index's).
    pub layout: Layout,
}

/// Lay out a tree page from scratch with `items` (high key first if
/// `HAS_HIGH_KEY`). The caller has checked that they fit. `FIXED` in
/// `h.flags` is kept only on a compact leaf whose items are all
/// [`FIXED_ITEM_LEN`] bytes (the same items give the same page, as redo
/// needs).
pub fn build_page(page: &mut [u8], h: Header, items: &[&[u8]]) {
    page[POOL_HEADER..].fill(0);
    let mut flags = (h.flags & !COMPACT) | h.layout.flag();
    if flags & (FIXED | LEAF | COMPACT) != FIXED | LEAF | COMPACT
        || items.iter().any(|it| it.len() != FIXED_ITEM_LEN)
        || (flags & DEDUP != 0 && items.iter().any(|it| is_posting_raw(it)))
    {
        flags &= !FIXED;
    }
    put_u16(page, 12, BTREE_MAGIC);
    put_u16(page, 14, flags);
    put_u32(page, 16, h.level);
    put_u32(page, 20, h.right);
    if flags & FIXED != 0 {
        let mut at = HEADER_SIZE;
        for it in items {
            page[at..at + FIXED_ITEM_LEN].copy_from_slice(it);
            at += FIXED_ITEM_LEN;
        }
        put_u16(page, 24, at as u16);
        put_u16(page, 26, PAGE_SIZE as u16);
        return;
    }
    let mut upper = PAGE_SIZE;
    for (i, it) in items.iter().enumerate() {
        upper -= it.len();
        page[upper..upper + it.len()].copy_from_slice(it);
        let p = HEADER_SIZE + i * ITEM_POINTER_SIZE;
        put_u16(page, p, upper as u16);
        put_u16(page, p + 2, it.len() as u16);
    }
    put_u16(
        page,
        24,
        (HEADER_SIZE + items.len() * ITEM_POINTER_SIZE) as u16,
    );
    put_u16(page, 26, upper as u16);
}

/// Bytes `items` take on a page, pointers included.
pub fn space_for<'i>(items: impl IntoIterator<Item = &'i [u8]>) -> usize {
    items.into_iter().map(|i| i.len() + ITEM_POINTER_SIZE).sum()
}

/// Rewrite a `FIXED` page with item pointers (the same items), so that an
/// item of another length can go on it; nothing for another page.
pub fn unfix(page: &mut [u8]) {
    let flags = u16_at(page, 14);
    if flags & FIXED == 0 {
        return;
    }
    let lower = (u16_at(page, 24) as usize).clamp(HEADER_SIZE, PAGE_SIZE);
    let items: Vec<Vec<u8>> = page[HEADER_SIZE..lower]
        .chunks_exact(FIXED_ITEM_LEN)
        .map(<[u8]>::to_vec)
        .collect();
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let h = Header {
        flags: flags & !FIXED,
        level: u32_at(page, 16),
        right: u32_at(page, 20),
        layout: Layout::of_flags(flags),
    };
    build_page(page, h, &refs);
}

/// Bytes an item of `len` bytes takes on a page with `flags`, its pointer
/// included: `len` on a `FIXED` page (no pointers), `len` plus a pointer
/// elsewhere; `None` for an item of another length than a `FIXED` page's.
#[inline]
pub fn slot_len(flags: u16, len: usize) -> Option<usize> {
    if flags & FIXED == 0 {
        Some(len + ITEM_POINTER_SIZE)
    } else {
        (len == FIXED_ITEM_LEN).then_some(len)
    }
}

/// Set a tree page's flags (bytes 14..16).
pub fn set_flags(page: &mut [u8], flags: u16) {
    put_u16(page, 14, flags);
}

/// A tree page's flags (bytes 14..16), unchecked.
pub fn flags_of(page: &[u8]) -> u16 {
    u16_at(page, 14)
}

/// Set a tree page's right link (bytes 20..24).
pub fn set_right(page: &mut [u8], right: BlockNumber) {
    put_u32(page, 20, right);
}

/// Free bytes of a tree page laid out by [`build_page`] (upper - lower), unchecked.
pub fn free_bytes(page: &[u8]) -> usize {
    (u16_at(page, 26) as usize).saturating_sub(u16_at(page, 24) as usize)
}

/// Bytes an item with a key of `key_len` bytes takes in `layout`, without
/// its pointer.
pub fn item_len(layout: Layout, key_len: usize, internal: bool) -> usize {
    layout.header_len() + ITEM_FIXED + key_len + if internal { CHILD_SIZE } else { 0 }
}

/// Append an item after the last one of a page being filled in order (the
/// sorted build), writing it in place in the page's layout (its flags, set
/// by [`build_page`]): the same bytes as [`encode_item`]. The caller has
/// checked that it fits (`free_bytes`).
pub fn append_item(
    page: &mut [u8],
    key: &[u8],
    tid: Tid,
    child: Option<BlockNumber>,
    minus_infinity: bool,
) {
    let lower = u16_at(page, 24) as usize;
    let upper = u16_at(page, 26) as usize;
    let key = if minus_infinity { &[][..] } else { key };
    let flags = u16_at(page, 14);
    let layout = Layout::of_flags(flags);
    let len = item_len(layout, key.len(), child.is_some());
    if flags & FIXED != 0 && (len != FIXED_ITEM_LEN || child.is_some()) {
        unfix(page);
        return append_item(page, key, tid, child, minus_infinity);
    }
    if flags & FIXED != 0 {
        let mut item = Vec::with_capacity(len);
        item.extend_from_slice(key);
        item.extend_from_slice(&tid.block.to_le_bytes());
        item.extend_from_slice(&tid.offset.to_le_bytes());
        let n = (lower - HEADER_SIZE) / FIXED_ITEM_LEN;
        insert_item(page, n, &item);
        return;
    }
    let at = upper - len;
    let k = at + layout.header_len();
    if layout == Layout::Headed {
        put_u16(page, at, key.len() as u16);
        put_u16(
            page,
            at + 2,
            if minus_infinity { MINUS_INFINITY } else { 0 },
        );
    }
    page[k..k + key.len()].copy_from_slice(key);
    let t = k + key.len();
    put_u32(page, t, tid.block);
    put_u16(page, t + 4, tid.offset);
    if let Some(c) = child {
        put_u32(page, t + 6, c);
    }
    put_u16(page, lower, at as u16);
    put_u16(page, lower + 2, len as u16);
    put_u16(page, 24, (lower + ITEM_POINTER_SIZE) as u16);
    put_u16(page, 26, at as u16);
}

/// Remove and return the last item of a page filled by [`append_item`]
/// (whose bytes lie at `upper`), zeroing the space it took. `None` if the
/// page has no items or its last item is not the one at `upper`.
pub fn pop_last_item(page: &mut [u8]) -> Option<Vec<u8>> {
    let lower = u16_at(page, 24) as usize;
    let upper = u16_at(page, 26) as usize;
    if u16_at(page, 14) & FIXED != 0 {
        if !(HEADER_SIZE + FIXED_ITEM_LEN..=PAGE_SIZE).contains(&lower) {
            return None;
        }
        let at = lower - FIXED_ITEM_LEN;
        let item = page[at..lower].to_vec();
        page[at..lower].fill(0);
        put_u16(page, 24, at as u16);
        return Some(item);
    }
    if lower < HEADER_SIZE + ITEM_POINTER_SIZE {
        return None;
    }
    let p = lower - ITEM_POINTER_SIZE;
    let off = u16_at(page, p) as usize;
    let len = u16_at(page, p + 2) as usize;
    if off != upper || off + len > PAGE_SIZE {
        return None;
    }
    let item = page[off..off + len].to_vec();
    page[off..off + len].fill(0);
    page[p..lower].fill(0);
    put_u16(page, 24, p as u16);
    put_u16(page, 26, (off + len) as u16);
    Some(item)
}

/// Insert `item` as item number `index` (high key counted) of a parsed page
/// with room for it (`free_space() >= slot_len(item.len())`; on a `FIXED`
/// page the item is [`FIXED_ITEM_LEN`] bytes).
pub fn insert_item(page: &mut [u8], index: usize, item: &[u8]) {
    let flags = u16_at(page, 14);
    if flags & FIXED != 0
        && (item.len() != FIXED_ITEM_LEN || (flags & DEDUP != 0 && is_posting_raw(item)))
    {
        unfix(page);
    }
    let lower = u16_at(page, 24) as usize;
    if u16_at(page, 14) & FIXED != 0 {
        let at = HEADER_SIZE + index * FIXED_ITEM_LEN;
        page.copy_within(at..lower, at + FIXED_ITEM_LEN);
        page[at..at + FIXED_ITEM_LEN].copy_from_slice(item);
        put_u16(page, 24, (lower + FIXED_ITEM_LEN) as u16);
        return;
    }
    let upper = u16_at(page, 26) as usize - item.len();
    page[upper..upper + item.len()].copy_from_slice(item);
    let at = HEADER_SIZE + index * ITEM_POINTER_SIZE;
    page.copy_within(at..lower, at + ITEM_POINTER_SIZE);
    put_u16(page, at, upper as u16);
    put_u16(page, at + 2, item.len() as u16);
    put_u16(page, 24, (lower + ITEM_POINTER_SIZE) as u16);
    put_u16(page, 26, upper as u16);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Key, TID_MIN};

    /// The FIXED search against a plain binary search and a model.
    mod fixed_search {
        use super::*;
        use crate::key::TID_MAX;
        use proptest::prelude::*;

        /// Data items of one FIXED page at most (the high key takes one).
        const MAX_ITEMS: usize = (PAGE_SIZE - HEADER_SIZE) / FIXED_ITEM_LEN - 1;

        /// A FIXED leaf of `entries` (sorted, distinct), with a high key
        /// just above the last one when `high` and one exists.
        fn fixed_page(entries: &[(i64, Tid)], high: bool, dedup: bool) -> Vec<u8> {
            let enc = |&(k, t): &(i64, Tid)| {
                encode_item(Layout::Compact, &Key::encode_i64(k), t, None, false)
            };
            let hk = if high {
                match entries.last() {
                    None => Some((0, Tid::new(1, 1))),
                    Some(&(k, t)) if t < TID_MAX => Some((k, Tid::new(t.block, t.offset + 1))),
                    Some(&(k, t)) if t.block < u32::MAX => Some((k, Tid::new(t.block + 1, 0))),
                    Some(&(k, _)) if k < i64::MAX => Some((k + 1, TID_MIN)),
                    Some(_) => None,
                }
            } else {
                None
            };
            let mut items: Vec<Vec<u8>> = Vec::new();
            let mut flags = LEAF | FIXED;
            if let Some(h) = hk {
                items.push(enc(&h));
                flags |= HAS_HIGH_KEY;
            }
            if dedup {
                flags |= DEDUP;
            }
            items.extend(entries.iter().map(enc));
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let mut page = vec![0u8; PAGE_SIZE];
            build_page(
                &mut page,
                Header {
                    flags,
                    level: 0,
                    right: if hk.is_some() { 7 } else { NO_RIGHT },
                    layout: Layout::Compact,
                },
                &refs,
            );
            page
        }

        fn key_strategy() -> impl Strategy<Value = i64> {
            prop_oneof![
                // Evenly spread over the whole range.
                any::<i64>(),
                // Few distinct values: runs of equal keys.
                (0i64..6).prop_map(|k| k * 1000),
                // Clustered: dense near a point, sparse elsewhere.
                (0i64..200).prop_map(|k| 1_000_000 + k),
                // Skewed: exponentially spread.
                (0u32..62).prop_map(|e| 1i64 << e),
                Just(i64::MIN),
                Just(i64::MAX),
                Just(i64::MIN + 1),
                Just(i64::MAX - 1),
            ]
        }

        fn tid_strategy() -> impl Strategy<Value = Tid> {
            prop_oneof![
                (0u32..50, 1u16..60).prop_map(|(b, o)| Tid::new(b, o)),
                (any::<u32>(), 1u16..2000).prop_map(|(b, o)| Tid::new(b, o)),
                Just(Tid::new(u32::MAX, 2040)),
            ]
        }

        fn check(entries: &[(i64, Tid)], high: bool, dedup: bool, extra: &[(i64, Tid)]) {
            let page = fixed_page(entries, high, dedup);
            let tp = TreePage::parse(&page, ID).unwrap();
            assert!(tp.is_fixed());
            assert_eq!(tp.data_len(), entries.len());
            let mut targets: Vec<(i64, Tid)> = extra.to_vec();
            for &(k, t) in entries {
                targets.push((k, t));
                targets.push((k, TID_MIN));
                targets.push((k, TID_MAX));
                targets.push((k.saturating_sub(1), TID_MAX));
                targets.push((k.saturating_add(1), TID_MIN));
                if t.offset > 0 {
                    targets.push((k, Tid::new(t.block, t.offset - 1)));
                }
                targets.push((k, Tid::new(t.block, t.offset.saturating_add(1))));
            }
            for k in [i64::MIN, -1, 0, 1, i64::MAX] {
                targets.push((k, TID_MIN));
                targets.push((k, TID_MAX));
            }
            // Probes allowed: the interpolation rounds, a gallop and a
            // bisection of the step it ends in, the two bracket reads.
            let log = (usize::BITS - entries.len().leading_zeros()) as usize;
            let bound = INTERPOLATION_ROUNDS + 2 * log + 2;
            for (k, t) in targets {
                let key = Key::encode_i64(k);
                let model = entries.partition_point(|&e| e < (k, t));
                let binary = tp.binary_lower_bound_at(&key, t).unwrap();
                FIXED_PROBES.with(|p| p.borrow_mut().clear());
                let fast = tp.lower_bound_at(&key, t).unwrap();
                let probes = FIXED_PROBES.with(|p| p.borrow().len());
                assert_eq!(binary, model, "binary search for ({k}, {t:?})");
                assert_eq!(fast, model, "FIXED search for ({k}, {t:?})");
                assert!(
                    probes <= bound,
                    "{probes} probes for ({k}, {t:?}) among {} items (bound {bound})",
                    entries.len()
                );
            }
        }

        /// Distinct cache lines (64 bytes, page-aligned) the FIXED search
        /// and a plain bisection over the same items read, summed over
        /// looking up every entry's key of `entries`.
        fn lines_read(entries: &[(i64, Tid)]) -> (usize, usize) {
            let page = fixed_page(entries, true, false);
            let tp = TreePage::parse(&page, ID).unwrap();
            let first = HEADER_SIZE + FIXED_ITEM_LEN;
            let (mut fixed, mut binary) = (0, 0);
            for &(k, _) in entries {
                FIXED_PROBES.with(|p| p.borrow_mut().clear());
                tp.lower_bound_at(&Key::encode_i64(k), TID_MIN).unwrap();
                let mut lines = FIXED_PROBES.with(|p| p.borrow().clone());
                lines.iter_mut().for_each(|o| *o /= 64);
                lines.sort_unstable();
                lines.dedup();
                fixed += lines.len();
                let t = (k, TID_MIN);
                let (mut lo, mut hi) = (0, entries.len());
                let mut lines = Vec::new();
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    lines.push((first + mid * FIXED_ITEM_LEN) / 64);
                    if entries[mid] < t {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lines.sort_unstable();
                lines.dedup();
                binary += lines.len();
            }
            (fixed, binary)
        }

        #[test]
        fn the_fixed_search_reads_fewer_cache_lines_than_bisection_on_evenly_spread_keys() {
            use rand::{RngExt, SeedableRng};
            let mut rng = rand::rngs::SmallRng::seed_from_u64(24);
            let mut entries: Vec<(i64, Tid)> = (0..MAX_ITEMS)
                .map(|_| {
                    (
                        rng.random_range(0..1_000_000),
                        Tid::new(rng.random_range(0..20_000), 1),
                    )
                })
                .collect();
            entries.sort();
            entries.dedup();
            let (fixed, binary) = lines_read(&entries);
            let n = entries.len();
            assert!(
                fixed * 2 < binary,
                "FIXED search read {fixed} lines, bisection {binary}, over {n} lookups"
            );
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            #[test]
            fn the_fixed_search_finds_what_a_binary_search_finds_on_any_page(
                raw in proptest::collection::vec((key_strategy(), tid_strategy()), 0..700),
                extra in proptest::collection::vec((key_strategy(), tid_strategy()), 0..40),
                high in any::<bool>(),
                dedup in any::<bool>(),
            ) {
                let mut entries = raw;
                entries.sort();
                entries.dedup();
                entries.truncate(MAX_ITEMS);
                check(&entries, high, dedup, &extra);
            }
        }

        #[test]
        fn the_fixed_search_handles_empty_single_and_all_equal_pages() {
            for high in [false, true] {
                check(&[], high, false, &[(0, TID_MIN), (i64::MIN, TID_MIN)]);
                check(&[(5, Tid::new(1, 1))], high, false, &[]);
                check(&[(i64::MAX, TID_MAX)], high, false, &[]);
                check(&[(i64::MIN, TID_MIN)], high, false, &[]);
                let equal: Vec<_> = (0..MAX_ITEMS as u32)
                    .map(|b| (42, Tid::new(b, 1)))
                    .collect();
                check(&equal, high, true, &[]);
                // A full page of evenly spread keys, and one whose keys are
                // even apart from a far outlier at either end.
                let even: Vec<_> = (0..MAX_ITEMS as i64)
                    .map(|i| (i * 7919, Tid::new(i as u32, 1)))
                    .collect();
                check(&even, high, false, &[]);
                let mut outlier = even.clone();
                outlier.push((i64::MAX, Tid::new(9, 9)));
                outlier.remove(0);
                check(&outlier, high, false, &[]);
                let mut low = even;
                low[0] = (i64::MIN, Tid::new(9, 9));
                check(&low, high, false, &[]);
            }
        }

        #[test]
        fn the_fixed_search_stays_logarithmic_on_exponentially_skewed_keys() {
            // Keys 2^i: interpolation guesses badly everywhere; the search
            // must still be right and within its probe bound (`check`).
            let skew: Vec<_> = (0..62).map(|e| (1i64 << e, Tid::new(1, 1))).collect();
            check(&skew, true, false, &[(3, TID_MIN), (1 << 40, TID_MAX)]);
        }
    }

    const ID: PageId = PageId {
        rel: RelId(9),
        block: 3,
    };

    #[test]
    fn build_then_insert_keeps_order_and_decodes() {
        let mut page = vec![0u8; PAGE_SIZE];
        let a = encode_item(
            Layout::Compact,
            &Key::I64(1).encode(),
            Tid::new(1, 1),
            None,
            false,
        );
        let c = encode_item(
            Layout::Compact,
            &Key::I64(3).encode(),
            Tid::new(1, 3),
            None,
            false,
        );
        build_page(
            &mut page,
            Header {
                flags: LEAF,
                level: 0,
                right: NO_RIGHT,
                layout: Layout::Compact,
            },
            &[&a, &c],
        );
        let b = encode_item(
            Layout::Compact,
            &Key::I64(2).encode(),
            Tid::new(1, 2),
            None,
            false,
        );
        let tp = TreePage::parse(&page, ID).unwrap();
        let pos = tp
            .lower_bound(&SearchKey::new(Key::I64(2).encode(), Tid::new(1, 2)))
            .unwrap();
        assert_eq!(pos, 1);
        insert_item(&mut page, pos, &b);
        let tp = TreePage::parse(&page, ID).unwrap();
        let tids: Vec<_> = (0..tp.data_len())
            .map(|j| tp.data(j).unwrap().tid.offset)
            .collect();
        assert_eq!(tids, [1, 2, 3]);
        assert_eq!(
            page_kind(&page),
            Some(PageKind {
                is_meta: false,
                level: 0
            })
        );
    }

    #[test]
    fn an_i64_leaf_entry_takes_18_bytes_with_its_pointer() {
        let item = encode_item(
            Layout::Compact,
            &Key::I64(-5).encode(),
            Tid::new(7, 3),
            None,
            false,
        );
        assert_eq!(space_for([item.as_slice()]), 18);
        let it = decode_item(&item, false, Layout::Compact, ID).unwrap();
        assert_eq!(it.key, Key::I64(-5).encode().as_slice());
        assert_eq!(it.tid, Tid::new(7, 3));
        let pivot = encode_item(
            Layout::Compact,
            &Key::I64(-5).encode(),
            Tid::new(7, 3),
            Some(11),
            false,
        );
        assert_eq!(pivot.len(), 18);
        assert_eq!(
            decode_item(&pivot, true, Layout::Compact, ID)
                .unwrap()
                .child,
            11
        );
        // Shorter than a TID (and a child) is an error naming the block.
        let err = decode_item(&pivot[..9], true, Layout::Compact, ID)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("relation 9 block 3") && err.contains("shorter"),
            "{err}"
        );
    }

    #[test]
    fn minus_infinity_is_the_first_pivot_of_an_internal_page_and_only_it() {
        let mut page = vec![0u8; PAGE_SIZE];
        let first = encode_item(Layout::Compact, b"ignored", Tid::new(5, 5), Some(2), true);
        assert_eq!(
            first.len(),
            ITEM_FIXED + CHILD_SIZE,
            "stored without its key"
        );
        let second = encode_item(
            Layout::Compact,
            &Key::I64(9).encode(),
            Tid::new(1, 1),
            Some(3),
            false,
        );
        build_page(
            &mut page,
            Header {
                flags: ROOT,
                level: 1,
                right: NO_RIGHT,
                layout: Layout::Compact,
            },
            &[&first, &second],
        );
        let tp = TreePage::parse(&page, ID).unwrap();
        let (a, b) = (tp.data(0).unwrap(), tp.data(1).unwrap());
        assert!(a.minus_infinity && !b.minus_infinity);
        assert_eq!((a.child, b.child), (2, 3));
        let probe = Key::I64(i64::MIN).encode();
        assert_eq!(tp.child_for_at(&probe, Tid::new(0, 0)).unwrap(), 2);
        assert_eq!(
            tp.child_for_at(&Key::I64(9).encode(), Tid::new(1, 1))
                .unwrap(),
            3
        );
    }

    #[test]
    fn the_meta_page_records_the_layout_as_format_1_or_2_and_refuses_others() {
        let mut page = vec![0u8; PAGE_SIZE];
        for (layout, version) in [(Layout::Headed, 1), (Layout::Compact, 2)] {
            let meta = Meta {
                root: 1,
                root_level: 0,
                key_type: KeyType::I64,
                unique: false,
                layout,
                dedup: false,
            };
            meta.write(&mut page);
            assert_eq!(u32_at(&page, 16), version);
            assert_eq!(Meta::read(&page, ID).unwrap(), meta);
        }
        let meta = Meta {
            root: 1,
            root_level: 0,
            key_type: KeyType::I64,
            unique: false,
            layout: Layout::Compact,
            dedup: true,
        };
        meta.write(&mut page);
        assert_eq!(u32_at(&page, 16), 3);
        assert_eq!(Meta::read(&page, ID).unwrap(), meta);
        for version in [0, 4] {
            put_u32(&mut page, 16, version);
            let err = Meta::read(&page, ID).unwrap_err().to_string();
            assert!(
                err.contains("relation 9 block 3")
                    && err.contains(&format!("version {version}, this engine reads 1, 2 and 3")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_headed_page_decodes_its_items_and_flagged_minus_infinity() {
        let item = encode_item(
            Layout::Headed,
            &Key::I64(-5).encode(),
            Tid::new(7, 3),
            None,
            false,
        );
        assert_eq!(
            space_for([item.as_slice()]),
            22,
            "4 bytes more than compact"
        );
        let it = decode_item(&item, false, Layout::Headed, ID).unwrap();
        assert_eq!(
            (it.key, it.tid),
            (Key::I64(-5).encode().as_slice(), Tid::new(7, 3))
        );
        // The same bytes read as compact are a different (longer) key: the
        // layout must come from the page.
        assert_eq!(
            decode_item(&item, false, Layout::Compact, ID)
                .unwrap()
                .key
                .len(),
            12
        );
        let mut page = vec![0u8; PAGE_SIZE];
        let first = encode_item(Layout::Headed, &[], Tid::new(0, 0), Some(2), true);
        let second = encode_item(
            Layout::Headed,
            &Key::I64(9).encode(),
            Tid::new(1, 1),
            Some(3),
            false,
        );
        build_page(
            &mut page,
            Header {
                flags: ROOT | COMPACT,
                level: 1,
                right: NO_RIGHT,
                layout: Layout::Headed,
            },
            &[&first, &second],
        );
        let tp = TreePage::parse(&page, ID).unwrap();
        assert_eq!(
            tp.layout(),
            Layout::Headed,
            "the layout overrides a COMPACT in flags"
        );
        let (a, b) = (tp.data(0).unwrap(), tp.data(1).unwrap());
        assert!(a.minus_infinity && !b.minus_infinity);
        assert_eq!((a.child, b.child), (2, 3));
        assert_eq!(
            tp.child_for_at(&Key::I64(9).encode(), Tid::new(1, 1))
                .unwrap(),
            3
        );
        // A key length that disagrees with the item's is an error.
        let mut bad = second.clone();
        bad[0] = 7;
        let err = decode_item(&bad, true, Layout::Headed, ID)
            .unwrap_err()
            .to_string();
        assert!(err.contains("key length 7"), "{err}");
        // Appending in place writes what encode_item writes.
        let mut appended = vec![0u8; PAGE_SIZE];
        build_page(
            &mut appended,
            Header {
                flags: ROOT,
                level: 1,
                right: NO_RIGHT,
                layout: Layout::Headed,
            },
            &[],
        );
        append_item(&mut appended, &[], Tid::new(0, 0), Some(2), true);
        append_item(
            &mut appended,
            &Key::I64(9).encode(),
            Tid::new(1, 1),
            Some(3),
            false,
        );
        assert_eq!(appended, page);
    }

    #[test]
    fn a_fixed_leaf_holds_14_byte_items_without_pointers_and_stays_readable() {
        let item = |k: i64| {
            encode_item(
                Layout::Compact,
                &Key::I64(k).encode(),
                Tid::new(1, k as u16),
                None,
                false,
            )
        };
        let (a, c, hk) = (item(1), item(3), item(9));
        let mut page = vec![0u8; PAGE_SIZE];
        let header = Header {
            flags: LEAF | FIXED | HAS_HIGH_KEY,
            level: 0,
            right: 5,
            layout: Layout::Compact,
        };
        build_page(&mut page, header, &[&hk, &a, &c]);
        let tp = TreePage::parse(&page, ID).unwrap();
        assert!(tp.is_fixed());
        assert_eq!(
            tp.lower,
            HEADER_SIZE + 3 * 14,
            "no pointers: 14 bytes an entry"
        );
        assert_eq!(tp.slot_len(14), Some(14));
        assert_eq!(tp.slot_len(15), None);
        assert_eq!(tp.high_key().unwrap().unwrap().tid, Tid::new(1, 9));
        let pos = tp
            .lower_bound(&SearchKey::new(Key::I64(2).encode(), TID_MIN))
            .unwrap();
        assert_eq!(pos, 1);
        insert_item(&mut page, pos + 1, &item(2));
        let tids = |page: &[u8]| {
            let tp = TreePage::parse(page, ID).unwrap();
            (0..tp.data_len())
                .map(|j| tp.data(j).unwrap().tid.offset)
                .collect::<Vec<_>>()
        };
        assert_eq!(tids(&page), [1, 2, 3]);
        assert_eq!(pop_last_item(&mut page), Some(c.clone()));
        append_item(
            &mut page,
            &Key::I64(3).encode(),
            Tid::new(1, 3),
            None,
            false,
        );
        assert_eq!(tids(&page), [1, 2, 3]);
        // An item of another length turns the page into a pointer page
        // holding the same items.
        let long = encode_item(Layout::Compact, b"longer key", Tid::new(1, 4), None, false);
        insert_item(&mut page, 4, &long);
        let tp = TreePage::parse(&page, ID).unwrap();
        assert!(!tp.is_fixed());
        assert_eq!(tids(&page), [1, 2, 3, 4]);
        // Items of other lengths, or a page that is not a compact leaf,
        // are built with pointers whatever the flags ask.
        build_page(&mut page, header, &[&hk, &long]);
        assert!(!TreePage::parse(&page, ID).unwrap().is_fixed());
        build_page(
            &mut page,
            Header {
                layout: Layout::Headed,
                ..header
            },
            &[&a],
        );
        assert!(!TreePage::parse(&page, ID).unwrap().is_fixed());
        // FIXED with a lower between items, or on an internal page, is corrupt.
        build_page(&mut page, header, &[&hk, &a]);
        put_u16(&mut page, 24, (HEADER_SIZE + 20) as u16);
        let err = TreePage::parse(&page, ID).unwrap_err().to_string();
        assert!(err.contains("item boundary"), "{err}");
        build_page(&mut page, header, &[&hk, &a]);
        put_u16(&mut page, 14, FIXED | COMPACT | HAS_HIGH_KEY);
        put_u32(&mut page, 16, 1);
        let err = TreePage::parse(&page, ID).unwrap_err().to_string();
        assert!(err.contains("not a compact leaf"), "{err}");
    }

    #[test]
    fn runs_encode_as_posting_lists_within_the_limit_that_decode_to_the_same_tids() {
        let tids: Vec<Tid> = (0..5000u32)
            .map(|i| Tid::new(i * 37 / 10, (i % 10) as u16 * 300 + 1))
            .collect();
        for key in [Key::I64(7).encode(), vec![b'x'; 1000], vec![b'y'; 2000]] {
            let mut items = Vec::new();
            encode_postings(&key, &tids, &mut items);
            let mut back = Vec::new();
            for raw in &items {
                assert!(raw.len() <= MAX_POSTING_ITEM.max(key.len() + ITEM_FIXED));
                let it = decode_item_on(raw, false, Layout::Compact, true, ID).unwrap();
                assert_eq!(it.key, key.as_slice());
                back.extend(it.tids(ID).unwrap());
            }
            assert_eq!(back, tids);
            if key.len() > MAX_POSTING_ITEM {
                assert_eq!(items.len(), tids.len(), "a long key makes plain items");
            } else {
                assert!(items.len() < tids.len() / 10, "{} items", items.len());
            }
        }
        // The i64 posting list of 10 TIDs a few hundred blocks apart takes
        // under half of 10 fixed items.
        let ten: Vec<Tid> = (0..10u32).map(|i| Tid::new(i * 500 + 3, 17)).collect();
        assert!(encode_posting(&Key::I64(7).encode(), &ten).len() + ITEM_POINTER_SIZE < 70);
    }

    #[test]
    fn corrupt_pointer_is_an_error_naming_the_block() {
        let mut page = vec![0u8; PAGE_SIZE];
        let a = encode_item(Layout::Compact, b"abc", Tid::new(1, 1), None, false);
        build_page(
            &mut page,
            Header {
                flags: LEAF,
                level: 0,
                right: NO_RIGHT,
                layout: Layout::Compact,
            },
            &[&a],
        );
        put_u16(&mut page, HEADER_SIZE + 2, 9000); // length past the page
        let tp = TreePage::parse(&page, ID).unwrap();
        let err = tp.data(0).unwrap_err().to_string();
        assert!(err.contains("relation 9 block 3"), "{err}");
        put_u16(&mut page, 24, 5000);
        put_u16(&mut page, 26, 100);
        assert!(TreePage::parse(&page, ID).is_err());
        assert_eq!(page_kind(&[0u8; 10]), None);
    }
}
