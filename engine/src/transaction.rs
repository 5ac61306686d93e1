//! `Transaction`: rows in and out of tables under one snapshot.
//!
//! A transaction gets an xid at `begin` and takes **one snapshot** then, so
//! every read sees the database as of that moment plus its own changes
//! (snapshot isolation). Writes follow the heap's first-updater-wins rule:
//! changing a row that a concurrent transaction changed is
//! [`EngineError::WriteConflict`]; roll back and retry.
//!
//! 1. `begin`: xid from the transaction manager; snapshot taken and its xmin
//!    registered with the database (the vacuum horizon) in one step.
//! 2. Each operation looks the table up by name, holds the table's drop lock
//!    shared for the duration, encodes or decodes rows against its columns,
//!    and maps heap errors to errors naming the table.
//! 3. `commit` / `rollback` / drop: the snapshot is unregistered and the xid
//!    finished (drop of an unfinished transaction rolls back).
//!
//! A failed operation changes nothing, and the transaction stays usable; a
//! write conflict means the caller's plan no longer holds, so the usual
//! answer is to roll back and retry.
//!
//! Indexes (see `index` for the rules):
//! - `insert`: heap tuple, then an entry in every index. If an index refuses
//!   (unique violation, a unique key held by a transaction in progress), the
//!   new tuple is deleted again by this transaction, so nothing visible
//!   changed and the transaction stays usable; entries already added to
//!   other indexes point to that dead tuple until vacuum removes them.
//! - `update`: unique keys are checked first (nothing changes on a
//!   conflict), then the new version and its entries in every index (no
//!   HOT). If the B-tree's own check, under the leaf lock, still finds a
//!   conflict (another transaction inserted the key in between), the old
//!   version is already marked replaced and cannot be restored: the
//!   transaction is then **aborted** (PostgreSQL aborts on any error):
//!   every later call is [`EngineError::TransactionAborted`] and `commit`
//!   rolls back.
//! - `delete`: heap only; entries stay until vacuum.
//! - reads through an index fetch each entry's tuple through the snapshot
//!   and re-check the key (entries may point to versions this transaction
//!   does not see, or to versions with another key).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use btree::Key;
use parking_lot::Mutex;

use bufmgr::config::BULK_READ_RING_KIB;
use bufmgr::{Ring, RingKind};
use heap::page::PageId;
use heap::visibility::visit_visible_tuples;
use heap::{HeapError, RingChoice, ScanOptions, Snapshot, Tid};
use wal::Lsn;

use crate::catalog::{IndexHandle, TableHandle};
use crate::database::{Core, Database, RowId};
use crate::error::{EngineError, Result};
use crate::index::{self, map_btree, search_key, value_key};
use crate::txn::Xid;
use crate::txn::xact::{CommitMode, Transaction as XactTransaction};
use crate::value::{Row, Value, decode_row, encode_row};

/// Map a heap error of operation `op` on `table` to the engine's.
pub(crate) fn map_heap(table: &str, op: &str) -> impl FnOnce(HeapError) -> EngineError {
    let table = table.to_string();
    let op = op.to_string();
    move |e| match e {
        HeapError::BadTid { tid, reason, .. } => EngineError::BadRowId {
            table,
            row_id: tid,
            reason,
        },
        HeapError::NotVisible { tid, .. } => EngineError::RowNotVisible { table, row_id: tid },
        HeapError::WriteConflict { tid, .. } => EngineError::WriteConflict { table, row_id: tid },
        HeapError::RowTooLarge { len, max, .. } => EngineError::RowTooLarge { table, len, max },
        e => EngineError::Heap {
            what: format!("{op} in table {table:?}"),
            source: e,
        },
    }
}

fn corrupt_row(table: &str, row_id: Tid) -> impl Fn(String) -> EngineError + '_ {
    move |detail| EngineError::CorruptRow {
        table: table.to_string(),
        row_id,
        detail,
    }
}

/// A running transaction on a [`Database`].
#[derive(Debug)]
pub struct Transaction<'db> {
    core: &'db Core,
    /// `None` once committed or rolled back.
    txn: Option<XactTransaction<'db>>,
    snapshot: Snapshot,
    mode: CommitMode,
    registered: bool,
    /// Why the transaction can only roll back (see the module docs).
    aborted: Mutex<Option<String>>,
}

