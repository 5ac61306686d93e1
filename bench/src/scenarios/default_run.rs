//! The run with no scenario named: `scan-resistance` and `index-residency`,
//! clock vs HOT/COOL, at a 32 MiB pool so that it takes a minute or two on a
//! 2-core machine including the first build of both data sets; then one
//! side-by-side table and one line saying which design kept more of the hot
//! set and by how much.
//!
//! ```text
//!   scan-resistance  pool 32 MiB: accounts ~73 k rows (hot set ~40%), history ~885 k rows (~4 x pool)
//!                    evictor {clock, hotcool} x ring {on, off} x scan {full, ~1 page/lookup}
//!                    warm-up 1.5 s, window 3 s
//!   index-residency  pool 32 MiB: t 675 k rows (heap ~4.4 x pool), 16 threads, partitions 1,
//!                    3 runs per evictor (ABBA), warm-up 1.5 s, window 2.5 s
//! ```
//!
//! Every common option given on the command line overrides these (e.g.
//! `--pool-mib 128` runs the default comparison at the full scale).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::common::{self, CommonArgs, Report, Table, fmt_rate};
use crate::error::Result;
use crate::scenarios::ScenarioKind;
use crate::scenarios::index_residency::{self, IndexResidencyArgs, IndexResidencyReport};
use crate::scenarios::scan_resistance::{self, ScanResistanceArgs, ScanResistanceReport};

/// Pool of the default run.
pub const POOL_MIB: usize = 32;
const WARMUP: Duration = Duration::from_millis(1500);
const SCAN_WINDOW: Duration = Duration::from_secs(3);
const INDEX_WINDOW: Duration = Duration::from_millis(2500);
const INDEX_RUNS: usize = 3;

/// The one-line verdict and the figures behind it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// HOT/COOL's mean hot-set residency over the clock's under the scan
    /// (ring off, full speed), in percent.
    pub scan_hot_resident_delta_pct: Option<f64>,
    /// HOT/COOL's OLTP misses over the clock's (ring off, full speed).
    pub scan_miss_ratio_vs_clock: Option<f64>,
    /// HOT/COOL's median index pages resident over the clock's, in percent.
    pub index_resident_delta_pct: Option<f64>,
    pub index_runs_overlap: Option<bool>,
    pub line: String,
}

/// Build the verdict line from the two reports.
pub fn summarize(sr: &ScanResistanceReport, ir: &IndexResidencyReport) -> Summary {
    let s = sr.headline();
    let i = ir.headline();
    let sd = s.and_then(|c| c.hot_resident_delta_pct);
    let id = i.and_then(|c| c.index_resident_delta_pct);
    let phrase = |d: Option<f64>, what: &str| match d {
        Some(d) if d.abs() < 0.05 => format!("as many {what} (within 0.05%)"),
        Some(d) if d > 0.0 => format!("{d:.1}% more {what}"),
        Some(d) => format!("{:.1}% fewer {what}", -d),
        None => format!("? {what}"),
    };
    let scan_cfg = s.map_or(String::new(), |c| {
        format!(
            " (ring {}, scan at {}{}",
            if c.ring { "on" } else { "off" },
            c.scan_speed,
            c.miss_ratio_vs_clock.map_or(String::new(), |m| format!(
                ": {m:.2}x the clock's OLTP misses"
            ))
        )
    });
    let full = sr
        .full_speed_ring_off()
        .filter(|f| s.is_some_and(|c| c.scan_speed != f.scan_speed))
        .map_or(String::new(), |f| {
            format!(
                "; at full scan speed, {:.2} scan pages per lookup, {}",
                f.scan_pages_per_lookup_clock,
                match f.hot_resident_delta_pct {
                    Some(d) if d.abs() < 0.05 => "both kept it".to_string(),
                    Some(d) => format!("{d:+.1}%"),
                    None => "?".into(),
                }
            )
        });
    let winner = match (sd, id) {
        (Some(a), Some(b)) if a >= 0.0 && b >= 0.0 => "HOT/COOL kept more of the hot set: it",
        (Some(a), Some(b)) if a < 0.0 && b < 0.0 => "The clock kept more of the hot set: HOT/COOL",
        _ => "Mixed: HOT/COOL",
    };
    let line = format!(
        "{winner} kept {} resident under the scan{} and {} (index-residency, median of {} runs{}).",
        phrase(sd, "accounts pages"),
        if scan_cfg.is_empty() {
            String::new()
        } else {
            format!("{scan_cfg}{full})")
        },
        phrase(id, "index pages"),
        i.map_or(0, |c| c.runs),
        match i.map(|c| c.index_resident_overlap) {
            Some(true) => ", per-run figures overlap",
            Some(false) => ", per-run figures do not overlap",
            None => "",
        }
    );
    Summary {
        scan_hot_resident_delta_pct: sd,
        scan_miss_ratio_vs_clock: s.and_then(|c| c.miss_ratio_vs_clock),
        index_resident_delta_pct: id,
        index_runs_overlap: i.map(|c| c.index_resident_overlap),
        line,
    }
}

