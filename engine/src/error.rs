//! The engine's errors, grouped by whose fault they are.
//!
//! One enum, [`EngineError`], for the whole crate. Every variant says what was
//! being done when it failed (which xid, which commit-log page, which LSN), so
//! a message read in a log points at the place to look. Errors from the buffer
//! pool and the WAL are wrapped, keeping them as the `source`. Bad input, bad
//! bytes on disk and a failing environment never panic; they come back here.
//!
//! | kind | variants |
//! |---|---|
//! | bad input | `InvalidXid`, `InvalidOption`, `NotADatabase`, `IncompatibleVersion`, `ChecksumSettingMismatch`, `UnknownTable`, `UnknownColumn`, `TableExists`, `InvalidSchema`, `WrongColumnCount`, `TypeMismatch`, `NullNotAllowed`, `RowTooLarge`, `BadRowId`, `RowNotVisible`, `UnknownIndex`, `NoIndex`, `UniqueViolation`, `KeyTooLarge`, `ReadOnlyTransaction`, `WrongColumn` |
//! | conflict (retry) | `WriteConflict`, `UniqueConflict`, `TransactionAborted`, `DatabaseInUse`, `StillInUse` |
//! | corrupt data | `MalformedXactRecord`, `CorruptRow`, `CorruptCatalog`, `CorruptDataDir` |
//! | I/O (or an earlier I/O failure) | `Buffer`, `Wal`, `Io`, `Checkpoint`, `CommitNotRecorded` |
//! | raised by a caller's redo function | `Redo` |
//! | wrapped heap / B-tree errors | `Heap`, `Index` (kind from the wrapped error) |

use std::path::PathBuf;

use heap::Tid;
use wal::Lsn;

use crate::txn::Xid;
use crate::value::ColumnType;

/// Result type of the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Whose fault an error is, so callers can decide what to do about it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ErrorKind {
    /// The caller asked for something invalid.
    BadInput,
    /// Bytes on disk (WAL or pages) are not what was written.
    CorruptData,
    /// The operating system refused an operation, or an earlier one failed.
    Io,
    /// A resource ran out (every buffer of the pool pinned).
    ResourceExhausted,
    /// Another transaction or process got there first: retry (a write
    /// conflict), or wait for the other user (a database in use).
    Conflict,
}

