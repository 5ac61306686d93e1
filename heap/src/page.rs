//! Slotted heap pages, shaped like PostgreSQL's (`bufpage.h`, `itemid.h`).
//!
//! A page is 8 kB. The buffer pool owns its first 12 bytes (LSN and
//! checksum); the heap's header follows, then the line-pointer array growing
//! up, then free space, then the tuples growing down from the end:
//!
//! ```text
//!  0       8   LSN (the pool's: end of the last WAL record that changed the page)
//!  8       4   checksum (the pool's)
//!  12      2   flags: 0x0001 PD_HAS_FREE_LINES (some line pointer is unused)
//!  14      2   lower: end of the line-pointer array  (PostgreSQL's pd_lower)
//!  16      2   upper: start of the tuple space        (pd_upper)
//!  18      2   special: end of the tuple space = 8192 (pd_special; heap pages have no special space)
//!  20      8   prune_xid: oldest xmax set on the page that may become prunable, 0 if none
//!  28      4   line pointer 1  \
//!  32      4   line pointer 2   } lower = 28 + 4 x count
//!  ...        free space (the "hole" left out of full-page images)
//!  upper      tuple n ... tuple 2, tuple 1  (each 8-byte aligned)
//!  8192
//! ```
//!
//! A line pointer is PostgreSQL's `ItemIdData`, a little-endian `u32` holding
//! three bit fields: offset (bits 0..15), state (bits 15..17: 0 unused,
//! 1 normal, 2 redirect, 3 dead), length (bits 17..32). A tuple's id (its
//! TID) is its block and its line pointer number, 1-based; pointers never
//! move, tuples do (compaction), so a TID stays valid while the line pointer
//! is normal.
//!
//! # Invariants (checked by [`HeapPage::parse`] and [`HeapPage::tuple`]; 5 by a scan)
//! 1. `28 <= lower <= upper <= special == 8192`, `lower - 28` a multiple of 4,
//!    `upper` a multiple of 8.
//! 2. A normal line pointer's tuple lies inside `upper..special`, starts on
//!    an 8-byte boundary and is at least a tuple header long.
//! 3. Dead and unused line pointers have no storage (offset and length 0).
//! 4. An all-zero page is a page that was extended but never initialised
//!    (a crash between extension and the first write): it reads as empty and
//!    the first insert initialises it.
//! 5. The tuple space holds the normal pointers' tuples and nothing else:
//!    `special - upper` is the sum of their lengths, each rounded up to the
//!    alignment (an insert takes its tuple's aligned length off `upper`;
//!    prune and vacuum compact the page after freeing pointers). Checked by
//!    a scan of the page ([`HeapPage::check_tuple_space`]): a `lower` cut
//!    short hides the pointers past it, which no other check sees.
//!
//! Nothing here trusts the bytes: a page that breaks an invariant is a
//! [`HeapError::CorruptPage`] naming relation and block, never a panic.
//!
//! Shortcuts: no redirect pointers are ever made (no HOT chains); there is
//! no page-level "all visible" flag.

use bufmgr::page::OWNER_HEADER_OFFSET;
use bufmgr::{BlockNumber, PAGE_SIZE, RelId};
use wal::Xid;

use crate::error::{HeapError, Result};
use crate::tuple::{
    CMAX_OFFSET, CMIN_OFFSET, HINT_BITS, INFOMASK_OFFSET, TUPLE_HEADER_SIZE, TupleHeader,
};

/// Offset of the flags field.
pub const FLAGS_OFFSET: usize = OWNER_HEADER_OFFSET;
/// Offset of `lower`.
pub const LOWER_OFFSET: usize = OWNER_HEADER_OFFSET + 2;
/// Offset of `upper`.
pub const UPPER_OFFSET: usize = OWNER_HEADER_OFFSET + 4;
/// Offset of `special`.
pub const SPECIAL_OFFSET: usize = OWNER_HEADER_OFFSET + 6;
/// Offset of `prune_xid`.
pub const PRUNE_XID_OFFSET: usize = OWNER_HEADER_OFFSET + 8;
/// Size of the whole page header (pool part included); line pointers follow.
pub const PAGE_HEADER_SIZE: usize = PRUNE_XID_OFFSET + 8;
/// Size of one line pointer.
pub const LINE_POINTER_SIZE: usize = 4;
/// Tuples start on 8-byte boundaries (PostgreSQL's MAXALIGN on 64-bit), so
/// the u64 xids are aligned and the infomask sits at an even offset.
pub const TUPLE_ALIGN: usize = 8;
/// Flag: some line pointer is unused, so an insert should look for it
/// before growing the array (PostgreSQL's `PD_HAS_FREE_LINES`).
pub const PD_HAS_FREE_LINES: u16 = 0x0001;
/// The largest tuple (header included) that fits on an empty page with its
/// line pointer (PostgreSQL's `MaxHeapTupleSize`).
pub const MAX_TUPLE_LEN: usize =
    (PAGE_SIZE - PAGE_HEADER_SIZE - LINE_POINTER_SIZE) / TUPLE_ALIGN * TUPLE_ALIGN;
