//! A commit-log page that cannot be read is an error on every path that asks
//! a transaction's status: scans (`scan_each`, `scan_until`, the iterator),
//! `get`, `get_by_key`, `index_lookup`, `index_range`, `update`, `delete`
//! and vacuum. None of them may answer with fewer rows (a committed row
//! whose inserter's status is unknown is not "invisible"). The error names
//! the xid and the commit-log page.
//!
//! The rows are written with hints off (`HintMode::Never`), so every read
//! asks the commit log; the clog's buffers are evicted and every read of
//! the clog relation fails while the fault is armed.

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bufmgr::RelFork;
use common::{FailClogReads, row, small_options, two_columns};
use engine::{CLOG_REL, Database, HintMode, Value};

const ROWS: i64 = 200;

struct Setup {
    _dir: tempfile::TempDir,
    db: Database,
    armed: Arc<AtomicBool>,
    /// The transaction that inserted every row.
    xid: u64,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let opts = small_options()
        .hint_mode(HintMode::Never)
        .checkpointer(false)
        .bgwriter(None)
        .wrap_storage(move |inner| {
            Arc::new(FailClogReads {
                inner,
                armed: a.clone(),
            })
        });
    let db = Database::open(dir.path(), opts).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let t = db.begin().unwrap();
    for id in 0..ROWS {
        t.insert("t", row(id, "x")).unwrap();
    }
    let xid = t.xid().unwrap();
    t.commit().unwrap();
    assert_eq!(db.read().unwrap().scan("t").unwrap().count() as i64, ROWS);
    Setup {
        _dir: dir,
        db,
        armed,
        xid,
    }
}

impl Setup {
    /// Evict the commit log's pages and fail every read of them from now on.
    fn arm(&self) {
        self.db
            .pool()
            .evict_relation(RelFork::main(CLOG_REL))
            .unwrap();
        self.armed.store(true, Ordering::SeqCst);
    }

    fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// `what` failed with an error naming the xid and clog page 0.
    fn assert_clog_error<T: std::fmt::Debug>(&self, what: &str, got: engine::Result<T>) {
        let e = match got {
            Ok(v) => panic!("{what}: Ok({v:?}) although the commit log cannot be read"),
            Err(e) => e,
        };
        let msg = format!("{e}");
        assert!(
            msg.contains(&format!("transaction {}", self.xid)),
            "{what}: the error names the xid: {msg}"
        );
        assert!(
            msg.contains("commit-log page 0"),
            "{what}: the error names the clog page: {msg}"
        );
        assert_eq!(e.kind(), engine::ErrorKind::Io, "{what}: {msg}");
    }
}

#[test]
fn every_read_path_fails_loudly_when_the_clog_cannot_be_read() {
    let s = setup();
    s.arm();
    let r = s.db.read().unwrap();
    let mut seen = 0;
    let each = r.scan_each("t", |_| {
        seen += 1;
        Ok(())
    });
    s.assert_clog_error("scan_each", each);
    assert_eq!(seen, 0, "no row handed out before the error");
    s.assert_clog_error(
        "scan_until",
        r.scan_until("t", engine::ScanOptions::default(), |_| Ok(true)),
    );
    let collected: engine::Result<Vec<_>> = r.scan("t").unwrap().collect();
    s.assert_clog_error("scan iterator", collected);
    s.assert_clog_error("get", r.get("t", heap::Tid::new(0, 1)));
    s.assert_clog_error("get_by_key", r.get_by_key("t", "id", &Value::I64(7)));
    s.assert_clog_error("index_lookup", r.index_lookup("t_id", &Value::I64(7)));
    let range: engine::Result<Vec<_>> = r
        .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect();
    s.assert_clog_error("index_range", range);
    drop(r);

    let w = s.db.begin().unwrap();
    s.assert_clog_error(
        "update",
        w.update("t", heap::Tid::new(0, 1), row(0, "changed")),
    );
    s.assert_clog_error("delete", w.delete("t", heap::Tid::new(0, 2)));
    s.assert_clog_error("vacuum", s.db.vacuum("t"));
    s.assert_clog_error("verify_indexes", s.db.verify_indexes("t"));

    // Once the clog reads again, everything is there and the writer works.
    s.disarm();
    w.update("t", heap::Tid::new(0, 1), row(0, "changed"))
        .unwrap();
    w.delete("t", heap::Tid::new(0, 2)).unwrap();
    w.commit().unwrap();
    let r = s.db.read().unwrap();
    assert_eq!(r.scan("t").unwrap().count() as i64, ROWS - 1);
    s.db.vacuum("t").unwrap();
}

/// An iterator that fails releases its pins at once: a DROP TABLE issued
/// while the failed iterator is still held completes (catalog entry, files
/// and buffers all gone), instead of failing half done on pinned buffers.
#[test]
fn a_failed_iterator_releases_its_pins_so_drop_table_completes() {
    let s = setup();
    s.db.create_table("big", two_columns()).unwrap();
    let t = s.db.begin().unwrap();
    for id in 0..3_000 {
        t.insert("big", row(id, "a row of a table several pages long"))
            .unwrap();
    }
    t.commit().unwrap();
    let rel = s.db.table("big").unwrap().rel;
    // Not cached: the scan reads ahead, pinning pages before it needs them.
    s.db.pool().flush_all(false).unwrap();
    s.db.pool().evict_relation(RelFork::main(rel)).unwrap();
    s.arm();
    let r = s.db.read().unwrap();
    let mut it = r.scan("big").unwrap();
    assert!(it.next().unwrap().is_err(), "the clog cannot be read");
    assert!(it.next().is_none(), "a failed iterator ends");
    s.disarm();
    s.db.drop_table("big").unwrap();
    let held: Vec<_> =
        s.db.pool()
            .buffercache()
            .into_iter()
            .filter(|b| b.tag.is_some_and(|t| t.relfork().rel == rel))
            .collect();
    assert!(held.is_empty(), "buffers of the dropped table: {held:?}");
    assert!(s.db.table("big").is_err(), "the catalog entry is gone");
    s.db.create_table("big", two_columns()).unwrap();
    drop(it);
}
