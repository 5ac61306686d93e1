//! The one data-set cache: a database directory built once and reused
//! while the stamp written last into it equals the key it is wanted with.
//!
//! The key is everything the data depends on: a format version, the
//! scenario and its scale, the rows of each table and the build settings
//! that are fixed when the directory is created (page checksums). The
//! stamp adds what the engine builds with those settings (see [`stamp`]):
//! the B-tree format new indexes get, so a data set whose indexes an
//! older engine built in another layout is rebuilt, as a user's fresh
//! build would be, rather than measured in the old layout. A
//! missing, unreadable or different stamp means the directory is emptied
//! and built again. [`crate::scenarios::tables::ensure_db`] (pgbench-like
//! databases) and [`crate::dataset::ensure`] (the hand-made data sets) are
//! two specs over this mechanism, each with its own stamp file, key and
//! build options.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use engine::{Database, Options};

use crate::dirs::{io_error, remove_dir};
use crate::error::{BenchError, Result};

/// How a cached data set is recognised and built.
#[derive(Clone, Debug)]
pub struct Spec<'a> {
    pub dir: &'a Path,
    /// The stamp's file name inside `dir`.
    pub stamp_file: &'a str,
    /// The stamp a reusable directory holds.
    pub key: serde_json::Value,
    /// The options the database is created with.
    pub options: Options,
}

/// A cached data set ready to be opened.
#[derive(Clone, Debug, PartialEq)]
pub struct Cached {
    pub dir: PathBuf,
    /// A stamp equal to the key was found: nothing was built.
    pub reused: bool,
    /// The directory existed (with another stamp or none) and was emptied.
    pub replaced: bool,
    /// Seconds the build took (0 when reused).
    pub build_secs: f64,
}