impl<'db> Transaction<'db> {
    pub(crate) fn begin(db: &'db Database, mode: CommitMode) -> Result<Transaction<'db>> {
        let core = db.core();
        let txn = core.tm.begin()?;
        let snapshot = core.register_snapshot(|| txn.snapshot());
        Ok(Transaction {
            core,
            txn: Some(txn),
            snapshot,
            mode,
            registered: true,
            aborted: Mutex::new(None),
        })
    }

    /// This transaction's id.
    pub fn xid(&self) -> Xid {
        self.snapshot.own
    }

    /// The snapshot every read of this transaction uses.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    fn release(&mut self) -> XactTransaction<'db> {
        if self.registered {
            self.registered = false;
            self.core.release_snapshot(self.snapshot.xmin);
        }
        self.txn
            .take()
            .expect("a transaction is finished only once")
    }

    /// Commit; returns the commit record's end LSN. In synchronous mode the
    /// commit is durable when this returns. A transaction that must roll back
    /// (see the module docs) is rolled back and the reason returned.
    pub fn commit(mut self) -> Result<Lsn> {
        let aborted = self.aborted.lock().clone();
        if let Some(reason) = aborted {
            self.abort_now()?;
            return Err(EngineError::TransactionAborted { reason });
        }
        let mode = self.mode;
        self.release().commit_with(mode)
    }

    /// Roll back: nothing this transaction wrote is ever visible.
    pub fn rollback(mut self) -> Result<()> {
        self.abort_now()
    }

    /// Abort (never waits: see `Database::vacuum`).
    fn abort_now(&mut self) -> Result<()> {
        self.release().abort()
    }

