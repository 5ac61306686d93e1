//! `bench replay TRACE`: replay a trace recorded with `--trace` through
//! several replacement policies (`lab::replay`, which does the replaying)
//! and print their hit ratios side by side, overall and for a subset of the
//! accesses, with the share of the clock-to-OPT gap each closes; a
//! pool-size sweep draws a miss-ratio curve. This module is the command
//! line, the table and the plot.
//!
//! A subcommand of `bench` with options of its own: its `--pool-pages`
//! takes a list and its `--threads` names trace thread ids, unlike the
//! scenarios'.

use std::path::PathBuf;

use bufmgr::trace::Trace;
use lab::formats::{CsvOptions, ExportFormat, Format, ReadOptions};
use lab::replay::ratio;
pub use lab::replay::{Policy, ReplayResult, ReplayRow, run_replay};

use crate::common::{SvgPlot, Table, write_json, write_svgs};
use crate::error::{BenchError, Result};
use crate::plot::{self, Series};

/// `bench replay`: hit ratios of policies on a recorded trace.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The trace file: the engine's (a scenario's `--trace FILE`) or one of
    /// the public formats (`--format`); zstd-compressed files are read as is
    pub trace: PathBuf,
    /// The trace's format: engine, oracleGeneral (libCacheSim's binary),
    /// lis (the ARC paper's text traces) or csv (named columns: object, or
    /// offset and size in bytes; time and op optional)
    #[arg(long, default_value = "engine")]
    pub format: Format,
    /// Policies, comma-separated: clock, hotcool, probation, lru, arc,
    /// s3fifo, sieve, 2q, opt
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "clock,hotcool,probation,lru,arc,s3fifo,sieve,2q,opt"
    )]
    pub policy: Vec<Policy>,
    /// Pool sizes in pages, comma-separated [default: the recorded pool's]
    #[arg(long, value_delimiter = ',', value_name = "N[,N...]")]
    pub pool_pages: Option<Vec<usize>>,
    /// Pool sizes as fractions of the trace's footprint (its distinct
    /// pages), comma-separated, each in (0, 1]: e.g. 0.001,0.01,0.1
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "F[,F...]",
        conflicts_with = "pool_pages"
    )]
    pub pool: Option<Vec<f64>>,
    /// csv: bytes per page, to split byte offsets and sizes into pages
    #[arg(long, default_value_t = bufmgr::tag::PAGE_SIZE as u64, value_name = "BYTES")]
    pub page_size: u64,
    /// csv: the columns' names, for a file without a header line (MSR
    /// Cambridge: time,host,disk,op,offset,size,latency)
    #[arg(long, value_delimiter = ',', value_name = "NAME[,NAME...]")]
    pub columns: Option<Vec<String>>,
    /// csv: replay only the rows whose op column says read
    #[arg(long)]
    pub reads_only: bool,
    /// The subset: accesses to these relation ids only
    #[arg(long, value_delimiter = ',', value_name = "R[,R...]")]
    pub relation: Option<Vec<u32>>,
    /// The subset: accesses by these trace thread ids only (the scenarios
    /// number their lookup threads 0, 1, ...; scan-resistance's scan thread is 1000)
    #[arg(long, value_delimiter = ',', value_name = "T[,T...]")]
    pub threads: Option<Vec<usize>>,
    /// With several pool sizes: write the miss-ratio curve to this SVG file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write the rows to FILE as JSON: one per policy and pool size
    /// (`policy`, `pool_pages`, `hit_ratio`, `subset_hit_ratio`,
    /// `gap_closed`, `subset_gap_closed`, `seconds`, `accesses_per_second`)
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

fn share(x: Option<f64>) -> String {
    x.map_or("-".into(), |g| format!("{:.0}%", 100.0 * g))
}

/// `--threads` as trace thread ids (parsed as `usize`, the type of the
/// scenarios' `--threads`, which shares its name).
pub fn thread_ids(threads: Option<&[usize]>) -> Result<Option<Vec<u32>>> {
    threads
        .map(|v| {
            v.iter()
                .map(|&t| {
                    u32::try_from(t).map_err(|_| {
                        BenchError::Config(format!(
                            "--threads {t}: not a trace thread id (at most {})",
                            u32::MAX
                        ))
                    })
                })
                .collect()
        })
        .transpose()
}

