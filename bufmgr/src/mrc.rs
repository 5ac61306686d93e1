//! A live miss-ratio curve: the pool's own accesses, spatially sampled,
//! turned into the hit ratio an LRU cache of 0.25x, 0.5x, 1x, 2x and 4x the
//! pool's size would have had on them (SHARDS, Waldspurger et al., FAST '15).
//!
//! 1. **Sampling.** Each page's tag hash is mixed once more
//!    ([`sample_hash`]); an access is sampled when that value is below the
//!    threshold `T` (rate `R = T / 2^64`). The decision is per page, not per
//!    access: a sampled page has every access of it sampled, so the reuse
//!    distances among sampled pages are those of a random `R`-subset of the
//!    pages, and a distance of `d` sampled pages stands for `d / R` pages.
//! 2. **Hit path.** The filter is a multiply and a compare against a copy of
//!    `T` in the thread's private state; a sampled access is appended to the
//!    thread's batch (`MRC_BATCH` records), and only a full batch takes the
//!    sampler's lock. So sampled accesses of different threads reach the
//!    sampler in batches, not in their exact interleaving: a distance across
//!    two threads' batches is off by at most a batch of the other thread.
//!    [`BufferPool::miss_ratio_curve`](crate::BufferPool::miss_ratio_curve)
//!    flushes the calling thread's batch; other threads' last partial
//!    batches (fewer than `MRC_BATCH` sampled accesses each) are counted when
//!    they fill or when the thread exits.
//! 3. **Exact distances of the sample.** Each sampled page keeps the time
//!    (a count of sampled accesses) of its last access; a Fenwick tree holds
//!    a 1 at each page's last time, so the number of distinct pages touched
//!    since a page's last access is one range sum, `O(log S)`. Times are
//!    renumbered 0..S when they reach the tree's end (every `3 S` accesses).
//! 4. **Bounded memory (fixed-size SHARDS).** At most `max_keys` pages are
//!    kept. One more evicts the page of the largest sample hash and lowers
//!    `T` to that hash, so that page (and every other at or above it) is no
//!    longer sampled; the counts gathered so far are scaled by
//!    `T_new / T_old`, so that old and new samples weigh the same.
//! 5. **The curve.** A reuse at scaled distance `d / R` is a hit in an LRU
//!    cache of more than `d / R` pages; a first access (or one of a page
//!    evicted from the sample and never seen again) is a miss at every size.
//!    The histogram has 1,024 buckets per pool size, up to 4x, so the five
//!    sizes fall on bucket boundaries and are read exactly. SHARDS-adj
//!    corrects the sample's share of the hottest pages (see
//!    [`Shards::curve`]).
//!
//! # Accuracy
//!
//! With every page sampled the curve is exact LRU. Below that, its error
//! comes from which pages the hash happens to pick: what matters is how many
//! sampled pages the smallest size (0.25x) spans, `R * pool / 4`, and how
//! much of the traffic the hottest few pages carry. Against an exact LRU
//! replay (`tests/miss_ratio_curve.rs`, a pool of 4,096 pages, 65,536 pages
//! touched) the mean absolute error over the five sizes was 0.3 points at 1
//! in 2, 1.4 at 1 in 3 and 1.8 at 1 in 8 (Zipf-like traffic). SHARDS is
//! meant for large pools: a one-point curve needs some hundreds of sampled
//! pages within 0.25x of the pool, so the default rate of 1 in 1,000 gives
//! a rough curve below ~1 GiB of pool.

use std::collections::{BTreeSet, HashMap};

use crate::error::{Error, Result};
use crate::tag::BufferTag;

/// Sampled accesses a thread collects before handing them to the sampler.
pub(crate) const MRC_BATCH: usize = 64;

/// Histogram buckets per pool size (the sizes 0.25x..4x fall on bucket
/// boundaries: 256, 512, 1,024, 2,048 and 4,096 buckets).
const BUCKETS_PER_POOL: usize = 1024;
/// The largest size the curve answers for, in pool sizes.
const MAX_MULTIPLE: usize = 4;
/// The pool-size multiples of the curve's points, in quarters.
const QUARTERS: [usize; 5] = [1, 2, 4, 8, 16];

/// How the pool samples its accesses for the curve
/// ([`PoolConfig::mrc`](crate::PoolConfig)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrcConfig {
    /// Sample one page in this many at the start (1: every page). The rate
    /// only goes down from here, when `max_keys` is reached.
    pub rate_inverse: u32,
    /// Most pages the sample keeps (its memory bound: about 80 bytes each).
    pub max_keys: usize,
}

