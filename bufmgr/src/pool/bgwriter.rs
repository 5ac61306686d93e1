//! The background writer: cleans buffers just ahead of each partition's clock
//! hand so that threads needing a victim find clean ones.
//!
//! PostgreSQL's `BgBufferSync`, run once per partition per round (as Vondra's
//! series runs it per partition). Per round and partition:
//! 1. Read where the hand is (passes, position) and how many victims were
//!    taken since the last round.
//! 2. Estimate how many buffers the sweep will need before the next round
//!    (`smoothed_alloc`, fast attack / slow decline, times
//!    `lru_multiplier`) and how many of the buffers between our cleaning
//!    point and the hand are already reusable (`smoothed_density`).
//! 3. Scan forward from the cleaning point, writing dirty buffers that are
//!    unpinned at the bottom usage step (`SyncOneBuffer` with
//!    `skip_recently_used`), until enough reusable buffers lie ahead of the
//!    hand, `lru_maxpages` were written, or we lapped the hand. The writes go
//!    out in batches (`WriteBatch`: each page share-exclusive locked with
//!    its I/O started until its write completes, one WAL flush and one
//!    backend submission per batch of up to 32).
//!
//! The background writer never moves a clock hand and never changes a usage
//! count or HOT/COOL bit. With HOT/COOL it follows cf/7000 v8: its own
//! density sample uses 4 smoothing samples instead of 16, and a round may
//! write `max(lru_maxpages, upcoming)` pages.
//!
//! Hibernation: after two idle rounds it sleeps 50 x `delay` (PostgreSQL's
//! `HIBERNATE_FACTOR`), until the next sweep wakes it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use parking_lot::Mutex;

use super::{PoolShared, WriteBatch, Writer};
use crate::config::BgWriterConfig;
use crate::desc::BufferId;
use crate::error::Result;
use crate::replacement::evictor::Evictor;

/// `smoothing_samples`.
const SMOOTHING_SAMPLES: f64 = 16.0;
/// cf/7000's `cleaner_smoothing_samples`.
const CLEANER_SMOOTHING_SAMPLES_HOTCOOL: f64 = 4.0;
/// `scan_whole_pool_milliseconds`: an idle pool is still scanned in 2 minutes.
const SCAN_WHOLE_POOL_MS: f64 = 120_000.0;
/// `HIBERNATE_FACTOR`.
const HIBERNATE_FACTOR: u32 = 50;

/// Per-partition state kept across rounds (the statics of `BgBufferSync`).
#[derive(Debug, Clone)]
struct PartitionCleaner {
    saved_valid: bool,
    prev_passes: u64,
    prev_pos: u32,
    next_to_clean: u32,
    next_passes: u64,
    smoothed_alloc: f64,
    smoothed_density: f64,
}

impl Default for PartitionCleaner {
    fn default() -> Self {
        PartitionCleaner {
            saved_valid: false,
            prev_passes: 0,
            prev_pos: 0,
            next_to_clean: 0,
            next_passes: 0,
            smoothed_alloc: 0.0,
            smoothed_density: 10.0,
        }
    }
}

/// All partitions' cleaner state.
#[derive(Debug, Default)]
pub(crate) struct Cleaner {
    parts: Vec<PartitionCleaner>,
}

impl Cleaner {
    /// One round over every partition. Returns (pages written, may hibernate).
    pub fn round(&mut self, pool: &PoolShared, cfg: &BgWriterConfig) -> Result<(usize, bool)> {
        if self.parts.len() != pool.parts.len() {
            self.parts = vec![PartitionCleaner::default(); pool.parts.len()];
        }
        let mut written = 0;
        let mut idle = true;
        for p in 0..pool.parts.len() {
            let (w, i) = self.partition_round(pool, cfg, p)?;
            written += w;
            idle &= i;
        }
        pool.counters
            .bgwriter_rounds
            .fetch_add(1, Ordering::Relaxed);
        Ok((written, idle))
    }

