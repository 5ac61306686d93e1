//! `bench tpcc`: TPC-C on the engine (bench/SCENARIOS.md, "tpcc").
//!
//! - `spec`: the scale, the spec's random functions and each
//!   transaction's input, independent of the database;
//! - `schema`: the nine tables, their keys and secondary indexes, and the
//!   initial population;
//! - `backend`: the traits a database implements to run it;
//! - `checks`: consistency conditions 1 to 4;
//! - `engine_side`: the engine's backend (schema, load, the five
//!   transactions);
//! - `driver`: the terminal threads, the mix, counts and latencies, and
//!   the analytic threads beside them;
//! - `analytic`: the CH-benCHmark queries Q1, Q4, Q6 and Q12 (engine plans
//!   and SQL);
//! - `sqlite_side`: the same on SQLite (`--features sqlite` only);
//! - `versus`: `--versus-sqlite`, the engine and SQLite side by side;
//! - `report`: the rows, the table, the JSON and the throughput plot;
//! - `crash`: the crash-recovery check (a child killed with SIGKILL).
//!
//! The run: the data set for `--warehouses` is built once and cached
//! (`<data-dir>/tpcc/w<N>`); each cell of the matrix (evictor x ring x
//! terminal threads x analytic threads) copies it and opens the copy with
//! a pool of `--pool-fraction` of the data's pages (unless `--pool-mib` or
//! `--pool-pages` sets it), runs the terminals for the warm-up and then
//! for the measured window, checks consistency conditions 1-4 and fails
//! the run if one does not hold.

pub mod analytic;
pub mod backend;
pub mod checks;
pub mod crash;
pub mod driver;
pub mod engine_side;
pub mod report;
pub mod schema;
pub mod spec;
#[cfg(feature = "sqlite")]
pub mod sqlite_side;
pub mod versus;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{Database, Options, Partitions};

use crate::common::{self, Config, Defaults, EvictorChoice, Settings};
use crate::dataset::{self, ReadCounts};
use crate::error::{BenchError, Result};
use analytic::Query;
use backend::Backend;
use driver::KindRow;
use driver::{Limit, drive, drive_with_analytics};
use engine_side::EngineBackend;
use report::{QueryRow, RelationRow, Row, TpccReport};
use spec::{Scale, TxnKind};

pub const NAME: &str = "tpcc";
/// The pool's share of the data's pages when no pool size is given.
pub const DEFAULT_POOL_FRACTION: Fraction = Fraction(250);
/// Seed of the run-time NURand constants and the terminals' draws.
pub const DEFAULT_SEED: u64 = 1;
/// Bump when the schema or the population changes: cached data sets of
/// another format are rebuilt.
const FORMAT: u32 = 1;
const STAMP_FILE: &str = "TPCC_STAMP.json";
/// The most terminal or analytic threads one cell runs: a count past this
/// is refused up front (each is an OS thread, and one that cannot be
/// started aborts the process).
pub const MAX_THREADS: u16 = 1_024;

/// A fraction in thousandths, for `--pool-fraction` (`0.25` or `25%`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fraction(pub u32);

impl Fraction {
    pub fn value(self) -> f64 {
        f64::from(self.0) / 1000.0
    }
}

impl FromStr for Fraction {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Fraction, String> {
        let (text, scale) = match s.strip_suffix('%') {
            Some(p) => (p, 100.0),
            None => (s, 1.0),
        };
        let v: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a fraction (0.25 or 25%)"))?;
        let v = v / scale;
        if !(v > 0.0 && v <= 4.0) {
            return Err(format!(
                "{s:?}: the pool fraction must be above 0 and at most 4 (400%)"
            ));
        }
        // Kept in thousandths: a finer fraction would be silently another.
        let thousandths = (v * 1000.0).round();
        if thousandths < 1.0 || (v * 1000.0 - thousandths).abs() > 1e-6 {
            return Err(format!(
                "{s:?}: the pool fraction is kept to a thousandth (0.001 or 0.1%)"
            ));
        }
        Ok(Fraction(thousandths as u32))
    }
}

