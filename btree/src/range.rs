//! Resumable range reads in either direction, on stored keys.
//!
//! [`Index::read_range`] hands out, under each leaf's shared lock, up to a
//! given number of entries of a range of stored keys, in (key, TID) order
//! or its reverse, starting strictly after a position the caller passes
//! back in: the last (key, TID) it was given. A range read in batches is
//! then linear in the entries it returns, however many entries share a key
//! (each batch starts at its position with one descent, never by skipping
//! the entries already returned).
//!
//! # Forward
//!
//! Descend (shared locks, one at a time, moving right past high keys) to
//! the leaf whose range holds the start position, and read leaves left to
//! right by right links, a page under lock at a time, as the scan of the
//! `scan` module does.
//!
//! # Backward
//!
//! Pages have right links only, so a backward read re-descends for each
//! page (O(log n) per page, as the forward read's first descent):
//! to find the entries strictly below a position P, descend choosing at
//! each internal page the last pivot *below* P (the first pivot is minus
//! infinity), move right while the page's high key is below P, and at the
//! leaf take the entries below P from the end. The descent remembers the
//! leaf's lower bound (the pivot it came down by, or the high key of the
//! page it moved right from); once the leaf's entries below P are used up,
//! the next page to read is the one holding the entries below that lower
//! bound, found by the same descent with P = the lower bound. The leftmost
//! leaf has no lower bound: the read ends there.
//!
//! Either way a read sees every entry inserted before it began, each once;
//! entries inserted while it runs may or may not appear.

use std::ops::Bound;

use bufmgr::PageRead;
use heap::tuple::Tid;

use crate::error::Result;
use crate::index::Index;
use crate::key::{TID_MAX, TID_MIN};
use crate::page::{Item, TreePage};

/// The direction of a range read.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub enum Direction {
    /// Ascending (key, TID) order.
    #[default]
    Forward,
    /// Descending (key, TID) order.
    Backward,
}

/// A range of stored keys (both bounds on whole stored keys).
#[derive(Copy, Clone, Debug)]
pub struct KeyBounds<'a> {
    pub lower: Bound<&'a [u8]>,
    pub upper: Bound<&'a [u8]>,
}

impl KeyBounds<'_> {
    fn above_lower(&self, key: &[u8]) -> bool {
        match self.lower {
            Bound::Included(l) => key >= l,
            Bound::Excluded(l) => key > l,
            Bound::Unbounded => true,
        }
    }

    fn below_upper(&self, key: &[u8]) -> bool {
        match self.upper {
            Bound::Included(u) => key <= u,
            Bound::Excluded(u) => key < u,
            Bound::Unbounded => true,
        }
    }
}

/// A position in the tree: stored key and TID, owned.
type Position = (Vec<u8>, Tid);

/// The next TID in order, `None` after the largest.
pub(crate) fn successor(t: Tid) -> Option<Tid> {
    if t.offset < u16::MAX {
        Some(Tid::new(t.block, t.offset + 1))
    } else {
        t.block.checked_add(1).map(|b| Tid::new(b, 0))
    }
}

impl Index {
    /// Call `f` with up to `max` entries (stored key, TID) of `bounds`, in
    /// `dir` order, starting strictly after `after` (the last entry handed
    /// out by the previous call) or at the range's start. `f` runs under a
    /// leaf's shared lock: it must copy what it keeps and not use the
    /// index. Returns `true` if it stopped at `max` (more may follow),
    /// `false` if the range is exhausted. See the module docs.
    pub fn read_range(
        &self,
        bounds: KeyBounds<'_>,
        dir: Direction,
        after: Option<(&[u8], Tid)>,
        max: usize,
        f: impl FnMut(&[u8], Tid),
    ) -> Result<bool> {
        if max == 0 {
            return Ok(true);
        }
        match dir {
            Direction::Forward => self.read_forward(bounds, after, max, f),
            Direction::Backward => self.read_backward(bounds, after, max, f),
        }
    }

