//! Per-relation counters (`PoolStats::relations`): every access, hit and
//! eviction is filed under the relation of its page, counted by the thread
//! that made it and summed on read, so a scripted sequence of reads gives
//! exact per-relation figures.

mod common;

use bufmgr::{RELATION_SLOTS, RelId, RelationStats};
use common::{TestDb, read_version, rel, small_config, with_timeout};

fn counts(accesses: u64, hits: u64, evictions: u64) -> RelationStats {
    RelationStats {
        accesses,
        hits,
        evictions,
    }
}

#[test]
fn a_scripted_sequence_counts_hits_and_misses_per_relation_exactly() {
    with_timeout(30, || {
        let db = TestDb::new();
        let (a, b) = (rel(1), rel(2));
        db.create_rel(a, 6);
        db.create_rel(b, 6);
        let pool = db.pool(small_config(8));
        // a: 4 misses, then the same 4 blocks again as hits; b: 2 misses.
        for blk in 0..4 {
            read_version(&pool, a, blk);
        }
        for blk in 0..4 {
            read_version(&pool, a, blk);
        }
        for blk in 0..2 {
            read_version(&pool, b, blk);
        }
        let s = pool.stats();
        assert_eq!(s.relation(a.rel), counts(8, 4, 0));
        assert_eq!(s.relation(b.rel), counts(2, 0, 0));
        assert_eq!(s.relation(a.rel).misses(), 4);
        assert_eq!(s.relation(a.rel).hit_ratio(), Some(0.5));
        assert_eq!(
            s.relation(RelId(99)).hit_ratio(),
            None,
            "a relation never looked up has no hit ratio"
        );
        assert_eq!(s.relation(RelId(99)), counts(0, 0, 0));
        assert_eq!(s.relations.len(), 2);

        // 4 more pages of b: 10 pages in 8 buffers, so exactly 2 evictions,
        // filed under whichever relation lost the pages.
        for blk in 2..6 {
            read_version(&pool, b, blk);
        }
        let w = pool.stats().since(&s);
        assert_eq!(w.relation(a.rel).accesses, 0);
        assert_eq!(w.relation(b.rel).accesses, 4);
        assert_eq!(w.relation(b.rel).hits, 0);
        let evicted = w.relation(a.rel).evictions + w.relation(b.rel).evictions;
        assert_eq!(evicted, 2);
        assert_eq!(evicted, w.totals().evictions);
        assert_eq!(w.relations_untracked, RelationStats::default());
    });
}

#[test]
fn counts_of_threads_that_exited_are_kept_and_summed() {
    with_timeout(30, || {
        let db = TestDb::new();
        let a = rel(7);
        db.create_rel(a, 4);
        let pool = db.pool(small_config(16));
        std::thread::scope(|sc| {
            for _ in 0..3 {
                sc.spawn(|| {
                    for blk in 0..4 {
                        read_version(&pool, a, blk);
                    }
                });
            }
        });
        // The threads are gone: their blocks were folded into the retired one.
        let r = pool.stats().relation(a.rel);
        assert_eq!(r.accesses, 12);
        // Each block was read from storage once; every other lookup was a hit
        // (or a wait for another thread's read, which counts as a hit).
        assert_eq!(r.misses(), pool.stats().totals().reads);
        assert_eq!(r.misses(), 4);
    });
}

#[test]
fn relations_beyond_a_threads_slots_are_summed_as_untracked_and_none_is_lost() {
    with_timeout(60, || {
        let db = TestDb::new();
        let n = RELATION_SLOTS as u32 + 10;
        for r in 1..=n {
            db.create_rel(rel(r), 1);
        }
        let pool = db.pool(small_config(16));
        for r in 1..=n {
            read_version(&pool, rel(r), 0);
        }
        let s = pool.stats();
        assert_eq!(s.relations.len(), RELATION_SLOTS);
        assert_eq!(s.relations_untracked.accesses, 10);
        let named: u64 = s.relations.values().map(|r| r.accesses).sum();
        assert_eq!(named + s.relations_untracked.accesses, u64::from(n));
        assert_eq!(s.totals().accesses, u64::from(n));
    });
}

