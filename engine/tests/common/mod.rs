//! Shared helpers: open WAL + pool + transaction manager on a directory, and
//! a watchdog that fails a test instead of letting it hang.
#![allow(dead_code)]

pub mod accessors;
pub mod bank;

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

use bufmgr::{BufferPool, FileStorage, PoolConfig, StorageBackend};
use engine::{TransactionManager, next_xid_hint};
use wal::{Wal, WalConfig};

/// Everything a test needs, owned.
#[derive(Debug)]
pub struct Env {
    pub wal: Arc<Wal>,
    pub pool: Arc<BufferPool>,
    pub tm: Arc<TransactionManager>,
}

pub fn wal_config() -> WalConfig {
    WalConfig {
        segment_size: 1 << 20,
        ..WalConfig::default()
    }
}

/// Open on `dir` with a pool of `buffers`; `wrap` may wrap the file storage.
pub fn open_with(
    dir: &Path,
    buffers: usize,
    wrap: impl FnOnce(Arc<Wal>, Arc<dyn StorageBackend>) -> Arc<dyn StorageBackend>,
) -> Env {
    let wal = Arc::new(Wal::open(dir, wal_config()).expect("open WAL"));
    let files: Arc<dyn StorageBackend> = Arc::new(FileStorage::open(dir).expect("open storage"));
    let storage = wrap(wal.clone(), files);
    let pool = Arc::new(
        BufferPool::with_wal(PoolConfig::new(buffers).partitions(1), storage, wal.clone())
            .expect("open pool"),
    );
    let hint = next_xid_hint(&wal);
    let tm = Arc::new(TransactionManager::open(pool.clone(), wal.clone(), hint).expect("open tm"));
    Env { wal, pool, tm }
}

pub fn open(dir: &Path, buffers: usize) -> Env {
    open_with(dir, buffers, |_, s| s)
}

/// Run `f` on its own thread; panic if it takes longer than `limit` or panics.
pub fn watchdog<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(RecvTimeoutError::Timeout) => panic!("watchdog: test still running after {limit:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("watchdog: the test thread panicked"),
    }
}

/// Options for tests: a 64-buffer pool (512 KiB), 1 MiB WAL segments, one
/// partition, **autovacuum off** (tests that count what their own vacuum
/// removed, or replay a seeded sequence of disk writes, must not race a
/// background vacuum; the tests of concurrency and of autovacuum turn it
/// on), the rest as the defaults.
pub fn small_options() -> engine::Options {
    engine::Options::new()
        .pool_buffers(64)
        .wal_segment_size(1 << 20)
        .checkpoint_max_wal_bytes(64 << 20)
        .partitions(engine::Partitions::Count(1))
        .autovacuum(false)
}

/// The columns most tests use: `id i64 not null, name bytes null`.
pub fn two_columns() -> Vec<engine::Column> {
    vec![
        engine::Column::new("id", engine::ColumnType::I64),
        engine::Column::nullable("name", engine::ColumnType::Bytes),
    ]
}

/// A row of [`two_columns`].
pub fn row(id: i64, name: &str) -> engine::Row {
    vec![
        engine::Value::I64(id),
        engine::Value::Bytes(name.as_bytes().to_vec()),
    ]
}

/// The table `t(id, k, name)` of the bulk-load crash tests: its columns.
pub fn id_k_name_columns() -> Vec<engine::Column> {
    vec![
        engine::Column::new("id", engine::ColumnType::I64),
        engine::Column::new("k", engine::ColumnType::I64),
        engine::Column::nullable("name", engine::ColumnType::Text),
    ]
}

/// Row `i` of such a table of `rows` rows: ids a permutation of
/// `0..rows`, `k = id / 10` (ten rows a key), `name` the text of `id / 3`
/// zero-padded to `width` (three rows a name).
pub fn id_k_name_row(i: i64, rows: i64, width: usize) -> engine::Row {
    let id = (i * 7919) % rows;
    vec![
        engine::Value::I64(id),
        engine::Value::I64(id / 10),
        engine::Value::Text(format!("{:0>width$}", id / 3)),
    ]
}

