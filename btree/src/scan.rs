//! Point lookups and ordered forward range scans.
//!
//! # Point lookups
//!
//! [`Index::lookup_each`] is a dedicated descent for one key that allocates
//! nothing: from the cached root, internal pages read optimistically and
//! the leaf under its shared lock (`Index::descend_shared`; a page the
//! pool declines is locked shared, one at a time), a binary search comparing the
//! search position (key, minus-infinity TID) with the page's items in place,
//! moving right past high keys (Lehman & Yao). At the leaf it copies up to
//! 32 TIDs of equal entries into a stack array, releases the leaf, and
//! hands them to the callback; if more may follow (a full batch, or a high
//! key equal to the search key) it locks the same page or its right sibling
//! again and moves right to the position after the last TID handed out.
//! [`Index::lookup`] collects the same into a `Vec`.
//!
//! # Range scans
//!
//! A scan descends (shared locks, moving right) to the leaf where its lower
//! bound belongs, then reads the leaf chain left to right by right links,
//! **a page at a time**: under the page's shared lock it copies the entries
//! in range and the right link, then releases the page before the caller
//! sees anything (PostgreSQL's `_bt_readpage`). Holding no lock between
//! pages is safe because a page only ever splits to the right: entries that
//! move out of a page we have read were in our copy already, and the saved
//! right link still leads past them to everything we have not read.
//!
//! So a scan sees every entry inserted before it began, each once, in
//! (key, TID) order; entries inserted while it runs may or may not appear.
//! This scan goes forward only; `range` has the resumable reads in either
//! direction the engine's range iterators use.

use std::collections::VecDeque;
use std::ops::Bound;

use bufmgr::BlockNumber;
use heap::tuple::Tid;

use crate::error::{BtreeError, Result};
use crate::index::Index;
use crate::key::{Key, KeyType, TID_MAX, TID_MIN};
use crate::page::TreePage;
use crate::range::successor;

/// An ordered scan over `(key, TID)` entries; see the module docs.
#[derive(Debug)]
pub struct Scan<'a> {
    index: &'a Index,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    buffered: VecDeque<(Key, Tid)>,
    /// The next leaf to read, if the chain goes on within the bounds.
    next: Option<BlockNumber>,
    /// The high key (stored key, TID) of the leaf read last: the next
    /// leaf's must be above it (`Index::read_right_shared`).
    left_high: (Vec<u8>, Tid),
    started: bool,
    failed: bool,
}

impl Index {
    /// Every entry with `lower <= key <= upper` (as the bounds say), in
    /// (key, TID) order.
    pub fn scan(&self, lower: Bound<&Key>, upper: Bound<&Key>) -> Result<Scan<'_>> {
        let enc = |b: Bound<&Key>| -> Result<Bound<Vec<u8>>> {
            Ok(match b {
                Bound::Included(k) => Bound::Included(self.encode_key(k)?),
                Bound::Excluded(k) => Bound::Excluded(self.encode_key(k)?),
                Bound::Unbounded => Bound::Unbounded,
            })
        };
        Ok(Scan {
            index: self,
            lower: enc(lower)?,
            upper: enc(upper)?,
            buffered: VecDeque::new(),
            next: None,
            left_high: (Vec::new(), TID_MIN),
            started: false,
            failed: false,
        })
    }

    /// The heap TIDs of every entry with this key, in TID order (built on
    /// [`Index::lookup_each`]).
    pub fn lookup(&self, key: &Key) -> Result<Vec<Tid>> {
        let mut tids = Vec::new();
        self.lookup_each(key, |t| {
            tids.push(t);
            true
        })?;
        Ok(tids)
    }

    /// Call `f` with the heap TID of every entry with this key, in TID
    /// order, until `f` returns `false` (stop) or the entries run out: the
    /// point-lookup path of the module docs, which allocates nothing. `f`
    /// runs with no page locked, so it may read the heap (or even use this
    /// index). Errors: a key of the wrong type, a key longer than
    /// [`crate::MAX_KEY_SIZE`], or I/O and corruption on the way.
    pub fn lookup_each(&self, key: &Key, f: impl FnMut(Tid) -> bool) -> Result<()> {
        self.check_key(key)?;
        match key {
            Key::I64(v) => self.lookup_encoded_each(&Key::encode_i64(*v), f),
            Key::Bytes(b) => self.lookup_encoded_each(b, f),
            Key::Tuple(_) => self.lookup_encoded_each(&key.encode(), f),
        }
    }

    /// [`Index::lookup_each`] for a key already in its stored form
    /// ([`Key::encode`], or [`Key::encode_i64`] without allocating), for a
    /// caller that encodes once and looks up many times. An `I64` index
    /// refuses anything but 8 bytes (`WrongKeyType`); a longer key than
    /// [`crate::MAX_KEY_SIZE`] is `KeyTooLarge`.
    pub fn lookup_encoded_each(&self, key: &[u8], mut f: impl FnMut(Tid) -> bool) -> Result<()> {
        if self.key_type == KeyType::I64 && key.len() != 8 {
            return Err(BtreeError::WrongKeyType {
                index: self.name.clone(),
                expected: KeyType::I64,
                got: format!("of {} bytes", key.len()),
            });
        }
        self.check_key_size(key.len())?;
        let mut batch = [TID_MIN; LOOKUP_BATCH];
        // Every entry before (key, from) has been handed out.
        let mut from = TID_MIN;
        let mut page = self.descend_shared(key, from, 0)?;
        loop {
            let block = page.block();
            let tp = TreePage::parse(&page, self.page_id(block))?;
            if !tp.is_leaf() {
                return Err(self
                    .page_id(block)
                    .corrupt("the leaf chain leads to an internal page"));
            }
            // The item holding `from` or the first after it (a posting
            // list compares by its last TID).
            let mut j = tp.start_at(key, from)?;
            let mut n = 0;
            let mut key_ends = false;
            if let Some(k) = tp.fixed_key(key) {
                // Plain items only: keys and TIDs read in place.
                while let Some((ik, tid)) = tp.fixed_entry(j) {
                    if ik != k {
                        key_ends = true;
                        break;
                    }
                    if n == LOOKUP_BATCH {
                        break;
                    }
                    if tid.offset == u16::MAX && tp.is_dedup() {
                        // A posting list's mark where none can be: the
                        // decoder names the damage.
                        tp.data(j)?;
                    }
                    batch[n] = tid;
                    n += 1;
                    j += 1;
                }
            } else {
                'items: while j < tp.data_len() {
                    let it = tp.data(j)?;
                    if it.key != key {
                        key_ends = true;
                        break;
                    }
                    if !it.is_posting() {
                        if n == LOOKUP_BATCH {
                            break;
                        }
                        batch[n] = it.tid;
                        n += 1;
                    } else {
                        for t in it.tids(self.page_id(block))? {
                            if t < from {
                                continue;
                            }
                            if n == LOOKUP_BATCH {
                                break 'items;
                            }
                            batch[n] = t;
                            n += 1;
                        }
                    }
                    j += 1;
                }
            }
            // Where to go on after this batch, if anywhere, and for a right
            // link, the TID of the high key left (its key is `key`).
            let next = if key_ends {
                None
            } else if n == LOOKUP_BATCH {
                // The batch is full: go on from the same page.
                Some((block, None))
            } else {
                // The page is exhausted: equal keys go on to the right only if
                // the high key has this key.
                match tp.high_key()? {
                    Some(hk) if hk.key == key => Some((tp.right, Some(hk.tid))),
                    _ => None,
                }
            };
            drop(page);
            for &t in &batch[..n] {
                if !f(t) {
                    return Ok(());
                }
            }
            if n > 0 {
                match successor(batch[n - 1]) {
                    Some(t) => from = t,
                    None => return Ok(()),
                }
            }
            let Some((next, high)) = next else {
                return Ok(());
            };
            let page_next = match high {
                Some(t) => self.read_right_shared(next, (key, t))?,
                None => self.read_shared(next)?,
            };
            // The page may have split while unlocked: move right past it.
            page = self.move_right_shared(page_next, key, from)?;
        }
    }
}

