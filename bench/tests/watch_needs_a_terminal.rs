//! `--watch` draws on the terminal: with stdout piped it is a clear error,
//! raised before the scenario starts (no data built, nothing run).

use std::process::Command;

#[test]
fn watch_with_stdout_not_a_terminal_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["sweep", "--quick", "--watch", "--data-dir"])
        .arg(dir.path())
        .env_remove(bench::watch::CHILD_ENV)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--watch draws the pool on the terminal, but stdout is not a terminal"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing ran");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no data was built"
    );
}
