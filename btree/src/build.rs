//! Bottom-up build of an empty index from sorted entries (PostgreSQL's
//! `nbtsort.c`).
//!
//! [`Index::build_sorted`] takes entries in strictly ascending (key, TID)
//! order and fills pages left to right instead of inserting one entry at a
//! time:
//!
//! 1. Each level has one page being filled, in private memory. An item is
//!    appended while the page's free space is at least the level's reserve:
//!    10% of the page on leaves ([`LEAF_FILLFACTOR`] = 90) and 30% on
//!    internal pages ([`NONLEAF_FILLFACTOR`] = 70), as nbtsort's
//!    `btps_full`; an item that does not fit at all also ends the page.
//! 2. When the page is full, the relation is extended by one page for its
//!    right sibling, and the page's **last** item moves there: the full page
//!    gets as its high key the shortest separator between its new last
//!    item and the moved one on a leaf ([`page::separator`], suffix
//!    truncation, as a leaf split makes it; full width on a `FIXED` leaf),
//!    the moved pivot's separator on an internal level (never longer than
//!    the item it replaces, so it always fits, as in nbtsort), and the new
//!    page as its right link; the same separator is the new page's lower
//!    bound and downlink. On an internal level the moved pivot becomes the
//!    new page's minus infinity. These are exactly the high keys, right
//!    links and minus-infinity pivots a split would make.
//! 3. The finished page is copied into its buffer and WAL-logged as a full
//!    image (`NEWPAGES`, page LSN = the record's end, so the pool writes the
//!    WAL before the page), then released. Its downlink (its lower bound ->
//!    its block; minus infinity for the first page of a level) is added to
//!    the level above, which is started when the first page of a level is
//!    finished; adding it may finish that page in turn.
//! 4. At the end, the last page of each level (no high key, no right link) is
//!    finished bottom-up; the single page of the top level is the root.
//! 5. Last, the leftmost leaf (the empty root the index was created with,
//!    whose block the build keeps) and the meta page naming the new root are
//!    logged in **one** `NEWPAGES` record. Until then every page written is
//!    unreachable: a crash during the build leaves an empty index (the pages
//!    already written stay unused past the end of the tree).
//!
//! The build holds the empty root leaf and the meta page exclusively for its
//! whole length, so concurrent users of the index wait for it (they would
//! find the root there). The entries' iterator runs with those two locked:
//! it must not use this index.
//!
//! An unlogged index (no WAL) writes the same pages without records.

use bufmgr::{BlockNumber, PAGE_SIZE, PageWrite};
use heap::tuple::Tid;

use crate::error::{BtreeError, Result};
use crate::index::Index;
use crate::insert::{DEDUP_MIN_FREE, LEAF_FILLFACTOR, NONLEAF_FILLFACTOR};
use crate::key::{Key, TID_MIN};
use crate::page::Layout;
use crate::page::{
    self, HAS_HIGH_KEY, Header, ITEM_POINTER_SIZE, LEAF, META_BLOCK, Meta, NO_RIGHT, POOL_HEADER,
    ROOT, TreePage, build_page, encode_item,
};
use crate::record;

/// What a sorted build did.
#[derive(Copy, Clone, PartialEq, Eq, Default, Debug)]
pub struct BuildStats {
    /// Entries added.
    pub entries: u64,
    /// Leaf pages of the built tree.
    pub leaf_pages: u64,
    /// Internal pages of the built tree (the root among them, unless it is a leaf).
    pub internal_pages: u64,
    /// Level of the root (0: the root is a leaf).
    pub root_level: u32,
    /// WAL records written (0 for an unlogged index).
    pub wal_records: u64,
}

/// The page being filled on one level.
struct Level<'p> {
    /// The page's bytes, laid out by `build_page`; copied into `dest` when finished.
    buf: Vec<u8>,
    block: BlockNumber,
    /// The extended buffer the page goes to; `None` for the leftmost leaf,
    /// which goes into the held root page at the very end.
    dest: Option<PageWrite<'p>>,
    /// Data items on the page.
    items: usize,
    /// The page's lower bound (the left sibling's high key); `None` = minus
    /// infinity (the first page of the level).
    low: Option<(Vec<u8>, Tid)>,
}

struct Builder<'p> {
    index: &'p Index,
    /// Level 0 first.
    levels: Vec<Level<'p>>,
    /// The leftmost leaf's finished bytes, kept for the last record.
    first_leaf: Option<Vec<u8>>,
    stats: BuildStats,
    /// The leaf being filled holds posting lists (a deduplicating index
    /// whose full leaf was worth deduplicating; see `make_room`).
    leaf_dedup: bool,
    /// While the leaf being filled holds plain items only: at least the
    /// bytes its items would take after a deduplication pass
    /// (`page::space_for` of the pass's items; [`posting_min`] for each
    /// run of two or more), and how many items of the last key's run it
    /// holds. The pass is not tried where it could not leave the room it
    /// asks for (`make_room`).
    leaf_merged_min: usize,
    leaf_run: usize,
}

