//! Quick figures for the WAL alone: single- and two-thread insert rates
//! without flushing, and group commit with T threads next to the raw
//! "overwrite 100 bytes of a preallocated file + fdatasync" loop in the same
//! directory. The measurements are `wal::rates`, which `bench wal-commit`
//! runs as a full scenario (threads list, JSON rows).
//!
//! Run with `cargo run --release -p wal --example wal_rates`.

use std::time::Duration;

use wal::rates;

const INSERTS: u64 = 1_000_000;
const COMMIT_TIME: Duration = Duration::from_secs(2);

fn main() -> wal::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    for threads in [1, 2] {
        let r = rates::insert_rate(dir.path(), threads, INSERTS)?;
        println!(
            "insert, {threads} thread(s): {:.0} records/s, {:.1} MB/s ({} records of {} bytes, {} writes, no flush)",
            r.records as f64 / r.secs,
            r.bytes as f64 / r.secs / 1e6,
            r.records,
            r.bytes / r.records.max(1),
            r.writes
        );
    }
    let raw = rates::raw_fdatasync_rate(dir.path(), COMMIT_TIME)?;
    println!(
        "raw overwrite 100 bytes + fdatasync (preallocated file): {:.0}/s",
        raw.per_sec()
    );
    for threads in [1, 2, 8, 32] {
        let c = rates::commit_rate(dir.path(), threads, COMMIT_TIME)?;
        println!(
            "commit, {threads:>2} thread(s): {:>8.0} commits/s, {:>7.0} fdatasyncs/s, {:.1} commits per fdatasync ({:.2} x raw)",
            c.commits_per_sec(),
            c.fsyncs_per_sec(),
            c.commits_per_fsync(),
            c.commits_per_sec() / raw.per_sec()
        );
    }
    Ok(())
}
