//! Read streams over io_uring storage and the process's descriptors: the
//! streams' submissions never leave a descriptor behind, and complete under
//! a tight descriptor limit. Each test runs its body in a child process of
//! its own (`crate::io::test_child`), since it counts `/proc/self/fd` or
//! lowers `RLIMIT_NOFILE`.

use std::path::Path;
use std::sync::Arc;

use super::{BufferPool, StreamConfig};
use crate::config::PoolConfig;
use crate::io::test_child::{in_child, open_fds};
use crate::io::{UringStorage, probe_io_uring};
use crate::tag::{BlockNumber, RelFork, RelId};

const STREAMS: usize = 40;
const BLOCKS: BlockNumber = 96;

fn rel(i: usize) -> RelFork {
    RelFork::main(RelId(20 + i as u32))
}

/// A pool over io_uring storage with four relations of `BLOCKS` blocks,
/// block `b` of relation `r` holding `r * 1000 + b` at byte 100; nothing
/// resident.
fn pool_on(dir: &Path) -> Option<BufferPool> {
    if let Err(why) = probe_io_uring() {
        eprintln!("skipped: io_uring is not usable here: {why}");
        return None;
    }
    let storage = Arc::new(UringStorage::with_rings(dir, false, 2).unwrap());
    let pool = BufferPool::new(PoolConfig::new(1024).bgwriter(None), storage).unwrap();
    for r in 0..4 {
        pool.create_fork(rel(r)).unwrap();
        for b in 0..BLOCKS {
            let mut p = pool.extend(rel(r), None).unwrap();
            p[100..104].copy_from_slice(&(r as u32 * 1000 + b).to_le_bytes());
            p.mark_dirty();
        }
    }
    pool.flush_all(true).unwrap();
    pool.evict_all().unwrap();
    Some(pool)
}

/// `STREAMS` streams over the four relations (half of them one block
/// at a time, whose reads are single pages), all started with reads in
/// flight, then read to the end in turns: every block right.
fn forty_streams(pool: &BufferPool) {
    let mut streams: Vec<_> = (0..STREAMS)
        .map(|i| {
            let cfg = if i % 2 == 0 {
                StreamConfig::default()
            } else {
                StreamConfig::default().lookahead(2).io_combine(1)
            };
            (i, 0, pool.read_stream(rel(i % 4), 0..BLOCKS, None, cfg))
        })
        .collect();
    while !streams.is_empty() {
        streams.retain_mut(|(i, next, s)| match s.next_buffer() {
            None => {
                assert_eq!(*next, BLOCKS, "stream {i}");
                false
            }
            Some(b) => {
                let b = b.unwrap_or_else(|e| panic!("stream {i} block {next}: {e}"));
                let p = b.lock_shared();
                let got = u32::from_le_bytes(p[100..104].try_into().unwrap());
                assert_eq!(got, (*i % 4) as u32 * 1000 + *next, "stream {i}");
                *next += 1;
                true
            }
        });
    }
    pool.evict_all().unwrap();
}

/// 40 streams started (each with reads in flight) and dropped, twice:
/// the descriptors open are those of the open storage throughout, and
/// closing it closes its rings.
#[test]
fn streams_leave_the_descriptor_count_as_it_was() {
    in_child("pool::uring_streams::child_streams_leave_the_descriptor_count_as_it_was");
}

#[test]
#[ignore = "run in a child process by streams_leave_the_descriptor_count_as_it_was"]
fn child_streams_leave_the_descriptor_count_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let before_open = open_fds();
    let Some(pool) = pool_on(dir.path()) else {
        return;
    };
    let open = open_fds();
    for round in 0..2 {
        let mut streams: Vec<_> = (0..STREAMS)
            .map(|i| pool.read_stream(rel(i % 4), 0..BLOCKS, None, StreamConfig::default()))
            .collect();
        for s in &mut streams {
            drop(s.next_buffer().unwrap().unwrap());
        }
        assert_eq!(open_fds(), open, "round {round}, streams open");
        drop(streams);
        assert_eq!(open_fds(), open, "round {round}, streams dropped");
        assert_eq!(pool.pinned_buffers(), 0);
        pool.evict_all().unwrap();
    }
    forty_streams(&pool);
    assert_eq!(open_fds(), open);
    drop(pool);
    assert_eq!(open_fds(), before_open, "the storage closed");
}

/// With `RLIMIT_NOFILE` at the descriptors open + 10, 40 streams at
/// once (runs and single pages) and point reads all read every block
/// right.
#[test]
fn streams_complete_under_a_tight_descriptor_limit() {
    in_child("pool::uring_streams::child_streams_complete_under_a_tight_descriptor_limit");
}

#[test]
#[ignore = "run in a child process by streams_complete_under_a_tight_descriptor_limit"]
fn child_streams_complete_under_a_tight_descriptor_limit() {
    let dir = tempfile::tempdir().unwrap();
    let Some(pool) = pool_on(dir.path()) else {
        return;
    };
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the struct we pass.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    lim.rlim_cur = (open_fds() + 10) as libc::rlim_t;
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    for _ in 0..2 {
        forty_streams(&pool);
    }
    for r in 0..4 {
        for b in (0..BLOCKS).step_by(7) {
            let p = pool.read_buffer(rel(r), b, None).unwrap();
            let got = u32::from_le_bytes(p.lock_shared()[100..104].try_into().unwrap());
            assert_eq!(got, r as u32 * 1000 + b);
        }
    }
}
