//! [`SimDisk`]: a simulated disk for tests — injected I/O faults and a
//! power-loss model, under the WAL, the control file and the relation files
//! at once.
//!
//! **For testing only.** Nothing in the engine uses it unless a test asks
//! (`engine::Options::simulated_disk`). It is public so that tests in every
//! crate can drive the real code paths through it.
//!
//! # Why a model of the disk
//!
//! A process killed with SIGKILL keeps the operating system's page cache:
//! every `write` that returned is still there when the next process opens
//! the file, fsynced or not. So a kill can never show a missing `fdatasync`
//! or a missing directory fsync. A power loss can: what was not made
//! durable may be gone, or half written. This module keeps enough of the
//! history of every file to produce such a disk on demand.
//!
//! # How it works
//!
//! The files are real files in the data directory, and every read sees the
//! latest write (the page cache). Beside them the disk keeps, per file, an
//! undo log of the changes made since that file's last successful sync, and
//! per directory the entry changes (create, rename) since its last fsync:
//!
//! ```text
//!   wal/0000000000000000   pending: [write @0x2000 (old bytes, new bytes),
//!                                    write @0x2400 ...]      <- since fdatasync
//!   base/16384             pending: [write block 3 (old page), extend to 5]
//!   <datadir>/ entries     pending: [create control.tmp, rename -> control]
//! ```
//!
//! * A successful sync of a file empties its list: those bytes are durable.
//!   A *failed* sync marks every pending change of the file lost: Linux
//!   marks the dirty pages clean after a writeback error without writing
//!   them, so no later sync makes them durable and a power loss always drops
//!   them (PostgreSQL's "fsyncgate", and why it PANICs on a failed fsync).
//!   Reads still see them until the power goes, as reads of the page cache
//!   do.
//! * [`SimDisk::power_loss`] undoes every pending change (newest first),
//!   which leaves exactly the durable image, then replays the pending
//!   changes as the page cache might have left them, with a seeded
//!   generator:
//!   - a WAL or control file: length changes in order; then each 4 kB
//!     cache page independently keeps the pending writes that touch it up
//!     to a random point (a page is written back with every write made to
//!     it so far, so a later write never survives without an earlier one
//!     to the same page), the write at that point possibly torn at a
//!     512-byte sector boundary;
//!   - a relation page write: kept, dropped, or torn (one 4 kB half new,
//!     the other old); extensions survive in order, so no hole is ever
//!     left inside a relation;
//!   - directory entries: a random prefix of a directory's pending entry
//!     changes survives (metadata is journaled in order), the rest is
//!     undone: a file created and never made durable by a directory fsync
//!     disappears, an unsynced rename goes back (and the file it replaced
//!     comes back).
//!
//!   The same seed gives the same disk.
//! * After a power loss every operation fails ("simulated power loss")
//!   until [`SimDisk::restart`], so the process that "lost power" can be
//!   dropped without writing anything more; then a new `Database` opens on
//!   what survived.
//!
//! # Faults
//!
//! [`SimDisk::inject`] arms a [`Fault`]: after `after` more matching
//! operations succeed, the next one (and with `sticky`, every later one)
//! fails as [`FaultKind`] says: `EIO`, `ENOSPC`, a short write (half the
//! bytes reach the file, the call reports them written, and every later
//! write of that class fails with `ENOSPC`, as on a full disk), or a torn
//! write (the first half, 4 KiB of a page, reaches the file and the call
//! fails with `EIO`).
//!
//! # Shortcuts
//!
//! * Removing a file is durable at once (the model never resurrects a
//!   removed segment or relation).
//! * Relation files are created by `bufmgr`'s file backend, whose `create`
//!   fsyncs `base/` before returning: a relation's existence is durable
//!   when `create` returns, so the model tracks only its contents.
//! * Every operation takes one mutex: tests, not benchmarks.
//! * The `VERSION` stamp, the lock and the clean-shutdown marker of the
//!   engine's data directory do not go through it.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bufmgr::{BlockNumber, BufferTag, PAGE_SIZE, RelFork, StorageBackend};
use parking_lot::Mutex;

use crate::fs::{FileSystem, FsFile};

/// Which files a [`Fault`] applies to.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FileClass {
    /// WAL segments and the `wal/` directory.
    Wal,
    /// The control file, its temporary file, and the data directory itself.
    Control,
    /// Relation files (through the wrapped `StorageBackend`).
    Relation,
    /// Every file.
    Any,
}

/// Which operation a [`Fault`] fails.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FaultOp {
    Read,
    Write,
    /// `fdatasync` of a file, fsync of a directory, or a relation backend's
    /// `sync` / `sync_all`.
    Sync,
}

/// How the faulted operation fails.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum FaultKind {
    /// `EIO`: nothing happens, the call fails.
    Eio,
    /// `ENOSPC`: nothing happens, the call fails.
    NoSpace,
    /// Half the bytes reach the file and the call reports them written;
    /// every later write of the same class fails with `ENOSPC`.
    ShortWrite,
    /// The first half (4 KiB of a page) reaches the file, the call fails
    /// with `EIO`.
    TornWrite,
}

