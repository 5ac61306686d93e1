//! The scenarios of bench/SCENARIOS.md, by name.
//!
//! To add one: a variant here (its doc comment is its `--help` line), its
//! defaults in [`ScenarioKind::defaults`], a module with a `run` returning a
//! type that implements [`Report`], and a line in [`ScenarioKind::run`].

use std::time::Duration;

use crate::common::{
    self, DEFAULT_BATCHES, DEFAULT_WARMUP, Defaults, EvictorChoice, QUICK_POOL_MIB, QUICK_THREADS,
    Report, Settings, Toggle,
};
use crate::error::Result;

pub mod default_run;
pub mod pool;
pub mod versus;
pub mod wal;
pub mod workload;

pub use pool::{hint_bits, seqscan_partitions, sweep};
pub use versus::{compare_sqlite, tpcc};
pub use wal::{crash_soak, wal_commit};
pub use workload::{bulkload, index_residency, oltp, readonly, scan_resistance, tables};

/// The scenarios this program runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::Subcommand)]
pub enum ScenarioKind {
    /// Uniform random reads over 1.7 x pool pages: evictions/s and ticks per victim
    Sweep,
    /// Zipfian (theta 0.99) reads over 1.5 x pool pages: ticks per victim, huge pages on/off
    Ticks,
    /// The first seq scan of an unhinted table: hint modes x checksums x logged
    HintBits(hint_bits::HintBitsArgs),
    /// One client scanning a table of 60% of the pool: partitions x balancing x floor
    SeqscanPartitions(seqscan_partitions::Args),
    /// pgbench-like write mix on ~2 x pool: evictor x batch x commit sync/async
    Oltp(oltp::Args),
    /// Uniform point lookups by primary key on ~2 x pool, threads = cores: partitions x evictor
    Readonly(readonly::Args),
    /// Lookups on a 40%-of-pool hot set while one thread bulk-loads 2 x pool: ring on/off
    Bulkload(bulkload::Args),
    /// OLTP point lookups under a concurrent big seq scan: evictor x ring x scan speed
    ScanResistance(scan_resistance::ScanResistanceArgs),
    /// Zipfian probes through 3 secondary indexes, heap ~4 x pool: evictor x partitions, 5 runs
    IndexResidency(index_residency::IndexResidencyArgs),
    /// The engine beside SQLite on the same data: lookups, scans, bulk load, zipf probes (needs --features sqlite)
    CompareSqlite(compare_sqlite::Args),
    /// Group commit: commits/s, fsyncs/s, commits per fsync at threads 1..32 beside the raw fdatasync rate
    WalCommit,
    /// SIGKILL cycles of the mixed workload, every acknowledged commit verified after each restart
    CrashSoak(crash_soak::Args),
    /// TPC-C (5 transactions, 45/43/4/4/4, consistency checked) with the pool below the data: evictor x ring
    Tpcc(tpcc::Args),
}

/// The scenarios of the run with no scenario named, in order.
pub const DEFAULT_RUN: [ScenarioKind; 2] = [ScenarioKind::Sweep, ScenarioKind::Ticks];

/// Measured window of the run with no scenario named: with its warm-up,
/// short enough that both scenarios' matrices take about a minute.
const DEFAULT_RUN_WINDOW: Duration = Duration::from_secs(2);
const DEFAULT_RUN_WARMUP: Duration = Duration::from_millis(500);