/// An error from the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    // ---- bad input ----
    /// An xid that cannot name a transaction here (0, 1, or beyond the
    /// largest the commit log can address).
    #[error("invalid transaction id {xid}: {detail}")]
    InvalidXid { xid: Xid, detail: String },

    // ---- corrupt data ----
    /// An Xact record whose info byte or payload is not one this engine writes.
    #[error("malformed transaction record at {lsn}: {detail}")]
    MalformedXactRecord { lsn: Lsn, detail: String },

    // ---- I/O (wrapped) ----
    /// The buffer pool failed while the engine was doing `what`.
    #[error("{what}: {source}")]
    Buffer {
        what: String,
        #[source]
        source: bufmgr::Error,
    },

    /// The WAL failed while the engine was doing `what`.
    #[error("{what}: {source}")]
    Wal {
        what: String,
        #[source]
        source: wal::WalError,
    },

    /// A redo function handed in by the caller failed on the record at `lsn`.
    #[error("redo of the {kind:?} record at {lsn} failed: {source}")]
    Redo {
        lsn: Lsn,
        kind: wal::RmgrKind,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    // ---- the Database API: bad input ----
    /// An option value out of range or inconsistent with another.
    #[error("invalid option {option}: {detail}")]
    InvalidOption {
        option: &'static str,
        detail: String,
    },

    /// A directory (or a file in it) that is not an engine data directory.
    #[error("{path} is not a data directory of this engine: {detail}")]
    NotADatabase { path: PathBuf, detail: String },

    /// A data directory written by an incompatible format version.
    #[error("{path}: data directory format version {found}, this engine reads version {expected}")]
    IncompatibleVersion {
        path: PathBuf,
        found: String,
        expected: u32,
    },

    /// Checksums were set differently when the directory was created.
    #[error(
        "{path}: the data directory was created with checksums {recorded}, \
         but the options ask for checksums {requested}; open it with checksums {recorded}"
    )]
    ChecksumSettingMismatch {
        path: PathBuf,
        recorded: &'static str,
        requested: &'static str,
    },

    /// No table of that name.
    #[error("unknown table {name:?}")]
    UnknownTable { name: String },

    /// No column of that name in the table.
    #[error("table {table:?} has no column {column:?}")]
    UnknownColumn { table: String, column: String },

    /// A table or index of that name exists already.
    #[error("a relation named {name:?} exists already")]
    TableExists { name: String },

    /// A table definition that cannot be stored (no columns, duplicate or
    /// empty names, a name too long).
    #[error("invalid definition of {name:?}: {detail}")]
    InvalidSchema { name: String, detail: String },

    /// A row with the wrong number of values.
    #[error("table {table:?} has {expected} columns, the row has {got} values")]
    WrongColumnCount {
        table: String,
        expected: usize,
        got: usize,
    },

    /// A value of the wrong type for its column.
    #[error("table {table:?}, column {column:?}: expected a {expected} value, got {got}")]
    TypeMismatch {
        table: String,
        column: String,
        expected: ColumnType,
        got: &'static str,
    },

    /// NULL for a NOT NULL column.
    #[error("table {table:?}, column {column:?}: NULL in a NOT NULL column")]
    NullNotAllowed { table: String, column: String },

    /// An encoded row larger than a page can hold (there is no TOAST).
    #[error("table {table:?}: row of {len} bytes is too large (at most {max} bytes fit on a page)")]
    RowTooLarge {
        table: String,
        len: usize,
        max: usize,
    },

    /// A row id that names no tuple of the table (offset 0, or a block past
    /// its end).
    #[error("table {table:?}: bad row id {row_id}: {reason}")]
    BadRowId {
        table: String,
        row_id: Tid,
        reason: &'static str,
    },

    /// An update or delete of a row this transaction cannot see (deleted
    /// before its snapshot, never committed, or already changed by itself).
    #[error("table {table:?}: row {row_id} is not visible to this transaction")]
    RowNotVisible { table: String, row_id: Tid },

    /// No index of that name (or a table name where an index was expected
    /// and the table has not exactly one index).
    #[error("unknown index {name:?}{detail}")]
    UnknownIndex { name: String, detail: String },

    /// A by-key call on a column without a (unique) index.
    #[error("table {table:?} has no {what} on column {column:?}")]
    NoIndex {
        table: String,
        column: String,
        what: &'static str,
    },

    /// A committed (or this transaction's own) row already holds the key in
    /// a unique index. Nothing was changed.
    #[error(
        "duplicate key value violates unique index {index:?} on table {table:?}: key {key} already exists"
    )]
    UniqueViolation {
        index: String,
        table: String,
        key: String,
    },

    /// A key too long for an index (a third of a page).
    #[error("index {index:?}: key of {size} bytes is too large (at most {max} bytes)")]
    KeyTooLarge {
        index: String,
        size: usize,
        max: usize,
    },

    /// A write through a read-only transaction ([`crate::Database::read`]).
    #[error(
        "{op} on table {table:?} in a read-only transaction (begin one with Database::begin to write)"
    )]
    ReadOnlyTransaction { op: &'static str, table: String },

    /// A row column read as a type it does not have, or a column handle of
    /// another table.
    #[error("table {table:?}: {detail}")]
    WrongColumn { table: String, detail: String },

    // ---- conflict ----
    /// A concurrent transaction changed the row first: roll back and retry.
    #[error(
        "table {table:?}: write conflict on row {row_id}: a concurrent transaction updated or deleted it; roll back and retry"
    )]
    WriteConflict { table: String, row_id: Tid },

    /// A transaction still in progress holds (inserted or deleted) a row with
    /// the same key in a unique index: roll back and retry (there is no
    /// waiting). Nothing was changed.
    #[error(
        "unique index {index:?} on table {table:?}: key {key} is held by transaction {xid}, still in progress; roll back and retry"
    )]
    UniqueConflict {
        index: String,
        table: String,
        key: String,
        xid: Xid,
    },

    /// An earlier operation of this transaction failed half-way (an update
    /// whose new index entry lost a race on a unique key): the transaction
    /// can only roll back. `commit` rolls it back and returns this error.
    #[error("the transaction must roll back: {reason}")]
    TransactionAborted { reason: String },

    /// Another `Database` (in this or another process) holds the directory.
    #[error(
        "database is in use: {path} is locked by another open Database (in this or another process)"
    )]
    DatabaseInUse { path: PathBuf },

    /// `close()` of one handle of a database that other handles (clones of
    /// the `Database`, transactions, iterators) still use: the database
    /// closes when the last of them is dropped.
    #[error(
        "database {path} is still in use by {others} other handle(s) (clones, transactions or iterators); it closes when the last one is dropped"
    )]
    StillInUse { path: PathBuf, others: usize },

    // ---- corrupt data ----
    /// A stored row whose bytes do not decode against its table.
    #[error("table {table:?}, row {row_id}: corrupt row: {detail}")]
    CorruptRow {
        table: String,
        row_id: Tid,
        detail: String,
    },

    /// A catalog row that does not decode.
    #[error("corrupt catalog: {detail}")]
    CorruptCatalog { detail: String },

    /// A file of the data directory that is damaged (version stamp).
    #[error("corrupt data directory file {path}: {detail}")]
    CorruptDataDir { path: PathBuf, detail: String },

    // ---- I/O ----
    /// An operating-system error on a file of the data directory.
    #[error("could not {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A checkpoint that failed (the previous one stands).
    #[error("checkpoint failed: {detail}")]
    Checkpoint { detail: String },

    /// An earlier commit (of `xid`, its record ending at `commit_lsn`) is
    /// durable but could not be recorded in the commit log: the database
    /// refuses every write until it is reopened, when recovery records it
    /// (PostgreSQL PANICs in its commit critical section).
    #[error(
        "the database refuses writes until it is reopened: the commit of xid {xid} (record ending at {commit_lsn}) is durable but could not be recorded in the commit log: {detail}"
    )]
    CommitNotRecorded {
        xid: Xid,
        commit_lsn: Lsn,
        detail: String,
    },

    // ---- wrapped heap and B-tree errors ----
    /// A B-tree index failed while the engine was doing `what` (which names
    /// the index); the kind follows the B-tree error's.
    #[error("{what}: {source}")]
    Index {
        what: String,
        #[source]
        source: btree::BtreeError,
    },

    /// The heap failed while the engine was doing `what` (which names the
    /// table); the kind follows the heap error's.
    #[error("{what}: {source}")]
    Heap {
        what: String,
        #[source]
        source: heap::HeapError,
    },
}

