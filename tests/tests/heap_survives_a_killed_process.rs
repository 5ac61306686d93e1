//! Crash: a real child process inserts, updates and deletes rows of a
//! logged heap and is killed with SIGKILL at a random moment; the parent
//! recovers the directory and checks that every committed change is there,
//! nothing uncommitted is visible, and every page on disk has a valid
//! checksum. Three kill/recover cycles on the same directory; each child
//! recovers first and continues from the recovered state.
//!
//! # The re-exec trick
//! The parent test spawns this test binary itself
//! (`std::env::current_exe()`) with `--exact crash_child_workload
//! --nocapture --ignored` and the data directory in [`DIR_ENV`]. The child
//! test is `#[ignore]`d, so it never runs on its own (and does nothing
//! without the variable).
//!
//! # What the child does
//! Opens WAL + pool (16 buffers, checksums on, so pages are evicted and
//! written all the time) + transaction manager through the shared
//! [`tests::open_and_recover`], opens the heap (relation `FIRST_USER_REL`,
//! logged), reads the rows it finds, prints `READY`, then loops:
//! begin; insert new rows, update and delete some committed ones; print the
//! transaction's changes (`INTENT`), commit (synchronous), print `COMMIT`
//! once `commit` has returned. Now and then a transaction is left open
//! (`OPEN`, its changes must never become visible; some are later aborted,
//! `ABORT`), a checkpoint is taken (`tm.checkpoint()`), or the child scans
//! the heap (setting hint bits: with checksums on the pool logs full-page
//! images for them, which the next recovery replays) and checks it against
//! its own idea of the rows.
//!
//! Rows are `(key u64, value u64, filler)` where the filler is derived from
//! key and value, so a torn or mixed-up row is detected.
//!
//! # What the parent checks after each kill
//! The parent holds a model of the committed rows (from the `COMMIT` lines
//! of every cycle). After recovery, through the same helper:
//! - every xid with a `COMMIT` line reads committed; the one transaction
//!   whose `INTENT` was printed but whose `COMMIT` was not (the kill came
//!   during or right after its commit) is in doubt: it must read committed
//!   (its changes then join the model) or aborted;
//! - every transaction left open reads aborted;
//! - either of the last two may instead read "in progress" only if none of
//!   its records reached the WAL: then its xid is at or past the recovered
//!   next xid (it will be handed out again, as PostgreSQL reuses xids that
//!   never reached the WAL);
//! - a scan under a fresh snapshot returns exactly the model: every
//!   committed row with its committed value, deleted rows gone, no row of an
//!   uncommitted transaction, every row intact, no key twice;
//! - after `flush_all(true)`, every block of every relation file reads
//!   through a brand-new pool with its checksum valid.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use engine::{FIRST_USER_REL, TransactionManager};
use heap::{Heap, HintMode, RingChoice, ScanOptions, Tid, TransactionStatus, XidStatus};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// The data directory, for the child.
const DIR_ENV: &str = "HEAP_CRASH_TEST_DIR";
/// The child's random seed.
const SEED_ENV: &str = "HEAP_CRASH_TEST_SEED";
/// The name of the child test, for `--exact`.
const CHILD_TEST: &str = "crash_child_workload";
/// Every line the child means for the parent starts with this (libtest
/// prints its own lines on the same stdout).
const TAG: &str = "@@";

/// Kill/recover cycles (`HEAP_CRASH_TEST_CYCLES` overrides, for stress runs).
const CYCLES: usize = 3;
const CYCLES_ENV: &str = "HEAP_CRASH_TEST_CYCLES";
/// Buffers of every pool: small, so pages are evicted and written.
const POOL_BUFFERS: usize = 16;
/// Bytes of a row: key, value, filler. About 38 rows per page.
const ROW_LEN: usize = 200;
/// The signal `Child::kill` sends.
const SIGKILL: i32 = 9;
/// The child stops by itself after this long (in case the parent is gone).
const CHILD_LIFETIME: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

