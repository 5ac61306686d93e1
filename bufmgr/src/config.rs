//! Pool configuration: a builder with defaults, validated when the pool opens.
//!
//! Every mechanism the scenarios compare is a switch here, so the same
//! workload can run under each design: evictor, sweep batch, partitions and
//! balancing, rings and their sizes, huge pages, checksums, the background
//! writer.

use std::time::Duration;

use crate::error::{Error, Result};
/// Re-exported: the I/O mode is part of a pool's configuration (`io`).
pub use crate::io::IoMode;
use crate::numa::partition::PartitionSpec;
use crate::numa::topology::Topology;
use crate::replacement::evictor::Evictor;
use crate::tag::PAGE_SIZE;

/// Smallest pool accepted. PostgreSQL's minimum is 16; tests run smaller
/// pools so that nearly every access evicts, so ours is lower.
pub const MIN_POOL_BUFFERS: usize = 4;
/// Largest pool: buffer ids, sweep positions and partition ranges are 32-bit
/// (`BufferId` = `u32`), so a pool has fewer than 2^31 buffers (16 TiB).
pub const MAX_POOL_BUFFERS: usize = 1 << 31;

/// Default pool: 16,384 pages = 128 MiB (PostgreSQL's default `shared_buffers`).
pub const DEFAULT_POOL_BUFFERS: usize = 16_384;

/// Bulk-read ring: 256 KiB, PostgreSQL 17's fixed size: small enough to stay
/// in L2 while a scan streams through it.
pub const BULK_READ_RING_KIB: usize = 256;
/// Bulk-write ring: 16 MiB, so COPY does not stall on a WAL flush per page.
pub const BULK_WRITE_RING_KIB: usize = 16 * 1024;
/// Vacuum ring: 2 MiB (PostgreSQL 17's `vacuum_buffer_usage_limit` default).
pub const VACUUM_RING_KIB: usize = 2048;

/// How many ticks one `fetch_add` on the clock hand claims.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SweepBatch {
    /// Exactly this many (1 = stock PostgreSQL).
    Fixed(u32),
    /// Chosen from the machine: 1 while more threads use the pool than there
    /// are cores (on PostgreSQL batching looked ~35% worse oversubscribed),
    /// otherwise the cf/7000 v2 tiers: 64 on multi-node machines, then 32 /
    /// 16 / 8 / 1 for >16 / 9-16 / 5-8 / <=4 cores.
    Auto,
}

impl SweepBatch {
    /// The v2 "CPU-aware" size for a machine of this shape.
    pub fn machine_size(topology: &Topology) -> u32 {
        if topology.node_count() > 1 {
            return 64;
        }
        match topology.cores {
            c if c > 16 => 32,
            9..=16 => 16,
            5..=8 => 8,
            _ => 1,
        }
    }
}

impl std::str::FromStr for SweepBatch {
    type Err = String;
    fn from_str(s: &str) -> Result<SweepBatch, String> {
        if s == "auto" {
            return Ok(SweepBatch::Auto);
        }
        match s.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(SweepBatch::Fixed(n)),
            _ => Err(format!(
                "invalid sweep batch {s:?}: expected \"auto\" or a whole number >= 1"
            )),
        }
    }
}

impl std::fmt::Display for SweepBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepBatch::Fixed(n) => write!(f, "{n}"),
            SweepBatch::Auto => f.write_str("auto"),
        }
    }
}

/// Ring sizes in KiB; 0 turns a ring off. Each is capped at pool/8 buffers,
/// as PostgreSQL caps them, so the defaults suit any pool size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RingSizes {
    pub bulk_read_kib: usize,
    pub bulk_write_kib: usize,
    pub vacuum_kib: usize,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes {
            bulk_read_kib: BULK_READ_RING_KIB,
            bulk_write_kib: BULK_WRITE_RING_KIB,
            vacuum_kib: VACUUM_RING_KIB,
        }
    }
}

