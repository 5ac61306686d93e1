//! The bank of tests/common/bank.rs with a ledger: each transfer also
//! inserts its row (seq, from, to, amount) in the same transaction, so the
//! balances after any crash must be exactly the start plus the ledger's
//! transfers, and their total the constant.
//!
//! - Killed: a child process runs writers (some transactions roll back or
//!   are dropped), a vacuum and a checkpoint loop and autovacuum on a small
//!   pool, and appends each transfer's seq to a log file (fsynced) after its
//!   commit returns; it is SIGKILLed at a random moment, early ones during
//!   its open (recovery of the previous kill). Every third child commits
//!   three transfers in four asynchronously (a kill may take those). The
//!   reopened database holds every synchronously committed transfer logged,
//!   its balances are what its ledger says, every read path agrees, its
//!   indexes verify, every page's checksum holds.
//! - Powered off: the simulated disk of
//!   `power_loss_keeps_every_acknowledged_commit.rs` loses, keeps or tears
//!   each un-synced change at a crash point armed under concurrent writers,
//!   a vacuum and checkpoints; after each restart the same checks hold, and
//!   the ledger holds every acknowledged transfer and nothing but them and
//!   the ones whose commit failed when the power went.
//!
//! `BANK_KILLS` and `BANK_POWER_CASES` set the number of cycles;
//! `many_kills_and_power_losses` (ignored) is the longer run.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::bank::{self, Balances};
use common::{Rng, watchdog};
use engine::{CommitMode, Database, Options};
use wal::sim_disk::SimDisk;

const ACCOUNTS: i64 = 60;
/// Seqs of cycle `c` are `c * SEQS + n`.
const SEQS: i64 = 1_000_000;

fn options() -> Options {
    Options::new()
        .pool_buffers(24)
        .partitions(engine::Partitions::Count(1))
        .wal_segment_size(1 << 20)
        .autovacuum(true)
        .autovacuum_naptime(Duration::from_millis(20))
        .autovacuum_thresholds(10, 0.0)
        .transaction_attempts(100_000)
        .transaction_backoff(Duration::from_micros(50), Duration::from_millis(2))
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

type Ledger = BTreeMap<i64, (i64, i64, i64)>;

/// The audit of every read path, the ledger, its agreement with the
/// balances, and clean indexes.
fn check(db: &Database) -> Result<Ledger, String> {
    let t = db.read().map_err(|e| e.to_string())?;
    let balances: Balances = bank::audit(&t, ACCOUNTS)?;
    let ledger = bank::ledger(&t)?;
    t.commit().map_err(|e| e.to_string())?;
    let replayed = bank::replay(ACCOUNTS, &ledger);
    if replayed != balances {
        let diff: Vec<_> = replayed
            .iter()
            .filter(|(id, b)| balances.get(id) != Some(b))
            .take(5)
            .collect();
        return Err(format!(
            "balances differ from the ledger's {} transfers (id, by ledger): {diff:?}",
            ledger.len()
        ));
    }
    for table in [bank::TABLE, bank::LEDGER] {
        let v = db.verify_indexes(table).map_err(|e| e.to_string())?;
        if !v.is_empty() {
            return Err(format!("{table}: {v:?}"));
        }
    }
    Ok(ledger)
}

/// Transfers until the process is killed (or `BANK_CHILD_SECONDS` pass).
#[test]
#[ignore = "the child process of sigkilled_bank_keeps_every_acknowledged_transfer"]
fn bank_child() {
    let Ok(dir) = std::env::var("BANK_DIR") else {
        return;
    };
    let log_path = std::env::var("BANK_LOG").unwrap();
    let cycle = env_u64("BANK_CYCLE", 1) as i64;
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&log_path)
        .unwrap();
    let checkpoints = env_u64("BANK_CHECKPOINTS", 1) == 1;
    let asynchronous = env_u64("BANK_ASYNC", 0) == 1;
    let db = Database::open(Path::new(&dir), options().checkpointer(checkpoints)).unwrap();
    // Each line goes in one write: a kill between the writes of one
    // `writeln!` left a line without its end, which the next child's
    // first line then continued.
    log.write_all(b"open\n").unwrap();
    log.sync_data().unwrap();
    let log = Arc::new(Mutex::new(log));
    let next = Arc::new(AtomicI64::new(cycle * SEQS));
    for w in 0..3u64 {
        let (db, log, next) = (db.clone(), log.clone(), next.clone());
        thread::spawn(move || {
            let mut rng = Rng::new(cycle as u64 * 100 + w);
            loop {
                let x = bank::draw(&mut rng, ACCOUNTS);
                if rng.below(8) == 0 {
                    // Writes that never commit.
                    let t = db.begin().unwrap();
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = bank::transfer(&t, &x, Some(seq)) {
                        assert!(e.is_retryable(), "{e}");
                    }
                    if rng.below(2) == 0 {
                        t.rollback().unwrap();
                    }
                    continue;
                }
                if asynchronous && rng.below(4) != 0 {
                    // An asynchronous commit: noted, but a kill may take it.
                    let seq = loop {
                        let t = db.begin_with(CommitMode::Asynchronous).unwrap();
                        let seq = next.fetch_add(1, Ordering::Relaxed);
                        match bank::transfer(&t, &x, Some(seq)).and_then(|()| t.commit()) {
                            Ok(_) => break seq,
                            Err(e) if e.is_retryable() => {
                                thread::sleep(Duration::from_micros(100));
                            }
                            Err(e) => panic!("{e}"),
                        }
                    };
                    let line = format!("a {seq}\n");
                    log.lock().unwrap().write_all(line.as_bytes()).unwrap();
                    continue;
                }
                // Synchronous (the options' mode): acknowledged.
                let mut seq = 0;
                db.transaction(|t| {
                    seq = next.fetch_add(1, Ordering::Relaxed);
                    bank::transfer(t, &x, Some(seq))
                })
                .unwrap();
                let line = format!("{seq}\n");
                let mut log = log.lock().unwrap();
                log.write_all(line.as_bytes()).unwrap();
                log.sync_data().unwrap();
            }
        });
    }
    {
        let db = db.clone();
        thread::spawn(move || {
            loop {
                db.vacuum(bank::TABLE).unwrap();
                thread::sleep(Duration::from_millis(10));
            }
        });
    }
    if checkpoints {
        let db = db.clone();
        thread::spawn(move || {
            loop {
                db.checkpoint().unwrap();
                thread::sleep(Duration::from_millis(100));
            }
        });
    }
    thread::sleep(Duration::from_secs(env_u64("BANK_CHILD_SECONDS", 60)));
}

