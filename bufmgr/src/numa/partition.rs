//! The partition map: which buffers form which sweep partition, on which NUMA
//! node, and how allocations are balanced between partitions.
//!
//! Built once when the pool is created and only read afterwards (one
//! definition of the partitions that everything else reads, as Tomas Vondra
//! proposed on pgsql-hackers), after his NUMA series (`buf_init.c`,
//! `freelist.c`).
//!
//! ```text
//!  buffers  0 ........ 4095 | 4096 ...... 8191 | 8192 ..... 12287 | 12288 .... 16383
//!  part.    0               | 1                | 2                | 3
//!  node     0               | 0                | 1                | 1
//!  hand     own ClockHand   | own ClockHand    | own ClockHand    | own ClockHand
//!
//!  balance[home][target]: weights 0..100; a thread spends a budget of
//!  balance[home][t] allocations on partition t, then moves to the next t.
//! ```
//!
//! # Rules
//! 1. Partitions are contiguous, equal ranges; the first `nbuffers % count` get
//!    one buffer more (the intent of Vondra's code, whose remainder formula has
//!    a quirk).
//! 2. Without an explicit count there are `nodes * ceil(4 / nodes)` partitions
//!    (`MIN_BUFFER_PARTITIONS` = 4): 4 on one or two nodes, 6 on three.
//!    Fewer if the pool is too small to give each [`MIN_PARTITION_BUFFERS`].
//! 3. A partition floor (minimum buffers per partition) lowers the count until
//!    every partition holds at least that many: the cure suggested on pgsql-hackers
//!    for a scan that no longer fits its home partition.
//! 4. A thread's home partition: on a multi-node machine, one of its CPU's
//!    node's partitions, re-checked every [`HOME_RECHECK_EVERY`] allocations
//!    (one `sched_getcpu`, a vDSO call, per check: a thread the scheduler
//!    moved to another node follows within that many allocations);
//!    otherwise (virtual partitions on one node) round-robin by the order
//!    threads first touch the pool, and never changed.
//! 5. Without balancing a thread takes every victim from its home partition
//!    (falling back to the others only when home has no unpinned buffer).
//!    With balancing, the weights are recomputed whenever the threads of one
//!    home partition have asked for [`REBALANCE_EVERY`] allocations since the
//!    last round, from who asked for how many (Vondra's
//!    `StrategySyncBalance`), blended half-and-half with the previous weights.
//!    Each home counts in its own cache line: no counter shared by every
//!    thread on the allocation path.
//! 6. When the pool's memory is bound to NUMA nodes, partition boundaries
//!    are multiples of a memory page ([`build_aligned`](PartitionMap::build_aligned):
//!    1 buffer with 4 KiB pages, 256 with 2 MiB huge pages), so no page holds
//!    buffers of two nodes; see `numa`.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::topology::Topology;
use crate::desc::BufferId;
use crate::error::{Error, Result};
use crate::replacement::sweep::CachePadded;

/// Partitions when the count comes from the topology (Vondra: `MIN_BUFFER_PARTITIONS`).
pub const MIN_BUFFER_PARTITIONS: usize = 4;
/// Upper limit on partitions (Vondra: `MAX_BUFFER_PARTITIONS`); also the width
/// of the balance table.
pub const MAX_PARTITIONS: usize = 32;
/// Smallest partition the automatic count will make. A sweep over fewer
/// buffers than this mostly finds pinned ones.
pub const MIN_PARTITION_BUFFERS: usize = 16;
/// Allocations by one thread between two checks of which CPU (so which
/// node) it runs on (rule 4).
pub const HOME_RECHECK_EVERY: u32 = 64;
/// Allocations asked for by one home partition's threads between two
/// rebalancing rounds.
pub const REBALANCE_EVERY: u64 = 4096;
/// Rebalancing is skipped while the average partition saw fewer allocations
/// than this (Vondra: "avg < 100").
const REBALANCE_MIN_AVG: f64 = 100.0;
/// ... or while the imbalance is under this fraction of the average.
const REBALANCE_MIN_DELTA: f64 = 0.1;
/// Weight given to the previous round (Vondra: `CLOCKSWEEP_HISTORY_COEFF`).
const HISTORY_COEFF: f64 = 0.5;

