//! Online backup: [`Database::backup_to`] writes a copy of the data
//! directory that opens, recovers, and holds every transaction that
//! committed before the backup began, while writers keep committing
//! (PostgreSQL's base backup: `pg_backup_start`, copy, `pg_backup_stop`,
//! and the WAL in between).
//!
//! ```text
//!   DDL held off (no file created or removed meanwhile)
//!   checkpoints held off (no WAL segment the copy needs is removed)
//!   1. full-page images forced on          (wal::Wal::force_full_page_writes)
//!   2. checkpoint: redo point R            (everything before R is in the files)
//!   3. copy VERSION and each relation file block by block from disk
//!        logged: clog, catalog, tables, valid indexes   (while they are written)
//!        unlogged tables and their indexes: empty files (emptied at open anyway)
//!   4. flush the WAL: end LSN E            (every page copied has LSN <= E)
//!   5. copy the WAL segments from R's to E's, E's cut at E and zero-filled
//!   6. RELSIZES (the copied lengths), BACKUP_LABEL (R and E), the control
//!      file (names the checkpoint of 2), and last VERSION; all fsynced
//! ```
//!
//! Why the copy is consistent although the files change while they are
//! read:
//!
//! 1. **A page copied torn or stale is rebuilt by replay.** Every change
//!    after R is in the WAL from R on, and the first change of each page
//!    after R carries a full-page image because images are forced on before
//!    R is taken (step 1; an insert that decided "no image" before the
//!    guard existed is refused by the check under the insert lock and
//!    decides again). Replay from R therefore restores every page changed
//!    after R whole, whatever half-written state step 3 read; a page not
//!    changed after R was written by the checkpoint before step 3 began and
//!    is read whole.
//! 2. **Hint bits** change pages without WAL. With checksums on, the first
//!    hint after R logs an image too (the pool's hint rule), and a page
//!    whose checksum fails when read is read again (a write was in
//!    progress; PostgreSQL's base backup does the same); a page that still
//!    fails after [`REREADS`] reads is an error naming it: the source is
//!    damaged. With checksums off a torn hint-only write mixes two versions
//!    that differ only in hint bits, which are only hints.
//! 3. **Nothing copied is newer than the WAL copied.** A page is written
//!    only after the WAL up to its LSN is flushed (WAL before data), and E
//!    is taken after the last page was read, so every change the copied
//!    pages hold is in the WAL up to E. Recovery replays at least to E
//!    (`BACKUP_LABEL`: opening a copy whose WAL ends before E is an error),
//!    so it never stops at a state older than a page it holds.
//! 4. **Commits.** A transaction that committed before the backup began has
//!    its commit record before E, so it is replayed. One whose commit
//!    record is not in the copied WAL is aborted by recovery, as after a
//!    crash: no transaction is half there.
//! 5. **Files.** DDL waits for the backup (the DDL lock is held), so no
//!    relation file is created or removed during the copy; files only grow
//!    meanwhile, and blocks added after a file was copied are rebuilt by
//!    replay (images and the durable lengths logged by the checkpoint).
//!    Checkpoints wait too (the checkpoint lock is held), so the WAL from R
//!    stays in place until it is copied.
//!
//! The progress callback runs on the backing-up thread while the DDL and
//! checkpoint locks are held, so DDL, a checkpoint or another backup called
//! from it would wait for this backup forever. The thread is marked while
//! it backs up (`Marked`, in `backup_label`); those operations call `refuse_inside` first
//! and fail at once with [`EngineError::BackupInProgress`]. (Work the
//! callback hands to another thread and waits for is not marked: DDL there
//! waits for the backup, which waits for the callback.)
//!
//! The copy has no `CLEAN_SHUTDOWN` marker: its first open is a crash
//! recovery (so unlogged tables, copied empty, are emptied as after a
//! crash). The target directory must not exist or be empty.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use bufmgr::{BufferTag, PAGE_SIZE, RelFork, RelId};
use wal::Lsn;

use crate::backup_label::{BACKUP_LABEL_FILE, Marked, refuse_inside, sync_dir};
use crate::database::{Database, current_sizes};
use crate::datadir::{self, Recorded};
use crate::error::{EngineError, Result};