/// The seqs the log holds (whole lines), and how many opens it records.
fn read_log(path: &Path) -> (BTreeSet<i64>, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut seqs = BTreeSet::new();
    let mut opens = 0;
    let whole = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    for line in whole.lines() {
        if line == "open" {
            opens += 1;
        } else if line.starts_with("a ") {
            // Asynchronous: a kill may take it.
        } else {
            let seq = line.parse::<i64>();
            seqs.insert(seq.unwrap_or_else(|e| panic!("log line {line:?}: {e}")));
        }
    }
    (seqs, opens)
}

fn run_kills(cycles: u64, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("acknowledged");
    {
        let db = Database::open(dir.path(), options()).unwrap();
        bank::create(&db, ACCOUNTS, false, true);
        db.close().unwrap();
    }
    let mut rng = Rng::new(seed);
    let (mut during_open, mut ledger_len) = (0, 0);
    for cycle in 1..=cycles {
        let (_, opens_before) = read_log(&log);
        // An odd cycle runs long without checkpoints, so the next child
        // has much to replay; that one is often killed while it does.
        let long = cycle % 2 == 1;
        let delay = match rng.below(2) {
            0 if !long => rng.below(80),
            _ => 150 + rng.below(900),
        };
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "bank_child", "--ignored", "--nocapture"])
            .env("BANK_DIR", dir.path())
            .env("BANK_LOG", &log)
            .env("BANK_CYCLE", cycle.to_string())
            .env("BANK_CHECKPOINTS", if long { "0" } else { "1" })
            .env("BANK_ASYNC", if cycle % 3 == 0 { "1" } else { "0" })
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(delay));
        assert!(
            child.try_wait().unwrap().is_none(),
            "cycle {cycle}: the child ended by itself"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let (acked, opens) = read_log(&log);
        if opens == opens_before {
            during_open += 1;
        }
        // Every few cycles the check runs; otherwise the next child
        // recovers what this one left.
        if cycle % 2 == 1 && cycle != cycles {
            continue;
        }
        let db = Database::open(dir.path(), options())
            .unwrap_or_else(|e| panic!("cycle {cycle} (seed {seed}): reopen: {e}"));
        let ledger = check(&db).unwrap_or_else(|e| panic!("cycle {cycle} (seed {seed}): {e}"));
        let lost: Vec<_> = acked.iter().filter(|s| !ledger.contains_key(s)).collect();
        assert!(
            lost.is_empty(),
            "cycle {cycle} (seed {seed}): acknowledged transfers lost: {lost:?}"
        );
        ledger_len = ledger.len();
        db.close().unwrap();
        engine::soak::every_page_checksum_valid(dir.path())
            .unwrap_or_else(|e| panic!("cycle {cycle} (seed {seed}): {e}"));
    }
    let (acked, _) = read_log(&log);
    eprintln!(
        "{cycles} kills ({during_open} before the child had opened), {} acknowledged transfers, \
         {ledger_len} in the ledger",
        acked.len()
    );
    assert!(!acked.is_empty(), "nothing was acknowledged");
}

