//! The engine on each storage backend (`io` = sync, io_uring, auto; with and
//! without O_DIRECT): insert, scan, close, reopen, scan again.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, IoMode, Options};

fn round_trip(options: Options) {
    let dir = tempfile::tempdir().unwrap();
    let ids = |db: &Database| {
        let t = db.begin().unwrap();
        let mut ids: Vec<i64> = t
            .scan("t")
            .unwrap()
            .map(|r| r.unwrap().1[0].as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    {
        let db = Database::open(dir.path(), options.clone()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..3000 {
            t.insert("t", row(i, "some text to fill pages")).unwrap();
        }
        t.commit().unwrap();
        assert_eq!(ids(&db), (0..3000).collect::<Vec<_>>());
        db.close().unwrap();
    }
    let db = Database::open(dir.path(), options).unwrap();
    assert_eq!(ids(&db), (0..3000).collect::<Vec<_>>());
    let t = db.begin().unwrap();
    t.insert("t", row(5000, "after reopen")).unwrap();
    t.commit().unwrap();
    assert_eq!(ids(&db).len(), 3001);
    db.close().unwrap();
}

fn io_uring_works() -> bool {
    match bufmgr::io::probe_io_uring() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("skipped: io_uring is not usable here: {why}");
            false
        }
    }
}

#[test]
fn sync_backend_round_trips() {
    watchdog(Duration::from_secs(120), || {
        round_trip(small_options().io(IoMode::Sync))
    });
}

#[test]
fn io_uring_backend_round_trips() {
    if !io_uring_works() {
        return;
    }
    watchdog(Duration::from_secs(120), || {
        round_trip(small_options().io(IoMode::IoUring))
    });
}

#[test]
fn auto_backend_round_trips_wherever_it_runs() {
    watchdog(Duration::from_secs(120), || {
        round_trip(small_options().io(IoMode::Auto))
    });
}

#[test]
fn direct_io_round_trips_on_both_backends() {
    let mut modes = vec![IoMode::Sync];
    if io_uring_works() {
        modes.push(IoMode::IoUring);
    }
    for io in modes {
        let probe = tempfile::tempdir().unwrap();
        if let Err(e) = bufmgr::FileStorage::open_with(probe.path(), true) {
            eprintln!("skipped: {e}");
            return;
        }
        watchdog(Duration::from_secs(120), move || {
            round_trip(small_options().io(io).direct_io(true))
        });
    }
}

#[test]
fn io_options_parse_and_are_validated() {
    let o = Options::new().set("io", "io_uring").unwrap();
    assert_eq!(o.io, IoMode::IoUring);
    let o = o.set("io", "auto").unwrap().set("direct_io", "on").unwrap();
    assert_eq!((o.io, o.direct_io), (IoMode::Auto, true));
    assert_eq!(Options::new().io, IoMode::Sync, "the default");
    match Options::new().set("io", "aio") {
        Err(EngineError::InvalidOption { option, detail }) => {
            assert_eq!(option, "io");
            assert!(detail.contains("aio"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(Options::new().set("direct_io", "maybe").is_err());
}