/// The stamp in `dir`, if there is a readable one.
pub fn read_stamp(dir: &Path, stamp_file: &str) -> Option<serde_json::Value> {
    let text = fs::read_to_string(dir.join(stamp_file)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The stamp a reusable directory of `spec` holds: its key (an object)
/// with the index layout this engine gives new indexes under
/// `spec.options`: `index_format`, the B-tree meta format version of a
/// new non-unique index ([`btree::NEWEST_FORMAT`], posting lists when
/// `index_deduplication`), and `index_deduplication`. A key that is not
/// an object is kept whole under `key`.
pub fn stamp(spec: &Spec) -> serde_json::Value {
    let mut map = match &spec.key {
        serde_json::Value::Object(m) => m.clone(),
        other => {
            let mut m = serde_json::Map::new();
            m.insert("key".into(), other.clone());
            m
        }
    };
    map.insert("index_format".into(), btree::NEWEST_FORMAT.into());
    map.insert(
        "index_deduplication".into(),
        spec.options.index_deduplication.into(),
    );
    serde_json::Value::Object(map)
}

/// Make sure `spec.dir` holds the data set `spec.key` names: reuse it if
/// its stamp equals [`stamp`]`(spec)` and this engine reads its data directory
/// format (the `VERSION` file: a data set built before a format change is
/// rebuilt, not refused at open); else empty the directory, create a database
/// there with `spec.options`, run `build` and then `settle` (which sets the
/// hint bits and checks what was built), checkpoint, close, and write the
/// stamp last (through a temporary file, so a half-written stamp never
/// names a database).
pub fn ensure(
    spec: &Spec,
    build: impl FnOnce(&Database) -> Result<()>,
    settle: impl FnOnce(&Database) -> Result<()>,
) -> Result<Cached> {
    let dir = spec.dir;
    let want = stamp(spec);
    let readable = engine::datadir::read_stamp(&dir.join(engine::datadir::VERSION_FILE)).is_ok();
    if readable && read_stamp(dir, spec.stamp_file).as_ref() == Some(&want) {
        return Ok(Cached {
            dir: dir.to_path_buf(),
            reused: true,
            replaced: false,
            build_secs: 0.0,
        });
    }
    let started = Instant::now();
    let replaced = dir.exists();
    remove_dir(dir)?;
    fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    let db = Database::open(dir, spec.options.clone())?;
    build(&db)?;
    settle(&db)?;
    db.checkpoint()?;
    db.close()?;
    write_stamp(dir, spec.stamp_file, &want)?;
    Ok(Cached {
        dir: dir.to_path_buf(),
        reused: false,
        replaced,
        build_secs: started.elapsed().as_secs_f64(),
    })
}

fn write_stamp(dir: &Path, stamp_file: &str, key: &serde_json::Value) -> Result<()> {
    let tmp = dir.join(format!("{stamp_file}.tmp"));
    let text = serde_json::to_string_pretty(key)
        .map_err(|e| BenchError::Data(format!("the stamp of {}: {e}", dir.display())))?;
    fs::write(&tmp, text + "\n").map_err(io_error("write", &tmp))?;
    let path = dir.join(stamp_file);
    fs::rename(&tmp, &path).map_err(io_error("rename", &path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn spec<'a>(dir: &'a Path, key: serde_json::Value) -> Spec<'a> {
        Spec {
            dir,
            stamp_file: "STAMP.json",
            key,
            options: Options::new().pool_buffers(64),
        }
    }

    /// A build that creates nothing and counts its calls in `builds`.
    fn counting(builds: &Cell<u32>) -> impl Fn(&Database) -> Result<()> + Copy + '_ {
        |_| {
            builds.set(builds.get() + 1);
            Ok(())
        }
    }

    #[test]
    fn a_data_set_is_built_once_and_rebuilt_when_its_key_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set");
        let builds = Cell::new(0);
        let build = |db: &Database| {
            builds.set(builds.get() + 1);
            db.create_table("t", vec![engine::Column::new("a", engine::ColumnType::I64)])?;
            Ok(())
        };
        let key = |checksums: bool| serde_json::json!({ "format": 1, "checksums": checksums });
        let first = ensure(&spec(&dir, key(true)), build, |_| Ok(())).unwrap();
        assert!(!first.reused && !first.replaced);
        let again = ensure(&spec(&dir, key(true)), build, |_| Ok(())).unwrap();
        assert!(again.reused);
        assert_eq!(builds.get(), 1);
        let other = ensure(&spec(&dir, key(false)), build, |_| Ok(())).unwrap();
        assert!(!other.reused && other.replaced);
        assert_eq!(builds.get(), 2);
        assert_eq!(
            read_stamp(&dir, "STAMP.json"),
            Some(stamp(&spec(&dir, key(false))))
        );
    }

    #[test]
    fn a_data_set_stamped_without_the_index_format_is_rebuilt_with_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set");
        let builds = Cell::new(0);
        let build = counting(&builds);
        let key = serde_json::json!({ "format": 1, "rows": 10 });
        ensure(&spec(&dir, key.clone()), build, |_| Ok(())).unwrap();
        let written = read_stamp(&dir, "STAMP.json").unwrap();
        assert_eq!(written["index_format"], btree::NEWEST_FORMAT);
        assert_eq!(written["index_deduplication"], true);
        assert_eq!(written["rows"], 10);
        // A stamp as builds before the index format was recorded wrote it.
        write_stamp(&dir, "STAMP.json", &key).unwrap();
        let again = ensure(&spec(&dir, key.clone()), build, |_| Ok(())).unwrap();
        assert!(!again.reused && again.replaced);
        assert_eq!(builds.get(), 2);
        // Another deduplication setting is another data set.
        let mut other = spec(&dir, key);
        other.options = other.options.index_deduplication(false);
        let third = ensure(&other, build, |_| Ok(())).unwrap();
        assert!(!third.reused);
        assert_eq!(builds.get(), 3);
        assert_eq!(
            read_stamp(&dir, "STAMP.json").unwrap()["index_deduplication"],
            false
        );
    }

    #[test]
    fn a_data_set_of_an_older_data_directory_format_is_rebuilt() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set");
        let builds = Cell::new(0);
        let build = counting(&builds);
        let key = serde_json::json!({ "format": 1 });
        ensure(&spec(&dir, key.clone()), build, |_| Ok(())).unwrap();
        let version = dir.join(engine::datadir::VERSION_FILE);
        let text = std::fs::read_to_string(&version).unwrap();
        let current = format!("format {}", engine::datadir::FORMAT_VERSION);
        let older = format!("format {}", engine::datadir::FORMAT_VERSION - 1);
        assert!(text.contains(&current), "{text}");
        std::fs::write(&version, text.replace(&current, &older)).unwrap();
        let again = ensure(&spec(&dir, key), build, |_| Ok(())).unwrap();
        assert!(!again.reused && again.replaced);
        assert_eq!(builds.get(), 2);
        let text = std::fs::read_to_string(&version).unwrap();
        assert!(text.contains(&current), "{text}");
    }

    #[test]
    fn a_failed_build_leaves_no_stamp_to_reuse() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("set");
        let key = serde_json::json!({ "format": 1 });
        let r = ensure(
            &spec(&dir, key.clone()),
            |_| Err(BenchError::Data("the build failed".into())),
            |_| Ok(()),
        );
        assert!(matches!(r, Err(BenchError::Data(_))));
        assert_eq!(read_stamp(&dir, "STAMP.json"), None);
    }
}
