//! `--watch`: a live terminal view of the pool while a scenario runs.
//!
//! The view draws the newest open pool of the process ([`bufmgr::watch`]:
//! pools register themselves when watching is on, so no scenario needs to
//! hand its pool over) a few times a second:
//!
//! ```text
//!  pool 2: clock evictor, 2048 buffers, 1 partition   q: leave the view
//!  hit ratio  54.8%   accesses 214.6k/s   evictions 97.1k/s   (last 0.26 s)
//!  each cell = 3 buffers (683 cells): mean usage; + ! if any, * if half
//!  usage 0 1 2 3 4 5  . empty
//!  marks: * dirty  + pinned  ! I/O in progress  < next buffer of the clock hand
//!  partition 0 (node 0): buffers 0..2047, hand at buffer 1899, pass 690
//!  2 2 2 3 2 4 3 4 2 2 4 2 4 2 3 2 2 4 2 4 2 4 2 4 2 2 2 2 2 3 2 4 3 2 4 3 2 2 3 1
//!  ...
//!  0 0 0!.!.!.!0!.!.!.!.!.!0!0!0 0 1!0!0!0!0!0 0!.!2!.!.!.!.!.!0!1!0!1<1 1 1 2 1 0
//! ```
//!
//! With `--mrc` a sixth header row draws the pool's live miss-ratio curve:
//! per size (0.25x..4x of the pool) a bar as high as the LRU model's hit
//! ratio and the figure, the 1x point in bold (`bufmgr::mrc`; the pool's
//! sampled accesses since it opened).
//!
//! A cell is two columns: the state glyph (a usage digit for the clock, `H`
//! or `C` for HOT/COOL, `P` for the probation region, `.` for an empty
//! buffer) on the state's colour, then a mark. A pool larger than the
//! screen is shown aggregated: each cell covers a range of consecutive
//! buffers of one partition, coloured by the range's mean usage (clock) or
//! its dominant state (HOT/COOL, probation), and the header says how many
//! buffers a cell covers. A tiny pool gets one cell per buffer.
//!
//! # How it runs
//! The scenario's tables, progress bars and the screen would fight over the
//! terminal, and the scenarios print with `println!` in many places. So
//! `bench --watch ...` runs itself again as a child ([`run_in_child`]) with
//! stdout and stderr piped, and prints what the child wrote when it ends.
//! The child ([`run_watched`]) draws the view on `/dev/tty` from a thread of
//! its own while the scenario runs on the main thread, progress bars off.
//!
//! # Rules
//! 1. The terminal is restored (raw mode off, main screen back, cursor
//!    shown) when the view ends, when the scenario ends, and on a panic in
//!    any thread (a panic hook), so a crashed run leaves a usable shell.
//! 2. `q`, `Esc` or Ctrl-C leave the view; the scenario keeps running to its
//!    end and its tables are printed then. Once the view is gone Ctrl-C is
//!    an ordinary interrupt again and stops the run.
//! 3. Rates (hit ratio, accesses and evictions per second) are the
//!    difference of two [`PoolStats`] snapshots of the same pool, a refresh
//!    apart; the first frame of a pool has none.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bufmgr::Evictor;
use bufmgr::stats::PoolStats;
use bufmgr::watch::{BufferState, PartitionView, PoolSnapshot};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::common::fmt_rate;
use crate::error::{BenchError, Result};

/// Time between two frames: fast enough to see the hand move, slow enough
/// that the snapshot (one relaxed load per buffer) costs the run nothing
/// measurable.
pub const REFRESH: Duration = Duration::from_millis(250);

/// Set in the child that draws the view (see the module docs).
pub const CHILD_ENV: &str = "BENCH_WATCH_VIEW";

/// Screen columns per cell: the state glyph and the mark.
const CELL_COLUMNS: u16 = 2;
/// Rows above the grid: title, rates, scale, two legend lines.
const HEADER_ROWS: u16 = 5;

/// Is this process the child that draws the view?
pub fn in_view_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Hit ratio and rates between two statistics snapshots of one pool.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Rates {
    /// Hits / accesses in the interval; `None` if there were no accesses.
    pub hit_ratio: Option<f64>,
    pub accesses_per_sec: f64,
    pub evictions_per_sec: f64,
    pub window: Duration,
}

impl Rates {
    /// The activity between `earlier` (taken at `t0`) and `later` (at `t1`).
    pub fn between(earlier: &PoolStats, t0: Instant, later: &PoolStats, t1: Instant) -> Rates {
        let d = later.since(earlier).totals();
        let window = t1.saturating_duration_since(t0);
        let secs = window.as_secs_f64().max(f64::MIN_POSITIVE);
        Rates {
            hit_ratio: (d.accesses > 0).then(|| d.hit_ratio()),
            accesses_per_sec: d.accesses as f64 / secs,
            evictions_per_sec: d.evictions as f64 / secs,
            window,
        }
    }

