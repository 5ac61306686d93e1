//! `Transaction`: rows in and out of tables under one snapshot.
//!
//! A transaction takes **one snapshot** at `begin`, so every read sees the
//! database as of that moment plus its own changes (snapshot isolation). It
//! takes a **transaction id only at its first write** (PostgreSQL's lazy xid
//! assignment; until then it runs under a virtual id): a transaction that
//! only read writes no commit record, never waits for the WAL, and its
//! `commit` costs what `rollback` does. Writes follow the heap's
//! first-updater-wins rule: changing a row that a concurrent transaction
//! changed is [`EngineError::WriteConflict`]; roll back and retry.
//!
//! 1. `begin`: snapshot taken and its xmin registered with the database (the
//!    vacuum horizon) in one step. [`Database::read`] begins a read-only
//!    transaction: every write is [`EngineError::ReadOnlyTransaction`].
//! 2. The first write takes an xid from the transaction manager; from then
//!    on the snapshot counts that xid as its own (an xid assigned after the
//!    snapshot is at or past its `xmax`, so no other transaction's visibility
//!    changes).
//!
//!    **Commands**: every insert, update and delete takes the next command
//!    id of the transaction (a counter from 0) and stamps it into the tuples
//!    it writes (cmin / cmax); every read takes the counter's value when it
//!    begins, and sees its transaction's own writes from the commands
//!    before that only (`heap::txn::Snapshot::cid`). An iterator therefore
//!    never meets the versions that writes made while it ran, and
//!    `for row in scan { update(row) }` updates each row once. Before the
//!    first write nothing is copied (the snapshot has no own xid, so
//!    command ids do not matter).
//! 3. Each operation resolves the table (a [`Table`] handle, or a name looked
//!    up per call), holds the table's drop lock shared for the duration,
//!    encodes or decodes rows against its columns, and maps heap errors to
//!    errors naming the table.
//! 4. `commit` / `rollback` / drop: the snapshot is unregistered; an xid, if
//!    one was taken, is committed (a commit record, flushed in synchronous
//!    mode) or aborted (drop of an unfinished transaction rolls back).
//!
//! A `Transaction` owns a handle of its database, so it can be moved to
//! another thread; iterators it returns own one too and keep their
//! snapshot registered until they are dropped, so rows they will still
//! return are never vacuumed away under them, even after the transaction
//! ends. An iterator whose transaction committed reads on with its
//! snapshot (the transaction's own changes of the commands before the
//! iterator began included, hint bits or not). One whose transaction
//! rolled back (or failed to commit) returns, from its next row on, exactly
//! the committed state as of its snapshot: the snapshot stops counting the
//! xid as its own (the flag is set before the xid is marked aborted), so the
//! transaction's inserts are invisible and its deletes undone by the
//! snapshot's `xmax` alone, and the rows it had fetched as its own are
//! fetched again. An iterator that fails releases its pins at once.
//!
//! A failed operation changes nothing, and the transaction stays usable; a
//! write conflict means the caller's plan no longer holds, so the usual
//! answer is to roll back and retry.
//!
//! Reads come in two shapes. Owned rows (`get`, `index_lookup`, `scan`)
//! copy and decode each row into a `Vec<Value>`. Borrowed rows
//! (`get_with`, `lookup_each`, `scan_each`) hand a callback a [`RowRef`]
//! on the share-locked page: nothing is copied, each accessor decodes one
//! column, and a scan checks visibility and sets hints a page at a time.
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

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use btree::Key;
use parking_lot::Mutex;

use bufmgr::config::BULK_READ_RING_KIB;
use bufmgr::{BlockNumber, BufferPool, ReadStream, RelFork, Ring, RingKind, StreamConfig};
use heap::page::PageId;
use heap::tuple::TUPLE_HEADER_SIZE;
use heap::visibility::visit_visible_tuples;
use heap::{HeapError, RingChoice, ScanOptions, Snapshot, Tid};
use wal::Lsn;

use crate::catalog::{IndexHandle, TableHandle};
use crate::database::{Core, Database};
use crate::error::{EngineError, Result};
use crate::handle::{IndexRef, Table, TableRef};
use crate::index::{self, map_btree, search_key, value_key};
use crate::keys::KeyRange;
use crate::owned_row::{Batch, OwnedRow, PageCopy};
use crate::row::{RowId, RowRef};
use crate::stats::Pending;
use crate::table_def::Shape;
use crate::table_def::{Col, RowColumn, col_of};
use crate::txn::Xid;
use crate::txn::xact::CommitMode;
use crate::value::{ColumnType, Row, Value, encode_row};

mod range;
pub use range::IndexRange;

/// Map a heap error of operation `op` on `table` to the engine's.
///
/// The names are copied only when an error is mapped: the closure is made
/// on every page of a scan and every lookup, and copying them there was
/// two allocations a page.
pub(crate) fn map_heap<'a>(
    table: &'a str,
    op: &'a str,
) -> impl FnOnce(HeapError) -> EngineError + 'a {
    move |e| {
        let table = table.to_string();
        match e {
            HeapError::BadTid { tid, reason, .. } => EngineError::BadRowId {
                table,
                row_id: tid,
                reason,
            },
            HeapError::NotVisible { tid, .. } => EngineError::RowNotVisible { table, row_id: tid },
            HeapError::WriteConflict { tid, .. } => {
                EngineError::WriteConflict { table, row_id: tid }
            }
            HeapError::RowTooLarge { len, max, .. } => EngineError::RowTooLarge { table, len, max },
            e => EngineError::Heap {
                what: format!("{op} in table {table:?}"),
                source: e,
            },
        }
    }
}

fn corrupt_row(table: &str, row_id: Tid) -> impl Fn(String) -> EngineError + '_ {
    move |detail| EngineError::CorruptRow {
        table: table.to_string(),
        row_id,
        detail,
    }
}

/// The xid of a transaction that has written (rule 2 of the module docs).
#[derive(Debug)]
struct Writer {
    xid: Xid,
    /// The running-set shard the xid was begun in.
    shard: usize,
    /// The transaction's snapshot with `own` = `xid`.
    snapshot: Snapshot,
}

/// One registration of a snapshot's xmin in the database's registry (the
/// vacuum horizon), released when dropped.
#[derive(Debug)]
struct SnapshotReg {
    db: Database,
    xmin: Xid,
    shard: usize,
}

impl SnapshotReg {
    /// Register `xmin` once more. The caller holds a registration of it
    /// already, so the horizon has not passed it.
    fn again(db: &Database, xmin: Xid) -> SnapshotReg {
        let shard = db.core().register_snapshot_again(xmin);
        SnapshotReg {
            db: db.clone(),
            xmin,
            shard,
        }
    }
}