#[test]
fn sigkilled_bank_keeps_every_acknowledged_transfer() {
    let cycles = env_u64("BANK_KILLS", 6);
    let seed = env_u64("BANK_SEED", 0xBA4C);
    watchdog(Duration::from_secs(60 + cycles * 10), move || {
        run_kills(cycles, seed)
    });
}

/// The longer run of both crash tests: 100 kills, 1,000 power losses of
/// each commit mode.
#[test]
#[ignore = "long: a few minutes"]
fn many_kills_and_power_losses() {
    watchdog(Duration::from_secs(1200), || {
        run_kills(100, 0x10C4);
        run_power(1_000, 0x10C4, false);
        run_power(1_000, 0x10C4, true);
    });
}

fn power_options(disk: &SimDisk) -> Options {
    options()
        .pool_buffers(16)
        .autovacuum(false)
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .transaction_attempts(50)
        .simulated_disk(disk.clone())
}

/// What a writer of the power-loss test saw, in order.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// A synchronous commit of this seq is called.
    SyncCommitBegins(i64),
    /// The commit of this seq returned `Ok` (synchronous or not).
    Acked(i64, bool),
}

/// Writers, a vacuum and checkpoints until the power goes (at the armed
/// crash point, or cut here after `limit`). Returns the acknowledged seqs
/// and the seqs whose commit failed (in doubt).
fn until_power_loss(
    db: &Database,
    disk: &SimDisk,
    case: i64,
    seed: u64,
    limit: Duration,
    asynchronous: bool,
) -> (Vec<Event>, BTreeSet<i64>) {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let doubt = Arc::new(Mutex::new(BTreeSet::new()));
    let next = Arc::new(AtomicI64::new(case * SEQS));
    let off = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for w in 0..2 {
        let (db, acked, doubt, next, off) = (
            db.clone(),
            acked.clone(),
            doubt.clone(),
            next.clone(),
            off.clone(),
        );
        let (disk, stop) = (disk.clone(), off.clone());
        threads.push(thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let mut rng = Rng::new(seed ^ w);
                while !off.load(Ordering::Relaxed) {
                    let x = bank::draw(&mut rng, ACCOUNTS);
                    if rng.below(8) == 0 {
                        // Writes that roll back.
                        let Ok(t) = db.begin() else { break };
                        let seq = next.fetch_add(1, Ordering::Relaxed);
                        match bank::transfer(&t, &x, Some(seq)) {
                            Ok(()) => {}
                            Err(e) if e.is_retryable() => {}
                            Err(_) => break,
                        }
                        if t.rollback().is_err() {
                            break;
                        }
                        continue;
                    }
                    let mut seq;
                    let sync = !asynchronous || rng.below(4) == 0;
                    let mode = if sync {
                        CommitMode::Synchronous
                    } else {
                        CommitMode::Asynchronous
                    };
                    // The retry loop of `Database::transaction`, by hand: a
                    // synchronous commit notes when it began.
                    let committed = loop {
                        let Ok(t) = db.begin_with(mode) else {
                            break false;
                        };
                        seq = next.fetch_add(1, Ordering::Relaxed);
                        match bank::transfer(&t, &x, Some(seq)) {
                            Ok(()) => {}
                            Err(e) if e.is_retryable() => {
                                drop(t);
                                thread::sleep(Duration::from_micros(100));
                                continue;
                            }
                            Err(_) => break false,
                        }
                        if sync {
                            acked.lock().unwrap().push(Event::SyncCommitBegins(seq));
                        }
                        match t.commit() {
                            Ok(_) => {
                                acked.lock().unwrap().push(Event::Acked(seq, sync));
                                break true;
                            }
                            Err(_) => {
                                doubt.lock().unwrap().insert(seq);
                                break false;
                            }
                        }
                    };
                    if !committed {
                        break;
                    }
                }
                off.store(true, Ordering::Relaxed);
            }));
            // Once the power is off, reads see the disk as the loss left
            // it (pages written since the last sync undone: the simulation
            // keeps the process running, which a real power loss does
            // not), so a writer may miss an account then; it has not
            // committed. With the power on, a panic is a failure.
            stop.store(true, Ordering::Relaxed);
            if let Err(p) = r
                && !disk.is_powered_off()
            {
                std::panic::resume_unwind(p);
            }
        }));
    }
    {
        let (db, off) = (db.clone(), off.clone());
        threads.push(thread::spawn(move || {
            let mut i = 0u64;
            while !off.load(Ordering::Relaxed) {
                let done = if i % 4 == 3 {
                    db.checkpoint().map(drop)
                } else {
                    db.vacuum(bank::TABLE).map(drop)
                };
                if done.is_err() {
                    break;
                }
                i += 1;
                thread::sleep(Duration::from_millis(3));
            }
            off.store(true, Ordering::Relaxed);
        }));
    }
    let started = Instant::now();
    while !off.load(Ordering::Relaxed) && started.elapsed() < limit {
        thread::sleep(Duration::from_millis(2));
    }
    if !disk.is_powered_off() {
        disk.power_loss(seed).unwrap();
    }
    off.store(true, Ordering::Relaxed);
    for t in threads {
        if let Err(p) = t.join() {
            std::panic::resume_unwind(p);
        }
    }
    let acked = acked.lock().unwrap().clone();
    let doubt = doubt.lock().unwrap().clone();
    (acked, doubt)
}

