//! Insertion, splits, downlinks, new roots, and the unique check.
//!
//! # Inserting an entry (PostgreSQL's `_bt_doinsert`)
//!
//! 1. Descend in insert mode to the leaf for (key, TID), exclusively locked.
//!    A unique index descends for (key, -infinity) instead: the first leaf
//!    where the key could be.
//! 2. Unique index: read every entry with the same key, starting there and
//!    reading right siblings (shared, while the first leaf stays locked), and
//!    ask the caller's [`HeapVisibility`] about each one's heap tuple. A live
//!    one is a [`BtreeError::UniqueViolation`], one whose transaction is in
//!    progress a [`BtreeError::UniqueInProgress`]; dead ones are ignored.
//!    Then move right to the (key, TID) position, taking each right page's
//!    lock *before* releasing the left one, so that a concurrent insert of
//!    the same key, which waits for the first leaf, sees our entry.
//! 3. If the page carries `INCOMPLETE_SPLIT`, finish that split first (a
//!    page with a missing downlink must not split again).
//! 4. If the entry fits, add it and log `INSERT_LEAF`. Otherwise split.
//!
//! # Splitting (Lehman & Yao; `_bt_split`, `_bt_insert_parent`)
//!
//! 1. Take the page's data items plus the new one, and choose the split
//!    point that balances the bytes of the two halves (each half with its
//!    high key must fit; `MAX_KEY_SIZE` guarantees one point does). The
//!    rightmost-split rule: when the page is the rightmost of its level (no
//!    high key) and the new item goes at its end (keys arriving in
//!    ascending order), choose the point that leaves the left page
//!    [`LEAF_FILLFACTOR`] = 90% full (a leaf) or [`NONLEAF_FILLFACTOR`] =
//!    70% (an internal page) instead, as PostgreSQL does, so that ascending
//!    keys fill pages instead of leaving them half empty. Any other leaf
//!    split takes, among the [`SPLIT_INTERVAL`] best-balanced points, the
//!    one whose separator is shortest (`choose_split`, nbtsplitloc's
//!    penalty).
//! 2. Extend the relation by one page: the new **right** sibling gets the
//!    upper items, the old high key and the old right link. The left page
//!    keeps the lower items, gets as its high key the shortest separator
//!    between its last item and the first right one on a leaf
//!    ([`page::separator`]: suffix truncation; full width on a `FIXED`
//!    leaf), the new page as its right link, and `INCOMPLETE_SPLIT`. On an
//!    internal page the first right pivot becomes the right page's minus
//!    infinity, and its separator, already truncated, the high key as it is.
//! 3. Log `SPLIT` with both images (and the child whose downlink caused it).
//!    From now on searches reach the right page by moving right.
//! 4. Insert the downlink (left's high key -> right page) into the parent,
//!    found by descending to the parent level from the remembered parent (or
//!    the root); the parent may split in turn. The same record clears the
//!    left page's flag. The left page stays locked until then; the right
//!    page is released first.
//! 5. If the left page was the root, instead make a new root above both
//!    (`NEWROOT`: new root, old root without `ROOT`, meta page), holding
//!    both halves until the meta page names it, so that nobody needs a
//!    parent that does not exist yet.

use heap::tuple::Tid;

use crate::error::{BtreeError, Result};
use crate::index::{Index, Locked, StackEntry};
use crate::key::{Key, SearchKey, TID_MIN};
use crate::page::{
    self, DEDUP, FIXED, HAS_HIGH_KEY, Header, INCOMPLETE_SPLIT, ITEM_POINTER_SIZE, LEAF,
    META_BLOCK, Meta, NO_RIGHT, PAGE_CAPACITY, ROOT, TreePage, build_page, encode_item,
    high_key_from, insert_item,
};
use crate::record;
use bufmgr::PageWrite;