/// After a crash during a load of `rows` rows into `t`: every index of `t`
/// verifies, the table holds none of the rows or all of them, and if all,
/// a sample of ids is found through the primary index and each of
/// `indexes` holds one entry per row. Returns the rows the scan found.
pub fn assert_empty_or_whole(
    db: &engine::Database,
    case: &str,
    rows: i64,
    indexes: &[&str],
) -> usize {
    let v = db.verify_indexes("t").unwrap();
    assert!(v.is_empty(), "{case}: {v:?}");
    let r = db.read().unwrap();
    let n = r.scan("t").unwrap().map(Result::unwrap).count();
    assert!(n == 0 || n == rows as usize, "{case}: {n} rows");
    if n > 0 {
        for id in (0..rows).step_by(37) {
            let found = r.get_by_key("t", "id", &engine::Value::I64(id)).unwrap();
            assert!(found.is_some(), "{case}: id {id}");
        }
        for ix in indexes {
            let all = r
                .index_range(*ix, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                .unwrap()
                .map(Result::unwrap)
                .count();
            assert_eq!(all, rows as usize, "{case}: {ix}");
        }
    }
    n
}

/// The checksum walk and the seeded PRNG live with the crash workload.
#[allow(unused_imports)]
pub use engine::soak::{Rng, every_page_checksum_valid};

/// Run the `#[ignore]`d test `child_test` of this test binary as a child
/// process (the re-exec trick), with env var `dir_var` naming `dir`; read
/// its stdout until it has printed `kill_after` lines `COMMITTED <id>` (the
/// child prints one after each commit returns), kill it with SIGKILL, and
/// return every id it reported, including lines still buffered in the pipe.
/// Panics if the child ends early or takes longer than `limit`.
#[allow(dead_code)]
pub fn committed_before_sigkill(
    child_test: &str,
    dir_var: &str,
    dir: &Path,
    kill_after: usize,
    limit: Duration,
) -> std::collections::BTreeSet<i64> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--ignored", "--nocapture"])
        .env(dir_var, dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut committed = std::collections::BTreeSet::new();
    let started = std::time::Instant::now();
    let note = |line: &str, committed: &mut std::collections::BTreeSet<i64>| {
        if let Some(id) = line.strip_prefix("COMMITTED ") {
            committed.insert(id.parse::<i64>().unwrap());
        }
    };
    while committed.len() < kill_after {
        let line = lines.next().expect("child ended early").unwrap();
        note(&line, &mut committed);
        assert!(started.elapsed() < limit, "child too slow");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    for line in lines {
        note(&line.unwrap(), &mut committed);
    }
    committed
}

/// Descriptors this process has open (entries of `/proc/self/fd`).
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .expect("list /proc/self/fd")
        .count() as u64
}

/// Lower this process's soft `RLIMIT_NOFILE` to `n` (at most the hard
/// limit, which stays). For child processes: it binds every thread.
pub fn limit_descriptors(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass and nothing else.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    assert_eq!(r, 0, "getrlimit: {}", std::io::Error::last_os_error());
    lim.rlim_cur = (n as libc::rlim_t).min(lim.rlim_max);
    // SAFETY: setrlimit reads the struct we pass and nothing else.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// A storage backend for fault tests (used by the clog-read-error tests).
/// Passes everything through, except reads of the commit log while armed.
#[derive(Debug)]
pub struct FailClogReads {
    pub inner: Arc<dyn bufmgr::StorageBackend>,
    pub armed: Arc<std::sync::atomic::AtomicBool>,
}

impl FailClogReads {
    fn check(&self, tag: bufmgr::BufferTag) -> bufmgr::Result<()> {
        if self.armed.load(std::sync::atomic::Ordering::SeqCst)
            && tag.relfork().rel == engine::CLOG_REL
        {
            return Err(bufmgr::Error::io(
                "read",
                tag,
                self.inner.path(tag.relfork()),
                std::io::Error::other("injected read failure of the commit log"),
            ));
        }
        Ok(())
    }
}

impl bufmgr::StorageBackend for FailClogReads {
    fn name(&self) -> &'static str {
        "fail-clog-reads"
    }
    fn path(&self, rf: bufmgr::RelFork) -> std::path::PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: bufmgr::RelFork) -> bufmgr::Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: bufmgr::RelFork) -> bufmgr::Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: bufmgr::RelFork) -> bufmgr::Result<bufmgr::BlockNumber> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: bufmgr::BufferTag, page: &mut [u8]) -> bufmgr::Result<()> {
        self.check(tag)?;
        self.inner.read(tag, page)
    }
    fn write(&self, tag: bufmgr::BufferTag, page: &[u8]) -> bufmgr::Result<()> {
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: bufmgr::RelFork, nblocks: bufmgr::BlockNumber) -> bufmgr::Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: bufmgr::RelFork) -> bufmgr::Result<()> {
        self.inner.sync(rf)
    }
    fn sync_all(&self) -> bufmgr::Result<()> {
        self.inner.sync_all()
    }
    fn unlink(&self, rf: bufmgr::RelFork) -> bufmgr::Result<()> {
        self.inner.unlink(rf)
    }
    fn relations(&self) -> bufmgr::Result<Vec<bufmgr::RelFork>> {
        self.inner.relations()
    }
}

