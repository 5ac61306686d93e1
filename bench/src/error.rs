//! Errors of the bench program, grouped by fault: the pool's own errors, bad
//! options, files we could not read or write, and data that failed its check.

use std::path::PathBuf;

/// Anything that stops a scenario.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The buffer pool refused or failed an operation.
    #[error(transparent)]
    Pool(#[from] bufmgr::Error),
    /// The write-ahead log failed.
    #[error(transparent)]
    Wal(#[from] wal::WalError),
    /// A heap operation failed.
    #[error(transparent)]
    Heap(#[from] heap::HeapError),
    /// The transaction manager or recovery failed.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// A trace in a public format could not be read or written.
    #[error(transparent)]
    Trace(#[from] lab::formats::FormatError),
    /// An option value that cannot be run.
    #[error("invalid option: {0}")]
    Config(String),
    /// A file of our own (the JSON report, a data-directory copy) could not
    /// be written or read.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("JSON report {path}: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A page did not hold what the benchmark wrote into it: the run is void.
    #[error("data check failed: {0}")]
    Data(String),
    /// A plot could not be drawn.
    #[error("plot: {0}")]
    Plot(String),
    /// A worker thread panicked.
    #[error("worker thread panicked: {0}")]
    Panic(String),
    /// SQLite failed (`compare-sqlite`, built with `--features sqlite`).
    #[error("SQLite: {0}")]
    Sqlite(String),
    /// The scenario needs a cargo feature this build does not have.
    #[error("{0}")]
    Unavailable(String),
}

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for BenchError {
    fn from(e: rusqlite::Error) -> Self {
        BenchError::Sqlite(e.to_string())
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// A conflict inside a bench closure run by the engine's retrying
/// transaction is retried like the engine's own error; the bench's errors
/// are not.
impl engine::RetryableError for BenchError {
    fn is_retryable(&self) -> bool {
        matches!(self, BenchError::Engine(e) if e.is_retryable())
    }
}