    /// A leaf entry read by a range is above the entry before it (`prev`)
    /// and at most the page's high key: the order every range relies on.
    /// A damaged page that breaks it (a flipped byte in a key, on a
    /// directory without checksums) is a corruption error naming the page,
    /// never a range that silently skips or ends early.
    fn check_entry(
        &self,
        block: bufmgr::BlockNumber,
        j: usize,
        prev: Option<&Item<'_>>,
        it: &Item<'_>,
        high: Option<&Item<'_>>,
    ) -> Result<()> {
        if let Some(p) = prev
            && (p.key, p.last) >= (it.key, it.tid)
        {
            return Err(self
                .page_id(block)
                .corrupt(format!("leaf entry {j} is not above the entry before it")));
        }
        if let Some(h) = high
            && it.key > h.key
        {
            return Err(self
                .page_id(block)
                .corrupt(format!("leaf entry {j} is above the page's high key")));
        }
        Ok(())
    }

    fn read_forward(
        &self,
        bounds: KeyBounds<'_>,
        after: Option<(&[u8], Tid)>,
        max: usize,
        mut f: impl FnMut(&[u8], Tid),
    ) -> Result<bool> {
        // The first position to return (included).
        let (key, tid): (&[u8], Tid) = match after {
            Some((k, t)) => (k, successor(t).unwrap_or(TID_MAX)),
            None => match bounds.lower {
                Bound::Included(k) => (k, TID_MIN),
                Bound::Excluded(k) => (k, TID_MAX),
                Bound::Unbounded => (&[], TID_MIN),
            },
        };
        let mut page = self.descend_shared(key, tid, 0)?;
        let mut n = 0;
        // The high key of the page left last (stored key, TID): the next
        // page's must be above it (`Index::read_right_shared`).
        let mut left_high: Vec<u8> = Vec::new();
        loop {
            let block = page.block();
            let tp = TreePage::parse(&page, self.page_id(block))?;
            if !tp.is_leaf() {
                return Err(self
                    .page_id(block)
                    .corrupt("the leaf chain leads to an internal page"));
            }
            let high = tp.high_key()?;
            let mut prev: Option<Item<'_>> = None;
            for j in tp.start_at(key, tid)?..tp.data_len() {
                let it = tp.data(j)?;
                self.check_entry(block, j, prev.as_ref(), &it, high.as_ref())?;
                prev = Some(it);
                if !bounds.above_lower(it.key) {
                    continue;
                }
                if !bounds.below_upper(it.key) {
                    return Ok(false);
                }
                for t in it.tids(self.page_id(block))? {
                    // Only the first item can hold entries before the
                    // start (a posting list holding it).
                    if (it.key, t) < (key, tid) {
                        continue;
                    }
                    f(it.key, t);
                    n += 1;
                    if n == max {
                        return Ok(true);
                    }
                }
            }
            let next = match tp.high_key()? {
                Some(hk) if bounds.below_upper(hk.key) => tp.right_link().map(|r| {
                    left_high.clear();
                    left_high.extend_from_slice(hk.key);
                    (r, hk.tid)
                }),
                _ => None,
            };
            drop(page);
            let Some((next, high_tid)) = next else {
                return Ok(false);
            };
            // Everything on the right sibling (and on the pages a split of
            // it moves entries to) is above what was read here.
            page = self.read_right_shared(next, (&left_high, high_tid))?;
        }
    }

