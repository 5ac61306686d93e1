//! The crash workload: a mixed workload that a child process runs until it
//! is killed with SIGKILL, and the checks made after recovery. Shared by the
//! crash-loop test (`tests/crash_loop_keeps_every_committed_transaction.rs`,
//! a few cycles) and `bench crash-soak` (hundreds or thousands of cycles).
//!
//! ```text
//!   parent                                   child (a re-executed binary)
//!   ──────                                   ─────
//!   spawn ─────────────────────────────────> open (recovery), create t / t_id / t_name if missing
//!                                            print READY
//!   wait for READY, sleep a random 100-700 ms   loop: checkpoint | vacuum | bulk load |
//!                                                     DDL or a bulk load on table e | a burst of xids |
//!                                                     a transaction: lookups checked against
//!                                                     the child's model, 1-6 inserts / updates /
//!                                                     deletes by key; 1 in 7 rolls back
//!                                                   print "TXN n ops" before commit, "OK n" after
//!                                                   (one transaction is kept open, never committed)
//!   SIGKILL ──────────────────────────────── X
//!   read every line left in the pipe
//!   open (recovery, timed), check:           [Soak::check_after_crash]
//! ```
//!
//! Besides `t`, the child keeps a second table `e` going through its life
//! again and again, one auto-committed statement per `TXN` line: CREATE
//! TABLE, CREATE UNIQUE INDEX `e_id`, a bulk load into it while it is empty
//! (pages logged whole through the bulk-write ring, the index built
//! bottom-up), more bulk loads into it once it has rows (row by row), DROP
//! TABLE. A kill inside any of them leaves that statement in doubt. And now
//! and then a burst of up to [`XID_BURST`] xids (transactions of the
//! manager that write nothing) moves the next xid on, so the runs cross
//! commit-log page boundaries (16,352 xids a page) within a few cycles.
//!
//! The checks after each crash:
//! 1. The tables are exactly the effects of every `OK` transaction applied in
//!    order (`Model` for `t`; for `e` whether it exists, whether `e_id` does,
//!    and its rows), plus possibly the one transaction in doubt (printed
//!    `TXN`, no `OK`: killed inside `commit` or inside a statement). Nothing
//!    else: no phantom row, no row of the never-committed transaction, no
//!    row of a killed bulk load (also after the commits of later cycles).
//! 2. Every row is found by key; the unique index in key order equals the
//!    scan; the non-unique index finds every row of one name.
//! 3. `verify_indexes` is clean for every table, and again after a vacuum
//!    (a child killed between a vacuum's heap pass and its index pass leaves
//!    entries naming dead line pointers; those are not violations).
//! 4. After a clean close, every block of every relation file passes its
//!    checksum through a fresh pool.
//!
//! The child's lines go through a pipe: a line the child wrote before the
//! kill is in the pipe and read afterwards, so "printed OK" means
//! "acknowledged before the kill". Violations are returned as errors (text
//! naming the cycle and what differed), not panics, so a soak can report
//! them; the child itself panics on any surprise, which the parent sees as
//! a child that died on its own.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::ops::Bound;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use bufmgr::{BufferPool, FileStorage, PoolConfig, StorageBackend};

use crate::options::Options;
use crate::value::{Column, ColumnType, Row, Value};
use crate::{Database, Partitions};

/// Ids at or above this are only ever inserted by the never-committed
/// transaction.
pub const UNCOMMITTED: i64 = 1 << 40;
/// Around this many rows the mix turns to deletes, so that a long soak keeps
/// the table (and the models) bounded.
pub const TARGET_ROWS: usize = 4000;
/// How long a child waits for READY before the parent gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Xids of one burst at most (module docs).
pub const XID_BURST: u64 = 4000;
/// Rows of the table `e` at most: beyond, the next statement on it drops it.
pub const E_ROWS: usize = 12_000;

