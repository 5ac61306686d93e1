//! Operation-sequence fuzzing against a model: random sequences of inserts,
//! updates and deletes in transactions that commit or roll back, key
//! lookups, index range scans, table scans, old snapshots read after later
//! commits, checkpoints, vacuums and clean reopens run on a small database
//! (a 16-buffer pool, so nearly every access evicts) and on a
//! `BTreeMap`; after every step the database must agree with the model.
//! proptest shrinks a failing sequence to a short one and saves its seed
//! under `proptest-regressions/`; check that file in with the fix.
//!
//! `cargo test` runs 10 sequences of up to 40 steps; `OPSEQ_CASES=2000`
//! runs more.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Options, Value};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

type Model = BTreeMap<i64, String>;

/// Keys from a small range, so updates, deletes and conflicts find rows.
const KEYS: i64 = 60;

#[derive(Clone, Debug)]
enum Write {
    /// Insert the key, or update it if the transaction sees it.
    Put(i64, usize),
    Delete(i64),
}

#[derive(Clone, Debug)]
enum Step {
    Txn {
        writes: Vec<Write>,
        commit: bool,
    },
    Lookup(i64),
    Range(i64, i64),
    Scan,
    /// A read snapshot taken now must still see this state after a commit.
    OldSnapshot(Vec<Write>),
    Checkpoint,
    Vacuum,
    Reopen,
}

fn write() -> impl Strategy<Value = Write> {
    prop_oneof![
        3 => (0..KEYS, 0usize..600).prop_map(|(k, n)| Write::Put(k, n)),
        1 => (0..KEYS).prop_map(Write::Delete),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (prop::collection::vec(write(), 1..6), prop::bool::weighted(0.8))
            .prop_map(|(writes, commit)| Step::Txn { writes, commit }),
        2 => (0..KEYS).prop_map(Step::Lookup),
        1 => (0..KEYS, 0..KEYS).prop_map(|(a, b)| Step::Range(a.min(b), a.max(b))),
        1 => Just(Step::Scan),
        1 => prop::collection::vec(write(), 1..4).prop_map(Step::OldSnapshot),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::Vacuum),
        1 => Just(Step::Reopen),
    ]
}

fn options() -> Options {
    small_options()
        .pool_buffers(16)
        .checkpointer(false)
        .bgwriter(None)
}

fn name(k: i64, n: usize) -> String {
    format!("{k}:{}", "v".repeat(n))
}

/// Runs `writes` in one transaction against `db` and returns the model as
/// the transaction sees it afterwards.
fn run_writes(
    db: &Database,
    model: &Model,
    writes: &[Write],
    commit: bool,
) -> Result<Model, String> {
    let txn = db.begin().map_err(|e| e.to_string())?;
    let mut view = model.clone();
    for w in writes {
        match *w {
            Write::Put(k, n) => {
                let v = name(k, n);
                if view.contains_key(&k) {
                    let got = txn
                        .update_by_key("t", "id", &Value::I64(k), row(k, &v))
                        .map_err(|e| format!("update {k}: {e}"))?;
                    if got.is_none() {
                        return Err(format!("update {k}: the transaction sees no row"));
                    }
                } else {
                    txn.insert("t", row(k, &v))
                        .map_err(|e| format!("insert {k}: {e}"))?;
                }
                view.insert(k, v);
            }
            Write::Delete(k) => {
                let found = txn
                    .delete_by_key("t", "id", &Value::I64(k))
                    .map_err(|e| format!("delete {k}: {e}"))?;
                if found != view.contains_key(&k) {
                    return Err(format!(
                        "delete {k}: found {found}, the model says otherwise"
                    ));
                }
                view.remove(&k);
            }
        }
    }
    let seen = scan(&txn)?;
    if seen != view {
        return Err(format!("inside the transaction: {seen:?} != {view:?}"));
    }
    if commit {
        txn.commit().map_err(|e| format!("commit: {e}"))?;
        Ok(view)
    } else {
        txn.rollback().map_err(|e| format!("rollback: {e}"))?;
        Ok(model.clone())
    }
}

fn decode(r: &[Value]) -> Result<(i64, String), String> {
    match (&r[0], &r[1]) {
        (Value::I64(k), Value::Bytes(b)) => Ok((*k, String::from_utf8_lossy(b).into_owned())),
        other => Err(format!("unexpected row {other:?}")),
    }
}

