#![doc = include_str!("../README.md")]

pub mod arena;
pub mod config;
pub mod desc;
pub mod error;
pub mod io;
#[cfg(all(test, feature = "shuttle"))]
mod model_check;
pub mod mrc;
pub mod numa;
pub mod page;
pub mod pool;
pub mod replacement;
pub mod stats;
mod sync;
pub mod table;
pub mod tag;
pub mod trace;
pub mod wal_hook;
pub mod watch;

// Moved inside `pool` (they work on the pool's shared state); re-exported
// at their old paths.
pub use pool::{bgwriter, guard};
// Grouped into folders; re-exported at their old paths.
pub use numa::{partition, topology};
pub use replacement::{evictor, probation, ring, sweep};

pub use config::{BgWriterConfig, PoolConfig, RingSizes, SweepBatch};
pub use desc::BufferId;
pub use error::{Error, ErrorKind, Result};
pub use evictor::Evictor;
pub use guard::{PageRead, PageShareExclusive, PageWrite, PinnedBuffer};
pub use io::{
    AlignedBuf, FaultyStorage, FileOptions, FileStorage, IoMode, ObservedStorage, ReadRequest,
    StorageBackend, StorageObserver, UringStorage, WriteRequest, default_max_open_files,
    is_out_of_descriptors, open_storage, open_storage_with, shed_cached_descriptor,
    with_spare_descriptor,
};
pub use mrc::{MissRatioCurve, MrcConfig, MrcPoint};
pub use pool::{BufferPool, OptimisticPage, ReadStream, StreamConfig};
pub use ring::{Ring, RingKind};
pub use stats::{
    BufferCacheSummary, BufferRow, EvictCounts, PartitionStats, PoolStats, RELATION_SLOTS,
    RelationStats, TicksHistogram,
};
pub use tag::{BlockNumber, BufferTag, Fork, PAGE_SIZE, RelFork, RelId};
pub use topology::Topology;
pub use wal_hook::{NoWal, WalError, WalSink};
