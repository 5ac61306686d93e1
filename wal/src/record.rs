//! WAL records: what one logged change looks like in bytes.
//!
//! A record says "transaction `xid` did `info` (in the language of resource
//! manager `kind`) to these blocks, with this payload". It is self-checking: a
//! CRC32 covers every byte, and the length comes first so a reader knows how
//! much to check before it trusts anything.
//!
//! # Byte layout
//!
//! All integers are little-endian; nothing is aligned or padded.
//!
//! ```text
//! header (35 bytes)
//!   offset  size  field
//!   0       4     total length: every byte of the record, header included
//!   4       4     CRC32 (see below)
//!   8       8     transaction id (0 when the change belongs to no transaction)
//!   16      1     resource-manager kind (RmgrKind: 1..=7; anything else is an error)
//!   17      1     info: the kind's own code for what happened
//!   18      8     prev LSN: start of the record inserted just before this one
//!   26      1     number of block references (0..=32)
//!   27      8     durable LSN: everything before it was flushed when the
//!                 record was inserted (0 in records encoded outside a log);
//!                 the reader's proof that bytes before it held durable WAL
//! block reference, repeated (10 bytes, +4+image)
//!   0       4     relation (RelId)
//!   4       1     fork (Fork: 0 main, 1 free space)
//!   5       4     block number
//!   9       1     flags: 0x01 HAS_IMAGE, 0x02 WILL_INIT, other bits must be 0
//!   -- only with HAS_IMAGE --
//!   10      2     hole offset
//!   12      2     hole length (offset + length <= 8192; length 0 => offset 0)
//!   14      8192 - hole length   the page without its hole
//! payload
//!   0       4     payload length (<= 1 MiB)
//!   4       n     payload bytes
//! ```
//!
//! A page image leaves out the page's *hole*, the unused space between the end
//! of the line pointers and the start of the tuples (PostgreSQL's `pd_lower ..
//! pd_upper`). Which bytes form the hole is the page owner's knowledge (heap and
//! B-tree pages lay out differently), so the caller names the hole when it
//! registers the block and this module only checks that it lies inside the page.
//! [`PageImage::restore`] puts the page back together with zeros in the hole.
//!
//! # The checksum
//!
//! The CRC32 (IEEE polynomial, `crc32fast`) is computed over the bytes after
//! the header first, then over the header without its CRC field (bytes 0..4 and
//! 8..35). That is PostgreSQL's order (`XLogRecordAssemble` checksums the data,
//! `XLogInsertRecord` adds the header), and for the same reason: the
//! data's CRC is computed before the insert position is known, and only the
//! 35-byte header, which holds the prev LSN, is checksummed while the
//! insertion lock is held.
//!
//! # Invariants a decoded record satisfies
//!
//! 1. The length field equals the number of bytes, and lies within
//!    [`MIN_RECORD_LEN`]`..=`[`MAX_RECORD_LEN`].
//! 2. The CRC matches.
//! 3. Kind, fork and flags are known values; at most [`MAX_BLOCK_REFS`] blocks;
//!    every hole lies inside the page; the payload is at most
//!    [`MAX_PAYLOAD_LEN`] bytes; the fields use up the record exactly.
//!
//! [`decode`] checks all three with checked arithmetic and returns an error,
//! never panics, whatever the bytes.
//!
//! Shortcuts: PostgreSQL compresses page images and lets a block reference say
//! "same relation as before"; we do neither. The maximum sizes are ours.

use std::fmt;

use bufmgr::{BufferTag, Fork, PAGE_SIZE, RelId};

use crate::error::{Result, WalError};
use crate::lsn::Lsn;

/// A transaction id. 0 is "no transaction" (a checkpoint, a hint image).
pub type Xid = u64;

/// Bytes in the fixed record header.
pub const HEADER_LEN: usize = 35;
/// Bytes in a block reference without its image.
pub const BLOCK_REF_LEN: usize = 10;
/// Bytes of hole offset and hole length before an image.
pub const IMAGE_HEADER_LEN: usize = 4;
/// Bytes of the payload-length prefix.
pub const PAYLOAD_LEN_LEN: usize = 4;
/// The shortest record: a header and an empty payload.
pub const MIN_RECORD_LEN: usize = HEADER_LEN + PAYLOAD_LEN_LEN;
/// At most this many blocks per record: PostgreSQL's `XLR_MAX_BLOCK_ID` is 32.
/// A B-tree split, the largest of our changes, touches four pages.
pub const MAX_BLOCK_REFS: usize = 32;
/// The longest payload. PostgreSQL allows about 1 GB per record; we keep
/// records small enough that one always fits in the WAL buffers at once and
/// that the reader's search for a valid record after a damaged one (see
/// `reader`) looks at a bounded window.
pub const MAX_PAYLOAD_LEN: usize = 1 << 20;
/// The longest record: 32 full images and the longest payload (1,311,199 bytes).
pub const MAX_RECORD_LEN: usize = HEADER_LEN
    + MAX_BLOCK_REFS * (BLOCK_REF_LEN + IMAGE_HEADER_LEN + PAGE_SIZE)
    + PAYLOAD_LEN_LEN
    + MAX_PAYLOAD_LEN;