/// The table `bench replay` prints (the subset is named on the line above it).
pub fn table(r: &ReplayResult) -> Table {
    let mut t = Table::new(&[
        "policy",
        "pages",
        "hit % (all)",
        "gap closed (all)",
        "hit % (subset)",
        "gap closed (subset)",
        "M acc/s",
    ]);
    let sizes: Vec<usize> = {
        let mut v: Vec<usize> = r.rows.iter().map(|x| x.pages).collect();
        v.dedup();
        v
    };
    for &n in &sizes {
        if n == r.recorded_pages as usize {
            t.push(vec![
                "recorded (live)".into(),
                n.to_string(),
                pct(ratio(r.recorded_hits, r.accesses)),
                "".into(),
                pct(ratio(r.recorded_subset_hits, r.subset_accesses)),
                "".into(),
                "".into(),
            ]);
        }
        for row in r.rows.iter().filter(|x| x.pages == n) {
            t.push(vec![
                row.policy.to_string(),
                n.to_string(),
                pct(ratio(row.hits, r.accesses)),
                share(r.gap_closed(row, false)),
                pct(ratio(row.subset_hits, r.subset_accesses)),
                share(r.gap_closed(row, true)),
                format!("{:.1}", r.accesses as f64 / row.seconds.max(1e-9) / 1e6),
            ]);
        }
    }
    t
}

/// The miss-ratio curve (subset) over the pool sizes, one line per policy.
pub fn miss_ratio_curve(
    r: &ReplayResult,
    policies: &[Policy],
    subset_name: &str,
) -> Result<String> {
    let series: Vec<Series> = policies
        .iter()
        .enumerate()
        .map(|(i, &p)| Series {
            name: p.to_string(),
            points: r
                .rows
                .iter()
                .filter(|x| x.policy == p)
                .map(|x| {
                    (
                        x.pages as f64,
                        100.0 * (1.0 - ratio(x.subset_hits, r.subset_accesses)),
                    )
                })
                .collect(),
            dashed: p == Policy::Opt,
            colour: i,
        })
        .collect();
    plot::lines(
        &format!("miss ratio by pool size ({subset_name})"),
        "pool pages",
        "miss %",
        &series,
        (0.0, 100.0),
        None,
    )
}

/// The `--json` document: the trace, its access counts, and one row per
/// policy and pool size with its hit ratios (0..1) and gap shares (`null`
/// where clock and OPT tie or either was not replayed).
pub fn to_json(trace: &str, r: &ReplayResult) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = r
        .rows
        .iter()
        .map(|row| {
            serde_json::json!({
                "policy": row.policy.name(),
                "pool_pages": row.pages,
                "hit_ratio": ratio(row.hits, r.accesses),
                "subset_hit_ratio": ratio(row.subset_hits, r.subset_accesses),
                "gap_closed": r.gap_closed(row, false),
                "subset_gap_closed": r.gap_closed(row, true),
                "seconds": row.seconds,
                "accesses_per_second": r.accesses as f64 / row.seconds.max(1e-9),
            })
        })
        .collect();
    serde_json::json!({
        "trace": trace,
        "accesses": r.accesses,
        "subset_accesses": r.subset_accesses,
        "rows": rows,
    })
}

