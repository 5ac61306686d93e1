//! The data directory: its version stamp and its lock.
//!
//! ```text
//!   <dir>/VERSION    "pgbuf-engine data directory\nformat 2\nchecksums on\n"
//!   <dir>/LOCK       empty; flock(LOCK_EX | LOCK_NB) held while a Database is open
//!   <dir>/CLEAN_SHUTDOWN  present from a clean close until the next open succeeded
//!   <dir>/control    the WAL's control file (last checkpoint), wal crate
//!   <dir>/wal/       WAL segments, wal crate
//!   <dir>/base/      one file per relation fork (`1` clog, `2` catalog, `1000`.. tables)
//!   <dir>/RELSIZES   each logged relation's length in blocks (a lower bound)
//! ```
//!
//! 1. The lock is taken first, before anything is read or written, so two
//!    openers never both see a fresh directory. `flock` locks belong to the
//!    open file description: a second `open` of the same file, in this
//!    process or another, is refused; the kernel drops the lock when the file
//!    is closed or the process dies (so a crash never leaves a stale lock).
//!    Closing unlocks explicitly (`LOCK_UN`) first: a child process forked
//!    while the database was open shares the open file description until
//!    its exec, and would keep the lock past the close.
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
/// removed (durably) once the next open has succeeded. Its absence at open means the last
/// run crashed (or was never closed): unlogged tables are then emptied.
pub const CLEAN_FILE: &str = "CLEAN_SHUTDOWN";
/// `VERSION` is tiny; a larger file is not ours (and is not read whole).
const MAX_VERSION_LEN: u64 = 4096;

/// An exclusive `flock` on `<dir>/LOCK`, released when dropped.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
}

impl Drop for DirLock {
    /// Unlock explicitly before the descriptor closes. Closing it is not
    /// enough: the lock belongs to the open file description, and a child
    /// process forked meanwhile (any thread of the application starting a
    /// program holds a copy of every descriptor until its exec) keeps that
    /// description, and so the lock, alive after our close: an open right
    /// after `close` failed with `DatabaseInUse`. `LOCK_UN` releases the
    /// lock of the description for every copy.
    fn drop(&mut self) {
        // SAFETY: flock on the descriptor this value owns, still open here;
        // no memory is passed to the kernel. A failure leaves the lock to
        // the close that follows, as before.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
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
    Ok(DirLock { file, path })
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
    let mut f = bufmgr::with_spare_descriptor(|| File::create(&tmp))
        .map_err(EngineError::io("create", &tmp))?;
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
    bufmgr::with_spare_descriptor(|| File::open(dir))
        .and_then(|d| d.sync_all())
        .map_err(EngineError::io("fsync", dir))
}

/// At open: was the last shutdown clean? The marker stays until the open
/// has succeeded ([`remove_clean_marker`]), so an open that fails (a wrong
/// option, a damaged file) does not make the next one look like a crash
/// recovery and empty the unlogged tables.
pub fn clean_marker_present(dir: &Path) -> Result<bool> {
    let path = dir.join(CLEAN_FILE);
    path.try_exists().map_err(EngineError::io("stat", path))
}

/// At the end of a successful open: remove the marker durably, so a crash
/// of this run is never mistaken for a clean one.
pub fn remove_clean_marker(dir: &Path) -> Result<()> {
    let path = dir.join(CLEAN_FILE);
    match fs::remove_file(&path) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EngineError::io("remove", path)(e)),
    }
}

/// `RELSIZES`: what the data directory knows it holds.
pub const RELSIZES_FILE: &str = "RELSIZES";
/// A `RELSIZES` larger than this is not ours (and is not read whole).
const MAX_RELSIZES_LEN: u64 = 64 << 20;

/// What a relation recorded in `RELSIZES` is.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum RecordedKind {
    Clog,
    Catalog,
    Table,
    Index,
}

impl RecordedKind {
    pub fn word(self) -> &'static str {
        match self {
            RecordedKind::Clog => "clog",
            RecordedKind::Catalog => "catalog",
            RecordedKind::Table => "table",
            RecordedKind::Index => "index",
        }
    }
}

/// One line of `RELSIZES`: a logged relation and a length in blocks its
/// file had, durably, when the record was written (a lower bound: files
/// only grow until a DROP, which takes the line out first).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Recorded {
    pub rel: u32,
    pub blocks: u32,
    pub kind: RecordedKind,
    pub name: String,
}