fn filler_byte(key: u64, value: u64, i: usize) -> u8 {
    (key.wrapping_mul(0x9E37_79B9) ^ value.wrapping_mul(31) ^ (i as u64).wrapping_mul(7))
        .to_le_bytes()[0]
}

fn row(key: u64, value: u64) -> Vec<u8> {
    let mut r = Vec::with_capacity(ROW_LEN);
    r.extend_from_slice(&key.to_le_bytes());
    r.extend_from_slice(&value.to_le_bytes());
    for i in 16..ROW_LEN {
        r.push(filler_byte(key, value, i));
    }
    r
}

/// `(key, value)` of a row, or what is wrong with it.
fn parse_row(r: &[u8]) -> Result<(u64, u64), String> {
    if r.len() != ROW_LEN {
        return Err(format!("row of {} bytes, expected {ROW_LEN}", r.len()));
    }
    let key = u64::from_le_bytes(r[..8].try_into().unwrap());
    let value = u64::from_le_bytes(r[8..16].try_into().unwrap());
    if let Some(i) = (16..ROW_LEN).find(|&i| r[i] != filler_byte(key, value, i)) {
        return Err(format!(
            "row of key {key} value {value}: filler byte {i} is damaged"
        ));
    }
    Ok((key, value))
}

/// Every visible row: key -> (tid, value). Panics on a damaged row or a key
/// seen twice.
fn scan_rows(heap: &Heap, tm: &TransactionManager) -> Rows {
    let snap = tm.snapshot();
    let opts = ScanOptions {
        ring: RingChoice::Never,
        hint_mode: HintMode::PerPage,
    };
    let mut rows = BTreeMap::new();
    heap.scan_with(&snap, tm, opts, |tid, r| {
        let (key, value) = parse_row(r).unwrap_or_else(|e| panic!("{tid:?}: {e}"));
        if let Some((other, _)) = rows.insert(key, (tid, value)) {
            panic!("key {key} visible twice: at {other:?} and {tid:?}");
        }
    })
    .expect("scan the heap");
    rows
}

// ---------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------

/// One change, as printed: `+k=v` insert, `~k=v` update, `-k` delete.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Insert(u64, u64),
    Update(u64, u64),
    Delete(u64),
}

impl Op {
    fn text(&self) -> String {
        match self {
            Op::Insert(k, v) => format!("+{k}={v}"),
            Op::Update(k, v) => format!("~{k}={v}"),
            Op::Delete(k) => format!("-{k}"),
        }
    }

    fn parse(s: &str) -> Op {
        let kv = |t: &str| {
            let (k, v) = t.split_once('=').expect("k=v");
            (k.parse().expect("key"), v.parse().expect("value"))
        };
        match s.as_bytes()[0] {
            b'+' => {
                let (k, v) = kv(&s[1..]);
                Op::Insert(k, v)
            }
            b'~' => {
                let (k, v) = kv(&s[1..]);
                Op::Update(k, v)
            }
            b'-' => Op::Delete(s[1..].parse().expect("key")),
            _ => panic!("bad op {s:?}"),
        }
    }
}

/// Print one line for the parent and push it out at once (one `write` of
/// less than `PIPE_BUF` bytes, so a kill never leaves half a line).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{TAG} {line}\n").as_bytes())
        .and_then(|()| out.flush())
        .expect("write to the parent");
}

fn ops_text(ops: &[Op]) -> String {
    ops.iter().map(Op::text).collect::<Vec<_>>().join(" ")
}

/// Rows as the child knows them: key -> (TID of the committed version, value).
type Rows = BTreeMap<u64, (Tid, u64)>;

/// One transaction's changes: as printed, and each touched key's row
/// afterwards (`None`: deleted).
struct Changes {
    ops: Vec<Op>,
    after: HashMap<u64, Option<(Tid, u64)>>,
}

/// The child's working state.
struct Worker<'a> {
    heap: &'a Heap,
    tm: &'a TransactionManager,
    /// The committed rows.
    live: Rows,
    next_key: u64,
    rng: SmallRng,
}

