//! Keys: the indexed columns' values, and how they are stored so that bytes
//! compare the way values do.
//!
//! Every key is stored in an *order-preserving* byte form, so the tree compares
//! keys with one `memcmp` whatever the column types (and redo can place an
//! entry without knowing them). There are two forms:
//!
//! **Single-column keys** (key types `I64` and `Bytes`, meta codes 1 and 2),
//! the original form, kept byte for byte so existing indexes read as before:
//!
//! | type | stored as | order |
//! |---|---|---|
//! | `I64(v)` | 8 bytes, big-endian, sign bit flipped (`v as u64 ^ 1 << 63`) | numeric: `-1 < 0 < 1` |
//! | `Bytes(b)` | the bytes themselves | lexicographic, a prefix first |
//!
//! **Tuple keys** (key type `Tuple`, meta code 3, the column types listed in
//! the meta page): 1 to [`MAX_KEY_COLUMNS`] parts, each a tag byte and the
//! value, one after the other, as FoundationDB's tuple layer does:
//!
//! | part | tag | then | order |
//! |---|---|---|---|
//! | NULL | `0x01` | nothing | before every value of the column |
//! | `I64(v)` | `0x10` | 8 bytes as above | numeric |
//! | `F64(v)` | `0x20` | 8 bytes: IEEE total order (sign set: all bits flipped; else the sign bit flipped), big-endian | `-inf < -1.5 < 0 < 1.5 < +inf < NaN` |
//! | `Text(s)` | `0x30` | UTF-8 bytes, escaped, terminated | by UTF-8 bytes, a prefix first |
//! | `Bytes(b)` | `0x40` | the bytes, escaped, terminated | lexicographic, a prefix first |
//! | `Bool(b)` | `0x50` | one byte, 0 or 1 | `false < true` |
//! | `Timestamp(us)` | `0x60` | 8 bytes as `I64` | chronological |
//!
//! Text and bytes are *escaped* (each `0x00` becomes `0x00 0xFF`) and
//! *terminated* (`0x00 0x01`): the terminator sorts below every escaped byte,
//! so a shorter string sorts first, and a part's end is never ambiguous, so
//! the parts after it compare only when everything before is equal. A key
//! that is a prefix of another (fewer parts) sorts first; the tuples
//! starting with a given prefix are exactly the keys from the prefix's bytes
//! (included) to the prefix's bytes followed by `0xFF` (excluded): no tag is
//! `0xFF` (see [`prefix_end`]).
//!
//! `F64`: every NaN is stored as the one positive quiet NaN (it sorts after
//! `+inf`, and all NaNs are equal keys), and `-0.0` is stored as `0.0` (equal
//! keys, as in SQL): so a key decodes to the canonical value, not the bits
//! it was made from.
//!
//! An index entry is the pair (key, heap TID); the TID makes every entry
//! unique, so equal keys are ordered by TID (PostgreSQL 12's "heapkeyspace").
//! [`SearchKey`] is that pair as the tree compares it.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use heap::tuple::Tid;

/// Most columns a tuple key may have.
pub const MAX_KEY_COLUMNS: usize = 8;

/// The type of one column of a tuple key.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum ColumnKind {
    /// Signed 64-bit integers.
    I64,
    /// 64-bit floats, in IEEE total order (see the module docs).
    F64,
    /// UTF-8 text, ordered by its bytes.
    Text,
    /// Byte strings.
    Bytes,
    /// Booleans, `false` first.
    Bool,
    /// Microseconds since the Unix epoch.
    Timestamp,
}

impl ColumnKind {
    /// The tag byte a value of this kind starts with in a tuple key.
    pub fn tag(self) -> u8 {
        match self {
            ColumnKind::I64 => TAG_I64,
            ColumnKind::F64 => TAG_F64,
            ColumnKind::Text => TAG_TEXT,
            ColumnKind::Bytes => TAG_BYTES,
            ColumnKind::Bool => TAG_BOOL,
            ColumnKind::Timestamp => TAG_TIMESTAMP,
        }
    }

