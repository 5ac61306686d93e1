//! The trace formats of the literature, read as a stream of page accesses
//! and written from an engine trace:
//!
//! | format | what a record is | one record gives |
//! |---|---|---|
//! | `oracleGeneral` | libCacheSim's binary format: 24 bytes, little-endian `u32` time, `u64` object id, `u32` size, `i64` next access (the request number of the object's next request, -1 for none) | one access to the object (its size is not used: the replay counts pages) |
//! | `lis` | the ARC paper's text format (its OLTP and DS1 traces): `start_block count ignored request_number` per line | `count` accesses, to blocks `start_block..start_block + count` |
//! | `csv` | comma-separated text with named columns (the first line names them, or `--columns` for a file without one, as MSR Cambridge's): `object`, or `offset` with `size`; optionally `time` and `op` | `object`: one access; `offset`/`size` (bytes): an access to each page of `page_size` bytes the range touches |
//! | `engine` | the engine's own (`bufmgr::trace`) | read whole by `bufmgr::trace::Trace` (its threads are merged by time) |
//!
//! Each file may be zstd-compressed (found by the zstd magic number, or the
//! `.zst` extension). The readers stream: a buffered reader over the file
//! (or the zstd decoder over it) decodes one record at a time, so a trace
//! of any length is read in bounded memory. Bad input is an error naming
//! the file, the line (text) or byte offset (binary), and the value.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use bufmgr::tag::{BufferTag, Fork, PAGE_SIZE, RelFork, RelId};
use bufmgr::trace::Trace;

use crate::policy::NEVER;

/// The zstd frame magic number.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// An `oracleGeneral` record's bytes.
pub const ORACLE_RECORD: usize = 24;

/// Errors reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("{path}: {op}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A record that cannot be read: `at` is "line N" or "byte offset N".
    #[error("{path}, {at}: {detail}")]
    Bad {
        path: PathBuf,
        at: String,
        detail: String,
    },
    #[error("{0}")]
    Usage(String),
}

pub type Result<T> = std::result::Result<T, FormatError>;

/// A trace file format.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Format {
    Engine,
    OracleGeneral,
    Lis,
    Csv,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Format, String> {
        match s {
            "engine" => Ok(Format::Engine),
            "oracleGeneral" | "oraclegeneral" => Ok(Format::OracleGeneral),
            "lis" => Ok(Format::Lis),
            "csv" => Ok(Format::Csv),
            other => Err(format!(
                "unknown trace format {other:?}: expected engine, oracleGeneral, lis or csv"
            )),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Engine => "engine",
            Format::OracleGeneral => "oracleGeneral",
            Format::Lis => "lis",
            Format::Csv => "csv",
        })
    }
}

/// One page access of a streamed trace.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Req {
    /// The object (page) id.
    pub obj: u64,
    /// The request number of the object's next request when the format
    /// carries it (`oracleGeneral`), else [`NEVER`]; see [`Reader::has_next`].
    pub next: u64,
}

/// How to read a CSV trace.
#[derive(Clone, Debug, Default)]
pub struct CsvOptions {
    /// The columns' names, for a file without a header line (`None`: the
    /// first line names them).
    pub columns: Option<Vec<String>>,
    /// Skip rows whose `op` column is a write.
    pub reads_only: bool,
}

/// What a reader needs besides the file.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    pub format: Format,
    /// Bytes per page for `csv`'s byte offsets and sizes.
    pub page_size: u64,
    pub csv: CsvOptions,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            format: Format::OracleGeneral,
            page_size: PAGE_SIZE as u64,
            csv: CsvOptions::default(),
        }
    }
}

/// The object id an engine page gets in the public formats: relation << 32
/// | block, with the free-space-map fork marked by the relation's top bit
/// (so its pages do not collide with the main fork's). `Err` for a
/// relation id that needs that bit.
pub fn object_id(tag: &BufferTag) -> std::result::Result<u64, String> {
    let rel = tag.rel.0;
    if rel >= 1 << 31 {
        return Err(format!(
            "relation id {rel} does not fit an object id (relation << 32 | block, top bit = fork)"
        ));
    }
    let fork = u64::from(tag.fork == Fork::FreeSpace) << 63;
    Ok(fork | (u64::from(rel) << 32) | u64::from(tag.block))
}

