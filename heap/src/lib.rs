#![doc = include_str!("../README.md")]

pub mod bulk;
pub mod error;
pub mod fsm;
pub mod heap;
mod kind;
pub mod page;
pub mod prune;
pub mod record;
pub mod redo;
pub mod scan;
pub mod tuple;
pub mod txn;
pub mod vacuum;
pub mod visibility;

pub use bulk::{BulkStats, BulkWriter};
pub use error::{ErrorKind, HeapError, Result};
pub use heap::Heap;
pub use prune::PruneStats;
pub use redo::redo;
pub use scan::{RingChoice, ScanOptions, ScanStats};
pub use tuple::{Tid, TupleHeader};
pub use txn::{InMemoryTransactions, Snapshot, TransactionStatus, XidStatus};
pub use vacuum::{DeadTids, FreeDeadStats, VacuumStats};
pub use visibility::HintMode;
