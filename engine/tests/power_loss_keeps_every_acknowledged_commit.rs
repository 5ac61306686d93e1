//! The power-loss model (`wal::sim_disk::SimDisk`) under the real engine:
//! a seeded workload of inserts, updates, deletes, rollbacks, checkpoints
//! and vacuums runs on one data directory; the disk has a crash point armed
//! at a seeded number of disk changes ahead, where the power goes and every
//! un-synced write is kept, dropped or torn (seeded). The database then
//! reopens on what survived, and:
//! - every acknowledged (synchronously committed) transaction is there, in
//!   full; the one whose commit met the power loss is there in full or not
//!   at all; nothing else (no rolled-back or unfinished transaction);
//! - every row is found by key, `verify_indexes` is clean;
//! - the next cycle runs on the recovered directory.
//!
//! With one thread doing all I/O (checkpointer and bgwriter off) a case is
//! replayed from its seed. `cargo test` runs 40 crash points;
//! `POWERLOSS_CASES=10000` runs more and `POWERLOSS_SEED` picks the seed.
//! A failure names the case's seed.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Rng, row, small_options, two_columns, watchdog};
use engine::{Database, Options, Value};
use wal::sim_disk::SimDisk;

/// id -> name.
type Model = BTreeMap<i64, String>;

/// Keys come from a small range, so updates and deletes find rows.
const KEYS: u64 = 400;
/// Transactions per cycle at most (the crash point usually comes first).
const TXNS_PER_CYCLE: usize = 60;
/// Crash points fall within this many disk changes (about two per commit).
const CRASH_WITHIN: u64 = 150;

fn options(disk: &SimDisk) -> Options {
    small_options()
        .pool_buffers(16)
        .checkpointer(false)
        .bgwriter(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .simulated_disk(disk.clone())
}

/// One write of a transaction, as applied to the model.
#[derive(Clone, Debug)]
enum Op {
    Put(i64, String),
    Delete(i64),
}

fn apply(model: &mut Model, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(k, v) => {
                model.insert(*k, v.clone());
            }
            Op::Delete(k) => {
                model.remove(k);
            }
        }
    }
}

/// How a cycle's workload ended.
enum Ended {
    /// The power went; the transaction in doubt (its commit failed) if any.
    PowerLost(Option<Vec<Op>>),
    /// The workload finished before the crash point.
    Finished,
}

/// Runs transactions until the power goes. Commits that return `Ok` go
/// into `model`.
fn workload(db: &Database, rng: &mut Rng, model: &mut Model, cycle: u64, acked: &mut u64) -> Ended {
    for t in 0..TXNS_PER_CYCLE {
        let what = rng.below(20);
        if what == 0 {
            if db.checkpoint().is_err() {
                return Ended::PowerLost(None);
            }
            continue;
        }
        if what == 1 {
            if db.vacuum("t").is_err() {
                return Ended::PowerLost(None);
            }
            continue;
        }
        let Ok(txn) = db.begin() else {
            return Ended::PowerLost(None);
        };
        let mut view = model.clone();
        let mut ops = Vec::new();
        for _ in 0..=rng.below(3) {
            let k = rng.below(KEYS) as i64;
            let name = format!("c{cycle}t{t}k{k}-{}", "x".repeat(rng.below(200) as usize));
            let result = match (view.contains_key(&k), rng.below(3)) {
                (false, _) => txn.insert("t", row(k, &name)).map(|_| Op::Put(k, name)),
                (true, 0) => txn.delete_by_key("t", "id", &Value::I64(k)).map(|found| {
                    assert!(found, "row {k} of the model not found by key");
                    Op::Delete(k)
                }),
                (true, _) => txn
                    .update_by_key("t", "id", &Value::I64(k), row(k, &name))
                    .map(|found| {
                        assert!(found.is_some(), "row {k} of the model not found by key");
                        Op::Put(k, name)
                    }),
            };
            match result {
                Ok(op) => {
                    apply(&mut view, std::slice::from_ref(&op));
                    ops.push(op);
                }
                // The power went under a write: never committed.
                Err(_) => return Ended::PowerLost(None),
            }
        }
        if rng.below(8) == 0 {
            if txn.rollback().is_err() {
                return Ended::PowerLost(None);
            }
            continue;
        }
        match txn.commit() {
            Ok(_) => {
                apply(model, &ops);
                *acked += 1;
            }
            Err(_) => return Ended::PowerLost(Some(ops)),
        }
    }
    Ended::Finished
}

