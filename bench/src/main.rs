//! `bench`: run the scenarios of SCENARIOS.md against the buffer pool.
//!
//! `bench <scenario> [options]` runs one scenario; `bench [options]` with no
//! scenario runs the short default comparison (`sweep` then `ticks` with
//! 2-second windows) and, with `--json`, writes both reports into one file
//! as `{"scenarios": [...]}`. See the crate README for the options.

use std::process::ExitCode;
use std::time::Instant;

use bench::common::Report;
use bench::scenarios::{self, ScenarioKind};
use bench::{CommonArgs, Result};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "bench",
    about = "Buffer-pool scenarios (SCENARIOS.md): one row per configuration, side by side",
    long_about = None
)]
struct Cli {
    /// The scenario to run; none runs a short comparison of sweep and ticks.
    #[command(subcommand)]
    scenario: Option<ScenarioKind>,
    #[command(flatten)]
    common: CommonArgs,
}

fn run(cli: &Cli) -> Result<()> {
    let started = Instant::now();
    match cli.scenario {
        Some(kind) => {
            let settings = cli.common.resolve(&kind.defaults())?;
            kind.run(&settings)?;
        }
        None => {
            let mut reports: Vec<Box<dyn Report>> = Vec::new();
            for kind in scenarios::DEFAULT_RUN {
                let mut settings = cli.common.resolve(&kind.default_run_defaults())?;
                // One file for the whole run, written below.
                settings.json = None;
                let t = Instant::now();
                reports.push(kind.run(&settings)?);
                println!("{} took {:.1} s\n", kind.name(), t.elapsed().as_secs_f64());
            }
            if let Some(path) = &cli.common.json {
                let all = serde_json::json!({
                    "scenarios": reports.iter().map(|r| r.to_json()).collect::<Vec<_>>()
                });
                bench::common::write_json(path, &all)?;
                println!("wrote {}", path.display());
            }
        }
    }
    println!("wall time: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}