/// The workload's options: a 64-buffer pool (so pages are evicted and
/// written all the time), 1 MiB WAL segments, one partition, and the
/// autovacuum worker looking every 10 ms and vacuuming at 20 dead tuples, so
/// a kill often lands inside one of its vacuums.
pub fn options() -> Options {
    Options::new()
        .pool_buffers(64)
        .wal_segment_size(1 << 20)
        .checkpoint_max_wal_bytes(64 << 20)
        .partitions(Partitions::Count(1))
        .autovacuum(true)
        .autovacuum_naptime(Duration::from_millis(10))
        .autovacuum_thresholds(20, 0.0)
}

/// A small deterministic PRNG (xorshift64*) for workloads driven by a seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (the same seed, the same sequence).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// id -> name (None = NULL).
pub type Model = BTreeMap<i64, Option<String>>;

/// One effect of a transaction, as printed by the child.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Insert a row with this id and name.
    Insert(i64, Option<String>),
    /// Replace the name of the row with this id.
    Update(i64, Option<String>),
    /// Delete the row with this id.
    Delete(i64),
    /// Bulk load of ids `start..start + count`, all named `name`.
    Bulk(i64, i64, String),
    /// CREATE TABLE e.
    CreateE,
    /// CREATE UNIQUE INDEX e_id ON e (id).
    IndexE,
    /// Bulk load of ids `start..start + count` into e, named "load".
    LoadE(i64, i64),
    /// DROP TABLE e (and its index).
    DropE,
}

/// The table `e` as the model has it: `None` while it does not exist.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableE {
    /// `e_id` exists.
    pub indexed: bool,
    /// The rows the model holds now, by id.
    pub rows: Model,
}

/// The name of every row a load into `e` writes.
pub const LOAD_NAME: &str = "load";

fn name_token(n: &Option<String>) -> &str {
    n.as_deref().unwrap_or("~")
}

fn parse_name(s: &str) -> Option<String> {
    (s != "~").then(|| s.to_string())
}

impl Op {
    /// The operation as one whitespace-free token (`parse` reads it back).
    pub fn token(&self) -> String {
        match self {
            Op::Insert(id, n) => format!("I:{id}:{}", name_token(n)),
            Op::Update(id, n) => format!("U:{id}:{}", name_token(n)),
            Op::Delete(id) => format!("D:{id}"),
            Op::Bulk(start, count, n) => format!("B:{start}:{count}:{n}"),
            Op::CreateE => "CE".into(),
            Op::IndexE => "XE".into(),
            Op::LoadE(start, count) => format!("LE:{start}:{count}"),
            Op::DropE => "DE".into(),
        }
    }

    /// Read an operation written by `token`.
    pub fn parse(tok: &str) -> Result<Op, String> {
        let f: Vec<&str> = tok.split(':').collect();
        let num = |i: usize| -> Result<i64, String> {
            f.get(i)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("bad op {tok:?}"))
        };
        let text = |i: usize| -> Result<&str, String> {
            f.get(i).copied().ok_or_else(|| format!("bad op {tok:?}"))
        };
        Ok(match f[0] {
            "I" => Op::Insert(num(1)?, parse_name(text(2)?)),
            "U" => Op::Update(num(1)?, parse_name(text(2)?)),
            "D" => Op::Delete(num(1)?),
            "B" => Op::Bulk(num(1)?, num(2)?, text(3)?.to_string()),
            "CE" => Op::CreateE,
            "XE" => Op::IndexE,
            "LE" => Op::LoadE(num(1)?, num(2)?),
            "DE" => Op::DropE,
            _ => return Err(format!("bad op {tok:?}")),
        })
    }

    /// Apply the operation to the model.
    pub fn apply(&self, m: &mut Model) {
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
            Op::CreateE | Op::IndexE | Op::LoadE(..) | Op::DropE => {}
        }
    }

    /// Apply to the model of table `e` (the ops on `t` change nothing).
    pub fn apply_e(&self, e: &mut Option<TableE>) {
        match self {
            Op::CreateE => *e = Some(TableE::default()),
            Op::IndexE => {
                if let Some(e) = e {
                    e.indexed = true;
                }
            }
            Op::LoadE(start, count) => {
                if let Some(e) = e {
                    for id in *start..start + count {
                        e.rows.insert(id, Some(LOAD_NAME.into()));
                    }
                }
            }
            Op::DropE => *e = None,
            _ => {}
        }
    }
}

