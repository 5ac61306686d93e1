//! Scenarios that run the whole engine (heap tables, B-tree indexes, WAL)
//! with a pool smaller than the data: write mixes (`oltp`), point lookups
//! (`readonly`), lookups beside a bulk load (`bulkload`) or a big scan
//! (`scan-resistance`), and index probes (`index-residency`). `tables` holds
//! the pgbench-like data sets, caches and checks they share.

pub mod bulkload;
pub mod index_residency;
pub mod oltp;
pub mod readonly;
pub mod scan_resistance;
pub mod tables;
