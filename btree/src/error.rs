//! The B-tree's errors, grouped by whose fault they are.
//!
//! | kind | variants | what the caller does |
//! |---|---|---|
//! | bad input | `KeyTooLarge`, `WrongKeyType`, `BadOptions`, `UnsortedBuild`, `BadTid` | fix the call |
//! | conflict | `UniqueViolation`, `UniqueInProgress` | abort, or wait for the other transaction and retry |
//! | corrupt data | `Corrupt`, `BadRecord` | stop; the message names relation and block |
//! | I/O | `Buffer`, `Wal`, `HeapCheck` | the environment failed (or the heap callback did) |
//!
//! Bugs may panic; bytes from disk, bytes from the log and caller input never do.

use bufmgr::{BlockNumber, RelId};

use crate::key::Key;

/// Result type of the B-tree.
pub type Result<T, E = BtreeError> = std::result::Result<T, E>;

/// Whose fault an error is.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ErrorKind {
    /// The caller asked for something invalid.
    BadInput,
    /// Another transaction holds the key.
    Conflict,
    /// A page or log record is not what was written.
    CorruptData,
    /// The buffer pool, the WAL or the operating system failed.
    Io,
    /// A resource ran out (every buffer pinned).
    ResourceExhausted,
}

/// An error from a B-tree index.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BtreeError {
    // ---- bad input ----
    /// A key longer than [`crate::page::MAX_KEY_SIZE`].
    #[error(
        "index \"{index}\": key of {size} bytes exceeds the maximum of {max} bytes (about a third of a page, so that a split always succeeds)"
    )]
    KeyTooLarge {
        index: String,
        size: usize,
        max: usize,
    },

    /// A key of another type than the index's columns (`got` shows it).
    #[error("index \"{index}\" holds {expected:?} keys, got the key {got}")]
    WrongKeyType {
        index: String,
        expected: crate::key::KeyType,
        got: String,
    },

    /// Creating or opening an index with options that do not fit the relation.
    #[error("index \"{index}\": {detail}")]
    BadOptions { index: String, detail: String },

    /// [`crate::Index::build_sorted`] given an entry that is not above the
    /// one before it in (key, TID) order; `position` counts from 0.
    #[error(
        "index \"{index}\": sorted build: entries out of order at position {position}: {detail}"
    )]
    UnsortedBuild {
        index: String,
        position: u64,
        detail: String,
    },

    /// A heap TID with offset 65535 given to an index with posting lists,
    /// where that offset marks a posting list (no heap page has that many
    /// line pointers).
    #[error("index \"{index}\": heap TID {tid} has offset 65535, which no heap tuple has")]
    BadTid {
        index: String,
        tid: heap::tuple::Tid,
    },

    // ---- conflict ----
    /// A live entry with the same key exists in a unique index.
    #[error("duplicate key value violates unique index \"{index}\": key {key} already exists")]
    UniqueViolation { index: String, key: Key },

    /// An entry with the same key belongs to a transaction still in progress:
    /// the caller decides whether to wait for `xid` and retry, or fail.
    #[error(
        "unique index \"{index}\": key {key} is being inserted or deleted by transaction {xid}, still in progress"
    )]
    UniqueInProgress { index: String, key: Key, xid: u64 },

    // ---- corrupt data ----
    /// A page whose bytes break the layout (never a panic).
    #[error("corrupt B-tree page: relation {rel} block {block}: {detail}", rel = rel.0)]
    Corrupt {
        rel: RelId,
        block: BlockNumber,
        detail: String,
    },

    /// A WAL record of the B-tree resource manager that does not decode.
    #[error("bad B-tree WAL record: {0}")]
    BadRecord(String),

    // ---- I/O ----
    #[error(transparent)]
    Buffer(#[from] bufmgr::Error),

    #[error(transparent)]
    Wal(#[from] wal::WalError),

    /// The caller's heap-visibility callback failed.
    #[error("unique check on index \"{index}\": heap visibility check failed: {source}")]
    HeapCheck {
        index: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl BtreeError {
    /// Whose fault this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            BtreeError::KeyTooLarge { .. }
            | BtreeError::WrongKeyType { .. }
            | BtreeError::BadOptions { .. }
            | BtreeError::UnsortedBuild { .. }
            | BtreeError::BadTid { .. } => ErrorKind::BadInput,
            BtreeError::UniqueViolation { .. } | BtreeError::UniqueInProgress { .. } => {
                ErrorKind::Conflict
            }
            BtreeError::Corrupt { .. } | BtreeError::BadRecord(_) => ErrorKind::CorruptData,
            BtreeError::Buffer(e) => match e.kind() {
                bufmgr::ErrorKind::BadInput => ErrorKind::BadInput,
                bufmgr::ErrorKind::CorruptData => ErrorKind::CorruptData,
                bufmgr::ErrorKind::Io => ErrorKind::Io,
                bufmgr::ErrorKind::ResourceExhausted => ErrorKind::ResourceExhausted,
            },
            BtreeError::Wal(e) => match e.kind() {
                wal::ErrorKind::BadInput => ErrorKind::BadInput,
                wal::ErrorKind::CorruptData => ErrorKind::CorruptData,
                wal::ErrorKind::Io => ErrorKind::Io,
            },
            BtreeError::HeapCheck { .. } => ErrorKind::Io,
        }
    }
}
