//! [`FileStorage`]: synchronous `pread`/`pwrite` (and one `preadv` per run
//! of consecutive blocks) on one file per relation fork, optionally opened
//! with `O_DIRECT`.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::RwLock;

use super::aligned::{AlignedBuf, is_direct_aligned};
use super::{StorageBackend, byte_offset, check_page_len, parse_file_name};
use crate::error::{Error, Result};
use crate::tag::{BlockNumber, BufferTag, PAGE_SIZE, RelFork};

/// Most iovecs one `preadv` takes (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// One open relation fork file.
#[derive(Debug)]
pub(super) struct RelFile {
    pub(super) file: File,
    pub(super) path: PathBuf,
    /// Whole pages in the file: from its length at open, then kept up to date
    /// by extensions and truncations.
    pub(super) nblocks: AtomicU32,
}

impl RelFile {
    /// [`Error::BlockOutOfRange`] for `block` of `rf` in this file of
    /// `nblocks` pages.
    pub(super) fn out_of_range(
        &self,
        rf: RelFork,
        block: BlockNumber,
        nblocks: BlockNumber,
    ) -> Error {
        Error::BlockOutOfRange {
            relfork: rf,
            block,
            nblocks,
            path: self.path.clone(),
        }
    }
}

/// The synchronous file backend: `pread`/`pwrite` on one file per fork.
///
/// With `direct_io` every file is opened with `O_DIRECT`: reads and writes
/// bypass the kernel's page cache. Buffers that are not 4 KiB aligned (the
/// pool's pages always are) go through an aligned bounce buffer.
#[derive(Debug)]
pub struct FileStorage {
    base: PathBuf,
    files: RwLock<HashMap<RelFork, Arc<RelFile>>>,
    direct: bool,
}

impl FileStorage {
    /// Opens the storage under `data_dir` with buffered I/O, creating
    /// `data_dir/base/` if needed (and fsyncing `base/` and `data_dir` when
    /// it did).
    pub fn open(data_dir: &Path) -> Result<FileStorage> {
        FileStorage::open_with(data_dir, false)
    }

    /// As [`open`](Self::open); with `direct_io`, files are opened with
    /// `O_DIRECT`, and a file system that refuses it (tmpfs before Linux 6.6,
    /// some FUSE and network file systems) is an error here, naming the file
    /// system and the path, rather than at the first relation touched.
    pub fn open_with(data_dir: &Path, direct_io: bool) -> Result<FileStorage> {
        let base = data_dir.join("base");
        let existed = base
            .try_exists()
            .map_err(|e| Error::io("stat", "base directory", &base, e))?;
        if !existed {
            fs::create_dir_all(&base)
                .map_err(|e| Error::io("create", "base directory", &base, e))?;
            fsync_dir(&base)?;
            fsync_dir(data_dir)?;
        }
        let s = FileStorage {
            base,
            files: RwLock::new(HashMap::new()),
            direct: direct_io,
        };
        if direct_io {
            s.probe_direct()?;
        }
        Ok(s)
    }

    /// Whether files are opened with `O_DIRECT`.
    pub fn direct_io(&self) -> bool {
        self.direct
    }

    /// The `base/` directory.
    pub fn base_dir(&self) -> &Path {
        &self.base
    }

