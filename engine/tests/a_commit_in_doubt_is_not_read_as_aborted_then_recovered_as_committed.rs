//! A commit that fails with "its outcome is in doubt" (here: `EMFILE` on the
//! WAL directory fsync at a segment switch, the descriptors held by the
//! relation-file cache) must not be decided two ways. Today the process
//! goes on treating the transaction as aborted (its 200 rows invisible,
//! later commits accepted), those later commits flush the WAL that holds
//! its commit record, and after a crash recovery replays that record: the
//! 200 rows appear. The transaction was invisible before the crash and
//! visible after it. PostgreSQL PANICs when a commit's WAL flush fails (the
//! crash recovery then decides once); the engine's own rule for a flushed
//! commit record is `CommitNotRecorded` and writes refused until reopen.
//! Expected: what the process shows after the failure is what recovery
//! finds (or later writes are refused until the reopen decides). The WAL
//! now closes cached relation files and retries an open that hits
//! `EMFILE`, so these commits are no longer in doubt: each is reported
//! committed and its rows are there before and after the crash.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::Database;

const CHILD_DIR: &str = "ENGINE_TEST_COMMIT_IN_DOUBT_DIR";
const TABLES: usize = 30;
const ROWS: usize = 200;

fn count(db: &Database, t: &str) -> usize {
    let mut n = 0;
    for r in db.read().unwrap().scan(t).unwrap() {
        r.unwrap();
        n += 1;
    }
    n
}

/// Tables of 200 rows each, one commit each, under a descriptor limit just
/// above the open count; after later commits, prints `TABLE <table>
/// <committed|doubt> <rows seen>` for each; then "crashes".
#[test]
#[ignore = "run as a child process by a_commit_in_doubt_reads_the_same_before_and_after_a_crash"]
fn commit_in_doubt_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let db = Database::open(&dir, small_options().pool_buffers(128)).unwrap();
    common::limit_descriptors(common::open_fds() + 12);
    let mut outcomes = vec![];
    for i in 0..TABLES {
        let t = format!("t{i}");
        db.create_table(&t, two_columns()).unwrap();
        db.create_index(&format!("{t}_id"), &t, "id", true).unwrap();
        let txn = db.begin().unwrap();
        for k in 0..ROWS as i64 {
            txn.insert(t.as_str(), row(k, &"z".repeat(100))).unwrap();
        }
        match txn.commit() {
            Ok(_) => outcomes.push((t, "committed")),
            Err(e) => {
                eprintln!("commit into {t}: {e}");
                outcomes.push((t, "doubt"));
            }
        }
    }
    common::limit_descriptors(4096);
    let mut later_ok = 0;
    // Later writes go to a table of their own (its creation is one of them).
    if db.create_table("later", two_columns()).is_ok() {
        later_ok += 1;
    }
    for i in 0..3 {
        let txn = db.begin().unwrap();
        if txn
            .insert("later", row(i, "later"))
            .and_then(|_| txn.commit())
            .is_ok()
        {
            later_ok += 1;
        }
    }
    for (t, outcome) in &outcomes {
        println!("TABLE {t} {outcome} {}", count(&db, t));
    }
    println!("LATER COMMITS {later_ok}");
    println!("CHILD DONE");
    std::mem::forget(db);
}

#[test]
fn a_commit_in_doubt_reads_the_same_before_and_after_a_crash() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "commit_in_doubt_child",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_DIR, dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("CHILD DONE"),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tables: Vec<(String, String, usize)> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("TABLE "))
            .map(|l| {
                let mut f = l.split(' ');
                let t = f.next().unwrap().to_string();
                let outcome = f.next().unwrap().to_string();
                (t, outcome, f.next().unwrap().parse().unwrap())
            })
            .collect();
        assert_eq!(tables.len(), TABLES, "{stdout}");
        // Refusing every later write until the reopen decides is also fine.
        let later_refused = stdout.contains("LATER COMMITS 0");
        let db = Database::open(dir.path(), small_options()).unwrap();
        let mut contradicted = vec![];
        for (t, outcome, before) in &tables {
            let after = count(&db, t);
            let wrong = match outcome.as_str() {
                "committed" => *before != ROWS || after != ROWS,
                _ => after != *before && !later_refused,
            };
            if wrong {
                contradicted.push(format!(
                    "{t} ({outcome}): {before} rows in the process after the commit, {after} after the crash"
                ));
            }
        }
        assert!(contradicted.is_empty(), "{contradicted:#?}");
        let in_doubt = tables.iter().filter(|(_, o, _)| o == "doubt").count();
        assert_eq!(in_doubt, 0, "commits in doubt: {stdout}");
    });
}
