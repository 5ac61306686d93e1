//! Power losses inside recovery itself, several in a row, on the simulated
//! disk (`wal::sim_disk::SimDisk`). A seeded workload on a pool of 16
//! buffers (eviction writes dirty pages all the time) runs until a crash
//! point: rows of `t` inserted under growing ids, updated, deleted in runs
//! (whole pages emptied), vacuumed and filled again; a second table `e`
//! created, given a column and an index, written, dropped and created again
//! under the same name (each life writes names of its own generation);
//! checkpoints. After the power loss the database is reopened with another
//! crash point armed a seeded number of disk changes ahead, so the power
//! goes during redo, the eviction of replayed pages, the end-of-recovery
//! checkpoint or the syncs after it; or, when the open finishes first,
//! right after it. Then again, up to three times, and at last an open with
//! no crash point, which must hold exactly the acknowledged state (plus
//! possibly the statement in doubt): no committed row lost, no deleted,
//! rolled-back or dropped row back, no row of an earlier life of `e` in
//! the new one, every index clean.
//!
//! `cargo test` runs 12 cases; `RECOVERY_LOSS_CASES` runs more and
//! `RECOVERY_LOSS_SEED` picks the seed. A failure names its case's seed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Rng, small_options, watchdog};
use engine::{Column, ColumnType, Database, Options, Value};
use wal::sim_disk::SimDisk;

fn options(disk: &SimDisk) -> Options {
    small_options()
        .pool_buffers(16)
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .simulated_disk(disk.clone())
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("name", ColumnType::Text),
    ]
}

/// The table `e` as acknowledged.
#[derive(Clone, Debug, PartialEq)]
struct TableE {
    generation: u64,
    extra: bool,
    indexed: bool,
    rows: BTreeSet<i64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct State {
    t: BTreeMap<i64, String>,
    e: Option<TableE>,
}

#[derive(Clone, Debug)]
enum Op {
    Put(i64, String),
    Delete(i64),
    CreateE(u64),
    ExtraE,
    IndexE,
    InsertE(Vec<i64>),
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
            Op::CreateE(g) => {
                state.e = Some(TableE {
                    generation: *g,
                    extra: false,
                    indexed: false,
                    rows: BTreeSet::new(),
                })
            }
            Op::ExtraE => state.e.as_mut().unwrap().extra = true,
            Op::IndexE => state.e.as_mut().unwrap().indexed = true,
            Op::InsertE(ids) => state.e.as_mut().unwrap().rows.extend(ids),
            Op::DropE => state.e = None,
        }
    }
}

fn e_name(generation: u64, id: i64) -> String {
    format!("life {generation} of e, row {id}")
}

fn t_name(rng: &mut Rng, id: i64, step: u64) -> String {
    format!(
        "t {id} step {step} {}",
        "x".repeat(40 + rng.below(200) as usize)
    )
}

