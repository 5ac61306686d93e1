//! Ordered range reads through an index: [`Transaction::range`] (owned
//! rows, an iterator) and [`Transaction::range_each`] (borrowed rows, a
//! callback), over a [`KeyRange`]: a key prefix, bounds on the next column,
//! ascending or descending, a limit.
//!
//! Both read the index in batches of entries (`btree::Index::read_range`):
//! each batch starts strictly after the last (key, row id) the previous one
//! read, with one descent, so a range costs time linear in the entries it
//! reads whatever the number of equal keys. Between batches no index page
//! is locked or pinned; each entry's row is fetched through the snapshot
//! and its key re-checked against the entry (an entry may lead to a version
//! this transaction does not see, or to a reused line pointer holding
//! another key).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use btree::{Direction, KeyBounds};
use heap::{Snapshot, Tid};

use super::{SnapshotReg, Transaction, corrupt_row, forget_rolled_back, map_heap};
use crate::catalog::{IndexHandle, TableHandle};
use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::handle::{IndexRef, TableRef};
use crate::index::map_btree;
use crate::keys::{IntoKey, KeyRange};
use crate::owned_row::OwnedRow;
use crate::row::{RowId, RowRef};
use crate::value::{Value, decode_row};

/// Entries an [`IndexRange`] reads from the B-tree at a time.
const RANGE_BATCH: usize = 128;

use crate::keys::StoredBounds as Bounds;

fn key_bounds(b: &Bounds) -> KeyBounds<'_> {
    KeyBounds {
        lower: b.0.as_ref().map(Vec::as_slice),
        upper: b.1.as_ref().map(Vec::as_slice),
    }
}

/// The table and index are still there (checked under the table's lock).
fn check_not_dropped(t: &TableHandle, ix: &IndexHandle, dropped: bool) -> Result<()> {
    if dropped {
        return Err(EngineError::UnknownTable {
            name: t.info.name.clone(),
        });
    }
    if ix.dropped.load(Ordering::Acquire) {
        return Err(EngineError::UnknownIndex {
            name: ix.info.name.clone(),
            detail: String::new(),
        });
    }
    Ok(())
}

impl Transaction {
    /// The rows this transaction sees in `range` of index `index` (or of
    /// the only index of the table named `index`), in key order (row-id
    /// order among equal keys), or the reverse with [`KeyRange::desc`], at
    /// most [`KeyRange::limit`] of them, as an iterator of owned rows that
    /// reads the index in batches (module docs).
    ///
    /// Errors: a prefix or bound of the wrong type for its column
    /// ([`EngineError::TypeMismatch`]), a prefix longer than the key or
    /// bounds after a full key ([`EngineError::BadKey`]), a NULL bound in an
    /// index that does not index NULLs (`TypeMismatch`).
    pub fn range(&self, index: impl IndexRef, range: KeyRange) -> Result<IndexRange> {
        let resolved = index.resolve_index(&self.db)?.into_owned();
        let bounds = self.with_index(&resolved, |t, ix| ix.encode_range(&t.info, &range))?;
        let done = bounds.is_none() || range.limit == Some(0);
        Ok(IndexRange {
            _reg: SnapshotReg::again(&self.db, self.snapshot().xmin),
            db: self.db.clone(),
            index: resolved,
            snapshot: self.read_snapshot().into_owned(),
            rolled_back: self.rolled_back.clone(),
            bounds: bounds.unwrap_or((Bound::Unbounded, Bound::Unbounded)),
            direction: range.direction,
            remaining: range.limit,
            after: None,
            last: None,
            rows: VecDeque::new(),
            done,
        })
    }