    /// The rates line of the view.
    pub fn text(&self) -> String {
        let ratio = self
            .hit_ratio
            .map_or("-".to_string(), |r| format!("{:.1}%", r * 100.0));
        format!(
            "hit ratio {ratio:>6}   accesses {}/s   evictions {}/s   (last {:.2} s)",
            fmt_rate(self.accesses_per_sec),
            fmt_rate(self.evictions_per_sec),
            self.window.as_secs_f64()
        )
    }
}

/// What a cell's first column shows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CellState {
    /// No valid page (or most of the range empty).
    Empty,
    /// Clock: the usage count (the mean over the range, rounded).
    Usage(u8),
    /// HOT/COOL and probation's main region.
    Hot,
    Cool,
    /// Probation: in the probation queue.
    Probation,
}

impl CellState {
    pub fn glyph(self) -> char {
        match self {
            CellState::Empty => '.',
            CellState::Usage(u) => char::from_digit(u32::from(u.min(9)), 10).unwrap_or('?'),
            CellState::Hot => 'H',
            CellState::Cool => 'C',
            CellState::Probation => 'P',
        }
    }

    /// Background colour: cold to hot is blue to red, as on a heat map.
    pub fn colour(self) -> Color {
        match self {
            CellState::Empty => Color::Reset,
            CellState::Usage(0) | CellState::Cool => Color::Blue,
            CellState::Usage(1) => Color::Cyan,
            CellState::Usage(2) => Color::Green,
            CellState::Usage(3) => Color::Yellow,
            CellState::Usage(4) => Color::LightRed,
            CellState::Usage(_) | CellState::Hot => Color::Red,
            CellState::Probation => Color::Magenta,
        }
    }

    fn style(self) -> Style {
        match self {
            CellState::Empty => Style::new().fg(Color::DarkGray),
            s => Style::new().fg(Color::Black).bg(s.colour()),
        }
    }
}

/// What a cell's second column shows, most important first.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The partition's clock hand visits this cell's range next.
    Hand,
    /// A read or write is in flight (any buffer of the range).
    Io,
    /// Pinned right now (any buffer of the range).
    Pinned,
    /// Dirty (at least half of the range's valid buffers).
    Dirty,
    None,
}

impl Mark {
    pub fn glyph(self) -> char {
        match self {
            Mark::Hand => '<',
            Mark::Io => '!',
            Mark::Pinned => '+',
            Mark::Dirty => '*',
            Mark::None => ' ',
        }
    }
}

/// The state and mark of a cell covering `buffers` (`hand`: the hand is on
/// one of them).
pub fn summarise(buffers: &[BufferState], evictor: Evictor, hand: bool) -> (CellState, Mark) {
    let valid: Vec<&BufferState> = buffers.iter().filter(|b| b.valid).collect();
    let n = valid.len();
    let state = if n == 0 || 2 * n < buffers.len() {
        CellState::Empty
    } else {
        match evictor {
            Evictor::Clock => {
                let sum: usize = valid.iter().map(|b| usize::from(b.usage)).sum();
                // Rounded to nearest: (2 sum + n) / 2n.
                CellState::Usage(((2 * sum + n) / (2 * n)) as u8)
            }
            Evictor::HotCool | Evictor::Probation => {
                let probation = valid.iter().filter(|b| b.probation).count();
                let hot = valid.iter().filter(|b| !b.probation && b.usage > 0).count();
                let cool = n - probation - hot;
                if probation > hot && probation >= cool {
                    CellState::Probation
                } else if hot >= cool {
                    CellState::Hot
                } else {
                    CellState::Cool
                }
            }
        }
    };
    let mark = if hand {
        Mark::Hand
    } else if buffers.iter().any(|b| b.io_in_progress) {
        Mark::Io
    } else if buffers.iter().any(|b| b.pins > 0) {
        Mark::Pinned
    } else if n > 0 && 2 * valid.iter().filter(|b| b.dirty).count() >= n {
        Mark::Dirty
    } else {
        Mark::None
    };
    (state, mark)
}

/// How the grid is laid out on a screen of a given size.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Buffers per cell (1 when the pool fits).
    pub per_cell: usize,
    /// Cells per grid row.
    pub columns: usize,
}

impl Plan {
    /// Rows needed: per partition a label row and its cells' rows.
    fn rows(partitions: &[PartitionView], per_cell: usize, columns: usize) -> usize {
        partitions
            .iter()
            .map(|p| 1 + (p.len as usize).div_ceil(per_cell).div_ceil(columns))
            .sum()
    }