impl EngineError {
    /// Whose fault this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EngineError::InvalidXid { .. } => ErrorKind::BadInput,
            EngineError::MalformedXactRecord { .. } => ErrorKind::CorruptData,
            EngineError::Buffer { source, .. } => match source.kind() {
                bufmgr::ErrorKind::BadInput => ErrorKind::BadInput,
                bufmgr::ErrorKind::CorruptData => ErrorKind::CorruptData,
                bufmgr::ErrorKind::Io => ErrorKind::Io,
                bufmgr::ErrorKind::ResourceExhausted => ErrorKind::ResourceExhausted,
            },
            EngineError::Wal { source, .. } => match source.kind() {
                wal::ErrorKind::BadInput => ErrorKind::BadInput,
                wal::ErrorKind::CorruptData => ErrorKind::CorruptData,
                wal::ErrorKind::Io => ErrorKind::Io,
            },
            EngineError::Redo { .. } => ErrorKind::CorruptData,
            EngineError::InvalidOption { .. }
            | EngineError::NotADatabase { .. }
            | EngineError::IncompatibleVersion { .. }
            | EngineError::ChecksumSettingMismatch { .. }
            | EngineError::UnknownTable { .. }
            | EngineError::UnknownColumn { .. }
            | EngineError::TableExists { .. }
            | EngineError::InvalidSchema { .. }
            | EngineError::WrongColumnCount { .. }
            | EngineError::TypeMismatch { .. }
            | EngineError::NullNotAllowed { .. }
            | EngineError::RowTooLarge { .. }
            | EngineError::BadRowId { .. }
            | EngineError::RowNotVisible { .. }
            | EngineError::UnknownIndex { .. }
            | EngineError::NoIndex { .. }
            | EngineError::UniqueViolation { .. }
            | EngineError::KeyTooLarge { .. }
            | EngineError::ReadOnlyTransaction { .. }
            | EngineError::WrongColumn { .. } => ErrorKind::BadInput,
            EngineError::WriteConflict { .. }
            | EngineError::UniqueConflict { .. }
            | EngineError::TransactionAborted { .. }
            | EngineError::DatabaseInUse { .. }
            | EngineError::StillInUse { .. } => ErrorKind::Conflict,
            EngineError::Index { source, .. } => match source.kind() {
                btree::ErrorKind::BadInput => ErrorKind::BadInput,
                btree::ErrorKind::Conflict => ErrorKind::Conflict,
                btree::ErrorKind::CorruptData => ErrorKind::CorruptData,
                btree::ErrorKind::Io => ErrorKind::Io,
                btree::ErrorKind::ResourceExhausted => ErrorKind::ResourceExhausted,
            },
            EngineError::CorruptRow { .. }
            | EngineError::CorruptCatalog { .. }
            | EngineError::CorruptDataDir { .. } => ErrorKind::CorruptData,
            EngineError::Io { .. }
            | EngineError::Checkpoint { .. }
            | EngineError::CommitNotRecorded { .. } => ErrorKind::Io,
            EngineError::Heap { source, .. } => match source.kind() {
                heap::ErrorKind::BadInput => ErrorKind::BadInput,
                heap::ErrorKind::Conflict => ErrorKind::Conflict,
                heap::ErrorKind::CorruptData => ErrorKind::CorruptData,
                heap::ErrorKind::Io => ErrorKind::Io,
                heap::ErrorKind::ResourceExhausted => ErrorKind::ResourceExhausted,
            },
        }
    }

    /// Is this a conflict with a concurrent transaction (roll back and
    /// retry): a write conflict, a unique key held by a transaction in
    /// progress, or a transaction that must roll back?
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            EngineError::WriteConflict { .. }
                | EngineError::UniqueConflict { .. }
                | EngineError::TransactionAborted { .. }
        )
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.into();
        move |source| EngineError::Io { op, path, source }
    }

    pub(crate) fn heap(what: impl Into<String>) -> impl FnOnce(heap::HeapError) -> EngineError {
        let what = what.into();
        move |source| EngineError::Heap { what, source }
    }

    pub(crate) fn buffer(what: impl Into<String>) -> impl FnOnce(bufmgr::Error) -> EngineError {
        let what = what.into();
        move |source| EngineError::Buffer { what, source }
    }

    pub(crate) fn wal(what: impl Into<String>) -> impl FnOnce(wal::WalError) -> EngineError {
        let what = what.into();
        move |source| EngineError::Wal { what, source }
    }
}