impl MrcConfig {
    /// The default: one page in 1,000, at most 16,384 pages kept (~1.3 MiB).
    pub const DEFAULT: MrcConfig = MrcConfig {
        rate_inverse: 1000,
        max_keys: 16_384,
    };

    /// Check the values; the error names the one that is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.rate_inverse == 0 {
            return Err(Error::InvalidConfig(
                "miss-ratio curve sampling: rate_inverse must be at least 1 (1 samples every page)"
                    .into(),
            ));
        }
        if !(16..=1 << 22).contains(&self.max_keys) {
            return Err(Error::InvalidConfig(format!(
                "miss-ratio curve sampling: max_keys {} is outside 16 ..= {}",
                self.max_keys,
                1 << 22
            )));
        }
        Ok(())
    }
}

impl Default for MrcConfig {
    fn default() -> Self {
        MrcConfig::DEFAULT
    }
}

/// The value an access's sampling decision is made on, from the tag's hash
/// (`BufferTag::hash_code`): one more multiply, so that the decision uses
/// the product's high bits rather than the bits the mapping table uses.
#[inline(always)]
pub fn sample_hash(tag_hash: u64) -> u64 {
    (tag_hash ^ (tag_hash >> 29)).wrapping_mul(0x94D0_49BB_1331_11EB)
}

/// The threshold of a rate of `1 / rate_inverse`.
fn threshold_of(rate_inverse: u32) -> u64 {
    if rate_inverse <= 1 {
        u64::MAX
    } else {
        u64::MAX / rate_inverse as u64
    }
}

/// The rate a threshold stands for.
fn rate_of(threshold: u64) -> f64 {
    threshold as f64 / 18_446_744_073_709_551_616.0
}

/// One point of a [`MissRatioCurve`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MrcPoint {
    /// The modelled cache size, in pages.
    pub pages: usize,
    /// That size as a multiple of the pool's (0.25 ..= 4).
    pub multiple: f64,
    /// Hit ratio of an LRU cache of `pages` pages on the sampled accesses
    /// (0 ..= 1).
    pub hit_ratio: f64,
}

/// The hit ratio of an LRU cache of 0.25x..4x the pool on the pool's own
/// accesses, estimated from a spatial sample ([`crate::mrc`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MissRatioCurve {
    /// The pool's size in pages (the 1x point).
    pub pool_pages: usize,
    /// At 0.25x, 0.5x, 1x, 2x and 4x of the pool.
    pub points: Vec<MrcPoint>,
    /// Sampled accesses counted so far (at their sampling time's rate).
    pub sampled_accesses: u64,
    /// Distinct pages in the sample now.
    pub sampled_pages: usize,
    /// The sampling rate now (1 / `rate_inverse` at the start, lower once
    /// the sample has been full).
    pub sample_rate: f64,
}

impl MissRatioCurve {
    /// The point for `multiple` of the pool (0.25, 0.5, 1, 2 or 4).
    pub fn at(&self, multiple: f64) -> Option<&MrcPoint> {
        self.points.iter().find(|p| p.multiple == multiple)
    }
}

impl std::fmt::Display for MissRatioCurve {
    /// One line: `LRU model hit ratio: 0.25x (256 p) 41.2% | ... (sampled
    /// 1,234 accesses of 56 pages at rate 1/1000)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LRU model hit ratio:")?;
        for (i, p) in self.points.iter().enumerate() {
            let sep = if i == 0 { " " } else { " | " };
            write!(
                f,
                "{sep}{}x ({} p) {:.1}%",
                p.multiple,
                p.pages,
                p.hit_ratio * 100.0
            )?;
        }
        let inv = if self.sample_rate > 0.0 {
            1.0 / self.sample_rate
        } else {
            f64::INFINITY
        };
        write!(
            f,
            " (sampled {} accesses of {} pages at rate 1/{inv:.0})",
            self.sampled_accesses, self.sampled_pages
        )
    }
}

/// A Fenwick tree of 0/1 marks over sampled-access times.
#[derive(Debug)]
struct Fenwick {
    tree: Vec<i32>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick {
            tree: vec![0; n + 1],
        }
    }

    fn len(&self) -> usize {
        self.tree.len() - 1
    }

    fn clear(&mut self) {
        self.tree.iter_mut().for_each(|v| *v = 0);
    }

    fn add(&mut self, at: usize, delta: i32) {
        let mut i = at + 1;
        while i < self.tree.len() {
            self.tree[i] += delta;
            i += i & i.wrapping_neg();
        }
    }

    /// Sum over `[0, end)`.
    fn prefix(&self, end: usize) -> i64 {
        let mut i = end;
        let mut s = 0i64;
        while i > 0 {
            s += self.tree[i] as i64;
            i -= i & i.wrapping_neg();
        }
        s
    }
}

