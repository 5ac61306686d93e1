//! `Database`: open a data directory, recover it, serve transactions, close it.
//!
//! ```text
//!   Database ── DirLock (flock on <dir>/LOCK, held until close/drop)
//!      ├── Wal ◄──────────── WAL-before-data ─────────── BufferPool (+ bgwriter thread)
//!      ├── TransactionManager (clog = relation 1, through the pool)
//!      ├── catalog Heap (relation 2) + CatalogState (tables, indexes, next rel id)
//!      ├── one Heap per table (relation >= 1000), each with its free-space map
//!      │     └── its B-tree indexes (relations >= 1000 too)
//!      ├── snapshot registry: xmin of every live Transaction's snapshot (vacuum horizon)
//!      ├── Checkpointer thread: tm.checkpoint() on time / WAL volume / request
//!      └── Autovacuum thread: vacuums a table once its dead tuples pass its threshold
//! ```
//!
//! Open, recovery and close are numbered in the crate README; the code below
//! follows those numbers. Bulk load (`bulk`), a table's vacuum passes
//! (`vacuum`), reading the catalog at open (`catalog/load.rs`) and the redo
//! of each record kind (`recovery`) are in their own files (crate README,
//! "Module map").

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use btree::{IndexOptions, PageKind};
use bufmgr::{
    BlockNumber, BufferPool, BufferRow, Fork, PoolStats, RelFork, RelId, RingKind, StorageBackend,
};
use heap::{Heap, Tid};
use parking_lot::{Mutex, RwLock};
use wal::{CheckpointInfo, Wal, WalStats};

use crate::autovacuum::{AutovacShared, Autovacuum, AutovacuumStats, WorkerContext};
use crate::catalog::{
    CATALOG_REL, CatalogEntry, CatalogState, IndexHandle, IndexInfo, InvalidIndex, RelKind,
    TableHandle, check_name, check_table,
};
use crate::datadir::{self, DirLock, Recorded, RecordedKind};
use crate::drop_lock::DropLock;
use crate::error::{EngineError, Result};
use crate::index::{self, map_btree};
use crate::invalid_pages::{InvalidPages, log_drop};
use crate::keys::index_key_type;
use crate::options::Options;
use crate::recovery::{RecoveryStats, recover, redo_record};
use crate::reserved::CLOG_REL;
use crate::schema::Schema;
use crate::stats::{Pending, TableCounters};
use crate::table_def::TableInfo;
use crate::txn::Xid;
use crate::txn::registry::SnapshotRegistry;
use crate::txn::xact::{CommitMode, TransactionManager, TxnStats, next_xid_hint};
use crate::vacuum::{VacuumReport, vacuum_table};
use crate::value::Column;

/// An open data directory.
///
/// A handle: cloning it is one reference-count increment, and every clone,
/// transaction and iterator shares the one open database (an `Arc` inside),
/// so it can be handed to spawned threads. The database closes when
/// [`close`](Database::close) is called on the last handle, or when the last
/// handle, transaction or iterator is dropped (errors ignored then).
#[derive(Clone, Debug)]
pub struct Database {
    shared: Arc<Shared>,
}

/// What every handle shares. `core` is `None` only while it is being shut
/// down.
#[derive(Debug)]
pub(crate) struct Shared {
    core: Option<Core>,
    /// The directory of a temporary database (`temporary`), removed when
    /// this is dropped: after the core has shut down (`Drop` below runs
    /// before the fields are dropped).
    pub(crate) temp_dir: Option<tempfile::TempDir>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            let _ = core.shutdown();
        }
    }
}

/// Everything an open database owns. Field order is drop order: the
/// autovacuum worker and the checkpointer stop before the manager and the
/// pool they use go.
#[derive(Debug)]
pub(crate) struct Core {
    pub autovacuum: Option<Autovacuum>,
    pub autovac: Arc<AutovacShared>,
    pub checkpointer: Option<wal::Checkpointer>,
    pub dir: PathBuf,
    pub options: Options,
    /// An `Arc` so the autovacuum worker can list the tables.
    pub catalog: Arc<RwLock<CatalogState>>,
    pub catalog_heap: Heap,
    /// The catalog's dead versions, counted by DDL (autovacuum rule 5).
    pub catalog_counters: TableCounters,
    /// DDL runs one at a time (catalog rule 1).
    pub ddl: Mutex<()>,
    /// xmin of each live snapshot (transactions, iterators): the vacuum
    /// horizon (`txn::registry`).
    pub snapshots: Arc<SnapshotRegistry>,
    /// One checkpoint at a time (see `checkpointer`).
    pub checkpoint_serial: Arc<Mutex<()>>,
    pub tm: Arc<TransactionManager>,
    pub pool: Arc<BufferPool>,
    pub wal: Arc<Wal>,
    pub recovery: RecoveryStats,
    pub lock: DirLock,
}

/// One row of [`Database::buffercache`]: the pool's row with its relation
/// named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// The pool's row: buffer id, tag, usage, pins, dirtiness, NUMA node.
    pub row: BufferRow,
    /// Table or index name, `"clog"`, `"catalog"`, or `"relation N"`.
    pub relation: Option<String>,
    /// What the relation is, if the buffer holds a page.
    pub kind: Option<RelKind>,
    /// For a page of an index: meta page or tree page and its level (0 =
    /// leaf), read from the page itself (`btree::page_kind`).
    pub index_page: Option<PageKind>,
}

/// Pages of one relation fork resident in the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResidentPages {
    /// The relation.
    pub rel: RelId,
    /// The fork (main or free-space).
    pub fork: Fork,
    /// Table or index name, `"clog"`, `"catalog"`, or `"relation N"`.
    pub name: String,
    /// What the relation is.
    pub kind: RelKind,
    /// For an index, its table's name.
    pub table: Option<String>,
    /// Pages of the fork resident in the pool now.
    pub pages: usize,
}

/// The buffer pool's counters of one relation (all its forks), named: one
/// row of [`Database::relation_stats`] (PostgreSQL's `pg_statio_all_tables`
/// and `pg_statio_all_indexes`, as counts of buffer lookups).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelationStats {
    /// The relation.
    pub rel: RelId,
    /// Table or index name, `"clog"`, `"catalog"`, or `"relation N"`
    /// (a relation dropped since, or not known to the catalog).
    pub name: String,
    /// What the relation is.
    pub kind: RelKind,
    /// For an index, its table's name.
    pub table: Option<String>,
    /// Buffer lookups, hits and evictions of its pages since open.
    pub counts: bufmgr::RelationStats,
}

/// How a table is created ([`Database::create_table_with`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// `false`: an unlogged table (and unlogged indexes): no WAL, not
    /// written by checkpoints, written at a clean close, **emptied at the
    /// first open after a crash** (PostgreSQL's `UNLOGGED`).
    pub logged: bool,
    /// The primary key's columns, in key order (empty: none): see
    /// [`TableOptions::primary_key`].
    pub primary_key: Vec<String>,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            logged: true,
            primary_key: Vec::new(),
        }
    }
}

impl TableOptions {
    /// Declare the primary key: 1 to 8 NOT NULL columns, in key order. The
    /// table is created with a unique index over them named
    /// `<table>_pkey` (in the same catalog transaction: a crash never
    /// leaves the table without it); [`crate::Table::primary_key`] finds it
    /// and [`crate::Transaction::get_by_primary_key`] reads through it.
    pub fn primary_key(mut self, columns: &[&str]) -> TableOptions {
        self.primary_key = columns.iter().map(|c| c.to_string()).collect();
        self
    }

    /// An unlogged table (`logged: false`).
    pub fn unlogged(mut self) -> TableOptions {
        self.logged = false;
        self
    }
}

/// One broken invariant found by [`Database::verify_indexes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexViolation {
    /// The index's name.
    pub index: String,
    /// The broken invariant, as `btree::verify` reports it.
    pub violation: btree::Violation,
}

impl std::fmt::Display for IndexViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "index {:?}: {}", self.index, self.violation)
    }
}

