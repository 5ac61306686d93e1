//! The data directory: its version stamp and its lock.
//!
//! ```text
//!   <dir>/VERSION    "pgbuf-engine data directory\nformat 2\nchecksums on\n"
//!   <dir>/LOCK       empty; flock(LOCK_EX | LOCK_NB) held while a Database is open
//!   <dir>/CLEAN_SHUTDOWN  present only between a clean close and the next open
//!   <dir>/control    the WAL's control file (last checkpoint), wal crate
//!   <dir>/wal/       WAL segments, wal crate
//!   <dir>/base/      one file per relation fork (`1` clog, `2` catalog, `1000`.. tables)
//! ```
//!
//! 1. The lock is taken first, before anything is read or written, so two
//!    openers never both see a fresh directory. `flock` locks belong to the
//!    open file description: a second `open` of the same file, in this
//!    process or another, is refused; the kernel drops the lock when the file
//!    is closed or the process dies (so a crash never leaves a stale lock).
//! 2. A directory holding nothing but `LOCK` is new: `VERSION` is written
//!    (to `VERSION.tmp`, fsync, rename, fsync the directory) before anything
//!    else, so a directory with any other file and no `VERSION` is not ours.
//! 3. `VERSION` records the checksum setting; opening with the other setting
//!    is an error (pages written without checksums would all fail a check,
//!    and pages with them would be trusted without one).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};

/// First line of `VERSION`.
pub const VERSION_MAGIC: &str = "pgbuf-engine data directory";
/// The on-disk format this engine reads and writes. 2: heap tuple headers
/// carry command ids (cmin, cmax), 32 bytes instead of 26, and WAL record
/// headers carry the log's durable LSN at insert (35 bytes instead of 27).
pub const FORMAT_VERSION: u32 = 2;
/// File names inside the data directory.
pub const VERSION_FILE: &str = "VERSION";
pub const LOCK_FILE: &str = "LOCK";
/// Written (and fsynced) by a clean close after its shutdown checkpoint;
/// removed (durably) by the next open. Its absence at open means the last
/// run crashed (or was never closed): unlogged tables are then emptied.
pub const CLEAN_FILE: &str = "CLEAN_SHUTDOWN";
/// `VERSION` is tiny; a larger file is not ours (and is not read whole).
const MAX_VERSION_LEN: u64 = 4096;

/// An exclusive `flock` on `<dir>/LOCK`, released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    path: PathBuf,
}

impl DirLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Create `dir` if needed and take its lock.
pub fn lock(dir: &Path) -> Result<DirLock> {
    fs::create_dir_all(dir).map_err(EngineError::io("create the data directory", dir))?;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(EngineError::io("open the lock file", &path))?;
    // SAFETY: flock on a file descriptor we own and keep open; no memory is
    // passed to the kernel.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(EngineError::DatabaseInUse { path });
        }
        return Err(EngineError::Io {
            op: "lock",
            path,
            source: err,
        });
    }
    Ok(DirLock { _file: file, path })
}

/// What `VERSION` records.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Stamp {
    pub checksums: bool,
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Check (or, for a new directory, write) the version stamp. Returns whether
/// the directory was new.
pub fn check_or_stamp(dir: &Path, checksums: bool) -> Result<bool> {
    let path = dir.join(VERSION_FILE);
    if path.exists() {
        let stamp = read_stamp(&path)?;
        if stamp.checksums != checksums {
            return Err(EngineError::ChecksumSettingMismatch {
                path,
                recorded: on_off(stamp.checksums),
                requested: on_off(checksums),
            });
        }
        return Ok(false);
    }
    let mut others = Vec::new();
    for e in fs::read_dir(dir).map_err(EngineError::io("list", dir))? {
        let e = e.map_err(EngineError::io("list", dir))?;
        let name = e.file_name();
        if name != LOCK_FILE && name != "VERSION.tmp" {
            others.push(name.to_string_lossy().into_owned());
        }
    }
    if !others.is_empty() {
        others.sort();
        return Err(EngineError::NotADatabase {
            path: dir.to_path_buf(),
            detail: format!(
                "it holds files ({}) but no {VERSION_FILE} file; open an empty or new directory",
                others
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    write_stamp(dir, Stamp { checksums })?;
    Ok(true)
}

fn write_stamp(dir: &Path, stamp: Stamp) -> Result<()> {
    let tmp = dir.join("VERSION.tmp");
    let path = dir.join(VERSION_FILE);
    let text = format!(
        "{VERSION_MAGIC}\nformat {FORMAT_VERSION}\nchecksums {}\n",
        on_off(stamp.checksums)
    );
    let mut f = File::create(&tmp).map_err(EngineError::io("create", &tmp))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(EngineError::io("write", &tmp))?;
    fs::rename(&tmp, &path).map_err(EngineError::io("rename into place", &path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(EngineError::io("fsync", dir))?;
    Ok(())
}

/// Read and check `VERSION`.
pub fn read_stamp(path: &Path) -> Result<Stamp> {
    let not_ours = |detail: String| EngineError::NotADatabase {
        path: path.to_path_buf(),
        detail,
    };
    let len = fs::metadata(path)
        .map_err(EngineError::io("stat", path))?
        .len();
    if len > MAX_VERSION_LEN {
        return Err(not_ours(format!(
            "{len} bytes, a version stamp is a few lines"
        )));
    }
    let bytes = fs::read(path).map_err(EngineError::io("read", path))?;
    parse_stamp(&bytes, path)
}

/// Check the bytes of `VERSION` (read from `path`, named in errors).
pub fn parse_stamp(bytes: &[u8], path: &Path) -> Result<Stamp> {
    let not_ours = |detail: String| EngineError::NotADatabase {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| not_ours("not text".into()))?;
    let mut lines = text.lines();
    if lines.next() != Some(VERSION_MAGIC) {
        return Err(not_ours(format!("the first line is not {VERSION_MAGIC:?}")));
    }
    let format = lines
        .next()
        .and_then(|l| l.strip_prefix("format "))
        .ok_or_else(|| EngineError::CorruptDataDir {
            path: path.to_path_buf(),
            detail: "no \"format N\" line".into(),
        })?;
    if format.parse::<u32>() != Ok(FORMAT_VERSION) {
        return Err(EngineError::IncompatibleVersion {
            path: path.to_path_buf(),
            found: format.to_string(),
            expected: FORMAT_VERSION,
        });
    }
    let checksums = match lines.next().and_then(|l| l.strip_prefix("checksums ")) {
        Some("on") => true,
        Some("off") => false,
        other => {
            return Err(EngineError::CorruptDataDir {
                path: path.to_path_buf(),
                detail: format!("bad checksums line {other:?}"),
            });
        }
    };
    Ok(Stamp { checksums })
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(EngineError::io("fsync", dir))
}

/// At open: was the last shutdown clean? Removes the marker durably, so a
/// crash of this run is never mistaken for a clean one.
pub fn take_clean_marker(dir: &Path) -> Result<bool> {
    let path = dir.join(CLEAN_FILE);
    match fs::remove_file(&path) {
        Ok(()) => {
            sync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(EngineError::io("remove", path)(e)),
    }
}

/// At a clean close, after the shutdown checkpoint: write the marker.
pub fn write_clean_marker(dir: &Path) -> Result<()> {
    let path = dir.join(CLEAN_FILE);
    File::create(&path)
        .and_then(|f| f.sync_all())
        .map_err(EngineError::io("create", &path))?;
    sync_dir(dir)
}
