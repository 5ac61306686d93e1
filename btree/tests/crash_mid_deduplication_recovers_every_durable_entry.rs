//! Kill a real child process (SIGKILL) while it fills a deduplicating
//! index: 300 `i64` keys, each taking TIDs in a scattered order, so leaves
//! go through dedup passes (`DEDUP` images), TIDs go into posting lists and
//! split them (`REWRITE_LEAF`), pages split, and a vacuum every few hundred
//! inserts removes TIDs from posting lists. Then recover by replaying the
//! WAL from its start into a pool over the files the child left, and check
//! that every entry the child reported durable (printed only after the
//! `wal.flush` covering it returned) is found, except those the vacuum may
//! have removed, that the leaves hold posting lists, and that `verify` is
//! clean after finishing incomplete splits. Several kill/recover rounds on the
//! same index.
//!
//! The child is this test binary re-executed with `BTREE_CRASH_CHILD` set.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use btree::{AssumeLive, Index, Key, KeyType};
use common::{REL, assert_clean, create, pool_over, replay, wal_config, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use wal::Wal;

const TEST_NAME: &str = "killed_child_mid_deduplication_recovers_every_durable_entry";
const ENV_DIR: &str = "BTREE_CRASH_CHILD";
const ENV_ROUND: &str = "BTREE_CRASH_ROUND";
/// Keys flushed to the WAL together (one fdatasync per group).
const GROUP: u64 = 8;

/// 300 keys, each met again every few hundred inserts.
fn key(n: u64) -> Key {
    Key::I64((n.wrapping_mul(7919) % 300) as i64)
}

/// Distinct TIDs in a scattered order (blocks a permutation of n), so a
/// key's TIDs arrive out of order and land inside its posting lists.
fn tid(n: u64) -> Tid {
    Tid::new(
        (n.wrapping_mul(2_654_435_761) % 1_000_003) as u32 + 1,
        (n % 50) as u16 + 1,
    )
}

/// What the child's vacuums remove.
fn vacuumed(n: u64) -> bool {
    n % 50 == 12
}
/// The child: insert keys forever, printing each group once it is durable.
fn child(dir: &Path, round: u64) -> ! {
    let wal = Arc::new(Wal::open(dir, wal_config()).unwrap());
    let pool = pool_over(dir, 24, Some(wal.clone()));
    pool.create_fork(bufmgr::RelFork::main(REL)).unwrap();
    let index = if pool.nblocks(bufmgr::RelFork::main(REL)).unwrap() == 0 {
        let db = common::Db {
            dir: tempfile::tempdir().unwrap(),
            pool: pool.clone(),
            wal: Some(wal.clone()),
        };
        create(&db, KeyType::I64, false)
    } else {
        Index::open(pool.clone(), Some(wal.clone()), "test_idx", REL).unwrap()
    };
    wal.flush(wal.insert_lsn()).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").unwrap();
    let mut n = round * 1_000_000;
    loop {
        for i in n..n + GROUP {
            index.insert(&key(i), tid(i), &AssumeLive).unwrap();
        }
        if (n / GROUP) % 40 == 39 {
            index.vacuum(|t| t.offset == 13).unwrap();
        }
        wal.flush(wal.insert_lsn()).unwrap();
        for i in n..n + GROUP {
            writeln!(out, "{i}").unwrap();
        }
        out.flush().unwrap();
        n += GROUP;
    }
}

#[test]
fn killed_child_mid_deduplication_recovers_every_durable_entry() {
    if let Ok(dir) = std::env::var(ENV_DIR) {
        let round = std::env::var(ENV_ROUND).unwrap().parse().unwrap();
        child(Path::new(&dir), round);
    }
    within(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = SmallRng::seed_from_u64(11);
        let mut durable: Vec<u64> = Vec::new();
        let mut incomplete_seen = 0;
        for round in 0..4u64 {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
                .env(ENV_DIR, dir.path())
                .env(ENV_ROUND, round.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            let got = Arc::new(Mutex::new(Vec::new()));
            let ready = Arc::new(Mutex::new(false));
            let reader = {
                let (got, ready) = (got.clone(), ready.clone());
                std::thread::spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        // The harness prints "test <name> ... " before the
                        // child's first line, without a newline.
                        if line.ends_with("ready") {
                            *ready.lock().unwrap() = true;
                        } else if let Ok(n) = line.parse::<u64>() {
                            got.lock().unwrap().push(n);
                        }
                    }
                })
            };
            // Wait for the child to start inserting, then kill it at a random moment.
            let t0 = std::time::Instant::now();
            while got.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(100..600)));
            child.kill().unwrap();
            child.wait().unwrap();
            reader.join().unwrap();
            assert!(
                *ready.lock().unwrap(),
                "round {round}: the child never got ready"
            );
            let keys = std::mem::take(&mut *got.lock().unwrap());
            assert!(!keys.is_empty(), "round {round}: no key became durable");
            durable.extend(keys);

            // Recover: replay the whole log over the files the child left.
            let pool = pool_over(dir.path(), 64, None);
            replay(dir.path(), &pool);
            let index = Index::open(pool.clone(), None, "test_idx", REL).unwrap();
            assert!(index.deduplicates());
            for &n in durable.iter().filter(|&&n| !vacuumed(n)) {
                assert!(
                    index.lookup(&key(n)).unwrap().contains(&tid(n)),
                    "round {round}: durable entry {n} lost"
                );
            }
            let mut lists = 0;
            let rf = bufmgr::RelFork::main(REL);
            for block in 1..pool.nblocks(rf).unwrap() {
                let page = pool.read_buffer(rf, block, None).unwrap().lock_shared();
                // A page the killed child extended the relation by for a
                // split whose record never became durable is still all
                // zeros (PostgreSQL's "new" page): no tree links to it.
                if page.iter().all(|&b| b == 0) {
                    continue;
                }
                let tp =
                    btree::page::TreePage::parse(&page, btree::page::PageId { rel: REL, block })
                        .unwrap();
                if tp.is_leaf() {
                    for j in 0..tp.data_len() {
                        lists += usize::from(tp.data(j).unwrap().is_posting());
                    }
                }
            }
            assert!(lists > 0, "round {round}: no posting list on the leaves");
            incomplete_seen += index.finish_incomplete_splits().unwrap();
            assert_clean(index.verify(None).unwrap());
            for &n in durable.iter().filter(|&&n| !vacuumed(n)).step_by(7) {
                assert!(index.lookup(&key(n)).unwrap().contains(&tid(n)));
            }
            pool.flush_all(true).unwrap();
        }
        eprintln!(
            "{} durable entries over 4 rounds; {incomplete_seen} incomplete splits finished at recovery",
            durable.len()
        );
    });
}