/// The positions of `columns` in `table` for index `index`: 1 to 8 known
/// columns, none twice.
fn index_columns(index: &str, table: &TableInfo, columns: &[&str]) -> Result<Vec<usize>> {
    let bad = |detail: String| EngineError::InvalidSchema {
        name: index.to_string(),
        detail,
    };
    if columns.is_empty() || columns.len() > btree::MAX_KEY_COLUMNS {
        return Err(bad(format!(
            "{} key columns, expected 1 ..= {}",
            columns.len(),
            btree::MAX_KEY_COLUMNS
        )));
    }
    let mut out = Vec::with_capacity(columns.len());
    for (i, name) in columns.iter().enumerate() {
        if columns[..i].contains(name) {
            return Err(bad(format!(
                "column {} appears twice in the key",
                crate::error::cut(name)
            )));
        }
        out.push(table.column_index(name)?);
    }
    Ok(out)
}

/// The positions of a new table's primary key columns (`None`: no
/// primary key): known, NOT NULL, 1 to 8, none twice.
fn primary_key_columns(
    table: &str,
    columns: &[Column],
    key: &[String],
) -> Result<Option<Vec<usize>>> {
    if key.is_empty() {
        return Ok(None);
    }
    let bad = |detail: String| EngineError::InvalidSchema {
        name: table.to_string(),
        detail,
    };
    if key.len() > btree::MAX_KEY_COLUMNS {
        return Err(bad(format!(
            "a primary key of {} columns, at most {}",
            key.len(),
            btree::MAX_KEY_COLUMNS
        )));
    }
    let mut out = Vec::with_capacity(key.len());
    for (i, name) in key.iter().enumerate() {
        let cut = crate::error::cut(name);
        if key[..i].contains(name) {
            return Err(bad(format!(
                "column {cut} appears twice in the primary key"
            )));
        }
        let pos = columns
            .iter()
            .position(|c| &c.name == name)
            .ok_or_else(|| {
                bad(format!(
                    "primary key column {cut} is not a column of the table"
                ))
            })?;
        if columns[pos].nullable {
            return Err(bad(format!(
                "primary key column {cut} is nullable: a primary key's columns must be NOT NULL"
            )));
        }
        out.push(pos);
    }
    Ok(Some(out))
}

impl Database {
    /// Create or open the data directory `dir` (see "Opening" in the crate
    /// README for the steps).
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Database> {
        let dir = dir.as_ref().to_path_buf();
        // 1. Options.
        options.validate()?;
        // 2. The lock, then the version stamp (datadir rules 1-3).
        let lock = datadir::lock(&dir)?;
        let new = datadir::check_or_stamp(&dir, options.checksums)?;
        // Was the last run closed cleanly? (Unlogged tables are emptied if
        // not.) The marker goes only once this open has succeeded.
        let clean = datadir::clean_marker_present(&dir)?;
        // What the directory is known to hold (datadir `RELSIZES` rules).
        let recorded = if new {
            None
        } else {
            datadir::read_relsizes(&dir)?
        };
        // 3. WAL (from the control file's redo point), storage, pool.
        let fs: Arc<dyn wal::FileSystem> = match &options.file_system {
            Some(fs) => Arc::clone(fs),
            None => Arc::new(wal::OsFileSystem),
        };
        if let Some(rec) = &recorded {
            // Opened successfully before (a first open ends with a
            // checkpoint): the control file must be there.
            let control = wal::control::read_control_with(&*fs, &dir)
                .map_err(EngineError::wal("could not read the control file"))?;
            if control.is_none() {
                return Err(EngineError::CorruptDataDir {
                    path: wal::control_path(&dir),
                    detail: format!(
                        "the control file is missing, but the data directory has been opened \
                         before ({} lists {} relations); it was deleted while the database was \
                         closed: restore it from a backup",
                        datadir::RELSIZES_FILE,
                        rec.len()
                    ),
                });
            }
        }
        let wal = Arc::new(
            Wal::open_with_fs(&dir, options.wal_config(), fs.clone()).map_err(EngineError::wal(
                format!("could not open the WAL of {}", dir.display()),
            ))?,
        );
        let files: Arc<dyn StorageBackend> = bufmgr::open_storage_with(
            &dir,
            options.io,
            options.pool_config().file_options(),
            options.max_open_files,
        )
        .map_err(EngineError::buffer("could not open the relation files"))?;
        let storage = match &options.wrap_storage {
            Some(wrap) => wrap(files),
            None => files,
        };
        // Before anything creates a file or redo writes into one: every
        // recorded file is there, at least as long as recorded.
        let (mut damaged_indexes, lengths_before_redo) = match &recorded {
            Some(rec) => check_recorded(&*storage, rec)?,
            None => (HashMap::new(), HashMap::new()),
        };
        let pool = Arc::new(
            BufferPool::with_wal(options.pool_config(), storage, wal.clone())
                .map_err(EngineError::buffer("could not open the buffer pool"))?,
        );
        // An all-zero page beyond what the last checkpoint made durable is a
        // page extended and lost with the power: new, not damage (`durable`).
        pool.set_zeroed_beyond_durable_is_new(true);
        let tm = Arc::new(TransactionManager::open(
            pool.clone(),
            wal.clone(),
            next_xid_hint(&wal),
        )?);
        tm.set_commit_mode(options.commit_mode);
        // 4. Redo from the redo point.
        let mut invalid = InvalidPages::default();
        let mut recovery = recover(&tm, |lsn, end, rec| {
            redo_record(&pool, &mut invalid, lsn, end, rec)
        })?;
        invalid.check_none_left()?;
        recovery.invalid_pages_forgiven = invalid.forgiven;
        // Every recorded file was at least as long as a checkpoint had made
        // it durable (the Storage records replayed), before redo wrote into it.
        if let Some(rec) = &recorded {
            check_durable_lengths(&pool, rec, &lengths_before_redo, &mut damaged_indexes)?;
        }

        // A copy made by `backup_to` must have replayed to its end LSN.
        let from_backup = crate::backup_label::check_label(&dir, recovery.end)?;
        // 5. The catalog.
        let catalog_heap = Heap::open(pool.clone(), Some(wal.clone()), CATALOG_REL, true)
            .map_err(EngineError::heap("could not open the catalog"))?
            .with_hint_mode(options.hint_mode);
        let autovac = Arc::new(AutovacShared::new(
            options.autovacuum,
            options.autovacuum_naptime,
            options.autovacuum_threshold,
            options.autovacuum_scale_factor,
        ));
        let mut core = Core {
            autovacuum: None,
            autovac,
            checkpointer: None,
            dir,
            options,
            catalog: Arc::new(RwLock::new(CatalogState::default())),
            catalog_heap,
            catalog_counters: TableCounters::default(),
            ddl: Mutex::new(()),
            snapshots: Arc::new(SnapshotRegistry::default()),
            checkpoint_serial: Arc::new(Mutex::new(())),
            tm,
            pool,
            wal,
            recovery,
            lock,
        };
        let replayed =
            recovery.commits + recovery.aborts + recovery.clog_pages + recovery.other > 0;
        core.load_catalog(!clean || replayed, &damaged_indexes, recorded.is_some())?;
        // 6. Orphan relation files go (catalog rule 3).
        let orphans_removed = core.remove_orphans(recorded.as_deref())?;
        // Zeros a power loss left beyond the durable lengths become blank
        // pages, written before the next fsync makes them durable data; in
        // the same pass, the recorded tables' pages there are checked.
        let checked = beyond_durable_checked(recorded.as_deref(), core.recovery.start);
        let (redo, end) = (core.recovery.start, core.wal.insert_lsn());
        let mut damage = None;
        let (read, zeroed) = core
            .pool
            .settle_beyond_durable(|rf, block, lsn| {
                if let (None, Some(r)) = (&damage, checked.get(&rf)) {
                    damage = page_beyond_durable_damage(&core.pool, r, rf, block, lsn, redo, end);
                }
            })
            .map_err(EngineError::buffer(
                "could not read the relation blocks beyond their durable length",
            ))?;
        if let Some(e) = damage {
            return Err(e);
        }
        core.recovery.beyond_durable = read;
        core.recovery.zeroed_new_pages = zeroed;
        // 7. Splits a crash cut short get their downlinks, then the
        //    end-of-recovery checkpoint, so the next crash replays less.
        if replayed {
            core.finish_incomplete_splits()?;
            core.checkpoint()?;
        } else if new || orphans_removed {
            // A new directory's first checkpoint: a control file, so that
            // `RELSIZES` is written now and the first run's relations are
            // checked after a crash in that run too. Or orphans' drop
            // records to put behind the redo point (`remove_orphans`).
            core.checkpoint()?;
        }
        // After a crash the files may hold writes the dead run never
        // fsynced (PostgreSQL's SyncDataDirectory): sync them before their
        // lengths are recorded.
        if !clean && !new {
            core.sync_relation_files()?;
        }
        // Recorded once there is a control file (a checkpoint was taken), so
        // that a directory with `RELSIZES` always has one.
        let checkpointed = wal::control::read_control_with(&*fs, &core.dir)
            .map_err(EngineError::wal("could not read the control file"))?
            .is_some();
        if checkpointed {
            core.record_sizes()?;
        }
        // 8. The checkpointer (the bgwriter runs with the pool).
        if core.options.checkpointer {
            // wal's thread with the engine's checkpoint: the transaction
            // manager's (commit gate, next xid taken after the redo point),
            // one at a time under the database's checkpoint mutex.
            let (tm, serial) = (core.tm.clone(), core.checkpoint_serial.clone());
            let config = wal::CheckpointerConfig {
                interval: core.options.checkpoint_interval,
                max_wal_bytes: core.options.checkpoint_max_wal_bytes,
                ..Default::default()
            };
            core.checkpointer = Some(wal::Checkpointer::start(
                core.wal.clone(),
                config,
                Box::new(move || {
                    let _one = serial.lock();
                    tm.checkpoint().map(drop).map_err(Into::into)
                }),
            ));
        }
        // 9. The autovacuum worker.
        if core.options.autovacuum {
            core.autovacuum = Some(Autovacuum::start(WorkerContext {
                shared: core.autovac.clone(),
                catalog: core.catalog.clone(),
                tm: core.tm.clone(),
                snapshots: core.snapshots.clone(),
            })?);
        }
        // 10. The open succeeded: a crash of this run is a crash.
        datadir::remove_clean_marker(&core.dir)?;
        if from_backup {
            crate::backup_label::remove_label(&core.dir)?;
        }
        Ok(Database {
            shared: Arc::new(Shared {
                core: Some(core),
                temp_dir: None,
            }),
        })
    }

