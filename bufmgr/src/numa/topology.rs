//! The machine's shape: NUMA nodes and the CPUs in each.
//!
//! The buffer pool uses this to build its partition map (one or more
//! partitions per NUMA node, so that a thread mostly touches buffers in memory
//! close to it) and to pick a thread's home partition from the CPU it runs on
//! ([`current_cpu`], then [`Topology::node_of_cpu`]).
//!
//! # Sources
//!
//! [`Topology::detect`] tries, in order:
//!
//! 1. hwloc, when the crate is built with the `hwloc` cargo feature (through
//!    the `hwlocality` crate; needs the system's libhwloc);
//! 2. Linux sysfs: each `/sys/devices/system/node/node<N>/cpulist`, a list of
//!    CPU ranges such as `0-3,8-11` (see [`parse_cpulist`]);
//! 3. a single node holding every CPU, when neither is available (other
//!    operating systems, containers without `/sys`, malformed data).
//!
//! Nodes without CPUs (memory-only nodes) are left out: no thread can call
//! them home. [`Topology::cores`] is what this process may use
//! ([`std::thread::available_parallelism`], which honours CPU affinity and
//! cgroup quotas), so it can be fewer than the CPUs listed in the nodes.

use std::path::Path;

/// Where sysfs lists the NUMA nodes on Linux.
pub const SYSFS_NODE_ROOT: &str = "/sys/devices/system/node";

/// The largest CPU number [`parse_cpulist`] accepts (Linux's `NR_CPUS` tops out
/// at 8192; this leaves room and bounds what a malformed list can allocate).
const MAX_CPU: usize = 1 << 16;

/// One NUMA node: its operating-system number and its CPUs, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    pub id: usize,
    pub cpus: Vec<usize>,
}

/// The machine's NUMA nodes, ordered by id, always at least one.
#[derive(Clone, Debug)]
pub struct Topology {
    pub nodes: Vec<NumaNode>,
    /// CPUs this process may run on at once.
    pub cores: usize,
    /// Where the node list came from.
    pub source: TopologySource,
}

/// Where a [`Topology`] came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TopologySource {
    Hwloc,
    Sysfs,
    SingleNodeFallback,
    /// Built by [`Topology::synthetic`] (a test machine of any shape).
    Synthetic,
}

/// The environment variable [`Topology::detect`] reads first: a synthetic
/// description (see [`Topology::synthetic`]) that replaces the machine's, so a
/// whole test suite can run on, say, six nodes on a one-node machine.
pub const SYNTHETIC_TOPOLOGY_ENV: &str = "BUFMGR_SYNTHETIC_TOPOLOGY";

fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Topology {
    /// The machine's topology: from hwloc (with the `hwloc` feature) if it
    /// works, else from sysfs, else a single node. Never panics.
    pub fn detect() -> Topology {
        let cores = available_cores();
        if let Ok(desc) = std::env::var(SYNTHETIC_TOPOLOGY_ENV) {
            match Self::synthetic(&desc) {
                Ok(t) => return Topology { cores, ..t },
                Err(e) => eprintln!("bufmgr: ignoring {SYNTHETIC_TOPOLOGY_ENV}: {e}"),
            }
        }
        #[cfg(feature = "hwloc")]
        if let Some(t) = Self::from_hwloc(cores) {
            return t;
        }
        let sysfs = if cfg!(target_os = "linux") {
            Self::from_sysfs(Path::new(SYSFS_NODE_ROOT))
        } else {
            None
        };
        match sysfs {
            Some(t) => Topology { cores, ..t },
            None => Self::single_node(cores),
        }
    }

    /// One node (id 0) with CPUs `0..cores` (at least one).
    pub fn single_node(cores: usize) -> Topology {
        let cores = cores.max(1);
        Topology {
            nodes: vec![NumaNode {
                id: 0,
                cpus: (0..cores).collect(),
            }],
            cores,
            source: TopologySource::SingleNodeFallback,
        }
    }

    /// Reads the nodes from a sysfs-style tree: `root/node<N>/cpulist` for each
    /// node. `None` if `root` cannot be read, holds no node with CPUs, or any
    /// node's `cpulist` is missing or malformed. `cores` is the number of CPUs
    /// listed ([`detect`](Self::detect) replaces it by the process's own).
    pub fn from_sysfs(root: &Path) -> Option<Topology> {
        let mut nodes = Vec::new();
        for entry in std::fs::read_dir(root).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name();
            let Some(digits) = name.to_str().and_then(|n| n.strip_prefix("node")) else {
                continue;
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let id: usize = digits.parse().ok()?;
            let text = std::fs::read_to_string(entry.path().join("cpulist")).ok()?;
            let cpus = parse_cpulist(&text)?;
            if !cpus.is_empty() {
                nodes.push(NumaNode { id, cpus });
            }
        }
        if nodes.is_empty() {
            return None;
        }
        nodes.sort_by_key(|n| n.id);
        let cores = nodes.iter().map(|n| n.cpus.len()).sum();
        Some(Topology {
            nodes,
            cores,
            source: TopologySource::Sysfs,
        })
    }

    /// The nodes as hwloc sees them; `None` if hwloc fails (or panics).
    #[cfg(feature = "hwloc")]
    fn from_hwloc(cores: usize) -> Option<Topology> {
        let nodes = std::panic::catch_unwind(|| {
            let topo = hwlocality::Topology::new().ok()?;
            Self::hwloc_nodes(&topo)
        })
        .ok()??;
        Some(Topology {
            nodes,
            cores,
            source: TopologySource::Hwloc,
        })
    }

    /// hwloc's own synthetic topology of `desc` (`hwloc_topology_set_synthetic`,
    /// e.g. `"pack:2 numa:3 core:2 pu:1"`), read like a real machine: the
    /// check that [`synthetic`](Self::synthetic) builds what hwloc would.
    /// `cores` is the number of CPUs listed. Errors carry hwloc's complaint.
    #[cfg(feature = "hwloc")]
    pub fn from_hwloc_synthetic(desc: &str) -> std::result::Result<Topology, String> {
        let nodes = std::panic::catch_unwind(|| -> std::result::Result<_, String> {
            let topo = hwlocality::Topology::builder()
                .from_synthetic(desc)
                .map_err(|e| format!("hwloc refused synthetic topology {desc:?}: {e}"))?
                .build()
                .map_err(|e| format!("hwloc could not build synthetic topology {desc:?}: {e}"))?;
            Self::hwloc_nodes(&topo)
                .ok_or_else(|| format!("hwloc's synthetic topology {desc:?} has no usable nodes"))
        })
        .map_err(|_| format!("hwloc panicked on synthetic topology {desc:?}"))??;
        let cores = nodes.iter().map(|n| n.cpus.len()).sum();
        Ok(Topology {
            nodes,
            cores,
            source: TopologySource::Hwloc,
        })
    }

    /// The nodes with CPUs of an hwloc topology, by id; `None` if there are
    /// none or a cpuset is infinite.
    #[cfg(feature = "hwloc")]
    fn hwloc_nodes(topo: &hwlocality::Topology) -> Option<Vec<NumaNode>> {
        use hwlocality::object::types::ObjectType;

        let mut nodes = Vec::new();
        for obj in topo.objects_with_type(ObjectType::NUMANode) {
            let id = obj.os_index().unwrap_or_else(|| obj.logical_index());
            let cpuset = obj.cpuset()?;
            // An infinite set is nonsense for a node: give up on hwloc.
            cpuset.weight()?;
            let cpus: Vec<usize> = cpuset.iter_set().map(usize::from).collect();
            if !cpus.is_empty() {
                nodes.push(NumaNode { id, cpus });
            }
        }
        if nodes.is_empty() {
            return None;
        }
        nodes.sort_by_key(|n| n.id);
        Some(nodes)
    }

    /// A made-up machine from an hwloc-style synthetic description: levels
    /// from the outside in, each `type:count`, separated by spaces, such as
    /// `"pack:2 numa:3 core:2 pu:1"` (2 packages of 3 nodes of 2 cores of one
    /// CPU each: 6 nodes, 12 CPUs). Types: `pack`/`package`/`socket`,
    /// `numa`/`node`/`numanode`, `group`, `die`, `l1`..`l3` (or `l3cache`...),
    /// `core`, `pu`; only `numa` (the nodes) and the product of all counts
    /// (the CPUs) matter here. CPUs are numbered in order, node by node,
    /// like hwloc numbers a synthetic machine's PUs. No `numa` level means
    /// one node. The same description works for hwloc's own synthetic
    /// topologies (`hwloc_topology_set_synthetic`).
    ///
    /// Errors name the level that is wrong: an unknown type, a count that is
    /// not a number from 1 to 1024, two `numa` levels, no levels, or more
    /// than 65536 CPUs.
    pub fn synthetic(desc: &str) -> std::result::Result<Topology, String> {
        let mut nodes_above = 1usize; // product of counts down to numa
        let mut cpus_per = 1usize; // product of counts below numa
        let mut seen_numa = false;
        let mut levels = 0;
        for level in desc.split_whitespace() {
            let (kind, count) = level
                .split_once(':')
                .ok_or_else(|| format!("synthetic topology level {level:?} is not type:count"))?;
            let count: usize = count
                .parse()
                .ok()
                .filter(|c| (1..=1024).contains(c))
                .ok_or_else(|| {
                    format!("synthetic topology level {level:?}: count must be 1 to 1024")
                })?;
            let kind = kind.to_ascii_lowercase();
            let numa = match kind.as_str() {
                "numa" | "node" | "numanode" => true,
                "pack" | "package" | "socket" | "group" | "die" | "core" | "pu" | "l1" | "l2"
                | "l3" | "l1cache" | "l2cache" | "l3cache" | "l1d" | "l2d" | "l3d" => false,
                _ => {
                    return Err(format!(
                        "synthetic topology level {level:?}: unknown type {kind:?}"
                    ));
                }
            };
            if numa && seen_numa {
                return Err(format!("synthetic topology {desc:?} has two numa levels"));
            }
            let total = nodes_above.saturating_mul(cpus_per).saturating_mul(count);
            if total > MAX_CPU {
                return Err(format!(
                    "synthetic topology {desc:?} has more than {MAX_CPU} CPUs"
                ));
            }
            if seen_numa {
                cpus_per *= count;
            } else {
                nodes_above *= count;
            }
            seen_numa |= numa;
            levels += 1;
        }
        if levels == 0 {
            return Err("synthetic topology description is empty".into());
        }
        if !seen_numa {
            // Everything was counted as "above the nodes": one node holds it all.
            cpus_per = nodes_above;
            nodes_above = 1;
        }
        let nodes: Vec<NumaNode> = (0..nodes_above)
            .map(|id| NumaNode {
                id,
                cpus: (id * cpus_per..(id + 1) * cpus_per).collect(),
            })
            .collect();
        Ok(Topology {
            nodes,
            cores: nodes_above * cpus_per,
            source: TopologySource::Synthetic,
        })
    }

    /// How many nodes there are (at least one).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The index in [`nodes`](Self::nodes) of the node holding `cpu`; 0 if no
    /// node lists it. (The index equals the node's `id` when the ids are
    /// dense, as they are on most machines.)
    pub fn node_of_cpu(&self, cpu: usize) -> usize {
        self.nodes
            .iter()
            .position(|n| n.cpus.binary_search(&cpu).is_ok())
            .unwrap_or(0)
    }
}