/// What the heap says about the tuple an existing entry points to.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Liveness {
    /// Deleted and committed, or inserted by an aborted transaction: not a conflict.
    Dead,
    /// Visible to everyone from now on: a conflict.
    Live,
    /// Inserted or deleted by a transaction still running.
    InProgress(u64),
}

/// The caller's view of the heap, asked during a unique check. It is called
/// with a leaf page of the index locked: it must not use this index.
pub trait HeapVisibility {
    fn liveness(
        &self,
        tid: Tid,
    ) -> std::result::Result<Liveness, Box<dyn std::error::Error + Send + Sync>>;
}

/// Treat every existing entry as live (tests; non-unique indexes never ask).
#[derive(Copy, Clone, Debug, Default)]
pub struct AssumeLive;

impl HeapVisibility for AssumeLive {
    fn liveness(
        &self,
        _tid: Tid,
    ) -> std::result::Result<Liveness, Box<dyn std::error::Error + Send + Sync>> {
        Ok(Liveness::Live)
    }
}

impl<F> HeapVisibility for F
where
    F: Fn(Tid) -> Liveness,
{
    fn liveness(
        &self,
        tid: Tid,
    ) -> std::result::Result<Liveness, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self(tid))
    }
}

/// Leaf fillfactor, percent: how full a rightmost split (and the sorted
/// build) leaves a leaf. PostgreSQL's `BTREE_DEFAULT_FILLFACTOR`.
pub const LEAF_FILLFACTOR: usize = 90;
/// Internal-page fillfactor, percent: PostgreSQL's
/// `BTREE_NONLEAF_FILLFACTOR`. Internal pages keep more room, because every
/// split below adds a downlink to them.
pub const NONLEAF_FILLFACTOR: usize = 70;

/// Room the sorted build wants left, beyond the fillfactor's reserve, on
/// a leaf it deduplicates: a sixteenth of a page (about 28 `i64` entries).
pub const DEDUP_MIN_FREE: usize = PAGE_CAPACITY / 16;

/// Bytes a dedup pass must free on a leaf to be kept instead of a split: a
/// sixty-fourth of a page (the room of 7 plain `i64` entries), so that a
/// page full of posting lists splits instead of running a pass (and
/// logging its image) at nearly every insert.
pub const DEDUP_MIN_SAVING: usize = PAGE_CAPACITY / 64;

/// How many bytes of `PAGE_CAPACITY` the left page of a rightmost split
/// keeps (items, pointers and its new high key).
fn rightmost_fill(leaf: bool) -> usize {
    PAGE_CAPACITY
        * if leaf {
            LEAF_FILLFACTOR
        } else {
            NONLEAF_FILLFACTOR
        }
        / 100
}

/// How many of the best-balanced split points of a leaf compete on the
/// length of their separator: PostgreSQL's `MAX_LEAF_INTERVAL` (9) in
/// `nbtsplitloc.c`.
pub const SPLIT_INTERVAL: usize = 9;

/// The split point among `fits` (imbalance, high key length, k), every
/// point where both halves fit: the most balanced one, or with
/// `shortest_separator` (a leaf split that is not a rightmost append) the
/// one with the shortest high key among the [`SPLIT_INTERVAL`] most
/// balanced, ties going to the better balance, then to the lower `k`.
/// Suffix truncation makes a separator as short as the keys on either side
/// of the point allow; choosing the point a little off the middle where
/// neighbouring keys differ early (between two runs of equal keys rather
/// than inside one, between `customer-0001…` and `customer-0002…` rather
/// than two keys sharing 30 bytes) makes every pivot above it shorter too.
/// The halves stay nearly balanced: the interval holds the 9 best points
/// of a page of hundreds. `None` when nothing fits.
fn choose_split(mut fits: Vec<(usize, usize, usize)>, shortest_separator: bool) -> Option<usize> {
    fits.sort_unstable_by_key(|&(imbalance, _, k)| (imbalance, k));
    if !shortest_separator {
        return fits.first().map(|&(_, _, k)| k);
    }
    fits.iter()
        .take(SPLIT_INTERVAL)
        .min_by_key(|&&(imbalance, hk_len, k)| (hk_len, imbalance, k))
        .map(|&(_, _, k)| k)
}