    fn from_tag(tag: u8) -> Option<ColumnKind> {
        Some(match tag {
            TAG_I64 => ColumnKind::I64,
            TAG_F64 => ColumnKind::F64,
            TAG_TEXT => ColumnKind::Text,
            TAG_BYTES => ColumnKind::Bytes,
            TAG_BOOL => ColumnKind::Bool,
            TAG_TIMESTAMP => ColumnKind::Timestamp,
            _ => return None,
        })
    }
}

const TAG_NULL: u8 = 0x01;
const TAG_I64: u8 = 0x10;
const TAG_F64: u8 = 0x20;
const TAG_TEXT: u8 = 0x30;
const TAG_BYTES: u8 = 0x40;
const TAG_BOOL: u8 = 0x50;
const TAG_TIMESTAMP: u8 = 0x60;
/// Above every tag: the end of the range of keys with a given prefix.
const PREFIX_END: u8 = 0xFF;

/// The column types of a tuple key (1 ..= [`MAX_KEY_COLUMNS`]), as the meta
/// page records them.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct TupleType {
    len: u8,
    kinds: [ColumnKind; MAX_KEY_COLUMNS],
}

impl TupleType {
    /// The tuple type of these columns; `None` for 0 or more than
    /// [`MAX_KEY_COLUMNS`] columns.
    pub fn new(kinds: &[ColumnKind]) -> Option<TupleType> {
        if kinds.is_empty() || kinds.len() > MAX_KEY_COLUMNS {
            return None;
        }
        let mut t = TupleType {
            len: kinds.len() as u8,
            kinds: [ColumnKind::I64; MAX_KEY_COLUMNS],
        };
        t.kinds[..kinds.len()].copy_from_slice(kinds);
        Some(t)
    }

    /// The columns' types, in key order.
    pub fn kinds(&self) -> &[ColumnKind] {
        &self.kinds[..usize::from(self.len)]
    }
}

impl fmt::Debug for TupleType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.kinds()).finish()
    }
}

/// The type of an index's key, recorded in the meta page.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum KeyType {
    /// Signed 64-bit integers, compared numerically (single-column form).
    I64,
    /// Byte strings, compared lexicographically (single-column form).
    Bytes,
    /// Tuples of these column types, in the tuple form.
    Tuple(TupleType),
}

impl KeyType {
    /// The meta page's key type code.
    pub(crate) fn code(self) -> u8 {
        match self {
            KeyType::I64 => 1,
            KeyType::Bytes => 2,
            KeyType::Tuple(_) => 3,
        }
    }

    /// The key type of meta code `c`; a tuple's column types are read from
    /// `kinds` (the meta page's list: a count, then one tag per column).
    pub(crate) fn from_code(c: u8, kinds: &[u8]) -> Option<KeyType> {
        match c {
            1 => Some(KeyType::I64),
            2 => Some(KeyType::Bytes),
            3 => {
                let (&n, rest) = kinds.split_first()?;
                let tags = rest.get(..usize::from(n))?;
                let k: Option<Vec<ColumnKind>> =
                    tags.iter().map(|&t| ColumnKind::from_tag(t)).collect();
                TupleType::new(&k?).map(KeyType::Tuple)
            }
            _ => None,
        }
    }

    /// Does `key` belong to this type (the right form, and in a tuple the
    /// right number of parts, each NULL or of its column's type)?
    pub fn accepts(&self, key: &Key) -> bool {
        match (self, key) {
            (KeyType::I64, Key::I64(_)) | (KeyType::Bytes, Key::Bytes(_)) => true,
            (KeyType::Tuple(t), Key::Tuple(parts)) => {
                parts.len() == t.kinds().len()
                    && parts
                        .iter()
                        .zip(t.kinds())
                        .all(|(p, &k)| p.kind().is_none_or(|pk| pk == k))
            }
            _ => false,
        }
    }
}

/// One part of a tuple key: a column's value, or NULL.
#[derive(Clone, Debug)]
pub enum KeyPart {
    Null,
    I64(i64),
    /// Compared, hashed and stored as its canonical form (see the module docs).
    F64(f64),
    Text(String),
    Bytes(Vec<u8>),
    Bool(bool),
    Timestamp(i64),
}