/// Up to four analytic thread counts, for `--analytic-threads 0,1`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ThreadCounts {
    counts: [u16; 4],
    len: u8,
}

impl ThreadCounts {
    pub fn new(counts: &[u16]) -> ThreadCounts {
        let mut c = [0; 4];
        let len = counts.len().min(4);
        c[..len].copy_from_slice(&counts[..len]);
        ThreadCounts {
            counts: c,
            len: len as u8,
        }
    }

    pub fn as_slice(&self) -> &[u16] {
        &self.counts[..self.len as usize]
    }
}

impl FromStr for ThreadCounts {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ThreadCounts, String> {
        let v = s
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u16>()
                    .map_err(|_| format!("{p:?} is not a thread count"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        if v.is_empty() || v.len() > 4 {
            return Err(format!("{s:?}: give 1 to 4 comma-separated counts"));
        }
        if let Some(n) = v.iter().find(|&&n| n > MAX_THREADS) {
            return Err(format!("{n} analytic threads: at most {MAX_THREADS}"));
        }
        Ok(ThreadCounts::new(&v))
    }
}

/// The options of `tpcc` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Warehouses (the spec's scale per warehouse: 100,000 items and stock
    /// rows, 10 districts of 3,000 customers and orders) [default: 1]
    #[arg(long, value_name = "N")]
    pub warehouses: Option<u32>,
    /// The pool as a fraction of the loaded data's pages, `0.25` or `25%`
    /// (--pool-mib / --pool-pages set it directly instead) [default: 25%]
    #[arg(long, value_name = "F")]
    pub pool_fraction: Option<Fraction>,
    /// Analytic (CH-benCHmark Q1, Q4, Q6, Q12) query threads beside the
    /// terminals, comma-separated: `0,1` runs each cell without and with
    /// one [default: 0]
    #[arg(long, value_name = "N[,N...]")]
    pub analytic_threads: Option<ThreadCounts>,
    /// Instead of the matrix, the engine and SQLite side by side at 1 and
    /// 2 terminals with the data in memory (needs `--features sqlite`)
    #[arg(long)]
    pub versus_sqlite: bool,
    /// Seed of the run-time NURand constants and the terminals' draws
    /// [default: 1]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// The reduced scale of the tests (1 warehouse, 1,000 items, 2
    /// districts of 60 customers): a smoke run of a few seconds
    #[arg(long)]
    pub tiny: bool,
    /// After the matrix, a crash-recovery check: a child process runs the
    /// terminals on a copy of the data for the window's length, is killed
    /// with SIGKILL, and conditions 1-4 are checked after recovery
    #[arg(long)]
    pub crash: bool,
    /// Only build (or reuse) the data set and report its load time and
    /// size on disk: no terminals. A load is timed only when the data set
    /// is not cached yet
    #[arg(long, conflicts_with_all = ["versus_sqlite", "crash", "analytic_threads"])]
    pub load_only: bool,
}

/// Defaults: clock, HOT/COOL and probation, ring on and off, 2 terminals
/// (one per core here), 4 s windows after 1 s of warm-up.
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.duration = Duration::from_secs(4);
    d.warmup = Duration::from_secs(1);
    d.threads = vec![common::cores().max(2)];
    d.batches = vec![common::DEFAULT_BATCHES[0]];
    d.evictor = EvictorChoice::All;
    d.quick_threads = vec![common::cores().max(2)];
    d
}

/// `bench tpcc` runs ring on and off unless `--ring` says; the pool is
/// sized by `--pool-fraction` unless `--pool-mib` / `--pool-pages` is
/// given (then `pool_buffers` is that size; 0 here means "by fraction").
pub fn adjust_settings(args: &common::CommonArgs, s: &mut Settings) {
    if args.ring.is_none() {
        s.rings = vec![true, false];
    }
    if args.pool_mib.is_none() && args.pool_pages.is_none() {
        s.pool_buffers = 0;
    }
}

