//! Measuring the log: insert rates, group-commit rates, and the raw
//! fdatasync rate of the disk underneath, shared by the `wal_rates` example
//! and the `bench wal-commit` scenario.
//!
//! ```text
//!   commit_rate(dir, T, window):  T threads, each looping
//!       insert one 100-byte record ── flush(its end LSN)   (a synchronous commit)
//!     -> commits, WAL fdatasyncs, commits per fdatasync (group commit: one
//!        leader's fdatasync serves every committer waiting behind it)
//!
//!   raw_fdatasync_rate(dir, window):  one thread on a preallocated file,
//!       overwrite the next 100 bytes ── fdatasync
//!     -> the disk's rate for the same durable step without the log: the
//!        ceiling of one committer, and the unit group commit multiplies
//! ```
//!
//! `commit_rate` reopens the log afterwards and counts the valid records it
//! finds (`records_read_back`), so a caller can check nothing was lost.
//! The raw file is preallocated (written with zeros and synced first), as
//! WAL segments are (`segment` rule 2), so neither side pays for growing a
//! file. Each measurement uses a fresh directory under `dir` and removes it.
//! These are measurements, not tests: callers report them side by side
//! from one run and never assert on them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Result, WalError};
use crate::log::{Wal, WalConfig};
use crate::record::{Record, RmgrKind};

/// Payload bytes of each measured record (about a commit record with a
/// little data; the raw loop writes the same amount).
pub const PAYLOAD: usize = 100;
/// Size of the raw loop's preallocated file: the loop wraps around in it.
pub const RAW_FILE_BYTES: u64 = 16 << 20;

/// One group-commit measurement.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct CommitRate {
    pub threads: usize,
    pub secs: f64,
    /// Records inserted and flushed (each one a commit).
    pub commits: u64,
    /// fdatasyncs of WAL segments in the window.
    pub fsyncs: u64,
    /// Valid records a reopened log found afterwards: the commits plus the
    /// one record written before the window, if nothing was lost.
    pub records_read_back: u64,
}

impl CommitRate {
    pub fn commits_per_sec(&self) -> f64 {
        self.commits as f64 / self.secs
    }
    pub fn fsyncs_per_sec(&self) -> f64 {
        self.fsyncs as f64 / self.secs
    }
    /// How many commits one fdatasync served (0 if none was made).
    pub fn commits_per_fsync(&self) -> f64 {
        if self.fsyncs == 0 {
            0.0
        } else {
            self.commits as f64 / self.fsyncs as f64
        }
    }
}

/// One raw fdatasync measurement.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct RawRate {
    pub secs: f64,
    pub fdatasyncs: u64,
}

impl RawRate {
    pub fn per_sec(&self) -> f64 {
        self.fdatasyncs as f64 / self.secs
    }
}

/// One insert-only measurement (no flush).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct InsertRate {
    pub threads: usize,
    pub secs: f64,
    pub records: u64,
    pub bytes: u64,
    pub writes: u64,
}

/// A record of [`PAYLOAD`] bytes for transaction `xid`.
pub fn record(xid: u64) -> Record {
    Record::builder(RmgrKind::Xact, 0, xid)
        .payload(vec![0x5A; PAYLOAD])
        .build()
        .expect("a 100-byte record is within every limit")
}

/// A fresh directory under `parent` for one measurement.
fn scratch(parent: &Path, what: &str) -> Result<PathBuf> {
    let mut n = 0u32;
    loop {
        let dir = parent.join(format!("{what}-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(WalError::io("create", &dir, e)),
        }
    }
}

fn remove(dir: &Path) -> Result<()> {
    std::fs::remove_dir_all(dir).map_err(|e| WalError::io("remove", dir, e))
}

/// Run `body` on `threads` threads sharing `wal`; each returns a count.
fn on_threads(
    wal: &Arc<Wal>,
    threads: usize,
    body: impl Fn(&Wal, u64) -> Result<u64> + Sync,
) -> Result<u64> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads as u64)
            .map(|t| {
                let (wal, body) = (wal, &body);
                s.spawn(move || body(wal, t))
            })
            .collect();
        let mut total = 0;
        for h in hs {
            total += h.join().expect("a measuring thread panicked")?;
        }
        Ok(total)
    })
}

/// `inserts` records inserted by `threads` threads, never flushed.
pub fn insert_rate(parent: &Path, threads: usize, inserts: u64) -> Result<InsertRate> {
    let dir = scratch(parent, "wal-insert")?;
    let wal = Arc::new(Wal::open(&dir, WalConfig::default())?);
    let per_thread = inserts / threads as u64;
    let started = Instant::now();
    on_threads(&wal, threads, |wal, t| {
        for i in 0..per_thread {
            wal.insert(&record(t << 32 | i))?;
        }
        Ok(per_thread)
    })?;
    let secs = started.elapsed().as_secs_f64();
    let stats = wal.stats();
    drop(wal);
    remove(&dir)?;
    Ok(InsertRate {
        threads,
        secs,
        records: stats.records,
        bytes: stats.bytes,
        writes: stats.writes,
    })
}

/// Group commit: `threads` threads each inserting a record and flushing to
/// its end, for `window`.
pub fn commit_rate(parent: &Path, threads: usize, window: Duration) -> Result<CommitRate> {
    let log = CommitLog::open(parent)?;
    let (window, _) = log.commit_window(threads, window, |_| (), |_, _| ())?;
    log.finish(window)
}