    /// Creates and removes a scratch file with `O_DIRECT`, so that a file
    /// system refusing it is reported at open.
    fn probe_direct(&self) -> Result<()> {
        let path = self
            .base
            .join(format!(".direct_io_probe.{}", std::process::id()));
        let opened = self
            .options()
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| self.open_error("create", "O_DIRECT probe file", &path, e));
        let _ = fs::remove_file(&path);
        opened.map(drop)
    }

    /// Read-write open options, with `O_DIRECT` if asked for.
    fn options(&self) -> OpenOptions {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if self.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o
    }

    /// The error for a failed open: `EINVAL` under `O_DIRECT` is the file
    /// system refusing direct I/O, and says which file system.
    fn open_error(
        &self,
        op: &'static str,
        what: impl ToString,
        path: &Path,
        e: io::Error,
    ) -> Error {
        if self.direct && e.raw_os_error() == Some(libc::EINVAL) {
            let fs = fs_type_name(&self.base);
            Error::io(
                op,
                format!(
                    "{} with O_DIRECT: the {fs} file system refuses direct I/O",
                    what.to_string()
                ),
                path,
                e,
            )
        } else {
            Error::io(op, what, path, e)
        }
    }

    /// The open file of `rf`, opening it on first use. `op` and `what` name
    /// the operation for the error if the file cannot be opened.
    pub(super) fn file(
        &self,
        rf: RelFork,
        op: &'static str,
        what: &dyn ToString,
    ) -> Result<Arc<RelFile>> {
        if let Some(f) = self.files.read().get(&rf) {
            return Ok(Arc::clone(f));
        }
        let path = self.path(rf);
        let file = self
            .options()
            .open(&path)
            .map_err(|e| self.open_error(op, what.to_string(), &path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(op, what.to_string(), &path, e))?
            .len();
        let nblocks =
            BlockNumber::try_from(len / PAGE_SIZE as u64).map_err(|_| Error::CorruptFile {
                relfork: rf,
                path: path.clone(),
                detail: format!("{len} bytes is more than {} blocks", BlockNumber::MAX),
            })?;
        let rel_file = Arc::new(RelFile {
            file,
            path,
            nblocks: AtomicU32::new(nblocks),
        });
        // Another thread may have opened it meanwhile: keep the first one, so
        // that every thread sees the same block count.
        let mut files = self.files.write();
        Ok(Arc::clone(files.entry(rf).or_insert(rel_file)))
    }

    /// The open file of `tag`'s fork and its block count, if `tag.block` can
    /// be read: [`Error::BlockOutOfRange`] if it is at or past the end.
    pub(super) fn readable(&self, tag: BufferTag) -> Result<(Arc<RelFile>, BlockNumber)> {
        let f = self.file(tag.relfork(), "open", &tag)?;
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block >= nblocks {
            return Err(f.out_of_range(tag.relfork(), tag.block, nblocks));
        }
        Ok((f, nblocks))
    }

    /// The open file of `tag`'s fork, if `tag.block` can be written: below
    /// the block count, or equal to it (an extension); past it is
    /// [`Error::BlockOutOfRange`] (no holes).
    pub(super) fn writable(&self, tag: BufferTag) -> Result<Arc<RelFile>> {
        let f = self.file(tag.relfork(), "open", &tag)?;
        let nblocks = f.nblocks.load(Ordering::Acquire);
        if tag.block > nblocks {
            return Err(f.out_of_range(tag.relfork(), tag.block, nblocks));
        }
        Ok(f)
    }

    /// Reads one page (aligned if direct) at `tag.block`, retrying short
    /// reads (except under `O_DIRECT`, where a short read is the end of the
    /// file).
    fn pread_page(
        &self,
        f: &RelFile,
        tag: BufferTag,
        nblocks: BlockNumber,
        buf: &mut [u8],
    ) -> Result<()> {
        let off = byte_offset(tag.block);
        let mut done = 0;
        while done < buf.len() {
            match f.file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => return Err(short_read(tag, &f.path, nblocks)),
                Ok(n) => {
                    done += n;
                    if self.direct && done < buf.len() {
                        return Err(short_read(tag, &f.path, nblocks));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", tag, &f.path, e)),
            }
        }
        Ok(())
    }

    /// Reads consecutive blocks from `tag.block` into `pages` with one
    /// `preadv` per `IOV_MAX` pages (more only after a short read).
    fn preadv_run(
        &self,
        f: &RelFile,
        tag: BufferTag,
        nblocks: BlockNumber,
        pages: &mut [&mut [u8]],
    ) -> Result<()> {
        let fd = f.file.as_raw_fd();
        let mut first = 0;
        while first < pages.len() {
            let end = (first + IOV_MAX).min(pages.len());
            let chunk = &mut pages[first..end];
            let total = chunk.len() * PAGE_SIZE;
            let chunk_off = byte_offset(tag.block + first as BlockNumber);
            let block_at = |bytes: usize| BufferTag {
                block: tag.block + (first + bytes / PAGE_SIZE) as BlockNumber,
                ..tag
            };
            let mut done = 0;
            while done < total {
                let (skip_pages, skip_bytes) = (done / PAGE_SIZE, done % PAGE_SIZE);
                let iov: Vec<libc::iovec> = chunk[skip_pages..]
                    .iter_mut()
                    .enumerate()
                    .map(|(i, p)| {
                        let s = if i == 0 { skip_bytes } else { 0 };
                        libc::iovec {
                            iov_base: p[s..].as_mut_ptr().cast(),
                            iov_len: PAGE_SIZE - s,
                        }
                    })
                    .collect();
                // SAFETY: every iovec points into a distinct `&mut` page of
                // `chunk` (PAGE_SIZE bytes each, checked by the caller) that
                // stays borrowed for the whole call; `iov` outlives the call.
                let r = unsafe {
                    libc::preadv(
                        fd,
                        iov.as_ptr(),
                        iov.len() as libc::c_int,
                        (chunk_off + done as u64) as libc::off_t,
                    )
                };
                if r < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(Error::io("read", block_at(done), &f.path, e));
                }
                let r = r as usize;
                if r == 0 || (self.direct && r < total - done) {
                    return Err(short_read(block_at(done + r), &f.path, nblocks));
                }
                done += r;
            }
            first = end;
        }
        Ok(())
    }
}