/// `--load-only` runs no terminal, so an option that shapes only the run
/// would be accepted and do nothing: refused instead, naming the options.
/// The pool options stay allowed (the report names the pool a run would
/// open), as do `--io` and `--direct` (the load opens the database with
/// them) and the output options.
pub fn refuse_run_options_with_load_only(common: &common::CommonArgs, args: &Args) -> Result<()> {
    if !args.load_only {
        return Ok(());
    }
    let given = [
        ("--duration", common.duration.is_some()),
        ("--warmup", common.warmup.is_some()),
        ("--threads", common.threads.is_some()),
        ("--evictor", common.evictor.is_some()),
        ("--batch", common.batch.is_some()),
        ("--partitions", common.partitions.is_some()),
        ("--ring", common.ring.is_some()),
        ("--huge-pages", common.huge_pages.is_some()),
        ("--optimistic", common.optimistic.is_some()),
        ("--trace", common.trace.is_some()),
        ("--watch", common.watch),
        ("--mrc", common.mrc),
        ("--report-interval", common.report_interval.is_some()),
        ("--pin-threads", common.pin_threads),
        ("--seed", args.seed.is_some() || common.seed.is_some()),
    ];
    let named: Vec<&str> = given
        .iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect();
    if named.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Config(format!(
            "--load-only runs no terminal, so {} would do nothing: leave {} out",
            named.join(", "),
            if named.len() == 1 { "it" } else { "them" }
        )))
    }
}

/// Everything one run needs, resolved from the options.
#[derive(Clone, Debug)]
pub struct Params {
    pub scale: Scale,
    pub pool_fraction: Fraction,
    pub analytic_threads: Vec<u16>,
    pub seed: u64,
}

impl Params {
    pub fn resolve(args: &Args, settings: &Settings) -> Result<Params> {
        if let Some(n) = settings
            .threads
            .iter()
            .find(|&&n| n > usize::from(MAX_THREADS))
        {
            return Err(BenchError::Config(format!(
                "--threads {n}: tpcc runs at most {MAX_THREADS} terminals"
            )));
        }
        let warehouses = args.warehouses.unwrap_or(1);
        let scale = if args.tiny {
            Scale::tiny().with_warehouses(warehouses)?
        } else {
            Scale::standard(warehouses)?
        };
        if args.pool_fraction.is_some() && settings.pool_buffers != 0 {
            return Err(BenchError::Config(
                "--pool-fraction and --pool-mib/--pool-pages both size the pool: give one".into(),
            ));
        }
        // Checked before the data set is loaded: a run would fail only after
        // the load, and `--load-only` would report a pool no run can open.
        if settings.pool_buffers != 0 && settings.pool_buffers < engine::MIN_POOL_BUFFERS {
            return Err(BenchError::Config(format!(
                "--pool-pages/--pool-mib: a pool of {} buffers is below the engine's \
                 minimum of {}",
                settings.pool_buffers,
                engine::MIN_POOL_BUFFERS
            )));
        }
        let analytic = args
            .analytic_threads
            .map_or_else(|| vec![0], |t| t.as_slice().to_vec());
        Ok(Params {
            scale,
            pool_fraction: args.pool_fraction.unwrap_or(DEFAULT_POOL_FRACTION),
            analytic_threads: analytic,
            seed: args.seed.unwrap_or(DEFAULT_SEED),
        })
    }
}

fn scale_tag(scale: &Scale) -> String {
    if *scale == Scale::standard(scale.warehouses).unwrap_or(*scale) {
        format!("w{}", scale.warehouses)
    } else {
        format!(
            "w{}-i{}-d{}-c{}",
            scale.warehouses, scale.items, scale.districts, scale.customers
        )
    }
}

