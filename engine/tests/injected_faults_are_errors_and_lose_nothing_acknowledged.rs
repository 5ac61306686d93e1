//! Every injected fault kind, through the real engine on a simulated disk
//! (`wal::sim_disk::SimDisk`, opened with `Options::simulated_disk`): EIO on
//! read, write and fsync, ENOSPC, a short write and a torn 4 KiB half, on
//! WAL segments, the control file and relation files. After each:
//! - the operation that met the fault is an error naming the file that
//!   failed (and the operation);
//! - where it must, the engine refuses what follows: a failed WAL write or
//!   fsync stops every later commit (as PostgreSQL PANICs), with an error
//!   that says why, until the database is reopened; a failed relation write
//!   stops later page writes;
//! - then the power goes (un-synced writes dropped or torn, seeded) and the
//!   database reopens on what survived: every acknowledged commit is there,
//!   nothing else, the unique index agrees with the table, and new commits
//!   work again.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Options, Value};
use wal::sim_disk::{Fault, FaultKind, FaultOp, FileClass, SimDisk};

fn options(disk: &SimDisk) -> Options {
    small_options()
        .checkpointer(false)
        .bgwriter(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        // Each WAL fault is for the next commit's own file operation: no
        // segment made ahead in the background may take it first.
        .wal_preallocate(false)
        .simulated_disk(disk.clone())
}

/// A database on `disk` with table `t` (unique index on `id`) and rows
/// `0..n` committed one transaction each.
fn setup(disk: &SimDisk, dir: &std::path::Path, n: i64) -> (Database, BTreeSet<i64>) {
    let db = Database::open(dir, options(disk)).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let mut acked = BTreeSet::new();
    for id in 0..n {
        commit_one(&db, id).unwrap();
        acked.insert(id);
    }
    (db, acked)
}

fn commit_one(db: &Database, id: i64) -> engine::Result<()> {
    let t = db.begin()?;
    t.insert("t", row(id, &format!("row {id}")))?;
    t.commit().map(drop)
}

/// Power loss with `seed`, restart, reopen: every id of `acked` is there,
/// every id found is in `acked` or `maybe`, lookups and the index agree,
/// and a new commit works.
fn power_loss_and_check(
    disk: &SimDisk,
    dir: &std::path::Path,
    db: Database,
    acked: &BTreeSet<i64>,
    maybe: &BTreeSet<i64>,
    seed: u64,
) {
    let loss = disk.power_loss(seed).unwrap();
    eprintln!("power loss (seed {seed}): {loss:?}");
    drop(db);
    disk.restart();
    let db = Database::open(dir, options(disk)).unwrap();
    let found = ids(&db);
    let lost: Vec<_> = acked.difference(&found).collect();
    assert!(lost.is_empty(), "acknowledged commits lost: {lost:?}");
    let phantom: Vec<_> = found
        .iter()
        .filter(|id| !acked.contains(id) && !maybe.contains(id))
        .collect();
    assert!(phantom.is_empty(), "rows never committed: {phantom:?}");
    let r = db.read().unwrap();
    for id in &found {
        let got = r.get_by_key("t", "id", &Value::I64(*id)).unwrap();
        assert!(got.is_some(), "row {id} scanned but not found by key");
    }
    r.commit().unwrap();
    assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
    let next = found.last().map_or(0, |m| m + 1) + 1000;
    commit_one(&db, next).unwrap();
    db.close().unwrap();
}

fn ids(db: &Database) -> BTreeSet<i64> {
    let r = db.read().unwrap();
    let mut out = BTreeSet::new();
    for row in r.scan("t").unwrap() {
        let (_, row) = row.unwrap();
        let Value::I64(id) = row[0] else {
            panic!("id column holds {:?}", row[0]);
        };
        assert!(out.insert(id), "row {id} seen twice in one scan");
    }
    r.commit().unwrap();
    out
}

/// The WAL faults: each fails the next commit's flush; every later commit
/// is refused with the first failure as the reason.
fn wal_fault_is_fatal_for_commits(op: FaultOp, kind: FaultKind, expect: &'static str, seed: u64) {
    watchdog(Duration::from_secs(60), move || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (db, acked) = setup(&disk, dir.path(), 20);
        disk.inject(Fault::next(FileClass::Wal, op, kind));
        let e = commit_one(&db, 100).unwrap_err().to_string();
        eprintln!("{kind:?} on WAL {op:?}: {e}");
        assert!(e.contains(expect), "{kind:?} on WAL {op:?}: {e}");
        assert!(e.contains("wal/"), "the error names the segment: {e}");
        // Fatal: the fault is gone, but the log still refuses.
        let again = commit_one(&db, 101).unwrap_err().to_string();
        eprintln!("  then: {again}");
        assert!(
            again.contains("refus") && again.contains(expect),
            "a later commit is refused, saying why: {again}"
        );
        let maybe: BTreeSet<i64> = [100].into();
        power_loss_and_check(&disk, dir.path(), db, &acked, &maybe, seed);
    });
}