    /// The fewest buffers per cell that fit every partition into `width` x
    /// `rows` (if even one cell per partition does not fit, that, clipped).
    pub fn fit(partitions: &[PartitionView], width: u16, rows: u16) -> Plan {
        let columns = usize::from((width / CELL_COLUMNS).max(1));
        let rows = usize::from(rows);
        let largest = partitions.iter().map(|p| p.len as usize).max().unwrap_or(1);
        let (mut lo, mut hi) = (1, largest.max(1));
        // Plan::rows only falls as per_cell grows: binary search the least.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if Plan::rows(partitions, mid, columns) <= rows {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Plan {
            per_cell: lo,
            columns,
        }
    }
}

/// One frame of the view: a snapshot (or none yet) and its rates.
#[derive(Debug)]
pub struct View<'a> {
    pub snapshot: Option<&'a PoolSnapshot>,
    pub rates: Option<Rates>,
}

fn line(buf: &mut Buffer, area: Rect, row: u16, spans: Vec<Span<'_>>) {
    if row < area.height {
        let r = Rect::new(area.x, area.y + row, area.width, 1);
        Line::from(spans).render(r, buf);
    }
}

fn swatch(s: CellState, text: &str) -> Span<'static> {
    Span::styled(format!("{}{text}", s.glyph()), s.style())
}

impl Widget for View<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let quit = "q: leave the view";
        let Some(snap) = self.snapshot else {
            line(
                buf,
                area,
                0,
                vec![Span::raw(format!("bench --watch   {quit}"))],
            );
            line(
                buf,
                area,
                1,
                vec![Span::raw(
                    "no pool open yet (the scenario is starting, or between runs)",
                )],
            );
            return;
        };
        header(buf, area, snap, self.rates.as_ref(), quit);
        // With a miss-ratio curve (`--mrc`), one more header row draws it.
        let header_rows = HEADER_ROWS + u16::from(snap.mrc.is_some());
        if let Some(curve) = &snap.mrc {
            line(buf, area, HEADER_ROWS, curve_spans(curve));
        }
        let plan = Plan::fit(
            &snap.partitions,
            area.width,
            area.height.saturating_sub(header_rows),
        );
        scale_and_legend(buf, area, snap, &plan);
        partitions(buf, area, snap, &plan, header_rows);
    }
}

