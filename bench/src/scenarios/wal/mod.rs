//! Scenarios of the write-ahead log: group commit against the raw fsync rate
//! (`wal-commit`) and SIGKILL cycles with every acknowledged commit checked
//! after recovery (`crash-soak`).

pub mod crash_soak;
pub mod wal_commit;
