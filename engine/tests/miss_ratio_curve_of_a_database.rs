//! `Database::miss_ratio_curve`: on when opened with
//! `Options::miss_ratio_curve`, absent otherwise.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, MrcConfig};

#[test]
fn a_database_opened_with_sampling_answers_its_curve_and_one_without_does_not() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            small_options().miss_ratio_curve(Some(MrcConfig {
                rate_inverse: 1,
                max_keys: 1024,
            })),
        )
        .unwrap();
        db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..2000 {
            t.insert("t", row(i, "some text to fill pages")).unwrap();
        }
        t.commit().unwrap();
        let curve = db.miss_ratio_curve().expect("sampling is on");
        assert_eq!(curve.pool_pages, 64);
        let pages: Vec<usize> = curve.points.iter().map(|p| p.pages).collect();
        assert_eq!(pages, vec![16, 32, 64, 128, 256]);
        assert!(curve.sampled_accesses > 100, "{curve}");
        assert!(curve.sample_rate > 0.999, "{curve}");
        // Inserting into one table touches its last page again and again:
        // a bigger model cache never hits less.
        for w in curve.points.windows(2) {
            assert!(w[0].hit_ratio <= w[1].hit_ratio, "{curve}");
        }
        assert!(curve.points[0].hit_ratio > 0.5, "{curve}");
        drop(db);

        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        assert!(db.miss_ratio_curve().is_none());
    })
}
