//! The power-loss model (`wal::sim_disk::SimDisk`) under the real engine:
//! a seeded workload of inserts, updates, deletes, rollbacks, checkpoints
//! and vacuums, bulk loads into the table `t` (which has rows), DDL and bulk
//! loads on a second table `e` (created, indexed, loaded while empty, loaded
//! again, dropped), and bursts of xids that cross commit-log page
//! boundaries, runs on one data directory; the disk has a crash point armed
//! at a seeded number of disk changes ahead, where the power goes and every
//! un-synced write is kept, dropped or torn (seeded). The database then
//! reopens on what survived, and:
//! - every acknowledged (synchronously committed) transaction or statement
//!   is there, in full; the one that met the power loss is there in full or
//!   not at all; nothing else (no rolled-back or unfinished transaction, no
//!   row of a bulk load cut off, also after later commits);
//! - every row is found by key, `verify_indexes` is clean for both tables;
//! - the next cycle runs on the recovered directory.
//!
//! With one thread doing all I/O (checkpointer, bgwriter and the WAL's
//! background flusher off) a case is
//! replayed from its seed. `cargo test` runs 40 crash points;
//! `POWERLOSS_CASES=10000` runs more and `POWERLOSS_SEED` picks the seed.
//! A failure names the case's seed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Rng, row, small_options, two_columns, watchdog};
use engine::{CommitMode, Database, Options, Value};
use wal::sim_disk::SimDisk;

/// id -> name.
type Model = BTreeMap<i64, String>;

/// The table `e` as acknowledged: whether its unique index exists, its ids.
#[derive(Clone, Debug, Default, PartialEq)]
struct TableE {
    indexed: bool,
    rows: BTreeSet<i64>,
}

/// Both tables as acknowledged (`e`: `None` while it does not exist).
#[derive(Clone, Debug, Default, PartialEq)]
struct State {
    t: Model,
    e: Option<TableE>,
}

/// Keys come from a small range, so updates and deletes find rows.
const KEYS: u64 = 400;
/// A bulk load into `t` (which has rows) writes ids `LOAD_BASE..+LOAD_ROWS`;
/// once they are there, a transaction deletes them again.
const LOAD_BASE: i64 = 10_000;
const LOAD_ROWS: i64 = 150;
/// A bulk load into `e` while it is empty: up to this many rows.
const E_LOAD: u64 = 1_500;
/// Xids of one burst at most (transactions of the manager that write
/// nothing): a commit-log page holds 16,352.
const XID_BURST: u64 = 6_000;
/// Transactions per cycle at most (the crash point usually comes first).
const TXNS_PER_CYCLE: usize = 60;
/// Crash points fall within this many disk changes (about two per commit).
const CRASH_WITHIN: u64 = 150;

fn options(disk: &SimDisk) -> Options {
    small_options()
        .pool_buffers(16)
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .simulated_disk(disk.clone())
}

/// One effect of a transaction or statement, as applied to the state.
#[derive(Clone, Debug)]
enum Op {
    Put(i64, String),
    Delete(i64),
    CreateE,
    IndexE,
    LoadE(i64, i64),
    DropE,
}