impl Worker<'_> {
    /// Make one transaction's changes: 1-8 inserts of new keys, up to 4
    /// updates and (once there are enough rows) 2 deletes of committed rows,
    /// never of a `locked` key (one an open transaction changed).
    fn changes(&mut self, xid: u64, snap: &heap::Snapshot, locked: &HashSet<u64>) -> Changes {
        let (heap, tm) = (self.heap, self.tm);
        let mut c = Changes {
            ops: Vec::new(),
            after: HashMap::new(),
        };
        for _ in 0..self.rng.random_range(1..=8) {
            let (k, v) = (self.next_key, self.rng.random_range(0..1_000_000u64));
            self.next_key += 1;
            let tid = heap.insert(xid, &row(k, v)).expect("insert");
            c.after.insert(k, Some((tid, v)));
            c.ops.push(Op::Insert(k, v));
        }
        let candidates: Vec<u64> = self
            .live
            .keys()
            .copied()
            .filter(|k| !locked.contains(k))
            .collect();
        let updates = self.rng.random_range(0..=4usize);
        let deletes = if self.live.len() > 60 {
            self.rng.random_range(0..=2usize)
        } else {
            0
        };
        for i in 0..(updates + deletes).min(candidates.len()) {
            let k = candidates[self.rng.random_range(0..candidates.len())];
            if c.after.contains_key(&k) {
                continue;
            }
            let (tid, _) = self.live[&k];
            if i < updates {
                let v = self.rng.random_range(0..1_000_000u64);
                let new = heap
                    .update(xid, snap, tm, tid, &row(k, v))
                    .unwrap_or_else(|e| panic!("update key {k} at {tid:?}: {e}"));
                c.after.insert(k, Some((new, v)));
                c.ops.push(Op::Update(k, v));
            } else {
                heap.delete(xid, snap, tm, tid)
                    .unwrap_or_else(|e| panic!("delete key {k} at {tid:?}: {e}"));
                c.after.insert(k, None);
                c.ops.push(Op::Delete(k));
            }
        }
        c
    }

    /// A committed transaction's changes become the rows.
    fn committed(&mut self, c: Changes) {
        for (k, after) in c.after {
            match after {
                Some(r) => self.live.insert(k, r),
                None => self.live.remove(&k),
            };
        }
    }
}

/// The child process: run only by [`heap_survives_a_killed_process`].
#[test]
#[ignore = "the child of heap_survives_a_killed_process, which runs it in its own process"]
fn crash_child_workload() {
    let Some(dir) = std::env::var_os(DIR_ENV) else {
        eprintln!("{CHILD_TEST}: {DIR_ENV} is not set; nothing to do");
        return;
    };
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let started = Instant::now();
    let eng = tests::open_and_recover(Path::new(&dir), POOL_BUFFERS);
    let tm = &*eng.tm;
    let heap = Heap::open(
        eng.pool.clone(),
        Some(eng.wal.clone()),
        FIRST_USER_REL,
        true,
    )
    .expect("open the heap");
    let live = scan_rows(&heap, tm);
    let mut w = Worker {
        heap: &heap,
        tm,
        next_key: live.keys().next_back().map_or(1, |k| k + 1),
        live,
        rng: SmallRng::seed_from_u64(seed),
    };
    say(&format!("READY {} rows", w.live.len()));

    // Transactions left open, with the committed keys they changed.
    let mut open = Vec::new();
    let mut n = 0u64;
    while started.elapsed() < CHILD_LIFETIME {
        n += 1;
        let locked: HashSet<u64> = open
            .iter()
            .flat_map(|(_, k): &(_, HashSet<u64>)| k.iter().copied())
            .collect();
        let txn = tm.begin().expect("begin");
        let xid = txn.xid();
        let c = w.changes(xid, &txn.snapshot(), &locked);
        if n % 9 == 4 {
            // Leave it open: none of this may ever become visible.
            say(&format!("OPEN {xid} {}", ops_text(&c.ops)));
            let keys = c
                .after
                .keys()
                .filter(|k| w.live.contains_key(k))
                .copied()
                .collect();
            open.push((txn, keys));
            if open.len() > 2 || w.rng.random_range(0..3) == 0 {
                let (t, _) = open.remove(0);
                let x = t.xid();
                t.abort().expect("abort");
                say(&format!("ABORT {x}"));
            }
        } else {
            say(&format!("INTENT {xid} {}", ops_text(&c.ops)));
            txn.commit().expect("commit");
            say(&format!("COMMIT {xid}"));
            w.committed(c);
        }
        if n.is_multiple_of(23) {
            tm.checkpoint().expect("checkpoint");
            say("CHECKPOINT");
        }
        if n.is_multiple_of(7) {
            // Set hints (full-page images after a checkpoint) and check.
            let seen = scan_rows(&heap, tm);
            let values =
                |r: &Rows| -> BTreeMap<u64, u64> { r.iter().map(|(k, (_, v))| (*k, *v)).collect() };
            assert_eq!(
                values(&seen),
                values(&w.live),
                "the child's own scan disagrees with its rows"
            );
        }
    }
    say("TIMEOUT");
}

