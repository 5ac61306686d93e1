//! The engine's side of `compare-sqlite`, one small function per workload,
//! on the engine's fast read paths: resolved handles (`table_handle`,
//! `index_handle`, `Table::column`), transactions that take no xid until
//! they write (so `begin` + lookups + `commit` of a reader writes no
//! commit record and waits for no fsync), `lookup_each` (the B-tree's
//! point lookup, one heap pin per match, the row borrowed on its page) and
//! `scan_each` (each visible row a `RowRef` on the share-locked page, only
//! the column asked for decoded). The driver only calls these.
//!
//! Compiled in every build (not only with `--features sqlite`), so an API
//! change that breaks them shows in a plain `cargo build`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use engine::{Database, Options, Value};

use super::{ABALANCE, AID, Accounts, ENGINE_LOAD_ROW, K, K_INDEX, LOAD_ROW_EVERY, TABLE, Tally};
use crate::error::{BenchError, Result};
use crate::latency::Latencies;
use crate::scenarios::index_residency::INDEXES as ZIPF_INDEXES;

/// Workloads 1-3: look up `keys` by k, `per_txn` per transaction
/// (`begin`, `lookup_each` each, `commit`), until the keys run out or
/// `stop` is set (looked at between transactions). Every lookup goes to
/// `tally` (its aids). Returns the keys used.
pub fn engine_lookups(
    db: &Database,
    keys: &[i64],
    per_txn: usize,
    stop: &AtomicBool,
    tally: &mut Tally<'_>,
) -> Result<usize> {
    let by_k = db.index_handle(K_INDEX)?;
    let table = by_k.table();
    let (aid, k) = (table.column("aid")?, table.column("k")?);
    debug_assert_eq!((aid.index(), k.index()), (AID, K));
    let mut aids = Vec::new();
    let mut used = 0;
    for chunk in keys.chunks(per_txn.max(1)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let txn = db.begin()?;
        for &key in chunk {
            aids.clear();
            let mut wrong = None;
            tally.start();
            txn.lookup_each(&by_k, &Value::I64(key), |row| {
                if row.i64(k)? != key {
                    wrong.get_or_insert(row.to_row()?);
                }
                aids.push(row.i64(aid)?);
                Ok(())
            })?;
            if let Some(r) = wrong {
                tally.bad_row(format!("engine: lookup of k = {key} returned {r:?}"));
            }
            tally.lookup(key as u64, aids.iter().copied());
        }
        txn.commit()?;
        used += chunk.len();
    }
    Ok(used)
}

/// Workload 4: a full scan counting the rows whose abalance is -1.
pub fn engine_scan_count(db: &Database) -> Result<u64> {
    let table = db.table_handle(TABLE)?;
    let abalance = table.column("abalance")?;
    debug_assert_eq!(abalance.index(), ABALANCE);
    let txn = db.begin()?;
    let mut n = 0u64;
    txn.scan_each(&table, |row| {
        n += u64::from(row.i64(abalance)? == -1);
        Ok(())
    })?;
    txn.commit()?;
    Ok(n)
}

/// Workload 5: a full scan summing k.
pub fn engine_scan_sum(db: &Database) -> Result<i64> {
    let table = db.table_handle(TABLE)?;
    let k = table.column("k")?;
    let txn = db.begin()?;
    let mut sum = 0i64;
    txn.scan_each(&table, |row| {
        sum += row.i64(k)?;
        Ok(())
    })?;
    txn.commit()?;
    Ok(sum)
}

/// Workload 4 through the owned iterator, as a Rust user writes it first:
/// `for r in txn.scan(t)?`, the column read from each owned row.
pub fn engine_scan_count_owned(db: &Database) -> Result<u64> {
    let table = db.table_handle(TABLE)?;
    let abalance = table.column("abalance")?;
    let txn = db.begin()?;
    let mut n = 0u64;
    for r in txn.scan(&table)? {
        let (_, row) = r?;
        n += u64::from(row.i64(abalance)? == -1);
    }
    txn.commit()?;
    Ok(n)
}

/// Workload 5 through the owned iterator (`for r in txn.scan(t)?`).
pub fn engine_scan_sum_owned(db: &Database) -> Result<i64> {
    let table = db.table_handle(TABLE)?;
    let k = table.column("k")?;
    let txn = db.begin()?;
    let mut sum = 0i64;
    for r in txn.scan(&table)? {
        let (_, row) = r?;
        sum += row.i64(k)?;
    }
    txn.commit()?;
    Ok(sum)
}

/// Workload 6: open a fresh database in `dir` with `options`, create the
/// table and its index on k, and `bulk_load` every row in one transaction
/// (into the empty table: pages written whole through the bulk-write ring,
/// the index built bottom-up from its sorted entries). Returns the open
/// database (the caller checks it, then closes it).
///
/// One row in [`LOAD_ROW_EVERY`] is timed into `latencies` as
/// [`ENGINE_LOAD_ROW`]: from `bulk_load` taking the row to its asking for
/// the next (the row's share of the load; the index's bottom-up build
/// after the last row is in none).
pub fn engine_bulk_load(
    dir: &Path,
    options: Options,
    data: &Accounts,
    latencies: &mut Latencies,
) -> Result<Database> {
    let db = Database::open(dir, options)?;
    db.create_table(TABLE, Accounts::columns())?;
    db.create_index(K_INDEX, TABLE, "k", false)?;
    let mut handed: u64 = 0;
    let mut timed_from: Option<Instant> = None;
    let rows = data.engine_rows().inspect(|_| {
        if let Some(t) = timed_from.take() {
            latencies.record(ENGINE_LOAD_ROW, t.elapsed());
        }
        if handed.is_multiple_of(LOAD_ROW_EVERY) {
            timed_from = Some(Instant::now());
        }
        handed += 1;
    });
    let p = db.bulk_load(TABLE, rows, |_| {})?;
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
    let indexes = ZIPF_INDEXES
        .iter()
        .map(|name| db.index_handle(name))
        .collect::<engine::Result<Vec<_>>>()?;
    let cols = indexes[0].table().columns();
    let mut ids = Vec::new();
    let mut used = 0;
    for chunk in probes.chunks(per_txn.max(1)) {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let txn = db.begin()?;
        for &probe in chunk {
            let j = (probe >> 32) as usize;
            let key = (probe & 0xFFFF_FFFF) as i64;
            ids.clear();
            let mut wrong = None;
            tally.start();
            txn.lookup_each(&indexes[j], &Value::I64(key), |row| {
                if row.i64(cols[1 + j])? != key {
                    wrong.get_or_insert(row.to_row()?);
                }
                ids.push(row.i64(cols[0])?);
                Ok(())
            })?;
            if let Some(r) = wrong {
                tally.bad_row(format!(
                    "engine: probe of {} = {key} returned {r:?}",
                    ZIPF_INDEXES[j]
                ));
            }
            tally.lookup(probe, ids.iter().copied());
        }
        txn.commit()?;
        used += chunk.len();
    }
    Ok(used)
}