/// Rows 0 and 1: the pool, its evictor and partitions; the rates (or, in a
/// pool's first frame, its totals since it opened).
fn header(buf: &mut Buffer, area: Rect, snap: &PoolSnapshot, rates: Option<&Rates>, quit: &str) {
    let n = snap.buffers.len();
    let parts = &snap.partitions;
    line(
        buf,
        area,
        0,
        vec![
            Span::styled(
                format!(
                    "pool {}: {} evictor, {n} buffers, {} partition{}",
                    snap.pool_id,
                    snap.evictor,
                    parts.len(),
                    if parts.len() == 1 { "" } else { "s" }
                ),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::raw(format!("   {quit}")),
        ],
    );
    let rates = match rates {
        Some(r) => r.text(),
        None => {
            // A pool's first frame: its totals since it opened.
            let t = snap.stats.totals();
            let ratio = (t.accesses > 0)
                .then(|| format!("{:.1}%", 100.0 * t.hits as f64 / t.accesses as f64));
            format!(
                "hit ratio {:>6} since the pool opened ({} accesses)",
                ratio.as_deref().unwrap_or("-"),
                t.accesses
            )
        }
    };
    line(buf, area, 1, vec![Span::raw(rates)]);
}

/// Rows 2 to 4: what a cell stands for, the legend of the evictor's
/// states, the marks.
fn scale_and_legend(buf: &mut Buffer, area: Rect, snap: &PoolSnapshot, plan: &Plan) {
    let parts = &snap.partitions;
    let cells: usize = parts
        .iter()
        .map(|p| (p.len as usize).div_ceil(plan.per_cell))
        .sum();
    let scale = if plan.per_cell == 1 {
        format!("each cell = 1 buffer ({cells} cells)")
    } else {
        let how = match snap.evictor {
            Evictor::Clock => "mean usage",
            _ => "dominant state",
        };
        format!(
            "each cell = {} buffers ({cells} cells): {how}; + ! if any, * if half",
            plan.per_cell
        )
    };
    line(buf, area, 2, vec![Span::raw(scale)]);
    let mut legend = Vec::new();
    match snap.evictor {
        Evictor::Clock => {
            legend.push(Span::raw("usage "));
            for u in 0..=bufmgr::desc::MAX_USAGE_COUNT as u8 {
                legend.push(swatch(CellState::Usage(u), " "));
            }
        }
        e => {
            legend.push(swatch(CellState::Hot, "OT "));
            legend.push(swatch(CellState::Cool, "OOL "));
            if e == Evictor::Probation {
                legend.push(swatch(CellState::Probation, "robation "));
            }
        }
    }
    legend.push(Span::raw(" "));
    legend.push(swatch(CellState::Empty, " empty"));
    line(buf, area, 3, legend);
    line(
        buf,
        area,
        4,
        vec![Span::raw(
            "marks: * dirty  + pinned  ! I/O in progress  < next buffer of the clock hand",
        )],
    );
}

/// From `first_row` (after the header rows): each partition's line and its cells, as many
/// as fit.
fn partitions(buf: &mut Buffer, area: Rect, snap: &PoolSnapshot, plan: &Plan, first_row: u16) {
    let n = snap.buffers.len();
    let parts = &snap.partitions;
    let mut row = first_row;
    for (i, p) in parts.iter().enumerate() {
        if row >= area.height {
            break;
        }
        line(
            buf,
            area,
            row,
            vec![Span::styled(
                format!(
                    "partition {i} (node {}): buffers {}..{}, hand at buffer {}, pass {}",
                    p.node,
                    p.first,
                    p.first + p.len - 1,
                    p.first + p.hand,
                    p.passes
                ),
                Style::new().add_modifier(Modifier::UNDERLINED),
            )],
        );
        row += 1;
        let first = p.first as usize;
        let end = first + p.len as usize;
        let hand = first + p.hand as usize;
        for (c, start) in (first..end).step_by(plan.per_cell).enumerate() {
            let y = row + (c / plan.columns) as u16;
            if y >= area.height {
                break;
            }
            let stop = (start + plan.per_cell).min(end);
            let range = &snap.buffers[start.min(n)..stop.min(n)];
            let (state, mark) = summarise(range, snap.evictor, (start..stop).contains(&hand));
            let x = area.x + (c % plan.columns) as u16 * CELL_COLUMNS;
            let style = state.style();
            buf[(x, area.y + y)]
                .set_char(state.glyph())
                .set_style(style);
            if CELL_COLUMNS > 1 && x + 1 < area.x + area.width {
                let mark_style = if mark == Mark::Hand {
                    style.add_modifier(Modifier::BOLD)
                } else {
                    style
                };
                buf[(x + 1, area.y + y)]
                    .set_char(mark.glyph())
                    .set_style(mark_style);
            }
        }
        row += (p.len as usize)
            .div_ceil(plan.per_cell)
            .div_ceil(plan.columns) as u16;
    }
}

/// Eighths of a cell, for the curve's bars.
const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The curve's row: `LRU hit% by pool size:` then, per size, a bar as high
/// as its hit ratio and the figure (`0.25x ▅ 61.6`), the 1x point bold.
pub fn curve_spans(curve: &bufmgr::MissRatioCurve) -> Vec<Span<'static>> {
    let mut spans = vec![Span::raw("LRU hit% by pool size (--mrc):")];
    for p in &curve.points {
        let eighths = (p.hit_ratio.clamp(0.0, 1.0) * 8.0).round() as usize;
        let style = if p.multiple == 1.0 {
            Style::new().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        spans.push(Span::raw(format!("  {}x ", p.multiple)));
        spans.push(Span::styled(
            BARS[eighths.min(8)].to_string(),
            Style::new().fg(Color::Cyan),
        ));
        spans.push(Span::styled(format!(" {:.1}", 100.0 * p.hit_ratio), style));
    }
    let inv = if curve.sample_rate > 0.0 {
        format!("1/{:.0}", 1.0 / curve.sample_rate)
    } else {
        "-".into()
    };
    spans.push(Span::raw(format!(
        "   ({} sampled pages, rate {inv})",
        curve.sampled_pages
    )));
    spans
}

/// The previous frame's statistics, to compute [`Rates`] from.
#[derive(Debug)]
struct Previous {
    pool_id: u64,
    stats: PoolStats,
    taken: Instant,
}

/// Why the view ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ViewEnd {
    /// `q`, `Esc` or Ctrl-C.
    Left,
    /// The scenario finished.
    ScenarioDone,
}

/// Set while the terminal is in raw mode on the alternate screen.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Leave raw mode and the alternate screen, once (rule 1).
fn restore_terminal() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        if let Ok(mut tty) = File::options().write(true).open("/dev/tty") {
            let _ = execute!(tty, terminal::LeaveAlternateScreen, cursor::Show);
        }
    }
}

/// Raw mode and the alternate screen for as long as it lives.
struct Session;

impl Session {
    fn enter(tty: &mut File) -> std::io::Result<Session> {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_terminal();
            previous(info);
        }));
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let session = Session;
        execute!(tty, terminal::EnterAlternateScreen, cursor::Hide)?;
        Ok(session)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        restore_terminal();
    }
}

fn is_quit(k: &event::KeyEvent) -> bool {
    k.kind == KeyEventKind::Press
        && match k.code {
            KeyCode::Char('q') | KeyCode::Esc => true,
            KeyCode::Char('c') => k.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        }
}

/// What the view cost: frames drawn and the time spent taking snapshots
/// and drawing them (the view thread's busy time, sleeping excluded).
#[derive(Copy, Clone, Debug, Default)]
struct ViewCost {
    frames: u64,
    busy: Duration,
}

