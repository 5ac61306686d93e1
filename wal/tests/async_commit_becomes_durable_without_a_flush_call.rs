//! Asynchronous commit: with a background flush interval, records become
//! durable within a bounded time although nobody calls `flush`; dropping the
//! log stops the flusher thread cleanly.

mod common;

use std::time::{Duration, Instant};

use common::{payload_record, read_from, small_segments, within};
use wal::{Lsn, Wal, WalConfig};

const INTERVAL: Duration = Duration::from_millis(20);
/// Generous against a loaded machine: 50 intervals.
const BOUND: Duration = Duration::from_secs(1);

#[test]
fn records_become_durable_within_a_bounded_time_without_flush() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let config = WalConfig {
            async_flush_interval: Some(INTERVAL),
            ..small_segments()
        };
        let wal = Wal::open(dir.path(), config).unwrap();
        for round in 0..3u64 {
            let mut last_end = Lsn::ZERO;
            for i in 0..10 {
                last_end = wal
                    .insert(&payload_record(round * 100 + i + 1, 50))
                    .unwrap()
                    .1;
            }
            let inserted = Instant::now();
            while wal.flushed_lsn() < last_end {
                assert!(
                    inserted.elapsed() < BOUND,
                    "round {round}: not durable after {BOUND:?}"
                );
                std::thread::sleep(Duration::from_millis(2));
            }
            eprintln!("round {round}: durable after {:?}", inserted.elapsed());
            // Read back while the log is open: the background flush wrote them.
            let (records, _) =
                read_from(dir.path(), Lsn::ZERO, small_segments().segment_size).unwrap();
            assert_eq!(records.len() as u64, (round + 1) * 10);
        }
        let stats = wal.stats();
        assert_eq!(stats.flush_requests, 0, "nobody asked for a flush");
        assert!(stats.fsyncs >= 3);
        // Dropping joins the flusher thread; the watchdog catches a hang.
        drop(wal);
    });
}

#[test]
fn a_zero_interval_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        async_flush_interval: Some(Duration::ZERO),
        ..WalConfig::default()
    };
    let e = Wal::open(dir.path(), config).unwrap_err();
    assert_eq!(e.kind(), wal::ErrorKind::BadInput);
}