fn apply(state: &mut State, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(k, v) => {
                state.t.insert(*k, v.clone());
            }
            Op::Delete(k) => {
                state.t.remove(k);
            }
            Op::CreateE => state.e = Some(TableE::default()),
            Op::IndexE => state.e.as_mut().expect("e exists").indexed = true,
            Op::LoadE(start, count) => state
                .e
                .as_mut()
                .expect("e exists")
                .rows
                .extend(*start..start + count),
            Op::DropE => state.e = None,
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

fn load_name(id: i64) -> String {
    format!("load {id}")
}

/// The next statement of table `e`'s life, run; `Err(op)` if it failed
/// (the power went: in doubt).
fn e_statement(db: &Database, rng: &mut Rng, state: &State) -> Result<Op, Op> {
    let op = match &state.e {
        None => Op::CreateE,
        Some(e) if !e.indexed => Op::IndexE,
        Some(e) if e.rows.is_empty() => Op::LoadE(0, 200 + rng.below(E_LOAD) as i64),
        Some(e) if rng.below(2) == 0 => {
            let next = e.rows.last().map_or(0, |m| m + 1);
            Op::LoadE(next, 20 + rng.below(100) as i64)
        }
        Some(_) => Op::DropE,
    };
    let done = match &op {
        Op::CreateE => db.create_table("e", two_columns()).map(drop),
        Op::IndexE => db.create_index("e_id", "e", "id", true).map(drop),
        Op::LoadE(start, count) => db
            .bulk_load(
                "e",
                (*start..start + count).map(|id| row(id, &load_name(id))),
                |_| {},
            )
            .map(drop),
        _ => db.drop_table("e"),
    };
    done.map(|()| op.clone()).map_err(|_| op)
}

/// Acknowledged: DDL statements, bulk loads into an empty table, bulk
/// loads into a table with rows.
type Kinds = [u64; 3];

fn count(kinds: &mut Kinds, state: &State, op: &Op) {
    match op {
        Op::CreateE | Op::IndexE | Op::DropE => kinds[0] += 1,
        Op::LoadE(..) if state.e.as_ref().is_some_and(|e| e.rows.is_empty()) => kinds[1] += 1,
        _ => kinds[2] += 1,
    }
}

/// Runs transactions until the power goes. Commits that return `Ok` go
/// into `state`.
fn workload(
    db: &Database,
    rng: &mut Rng,
    state: &mut State,
    cycle: u64,
    acked: &mut u64,
    kinds: &mut Kinds,
) -> Ended {
    for t in 0..TXNS_PER_CYCLE {
        let what = rng.below(24);
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
        if what == 2 {
            match e_statement(db, rng, state) {
                Ok(op) => {
                    count(kinds, state, &op);
                    apply(state, &[op]);
                    *acked += 1;
                    continue;
                }
                Err(op) => return Ended::PowerLost(Some(vec![op])),
            }
        }
        if what == 3 {
            let tm = db.transaction_manager();
            for i in 0..rng.below(XID_BURST) {
                let Ok(x) = tm.begin() else {
                    return Ended::PowerLost(None);
                };
                // Asynchronous: a commit of nothing need not wait.
                let done = if i % 5 == 0 {
                    x.abort()
                } else {
                    x.commit_with(CommitMode::Asynchronous).map(drop)
                };
                if done.is_err() {
                    return Ended::PowerLost(None);
                }
            }
            continue;
        }
        if what == 4 && !state.t.contains_key(&LOAD_BASE) {
            let ops: Vec<Op> = (LOAD_BASE..LOAD_BASE + LOAD_ROWS)
                .map(|id| Op::Put(id, load_name(id)))
                .collect();
            let rows = (LOAD_BASE..LOAD_BASE + LOAD_ROWS).map(|id| row(id, &load_name(id)));
            match db.bulk_load("t", rows, |_| {}) {
                Ok(_) => {
                    apply(state, &ops);
                    *acked += 1;
                    kinds[2] += 1;
                    continue;
                }
                Err(_) => return Ended::PowerLost(Some(ops)),
            }
        }
        let Ok(txn) = db.begin() else {
            return Ended::PowerLost(None);
        };
        let mut view = state.clone();
        let mut ops = Vec::new();
        if what == 4 {
            // The loaded rows go again, in one transaction.
            for id in LOAD_BASE..LOAD_BASE + LOAD_ROWS {
                match txn.delete_by_key("t", "id", &Value::I64(id)) {
                    Ok(found) => assert!(found, "loaded row {id} not found by key"),
                    Err(_) => return Ended::PowerLost(None),
                }
                ops.push(Op::Delete(id));
            }
        }
        for _ in 0..=rng.below(3) {
            let k = rng.below(KEYS) as i64;
            let name = format!("c{cycle}t{t}k{k}-{}", "x".repeat(rng.below(200) as usize));
            let result = match (view.t.contains_key(&k), rng.below(3)) {
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
                apply(state, &ops);
                *acked += 1;
            }
            Err(_) => return Ended::PowerLost(Some(ops)),
        }
    }
    Ended::Finished
}

/// Rows of `table` by scan (each id once), each found by key with the same
/// row, and `verify_indexes` clean.
fn table_rows(db: &Database, table: &str) -> Result<Model, String> {
    let r = db.read().map_err(|e| e.to_string())?;
    let mut out = Model::new();
    for item in r.scan(table).map_err(|e| e.to_string())? {
        let (_, row) = item.map_err(|e| e.to_string())?;
        let (Value::I64(id), Value::Bytes(name)) = (&row[0], &row[1]) else {
            return Err(format!("{table}: unexpected row {row:?}"));
        };
        if out
            .insert(*id, String::from_utf8_lossy(name).into_owned())
            .is_some()
        {
            return Err(format!("{table}: id {id} twice in one scan"));
        }
    }
    let indexed = db.indexes().iter().any(|i| i.name == format!("{table}_id"));
    if indexed {
        for (id, name) in &out {
            let got = r
                .get_by_key(table, "id", &Value::I64(*id))
                .map_err(|e| e.to_string())?;
            match got {
                Some((_, row)) if row[1] == Value::Bytes(name.clone().into_bytes()) => {}
                other => {
                    return Err(format!(
                        "{table}: id {id}: scan says {name:?}, lookup {other:?}"
                    ));
                }
            }
        }
    }
    r.commit().map_err(|e| e.to_string())?;
    let violations = db.verify_indexes(table).map_err(|e| e.to_string())?;
    if !violations.is_empty() {
        return Err(format!("{table}: index violations: {violations:?}"));
    }
    Ok(out)
}

fn contents(db: &Database) -> Result<State, String> {
    let t = table_rows(db, "t")?;
    let e = match db.table("e") {
        Err(_) => None,
        Ok(_) => {
            let rows = table_rows(db, "e")?;
            if let Some((id, name)) = rows.iter().find(|(id, name)| **name != load_name(**id)) {
                return Err(format!("e: row {id} named {name:?}"));
            }
            Some(TableE {
                indexed: db.indexes().iter().any(|i| i.name == "e_id"),
                rows: rows.into_keys().collect(),
            })
        }
    };
    Ok(State { t, e })
}

fn describe(got: &State, want: &State) -> String {
    let e = |s: &State| {
        s.e.as_ref()
            .map(|e| format!("index {}, {} rows", e.indexed, e.rows.len()))
            .unwrap_or_else(|| "absent".into())
    };
    format!(
        "t: {}; e: {} (expected {})",
        engine::soak::describe_difference(&got.t, &want.t),
        e(got),
        e(want)
    )
}

/// Runs `cases` crash points from `seed`; returns (cases, acknowledged
/// commits checked, rows at the end, kept / dropped / torn changes, next
/// xid at the end).
fn run(cases: u64, seed: u64) -> (u64, u64, u64, [u64; 3], u64, Kinds) {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new();
    let mut state = State::default();
    let mut rng = Rng::new(seed);
    let mut fates = [0u64; 3];
    let mut acked = 0u64;
    let mut kinds = Kinds::default();
    let db = Database::open(dir.path(), options(&disk)).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let mut db = Some(db);
    let mut next_xid = 0;
    for case in 0..cases {
        let case_seed = rng.next_u64();
        let mut case_rng = Rng::new(case_seed);
        let live = db.take().expect("a database is open");
        disk.arm_crash_point(1 + case_rng.below(CRASH_WITHIN), case_seed);
        let doubt = match workload(
            &live,
            &mut case_rng,
            &mut state,
            case,
            &mut acked,
            &mut kinds,
        ) {
            Ended::PowerLost(doubt) => doubt,
            Ended::Finished => {
                disk.power_loss(case_seed).unwrap();
                None
            }
        };
        assert!(
            disk.is_powered_off(),
            "case {case} (seed {case_seed:#x}): the workload stopped without a power loss"
        );
        let loss = disk.last_power_loss().expect("a power loss happened");
        fates[0] += loss.kept;
        fates[1] += loss.dropped;
        fates[2] += loss.torn;
        drop(live);
        disk.restart();
        let reopened = Database::open(dir.path(), options(&disk)).unwrap_or_else(|e| {
            panic!("case {case} (seed {case_seed:#x}): reopen after {loss:?} failed: {e}")
        });
        next_xid = reopened.transaction_manager().next_xid();
        let got = contents(&reopened)
            .unwrap_or_else(|e| panic!("case {case} (seed {case_seed:#x}), {loss:?}: {e}"));
        if got != state {
            let mut with_doubt = state.clone();
            if let Some(ops) = &doubt {
                apply(&mut with_doubt, ops);
            }
            assert!(
                doubt.is_some() && got == with_doubt,
                "case {case} (seed {case_seed:#x}), {loss:?}: {} (in doubt: {doubt:?})",
                describe(&got, &state)
            );
            state = with_doubt;
        }
        db = Some(reopened);
    }
    if let Some(db) = db {
        db.close().unwrap();
    }
    (cases, acked, state.t.len() as u64, fates, next_xid, kinds)
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
    let (cases, acked, rows, [kept, dropped, torn], next_xid, [ddl, empty_loads, loads]) =
        watchdog(limit, move || run(cases, seed));
    eprintln!(
        "power loss: {cases} crash points (seed {seed}), {acked} acknowledged commits and statements, \
         {rows} rows at the end, 0 lost, 0 resurrected; {ddl} DDL statements, {empty_loads} bulk \
         loads into an empty table, {loads} into one with rows; next xid {next_xid} ({} commit-log pages); \
         un-synced changes kept {kept}, dropped {dropped}, torn {torn}",
        next_xid / engine::XIDS_PER_PAGE + 1
    );
    assert!(dropped + torn > 0, "the crash points lost something");
    assert!(
        ddl > 0 && empty_loads > 0 && loads > 0,
        "DDL and both kinds of bulk load ran"
    );
    assert!(
        next_xid > engine::XIDS_PER_PAGE,
        "the runs stayed on the first commit-log page"
    );
}
