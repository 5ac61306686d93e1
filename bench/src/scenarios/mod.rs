//! The scenarios of SCENARIOS.md, by name.
//!
//! To add one: a variant here (its doc comment is its `--help` line), its
//! defaults in [`ScenarioKind::defaults`], a module with a `run` returning a
//! type that implements [`Report`], and a line in [`ScenarioKind::run`].

use std::time::Duration;

use crate::common::{
    self, DEFAULT_BATCHES, DEFAULT_WARMUP, Defaults, EvictorChoice, QUICK_POOL_MIB, Report,
    Settings, Toggle,
};
use crate::error::Result;

pub mod hint_bits;
pub mod sweep;

/// The scenarios this program runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::Subcommand)]
pub enum ScenarioKind {
    /// Uniform random reads over 1.7 x pool pages: evictions/s and ticks per victim (seed 000)
    Sweep,
    /// Zipfian (theta 0.99) reads over 1.5 x pool pages: ticks per victim, huge pages on/off (seed 000)
    Ticks,
    /// The first seq scan of an unhinted table: hint modes x checksums x logged (seed 003)
    HintBits(hint_bits::HintBitsArgs),
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
        }
    }

    /// Defaults for the options left out when this scenario is named.
    pub fn defaults(self) -> Defaults {
        let cores = common::cores();
        match self {
            // 1 thread, one per core, and twice the cores (oversubscribed,
            // where seed 000 saw batching lose).
            ScenarioKind::Sweep => Defaults {
                duration: Duration::from_secs(5),
                warmup: DEFAULT_WARMUP,
                threads: dedup(vec![1, cores, 2 * cores]),
                batches: DEFAULT_BATCHES.to_vec(),
                huge_pages: Toggle::Off,
                evictor: EvictorChoice::Both,
                quick_pool_mib: QUICK_POOL_MIB,
            },
            // One thread per core: continuous eviction without oversubscription.
            ScenarioKind::Ticks => Defaults {
                duration: Duration::from_secs(5),
                warmup: DEFAULT_WARMUP,
                threads: vec![cores],
                batches: DEFAULT_BATCHES.to_vec(),
                huge_pages: Toggle::Both,
                evictor: EvictorChoice::Both,
                quick_pool_mib: QUICK_POOL_MIB,
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
            },
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

    /// Run the scenario, print its table, write its JSON if asked; fail if
    /// its data was wrong.
    pub fn run(self, settings: &Settings) -> Result<Box<dyn Report>> {
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
        })
    }
}

fn dedup(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}
