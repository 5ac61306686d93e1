//! `verify`: check every invariant of the tree, and optionally its agreement
//! with the heap. Used by tests and by every benchmark's end-of-run check.
//!
//! The checks, each reported as a [`Violation`] naming the block:
//!
//! 1. The meta page decodes; the page it names is flagged `ROOT`, at the
//!    level it records, and no other page is flagged `ROOT`.
//! 2. Each level is a chain: from the leftmost page (the root, or the first
//!    child of the leftmost page one level up) right links lead through
//!    pages of that level only, never revisit a page, and end with none;
//!    only the last page lacks a high key.
//! 3. Within a page the data items are in strictly ascending (key, TID)
//!    order, all below the high key and at or above the page's lower bound
//!    (the high key of its left neighbour). On an internal page the first
//!    pivot, and only it, is minus infinity.
//! 4. Parent/child agreement: the downlinks of level L+1, in chain order,
//!    name exactly the pages of level L in chain order, and each child's
//!    bounds equal its separator range (its separator, and the next
//!    separator or the parent's high key). Since children's items lie within
//!    their own bounds (3), every child's keys lie within the parent's range.
//! 5. No `INCOMPLETE_SPLIT` is left behind (a crash between a split and its
//!    downlink is finished by the next insert that meets it; a clean tree
//!    after recovery plus one insert has none).
//! 6. With the heap's rows: every entry's TID names an existing heap row with
//!    the same key, and every live row has its entry.
//!
//! Verify takes one shared lock at a time: run it on a quiescent index (a
//! concurrent split shows up as a disagreement).

use std::collections::{HashMap, HashSet};
use std::fmt;

use bufmgr::BlockNumber;
use heap::tuple::Tid;

use crate::error::Result;
use crate::index::{Index, read_meta};
use crate::key::{Key, SearchKey};
use crate::page::{META_BLOCK, NO_RIGHT, TreePage};

/// One broken invariant.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Violation {
    /// The page concerned, if one is.
    pub block: Option<BlockNumber>,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.block {
            Some(b) => write!(f, "block {b}: {}", self.what),
            None => write!(f, "{}", self.what),
        }
    }
}

/// One heap row, as `verify` needs to know it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HeapRow {
    /// The indexed column's value; `None` when the row's storage is already
    /// gone (a dead line pointer waiting for vacuum's index pass: entries may
    /// still point to it, as in PostgreSQL between the heap and index passes).
    pub key: Option<Key>,
    pub tid: Tid,
    /// Live rows must have an entry; dead rows not yet vacuumed may.
    pub live: bool,
}

/// What the chain walk learned about one page.
struct PageInfo {
    block: BlockNumber,
    /// `None` = minus infinity.
    low: Option<SearchKey>,
    /// `None` = plus infinity.
    high: Option<SearchKey>,
    /// Internal pages: (child, separator; `None` for minus infinity).
    downlinks: Vec<(BlockNumber, Option<SearchKey>)>,
}