/// The side-by-side table of the default run: one line per measure,
/// clock and HOT/COOL next to each other.
pub fn side_by_side(sr: &ScanResistanceReport, ir: &IndexResidencyReport) -> Table {
    let mut t = Table::new(&["measure", "clock", "HOT/COOL", "HOT/COOL vs clock"]);
    let pct = |x: f64| format!("{:.3}%", 100.0 * x);
    for c in &sr.comparisons {
        let speed = if c.scan_speed == "full" {
            "full speed".to_string()
        } else {
            c.scan_speed.clone()
        };
        let cfg = format!("ring {}, {speed}", if c.ring { "on" } else { "off" });
        t.push(vec![
            format!("scan-resistance {cfg}: OLTP miss ratio"),
            pct(c.clock_miss_ratio),
            pct(c.hotcool_miss_ratio),
            c.miss_ratio_vs_clock
                .map_or("-".into(), |x| format!("{x:.2}x")),
        ]);
        t.push(vec![
            format!("scan-resistance {cfg}: hot set resident (mean pages)"),
            format!("{:.0}", c.clock_hot_resident_mean),
            format!("{:.0}", c.hotcool_hot_resident_mean),
            c.hot_resident_delta_pct
                .map_or("-".into(), |x| format!("{x:+.1}%")),
        ]);
        t.push(vec![
            format!("scan-resistance {cfg}: scan pages per lookup"),
            format!("{:.2}", c.scan_pages_per_lookup_clock),
            format!("{:.2}", c.scan_pages_per_lookup_hotcool),
            "-".into(),
        ]);
    }
    for c in &ir.comparisons {
        let med = |e: &str| {
            ir.rows
                .iter()
                .find(|r| r.evictor == e && r.partitions == c.partitions)
        };
        let (cl, hc) = (med("clock"), med("hotcool"));
        t.push(vec![
            format!(
                "index-residency p={}: index pages resident (median)",
                c.partitions
            ),
            format!("{:.0}", c.clock_index_resident_median),
            format!("{:.0}", c.hotcool_index_resident_median),
            c.index_resident_delta_pct
                .map_or("-".into(), |x| format!("{x:+.2}%")),
        ]);
        t.push(vec![
            format!(
                "index-residency p={}: index share of evictions",
                c.partitions
            ),
            pct(c.clock_index_eviction_share_median),
            pct(c.hotcool_index_eviction_share_median),
            format!(
                "{:+.2} pt",
                100.0
                    * (c.hotcool_index_eviction_share_median - c.clock_index_eviction_share_median)
            ),
        ]);
        if let (Some(cl), Some(hc)) = (cl, hc) {
            t.push(vec![
                format!("index-residency p={}: index hit ratio", c.partitions),
                pct(cl.index_hit_ratio),
                pct(hc.index_hit_ratio),
                format!(
                    "{:+.3} pt",
                    100.0 * (hc.index_hit_ratio - cl.index_hit_ratio)
                ),
            ]);
            t.push(vec![
                format!("index-residency p={}: probes/s", c.partitions),
                fmt_rate(cl.probes_per_sec),
                fmt_rate(hc.probes_per_sec),
                format!("{:.2}x", hc.probes_per_sec / cl.probes_per_sec.max(1e-9)),
            ]);
        }
    }
    t
}

/// The default run's reports.
#[derive(Debug)]
pub struct DefaultRun {
    pub scan: ScanResistanceReport,
    pub index: IndexResidencyReport,
    pub summary: Summary,
}

