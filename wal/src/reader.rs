//! Reading the log back: the recovery reader and its end-of-WAL rules.
//!
//! [`WalReader`] starts at an LSN where a record begins and yields records in
//! log order. The log has no "end" marker: the end is where the bytes stop
//! being valid records. The hard part is telling the end of the log, which is
//! normal after every crash, from damage in the middle, which must not be
//! skipped silently.
//!
//! # Reading one record at position `p`
//!
//! ```text
//!   read the 27-byte header at p
//!     no bytes at all (no segment file)                  -> end: CleanEnd
//!     length field 0                                     -> end: ZeroedTail
//!     length outside MIN_RECORD_LEN..=MAX_RECORD_LEN     -> end: TornRecord(BadLength)
//!   read `length` bytes at p
//!     fewer bytes exist (the next segment file is missing) -> end: TornRecord(Truncated)
//!     CRC mismatch                                       -> end: TornRecord(ChecksumMismatch)
//!     CRC right but fields do not decode                 -> ERROR (a bug or format change)
//!     prev LSN is not the record read before             -> ERROR (broken chain)
//!   yield (p, record); continue at p + length
//! ```
//!
//! # An end is only an end if nothing valid follows it
//!
//! Every candidate end at position `e` is checked before it is accepted:
//!
//! 1. **No segment gap.** If the data ran out (CleanEnd, Truncated) because a
//!    segment file is missing, and a later segment file exists, the log has a
//!    hole: an error naming both. So is a missing segment that must exist
//!    because the log reached a position inside it (or was asked to start
//!    there), a missing segment that the record at `e` runs into
//!    (Truncated), a missing segment whose start the log reached by reading
//!    records (CleanEnd after at least one record), and a segment file of
//!    any length but the segment size. Segments are created in order and
//!    zero-filled in full before use (`segment` invariants 1 and 2), and a
//!    write opens (creating) every segment it reaches, and the one that
//!    starts where it ends, before any of its bytes are written, so a crash
//!    causes none of these: the segment was deleted.
//! 2. **No valid record after it.** The record that would follow a damaged
//!    record at `e` starts within [`MAX_RECORD_LEN`] bytes of `e`. The reader
//!    searches that window for a record that checks out (plausible length,
//!    known kind, matching CRC) and whose prev LSN lies in `e ..` its own
//!    position, that is, a record that was written *after* the one at `e`. If
//!    there is one, the bad bytes at `e` are in the middle of the log: an
//!    error naming the segment file and `e`. The prev-LSN range rather than
//!    `prev == e` also catches damage that spans several records (a lost 4 kB
//!    write), as long as a valid record follows within the window.
//!
//! 3. **Unless a page was never written.** A power loss may persist a later
//!    page of an un-flushed write and not an earlier one: the page cache
//!    writes a file back a 4 kB page at a time, in any order, and a disk
//!    tears a page only at 512-byte sector boundaries. If, between `e` and
//!    the valid record rule 2 found, the log reads as zeros from `e` (or
//!    from a sector boundary after it) to the end of a 4 kB page, that page
//!    is the rest of a write that never reached the zero-filled segment; so
//!    the flush that wrote it never returned, nothing after it was
//!    acknowledged, and `e` is accepted as the end (as PostgreSQL always
//!    does). The power-loss test
//!    (`engine/tests/power_loss_keeps_every_acknowledged_commit.rs`) found
//!    that rules 1 and 2 alone refused to open such a log. A flipped bit or
//!    garbage inside written records leaves no such page, and is still
//!    reported.
//! 4. **Unless it was durable.** Every record stores the log's flushed
//!    position when it was inserted (its durable LSN). If the valid record
//!    rule 2 found says the log was durable past `e`, the bytes at `e` had
//!    been fdatasync'ed before that record was written: damage inside
//!    durable WAL (a zeroed page, a lost write), an error naming the segment
//!    and `e`, whatever rule 3 says. A torn tail after a power loss never
//!    looks like this: nothing written after a flush that never returned can
//!    claim that flush.
//!
//! Otherwise the end is accepted and reported by [`WalReader::end_of_wal`] and
//! [`WalReader::end_reason`].
//!
//! A torn tail is normal: a crash while a flush was writing leaves the last
//! record half written (a CRC mismatch, bytes of zeros, or a length that runs
//! off the end). Its flush never returned, so no commit depended on it.
//!
//! Known limits:
//! - Durable WAL that later reads as zeros to the end of a 4 kB page (a disk
//!   that silently lost an acknowledged write) is caught by rule 4 only when
//!   a valid record after it was inserted after the damaged bytes were
//!   flushed; bytes written and flushed in the same flush as every record
//!   after them are taken for a torn tail by rule 3. Other damage followed
//!   by a valid record is an error, never a guess.
//! - Damage in the middle that is followed by more than [`MAX_RECORD_LEN`]
//!   bytes of invalid data (a large zeroed region) looks like the end.
//! - The reader is meant for recovery, not for following a log that is being
//!   written.
//!
//! Memory: segments are read through a read-ahead window of 128 KiB (or the
//! longest request: a record, or rule 2's search window), whatever the
//! segment size.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Result, WalError};
use crate::fs::{FileSystem, FsFile, OsFileSystem};
use crate::lsn::Lsn;
use crate::record::{
    self, HEADER_LEN, MAX_RECORD_LEN, MIN_RECORD_LEN, Record, crcs, peek_durable_lsn, peek_kind,
    peek_len, peek_prev_lsn, plausible_len,
};
use crate::segment::{SegmentSize, list_segments, segment_path, wal_dir};

