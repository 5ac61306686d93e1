//! What `seqscan-partitions`, `oltp`, `readonly` and `bulkload` share:
//! pgbench-like tables built through the engine's public API, a database
//! directory cached per scenario and scale, the engine `Options` of one
//! matrix cell, the end-of-run checks, the per-relation residency summary,
//! and a storage wrapper that counts pages read per relation.
//!
//! ```text
//!   --data-dir/<scenario>/<scale key>/      one engine data directory
//!       VERSION, control, wal/, base/...    (engine::Database)
//!       BENCH-STAMP.json                    written last: scenario + scale + checksums
//!
//!   ensure_db: stamp matches -> reuse; else delete, create, build (bulk_load
//!   + create_index), one scan of every table (sets the hint bits, so no
//!   measured run dirties pages for hints), checkpoint, close, write stamp.
//!   Every configuration then opens the directory (or a copy of it, for the
//!   scenarios that write) with its own Options.
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::{
    Column, ColumnType, Database, Options, Partitions, RelKind, RingChoice, Row, ScanOptions, Value,
};
use indicatif::ProgressBar;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::check::TableCheck;
use crate::common::{Config, Settings, Table, progress_bar};
use crate::dirs::dir_bytes;
use crate::error::{BenchError, Result};
use crate::harness::{LiveLatency, MEASURE, Recorder};
use crate::latency::Latencies;

/// Filler bytes of accounts, tellers and branches rows (pgbench's are
/// 84-97 chars; bench/SCENARIOS.md fixes 84).
pub const FILLER_LEN: usize = 84;
/// Filler of a history row (pgbench: 22).
pub const HISTORY_FILLER_LEN: usize = 22;
pub const ACCOUNTS: &str = "accounts";
pub const ACCOUNTS_PK: &str = "accounts_pkey";
pub const TELLERS: &str = "tellers";
pub const TELLERS_PK: &str = "tellers_pkey";
pub const BRANCHES: &str = "branches";
pub const BRANCHES_PK: &str = "branches_pkey";
pub const HISTORY: &str = "history";
/// Heap pages an accounts row takes, measured: 55 rows of 115 encoded
/// bytes (+ 24-byte tuple header + 4-byte line pointer) per 8 KiB page.
pub const ACCOUNTS_ROWS_PER_PAGE: u64 = 55;
/// The stamp file, written last.
pub const STAMP: &str = "BENCH-STAMP.json";
/// Bump when the layout of a cached database changes.
pub const STAMP_FORMAT: u32 = 1;

pub fn filler(len: usize) -> Value {
    Value::Bytes(vec![b'x'; len])
}