/// Reads of a page whose checksum fails before the backup gives up on it
/// (a page being written reads torn for a moment; a damaged one stays so).
pub const REREADS: u32 = 20;
/// Blocks read from a relation file per call.
const RUN: usize = 32;
/// What a backup has done so far (handed to the progress callback, and the
/// last one returned by [`Database::backup_to`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct BackupProgress {
    /// Relation files copied, of `files`.
    pub files_done: usize,
    /// Relation files to copy.
    pub files: usize,
    /// Relation bytes copied, of about `bytes_total` (the files' lengths
    /// when the copy began; they may grow meanwhile).
    pub bytes: u64,
    /// Bytes of the relation files when the copy began.
    pub bytes_total: u64,
    /// Pages read again because their checksum failed (a write was in
    /// progress).
    pub pages_reread: u64,
    /// WAL bytes copied (from the redo point to the end LSN).
    pub wal_bytes: u64,
    /// The backup's checkpoint redo point, and the end LSN the copy's
    /// recovery must reach (0 until the relation files are copied).
    pub redo_lsn: Lsn,
    /// End LSN the copy's recovery must reach (0 until the files are copied).
    pub end_lsn: Lsn,
    /// Time since the backup began.
    pub elapsed: Duration,
    /// The last report: the copy is complete and durable.
    pub done: bool,
}

/// One relation file to copy.
struct Source {
    rel: RelId,
    /// `None`: an unlogged relation, copied empty.
    recorded: Option<Recorded>,
    file_name: String,
}

impl Database {
    /// Write a consistent copy of this database into `dir` while it keeps
    /// serving reads and writes (module docs of `backup`): opening the copy
    /// recovers it to a state that holds every transaction committed before
    /// this call began (and possibly later ones), none half.
    ///
    /// `dir` must not exist or be an empty directory, outside this
    /// database's directory ([`EngineError::BackupTarget`] otherwise,
    /// before anything is written). DDL and checkpoints wait until the
    /// backup ends; full-page images are taken during it even with
    /// `full_page_writes` off. `progress` is called after each relation
    /// file, about every 16 MiB within one, and once at the end (`done`).
    /// A failed backup leaves a partial directory without a `VERSION` file,
    /// which does not open as a database ([`EngineError::NotADatabase`]).
    /// `progress` runs while DDL and checkpoints wait for the backup: it may
    /// read and write, but creating or dropping a table or index, adding a
    /// column, a checkpoint or another backup called from it fails at once with
    /// [`EngineError::BackupInProgress`] (on another thread it would wait
    /// for this backup).
    pub fn backup_to(
        &self,
        dir: impl AsRef<Path>,
        mut progress: impl FnMut(&BackupProgress),
    ) -> Result<BackupProgress> {
        let target = dir.as_ref();
        refuse_inside(|| format!("a backup to {}", target.display()))?;
        let c = self.core();
        check_target(target, &c.dir)?;
        let started = Instant::now();
        // DDL, then checkpoints (the order DDL and a checkpoint never take
        // both in): held to the end.
        let _ddl = c.ddl.lock();
        let _checkpoints = c.checkpoint_serial.lock();
        let _images = c.wal.force_full_page_writes();
        let _marked = Marked::begin();
        let checkpoint = c.tm.checkpoint()?;
        let control = c
            .wal
            .last_checkpoint()
            .ok_or_else(|| EngineError::Checkpoint {
                detail: "the backup's checkpoint left no control data".into(),
            })?;
        let mut p = BackupProgress {
            redo_lsn: checkpoint.redo_lsn,
            ..BackupProgress::default()
        };
        let sources = sources(self)?;
        let storage = c.pool.storage();
        for s in &sources {
            if s.recorded.is_some() {
                let n = storage
                    .nblocks(RelFork::main(s.rel))
                    .map_err(EngineError::buffer(format!("backup: sizing {}", s.rel)))?;
                p.bytes_total += u64::from(n) * PAGE_SIZE as u64;
            }
        }
        p.files = sources.len();
        fs::create_dir_all(target.join("base"))
            .map_err(EngineError::io("create", target.join("base")))?;
        fs::create_dir_all(wal::segment::wal_dir(target))
            .map_err(EngineError::io("create", wal::segment::wal_dir(target)))?;
        let checksums = c.options.checksums;
        let mut relsizes = Vec::new();
        for s in &sources {
            let out = target.join("base").join(&s.file_name);
            let copied = match &s.recorded {
                Some(_) => {
                    copy_relation(self, s.rel, &out, checksums, started, &mut p, &mut progress)?
                }
                None => {
                    write_file(&out, &[])?;
                    0
                }
            };
            if let Some(r) = &s.recorded {
                relsizes.push(Recorded {
                    blocks: copied,
                    ..r.clone()
                });
            }
            p.files_done += 1;
            p.elapsed = started.elapsed();
            progress(&p);
        }
        // 4. Everything the copied pages hold is in the WAL before `end`.
        c.wal
            .flush_all()
            .map_err(EngineError::wal("backup: flushing the WAL"))?;
        let end = c.wal.flushed_lsn();
        p.end_lsn = end;
        p.wal_bytes = copy_wal(self, target, checkpoint.redo_lsn, end)?;
        // 6. `VERSION` last: a copy cut short before it is no data
        //    directory (`NotADatabase` at open), never an empty database.
        datadir::write_relsizes(target, &relsizes)?;
        write_file(
            &target.join(BACKUP_LABEL_FILE),
            format!(
                "redo {}\nend {}\nstarted {:?}\n",
                checkpoint.redo_lsn.0,
                end.0,
                std::time::SystemTime::now()
            )
            .as_bytes(),
        )?;
        wal::control::write_control_with(&wal::OsFileSystem, target, &control)
            .map_err(EngineError::wal("backup: writing the control file"))?;
        for d in [target.join("base"), wal::segment::wal_dir(target)] {
            sync_dir(&d)?;
        }
        let version = c.dir.join(datadir::VERSION_FILE);
        let bytes = fs::read(&version).map_err(EngineError::io("read", &version))?;
        write_file(&target.join(datadir::VERSION_FILE), &bytes)?;
        sync_dir(target)?;
        p.elapsed = started.elapsed();
        p.done = true;
        progress(&p);
        Ok(p)
    }
}