fn table_contents(db: &Database) -> Result<Model, String> {
    let r = db.read().map_err(|e| e.to_string())?;
    let mut out = Model::new();
    for item in r.scan("t").map_err(|e| e.to_string())? {
        let (_, row) = item.map_err(|e| e.to_string())?;
        let (Value::I64(id), Value::Bytes(name)) = (&row[0], &row[1]) else {
            return Err(format!("unexpected row {row:?}"));
        };
        if out
            .insert(*id, String::from_utf8_lossy(name).into_owned())
            .is_some()
        {
            return Err(format!("id {id} twice in one scan"));
        }
    }
    for (id, name) in &out {
        let got = r
            .get_by_key("t", "id", &Value::I64(*id))
            .map_err(|e| e.to_string())?;
        match got {
            Some((_, row)) if row[1] == Value::Bytes(name.clone().into_bytes()) => {}
            other => return Err(format!("id {id}: scan says {name:?}, lookup {other:?}")),
        }
    }
    r.commit().map_err(|e| e.to_string())?;
    let violations = db.verify_indexes("t").map_err(|e| e.to_string())?;
    if !violations.is_empty() {
        return Err(format!("index violations: {violations:?}"));
    }
    Ok(out)
}

/// Runs `cases` crash points from `seed`; returns (cases, acknowledged
/// commits checked, rows at the end, kept / dropped / torn changes).
fn run(cases: u64, seed: u64) -> (u64, u64, u64, [u64; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new();
    let mut model = Model::new();
    let mut rng = Rng::new(seed);
    let mut fates = [0u64; 3];
    let mut acked = 0u64;
    let db = Database::open(dir.path(), options(&disk)).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let mut db = Some(db);
    for case in 0..cases {
        let case_seed = rng.next_u64();
        let mut case_rng = Rng::new(case_seed);
        let live = db.take().expect("a database is open");
        disk.arm_crash_point(1 + case_rng.below(CRASH_WITHIN), case_seed);
        let doubt = match workload(&live, &mut case_rng, &mut model, case, &mut acked) {
            Ended::PowerLost(doubt) => doubt,
            Ended::Finished => {
                disk.power_loss(case_seed).unwrap();
                None
            }
        };
        assert!(disk.is_powered_off(), "case {case} (seed {case_seed:#x})");
        let loss = disk.last_power_loss().expect("a power loss happened");
        fates[0] += loss.kept;
        fates[1] += loss.dropped;
        fates[2] += loss.torn;
        drop(live);
        disk.restart();
        let reopened = Database::open(dir.path(), options(&disk)).unwrap_or_else(|e| {
            panic!("case {case} (seed {case_seed:#x}): reopen after {loss:?} failed: {e}")
        });
        let got = table_contents(&reopened)
            .unwrap_or_else(|e| panic!("case {case} (seed {case_seed:#x}), {loss:?}: {e}"));
        if got != model {
            let mut with_doubt = model.clone();
            if let Some(ops) = &doubt {
                apply(&mut with_doubt, ops);
            }
            assert!(
                doubt.is_some() && got == with_doubt,
                "case {case} (seed {case_seed:#x}), {loss:?}: {}",
                engine::soak::describe_difference(&got, &model)
            );
            model = with_doubt;
        }
        db = Some(reopened);
    }
    if let Some(db) = db {
        db.close().unwrap();
    }
    (cases, acked, model.len() as u64, fates)
}

#[test]
fn every_acknowledged_commit_survives_seeded_power_losses() {
    let cases = std::env::var("POWERLOSS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed = std::env::var("POWERLOSS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED);
    let limit = Duration::from_secs(60 + cases / 2);
    let (cases, acked, rows, [kept, dropped, torn]) = watchdog(limit, move || run(cases, seed));
    eprintln!(
        "power loss: {cases} crash points (seed {seed}), {acked} acknowledged commits, \
         {rows} rows at the end, 0 lost; un-synced changes kept {kept}, dropped {dropped}, torn {torn}"
    );
    assert!(dropped + torn > 0, "the crash points lost something");
}
