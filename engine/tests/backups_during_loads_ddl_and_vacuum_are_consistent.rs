//! Backups taken while other threads bulk-load (into empty tables and into
//! tables with rows), create and drop tables and indexes, delete and
//! vacuum, and take checkpoints: every copy opens, each load is in it
//! whole or not at all, every table in it has the rows its last committed
//! state had, and its indexes verify clean. Under a time limit.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::Database;

const LOAD: i64 = 20_000;

fn count(db: &Database, table: &str) -> usize {
    db.read_transaction(|t| Ok(t.scan(table)?.count())).unwrap()
}

fn backups_while_everything_runs(opts: engine::Options) {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let db = Database::open(src.path(), opts.clone()).unwrap();
    db.create_table("base", two_columns()).unwrap();
    db.create_index("base_id", "base", "id", true).unwrap();
    db.bulk_load("base", (0..LOAD).map(|i| row(i, "b")), |_| {})
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // Loads into fresh (empty) tables with an index, one after another.
    {
        let (db, stop) = (db.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("load{k}");
                db.create_table(&name, two_columns()).unwrap();
                db.create_index(&format!("{name}_id"), &name, "id", true)
                    .unwrap();
                db.bulk_load(&name, (0..LOAD).map(|i| row(i, "l")), |_| {})
                    .unwrap();
                if k % 2 == 1 {
                    db.drop_table(&name).unwrap();
                }
                k += 1;
            }
        }));
    }
    // Loads into a table with rows, deletes and vacuums of it.
    {
        let (db, stop) = (db.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                let from = LOAD + k * 1_000;
                db.bulk_load("base", (from..from + 1_000).map(|i| row(i, "more")), |_| {})
                    .unwrap();
                db.transaction(|t| {
                    for i in from..from + 500 {
                        t.delete_by_key("base", "id", &engine::Value::I64(i))?;
                    }
                    Ok(())
                })
                .unwrap();
                db.vacuum("base").unwrap();
                db.checkpoint().unwrap();
                k += 1;
            }
        }));
    }
    for b in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        let copy = out.path().join(format!("copy{b}"));
        db.backup_to(&copy, |_| {}).unwrap();
        let c = Database::open(&copy, opts.clone()).unwrap();
        let n = count(&c, "base");
        assert!(
            n >= LOAD as usize && (n - LOAD as usize).is_multiple_of(500),
            "copy {b}: base has {n} rows: a load or delete is half in it"
        );
        assert!(c.verify_indexes("base").unwrap().is_empty());
        for t in c.tables() {
            if t.name.starts_with("load") {
                let n = count(&c, &t.name);
                assert!(
                    n == 0 || n == LOAD as usize,
                    "copy {b}: {} has {n} rows",
                    t.name
                );
                assert!(c.verify_indexes(&t.name).unwrap().is_empty());
            }
        }
        drop(c);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn backups_during_loads_ddl_vacuum_and_checkpoints_hold_whole_transactions() {
    watchdog(Duration::from_secs(400), || {
        backups_while_everything_runs(small_options().autovacuum(true));
    });
}

#[test]
fn backups_through_a_32_buffer_pool_without_full_page_writes_hold_whole_transactions() {
    watchdog(Duration::from_secs(400), || {
        backups_while_everything_runs(
            small_options()
                .pool_buffers(32)
                .full_page_writes(false)
                .checksums(true),
        );
    });
}
