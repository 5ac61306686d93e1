//! The engine's side of `compare-sqlite`, one small function per workload,
//! written against today's read API (`db.begin()` + `index_lookup` /
//! `scan` + `commit()` in the default, synchronous commit mode). When the
//! read path changes (read-only transactions, borrowed-row scans with
//! projection and predicate, table handles), these are the functions to
//! rewrite; the driver only calls them.
//!
//! Compiled in every build (not only with `--features sqlite`), so an API
//! change that breaks them shows in a plain `cargo build`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::{Database, Options, Value};

use super::{ABALANCE, AID, Accounts, K, K_INDEX, TABLE, Tally};
use crate::error::{BenchError, Result};
use crate::scenarios::index_residency::INDEXES as ZIPF_INDEXES;

fn i64_at(row: &[Value], col: usize) -> Option<i64> {
    row.get(col).and_then(Value::as_i64)
}

/// Workloads 1-3: look up `keys` by k, `per_txn` per transaction
/// (`begin`, `index_lookup` each, `commit`), until the keys run out or
/// `stop` is set (looked at between transactions). Every lookup goes to
/// `tally` (its aids). Returns the keys used.
pub fn engine_lookups(
    db: &Database,
    keys: &[i64],
    per_txn: usize,
    stop: &AtomicBool,
    tally: &mut Tally<'_>,
) -> Result<usize> {
    let mut used = 0;
    for chunk in keys.chunks(per_txn.max(1)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let txn = db.begin()?;
        for &key in chunk {
            let rows = txn.index_lookup(K_INDEX, &Value::I64(key))?;
            if let Some((_, r)) = rows.iter().find(|(_, r)| i64_at(r, K) != Some(key)) {
                tally.bad_row(format!("engine: lookup of k = {key} returned {r:?}"));
            }
            tally.lookup(
                key as u64,
                rows.iter().map(|(_, r)| i64_at(r, AID).unwrap_or(i64::MIN)),
            );
        }
        txn.commit()?;
        used += chunk.len();
    }
    Ok(used)
}

/// Workload 4: a full scan counting the rows whose abalance is -1.
pub fn engine_scan_count(db: &Database) -> Result<u64> {
    let txn = db.begin()?;
    let mut n = 0u64;
    for r in txn.scan(TABLE)? {
        let (_, row) = r?;
        if row.get(ABALANCE) == Some(&Value::I64(-1)) {
            n += 1;
        }
    }
    txn.commit()?;
    Ok(n)
}

/// Workload 5: a full scan summing k.
pub fn engine_scan_sum(db: &Database) -> Result<i64> {
    let txn = db.begin()?;
    let mut sum = 0i64;
    for r in txn.scan(TABLE)? {
        let (_, row) = r?;
        sum += i64_at(&row, K)
            .ok_or_else(|| BenchError::Data(format!("engine: a row of {TABLE} without k")))?;
    }
    txn.commit()?;
    Ok(sum)
}

/// Workload 6: open a fresh database in `dir` with `options`, create the
/// table and its index on k (the index first: `bulk_load` maintains it row
/// by row), and `bulk_load` every row in one transaction. Returns the open
/// database (the caller checks it, then closes it).
pub fn engine_bulk_load(dir: &Path, options: Options, data: &Accounts) -> Result<Database> {
    let db = Database::open(dir, options)?;
    db.create_table(TABLE, Accounts::columns())?;
    db.create_index(K_INDEX, TABLE, "k", false)?;
    let p = db.bulk_load(TABLE, data.engine_rows(), |_| {})?;
    if p.rows != data.rows() {
        return Err(BenchError::Data(format!(
            "engine: bulk load reported {} rows, expected {}",
            p.rows,
            data.rows()
        )));
    }
    Ok(db)
}

/// Workload 7: zipf probes (`index << 32 | key`, index-residency's
/// encoding) through the three indexes of its table, `per_txn` per
/// transaction, until the probes run out or `stop` is set. Every probe goes
/// to `tally` (the ids found). Returns the probes used.
pub fn engine_zipf_probes(
    db: &Database,
    probes: &[u64],
    per_txn: usize,
    stop: &AtomicBool,
    tally: &mut Tally<'_>,
) -> Result<usize> {
    let mut used = 0;
    for chunk in probes.chunks(per_txn.max(1)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let txn = db.begin()?;
        for &probe in chunk {
            let j = (probe >> 32) as usize;
            let key = (probe & 0xFFFF_FFFF) as i64;
            let rows = txn.index_lookup(ZIPF_INDEXES[j], &Value::I64(key))?;
            if let Some((_, r)) = rows.iter().find(|(_, r)| i64_at(r, 1 + j) != Some(key)) {
                tally.bad_row(format!(
                    "engine: probe of {} = {key} returned {r:?}",
                    ZIPF_INDEXES[j]
                ));
            }
            tally.lookup(
                probe,
                rows.iter().map(|(_, r)| i64_at(r, 0).unwrap_or(i64::MIN)),
            );
        }
        txn.commit()?;
        used += chunk.len();
    }
    Ok(used)
}
