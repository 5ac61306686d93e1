//! The data directory: one opener at a time (also across processes), a
//! directory that is not ours is refused, a damaged control file or version
//! stamp is an error naming the file, and the checksum setting is fixed at
//! creation. Never a panic.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Database, EngineError};

const CHILD_DIR: &str = "ENGINE_TEST_LOCK_CHILD_DIR";

#[test]
fn a_second_open_is_refused_until_the_first_closes() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let e = Database::open(dir.path(), small_options()).unwrap_err();
        assert!(matches!(e, EngineError::DatabaseInUse { .. }), "{e}");
        assert!(
            e.to_string().contains("in use") && e.to_string().contains("LOCK"),
            "{e}"
        );

        // Another process is refused too.
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_tries_to_open", "--ignored", "--nocapture"])
            .env(CHILD_DIR, dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed: {stdout}");
        assert!(stdout.contains("CHILD: in use"), "child output: {stdout}");

        db.close().unwrap();
        Database::open(dir.path(), small_options())
            .unwrap()
            .close()
            .unwrap();
    });
}

/// A child process forked while the database is open (by another thread
/// starting a program: between its fork and its exec it holds a copy of
/// every descriptor); killed and reaped when dropped.
struct ForkedChild(libc::pid_t);

impl ForkedChild {
    fn start() -> ForkedChild {
        // SAFETY: the child calls only async-signal-safe functions (pause)
        // until it is killed; the parent only reads the returned pid.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            loop {
                // SAFETY: pause is async-signal-safe and touches no memory.
                unsafe { libc::pause() };
            }
        }
        ForkedChild(pid)
    }
}

impl Drop for ForkedChild {
    fn drop(&mut self) {
        // SAFETY: signals and reaps the child this value started, by its
        // pid; `status` is a local the kernel writes.
        unsafe {
            libc::kill(self.0, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.0, &mut status, 0);
        }
    }
}

/// Before: the lock belonged to the open file description, which a child
/// forked meanwhile still shared, so an open right after `close` (or the
/// drop of the last handle) failed with "LOCK is locked by another open
/// Database" until the child exec'ed or exited
/// (`killed_bulk_load_stays_invisible` failed so once under load, its
/// SIGKILL case starting children while the power-loss case reopened).
#[test]
fn a_child_forked_while_open_does_not_keep_the_directory_locked_after_close() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        for close in [true, false] {
            let db = Database::open(dir.path(), small_options()).unwrap();
            let child = ForkedChild::start();
            if close {
                db.close().unwrap();
            } else {
                drop(db);
            }
            let reopened = Database::open(dir.path(), small_options());
            drop(child);
            let db = reopened.unwrap_or_else(|e| {
                panic!("reopen after {}: {e}", if close { "close" } else { "drop" })
            });
            db.close().unwrap();
        }
    });
}

/// Run by the test above in a child process.
#[test]
#[ignore = "run as a child process by a_second_open_is_refused_until_the_first_closes"]
fn child_tries_to_open() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    match Database::open(&dir, small_options()) {
        Err(EngineError::DatabaseInUse { .. }) => println!("CHILD: in use"),
        Err(e) => println!("CHILD: other error {e}"),
        Ok(_) => println!("CHILD: opened!"),
    }
}

#[test]
fn a_directory_of_random_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..5u8 {
        let bytes: Vec<u8> = (0..1000u32)
            .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i))
            .collect();
        std::fs::write(dir.path().join(format!("file{i}")), bytes).unwrap();
    }
    let e = Database::open(dir.path(), small_options()).unwrap_err();
    assert!(matches!(e, EngineError::NotADatabase { .. }), "{e}");
    assert!(
        e.to_string().contains("file0") && e.to_string().contains("VERSION"),
        "{e}"
    );
    assert!(
        !dir.path().join("VERSION").exists(),
        "nothing written into it"
    );

    // A VERSION file that is not ours, and one from another format version.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("VERSION"), [0xff, 0x00, 0x13, 0x37]).unwrap();
    let e = Database::open(dir.path(), small_options()).unwrap_err();
    assert!(matches!(e, EngineError::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("VERSION"), "{e}");
    std::fs::write(
        dir.path().join("VERSION"),
        "pgbuf-engine data directory\nformat 99\nchecksums on\n",
    )
    .unwrap();
    let e = Database::open(dir.path(), small_options()).unwrap_err();
    assert!(matches!(e, EngineError::IncompatibleVersion { .. }), "{e}");
    assert!(
        e.to_string().contains("99") && e.to_string().contains("VERSION"),
        "{e}"
    );
}

#[test]
fn a_truncated_control_file_is_an_error_naming_it() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", common::two_columns()).unwrap();
        db.close().unwrap();
        let control = dir.path().join("control");
        let bytes = std::fs::read(&control).unwrap();
        std::fs::write(&control, &bytes[..bytes.len() / 2]).unwrap();
        let e = Database::open(dir.path(), small_options()).unwrap_err();
        assert_eq!(e.kind(), engine::ErrorKind::CorruptData, "{e}");
        assert!(
            e.to_string().contains(&control.display().to_string()),
            "{e}"
        );
    });
}

#[test]
fn the_checksum_setting_is_fixed_at_creation() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        Database::open(dir.path(), small_options().checksums(false))
            .unwrap()
            .close()
            .unwrap();
        let e = Database::open(dir.path(), small_options()).unwrap_err();
        assert!(
            matches!(e, EngineError::ChecksumSettingMismatch { .. }),
            "{e}"
        );
        assert!(e.to_string().contains("checksums off"), "{e}");
        Database::open(dir.path(), small_options().checksums(false))
            .unwrap()
            .close()
            .unwrap();
    });
}
