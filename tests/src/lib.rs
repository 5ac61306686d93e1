//! Cross-crate integration tests live in `tests/`; this library holds what
//! they share:
//!
//! - the buffer manager's test helpers ([`with_timeout`], [`TestDb`],
//!   [`TestStorage`], [`TestWal`], the model page format [`fill_page`] /
//!   [`check_page`], ...): defined once, in `bufmgr/tests/common/mod.rs`
//!   (where the buffer manager's own integration tests use them), and
//!   included here;
//! - [`open_and_recover`] and [`verify_all_checksums`]: a whole engine on a
//!   data directory, opened as after a crash, and every page's checksum
//!   read back;
//! - [`decoders`]: the decoder fuzz targets, shared by the proptest pass and
//!   the `cargo fuzz` targets in `fuzz/`.

pub mod decoders;

#[path = "../../bufmgr/tests/common/mod.rs"]
mod pool_helpers;

pub use pool_helpers::*;

use std::sync::Arc;

use bufmgr::{BlockNumber, BufferPool, FileStorage, RelFork, StorageBackend};

// ---------------------------------------------------------------------------
// A whole engine on a data directory: open and recover
// ---------------------------------------------------------------------------

/// The WAL configuration of engine-level tests: 1 MiB segments (so records
/// cross segment boundaries and checkpoints recycle segments within a short
/// test), otherwise the defaults (full-page writes on, no background
/// flusher: commits are synchronous). Every process that opens a directory
/// must use the same segment size.
pub fn engine_wal_config() -> wal::WalConfig {
    wal::WalConfig {
        segment_size: 1 << 20,
        ..wal::WalConfig::default()
    }
}

/// WAL, buffer pool and transaction manager of one data directory, after
/// recovery.
#[derive(Debug)]
pub struct RecoveredEngine {
    pub wal: Arc<wal::Wal>,
    pub pool: Arc<BufferPool>,
    pub tm: Arc<engine::TransactionManager>,
    /// What replay did.
    pub recovery: engine::RecoveryStats,
    /// Heap records replayed.
    pub heap_records: u64,
    /// Full-page records (images logged for hint bits) replayed.
    pub full_page_records: u64,
}

/// Redo one record that [`engine::recover`] hands on (everything but Xact
/// and Checkpoint records): heap records through [`heap::redo()`], the
/// full-page images the pool logs for hint bits through
/// [`wal::redo_full_page`]. Any other kind is an error: nothing in these
/// tests writes one.
pub fn redo_record(
    record: &wal::Record,
    end: wal::Lsn,
    pool: &BufferPool,
) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match record.kind() {
        wal::RmgrKind::Heap => heap::redo(record, end, pool)?,
        wal::RmgrKind::FullPage => wal::redo_full_page(record, end, pool)?,
        kind => return Err(format!("no redo for a {kind:?} record").into()),
    }
    Ok(())
}

/// Open `dir` as a database would after a crash: the WAL (it reads from the
/// control file's redo point to the end of valid WAL), a pool of `buffers`
/// buffers over the files with checksums on and that WAL as its sink, the
/// transaction manager (next xid from the last checkpoint), then replay the
/// WAL with [`engine::recover`] and [`redo_record`]. Panics on any error.
///
/// Both the crash test's child (before it goes on working) and its parent
/// (before it checks what survived) recover through this one function.
pub fn open_and_recover(dir: &std::path::Path, buffers: usize) -> RecoveredEngine {
    let wal = Arc::new(
        wal::Wal::open(dir, engine_wal_config())
            .unwrap_or_else(|e| panic!("open the WAL in {}: {e}", dir.display())),
    );
    let files = FileStorage::open(dir).expect("open file storage");
    let pool = Arc::new(
        BufferPool::with_wal(
            small_config(buffers).checksums(true),
            Arc::new(files),
            wal.clone(),
        )
        .expect("open pool"),
    );
    let tm = Arc::new(
        engine::TransactionManager::open(pool.clone(), wal.clone(), engine::next_xid_hint(&wal))
            .expect("open the transaction manager"),
    );
    let (mut heap_records, mut full_page_records) = (0, 0);
    let recovery = engine::recover(&tm, |_start, end, record| {
        match record.kind() {
            wal::RmgrKind::Heap => heap_records += 1,
            wal::RmgrKind::FullPage => full_page_records += 1,
            _ => {}
        }
        redo_record(record, end, &pool)
    })
    .unwrap_or_else(|e| panic!("recovery of {}: {e}", dir.display()));
    RecoveredEngine {
        wal,
        pool,
        tm,
        recovery,
        heap_records,
        full_page_records,
    }
}

/// Read every block of every relation file under `dir` through a brand-new
/// pool of `buffers` buffers with checksums on (no WAL, nothing cached), so
/// that each page's checksum is verified as it is read. Returns the number
/// of blocks read per relation fork; panics naming the first page that fails.
pub fn verify_all_checksums(dir: &std::path::Path, buffers: usize) -> Vec<(RelFork, BlockNumber)> {
    let storage: Arc<dyn StorageBackend> =
        Arc::new(FileStorage::open(dir).expect("open file storage"));
    let pool = BufferPool::new(small_config(buffers).checksums(true), storage.clone())
        .expect("open the checking pool");
    let mut rels = storage.relations().expect("list relation files");
    rels.sort();
    let mut out = Vec::new();
    for rf in rels {
        let nblocks = pool.nblocks(rf).expect("relation size");
        for block in 0..nblocks {
            if let Err(e) = pool.read_buffer(rf, block, None) {
                panic!("{rf} block {block} of {}: {e}", dir.display());
            }
        }
        out.push((rf, nblocks));
    }
    assert_eq!(pool.stats().checksum_failures, 0);
    out
}
