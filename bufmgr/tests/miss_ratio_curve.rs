//! The live miss-ratio curve (`bufmgr::mrc`) against an exact offline LRU
//! replay of the same accesses.
//!
//! The accesses go through a real pool (single-threaded, so the sampler
//! sees them in the order they were made); the same sequence is then replayed
//! through a plain LRU cache at each of the curve's five sizes, and the mean
//! absolute difference of the hit ratios must be at most one percentage
//! point. Each test makes 1,000,000 accesses over 65,536 pages with a pool of
//! 4,096 (the curve's sizes are 1,024 ..= 16,384 pages) at a rate of 1 page
//! in 2 (~32,000 sampled pages, ~500,000 sampled accesses); the bounded
//! test starts at every page and keeps at most 24,576, ending near 1 in 3.
//! The relation is a sparse file: its pages read as new (all zeros beyond
//! the durable length).
//!
//! Measured on these workloads (one run each): 1 in 2, Zipf 0.6: 0.30
//! points; the mix: 0.24; the bounded sample: 0.96. Lower rates on the same
//! pool were not within a point: 1 in 3 on the mix, 1.39; 1 in 8, Zipf 0.6,
//! 1.84 (which pages happen to be sampled moves the curve by more than a
//! point while the 0.25x size spans only ~100 sampled pages; see
//! `bufmgr::mrc` on accuracy).

mod common;

use std::collections::{BTreeMap, HashMap};

