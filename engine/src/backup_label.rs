//! What the rest of the engine needs to know of backups, below `database`
//! so that opening and DDL can check it without importing the backup
//! itself (`backup` builds on `database`): the `BACKUP_LABEL` a copy
//! carries until its first open has recovered to the label's end LSN, and
//! the mark of a thread running a backup, which DDL, checkpoints and
//! backups check before they take the locks a backup holds.

use std::cell::Cell;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use wal::Lsn;

use crate::error::{EngineError, Result};

/// Name of the file that records where a backup's WAL must reach.
pub const BACKUP_LABEL_FILE: &str = "BACKUP_LABEL";

thread_local! {
    /// Whether this thread is running a backup (module docs: the progress
    /// callback runs on it with DDL and checkpoints held off).
    static BACKING_UP: Cell<bool> = const { Cell::new(false) };
}

/// The mark of a thread running a backup; dropping it (also on an error or
/// a panic in the callback) removes the mark.
pub(crate) struct Marked;

impl Marked {
    pub(crate) fn begin() -> Marked {
        BACKING_UP.with(|b| b.set(true));
        Marked
    }
}

impl Drop for Marked {
    fn drop(&mut self) {
        BACKING_UP.with(|b| b.set(false));
    }
}

/// `Err(BackupInProgress)` naming `operation` if this thread is running a
/// backup (called from its progress callback): DDL, checkpoints and backups
/// call this before they take the locks a backup holds.
pub(crate) fn refuse_inside(operation: impl FnOnce() -> String) -> Result<()> {
    if BACKING_UP.with(|b| b.get()) {
        return Err(EngineError::BackupInProgress {
            operation: operation(),
        });
    }
    Ok(())
}

/// At open, after recovery (rule 3 of the `backup` module's docs): a copy made by
/// [`Database::backup_to`] holds `BACKUP_LABEL`; its recovery must have
/// read the WAL to at least the end LSN it names, else the copy's WAL was
/// cut short and the state it recovered to may be older than pages it
/// holds: an error naming both LSNs. Returns whether there was a label
/// (removed with [`remove_label`] once the open has succeeded).
pub(crate) fn check_label(dir: &Path, recovered_to: Lsn) -> Result<bool> {
    let path = dir.join(BACKUP_LABEL_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(EngineError::io("read", &path)(e)),
    };
    let end = text
        .lines()
        .find_map(|l| l.strip_prefix("end "))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| EngineError::CorruptDataDir {
            path: path.clone(),
            detail: "no \"end <lsn>\" line".into(),
        })?;
    if recovered_to.0 < end {
        return Err(EngineError::CorruptDataDir {
            path: path.clone(),
            detail: format!(
                "this backup's WAL must reach {}, but recovery read it only to {recovered_to}: \
                 WAL segments of the backup are missing or damaged",
                Lsn(end)
            ),
        });
    }
    Ok(true)
}

/// Remove the backup label once the copy has opened (and recovered) once.
pub(crate) fn remove_label(dir: &Path) -> Result<()> {
    let path: PathBuf = dir.join(BACKUP_LABEL_FILE);
    fs::remove_file(&path).map_err(EngineError::io("remove", &path))?;
    sync_dir(dir)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(EngineError::io("fsync", dir))
}
