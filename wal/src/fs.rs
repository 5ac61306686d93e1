//! The file system under the log: every WAL segment and control-file
//! operation goes through a [`FileSystem`].
//!
//! The log needs only a handful of operations: open (and create) a file,
//! positioned reads and writes, `fdatasync`, set the length, rename, remove,
//! fsync a directory, read a whole file. [`OsFileSystem`] maps them onto
//! `std::fs` one to one and is what [`Wal::open`](crate::Wal::open) uses;
//! an open that fails with `EMFILE` or `ENFILE` first closes cached
//! relation files ([`bufmgr::with_spare_descriptor`]) and tries again.
//! The trait exists so that tests can put a simulated disk underneath
//! (`sim_disk::SimDisk`, with the `testing` feature): one that injects I/O errors at chosen
//! points, and one that remembers what was fsynced so that a simulated
//! power loss can drop or tear everything that was not.
//!
//! Relation files do not go through this trait: the buffer pool reaches
//! them through `bufmgr::StorageBackend`, and the simulated disk wraps that
//! trait instead, so both halves of a data directory share one crash point.
//!
//! Shortcut: the `VERSION` stamp and the lock file of the engine's data
//! directory are written with `std::fs` directly; they are written once, at
//! creation, and fsynced with their directory.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// One open file of a [`FileSystem`], opened for reading and writing.
pub trait FsFile: Send + Sync + std::fmt::Debug {
    /// `pread`: reads up to `buf.len()` bytes at `offset`; fewer at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// `pwrite`: writes up to `buf.len()` bytes at `offset`; may write fewer
    /// (a short write), which [`write_all_at`](Self::write_all_at) retries.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;

    /// `fdatasync`: everything written so far (and the length) is durable
    /// once this returns `Ok`.
    fn sync_data(&self) -> io::Result<()>;

    /// `ftruncate`: cut or extend (with zeros) the file to `len` bytes.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Writes all of `buf` at `offset`, retrying short writes; a write that
    /// makes no progress is `WriteZero`.
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "write returned 0 bytes",
                    ));
                }
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Fills all of `buf` from `offset`; the end of the file first is
    /// `UnexpectedEof`.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file ends before the requested bytes",
                    ));
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The operations the log performs on its directory and files.
pub trait FileSystem: Send + Sync + std::fmt::Debug {
    /// Opens `path` for reading and writing. With `create`, a missing file is
    /// created empty; with `truncate`, an existing one is emptied. A missing
    /// file without `create` is `NotFound`.
    fn open(&self, path: &Path, create: bool, truncate: bool) -> io::Result<Box<dyn FsFile>>;

    /// Reads the whole of `path` (`NotFound` if it does not exist).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;

    /// Renames `from` to `to`, replacing `to` if it exists. The rename is
    /// durable once the directory is synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes the file `path`.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Creates `dir` and its missing parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// fsyncs the directory `dir`, so that the files created, renamed and
    /// removed in it so far are durable under their names.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// The names of the entries of `dir`, in no order.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
}

/// The real file system, through `std::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

#[derive(Debug)]
struct OsFile(File);

impl FsFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl FileSystem for OsFileSystem {
    fn open(&self, path: &Path, create: bool, truncate: bool) -> io::Result<Box<dyn FsFile>> {
        let f = bufmgr::with_spare_descriptor(|| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(truncate)
                .open(path)
        })?;
        Ok(Box::new(OsFile(f)))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        bufmgr::with_spare_descriptor(|| fs::read(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // Only the open is retried: an fsync that failed is not repeated
        // (the kernel may have dropped the dirty state it reported).
        bufmgr::with_spare_descriptor(|| File::open(dir))?.sync_all()
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in bufmgr::with_spare_descriptor(|| fs::read_dir(dir))? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
}
