//! Reading the catalog at open (crate README, "Opening" step 6) and the
//! removal of orphaned relation files (catalog rule 3).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bufmgr::{RelFork, RelId};
use parking_lot::{Mutex, RwLock};

use crate::catalog::{CatalogEntry, CatalogState, InvalidIndex, TableHandle};
use crate::database::Core;
use crate::datadir::{self, Recorded};
use crate::drop_lock::DropLock;
use crate::error::{EngineError, ErrorKind, Result};
use crate::reserved::{CATALOG_REL, FIRST_USER_REL};
use crate::schema::Schema;
use crate::stats::TableCounters;
use crate::txn::xact::CommitMode;

impl Core {
    /// Read the catalog with a fresh snapshot; bootstrap it if empty. With
    /// `reset_unlogged` (the last run did not close cleanly), unlogged tables
    /// and their indexes are emptied first.
    /// An index in `damaged` (its file missing or short, found before
    /// recovery), or whose file is missing or does not open as a B-tree, is
    /// opened invalid; a table whose file is missing is an error naming it
    /// (never a new empty file).
    /// `existing`: the directory has been opened before (it has a
    /// `RELSIZES`), so its catalog must have its meta row.
    pub(crate) fn load_catalog(
        &mut self,
        reset_unlogged: bool,
        damaged: &HashMap<RelId, String>,
        existing: bool,
    ) -> Result<()> {
        let snap = self.tm.snapshot();
        let rows = self
            .catalog_heap
            .scan(&snap, &*self.tm, heap::ScanOptions::default())
            .map_err(EngineError::heap("could not read the catalog"))?;
        let mut st = CatalogState {
            next_rel: FIRST_USER_REL.0,
            ..CatalogState::default()
        };
        let mut tables = Vec::new();
        let mut indexes = Vec::new();
        for (tid, bytes) in rows {
            match CatalogEntry::decode(tid, &bytes)? {
                CatalogEntry::Meta { next_rel } => {
                    if st.meta_tid.is_some() {
                        return Err(EngineError::CorruptCatalog {
                            detail: format!("a second meta row at {tid}"),
                        });
                    }
                    st.meta_tid = Some(tid);
                    st.next_rel = st.next_rel.max(next_rel);
                }
                CatalogEntry::Table(info) => {
                    st.next_rel = st.next_rel.max(info.rel.0 + 1);
                    tables.push((tid, info));
                }
                CatalogEntry::Index(info) => {
                    st.next_rel = st.next_rel.max(info.rel.0 + 1);
                    indexes.push((tid, info));
                }
            }
        }
        let mut by_rel: HashMap<RelId, Arc<TableHandle>> = HashMap::new();
        for (catalog_tid, info) in tables {
            if !info.logged && reset_unlogged {
                self.reset_relation(info.rel)?;
            }
            let rf = RelFork::main(info.rel);
            let storage = self.pool.storage();
            let exists = storage.exists(rf).map_err(EngineError::buffer(format!(
                "opening table {:?}",
                info.name
            )))?;
            if !exists {
                return Err(EngineError::CorruptDataDir {
                    path: storage.path(rf),
                    detail: format!(
                        "the file of table {:?} ({}) is missing; the catalog lists the table: \
                         it was deleted while the database was closed",
                        info.name, info.rel
                    ),
                });
            }
            let heap = self.open_heap(info.rel, &info.name, info.logged)?;
            let t = Arc::new(TableHandle {
                info: Schema::new(info, catalog_tid),
                heap,
                dropped: DropLock::new(),
                indexes: RwLock::new(Vec::new()),
                vacuum: Mutex::new(()),
                counters: TableCounters::default(),
            });
            by_rel.insert(t.info.rel, t.clone());
            st.tables.insert(t.info.name.clone(), t);
        }
        for (catalog_tid, info) in indexes {
            let t = by_rel
                .get(&info.table)
                .ok_or_else(|| EngineError::CorruptCatalog {
                    detail: format!(
                        "index {:?} of relation {}, which is no table",
                        info.name, info.table.0
                    ),
                })?;
            let reset = !t.info.logged && reset_unlogged;
            if reset {
                self.reset_relation(info.rel)?;
            }
            let rf = RelFork::main(info.rel);
            let path = self.pool.storage().path(rf);
            let exists = self
                .pool
                .storage()
                .exists(rf)
                .map_err(EngineError::buffer(format!(
                    "opening index {:?}",
                    info.name
                )))?;
            let opened = match damaged.get(&info.rel) {
                Some(reason) => Err(reason.clone()),
                None if !exists => Err(format!("its file {} is missing", path.display())),
                None => match self.open_index(t, info.clone(), catalog_tid, reset) {
                    Ok(ix) => Ok(ix),
                    // Damaged bytes (or a file too short for its meta
                    // page): invalid. The environment failing is an error.
                    Err(e) if matches!(e.kind(), ErrorKind::CorruptData | ErrorKind::BadInput) => {
                        Err(format!("its file {} does not open: {e}", path.display()))
                    }
                    Err(e) => return Err(e),
                },
            };
            match opened {
                Ok(ix) => {
                    t.indexes.write().push(ix.clone());
                    st.indexes.insert(ix.info.name.clone(), ix);
                }
                Err(reason) => {
                    st.invalid_indexes.insert(
                        info.name.clone(),
                        InvalidIndex {
                            table: t.info.name.clone(),
                            info,
                            catalog_tid,
                            reason,
                        },
                    );
                }
            }
        }
        // Catalog rule 2: past every relation file too.
        for rel in self.relation_files()? {
            st.next_rel = st.next_rel.max(rel.0 + 1);
        }
        if st.meta_tid.is_none() {
            if !st.tables.is_empty() || !st.indexes.is_empty() {
                return Err(EngineError::CorruptCatalog {
                    detail: "tables but no meta row".into(),
                });
            }
            if existing {
                return Err(EngineError::CorruptCatalog {
                    detail: format!(
                        "no meta row in the catalog ({}) of a data directory opened before \
                         ({} exists): the catalog or the commit log is damaged",
                        self.pool
                            .storage()
                            .path(RelFork::main(CATALOG_REL))
                            .display(),
                        datadir::RELSIZES_FILE
                    ),
                });
            }
            let txn = self.tm.begin()?;
            let row = CatalogEntry::Meta {
                next_rel: st.next_rel,
            }
            .encode()?;
            let tid = self
                .catalog_heap
                .insert(txn.xid(), &row)
                .map_err(EngineError::heap("could not create the catalog"))?;
            txn.commit_with(CommitMode::Synchronous)?;
            st.meta_tid = Some(tid);
        }
        *self.catalog.write() = st;
        Ok(())
    }

