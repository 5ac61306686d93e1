//! `bench tpcc`: TPC-C on the engine (bench/SCENARIOS.md, "tpcc").
//!
//! - `spec`: the scale, the spec's random functions and each
//!   transaction's input, independent of the database;
//! - `schema`: the nine tables, their keys and secondary indexes, and the
//!   initial population;
//! - `backend`: the traits a database implements to run it;
//! - `checks`: consistency conditions 1 to 4.

pub mod backend;
pub mod checks;
pub mod schema;
pub mod spec;
