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
//! | bad input | `InvalidXid` |
//! | corrupt data | `MalformedXactRecord` |
//! | I/O (or an earlier I/O failure) | `Buffer`, `Wal` |
//! | raised by a caller's redo function | `Redo` |

use wal::Lsn;

use crate::txn::Xid;

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
        }
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