/// The target must not exist or be an empty directory, and must not lie
/// inside the data directory.
fn check_target(target: &Path, source: &Path) -> Result<()> {
    let refuse = |detail: String| EngineError::BackupTarget {
        path: target.to_path_buf(),
        detail,
    };
    match fs::metadata(target) {
        Ok(m) if !m.is_dir() => return Err(refuse("it exists and is not a directory".into())),
        Ok(_) => {
            let mut entries = fs::read_dir(target).map_err(EngineError::io("list", target))?;
            if let Some(e) = entries.next() {
                let e = e.map_err(EngineError::io("list", target))?;
                return Err(refuse(format!(
                    "it is not empty (it holds {:?}); a backup goes into a new or empty directory",
                    e.file_name()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(EngineError::io("stat", target)(e)),
    }
    // Compare resolved paths: the nearest existing ancestor of the target.
    let source = source
        .canonicalize()
        .map_err(EngineError::io("resolve", source))?;
    let mut probe = Some(target);
    while let Some(p) = probe {
        if let Ok(resolved) = p.canonicalize() {
            if resolved.starts_with(&source) {
                return Err(refuse(format!(
                    "it lies inside the data directory {} being backed up",
                    source.display()
                )));
            }
            break;
        }
        probe = p.parent();
    }
    Ok(())
}

/// Every relation file of the database: the clog, the catalog, logged
/// tables and their valid indexes (recorded with their kind and name), and
/// unlogged tables and indexes (copied empty). Invalid indexes are left
/// out: their files are missing or damaged, and the copy opens them invalid
/// as the source did.
fn sources(db: &Database) -> Result<Vec<Source>> {
    let c = db.core();
    let st = c.catalog.read();
    let storage = c.pool.storage();
    let file_name = |rel: RelId| -> Result<String> {
        let path = storage.path(RelFork::main(rel));
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| EngineError::CorruptDataDir {
                path: path.clone(),
                detail: "a relation file path without a file name".into(),
            })
    };
    let mut out = Vec::new();
    for r in current_sizes(&st, &c.pool)? {
        let rel = RelId(r.rel);
        out.push(Source {
            rel,
            file_name: file_name(rel)?,
            recorded: Some(r),
        });
    }
    for t in st.tables.values().filter(|t| !t.info.logged) {
        let rels: Vec<RelId> = std::iter::once(t.info.rel)
            .chain(t.indexes.read().iter().map(|i| i.info.rel))
            .collect();
        for rel in rels {
            out.push(Source {
                rel,
                file_name: file_name(rel)?,
                recorded: None,
            });
        }
    }
    Ok(out)
}

/// Copy relation `rel` block by block into `out` (step 3); returns the
/// blocks copied. With checksums on, a page that fails its checksum is
/// read again, up to [`REREADS`] times (module docs, rule 2).
fn copy_relation(
    db: &Database,
    rel: RelId,
    out: &Path,
    checksums: bool,
    started: Instant,
    p: &mut BackupProgress,
    progress: &mut dyn FnMut(&BackupProgress),
) -> Result<u32> {
    let c = db.core();
    let storage = c.pool.storage();
    let rf = RelFork::main(rel);
    let what = || format!("backup: reading {rel}");
    let nblocks = storage.nblocks(rf).map_err(EngineError::buffer(what()))?;
    let file = File::create(out).map_err(EngineError::io("create", out))?;
    let mut w = BufWriter::with_capacity(RUN * PAGE_SIZE, file);
    let mut bufs: Vec<Vec<u8>> = (0..RUN).map(|_| vec![0u8; PAGE_SIZE]).collect();
    let report_every = 16 << 20;
    let mut since_report = 0u64;
    let mut block = 0u32;
    while block < nblocks {
        let n = (nblocks - block).min(RUN as u32) as usize;
        let mut pages: Vec<&mut [u8]> = bufs[..n].iter_mut().map(|b| &mut b[..]).collect();
        storage
            .read_run(BufferTag::new(rf, block), &mut pages)
            .map_err(EngineError::buffer(what()))?;
        for (i, page) in bufs[..n].iter_mut().enumerate() {
            let b = block + i as u32;
            if checksums {
                p.pages_reread += reread_until_valid(storage.as_ref(), rf, b, page)?;
            }
            w.write_all(page).map_err(EngineError::io("write", out))?;
        }
        block += n as u32;
        let bytes = (n * PAGE_SIZE) as u64;
        p.bytes += bytes;
        since_report += bytes;
        if since_report >= report_every {
            since_report = 0;
            p.elapsed = started.elapsed();
            progress(p);
        }
    }
    let file = w
        .into_inner()
        .map_err(|e| EngineError::io("write", out)(e.into_error()))?;
    file.sync_all().map_err(EngineError::io("fsync", out))?;
    Ok(nblocks)
}

/// Read block `block` of `rf` again while its checksum fails (a write in
/// progress); returns the extra reads. An all-zero page is copied as it is
/// (a blank extension, or damage the source has too and recovery treats as
/// in the source).
fn reread_until_valid(
    storage: &dyn bufmgr::StorageBackend,
    rf: RelFork,
    block: u32,
    page: &mut [u8],
) -> Result<u64> {
    let mut rereads = 0;
    loop {
        match bufmgr::page::verify(page, block) {
            Ok(()) | Err(bufmgr::page::Damage::Zeroed) => return Ok(rereads),
            Err(bufmgr::page::Damage::Checksum { stored, computed }) => {
                if rereads >= u64::from(REREADS) {
                    return Err(EngineError::CorruptDataDir {
                        path: storage.path(rf),
                        detail: format!(
                            "backup: block {block} fails its checksum (stored {stored:08x}, \
                             computed {computed:08x}) in {REREADS} reads: the source is damaged"
                        ),
                    });
                }
                std::thread::sleep(Duration::from_millis(1));
                storage
                    .read(BufferTag::new(rf, block), page)
                    .map_err(EngineError::buffer(format!(
                        "backup: reading block {block} of {} again",
                        rf.rel
                    )))?;
                rereads += 1;
            }
        }
    }
}

/// Copy the WAL segments from the one holding `redo` to the one holding
/// `end` (step 5): whole segments before `end`'s, and `end`'s own up to
/// `end`, zero-filled to the segment size (how a segment looks before it
/// is written). Returns the WAL bytes copied from `redo`.
fn copy_wal(db: &Database, target: &Path, redo: Lsn, end: Lsn) -> Result<u64> {
    let c = db.core();
    let fs = c.wal.file_system();
    let size = c.wal.segment_size();
    let (src_dir, dst_dir) = (c.wal.dir().to_path_buf(), wal::segment::wal_dir(target));
    let first = redo.0 - redo.0 % size;
    let last = end.0 - end.0 % size;
    let mut buf = vec![0u8; 1 << 20];
    let mut start = first;
    while start <= last {
        let name = wal::segment::segment_file_name(Lsn(start));
        let (src, dst) = (src_dir.join(&name), dst_dir.join(&name));
        let upto = if start == last { end.0 - start } else { size };
        let from = fs
            .open(&src, false, false)
            .map_err(EngineError::io("open", &src))?;
        let to = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dst)
            .map_err(EngineError::io("create", &dst))?;
        to.set_len(size).map_err(EngineError::io("extend", &dst))?;
        let mut off = 0u64;
        let mut w = BufWriter::with_capacity(buf.len(), &to);
        while off < upto {
            let n = ((upto - off) as usize).min(buf.len());
            from.read_exact_at(&mut buf[..n], off)
                .map_err(EngineError::io("read", &src))?;
            w.write_all(&buf[..n])
                .map_err(EngineError::io("write", &dst))?;
            off += n as u64;
        }
        w.flush().map_err(EngineError::io("write", &dst))?;
        drop(w);
        to.sync_all().map_err(EngineError::io("fsync", &dst))?;
        start += size;
    }
    Ok(end.0 - redo.0)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = File::create(path).map_err(EngineError::io("create", path))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(EngineError::io("write", path))
}