/// `RELSIZES` rules:
/// 1. Written whole (tmp, fsync, rename, fsync the directory) at the end of
///    every successful open once there is a control file (a checkpoint was
///    taken: a new directory's first open takes one, so that the first
///    run's relations are checked after a crash in that run)
///    and after a clean close's checkpoint, from the
///    catalog and the files' lengths then (durable: after the checkpoint, or
///    unchanged since the clean close).
/// 2. A CREATE adds its relation after its commit; a DROP takes its
///    relations out before its commit (each appends a line, fsynced: `rel
///    blocks kind name` adds, `drop rel` takes out, so DDL costs one small
///    write whatever the number of relations). So a relation listed is in
///    the committed catalog, and a file whose relation is listed but which
///    the catalog does not know means the catalog lost it.
/// 3. At open, before recovery: a listed file that is missing, or shorter
///    than its length, is damage: the open fails naming the file (an index
///    opens marked invalid instead).
///
/// Missing `RELSIZES` (a directory written before it existed, or one whose
/// first open never finished) means nothing is known.
pub fn read_relsizes(dir: &Path) -> Result<Option<Vec<Recorded>>> {
    let path = dir.join(RELSIZES_FILE);
    let bad = |detail: String| EngineError::CorruptDataDir {
        path: path.clone(),
        detail,
    };
    let len = match fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EngineError::io("stat", &path)(e)),
    };
    if len > MAX_RELSIZES_LEN {
        return Err(bad(format!("{len} bytes, more than {MAX_RELSIZES_LEN}")));
    }
    let bytes = fs::read(&path).map_err(EngineError::io("read", &path))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8 text".into()))?;
    let mut out: Vec<Recorded> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(rel) = line.strip_prefix("drop ") {
            let rel = rel
                .parse::<u32>()
                .map_err(|_| bad(format!("line {}: bad relation {rel:?}", i + 1)))?;
            out.retain(|r| r.rel != rel);
            continue;
        }
        let mut f = line.splitn(4, ' ');
        let (Some(rel), Some(blocks), Some(kind), Some(name)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad(format!("line {}: expected 4 fields", i + 1)));
        };
        let num = |what: &str, v: &str| {
            v.parse::<u32>()
                .map_err(|_| bad(format!("line {}: bad {what} {v:?}", i + 1)))
        };
        let kind = match kind {
            "clog" => RecordedKind::Clog,
            "catalog" => RecordedKind::Catalog,
            "table" => RecordedKind::Table,
            "index" => RecordedKind::Index,
            k => return Err(bad(format!("line {}: bad kind {k:?}", i + 1))),
        };
        let r = Recorded {
            rel: num("relation", rel)?,
            blocks: num("length", blocks)?,
            kind,
            name: name.to_string(),
        };
        out.retain(|o| o.rel != r.rel);
        out.push(r);
    }
    Ok(Some(out))
}

fn relsizes_line(e: &Recorded) -> String {
    // Names are one line: any control character is escaped.
    let name: String = e.name.escape_debug().collect();
    format!("{} {} {} {name}\n", e.rel, e.blocks, e.kind.word())
}

/// Append `added` and the removal of `dropped` to `RELSIZES` (rule 2),
/// durably. Nothing if there is no `RELSIZES` yet (the first whole write
/// lists what the catalog holds then).
pub fn append_relsizes(dir: &Path, added: &[Recorded], dropped: &[u32]) -> Result<()> {
    let path = dir.join(RELSIZES_FILE);
    let mut text: String = added.iter().map(relsizes_line).collect();
    for rel in dropped {
        text.push_str(&format!("drop {rel}\n"));
    }
    let mut f = match bufmgr::with_spare_descriptor(|| OpenOptions::new().append(true).open(&path))
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(EngineError::io("open", &path)(e)),
    };
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(EngineError::io("append to", &path))
}

/// Replace `RELSIZES` with `entries` (rule 1), durably.
pub fn write_relsizes(dir: &Path, entries: &[Recorded]) -> Result<()> {
    let tmp = dir.join("RELSIZES.tmp");
    let path = dir.join(RELSIZES_FILE);
    let text: String = entries.iter().map(relsizes_line).collect();
    let mut f = bufmgr::with_spare_descriptor(|| File::create(&tmp))
        .map_err(EngineError::io("create", &tmp))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(EngineError::io("write", &tmp))?;
    fs::rename(&tmp, &path).map_err(EngineError::io("rename into place", &path))?;
    sync_dir(dir)
}

/// At a clean close, after the shutdown checkpoint: write the marker.
pub fn write_clean_marker(dir: &Path) -> Result<()> {
    let path = dir.join(CLEAN_FILE);
    bufmgr::with_spare_descriptor(|| File::create(&path))
        .and_then(|f| f.sync_all())
        .map_err(EngineError::io("create", &path))?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(rel: u32, blocks: u32, kind: RecordedKind, name: &str) -> Recorded {
        Recorded {
            rel,
            blocks,
            kind,
            name: name.to_string(),
        }
    }

    /// Whole writes, appended CREATEs and DROPs read back as the last state;
    /// names with spaces and newlines survive; bad lines are errors naming
    /// the file and the line.
    #[test]
    fn relsizes_round_trip_and_bad_lines_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_relsizes(dir.path()).unwrap(), None);
        let clog = rec(1, 3, RecordedKind::Clog, "clog");
        let t = rec(1000, 7, RecordedKind::Table, "a table\nwith a newline");
        let ix = rec(1001, 0, RecordedKind::Index, "t_id");
        // No file yet: an append records nothing.
        append_relsizes(dir.path(), std::slice::from_ref(&ix), &[]).unwrap();
        assert_eq!(read_relsizes(dir.path()).unwrap(), None);
        write_relsizes(dir.path(), &[clog.clone(), t.clone()]).unwrap();
        append_relsizes(dir.path(), std::slice::from_ref(&ix), &[]).unwrap();
        append_relsizes(dir.path(), &[], &[1000]).unwrap();
        let got = read_relsizes(dir.path()).unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], clog);
        assert_eq!(got[1], ix);
        // The escaped name reads back escaped (only messages show it).
        write_relsizes(dir.path(), std::slice::from_ref(&t)).unwrap();
        let got = read_relsizes(dir.path()).unwrap().unwrap();
        assert_eq!(got[0].name, "a table\\nwith a newline");
        for bad in ["1 x clog clog\n", "1 2 heap t\n", "drop x\n", "1 2\n"] {
            std::fs::write(dir.path().join(RELSIZES_FILE), bad).unwrap();
            let e = read_relsizes(dir.path()).unwrap_err();
            assert!(
                matches!(e, EngineError::CorruptDataDir { .. }) && e.to_string().contains("line 1"),
                "{bad:?}: {e}"
            );
        }
    }
}
