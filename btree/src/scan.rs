//! Point lookups and ordered forward range scans.
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
//! Only forward scans exist (pages have no left links).

use std::collections::VecDeque;
use std::ops::Bound;

use bufmgr::BlockNumber;
use heap::tuple::Tid;

use crate::error::Result;
use crate::index::{Index, Locked, Mode};
use crate::key::{Key, SearchKey, TID_MAX, TID_MIN};
use crate::page::TreePage;

/// An ordered scan over `(key, TID)` entries; see the module docs.
#[derive(Debug)]
pub struct Scan<'a> {
    index: &'a Index,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    buffered: VecDeque<(Key, Tid)>,
    /// The next leaf to read, if the chain goes on within the bounds.
    next: Option<BlockNumber>,
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
            started: false,
            failed: false,
        })
    }

    /// The heap TIDs of every entry with this key, in TID order.
    pub fn lookup(&self, key: &Key) -> Result<Vec<Tid>> {
        self.scan(Bound::Included(key), Bound::Included(key))?
            .map(|r| r.map(|(_, t)| t))
            .collect()
    }
}

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
            self.buffered
                .push_back((index.decode_key(it.key, block)?, it.tid));
        }
        self.next = match tp.high_key()? {
            Some(hk) if self.below_upper(hk.key) => tp.right_link(),
            _ => None,
        };
        Ok(())
    }

    fn advance(&mut self) -> Result<()> {
        while self.buffered.is_empty() {
            if !self.started {
                self.started = true;
                let start = match &self.lower {
                    Bound::Included(k) => SearchKey::new(k.clone(), TID_MIN),
                    Bound::Excluded(k) => SearchKey::new(k.clone(), TID_MAX),
                    Bound::Unbounded => SearchKey::minus_infinity(),
                };
                let (page, _) = self.index.descend(&start, 0, Mode::Read, None)?;
                let Locked::Shared(p) = page else {
                    unreachable!("read-mode descents lock shared")
                };
                self.read_page(&p, p.block())?;
            } else if let Some(block) = self.next {
                let p = self
                    .index
                    .pool
                    .read_buffer(self.index.relfork(), block, None)?
                    .lock_shared();
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
