//! Segment files: the log's byte stream cut into fixed-size files.
//!
//! The log is one stream of bytes (see `lsn`); on disk it is cut into
//! segments of `segment_size` bytes each, a power of two. Segment `k` holds the
//! positions `k * segment_size .. (k + 1) * segment_size` and is named by its
//! first position as 16 upper-case hex digits:
//!
//! ```text
//!  <datadir>/wal/
//!    0000000000000000   LSN 0          .. 16 MiB
//!    0000000001000000   LSN 16 MiB     .. 32 MiB
//!    0000000002000000   LSN 32 MiB     .. 48 MiB    <- being written
//! ```
//!
//! A record is found by its LSN alone: byte `lsn` lives in the file named
//! `segment_start(lsn)` at offset `lsn - segment_start(lsn)`. A record may start
//! in one segment and end in the next; nothing in a file marks the cut.
//!
//! Invariants:
//! 1. A segment file under its real name is always `segment_size` bytes long
//!    and was zero-filled before its first record was written: it is created
//!    as `<name>.tmp`, filled with zeros, fdatasync'ed, renamed, and the
//!    directory fsync'ed (PostgreSQL's `XLogFileInit` does the same). So a
//!    crash never leaves a short segment, and unwritten space reads as zeros,
//!    which is how the reader recognises the end of the log.
//! 2. Segments are contiguous: segments are created in order at the end and
//!    removed in order from the front, so a missing segment between two
//!    present ones is damage, not a crash.
//! 3. A segment made ahead of the writes (the log's preallocation) is made
//!    as in 1 but renamed to `<name>.next`, not to its name: it becomes a
//!    segment only when a write reaches it and renames it into place (the
//!    directory synced before its first record). So the segments under
//!    their names are always exactly those the log has reached, whatever
//!    was made ahead; `*.next` files are removed at open and at close.
//!
//! Shortcuts: PostgreSQL renames old segments for reuse instead of removing
//! them, and puts a header on every 8 kB WAL page so that a reader can start at
//! any segment and tell a recycled segment's stale contents from new ones. We
//! remove old segments (so stale records never exist) and start reading only at
//! a known record (the log's origin, or a position given by the caller).

use std::path::{Path, PathBuf};

use crate::error::{Result, WalError};
use crate::fs::{FileSystem, FsFile};
use crate::lsn::Lsn;

/// PostgreSQL's default `wal_segment_size`: large enough that creating a file
/// is rare, small enough to remove old WAL in useful steps.
pub const DEFAULT_SEGMENT_SIZE: u64 = 16 << 20;
/// The smallest segment we allow: lets tests cross segment boundaries every few
/// records without making every record cross one.
pub const MIN_SEGMENT_SIZE: u64 = 64 << 10;
/// The largest segment (PostgreSQL's limit is also 1 GiB).
pub const MAX_SEGMENT_SIZE: u64 = 1 << 30;
/// Name of the WAL directory inside the data directory.
pub const WAL_DIR_NAME: &str = "wal";
/// Suffix of a segment made ahead of the writes (see invariant 3).
const MADE_AHEAD_SUFFIX: &str = ".next";
/// Suffix of a segment being created (see invariant 1).
const TEMP_SUFFIX: &str = ".tmp";
/// Zeros are written in pieces of this size when a segment is created.
const ZERO_FILL_CHUNK: usize = 1 << 20;

/// The WAL directory of a data directory.
pub fn wal_dir(datadir: &Path) -> PathBuf {
    datadir.join(WAL_DIR_NAME)
}

/// A validated segment size: a power of two within
/// [`MIN_SEGMENT_SIZE`]`..=`[`MAX_SEGMENT_SIZE`].
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct SegmentSize(u64);