// Offsets of the header fields (see the layout above).
const OFF_LEN: usize = 0;
const OFF_CRC: usize = 4;
const OFF_XID: usize = 8;
const OFF_KIND: usize = 16;
const OFF_INFO: usize = 17;
pub(crate) const OFF_PREV: usize = 18;
const OFF_NBLOCKS: usize = 26;
pub(crate) const OFF_DURABLE: usize = 27;

/// Block-reference flag: a full-page image follows the reference.
pub const HAS_IMAGE: u8 = 0x01;
/// Block-reference flag: redo builds the page from nothing (a new page), so
/// the old contents need not be read (PostgreSQL's `BKPBLOCK_WILL_INIT`).
pub const WILL_INIT: u8 = 0x02;
const KNOWN_FLAGS: u8 = HAS_IMAGE | WILL_INIT;

/// Which resource manager owns a record: who knows how to redo it.
///
/// Numbered from 1 so that zeroed bytes never look like a valid kind.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(u8)]
pub enum RmgrKind {
    /// Checkpoints and redo points (PostgreSQL's `RM_XLOG_ID`).
    Checkpoint = 1,
    /// Transaction commit and abort.
    Xact = 2,
    /// Commit-log pages.
    Clog = 3,
    /// The catalog of tables and indexes.
    Catalog = 4,
    /// Heap pages.
    Heap = 5,
    /// B-tree pages.
    Btree = 6,
    /// A bare full-page image (PostgreSQL's `XLOG_FPI` / `XLOG_FPI_FOR_HINT`).
    FullPage = 7,
    /// Relation storage: the durable length of every relation fork, logged
    /// by a checkpoint once its fsyncs succeeded (PostgreSQL's `RM_SMGR_ID`
    /// logs creation and truncation; these lengths tell an extension lost
    /// with the power from damage).
    Storage = 8,
}

impl RmgrKind {
    /// Every kind, in number order.
    pub const ALL: [RmgrKind; 8] = [
        RmgrKind::Checkpoint,
        RmgrKind::Xact,
        RmgrKind::Clog,
        RmgrKind::Catalog,
        RmgrKind::Heap,
        RmgrKind::Btree,
        RmgrKind::FullPage,
        RmgrKind::Storage,
    ];

    /// The kind with this number, if there is one.
    pub fn from_u8(n: u8) -> Option<RmgrKind> {
        RmgrKind::ALL.into_iter().find(|k| *k as u8 == n)
    }
}

/// The unused middle of a page, left out of its image.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Hole {
    offset: u16,
    length: u16,
}

impl Hole {
    /// No hole: the image holds the whole page.
    pub const NONE: Hole = Hole {
        offset: 0,
        length: 0,
    };

    /// The hole of `length` bytes at `offset`; it must lie inside the page.
    /// A hole of length 0 is [`Hole::NONE`] whatever the offset.
    pub fn new(offset: usize, length: usize) -> Result<Hole> {
        let inside = offset
            .checked_add(length)
            .is_some_and(|end| end <= PAGE_SIZE);
        if !inside {
            return Err(WalError::InvalidRecord(format!(
                "page hole at offset {offset} of length {length} does not fit in a {PAGE_SIZE}-byte page"
            )));
        }
        if length == 0 {
            return Ok(Hole::NONE);
        }
        // Both fit in u16: offset + length <= PAGE_SIZE = 8192.
        Ok(Hole {
            offset: offset as u16,
            length: length as u16,
        })
    }

    /// The hole between `lower` (end of the line pointers) and `upper` (start
    /// of the tuples), PostgreSQL's `pd_lower` and `pd_upper`.
    pub fn between(lower: usize, upper: usize) -> Result<Hole> {
        let length = upper.checked_sub(lower).ok_or_else(|| {
            WalError::InvalidRecord(format!(
                "page hole from {lower} to {upper}: lower is past upper"
            ))
        })?;
        Hole::new(lower, length)
    }

    /// Offset of the first byte of the hole.
    pub fn offset(self) -> usize {
        self.offset as usize
    }

    /// Length of the hole in bytes.
    pub fn length(self) -> usize {
        self.length as usize
    }
}

/// A full-page image: the page without its hole.
#[derive(Clone, PartialEq, Eq)]
pub struct PageImage {
    hole: Hole,
    /// `PAGE_SIZE - hole.length()` bytes: the page before the hole, then after it.
    bytes: Box<[u8]>,
}

