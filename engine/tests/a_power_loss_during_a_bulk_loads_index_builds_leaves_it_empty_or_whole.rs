//! A power loss at each of many points of a bulk load's index builds (after
//! its last row went in, before its commit) and of `create_index` over the
//! loaded rows: after recovery the table is empty or whole, every row is
//! found through every index, and the indexes verify; no page is corrupt.

mod common;

use std::time::Duration;

use common::{assert_empty_or_whole, id_k_name_columns, id_k_name_row, small_options, watchdog};
use engine::{Database, Options, Row};
use wal::sim_disk::SimDisk;

const ROWS: i64 = 4_000;

fn row(i: i64) -> Row {
    id_k_name_row(i, ROWS, 60)
}

fn options(disk: &SimDisk, buffers: usize) -> Options {
    small_options()
        .pool_buffers(buffers)
        .checkpointer(false)
        .bgwriter(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .bulk_load_progress_every(ROWS as u64)
        .simulated_disk(disk.clone())
}

#[test]
fn a_power_loss_during_a_bulk_loads_index_builds_leaves_it_empty_or_whole() {
    watchdog(Duration::from_secs(240), || {
        let mut whole = 0;
        for buffers in [16, 64] {
            for after in [1u64, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233] {
                let case = format!("{buffers} buffers, power loss at change {after}");
                let dir = tempfile::tempdir().unwrap();
                let disk = SimDisk::new();
                let db = Database::open(dir.path(), options(&disk, buffers)).unwrap();
                db.create_table("t", id_k_name_columns()).unwrap();
                db.create_index("t_id", "t", "id", true).unwrap();
                db.create_index("t_k", "t", "k", false).unwrap();
                db.create_index("t_name", "t", "name", false).unwrap();
                db.checkpoint().unwrap();
                let result = db.bulk_load("t", (0..ROWS).map(row), |p| {
                    if p.rows == ROWS as u64 && !p.done {
                        disk.arm_crash_point(after, after);
                    }
                });
                if !disk.is_powered_off() {
                    disk.power_loss(after).unwrap();
                }
                drop(db);
                disk.restart();
                let db = Database::open(dir.path(), options(&disk, buffers))
                    .unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
                let n = assert_empty_or_whole(&db, &case, ROWS, &["t_k", "t_name"]);
                if result.is_ok() {
                    assert_eq!(n, ROWS as usize, "{case}: the load returned Ok");
                }
                whole += usize::from(n > 0);
                db.close().unwrap();
            }
        }
        assert!(whole > 0, "no case got to its commit");
    });
}

#[test]
fn a_power_loss_during_create_index_over_loaded_rows_leaves_it_empty_or_whole() {
    watchdog(Duration::from_secs(240), || {
        for after in [1u64, 2, 3, 5, 8, 13, 21, 34, 55, 89] {
            let case = format!("power loss at change {after}");
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new();
            let db = Database::open(dir.path(), options(&disk, 16)).unwrap();
            db.create_table("t", id_k_name_columns()).unwrap();
            db.create_index("t_id", "t", "id", true).unwrap();
            db.bulk_load("t", (0..ROWS).map(row), |_| {}).unwrap();
            db.checkpoint().unwrap();
            disk.arm_crash_point(after, after);
            let made = db.create_index("t_k", "t", "k", false);
            if !disk.is_powered_off() {
                disk.power_loss(after).unwrap();
            }
            drop(db);
            disk.restart();
            let db = Database::open(dir.path(), options(&disk, 16))
                .unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
            let has = db.index_handle("t_k").is_ok();
            if made.is_ok() {
                assert!(has, "{case}: the index was reported made");
            }
            let n = assert_empty_or_whole(&db, &case, ROWS, if has { &["t_k"][..] } else { &[] });
            assert_eq!(n, ROWS as usize, "{case}");
            db.close().unwrap();
        }
    });
}