/// Disks write whole sectors: a write cut short by a power loss stops at a
/// sector boundary.
const SECTOR: u64 = 512;
/// The page cache writes files back in pages of this size, in any order.
const CACHE_PAGE: u64 = 4096;

/// Rule 3 of the module docs: do `bytes` (the log from `start` up to a
/// valid record) hold the rest of a page that was never written: zeros
/// from `start`, or from a sector boundary, to the end of a cache page?
fn unwritten_page_between(start: Lsn, bytes: &[u8]) -> bool {
    let end = start.0 + bytes.len() as u64;
    let mut p = start.0;
    while p < end {
        let page_end = (p / CACHE_PAGE + 1) * CACHE_PAGE;
        if page_end > end {
            return false;
        }
        let from = (p - start.0) as usize;
        let to = (page_end - start.0) as usize;
        if bytes[from..to].iter().all(|b| *b == 0) {
            return true;
        }
        p = (p / SECTOR + 1) * SECTOR;
    }
    false
}

/// Why the reader stopped.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum EndReason {
    /// The segment files end exactly where a record would start.
    CleanEnd,
    /// Where the next record would start, the length field is zero: space that
    /// was preallocated and never written. The usual end of a live log.
    ZeroedTail,
    /// The next record is not whole: the write that carried it was cut short.
    TornRecord(Torn),
}

/// How the last record is broken.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Torn {
    /// Its bytes run past the end of the segment files.
    Truncated,
    /// Its bytes are there but the CRC does not match.
    ChecksumMismatch,
    /// Its length field is not a length a record can have.
    BadLength,
}

impl EndReason {
    /// Is this a torn record rather than a tidy end?
    pub fn is_torn(self) -> bool {
        matches!(self, EndReason::TornRecord(_))
    }
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::CleanEnd => write!(f, "the segment files end here"),
            EndReason::ZeroedTail => write!(f, "zeroed space"),
            EndReason::TornRecord(Torn::Truncated) => write!(f, "a record cut short"),
            EndReason::TornRecord(Torn::ChecksumMismatch) => {
                write!(f, "a record with a checksum mismatch")
            }
            EndReason::TornRecord(Torn::BadLength) => {
                write!(f, "a record with an impossible length")
            }
        }
    }
}

/// Where the log ended and why.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct WalEnd {
    /// The position after the last valid record: where the next one goes.
    pub lsn: Lsn,
    pub reason: EndReason,
}

/// Reads records in log order from a start position to the end of valid WAL.
///
/// Also an [`Iterator`] of `Result<(Lsn, Record)>`; after an error or the end
/// it yields nothing more.
#[derive(Debug)]
pub struct WalReader {
    source: SegmentSource,
    /// Where the next record starts.
    next: Lsn,
    /// Start of the last record yielded: the next one's prev LSN must equal it.
    last: Option<Lsn>,
    end: Option<WalEnd>,
    failed: bool,
}

/// What reading at one position found.
enum Step {
    Record(Record, u64),
    End(EndReason),
}

impl WalReader {
    /// A reader of the log in `<datadir>/wal/` starting at `start`, which must
    /// be where a record begins (the origin, 0, or a record's start LSN).
    pub fn new(datadir: &Path, start: Lsn, segment_size: u64) -> Result<WalReader> {
        WalReader::with_fs(Arc::new(OsFileSystem), datadir, start, segment_size)
    }