    fn read_backward(
        &self,
        bounds: KeyBounds<'_>,
        after: Option<(&[u8], Tid)>,
        max: usize,
        mut f: impl FnMut(&[u8], Tid),
    ) -> Result<bool> {
        // Entries strictly below this position are returned; `None`: +inf.
        let mut below: Option<Position> = match after {
            Some((k, t)) => Some((k.to_vec(), t)),
            None => match bounds.upper {
                Bound::Included(k) => Some((k.to_vec(), TID_MAX)),
                Bound::Excluded(k) => Some((k.to_vec(), TID_MIN)),
                Bound::Unbounded => None,
            },
        };
        let mut n = 0;
        loop {
            let pos = below.as_ref().map(|(k, t)| (k.as_slice(), *t));
            let (page, low) = self.descend_below(pos)?;
            let block = page.block();
            let tp = TreePage::parse(&page, self.page_id(block))?;
            if !tp.is_leaf() {
                return Err(self
                    .page_id(block)
                    .corrupt("a backward descent ends at an internal page"));
            }
            // Items before `end` lie below the position; the item at it
            // (a posting list compares by its last TID) may hold some
            // entries below it too.
            let end = match pos {
                Some((k, t)) => (tp.lower_bound_at(k, t)? + 1).min(tp.data_len()),
                None => tp.data_len(),
            };
            let high = tp.high_key()?;
            let mut next: Option<Item<'_>> = None;
            for j in (0..end).rev() {
                let it = tp.data(j)?;
                if let Some(n) = &next {
                    self.check_entry(block, j + 1, Some(&it), n, high.as_ref())?;
                }
                self.check_entry(block, j, None, &it, high.as_ref())?;
                next = Some(it);
                if !bounds.above_lower(it.key) {
                    return Ok(false);
                }
                if !bounds.below_upper(it.key) {
                    continue;
                }
                let mut tids = it.tids(self.page_id(block))?;
                let mut step = |t: Tid| {
                    if pos.is_some_and(|(k, pt)| (it.key, t) >= (k, pt)) {
                        return false;
                    }
                    f(it.key, t);
                    n += 1;
                    n == max
                };
                if it.is_posting() {
                    let all: Vec<Tid> = tids.collect();
                    for &t in all.iter().rev() {
                        if step(t) {
                            return Ok(true);
                        }
                    }
                } else if let Some(t) = tids.next()
                    && step(t)
                {
                    return Ok(true);
                }
            }
            drop(page);
            match low {
                None => return Ok(false),
                Some((k, t)) => {
                    // The entries below the page's lower bound have keys at
                    // or below its key: none is in range if that key is not.
                    if !bounds.above_lower(&k) {
                        return Ok(false);
                    }
                    below = Some((k, t));
                }
            }
        }
    }

    /// Descend to the leaf holding the entries just below `pos` (`None`:
    /// +infinity): the last pivot below `pos` at each level, moving right
    /// while the high key is below `pos`. Returns the leaf, locked shared,
    /// and its lower bound (`None` for the leftmost leaf).
    fn descend_below(&self, pos: Option<(&[u8], Tid)>) -> Result<(PageRead<'_>, Option<Position>)> {
        // Is the item (an internal pivot or a high key) below `pos`?
        let below = |key: &[u8], tid: Tid, minus_infinity: bool| match pos {
            None => true,
            Some(_) if minus_infinity => true,
            Some((k, t)) => (key, tid) < (k, t),
        };
        let mut refresh = false;
        'restart: loop {
            let (mut block, mut level) = self.root(refresh)?;
            let mut page = self.read_shared(block)?;
            let mut low: Option<Position> = None;
            let mut first = true;
            loop {
                loop {
                    let tp = TreePage::parse(&page, self.page_id(block))?;
                    if tp.level != level {
                        return Err(self.page_id(block).corrupt(format!(
                            "page at level {} where level {level} was expected",
                            tp.level
                        )));
                    }
                    if first && !tp.is_root() {
                        refresh = true;
                        continue 'restart;
                    }
                    first = false;
                    let Some(hk) = tp.high_key()? else {
                        break;
                    };
                    if !below(hk.key, hk.tid, false) {
                        break;
                    }
                    low = Some((hk.key.to_vec(), hk.tid));
                    block = self.right_of(&tp, block)?;
                    drop(page);
                    page = self.read_shared(block)?;
                }
                if level == 0 {
                    return Ok((page, low));
                }
                let tp = TreePage::parse(&page, self.page_id(block))?;
                // The last pivot below `pos` (the first is minus infinity).
                let (mut lo, mut hi) = (1, tp.data_len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    let it = tp.data(mid)?;
                    if below(it.key, it.tid, it.minus_infinity) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                if tp.data_len() == 0 {
                    return Err(self
                        .page_id(block)
                        .corrupt("an internal page without pivots"));
                }
                let pivot = tp.data(lo - 1)?;
                if !pivot.minus_infinity {
                    low = Some((pivot.key.to_vec(), pivot.tid));
                }
                let child = pivot.child;
                if child == crate::page::META_BLOCK {
                    return Err(self
                        .page_id(block)
                        .corrupt("a downlink points at block 0 (the meta page)"));
                }
                drop(page);
                block = child;
                level -= 1;
                page = self.read_shared(block)?;
            }
        }
    }
}