impl KeyPart {
    /// The column type, `None` for NULL.
    pub fn kind(&self) -> Option<ColumnKind> {
        Some(match self {
            KeyPart::Null => return None,
            KeyPart::I64(_) => ColumnKind::I64,
            KeyPart::F64(_) => ColumnKind::F64,
            KeyPart::Text(_) => ColumnKind::Text,
            KeyPart::Bytes(_) => ColumnKind::Bytes,
            KeyPart::Bool(_) => ColumnKind::Bool,
            KeyPart::Timestamp(_) => ColumnKind::Timestamp,
        })
    }

    fn tag(&self) -> u8 {
        self.kind().map_or(TAG_NULL, ColumnKind::tag)
    }

    /// Append this part's stored form to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(self.tag());
        match self {
            KeyPart::Null => {}
            KeyPart::I64(v) | KeyPart::Timestamp(v) => out.extend_from_slice(&Key::encode_i64(*v)),
            KeyPart::F64(v) => out.extend_from_slice(&encode_f64(*v)),
            KeyPart::Text(s) => escape_into(s.as_bytes(), out),
            KeyPart::Bytes(b) => escape_into(b, out),
            KeyPart::Bool(b) => out.push(u8::from(*b)),
        }
    }

    fn encoded_len(&self) -> usize {
        1 + match self {
            KeyPart::Null => 0,
            KeyPart::I64(_) | KeyPart::Timestamp(_) | KeyPart::F64(_) => 8,
            KeyPart::Text(s) => escaped_len(s.as_bytes()),
            KeyPart::Bytes(b) => escaped_len(b),
            KeyPart::Bool(_) => 1,
        }
    }

    /// Decode one part from the front of `bytes`; the part and the rest.
    fn decode(bytes: &[u8]) -> Option<(KeyPart, &[u8])> {
        let (&tag, rest) = bytes.split_first()?;
        if tag == TAG_NULL {
            return Some((KeyPart::Null, rest));
        }
        let fixed = |rest: &[u8]| -> Option<([u8; 8], usize)> {
            Some((rest.get(..8)?.try_into().ok()?, 8))
        };
        let (part, used) = match ColumnKind::from_tag(tag)? {
            ColumnKind::I64 => {
                let (b, n) = fixed(rest)?;
                (KeyPart::I64(decode_i64(b)), n)
            }
            ColumnKind::Timestamp => {
                let (b, n) = fixed(rest)?;
                (KeyPart::Timestamp(decode_i64(b)), n)
            }
            ColumnKind::F64 => {
                let (b, n) = fixed(rest)?;
                (KeyPart::F64(decode_f64(b)?), n)
            }
            ColumnKind::Bool => match rest.first()? {
                0 => (KeyPart::Bool(false), 1),
                1 => (KeyPart::Bool(true), 1),
                _ => return None,
            },
            ColumnKind::Bytes => {
                let (b, n) = unescape(rest)?;
                (KeyPart::Bytes(b), n)
            }
            ColumnKind::Text => {
                let (b, n) = unescape(rest)?;
                (KeyPart::Text(String::from_utf8(b).ok()?), n)
            }
        };
        Some((part, &rest[used..]))
    }

    fn cmp_part(&self, other: &KeyPart) -> Ordering {
        match (self, other) {
            (KeyPart::I64(a), KeyPart::I64(b)) | (KeyPart::Timestamp(a), KeyPart::Timestamp(b)) => {
                a.cmp(b)
            }
            (KeyPart::F64(a), KeyPart::F64(b)) => encode_f64(*a).cmp(&encode_f64(*b)),
            (KeyPart::Text(a), KeyPart::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (KeyPart::Bytes(a), KeyPart::Bytes(b)) => a.cmp(b),
            (KeyPart::Bool(a), KeyPart::Bool(b)) => a.cmp(b),
            (a, b) => a.tag().cmp(&b.tag()),
        }
    }
}

impl PartialEq for KeyPart {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_part(other) == Ordering::Equal
    }
}

impl Eq for KeyPart {}

impl Hash for KeyPart {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut b = Vec::new();
        self.encode_into(&mut b);
        b.hash(state);
    }
}