/// The CPU the calling thread is running on right now (it may move at any
/// time); `None` if the system cannot say.
pub fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getcpu takes no arguments, touches no memory of ours
        // and may be called from any thread; it returns -1 on error.
        let cpu = unsafe { libc::sched_getcpu() };
        usize::try_from(cpu).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Pin the calling thread to one CPU (`sched_setaffinity(2)`): what `bench
/// --pin-threads` does to its workers, and how tests move a thread between
/// nodes. The error says which CPU was refused and why.
pub fn pin_current_thread(cpu: usize) -> std::result::Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "CPU {cpu} is above the largest CPU a cpu_set_t holds"
            ));
        }
        // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: cpu < CPU_SETSIZE (checked), so CPU_SET stays inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
        // SAFETY: pid 0 is the calling thread; the kernel reads
        // size_of::<cpu_set_t>() bytes of `set`, which lives for the call.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            return Err(format!(
                "pinning to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(format!("pinning to CPU {cpu}: only implemented on Linux"))
    }
}

/// Parses a Linux CPU list such as `"0-3,8,10-11\n"` into the CPUs it names,
/// ascending and without duplicates. An empty list (a node without CPUs) is
/// `Some(vec![])`. `None` if the text is malformed: anything but decimal
/// numbers and `a-b` ranges with `a <= b`, separated by commas, or a CPU
/// number above 65536.
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    fn cpu(s: &str) -> Option<usize> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok().filter(|&n| n <= MAX_CPU)
    }

    let s = s.trim();
    let mut cpus = Vec::new();
    if s.is_empty() {
        return Some(cpus);
    }
    for part in s.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (cpu(lo)?, cpu(hi)?),
            None => {
                let c = cpu(part)?;
                (c, c)
            }
        };
        if lo > hi {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cpulist_accepts_ranges_and_singles() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist("7-7"), Some(vec![7]));
        assert_eq!(parse_cpulist("\n"), Some(vec![]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("4-5,0-1"), Some(vec![0, 1, 4, 5]));
        assert_eq!(parse_cpulist("0-2,1-3"), Some(vec![0, 1, 2, 3]));
    }

    #[test]
    fn parse_cpulist_rejects_malformed_input() {
        for bad in [
            "a",
            "1,,2",
            "1,",
            ",1",
            "3-1",
            "1-",
            "-1",
            "1-2-3",
            "+1",
            "1 ,2",
            "0-4294967295",
            "99999999999999999999999",
            "1-3:2/4",
            "ü",
        ] {
            assert_eq!(parse_cpulist(bad), None, "{bad:?}");
        }
    }

    fn fake_sysfs(nodes: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, cpulist) in nodes {
            let node = dir.path().join(name);
            std::fs::create_dir(&node).unwrap();
            std::fs::write(node.join("cpulist"), cpulist).unwrap();
        }
        dir
    }

    #[test]
    fn from_sysfs_reads_two_nodes() {
        let dir = fake_sysfs(&[("node1", "4-7\n"), ("node0", "0-3\n")]);
        // Noise that sysfs also has.
        std::fs::write(dir.path().join("possible"), "0-1\n").unwrap();
        std::fs::create_dir(dir.path().join("power")).unwrap();
        let t = Topology::from_sysfs(dir.path()).unwrap();
        assert_eq!(t.source, TopologySource::Sysfs);
        assert_eq!(t.node_count(), 2);
        assert_eq!(t.cores, 8);
        assert_eq!(
            t.nodes,
            vec![
                NumaNode {
                    id: 0,
                    cpus: vec![0, 1, 2, 3]
                },
                NumaNode {
                    id: 1,
                    cpus: vec![4, 5, 6, 7]
                },
            ]
        );
        assert_eq!(t.node_of_cpu(2), 0);
        assert_eq!(t.node_of_cpu(6), 1);
    }

    #[test]
    fn from_sysfs_skips_memory_only_nodes() {
        let dir = fake_sysfs(&[("node0", "0-1\n"), ("node1", "\n"), ("node2", "2-3\n")]);
        let t = Topology::from_sysfs(dir.path()).unwrap();
        let ids: Vec<usize> = t.nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, vec![0, 2]);
        assert_eq!(t.node_of_cpu(3), 1, "an index into nodes, not the id");
    }

    #[test]
    fn from_sysfs_gives_up_on_bad_trees() {
        let missing = tempfile::tempdir().unwrap();
        assert!(Topology::from_sysfs(&missing.path().join("nope")).is_none());
        assert!(Topology::from_sysfs(missing.path()).is_none(), "no nodes");
        let bad = fake_sysfs(&[("node0", "0-3\n"), ("node1", "garbage\n")]);
        assert!(Topology::from_sysfs(bad.path()).is_none());
        let cpuless = fake_sysfs(&[("node0", "\n")]);
        assert!(Topology::from_sysfs(cpuless.path()).is_none());
        let no_cpulist = tempfile::tempdir().unwrap();
        std::fs::create_dir(no_cpulist.path().join("node0")).unwrap();
        assert!(Topology::from_sysfs(no_cpulist.path()).is_none());
    }

    #[test]
    fn synthetic_topologies_have_their_shape() {
        let t = Topology::synthetic("pack:2 numa:3 core:2 pu:1").unwrap();
        assert_eq!(t.source, TopologySource::Synthetic);
        assert_eq!(t.node_count(), 6);
        assert_eq!(t.cores, 12);
        for (i, n) in t.nodes.iter().enumerate() {
            assert_eq!(n.id, i);
            assert_eq!(n.cpus, vec![2 * i, 2 * i + 1]);
        }
        assert_eq!(t.node_of_cpu(7), 3);
        let two = Topology::synthetic("numa:2 pu:1").unwrap();
        assert_eq!(two.nodes[1].cpus, vec![1]);
        let flat = Topology::synthetic("Package:1 Core:4 PU:2").unwrap();
        assert_eq!(flat.node_count(), 1);
        assert_eq!(flat.nodes[0].cpus, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn synthetic_topologies_reject_bad_descriptions() {
        for (bad, says) in [
            ("", "empty"),
            ("numa", "type:count"),
            ("numa:0", "numa:0"),
            ("numa:x", "numa:x"),
            ("numa:2 numa:2", "two numa"),
            ("pack:2 cpu:3", "cpu"),
            ("pack:1024 numa:1024 pu:1024", "more than"),
        ] {
            let err = Topology::synthetic(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn single_node_holds_every_cpu() {
        let t = Topology::single_node(4);
        assert_eq!(t.source, TopologySource::SingleNodeFallback);
        assert_eq!(t.node_count(), 1);
        assert_eq!(t.nodes[0].cpus, vec![0, 1, 2, 3]);
        assert_eq!(t.cores, 4);
        assert_eq!(Topology::single_node(0).nodes[0].cpus, vec![0]);
    }

    #[test]
    fn node_of_unknown_cpu_is_zero() {
        let dir = fake_sysfs(&[("node0", "0-1"), ("node1", "2-3")]);
        let t = Topology::from_sysfs(dir.path()).unwrap();
        assert_eq!(t.node_of_cpu(1), 0);
        assert_eq!(t.node_of_cpu(2), 1);
        assert_eq!(t.node_of_cpu(99), 0);
    }

    #[test]
    fn detect_finds_this_machine() {
        let t = Topology::detect();
        assert!(t.node_count() >= 1);
        assert!(t.nodes.iter().all(|n| !n.cpus.is_empty()), "{t:?}");
        assert!(t.cores >= 1);
        assert_eq!(t.cores, std::thread::available_parallelism().unwrap().get());
        if std::env::var_os(SYNTHETIC_TOPOLOGY_ENV).is_some() {
            assert_eq!(t.source, TopologySource::Synthetic, "{t:?}");
        } else if cfg!(target_os = "linux") && Path::new(SYSFS_NODE_ROOT).join("node0").exists() {
            assert_ne!(t.source, TopologySource::SingleNodeFallback, "{t:?}");
        }
        if let Some(cpu) = current_cpu() {
            assert!(t.node_of_cpu(cpu) < t.node_count());
        }
    }

    #[test]
    fn current_cpu_is_known_on_linux() {
        #[cfg(target_os = "linux")]
        assert!(current_cpu().is_some());
        #[cfg(not(target_os = "linux"))]
        assert!(current_cpu().is_none());
    }
}

#[cfg(all(test, feature = "hwloc"))]
mod hwloc_tests {
    use super::*;

    /// The hand-built synthetic topology is the one hwloc builds from the
    /// same description, node by node and CPU by CPU.
    #[test]
    fn synthetic_topologies_match_hwlocs() {
        for desc in [
            "pack:2 numa:3 core:2 pu:1",
            "numa:2 pu:1",
            "pack:2 numa:2 l3:1 core:3 pu:2",
        ] {
            let ours = Topology::synthetic(desc).unwrap();
            let hwloc = Topology::from_hwloc_synthetic(desc).unwrap();
            assert_eq!(ours.nodes, hwloc.nodes, "{desc}");
            assert_eq!(ours.cores, hwloc.cores, "{desc}");
        }
        assert!(Topology::from_hwloc_synthetic("bogus:7").is_err());
    }

    #[test]
    fn detect_uses_hwloc_and_agrees_with_sysfs() {
        let t = Topology::detect();
        assert_eq!(t.source, TopologySource::Hwloc, "{t:?}");
        // hwloc leaves out CPUs this process may not use; sysfs lists them all.
        if let Some(sysfs) = Topology::from_sysfs(Path::new(SYSFS_NODE_ROOT)) {
            for node in &t.nodes {
                let same = sysfs.nodes.iter().find(|n| n.id == node.id);
                let same = same.unwrap_or_else(|| panic!("{t:?} vs {sysfs:?}"));
                assert!(node.cpus.iter().all(|c| same.cpus.contains(c)));
            }
        }
    }
}
