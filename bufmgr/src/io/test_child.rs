//! Test support: running a test's body in a child process of its own, for
//! tests that count this process's descriptors (`/proc/self/fd`) or lower
//! its `RLIMIT_NOFILE`, which every other test of the binary running at once
//! would disturb. The child is this test binary again, running the body as
//! an ignored test.

use std::process::{Command, Output};

/// Descriptors this process has open.
pub(crate) fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Runs the ignored test `name` of this binary in a child process, to its
/// end, whatever that is.
pub(crate) fn run_child(name: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .output()
        .unwrap()
}

/// Runs the ignored test `name` of this binary in a child process and
/// fails with its output unless it passes.
pub(crate) fn in_child(name: &str) {
    let out = run_child(name);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed in its child:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
}
