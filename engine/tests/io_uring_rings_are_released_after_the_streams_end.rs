//! Io_uring resources bounded: a fixed, small set of
//! rings per storage, reused; 40 streams started and dropped leave the
//! descriptor count where it was. Before the fix, each concurrent stream that finds no
//! spare ring creates one and gives it back to an unbounded spare list, so
//! 10 rounds of 40 concurrent scans (20 tables of 2,000 rows, evicted,
//! 512-buffer pool) leave 4 to 9 more descriptors open than before the
//! first round (one ring each, as many as ever ran at once), for as long as
//! the database is open. Small, but bounded only by the peak concurrency.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, IoMode};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn forty_io_uring_scans_leave_the_descriptor_count_where_it_was() {
    if let Err(why) = bufmgr::io::probe_io_uring() {
        eprintln!("io_uring unavailable, skipped: {why}");
        return;
    }
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let opts = small_options().pool_buffers(512).io(IoMode::IoUring);
        let db = Database::open(dir.path(), opts).unwrap();
        let mut rels = vec![];
        for t in 0..20 {
            let name = format!("t{t}");
            rels.push(db.create_table(&name, two_columns()).unwrap().rel);
            db.bulk_load(&name, (0..2_000).map(|i| row(i, &"v".repeat(40))), |_| {})
                .unwrap();
        }
        db.checkpoint().unwrap();
        // Every relation file opened once (the file cache), then evicted.
        for t in 0..20 {
            db.read()
                .unwrap()
                .scan(format!("t{t}").as_str())
                .unwrap()
                .for_each(drop);
        }
        let mut growth = vec![];
        let first = open_fds();
        for _round in 0..10 {
            for rel in &rels {
                db.pool()
                    .evict_relation(bufmgr::RelFork::main(*rel))
                    .unwrap();
            }
            let before = open_fds();
            let threads: Vec<_> = (0..40)
                .map(|w| {
                    let db = db.clone();
                    std::thread::spawn(move || {
                        let r = db.read().unwrap();
                        let mut n = 0;
                        for x in r.scan(format!("t{}", w % 20).as_str()).unwrap() {
                            x.unwrap();
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            for h in threads {
                assert_eq!(h.join().unwrap(), 2_000);
            }
            growth.push(open_fds() as i64 - before as i64);
        }
        let total = open_fds() as i64 - first as i64;
        assert!(
            total <= 0,
            "{total} more descriptors open after 10 rounds of 40 scans than before (by round: {growth:?})"
        );
    });
}
