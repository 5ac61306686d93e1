//! NUMA memory placement: where each partition's pages should live, putting
//! them there, and asking the kernel where they actually are.
//!
//! The memory half of Tomas Vondra's NUMA series (`pg_numa.c`, the
//! `buf_init.c` placement). In three steps:
//!
//! 1. [`PlacementPlan::compute`] is pure: from the partition map, the
//!    topology, the memory page size in use (4 KiB, or 2 MiB with huge pages)
//!    and the `shmem_interleave` option it lists byte ranges of the page arena
//!    and, for each, the node to bind it to, or one range interleaved over
//!    every node. One node means no plan at all: nothing to place.
//! 2. [`apply`] hands each range to `mbind(2)` before any page of the arena
//!    is touched, so the first touch (at open when the pool pre-faults, else
//!    at first use) already faults the page in on its node. A refusal
//!    (no such node, a kernel without NUMA, a seccomp filter) is reported by
//!    one log line, and the pool goes on with the pages wherever the kernel
//!    puts them.
//! 3. [`nodes_of`] asks `move_pages(2)` with a null node array, which moves
//!    nothing and fills in the node each page sits on now: the NUMA view of
//!    `buffercache()` is measured, never assumed from the plan.
//!
//! ```text
//!   arena  | part 0 | part 1 | part 2 | part 3 | part 4 | part 5 |
//!   node   |   0    |   1    |   2    |   3    |   4    |   5    |  bind
//!          |<--------------- one range, every node -------------->|  interleave
//!   boundaries at multiples of the memory page (2 MiB = 256 buffers)
//! ```
//!
//! This module has `unsafe` for the two syscalls only; each block says why it
//! is sound.

use super::partition::PartitionMap;
use super::topology::Topology;
use crate::tag::PAGE_SIZE;

/// The base memory page (what `mbind` aligns to).
pub const SMALL_PAGE: usize = 4096;
/// A transparent huge page on x86-64 and arm64 with 4 KiB base pages.
pub const HUGE_PAGE: usize = 2 << 20;

/// What a placement range asks of the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Every page of the range on one node (`MPOL_BIND`), the node's OS id.
    Bind(usize),
    /// Pages spread round-robin over the listed nodes (`MPOL_INTERLEAVE`).
    Interleave,
}

/// One range of the arena and where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedRange {
    /// Byte offset into the arena, a multiple of the plan's page size.
    pub offset: usize,
    /// Length in bytes; a multiple of the page size except perhaps the last.
    pub len: usize,
    /// The partitions whose buffers start in this range.
    pub partitions: std::ops::Range<usize>,
    pub policy: Policy,
}

/// Where the pool's memory should go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementPlan {
    /// The memory page size in use: [`SMALL_PAGE`] or [`HUGE_PAGE`].
    pub page_size: usize,
    /// Every partition boundary falls on a page boundary. False only when the
    /// pool is too small to give each partition whole pages; then a page that
    /// straddles two nodes' partitions goes with the later one (the range
    /// that starts in it).
    pub aligned: bool,
    /// OS ids of the nodes (for interleaving; for the log line).
    pub nodes: Vec<usize>,
    /// Ranges in address order, covering the arena once.
    pub ranges: Vec<PlacedRange>,
}

impl PlacementPlan {
    /// The plan for `parts` on `topology`, or `None` on one node (the pages
    /// have nowhere else to go). The arena is the partitions' buffers, in
    /// order. `huge` selects 2 MiB pages; `interleave` one interleaved range
    /// (and then the descriptors are left where they are built).
    pub fn compute(
        parts: &PartitionMap,
        topology: &Topology,
        huge: bool,
        interleave: bool,
    ) -> Option<PlacementPlan> {
        if topology.node_count() < 2 {
            return None;
        }
        let page_size = if huge { HUGE_PAGE } else { SMALL_PAGE };
        let nodes: Vec<usize> = topology.nodes.iter().map(|n| n.id).collect();
        let arena_len: usize = parts
            .partitions()
            .iter()
            .map(|p| p.len as usize)
            .sum::<usize>()
            * PAGE_SIZE;
        let aligned = parts
            .partitions()
            .iter()
            .all(|p| (p.first as usize * PAGE_SIZE).is_multiple_of(page_size));
        if interleave {
            return Some(PlacementPlan {
                page_size,
                aligned,
                nodes,
                ranges: vec![PlacedRange {
                    offset: 0,
                    len: arena_len,
                    partitions: 0..parts.len(),
                    policy: Policy::Interleave,
                }],
            });
        }
        // Runs of consecutive partitions on one node make one range; its
        // start is rounded down to a page (a straddling page belongs to the
        // range that starts in it).
        let mut ranges: Vec<PlacedRange> = Vec::new();
        for (i, p) in parts.partitions().iter().enumerate() {
            let node = topology.nodes[p.node.min(nodes.len() - 1)].id;
            let start = (p.first as usize * PAGE_SIZE) / page_size * page_size;
            match ranges.last_mut() {
                Some(r) if r.policy == Policy::Bind(node) => r.partitions.end = i + 1,
                Some(r) if start <= r.offset => {
                    // The whole range so far is one page shared with this
                    // partition: it keeps the earlier node; this partition
                    // joins it.
                    r.partitions.end = i + 1;
                }
                _ => ranges.push(PlacedRange {
                    offset: start,
                    len: 0,
                    partitions: i..i + 1,
                    policy: Policy::Bind(node),
                }),
            }
        }
        for i in 0..ranges.len() {
            let end = ranges.get(i + 1).map_or(arena_len, |n| n.offset);
            ranges[i].len = end - ranges[i].offset;
        }
        Some(PlacementPlan {
            page_size,
            aligned,
            nodes,
            ranges,
        })
    }