/// [`commit_rate`] in its three steps, for a caller that watches the window
/// itself: [`open`](Self::open) a fresh log, run
/// [`commit_window`](Self::commit_window), then [`finish`](Self::finish)
/// (reopen the log, count its records, remove it).
#[derive(Debug)]
pub struct CommitLog {
    dir: PathBuf,
    wal: Wal,
}

/// What [`CommitLog::commit_window`] measured; [`CommitLog::finish`] turns
/// it into a [`CommitRate`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct CommitWindow {
    pub threads: usize,
    pub secs: f64,
    pub commits: u64,
    pub fsyncs: u64,
}

impl CommitLog {
    /// A fresh log in a new directory under `parent`, its first segment
    /// created (zero-filled, synced) by one flushed record, so the window
    /// does not pay for it.
    pub fn open(parent: &Path) -> Result<CommitLog> {
        let dir = scratch(parent, "wal-commit")?;
        let wal = Wal::open(&dir, WalConfig::default())?;
        let (_, end) = wal.insert(&record(0))?;
        wal.flush(end)?;
        Ok(CommitLog { dir, wal })
    }

    /// `threads` threads each inserting a record and flushing to its end,
    /// for `window`; each thread also keeps a state made by `init(thread)`
    /// and calls `each(state, began)` after every commit (`began`: when its
    /// insert started, so a caller can time the commit). Returns the states
    /// in thread order.
    pub fn commit_window<S: Send>(
        &self,
        threads: usize,
        window: Duration,
        init: impl Fn(usize) -> S + Sync,
        each: impl Fn(&mut S, Instant) + Sync,
    ) -> Result<(CommitWindow, Vec<S>)> {
        let wal = &self.wal;
        let before = wal.stats();
        let started = Instant::now();
        let outs: Vec<(u64, S)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let (init, each) = (&init, &each);
                    s.spawn(move || -> Result<(u64, S)> {
                        let mut state = init(t);
                        let mut n = 0u64;
                        while started.elapsed() < window {
                            let began = Instant::now();
                            let (_, end) = wal.insert(&record((t as u64) << 32 | n))?;
                            wal.flush(end)?;
                            each(&mut state, began);
                            n += 1;
                        }
                        Ok((n, state))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("a measuring thread panicked"))
                .collect::<Result<Vec<_>>>()
        })?;
        let secs = started.elapsed().as_secs_f64();
        let fsyncs = wal.stats().fsyncs - before.fsyncs;
        let commits = outs.iter().map(|(n, _)| n).sum();
        let states = outs.into_iter().map(|(_, s)| s).collect();
        Ok((
            CommitWindow {
                threads,
                secs,
                commits,
                fsyncs,
            },
            states,
        ))
    }

    /// Close the log, reopen it and count its valid records (every flushed
    /// record must be there), remove it; `window`'s figures with that count.
    pub fn finish(self, window: CommitWindow) -> Result<CommitRate> {
        let CommitLog { dir, wal } = self;
        drop(wal);
        let records_read_back = Wal::open(&dir, WalConfig::default())?.startup().records;
        remove(&dir)?;
        Ok(CommitRate {
            threads: window.threads,
            secs: window.secs,
            commits: window.commits,
            fsyncs: window.fsyncs,
            records_read_back,
        })
    }
}

/// The raw rate: overwrite [`PAYLOAD`] bytes of a preallocated file and
/// fdatasync, in a loop, for `window`.
pub fn raw_fdatasync_rate(parent: &Path, window: Duration) -> Result<RawRate> {
    let dir = scratch(parent, "raw-fdatasync")?;
    let path = dir.join("preallocated");
    let mut f: File = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| WalError::io("create", &path, e))?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..RAW_FILE_BYTES / zeros.len() as u64 {
        f.write_all(&zeros)
            .map_err(|e| WalError::io("preallocate", &path, e))?;
    }
    f.sync_all().map_err(|e| WalError::io("fsync", &path, e))?;
    let data = [0x5Au8; PAYLOAD];
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < window {
        let at = (n * PAYLOAD as u64) % (RAW_FILE_BYTES - PAYLOAD as u64);
        f.write_all_at(&data, at)
            .map_err(|e| WalError::io("write", &path, e))?;
        f.sync_data()
            .map_err(|e| WalError::io("fdatasync", &path, e))?;
        n += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    drop(f);
    remove(&dir)?;
    Ok(RawRate {
        secs,
        fdatasyncs: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measurements_count_what_they_did() {
        let dir = tempfile::tempdir().unwrap();
        let w = Duration::from_millis(100);
        let c = commit_rate(dir.path(), 2, w).unwrap();
        assert!(c.commits > 0 && c.fsyncs > 0, "{c:?}");
        assert!(
            c.fsyncs <= c.commits,
            "one fdatasync per commit at most: {c:?}"
        );
        assert_eq!(c.records_read_back, c.commits + 1, "{c:?}");
        let log = CommitLog::open(dir.path()).unwrap();
        let (window, seen) = log
            .commit_window(2, w, |t| (t, 0u64), |s, _| s.1 += 1)
            .unwrap();
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(seen.iter().map(|s| s.1).sum::<u64>(), window.commits);
        let c = log.finish(window).unwrap();
        assert_eq!(c.records_read_back, c.commits + 1, "{c:?}");
        let r = raw_fdatasync_rate(dir.path(), w).unwrap();
        assert!(r.fdatasyncs > 0, "{r:?}");
        let i = insert_rate(dir.path(), 2, 1000).unwrap();
        assert_eq!(i.records, 1000);
        // Every scratch directory was removed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
