//! The heap's errors, grouped by whose fault they are.
//!
//! | group | variants | what the caller does |
//! |---|---|---|
//! | bad input | [`HeapError::RowTooLarge`], [`HeapError::BadTid`], [`HeapError::NotVisible`] | fix the request |
//! | conflict | [`HeapError::WriteConflict`] | abort the transaction and retry it |
//! | corrupt data | [`HeapError::CorruptPage`], [`HeapError::BadRecord`] | stop; the page or WAL record is damaged |
//! | I/O (and the pool's own groups) | [`HeapError::Buffer`], [`HeapError::Wal`], [`HeapError::Status`] | see the wrapped error's `kind()` |
//!
//! Every variant that concerns a page names the relation and the block. Bytes
//! read from disk or from the WAL never cause a panic: they come back as
//! [`HeapError::CorruptPage`] or [`HeapError::BadRecord`].

use bufmgr::{BlockNumber, RelId};

use crate::tuple::Tid;

pub use crate::kind::ErrorKind;

/// Result type of the heap.
pub type Result<T, E = HeapError> = std::result::Result<T, E>;

/// An error from the heap.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HeapError {
    /// The row does not fit on one page (there is no TOAST).
    #[error("{rel}: row of {len} bytes is too large (at most {max} bytes fit on a page)")]
    RowTooLarge { rel: RelId, len: usize, max: usize },

    /// A TID that cannot name a tuple of this relation (offset 0, or a block
    /// past the end of the relation).
    #[error("{rel}: bad tuple id {tid}: {reason}")]
    BadTid {
        rel: RelId,
        tid: Tid,
        reason: &'static str,
    },

    /// An update or delete of a tuple the transaction cannot see: never
    /// committed, deleted before its snapshot, already deleted or updated by
    /// itself, or removed by vacuum.
    #[error("{rel}: tuple {tid} is not visible to transaction {xid}")]
    NotVisible { rel: RelId, tid: Tid, xid: u64 },

    /// A concurrent transaction (in progress, or committed after our
    /// snapshot) already updated or deleted the tuple. Under snapshot
    /// isolation the first updater wins; the caller must abort.
    #[error(
        "{rel}: write conflict on tuple {tid}: it was updated or deleted by a concurrent transaction"
    )]
    WriteConflict { rel: RelId, tid: Tid },

    /// A heap page whose bytes break the page format.
    #[error("{rel} block {block}: corrupt heap page: {detail}")]
    CorruptPage {
        rel: RelId,
        block: BlockNumber,
        detail: String,
    },

    /// A heap WAL record that redo cannot apply.
    #[error("bad heap WAL record: {0}")]
    BadRecord(String),

    /// An error from the buffer pool.
    #[error(transparent)]
    Buffer(#[from] bufmgr::Error),

    /// An error from the write-ahead log.
    #[error(transparent)]
    Wal(#[from] wal::WalError),

    /// A transaction's status could not be learned (its commit-log page
    /// could not be read): the read fails rather than guess.
    #[error(transparent)]
    Status(#[from] crate::txn::StatusError),
}

impl HeapError {
    /// Whose fault this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            HeapError::RowTooLarge { .. }
            | HeapError::BadTid { .. }
            | HeapError::NotVisible { .. } => ErrorKind::BadInput,
            HeapError::WriteConflict { .. } => ErrorKind::Conflict,
            HeapError::CorruptPage { .. } | HeapError::BadRecord(_) => ErrorKind::CorruptData,
            HeapError::Buffer(e) => match e.kind() {
                bufmgr::ErrorKind::BadInput => ErrorKind::BadInput,
                bufmgr::ErrorKind::CorruptData => ErrorKind::CorruptData,
                bufmgr::ErrorKind::Io => ErrorKind::Io,
                bufmgr::ErrorKind::ResourceExhausted => ErrorKind::ResourceExhausted,
            },
            HeapError::Wal(e) => match e.kind() {
                wal::ErrorKind::BadInput => ErrorKind::BadInput,
                wal::ErrorKind::CorruptData => ErrorKind::CorruptData,
                wal::ErrorKind::Io => ErrorKind::Io,
            },
            HeapError::Status(e) => e.kind,
        }
    }

    /// Is this a write conflict (abort and retry)?
    pub fn is_conflict(&self) -> bool {
        matches!(self, HeapError::WriteConflict { .. })
    }
}
