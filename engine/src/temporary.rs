//! Temporary databases: [`Database::open_temporary`].
//!
//! The database lives in a new directory under the system's temporary
//! directory (`$TMPDIR`, else `/tmp`), named `engine-tmp-XXXXXX`. The
//! directory belongs to the handles' shared state, so it is removed when
//! the last handle goes, whichever it is and however it goes: the last
//! clone, transaction or iterator dropped (also while a thread unwinds from
//! a panic), or [`Database::close`] on the last handle. The database shuts
//! down first, then its directory is removed. Nothing of it survives the
//! process: a process killed while the database is open leaves the
//! directory behind (as any temporary file).

use crate::database::Database;
use crate::error::{EngineError, Result};
use crate::options::Options;

impl Database {
    /// Open a new, empty database in a fresh temporary directory that is
    /// removed when the last handle to it is dropped or closed (module
    /// docs of `temporary`). [`dir`](Database::dir) names it.
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