impl fmt::Display for KeyPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyPart::Null => write!(f, "NULL"),
            KeyPart::I64(v) => write!(f, "{v}"),
            KeyPart::F64(v) => write!(f, "{v:?}"),
            KeyPart::Text(s) => write!(f, "{:?}", cut(s.as_bytes())),
            KeyPart::Bytes(b) => write!(f, "{}", cut(b)),
            KeyPart::Bool(b) => write!(f, "{b}"),
            KeyPart::Timestamp(us) => write!(f, "{us}us"),
        }
    }
}

/// At most 32 bytes of a string for a message, lossily as UTF-8.
fn cut(b: &[u8]) -> String {
    if b.len() <= 32 {
        String::from_utf8_lossy(b).into_owned()
    } else {
        format!("{}... {} bytes", String::from_utf8_lossy(&b[..32]), b.len())
    }
}

/// The stored form of an `F64` part (module docs): NaN and `-0.0`
/// canonicalised, then the IEEE total-order transform, big-endian.
pub fn encode_f64(v: f64) -> [u8; 8] {
    let v = if v.is_nan() {
        f64::NAN
    } else if v == 0.0 {
        0.0
    } else {
        v
    };
    let bits = v.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    ordered.to_be_bytes()
}

/// The inverse of [`encode_f64`]; `None` for bytes it never produces (a
/// non-canonical NaN or `-0.0`).
fn decode_f64(b: [u8; 8]) -> Option<f64> {
    let ordered = u64::from_be_bytes(b);
    let bits = if ordered >> 63 == 1 {
        ordered ^ (1 << 63)
    } else {
        !ordered
    };
    let v = f64::from_bits(bits);
    (encode_f64(v) == b).then_some(v)
}

fn decode_i64(b: [u8; 8]) -> i64 {
    (u64::from_be_bytes(b) ^ (1 << 63)) as i64
}

fn escaped_len(b: &[u8]) -> usize {
    b.len() + b.iter().filter(|&&c| c == 0).count() + 2
}

fn escape_into(b: &[u8], out: &mut Vec<u8>) {
    for &c in b {
        out.push(c);
        if c == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// Undo [`escape_into`] from the front of `b`: the bytes and how many
/// stored bytes they took (terminator included).
fn unescape(b: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        match *b.get(i)? {
            0 => match *b.get(i + 1)? {
                0xFF => {
                    out.push(0);
                    i += 2;
                }
                0x01 => return Some((out, i + 2)),
                _ => return None,
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// The stored form of a tuple key made of `parts` (which may be fewer than
/// the index's columns: a prefix).
pub fn encode_parts(parts: &[KeyPart]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(KeyPart::encoded_len).sum());
    for p in parts {
        p.encode_into(&mut out);
    }
    out
}

/// Decode the parts of a stored tuple key (or prefix); `None` if the bytes
/// are not one.
pub fn decode_parts(mut bytes: &[u8]) -> Option<Vec<KeyPart>> {
    let mut parts = Vec::new();
    while !bytes.is_empty() {
        let (p, rest) = KeyPart::decode(bytes)?;
        parts.push(p);
        bytes = rest;
    }
    Some(parts)
}

/// The end (excluded) of the range of stored tuple keys that start with the
/// stored prefix `prefix`: the prefix followed by `0xFF`, above every tag.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(prefix.len() + 1);
    v.extend_from_slice(prefix);
    v.push(PREFIX_END);
    v
}

/// A key: the indexed column's value (single-column forms) or the indexed
/// columns' values (a tuple).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Key {
    I64(i64),
    Bytes(Vec<u8>),
    Tuple(Vec<KeyPart>),
}

impl Key {
    /// Is any part of this tuple key NULL? (Unique indexes treat a key with a
    /// NULL as distinct from every other, as SQL does.)
    pub fn has_null(&self) -> bool {
        matches!(self, Key::Tuple(p) if p.iter().any(|p| matches!(p, KeyPart::Null)))
    }

    /// The order-preserving stored form.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Key::I64(v) => Key::encode_i64(*v).to_vec(),
            Key::Bytes(b) => b.clone(),
            Key::Tuple(parts) => encode_parts(parts),
        }
    }

    /// Length of the stored form ([`Key::encode`]) without building it.
    pub fn encoded_len(&self) -> usize {
        match self {
            Key::I64(_) => 8,
            Key::Bytes(b) => b.len(),
            Key::Tuple(parts) => parts.iter().map(KeyPart::encoded_len).sum(),
        }
    }

    /// The stored form of an `i64` key, on the stack: what
    /// `Key::I64(v).encode()` returns, without allocating.
    pub fn encode_i64(v: i64) -> [u8; 8] {
        ((v as u64) ^ (1 << 63)).to_be_bytes()
    }

    /// The key whose stored form is `bytes`, for an index of type `ty`;
    /// `None` if the bytes cannot be one (an I64 key that is not 8 bytes, a
    /// tuple that does not decode or does not fit the column types).
    pub fn decode(ty: KeyType, bytes: &[u8]) -> Option<Key> {
        match ty {
            KeyType::I64 => Some(Key::I64(decode_i64(bytes.try_into().ok()?))),
            KeyType::Bytes => Some(Key::Bytes(bytes.to_vec())),
            KeyType::Tuple(_) => {
                let k = Key::Tuple(decode_parts(bytes)?);
                ty.accepts(&k).then_some(k)
            }
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The order of the stored forms: numeric for integers, lexicographic for
/// bytes, part by part for tuples (a prefix first). Keys of different forms
/// (never in one index) order by form.
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::I64(a), Key::I64(b)) => a.cmp(b),
            (Key::Bytes(a), Key::Bytes(b)) => a.cmp(b),
            (Key::Tuple(a), Key::Tuple(b)) => {
                for (x, y) in a.iter().zip(b) {
                    match x.cmp_part(y) {
                        Ordering::Equal => {}
                        o => return o,
                    }
                }
                a.len().cmp(&b.len())
            }
            (a, b) => a.form().cmp(&b.form()),
        }
    }
}