/// Threads that exit are folded into one retired block; the relations they
/// read keep their names however many there are across all of them (each
/// thread read fewer relations than it has slots, so none is untracked).
#[test]
fn relations_of_threads_that_exited_keep_their_names_beyond_one_threads_slots() {
    with_timeout(60, || {
        let db = TestDb::new();
        let per_thread = RELATION_SLOTS as u32 - 28;
        let n = per_thread * 2;
        for r in 1..=n {
            db.create_rel(rel(r), 1);
        }
        let pool = db.pool(small_config(16));
        let pool = std::sync::Arc::new(pool);
        for first in [1, per_thread + 1] {
            let pool = pool.clone();
            // A joined thread has run its thread-local destructors: it has
            // retired its counters.
            std::thread::spawn(move || {
                for r in first..first + per_thread {
                    read_version(&pool, rel(r), 0);
                }
            })
            .join()
            .unwrap();
        }
        let s = pool.stats();
        assert_eq!(s.relations_untracked, RelationStats::default());
        assert_eq!(s.relations.len(), n as usize);
        for r in 1..=n {
            let c = s.relation(rel(r).rel);
            assert_eq!((c.accesses, c.hits), (1, 0), "relation {r}");
        }
    });
}

/// A thread whose slots are all taken frees the slots of relations dropped
/// since: relations it reads next are counted by name, the dropped ones
/// keep their counts, and nothing is counted twice or lost.
#[test]
fn a_full_threads_slots_of_dropped_relations_are_given_to_new_relations() {
    with_timeout(60, || {
        let db = TestDb::new();
        let n = RELATION_SLOTS as u32;
        for r in 1..=n + 20 {
            db.create_rel(rel(r), 1);
        }
        let pool = db.pool(small_config(16));
        for r in 1..=n {
            read_version(&pool, rel(r), 0);
        }
        // Full: one more relation is untracked.
        read_version(&pool, rel(n + 1), 0);
        assert_eq!(pool.stats().relations_untracked.accesses, 1);
        // More dropped than read next: an eviction may also claim a freed
        // slot for the untracked relation's page it evicts.
        for r in 1..=20 {
            pool.drop_relation(rel(r).rel).unwrap();
        }
        for r in n + 2..=n + 11 {
            read_version(&pool, rel(r), 0);
        }
        let s = pool.stats();
        for r in (1..=n).chain(n + 2..=n + 11) {
            assert_eq!(s.relation(rel(r).rel).accesses, 1, "relation {r}");
        }
        assert!(s.relations_untracked.accesses <= 1);
        let named: u64 = s.relations.values().map(|r| r.accesses).sum();
        assert_eq!(named + s.relations_untracked.accesses, s.totals().accesses);
        let evicted: u64 = s.relations.values().map(|r| r.evictions).sum();
        assert_eq!(
            evicted + s.relations_untracked.evictions,
            s.totals().evictions
        );
    });
}

/// `thread_evictions` counts the calling thread's evictions only: a hit and
/// a miss into a free buffer leave it alone, a miss that replaces a valid
/// page raises it by one, and another thread's evictions do not show.
#[test]
fn thread_evictions_move_only_when_this_threads_read_replaces_a_page() {
    with_timeout(30, || {
        let db = TestDb::new();
        let a = rel(3);
        db.create_rel(a, 12);
        let pool = db.pool(small_config(8));
        assert_eq!(pool.thread_evictions(), 0);
        // 8 misses into free buffers, then a hit: no eviction.
        for blk in 0..8 {
            read_version(&pool, a, blk);
        }
        read_version(&pool, a, 0);
        assert_eq!(pool.thread_evictions(), 0);
        // Each further block needs a victim that holds a page.
        for (n, blk) in (8..10).enumerate() {
            let before = pool.thread_evictions();
            read_version(&pool, a, blk);
            assert_eq!(pool.thread_evictions(), before + 1, "read {n}");
        }
        std::thread::scope(|sc| {
            sc.spawn(|| {
                read_version(&pool, a, 10);
                read_version(&pool, a, 11);
                assert_eq!(pool.thread_evictions(), 2, "the other thread's own");
            });
        });
        assert_eq!(pool.thread_evictions(), 2, "unmoved by the other thread");
        assert_eq!(pool.stats().totals().evictions, 4);
    });
}
