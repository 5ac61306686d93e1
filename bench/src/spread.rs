//! When two measured figures may be compared.
//!
//! A figure measured in several windows has a spread (lowest, median,
//! highest); two such figures differ beyond run-to-run noise only where
//! their ranges do not overlap, and only then is a ratio or a difference
//! between them quoted. A figure measured in one window has no spread of
//! its own: two miss ratios from single windows are called apart only when
//! they are both [`MIN_MISS_RATIO_GAP`] apart and further apart than the
//! counting noise of their miss counts allows ([`miss_ratios_apart`]).

use serde::Serialize;

/// Two miss ratios from single windows closer than this (absolute, 0.05
/// percentage points of the accesses) are not told apart: at that level a
/// handful of misses more or less in one window moves the ratio by as much.
pub const MIN_MISS_RATIO_GAP: f64 = 0.0005;

/// Counting noise: two miss counts (scaled to the same number of accesses)
/// must differ by more than this many standard deviations of a Poisson
/// count of their sum.
pub const MISS_COUNT_SIGMAS: f64 = 3.0;

/// Two shares from single windows (a fraction of a set of pages resident)
/// closer than this (absolute, one percentage point) are not told apart.
pub const MIN_SHARE_GAP: f64 = 0.01;

/// A figure measured in `n` windows.
#[derive(Copy, Clone, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none or one is not a
    /// number (a figure that could not be measured is not a figure).
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            n,
            min: v[0],
            median,
            max: v[n - 1],
        })
    }

    /// The two ranges share no value: the difference is beyond the
    /// run-to-run spread. A figure of one window has no spread and is never
    /// apart by this test.
    pub fn apart(&self, other: &Spread) -> bool {
        self.n > 1 && other.n > 1 && (self.max < other.min || other.max < self.min)
    }

    /// This median over `base`'s, only where the ranges are apart and
    /// `base`'s median is not zero.
    pub fn ratio_if_apart(&self, base: &Spread) -> Option<f64> {
        (self.apart(base) && base.median != 0.0).then(|| self.median / base.median)
    }
}

/// Whether two miss ratios of single windows, `a_misses` of `a_accesses`
/// and `b_misses` of `b_accesses`, differ beyond noise: at least
/// [`MIN_MISS_RATIO_GAP`] apart, and the counts (scaled to the larger
/// number of accesses) more than [`MISS_COUNT_SIGMAS`] Poisson standard
/// deviations apart. No accesses on either side: not apart.
pub fn miss_ratios_apart(a_misses: u64, a_accesses: u64, b_misses: u64, b_accesses: u64) -> bool {
    if a_accesses == 0 || b_accesses == 0 {
        return false;
    }
    let (ra, rb) = (
        a_misses as f64 / a_accesses as f64,
        b_misses as f64 / b_accesses as f64,
    );
    if (ra - rb).abs() < MIN_MISS_RATIO_GAP {
        return false;
    }
    let n = a_accesses.max(b_accesses) as f64;
    let (ca, cb) = (ra * n, rb * n);
    (ca - cb).abs() > MISS_COUNT_SIGMAS * (ca + cb).sqrt()
}

/// Whether two shares (fractions in 0..=1) of single windows differ by at
/// least [`MIN_SHARE_GAP`].
pub fn shares_apart(a: f64, b: f64) -> bool {
    (a - b).abs() >= MIN_SHARE_GAP
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.n, s.min, s.median, s.max), (4, 1.0, 2.5, 4.0));
        let s = Spread::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!(s.median, 3.0);
    }

    #[test]
    fn no_values_or_a_nan_give_no_spread() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn overlapping_ranges_give_no_ratio_and_separate_ones_do() {
        let clock = Spread::of(&[7922.0, 7944.0, 7959.0]).unwrap();
        let close = Spread::of(&[7950.0, 7990.0, 8010.0]).unwrap();
        let far = Spread::of(&[8288.0, 8329.0, 8342.0]).unwrap();
        assert!(!close.apart(&clock));
        assert_eq!(close.ratio_if_apart(&clock), None);
        assert!(far.apart(&clock));
        let r = far.ratio_if_apart(&clock).unwrap();
        assert!((r - 8329.0 / 7944.0).abs() < 1e-12);
    }

    #[test]
    fn a_single_window_has_no_spread_to_be_apart_by() {
        let a = Spread::of(&[1.0]).unwrap();
        let b = Spread::of(&[2.0]).unwrap();
        assert!(!a.apart(&b));
    }

    #[test]
    fn tiny_miss_ratios_ten_times_apart_are_noise() {
        // 0.012% vs 0.001% of 2.5 M accesses: 300 vs 25 misses, far apart
        // as counts but 0.011 points apart as ratios.
        assert!(!miss_ratios_apart(300, 2_500_000, 25, 2_500_000));
    }

    #[test]
    fn miss_ratios_a_point_apart_over_many_accesses_are_apart() {
        // 0.868% vs 0.177%.
        assert!(miss_ratios_apart(21_700, 2_500_000, 4_425, 2_500_000));
    }

    #[test]
    fn a_gap_of_few_misses_is_counting_noise() {
        // 0.3% vs 0.1% but of 1,000 accesses: 3 vs 1 miss.
        assert!(!miss_ratios_apart(3, 1_000, 1, 1_000));
        assert!(!miss_ratios_apart(3, 0, 1, 1_000));
    }

    #[test]
    fn shares_a_point_apart_are_apart() {
        assert!(shares_apart(0.970, 0.993));
        assert!(!shares_apart(0.999, 0.995));
    }
}
