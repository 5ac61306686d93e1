//! Page replacement: which buffer gives up its page when a new one is needed.
//!
//! - [`evictor`]: the three policies (clock, HOT/COOL, probation) as rules
//!   over one sweep: what a pin does to a buffer's usage bits, what a tick of
//!   the hand does, what a pop of the probation queue does.
//! - [`sweep`]: a partition's clock hand and batched claims of its ticks.
//! - [`probation`]: the probation evictor's per-partition queue and the
//!   ghost set kept in the mapping partitions.
//! - [`ring`]: buffer rings (access strategies) for bulk reads, bulk writes
//!   and vacuum.
//!
//! All four work on buffer ids and state words (`desc`) only; the pool
//! (`pool::victim`) drives them. Their paths at the crate root
//! (`bufmgr::evictor`, ...) are re-exports.

pub mod evictor;
pub mod probation;
pub mod ring;
pub mod sweep;
