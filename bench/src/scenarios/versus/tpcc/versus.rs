//! `bench tpcc --versus-sqlite`: instead of the matrix, the engine and
//! SQLite side by side at 1 and 2 terminals on the same scale, seed and
//! inputs, with the data in memory: the engine's pool holds twice the
//! cached data set's pages, SQLite's page cache twice its file, and both
//! files were just copied (so the operating system's cache holds them).
//! Each cell runs a copy of its database (the engine's cached data set;
//! SQLite's file, loaded once per run with the same population), warms up,
//! runs the measured window and checks conditions 1-4 on its database.
//! Needs a build with `--features sqlite`.

use serde::Serialize;

use super::driver::KindRow;

/// One database at one terminal count.
#[derive(Clone, Debug, Serialize)]
pub struct VersusRow {
    /// `engine` or `sqlite`.
    pub database: &'static str,
    pub threads: usize,
    pub secs: f64,
    pub tpmc: f64,
    pub tps: f64,
    pub transactions: u64,
    /// Each transaction type: counts, retries (the engine's conflicts,
    /// SQLite's busy or locked errors) and latency.
    pub kinds: Vec<KindRow>,
    pub check: String,
    pub check_passed: bool,
}

/// The terminal counts compared.
pub const THREADS: [usize; 2] = [1, 2];

#[cfg(not(feature = "sqlite"))]
pub fn run(
    _settings: &crate::common::Settings,
    _params: &super::Params,
    _data: &super::CachedData,
) -> crate::error::Result<Vec<VersusRow>> {
    Err(crate::error::BenchError::Unavailable(
        "tpcc --versus-sqlite needs SQLite: build with `--features sqlite`".into(),
    ))
}

#[cfg(feature = "sqlite")]
pub use with_sqlite::run;

#[cfg(feature = "sqlite")]
mod with_sqlite {
    use std::path::Path;

    use engine::{Database, Options};

    use super::super::backend::Backend;
    use super::super::driver::{DriveResult, Limit, drive};
    use super::super::engine_side::{EngineBackend, TERMINAL_ATTEMPTS};
    use super::super::spec::TxnKind;
    use super::super::sqlite_side::SqliteBackend;
    use super::super::{CachedData, NAME, Params};
    use super::{THREADS, VersusRow};
    use crate::common::{self, Settings};
    use crate::dataset;
    use crate::error::Result;
    use crate::scenarios::versus::tpcc::driver::KindRow;

    fn row(
        database: &'static str,
        r: &DriveResult,
        check: super::super::checks::CheckReport,
    ) -> VersusRow {
        let summaries = r.latencies.summaries();
        VersusRow {
            database,
            threads: r.threads,
            secs: r.elapsed.as_secs_f64(),
            tpmc: r.tpmc(),
            tps: r.tps(),
            transactions: r.total(),
            kinds: TxnKind::ALL
                .iter()
                .map(|&k| {
                    let c = r.of(k);
                    KindRow {
                        kind: k.name(),
                        done: c.done,
                        rolled_back: c.rolled_back,
                        retries: c.retries,
                        latency: summaries
                            .iter()
                            .find(|(n, _)| *n == k.name())
                            .map(|(_, s)| *s)
                            .unwrap_or_default(),
                    }
                })
                .collect(),
            check: check.describe(),
            check_passed: check.passed(),
        }
    }

    fn cell(
        settings: &Settings,
        params: &Params,
        backend: &dyn Backend,
        threads: usize,
    ) -> Result<VersusRow> {
        let scale = &params.scale;
        common::tell(&format!("{NAME} versus {} t{threads}", backend.name()));
        if !settings.warmup.is_zero() {
            drive(
                backend,
                scale,
                threads,
                Limit::Duration(settings.warmup),
                params.seed ^ 0x5a5a,
            )?;
        }
        let r = drive(
            backend,
            scale,
            threads,
            Limit::Duration(settings.duration),
            params.seed,
        )?;
        Ok(row(backend.name(), &r, backend.check(scale)?))
    }

    fn copy_file(from: &Path, to: &Path) -> Result<()> {
        std::fs::copy(from, to).map_err(crate::dirs::io_error("copy to", to))?;
        Ok(())
    }

    /// The engine and SQLite at [`THREADS`] terminals, data in memory.
    pub fn run(settings: &Settings, params: &Params, data: &CachedData) -> Result<Vec<VersusRow>> {
        let dir = settings.data_dir.join(NAME).join("versus-sqlite");
        crate::dirs::remove_dir(&dir)?;
        std::fs::create_dir_all(&dir).map_err(crate::dirs::io_error("create", &dir))?;
        let loaded = dir.join("loaded.db");
        let started = std::time::Instant::now();
        SqliteBackend::new(&loaded, 64 * 1024).load(&params.scale, &mut |_, _| {})?;
        let file_kib = std::fs::metadata(&loaded)
            .map_err(crate::dirs::io_error("stat", &loaded))?
            .len()
            / 1024;
        common::say(&format!(
            "== {NAME} --versus-sqlite: SQLite {} loaded in {:.1} s ({} MiB); engine pool \
             {} buffers (2 x its data)",
            super::super::sqlite_side::version(),
            started.elapsed().as_secs_f64(),
            file_kib / 1024,
            data.data_pages * 2
        ));
        let mut rows = Vec::new();
        for threads in THREADS {
            let run_dir = dir.join("engine");
            crate::dirs::remove_dir(&run_dir)?;
            crate::dirs::copy_dir(&data.dir, &run_dir, &["LOCK"])?;
            let opts = Options::new()
                .pool_buffers((data.data_pages as usize * 2).max(64))
                .io(settings.io)
                .checksums(dataset::CHECKSUMS)
                .transaction_attempts(TERMINAL_ATTEMPTS);
            let db = Database::open(&run_dir, opts)?;
            rows.push(cell(
                settings,
                params,
                &EngineBackend::new(db.clone()),
                threads,
            )?);
            db.close()?;

            let run_db = dir.join("run.db");
            super::super::super::compare_sqlite::sqlite_side::remove(&run_db);
            copy_file(&loaded, &run_db)?;
            let cache_kib = i64::try_from(file_kib * 2).unwrap_or(i64::MAX).max(1024);
            rows.push(cell(
                settings,
                params,
                &SqliteBackend::new(&run_db, cache_kib),
                threads,
            )?);
        }
        crate::dirs::remove_dir(&dir)?;
        Ok(rows)
    }
}
