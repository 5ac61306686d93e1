//! What `Database::open_temporary` documents for a process killed with
//! SIGKILL: no destructor runs, so the directory stays behind (as any
//! temporary file would); it is an ordinary data directory that opens,
//! recovers every commit, and can be removed by hand.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{row, small_options, two_columns, watchdog};
use engine::Database;

const ROWS: i64 = 25;

/// The child: opens a temporary database (under the `TMPDIR` the parent
/// gave it), prints its directory, commits `ROWS` rows, prints `READY`,
/// and waits to be killed.
#[test]
#[ignore = "run as a child process by the test below"]
fn child_opens_a_temporary_database_and_waits() {
    if std::env::var_os("ENGINE_TEMP_KILL_CHILD").is_none() {
        return;
    }
    let db = Database::open_temporary(small_options()).unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "DIR {}", db.dir().display()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    for i in 0..ROWS {
        db.transaction(|t| t.insert("t", row(i, "x")).map(|_| ()))
            .unwrap();
    }
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_sigkilled_process_leaves_its_temporary_directory_which_opens_with_every_commit() {
    watchdog(Duration::from_secs(120), || {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_opens_a_temporary_database_and_waits",
                "--ignored",
                "--nocapture",
            ])
            .env("ENGINE_TEMP_KILL_CHILD", "1")
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let mut dir = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(d) = line.strip_prefix("DIR ") {
                dir = Some(std::path::PathBuf::from(d));
            }
            if line == "READY" {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(100),
                "child too slow"
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let dir = dir.expect("the child printed its directory");
        assert!(dir.starts_with(tmp.path()), "{}", dir.display());
        assert!(dir.join("VERSION").is_file(), "the directory stays behind");
        let db = Database::open(&dir, small_options()).unwrap();
        assert!(
            !db.is_temporary(),
            "reopened by path it is an ordinary database"
        );
        let n = db.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap();
        assert_eq!(n, ROWS as usize);
        drop(db);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
