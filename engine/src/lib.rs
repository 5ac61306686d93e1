#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod alter;
mod autovacuum;
mod backup;
mod backup_label;
mod bulk;
mod catalog;
mod column_type;
mod database;
/// The data directory's files (`VERSION`, `LOCK`, `RELSIZES`). Public only
/// for the decoder fuzz targets and tests outside this crate, which feed it
/// damaged bytes; not part of the API.
#[doc(hidden)]
pub mod datadir;
mod drop_lock;
mod durable;
mod error;
mod handle;
mod index;
mod invalid_pages;
mod keys;
mod loading;
mod options;
mod owned_row;
mod recovery;
mod reserved;
mod retry;
mod row;
mod schema;
#[cfg(feature = "testing")]
pub mod soak;
mod stats;
mod table_def;
mod temporary;
mod transaction;
mod txn;
mod vacuum;
mod value;

pub use autovacuum::{AutovacuumError, AutovacuumStats, TableAutovacuum};
pub use backup::{BackupProgress, REREADS as BACKUP_REREADS};
pub use backup_label::BACKUP_LABEL_FILE;
pub use bulk::BulkProgress;
pub use catalog::{IndexInfo, MAX_COLUMNS, MAX_NAME_LEN, RelKind};
pub use database::{
    BufferInfo, Database, IndexViolation, RelationStats, ResidentPages, TableOptions,
};
pub use error::{EngineError, ErrorKind, Result};
pub use handle::{Index, IndexRef, Table, TableRef};
pub use keys::{IntoKey, KeyRange};
pub use options::{
    DEFAULT_RING_KIB, MIN_POOL_BUFFERS, Options, Partitions, StorageWrapper, parse_evictor,
};
pub use owned_row::OwnedRow;
pub use recovery::{RecoveryStats, recover, recover_from};
pub use reserved::{CATALOG_REL, CLOG_REL, FIRST_USER_REL};
pub use retry::{Decision, RetryableError};
pub use row::{RowId, RowRef};
pub use table_def::{Col, RowColumn, TableInfo};
pub use transaction::{IndexRange, RowIter, ScanSummary, Transaction};
pub use txn::clog::{CLOG_ZEROPAGE, Clog, ClogStatus, XIDS_PER_PAGE};
pub use txn::snapshot::RunningSet;
/// The transaction manager's own transaction (an xid, its commit or abort;
/// no snapshot registration, no rows), which [`TransactionManager::begin`]
/// returns; a database's transactions are [`Transaction`].
pub use txn::xact::Transaction as XactTransaction;
pub use txn::xact::{
    CommitMode, TransactionManager, TxnStats, XactRecord, next_xid_hint, redo_xact,
};
pub use vacuum::VacuumReport;
pub use value::{Column, ColumnType, Row, Value};

pub use btree::{BtreeError, PageKind, VacuumStats as IndexVacuumStats, Violation};
/// Re-exported so users need not depend on the lower crates for the types
/// the API takes and returns.
pub use bufmgr::{
    BgWriterConfig, BlockNumber, BufferPool, BufferRow, Error as BufferError, Evictor, Fork,
    IoMode, MissRatioCurve, MrcConfig, MrcPoint, PoolStats, RelId, RingSizes, StorageBackend,
    SweepBatch, Topology,
};
pub use heap::{
    HeapError, HintMode, RingChoice, ScanOptions, Snapshot, Tid, VacuumStats as HeapVacuumStats,
    XidStatus,
};
/// The simulated disk `Options::simulated_disk` takes (`testing` feature).
#[cfg(feature = "testing")]
pub use wal::sim_disk::SimDisk;
pub use wal::{
    CheckpointInfo, FileSystem, ForcedFullPageWrites, Lsn, Record, Wal, WalError, WalStats, Xid,
};