/// Run both scenarios, print the comparison; write one JSON file
/// (`{"scenarios": [...], "summary": {...}}`) and the plots if asked.
pub fn run(args: &CommonArgs) -> Result<DefaultRun> {
    let mut a = args.clone();
    if a.pool_mib.is_none() && a.pool_pages.is_none() {
        a.pool_mib = Some(if a.quick {
            common::QUICK_POOL_MIB
        } else {
            POOL_MIB
        });
    }
    println!(
        "default run: scan-resistance and index-residency, clock vs HOT/COOL, pool {} \
         (run `bench scan-resistance` / `bench index-residency` for the full scale, 128 MiB)\n",
        match (a.pool_pages, a.pool_mib) {
            (Some(p), _) => format!("{p} pages"),
            (None, Some(m)) => format!("{m} MiB"),
            _ => "?".into(),
        }
    );
    let shorten = |s: &mut crate::Settings, window: Duration| {
        // The scenarios' own default is all three evictors; this run's
        // table is the clock beside HOT/COOL (probation: `--evictor all`
        // on either scenario), and stays near a minute.
        if args.evictor.is_none() {
            s.evictors = common::EvictorChoice::Both.evictors();
        }
        if args.warmup.is_none() && !args.quick {
            s.warmup = WARMUP;
        }
        if args.duration.is_none() && !args.quick {
            s.duration = window;
        }
        s.json = None;
    };
    let t0 = Instant::now();
    let sr_kind = ScenarioKind::ScanResistance(ScanResistanceArgs::default());
    // Under --trace each scenario's files carry its name.
    let mut s1 = sr_kind.settings(&a)?.trace_with_part(sr_kind.name());
    shorten(&mut s1, SCAN_WINDOW);
    let p1 = scan_resistance::Params::resolve(&ScanResistanceArgs::default(), &s1)?;
    let sr = common::finish(scan_resistance::run(&s1, &p1)?, &s1)?;
    common::print_traces(sr_kind.name(), &common::take_traces(&s1));
    println!("scan-resistance took {:.1} s\n", t0.elapsed().as_secs_f64());

    let t1 = Instant::now();
    let ir_kind = ScenarioKind::IndexResidency(IndexResidencyArgs::default());
    let mut s2 = ir_kind.settings(&a)?.trace_with_part(ir_kind.name());
    if args.partitions.is_none() {
        s2.partitions = vec![1];
    }
    shorten(&mut s2, INDEX_WINDOW);
    let ir_args = IndexResidencyArgs {
        rows: None,
        runs: Some(if args.quick { 2 } else { INDEX_RUNS }),
    };
    let p2 = index_residency::Params::resolve(&ir_args, &s2)?;
    let ir = common::finish(index_residency::run(&s2, &p2)?, &s2)?;
    common::print_traces(ir_kind.name(), &common::take_traces(&s2));
    println!("index-residency took {:.1} s\n", t1.elapsed().as_secs_f64());

    let summary = summarize(&sr, &ir);
    println!(
        "clock vs HOT/COOL (pool {} buffers):\n{}",
        s1.pool_buffers,
        side_by_side(&sr, &ir)
    );
    println!("{}", summary.line);
    if let Some(path) = &args.json {
        let all = serde_json::json!({
            "scenarios": [sr.to_json(), ir.to_json()],
            "summary": summary,
        });
        common::write_json(path, &all)?;
        println!("wrote {}", path.display());
    }
    if let Some(dir) = &args.svg {
        let mut plots = sr.svg_plots();
        plots.extend(ir.svg_plots());
        for p in common::write_svgs(dir, &plots)? {
            println!("wrote {}", p.display());
        }
    }
    Ok(DefaultRun {
        scan: sr,
        index: ir,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_scenario_once() {
        let all = ScenarioKind::all();
        let names: Vec<&str> = all.iter().map(|k| k.name()).collect();
        for n in [
            "sweep",
            "ticks",
            "hint-bits",
            "scan-resistance",
            "index-residency",
            "wal-commit",
            "crash-soak",
        ] {
            assert_eq!(
                names.iter().filter(|&&x| x == n).count(),
                1,
                "{n} in {names:?}"
            );
        }
        use clap::Subcommand;
        let cmd = ScenarioKind::augment_subcommands(clap::Command::new("bench"));
        let unavailable = usize::from(!crate::scenarios::compare_sqlite::AVAILABLE);
        assert_eq!(all.len() + unavailable, cmd.get_subcommands().count());
    }

    #[test]
    fn engine_scenarios_get_their_own_defaults() {
        let a = CommonArgs {
            quick: true,
            ..Default::default()
        };
        let s = ScenarioKind::ScanResistance(Default::default())
            .settings(&a)
            .unwrap();
        assert_eq!(s.rings, [true, false]);
        assert_eq!(s.threads, [2]);
        let s = ScenarioKind::IndexResidency(Default::default())
            .settings(&a)
            .unwrap();
        assert_eq!(s.partitions, [1, 6]);
        assert_eq!(s.threads, [16]);
        let given = CommonArgs {
            partitions: Some(vec![4]),
            ..a.clone()
        };
        let s = ScenarioKind::IndexResidency(Default::default())
            .settings(&given)
            .unwrap();
        assert_eq!(s.partitions, [4], "an option given wins");
        let s = ScenarioKind::WalCommit.settings(&a).unwrap();
        assert_eq!(s.threads, [1, 8], "--quick's 1,2 shows no grouping");
        let s = ScenarioKind::WalCommit
            .settings(&CommonArgs::default())
            .unwrap();
        assert_eq!(s.threads, [1, 2, 4, 8, 16, 32]);
    }
}