fn run_power(cases: u64, seed: u64, asynchronous: bool) {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new();
    let mut db = Database::open(dir.path(), power_options(&disk)).unwrap();
    bank::create(&db, ACCOUNTS, false, true);
    let mut rng = Rng::new(seed);
    let mut all_acked = BTreeSet::new();
    let mut all_doubt = BTreeSet::new();
    let mut fates = [0u64; 3];
    for case in 1..=cases {
        let case_seed = rng.next_u64();
        disk.arm_crash_point(1 + rng.below(400), case_seed);
        let (events, mut doubt) = until_power_loss(
            &db,
            &disk,
            case as i64,
            case_seed,
            Duration::from_secs(1),
            asynchronous,
        );
        // Durable: every synchronous commit acknowledged, and every commit
        // acknowledged before one of those began (its commit record was
        // in the log ahead of that commit's, which flushed it). In doubt:
        // any other commit acknowledged, and those whose commit failed.
        let mut acked = BTreeSet::new();
        let mut last_flushed = None;
        for (i, e) in events.iter().enumerate() {
            if let Event::Acked(seq, true) = e {
                acked.insert(*seq);
                let began = events[..i]
                    .iter()
                    .position(|b| matches!(b, Event::SyncCommitBegins(s) if s == seq))
                    .expect("the commit began");
                last_flushed = last_flushed.max(Some(began));
            }
        }
        for (i, e) in events.iter().enumerate() {
            if let Event::Acked(seq, false) = e {
                if last_flushed.is_some_and(|f| i < f) {
                    acked.insert(*seq);
                } else {
                    doubt.insert(*seq);
                }
            }
        }
        let loss = disk.last_power_loss().expect("a power loss");
        fates[0] += loss.kept;
        fates[1] += loss.dropped;
        fates[2] += loss.torn;
        all_acked.extend(acked);
        all_doubt.extend(doubt);
        drop(db);
        disk.restart();
        db = Database::open(dir.path(), power_options(&disk))
            .unwrap_or_else(|e| panic!("case {case} (seed {case_seed:#x}): reopen: {e}"));
        let ledger = check(&db)
            .unwrap_or_else(|e| panic!("case {case} (seed {case_seed:#x}), {loss:?}: {e}"));
        let lost: Vec<_> = all_acked
            .iter()
            .filter(|s| !ledger.contains_key(s))
            .collect();
        assert!(
            lost.is_empty(),
            "case {case} (seed {case_seed:#x}), {loss:?}: acknowledged transfers lost: {lost:?}"
        );
        let extra: Vec<_> = ledger
            .keys()
            .filter(|s| !all_acked.contains(s) && !all_doubt.contains(s))
            .collect();
        assert!(
            extra.is_empty(),
            "case {case} (seed {case_seed:#x}), {loss:?}: transfers never acknowledged nor in doubt: {extra:?}"
        );
        // What recovered stands from now on; the rest in doubt never will.
        all_doubt.retain(|s| ledger.contains_key(s));
        all_acked.extend(all_doubt.iter().copied());
        all_doubt.clear();
    }
    db.close().unwrap();
    eprintln!(
        "{cases} power losses, {} transfers in the end; un-synced changes kept {}, dropped {}, torn {}",
        all_acked.len(),
        fates[0],
        fates[1],
        fates[2]
    );
    assert!(fates[1] + fates[2] > 0, "the power losses lost something");
}

