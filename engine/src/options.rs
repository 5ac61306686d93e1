//! `Options`: everything a [`Database`](crate::Database) is opened with.
//!
//! A builder with defaults; [`Options::validate`] runs at open and names the
//! bad value. Every switch the scenarios of `bench/SCENARIOS.md` vary is here:
//!
//! | scenario flag | option | default |
//! |---|---|---|
//! | `--pool-mib` | `pool_mib` / `pool_buffers` | 16,384 pages (128 MiB) |
//! | `--evictor` | `evictor` (`"clock"`, `"hotcool"`, `"probation"`) | clock |
//! | `--batch` | `sweep_batch` (`"auto"` or N) | 1 |
//! | `--partitions` | `partitions` (`Partitions::Count(n)` or `Topology`), `balancing`, `partition_floor` | topology, balancing on, no floor |
//! | `--ring` | `rings`, `ring_sizes` | on; 256 KiB / 16 MiB / 2 MiB, each capped at pool / 8 |
//! | pool memory given at open | `prefault_pool` (every page of the pool touched at open, so no page fault comes later) | off: as pages are first used |
//! | `--huge-pages` | `huge_pages` (the pool's memory asked of the kernel as 2 MiB transparent huge pages; normal pages where it has none, as PostgreSQL's `huge_pages = try`) | on |
//! | `--optimistic` | `optimistic_reads` (B-tree internal pages read with no pin or lock, validated by the buffer's version) | on |
//! | index size (index_sizes) | `index_deduplication` (non-unique B-tree indexes created from now on store equal keys once, as posting lists) | on |
//! | checksums (hint-bits) | `checksums` | on |
//! | reading a damaged page | `zero_damaged_pages` (PostgreSQL's setting) | off: an error naming relation and block |
//! | commit (oltp) | `commit_mode`, `async_flush_interval` | synchronous; 200 ms |
//! | hint mode (hint-bits) | `hint_mode` | per-page |
//! | bgwriter (bulkload) | `bgwriter` | on, PostgreSQL's defaults |
//! | `--io` | `io` (`"sync"`, `"io_uring"`, `"auto"`) | sync (see `bufmgr::IoMode`) |
//! | `--direct` | `direct_io` (`O_DIRECT` relation files) | off |
//! | `--mapped-reads` | `mapped_reads` (a page read by copying it from a mapping of its file, not `pread`; sync I/O only) | off |
//! | open relation files | `max_open_files` (PostgreSQL's `max_files_per_process`) | half the soft `RLIMIT_NOFILE`, at most 1,000 |
//! | I/O backend (torn pages) | `wrap_storage` | the backend `io` selects, as it is |
//! | `--autovacuum` (oltp) | `autovacuum`, `autovacuum_naptime`, `autovacuum_threshold`, `autovacuum_scale_factor` | on; 100 ms, 50, 0.2 |
//! | retrying transactions (oltp) | `transaction_attempts`, `transaction_backoff`, `transaction_backoff_max` | 10 attempts; 1 ms doubling to at most 100 ms, jittered |
//!
//! plus `full_page_writes`, `wal_preallocate`, `checkpoint_interval`, `checkpoint_max_wal_bytes`,
//! `wal_segment_size`, `bulk_load_progress_every` and a fixed `topology` for
//! tests. [`Options::set`] takes any of them as `key`, `value` strings (for
//! command lines and config files).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bufmgr::config::{BULK_READ_RING_KIB, BULK_WRITE_RING_KIB, VACUUM_RING_KIB};
use bufmgr::{
    BgWriterConfig, Evictor, IoMode, PAGE_SIZE, RingSizes, StorageBackend, SweepBatch, Topology,
};
use heap::HintMode;

use crate::error::{EngineError, Result};
use crate::txn::xact::CommitMode;

/// Smallest pool a Database accepts: PostgreSQL's minimum of 16 buffers.
/// The commit log, the catalog and a table each want a page or two pinned at
/// once, and a ring may take an eighth; below 16 nearly every statement
/// would evict what the previous one needed.
pub const MIN_POOL_BUFFERS: usize = 16;
/// Default pool: 16,384 pages = 128 MiB (`bench/SCENARIOS.md`, PostgreSQL's
/// default `shared_buffers`).
pub const DEFAULT_POOL_BUFFERS: usize = 16_384;
/// Checkpoint every 5 minutes (PostgreSQL's `checkpoint_timeout`).
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(300);
/// ... or after 512 MiB of WAL (about half of PostgreSQL's `max_wal_size`).
pub const DEFAULT_CHECKPOINT_MAX_WAL_BYTES: u64 = 512 * 1024 * 1024;
/// The WAL writer flushes asynchronous commits every 200 ms
/// (PostgreSQL's `wal_writer_delay`).
pub const DEFAULT_ASYNC_FLUSH_INTERVAL: Duration = Duration::from_millis(200);
/// Bulk load reports progress every 10,000 rows: often enough for a
/// progress bar, rare enough to cost nothing.
pub const DEFAULT_PROGRESS_EVERY: u64 = 10_000;
/// Shortest checkpoint interval accepted: a checkpoint flushes the pool, and
/// more often than this would do little else.
pub const MIN_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// The autovacuum worker looks at every table this often (PostgreSQL's
/// `autovacuum_naptime` is 1 min, made for servers that run for weeks; an
/// embedded engine is measured in seconds, and a 10-row table updated at
/// 4,000 transactions/s gains 400 dead versions in 100 ms). A table that
/// crosses its threshold at a commit wakes the worker at once.
pub const DEFAULT_AUTOVACUUM_NAPTIME: Duration = Duration::from_millis(100);
/// A table is vacuumed when its dead tuples exceed `threshold +
/// scale_factor * tuples`: PostgreSQL's `autovacuum_vacuum_threshold` (50)
/// and `autovacuum_vacuum_scale_factor` (0.2).
pub const DEFAULT_AUTOVACUUM_THRESHOLD: u64 = 50;
/// See [`DEFAULT_AUTOVACUUM_THRESHOLD`].
pub const DEFAULT_AUTOVACUUM_SCALE_FACTOR: f64 = 0.2;
/// [`Database::transaction`](crate::Database::transaction) runs its
/// closure at most this many times (the first attempt and 9 retries).
pub const DEFAULT_TRANSACTION_ATTEMPTS: u32 = 10;
/// The backoff before the first retry is drawn from 0 ..= this; it doubles
/// with each retry after that.
pub const DEFAULT_TRANSACTION_BACKOFF: Duration = Duration::from_millis(1);
/// The backoff stops doubling here: no retry waits longer than this.
pub const DEFAULT_TRANSACTION_BACKOFF_MAX: Duration = Duration::from_millis(100);