impl Key {
    fn form(&self) -> u8 {
        match self {
            Key::I64(_) => 0,
            Key::Bytes(_) => 1,
            Key::Tuple(_) => 2,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::I64(v) => write!(f, "({v})"),
            Key::Bytes(b) => write!(f, "({})", cut(b)),
            Key::Tuple(parts) => {
                write!(f, "(")?;
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{p}")?;
                }
                write!(f, ")")
            }
        }
    }
}

/// The smallest TID: sorts before every real entry with the same key
/// (line pointer numbers start at 1).
pub const TID_MIN: Tid = Tid::new(0, 0);
/// The largest TID: sorts after every entry with the same key.
pub const TID_MAX: Tid = Tid::new(u32::MAX, u16::MAX);

/// A position in the tree's key space: stored key bytes plus TID.
/// Ordered by key bytes, then TID: the tree's order.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SearchKey {
    pub key: Vec<u8>,
    pub tid: Tid,
}

impl SearchKey {
    pub fn new(key: Vec<u8>, tid: Tid) -> SearchKey {
        SearchKey { key, tid }
    }

    /// Before every entry: the empty key sorts first for both types (an I64
    /// key is never empty), and `TID_MIN` first among equal keys.
    pub fn minus_infinity() -> SearchKey {
        SearchKey::new(Vec::new(), TID_MIN)
    }