/// The largest row (tuple data) an insert accepts.
pub const MAX_ROW_LEN: usize = MAX_TUPLE_LEN - TUPLE_HEADER_SIZE;

/// Round up to the tuple alignment.
pub const fn align_tuple(len: usize) -> usize {
    len.div_ceil(TUPLE_ALIGN) * TUPLE_ALIGN
}

/// The state of a line pointer (PostgreSQL's `lp_flags`).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum LpState {
    /// Free for reuse; no storage.
    Unused = 0,
    /// Points at a tuple.
    Normal = 1,
    /// Points at another line pointer (HOT); never made by this heap.
    Redirect = 2,
    /// The tuple was dead to everyone and pruned; the pointer stays until
    /// vacuum (index entries may still name it).
    Dead = 3,
}

impl LpState {
    pub fn from_bits(bits: u32) -> LpState {
        match bits & 3 {
            0 => LpState::Unused,
            1 => LpState::Normal,
            2 => LpState::Redirect,
            _ => LpState::Dead,
        }
    }
}

/// A line pointer (PostgreSQL's `ItemIdData`).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct ItemId {
    pub offset: u16,
    pub state: LpState,
    pub len: u16,
}

impl ItemId {
    const FIELD_MASK: u32 = 0x7FFF;

    pub const UNUSED: ItemId = ItemId {
        offset: 0,
        state: LpState::Unused,
        len: 0,
    };

    pub fn decode(word: u32) -> ItemId {
        ItemId {
            offset: (word & Self::FIELD_MASK) as u16,
            state: LpState::from_bits(word >> 15),
            len: ((word >> 17) & Self::FIELD_MASK) as u16,
        }
    }

    pub fn encode(self) -> u32 {
        (u32::from(self.offset) & Self::FIELD_MASK)
            | ((self.state as u32) << 15)
            | ((u32::from(self.len) & Self::FIELD_MASK) << 17)
    }
}

/// Which page, for error messages.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct PageId {
    pub rel: RelId,
    pub block: BlockNumber,
}

impl PageId {
    pub fn corrupt(self, detail: impl Into<String>) -> HeapError {
        HeapError::CorruptPage {
            rel: self.rel,
            block: self.block,
            detail: detail.into(),
        }
    }
}

fn u16_at(page: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([page[off], page[off + 1]])
}

