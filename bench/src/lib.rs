#![doc = include_str!("../README.md")]

pub mod cache;
pub mod check;
pub mod common;
pub mod data;
pub mod dataset;
pub mod dirs;
pub mod error;
pub mod harness;
pub mod latency;
pub mod meta;
pub mod plot;
pub mod replay;
pub mod scenarios;
pub mod spread;
pub mod step;
pub mod tracegen;
pub mod watch;

pub use common::{CommonArgs, Settings};
pub use error::{BenchError, Result};
pub use scenarios::ScenarioKind;
