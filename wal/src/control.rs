//! The control file, `<datadir>/control`: which checkpoint recovery starts
//! from (PostgreSQL's `pg_control`).
//!
//! # Layout (56 bytes, little-endian)
//!
//! ```text
//!   0  [u8; 4]  magic "WALC"
//!   4  u32      format version (CONTROL_VERSION)
//!   8  u64      checkpoint LSN: start of the last checkpoint record
//!  16  u64      redo LSN: where recovery starts reading
//!  24  u64      next transaction id (opaque to wal: the engine's counter)
//!  32  u64      segment size the log is written with
//!  40  u64      time of the checkpoint, seconds since the Unix epoch
//!  48  u32      reserved, 0
//!  52  u32      CRC32 of bytes 0..52
//! ```
//!
//! # Replacing it atomically
//!
//! 1. write the new contents to `control.tmp` and fsync it;
//! 2. rename `control.tmp` over `control` (atomic on POSIX file systems);
//! 3. fsync the data directory, so the rename itself is durable.
//!
//! A crash before step 2 leaves the old `control` untouched and a stray
//! `control.tmp`, which [`read_control`]'s callers ignore and the next write
//! (or [`Wal::open`](crate::Wal::open)) replaces. A crash after step 2 leaves
//! the new file, complete. The CRC catches what the file system still manages
//! to damage; a damaged control file is an error naming the file, never a
//! guess (PostgreSQL refuses to start too).
//!
//! Shortcut: PostgreSQL rewrites `pg_control` in place and relies on its
//! 512-byte sector write being atomic; we rename instead, which needs no such
//! assumption.

use std::io::ErrorKind as IoErrorKind;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Result, WalError};
use crate::fs::{FileSystem, OsFileSystem};
use crate::lsn::Lsn;
use crate::segment::sync_dir;

/// Name of the control file inside the data directory.
pub const CONTROL_FILE_NAME: &str = "control";
/// Name of the file a new control file is written to before it is renamed.
pub const CONTROL_TEMP_NAME: &str = "control.tmp";
/// The format version this crate writes and reads. It also stands for the
/// format of the log the control file describes: 2 since records carry
/// their durable LSN (a 35-byte header; version 1 logs had 27 bytes).
pub const CONTROL_VERSION: u32 = 2;
/// Bytes in the control file.
pub const CONTROL_FILE_LEN: usize = 56;
const MAGIC: [u8; 4] = *b"WALC";
const CRC_OFFSET: usize = 52;

/// What the control file says about the last checkpoint.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct ControlData {
    /// Start LSN of the last checkpoint record.
    pub checkpoint_lsn: Lsn,
    /// The checkpoint's redo point: recovery reads from here.
    pub redo_lsn: Lsn,
    /// The next transaction id when the checkpoint was taken (the engine's
    /// value, stored and returned unchanged).
    pub next_xid: u64,
    /// The segment size of the log; opening with another size is refused.
    pub segment_size: u64,
    /// When the checkpoint was written, seconds since the Unix epoch.
    pub time_secs: u64,
}

/// `<datadir>/control`.
pub fn control_path(datadir: &Path) -> PathBuf {
    datadir.join(CONTROL_FILE_NAME)
}

impl ControlData {
    /// Control data for a checkpoint taken now.
    pub fn now(checkpoint_lsn: Lsn, redo_lsn: Lsn, next_xid: u64, segment_size: u64) -> Self {
        let time_secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        ControlData {
            checkpoint_lsn,
            redo_lsn,
            next_xid,
            segment_size,
            time_secs,
        }
    }