/// The fewest bytes, pointer included, the posting lists of `tids` TIDs
/// under a key of `key_len` bytes take (`page::encode_postings`): one
/// list, each TID's two varints one byte each.
fn posting_min(key_len: usize, tids: usize) -> usize {
    key_len + page::POSTING_OVERHEAD + 2 * tids + ITEM_POINTER_SIZE
}

/// An empty page of `level`; a leaf is `FIXED` if `fixed` (an `i64`
/// index in the compact layout).
fn fresh_page(level: u32, layout: Layout, fixed: bool, dedup: bool) -> Vec<u8> {
    let mut buf = vec![0u8; PAGE_SIZE];
    build_page(
        &mut buf,
        Header {
            flags: match (level, fixed) {
                (0, true) => LEAF | page::FIXED,
                (0, false) => LEAF,
                _ => 0,
            } | if level == 0 && dedup { page::DEDUP } else { 0 },
            level,
            right: NO_RIGHT,
            layout,
        },
        &[],
    );
    buf
}

/// Free bytes a level's pages keep when filled in order (nbtsort's `btps_full`).
fn reserve(level: usize) -> usize {
    let fill = if level == 0 {
        LEAF_FILLFACTOR
    } else {
        NONLEAF_FILLFACTOR
    };
    PAGE_SIZE * (100 - fill) / 100
}

impl<'p> Builder<'p> {
    /// Append (key, TID[, child]) to the page being filled on `level`,
    /// finishing the page first if it is full (steps 1 and 2).
    fn add(
        &mut self,
        level: usize,
        key: &[u8],
        tid: Tid,
        child: Option<BlockNumber>,
    ) -> Result<()> {
        let len = page::item_len(self.index.layout, key.len(), child.is_some());
        if page::slot_len(page::flags_of(&self.levels[level].buf), len).is_none() {
            // Not an item for a FIXED leaf (no I64 index has one).
            page::unfix(&mut self.levels[level].buf);
        }
        self.make_room(level, len)?;
        let st = &mut self.levels[level];
        page::append_item(&mut st.buf, key, tid, child, false);
        st.items += 1;
        Ok(())
    }

    /// Append a leaf item given by its bytes (a posting list, or a plain
    /// entry) to the leaf being filled, finishing it first if it is full.
    fn add_leaf_raw(&mut self, item: &[u8]) -> Result<()> {
        if page::is_posting_raw(item) {
            // Posting lists need item pointers.
            page::unfix(&mut self.levels[0].buf);
        }
        self.make_room(0, item.len())?;
        let st = &mut self.levels[0];
        page::insert_item(&mut st.buf, st.items, item);
        st.items += 1;
        Ok(())
    }

