//! Non-unique indexes with thousands of rows per key through the engine:
//! in a data directory written before deduplication (the fixture
//! `format2_headed_index`), a new non-unique index is format 3 with posting
//! lists, and keeps every row through deletes, vacuum, re-inserts that reuse
//! the vacuumed row ids under the same key, a power loss and a reopen; and
//! `index_deduplication` switched off then on across reopens changes only
//! the indexes created afterwards, each of which keeps answering in full.
//! Every read returns each row once, in key then row-id order.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use btree::page::{Meta, PageId, TreePage};
use bufmgr::RelFork;
use engine::{Database, Options, RowId, Value};
use wal::sim_disk::SimDisk;

fn options(disk: &SimDisk) -> Options {
    Options::new()
        .pool_buffers(16)
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

/// The index's meta page, and how many posting lists its leaves hold.
fn meta_and_lists(db: &Database, name: &str) -> (Meta, usize) {
    let ix = db.indexes().into_iter().find(|i| i.name == name).unwrap();
    let rf = RelFork::main(ix.rel);
    let meta = {
        let page = db.pool().read_buffer(rf, 0, None).unwrap().lock_shared();
        Meta::read(
            &page,
            PageId {
                rel: ix.rel,
                block: 0,
            },
        )
        .unwrap()
    };
    let mut lists = 0;
    for block in 1..db.pool().nblocks(rf).unwrap() {
        let page = db
            .pool()
            .read_buffer(rf, block, None)
            .unwrap()
            .lock_shared();
        let tp = TreePage::parse(&page, PageId { rel: ix.rel, block }).unwrap();
        if tp.is_leaf() {
            for j in 0..tp.data_len() {
                lists += usize::from(tp.data(j).unwrap().is_posting());
            }
        }
    }
    (meta, lists)
}

/// (name, row id) -> id of every row, through the index on `name`: each
/// row once, in (name, row id) order, and each lookup of a name in full.
fn check_by_name(db: &Database, index: &str, want: &BTreeMap<(String, RowId), i64>) {
    let t = db.read().unwrap();
    let got: Vec<((String, RowId), i64)> = t
        .index_range(index, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| {
            let (rid, row) = r.unwrap();
            (
                (row[1].as_text().unwrap().to_string(), rid),
                row[0].as_i64().unwrap(),
            )
        })
        .collect();
    let expect: Vec<((String, RowId), i64)> = want.iter().map(|(k, v)| (k.clone(), *v)).collect();
    assert_eq!(got.len(), expect.len(), "{index}: rows in the full range");
    assert!(
        got == expect,
        "{index}: the full range differs from the model"
    );
    let mut names: Vec<&String> = want.keys().map(|(n, _)| n).collect();
    names.dedup();
    for name in names.into_iter().take(5) {
        let got: Vec<RowId> = t
            .index_lookup(index, &Value::Text(name.clone()))
            .unwrap()
            .into_iter()
            .map(|(rid, _)| rid)
            .collect();
        let expect: Vec<RowId> = want
            .range((name.clone(), RowId::new(0, 0))..)
            .take_while(|((n, _), _)| n == name)
            .map(|((_, r), _)| *r)
            .collect();
        assert_eq!(got, expect, "{index}: lookup of {name:?}");
    }
}

fn verify_clean(db: &Database) {
    let v = db.verify_indexes("t").unwrap();
    assert!(v.is_empty(), "{v:?}");
}

fn insert_dups(
    db: &Database,
    ids: std::ops::Range<i64>,
    want: &mut BTreeMap<(String, RowId), i64>,
) {
    let mut added = Vec::new();
    db.transaction(|t| {
        added.clear();
        for id in ids.clone() {
            let name = format!("dup {}", id % 3);
            let rid = t.insert("t", vec![Value::I64(id), Value::Text(name.clone())])?;
            added.push(((name, rid), id));
        }
        Ok(())
    })
    .unwrap();
    want.extend(added);
}

#[test]
fn a_new_index_in_an_old_directory_deduplicates_and_keeps_every_row_through_reuse_and_power_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2_headed_index");
    copy_dir(&fixture, &dir);
    let disk = SimDisk::new();
    let db = Database::open(&dir, options(&disk)).unwrap();
    let mut want: BTreeMap<(String, RowId), i64> = BTreeMap::new();
    {
        let t = db.read().unwrap();
        for r in t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .unwrap()
        {
            let (rid, row) = r.unwrap();
            want.insert(
                (row[1].as_text().unwrap().to_string(), rid),
                row[0].as_i64().unwrap(),
            );
        }
    }
    insert_dups(&db, 30_000..33_000, &mut want);
    db.create_index("t_name", "t", "name", false).unwrap();
    let (meta, lists) = meta_and_lists(&db, "t_name");
    assert!(meta.dedup && !meta.unique, "{meta:?}");
    assert!(lists > 0, "the build made no posting list");
    let (old, _) = meta_and_lists(&db, "t_id");
    assert!(!old.dedup, "the old index must keep its format: {old:?}");
    check_by_name(&db, "t_name", &want);
    verify_clean(&db);

    // Delete two rows of every three duplicates, vacuum, and insert again:
    // the heap hands the freed row ids out again, under the same names.
    let gone: Vec<(String, RowId)> = want
        .keys()
        .filter(|(n, r)| n.starts_with("dup") && r.block % 3 != 0)
        .cloned()
        .collect();
    db.transaction(|t| {
        for (_, rid) in &gone {
            t.delete("t", *rid)?;
        }
        Ok(())
    })
    .unwrap();
    for k in &gone {
        want.remove(k);
    }
    db.vacuum("t").unwrap();
    check_by_name(&db, "t_name", &want);
    verify_clean(&db);
    insert_dups(&db, 40_000..42_000, &mut want);
    let reused = want.keys().filter(|k| gone.contains(k)).count();
    assert!(
        reused > 100,
        "only {reused} row ids were reused under their old name"
    );
    check_by_name(&db, "t_name", &want);
    verify_clean(&db);

    // Power loss: pages not written are lost; redo rebuilds them.
    insert_dups(&db, 50_000..51_000, &mut want);
    disk.power_loss(11).unwrap();
    drop(db);
    disk.restart();
    let db = Database::open(&dir, options(&disk)).unwrap();
    check_by_name(&db, "t_name", &want);
    verify_clean(&db);
    assert!(meta_and_lists(&db, "t_name").1 > 0);
    db.close().unwrap();
}

