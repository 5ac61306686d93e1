//! `bench replay TRACE`: replay a trace recorded with `--trace` through
//! several replacement policies (see `bufmgr::replay`) and print their hit
//! ratios side by side, overall and for a subset of the accesses, with the
//! share of the clock-to-OPT gap each closes; a pool-size sweep draws a
//! miss-ratio curve.
//!
//! Parsed on its own (not as a scenario): its `--pool-pages` takes a list
//! and its `--threads` names trace thread ids, unlike the scenarios'.

use std::path::PathBuf;

use bufmgr::replay::{Policy, Ref, replay};
use bufmgr::trace::Trace;
use bufmgr::{Evictor, RingSizes};
use clap::Parser;

use crate::common::{SvgPlot, Table, write_svgs};
use crate::error::{BenchError, Result};
use crate::plot::{self, Series};

/// `bench replay`: hit ratios of policies on a recorded trace.
#[derive(Parser, Debug)]
#[command(name = "bench replay")]
pub struct ReplayArgs {
    /// The trace file (written by a scenario's `--trace FILE`)
    pub trace: PathBuf,
    /// Policies, comma-separated: clock, hotcool, probation, lru, arc, s3fifo, opt
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "clock,hotcool,probation,lru,arc,s3fifo,opt"
    )]
    pub policy: Vec<Policy>,
    /// Pool sizes in pages, comma-separated [default: the recorded pool's]
    #[arg(long, value_delimiter = ',', value_name = "N[,N...]")]
    pub pool_pages: Option<Vec<usize>>,
    /// The subset: accesses to these relation ids only
    #[arg(long, value_delimiter = ',', value_name = "R[,R...]")]
    pub relation: Option<Vec<u32>>,
    /// The subset: accesses by these trace thread ids only (the scenarios
    /// number their lookup threads 0, 1, ...; scan-resistance's scan thread is 1000)
    #[arg(long, value_delimiter = ',', value_name = "T[,T...]")]
    pub threads: Option<Vec<u32>>,
    /// With several pool sizes: write the miss-ratio curve to this SVG file
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// One policy at one pool size.
#[derive(Clone, Debug)]
pub struct ReplayRow {
    pub policy: Policy,
    pub pages: usize,
    pub hits: u64,
    pub subset_hits: u64,
}

/// What a replay found.
#[derive(Clone, Debug)]
pub struct ReplayResult {
    pub accesses: u64,
    pub subset_accesses: u64,
    /// Hits the recording pool had (the trace's hit flags).
    pub recorded_hits: u64,
    pub recorded_subset_hits: u64,
    pub recorded_pages: u32,
    pub rows: Vec<ReplayRow>,
}

fn ratio(h: u64, n: u64) -> f64 {
    if n == 0 { 0.0 } else { h as f64 / n as f64 }
}

impl ReplayResult {
    fn find(&self, p: Policy, pages: usize) -> Option<&ReplayRow> {
        self.rows.iter().find(|r| r.policy == p && r.pages == pages)
    }

    /// The share of the clock-to-OPT gap `row` closes on the subset (or
    /// overall): (h - h_clock) / (h_opt - h_clock); `None` without both.
    pub fn gap_closed(&self, row: &ReplayRow, subset: bool) -> Option<f64> {
        let h = |r: &ReplayRow| {
            if subset {
                ratio(r.subset_hits, self.subset_accesses)
            } else {
                ratio(r.hits, self.accesses)
            }
        };
        let clock = h(self.find(Policy::Engine(Evictor::Clock), row.pages)?);
        let opt = h(self.find(Policy::Opt, row.pages)?);
        (opt - clock > 1e-12).then(|| (h(row) - clock) / (opt - clock))
    }
}

