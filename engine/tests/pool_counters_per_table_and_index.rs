//! `Database::relation_stats`: the pool's lookups, hits and evictions per
//! relation, named after the table or index they belong to.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, RelKind};

#[test]
fn relation_stats_name_tables_and_indexes_and_add_up_to_the_pool_totals() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_table("u", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let t = db.begin().unwrap();
        // Enough rows that the table outgrows the 64-buffer pool.
        for i in 0..12000 {
            t.insert("t", row(i, "text to fill the pages of t, many of them"))
                .unwrap();
        }
        t.insert("u", row(1, "one row")).unwrap();
        t.commit().unwrap();

        let before = db.relation_stats();
        let find = |v: &[engine::RelationStats], name: &str| {
            v.iter()
                .find(|r| r.name == name)
                .cloned()
                .unwrap_or_else(|| panic!("no row for {name} in {v:?}"))
        };
        let t0 = find(&before, "t");
        assert_eq!(t0.kind, RelKind::Table);
        assert_eq!(t0.table, None);
        assert!(t0.counts.accesses > 0);
        assert!(t0.counts.evictions > 0, "t outgrew the pool: {t0:?}");
        let ix = find(&before, "t_id");
        assert_eq!(ix.kind, RelKind::Index);
        assert_eq!(ix.table.as_deref(), Some("t"));
        assert!(ix.counts.accesses > 0);

        // Every lookup is filed under exactly one relation.
        let pool = db.pool_stats();
        let named: u64 = db.relation_stats().iter().map(|r| r.counts.accesses).sum();
        assert_eq!(pool.relations_untracked.accesses, 0);
        assert_eq!(named, pool.totals().accesses);

        // A scan of u touches u's page and nothing of t or its index.
        let t_before = find(&db.relation_stats(), "t").counts;
        let ix_before = find(&db.relation_stats(), "t_id").counts;
        // u's one page was made by extending u, which is no lookup: u may
        // have no row yet.
        let u_before = db
            .relation_stats()
            .into_iter()
            .find(|r| r.name == "u")
            .map(|r| r.counts)
            .unwrap_or_default();
        let r = db.begin().unwrap();
        assert_eq!(r.scan("u").unwrap().count(), 1);
        r.commit().unwrap();
        let after = db.relation_stats();
        assert_eq!(find(&after, "t").counts, t_before);
        assert_eq!(find(&after, "t_id").counts, ix_before);
        let u = find(&after, "u").counts;
        assert!(u.accesses > u_before.accesses);
        assert_eq!(
            u.misses(),
            u_before.misses(),
            "u's one page stayed resident"
        );
        assert_eq!(u.hits - u_before.hits, u.accesses - u_before.accesses);
    })
}

/// A long-lived thread that creates, fills and drops tables over and over
/// (more than a thread's counter slots) still counts the table it creates
/// next under that table's name: the slots of dropped relations are not
/// held forever, and the dropped tables' counts are kept ("relation N").
#[test]
fn a_thread_that_dropped_many_tables_still_counts_a_new_table_by_name() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let rounds = bufmgr::RELATION_SLOTS + 8;
        for i in 0..rounds {
            let name = format!("tmp{i}");
            db.create_table(&name, two_columns()).unwrap();
            db.transaction(|txn| txn.insert(&name, row(1, "x")).map(|_| ()))
                .unwrap();
            let scanned = db
                .read_transaction(|txn| Ok(txn.scan(&name)?.count()))
                .unwrap();
            assert_eq!(scanned, 1);
            db.drop_table(&name).unwrap();
        }
        db.create_table("last", two_columns()).unwrap();
        db.transaction(|txn| txn.insert("last", row(1, "x")).map(|_| ()))
            .unwrap();
        let before = db
            .relation_stats()
            .into_iter()
            .find(|r| r.name == "last")
            .map(|r| r.counts)
            .unwrap_or_default();
        let scanned = db
            .read_transaction(|txn| Ok(txn.scan("last")?.count()))
            .unwrap();
        assert_eq!(scanned, 1);
        let stats = db.relation_stats();
        let last = stats.iter().find(|r| r.name == "last").unwrap_or_else(|| {
            let untracked = db.pool_stats().relations_untracked;
            panic!(
                "no row for last ({} rows, untracked {untracked:?})",
                stats.len()
            )
        });
        assert!(
            last.counts.accesses > before.accesses,
            "the scan of last is counted under its name: {last:?}"
        );
        // Every lookup is filed somewhere, exactly once.
        let pool = db.pool_stats();
        let named: u64 = stats.iter().map(|r| r.counts.accesses).sum();
        assert_eq!(
            named + pool.relations_untracked.accesses,
            pool.totals().accesses
        );
    })
}