#[test]
fn failed_wal_fsync_refuses_every_later_commit_and_loses_nothing_acknowledged() {
    wal_fault_is_fatal_for_commits(FaultOp::Sync, FaultKind::Eio, "fdatasync", 1);
}

#[test]
fn failed_wal_write_refuses_every_later_commit_and_loses_nothing_acknowledged() {
    wal_fault_is_fatal_for_commits(FaultOp::Write, FaultKind::Eio, "injected EIO", 2);
}

#[test]
fn full_disk_under_the_wal_refuses_commits_and_loses_nothing_acknowledged() {
    wal_fault_is_fatal_for_commits(FaultOp::Write, FaultKind::NoSpace, "ENOSPC", 3);
}

#[test]
fn short_wal_write_then_full_disk_loses_nothing_acknowledged() {
    wal_fault_is_fatal_for_commits(FaultOp::Write, FaultKind::ShortWrite, "ENOSPC", 4);
}

#[test]
fn torn_wal_write_loses_nothing_acknowledged() {
    wal_fault_is_fatal_for_commits(FaultOp::Write, FaultKind::TornWrite, "torn write", 5);
}

/// A control-file fault fails the checkpoint, naming the file; the old
/// control file stays, commits go on, and a power loss loses nothing.
fn control_fault_fails_the_checkpoint(op: FaultOp, kind: FaultKind, seed: u64) {
    watchdog(Duration::from_secs(60), move || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (db, mut acked) = setup(&disk, dir.path(), 20);
        disk.inject(Fault::next(FileClass::Control, op, kind));
        let e = db.checkpoint().unwrap_err().to_string();
        eprintln!("{kind:?} on control {op:?}: {e}");
        assert!(e.contains("control"), "{kind:?} on control {op:?}: {e}");
        for id in 20..30 {
            commit_one(&db, id).unwrap();
            acked.insert(id);
        }
        power_loss_and_check(&disk, dir.path(), db, &acked, &BTreeSet::new(), seed);
    });
}

#[test]
fn failed_control_file_write_fails_the_checkpoint_and_loses_nothing() {
    control_fault_fails_the_checkpoint(FaultOp::Write, FaultKind::Eio, 11);
}

#[test]
fn full_disk_under_the_control_file_fails_the_checkpoint_and_loses_nothing() {
    control_fault_fails_the_checkpoint(FaultOp::Write, FaultKind::NoSpace, 12);
}

#[test]
fn failed_control_file_fsync_fails_the_checkpoint_and_loses_nothing() {
    control_fault_fails_the_checkpoint(FaultOp::Sync, FaultKind::Eio, 13);
}

/// A relation-file fault during a checkpoint fails it, naming the file;
/// the pool refuses later page writes; a power loss loses nothing (torn
/// pages are repaired from their full-page images).
fn relation_fault_fails_the_checkpoint(
    op: FaultOp,
    kind: FaultKind,
    expect: &'static str,
    seed: u64,
) {
    watchdog(Duration::from_secs(60), move || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (db, acked) = setup(&disk, dir.path(), 300);
        disk.inject(Fault::next(FileClass::Relation, op, kind));
        let e = db.checkpoint().unwrap_err().to_string();
        eprintln!("{kind:?} on relation {op:?}: {e}");
        assert!(e.contains(expect), "{kind:?} on relation {op:?}: {e}");
        assert!(
            e.contains("base/"),
            "the error names the relation file: {e}"
        );
        if op == FaultOp::Write {
            let again = db.checkpoint().unwrap_err().to_string();
            eprintln!("  then: {again}");
            assert!(
                again.contains("refus"),
                "later page writes are refused: {again}"
            );
        }
        power_loss_and_check(&disk, dir.path(), db, &acked, &BTreeSet::new(), seed);
    });
}

