//! A process SIGKILLed in the middle of `Database::backup_to`: the partial
//! copy does not open as a database (never as an empty or shorter one),
//! the source recovers with every acknowledged commit, and a new backup of
//! it works (the partial directory is refused as a target: not empty).

mod common;

use std::io::Write;
use std::time::Duration;

use common::{committed_before_sigkill, row, small_options, two_columns, watchdog};
use engine::{Database, EngineError};

const DIR: &str = "ENGINE_KILLED_BACKUP_DIR";
const ROWS: i64 = 40;
/// Progress reports (negative "ids") the child prints before it is killed.
const REPORTS: usize = 3;

/// The child: commits `ROWS` rows one transaction each, printing each
/// after its commit, then backs up into `<dir>/copy`, printing a line at
/// each progress report and pausing there so the kill lands mid-backup.
#[test]
#[ignore = "run as a child process by the test below"]
fn child_commits_then_backs_up_slowly() {
    let Some(dir) = std::env::var_os(DIR) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let db = Database::open(dir.join("src"), small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let mut out = std::io::stdout();
    for i in 0..ROWS {
        db.transaction(|t| t.insert("t", row(i, "x")).map(|_| ()))
            .unwrap();
        writeln!(out, "COMMITTED {i}").unwrap();
        out.flush().unwrap();
    }
    let mut reports = 0i64;
    db.backup_to(dir.join("copy"), |_| {
        reports += 1;
        writeln!(out, "COMMITTED {}", -reports).unwrap();
        out.flush().unwrap();
        std::thread::sleep(Duration::from_millis(200));
    })
    .unwrap();
    // Not reached before the kill: linger so the parent kills mid-backup.
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn a_copy_cut_short_by_sigkill_does_not_open_and_the_source_recovers() {
    watchdog(Duration::from_secs(180), || {
        let dir = tempfile::tempdir().unwrap();
        let seen = committed_before_sigkill(
            "child_commits_then_backs_up_slowly",
            DIR,
            dir.path(),
            ROWS as usize + REPORTS,
            Duration::from_secs(120),
        );
        let progress = seen.iter().filter(|&&i| i < 0).count();
        assert!(progress >= REPORTS, "killed before the backup ({progress})");
        let copy = dir.path().join("copy");
        assert!(copy.is_dir(), "the backup had begun writing");
        match Database::open(&copy, small_options()) {
            Err(e) => assert!(matches!(e, EngineError::NotADatabase { .. }), "{e}"),
            Ok(_) => panic!("a copy cut short by a kill opened"),
        }
        let db = Database::open(dir.path().join("src"), small_options()).unwrap();
        let n = db.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap();
        assert_eq!(n, ROWS as usize);
        // The partial copy is no target; a new one works and holds it all.
        let e = db.backup_to(&copy, |_| {}).unwrap_err();
        assert!(matches!(e, EngineError::BackupTarget { .. }), "{e}");
        let again = dir.path().join("again");
        db.backup_to(&again, |_| {}).unwrap();
        drop(db);
        let c = Database::open(&again, small_options()).unwrap();
        let n = c.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap();
        assert_eq!(n, ROWS as usize);
        assert!(c.verify_indexes("t").unwrap().is_empty());
    });
}