impl Index {
    /// Check the tree (and, given the heap's rows, its agreement with the
    /// heap). An empty list means a clean index. I/O failures are errors;
    /// anything wrong with the index's bytes is a violation.
    pub fn verify(&self, heap_rows: Option<&dyn Fn() -> Vec<HeapRow>>) -> Result<Vec<Violation>> {
        let mut out = Vec::new();
        let mut v = |block: Option<BlockNumber>, what: String| out.push(Violation { block, what });
        let meta = match read_meta(&self.pool, self.rel) {
            Ok(m) => m,
            Err(e) if e.kind() == crate::error::ErrorKind::CorruptData => {
                v(Some(META_BLOCK), e.to_string());
                return Ok(out);
            }
            Err(e) => return Err(e),
        };
        let mut visited: HashSet<BlockNumber> = HashSet::new();
        let mut entries: Vec<(Vec<u8>, Tid)> = Vec::new();
        let mut upper: Vec<PageInfo> = Vec::new();
        let mut level = meta.root_level;
        let mut start = meta.root;
        loop {
            let chain =
                self.walk_level(level, start, meta.root, &mut visited, &mut entries, &mut v)?;
            if level < meta.root_level {
                check_downlinks(&upper, &chain, &mut v);
            }
            if level == 0 || chain.is_empty() {
                break;
            }
            let Some(&(first_child, _)) = chain[0].downlinks.first() else {
                v(
                    Some(chain[0].block),
                    "internal page without downlinks".into(),
                );
                break;
            };
            upper = chain;
            start = first_child;
            level -= 1;
        }

        if let Some(rows) = heap_rows {
            let rows = rows();
            let by_tid: HashMap<Tid, &HeapRow> = rows.iter().map(|r| (r.tid, r)).collect();
            let present: HashSet<(&[u8], Tid)> =
                entries.iter().map(|(k, t)| (k.as_slice(), *t)).collect();
            for (k, t) in &entries {
                match by_tid.get(t) {
                    None => v(
                        None,
                        format!("entry {} -> {t} points to no heap row", self.show(k)),
                    ),
                    Some(HeapRow {
                        key: None, live, ..
                    }) => {
                        if *live {
                            v(
                                None,
                                format!("entry {} -> {t}: a live row without a key", self.show(k)),
                            );
                        }
                    }
                    Some(HeapRow { key: Some(key), .. }) if key.encode() != *k => v(
                        None,
                        format!(
                            "entry {} -> {t}, but the heap row there has key {key}",
                            self.show(k),
                        ),
                    ),
                    Some(_) => {}
                }
            }
            for r in rows.iter().filter(|r| r.live) {
                let Some(key) = &r.key else { continue };
                let k = key.encode();
                if !present.contains(&(k.as_slice(), r.tid)) {
                    v(
                        None,
                        format!("live heap row {} key {key} has no index entry", r.tid),
                    );
                }
            }
        }
        Ok(out)
    }

    fn show(&self, k: &[u8]) -> String {
        Key::decode(self.key_type, k).map_or_else(|| format!("{k:?}"), |k| k.to_string())
    }

    /// Walk one level's chain from `start` (checks 1, 2, 3, 5).
    fn walk_level(
        &self,
        level: u32,
        start: BlockNumber,
        root: BlockNumber,
        visited: &mut HashSet<BlockNumber>,
        entries: &mut Vec<(Vec<u8>, Tid)>,
        v: &mut impl FnMut(Option<BlockNumber>, String),
    ) -> Result<Vec<PageInfo>> {
        let mut chain = Vec::new();
        let mut low: Option<SearchKey> = None;
        let mut block = start;
        loop {
            if block == META_BLOCK || !visited.insert(block) {
                v(
                    Some(block),
                    format!(
                        "level {level}: the right-link chain revisits a page or reaches the meta page"
                    ),
                );
                break;
            }
            let page = self
                .pool
                .read_buffer(self.relfork(), block, None)?
                .lock_shared();
            let tp = match TreePage::parse(&page, self.page_id(block)) {
                Ok(tp) => tp,
                Err(e) => {
                    v(Some(block), e.to_string());
                    break;
                }
            };
            if let Err(e) = self.check_page(&tp, level, root, &low, &mut chain, entries, v) {
                v(Some(block), e.to_string());
                break;
            }
            low = chain.last().and_then(|p: &PageInfo| p.high.clone());
            if tp.right == NO_RIGHT {
                break;
            }
            block = tp.right;
        }
        Ok(chain)
    }

