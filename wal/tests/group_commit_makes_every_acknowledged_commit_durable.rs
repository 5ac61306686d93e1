//! Group commit: many threads insert a commit record and flush it. Every flush
//! that returned must have made its record durable (it is in the segment files
//! and reads back), and threads that wait together share fdatasyncs: far fewer
//! fdatasyncs than commits. The fdatasyncs are real: there is no switch that
//! skips them.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{payload_record, read_from, within};
use wal::{Lsn, Wal, WalConfig};

const THREADS: u64 = 8;
const COMMITS_PER_THREAD: u64 = 250;
const LIMIT: Duration = Duration::from_secs(60);

/// One thread's acknowledged commits: (xid, start LSN, end LSN).
type Acked = Vec<(u64, Lsn, Lsn)>;

fn run_committers(wal: &Arc<Wal>, threads: u64, per_thread: u64) -> Vec<Acked> {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(wal);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                for i in 0..per_thread {
                    let xid = t * 1_000_000 + i + 1;
                    let (start, end) = wal.insert(&payload_record(xid, 40)).expect("insert");
                    wal.flush(end).expect("flush");
                    assert!(
                        wal.flushed_lsn() >= end,
                        "flush returned before {end} was flushed"
                    );
                    acked.push((xid, start, end));
                }
                acked
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("committer"))
        .collect()
}

#[test]
fn eight_committers_share_fdatasyncs_and_every_acknowledged_commit_reads_back() {
    within(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let config = WalConfig::default();
        let wal = Arc::new(Wal::open(dir.path(), config.clone()).unwrap());
        let started = Instant::now();
        let acked = run_committers(&wal, THREADS, COMMITS_PER_THREAD);
        let elapsed = started.elapsed();
        let stats = wal.stats();
        let commits = THREADS * COMMITS_PER_THREAD;
        eprintln!(
            "{commits} commits by {THREADS} threads in {elapsed:?}: {} fdatasyncs, {:.1} commits per fdatasync, {:.0} commits/s",
            stats.fsyncs,
            commits as f64 / stats.fsyncs as f64,
            commits as f64 / elapsed.as_secs_f64()
        );
        assert_eq!(stats.records, commits);
        assert_eq!(stats.flush_requests, commits);
        assert!(
            stats.fsyncs < commits / 2,
            "{} fdatasyncs for {commits} commits: no group commit",
            stats.fsyncs
        );
        assert!(stats.fsyncs > 0);

        // Read back while the log is still open, so nothing but the flushes
        // that returned can have put the records on disk.
        let (records, _end) = read_from(dir.path(), Lsn::ZERO, config.segment_size).unwrap();
        let on_disk: HashMap<u64, Lsn> = records.iter().map(|(l, r)| (r.xid(), *l)).collect();
        for (xid, start, _end) in acked.iter().flatten() {
            assert_eq!(
                on_disk.get(xid),
                Some(start),
                "acknowledged commit {xid} is missing"
            );
        }

        // And in a fresh log opened on the same directory.
        drop(wal);
        let reopened = Wal::open(dir.path(), config).unwrap();
        assert_eq!(reopened.startup().records, commits);
    });
}

#[test]
fn a_lone_committer_needs_one_fdatasync_per_commit() {
    within(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::open(dir.path(), WalConfig::default()).unwrap());
        run_committers(&wal, 1, 50);
        // Nobody to share with: each flush writes and syncs its own record.
        assert_eq!(wal.stats().fsyncs, 50);
    });
}

#[test]
fn flush_of_an_already_durable_position_makes_no_system_call() {
    within(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), WalConfig::default()).unwrap();
        let (_, first_end) = wal.insert(&payload_record(1, 10)).unwrap();
        let (_, second_end) = wal.insert(&payload_record(2, 10)).unwrap();
        wal.flush(first_end).unwrap();
        // The leader flushed everything inserted, so the second is covered.
        assert_eq!(wal.flushed_lsn(), second_end);
        wal.flush(second_end).unwrap();
        wal.flush(first_end).unwrap();
        let stats = wal.stats();
        assert_eq!((stats.flush_requests, stats.fsyncs), (3, 1));
    });
}
