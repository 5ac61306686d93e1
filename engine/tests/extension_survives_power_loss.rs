//! A relation extended since the last checkpoint, then a power loss (the
//! simulated disk): the file keeps its new length, the blank page written
//! there may be lost, leaving a page of zeros (checksum included) that no
//! WAL record describes. It is a new page, as in PostgreSQL: scans, inserts,
//! key lookups and later commits work. The same for the commit log, whose
//! pages are created by a logged record that recovery replays. An all-zero
//! page inside what a checkpoint made durable stays an error
//! (`zeroed_page_is_an_error_not_an_empty_page.rs`, and the last test here).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{CommitMode, Database, ErrorKind, Options, Value, XIDS_PER_PAGE};
use wal::sim_disk::SimDisk;

const PAGE: usize = 8192;
/// Seeds (power losses) per test.
const SEEDS: u64 = 16;

fn options(disk: &SimDisk) -> Options {
    small_options()
        .checkpointer(false)
        .bgwriter(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .simulated_disk(disk.clone())
}

fn ids(db: &Database) -> BTreeSet<i64> {
    let r = db.read().unwrap();
    let out = r
        .scan("t")
        .unwrap()
        .map(|item| match item.unwrap().1[0] {
            Value::I64(id) => id,
            ref v => panic!("unexpected id {v:?}"),
        })
        .collect();
    r.commit().unwrap();
    out
}

/// Is block `block` of relation file `rel` all zeros on disk?
fn zeroed_on_disk(dir: &Path, rel: u32, block: usize) -> bool {
    let bytes = std::fs::read(dir.join("base").join(rel.to_string())).unwrap();
    bytes
        .get(block * PAGE..(block + 1) * PAGE)
        .is_some_and(|p| p.iter().all(|&b| b == 0))
}

/// After the reopen: the acknowledged rows and nothing else, every one by
/// key, `verify_indexes` clean; then `commits` more commits all succeed
/// and are there after another reopen.
fn check_and_go_on(dir: &Path, disk: &SimDisk, acked: &BTreeSet<i64>, commits: i64, case: &str) {
    let db = Database::open(dir, options(disk)).unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
    assert_eq!(&ids(&db), acked, "{case}");
    let r = db.read().unwrap();
    for id in acked {
        assert!(
            r.get_by_key("t", "id", &Value::I64(*id)).unwrap().is_some(),
            "{case}: row {id} by key"
        );
    }
    r.commit().unwrap();
    assert!(db.verify_indexes("t").unwrap().is_empty(), "{case}");
    let mut all = acked.clone();
    for i in 0..commits {
        let id = 1_000_000 + i;
        let txn = db.begin().unwrap();
        txn.insert("t", row(id, "after the power loss"))
            .unwrap_or_else(|e| panic!("{case}: insert {i} after the reopen: {e}"));
        txn.commit()
            .unwrap_or_else(|e| panic!("{case}: commit {i} after the reopen: {e}"));
        all.insert(id);
    }
    assert_eq!(ids(&db), all, "{case}");
    db.close().unwrap();
    let db = Database::open(dir, options(disk)).unwrap();
    assert_eq!(ids(&db), all, "{case}: after a clean reopen");
    assert!(db.verify_indexes("t").unwrap().is_empty(), "{case}");
    db.close().unwrap();
}

#[test]
fn a_table_extended_by_an_uncommitted_transaction_survives_a_power_loss() {
    watchdog(Duration::from_secs(240), || {
        let mut zeroed = 0;
        for seed in 0..SEEDS {
            let case = format!("seed {seed}");
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new();
            let db = Database::open(dir.path(), options(&disk)).unwrap();
            let rel = db.create_table("t", two_columns()).unwrap().rel.0;
            db.create_index("t_id", "t", "id", true).unwrap();
            let acked: BTreeSet<i64> = (0..40).collect();
            let txn = db.begin().unwrap();
            for &id in &acked {
                txn.insert("t", row(id, "x")).unwrap();
            }
            txn.commit().unwrap();
            db.checkpoint().unwrap();
            // An uncommitted transaction extends the table (and the index).
            let txn = db.begin().unwrap();
            let rf = bufmgr::RelFork::main(bufmgr::RelId(rel));
            let blocks_before = db.pool().nblocks(rf).unwrap();
            let mut n = 0;
            while db.pool().nblocks(rf).unwrap() == blocks_before {
                txn.insert("t", row(500_000 + n, &"u".repeat(100))).unwrap();
                n += 1;
            }
            disk.power_loss(seed).unwrap();
            drop(txn);
            drop(db);
            disk.restart();
            if zeroed_on_disk(dir.path(), rel, blocks_before as usize) {
                zeroed += 1;
            }
            check_and_go_on(dir.path(), &disk, &acked, 5, &case);
        }
        eprintln!("{zeroed} of {SEEDS} power losses left the extended page all zeros");
        assert!(zeroed > 0, "no seed left a zeroed extension");
    });
}

#[test]
fn commit_log_pages_created_after_a_checkpoint_survive_a_power_loss() {
    watchdog(Duration::from_secs(240), || {
        let mut zeroed = 0;
        for seed in 0..SEEDS {
            let case = format!("seed {seed}");
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new();
            let db = Database::open(dir.path(), options(&disk)).unwrap();
            db.create_table("t", two_columns()).unwrap();
            db.create_index("t_id", "t", "id", true).unwrap();
            // Xids up to a few short of the commit-log page boundary (their
            // commits need no rows: transactions of the manager itself).
            let tm = db.transaction_manager();
            let stop = XIDS_PER_PAGE - 3 - seed % 3;
            while tm.next_xid() < stop {
                tm.begin()
                    .unwrap()
                    .commit_with(CommitMode::Asynchronous)
                    .unwrap();
            }
            db.checkpoint().unwrap();
            // Commits up to the boundary; with an odd seed one on page 1.
            let mut acked = BTreeSet::new();
            let mut id = 0;
            let last = XIDS_PER_PAGE + seed % 2;
            while tm.next_xid() < last {
                let txn = db.begin().unwrap();
                txn.insert("t", row(id, "before the boundary")).unwrap();
                txn.commit().unwrap();
                acked.insert(id);
                id += 1;
            }
            // A transaction on commit-log page 1 (created after the
            // checkpoint) writes a row, its record reaches the WAL's disk,
            // it never commits; then the power goes.
            let txn = db.begin().unwrap();
            txn.insert("t", row(id, "never committed")).unwrap();
            db.wal().flush(db.wal().insert_lsn()).unwrap();
            disk.power_loss(seed).unwrap();
            drop(txn);
            drop(db);
            disk.restart();
            if zeroed_on_disk(dir.path(), engine::CLOG_REL.0, 1) {
                zeroed += 1;
            }
            // The commit in doubt (its record flushed, the power lost before
            // `commit` returned) may be there.
            let db = Database::open(dir.path(), options(&disk))
                .unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
            let found = ids(&db);
            assert!(
                found.is_superset(&acked),
                "{case}: lost {acked:?} vs {found:?}"
            );
            assert!(
                found.len() <= acked.len() + 1,
                "{case}: {found:?} vs {acked:?}"
            );
            db.close().unwrap();
            check_and_go_on(dir.path(), &disk, &found, 10, &case);
        }
        eprintln!("{zeroed} of {SEEDS} power losses left commit-log page 1 all zeros");
        assert!(zeroed > 0, "no seed left a zeroed commit-log page");
    });
}

#[test]
fn a_zeroed_page_inside_durable_data_is_still_an_error_after_a_power_loss() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        let rel = db.create_table("t", two_columns()).unwrap().rel.0;
        let txn = db.begin().unwrap();
        for id in 0..200 {
            txn.insert("t", row(id, &"d".repeat(100))).unwrap();
        }
        txn.commit().unwrap();
        // Blocks 0.. are durable now; then the power goes.
        db.checkpoint().unwrap();
        disk.power_loss(1).unwrap();
        drop(db);
        disk.restart();
        let file = dir.path().join("base").join(rel.to_string());
        let mut bytes = std::fs::read(&file).unwrap();
        assert!(bytes.len() >= 2 * PAGE);
        bytes[..PAGE].fill(0);
        std::fs::write(&file, bytes).unwrap();
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        let r = db.read().unwrap();
        let err = r
            .scan("t")
            .unwrap()
            .find_map(|item| item.err())
            .expect("a zeroed durable page is an error");
        assert_eq!(err.kind(), ErrorKind::CorruptData, "{err}");
        assert!(err.to_string().contains("all zeros"), "{err}");
    });
}
