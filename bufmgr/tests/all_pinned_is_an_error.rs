//! Rule 8: "no unpinned buffers" is an error value, never a panic, and is
//! raised only after a partition's worth of consecutive pinned buffers in
//! every partition; a partition that is fully pinned makes the sweep fall
//! back to the others.

mod common;

use bufmgr::{
    BufferPool, Error, ErrorKind, Evictor, PinnedBuffer, PoolConfig, RingKind, SweepBatch,
};
use common::{TestDb, read_version, rel, small_config, with_timeout};

fn assert_no_unpinned(r: bufmgr::Result<impl std::fmt::Debug>, pool_size: usize) {
    match r {
        Err(e @ Error::NoUnpinnedBuffers { .. }) => {
            assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
            let Error::NoUnpinnedBuffers { pool_size: n } = e else {
                unreachable!()
            };
            assert_eq!(n, pool_size);
            let msg = e.to_string();
            assert!(msg.contains(&pool_size.to_string()), "{msg}");
        }
        other => panic!("expected NoUnpinnedBuffers, got {other:?}"),
    }
}

fn every_buffer_pinned(evictor: Evictor, batch: u32) {
    let db = TestDb::new();
    let rf = rel(1);
    db.create_rel(rf, 16);
    let pool = db.pool(
        small_config(8)
            .evictor(evictor)
            .batch(SweepBatch::Fixed(batch)),
    );
    let mut pins: Vec<PinnedBuffer<'_>> = (0..8)
        .map(|b| pool.read_buffer(rf, b, None).unwrap())
        .collect();
    assert_eq!(pool.pinned_buffers(), 8);

    // A miss has nowhere to go: an error, not a panic, and no pin left behind.
    assert_no_unpinned(pool.read_buffer(rf, 8, None), 8);
    let mut ring = pool
        .ring(RingKind::BulkRead)
        .expect("a pool of 8 has a 1-slot ring");
    assert_no_unpinned(pool.read_buffer(rf, 9, Some(&mut ring)), 8);
    // Extending needs a buffer too; the failure leaves the file as it was.
    assert_no_unpinned(pool.extend(rf, None), 8);
    assert_eq!(
        pool.nblocks(rf).unwrap(),
        16,
        "a failed extension grew the file"
    );
    assert_eq!(pool.pinned_buffers(), 8);
    assert_eq!(
        db.faulty.reads(),
        8,
        "nothing was read for the failed lookups"
    );

    // A hit needs no victim: still fine.
    let again = pool.read_buffer(rf, 3, None).unwrap();
    assert_eq!(again.block(), 3);
    drop(again);

    // Release one: the next miss takes exactly that buffer.
    let freed = pins.remove(5);
    let freed_id = freed.id();
    drop(freed);
    let g = pool.read_buffer(rf, 8, None).unwrap();
    assert_eq!(g.id(), freed_id);
    assert_eq!(read_version_of(g), 0);
    drop(pins);
    assert_eq!(pool.pinned_buffers(), 0);
    // And the pool is fully usable afterwards.
    for b in 0..16 {
        assert_eq!(read_version(&pool, rf, b), 0);
    }
}

fn read_version_of(p: PinnedBuffer<'_>) -> u64 {
    let b = p.block();
    common::check_page(&p.lock_shared(), b).unwrap()
}

#[test]
fn clock_every_buffer_pinned_is_an_error() {
    with_timeout(30, || every_buffer_pinned(Evictor::Clock, 1));
}

#[test]
fn hotcool_every_buffer_pinned_is_an_error() {
    with_timeout(30, || every_buffer_pinned(Evictor::HotCool, 1));
}

#[test]
fn probation_every_buffer_pinned_is_an_error() {
    with_timeout(30, || {
        every_buffer_pinned(Evictor::Probation, 1);
        every_buffer_pinned(Evictor::Probation, 4);
    });
}

#[test]
fn batched_sweep_every_buffer_pinned_is_an_error() {
    with_timeout(30, || every_buffer_pinned(Evictor::Clock, 4));
}

/// With all but one buffer pinned, and the usage counts of the others at
/// their maximum, every miss still finds the one free buffer (the sweep
/// must not give up after a pass that only cooled buffers).
#[test]
fn one_unpinned_buffer_is_always_found() {
    with_timeout(30, || {
        for evictor in Evictor::ALL {
            for batch in [1, 4] {
                let db = TestDb::new();
                let rf = rel(1);
                db.create_rel(rf, 40);
                let pool = db.pool(
                    small_config(8)
                        .evictor(evictor)
                        .batch(SweepBatch::Fixed(batch)),
                );
                let pins: Vec<_> = (0..7)
                    .map(|b| {
                        // Raise usage to the maximum first.
                        for _ in 0..6 {
                            drop(pool.read_buffer(rf, b, None).unwrap());
                        }
                        pool.read_buffer(rf, b, None).unwrap()
                    })
                    .collect();
                for b in 7..40 {
                    assert_eq!(
                        read_version(&pool, rf, b),
                        0,
                        "{evictor} batch {batch}: block {b}"
                    );
                }
                drop(pins);
                assert_eq!(pool.pinned_buffers(), 0);
            }
        }
    });
}

/// Two partitions, balancing off: a thread's misses go to its home
/// partition; when every buffer there is pinned the sweep falls back to the
/// other one; only when both are full is it an error. A thread homed in the
/// other partition falls back the other way.
fn partition_fallback(evictor: Evictor) {
    let db = TestDb::new();
    let rf = rel(1);
    db.create_rel(rf, 40);
    let pool = BufferPool::new(
        PoolConfig::new(16)
            .evictor(evictor)
            .partitions(2)
            .balancing(false)
            .batch(SweepBatch::Fixed(1)),
        db.backend(),
    )
    .unwrap();
    assert_eq!(pool.partitions().len(), 2);
    let part = |id| pool.partitions().partition_of(id);

    // This thread is the pool's first: home partition 0.
    let mut pins = Vec::new();
    for b in 0..8 {
        let p = pool.read_buffer(rf, b, None).unwrap();
        assert_eq!(part(p.id()), 0, "block {b} went outside the home partition");
        pins.push(p);
    }
    // Home full: the next eight land in partition 1.
    for b in 8..16 {
        let p = pool
            .read_buffer(rf, b, None)
            .unwrap_or_else(|e| panic!("{evictor}: home partition full, block {b}: {e}"));
        assert_eq!(part(p.id()), 1);
        pins.push(p);
    }
    assert_no_unpinned(pool.read_buffer(rf, 16, None), 16);

    // Free one buffer of partition 0; a thread homed in partition 1 (the
    // pool's second thread) finds partition 1 full and falls back to it.
    let freed = pins.remove(2);
    let freed_id = freed.id();
    drop(freed);
    std::thread::scope(|s| {
        s.spawn(|| {
            let p = pool
                .read_buffer(rf, 17, None)
                .unwrap_or_else(|e| panic!("{evictor}: fallback from partition 1: {e}"));
            assert_eq!(p.id(), freed_id);
            assert_eq!(part(p.id()), 0);
        })
        .join()
        .unwrap();
    });
    drop(pins);
    assert_eq!(pool.pinned_buffers(), 0);
}

#[test]
fn clock_full_partition_falls_back_to_the_other() {
    with_timeout(30, || partition_fallback(Evictor::Clock));
}

#[test]
fn hotcool_full_partition_falls_back_to_the_other() {
    with_timeout(30, || partition_fallback(Evictor::HotCool));
}

#[test]
fn probation_full_partition_falls_back_to_the_other() {
    with_timeout(30, || partition_fallback(Evictor::Probation));
}