/// One armed fault (see the module docs).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Fault {
    pub class: FileClass,
    pub op: FaultOp,
    /// Matching operations let through before the fault fires.
    pub after: u64,
    pub kind: FaultKind,
    /// Keep failing every later matching operation.
    pub sticky: bool,
}

impl Fault {
    /// A one-shot fault on the next matching operation.
    pub fn next(class: FileClass, op: FaultOp, kind: FaultKind) -> Fault {
        Fault {
            class,
            op,
            after: 0,
            kind,
            sticky: false,
        }
    }
}

/// What one [`SimDisk::power_loss`] did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct PowerLoss {
    /// Un-synced data changes that survived whole.
    pub kept: u64,
    /// Un-synced data changes that were lost.
    pub dropped: u64,
    /// Un-synced data changes of which only a prefix survived.
    pub torn: u64,
    /// Directory entry changes undone (created files gone, renames undone).
    pub entries_undone: u64,
}

/// Operation counts since the disk was made.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct SimStats {
    pub reads: u64,
    pub writes: u64,
    pub syncs: u64,
    pub faults_fired: u64,
    pub power_losses: u64,
}

/// A change to a WAL or control file since its last sync.
#[derive(Debug)]
enum FileChange {
    /// `old` holds the bytes the write covered that existed before it.
    Write {
        offset: u64,
        old: Vec<u8>,
        new: Vec<u8>,
        old_len: u64,
    },
    /// `cut` holds the bytes a shrink removed.
    SetLen {
        old_len: u64,
        new_len: u64,
        cut: Vec<u8>,
    },
}

/// A change not yet durable. `lost`: a sync of its file failed since it
/// was made. Linux then marks the dirty pages clean without writing them
/// (PostgreSQL's "fsyncgate"), so no later sync makes the change durable
/// and a power loss always drops it.
#[derive(Debug)]
struct Unsynced<T> {
    change: T,
    lost: bool,
}

impl<T> Unsynced<T> {
    fn new(change: T) -> Unsynced<T> {
        Unsynced {
            change,
            lost: false,
        }
    }
}

/// A sync failed: every pending change of the file is lost for good.
fn mark_lost<T>(changes: Option<&mut Vec<Unsynced<T>>>) {
    for c in changes.into_iter().flatten() {
        c.lost = true;
    }
}

/// A sync succeeded: everything durable except what an earlier failed sync
/// lost. Returns whether anything is left.
fn keep_lost<T>(changes: &mut Vec<Unsynced<T>>) -> bool {
    changes.retain(|c| c.lost);
    !changes.is_empty()
}

/// A directory entry change since the directory's last fsync.
#[derive(Debug)]
enum EntryChange {
    Create(PathBuf),
    /// `replaced`: the contents of the file `to` named before, if any.
    Rename {
        from: PathBuf,
        to: PathBuf,
        replaced: Option<Vec<u8>>,
    },
}

/// A change to a relation fork since its last sync.
#[derive(Debug)]
enum RelChange {
    /// `old`: the page before, `None` for an extension.
    Write {
        block: BlockNumber,
        old: Option<Vec<u8>>,
        new: Vec<u8>,
    },
    Truncate {
        new_nblocks: BlockNumber,
        cut: Vec<Vec<u8>>,
    },
}

#[derive(Default)]
struct State {
    /// Current path of each open or tracked file, by inode number.
    inodes: HashMap<u64, PathBuf>,
    /// Un-synced changes per inode.
    pending: HashMap<u64, Vec<Unsynced<FileChange>>>,
    next_inode: u64,
    /// Un-synced entry changes per directory.
    entries: HashMap<PathBuf, Vec<EntryChange>>,
    /// Un-synced changes per relation fork.
    rels: HashMap<RelFork, Vec<Unsynced<RelChange>>>,
    /// The backend the relation changes were made through.
    rel_backend: Option<Arc<dyn StorageBackend>>,
    faults: Vec<(Fault, u64)>,
    /// A short write happened: later writes of this class fail with ENOSPC.
    full: Vec<FileClass>,
    powered_off: bool,
    /// An armed crash point: `(operations left, seed)`.
    crash_point: Option<(u64, u64)>,
    /// What the last power loss did.
    last_loss: Option<PowerLoss>,
    stats: SimStats,
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State")
            .field("tracked_files", &self.inodes.len())
            .field("faults", &self.faults)
            .field("powered_off", &self.powered_off)
            .field("stats", &self.stats)
            .finish()
    }
}

/// The simulated disk. Cheap to clone: clones share one disk.
#[derive(Clone, Debug, Default)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