pub fn accounts_columns() -> Vec<Column> {
    vec![
        Column::new("aid", ColumnType::I64),
        Column::new("bid", ColumnType::I64),
        Column::new("abalance", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

/// Column of `abalance` in an accounts row.
pub const ABALANCE: usize = 2;

pub fn account_row(aid: i64, bid: i64, abalance: i64) -> Row {
    vec![
        Value::I64(aid),
        Value::I64(bid),
        Value::I64(abalance),
        filler(FILLER_LEN),
    ]
}

pub fn tellers_columns() -> Vec<Column> {
    vec![
        Column::new("tid", ColumnType::I64),
        Column::new("bid", ColumnType::I64),
        Column::new("tbalance", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

pub const TBALANCE: usize = 2;

pub fn teller_row(tid: i64, bid: i64, tbalance: i64) -> Row {
    vec![
        Value::I64(tid),
        Value::I64(bid),
        Value::I64(tbalance),
        filler(FILLER_LEN),
    ]
}

pub fn branches_columns() -> Vec<Column> {
    vec![
        Column::new("bid", ColumnType::I64),
        Column::new("bbalance", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

pub const BBALANCE: usize = 1;

pub fn branch_row(bid: i64, bbalance: i64) -> Row {
    vec![Value::I64(bid), Value::I64(bbalance), filler(FILLER_LEN)]
}

pub fn history_columns() -> Vec<Column> {
    vec![
        Column::new("tid", ColumnType::I64),
        Column::new("bid", ColumnType::I64),
        Column::new("aid", ColumnType::I64),
        Column::new("delta", ColumnType::I64),
        Column::new("mtime", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

pub const HDELTA: usize = 3;

pub fn history_row(tid: i64, bid: i64, aid: i64, delta: i64, mtime: i64) -> Row {
    vec![
        Value::I64(tid),
        Value::I64(bid),
        Value::I64(aid),
        Value::I64(delta),
        Value::I64(mtime),
        filler(HISTORY_FILLER_LEN),
    ]
}

/// Accounts rows whose heap fills `pages` pages.
pub fn accounts_for_pages(pages: u64) -> u64 {
    (pages * ACCOUNTS_ROWS_PER_PAGE).max(ACCOUNTS_ROWS_PER_PAGE)
}

// ---------------------------------------------------------------------------
// Building and caching
// ---------------------------------------------------------------------------

/// The options a cached database is built with: the run's pool, one
/// partition, the clock, rings on (so `bulk_load` writes its own pages).
pub fn build_options(settings: &Settings) -> Options {
    Options::new()
        .pool_buffers(settings.pool_buffers)
        .partitions(Partitions::Count(1))
}

/// The engine options of one matrix cell: [`Settings::engine_options`]
/// (pool size, evictor, batch, partitions, rings, huge pages, `--io`,
/// `--direct` and, with `--mrc`, the pool's miss-ratio curve); everything
/// else the engine's defaults (balancing on, no floor, background writer
/// and checkpointer running, synchronous commit, checksums on).
pub fn options(settings: &Settings, c: &Config) -> Options {
    settings.engine_options(c)
}

/// Make sure `<data-dir>/<scenario>/<key>` holds a database built by
/// `build` for `scale`; returns its path and whether it was reused. `build`
/// gets the open database and a progress bar; afterwards every table is
/// scanned once (hint bits), a checkpoint taken and the database closed;
/// the stamp (format, scenario, scale and the checksum setting of
/// [`build_options`]) is written last. A spec over [`crate::cache`].
pub fn ensure_db(
    settings: &Settings,
    scenario: &str,
    key: &str,
    scale: &serde_json::Value,
    build: impl FnOnce(&Database, &ProgressBar) -> Result<()>,
) -> Result<(PathBuf, bool)> {
    let dir = settings.data_dir.join(scenario).join(key);
    let options = build_options(settings);
    let stamp = serde_json::json!({
        "format": STAMP_FORMAT,
        "scenario": scenario,
        "scale": scale,
        "checksums": options.checksums,
    });
    let spec = crate::cache::Spec {
        dir: &dir,
        stamp_file: STAMP,
        key: stamp,
        options,
    };
    let pb = progress_bar(
        1,
        settings.progress,
        &format!("building {scenario} ({key})"),
    );
    let cached = crate::cache::ensure(
        &spec,
        |db| build(db, &pb),
        |db| {
            for t in db.tables() {
                pb.set_message(format!("{scenario}: setting hint bits on {}", t.name));
                scan_count(db, &t.name)?;
            }
            pb.set_message(format!("{scenario}: checkpoint"));
            Ok(())
        },
    )?;
    pb.finish_and_clear();
    if cached.reused {
        println!(
            "reusing the {scenario} database ({key}, {} MiB) in {}",
            dir_bytes(&dir) >> 20,
            dir.display()
        );
    } else {
        println!(
            "built the {scenario} database ({key}, {} MiB) in {:.1} s, in {}",
            dir_bytes(&dir) >> 20,
            cached.build_secs,
            dir.display()
        );
    }
    Ok((cached.dir, cached.reused))
}

/// Load `n` accounts rows (aid 1..=n, `per_branch` to a branch, balance 0)
/// through `bulk_load` with its progress on `pb`, then the primary key.
pub fn load_accounts(db: &Database, n: u64, per_branch: u64, pb: &ProgressBar) -> Result<()> {
    db.create_table(ACCOUNTS, accounts_columns())?;
    // The index first: bulk_load maintains it row by row, in key order.
    db.create_index(ACCOUNTS_PK, ACCOUNTS, "aid", true)?;
    load_rows(
        db,
        ACCOUNTS,
        n,
        pb,
        (1..=n as i64).map(|aid| account_row(aid, (aid - 1) / per_branch as i64 + 1, 0)),
    )
}

/// `bulk_load` `rows` (`n` of them) into `table`, the progress bar following.
pub fn load_rows(
    db: &Database,
    table: &str,
    n: u64,
    pb: &ProgressBar,
    rows: impl Iterator<Item = Row>,
) -> Result<()> {
    pb.set_length(n.max(1));
    pb.set_position(0);
    pb.set_message(format!("loading {n} rows into {table}"));
    let done = db.bulk_load(table, rows, |p| pb.set_position(p.rows))?;
    if done.rows != n {
        return Err(BenchError::Data(format!(
            "bulk load into {table} reported {} rows, expected {n}",
            done.rows
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

/// Rows of `table` visible now, counted by a seq scan.
pub fn scan_count(db: &Database, table: &str) -> Result<u64> {
    Ok(scan_sum(db, table, None)?.0)
}

/// Rows of `table` visible now and the sum of i64 column `col` (if given).
pub fn scan_sum(db: &Database, table: &str, col: Option<usize>) -> Result<(u64, i128)> {
    let txn = db.begin()?;
    let (mut n, mut sum) = (0u64, 0i128);
    for r in txn.scan_with(
        table,
        ScanOptions {
            ring: RingChoice::Auto,
            hint_mode: db.options().hint_mode,
        },
    )? {
        let (_, row) = r?;
        n += 1;
        if let Some(c) = col {
            let v = row.get(c).and_then(Value::as_i64).ok_or_else(|| {
                BenchError::Data(format!("{table}: a row without an i64 in column {c}"))
            })?;
            sum += i128::from(v);
        }
    }
    txn.rollback()?;
    Ok((n, sum))
}

/// Count the rows of `table` and verify its indexes against the heap.
pub fn check_table(db: &Database, table: &str, expected: Option<u64>) -> Result<TableCheck> {
    let rows = scan_count(db, table)?;
    let violations = db.verify_indexes(table)?;
    Ok(TableCheck::new(table, expected, rows, &violations))
}

// ---------------------------------------------------------------------------
// Residency
// ---------------------------------------------------------------------------

/// Pages of one relation resident in the pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Residency {
    pub relation: String,
    /// `table`, `index`, `clog`, `catalog`, `unknown`.
    pub kind: String,
    pub pages: usize,
}

fn kind_name(k: RelKind) -> &'static str {
    match k {
        RelKind::Clog => "clog",
        RelKind::Catalog => "catalog",
        RelKind::Table => "table",
        RelKind::Index => "index",
        RelKind::Unknown => "unknown",
    }
}

/// Resident pages per relation now (no page is pinned to find out).
pub fn residency(db: &Database) -> Vec<Residency> {
    db.resident_pages()
        .into_iter()
        .map(|r| Residency {
            relation: r.name,
            kind: kind_name(r.kind).into(),
            pages: r.pages,
        })
        .collect()
}

/// One NUMA node's share of the pool: where its buffers' memory actually
/// is (asked of the kernel per page, `Database::buffercache`), how many of
/// them hold a page, and the partitions homed there with their window's
/// buffer accesses and reads (from the partitions' counters).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFigures {
    pub node: usize,
    /// Buffers whose memory the kernel reports on this node.
    pub buffers: usize,
    /// Of those, buffers holding a page.
    pub used: usize,
    /// Partitions the map puts on this node (by the topology in use, which
    /// may be synthetic: then `buffers` still says where memory really is).
    pub partitions: usize,
    pub accesses: u64,
    pub reads: u64,
}

/// Per-node figures now: memory from the buffercache rows, partitions and
/// the window's counters (`stats`, a `since` difference) by partition node.
pub fn node_figures(db: &Database, stats: &bufmgr::PoolStats) -> Vec<NodeFigures> {
    let pool = db.pool();
    let topo = pool.topology();
    let mut v: Vec<NodeFigures> = Vec::new();
    let at = |v: &mut Vec<NodeFigures>, node: usize| -> usize {
        match v.iter().position(|f| f.node == node) {
            Some(i) => i,
            None => {
                v.push(NodeFigures {
                    node,
                    buffers: 0,
                    used: 0,
                    partitions: 0,
                    accesses: 0,
                    reads: 0,
                });
                v.len() - 1
            }
        }
    };
    for (node, buffers, used) in pool.buffercache_summary().per_node {
        let i = at(&mut v, node);
        v[i].buffers = buffers;
        v[i].used = used;
    }
    for (p, part) in pool.partitions().partitions().iter().enumerate() {
        let node = topo.nodes[part.node.min(topo.node_count() - 1)].id;
        let i = at(&mut v, node);
        v[i].partitions += 1;
        if let Some(s) = stats.partitions.get(p) {
            v[i].accesses += s.accesses;
            v[i].reads += s.reads;
        }
    }
    v.sort_by_key(|f| f.node);
    v
}

/// The per-node table under "where the buffers went": one line per
/// configuration and node.
pub fn render_nodes(rows: &[(String, Vec<NodeFigures>)]) -> String {
    let mut t = Table::new(&[
        "by NUMA node (memory queried)",
        "node",
        "buffers",
        "used",
        "partitions",
        "accesses",
        "reads",
    ]);
    for (label, nodes) in rows {
        for n in nodes {
            t.push(vec![
                label.clone(),
                n.node.to_string(),
                n.buffers.to_string(),
                n.used.to_string(),
                n.partitions.to_string(),
                n.accesses.to_string(),
                n.reads.to_string(),
            ]);
        }
    }
    t.to_string()
}

/// Pages of `names` resident now.
pub fn resident_of(db: &Database, names: &[&str]) -> usize {
    db.resident_pages()
        .iter()
        .filter(|r| names.contains(&r.name.as_str()))
        .map(|r| r.pages)
        .sum()
}

/// The summary of where the buffers went: one line per configuration, one
/// column per relation (most pages first), `free` the buffers holding none.
pub fn render_residency(pool_buffers: usize, rows: &[(String, Vec<Residency>)]) -> String {
    let mut names: Vec<(String, usize)> = Vec::new();
    for (_, res) in rows {
        for r in res {
            match names.iter_mut().find(|(n, _)| *n == r.relation) {
                Some((_, p)) => *p += r.pages,
                None => names.push((r.relation.clone(), r.pages)),
            }
        }
    }
    names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut header = vec!["resident pages at the end".to_string()];
    header.extend(names.iter().map(|(n, _)| n.clone()));
    header.push("free".into());
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&hdr);
    for (label, res) in rows {
        let mut cells = vec![label.clone()];
        let mut used = 0;
        for (n, _) in &names {
            let p = res
                .iter()
                .filter(|r| &r.relation == n)
                .map(|r| r.pages)
                .sum::<usize>();
            used += p;
            cells.push(p.to_string());
        }
        cells.push(pool_buffers.saturating_sub(used).to_string());
        t.push(cells);
    }
    t.to_string()
}

// ---------------------------------------------------------------------------
// Point lookups on accounts
// ---------------------------------------------------------------------------

/// The `phase` value that stops [`account_lookups`].
pub use crate::harness::STOP;

/// One lookup thread: uniform random `aid`s in `1..=n` through the primary
/// key, `per_txn` per (rolled back, read-only) transaction, until `phase`
/// reads [`STOP`]; `done` counts lookups. A row that is missing, has another
/// aid, or (with `balance`) another balance is a data error: returns the
/// count and the first one described, and the thread's latencies
/// ([`LOOKUP`], those that began and ended in the [`MEASURE`] phase; `live`
/// gets every one, for `--report-interval`).
#[allow(clippy::too_many_arguments)]
pub fn account_lookups(
    db: &Database,
    seed: u64,
    n: u64,
    per_txn: u64,
    balance: Option<i64>,
    phase: &AtomicU8,
    done: &AtomicU64,
    live: Option<&LiveLatency>,
) -> Result<(u64, Option<String>, Latencies)> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut lat = Recorder::new(live, LOOKUP);
    let (mut errors, mut first) = (0u64, None);
    while phase.load(Ordering::Relaxed) != STOP {
        let txn = db.begin()?;
        for _ in 0..per_txn {
            let aid = rng.random_range(1..=n as i64);
            let p = phase.load(Ordering::Relaxed);
            let started = Instant::now();
            let found = txn.get_by_key(ACCOUNTS, "aid", &Value::I64(aid))?;
            let in_window = p == MEASURE && phase.load(Ordering::Relaxed) == MEASURE;
            lat.record_if(LOOKUP, started, in_window);
            match found {
                Some((_, row))
                    if row[0].as_i64() == Some(aid)
                        && balance.is_none_or(|b| row[ABALANCE].as_i64() == Some(b)) => {}
                other => {
                    errors += 1;
                    first.get_or_insert_with(|| format!("aid {aid} found {other:?}"));
                }
            }
        }
        txn.rollback()?;
        done.fetch_add(per_txn, Ordering::Relaxed);
    }
    Ok((errors, first, lat.finish()))
}

/// The operation kind of [`account_lookups`]' latencies.
pub const LOOKUP: &str = "lookup";

// ---------------------------------------------------------------------------
// Matrix defaults and windows
// ---------------------------------------------------------------------------

/// The pool matrix with the thread counts replaced by `threads`, without
/// duplicates, evictor innermost.
pub fn configs_with(settings: &Settings, threads: &[usize], partitions: &[usize]) -> Vec<Config> {
    let mut s = settings.clone();
    s.threads = threads.to_vec();
    s.partitions = partitions.to_vec();
    let mut out: Vec<Config> = Vec::new();
    for c in s.configs() {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

pub use crate::harness::{TICK, run_window};

/// A progress bar over a window of `d`, labelled `label`.
pub fn window_bar(settings: &Settings, d: Duration, label: &str) -> ProgressBar {
    progress_bar(d.as_millis() as u64, settings.progress, label)
}

/// The `p`-th percentile (0..=100) of sorted `v` (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// `a / b`, `None` when `b` is 0.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

/// A percentage for a table.
pub fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

pub use crate::harness::panic_text;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_ratios() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&v, 50.0), 3.0);
        assert_eq!(percentile(&v, 100.0), 5.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(1.0, 2.0), Some(0.5));
    }

    #[test]
    fn the_workload_tables_open_with_the_io_backend_and_direct_io_asked_for() {
        let args = crate::common::CommonArgs {
            io: Some(bufmgr::IoMode::IoUring),
            direct: true,
            ..Default::default()
        };
        let s = args.resolve(&crate::scenarios::oltp::defaults()).unwrap();
        let o = options(&s, &s.configs()[0]);
        assert_eq!((o.io, o.direct_io), (bufmgr::IoMode::IoUring, true));
    }

    #[test]
    fn residency_table_has_a_column_per_relation() {
        let r = |n: &str, p| Residency {
            relation: n.into(),
            kind: "table".into(),
            pages: p,
        };
        let s = render_residency(
            100,
            &[
                ("a".into(), vec![r("t", 60), r("i", 5)]),
                ("b".into(), vec![r("t", 10)]),
            ],
        );
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].contains('t') && lines[0].contains("free"));
        assert!(lines[2].ends_with("35"), "{s}");
        assert!(lines[3].ends_with("90"), "{s}");
    }
}
