//! The NUMA placement plan of a pool on a synthetic machine, and the NUMA
//! view (pg_buffercache_numa) of a real pool on this one.
//!
//! `cargo run -p bufmgr --example numa_plan [-- TOPOLOGY MIB [huge] [interleave]]`
//!
//! TOPOLOGY is a synthetic description (default `"pack:2 numa:3 core:2 pu:1"`,
//! six nodes), MIB the pool size (default 128). The plan is computed as the
//! pool would compute it (partitions from the topology, aligned to the memory
//! page) but applied to nothing: it says what would be bound where. Then a
//! real pool of MIB MiB opens on this machine's own topology, a relation
//! fills it, and the buffercache rows are counted by the node the kernel
//! reports for each page.

use std::sync::Arc;

use bufmgr::numa::{PlacementPlan, buffers_per_page};
use bufmgr::partition::PartitionMap;
use bufmgr::{BufferPool, FileStorage, PAGE_SIZE, PoolConfig, RelFork, RelId, Topology};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let desc = args
        .first()
        .map_or("pack:2 numa:3 core:2 pu:1", String::as_str);
    let mib: usize = match args.get(1).map(|s| s.parse()) {
        None => 128,
        Some(Ok(m)) if m > 0 => m,
        Some(_) => {
            eprintln!("MIB must be a positive number of MiB, not {:?}", args[1]);
            std::process::exit(2);
        }
    };
    let huge = args.iter().any(|a| a == "huge");
    let interleave = args.iter().any(|a| a == "interleave");
    let topo = match Topology::synthetic(desc) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let nbuf = mib * 1024 * 1024 / PAGE_SIZE;
    let config = PoolConfig::new(nbuf).huge_pages(huge);
    let align = if interleave {
        1
    } else {
        buffers_per_page(huge)
    };
    let parts =
        PartitionMap::build_aligned(nbuf, &config.partitions, &topo, align).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2);
        });
    println!(
        "synthetic topology {desc:?}: {} nodes, {} CPUs; pool {mib} MiB = {nbuf} buffers",
        topo.node_count(),
        topo.cores
    );
    println!("partitions:");
    for (i, p) in parts.partitions().iter().enumerate() {
        println!(
            "  {i:>2}: buffers {:>7}..{:<7} ({:>6} buffers) node {}",
            p.first,
            p.first + p.len,
            p.len,
            topo.nodes[p.node].id
        );
    }
    match PlacementPlan::compute(&parts, &topo, huge, interleave) {
        Some(plan) => print!("placement plan:\n{}", plan.render()),
        None => println!("placement plan: none (one node)"),
    }

    // The NUMA view of a real pool here.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let storage = Arc::new(FileStorage::open(dir.path()).expect("storage"));
    let pool = BufferPool::new(
        PoolConfig::new(nbuf).huge_pages(huge).bgwriter(None),
        storage,
    )
    .expect("pool");
    let rel = RelFork::main(RelId(1));
    pool.create_fork(rel).expect("fork");
    for _ in 0..nbuf / 2 {
        pool.extend(rel, None).expect("extend").mark_dirty();
    }
    let sum = pool.buffercache_summary();
    let t = pool.topology();
    println!(
        "\nthis machine ({:?}, {} nodes): placement {}",
        t.source,
        t.node_count(),
        match pool.placement() {
            bufmgr::arena::Placement::OneNode => "none needed (one node)".to_string(),
            bufmgr::arena::Placement::Applied(_) => "applied".to_string(),
            bufmgr::arena::Placement::Refused(_, why) => format!("refused: {why}"),
        }
    );
    println!(
        "buffercache NUMA view ({} buffers, {} used):",
        pool.size(),
        sum.used
    );
    println!("  {:>6} {:>10} {:>10}", "node", "buffers", "used");
    for (node, buffers, used) in &sum.per_node {
        println!("  {node:>6} {buffers:>10} {used:>10}");
    }
    let unknown = pool.size() - sum.per_node.iter().map(|r| r.1).sum::<usize>();
    println!("  {:>6} {unknown:>10}", "?");
}