fn into_write(l: Locked<'_>) -> PageWrite<'_> {
    match l {
        Locked::Exclusive(w) => w,
        Locked::Shared(_) => unreachable!("insert-mode descents lock the target exclusively"),
    }
}

impl Index {
    /// Insert the entry (`key`, `tid`). On a unique index, `heap` is asked
    /// about existing entries with the same key (see the module docs).
    pub fn insert(&self, key: &Key, tid: Tid, heap: &dyn HeapVisibility) -> Result<()> {
        let kb = self.encode_key(key)?;
        if self.dedup && tid.offset == page::POSTING_MARK {
            return Err(BtreeError::BadTid {
                index: self.name.clone(),
                tid,
            });
        }
        let target = SearchKey::new(kb.clone(), tid);
        let item = encode_item(self.layout, &kb, tid, None, false);
        // A key with a NULL part is distinct from every other (SQL's rule).
        if !self.unique || key.has_null() {
            let (leaf, stack) = self.descend(&target, 0, None)?;
            return self.insert_into_page(into_write(leaf), item, &stack, None);
        }
        let first = SearchKey::new(kb.clone(), TID_MIN);
        let (leaf, stack) = self.descend(&first, 0, None)?;
        let leaf = into_write(leaf);
        self.check_unique(&leaf, key, &kb, tid, heap)?;
        let leaf = self.move_right_coupled(leaf, &target)?;
        self.insert_into_page(leaf, item, &stack, None)
    }

    /// Step 2 of insertion: look at every entry equal to `kb`.
    fn check_unique(
        &self,
        leaf: &PageWrite<'_>,
        key: &Key,
        kb: &[u8],
        tid: Tid,
        heap: &dyn HeapVisibility,
    ) -> Result<()> {
        let first = SearchKey::new(kb.to_vec(), TID_MIN);
        let check_page = |tp: &TreePage<'_>| -> Result<bool> {
            let mut j = tp.lower_bound(&first)?;
            while j < tp.data_len() {
                let it = tp.data(j)?;
                if it.key != kb {
                    return Ok(false);
                }
                if it.tid != tid {
                    let l = heap
                        .liveness(it.tid)
                        .map_err(|source| BtreeError::HeapCheck {
                            index: self.name.clone(),
                            source,
                        })?;
                    match l {
                        Liveness::Dead => {}
                        Liveness::Live => {
                            return Err(BtreeError::UniqueViolation {
                                index: self.name.clone(),
                                key: key.clone(),
                            });
                        }
                        Liveness::InProgress(xid) => {
                            return Err(BtreeError::UniqueInProgress {
                                index: self.name.clone(),
                                key: key.clone(),
                                xid,
                            });
                        }
                    }
                }
                j += 1;
            }
            // Equal keys may continue on the right sibling if the high key
            // has this key.
            Ok(match tp.high_key()? {
                Some(hk) => hk.key == kb,
                None => false,
            })
        };
        let tp = TreePage::parse(leaf, self.page_id(leaf.block()))?;
        let mut more = check_page(&tp)?;
        let mut next = tp.right;
        while more {
            let Locked::Shared(p) = self.lock(next, false)? else {
                unreachable!("asked for a shared lock")
            };
            let tp = TreePage::parse(&p, self.page_id(next))?;
            more = check_page(&tp)?;
            next = tp.right;
        }
        Ok(())
    }

    /// Move right from `page` to the page whose range holds `skey`, locking
    /// each right sibling before releasing the page to its left.
    fn move_right_coupled<'p>(
        &'p self,
        mut page: PageWrite<'p>,
        skey: &SearchKey,
    ) -> Result<PageWrite<'p>> {
        loop {
            let tp = TreePage::parse(&page, self.page_id(page.block()))?;
            if !tp.beyond_high_key(skey)? {
                return Ok(page);
            }
            let right = self.lock_exclusive(tp.right)?;
            page = right;
        }
    }

    /// Add `item` to the exclusively locked `page` (leaf entry or pivot),
    /// splitting as needed. `child`, for a pivot, is the left half of the
    /// split whose downlink this is: its `INCOMPLETE_SPLIT` is cleared in
    /// the same record. `stack` holds the pages above `page`.
    pub(crate) fn insert_into_page<'p>(
        &'p self,
        mut page: PageWrite<'p>,
        item: Vec<u8>,
        stack: &[StackEntry],
        child: Option<&mut PageWrite<'p>>,
    ) -> Result<()> {
        let id = self.page_id(page.block());
        let tp = TreePage::parse(&page, id)?;
        if tp.is_incomplete_split() {
            self.finish_split(&mut page, stack)?;
        }
        let tp = TreePage::parse(&page, id)?;
        if tp.layout() != self.layout {
            return Err(id.corrupt(format!(
                "a page in the {:?} item layout in an index of the {:?} layout",
                tp.layout(),
                self.layout
            )));
        }
        let decoded = page::decode_item(&item, !tp.is_leaf(), self.layout, id)?;
        let pos = tp.lower_bound(&decoded.search_key())?;
        if pos < tp.data_len() {
            let there = tp.data(pos)?;
            if there.is_posting() && child.is_none() && there.key == decoded.key {
                if there.tid <= decoded.tid {
                    // Within the posting list's TIDs (the binary search
                    // compares with its last): the TID goes into it.
                    return self.insert_into_posting(page, pos, decoded.tid, stack);
                }
            } else if !there.minus_infinity && there.key == decoded.key && there.tid == decoded.tid
            {
                // The very entry is present already (an insert repeated by
                // the caller): nothing to do.
                if child.is_none() {
                    return Ok(());
                }
                return Err(id.corrupt("a downlink with this separator exists already"));
            }
        }
        if tp
            .slot_len(item.len())
            .is_some_and(|slot| tp.free_space() >= slot)
        {
            let index = pos + usize::from(tp.has_high_key());
            insert_item(&mut page, index, &item);
            return match child {
                None => record::log(
                    self.wal.as_deref(),
                    record::INSERT_LEAF,
                    &mut [&mut page],
                    &item,
                    false,
                ),
                Some(c) => {
                    let cflags = TreePage::parse(c, self.page_id(c.block()))?.flags;
                    page::set_flags(c, cflags & !INCOMPLETE_SPLIT);
                    record::log(
                        self.wal.as_deref(),
                        record::INSERT_DOWNLINK,
                        &mut [&mut page, c],
                        &item,
                        false,
                    )
                }
            };
        }
        let rightmost_append = !tp.has_high_key() && pos == tp.data_len();
        let mut items = data_items(&tp)?;
        items.insert(pos, item);
        if tp.is_dedup() && child.is_none() {
            return self.dedup_or_split(page, items, rightmost_append, stack);
        }
        self.split(page, items, rightmost_append, stack, child)
    }

    /// Add `tid` to the posting list at data position `pos` of the locked
    /// leaf `page`, whose TIDs it lies between. The list is rewritten with
    /// the TID in its place; one that grows past
    /// [`page::MAX_POSTING_ITEM`] is cut in two (the posting split of
    /// PostgreSQL's `_bt_swap_posting`, which keeps every item within its
    /// limit). If the page has no room for the result, a dedup pass or a
    /// split follows, as for any insert.
    fn insert_into_posting<'p>(
        &'p self,
        mut page: PageWrite<'p>,
        pos: usize,
        tid: heap::tuple::Tid,
        stack: &[StackEntry],
    ) -> Result<()> {
        let id = self.page_id(page.block());
        let tp = TreePage::parse(&page, id)?;
        let it = tp.data(pos)?;
        let mut tids: Vec<heap::tuple::Tid> = it.tids(id)?.collect();
        match tids.binary_search(&tid) {
            Ok(_) => return Ok(()),
            Err(i) => tids.insert(i, tid),
        }
        let mut new = Vec::new();
        page::encode_postings(it.key, &tids, &mut new);
        let mut items = data_items(&tp)?;
        let growth = page::space_for(new.iter().map(Vec::as_slice))
            .saturating_sub(page::space_for([items[pos].as_slice()]));
        if tp.free_space() >= growth && !tp.is_fixed() {
            let payload = record::encode_rewrite(&[], &[(pos as u16, new.clone())]);
            items.splice(pos..=pos, new);
            let frame = leaf_frame(&tp)?;
            rebuild_leaf(&mut page, frame, &items);
            return record::log(
                self.wal.as_deref(),
                record::REWRITE_LEAF,
                &mut [&mut page],
                &payload,
                false,
            );
        }
        items.splice(pos..=pos, new);
        self.dedup_or_split(page, items, false, stack)
    }

    /// The locked leaf `page` must take `items` (its data items with the
    /// change made) and they do not fit: merge runs of equal keys into
    /// posting lists first (PostgreSQL 13's dedup pass, `_bt_dedup_pass`)
    /// and keep the page if the result fits and merging freed at least
    /// [`DEDUP_MIN_SAVING`] bytes, logged as one `DEDUP` image. Otherwise
    /// split: with the runs merged if they fit but freed too little, as
    /// they were if even merged they do not fit.
    fn dedup_or_split<'p>(
        &'p self,
        mut page: PageWrite<'p>,
        items: Vec<Vec<u8>>,
        rightmost_append: bool,
        stack: &[StackEntry],
    ) -> Result<()> {
        let id = self.page_id(page.block());
        let tp = TreePage::parse(&page, id)?;
        let merged = dedup_items(&items, self.layout, id)?;
        let hk = tp.high_key()?.map(|h| h.raw.to_vec());
        let need = page::space_for(hk.iter().chain(merged.iter()).map(Vec::as_slice));
        if merged.len() == items.len() || need > PAGE_CAPACITY {
            // Merging does not make room: split the items as they were
            // (merged ones would only cost a `FIXED` leaf its fixed items).
            return self.split(page, items, rightmost_append, stack, None);
        }
        let before = page::space_for(items.iter().map(Vec::as_slice));
        let merged_space = page::space_for(merged.iter().map(Vec::as_slice));
        if before.saturating_sub(merged_space) < DEDUP_MIN_SAVING {
            // Merging frees too little: a pass at nearly every insert
            // (each rewriting the page and logging its image) would
            // follow. Split, with the runs merged.
            return self.split(page, merged, rightmost_append, stack, None);
        }
        let frame = leaf_frame(&tp)?;
        rebuild_leaf(&mut page, frame, &merged);
        record::log(
            self.wal.as_deref(),
            record::DEDUP,
            &mut [&mut page],
            &[],
            true,
        )
    }

    /// Split `page`, whose data items become `items` (its own with the new
    /// one added; `rightmost_append`: at the end of the rightmost page),
    /// steps 1-5.
    fn split<'p>(
        &'p self,
        mut left: PageWrite<'p>,
        items: Vec<Vec<u8>>,
        rightmost_append: bool,
        stack: &[StackEntry],
        child: Option<&mut PageWrite<'p>>,
    ) -> Result<()> {
        let id = self.page_id(left.block());
        let tp = TreePage::parse(&left, id)?;
        let internal = !tp.is_leaf();
        let layout = tp.layout();
        let postings = tp.is_dedup();
        let old_hk = tp.high_key()?.map(|h| h.raw.to_vec());
        let (flags, level, old_right) = (tp.flags, tp.level, tp.right);
        // Bytes of an item's pointer on the halves: none if they stay
        // FIXED (every item, high keys included, of the fixed length).
        let fixed_len = |i: &Vec<u8>| i.len() == page::FIXED_ITEM_LEN;
        let ptr = if tp.is_fixed()
            && items.iter().all(fixed_len)
            && old_hk.iter().all(fixed_len)
            && !(postings && items.iter().any(|i| page::is_posting_raw(i)))
        {
            0
        } else {
            ITEM_POINTER_SIZE
        };

        // Step 1: the most balanced split point where both halves fit.
        let n = items.len();
        let total: usize = items.iter().map(|i| i.len() + ptr).sum();
        let old_hk_space = old_hk.as_ref().map_or(0, |h| h.len() + ptr);
        // Appending to the rightmost page (ascending keys): leave the left
        // page 90% full (a leaf) or 70% (an internal page) instead of half
        // full, as PostgreSQL's nbtsplitloc does for the rightmost page.
        let rightmost_append = rightmost_append && old_hk.is_none();
        let fill = rightmost_fill(!internal);
        // The left half's high key: on an internal page the first right
        // pivot's separator as it is; on a leaf the shortest separator
        // between the halves (`page::separator`), full width on a leaf
        // that stays `FIXED`.
        let decoded: Vec<page::Item<'_>> = items
            .iter()
            .map(|i| page::decode_item_on(i, internal, layout, postings, id))
            .collect::<Result<_>>()?;
        let high_key_at = |k: usize| {
            if internal {
                high_key_from(layout, &decoded[k], true)
            } else {
                let (key, tid) = page::separator(&decoded[k - 1], &decoded[k], ptr == 0);
                encode_item(layout, key, tid, None, false)
            }
        };
        // Every split point where both halves fit: (imbalance, high key
        // length, k).
        let mut fits: Vec<(usize, usize, usize)> = Vec::new();
        let mut left_items_space = 0;
        for k in 1..n {
            left_items_space += items[k - 1].len() + ptr;
            let first_right = &decoded[k];
            let hk_len = high_key_at(k).len() + ptr;
            let left_space = left_items_space + hk_len;
            let mut right_space = total - left_items_space + old_hk_space;
            if internal {
                // The first right pivot loses its key (minus infinity).
                right_space -= first_right.key.len();
            }
            if left_space <= PAGE_CAPACITY && right_space <= PAGE_CAPACITY {
                let imbalance = if rightmost_append {
                    left_space.abs_diff(fill)
                } else {
                    left_space.abs_diff(right_space)
                };
                fits.push((imbalance, hk_len, k));
            }
        }
        let Some(k) = choose_split(fits, !internal && !rightmost_append) else {
            return Err(id.corrupt(format!(
                "no split point fits {n} items (a bug: MAX_KEY_SIZE should prevent this)"
            )));
        };

        // Step 2: build both halves.
        let first_right = &decoded[k];
        let left_hk = high_key_at(k);
        let mut right_items: Vec<Vec<u8>> = Vec::with_capacity(n - k + 1);
        if let Some(h) = &old_hk {
            right_items.push(h.clone());
        }
        if internal {
            right_items.push(encode_item(
                layout,
                &[],
                TID_MIN,
                Some(first_right.child),
                true,
            ));
            right_items.extend(items[k + 1..].iter().cloned());
        } else {
            right_items.extend(items[k..].iter().cloned());
        }
        let mut left_items: Vec<&[u8]> = vec![&left_hk];
        left_items.extend(items[..k].iter().map(Vec::as_slice));

        let mut right = self.pool.extend(self.relfork(), None)?;
        let right_flags =
            (flags & (LEAF | FIXED | DEDUP)) | if old_hk.is_some() { HAS_HIGH_KEY } else { 0 };
        let refs: Vec<&[u8]> = right_items.iter().map(Vec::as_slice).collect();
        build_page(
            &mut right,
            Header {
                flags: right_flags,
                level,
                right: old_right,
                layout,
            },
            &refs,
        );
        let left_flags = flags | HAS_HIGH_KEY | INCOMPLETE_SPLIT;
        build_page(
            &mut left,
            Header {
                flags: left_flags,
                level,
                right: right.block(),
                layout,
            },
            &left_items,
        );

        // Step 3: log both halves (and the child whose split this finishes).
        match child {
            None => record::log(
                self.wal.as_deref(),
                record::SPLIT,
                &mut [&mut left, &mut right],
                &[],
                true,
            )?,
            Some(c) => {
                let cflags = TreePage::parse(c, self.page_id(c.block()))?.flags;
                page::set_flags(c, cflags & !INCOMPLETE_SPLIT);
                record::log(
                    self.wal.as_deref(),
                    record::SPLIT,
                    &mut [&mut left, &mut right, c],
                    &[],
                    true,
                )?;
            }
        }

        // Steps 4 and 5.
        if flags & ROOT != 0 {
            return self.new_root(&mut left, &mut right);
        }
        drop(right);
        self.finish_split(&mut left, stack)
    }

    /// Insert the downlink for `left`'s right sibling into the parent level
    /// and clear `left`'s `INCOMPLETE_SPLIT` (PostgreSQL's `_bt_finish_split`).
    pub(crate) fn finish_split<'p>(
        &'p self,
        left: &mut PageWrite<'p>,
        stack: &[StackEntry],
    ) -> Result<()> {
        let id = self.page_id(left.block());
        let tp = TreePage::parse(left, id)?;
        let Some(hk) = tp.high_key()? else {
            return Err(id.corrupt("INCOMPLETE_SPLIT on a page without a right sibling"));
        };
        let right_block = tp.right;
        if tp.is_root() {
            // A root split interrupted by a crash before the new root.
            let mut right = self.lock_exclusive(right_block)?;
            return self.new_root(left, &mut right);
        }
        let sep = hk.search_key();
        let downlink = encode_item(self.layout, hk.key, hk.tid, Some(right_block), false);
        let parent_level = tp.level + 1;
        let hint = stack
            .iter()
            .rev()
            .find(|e| e.level == parent_level)
            .copied();
        let above: Vec<StackEntry> = stack
            .iter()
            .filter(|e| e.level > parent_level)
            .copied()
            .collect();
        let (parent, mut pstack) = self.descend(&sep, parent_level, hint)?;
        if hint.is_some() {
            pstack = above;
        }
        self.insert_into_page(into_write(parent), downlink, &pstack, Some(left))
    }

    /// Make a new root above the split root `left` and its sibling `right`.
    fn new_root<'p>(&'p self, left: &mut PageWrite<'p>, right: &mut PageWrite<'p>) -> Result<()> {
        let lid = self.page_id(left.block());
        let ltp = TreePage::parse(left, lid)?;
        let hk = ltp
            .high_key()?
            .ok_or_else(|| lid.corrupt("a split root without a high key"))?;
        let level = ltp.level + 1;
        let layout = ltp.layout();
        let first = encode_item(layout, &[], TID_MIN, Some(left.block()), true);
        let second = encode_item(layout, hk.key, hk.tid, Some(right.block()), false);
        let left_flags = ltp.flags & !(ROOT | INCOMPLETE_SPLIT);
        let mut root = self.pool.extend(self.relfork(), None)?;
        build_page(
            &mut root,
            Header {
                flags: ROOT,
                level,
                right: NO_RIGHT,
                layout,
            },
            &[&first, &second],
        );
        page::set_flags(left, left_flags);
        let mut meta = self.lock_exclusive(META_BLOCK)?;
        let mut m = Meta::read(&meta, self.page_id(META_BLOCK))?;
        m.root = root.block();
        m.root_level = level;
        m.write(&mut meta);
        record::log(
            self.wal.as_deref(),
            record::NEWROOT,
            &mut [&mut root, left, &mut meta],
            &[],
            true,
        )?;
        self.set_root_cache(root.block(), level);
        Ok(())
    }
}

