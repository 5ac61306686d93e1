//! Reads per second of the storage backends, side by side: random 8 KiB
//! reads of a file already in the page cache (FileStorage, UringStorage one
//! at a time, UringStorage in batches of 32), and sequential runs of 16
//! blocks (`read_run`) against one-block reads; each buffered and with
//! O_DIRECT.
//!
//! `cargo run --release -p bufmgr --example io_rates [-- MIB SECS DIR]`
//! (default: a 256 MiB file, 1 s per figure, a directory under `target/`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bufmgr::{
    AlignedBuf, BlockNumber, BufferTag, FileStorage, PAGE_SIZE, ReadRequest, RelFork, RelId,
    StorageBackend, UringStorage,
};

const REL: RelFork = RelFork::main(RelId(1));

/// Calls `f` (which reads `n` pages) until `secs` have passed: pages/s.
fn rate(secs: f64, mut f: impl FnMut() -> usize) -> f64 {
    let start = Instant::now();
    let mut pages = 0;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        pages += f();
    }
    pages as f64 / start.elapsed().as_secs_f64()
}

fn fmt(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else {
        format!("{:.0}k", x / 1e3)
    }
}

/// A tiny xorshift: the benchmark should not depend on `rand`.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let secs: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let dir = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/io_rates"));
    std::fs::create_dir_all(&dir).unwrap();
    let nblocks = (mib as usize * 1024 * 1024 / PAGE_SIZE) as BlockNumber;
    {
        let s = FileStorage::open(&dir).unwrap();
        s.create(REL).unwrap();
        let have = s.nblocks(REL).unwrap();
        let mut p = AlignedBuf::zeroed(PAGE_SIZE);
        for b in have..nblocks {
            p[..4].copy_from_slice(&b.to_le_bytes());
            s.write(BufferTag::new(REL, b), &p).unwrap();
        }
        s.sync_all().unwrap();
    }
    println!(
        "file {} MiB ({nblocks} blocks) in {}; {secs} s per figure; pages/s",
        mib,
        dir.display()
    );
    println!(
        "{:<10} {:>12} {:>12} {:>14} {:>14} {:>14} {:>14}",
        "files",
        "sync rand",
        "uring rand",
        "uring batch32",
        "sync 1-block",
        "sync run16",
        "uring run16"
    );
    for direct in [false, true] {
        let file: Arc<dyn StorageBackend> = match FileStorage::open_with(&dir, direct) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                println!("O_DIRECT: skipped: {e}");
                continue;
            }
        };
        let uring: Option<Arc<dyn StorageBackend>> = match UringStorage::open(&dir, direct) {
            Ok(s) => Some(Arc::new(s)),
            Err(e) => {
                println!("io_uring: skipped: {e}");
                None
            }
        };
        // Warm the page cache (buffered) once.
        if !direct {
            let mut bufs: Vec<AlignedBuf> =
                (0..16).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect();
            let mut b = 0;
            while b + 16 <= nblocks {
                let mut run: Vec<&mut [u8]> = bufs.iter_mut().map(|x| &mut x[..]).collect();
                file.read_run(BufferTag::new(REL, b), &mut run).unwrap();
                b += 16;
            }
        }
        let mut page = AlignedBuf::zeroed(PAGE_SIZE);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut random_one = |s: &dyn StorageBackend| {
            let mut rng = Rng(rng.0 ^ 0x55);
            rate(secs, || {
                let b = rng.below(nblocks);
                s.read(BufferTag::new(REL, b), &mut page).unwrap();
                assert_eq!(page[..4], b.to_le_bytes());
                1
            })
        };
        let sync_rand = random_one(&*file);
        let uring_rand = uring.as_deref().map(&mut random_one);
        let uring_batch = uring.as_deref().map(|s| {
            let mut bufs: Vec<AlignedBuf> =
                (0..32).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect();
            rate(secs, || {
                let mut reqs: Vec<ReadRequest<'_>> = bufs
                    .iter_mut()
                    .map(|p| ReadRequest {
                        tag: BufferTag::new(REL, rng.below(nblocks)),
                        page: p,
                    })
                    .collect();
                assert!(s.read_batch(&mut reqs).iter().all(|r| r.is_ok()));
                32
            })
        });
        let mut seq_start = 0;
        let mut next_run = || {
            let b = seq_start;
            seq_start = (seq_start + 16) % (nblocks - 16);
            b
        };
        let mut bufs: Vec<AlignedBuf> = (0..16).map(|_| AlignedBuf::zeroed(PAGE_SIZE)).collect();
        let sync_one = rate(secs, || {
            let b = next_run();
            for (i, p) in bufs.iter_mut().enumerate() {
                file.read(BufferTag::new(REL, b + i as BlockNumber), p)
                    .unwrap();
            }
            16
        });
        let mut run_rate = |s: &dyn StorageBackend| {
            rate(secs, || {
                let b = next_run();
                let mut run: Vec<&mut [u8]> = bufs.iter_mut().map(|x| &mut x[..]).collect();
                s.read_run(BufferTag::new(REL, b), &mut run).unwrap();
                assert_eq!(bufs[15][..4], (b + 15).to_le_bytes());
                16
            })
        };
        let sync_run = run_rate(&*file);
        let uring_run = uring.as_deref().map(&mut run_rate);
        let opt = |x: Option<f64>| x.map_or("-".into(), fmt);
        println!(
            "{:<10} {:>12} {:>12} {:>14} {:>14} {:>14} {:>14}",
            if direct { "O_DIRECT" } else { "buffered" },
            fmt(sync_rand),
            opt(uring_rand),
            opt(uring_batch),
            fmt(sync_one),
            fmt(sync_run),
            opt(uring_run)
        );
    }
}