    /// Compare an entry `(key, tid)` with this search key.
    pub fn cmp_entry(&self, key: &[u8], tid: Tid) -> Ordering {
        key.cmp(&self.key).then(tid.cmp(&self.tid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn i64_encoding_preserves_numeric_order() {
        let vals = [i64::MIN, -1_000_000, -1, 0, 1, 255, 256, i64::MAX];
        for w in vals.windows(2) {
            assert!(Key::I64(w[0]).encode() < Key::I64(w[1]).encode(), "{w:?}");
        }
        for v in vals {
            assert_eq!(
                Key::decode(KeyType::I64, &Key::I64(v).encode()),
                Some(Key::I64(v))
            );
        }
    }

    #[test]
    fn bytes_order_is_lexicographic_with_prefix_first() {
        assert!(Key::Bytes(b"ab".to_vec()).encode() < Key::Bytes(b"abc".to_vec()).encode());
        assert!(Key::Bytes(b"abc".to_vec()).encode() < Key::Bytes(b"b".to_vec()).encode());
        assert_eq!(Key::decode(KeyType::I64, b"short"), None);
    }

    use proptest::prelude::*;

    fn part() -> impl Strategy<Value = KeyPart> {
        // Few distinct values per kind, so that equal parts (and so the
        // comparison of the parts after them) are common.
        prop_oneof![
            Just(KeyPart::Null),
            prop_oneof![Just(i64::MIN), Just(i64::MAX), -3i64..3].prop_map(KeyPart::I64),
            prop_oneof![
                Just(f64::NAN),
                Just(-f64::NAN),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(0.0),
                Just(-0.0),
                Just(f64::MIN_POSITIVE),
                Just(-f64::MIN_POSITIVE),
                (-3i32..3).prop_map(|v| f64::from(v) / 2.0),
            ]
            .prop_map(KeyPart::F64),
            // Embedded zero bytes, 0x01 and 0xFF: the escape's edge cases.
            proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1), Just(0xFF), Just(b'a')],
                0..5
            )
            .prop_map(KeyPart::Bytes),
            proptest::collection::vec(
                prop_oneof![Just('\0'), Just('a'), Just('\u{1}'), Just('é')],
                0..4
            )
            .prop_map(|c| KeyPart::Text(c.into_iter().collect())),
            any::<bool>().prop_map(KeyPart::Bool),
            (-2i64..2).prop_map(KeyPart::Timestamp),
        ]
    }

    /// A tuple of `kinds`' columns (each part NULL or of its kind).
    fn tuple_of(kinds: Vec<ColumnKind>) -> impl Strategy<Value = Vec<KeyPart>> {
        kinds
            .into_iter()
            .map(|k| {
                part()
                    .prop_filter("of the column's kind", move |p| {
                        p.kind().is_none_or(|pk| pk == k)
                    })
                    .boxed()
            })
            .collect::<Vec<_>>()
    }

    fn kinds() -> impl Strategy<Value = Vec<ColumnKind>> {
        proptest::collection::vec(
            prop_oneof![
                Just(ColumnKind::I64),
                Just(ColumnKind::F64),
                Just(ColumnKind::Text),
                Just(ColumnKind::Bytes),
                Just(ColumnKind::Bool),
                Just(ColumnKind::Timestamp),
            ],
            1..=MAX_KEY_COLUMNS,
        )
    }