/// A read that found the end of the file inside a block it counted.
pub(super) fn short_read(tag: BufferTag, path: &Path, nblocks: BlockNumber) -> Error {
    Error::CorruptFile {
        relfork: tag.relfork(),
        path: path.to_path_buf(),
        detail: format!(
            "short read of block {}: the file ends inside it, \
             though it was counted as {nblocks} blocks",
            tag.block
        ),
    }
}

/// The name of the file system holding `path` (from `statfs`'s `f_type`),
/// for the error of a file system that refuses `O_DIRECT`.
pub fn fs_type_name(path: &Path) -> String {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: an all-zero statfs is a valid value of this plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return format!("unknown ({})", io::Error::last_os_error());
    }
    fs_magic_name(st.f_type as i64)
}

/// A file system's name from its `statfs` magic number.
pub fn fs_magic_name(magic: i64) -> String {
    let name = match magic {
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0xEF53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0xF2F5_2010 => "f2fs",
        0x2FC1_2FC1 => "zfs",
        0x794C_7630 => "overlayfs",
        0x6573_5546 => "fuse",
        0x6969 => "nfs",
        0xFF53_4D42 => "cifs",
        0xFE53_4D42 => "smb2",
        0x0102_1997 => "9p",
        0x7371_7368 => "squashfs",
        0x4d44 => "vfat",
        0x2011_BAB0 => "exfat",
        0x9fa0 => "proc",
        _ => return format!("unknown (f_type {magic:#x})"),
    };
    name.to_string()
}

pub(super) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync", "directory", dir, e))
}

