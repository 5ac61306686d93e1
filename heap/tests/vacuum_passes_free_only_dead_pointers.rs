//! Vacuum's two passes: pass 1 (`lazy_scan_heap`) prunes and leaves `Dead`
//! pointers that inserts never reuse; pass 2 (`free_dead`) turns only listed
//! pointers that are `Dead` into `Unused`, after which inserts reuse them.
//! Both passes are WAL-logged and replay (PRUNE, then VACUUM) rebuilds the
//! same pages, also when the log ends between the passes.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use bufmgr::{BufferPool, RelFork, RelId};
use common::{db, masked_pages, pool_over, row, wal_config, within};
use heap::page::{HeapPage, LpState, PageId};
use heap::record::{XLOG_HEAP_PRUNE, XLOG_HEAP_VACUUM};
use heap::{DeadTids, Heap, InMemoryTransactions, ScanOptions, Tid};
use std::time::Duration;
use wal::{Lsn, MIN_SEGMENT_SIZE, RmgrKind, WalReader};

const REL: RelId = RelId(60);

fn state(pool: &BufferPool, tid: Tid) -> LpState {
    let page = pool
        .read_buffer(RelFork::main(REL), tid.block, None)
        .unwrap()
        .lock_shared();
    let view = HeapPage::parse(
        &page,
        PageId {
            rel: REL,
            block: tid.block,
        },
    )
    .unwrap();
    if tid.offset > view.item_count() {
        return LpState::Unused; // cut off the end of the array
    }
    view.item(tid.offset).unwrap().state
}

/// 600 rows over several pages; every third deleted and committed.
fn load_and_delete(heap: &Heap, txns: &InMemoryTransactions) -> (Vec<Tid>, Vec<Tid>) {
    let x = txns.begin();
    let tids: Vec<Tid> = (0..600)
        .map(|n| heap.insert(x, &row(n, 120)).unwrap())
        .collect();
    txns.commit(x, Lsn::ZERO);
    let d = txns.begin();
    let snap = txns.snapshot(d);
    let deleted: Vec<Tid> = tids.iter().copied().step_by(3).collect();
    for &t in &deleted {
        heap.delete(d, &snap, txns, t).unwrap();
    }
    txns.commit(d, Lsn::ZERO);
    (tids, deleted)
}

#[test]
fn dead_pointers_wait_for_pass_two_and_only_they_are_freed() {
    within(Duration::from_secs(60), || {
        let db = db(32, None);
        let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
        let txns = InMemoryTransactions::new();
        let (tids, deleted) = load_and_delete(&heap, &txns);
        let pages = heap.nblocks().unwrap();

        let horizon = txns.snapshot(0).xmax;
        let (stats, dead) = heap.lazy_scan_heap(horizon, &txns).unwrap();
        assert_eq!(stats.pruned.tuples_removed, deleted.len() as u64);
        assert_eq!(stats.pruned.line_pointers_freed, 0, "pass 1 frees none");
        assert_eq!(stats.dead_pointers, deleted.len() as u64);
        assert_eq!(dead, deleted.iter().copied().collect::<DeadTids>());
        for &t in &deleted {
            assert_eq!(state(&db.pool, t), LpState::Dead, "{t}");
        }

        // Inserts use the space pass 1 freed but never a dead pointer, also
        // a second pass 1 (which finds the same pointers again).
        let y = txns.begin();
        let mut new = Vec::new();
        while heap.nblocks().unwrap() == pages {
            new.push(heap.insert(y, &row(9_000, 60)).unwrap());
        }
        txns.commit(y, Lsn::ZERO);
        assert!(new.len() > 100, "space freed by pruning was reused");
        assert!(new.iter().all(|t| !dead.contains(t)), "a dead TID reused");
        let (again, dead_again) = heap.lazy_scan_heap(horizon, &txns).unwrap();
        assert_eq!(dead_again, dead);
        assert_eq!(again.pruned.tuples_removed, 0);

        // Pass 2 with extra TIDs: a live row's, one past a page's pointers,
        // one past the relation's end. Only the dead ones change.
        let live = tids[1];
        let mut list = dead.clone();
        list.extend([live, Tid::new(0, 999), Tid::new(pages + 50, 1)]);
        let f = heap.free_dead(&list).unwrap();
        assert_eq!(f.line_pointers_freed, dead.len() as u64);
        assert_eq!(f.not_dead, 3);
        assert_eq!(f.pages_vacuumed, u64::from(pages));
        assert_eq!(state(&db.pool, live), LpState::Normal);
        for &t in &deleted {
            assert_eq!(state(&db.pool, t), LpState::Unused, "{t}");
        }
        // Freed pointers are not freed twice.
        let twice = heap.free_dead(&dead).unwrap();
        assert_eq!(twice.line_pointers_freed, 0);
        assert_eq!(twice.not_dead, dead.len() as u64);

        // Now inserts reuse them.
        let z = txns.begin();
        let reused: BTreeSet<Tid> = (0..dead.len() as u64)
            .map(|n| heap.insert(z, &row(20_000 + n, 16)).unwrap())
            .collect();
        txns.commit(z, Lsn::ZERO);
        assert!(reused.iter().any(|t| dead.contains(t)), "pointers reused");
        let snap = txns.snapshot(0);
        assert_eq!(
            heap.scan(&snap, &txns, ScanOptions::default())
                .unwrap()
                .len(),
            tids.len() - deleted.len() + new.len() + reused.len()
        );
        assert_eq!(heap.fetch(live, &snap, &txns).unwrap(), Some(row(1, 120)));
    });
}