impl SegmentSize {
    pub fn new(bytes: u64) -> Result<SegmentSize> {
        if !bytes.is_power_of_two() || !(MIN_SEGMENT_SIZE..=MAX_SEGMENT_SIZE).contains(&bytes) {
            return Err(WalError::InvalidConfig(format!(
                "segment size {bytes} must be a power of two from {MIN_SEGMENT_SIZE} to {MAX_SEGMENT_SIZE}"
            )));
        }
        Ok(SegmentSize(bytes))
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// First position of the segment holding `lsn`.
    pub fn segment_start(self, lsn: Lsn) -> Lsn {
        Lsn(lsn.0 & !(self.0 - 1))
    }

    /// Offset of `lsn` within its segment file.
    pub fn offset_in_segment(self, lsn: Lsn) -> u64 {
        lsn.0 & (self.0 - 1)
    }

    /// Bytes from `lsn` to the end of its segment (at least 1).
    pub fn room_after(self, lsn: Lsn) -> u64 {
        self.0 - self.offset_in_segment(lsn)
    }
}

/// The file name of the segment starting at `start`.
pub fn segment_file_name(start: Lsn) -> String {
    format!("{:016X}", start.0)
}

/// The start LSN named by a segment file name, if `name` is one.
pub fn parse_segment_file_name(name: &str) -> Option<Lsn> {
    if name.len() != 16 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(name, 16).ok().map(Lsn)
}

/// The path of the segment starting at `start`.
pub fn segment_path(wal_dir: &Path, start: Lsn) -> PathBuf {
    wal_dir.join(segment_file_name(start))
}

/// The segments in `wal_dir`, by start LSN, ascending. Files with other names
/// are ignored; a segment name that is not a multiple of the segment size is
/// an error (the directory belongs to a log with another segment size).
pub(crate) fn list_segments(
    fs: &dyn FileSystem,
    wal_dir: &Path,
    size: SegmentSize,
) -> Result<Vec<Lsn>> {
    let names = match fs.list_dir(wal_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(WalError::io("list", wal_dir, e)),
    };
    let mut starts = Vec::new();
    for name in names {
        let Some(start) = parse_segment_file_name(&name) else {
            continue;
        };
        if size.offset_in_segment(start) != 0 {
            return Err(WalError::CorruptSegment {
                file: wal_dir.join(&name),
                detail: format!(
                    "name is not a multiple of the segment size {}: the log was written with another segment size",
                    size.bytes()
                ),
            });
        }
        starts.push(start);
    }
    starts.sort();
    Ok(starts)
}

/// Remove `*.tmp` files left by a crash during segment creation, and
/// segments made ahead that no write took (`*.next`).
pub(crate) fn remove_leftover_files(fs: &dyn FileSystem, wal_dir: &Path) -> Result<()> {
    let names = fs
        .list_dir(wal_dir)
        .map_err(|e| WalError::io("list", wal_dir, e))?;
    for name in names {
        if name.ends_with(TEMP_SUFFIX) || name.ends_with(MADE_AHEAD_SUFFIX) {
            let path = wal_dir.join(&name);
            fs.remove_file(&path)
                .map_err(|e| WalError::io("remove", &path, e))?;
        }
    }
    Ok(())
}

/// Make a directory's entries (created, renamed, removed files) durable.
pub(crate) fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir)
        .map_err(|e| WalError::io("fsync directory", dir, e))
}

/// The temporary name of the segment starting at `start` while it is being
/// created (invariant 1).
pub(crate) fn temp_segment_path(wal_dir: &Path, start: Lsn) -> PathBuf {
    wal_dir.join(format!("{}{TEMP_SUFFIX}", segment_file_name(start)))
}

/// The name of the segment starting at `start` once it has been made ahead
/// of the writes (zero-filled and synced) and until a write takes it
/// (invariant 3).
pub(crate) fn made_ahead_path(wal_dir: &Path, start: Lsn) -> PathBuf {
    wal_dir.join(format!("{}{MADE_AHEAD_SUFFIX}", segment_file_name(start)))
}

/// Does `path` exist (through `fs`)?
fn exists(fs: &dyn FileSystem, path: &Path) -> Result<bool> {
    match fs.open(path, false, false) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(WalError::io("open", path, e)),
    }
}

/// Make the segment starting at `start` ahead of the writes (invariant 3):
/// zero-filled and synced under its temporary name, then renamed to its
/// made-ahead name. False if it exists already, as a segment or made ahead.
/// `stop` is asked between the pieces of the zero-fill: once it says yes,
/// the creation is abandoned with an error (the log is closing, and would
/// remove the file at once).
pub(crate) fn make_segment_ahead(
    fs: &dyn FileSystem,
    wal_dir: &Path,
    start: Lsn,
    size: SegmentSize,
    stop: &dyn Fn() -> bool,
) -> Result<bool> {
    let ahead = made_ahead_path(wal_dir, start);
    if exists(fs, &segment_path(wal_dir, start))? || exists(fs, &ahead)? {
        return Ok(false);
    }
    let tmp = temp_segment_path(wal_dir, start);
    zero_filled(fs, &tmp, size, stop)?;
    fs.rename(&tmp, &ahead)
        .map_err(|e| WalError::io("rename", &tmp, e))?;
    Ok(true)
}

