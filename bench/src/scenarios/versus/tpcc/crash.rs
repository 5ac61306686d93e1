//! The crash-recovery check: a child process (this program again, told by
//! environment variables) opens a copy of the data set, prints `READY`,
//! and runs the terminals until it is killed with SIGKILL
//! (`engine::soak::run_and_kill`, as `crash-soak` does); the parent then
//! opens the directory (recovery replays the WAL) and checks consistency
//! conditions 1-4 on what survived, and that New-Orders did commit before
//! the kill (the order ids moved). The child prints `NEW-ORDER w d o` once
//! each New-Order's commit has returned; every order so acknowledged must
//! be found after recovery (the conditions alone cannot see an order lost
//! whole, as all its rows go together).

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{Database, Options};

use super::backend::Backend;
use super::checks::CheckReport;
use super::driver::{Limit, drive};
use super::engine_side::{EngineBackend, NewOrderAck};
use super::schema::{DISTRICT, ORDERS};
use super::spec::Scale;
use crate::error::{BenchError, Result};

pub const CHILD_DIR: &str = "BENCH_TPCC_CHILD_DIR";
const CHILD_SCALE: &str = "BENCH_TPCC_CHILD_SCALE";
const CHILD_THREADS: &str = "BENCH_TPCC_CHILD_THREADS";
const CHILD_POOL: &str = "BENCH_TPCC_CHILD_POOL";
const CHILD_SEED: &str = "BENCH_TPCC_CHILD_SEED";
/// A child that is never killed stops by itself after this long.
const CHILD_DEADLINE: Duration = Duration::from_secs(600);

/// What the crash-recovery check found.
#[derive(Clone, Debug)]
pub struct CrashReport {
    /// Lines the child printed (`READY` first).
    pub child_lines: usize,
    /// Sum of D_NEXT_O_ID over every district before and after: New-Orders
    /// committed by the child and kept through recovery.
    pub orders_before: i64,
    pub orders_after: i64,
    /// New-Orders the child acknowledged as committed before the kill.
    pub acknowledged: usize,
    /// Those of them recovery lost, described (empty when none was).
    pub lost: Vec<String>,
    /// `Database::open` after the kill, recovery included.
    pub recovery: Duration,
    pub check: CheckReport,
}

fn scale_env(scale: &Scale) -> String {
    format!(
        "{},{},{},{},{},{}",
        scale.warehouses,
        scale.items,
        scale.districts,
        scale.customers,
        scale.new_orders,
        scale.last_names
    )
}

fn parse_scale(s: &str) -> Option<Scale> {
    let v: Vec<u32> = s
        .split(',')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [
        warehouses,
        items,
        districts,
        customers,
        new_orders,
        last_names,
    ] = v[..]
    else {
        return None;
    };
    Scale {
        warehouses,
        items,
        districts,
        customers,
        new_orders,
        last_names,
    }
    .validated()
    .ok()
}

/// The options the child and the recovering parent open the copy with
/// (the data set's checksum setting, `pool` buffers).
pub fn options(pool: usize) -> Options {
    super::build_options()
        .pool_buffers(pool)
        .transaction_attempts(super::engine_side::TERMINAL_ATTEMPTS)
}

/// If this process was started as the crash check's child, run its
/// terminals (until it is killed) and return `true`. A child that fails
/// prints the error on stderr and exits with status 2.
pub fn run_child_if_asked() -> bool {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return false;
    };
    if let Err(e) = child(Path::new(&dir)) {
        eprintln!("tpcc crash child: {e}");
        std::process::exit(2);
    }
    true
}

fn env_num<T: std::str::FromStr>(name: &str) -> Result<T> {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| BenchError::Config(format!("{name} is missing or not a number")))
}