    /// The order of decoded tuples, written independently of the encoding:
    /// part by part, NULL first, F64 by `total_cmp` after mapping every NaN
    /// to one and -0.0 to 0.0, strings by bytes; a prefix first.
    fn tuple_order(a: &[KeyPart], b: &[KeyPart]) -> Ordering {
        fn canon(v: f64) -> f64 {
            if v.is_nan() {
                f64::NAN
            } else if v == 0.0 {
                0.0
            } else {
                v
            }
        }
        for (x, y) in a.iter().zip(b) {
            let o = match (x, y) {
                (KeyPart::Null, KeyPart::Null) => Ordering::Equal,
                (KeyPart::Null, _) => Ordering::Less,
                (_, KeyPart::Null) => Ordering::Greater,
                (KeyPart::I64(x), KeyPart::I64(y)) => x.cmp(y),
                (KeyPart::Timestamp(x), KeyPart::Timestamp(y)) => x.cmp(y),
                (KeyPart::F64(x), KeyPart::F64(y)) => canon(*x).total_cmp(&canon(*y)),
                (KeyPart::Text(x), KeyPart::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
                (KeyPart::Bytes(x), KeyPart::Bytes(y)) => x.cmp(y),
                (KeyPart::Bool(x), KeyPart::Bool(y)) => x.cmp(y),
                (x, y) => panic!("parts of different kinds in one column: {x:?} {y:?}"),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        a.len().cmp(&b.len())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Two tuples of the same column types (or one a prefix of the
        /// other) compare as bytes exactly as their values compare, and
        /// both decode to their canonical values.
        #[test]
        fn tuple_encoding_orders_bytes_as_the_decoded_tuples_order(
            (a, b, cut) in kinds().prop_flat_map(|k| {
                let n = k.len();
                (tuple_of(k.clone()), tuple_of(k), 0..=n)
            })
        ) {
            let b = &b[..cut.min(b.len())];
            let (ea, eb) = (encode_parts(&a), encode_parts(b));
            prop_assert_eq!(ea.cmp(&eb), tuple_order(&a, b), "{:?} vs {:?}", a, b);
            prop_assert_eq!(Key::Tuple(a.clone()).cmp(&Key::Tuple(b.to_vec())), tuple_order(&a, b));
            prop_assert_eq!(ea.len(), Key::Tuple(a.clone()).encoded_len());
            let back = decode_parts(&ea).expect("decodes");
            prop_assert_eq!(tuple_order(&back, &a), Ordering::Equal);
            prop_assert_eq!(encode_parts(&back), ea.clone());
            // Every key starting with a prefix lies in [prefix, prefix_end).
            let p = encode_parts(&a[..cut.min(a.len())]);
            prop_assert!(ea >= p && ea < prefix_end(&p));
        }
    }

    #[test]
    fn f64_parts_order_negatives_zeros_infinities_and_nan() {
        let vals = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.5,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in vals.windows(2) {
            assert!(encode_f64(w[0]) < encode_f64(w[1]), "{w:?}");
        }
        assert_eq!(encode_f64(-0.0), encode_f64(0.0), "-0.0 is the key 0.0");
        assert_eq!(encode_f64(-f64::NAN), encode_f64(f64::NAN), "one NaN");
        let nan = decode_parts(&encode_parts(&[KeyPart::F64(-f64::NAN)])).unwrap();
        assert!(matches!(nan[0], KeyPart::F64(v) if v.is_nan()));
    }

    #[test]
    fn text_and_bytes_escape_zero_bytes_and_end_with_a_terminator() {
        let e = encode_parts(&[KeyPart::Bytes(vec![b'a', 0, b'b'])]);
        assert_eq!(e, [TAG_BYTES, b'a', 0, 0xFF, b'b', 0, 1]);
        // "a" < "a\0" < "a\x01" < "ab", and the column after decides only
        // between equal strings.
        let t = |s: &str, n: i64| encode_parts(&[KeyPart::Text(s.into()), KeyPart::I64(n)]);
        assert!(t("a", 9) < t("a\0", 0));
        assert!(t("a\0", 9) < t("a\u{1}", 0));
        assert!(t("a\u{1}", 9) < t("ab", 0));
        assert!(t("a", 1) < t("a", 2));
    }

    #[test]
    fn damaged_tuple_bytes_do_not_decode() {
        let ty = KeyType::Tuple(TupleType::new(&[ColumnKind::I64, ColumnKind::Text]).unwrap());
        let good = encode_parts(&[KeyPart::I64(7), KeyPart::Text("x".into())]);
        assert!(Key::decode(ty, &good).is_some());
        for cut in 0..good.len() {
            assert_eq!(Key::decode(ty, &good[..cut]), None, "cut at {cut}");
        }
        // A bool part in a text column; an unknown tag; a bad escape.
        let wrong = encode_parts(&[KeyPart::I64(7), KeyPart::Bool(true)]);
        assert_eq!(Key::decode(ty, &wrong), None);
        assert_eq!(decode_parts(&[0x77]), None);
        assert_eq!(decode_parts(&[TAG_BYTES, 0, 7]), None);
        assert_eq!(decode_parts(&[TAG_TEXT, 0xC3, 0, 1]), None, "not UTF-8");
        assert_eq!(KeyType::from_code(3, &[9, 0x10]), None, "9 columns");
        assert_eq!(KeyType::from_code(3, &[0]), None, "no column");
        assert_eq!(
            KeyType::from_code(3, &[1, 0x10]),
            Some(KeyType::Tuple(TupleType::new(&[ColumnKind::I64]).unwrap()))
        );
    }
}
