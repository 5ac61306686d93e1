//! The run's metadata: what every JSON file the program writes starts with
//! (which source, compiler, kernel and machine produced it, when, and by
//! what command line).

/// The run's metadata, the first field of every JSON file the program
/// writes: the source's git commit (with `-dirty` when the work tree has
/// changes; `null` outside a git checkout), the compiler that built the
/// program, the kernel, the CPU model, the cores this process may use, the
/// time (UTC) and the command line.
pub fn metadata() -> serde_json::Value {
    serde_json::json!({
        "git_commit": git_commit(),
        "rustc": env!("BENCH_RUSTC_VERSION"),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
        "cpu_model": cpu_model(),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "time_utc": utc_now(),
        "command_line": std::env::args().collect::<Vec<_>>(),
    })
}

/// `git rev-parse HEAD` in the current directory, `-dirty` appended when
/// `git status` lists changes to tracked files; `None` if git cannot say.
fn git_commit() -> Option<String> {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = run(&["rev-parse", "HEAD"])?;
    let dirty =
        run(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// The first `model name` of /proc/cpuinfo.
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_of(secs)
}

/// Seconds since 1970 as `YYYY-MM-DDTHH:MM:SSZ` (the civil calendar of
/// Howard Hinnant's `civil_from_days`).
fn utc_of(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_follow_the_civil_calendar() {
        assert_eq!(utc_of(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_of(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc_of(951_825_600), "2000-02-29T12:00:00Z");
    }

    #[test]
    fn the_metadata_names_every_field_a_reader_relies_on() {
        let m = metadata();
        for field in [
            "git_commit",
            "rustc",
            "kernel",
            "cpu_model",
            "cores",
            "time_utc",
            "command_line",
        ] {
            assert!(m.get(field).is_some(), "{field} missing from {m}");
        }
        assert!(m["cores"].as_u64().is_some_and(|c| c >= 1), "{m}");
        assert!(!m["rustc"].as_str().unwrap().is_empty(), "{m}");
    }
}
