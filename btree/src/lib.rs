#![doc = include_str!("../README.md")]

pub mod build;
pub mod error;
pub mod index;
pub mod insert;
pub mod key;
mod optimistic;
pub mod page;
pub mod range;
pub mod record;

pub mod residency;
pub mod scan;
pub mod vacuum;
pub mod verify;

pub use build::BuildStats;
pub use error::{BtreeError, ErrorKind, Result};
pub use index::{Index, IndexOptions};
pub use insert::{AssumeLive, HeapVisibility, LEAF_FILLFACTOR, Liveness, NONLEAF_FILLFACTOR};
pub use key::{ColumnKind, Key, KeyPart, KeyType, MAX_KEY_COLUMNS, TupleType};
pub use page::{MAX_KEY_SIZE, NEWEST_FORMAT, PageKind, page_kind};
pub use range::{Direction, KeyBounds};
pub use record::redo;
pub use residency::Residency;
pub use scan::Scan;
pub use vacuum::VacuumStats;
pub use verify::{HeapRow, Violation};