fn put_u16(page: &mut [u8], off: usize, v: u16) {
    page[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

/// Are all of `bytes` zero? (Whole words at a time: a blank page is read
/// to its end.)
fn is_zero(bytes: &[u8]) -> bool {
    let (words, tail) = bytes.as_chunks::<8>();
    words
        .iter()
        .fold(0u64, |acc, w| acc | u64::from_ne_bytes(*w))
        == 0
        && tail.iter().all(|&b| b == 0)
}

/// Where line pointer `off` (1-based) sits on a page; past the page for
/// an offset no page can hold.
pub(crate) fn lp_offset(off: u16) -> usize {
    PAGE_HEADER_SIZE + (usize::from(off) - 1) * LINE_POINTER_SIZE
}

/// A checked read-only view of a heap page.
#[derive(Copy, Clone, Debug)]
pub struct HeapPage<'a> {
    bytes: &'a [u8],
    id: PageId,
    lower: usize,
    upper: usize,
    new: bool,
}

impl<'a> HeapPage<'a> {
    /// Check the header (invariant 1) and return a view of the page.
    pub fn parse(bytes: &'a [u8], id: PageId) -> Result<HeapPage<'a>> {
        if bytes.len() != PAGE_SIZE {
            return Err(id.corrupt(format!("page is {} bytes, not {PAGE_SIZE}", bytes.len())));
        }
        let lower = usize::from(u16_at(bytes, LOWER_OFFSET));
        let upper = usize::from(u16_at(bytes, UPPER_OFFSET));
        let special = usize::from(u16_at(bytes, SPECIAL_OFFSET));
        if lower == 0 && upper == 0 && special == 0 {
            // Invariant 4: never initialised. Accept only if truly blank.
            if !is_zero(&bytes[OWNER_HEADER_OFFSET..]) {
                return Err(id.corrupt("header is zero but the page is not"));
            }
            return Ok(HeapPage {
                bytes,
                id,
                lower: PAGE_HEADER_SIZE,
                upper: PAGE_SIZE,
                new: true,
            });
        }
        let ok = special == PAGE_SIZE
            && PAGE_HEADER_SIZE <= lower
            && lower <= upper
            && upper <= special
            && (lower - PAGE_HEADER_SIZE).is_multiple_of(LINE_POINTER_SIZE)
            && upper % TUPLE_ALIGN == 0;
        if !ok {
            return Err(id.corrupt(format!(
                "bad header: lower {lower}, upper {upper}, special {special}"
            )));
        }
        Ok(HeapPage {
            bytes,
            id,
            lower,
            upper,
            new: false,
        })
    }

    pub fn id(&self) -> PageId {
        self.id
    }

    /// Never initialised (all zeros)?
    pub fn is_new(&self) -> bool {
        self.new
    }

    pub fn lower(&self) -> usize {
        self.lower
    }

    pub fn upper(&self) -> usize {
        self.upper
    }

    pub fn flags(&self) -> u16 {
        u16_at(self.bytes, FLAGS_OFFSET)
    }

    pub fn prune_xid(&self) -> Xid {
        u64::from_le_bytes(
            self.bytes[PRUNE_XID_OFFSET..PAGE_HEADER_SIZE]
                .try_into()
                .expect("8 bytes"),
        )
    }

    /// Number of line pointers (the highest offset number).
    pub fn item_count(&self) -> u16 {
        ((self.lower - PAGE_HEADER_SIZE) / LINE_POINTER_SIZE) as u16
    }

    /// Bytes free between the line pointers and the tuples.
    pub fn free_bytes(&self) -> usize {
        self.upper - self.lower
    }

    /// The largest tuple (header included, before alignment) an insert could
    /// place here, counting a new line pointer (PostgreSQL's
    /// `PageGetHeapFreeSpace`, roughly).
    pub fn free_space(&self) -> usize {
        self.free_bytes().saturating_sub(LINE_POINTER_SIZE) / TUPLE_ALIGN * TUPLE_ALIGN
    }

    /// Line pointer `off` (1-based).
    pub fn item(&self, off: u16) -> Result<ItemId> {
        if off == 0 || off > self.item_count() {
            return Err(self.id.corrupt(format!(
                "line pointer {off} outside 1..={}",
                self.item_count()
            )));
        }
        let p = lp_offset(off);
        Ok(ItemId::decode(u32::from_le_bytes(
            self.bytes[p..p + LINE_POINTER_SIZE]
                .try_into()
                .expect("4 bytes"),
        )))
    }

    /// The tuple of a normal line pointer: `(page offset, bytes)`; `None`
    /// for an unused or dead pointer or one past the end (invariants 2 and
    /// 3 checked: an unused or dead pointer with storage is corrupt).
    #[inline]
    pub fn tuple(&self, off: u16) -> Result<Option<(usize, &'a [u8])>> {
        if off == 0 || off > self.item_count() {
            return Ok(None);
        }
        let item = self.item(off)?;
        self.normal_tuple(off, item)
    }

    /// What line pointer `off`, `item`, points at: its tuple if it is a
    /// normal pointer into the tuple space, `None` if it is unused or
    /// dead, an error otherwise (made out of line: the checks are inlined
    /// into every scan's loop).
    #[inline(always)]
    fn normal_tuple(&self, off: u16, item: ItemId) -> Result<Option<(usize, &'a [u8])>> {
        match item.state {
            LpState::Normal => {}
            // Invariant 3: no storage. A pointer whose state bits were
            // damaged keeps its tuple's place; read as "no tuple", its row
            // would vanish from every read without a word.
            LpState::Unused | LpState::Dead => {
                return match item.offset == 0 && item.len == 0 {
                    true => Ok(None),
                    false => Err(self.storage(off, item)),
                };
            }
            LpState::Redirect => return Err(self.redirect(off)),
        }
        let start = usize::from(item.offset);
        let len = usize::from(item.len);
        let ok = start >= self.upper
            && start % TUPLE_ALIGN == 0
            && len >= TUPLE_HEADER_SIZE
            && start + len <= PAGE_SIZE;
        match self.bytes.get(start..start + len) {
            Some(t) if ok => Ok(Some((start, t))),
            _ => Err(self.outside(off, start, len)),
        }
    }

    #[cold]
    #[inline(never)]
    fn redirect(&self, off: u16) -> HeapError {
        self.id
            .corrupt(format!("line pointer {off} is a redirect (no HOT here)"))
    }

    #[cold]
    #[inline(never)]
    fn storage(&self, off: u16, item: ItemId) -> HeapError {
        self.id.corrupt(format!(
            "line pointer {off} is {:?} but has storage ({} bytes at offset {})",
            item.state, item.len, item.offset
        ))
    }

    #[cold]
    #[inline(never)]
    fn outside(&self, off: u16, start: usize, len: usize) -> HeapError {
        self.id.corrupt(format!(
            "line pointer {off} points at {len} bytes at offset {start}, outside the tuple space {}..{PAGE_SIZE}",
            self.upper
        ))
    }

    /// Invariant 5, once every tuple of the page was read: `used`, the sum
    /// of the normal pointers' tuple lengths each rounded up to the
    /// alignment ([`align_tuple`]), fills the tuple space exactly. Not on a
    /// page being changed (prune frees pointers before it compacts).
    pub fn check_tuple_space(&self, used: usize) -> Result<()> {
        let space = PAGE_SIZE - self.upper;
        if used == space {
            return Ok(());
        }
        Err(self.id.corrupt(format!(
            "the line pointers (1..={}) account for {used} bytes of tuples, the tuple \
             space {}..{PAGE_SIZE} holds {space}",
            self.item_count(),
            self.upper
        )))
    }

    /// The header of the tuple at `off`, if it is a normal pointer.
    pub fn header(&self, off: u16) -> Result<Option<(usize, TupleHeader)>> {
        Ok(self.tuple(off)?.map(|(start, t)| {
            (
                start,
                TupleHeader::decode(t).expect("length checked by tuple()"),
            )
        }))
    }

    /// Every normal tuple: `(offset number, page offset, bytes)`.
    #[inline]
    pub fn tuples(&self) -> Tuples<'a> {
        Tuples {
            page: *self,
            next: 1,
            count: self.item_count(),
        }
    }
}

/// The iterator of [`HeapPage::tuples`]: each line pointer read straight
/// from the page's pointer array (whose bounds `parse` checked), each
/// normal one checked as [`HeapPage::tuple`] checks it. Small enough to be
/// inlined into a scan's loop: a call per line pointer, returning a
/// `Result` the size of an error, cost a scan about a sixth of its
/// instructions.
#[derive(Clone, Debug)]
pub struct Tuples<'a> {
    page: HeapPage<'a>,
    /// The offset number to read next (1-based).
    next: u16,
    count: u16,
}