/// Pass 2 reads the pages of its list through a block-list read stream:
/// each listed page once, adjacent ones in combined reads, and no page
/// that holds no dead pointer.
#[test]
fn pass_two_reads_only_the_listed_pages_in_combined_reads() {
    within(Duration::from_secs(60), || {
        let db = db(256, None);
        let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
        let txns = InMemoryTransactions::new();
        let (_, deleted) = load_and_delete(&heap, &txns);
        let pages = heap.nblocks().unwrap();
        let horizon = txns.snapshot(0).xmax;
        let (_, mut dead) = heap.lazy_scan_heap(horizon, &txns).unwrap();
        // Leave out the dead pointers of every fourth page: pass 2 must not
        // read those pages at all.
        dead.retain(|t| t.block % 4 != 3);
        let listed: BTreeSet<u32> = dead.iter().map(|t| t.block).collect();
        assert!(
            listed.len() >= 6 && (listed.len() as u32) < pages,
            "{listed:?}"
        );
        db.pool.flush_all(true).unwrap();
        db.pool.evict_all().unwrap();
        let before = db.pool.stats();
        let freed = heap.free_dead(&dead).unwrap();
        let d = db.pool.stats().since(&before).totals();
        assert_eq!(freed.line_pointers_freed, dead.len() as u64);
        assert_eq!(freed.pages_vacuumed, listed.len() as u64);
        // The heap pages read: the listed ones (the free-space map's
        // reads are counted too, so at least them, and no unlisted one).
        let resident = db.pool.resident_pages();
        assert_eq!(
            resident.get(&RelFork::main(REL)).copied().unwrap_or(0),
            listed.len(),
            "only the listed heap pages were read"
        );
        assert!(d.reads >= listed.len() as u64);
        assert!(
            d.combined_reads > 0,
            "adjacent listed pages are combined: {d:?}"
        );
        assert!(d.combined_read_blocks <= listed.len() as u64);
        assert!(deleted.len() as u64 > freed.line_pointers_freed);
    });
}

#[test]
fn the_convenience_vacuum_runs_both_passes() {
    let db = db(32, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    let (_, deleted) = load_and_delete(&heap, &txns);
    let s = heap.vacuum(txns.snapshot(0).xmax, &txns).unwrap();
    assert_eq!(s.pruned.tuples_removed, deleted.len() as u64);
    assert_eq!(s.dead_pointers, deleted.len() as u64);
    assert_eq!(s.pruned.line_pointers_freed, deleted.len() as u64);
    assert!(s.pages_vacuumed > 0 && s.pages_vacuumed == s.pages_pruned);
    for &t in &deleted {
        assert_eq!(state(&db.pool, t), LpState::Unused);
    }
}

/// Replay heap records of `datadir`'s WAL ending at or before `until`;
/// returns the `info` bytes seen.
fn replay(datadir: &Path, until: Lsn, pool: &BufferPool) -> Vec<u8> {
    let mut reader = WalReader::new(datadir, Lsn::ZERO, MIN_SEGMENT_SIZE).unwrap();
    let mut infos = Vec::new();
    while let Some((lsn, record)) = reader.next_record().unwrap() {
        let end = Lsn(lsn.as_u64() + record.encoded_len() as u64);
        if end > until {
            break;
        }
        if record.kind() == RmgrKind::Heap {
            heap::redo(&record, end, pool).unwrap();
            infos.push(record.info());
        }
    }
    infos
}

#[test]
fn redo_of_both_passes_rebuilds_the_pages() {
    within(Duration::from_secs(60), || {
        for full_page_writes in [true, false] {
            let db = db(16, Some(wal_config(full_page_writes)));
            let wal = db.wal.clone().unwrap();
            let heap = Heap::open(db.pool.clone(), db.wal.clone(), REL, true).unwrap();
            let txns = InMemoryTransactions::new();
            let (_, deleted) = load_and_delete(&heap, &txns);
            let (_, dead) = heap.lazy_scan_heap(txns.snapshot(0).xmax, &txns).unwrap();
            wal.flush_all().unwrap();
            let between = wal.insert_lsn();
            let after_pass_one = masked_pages(&db.pool, REL);
            heap.free_dead(&dead).unwrap();
            wal.flush_all().unwrap();
            let live = masked_pages(&db.pool, REL);

            // The log cut between the passes: pointers are dead, not unused.
            let empty = tempfile::tempdir().unwrap();
            let fresh = pool_over(empty.path(), 16, None);
            let infos = replay(db.dir.path(), between, &fresh);
            assert!(infos.contains(&XLOG_HEAP_PRUNE));
            assert!(!infos.contains(&XLOG_HEAP_VACUUM));
            assert!(masked_pages(&fresh, REL) == after_pass_one);
            for &t in &deleted {
                assert_eq!(state(&fresh, t), LpState::Dead);
            }

            // The whole log: pass 2 replayed too, and again is a no-op.
            let empty = tempfile::tempdir().unwrap();
            let fresh = pool_over(empty.path(), 16, None);
            let infos = replay(db.dir.path(), Lsn(u64::MAX), &fresh);
            assert!(infos.contains(&XLOG_HEAP_VACUUM));
            let replayed = masked_pages(&fresh, REL);
            assert_eq!(replayed.len(), live.len());
            for (block, (a, b)) in live.iter().zip(&replayed).enumerate() {
                assert!(a == b, "block {block} differs (fpw {full_page_writes})");
            }
            replay(db.dir.path(), Lsn(u64::MAX), &fresh);
            assert!(masked_pages(&fresh, REL) == replayed);
            for &t in &deleted {
                assert_eq!(state(&fresh, t), LpState::Unused);
            }
        }
    });
}