    /// Has an earlier failure left this transaction able only to roll back?
    fn check_usable(&self) -> Result<()> {
        match &*self.aborted.lock() {
            Some(reason) => Err(EngineError::TransactionAborted {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The table, held against DROP (and CREATE / DROP INDEX) while `f` runs.
    fn with_table<R>(&self, table: &str, f: impl FnOnce(&TableHandle) -> Result<R>) -> Result<R> {
        self.check_usable()?;
        let t = self.core.table(table)?;
        let dropped = t.dropped.read();
        if *dropped {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        f(&t)
    }

    /// Insert `row`; returns its row id. Every index of the table gets its
    /// entry; a unique index may refuse ([`EngineError::UniqueViolation`],
    /// or [`EngineError::UniqueConflict`] if a transaction in progress holds
    /// the key), and then nothing visible changed.
    pub fn insert(&self, table: &str, row: Row) -> Result<RowId> {
        self.with_table(table, |t| {
            let bytes = encode_row(table, &t.info.columns, &row)?;
            let indexes = t.indexes.read();
            index::check_key_sizes(&indexes, &row)?;
            let tid = t
                .heap
                .insert(self.xid(), &bytes)
                .map_err(map_heap(table, "insert"))?;
            if let Err(e) =
                index::insert_entries(t, &indexes, &row, tid, self.xid(), &*self.core.tm)
            {
                // Take the tuple back: deleted by its own inserter, it is
                // invisible to everyone and dead once we finish.
                if let Err(undo) = t
                    .heap
                    .delete(self.xid(), &self.snapshot, &*self.core.tm, tid)
                {
                    *self.aborted.lock() = Some(format!(
                        "insert into {table:?} failed ({e}) and could not be undone ({undo})"
                    ));
                }
                return Err(e);
            }
            Ok(tid)
        })
    }

    /// The row at `row_id` if this transaction sees it.
    pub fn get(&self, table: &str, row_id: RowId) -> Result<Option<Row>> {
        self.with_table(table, |t| {
            let got = t
                .heap
                .fetch_with(row_id, &self.snapshot, &*self.core.tm, |bytes| {
                    decode_row(&t.info.columns, bytes, corrupt_row(table, row_id))
                })
                .map_err(map_heap(table, "get"))?;
            got.transpose()
        })
    }

    /// Replace the row at `row_id`; returns the new version's row id. The
    /// new version gets an entry in every index (unique keys are checked
    /// before anything changes).
    pub fn update(&self, table: &str, row_id: RowId, row: Row) -> Result<RowId> {
        self.with_table(table, |t| {
            let bytes = encode_row(table, &t.info.columns, &row)?;
            let indexes = t.indexes.read();
            index::check_key_sizes(&indexes, &row)?;
            let tm = &*self.core.tm;
            // A row changed by a concurrent transaction is a write conflict,
            // whatever the unique check would say about its key.
            t.heap
                .check_updatable(row_id, &self.snapshot, tm)
                .map_err(map_heap(table, "update"))?;
            index::precheck_unique(t, &indexes, &row, row_id, self.xid(), tm)?;
            let new = t
                .heap
                .update(self.xid(), &self.snapshot, tm, row_id, &bytes)
                .map_err(map_heap(table, "update"))?;
            if let Err(e) = index::insert_entries(t, &indexes, &row, new, self.xid(), tm) {
                *self.aborted.lock() = Some(format!(
                    "update of row {row_id} in {table:?} could not index the new version: {e}"
                ));
                return Err(e);
            }
            Ok(new)
        })
    }

    /// Delete the row at `row_id`.
    pub fn delete(&self, table: &str, row_id: RowId) -> Result<()> {
        self.with_table(table, |t| {
            t.heap
                .delete(self.xid(), &self.snapshot, &*self.core.tm, row_id)
                .map_err(map_heap(table, "delete"))
        })
    }

    /// The visible row at `tid` if its column `column` still holds `key`.
    fn fetch_matching(
        &self,
        t: &TableHandle,
        tid: Tid,
        column: usize,
        key: &Key,
    ) -> Result<Option<Row>> {
        let name = &t.info.name;
        let got = t
            .heap
            .fetch_with(tid, &self.snapshot, &*self.core.tm, |bytes| {
                decode_row(&t.info.columns, bytes, corrupt_row(name, tid))
            })
            .map_err(map_heap(name, "index fetch"))?
            .transpose()?;
        Ok(got.filter(|row| value_key(&row[column]).as_ref() == Some(key)))
    }

    /// Index `name`, or the only index of table `name`, with its table held
    /// against DROP while `f` runs.
    fn with_index<R>(
        &self,
        name: &str,
        f: impl FnOnce(&TableHandle, &IndexHandle) -> Result<R>,
    ) -> Result<R> {
        self.check_usable()?;
        let ix = match self.core.index(name) {
            Ok(ix) => ix,
            Err(e) => {
                let Ok(t) = self.core.table(name) else {
                    return Err(e);
                };
                let ixs = t.indexes.read();
                match ixs.as_slice() {
                    [only] => only.clone(),
                    many => {
                        let names: Vec<&str> = many.iter().map(|i| i.info.name.as_str()).collect();
                        return Err(EngineError::UnknownIndex {
                            name: name.into(),
                            detail: format!(
                                " (table {name:?} has {} indexes {names:?}: name one)",
                                many.len()
                            ),
                        });
                    }
                }
            }
        };
        self.with_table(&ix.table, |t| {
            if ix.dropped.load(Ordering::Acquire) {
                return Err(EngineError::UnknownIndex {
                    name: ix.info.name.clone(),
                    detail: String::new(),
                });
            }
            f(t, &ix)
        })
    }

    /// The unique index on `table.column`.
    fn unique_index(&self, t: &TableHandle, column: &str) -> Result<Arc<IndexHandle>> {
        let col = t.info.column_index(column)?;
        t.indexes
            .read()
            .iter()
            .find(|ix| ix.info.column == col && ix.info.unique)
            .cloned()
            .ok_or_else(|| EngineError::NoIndex {
                table: t.info.name.clone(),
                column: column.into(),
                what: "unique index",
            })
    }

    /// The row whose `column` is `value`, through the unique index on that
    /// column, if this transaction sees one. NULL finds nothing.
    pub fn get_by_key(
        &self,
        table: &str,
        column: &str,
        value: &Value,
    ) -> Result<Option<(RowId, Row)>> {
        self.with_table(table, |t| {
            let ix = self.unique_index(t, column)?;
            let Some(key) = search_key(&ix, &t.info.columns, value)? else {
                return Ok(None);
            };
            for tid in ix.btree.lookup(&key).map_err(map_btree(&ix, "lookup"))? {
                if let Some(row) = self.fetch_matching(t, tid, ix.info.column, &key)? {
                    return Ok(Some((tid, row)));
                }
            }
            Ok(None)
        })
    }

    /// Every row this transaction sees whose indexed column is `value`, in
    /// row-id order, through index `index` (or the only index of the table
    /// named `index`). NULL finds nothing (NULLs are not indexed).
    pub fn index_lookup(&self, index: &str, value: &Value) -> Result<Vec<(RowId, Row)>> {
        self.with_index(index, |t, ix| {
            let Some(key) = search_key(ix, &t.info.columns, value)? else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for tid in ix.btree.lookup(&key).map_err(map_btree(ix, "lookup"))? {
                if let Some(row) = self.fetch_matching(t, tid, ix.info.column, &key)? {
                    out.push((tid, row));
                }
            }
            Ok(out)
        })
    }

    /// The rows this transaction sees with `lower <= key <= upper` (as the
    /// bounds say) in index `index`, in key order (row-id order among equal
    /// keys), as an iterator that reads the index in batches. A NULL bound
    /// is a type error (NULLs are not indexed).
    pub fn index_range(
        &self,
        index: &str,
        lower: Bound<Value>,
        upper: Bound<Value>,
    ) -> Result<IndexRange<'db>> {
        self.with_index(index, |t, ix| {
            let conv = |b: Bound<Value>| -> Result<Bound<Key>> {
                Ok(match b {
                    Bound::Unbounded => Bound::Unbounded,
                    Bound::Included(v) | Bound::Excluded(v) if v == Value::Null => {
                        let col = &t.info.columns[ix.info.column];
                        return Err(EngineError::TypeMismatch {
                            table: t.info.name.clone(),
                            column: col.name.clone(),
                            expected: col.ty,
                            got: "null (NULLs are not indexed)",
                        });
                    }
                    Bound::Included(v) => {
                        Bound::Included(search_key(ix, &t.info.columns, &v)?.expect("not null"))
                    }
                    Bound::Excluded(v) => {
                        Bound::Excluded(search_key(ix, &t.info.columns, &v)?.expect("not null"))
                    }
                })
            };
            Ok(IndexRange {
                core: self.core,
                table: self.core.table(&ix.table)?,
                index: self.core.index(&ix.info.name)?,
                snapshot: self.snapshot.clone(),
                lower: conv(lower)?,
                upper: conv(upper)?,
                after: None,
                rows: VecDeque::new(),
                done: false,
            })
        })
    }

    /// Replace the row whose `column` is `value` (found through the unique
    /// index on that column); returns the new version's row id, or `None` if
    /// this transaction sees no such row.
    pub fn update_by_key(
        &self,
        table: &str,
        column: &str,
        value: &Value,
        row: Row,
    ) -> Result<Option<RowId>> {
        match self.get_by_key(table, column, value)? {
            Some((id, _)) => self.update(table, id, row).map(Some),
            None => Ok(None),
        }
    }

    /// Delete the row whose `column` is `value` (found through the unique
    /// index on that column); `false` if this transaction sees no such row.
    pub fn delete_by_key(&self, table: &str, column: &str, value: &Value) -> Result<bool> {
        match self.get_by_key(table, column, value)? {
            Some((id, _)) => self.delete(table, id).map(|()| true),
            None => Ok(false),
        }
    }

    /// Every row this transaction sees, in row-id order, a page at a time.
    /// Tables larger than a quarter of the pool are read through the
    /// bulk-read ring (PostgreSQL's `initscan` rule).
    pub fn scan(&self, table: &str) -> Result<RowIter<'db>> {
        self.scan_with(
            table,
            ScanOptions {
                ring: RingChoice::Auto,
                hint_mode: self.core.options.hint_mode,
            },
        )
    }

    /// [`scan`](Self::scan) with the ring and hint mode chosen by the caller.
    pub fn scan_with(&self, table: &str, opts: ScanOptions) -> Result<RowIter<'db>> {
        self.check_usable()?;
        let t = self.core.table(table)?;
        let nblocks = {
            let dropped = t.dropped.read();
            if *dropped {
                return Err(EngineError::UnknownTable { name: table.into() });
            }
            t.heap.nblocks().map_err(map_heap(table, "scan"))?
        };
        let pool = &self.core.pool;
        let ring = match opts.ring {
            RingChoice::Never => None,
            RingChoice::Auto if (nblocks as usize) <= pool.size() / 4 => None,
            RingChoice::Auto => pool.ring(RingKind::BulkRead),
            RingChoice::Always => pool
                .ring(RingKind::BulkRead)
                .or_else(|| pool.ring_forced(RingKind::BulkRead, BULK_READ_RING_KIB)),
        };
        Ok(RowIter {
            core: self.core,
            table: t,
            name: table.to_string(),
            snapshot: self.snapshot.clone(),
            opts,
            ring,
            next_block: 0,
            nblocks,
            rows: VecDeque::new(),
            batch: Vec::new(),
            failed: false,
        })
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.txn.is_some() {
            // Roll back; errors cannot be reported from drop (the clog says
            // aborted either way).
            let _ = self.abort_now();
        }
    }
}

/// Rows of a table scan, a page at a time (see [`Transaction::scan`]).
/// Each page is read under its shared lock, its visible rows copied out,
/// and the lock released before the rows are handed out.
#[derive(Debug)]
pub struct RowIter<'db> {
    core: &'db Core,
    table: Arc<TableHandle>,
    name: String,
    snapshot: Snapshot,
    opts: ScanOptions,
    ring: Option<Ring>,
    next_block: u32,
    nblocks: u32,
    rows: VecDeque<(Tid, Vec<u8>)>,
    batch: Vec<(usize, u16)>,
    failed: bool,
}

impl RowIter<'_> {
    /// Whether the scan reads through a ring.
    pub fn uses_ring(&self) -> bool {
        self.ring.is_some()
    }

