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
//! | bad input | `InvalidXid`, `InvalidOption`, `NotADatabase`, `IncompatibleVersion`, `ChecksumSettingMismatch`, `UnknownTable`, `UnknownColumn`, `TableExists`, `InvalidSchema`, `WrongColumnCount`, `TypeMismatch`, `NullNotAllowed`, `RowTooLarge`, `BadRowId`, `RowNotVisible`, `UnknownIndex`, `NoIndex`, `BadKey`, `UniqueViolation`, `KeyTooLarge`, `ReadOnlyTransaction`, `TooManyCommands`, `WrongColumn` |
//! | conflict (roll back and retry) | `WriteConflict`, `UniqueConflict`, `TransactionAborted` |
//! | in use (wait for the other user) | `DatabaseInUse`, `StillInUse` |
//! | corrupt data | `MalformedXactRecord`, `CorruptRow`, `CorruptCatalog`, `CorruptDataDir` |
//! | I/O (or an earlier I/O failure) | `Buffer`, `Wal`, `Io`, `Checkpoint`, `CommitNotRecorded` |
//! | raised by a caller's redo function | `Redo` |
//! | wrapped pool / WAL / heap / B-tree errors | `Buffer`, `Wal`, `Heap`, `Index` (kind from the wrapped error) |
//!
//! Each error is classified once, by [`EngineError::kind`]; the predicates
//! are read off it: [`EngineError::is_conflict`] is `kind() == Conflict`
//! (whether the engine raised the conflict itself or wraps the heap's or
//! the B-tree's), and [`EngineError::is_retryable`] ("run the transaction
//! again") is a conflict or a resource that ran out (every buffer pinned by
//! other work). A wrapped error takes the kind of the engine variant it
//! would have been mapped to (a B-tree unique violation is bad input, as
//! `UniqueViolation` is).
//!
//! Names in messages are cut to [`MAX_NAME_IN_MESSAGE`] bytes (a
//! 10,000-byte name the caller passed is not echoed whole); the fields keep
//! the full name.

use std::path::PathBuf;

use heap::Tid;
use wal::{Lsn, Xid};

use crate::column_type::ColumnType;

/// Result type of the engine.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// Whose fault an error is, so callers can decide what to do about it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller asked for something invalid.
    BadInput,
    /// Bytes on disk (WAL or pages) are not what was written.
    CorruptData,
    /// The operating system refused an operation, or an earlier one failed.
    Io,
    /// A resource ran out (every buffer of the pool pinned): running the
    /// transaction again may succeed once other work releases it.
    ResourceExhausted,
    /// A concurrent transaction got there first: roll back and run the
    /// transaction again.
    Conflict,
    /// Another `Database` or handle holds what was asked for (the data
    /// directory is locked, other handles keep it open): wait for it to be
    /// closed; retrying the transaction does not help.
    InUse,
}

/// Longest name (table, index, column), in bytes, a message repeats whole;
/// a longer one is cut there and its length given.
pub const MAX_NAME_IN_MESSAGE: usize = 64;

/// A name for a message: quoted as `{:?}` would, cut to
/// [`MAX_NAME_IN_MESSAGE`] bytes (at a character boundary) with its full
/// length after it.
pub(crate) struct Cut<'a>(pub &'a str);

impl std::fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0;
        if s.len() <= MAX_NAME_IN_MESSAGE {
            return write!(f, "{s:?}");
        }
        let mut end = MAX_NAME_IN_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        write!(f, "{:?}... ({} bytes)", &s[..end], s.len())
    }
}

/// `name` cut for a message (see [`Cut`]).
pub(crate) fn cut(name: &str) -> Cut<'_> {
    Cut(name)
}

