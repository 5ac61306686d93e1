//! A child process (this test binary, re-run on its ignored `ddl_child`
//! test) writes from several threads at once on a pool of 24 buffers with
//! `full_page_writes` off (a kill keeps the page cache: no torn page): two
//! writers insert rows of `t` under ids of their own and delete some; one
//! thread runs DDL: `e` created, given a column, written, dropped and
//! created again under the same name (each life writing names of its own),
//! an index on `t.name` created and dropped, while another thread writes
//! into whichever life of `e` exists; one thread vacuums `t` and
//! takes checkpoints, and the checkpointer runs every 100 ms; one takes
//! online backups one after another. Each thread
//! writes a line before a statement's commit (`I ..`) and after it
//! returned (`A ..`) to a log of its own. The parent kills the child with
//! SIGKILL at a random moment, then kills a few children that only open
//! the database (recovery killed at random moments), then opens it itself:
//! - every acknowledged row of `t` is there unless its delete was
//!   acknowledged or in doubt; no row whose insert was never begun or whose
//!   delete was acknowledged;
//! - `e` is the life whose create was acknowledged last (or one in doubt),
//!   with every acknowledged row of that life and none of another;
//! - `verify_indexes` is clean for both tables;
//! - the last online backup that finished opens (after a first open of it
//!   killed at a random moment) with every row acknowledged before it
//!   began and not deleted while it ran, each row of `t` once and found by
//!   key, `e` holding rows of one life, and clean indexes.
//!
//! `cargo test` runs 4 cycles; `DDL_KILL_CYCLES` runs more, and
//! `DDL_KILL_SEED` picks the seed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Rng, small_options, watchdog};
use engine::{Column, ColumnType, Database, Options, Value};

const CHILD_DIR: &str = "ENGINE_TEST_DDL_KILL_DIR";
const CHILD_SEED: &str = "ENGINE_TEST_DDL_KILL_SEED";
const CHILD_MODE: &str = "ENGINE_TEST_DDL_KILL_MODE";

fn options() -> Options {
    small_options()
        .pool_buffers(24)
        .full_page_writes(false)
        .checkpoint_interval(Duration::from_millis(100))
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("name", ColumnType::Text),
    ]
}

/// The columns of `e` in its life `life`: the life is in a column's name,
/// so that a writer knows which life of `e` it wrote into.
fn e_columns(life: u64) -> Vec<Column> {
    let mut c = columns();
    c.push(Column::nullable(format!("life_{life}"), ColumnType::I64));
    c
}

fn e_name(life: u64, id: i64) -> String {
    format!("life {life} row {id}")
}

/// A log line writer for one thread (no fsync needed: a kill keeps the
/// page cache). Every whole line ends in " ;" (a kill may cut the last).
struct Log(std::fs::File);

impl Log {
    fn open(dir: &Path, name: &str) -> Log {
        let path = dir.join(name);
        let cut = std::fs::read(&path).is_ok_and(|b| b.last().is_some_and(|c| *c != b'\n'));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        if cut {
            // The line the last kill cut ends here, alone.
            f.write_all(b"\n").unwrap();
        }
        Log(f)
    }
    fn line(&mut self, s: &str) {
        self.0.write_all(format!("{s} ;\n").as_bytes()).unwrap();
    }
}