    fn read_page(&mut self) -> Result<()> {
        let block = self.next_block;
        self.next_block += 1;
        let dropped = self.table.dropped.read();
        if *dropped {
            return Err(EngineError::UnknownTable {
                name: self.name.clone(),
            });
        }
        let heap = &self.table.heap;
        let page = self
            .core
            .pool
            .read_buffer(heap_relfork(heap), block, self.ring.as_mut())
            .map_err(|e| map_heap(&self.name, "scan")(HeapError::Buffer(e)))?
            .lock_shared();
        let rows = &mut self.rows;
        visit_visible_tuples(
            &page,
            PageId {
                rel: heap.rel(),
                block,
            },
            &self.snapshot,
            &*self.core.tm,
            self.opts.hint_mode,
            !heap.is_logged(),
            &mut self.batch,
            |off, tuple| {
                rows.push_back((
                    Tid::new(block, off),
                    tuple[heap::tuple::TUPLE_HEADER_SIZE..].to_vec(),
                ))
            },
        )
        .map_err(map_heap(&self.name, "scan"))?;
        Ok(())
    }
}

fn heap_relfork(heap: &heap::Heap) -> bufmgr::RelFork {
    bufmgr::RelFork::main(heap.rel())
}

impl Iterator for RowIter<'_> {
    type Item = Result<(RowId, Row)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((tid, bytes)) = self.rows.pop_front() {
                let row = decode_row(
                    &self.table.info.columns,
                    &bytes,
                    corrupt_row(&self.name, tid),
                );
                return Some(row.map(|r| (tid, r)));
            }
            if self.failed || self.next_block >= self.nblocks {
                return None;
            }
            if let Err(e) = self.read_page() {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

/// Entries an [`IndexRange`] reads from the B-tree at a time.
const RANGE_BATCH: usize = 128;

/// Rows of an index range scan in key order (see
/// [`Transaction::index_range`]). The index is read in batches of entries:
/// each batch is a fresh B-tree scan starting after the last entry handed
/// out, taken with the table held against DROP; the rows of a batch are
/// fetched through the snapshot and their keys re-checked before any is
/// handed out. No page stays pinned between calls.
#[derive(Debug)]
pub struct IndexRange<'db> {
    core: &'db Core,
    table: Arc<TableHandle>,
    index: Arc<IndexHandle>,
    snapshot: Snapshot,
    lower: Bound<Key>,
    upper: Bound<Key>,
    /// The last entry read: the next batch starts after it.
    after: Option<(Key, Tid)>,
    rows: VecDeque<Result<(RowId, Row)>>,
    done: bool,
}

