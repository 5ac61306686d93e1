//! Scenarios that run the engine beside another database on the same data:
//! `compare-sqlite` (lookups, scans, bulk load and zipf probes against
//! SQLite), and `tpcc` (TPC-C, with a backend trait another database can
//! implement).

pub mod compare_sqlite;
pub mod tpcc;
