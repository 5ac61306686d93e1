//! Data sets built through the engine's public API (`engine::Database`):
//! tables and indexes loaded with `bulk_load`, cached per scenario and scale
//! in `--data-dir`, opened by every measured configuration with its own
//! `Options`, and checked at the end of a run.
//!
//! ```text
//!   <data-dir>/<scenario>/<scale>/        one engine data directory per scenario and scale
//!       STAMP.json                        written last: format, scenario, scale, checksums,
//!                                         rows per table; a missing, unreadable or different
//!                                         stamp means "build again" (the directory is emptied)
//!       VERSION, control, wal/, base/N    the engine's files
//! ```
//!
//! Building (`ensure`):
//! 1. open the directory with checksums off ([`CHECKSUMS`]; every later open
//!    must use the same setting, the engine refuses the other) and full-page
//!    writes off (a crash during a build leaves no stamp, so the next run
//!    rebuilds: nothing relies on torn-page protection);
//! 2. the scenario's closure creates its tables and indexes and bulk-loads
//!    them (one transaction per table, progress bars);
//! 3. every table is scanned once: the scan sets the tuples' commit hint
//!    bits, so no later reader asks the commit log (which would add buffer
//!    accesses of its own to every measurement), and its row count is
//!    checked;
//! 4. a checkpoint and a clean close write every page; then the stamp.
//!
//! Reads per relation: the engine counts buffer accesses and hits per pool
//! partition, not per relation or per thread. A measured database is opened
//! with its storage wrapped by [`count_reads`] (`bufmgr::ObservedStorage`),
//! which counts the pages read from storage per relation: a pool miss is
//! exactly one such read, so "misses of relation R" is exact. See the
//! scenarios for how accesses are attributed.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bufmgr::{BufferTag, ObservedStorage, RelFork, RelId, StorageBackend, StorageObserver};
use engine::{BulkProgress, Database, Options, Partitions, RelKind, Row};
use serde::{Deserialize, Serialize};

use crate::check::{DataCheck, TableCheck};
use crate::common::progress_bar;
use crate::error::{BenchError, Result};

/// Name of the stamp file in a data set's directory.
pub const STAMP_FILE: &str = "STAMP.json";
/// Bump when the layout of any data set changes: old caches are rebuilt.
pub const FORMAT: u32 = 1;
/// The checksum setting every cached data set is created with (and must be
/// opened with). Off, as PostgreSQL's default: the pages are hinted once at
/// build time, and with checksums on each first hint would log a full-page
/// image (a second copy of every table in the WAL).
pub const CHECKSUMS: bool = false;

/// Rows of one table, as the stamp records them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRows {
    pub table: String,
    pub rows: u64,
}

/// What a cached data set holds; written last by a build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub format: u32,
    pub scenario: String,
    /// The scale the data set was built for, e.g. `"pool 4096 pages"`.
    pub scale: String,
    pub checksums: bool,
    pub tables: Vec<TableRows>,
}

impl Stamp {
    pub fn new(scenario: &str, scale: String, tables: &[(&str, u64)]) -> Stamp {
        Stamp {
            format: FORMAT,
            scenario: scenario.into(),
            scale,
            checksums: CHECKSUMS,
            tables: tables
                .iter()
                .map(|&(t, rows)| TableRows {
                    table: t.into(),
                    rows,
                })
                .collect(),
        }
    }

    pub fn rows(&self, table: &str) -> u64 {
        self.tables
            .iter()
            .find(|t| t.table == table)
            .map_or(0, |t| t.rows)
    }
}