    /// Relation ids of the files in `base/`.
    fn relation_files(&self) -> Result<HashSet<RelId>> {
        let base = self.dir.join("base");
        let mut rels = HashSet::new();
        let entries = match std::fs::read_dir(&base) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(rels),
            Err(e) => return Err(EngineError::io("list", &base)(e)),
        };
        for e in entries {
            let e = e.map_err(EngineError::io("list", &base))?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse::<u32>() {
                rels.insert(RelId(n));
            }
        }
        Ok(rels)
    }

    /// Catalog rule 3, never while the catalog may be damaged: a file the
    /// catalog does not know but `RELSIZES` lists (so a committed CREATE
    /// made it and no DROP took it out) means the catalog lost its row:
    /// an error, and nothing is removed. With no `RELSIZES` (a directory
    /// from before it, or whose first open never finished) nothing is known
    /// about the catalog, so nothing is removed either.
    /// Returns whether it removed any (the open then checkpoints, so that
    /// no later redo replays their drop record over a relation that reuses
    /// the number: an uncommitted CREATE left it unrecorded in the
    /// catalog's `next_rel`).
    pub(crate) fn remove_orphans(&self, recorded: Option<&[Recorded]>) -> Result<bool> {
        let Some(recorded) = recorded else {
            return Ok(false);
        };
        let known: HashSet<RelId> = {
            let st = self.catalog.read();
            st.tables
                .values()
                .map(|t| t.info.rel)
                .chain(st.indexes.values().map(|i| i.info.rel))
                .chain(st.invalid_indexes.values().map(|i| i.info.rel))
                .collect()
        };
        let files = self.relation_files()?;
        for r in recorded {
            let rel = RelId(r.rel);
            if rel >= FIRST_USER_REL && !known.contains(&rel) && files.contains(&rel) {
                return Err(EngineError::CorruptCatalog {
                    detail: format!(
                        "{} {:?} ({rel}, file {}) is recorded in {} but not in the catalog: the \
                         catalog may be damaged; no relation file was removed",
                        r.kind.word(),
                        r.name,
                        self.pool.storage().path(RelFork::main(rel)).display(),
                        datadir::RELSIZES_FILE
                    ),
                });
            }
        }
        let orphans: Vec<RelId> = files
            .into_iter()
            .filter(|rel| *rel >= FIRST_USER_REL && !known.contains(rel))
            .collect();
        if orphans.is_empty() {
            return Ok(false);
        }
        // A durable drop record first, as a DROP logs one: the WAL from the
        // redo point may change these relations' pages (a DROP whose
        // commit was durable and whose own drop record was not), and if
        // this open stops before its checkpoint, the next redo must find
        // the files' removal explained, not a missing file it can never
        // open past.
        crate::invalid_pages::log_drop(&self.wal, &orphans)?;
        for rel in orphans {
            self.pool
                .drop_relation(rel)
                .map_err(EngineError::buffer(format!(
                    "could not remove orphaned {rel}"
                )))?;
        }
        Ok(true)
    }

    /// Empty an unlogged relation (PostgreSQL resets them from their init
    /// fork at the end of crash recovery).
    fn reset_relation(&self, rel: RelId) -> Result<()> {
        let rf = RelFork::main(rel);
        self.pool
            .create_fork(rf)
            .and_then(|_| self.pool.truncate_relation(rf, 0))
            .map_err(EngineError::buffer(format!(
                "could not empty unlogged {rel} after a crash"
            )))
    }
}
