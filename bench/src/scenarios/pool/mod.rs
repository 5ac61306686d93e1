//! Scenarios of the buffer pool itself: the clock sweep's cost per victim
//! (`sweep`, `ticks`), partitioned sweeps under a sequential scan
//! (`seqscan-partitions`), and hint bits set on a first scan (`hint-bits`).

pub mod hint_bits;
pub mod raw_pread;
pub mod seqscan_partitions;
pub mod sweep;