/// A table `name` of `columns` holding `rows` (inserted in one
/// transaction, after `prepare` ran on the new table's database: an index,
/// say), checkpointed and closed, so its pages are on disk to be damaged.
/// Returns the heap file's path and the rows' ids in insert order.
pub fn table_on_disk(
    dir: &Path,
    options: engine::Options,
    name: &str,
    columns: Vec<engine::Column>,
    prepare: impl FnOnce(&engine::Database),
    rows: impl IntoIterator<Item = engine::Row>,
) -> (std::path::PathBuf, Vec<engine::RowId>) {
    let db = engine::Database::open(dir, options).unwrap();
    let info = db.create_table(name, columns).unwrap();
    prepare(&db);
    let t = db.begin().unwrap();
    let rids: Vec<engine::RowId> = rows
        .into_iter()
        .map(|r| t.insert(name, r).unwrap())
        .collect();
    t.commit().unwrap();
    db.checkpoint().unwrap();
    db.close().unwrap();
    (dir.join("base").join(info.rel.0.to_string()), rids)
}

/// Where `needle` first stands in `bytes` (a marker written into a row,
/// found in its file); panics if it is not there.
pub fn position_of(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the marker is in the file")
}

/// A table `victim` (`two_columns`, unique index `victim_id` on `id` if
/// `indexed`) of 300 rows over several pages, named "row NNNN and some
/// bytes" but row 150, named `marker`; checkpointed and closed, so its
/// pages are on disk to be damaged. Returns the heap file's path and the
/// rows' ids in insert order.
pub fn victim_table(
    dir: &Path,
    options: engine::Options,
    marker: &str,
    indexed: bool,
) -> (std::path::PathBuf, Vec<engine::RowId>) {
    let rows = (0..300).map(|i| {
        let name = match i {
            150 => marker.to_string(),
            _ => format!("row {i:04} and some bytes"),
        };
        row(i, &name)
    });
    let prepare = |db: &engine::Database| {
        if indexed {
            db.create_index("victim_id", "victim", "id", true).unwrap();
        }
    };
    table_on_disk(dir, options, "victim", two_columns(), prepare, rows)
}

/// The position on heap `page` of the normal line pointer whose tuple
/// holds byte `at`, and its word.
pub fn line_pointer_of(page: &[u8], at: usize) -> (usize, u32) {
    (0..256)
        .map(|p| p * 4)
        .find_map(|p| {
            let w = u32::from_le_bytes(page[p..p + 4].try_into().unwrap());
            let (off, state, len) = (w & 0x7FFF, (w >> 15) & 3, (w >> 17) & 0x7FFF);
            (state == 1 && len >= 16 && (off as usize) < at && at < (off + len) as usize)
                .then_some((p, w))
        })
        .expect("the tuple's line pointer")
}

/// The `n` of every row of `table` (columns `id`, `n`, `body`) by its
/// `id`, read by an owned scan, each row's `body` checked against
/// `body(id, n)`.
pub fn n_by_id(
    db: &engine::Database,
    table: &str,
    body: impl Fn(i64, i64) -> String,
) -> std::collections::BTreeMap<i64, i64> {
    let r = db.read().unwrap();
    r.scan(table)
        .unwrap()
        .map(|x| {
            let (_, row) = x.unwrap();
            let (id, n) = (row.i64("id").unwrap(), row.i64("n").unwrap());
            assert_eq!(row.text("body").unwrap(), body(id, n), "row {id}");
            (id, n)
        })
        .collect()
}

/// Cut the main file of table `table` to `new_len(its length)` bytes behind
/// the pool's back, after evicting every page (so the next reads go to the
/// file).
pub fn cut_table_file(db: &engine::Database, table: &str, new_len: impl FnOnce(u64) -> u64) {
    let rf = bufmgr::RelFork::main(db.table(table).unwrap().rel);
    let path = db.pool().storage().path(rf);
    db.pool().evict_all().unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(new_len(len))
        .unwrap();
}

/// Every `(id, name)` of a [`two_columns`] table, in scan order.
pub fn scan_id_names(t: &engine::Transaction, table: &str) -> Vec<(i64, Vec<u8>)> {
    t.scan(table)
        .unwrap()
        .map(|r| {
            let (_, r) = r.unwrap();
            (r.i64("id").unwrap(), r.bytes("name").unwrap().to_vec())
        })
        .collect()
}