    /// [`new`](WalReader::new), reading the segments through `fs`.
    pub fn with_fs(
        fs: Arc<dyn FileSystem>,
        datadir: &Path,
        start: Lsn,
        segment_size: u64,
    ) -> Result<WalReader> {
        Ok(WalReader {
            source: SegmentSource::new(fs, wal_dir(datadir), SegmentSize::new(segment_size)?),
            next: start,
            last: None,
            end: None,
            failed: false,
        })
    }

    /// The next record and its start LSN, `None` at the end of valid WAL, or
    /// an error for damage in the middle of the log.
    pub fn next_record(&mut self) -> Result<Option<(Lsn, Record)>> {
        if self.end.is_some() || self.failed {
            return Ok(None);
        }
        let result = self.step();
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn step(&mut self) -> Result<Option<(Lsn, Record)>> {
        let at = self.next;
        match self.read_at(at)? {
            Step::Record(rec, len) => {
                if let Some(last) = self.last
                    && rec.prev_lsn() != last
                {
                    return Err(self.corrupt(
                        at,
                        format!(
                            "broken chain: the record's prev LSN is {}, but the record before it starts at {last}",
                            rec.prev_lsn()
                        ),
                    ));
                }
                self.next = at.checked_add(len).ok_or_else(|| {
                    self.corrupt(at, "record runs past the largest LSN".to_string())
                })?;
                self.last = Some(at);
                Ok(Some((at, rec)))
            }
            Step::End(reason) => {
                self.check_nothing_follows(at, reason)?;
                self.end = Some(WalEnd { lsn: at, reason });
                Ok(None)
            }
        }
    }

    /// Where the log ends (the position after the last valid record), once
    /// the reader has reached it; `None` before that or after an error.
    pub fn end_of_wal(&self) -> Option<Lsn> {
        self.end.map(|e| e.lsn)
    }

    /// Why the reader stopped, once it has reached the end.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.end.map(|e| e.reason)
    }

    /// The end, with its reason, once reached.
    pub fn end(&self) -> Option<WalEnd> {
        self.end
    }

    /// Start of the last record yielded.
    pub fn last_record_lsn(&self) -> Option<Lsn> {
        self.last
    }

    /// Where the next record would start.
    pub fn position(&self) -> Lsn {
        self.next
    }

    /// Read every remaining record.
    pub fn read_to_end(&mut self) -> Result<Vec<(Lsn, Record)>> {
        let mut out = Vec::new();
        while let Some(r) = self.next_record()? {
            out.push(r);
        }
        Ok(out)
    }

    fn read_at(&mut self, at: Lsn) -> Result<Step> {
        let head = self.source.read(at, HEADER_LEN)?;
        if head.is_empty() {
            return Ok(Step::End(EndReason::CleanEnd));
        }
        let Some(len) = peek_len(&head) else {
            // Fewer than 4 bytes before the files end.
            return Ok(Step::End(if head.iter().all(|b| *b == 0) {
                EndReason::ZeroedTail
            } else {
                EndReason::TornRecord(Torn::Truncated)
            }));
        };
        if len == 0 {
            return Ok(Step::End(EndReason::ZeroedTail));
        }
        if !plausible_len(len) {
            return Ok(Step::End(EndReason::TornRecord(Torn::BadLength)));
        }
        let bytes = self.source.read(at, len as usize)?;
        if bytes.len() < len as usize {
            return Ok(Step::End(EndReason::TornRecord(Torn::Truncated)));
        }
        if crcs(&bytes).is_none_or(|(stored, computed)| stored != computed) {
            return Ok(Step::End(EndReason::TornRecord(Torn::ChecksumMismatch)));
        }
        let rec = record::decode(&bytes).map_err(|e| {
            self.corrupt(
                at,
                format!("the record's checksum is right but it does not decode: {e}"),
            )
        })?;
        Ok(Step::Record(rec, len as u64))
    }