    fn partition_round(
        &mut self,
        pool: &PoolShared,
        cfg: &BgWriterConfig,
        p: usize,
    ) -> Result<(usize, bool)> {
        let st = &mut self.parts[p];
        let hand = &pool.hands[p];
        let n = hand.len() as u64;
        let (strategy_passes, strategy_pos) = hand.position();
        let recent_alloc = hand.take_allocs() as f64;
        if cfg.lru_maxpages == 0 {
            st.saved_valid = false;
            return Ok((0, true));
        }
        let strategy_delta;
        let bufs_to_lap;
        if st.saved_valid {
            let moved = (strategy_passes * n + strategy_pos as u64) as i64
                - (st.prev_passes * n + st.prev_pos as u64) as i64;
            strategy_delta = moved.max(0) as f64;
            let clean_abs = st.next_passes * n + st.next_to_clean as u64;
            let hand_abs = strategy_passes * n + strategy_pos as u64;
            if clean_abs > hand_abs {
                // Ahead of the hand: how far until we lap it.
                bufs_to_lap = n.saturating_sub(clean_abs - hand_abs);
            } else {
                // Behind: jump to the hand.
                st.next_to_clean = strategy_pos;
                st.next_passes = strategy_passes;
                bufs_to_lap = n;
            }
        } else {
            strategy_delta = 0.0;
            st.next_to_clean = strategy_pos;
            st.next_passes = strategy_passes;
            bufs_to_lap = n;
        }
        st.prev_passes = strategy_passes;
        st.prev_pos = strategy_pos;
        st.saved_valid = true;

        let samples = match pool.evictor {
            Evictor::Clock => SMOOTHING_SAMPLES,
            Evictor::HotCool | Evictor::Probation => CLEANER_SMOOTHING_SAMPLES_HOTCOOL,
        };
        if strategy_delta > 0.0 && recent_alloc > 0.0 {
            let scans_per_alloc = strategy_delta / recent_alloc;
            st.smoothed_density += (scans_per_alloc - st.smoothed_density) / SMOOTHING_SAMPLES;
        }
        let bufs_ahead = (n - bufs_to_lap) as f64;
        let reusable_est = bufs_ahead / st.smoothed_density.max(1e-9);
        if recent_alloc >= st.smoothed_alloc {
            st.smoothed_alloc = recent_alloc;
        } else {
            st.smoothed_alloc += (recent_alloc - st.smoothed_alloc) / SMOOTHING_SAMPLES;
        }
        let mut upcoming = st.smoothed_alloc * cfg.lru_multiplier;
        if upcoming == 0.0 {
            st.smoothed_alloc = 0.0;
        }
        let min_scan = n as f64 / (SCAN_WHOLE_POOL_MS / cfg.delay.as_millis().max(1) as f64);
        if upcoming < min_scan + reusable_est {
            upcoming = min_scan + reusable_est;
        }
        let write_limit = match pool.evictor {
            Evictor::Clock => cfg.lru_maxpages,
            Evictor::HotCool | Evictor::Probation => cfg.lru_maxpages.max(upcoming as usize),
        };

        let first = hand.first();
        let mut num_to_scan = bufs_to_lap;
        let mut reusable = reusable_est;
        let mut written = 0usize;
        // The pages are written in batches (`WriteBatch`: one WAL flush and
        // one backend submission per batch); a claimed page counts as
        // written, as it will be when the batch is submitted.
        let mut batch = WriteBatch::new(pool, Writer::Background);
        while num_to_scan > 0 && reusable < upcoming {
            let id: BufferId = first + st.next_to_clean;
            let r = batch.add(id, true)?;
            if batch.is_full() {
                batch.submit()?;
            }
            st.next_to_clean += 1;
            if st.next_to_clean as u64 >= n {
                st.next_to_clean = 0;
                st.next_passes += 1;
            }
            num_to_scan -= 1;
            if r.written {
                reusable += 1.0;
                written += 1;
                if written >= write_limit {
                    break;
                }
            } else if r.reusable {
                reusable += 1.0;
            }
        }
        batch.submit()?;
        let new_delta = (bufs_to_lap - num_to_scan) as f64;
        let new_alloc = reusable - reusable_est;
        if new_delta > 0.0 && new_alloc > 0.0 {
            let scans_per_alloc = new_delta / new_alloc;
            st.smoothed_density += (scans_per_alloc - st.smoothed_density) / samples;
        }
        Ok((written, bufs_to_lap == 0 && recent_alloc == 0.0))
    }
}

