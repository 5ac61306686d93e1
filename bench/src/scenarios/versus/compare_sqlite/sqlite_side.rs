//! SQLite's side of `compare-sqlite` (rusqlite with its bundled SQLite;
//! built with `--features sqlite` only): the same workloads as
//! [`engine_side`](super::engine_side), one function each.
//!
//! Settings of every connection ([`open`]): `journal_mode = WAL`,
//! `synchronous = FULL` (in WAL mode, FULL syncs the WAL at every commit,
//! as the engine's default synchronous commit does `fdatasync` of its WAL;
//! NORMAL would sync only at checkpoints, which is the engine's
//! asynchronous commit), `cache_size` given per connection (large enough
//! for the whole file, except in the zipf workload), `mmap_size` 0 (the
//! default: pages are read with `pread`, as the engine's pool reads them).
//! Statements are prepared once per call and reused; BEGIN and COMMIT are
//! prepared statements too.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::Instant;

use rusqlite::{Connection, OpenFlags, Statement};

use super::{Accounts, LOAD_ROW_EVERY, SQLITE_LOAD_ROW, Tally};
use crate::error::{BenchError, Result};
use crate::latency::Latencies;

/// The settings [`open`] applies, for the report.
pub const SETTINGS: &str = "journal_mode=WAL, synchronous=FULL (WAL synced at every commit, \
                            like the engine's default commit), prepared statements, mmap off, \
                            one connection per thread";

pub const LOOKUP_SQL: &str = "SELECT aid, k, abalance, filler FROM accounts WHERE k = ?1";
pub const SCAN_COUNT_SQL: &str = "SELECT count(*) FROM accounts NOT INDEXED WHERE abalance = -1";
pub const SCAN_SUM_SQL: &str = "SELECT sum(k) FROM accounts NOT INDEXED";
const ZIPF_SQL: [&str; 3] = [
    "SELECT id, k1, k2, k3, filler FROM t WHERE k1 = ?1",
    "SELECT id, k1, k2, k3, filler FROM t WHERE k2 = ?1",
    "SELECT id, k1, k2, k3, filler FROM t WHERE k3 = ?1",
];

/// The bundled SQLite's version.
pub fn version() -> String {
    rusqlite::version().to_string()
}

/// A connection with the settings above and a page cache of `cache_kib`.
pub fn open(path: &Path, cache_kib: i64) -> Result<Connection> {
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let mode: String = c.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(BenchError::Sqlite(format!(
            "{}: journal_mode WAL refused ({mode})",
            path.display()
        )));
    }
    c.execute_batch(&format!(
        "PRAGMA synchronous = FULL; PRAGMA cache_size = -{cache_kib}; PRAGMA busy_timeout = 10000;"
    ))?;
    Ok(c)
}