/// The cached data set of `scale`: its directory, data pages, whether it
/// was reused, and the load's seconds (0 when reused).
#[derive(Clone, Debug)]
pub struct CachedData {
    pub dir: PathBuf,
    pub data_pages: u64,
    pub reused: bool,
    pub load_secs: f64,
    /// Bytes of the data set's directory (tables, indexes, WAL, catalog).
    pub bytes: u64,
}

/// The database options a data set is built with (and must be opened
/// with: the checksum setting is recorded at creation).
pub fn build_options() -> Options {
    Options::new()
        .pool_buffers(16_384)
        .checksums(dataset::CHECKSUMS)
        .partitions(Partitions::Count(1))
}

/// Build (or reuse) the data set of `scale` under `data_dir`.
pub fn ensure_data(data_dir: &Path, scale: &Scale, progress: bool) -> Result<CachedData> {
    let dir = data_dir.join(NAME).join(scale_tag(scale));
    let key = serde_json::json!({
        "format": FORMAT,
        "scenario": NAME,
        "warehouses": scale.warehouses,
        "items": scale.items,
        "districts": scale.districts,
        "customers": scale.customers,
        "new_orders": scale.new_orders,
        "last_names": scale.last_names,
        "checksums": dataset::CHECKSUMS,
    });
    let spec = crate::cache::Spec {
        dir: &dir,
        stamp_file: STAMP_FILE,
        key,
        options: build_options(),
    };
    let cached = crate::cache::ensure(
        &spec,
        |db| {
            let pb = common::progress_bar(0, progress, &format!("{NAME}: loading"));
            let backend = EngineBackend::new(db.clone());
            backend.load(scale, &mut |table, rows| {
                pb.set_message(format!("{NAME}: loading {table}"));
                pb.set_position(rows);
            })?;
            pb.finish_and_clear();
            Ok(())
        },
        |db| {
            let report = EngineBackend::new(db.clone()).check(scale)?;
            if report.passed() {
                Ok(())
            } else {
                Err(BenchError::Data(format!(
                    "{NAME}: the loaded data fails: {}",
                    report.describe()
                )))
            }
        },
    )?;
    let data_pages = crate::dirs::dir_bytes(&dir.join("base")) / 8192;
    let bytes = crate::dirs::dir_bytes(&dir);
    Ok(CachedData {
        dir,
        data_pages,
        reused: cached.reused,
        load_secs: cached.build_secs,
        bytes,
    })
}