    /// The file's bytes.
    pub fn encode(&self) -> [u8; CONTROL_FILE_LEN] {
        let mut b = [0u8; CONTROL_FILE_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&CONTROL_VERSION.to_le_bytes());
        b[8..16].copy_from_slice(&self.checkpoint_lsn.0.to_le_bytes());
        b[16..24].copy_from_slice(&self.redo_lsn.0.to_le_bytes());
        b[24..32].copy_from_slice(&self.next_xid.to_le_bytes());
        b[32..40].copy_from_slice(&self.segment_size.to_le_bytes());
        b[40..48].copy_from_slice(&self.time_secs.to_le_bytes());
        let crc = crc32fast::hash(&b[..CRC_OFFSET]);
        b[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parse and verify the file's bytes; `file` names it in errors.
    pub fn decode(bytes: &[u8], file: &Path) -> Result<ControlData> {
        let bad = |detail: String| WalError::CorruptControlFile {
            file: file.to_path_buf(),
            detail,
        };
        if bytes.len() != CONTROL_FILE_LEN {
            return Err(bad(format!(
                "{} bytes, expected {CONTROL_FILE_LEN}",
                bytes.len()
            )));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let stored = u32_at(CRC_OFFSET);
        let computed = crc32fast::hash(&bytes[..CRC_OFFSET]);
        if stored != computed {
            return Err(bad(format!(
                "CRC mismatch (stored {stored:08x}, computed {computed:08x})"
            )));
        }
        if bytes[0..4] != MAGIC {
            return Err(bad("not a control file (bad magic)".to_string()));
        }
        let version = u32_at(4);
        if version != CONTROL_VERSION {
            return Err(bad(format!(
                "format version {version}, this build reads version {CONTROL_VERSION}"
            )));
        }
        let data = ControlData {
            checkpoint_lsn: Lsn(u64_at(8)),
            redo_lsn: Lsn(u64_at(16)),
            next_xid: u64_at(24),
            segment_size: u64_at(32),
            time_secs: u64_at(40),
        };
        if data.redo_lsn > data.checkpoint_lsn {
            return Err(bad(format!(
                "redo point {} lies after the checkpoint record {}",
                data.redo_lsn, data.checkpoint_lsn
            )));
        }
        Ok(data)
    }
}

/// Read `<datadir>/control`. `Ok(None)` if there is none (a data directory
/// that has never completed a checkpoint); an error naming the file if it
/// exists but is damaged or of another version. A leftover `control.tmp`
/// is ignored.
pub fn read_control(datadir: &Path) -> Result<Option<ControlData>> {
    read_control_with(&OsFileSystem, datadir)
}

/// [`read_control`] through the file system `fs`.
pub fn read_control_with(fs: &dyn FileSystem, datadir: &Path) -> Result<Option<ControlData>> {
    let path = control_path(datadir);
    match fs.read(&path) {
        Ok(bytes) => ControlData::decode(&bytes, &path).map(Some),
        Err(e) if e.kind() == IoErrorKind::NotFound => Ok(None),
        Err(e) => Err(WalError::io("read", &path, e)),
    }
}

/// Replace `<datadir>/control` atomically with `data` (see the module docs).
pub fn write_control(datadir: &Path, data: &ControlData) -> Result<()> {
    write_control_with(&OsFileSystem, datadir, data)
}

/// [`write_control`] through the file system `fs`.
pub fn write_control_with(fs: &dyn FileSystem, datadir: &Path, data: &ControlData) -> Result<()> {
    let tmp = datadir.join(CONTROL_TEMP_NAME);
    let path = control_path(datadir);
    let f = fs
        .open(&tmp, true, true)
        .map_err(|e| WalError::io("create", &tmp, e))?;
    f.write_all_at(&data.encode(), 0)
        .map_err(|e| WalError::io("write", &tmp, e))?;
    f.sync_data().map_err(|e| WalError::io("fsync", &tmp, e))?;
    drop(f);
    fs.rename(&tmp, &path)
        .map_err(|e| WalError::io("rename into place", &tmp, e))?;
    sync_dir(fs, datadir)
}

/// Remove a `control.tmp` left by a crash during [`write_control`].
pub(crate) fn remove_stale_temp(fs: &dyn FileSystem, datadir: &Path) -> Result<()> {
    let tmp = datadir.join(CONTROL_TEMP_NAME);
    match fs.remove_file(&tmp) {
        Ok(()) => sync_dir(fs, datadir),
        Err(e) if e.kind() == IoErrorKind::NotFound => Ok(()),
        Err(e) => Err(WalError::io("remove", &tmp, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ControlData {
        ControlData::now(Lsn(0x2000), Lsn(0x1000), 77, 1 << 16)
    }

    #[test]
    fn round_trips() {
        let d = sample();
        assert_eq!(ControlData::decode(&d.encode(), Path::new("c")).unwrap(), d);
    }

    #[test]
    fn every_flipped_bit_is_rejected() {
        let bytes = sample().encode();
        for i in 0..bytes.len() * 8 {
            let mut b = bytes;
            b[i / 8] ^= 1 << (i % 8);
            let err = ControlData::decode(&b, Path::new("/x/control")).unwrap_err();
            assert!(err.to_string().contains("/x/control"), "{err}");
        }
    }

    #[test]
    fn wrong_length_and_version_are_rejected() {
        let b = sample().encode();
        assert!(ControlData::decode(&b[..40], Path::new("c")).is_err());
        let mut v = b;
        v[4..8].copy_from_slice(&(CONTROL_VERSION + 1).to_le_bytes());
        let crc = crc32fast::hash(&v[..CRC_OFFSET]);
        v[CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
        let err = ControlData::decode(&v, Path::new("c")).unwrap_err();
        let version = format!("version {}", CONTROL_VERSION + 1);
        assert!(err.to_string().contains(&version), "{err}");
    }
}