/// Pool sizes from `--pool-pages`, else `--pool` fractions of
/// `footprint`, else `default` (an error if there is none); ascending, each
/// once (a size given twice, or two fractions rounding to one size, would
/// be replayed twice, listed twice in the table and drawn back and forth
/// in the curve).
fn pool_sizes(a: &ReplayArgs, footprint: u64, default: Option<usize>) -> Result<Vec<usize>> {
    let mut sizes = match (&a.pool_pages, &a.pool) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => f
            .iter()
            .map(|&f| {
                if f > 0.0 && f <= 1.0 {
                    Ok(((f * footprint as f64).round() as usize).max(1))
                } else {
                    Err(BenchError::Config(format!(
                        "--pool {f}: a fraction of the footprint must be in (0, 1]"
                    )))
                }
            })
            .collect::<Result<_>>()?,
        (None, None) => vec![default.ok_or_else(|| {
            BenchError::Config(format!(
                "a {} trace records no pool size: give --pool-pages or --pool",
                a.format
            ))
        })?],
    };
    if sizes.contains(&0) {
        return Err(BenchError::Config("--pool-pages must be at least 1".into()));
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// A trace that holds no access: every policy's hit ratio would be 0 of 0,
/// a figure of nothing, so the replay refuses it.
fn no_access(a: &ReplayArgs) -> BenchError {
    BenchError::Data(format!(
        "{} ({}): the trace holds no access to replay",
        a.trace.display(),
        a.format
    ))
}

/// `--policy` with each policy once, in the order given.
fn policies(a: &ReplayArgs) -> Vec<Policy> {
    let mut v: Vec<Policy> = Vec::new();
    for &p in &a.policy {
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

/// An engine trace, read whole: threads merged by time, the subset, the
/// recorded hits.
fn replay_engine(a: &ReplayArgs) -> Result<(ReplayResult, String, Vec<usize>)> {
    if a.columns.is_some() || a.reads_only {
        return Err(BenchError::Config(
            "--columns and --reads-only are for --format csv".into(),
        ));
    }
    let (trace, torn) = Trace::read_torn(&a.trace)?;
    if let Some(offset) = torn {
        eprintln!(
            "warning: {} is torn at byte offset {offset} (its writer was killed?): \
             replaying the {} whole records before it",
            a.trace.display(),
            trace.events.len()
        );
    }
    if trace.accesses().next().is_none() {
        return Err(no_access(a));
    }
    let footprint = || {
        let mut tags: Vec<_> = trace.accesses().map(|x| x.tag).collect();
        tags.sort_unstable_by_key(|t| (t.rel.0, t.fork as u8, t.block));
        tags.dedup();
        tags.len() as u64
    };
    let fp = if a.pool.is_some() { footprint() } else { 0 };
    // A trace that records no pool (0: a generated one) needs a size given.
    let recorded = (trace.pool_buffers > 0).then_some(trace.pool_buffers as usize);
    let sizes = pool_sizes(a, fp, recorded)?;
    let (rels, threads) = (a.relation.clone(), thread_ids(a.threads.as_deref())?);
    let subset_name = match (&rels, &threads) {
        (None, None) => "all accesses".to_string(),
        _ => {
            let mut parts = Vec::new();
            if let Some(r) = &rels {
                parts.push(format!("relation {r:?}"));
            }
            if let Some(t) = &threads {
                parts.push(format!("threads {t:?}"));
            }
            parts.join(", ")
        }
    };
    let result = run_replay(&trace, &policies(a), &sizes, |acc| {
        rels.as_ref().is_none_or(|r| r.contains(&acc.tag.rel.0))
            && threads.as_ref().is_none_or(|t| t.contains(&acc.thread))
    });
    println!(
        "{}: {} accesses ({} in the subset {subset_name}), recorded on a pool of {} pages",
        a.trace.display(),
        result.accesses,
        result.subset_accesses,
        result.recorded_pages
    );
    Ok((result, subset_name, sizes))
}

/// A public-format trace, streamed: one pass for its length and footprint,
/// then each (policy, size) reads it again. OPT over a format without next
/// uses needs one more pass keeping 12 bytes per access (said on stderr).
fn replay_public(a: &ReplayArgs) -> Result<(ReplayResult, String, Vec<usize>)> {
    if a.relation.is_some() || a.threads.is_some() {
        return Err(BenchError::Config(format!(
            "--relation and --threads pick engine-trace accesses; a {} trace has no relations \
             or threads",
            a.format
        )));
    }
    if a.format != Format::Csv && (a.columns.is_some() || a.reads_only) {
        return Err(BenchError::Config(
            "--columns and --reads-only are for --format csv".into(),
        ));
    }
    let o = ReadOptions {
        format: a.format,
        page_size: a.page_size,
        csv: CsvOptions {
            columns: a.columns.clone(),
            reads_only: a.reads_only,
        },
    };
    let fp = lab::replay::footprint(&a.trace, &o)?;
    if fp.accesses == 0 {
        return Err(no_access(a));
    }
    let sizes = pool_sizes(a, fp.objects, None)?;
    let next = if policies(a).contains(&Policy::Opt) && a.format != Format::OracleGeneral {
        eprintln!(
            "note: OPT over a {} trace: each access's next use is computed first, keeping 12 \
             bytes per access in memory ({} accesses: {:.1} MiB); oracleGeneral traces carry it",
            a.format,
            fp.accesses,
            fp.accesses as f64 * 12.0 / (1 << 20) as f64
        );
        Some(lab::replay::next_uses_of(&a.trace, &o)?)
    } else {
        None
    };
    let result = lab::replay::run_stream(&a.trace, &o, fp, &policies(a), &sizes, next.as_deref())?;
    println!(
        "{} ({}): {} accesses to {} distinct pages",
        a.trace.display(),
        a.format,
        fp.accesses,
        fp.objects
    );
    Ok((result, "all accesses".into(), sizes))
}

/// `bench replay ...`, its options parsed.
pub fn main(a: &ReplayArgs) -> Result<()> {
    let (result, subset_name, sizes) = if a.format == Format::Engine {
        replay_engine(a)?
    } else {
        replay_public(a)?
    };
    print!("{}", table(&result));
    if let Some(path) = &a.json {
        write_json(path, &to_json(&a.trace.display().to_string(), &result))?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = &a.svg {
        if sizes.len() < 2 {
            return Err(BenchError::Config(
                "--svg draws a curve over pool sizes: give --pool-pages at least two".into(),
            ));
        }
        let svg = miss_ratio_curve(&result, &policies(a), &subset_name)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        let file = path
            .file_name()
            .ok_or_else(|| {
                BenchError::Config(format!("--svg {}: not a file name", path.display()))
            })?
            .to_string_lossy()
            .into_owned();
        for p in write_svgs(
            dir.unwrap_or(std::path::Path::new(".")),
            &[SvgPlot { file, svg }],
        )? {
            println!("wrote {}", p.display());
        }
    }
    Ok(())
}

/// `bench trace-export`: an engine trace in a public format.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The engine trace (a scenario's `--trace FILE`)
    pub trace: PathBuf,
    /// oracleGeneral (libCacheSim's binary, next accesses computed) or csv
    /// (time,object,size,op)
    #[arg(long)]
    pub format: ExportFormat,
    /// The file to write [default: TRACE with `.oracleGeneral.bin` or `.csv`
    /// in place of its extension]
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `bench trace-export ...`, its options parsed.
pub fn export_main(a: &ExportArgs) -> Result<()> {
    let trace = Trace::read(&a.trace)?;
    let out = a.output.clone().unwrap_or_else(|| {
        a.trace.with_extension(match a.format {
            ExportFormat::OracleGeneral => "oracleGeneral.bin",
            ExportFormat::Csv => "csv",
        })
    });
    if out == a.trace {
        return Err(BenchError::Config(format!(
            "--output {} is the trace itself",
            out.display()
        )));
    }
    let n = lab::formats::export(&trace, a.format, &out)?;
    println!("wrote {} ({n} accesses)", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::trace::{Access, TraceEvent};
    use bufmgr::{BufferTag, RelFork, RelId};

    /// A loop over 3 pages in a pool of 2: the recording pool's size, so
    /// the table has its "recorded (live)" row.
    fn trace() -> Trace {
        let events = (0..30u32)
            .map(|i| {
                TraceEvent::Access(Access {
                    tag: BufferTag::new(RelFork::main(RelId(1)), i % 3),
                    thread: 0,
                    hit: false,
                    ring: None,
                    buffer: 0,
                    nanos: u64::from(i),
                })
            })
            .collect();
        Trace {
            pool_buffers: 2,
            events,
        }
    }

    fn args(line: &[&str]) -> ReplayArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            a: ReplayArgs,
        }
        let mut v = vec!["replay", "t.bin"];
        v.extend_from_slice(line);
        <Cli as clap::Parser>::try_parse_from(v).unwrap().a
    }

    // A size or policy named twice is replayed once: the table and the JSON
    // had each of its rows twice, and the curve went back and forth.
    #[test]
    fn pool_sizes_are_replayed_ascending_once_each_and_policies_once_each() {
        let a = args(&["--pool-pages", "3,1,3", "--policy", "lru,opt,lru"]);
        assert_eq!(pool_sizes(&a, 0, None).unwrap(), [1, 3]);
        assert_eq!(policies(&a), [Policy::Lru, Policy::Opt]);
        // 0.5 and 0.52 of 10 pages are both 5 pages.
        let f = args(&["--pool", "0.52,0.1,0.5"]);
        assert_eq!(pool_sizes(&f, 10, None).unwrap(), [1, 5]);
        let r = run_replay(
            &trace(),
            &policies(&a),
            &pool_sizes(&a, 0, None).unwrap(),
            |_| true,
        );
        let rows = to_json("t", &r)["rows"].as_array().unwrap().len();
        assert_eq!(rows, 4);
        let text = table(&r).to_string();
        assert_eq!(
            text.lines().filter(|l| l.starts_with("lru ")).count(),
            2,
            "{text}"
        );
    }

    #[test]
    fn the_table_has_the_recorded_row_and_every_policy_with_its_gap_share() {
        let r = run_replay(&trace(), &Policy::ALL, &[2], |_| true);
        let text = table(&r).to_string();
        assert!(text.contains("recorded (live)"), "{text}");
        for p in Policy::ALL {
            assert!(text.contains(p.name()), "{p}: {text}");
        }
        assert!(text.contains("100%") && text.contains("0%"), "{text}");
    }
}
