//! `Options::mapped_reads` under a SIGKILL: a child process commits rows,
//! deletes every other batch of them and vacuums, drops and recreates a
//! second table (its file unlinked and made again), and looks older rows
//! up through a 16-buffer pool with two relation files open at most
//! (descriptors and their mappings closed and remade all the time), until
//! it is killed.
//! Reopened with mapped reads, every committed row that was never to be
//! deleted is there, the index agrees with the heap, and every lookup and
//! the scan answer as a reopen with `pread` does.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use common::{row, scan_id_names, small_options, two_columns, watchdog};
use engine::{Database, Value};

const CHILD_DIR: &str = "ENGINE_TEST_MAPPED_KILL_CHILD_DIR";
/// Rows are committed in batches of this many ids.
const BATCH: i64 = 40;

/// Whether the child deletes `id` once its batch is committed: every other
/// batch.
fn doomed(id: i64) -> bool {
    (id / BATCH) % 2 == 1
}

fn options(mapped: bool) -> engine::Options {
    small_options()
        .pool_buffers(16)
        .mapped_reads(mapped)
        .max_open_files(2)
}

/// A row's name: long enough that a batch fills five pages, and the table
/// soon outgrows the pool.
fn name(id: i64) -> String {
    format!("row {id} {}", "x".repeat(1000))
}

/// Every row by id, from the scan and from a lookup of each id up to `max`.
type Answers = (BTreeMap<i64, Vec<u8>>, Vec<Option<Vec<u8>>>);

fn answers(db: &Database, max: i64) -> Answers {
    let t = db.begin().unwrap();
    let scanned: BTreeMap<i64, Vec<u8>> = scan_id_names(&t, "t").into_iter().collect();
    // Looked up in a scrambled order, so that most lookups miss the pool.
    let mut order: Vec<i64> = (0..=max).collect();
    order.sort_by_key(|id| id.wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64));
    let mut looked_up = vec![None; order.len()];
    for id in order {
        let rows = t.index_lookup("t_id", &Value::I64(id)).unwrap();
        assert!(rows.len() <= 1, "id {id}: {} rows", rows.len());
        looked_up[id as usize] = rows.first().map(|(_, r)| match &r[1] {
            Value::Bytes(b) => b.clone(),
            other => panic!("id {id}: name is {other:?}"),
        });
    }
    (scanned, looked_up)
}

#[test]
fn a_killed_workload_with_mapped_reads_reopens_whole_and_answers_as_pread() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..2 {
            let committed = common::committed_before_sigkill(
                "mapped_kill_child",
                CHILD_DIR,
                dir.path(),
                500 + round * 300,
                Duration::from_secs(60),
            );
            let max = *committed.last().unwrap() + BATCH;
            let mut both = Vec::new();
            for mapped in [true, false] {
                let db = Database::open(dir.path(), options(mapped)).unwrap();
                let (scanned, looked_up) = answers(&db, max);
                for &id in committed.iter().filter(|&&id| !doomed(id)) {
                    assert_eq!(
                        scanned.get(&id).map(Vec::as_slice),
                        Some(name(id).as_bytes()),
                        "round {round}, mapped {mapped}: committed id {id}"
                    );
                }
                for (&id, n) in &scanned {
                    assert_eq!(
                        looked_up[id as usize].as_ref(),
                        Some(n),
                        "round {round}, mapped {mapped}: id {id}, scan and index differ"
                    );
                }
                assert_eq!(db.verify_indexes("t").unwrap(), vec![], "round {round}");
                let s = db.pool().stats().totals();
                let misses = s.accesses - s.hits;
                assert!(misses > 100, "round {round}: only {misses} misses");
                db.close().unwrap();
                both.push((scanned, looked_up));
            }
            assert!(
                both[0] == both[1],
                "round {round}: mapped reads and pread answered otherwise"
            );
        }
    });
}

/// The killed child: commits one row per transaction and prints its id;
/// after each doomed batch, deletes it and vacuums; after every batch,
/// drops and recreates `other`; looks up older rows between commits.
#[test]
#[ignore = "run as a child process by a_killed_workload_with_mapped_reads_reopens_whole_and_answers_as_pread"]
fn mapped_kill_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let db = Database::open(&dir, options(true)).unwrap();
    if db.table("t").is_err() {
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        // A second relation, so that two files open at most means closes.
        db.create_table("other", two_columns()).unwrap();
    }
    // Start at a fresh batch past everything committed before.
    let t = db.begin().unwrap();
    let last = t
        .scan("t")
        .unwrap()
        .map(|r| r.unwrap().1[0].as_i64().unwrap())
        .max();
    drop(t);
    let base = last.map_or(0, |m| (m / BATCH + 2) * BATCH);
    let mut out = std::io::stdout();
    let deadline = Instant::now() + Duration::from_secs(50);
    for id in base.. {
        if Instant::now() > deadline {
            break;
        }
        let t = db.begin().unwrap();
        t.insert("t", row(id, &name(id))).unwrap();
        t.insert("other", row(id, "other")).unwrap();
        t.commit().unwrap();
        writeln!(out, "COMMITTED {id}").unwrap();
        out.flush().unwrap();
        let t = db.begin().unwrap();
        for old in (base..id).rev().step_by(7).take(5) {
            let rows = t.index_lookup("t_id", &Value::I64(old)).unwrap();
            assert!(doomed(old) || rows.len() == 1, "id {old} is missing");
        }
        drop(t);
        if id % BATCH == BATCH - 1 {
            if doomed(id) {
                let t = db.begin().unwrap();
                for gone in id + 1 - BATCH..=id {
                    t.delete_by_key("t", "id", &Value::I64(gone)).unwrap();
                }
                t.commit().unwrap();
                db.vacuum("t").unwrap();
            }
            db.drop_table("other").unwrap();
            db.create_table("other", two_columns()).unwrap();
        }
        if id % 100 == 50 {
            db.checkpoint().unwrap();
        }
    }
    std::mem::forget(db);
}
