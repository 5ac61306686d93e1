//! Sequential scan of a relation four times the pool through the bulk-read
//! ring, and a checkpoint of a pool full of dirty pages, for each storage
//! backend, side by side in one run:
//!
//! - raw: the relation file read sequentially in 1 MiB `pread`s (with
//!   `--direct`, `O_DIRECT`: the device's sequential rate), no pool;
//! - `read_buffer`, one block at a time (one synchronous read per miss);
//! - read streams (`pool.read_stream`) of several lookaheads (the most
//!   blocks read ahead) and combined-read sizes, with how many reads were
//!   combined and how large they were (`PoolStats`);
//! - a checkpoint (`flush_all`) of a pool whose every page is dirty: the
//!   batched write-back, one `write_batch` per 32 pages.
//!
//! ```text
//! cargo run --release -p bufmgr --example stream_scan -- [--direct] [--pool N] [--passes N] [--dir DIR]
//! ```
//!
//! Defaults: 4096 buffers (32 MiB), 3 scans per figure (the pool emptied
//! before each), a directory under `target/` (`/tmp` may be a file system
//! that refuses `O_DIRECT`). Without `--direct` the file is in the OS page
//! cache, so this measures the pool and the syscalls; with it, the device.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use bufmgr::{
    AlignedBuf, BufferPool, BufferTag, FileStorage, IoMode, PAGE_SIZE, PoolConfig, RelFork, RelId,
    RingKind, StorageBackend, StreamConfig,
};

const REL: RelFork = RelFork::main(RelId(4242));

struct Args {
    direct: bool,
    buffers: usize,
    passes: usize,
    dir: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        direct: false,
        buffers: 4096,
        passes: 3,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |what: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} needs a number"))
        };
        match arg.as_str() {
            "--direct" => a.direct = true,
            "--pool" => a.buffers = num("--pool"),
            "--passes" => a.passes = num("--passes"),
            "--dir" => a.dir = it.next().map(Into::into),
            other => {
                panic!("unknown argument {other:?} (--direct, --pool N, --passes N, --dir DIR)")
            }
        }
    }
    a
}

fn main() {
    let a = args();
    let base = a.dir.clone().unwrap_or_else(|| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/stream-scan");
        std::fs::create_dir_all(&p).expect("create the example's directory");
        p
    });
    let tmp = tempfile::tempdir_in(&base).expect("temporary directory");
    let dir = tmp.path();
    let nblocks = (a.buffers * 4) as u32;
    {
        let storage = FileStorage::open(dir).expect("open storage");
        storage.create(REL).expect("create");
        let mut page = vec![0u8; PAGE_SIZE];
        for b in 0..nblocks {
            page[100..104].copy_from_slice(&b.to_le_bytes());
            bufmgr::page::set_checksum(&mut page, b);
            storage.write(BufferTag::new(REL, b), &page).expect("write");
        }
        storage.sync(REL).expect("sync");
    }
    let path = FileStorage::open(dir).expect("open storage").path(REL);
    println!(
        "relation {nblocks} blocks ({} MiB), pool {} buffers ({} MiB), {}, {} scans per figure",
        (nblocks as usize * PAGE_SIZE) >> 20,
        a.buffers,
        (a.buffers * PAGE_SIZE) >> 20,
        if a.direct {
            "O_DIRECT"
        } else {
            "buffered (OS page cache)"
        },
        a.passes
    );
    for mode in [IoMode::Sync, IoMode::IoUring] {
        let storage = match bufmgr::open_storage(dir, mode, a.direct) {
            Ok(s) => s,
            Err(e) => {
                println!("== {mode}: cannot open ({e})");
                continue;
            }
        };
        println!("== {mode} ({})", storage.name());
        // The raw rate before and after the scans: the disk's rate moves,
        // so each scan is compared with their mean.
        let raw_before = raw_rate(&path, a.direct, a.passes);
        let scans = measure_scans(a.buffers, nblocks, a.passes, storage.clone());
        let raw_after = raw_rate(&path, a.direct, a.passes);
        let raw = (raw_before + raw_after) / 2.0;
        println!(
            "{:<44} {raw:>9.0} pages/s  (before {raw_before:.0}, after {raw_after:.0})",
            "raw 1 MiB sequential reads, no pool"
        );
        for scan in &scans {
            println!(
                "{:<44} {:>9.0} pages/s  ({:.2}x raw, {:.2}x read_buffer){}",
                scan.name,
                scan.rate,
                scan.rate / raw,
                scan.rate / scans[0].rate,
                scan.io
            );
        }
        let ckpt = checkpoint_rate(a.buffers, nblocks, storage);
        println!(
            "{:<44} {ckpt:>9.0} pages/s",
            "checkpoint of a pool of dirty pages"
        );
    }
}