    /// The plan as a table, one range a line (what `numa_plan` prints).
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "page size {} KiB, partition boundaries {}aligned to it, nodes {:?}",
            self.page_size / 1024,
            if self.aligned { "" } else { "NOT " },
            self.nodes
        );
        let _ = writeln!(
            s,
            "{:>14} {:>14} {:>10} {:>12} {:>10}  policy",
            "offset", "end", "MiB", "buffers", "parts"
        );
        for r in &self.ranges {
            let policy = match r.policy {
                Policy::Bind(n) => format!("bind to node {n}"),
                Policy::Interleave => format!("interleave over {:?}", self.nodes),
            };
            let _ = writeln!(
                s,
                "{:>#14x} {:>#14x} {:>10.1} {:>12} {:>10}  {policy}",
                r.offset,
                r.offset + r.len,
                r.len as f64 / (1 << 20) as f64,
                format!(
                    "{}..{}",
                    r.offset / PAGE_SIZE,
                    (r.offset + r.len).div_ceil(PAGE_SIZE)
                ),
                format!("{}..{}", r.partitions.start, r.partitions.end),
            );
        }
        s
    }
}

/// How many buffers make one memory page (1 with 4 KiB pages, since a
/// buffer is 8 KiB; 256 with 2 MiB pages): what partition boundaries are
/// rounded to when the pool's memory is bound to nodes.
pub fn buffers_per_page(huge: bool) -> usize {
    if huge { HUGE_PAGE / PAGE_SIZE } else { 1 }
}

const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;
/// Move pages already faulted in (only ours: not `MPOL_MF_MOVE_ALL`).
const MPOL_MF_MOVE: u32 = 1 << 1;
/// The node mask `mbind` is given: up to 1024 nodes.
const MASK_WORDS: usize = 1024 / 64;

/// `mbind(2)` of `len` bytes at `addr` to `nodes` with `mode`. `addr` must be
/// 4 KiB aligned. `Err` with the reason when the kernel refuses.
fn mbind(addr: *mut u8, len: usize, mode: i32, nodes: &[usize]) -> Result<(), String> {
    let mut mask = [0u64; MASK_WORDS];
    for &n in nodes {
        if n >= MASK_WORDS * 64 {
            return Err(format!("node {n} is above the largest node mbind takes"));
        }
        mask[n / 64] |= 1 << (n % 64);
    }
    if len == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: mbind only changes the memory policy of our own mapping
        // (the caller passes a range inside the arena, page aligned) and
        // reads `mask`, which lives for the call and holds MASK_WORDS * 64
        // bits, the maxnode given. No memory of ours is written.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                addr as usize,
                len,
                mode,
                mask.as_ptr(),
                MASK_WORDS * 64,
                MPOL_MF_MOVE,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().to_string())
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (addr, mode);
        Err("NUMA binding is implemented for Linux only".into())
    }
}

