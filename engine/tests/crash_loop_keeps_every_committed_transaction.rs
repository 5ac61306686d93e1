//! The crash loop: a child process (this test binary re-run on its ignored
//! `crash_loop_child` test) runs a mixed workload on one data directory —
//! inserts, updates and deletes by key, index lookups checked against its
//! own model, a bulk load now and then, explicit checkpoints, vacuums, and
//! one transaction kept open that is never committed — and prints every
//! transaction's effects (`TXN n ops`) just before `commit` and `OK n` once
//! `commit` returned. The parent kills it with SIGKILL at a random moment
//! 100-700 ms after it is ready, reopens the database (crash recovery) and
//! checks:
//! - the table holds exactly the effects of every `OK` transaction applied
//!   in order, plus possibly the one transaction in doubt (printed `TXN`,
//!   no `OK`: killed inside `commit`);
//! - nothing uncommitted is visible (the open transaction's rows, rolled
//!   back transactions' rows);
//! - every row is found by key, the unique index agrees with a table scan,
//!   `verify_indexes` is clean for every table (entries naming dead line
//!   pointers, left by a vacuum killed between its heap pass 1 and its
//!   index pass, are not violations), and again after a vacuum;
//! - after a clean close, every block of every relation file passes its
//!   checksum through a fresh pool with checksums on.
//!
//! Then the next child starts on the same directory. `cargo test` runs 5
//! cycles; `CRASH_LOOP_CYCLES=200` runs the long version (and
//! `CRASH_LOOP_SEED` picks the seed).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::ops::Bound;
use std::process::{Command, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use common::{Rng, every_page_checksum_valid, small_options, two_columns, watchdog};
use engine::{Database, Value};

const CHILD_DIR: &str = "ENGINE_TEST_CRASH_LOOP_DIR";
const CHILD_SEED: &str = "ENGINE_TEST_CRASH_LOOP_SEED";
/// Ids at or above this are only ever inserted by the never-committed
/// transaction.
const UNCOMMITTED: i64 = 1 << 40;

/// id -> name (None = NULL).
type Model = BTreeMap<i64, Option<String>>;

/// One effect of a transaction, as printed by the child.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Insert(i64, Option<String>),
    Update(i64, Option<String>),
    Delete(i64),
    /// Bulk load of ids `start..start + count`, all named `name`.
    Bulk(i64, i64, String),
}

fn name_token(n: &Option<String>) -> &str {
    n.as_deref().unwrap_or("~")
}

fn parse_name(s: &str) -> Option<String> {
    (s != "~").then(|| s.to_string())
}

impl Op {
    fn token(&self) -> String {
        match self {
            Op::Insert(id, n) => format!("I:{id}:{}", name_token(n)),
            Op::Update(id, n) => format!("U:{id}:{}", name_token(n)),
            Op::Delete(id) => format!("D:{id}"),
            Op::Bulk(start, count, n) => format!("B:{start}:{count}:{n}"),
        }
    }

    fn parse(tok: &str) -> Op {
        let f: Vec<&str> = tok.split(':').collect();
        let num = |i: usize| f[i].parse::<i64>().unwrap();
        match f[0] {
            "I" => Op::Insert(num(1), parse_name(f[2])),
            "U" => Op::Update(num(1), parse_name(f[2])),
            "D" => Op::Delete(num(1)),
            "B" => Op::Bulk(num(1), num(2), f[3].to_string()),
            _ => panic!("bad op {tok:?}"),
        }
    }

    fn apply(&self, m: &mut Model) {
        match self {
            Op::Insert(id, n) | Op::Update(id, n) => {
                m.insert(*id, n.clone());
            }
            Op::Delete(id) => {
                m.remove(id);
            }
            Op::Bulk(start, count, n) => {
                for id in *start..start + count {
                    m.insert(id, Some(n.clone()));
                }
            }
        }
    }
}

fn row_of(id: i64, name: &Option<String>) -> engine::Row {
    vec![
        Value::I64(id),
        name.as_ref()
            .map_or(Value::Null, |n| Value::Bytes(n.as_bytes().to_vec())),
    ]
}

