//! [`ErrorKind`]: whose fault an error is. Its own module, below `error`
//! and `txn`, so that the status lookup's error (`txn`) can carry a kind
//! without `txn` importing the heap's error type, which names tuple ids.

/// Whose fault an error is.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ErrorKind {
    /// The caller asked for something impossible (a row too large, a TID
    /// that does not exist, a change to a tuple it cannot see).
    BadInput,
    /// Another transaction changed the tuple first: abort and retry.
    Conflict,
    /// A page or WAL record is not what the heap wrote.
    CorruptData,
    /// The operating system, or the pool / WAL below it, failed.
    Io,
    /// A resource ran out (every buffer pinned).
    ResourceExhausted,
}