/// TIDs handed to a lookup's callback per leaf visit: collected under the
/// leaf's shared lock into a stack array, handed out after its release.
const LOOKUP_BATCH: usize = 32;

impl Scan<'_> {
    fn below_upper(&self, key: &[u8]) -> bool {
        match &self.upper {
            Bound::Included(u) => key <= u.as_slice(),
            Bound::Excluded(u) => key < u.as_slice(),
            Bound::Unbounded => true,
        }
    }

    fn above_lower(&self, key: &[u8]) -> bool {
        match &self.lower {
            Bound::Included(l) => key >= l.as_slice(),
            Bound::Excluded(l) => key > l.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// Copy the entries in range from one locked leaf; set `next`.
    fn read_page(&mut self, bytes: &[u8], block: BlockNumber) -> Result<()> {
        let index = self.index;
        let tp = TreePage::parse(bytes, index.page_id(block))?;
        if !tp.is_leaf() {
            return Err(index
                .page_id(block)
                .corrupt("the leaf chain leads to an internal page"));
        }
        for j in 0..tp.data_len() {
            let it = tp.data(j)?;
            if !self.above_lower(it.key) {
                continue;
            }
            if !self.below_upper(it.key) {
                self.next = None;
                return Ok(());
            }
            let key = index.decode_key(it.key, block)?;
            for t in it.tids(index.page_id(block))? {
                self.buffered.push_back((key.clone(), t));
            }
        }
        self.next = match tp.high_key()? {
            Some(hk) if self.below_upper(hk.key) => {
                self.left_high.0.clear();
                self.left_high.0.extend_from_slice(hk.key);
                self.left_high.1 = hk.tid;
                tp.right_link()
            }
            _ => None,
        };
        Ok(())
    }

    fn advance(&mut self) -> Result<()> {
        while self.buffered.is_empty() {
            if !self.started {
                self.started = true;
                let (key, tid): (&[u8], Tid) = match &self.lower {
                    Bound::Included(k) => (k, TID_MIN),
                    Bound::Excluded(k) => (k, TID_MAX),
                    Bound::Unbounded => (&[], TID_MIN),
                };
                let p = self.index.descend_shared(key, tid, 0)?;
                self.read_page(&p, p.block())?;
            } else if let Some(block) = self.next {
                let (high, tid) = &self.left_high;
                let p = self.index.read_right_shared(block, (high, *tid))?;
                self.read_page(&p, block)?;
            } else {
                return Ok(());
            }
        }
        Ok(())
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<(Key, Tid)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if let Err(e) = self.advance() {
            self.failed = true;
            return Some(Err(e));
        }
        self.buffered.pop_front().map(Ok)
    }
}
