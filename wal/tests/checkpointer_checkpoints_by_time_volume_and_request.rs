//! The checkpointer thread takes checkpoints when its interval passes, when
//! the WAL written since the last one exceeds its volume limit, and when
//! asked; a failed page flush is reported and leaves the old checkpoint.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{payload_record, small_segments, within};
use wal::{CheckpointFn, Checkpointer, CheckpointerConfig, Wal, read_control};

const HOUR: Duration = Duration::from_secs(3600);

/// A checkpoint of `wal` whose page flush counts its calls.
fn counting_checkpoint(wal: &Arc<Wal>, calls: &Arc<AtomicUsize>, next_xid: u64) -> CheckpointFn {
    let (wal, calls) = (wal.clone(), calls.clone());
    Box::new(move || {
        let flush = |_redo| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(0)
        };
        wal.checkpoint(flush, next_xid)
            .map(drop)
            .map_err(Into::into)
    })
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{what} did not happen in 10 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn checkpoints_when_the_interval_passes() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::open(dir.path(), small_segments()).unwrap());
        wal.insert(&payload_record(1, 10)).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let config = CheckpointerConfig {
            interval: Duration::from_millis(100),
            max_wal_bytes: u64::MAX,
            poll: Duration::from_millis(10),
        };
        let ckpt = Checkpointer::start(wal.clone(), config, counting_checkpoint(&wal, &calls, 77));
        wait_for("two timed checkpoints", || ckpt.completed() >= 2);
        ckpt.stop();
        assert!(calls.load(Ordering::SeqCst) >= 2);
        let control = read_control(dir.path()).unwrap().expect("a control file");
        assert_eq!(control.next_xid, 77);
        assert_eq!(wal.last_checkpoint(), Some(control));
    });
}

#[test]
fn checkpoints_when_the_wal_volume_passes_its_limit() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::open(dir.path(), small_segments()).unwrap());
        let calls = Arc::new(AtomicUsize::new(0));
        let config = CheckpointerConfig {
            interval: HOUR,
            max_wal_bytes: 32 * 1024,
            poll: Duration::from_millis(5),
        };
        let ckpt = Checkpointer::start(wal.clone(), config, counting_checkpoint(&wal, &calls, 3));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            ckpt.completed(),
            0,
            "no checkpoint before the volume is reached"
        );
        for i in 0..100 {
            wal.insert(&payload_record(i + 1, 500)).unwrap();
        }
        wait_for("a checkpoint by volume", || ckpt.completed() >= 1);
        assert!(wal.bytes_since_checkpoint() < 32 * 1024);
    });
}

#[test]
fn a_request_checkpoints_at_once_and_a_failure_is_reported() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::open(dir.path(), small_segments()).unwrap());
        let config = CheckpointerConfig {
            interval: HOUR,
            max_wal_bytes: u64::MAX,
            poll: Duration::from_millis(10),
        };
        let fail = Arc::new(AtomicUsize::new(0));
        let checkpoint: CheckpointFn = {
            let (fail, wal) = (fail.clone(), wal.clone());
            Box::new(move || {
                let flush = |_| {
                    if fail.load(Ordering::SeqCst) == 1 {
                        Err("disk on fire")
                    } else {
                        Ok(5)
                    }
                };
                wal.checkpoint(flush, 9).map(drop).map_err(Into::into)
            })
        };
        let ckpt = Checkpointer::start(wal.clone(), config, checkpoint);
        assert!(ckpt.request(Duration::from_secs(10)));
        assert_eq!(ckpt.completed(), 1);
        let first = wal.last_checkpoint().unwrap();

        fail.store(1, Ordering::SeqCst);
        wal.insert(&payload_record(1, 10)).unwrap();
        assert!(!ckpt.request(Duration::from_secs(10)));
        assert!(ckpt.last_error().unwrap().contains("disk on fire"));
        assert_eq!(
            wal.last_checkpoint(),
            Some(first),
            "the old checkpoint stands"
        );
        // A second failure with the same message is still noticed.
        assert!(!ckpt.request(Duration::from_secs(10)));

        fail.store(0, Ordering::SeqCst);
        assert!(ckpt.request(Duration::from_secs(10)));
        assert_eq!(ckpt.last_error(), None);
        let started = Instant::now();
        drop(ckpt);
        assert!(started.elapsed() < Duration::from_secs(2), "stops promptly");
    });
}