/// How to partition the pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionSpec {
    /// Number of partitions; `None` derives it from the topology (rule 2).
    pub count: Option<usize>,
    /// Minimum buffers per partition (rule 3); `None` for no floor.
    pub floor: Option<usize>,
    /// Balance allocations across partitions (rule 5).
    pub balancing: bool,
}

impl Default for PartitionSpec {
    fn default() -> Self {
        PartitionSpec {
            count: None,
            floor: None,
            balancing: true,
        }
    }
}

/// One partition: a contiguous range of buffers with its own clock hand.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    pub first: BufferId,
    pub len: u32,
    /// The NUMA node this range belongs to.
    pub node: usize,
}

impl Partition {
    pub fn contains(&self, buf: BufferId) -> bool {
        buf >= self.first && buf < self.first + self.len
    }
}

/// The pool's partitions and their balancing state.
#[derive(Debug)]
pub struct PartitionMap {
    parts: Vec<Partition>,
    /// Partitions of each node, in order.
    per_node: Vec<Vec<usize>>,
    /// Buffers per alignment unit (1, or a memory page's worth).
    align: usize,
    /// Length in units of the shorter partitions, and how many longer (by
    /// one unit) lead.
    base_len: usize,
    extra: usize,
    /// True when the partitions map real NUMA nodes (more than one).
    numa: bool,
    balancing: bool,
    /// `balance[home][target]`, 0..=100.
    balance: Box<[[AtomicU8; MAX_PARTITIONS]]>,
    /// Allocations requested by threads homed in each partition since the last round.
    requested: Box<[CachePadded<AtomicU64>]>,
    rebalance_lock: Mutex<()>,
}

impl PartitionMap {
    /// Build the map for `nbuffers` buffers on `topology`.
    pub fn build(
        nbuffers: usize,
        spec: &PartitionSpec,
        topology: &Topology,
    ) -> Result<PartitionMap> {
        Self::build_aligned(nbuffers, spec, topology, 1)
    }