impl Drop for SnapshotReg {
    fn drop(&mut self) {
        self.db.core().release_snapshot(self.xmin, self.shard);
    }
}

/// A transaction on a [`Database`] (module docs). `Send`: it can be moved
/// into a spawned thread.
#[derive(Debug)]
pub struct Transaction {
    db: Database,
    /// Taken at begin, with no own xid.
    snapshot: Snapshot,
    /// The registry shard its xmin is registered in.
    reg_shard: usize,
    /// Set at the first write.
    writer: OnceLock<Writer>,
    /// Serializes the xid assignment of a transaction shared by threads.
    assign: Mutex<()>,
    mode: CommitMode,
    read_only: bool,
    /// Committed, rolled back, or being dropped: the snapshot is released.
    finished: bool,
    /// Why the transaction can only roll back (see the module docs).
    aborted: Mutex<Option<String>>,
    must_abort: AtomicBool,
    /// The next command id (module docs, rule 2, "Commands"): each write takes one;
    /// a read sees the writes of the commands before the value it reads.
    commands: AtomicU32,
    /// Set when the transaction ends without committing (before its xid is
    /// marked aborted): its iterators then read the committed state as of
    /// their snapshot (see [`RowIter`]).
    rolled_back: Arc<AtomicBool>,
    /// Rows inserted, updated and deleted per table, added to the tables'
    /// autovacuum counters when the transaction ends (`crate::autovacuum`
    /// rule 1).
    pending: Mutex<Vec<(Arc<TableHandle>, Pending)>>,
}

impl Transaction {
    pub(crate) fn begin(db: Database, mode: CommitMode, read_only: bool) -> Result<Transaction> {
        let (snapshot, reg_shard) = {
            let core = db.core();
            core.register_snapshot(|| core.tm.snapshot())
        };
        Ok(Transaction {
            db,
            snapshot,
            reg_shard,
            writer: OnceLock::new(),
            assign: Mutex::new(()),
            mode,
            read_only,
            finished: false,
            aborted: Mutex::new(None),
            must_abort: AtomicBool::new(false),
            commands: AtomicU32::new(0),
            rolled_back: Arc::new(AtomicBool::new(false)),
            pending: Mutex::new(Vec::new()),
        })
    }

    #[inline]
    fn core(&self) -> &Core {
        self.db.core()
    }

    /// The database this transaction runs on.
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// This transaction's id, once it has written (`None` before: a
    /// transaction that only reads never takes one).
    pub fn xid(&self) -> Option<Xid> {
        self.writer.get().map(|w| w.xid)
    }

    /// Whether this transaction was begun read-only ([`Database::read`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The snapshot of this transaction (its own xid once it has written).
    /// Each read uses it with the command id of the moment the read begins
    /// (module docs, rule 2, "Commands"); the one returned here carries none.
    #[inline]
    pub fn snapshot(&self) -> &Snapshot {
        match self.writer.get() {
            Some(w) => &w.snapshot,
            None => &self.snapshot,
        }
    }