/// Replay `trace`'s accesses through each policy at each size; `subset`
/// says which accesses the subset column counts.
pub fn run_replay(
    trace: &Trace,
    policies: &[Policy],
    sizes: &[usize],
    subset: impl Fn(&bufmgr::trace::Access) -> bool,
) -> ReplayResult {
    let accesses = trace.accesses_by_time();
    let refs: Vec<Ref> = accesses.iter().map(|a| Ref::from(*a)).collect();
    let in_subset: Vec<bool> = accesses.iter().map(|a| subset(a)).collect();
    let count = |hits: &[bool]| {
        let all = hits.iter().filter(|&&h| h).count() as u64;
        let sub = hits
            .iter()
            .zip(&in_subset)
            .filter(|&(&h, &s)| h && s)
            .count() as u64;
        (all, sub)
    };
    let recorded: Vec<bool> = accesses.iter().map(|a| a.hit).collect();
    let (recorded_hits, recorded_subset_hits) = count(&recorded);
    let jobs: Vec<(Policy, usize)> = sizes
        .iter()
        .flat_map(|&n| policies.iter().map(move |&p| (p, n)))
        .collect();
    // One thread per core, each taking the next job.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let rows = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..crate::common::cores().min(jobs.len()).max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&(policy, pages)) = jobs.get(i) else {
                        break;
                    };
                    let hits = replay(policy, &refs, pages, &RingSizes::default());
                    let (h, sh) = count(&hits);
                    rows.lock().expect("no panics hold it").push((
                        i,
                        ReplayRow {
                            policy,
                            pages,
                            hits: h,
                            subset_hits: sh,
                        },
                    ));
                }
            });
        }
    });
    let mut rows = rows.into_inner().expect("no panics hold it");
    rows.sort_by_key(|r| r.0);
    ReplayResult {
        accesses: refs.len() as u64,
        subset_accesses: in_subset.iter().filter(|&&s| s).count() as u64,
        recorded_hits,
        recorded_subset_hits,
        recorded_pages: trace.pool_buffers,
        rows: rows.into_iter().map(|r| r.1).collect(),
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}", 100.0 * x)
}

fn share(x: Option<f64>) -> String {
    x.map_or("-".into(), |g| format!("{:.0}%", 100.0 * g))
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

/// `bench replay ...`: `args` without the program name.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<()> {
    let a = ReplayArgs::parse_from(std::iter::once("bench replay".into()).chain(args));
    let (trace, torn) = Trace::read_torn(&a.trace)?;
    if let Some(offset) = torn {
        eprintln!(
            "warning: {} is torn at byte offset {offset} (its writer was killed?): \
             replaying the {} whole records before it",
            a.trace.display(),
            trace.events.len()
        );
    }
    let sizes = a
        .pool_pages
        .clone()
        .unwrap_or_else(|| vec![trace.pool_buffers as usize]);
    if sizes.contains(&0) {
        return Err(BenchError::Config("--pool-pages must be at least 1".into()));
    }
    let (rels, threads) = (a.relation.clone(), a.threads.clone());
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
    let result = run_replay(&trace, &a.policy, &sizes, |acc| {
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
    print!("{}", table(&result));
    if let Some(path) = &a.svg {
        if sizes.len() < 2 {
            return Err(BenchError::Config(
                "--svg draws a curve over pool sizes: give --pool-pages at least two".into(),
            ));
        }
        let svg = miss_ratio_curve(&result, &a.policy, &subset_name)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::trace::{Access, TraceEvent};
    use bufmgr::{BufferTag, RelFork, RelId};

    /// A loop over 3 pages in a pool of 2, by thread 0, then thread 1
    /// reading page 9 over and over.
    fn trace() -> Trace {
        let mut events = Vec::new();
        let mut at = |rel: u32, block: u32, thread: u32, nanos: u64| {
            events.push(TraceEvent::Access(Access {
                tag: BufferTag::new(RelFork::main(RelId(rel)), block),
                thread,
                hit: false,
                ring: None,
                buffer: 0,
                nanos,
            }))
        };
        for i in 0..30u32 {
            at(1, i % 3, 0, u64::from(i));
        }
        for i in 0..10u32 {
            at(2, 9, 1, 100 + u64::from(i));
        }
        Trace {
            pool_buffers: 2,
            events,
        }
    }

    #[test]
    fn gap_closed_is_measured_from_clock_to_opt_and_subsets_count_apart() {
        let r = run_replay(&trace(), &Policy::ALL, &[2], |a| a.thread == 0);
        assert_eq!((r.accesses, r.subset_accesses), (40, 30));
        assert_eq!(r.recorded_hits, 0, "the trace's own flags");
        let row = |p| r.find(p, 2).unwrap().clone();
        // LRU never hits a loop larger than the pool; thread 1's page stays.
        assert_eq!(row(Policy::Lru).subset_hits, 0);
        assert_eq!(row(Policy::Lru).hits, 9);
        let (clock, opt) = (row(Policy::Engine(Evictor::Clock)), row(Policy::Opt));
        assert!(opt.hits > clock.hits, "{opt:?} vs {clock:?}");
        assert_eq!(r.gap_closed(&clock, false), Some(0.0));
        assert_eq!(r.gap_closed(&opt, false), Some(1.0));
        let text = table(&r).to_string();
        assert!(
            text.contains("recorded (live)") && text.contains("s3fifo"),
            "{text}"
        );
    }
}