/// Shortest naptime accepted: below this the worker would spend its time
/// looking at tables that have not changed.
pub const MIN_AUTOVACUUM_NAPTIME: Duration = Duration::from_millis(1);

/// How the pool is cut into partitions.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum Partitions {
    /// From the machine's NUMA topology (nodes x ceil(4 / nodes)).
    #[default]
    Topology,
    /// Exactly this many (virtual NUMA on a one-node machine).
    Count(usize),
}

/// Wraps the file storage backend (e.g. in a `bufmgr::FaultyStorage`).
pub type StorageWrapper =
    Arc<dyn Fn(Arc<dyn StorageBackend>) -> Arc<dyn StorageBackend> + Send + Sync>;

/// Options of [`Database::open`](crate::Database::open).
#[derive(Clone)]
pub struct Options {
    /// Pages in the buffer pool (8 KiB each; at least 16, PostgreSQL's minimum).
    pub pool_buffers: usize,
    /// The replacement policy: clock, HOT/COOL or probation.
    pub evictor: Evictor,
    /// Clock ticks one sweep claims at a time.
    pub sweep_batch: SweepBatch,
    /// How the pool is cut into partitions.
    pub partitions: Partitions,
    /// Move free buffers between partitions that run short.
    pub balancing: bool,
    /// Buffers a partition keeps at least (`None`: no floor).
    pub partition_floor: Option<usize>,
    /// Use buffer rings for bulk reads, bulk writes and vacuum.
    pub rings: bool,
    /// `None`: PostgreSQL's sizes, each capped at pool / 8 by the pool.
    /// Sizes set here are checked: a ring larger than the pool is an error.
    pub ring_sizes: Option<RingSizes>,
    /// Ask the kernel for the pool's memory in 2 MiB transparent huge
    /// pages (`madvise`), as PostgreSQL's default `huge_pages = try`: where
    /// it has none (transparent huge pages off, memory too fragmented) the
    /// pool runs on normal pages, and
    /// [`BufferPool::huge_pages`](bufmgr::BufferPool::huge_pages) says
    /// which it got. On by default: a lookup touches a few pages spread
    /// over the whole pool, and with normal pages each is a TLB miss of its
    /// own once the pool is larger than the TLB reaches (a few MiB).
    pub huge_pages: bool,
    /// Touch every page of the pool's memory at open, so that the kernel
    /// gives all of it then: no page fault later, and a pool the machine
    /// cannot back runs out of memory at open rather than when it fills. Off by
    /// default: memory is given as pages are first used (PostgreSQL's
    /// shared buffers are too), so an open does not zero memory a short run
    /// never uses: a bulk load of 1 M rows through its ring, say, in a pool
    /// sized for the whole table.
    pub prefault_pool: bool,
    /// Index descents read internal pages optimistically (no pin, no
    /// content lock, validated by the buffer's version; bufmgr rule 10).
    /// Off: every page of a descent is pinned and locked shared.
    pub optimistic_reads: bool,
    /// Non-unique B-tree indexes created while this is on store a key
    /// once with the heap TIDs of all its rows (posting lists, as
    /// PostgreSQL 13's deduplication), so indexes over repeated values
    /// take far less room. Off: such indexes store one item per row, as
    /// indexes did before. The choice is recorded in each index (its meta
    /// page's format) when it is created; opening a directory with another
    /// setting changes nothing for existing indexes. Unique indexes never
    /// deduplicate.
    pub index_deduplication: bool,
    /// Page checksums (fixed when the directory is created).
    pub checksums: bool,
    /// PostgreSQL's `zero_damaged_pages`. Off (the default), a page whose
    /// checksum fails, or that is all zeros while checksums are on (a page
    /// this engine never writes: see `bufmgr::page`), is an error naming the
    /// relation and block, and its rows are not silently skipped. On, such a
    /// page is read as an empty page instead: its rows are lost, the pool
    /// counts it (`PoolStats::zeroed_damaged_pages`) and logs a warning on
    /// stderr. For salvaging what is left of a damaged table, not for
    /// normal running.
    pub zero_damaged_pages: bool,
    /// Full-page images in the WAL after each checkpoint (PostgreSQL's
    /// `full_page_writes`); off only where the storage writes pages
    /// atomically.
    pub full_page_writes: bool,
    /// Make the next WAL segment ahead of the writes, in the background
    /// (`wal::WalConfig::preallocate`), so that the commit whose flush
    /// crosses into a new segment does not zero-fill and sync it (16 MiB)
    /// itself. On by default; off makes every segment on the commit that
    /// first reaches it (tests that inject faults into the WAL's file
    /// operations one by one turn it off, so no background operation takes
    /// the fault).
    pub wal_preallocate: bool,
    /// Whether commits wait for their WAL flush (synchronous) or not.
    pub commit_mode: CommitMode,
    /// `None`: no WAL writer; asynchronous commits become durable with the
    /// next synchronous flush or checkpoint.
    pub async_flush_interval: Option<Duration>,
    /// When hint bits are set and pages dirtied for them.
    pub hint_mode: HintMode,
    /// `None` runs no background writer.
    pub bgwriter: Option<BgWriterConfig>,
    /// `false` runs no checkpointer thread (checkpoints then happen only on
    /// [`Database::checkpoint`](crate::Database::checkpoint) and at close).
    pub checkpointer: bool,
    /// Checkpoint at least this often.
    pub checkpoint_interval: Duration,
    /// ... or after this many bytes of WAL.
    pub checkpoint_max_wal_bytes: u64,
    /// Bytes per WAL segment file (a power of two).
    pub wal_segment_size: u64,
    /// Rows between two progress reports of a bulk load.
    pub bulk_load_progress_every: u64,
    /// `None` detects the machine's shape.
    pub topology: Option<Topology>,
    /// How relation files are read and written: sync pread/pwrite, io_uring,
    /// or io_uring if it works here (`Auto`).
    pub io: IoMode,
    /// Open relation files with `O_DIRECT`.
    pub direct_io: bool,
    /// Read single pages by copying them from a read-only mapping of their
    /// file instead of `pread` (`bufmgr::FileOptions::mapped_reads`): a
    /// miss on a page in the kernel's page cache costs a `memcpy`, not a
    /// system call. Only with `io = sync` (or `auto`, which then is sync),
    /// never with `direct_io`.
    pub mapped_reads: bool,
    /// Relation files kept open at once; more are closed least recently used
    /// first and reopened at their next use (`bufmgr::FileStorage`).
    pub max_open_files: usize,
    /// `None` uses the file backend as it is.
    pub wrap_storage: Option<StorageWrapper>,
    /// For tests: the file system the WAL segments and the control file go
    /// through (`None`: the real one, `wal::OsFileSystem`). See
    /// `Options::simulated_disk` (`testing` feature).
    pub file_system: Option<Arc<dyn wal::FileSystem>>,
    /// Record the pool's page accesses into this file (`bufmgr::trace`).
    pub trace: Option<std::path::PathBuf>,
    /// Keep a sampled reuse-distance profile of the pool's accesses for
    /// [`Database::miss_ratio_curve`](crate::Database::miss_ratio_curve)
    /// (`bufmgr::mrc`); `None`: off.
    pub miss_ratio_curve: Option<bufmgr::MrcConfig>,
    /// Run the autovacuum worker (`crate::autovacuum`).
    pub autovacuum: bool,
    /// How often the worker looks at every table.
    pub autovacuum_naptime: Duration,
    /// Dead tuples a table may hold before it is vacuumed, plus
    /// `autovacuum_scale_factor` times its tuple estimate.
    pub autovacuum_threshold: u64,
    /// See [`autovacuum_threshold`](Options::autovacuum_threshold).
    pub autovacuum_scale_factor: f64,
    /// Most runs of a [`Database::transaction`](crate::Database::transaction)
    /// closure (at least 1; 1 never retries). Default 10.
    pub transaction_attempts: u32,
    /// Upper bound of the first retry's jittered backoff (doubling per
    /// retry). Default 1 ms.
    pub transaction_backoff: Duration,
    /// Largest upper bound the backoff doubles to. Default 100 ms.
    pub transaction_backoff_max: Duration,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("pool_buffers", &self.pool_buffers)
            .field("evictor", &self.evictor)
            .field("sweep_batch", &self.sweep_batch)
            .field("partitions", &self.partitions)
            .field("balancing", &self.balancing)
            .field("partition_floor", &self.partition_floor)
            .field("rings", &self.rings)
            .field("ring_sizes", &self.ring_sizes)
            .field("huge_pages", &self.huge_pages)
            .field("prefault_pool", &self.prefault_pool)
            .field("optimistic_reads", &self.optimistic_reads)
            .field("index_deduplication", &self.index_deduplication)
            .field("checksums", &self.checksums)
            .field("zero_damaged_pages", &self.zero_damaged_pages)
            .field("full_page_writes", &self.full_page_writes)
            .field("wal_preallocate", &self.wal_preallocate)
            .field("commit_mode", &self.commit_mode)
            .field("async_flush_interval", &self.async_flush_interval)
            .field("hint_mode", &self.hint_mode)
            .field("bgwriter", &self.bgwriter)
            .field("checkpointer", &self.checkpointer)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .field("checkpoint_max_wal_bytes", &self.checkpoint_max_wal_bytes)
            .field("wal_segment_size", &self.wal_segment_size)
            .field("bulk_load_progress_every", &self.bulk_load_progress_every)
            .field("topology", &self.topology)
            .field("io", &self.io)
            .field("direct_io", &self.direct_io)
            .field("mapped_reads", &self.mapped_reads)
            .field("max_open_files", &self.max_open_files)
            .field("wrap_storage", &self.wrap_storage.as_ref().map(|_| "<fn>"))
            .field("file_system", &self.file_system)
            .field("autovacuum", &self.autovacuum)
            .field("autovacuum_naptime", &self.autovacuum_naptime)
            .field("autovacuum_threshold", &self.autovacuum_threshold)
            .field("autovacuum_scale_factor", &self.autovacuum_scale_factor)
            .field("transaction_attempts", &self.transaction_attempts)
            .field("transaction_backoff", &self.transaction_backoff)
            .field("transaction_backoff_max", &self.transaction_backoff_max)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            pool_buffers: DEFAULT_POOL_BUFFERS,
            evictor: Evictor::Clock,
            sweep_batch: SweepBatch::Fixed(1),
            partitions: Partitions::Topology,
            balancing: true,
            partition_floor: None,
            rings: true,
            ring_sizes: None,
            huge_pages: true,
            prefault_pool: false,
            optimistic_reads: true,
            index_deduplication: true,
            checksums: true,
            zero_damaged_pages: false,
            full_page_writes: true,
            wal_preallocate: true,
            commit_mode: CommitMode::Synchronous,
            async_flush_interval: Some(DEFAULT_ASYNC_FLUSH_INTERVAL),
            hint_mode: HintMode::PerPage,
            bgwriter: Some(BgWriterConfig::default()),
            checkpointer: true,
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            checkpoint_max_wal_bytes: DEFAULT_CHECKPOINT_MAX_WAL_BYTES,
            wal_segment_size: wal::DEFAULT_SEGMENT_SIZE,
            bulk_load_progress_every: DEFAULT_PROGRESS_EVERY,
            topology: None,
            io: IoMode::Sync,
            direct_io: false,
            mapped_reads: false,
            max_open_files: bufmgr::default_max_open_files(),
            wrap_storage: None,
            file_system: None,
            trace: None,
            miss_ratio_curve: None,
            autovacuum: true,
            autovacuum_naptime: DEFAULT_AUTOVACUUM_NAPTIME,
            autovacuum_threshold: DEFAULT_AUTOVACUUM_THRESHOLD,
            autovacuum_scale_factor: DEFAULT_AUTOVACUUM_SCALE_FACTOR,
            transaction_attempts: DEFAULT_TRANSACTION_ATTEMPTS,
            transaction_backoff: DEFAULT_TRANSACTION_BACKOFF,
            transaction_backoff_max: DEFAULT_TRANSACTION_BACKOFF_MAX,
        }
    }
}

