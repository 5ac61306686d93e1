//! [`ObservedStorage`]: a pass-through backend that tells an observer about
//! reads and writes.

use std::path::PathBuf;
use std::sync::Arc;

use super::{AsyncRead, PendingReads, ReadRequest, StorageBackend, WriteRequest};
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
///
/// The batched calls are passed on as batches (so an io_uring backend
/// underneath keeps its batches and its asynchronous stream reads): every
/// page of a batch is observed before it is written, and after it is read
/// (for a run or a submitted request: each of its pages once the whole
/// request has succeeded; a failed one is not observed).
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

impl<O: StorageObserver + 'static> StorageBackend for ObservedStorage<O> {
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
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> Result<()> {
        self.inner.read_run(tag, pages)?;
        observe_run(&*self.observer, tag, pages.len());
        Ok(())
    }
    fn read_batch(&self, reqs: &mut [ReadRequest<'_>]) -> Vec<Result<()>> {
        let results = self.inner.read_batch(reqs);
        for (r, req) in results.iter().zip(reqs.iter()) {
            if r.is_ok() {
                self.observer.on_read(req.tag);
            }
        }
        results
    }
    fn write_batch(&self, reqs: &[WriteRequest<'_>]) -> Vec<Result<()>> {
        for r in reqs {
            self.observer.on_write(r.tag, r.page);
        }
        self.inner.write_batch(reqs)
    }
    unsafe fn submit_reads(&self, reqs: Vec<AsyncRead>) -> Box<dyn PendingReads> {
        let runs = reqs.iter().map(|r| (r.tag, r.pages.len())).collect();
        // SAFETY: our caller's contract, passed on unchanged.
        let inner = unsafe { self.inner.submit_reads(reqs) };
        Box::new(ObservedReads {
            inner,
            runs,
            observer: Arc::clone(&self.observer),
        })
    }
}

/// `on_read` for each of the `n` blocks from `tag`.
fn observe_run<O: StorageObserver>(observer: &O, tag: BufferTag, n: usize) {
    for i in 0..n {
        observer.on_read(BufferTag {
            block: tag.block + i as BlockNumber,
            ..tag
        });
    }
}

/// Reads submitted through [`ObservedStorage`]: observed at the wait.
struct ObservedReads<O: StorageObserver> {
    inner: Box<dyn PendingReads>,
    /// Per request: its first block and length.
    runs: Vec<(BufferTag, usize)>,
    observer: Arc<O>,
}

impl<O: StorageObserver> PendingReads for ObservedReads<O> {
    fn wait(self: Box<Self>) -> Vec<Result<()>> {
        let results = self.inner.wait();
        for (r, &(tag, n)) in results.iter().zip(&self.runs) {
            if r.is_ok() {
                observe_run(&*self.observer, tag, n);
            }
        }
        results
    }
}