/// Remove a database file and its WAL and shared-memory files.
pub fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// Read every page of the accounts table and of its index into this
/// connection's cache; returns the rows counted.
pub fn warm_accounts(c: &Connection) -> Result<u64> {
    let (n, _): (i64, i64) = c.query_row(
        "SELECT count(*), sum(length(filler)) FROM accounts NOT INDEXED",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let m: i64 = c.query_row(
        "SELECT count(*) FROM accounts INDEXED BY accounts_k WHERE k >= 0",
        [],
        |r| r.get(0),
    )?;
    if n != m {
        return Err(BenchError::Data(format!(
            "SQLite: accounts has {n} rows, its index {m}"
        )));
    }
    Ok(n as u64)
}

fn begin_commit(c: &Connection) -> Result<(Statement<'_>, Statement<'_>)> {
    Ok((c.prepare("BEGIN")?, c.prepare("COMMIT")?))
}

/// Workloads 1-3: look up `keys` by k, `per_txn` per transaction (BEGIN,
/// the prepared SELECT each, COMMIT), until the keys run out or `stop` is
/// set. Every lookup goes to `tally` (its aids). Returns the keys used.
pub fn sqlite_lookups(
    c: &Connection,
    keys: &[i64],
    per_txn: usize,
    stop: &AtomicBool,
    tally: &mut Tally<'_>,
) -> Result<usize> {
    let (mut begin, mut commit) = begin_commit(c)?;
    let mut stmt = c.prepare(LOOKUP_SQL)?;
    let mut used = 0;
    let mut aids = Vec::new();
    for chunk in keys.chunks(per_txn.max(1)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        begin.execute([])?;
        for &key in chunk {
            aids.clear();
            tally.start();
            let mut rows = stmt.query([key])?;
            while let Some(r) = rows.next()? {
                let (aid, k): (i64, i64) = (r.get(0)?, r.get(1)?);
                let _abalance: i64 = r.get(2)?;
                let filler = r.get_ref(3)?.as_blob().map_or(0, <[u8]>::len);
                if k != key || filler != super::FILLER_LEN {
                    tally.bad_row(format!(
                        "SQLite: lookup of k = {key} returned aid {aid} with k {k}, filler {filler} bytes"
                    ));
                }
                aids.push(aid);
            }
            tally.lookup(key as u64, aids.iter().copied());
        }
        commit.execute([])?;
        used += chunk.len();
    }
    Ok(used)
}

fn one_i64(c: &Connection, sql: &str) -> Result<i64> {
    let (mut begin, mut commit) = begin_commit(c)?;
    begin.execute([])?;
    let v: Option<i64> = c.prepare_cached(sql)?.query_row([], |r| r.get(0))?;
    commit.execute([])?;
    Ok(v.unwrap_or(0))
}

/// Workload 4: `SELECT count(*) .. WHERE abalance = -1`, a full table scan.
pub fn sqlite_scan_count(c: &Connection) -> Result<u64> {
    Ok(one_i64(c, SCAN_COUNT_SQL)? as u64)
}

/// Workload 5: `SELECT sum(k) .. NOT INDEXED`: the table, not the index on
/// k (which would answer it as a covering index, something the engine
/// cannot do).
pub fn sqlite_scan_sum(c: &Connection) -> Result<i64> {
    one_i64(c, SCAN_SUM_SQL)
}

/// Workload 6 (and the cached build): a fresh database at `path`; in one
/// transaction the table, every row through one prepared INSERT, then the
/// index on k (SQLite builds an index over existing rows by sorting, its
/// fastest way); COMMIT. Returns the connection.
///
/// One INSERT in [`LOAD_ROW_EVERY`] is timed into `latencies` as
/// [`SQLITE_LOAD_ROW`].
pub fn sqlite_bulk_load(
    path: &Path,
    cache_kib: i64,
    data: &Accounts,
    latencies: &mut Latencies,
) -> Result<Connection> {
    remove(path);
    let c = open(path, cache_kib)?;
    c.execute_batch(
        "BEGIN;
         CREATE TABLE accounts(aid INTEGER PRIMARY KEY, k INTEGER NOT NULL,
                               abalance INTEGER NOT NULL, filler BLOB NOT NULL);",
    )?;
    {
        let filler = Accounts::filler();
        let mut ins =
            c.prepare("INSERT INTO accounts(aid, k, abalance, filler) VALUES (?1, ?2, ?3, ?4)")?;
        for (i, (aid, k, ab)) in data.tuples().enumerate() {
            if (i as u64).is_multiple_of(LOAD_ROW_EVERY) {
                let t = Instant::now();
                ins.execute((aid, k, ab, &filler[..]))?;
                latencies.record(SQLITE_LOAD_ROW, t.elapsed());
            } else {
                ins.execute((aid, k, ab, &filler[..]))?;
            }
        }
    }
    c.execute_batch("CREATE INDEX accounts_k ON accounts(k); COMMIT;")?;
    Ok(c)
}

/// The zipf table: `t(id, k1, k2, k3, filler 140 bytes)` with the same rows
/// as index-residency's (`perms[j][id - 1]` = k_j), the three indexes built
/// after the load, in one transaction; then a checkpoint.
pub fn build_zipf(path: &Path, perms: &[Vec<u32>; 3], filler_len: usize) -> Result<()> {
    remove(path);
    let c = open(path, 256 * 1024)?;
    c.execute_batch(
        "BEGIN;
         CREATE TABLE t(id INTEGER PRIMARY KEY, k1 INTEGER NOT NULL, k2 INTEGER NOT NULL,
                        k3 INTEGER NOT NULL, filler BLOB NOT NULL);",
    )?;
    {
        let filler = vec![b'f'; filler_len];
        let mut ins =
            c.prepare("INSERT INTO t(id, k1, k2, k3, filler) VALUES (?1, ?2, ?3, ?4, ?5)")?;
        for (i, k1) in perms[0].iter().enumerate() {
            ins.execute((
                i as i64 + 1,
                i64::from(*k1),
                i64::from(perms[1][i]),
                i64::from(perms[2][i]),
                &filler[..],
            ))?;
        }
    }
    c.execute_batch(
        "CREATE INDEX t_k1 ON t(k1); CREATE INDEX t_k2 ON t(k2); CREATE INDEX t_k3 ON t(k3);
         COMMIT; PRAGMA wal_checkpoint(TRUNCATE);",
    )?;
    Ok(())
}

/// Workload 7: zipf probes (`index << 32 | key`) through one of the three
/// indexes each, `per_txn` per transaction, until the probes run out or
/// `stop` is set. Every probe goes to `tally` (the ids found). Returns the
/// probes used.
pub fn sqlite_zipf_probes(
    c: &Connection,
    probes: &[u64],
    per_txn: usize,
    stop: &AtomicBool,
    tally: &mut Tally<'_>,
) -> Result<usize> {
    let (mut begin, mut commit) = begin_commit(c)?;
    let mut stmts = [
        c.prepare(ZIPF_SQL[0])?,
        c.prepare(ZIPF_SQL[1])?,
        c.prepare(ZIPF_SQL[2])?,
    ];
    let mut used = 0;
    let mut ids = Vec::new();
    for chunk in probes.chunks(per_txn.max(1)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        begin.execute([])?;
        for &probe in chunk {
            let j = (probe >> 32) as usize;
            let key = (probe & 0xFFFF_FFFF) as i64;
            ids.clear();
            tally.start();
            let mut rows = stmts[j].query([key])?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                let kj: i64 = r.get(1 + j)?;
                let _filler = r.get_ref(4)?.as_blob().map_or(0, <[u8]>::len);
                if kj != key {
                    tally.bad_row(format!(
                        "SQLite: probe of t_k{} = {key} returned id {id} with key {kj}",
                        j + 1
                    ));
                }
                ids.push(id);
            }
            tally.lookup(probe, ids.iter().copied());
        }
        commit.execute([])?;
        used += chunk.len();
    }
    Ok(used)
}