/// A sampled page: the time of its last access.
#[derive(Debug, Clone, Copy)]
struct Key {
    last: usize,
}

/// The sampler: the sampled pages, their last-access times, the distance
/// histogram. Fed through [`access`](Self::access) under the pool's lock.
#[derive(Debug)]
pub struct Shards {
    pool_pages: usize,
    max_keys: usize,
    threshold: u64,
    keys: HashMap<BufferTag, Key>,
    /// The sampled pages by sample hash: the largest goes first when full.
    by_hash: BTreeSet<(u64, BufferTag)>,
    marks: Fenwick,
    now: usize,
    /// Reuses by scaled distance, `pool_pages / BUCKETS_PER_POOL` wide.
    hist: Vec<f64>,
    /// Reuses beyond 4x, and first accesses.
    beyond: f64,
    cold: f64,
    total: f64,
    sampled: u64,
}

impl Shards {
    /// A sampler for a pool of `pool_pages` pages.
    pub fn new(pool_pages: usize, config: MrcConfig) -> Result<Shards> {
        config.validate()?;
        if pool_pages == 0 {
            return Err(Error::InvalidConfig(
                "miss-ratio curve of a pool of 0 pages".into(),
            ));
        }
        Ok(Shards {
            pool_pages,
            max_keys: config.max_keys,
            threshold: threshold_of(config.rate_inverse),
            keys: HashMap::with_capacity(config.max_keys + 1),
            by_hash: BTreeSet::new(),
            marks: Fenwick::new(4 * config.max_keys),
            now: 0,
            hist: vec![0.0; BUCKETS_PER_POOL * MAX_MULTIPLE],
            beyond: 0.0,
            cold: 0.0,
            total: 0.0,
            sampled: 0,
        })
    }

    /// The sampling threshold now: an access whose [`sample_hash`] is below
    /// it is sampled.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }

    /// One access of `tag`, with `hash = sample_hash(tag.hash_code())`. An
    /// access at or above the threshold (the threshold has been lowered
    /// since the caller filtered it) is ignored.
    pub fn access(&mut self, tag: BufferTag, hash: u64) {
        if hash >= self.threshold {
            return;
        }
        if self.now == self.marks.len() {
            self.renumber();
        }
        let now = self.now;
        self.now += 1;
        self.sampled += 1;
        self.total += 1.0;
        match self.keys.get_mut(&tag) {
            Some(k) => {
                let last = k.last;
                k.last = now;
                // Distinct sampled pages touched since: the marks in (last, now).
                let d = self.marks.prefix(now) - self.marks.prefix(last + 1);
                self.marks.add(last, -1);
                self.marks.add(now, 1);
                let scaled = d as f64 / rate_of(self.threshold);
                let width = self.pool_pages as f64 / BUCKETS_PER_POOL as f64;
                let bucket = (scaled / width) as usize;
                match self.hist.get_mut(bucket) {
                    Some(c) => *c += 1.0,
                    None => self.beyond += 1.0,
                }
            }
            None => {
                self.cold += 1.0;
                self.keys.insert(tag, Key { last: now });
                self.by_hash.insert((hash, tag));
                self.marks.add(now, 1);
                while self.keys.len() > self.max_keys {
                    self.evict_largest();
                }
            }
        }
    }

    /// Drop the page of the largest sample hash and lower the threshold to
    /// it (step 4 of the module's description).
    fn evict_largest(&mut self) {
        let Some((hash, tag)) = self.by_hash.pop_last() else {
            return;
        };
        if let Some(k) = self.keys.remove(&tag) {
            self.marks.add(k.last, -1);
        }
        let old = rate_of(self.threshold);
        self.threshold = hash;
        let scale = rate_of(hash) / old;
        self.hist.iter_mut().for_each(|c| *c *= scale);
        self.beyond *= scale;
        self.cold *= scale;
        self.total *= scale;
    }

    /// Renumber the last-access times 0..n in their order (the tree is full).
    fn renumber(&mut self) {
        let mut order: Vec<(usize, BufferTag)> =
            self.keys.iter().map(|(t, k)| (k.last, *t)).collect();
        order.sort_unstable();
        self.marks.clear();
        for (i, (_, tag)) in order.iter().enumerate() {
            if let Some(k) = self.keys.get_mut(tag) {
                k.last = i;
            }
            self.marks.add(i, 1);
        }
        self.now = order.len();
    }

