//! The physical floor of `sweep` and `ticks`: the same threads reading the
//! same block draws of the same relation file with bare `pread`s, no pool.
//!
//! A pool miss is a `pread` plus the buffer manager's work (the victim, the
//! mapping table, the checksum); the scenario's rows give evictions per
//! second per thread, and this gives `pread`s per second per thread over the
//! same file and blocks, measured in the same run, so their ratio says how
//! much of a miss is not I/O. Thread `t` walks the key array exactly as
//! the scenario's worker `t` does (stride `2t + 1` from its own offset) and
//! checks each page's block number as the worker does. With `--direct` the
//! file is opened with `O_DIRECT` (into a 4 KiB-aligned buffer), as the
//! pool's backend opens it.
//!
//! Each thread reads into `dest_pages` pages of its own in turn: one page
//! (a buffer that stays in the cache, the bare read), or its share of the
//! pool's size, so that as in the pool each read lands on memory not
//! touched since the destination was last cycled through (for a pool larger
//! than the caches, a cold destination).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::io::AlignedBuf;
use bufmgr::{BlockNumber, PAGE_SIZE};
use serde::{Deserialize, Serialize};

use crate::common::CpuSample;
use crate::data;
use crate::error::{BenchError, Result};
use crate::harness;
use crate::latency::{Latency, Summary};

use super::sweep::LATENCY_EVERY;

/// One thread count's raw `pread` window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreadBaseline {
    pub threads: usize,
    /// Pages each thread reads into in turn (1: one buffer).
    #[serde(default = "one_page")]
    pub dest_pages: usize,
    pub window_secs: f64,
    /// `pread`s completed by all threads in the window.
    pub reads: u64,
    pub reads_per_sec: f64,
    /// `reads_per_sec / threads`.
    pub reads_per_thread_per_sec: f64,
    /// Cores this process used in the window, and reads per CPU-second
    /// (`None` where `/proc` cannot be read): as a row's `evict/cpu-s`, the
    /// figure to compare on a machine other processes keep busy.
    #[serde(default)]
    pub cpu_cores_used: Option<f64>,
    #[serde(default)]
    pub reads_per_cpu_sec: Option<f64>,
    /// Pages whose block number was not the one read.
    pub data_errors: u64,
    /// One `pread` (with its block check) in [`LATENCY_EVERY`] per thread
    /// timed in the window, as the scenario's workers time their page
    /// accesses: the figure beside a row's evicting accesses (`None`: none
    /// was timed).
    #[serde(default)]
    pub read_latency: Option<Summary>,
}

fn one_page() -> usize {
    1
}

/// A thread's count of reads, alone on its cache line so that the counting
/// does not bounce a line between the readers.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// What one reader saw.
#[derive(Debug, Default)]
struct ReaderOutcome {
    data_errors: u64,
    first_error: Option<String>,
    /// Its timed reads in the window.
    latency: Latency,
}

fn open(path: &Path, direct: bool) -> Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path).map_err(|source| BenchError::Io {
        op: "open for the raw pread baseline",
        path: path.to_path_buf(),
        source,
    })
}

/// What the driver tells the readers.
#[derive(Default)]
struct Flags {
    stop: AtomicBool,
    /// Raised for the measured window.
    in_window: AtomicBool,
}

/// Thread `t`'s loop: `pread` the block `keys` names into the next of its
/// `dest_pages` pages, check its block number, count, until `stop`; one
/// read in [`LATENCY_EVERY`] timed (into the outcome while `in_window`).
fn reader(
    path: &Path,
    direct: bool,
    keys: &[BlockNumber],
    t: usize,
    dest_pages: usize,
    count: &Counter,
    flags: &Flags,
) -> Result<ReaderOutcome> {
    let Flags { stop, in_window } = flags;
    debug_assert!(keys.len().is_power_of_two());
    let file = open(path, direct)?;
    let mut dest = AlignedBuf::zeroed(PAGE_SIZE * dest_pages);
    let mut out = ReaderOutcome::default();
    let mask = keys.len() - 1;
    let stride = 2 * t + 1;
    let mut i = (t * keys.len() / 2) & mask;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let block = keys[i];
        i = (i + stride) & mask;
        let slot = (n % dest_pages as u64) as usize * PAGE_SIZE;
        let page = &mut dest[slot..slot + PAGE_SIZE];
        let started = n.is_multiple_of(LATENCY_EVERY).then(Instant::now);
        if let Err(source) = file.read_exact_at(page, u64::from(block) * PAGE_SIZE as u64) {
            stop.store(true, Ordering::Relaxed);
            return Err(BenchError::Io {
                op: "pread (raw baseline) of",
                path: path.to_path_buf(),
                source,
            });
        }
        let found = data::page_block(page);
        if let Some(started) = started
            && in_window.load(Ordering::Relaxed)
        {
            out.latency.record(started.elapsed());
        }
        if found != block {
            out.data_errors += 1;
            out.first_error
                .get_or_insert_with(|| format!("pread block {block}, got a page of block {found}"));
        }
        n += 1;
        count.0.store(n, Ordering::Relaxed);
    }
    Ok(out)
}

fn total(counts: &[Counter]) -> u64 {
    counts.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
}

