//! `bench`: run the scenarios of bench/SCENARIOS.md on the engine and the buffer
//! pool.
//!
//! `bench <scenario> [options]` runs one scenario; `bench all` runs every
//! scenario one after the other; `bench [options]` with no scenario runs the
//! default comparison (`scan-resistance` and `index-residency`, the clock,
//! HOT/COOL and probation side by side, at a 32 MiB pool) and ends with
//! what differs beyond run-to-run noise and what does not; `--full` prints
//! the scenarios' whole tables too. With `--json`, `all` and the default run write
//! every report into one file as `{"scenarios": [...]}`; `--svg DIR` writes
//! the plots. `--trace FILE` records every measured run into a file of its
//! own (in `all` and the default run with the scenario in its name; the
//! scenarios that cannot record refuse it, and `all` runs those untraced).
//! See the crate README for the options.

use std::process::ExitCode;
use std::time::Instant;

use bench::common::{self, Report};
use bench::scenarios::{ScenarioKind, default_run};
use bench::{CommonArgs, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "bench",
    about = "Buffer-pool scenarios (bench/SCENARIOS.md): one row per configuration, side by side",
    long_about = None
)]
struct Cli {
    /// The scenario to run; none runs the default comparison (scan-resistance
    /// and index-residency, the three evictors side by side, 32 MiB pool,
    /// about a minute).
    #[command(subcommand)]
    command: Option<Command>,
    /// In the default run, print each scenario's whole tables too (they are
    /// always in `--json FILE`); a scenario run always prints them.
    #[arg(long)]
    full: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Every scenario, one after the other, each with its default matrix
    All,
    /// Replay a recorded trace through several replacement policies and
    /// compare their hit ratios (options of its own: `bench replay --help`)
    Replay(Box<bench::replay::ReplayArgs>),
    /// Step through a trace (or a built-in demo) on a tiny pool, one access
    /// and one decision of the evictor at a time (`bench step --help`)
    Step(Box<bench::step::StepArgs>),
    /// Write an engine trace in a public format (libCacheSim's
    /// oracleGeneral, or CSV) for other simulators (`bench trace-export --help`)
    TraceExport(Box<bench::replay::ExportArgs>),
    /// Write a synthetic engine trace (a skewed relation and sequential
    /// scans of another) of any length, for replays (`bench trace-gen --help`)
    TraceGen(Box<bench::tracegen::GenArgs>),
    #[command(flatten)]
    Scenario(ScenarioKind),
}