    /// The curve from what has been sampled so far. With nothing sampled
    /// every hit ratio is 0 (no access has been a hit).
    ///
    /// `accesses`, all the accesses the sampler was offered (sampled or
    /// not), turns on SHARDS-adj: a sample that happened to catch more (or
    /// fewer) accesses than `accesses * R` did so through its hottest pages,
    /// whose reuses are at the shortest distances; the difference is taken
    /// from (or added to) the first bucket, and the ratios are over
    /// `accesses * R`.
    pub fn curve(&self, accesses: Option<u64>) -> MissRatioCurve {
        let rate = rate_of(self.threshold);
        let (adj, total) = match accesses {
            Some(n) if n > 0 && self.total > 0.0 => {
                let expected = n as f64 * rate;
                (expected - self.total, expected)
            }
            _ => (0.0, self.total),
        };
        let points = QUARTERS
            .iter()
            .map(|&q| {
                let buckets = BUCKETS_PER_POOL * q / 4;
                let hits: f64 = self.hist[..buckets].iter().sum::<f64>() + adj;
                MrcPoint {
                    pages: self.pool_pages * q / 4,
                    multiple: q as f64 / 4.0,
                    hit_ratio: if total > 0.0 {
                        (hits / total).clamp(0.0, 1.0)
                    } else {
                        0.0
                    },
                }
            })
            .collect();
        MissRatioCurve {
            pool_pages: self.pool_pages,
            points,
            sampled_accesses: self.sampled,
            sampled_pages: self.keys.len(),
            sample_rate: rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag::{RelFork, RelId};

    fn tag(b: u32) -> BufferTag {
        BufferTag::new(RelFork::main(RelId(7)), b)
    }

    fn feed(s: &mut Shards, blocks: impl IntoIterator<Item = u32>) {
        for b in blocks {
            let t = tag(b);
            let h = sample_hash(t.hash_code());
            if h < s.threshold() {
                s.access(t, h);
            }
        }
    }

    #[test]
    fn a_loop_over_twice_the_pool_hits_only_in_caches_at_least_that_large() {
        // Every page sampled: the distances are exact. A loop over 200 pages
        // has every reuse at distance 199: a hit at 2x and 4x of a 100-page
        // pool, a miss below.
        let mut s = Shards::new(
            100,
            MrcConfig {
                rate_inverse: 1,
                max_keys: 1024,
            },
        )
        .unwrap();
        feed(&mut s, (0..10).flat_map(|_| 0..200));
        let c = s.curve(None);
        assert_eq!(c.sampled_accesses, 2000);
        assert_eq!(c.at(1.0).unwrap().hit_ratio, 0.0);
        assert_eq!(c.at(0.25).unwrap().pages, 25);
        assert!((c.at(2.0).unwrap().hit_ratio - 0.9).abs() < 1e-12);
        assert!((c.at(4.0).unwrap().hit_ratio - 0.9).abs() < 1e-12);
    }

    #[test]
    fn renumbering_the_times_keeps_the_distances() {
        // 16 keys, a tree of 64 times: renumbered many times over.
        let mut s = Shards::new(
            8,
            MrcConfig {
                rate_inverse: 1,
                max_keys: 16,
            },
        )
        .unwrap();
        feed(&mut s, (0..100).flat_map(|_| 0..12));
        let c = s.curve(None);
        // Distance 11 on every reuse: a hit at 2x (16 pages) and 4x only.
        assert_eq!(c.at(1.0).unwrap().hit_ratio, 0.0);
        assert!((c.at(2.0).unwrap().hit_ratio - 0.99).abs() < 1e-12);
    }

    #[test]
    fn a_full_sample_lowers_the_rate_and_keeps_its_size() {
        let mut s = Shards::new(
            1000,
            MrcConfig {
                rate_inverse: 1,
                max_keys: 64,
            },
        )
        .unwrap();
        feed(&mut s, 0..10_000);
        let c = s.curve(None);
        assert_eq!(c.sampled_pages, 64);
        assert!(c.sample_rate < 0.05, "rate {}", c.sample_rate);
        assert!(c.sample_rate > 0.002, "rate {}", c.sample_rate);
    }

    #[test]
    fn bad_settings_are_errors_naming_the_setting() {
        let e = MrcConfig {
            rate_inverse: 0,
            max_keys: 100,
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("rate_inverse"), "{e}");
        let e = MrcConfig {
            rate_inverse: 10,
            max_keys: 1,
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("max_keys"), "{e}");
    }
}