// ---------------------------------------------------------------------------
// The parent
// ---------------------------------------------------------------------------

/// The child, killed when dropped (a failing parent leaves no process behind).
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A line the child printed.
#[derive(Debug)]
enum Event {
    Ready,
    Intent(u64, Vec<Op>),
    Commit(u64),
    Open(u64, Vec<Op>),
    Abort(u64),
    Checkpoint,
    Timeout,
}

/// The part of a line after [`TAG`] (libtest may print its own text on
/// the same stdout, even at the start of a line of ours).
fn tagged(line: &str) -> Option<&str> {
    line.find(TAG).map(|i| line[i + TAG.len()..].trim())
}

fn parse_event(line: &str) -> Option<Event> {
    let rest = tagged(line)?;
    let mut words = rest.split_whitespace();
    let what = words.next()?;
    let mut xid = || -> u64 { words.next().expect("xid").parse().expect("xid") };
    Some(match what {
        "READY" => Event::Ready,
        "CHECKPOINT" => Event::Checkpoint,
        "TIMEOUT" => Event::Timeout,
        "COMMIT" => Event::Commit(xid()),
        "ABORT" => Event::Abort(xid()),
        "INTENT" | "OPEN" => {
            let x = xid();
            let ops = words.map(Op::parse).collect();
            if what == "INTENT" {
                Event::Intent(x, ops)
            } else {
                Event::Open(x, ops)
            }
        }
        other => panic!("unknown line from the child: {other:?}"),
    })
}

fn apply(model: &mut BTreeMap<u64, u64>, ops: &[Op]) {
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                assert!(model.insert(k, v).is_none(), "key {k} inserted twice");
            }
            Op::Update(k, v) => {
                assert!(model.insert(k, v).is_some(), "key {k} updated but absent");
            }
            Op::Delete(k) => {
                assert!(model.remove(&k).is_some(), "key {k} deleted but absent");
            }
        }
    }
}

/// What one cycle's child did, from its lines.
#[derive(Debug, Default)]
struct CycleLog {
    /// Transactions whose commit returned, in order, with their changes.
    committed: Vec<(u64, Vec<Op>)>,
    /// The transaction whose commit had started when the kill came.
    in_doubt: Option<(u64, Vec<Op>)>,
    /// Transactions left open (aborted later or still running at the
    /// kill), with their changes.
    open: Vec<(u64, Vec<Op>)>,
    /// Of those, the ones aborted before the kill.
    aborted: Vec<u64>,
    checkpoints: usize,
}