impl Index {
    /// Finish every split that a crash left without its downlink, level by
    /// level from the top; returns how many. Not needed for correctness
    /// (inserts finish what they meet, searches move right), but recovery
    /// can call it so that `verify` finds a tree with no loose ends.
    pub fn finish_incomplete_splits(&self) -> Result<usize> {
        let mut finished = 0;
        'again: loop {
            let (_, root_level) = self.root(true)?;
            for level in (0..=root_level).rev() {
                let mut block = Some(self.leftmost(level)?);
                while let Some(b) = block {
                    let page = self.lock(b, false)?;
                    let tp = TreePage::parse(page.bytes(), self.page_id(b))?;
                    if tp.is_incomplete_split() {
                        drop(page);
                        let mut w = self.lock_exclusive(b)?;
                        if TreePage::parse(&w, self.page_id(b))?.is_incomplete_split() {
                            self.finish_split(&mut w, &[])?;
                            finished += 1;
                        }
                        continue 'again;
                    }
                    block = tp.right_link();
                }
            }
            return Ok(finished);
        }
    }
}

/// The raw data items of a page (high key not included).
fn data_items(tp: &TreePage<'_>) -> Result<Vec<Vec<u8>>> {
    (0..tp.data_len())
        .map(|j| tp.data(j).map(|it| it.raw.to_vec()))
        .collect()
}