#[test]
fn powered_off_bank_keeps_every_acknowledged_transfer() {
    let cases = env_u64("BANK_POWER_CASES", 12);
    let seed = env_u64("BANK_SEED", 0xBA4C);
    watchdog(Duration::from_secs(60 + cases * 5), move || {
        run_power(cases, seed, false)
    });
}

/// Most commits asynchronous, one in four synchronous: what a power loss
/// may take is only what no synchronous commit had flushed.
#[test]
fn powered_off_bank_of_asynchronous_commits_keeps_every_flushed_transfer() {
    let cases = env_u64("BANK_POWER_CASES", 12);
    let seed = env_u64("BANK_SEED", 0xBA4C);
    watchdog(Duration::from_secs(60 + cases * 5), move || {
        run_power(cases, seed, true)
    });
}

/// Online backups taken while writers transfer (on a pool of 16 buffers,
/// vacuum and autovacuum running): each copy opens and recovers to a bank
/// whose balances are its ledger's, with every transfer acknowledged
/// before its backup began.
#[test]
fn online_backups_during_transfers_and_vacuums_are_consistent_banks() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let backups = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), options().pool_buffers(16)).unwrap();
        bank::create(&db, ACCOUNTS, false, true);
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let next = Arc::new(AtomicI64::new(SEQS));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for w in 0..3u64 {
            let (db, acked, next, stop) = (db.clone(), acked.clone(), next.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                let mut rng = Rng::new(w + 11);
                while !stop.load(Ordering::Relaxed) {
                    let x = bank::draw(&mut rng, ACCOUNTS);
                    let mut seq = 0;
                    db.transaction(|t| {
                        seq = next.fetch_add(1, Ordering::Relaxed);
                        bank::transfer(t, &x, Some(seq))
                    })
                    .unwrap();
                    acked.lock().unwrap().insert(seq);
                }
            }));
        }
        {
            let (db, stop) = (db.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    db.vacuum(bank::TABLE).unwrap();
                    thread::sleep(Duration::from_millis(5));
                }
            }));
        }
        let mut copies = Vec::new();
        for i in 0..3 {
            thread::sleep(Duration::from_millis(200));
            let before = acked.lock().unwrap().clone();
            let target = backups.path().join(format!("copy{i}"));
            db.backup_to(&target, |_| {}).unwrap();
            copies.push((target, before));
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        db.close().unwrap();
        for (i, (target, before)) in copies.iter().enumerate() {
            let copy =
                Database::open(target, options()).unwrap_or_else(|e| panic!("copy {i}: open: {e}"));
            let ledger = check(&copy).unwrap_or_else(|e| panic!("copy {i}: {e}"));
            let lost: Vec<_> = before.iter().filter(|s| !ledger.contains_key(s)).collect();
            assert!(lost.is_empty(), "copy {i}: transfers missing: {lost:?}");
            assert!(!before.is_empty(), "copy {i}: nothing committed before it");
            copy.close().unwrap();
        }
    });
}
