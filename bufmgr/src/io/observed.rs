//! [`ObservedStorage`]: a pass-through backend that tells an observer about
//! reads and writes.

use std::path::PathBuf;
use std::sync::Arc;

use super::StorageBackend;
use crate::error::Result;
use crate::tag::{BlockNumber, BufferTag, RelFork};

/// Hooks called by [`ObservedStorage`] around the calls it passes through.
/// Both default to doing nothing; implement the ones you need.
pub trait StorageObserver: Send + Sync + std::fmt::Debug {
    /// After a successful read of `tag`.
    fn on_read(&self, _tag: BufferTag) {}
    /// Before `page` is written as `tag` (the page LSN is in its first 8 bytes).
    fn on_write(&self, _tag: BufferTag, _page: &[u8]) {}
}

/// A backend that passes every call to another one and tells an observer
/// about reads and writes: for benchmarks that count reads per relation and
/// tests that check an invariant at every write (WAL before data).
#[derive(Debug)]
pub struct ObservedStorage<O: StorageObserver> {
    inner: Arc<dyn StorageBackend>,
    observer: Arc<O>,
}

impl<O: StorageObserver> ObservedStorage<O> {
    pub fn new(inner: Arc<dyn StorageBackend>, observer: Arc<O>) -> ObservedStorage<O> {
        ObservedStorage { inner, observer }
    }

    pub fn observer(&self) -> &Arc<O> {
        &self.observer
    }
}

impl<O: StorageObserver> StorageBackend for ObservedStorage<O> {
    fn name(&self) -> &'static str {
        "observed"
    }
    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: RelFork) -> Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: RelFork) -> Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> Result<()> {
        self.inner.read(tag, page)?;
        self.observer.on_read(tag);
        Ok(())
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> Result<()> {
        self.observer.on_write(tag, page);
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> Result<()> {
        self.inner.sync(rf)
    }
    fn sync_all(&self) -> Result<()> {
        self.inner.sync_all()
    }
    fn unlink(&self, rf: RelFork) -> Result<()> {
        self.inner.unlink(rf)
    }
    fn relations(&self) -> Result<Vec<RelFork>> {
        self.inner.relations()
    }
}