const POWER_OFF: &str = "simulated power loss: the disk is gone until restart";
/// Torn writes keep whole sectors.
const SECTOR: u64 = 512;
/// The page cache writes a file back in pages of this size, in any order.
const CACHE_PAGE: u64 = 4096;
/// A torn page keeps its first half: PostgreSQL's 8 kB pages on 4 kB
/// file-system blocks tear there.
const TORN_PAGE_PREFIX: usize = 4096;

fn class_of_path(path: &Path) -> FileClass {
    let in_wal = path
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == crate::segment::WAL_DIR_NAME);
    if in_wal
        || path
            .file_name()
            .is_some_and(|n| n == crate::segment::WAL_DIR_NAME)
    {
        FileClass::Wal
    } else {
        FileClass::Control
    }
}

fn class_matches(want: FileClass, got: FileClass) -> bool {
    want == FileClass::Any || want == got
}

fn err(kind: io::ErrorKind, msg: &str) -> io::Error {
    io::Error::new(kind, msg.to_string())
}

fn eio(what: &str) -> io::Error {
    err(io::ErrorKind::Other, &format!("injected EIO ({what})"))
}

fn enospc(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::StorageFull,
        format!("injected ENOSPC: no space left on device ({what})"),
    )
}

/// splitmix64: a small seeded generator, so that a power loss replays from
/// its seed without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// The fate of one un-synced change at a power loss.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Fate {
    Kept,
    Dropped,
    Torn,
}

fn fate(rng: &mut Rng) -> Fate {
    match rng.below(3) {
        0 => Fate::Kept,
        1 => Fate::Dropped,
        _ => Fate::Torn,
    }
}

fn real_open(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

impl State {
    fn check_power(&self) -> io::Result<()> {
        if self.powered_off {
            Err(err(io::ErrorKind::Other, POWER_OFF))
        } else {
            Ok(())
        }
    }

    /// Before every operation that changes the disk: fails if the power is
    /// off, and cuts it here if this is the armed crash point.
    fn before_change(&mut self) -> io::Result<()> {
        self.check_power()?;
        if let Some((left, seed)) = self.crash_point {
            if left == 0 {
                self.crash_point = None;
                let loss = self.power_loss(seed)?;
                self.last_loss = Some(loss);
                return Err(err(io::ErrorKind::Other, POWER_OFF));
            }
            self.crash_point = Some((left - 1, seed));
        }
        Ok(())
    }

    /// The fault that fires for this operation, if any.
    fn fire(&mut self, class: FileClass, op: FaultOp) -> Option<FaultKind> {
        if op == FaultOp::Write && self.full.iter().any(|c| class_matches(*c, class)) {
            self.stats.faults_fired += 1;
            return Some(FaultKind::NoSpace);
        }
        let i = self
            .faults
            .iter()
            .position(|(f, _)| f.op == op && class_matches(f.class, class))?;
        let (fault, seen) = &mut self.faults[i];
        if *seen < fault.after {
            *seen += 1;
            return None;
        }
        let kind = fault.kind;
        if !fault.sticky {
            self.faults.remove(i);
        }
        if kind == FaultKind::ShortWrite {
            self.full.push(class);
        }
        self.stats.faults_fired += 1;
        Some(kind)
    }

    fn power_loss(&mut self, seed: u64) -> io::Result<PowerLoss> {
        let s = self;
        s.powered_off = true;
        s.stats.power_losses += 1;
        let mut rng = Rng(seed);
        let mut report = PowerLoss::default();
        // 1. File contents, by inode in a fixed order (replayable).
        let mut ids: Vec<u64> = s.pending.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let changes = s.pending.remove(&id).unwrap_or_default();
            let Some(path) = s.inodes.get(&id).cloned() else {
                continue;
            };
            let f = match real_open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            undo_file(&f, &changes)?;
            redo_file(&f, &changes, &mut rng, &mut report)?;
        }
        // 2. Relation forks.
        let mut forks: Vec<RelFork> = s.rels.keys().copied().collect();
        forks.sort_unstable();
        if let Some(backend) = s.rel_backend.clone() {
            for rf in forks {
                let changes = s.rels.remove(&rf).unwrap_or_default();
                undo_rel(&*backend, rf, &changes).map_err(io::Error::other)?;
                redo_rel(&*backend, rf, &changes, &mut rng, &mut report)
                    .map_err(io::Error::other)?;
            }
        }
        s.rels.clear();
        // 3. Directory entries: a prefix survives, the rest is undone.
        let mut dirs: Vec<PathBuf> = s.entries.keys().cloned().collect();
        dirs.sort();
        for dir in dirs {
            let changes = s.entries.remove(&dir).unwrap_or_default();
            let keep = rng.below(changes.len() as u64 + 1) as usize;
            for change in changes[keep..].iter().rev() {
                report.entries_undone += 1;
                match change {
                    EntryChange::Create(path) => match std::fs::remove_file(path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    },
                    EntryChange::Rename { from, to, replaced } => {
                        std::fs::rename(to, from)?;
                        if let Some(bytes) = replaced {
                            std::fs::write(to, bytes)?;
                        }
                    }
                }
            }
        }
        s.inodes.clear();
        Ok(report)
    }

    fn track(&mut self, path: &Path) -> u64 {
        if let Some((&id, _)) = self.inodes.iter().find(|(_, p)| p.as_path() == path) {
            return id;
        }
        self.next_inode += 1;
        let id = self.next_inode;
        self.inodes.insert(id, path.to_path_buf());
        id
    }

    fn entry_change(&mut self, dir: &Path, change: EntryChange) {
        self.entries
            .entry(dir.to_path_buf())
            .or_default()
            .push(change);
    }
}