    /// Like [`build`](Self::build), with every partition boundary a multiple
    /// of `align` buffers (rule 6): the buffers of one memory page, so that
    /// binding a partition's pages to its node never splits a page. The last
    /// partition takes the `nbuffers % align` left over. When the pool has
    /// fewer than `align` buffers per partition the boundaries stay unaligned
    /// (the placement plan says so).
    pub fn build_aligned(
        nbuffers: usize,
        spec: &PartitionSpec,
        topology: &Topology,
        align: usize,
    ) -> Result<PartitionMap> {
        let nodes = topology.node_count().max(1);
        let mut count = match spec.count {
            Some(0) => {
                return Err(Error::InvalidConfig(
                    "partition count must be at least 1".into(),
                ));
            }
            Some(c) if c > MAX_PARTITIONS => {
                return Err(Error::InvalidConfig(format!(
                    "partition count {c} is above the maximum of {MAX_PARTITIONS}"
                )));
            }
            Some(c) if c > nbuffers => {
                return Err(Error::InvalidConfig(format!(
                    "partition count {c} is larger than the pool ({nbuffers} buffers)"
                )));
            }
            Some(c) => c,
            None => {
                let per_node = MIN_BUFFER_PARTITIONS.div_ceil(nodes);
                let c = (nodes * per_node).min(MAX_PARTITIONS);
                c.min(nbuffers / MIN_PARTITION_BUFFERS).max(1)
            }
        };
        if let Some(floor) = spec.floor {
            if floor == 0 {
                return Err(Error::InvalidConfig(
                    "partition floor must be at least 1 buffer".into(),
                ));
            }
            count = count.min(nbuffers / floor).max(1);
        }

        let align = if align > 1 && nbuffers / align >= count {
            align
        } else {
            1
        };
        let units = nbuffers / align;
        let base = units / count;
        let extra = units % count;
        let mut parts = Vec::with_capacity(count);
        let mut first = 0usize;
        for i in 0..count {
            let mut len = (base + usize::from(i < extra)) * align;
            if i == count - 1 {
                len += nbuffers % align;
            }
            parts.push(Partition {
                first: first as BufferId,
                len: len as u32,
                node: i * nodes / count,
            });
            first += len;
        }
        debug_assert_eq!(first, nbuffers);
        let mut per_node = vec![Vec::new(); nodes];
        for (i, p) in parts.iter().enumerate() {
            per_node[p.node].push(i);
        }

        let balance: Box<[[AtomicU8; MAX_PARTITIONS]]> = (0..count)
            .map(|home| std::array::from_fn(|t| AtomicU8::new(if t == home { 100 } else { 0 })))
            .collect();
        let requested = (0..count).map(|_| CachePadded(AtomicU64::new(0))).collect();
        Ok(PartitionMap {
            parts,
            per_node,
            align,
            base_len: base,
            extra,
            numa: nodes > 1,
            balancing: spec.balancing,
            balance,
            requested,
            rebalance_lock: Mutex::new(()),
        })
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Never true: a map has at least one partition.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn partitions(&self) -> &[Partition] {
        &self.parts
    }

    pub fn get(&self, i: usize) -> &Partition {
        &self.parts[i]
    }

    /// Is balancing on?
    pub fn balancing(&self) -> bool {
        self.balancing
    }

    /// The partition a buffer belongs to.
    #[inline]
    pub fn partition_of(&self, buf: BufferId) -> usize {
        // Equal ranges of units with the first `extra` one unit longer:
        // invert arithmetically (the leftover buffers past the last whole
        // unit belong to the last partition).
        let b = buf as usize / self.align;
        let big = self.base_len + 1;
        let p = if b < self.extra * big {
            b / big
        } else {
            self.extra + (b - self.extra * big) / self.base_len.max(1)
        };
        p.min(self.parts.len() - 1)
    }

    /// The home partition for a thread, by rule 4. `ordinal` is the thread's
    /// registration order with the pool.
    pub fn home_for(&self, ordinal: usize, topology: &Topology) -> usize {
        if self.numa
            && let Some(cpu) = super::topology::current_cpu()
            && let Some(home) = self.home_of_cpu(cpu, topology)
        {
            return home;
        }
        ordinal % self.parts.len()
    }

    /// The home partition of a thread running on `cpu` when partitions map
    /// nodes (one of the CPU's node's partitions); `None` on one node, where
    /// homes are virtual and do not depend on the CPU.
    pub fn home_of_cpu(&self, cpu: usize, topology: &Topology) -> Option<usize> {
        if !self.numa {
            return None;
        }
        let node = topology.node_of_cpu(cpu).min(self.per_node.len() - 1);
        let candidates = &self.per_node[node];
        (!candidates.is_empty()).then(|| candidates[cpu % candidates.len()])
    }

    /// Do the partitions map real NUMA nodes (more than one)?
    pub fn is_numa(&self) -> bool {
        self.numa
    }

    /// Choose the partition for the next allocation by a thread homed in
    /// `home`, spending its balance budget. Counts the request.
    #[inline]
    pub fn choose(&self, home: usize, budget: &mut BalanceBudget) -> usize {
        if !self.balancing || self.parts.len() == 1 {
            return home;
        }
        let asked = self.requested[home].fetch_add(1, Ordering::Relaxed) + 1;
        if asked.is_multiple_of(REBALANCE_EVERY) {
            self.rebalance();
        }
        let weights = &self.balance[home];
        if budget.remaining == 0 {
            // Move to the next target with a non-zero weight (home always
            // keeps some, so this terminates after at most one lap).
            let n = self.parts.len();
            for step in 1..=n {
                let t = (budget.target + step) % n;
                let w = weights[t].load(Ordering::Relaxed);
                if w > 0 {
                    budget.target = t;
                    budget.remaining = w as u32;
                    break;
                }
            }
            if budget.remaining == 0 {
                budget.target = home;
                budget.remaining = 1;
            }
        }
        budget.remaining -= 1;
        budget.target
    }

    /// Recompute the balance weights from the requests since the last round
    /// (Vondra's `StrategySyncBalance`). Skipped if another thread is at it.
    pub fn rebalance(&self) {
        let Some(_g) = self.rebalance_lock.try_lock() else {
            return;
        };
        let n = self.parts.len();
        let allocs: Vec<f64> = self
            .requested
            .iter()
            .map(|r| r.swap(0, Ordering::Relaxed) as f64)
            .collect();
        let avg = allocs.iter().sum::<f64>() / n as f64;
        let delta: f64 = allocs.iter().filter(|&&a| a > avg).map(|a| a - avg).sum();
        if avg < REBALANCE_MIN_AVG || delta < REBALANCE_MIN_DELTA * avg {
            return;
        }
        for i in 0..n {
            let mut new = [0f64; MAX_PARTITIONS];
            if allocs[i] <= avg {
                new[i] = 100.0;
            } else {
                let frac = (allocs[i] - avg) / delta;
                new[i] = 100.0 * avg / allocs[i];
                for j in 0..n {
                    if allocs[j] < avg {
                        new[j] = 100.0 * frac * (avg - allocs[j]) / allocs[i];
                    }
                }
            }
            for (t, w) in new.iter().enumerate().take(n) {
                let old = self.balance[i][t].load(Ordering::Relaxed) as f64;
                let mut blended = (HISTORY_COEFF * old + (1.0 - HISTORY_COEFF) * w).round();
                if t == i {
                    // Home keeps at least one allocation per round.
                    blended = blended.max(1.0);
                }
                self.balance[i][t].store(blended.clamp(0.0, 100.0) as u8, Ordering::Relaxed);
            }
        }
    }

    /// The current weights of partition `home` (for tests and reports).
    pub fn weights(&self, home: usize) -> Vec<u8> {
        (0..self.parts.len())
            .map(|t| self.balance[home][t].load(Ordering::Relaxed))
            .collect()
    }
}

/// A thread's position in its home partition's balance weights.
#[derive(Copy, Clone, Debug)]
pub struct BalanceBudget {
    target: usize,
    remaining: u32,
}

impl BalanceBudget {
    pub fn new(home: usize) -> BalanceBudget {
        BalanceBudget {
            target: home,
            remaining: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(count: Option<usize>) -> PartitionSpec {
        PartitionSpec {
            count,
            floor: None,
            balancing: false,
        }
    }

    #[test]
    fn auto_count_is_four_on_one_node_and_six_on_three() {
        let one = Topology::single_node(2);
        assert_eq!(
            PartitionMap::build(16384, &spec(None), &one).unwrap().len(),
            4
        );
        let three = Topology {
            nodes: (0..3)
                .map(|id| crate::numa::topology::NumaNode { id, cpus: vec![id] })
                .collect(),
            cores: 3,
            source: crate::numa::topology::TopologySource::SingleNodeFallback,
        };
        let m = PartitionMap::build(16384, &spec(None), &three).unwrap();
        assert_eq!(m.len(), 6);
        let nodes: Vec<_> = m.partitions().iter().map(|p| p.node).collect();
        assert_eq!(nodes, [0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn ranges_are_contiguous_and_partition_of_inverts_them() {
        let topo = Topology::single_node(2);
        for (nbuf, count) in [(10, 3), (16384, 6), (17, 4), (8, 1), (100, 7)] {
            let m = PartitionMap::build(nbuf, &spec(Some(count)), &topo).unwrap();
            let mut next = 0;
            for (i, p) in m.partitions().iter().enumerate() {
                assert_eq!(p.first, next);
                next += p.len;
                for b in p.first..p.first + p.len {
                    assert_eq!(m.partition_of(b), i, "buffer {b} of {nbuf} in {count}");
                }
            }
            assert_eq!(next as usize, nbuf);
            let lens: Vec<_> = m.partitions().iter().map(|p| p.len).collect();
            assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
        }
    }

    #[test]
    fn small_pools_get_fewer_partitions_and_bad_counts_are_errors() {
        let topo = Topology::single_node(2);
        assert_eq!(PartitionMap::build(8, &spec(None), &topo).unwrap().len(), 1);
        assert_eq!(
            PartitionMap::build(40, &spec(None), &topo).unwrap().len(),
            2
        );
        assert!(PartitionMap::build(8, &spec(Some(9)), &topo).is_err());
        assert!(PartitionMap::build(8, &spec(Some(0)), &topo).is_err());
        let err = PartitionMap::build(1000, &spec(Some(99)), &topo).unwrap_err();
        assert!(err.to_string().contains("99"));
    }

    /// Rule 6: every boundary is a multiple of `align` (when each partition
    /// can have a whole unit), lengths differ by at most one unit plus the
    /// leftover in the last, and `partition_of` inverts the ranges.
    #[test]
    fn aligned_ranges_start_on_unit_boundaries() {
        let topo = Topology::single_node(2);
        for align in [1, 2, 256] {
            for nbuf in [16, 255, 256, 1024, 1537, 16384, 16384 + 255, 3000] {
                for count in [1, 3, 4, 6] {
                    let Ok(m) = PartitionMap::build_aligned(nbuf, &spec(Some(count)), &topo, align)
                    else {
                        continue;
                    };
                    let aligned = nbuf / align >= count;
                    let mut next = 0;
                    for (i, p) in m.partitions().iter().enumerate() {
                        assert_eq!(p.first, next);
                        assert!(p.len > 0);
                        if aligned {
                            assert_eq!(p.first as usize % align, 0, "{nbuf}/{count}/{align}");
                        }
                        for b in p.first..p.first + p.len {
                            assert_eq!(m.partition_of(b), i, "buffer {b}, {nbuf}/{count}/{align}");
                        }
                        next += p.len;
                    }
                    assert_eq!(next as usize, nbuf);
                }
            }
        }
    }

    #[test]
    fn floor_lowers_the_count() {
        let topo = Topology::single_node(2);
        let s = PartitionSpec {
            count: Some(6),
            floor: Some(5000),
            balancing: false,
        };
        let m = PartitionMap::build(16384, &s, &topo).unwrap();
        assert_eq!(m.len(), 3);
        assert!(m.partitions().iter().all(|p| p.len >= 5000));
    }

    #[test]
    fn virtual_homes_are_round_robin() {
        let topo = Topology::single_node(2);
        let m = PartitionMap::build(1024, &spec(Some(4)), &topo).unwrap();
        let homes: Vec<_> = (0..6).map(|i| m.home_for(i, &topo)).collect();
        assert_eq!(homes, [0, 1, 2, 3, 0, 1]);
    }

    #[test]
    fn without_balancing_every_allocation_stays_home() {
        let topo = Topology::single_node(2);
        let m = PartitionMap::build(1024, &spec(Some(4)), &topo).unwrap();
        let mut b = BalanceBudget::new(2);
        assert!((0..10_000).all(|_| m.choose(2, &mut b) == 2));
    }

    #[test]
    fn balancing_spreads_a_single_thread_over_all_partitions() {
        let topo = Topology::single_node(2);
        let s = PartitionSpec {
            count: Some(4),
            floor: None,
            balancing: true,
        };
        let m = PartitionMap::build(4096, &s, &topo).unwrap();
        let mut b = BalanceBudget::new(0);
        let mut counts = [0usize; 4];
        // Several rebalancing rounds, then measure.
        for _ in 0..(REBALANCE_EVERY * 6) {
            m.choose(0, &mut b);
        }
        for _ in 0..40_000 {
            counts[m.choose(0, &mut b)] += 1;
        }
        for (p, c) in counts.iter().enumerate() {
            assert!(
                (6_000..14_000).contains(c),
                "partition {p} got {c} of 40000: {counts:?}, weights {:?}",
                m.weights(0)
            );
        }
    }

    #[test]
    fn balanced_load_keeps_home_weights() {
        let topo = Topology::single_node(2);
        let s = PartitionSpec {
            count: Some(2),
            floor: None,
            balancing: true,
        };
        let m = PartitionMap::build(4096, &s, &topo).unwrap();
        let (mut b0, mut b1) = (BalanceBudget::new(0), BalanceBudget::new(1));
        for _ in 0..REBALANCE_EVERY * 4 {
            m.choose(0, &mut b0);
            m.choose(1, &mut b1);
        }
        assert_eq!(m.weights(0), [100, 0]);
        assert_eq!(m.weights(1), [0, 100]);
    }
}
