//! `bench tpcc`: TPC-C on the engine (bench/SCENARIOS.md, "tpcc").
//!
//! - `spec`: the scale, the spec's random functions and each
//!   transaction's input, independent of the database;
//! - `schema`: the nine tables, their keys and secondary indexes, and the
//!   initial population;
//! - `backend`: the traits a database implements to run it;
//! - `checks`: consistency conditions 1 to 4;
//! - `engine_side`: the engine's backend (schema, load, the five
//!   transactions);
//! - `driver`: the terminal threads, the mix, counts and latencies.

pub mod backend;
pub mod checks;
pub mod driver;
pub mod engine_side;
pub mod schema;
pub mod spec;
