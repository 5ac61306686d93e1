//! The bank keyed by a composite primary key `(branch, id)` (tuple keys in
//! the B-tree), with a non-unique index on `(branch, balance)`: writers
//! move money between accounts of any branches, through
//! `get_by_primary_key` and an update, or by deleting an account and
//! inserting it again under its key; some transactions write and roll
//! back. Readers audit one snapshot by a scan, by a prefix range of each
//! branch in the primary key (both ways), by a lookup of every key and by
//! ranges of the balance index per branch: every account once, the same
//! balances, the constant total. A vacuum runs meanwhile, on 16 buffers.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{Rng, watchdog};
use engine::{Column, ColumnType, Database, KeyRange, Options, TableOptions, Transaction, Value};

const BRANCHES: i64 = 4;
const PER_BRANCH: i64 = 30;
const START: i64 = 500;
const TOTAL: i64 = BRANCHES * PER_BRANCH * START;

type Balances = BTreeMap<(i64, i64), i64>;

fn account(branch: i64, id: i64, balance: i64, pad: usize) -> Vec<Value> {
    vec![
        Value::I64(branch),
        Value::I64(id),
        Value::I64(balance),
        Value::Text("p".repeat(pad)),
    ]
}

fn move_money(t: &Transaction, rng: &mut Rng) -> engine::Result<()> {
    let key = |rng: &mut Rng| {
        (
            rng.below(BRANCHES as u64) as i64,
            rng.below(PER_BRANCH as u64) as i64,
        )
    };
    let from = key(rng);
    let mut to = key(rng);
    while to == from {
        to = key(rng);
    }
    let amount = 1 + rng.below(200) as i64;
    let reinsert = rng.below(4) == 0;
    for (k, delta) in [(from, -amount), (to, amount)] {
        let (rid, row) = t
            .get_by_primary_key("acct", k)?
            .unwrap_or_else(|| panic!("account {k:?} not found by its key in a writer"));
        let balance = row.i64("balance")? + delta;
        let new = account(k.0, k.1, balance, rng.below(200) as usize);
        if reinsert {
            t.delete("acct", rid)?;
            t.insert("acct", new)?;
        } else {
            t.update("acct", rid, new)?;
        }
    }
    Ok(())
}

fn audit(t: &Transaction) -> Result<Balances, String> {
    let e = |what: &'static str| move |e: engine::EngineError| format!("{what}: {e}");
    let mut paths: Vec<(&str, Balances, bool)> = Vec::new();
    let add = |m: &mut Balances, dup: &mut bool, row: &engine::OwnedRow| {
        let k = (row.i64("branch").unwrap(), row.i64("id").unwrap());
        *dup |= m.insert(k, row.i64("balance").unwrap()).is_some();
    };
    let (mut m, mut dup) = (Balances::new(), false);
    for r in t.scan("acct").map_err(e("scan"))? {
        add(&mut m, &mut dup, &r.map_err(e("scan"))?.1);
    }
    paths.push(("scan", m, dup));
    for desc in [false, true] {
        let (mut m, mut dup) = (Balances::new(), false);
        for b in 0..BRANCHES {
            let range = if desc {
                KeyRange::prefix(b).desc()
            } else {
                KeyRange::prefix(b)
            };
            for r in t.range("acct_pkey", range).map_err(e("pkey range"))? {
                let (_, row) = r.map_err(e("pkey range"))?;
                if row.i64("branch").unwrap() != b {
                    return Err(format!("pkey prefix {b}: a row of branch {row:?}"));
                }
                add(&mut m, &mut dup, &row);
            }
        }
        paths.push((
            if desc {
                "pkey prefixes desc"
            } else {
                "pkey prefixes"
            },
            m,
            dup,
        ));
    }
    let (mut m, mut dup) = (Balances::new(), false);
    for b in 0..BRANCHES {
        for i in 0..PER_BRANCH {
            if let Some((_, row)) = t.get_by_primary_key("acct", (b, i)).map_err(e("get"))? {
                add(&mut m, &mut dup, &row);
            }
        }
    }
    paths.push(("get_by_primary_key", m, dup));
    let (mut m, mut dup) = (Balances::new(), false);
    for b in 0..BRANCHES {
        for (lo, hi) in [(i64::MIN, START), (START, i64::MAX)] {
            for r in t
                .range("acct_branch_balance", KeyRange::prefix(b).range(lo..hi))
                .map_err(e("balance range"))?
            {
                add(&mut m, &mut dup, &r.map_err(e("balance range"))?.1);
            }
        }
    }
    paths.push(("branch balance ranges", m, dup));
    let reference = paths[0].1.clone();
    for (what, m, dup) in &paths {
        let total: i64 = m.values().sum();
        if *dup || m.len() as i64 != BRANCHES * PER_BRANCH || total != TOTAL || *m != reference {
            return Err(format!(
                "{what}: {} accounts (a duplicate: {dup}), total {total}, same as the scan: {}",
                m.len(),
                *m == reference
            ));
        }
    }
    Ok(reference)
}