fn scan(txn: &engine::Transaction) -> Result<Model, String> {
    let mut out = Model::new();
    for item in txn.scan("t").map_err(|e| e.to_string())? {
        let (_, r) = item.map_err(|e| e.to_string())?;
        let (k, v) = decode(&r)?;
        if out.insert(k, v).is_some() {
            return Err(format!("key {k} twice in one scan"));
        }
    }
    Ok(out)
}

fn check_read(db: &Database, model: &Model, step: &Step) -> Result<(), String> {
    let r = db.read().map_err(|e| e.to_string())?;
    match *step {
        Step::Lookup(k) => {
            let got = r
                .get_by_key("t", "id", &Value::I64(k))
                .map_err(|e| e.to_string())?
                .map(|(_, row)| decode(&row))
                .transpose()?
                .map(|(_, v)| v);
            if got.as_ref() != model.get(&k) {
                return Err(format!("lookup {k}: {got:?}, model {:?}", model.get(&k)));
            }
        }
        Step::Range(a, b) => {
            let mut got = Vec::new();
            let range = r
                .index_range(
                    "t_id",
                    Bound::Included(Value::I64(a)),
                    Bound::Excluded(Value::I64(b)),
                )
                .map_err(|e| e.to_string())?;
            for item in range {
                let (_, row) = item.map_err(|e| e.to_string())?;
                got.push(decode(&row)?);
            }
            let want: Vec<(i64, String)> =
                model.range(a..b).map(|(k, v)| (*k, v.clone())).collect();
            if got != want {
                return Err(format!("range {a}..{b}: {got:?}, model {want:?}"));
            }
        }
        _ => {
            let got = scan(&r)?;
            if &got != model {
                return Err(format!("scan: {got:?}, model {model:?}"));
            }
        }
    }
    r.commit().map_err(|e| e.to_string())?;
    Ok(())
}

fn run(steps: &[Step]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Database::open(dir.path(), options()).map_err(|e| e.to_string())?;
    db.create_table("t", two_columns())
        .map_err(|e| e.to_string())?;
    db.create_index("t_id", "t", "id", true)
        .map_err(|e| e.to_string())?;
    let mut model = Model::new();
    for (i, step) in steps.iter().enumerate() {
        let at = |e: String| format!("step {i} {step:?}: {e}");
        match step {
            Step::Txn { writes, commit } => {
                model = run_writes(&db, &model, writes, *commit).map_err(at)?;
            }
            Step::Lookup(_) | Step::Range(..) | Step::Scan => {
                check_read(&db, &model, step).map_err(at)?;
            }
            Step::OldSnapshot(writes) => {
                let old = db.read().map_err(|e| at(e.to_string()))?;
                let seen_by_old = model.clone();
                model = run_writes(&db, &model, writes, true).map_err(at)?;
                let through_old = scan(&old).map_err(at)?;
                old.commit().map_err(|e| at(e.to_string()))?;
                if through_old != seen_by_old {
                    return Err(at(format!(
                        "the older snapshot sees a later commit: {through_old:?} != {seen_by_old:?}"
                    )));
                }
                check_read(&db, &model, &Step::Scan).map_err(at)?;
            }
            Step::Checkpoint => {
                db.checkpoint().map_err(|e| at(e.to_string()))?;
            }
            Step::Vacuum => {
                db.vacuum("t").map_err(|e| at(e.to_string()))?;
            }
            Step::Reopen => {
                db.close().map_err(|e| at(e.to_string()))?;
                db = Database::open(dir.path(), options()).map_err(|e| at(e.to_string()))?;
            }
        }
        if let Ok(v) = db.verify_indexes("t")
            && !v.is_empty()
        {
            return Err(at(format!("index violations {v:?}")));
        }
    }
    db.close().map_err(|e| e.to_string())
}

#[test]
fn random_operation_sequences_agree_with_a_btreemap() {
    let cases = std::env::var("OPSEQ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    watchdog(Duration::from_secs(120 + u64::from(cases) / 2), move || {
        let mut runner = TestRunner::new(Config {
            cases,
            ..Config::default()
        });
        let result = runner.run(&prop::collection::vec(step(), 1..40), |steps| {
            run(&steps).map_err(proptest::test_runner::TestCaseError::fail)
        });
        if let Err(e) = result {
            panic!("{e}");
        }
    });
}
