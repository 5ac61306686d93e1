//! A data directory written before B-tree pages had a compact item layout
//! keeps working: it opens (replaying the WAL its writer left, since it
//! never shut down cleanly), reads, takes inserts that split its index's
//! pages, deletes and vacuum, survives a power loss and verifies clean. Its
//! index stays in the headed layout (4-byte item headers) throughout; an
//! index created in it afterwards is compact.
//!
//! `fixtures/format2_headed_index` was written by the engine as it was
//! before the compact layout (data directory format 2, B-tree meta page
//! version 1), with 64 KiB WAL segments: a table `t (id i64, name text)`
//! of 300 rows, a unique index `t_id` built over them, a checkpoint, then
//! 500 more rows committed in 10 transactions, and no close (the process
//! ended holding the database). The ids are `(i * 7919) % 1000` for `i` in
//! `0..800` and each name is `"row {id}"`.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::path::Path;

use btree::page::{Layout, PageId, TreePage};
use bufmgr::RelFork;
use engine::{Database, Options, Value};
use wal::sim_disk::SimDisk;

fn fixture_ids() -> BTreeSet<i64> {
    (0..800).map(|i| (i * 7919) % 1000).collect()
}

fn options(disk: &SimDisk) -> Options {
    Options::new()
        .pool_buffers(64)
        .wal_segment_size(64 << 10)
        .checkpoint_max_wal_bytes(64 << 20)
        .partitions(engine::Partitions::Count(1))
        .autovacuum(false)
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .simulated_disk(disk.clone())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The item layout of every tree page of index `name` (each page parsed
/// and checked), and how many there are.
fn layouts(db: &Database, name: &str) -> (BTreeSet<Layout>, u32) {
    let ix = db.indexes().into_iter().find(|i| i.name == name).unwrap();
    let rf = RelFork::main(ix.rel);
    let n = db.pool().nblocks(rf).unwrap();
    let mut seen = BTreeSet::new();
    for block in 1..n {
        let page = db
            .pool()
            .read_buffer(rf, block, None)
            .unwrap()
            .lock_shared();
        let tp = TreePage::parse(&page, PageId { rel: ix.rel, block }).unwrap();
        seen.insert(tp.layout());
    }
    (seen, n - 1)
}

/// Every id through the index, in order, each row's name checked; and a
/// few point reads.
fn read_all(db: &Database) -> Vec<i64> {
    let t = db.read().unwrap();
    let ids: Vec<i64> = t
        .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| {
            let (_, row) = r.unwrap();
            let id = row[0].as_i64().unwrap();
            assert_eq!(row[1].as_text(), Some(format!("row {id}").as_str()));
            id
        })
        .collect();
    for &id in ids.iter().step_by(97) {
        let (_, row) = t
            .get_by_key("t", "id", &Value::I64(id))
            .unwrap()
            .unwrap_or_else(|| panic!("id {id} by key"));
        assert_eq!(row[0].as_i64(), Some(id));
    }
    ids
}

fn verify_clean(db: &Database) {
    let v = db.verify_indexes("t").unwrap();
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn a_data_directory_with_headed_index_pages_opens_reads_writes_and_recovers() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2_headed_index");
    copy_dir(&fixture, &dir);
    let disk = SimDisk::new();

    // Open: the writer never closed, so the WAL since its checkpoint is
    // replayed onto the headed pages.
    let db = Database::open(&dir, options(&disk)).unwrap();
    let rec = db.recovery_stats();
    assert!(rec.records > 0 && rec.commits >= 10, "{rec:?}");
    let mut want = fixture_ids();
    assert_eq!(read_all(&db), want.iter().copied().collect::<Vec<_>>());
    verify_clean(&db);
    let (seen, pages_before) = layouts(&db, "t_id");
    assert_eq!(seen, BTreeSet::from([Layout::Headed]));
    assert!(
        pages_before >= 3,
        "a root and at least two leaves: {pages_before}"
    );

    // Inserts that split leaves (ascending and scattered ids), deletes,
    // and vacuum.
    for chunk in (1000..4000i64).collect::<Vec<_>>().chunks(250) {
        db.transaction(|t| {
            for &i in chunk {
                let id = if i % 2 == 0 { i } else { 10_000 - i };
                t.insert("t", vec![Value::I64(id), Value::Text(format!("row {id}"))])?;
            }
            Ok(())
        })
        .unwrap();
        for &i in chunk {
            want.insert(if i % 2 == 0 { i } else { 10_000 - i });
        }
    }
    let gone: Vec<i64> = want.iter().copied().step_by(3).collect();
    db.transaction(|t| {
        for &id in &gone {
            assert!(t.delete_by_key("t", "id", &Value::I64(id))?);
        }
        Ok(())
    })
    .unwrap();
    for id in &gone {
        want.remove(id);
    }
    let report = db.vacuum("t").unwrap();
    let removed: u64 = report.indexes.iter().map(|(_, s)| s.removed).sum();
    assert_eq!(removed, gone.len() as u64, "{report:?}");
    assert_eq!(read_all(&db), want.iter().copied().collect::<Vec<_>>());
    verify_clean(&db);
    let (seen, pages_after) = layouts(&db, "t_id");
    assert_eq!(
        seen,
        BTreeSet::from([Layout::Headed]),
        "splits keep the layout"
    );
    assert!(
        pages_after >= pages_before + 5,
        "{pages_before} -> {pages_after}"
    );

    // A new index in the old directory is compact.
    db.create_index("t_name", "t", "name", true).unwrap();
    assert_eq!(layouts(&db, "t_name").0, BTreeSet::from([Layout::Compact]));
    verify_clean(&db);

    // More inserts, then the power goes: pages not written are lost, and
    // redo rebuilds both indexes, each in its layout, from the WAL.
    db.transaction(|t| {
        for id in 20_000..21_000i64 {
            t.insert("t", vec![Value::I64(id), Value::Text(format!("row {id}"))])?;
        }
        Ok(())
    })
    .unwrap();
    want.extend(20_000..21_000);
    disk.power_loss(7).unwrap();
    drop(db);
    disk.restart();
    let db = Database::open(&dir, options(&disk)).unwrap();
    assert!(db.recovery_stats().records > 0);
    assert_eq!(read_all(&db), want.iter().copied().collect::<Vec<_>>());
    verify_clean(&db);
    assert_eq!(layouts(&db, "t_id").0, BTreeSet::from([Layout::Headed]));
    assert_eq!(layouts(&db, "t_name").0, BTreeSet::from([Layout::Compact]));
    let t = db.read().unwrap();
    let (_, row) = t
        .get_by_key("t", "name", &Value::Text("row 20500".into()))
        .unwrap()
        .unwrap();
    assert_eq!(row[0].as_i64(), Some(20_500));
    drop(t);

    // And a clean close and open.
    db.close().unwrap();
    let db = Database::open(&dir, options(&disk)).unwrap();
    assert_eq!(read_all(&db).len(), want.len());
    verify_clean(&db);
    db.close().unwrap();
}