#[test]
fn composite_keyed_bank_conserves_its_total() {
    watchdog(Duration::from_secs(90), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            Options::new()
                .pool_buffers(16)
                .autovacuum(true)
                .autovacuum_naptime(Duration::from_millis(20))
                .autovacuum_thresholds(10, 0.0)
                .transaction_attempts(100_000)
                .transaction_backoff(Duration::from_micros(50), Duration::from_millis(2)),
        )
        .unwrap();
        db.create_table_with(
            "acct",
            vec![
                Column::new("branch", ColumnType::I64),
                Column::new("id", ColumnType::I64),
                Column::new("balance", ColumnType::I64),
                Column::new("pad", ColumnType::Text),
            ],
            TableOptions::default().primary_key(&["branch", "id"]),
        )
        .unwrap();
        db.create_index_on("acct_branch_balance", "acct", &["branch", "balance"], false)
            .unwrap();
        db.transaction(|t| {
            for b in 0..BRANCHES {
                for i in 0..PER_BRANCH {
                    t.insert("acct", account(b, i, START, (i * 7 % 200) as usize))?;
                }
            }
            Ok(())
        })
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (commits, audits) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut threads = Vec::new();
        for w in 0..3u64 {
            let (db, stop, commits) = (db.clone(), stop.clone(), commits.clone());
            threads.push(thread::spawn(move || {
                let mut rng = Rng::new(w + 77);
                while !stop.load(Ordering::Relaxed) {
                    if rng.below(8) == 0 {
                        let t = db.begin().unwrap();
                        if let Err(e) = move_money(&t, &mut rng) {
                            assert!(e.is_retryable(), "{e}");
                        }
                        t.rollback().unwrap();
                        continue;
                    }
                    let mut attempt_rng = rng.clone();
                    db.transaction(|t| {
                        attempt_rng = rng.clone();
                        move_money(t, &mut attempt_rng)
                    })
                    .unwrap();
                    rng = attempt_rng;
                    commits.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for r in 0..2 {
            let (db, stop, audits) = (db.clone(), stop.clone(), audits.clone());
            threads.push(thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let t = db.read().unwrap();
                    let first = audit(&t).unwrap_or_else(|e| panic!("reader {r}: {e}"));
                    if r == 1 {
                        thread::sleep(Duration::from_millis(50));
                        let again = audit(&t).unwrap_or_else(|e| panic!("reader {r}: {e}"));
                        assert_eq!(first, again, "reader {r}: the snapshot changed");
                    }
                    audits.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        {
            let (db, stop) = (db.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    db.vacuum("acct").unwrap();
                    thread::sleep(Duration::from_millis(5));
                }
            }));
        }
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(2) && !threads.iter().any(|t| t.is_finished())
        {
            thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p);
            }
        }
        let (commits, audits) = (
            commits.load(Ordering::Relaxed),
            audits.load(Ordering::Relaxed),
        );
        eprintln!("{commits} transfers, {audits} audits");
        assert!(commits > 0 && audits > 0);
        audit(&db.read().unwrap()).unwrap();
        let v = db.verify_indexes("acct").unwrap();
        assert!(v.is_empty(), "{v:?}");
        db.close().unwrap();
    });
}