/// The table's columns: `id i64 not null, name bytes null`.
pub fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("name", ColumnType::Bytes),
    ]
}

/// The table row of the model's row `id` with `name`.
pub fn row_of(id: i64, name: &Option<String>) -> Row {
    vec![
        Value::I64(id),
        name.as_ref()
            .map_or(Value::Null, |n| Value::Bytes(n.as_bytes().to_vec())),
    ]
}

/// The table `t` as a model, read by a table scan.
pub fn scan_model(db: &Database) -> Result<Model, String> {
    scan_table(db, "t")
}

/// The table `e` as the database has it (`None`: no such table).
pub fn scan_e(db: &Database) -> Result<Option<TableE>, String> {
    if db.table("e").is_err() {
        return Ok(None);
    }
    Ok(Some(TableE {
        indexed: db.indexes().iter().any(|i| i.name == "e_id"),
        rows: scan_table(db, "e")?,
    }))
}

/// A table of [`columns`] as a model, read by a table scan.
pub fn scan_table(db: &Database, table: &str) -> Result<Model, String> {
    let t = db.begin().map_err(|e| e.to_string())?;
    let mut m = Model::new();
    for r in t.scan(table).map_err(|e| e.to_string())? {
        let (_, row) = r.map_err(|e| e.to_string())?;
        let name = match &row[1] {
            Value::Null => None,
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            v => return Err(format!("unexpected name {v:?}")),
        };
        let id = row[0]
            .as_i64()
            .ok_or_else(|| format!("id is {:?}", row[0]))?;
        if m.insert(id, name).is_some() {
            return Err(format!("{table}: id {id} twice in one scan"));
        }
    }
    Ok(m)
}

