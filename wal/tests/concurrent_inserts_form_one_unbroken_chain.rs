//! Concurrent inserts without flushing: every record gets its own place, the
//! places tile the log with no gap or overlap, and the prev-LSN chain the
//! reader checks is unbroken, including when a small WAL buffer forces
//! inserts to write the buffer out themselves.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{payload_record, read_from, small_segments, within};
use wal::log::MIN_BUFFER_SIZE;
use wal::{Lsn, Wal, WalConfig};

fn insert_from_threads(config: WalConfig, threads: u64, per_thread: u64) {
    let dir = tempfile::tempdir().unwrap();
    let wal = Arc::new(Wal::open(dir.path(), config.clone()).unwrap());
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                (0..per_thread)
                    .map(|i| {
                        let xid = t * 1_000_000 + i + 1;
                        let (s, e) = wal
                            .insert(&payload_record(xid, (i % 300) as usize))
                            .unwrap();
                        (s, (e, xid))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let places: BTreeMap<Lsn, (Lsn, u64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(
        places.len() as u64,
        threads * per_thread,
        "two inserts got one place"
    );
    let mut expect = Lsn::ZERO;
    for (start, (end, _)) in &places {
        assert_eq!(*start, expect, "gap or overlap in the log");
        expect = *end;
    }
    assert_eq!(wal.insert_lsn(), expect);
    wal.flush_all().unwrap();

    let (records, end) = read_from(dir.path(), Lsn::ZERO, config.segment_size).unwrap();
    assert_eq!(end.lsn, expect);
    assert_eq!(records.len(), places.len());
    for (lsn, rec) in &records {
        assert_eq!(places[lsn].1, rec.xid());
    }
}

#[test]
fn four_threads_inserting_tile_the_log_and_chain() {
    within(Duration::from_secs(60), || {
        insert_from_threads(small_segments(), 4, 2000);
    });
}

#[test]
fn a_full_small_buffer_is_written_out_by_the_inserter() {
    within(Duration::from_secs(60), || {
        let config = WalConfig {
            buffer_size: MIN_BUFFER_SIZE,
            ..small_segments()
        };
        insert_from_threads(config.clone(), 3, 1000);

        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), config).unwrap();
        for i in 0..200 {
            wal.insert(&payload_record(i + 1, 100)).unwrap();
        }
        let stats = wal.stats();
        assert!(stats.writes > 0, "a full buffer must be written out");
        assert_eq!((stats.fsyncs, stats.flush_requests), (0, 0));
    });
}