/// The stamp in `dir`, if there is a readable one.
pub fn read_stamp(dir: &Path) -> Option<Stamp> {
    let text = fs::read_to_string(dir.join(STAMP_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The directory of `scenario`'s data set at `scale_tag` (e.g. `pool-4096`).
pub fn dataset_dir(data_dir: &Path, scenario: &str, scale_tag: &str) -> PathBuf {
    data_dir.join(scenario).join(scale_tag)
}

/// A data set ready to be opened.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub dir: PathBuf,
    pub stamp: Stamp,
    /// Whether a cached build was reused.
    pub reused: bool,
    /// Seconds the build took (0 when reused).
    pub build_secs: f64,
}

/// Options of a build: the pool given, checksums per [`CHECKSUMS`], no
/// full-page writes, one partition.
pub fn build_options(pool_buffers: usize) -> Options {
    Options::new()
        .pool_buffers(pool_buffers.max(1024))
        .checksums(CHECKSUMS)
        .full_page_writes(false)
        .partitions(Partitions::Count(1))
}

/// Make sure `dir` holds the data set `want` describes: reuse it if its
/// stamp equals `want`, else empty the directory, open a database there
/// and run `build` (which creates and loads the tables of `want.tables`),
/// hint and count every table, checkpoint, close and write the stamp. A
/// spec over [`crate::cache`].
pub fn ensure(
    dir: &Path,
    want: &Stamp,
    pool_buffers: usize,
    progress: bool,
    build: impl FnOnce(&Database) -> Result<()>,
) -> Result<Dataset> {
    let key = serde_json::to_value(want)
        .map_err(|e| BenchError::Data(format!("the stamp of {}: {e}", dir.display())))?;
    let spec = crate::cache::Spec {
        dir,
        stamp_file: STAMP_FILE,
        key,
        options: build_options(pool_buffers),
    };
    if dir.exists() && crate::cache::read_stamp(dir, STAMP_FILE) != Some(crate::cache::stamp(&spec))
    {
        crate::common::say(&format!(
            "{}: stamp missing or for another scale or index format; rebuilding",
            dir.display()
        ));
    }
    let cached = crate::cache::ensure(&spec, build, |db| hint_and_count(db, want, progress))?;
    if cached.reused {
        crate::common::say(&format!(
            "reusing {} ({}) in {}",
            want.scenario,
            describe_tables(&want.tables),
            dir.display()
        ));
    } else {
        crate::common::say(&format!(
            "built {} ({}) in {:.1} s in {}",
            want.scenario,
            describe_tables(&want.tables),
            cached.build_secs,
            dir.display()
        ));
    }
    Ok(Dataset {
        dir: cached.dir,
        stamp: want.clone(),
        reused: cached.reused,
        build_secs: cached.build_secs,
    })
}

/// Scan every table of `want` once (setting the hint bits), checking it
/// holds the rows the stamp will claim.
fn hint_and_count(db: &Database, want: &Stamp, progress: bool) -> Result<()> {
    for t in &want.tables {
        let pb = progress_bar(t.rows, progress, &format!("hinting {}", t.table));
        let txn = db.begin()?;
        let mut n = 0u64;
        for r in txn.scan(&t.table)? {
            r?;
            n += 1;
            if n.is_multiple_of(16_384) {
                pb.set_position(n);
            }
        }
        drop(txn);
        pb.finish_and_clear();
        if n != t.rows {
            return Err(BenchError::Data(format!(
                "built table {} holds {n} rows, expected {}",
                t.table, t.rows
            )));
        }
    }
    Ok(())
}

fn describe_tables(t: &[TableRows]) -> String {
    t.iter()
        .map(|t| format!("{} {} rows", t.table, t.rows))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `db.bulk_load` with a progress bar; prints rows, pages and time.
pub fn load(
    db: &Database,
    table: &str,
    rows: u64,
    data: impl IntoIterator<Item = Row>,
    progress: bool,
) -> Result<BulkProgress> {
    let pb = progress_bar(rows, progress, &format!("loading {table}: {rows} rows"));
    let p = db.bulk_load(table, data, |p| pb.set_position(p.rows))?;
    pb.finish_and_clear();
    println!(
        "loaded {table}: {} rows, {} pages in {:.1} s",
        p.rows,
        p.pages,
        p.elapsed.as_secs_f64()
    );
    Ok(p)
}

/// Create an index with a message (the build is entry by entry).
pub fn create_index(
    db: &Database,
    name: &str,
    table: &str,
    column: &str,
    unique: bool,
) -> Result<()> {
    let t = Instant::now();
    db.create_index(name, table, column, unique)?;
    println!(
        "created index {name} on {table}({column}) in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Relation ids counted separately by [`ReadCounts`]; larger ids share the
/// last slot.
const READ_SLOTS: usize = 2048;

/// Pages read from storage, per relation (the pool's misses).
#[derive(Debug)]
pub struct ReadCounts {
    slots: Box<[AtomicU64]>,
}

impl Default for ReadCounts {
    fn default() -> Self {
        ReadCounts {
            slots: (0..READ_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl ReadCounts {
    fn slot(rel: RelId) -> usize {
        (rel.0 as usize).min(READ_SLOTS - 1)
    }

    /// Reads of `rel` so far.
    pub fn get(&self, rel: RelId) -> u64 {
        self.slots[Self::slot(rel)].load(Ordering::Relaxed)
    }

    /// All counters at once (index = relation id).
    pub fn snapshot(&self) -> Vec<u64> {
        self.slots
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

impl StorageObserver for ReadCounts {
    fn on_read(&self, tag: BufferTag) {
        self.slots[Self::slot(tag.rel)].fetch_add(1, Ordering::Relaxed);
    }
}

/// `options` with the database's storage wrapped so that `counts` sees
/// every page read (the pool's misses), per relation.
pub fn count_reads(options: Options, counts: &Arc<ReadCounts>) -> Options {
    let counts = counts.clone();
    options.wrap_storage(move |inner| {
        Arc::new(ObservedStorage::new(inner, counts.clone())) as Arc<dyn StorageBackend>
    })
}

/// Open a data set for a measurement with `options` (its checksum setting
/// replaced by the stamp's), counting reads per relation.
pub fn open_counting(ds: &Dataset, options: Options) -> Result<(Database, Arc<ReadCounts>)> {
    let counts = Arc::new(ReadCounts::default());
    let options = count_reads(options.checksums(ds.stamp.checksums), &counts);
    Ok((Database::open(&ds.dir, options)?, counts))
}

/// Pages of one relation resident in the pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelPages {
    pub name: String,
    /// `table`, `index`, `clog`, `catalog` or `unknown`.
    pub kind: String,
    /// For an index, its table.
    pub table: Option<String>,
    pub rel: u32,
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

/// Resident pages per relation (main forks and others summed), most first.
/// Cheap: reads the buffer descriptors, no page.
pub fn residency(db: &Database) -> Vec<RelPages> {
    let mut by_rel: HashMap<u32, RelPages> = HashMap::new();
    for r in db.resident_pages() {
        by_rel
            .entry(r.rel.0)
            .or_insert_with(|| RelPages {
                name: r.name.clone(),
                kind: kind_name(r.kind).into(),
                table: r.table.clone(),
                rel: r.rel.0,
                pages: 0,
            })
            .pages += r.pages;
    }
    let mut v: Vec<RelPages> = by_rel.into_values().collect();
    v.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.rel.cmp(&b.rel)));
    v
}

/// Pages resident of the relations named (0 for one not resident).
pub fn resident_of(res: &[RelPages], names: &[&str]) -> usize {
    res.iter()
        .filter(|r| names.contains(&r.name.as_str()))
        .map(|r| r.pages)
        .sum()
}

/// Relation id, kind and size in pages of every table and index.
pub fn relation_sizes(db: &Database) -> Result<Vec<RelPages>> {
    let pool = db.pool();
    let mut v = Vec::new();
    for t in db.tables() {
        v.push(RelPages {
            name: t.name.clone(),
            kind: "table".into(),
            table: None,
            rel: t.rel.0,
            pages: pool.nblocks(RelFork::main(t.rel))? as usize,
        });
    }
    let tables = db.tables();
    for ix in db.indexes() {
        let table = tables
            .iter()
            .find(|t| t.rel == ix.table)
            .map(|t| t.name.clone());
        v.push(RelPages {
            name: ix.name.clone(),
            kind: "index".into(),
            table,
            rel: ix.rel.0,
            pages: pool.nblocks(RelFork::main(ix.rel))? as usize,
        });
    }
    Ok(v)
}

/// Count every table's rows and verify its indexes, in a database opened
/// with `options` (the stamp's checksum setting).
pub fn check(ds: &Dataset, options: Options, progress: bool) -> Result<DataCheck> {
    let db = Database::open(&ds.dir, options.checksums(ds.stamp.checksums))?;
    let mut check = DataCheck::new();
    for t in &ds.stamp.tables {
        let pb = progress_bar(
            t.rows,
            progress,
            &format!("data check: counting {}", t.table),
        );
        let txn = db.begin()?;
        let mut n = 0u64;
        for r in txn.scan(&t.table)? {
            r?;
            n += 1;
            if n.is_multiple_of(16_384) {
                pb.set_position(n);
            }
        }
        drop(txn);
        pb.set_message(format!("data check: verifying the indexes of {}", t.table));
        let violations = db.verify_indexes(&t.table)?;
        pb.finish_and_clear();
        check.add(TableCheck::new(&t.table, Some(t.rows), n, &violations));
    }
    db.close()?;
    Ok(check)
}

/// A "where the buffers went" table: one row per configuration, one column
/// per relation (pages resident at the end), then free buffers.
pub fn residency_table(
    labels: &[String],
    ends: &[&[RelPages]],
    pool_buffers: usize,
) -> crate::common::Table {
    let mut names: Vec<String> = Vec::new();
    for e in ends {
        for r in e.iter() {
            if !names.contains(&r.name) {
                names.push(r.name.clone());
            }
        }
    }
    let mut header = vec!["configuration".to_string()];
    header.extend(names.iter().cloned());
    header.push("free".into());
    let mut t = crate::common::Table {
        header,
        rows: Vec::new(),
    };
    for (label, e) in labels.iter().zip(ends) {
        let mut row = vec![label.clone()];
        let mut used = 0;
        for n in &names {
            let p = e.iter().find(|r| &r.name == n).map_or(0, |r| r.pages);
            used += p;
            row.push(p.to_string());
        }
        row.push(pool_buffers.saturating_sub(used).to_string());
        t.rows.push(row);
    }
    t
}

/// The text of a worker's panic.
pub fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// `a / b - 1` as a percentage (`None` when `b` is 0).
pub fn pct_change(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| 100.0 * (a / b - 1.0))
}
