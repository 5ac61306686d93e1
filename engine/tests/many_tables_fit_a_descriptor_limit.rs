//! Open relation files are bounded like a server's: more tables (with an
//! index each) than the process has file descriptors all work, through
//! create, insert, lookup by key, scan, close and reopen, because the
//! storage keeps at most `max_open_files` relation files open (half the
//! descriptor limit by default; least recently used closed first, reopened
//! at the next touch). Before, the 507th table of 1,024 descriptors failed
//! with `EMFILE` and the WAL refused every later write. (The `EMFILE` paths
//! themselves: `bufmgr/tests/open_file_cache.rs` for relation files,
//! `wal/tests/out_of_descriptors_is_retryable_not_fatal.rs` for the WAL.)
//!
//! Each case runs in a child process (the re-exec trick) that lowers its own
//! descriptor limit first, so the rest of the test binary is unaffected. The
//! default count is quick; `MANY_TABLES=5000` runs the full figure under
//! the common limit of 1,024.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Value};

const CHILD_DIR: &str = "ENGINE_TEST_MANY_TABLES_DIR";
const CHILD_TABLES: &str = "ENGINE_TEST_MANY_TABLES_COUNT";
const CHILD_LIMIT: &str = "ENGINE_TEST_MANY_TABLES_NOFILE";

/// The default run: 200 tables (a heap and an index file each: 400
/// relation files) under a 256-descriptor limit, a few seconds.
/// `MANY_TABLES=n` runs `n` tables under the common 1,024 limit instead
/// (5,000 is the figure in the engine README).
const DEFAULT_TABLES: usize = 200;
const DEFAULT_NOFILE: u64 = 256;

fn run_child(test: &str, dir: &std::path::Path, tables: usize, nofile: u64) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--ignored", "--nocapture"])
        .env(CHILD_DIR, dir)
        .env(CHILD_TABLES, tables.to_string())
        .env(CHILD_LIMIT, nofile.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child {test} failed: {stdout}\n{stderr}"
    );
    stdout
}

/// Lower this process's soft `RLIMIT_NOFILE` to `n`.
fn limit_descriptors(n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n as libc::rlim_t,
        rlim_max: n as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

fn child_env() -> Option<(std::path::PathBuf, usize, u64)> {
    let dir = std::env::var_os(CHILD_DIR)?;
    let tables = std::env::var(CHILD_TABLES).unwrap().parse().unwrap();
    let nofile = std::env::var(CHILD_LIMIT).unwrap().parse().unwrap();
    Some((dir.into(), tables, nofile))
}

fn table_name(i: usize) -> String {
    format!("t{i}")
}

/// Every table has its one row (by key through its index, and by scan).
fn check_all(db: &Database, tables: usize) {
    let txn = db.begin().unwrap();
    for i in 0..tables {
        let t = table_name(i);
        let (_, r) = txn
            .get_by_key(&t, "id", &Value::I64(i as i64))
            .unwrap()
            .unwrap_or_else(|| panic!("table {t}: row {i} not found by key"));
        assert_eq!(r, row(i as i64, &t), "table {t}");
        let rows: Vec<_> = txn.scan(&t).unwrap().map(|r| r.unwrap().1).collect();
        assert_eq!(rows, vec![row(i as i64, &t)], "table {t}: scan");
    }
    txn.commit().unwrap();
}

#[test]
fn many_tables_with_an_index_each_work_under_a_descriptor_limit() {
    let (tables, nofile) = match std::env::var("MANY_TABLES") {
        Ok(v) => (v.parse().expect("MANY_TABLES is a count"), 1024),
        Err(_) => (DEFAULT_TABLES, DEFAULT_NOFILE),
    };
    assert!(
        2 * tables as u64 > nofile,
        "the files must not fit the limit"
    );
    let limit = Duration::from_secs(60 + tables as u64 / 10);
    watchdog(limit, move || {
        let dir = tempfile::tempdir().unwrap();
        let out = run_child("child_many_tables", dir.path(), tables, nofile);
        assert!(out.contains(&format!("CHILD: {tables} tables ok")), "{out}");
        let line = out.lines().find(|l| l.starts_with("CHILD:")).unwrap();
        eprintln!("{line} under RLIMIT_NOFILE {nofile}");
    });
}

/// Run by the test above in a child process.
#[test]
#[ignore = "run as a child process by many_tables_with_an_index_each_work_under_a_descriptor_limit"]
fn child_many_tables() {
    let Some((dir, tables, nofile)) = child_env() else {
        return;
    };
    limit_descriptors(nofile);
    let opts = || small_options().pool_buffers(256);
    let started = Instant::now();
    let db = Database::open(&dir, opts()).unwrap();
    for i in 0..tables {
        let t = table_name(i);
        db.create_table(&t, two_columns())
            .unwrap_or_else(|e| panic!("create table {t}: {e}"));
        db.create_index(&format!("{t}_id"), &t, "id", true)
            .unwrap_or_else(|e| panic!("create index on {t}: {e}"));
    }
    let created = started.elapsed();
    // One row in every table, a hundred tables per transaction.
    for chunk in (0..tables).collect::<Vec<_>>().chunks(100) {
        let txn = db.begin().unwrap();
        for &i in chunk {
            let t = table_name(i);
            txn.insert(&t, row(i as i64, &t))
                .unwrap_or_else(|e| panic!("insert into {t}: {e}"));
        }
        txn.commit().unwrap();
    }
    check_all(&db, tables);
    db.close().unwrap();
    let db = Database::open(&dir, opts()).unwrap();
    check_all(&db, tables);
    db.close().unwrap();
    println!(
        "CHILD: {tables} tables ok (created in {created:.1?}, all in {:.1?})",
        started.elapsed()
    );
}
