//! The run with no scenario named: the three evictors (clock, HOT/COOL and
//! probation) side by side on `scan-resistance` and `index-residency`, at a
//! 32 MiB pool so that it takes about a minute on a 2-core machine (plus
//! the first build of both data sets, about 10 s); then two tables at most
//! 100 columns wide and a few lines saying what differs beyond run-to-run
//! noise, and what does not.
//!
//! ```text
//!   scan-resistance  pool 32 MiB: accounts ~73 k rows (hot set ~40%), history ~885 k rows (~4 x pool)
//!                    evictor {clock, hotcool, probation} x scan {full, ~1 page/lookup}, ring off
//!                    warm-up 1.5 s, window 3 s
//!   index-residency  pool 32 MiB: t 675 k rows (heap ~4.4 x pool), 16 threads, partitions 1,
//!                    3 runs per evictor (alternating), warm-up 1.5 s, window 2 s
//! ```
//!
//! Every common option given on the command line overrides these (e.g.
//! `--pool-mib 128` runs the default comparison at the full scale, `--ring
//! both` adds the scan's ring). `--full` prints each scenario's own wide
//! tables as well; `--json FILE` writes both reports and the verdict.
//!
//! What counts as a difference is [`crate::spread`]'s rule: a scan-resistance
//! figure comes from one window, so two miss ratios must be at least 0.05
//! points and three standard deviations of their miss counts apart, and two
//! hot-set shares a point apart; an index-residency figure comes from
//! several runs, and two are apart only where their ranges do not overlap.
//! Only figures that are apart get a ratio or a difference quoted.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::common::{self, CommonArgs, Report, Table, evictor_label, fmt_rate, wrap};
use crate::error::Result;
use crate::scenarios::ScenarioKind;
use crate::scenarios::index_residency::{self, IndexResidencyArgs, IndexResidencyReport};
use crate::scenarios::scan_resistance::{self, ScanResistanceArgs, ScanResistanceReport};
use crate::spread::{self, Spread};

/// Pool of the default run.
pub const POOL_MIB: usize = 32;
const WARMUP: Duration = Duration::from_millis(1500);
const SCAN_WINDOW: Duration = Duration::from_secs(3);
const INDEX_WINDOW: Duration = Duration::from_secs(2);
const INDEX_RUNS: usize = 3;
/// The width the default run's own output keeps within.
pub const WIDTH: usize = common::TERMINAL_WIDTH;

/// One evictor's figure beside the clock's, and whether the two differ
/// beyond noise.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub scenario: String,
    /// `"ring off, 1 page/lookup"`, `"partitions 1"`.
    pub setting: String,
    pub measure: String,
    pub evictor: String,
    pub value: f64,
    pub clock: f64,
    /// The figures differ by more than the noise rule allows; only then is
    /// `vs_clock` quoted.
    pub beyond_noise: bool,
    /// The ratio (`"0.20x"`) or difference (`"+4.9%"`, `"+2.3 pt"`) to the
    /// clock's figure, where beyond noise.
    pub vs_clock: Option<String>,
}

/// The verdict and the figures behind it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// HOT/COOL's mean hot-set residency over the clock's under the scan
    /// (the scenario's headline configuration), in percent.
    pub scan_hot_resident_delta_pct: Option<f64>,
    /// HOT/COOL's OLTP misses over the clock's (the headline configuration),
    /// whether or not beyond noise (see `findings`).
    pub scan_miss_ratio_vs_clock: Option<f64>,
    /// HOT/COOL's median index pages resident over the clock's, in percent.
    pub index_resident_delta_pct: Option<f64>,
    pub index_runs_overlap: Option<bool>,
    /// Every evictor's figures beside the clock's.
    pub findings: Vec<Finding>,
    /// The verdict lines, joined by "; ".
    pub line: String,
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn pct(x: f64) -> String {
    format!("{:.3}%", 100.0 * x)
}

