//! The buffer manager's errors, grouped by whose fault they are.
//!
//! Every variant that concerns a page names the relation and block, and where a
//! file is involved, its path. Bugs may panic; bad input, bad bytes on disk and a
//! failing environment never do: they come back as one of these.

use std::io;
use std::path::PathBuf;

use crate::tag::{BlockNumber, BufferTag, RelFork};

/// Result type of the buffer manager.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whose fault an error is, so callers can decide what to do about it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ErrorKind {
    /// The caller asked for something invalid (configuration, block number).
    BadInput,
    /// Bytes on disk are not what was written (checksum mismatch, short file).
    CorruptData,
    /// The operating system refused an operation.
    Io,
    /// A resource ran out (every buffer pinned, no file descriptor left).
    ResourceExhausted,
}

/// An error from the buffer manager.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range or inconsistent.
    #[error("invalid buffer pool configuration: {0}")]
    InvalidConfig(String),

    /// A read of a block at or past the end of the relation's file.
    #[error("{relfork}: block {block} is beyond the end of the file {path} ({nblocks} blocks)")]
    BlockOutOfRange {
        relfork: RelFork,
        block: BlockNumber,
        nblocks: BlockNumber,
        path: PathBuf,
    },

    /// A page whose stored checksum does not match its contents.
    #[error(
        "checksum mismatch in {tag} (file {path}): stored {stored:#010x}, computed {computed:#010x}"
    )]
    ChecksumMismatch {
        tag: BufferTag,
        path: PathBuf,
        stored: u32,
        computed: u32,
    },

    /// A page read with checksums on is all zeros, its checksum field too:
    /// not a page this pool wrote (a blank page from an extension carries
    /// its checksum), so whatever it held is gone. See `bufmgr::page`.
    #[error(
        "zeroed page: {tag} (file {path}) is all zeros, checksum included; its rows may be lost \
         (open with zero_damaged_pages to read it as empty)"
    )]
    ZeroedPage { tag: BufferTag, path: PathBuf },

    /// A file that is shorter than its block count says, or otherwise malformed.
    #[error("corrupt file {path} ({relfork}): {detail}")]
    CorruptFile {
        relfork: RelFork,
        path: PathBuf,
        detail: String,
    },

    /// An operating-system error on a relation file.
    #[error("could not {op} {path} ({what}): {source}")]
    Io {
        op: &'static str,
        what: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// An earlier write failed, so the pool no longer trusts its files.
    #[error("the buffer pool refuses writes: an earlier write failed ({0})")]
    WritesRefused(String),

    /// Flushing the WAL before a data page write failed.
    #[error("could not flush WAL to {lsn:#x} before writing {tag}: {detail}")]
    WalFlush {
        lsn: u64,
        tag: BufferTag,
        detail: String,
    },

    /// One buffer is pinned as often as its refcount field can count.
    #[error("{tag} is pinned {pins} times, the most one buffer can count")]
    TooManyPins { tag: BufferTag, pins: u64 },

    /// The sweep saw a whole pool's worth of pinned buffers in every partition.
    #[error("no unpinned buffers available: all {pool_size} buffers are pinned")]
    NoUnpinnedBuffers { pool_size: usize },

    /// A trace file (see [`crate::trace`]) that is not what the writer writes.
    #[error("bad trace file {path} at byte offset {offset}: {detail}")]
    BadTrace {
        path: PathBuf,
        offset: u64,
        detail: String,
    },
}

impl Error {
    /// Whose fault this error is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidConfig(_) | Error::BlockOutOfRange { .. } => ErrorKind::BadInput,
            Error::ChecksumMismatch { .. }
            | Error::ZeroedPage { .. }
            | Error::CorruptFile { .. }
            | Error::BadTrace { .. } => ErrorKind::CorruptData,
            // Out of descriptors: not the disk's fault, and the operation
            // may work once other files are closed.
            Error::Io { source, .. } if is_out_of_descriptors(source) => {
                ErrorKind::ResourceExhausted
            }
            Error::Io { .. } | Error::WritesRefused(_) | Error::WalFlush { .. } => ErrorKind::Io,
            Error::NoUnpinnedBuffers { .. } | Error::TooManyPins { .. } => {
                ErrorKind::ResourceExhausted
            }
        }
    }

    /// Shorthand for an [`Error::Io`].
    pub fn io(
        op: &'static str,
        what: impl ToString,
        path: impl Into<PathBuf>,
        source: io::Error,
    ) -> Error {
        Error::Io {
            op,
            what: what.to_string(),
            path: path.into(),
            source,
        }
    }
}

/// Is `e` the process (`EMFILE`) or the system (`ENFILE`) out of file
/// descriptors?
pub fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}
