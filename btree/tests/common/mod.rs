//! Helpers shared by the B-tree's integration tests: a watchdog, a data
//! directory with a pool (and optionally a WAL), an index on it, and replay.
#![allow(dead_code)] // each test file uses its own subset

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use btree::page::Layout;
use btree::{Direction, HeapRow, Index, IndexOptions, Key, KeyBounds, KeyType, Violation};
use bufmgr::{BufferPool, FileStorage, PoolConfig, RelId};
use heap::tuple::Tid;
use tempfile::TempDir;
use wal::{Lsn, MIN_SEGMENT_SIZE, RmgrKind, Wal, WalConfig, WalReader};

pub const REL: RelId = RelId(40);

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
pub fn wal_config() -> WalConfig {
    WalConfig {
        segment_size: MIN_SEGMENT_SIZE,
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

pub fn db(buffers: usize, with_wal: bool) -> Db {
    let dir = tempfile::tempdir().unwrap();
    let wal = with_wal.then(|| Arc::new(Wal::open(dir.path(), wal_config()).unwrap()));
    let pool = pool_over(dir.path(), buffers, wal.clone());
    Db { dir, pool, wal }
}

pub fn create(db: &Db, key_type: KeyType, unique: bool) -> Index {
    create_in(db, key_type, unique, Layout::Compact)
}

/// [`create`] with the pages' item layout chosen (`Headed`: as indexes
/// written by the previous format).
pub fn create_in(db: &Db, key_type: KeyType, unique: bool, layout: Layout) -> Index {
    let index = Index::create_in_layout(
        db.pool.clone(),
        db.wal.clone(),
        IndexOptions {
            name: "test_idx".into(),
            rel: REL,
            key_type,
            unique,
        },
        layout,
    )
    .unwrap();
    assert_eq!(index.layout(), layout);
    index
}

/// Replay every B-tree record of the WAL in `dir` from its start into `pool`.
pub fn replay(dir: &Path, pool: &BufferPool) -> usize {
    let mut reader = WalReader::new(dir, Lsn::ZERO, MIN_SEGMENT_SIZE).unwrap();
    let mut n = 0;
    while let Some((start, rec)) = reader.next_record().unwrap() {
        if rec.kind() == RmgrKind::Btree {
            let end = start.checked_add(rec.encoded_len() as u64).unwrap();
            btree::redo(&rec, end, pool).unwrap();
            n += 1;
        }
    }
    n
}

#[track_caller]
pub fn assert_clean(v: Vec<Violation>) {
    assert!(
        v.is_empty(),
        "verify found {} violations:\n{}",
        v.len(),
        v.iter()
            .take(20)
            .map(|v| format!("  {v}\n"))
            .collect::<String>()
    );
}

/// Every entry of `index` in `dir`, read by `read_range` in batches of
/// `batch`, each batch resuming after the last entry of the one before.
pub fn read_all(index: &Index, dir: Direction, batch: usize) -> Vec<(Vec<u8>, Tid)> {
    let mut out: Vec<(Vec<u8>, Tid)> = Vec::new();
    loop {
        let after = out.last().map(|(k, t)| (k.clone(), *t));
        let mut got = Vec::new();
        let more = index
            .read_range(
                KeyBounds {
                    lower: Bound::Unbounded,
                    upper: Bound::Unbounded,
                },
                dir,
                after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                batch,
                |k, t| got.push((k.to_vec(), t)),
            )
            .unwrap();
        out.extend(got);
        if !more {
            return out;
        }
    }
}

/// A model of an index's contents: stored key -> (its typed key, its TIDs).
pub type Model = BTreeMap<Vec<u8>, (Key, BTreeSet<Tid>)>;

/// The model's entries in (stored key, TID) order, as reads return them.
pub fn entries(model: &Model) -> Vec<(Vec<u8>, Tid)> {
    model
        .iter()
        .flat_map(|(k, (_, ts))| ts.iter().map(move |t| (k.clone(), *t)))
        .collect()
}

/// The model's entries as live heap rows, for `verify`'s heap check.
pub fn rows(model: &Model) -> Vec<HeapRow> {
    model
        .values()
        .flat_map(|(k, ts)| {
            ts.iter().map(move |t| HeapRow {
                key: Some(k.clone()),
                tid: *t,
                live: true,
            })
        })
        .collect()
}

/// Every entry of `index` within (`lower`, `upper`), read in `dir` in one
/// batch (which must be the last: no more after it), in ascending order.
pub fn read_bounds(
    index: &Index,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    dir: Direction,
) -> Vec<(Vec<u8>, Tid)> {
    let mut got = Vec::new();
    let more = index
        .read_range(KeyBounds { lower, upper }, dir, None, usize::MAX, |k, t| {
            got.push((k.to_vec(), t))
        })
        .unwrap();
    assert!(!more, "one unlimited batch left entries unread");
    if dir == Direction::Backward {
        got.reverse();
    }
    got
}
