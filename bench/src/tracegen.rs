//! `bench trace-gen`: a synthetic engine trace, so that a replay-speed
//! figure (bench/RESULTS.md, "Replay speed") can be reproduced without a
//! recorded run, and a policy can be tried on a workload whose shape is
//! known exactly.
//!
//! The workload: one relation of `--blocks` blocks read with a skew
//! (block = blocks x u^skew for u uniform in [0, 1), so low blocks are hot),
//! and, with probability `--scan-probability` per access, a sequential scan
//! of `--scan-blocks` blocks of a second relation that takes the next
//! accesses (cut short if the trace ends first). Every record is an access
//! of thread 0, not a hit (nothing was cached: there was no pool), at a
//! time equal to its position. The header records no pool size (0), so a
//! replay must be given `--pool-pages` or `--pool`.
//!
//! The file is written as it is generated (one 32-byte record per access),
//! so its size is bounded only by the disk.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use bufmgr::trace::{Access, HEADER_SIZE, MAGIC, RECORD_SIZE, TraceEvent, VERSION};
use bufmgr::{BufferTag, RelFork, RelId};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::error::{BenchError, Result};

/// The skewed relation's id in the trace.
pub const HOT_RELATION: RelId = RelId(1);
/// The scanned relation's id in the trace.
pub const SCAN_RELATION: RelId = RelId(2);

/// The options of `bench trace-gen`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// The trace file to write (replaced if it exists)
    pub output: PathBuf,
    /// Accesses in the trace
    #[arg(long, default_value_t = 10_000_000, value_name = "N")]
    pub accesses: u64,
    /// Blocks of the skewed relation
    #[arg(long, default_value_t = 200_000, value_name = "N")]
    pub blocks: u32,
    /// The skew: block = blocks x u^SKEW for u uniform in [0, 1); 1 is
    /// uniform, larger is hotter at low blocks
    #[arg(long, default_value_t = 3.0, value_name = "SKEW")]
    pub skew: f64,
    /// Blocks one sequential scan of the second relation reads (0: none)
    #[arg(long, default_value_t = 5_000, value_name = "N")]
    pub scan_blocks: u32,
    /// Probability, per access outside a scan, that a scan starts
    #[arg(long, default_value_t = 2e-5, value_name = "P")]
    pub scan_probability: f64,
    /// Seed of the draws: the same seed writes the same file
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
}

/// What one generation wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generated {
    pub accesses: u64,
    /// Accesses that belong to scans of the second relation.
    pub scan_accesses: u64,
    pub scans: u64,
}

impl GenArgs {
    fn check(&self) -> Result<()> {
        let bad = |what: String| Err(BenchError::Config(what));
        if self.accesses == 0 {
            return bad("--accesses 0: a trace needs at least one access".into());
        }
        if self.blocks == 0 {
            return bad("--blocks 0: the skewed relation needs at least one block".into());
        }
        if !(self.skew.is_finite() && self.skew > 0.0) {
            return bad(format!(
                "--skew {}: must be a finite number above 0",
                self.skew
            ));
        }
        if !(0.0..=1.0).contains(&self.scan_probability) {
            return bad(format!(
                "--scan-probability {}: must be in [0, 1]",
                self.scan_probability
            ));
        }
        Ok(())
    }
}

fn access(rel: RelId, block: u32, at: u64) -> [u8; RECORD_SIZE] {
    TraceEvent::Access(Access {
        tag: BufferTag::new(RelFork::main(rel), block),
        thread: 0,
        hit: false,
        ring: None,
        buffer: 0,
        nanos: at,
    })
    .encode()
}

/// Write the trace `a` describes.
pub fn generate(a: &GenArgs) -> Result<Generated> {
    a.check()?;
    let named = |source: std::io::Error| BenchError::Io {
        op: "writing trace",
        path: a.output.clone(),
        source,
    };
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&a.output).map_err(named)?);
    let mut header = [0u8; HEADER_SIZE];
    header[0..8].copy_from_slice(&MAGIC);
    header[8..10].copy_from_slice(&VERSION.to_le_bytes());
    header[10..12].copy_from_slice(&(RECORD_SIZE as u16).to_le_bytes());
    // 12..16: no recording pool.
    out.write_all(&header).map_err(named)?;

    let mut rng = SmallRng::seed_from_u64(a.seed);
    let mut g = Generated {
        accesses: 0,
        scan_accesses: 0,
        scans: 0,
    };
    let mut scan_left = 0u32;
    while g.accesses < a.accesses {
        let record = if scan_left > 0 {
            let block = a.scan_blocks - scan_left;
            scan_left -= 1;
            g.scan_accesses += 1;
            access(SCAN_RELATION, block, g.accesses)
        } else if a.scan_blocks > 0 && rng.random_bool(a.scan_probability) {
            g.scans += 1;
            g.scan_accesses += 1;
            scan_left = a.scan_blocks - 1;
            access(SCAN_RELATION, 0, g.accesses)
        } else {
            let u: f64 = rng.random();
            let block = ((f64::from(a.blocks) * u.powf(a.skew)) as u32).min(a.blocks - 1);
            access(HOT_RELATION, block, g.accesses)
        };
        out.write_all(&record).map_err(named)?;
        g.accesses += 1;
    }
    out.flush().map_err(named)?;
    out.into_inner()
        .map_err(|e| named(e.into_error()))?
        .sync_all()
        .map_err(named)?;
    Ok(g)
}

/// `bench trace-gen ...`, its options parsed.
pub fn main(a: &GenArgs) -> Result<()> {
    let g = generate(a)?;
    println!(
        "wrote {} ({} accesses: {} in {} scans of relation {}, the rest skewed over {} blocks of relation {})",
        a.output.display(),
        g.accesses,
        g.scan_accesses,
        g.scans,
        SCAN_RELATION.0,
        a.blocks,
        HOT_RELATION.0,
    );
    Ok(())
}