    /// Finish the page being filled on `level` if an item of `len` bytes
    /// does not fit on it or it is full (step 1).
    fn make_room(&mut self, level: usize, len: usize) -> Result<()> {
        let full = |st: &Level<'_>| {
            let need =
                page::slot_len(page::flags_of(&st.buf), len).unwrap_or(len + ITEM_POINTER_SIZE);
            let free = page::free_bytes(&st.buf);
            free < need || (free < reserve(level) && st.items >= 2)
        };
        if level == 0
            && self.index.dedup
            && !self.leaf_dedup
            && self.leaf_merged_min + DEDUP_MIN_FREE + reserve(0) <= crate::page::PAGE_CAPACITY
            && full(&self.levels[0])
            && self.dedup_leaf()?
            && !full(&self.levels[0])
        {
            return Ok(());
        }
        let st = &self.levels[level];
        if full(st) {
            if st.items < 2 {
                return Err(self.index.page_id(st.block).corrupt(format!(
                    "sorted build: an item of {len} bytes does not fit a page with {} items (a bug: MAX_KEY_SIZE should prevent this)",
                    st.items
                )));
            }
            self.next_page(level)?;
        }
        Ok(())
    }

    /// Count a plain `item` (key of `key_len` bytes) just added to the
    /// leaf into the bound of what a dedup pass would leave
    /// (`leaf_merged_min`); `repeat`: its key is the entry before's.
    /// Past a page break the entry before is the leaf's first (it moved
    /// there), counted as a run of one.
    fn count_plain(&mut self, item: &[u8], key_len: usize, repeat: bool) {
        let bytes = page::space_for([item]);
        if !repeat {
            self.leaf_merged_min += bytes;
            self.leaf_run = 1;
            return;
        }
        self.leaf_run += 1;
        self.leaf_merged_min = if self.leaf_run == 2 {
            // The run's first item becomes a posting list of two.
            self.leaf_merged_min + posting_min(key_len, 2) - bytes
        } else {
            self.leaf_merged_min + 2
        };
    }

    /// A deduplicating index's leaf is filled with plain items (`FIXED` for
    /// `i64` keys) until it is full; then its runs of equal keys are merged
    /// into posting lists, as the dedup pass of an insert does, and the
    /// page goes on filling with posting lists if that left at least
    /// `DEDUP_MIN_FREE` more than the fillfactor's reserve. Otherwise (few
    /// equal keys, where posting lists and item pointers would take more
    /// room than the fixed items) the page is finished as it is, so an
    /// index of nearly unique keys is built exactly as without
    /// deduplication. Returns whether the page was deduplicated.
    fn dedup_leaf(&mut self) -> Result<bool> {
        let index = self.index;
        let st = &mut self.levels[0];
        let id = index.page_id(st.block);
        let items = TreePage::parse(&st.buf, id)?.all_items()?;
        let merged = crate::insert::dedup_items(&items, index.layout, id)?;
        let bytes = page::space_for(merged.iter().map(Vec::as_slice));
        debug_assert!(
            self.leaf_merged_min <= bytes,
            "the bound of a dedup pass's bytes, {}, is above its {bytes}",
            self.leaf_merged_min
        );
        if merged.len() == items.len()
            || bytes + DEDUP_MIN_FREE + reserve(0) > crate::page::PAGE_CAPACITY
        {
            return Ok(false);
        }
        let flags = page::flags_of(&st.buf) & !page::FIXED;
        let refs: Vec<&[u8]> = merged.iter().map(Vec::as_slice).collect();
        build_page(
            &mut st.buf,
            Header {
                flags,
                level: 0,
                right: NO_RIGHT,
                layout: index.layout,
            },
            &refs,
        );
        st.items = merged.len();
        self.leaf_dedup = true;
        Ok(true)
    }

    /// Step 2: move the last item of `level`'s full page to a new right
    /// sibling, finish the full page and add its downlink above.
    fn next_page(&mut self, level: usize) -> Result<()> {
        let internal = level > 0;
        let index = self.index;
        let right = index.pool.extend(index.relfork(), None)?;
        let right_block = right.block();
        let st = &mut self.levels[level];
        let id = index.page_id(st.block);
        let last_raw = page::pop_last_item(&mut st.buf)
            .ok_or_else(|| id.corrupt("sorted build: no last item to move"))?;
        let last = page::decode_item_on(&last_raw, internal, index.layout, index.dedup, id)?;
        // The full page's high key and the new page's lower bound: on an
        // internal level the moved pivot's separator as it is; on a leaf
        // the shortest separator between the page's new last item and the
        // moved one (`page::separator`; full width on a `FIXED` leaf).
        let (sep_key, sep_tid) = if internal {
            (last.key, last.tid)
        } else {
            let tp = TreePage::parse(&st.buf, id)?;
            let kept = tp.data(
                tp.data_len()
                    .checked_sub(1)
                    .ok_or_else(|| id.corrupt("sorted build: a full leaf with one item"))?,
            )?;
            page::separator(&kept, &last, tp.is_fixed())
        };
        let hk = encode_item(index.layout, sep_key, sep_tid, internal.then_some(0), false);
        page::insert_item(&mut st.buf, 0, &hk);
        let flags = page::flags_of(&st.buf);
        page::set_flags(&mut st.buf, flags | HAS_HIGH_KEY);
        page::set_right(&mut st.buf, right_block);

        let mut buf = fresh_page(
            level as u32,
            index.layout,
            index.fixed_leaves(),
            index.dedup,
        );
        if internal {
            page::append_item(&mut buf, &[], TID_MIN, Some(last.child), true);
        } else {
            // The item's own bytes: a posting list moves whole.
            page::insert_item(&mut buf, 0, &last_raw);
            self.leaf_dedup = index.dedup && page::is_posting_raw(&last_raw);
            self.leaf_merged_min = page::space_for([&last_raw[..]]);
            self.leaf_run = 1;
        }
        let next = Level {
            buf,
            block: right_block,
            dest: Some(right),
            items: 1,
            low: Some((sep_key.to_vec(), sep_tid)),
        };
        let mut done = std::mem::replace(&mut self.levels[level], next);
        self.write_out(&mut done, level)?;
        self.add_downlink(level, done.low, done.block)
    }

    /// Add the downlink (`low` -> `block`) of a finished page of `level`
    /// to the level above, starting that level with minus infinity if the
    /// page is the first of its level.
    fn add_downlink(
        &mut self,
        level: usize,
        low: Option<(Vec<u8>, Tid)>,
        block: BlockNumber,
    ) -> Result<()> {
        match low {
            Some((key, tid)) => self.add(level + 1, &key, tid, Some(block)),
            None => {
                if self.levels.len() != level + 1 {
                    return Err(self
                        .index
                        .page_id(block)
                        .corrupt("sorted build: a second first page on one level"));
                }
                let dest = self.index.pool.extend(self.index.relfork(), None)?;
                let mut buf = fresh_page(level as u32 + 1, self.index.layout, false, false);
                page::append_item(&mut buf, &[], TID_MIN, Some(block), true);
                self.levels.push(Level {
                    buf,
                    block: dest.block(),
                    dest: Some(dest),
                    items: 1,
                    low: None,
                });
                Ok(())
            }
        }
    }

    /// Step 3: copy a finished page into its buffer and log its image; the
    /// leftmost leaf is kept for the last record instead.
    fn write_out(&mut self, st: &mut Level<'p>, level: usize) -> Result<()> {
        TreePage::parse(&st.buf, self.index.page_id(st.block))?;
        if level == 0 {
            self.stats.leaf_pages += 1;
        } else {
            self.stats.internal_pages += 1;
        }
        match st.dest.take() {
            Some(mut page) => {
                page[POOL_HEADER..].copy_from_slice(&st.buf[POOL_HEADER..]);
                record::log(
                    self.index.wal.as_deref(),
                    record::NEWPAGES,
                    &mut [&mut page],
                    &[],
                    true,
                )?;
                if self.index.wal.is_some() {
                    self.stats.wal_records += 1;
                }
            }
            None => self.first_leaf = Some(std::mem::take(&mut st.buf)),
        }
        Ok(())
    }

    /// Step 4: finish the last page of every level, bottom-up; returns the
    /// root (block, level).
    fn finish(&mut self) -> Result<(BlockNumber, u32)> {
        let mut level = 0;
        loop {
            let top = level + 1 == self.levels.len();
            let mut st = std::mem::replace(
                &mut self.levels[level],
                Level {
                    buf: Vec::new(),
                    block: 0,
                    dest: None,
                    items: 0,
                    low: None,
                },
            );
            if top {
                let flags = page::flags_of(&st.buf);
                page::set_flags(&mut st.buf, flags | ROOT);
            }
            self.write_out(&mut st, level)?;
            if top {
                return Ok((st.block, level as u32));
            }
            self.add_downlink(level, st.low, st.block)?;
            level += 1;
        }
    }
}

