//! Scenarios that run the engine beside another database on the same data:
//! `compare-sqlite` (lookups, scans, bulk load and zipf probes against
//! SQLite).

pub mod compare_sqlite;