/// The table as a model, read by a table scan.
fn scan_model(db: &Database) -> Model {
    let t = db.begin().unwrap();
    let m = t
        .scan("t")
        .unwrap()
        .map(|r| {
            let (_, row) = r.unwrap();
            let name = match &row[1] {
                Value::Null => None,
                Value::Bytes(b) => Some(String::from_utf8(b.clone()).unwrap()),
                v => panic!("unexpected name {v:?}"),
            };
            (row[0].as_i64().unwrap(), name)
        })
        .collect();
    drop(t);
    m
}

fn describe_difference(got: &Model, want: &Model) -> String {
    let missing: Vec<_> = want
        .keys()
        .filter(|k| !got.contains_key(k))
        .take(5)
        .collect();
    let extra: Vec<_> = got
        .keys()
        .filter(|k| !want.contains_key(k))
        .take(5)
        .collect();
    let changed: Vec<_> = want
        .iter()
        .filter(|(k, v)| got.get(k).is_some_and(|g| g != *v))
        .take(5)
        .collect();
    format!(
        "{} rows, expected {}; missing {missing:?}, extra {extra:?}, changed {changed:?}",
        got.len(),
        want.len()
    )
}

/// What the parent learnt from one child's output.
#[derive(Debug, Default)]
struct Report {
    committed: u64,
    in_doubt: Option<Vec<Op>>,
    ready: bool,
}

fn read_child_output(lines: &[String], model: &mut Model) -> Report {
    let mut r = Report::default();
    let mut pending: Option<(u64, Vec<Op>)> = None;
    for line in lines {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("READY") => r.ready = true,
            Some("TXN") => {
                assert!(pending.is_none(), "two transactions in doubt: {line}");
                let n: u64 = w.next().unwrap().parse().unwrap();
                pending = Some((n, w.map(Op::parse).collect()));
            }
            Some("OK") => {
                let n: u64 = w.next().unwrap().parse().unwrap();
                let (p, ops) = pending.take().expect("OK without TXN");
                assert_eq!(p, n);
                for op in &ops {
                    op.apply(model);
                }
                r.committed += 1;
            }
            _ => {} // the test harness's own lines
        }
    }
    r.in_doubt = pending.map(|(_, ops)| ops);
    r
}