    /// The shared state, if this is its only handle (just opened).
    pub(crate) fn shared_mut(&mut self) -> Option<&mut Shared> {
        Arc::get_mut(&mut self.shared)
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    #[inline]
    pub(crate) fn core(&self) -> &Core {
        self.shared
            .core
            .as_ref()
            .expect("a Database is open while a handle exists")
    }

    /// Shut down (see "Closing" in the crate README): stop the checkpointer,
    /// write every dirty page (unlogged ones too), take a shutdown
    /// checkpoint, close the WAL, release the lock. Dropping the last handle
    /// does the same and ignores errors.
    ///
    /// Only the last handle can close: while clones, transactions or
    /// iterators are still alive this handle is dropped and
    /// [`EngineError::StillInUse`] returned; the database then closes when
    /// the last of them goes.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.shared) {
            Ok(mut shared) => match shared.core.take() {
                Some(core) => core.shutdown(),
                None => Ok(()),
            },
            Err(shared) => Err(EngineError::StillInUse {
                path: shared
                    .core
                    .as_ref()
                    .map(|c| c.dir.clone())
                    .unwrap_or_default(),
                others: Arc::strong_count(&shared) - 1,
            }),
        }
    }

    /// Handles to this database alive now (clones, transactions and
    /// iterators), this one included.
    pub fn handle_count(&self) -> usize {
        Arc::strong_count(&self.shared)
    }
}

impl Core {
    fn shutdown(self) -> Result<()> {
        let Core {
            autovacuum,
            checkpointer,
            dir,
            catalog,
            catalog_heap,
            checkpoint_serial,
            tm,
            pool,
            wal,
            lock,
            ..
        } = self;
        // 1. Stop the autovacuum worker (a vacuum in progress finishes) and
        //    the checkpointer (waits for a round in progress).
        drop(autovacuum);
        drop(checkpointer);
        // 2. Every dirty page, unlogged included, then 3. the checkpoint.
        let mut result = pool.flush_all(true).map(drop).map_err(EngineError::buffer(
            "shutdown: could not write the dirty pages",
        ));
        if result.is_ok() {
            let _one = checkpoint_serial.lock();
            result = tm.checkpoint().map(drop);
        }
        // The lengths now are durable (every page written and synced).
        let sizes = result
            .is_ok()
            .then(|| current_sizes(&catalog.read(), &pool))
            .transpose();
        // 4. Everything that holds the WAL goes, then the WAL closes.
        drop(catalog);
        drop(catalog_heap);
        drop(tm);
        drop(pool);
        let closed = match Arc::try_unwrap(wal) {
            Ok(w) => w.close(),
            Err(w) => w.flush_all(),
        }
        .map_err(EngineError::wal("shutdown: could not close the WAL"));
        let mut result = result.and(closed);
        // 5. Everything is on disk: record the lengths, mark the shutdown
        //    clean (unlogged tables keep their rows), then the lock goes last.
        if result.is_ok() {
            result = sizes.and_then(|sizes| {
                datadir::write_relsizes(&dir, &sizes.unwrap_or_default())?;
                datadir::write_clean_marker(&dir)
            });
        }
        drop(lock);
        result
    }
}

impl Database {
    // ---- the catalog ----
    //
    // Every catalog change commits synchronously, whatever the database's
    // commit mode: a table or index that `create_*` or `drop_*` reported is
    // durable when the call returns, so a crash under asynchronous commit
    // cannot lose a table while its file, or rows committed into it later
    // and flushed, survive.

    /// Create a (logged) table; the change commits before this returns
    /// (catalog rule 1).
    pub fn create_table(&self, name: &str, columns: Vec<Column>) -> Result<TableInfo> {
        self.create_table_with(name, columns, TableOptions::default())
    }

    /// Create a table with `options`: an unlogged table (`logged: false`), a
    /// primary key ([`TableOptions::primary_key`]; a nullable, unknown or
    /// repeated column, or more than 8, is [`EngineError::InvalidSchema`]).
    pub fn create_table_with(
        &self,
        name: &str,
        columns: Vec<Column>,
        options: TableOptions,
    ) -> Result<TableInfo> {
        check_table(name, &columns)?;
        crate::backup_label::refuse_inside(|| format!("create table {name:?}"))?;
        let pk_columns = primary_key_columns(name, &columns, &options.primary_key)?;
        let pk_name = format!("{name}_pkey");
        if pk_columns.is_some() {
            check_name("index", &pk_name, &pk_name)?;
        }
        let c = self.core();
        let _ddl = c.ddl.lock();
        let (meta_tid, rel) = c.name_free(name)?;
        if pk_columns.is_some() {
            c.name_free(&pk_name)?;
        }
        let info = TableInfo {
            name: name.to_string(),
            rel: RelId(rel),
            columns,
            logged: options.logged,
        };
        let next_rel = rel + 1 + u32::from(pk_columns.is_some());
        let txn = c.tm.begin()?;
        let snap = txn.snapshot();
        let what = || format!("create table {name:?}: catalog");
        let meta = CatalogEntry::Meta { next_rel }.encode()?;
        // Never reuse `rel` (or the primary key's) in this run, whatever
        // happens next.
        c.catalog.write().next_rel = next_rel;
        let new_meta = c
            .catalog_heap
            .update(txn.xid(), &snap, &*c.tm, meta_tid, &meta)
            .map_err(EngineError::heap(what()))?;
        let row = CatalogEntry::Table(info.clone()).encode()?;
        let catalog_tid = c
            .catalog_heap
            .insert(txn.xid(), &row)
            .map_err(EngineError::heap(what()))?;
        let heap = c.open_heap(info.rel, name, info.logged)?;
        let handle = TableHandle {
            info: Schema::new(info.clone(), catalog_tid),
            heap,
            dropped: DropLock::new(),
            indexes: RwLock::new(Vec::new()),
            vacuum: Mutex::new(()),
            counters: TableCounters::default(),
        };
        let pk = match pk_columns {
            None => None,
            Some(cols) => {
                let ix_info = IndexInfo {
                    name: pk_name.clone(),
                    rel: RelId(rel + 1),
                    table: info.rel,
                    columns: cols,
                    unique: true,
                    primary: true,
                };
                let ix_tid = c
                    .catalog_heap
                    .insert(txn.xid(), &CatalogEntry::Index(ix_info.clone()).encode()?)
                    .map_err(EngineError::heap(what()))?;
                match c.open_index(&handle, ix_info.clone(), ix_tid, true) {
                    Ok(ix) => Some(ix),
                    Err(e) => {
                        drop(txn); // aborts: the catalog rows never become visible
                        let _ = c.pool.drop_relation(ix_info.rel);
                        c.catalog_changed_aborted(3);
                        return Err(e);
                    }
                }
            }
        };
        txn.commit_with(CommitMode::Synchronous)?;
        if info.logged {
            c.record_add(info.rel, RecordedKind::Table, name)?;
            if pk.is_some() {
                c.record_add(RelId(rel + 1), RecordedKind::Index, &pk_name)?;
            }
        }
        let has_pk = pk.is_some();
        if let Some(ix) = &pk {
            handle.indexes.write().push(ix.clone());
        }
        let mut st = c.catalog.write();
        st.meta_tid = Some(new_meta);
        st.tables.insert(name.to_string(), Arc::new(handle));
        if let Some(ix) = pk {
            st.indexes.insert(pk_name, ix);
        }
        drop(st);
        // A row in (two with a primary key), and the meta row's old version dead.
        c.catalog_changed(Pending {
            inserted: 1 + u64::from(has_pk),
            updated: 1,
            deleted: 0,
        });
        Ok(info)
    }