/// The child's work; runs until killed.
fn child(dir: &Path, logs: &Path, backups: &Path, seed: u64) {
    let db = Database::open(dir, options()).unwrap();
    if db.table("t").is_err() {
        db.create_table("t", columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
    }
    // Where each life, each writer and each row left off: from the logs.
    let past = read_logs(logs);
    let existing: Vec<i64> = {
        let r = db.read().unwrap();
        r.scan("t")
            .unwrap()
            .map(|x| x.unwrap().1.i64("id").unwrap())
            .collect()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    // Rows whose insert was acknowledged and whose delete has not begun,
    // for the backups' check.
    let acked: Arc<Mutex<BTreeSet<i64>>> = Arc::new(Mutex::new(existing.iter().copied().collect()));
    for w in 0..2u64 {
        let db = db.clone();
        let acked = acked.clone();
        let mut log = Log::open(logs, &format!("w{w}"));
        let mut rng = Rng::new(seed ^ (w + 1));
        // Ids of writer w: w, w + 2, ...; start after every id it began.
        let mut next = past
            .t_begun
            .iter()
            .filter(|id| (**id as u64) % 2 == w)
            .max()
            .map_or(w as i64, |m| m + 2);
        let mut mine: Vec<i64> = existing
            .iter()
            .copied()
            .filter(|id| (*id as u64) % 2 == w)
            .collect();
        threads.push(std::thread::spawn(move || {
            loop {
                let txn = db.begin().unwrap();
                let mut ops = Vec::new();
                for _ in 0..1 + rng.below(8) {
                    if !mine.is_empty() && rng.below(4) == 0 {
                        let i = rng.below(mine.len() as u64) as usize;
                        let id = mine.swap_remove(i);
                        acked.lock().unwrap().remove(&id);
                        if !txn.delete_by_key("t", "id", &Value::I64(id)).unwrap() {
                            let get = txn.get_by_key("t", "id", &Value::I64(id)).unwrap();
                            let scan: Vec<_> = txn
                                .scan("t")
                                .unwrap()
                                .map(|r| r.unwrap())
                                .filter(|r| r.1.i64("id").unwrap() == id)
                                .map(|r| r.0)
                                .collect();
                            let idx = txn.index_lookup("t_id", &Value::I64(id)).unwrap().len();
                            panic!("writer {w}: delete of {id} found nothing; ops {ops:?}; get {get:?}; scan {scan:?}; index {idx}; xid {:?}", txn.xid());
                        }
                        ops.push(format!("T- {id}"));
                    } else {
                        let id = next;
                        next += 2;
                        let name = format!("t {id} {}", "z".repeat(rng.below(300) as usize));
                        txn.insert("t", vec![Value::I64(id), Value::Text(name)])
                            .unwrap();
                        mine.push(id);
                        ops.push(format!("T+ {id}"));
                    }
                }
                for op in &ops {
                    log.line(&format!("I {op}"));
                }
                if rng.below(10) == 0 {
                    txn.rollback().unwrap();
                    // Rolled back: the ids stay unused, the deleted rows stay.
                    for op in &ops {
                        log.line(&format!("R {op}"));
                    }
                    mine = past_mine_after_rollback(mine, &ops);
                    // Rows it deleted are back, but not those it inserted.
                    let mut a = acked.lock().unwrap();
                    for op in &ops {
                        if let Some(id) = op.strip_prefix("T- ")
                            && !ops.contains(&format!("T+ {id}"))
                        {
                            a.insert(id.parse().unwrap());
                        }
                    }
                    continue;
                }
                txn.commit().unwrap();
                for op in &ops {
                    log.line(&format!("A {op}"));
                }
                // In order: a row inserted and deleted by the transaction
                // is gone.
                let mut a = acked.lock().unwrap();
                for op in &ops {
                    if let Some(id) = op.strip_prefix("T+ ") {
                        a.insert(id.parse().unwrap());
                    } else if let Some(id) = op.strip_prefix("T- ") {
                        a.remove(&id.parse().unwrap());
                    }
                }
            }
        }));
    }
    {
        let db = db.clone();
        let mut log = Log::open(logs, "ddl");
        let mut rng = Rng::new(seed ^ 0xDD1);
        // A life left by an earlier run goes first.
        if db.table("e").is_ok() {
            log.line("I E drop 0");
            db.drop_table("e").unwrap();
            log.line("A E drop 0");
        }
        let mut life = past.lives_begun + 1;
        let mut e_exists = false;
        let mut extra = false;
        let mut e_next = 0i64;
        threads.push(std::thread::spawn(move || {
            loop {
                match rng.below(6) {
                    0 if !e_exists => {
                        log.line(&format!("I E create {life}"));
                        db.create_table("e", e_columns(life)).unwrap();
                        log.line(&format!("A E create {life}"));
                        e_exists = true;
                        extra = false;
                        e_next = 0;
                    }
                    1 if e_exists => {
                        log.line(&format!("I E drop {life}"));
                        db.drop_table("e").unwrap();
                        log.line(&format!("A E drop {life}"));
                        e_exists = false;
                        life += 1;
                    }
                    2 if e_exists && !extra => {
                        db.add_column("e", Column::nullable("x", ColumnType::I64))
                            .unwrap();
                        extra = true;
                    }
                    3 if e_exists => {
                        let cur = life;
                        let txn = db.begin().unwrap();
                        let mut ids = Vec::new();
                        for _ in 0..1 + rng.below(30) {
                            let id = e_next;
                            e_next += 1;
                            let mut r =
                                vec![Value::I64(id), Value::Text(e_name(cur, id)), Value::Null];
                            if extra {
                                r.push(Value::I64(id));
                            }
                            txn.insert("e", r).unwrap();
                            ids.push(id);
                        }
                        let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
                        log.line(&format!("I E rows {cur} {list}"));
                        txn.commit().unwrap();
                        log.line(&format!("A E rows {cur} {list}"));
                    }
                    4 => {
                        if db.indexes().iter().any(|i| i.name == "t_name") {
                            db.drop_index("t_name").unwrap();
                        } else {
                            db.create_index("t_name", "t", "name", false).unwrap();
                        }
                    }
                    _ => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        }));
    }
    {
        let db = db.clone();
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                db.vacuum("t").unwrap();
                if i.is_multiple_of(3) {
                    db.checkpoint().unwrap();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
    }
    {
        // Online backups while everything else runs: each one that
        // finished leaves beside it the rows it must hold.
        let db = db.clone();
        let backups = backups.to_path_buf();
        let mut rng = Rng::new(seed ^ 0xBAC);
        threads.push(std::thread::spawn(move || {
            for k in 0.. {
                std::thread::sleep(Duration::from_millis(20 + rng.below(150)));
                let before = acked.lock().unwrap().clone();
                let to = backups.join(format!("{seed}-{k}"));
                db.backup_to(&to, |_| {}).unwrap();
                let after = acked.lock().unwrap().clone();
                let must: Vec<String> = before.intersection(&after).map(i64::to_string).collect();
                std::fs::write(to.with_extension("rows"), must.join(",")).unwrap();
            }
        }));
    }
    {
        // A writer of `e` beside the DDL thread: it drops, creates and
        // alters `e` under the writer's feet. Rows under negative ids.
        let db = db.clone();
        let mut log = Log::open(logs, "we");
        let mut rng = Rng::new(seed ^ 0xE);
        let mut next = -1i64;
        threads.push(std::thread::spawn(move || {
            loop {
                let Ok(info) = db.table("e") else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                let life: u64 = info.columns[2].name["life_".len()..].parse().unwrap();
                let txn = db.begin().unwrap();
                let mut ids = Vec::new();
                let mut failed = false;
                for _ in 0..1 + rng.below(10) {
                    let id = next;
                    next -= 1;
                    let mut r = vec![Value::I64(id), Value::Text(e_name(life, id)), Value::Null];
                    if info.columns.len() == 4 {
                        r.push(Value::Null);
                    }
                    // Dropped, or altered meanwhile: nothing is committed.
                    if txn.insert("e", r).is_err() {
                        failed = true;
                        break;
                    }
                    ids.push(id);
                }
                // Written into another life's table (dropped and created
                // again since `info` was read): rolled back.
                let same = db.table("e").is_ok_and(|now| now.rel == info.rel);
                if failed || !same || ids.is_empty() {
                    drop(txn);
                    continue;
                }
                let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
                log.line(&format!("I E rows {life} {list}"));
                match txn.commit() {
                    Ok(_) => log.line(&format!("A E rows {life} {list}")),
                    // Its table dropped before the commit: nothing to keep.
                    Err(_) => log.line(&format!("R E rows {life} {list}")),
                }
            }
        }));
    }
    println!("READY");
    std::io::stdout().flush().unwrap();
    for t in threads {
        t.join().unwrap();
    }
}

/// After a rollback the rows it deleted are the writer's again and the
/// ids it inserted are not (undone newest first: a row inserted and
/// deleted by the transaction is gone).
fn past_mine_after_rollback(mut mine: Vec<i64>, ops: &[String]) -> Vec<i64> {
    for op in ops.iter().rev() {
        if let Some(id) = op.strip_prefix("T+ ") {
            let id: i64 = id.parse().unwrap();
            mine.retain(|m| *m != id);
        } else if let Some(id) = op.strip_prefix("T- ") {
            mine.push(id.parse().unwrap());
        }
    }
    mine
}

/// What the logs say.
#[derive(Default, Debug)]
struct Past {
    /// Ids whose insert began (I or A), and the fate of each line.
    t_begun: BTreeSet<i64>,
    t_ins_acked: BTreeSet<i64>,
    t_ins_doubt: BTreeSet<i64>,
    t_del_acked: BTreeSet<i64>,
    t_del_doubt: BTreeSet<i64>,
    /// Lives: the last acknowledged event of `e` and one in doubt.
    lives_begun: u64,
    e_events: Vec<(bool, String)>,
    /// Rows of each life: acknowledged, in doubt.
    e_rows_acked: BTreeMap<u64, BTreeSet<i64>>,
    e_rows_doubt: BTreeMap<u64, BTreeSet<i64>>,
}

impl Past {
    fn t_acked(&self) -> BTreeSet<i64> {
        self.t_ins_acked
            .difference(&self.t_del_acked)
            .copied()
            .collect()
    }
}

fn read_logs(logs: &Path) -> Past {
    let mut p = Past::default();
    let Ok(entries) = std::fs::read_dir(logs) else {
        return p;
    };
    let mut names: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
    names.sort();
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        // Per file: I lines not followed by their A / R are in doubt.
        let mut pending: Vec<String> = Vec::new();
        for line in text.lines() {
            // A line a kill cut is not whole: its statement was in doubt
            // (an I line) or is (an A line, whose I line stays pending).
            let Some(line) = line.strip_suffix(" ;") else {
                continue;
            };
            let (tag, op) = line.split_at(2);
            match tag {
                "I " => pending.push(op.to_string()),
                "R " => pending.retain(|o| o != op),
                "A " => {
                    pending.retain(|o| o != op);
                    apply(&mut p, op, true);
                }
                _ => panic!("bad log line {line:?}"),
            }
        }
        for op in pending {
            apply(&mut p, &op, false);
        }
    }
    p
}

fn apply(p: &mut Past, op: &str, acked: bool) {
    let words: Vec<&str> = op.split(' ').collect();
    match words[..] {
        ["T+", id] => {
            let id: i64 = id.parse().unwrap();
            p.t_begun.insert(id);
            if acked {
                p.t_ins_acked.insert(id);
            } else {
                p.t_ins_doubt.insert(id);
            }
        }
        ["T-", id] => {
            let id: i64 = id.parse().unwrap();
            if acked {
                p.t_del_acked.insert(id);
            } else {
                p.t_del_doubt.insert(id);
            }
        }
        ["E", "create", life] | ["E", "drop", life] => {
            let life: u64 = life.parse().unwrap();
            p.lives_begun = p.lives_begun.max(life);
            p.e_events.push((acked, op.to_string()));
        }
        ["E", "rows", life, list] => {
            let life: u64 = life.parse().unwrap();
            let ids = list.split(',').map(|s| s.parse::<i64>().unwrap());
            let into = if acked {
                &mut p.e_rows_acked
            } else {
                &mut p.e_rows_doubt
            };
            into.entry(life).or_default().extend(ids);
        }
        _ => panic!("bad op {op:?}"),
    }
}

/// The checks of the module docs on the database reopened in-process.
fn check(db: &Database, past: &Past, cycle: u64) -> (usize, Option<u64>) {
    let r = db.read().unwrap();
    let mut t = BTreeSet::new();
    for item in r.scan("t").unwrap() {
        let (_, row) = item.unwrap();
        let id = row.i64("id").unwrap();
        assert!(t.insert(id), "cycle {cycle}: t: id {id} twice");
        assert!(
            row.text("name").unwrap().starts_with(&format!("t {id} ")),
            "cycle {cycle}: t: row {id}"
        );
    }
    for id in &t {
        assert!(
            past.t_ins_acked.contains(id) || past.t_ins_doubt.contains(id),
            "cycle {cycle}: t: row {id} was never acknowledged nor in doubt"
        );
        assert!(
            !past.t_del_acked.contains(id),
            "cycle {cycle}: t: row {id} is back after its delete was acknowledged"
        );
    }
    for id in past.t_acked() {
        assert!(
            t.contains(&id) || past.t_del_doubt.contains(&id),
            "cycle {cycle}: t: acknowledged row {id} lost"
        );
        assert!(
            r.get_by_key("t", "id", &Value::I64(id)).unwrap().is_some() || !t.contains(&id),
            "cycle {cycle}: t: row {id} not found by key"
        );
    }
    // `e`: the DDL thread's events in order; the last acknowledged one and
    // the one in doubt after it (at most one) say what may exist.
    let last_acked = past
        .e_events
        .iter()
        .rev()
        .find(|(a, _)| *a)
        .map(|(_, op)| op.clone());
    // Only the DDL thread's last statement can be in doubt (earlier
    // runs' statements in doubt are followed by later acknowledged ones).
    let doubt = past
        .e_events
        .last()
        .filter(|(a, _)| !*a)
        .map(|(_, op)| op.clone());
    let life_of = |op: &str| op.rsplit(' ').next().unwrap().parse::<u64>().unwrap();
    let mut allowed: Vec<Option<u64>> = Vec::new();
    match &last_acked {
        Some(op) if op.contains("create") => allowed.push(Some(life_of(op))),
        _ => allowed.push(None),
    }
    if let Some(op) = &doubt {
        if op.contains("create") {
            allowed.push(Some(life_of(op)));
        } else {
            allowed.push(None);
        }
    }
    let got_life = match db.table("e") {
        Err(_) => None,
        Ok(_) => {
            let mut rows = BTreeMap::new();
            for item in r.scan("e").unwrap() {
                let (_, row) = item.unwrap();
                rows.insert(
                    row.i64("id").unwrap(),
                    row.text("name").unwrap().to_string(),
                );
            }
            // Which life: the allowed one whose names the rows carry.
            let life = allowed
                .iter()
                .flatten()
                .copied()
                .find(|l| rows.iter().all(|(id, n)| *n == e_name(*l, *id)))
                .unwrap_or_else(|| {
                    panic!("cycle {cycle}: e holds rows of no allowed life ({allowed:?}): {rows:?}")
                });
            for id in past.e_rows_acked.get(&life).into_iter().flatten() {
                assert!(
                    rows.contains_key(id),
                    "cycle {cycle}: e life {life}: row {id} lost"
                );
            }
            for id in rows.keys() {
                let ok = past.e_rows_acked.get(&life).is_some_and(|s| s.contains(id))
                    || past.e_rows_doubt.get(&life).is_some_and(|s| s.contains(id));
                assert!(
                    ok,
                    "cycle {cycle}: e life {life}: row {id} never acknowledged"
                );
            }
            Some(life)
        }
    };
    assert!(
        allowed.contains(&got_life),
        "cycle {cycle}: e is {got_life:?}, allowed {allowed:?} (last {last_acked:?}, doubt {doubt:?})"
    );
    r.commit().unwrap();
    for table in ["t", "e"] {
        if db.table(table).is_ok() {
            let v = db.verify_indexes(table).unwrap();
            assert!(v.is_empty(), "cycle {cycle}: {table}: {v:?}");
        }
    }
    (t.len(), got_life)
}

fn spawn(dir: &Path, logs: &Path, seed: u64, mode: &str) -> std::process::Child {
    let backups = logs.with_extension("backups");
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ddl_child", "--ignored", "--nocapture"])
        .env(CHILD_DIR, dir)
        .env("ENGINE_TEST_DDL_KILL_LOGS", logs)
        .env(CHILD_SEED, seed.to_string())
        .env(CHILD_MODE, mode)
        .env("ENGINE_TEST_DDL_KILL_BACKUPS", backups)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for READY on the child's stdout (or its end), at most `limit`.
fn wait_ready(c: &mut std::process::Child, limit: Duration) -> bool {
    use std::io::{BufRead, BufReader};
    let out = c.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if line.map(|l| l.contains("READY")).unwrap_or(false) {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(limit).is_ok()
}

fn stderr_of(c: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut s = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

#[test]
fn kills_during_ddl_maintenance_and_recovery_lose_and_resurrect_nothing() {
    let cycles: u64 = std::env::var("DDL_KILL_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let seed: u64 = std::env::var("DDL_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xD1);
    watchdog(Duration::from_secs(60 + 20 * cycles), move || {
        let mut rng = Rng::new(seed);
        let dir = tempfile::tempdir().unwrap();
        let logs = tempfile::tempdir().unwrap();
        let backups = logs.path().with_extension("backups");
        std::fs::create_dir(&backups).unwrap();
        let _remove = RemoveOnDrop(backups.clone());
        let mut checked_backups = 0;
        let mut lives = 0;
        let mut rows = 0;
        for cycle in 0..cycles {
            let mut c = spawn(dir.path(), logs.path(), rng.next_u64(), "work");
            assert!(
                wait_ready(&mut c, Duration::from_secs(20)),
                "cycle {cycle}: the child never got ready: {}",
                {
                    let _ = c.kill();
                    let _ = c.wait();
                    stderr_of(&mut c)
                }
            );
            std::thread::sleep(Duration::from_millis(100 + rng.below(500)));
            if let Ok(Some(status)) = c.try_wait() {
                panic!(
                    "cycle {cycle}: the child ended: {status}: {}",
                    stderr_of(&mut c)
                );
            }
            c.kill().unwrap();
            c.wait().unwrap();
            // Recovery killed at random moments, a few times in a row.
            for _ in 0..1 + rng.below(3) {
                let started = Instant::now();
                let mut o = spawn(dir.path(), logs.path(), 0, "open");
                std::thread::sleep(Duration::from_millis(rng.below(60)));
                let _ = o.kill();
                let status = o.wait().unwrap();
                let err = stderr_of(&mut o);
                assert!(
                    !err.contains("panicked"),
                    "cycle {cycle}: an open killed after {:?} had failed: {status}: {err}",
                    started.elapsed()
                );
            }
            let past = read_logs(logs.path());
            let db = Database::open(dir.path(), options())
                .unwrap_or_else(|e| panic!("cycle {cycle}: open after the kills: {e}"));
            let (n, life) = check(&db, &past, cycle);
            rows = n;
            lives += u64::from(life.is_some());
            db.close().unwrap();
            checked_backups += check_backups(&backups, &mut rng, cycle);
        }
        eprintln!(
            "{cycles} cycles, {rows} rows of t at the end, e present after {lives} of them, \
             {checked_backups} online backups opened whole"
        );
    });
}

#[test]
#[ignore = "run as a child process by kills_during_ddl_maintenance_and_recovery_lose_and_resurrect_nothing"]
fn ddl_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let logs = std::env::var_os("ENGINE_TEST_DDL_KILL_LOGS").unwrap();
    let seed: u64 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    if std::env::var(CHILD_MODE).as_deref() == Ok("open") {
        let db = Database::open(Path::new(&dir), options()).unwrap();
        println!("READY");
        std::thread::sleep(Duration::from_secs(30));
        drop(db);
        return;
    }
    let backups = std::env::var_os("ENGINE_TEST_DDL_KILL_BACKUPS").unwrap();
    child(Path::new(&dir), Path::new(&logs), Path::new(&backups), seed);
}

/// Removes a directory when dropped.
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every backup that finished (its `.rows` file written): its first open
/// killed at a random moment, then opened; it holds every row it must,
/// each row of `t` whole and found by key, `e` one life, indexes clean.
/// Then the backups go. Returns how many were checked.
fn check_backups(backups: &Path, rng: &mut Rng, cycle: u64) -> u64 {
    let mut done: Vec<std::path::PathBuf> = std::fs::read_dir(backups)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rows"))
        .collect();
    done.sort();
    let mut checked = 0;
    // The last finished one, at most (they all take the same path).
    if let Some(rows_file) = done.last() {
        let copy = rows_file.with_extension("");
        let must: BTreeSet<i64> = std::fs::read_to_string(rows_file)
            .unwrap()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        let mut o = spawn(&copy, &copy.with_extension("nologs"), 0, "open");
        std::thread::sleep(Duration::from_millis(rng.below(40)));
        let _ = o.kill();
        o.wait().unwrap();
        let err = stderr_of(&mut o);
        assert!(
            !err.contains("panicked"),
            "cycle {cycle}: backup {}: {err}",
            copy.display()
        );
        let db = Database::open(&copy, options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: backup {}: {e}", copy.display()));
        let r = db.read().unwrap();
        let mut got = BTreeSet::new();
        for item in r.scan("t").unwrap() {
            let (_, row) = item.unwrap();
            let id = row.i64("id").unwrap();
            assert!(got.insert(id), "cycle {cycle}: backup: id {id} twice");
            assert!(row.text("name").unwrap().starts_with(&format!("t {id} ")));
        }
        let lost: Vec<&i64> = must.difference(&got).take(5).collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle}: backup {}: rows {lost:?} lost",
            copy.display()
        );
        for id in got.iter().step_by(17) {
            assert!(r.get_by_key("t", "id", &Value::I64(*id)).unwrap().is_some());
        }
        if db.table("e").is_ok() {
            let lives: BTreeSet<String> = r
                .scan("e")
                .unwrap()
                .map(|x| {
                    let name = x.unwrap().1.text("name").unwrap().to_string();
                    name.split(" row ").next().unwrap().to_string()
                })
                .collect();
            assert!(
                lives.len() <= 1,
                "cycle {cycle}: backup: e holds rows of {lives:?}"
            );
        }
        r.commit().unwrap();
        for table in ["t", "e"] {
            if db.table(table).is_ok() {
                let v = db.verify_indexes(table).unwrap();
                assert!(v.is_empty(), "cycle {cycle}: backup: {table}: {v:?}");
            }
        }
        db.close().unwrap();
        checked += 1;
    }
    for e in std::fs::read_dir(backups).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    checked
}