fn cycles() -> u64 {
    std::env::var("CRASH_LOOP_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

#[test]
fn crash_loop_keeps_every_committed_transaction() {
    let cycles = cycles();
    let limit = Duration::from_secs(60 + 20 * cycles);
    watchdog(limit, move || {
        let seed: u64 = std::env::var("CRASH_LOOP_SEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0x5eed_c0de);
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().unwrap();
        let mut model = Model::new();
        let (mut total_committed, mut in_doubt_committed) = (0u64, 0u64);
        let started = Instant::now();
        for cycle in 0..cycles {
            let child_seed = rng.next();
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "crash_loop_child", "--ignored", "--nocapture"])
                .env(CHILD_DIR, dir.path())
                .env(CHILD_SEED, child_seed.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            let (tx, rx) = channel::<String>();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            // Wait for READY (the child's own open may run recovery).
            let mut lines = Vec::new();
            let ready_by = Instant::now() + Duration::from_secs(60);
            loop {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(l) => {
                        let ready = l == "READY";
                        lines.push(l);
                        if ready {
                            break;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        assert!(
                            child.try_wait().unwrap().is_none(),
                            "cycle {cycle}: child exited before READY"
                        );
                        assert!(Instant::now() < ready_by, "child never got ready");
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        panic!("cycle {cycle}: child closed stdout before READY")
                    }
                }
            }
            let run = Duration::from_millis(100 + rng.below(601));
            std::thread::sleep(run);
            assert!(
                child.try_wait().unwrap().is_none(),
                "cycle {cycle}: the child died on its own (see its stderr)"
            );
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            reader.join().unwrap();
            lines.extend(rx.try_iter());
            let report = read_child_output(&lines, &mut model);
            assert!(report.ready);

            let opened = Instant::now();
            let db = Database::open(dir.path(), small_options()).unwrap();
            let open_time = opened.elapsed();
            let rs = db.recovery_stats();
            let got = scan_model(&db);
            assert!(
                got.keys().all(|&id| id < UNCOMMITTED),
                "cycle {cycle}: a row of the never-committed transaction is visible"
            );
            if got != model {
                let mut with_doubt = model.clone();
                let ops = report.in_doubt.as_ref().unwrap_or_else(|| {
                    panic!(
                        "cycle {cycle}: {} (no transaction in doubt)",
                        describe_difference(&got, &model)
                    )
                });
                for op in ops {
                    op.apply(&mut with_doubt);
                }
                assert!(
                    got == with_doubt,
                    "cycle {cycle}: {} (nor with the transaction in doubt: {})",
                    describe_difference(&got, &model),
                    describe_difference(&got, &with_doubt)
                );
                model = with_doubt;
                in_doubt_committed += 1;
            }
            // Through the indexes: every row by key, the unique index in
            // key order equals the scan, names by the non-unique index.
            let t = db.begin().unwrap();
            for (&id, name) in model.iter().step_by(7) {
                let (_, row) = t
                    .get_by_key("t", "id", &Value::I64(id))
                    .unwrap()
                    .unwrap_or_else(|| panic!("cycle {cycle}: id {id} not found by key"));
                assert_eq!(row, row_of(id, name));
            }
            let via_index: Vec<i64> = t
                .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .map(|r| r.unwrap().1[0].as_i64().unwrap())
                .collect();
            assert_eq!(via_index, model.keys().copied().collect::<Vec<_>>());
            let n3 = model
                .values()
                .filter(|n| n.as_deref() == Some("n3"))
                .count();
            assert_eq!(
                t.index_lookup("t_name", &Value::from("n3")).unwrap().len(),
                n3
            );
            drop(t);
            for table in db.tables() {
                assert_eq!(
                    db.verify_indexes(&table.name).unwrap(),
                    vec![],
                    "cycle {cycle}: table {}",
                    table.name
                );
            }
            // A vacuum now (the child may have died between a vacuum's heap
            // pass 1 and its index pass: those entries go now), then the
            // indexes verify clean again and still hold every row.
            db.vacuum("t").unwrap();
            assert_eq!(
                db.verify_indexes("t").unwrap(),
                vec![],
                "cycle {cycle}: after vacuum"
            );
            let t = db.begin().unwrap();
            assert_eq!(
                t.index_range("t_id", Bound::Unbounded, Bound::Unbounded)
                    .unwrap()
                    .count(),
                model.len()
            );
            drop(t);
            db.close().unwrap();
            let blocks = every_page_checksum_valid(dir.path())
                .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
            total_committed += report.committed;
            eprintln!(
                "cycle {cycle}: killed after {run:?}, {} committed ({} rows), recovery replayed {} records in {open_time:?}, {blocks} blocks checked",
                report.committed,
                model.len(),
                rs.commits + rs.aborts + rs.other,
            );
        }
        eprintln!(
            "crash loop: {cycles} cycles passed, {total_committed} reported commits ({in_doubt_committed} more in doubt found committed), {} rows, seed {seed}, {:?}",
            model.len(),
            started.elapsed()
        );
    });
}

/// The crashing child (see the module docs).
#[test]
#[ignore = "run as a child process by crash_loop_keeps_every_committed_transaction"]
fn crash_loop_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let mut rng = Rng::new(seed);
    let db = Database::open(&dir, small_options()).unwrap();
    // DDL auto-commits one statement at a time; a crash may fall between.
    if db.table("t").is_err() {
        db.create_table("t", two_columns()).unwrap();
    }
    let indexes: Vec<String> = db.indexes().into_iter().map(|i| i.name).collect();
    if !indexes.iter().any(|n| n == "t_id") {
        db.create_index("t_id", "t", "id", true).unwrap();
    }
    if !indexes.iter().any(|n| n == "t_name") {
        db.create_index("t_name", "t", "name", false).unwrap();
    }
    let mut model = scan_model(&db);
    let mut next_id = model.keys().next_back().map_or(0, |m| m + 1);
    let open = db.begin().unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let names = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];
    let pick_name = |rng: &mut Rng| -> Option<String> {
        (rng.below(10) != 0).then(|| names[rng.below(names.len() as u64) as usize].to_string())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut uncommitted = UNCOMMITTED;
    for n in 0u64.. {
        if Instant::now() > deadline {
            break;
        }
        if n % 10 == 0 {
            open.insert("t", row_of(uncommitted, &Some("never".into())))
                .unwrap();
            uncommitted += 1;
        }
        let action = rng.below(100);
        if action < 3 {
            db.checkpoint().unwrap();
            continue;
        }
        if action < 5 {
            db.vacuum("t").unwrap();
            continue;
        }
        if action < 7 && model.len() < 4000 {
            let count = 100 + rng.below(200) as i64;
            let op = Op::Bulk(next_id, count, "bulk".into());
            writeln!(out, "TXN {n} {}", op.token()).unwrap();
            out.flush().unwrap();
            let start = next_id;
            db.bulk_load(
                "t",
                (start..start + count).map(|id| row_of(id, &Some("bulk".into()))),
                |_| {},
            )
            .unwrap();
            writeln!(out, "OK {n}").unwrap();
            out.flush().unwrap();
            op.apply(&mut model);
            next_id += count;
            continue;
        }
        // A normal transaction: lookups first (checked against the model),
        // then 1-6 writes; one in seven rolls back.
        let t = db.begin().unwrap();
        if !model.is_empty() {
            let k = *model
                .keys()
                .nth(rng.below(model.len() as u64) as usize)
                .unwrap();
            let got = t.get_by_key("t", "id", &Value::I64(k)).unwrap();
            assert_eq!(got.map(|(_, r)| r), Some(row_of(k, &model[&k])));
            let name = names[rng.below(names.len() as u64) as usize];
            let want = model
                .values()
                .filter(|v| v.as_deref() == Some(name))
                .count();
            assert_eq!(
                t.index_lookup("t_name", &Value::from(name)).unwrap().len(),
                want
            );
        }
        let mut ops = Vec::new();
        let mut local = model.clone();
        for _ in 0..1 + rng.below(6) {
            // Around 4000 rows the mix turns to deletes, so that a long
            // loop keeps the table (and the models) bounded.
            let kind = match rng.below(10) {
                k if local.len() > 4000 && k < 3 => 9 - k,
                k => k,
            };
            let existing = (!local.is_empty()).then(|| {
                *local
                    .keys()
                    .nth(rng.below(local.len() as u64) as usize)
                    .unwrap()
            });
            let op = match (kind, existing) {
                (0..=4, _) | (_, None) => {
                    let id = next_id;
                    next_id += 1;
                    let name = pick_name(&mut rng);
                    t.insert("t", row_of(id, &name)).unwrap();
                    Op::Insert(id, name)
                }
                (5..=7, Some(id)) => {
                    let name = pick_name(&mut rng);
                    t.update_by_key("t", "id", &Value::I64(id), row_of(id, &name))
                        .unwrap()
                        .unwrap();
                    Op::Update(id, name)
                }
                (_, Some(id)) => {
                    assert!(t.delete_by_key("t", "id", &Value::I64(id)).unwrap());
                    Op::Delete(id)
                }
            };
            op.apply(&mut local);
            ops.push(op);
        }
        if rng.below(7) == 0 {
            t.rollback().unwrap();
            continue;
        }
        let tokens: Vec<String> = ops.iter().map(Op::token).collect();
        writeln!(out, "TXN {n} {}", tokens.join(" ")).unwrap();
        out.flush().unwrap();
        t.commit().unwrap();
        writeln!(out, "OK {n}").unwrap();
        out.flush().unwrap();
        model = local;
    }
    std::mem::forget(open);
    std::mem::forget(db);
}
