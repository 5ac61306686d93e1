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
//! The scans are measured a pass at a time, round robin over every figure
//! (raw included), so a change of the disk's rate during the run (a shared
//! machine) touches every figure alike; each figure is the total over the
//! passes.
//!
//! ```text
//! cargo run --release -p bufmgr --example stream_scan -- [--direct] [--pool N] [--passes N] [--dir DIR]
//! ```
//!
//! Defaults: 4096 buffers (32 MiB), 3 passes, a directory under `target/`
//! (`/tmp` may be a file system that refuses `O_DIRECT`). Without
//! `--direct` the file is in the OS page cache, so this measures the pool
//! and the syscalls; with it, the device.

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

const USAGE: &str = "usage: stream_scan [--direct] [--pool BUFFERS] [--passes N] [--dir DIR]";

/// The command line, or what was wrong with it.
fn args() -> Result<Args, String> {
    let mut a = Args {
        direct: false,
        buffers: 4096,
        passes: 3,
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |what: &str, min: usize| -> Result<usize, String> {
            let v = it.next().ok_or(format!("{what} needs a number"))?;
            match v.parse() {
                Ok(n) if n >= min => Ok(n),
                _ => Err(format!("{what} {v:?}: expected a whole number >= {min}")),
            }
        };
        match arg.as_str() {
            "--direct" => a.direct = true,
            // The table is 4x the pool and a stream's ring is capped at
            // pool/8: below 16 buffers there is nothing to stream.
            "--pool" => a.buffers = num("--pool", 16)?,
            "--passes" => a.passes = num("--passes", 1)?,
            "--dir" => a.dir = Some(it.next().ok_or("--dir needs a directory")?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stream_scan: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
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
        "relation {nblocks} blocks ({} MiB), pool {} buffers ({} MiB), {}, {} passes per figure",
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
    let mut pools = Vec::new();
    for mode in [IoMode::Sync, IoMode::IoUring] {
        let files = bufmgr::FileOptions {
            direct_io: a.direct,
            ..Default::default()
        };
        match bufmgr::open_storage(dir, mode, files) {
            Ok(s) => pools.push((mode, s)),
            Err(e) => println!("== {mode}: cannot open ({e})"),
        }
    }
    // Every figure below is taken a pass at a time, round robin (raw, then
    // each scan of each backend, then again): the disk's rate moves on a
    // shared machine, and this way every figure sees the same moves.
    let scans: Vec<(IoMode, BufferPool)> = pools
        .iter()
        .map(|(mode, storage)| {
            let pool = BufferPool::new(PoolConfig::new(a.buffers).bgwriter(None), storage.clone())
                .expect("pool");
            (*mode, pool)
        })
        .collect();
    let mut figures: Vec<Figure> = vec![Figure::new("raw 1 MiB sequential reads, no pool", None)];
    for (i, (mode, _)) in scans.iter().enumerate() {
        figures.push(Figure::new(
            &format!("{mode}: read_buffer, one block at a time"),
            Some((i, None)),
        ));
        for (lookahead, combine) in CONFIGS {
            let config = StreamConfig::default()
                .lookahead(lookahead)
                .io_combine(combine);
            figures.push(Figure::new(
                &format!(
                    "{mode}: read stream (lookahead {lookahead}, combine {combine}){}",
                    if config == StreamConfig::default() {
                        " =default"
                    } else {
                        ""
                    }
                ),
                Some((i, Some(config))),
            ));
        }
    }
    for _ in 0..a.passes {
        for f in figures.iter_mut() {
            match f.what {
                None => {
                    let t = Instant::now();
                    raw_pass(&path, a.direct);
                    f.secs += t.elapsed().as_secs_f64();
                }
                Some((i, config)) => {
                    let pool = &scans[i].1;
                    pool.evict_all().unwrap();
                    let before = pool.stats();
                    let t = Instant::now();
                    match config {
                        None => by_block(pool, nblocks),
                        Some(c) => streamed(pool, nblocks, c),
                    }
                    f.secs += t.elapsed().as_secs_f64();
                    let d = pool.stats().since(&before).totals();
                    f.reads += d.reads;
                    f.combined += d.combined_reads;
                    f.combined_blocks += d.combined_read_blocks;
                }
            }
        }
    }
    let rate = |f: &Figure| (nblocks as usize * a.passes) as f64 / f.secs;
    let raw = rate(&figures[0]);
    println!("{:<60} {raw:>9.0} pages/s", figures[0].name);
    let mut one_block = raw;
    for f in &figures[1..] {
        let r = rate(f);
        if f.what.is_some_and(|(_, c)| c.is_none()) {
            one_block = r;
        }
        let io = if f.combined > 0 {
            format!(
                "[{} reads: {} combined, {:.1} blocks each]",
                f.reads,
                f.combined,
                f.combined_blocks as f64 / f.combined as f64
            )
        } else {
            format!("[{} reads, none combined]", f.reads)
        };
        println!(
            "{:<60} {r:>9.0} pages/s  ({:.2}x raw, {:>5.2}x one block)  {io}",
            f.name,
            r / raw,
            r / one_block
        );
    }
    drop(scans);
    for (mode, storage) in pools {
        let ckpt = checkpoint_rate(a.buffers, nblocks, storage);
        println!(
            "{:<60} {ckpt:>9.0} pages/s",
            format!("{mode}: checkpoint of a pool of dirty pages")
        );
    }
}

/// The read streams measured: (lookahead, io_combine).
const CONFIGS: [(usize, usize); 6] = [
    (16, 16),
    (32, 16),
    (64, 16),
    (128, 16),
    (128, 32),
    (256, 32),
];

/// One figure: what it runs (`None`: raw reads; else the pool's index and
/// `None` for `read_buffer` or the stream's configuration), its time over
/// every pass, and how its reads went to storage.
struct Figure {
    name: String,
    what: Option<(usize, Option<StreamConfig>)>,
    secs: f64,
    reads: u64,
    combined: u64,
    combined_blocks: u64,
}

impl Figure {
    fn new(name: &str, what: Option<(usize, Option<StreamConfig>)>) -> Figure {
        Figure {
            name: name.to_string(),
            what,
            secs: 0.0,
            reads: 0,
            combined: 0,
            combined_blocks: 0,
        }
    }
}

/// The file read front to back once in 1 MiB reads.
fn raw_pass(path: &std::path::Path, direct: bool) {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    if direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    let file: File = opts.open(path).expect("open the relation file");
    let len = file.metadata().expect("metadata").len();
    let mut buf = AlignedBuf::zeroed(1 << 20);
    let mut off = 0;
    while off < len {
        let n = file.read_at(&mut buf, off).expect("read");
        assert!(n > 0, "read past the end at {off}");
        off += n as u64;
    }
}

fn check(block: u32, page: &[u8]) {
    assert_eq!(
        u32::from_le_bytes(page[100..104].try_into().unwrap()),
        block
    );
}

/// Every block through `read_buffer` and the bulk-read ring.
fn by_block(pool: &BufferPool, nblocks: u32) {
    let mut ring = pool.ring(RingKind::BulkRead);
    for b in 0..nblocks {
        let g = pool
            .read_buffer(REL, b, ring.as_mut())
            .unwrap()
            .lock_shared();
        check(b, &g);
    }
}

/// Every block through a read stream and the bulk-read ring.
fn streamed(pool: &BufferPool, nblocks: u32, config: StreamConfig) {
    let mut s = pool.read_stream(REL, 0..nblocks, pool.ring(RingKind::BulkRead), config);
    let mut b = 0;
    while let Some(buf) = s.next_buffer() {
        let g = buf.unwrap().lock_shared();
        check(b, &g);
        b += 1;
    }
    assert_eq!(b, nblocks);
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