fn write_plots(common: &CommonArgs, reports: &[Box<dyn Report>]) -> Result<()> {
    if let Some(dir) = &common.svg {
        let plots: Vec<_> = reports.iter().flat_map(|r| r.svg_plots()).collect();
        if plots.is_empty() {
            println!("no plots for this run");
        }
        for p in common::write_svgs(dir, &plots)? {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<()> {
    let started = Instant::now();
    if cli.full && cli.command.is_some() {
        return Err(bench::BenchError::Config(
            "--full is an option of the default run (no scenario named); a scenario always \
             prints its whole tables"
                .into(),
        ));
    }
    match &cli.command {
        Some(Command::Replay(a)) => return bench::replay::main(a),
        Some(Command::Step(a)) => return bench::step::main(a),
        Some(Command::TraceExport(a)) => return bench::replay::export_main(a),
        Some(Command::TraceGen(a)) => return bench::tracegen::main(a),
        Some(Command::Scenario(kind)) => {
            let kind = *kind;
            let settings = kind.settings(&cli.common)?;
            let report = kind.run(&settings)?;
            write_plots(&cli.common, &[report])?;
        }
        Some(Command::All) => {
            let mut reports: Vec<Box<dyn Report>> = Vec::new();
            for kind in ScenarioKind::all() {
                // Under --trace each scenario's files carry its name.
                let mut settings = kind.settings(&cli.common)?.trace_with_part(kind.name());
                // One file for the whole run, written below.
                settings.json = None;
                if let (Some(_), Some(why)) = (&settings.trace, kind.trace_refusal()) {
                    println!("{}: run without --trace: {why}", kind.name());
                    settings.trace = None;
                }
                if let (Some(_), Some(why)) =
                    (settings.measures.report_interval, kind.interval_refusal())
                {
                    println!("{}: run without --report-interval: {why}", kind.name());
                    settings.measures.report_interval = None;
                }
                let t = Instant::now();
                reports.push(kind.run(&settings)?);
                println!("{} took {:.1} s\n", kind.name(), t.elapsed().as_secs_f64());
            }
            if let Some(path) = &cli.common.json {
                let all = serde_json::json!({
                    "scenarios": reports.iter().map(|r| r.to_json()).collect::<Vec<_>>()
                });
                common::write_json(path, &all)?;
                println!("wrote {}", path.display());
            }
            write_plots(&cli.common, &reports)?;
        }
        None => {
            default_run::run(&cli.common, cli.full)?;
        }
    }
    println!("wall time: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The command line, with the scenarios' options refused after `replay`,
/// `step` and `trace-export`: they are global (they may follow a scenario's name), so clap
/// would accept them there too, and they would be silently ignored. (The
/// tools' `--pool-pages`, `--threads`, `--json` and `--svg` share the
/// scenarios' names and so their value types: clap hands a tool's values
/// up to the global option of the same name.)
fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    const TOOLS: [&str; 3] = ["replay", "step", "trace-export"];
    let common = CommonArgs::augment_args(clap::Command::new("bench"));
    let own = |tool: &str| {
        Cli::command()
            .find_subcommand(tool)
            .map(|c| {
                c.get_arguments()
                    .map(|a| a.get_id().clone())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    // The global options would reach the tools' `--help` too: each tool
    // gets a hidden copy of its own (which clap's propagation then skips).
    let mut command = Cli::command();
    for tool in TOOLS {
        let own = own(tool);
        command = command.mut_subcommand(tool, |mut c| {
            for arg in common.get_arguments() {
                if !own.contains(arg.get_id()) {
                    c = c.arg(arg.clone().global(false).hide(true));
                }
            }
            c
        });
    }
    let matches = command.try_get_matches_from_mut(args)?;
    if let Some((tool, sub)) = matches.subcommand()
        && TOOLS.contains(&tool)
    {
        let own = own(tool);
        for arg in common.get_arguments() {
            let id = arg.get_id();
            if !own.contains(id)
                && sub.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
            {
                let name = arg.get_long().unwrap_or(id.as_str());
                return Err(command.error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "--{name} is an option of the scenarios; `bench {tool}` does not take it"
                    ),
                ));
            }
        }
    }
    Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))
}

fn main() -> ExitCode {
    // Started by `crash-soak` as its child: run the workload until killed.
    if bench::scenarios::crash_soak::run_child_if_asked() {
        return ExitCode::SUCCESS;
    }
    if bench::scenarios::tpcc::crash::run_child_if_asked() {
        return ExitCode::SUCCESS;
    }
    let cli = match parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let tool = match &cli.command {
        Some(Command::Replay(_)) => Some("replay"),
        Some(Command::Step(_)) => Some("step"),
        Some(Command::TraceExport(_)) => Some("trace-export"),
        Some(Command::TraceGen(_)) => Some("trace-gen"),
        _ => None,
    };
    if let Some(tool) = tool {
        return match run(&cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bench {tool}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // `--watch`: this process re-runs the command as the child that draws
    // the view, and prints the child's output when it ends (bench::watch).
    if cli.common.watch && !bench::watch::in_view_child() {
        return bench::watch::run_in_child().unwrap_or_else(|e| {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        });
    }
    let result = if cli.common.watch {
        bench::watch::run_watched(|| run(&cli))
    } else {
        run(&cli)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}