/// The engine page an object id names (the inverse of [`object_id`]); any
/// other format's object ids map onto pages this way too, so the engine's
/// evictors can replay them.
pub fn tag_of(obj: u64) -> BufferTag {
    let fork = if obj >> 63 == 1 {
        Fork::FreeSpace
    } else {
        Fork::Main
    };
    BufferTag::new(
        RelFork {
            rel: RelId(((obj >> 32) as u32) & !(1 << 31)),
            fork,
        },
        obj as u32,
    )
}

/// Open `path`, through a zstd decoder if it is compressed.
fn open(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let io = |op, source| FormatError::Io {
        op,
        path: path.to_path_buf(),
        source,
    };
    let mut f = BufReader::with_capacity(1 << 16, File::open(path).map_err(|e| io("open", e))?);
    let head = f.fill_buf().map_err(|e| io("read", e))?;
    let zst = head.starts_with(&ZSTD_MAGIC) || path.extension().is_some_and(|e| e == "zst");
    if zst {
        let d = zstd::stream::read::Decoder::with_buffer(f).map_err(|e| io("zstd", e))?;
        Ok(Box::new(BufReader::with_capacity(1 << 16, d)))
    } else {
        Ok(Box::new(f))
    }
}

/// A record's page ids, first to last.
type Pages = std::ops::RangeInclusive<u64>;

/// One oracleGeneral record at byte offset `at`; the error's detail if its
/// next access cannot be.
#[inline]
fn decode_oracle(rec: &[u8; ORACLE_RECORD], at: u64) -> std::result::Result<Req, String> {
    let obj = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
    let next = i64::from_le_bytes(rec[16..24].try_into().expect("8 bytes"));
    // The record's request number; its next request must come after it.
    let request = at / ORACLE_RECORD as u64;
    let next = match next {
        -1 => NEVER,
        n if n >= 0 && n as u64 > request => n as u64,
        n if n >= 0 => {
            return Err(format!(
                "next access {n} is not after this record (request {request}): OPT would \
                 replay a future that cannot be"
            ));
        }
        n => return Err(format!("next access {n}: neither a request number nor -1")),
    };
    Ok(Req { obj, next })
}

/// A streaming reader of a public-format trace: an iterator of accesses.
pub struct Reader {
    path: PathBuf,
    input: Box<dyn BufRead + Send>,
    kind: Kind,
    /// Byte offset (binary) or line number (text) of the next record.
    pos: u64,
    /// The accesses left of the current text record (lis, csv ranges);
    /// inclusive, so that a record may name page `u64::MAX`.
    pending: Pages,
    line: String,
    done: bool,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

enum Kind {
    Oracle,
    Lis,
    Csv(CsvLayout),
}

/// Which column holds what (0-based).
struct CsvLayout {
    object: Option<usize>,
    offset: Option<usize>,
    size: Option<usize>,
    op: Option<usize>,
    page_size: u64,
    reads_only: bool,
}

impl Reader {
    /// Open `path` for streaming. The engine's own format is not streamed
    /// (see the module docs): asking for it here is an error.
    pub fn open(path: &Path, o: &ReadOptions) -> Result<Reader> {
        let mut input = open(path)?;
        let mut line_no = 0;
        let kind = match o.format {
            Format::Engine => {
                return Err(FormatError::Usage(format!(
                    "{}: the engine's format is read whole (bufmgr::trace::Trace), not streamed",
                    path.display()
                )));
            }
            Format::OracleGeneral => Kind::Oracle,
            Format::Lis => Kind::Lis,
            Format::Csv => {
                if o.page_size == 0 {
                    return Err(FormatError::Usage("a page size of 0 bytes".into()));
                }
                let names = match &o.csv.columns {
                    Some(c) => c.clone(),
                    None => {
                        let mut header = String::new();
                        input.read_line(&mut header).map_err(|e| FormatError::Bad {
                            path: path.to_path_buf(),
                            at: "line 1 (the header)".into(),
                            detail: format!("read: {e}"),
                        })?;
                        line_no = 1;
                        header
                            .trim_end()
                            .split(',')
                            .map(|c| c.trim().to_string())
                            .collect()
                    }
                };
                Kind::Csv(csv_layout(path, &names, o)?)
            }
        };
        Ok(Reader {
            path: path.to_path_buf(),
            input,
            kind,
            pos: line_no,
            pending: Pages::new(1, 0),
            line: String::new(),
            done: false,
        })
    }