impl PageImage {
    /// Capture `page` (exactly [`PAGE_SIZE`] bytes) without the bytes of `hole`.
    pub fn capture(page: &[u8], hole: Hole) -> Result<PageImage> {
        if page.len() != PAGE_SIZE {
            return Err(WalError::InvalidRecord(format!(
                "a page image needs a {PAGE_SIZE}-byte page, got {} bytes",
                page.len()
            )));
        }
        let (before, rest) = page.split_at(hole.offset());
        let after = &rest[hole.length()..];
        let mut bytes = Vec::with_capacity(before.len() + after.len());
        bytes.extend_from_slice(before);
        bytes.extend_from_slice(after);
        Ok(PageImage {
            hole,
            bytes: bytes.into_boxed_slice(),
        })
    }

    /// The hole that was left out.
    pub fn hole(&self) -> Hole {
        self.hole
    }

    /// The stored bytes (the page without its hole).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The page, with zeros where the hole was.
    pub fn restore(&self) -> [u8; PAGE_SIZE] {
        let mut page = [0u8; PAGE_SIZE];
        let (before, after) = self.bytes.split_at(self.hole.offset());
        page[..before.len()].copy_from_slice(before);
        page[self.hole.offset() + self.hole.length()..].copy_from_slice(after);
        page
    }
}

impl fmt::Debug for PageImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageImage")
            .field("hole", &self.hole)
            .field("stored_bytes", &self.bytes.len())
            .finish()
    }
}

/// A block a record changes, optionally with a full-page image of it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct BlockRef {
    tag: BufferTag,
    will_init: bool,
    image: Option<PageImage>,
}

impl BlockRef {
    /// A reference to `tag` without an image.
    pub fn new(tag: BufferTag) -> BlockRef {
        BlockRef {
            tag,
            will_init: false,
            image: None,
        }
    }

    /// A reference to `tag` carrying an image of `page` without `hole`.
    pub fn with_image(tag: BufferTag, page: &[u8], hole: Hole) -> Result<BlockRef> {
        Ok(BlockRef {
            tag,
            will_init: false,
            image: Some(PageImage::capture(page, hole)?),
        })
    }

    /// Mark that redo builds this page from nothing ([`WILL_INIT`]).
    pub fn will_init(mut self) -> BlockRef {
        self.will_init = true;
        self
    }

    /// Which page.
    pub fn tag(&self) -> BufferTag {
        self.tag
    }

    /// Does redo build the page from nothing?
    pub fn is_will_init(&self) -> bool {
        self.will_init
    }

    /// The full-page image, if the reference carries one.
    pub fn image(&self) -> Option<&PageImage> {
        self.image.as_ref()
    }

    /// The flags byte as stored.
    pub fn flags(&self) -> u8 {
        let mut flags = 0;
        if self.image.is_some() {
            flags |= HAS_IMAGE;
        }
        if self.will_init {
            flags |= WILL_INIT;
        }
        flags
    }

    fn encoded_len(&self) -> usize {
        BLOCK_REF_LEN
            + self
                .image
                .as_ref()
                .map_or(0, |im| IMAGE_HEADER_LEN + im.bytes.len())
    }
}

/// One logged change. Built with [`Record::builder`], read back with [`decode`].
///
/// The prev LSN is not the builder's business: [`crate::Wal::insert`] fills it
/// in when it reserves the record's place in the log.
#[derive(Clone, PartialEq, Eq)]
pub struct Record {
    xid: Xid,
    kind: RmgrKind,
    info: u8,
    prev_lsn: Lsn,
    /// The log's flushed position when the record was inserted (0 until a
    /// log inserts it).
    durable_lsn: Lsn,
    blocks: Vec<BlockRef>,
    payload: Vec<u8>,
}

impl Record {
    /// Start a record of `kind` with `info` for transaction `xid`.
    pub fn builder(kind: RmgrKind, info: u8, xid: Xid) -> RecordBuilder {
        RecordBuilder {
            record: Record {
                xid,
                kind,
                info,
                prev_lsn: Lsn::ZERO,
                durable_lsn: Lsn::ZERO,
                blocks: Vec::new(),
                payload: Vec::new(),
            },
        }
    }

    pub fn xid(&self) -> Xid {
        self.xid
    }

    pub fn kind(&self) -> RmgrKind {
        self.kind
    }

    pub fn info(&self) -> u8 {
        self.info
    }

    /// Start of the record inserted before this one (0 for the first record
    /// of a log, and for a record that has not been inserted yet).
    pub fn prev_lsn(&self) -> Lsn {
        self.prev_lsn
    }