impl StorageBackend for FileStorage {
    fn name(&self) -> &'static str {
        "sync"
    }

    fn path(&self, rf: RelFork) -> PathBuf {
        self.base.join(format!("{}{}", rf.rel.0, rf.fork.suffix()))
    }

    fn create(&self, rf: RelFork) -> Result<()> {
        if self.files.read().contains_key(&rf) {
            return Ok(());
        }
        let path = self.path(rf);
        match self.options().create_new(true).open(&path) {
            Ok(file) => {
                fsync_dir(&self.base)?;
                self.files.write().entry(rf).or_insert_with(|| {
                    Arc::new(RelFile {
                        file,
                        path,
                        nblocks: AtomicU32::new(0),
                    })
                });
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(self.open_error("create", rf, &path, e)),
        }
    }

    fn exists(&self, rf: RelFork) -> Result<bool> {
        if self.files.read().contains_key(&rf) {
            return Ok(true);
        }
        let path = self.path(rf);
        path.try_exists()
            .map_err(|e| Error::io("stat", rf, path, e))
    }

    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        Ok(self.file(rf, "open", &rf)?.nblocks.load(Ordering::Acquire))
    }

    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        check_page_len(page.len());
        let (f, nblocks) = self.readable(tag)?;
        if self.direct && !is_direct_aligned(page) {
            let mut bounce = AlignedBuf::zeroed(PAGE_SIZE);
            self.pread_page(&f, tag, nblocks, &mut bounce)?;
            page.copy_from_slice(&bounce);
            return Ok(());
        }
        self.pread_page(&f, tag, nblocks, page)
    }

    /// One `preadv` for the whole run (per 1,024 pages). Blocks before the
    /// end of the file are read even when the run goes past it; the error
    /// then names the first block past the end.
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        for p in pages.iter() {
            check_page_len(p.len());
        }
        let (f, nblocks) = self.readable(tag)?;
        let n = pages.len().min((nblocks - tag.block) as usize);
        if self.direct && pages[..n].iter().any(|p| !is_direct_aligned(p)) {
            for (i, p) in pages[..n].iter_mut().enumerate() {
                let block = tag.block + i as BlockNumber;
                self.read(BufferTag { block, ..tag }, p)?;
            }
        } else {
            self.preadv_run(&f, tag, nblocks, &mut pages[..n])?;
        }
        if n < pages.len() {
            return Err(f.out_of_range(tag.relfork(), tag.block + n as BlockNumber, nblocks));
        }
        Ok(())
    }

    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        check_page_len(page.len());
        let f = self.writable(tag)?;
        let bounce;
        let buf = if self.direct && !is_direct_aligned(page) {
            bounce = AlignedBuf::copy_of(page);
            &bounce[..]
        } else {
            page
        };
        f.file
            .write_all_at(buf, byte_offset(tag.block))
            .map_err(|e| Error::io("write", tag, &f.path, e))?;
        // An extension: count the new page only once it is fully written.
        // `fetch_max` keeps the count right even if two extensions of the same
        // block race (the caller should have prevented that).
        f.nblocks.fetch_max(tag.block + 1, Ordering::AcqRel);
        Ok(())
    }

    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        let f = self.file(rf, "open", &rf)?;
        let current = f.nblocks.load(Ordering::Acquire);
        if nblocks > current {
            return Err(f.out_of_range(rf, nblocks, current));
        }
        // Lower the count first, so that no reader trusts pages being cut off.
        f.nblocks.store(nblocks, Ordering::Release);
        f.file
            .set_len(byte_offset(nblocks))
            .map_err(|e| Error::io("truncate", format!("{rf} to {nblocks} blocks"), &f.path, e))
    }

    fn sync(&self, rf: RelFork) -> Result<()> {
        let f = self.file(rf, "open", &rf)?;
        f.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", rf, &f.path, e))
    }

    fn sync_all(&self) -> Result<()> {
        let mut open: Vec<(RelFork, Arc<RelFile>)> = self
            .files
            .read()
            .iter()
            .map(|(&rf, f)| (rf, Arc::clone(f)))
            .collect();
        open.sort_by_key(|&(rf, _)| rf);
        for (rf, f) in open {
            f.file
                .sync_data()
                .map_err(|e| Error::io("fdatasync", rf, &f.path, e))?;
        }
        fsync_dir(&self.base)
    }

    fn unlink(&self, rf: RelFork) -> Result<()> {
        let path = self.path(rf);
        self.files.write().remove(&rf);
        match fs::remove_file(&path) {
            Ok(()) => fsync_dir(&self.base),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("unlink", rf, path, e)),
        }
    }

    fn relations(&self) -> Result<Vec<RelFork>> {
        let list_err = |e| Error::io("list", "base directory", &self.base, e);
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.base).map_err(list_err)? {
            let entry = entry.map_err(list_err)?;
            let is_file = entry.file_type().map_err(list_err)?.is_file();
            let name = entry.file_name();
            if let (true, Some(rf)) = (is_file, name.to_str().and_then(parse_file_name)) {
                out.push(rf);
            }
        }
        out.sort();
        Ok(out)
    }
}
