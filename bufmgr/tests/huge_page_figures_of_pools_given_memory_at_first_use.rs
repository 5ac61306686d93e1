//! What `BufferPool::huge_pages` and `PoolStats::huge_pages` say of pools
//! whose memory is given as their pages are first used
//! (`PoolConfig::prefault(false)`): each pool's figure is its own memory's,
//! never more than the pool, never "unknown" where the kernel's figures can
//! be read, and the counters' snapshot follows the memory as it grows.

mod common;

use std::time::Duration;

use bufmgr::arena::HugePageStatus;
use bufmgr::{BlockNumber, BufferPool, PoolConfig};
use common::{TestDb, read_version, rel, small_config, with_timeout};

const REL: u32 = 3;

fn lazy(buffers: usize, huge: bool) -> PoolConfig {
    small_config(buffers).prefault(false).huge_pages(huge)
}

/// Read blocks `0..n` through `pool`, so each of its first `n` buffers is used.
fn touch(pool: &BufferPool, n: BlockNumber) {
    for b in 0..n {
        read_version(pool, rel(REL), b);
    }
}

/// The figure is known (Linux lists every mapping in `/proc/self/smaps`,
/// with its `AnonHugePages` where the kernel has transparent huge pages)
/// and no larger than the pool.
fn check_known_and_bounded(s: &HugePageStatus, what: &str) {
    if !cfg!(target_os = "linux")
        || !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists()
    {
        return;
    }
    assert!(
        s.huge_bytes.is_some(),
        "{what}: no figure for a pool smaps lists: {s:?}"
    );
    check_bounded(s, what);
}

/// The figure, where known, is no larger than the pool.
fn check_bounded(s: &HugePageStatus, what: &str) {
    let Some(huge) = s.huge_bytes else { return };
    assert!(
        huge <= s.pool_bytes,
        "{what}: {huge} bytes of huge pages in a pool of {} bytes",
        s.pool_bytes
    );
}

/// Pools opened one after another sit next to each other in the address
/// space; each one's figure is still its own memory's, whether it asked for
/// huge pages or not.
#[test]
fn every_pool_reads_its_own_figure_with_neighbours_open() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 256);
        for huge in [true, false] {
            let pools: Vec<BufferPool> = (0..6).map(|_| db.pool(lazy(256, huge))).collect();
            for p in &pools {
                touch(p, 256);
            }
            for (i, p) in pools.iter().enumerate() {
                let s = p.huge_pages();
                check_known_and_bounded(&s, &format!("pool {i} of 6, huge pages asked: {huge}"));
                assert_eq!(s.requested, huge);
            }
        }
    });
}

/// A pool whose size is not a whole number of huge pages is never backed
/// past its end: its figure is at most its size.
#[test]
fn a_pool_not_a_whole_number_of_huge_pages_is_never_backed_past_its_end() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 1000);
        for buffers in [16, 100, 300, 700, 1000] {
            // Several, so that where each mapping lands does not decide it.
            let pools: Vec<BufferPool> = (0..6).map(|_| db.pool(lazy(buffers, true))).collect();
            for (i, p) in pools.iter().enumerate() {
                touch(p, buffers as BlockNumber);
                check_bounded(&p.huge_pages(), &format!("{buffers} buffers, pool {i}"));
                check_bounded(
                    &p.stats().huge_pages,
                    &format!("{buffers} buffers, pool {i}, stats"),
                );
            }
        }
    });
}

/// The counters' snapshot does not keep the figure of open for a pool
/// that has grown into its memory since (it is refreshed, at most about
/// once a second, so that taking the counters stays cheap).
#[test]
fn pool_stats_follow_the_memory_a_pool_grows_into() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 256);
        let pool = db.pool(lazy(256, true));
        let at_open = pool.stats().huge_pages;
        touch(&pool, 256);
        std::thread::sleep(Duration::from_millis(1100));
        let snapshot = pool.stats().huge_pages;
        let now = pool.huge_pages();
        assert_eq!(
            snapshot, now,
            "counters' snapshot a second after the pool grew (at open: {at_open:?})"
        );
    });
}
