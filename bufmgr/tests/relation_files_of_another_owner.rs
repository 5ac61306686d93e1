//! Relation files owned by another user: the kernel refuses `O_NOATIME` on
//! them (`EPERM`) to a process that neither owns the file nor has
//! `CAP_FOWNER`, and `FileStorage` opens them without it, so they read and
//! write as any other. Run as root, the test drops `CAP_FOWNER` from its
//! own thread (capabilities are per thread) and gives the files to
//! `nobody`; where that cannot be done it says so and checks nothing.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use bufmgr::tag::{BufferTag, PAGE_SIZE, RelFork, RelId};
use bufmgr::{FileStorage, StorageBackend};
use common::open_flags;

const NOBODY: u32 = 65534;
const CAP_FOWNER: u32 = 3;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// Drop `CAP_FOWNER` from the calling thread's effective set; `false` if
/// the thread did not have it or the call failed.
fn drop_cap_fowner() -> bool {
    let mut h = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut d = [CapData::default(); 2];
    // SAFETY: capget writes the header and two data structs we pass.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    if r != 0 || d[0].effective & (1 << CAP_FOWNER) == 0 {
        return false;
    }
    d[0].effective &= !(1 << CAP_FOWNER);
    // SAFETY: capset reads the header and two data structs we pass; it
    // changes only this thread's capabilities.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut h, d.as_ptr()) };
    r == 0
}

fn chown(path: &Path, uid: u32) -> bool {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).is_ok()
        && fs::metadata(path).is_ok_and(|m| m.uid() == uid)
}

fn page(rel: u32, block: u32) -> Vec<u8> {
    let mut p = vec![0u8; PAGE_SIZE];
    p[..4].copy_from_slice(&rel.to_le_bytes());
    p[4..8].copy_from_slice(&block.to_le_bytes());
    p[PAGE_SIZE - 1] = 0x5a;
    p
}

#[test]
fn files_of_another_user_are_opened_without_o_noatime_and_read_and_written() {
    let dir = tempfile::tempdir().unwrap();
    let rf = RelFork::main(RelId(7));
    let path = dir.path().join("base/7");
    {
        let s = FileStorage::open(dir.path()).unwrap();
        s.create(rf).unwrap();
        for b in 0..3 {
            s.write(BufferTag::new(rf, b), &page(7, b)).unwrap();
        }
        s.sync(rf).unwrap();
    }
    if !chown(&path, NOBODY) {
        eprintln!("cannot give {} to nobody: nothing checked", path.display());
        return;
    }
    let base = dir.path().to_path_buf();
    let path2 = path.clone();
    let checked = std::thread::spawn(move || {
        if !drop_cap_fowner() {
            eprintln!("cannot drop CAP_FOWNER: nothing checked");
            return false;
        }
        // The kernel refuses O_NOATIME here now.
        let refused = fs::OpenOptions::new()
            .read(true)
            .custom_flags_noatime()
            .open(&path2)
            .map_err(|e| e.raw_os_error());
        assert_eq!(refused.err(), Some(Some(libc::EPERM)));
        let s = FileStorage::open(&base).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        for b in 0..3 {
            s.read(BufferTag::new(rf, b), &mut buf).unwrap();
            assert_eq!(buf, page(7, b));
        }
        let flags = open_flags(&path2);
        assert_eq!(flags.len(), 1);
        assert_eq!(flags[0] & i64::from(libc::O_NOATIME), 0);
        s.write(BufferTag::new(rf, 3), &page(7, 3)).unwrap();
        s.sync(rf).unwrap();
        assert_eq!(s.nblocks(rf).unwrap(), 4);
        // Closed by the cache and opened again: the same fallback.
        let other = RelFork::main(RelId(8));
        s.set_max_open_files(1);
        s.create(other).unwrap();
        s.write(BufferTag::new(other, 0), &page(8, 0)).unwrap();
        s.read(BufferTag::new(rf, 3), &mut buf).unwrap();
        assert_eq!(buf, page(7, 3));
        // A file this thread creates is its own: O_NOATIME applies.
        s.read(BufferTag::new(other, 0), &mut buf).unwrap();
        let flags = open_flags(&base.join("base/8"));
        assert_eq!(flags.len(), 1);
        assert_ne!(flags[0] & i64::from(libc::O_NOATIME), 0);
        true
    })
    .join()
    .unwrap();
    if checked {
        let s = FileStorage::open(dir.path()).unwrap();
        let mut buf = vec![0u8; PAGE_SIZE];
        s.read(BufferTag::new(rf, 3), &mut buf).unwrap();
        assert_eq!(buf, page(7, 3));
    }
}

trait NoAtime {
    fn custom_flags_noatime(&mut self) -> &mut Self;
}

impl NoAtime for fs::OpenOptions {
    fn custom_flags_noatime(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NOATIME)
    }
}