#[test]
fn failed_relation_write_fails_the_checkpoint_and_loses_nothing() {
    relation_fault_fails_the_checkpoint(FaultOp::Write, FaultKind::Eio, "injected EIO", 21);
}

#[test]
fn full_disk_under_a_relation_fails_the_checkpoint_and_loses_nothing() {
    relation_fault_fails_the_checkpoint(FaultOp::Write, FaultKind::NoSpace, "ENOSPC", 22);
}

#[test]
fn short_relation_write_fails_the_checkpoint_and_loses_nothing() {
    relation_fault_fails_the_checkpoint(FaultOp::Write, FaultKind::ShortWrite, "ENOSPC", 23);
}

#[test]
fn torn_relation_write_is_repaired_after_the_power_loss() {
    relation_fault_fails_the_checkpoint(FaultOp::Write, FaultKind::TornWrite, "torn write", 24);
}

#[test]
fn failed_relation_fsync_fails_the_checkpoint_and_loses_nothing() {
    relation_fault_fails_the_checkpoint(FaultOp::Sync, FaultKind::Eio, "fdatasync", 25);
}

#[test]
fn failed_relation_read_is_an_error_naming_the_file_and_the_next_read_works() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (db, acked) = setup(&disk, dir.path(), 300);
        db.close().unwrap();
        // Reopen: the pool is cold, so the lookup must read from the file.
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        disk.inject(Fault {
            sticky: true,
            ..Fault::next(FileClass::Relation, FaultOp::Read, FaultKind::Eio)
        });
        let r = db.read().unwrap();
        let e = r
            .get_by_key("t", "id", &Value::I64(7))
            .unwrap_err()
            .to_string();
        eprintln!("Eio on relation Read: {e}");
        assert!(e.contains("read") && e.contains("base/"), "{e}");
        r.rollback().unwrap();
        disk.clear_faults();
        assert_eq!(ids(&db), acked, "reads work again once the fault is gone");
        db.close().unwrap();
    });
}

/// fsyncgate: after a failed fdatasync of a relation file the kernel may
/// have dropped the dirty pages, so a later checkpoint whose own fsync
/// succeeds proves nothing about them. If that checkpoint moved the redo
/// point past their WAL, a power loss would lose acknowledged rows; the
/// engine must not let it (PostgreSQL PANICs). The simulated disk drops
/// every change a failed sync covered at the power loss.
#[test]
fn a_failed_relation_fsync_is_not_forgotten_by_a_later_checkpoint() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (db, mut acked) = setup(&disk, dir.path(), 300);
        disk.inject(Fault::next(
            FileClass::Relation,
            FaultOp::Sync,
            FaultKind::Eio,
        ));
        let e = db.checkpoint().unwrap_err().to_string();
        eprintln!("Eio on relation Sync: {e}");
        // The next checkpoint is refused, saying why, though the fault is
        // gone: its fsync would succeed and prove nothing.
        let later = db.checkpoint().unwrap_err().to_string();
        eprintln!("  a second checkpoint: {later}");
        assert!(
            later.contains("refuses") && later.contains("fdatasync"),
            "{later}"
        );
        for id in 300..310 {
            if commit_one(&db, id).is_ok() {
                acked.insert(id);
            }
        }
        let _ = db.checkpoint();
        power_loss_and_check(&disk, dir.path(), db, &acked, &BTreeSet::new(), 31);
    });
}

/// EIO reading the WAL or the control file at open: the open fails naming
/// the file (recovery cannot know where the log ends); once the disk reads
/// again, the open recovers everything.
#[test]
fn failed_wal_or_control_read_at_open_is_an_error_naming_the_file() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (db, acked) = setup(&disk, dir.path(), 20);
        db.checkpoint().unwrap();
        for id in 20..25 {
            commit_one(&db, id).unwrap();
        }
        drop(db);
        for (class, expect) in [(FileClass::Control, "control"), (FileClass::Wal, "wal/")] {
            disk.inject(Fault::next(class, FaultOp::Read, FaultKind::Eio));
            let e = Database::open(dir.path(), options(&disk))
                .unwrap_err()
                .to_string();
            eprintln!("Eio on {class:?} Read at open: {e}");
            assert!(e.contains(expect) && e.contains("injected EIO"), "{e}");
            disk.clear_faults();
        }
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        let mut want = acked.clone();
        want.extend(20..25);
        assert_eq!(ids(&db), want);
        db.close().unwrap();
    });
}