/// The evictors of `names` in their first order, deduplicated.
fn evictors_in<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// The scan-resistance figures beside the clock's, per (ring, scan speed).
fn scan_findings(sr: &ScanResistanceReport) -> Vec<Finding> {
    let both_rings = sr.rows.iter().any(|r| r.ring) && sr.rows.iter().any(|r| !r.ring);
    let mut out = Vec::new();
    for c in sr.rows.iter().filter(|r| r.evictor == "clock") {
        let setting = if both_rings {
            format!("ring {}, {}", on_off(c.ring), c.scan_speed)
        } else {
            c.scan_speed.clone()
        };
        let others = sr.rows.iter().filter(|e| {
            e.evictor != "clock"
                && e.ring == c.ring
                && e.scan_speed == c.scan_speed
                && e.batch == c.batch
                && e.partitions == c.partitions
                && e.threads == c.threads
                && e.huge_pages == c.huge_pages
        });
        for e in others {
            let (em, cm) = (1.0 - e.oltp_hit_ratio, 1.0 - c.oltp_hit_ratio);
            let apart = spread::miss_ratios_apart(
                e.lookup_misses,
                e.lookup_accesses,
                c.lookup_misses,
                c.lookup_accesses,
            );
            out.push(Finding {
                scenario: sr.scenario.clone(),
                setting: setting.clone(),
                measure: "OLTP miss ratio".into(),
                evictor: e.evictor.clone(),
                value: em,
                clock: cm,
                beyond_noise: apart,
                vs_clock: apart.then(|| {
                    if em == 0.0 {
                        format!("no misses ({} for the clock)", pct(cm))
                    } else if cm == 0.0 {
                        format!("{} (none for the clock)", pct(em))
                    } else {
                        format!("{:.2}x ({} vs {})", em / cm, pct(em), pct(cm))
                    }
                }),
            });
            let share =
                |r: &scan_resistance::Row| r.hot_resident_mean / r.hot_set_pages.max(1) as f64;
            let (es, cs) = (share(e), share(c));
            let apart = spread::shares_apart(es, cs);
            out.push(Finding {
                scenario: sr.scenario.clone(),
                setting: setting.clone(),
                measure: "hot set resident".into(),
                evictor: e.evictor.clone(),
                value: es,
                clock: cs,
                beyond_noise: apart,
                vs_clock: apart.then(|| format!("{:+.1} pt", 100.0 * (es - cs))),
            });
        }
    }
    out
}

/// The spread of one index-residency figure over the runs of `evictor` at
/// `partitions`.
fn index_spread(
    ir: &IndexResidencyReport,
    evictor: &str,
    partitions: usize,
    f: fn(&index_residency::Row) -> f64,
) -> Option<Spread> {
    let v: Vec<f64> = ir
        .runs
        .iter()
        .filter(|r| r.evictor == evictor && r.partitions == partitions)
        .map(f)
        .collect();
    Spread::of(&v)
}

/// A measure of index-residency: its name, how a value is written, how a
/// difference to the clock is written, and where it comes from.
struct IndexMeasure {
    name: &'static str,
    value: fn(&index_residency::Row) -> f64,
    cell: fn(f64) -> String,
    vs: fn(&Spread, &Spread) -> String,
}

const INDEX_MEASURES: [IndexMeasure; 4] = [
    IndexMeasure {
        name: "index pages resident",
        value: |r| r.index_resident_pages,
        cell: |x| format!("{x:.0}"),
        vs: |e, c| format!("{:+.1}%", 100.0 * (e.median / c.median - 1.0)),
    },
    IndexMeasure {
        name: "index share of evictions",
        value: |r| r.index_eviction_share,
        cell: |x| format!("{:.2}%", 100.0 * x),
        vs: |e, c| format!("{:+.2} pt", 100.0 * (e.median - c.median)),
    },
    IndexMeasure {
        name: "index hit ratio",
        value: |r| r.index_hit_ratio,
        cell: |x| format!("{:.2}%", 100.0 * x),
        vs: |e, c| format!("{:+.2} pt", 100.0 * (e.median - c.median)),
    },
    IndexMeasure {
        name: "probes/s",
        value: |r| r.probes_per_sec,
        cell: fmt_rate,
        vs: |e, c| format!("{:.2}x", e.median / c.median),
    },
];

fn partition_counts(ir: &IndexResidencyReport) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for r in &ir.runs {
        if !out.contains(&r.partitions) {
            out.push(r.partitions);
        }
    }
    out
}