use bufmgr::{BlockNumber, BufferPool, MrcConfig, PAGE_SIZE, StorageBackend};
use common::{TestDb, rel, small_config, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const R: u32 = 5;
const PAGES: BlockNumber = 65_536;
const POOL: usize = 4096;
const ACCESSES: usize = 1_000_000;

/// A pool sampling at `config` over a sparse relation of `PAGES` pages.
fn sampled_pool(db: &TestDb, config: MrcConfig) -> BufferPool {
    let path = db.storage.path(rel(R));
    std::fs::File::create(&path)
        .and_then(|f| f.set_len(PAGES as u64 * PAGE_SIZE as u64))
        .expect("create the sparse relation file");
    let pool = db.pool(small_config(POOL).checksums(false).mrc(Some(config)));
    pool.set_zeroed_beyond_durable_is_new(true);
    pool
}

/// Draws from a Zipf distribution over `0..n` with exponent `s`.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64).powf(s);
                acc
            })
            .collect();
        cdf.iter_mut().for_each(|c| *c /= acc);
        Zipf { cdf }
    }

    fn draw(&self, rng: &mut SmallRng) -> usize {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Hit ratio of an exact LRU cache of `size` pages over `refs`.
fn lru_hit_ratio(refs: &[BlockNumber], size: usize) -> f64 {
    let mut stamp_of: HashMap<BlockNumber, u64> = HashMap::new();
    let mut by_stamp: BTreeMap<u64, BlockNumber> = BTreeMap::new();
    let mut hits = 0u64;
    for (now, &b) in refs.iter().enumerate() {
        let now = now as u64;
        match stamp_of.insert(b, now) {
            Some(old) => {
                hits += 1;
                by_stamp.remove(&old);
            }
            None => {
                if by_stamp.len() == size {
                    let (_, gone) = by_stamp
                        .pop_first()
                        .expect("a full cache has an oldest page");
                    stamp_of.remove(&gone);
                }
            }
        }
        by_stamp.insert(now, b);
    }
    hits as f64 / refs.len() as f64
}

/// Runs `refs` through a pool sampling at `config`, and returns the mean
/// absolute error (in points) of its curve against exact LRU, after
/// printing both.
fn mean_abs_error_in_points(refs: &[BlockNumber], config: MrcConfig) -> f64 {
    let db = TestDb::new();
    let pool = sampled_pool(&db, config);
    for &b in refs {
        drop(pool.read_buffer(rel(R), b, None).expect("read"));
    }
    let curve = pool.miss_ratio_curve().expect("sampling is on");
    println!("{curve}");
    assert_eq!(curve.points.len(), 5);
    assert!(curve.sampled_accesses > 20_000, "{curve}");
    let mut sum = 0.0;
    for p in &curve.points {
        let exact = lru_hit_ratio(refs, p.pages);
        println!(
            "{:>5} pages: live {:.2}%  exact {:.2}%",
            p.pages,
            p.hit_ratio * 100.0,
            exact * 100.0
        );
        sum += (p.hit_ratio - exact).abs() * 100.0;
    }
    sum / curve.points.len() as f64
}

#[test]
fn the_live_curve_of_zipf_accesses_is_within_a_point_of_exact_lru() {
    with_timeout(600, || {
        let mut rng = SmallRng::seed_from_u64(0x5a4d5);
        let zipf = Zipf::new(PAGES as usize, 0.6);
        // Page numbers shuffled, so that popularity is not block order.
        let mut perm: Vec<BlockNumber> = (0..PAGES).collect();
        for i in (1..perm.len()).rev() {
            perm.swap(i, rng.random_range(0..=i));
        }
        let refs: Vec<BlockNumber> = (0..ACCESSES).map(|_| perm[zipf.draw(&mut rng)]).collect();
        let mae = mean_abs_error_in_points(
            &refs,
            MrcConfig {
                rate_inverse: 2,
                max_keys: 65_536,
            },
        );
        println!("mean absolute error {mae:.3} points");
        assert!(mae <= 1.0, "mean absolute error {mae:.3} points");
    })
}

#[test]
fn the_live_curve_of_a_zipf_and_loop_mix_is_within_a_point_of_exact_lru_at_another_seed() {
    with_timeout(600, || {
        let mut rng = SmallRng::seed_from_u64(77);
        let zipf = Zipf::new(PAGES as usize, 0.7);
        // Two accesses in three Zipf-distributed, one in three from a loop
        // over 6,000 pages (1.5x the pool): its reuses fall between 2x and
        // 4x once the Zipf pages in between are counted.
        let mut next_loop = 0;
        let refs: Vec<BlockNumber> = (0..ACCESSES)
            .map(|i| {
                if i % 3 == 2 {
                    next_loop = (next_loop + 1) % 6000;
                    PAGES - 1 - next_loop
                } else {
                    zipf.draw(&mut rng) as BlockNumber
                }
            })
            .collect();
        let mae = mean_abs_error_in_points(
            &refs,
            MrcConfig {
                rate_inverse: 2,
                max_keys: 65_536,
            },
        );
        println!("mean absolute error {mae:.3} points");
        assert!(mae <= 1.0, "mean absolute error {mae:.3} points");
    })
}

#[test]
fn a_pool_opened_without_sampling_has_no_curve() {
    let db = TestDb::new();
    db.create_rel(rel(R), 4);
    let pool = db.pool(small_config(64));
    drop(pool.read_buffer(rel(R), 1, None).expect("read"));
    assert!(pool.miss_ratio_curve().is_none());
}

#[test]
fn a_bounded_sample_lowers_its_rate_and_still_tracks_exact_lru() {
    with_timeout(600, || {
        // Every page sampled at first, at most 24,576 kept: the rate falls
        // to about 1/3 of the ~57,000 pages touched.
        let mut rng = SmallRng::seed_from_u64(31);
        let zipf = Zipf::new(PAGES as usize, 0.6);
        let refs: Vec<BlockNumber> = (0..ACCESSES)
            .map(|_| zipf.draw(&mut rng) as BlockNumber)
            .collect();
        let db = TestDb::new();
        let pool = sampled_pool(
            &db,
            MrcConfig {
                rate_inverse: 1,
                max_keys: 24_576,
            },
        );
        for &b in &refs {
            drop(pool.read_buffer(rel(R), b, None).expect("read"));
        }
        let curve = pool.miss_ratio_curve().expect("sampling is on");
        println!("{curve}");
        assert!(curve.sampled_pages <= 24_576, "{curve}");
        assert!(curve.sample_rate < 0.5, "{curve}");
        let mae: f64 = curve
            .points
            .iter()
            .map(|p| (p.hit_ratio - lru_hit_ratio(&refs, p.pages)).abs() * 100.0)
            .sum::<f64>()
            / 5.0;
        println!("mean absolute error {mae:.3} points");
        assert!(mae <= 1.0, "mean absolute error {mae:.3} points");
    })
}