    /// The log's flushed position when the record was inserted: every byte
    /// before it was durable before this record was written (0 for a record
    /// no log has inserted).
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn
    }

    pub fn blocks(&self) -> &[BlockRef] {
        &self.blocks
    }

    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The page of block reference `block_id`, rebuilt from its image with
    /// zeros in the hole; `None` if there is no such block or it has no image.
    pub fn restore_page(&self, block_id: usize) -> Option<[u8; PAGE_SIZE]> {
        self.blocks.get(block_id)?.image().map(PageImage::restore)
    }

    /// The same record with another prev LSN (used by tests of the format and
    /// by the log when it links a record into the chain).
    pub fn with_prev_lsn(mut self, prev_lsn: Lsn) -> Record {
        self.prev_lsn = prev_lsn;
        self
    }

    /// Bytes this record takes in the log.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + self.blocks.iter().map(BlockRef::encoded_len).sum::<usize>()
            + PAYLOAD_LEN_LEN
            + self.payload.len()
    }

    /// The record's bytes, with its current prev LSN.
    pub fn encode(&self) -> Vec<u8> {
        let mut unlinked = self.encode_unlinked();
        unlinked.link(self.prev_lsn, self.durable_lsn);
        unlinked.bytes
    }

    /// Encode everything but the prev LSN, and checksum the part after the
    /// header: the work of an insert that needs no lock.
    pub(crate) fn encode_unlinked(&self) -> UnlinkedRecord {
        let len = self.encoded_len();
        let mut buf = Vec::with_capacity(len);
        // The builder's limits keep `len` within MAX_RECORD_LEN < u32::MAX.
        buf.extend_from_slice(&(len as u32).to_le_bytes());
        buf.extend_from_slice(&[0; 4]); // CRC, set by `link`
        buf.extend_from_slice(&self.xid.to_le_bytes());
        buf.push(self.kind as u8);
        buf.push(self.info);
        buf.extend_from_slice(&[0; 8]); // prev LSN, set by `link`
        buf.push(self.blocks.len() as u8); // <= MAX_BLOCK_REFS
        buf.extend_from_slice(&[0; 8]); // durable LSN, set by `link`
        debug_assert_eq!(buf.len(), HEADER_LEN);
        for b in &self.blocks {
            buf.extend_from_slice(&b.tag.rel.0.to_le_bytes());
            buf.push(b.tag.fork as u8);
            buf.extend_from_slice(&b.tag.block.to_le_bytes());
            buf.push(b.flags());
            if let Some(im) = &b.image {
                buf.extend_from_slice(&im.hole.offset.to_le_bytes());
                buf.extend_from_slice(&im.hole.length.to_le_bytes());
                buf.extend_from_slice(&im.bytes);
            }
        }
        buf.extend_from_slice(&(self.payload.len() as u32).to_le_bytes());
        buf.extend_from_slice(&self.payload);
        debug_assert_eq!(buf.len(), len);
        let mut body_crc = crc32fast::Hasher::new();
        body_crc.update(&buf[HEADER_LEN..]);
        UnlinkedRecord {
            bytes: buf,
            body_crc,
        }
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("xid", &self.xid)
            .field("kind", &self.kind)
            .field("info", &self.info)
            .field("prev_lsn", &self.prev_lsn)
            .field("durable_lsn", &self.durable_lsn)
            .field("blocks", &self.blocks)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// Collects the parts of a [`Record`] and checks the format's limits.
#[derive(Debug)]
pub struct RecordBuilder {
    record: Record,
}

impl RecordBuilder {
    /// Add a block reference (at most [`MAX_BLOCK_REFS`]).
    pub fn block(mut self, block: BlockRef) -> RecordBuilder {
        self.record.blocks.push(block);
        self
    }

    /// Set the payload (at most [`MAX_PAYLOAD_LEN`] bytes).
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> RecordBuilder {
        self.record.payload = payload.into();
        self
    }

    /// The record, if it keeps the format's limits.
    pub fn build(self) -> Result<Record> {
        let r = self.record;
        if r.blocks.len() > MAX_BLOCK_REFS {
            return Err(WalError::InvalidRecord(format!(
                "{} block references; at most {MAX_BLOCK_REFS} are allowed",
                r.blocks.len()
            )));
        }
        if r.payload.len() > MAX_PAYLOAD_LEN {
            return Err(WalError::InvalidRecord(format!(
                "payload of {} bytes; at most {MAX_PAYLOAD_LEN} are allowed",
                r.payload.len()
            )));
        }
        Ok(r)
    }
}

/// An encoded record whose prev LSN and CRC are still to be filled in.
pub(crate) struct UnlinkedRecord {
    bytes: Vec<u8>,
    /// CRC state after the bytes following the header.
    body_crc: crc32fast::Hasher,
}

impl UnlinkedRecord {
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Write `prev_lsn` and `durable_lsn` (the log's flushed position now)
    /// into the header and finish the CRC: 35 bytes of work, done while the
    /// insert position is locked. Returns the finished bytes.
    pub(crate) fn link(&mut self, prev_lsn: Lsn, durable_lsn: Lsn) -> &[u8] {
        self.bytes[OFF_PREV..OFF_PREV + 8].copy_from_slice(&prev_lsn.0.to_le_bytes());
        self.bytes[OFF_DURABLE..OFF_DURABLE + 8].copy_from_slice(&durable_lsn.0.to_le_bytes());
        let mut crc = self.body_crc.clone();
        crc.update(&self.bytes[..OFF_CRC]);
        crc.update(&self.bytes[OFF_XID..HEADER_LEN]);
        let crc = crc.finalize();
        self.bytes[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        &self.bytes
    }
}

/// The length field of a record starting at `bytes[0]`, if 4 bytes are there.
pub(crate) fn peek_len(bytes: &[u8]) -> Option<u32> {
    bytes.first_chunk::<4>().map(|b| u32::from_le_bytes(*b))
}

/// The prev-LSN field of a record starting at `bytes[0]`, if the header is there.
pub(crate) fn peek_prev_lsn(bytes: &[u8]) -> Option<Lsn> {
    let field = bytes.get(OFF_PREV..OFF_PREV + 8)?;
    Some(Lsn(u64::from_le_bytes(field.try_into().ok()?)))
}

/// The durable-LSN field of a record starting at `bytes[0]`, if the header
/// is there: everything before it was flushed when the record was inserted.
pub(crate) fn peek_durable_lsn(bytes: &[u8]) -> Option<Lsn> {
    let field = bytes.get(OFF_DURABLE..OFF_DURABLE + 8)?;
    Some(Lsn(u64::from_le_bytes(field.try_into().ok()?)))
}

/// The resource-manager kind of a record starting at `bytes[0]`, if valid.
pub(crate) fn peek_kind(bytes: &[u8]) -> Option<RmgrKind> {
    bytes.get(OFF_KIND).copied().and_then(RmgrKind::from_u8)
}

/// Is `len` a length a record can have?
pub(crate) fn plausible_len(len: u32) -> bool {
    (MIN_RECORD_LEN..=MAX_RECORD_LEN).contains(&(len as usize))
}

/// The CRC of a whole record (at least [`HEADER_LEN`] bytes): body first, then
/// the header without its CRC field.
fn compute_crc(bytes: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&bytes[HEADER_LEN..]);
    crc.update(&bytes[..OFF_CRC]);
    crc.update(&bytes[OFF_XID..HEADER_LEN]);
    crc.finalize()
}

/// `(stored, computed)` CRC of a whole record, if it is long enough to have one.
pub(crate) fn crcs(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < HEADER_LEN {
        return None;
    }
    let stored = u32::from_le_bytes(bytes[OFF_CRC..OFF_CRC + 4].try_into().ok()?);
    Some((stored, compute_crc(bytes)))
}

/// Decode one whole record: `bytes` must be exactly the record.
///
/// Checks the length, then the CRC, then every field (invariants 1-3 above);
/// any failure is a [`WalError::MalformedRecord`] naming the byte offset.
pub fn decode(bytes: &[u8]) -> Result<Record> {
    let mut c = Cursor { bytes, pos: 0 };
    if bytes.len() < MIN_RECORD_LEN {
        return Err(c.error(format!(
            "only {} bytes; the shortest record is {MIN_RECORD_LEN}",
            bytes.len()
        )));
    }
    let len = c.u32("total length")? as usize;
    if len != bytes.len() {
        return Err(WalError::MalformedRecord {
            offset: OFF_LEN,
            detail: format!(
                "length field says {len} bytes, but {} are given",
                bytes.len()
            ),
        });
    }
    if len > MAX_RECORD_LEN {
        return Err(WalError::MalformedRecord {
            offset: OFF_LEN,
            detail: format!("length {len} exceeds the maximum {MAX_RECORD_LEN}"),
        });
    }
    let stored = c.u32("CRC")?;
    let computed = compute_crc(bytes);
    if stored != computed {
        return Err(WalError::MalformedRecord {
            offset: OFF_CRC,
            detail: format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"),
        });
    }
    let xid = c.u64("transaction id")?;
    debug_assert_eq!(c.pos, OFF_KIND);
    let kind_byte = c.u8("resource-manager kind")?;
    let kind = RmgrKind::from_u8(kind_byte).ok_or_else(|| {
        c.error_at(
            OFF_KIND,
            format!("unknown resource-manager kind {kind_byte}"),
        )
    })?;
    debug_assert_eq!(c.pos, OFF_INFO);
    let info = c.u8("info")?;
    let prev_lsn = Lsn(c.u64("prev LSN")?);
    debug_assert_eq!(c.pos, OFF_NBLOCKS);
    let nblocks = c.u8("block count")? as usize;
    if nblocks > MAX_BLOCK_REFS {
        return Err(c.error_at(
            OFF_NBLOCKS,
            format!("{nblocks} block references; at most {MAX_BLOCK_REFS} are allowed"),
        ));
    }
    debug_assert_eq!(c.pos, OFF_DURABLE);
    let durable_lsn = Lsn(c.u64("durable LSN")?);
    debug_assert_eq!(c.pos, HEADER_LEN);
    let mut blocks = Vec::with_capacity(nblocks);
    for i in 0..nblocks {
        blocks.push(decode_block(&mut c, i)?);
    }
    let payload_at = c.pos;
    let payload_len = c.u32("payload length")? as usize;
    if payload_len > MAX_PAYLOAD_LEN {
        return Err(c.error_at(
            payload_at,
            format!("payload length {payload_len} exceeds the maximum {MAX_PAYLOAD_LEN}"),
        ));
    }
    let payload = c.take(payload_len, "payload")?.to_vec();
    if c.pos != bytes.len() {
        return Err(c.error(format!(
            "{} bytes left over after the payload",
            bytes.len() - c.pos
        )));
    }
    Ok(Record {
        xid,
        kind,
        info,
        prev_lsn,
        durable_lsn,
        blocks,
        payload,
    })
}

fn decode_block(c: &mut Cursor<'_>, i: usize) -> Result<BlockRef> {
    let start = c.pos;
    let rel = RelId(c.u32("block relation")?);
    let fork_byte = c.u8("block fork")?;
    let fork = Fork::from_u8(fork_byte)
        .ok_or_else(|| c.error_at(start + 4, format!("block {i}: unknown fork {fork_byte}")))?;
    let block = c.u32("block number")?;
    let flags = c.u8("block flags")?;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(c.error_at(start + 9, format!("block {i}: unknown flags {flags:#04x}")));
    }
    let image = if flags & HAS_IMAGE != 0 {
        let hole_at = c.pos;
        let offset = c.u16("hole offset")? as usize;
        let length = c.u16("hole length")? as usize;
        let hole = Hole::new(offset, length)
            .map_err(|e| c.error_at(hole_at, format!("block {i}: {e}")))?;
        if length == 0 && offset != 0 {
            return Err(c.error_at(
                hole_at,
                format!("block {i}: empty hole with nonzero offset {offset}"),
            ));
        }
        // Cannot underflow: Hole::new checked length <= PAGE_SIZE.
        let stored = PAGE_SIZE - hole.length();
        let bytes = c.take(stored, "page image")?;
        Some(PageImage {
            hole,
            bytes: bytes.into(),
        })
    } else {
        None
    };
    Ok(BlockRef {
        tag: BufferTag { rel, fork, block },
        will_init: flags & WILL_INIT != 0,
        image,
    })
}

/// Reads fields off the front of a record, checking every length.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| {
                self.error(format!(
                    "{what} needs {n} bytes but only {} remain",
                    self.bytes.len().saturating_sub(self.pos)
                ))
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        self.array(what).map(u16::from_le_bytes)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    fn error(&self, detail: String) -> WalError {
        self.error_at(self.pos, detail)
    }

    fn error_at(&self, offset: usize, detail: String) -> WalError {
        WalError::MalformedRecord { offset, detail }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::RelFork;
    use proptest::prelude::*;

    fn tag(rel: u32, block: u32) -> BufferTag {
        BufferTag::new(RelFork::main(RelId(rel)), block)
    }

    fn patterned_page(seed: u8) -> Vec<u8> {
        (0..PAGE_SIZE)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn round_trip(r: &Record) -> Record {
        let bytes = r.encode();
        assert_eq!(bytes.len(), r.encoded_len());
        let back = decode(&bytes).expect("decodes");
        assert_eq!(&back, r);
        back
    }

    /// Recompute the CRC of a record after a test has edited its fields, so
    /// that the decoder's field checks (not just the CRC) are exercised.
    fn reseal(bytes: &mut [u8]) {
        if bytes.len() >= HEADER_LEN {
            let crc = compute_crc(bytes);
            bytes[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }

    #[test]
    fn header_only_record_round_trips() {
        let r = Record::builder(RmgrKind::Xact, 1, 42)
            .build()
            .unwrap()
            .with_prev_lsn(Lsn(0x1234));
        assert_eq!(r.encoded_len(), MIN_RECORD_LEN);
        round_trip(&r);
    }

    #[test]
    fn record_with_several_blocks_and_payload_round_trips() {
        let fsm = BufferTag {
            rel: RelId(9),
            fork: Fork::FreeSpace,
            block: 3,
        };
        let r = Record::builder(RmgrKind::Btree, 0x20, u64::MAX)
            .block(BlockRef::new(tag(1, 0)))
            .block(BlockRef::new(tag(1, 7)).will_init())
            .block(BlockRef::new(fsm))
            .payload(b"split at key 17".to_vec())
            .build()
            .unwrap()
            .with_prev_lsn(Lsn(u64::MAX));
        let back = round_trip(&r);
        assert!(back.blocks()[1].is_will_init());
        assert_eq!(back.blocks()[2].tag(), fsm);
    }

    #[test]
    fn image_without_hole_restores_the_page() {
        let page = patterned_page(3);
        let r = Record::builder(RmgrKind::FullPage, 0, 0)
            .block(BlockRef::with_image(tag(5, 2), &page, Hole::NONE).unwrap())
            .build()
            .unwrap();
        let back = round_trip(&r);
        assert_eq!(back.blocks()[0].image().unwrap().bytes().len(), PAGE_SIZE);
        assert_eq!(back.restore_page(0).unwrap().as_slice(), page.as_slice());
    }

    #[test]
    fn image_with_hole_omits_it_and_restores_zeros() {
        let page = patterned_page(9);
        let hole = Hole::between(100, 8000).unwrap();
        let r = Record::builder(RmgrKind::Heap, 0, 7)
            .block(BlockRef::with_image(tag(5, 2), &page, hole).unwrap())
            .payload(vec![1, 2, 3])
            .build()
            .unwrap();
        let bytes = r.encode();
        assert_eq!(
            bytes.len(),
            HEADER_LEN
                + BLOCK_REF_LEN
                + IMAGE_HEADER_LEN
                + (PAGE_SIZE - 7900)
                + PAYLOAD_LEN_LEN
                + 3
        );
        let back = round_trip(&r);
        let restored = back.restore_page(0).unwrap();
        assert_eq!(restored[..100], page[..100]);
        assert!(restored[100..8000].iter().all(|b| *b == 0));
        assert_eq!(restored[8000..], page[8000..]);
        assert_eq!(back.restore_page(1), None);
    }

    #[test]
    fn hole_covering_the_whole_page_stores_nothing() {
        let page = vec![0u8; PAGE_SIZE];
        let r = Record::builder(RmgrKind::FullPage, 0, 0)
            .block(
                BlockRef::with_image(tag(1, 1), &page, Hole::new(0, PAGE_SIZE).unwrap()).unwrap(),
            )
            .build()
            .unwrap();
        let back = round_trip(&r);
        assert_eq!(back.restore_page(0).unwrap(), [0u8; PAGE_SIZE]);
    }

    #[test]
    fn largest_record_round_trips() {
        let page = patterned_page(1);
        let mut b = Record::builder(RmgrKind::Btree, 0xFF, 1);
        for i in 0..MAX_BLOCK_REFS as u32 {
            b = b.block(BlockRef::with_image(tag(i, i), &page, Hole::NONE).unwrap());
        }
        let r = b.payload(vec![0xAB; MAX_PAYLOAD_LEN]).build().unwrap();
        assert_eq!(r.encoded_len(), MAX_RECORD_LEN);
        round_trip(&r);
    }

    #[test]
    fn builder_rejects_records_past_the_limits() {
        let mut b = Record::builder(RmgrKind::Heap, 0, 1);
        for i in 0..=MAX_BLOCK_REFS as u32 {
            b = b.block(BlockRef::new(tag(1, i)));
        }
        let e = b.build().unwrap_err();
        assert!(e.to_string().contains("33 block references"), "{e}");
        let e = Record::builder(RmgrKind::Heap, 0, 1)
            .payload(vec![0; MAX_PAYLOAD_LEN + 1])
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("payload"), "{e}");
    }

    #[test]
    fn holes_outside_the_page_and_short_pages_are_rejected() {
        assert!(Hole::new(PAGE_SIZE - 10, 11).is_err());
        assert!(Hole::new(usize::MAX, 2).is_err());
        assert!(Hole::between(200, 100).is_err());
        assert_eq!(Hole::new(500, 0).unwrap(), Hole::NONE);
        assert!(BlockRef::with_image(tag(1, 1), &[0u8; 100], Hole::NONE).is_err());
    }

    #[test]
    fn unknown_kind_fork_and_flags_are_decode_errors() {
        let r = Record::builder(RmgrKind::Heap, 0, 1)
            .block(BlockRef::new(tag(1, 1)))
            .build()
            .unwrap();
        let good = r.encode();
        let cases: [(usize, u8, &str); 4] = [
            (OFF_KIND, 0, "unknown resource-manager kind 0"),
            (OFF_KIND, 9, "unknown resource-manager kind 9"),
            (HEADER_LEN + 4, 2, "unknown fork 2"),
            (HEADER_LEN + 9, 0x04, "unknown flags"),
        ];
        for (offset, value, message) in cases {
            let mut bad = good.clone();
            bad[offset] = value;
            reseal(&mut bad);
            let e = decode(&bad).unwrap_err();
            assert!(e.to_string().contains(message), "{e}");
            assert_eq!(e.kind(), crate::ErrorKind::CorruptData);
        }
    }

    #[test]
    fn checksum_mismatch_is_named() {
        let mut bytes = Record::builder(RmgrKind::Xact, 0, 1)
            .payload(b"commit".to_vec())
            .build()
            .unwrap()
            .encode();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let e = decode(&bytes).unwrap_err();
        assert!(e.to_string().contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn every_truncation_of_a_record_is_an_error() {
        let page = patterned_page(4);
        let bytes = Record::builder(RmgrKind::Heap, 3, 99)
            .block(BlockRef::with_image(tag(2, 2), &page, Hole::new(64, 4000).unwrap()).unwrap())
            .block(BlockRef::new(tag(2, 3)))
            .payload(b"tuple".to_vec())
            .build()
            .unwrap()
            .encode();
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut} decoded");
        }
    }

    #[test]
    fn every_truncation_with_resealed_length_is_an_error() {
        // Fix the length and CRC after cutting, so the cut is found by the
        // field checks rather than the length or CRC check.
        let bytes = Record::builder(RmgrKind::Heap, 3, 99)
            .block(
                BlockRef::with_image(tag(2, 2), &patterned_page(2), Hole::new(64, 4000).unwrap())
                    .unwrap(),
            )
            .payload(b"tuple".to_vec())
            .build()
            .unwrap()
            .encode();
        for cut in HEADER_LEN..bytes.len() {
            let mut b = bytes[..cut].to_vec();
            b[..4].copy_from_slice(&(cut as u32).to_le_bytes());
            reseal(&mut b);
            let e = decode(&b).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::CorruptData, "cut {cut}: {e}");
        }
    }

    fn arb_hole() -> impl Strategy<Value = Hole> {
        (0..=PAGE_SIZE)
            .prop_flat_map(|off| (Just(off), 0..=PAGE_SIZE - off))
            .prop_map(|(off, len)| Hole::new(off, len).expect("generated inside the page"))
    }

    fn arb_block() -> impl Strategy<Value = BlockRef> {
        (
            any::<u32>(),
            0u8..2,
            any::<u32>(),
            any::<bool>(),
            proptest::option::of((any::<u8>(), arb_hole())),
        )
            .prop_map(|(rel, fork, block, init, image)| {
                let tag = BufferTag {
                    rel: RelId(rel),
                    fork: Fork::from_u8(fork).expect("0 or 1"),
                    block,
                };
                let b = match image {
                    Some((seed, hole)) => {
                        BlockRef::with_image(tag, &patterned_page(seed), hole).expect("valid")
                    }
                    None => BlockRef::new(tag),
                };
                if init { b.will_init() } else { b }
            })
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        (
            proptest::sample::select(RmgrKind::ALL.to_vec()),
            any::<u8>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(arb_block(), 0..4),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(|(kind, info, xid, prev, blocks, payload)| {
                let mut b = Record::builder(kind, info, xid).payload(payload);
                for block in blocks {
                    b = b.block(block);
                }
                b.build().expect("within limits").with_prev_lsn(Lsn(prev))
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn random_records_round_trip(r in arb_record()) {
            let bytes = r.encode();
            prop_assert_eq!(bytes.len(), r.encoded_len());
            prop_assert_eq!(decode(&bytes).unwrap(), r);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let e = decode(&bytes).unwrap_err();
            prop_assert_eq!(e.kind(), crate::ErrorKind::CorruptData);
        }

        #[test]
        fn random_bytes_with_valid_length_and_crc_never_panic(
            mut bytes in proptest::collection::vec(any::<u8>(), MIN_RECORD_LEN..400)
        ) {
            let len = bytes.len() as u32;
            bytes[..4].copy_from_slice(&len.to_le_bytes());
            reseal(&mut bytes);
            // Usually an error (unknown kind, bad lengths); if it does decode,
            // it must encode back to the same bytes.
            if let Ok(r) = decode(&bytes) {
                prop_assert_eq!(r.encode(), bytes);
            }
        }

        #[test]
        fn mutated_records_never_panic(
            r in arb_record(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            reseal_after in any::<bool>(),
        ) {
            let mut bytes = r.encode();
            for (at, x) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= x.max(1);
            }
            if reseal_after {
                reseal(&mut bytes);
            }
            if let Ok(back) = decode(&bytes) {
                prop_assert_eq!(back.encode(), bytes);
            }
        }

        #[test]
        fn every_prefix_of_a_random_record_is_an_error(r in arb_record()) {
            let bytes = r.encode();
            for cut in 0..bytes.len() {
                prop_assert!(decode(&bytes[..cut]).is_err());
            }
        }
    }
}
