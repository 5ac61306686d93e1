//! WAL + redo: changes made through a logged heap on a pool with a real WAL
//! are replayed with `heap::redo` into a fresh pool over an empty data
//! directory, and every page comes out as the live pool had it (hint bits,
//! checksum and free hole masked, as PostgreSQL's `heap_mask` does). With a
//! checkpoint in the middle, a page torn on disk afterwards is repaired from
//! the full-page image its first post-checkpoint change carried.

mod common;

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use bufmgr::{BufferPool, PAGE_SIZE, RelFork, RelId};
use common::{Db, db, masked_pages, pool_over, row, wal_config};
use heap::{Heap, InMemoryTransactions, ScanOptions, Tid};
use wal::{Lsn, MIN_SEGMENT_SIZE, RmgrKind, WalReader};

const REL: RelId = RelId(50);

/// Inserts over several pages, updates within and across pages, deletes,
/// a prune and a vacuum, and inserts into the space they freed.
fn workload(db: &Db, heap: &Heap, txns: &InMemoryTransactions, seed: u64) {
    let x = txns.begin();
    let tids: Vec<Tid> = (0..300)
        .map(|n| {
            heap.insert(x, &row(seed + n, 60 + (n as usize % 7) * 40))
                .unwrap()
        })
        .collect();
    txns.commit(x, Lsn::ZERO);
    let u = txns.begin();
    let snap = txns.snapshot(u);
    for (i, t) in tids.iter().enumerate() {
        match i % 5 {
            0 => {
                heap.update(u, &snap, txns, *t, &row(seed + 1000 + i as u64, 30))
                    .unwrap();
            }
            1 => heap.delete(u, &snap, txns, *t).unwrap(),
            2 => {
                heap.update(u, &snap, txns, *t, &row(seed + 2000 + i as u64, 700))
                    .unwrap();
            }
            _ => {}
        }
    }
    txns.commit(u, Lsn::ZERO);
    let horizon = txns.snapshot(0).xmax;
    heap.prune_page(0, horizon, txns).unwrap();
    heap.vacuum(horizon, txns).unwrap();
    let y = txns.begin();
    for n in 0..100 {
        heap.insert(y, &row(seed + 5000 + n, 90)).unwrap();
    }
    txns.abort(y);
    if let Some(wal) = &db.wal {
        wal.flush_all().unwrap();
    }
}

/// Replay every heap record from `start` in `datadir`'s WAL into `pool`.
fn replay(datadir: &Path, start: Lsn, pool: &BufferPool) -> usize {
    let mut reader = WalReader::new(datadir, start, MIN_SEGMENT_SIZE).unwrap();
    let mut n = 0;
    while let Some((lsn, record)) = reader.next_record().unwrap() {
        if record.kind() != RmgrKind::Heap {
            continue;
        }
        let end = Lsn(lsn.as_u64() + record.encoded_len() as u64);
        heap::redo(&record, end, pool).unwrap();
        n += 1;
    }
    n
}

fn replay_into_empty_directory(full_page_writes: bool) {
    let db = db(16, Some(wal_config(full_page_writes)));
    let heap = Heap::open(db.pool.clone(), db.wal.clone(), REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    workload(&db, &heap, &txns, 0);
    let live = masked_pages(&db.pool, REL);
    assert!(live.len() > 5, "the workload spans several pages");

    let empty = tempfile::tempdir().unwrap();
    let fresh = pool_over(empty.path(), 16, None);
    let records = replay(db.dir.path(), Lsn::ZERO, &fresh);
    assert!(records > 300);
    let replayed = masked_pages(&fresh, REL);
    assert_eq!(replayed.len(), live.len());
    for (block, (a, b)) in live.iter().zip(&replayed).enumerate() {
        assert!(
            a == b,
            "block {block} differs after redo (full_page_writes {full_page_writes})"
        );
    }
    // The replayed heap answers queries like the live one.
    let again = Heap::open(fresh.clone(), None, REL, true).unwrap();
    let snap = txns.snapshot(0);
    assert_eq!(
        again.scan(&snap, &txns, ScanOptions::default()).unwrap(),
        heap.scan(&snap, &txns, ScanOptions::default()).unwrap()
    );
    // Replaying again changes nothing (page LSNs say the changes are there).
    replay(db.dir.path(), Lsn::ZERO, &fresh);
    assert!(masked_pages(&fresh, REL) == replayed);
}

#[test]
fn replay_with_full_page_images_rebuilds_every_page() {
    replay_into_empty_directory(true);
}

#[test]
fn replay_without_full_page_images_rebuilds_every_page() {
    replay_into_empty_directory(false);
}

#[test]
fn torn_page_is_repaired_from_the_full_page_image() {
    let db = db(16, Some(wal_config(true)));
    let heap = Heap::open(db.pool.clone(), db.wal.clone(), REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    workload(&db, &heap, &txns, 0);
    let wal = db.wal.clone().unwrap();
    let pool = db.pool.clone();
    wal.checkpoint(|_| pool.flush_all(false), 1000).unwrap();
    let redo = wal.last_checkpoint().unwrap().redo_lsn;
    // After the checkpoint: the first change to each page carries an image.
    workload(&db, &heap, &txns, 100_000);
    let live = masked_pages(&db.pool, REL);
    db.pool.flush_all(false).unwrap();
    let Db { dir, pool, wal } = db;
    drop(heap);
    drop(pool);
    drop(wal);
    // Tear block 0: its second half is garbage, as if the write stopped midway.
    let path = dir.path().join("base").join(REL.0.to_string());
    let mut f = OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start((PAGE_SIZE / 2) as u64)).unwrap();
    f.write_all(&[0xA5; PAGE_SIZE / 2]).unwrap();
    drop(f);

    let recovered = pool_over(dir.path(), 16, None);
    let torn = recovered.read_buffer(RelFork::main(REL), 0, None);
    assert!(torn.is_err(), "the torn page fails its checksum");
    drop(torn);
    replay(dir.path(), redo, &recovered);
    let pages = masked_pages(&recovered, REL);
    assert_eq!(pages.len(), live.len());
    for (block, (a, b)) in live.iter().zip(&pages).enumerate() {
        assert!(a == b, "block {block} differs after recovery");
    }
}
