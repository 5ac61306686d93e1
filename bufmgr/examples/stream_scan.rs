//! Sequential scan of a relation four times the pool: `read_buffer` one
//! block at a time vs a read stream, through the bulk-read ring, in the
//! same run (pages/s).
//!
//! ```text
//! cargo run --release -p bufmgr --example stream_scan -- [pool_buffers] [rounds] [passes] [dir]
//! ```
//!
//! Defaults: 4096 buffers (32 MiB), 3 rounds of each way, each timed over 5
//! scans (the pool emptied before each), a temporary directory. The
//! relation's file is in the OS page cache after it is written, so this
//! measures what the pool and the syscalls cost, not the disk: the stream's
//! gain is from fewer, larger reads (`read_run`; with `FileStorage`'s
//! `preadv` one syscall per run) and fewer trips through the miss path.
//! Until `FileStorage` has its own `preadv`, the second half of the run
//! uses a stand-in here (`PreadvStorage`: `read_run` as one `preadv`).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bufmgr::{
    BufferPool, BufferTag, FileStorage, PAGE_SIZE, PoolConfig, RelFork, RelId, RingKind,
    StorageBackend, StreamConfig,
};

const REL: RelFork = RelFork::main(RelId(4242));

/// `FileStorage` with `read_run` as one `preadv` of the run (what the
/// io_uring / O_DIRECT work adds to `FileStorage` itself).
#[derive(Debug)]
struct PreadvStorage {
    inner: Arc<FileStorage>,
    file: File,
}

impl StorageBackend for PreadvStorage {
    fn name(&self) -> &'static str {
        "preadv-example"
    }
    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: RelFork) -> bufmgr::Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: RelFork) -> bufmgr::Result<u32> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> bufmgr::Result<()> {
        self.inner.read(tag, page)
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> bufmgr::Result<()> {
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: RelFork, nblocks: u32) -> bufmgr::Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.sync(rf)
    }
    fn sync_all(&self) -> bufmgr::Result<()> {
        self.inner.sync_all()
    }
    fn unlink(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.unlink(rf)
    }
    fn relations(&self) -> bufmgr::Result<Vec<RelFork>> {
        self.inner.relations()
    }
    fn read_run(&self, tag: BufferTag, pages: &mut [&mut [u8]]) -> bufmgr::Result<()> {
        let iov: Vec<libc::iovec> = pages
            .iter_mut()
            .map(|p| libc::iovec {
                iov_base: p.as_mut_ptr().cast(),
                iov_len: p.len(),
            })
            .collect();
        let offset = i64::from(tag.block) * PAGE_SIZE as i64;
        // SAFETY: every iovec points to a distinct, live, writable page
        // buffer of `iov_len` bytes, borrowed mutably for this call.
        let n = unsafe {
            libc::preadv(
                self.file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                offset,
            )
        };
        if tag.relfork() != REL || n < 0 || n as usize != pages.len() * PAGE_SIZE {
            // Another fork, an error or a short read: page by page, for the
            // backend's own error.
            for (i, p) in pages.iter_mut().enumerate() {
                self.inner
                    .read(BufferTag::new(tag.relfork(), tag.block + i as u32), p)?;
            }
        }
        Ok(())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let buffers: usize = args
        .first()
        .map_or(4096, |a| a.parse().expect("pool_buffers"));
    let rounds: usize = args.get(1).map_or(3, |a| a.parse().expect("rounds"));
    let passes: usize = args.get(2).map_or(5, |a| a.parse().expect("passes"));
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = args.get(3).map_or(tmp.path().to_path_buf(), Into::into);
    let storage = Arc::new(FileStorage::open(&dir).expect("open storage"));
    let nblocks = (buffers * 4) as u32;

    storage.create(REL).expect("create");
    if storage.nblocks(REL).expect("nblocks") < nblocks {
        let mut page = vec![0u8; PAGE_SIZE];
        for b in 0..nblocks {
            page[100..104].copy_from_slice(&b.to_le_bytes());
            bufmgr::page::set_checksum(&mut page, b);
            storage.write(BufferTag::new(REL, b), &page).expect("write");
        }
        storage.sync(REL).expect("sync");
    }
    let preadv = Arc::new(PreadvStorage {
        file: File::open(storage.path(REL)).expect("open the relation file"),
        inner: storage.clone(),
    });
    for (label, backend) in [
        (
            "FileStorage (read_run = one pread per block)",
            storage as Arc<dyn StorageBackend>,
        ),
        (
            "FileStorage + preadv read_run",
            preadv as Arc<dyn StorageBackend>,
        ),
    ] {
        println!("== {label}");
        measure(buffers, nblocks, rounds, passes, backend);
    }
}

fn measure(
    buffers: usize,
    nblocks: u32,
    rounds: usize,
    passes: usize,
    storage: Arc<dyn StorageBackend>,
) {
    let pool = BufferPool::new(PoolConfig::new(buffers).bgwriter(None), storage).expect("pool");
    println!(
        "pool {buffers} buffers ({} MiB), relation {nblocks} blocks ({} MiB), bulk-read ring {} buffers",
        (buffers * PAGE_SIZE) >> 20,
        (nblocks as usize * PAGE_SIZE) >> 20,
        pool.ring(RingKind::BulkRead).map_or(0, |r| r.len()),
    );

    let check = |block: u32, page: &[u8]| {
        assert_eq!(
            u32::from_le_bytes(page[100..104].try_into().unwrap()),
            block
        );
    };
    let by_block = || {
        let mut ring = pool.ring(RingKind::BulkRead);
        for b in 0..nblocks {
            let g = pool
                .read_buffer(REL, b, ring.as_mut())
                .unwrap()
                .lock_shared();
            check(b, &g);
        }
    };
    let streamed = |config: StreamConfig| {
        let mut s = pool.read_stream(REL, 0..nblocks, pool.ring(RingKind::BulkRead), config);
        let mut b = 0;
        while let Some(buf) = s.next_buffer() {
            let g = buf.unwrap().lock_shared();
            check(b, &g);
            b += 1;
        }
        assert_eq!(b, nblocks);
    };
    let run = |name: &str, f: &dyn Fn()| {
        let reads = pool.stats().totals().reads;
        let mut secs = 0.0;
        for _ in 0..passes {
            pool.evict_all().unwrap();
            let t = Instant::now();
            f();
            secs += t.elapsed().as_secs_f64();
        }
        let read = pool.stats().totals().reads - reads;
        println!(
            "{name:<40} {:>9.0} pages/s  ({read} pages read in {passes} scans, {:.3} s)",
            (nblocks as usize * passes) as f64 / secs,
            secs
        );
    };
    for round in 1..=rounds {
        println!("round {round}");
        run("read_buffer, one block at a time", &by_block);
        run("read stream (lookahead 16, combine 16)", &|| {
            streamed(StreamConfig::default())
        });
        run("read stream (lookahead 31, combine 16)", &|| {
            streamed(StreamConfig::default().lookahead(31))
        });
        run("read stream (lookahead 16, combine 1)", &|| {
            streamed(StreamConfig::default().io_combine(1))
        });
    }
}