/// The running background writer thread.
#[derive(Debug)]
pub(crate) struct BgWriterHandle {
    thread: Option<JoinHandle<()>>,
    stop: Arc<(Mutex<bool>, parking_lot::Condvar)>,
    cleaner: Arc<Mutex<Cleaner>>,
    cfg: BgWriterConfig,
}

impl BgWriterHandle {
    pub fn start(pool: &Arc<PoolShared>, cfg: BgWriterConfig) -> BgWriterHandle {
        let stop = Arc::new((Mutex::new(false), parking_lot::Condvar::new()));
        let cleaner = Arc::new(Mutex::new(Cleaner::default()));
        let weak: Weak<PoolShared> = Arc::downgrade(pool);
        let thread = {
            let stop = stop.clone();
            let cleaner = cleaner.clone();
            std::thread::Builder::new()
                .name("bgwriter".into())
                .spawn(move || run(weak, cfg, stop, cleaner))
                .expect("spawn the background writer")
        };
        BgWriterHandle {
            thread: Some(thread),
            stop,
            cleaner,
            cfg,
        }
    }

    pub fn round_now(&self, pool: &PoolShared) -> Result<usize> {
        self.cleaner.lock().round(pool, &self.cfg).map(|(w, _)| w)
    }

    pub fn detached_round(pool: &PoolShared, cfg: BgWriterConfig) -> Result<usize> {
        // A fresh cleaner has no history: its first round starts at the hand.
        Cleaner::default().round(pool, &cfg).map(|(w, _)| w)
    }

    pub fn stop(mut self, pool: &PoolShared) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        wake(pool);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    pool: Weak<PoolShared>,
    cfg: BgWriterConfig,
    stop: Arc<(Mutex<bool>, parking_lot::Condvar)>,
    cleaner: Arc<Mutex<Cleaner>>,
) {
    let mut idle_rounds = 0;
    loop {
        {
            let mut stopped = stop.0.lock();
            if *stopped {
                return;
            }
            stop.1.wait_for(&mut stopped, cfg.delay);
            if *stopped {
                return;
            }
        }
        let Some(p) = pool.upgrade() else { return };
        // A write failure is the pool's business (it refuses writes and
        // reports it); the bgwriter just tries again next round.
        let idle = cleaner
            .lock()
            .round(&p, &cfg)
            .map(|(_, idle)| idle)
            .unwrap_or(false);
        idle_rounds = if idle { idle_rounds + 1 } else { 0 };
        if idle_rounds >= 2 {
            let (lock, cv) = &p.bgwriter_wake;
            let mut woken = lock.lock();
            *woken = false;
            // Set under the lock: a waker blocks on it until we are asleep.
            p.bgwriter_sleeping.store(true, Ordering::Relaxed);
            if !*stop.0.lock() {
                cv.wait_while_for(&mut woken, |w| !*w, cfg.delay * HIBERNATE_FACTOR);
            }
            p.bgwriter_sleeping.store(false, Ordering::Relaxed);
            idle_rounds = 0;
        }
    }
}

/// Wake a hibernating background writer (called by the sweep).
pub(crate) fn wake(pool: &PoolShared) {
    pool.bgwriter_sleeping.store(false, Ordering::Relaxed);
    let (lock, cv) = &pool.bgwriter_wake;
    *lock.lock() = true;
    cv.notify_all();
}
