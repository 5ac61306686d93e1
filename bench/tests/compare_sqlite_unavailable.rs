#![cfg(not(feature = "sqlite"))]
//! Without the `sqlite` feature, `bench compare-sqlite` says how to get it
//! and exits non-zero (and `bench all` does not list it).

use std::process::Command;

#[test]
fn compare_sqlite_without_the_feature_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["compare-sqlite", "--quick", "--no-progress", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--features sqlite"), "{err}");
    assert!(
        !bench::ScenarioKind::all()
            .iter()
            .any(|k| k.name() == "compare-sqlite")
    );
}