/// What differs between two key -> value maps, briefly: the counts and up to
/// five keys missing, extra and changed (a failed check's message).
pub fn describe_difference<V: PartialEq + std::fmt::Debug>(
    got: &BTreeMap<i64, V>,
    want: &BTreeMap<i64, V>,
) -> String {
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

/// What differs between two states of table `e`, briefly.
fn describe_e(got: &Option<TableE>, want: &Option<TableE>) -> String {
    match (got, want) {
        (None, None) => "absent as expected".into(),
        (Some(_), None) => "exists, expected absent".into(),
        (None, Some(_)) => "absent, expected to exist".into(),
        (Some(g), Some(w)) => format!(
            "index {} (expected {}), {}",
            g.indexed,
            w.indexed,
            describe_difference(&g.rows, &w.rows)
        ),
    }
}

/// Read every block of every relation file under `dir` through a fresh
/// buffer pool over `FileStorage` with checksums on (the database must be
/// closed). Returns the number of blocks read, or the first failure naming
/// relation fork and block.
pub fn every_page_checksum_valid(dir: &Path) -> Result<u64, String> {
    let storage = Arc::new(FileStorage::open(dir).map_err(|e| e.to_string())?);
    let pool = BufferPool::new(
        PoolConfig::new(64).partitions(1).checksums(true),
        storage.clone(),
    )
    .map_err(|e| e.to_string())?;
    let mut n = 0;
    for rf in storage.relations().map_err(|e| e.to_string())? {
        let nblocks = pool.nblocks(rf).map_err(|e| format!("{rf:?}: {e}"))?;
        for block in 0..nblocks {
            pool.read_buffer(rf, block, None)
                .map_err(|e| format!("{rf:?} block {block}: {e}"))?;
            n += 1;
        }
    }
    Ok(n)
}

/// Run the child's side on `dir` until `deadline` passes (or the process
/// is killed, which is the point), printing `READY`, then `TXN n ops` and
/// `OK n` for each transaction to `out`. Panics on any surprise: a lookup
/// that disagrees with its model, a failed operation.
pub fn run_child(dir: &Path, seed: u64, deadline: Duration, out: &mut impl Write) {
    let mut rng = Rng::new(seed);
    let db = Database::open(dir, options()).expect("open (recovery)");
    // DDL auto-commits one statement at a time; a crash may fall between.
    if db.table("t").is_err() {
        db.create_table("t", columns()).unwrap();
    }
    let indexes: Vec<String> = db.indexes().into_iter().map(|i| i.name).collect();
    if !indexes.iter().any(|n| n == "t_id") {
        db.create_index("t_id", "t", "id", true).unwrap();
    }
    if !indexes.iter().any(|n| n == "t_name") {
        db.create_index("t_name", "t", "name", false).unwrap();
    }
    let mut model = scan_model(&db).unwrap();
    let mut next_id = model.keys().next_back().map_or(0, |m| m + 1);
    let mut e = scan_e(&db).unwrap();
    let mut next_e_id = e
        .as_ref()
        .and_then(|e| e.rows.keys().next_back().map(|m| m + 1))
        .unwrap_or(0);
    let open = db.begin().unwrap();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let names = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];
    let pick_name = |rng: &mut Rng| -> Option<String> {
        (rng.below(10) != 0).then(|| names[rng.below(names.len() as u64) as usize].to_string())
    };
    let deadline = Instant::now() + deadline;
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
            // What the autovacuum worker has done so far (the parent
            // counts it, and fails on a background error).
            let av = db.autovacuum_stats();
            let error = av.last_error.map(|e| e.to_string()).unwrap_or_default();
            writeln!(out, "AUTOVACUUM {} {error}", av.vacuums).unwrap();
            continue;
        }
        if action < 5 {
            db.vacuum("t").unwrap();
            continue;
        }
        if action < 10 {
            // The next statement of table e's life (module docs).
            let op = match &e {
                None => Op::CreateE,
                Some(t) if !t.indexed => Op::IndexE,
                Some(t) if t.rows.is_empty() => Op::LoadE(next_e_id, 500 + rng.below(2500) as i64),
                Some(t) if t.rows.len() < E_ROWS && rng.below(2) == 0 => {
                    Op::LoadE(next_e_id, 50 + rng.below(300) as i64)
                }
                Some(_) => Op::DropE,
            };
            writeln!(out, "TXN {n} {}", op.token()).unwrap();
            out.flush().unwrap();
            match &op {
                Op::CreateE => drop(db.create_table("e", columns()).unwrap()),
                Op::IndexE => drop(db.create_index("e_id", "e", "id", true).unwrap()),
                Op::LoadE(start, count) => {
                    let rows =
                        (*start..start + count).map(|id| row_of(id, &Some(LOAD_NAME.into())));
                    db.bulk_load("e", rows, |_| {}).unwrap();
                    next_e_id = start + count;
                }
                _ => db.drop_table("e").unwrap(),
            }
            writeln!(out, "OK {n}").unwrap();
            out.flush().unwrap();
            op.apply_e(&mut e);
            continue;
        }
        if action < 12 {
            // A burst of xids that write nothing (module docs); some abort.
            let tm = db.transaction_manager();
            for i in 0..rng.below(XID_BURST) {
                let x = tm.begin().unwrap();
                if i % 5 == 0 {
                    x.abort().unwrap();
                } else {
                    x.commit_with(crate::CommitMode::Asynchronous).unwrap();
                }
            }
            continue;
        }
        if action < 14 && model.len() < TARGET_ROWS {
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
            assert_eq!(
                got.map(|(_, r)| r.into_values()),
                Some(row_of(k, &model[&k]))
            );
            let name = names[rng.below(names.len() as u64) as usize];
            let want = model
                .values()
                .filter(|v| v.as_deref() == Some(name))
                .count();
            assert_eq!(
                t.index_lookup("t_name", &Value::from(name.as_bytes()))
                    .unwrap()
                    .len(),
                want
            );
        }
        let mut ops = Vec::new();
        let mut local = model.clone();
        for _ in 0..1 + rng.below(6) {
            let kind = match rng.below(10) {
                k if local.len() > TARGET_ROWS && k < 3 => 9 - k,
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

/// Spawn `child` (which must run [`run_child`] and print to its stdout),
/// wait for `READY`, let it run for `run`, SIGKILL it, and return every
/// line it printed.
pub fn run_and_kill(child: Command, run: Duration) -> Result<Vec<String>, String> {
    run_and_kill_seen(child, run, |_, _| {})
}

/// [`run_and_kill`], calling `seen(line, at)` for every line as it comes
/// (`at`: when the pipe's reader got it), in order: the lines before
/// `READY` and the last ones read after the kill included.
pub fn run_and_kill_seen(
    mut child: Command,
    run: Duration,
    mut seen: impl FnMut(&str, Instant),
) -> Result<Vec<String>, String> {
    let mut child = child
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn the child: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = channel::<(String, Instant)>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((line, Instant::now())).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let mut take = |(l, at): (String, Instant), lines: &mut Vec<String>| {
        seen(&l, at);
        lines.push(l);
    };
    let ready_by = Instant::now() + READY_TIMEOUT;
    let outcome = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => {
                let ready = l.0 == "READY";
                take(l, &mut lines);
                if ready {
                    break Ok(());
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if child.try_wait().ok().flatten().is_some() {
                    break Err("the child exited before READY (see its stderr)".to_string());
                }
                if Instant::now() > ready_by {
                    break Err(format!("the child was not ready after {READY_TIMEOUT:?}"));
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                break Err("the child closed stdout before READY".to_string());
            }
        }
    };
    if outcome.is_ok() {
        // The child's run, taking its lines as they come.
        let kill_at = Instant::now() + run;
        loop {
            let left = kill_at.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match rx.recv_timeout(left) {
                Ok(l) => take(l, &mut lines),
                Err(RecvTimeoutError::Timeout) => break,
                // The child closed its stdout (it died): wait out the run
                // as before, so the check below sees it.
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(kill_at.saturating_duration_since(Instant::now()));
                    break;
                }
            }
        }
    }
    let died = child.try_wait().ok().flatten();
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    let _ = reader.join();
    for l in rx.try_iter() {
        take(l, &mut lines);
    }
    outcome?;
    if let Some(status) = died {
        return Err(format!(
            "the child died on its own ({status}; see its stderr)"
        ));
    }
    Ok(lines)
}

/// One crash cycle, as checked.
#[derive(Clone, Debug)]
pub struct CycleReport {
    /// Transactions the child acknowledged (`OK`) in this cycle.
    pub committed: u64,
    /// The transaction in doubt was found committed.
    pub in_doubt_committed: bool,
    /// `Database::open` after the kill: recovery included.
    pub recovery: Duration,
    /// WAL records recovery replayed.
    pub replayed: u64,
    /// Rows in the table afterwards.
    pub rows: usize,
    /// Blocks whose checksum was verified after the clean close.
    pub blocks_checked: u64,
    /// Vacuums the child's autovacuum worker had finished at its last
    /// report (`AUTOVACUUM n` lines).
    pub autovacuums: u64,
    /// The transaction in doubt was a bulk load (into `t` or `e`) killed
    /// part-way or inside its commit.
    pub load_killed: bool,
    /// The next xid after recovery (how far the runs have gone through the
    /// commit log).
    pub next_xid: u64,
}

/// The parent's state across cycles on one data directory: the model of
/// every acknowledged transaction.
#[derive(Debug, Default)]
pub struct Soak {
    model: Model,
    /// Table `e`.
    e: Option<TableE>,
    /// The last `AUTOVACUUM n` of the child being read.
    autovacuums_seen: u64,
}

impl Soak {
    /// A workload with no operation run yet.
    pub fn new() -> Soak {
        Soak::default()
    }

    /// Rows the model holds now.
    pub fn rows(&self) -> usize {
        self.model.len()
    }

    /// After the child of `cycle` was killed having printed `lines`: open
    /// `dir` (recovery) and make the checks of the module docs.
    pub fn check_after_crash(
        &mut self,
        cycle: u64,
        dir: &Path,
        lines: &[String],
    ) -> Result<CycleReport, String> {
        let fail = |what: String| format!("cycle {cycle}: {what}");
        self.autovacuums_seen = 0;
        let (committed, in_doubt) = self.read_child_output(lines).map_err(fail)?;
        let load_killed = in_doubt.as_ref().is_some_and(|ops| {
            ops.iter()
                .any(|op| matches!(op, Op::Bulk(..) | Op::LoadE(..)))
        });
        let opened = Instant::now();
        // The checks want a quiet table (`verify_indexes`): no worker here.
        let db = Database::open(dir, options().autovacuum(false))
            .map_err(|e| fail(format!("recovery: {e}")))?;
        let recovery = opened.elapsed();
        let rs = db.recovery_stats();
        let r = self.check_database(&db, in_doubt.as_deref());
        let r = r.and_then(|in_doubt_committed| {
            db.close().map_err(|e| format!("close: {e}"))?;
            let blocks_checked = every_page_checksum_valid(dir)?;
            Ok(CycleReport {
                committed,
                in_doubt_committed,
                recovery,
                replayed: rs.commits + rs.aborts + rs.other,
                rows: self.model.len(),
                blocks_checked,
                autovacuums: self.autovacuums_seen,
                load_killed,
                next_xid: rs.next_xid,
            })
        });
        r.map_err(fail)
    }

    /// Apply every `OK` transaction to the model; return how many there
    /// were and the ops of the one in doubt.
    fn read_child_output(&mut self, lines: &[String]) -> Result<(u64, Option<Vec<Op>>), String> {
        let mut committed = 0;
        let mut pending: Option<(u64, Vec<Op>)> = None;
        let mut ready = false;
        for line in lines {
            let mut w = line.split_whitespace();
            match w.next() {
                Some("READY") => ready = true,
                Some("TXN") => {
                    if pending.is_some() {
                        return Err(format!("two transactions in doubt: {line}"));
                    }
                    let n: u64 = w
                        .next()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("bad line {line:?}"))?;
                    let ops = w.map(Op::parse).collect::<Result<Vec<_>, _>>()?;
                    pending = Some((n, ops));
                }
                Some("OK") => {
                    let n: u64 = w
                        .next()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("bad line {line:?}"))?;
                    let (p, ops) = pending.take().ok_or("OK without TXN")?;
                    if p != n {
                        return Err(format!("OK {n} after TXN {p}"));
                    }
                    for op in &ops {
                        op.apply(&mut self.model);
                        op.apply_e(&mut self.e);
                    }
                    committed += 1;
                }
                Some("AUTOVACUUM") => {
                    let n: u64 = w
                        .next()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("bad line {line:?}"))?;
                    let error: Vec<&str> = w.collect();
                    if !error.is_empty() {
                        return Err(format!(
                            "the child's autovacuum failed: {}",
                            error.join(" ")
                        ));
                    }
                    self.autovacuums_seen = n;
                }
                _ => {} // anything else the child's harness prints
            }
        }
        if !ready {
            return Err("the child never printed READY".into());
        }
        Ok((committed, pending.map(|(_, ops)| ops)))
    }

    /// Checks 1-3 on the recovered database; returns whether the
    /// transaction in doubt turned out committed.
    fn check_database(&mut self, db: &Database, in_doubt: Option<&[Op]>) -> Result<bool, String> {
        let got = scan_model(db)?;
        if got.keys().any(|&id| id >= UNCOMMITTED) {
            return Err("a row of the never-committed transaction is visible".into());
        }
        let got_e = scan_e(db)?;
        let mut in_doubt_committed = false;
        if got != self.model || got_e != self.e {
            let Some(ops) = in_doubt else {
                return Err(format!(
                    "t: {}; e: {} (no transaction in doubt)",
                    describe_difference(&got, &self.model),
                    describe_e(&got_e, &self.e)
                ));
            };
            let mut with_doubt = self.model.clone();
            let mut e_with_doubt = self.e.clone();
            for op in ops {
                op.apply(&mut with_doubt);
                op.apply_e(&mut e_with_doubt);
            }
            if got != with_doubt || got_e != e_with_doubt {
                return Err(format!(
                    "t: {}; e: {} (nor with the transaction in doubt {ops:?}: t: {}; e: {})",
                    describe_difference(&got, &self.model),
                    describe_e(&got_e, &self.e),
                    describe_difference(&got, &with_doubt),
                    describe_e(&got_e, &e_with_doubt)
                ));
            }
            self.model = with_doubt;
            self.e = e_with_doubt;
            in_doubt_committed = true;
        }
        let e = |e: crate::EngineError| e.to_string();
        // Through the indexes: every row by key, the unique index in key
        // order equals the scan, names by the non-unique index.
        let t = db.begin().map_err(e)?;
        for (&id, name) in self.model.iter().step_by(7) {
            let found = t.get_by_key("t", "id", &Value::I64(id)).map_err(e)?;
            match found {
                Some((_, row)) if row == row_of(id, name) => {}
                other => return Err(format!("id {id} by key: {other:?}")),
            }
        }
        let via_index = t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .map_err(e)?
            .map(|r| r.map(|(_, row)| row[0].as_i64()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(e)?;
        let want: Vec<Option<i64>> = self.model.keys().map(|&k| Some(k)).collect();
        if via_index != want {
            return Err(format!(
                "the unique index holds {} rows in key order, the scan {}",
                via_index.len(),
                want.len()
            ));
        }
        let n3 = self
            .model
            .values()
            .filter(|n| n.as_deref() == Some("n3"))
            .count();
        let found = t
            .index_lookup("t_name", &Value::from(b"n3".as_slice()))
            .map_err(e)?
            .len();
        if found != n3 {
            return Err(format!("t_name finds {found} rows named n3, expected {n3}"));
        }
        if let Some(te) = self.e.as_ref().filter(|te| te.indexed) {
            for (&id, name) in te.rows.iter().step_by(37) {
                match t.get_by_key("e", "id", &Value::I64(id)).map_err(e)? {
                    Some((_, row)) if row == row_of(id, name) => {}
                    other => return Err(format!("e: id {id} by key: {other:?}")),
                }
            }
        }
        drop(t);
        for table in db.tables() {
            let v = db.verify_indexes(&table.name).map_err(e)?;
            if !v.is_empty() {
                return Err(format!("verify_indexes({}): {v:?}", table.name));
            }
        }
        db.vacuum("t").map_err(e)?;
        let v = db.verify_indexes("t").map_err(e)?;
        if !v.is_empty() {
            return Err(format!("verify_indexes(t) after vacuum: {v:?}"));
        }
        let t = db.begin().map_err(e)?;
        let n = t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .map_err(e)?
            .count();
        if n != self.model.len() {
            return Err(format!(
                "after vacuum the unique index holds {n} rows, expected {}",
                self.model.len()
            ));
        }
        Ok(in_doubt_committed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_through_their_tokens() {
        for op in [
            Op::Insert(1, Some("n1".into())),
            Op::Insert(2, None),
            Op::Update(3, Some("x".into())),
            Op::Delete(4),
            Op::Bulk(5, 100, "bulk".into()),
            Op::CreateE,
            Op::IndexE,
            Op::LoadE(6, 700),
            Op::DropE,
        ] {
            assert_eq!(Op::parse(&op.token()), Ok(op));
        }
        assert!(Op::parse("Q:1").is_err());
        assert!(Op::parse("I:x:n").is_err());
        assert!(Op::parse("B:1").is_err());
    }

    #[test]
    fn output_without_ready_or_with_a_stray_ok_is_an_error() {
        let mut s = Soak::new();
        assert!(s.read_child_output(&["TXN 1 D:1".into()]).is_err());
        let lines = ["READY".to_string(), "OK 1".into()];
        assert!(s.read_child_output(&lines).is_err());
        let lines = [
            "READY".to_string(),
            "TXN 1 I:7:n1".into(),
            "OK 1".into(),
            "TXN 2 D:7".into(),
        ];
        let (n, doubt) = s.read_child_output(&lines).unwrap();
        assert_eq!(n, 1);
        assert_eq!(doubt, Some(vec![Op::Delete(7)]));
        assert_eq!(s.rows(), 1);
    }
}
