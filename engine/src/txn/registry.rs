//! The snapshot registry: the xmin of every live snapshot (transactions and
//! the iterators that outlive them), which bounds what vacuum may remove.
//!
//! ```text
//!   shard 0  Mutex<BTreeMap<xmin, count>>   <- threads whose running-set shard is 0
//!   ...
//!   shard 15
//!   register:  lock my shard; take the snapshot; count its xmin   (one lock)
//!   release:   lock the shard it was registered in; uncount
//!   horizon:   lock every shard (in order); oldest running xid; min over shards
//! ```
//!
//! Rules:
//! 1. A snapshot is taken *under* its shard's lock, and the horizon is
//!    computed under every shard's lock, so a vacuum never misses a snapshot
//!    being registered: either the registration finished first (its xmin is
//!    counted), or it starts after the horizon was fixed, and then its xmin
//!    is at least the oldest running xid of that moment, which only grows.
//! 2. A registration is released in the shard it was made in (the
//!    registration names it), whichever thread releases it: a transaction
//!    may move between threads.
//! 3. Each thread registers in its running-set shard, so threads of a
//!    read-only workload take different locks (PostgreSQL keeps each
//!    backend's xmin in its own PGPROC slot for the same reason).

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::txn::Xid;
use crate::txn::snapshot::{SHARDS, thread_shard};

#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<BTreeMap<Xid, usize>>);

/// The registry (module docs).
#[derive(Debug)]
pub(crate) struct SnapshotRegistry {
    shards: Box<[Shard]>,
}

impl Default for SnapshotRegistry {
    fn default() -> SnapshotRegistry {
        SnapshotRegistry {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl SnapshotRegistry {
    /// Take a snapshot with `take` and register its xmin (rule 1); returns
    /// it and the shard to release it in.
    pub fn register(&self, take: impl FnOnce() -> heap::Snapshot) -> (heap::Snapshot, usize) {
        let shard = thread_shard();
        let mut reg = self.shards[shard].0.lock();
        let snap = take();
        *reg.entry(snap.xmin).or_insert(0) += 1;
        (snap, shard)
    }

    /// Register `xmin` once more (the caller holds a registration of it, so
    /// the horizon has not passed it); returns the shard.
    pub fn register_again(&self, xmin: Xid) -> usize {
        let shard = thread_shard();
        *self.shards[shard].0.lock().entry(xmin).or_insert(0) += 1;
        shard
    }

    /// Release one registration of `xmin` made in `shard` (rule 2).
    pub fn release(&self, xmin: Xid, shard: usize) {
        let mut reg = self.shards[shard].0.lock();
        if let Some(n) = reg.get_mut(&xmin) {
            *n -= 1;
            if *n == 0 {
                reg.remove(&xmin);
            }
        }
    }

    /// The oldest xid a live snapshot may treat as running: the smaller of
    /// every registered xmin and `oldest_running()` (asked under every
    /// shard's lock, rule 1).
    pub fn horizon(&self, oldest_running: impl FnOnce() -> Xid) -> Xid {
        let guards: Vec<_> = self.shards.iter().map(|s| s.0.lock()).collect();
        let running = oldest_running();
        guards
            .iter()
            .filter_map(|g| g.keys().next().copied())
            .fold(running, Xid::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use heap::txn::Snapshot;

    #[test]
    fn the_horizon_is_the_oldest_registered_xmin_in_any_shard() {
        let r = SnapshotRegistry::default();
        assert_eq!(r.horizon(|| 100), 100);
        let (_, s1) = r.register(|| Snapshot::all_committed(40));
        let s2 = r.register_again(40);
        let (_, s3) = r.register(|| Snapshot::all_committed(70));
        assert_eq!(r.horizon(|| 100), 40);
        assert_eq!(r.horizon(|| 30), 30);
        // Released from another thread, in the shard it was made in.
        std::thread::scope(|s| {
            s.spawn(|| r.release(40, s1));
        });
        assert_eq!(r.horizon(|| 100), 40, "one registration of 40 left");
        r.release(40, s2);
        assert_eq!(r.horizon(|| 100), 70);
        r.release(70, s3);
        assert_eq!(r.horizon(|| 100), 100);
    }
}