    /// Drop a table and its indexes: their catalog rows are deleted
    /// (committed before this returns), then their buffers are invalidated
    /// and their files removed. Waits for operations on the table in
    /// progress; later ones (also in transactions begun earlier) get
    /// [`EngineError::UnknownTable`].
    pub fn drop_table(&self, name: &str) -> Result<()> {
        crate::backup_label::refuse_inside(|| format!("drop table {name:?}"))?;
        let c = self.core();
        let _ddl = c.ddl.lock();
        let t = c.table(name)?;
        crate::loading::check(&t)?;
        let mut dropped = t.dropped.write(name, || format!("drop table {name:?}"))?;
        let indexes: Vec<Arc<IndexHandle>> = t.indexes.read().clone();
        let txn = c.tm.begin()?;
        let snap = txn.snapshot();
        let what = || format!("drop table {name:?}: catalog");
        c.catalog_heap
            .delete(txn.xid(), &snap, &*c.tm, t.info.catalog_tid())
            .map_err(EngineError::heap(what()))?;
        for ix in &indexes {
            c.catalog_heap
                .delete(txn.xid(), &snap, &*c.tm, ix.catalog_tid)
                .map_err(EngineError::heap(what()))?;
        }
        let invalid: Vec<InvalidIndex> = c
            .catalog
            .read()
            .invalid_indexes
            .values()
            .filter(|i| i.info.table == t.info.rel)
            .cloned()
            .collect();
        for ix in &invalid {
            c.catalog_heap
                .delete(txn.xid(), &snap, &*c.tm, ix.catalog_tid)
                .map_err(EngineError::heap(what()))?;
        }
        let rels: Vec<RelId> = indexes
            .iter()
            .map(|ix| ix.info.rel)
            .chain(invalid.iter().map(|ix| ix.info.rel))
            .chain([t.info.rel])
            .collect();
        c.record_remove(&rels)?;
        txn.commit_with(CommitMode::Synchronous)?;
        *dropped = true;
        {
            let mut st = c.catalog.write();
            st.tables.remove(name);
            for ix in &indexes {
                ix.dropped.store(true, Ordering::Release);
                st.indexes.remove(&ix.info.name);
            }
            for ix in &invalid {
                st.invalid_indexes.remove(&ix.info.name);
            }
        }
        t.indexes.write().clear();
        drop(dropped);
        c.catalog_changed(Pending {
            inserted: 0,
            updated: 0,
            deleted: 1 + (indexes.len() + invalid.len()) as u64,
        });
        // Durable before the files go: redo forgives the relations' missing
        // pages when it replays this (see `invalid_pages`).
        log_drop(&c.wal, &rels)?;
        for rel in rels {
            c.pool
                .drop_relation(rel)
                .map_err(EngineError::buffer(format!(
                    "drop table {name:?}: could not remove the files of {rel}"
                )))?;
        }
        Ok(())
    }

    /// Create an index on one column of `table` (`CREATE [UNIQUE] INDEX`):
    /// [`Database::create_index_on`] with one column.
    pub fn create_index(
        &self,
        name: &str,
        table: &str,
        column: &str,
        unique: bool,
    ) -> Result<IndexInfo> {
        self.create_index_on(name, table, &[column], unique)
    }