/// The index-residency figures beside the clock's, per partition count.
fn index_findings(ir: &IndexResidencyReport) -> Vec<Finding> {
    let evictors = evictors_in(ir.runs.iter().map(|r| r.evictor.as_str()));
    let mut out = Vec::new();
    for p in partition_counts(ir) {
        for m in &INDEX_MEASURES {
            let Some(c) = index_spread(ir, "clock", p, m.value) else {
                continue;
            };
            for &e in evictors.iter().filter(|&&e| e != "clock") {
                let Some(s) = index_spread(ir, e, p, m.value) else {
                    continue;
                };
                let apart = s.apart(&c) && c.median != 0.0;
                out.push(Finding {
                    scenario: ir.scenario.clone(),
                    setting: format!("partitions {p}"),
                    measure: m.name.into(),
                    evictor: e.into(),
                    value: s.median,
                    clock: c.median,
                    beyond_noise: apart,
                    vs_clock: apart.then(|| (m.vs)(&s, &c)),
                });
            }
        }
    }
    out
}

/// One verdict line per (scenario, setting, measure): each evictor's
/// difference to the clock where it is beyond noise, and which are not.
fn verdict_lines(findings: &[Finding]) -> Vec<String> {
    let mut keys: Vec<(&str, &str, &str)> = Vec::new();
    for f in findings {
        let k = (f.scenario.as_str(), f.setting.as_str(), f.measure.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.iter()
        .map(|&(scenario, setting, measure)| {
            let group: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.scenario == scenario && f.setting == setting && f.measure == measure)
                .collect();
            let within: Vec<&str> = group
                .iter()
                .filter(|f| !f.beyond_noise)
                .map(|f| evictor_label(&f.evictor))
                .collect();
            let mut parts: Vec<String> = group
                .iter()
                .filter_map(|f| {
                    f.vs_clock
                        .as_ref()
                        .map(|v| format!("{} {v}", evictor_label(&f.evictor)))
                })
                .collect();
            let noise = if scenario == index_residency::NAME {
                "the clock's run-to-run spread"
            } else {
                "noise of the clock's"
            };
            if !within.is_empty() {
                let who = if parts.is_empty() && within.len() > 1 {
                    format!(
                        "{} and {}",
                        within[..within.len() - 1].join(", "),
                        within[within.len() - 1]
                    )
                } else {
                    within.join(", ")
                };
                parts.push(format!("{who} within {noise}"));
            }
            let vs = if group.iter().any(|f| f.beyond_noise) {
                " vs the clock"
            } else {
                ""
            };
            format!("{scenario} {setting}, {measure}{vs}: {}", parts.join("; "))
        })
        .collect()
}

/// Build the verdict from the two reports.
pub fn summarize(sr: &ScanResistanceReport, ir: &IndexResidencyReport) -> Summary {
    let s = sr.headline();
    let i = ir.headline();
    let mut findings = scan_findings(sr);
    findings.extend(index_findings(ir));
    let lines = verdict_lines(&findings);
    Summary {
        scan_hot_resident_delta_pct: s.and_then(|c| c.hot_resident_delta_pct),
        scan_miss_ratio_vs_clock: s.and_then(|c| c.miss_ratio_vs_clock),
        index_resident_delta_pct: i.and_then(|c| c.index_resident_delta_pct),
        index_runs_overlap: i.map(|c| c.index_resident_overlap),
        findings,
        line: lines.join("; "),
    }
}

/// The scan-resistance table: one line per (setting, measure), one column
/// per evictor.
pub fn scan_table(sr: &ScanResistanceReport) -> Table {
    let evictors = evictors_in(sr.rows.iter().map(|r| r.evictor.as_str()));
    let mut header = vec!["measure"];
    header.extend(evictors.iter().map(|e| evictor_label(e)));
    let mut t = Table::new(&header);
    let both_rings = sr.rows.iter().any(|r| r.ring) && sr.rows.iter().any(|r| !r.ring);
    let mut settings: Vec<(bool, &str)> = Vec::new();
    for r in &sr.rows {
        if !settings.contains(&(r.ring, r.scan_speed.as_str())) {
            settings.push((r.ring, r.scan_speed.as_str()));
        }
    }
    type Cell = fn(&scan_resistance::Row) -> String;
    let measures: [(&str, Cell); 3] = [
        ("OLTP miss ratio", |r| pct(1.0 - r.oltp_hit_ratio)),
        ("hot set resident", |r| {
            format!(
                "{:.1}%",
                100.0 * r.hot_resident_mean / r.hot_set_pages.max(1) as f64
            )
        }),
        ("scan pages per lookup", |r| {
            format!("{:.2}", r.scan_pages_per_lookup)
        }),
    ];
    for (ring, speed) in settings {
        let setting = if both_rings {
            format!("ring {}, {speed}", on_off(ring))
        } else {
            speed.to_string()
        };
        for (name, cell) in &measures {
            let mut row = vec![format!("{setting}: {name}")];
            for e in &evictors {
                row.push(
                    sr.rows
                        .iter()
                        .find(|r| r.evictor == *e && r.ring == ring && r.scan_speed == speed)
                        .map_or("-".into(), cell),
                );
            }
            t.push(row);
        }
    }
    t
}

/// The index-residency table: per measure, each evictor's median over its
/// runs (the index pages with their lowest-highest range).
pub fn index_table(ir: &IndexResidencyReport) -> Table {
    let evictors = evictors_in(ir.runs.iter().map(|r| r.evictor.as_str()));
    let mut header = vec!["measure (median of runs)"];
    header.extend(evictors.iter().map(|e| evictor_label(e)));
    let mut t = Table::new(&header);
    let parts = partition_counts(ir);
    for &p in &parts {
        let prefix = if parts.len() > 1 {
            format!("p={p}: ")
        } else {
            String::new()
        };
        for (i, m) in INDEX_MEASURES.iter().enumerate() {
            let mut row = vec![format!("{prefix}{}", m.name)];
            for e in &evictors {
                row.push(index_spread(ir, e, p, m.value).map_or("-".into(), |s| {
                    if i == 0 {
                        format!(
                            "{} ({}-{})",
                            (m.cell)(s.median),
                            (m.cell)(s.min),
                            (m.cell)(s.max)
                        )
                    } else {
                        (m.cell)(s.median)
                    }
                }));
            }
            t.push(row);
        }
    }
    t
}

/// What the default run prints after both scenarios ran.
pub fn render(sr: &ScanResistanceReport, ir: &IndexResidencyReport, summary: &Summary) -> String {
    let rings = evictors_in(sr.rows.iter().map(|r| on_off(r.ring)));
    let mut out = wrap(
        &format!(
            "scan-resistance: OLTP lookups on a hot set of {} pages ({:.0}% of the pool) beside \
             a sequential scan of {:.1} x pool; ring {}; one window per configuration:",
            sr.hot_set_pages,
            100.0 * sr.hot_set_pages as f64 / sr.pool_buffers.max(1) as f64,
            sr.history_pages as f64 / sr.pool_buffers.max(1) as f64,
            rings.join(", "),
        ),
        WIDTH,
        "",
        "  ",
    );
    out += &scan_table(sr).to_string();
    out.push('\n');
    out += &wrap(
        &format!(
            "index-residency: zipfian probes through three secondary indexes of a table of {} \
             rows; {} runs per evictor (medians; index pages with their lowest-highest):",
            ir.table_rows, ir.runs_per_config
        ),
        WIDTH,
        "",
        "  ",
    );
    out += &index_table(ir).to_string();
    out.push('\n');
    let lines = verdict_lines(&summary.findings);
    if lines.is_empty() {
        out += "No clock run to compare with: nothing to say against it.\n";
    } else {
        out += &wrap(
            &format!(
                "Against the clock (a ratio or difference only where the figures are apart: \
                 single windows at least {} pt and {} sigma of the miss counts apart, hot set \
                 shares {} pt; repeated runs where the ranges do not overlap):",
                100.0 * spread::MIN_MISS_RATIO_GAP,
                spread::MISS_COUNT_SIGMAS,
                100.0 * spread::MIN_SHARE_GAP,
            ),
            WIDTH,
            "",
            "",
        );
        for l in lines {
            out += &wrap(&l, WIDTH, "- ", "  ");
        }
    }
    out
}

/// The default run's reports.
#[derive(Debug)]
pub struct DefaultRun {
    pub scan: ScanResistanceReport,
    pub index: IndexResidencyReport,
    pub summary: Summary,
}

/// Print a scenario's full tables if asked, and fail if its data was wrong.
fn finish<R: Report>(report: R, settings: &crate::Settings, full: bool) -> Result<R> {
    if full {
        return common::finish(report, settings);
    }
    common::fail_on_data_errors(report)
}

/// Run both scenarios, print the comparison; write one JSON file
/// (`{"scenarios": [...], "summary": {...}}`) and the plots if asked.
/// `full` prints each scenario's own tables too.
pub fn run(args: &CommonArgs, full: bool) -> Result<DefaultRun> {
    let mut a = args.clone();
    if a.pool_mib.is_none() && a.pool_pages.is_none() {
        a.pool_mib = Some(if a.quick {
            common::QUICK_POOL_MIB
        } else {
            POOL_MIB
        });
    }
    print!(
        "{}",
        wrap(
            &format!(
                "default run: the evictors side by side on scan-resistance and index-residency, \
                 pool {} (`--full` prints each scenario's whole tables, `--json FILE` writes \
                 everything; `bench scan-resistance`, `bench index-residency` run the full \
                 scale, 128 MiB)",
                match (a.pool_pages, a.pool_mib) {
                    (Some(p), _) => format!("{p} pages"),
                    (None, Some(m)) => format!("{m} MiB"),
                    _ => "?".into(),
                }
            ),
            WIDTH,
            "",
            "  ",
        )
    );
    println!();
    let shorten = |s: &mut crate::Settings, window: Duration| {
        if args.evictor.is_none() {
            s.evictors = common::EvictorChoice::All.evictors();
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
    // The evictors differ when the scan does not keep to its ring; with the
    // ring every evictor keeps the hot set (`--ring both` shows both).
    if args.ring.is_none() {
        s1.rings = vec![false];
    }
    let p1 = scan_resistance::Params::resolve(&ScanResistanceArgs::default(), &s1)?;
    let sr = finish(scan_resistance::run(&s1, &p1)?, &s1, full)?;
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
    let ir = finish(index_residency::run(&s2, &p2)?, &s2, full)?;
    common::print_traces(ir_kind.name(), &common::take_traces(&s2));
    println!("index-residency took {:.1} s\n", t1.elapsed().as_secs_f64());

    let summary = summarize(&sr, &ir);
    print!("{}", render(&sr, &ir, &summary));
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

    fn finding(evictor: &str, value: f64, clock: f64, beyond: bool) -> Finding {
        Finding {
            scenario: "scan-resistance".into(),
            setting: "full".into(),
            measure: "OLTP miss ratio".into(),
            evictor: evictor.into(),
            value,
            clock,
            beyond_noise: beyond,
            vs_clock: beyond.then(|| format!("{:.2}x", value / clock)),
        }
    }

    #[test]
    fn figures_within_noise_get_no_ratio_in_the_verdict() {
        let lines = verdict_lines(&[
            finding("hotcool", 0.00001, 0.00012, false),
            finding("probation", 0.0, 0.00012, false),
        ]);
        assert_eq!(
            lines,
            [
                "scan-resistance full, OLTP miss ratio: HOT/COOL and probation within noise of the clock's"
            ]
        );
        assert!(!lines[0].contains('x'), "{lines:?}");
    }

    #[test]
    fn only_the_figures_beyond_noise_are_quoted_against_the_clock() {
        let lines = verdict_lines(&[
            finding("hotcool", 0.00177, 0.00868, true),
            finding("probation", 0.0085, 0.00868, false),
        ]);
        assert_eq!(
            lines,
            [
                "scan-resistance full, OLTP miss ratio vs the clock: HOT/COOL 0.20x; probation within noise of the clock's"
            ]
        );
    }

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
    fn every_scenario_is_described_by_what_it_measures_not_a_seed_number() {
        use clap::Subcommand;
        let cmd = ScenarioKind::augment_subcommands(clap::Command::new("bench"));
        for sub in cmd.get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(about.len() > 20, "{}: {about:?}", sub.get_name());
            assert!(!about.contains("seed"), "{}: {about}", sub.get_name());
        }
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