fn invalid(option: &'static str, detail: impl Into<String>) -> EngineError {
    EngineError::InvalidOption {
        option,
        detail: detail.into(),
    }
}

fn parse_bool(option: &'static str, v: &str) -> Result<bool> {
    match v {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(invalid(option, format!("{v:?} is not on/off"))),
    }
}

fn parse_num<T: std::str::FromStr>(option: &'static str, v: &str) -> Result<T> {
    v.parse()
        .map_err(|_| invalid(option, format!("{v:?} is not a whole number")))
}

fn parse_millis(option: &'static str, v: &str) -> Result<Duration> {
    Ok(Duration::from_millis(parse_num(option, v)?))
}

impl Options {
    /// The defaults (see the table in the module docs).
    pub fn new() -> Options {
        Options::default()
    }

    /// A pool of `n` pages.
    pub fn pool_buffers(mut self, n: usize) -> Self {
        self.pool_buffers = n;
        self
    }
    /// A pool of `mib` MiB.
    pub fn pool_mib(mut self, mib: usize) -> Self {
        self.pool_buffers = mib.saturating_mul(1024 * 1024) / PAGE_SIZE;
        self
    }
    /// The replacement policy.
    pub fn evictor(mut self, e: Evictor) -> Self {
        self.evictor = e;
        self
    }
    /// Clock ticks one sweep claims at a time.
    pub fn sweep_batch(mut self, b: SweepBatch) -> Self {
        self.sweep_batch = b;
        self
    }
    /// How the pool is cut into partitions.
    pub fn partitions(mut self, p: Partitions) -> Self {
        self.partitions = p;
        self
    }
    /// Move free buffers between partitions that run short.
    pub fn balancing(mut self, on: bool) -> Self {
        self.balancing = on;
        self
    }
    /// Buffers a partition keeps at least (`None`: no floor).
    pub fn partition_floor(mut self, buffers: Option<usize>) -> Self {
        self.partition_floor = buffers;
        self
    }
    /// Use buffer rings (bulk read, bulk write, vacuum).
    pub fn rings(mut self, on: bool) -> Self {
        self.rings = on;
        self
    }
    /// Sizes of the buffer rings (checked against the pool at open).
    pub fn ring_sizes(mut self, sizes: RingSizes) -> Self {
        self.ring_sizes = Some(sizes);
        self
    }
    /// Ask for the pool's memory in huge pages (on by default; see
    /// [`Options::huge_pages`](Options#structfield.huge_pages)).
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.huge_pages = on;
        self
    }
    /// Touch all of the pool's memory at open (off by default; see
    /// [`Options::prefault_pool`](Options#structfield.prefault_pool)).
    pub fn prefault_pool(mut self, on: bool) -> Self {
        self.prefault_pool = on;
        self
    }
    /// Read index internal pages optimistically (on by default).
    pub fn optimistic_reads(mut self, on: bool) -> Self {
        self.optimistic_reads = on;
        self
    }
    /// Deduplicate non-unique indexes created from now on (on by default;
    /// see [`Options::index_deduplication`](Options#structfield.index_deduplication)).
    pub fn index_deduplication(mut self, on: bool) -> Self {
        self.index_deduplication = on;
        self
    }
    /// Page checksums (must match the setting the directory was created with).
    pub fn checksums(mut self, on: bool) -> Self {
        self.checksums = on;
        self
    }
    /// Read a damaged page as empty instead of failing (see the field).
    pub fn zero_damaged_pages(mut self, on: bool) -> Self {
        self.zero_damaged_pages = on;
        self
    }
    /// Full-page images after each checkpoint.
    pub fn full_page_writes(mut self, on: bool) -> Self {
        self.full_page_writes = on;
        self
    }
    /// WAL segments made ahead of the writes (see the field).
    pub fn wal_preallocate(mut self, on: bool) -> Self {
        self.wal_preallocate = on;
        self
    }
    /// Synchronous or asynchronous commit.
    pub fn commit_mode(mut self, mode: CommitMode) -> Self {
        self.commit_mode = mode;
        self
    }
    /// How often the WAL writer flushes asynchronous commits (`None`: never).
    pub fn async_flush_interval(mut self, every: Option<Duration>) -> Self {
        self.async_flush_interval = every;
        self
    }
    /// When hint bits are set.
    pub fn hint_mode(mut self, mode: HintMode) -> Self {
        self.hint_mode = mode;
        self
    }
    /// The background writer's settings (`None`: no background writer).
    pub fn bgwriter(mut self, bg: Option<BgWriterConfig>) -> Self {
        self.bgwriter = bg;
        self
    }
    /// Run the checkpointer thread.
    pub fn checkpointer(mut self, on: bool) -> Self {
        self.checkpointer = on;
        self
    }
    /// Checkpoint at least this often.
    pub fn checkpoint_interval(mut self, every: Duration) -> Self {
        self.checkpoint_interval = every;
        self
    }
    /// Checkpoint after this many bytes of WAL.
    pub fn checkpoint_max_wal_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint_max_wal_bytes = bytes;
        self
    }
    /// Bytes per WAL segment file.
    pub fn wal_segment_size(mut self, bytes: u64) -> Self {
        self.wal_segment_size = bytes;
        self
    }
    /// Rows between two progress reports of a bulk load.
    pub fn bulk_load_progress_every(mut self, rows: u64) -> Self {
        self.bulk_load_progress_every = rows;
        self
    }
    /// A fixed machine topology instead of the detected one (for tests).
    pub fn topology(mut self, t: Topology) -> Self {
        self.topology = Some(t);
        self
    }
    /// The storage backend: `Sync`, `IoUring` (an error at open if io_uring
    /// cannot start) or `Auto` (io_uring if it works, else sync, logged).
    pub fn io(mut self, mode: IoMode) -> Self {
        self.io = mode;
        self
    }
    /// Open relation files with `O_DIRECT` (an error at open, naming the
    /// file system, where it is refused).
    pub fn direct_io(mut self, on: bool) -> Self {
        self.direct_io = on;
        self
    }
    /// Read pages missing from the pool by copying them from a mapping of
    /// their file rather than with `pread` (see the field). With
    /// `direct_io` or `io = io_uring` it is an error at open.
    pub fn mapped_reads(mut self, on: bool) -> Self {
        self.mapped_reads = on;
        self
    }
    /// Keep at most `n` relation files open at once (at least 1; the default
    /// is half the process's soft `RLIMIT_NOFILE`, at most 1,000).
    pub fn max_open_files(mut self, n: usize) -> Self {
        self.max_open_files = n;
        self
    }
    /// Run the autovacuum worker (on by default).
    pub fn autovacuum(mut self, on: bool) -> Self {
        self.autovacuum = on;
        self
    }

    /// How often the autovacuum worker looks at every table.
    pub fn autovacuum_naptime(mut self, every: Duration) -> Self {
        self.autovacuum_naptime = every;
        self
    }

    /// Vacuum a table when its dead tuples exceed `threshold + scale_factor
    /// * its tuple estimate`.
    pub fn autovacuum_thresholds(mut self, threshold: u64, scale_factor: f64) -> Self {
        self.autovacuum_threshold = threshold;
        self.autovacuum_scale_factor = scale_factor;
        self
    }

    /// Run a [`Database::transaction`](crate::Database::transaction)
    /// closure at most `n` times (at least 1).
    pub fn transaction_attempts(mut self, n: u32) -> Self {
        self.transaction_attempts = n;
        self
    }

    /// Backoff before the retries of a retrying transaction: before retry
    /// `k` (from 1) it sleeps a uniformly random time in `0 ..= min(max,
    /// first * 2^(k-1))` (full jitter, so that transactions that conflicted
    /// with each other do not collide again in step).
    pub fn transaction_backoff(mut self, first: Duration, max: Duration) -> Self {
        self.transaction_backoff = first;
        self.transaction_backoff_max = max;
        self
    }

    /// Record a trace of the pool's accesses into `path` (`None`: off).
    pub fn trace(mut self, path: Option<std::path::PathBuf>) -> Self {
        self.trace = path;
        self
    }
    /// Sample the pool's accesses for a live miss-ratio curve (`None`: off).
    pub fn miss_ratio_curve(mut self, mrc: Option<bufmgr::MrcConfig>) -> Self {
        self.miss_ratio_curve = mrc;
        self
    }
    /// Wrap the file storage backend, e.g. in a `bufmgr::FaultyStorage`.
    pub fn wrap_storage(
        mut self,
        f: impl Fn(Arc<dyn StorageBackend>) -> Arc<dyn StorageBackend> + Send + Sync + 'static,
    ) -> Self {
        self.wrap_storage = Some(Arc::new(f));
        self
    }

    /// For tests: put the whole data directory's WAL, control file and
    /// relation files on `disk`, a simulated disk that injects I/O faults
    /// and simulates power losses (`wal::sim_disk`). Sets both
    /// [`file_system`](Options::file_system) and
    /// [`wrap_storage`](Options::wrap_storage). Only with the `testing`
    /// feature.
    #[cfg(feature = "testing")]
    pub fn simulated_disk(mut self, disk: wal::sim_disk::SimDisk) -> Self {
        self.file_system = Some(Arc::new(disk.clone()));
        self.wrap_storage(move |files| disk.wrap_storage(files))
    }

    /// Set one option from strings, as a command line or config file gives
    /// it. Keys: `pool_mib`, `pool_buffers`, `evictor`, `sweep_batch`,
    /// `partitions` (`topology` or N), `balancing`, `partition_floor` (`off` or
    /// N), `rings`, `bulk_read_ring_kib`, `bulk_write_ring_kib`,
    /// `vacuum_ring_kib`, `huge_pages`, `prefault_pool`, `optimistic_reads`, `index_deduplication`, `checksums`, `zero_damaged_pages`, `full_page_writes`,
    /// `wal_preallocate`, `commit` (`sync`/`async`), `async_flush_ms` (`off` or ms), `hint_mode`,
    /// `bgwriter`, `checkpointer`, `checkpoint_interval_ms`,
    /// `checkpoint_max_wal_bytes`, `wal_segment_size`, `io`
    /// (`sync`/`io_uring`/`auto`), `direct_io`, `mapped_reads`, `max_open_files`, `autovacuum`, `autovacuum_naptime_ms`,
    /// `autovacuum_threshold`, `autovacuum_scale_factor`,
    /// `transaction_attempts`, `transaction_backoff_ms`,
    /// `transaction_backoff_max_ms`.
    pub fn set(mut self, key: &str, value: &str) -> Result<Self> {
        let v = value.trim();
        match key {
            "pool_mib" => self = self.pool_mib(parse_num("pool_mib", v)?),
            "pool_buffers" => self.pool_buffers = parse_num("pool_buffers", v)?,
            "evictor" => self.evictor = parse_evictor(v)?,
            "sweep_batch" | "batch" => {
                self.sweep_batch = v.parse().map_err(|e: String| invalid("sweep_batch", e))?
            }
            "partitions" => {
                self.partitions = if v == "topology" || v == "auto" {
                    Partitions::Topology
                } else {
                    Partitions::Count(parse_num("partitions", v)?)
                }
            }
            "balancing" => self.balancing = parse_bool("balancing", v)?,
            "partition_floor" => {
                self.partition_floor = if v == "off" {
                    None
                } else {
                    Some(parse_num("partition_floor", v)?)
                }
            }
            "rings" | "ring" => self.rings = parse_bool("rings", v)?,
            "bulk_read_ring_kib" => {
                self.ring_sizes.get_or_insert_default().bulk_read_kib =
                    parse_num("bulk_read_ring_kib", v)?
            }
            "bulk_write_ring_kib" => {
                self.ring_sizes.get_or_insert_default().bulk_write_kib =
                    parse_num("bulk_write_ring_kib", v)?
            }
            "vacuum_ring_kib" => {
                self.ring_sizes.get_or_insert_default().vacuum_kib =
                    parse_num("vacuum_ring_kib", v)?
            }
            "huge_pages" => self.huge_pages = parse_bool("huge_pages", v)?,
            "prefault_pool" => self.prefault_pool = parse_bool("prefault_pool", v)?,
            "optimistic_reads" | "optimistic" => {
                self.optimistic_reads = parse_bool("optimistic_reads", v)?
            }
            "index_deduplication" | "dedup" => {
                self.index_deduplication = parse_bool("index_deduplication", v)?
            }
            "checksums" => self.checksums = parse_bool("checksums", v)?,
            "zero_damaged_pages" => self.zero_damaged_pages = parse_bool("zero_damaged_pages", v)?,
            "full_page_writes" => self.full_page_writes = parse_bool("full_page_writes", v)?,
            "wal_preallocate" => self.wal_preallocate = parse_bool("wal_preallocate", v)?,
            "commit" | "commit_mode" => {
                self.commit_mode = match v {
                    "sync" | "synchronous" | "on" => CommitMode::Synchronous,
                    "async" | "asynchronous" | "off" => CommitMode::Asynchronous,
                    _ => {
                        return Err(invalid(
                            "commit_mode",
                            format!("{v:?} is not sync or async"),
                        ));
                    }
                }
            }
            "async_flush_ms" => {
                self.async_flush_interval = if v == "off" {
                    None
                } else {
                    Some(parse_millis("async_flush_ms", v)?)
                }
            }
            "hint_mode" => {
                self.hint_mode = v.parse().map_err(|e: String| invalid("hint_mode", e))?
            }
            "bgwriter" => self.bgwriter = parse_bool("bgwriter", v)?.then(BgWriterConfig::default),
            "checkpointer" => self.checkpointer = parse_bool("checkpointer", v)?,
            "checkpoint_interval_ms" => {
                self.checkpoint_interval = parse_millis("checkpoint_interval_ms", v)?
            }
            "checkpoint_max_wal_bytes" => {
                self.checkpoint_max_wal_bytes = parse_num("checkpoint_max_wal_bytes", v)?
            }
            "wal_segment_size" => self.wal_segment_size = parse_num("wal_segment_size", v)?,
            "io" => self.io = v.parse().map_err(|e: String| invalid("io", e))?,
            "direct_io" | "direct" => self.direct_io = parse_bool("direct_io", v)?,
            "mapped_reads" => self.mapped_reads = parse_bool("mapped_reads", v)?,
            "max_open_files" => self.max_open_files = parse_num("max_open_files", v)?,
            "autovacuum" => self.autovacuum = parse_bool("autovacuum", v)?,
            "autovacuum_naptime_ms" => {
                self.autovacuum_naptime = parse_millis("autovacuum_naptime_ms", v)?
            }
            "autovacuum_threshold" => {
                self.autovacuum_threshold = parse_num("autovacuum_threshold", v)?
            }
            "autovacuum_scale_factor" => {
                self.autovacuum_scale_factor = v.parse().map_err(|_| {
                    invalid("autovacuum_scale_factor", format!("{v:?} is not a number"))
                })?
            }
            "transaction_attempts" => {
                self.transaction_attempts = parse_num("transaction_attempts", v)?
            }
            "transaction_backoff_ms" => {
                self.transaction_backoff = parse_millis("transaction_backoff_ms", v)?
            }
            "transaction_backoff_max_ms" => {
                self.transaction_backoff_max = parse_millis("transaction_backoff_max_ms", v)?
            }
            _ => {
                return Err(EngineError::InvalidOption {
                    option: "(key)",
                    detail: format!("unknown option {key:?}"),
                });
            }
        }
        Ok(self)
    }

    /// Check every value; the error names the option and the bad value.
    pub fn validate(&self) -> Result<()> {
        if self.pool_buffers < MIN_POOL_BUFFERS {
            return Err(invalid(
                "pool_buffers",
                format!(
                    "a pool of {} buffers is below the minimum of {MIN_POOL_BUFFERS}",
                    self.pool_buffers
                ),
            ));
        }
        if self.pool_buffers > bufmgr::config::MAX_POOL_BUFFERS {
            return Err(invalid(
                "pool_buffers",
                format!(
                    "a pool of {} buffers is above the maximum of {} (16 TiB: buffer ids are 32-bit)",
                    self.pool_buffers,
                    bufmgr::config::MAX_POOL_BUFFERS
                ),
            ));
        }
        if let SweepBatch::Fixed(b) = self.sweep_batch
            && (b == 0 || b as usize > self.pool_buffers)
        {
            return Err(invalid(
                "sweep_batch",
                format!(
                    "batch {b} is outside 1 ..= the pool ({} buffers)",
                    self.pool_buffers
                ),
            ));
        }
        if let Partitions::Count(n) = self.partitions {
            let max = bufmgr::partition::MAX_PARTITIONS;
            if n == 0 || n > max {
                return Err(invalid(
                    "partitions",
                    format!("{n} partitions is outside 1 ..= {max}"),
                ));
            }
            if n > self.pool_buffers / bufmgr::partition::MIN_PARTITION_BUFFERS {
                return Err(invalid(
                    "partitions",
                    format!(
                        "{n} partitions of a {}-buffer pool leave fewer than {} buffers each",
                        self.pool_buffers,
                        bufmgr::partition::MIN_PARTITION_BUFFERS
                    ),
                ));
            }
        }
        if self.partition_floor == Some(0) {
            return Err(invalid(
                "partition_floor",
                "a floor of 0 buffers; use None for no floor",
            ));
        }
        if let Some(f) = self.partition_floor
            && f > self.pool_buffers
        {
            return Err(invalid(
                "partition_floor",
                format!(
                    "a floor of {f} buffers is larger than the pool ({})",
                    self.pool_buffers
                ),
            ));
        }
        let pool_kib = self.pool_buffers * (PAGE_SIZE / 1024);
        let sizes = self.ring_sizes.unwrap_or_default();
        for (name, kib) in [
            ("bulk_read_ring_kib", sizes.bulk_read_kib),
            ("bulk_write_ring_kib", sizes.bulk_write_kib),
            ("vacuum_ring_kib", sizes.vacuum_kib),
        ] {
            if self.rings && self.ring_sizes.is_some() && kib > pool_kib {
                return Err(invalid(
                    name,
                    format!("a ring of {kib} KiB is larger than the pool ({pool_kib} KiB)"),
                ));
            }
        }
        if self.mapped_reads && self.direct_io {
            return Err(invalid(
                "mapped_reads",
                "with direct_io: a mapping reads the page cache that O_DIRECT bypasses",
            ));
        }
        if self.mapped_reads && self.io == IoMode::IoUring {
            return Err(invalid(
                "mapped_reads",
                "with io = io_uring: mapped reads are the sync backend's read path",
            ));
        }
        if self.async_flush_interval == Some(Duration::ZERO) {
            return Err(invalid(
                "async_flush_interval",
                "0 ms; use None to turn it off",
            ));
        }
        if self.checkpoint_interval < MIN_CHECKPOINT_INTERVAL {
            return Err(invalid(
                "checkpoint_interval",
                format!(
                    "{:?} is shorter than the minimum {MIN_CHECKPOINT_INTERVAL:?}",
                    self.checkpoint_interval
                ),
            ));
        }
        if self.checkpoint_max_wal_bytes < self.wal_segment_size {
            return Err(invalid(
                "checkpoint_max_wal_bytes",
                format!(
                    "{} bytes is less than one WAL segment ({} bytes)",
                    self.checkpoint_max_wal_bytes, self.wal_segment_size
                ),
            ));
        }
        if self.autovacuum_naptime < MIN_AUTOVACUUM_NAPTIME {
            return Err(invalid(
                "autovacuum_naptime",
                format!(
                    "{:?} is shorter than the minimum {MIN_AUTOVACUUM_NAPTIME:?}",
                    self.autovacuum_naptime
                ),
            ));
        }
        if !(self.autovacuum_scale_factor.is_finite() && self.autovacuum_scale_factor >= 0.0) {
            return Err(invalid(
                "autovacuum_scale_factor",
                format!(
                    "{} is not a finite number >= 0",
                    self.autovacuum_scale_factor
                ),
            ));
        }
        if self.max_open_files == 0 {
            return Err(invalid("max_open_files", "0 files; at least 1"));
        }
        if self.transaction_attempts == 0 {
            return Err(invalid(
                "transaction_attempts",
                "0 attempts; at least 1 (1 runs the closure once, never retrying)",
            ));
        }
        if self.transaction_backoff > self.transaction_backoff_max {
            return Err(invalid(
                "transaction_backoff",
                format!(
                    "the first backoff {:?} is longer than the maximum {:?}",
                    self.transaction_backoff, self.transaction_backoff_max
                ),
            ));
        }
        if self.bulk_load_progress_every == 0 {
            return Err(invalid("bulk_load_progress_every", "0 rows; at least 1"));
        }
        self.wal_config()
            .validate()
            .map_err(|e| invalid("wal_segment_size", e.to_string()))?;
        self.pool_config()
            .validate()
            .map_err(|e| invalid("pool", e.to_string()))?;
        Ok(())
    }

    pub(crate) fn pool_config(&self) -> bufmgr::PoolConfig {
        let mut c = bufmgr::PoolConfig::new(self.pool_buffers)
            .evictor(self.evictor)
            .batch(self.sweep_batch)
            .balancing(self.balancing)
            .partition_floor(self.partition_floor)
            .rings(self.rings)
            .ring_sizes(self.ring_sizes.unwrap_or_default())
            .huge_pages(self.huge_pages)
            .prefault(self.prefault_pool)
            .optimistic_reads(self.optimistic_reads)
            .checksums(self.checksums)
            .zero_damaged_pages(self.zero_damaged_pages)
            .bgwriter(self.bgwriter)
            .io(self.io)
            .direct_io(self.direct_io)
            .mapped_reads(self.mapped_reads)
            .trace(self.trace.clone())
            .mrc(self.miss_ratio_curve);
        if let Partitions::Count(n) = self.partitions {
            c = c.partitions(n);
        }
        if let Some(t) = &self.topology {
            c = c.topology(t.clone());
        }
        c
    }

    pub(crate) fn wal_config(&self) -> wal::WalConfig {
        wal::WalConfig {
            segment_size: self.wal_segment_size,
            async_flush_interval: self.async_flush_interval,
            full_page_writes: self.full_page_writes,
            preallocate: self.wal_preallocate,
            ..wal::WalConfig::default()
        }
    }
}

/// Parse an evictor name (`clock`, `hotcool`, `probation`); the error lists the choices.
pub fn parse_evictor(name: &str) -> Result<Evictor> {
    name.parse().map_err(|e: String| invalid("evictor", e))
}

/// The default ring sizes in KiB, for reference: bulk read, bulk write, vacuum.
pub const DEFAULT_RING_KIB: [usize; 3] = [BULK_READ_RING_KIB, BULK_WRITE_RING_KIB, VACUUM_RING_KIB];