    /// Accept `end` as the end of the log only if no segment gap and no valid
    /// record follows it (rules 1 and 2 in the module docs).
    fn check_nothing_follows(&mut self, end: Lsn, reason: EndReason) -> Result<()> {
        if matches!(
            reason,
            EndReason::CleanEnd | EndReason::TornRecord(Torn::Truncated)
        ) {
            let data_end = self.source.data_end(end)?;
            let missing = segment_path(&self.source.dir, data_end);
            if data_end < end {
                // The log reached `end` inside this segment, or was asked to
                // start there: it existed.
                return Err(self.corrupt(
                    end,
                    format!(
                        "segment {} is missing: the log continues at {end}, inside it",
                        missing.display()
                    ),
                ));
            }
            if data_end > end {
                // Bytes of a record at `end` were written, and the write
                // that carried them created every segment it reaches first.
                return Err(self.corrupt(
                    end,
                    format!(
                        "segment {} is missing: the record at {end} runs into it ({reason})",
                        missing.display()
                    ),
                ));
            }
            if self.last.is_some() {
                // The log reached the start of this segment, and a write
                // that ends at a segment's start creates that segment.
                return Err(self.corrupt(
                    end,
                    format!(
                        "segment {} is missing: the log reaches its start ({reason})",
                        missing.display()
                    ),
                ));
            }
            let later = list_segments(&*self.source.fs, &self.source.dir, self.source.size)?
                .into_iter()
                .find(|s| *s > data_end);
            if let Some(later) = later {
                return Err(self.corrupt(
                    end,
                    format!(
                        "the log stops at {data_end} ({reason}): segment {} is missing, but segment {} exists after it",
                        missing.display(),
                        segment_path(&self.source.dir, later).display()
                    ),
                ));
            }
        }
        let window = self.source.read(end, MAX_RECORD_LEN + HEADER_LEN)?;
        for offset in MIN_RECORD_LEN..window.len().saturating_sub(HEADER_LEN) {
            let head = &window[offset..];
            let at = Lsn(end.0 + offset as u64);
            let follows = peek_prev_lsn(head).is_some_and(|prev| end <= prev && prev < at)
                && peek_len(head).is_some_and(plausible_len)
                && peek_kind(head).is_some();
            if !follows {
                continue;
            }
            let len = peek_len(head).unwrap_or(0) as usize;
            let bytes = self.source.read(at, len)?;
            if bytes.len() == len && crcs(&bytes).is_some_and(|(s, c)| s == c) {
                let durable = peek_durable_lsn(&bytes).unwrap_or(Lsn::ZERO);
                if durable > end {
                    // Rule 4: the bytes at `end` were durable before the
                    // record at `at` was written.
                    return Err(self.corrupt(
                        end,
                        format!(
                            "invalid record here ({reason}), but the valid record at {at} was inserted when the log was durable up to {durable}: damage inside durable WAL"
                        ),
                    ));
                }
                if unwritten_page_between(end, &window[..offset]) {
                    // Rule 3: a write that never reached the disk.
                    return Ok(());
                }
                return Err(self.corrupt(
                    end,
                    format!(
                        "invalid record here ({reason}), but a valid record written after it starts at {at}: damage in the middle of the log"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn corrupt(&self, lsn: Lsn, detail: String) -> WalError {
        WalError::CorruptRecord {
            lsn,
            file: self.source.path_of(lsn),
            detail,
        }
    }
}

impl Iterator for WalReader {
    type Item = Result<(Lsn, Record)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Segment files read through a bounded read-ahead window: memory use is
/// [`READ_AHEAD`] or the longest request (a record, or the search window of
/// rule 2), whatever the segment size, never a whole segment.
#[derive(Debug)]
struct SegmentSource {
    dir: PathBuf,
    size: SegmentSize,
    /// Where the segments are read from.
    fs: Arc<dyn FileSystem>,
    /// Recently opened segments: `(start, file)`; a missing file is cached
    /// as `None`. At most [`SegmentSource::CACHED`] entries.
    files: Vec<(Lsn, Option<Box<dyn FsFile>>)>,
    /// The bytes of the log from `window_start` on, as last read.
    window: Vec<u8>,
    window_start: Lsn,
}

/// Bytes read at once when the reader moves past its window: enough for
/// many small records per system call.
const READ_AHEAD: usize = 128 << 10;

impl SegmentSource {
    /// Two segments: the one being read and the next, which a record
    /// crossing the boundary needs.
    const CACHED: usize = 2;

    fn new(fs: Arc<dyn FileSystem>, dir: PathBuf, size: SegmentSize) -> SegmentSource {
        SegmentSource {
            fs,
            dir,
            size,
            files: Vec::new(),
            window: Vec::new(),
            window_start: Lsn::ZERO,
        }
    }

    fn path_of(&self, lsn: Lsn) -> PathBuf {
        segment_path(&self.dir, self.size.segment_start(lsn))
    }

    /// The segment starting at `start`, opened, or `None` if there is no
    /// such file. A file of any length but the segment size is damage: a
    /// segment is zero-filled to its full size before it is named
    /// (`segment` invariant 1), so no crash leaves a short one.
    fn file(&mut self, start: Lsn) -> Result<Option<&dyn FsFile>> {
        let i = match self.files.iter().position(|(s, _)| *s == start) {
            Some(i) => i,
            None => {
                let path = segment_path(&self.dir, start);
                let file = match self.fs.open(&path, false, false) {
                    Ok(f) => Some(f),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(WalError::io("open", &path, e)),
                };
                if let Some(f) = &file {
                    let len = f.len().map_err(|e| WalError::io("stat", &path, e))?;
                    if len != self.size.bytes() {
                        return Err(WalError::CorruptSegment {
                            file: path,
                            detail: format!(
                                "{len} bytes, but every segment is {} bytes (zero-filled in full before it is named): the file was truncated or extended",
                                self.size.bytes()
                            ),
                        });
                    }
                }
                if self.files.len() == Self::CACHED {
                    // Reads move forward: close the earliest segment.
                    let oldest = (0..self.files.len())
                        .min_by_key(|i| self.files[*i].0)
                        .unwrap_or(0);
                    self.files.swap_remove(oldest);
                }
                self.files.push((start, file));
                self.files.len() - 1
            }
        };
        Ok(self.files[i].1.as_deref())
    }

    /// Up to `n` bytes from `lsn` on, crossing segment files; fewer if the
    /// files end first (a missing segment). Served from the read-ahead
    /// window when it holds them.
    fn read(&mut self, lsn: Lsn, n: usize) -> Result<Vec<u8>> {
        let held = lsn
            .0
            .checked_sub(self.window_start.0)
            .and_then(|from| usize::try_from(from).ok())
            .filter(|from| from.saturating_add(n) <= self.window.len());
        if let Some(from) = held {
            return Ok(self.window[from..from + n].to_vec());
        }
        self.window = self.fetch(lsn, n.max(READ_AHEAD))?;
        self.window_start = lsn;
        Ok(self.window[..n.min(self.window.len())].to_vec())
    }

    /// Read up to `n` bytes from `lsn` on from the files.
    fn fetch(&mut self, lsn: Lsn, n: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; n];
        let mut got = 0;
        let mut pos = lsn;
        while got < n {
            let start = self.size.segment_start(pos);
            let offset = self.size.offset_in_segment(pos);
            let take = (self.size.room_after(pos) as usize).min(n - got);
            let path = segment_path(&self.dir, start);
            let Some(file) = self.file(start)? else {
                break;
            };
            file.read_exact_at(&mut out[got..got + take], offset)
                .map_err(|e| {
                    WalError::io(format!("read {take} bytes at offset {offset} of"), &path, e)
                })?;
            got += take;
            match pos.checked_add(take as u64) {
                Some(p) => pos = p,
                None => break,
            }
        }
        out.truncate(got);
        Ok(out)
    }

    /// The start of the first missing segment at or after the one holding
    /// `lsn`: where the segment files stop having bytes.
    fn data_end(&mut self, lsn: Lsn) -> Result<Lsn> {
        let mut start = self.size.segment_start(lsn);
        while self.file(start)?.is_some() {
            match start.checked_add(self.size.bytes()) {
                Some(next) => start = next,
                None => return Ok(start),
            }
        }
        Ok(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RmgrKind;
    use crate::segment::{MIN_SEGMENT_SIZE, open_or_create_segment};
    use std::fs;

    const SEG: u64 = MIN_SEGMENT_SIZE;

    fn write_log(dir: &Path, records: &[Record]) -> Vec<(Lsn, u64)> {
        let wal = wal_dir(dir);
        fs::create_dir_all(&wal).unwrap();
        let size = SegmentSize::new(SEG).unwrap();
        let mut pos = Lsn(0);
        let mut prev = Lsn(0);
        let mut out = Vec::new();
        for r in records {
            let bytes = r.clone().with_prev_lsn(prev).encode();
            let mut written = 0;
            while written < bytes.len() {
                let p = Lsn(pos.0 + written as u64);
                let (f, _) =
                    open_or_create_segment(&OsFileSystem, &wal, size.segment_start(p), size)
                        .unwrap();
                let n = (size.room_after(p) as usize).min(bytes.len() - written);
                f.write_all_at(&bytes[written..written + n], size.offset_in_segment(p))
                    .unwrap();
                written += n;
            }
            out.push((pos, bytes.len() as u64));
            prev = pos;
            pos = Lsn(pos.0 + bytes.len() as u64);
        }
        out
    }

    fn rec(n: usize) -> Record {
        Record::builder(RmgrKind::Heap, 0, n as u64)
            .payload(vec![n as u8; 50 + n])
            .build()
            .unwrap()
    }

    #[test]
    fn empty_directory_is_a_clean_end_at_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = WalReader::new(dir.path(), Lsn(0), SEG).unwrap();
        assert!(r.next_record().unwrap().is_none());
        assert_eq!(
            r.end(),
            Some(WalEnd {
                lsn: Lsn(0),
                reason: EndReason::CleanEnd
            })
        );
    }

    #[test]
    fn reads_records_in_order_and_stops_at_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let recs: Vec<Record> = (0..20).map(rec).collect();
        let layout = write_log(dir.path(), &recs);
        let mut r = WalReader::new(dir.path(), Lsn(0), SEG).unwrap();
        let got = r.read_to_end().unwrap();
        assert_eq!(got.len(), 20);
        for ((lsn, got), (want_lsn, _)) in got.iter().zip(&layout) {
            assert_eq!(lsn, want_lsn);
            assert_eq!(got.xid(), recs[got.xid() as usize].xid());
        }
        let (last, len) = *layout.last().unwrap();
        assert_eq!(r.end_of_wal(), Some(Lsn(last.0 + len)));
        assert_eq!(r.end_reason(), Some(EndReason::ZeroedTail));
    }

    #[test]
    fn missing_middle_segment_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        // Enough records to fill three segments.
        let recs: Vec<Record> = (0..1500).map(|i| rec(i % 200)).collect();
        write_log(dir.path(), &recs);
        fs::remove_file(segment_path(&wal_dir(dir.path()), Lsn(SEG))).unwrap();
        let e = WalReader::new(dir.path(), Lsn(0), SEG)
            .unwrap()
            .read_to_end()
            .unwrap_err();
        let missing = segment_path(&wal_dir(dir.path()), Lsn(SEG));
        assert!(e.to_string().contains("is missing"), "{e}");
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_short_or_long_segment_is_an_error_naming_it() {
        for len in [0, 100, SEG - 1, SEG + 1] {
            let dir = tempfile::tempdir().unwrap();
            write_log(dir.path(), &[rec(1), rec(2)]);
            let path = segment_path(&wal_dir(dir.path()), Lsn(0));
            fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(len)
                .unwrap();
            let e = WalReader::new(dir.path(), Lsn(0), SEG)
                .unwrap()
                .read_to_end()
                .unwrap_err();
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            assert!(e.to_string().contains(&format!("{len} bytes")), "{e}");
        }
    }

    #[test]
    fn starting_inside_a_missing_segment_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let recs: Vec<Record> = (0..1500).map(|i| rec(i % 200)).collect();
        let layout = write_log(dir.path(), &recs);
        let (inside, _) = *layout.iter().find(|(l, _)| l.0 > SEG + 100).unwrap();
        let path = segment_path(&wal_dir(dir.path()), Lsn(SEG));
        fs::remove_file(&path).unwrap();
        let e = WalReader::new(dir.path(), inside, SEG)
            .unwrap()
            .read_to_end()
            .unwrap_err();
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn reads_through_the_window_match_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let recs: Vec<Record> = (0..1500).map(|i| rec(i % 200)).collect();
        write_log(dir.path(), &recs);
        let wal = wal_dir(dir.path());
        let mut whole = Vec::new();
        let mut seg = 0;
        while let Ok(bytes) = fs::read(segment_path(&wal, Lsn(seg))) {
            whole.extend(bytes);
            seg += SEG;
        }
        let mut s = SegmentSource::new(Arc::new(OsFileSystem), wal, SegmentSize::new(SEG).unwrap());
        for (at, n) in [(0, 27), (10, 1000), (SEG - 10, 1000), (5, 5 * SEG as usize)] {
            let got = s.read(Lsn(at), n).unwrap();
            let from = at as usize;
            let want = &whole[from.min(whole.len())..(from + n).min(whole.len())];
            assert_eq!(got.len(), want.len(), "read({at}, {n})");
            assert!(got == want, "read({at}, {n}): other bytes");
        }
        assert!(s.window.len() <= 5 * SEG as usize);
    }
}
