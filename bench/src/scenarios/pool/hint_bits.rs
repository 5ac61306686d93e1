//! `hint-bits`: the first sequential scan of a freshly loaded table whose
//! tuples carry no hint bits yet (bench/SCENARIOS.md), per hint mode x checksums x
//! logged.
//!
//! ```text
//!   template (built once per scale and logged/unlogged, cached in --data-dir):
//!     WAL + pool + transaction manager + heap; N rows of (i64, i64, i64)
//!     inserted in committed transactions of 50,000; checkpoint; every page
//!     written. No reader has looked at a tuple, so none carries a hint.
//!
//!   one measured run (R repetitions x every configuration, repetition-major):
//!     copy the template directory -> run directory (unhinted, cold)
//!     open WAL + pool (checksums on/off) + transaction manager, recover
//!     warm: read_buffer every heap and clog page once (no visibility checks)
//!     ── timed ──────────────────────────────────────────────────────────
//!     one seq scan (no ring: the table fits the pool) that checks the
//!     visibility of every tuple and discards it; hints set per the mode:
//!       never      no hints (every tuple asks the commit log)
//!       per-tuple  one set_hints call (header-lock round trip) per tuple
//!       per-page   visibility of the whole page first, then one call
//!     ───────────────────────────────────────────────────────────────────
//!     pages dirtied (heap buffers dirty after minus before), WAL bytes
//!     inserted (full-page images for hints: checksums on + logged), the
//!     pool's hint counters; drop everything, delete the run directory
//! ```
//!
//! Every scan is on a fresh copy: the first scan sets the hints, a second
//! one on the same copy would measure a hinted table. Every scan must see
//! exactly N visible tuples, each of which still wanted a hint (the copy was
//! unhinted); otherwise the run is a failed run.
//!
//! Then the index part (the source's "plain index scan"), through the engine's
//! public API, over the same kind of table:
//!
//! ```text
//!   index template (one per logged x checksums: the engine records the
//!   checksum setting and refuses the other one; cached in --data-dir):
//!     Database::open (hint mode never); hb(id i64, k i64, neg i64) with a
//!     non-unique B-tree hb_k on k, k = a seeded random permutation of the
//!     ids; one bulk_load in id order (heap order = id order, key order a
//!     random walk over the heap); clean close; reopened to check it
//!     (verify_indexes, one index scan with hints off, nothing dirtied).
//!
//!   one measured run, per cell x repetition, after all the seq scans:
//!     copy the template; Database::open with the cell's pool, checksums and
//!     hint mode, no bgwriter, no checkpointer, pool >= table + index
//!     warm: read_buffer every page of table, index and commit log
//!     ── timed ──────────────────────────────────────────────────────────
//!     txn.index_range(hb_k, unbounded, unbounded): every row in key order;
//!     each entry is one heap fetch (Heap::fetch_with) of one tuple
//!     ───────────────────────────────────────────────────────────────────
//!     the same counters as the seq scan; close; delete the copy
//! ```
//!
//! A fetch has one tuple to look at, so `per-page` cannot batch: it is one
//! `set_hints` call per tuple, exactly as `per-tuple` (`Heap::fetch_with`),
//! and every fetch of a tuple on an already-dirtied page still makes its own
//! call. The index part's rows (`scan: "index"`) are in `index_rows`; each
//! scan must return keys 0, 1, 2, ... in order, each row `(id, k, -id)`,
//! every id once; `never` must dirty nothing, the other modes must make one
//! hint call per row (the copy was unhinted).

use std::fs;
use std::hint::black_box;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bufmgr::{BufferPool, FileStorage, PoolConfig, RelFork, RelId};
use clap::ValueEnum;
use engine::{
    CLOG_REL, Column, ColumnType, Database, FIRST_USER_REL, Options, Partitions, TableOptions,
    TransactionManager, Value, next_xid_hint, recover,
};
use heap::{Heap, HintMode, RingChoice, ScanOptions};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::harness::RowSeries;
use crate::latency::{self, Latencies};
use wal::{DEFAULT_SEGMENT_SIZE, Lsn, Record, RmgrKind, Wal, WalConfig};

use crate::check::DataCheck;
use crate::common::{
    self, BatchField, Config, CpuSample, Report, Settings, Table, Toggle, fmt_rate, fmt_ratio,
    progress_bar,
};
use crate::dirs::{copy_dir, io_error, remove_dir};
use crate::error::{BenchError, Result};
use crate::spread::Spread;

/// The table's relation.
pub const REL: RelId = FIRST_USER_REL;
/// Bytes of a row: three little-endian i64 columns `(id, id * 7, -id)`.
pub const ROW_LEN: usize = 24;
/// `--quick`: the pool (MiB) and the table (rows).
pub const QUICK_POOL_MIB: usize = 32;
pub const QUICK_ROWS: u64 = 100_000;
/// Default rows per 16,384 pool pages (128 MiB): 2 M rows are ~14,700 pages
/// (136 rows a page), 90% of the pool.
pub const ROWS_PER_DEFAULT_POOL: u64 = 2_000_000;
const DEFAULT_POOL_PAGES: u64 = 16_384;
/// Measured scans per configuration.
pub const DEFAULT_REPS: usize = 5;
pub const QUICK_REPS: usize = 3;
/// Rows per loading transaction.
pub const LOAD_BATCH: u64 = 50_000;
/// Pool pages the table must leave free (commit-log pages, headroom).
const POOL_HEADROOM: usize = 16;
/// The template marker: written last, so a half-built template is rebuilt.
const MARKER: &str = "TEMPLATE.json";
const TEMPLATE_FORMAT: u32 = 1;

/// `--mode`: which hint modes to run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeChoice {
    Never,
    PerTuple,
    PerPage,
    All,
}

impl ModeChoice {
    pub fn modes(self) -> Vec<HintMode> {
        match self {
            ModeChoice::Never => vec![HintMode::Never],
            ModeChoice::PerTuple => vec![HintMode::PerTuple],
            ModeChoice::PerPage => vec![HintMode::PerPage],
            ModeChoice::All => HintMode::ALL.to_vec(),
        }
    }
}

/// The options of `hint-bits` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct HintBitsArgs {
    /// Rows in the table [default: 2,000,000 per 128 MiB of pool; 100,000 with --quick]
    #[arg(long, value_name = "N")]
    pub rows: Option<u64>,
    /// Measured scans per configuration, each on a fresh copy [default: 5; 3 with --quick]
    #[arg(long, value_name = "N")]
    pub reps: Option<usize>,
    /// Hint modes [default: all]
    #[arg(long, value_enum)]
    pub mode: Option<ModeChoice>,
    /// Page checksums [default: both]
    #[arg(long, value_enum)]
    pub checksums: Option<Toggle>,
    /// A WAL-logged table (on) or an unlogged one (off) [default: both]
    #[arg(long, value_enum)]
    pub logged: Option<Toggle>,
}

/// What `hint-bits` runs, resolved from its options and `--quick`.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub rows: u64,
    pub reps: usize,
    pub modes: Vec<HintMode>,
    pub checksums: Vec<bool>,
    pub logged: Vec<bool>,
    /// Rows per loading transaction.
    pub load_batch: u64,
    /// WAL segment size (tests use small ones: every run copies the WAL).
    pub wal_segment_size: u64,
    /// Seed of the index part's key permutation (`--seed`, else
    /// [`PERMUTATION_SEED`]); part of its cached template's key.
    pub seed: u64,
}

impl Params {
    pub fn resolve(args: &HintBitsArgs, settings: &Settings) -> Result<Params> {
        let rows = match args.rows {
            Some(r) => r,
            None if settings.quick => QUICK_ROWS,
            None => ROWS_PER_DEFAULT_POOL * settings.pool_buffers as u64 / DEFAULT_POOL_PAGES,
        };
        let reps = match args.reps {
            Some(r) => r,
            None if settings.quick => QUICK_REPS,
            None => DEFAULT_REPS,
        };
        let p = Params {
            rows,
            reps,
            modes: args.mode.unwrap_or(ModeChoice::All).modes(),
            checksums: args.checksums.unwrap_or(Toggle::Both).values(),
            logged: args.logged.unwrap_or(Toggle::Both).values(),
            load_batch: LOAD_BATCH,
            wal_segment_size: DEFAULT_SEGMENT_SIZE,
            seed: settings.seed(PERMUTATION_SEED),
        };
        p.validate()?;
        Ok(p)
    }

    fn validate(&self) -> Result<()> {
        if self.rows == 0 || self.reps == 0 || self.load_batch == 0 {
            return Err(BenchError::Config(
                "--rows and --reps must be at least 1".into(),
            ));
        }
        Ok(())
    }

