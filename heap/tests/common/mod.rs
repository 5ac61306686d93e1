//! Helpers shared by the heap's integration tests: a watchdog, a database
//! directory with a pool (and optionally a WAL), and page inspection.
#![allow(dead_code)] // each test file uses its own subset

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use bufmgr::{BufferPool, FileStorage, PoolConfig, RelFork, RelId};
use heap::page::{HeapPage, PageId};
use heap::tuple::TupleHeader;
use tempfile::TempDir;
use wal::{MIN_SEGMENT_SIZE, Wal, WalConfig};

/// Run `f` on its own thread; fail the test if it does not finish within
/// `limit`, so a deadlock is a failure instead of a hung test run.
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = worker.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test did not finish within {limit:?}: deadlock?")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it finishes"),
        },
    }
}

/// WAL settings for tests: small segments.
pub fn wal_config(full_page_writes: bool) -> WalConfig {
    WalConfig {
        segment_size: MIN_SEGMENT_SIZE,
        full_page_writes,
        ..WalConfig::default()
    }
}

/// A data directory with a pool over it, and a WAL if asked for.
pub struct Db {
    pub dir: TempDir,
    pub pool: Arc<BufferPool>,
    pub wal: Option<Arc<Wal>>,
}

pub fn pool_over(dir: &Path, buffers: usize, wal: Option<Arc<Wal>>) -> Arc<BufferPool> {
    let storage = Arc::new(FileStorage::open(dir).unwrap());
    let config = PoolConfig::new(buffers).partitions(1);
    Arc::new(match wal {
        Some(w) => BufferPool::with_wal(config, storage, w).unwrap(),
        None => BufferPool::new(config, storage).unwrap(),
    })
}

pub fn db(buffers: usize, wal: Option<WalConfig>) -> Db {
    let dir = tempfile::tempdir().unwrap();
    let wal = wal.map(|c| Arc::new(Wal::open(dir.path(), c).unwrap()));
    let pool = pool_over(dir.path(), buffers, wal.clone());
    Db { dir, pool, wal }
}

/// Every normal tuple header of every page of `rel`.
pub fn headers(pool: &BufferPool, rel: RelId) -> Vec<TupleHeader> {
    let rf = RelFork::main(rel);
    let mut out = Vec::new();
    for block in 0..pool.nblocks(rf).unwrap() {
        let page = pool.read_buffer(rf, block, None).unwrap().lock_shared();
        let view = HeapPage::parse(&page, PageId { rel, block }).unwrap();
        for t in view.tuples() {
            let (_, _, bytes) = t.unwrap();
            out.push(TupleHeader::decode(bytes).unwrap());
        }
    }
    out
}

/// Every page of `rel`, masked for comparison (hints, checksum, hole).
pub fn masked_pages(pool: &BufferPool, rel: RelId) -> Vec<Vec<u8>> {
    let rf = RelFork::main(rel);
    (0..pool.nblocks(rf).unwrap())
        .map(|block| {
            let page = pool.read_buffer(rf, block, None).unwrap().lock_shared();
            heap::page::mask_for_comparison(&page, PageId { rel, block }).unwrap()
        })
        .collect()
}

/// A row of `len` bytes that says which `n` it is.
pub fn row(n: u64, len: usize) -> Vec<u8> {
    let mut r = n.to_le_bytes().to_vec();
    r.resize(len.max(8), (n % 251) as u8);
    r
}