/// Open the segment starting at `start` for writing if it exists under its
/// name (`None` if not), its directory synced first. A segment under its
/// name is not always durable under it: the call that renamed it into place
/// may have failed in the directory sync after the rename (and this is its
/// retry), or a process may have died between the two. Written and
/// fdatasync'ed without that sync, its records were acknowledged and then
/// lost with its name at a power loss.
pub(crate) fn open_segment(
    fs: &dyn FileSystem,
    wal_dir: &Path,
    start: Lsn,
) -> Result<Option<Box<dyn FsFile>>> {
    let path = segment_path(wal_dir, start);
    match fs.open(&path, false, false) {
        Ok(f) => {
            sync_dir(fs, wal_dir)?;
            Ok(Some(f))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WalError::io("open", &path, e)),
    }
}

/// Open the segment starting at `start` for writing, creating it zero-filled
/// (invariant 1) if it does not exist: by renaming the one made ahead of the
/// writes (invariant 3), or by making it here. Returns the file and whether
/// it was made here.
pub(crate) fn open_or_create_segment(
    fs: &dyn FileSystem,
    wal_dir: &Path,
    start: Lsn,
    size: SegmentSize,
) -> Result<(Box<dyn FsFile>, bool)> {
    if let Some(f) = open_segment(fs, wal_dir, start)? {
        return Ok((f, false));
    }
    let path = segment_path(wal_dir, start);
    let ahead = made_ahead_path(wal_dir, start);
    match fs.open(&ahead, false, false) {
        // Made ahead (whole: it is renamed to this name only once
        // zero-filled and synced; a file of another length is not ours
        // and is made again below).
        Ok(f) if f.len().ok() == Some(size.bytes()) => {
            fs.rename(&ahead, &path)
                .map_err(|e| WalError::io("rename into place", &ahead, e))?;
            sync_dir(fs, wal_dir)?;
            return Ok((f, false));
        }
        Ok(_) => fs
            .remove_file(&ahead)
            .map_err(|e| WalError::io("remove", &ahead, e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(WalError::io("open", &ahead, e)),
    }
    let tmp = temp_segment_path(wal_dir, start);
    let f = zero_filled(fs, &tmp, size, &|| false)?;
    fs.rename(&tmp, &path)
        .map_err(|e| WalError::io("rename into place", &tmp, e))?;
    sync_dir(fs, wal_dir)?;
    Ok((f, true))
}

/// Create `tmp` (truncating any old one), `size` bytes of zeros, synced;
/// an error if `stop` says so before a piece is written.
fn zero_filled(
    fs: &dyn FileSystem,
    tmp: &Path,
    size: SegmentSize,
    stop: &dyn Fn() -> bool,
) -> Result<Box<dyn FsFile>> {
    let f = fs
        .open(tmp, true, true)
        .map_err(|e| WalError::io("create", tmp, e))?;
    let zeros = vec![0u8; ZERO_FILL_CHUNK];
    let mut offset = 0u64;
    while offset < size.bytes() {
        if stop() {
            return Err(WalError::io(
                format!("zero-fill at offset {offset}"),
                tmp,
                std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "stopped: the log is closing",
                ),
            ));
        }
        let n = (size.bytes() - offset).min(ZERO_FILL_CHUNK as u64) as usize;
        f.write_all_at(&zeros[..n], offset)
            .map_err(|e| WalError::io(format!("zero-fill at offset {offset}"), tmp, e))?;
        offset += n as u64;
    }
    f.sync_data()
        .map_err(|e| WalError::io("fdatasync", tmp, e))?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;
    use std::fs;

    #[test]
    fn names_are_sixteen_hex_digits_of_the_start() {
        assert_eq!(segment_file_name(Lsn(0)), "0000000000000000");
        assert_eq!(segment_file_name(Lsn(0x1000000)), "0000000001000000");
        assert_eq!(
            parse_segment_file_name("00000000ABCD0000"),
            Some(Lsn(0xABCD0000))
        );
        assert_eq!(parse_segment_file_name("00000000ABCD000"), None);
        assert_eq!(parse_segment_file_name("00000000ABCD000G"), None);
        assert_eq!(parse_segment_file_name("0000000000000000.tmp"), None);
    }

    #[test]
    fn sizes_must_be_powers_of_two_in_range() {
        assert!(SegmentSize::new(MIN_SEGMENT_SIZE).is_ok());
        assert!(SegmentSize::new(DEFAULT_SEGMENT_SIZE).is_ok());
        assert!(SegmentSize::new(MIN_SEGMENT_SIZE / 2).is_err());
        assert!(SegmentSize::new(3 << 20).is_err());
        assert!(SegmentSize::new(MAX_SEGMENT_SIZE * 2).is_err());
    }

    #[test]
    fn positions_map_to_segment_and_offset() {
        let s = SegmentSize::new(1 << 16).unwrap();
        assert_eq!(s.segment_start(Lsn(0x1_2345)), Lsn(0x1_0000));
        assert_eq!(s.offset_in_segment(Lsn(0x1_2345)), 0x2345);
        assert_eq!(s.room_after(Lsn(0x1_FFFF)), 1);
        assert_eq!(s.room_after(Lsn(0x2_0000)), 1 << 16);
    }

    #[test]
    fn created_segment_is_full_size_zeros_and_listed() {
        let dir = tempfile::tempdir().unwrap();
        let size = SegmentSize::new(MIN_SEGMENT_SIZE).unwrap();
        let (_, created) =
            open_or_create_segment(&OsFileSystem, dir.path(), Lsn(MIN_SEGMENT_SIZE), size).unwrap();
        assert!(created);
        let (_, created) =
            open_or_create_segment(&OsFileSystem, dir.path(), Lsn(MIN_SEGMENT_SIZE), size).unwrap();
        assert!(!created);
        let bytes = fs::read(segment_path(dir.path(), Lsn(MIN_SEGMENT_SIZE))).unwrap();
        assert_eq!(bytes.len() as u64, MIN_SEGMENT_SIZE);
        assert!(bytes.iter().all(|b| *b == 0));
        fs::write(dir.path().join("README"), b"not a segment").unwrap();
        assert_eq!(
            list_segments(&OsFileSystem, dir.path(), size).unwrap(),
            vec![Lsn(MIN_SEGMENT_SIZE)]
        );
    }

    #[test]
    fn a_segment_made_ahead_is_taken_whole_and_one_of_another_length_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let size = SegmentSize::new(MIN_SEGMENT_SIZE).unwrap();
        let start = Lsn(MIN_SEGMENT_SIZE);
        assert!(make_segment_ahead(&OsFileSystem, dir.path(), start, size, &|| false).unwrap());
        // Not a segment until taken; made once.
        assert_eq!(list_segments(&OsFileSystem, dir.path(), size).unwrap(), []);
        assert!(!make_segment_ahead(&OsFileSystem, dir.path(), start, size, &|| false).unwrap());
        let (_, made_here) =
            open_or_create_segment(&OsFileSystem, dir.path(), start, size).unwrap();
        assert!(!made_here, "taken, not made again");
        assert!(!made_ahead_path(dir.path(), start).exists());
        assert_eq!(
            fs::read(segment_path(dir.path(), start)).unwrap(),
            vec![0u8; MIN_SEGMENT_SIZE as usize]
        );

        // A `.next` of another length (not made by us) is replaced.
        let next = Lsn(2 * MIN_SEGMENT_SIZE);
        fs::write(made_ahead_path(dir.path(), next), b"not a segment").unwrap();
        let (_, made_here) = open_or_create_segment(&OsFileSystem, dir.path(), next, size).unwrap();
        assert!(made_here);
        assert!(!made_ahead_path(dir.path(), next).exists());
        assert_eq!(
            fs::read(segment_path(dir.path(), next)).unwrap(),
            vec![0u8; MIN_SEGMENT_SIZE as usize]
        );
        // And `remove_leftover_files` takes what no write took.
        assert!(
            make_segment_ahead(
                &OsFileSystem,
                dir.path(),
                Lsn(3 * MIN_SEGMENT_SIZE),
                size,
                &|| false
            )
            .unwrap()
        );
        remove_leftover_files(&OsFileSystem, dir.path()).unwrap();
        assert!(!made_ahead_path(dir.path(), Lsn(3 * MIN_SEGMENT_SIZE)).exists());
    }

    #[test]
    fn misaligned_segment_name_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0000000000001000"), b"").unwrap();
        let size = SegmentSize::new(MIN_SEGMENT_SIZE).unwrap();
        let e = list_segments(&OsFileSystem, dir.path(), size).unwrap_err();
        assert!(e.to_string().contains("0000000000001000"), "{e}");
    }
}