/// Apply `plan` to the memory at `base` (the arena: `plan`'s offsets are
/// relative to it; `base` is page aligned). Returns the refusal, if any, after
/// the first range the kernel refused (the rest are not tried: the reason is
/// the same for all of them in practice).
pub fn apply(plan: &PlacementPlan, base: *mut u8) -> Result<(), String> {
    for r in &plan.ranges {
        // Offsets are inside the arena by construction.
        let addr = base.wrapping_add(r.offset);
        let res = match r.policy {
            Policy::Bind(n) => mbind(addr, r.len, MPOL_BIND, &[n]),
            Policy::Interleave => mbind(addr, r.len, MPOL_INTERLEAVE, &plan.nodes),
        };
        res.map_err(|e| {
            let what = match r.policy {
                Policy::Bind(n) => format!("binding buffers at offset {:#x} to node {n}", r.offset),
                Policy::Interleave => format!("interleaving the pool over nodes {:?}", plan.nodes),
            };
            format!("{what}: {e}")
        })?;
    }
    Ok(())
}

/// Bind the 4 KiB pages wholly inside `[start, start + len)` to `node`: for
/// the descriptor array, whose boundaries are a heap allocation's and need
/// not fall on pages. Pages it shares with a neighbour stay where they are.
pub fn bind_interior(start: *mut u8, len: usize, node: usize) -> Result<(), String> {
    let a = start as usize;
    let first = a.next_multiple_of(SMALL_PAGE);
    let end = (a + len) / SMALL_PAGE * SMALL_PAGE;
    if end <= first {
        return Ok(());
    }
    mbind(
        start.wrapping_add(first - a),
        end - first,
        MPOL_BIND,
        &[node],
    )
}

/// The node each 4 KiB page at `addrs` sits on now, from `move_pages(2)`
/// with a null node array (which moves nothing). `None` for a page the
/// kernel cannot place (never touched, or an error), and for every page
/// where the call itself is not available.
pub fn nodes_of(addrs: &[*const u8]) -> Vec<Option<usize>> {
    let mut status = vec![-1i32; addrs.len()];
    if addrs.is_empty() {
        return Vec::new();
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: move_pages with a null `nodes` only reports: it reads
        // `addrs.len()` pointers from `addrs` and writes as many i32 into
        // `status`, both live and of that length for the call. Pid 0 is this
        // process; the addresses need not be valid (a bad one gets -EFAULT
        // in its status slot, not a fault).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                0,
                addrs.len(),
                addrs.as_ptr(),
                std::ptr::null::<i32>(),
                status.as_mut_ptr(),
                0,
            )
        };
        if rc < 0 {
            return vec![None; addrs.len()];
        }
    }
    status
        .into_iter()
        .map(|s| usize::try_from(s).ok())
        .collect()
}