/// Run `threads` readers of `path` over `keys` (a power-of-two array),
/// each into `dest_pages` pages of its own in turn: `warmup`, then a
/// window of `window` between two counts.
pub fn measure(
    path: &Path,
    direct: bool,
    keys: &[BlockNumber],
    threads: usize,
    dest_pages: usize,
    warmup: Duration,
    window: Duration,
) -> Result<PreadBaseline> {
    if dest_pages == 0 {
        return Err(BenchError::Config(
            "raw pread baseline: a destination of 0 pages".into(),
        ));
    }
    if threads == 0 || !keys.len().is_power_of_two() {
        return Err(BenchError::Config(format!(
            "raw pread baseline: {threads} threads over {} keys (needs at least one thread \
             and a power-of-two key count)",
            keys.len()
        )));
    }
    let flags = Flags::default();
    let Flags { stop, in_window } = &flags;
    let counts: Vec<Counter> = (0..threads).map(|_| Counter::default()).collect();
    let (window, outcomes) = harness::run_crew(
        0..threads,
        &|t, _| reader(path, direct, keys, t, dest_pages, &counts[t], &flags),
        || stop.store(true, Ordering::Relaxed),
        |_| {
            std::thread::sleep(warmup);
            in_window.store(true, Ordering::Relaxed);
            let (n0, c0, t0) = (total(&counts), CpuSample::now(), Instant::now());
            std::thread::sleep(window);
            let (n1, c1, t1) = (total(&counts), CpuSample::now(), Instant::now());
            in_window.store(false, Ordering::Relaxed);
            let secs = (t1 - t0).as_secs_f64();
            let cores = c0.zip(c1).map(|(c0, c1)| c1.cores_since(&c0, secs).0);
            Ok((n1 - n0, secs, cores))
        },
    )?;
    let (reads, secs, cores) = window;
    let mut data_errors = 0;
    let mut latency = Latency::new();
    for o in outcomes {
        data_errors += o.data_errors;
        latency.merge(&o.latency);
        if let Some(e) = o.first_error {
            eprintln!("raw pread baseline, {threads} threads: DATA ERROR: {e}");
        }
    }
    let reads_per_sec = reads as f64 / secs;
    Ok(PreadBaseline {
        threads,
        dest_pages,
        window_secs: secs,
        reads,
        reads_per_sec,
        reads_per_thread_per_sec: reads_per_sec / threads as f64,
        cpu_cores_used: cores,
        reads_per_cpu_sec: cores
            .filter(|&c| c > 0.0)
            .map(|c| reads as f64 / (c * secs)),
        data_errors,
        read_latency: (latency.count() > 0).then(|| latency.summary()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::{FileStorage, RelFork, RelId, StorageBackend};

    /// Into one page or into a spread of pages (the block check reads the
    /// page each read landed in, so a wrong slot would be a data error).
    #[test]
    fn the_raw_baseline_reads_the_blocks_it_is_given_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = std::sync::Arc::new(FileStorage::open(dir.path()).unwrap());
        let rel = RelId(7);
        data::ensure_relation(&files, rel, 64, 32, false).unwrap();
        let path = files.path(RelFork::main(rel));
        let keys: Vec<BlockNumber> = (0..1024).map(|i| (i * 7) % 64).collect();
        for dest_pages in [1, 16] {
            let b = measure(
                &path,
                false,
                &keys,
                2,
                dest_pages,
                Duration::from_millis(20),
                Duration::from_millis(100),
            )
            .unwrap();
            assert_eq!(b.dest_pages, dest_pages);
            assert_counted(&b);
        }
    }

    fn assert_counted(b: &PreadBaseline) {
        assert_eq!(b.threads, 2);
        assert_eq!(b.data_errors, 0);
        assert!(b.reads > 0, "{b:?}");
        assert!((b.reads_per_thread_per_sec * 2.0 - b.reads_per_sec).abs() < 1e-6);
        let l = b.read_latency.expect("timed reads in the window");
        assert!(
            l.count > 0 && l.count <= b.reads,
            "{l:?} of {} reads",
            b.reads
        );
        assert!(l.p50_us > 0.0 && l.p50_us <= l.max_us, "{l:?}");
    }

    #[test]
    fn a_block_beyond_the_file_is_an_error_not_a_rate() {
        let dir = tempfile::tempdir().unwrap();
        let files = std::sync::Arc::new(FileStorage::open(dir.path()).unwrap());
        let rel = RelId(8);
        data::ensure_relation(&files, rel, 8, 32, false).unwrap();
        let path = files.path(RelFork::main(rel));
        let keys: Vec<BlockNumber> = vec![100; 16];
        let e = measure(
            &path,
            false,
            &keys,
            1,
            1,
            Duration::from_millis(10),
            Duration::from_millis(10),
        )
        .unwrap_err();
        assert!(e.to_string().contains("pread"), "{e}");
    }

    #[test]
    fn a_key_array_that_is_not_a_power_of_two_is_refused() {
        let e = measure(
            Path::new("unused"),
            false,
            &[0, 1, 2],
            1,
            1,
            Duration::ZERO,
            Duration::ZERO,
        )
        .unwrap_err();
        assert!(e.to_string().contains("power-of-two"), "{e}");
    }

    #[test]
    fn a_destination_of_no_pages_is_refused() {
        let e = measure(
            Path::new("unused"),
            false,
            &[0, 1],
            1,
            0,
            Duration::ZERO,
            Duration::ZERO,
        )
        .unwrap_err();
        assert!(e.to_string().contains("0 pages"), "{e}");
    }
}
