#![doc = include_str!("../README.md")]

pub mod autovacuum;
pub mod catalog;
pub mod database;
pub mod datadir;
pub mod durable;
pub mod error;
pub mod handle;
mod index;
mod invalid_pages;
pub mod keys;
pub mod options;
pub mod recovery;
mod registry;
pub mod reserved;
pub mod row;
pub mod soak;
pub mod transaction;
pub mod txn;
pub mod value;

pub use autovacuum::{AutovacuumError, AutovacuumStats, TableAutovacuum};
pub use catalog::{IndexInfo, RelKind, TableInfo};
pub use database::{
    BufferInfo, BulkProgress, Database, IndexViolation, ResidentPages, RowId, TableOptions,
    VacuumReport,
};
pub use error::{EngineError, ErrorKind, Result};
pub use handle::{Col, Index, IndexRef, Table, TableRef};
pub use keys::{IntoKey, KeyRange};
pub use options::{Options, Partitions, parse_evictor};
pub use recovery::{RecoveryStats, recover, recover_from};
pub use reserved::{CATALOG_REL, CLOG_REL, FIRST_USER_REL};
pub use row::RowRef;
pub use transaction::{IndexRange, RowIter, ScanSummary, Transaction};
pub use txn::clog::{Clog, ClogStatus, XIDS_PER_PAGE};
pub use txn::snapshot::RunningSet;
pub use txn::xact::{
    CommitMode, TransactionManager, TxnStats, XactRecord, next_xid_hint, redo_xact,
};
pub use value::{Column, ColumnType, Row, Value};

pub use btree::{PageKind, VacuumStats as IndexVacuumStats, Violation};
/// Re-exported so users need not depend on the lower crates for the types
/// the API takes and returns.
pub use bufmgr::{BgWriterConfig, Evictor, IoMode, RingSizes, SweepBatch};
pub use heap::{HintMode, RingChoice, ScanOptions};
