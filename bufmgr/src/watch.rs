//! Watching a live pool: finding the open pools (the process-wide registry
//! kept by the pool, `pool/registry.rs`), and a cheap snapshot of one pool's
//! buffer states (decoded by [`BufferState`], in `desc`), partitions and
//! clock hands.
//!
//! `bench --watch` draws the pool of whatever scenario is running. Rather
//! than hand every scenario's pool to the view, the view finds it here:
//!
//! ```text
//!   enable_watching(true)          (once, before any pool opens)
//!        │
//!   BufferPool::with_wal ── WATCHING? ──no──> nothing (one relaxed load)
//!        │ yes
//!        └─> LIVE: [(id 3, Weak), (id 7, Weak), ...]   (a mutex, taken only
//!                                                       at open and drop)
//!   the view, a few times a second:
//!        newest_pool() ─> PoolWatch (Weak) ─> snapshot() ─> PoolSnapshot
//!   BufferPool::drop ─> removes its entry
//! ```
//!
//! # Rules
//! 1. With watching off (the default) a pool's open costs one relaxed load
//!    of the `WATCHING` flag and nothing else; nothing on any hot path reads it.
//! 2. A pool is in the registry from the end of its open to the start of its
//!    drop, and only if watching was on when it opened.
//! 3. The registry holds [`Weak`] handles: it never keeps a pool's memory
//!    alive, and a [`PoolWatch`] whose pool is gone returns `None`.
//! 4. A snapshot never stops the pool: each buffer's state word is read with
//!    one relaxed load, without the header lock, so the rows are not one
//!    instant's picture (a buffer may change between two loads) but each
//!    row is a state the buffer really had. Clock hands are read the same
//!    way. The statistics come from [`BufferPool::stats`].
//!
//! # Shortcuts
//! - The newest pool is the one with the highest id, which is the pool
//!   opened last; a scenario that builds its data with one pool and measures
//!   with another is shown measuring as soon as the second opens.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::desc::BufferId;
pub use crate::desc::BufferState;
use crate::pool::registry;
pub use crate::pool::registry::{enable_watching, watching_enabled};
use crate::pool::{BufferPool, PoolShared};
use crate::replacement::evictor::Evictor;
use crate::stats::PoolStats;

/// A handle on a registered pool that does not keep it alive.
#[derive(Clone, Debug)]
pub struct PoolWatch {
    id: u64,
    pool: Weak<PoolShared>,
}

impl PoolWatch {
    /// The pool's process-unique id (pools opened later have higher ids).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// A snapshot of the pool, or `None` once it has been dropped.
    pub fn snapshot(&self) -> Option<PoolSnapshot> {
        let shared = self.pool.upgrade()?;
        if !registry::is_registered(self.id) {
            // Dropped (rule 2): its memory may linger a moment, not its entry.
            return None;
        }
        Some(PoolSnapshot::of(&shared))
    }
}

/// Every registered pool that is still open, oldest first.
pub fn live_pools() -> Vec<PoolWatch> {
    registry::registered()
        .into_iter()
        .map(|(id, pool)| PoolWatch { id, pool })
        .collect()
}

/// The pool opened last of those still open (the scenario's measured run).
pub fn newest_pool() -> Option<PoolWatch> {
    live_pools().into_iter().max_by_key(|p| p.id)
}

/// One sweep partition and its clock hand, as a snapshot saw them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    /// First buffer and number of buffers.
    pub first: BufferId,
    pub len: u32,
    /// NUMA node of the range.
    pub node: usize,
    /// The buffer the hand visits next, relative to `first`.
    pub hand: u32,
    /// Completed passes of the hand over the partition.
    pub passes: u64,
}

/// What the live view draws: every buffer's state, the partitions with
/// their hands, and the statistics, all from one pool at about one moment.
#[derive(Clone, Debug)]
pub struct PoolSnapshot {
    pub pool_id: u64,
    pub evictor: Evictor,
    /// Indexed by buffer id.
    pub buffers: Vec<BufferState>,
    pub partitions: Vec<PartitionView>,
    pub stats: PoolStats,
    pub taken: Instant,
    /// The pool's live miss-ratio curve, when it keeps one
    /// ([`crate::PoolConfig::mrc`]): what the sampler holds now (other
    /// threads' last partial batches not yet in).
    pub mrc: Option<crate::mrc::MissRatioCurve>,
}

impl PoolSnapshot {
    fn of(s: &Arc<PoolShared>) -> PoolSnapshot {
        let buffers = s
            .descs
            .iter()
            .map(|d| BufferState::from_word(d.state.load(Ordering::Relaxed), s.evictor))
            .collect();
        let partitions = s
            .parts
            .partitions()
            .iter()
            .zip(s.hands.iter())
            .map(|(p, h)| {
                let (passes, hand) = h.position();
                PartitionView {
                    first: p.first,
                    len: p.len,
                    node: p.node,
                    hand,
                    passes,
                }
            })
            .collect();
        PoolSnapshot {
            pool_id: s.id,
            evictor: s.evictor,
            buffers,
            partitions,
            stats: BufferPool::stats_of(s),
            taken: Instant::now(),
            mrc: None,
        }
        .with_curve(s)
    }

    fn with_curve(mut self, s: &Arc<PoolShared>) -> PoolSnapshot {
        if let Some(sampler) = &s.mrc {
            let accesses = self.stats.totals().accesses;
            self.mrc = Some(sampler.lock().curve(Some(accesses)));
        }
        self
    }
}

impl BufferPool {
    /// A snapshot for the live view ([`crate::watch`] rule 4): relaxed loads
    /// of every state word and hand, no header lock, no syscall.
    pub fn watch_snapshot(&self) -> PoolSnapshot {
        PoolSnapshot::of(&self.shared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileStorage, PoolConfig};

    fn pool(dir: &std::path::Path) -> BufferPool {
        let storage = Arc::new(FileStorage::open(dir).unwrap());
        BufferPool::new(PoolConfig::new(16).bgwriter(None), storage).unwrap()
    }

    /// One test, because it flips the process-wide switch: run as two tests
    /// they would race on it.
    #[test]
    fn a_pool_is_registered_only_while_it_lives_and_only_when_watching() {
        let dir = tempfile::tempdir().unwrap();
        enable_watching(false);
        let unwatched = pool(dir.path());
        let id = unwatched.shared.id;
        assert!(
            live_pools().iter().all(|p| p.id() != id),
            "a pool opened with watching off is not registered"
        );
        enable_watching(true);
        let watched = pool(dir.path());
        let wid = watched.shared.id;
        enable_watching(false);
        let handle = live_pools()
            .into_iter()
            .find(|p| p.id() == wid)
            .expect("a pool opened with watching on is registered");
        let snap = handle.snapshot().expect("the pool is open");
        assert_eq!(snap.pool_id, wid);
        assert_eq!(snap.buffers.len(), 16);
        assert!(live_pools().iter().all(|p| p.id() != id));
        drop(watched);
        assert!(
            live_pools().iter().all(|p| p.id() != wid),
            "a dropped pool leaves the registry"
        );
        assert!(handle.snapshot().is_none(), "and its handle sees it gone");
        drop(unwatched);
    }
}