#[test]
fn deduplication_switched_off_then_on_changes_only_the_indexes_created_afterwards() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let disk = SimDisk::new();
    let mut want: BTreeMap<(String, RowId), i64> = BTreeMap::new();
    let db = Database::open(&dir, options(&disk).index_deduplication(false)).unwrap();
    db.create_table(
        "t",
        vec![
            engine::Column::new("id", engine::ColumnType::I64),
            engine::Column::new("name", engine::ColumnType::Text),
        ],
    )
    .unwrap();
    db.create_index("off", "t", "name", false).unwrap();
    insert_dups(&db, 0..3_000, &mut want);
    let (meta, lists) = meta_and_lists(&db, "off");
    assert!(!meta.dedup && lists == 0, "{meta:?} {lists}");
    db.close().unwrap();

    let db = Database::open(&dir, options(&disk).index_deduplication(true)).unwrap();
    insert_dups(&db, 3_000..6_000, &mut want);
    assert!(!meta_and_lists(&db, "off").0.dedup);
    assert_eq!(
        meta_and_lists(&db, "off").1,
        0,
        "an old index made posting lists"
    );
    db.create_index("on", "t", "name", false).unwrap();
    insert_dups(&db, 6_000..9_000, &mut want);
    let (meta, lists) = meta_and_lists(&db, "on");
    assert!(meta.dedup && lists > 0, "{meta:?} {lists}");
    check_by_name(&db, "off", &want);
    check_by_name(&db, "on", &want);
    verify_clean(&db);
    db.close().unwrap();

    let db = Database::open(&dir, options(&disk).index_deduplication(false)).unwrap();
    insert_dups(&db, 9_000..12_000, &mut want);
    assert!(
        meta_and_lists(&db, "on").0.dedup,
        "the option must not change an index"
    );
    check_by_name(&db, "off", &want);
    check_by_name(&db, "on", &want);
    verify_clean(&db);
    db.close().unwrap();
}