    fn wal_config(&self) -> WalConfig {
        WalConfig {
            segment_size: self.wal_segment_size,
            ..WalConfig::default()
        }
    }
}

/// One measured configuration: the pool's, the hint mode, checksums, logged.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub pool: Config,
    pub mode: HintMode,
    pub checksums: bool,
    pub logged: bool,
}

impl Cell {
    fn label(&self) -> String {
        format!(
            "{} checksums={} {}",
            self.mode,
            on_off(self.checksums),
            logged_name(self.logged)
        )
    }

    /// The trace file (`--trace`) of this cell's `rep`-th (from 0) `scan`
    /// ("seq" or "index"): every dimension in its name, e.g.
    /// `...-seq-per-page-checksums-on-logged-rep1`.
    fn trace_file(&self, settings: &Settings, scan: &str, rep: usize) -> Option<PathBuf> {
        let mode = self.mode.to_string();
        let checksums = format!("checksums-{}", on_off(self.checksums));
        let rep = format!("rep{}", rep + 1);
        settings.trace_for(
            &self.pool,
            &[scan, &mode, &checksums, logged_name(self.logged), &rep],
        )
    }

    /// Same pool, logged and checksums: the rows a mode ratio compares.
    fn same_group(&self, o: &Cell) -> bool {
        self.pool == o.pool && self.checksums == o.checksums && self.logged == o.logged
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn logged_name(logged: bool) -> &'static str {
    if logged { "logged" } else { "unlogged" }
}

/// The pool configurations of the matrix: the common options' matrix with
/// one thread (the scan is one client), without duplicates.
fn pool_configs(settings: &Settings) -> Vec<Config> {
    let mut out: Vec<Config> = Vec::new();
    for c in settings.configs() {
        let c = Config { threads: 1, ..c };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Every cell, mode innermost (the modes of one group run back to back).
pub fn cells(settings: &Settings, params: &Params) -> Vec<Cell> {
    let mut out = Vec::new();
    for pool in pool_configs(settings) {
        for &logged in &params.logged {
            for &checksums in &params.checksums {
                for &mode in &params.modes {
                    out.push(Cell {
                        pool,
                        mode,
                        checksums,
                        logged,
                    });
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Rows of the table
// ---------------------------------------------------------------------------

/// Row `id`: `(id, id * 7, -id)` as little-endian i64.
pub fn encode_row(id: u64) -> [u8; ROW_LEN] {
    let id = id as i64;
    let mut r = [0u8; ROW_LEN];
    r[..8].copy_from_slice(&id.to_le_bytes());
    r[8..16].copy_from_slice(&id.wrapping_mul(7).to_le_bytes());
    r[16..].copy_from_slice(&id.wrapping_neg().to_le_bytes());
    r
}

/// The id of a row, or what is wrong with it.
pub fn decode_row(r: &[u8]) -> std::result::Result<u64, String> {
    if r.len() != ROW_LEN {
        return Err(format!("a row of {} bytes, expected {ROW_LEN}", r.len()));
    }
    let col = |i: usize| i64::from_le_bytes(r[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    let id = col(0);
    if id < 0 || col(1) != id.wrapping_mul(7) || col(2) != id.wrapping_neg() {
        return Err(format!(
            "row ({}, {}, {}) is not (id, id * 7, -id)",
            col(0),
            col(1),
            col(2)
        ));
    }
    Ok(id as u64)
}

// ---------------------------------------------------------------------------
// A database directory
// ---------------------------------------------------------------------------

/// WAL, pool, transaction manager and the table of one directory.
struct Db {
    heap: Heap,
    tm: Arc<TransactionManager>,
    pool: Arc<BufferPool>,
    wal: Arc<Wal>,
}

/// Redo one record recovery hands on: heap records and the full-page
/// images logged for hints.
fn redo(
    record: &Record,
    end: Lsn,
    pool: &BufferPool,
) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match record.kind() {
        RmgrKind::Heap => heap::redo(record, end, pool)?,
        RmgrKind::FullPage => wal::redo_full_page(record, end, pool)?,
        kind => return Err(format!("no redo for a {kind:?} record").into()),
    }
    Ok(())
}

impl Db {
    /// Open `dir` (creating what is missing), recover, open the table.
    fn open(dir: &Path, params: &Params, pool: PoolConfig, logged: bool) -> Result<Db> {
        let wal = Arc::new(Wal::open(dir, params.wal_config())?);
        let storage = pool.open_storage(dir)?;
        let pool = Arc::new(BufferPool::with_wal(pool, storage, wal.clone())?);
        let tm = Arc::new(TransactionManager::open(
            pool.clone(),
            wal.clone(),
            next_xid_hint(&wal),
        )?);
        recover(&tm, |_start, end, record| redo(record, end, &pool))?;
        let heap = Heap::open(pool.clone(), Some(wal.clone()), REL, logged)?;
        Ok(Db {
            heap,
            tm,
            pool,
            wal,
        })
    }
}

// ---------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------

/// What a template holds (its marker file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateInfo {
    pub format: u32,
    pub rows: u64,
    pub row_len: usize,
    pub logged: bool,
    pub load_batch: u64,
    pub wal_segment_size: u64,
    /// Pages of the table.
    pub blocks: u32,
}

fn template_dir(settings: &Settings, params: &Params, logged: bool) -> PathBuf {
    settings.data_dir.join("hint-bits").join(format!(
        "{}-rows-{}",
        params.rows,
        logged_name(logged)
    ))
}

fn run_dir(settings: &Settings) -> PathBuf {
    settings.data_dir.join("hint-bits").join("run")
}

/// The template's marker if it matches `params` and its table file has the
/// size the marker says.
fn usable_template(dir: &Path, params: &Params, logged: bool) -> Option<TemplateInfo> {
    let text = fs::read_to_string(dir.join(MARKER)).ok()?;
    let info: TemplateInfo = serde_json::from_str(&text).ok()?;
    let want = TemplateInfo {
        format: TEMPLATE_FORMAT,
        rows: params.rows,
        row_len: ROW_LEN,
        logged,
        load_batch: params.load_batch,
        wal_segment_size: params.wal_segment_size,
        blocks: info.blocks,
    };
    let storage = FileStorage::open(dir).ok()?;
    let len = fs::metadata(bufmgr::StorageBackend::path(&storage, RelFork::main(REL)))
        .ok()?
        .len();
    (info == want && len == u64::from(info.blocks) * bufmgr::PAGE_SIZE as u64).then_some(info)
}

/// Build (or reuse) the template of `params.rows` rows, logged or not.
/// Returns its description and whether it was reused.
fn ensure_template(
    settings: &Settings,
    params: &Params,
    logged: bool,
) -> Result<(TemplateInfo, bool)> {
    let dir = template_dir(settings, params, logged);
    if let Some(info) = usable_template(&dir, params, logged) {
        println!(
            "reusing the {} table of {} rows ({} pages) in {}",
            logged_name(logged),
            info.rows,
            info.blocks,
            dir.display()
        );
        return Ok((info, true));
    }
    remove_dir(&dir)?;
    fs::create_dir_all(&dir).map_err(io_error("create", &dir))?;
    let started = Instant::now();
    let pool = PoolConfig::new(settings.pool_buffers)
        .partitions(1)
        .checksums(true)
        .io(settings.io)
        .direct_io(settings.direct_io)
        .mapped_reads(settings.mapped_reads);
    let db = Db::open(&dir, params, pool, logged)?;
    let pb = progress_bar(
        params.rows,
        settings.progress,
        &format!("loading {} rows ({})", params.rows, logged_name(logged)),
    );
    let mut id = 0;
    while id < params.rows {
        let end = (id + params.load_batch).min(params.rows);
        let txn = db.tm.begin()?;
        for i in id..end {
            db.heap.insert(txn.xid(), &encode_row(i))?;
            if i % 8192 == 0 {
                pb.set_position(i);
            }
        }
        txn.commit()?;
        id = end;
    }
    pb.set_message(format!("checkpoint ({})", logged_name(logged)));
    // The clog and a logged table's pages, with the redo point after every
    // insert (so a hint on a logged page needs a full-page image); then the
    // unlogged table's pages, which checkpoints leave alone.
    db.tm.checkpoint()?;
    db.pool.flush_all(true)?;
    db.wal.flush_all()?;
    // Check what was loaded, without setting a single hint.
    pb.set_message(format!("checking ({})", logged_name(logged)));
    let (seen, sum) = count_rows(&db, HintMode::Never)?;
    let want_sum = params.rows * (params.rows - 1) / 2;
    if seen != params.rows || sum != want_sum {
        return Err(BenchError::Data(format!(
            "the loaded table has {seen} rows (id sum {sum}), expected {} (id sum {want_sum})",
            params.rows
        )));
    }
    let blocks = db.heap.nblocks()?;
    let dirty = dirty_pages(&db.pool, REL);
    if dirty != 0 {
        return Err(BenchError::Data(format!(
            "checking the loaded table dirtied {dirty} pages (hints were set)"
        )));
    }
    drop(db);
    pb.finish_and_clear();
    let info = TemplateInfo {
        format: TEMPLATE_FORMAT,
        rows: params.rows,
        row_len: ROW_LEN,
        logged,
        load_batch: params.load_batch,
        wal_segment_size: params.wal_segment_size,
        blocks,
    };
    let marker = dir.join(MARKER);
    let text = serde_json::to_string_pretty(&info).expect("plain fields serialise");
    fs::write(&marker, text + "\n").map_err(io_error("write", &marker))?;
    println!(
        "built the {} table: {} rows in {blocks} pages ({} MiB) in {:.1} s, in {}",
        logged_name(logged),
        params.rows,
        (u64::from(blocks) * bufmgr::PAGE_SIZE as u64) >> 20,
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok((info, false))
}

/// Scan every visible row checking it; returns (rows, sum of ids).
fn count_rows(db: &Db, mode: HintMode) -> Result<(u64, u64)> {
    let snap = db.tm.snapshot();
    let (mut n, mut sum, mut bad) = (0u64, 0u64, None);
    let opts = ScanOptions {
        ring: RingChoice::Never,
        hint_mode: mode,
    };
    db.heap
        .scan_with(&snap, &*db.tm, opts, |tid, row| match decode_row(row) {
            Ok(id) => {
                n += 1;
                sum = sum.wrapping_add(id);
            }
            Err(e) => {
                bad.get_or_insert_with(|| format!("{tid:?}: {e}"));
            }
        })?;
    match bad {
        Some(e) => Err(BenchError::Data(e)),
        None => Ok((n, sum)),
    }
}

/// Dirty buffers of `rel` in `pool` now.
fn dirty_pages(pool: &BufferPool, rel: RelId) -> u64 {
    pool.buffercache()
        .iter()
        .filter(|r| r.dirty && r.tag.is_some_and(|t| t.rel == rel))
        .count() as u64
}

// ---------------------------------------------------------------------------
// Measuring
// ---------------------------------------------------------------------------

/// One scan of one fresh copy.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub scan_ms: f64,
    /// Tuples handed to the scan's closure.
    pub tuples_seen: u64,
    /// What the scan reported.
    pub tuples_checked: u64,
    pub tuples_visible: u64,
    pub hints_wanted: u64,
    pub hint_calls: u64,
    pub pages: u64,
    /// Pages read from storage during the scan (0: the warm-up held them all).
    pub pages_read: u64,
    pub pages_dirtied: u64,
    pub wal_bytes: u64,
    /// WAL segments created during the scan (each zero-filled and fsynced
    /// by the inserting thread, i.e. by the scan).
    pub wal_segments_created: u64,
    pub hint_fpis: u64,
    /// Cores other processes used during the scan (`None`: no `/proc`).
    pub other_cores: Option<f64>,
    /// The pool's live miss-ratio curve after the scan (`--mrc`).
    pub curve: Option<common::Curve>,
}

/// Copy the template, open it, warm the pool, time one scan.
fn measure_once(
    template: &Path,
    run: &Path,
    settings: &Settings,
    params: &Params,
    cell: &Cell,
    rep: usize,
) -> Result<Sample> {
    remove_dir(run)?;
    copy_dir(template, run, &[MARKER])?;
    let trace = cell.trace_file(settings, "seq", rep);
    let config = settings
        .pool_config(&cell.pool)
        .checksums(cell.checksums)
        .trace(trace.clone());
    let db = Db::open(run, params, config, cell.logged)?;
    // Warm-up: every page of the table and of the commit log read once,
    // without looking at a tuple, so the timed scan reads no page.
    for rel in [REL, CLOG_REL] {
        let rf = RelFork::main(rel);
        for block in 0..db.pool.nblocks(rf)? {
            drop(db.pool.read_buffer(rf, block, None)?);
        }
    }
    let snap = db.tm.snapshot();
    let opts = ScanOptions {
        ring: RingChoice::Never,
        hint_mode: cell.mode,
    };
    let dirty_before = dirty_pages(&db.pool, REL);
    let (pool_before, wal_before) = (db.pool.stats(), db.wal.stats());
    let mut seen = 0u64;
    let cpu_before = CpuSample::now();
    let started = Instant::now();
    let s = db.heap.scan_with(&snap, &*db.tm, opts, |tid, row| {
        black_box((tid, row));
        seen += 1;
    })?;
    let elapsed = started.elapsed();
    let cpu_after = CpuSample::now();
    let (pool_after, wal_after) = (db.pool.stats(), db.wal.stats());
    let dirty_after = dirty_pages(&db.pool, REL);
    let pool = pool_after.since(&pool_before);
    let sample = Sample {
        scan_ms: elapsed.as_secs_f64() * 1e3,
        tuples_seen: seen,
        tuples_checked: s.visibility.tuples_checked,
        tuples_visible: s.visibility.tuples_visible,
        hints_wanted: s.visibility.hints_wanted,
        hint_calls: s.visibility.hint_calls,
        pages: s.pages,
        pages_read: pool.totals().reads,
        pages_dirtied: dirty_after.saturating_sub(dirty_before),
        wal_bytes: wal_after.bytes - wal_before.bytes,
        wal_segments_created: wal_after.segments_created - wal_before.segments_created,
        hint_fpis: pool.hint_fpis,
        other_cores: cpu_before
            .zip(cpu_after)
            .map(|(a, b)| b.cores_since(&a, elapsed.as_secs_f64()).1),
        curve: common::curve_of_pool(&db.pool),
    };
    common::note_trace(settings, trace, &db.pool)?;
    drop(db);
    remove_dir(run)?;
    Ok(sample)
}

// ---------------------------------------------------------------------------
// The index scan (the source's "plain index scan"), through engine::Database
// ---------------------------------------------------------------------------

/// The index-scan table: `(id, k, neg)`, all i64, `k` = a random permutation
/// of the ids, `neg = -id`; loaded in id order, so heap order is id order.
pub const INDEX_TABLE: &str = "hb";
/// The non-unique B-tree on `hb.k`: key order is a random walk over the heap.
pub const INDEX_NAME: &str = "hb_k";
/// Seed of the permutation held in `k` without `--seed`.
pub const PERMUTATION_SEED: u64 = 0x5eed_0003;
const INDEX_TEMPLATE_FORMAT: u32 = 1;
/// Pool pages the index part leaves free beyond table + index (catalog,
/// commit log, headroom).
const INDEX_POOL_HEADROOM: usize = 256;

/// What an index-scan template holds (its marker file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexTemplateInfo {
    pub format: u32,
    pub rows: u64,
    pub logged: bool,
    /// The engine records the checksum setting at creation and refuses to
    /// open a directory with the other one: one template per setting.
    pub checksums: bool,
    pub wal_segment_size: u64,
    pub seed: u64,
    pub table_rel: u32,
    pub index_rel: u32,
    pub table_pages: u32,
    pub index_pages: u32,
}

fn index_template_dir(
    settings: &Settings,
    params: &Params,
    logged: bool,
    checksums: bool,
) -> PathBuf {
    // The seed is part of the key, so a run with another `--seed` builds
    // its own template beside the default one instead of replacing it (the
    // default keeps the name it had before the seed could change).
    let seed = if params.seed == PERMUTATION_SEED {
        String::new()
    } else {
        format!("-seed-{}", params.seed)
    };
    settings.data_dir.join("hint-bits").join(format!(
        "{}-rows-{}-checksums-{}{seed}-index",
        params.rows,
        logged_name(logged),
        on_off(checksums)
    ))
}

/// `0..rows` shuffled with `seed`.
pub fn permutation(rows: u64, seed: u64) -> Vec<i64> {
    let mut p: Vec<i64> = (0..rows as i64).collect();
    p.shuffle(&mut SmallRng::seed_from_u64(seed));
    p
}

fn index_columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::new("k", ColumnType::I64),
        Column::new("neg", ColumnType::I64),
    ]
}

/// Engine options for the index part: the pool of `cell`'s configuration
/// with `buffers` pages, no background writer and no checkpointer (nothing
/// runs beside the timed scan), the hint mode of the cell, `--io` and
/// `--direct`.
fn engine_options(
    settings: &Settings,
    pool: &Config,
    buffers: usize,
    params: &Params,
    checksums: bool,
    mode: HintMode,
) -> Options {
    Options::new()
        .pool_buffers(buffers)
        // As every pool scenario's: no first-touch page fault in a window.
        .prefault_pool(true)
        .evictor(pool.evictor)
        .sweep_batch(pool.batch)
        .partitions(Partitions::Count(pool.partitions))
        .huge_pages(pool.huge_pages)
        .rings(pool.ring)
        .checksums(checksums)
        .hint_mode(mode)
        .bgwriter(None)
        .checkpointer(false)
        .wal_segment_size(params.wal_segment_size)
        .io(settings.io)
        .direct_io(settings.direct_io)
        .mapped_reads(settings.mapped_reads)
        .miss_ratio_curve(settings.measures.mrc.then(|| common::mrc_config(buffers)))
}

/// The checks every index scan makes on the rows it is handed: keys
/// `0, 1, 2, ...` in order (the permutation, read back sorted), each row
/// `(id, k, -id)`, every id once (count and sum).
#[derive(Debug, Default)]
struct IndexScanCheck {
    seen: u64,
    ok: u64,
    id_sum: u64,
    error: Option<String>,
}

impl IndexScanCheck {
    #[inline]
    fn row(&mut self, row: &[Value]) {
        let want = self.seen as i64;
        self.seen += 1;
        match row {
            [Value::I64(id), Value::I64(k), Value::I64(neg)]
                if *k == want && *id >= 0 && *neg == id.wrapping_neg() =>
            {
                self.ok += 1;
                self.id_sum = self.id_sum.wrapping_add(*id as u64);
            }
            _ => {
                self.error
                    .get_or_insert_with(|| format!("entry {want} of the index scan is {row:?}"));
            }
        }
    }

    /// What is wrong with the whole scan of a table of `rows` rows.
    fn verdict(&self, rows: u64) -> Option<String> {
        let want_sum = rows.wrapping_mul(rows.wrapping_sub(1)) / 2;
        if let Some(e) = &self.error {
            Some(e.clone())
        } else if self.seen != rows || self.ok != rows || self.id_sum != want_sum {
            Some(format!(
                "the index scan saw {} rows ({} well-formed, id sum {}), expected {rows} (id sum {want_sum})",
                self.seen, self.ok, self.id_sum
            ))
        } else {
            None
        }
    }
}

/// Scan the whole index in key order through `txn`, checking every row.
fn index_scan(txn: &engine::Transaction, check: &mut IndexScanCheck) -> Result<()> {
    for r in txn.index_range(INDEX_NAME, Bound::Unbounded, Bound::Unbounded)? {
        let (_, row) = r?;
        check.row(&row);
    }
    Ok(())
}

/// The marker if it matches and the table and index files have the sizes
/// it names.
fn usable_index_template(
    dir: &Path,
    params: &Params,
    logged: bool,
    checksums: bool,
) -> Option<IndexTemplateInfo> {
    let text = fs::read_to_string(dir.join(MARKER)).ok()?;
    let info: IndexTemplateInfo = serde_json::from_str(&text).ok()?;
    let want = IndexTemplateInfo {
        format: INDEX_TEMPLATE_FORMAT,
        rows: params.rows,
        logged,
        checksums,
        wal_segment_size: params.wal_segment_size,
        seed: params.seed,
        ..info.clone()
    };
    let storage = FileStorage::open(dir).ok()?;
    let size = |rel: u32| {
        fs::metadata(bufmgr::StorageBackend::path(
            &storage,
            RelFork::main(RelId(rel)),
        ))
        .ok()
        .map(|m| m.len())
    };
    let page = bufmgr::PAGE_SIZE as u64;
    (info == want
        && size(info.table_rel)? == u64::from(info.table_pages) * page
        && size(info.index_rel)? == u64::from(info.index_pages) * page)
        .then_some(info)
}

/// Build (or reuse) the index-scan template for `logged` x `checksums`:
/// an engine database with the table and its index, loaded by one
/// `bulk_load` into the indexed table (entries added row by row, keys in
/// random order), closed cleanly. Nothing has read a tuple: unhinted.
fn ensure_index_template(
    settings: &Settings,
    params: &Params,
    logged: bool,
    checksums: bool,
) -> Result<(IndexTemplateInfo, bool)> {
    let dir = index_template_dir(settings, params, logged, checksums);
    let what = format!("{} checksums={}", logged_name(logged), on_off(checksums));
    if let Some(info) = usable_index_template(&dir, params, logged, checksums) {
        println!(
            "reusing the indexed {what} table of {} rows ({} + {} index pages) in {}",
            info.rows,
            info.table_pages,
            info.index_pages,
            dir.display()
        );
        return Ok((info, true));
    }
    remove_dir(&dir)?;
    fs::create_dir_all(&dir).map_err(io_error("create", &dir))?;
    let started = Instant::now();
    // Large enough for table + index (~75 rows a page together); the
    // checkpointer recycles the load's WAL, so copies stay small.
    let buffers = settings.pool_buffers.max(params.rows as usize / 40 + 1024);
    let pb = progress_bar(
        params.rows,
        settings.progress,
        &format!("loading {} indexed rows ({what})", params.rows),
    );
    let (table_rel, index_rel) =
        load_index_template(dir.as_path(), params, logged, checksums, buffers, &pb)?;
    // Check it with hints off: the index against the heap, one index scan,
    // and nothing dirtied (no hint was set).
    pb.set_message(format!("checking ({what})"));
    let (table_pages, index_pages) = check_index_template(
        dir.as_path(),
        params,
        checksums,
        buffers,
        table_rel,
        index_rel,
    )?;
    pb.finish_and_clear();
    let info = IndexTemplateInfo {
        format: INDEX_TEMPLATE_FORMAT,
        rows: params.rows,
        logged,
        checksums,
        wal_segment_size: params.wal_segment_size,
        seed: params.seed,
        table_rel: table_rel.0,
        index_rel: index_rel.0,
        table_pages,
        index_pages,
    };
    let marker = dir.join(MARKER);
    let text = serde_json::to_string_pretty(&info).expect("plain fields serialise");
    fs::write(&marker, text + "\n").map_err(io_error("write", &marker))?;
    println!(
        "built the indexed {what} table: {} rows in {table_pages} pages + {index_pages} index pages \
         in {:.1} s, in {}",
        params.rows,
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok((info, false))
}

/// Create the indexed table and its index in `dir` and load them with
/// `params.rows` rows, keys in random order; closed after. Returns the
/// table's and the index's relation.
fn load_index_template(
    dir: &Path,
    params: &Params,
    logged: bool,
    checksums: bool,
    buffers: usize,
    pb: &indicatif::ProgressBar,
) -> Result<(RelId, RelId)> {
    let opts = Options::new()
        .pool_buffers(buffers)
        .checksums(checksums)
        .hint_mode(HintMode::Never)
        .wal_segment_size(params.wal_segment_size);
    let db = Database::open(dir, opts)?;
    db.create_table_with(
        INDEX_TABLE,
        index_columns(),
        TableOptions {
            logged,
            ..TableOptions::default()
        },
    )?;
    db.create_index(INDEX_NAME, INDEX_TABLE, "k", false)?;
    let perm = permutation(params.rows, params.seed);
    let rows = perm.iter().enumerate().map(|(id, &k)| {
        vec![
            Value::I64(id as i64),
            Value::I64(k),
            Value::I64(-(id as i64)),
        ]
    });
    db.bulk_load(INDEX_TABLE, rows, |p| pb.set_position(p.rows))?;
    drop(perm);
    let table_rel = db.table(INDEX_TABLE)?.rel;
    let index_rel = db
        .indexes()
        .into_iter()
        .find(|i| i.name == INDEX_NAME)
        .map(|i| i.rel)
        .ok_or_else(|| BenchError::Data(format!("index {INDEX_NAME} missing after creation")))?;
    db.close()?;
    Ok((table_rel, index_rel))
}

/// Check the loaded template with hints off: the index against the heap,
/// one index scan, and nothing dirtied (no hint was set). Returns the
/// table's and the index's page counts.
fn check_index_template(
    dir: &Path,
    params: &Params,
    checksums: bool,
    buffers: usize,
    table_rel: RelId,
    index_rel: RelId,
) -> Result<(u32, u32)> {
    let db = Database::open(dir, opts_never(buffers, params, checksums))?;
    let violations = db.verify_indexes(INDEX_TABLE)?;
    if let Some(v) = violations.first() {
        return Err(BenchError::Data(format!(
            "the loaded index has {} violations, the first: {v:?}",
            violations.len()
        )));
    }
    let mut check = IndexScanCheck::default();
    {
        let txn = db.begin()?;
        index_scan(&txn, &mut check)?;
        txn.rollback()?;
    }
    if let Some(e) = check.verdict(params.rows) {
        return Err(BenchError::Data(format!("the loaded indexed table: {e}")));
    }
    let dirty = dirty_pages(db.pool(), table_rel);
    if dirty != 0 {
        return Err(BenchError::Data(format!(
            "checking the loaded indexed table dirtied {dirty} pages (hints were set)"
        )));
    }
    let table_pages = db.pool().nblocks(RelFork::main(table_rel))?;
    let index_pages = db.pool().nblocks(RelFork::main(index_rel))?;
    db.close()?;
    Ok((table_pages, index_pages))
}

fn opts_never(buffers: usize, params: &Params, checksums: bool) -> Options {
    Options::new()
        .pool_buffers(buffers)
        .checksums(checksums)
        .hint_mode(HintMode::Never)
        .bgwriter(None)
        .checkpointer(false)
        .wal_segment_size(params.wal_segment_size)
}

/// Copy the index template, open it, warm the pool (table, index, commit
/// log), time one ordered scan of the whole index fetching every row.
/// Returns the sample and what was wrong with the scan, if anything.
fn measure_index_once(
    template: &Path,
    run: &Path,
    settings: &Settings,
    params: &Params,
    cell: &Cell,
    info: &IndexTemplateInfo,
    (buffers, rep): (usize, usize),
) -> Result<(Sample, Option<String>)> {
    remove_dir(run)?;
    copy_dir(template, run, &[MARKER])?;
    let trace = cell.trace_file(settings, "index", rep);
    let opts = engine_options(
        settings,
        &cell.pool,
        buffers,
        params,
        cell.checksums,
        cell.mode,
    );
    let db = Database::open(run, opts.trace(trace.clone()))?;
    let pool = db.pool().clone();
    let table = RelId(info.table_rel);
    for rel in [table, RelId(info.index_rel), CLOG_REL] {
        let rf = RelFork::main(rel);
        for block in 0..pool.nblocks(rf)? {
            drop(pool.read_buffer(rf, block, None)?);
        }
    }
    let txn = db.begin()?;
    let dirty_before = dirty_pages(&pool, table);
    let (pool_before, wal_before) = (pool.stats(), db.wal_stats());
    let mut check = IndexScanCheck::default();
    let cpu_before = CpuSample::now();
    let started = Instant::now();
    index_scan(&txn, &mut check)?;
    let elapsed = started.elapsed();
    let cpu_after = CpuSample::now();
    let (pool_after, wal_after) = (pool.stats(), db.wal_stats());
    let dirty_after = dirty_pages(&pool, table);
    txn.rollback()?;
    let stats = pool_after.since(&pool_before);
    let sample = Sample {
        scan_ms: elapsed.as_secs_f64() * 1e3,
        tuples_seen: check.seen,
        tuples_checked: check.ok,
        tuples_visible: check.seen,
        // One set_hints call per fetch that found a hint to set.
        hints_wanted: stats.hints_set,
        hint_calls: stats.hints_set,
        pages: u64::from(info.table_pages),
        pages_read: stats.totals().reads,
        pages_dirtied: dirty_after.saturating_sub(dirty_before),
        wal_bytes: wal_after.bytes - wal_before.bytes,
        wal_segments_created: wal_after.segments_created - wal_before.segments_created,
        hint_fpis: stats.hint_fpis,
        other_cores: cpu_before
            .zip(cpu_after)
            .map(|(a, b)| b.cores_since(&a, elapsed.as_secs_f64()).1),
        curve: common::curve_of(&db),
    };
    let error = check.verdict(params.rows).or_else(|| {
        if cell.mode == HintMode::Never {
            (sample.pages_dirtied != 0 || sample.hint_calls != 0).then(|| {
                format!(
                    "hints off, yet {} pages dirtied and {} hint calls",
                    sample.pages_dirtied, sample.hint_calls
                )
            })
        } else {
            (sample.hint_calls != params.rows).then(|| {
                format!(
                    "only {} of {} fetches set a hint: the copy was not unhinted",
                    sample.hint_calls, params.rows
                )
            })
        }
    });
    common::note_trace(settings, trace, &pool)?;
    drop(pool);
    db.close()?;
    remove_dir(run)?;
    Ok((sample, error))
}

/// What the index part of a run produced.
struct IndexPart {
    rows: Vec<Row>,
    ratios: Vec<Ratio>,
    data_check: DataCheck,
    table_pages: u32,
    index_pages: u32,
    pool_buffers: usize,
    reused: bool,
}

/// The index template of each (logged, checksums) pair the cells use,
/// built or reused; and whether every one was reused.
#[allow(clippy::type_complexity)]
fn index_templates(
    settings: &Settings,
    params: &Params,
    cells: &[Cell],
) -> Result<(Vec<((bool, bool), IndexTemplateInfo)>, bool)> {
    let mut templates: Vec<((bool, bool), IndexTemplateInfo)> = Vec::new();
    let mut reused = true;
    for c in cells {
        let key = (c.logged, c.checksums);
        if !templates.iter().any(|(k, _)| *k == key) {
            let (info, r) = ensure_index_template(settings, params, c.logged, c.checksums)?;
            reused &= r;
            templates.push((key, info));
        }
    }
    Ok((templates, reused))
}

/// The largest table and index of `templates` in pages, and the pool that
/// holds both: the scenario's pool, or larger (printed).
fn index_pool(
    settings: &Settings,
    templates: &[((bool, bool), IndexTemplateInfo)],
) -> (u32, u32, usize) {
    let table_pages = templates
        .iter()
        .map(|(_, i)| i.table_pages)
        .max()
        .unwrap_or(0);
    let index_pages = templates
        .iter()
        .map(|(_, i)| i.index_pages)
        .max()
        .unwrap_or(0);
    // The pool holds table and index: the scenario's pool, or larger.
    let buffers = settings
        .pool_buffers
        .max(table_pages as usize + index_pages as usize + INDEX_POOL_HEADROOM);
    println!(
        "index scan: table {table_pages} pages + index {index_pages} pages, pool of {buffers} buffers \
         ({} MiB){}",
        (buffers * bufmgr::PAGE_SIZE) >> 20,
        if buffers > settings.pool_buffers {
            " (raised so that table and index fit)"
        } else {
            ""
        }
    );
    (table_pages, index_pages, buffers)
}

/// After the seq scans: build or reuse the index templates, then measure
/// every cell `reps` times with an ordered index scan.
fn run_index_part(settings: &Settings, params: &Params, cells: &[Cell]) -> Result<IndexPart> {
    let (templates, reused) = index_templates(settings, params, cells)?;
    let (table_pages, index_pages, buffers) = index_pool(settings, &templates);
    let run = run_dir(settings);
    let total = cells.len() * params.reps;
    let pb = progress_bar(total as u64, settings.progress, "hint-bits (index scan)");
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cells.len()];
    let mut errors = vec![0u64; cells.len()];
    let mut first_error = None;
    for rep in 0..params.reps {
        for (i, cell) in cells.iter().enumerate() {
            let label = format!(
                "[{}/{}] index scan {}",
                rep * cells.len() + i + 1,
                total,
                cell.label()
            );
            pb.set_message(label.clone());
            let info = &templates
                .iter()
                .find(|(k, _)| *k == (cell.logged, cell.checksums))
                .expect("a template per (logged, checksums)")
                .1;
            let template = index_template_dir(settings, params, cell.logged, cell.checksums);
            // The one client is this thread: trace thread 0.
            let (s, e) = common::as_trace_thread(0, || {
                measure_index_once(
                    &template,
                    &run,
                    settings,
                    params,
                    cell,
                    info,
                    (buffers, rep),
                )
            })?;
            if let Some(e) = e {
                errors[i] += 1;
                first_error.get_or_insert_with(|| format!("index scan {}: {e}", cell.label()));
            }
            pb.suspend(|| {
                eprintln!(
                    "{label}: {:.1} ms, {} pages dirtied, {} WAL bytes",
                    s.scan_ms, s.pages_dirtied, s.wal_bytes
                )
            });
            samples[i].push(s);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let mut rows: Vec<Row> = cells
        .iter()
        .zip(&samples)
        .zip(&errors)
        .map(|((c, s), e)| Row {
            scan: "index".into(),
            ..make_row(c, s, params, *e)
        })
        .collect();
    let ratios = compare(cells, &mut rows);
    Ok(IndexPart {
        rows,
        ratios,
        data_check: DataCheck::scans(total as u64, params.rows, first_error),
        table_pages,
        index_pages,
        pool_buffers: buffers,
        reused,
    })
}

// ---------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------

/// One configuration over its repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// `seq` (the heap scan) or `index` (the ordered index scan).
    #[serde(default = "seq_scan")]
    pub scan: String,
    /// `never`, `per-tuple` or `per-page`.
    pub mode: String,
    pub checksums: bool,
    pub logged: bool,
    pub evictor: String,
    pub batch: BatchField,
    pub partitions: usize,
    pub threads: usize,
    pub huge_pages: bool,
    pub ring: bool,
    /// Scans measured (each on a fresh copy).
    pub reps: usize,
    /// Every scan's time, in run order: the distribution, not one number.
    pub scan_ms: Vec<f64>,
    pub scan_ms_median: f64,
    pub scan_ms_min: f64,
    pub scan_ms_max: f64,
    /// Visible tuples / median scan time.
    pub tuples_per_sec: f64,
    /// Visible tuples per scan (the same in every repetition, or a data error).
    pub tuples_visible: u64,
    pub pages: u64,
    /// Median over the repetitions of the figures below (they do not vary).
    pub pages_dirtied: u64,
    pub wal_bytes: u64,
    /// Full-page images the pool logged for hints.
    pub hint_fpis: u64,
    /// `set_hints` calls (header-lock round trips).
    pub hint_calls: u64,
    /// Pages read from storage during the scans (max; 0 = CPU-bound).
    pub pages_read: u64,
    /// WAL segments the scan created (zero-filled and fsynced on its path).
    pub wal_segments_created: u64,
    /// Cores other processes used during the scans, mean over the
    /// repetitions (`None` where `/proc` cannot be read): more than a few
    /// hundredths means the scans competed for CPU.
    pub other_cores_used: Option<f64>,
    /// Median scan time / the `never` row's, same checksums and logged.
    pub vs_never: Option<f64>,
    /// On `per-tuple` rows: median scan time / the `per-page` row's.
    pub vs_per_page: Option<f64>,
    /// On checksums-on rows: median scan time / the checksums-off row's.
    pub vs_checksums_off: Option<f64>,
    /// Scans that saw the wrong number of tuples, or a hinted copy.
    pub data_errors: u64,
    /// Flattened into the row: `latency` (`scan`: the timed scans of the
    /// row, one per repetition), `seed` (the index part's permutation
    /// seed, `--seed`; the seq part draws nothing), `intervals` (always
    /// empty: see [`run`]) and `mrc` (`--mrc`: the pool's live curve after
    /// the row's last scan; else `null`).
    #[serde(flatten, default)]
    pub series: RowSeries,
}

/// The operation kind of the latency table: one timed scan.
pub const SCAN: &str = "scan";

fn seq_scan() -> String {
    "seq".into()
}

/// One of the comparisons the scenario exists for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// `per-page/never`, `per-tuple/per-page` or `checksums on/off`.
    pub compare: String,
    /// The mode of a checksums comparison.
    pub mode: Option<String>,
    /// The checksums of a mode comparison.
    pub checksums: Option<bool>,
    pub logged: bool,
    pub evictor: String,
    pub batch: BatchField,
    pub partitions: usize,
    pub huge_pages: bool,
    pub ring: bool,
    /// Ratio of the median scan times (> 1: the first is slower).
    pub scan_ms_median: f64,
    /// Ratio of the fastest scans.
    pub scan_ms_min: f64,
    /// Whether the two configurations' scan times lie apart (every scan of
    /// one faster than every scan of the other, [`Spread::apart`]): only
    /// then is the ratio quoted as a difference. `None` with fewer than two
    /// scans each (no spread to judge by).
    #[serde(default)]
    pub apart: Option<bool>,
}

/// A finished `hint-bits` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HintBitsReport {
    pub scenario: String,
    pub table_rows: u64,
    pub row_bytes: usize,
    /// Pages of the table (logged; the unlogged one has as many).
    pub table_pages: u32,
    pub pool_buffers: usize,
    pub cores: usize,
    pub reps: usize,
    pub load_batch: u64,
    pub reused_data: bool,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    pub data_check: DataCheck,
    /// The index part: pages of the indexed table and of its index, and the
    /// pool it ran with (raised above `pool_buffers` if both did not fit).
    #[serde(default)]
    pub index_table_pages: u32,
    #[serde(default)]
    pub index_pages: u32,
    #[serde(default)]
    pub index_pool_buffers: usize,
    /// One row per configuration (`scan`: `index`), as `rows`.
    #[serde(default)]
    pub index_rows: Vec<Row>,
    #[serde(default)]
    pub index_ratios: Vec<Ratio>,
    #[serde(default)]
    pub index_data_check: Option<DataCheck>,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn median_u64(v: impl Iterator<Item = u64>) -> u64 {
    let mut s: Vec<u64> = v.collect();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

/// What is wrong with a sample, if anything.
fn sample_error(s: &Sample, rows: u64) -> Option<String> {
    if s.tuples_seen != rows || s.tuples_visible != rows || s.tuples_checked != rows {
        Some(format!(
            "the scan saw {} visible tuples ({} reported, {} checked), expected {rows}",
            s.tuples_seen, s.tuples_visible, s.tuples_checked
        ))
    } else if s.hints_wanted != rows {
        Some(format!(
            "only {} of {rows} tuples wanted a hint: the copy was not unhinted",
            s.hints_wanted
        ))
    } else {
        None
    }
}

fn make_row(cell: &Cell, samples: &[Sample], params: &Params, errors: u64) -> Row {
    let rows = params.rows;
    let times: Vec<f64> = samples.iter().map(|s| s.scan_ms).collect();
    let mut latency = Latencies::new();
    for &ms in &times {
        latency.record(SCAN, std::time::Duration::from_secs_f64(ms / 1e3));
    }
    let med = median(&times);
    let m = |f: fn(&Sample) -> u64| median_u64(samples.iter().map(f));
    Row {
        scan: "seq".into(),
        mode: cell.mode.name().into(),
        checksums: cell.checksums,
        logged: cell.logged,
        evictor: cell.pool.evictor.name().into(),
        batch: cell.pool.batch.into(),
        partitions: cell.pool.partitions,
        threads: 1,
        huge_pages: cell.pool.huge_pages,
        ring: cell.pool.ring,
        reps: samples.len(),
        scan_ms_median: med,
        scan_ms_min: times.iter().copied().fold(f64::INFINITY, f64::min),
        scan_ms_max: times.iter().copied().fold(0.0, f64::max),
        scan_ms: times,
        tuples_per_sec: if med > 0.0 {
            rows as f64 / (med / 1e3)
        } else {
            0.0
        },
        tuples_visible: m(|s| s.tuples_visible),
        pages: m(|s| s.pages),
        pages_dirtied: m(|s| s.pages_dirtied),
        wal_bytes: m(|s| s.wal_bytes),
        hint_fpis: m(|s| s.hint_fpis),
        hint_calls: m(|s| s.hint_calls),
        pages_read: samples.iter().map(|s| s.pages_read).max().unwrap_or(0),
        wal_segments_created: m(|s| s.wal_segments_created),
        other_cores_used: samples
            .iter()
            .map(|s| s.other_cores)
            .sum::<Option<f64>>()
            .map(|t| t / samples.len().max(1) as f64),
        vs_never: None,
        vs_per_page: None,
        vs_checksums_off: None,
        data_errors: errors,
        series: RowSeries {
            latency: latency.by_kind(),
            // Every repetition scans a fresh copy the same way: the last
            // one's curve stands for the row.
            mrc: samples.last().and_then(|s| s.curve.clone()),
            seed: params.seed,
            ..RowSeries::default()
        },
    }
}

/// Fill the ratio columns and list the comparisons.
fn compare(cells: &[Cell], rows: &mut [Row]) -> Vec<Ratio> {
    let find = |pred: &dyn Fn(&Cell) -> bool| cells.iter().position(pred);
    let mut ratios = Vec::new();
    let mut out = |rows: &[Row], a: usize, b: usize, compare: &str, by_mode: bool| {
        let (ra, rb) = (&rows[a], &rows[b]);
        let c = &cells[a];
        ratios.push(Ratio {
            compare: compare.into(),
            mode: by_mode.then(|| ra.mode.clone()),
            checksums: (!by_mode).then_some(ra.checksums),
            logged: ra.logged,
            evictor: ra.evictor.clone(),
            batch: ra.batch.clone(),
            partitions: c.pool.partitions,
            huge_pages: c.pool.huge_pages,
            ring: c.pool.ring,
            scan_ms_median: ra.scan_ms_median / rb.scan_ms_median,
            scan_ms_min: ra.scan_ms_min / rb.scan_ms_min,
            apart: match (Spread::of(&ra.scan_ms), Spread::of(&rb.scan_ms)) {
                (Some(x), Some(y)) if x.n > 1 && y.n > 1 => Some(x.apart(&y)),
                _ => None,
            },
        });
        ra.scan_ms_median / rb.scan_ms_median
    };
    for (i, c) in cells.iter().enumerate() {
        if c.mode != HintMode::Never
            && let Some(j) = find(&|o| o.same_group(c) && o.mode == HintMode::Never)
        {
            let r = if c.mode == HintMode::PerPage {
                out(rows, i, j, "per-page/never", false)
            } else {
                rows[i].scan_ms_median / rows[j].scan_ms_median
            };
            rows[i].vs_never = Some(r);
        }
        if c.mode == HintMode::PerTuple
            && let Some(j) = find(&|o| o.same_group(c) && o.mode == HintMode::PerPage)
        {
            rows[i].vs_per_page = Some(out(rows, i, j, "per-tuple/per-page", false));
        }
        if c.checksums
            && let Some(j) = find(&|o| {
                o.pool == c.pool && o.mode == c.mode && o.logged == c.logged && !o.checksums
            })
        {
            rows[i].vs_checksums_off = Some(out(rows, i, j, "checksums on/off", true));
        }
    }
    ratios
}

/// Build or reuse the tables, measure every cell `reps` times, report.
///
/// `--report-interval` does not apply: each measured scan is one scan of
/// milliseconds between two directory copies, the configurations taken in
/// turn, so an interval would hold at most a scan or two of different
/// configurations; a line on stderr says it is not followed.
pub fn run(settings: &Settings, params: &Params) -> Result<HintBitsReport> {
    params.validate()?;
    if settings.measures.report_interval.is_some() {
        eprintln!(
            "hint-bits: --report-interval does not apply (each measurement is one scan of \
             milliseconds on a fresh copy); no interval series"
        );
    }
    let cells = cells(settings, params);
    println!(
        "== hint-bits: the first seq scan of an unhinted table of {} rows x {ROW_LEN} bytes; \
         {} scans per configuration, each on a fresh copy; pool of {} buffers ({} MiB), {} cores",
        params.rows,
        params.reps,
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        common::cores(),
    );
    let mut templates = Vec::new();
    let mut reused = true;
    for &logged in &params.logged {
        let (info, r) = ensure_template(settings, params, logged)?;
        reused &= r;
        if info.blocks as usize + POOL_HEADROOM > settings.pool_buffers {
            return Err(BenchError::Config(format!(
                "the table of {} rows has {} pages, which with {POOL_HEADROOM} pages of headroom \
                 does not fit the pool of {} buffers: lower --rows or raise --pool-mib",
                params.rows, info.blocks, settings.pool_buffers
            )));
        }
        templates.push((logged, info));
    }
    let table_pages = templates.iter().map(|(_, i)| i.blocks).max().unwrap_or(0);
    println!(
        "table: {table_pages} pages = {:.0}% of the pool",
        100.0 * f64::from(table_pages) / settings.pool_buffers as f64
    );
    let run = run_dir(settings);
    let total = cells.len() * params.reps;
    let pb = progress_bar(total as u64, settings.progress, "hint-bits");
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); cells.len()];
    let mut errors = vec![0u64; cells.len()];
    let mut first_error = None;
    for rep in 0..params.reps {
        for (i, cell) in cells.iter().enumerate() {
            let label = format!("[{}/{}] {}", rep * cells.len() + i + 1, total, cell.label());
            pb.set_message(label.clone());
            let template = template_dir(settings, params, cell.logged);
            // The one client is this thread: trace thread 0.
            let s = common::as_trace_thread(0, || {
                measure_once(&template, &run, settings, params, cell, rep)
            })?;
            if let Some(e) = sample_error(&s, params.rows) {
                errors[i] += 1;
                first_error.get_or_insert_with(|| format!("{}: {e}", cell.label()));
            }
            pb.suspend(|| {
                eprintln!(
                    "{label}: {:.1} ms, {} pages dirtied, {} WAL bytes",
                    s.scan_ms, s.pages_dirtied, s.wal_bytes
                )
            });
            samples[i].push(s);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let mut rows: Vec<Row> = cells
        .iter()
        .zip(&samples)
        .zip(&errors)
        .map(|((c, s), e)| make_row(c, s, params, *e))
        .collect();
    let ratios = compare(&cells, &mut rows);
    let data_check = DataCheck::scans(total as u64, params.rows, first_error);
    let index = run_index_part(settings, params, &cells)?;
    reused &= index.reused;
    Ok(HintBitsReport {
        scenario: "hint-bits".into(),
        table_rows: params.rows,
        row_bytes: ROW_LEN,
        table_pages,
        pool_buffers: settings.pool_buffers,
        cores: common::cores(),
        reps: params.reps,
        load_batch: params.load_batch,
        reused_data: reused,
        rows,
        ratios,
        data_check,
        index_table_pages: index.table_pages,
        index_pages: index.index_pages,
        index_pool_buffers: index.pool_buffers,
        index_rows: index.rows,
        index_ratios: index.ratios,
        index_data_check: Some(index.data_check),
    })
}

impl HintBitsReport {
    /// The comparisons of the closing note, median (and fastest) scan time
    /// ratios side by side.
    fn render_ratios(ratios: &[Ratio]) -> String {
        let mut out = String::new();
        for compare in ["per-page/never", "per-tuple/per-page", "checksums on/off"] {
            let parts: Vec<String> = ratios
                .iter()
                .filter(|q| q.compare == compare)
                .map(|q| {
                    let what = match (&q.mode, q.checksums) {
                        (Some(m), _) => m.clone(),
                        (None, Some(c)) => format!("checksums {}", on_off(c)),
                        (None, None) => String::new(),
                    };
                    match q.apart {
                        Some(false) => format!(
                            "{} {what} within the run-to-run spread (the scan times overlap)",
                            logged_name(q.logged)
                        ),
                        _ => format!(
                            "{} {what} {} (min {}){}",
                            logged_name(q.logged),
                            fmt_ratio(Some(q.scan_ms_median)),
                            fmt_ratio(Some(q.scan_ms_min)),
                            if q.apart.is_none() {
                                ", one scan each: no spread to judge by"
                            } else {
                                ""
                            }
                        ),
                    }
                })
                .collect();
            if !parts.is_empty() {
                out += &format!("{compare:>19}: {}\n", parts.join(", "));
            }
        }
        out
    }
}

impl HintBitsReport {
    /// The index-scan table, its notes and its data check.
    fn render_index_part(&self, several_pools: bool) -> String {
        if self.index_rows.is_empty() {
            return String::new();
        }
        let t = rows_table(&self.index_rows, several_pools);
        let mut out = format!(
            "\nhint-bits, ordered index scan ({} rows in {} pages + {} index pages, k a random \
             permutation of the heap order; pool of {} buffers, {} scans per row):\n{t}",
            self.table_rows,
            self.index_table_pages,
            self.index_pages,
            self.index_pool_buffers,
            self.reps,
        );
        out += "one Transaction::index_range over every key of a fresh unhinted copy, pool warm \
                (table, index, commit log): one heap fetch per entry, pages visited in random \
                order; a fetch hints its one tuple, so per-page is one set_hints call per tuple \
                like per-tuple (the batch needs a page's worth of tuples, which an index fetch \
                does not have); dirtied: heap pages\n";
        out += &Self::render_ratios(&self.index_ratios);
        let per_mode: Vec<String> = self
            .index_rows
            .iter()
            .filter_map(|ix| {
                let seq = self.rows.iter().find(|r| {
                    r.mode == ix.mode
                        && r.checksums == ix.checksums
                        && r.logged == ix.logged
                        && pool_label(r) == pool_label(ix)
                })?;
                Some(format!(
                    "{} {} checksums {} {}",
                    logged_name(ix.logged),
                    ix.mode,
                    on_off(ix.checksums),
                    fmt_ratio(Some(seq.tuples_per_sec / ix.tuples_per_sec))
                ))
            })
            .collect();
        if !per_mode.is_empty() {
            out += &format!("{:>19}: {}\n", "seq/index tuples/s", per_mode.join(", "));
        }
        let segments = self
            .index_rows
            .iter()
            .map(|r| r.wal_segments_created)
            .max()
            .unwrap_or(0);
        if segments > 0 {
            out += &format!(
                "note: index scans that logged hint images created up to {segments} WAL segments each\n"
            );
        }
        let read = self
            .index_rows
            .iter()
            .map(|r| r.pages_read)
            .max()
            .unwrap_or(0);
        if read > 0 {
            out += &format!(
                "note: some index scans read up to {read} pages from storage (the warm-up did not hold table and index)\n"
            );
        }
        if let Some(c) = &self.index_data_check {
            match c.ok_scans() {
                Some((runs, rows)) => {
                    out += &format!(
                        "data check: {runs} index scans each saw {rows} rows in key order, \
                         every id once\n"
                    )
                }
                None => out += &c.render(),
            }
        }
        out
    }
}

/// The pool configuration of a row, for the table.
fn pool_label(r: &Row) -> String {
    format!(
        "{} batch={} partitions={} huge={} ring={}",
        r.evictor,
        r.batch,
        r.partitions,
        on_off(r.huge_pages),
        on_off(r.ring)
    )
}

/// WAL bytes for a table: bytes below 10 KiB, else MiB.
fn fmt_bytes(b: u64) -> String {
    if b < 10 * 1024 {
        b.to_string()
    } else {
        format!("{:.1}M", b as f64 / (1024.0 * 1024.0))
    }
}

/// The table of `rows` (one scan kind), with the pool column if the rows
/// ran with several pool configurations.
fn rows_table(rows: &[Row], several_pools: bool) -> Table {
    let mut header = vec![
        "mode",
        "checksums",
        "table",
        "median ms",
        "min ms",
        "max ms",
        "tuples/s",
        "dirtied",
        "WAL bytes",
        "hint FPIs",
        "hint calls",
        "vs never",
        "tuple/page",
        "cks on/off",
        "others",
    ];
    if several_pools {
        header.push("pool");
    }
    let mut t = Table::new(&header);
    for r in rows {
        let mut cells = vec![
            r.mode.clone(),
            on_off(r.checksums).into(),
            logged_name(r.logged).into(),
            format!("{:.1}", r.scan_ms_median),
            format!("{:.1}", r.scan_ms_min),
            format!("{:.1}", r.scan_ms_max),
            fmt_rate(r.tuples_per_sec),
            r.pages_dirtied.to_string(),
            fmt_bytes(r.wal_bytes),
            r.hint_fpis.to_string(),
            r.hint_calls.to_string(),
            fmt_ratio(r.vs_never),
            fmt_ratio(r.vs_per_page),
            fmt_ratio(r.vs_checksums_off),
            r.other_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
        ];
        if several_pools {
            cells.push(pool_label(r));
        }
        t.push(cells);
    }
    t
}

impl Report for HintBitsReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut pools: Vec<String> = self.rows.iter().map(pool_label).collect();
        pools.dedup();
        let several_pools = pools.len() > 1;
        let t = rows_table(&self.rows, several_pools);
        let mut out = format!(
            "\nhint-bits ({} rows in {} pages, pool of {} buffers, {} scans per row{}):\n{t}",
            self.table_rows,
            self.table_pages,
            self.pool_buffers,
            self.reps,
            if several_pools {
                String::new()
            } else {
                format!(", pool {}", pools.first().map_or("?", |s| s.as_str()))
            }
        );
        out += "median/min/max: one seq scan of a fresh unhinted copy, pool warm; tuples/s from the \
                median; dirtied: heap pages the scan dirtied; WAL bytes: inserted during the scan \
                (hint FPIs: full-page images for hints); hint calls: set_hints round trips; \
                vs never / tuple/page / cks on/off: ratios of median scan times \
                (per-page|per-tuple over never, per-tuple over per-page, checksums on over off); \
                others: cores other processes used during the scans\n";
        out += &Self::render_ratios(&self.ratios);
        let segments: u64 = self
            .rows
            .iter()
            .map(|r| r.wal_segments_created)
            .max()
            .unwrap_or(0);
        if segments > 0 {
            out += &format!(
                "note: scans that logged hint images created up to {segments} WAL segments each \
                 (16 MiB zero-filled and fsynced by the inserting thread, i.e. inside the timed scan)\n"
            );
        }
        let read: u64 = self.rows.iter().map(|r| r.pages_read).max().unwrap_or(0);
        if read > 0 {
            out += &format!(
                "note: some scans read up to {read} pages from storage (the warm-up did not hold the table)\n"
            );
        }
        match self.data_check.ok_scans() {
            Some((runs, tuples)) => {
                out += &format!(
                    "data check: {runs} scans each saw {tuples} visible, unhinted tuples\n"
                )
            }
            None => out += &self.data_check.render(),
        }
        out += &self.render_index_part(several_pools);
        let lat: Vec<(String, &latency::ByKind, Option<&common::Curve>)> = self
            .rows
            .iter()
            .chain(&self.index_rows)
            .map(|r| {
                (
                    format!(
                        "{} {} cks={} {}",
                        r.scan,
                        r.mode,
                        on_off(r.checksums),
                        logged_name(r.logged)
                    ),
                    &r.series.latency,
                    r.series.mrc.as_ref(),
                )
            })
            .collect();
        out += &latency::tables_with_curves(&lat);
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.data_errors > 0)
            .map(|r| {
                format!(
                    "{} bad scans with {} checksums={} {}",
                    r.data_errors,
                    r.mode,
                    on_off(r.checksums),
                    logged_name(r.logged)
                )
            })
            .collect();
        if let Some(e) = &self.data_check.error {
            f.push(format!("data check: {e}"));
        }
        f.extend(
            self.index_rows
                .iter()
                .filter(|r| r.data_errors > 0)
                .map(|r| {
                    format!(
                        "{} bad index scans with {} checksums={} {}",
                        r.data_errors,
                        r.mode,
                        on_off(r.checksums),
                        logged_name(r.logged)
                    )
                }),
        );
        if let Some(e) = self
            .index_data_check
            .as_ref()
            .and_then(|c| c.error.as_ref())
        {
            f.push(format!("index data check: {e}"));
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ratio(apart: Option<bool>) -> Ratio {
        Ratio {
            compare: "per-page/never".into(),
            mode: None,
            checksums: Some(false),
            logged: false,
            evictor: "clock".into(),
            batch: BatchField::Fixed(1),
            partitions: 1,
            huge_pages: false,
            ring: false,
            scan_ms_median: 1.13,
            scan_ms_min: 1.04,
            apart,
        }
    }

    #[test]
    fn the_index_part_opens_with_the_io_backend_and_direct_io_asked_for() {
        let args = crate::common::CommonArgs {
            io: Some(bufmgr::IoMode::IoUring),
            direct: true,
            ..Default::default()
        };
        let settings = args
            .resolve(&crate::scenarios::ScenarioKind::HintBits(HintBitsArgs::default()).defaults())
            .unwrap();
        let params = Params::resolve(&HintBitsArgs::default(), &settings).unwrap();
        let pool = settings.configs()[0];
        let o = engine_options(&settings, &pool, 64, &params, true, HintMode::PerPage);
        assert_eq!((o.io, o.direct_io), (bufmgr::IoMode::IoUring, true));
    }

    #[test]
    fn a_ratio_whose_scan_times_overlap_is_not_quoted() {
        let out = HintBitsReport::render_ratios(&[ratio(Some(false))]);
        assert!(out.contains("within the run-to-run spread"), "{out}");
        assert!(!out.contains("1.13"), "{out}");
        let out = HintBitsReport::render_ratios(&[ratio(Some(true))]);
        assert!(out.contains("1.13") && !out.contains("spread"), "{out}");
        let out = HintBitsReport::render_ratios(&[ratio(None)]);
        assert!(out.contains("1.13") && out.contains("no spread"), "{out}");
    }

    #[test]
    fn rows_round_trip_and_damage_is_caught() {
        for id in [0, 1, 77, 1 << 40] {
            assert_eq!(decode_row(&encode_row(id)).unwrap(), id);
        }
        let mut r = encode_row(5);
        r[9] ^= 1;
        assert!(decode_row(&r).is_err());
        assert!(decode_row(&r[..20]).is_err());
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median_u64([5, 1, 3].into_iter()), 3);
    }
}
