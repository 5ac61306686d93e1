//! Bulk load (PostgreSQL's COPY): [`Database::bulk_load`] into an empty
//! table through the bulk-write ring with indexes built bottom-up, or row
//! by row into a table that has pages (crate README, "Bulk load").

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bufmgr::{RelFork, RingKind};
use heap::Tid;

use crate::catalog::{IndexHandle, TableHandle};
use crate::database::{Core, Database};
use crate::error::{EngineError, Result};
use crate::index;
use crate::value::{Row, encode_row};

/// What a bulk load has done so far (handed to the progress callback).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct BulkProgress {
    /// Rows inserted so far.
    pub rows: u64,
    /// Encoded row bytes inserted.
    pub bytes: u64,
    /// Pages the table grew by.
    pub pages: u64,
    /// Pages written during the load by the bulk-write ring (into an empty
    /// table: the pool's ring writes while it ran) or by the loader's own
    /// evictions (into a table with pages; see [`Database::bulk_load`]).
    pub pages_written: u64,
    /// Time since the load began.
    pub elapsed: Duration,
    /// The last report: the load committed.
    pub done: bool,
}

impl Database {
    /// Load `rows` into `table` in one transaction (all or nothing),
    /// WAL-logged, calling `progress` every `Options::bulk_load_progress_every`
    /// rows and once at the end (`done`).
    ///
    /// Into an **empty** table (PostgreSQL's COPY into a new table + CREATE
    /// INDEX): the table is held exclusively for the load (its readers and
    /// writers wait), the rows go onto new pages filled whole through the
    /// bulk-write ring (`heap::BulkWriter`: one full-page WAL record per
    /// page; recycling a ring slot writes its page, so the load writes its
    /// own pages and leaves the rest of the pool alone), and each index is
    /// built afterwards bottom-up from its sorted entries
    /// (`btree::Index::build_sorted`). A duplicate key in a unique index
    /// fails the load like a bad row.
    ///
    /// Into a table that has pages already, rows are inserted one by one,
    /// each index maintained as they go in; each time the table has grown by
    /// a ring's worth of pages the loader writes and evicts the table's
    /// unpinned pages itself (`evict_relation`), the bulk-write ring's job
    /// done by hand. With rings off neither ring is used.
    ///
    /// **Reading the table being loaded from `rows` or `progress`** (on the
    /// loading thread; e.g. loading a table from a scan of itself):
    /// - into a table with pages, it works: a transaction of the caller's
    ///   sees the table as of its snapshot, without the load's rows (they
    ///   are another transaction's, uncommitted), so a scan of the table
    ///   feeding its own load ends;
    /// - into an empty table, which the load holds exclusively, any
    ///   operation on the table from `rows` or a progress report before the
    ///   last fails at once with [`EngineError::TableBeingLoaded`], and the
    ///   load then fails with it too, committing nothing (even if the
    ///   iterator swallowed the error). The last report (`done`) comes
    ///   after the table is released and may read the loaded rows.
    ///
    /// Other threads' operations on the table wait while an empty table is
    /// loaded.
    pub fn bulk_load(
        &self,
        table: &str,
        rows: impl IntoIterator<Item = impl Into<Row>>,
        progress: impl FnMut(BulkProgress),
    ) -> Result<BulkProgress> {
        let rows = rows.into_iter().map(Into::into);
        let c = self.core();
        let t = c.table(table)?;
        crate::loading::check(&t)?;
        let exclusive = t
            .dropped
            .write(table, || format!("bulk load into table {table:?}"))?;
        if *exclusive {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        let empty = t
            .heap
            .nblocks()
            .map_err(EngineError::heap(format!("bulk load into {table:?}")))?
            == 0;
        if empty {
            let mut progress = progress;
            let loading = crate::loading::Loading::begin(&t);
            let p = self.load_empty(&t, rows, &mut progress, &loading)?;
            drop(loading);
            // The last report once the table is free again: the callback
            // may read the rows just committed.
            drop(exclusive);
            progress(p);
            return Ok(p);
        }
        drop(exclusive);
        self.load_rows(&t, rows, progress)
    }

    /// `bulk_load` into an empty table, which the caller holds exclusively
    /// and has marked `loading`; the caller makes the last (`done`) report.
    fn load_empty(
        &self,
        t: &TableHandle,
        rows: impl IntoIterator<Item = Row>,
        mut progress: impl FnMut(BulkProgress),
        loading: &crate::loading::Loading,
    ) -> Result<BulkProgress> {
        let c = self.core();
        let table = &t.info.name;
        let every = c.options.bulk_load_progress_every;
        let ring_writes = |c: &Core| c.pool.stats().totals().writes_ring;
        let written_before = ring_writes(c);
        let indexes: Vec<Arc<IndexHandle>> = t.indexes.read().clone();
        let txn = c.tm.begin()?;
        let started = Instant::now();
        let mut p = BulkProgress::default();
        let mut entries: Vec<Vec<(btree::Key, Tid)>> = vec![Vec::new(); indexes.len()];
        let mut writer = t
            .heap
            .bulk_writer(txn.xid(), c.pool.ring(RingKind::BulkWrite));
        for row in rows {
            let bytes = encode_row(table, &t.info.columns, &row)?;
            index::check_key_sizes(&indexes, &row)?;
            let tid = writer
                .insert(&bytes)
                .map_err(crate::transaction::map_heap(table, "bulk load"))?;
            for (ix, e) in indexes.iter().zip(&mut entries) {
                if let Some(key) = ix.row_key(&row) {
                    e.push((key, tid));
                }
            }
            p.rows += 1;
            p.bytes += bytes.len() as u64;
            if p.rows % every == 0 {
                p.pages = writer.stats().pages;
                p.pages_written = ring_writes(c) - written_before;
                p.elapsed = started.elapsed();
                progress(p);
            }
        }
        p.pages = writer
            .finish()
            .map_err(crate::transaction::map_heap(table, "bulk load"))?
            .pages;
        for (ix, e) in indexes.iter().zip(entries) {
            index::build_from_entries(t, ix, e, txn.xid(), &*c.tm)?;
        }
        // A read of the table refused meanwhile fails the load (`loading`
        // rule 3); dropping `txn` rolls it back.
        loading.refused()?;
        txn.commit()?;
        t.counters.tuples.fetch_add(p.rows, Ordering::Relaxed);
        p.pages_written = ring_writes(c) - written_before;
        p.elapsed = started.elapsed();
        p.done = true;
        Ok(p)
    }

    /// `bulk_load` into a table with pages: row by row (see `bulk_load`).
    fn load_rows(
        &self,
        t: &TableHandle,
        rows: impl IntoIterator<Item = Row>,
        mut progress: impl FnMut(BulkProgress),
    ) -> Result<BulkProgress> {
        let c = self.core();
        let table = &t.info.name;
        let every = c.options.bulk_load_progress_every;
        let ring_pages = c.pool.ring(RingKind::BulkWrite).map(|r| r.len() as u64);
        let rf = RelFork::main(t.info.rel);
        let start_blocks = t
            .heap
            .nblocks()
            .map_err(EngineError::heap(format!("bulk load into {table:?}")))?;
        let txn = c.tm.begin()?;
        let started = Instant::now();
        let mut p = BulkProgress::default();
        let mut last_block = None;
        let mut pages_since_evict = 0u64;
        for row in rows {
            let bytes = encode_row(table, &t.info.columns, &row)?;
            let guard = t.dropped.read();
            if *guard {
                return Err(EngineError::UnknownTable {
                    name: table.clone(),
                });
            }
            let indexes = t.indexes.read();
            index::check_key_sizes(&indexes, &row)?;
            let tid = t
                .heap
                .insert(txn.xid(), &bytes)
                .map_err(crate::transaction::map_heap(table, "bulk load"))?;
            index::insert_entries(t, &indexes, &row, tid, txn.xid(), &*c.tm)?;
            drop(indexes);
            drop(guard);
            p.rows += 1;
            p.bytes += bytes.len() as u64;
            if last_block != Some(tid.block) {
                last_block = Some(tid.block);
                pages_since_evict += 1;
            }
            if let Some(n) = ring_pages
                && pages_since_evict >= n
            {
                let ev = c
                    .pool
                    .evict_relation(rf)
                    .map_err(EngineError::buffer(format!(
                        "bulk load into {table:?}: writing its pages"
                    )))?;
                p.pages_written += ev.flushed as u64;
                pages_since_evict = 0;
            }
            if p.rows % every == 0 {
                p.pages = c
                    .pool
                    .nblocks(rf)
                    .unwrap_or(start_blocks)
                    .saturating_sub(start_blocks) as u64;
                p.elapsed = started.elapsed();
                progress(p);
            }
        }
        txn.commit()?;
        t.counters.tuples.fetch_add(p.rows, Ordering::Relaxed);
        p.pages = c
            .pool
            .nblocks(rf)
            .unwrap_or(start_blocks)
            .saturating_sub(start_blocks) as u64;
        p.elapsed = started.elapsed();
        p.done = true;
        progress(p);
        Ok(p)
    }
}