fn read_log(lines: &[String]) -> CycleLog {
    let mut log = CycleLog::default();
    let mut pending: Option<(u64, Vec<Op>)> = None;
    for line in lines {
        let Some(e) = parse_event(line) else {
            continue; // libtest's own output
        };
        match e {
            Event::Ready => {}
            Event::Timeout => panic!("the child ran out of time before it was killed"),
            Event::Intent(x, ops) => {
                assert!(
                    pending.is_none(),
                    "two commits in flight: {pending:?} and {x}"
                );
                pending = Some((x, ops));
            }
            Event::Commit(x) => {
                let (px, ops) = pending.take().expect("COMMIT without INTENT");
                assert_eq!(px, x);
                log.committed.push((x, ops));
            }
            Event::Open(x, ops) => log.open.push((x, ops)),
            Event::Abort(x) => {
                assert!(
                    log.open.iter().any(|(o, _)| *o == x),
                    "ABORT of {x}, never OPEN"
                );
                log.aborted.push(x);
            }
            Event::Checkpoint => log.checkpoints += 1,
        }
    }
    log.in_doubt = pending;
    log
}

/// Run one child on `dir` until it is ready, let it work for 100-600 ms,
/// kill it with SIGKILL and return every line it printed.
fn run_and_kill(dir: &Path, seed: u64, rng: &mut SmallRng) -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary");
    let child = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--nocapture", "--ignored"])
        .env(DIR_ENV, dir)
        .env(SEED_ENV, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut child = ChildGuard(child);
    let stdout = child.0.stdout.take().expect("piped stdout");
    let mut stderr = child.0.stderr.take().expect("piped stderr");
    let (tx, rx) = channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut lines = Vec::new();
    // Wait for READY (recovery in a debug build takes a moment).
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        match recv_until(&rx, ready_by) {
            Some(l) => {
                let ready = tagged(&l).is_some_and(|t| t.starts_with("READY"));
                lines.push(l);
                if ready {
                    break;
                }
            }
            None => {
                drop(child);
                let err = err_reader.join().unwrap_or_default();
                panic!(
                    "the child never became ready; its output:\n{}\n{err}",
                    lines.join("\n")
                );
            }
        }
    }
    let work = Duration::from_millis(rng.random_range(100..=600));
    let kill_at = Instant::now() + work;
    while let Some(l) = recv_until(&rx, kill_at) {
        lines.push(l);
    }
    if let Ok(Some(status)) = child.0.try_wait() {
        let err = err_reader.join().unwrap_or_default();
        panic!("the child exited by itself ({status}) before the kill:\n{err}");
    }
    child.0.kill().expect("kill the child");
    let status = child.0.wait().expect("wait for the child");
    reader.join().expect("stdout reader");
    lines.extend(rx.try_iter());
    let err = err_reader.join().unwrap_or_default();
    if status.signal() != Some(SIGKILL) {
        panic!("the child ended with {status}, not by SIGKILL; stderr:\n{err}");
    }
    lines
}

/// The next line, or `None` once `deadline` passes or the child's stdout ends.
fn recv_until(rx: &Receiver<String>, deadline: Instant) -> Option<String> {
    let left = deadline.saturating_duration_since(Instant::now());
    rx.recv_timeout(left).ok()
}

/// A transaction that never finished may read "in progress" after recovery
/// only if none of its records survived: then recovery never saw its xid,
/// the next xid is at or below it, and it will be handed out again (as
/// PostgreSQL reuses xids that never reached the WAL). Anything it wrote is
/// then gone too (WAL before data), which the scan checks.
fn assert_never_logged(tm: &TransactionManager, x: u64) {
    assert!(
        x >= tm.next_xid(),
        "xid {x} reads in progress after recovery although the next xid is {}",
        tm.next_xid()
    );
}