    /// The snapshot a read beginning now uses: before the first write the
    /// transaction's own (no own xid, so command ids do not matter and
    /// nothing is copied); after it, a copy carrying the next command id,
    /// so the read sees the writes of every command begun before it and
    /// none after.
    #[inline]
    fn read_snapshot(&self) -> Cow<'_, Snapshot> {
        match self.writer.get() {
            None => Cow::Borrowed(&self.snapshot),
            Some(w) => {
                let mut snap = w.snapshot.clone();
                snap.cid = Some(self.commands.load(Ordering::Acquire));
                Cow::Owned(snap)
            }
        }
    }

    /// Begin a write command of `w`: the snapshot it decides visibility
    /// with and stamps its tuples with (a new command id, which later reads
    /// see and reads begun earlier do not).
    fn command(&self, w: &Writer, op: &'static str, table: &str) -> Result<Snapshot> {
        let cid = self
            .commands
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_add(1))
            .map_err(|_| EngineError::TooManyCommands {
                op,
                table: table.to_string(),
                limit: u64::from(u32::MAX),
            })?;
        let mut snap = w.snapshot.clone();
        snap.cid = Some(cid);
        Ok(snap)
    }

    /// The xid to write under, taken now if this is the first write.
    fn writer(&self, op: &'static str, table: &str) -> Result<&Writer> {
        if let Some(w) = self.writer.get() {
            return Ok(w);
        }
        if self.read_only {
            return Err(EngineError::ReadOnlyTransaction {
                op,
                table: table.to_string(),
            });
        }
        let _one = self.assign.lock();
        if let Some(w) = self.writer.get() {
            return Ok(w);
        }
        let (xid, shard) = self.core().tm.begin_xid()?;
        let mut snapshot = self.snapshot.clone();
        snapshot.own = xid;
        let _ = self.writer.set(Writer {
            xid,
            shard,
            snapshot,
        });
        Ok(self.writer.get().expect("set just now"))
    }

    /// Release the snapshot and hand back the xid, if one was taken.
    fn finish(&mut self) -> Option<Writer> {
        if !self.finished {
            self.finished = true;
            self.core()
                .release_snapshot(self.snapshot.xmin, self.reg_shard);
        }
        self.writer.take()
    }

    /// Commit; returns the commit record's end LSN. In synchronous mode the
    /// commit is durable when this returns. A transaction that wrote nothing
    /// has no record: it returns `Lsn::ZERO` at once. A transaction that
    /// must roll back (see the module docs) is rolled back and the reason
    /// returned.
    pub fn commit(mut self) -> Result<Lsn> {
        if self.must_abort.load(Ordering::Acquire) {
            let reason = self.aborted.lock().clone().unwrap_or_default();
            self.abort_now()?;
            return Err(EngineError::TransactionAborted { reason });
        }
        let mode = self.mode;
        match self.finish() {
            None => Ok(Lsn::ZERO),
            Some(w) => {
                let lsn = self
                    .core()
                    .tm
                    .commit_xid(w.xid, w.shard, mode)
                    .inspect_err(|_| self.rolled_back.store(true, Ordering::Release))?;
                self.count_changes(true);
                Ok(lsn)
            }
        }
    }

    /// Count what this transaction did to each table's autovacuum counters
    /// (after its commit or abort), waking the worker where a table crossed
    /// its threshold.
    fn count_changes(&self, committed: bool) {
        let pending = std::mem::take(&mut *self.pending.lock());
        let av = &self.core().autovac;
        for (t, p) in pending {
            t.counters.add(&p, committed);
            av.table_changed(&t.counters);
        }
    }

    /// Note one row change in `t` for [`count_changes`](Self::count_changes).
    fn note(&self, t: &Arc<TableHandle>, f: impl FnOnce(&mut Pending)) {
        let mut pending = self.pending.lock();
        match pending.iter_mut().find(|(h, _)| Arc::ptr_eq(h, t)) {
            Some((_, p)) => f(p),
            None => {
                let mut p = Pending::default();
                f(&mut p);
                pending.push((t.clone(), p));
            }
        }
    }

    /// Roll back: nothing this transaction wrote is ever visible.
    pub fn rollback(mut self) -> Result<()> {
        self.abort_now()
    }

    /// Abort (never waits: see `Database::vacuum`).
    fn abort_now(&mut self) -> Result<()> {
        match self.finish() {
            None => Ok(()),
            Some(w) => {
                // Iterators stop using the xid as their own first, so none
                // reads the aborted changes as its own meanwhile.
                self.rolled_back.store(true, Ordering::Release);
                self.core().tm.abort_xid(w.xid, w.shard)?;
                self.count_changes(false);
                Ok(())
            }
        }
    }

    fn set_must_abort(&self, reason: String) {
        *self.aborted.lock() = Some(reason);
        self.must_abort.store(true, Ordering::Release);
    }

    /// Has an earlier failure left this transaction able only to roll back?
    #[inline]
    fn check_usable(&self) -> Result<()> {
        if !self.must_abort.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(EngineError::TransactionAborted {
            reason: self.aborted.lock().clone().unwrap_or_default(),
        })
    }

    /// The table, held against DROP (and CREATE / DROP INDEX) while `f` runs.
    fn with_table<R>(
        &self,
        table: impl TableRef,
        f: impl FnOnce(&Arc<TableHandle>) -> Result<R>,
    ) -> Result<R> {
        self.check_usable()?;
        let t = table.resolve_table(&self.db)?;
        let h = &t.h;
        crate::loading::check(h)?;
        let dropped = h.dropped.read();
        if *dropped {
            return Err(EngineError::UnknownTable {
                name: h.info.name.clone(),
            });
        }
        f(h)
    }

    /// Index `index` (a handle, its name, or the name of a table with one
    /// index), with its table held against DROP while `f` runs.
    fn with_index<R>(
        &self,
        index: impl IndexRef,
        f: impl FnOnce(&TableHandle, &IndexHandle) -> Result<R>,
    ) -> Result<R> {
        self.check_usable()?;
        let ix = index.resolve_index(&self.db)?;
        let t = &*ix.table;
        crate::loading::check(t)?;
        let dropped = t.dropped.read();
        if *dropped {
            return Err(EngineError::UnknownTable {
                name: t.info.name.clone(),
            });
        }
        if ix.ix.dropped.load(Ordering::Acquire) {
            return Err(EngineError::UnknownIndex {
                name: ix.ix.info.name.clone(),
                detail: String::new(),
            });
        }
        f(t, &ix.ix)
    }

    // ---- writes ----

    /// Insert `row`; returns its row id. Every index of the table gets its
    /// entry; a unique index may refuse ([`EngineError::UniqueViolation`],
    /// or [`EngineError::UniqueConflict`] if a transaction in progress holds
    /// the key), and then nothing visible changed.
    pub fn insert(&self, table: impl TableRef, row: impl Into<Row>) -> Result<RowId> {
        let row: Row = row.into();
        self.with_table(table, |t| {
            let name = &t.info.name;
            let bytes = encode_row(name, &t.info.columns, &row)?;
            let indexes = t.indexes.read();
            index::check_key_sizes(&indexes, &row)?;
            let w = self.writer("insert", name)?;
            let snap = self.command(w, "insert", name)?;
            let tid = t
                .heap
                .insert_command(w.xid, snap.write_cid(), &bytes)
                .map_err(map_heap(name, "insert"))?;
            if let Err(e) = index::insert_entries(t, &indexes, &row, tid, w.xid, &*self.core().tm) {
                // Take the tuple back (a command of its own, after the
                // insert): deleted by its own inserter, it is invisible to
                // everyone and dead once we finish.
                let undone = self.command(w, "insert", name).and_then(|undo| {
                    t.heap
                        .delete(w.xid, &undo, &*self.core().tm, tid)
                        .map_err(map_heap(name, "insert"))
                });
                match undone {
                    Ok(()) => self.note(t, |p| {
                        p.inserted += 1;
                        p.deleted += 1;
                    }),
                    Err(undo) => {
                        self.note(t, |p| p.inserted += 1);
                        self.set_must_abort(format!(
                            "insert into {name:?} failed ({e}) and could not be undone ({undo})"
                        ))
                    }
                }
                return Err(e);
            }
            self.note(t, |p| p.inserted += 1);
            Ok(tid)
        })
    }

    /// Replace the row at `row_id`; returns the new version's row id. The
    /// new version gets an entry in every index (unique keys are checked
    /// before anything changes).
    pub fn update(
        &self,
        table: impl TableRef,
        row_id: RowId,
        row: impl Into<Row>,
    ) -> Result<RowId> {
        let row: Row = row.into();
        self.with_table(table, |t| {
            let name = &t.info.name;
            let bytes = encode_row(name, &t.info.columns, &row)?;
            let indexes = t.indexes.read();
            index::check_key_sizes(&indexes, &row)?;
            let w = self.writer("update", name)?;
            let snap = self.command(w, "update", name)?;
            let tm = &*self.core().tm;
            // A row changed by a concurrent transaction is a write conflict,
            // whatever the unique check would say about its key.
            t.heap
                .check_updatable(row_id, &snap, tm)
                .map_err(map_heap(name, "update"))?;
            if let Err(e) = index::precheck_unique(t, &indexes, &row, row_id, w.xid, tm) {
                // The holder of the key may be a newer version of this very
                // row: another transaction updated it (and maybe committed)
                // after the check above, and its new version keeps the key.
                // That is a write conflict, not a duplicate (see
                // tests/concurrent_update_is_a_conflict_not_a_duplicate.rs). Whoever made that version set the old one's
                // xmax first, so checking the row again now sees it.
                if matches!(
                    e,
                    EngineError::UniqueViolation { .. } | EngineError::UniqueConflict { .. }
                ) {
                    t.heap
                        .check_updatable(row_id, &snap, tm)
                        .map_err(map_heap(name, "update"))?;
                }
                return Err(e);
            }
            let new = t
                .heap
                .update(w.xid, &snap, tm, row_id, &bytes)
                .map_err(map_heap(name, "update"))?;
            self.note(t, |p| p.updated += 1);
            if let Err(e) = index::insert_entries(t, &indexes, &row, new, w.xid, tm) {
                self.set_must_abort(format!(
                    "update of row {row_id} in {name:?} could not index the new version: {e}"
                ));
                return Err(e);
            }
            Ok(new)
        })
    }

    /// Delete the row at `row_id`.
    pub fn delete(&self, table: impl TableRef, row_id: RowId) -> Result<()> {
        self.with_table(table, |t| {
            let w = self.writer("delete", &t.info.name)?;
            let snap = self.command(w, "delete", &t.info.name)?;
            t.heap
                .delete(w.xid, &snap, &*self.core().tm, row_id)
                .map_err(map_heap(&t.info.name, "delete"))?;
            self.note(t, |p| p.deleted += 1);
            Ok(())
        })
    }

    /// Replace the row whose `column` is `value` (found through the unique
    /// index on that column); returns the new version's row id, or `None` if
    /// this transaction sees no such row.
    pub fn update_by_key(
        &self,
        table: impl TableRef,
        column: &str,
        value: &Value,
        row: impl Into<Row>,
    ) -> Result<Option<RowId>> {
        let t = table.resolve_table(&self.db)?;
        match self.get_by_key(&*t, column, value)? {
            Some((id, _)) => self.update(&*t, id, row).map(Some),
            None => Ok(None),
        }
    }

    /// Delete the row whose `column` is `value` (found through the unique
    /// index on that column); `false` if this transaction sees no such row.
    pub fn delete_by_key(&self, table: impl TableRef, column: &str, value: &Value) -> Result<bool> {
        let t = table.resolve_table(&self.db)?;
        match self.get_by_key(&*t, column, value)? {
            Some((id, _)) => self.delete(&*t, id).map(|()| true),
            None => Ok(false),
        }
    }

    // ---- reads of owned rows ----

    /// The row at `row_id` if this transaction sees it.
    pub fn get(&self, table: impl TableRef, row_id: RowId) -> Result<Option<OwnedRow>> {
        self.get_with(table, row_id, |row| row.to_owned_row())?
            .transpose()
    }

    /// The row whose `column` is `value`, through the unique index on that
    /// column, if this transaction sees one. NULL finds nothing.
    pub fn get_by_key(
        &self,
        table: impl TableRef,
        column: &str,
        value: &Value,
    ) -> Result<Option<(RowId, OwnedRow)>> {
        self.with_table(table, |t| {
            let ix = unique_index(t, column)?;
            let Some(key) = search_key(&ix, &t.info, value)? else {
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

    /// Every row this transaction sees whose indexed column is `value`, in
    /// row-id order, through index `index` (or the only index of the table
    /// named `index`); in an index of several columns, whose first column is
    /// `value`, in key order (see [`lookup_each`](Self::lookup_each)).
    pub fn index_lookup(
        &self,
        index: impl IndexRef,
        value: &Value,
    ) -> Result<Vec<(RowId, OwnedRow)>> {
        let mut out = Vec::new();
        self.lookup_each(index, value, |row| {
            out.push((row.id(), row.to_owned_row()?));
            Ok(())
        })?;
        Ok(out)
    }

    // ---- reads of borrowed rows ----

    /// `f` of the row at `row_id` as a [`RowRef`], if this transaction sees
    /// it (the page is pinned and share-locked while `f` runs: see
    /// [`RowRef`]).
    pub fn get_with<R>(
        &self,
        table: impl TableRef,
        row_id: RowId,
        f: impl FnOnce(RowRef<'_>) -> R,
    ) -> Result<Option<R>> {
        self.with_table(table, |t| {
            t.heap
                .fetch_with(row_id, &self.read_snapshot(), &*self.core().tm, |bytes| {
                    f(RowRef::new(row_id, bytes, &t.info))
                })
                .map_err(map_heap(&t.info.name, "get"))
        })
    }

    /// Call `f` on every row this transaction sees whose indexed column is
    /// `value`, in row-id order, through `index`; returns how many. The
    /// B-tree is searched for the key alone (no scan machinery), each match's
    /// heap page pinned once, its visibility checked and its key re-checked
    /// on the page; `f` gets the row as a [`RowRef`] (no copy). NULL finds
    /// nothing in an index over one `I64` or `Bytes` column (which does not
    /// index NULLs), and the rows holding NULL in any other. In an index of
    /// several columns this is the rows whose *first* column is `value`, in
    /// key order: [`range_each`](Self::range_each) over
    /// `KeyRange::prefix(value)`.
    pub fn lookup_each(
        &self,
        index: impl IndexRef,
        value: &Value,
        mut f: impl FnMut(RowRef<'_>) -> Result<()>,
    ) -> Result<usize> {
        let resolved = index.resolve_index(&self.db)?;
        if resolved.ix.info.columns.len() > 1 {
            return self.range_each(&*resolved, KeyRange::prefix(value.clone()), f);
        }
        self.with_index(&*resolved, |t, ix| {
            let Some(key) = search_key(ix, &t.info, value)? else {
                return Ok(0);
            };
            let mut n = 0;
            self.each_match(t, ix, &key, |row| {
                n += 1;
                f(row).map(|()| true)
            })?;
            Ok(n)
        })
    }

    /// The visible rows of `t` whose column `ix` indexes hold `key`, to `f`
    /// (which returns whether to go on): the B-tree's point lookup hands
    /// over each entry's TID with no index page locked, and the heap page
    /// is pinned once for the fetch, the visibility check and `f`.
    fn each_match(
        &self,
        t: &TableHandle,
        ix: &IndexHandle,
        key: &Key,
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<()> {
        let col = col_of(&t.info, ix.info.columns[0]);
        // A tuple key is re-checked in its stored form.
        let stored = ix.is_tuple().then(|| key.encode());
        let name = &t.info.name;
        let tm = &*self.core().tm;
        let snap = &*self.read_snapshot();
        let mut failed = None;
        let each = |tid| {
            let fetched = t
                .heap
                .fetch_with(tid, snap, tm, |bytes| {
                    let row = RowRef::new(tid, bytes, &t.info);
                    let matches = match &stored {
                        Some(k) => ix.row_ref_has_key(&row, k)?,
                        None => key_matches(&row, col, key)?,
                    };
                    if !matches {
                        return Ok(true);
                    }
                    f(row)
                })
                .map_err(map_heap(name, "index fetch"));
            match fetched {
                Ok(None) | Ok(Some(Ok(true))) => true,
                Ok(Some(Ok(false))) => false,
                Ok(Some(Err(e))) | Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        };
        // A tuple key was encoded once above: look it up in that form.
        match &stored {
            Some(k) => ix.btree.lookup_encoded_each(k, each),
            None => ix.btree.lookup_each(key, each),
        }
        .map_err(map_btree(ix, "lookup"))?;
        failed.map_or(Ok(()), Err)
    }

    /// Call `f` on every row this transaction sees, in row-id order, a page
    /// at a time (see [`scan_until`](Self::scan_until)).
    pub fn scan_each(
        &self,
        table: impl TableRef,
        mut f: impl FnMut(RowRef<'_>) -> Result<()>,
    ) -> Result<ScanSummary> {
        let opts = self.default_scan_options();
        self.scan_until(table, opts, |row| f(row).map(|()| true))
    }

    /// Call `f` on every row this transaction sees, in row-id order, until
    /// it returns `false`. Each page is pinned and share-locked once; its
    /// tuples' visibility is checked and hints set for the page in one
    /// batch (`opts.hint_mode`); `f` gets each visible row as a [`RowRef`]
    /// on the page: a predicate and a projection are whatever `f` reads,
    /// and nothing is copied. Tables larger than a quarter of the pool are
    /// read through the bulk-read ring (`opts.ring`). The table is held
    /// against DROP for the whole scan. Returns what the scan did.
    pub fn scan_until(
        &self,
        table: impl TableRef,
        opts: ScanOptions,
        mut f: impl FnMut(RowRef<'_>) -> Result<bool>,
    ) -> Result<ScanSummary> {
        self.with_table(table, |t| {
            let name = &t.info.name;
            let nblocks = t.heap.nblocks().map_err(map_heap(name, "scan"))?;
            let pool = &self.core().pool;
            let ring = scan_ring(pool, opts.ring, nblocks);
            let mut summary = ScanSummary {
                used_ring: ring.is_some(),
                ..ScanSummary::default()
            };
            let mut stream = scan_stream(pool, t, nblocks, ring);
            let mut batch = Vec::new();
            let snap = self.read_snapshot();
            loop {
                let mut stop = None;
                let visited = visit_page(
                    self.core(),
                    t,
                    &snap,
                    opts,
                    &mut stream,
                    &mut batch,
                    |row: RowRef<'_>| {
                        if stop.is_none() {
                            summary.rows += 1;
                            match f(row) {
                                Ok(true) => {}
                                Ok(false) => stop = Some(Ok(())),
                                Err(e) => stop = Some(Err(e)),
                            }
                        }
                    },
                )?;
                if visited.is_none() {
                    break;
                }
                summary.pages += 1;
                if let Some(r) = stop {
                    return r.map(|()| summary);
                }
            }
            Ok(summary)
        })
    }

    fn default_scan_options(&self) -> ScanOptions {
        ScanOptions {
            ring: RingChoice::Auto,
            hint_mode: self.core().options.hint_mode,
        }
    }

    // ---- iterators ----

    /// Every row this transaction sees, in row-id order, a page at a time,
    /// as owned rows. Tables larger than a quarter of the pool are read
    /// through the bulk-read ring (PostgreSQL's `initscan` rule).
    pub fn scan(&self, table: impl TableRef) -> Result<RowIter> {
        let opts = self.default_scan_options();
        self.scan_with(table, opts)
    }

    /// [`scan`](Self::scan) with the ring and hint mode chosen by the caller.
    pub fn scan_with(&self, table: impl TableRef, opts: ScanOptions) -> Result<RowIter> {
        let table = table.resolve_table(&self.db)?.into_owned();
        let nblocks = self.with_table(&table, |t| {
            t.heap.nblocks().map_err(map_heap(&t.info.name, "scan"))
        })?;
        let pool = &self.core().pool;
        let ring = scan_ring(pool, opts.ring, nblocks);
        let stream = scan_stream(pool, &table.h, nblocks, ring);
        let page = Batch::new(PageCopy::empty(table.h.info.shape().clone()), 0);
        Ok(RowIter {
            _reg: SnapshotReg::again(&self.db, self.snapshot().xmin),
            db: self.db.clone(),
            table,
            snapshot: self.read_snapshot().into_owned(),
            rolled_back: self.rolled_back.clone(),
            opts,
            uses_ring: stream.uses_ring(),
            stream: Some(stream),
            before: None,
            done: false,
            page,
            next: 0,
            stop: 0,
            failures: VecDeque::new(),
            error_row: None,
            visited: None,
            reread: None,
            reread_after: None,
            batch: Vec::new(),
            filter: None,
            projection: None,
            failed: false,
            reading: false,
        })
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        // Roll back; errors cannot be reported from drop (the clog says
        // aborted either way).
        let _ = self.abort_now();
    }
}

/// The unique index on `t.column`.
fn unique_index(t: &TableHandle, column: &str) -> Result<std::sync::Arc<IndexHandle>> {
    let col = t.info.column_index(column)?;
    t.indexes
        .read()
        .iter()
        .find(|ix| ix.info.columns == [col] && ix.info.unique)
        .cloned()
        .ok_or_else(|| EngineError::NoIndex {
            table: t.info.name.clone(),
            column: column.into(),
            what: "unique index",
        })
}

/// Does the row's indexed column still hold the single-column `key`?
#[inline]
fn key_matches(row: &RowRef<'_>, col: Col, key: &Key) -> Result<bool> {
    Ok(match (col.ty(), key) {
        (ColumnType::I64, Key::I64(k)) => row.i64_opt(col)? == Some(*k),
        (ColumnType::Timestamp, Key::I64(k)) => row.timestamp_opt(col)? == Some(*k),
        (ColumnType::Bytes, Key::Bytes(k)) => row.bytes_opt(col)? == Some(k.as_slice()),
        (ColumnType::Text, Key::Bytes(k)) => {
            row.text_opt(col)?.map(str::as_bytes) == Some(k.as_slice())
        }
        _ => value_key(&row.value(col)?).as_ref() == Some(key),
    })
}

/// The ring a scan of `nblocks` pages reads through.
fn scan_ring(pool: &BufferPool, choice: RingChoice, nblocks: u32) -> Option<Ring> {
    match choice {
        RingChoice::Never => None,
        RingChoice::Auto if (nblocks as usize) <= pool.size() / 4 => None,
        RingChoice::Auto => pool.ring(RingKind::BulkRead),
        RingChoice::Always => pool
            .ring(RingKind::BulkRead)
            .or_else(|| pool.ring_forced(RingKind::BulkRead, BULK_READ_RING_KIB)),
    }
}

/// The read stream of a sequential scan of `t`'s first `nblocks` pages,
/// through `ring` if given.
fn scan_stream(pool: &BufferPool, t: &TableHandle, nblocks: u32, ring: Option<Ring>) -> ReadStream {
    pool.read_stream(
        RelFork::main(t.heap.rel()),
        0..nblocks,
        ring,
        StreamConfig::default(),
    )
}

/// Take the next page of `t` from `stream` and share-lock it, check its
/// tuples against `snap` (hints per `opts.hint_mode`, in one batch per
/// page), and hand `visit` every visible row under the lock, then the
/// page, still locked. `None` when the stream is over.
#[allow(clippy::too_many_arguments)]
fn visit_page(
    core: &Core,
    t: &TableHandle,
    snap: &Snapshot,
    opts: ScanOptions,
    stream: &mut ReadStream,
    batch: &mut Vec<(usize, u16)>,
    visit: impl VisitRows,
) -> Result<Option<BlockNumber>> {
    let name = &t.info.name;
    let Some(buf) = stream.next_buffer() else {
        return Ok(None);
    };
    let page = buf
        .map_err(|e| map_heap(name, "scan")(HeapError::Buffer(e)))?
        .lock_shared();
    visit_locked(core, t, snap, opts, &page, batch, visit)?;
    Ok(Some(page.block()))
}

/// What [`visit_page`] hands a page's visible rows to.
trait VisitRows {
    /// A visible row; its bytes are `at..at + row.raw().len()` of the page.
    fn row(&mut self, row: RowRef<'_>, at: usize);
    /// The page, still locked, after its last visible row.
    fn page(&mut self, _page: &[u8]) {}
}

/// A closure takes each row and leaves the page alone.
impl<F: FnMut(RowRef<'_>)> VisitRows for F {
    #[inline(always)]
    fn row(&mut self, row: RowRef<'_>, _at: usize) {
        self(row)
    }
}

/// [`visit_page`] for a page already share-locked.
fn visit_locked(
    core: &Core,
    t: &TableHandle,
    snap: &Snapshot,
    opts: ScanOptions,
    page: &bufmgr::PageRead<'_>,
    batch: &mut Vec<(usize, u16)>,
    mut visit: impl VisitRows,
) -> Result<()> {
    let name = &t.info.name;
    let heap = &t.heap;
    let block = page.block();
    // Each tuple is a slice of the page: its position is its address's
    // distance from the page's.
    let base = page.as_ptr() as usize;
    visit_visible_tuples(
        page,
        PageId {
            rel: heap.rel(),
            block,
        },
        snap,
        &*core.tm,
        opts.hint_mode,
        !heap.is_logged(),
        batch,
        // Inlined into the loop over the page's tuples (a call per tuple
        // otherwise, with the frame of the error paths behind it).
        #[inline(always)]
        |off, tuple| {
            let data = &tuple[TUPLE_HEADER_SIZE..];
            visit.row(
                RowRef::new(Tid::new(block, off), data, &t.info),
                data.as_ptr() as usize - base,
            )
        },
    )
    .map_err(map_heap(name, "scan"))?;
    visit.page(page);
    Ok(())
}

/// What a [`Transaction::scan_until`] / [`Transaction::scan_each`] did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// Pages read (pinned and share-locked once each).
    pub pages: u64,
    /// Visible rows handed to the callback.
    pub rows: u64,
    /// Whether the pages came through the bulk-read ring.
    pub used_ring: bool,
}

/// A row predicate for [`RowIter::matching`].
type RowFilter = Box<dyn FnMut(&RowRef<'_>) -> Result<bool> + Send>;

/// Rows of a table scan as owned rows, a page at a time (see
/// [`Transaction::scan`]). Each page is read under its shared lock, its
/// visible rows that pass the filter decoded (whole, or the projected
/// columns), and the lock released before the rows are handed out. The
/// iterator keeps the transaction's snapshot registered until it is dropped,
/// so it may outlive the transaction: vacuum never removes a row it will
/// still return.
///
/// After its transaction ends (see the module docs): committed, it reads
/// on with its snapshot, seeing the transaction's own changes of the
/// commands before it began; rolled back (or failed to commit), from its
/// next row on it returns exactly the committed state as of its snapshot,
/// without the transaction's changes, whatever hint bits say: the page in
/// hand is read again from just after the last item handed out (its rows
/// not yet handed out, and those the transaction's own deletes hid). An
/// error ends it and releases its pins at once.
#[derive(Debug)]
pub struct RowIter {
    table: Table,
    snapshot: Snapshot,
    /// The transaction's flag: it ended without committing.
    rolled_back: Arc<AtomicBool>,
    opts: ScanOptions,
    uses_ring: bool,
    /// The table's pages, read ahead; its pins are released whenever rows
    /// are handed out (see `read_page`); `None` once the scan is over or
    /// failed.
    stream: Option<ReadStream>,
    /// The row id last handed out before the page in hand's rows.
    before: Option<RowId>,
    /// The stream is over.
    done: bool,
    /// The copy of the page in hand (its kept tuples, in order), which the
    /// rows handed out share, with a reference paid for each row not yet
    /// handed out (`page.len() - next` of them, until released).
    page: Batch<PageCopy>,
    /// The entry of `page` to hand out next.
    next: u32,
    /// `next` may be handed out by `next`'s fast path while below this:
    /// the page's entry count, or the position of its first error.
    stop: u32,
    /// The page's errors not yet handed out (a filter's, a damaged
    /// tuple's), each with the number of entries kept before it (it is
    /// handed out once `next` reaches that number) and its row's id.
    failures: VecDeque<Failure>,
    /// The row whose error was handed out last.
    error_row: Option<RowId>,
    /// The block of the page last read (the page in hand's, even once all
    /// its rows are handed out).
    visited: Option<BlockNumber>,
    /// After a rollback: the blocks to read again, with the committed
    /// view, before the stream's next page; rows at or before
    /// `reread_after` (the last item handed out) are skipped on them.
    reread: Option<std::ops::RangeInclusive<BlockNumber>>,
    reread_after: Option<RowId>,
    batch: Vec<(usize, u16)>,
    filter: Option<FilterBox>,
    /// The projected columns, and the shape of the rows they make.
    projection: Option<(Vec<Col>, Arc<Shape>)>,
    failed: bool,
    /// Set while a page is read and cleared once it is: still set on entry,
    /// the last read unwound part-way (a panic in the filter, caught by
    /// the caller), and the scan ends with [`EngineError::ScanInterrupted`]
    /// instead of going on as if the page had no more rows.
    reading: bool,
    /// Dropped last (fields drop in order): if this is the database's last
    /// handle, the database closes after the stream's pins and the table
    /// handle are gone.
    _reg: SnapshotReg,
    db: Database,
}

/// Debug-printable wrapper of a [`RowFilter`].
struct FilterBox(RowFilter);

impl std::fmt::Debug for FilterBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowFilter")
    }
}

/// Has the transaction of an iterator with snapshot `snap` ended without
/// committing? Then `snap` stops naming it as its own: the transaction's
/// xid was taken after the snapshot, so its inserts are invisible and its
/// deletes undone, by the snapshot's `xmax` alone (no hint bit needed).
/// Returns whether the snapshot changed.
fn forget_rolled_back(snap: &mut Snapshot, rolled_back: &AtomicBool) -> bool {
    if !rolled_back_under(snap, rolled_back) {
        return false;
    }
    snap.own = heap::txn::INVALID_XID;
    snap.cid = None;
    true
}

impl RowIter {
    /// Whether the scan reads through a ring.
    pub fn uses_ring(&self) -> bool {
        self.uses_ring
    }

    /// Only rows for which `pred` holds, evaluated on the page under its
    /// shared lock before anything is copied. Applies to pages not yet read.
    pub fn matching(
        mut self,
        pred: impl FnMut(&RowRef<'_>) -> Result<bool> + Send + 'static,
    ) -> RowIter {
        self.filter = Some(FilterBox(Box::new(pred)));
        self
    }

    /// Hand out only these columns, in this order (each row a `Vec<Value>`
    /// of `cols.len()` values). Applies to pages not yet read.
    ///
    /// Each handle must be a column of the scanned table (as
    /// [`RowColumn::col`] checks it): a handle of another table is
    /// [`EngineError::WrongColumn`], the iterator's next item and its last,
    /// never the values of the column at its position in this table.
    pub fn project(mut self, cols: &[Col]) -> RowIter {
        let table = self.table.h.info.shape().table_shared();
        if let Err(e) = cols.iter().try_for_each(|c| c.col(&table).map(drop)) {
            self.drop_rows_in_hand();
            self.failures.push_back((0, None, Box::new(e)));
            self.done = true;
            self.stream = None;
            return self;
        }
        self.projection = Some((cols.to_vec(), Shape::projected(table, cols)));
        self
    }

    /// Read the next page's rows into `self.page` and `self.kept`; `false`
    /// at the end.
    /// The pages read ahead are then unpinned (they stay in the pool, and
    /// the stream pins them again as hits): the iterator may sit idle with
    /// rows in hand for as long as its caller likes, and must not hold pins
    /// meanwhile that a DROP TABLE would wait for.
    fn read_page(&mut self) -> Result<bool> {
        let last = self.last_handed();
        let reread = self.reread.as_mut().and_then(Iterator::next);
        if reread.is_none() && self.stream.is_none() {
            return Ok(false);
        }
        let t = &*self.table.h;
        crate::loading::check(t)?;
        let dropped = t.dropped.read();
        if *dropped {
            return Err(EngineError::UnknownTable {
                name: t.info.name.clone(),
            });
        }
        self.before = last;
        let mut copy = PageCopy::after(self.page.release(), rows_shape(t, &self.projection));
        // The old copy's buffers may be in `copy` now: until `copy` is the
        // page in hand, there is none (if the read fails, it stays so).
        self.next = 0;
        self.stop = 0;
        let failures = &mut self.failures;
        let filter = &mut self.filter;
        let visited = match (reread, self.stream.as_mut()) {
            (Some(block), _) => {
                let name = &t.info.name;
                let page = t
                    .heap
                    .pool()
                    .read_buffer(RelFork::main(t.heap.rel()), block, None)
                    .map_err(|e| map_heap(name, "scan")(HeapError::Buffer(e)))?
                    .lock_shared();
                let after = self.reread_after;
                visit_locked(
                    self.db.core(),
                    t,
                    &self.snapshot,
                    self.opts,
                    &page,
                    &mut self.batch,
                    Keep {
                        filter,
                        copy: &mut copy,
                        failures,
                        after,
                    },
                )?;
                Some(block)
            }
            (None, Some(stream)) => visit_page(
                self.db.core(),
                t,
                &self.snapshot,
                self.opts,
                stream,
                &mut self.batch,
                Keep {
                    filter,
                    copy: &mut copy,
                    failures,
                    after: None,
                },
            )?,
            (None, None) => None,
        };
        self.page = shared(copy);
        self.next = 0;
        self.stop = fast_end(self.page.handle(), &self.failures);
        if (self.stop > 0 || !self.failures.is_empty())
            && let Some(stream) = self.stream.as_mut()
        {
            stream.release_ahead();
        }
        if visited.is_some() {
            self.visited = visited;
        }
        Ok(visited.is_some())
    }

    /// The row id last handed out.
    fn last_handed(&self) -> Option<RowId> {
        match self.next {
            0 => self.before,
            n => Some(self.page.handle().id(n - 1)),
        }
    }

    /// Forget the rows and errors of the page in hand not yet handed out.
    fn drop_rows_in_hand(&mut self) {
        self.before = self.last_handed();
        self.page = Batch::new(PageCopy::empty(self.page.handle().shape().clone()), 0);
        self.next = 0;
        self.stop = 0;
        self.failures.clear();
    }

    /// Blocks are left to read again after a rollback.
    fn rereading(&self) -> bool {
        self.reread.as_ref().is_some_and(|r| !r.is_empty())
    }

    /// The transaction rolled back: what was read as its own is read again
    /// with the committed view, from just after the last item handed out
    /// (a row, or a row's error) on. The rows in hand go, and the pages
    /// from that item's to the page last read are read again before the
    /// stream goes on: the page in hand's rows not yet handed out, but
    /// also rows after the last one handed out that the transaction's own
    /// view did not keep (its own deletes, undone), on that page and on
    /// the pages read since, where that view kept none.
    fn reread_pages(&mut self) {
        // Ended (it has returned `None`), or nothing read yet.
        let Some(last) = self.visited.filter(|_| !self.done) else {
            return;
        };
        let after = self.last_handed().max(self.error_row);
        let first = after.map_or(0, |r| r.block);
        self.drop_rows_in_hand();
        self.reread = Some(first..=last);
        self.reread_after = after;
    }

    fn fail(&mut self, e: EngineError) -> Advance {
        self.failed = true;
        self.drop_rows_in_hand();
        // The read-ahead pins go now, not when the caller drops us.
        self.stream = None;
        Advance::Failed(Box::new(e))
    }
}

/// An error of a page's rows not yet handed out: the number of entries kept
/// before it, its row's id (`None`: not a row's), the error.
type Failure = (u32, Option<RowId>, Box<EngineError>);

/// `copy` shared, with a reference paid for each of its rows.
fn shared(copy: PageCopy) -> Batch<PageCopy> {
    let rows = copy.len() as usize;
    Batch::new(copy.share(), rows)
}

/// Where [`RowIter::next`]'s fast path stops in `page`: at its end, or at
/// its first error not yet handed out.
fn fast_end(page: &PageCopy, failures: &VecDeque<Failure>) -> u32 {
    let len = page.len();
    failures.front().map_or(len, |&(at, _, _)| at.min(len))
}

/// The shape of the rows a scan of `t` hands out: the table's, or the
/// projected columns'.
fn rows_shape(t: &TableHandle, projection: &Option<(Vec<Col>, Arc<Shape>)>) -> Arc<Shape> {
    match projection {
        None => t.info.shape().clone(),
        Some((_, shape)) => shape.clone(),
    }
}

/// What [`RowIter::read_page`] does with a page's visible rows: filter
/// each and keep its tuple in `copy` if it passes (a row id at or before
/// `after` is skipped); the error its filter returned, or its tuple's
/// corruption, goes to `failures` with the number of entries before it.
/// The kept tuples are copied in one go at the end of the page.
struct Keep<'a> {
    filter: &'a mut Option<FilterBox>,
    copy: &'a mut PageCopy,
    failures: &'a mut VecDeque<Failure>,
    after: Option<RowId>,
}

impl VisitRows for Keep<'_> {
    /// The common case (no rows to skip, no filter, a row the plan
    /// accepts) inlined into the page's loop; anything else out of line.
    #[inline(always)]
    fn row(&mut self, row: RowRef<'_>, at: usize) {
        if self.after.is_none()
            && self.filter.is_none()
            && self.copy.keep_common(row.id(), row.raw(), at)
        {
            return;
        }
        self.row_rest(row, at)
    }

    fn page(&mut self, page: &[u8]) {
        self.copy.copy_from(page);
    }
}

impl Keep<'_> {
    /// [`VisitRows::row`] beyond its common case.
    #[inline(never)]
    fn row_rest(&mut self, row: RowRef<'_>, at: usize) {
        let id = row.id();
        if self.after.is_some_and(|a| id <= a) {
            return;
        }
        let keep = match self.filter {
            Some(FilterBox(p)) => p(&row),
            None => Ok(true),
        };
        let out = keep.and_then(|keep| match keep {
            true => self.copy.keep(id, row.raw(), at),
            false => Ok(()),
        });
        if let Err(e) = out {
            self.failures
                .push_back((self.copy.len(), Some(id), Box::new(e)));
        }
    }
}

impl Iterator for RowIter {
    type Item = Result<(RowId, OwnedRow)>;

    /// The next row of the page in hand, here (small enough to be inlined
    /// into the caller's loop); anything else (the next page, an error, a
    /// rollback to look at) in `RowIter::advance`, which answers in a
    /// word. The row is built at one place only, field by field in the
    /// caller's frame: an item built in two places (or returned whole by
    /// a call) was copied through memory on every row, a wide load of
    /// narrow stores that stalled.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.stop || rolled_back_under(&self.snapshot, &self.rolled_back) {
            match self.advance() {
                Advance::Row => {}
                Advance::End => return None,
                Advance::Failed(e) => return Some(Err(*e)),
            }
        }
        let slot = self.next;
        self.next = slot + 1;
        Some(Ok(self.hand_out(slot)))
    }
}

/// What [`RowIter::advance`] found.
enum Advance {
    /// Entry `next` of the page in hand is to be handed out.
    Row,
    /// The scan is over (or failed before).
    End,
    /// An error, to be handed out in the row's place.
    Failed(Box<EngineError>),
}

/// Has the transaction whose own snapshot is `snap` ended without
/// committing, so that [`forget_rolled_back`] has to change `snap`?
#[inline]
fn rolled_back_under(snap: &Snapshot, rolled_back: &AtomicBool) -> bool {
    snap.own != heap::txn::INVALID_XID && rolled_back.load(Ordering::Acquire)
}

impl RowIter {
    /// Entry `slot` of the page in hand as a row: the next one (`slot` is
    /// `next - 1`), so one of the references paid for is left for it.
    #[inline]
    fn hand_out(&mut self, slot: u32) -> (RowId, OwnedRow) {
        let id = self.page.handle().id(slot);
        let page = match self.page.take() {
            Some(page) => page,
            None => self.page.handle().clone(),
        };
        (id, OwnedRow::scanned(page, slot))
    }

    /// [`Iterator::next`] beyond the page in hand's rows: make entry `next`
    /// of the page in hand one to hand out (reading pages as needed), or
    /// say why there is none.
    #[inline(never)]
    fn advance(&mut self) -> Advance {
        if self.failed {
            return Advance::End;
        }
        if self.reading {
            let table = self.table.h.info.name.clone();
            return self.fail(EngineError::ScanInterrupted { table });
        }
        if forget_rolled_back(&mut self.snapshot, &self.rolled_back) {
            self.reread_pages();
        }
        loop {
            if self
                .failures
                .front()
                .is_some_and(|&(at, _, _)| at <= self.next)
                && let Some((_, row, e)) = self.failures.pop_front()
            {
                if row.is_some() {
                    self.error_row = row;
                }
                self.stop = fast_end(self.page.handle(), &self.failures);
                return Advance::Failed(e);
            }
            self.stop = fast_end(self.page.handle(), &self.failures);
            if self.next < self.stop {
                return Advance::Row;
            }
            if self.done && !self.rereading() {
                return Advance::End;
            }
            self.reading = true;
            let read = self.read_page();
            self.reading = false;
            match read {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    self.stream = None;
                }
                Err(e) => return self.fail(e),
            }
        }
    }
}

/// Beginning transactions: here rather than in `database`, so that
/// `database` does not import the transaction that imports it.
impl Database {
    /// Begin a transaction in the database's commit mode. It takes its
    /// snapshot now and a transaction id only at its first write: one that
    /// only reads writes no commit record and never waits for the WAL, so
    /// its `commit` costs what `rollback` does.
    pub fn begin(&self) -> Result<Transaction> {
        let mode = self.core().tm.commit_mode();
        Transaction::begin(self.clone(), mode, false)
    }

    /// Begin a transaction that commits in `mode`.
    pub fn begin_with(&self, mode: CommitMode) -> Result<Transaction> {
        Transaction::begin(self.clone(), mode, false)
    }

    /// Begin a read-only transaction: a snapshot and nothing else. Every
    /// write through it is [`EngineError::ReadOnlyTransaction`]; it never
    /// takes a transaction id, and commit and rollback only release the
    /// snapshot.
    pub fn read(&self) -> Result<Transaction> {
        let mode = self.core().tm.commit_mode();
        Transaction::begin(self.clone(), mode, true)
    }
}