/// Background writer settings (PostgreSQL's GUCs of the same names).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct BgWriterConfig {
    /// Sleep between rounds (`bgwriter_delay`, 200 ms).
    pub delay: Duration,
    /// Most pages written per round (`bgwriter_lru_maxpages`, 100; 0 = off).
    pub lru_maxpages: usize,
    /// Multiple of recent allocations to clean ahead (`bgwriter_lru_multiplier`, 2.0).
    pub lru_multiplier: f64,
}

impl Default for BgWriterConfig {
    fn default() -> Self {
        BgWriterConfig {
            delay: Duration::from_millis(200),
            lru_maxpages: 100,
            lru_multiplier: 2.0,
        }
    }
}

/// Everything a pool is opened with. Build with [`PoolConfig::new`] and the
/// setters; [`validate`](PoolConfig::validate) runs when the pool opens.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    pub buffers: usize,
    pub evictor: Evictor,
    pub batch: SweepBatch,
    pub partitions: PartitionSpec,
    /// Rings on or off as a whole (the scenarios' `--ring on|off`).
    pub rings: bool,
    pub ring_sizes: RingSizes,
    pub huge_pages: bool,
    /// Touch every page of the pool's memory at open, so that the kernel
    /// gives it all then and no page fault lands later (in a measurement's
    /// window, say). Off: memory is given as pages are first used, and an
    /// open costs no zeroing of memory that may never be used. On by
    /// default here, where pools are measured; the engine's default is off.
    pub prefault: bool,
    /// PostgreSQL's `shmem_interleave`-style choice on a multi-node machine:
    /// interleave the whole pool over every node instead of binding each
    /// partition's pages to its own node (see `bufmgr::numa`). No effect on
    /// one node. Off by default.
    pub shmem_interleave: bool,
    pub checksums: bool,
    /// PostgreSQL's `zero_damaged_pages`: a page read whose checksum fails,
    /// or that is all zeros (see `bufmgr::page`), is zeroed in memory,
    /// counted in [`PoolStats::zeroed_damaged_pages`](crate::PoolStats) and
    /// logged on stderr, instead of being an error. Its rows are lost; this
    /// is for getting what is left out of a damaged relation. Off by default.
    pub zero_damaged_pages: bool,
    /// `None` runs no background writer.
    pub bgwriter: Option<BgWriterConfig>,
    /// The machine's shape; `None` detects it.
    pub topology: Option<Topology>,
    /// The storage backend [`open_storage`](Self::open_storage) builds (the
    /// pool itself is handed a backend and does not read this).
    pub io: IoMode,
    /// Open relation files with `O_DIRECT` (either backend).
    pub direct_io: bool,
    /// Read single pages from a mapping of the file rather than `pread`
    /// (the sync backend; see [`crate::FileOptions::mapped_reads`]).
    pub mapped_reads: bool,
    /// Record every access and eviction into this file (see
    /// [`crate::trace`]); `None` records nothing.
    pub trace: Option<std::path::PathBuf>,
    /// Keep a sampled reuse-distance profile of the pool's accesses and
    /// answer [`BufferPool::miss_ratio_curve`](crate::BufferPool::miss_ratio_curve)
    /// (see [`crate::mrc`]); `None`: off, the hit path's filter never
    /// samples.
    pub mrc: Option<crate::mrc::MrcConfig>,
    /// Optimistic reads (rule 10): `false` makes every
    /// [`read_optimistic`](crate::BufferPool::read_optimistic) decline, so a
    /// B-tree descent reads its internal pages pinned and under their shared
    /// lock. On by default.
    pub optimistic_reads: bool,
}

impl PoolConfig {
    /// A pool of `buffers` pages with the defaults: clock evictor, batch 1,
    /// partitions from the topology with balancing, rings on, checksums on,
    /// no huge pages, memory pre-faulted at open, no background writer.
    pub fn new(buffers: usize) -> PoolConfig {
        PoolConfig {
            buffers,
            evictor: Evictor::Clock,
            batch: SweepBatch::Fixed(1),
            partitions: PartitionSpec::default(),
            rings: true,
            ring_sizes: RingSizes::default(),
            huge_pages: false,
            prefault: true,
            shmem_interleave: false,
            checksums: true,
            zero_damaged_pages: false,
            bgwriter: None,
            topology: None,
            io: IoMode::Sync,
            direct_io: false,
            mapped_reads: false,
            trace: None,
            mrc: None,
            optimistic_reads: true,
        }
    }