impl SimDisk {
    /// A disk with no faults and nothing pending.
    pub fn new() -> SimDisk {
        SimDisk::default()
    }

    /// Arms `fault` (see the module docs); several may be armed at once,
    /// the first matching one fires.
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.push((fault, 0));
    }

    /// Disarms every fault and forgets a full disk.
    pub fn clear_faults(&self) {
        let mut s = self.state.lock();
        s.faults.clear();
        s.full.clear();
    }

    /// Operation counts so far.
    pub fn stats(&self) -> SimStats {
        self.state.lock().stats
    }

    /// Un-synced changes the disk holds now (files, relation forks and
    /// directory entries together).
    pub fn pending_changes(&self) -> usize {
        let s = self.state.lock();
        s.pending.values().map(Vec::len).sum::<usize>()
            + s.rels.values().map(Vec::len).sum::<usize>()
            + s.entries.values().map(Vec::len).sum::<usize>()
    }

    /// Wraps the relation backend so that its writes are tracked and its
    /// operations can fail (for `engine::Options::wrap_storage`).
    pub fn wrap_storage(&self, inner: Arc<dyn StorageBackend>) -> Arc<dyn StorageBackend> {
        self.state.lock().rel_backend = Some(Arc::clone(&inner));
        Arc::new(SimStorage {
            disk: self.clone(),
            inner,
        })
    }

    /// Cuts the power: every un-synced change is kept, dropped or torn by
    /// a generator seeded with `seed` (see the module docs), and every
    /// later operation fails until [`restart`](Self::restart). An error
    /// here is the real file system failing while the image is rebuilt.
    pub fn power_loss(&self, seed: u64) -> io::Result<PowerLoss> {
        let mut s = self.state.lock();
        let loss = s.power_loss(seed)?;
        s.last_loss = Some(loss);
        Ok(loss)
    }

    /// Arms a crash point: the power goes just before the disk's
    /// `after`-th next change (write, sync, set-length, create, rename,
    /// remove, of any file), as [`power_loss`](Self::power_loss) with
    /// `seed`; that change and everything later fails. With one thread
    /// doing the I/O, the same `after` and seed give the same disk.
    pub fn arm_crash_point(&self, after: u64, seed: u64) {
        self.state.lock().crash_point = Some((after, seed));
    }

    /// Whether the power is off (a power loss and no restart since).
    pub fn is_powered_off(&self) -> bool {
        self.state.lock().powered_off
    }

    /// What the last power loss did, if there was one.
    pub fn last_power_loss(&self) -> Option<PowerLoss> {
        self.state.lock().last_loss
    }

    /// Powers the disk back on: every operation works again, faults are
    /// disarmed, nothing is pending.
    pub fn restart(&self) {
        let mut s = self.state.lock();
        s.powered_off = false;
        s.crash_point = None;
        s.faults.clear();
        s.full.clear();
        s.pending.clear();
        s.rels.clear();
        s.entries.clear();
        s.inodes.clear();
        s.rel_backend = None;
    }
}

/// Undoes `changes` (newest first) on `f`: leaves the durable image.
fn undo_file(f: &File, changes: &[Unsynced<FileChange>]) -> io::Result<()> {
    for change in changes.iter().rev() {
        match &change.change {
            FileChange::Write {
                offset,
                old,
                old_len,
                ..
            } => {
                f.write_all_at(old, *offset)?;
                f.set_len(*old_len)?;
            }
            FileChange::SetLen {
                old_len,
                new_len,
                cut,
            } => {
                f.set_len(*old_len)?;
                if !cut.is_empty() {
                    f.write_all_at(cut, *new_len)?;
                }
            }
        }
    }
    Ok(())
}