    #[allow(clippy::too_many_arguments)]
    fn check_page(
        &self,
        tp: &TreePage<'_>,
        level: u32,
        root: BlockNumber,
        low: &Option<SearchKey>,
        chain: &mut Vec<PageInfo>,
        entries: &mut Vec<(Vec<u8>, Tid)>,
        v: &mut impl FnMut(Option<BlockNumber>, String),
    ) -> Result<()> {
        let block = tp.id.block;
        let mut bad = |what: String| v(Some(block), what);
        if tp.level != level {
            bad(format!("level {} in the chain of level {level}", tp.level));
        }
        if tp.is_root() != (block == root) {
            bad(format!(
                "ROOT flag {} but the meta page names block {root}",
                tp.is_root()
            ));
        }
        if tp.is_incomplete_split() {
            bad("incomplete split left behind (right sibling has no downlink)".into());
        }
        if tp.layout() != self.layout {
            bad(format!(
                "items in the {:?} layout, but the meta page says the index's are {:?}",
                tp.layout(),
                self.layout
            ));
        }
        if tp.is_leaf() && tp.is_dedup() != self.dedup {
            bad(format!(
                "DEDUP flag {} on a leaf, but the meta page says deduplication is {}",
                tp.is_dedup(),
                if self.dedup { "on" } else { "off" }
            ));
        }
        let high = tp.high_key()?.map(|h| h.search_key());
        let mut prev: Option<SearchKey> = None;
        let mut downlinks = Vec::new();
        for j in 0..tp.data_len() {
            let it = tp.data(j)?;
            if it.minus_infinity != (j == 0 && !tp.is_leaf()) {
                bad(format!(
                    "item {j}: minus infinity must be the first pivot of an internal page and only it"
                ));
            }
            if !tp.is_leaf() {
                if it.minus_infinity && (!it.key.is_empty() || it.tid != crate::key::TID_MIN) {
                    bad(format!(
                        "pivot {j}: the first pivot (minus infinity) stores a key of {} bytes \
                         and TID {:?}, not the empty key and the smallest TID",
                        it.key.len(),
                        it.tid
                    ));
                }
                downlinks.push((it.child, (!it.minus_infinity).then(|| it.search_key())));
                if it.minus_infinity {
                    continue;
                }
            } else if self.key_type == crate::key::KeyType::I64 && it.key.len() != 8 {
                bad(format!(
                    "entry {j}: a {}-byte key in an I64 index",
                    it.key.len()
                ));
            }
            let sk = it.search_key();
            if prev.as_ref().is_some_and(|p| *p >= sk) {
                bad(format!("item {j} is not above the item before it"));
            }
            if high.as_ref().is_some_and(|h| sk >= *h) {
                bad(format!("item {j} is not below the high key"));
            }
            if low.as_ref().is_some_and(|l| sk < *l) {
                bad(format!(
                    "item {j} is below the page's lower bound (the left page's high key)"
                ));
            }
            if tp.is_leaf() && it.is_posting() {
                // Sorted, no TID twice, count and last TID as stored (all
                // checked by `tids`), within its size limit.
                match it.tids(tp.id) {
                    Ok(tids) => entries.extend(tids.map(|t| (it.key.to_vec(), t))),
                    Err(e) => bad(format!("entry {j}: {e}")),
                }
                let last = SearchKey::new(it.key.to_vec(), it.last);
                if high.as_ref().is_some_and(|h| last >= *h) {
                    bad(format!(
                        "posting list {j}: its last TID is not below the high key"
                    ));
                }
                prev = Some(last);
                continue;
            }
            if tp.is_leaf() {
                entries.push((it.key.to_vec(), it.tid));
            }
            prev = Some(sk);
        }
        if !tp.is_leaf() && tp.data_len() == 0 {
            bad("internal page without pivots".into());
        }
        if let (Some(l), Some(h)) = (low, &high)
            && l >= h
        {
            bad("high key not above the lower bound".into());
        }
        chain.push(PageInfo {
            block,
            low: low.clone(),
            high,
            downlinks,
        });
        Ok(())
    }
}

/// Check 4: the downlinks of `parents` (one level, in chain order) against
/// the chain of the level below.
fn check_downlinks(
    parents: &[PageInfo],
    children: &[PageInfo],
    v: &mut impl FnMut(Option<BlockNumber>, String),
) {
    let mut expected: Vec<(
        BlockNumber,
        BlockNumber,
        Option<SearchKey>,
        Option<SearchKey>,
    )> = Vec::new();
    for p in parents {
        for (i, (child, sep)) in p.downlinks.iter().enumerate() {
            let low = if i == 0 { p.low.clone() } else { sep.clone() };
            let high = match p.downlinks.get(i + 1) {
                Some((_, next)) => next.clone(),
                None => p.high.clone(),
            };
            expected.push((p.block, *child, low, high));
        }
    }
    if expected.len() != children.len() {
        v(
            None,
            format!(
                "{} downlinks for {} pages at the level below (a missing downlink or an unreachable page)",
                expected.len(),
                children.len()
            ),
        );
    }
    for ((parent, child, low, high), c) in expected.iter().zip(children) {
        if *child != c.block {
            v(
                Some(*parent),
                format!(
                    "downlink to block {child} where the chain has block {}",
                    c.block
                ),
            );
            return;
        }
        if *low != c.low || *high != c.high {
            v(
                Some(c.block),
                format!("bounds disagree with the parent's separators (parent block {parent})"),
            );
        }
    }
}