fn child(dir: &Path) -> Result<()> {
    let scale = std::env::var(CHILD_SCALE)
        .ok()
        .and_then(|s| parse_scale(&s))
        .ok_or_else(|| BenchError::Config(format!("{CHILD_SCALE} is missing or invalid")))?;
    let threads: usize = env_num(CHILD_THREADS)?;
    let pool: usize = env_num(CHILD_POOL)?;
    let seed: u64 = env_num(CHILD_SEED)?;
    let db = Database::open(dir, options(pool))?;
    let ack = NewOrderAck(Arc::new(|w, d, o| {
        // A line only once the commit returned; a failed write means the
        // parent is gone, and the kill follows.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{ACK_PREFIX}{w} {d} {o}");
        let _ = out.flush();
    }));
    let backend = EngineBackend::new(db).with_new_order_ack(ack);
    println!("READY");
    drive(
        &backend,
        &scale,
        threads,
        Limit::Duration(CHILD_DEADLINE),
        seed,
    )?;
    Ok(())
}

/// How the child acknowledges a committed New-Order: `NEW-ORDER w d o`.
pub const ACK_PREFIX: &str = "NEW-ORDER ";

/// The `(warehouse, district, order id)` of an acknowledgement line, `None`
/// for any other line (a line cut short by the kill included).
pub fn parse_ack(line: &str) -> Option<(u32, u32, i64)> {
    let mut v = line.strip_prefix(ACK_PREFIX)?.split(' ');
    let w = v.next()?.parse().ok()?;
    let d = v.next()?.parse().ok()?;
    let o = v.next()?.parse().ok()?;
    v.next().is_none().then_some((w, d, o))
}

/// Each acknowledged New-Order `acks` names that `db` does not hold: its
/// ORDERS row is missing, or its district's D_NEXT_O_ID does not pass it.
pub fn lost_new_orders(db: &Database, acks: &[(u32, u32, i64)]) -> Result<Vec<String>> {
    let txn = db.read()?;
    let mut lost = Vec::new();
    for &(w, d, o) in acks {
        let (wi, di) = (i64::from(w), i64::from(d));
        let next = match txn.get_by_primary_key(DISTRICT, (wi, di))? {
            Some((_, row)) => Some(row.i64("d_next_o_id")?),
            None => None,
        };
        let found = txn.get_by_primary_key(ORDERS, (wi, di, o))?.is_some();
        if !found || next.is_none_or(|n| n <= o) {
            lost.push(format!(
                "order ({w}, {d}, {o}): row {}, D_NEXT_O_ID {}",
                if found { "present" } else { "missing" },
                next.map_or_else(|| "missing".into(), |n| n.to_string())
            ));
        }
    }
    txn.commit()?;
    Ok(lost)
}

fn next_order_ids(db: &Database, scale: &Scale) -> Result<i64> {
    let state = EngineBackend::new(db.clone()).consistency_state(scale)?;
    Ok(state
        .iter()
        .flat_map(|w| &w.districts)
        .map(|d| d.next_order_id)
        .sum())
}

/// Run `exe` as the child on the loaded database in `dir` for `run`, kill
/// it, recover and check. The directory is changed (it is the copy).
pub fn crash_and_check(
    exe: &Path,
    dir: &Path,
    scale: &Scale,
    threads: usize,
    pool: usize,
    run: Duration,
    seed: u64,
) -> Result<CrashReport> {
    let orders_before = {
        let db = Database::open(dir, options(pool))?;
        let n = next_order_ids(&db, scale)?;
        db.close()?;
        n
    };
    let mut child = Command::new(exe);
    child
        .env(CHILD_DIR, dir)
        .env(CHILD_SCALE, scale_env(scale))
        .env(CHILD_THREADS, threads.to_string())
        .env(CHILD_POOL, pool.to_string())
        .env(CHILD_SEED, seed.to_string());
    let lines = engine::soak::run_and_kill(child, run)
        .map_err(|e| BenchError::Data(format!("tpcc crash check: {e}")))?;
    let started = Instant::now();
    let db = Database::open(dir, options(pool))?;
    let recovery = started.elapsed();
    let check = EngineBackend::new(db.clone()).check(scale)?;
    let orders_after = next_order_ids(&db, scale)?;
    let acks: Vec<_> = lines.iter().filter_map(|l| parse_ack(l)).collect();
    let lost = lost_new_orders(&db, &acks)?;
    db.close()?;
    Ok(CrashReport {
        child_lines: lines.len(),
        orders_before,
        orders_after,
        acknowledged: acks.len(),
        lost,
        recovery,
        check,
    })
}