/// Runs statements until the power goes; returns the operations in doubt.
fn workload(
    db: &Database,
    rng: &mut Rng,
    state: &mut State,
    next_id: &mut i64,
    generation: &mut u64,
    step: &mut u64,
) -> Option<Vec<Op>> {
    loop {
        *step += 1;
        let what = rng.below(20);
        // Maintenance: nothing acknowledged, nothing in doubt.
        if what == 0 {
            if db.checkpoint().is_err() {
                return None;
            }
            continue;
        }
        if what <= 2 {
            if db.vacuum("t").is_err() {
                return None;
            }
            continue;
        }
        if what <= 4 {
            // The next statement of `e`'s life.
            let op = match &state.e {
                None => {
                    *generation += 1;
                    Op::CreateE(*generation)
                }
                Some(e) if !e.extra && rng.below(2) == 0 => Op::ExtraE,
                Some(e) if !e.indexed && rng.below(2) == 0 => Op::IndexE,
                Some(e) if e.rows.len() < 150 && rng.below(4) != 0 => {
                    let from = e.rows.last().map_or(0, |l| l + 1);
                    Op::InsertE((from..from + 1 + rng.below(40) as i64).collect())
                }
                Some(_) => Op::DropE,
            };
            let done = match &op {
                Op::CreateE(_) => db.create_table("e", columns()).map(drop),
                Op::ExtraE => db
                    .add_column("e", Column::nullable("extra", ColumnType::I64))
                    .map(drop),
                Op::IndexE => db.create_index("e_id", "e", "id", true).map(drop),
                Op::DropE => db.drop_table("e"),
                Op::InsertE(ids) => {
                    let e = state.e.as_ref().unwrap();
                    let (g, extra) = (e.generation, e.extra);
                    db.begin().and_then(|txn| {
                        for id in ids {
                            let mut r = vec![Value::I64(*id), Value::Text(e_name(g, *id))];
                            if extra {
                                r.push(Value::I64(*id));
                            }
                            txn.insert("e", r)?;
                        }
                        txn.commit().map(drop)
                    })
                }
                _ => unreachable!(),
            };
            match done {
                Ok(()) => apply(state, &[op]),
                Err(_) => return Some(vec![op]),
            }
            continue;
        }
        let Ok(txn) = db.begin() else {
            return None;
        };
        let mut ops = Vec::new();
        let mut view = state.clone();
        let result: engine::Result<()> = (|| {
            if what <= 6 && !view.t.is_empty() {
                // A run of rows deleted: whole pages go empty.
                let keys: Vec<i64> = view.t.keys().copied().collect();
                let from = rng.below(keys.len() as u64) as usize;
                for &k in keys.iter().skip(from).take(30 + rng.below(60) as usize) {
                    assert!(txn.delete_by_key("t", "id", &Value::I64(k))?);
                    ops.push(Op::Delete(k));
                    view.t.remove(&k);
                }
            } else if what <= 8 && !view.t.is_empty() {
                for _ in 0..1 + rng.below(5) {
                    let keys: Vec<&i64> = view.t.keys().collect();
                    let k = *keys[rng.below(keys.len() as u64) as usize];
                    let name = t_name(rng, k, *step);
                    let r = vec![Value::I64(k), Value::Text(name.clone())];
                    assert!(txn.update_by_key("t", "id", &Value::I64(k), r)?.is_some());
                    ops.push(Op::Put(k, name.clone()));
                    view.t.insert(k, name);
                }
            } else {
                for _ in 0..1 + rng.below(25) {
                    let k = *next_id;
                    *next_id += 1;
                    let name = t_name(rng, k, *step);
                    txn.insert("t", vec![Value::I64(k), Value::Text(name.clone())])?;
                    ops.push(Op::Put(k, name.clone()));
                    view.t.insert(k, name);
                }
            }
            Ok(())
        })();
        if result.is_err() {
            return None;
        }
        if rng.below(8) == 0 {
            if txn.rollback().is_err() {
                return None;
            }
            continue;
        }
        match txn.commit() {
            Ok(_) => apply(state, &ops),
            Err(_) => return Some(ops),
        }
    }
}