    /// Call `f` on each row [`range`](Self::range) would return, as a
    /// [`RowRef`] on its page (nothing copied; the page is share-locked
    /// while `f` runs, so `f` must not call back into the database).
    /// Returns how many rows `f` was given.
    pub fn range_each(
        &self,
        index: impl IndexRef,
        range: KeyRange,
        mut f: impl FnMut(RowRef<'_>) -> Result<()>,
    ) -> Result<usize> {
        self.with_index(index, |t, ix| {
            let limit = range.limit.unwrap_or(usize::MAX);
            let Some(bounds) = ix.encode_range(&t.info, &range)? else {
                return Ok(0);
            };
            let mut n = 0;
            if limit == 0 {
                return Ok(0);
            }
            let name = &t.info.name;
            let tm = &*self.core().tm;
            let snap = self.read_snapshot();
            let mut after: Option<(Vec<u8>, Tid)> = None;
            let mut entries: Vec<(Vec<u8>, Tid)> = Vec::new();
            // Small limits read small batches first ("the newest order" reads
            // one entry), growing to RANGE_BATCH if rows are not visible.
            let mut batch = limit.min(RANGE_BATCH);
            loop {
                entries.clear();
                let more = ix
                    .btree
                    .read_range(
                        key_bounds(&bounds),
                        range.direction,
                        after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                        batch,
                        |k, t| entries.push((k.to_vec(), t)),
                    )
                    .map_err(map_btree(ix, "range scan"))?;
                for (key, tid) in &entries {
                    let fetched = t
                        .heap
                        .fetch_with(*tid, &snap, tm, |bytes| {
                            let row = RowRef::new(*tid, bytes, &t.info);
                            if !ix.row_ref_has_key(&row, key)? {
                                return Ok(false);
                            }
                            f(row).map(|()| true)
                        })
                        .map_err(map_heap(name, "index fetch"))?;
                    if fetched.transpose()? == Some(true) {
                        n += 1;
                        if n == limit {
                            return Ok(n);
                        }
                    }
                }
                if !more {
                    return Ok(n);
                }
                after = entries.pop();
                batch = (batch * 2).min(RANGE_BATCH);
            }
        })
    }

    /// The rows this transaction sees with `lower <= key <= upper` (as the
    /// bounds say) on the first key column of index `index`, ascending, as
    /// an iterator: [`range`](Self::range) with
    /// `KeyRange::all().bounds(lower, upper)`. A NULL bound is a type error
    /// in an index that does not index NULLs.
    pub fn index_range(
        &self,
        index: impl IndexRef,
        lower: Bound<Value>,
        upper: Bound<Value>,
    ) -> Result<IndexRange> {
        self.range(index, KeyRange::all().bounds(lower, upper))
    }

    /// The row whose primary key is `key` (one value per key column, e.g.
    /// `(w_id, d_id)`), if this transaction sees one. A table without a
    /// primary key is [`EngineError::NoIndex`].
    pub fn get_by_primary_key(
        &self,
        table: impl TableRef,
        key: impl IntoKey,
    ) -> Result<Option<(RowId, OwnedRow)>> {
        let values = key.into_key();
        self.with_table(table, |t| {
            let ix = t
                .indexes
                .read()
                .iter()
                .find(|ix| ix.info.primary)
                .cloned()
                .ok_or_else(|| EngineError::NoIndex {
                    table: t.info.name.clone(),
                    column: "(primary key)".into(),
                    what: "primary key",
                })?;
            let Some(key) = ix.full_key(&t.info, &values)? else {
                return Ok(None);
            };
            let mut found = None;
            self.each_match(t, &ix, &key, |row| {
                found = Some((row.id(), row.to_owned_row()?));
                Ok(false)
            })?;
            Ok(found)
        })
    }
}

/// Rows of an index range read (see [`Transaction::range`]). The index is
/// read in batches of entries, each starting strictly after the last entry
/// read (module docs), taken with the table held against DROP; the rows of
/// a batch are fetched through the snapshot and their keys re-checked
/// before any is handed out. No page stays pinned between calls. Like
/// [`super::RowIter`] it keeps its snapshot registered until dropped, and
/// after its transaction ends it behaves as `RowIter` does: committed, it
/// reads on with its snapshot; rolled back, the entries after the last row
/// handed out are read again with the committed view.
#[derive(Debug)]
pub struct IndexRange {
    index: crate::handle::Index,
    snapshot: Snapshot,
    /// The transaction's flag: it ended without committing.
    rolled_back: Arc<AtomicBool>,
    bounds: Bounds,
    direction: Direction,
    /// Rows still to hand out under the limit.
    remaining: Option<usize>,
    /// The last entry read: the next batch starts after it.
    after: Option<(Vec<u8>, Tid)>,
    /// The entry of the last row handed out.
    last: Option<(Vec<u8>, Tid)>,
    /// Rows fetched, with their index entries' keys.
    rows: VecDeque<(Vec<u8>, RowId, OwnedRow)>,
    done: bool,
    /// Dropped last, as in [`super::RowIter`].
    _reg: SnapshotReg,
    db: Database,
}

impl IndexRange {
    fn read_batch(&mut self) -> Result<()> {
        let t = &*self.index.table;
        let ix = &*self.index.ix;
        crate::loading::check(t)?;
        let dropped = t.dropped.read();
        check_not_dropped(t, ix, *dropped)?;
        let mut entries = Vec::with_capacity(RANGE_BATCH);
        let batch = self
            .remaining
            .map_or(RANGE_BATCH, |r| r.clamp(1, RANGE_BATCH));
        let more = ix
            .btree
            .read_range(
                key_bounds(&self.bounds),
                self.direction,
                self.after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                batch,
                |k, t| entries.push((k.to_vec(), t)),
            )
            .map_err(map_btree(ix, "range scan"))?;
        if !more {
            self.done = true;
        }
        if let Some(last) = entries.last() {
            self.after = Some(last.clone());
        }
        let name = &t.info.name;
        let tm = &*self.db.core().tm;
        let shape = t.info.shape();
        for (key, tid) in entries {
            let got = t
                .heap
                .fetch_with(tid, &self.snapshot, tm, |bytes| {
                    decode_row(&t.info.columns, bytes, corrupt_row(name, tid))
                })
                .map_err(map_heap(name, "index fetch"))?
                .transpose()?;
            if let Some(row) = got
                && ix.row_has_key(&row, &key)
            {
                self.rows
                    .push_back((key, tid, OwnedRow::new(row, shape.clone())));
            }
        }
        Ok(())
    }
}

impl Iterator for IndexRange {
    type Item = Result<(RowId, OwnedRow)>;

    fn next(&mut self) -> Option<Self::Item> {
        if forget_rolled_back(&mut self.snapshot, &self.rolled_back) {
            // Rows fetched as the transaction's own: fetch again from the
            // entry after the last row handed out. Even with no row in
            // hand: the entries read after it (up to `after`) were judged
            // by the transaction's view, which hid the rows it deleted.
            self.rows.clear();
            self.after = self.last.clone();
            self.done = false;
        }
        loop {
            if self.remaining == Some(0) {
                self.rows.clear();
                return None;
            }
            if let Some((key, tid, row)) = self.rows.pop_front() {
                self.last = Some((key, tid));
                if let Some(r) = &mut self.remaining {
                    *r -= 1;
                }
                return Some(Ok((tid, row)));
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.read_batch() {
                self.done = true;
                self.rows.clear();
                return Some(Err(e));
            }
        }
    }
}