/// Replays `changes` on the durable image as the page cache would have
/// left it: length changes in order (file metadata is journaled), then,
/// per 4 kB cache page, the pending writes that touch it up to a random
/// point (a page is written back whole, with every write made to it so
/// far), the write at that point possibly torn at a sector boundary.
fn redo_file(
    f: &File,
    changes: &[Unsynced<FileChange>],
    rng: &mut Rng,
    report: &mut PowerLoss,
) -> io::Result<()> {
    let mut pages: std::collections::BTreeMap<u64, Vec<usize>> = Default::default();
    for (i, change) in changes.iter().enumerate() {
        if change.lost {
            report.dropped += 1;
            continue;
        }
        match &change.change {
            FileChange::SetLen { new_len, .. } => f.set_len(*new_len)?,
            FileChange::Write { offset, new, .. } if !new.is_empty() => {
                let last = (offset + new.len() as u64 - 1) / CACHE_PAGE;
                for page in offset / CACHE_PAGE..=last {
                    pages.entry(page).or_default().push(i);
                }
            }
            FileChange::Write { .. } => {}
        }
    }
    for (page, writes) in pages {
        let keep = rng.below(writes.len() as u64 + 1) as usize;
        let tear = keep < writes.len() && rng.below(2) == 0;
        report.kept += keep as u64;
        report.dropped += (writes.len() - keep) as u64 - u64::from(tear);
        report.torn += u64::from(tear);
        let upto = if tear { keep + 1 } else { keep };
        for (n, &i) in writes[..upto].iter().enumerate() {
            let FileChange::Write { offset, new, .. } = &changes[i].change else {
                continue;
            };
            // The part of the write inside this page.
            let lo = (*offset).max(page * CACHE_PAGE);
            let mut hi = (offset + new.len() as u64).min((page + 1) * CACHE_PAGE);
            if n == keep {
                // Torn: whole sectors from the page's start survive.
                let sectors = (hi - page * CACHE_PAGE).div_ceil(SECTOR);
                hi = hi.min(page * CACHE_PAGE + rng.below(sectors) * SECTOR);
                if hi <= lo {
                    continue;
                }
            }
            let bytes = &new[(lo - offset) as usize..(hi - offset) as usize];
            if f.metadata()?.len() < lo {
                f.set_len(lo)?;
            }
            f.write_all_at(bytes, lo)?;
        }
    }
    Ok(())
}

fn undo_rel(
    b: &dyn StorageBackend,
    rf: RelFork,
    changes: &[Unsynced<RelChange>],
) -> bufmgr::Result<()> {
    for change in changes.iter().rev() {
        match &change.change {
            RelChange::Write {
                block,
                old: Some(old),
                ..
            } => b.write(BufferTag::new(rf, *block), old)?,
            RelChange::Write {
                block, old: None, ..
            } => b.truncate(rf, *block)?,
            RelChange::Truncate { new_nblocks, cut } => {
                for (i, page) in cut.iter().enumerate() {
                    b.write(BufferTag::new(rf, new_nblocks + i as BlockNumber), page)?;
                }
            }
        }
    }
    Ok(())
}

fn redo_rel(
    b: &dyn StorageBackend,
    rf: RelFork,
    changes: &[Unsynced<RelChange>],
    rng: &mut Rng,
    report: &mut PowerLoss,
) -> bufmgr::Result<()> {
    for change in changes {
        let fate = if change.lost {
            Fate::Dropped
        } else {
            fate(rng)
        };
        match &change.change {
            RelChange::Write { block, new, .. } => {
                let nblocks = b.nblocks(rf)?;
                // Extensions survive in order: never a hole.
                if fate == Fate::Dropped || *block > nblocks {
                    report.dropped += 1;
                    continue;
                }
                let tag = BufferTag::new(rf, *block);
                if fate == Fate::Kept {
                    report.kept += 1;
                    b.write(tag, new)?;
                } else {
                    // One 4 kB half of the page reached the disk.
                    report.torn += 1;
                    let mut page = vec![0u8; PAGE_SIZE];
                    if *block < nblocks {
                        b.read(tag, &mut page)?;
                    }
                    let half = if rng.below(2) == 0 {
                        0..TORN_PAGE_PREFIX
                    } else {
                        TORN_PAGE_PREFIX..PAGE_SIZE
                    };
                    page[half.clone()].copy_from_slice(&new[half]);
                    b.write(tag, &page)?;
                }
            }
            RelChange::Truncate { new_nblocks, .. } => {
                if fate == Fate::Dropped {
                    report.dropped += 1;
                } else {
                    report.kept += 1;
                    if *new_nblocks < b.nblocks(rf)? {
                        b.truncate(rf, *new_nblocks)?;
                    }
                }
            }
        }
    }
    Ok(())
}

// ---- the WAL's file system ----

/// One open file of the simulated disk.
#[derive(Debug)]
struct SimFile {
    disk: SimDisk,
    inode: u64,
    file: File,
}

impl SimFile {
    fn path(&self, s: &State) -> PathBuf {
        s.inodes.get(&self.inode).cloned().unwrap_or_default()
    }
}

