//! A hinted page whose write was torn (first 4 KiB new, the rest old) is
//! repaired at recovery from the full-page image the pool logged for the
//! hint: `redo_full_page` never reads the torn copy, and afterwards the page
//! reads back with a valid checksum and the hint.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bufmgr::{
    BufferPool, BufferTag, FaultyStorage, FileStorage, PoolConfig, RelFork, RelId, StorageBackend,
    WalSink,
};
use common::{small_segments, within};
use wal::{Lsn, RmgrKind, Wal, WalReader, redo_full_page};

const HINT: usize = 6000;

#[test]
fn torn_hinted_page_is_rebuilt_from_its_image() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let rf = RelFork::main(RelId(7));
        let tag = BufferTag::new(rf, 0);
        {
            let wal = Arc::new(Wal::open(dir.path(), small_segments()).unwrap());
            let sink: Arc<dyn WalSink> = wal.clone();
            let file = Arc::new(FileStorage::open(dir.path()).unwrap());
            let faulty = Arc::new(FaultyStorage::new(file));
            let storage: Arc<dyn StorageBackend> = faulty.clone();
            let pool = BufferPool::with_wal(PoolConfig::new(16), storage, sink).unwrap();
            pool.create_fork(rf).unwrap();
            let mut g = pool.extend(rf, None).unwrap();
            g[100..108].copy_from_slice(b"contents");
            g.mark_dirty();
            drop(g);
            pool.flush_all(true).unwrap();
            // The hint logs an image; its write is torn and the machine "crashes".
            let g = pool.read_buffer(rf, 0, None).unwrap().lock_shared();
            assert!(g.set_hints(&[(HINT, 0x0100)]).unwrap());
            drop(g);
            // Make the torn half differ from what is on disk.
            let mut g = pool.read_buffer(rf, 0, None).unwrap().lock_exclusive();
            g[7000] = 0xAB;
            drop(g);
            faulty.tear_next_write(Some(tag));
            assert!(pool.flush_all(true).is_err(), "the torn write fails");
        }
        // Recovery: a fresh pool; the torn page fails its checksum.
        let wal = Arc::new(Wal::open(dir.path(), small_segments()).unwrap());
        let sink: Arc<dyn WalSink> = wal.clone();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let pool = BufferPool::with_wal(PoolConfig::new(16), storage, sink).unwrap();
        assert!(pool.read_buffer(rf, 0, None).is_err(), "torn page detected");
        let mut replayed = 0;
        for item in WalReader::new(dir.path(), Lsn::ZERO, wal.segment_size()).unwrap() {
            let (start, rec) = item.unwrap();
            if rec.kind() == RmgrKind::FullPage {
                let end = Lsn(start.as_u64() + rec.encoded_len() as u64);
                redo_full_page(&rec, end, &pool).unwrap();
                replayed += 1;
            }
        }
        assert_eq!(replayed, 1, "one image for the one hint");
        pool.flush_all(true).unwrap();
        drop(pool);
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let pool = BufferPool::new(PoolConfig::new(16), storage).unwrap();
        let g = pool.read_buffer(rf, 0, None).unwrap().lock_shared();
        assert_eq!(&g[100..108], b"contents");
        assert_eq!(
            u16::from_le_bytes([g[HINT], g[HINT + 1]]),
            0x0100,
            "the hint is in the image"
        );
    });
}
