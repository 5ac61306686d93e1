//! SIGKILL at points spread over a bulk load's index builds (from its last
//! row on, before and after its commit) and over a `create_index` of loaded
//! rows: after reopening, the table is empty or whole, every committed row
//! is found through every index, the indexes verify, and no page is
//! corrupt.

mod common;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{assert_empty_or_whole, id_k_name_columns, id_k_name_row, small_options, watchdog};
use engine::{Database, Row};

const CHILD_DIR: &str = "ENGINE_TEST_KILLED_BUILD_DIR";
const CHILD_DELAY: &str = "ENGINE_TEST_KILLED_BUILD_DELAY_US";
const ROWS: i64 = 20_000;

fn row(i: i64) -> Row {
    id_k_name_row(i, ROWS, 40)
}

fn sigkill_self_after(delay: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        // SAFETY: kill(2) on our own pid with a valid signal number.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    });
}

/// The child: load (with three indexes), then build a fourth; SIGKILL
/// itself the given delay after the load's last row.
#[test]
#[ignore = "run as a child process by a_bulk_load_killed_during_its_index_builds_is_empty_or_whole"]
fn killed_build_child() {
    let dir = std::env::var(CHILD_DIR).expect("child dir");
    let delay: u64 = std::env::var(CHILD_DELAY).unwrap().parse().unwrap();
    let db = Database::open(&dir, small_options().pool_buffers(32)).unwrap();
    db.create_table("t", id_k_name_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    db.create_index("t_k", "t", "k", false).unwrap();
    db.create_index("t_name", "t", "name", false).unwrap();
    db.bulk_load("t", (0..ROWS).map(row), |p| {
        if p.rows == ROWS as u64 && !p.done {
            sigkill_self_after(Duration::from_micros(delay));
        }
    })
    .unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "LOADED").unwrap();
    out.flush().unwrap();
    db.create_index("t_k2", "t", "k", false).unwrap();
    writeln!(out, "INDEXED").unwrap();
    out.flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_bulk_load_killed_during_its_index_builds_is_empty_or_whole() {
    watchdog(Duration::from_secs(240), || {
        for delay_us in [
            0u64, 10_000, 30_000, 60_000, 100_000, 130_000, 160_000, 250_000,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "killed_build_child", "--ignored", "--nocapture"])
                .env(CHILD_DIR, dir.path())
                .env(CHILD_DELAY, delay_us.to_string())
                .stderr(Stdio::null())
                .output()
                .unwrap();
            let case = format!("killed {delay_us}us after the last row");
            assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{case}");
            let said = String::from_utf8_lossy(&out.stdout).to_string();
            let db = Database::open(dir.path(), small_options().pool_buffers(32))
                .unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
            let mut ixs = vec!["t_k", "t_name"];
            if db.index_handle("t_k2").is_ok() {
                ixs.push("t_k2");
            } else {
                assert!(!said.contains("INDEXED"), "{case}: the index was made");
            }
            let n = assert_empty_or_whole(&db, &case, ROWS, &ixs);
            if said.contains("LOADED") {
                assert_eq!(n, ROWS as usize, "{case}: the load returned");
            }
            db.close().unwrap();
        }
    });
}
