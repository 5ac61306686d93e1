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

use std::collections::VecDeque;
use std::sync::Arc;

use bufmgr::config::BULK_READ_RING_KIB;
use bufmgr::{Ring, RingKind};
use heap::page::PageId;
use heap::visibility::visit_visible_tuples;
use heap::{HeapError, RingChoice, ScanOptions, Snapshot, Tid};
use wal::Lsn;

use crate::catalog::TableHandle;
use crate::database::{Core, Database, RowId};
use crate::error::{EngineError, Result};
use crate::txn::Xid;
use crate::txn::xact::{CommitMode, Transaction as XactTransaction};
use crate::value::{Row, decode_row, encode_row};

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
    /// commit is durable when this returns.
    pub fn commit(mut self) -> Result<Lsn> {
        let mode = self.mode;
        self.release().commit_with(mode)
    }

    /// Roll back: nothing this transaction wrote is ever visible.
    pub fn rollback(mut self) -> Result<()> {
        self.release().abort()
    }

    /// The table, held against DROP while `f` runs.
    fn with_table<R>(&self, table: &str, f: impl FnOnce(&TableHandle) -> Result<R>) -> Result<R> {
        let t = self.core.table(table)?;
        let dropped = t.dropped.read();
        if *dropped {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        f(&t)
    }

    /// Insert `row`; returns its row id.
    pub fn insert(&self, table: &str, row: Row) -> Result<RowId> {
        self.with_table(table, |t| {
            let bytes = encode_row(table, &t.info.columns, &row)?;
            t.heap
                .insert(self.xid(), &bytes)
                .map_err(map_heap(table, "insert"))
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

    /// Replace the row at `row_id`; returns the new version's row id.
    pub fn update(&self, table: &str, row_id: RowId, row: Row) -> Result<RowId> {
        self.with_table(table, |t| {
            let bytes = encode_row(table, &t.info.columns, &row)?;
            t.heap
                .update(self.xid(), &self.snapshot, &*self.core.tm, row_id, &bytes)
                .map_err(map_heap(table, "update"))
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
            let _ = self.release().abort();
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