    /// Create an index on 1 to 8 columns of `table`, in key order (`CREATE
    /// [UNIQUE] INDEX name ON table (a, b, ...)`), built over the rows
    /// already there, in one transaction that commits before this returns.
    /// The table is locked for the build (operations on it wait). A unique
    /// index over rows with a live duplicate key is
    /// [`EngineError::UniqueViolation`] (or [`EngineError::UniqueConflict`]
    /// if a transaction in progress holds the duplicate), and nothing is
    /// created. An index over one `I64` or `Bytes` column does not index
    /// NULLs; every other index does (see "Indexes" in the crate README). An index on an
    /// unlogged table is unlogged too. No column, more than 8, or a column
    /// named twice is [`EngineError::InvalidSchema`].
    pub fn create_index_on(
        &self,
        name: &str,
        table: &str,
        columns: &[&str],
        unique: bool,
    ) -> Result<IndexInfo> {
        check_name("index", name, name)?;
        crate::backup_label::refuse_inside(|| format!("create index {name:?}"))?;
        let c = self.core();
        let _ddl = c.ddl.lock();
        let t = c.table(table)?;
        let col = index_columns(name, &t.info, columns)?;
        let (meta_tid, rel) = c.name_free(name)?;
        crate::loading::check(&t)?;
        let dropped = t
            .dropped
            .write(table, || format!("create index {name:?}"))?;
        if *dropped {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        let info = IndexInfo {
            name: name.to_string(),
            rel: RelId(rel),
            table: t.info.rel,
            columns: col,
            unique,
            primary: false,
        };
        let txn = c.tm.begin()?;
        let snap = txn.snapshot();
        let what = || format!("create index {name:?}: catalog");
        let meta = CatalogEntry::Meta { next_rel: rel + 1 }.encode()?;
        c.catalog.write().next_rel = rel + 1;
        let new_meta = c
            .catalog_heap
            .update(txn.xid(), &snap, &*c.tm, meta_tid, &meta)
            .map_err(EngineError::heap(what()))?;
        let catalog_tid = c
            .catalog_heap
            .insert(txn.xid(), &CatalogEntry::Index(info.clone()).encode()?)
            .map_err(EngineError::heap(what()))?;
        let built = c
            .open_index(&t, info.clone(), catalog_tid, true)
            .and_then(|ix| {
                let nblocks = t.heap.nblocks().map_err(EngineError::heap(format!(
                    "create index {name:?}: reading table {table:?}"
                )))?;
                let ring = if nblocks as usize > c.pool.size() / 4 {
                    c.pool.ring(RingKind::BulkRead)
                } else {
                    None
                };
                let horizon = c.vacuum_horizon();
                index::build(&t, &ix, txn.xid(), horizon, &*c.tm, ring)?;
                Ok(ix)
            });
        let ix = match built {
            Ok(ix) => ix,
            Err(e) => {
                drop(txn); // aborts: the catalog rows never become visible
                let _ = c.pool.drop_relation(info.rel);
                // Its new meta version and index row are dead.
                c.catalog_changed_aborted(2);
                return Err(e);
            }
        };
        txn.commit_with(CommitMode::Synchronous)?;
        if t.info.logged {
            c.record_add(info.rel, RecordedKind::Index, name)?;
        }
        t.indexes.write().push(ix.clone());
        let mut st = c.catalog.write();
        st.meta_tid = Some(new_meta);
        st.indexes.insert(name.to_string(), ix);
        drop(st);
        drop(dropped);
        c.catalog_changed(Pending {
            inserted: 1,
            updated: 1,
            deleted: 0,
        });
        Ok(info)
    }

    /// Drop an index: its catalog row is deleted (committed before this
    /// returns), then its buffers are invalidated and its file removed.
    /// Waits for operations on its table in progress.
    /// An index opened invalid (its file missing or damaged) is dropped
    /// the same way.
    pub fn drop_index(&self, name: &str) -> Result<()> {
        crate::backup_label::refuse_inside(|| format!("drop index {name:?}"))?;
        let c = self.core();
        let _ddl = c.ddl.lock();
        let invalid = c.catalog.read().invalid_indexes.get(name).cloned();
        if let Some(ix) = invalid {
            return c.drop_invalid_index(ix);
        }
        let ix = c.index(name)?;
        let t = c.table(&ix.table)?;
        crate::loading::check(&t)?;
        let dropped = t
            .dropped
            .write(&ix.table, || format!("drop index {name:?}"))?;
        let txn = c.tm.begin()?;
        let snap = txn.snapshot();
        c.catalog_heap
            .delete(txn.xid(), &snap, &*c.tm, ix.catalog_tid)
            .map_err(EngineError::heap(format!("drop index {name:?}: catalog")))?;
        c.record_remove(&[ix.info.rel])?;
        txn.commit_with(CommitMode::Synchronous)?;
        ix.dropped.store(true, Ordering::Release);
        t.indexes.write().retain(|i| !Arc::ptr_eq(i, &ix));
        c.catalog.write().indexes.remove(name);
        drop(dropped);
        c.catalog_changed(Pending {
            inserted: 0,
            updated: 0,
            deleted: 1,
        });
        log_drop(&c.wal, &[ix.info.rel])?;
        c.pool
            .drop_relation(ix.info.rel)
            .map_err(EngineError::buffer(format!(
                "drop index {name:?}: could not remove its file"
            )))
    }

    /// The definition of table `name`.
    pub fn table(&self, name: &str) -> Result<TableInfo> {
        Ok(self.core().table(name)?.info.clone())
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<TableInfo> {
        let mut v: Vec<TableInfo> = self
            .core()
            .catalog
            .read()
            .tables
            .values()
            .map(|t| t.info.clone())
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Every index, by name.
    pub fn indexes(&self) -> Vec<IndexInfo> {
        let mut v: Vec<IndexInfo> = self
            .core()
            .catalog
            .read()
            .indexes
            .values()
            .map(|ix| ix.info.clone())
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Indexes opened invalid because their file was missing or damaged
    /// (PostgreSQL's `indisvalid = false`), by name, each with the reason
    /// (naming the file). Reads do not use them and writes do not maintain
    /// them; [`drop_index`](Self::drop_index) removes one, and
    /// [`create_index`](Self::create_index) of the same definition rebuilds
    /// it. Not listed by [`indexes`](Self::indexes).
    pub fn invalid_indexes(&self) -> Vec<(IndexInfo, String)> {
        let mut v: Vec<(IndexInfo, String)> = self
            .core()
            .catalog
            .read()
            .invalid_indexes
            .values()
            .map(|ix| (ix.info.clone(), ix.reason.clone()))
            .collect();
        v.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        v
    }

    // ---- bulk load and vacuum ----

    /// Vacuum `table` and its indexes through the vacuum ring: tuples
    /// deleted (or replaced) by transactions that committed before every
    /// live snapshot's xmin, and tuples of aborted transactions, are removed
    /// and their space and line pointers reused.
    ///
    /// PostgreSQL's lazy vacuum order, one vacuum of the table at a time:
    /// 1. the horizon is fixed (oldest registered snapshot xmin or running xid);
    /// 2. heap pass 1 (`lazy_scan_heap`): every page pruned, dead versions'
    ///    pointers become `Dead`; the set of dead TIDs is returned;
    /// 3. every index drops the entries whose TID is in that set (and no
    ///    others: `is_dead = |tid| dead.contains(&tid)`, no heap reads);
    /// 4. heap pass 2 (`free_dead`): only those pointers, if still `Dead`,
    ///    become `Unused`.
    ///
    /// A tuple that becomes dead during the vacuum (a transaction rolling
    /// back between the steps) is not in the set, so its pointer and its
    /// entries both stay until the next vacuum: rollbacks never wait.
    pub fn vacuum(&self, table: &str) -> Result<VacuumReport> {
        let c = self.core();
        let t = c.table(table)?;
        crate::loading::check(&t)?;
        let guard = t.dropped.read();
        if *guard {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        let one_vacuum = t.vacuum.lock();
        vacuum_table(&t, &c.tm, &c.snapshots, &one_vacuum)
    }

    /// What the autovacuum worker has done, each table's dead-tuple count
    /// and threshold, and the last background error (`crate::autovacuum`).
    pub fn autovacuum_stats(&self) -> AutovacuumStats {
        let c = self.core();
        c.autovac.stats(&c.catalog)
    }

    /// Check every index of `table` (`btree::verify`: page order, high keys,
    /// right links, parent/child agreement, no incomplete split) against the
    /// heap: every entry points to an existing tuple with the same key, and
    /// every live row (inserter committed, no committed deleter) with a
    /// non-NULL key has its entry. Empty when clean. An entry naming a DEAD
    /// line pointer is not a violation: the tuple is gone and the pointer
    /// waits for a vacuum's index pass (a crash between a vacuum's heap pass 1
    /// and its index pass leaves such entries; the next vacuum removes them).
    /// Entries naming an unused pointer, or no pointer at all, are reported.
    /// Run it on a table no one writes meanwhile; a vacuum (autovacuum's
    /// too) may run.
    pub fn verify_indexes(&self, table: &str) -> Result<Vec<IndexViolation>> {
        let c = self.core();
        let t = c.table(table)?;
        crate::loading::check(&t)?;
        let guard = t.dropped.read();
        if *guard {
            return Err(EngineError::UnknownTable { name: table.into() });
        }
        let mut out = Vec::new();
        let indexes = t.indexes.read();
        for ix in indexes.iter() {
            let mut rows = index::heap_rows(&t, ix, &*c.tm)?;
            // Dead line pointers: their entries wait for a vacuum's index
            // pass. Listed after the rows and before the index is walked,
            // for each index: a vacuum (autovacuum runs whenever it likes)
            // that prunes a tuple after the rows were read has made its
            // pointer DEAD by now, and one whose index pass removed an entry
            // the walk still meets cannot have freed that pointer yet. Listed
            // once before all the rows, a tuple pruned in between was in
            // neither list and its entries "pointed to no heap row".
            let dead = index::dead_pointers(&t)?;
            rows.extend(dead.iter().map(|&tid| btree::HeapRow {
                key: None,
                tid,
                live: false,
            }));
            let found = ix
                .btree
                .verify(Some(&|| rows.clone()))
                .map_err(map_btree(ix, "verify"))?;
            out.extend(found.into_iter().map(|violation| IndexViolation {
                index: ix.info.name.clone(),
                violation,
            }));
        }
        Ok(out)
    }

    /// Take a checkpoint now (as the checkpointer does).
    pub fn checkpoint(&self) -> Result<CheckpointInfo<usize>> {
        self.core().checkpoint()
    }

    // ---- introspection ----

    /// One row per buffer with the relation named (pg_buffercache), and
    /// for index pages the B-tree level. The level is read from the page:
    /// each resident index page is pinned and share-locked once, through a
    /// bulk-read ring so that a page already used is not made hotter
    /// (`btree::Index::residency` does the same without the ring). A page
    /// evicted between the snapshot and the read is read back.
    pub fn buffercache(&self) -> Vec<BufferInfo> {
        let c = self.core();
        let names = c.rel_names();
        let mut ring = c.pool.ring_forced(RingKind::BulkRead, 256);
        c.pool
            .buffercache()
            .into_iter()
            .map(|row| {
                let (mut relation, mut kind, mut index_page) = (None, None, None);
                if let Some(tag) = row.tag {
                    let (n, k, _) = c.name_rel(&names, tag.rel);
                    if k == RelKind::Index {
                        index_page = c
                            .pool
                            .read_buffer(tag.relfork(), tag.block, ring.as_mut())
                            .ok()
                            .and_then(|pin| btree::page_kind(&pin.lock_shared()));
                    }
                    (relation, kind) = (Some(n), Some(k));
                }
                BufferInfo {
                    row,
                    relation,
                    kind,
                    index_page,
                }
            })
            .collect()
    }

    /// pg_buffercache_numa's totals: per NUMA node, ascending, (node,
    /// buffers, buffers holding a page), by where the kernel reports each
    /// buffer's memory (each row of [`buffercache`](Self::buffercache) carries
    /// its `row.numa_node`). Reads no page. A buffer whose memory the kernel
    /// has not given yet (never used, the pool not pre-faulted:
    /// [`Options::prefault_pool`](crate::Options#structfield.prefault_pool)
    /// is off by default) is on no node and counted in none, so the totals
    /// add up to the pool only once all of it has been used; every buffer
    /// holding a page is counted.
    pub fn buffers_per_node(&self) -> Vec<(usize, usize, usize)> {
        self.core().pool.buffercache_summary().per_node
    }

    /// Resident pages per relation fork, most first: each table and each
    /// index separately (an index row names its table).
    pub fn resident_pages(&self) -> Vec<ResidentPages> {
        let c = self.core();
        let names = c.rel_names();
        let mut v: Vec<ResidentPages> = c
            .pool
            .resident_pages()
            .into_iter()
            .map(|(rf, pages)| {
                let (name, kind, table) = c.name_rel(&names, rf.rel);
                ResidentPages {
                    rel: rf.rel,
                    fork: rf.fork,
                    name,
                    kind,
                    table,
                    pages,
                }
            })
            .collect();
        v.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.rel.cmp(&b.rel)));
        v
    }

    /// The buffer pool's counters since open (accesses, hits, reads, writes by writer, evictions).
    pub fn pool_stats(&self) -> PoolStats {
        self.core().pool.stats()
    }

    /// The pool's counters per relation since open, named, ordered by
    /// relation number: every relation whose pages were looked up, tables
    /// and indexes separately (an index row names its table). Subtract two
    /// snapshots' `counts` for a window. Lookups of relations a thread had
    /// no counter slot for are in
    /// [`pool_stats`](Self::pool_stats)`().relations_untracked`.
    pub fn relation_stats(&self) -> Vec<RelationStats> {
        let c = self.core();
        let names = c.rel_names();
        c.pool
            .stats()
            .relations
            .into_iter()
            .map(|(rel, counts)| {
                let (name, kind, table) = c.name_rel(&names, rel);
                RelationStats {
                    rel,
                    name,
                    kind,
                    table,
                    counts,
                }
            })
            .collect()
    }

    /// The WAL's counters since open (records, bytes, flushes, fsyncs).
    pub fn wal_stats(&self) -> WalStats {
        self.core().wal.stats()
    }

    /// Transactions begun, committed, aborted and retried since open.
    pub fn txn_stats(&self) -> TxnStats {
        self.core().tm.stats()
    }

    /// What recovery did when this database opened.
    pub fn recovery_stats(&self) -> RecoveryStats {
        self.core().recovery
    }

    /// Checkpoints completed by the checkpointer thread, and its last error.
    pub fn checkpointer_status(&self) -> (u64, Option<String>) {
        match &self.core().checkpointer {
            Some(c) => (c.completed(), c.last_error()),
            None => (0, None),
        }
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.core().options
    }

    /// The data directory (a temporary database's too).
    pub fn dir(&self) -> &Path {
        &self.core().dir
    }

    /// The buffer pool, for benchmarks and tests that look underneath.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.core().pool
    }

    /// The hit ratio an LRU buffer pool of 0.25x, 0.5x, 1x, 2x and 4x this
    /// one's size would have had on the accesses sampled so far
    /// (`bufmgr::mrc`); `None` if the database was opened without
    /// [`Options::miss_ratio_curve`](crate::Options).
    pub fn miss_ratio_curve(&self) -> Option<bufmgr::MissRatioCurve> {
        self.core().pool.miss_ratio_curve()
    }

    /// The WAL, for benchmarks and tests that look underneath.
    pub fn wal(&self) -> &Arc<Wal> {
        &self.core().wal
    }

    /// The transaction manager, for benchmarks and tests that look underneath.
    pub fn transaction_manager(&self) -> &Arc<TransactionManager> {
        &self.core().tm
    }
}

impl Core {
    pub fn table(&self, name: &str) -> Result<Arc<TableHandle>> {
        self.catalog
            .read()
            .tables
            .get(name)
            .cloned()
            .ok_or_else(|| EngineError::UnknownTable { name: name.into() })
    }

    pub fn index(&self, name: &str) -> Result<Arc<IndexHandle>> {
        let st = self.catalog.read();
        if let Some(ix) = st.indexes.get(name) {
            return Ok(ix.clone());
        }
        let detail = match st.invalid_indexes.get(name) {
            Some(ix) => format!(
                " (it is invalid: {}; drop it and create it again)",
                ix.reason
            ),
            None => String::new(),
        };
        Err(EngineError::UnknownIndex {
            name: name.into(),
            detail,
        })
    }

    /// Count what a committed DDL did to the catalog and, with autovacuum
    /// on, vacuum it once its dead versions pass the autovacuum threshold
    /// (autovacuum rule 5). Called under the DDL lock, after the commit: a
    /// failed vacuum is recorded in the autovacuum stats, not returned.
    pub(crate) fn catalog_changed(&self, p: Pending) {
        self.catalog_counters.add(&p, true);
        self.maybe_vacuum_catalog();
    }

    /// As [`catalog_changed`](Self::catalog_changed) for a DDL that rolled
    /// back after writing `rows` catalog versions (all dead now).
    fn catalog_changed_aborted(&self, rows: u64) {
        let p = Pending {
            inserted: rows,
            ..Pending::default()
        };
        self.catalog_counters.add(&p, false);
        self.maybe_vacuum_catalog();
    }

    fn maybe_vacuum_catalog(&self) {
        let o = &self.options;
        if !o.autovacuum {
            return;
        }
        let horizon = self.vacuum_horizon();
        let c = &self.catalog_counters;
        if !c.over(
            o.autovacuum_threshold,
            o.autovacuum_scale_factor,
            Some(horizon),
        ) {
            return;
        }
        let result = self.vacuum_catalog(horizon);
        self.autovac.catalog_vacuumed(result);
    }

    /// Vacuum the catalog heap (it has no indexes: prune, then free the
    /// dead pointers). Under the DDL lock, so no DDL holds a catalog TID
    /// the vacuum could free: live rows keep their TIDs.
    fn vacuum_catalog(&self, horizon: Xid) -> Result<()> {
        self.tm.check_writable()?;
        let dead_before = self.catalog_counters.dead.load(Ordering::Relaxed);
        let what = || "vacuum of the catalog".to_string();
        let (mut heap, dead) = self
            .catalog_heap
            .lazy_scan_heap(horizon, &*self.tm)
            .map_err(EngineError::heap(what()))?;
        let freed = self
            .catalog_heap
            .free_dead(&dead)
            .map_err(EngineError::heap(what()))?;
        heap.add_pass_two(freed);
        let report = VacuumReport {
            horizon,
            indexes: Vec::new(),
            heap,
        };
        self.catalog_counters.vacuumed(dead_before, &report);
        Ok(())
    }

    /// Check that no table or index is called `name`; the meta row's place
    /// and the next relation id.
    fn name_free(&self, name: &str) -> Result<(Tid, u32)> {
        let st = self.catalog.read();
        if st.tables.contains_key(name)
            || st.indexes.contains_key(name)
            || st.invalid_indexes.contains_key(name)
        {
            return Err(EngineError::TableExists { name: name.into() });
        }
        let meta = st.meta_tid.ok_or_else(|| EngineError::CorruptCatalog {
            detail: "no meta row".into(),
        })?;
        Ok((meta, st.next_rel))
    }

    pub(crate) fn open_heap(&self, rel: RelId, name: &str, logged: bool) -> Result<Heap> {
        Ok(
            Heap::open(self.pool.clone(), Some(self.wal.clone()), rel, logged)
                .map_err(EngineError::heap(format!("could not open table {name:?}")))?
                .with_hint_mode(self.options.hint_mode),
        )
    }

    /// Open (or, with `create`, create empty) the B-tree of index `info` of
    /// table `t`: WAL-logged if the table is, else declared unlogged to the
    /// pool and written without WAL.
    pub(crate) fn open_index(
        &self,
        t: &TableHandle,
        info: IndexInfo,
        catalog_tid: Tid,
        create: bool,
    ) -> Result<Arc<IndexHandle>> {
        let name = info.name.clone();
        let mut types = Vec::with_capacity(info.columns.len());
        for &c in &info.columns {
            let col = t
                .info
                .columns
                .get(c)
                .ok_or_else(|| EngineError::CorruptCatalog {
                    detail: format!(
                        "index {name:?}: column {c} of table {:?} does not exist",
                        t.info.name
                    ),
                })?;
            types.push(col.ty);
        }
        let key_type = index_key_type(&types).ok_or_else(|| EngineError::CorruptCatalog {
            detail: format!("index {name:?}: {} columns", types.len()),
        })?;
        let wal = t.info.logged.then(|| self.wal.clone());
        self.pool.set_unlogged(info.rel, !t.info.logged);
        let opened = if create {
            btree::Index::create_in_format(
                self.pool.clone(),
                wal,
                IndexOptions {
                    name: name.clone(),
                    rel: info.rel,
                    key_type,
                    unique: info.unique,
                },
                btree::page::Layout::Compact,
                self.options.index_deduplication,
            )
        } else {
            btree::Index::open(self.pool.clone(), wal, &name, info.rel)
        };
        let btree = opened.map_err(|source| EngineError::Index {
            what: format!("could not open index {name:?}"),
            source,
        })?;
        if btree.key_type() != key_type || btree.is_unique() != info.unique {
            return Err(EngineError::CorruptCatalog {
                detail: format!("index {name:?}: its meta page disagrees with the catalog"),
            });
        }
        Ok(Arc::new(IndexHandle {
            info,
            table: t.info.name.clone(),
            // The first column's (a tuple key prints itself).
            column_type: types[0],
            btree,
            catalog_tid,
            dropped: AtomicBool::new(false),
        }))
    }

    /// After recovery: give every logged index's interrupted splits their
    /// downlinks (`btree::Index::finish_incomplete_splits`).
    fn finish_incomplete_splits(&self) -> Result<()> {
        let indexes: Vec<Arc<IndexHandle>> =
            self.catalog.read().indexes.values().cloned().collect();
        for ix in indexes {
            ix.btree
                .finish_incomplete_splits()
                .map_err(map_btree(&ix, "finishing incomplete splits"))?;
        }
        Ok(())
    }

    /// Drop an invalid index (`Database::drop_index`; the caller holds the
    /// DDL lock).
    fn drop_invalid_index(&self, ix: InvalidIndex) -> Result<()> {
        let name = &ix.info.name;
        let txn = self.tm.begin()?;
        let snap = txn.snapshot();
        self.catalog_heap
            .delete(txn.xid(), &snap, &*self.tm, ix.catalog_tid)
            .map_err(EngineError::heap(format!("drop index {name:?}: catalog")))?;
        self.record_remove(&[ix.info.rel])?;
        txn.commit_with(CommitMode::Synchronous)?;
        self.catalog.write().invalid_indexes.remove(name);
        self.catalog_changed(Pending {
            inserted: 0,
            updated: 0,
            deleted: 1,
        });
        log_drop(&self.wal, &[ix.info.rel])?;
        self.pool
            .drop_relation(ix.info.rel)
            .map_err(EngineError::buffer(format!(
                "drop index {name:?}: could not remove its file"
            )))
    }

    /// Record every logged relation's length now (`RELSIZES` rule 1).
    fn record_sizes(&self) -> Result<()> {
        let sizes = current_sizes(&self.catalog.read(), &self.pool)?;
        datadir::write_relsizes(&self.dir, &sizes)
    }

    /// A CREATE committed: list its relation (`RELSIZES` rule 2).
    fn record_add(&self, rel: RelId, kind: RecordedKind, name: &str) -> Result<()> {
        let r = Recorded {
            rel: rel.0,
            blocks: 0,
            kind,
            name: name.to_string(),
        };
        datadir::append_relsizes(&self.dir, &[r], &[])
    }

    /// A DROP is about to commit: take its relations out (rule 2).
    fn record_remove(&self, rels: &[RelId]) -> Result<()> {
        let ids: Vec<u32> = rels.iter().map(|r| r.0).collect();
        datadir::append_relsizes(&self.dir, &[], &ids)
    }

    /// fsync the clog, the catalog and every logged relation's file.
    fn sync_relation_files(&self) -> Result<()> {
        for r in current_sizes(&self.catalog.read(), &self.pool)? {
            let rf = RelFork::main(RelId(r.rel));
            self.pool
                .storage()
                .sync(rf)
                .map_err(EngineError::buffer(format!(
                    "syncing {} {:?} after a crash",
                    r.kind.word(),
                    r.name
                )))?;
        }
        Ok(())
    }

    pub fn checkpoint(&self) -> Result<CheckpointInfo<usize>> {
        crate::backup_label::refuse_inside(|| "a checkpoint".into())?;
        let _one = self.checkpoint_serial.lock();
        self.tm.checkpoint()
    }

    /// Register a snapshot's xmin (taken under the registry's lock, so a
    /// vacuum computing its horizon never misses it); returns the snapshot
    /// and the registry shard to release it in.
    pub fn register_snapshot(
        &self,
        take: impl FnOnce() -> heap::Snapshot,
    ) -> (heap::Snapshot, usize) {
        self.snapshots.register(take)
    }

    /// Register `xmin` once more, for an iterator that keeps a snapshot
    /// alive past its transaction (the caller holds a registration already).
    pub fn register_snapshot_again(&self, xmin: Xid) -> usize {
        self.snapshots.register_again(xmin)
    }

    pub fn release_snapshot(&self, xmin: Xid, shard: usize) {
        self.snapshots.release(xmin, shard)
    }

    /// The oldest xid a live snapshot may treat as running: every snapshot
    /// taken later has an xmin at least the oldest running xid now.
    pub fn vacuum_horizon(&self) -> Xid {
        self.snapshots.horizon(|| self.tm.oldest_running())
    }

    /// Relation id -> (name, kind, the table of an index).
    fn rel_names(&self) -> RelNames {
        let st = self.catalog.read();
        let mut m: RelNames = st
            .tables
            .values()
            .map(|t| (t.info.rel, (t.info.name.clone(), RelKind::Table, None)))
            .collect();
        for i in st.indexes.values() {
            m.insert(
                i.info.rel,
                (i.info.name.clone(), RelKind::Index, Some(i.table.clone())),
            );
        }
        for i in st.invalid_indexes.values() {
            m.insert(
                i.info.rel,
                (i.info.name.clone(), RelKind::Index, Some(i.table.clone())),
            );
        }
        m.insert(CLOG_REL, ("clog".into(), RelKind::Clog, None));
        m.insert(CATALOG_REL, ("catalog".into(), RelKind::Catalog, None));
        m
    }

    fn name_rel(&self, names: &RelNames, rel: RelId) -> (String, RelKind, Option<String>) {
        names
            .get(&rel)
            .cloned()
            .unwrap_or_else(|| (rel.to_string(), RelKind::Unknown, None))
    }
}

type RelNames = HashMap<RelId, (String, RelKind, Option<String>)>;

/// The clog, the catalog and every logged table and valid index with its
/// file's length now.
pub(crate) fn current_sizes(st: &CatalogState, pool: &BufferPool) -> Result<Vec<Recorded>> {
    let mut rels: Vec<(RelId, RecordedKind, String)> = vec![
        (CLOG_REL, RecordedKind::Clog, "clog".into()),
        (CATALOG_REL, RecordedKind::Catalog, "catalog".into()),
    ];
    for t in st.tables.values().filter(|t| t.info.logged) {
        rels.push((t.info.rel, RecordedKind::Table, t.info.name.clone()));
        for ix in t.indexes.read().iter() {
            rels.push((ix.info.rel, RecordedKind::Index, ix.info.name.clone()));
        }
    }
    rels.sort_by_key(|r| r.0);
    rels.into_iter()
        .map(|(rel, kind, name)| {
            let blocks = pool
                .nblocks(RelFork::main(rel))
                .map_err(EngineError::buffer(format!(
                    "recording the length of {} {name:?}",
                    kind.word()
                )))?;
            Ok(Recorded {
                rel: rel.0,
                blocks,
                kind,
                name,
            })
        })
        .collect()
}

/// How errors name a recorded relation.
fn recorded_what(r: &Recorded) -> String {
    let rel = RelId(r.rel);
    match r.kind {
        RecordedKind::Clog => format!("the commit log ({rel})"),
        RecordedKind::Catalog => format!("the catalog ({rel})"),
        kind => format!("{} {:?} ({rel})", kind.word(), r.name),
    }
}

/// `RELSIZES` rule 3, before recovery: every recorded file is there and at
/// least as long as recorded. A damaged index is returned (rel -> why), to
/// be opened invalid; any other damaged file is an error naming it. Also
/// returns each recorded file's length in blocks, for
/// [`check_durable_lengths`] once redo has read the checkpoint's lengths.
#[allow(clippy::type_complexity)]
fn check_recorded(
    storage: &dyn StorageBackend,
    recorded: &[Recorded],
) -> Result<(HashMap<RelId, String>, HashMap<RelId, BlockNumber>)> {
    let mut damaged = HashMap::new();
    let mut lengths = HashMap::new();
    for r in recorded {
        let rel = RelId(r.rel);
        let rf = RelFork::main(rel);
        let path = storage.path(rf);
        let what = recorded_what(r);
        let exists = storage
            .exists(rf)
            .map_err(EngineError::buffer(format!("checking the file of {what}")))?;
        let problem = if !exists {
            Some(format!(
                "its file {} is missing (recorded with {} blocks)",
                path.display(),
                r.blocks
            ))
        } else {
            let n = storage
                .nblocks(rf)
                .map_err(EngineError::buffer(format!("checking the file of {what}")))?;
            lengths.insert(rel, n);
            (n < r.blocks).then(|| {
                format!(
                    "its file {} has {n} blocks, {} were recorded: it was truncated",
                    path.display(),
                    r.blocks
                )
            })
        };
        let Some(problem) = problem else { continue };
        damaged_file(
            r,
            path,
            problem,
            &format!(
                "lengths from {}, written at the last clean close or open",
                datadir::RELSIZES_FILE
            ),
            "while the database was closed",
            &mut damaged,
        )?;
    }
    Ok((damaged, lengths))
}

/// The forks whose pages at or beyond their durable length are checked by
/// [`page_beyond_durable_damage`]: the recorded tables and the catalog,
/// once a checkpoint has given a redo point (`redo` is 0 before any).
fn beyond_durable_checked(
    recorded: Option<&[Recorded]>,
    redo: wal::Lsn,
) -> HashMap<RelFork, &Recorded> {
    if redo.0 == 0 {
        return HashMap::new();
    }
    recorded
        .unwrap_or_default()
        .iter()
        .filter(|r| matches!(r.kind, RecordedKind::Table | RecordedKind::Catalog))
        .map(|r| (RelFork::main(RelId(r.rel)), r))
        .collect()
}

/// After redo, a page of a recorded table (or the catalog) at or beyond
/// its durable length, with its LSN, as the open's settling pass reads it.
/// Such a block was added after the checkpoint's fsync began, so it is
/// blank (LSN 0) or holds changes logged after the redo point `redo`, which
/// redo replayed, and no later than the WAL's `end` (a page reaches the
/// disk only once the WAL up to its LSN is flushed; whatever this open
/// logged itself is below `end`). One with an older LSN is a stale page
/// the file gained (with checksums off nothing else catches a copy of an
/// older page appended to the file: its rows came back); one past the end
/// proves that flushed WAL is gone (a segment's tail zeroed from a record
/// boundary on reads as a clean end, wal README "Known limits", and the
/// open went on without the acknowledged commits after it, handing their
/// xids out again). Either is `CorruptDataDir` naming the file.
fn page_beyond_durable_damage(
    pool: &BufferPool,
    r: &Recorded,
    rf: RelFork,
    block: BlockNumber,
    lsn: u64,
    redo: wal::Lsn,
    end: wal::Lsn,
) -> Option<EngineError> {
    let path = pool.storage().path(rf);
    let detail = if lsn > end.0 {
        format!(
            "{}: block {block} of its file {} holds a change logged up to {}, but the WAL \
             ends at {end}: WAL that was flushed is gone (a segment cut or zeroed); restore \
             the WAL from a backup",
            recorded_what(r),
            path.display(),
            wal::Lsn(lsn),
        )
    } else if lsn != 0 && lsn < redo.0 {
        // None known: every block was written after the last checkpoint's
        // fsync (the pool's rule too).
        let from = pool.durable_length(rf).unwrap_or(0);
        format!(
            "{}: block {block} of its file {} lies beyond the {from} blocks the last \
             checkpoint made durable, yet holds a change from {} before that checkpoint's \
             redo point {redo}: a stale page the file gained after the crash; restore it \
             from a backup",
            recorded_what(r),
            path.display(),
            wal::Lsn(lsn),
        )
    } else {
        return None;
    };
    Some(EngineError::CorruptDataDir { path, detail })
}

/// A recorded file found damaged at open (`problem`, judged by lengths from
/// `source`, damaged `when`): an index goes into `damaged`, to be opened
/// invalid; anything else fails the open with `CorruptDataDir` naming it.
fn damaged_file(
    r: &Recorded,
    path: PathBuf,
    problem: String,
    source: &str,
    when: &str,
    damaged: &mut HashMap<RelId, String>,
) -> Result<()> {
    if r.kind == RecordedKind::Index {
        damaged.insert(RelId(r.rel), problem);
        return Ok(());
    }
    Err(EngineError::CorruptDataDir {
        path,
        detail: format!(
            "{}: {problem} ({source}); it was damaged {when}: restore it from a backup",
            recorded_what(r)
        ),
    })
}

/// After redo, before anything reads or fsyncs: every recorded file had,
/// when the open began (`before`), at least the blocks the checkpoints
/// replayed had made durable (their `Storage` records; `RELSIZES` is only
/// a lower bound written at opens and clean closes, and a table grown
/// since is recorded shorter). A logged relation's file never shrinks, so
/// one shorter lost blocks whose rows no WAL record after the redo point
/// rebuilds: an error naming the file, or for an index, opened invalid.
fn check_durable_lengths(
    pool: &BufferPool,
    recorded: &[Recorded],
    before: &HashMap<RelId, BlockNumber>,
    damaged: &mut HashMap<RelId, String>,
) -> Result<()> {
    for r in recorded {
        let rel = RelId(r.rel);
        let rf = RelFork::main(rel);
        let (Some(&n), Some(durable)) = (before.get(&rel), pool.durable_length(rf)) else {
            continue;
        };
        if n >= durable || damaged.contains_key(&rel) {
            continue;
        }
        let path = pool.storage().path(rf);
        let problem = format!(
            "its file {} had {n} blocks, but a checkpoint had made {durable} durable: it was \
             truncated",
            path.display()
        );
        damaged_file(
            r,
            path,
            problem,
            "lengths from the WAL's last checkpoint",
            "after the crash",
            damaged,
        )?;
    }
    Ok(())
}