impl<'a> Iterator for Tuples<'a> {
    type Item = Result<(u16, usize, &'a [u8])>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        while self.next <= self.count {
            let off = self.next;
            self.next += 1;
            // `off <= item_count`, so the pointer lies below `lower`.
            let p = lp_offset(off);
            let word = u32::from_le_bytes(
                self.page.bytes[p..p + LINE_POINTER_SIZE]
                    .try_into()
                    .expect("4 bytes"),
            );
            match self.page.normal_tuple(off, ItemId::decode(word)) {
                Ok(Some((start, t))) => return Some(Ok((off, start, t))),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        None
    }
}

// ---- changes; each used both by the live path and by redo, so both make
// ---- the same bytes from the same page.

/// Initialise an empty heap page (the pool's 12 bytes are left alone).
pub fn init(page: &mut [u8]) {
    page[OWNER_HEADER_OFFSET..].fill(0);
    put_u16(page, LOWER_OFFSET, PAGE_HEADER_SIZE as u16);
    put_u16(page, UPPER_OFFSET, PAGE_SIZE as u16);
    put_u16(page, SPECIAL_OFFSET, PAGE_SIZE as u16);
}

fn set_item(page: &mut [u8], off: u16, item: ItemId) {
    let p = lp_offset(off);
    page[p..p + LINE_POINTER_SIZE].copy_from_slice(&item.encode().to_le_bytes());
}

/// The offset number an insert into this page will use: the first unused
/// line pointer if the page has one, else a new one at the end.
pub fn next_offset(view: &HeapPage<'_>) -> Result<u16> {
    if view.flags() & PD_HAS_FREE_LINES != 0 {
        for off in 1..=view.item_count() {
            if view.item(off)?.state == LpState::Unused {
                return Ok(off);
            }
        }
    }
    Ok(view.item_count() + 1)
}

/// Put `tuple` (header and data) on the page as line pointer `off`, which
/// must be unused or the next new one. Initialises a new page first.
/// Fails (as corrupt data) if it does not fit: callers check the space first.
pub fn add_tuple(page: &mut [u8], id: PageId, off: u16, tuple: &[u8]) -> Result<()> {
    place_tuple(page, id, off, tuple.len(), |dest| {
        dest.copy_from_slice(tuple)
    })
}

/// [`add_tuple`] of the tuple `header` + `data`, written in place on the
/// page (no tuple built first).
pub fn add_row(
    page: &mut [u8],
    id: PageId,
    off: u16,
    header: &TupleHeader,
    data: &[u8],
) -> Result<()> {
    place_tuple(page, id, off, TUPLE_HEADER_SIZE + data.len(), |dest| {
        header.encode_into(&mut dest[..TUPLE_HEADER_SIZE]);
        dest[TUPLE_HEADER_SIZE..].copy_from_slice(data);
    })
}

/// `add_tuple` of a tuple of `len` bytes that `write` writes into its place.
fn place_tuple(
    page: &mut [u8],
    id: PageId,
    off: u16,
    len: usize,
    write: impl FnOnce(&mut [u8]),
) -> Result<()> {
    let view = HeapPage::parse(page, id)?;
    let (lower, upper, count, new) = (view.lower(), view.upper(), view.item_count(), view.is_new());
    let appending = off == count + 1;
    if !appending && (off == 0 || off > count || view.item(off)?.state != LpState::Unused) {
        return Err(id.corrupt(format!("line pointer {off} is not free for an insert")));
    }
    let need = align_tuple(len) + if appending { LINE_POINTER_SIZE } else { 0 };
    if !(TUPLE_HEADER_SIZE..=MAX_TUPLE_LEN).contains(&len) || upper - lower < need {
        return Err(id.corrupt(format!(
            "tuple of {len} bytes does not fit ({} bytes free)",
            upper - lower
        )));
    }
    if new {
        init(page);
    }
    let start = upper - align_tuple(len);
    write(&mut page[start..start + len]);
    page[start + len..upper].fill(0);
    let new_lower = if appending {
        lower + LINE_POINTER_SIZE
    } else {
        lower
    };
    put_u16(page, LOWER_OFFSET, new_lower as u16);
    put_u16(page, UPPER_OFFSET, start as u16);
    set_item(
        page,
        off,
        ItemId {
            offset: start as u16,
            state: LpState::Normal,
            len: len as u16,
        },
    );
    Ok(())
}

/// Overwrite the header of the tuple at `off`.
pub fn put_header(page: &mut [u8], id: PageId, off: u16, header: &TupleHeader) -> Result<()> {
    let (start, _) = HeapPage::parse(page, id)?
        .tuple(off)?
        .ok_or_else(|| id.corrupt(format!("line pointer {off} has no tuple")))?;
    header.encode_into(&mut page[start..start + TUPLE_HEADER_SIZE]);
    Ok(())
}

/// Note that a tuple on the page got an xmax: the page may become prunable
/// once `xid` is older than every snapshot (PostgreSQL's `PageSetPrunable`).
pub fn set_prunable(page: &mut [u8], xid: Xid) {
    let cur = u64::from_le_bytes(
        page[PRUNE_XID_OFFSET..PAGE_HEADER_SIZE]
            .try_into()
            .expect("8"),
    );
    if cur == 0 || xid < cur {
        page[PRUNE_XID_OFFSET..PAGE_HEADER_SIZE].copy_from_slice(&xid.to_le_bytes());
    }
}

/// Apply a prune or vacuum: set each listed line pointer to `Dead` or
/// `Unused` (dropping its storage), cut unused pointers off the end of the
/// array, compact the tuples to the end of the page, and store the new
/// `prune_xid`. Deterministic, so redo makes the same page.
pub fn apply_prune(
    page: &mut [u8],
    id: PageId,
    changes: &[(u16, LpState)],
    prune_xid: Xid,
) -> Result<()> {
    let view = HeapPage::parse(page, id)?;
    if view.is_new() {
        return Err(id.corrupt("prune of an uninitialised page"));
    }
    let mut count = view.item_count();
    for &(off, state) in changes {
        if off == 0 || off > count || !matches!(state, LpState::Dead | LpState::Unused) {
            return Err(id.corrupt(format!("cannot set line pointer {off} to {state:?}")));
        }
        set_item(
            page,
            off,
            ItemId {
                offset: 0,
                state,
                len: 0,
            },
        );
    }
    // Truncate trailing unused pointers (PostgreSQL's PageTruncateLinePointerArray).
    while count > 0 && HeapPage::parse(page, id)?.item(count)?.state == LpState::Unused {
        count -= 1;
        put_u16(page, LOWER_OFFSET, lp_offset(count + 1) as u16);
    }
    let view = HeapPage::parse(page, id)?;
    let mut has_free = false;
    for off in 1..=count {
        has_free |= view.item(off)?.state == LpState::Unused;
    }
    let flags = u16_at(page, FLAGS_OFFSET) & !PD_HAS_FREE_LINES;
    put_u16(
        page,
        FLAGS_OFFSET,
        flags | if has_free { PD_HAS_FREE_LINES } else { 0 },
    );
    page[PRUNE_XID_OFFSET..PAGE_HEADER_SIZE].copy_from_slice(&prune_xid.to_le_bytes());
    compact(page, id)
}

/// Vacuum's second pass over one page (PostgreSQL's
/// `lazy_vacuum_heap_page`): every listed line pointer, which must be
/// `Dead`, becomes `Unused`; trailing unused pointers are cut off and
/// `PD_HAS_FREE_LINES` is set as [`apply_prune`] does; `prune_xid` is kept.
/// A listed pointer that is not dead is corrupt data (the caller checks the
/// states before logging, so redo finds them dead too). Deterministic.
pub fn apply_vacuum(page: &mut [u8], id: PageId, offsets: &[u16]) -> Result<()> {
    let view = HeapPage::parse(page, id)?;
    if view.is_new() {
        return Err(id.corrupt("vacuum of an uninitialised page"));
    }
    for &off in offsets {
        if off == 0 || off > view.item_count() || view.item(off)?.state != LpState::Dead {
            return Err(id.corrupt(format!("vacuum: line pointer {off} is not a dead pointer")));
        }
    }
    let prune_xid = view.prune_xid();
    let changes: Vec<(u16, LpState)> = offsets.iter().map(|&o| (o, LpState::Unused)).collect();
    apply_prune(page, id, &changes, prune_xid)
}

/// Move every normal tuple to the end of the page, highest first, closing
/// the gaps left by pruned ones (PostgreSQL's `PageRepairFragmentation`).
/// Line pointer numbers do not change. Processing tuples in descending
/// offset order means each moves only upwards, into space that no tuple
/// still to be moved occupies.
pub fn compact(page: &mut [u8], id: PageId) -> Result<()> {
    let view = HeapPage::parse(page, id)?;
    let lower = view.lower();
    let mut items: Vec<(usize, u16, usize)> = Vec::with_capacity(usize::from(view.item_count()));
    for t in view.tuples() {
        let (off, start, bytes) = t?;
        items.push((start, off, bytes.len()));
    }
    items.sort_unstable_by(|a, b| b.cmp(a));
    let mut upper = PAGE_SIZE;
    for (start, off, len) in items {
        let size = align_tuple(len);
        if upper < lower + size {
            return Err(id.corrupt("tuples overlap: they do not fit when compacted"));
        }
        upper -= size;
        page.copy_within(start..start + len, upper);
        page[upper + len..upper + size].fill(0);
        set_item(
            page,
            off,
            ItemId {
                offset: upper as u16,
                state: LpState::Normal,
                len: len as u16,
            },
        );
    }
    page[lower..upper].fill(0);
    put_u16(page, UPPER_OFFSET, upper as u16);
    Ok(())
}

/// A copy of `page` with what may legitimately differ between a live page
/// and its replayed twin blanked out: the checksum, the free-space hole, the
/// hint bits (hints are not WAL-logged) and the command ids (redo does not
/// restore cmax). PostgreSQL's `heap_mask`, used for
/// `wal_consistency_checking`.
pub fn mask_for_comparison(page: &[u8], id: PageId) -> Result<Vec<u8>> {
    let mut out = page.to_vec();
    out[bufmgr::page::CHECKSUM_OFFSET..OWNER_HEADER_OFFSET].fill(0);
    let view = HeapPage::parse(page, id)?;
    if view.is_new() {
        return Ok(out);
    }
    out[view.lower()..view.upper()].fill(0);
    for t in view.tuples() {
        let (_, start, _) = t?;
        let p = start + INFOMASK_OFFSET;
        let mask = u16_at(&out, p) & !HINT_BITS;
        put_u16(&mut out, p, mask);
        // Command ids matter only to the running transaction; redo does
        // not restore cmax (PostgreSQL's heap_mask blanks t_cid too).
        out[start + CMIN_OFFSET..start + CMAX_OFFSET + 4].fill(0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::{Tid, build_tuple};

    const ID: PageId = PageId {
        rel: RelId(5),
        block: 9,
    };

    fn tuple(xmin: u64, data: &[u8]) -> Vec<u8> {
        build_tuple(&TupleHeader::new_insert(xmin, Tid::new(9, 1), false), data)
    }

    #[test]
    fn a_row_added_in_place_equals_the_tuple_built_first() {
        let header = TupleHeader::new_insert(7, Tid::new(9, 1), false);
        let (mut built, mut in_place) = (vec![0u8; PAGE_SIZE], vec![0u8; PAGE_SIZE]);
        for (off, data) in [(1, &b"abc"[..]), (2, b""), (3, &[9u8; 301][..])] {
            add_tuple(&mut built, ID, off, &build_tuple(&header, data)).unwrap();
            add_row(&mut in_place, ID, off, &header, data).unwrap();
        }
        assert_eq!(built, in_place);
        let e = add_row(&mut in_place, ID, 4, &header, &vec![1; MAX_TUPLE_LEN]).unwrap_err();
        assert!(e.to_string().contains("does not fit"), "{e}");
    }

    #[test]
    fn tuples_are_added_aligned_and_read_back() {
        let mut page = vec![0u8; PAGE_SIZE];
        assert!(HeapPage::parse(&page, ID).unwrap().is_new());
        for (i, d) in [&b"a"[..], b"bbbbbbbbbbb", b""].iter().enumerate() {
            let view = HeapPage::parse(&page, ID).unwrap();
            let off = next_offset(&view).unwrap();
            assert_eq!(usize::from(off), i + 1);
            add_tuple(&mut page, ID, off, &tuple(3, d)).unwrap();
        }
        let view = HeapPage::parse(&page, ID).unwrap();
        assert_eq!(view.item_count(), 3);
        for (off, start, t) in view.tuples().map(Result::unwrap) {
            assert_eq!(start % TUPLE_ALIGN, 0);
            assert_eq!((start + INFOMASK_OFFSET) % 2, 0);
            assert_eq!(TupleHeader::decode(t).unwrap().xmin, 3, "tuple {off}");
        }
        assert_eq!(
            &view.tuple(2).unwrap().unwrap().1[TUPLE_HEADER_SIZE..],
            b"bbbbbbbbbbb"
        );
    }

    #[test]
    fn a_corrupt_line_pointer_is_an_error_naming_relation_and_block() {
        let mut page = vec![0u8; PAGE_SIZE];
        add_tuple(&mut page, ID, 1, &tuple(3, b"x")).unwrap();
        // Point line pointer 1 past the end of the page.
        set_item(
            &mut page,
            1,
            ItemId {
                offset: 8184,
                state: LpState::Normal,
                len: 100,
            },
        );
        let err = HeapPage::parse(&page, ID).unwrap().tuple(1).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("relation 5") && msg.contains("block 9"),
            "{msg}"
        );
        // A header with lower past upper.
        put_u16(&mut page, LOWER_OFFSET, 9000);
        assert!(HeapPage::parse(&page, ID).is_err());
        // Garbage after a zero header.
        let mut junk = vec![0u8; PAGE_SIZE];
        junk[4000] = 1;
        assert!(HeapPage::parse(&junk, ID).is_err());
    }

    /// What a page's tuples are: each an offset, a place and its bytes, or
    /// an error's message.
    type Listing = Vec<std::result::Result<(u16, usize, Vec<u8>), String>>;

    /// `tuples()` reads the pointer array itself: it must yield exactly
    /// what `tuple(off)` says of each offset, in order, an error included,
    /// whatever the pointers hold (normal, unused, dead, redirect, pointing
    /// below `upper`, misaligned, past the page, shorter than a header).
    #[test]
    fn tuples_yield_what_tuple_says_of_every_pointer() {
        let mut page = vec![0u8; PAGE_SIZE];
        for off in 1..=12u16 {
            add_tuple(&mut page, ID, off, &tuple(u64::from(off), &[off as u8; 20])).unwrap();
        }
        let upper = HeapPage::parse(&page, ID).unwrap().upper() as u16;
        let damaged = [
            (2, ItemId::UNUSED),
            (
                3,
                ItemId {
                    offset: 0,
                    state: LpState::Dead,
                    len: 0,
                },
            ),
            (
                5,
                ItemId {
                    offset: 2,
                    state: LpState::Redirect,
                    len: 0,
                },
            ),
            (
                7,
                ItemId {
                    offset: upper - 8,
                    state: LpState::Normal,
                    len: 40,
                },
            ),
            (
                8,
                ItemId {
                    offset: upper + 4,
                    state: LpState::Normal,
                    len: 40,
                },
            ),
            (
                9,
                ItemId {
                    offset: 8184,
                    state: LpState::Normal,
                    len: 100,
                },
            ),
            (
                10,
                ItemId {
                    offset: upper,
                    state: LpState::Normal,
                    len: 3,
                },
            ),
        ];
        let reference = |page: &[u8]| -> Listing {
            let view = HeapPage::parse(page, ID).unwrap();
            (1..=view.item_count())
                .filter_map(|off| match view.tuple(off) {
                    Ok(Some((start, t))) => Some(Ok((off, start, t.to_vec()))),
                    Ok(None) => None,
                    Err(e) => Some(Err(e.to_string())),
                })
                .collect()
        };
        let listed = |page: &[u8]| -> Listing {
            let view = HeapPage::parse(page, ID).unwrap();
            view.tuples()
                .map(|t| {
                    t.map(|(off, start, b)| (off, start, b.to_vec()))
                        .map_err(|e| e.to_string())
                })
                .collect()
        };
        assert_eq!(listed(&page), reference(&page));
        assert_eq!(listed(&page).len(), 12);
        for (i, &(off, item)) in damaged.iter().enumerate() {
            // Each damage alone, then all of them so far together.
            let mut one = page.clone();
            set_item(&mut one, off, item);
            assert_eq!(listed(&one), reference(&one), "pointer {off} as {item:?}");
            for &(off, item) in &damaged[..=i] {
                set_item(&mut page, off, item);
            }
            assert_eq!(
                listed(&page),
                reference(&page),
                "the first {} damages",
                i + 1
            );
        }
        let all = listed(&page);
        assert_eq!(all.iter().filter(|t| t.is_err()).count(), 5, "{all:?}");
        assert_eq!(all.iter().filter(|t| t.is_ok()).count(), 5, "{all:?}");
    }

    /// Invariant 3: a dead or unused line pointer has no storage. One
    /// whose state bits were damaged but which still holds its tuple's
    /// place is an error of `tuple` and of `tuples`, naming the relation
    /// and block, never a row read as absent; one without storage (as
    /// prune and vacuum leave it) is still "no tuple".
    #[test]
    fn an_unused_or_dead_pointer_with_storage_is_corrupt() {
        let mut page = vec![0u8; PAGE_SIZE];
        for off in 1..=3u16 {
            add_tuple(&mut page, ID, off, &tuple(u64::from(off), &[7; 20])).unwrap();
        }
        let normal = HeapPage::parse(&page, ID).unwrap().item(2).unwrap();
        for state in [LpState::Unused, LpState::Dead] {
            for (offset, len) in [
                (normal.offset, normal.len),
                (normal.offset, 0),
                (0, normal.len),
            ] {
                let mut damaged = page.clone();
                set_item(&mut damaged, 2, ItemId { offset, state, len });
                let view = HeapPage::parse(&damaged, ID).unwrap();
                let what = format!("{state:?} at {offset}, {len} bytes");
                let e = view.tuple(2).unwrap_err().to_string();
                assert!(
                    e.contains("line pointer 2") && e.contains("relation 5 block 9"),
                    "{what}: {e}"
                );
                let listed: Vec<_> = view.tuples().collect();
                assert_eq!(listed.len(), 3, "{what}");
                assert_eq!(listed[0].as_ref().unwrap().0, 1, "{what}");
                assert_eq!(listed[1].as_ref().unwrap_err().to_string(), e, "{what}");
                assert_eq!(listed[2].as_ref().unwrap().0, 3, "{what}");
            }
            let mut pruned = page.clone();
            apply_prune(&mut pruned, ID, &[(2, state)], 0).unwrap();
            let view = HeapPage::parse(&pruned, ID).unwrap();
            assert_eq!(view.tuple(2).unwrap(), None, "{state:?} without storage");
            let offs: Vec<u16> = view.tuples().map(|t| t.unwrap().0).collect();
            assert_eq!(offs, [1, 3], "{state:?} without storage");
        }
    }

    /// Invariant 5: the tuple space holds the normal pointers' tuples and
    /// nothing else, on a page as inserts, prune and vacuum leave it; a
    /// pointer array cut short (`lower` damaged, down to no pointers at
    /// all) leaves tuples no pointer accounts for: an error naming the
    /// relation and the block.
    #[test]
    fn a_pointer_array_cut_short_leaves_tuples_unaccounted_for() {
        let used = |page: &[u8]| -> usize {
            let view = HeapPage::parse(page, ID).unwrap();
            view.tuples().map(|t| align_tuple(t.unwrap().2.len())).sum()
        };
        let check = |page: &[u8]| {
            HeapPage::parse(page, ID)
                .unwrap()
                .check_tuple_space(used(page))
        };
        let mut page = vec![0u8; PAGE_SIZE];
        check(&page).unwrap();
        for off in 1..=6u16 {
            let len = usize::from(off) * 5;
            add_tuple(&mut page, ID, off, &tuple(u64::from(off), &vec![1; len])).unwrap();
            check(&page).unwrap();
        }
        apply_prune(
            &mut page,
            ID,
            &[(2, LpState::Dead), (6, LpState::Unused)],
            0,
        )
        .unwrap();
        check(&page).unwrap();
        apply_vacuum(&mut page, ID, &[2]).unwrap();
        check(&page).unwrap();
        let lower = HeapPage::parse(&page, ID).unwrap().lower();
        for cut in [lower - LINE_POINTER_SIZE, PAGE_HEADER_SIZE] {
            let mut damaged = page.clone();
            put_u16(&mut damaged, LOWER_OFFSET, cut as u16);
            let e = check(&damaged).unwrap_err().to_string();
            assert!(
                e.contains("relation 5 block 9") && e.contains("tuple space"),
                "lower {cut}: {e}"
            );
        }
    }

    #[test]
    fn prune_compacts_and_frees_line_pointers() {
        let mut page = vec![0u8; PAGE_SIZE];
        for off in 1..=4 {
            add_tuple(
                &mut page,
                ID,
                off,
                &tuple(u64::from(off), &[off as u8; 100]),
            )
            .unwrap();
        }
        let before = HeapPage::parse(&page, ID).unwrap().free_bytes();
        apply_prune(
            &mut page,
            ID,
            &[(2, LpState::Dead), (4, LpState::Unused)],
            0,
        )
        .unwrap();
        let view = HeapPage::parse(&page, ID).unwrap();
        assert_eq!(view.item_count(), 3, "trailing unused pointer cut off");
        assert_eq!(view.item(2).unwrap().state, LpState::Dead);
        assert!(view.free_bytes() >= before + 2 * 128);
        assert_eq!(view.tuple(3).unwrap().unwrap().1[TUPLE_HEADER_SIZE], 3);
        assert_eq!(view.tuple(1).unwrap().unwrap().1[TUPLE_HEADER_SIZE], 1);
        apply_prune(&mut page, ID, &[(2, LpState::Unused)], 0).unwrap();
        let view = HeapPage::parse(&page, ID).unwrap();
        assert_ne!(view.flags() & PD_HAS_FREE_LINES, 0);
        assert_eq!(
            next_offset(&view).unwrap(),
            2,
            "the unused pointer is reused"
        );
    }

    #[test]
    fn vacuum_frees_only_dead_pointers() {
        let mut page = vec![0u8; PAGE_SIZE];
        for off in 1..=4 {
            add_tuple(&mut page, ID, off, &tuple(3, &[off as u8; 50])).unwrap();
        }
        apply_prune(&mut page, ID, &[(2, LpState::Dead), (4, LpState::Dead)], 7).unwrap();
        // A normal pointer, an out-of-range one, and an unused one are refused.
        for bad in [1u16, 9, 0] {
            let before = page.clone();
            assert!(apply_vacuum(&mut page, ID, &[2, bad]).is_err(), "{bad}");
            assert_eq!(page, before, "nothing changed by a refused vacuum");
        }
        apply_vacuum(&mut page, ID, &[2, 4]).unwrap();
        let view = HeapPage::parse(&page, ID).unwrap();
        assert_eq!(view.item_count(), 3, "trailing pointer 4 cut off");
        assert_eq!(view.item(2).unwrap().state, LpState::Unused);
        assert_eq!(view.prune_xid(), 7, "prune_xid kept");
        assert_ne!(view.flags() & PD_HAS_FREE_LINES, 0);
        assert_eq!(next_offset(&view).unwrap(), 2);
        assert!(apply_vacuum(&mut page, ID, &[2]).is_err(), "already unused");
    }

    #[test]
    fn a_full_page_refuses_another_tuple() {
        let mut page = vec![0u8; PAGE_SIZE];
        add_tuple(&mut page, ID, 1, &vec![0u8; MAX_TUPLE_LEN]).unwrap();
        assert_eq!(HeapPage::parse(&page, ID).unwrap().free_space(), 0);
        assert!(add_tuple(&mut page, ID, 2, &tuple(1, b"")).is_err());
    }
}
