//! Directory helpers shared by the data-set caches and the scenarios that
//! measure on a copy of a cached database.

use std::fs;
use std::path::Path;

use crate::error::{BenchError, Result};

/// Turn an `io::Error` of `op` on `path` into the error naming both.
pub fn io_error(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.to_path_buf();
    move |source| BenchError::Io { op, path, source }
}

/// Delete `dir` if it exists.
pub fn remove_dir(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error("remove", dir)(e)),
        _ => Ok(()),
    }
}

/// Copy the directory tree `from` to `to` (which must not exist), without
/// the files named in `skip` (at any depth), fsyncing every file copied so
/// that the kernel does not write the copy back during a measured window
/// (two cores: the flusher would share them with the measurement).
pub fn copy_dir(from: &Path, to: &Path, skip: &[&str]) -> Result<()> {
    fs::create_dir_all(to).map_err(io_error("create", to))?;
    for entry in fs::read_dir(from).map_err(io_error("list", from))? {
        let entry = entry.map_err(io_error("list", from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(io_error("stat", &src))?;
        if kind.is_dir() {
            copy_dir(&src, &dst, skip)?;
        } else if !skip.iter().any(|s| entry.file_name() == *s) {
            fs::copy(&src, &dst).map_err(io_error("copy", &src))?;
            fs::File::open(&dst)
                .and_then(|f| f.sync_all())
                .map_err(io_error("fsync", &dst))?;
        }
    }
    Ok(())
}

/// Bytes of the files under `dir` (0 for what cannot be read).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_holds_every_file_but_the_skipped_ones_at_any_depth() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("from");
        fs::create_dir_all(from.join("base")).unwrap();
        fs::write(from.join("control"), b"abc").unwrap();
        fs::write(from.join("LOCK"), b"").unwrap();
        fs::write(from.join("base").join("1"), b"12345").unwrap();
        fs::write(from.join("base").join("LOCK"), b"x").unwrap();
        let to = d.path().join("to");
        copy_dir(&from, &to, &["LOCK"]).unwrap();
        assert_eq!(fs::read(to.join("control")).unwrap(), b"abc");
        assert_eq!(fs::read(to.join("base").join("1")).unwrap(), b"12345");
        assert!(!to.join("LOCK").exists());
        assert!(!to.join("base").join("LOCK").exists());
        assert_eq!(dir_bytes(&from), 9);
        assert_eq!(dir_bytes(&to), 8);
    }

    #[test]
    fn removing_a_missing_directory_is_no_error_and_a_bad_copy_names_the_path() {
        let d = tempfile::tempdir().unwrap();
        remove_dir(&d.path().join("never")).unwrap();
        let e = copy_dir(&d.path().join("never"), &d.path().join("to"), &[]).unwrap_err();
        assert!(e.to_string().contains("never"), "{e}");
    }
}
