//! Temporary databases: [`Database::open_temporary`].
//!
//! The database lives in a new directory under the system's temporary
//! directory (`$TMPDIR`, else `/tmp`), named `engine-tmp-` and six random characters. The
//! directory belongs to the handles' shared state, so it is removed when
//! the last handle goes, whichever it is and however it goes: the last
//! clone, transaction or iterator dropped (also while a thread unwinds from
//! a panic), or [`Database::close`] on the last handle. The database shuts
//! down first, then its directory is removed. A process that ends without
//! running destructors (SIGKILL, `std::process::exit`, an abort) leaves the
//! directory behind, as any temporary file: an ordinary data directory
//! that opens with `Database::open` (test
//! `a_killed_process_leaves_its_temporary_database_behind`).

use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::options::Options;

impl Database {
    /// Open a new, empty database in a fresh temporary directory that is
    /// removed when the last handle to it is dropped or closed.
    /// [`dir`](Database::dir) names it.
    ///
    /// The directory is `engine-tmp-` and six random characters, under the system's temporary
    /// directory (`$TMPDIR`, else `/tmp`). Every handle counts: clones,
    /// transactions and row iterators keep it, and it goes with the last of
    /// them however that goes (dropped, dropped while its thread unwinds
    /// from a panic, or [`close`](Database::close)d); the database shuts
    /// down first.
    ///
    /// **A process that ends without running destructors** (killed with
    /// SIGKILL, `std::process::exit`, an abort) leaves the directory behind,
    /// as any temporary file. It is an ordinary data directory: opened with
    /// [`Database::open`] it recovers every commit (and is then not
    /// temporary); otherwise remove it by hand.
    pub fn open_temporary(options: Options) -> Result<Database> {
        // Bad options make no directory.
        options.validate()?;
        let base = std::env::temp_dir();
        let tmp = tempfile::Builder::new()
            .prefix("engine-tmp-")
            .tempdir_in(&base)
            .map_err(EngineError::io("create a temporary directory in", &base))?;
        // A failed open drops `tmp`, which removes the directory.
        let mut db = Database::open(tmp.path(), options)?;
        let path = tmp.path().to_path_buf();
        match db.shared_mut() {
            Some(shared) => {
                shared.temp_dir = Some(tmp);
                Ok(db)
            }
            // Only reachable if `open` handed out a second handle.
            None => Err(EngineError::StillInUse {
                path,
                others: db.handle_count() - 1,
            }),
        }
    }

    /// Whether this database was opened with
    /// [`open_temporary`](Database::open_temporary) (its directory goes with
    /// its last handle).
    pub fn is_temporary(&self) -> bool {
        self.shared().temp_dir.is_some()
    }
}
