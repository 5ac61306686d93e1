//! A relation file created on a file system that gives new files an owner
//! of its own (NFS with `all_squash`, vfat or CIFS mounted with `uid=`,
//! FUSE): the kernel creates the file, and only then refuses `O_NOATIME`
//! (`EPERM`: the caller does not own the file it just made). `create`
//! must still open the file it made and make its directory entry durable,
//! not take the file for one that was already there.
//!
//! Such a file system cannot be mounted here, so this test binary stands
//! in for the kernel: it defines `open64` (which the standard library's
//! `File::open` calls), forwarding every open to the `openat` system call
//! except those of one chosen path with `O_NOATIME`, which it answers as
//! that file system does (creating the file first if asked to). It also
//! counts `fsync` calls.

mod common;

use std::ffi::{CStr, CString, c_char, c_int};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use bufmgr::tag::{BufferTag, PAGE_SIZE, RelFork, RelId};
use bufmgr::{FileStorage, StorageBackend};
use common::open_flags;

/// The path whose opens with `O_NOATIME` are refused (null: none).
static REFUSED: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());
static FSYNCS: AtomicU64 = AtomicU64::new(0);

/// `open64`, as the kernel behaves on a file system whose new files belong
/// to someone else, for the path in `REFUSED`.
///
/// # Safety
/// As `open64`: `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: c_int) -> c_int {
    let refused = REFUSED.load(Ordering::SeqCst);
    // SAFETY: both are NUL-terminated strings (the caller's, and ours,
    // leaked, never freed).
    let ours = !refused.is_null() && unsafe { libc::strcmp(path, refused) } == 0;
    if ours && flags & libc::O_NOATIME != 0 {
        if flags & libc::O_CREAT != 0 {
            // Created (or not, as the flags say), then refused.
            // SAFETY: a plain openat of the caller's path and flags.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat,
                    libc::AT_FDCWD,
                    path,
                    flags & !libc::O_NOATIME,
                    mode,
                )
            } as c_int;
            if fd < 0 {
                return -1;
            }
            // SAFETY: the descriptor just opened.
            unsafe { libc::close(fd) };
        }
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() = libc::EPERM };
        return -1;
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, flags, mode) as c_int }
}

/// `fsync`, counted.
#[unsafe(no_mangle)]
pub extern "C" fn fsync(fd: c_int) -> c_int {
    FSYNCS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the caller's descriptor, passed on.
    unsafe { libc::syscall(libc::SYS_fsync, fd) as c_int }
}

#[test]
fn a_file_created_then_refused_o_noatime_is_opened_and_its_entry_synced() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStorage::open(dir.path()).unwrap();
    let rf = RelFork::main(RelId(5));
    let path = CString::new(
        dir.path()
            .join("base/5")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    REFUSED.store(path.clone().into_raw(), Ordering::SeqCst);
    // The stand-in is in force: the kernel's answer for our path.
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { open64(path.as_ptr(), libc::O_RDONLY | libc::O_NOATIME, 0) };
    assert_eq!(fd, -1);
    assert!(!std::path::Path::new(CStr::to_str(&path).unwrap()).exists());

    let opened = s.files_opened();
    let fsyncs = FSYNCS.load(Ordering::SeqCst);
    s.create(rf).unwrap();
    assert!(
        std::path::Path::new(CStr::to_str(&path).unwrap()).exists(),
        "the file was created"
    );
    assert_eq!(
        s.files_opened(),
        opened + 1,
        "create took the file it made for one that was already there"
    );
    assert_eq!(s.open_files(), 1, "the created file is not open");
    assert!(
        FSYNCS.load(Ordering::SeqCst) > fsyncs,
        "the new file's directory entry was not synced"
    );
    // And it is a relation file like any other: written, read, reopened.
    let page = vec![9u8; PAGE_SIZE];
    s.write(BufferTag::new(rf, 0), &page).unwrap();
    s.sync(rf).unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    s.read(BufferTag::new(rf, 0), &mut buf).unwrap();
    assert_eq!(buf, page);
    // A file created on a file system that lets its creator own it is
    // open with O_NOATIME from its creation on.
    let mine = RelFork::main(RelId(6));
    s.create(mine).unwrap();
    let flags = open_flags(&dir.path().join("base/6"));
    assert_eq!(flags.len(), 1);
    assert_ne!(flags[0] & i64::from(libc::O_NOATIME), 0);
    drop(s);
    let s = FileStorage::open(dir.path()).unwrap();
    assert_eq!(s.nblocks(rf).unwrap(), 1);
    s.read(BufferTag::new(rf, 0), &mut buf).unwrap();
    assert_eq!(buf, page);
}