/// Run the matrix.
pub fn run(settings: &Settings, args: &Args) -> Result<TpccReport> {
    let params = Params::resolve(args, settings)?;
    let data = ensure_data(&settings.data_dir, &params.scale, settings.progress)?;
    let pool_buffers = if settings.pool_buffers == 0 {
        ((data.data_pages as f64 * params.pool_fraction.value()).round() as usize).max(64)
    } else {
        settings.pool_buffers
    };
    common::say(&format!(
        "== {NAME}: {} warehouse(s), data {} pages ({}), pool {pool_buffers} buffers; \
         {:.1} s windows after {:.1} s warm-up",
        params.scale.warehouses,
        data.data_pages,
        if data.reused {
            "cached".to_string()
        } else {
            format!("loaded in {:.1} s", data.load_secs)
        },
        settings.duration.as_secs_f64(),
        settings.warmup.as_secs_f64(),
    ));
    let run_dir = settings.data_dir.join(NAME).join("run");
    let mut rows = Vec::new();
    if args.load_only {
        return Ok(TpccReport {
            crash: None,
            scale: params.scale,
            seed: params.seed,
            pool_buffers,
            data_pages: data.data_pages,
            data_bytes: data.bytes,
            load_secs: data.load_secs,
            reused: data.reused,
            load_only: true,
            duration: settings.duration,
            warmup: settings.warmup,
            rows,
            versus: Vec::new(),
        });
    }
    let versus = if args.versus_sqlite {
        versus::run(settings, &params, &data)?
    } else {
        Vec::new()
    };
    let configs = if args.versus_sqlite {
        Vec::new()
    } else {
        settings.configs()
    };
    for config in configs {
        for &analytic in &params.analytic_threads {
            let row = measure(
                settings,
                &params,
                &data,
                &run_dir,
                pool_buffers,
                &config,
                analytic,
            )?;
            rows.push(row);
        }
    }
    let crash = if args.crash {
        crate::dirs::remove_dir(&run_dir)?;
        crate::dirs::copy_dir(&data.dir, &run_dir, &["LOCK"])?;
        let exe = std::env::current_exe().map_err(|source| BenchError::Io {
            op: "find",
            path: "the bench executable".into(),
            source,
        })?;
        common::tell(&format!("{NAME}: crash-recovery check"));
        let threads = settings.threads.iter().copied().max().unwrap_or(2);
        Some(crash::crash_and_check(
            &exe,
            &run_dir,
            &params.scale,
            threads,
            pool_buffers,
            settings.duration,
            params.seed,
        )?)
    } else {
        None
    };
    crate::dirs::remove_dir(&run_dir)?;
    Ok(TpccReport {
        crash,
        scale: params.scale,
        seed: params.seed,
        pool_buffers,
        data_pages: data.data_pages,
        data_bytes: data.bytes,
        load_secs: data.load_secs,
        reused: data.reused,
        load_only: false,
        duration: settings.duration,
        warmup: settings.warmup,
        rows,
        versus,
    })
}

/// An error opening the run's copy; when the copy's files are damaged, the
/// damage came from the cached data set, which the error then names (the
/// copy is thrown away, so that is the directory to delete).
fn damaged_cache(e: engine::EngineError, data: &CachedData) -> BenchError {
    if e.kind() == engine::ErrorKind::CorruptData {
        BenchError::Data(format!(
            "{e}\nthe run opens a copy of the cached data set {}: delete that \
             directory to have it built again",
            data.dir.display()
        ))
    } else {
        e.into()
    }
}

fn engine_options(settings: &Settings, pool_buffers: usize, c: &Config) -> Options {
    Options::new()
        .pool_buffers(pool_buffers)
        .evictor(c.evictor)
        .sweep_batch(c.batch)
        .partitions(Partitions::Count(c.partitions))
        .rings(c.ring)
        .huge_pages(c.huge_pages)
        .io(settings.io)
        .direct_io(settings.direct_io)
        .mapped_reads(settings.mapped_reads)
        .checksums(dataset::CHECKSUMS)
        .transaction_attempts(engine_side::TERMINAL_ATTEMPTS)
        .miss_ratio_curve(
            settings
                .measures
                .mrc
                .then(|| common::mrc_config(pool_buffers)),
        )
}