impl Index {
    /// Build this index, which must be empty (as [`Index::create`] left
    /// it), bottom-up from `entries` in strictly ascending (key, TID) order,
    /// as PostgreSQL's `nbtsort.c` does: leaves filled to
    /// [`LEAF_FILLFACTOR`] = 90%, internal pages to [`NONLEAF_FILLFACTOR`]
    /// = 70%, with the high keys, right links and downlinks a sequence of
    /// inserts would make, so that searches, inserts, vacuum, `verify` and
    /// redo work on the result as on any tree. A WAL-logged index logs every
    /// page as a full image (`NEWPAGES`), the root leaf and meta page last
    /// in one record, so a crash before the end leaves the index empty.
    ///
    /// Errors (the index stays empty): the index is not empty
    /// (`BadOptions`); an entry not above the one before it
    /// (`UnsortedBuild`, naming the index and the entry's position); on a
    /// unique index, two entries with the same key (`UniqueViolation`: every
    /// entry counts as live); a key of the wrong type or too long.
    ///
    /// The index's root leaf and meta page stay locked while `entries` is
    /// iterated: the iterator must not use this index. Concurrent users of
    /// the index wait for the build to end.
    pub fn build_sorted(
        &self,
        entries: impl IntoIterator<Item = (Key, Tid)>,
    ) -> Result<BuildStats> {
        let (root_block, root_level) = self.root(true)?;
        let not_empty = |detail: String| BtreeError::BadOptions {
            index: self.name.clone(),
            detail: format!("build_sorted needs an empty index: {detail}"),
        };
        if root_level != 0 {
            return Err(not_empty(format!("the root is at level {root_level}")));
        }
        let mut root = self.lock_exclusive(root_block)?;
        {
            let tp = TreePage::parse(&root, self.page_id(root_block))?;
            if !tp.is_root() || !tp.is_leaf() || tp.data_len() != 0 {
                return Err(not_empty(format!(
                    "the root leaf (block {root_block}) holds {} entries",
                    tp.data_len()
                )));
            }
        }
        let mut meta = self.lock_exclusive(META_BLOCK)?;
        let mut m = Meta::read(&meta, self.page_id(META_BLOCK))?;
        if m.root != root_block || m.root_level != 0 {
            return Err(not_empty("a new root was made meanwhile".into()));
        }

        let mut b = Builder {
            index: self,
            levels: vec![Level {
                buf: fresh_page(0, self.layout, self.fixed_leaves(), self.dedup),
                block: root_block,
                dest: None,
                items: 0,
                low: None,
            }],
            first_leaf: None,
            stats: BuildStats::default(),
            leaf_dedup: false,
            leaf_merged_min: 0,
            leaf_run: 0,
        };
        let mut prev_key: Vec<u8> = Vec::new();
        let mut prev_tid = TID_MIN;
        // A deduplicating index: the TIDs of the run of `prev_key` not
        // added yet (a run becomes posting lists).
        let mut run: Vec<Tid> = Vec::new();
        let mut postings: Vec<Vec<u8>> = Vec::new();
        // A run goes in as plain entries until the leaf holds posting
        // lists (`Builder::dedup_leaf`), the rest of it as posting lists.
        let mut flush = |b: &mut Builder<'_>, key: &[u8], run: &mut Vec<Tid>| -> Result<()> {
            let mut i = 0;
            while i < run.len() && !b.leaf_dedup {
                let item = encode_item(b.index.layout, key, run[i], None, false);
                b.add_leaf_raw(&item)?;
                b.count_plain(&item, key.len(), i > 0);
                i += 1;
            }
            postings.clear();
            page::encode_postings(key, &run[i..], &mut postings);
            for item in &postings {
                b.add_leaf_raw(item)?;
            }
            run.clear();
            Ok(())
        };
        for (position, (key, tid)) in entries.into_iter().enumerate() {
            self.check_key(&key)?;
            let inline;
            let tuple;
            let kb: &[u8] = match &key {
                Key::I64(v) => {
                    inline = Key::encode_i64(*v);
                    &inline
                }
                Key::Bytes(bytes) => bytes,
                Key::Tuple(_) => {
                    tuple = key.encode();
                    &tuple
                }
            };
            if position > 0 {
                if self.unique && !key.has_null() && kb == prev_key.as_slice() {
                    return Err(BtreeError::UniqueViolation {
                        index: self.name.clone(),
                        key,
                    });
                }
                if (prev_key.as_slice(), prev_tid) >= (kb, tid) {
                    return Err(BtreeError::UnsortedBuild {
                        index: self.name.clone(),
                        position: position as u64,
                        detail: format!(
                            "entry {key} -> {tid} is not above the entry before it, {} -> {prev_tid}",
                            Key::decode(self.key_type, &prev_key)
                                .map_or_else(|| format!("{prev_key:?}"), |k| k.to_string())
                        ),
                    });
                }
            }
            if self.dedup {
                if tid.offset == page::POSTING_MARK {
                    return Err(BtreeError::BadTid {
                        index: self.name.clone(),
                        tid,
                    });
                }
                if !run.is_empty() && kb != prev_key.as_slice() {
                    flush(&mut b, &prev_key, &mut run)?;
                }
                run.push(tid);
            } else {
                b.add(0, kb, tid, None)?;
            }
            b.stats.entries += 1;
            prev_key.clear();
            prev_key.extend_from_slice(kb);
            prev_tid = tid;
        }
        if !run.is_empty() {
            flush(&mut b, &prev_key, &mut run)?;
        }
        if b.stats.entries == 0 {
            return Ok(BuildStats::default());
        }
        let (new_root, new_level) = b.finish()?;
        let first = b.first_leaf.take().ok_or_else(|| {
            self.page_id(root_block)
                .corrupt("sorted build lost its first leaf")
        })?;
        // Step 5: the leftmost leaf and the meta page, in one record.
        root[POOL_HEADER..].copy_from_slice(&first[POOL_HEADER..]);
        m.root = new_root;
        m.root_level = new_level;
        m.write(&mut meta);
        record::log(
            self.wal.as_deref(),
            record::NEWPAGES,
            &mut [&mut root, &mut meta],
            &[],
            true,
        )?;
        if self.wal.is_some() {
            b.stats.wal_records += 1;
        }
        self.set_root_cache(new_root, new_level);
        b.stats.root_level = new_level;
        Ok(b.stats)
    }
}
