//! The machine's NUMA shape and what the pool does with it.
//!
//! - [`topology`]: NUMA nodes and the CPUs in each (sysfs, or hwloc behind
//!   the `hwloc` feature; synthetic machines for tests and benchmarks);
//!   pinning a thread to a CPU.
//! - [`partition`]: the partition map built once at open from the
//!   topology (which buffers form which sweep partition, on which node),
//!   home partitions and balancing.
//! - [`placement`]: NUMA memory: the placement plan of the page arena
//!   (pure), `mbind` of the plan, `move_pages` queries of where pages are.
//!   Its items are re-exported here (`bufmgr::numa::PlacementPlan`).
//!
//! Imports run one way: `placement` uses `partition` and `topology`,
//! `partition` uses `topology`. The crate root re-exports `topology` and
//! `partition` at their old paths (`bufmgr::topology`, `bufmgr::partition`).

pub mod partition;
pub mod placement;
pub mod topology;

pub(crate) use placement::log_refused;
pub use placement::{
    HUGE_PAGE, PlacedRange, PlacementPlan, Policy, SMALL_PAGE, apply, bind_interior,
    buffers_per_page, nodes_of,
};