fn measure(
    settings: &Settings,
    params: &Params,
    data: &CachedData,
    run_dir: &Path,
    pool_buffers: usize,
    c: &Config,
    analytic: u16,
) -> Result<Row> {
    crate::dirs::remove_dir(run_dir)?;
    crate::dirs::copy_dir(&data.dir, run_dir, &["LOCK"])?;
    let reads = Arc::new(ReadCounts::default());
    let opts = dataset::count_reads(engine_options(settings, pool_buffers, c), &reads);
    let db = Database::open(run_dir, opts).map_err(|e| damaged_cache(e, data))?;
    let backend = EngineBackend::new(db.clone());
    let scale = &params.scale;
    let label = format!("{c} analytic={analytic}");
    common::tell(&format!("{NAME} {label}: warm-up"));
    if !settings.warmup.is_zero() {
        drive(
            &backend,
            scale,
            c.threads,
            Limit::Duration(settings.warmup),
            params.seed ^ 0x5a5a,
        )?;
    }
    let pool_before = db.pool_stats();
    let rels_before = db.relation_stats();
    let wal_before = db.wal_stats();
    let reads_before = reads.snapshot();
    let started = Instant::now();
    let r = drive_with_analytics(
        &backend,
        scale,
        c.threads,
        usize::from(analytic),
        Limit::Duration(settings.duration),
        params.seed,
    )?;
    let secs = started.elapsed().as_secs_f64();
    let stats = db.pool_stats().since(&pool_before);
    let rels_after = db.relation_stats();
    let t = stats.totals();
    let wal_after = db.wal_stats();
    let wal_bytes = wal_after.bytes - wal_before.bytes;
    let wal_fsyncs = wal_after.fsyncs - wal_before.fsyncs;
    let reads_after = reads.snapshot();
    // The pool's live curve at the window's end (`--mrc`), before the
    // check's scans add to it.
    let mrc = common::curve_of(&db);
    // What the window left in the pool, before the check's scans change it.
    let resident = dataset::residency(&db);
    let sizes = dataset::relation_sizes(&db)?;
    let check = backend.check(scale)?;
    let txns = r.total();
    let relations = sizes
        .iter()
        .filter(|s| s.kind == "table" || s.kind == "index")
        .map(|s| {
            let slot = (s.rel as usize).min(reads_after.len().saturating_sub(1));
            let misses = reads_after[slot].saturating_sub(reads_before[slot]);
            let counts_of = |v: &[engine::RelationStats]| {
                v.iter()
                    .find(|x| x.rel.0 == s.rel)
                    .map(|x| x.counts.clone())
                    .unwrap_or_default()
            };
            let pool = counts_of(&rels_after).minus(&counts_of(&rels_before));
            RelationRow {
                accesses: pool.accesses,
                hits: pool.hits,
                hit_ratio: pool.hit_ratio(),
                evictions: pool.evictions,
                name: s.name.clone(),
                kind: s.kind.clone(),
                pages: s.pages as u64,
                resident: resident
                    .iter()
                    .find(|x| x.rel == s.rel)
                    .map_or(0, |x| x.pages as u64),
                reads: misses,
                reads_per_txn: if txns == 0 {
                    0.0
                } else {
                    misses as f64 / txns as f64
                },
            }
        })
        .collect();
    let summaries = r.latencies.summaries();
    let kinds = TxnKind::ALL
        .iter()
        .map(|&k| {
            let counts = r.of(k);
            let lat = summaries
                .iter()
                .find(|(name, _)| *name == k.name())
                .map(|(_, s)| *s)
                .unwrap_or_default();
            KindRow {
                kind: k.name(),
                done: counts.done,
                rolled_back: counts.rolled_back,
                retries: counts.retries,
                latency: lat,
            }
        })
        .collect();
    drop(backend);
    db.close()?;
    Ok(Row {
        evictor: c.evictor.to_string(),
        ring: c.ring,
        threads: c.threads,
        analytic_threads: analytic,
        secs,
        tpmc: r.tpmc(),
        tps: r.tps(),
        transactions: txns,
        kinds,
        hit_ratio: t.hit_ratio(),
        accesses: t.accesses,
        pool_reads: t.reads,
        evictions: t.evictions,
        wal_bytes,
        wal_bytes_per_txn: if txns == 0 {
            0.0
        } else {
            wal_bytes as f64 / txns as f64
        },
        wal_fsyncs,
        wal_fsyncs_per_txn: if txns == 0 {
            0.0
        } else {
            wal_fsyncs as f64 / txns as f64
        },
        analytic_queries: r.analytic.total(),
        analytic_per_hour: r.analytic.queries_per_hour(),
        queries: Query::ALL
            .iter()
            .filter_map(|&q| {
                Some(QueryRow {
                    query: q.name(),
                    done: r.analytic.counts.get(&q).copied()?,
                    latency: r.analytic.summary(q)?,
                })
            })
            .collect(),
        per_second: r.per_second,
        relations,
        check: check.describe(),
        check_passed: check.passed(),
        mrc,
    })
}