/// The rows of `table` by an owned scan, each found by key through `index`
/// when there is one, and `verify_indexes` clean.
fn rows_of(
    db: &Database,
    table: &str,
    index: Option<&str>,
) -> Result<BTreeMap<i64, String>, String> {
    let r = db.read().map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for item in r.scan(table).map_err(|e| e.to_string())? {
        let (_, row) = item.map_err(|e| e.to_string())?;
        let id = row.i64("id").map_err(|e| e.to_string())?;
        let name = row.text("name").map_err(|e| e.to_string())?.to_string();
        if out.insert(id, name).is_some() {
            return Err(format!("{table}: id {id} twice in one scan"));
        }
    }
    if let Some(ix) = index {
        for (id, name) in &out {
            let got: Vec<String> = r
                .index_lookup(ix, &Value::I64(*id))
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(|(_, row)| row.text("name").unwrap().to_string())
                .collect();
            if got != vec![name.clone()] {
                return Err(format!("{table}: id {id}: scan {name:?}, {ix} {got:?}"));
            }
        }
        let entries = r
            .index_range(ix, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .map_err(|e| e.to_string())?
            .count();
        if entries != out.len() {
            return Err(format!(
                "{table}: {entries} rows through {ix}, {} scanned",
                out.len()
            ));
        }
    }
    r.commit().map_err(|e| e.to_string())?;
    let v = db.verify_indexes(table).map_err(|e| e.to_string())?;
    if !v.is_empty() {
        return Err(format!("{table}: index violations {v:?}"));
    }
    Ok(out)
}

fn contents(db: &Database) -> Result<State, String> {
    let t = rows_of(db, "t", Some("t_id"))?;
    let e = match db.table("e") {
        Err(_) => None,
        Ok(info) => {
            let indexed = db.indexes().iter().any(|i| i.name == "e_id");
            let rows = rows_of(db, "e", indexed.then_some("e_id"))?;
            let generation = rows.values().next().map_or(0, |n| {
                n.strip_prefix("life ")
                    .and_then(|s| s.split(' ').next())
                    .and_then(|g| g.parse().ok())
                    .unwrap_or(u64::MAX)
            });
            for (id, name) in &rows {
                if *name != e_name(generation, *id) {
                    return Err(format!("e: row {id} is {name:?}, not of life {generation}"));
                }
            }
            Some(TableE {
                generation,
                extra: info.columns.len() == 3,
                indexed,
                rows: rows.into_keys().collect(),
            })
        }
    };
    Ok(State { t, e })
}

/// `got` matches `want`, but an empty `e`'s generation cannot be read.
fn same(got: &State, want: &State) -> bool {
    match (&got.e, &want.e) {
        (Some(g), Some(w)) if g.rows.is_empty() && w.rows.is_empty() => {
            got.t == want.t && g.extra == w.extra && g.indexed == w.indexed
        }
        _ => got == want,
    }
}

fn summary(s: &State) -> String {
    format!(
        "t: {} rows ({:?}..{:?}); e: {:?}",
        s.t.len(),
        s.t.keys().next(),
        s.t.keys().last(),
        s.e.as_ref()
            .map(|e| (e.generation, e.extra, e.indexed, e.rows.len()))
    )
}

/// Returns (cases, power losses inside an open, opens that finished
/// before their crash point).
fn run(cases: u64, seed: u64) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new();
    let mut rng = Rng::new(seed);
    let mut state = State::default();
    let (mut next_id, mut generation, mut step) = (0i64, 0u64, 0u64);
    let (mut in_open, mut after_open) = (0, 0);
    let db = Database::open(dir.path(), options(&disk)).unwrap();
    db.create_table("t", columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let mut db = Some(db);
    for case in 0..cases {
        let case_seed = rng.next_u64();
        let mut r = Rng::new(case_seed);
        let live = db.take().unwrap();
        disk.arm_crash_point(50 + r.below(400), case_seed);
        let doubt = workload(
            &live,
            &mut r,
            &mut state,
            &mut next_id,
            &mut generation,
            &mut step,
        );
        assert!(disk.is_powered_off(), "case {case} (seed {case_seed:#x})");
        drop(live);
        disk.restart();
        // Power losses inside the reopen, up to three in a row.
        for attempt in 0..1 + r.below(3) {
            let at = 1 + r.below(if attempt == 0 { 60 } else { 300 });
            disk.arm_crash_point(at, case_seed ^ attempt);
            match Database::open(dir.path(), options(&disk)) {
                Ok(db) => {
                    after_open += 1;
                    if !disk.is_powered_off() {
                        disk.power_loss(case_seed ^ attempt).unwrap();
                    }
                    drop(db);
                }
                Err(e) => {
                    in_open += 1;
                    assert!(
                        disk.is_powered_off(),
                        "case {case} (seed {case_seed:#x}): open failed with the power on: {e}"
                    );
                }
            }
            disk.restart();
        }
        let reopened = Database::open(dir.path(), options(&disk)).unwrap_or_else(|e| {
            panic!("case {case} (seed {case_seed:#x}): open after the losses failed: {e}")
        });
        let got = contents(&reopened)
            .unwrap_or_else(|e| panic!("case {case} (seed {case_seed:#x}): {e}"));
        if !same(&got, &state) {
            let mut with_doubt = state.clone();
            if let Some(ops) = &doubt {
                apply(&mut with_doubt, ops);
            }
            assert!(
                doubt.is_some() && same(&got, &with_doubt),
                "case {case} (seed {case_seed:#x}): got {}, acknowledged {} (in doubt {doubt:?})",
                summary(&got),
                summary(&state)
            );
            state = with_doubt;
        }
        db = Some(reopened);
    }
    db.unwrap().close().unwrap();
    (cases, in_open, after_open)
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn power_losses_inside_recovery_lose_and_resurrect_nothing() {
    let cases = env("RECOVERY_LOSS_CASES", 12);
    let seed = env("RECOVERY_LOSS_SEED", 0xEC0);
    let (cases, in_open, after_open) =
        watchdog(Duration::from_secs(60 + cases), move || run(cases, seed));
    eprintln!("{cases} cases: {in_open} power losses inside an open, {after_open} right after one");
    assert!(in_open > 0, "no power loss met an open");
}