/// The file read front to back in 1 MiB reads, `passes` times: pages/s.
fn raw_rate(path: &std::path::Path, direct: bool, passes: usize) -> f64 {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    if direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    let file: File = opts.open(path).expect("open the relation file");
    let len = file.metadata().expect("metadata").len();
    let mut buf = AlignedBuf::zeroed(1 << 20);
    let t = Instant::now();
    for _ in 0..passes {
        let mut off = 0;
        while off < len {
            let n = file.read_at(&mut buf, off).expect("read");
            assert!(n > 0, "read past the end at {off}");
            off += n as u64;
        }
    }
    (len as usize / PAGE_SIZE * passes) as f64 / t.elapsed().as_secs_f64()
}

/// One scan's figure: pages/s, and how its reads went to storage.
struct Scan {
    name: String,
    rate: f64,
    io: String,
}

fn measure_scans(
    buffers: usize,
    nblocks: u32,
    passes: usize,
    storage: Arc<dyn StorageBackend>,
) -> Vec<Scan> {
    let pool = BufferPool::new(PoolConfig::new(buffers).bgwriter(None), storage).expect("pool");
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
    let run = |name: String, f: &dyn Fn()| {
        let mut secs = 0.0;
        let before = pool.stats();
        for _ in 0..passes {
            pool.evict_all().unwrap();
            let t = Instant::now();
            f();
            secs += t.elapsed().as_secs_f64();
        }
        let d = pool.stats().since(&before).totals();
        let io = if d.combined_reads > 0 {
            format!(
                "  [{} reads: {} combined, {:.1} blocks each]",
                d.reads,
                d.combined_reads,
                d.combined_read_blocks as f64 / d.combined_reads as f64
            )
        } else {
            format!("  [{} reads, none combined]", d.reads)
        };
        Scan {
            name,
            rate: (nblocks as usize * passes) as f64 / secs,
            io,
        }
    };
    let mut scans = vec![run("read_buffer, one block at a time".into(), &by_block)];
    for (lookahead, combine) in [
        (16, 16),
        (32, 16),
        (64, 16),
        (128, 16),
        (128, 32),
        (256, 32),
    ] {
        let config = StreamConfig::default()
            .lookahead(lookahead)
            .io_combine(combine);
        scans.push(run(
            format!("read stream (lookahead {lookahead}, combine {combine})"),
            &|| streamed(config),
        ));
    }
    scans
}

/// A pool of `buffers` pages of the relation, every one dirtied, written by
/// one `flush_all` (the checkpoint's batched write-back): pages/s.
fn checkpoint_rate(buffers: usize, nblocks: u32, storage: Arc<dyn StorageBackend>) -> f64 {
    // One partition: one thread fills seven eighths of the pool, and none of
    // it may be evicted (written) before the checkpoint.
    let pool = BufferPool::new(
        PoolConfig::new(buffers).partitions(1).bgwriter(None),
        storage,
    )
    .expect("pool");
    let n = (buffers as u32 - buffers as u32 / 8).min(nblocks);
    let mut rates = Vec::new();
    for round in 0..3u32 {
        for b in 0..n {
            let mut g = pool.read_buffer(REL, b, None).unwrap().lock_exclusive();
            g[200..204].copy_from_slice(&round.to_le_bytes());
            g.mark_dirty();
        }
        let t = Instant::now();
        let written = pool.flush_all(false).unwrap();
        rates.push(written as f64 / t.elapsed().as_secs_f64());
        assert_eq!(written, n as usize);
    }
    rates.sort_by(f64::total_cmp);
    rates[1]
}
