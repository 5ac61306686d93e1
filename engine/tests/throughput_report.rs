//! Figures, not assertions: commits per second (synchronous vs asynchronous)
//! with 1 and 4 threads, and the cost of a snapshot with many transactions
//! running. Run with `--nocapture` (and `--release` for real numbers).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::CommitMode;

fn commits_per_sec(mode: CommitMode, threads: usize, per_thread: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let env = common::open(dir.path(), 64);
    env.tm.set_commit_mode(mode);
    let began = Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let tm = env.tm.clone();
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let t = tm.begin().unwrap();
                    // Mix in a snapshot per transaction, as a reader would.
                    if i % 2 == 0 {
                        std::hint::black_box(t.snapshot());
                    }
                    t.commit().unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    (threads * per_thread) as f64 / began.elapsed().as_secs_f64()
}

fn snapshot_ns(running: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let env = common::open(dir.path(), 64);
    let tm = Arc::clone(&env.tm);
    let held: Vec<_> = (0..running).map(|_| tm.begin().unwrap()).collect();
    let n = 20_000;
    let began = Instant::now();
    for _ in 0..n {
        std::hint::black_box(tm.snapshot());
    }
    let ns = began.elapsed().as_nanos() as f64 / n as f64;
    drop(held);
    ns
}

#[test]
fn report_commit_and_snapshot_rates() {
    common::watchdog(Duration::from_secs(60), || {
        for threads in [1, 4] {
            let sync = commits_per_sec(CommitMode::Synchronous, threads, 300);
            let async_ = commits_per_sec(CommitMode::Asynchronous, threads, 5000);
            println!(
                "threads {threads}: synchronous {sync:.0} commits/s, asynchronous {async_:.0} commits/s"
            );
        }
        for running in [0, 10, 100, 1000] {
            println!(
                "snapshot with {running} running: {:.0} ns",
                snapshot_ns(running)
            );
        }
    });
}