impl ScenarioKind {
    pub fn name(self) -> &'static str {
        match self {
            ScenarioKind::Sweep => "sweep",
            ScenarioKind::Ticks => "ticks",
            ScenarioKind::HintBits(_) => "hint-bits",
            ScenarioKind::SeqscanPartitions(_) => seqscan_partitions::NAME,
            ScenarioKind::Oltp(_) => oltp::NAME,
            ScenarioKind::Readonly(_) => readonly::NAME,
            ScenarioKind::Bulkload(_) => bulkload::NAME,
            ScenarioKind::ScanResistance(_) => scan_resistance::NAME,
            ScenarioKind::IndexResidency(_) => index_residency::NAME,
            ScenarioKind::CompareSqlite(_) => compare_sqlite::NAME,
            ScenarioKind::WalCommit => wal_commit::NAME,
            ScenarioKind::CrashSoak(_) => crash_soak::NAME,
            ScenarioKind::Tpcc(_) => tpcc::NAME,
        }
    }

    /// Defaults for the options left out when this scenario is named.
    pub fn defaults(self) -> Defaults {
        let cores = common::cores();
        match self {
            // 1 thread, one per core, and twice the cores (oversubscribed,
            // where a batched sweep was measured to lose; bench/SCENARIOS.md,
            // `sweep`).
            ScenarioKind::Sweep => Defaults {
                duration: Duration::from_secs(5),
                warmup: DEFAULT_WARMUP,
                threads: dedup(vec![1, cores, 2 * cores]),
                batches: DEFAULT_BATCHES.to_vec(),
                huge_pages: Toggle::Off,
                evictor: EvictorChoice::All,
                quick_pool_mib: QUICK_POOL_MIB,
                quick_threads: QUICK_THREADS.to_vec(),
            },
            // One thread per core: continuous eviction without oversubscription.
            ScenarioKind::Ticks => Defaults {
                duration: Duration::from_secs(5),
                warmup: DEFAULT_WARMUP,
                threads: vec![cores],
                batches: DEFAULT_BATCHES.to_vec(),
                huge_pages: Toggle::Both,
                evictor: EvictorChoice::All,
                quick_pool_mib: QUICK_POOL_MIB,
                quick_threads: QUICK_THREADS.to_vec(),
            },
            // One scan by one thread of a table that fits the pool: nothing
            // is evicted, so one evictor and batch 1; a 32 MiB pool under
            // --quick. Duration, warm-up and threads do not apply.
            ScenarioKind::HintBits(_) => Defaults {
                duration: Duration::from_secs(5),
                warmup: DEFAULT_WARMUP,
                threads: vec![1],
                batches: vec![DEFAULT_BATCHES[0]],
                huge_pages: Toggle::Off,
                evictor: EvictorChoice::Clock,
                quick_pool_mib: hint_bits::QUICK_POOL_MIB,
                quick_threads: QUICK_THREADS.to_vec(),
            },
            ScenarioKind::SeqscanPartitions(_) => seqscan_partitions::defaults(),
            ScenarioKind::Oltp(_) => oltp::defaults(),
            ScenarioKind::Readonly(_) => readonly::defaults(),
            ScenarioKind::Bulkload(_) => bulkload::defaults(),
            // 2 lookup threads (the scan thread comes on top); one batch.
            ScenarioKind::ScanResistance(_) => Defaults {
                duration: Duration::from_secs(5),
                warmup: Duration::from_secs(3),
                threads: vec![2],
                batches: vec![DEFAULT_BATCHES[0]],
                huge_pages: Toggle::Off,
                evictor: EvictorChoice::All,
                quick_pool_mib: QUICK_POOL_MIB,
                quick_threads: QUICK_THREADS.to_vec(),
            },
            // 16 threads on purpose (more than cores); 5 runs of each.
            ScenarioKind::IndexResidency(_) => Defaults {
                duration: Duration::from_secs(4),
                warmup: Duration::from_secs(3),
                threads: vec![16],
                batches: vec![DEFAULT_BATCHES[0]],
                huge_pages: Toggle::Off,
                evictor: EvictorChoice::All,
                quick_pool_mib: QUICK_POOL_MIB,
                quick_threads: QUICK_THREADS.to_vec(),
            },
            ScenarioKind::CompareSqlite(_) => compare_sqlite::defaults(),
            ScenarioKind::WalCommit => wal_commit::defaults(),
            ScenarioKind::CrashSoak(_) => crash_soak::defaults(),
            ScenarioKind::Tpcc(_) => tpcc::defaults(),
        }
    }

    /// Defaults in the run with no scenario named: shorter windows, and for
    /// `ticks` only the stock and the largest batch.
    pub fn default_run_defaults(self) -> Defaults {
        let mut d = self.defaults();
        d.duration = DEFAULT_RUN_WINDOW;
        d.warmup = DEFAULT_RUN_WARMUP;
        if self == ScenarioKind::Ticks {
            d.batches = vec![DEFAULT_BATCHES[0], DEFAULT_BATCHES[2]];
        }
        d
    }

    /// Why this scenario cannot record `--trace FILE`, if it cannot: it
    /// refuses the option with this reason rather than ignore it.
    pub fn trace_refusal(self) -> Option<&'static str> {
        match self {
            ScenarioKind::WalCommit => Some(
                "wal-commit measures the WAL's group commit alone: it runs no buffer pool, \
                 so there are no page accesses to record",
            ),
            ScenarioKind::CrashSoak(_) => Some(
                "crash-soak's measured workload runs in a child process that is killed \
                 with SIGKILL: its trace would end torn at a random point, in the middle \
                 of a thread's batch, and the parent's pools only recover and check",
            ),
            ScenarioKind::Tpcc(_) => Some(
                "tpcc's terminal threads do not record trace thread ids or write their \
                 batches before the pool's counts are noted, so its file would not match \
                 the counts; run the other scenarios to record a trace",
            ),
            _ => None,
        }
    }

    /// Why this scenario keeps no `--report-interval` series (`None`: it
    /// does). A single run with the option is refused with this reason;
    /// `bench all` runs these scenarios without it and says so.
    pub fn interval_refusal(self) -> Option<&'static str> {
        match self {
            ScenarioKind::HintBits(_) => Some(
                "each measurement is one scan of a few milliseconds on a fresh copy of the \
                 data, the configurations taken in turn, so an interval would mix them",
            ),
            ScenarioKind::CompareSqlite(_) => Some(
                "its windows are short and alternate between the engine and SQLite, so an \
                 interval would mix the two databases",
            ),
            ScenarioKind::Tpcc(_) => Some(
                "it reports per transaction type over each matrix cell's window, and keeps \
                 no series over time",
            ),
            _ => None,
        }
    }

    /// Run the scenario, print its table, write its JSON if asked; fail if
    /// its data was wrong. Under `--trace`, also print the trace files its
    /// measured runs wrote.
    pub fn run(self, settings: &Settings) -> Result<Box<dyn Report>> {
        self.run_with_traces(settings).map(|(report, _)| report)
    }

    /// [`run`](Self::run), returning also the trace files written under
    /// `--trace` (each with the pool's access and eviction counts, which
    /// the file holds exactly); a scenario that cannot record refuses
    /// `--trace` ([`trace_refusal`](Self::trace_refusal)).
    pub fn run_with_traces(
        self,
        settings: &Settings,
    ) -> Result<(Box<dyn Report>, Vec<common::TraceFile>)> {
        if let (Some(path), Some(why)) = (&settings.trace, self.trace_refusal()) {
            return Err(crate::error::BenchError::Config(format!(
                "--trace {}: {} cannot record a trace: {why}",
                path.display(),
                self.name()
            )));
        }
        if let (Some(_), Some(why)) = (settings.measures.report_interval, self.interval_refusal()) {
            return Err(crate::error::BenchError::Config(format!(
                "--report-interval: {} keeps no interval series: {why}",
                self.name()
            )));
        }
        // Notes left by an earlier run that failed half-way are not ours.
        common::take_traces(settings);
        let report = self.run_scenario(settings)?;
        let files = common::take_traces(settings);
        common::print_traces(self.name(), &files);
        Ok((report, files))
    }

    fn run_scenario(self, settings: &Settings) -> Result<Box<dyn Report>> {
        Ok(match self {
            ScenarioKind::Sweep => Box::new(common::finish(
                sweep::run(&sweep::SWEEP, settings)?,
                settings,
            )?),
            ScenarioKind::Ticks => Box::new(common::finish(
                sweep::run(&sweep::TICKS, settings)?,
                settings,
            )?),
            ScenarioKind::HintBits(args) => {
                let params = hint_bits::Params::resolve(&args, settings)?;
                Box::new(common::finish(
                    hint_bits::run(settings, &params)?,
                    settings,
                )?)
            }
            ScenarioKind::SeqscanPartitions(args) => Box::new(common::finish(
                seqscan_partitions::run(settings, &args)?,
                settings,
            )?),
            ScenarioKind::Oltp(args) => {
                Box::new(common::finish(oltp::run(settings, &args)?, settings)?)
            }
            ScenarioKind::Readonly(args) => {
                Box::new(common::finish(readonly::run(settings, &args)?, settings)?)
            }
            ScenarioKind::Bulkload(args) => {
                Box::new(common::finish(bulkload::run(settings, &args)?, settings)?)
            }
            ScenarioKind::ScanResistance(args) => {
                let params = scan_resistance::Params::resolve(&args, settings)?;
                Box::new(common::finish(
                    scan_resistance::run(settings, &params)?,
                    settings,
                )?)
            }
            ScenarioKind::IndexResidency(args) => {
                let params = index_residency::Params::resolve(&args, settings)?;
                Box::new(common::finish(
                    index_residency::run(settings, &params)?,
                    settings,
                )?)
            }
            ScenarioKind::CompareSqlite(args) => Box::new(common::finish(
                compare_sqlite::run(settings, &args)?,
                settings,
            )?),
            ScenarioKind::WalCommit => {
                Box::new(common::finish(wal_commit::run(settings)?, settings)?)
            }
            ScenarioKind::CrashSoak(args) => {
                Box::new(common::finish(crash_soak::run(settings, &args)?, settings)?)
            }
            ScenarioKind::Tpcc(args) => {
                Box::new(common::finish(tpcc::run(settings, &args)?, settings)?)
            }
        })
    }

    /// The settings of this scenario from the command line: the options
    /// given, else the scenario's [`defaults`](Self::defaults), plus the
    /// per-scenario defaults `Defaults` has no field for (applied only when
    /// the option was left out): `scan-resistance` runs ring on and off and
    /// 2 lookup threads even under `--quick`; `index-residency` runs
    /// partitions {1, 6} and 16 threads even under `--quick`;
    /// `seqscan-partitions` partitions {1, 2, 4, 6} ({1, 6} under `--quick`);
    /// `readonly` partitions {1, 4}; `bulkload` ring off and on; `wal-commit`
    /// threads {1, 8} under `--quick`; `tpcc` ring on and off, and its pool
    /// sized by `--pool-fraction` unless `--pool-mib` / `--pool-pages` is
    /// given.
    pub fn settings(self, args: &common::CommonArgs) -> Result<Settings> {
        let mut s = args.resolve(&self.defaults())?;
        match self {
            ScenarioKind::ScanResistance(_) => {
                if args.ring.is_none() {
                    s.rings = vec![true, false];
                }
                if args.threads.is_none() {
                    s.threads = vec![2];
                }
            }
            ScenarioKind::IndexResidency(_) => {
                if args.partitions.is_none() {
                    s.partitions = vec![1, 6];
                }
                if args.threads.is_none() {
                    s.threads = vec![16];
                }
            }
            ScenarioKind::SeqscanPartitions(_) if args.partitions.is_none() => {
                s.partitions = if s.quick {
                    vec![1, 6]
                } else {
                    seqscan_partitions::PARTITIONS.to_vec()
                };
            }
            ScenarioKind::Readonly(_) if args.partitions.is_none() => {
                s.partitions = readonly::PARTITIONS.to_vec();
            }
            ScenarioKind::Bulkload(_) if args.ring.is_none() => {
                s.rings = vec![false, true];
            }
            ScenarioKind::CompareSqlite(_) => compare_sqlite::adjust_settings(args, &mut s),
            ScenarioKind::Tpcc(t) => {
                tpcc::refuse_run_options_with_load_only(args, &t)?;
                tpcc::adjust_settings(args, &mut s)
            }
            ScenarioKind::WalCommit if args.threads.is_none() && s.quick => {
                s.threads = wal_commit::QUICK_THREADS.to_vec();
            }
            _ => {}
        }
        Ok(s)
    }

    /// Whether this build can run the scenario (`compare-sqlite` needs the
    /// `sqlite` feature).
    pub fn available(self) -> bool {
        match self {
            ScenarioKind::CompareSqlite(_) => compare_sqlite::AVAILABLE,
            _ => true,
        }
    }

    /// Every scenario this build can run, in declaration order, with its
    /// own options at their defaults (what `bench all` runs).
    pub fn all() -> Vec<ScenarioKind> {
        use clap::{FromArgMatches, Subcommand};
        let cmd = || ScenarioKind::augment_subcommands(clap::Command::new("bench"));
        let names: Vec<String> = cmd()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        names
            .iter()
            .filter_map(|name| {
                let m = cmd().try_get_matches_from(["bench", name.as_str()]).ok()?;
                ScenarioKind::from_arg_matches(&m).ok()
            })
            .filter(|k| k.available())
            .collect()
    }
}

fn dedup(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}