impl FsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut s = self.disk.state.lock();
        s.stats.reads += 1;
        let class = class_of_path(&self.path(&s));
        match s.fire(class, FaultOp::Read) {
            Some(_) => Err(eio("read")),
            None => self.file.read_at(buf, offset),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut s = self.disk.state.lock();
        s.before_change()?;
        s.stats.writes += 1;
        let class = class_of_path(&self.path(&s));
        let fired = s.fire(class, FaultOp::Write);
        let n = match fired {
            None => buf.len(),
            Some(FaultKind::Eio) => return Err(eio("write")),
            Some(FaultKind::NoSpace) => return Err(enospc("write")),
            Some(FaultKind::ShortWrite | FaultKind::TornWrite) => buf.len() / 2,
        };
        let old_len = self.file.metadata()?.len();
        let covered = old_len.saturating_sub(offset).min(n as u64) as usize;
        let mut old = vec![0u8; covered];
        self.file.read_exact_at(&mut old, offset)?;
        self.file.write_all_at(&buf[..n], offset)?;
        s.pending
            .entry(self.inode)
            .or_default()
            .push(Unsynced::new(FileChange::Write {
                offset,
                old,
                new: buf[..n].to_vec(),
                old_len,
            }));
        if fired == Some(FaultKind::TornWrite) {
            return Err(eio("torn write: only the first half reached the disk"));
        }
        // A short write reports the half it wrote; the retry of the rest
        // meets the full disk.
        Ok(n)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.disk.state.lock();
        s.before_change()?;
        s.stats.syncs += 1;
        let class = class_of_path(&self.path(&s));
        if s.fire(class, FaultOp::Sync).is_some() {
            mark_lost(s.pending.get_mut(&self.inode));
            return Err(eio("fdatasync"));
        }
        self.file.sync_data()?;
        if let Some(changes) = s.pending.get_mut(&self.inode)
            && !keep_lost(changes)
        {
            s.pending.remove(&self.inode);
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.disk.state.lock();
        s.before_change()?;
        let old_len = self.file.metadata()?.len();
        let mut cut = Vec::new();
        if len < old_len {
            cut = vec![0u8; (old_len - len) as usize];
            self.file.read_exact_at(&mut cut, len)?;
        }
        self.file.set_len(len)?;
        s.pending
            .entry(self.inode)
            .or_default()
            .push(Unsynced::new(FileChange::SetLen {
                old_len,
                new_len: len,
                cut,
            }));
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

impl FileSystem for SimDisk {
    fn open(&self, path: &Path, create: bool, truncate: bool) -> io::Result<Box<dyn FsFile>> {
        let mut s = self.state.lock();
        if create || truncate {
            s.before_change()?;
        }
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .open(path)?;
        let inode = s.track(path);
        if !existed {
            let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
            s.entry_change(&dir, EntryChange::Create(path.to_path_buf()));
        }
        let f = SimFile {
            disk: self.clone(),
            inode,
            file,
        };
        drop(s);
        if truncate && existed {
            f.set_len(0)?;
        }
        Ok(Box::new(f))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut s = self.state.lock();
        s.stats.reads += 1;
        match s.fire(class_of_path(path), FaultOp::Read) {
            Some(_) => Err(eio("read")),
            None => std::fs::read(path),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.before_change()?;
        let replaced = match std::fs::read(to) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        std::fs::rename(from, to)?;
        // The renamed inode now lives at `to`; whatever was at `to` is gone.
        s.inodes.retain(|_, p| p.as_path() != to);
        for p in s.inodes.values_mut() {
            if p.as_path() == from {
                *p = to.to_path_buf();
            }
        }
        let dir = to.parent().unwrap_or(Path::new("")).to_path_buf();
        s.entry_change(
            &dir,
            EntryChange::Rename {
                from: from.to_path_buf(),
                to: to.to_path_buf(),
                replaced,
            },
        );
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.before_change()?;
        std::fs::remove_file(path)?;
        let gone: Vec<u64> = s
            .inodes
            .iter()
            .filter(|(_, p)| p.as_path() == path)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            s.inodes.remove(&id);
            s.pending.remove(&id);
        }
        // An entry change of a removed file must not be undone later.
        for changes in s.entries.values_mut() {
            changes.retain(|c| match c {
                EntryChange::Create(p) => p.as_path() != path,
                EntryChange::Rename { to, .. } => to.as_path() != path,
            });
        }
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.state.lock().before_change()?;
        std::fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.state.lock();
        s.before_change()?;
        s.stats.syncs += 1;
        if s.fire(class_of_path(dir), FaultOp::Sync).is_some() {
            return Err(eio("fsync directory"));
        }
        File::open(dir)?.sync_all()?;
        s.entries.remove(dir);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        crate::fs::OsFileSystem.list_dir(dir)
    }
}

// ---- relation files ----

/// The relation backend of a [`SimDisk`]: passes every call to the real
/// backend, tracking un-synced writes and firing [`FileClass::Relation`]
/// faults.
#[derive(Debug)]
struct SimStorage {
    disk: SimDisk,
    inner: Arc<dyn StorageBackend>,
}

impl SimStorage {
    fn io_error(
        &self,
        op: &'static str,
        tag: impl ToString,
        rf: RelFork,
        e: io::Error,
    ) -> bufmgr::Error {
        bufmgr::Error::io(op, tag, self.inner.path(rf), e)
    }

    fn powered(&self, s: &mut State, op: &'static str, rf: RelFork) -> bufmgr::Result<()> {
        s.before_change().map_err(|e| self.io_error(op, rf, rf, e))
    }
}

impl StorageBackend for SimStorage {
    fn name(&self) -> &'static str {
        "simulated-disk"
    }

    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }

    fn create(&self, rf: RelFork) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        self.powered(&mut s, "create", rf)?;
        self.inner.create(rf)
    }

    fn exists(&self, rf: RelFork) -> bufmgr::Result<bool> {
        self.inner.exists(rf)
    }

    fn nblocks(&self, rf: RelFork) -> bufmgr::Result<BlockNumber> {
        self.inner.nblocks(rf)
    }

    fn read(&self, tag: BufferTag, page: &mut [u8]) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        s.stats.reads += 1;
        if s.fire(FileClass::Relation, FaultOp::Read).is_some() {
            return Err(self.io_error("read", tag, tag.relfork(), eio("read")));
        }
        self.inner.read(tag, page)
    }

    fn write(&self, tag: BufferTag, page: &[u8]) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        self.powered(&mut s, "write", tag.relfork())?;
        s.stats.writes += 1;
        let rf = tag.relfork();
        let nblocks = self.inner.nblocks(rf)?;
        let old = if tag.block < nblocks {
            let mut old = vec![0u8; PAGE_SIZE];
            self.inner.read(tag, &mut old)?;
            Some(old)
        } else {
            None
        };
        let (written, failure) = match s.fire(FileClass::Relation, FaultOp::Write) {
            None => (page.to_vec(), None),
            Some(FaultKind::Eio) => return Err(self.io_error("write", tag, rf, eio("write"))),
            Some(FaultKind::NoSpace) => {
                return Err(self.io_error("write", tag, rf, enospc("write")));
            }
            Some(kind) => {
                // Half the page reaches the file, over what was there.
                let mut half = old.clone().unwrap_or_else(|| vec![0u8; PAGE_SIZE]);
                half[..TORN_PAGE_PREFIX].copy_from_slice(&page[..TORN_PAGE_PREFIX]);
                let e = if kind == FaultKind::ShortWrite {
                    enospc("short write: half the page reached the disk")
                } else {
                    eio("torn write: only the first 4 KiB reached the disk")
                };
                (half, Some(e))
            }
        };
        self.inner.write(tag, &written)?;
        s.rels
            .entry(rf)
            .or_default()
            .push(Unsynced::new(RelChange::Write {
                block: tag.block,
                old,
                new: written,
            }));
        match failure {
            Some(e) => Err(self.io_error("write", tag, rf, e)),
            None => Ok(()),
        }
    }

    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        self.powered(&mut s, "truncate", rf)?;
        let before = self.inner.nblocks(rf)?;
        let mut cut = Vec::new();
        for block in nblocks..before {
            let mut page = vec![0u8; PAGE_SIZE];
            self.inner.read(BufferTag::new(rf, block), &mut page)?;
            cut.push(page);
        }
        self.inner.truncate(rf, nblocks)?;
        s.rels
            .entry(rf)
            .or_default()
            .push(Unsynced::new(RelChange::Truncate {
                new_nblocks: nblocks,
                cut,
            }));
        Ok(())
    }

    fn sync(&self, rf: RelFork) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        self.powered(&mut s, "fdatasync", rf)?;
        s.stats.syncs += 1;
        if s.fire(FileClass::Relation, FaultOp::Sync).is_some() {
            mark_lost(s.rels.get_mut(&rf));
            return Err(self.io_error("fdatasync", rf, rf, eio("fdatasync")));
        }
        self.inner.sync(rf)?;
        if let Some(changes) = s.rels.get_mut(&rf)
            && !keep_lost(changes)
        {
            s.rels.remove(&rf);
        }
        Ok(())
    }

    fn sync_all(&self) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        let base = self.inner.path(RelFork::main(bufmgr::RelId(0)));
        let dir = base.parent().map_or(base.clone(), Path::to_path_buf);
        s.before_change()
            .map_err(|e| bufmgr::Error::io("fsync", "all files", &dir, e))?;
        s.stats.syncs += 1;
        if s.fire(FileClass::Relation, FaultOp::Sync).is_some() {
            for changes in s.rels.values_mut() {
                mark_lost(Some(changes));
            }
            return Err(bufmgr::Error::io(
                "fsync",
                "all files",
                dir,
                eio("fdatasync"),
            ));
        }
        self.inner.sync_all()?;
        s.rels.retain(|_, changes| keep_lost(changes));
        Ok(())
    }

    fn unlink(&self, rf: RelFork) -> bufmgr::Result<()> {
        let mut s = self.disk.state.lock();
        self.powered(&mut s, "unlink", rf)?;
        self.inner.unlink(rf)?;
        s.rels.remove(&rf);
        Ok(())
    }

    fn relations(&self) -> bufmgr::Result<Vec<RelFork>> {
        self.inner.relations()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_file(disk: &SimDisk, path: &Path, bytes: &[u8], sync: bool) {
        let f = disk.open(path, true, false).unwrap();
        f.write_all_at(bytes, 0).unwrap();
        if sync {
            f.sync_data().unwrap();
        }
    }

    #[test]
    fn synced_bytes_survive_and_unsynced_ones_may_not() {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let path = dir.path().join("f");
        write_file(&disk, &path, &[1; 8192], true);
        disk.sync_dir(dir.path()).unwrap();
        let f = disk.open(&path, false, false).unwrap();
        f.write_all_at(&[2; 8192], 0).unwrap();
        let mut outcomes = std::collections::BTreeSet::new();
        for seed in 0..40 {
            // Rebuild the same un-synced state for every seed.
            let snapshot = std::fs::read(&path).unwrap();
            let loss = disk.power_loss(seed).unwrap();
            let after = std::fs::read(&path).unwrap();
            assert_eq!(after.len(), 8192, "the synced length survives");
            // Each 4 kB page is old (1s), new (2s), or new up to a sector.
            for page in after.chunks(4096) {
                let new = page.iter().take_while(|b| **b == 2).count();
                assert_eq!(new % 512, 0, "a page tears at sector boundaries");
                assert!(page[new..].iter().all(|b| *b == 1), "{loss:?}");
            }
            outcomes.insert(after.iter().filter(|b| **b == 2).count());
            // The same seed gives the same disk.
            std::fs::write(&path, &snapshot).unwrap();
            disk.restart();
            let f = disk.open(&path, false, false).unwrap();
            f.write_all_at(&[1; 8192], 0).unwrap();
            f.sync_data().unwrap();
            f.write_all_at(&[2; 8192], 0).unwrap();
            drop(f);
        }
        assert!(
            outcomes.contains(&0) && outcomes.contains(&8192),
            "{outcomes:?}"
        );
        assert!(outcomes.len() > 2, "some pages were torn: {outcomes:?}");
    }

    #[test]
    fn a_seed_replays_the_same_disk() {
        let dir = tempfile::tempdir().unwrap();
        let run = |seed: u64| {
            let disk = SimDisk::new();
            let path = dir.path().join("g");
            let _ = std::fs::remove_file(&path);
            write_file(&disk, &path, &[0; 16384], true);
            disk.sync_dir(dir.path()).unwrap();
            let f = disk.open(&path, false, false).unwrap();
            for i in 0..8u8 {
                f.write_all_at(&[i + 1; 1500], u64::from(i) * 2000).unwrap();
            }
            disk.power_loss(seed).unwrap();
            std::fs::read(&path).unwrap()
        };
        assert_eq!(run(7), run(7));
        assert!((0..20).any(|s| run(s) != run(7)), "seeds differ");
    }

    #[test]
    fn an_unsynced_create_disappears_and_a_synced_one_stays() {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let kept = dir.path().join("kept");
        write_file(&disk, &kept, b"durable", true);
        disk.sync_dir(dir.path()).unwrap();
        let mut gone = 0;
        for seed in 0..20 {
            let fresh = dir.path().join(format!("fresh{seed}"));
            write_file(&disk, &fresh, b"not in the directory yet", true);
            disk.power_loss(seed).unwrap();
            disk.restart();
            assert_eq!(std::fs::read(&kept).unwrap(), b"durable");
            gone += usize::from(!fresh.exists());
        }
        assert!(gone > 0, "a create without a directory fsync can vanish");
    }

    #[test]
    fn a_failed_sync_loses_its_changes_even_after_a_later_good_sync() {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let path = dir.path().join("h");
        write_file(&disk, &path, &[1; 4096], true);
        disk.sync_dir(dir.path()).unwrap();
        let f = disk.open(&path, false, false).unwrap();
        f.write_all_at(&[2; 4096], 0).unwrap();
        disk.inject(Fault::next(FileClass::Any, FaultOp::Sync, FaultKind::Eio));
        let e = f.sync_data().unwrap_err();
        assert!(e.to_string().contains("injected EIO"), "{e}");
        f.sync_data().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), vec![2; 4096], "reads see it");
        for seed in 0..10 {
            disk.power_loss(seed).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), vec![1; 4096], "seed {seed}");
        }
    }

    #[test]
    fn faults_fire_after_the_chosen_count_and_a_short_write_fills_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        disk.inject(Fault {
            after: 2,
            ..Fault::next(FileClass::Control, FaultOp::Write, FaultKind::ShortWrite)
        });
        let f = disk.open(&dir.path().join("c"), true, false).unwrap();
        assert_eq!(f.write_at(&[1; 100], 0).unwrap(), 100);
        assert_eq!(f.write_at(&[1; 100], 100).unwrap(), 100);
        assert_eq!(f.write_at(&[1; 100], 200).unwrap(), 50, "short");
        let e = f.write_at(&[1; 50], 250).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull, "{e}");
        disk.clear_faults();
        assert_eq!(f.write_at(&[1; 50], 250).unwrap(), 50);
        assert_eq!(disk.stats().faults_fired, 2);
    }
}
