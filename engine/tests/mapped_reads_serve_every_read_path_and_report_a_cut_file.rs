//! `Options::mapped_reads`: pages missing from a small pool are copied from
//! a mapping of their file. Lookups, scans and updates from two threads
//! give the answers a `pread` database gives, across a reopen; a table file
//! cut under the open database is an error naming the table, as with
//! `pread`, not a crash or missing rows; and the option refuses the
//! settings it cannot work with.

mod common;

use std::time::Duration;

use bufmgr::IoMode;
use common::{cut_table_file, row, scan_id_names, small_options, two_columns, watchdog};
use engine::{Database, Value};

const ROWS: i64 = 20_000;
const PADDING: &str = "padding padding padding padding";

fn name_of(t: &engine::Transaction, id: i64) -> Option<Vec<u8>> {
    let rows = t.index_lookup("t_id", &Value::I64(id)).unwrap();
    assert!(rows.len() <= 1, "id {id}: {} rows", rows.len());
    rows.first().map(|(_, r)| match &r[1] {
        Value::Bytes(b) => b.clone(),
        other => panic!("id {id}: name is {other:?}"),
    })
}

/// Whether this process has `path` mapped (`/proc/self/maps`).
fn is_mapped(path: &std::path::Path) -> bool {
    let path = std::fs::canonicalize(path).unwrap();
    let path = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|l| l.ends_with(path))
}

#[test]
fn mapped_reads_answer_as_pread_does_through_a_small_pool() {
    watchdog(Duration::from_secs(240), || {
        let mut answers = Vec::new();
        for mapped in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let opts = || small_options().mapped_reads(mapped);
            let db = Database::open(dir.path(), opts()).unwrap();
            db.create_table("t", two_columns()).unwrap();
            db.create_index("t_id", "t", "id", true).unwrap();
            db.bulk_load(
                "t",
                (0..ROWS).map(|i| row(i, &format!("name {i} padding padding"))),
                |_| {},
            )
            .unwrap();
            // Two threads update disjoint halves while reading the other
            // half: every read is a miss or nearly (64 buffers).
            std::thread::scope(|s| {
                for half in 0..2 {
                    let db = &db;
                    s.spawn(move || {
                        for round in 0..3 {
                            let t = db.begin().unwrap();
                            for id in (half..ROWS).step_by(2 * 7) {
                                let new = row(id, &format!("round {round} of {id}"));
                                t.update_by_key("t", "id", &Value::I64(id), new)
                                    .unwrap()
                                    .unwrap();
                            }
                            for id in ((1 - half)..ROWS).step_by(2 * 5) {
                                assert!(name_of(&t, id).is_some(), "id {id}");
                            }
                            t.commit().unwrap();
                        }
                    });
                }
            });
            db.close().unwrap();
            let db = Database::open(dir.path(), opts()).unwrap();
            let t = db.begin().unwrap();
            let looked_up: Vec<Option<Vec<u8>>> = (0..ROWS).map(|id| name_of(&t, id)).collect();
            let mut scanned = scan_id_names(&t, "t");
            scanned.sort();
            assert_eq!(scanned.len(), ROWS as usize, "mapped {mapped}");
            for (id, name) in &scanned {
                assert_eq!(
                    Some(name),
                    looked_up[*id as usize].as_ref(),
                    "mapped {mapped}: id {id}"
                );
            }
            assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
            let s = db.pool().stats().totals();
            let misses = s.accesses - s.hits;
            assert!(misses > 10 * 64, "mapped {mapped}: only {misses} misses");
            // The misses went through a mapping of the table's file exactly
            // when mapped reads are on.
            let rf = bufmgr::RelFork::main(db.table("t").unwrap().rel);
            let path = db.pool().storage().path(rf);
            assert_eq!(is_mapped(&path), mapped, "{}", path.display());
            drop(t);
            db.close().unwrap();
            answers.push(looked_up);
        }
        assert_eq!(answers[0], answers[1], "mapped reads answered otherwise");
        assert!(
            answers[1]
                .iter()
                .any(|n| n.as_deref() == Some(b"round 2 of 0".as_slice())),
            "the updates are not there"
        );
    });
}

#[test]
fn a_table_file_cut_under_mapped_reads_is_an_error_naming_the_table() {
    watchdog(Duration::from_secs(120), || {
        // Cut inside a block, and 40 bytes short of a block boundary, into
        // the last row of the page: a mapping shows the missing bytes as
        // zeros, with no fault, which must not read as the block. With
        // checksums off only the file's length tells; with them on, the
        // zeroed tail fails the page's checksum (the storage asks no
        // length then).
        let inside = |len: u64| len / 2 + 100;
        let short = |len: u64| len / 2 / 8192 * 8192 - 40;
        let cuts: [(bool, &dyn Fn(u64) -> u64); 4] = [
            (true, &inside),
            (false, &inside),
            (true, &short),
            (false, &short),
        ];
        for (checksums, cut) in cuts {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::open(
                dir.path(),
                small_options().mapped_reads(true).checksums(checksums),
            )
            .unwrap();
            db.create_table("t", two_columns()).unwrap();
            db.create_index("t_id", "t", "id", true).unwrap();
            db.bulk_load("t", (0..ROWS).map(|i| row(i, PADDING)), |_| {})
                .unwrap();
            db.checkpoint().unwrap();
            // Every key read once: the table's pages are mapped and faulted in.
            let t = db.begin().unwrap();
            for id in 0..ROWS {
                assert!(name_of(&t, id).is_some());
            }
            drop(t);
            cut_table_file(&db, "t", cut);
            let t = db.begin().unwrap();
            let (mut found, mut failed) = (0, 0);
            for id in 0..ROWS {
                match t.index_lookup("t_id", &Value::I64(id)) {
                    Ok(rows) => {
                        assert_eq!(rows.len(), 1, "id {id}: a row went missing");
                        assert_eq!(
                            rows[0].1[1],
                            Value::Bytes(PADDING.as_bytes().to_vec()),
                            "checksums {checksums}: id {id} read otherwise"
                        );
                        found += 1;
                    }
                    Err(e) => {
                        let e = e.to_string();
                        assert!(
                            e.contains("\"t\"") && e.contains("block"),
                            "checksums {checksums}: id {id}: {e}"
                        );
                        failed += 1;
                    }
                }
            }
            assert!(found > 0 && failed > 0, "found {found}, failed {failed}");
        }
    });
}

#[test]
fn mapped_reads_refuse_direct_io_and_io_uring() {
    let dir = tempfile::tempdir().unwrap();
    for (opts, says) in [
        (
            small_options().mapped_reads(true).direct_io(true),
            "direct_io",
        ),
        (
            small_options().mapped_reads(true).io(IoMode::IoUring),
            "io_uring",
        ),
    ] {
        let e = Database::open(dir.path(), opts)
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mapped_reads") && e.contains(says), "{e}");
    }
    let opts = small_options().set("mapped_reads", "true").unwrap();
    assert!(opts.mapped_reads);
    let db = Database::open(dir.path(), opts.io(IoMode::Auto)).unwrap();
    assert_eq!(db.pool().storage().name(), "sync");
}