    /// Whether the records carry each access's next use (OPT needs it).
    pub fn has_next(&self) -> bool {
        matches!(self.kind, Kind::Oracle)
    }

    fn bad(&self, at: String, detail: String) -> FormatError {
        FormatError::Bad {
            path: self.path.clone(),
            at,
            detail,
        }
    }

    /// Replace `out` with the next accesses, at most `max` (at least 1):
    /// empty at the end of the trace. oracleGeneral records are decoded
    /// straight from the input's buffer, many per call, rather than one
    /// read per record; the text formats go access by access. The same
    /// accesses, in the same order, as the iterator, and the same errors.
    pub fn next_batch(&mut self, out: &mut Vec<Req>, max: usize) -> Result<()> {
        out.clear();
        let max = max.max(1);
        if matches!(self.kind, Kind::Oracle) {
            while out.len() < max && !self.done {
                let take = {
                    let (path, pos) = (&self.path, self.pos);
                    let buf = self.input.fill_buf().map_err(|e| FormatError::Bad {
                        path: path.clone(),
                        at: format!("byte offset {pos}"),
                        detail: format!("read: {e}"),
                    })?;
                    let whole = buf.len() / ORACLE_RECORD;
                    if whole == 0 {
                        // The end, or a record cut across the buffer's
                        // end: one record the careful way.
                        match self.next_oracle()? {
                            Some(q) => out.push(q),
                            None => self.done = true,
                        }
                        continue;
                    }
                    let n = whole.min(max - out.len());
                    for rec in buf[..n * ORACLE_RECORD].chunks_exact(ORACLE_RECORD) {
                        let rec: &[u8; ORACLE_RECORD] = rec.try_into().expect("a whole record");
                        // Read from `buf` while `self` is borrowed: errors
                        // are built after the borrow ends.
                        match decode_oracle(rec, self.pos) {
                            Ok(q) => out.push(q),
                            Err(detail) => {
                                let at = format!("byte offset {}", self.pos);
                                return Err(FormatError::Bad {
                                    path: self.path.clone(),
                                    at,
                                    detail,
                                });
                            }
                        }
                        self.pos += ORACLE_RECORD as u64;
                    }
                    n * ORACLE_RECORD
                };
                self.input.consume(take);
            }
            return Ok(());
        }
        while out.len() < max {
            match self.next() {
                Some(q) => out.push(q?),
                None => break,
            }
        }
        Ok(())
    }

