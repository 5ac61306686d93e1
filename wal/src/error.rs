//! The write-ahead log's errors, grouped by whose fault they are.
//!
//! A message names the segment file and the LSN wherever one is involved, so an
//! operator reading it knows where to look. Bad input, damaged bytes on disk and
//! a failing file system never cause a panic: they come back as a [`WalError`].

use std::io;
use std::path::PathBuf;

use crate::lsn::Lsn;

/// Result type of the write-ahead log.
pub type Result<T, E = WalError> = std::result::Result<T, E>;

/// Whose fault an error is, so callers can decide what to do about it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ErrorKind {
    /// The caller asked for something invalid (configuration, record limits,
    /// a start position, a flush past the end of the log).
    BadInput,
    /// Bytes in the log are not what was written.
    CorruptData,
    /// The operating system refused an operation, or an earlier one failed.
    Io,
}

/// An error from the write-ahead log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    // ---- bad input ----
    /// A configuration value is out of range.
    #[error("invalid WAL configuration: {0}")]
    InvalidConfig(String),

    /// A record that breaks a format limit (too many blocks, payload too long,
    /// a page of the wrong size, a hole outside the page).
    #[error("invalid WAL record: {0}")]
    InvalidRecord(String),

    /// `Wal::open` cannot start reading where it was asked to.
    #[error("cannot open the WAL at {lsn}: {detail}")]
    InvalidStart { lsn: Lsn, detail: String },

    /// `flush` was asked for a position no record has reached yet.
    #[error("cannot flush WAL to {lsn}: nothing has been inserted past {insert_lsn}")]
    FlushPastEnd { lsn: Lsn, insert_lsn: Lsn },

    /// `recycle_before` was asked to remove WAL that is not durable yet.
    #[error("cannot remove WAL segments before {lsn}: WAL is flushed only to {flushed_lsn}")]
    RecyclePastFlush { lsn: Lsn, flushed_lsn: Lsn },

    // ---- corrupt data ----
    /// `record::decode` found bytes that are not a well-formed record.
    #[error("malformed WAL record at byte {offset} of the record: {detail}")]
    MalformedRecord { offset: usize, detail: String },

    /// The reader found damage in the middle of the log: an invalid record
    /// with valid records after it, a broken prev-LSN chain, or a record whose
    /// checksum is right but whose contents do not decode.
    #[error("corrupt WAL at {lsn} in segment {file}: {detail}")]
    CorruptRecord {
        lsn: Lsn,
        file: PathBuf,
        detail: String,
    },

    /// The control file exists but cannot be trusted: wrong size, a CRC
    /// mismatch, an unknown format version, or values that contradict each
    /// other. Recovery cannot know where to start; nothing is guessed.
    #[error("corrupt control file {file}: {detail}")]
    CorruptControlFile { file: PathBuf, detail: String },

    /// The WAL directory is gone although the control file names a
    /// checkpoint in it.
    #[error("missing WAL directory {dir}: {detail}")]
    MissingDirectory { dir: PathBuf, detail: String },

    /// A file in the WAL directory that cannot be a segment of this log.
    #[error("corrupt WAL segment {file}: {detail}")]
    CorruptSegment { file: PathBuf, detail: String },

    // ---- I/O ----
    /// An operating-system error on a WAL file.
    #[error("could not {op} {path}: {source}")]
    Io {
        /// What was being done, with the LSN where there is one
        /// ("write at 0/1A2B", "fdatasync").
        op: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// A checkpoint's `flush_pages` step (writing the buffer pool's dirty
    /// pages) failed; the checkpoint was abandoned before its record and the
    /// control file were written, so the previous checkpoint still stands.
    #[error("checkpoint with redo point {redo} failed while flushing pages: {source}")]
    CheckpointFlush {
        redo: Lsn,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// Replaying a record into the buffer pool failed.
    #[error("redo of {tag} failed: {source}")]
    Redo {
        tag: bufmgr::BufferTag,
        #[source]
        source: bufmgr::Error,
    },

    /// An earlier write or fdatasync failed. After a failed fdatasync the
    /// kernel may have dropped the dirty pages, so a retry could report
    /// success for data that is gone (PostgreSQL PANICs here); the log refuses
    /// every later insert and flush instead.
    #[error("the WAL refuses writes: an earlier write failed ({0})")]
    WritesRefused(String),
}

impl WalError {
    /// Whose fault this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            WalError::InvalidConfig(_)
            | WalError::InvalidRecord(_)
            | WalError::InvalidStart { .. }
            | WalError::FlushPastEnd { .. }
            | WalError::RecyclePastFlush { .. } => ErrorKind::BadInput,
            WalError::MalformedRecord { .. }
            | WalError::CorruptRecord { .. }
            | WalError::CorruptSegment { .. }
            | WalError::MissingDirectory { .. }
            | WalError::CorruptControlFile { .. } => ErrorKind::CorruptData,
            WalError::Io { .. } | WalError::CheckpointFlush { .. } | WalError::WritesRefused(_) => {
                ErrorKind::Io
            }
            WalError::Redo { source, .. } => match source.kind() {
                bufmgr::ErrorKind::BadInput => ErrorKind::BadInput,
                bufmgr::ErrorKind::CorruptData => ErrorKind::CorruptData,
                bufmgr::ErrorKind::Io | bufmgr::ErrorKind::ResourceExhausted => ErrorKind::Io,
            },
        }
    }

    /// Shorthand for a [`WalError::Io`].
    pub(crate) fn io(op: impl Into<String>, path: impl Into<PathBuf>, source: io::Error) -> Self {
        WalError::Io {
            op: op.into(),
            path: path.into(),
            source,
        }
    }
}