    /// Optimistic reads on or off (rule 10; off: `read_optimistic` always declines).
    pub fn optimistic_reads(mut self, on: bool) -> Self {
        self.optimistic_reads = on;
        self
    }

    /// Sample the accesses for a live miss-ratio curve (`None`: off).
    pub fn mrc(mut self, mrc: Option<crate::mrc::MrcConfig>) -> Self {
        self.mrc = mrc;
        self
    }

    /// Record a trace into `path` (`None`: off).
    pub fn trace(mut self, path: Option<std::path::PathBuf>) -> Self {
        self.trace = path;
        self
    }

    /// A pool of `mib` MiB.
    pub fn with_mib(mib: usize) -> PoolConfig {
        PoolConfig::new(mib * 1024 * 1024 / PAGE_SIZE)
    }

    pub fn evictor(mut self, e: Evictor) -> Self {
        self.evictor = e;
        self
    }
    pub fn batch(mut self, b: SweepBatch) -> Self {
        self.batch = b;
        self
    }
    /// A fixed number of partitions (virtual NUMA on a one-node machine).
    pub fn partitions(mut self, n: usize) -> Self {
        self.partitions.count = Some(n);
        self
    }
    pub fn partition_floor(mut self, buffers: Option<usize>) -> Self {
        self.partitions.floor = buffers;
        self
    }
    pub fn balancing(mut self, on: bool) -> Self {
        self.partitions.balancing = on;
        self
    }
    pub fn rings(mut self, on: bool) -> Self {
        self.rings = on;
        self
    }
    pub fn ring_sizes(mut self, sizes: RingSizes) -> Self {
        self.ring_sizes = sizes;
        self
    }
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.huge_pages = on;
        self
    }
    pub fn prefault(mut self, on: bool) -> Self {
        self.prefault = on;
        self
    }
    pub fn shmem_interleave(mut self, on: bool) -> Self {
        self.shmem_interleave = on;
        self
    }
    pub fn checksums(mut self, on: bool) -> Self {
        self.checksums = on;
        self
    }
    pub fn zero_damaged_pages(mut self, on: bool) -> Self {
        self.zero_damaged_pages = on;
        self
    }
    pub fn bgwriter(mut self, bg: Option<BgWriterConfig>) -> Self {
        self.bgwriter = bg;
        self
    }
    pub fn topology(mut self, t: Topology) -> Self {
        self.topology = Some(t);
        self
    }
    pub fn io(mut self, mode: IoMode) -> Self {
        self.io = mode;
        self
    }
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }
    pub fn mapped_reads(mut self, on: bool) -> Self {
        self.mapped_reads = on;
        self
    }

    /// How a storage backend for this pool opens its files: `direct_io`,
    /// `mapped_reads`, and whether the pool refuses every page failing its
    /// checksum (`checksums` on, `zero_damaged_pages` off), which mapped
    /// reads may rely on ([`crate::FileOptions::checksummed_pages`]).
    pub fn file_options(&self) -> crate::io::FileOptions {
        crate::io::FileOptions {
            direct_io: self.direct_io,
            mapped_reads: self.mapped_reads,
            checksummed_pages: self.checksums && !self.zero_damaged_pages,
        }
    }

    /// The storage backend under `data_dir` that `io` and
    /// [`file_options`](Self::file_options) select
    /// ([`crate::io::open_storage`]).
    pub fn open_storage(
        &self,
        data_dir: &std::path::Path,
    ) -> Result<std::sync::Arc<dyn crate::io::StorageBackend>> {
        crate::io::open_storage(data_dir, self.io, self.file_options())
    }

    /// Check every value; the error names the one that is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.buffers < MIN_POOL_BUFFERS {
            return Err(Error::InvalidConfig(format!(
                "pool of {} buffers is below the minimum of {MIN_POOL_BUFFERS}",
                self.buffers
            )));
        }
        if self.buffers > MAX_POOL_BUFFERS {
            return Err(Error::InvalidConfig(format!(
                "pool of {} buffers is above the maximum of {MAX_POOL_BUFFERS} (buffer ids are 32-bit)",
                self.buffers
            )));
        }
        if self.buffers > crate::desc::REFCOUNT_MASK as usize * 64 && usize::BITS < 64 {
            return Err(Error::InvalidConfig(
                "pool too large for this platform".into(),
            ));
        }
        if let SweepBatch::Fixed(0) = self.batch {
            return Err(Error::InvalidConfig(
                "sweep batch must be at least 1".into(),
            ));
        }
        if let SweepBatch::Fixed(b) = self.batch
            && b as usize > self.buffers
        {
            return Err(Error::InvalidConfig(format!(
                "sweep batch {b} is larger than the pool ({} buffers)",
                self.buffers
            )));
        }
        if let Some(m) = &self.mrc {
            m.validate()?;
        }
        if let Some(bg) = &self.bgwriter {
            if bg.delay < Duration::from_millis(10) || bg.delay > Duration::from_secs(10) {
                return Err(Error::InvalidConfig(format!(
                    "bgwriter delay {:?} is outside 10 ms ..= 10 s",
                    bg.delay
                )));
            }
            if !(0.0..=10.0).contains(&bg.lru_multiplier) {
                return Err(Error::InvalidConfig(format!(
                    "bgwriter lru multiplier {} is outside 0 ..= 10",
                    bg.lru_multiplier
                )));
            }
        }
        Ok(())
    }
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig::new(DEFAULT_POOL_BUFFERS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        PoolConfig::default().validate().unwrap();
        assert_eq!(PoolConfig::with_mib(128).buffers, DEFAULT_POOL_BUFFERS);
    }

    #[test]
    fn bad_values_are_named() {
        let e = PoolConfig::new(2).validate().unwrap_err();
        assert!(e.to_string().contains("2 buffers"), "{e}");
        // Too large for 32-bit buffer ids: an error, not a panic later in
        // the partition map or the sweep.
        let e = PoolConfig::new(1 << 34).validate().unwrap_err();
        assert!(e.to_string().contains("17179869184 buffers"), "{e}");
        // A pool is opened only on a config that validates
        // (`pool::tests::a_pool_too_large_for_buffer_ids_is_refused_at_open`).
        let e = PoolConfig::new(64)
            .batch(SweepBatch::Fixed(65))
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("batch 65"), "{e}");
        let bg = BgWriterConfig {
            lru_multiplier: 11.0,
            ..Default::default()
        };
        let e = PoolConfig::new(64)
            .bgwriter(Some(bg))
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("multiplier 11"), "{e}");
    }

    #[test]
    fn io_mode_parses_and_prints() {
        for m in [IoMode::Sync, IoMode::IoUring, IoMode::Auto] {
            assert_eq!(m.to_string().parse::<IoMode>().unwrap(), m);
        }
        assert_eq!("uring".parse::<IoMode>().unwrap(), IoMode::IoUring);
        let e = "aio".parse::<IoMode>().unwrap_err();
        assert!(e.contains("\"aio\"") && e.contains("io_uring"), "{e}");
        assert_eq!(PoolConfig::default().io, IoMode::Sync);
    }

    #[test]
    fn batch_parses() {
        assert_eq!("auto".parse::<SweepBatch>().unwrap(), SweepBatch::Auto);
        assert_eq!("16".parse::<SweepBatch>().unwrap(), SweepBatch::Fixed(16));
        assert!("0".parse::<SweepBatch>().is_err());
        assert!("x".parse::<SweepBatch>().is_err());
    }

    #[test]
    fn machine_batch_follows_the_v2_tiers() {
        let t = |cores| Topology::single_node(cores);
        assert_eq!(SweepBatch::machine_size(&t(2)), 1);
        assert_eq!(SweepBatch::machine_size(&t(8)), 8);
        assert_eq!(SweepBatch::machine_size(&t(12)), 16);
        assert_eq!(SweepBatch::machine_size(&t(64)), 32);
    }
}