    fn next_oracle(&mut self) -> Result<Option<Req>> {
        let mut rec = [0u8; ORACLE_RECORD];
        let mut got = 0;
        while got < ORACLE_RECORD {
            match self.input.read(&mut rec[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // A damaged or cut zstd frame fails here: name the record.
                Err(e) => {
                    return Err(self.bad(format!("byte offset {}", self.pos), format!("read: {e}")));
                }
            }
        }
        if got == 0 {
            return Ok(None);
        }
        let at = self.pos;
        if got < ORACLE_RECORD {
            return Err(self.bad(
                format!("byte offset {at}"),
                format!("a truncated record: {got} of {ORACLE_RECORD} bytes"),
            ));
        }
        let q = decode_oracle(&rec, at).map_err(|d| self.bad(format!("byte offset {at}"), d))?;
        self.pos += ORACLE_RECORD as u64;
        Ok(Some(q))
    }

    /// The next line's fields, or `None` at the end; blank lines skipped.
    fn next_line(&mut self) -> Result<Option<()>> {
        loop {
            self.line.clear();
            let n = self.input.read_line(&mut self.line).map_err(|e| {
                // A damaged or cut zstd frame fails here: name the line.
                self.bad(format!("line {}", self.pos + 1), format!("read: {e}"))
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.pos += 1;
            if !self.line.trim().is_empty() {
                return Ok(Some(()));
            }
        }
    }

    fn number(&self, what: &str, field: Option<&str>) -> Result<u64> {
        let line = self.pos;
        let f =
            field.ok_or_else(|| self.bad(format!("line {line}"), format!("no {what} field")))?;
        f.trim().parse::<u64>().map_err(|_| {
            self.bad(
                format!("line {line}"),
                format!("{what} {:?} is not a non-negative integer", f.trim()),
            )
        })
    }

    /// The next record's range of page ids (lis, csv).
    fn next_range(&mut self) -> Result<Option<Pages>> {
        loop {
            if self.next_line()?.is_none() {
                return Ok(None);
            }
            let line = self.pos;
            let range = match &self.kind {
                Kind::Lis => {
                    let mut f = self.line.split_whitespace();
                    let start = self.number("start block", f.next())?;
                    let count = self.number("block count", f.next())?;
                    // The last two fields are not used, but a line without
                    // them is cut short (a torn last line "100 2" of
                    // "100 25 0 7" would replay 2 blocks for 25).
                    for what in ["third field", "request number"] {
                        if f.next().is_none() {
                            return Err(self.bad(
                                format!("line {line}"),
                                format!("no {what}: the line is cut short"),
                            ));
                        }
                    }
                    if let Some(extra) = f.next() {
                        return Err(self.bad(
                            format!("line {line}"),
                            format!(
                                "a fifth field {extra:?}: a record is \
                                 `start_block count ignored request_number`"
                            ),
                        ));
                    }
                    if count == 0 {
                        return Err(self.bad(
                            format!("line {line}"),
                            "block count 0: a record reads at least one block".into(),
                        ));
                    }
                    let last = start.checked_add(count - 1).ok_or_else(|| {
                        self.bad(
                            format!("line {line}"),
                            format!("block {start} + count {count} is past the last block id"),
                        )
                    })?;
                    start..=last
                }
                Kind::Csv(c) => {
                    let fields: Vec<&str> = self.line.trim_end().split(',').collect();
                    let get = |i: Option<usize>| i.and_then(|i| fields.get(i).copied());
                    if let Some(i) = c.op {
                        let op = get(Some(i)).unwrap_or("").trim();
                        let write = match op.to_ascii_lowercase().as_str() {
                            "r" | "read" | "get" => false,
                            "w" | "write" | "set" => true,
                            _ => {
                                return Err(self.bad(
                                    format!("line {line}"),
                                    format!("op {op:?} is neither a read nor a write"),
                                ));
                            }
                        };
                        if write && c.reads_only {
                            continue;
                        }
                    }
                    if let Some(i) = c.object {
                        let o = self.number("object", get(Some(i)))?;
                        o..=o
                    } else {
                        let page = c.page_size;
                        let off = self.number("offset", get(c.offset))?;
                        let size = self.number("size", get(c.size))?;
                        if size == 0 {
                            continue;
                        }
                        let end = off.checked_add(size - 1).ok_or_else(|| {
                            self.bad(
                                format!("line {line}"),
                                format!("offset {off} + size {size} overflows"),
                            )
                        })?;
                        off / page..=end / page
                    }
                }
                // The oracle format's records are read by `next_oracle`.
                Kind::Oracle => return Ok(None),
            };
            if !range.is_empty() {
                return Ok(Some(range));
            }
        }
    }
}

fn csv_layout(path: &Path, names: &[String], o: &ReadOptions) -> Result<CsvLayout> {
    let find = |want: &[&str]| {
        names
            .iter()
            .position(|n| want.iter().any(|w| n.eq_ignore_ascii_case(w)))
    };
    let l = CsvLayout {
        object: find(&["object", "obj", "obj_id", "key", "id"]),
        offset: find(&["offset"]),
        size: find(&["size"]),
        op: find(&["op", "type", "rw"]),
        page_size: o.page_size,
        reads_only: o.csv.reads_only,
    };
    if l.object.is_none() && (l.offset.is_none() || l.size.is_none()) {
        return Err(FormatError::Bad {
            path: path.to_path_buf(),
            at: if o.csv.columns.is_some() {
                "--columns".into()
            } else {
                "line 1 (the header)".into()
            },
            detail: format!(
                "columns {names:?}: need an object column (object, obj_id, key, id) or offset and size"
            ),
        });
    }
    if o.csv.reads_only && l.op.is_none() {
        return Err(FormatError::Usage(format!(
            "{}: reads only, but no op column (op, type, rw) says which rows are writes",
            path.display()
        )));
    }
    Ok(l)
}

impl Iterator for Reader {
    type Item = Result<Req>;

    fn next(&mut self) -> Option<Result<Req>> {
        if self.done {
            return None;
        }
        if let Some(obj) = self.pending.next() {
            return Some(Ok(Req { obj, next: NEVER }));
        }
        let r = match self.kind {
            Kind::Oracle => self.next_oracle(),
            _ => self.next_range().map(|r| {
                r.map(|mut r| {
                    let obj = r.next().expect("non-empty");
                    self.pending = r;
                    Req { obj, next: NEVER }
                })
            }),
        };
        match r {
            Ok(Some(q)) => Some(Ok(q)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A public format an engine trace can be written in.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ExportFormat {
    OracleGeneral,
    Csv,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ExportFormat, String> {
        match s {
            "oracleGeneral" | "oraclegeneral" => Ok(ExportFormat::OracleGeneral),
            "csv" => Ok(ExportFormat::Csv),
            other => Err(format!(
                "unknown export format {other:?}: expected oracleGeneral or csv"
            )),
        }
    }
}

/// Write `trace`'s accesses (its threads merged by time) to `out` in
/// `format`: object id [`object_id`], size the page size, and for
/// `oracleGeneral` each access's next access (the request number of the
/// same page's next access, -1 for none) and time in whole seconds since
/// the pool opened; `csv` has the header `time,object,size,op` (time in
/// nanoseconds, op `read`). Threads, rings and the recorded hit flags have
/// no field in these formats and are not written. Returns the accesses
/// written.
pub fn export(trace: &Trace, format: ExportFormat, out: &Path) -> Result<u64> {
    let accesses = trace.accesses_by_time();
    let ids = accesses
        .iter()
        .enumerate()
        .map(|(i, a)| {
            object_id(&a.tag).map_err(|detail| FormatError::Bad {
                path: out.to_path_buf(),
                at: format!("access {i}"),
                detail,
            })
        })
        .collect::<Result<Vec<u64>>>()?;
    let io = |source| FormatError::Io {
        op: "write",
        path: out.to_path_buf(),
        source,
    };
    let mut w = std::io::BufWriter::new(File::create(out).map_err(io)?);
    match format {
        ExportFormat::OracleGeneral => {
            let mut next = vec![-1i64; ids.len()];
            let mut last: std::collections::HashMap<u64, i64> = std::collections::HashMap::new();
            for i in (0..ids.len()).rev() {
                if let Some(&n) = last.get(&ids[i]) {
                    next[i] = n;
                }
                last.insert(ids[i], i as i64);
            }
            for ((a, &obj), &n) in accesses.iter().zip(&ids).zip(&next) {
                let mut rec = [0u8; ORACLE_RECORD];
                let secs = u32::try_from(a.nanos / 1_000_000_000).unwrap_or(u32::MAX);
                rec[0..4].copy_from_slice(&secs.to_le_bytes());
                rec[4..12].copy_from_slice(&obj.to_le_bytes());
                rec[12..16].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
                rec[16..24].copy_from_slice(&n.to_le_bytes());
                w.write_all(&rec).map_err(io)?;
            }
        }
        ExportFormat::Csv => {
            writeln!(w, "time,object,size,op").map_err(io)?;
            for (a, obj) in accesses.iter().zip(&ids) {
                writeln!(w, "{},{obj},{PAGE_SIZE},read", a.nanos).map_err(io)?;
            }
        }
    }
    w.flush().map_err(io)?;
    Ok(ids.len() as u64)
}
