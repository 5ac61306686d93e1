//! `verify_indexes` on a table no one writes, while the autovacuum worker
//! vacuums it: nothing is wrong, so nothing is reported. The worker runs
//! in the background, so a caller cannot keep it off a table; a vacuum
//! that pruned a page between the check's listing of DEAD line pointers and
//! its reading of the rows made the entries of the pruned tuples look like
//! entries pointing to no heap row ("entry (297) -> (20,6) points to no
//! heap row", seen by the bank test at its end, gone a moment later).

mod common;

use std::time::{Duration, Instant};

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, Value};

#[test]
fn no_violation_is_reported_while_autovacuum_prunes_and_vacuums() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            small_options()
                .autovacuum(true)
                .autovacuum_naptime(Duration::from_millis(1))
                .autovacuum_thresholds(1, 0.0),
        )
        .unwrap();
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("a", ColumnType::I64),
                Column::new("b", ColumnType::Text),
            ],
        )
        .unwrap();
        // Several indexes: each is checked against its own reading of the
        // rows, so a vacuum has time to run between them.
        db.create_index("t_id", "t", "id", true).unwrap();
        db.create_index("t_a", "t", "a", false).unwrap();
        db.create_index("t_b", "t", "b", false).unwrap();
        let row = |id: i64, n: i64| {
            vec![
                Value::I64(id),
                Value::I64(n % 7),
                Value::Text(format!("{:0>40}", n % 5)),
            ]
        };
        let t = db.begin().unwrap();
        for id in 0..400 {
            t.insert("t", row(id, id)).unwrap();
        }
        t.commit().unwrap();
        let started = Instant::now();
        let (mut rounds, mut checks) = (0u64, 0u64);
        while started.elapsed() < Duration::from_secs(4) {
            // Dead versions for the worker to prune and vacuum.
            db.transaction(|t| {
                for id in 0..400 {
                    t.update_by_key("t", "id", &Value::I64(id), row(id, id + rounds as i64 + 1))?;
                }
                Ok(())
            })
            .unwrap();
            rounds += 1;
            // Nobody writes now; the worker runs.
            let quiet = Instant::now();
            while quiet.elapsed() < Duration::from_millis(100) {
                let v = db.verify_indexes("t").unwrap();
                assert!(v.is_empty(), "round {rounds}: {v:?}");
                checks += 1;
            }
        }
        let vacuums = db.autovacuum_stats().vacuums;
        eprintln!("{rounds} rounds, {checks} checks, {vacuums} autovacuums");
        assert!(vacuums > 0, "the worker never ran");
        db.close().unwrap();
    });
}