/// Recover `dir` in this process and check it against `model` and the
/// cycle's log; the in-doubt transaction's changes join `model` if it
/// committed. Returns a one-line summary and the number of full-page
/// records replayed.
fn recover_and_check(dir: &Path, model: &mut BTreeMap<u64, u64>, log: &CycleLog) -> (String, u64) {
    let eng = tests::open_and_recover(dir, POOL_BUFFERS);
    let tm = &*eng.tm;
    for (x, ops) in &log.committed {
        let s = tm.status(*x).unwrap();
        assert!(
            matches!(s, XidStatus::Committed { .. }),
            "xid {x} committed before the kill but reads {s:?} after recovery"
        );
        apply(model, ops);
    }
    let doubt = match &log.in_doubt {
        None => "none",
        Some((x, ops)) => match tm.status(*x).unwrap() {
            XidStatus::Committed { .. } => {
                apply(model, ops);
                "committed"
            }
            XidStatus::Aborted => "aborted",
            XidStatus::InProgress => {
                assert_never_logged(tm, *x);
                "lost"
            }
        },
    };
    for (x, _) in &log.open {
        match tm.status(*x).unwrap() {
            XidStatus::Aborted => {}
            XidStatus::InProgress => assert_never_logged(tm, *x),
            s @ XidStatus::Committed { .. } => panic!("xid {x} was never committed: {s:?}"),
        }
    }
    let heap = Heap::open(
        eng.pool.clone(),
        Some(eng.wal.clone()),
        FIRST_USER_REL,
        true,
    )
    .expect("open the heap");
    let seen: BTreeMap<u64, u64> = scan_rows(&heap, tm)
        .into_iter()
        .map(|(k, (_, v))| (k, v))
        .collect();
    for (x, ops) in &log.open {
        for op in ops {
            if let Op::Insert(k, v) = op {
                assert!(
                    !seen.contains_key(k),
                    "key {k} (value {v}) inserted by xid {x}, never committed, is visible"
                );
            }
        }
    }
    if seen != *model {
        let missing: Vec<_> = model
            .iter()
            .filter(|(k, v)| seen.get(k) != Some(v))
            .take(10)
            .collect();
        let extra: Vec<_> = seen
            .iter()
            .filter(|(k, v)| model.get(k) != Some(v))
            .take(10)
            .collect();
        panic!(
            "after recovery the heap holds {} rows, the committed model {}; \
             committed but missing or different: {missing:?}; visible but not committed so: {extra:?}",
            seen.len(),
            model.len()
        );
    }
    eng.pool.flush_all(true).expect("flush every page");
    let nblocks = heap.nblocks().expect("heap size");
    let summary = format!(
        "{} commits, in doubt: {doubt}, {} left open, {} aborted, {} checkpoints; \
         replayed {} records from {} ({} heap, {} full-page); {} rows in {nblocks} pages",
        log.committed.len(),
        log.open.len(),
        log.aborted.len(),
        log.checkpoints,
        eng.recovery.records,
        eng.recovery.start,
        eng.heap_records,
        eng.full_page_records,
        model.len(),
    );
    let full_pages = eng.full_page_records;
    drop(heap);
    drop(eng);
    (summary, full_pages)
}

#[test]
fn heap_survives_a_killed_process() {
    tests::with_timeout(120, || {
        let dir = tempfile::tempdir().expect("temporary directory");
        let seed: u64 = std::env::var(SEED_ENV)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(7, |d| d.as_nanos() as u64)
            });
        println!("seed {seed} (set {SEED_ENV} to repeat)");
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut model = BTreeMap::new();
        let mut full_pages = 0;
        let cycles = std::env::var(CYCLES_ENV)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(CYCLES);
        for cycle in 0..cycles {
            let lines = run_and_kill(dir.path(), seed.wrapping_add(cycle as u64), &mut rng);
            let log = read_log(&lines);
            assert!(
                !log.committed.is_empty(),
                "cycle {cycle}: the child committed nothing before the kill"
            );
            let (summary, fp) = recover_and_check(dir.path(), &mut model, &log);
            full_pages += fp;
            let checked = tests::verify_all_checksums(dir.path(), POOL_BUFFERS);
            let blocks: u32 = checked.iter().map(|(_, n)| n).sum();
            println!(
                "cycle {cycle}: {summary}; {blocks} blocks of {} files checksum-verified",
                checked.len()
            );
        }
        println!("{full_pages} full-page images for hint bits replayed in all");
    });
}