/// Rewrite the leaf `page` (viewed by `tp`) with its high key, flags and
/// right link and the data items `items`, which fit.
pub(crate) fn rebuild_leaf(page: &mut [u8], frame: LeafFrame, items: &[Vec<u8>]) {
    let (h, hk) = frame;
    let refs: Vec<&[u8]> = hk.iter().chain(items.iter()).map(Vec::as_slice).collect();
    build_page(page, h, &refs);
}

/// What a leaf keeps when its items are rewritten: header and high key.
pub(crate) type LeafFrame = (Header, Option<Vec<u8>>);

/// The [`LeafFrame`] of a page.
pub(crate) fn leaf_frame(tp: &TreePage<'_>) -> Result<LeafFrame> {
    let hk = tp.high_key()?.map(|h| h.raw.to_vec());
    let h = Header {
        flags: tp.flags,
        level: tp.level,
        right: tp.right,
        layout: tp.layout(),
    };
    Ok((h, hk))
}

/// Merge every run of items with equal keys among `items` (data items of
/// a `DEDUP` leaf, in order) into posting lists of at most
/// [`page::MAX_POSTING_ITEM`] bytes; other items stay as they are.
pub(crate) fn dedup_items(
    items: &[Vec<u8>],
    layout: page::Layout,
    id: page::PageId,
) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(items.len());
    let mut i = 0;
    while i < items.len() {
        let first = page::decode_item_on(&items[i], false, layout, true, id)?;
        let mut j = i + 1;
        while j < items.len()
            && page::decode_item_on(&items[j], false, layout, true, id)?.key == first.key
        {
            j += 1;
        }
        // Posting lists leading the run stay as they are but the last, which
        // takes the entries after it (a pass on a page of long runs then
        // re-encodes little): their TIDs are below everything after them.
        let mut keep = i;
        while keep + 1 < j
            && page::is_posting_raw(&items[keep])
            && page::is_posting_raw(&items[keep + 1])
        {
            keep += 1;
        }
        out.extend(items[i..keep].iter().cloned());
        if j == keep + 1 {
            out.push(items[keep].clone());
        } else {
            let mut tids = Vec::new();
            for raw in &items[keep..j] {
                let it = page::decode_item_on(raw, false, layout, true, id)?;
                tids.extend(it.tids(id)?);
            }
            if tids.windows(2).any(|w| w[0] >= w[1]) {
                return Err(id.corrupt("equal keys whose TIDs are not ascending"));
            }
            page::encode_postings(first.key, &tids, &mut out);
        }
        i = j;
    }
    Ok(out)
}