/// Draw frames on `tty` until the user leaves or `done` is set.
fn view_loop(mut tty: File, done: &AtomicBool, cost: &mut ViewCost) -> std::io::Result<ViewEnd> {
    let _session = Session::enter(&mut tty)?;
    // Buffered: a frame is many small escape sequences, one write at the flush.
    let mut term = Terminal::new(CrosstermBackend::new(BufWriter::new(tty)))?;
    let mut previous: Option<Previous> = None;
    loop {
        let frame_start = Instant::now();
        let snap = bufmgr::watch::newest_pool().and_then(|p| p.snapshot());
        let rates = match (&previous, &snap) {
            (Some(a), Some(b)) if a.pool_id == b.pool_id => {
                Some(Rates::between(&a.stats, a.taken, &b.stats, b.taken))
            }
            _ => None,
        };
        term.draw(|f| {
            f.render_widget(
                View {
                    snapshot: snap.as_ref(),
                    rates,
                },
                f.area(),
            )
        })?;
        previous = snap.map(|s| Previous {
            pool_id: s.pool_id,
            stats: s.stats,
            taken: s.taken,
        });
        cost.frames += 1;
        cost.busy += frame_start.elapsed();
        let next = Instant::now() + REFRESH;
        loop {
            // The scenario ended, or a panic elsewhere restored the
            // terminal (rule 1): draw no more.
            if done.load(Ordering::Relaxed) || !ACTIVE.load(Ordering::SeqCst) {
                return Ok(ViewEnd::ScenarioDone);
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Short polls, so the end of the scenario is seen promptly.
            if event::poll(left.min(Duration::from_millis(50)))?
                && let Event::Key(k) = event::read()?
                && is_quit(&k)
            {
                return Ok(ViewEnd::Left);
            }
        }
    }
}

/// In the view child: run `scenario` with the view drawn beside it (see the
/// module docs). The scenario's progress bars must be off (`--watch` turns
/// them off in [`crate::CommonArgs::resolve`]).
pub fn run_watched<T>(scenario: impl FnOnce() -> Result<T>) -> Result<T> {
    let tty_err = |source| BenchError::Io {
        op: "open (for --watch)",
        path: "/dev/tty".into(),
        source,
    };
    let tty = File::options()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(tty_err)?;
    bufmgr::watch::enable_watching(true);
    let done = Arc::new(AtomicBool::new(false));
    let view = {
        let done = done.clone();
        std::thread::Builder::new()
            .name("watch".into())
            .spawn(move || {
                let mut cost = ViewCost::default();
                let end = view_loop(tty, &done, &mut cost);
                if let Ok(ViewEnd::Left) = end
                    && let Ok(mut tty) = File::options().write(true).open("/dev/tty")
                {
                    let _ = writeln!(
                        tty,
                        "bench --watch: left the view; the run goes on and its tables \
                         follow at its end (Ctrl-C stops it)"
                    );
                }
                end.map(|e| (e, cost))
            })
            .map_err(|e| BenchError::Config(format!("--watch: cannot start the view: {e}")))?
    };
    let result = scenario();
    done.store(true, Ordering::Relaxed);
    match view.join() {
        Ok(Ok((end, cost))) => {
            if end == ViewEnd::Left {
                eprintln!("--watch: the view was left early; the scenario ran on to its end");
            }
            if cost.frames > 0 {
                let each = cost.busy.as_secs_f64() / cost.frames as f64;
                eprintln!(
                    "--watch: {} frame(s), {:.2} ms each to snapshot and draw ({:.2}% of one core at one frame per {} ms)",
                    cost.frames,
                    each * 1e3,
                    100.0 * each / REFRESH.as_secs_f64(),
                    REFRESH.as_millis()
                );
            }
        }
        Ok(Err(e)) => eprintln!("--watch: the view failed: {e}; the scenario ran on"),
        Err(_) => eprintln!("--watch: the view panicked; the scenario ran on"),
    }
    restore_terminal();
    result
}

/// In the process the user started: run this same command again as the
/// view child, its output piped, and print that output when it ends.
/// `--watch` needs a terminal: if stdout is not one, a clear error.
pub fn run_in_child() -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        return Err(BenchError::Config(
            "--watch draws the pool on the terminal, but stdout is not a terminal; \
             run it in one, or leave --watch out"
                .into(),
        ));
    }
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        op: "find (for --watch)",
        path: "the bench executable".into(),
        source,
    })?;
    let out = Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(CHILD_ENV, "1")
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| BenchError::Io {
            op: "run (for --watch)",
            path: exe.clone(),
            source,
        })?;
    let _ = std::io::stdout().write_all(&out.stdout);
    let _ = std::io::stderr().write_all(&out.stderr);
    Ok(match out.status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
        None => {
            eprintln!(
                "bench --watch: the run was ended by a signal ({}); if the terminal misbehaves, run `reset`",
                out.status
            );
            ExitCode::FAILURE
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::{BufferPool, FileStorage, PoolConfig, RelFork, RelId};
    use ratatui::backend::TestBackend;

    const REL: RelFork = RelFork::main(RelId(5));

    /// A pool of `buffers` with no background writer, over a temporary
    /// directory whose relation REL has `blocks` zeroed blocks, none resident.
    fn pool(buffers: usize, blocks: u32, evictor: Evictor) -> (tempfile::TempDir, BufferPool) {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let pool = BufferPool::new(
            PoolConfig::new(buffers).bgwriter(None).evictor(evictor),
            storage,
        )
        .unwrap();
        pool.create_fork(REL).unwrap();
        for _ in 0..blocks {
            let mut p = pool.extend(REL, None).unwrap();
            p.mark_dirty();
        }
        pool.flush_all(true).unwrap();
        pool.evict_relation(REL).unwrap();
        (dir, pool)
    }

    /// A snapshot with the given buffers and partitions (stats from an idle
    /// real pool: the view only draws their differences).
    fn synthetic(
        evictor: Evictor,
        buffers: Vec<BufferState>,
        partitions: Vec<PartitionView>,
    ) -> PoolSnapshot {
        let (_dir, p) = pool(16, 0, evictor);
        PoolSnapshot {
            pool_id: 42,
            evictor,
            buffers,
            partitions,
            stats: p.stats(),
            taken: Instant::now(),
            mrc: None,
        }
    }

    fn one_partition(len: u32, hand: u32) -> Vec<PartitionView> {
        vec![PartitionView {
            first: 0,
            len,
            node: 0,
            hand,
            passes: 3,
        }]
    }

    fn valid(usage: u8) -> BufferState {
        BufferState {
            valid: true,
            usage,
            ..Default::default()
        }
    }

    fn render(snap: &PoolSnapshot, rates: Option<Rates>, w: u16, h: u16) -> Buffer {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| {
            f.render_widget(
                View {
                    snapshot: Some(snap),
                    rates,
                },
                f.area(),
            )
        })
        .unwrap();
        t.backend().buffer().clone()
    }

    fn row_text(b: &Buffer, y: u16) -> String {
        (0..b.area.width).map(|x| b[(x, y)].symbol()).collect()
    }

    /// The state glyph, its background and the mark of cell `c` of the
    /// first grid row of partition 0.
    fn cell(b: &Buffer, c: u16) -> (String, Color, String) {
        let y = HEADER_ROWS + 1;
        let x = c * CELL_COLUMNS;
        (
            b[(x, y)].symbol().to_string(),
            b[(x, y)].bg,
            b[(x + 1, y)].symbol().to_string(),
        )
    }

    #[test]
    fn hot_cool_and_empty_buffers_have_their_glyphs_colours_and_marks() {
        let dirty_hot = BufferState {
            dirty: true,
            ..valid(1)
        };
        let snap = synthetic(
            Evictor::HotCool,
            vec![valid(1), valid(0), BufferState::default(), dirty_hot],
            one_partition(4, 1),
        );
        let b = render(&snap, None, 60, 12);
        assert_eq!(cell(&b, 0), ("H".into(), Color::Red, " ".into()));
        assert_eq!(cell(&b, 1), ("C".into(), Color::Blue, "<".into()), "hand");
        assert_eq!(cell(&b, 2), (".".into(), Color::Reset, " ".into()));
        assert_eq!(cell(&b, 3), ("H".into(), Color::Red, "*".into()));
        assert!(row_text(&b, 2).starts_with("each cell = 1 buffer (4 cells)"));
        assert!(row_text(&b, 0).contains("hotcool evictor, 4 buffers, 1 partition"));
    }

    #[test]
    fn clock_usage_levels_pins_and_io_are_shown() {
        let mut bufs: Vec<BufferState> = (0..=5).map(valid).collect();
        bufs[2].pins = 1;
        bufs[4].io_in_progress = true;
        bufs[4].pins = 1;
        let snap = synthetic(Evictor::Clock, bufs, one_partition(6, 5));
        let b = render(&snap, None, 60, 12);
        let colours = [
            Color::Blue,
            Color::Cyan,
            Color::Green,
            Color::Yellow,
            Color::LightRed,
            Color::Red,
        ];
        let marks = [" ", " ", "+", " ", "!", "<"];
        for u in 0..6u16 {
            let (g, bg, m) = cell(&b, u);
            assert_eq!(g, u.to_string(), "usage {u}");
            assert_eq!(bg, colours[u as usize], "usage {u}");
            assert_eq!(m, marks[u as usize], "usage {u}: I/O wins over the pin");
        }
        // The legend shows the six levels in their colours.
        let legend = row_text(&b, 3);
        assert!(legend.starts_with("usage 0 1 2 3 4 5"), "{legend}");
        assert_eq!(b[(6, 3)].bg, Color::Blue);
        assert_eq!(b[(16, 3)].bg, Color::Red);
    }

    #[test]
    fn probation_region_is_its_own_colour() {
        let prob = BufferState {
            probation: true,
            ..valid(0)
        };
        let snap = synthetic(
            Evictor::Probation,
            vec![prob, valid(1), valid(0)],
            one_partition(3, 2),
        );
        let b = render(&snap, None, 60, 12);
        assert_eq!(cell(&b, 0), ("P".into(), Color::Magenta, " ".into()));
        assert_eq!(cell(&b, 1).0, "H");
        assert_eq!(cell(&b, 2), ("C".into(), Color::Blue, "<".into()));
        assert!(row_text(&b, 3).contains("Probation"));
    }

    #[test]
    fn each_partition_has_a_label_with_its_hand() {
        let parts = vec![
            PartitionView {
                first: 0,
                len: 4,
                node: 0,
                hand: 1,
                passes: 7,
            },
            PartitionView {
                first: 4,
                len: 4,
                node: 1,
                hand: 2,
                passes: 9,
            },
        ];
        let snap = synthetic(Evictor::Clock, vec![valid(1); 8], parts);
        let b = render(&snap, None, 70, 14);
        let l0 = row_text(&b, HEADER_ROWS);
        let l1 = row_text(&b, HEADER_ROWS + 2);
        assert!(
            l0.starts_with("partition 0 (node 0): buffers 0..3, hand at buffer 1, pass 7"),
            "{l0}"
        );
        assert!(
            l1.starts_with("partition 1 (node 1): buffers 4..7, hand at buffer 6, pass 9"),
            "{l1}"
        );
        // Partition 1's cells are on their own row, its hand on buffer 6.
        let y = HEADER_ROWS + 3;
        assert_eq!(b[(2 * CELL_COLUMNS + 1, y)].symbol(), "<");
        assert_eq!(b[(CELL_COLUMNS + 1, y)].symbol(), " ");
        assert!(row_text(&b, 0).contains("8 buffers, 2 partitions"));
    }

    #[test]
    fn a_big_pool_is_aggregated_and_the_scale_is_shown() {
        let n = 100_000;
        // The first half at usage 5, the second at 1 (mean 1.4 -> 1 in a
        // cell of the second half; no cell straddles unevenly enough to
        // matter at the two ends).
        let bufs: Vec<BufferState> = (0..n)
            .map(|i| valid(if i < n / 2 { 5 } else { 1 }))
            .collect();
        let snap = synthetic(Evictor::Clock, bufs, one_partition(n as u32, 0));
        let (w, h) = (80, 24);
        // 40 cells a row, 24 - 5 header - 1 label = 18 rows: 720 cells.
        let plan = Plan::fit(&snap.partitions, w, h - HEADER_ROWS);
        assert_eq!(
            plan,
            Plan {
                per_cell: 139,
                columns: 40
            }
        );
        let b = render(&snap, None, w, h);
        let scale = row_text(&b, 2);
        assert!(
            scale.starts_with(
                "each cell = 139 buffers (720 cells): mean usage; + ! if any, * if half"
            ),
            "{scale}"
        );
        assert_eq!(cell(&b, 1), ("5".into(), Color::Red, " ".into()));
        let last = HEADER_ROWS + 1 + 17;
        assert_eq!(b[(0, last)].symbol(), "1");
        assert_eq!(b[(0, last)].bg, Color::Cyan);
        // A pool that fits gets one cell per buffer.
        assert_eq!(
            Plan::fit(&one_partition(700, 0), w, h - HEADER_ROWS).per_cell,
            1
        );
    }

    #[test]
    fn an_aggregated_cell_takes_the_dominant_state_and_any_pin() {
        let mut bufs = vec![valid(1), valid(1), valid(0), BufferState::default()];
        assert_eq!(
            summarise(&bufs, Evictor::HotCool, false),
            (CellState::Hot, Mark::None)
        );
        bufs[2].pins = 2;
        assert_eq!(summarise(&bufs, Evictor::HotCool, false).1, Mark::Pinned);
        let empty = [BufferState::default(), BufferState::default(), valid(3)];
        assert_eq!(summarise(&empty, Evictor::Clock, false).0, CellState::Empty);
        // Dirty when at least half of the valid buffers are.
        let d = BufferState {
            dirty: true,
            ..valid(2)
        };
        assert_eq!(
            summarise(&[d, valid(2), valid(2)], Evictor::Clock, false).1,
            Mark::None
        );
        assert_eq!(
            summarise(&[d, valid(2)], Evictor::Clock, false).1,
            Mark::Dirty
        );
        // Mean usage rounded to nearest: (5 + 0 + 0 + 1) / 4 = 1.5 -> 2.
        let m = [valid(5), valid(0), valid(0), valid(1)];
        assert_eq!(
            summarise(&m, Evictor::Clock, true),
            (CellState::Usage(2), Mark::Hand)
        );
    }

    #[test]
    fn rates_come_from_two_stats_snapshots() {
        let (_dir, p) = pool(16, 24, Evictor::Clock);
        for b in 0..16 {
            drop(p.read_buffer(REL, b, None).unwrap());
        }
        let s0 = p.stats();
        // 16 hits, then 8 misses that each evict a page.
        for b in 0..24 {
            drop(p.read_buffer(REL, b, None).unwrap());
        }
        let s1 = p.stats();
        let t0 = Instant::now();
        let r = Rates::between(&s0, t0, &s1, t0 + Duration::from_secs(2));
        assert_eq!(r.hit_ratio, Some(16.0 / 24.0));
        assert_eq!((r.accesses_per_sec, r.evictions_per_sec), (12.0, 4.0));
        assert_eq!(
            r.text(),
            "hit ratio  66.7%   accesses 12/s   evictions 4/s   (last 2.00 s)"
        );
        let idle = Rates::between(&s1, t0, &s1, t0 + REFRESH);
        assert_eq!(idle.hit_ratio, None);
        assert!(idle.text().starts_with("hit ratio      -   accesses 0/s"));
        let snap = p.watch_snapshot();
        let b = render(&snap, Some(r), 80, 12);
        assert!(row_text(&b, 1).starts_with(&r.text()));
    }

    #[test]
    fn a_real_pool_after_a_known_access_pattern() {
        let (_dir, p) = pool(16, 8, Evictor::Clock);
        // Block 0 pinned three times (usage 3), block 1 once (usage 1),
        // block 2 left pinned, block 3 dirtied.
        for _ in 0..3 {
            drop(p.read_buffer(REL, 0, None).unwrap());
        }
        drop(p.read_buffer(REL, 1, None).unwrap());
        let held = p.read_buffer(REL, 2, None).unwrap();
        let mut w = p.read_buffer(REL, 3, None).unwrap().lock_exclusive();
        w.mark_dirty();
        drop(w);
        let buffer_of = |block: u32| {
            p.buffercache()
                .into_iter()
                .find(|r| r.tag.is_some_and(|t| t.block == block))
                .map(|r| r.id as u16)
                .unwrap()
        };
        let snap = p.watch_snapshot();
        let hand = snap.partitions[0].hand as u16;
        let b = render(&snap, None, 60, 12);
        let expect = |block: u32, glyph: &str, bg: Color, mark: &str| {
            let id = buffer_of(block);
            let mark = if id == hand { "<" } else { mark };
            assert_eq!(
                cell(&b, id),
                (glyph.into(), bg, mark.into()),
                "block {block}"
            );
        };
        expect(0, "3", Color::Yellow, " ");
        expect(1, "1", Color::Cyan, " ");
        expect(2, "1", Color::Cyan, "+");
        expect(3, "1", Color::Cyan, "*");
        let used: Vec<u16> = (0..4).map(buffer_of).collect();
        let empty = (0..16u16).filter(|i| !used.contains(i)).count();
        let dots = (0..16u16).filter(|&i| cell(&b, i).0 == ".").count();
        assert_eq!(dots, empty, "every other buffer is empty");
        drop(held);
    }

    #[test]
    fn a_pool_with_a_miss_ratio_curve_draws_it_above_the_grid() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let p = BufferPool::new(
            PoolConfig::new(16)
                .bgwriter(None)
                .mrc(Some(bufmgr::MrcConfig {
                    rate_inverse: 1,
                    max_keys: 1024,
                })),
            storage,
        )
        .unwrap();
        p.create_fork(REL).unwrap();
        for _ in 0..32 {
            drop(p.extend(REL, None).unwrap());
        }
        // Blocks 0..8 twice more: reuses at a distance of 8 pages, hits
        // in an LRU cache of 16 pages and more, misses below.
        for _ in 0..2 {
            for b in 0..8 {
                drop(p.read_buffer(REL, b, None).unwrap());
            }
        }
        let curve = p.miss_ratio_curve().expect("sampling is on");
        let mut snap = p.watch_snapshot();
        assert!(snap.mrc.is_some(), "the snapshot carries the curve");
        snap.mrc = Some(curve.clone());
        let b = render(&snap, None, 100, 20);
        let text = row_text(&b, HEADER_ROWS);
        assert!(text.starts_with("LRU hit% by pool size"), "{text}");
        for pt in &curve.points {
            assert!(
                text.contains(&format!("{}x ", pt.multiple))
                    && text.contains(&format!(" {:.1}", 100.0 * pt.hit_ratio)),
                "{pt:?} in {text}"
            );
        }
        // The grid moves down one row: its partition label is below the curve.
        assert!(row_text(&b, HEADER_ROWS + 1).starts_with("partition 0"));
        // Without a curve there is no such row.
        snap.mrc = None;
        let b = render(&snap, None, 100, 20);
        assert!(row_text(&b, HEADER_ROWS).starts_with("partition 0"));
    }
}