/// An error from the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    // ---- bad input ----
    /// An xid that cannot name a transaction here (0, 1, or beyond the
    /// largest the commit log can address).
    #[error("invalid transaction id {xid}: {detail}")]
    InvalidXid {
        /// The transaction id.
        xid: Xid,
        /// What is wrong, in words.
        detail: String,
    },

    // ---- corrupt data ----
    /// An Xact record whose info byte or payload is not one this engine writes.
    #[error("malformed transaction record at {lsn}: {detail}")]
    MalformedXactRecord {
        /// Where the record is in the WAL.
        lsn: Lsn,
        /// What is wrong, in words.
        detail: String,
    },

    // ---- I/O (wrapped) ----
    /// The buffer pool failed while the engine was doing `what`.
    #[error("{what}: {source}")]
    Buffer {
        /// What the engine was doing (it names the relation).
        what: String,
        /// The error underneath.
        #[source]
        source: bufmgr::Error,
    },

    /// The WAL failed while the engine was doing `what`.
    #[error("{what}: {source}")]
    Wal {
        /// What the engine was doing (it names the relation).
        what: String,
        /// The error underneath.
        #[source]
        source: wal::WalError,
    },

    /// A redo function handed in by the caller failed on the record at `lsn`.
    #[error("redo of the {kind:?} record at {lsn} failed: {source}")]
    Redo {
        /// Where the record is in the WAL.
        lsn: Lsn,
        /// The record's resource manager.
        kind: wal::RmgrKind,
        /// The redo function's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    // ---- the Database API: bad input ----
    /// An option value out of range or inconsistent with another.
    #[error("invalid option {option}: {detail}")]
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// What is wrong, in words.
        detail: String,
    },

    /// A directory (or a file in it) that is not an engine data directory.
    #[error("{path} is not a data directory of this engine: {detail}")]
    NotADatabase {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, in words.
        detail: String,
    },

    /// A data directory written by an incompatible format version.
    #[error("{path}: data directory format version {found}, this engine reads version {expected}")]
    IncompatibleVersion {
        /// The file or directory.
        path: PathBuf,
        /// The format version the directory has.
        found: String,
        /// The format version this engine reads.
        expected: u32,
    },

    /// Checksums were set differently when the directory was created.
    #[error(
        "{path}: the data directory was created with checksums {recorded}, \
         but the options ask for checksums {requested}; open it with checksums {recorded}"
    )]
    ChecksumSettingMismatch {
        /// The file or directory.
        path: PathBuf,
        /// The setting the directory was created with (`on`/`off`).
        recorded: &'static str,
        /// The setting the options ask for.
        requested: &'static str,
    },

    /// No table of that name.
    #[error("unknown table {}", cut(name))]
    UnknownTable {
        /// The table's name.
        name: String,
    },

    /// No column of that name in the table.
    #[error("table {} has no column {}", cut(table), cut(column))]
    UnknownColumn {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
    },

    /// A table or index of that name exists already.
    #[error("a relation named {} exists already", cut(name))]
    TableExists {
        /// The name taken.
        name: String,
    },

    /// A table definition that cannot be stored (no columns, duplicate or
    /// empty names, a name too long).
    #[error("invalid definition of {}: {detail}", cut(name))]
    InvalidSchema {
        /// The table or index being defined.
        name: String,
        /// What is wrong, in words.
        detail: String,
    },

    /// A row with the wrong number of values.
    #[error(
        "table {} has {expected} columns, the row has {got} values",
        cut(table)
    )]
    WrongColumnCount {
        /// The table's name.
        table: String,
        /// Columns of the table.
        expected: usize,
        /// Values in the row.
        got: usize,
    },

    /// A value of the wrong type for its column.
    #[error(
        "table {}, column {}: expected a {expected} value, got {got}",
        cut(table),
        cut(column)
    )]
    TypeMismatch {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
        /// The column's type.
        expected: ColumnType,
        /// The type of the value given.
        got: &'static str,
    },

    /// NULL for a NOT NULL column.
    #[error(
        "table {}, column {}: NULL in a NOT NULL column",
        cut(table),
        cut(column)
    )]
    NullNotAllowed {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
    },

    /// An encoded row larger than a page can hold (there is no TOAST).
    #[error(
        "table {}: row of {len} bytes is too large (at most {max} bytes fit on a page)",
        cut(table)
    )]
    RowTooLarge {
        /// The table's name.
        table: String,
        /// Bytes of the encoded row.
        len: usize,
        /// Most bytes one row may take on a page.
        max: usize,
    },

    /// A row id that names no tuple of the table (offset 0, or a block past
    /// its end).
    #[error("table {}: bad row id {row_id}: {reason}", cut(table))]
    BadRowId {
        /// The table's name.
        table: String,
        /// The row.
        row_id: Tid,
        /// Why it names no tuple.
        reason: &'static str,
    },

    /// An update or delete of a row this transaction cannot see (deleted
    /// before its snapshot, never committed, or already changed by itself).
    #[error(
        "table {}: row {row_id} is not visible to this transaction",
        cut(table)
    )]
    RowNotVisible {
        /// The table's name.
        table: String,
        /// The row.
        row_id: Tid,
    },

    /// No index of that name (or a table name where an index was expected
    /// and the table has not exactly one index).
    #[error("unknown index {}{detail}", cut(name))]
    UnknownIndex {
        /// The name given.
        name: String,
        /// More about the lookup (empty, or the indexes a table has).
        detail: String,
    },

    /// A key or key range that does not fit its index (more values than
    /// the index has columns, bounds after a full key).
    #[error("index {}: {detail}", cut(index))]
    BadKey {
        /// The index's name.
        index: String,
        /// What does not fit.
        detail: String,
    },

    /// A by-key call on a column without a (unique) index.
    #[error("table {} has no {what} on column {}", cut(table), cut(column))]
    NoIndex {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
        /// The kind of index the call needs.
        what: &'static str,
    },

    /// A committed (or this transaction's own) row already holds the key in
    /// a unique index. Nothing was changed.
    #[error(
        "duplicate key value violates unique index {index:?} on table {table:?}: key {key} already exists"
    )]
    UniqueViolation {
        /// The index's name.
        index: String,
        /// The table's name.
        table: String,
        /// The key, as text.
        key: String,
    },

    /// A key too long for an index (a third of a page).
    #[error(
        "index {}: key of {size} bytes is too large (at most {max} bytes)",
        cut(index)
    )]
    KeyTooLarge {
        /// The index's name.
        index: String,
        /// Bytes of the key.
        size: usize,
        /// Most bytes a key may take.
        max: usize,
    },

    /// A write through a read-only transaction ([`crate::Database::read`]).
    #[error(
        "{op} on table {} in a read-only transaction (begin one with Database::begin to write)",
        cut(table)
    )]
    ReadOnlyTransaction {
        /// The write refused.
        op: &'static str,
        /// The table's name.
        table: String,
    },

    /// A transaction ran out of command ids (each write is a command; the
    /// tuple header keeps 32 bits of it, as PostgreSQL's does).
    #[error(
        "{op} on table {}: the transaction has used all {limit} command ids; commit it and continue in a new one",
        cut(table)
    )]
    TooManyCommands {
        /// The write refused.
        op: &'static str,
        /// The table's name.
        table: String,
        /// Command ids one transaction has.
        limit: u64,
    },

    /// A row column read as a type it does not have, or a column handle of
    /// another table.
    #[error("table {}: {detail}", cut(table))]
    WrongColumn {
        /// The table's name.
        table: String,
        /// What is wrong, in words.
        detail: String,
    },

    // ---- conflict ----
    /// A concurrent transaction changed the row first: roll back and retry.
    #[error(
        "table {table:?}: write conflict on row {row_id}: a concurrent transaction updated or deleted it; roll back and retry"
    )]
    WriteConflict {
        /// The table's name.
        table: String,
        /// The row.
        row_id: Tid,
    },

    /// A transaction still in progress holds (inserted or deleted) a row with
    /// the same key in a unique index: roll back and retry (there is no
    /// waiting). Nothing was changed.
    #[error(
        "unique index {index:?} on table {table:?}: key {key} is held by transaction {xid}, still in progress; roll back and retry"
    )]
    UniqueConflict {
        /// The index's name.
        index: String,
        /// The table's name.
        table: String,
        /// The key, as text.
        key: String,
        /// The transaction id.
        xid: Xid,
    },

    /// An earlier operation of this transaction failed half-way (an update
    /// whose new index entry lost a race on a unique key): the transaction
    /// can only roll back. `commit` rolls it back and returns this error.
    #[error("the transaction must roll back: {reason}")]
    TransactionAborted {
        /// Why the transaction can only roll back.
        reason: String,
    },

    /// An operation on a table from inside its own bulk load into an empty
    /// table (the load's row iterator or progress callback, on the loading
    /// thread), which would wait for the load forever.
    #[error(
        "table {} is being bulk-loaded by this thread (it is held until the load ends): it cannot be read or changed from the load's row iterator or progress callback; the load fails",
        cut(table)
    )]
    TableBeingLoaded {
        /// The table's name.
        table: String,
    },

    /// DDL, a checkpoint or another backup called from a backup's progress
    /// callback ([`crate::Database::backup_to`]), on the backing-up thread:
    /// the backup holds DDL and checkpoints off until it ends, so the call
    /// would wait for it forever. Nothing was done.
    #[error(
        "{operation} from inside a backup's progress callback: the backup holds DDL and checkpoints off until it ends"
    )]
    BackupInProgress {
        /// What was refused, in words (e.g. `create table "t"`).
        operation: String,
    },

    /// DDL on a table (DROP, ALTER, CREATE / DROP INDEX) or a bulk load into
    /// it, called on a thread that is reading that table (from a scan's
    /// callback, [`crate::Transaction::scan_each`] and its kin): the read
    /// holds the table against those operations until it ends, so the call
    /// would wait for itself forever. Nothing was done.
    #[error(
        "{operation} from inside a read of table {} on the same thread (a scan's callback): the read holds the table until it ends; nothing was done",
        cut(table)
    )]
    TableReadByThisThread {
        /// The table's name.
        table: String,
        /// What was refused, in words (e.g. `drop table "t"`).
        operation: String,
    },

    /// A scan whose row filter ([`crate::RowIter::matching`]) panicked, read
    /// again after the caller caught the panic: the page being read when it
    /// panicked was left part-way, so the scan cannot say which of its rows
    /// were still to come. It ends here; scan again to read the table.
    #[error(
        "the scan of table {} was interrupted by a panic in its row filter: rows after the last one handed out are unknown; the scan has ended",
        cut(table)
    )]
    ScanInterrupted {
        /// The table's name.
        table: String,
    },

    /// A backup target that is not a new or empty directory outside the
    /// data directory ([`crate::Database::backup_to`]). Nothing was written.
    #[error("backup target {path}: {detail}")]
    BackupTarget {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, in words.
        detail: String,
    },

    /// Another `Database` (in this or another process) holds the directory.
    #[error(
        "database is in use: {path} is locked by another open Database (in this or another process)"
    )]
    DatabaseInUse {
        /// The file or directory.
        path: PathBuf,
    },

    /// `close()` of one handle of a database that other handles (clones of
    /// the `Database`, transactions, iterators) still use: the database
    /// closes when the last of them is dropped.
    #[error(
        "database {path} is still in use by {others} other handle(s) (clones, transactions or iterators); it closes when the last one is dropped"
    )]
    StillInUse {
        /// The file or directory.
        path: PathBuf,
        /// Other handles (clones, transactions, iterators) still alive.
        others: usize,
    },

    // ---- corrupt data ----
    /// A stored row whose bytes do not decode against its table.
    #[error("table {table:?}, row {row_id}: corrupt row: {detail}")]
    CorruptRow {
        /// The table's name.
        table: String,
        /// The row.
        row_id: Tid,
        /// What is wrong, in words.
        detail: String,
    },

    /// A catalog row that does not decode.
    #[error("corrupt catalog: {detail}")]
    CorruptCatalog {
        /// What is wrong, in words.
        detail: String,
    },

    /// A file of the data directory that is damaged (version stamp).
    #[error("corrupt data directory file {path}: {detail}")]
    CorruptDataDir {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong, in words.
        detail: String,
    },

    // ---- I/O ----
    /// An operating-system error on a file of the data directory.
    #[error("could not {op} {path}: {source}")]
    Io {
        /// What was being done (`open`, `read`, `fsync`, ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error underneath.
        #[source]
        source: std::io::Error,
    },

    /// A checkpoint that failed (the previous one stands).
    #[error("checkpoint failed: {detail}")]
    Checkpoint {
        /// What is wrong, in words.
        detail: String,
    },

    /// An earlier commit (of `xid`, its record ending at `commit_lsn`) is
    /// durable but could not be recorded in the commit log: the database
    /// refuses every write until it is reopened, when recovery records it
    /// (PostgreSQL PANICs in its commit critical section).
    #[error(
        "the database refuses writes until it is reopened: the commit of xid {xid} (record ending at {commit_lsn}) is durable but could not be recorded in the commit log: {detail}"
    )]
    CommitNotRecorded {
        /// The transaction id.
        xid: Xid,
        /// End LSN of its commit record.
        commit_lsn: Lsn,
        /// What is wrong, in words.
        detail: String,
    },

    // ---- wrapped heap and B-tree errors ----
    /// A B-tree index failed while the engine was doing `what` (which names
    /// the index); the kind follows the B-tree error's.
    #[error("{what}: {source}")]
    Index {
        /// What the engine was doing (it names the relation).
        what: String,
        /// The error underneath.
        #[source]
        source: btree::BtreeError,
    },

    /// The heap failed while the engine was doing `what` (which names the
    /// table); the kind follows the heap error's.
    #[error("{what}: {source}")]
    Heap {
        /// What the engine was doing (it names the relation).
        what: String,
        /// The error underneath.
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
            | EngineError::BadKey { .. }
            | EngineError::UniqueViolation { .. }
            | EngineError::KeyTooLarge { .. }
            | EngineError::ReadOnlyTransaction { .. }
            | EngineError::TooManyCommands { .. }
            | EngineError::WrongColumn { .. }
            | EngineError::BackupTarget { .. }
            | EngineError::TableBeingLoaded { .. }
            | EngineError::TableReadByThisThread { .. }
            | EngineError::BackupInProgress { .. }
            | EngineError::ScanInterrupted { .. } => ErrorKind::BadInput,
            EngineError::WriteConflict { .. }
            | EngineError::UniqueConflict { .. }
            | EngineError::TransactionAborted { .. } => ErrorKind::Conflict,
            EngineError::DatabaseInUse { .. } | EngineError::StillInUse { .. } => ErrorKind::InUse,
            // A live duplicate is the caller's (`UniqueViolation`), whatever
            // the B-tree calls it; a key held by a transaction in progress
            // is a conflict (`UniqueConflict`).
            EngineError::Index {
                source: btree::BtreeError::UniqueViolation { .. },
                ..
            } => ErrorKind::BadInput,
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
    /// progress, or a transaction that must roll back, raised by the engine
    /// or wrapped from the heap or the B-tree? Exactly
    /// `kind() == ErrorKind::Conflict`.
    pub fn is_conflict(&self) -> bool {
        self.kind() == ErrorKind::Conflict
    }

    /// Should the caller roll back and run the transaction again? A
    /// conflict ([`is_conflict`](Self::is_conflict)), or a resource that
    /// ran out while other work held it (every buffer pinned): both may
    /// succeed on a second run. Bad input, corrupt data, I/O failures and a
    /// database in use ([`ErrorKind::InUse`]: wait for it to close) will
    /// not.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Conflict | ErrorKind::ResourceExhausted
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

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::{BufferTag, Fork, RelId};

    /// Number of `EngineError` variants: `variant` below lists each once.
    const VARIANTS: usize = 45;

    /// Position of `e`'s variant. The match has no wildcard, so a new
    /// variant does not compile until it is listed here (and a sample of it
    /// added to `samples`).
    fn variant(e: &EngineError) -> usize {
        use EngineError as E;
        match e {
            E::InvalidXid { .. } => 0,
            E::MalformedXactRecord { .. } => 1,
            E::Buffer { .. } => 2,
            E::Wal { .. } => 3,
            E::Redo { .. } => 4,
            E::InvalidOption { .. } => 5,
            E::NotADatabase { .. } => 6,
            E::IncompatibleVersion { .. } => 7,
            E::ChecksumSettingMismatch { .. } => 8,
            E::UnknownTable { .. } => 9,
            E::UnknownColumn { .. } => 10,
            E::TableExists { .. } => 11,
            E::InvalidSchema { .. } => 12,
            E::WrongColumnCount { .. } => 13,
            E::TypeMismatch { .. } => 14,
            E::NullNotAllowed { .. } => 15,
            E::RowTooLarge { .. } => 16,
            E::BadRowId { .. } => 17,
            E::RowNotVisible { .. } => 18,
            E::UnknownIndex { .. } => 19,
            E::NoIndex { .. } => 20,
            E::UniqueViolation { .. } => 21,
            E::KeyTooLarge { .. } => 22,
            E::ReadOnlyTransaction { .. } => 23,
            E::WrongColumn { .. } => 24,
            E::WriteConflict { .. } => 25,
            E::UniqueConflict { .. } => 26,
            E::TransactionAborted { .. } => 27,
            E::DatabaseInUse { .. } => 28,
            E::StillInUse { .. } => 29,
            E::CorruptRow { .. } => 30,
            E::CorruptCatalog { .. } => 31,
            E::CorruptDataDir { .. } => 32,
            E::Io { .. } => 33,
            E::Checkpoint { .. } => 34,
            E::Index { .. } => 35,
            E::Heap { .. } => 36,
            E::CommitNotRecorded { .. } => 37,
            E::TooManyCommands { .. } => 38,
            E::BackupTarget { .. } => 39,
            E::TableBeingLoaded { .. } => 40,
            E::BackupInProgress { .. } => 41,
            E::BadKey { .. } => 42,
            E::TableReadByThisThread { .. } => 43,
            E::ScanInterrupted { .. } => 44,
        }
    }

    /// One error of every variant (the wrappers once per kind of wrapped
    /// error), each with the kind it must report.
    fn samples() -> Vec<(EngineError, ErrorKind)> {
        use EngineError as E;
        use ErrorKind::*;
        let (t, tid, lsn) = ("t".to_string(), Tid::new(0, 1), Lsn(16));
        let tag = BufferTag {
            rel: RelId(1000),
            fork: Fork::Main,
            block: 3,
        };
        let io = || std::io::Error::other("injected");
        let buffer = |source| E::Buffer {
            what: "reading".into(),
            source,
        };
        let wal = |source| E::Wal {
            what: "writing".into(),
            source,
        };
        let heap = |source| E::Heap {
            what: "scan".into(),
            source,
        };
        let index = |source| E::Index {
            what: "lookup".into(),
            source,
        };
        let key = || btree::Key::I64(7);
        vec![
            (
                E::InvalidXid {
                    xid: 1,
                    detail: "reserved".into(),
                },
                BadInput,
            ),
            (
                E::MalformedXactRecord {
                    lsn,
                    detail: "info".into(),
                },
                CorruptData,
            ),
            (
                buffer(bufmgr::Error::InvalidConfig("size".into())),
                BadInput,
            ),
            (
                buffer(bufmgr::Error::ZeroedPage {
                    tag,
                    path: "f".into(),
                }),
                CorruptData,
            ),
            (buffer(bufmgr::Error::WritesRefused("earlier".into())), Io),
            (
                buffer(bufmgr::Error::NoUnpinnedBuffers { pool_size: 64 }),
                ResourceExhausted,
            ),
            (
                wal(wal::WalError::InvalidConfig("segment".into())),
                BadInput,
            ),
            (
                wal(wal::WalError::CorruptSegment {
                    file: "w".into(),
                    detail: "x".into(),
                }),
                CorruptData,
            ),
            (wal(wal::WalError::WritesRefused("earlier".into())), Io),
            (
                E::Redo {
                    lsn,
                    kind: wal::RmgrKind::Heap,
                    source: "bad".into(),
                },
                CorruptData,
            ),
            (
                E::InvalidOption {
                    option: "pool_size",
                    detail: "0".into(),
                },
                BadInput,
            ),
            (
                E::NotADatabase {
                    path: "d".into(),
                    detail: "no stamp".into(),
                },
                BadInput,
            ),
            (
                E::IncompatibleVersion {
                    path: "d".into(),
                    found: "9".into(),
                    expected: 1,
                },
                BadInput,
            ),
            (
                E::ChecksumSettingMismatch {
                    path: "d".into(),
                    recorded: "on",
                    requested: "off",
                },
                BadInput,
            ),
            (E::UnknownTable { name: t.clone() }, BadInput),
            (
                E::UnknownColumn {
                    table: t.clone(),
                    column: "c".into(),
                },
                BadInput,
            ),
            (E::TableExists { name: t.clone() }, BadInput),
            (
                E::InvalidSchema {
                    name: t.clone(),
                    detail: "x".into(),
                },
                BadInput,
            ),
            (
                E::WrongColumnCount {
                    table: t.clone(),
                    expected: 2,
                    got: 1,
                },
                BadInput,
            ),
            (
                E::TypeMismatch {
                    table: t.clone(),
                    column: "c".into(),
                    expected: ColumnType::I64,
                    got: "bytes",
                },
                BadInput,
            ),
            (
                E::NullNotAllowed {
                    table: t.clone(),
                    column: "c".into(),
                },
                BadInput,
            ),
            (
                E::RowTooLarge {
                    table: t.clone(),
                    len: 9000,
                    max: 8000,
                },
                BadInput,
            ),
            (
                E::BadRowId {
                    table: t.clone(),
                    row_id: tid,
                    reason: "past the end",
                },
                BadInput,
            ),
            (
                E::RowNotVisible {
                    table: t.clone(),
                    row_id: tid,
                },
                BadInput,
            ),
            (
                E::UnknownIndex {
                    name: "i".into(),
                    detail: String::new(),
                },
                BadInput,
            ),
            (
                E::NoIndex {
                    table: t.clone(),
                    column: "c".into(),
                    what: "index",
                },
                BadInput,
            ),
            (
                E::BadKey {
                    index: "i".into(),
                    detail: "a key of 3 values for an index of 2 columns".into(),
                },
                BadInput,
            ),
            (
                E::UniqueViolation {
                    index: "i".into(),
                    table: t.clone(),
                    key: "(7)".into(),
                },
                BadInput,
            ),
            (
                E::KeyTooLarge {
                    index: "i".into(),
                    size: 9000,
                    max: 2700,
                },
                BadInput,
            ),
            (
                E::ReadOnlyTransaction {
                    op: "insert",
                    table: t.clone(),
                },
                BadInput,
            ),
            (
                E::TooManyCommands {
                    op: "insert",
                    table: t.clone(),
                    limit: u64::from(u32::MAX),
                },
                BadInput,
            ),
            (E::TableBeingLoaded { table: t.clone() }, BadInput),
            (E::ScanInterrupted { table: t.clone() }, BadInput),
            (
                E::TableReadByThisThread {
                    table: t.clone(),
                    operation: "drop table \"t\"".into(),
                },
                BadInput,
            ),
            (
                E::BackupInProgress {
                    operation: "checkpoint".into(),
                },
                BadInput,
            ),
            (
                E::BackupTarget {
                    path: "/backup".into(),
                    detail: "it is not empty".into(),
                },
                BadInput,
            ),
            (
                E::WrongColumn {
                    table: t.clone(),
                    detail: "x".into(),
                },
                BadInput,
            ),
            (
                E::WriteConflict {
                    table: t.clone(),
                    row_id: tid,
                },
                Conflict,
            ),
            (
                E::UniqueConflict {
                    index: "i".into(),
                    table: t.clone(),
                    key: "(7)".into(),
                    xid: 9,
                },
                Conflict,
            ),
            (
                E::TransactionAborted {
                    reason: "earlier failure".into(),
                },
                Conflict,
            ),
            (E::DatabaseInUse { path: "d".into() }, InUse),
            (
                E::StillInUse {
                    path: "d".into(),
                    others: 1,
                },
                InUse,
            ),
            (
                E::CorruptRow {
                    table: t.clone(),
                    row_id: tid,
                    detail: "x".into(),
                },
                CorruptData,
            ),
            (E::CorruptCatalog { detail: "x".into() }, CorruptData),
            (
                E::CorruptDataDir {
                    path: "d".into(),
                    detail: "x".into(),
                },
                CorruptData,
            ),
            (
                E::Io {
                    op: "read",
                    path: "f".into(),
                    source: io(),
                },
                Io,
            ),
            (E::Checkpoint { detail: "x".into() }, Io),
            (
                E::CommitNotRecorded {
                    xid: 9,
                    commit_lsn: lsn,
                    detail: "clog read failed".into(),
                },
                Io,
            ),
            (
                index(btree::BtreeError::WrongKeyType {
                    index: "i".into(),
                    expected: btree::KeyType::I64,
                    got: "(b\"x\")".into(),
                }),
                BadInput,
            ),
            (
                index(btree::BtreeError::UniqueViolation {
                    index: "i".into(),
                    key: key(),
                }),
                BadInput,
            ),
            (
                index(btree::BtreeError::UniqueInProgress {
                    index: "i".into(),
                    key: key(),
                    xid: 9,
                }),
                Conflict,
            ),
            (index(btree::BtreeError::BadRecord("x".into())), CorruptData),
            (
                index(btree::BtreeError::HeapCheck {
                    index: "i".into(),
                    source: "x".into(),
                }),
                Io,
            ),
            (
                index(btree::BtreeError::Buffer(
                    bufmgr::Error::NoUnpinnedBuffers { pool_size: 64 },
                )),
                ResourceExhausted,
            ),
            (
                heap(heap::HeapError::NotVisible {
                    rel: RelId(1000),
                    tid,
                    xid: 9,
                }),
                BadInput,
            ),
            (
                heap(heap::HeapError::WriteConflict {
                    rel: RelId(1000),
                    tid,
                }),
                Conflict,
            ),
            (heap(heap::HeapError::BadRecord("x".into())), CorruptData),
            (
                heap(heap::HeapError::Wal(wal::WalError::WritesRefused(
                    "x".into(),
                ))),
                Io,
            ),
            (
                heap(heap::HeapError::Buffer(bufmgr::Error::TooManyPins {
                    tag,
                    pins: 9,
                })),
                ResourceExhausted,
            ),
        ]
    }

    /// Every variant is classified once: `kind()` is the expected one,
    /// `is_conflict()` is exactly `kind() == Conflict` and `is_retryable()`
    /// exactly a conflict or an exhausted resource.
    #[test]
    fn every_variant_is_classified_once() {
        let samples = samples();
        let mut seen = [false; VARIANTS];
        for (e, expected) in &samples {
            seen[variant(e)] = true;
            assert_eq!(e.kind(), *expected, "{e:?}");
            assert_eq!(e.is_conflict(), e.kind() == ErrorKind::Conflict, "{e:?}");
            assert_eq!(
                e.is_retryable(),
                matches!(e.kind(), ErrorKind::Conflict | ErrorKind::ResourceExhausted),
                "{e:?}"
            );
            assert!(!e.to_string().is_empty());
        }
        let missing: Vec<usize> = (0..seen.len()).filter(|&i| !seen[i]).collect();
        assert!(missing.is_empty(), "no sample of variants {missing:?}");
        // The cases the classification got wrong before: a database in
        // use is no conflict, a heap write conflict wrapped as `Heap` is one.
        let mut checked = 0;
        for (e, _) in &samples {
            match e {
                EngineError::DatabaseInUse { .. } | EngineError::StillInUse { .. } => {
                    assert!(!e.is_conflict() && !e.is_retryable(), "{e}");
                    checked += 1;
                }
                EngineError::Heap {
                    source: heap::HeapError::WriteConflict { .. },
                    ..
                } => {
                    assert!(e.is_conflict() && e.is_retryable(), "{e}");
                    checked += 1;
                }
                _ => {}
            }
        }
        assert_eq!(checked, 3);
    }

    #[test]
    fn long_names_are_cut_in_messages() {
        let long = "é".repeat(5_000);
        let e = EngineError::UnknownColumn {
            table: long.clone(),
            column: "c".into(),
        };
        let msg = e.to_string();
        assert!(msg.len() < 2 * MAX_NAME_IN_MESSAGE + 100, "{msg}");
        assert!(
            msg.contains("(10000 bytes)") && msg.contains("\"c\""),
            "{msg}"
        );
        // A short name reads as it always did.
        let e = EngineError::UnknownTable { name: "t".into() };
        assert_eq!(e.to_string(), "unknown table \"t\"");
    }
}