/// The one log line of a refused placement.
pub(crate) fn log_refused(why: &str) {
    eprintln!(
        "bufmgr: NUMA placement refused ({why}); the pool runs with its pages where the kernel puts them"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numa::partition::PartitionSpec;

    fn spec(count: Option<usize>) -> PartitionSpec {
        PartitionSpec {
            count,
            floor: None,
            balancing: false,
        }
    }

    fn six_nodes() -> Topology {
        Topology::synthetic("pack:2 numa:3 core:2 pu:1").unwrap()
    }

    #[test]
    fn one_node_has_no_plan() {
        let t = Topology::single_node(2);
        let m = PartitionMap::build(4096, &spec(None), &t).unwrap();
        assert_eq!(PlacementPlan::compute(&m, &t, false, false), None);
        assert_eq!(PlacementPlan::compute(&m, &t, true, true), None);
    }

    /// Every pool size and partition count, small and huge pages: the
    /// ranges tile the arena in order, start on page boundaries, bind each
    /// partition's first byte to its own node whenever the plan is aligned,
    /// and the map aligns whenever each partition can have whole pages.
    #[test]
    fn plans_tile_the_arena_and_follow_the_partitions() {
        let t = six_nodes();
        for huge in [false, true] {
            let bpp = buffers_per_page(huge);
            for nbuf in (16..3000)
                .step_by(37)
                .chain([6 * 256, 6 * 256 + 1, 16384, 16384 + 255])
            {
                for count in [None, Some(1), Some(5), Some(6), Some(12)] {
                    let Ok(m) = PartitionMap::build_aligned(nbuf, &spec(count), &t, bpp) else {
                        continue;
                    };
                    let plan = PlacementPlan::compute(&m, &t, huge, false).unwrap();
                    let what = format!("{nbuf} buffers, {count:?} partitions, huge {huge}");
                    let page = plan.page_size;
                    assert_eq!(page, if huge { HUGE_PAGE } else { SMALL_PAGE });
                    let mut at = 0;
                    let mut next_part = 0;
                    for r in &plan.ranges {
                        assert_eq!(r.offset, at, "{what}: {plan:?}");
                        assert_eq!(r.offset % page, 0, "{what}");
                        assert!(r.len > 0, "{what}: {plan:?}");
                        assert_eq!(r.partitions.start, next_part, "{what}");
                        next_part = r.partitions.end;
                        at += r.len;
                    }
                    assert_eq!(at, nbuf * PAGE_SIZE, "{what}");
                    assert_eq!(next_part, m.len(), "{what}");
                    if m.len() * bpp <= nbuf {
                        assert!(plan.aligned, "{what}: {:?}", m.partitions());
                    }
                    if plan.aligned {
                        for r in &plan.ranges {
                            for p in r.partitions.clone() {
                                let node = t.nodes[m.get(p).node].id;
                                assert_eq!(r.policy, Policy::Bind(node), "{what}");
                            }
                        }
                        // Neighbouring ranges are on different nodes.
                        for w in plan.ranges.windows(2) {
                            assert_ne!(w[0].policy, w[1].policy, "{what}");
                        }
                    }
                    let inter = PlacementPlan::compute(&m, &t, huge, true).unwrap();
                    assert_eq!(inter.ranges.len(), 1);
                    assert_eq!(inter.ranges[0].len, nbuf * PAGE_SIZE);
                    assert_eq!(inter.ranges[0].policy, Policy::Interleave);
                    assert_eq!(inter.nodes, [0, 1, 2, 3, 4, 5]);
                }
            }
        }
    }

    #[test]
    fn six_node_plan_binds_one_range_per_node() {
        let t = six_nodes();
        let m =
            PartitionMap::build_aligned(16384, &spec(None), &t, buffers_per_page(true)).unwrap();
        let plan = PlacementPlan::compute(&m, &t, true, false).unwrap();
        assert!(plan.aligned);
        let policies: Vec<_> = plan.ranges.iter().map(|r| r.policy).collect();
        assert_eq!(policies, (0..6).map(Policy::Bind).collect::<Vec<_>>());
        // 16384 buffers = 64 huge pages: 11, 11, 11, 11, 10, 10.
        let pages: Vec<_> = plan.ranges.iter().map(|r| r.len / HUGE_PAGE).collect();
        assert_eq!(pages, [11, 11, 11, 11, 10, 10]);
        assert!(
            plan.render().contains("bind to node 5"),
            "{}",
            plan.render()
        );
    }

    #[test]
    fn binding_to_node_zero_works_and_pages_report_it() {
        let mut map = memmap2::MmapMut::map_anon(16 * SMALL_PAGE).unwrap();
        let base = map.as_mut_ptr();
        mbind(base, 16 * SMALL_PAGE, MPOL_BIND, &[0]).expect("node 0 always exists");
        let addrs: Vec<*const u8> = (0..16)
            .map(|i| base.wrapping_add(i * SMALL_PAGE).cast_const())
            .collect();
        assert!(
            nodes_of(&addrs).iter().all(Option::is_none),
            "untouched pages have no node"
        );
        for i in 0..16 {
            map[i * SMALL_PAGE] = 1;
        }
        assert_eq!(nodes_of(&addrs), vec![Some(0); 16]);
    }

    #[test]
    fn binding_to_a_missing_node_is_refused_with_a_reason() {
        let mut map = memmap2::MmapMut::map_anon(4 * SMALL_PAGE).unwrap();
        let err = mbind(map.as_mut_ptr(), 4 * SMALL_PAGE, MPOL_BIND, &[1000]).unwrap_err();
        assert!(!err.is_empty());
        let err = mbind(map.as_mut_ptr(), 4 * SMALL_PAGE, MPOL_BIND, &[5000]).unwrap_err();
        assert!(err.contains("5000"), "{err}");
    }
}

#[cfg(all(test, feature = "hwloc"))]
mod hwloc_tests {
    use super::*;
    use crate::numa::partition::PartitionSpec;

    /// hwloc's six-node synthetic topology drives the partition map and
    /// the placement plan as a real six-node machine would.
    #[test]
    fn hwloc_synthetic_topology_drives_the_plan() {
        let t = Topology::from_hwloc_synthetic("pack:2 numa:3 core:2 pu:1").unwrap();
        let spec = PartitionSpec::default();
        let m = PartitionMap::build_aligned(16384, &spec, &t, 256).unwrap();
        assert_eq!(m.len(), 6);
        let plan = PlacementPlan::compute(&m, &t, true, false).unwrap();
        assert!(plan.aligned);
        let nodes: Vec<_> = plan.ranges.iter().map(|r| r.policy).collect();
        assert_eq!(nodes, (0..6).map(Policy::Bind).collect::<Vec<_>>());
    }
}