impl IndexRange<'_> {
    fn read_batch(&mut self) -> Result<()> {
        let t = &self.table;
        let ix = &self.index;
        let dropped = t.dropped.read();
        if *dropped {
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
        let lower = match &self.after {
            Some((k, _)) => Bound::Included(k),
            None => self.lower.as_ref(),
        };
        let scan = ix
            .btree
            .scan(lower, self.upper.as_ref())
            .map_err(map_btree(ix, "range scan"))?;
        let mut entries = Vec::with_capacity(RANGE_BATCH);
        for e in scan {
            let (key, tid) = e.map_err(map_btree(ix, "range scan"))?;
            if let Some((ak, at)) = &self.after
                && (&key, tid) <= (ak, *at)
            {
                continue;
            }
            entries.push((key, tid));
            if entries.len() == RANGE_BATCH {
                break;
            }
        }
        if entries.len() < RANGE_BATCH {
            self.done = true;
        }
        self.after = entries.last().cloned();
        let name = &t.info.name;
        for (key, tid) in entries {
            let got = t
                .heap
                .fetch_with(tid, &self.snapshot, &*self.core.tm, |bytes| {
                    decode_row(&t.info.columns, bytes, corrupt_row(name, tid))
                })
                .map_err(map_heap(name, "index fetch"))?
                .transpose()?;
            if let Some(row) = got
                && value_key(&row[ix.info.column]).as_ref() == Some(&key)
            {
                self.rows.push_back(Ok((tid, row)));
            }
        }
        Ok(())
    }
}

impl Iterator for IndexRange<'_> {
    type Item = Result<(RowId, Row)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.rows.pop_front() {
                return Some(r);
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.read_batch() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
