//! Keys: the indexed column's value, and how it is stored so that bytes compare
//! the way values do.
//!
//! Every key is stored in an *order-preserving* byte form, so the tree compares
//! keys with one `memcmp` whatever the column type (and redo can place an entry
//! without knowing the type):
//!
//! | type | stored as | order |
//! |---|---|---|
//! | `I64(v)` | 8 bytes, big-endian, sign bit flipped (`v as u64 ^ 1 << 63`) | numeric: `-1 < 0 < 1` |
//! | `Bytes(b)` | the bytes themselves | lexicographic, a prefix first |
//!
//! An index entry is the pair (key, heap TID); the TID makes every entry
//! unique, so equal keys are ordered by TID (PostgreSQL 12's "heapkeyspace").
//! [`SearchKey`] is that pair as the tree compares it.

use std::cmp::Ordering;
use std::fmt;

use heap::tuple::Tid;

/// The type of an index's column, recorded in the meta page.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum KeyType {
    /// Signed 64-bit integers, compared numerically.
    I64,
    /// Byte strings, compared lexicographically.
    Bytes,
}

impl KeyType {
    pub(crate) fn code(self) -> u8 {
        match self {
            KeyType::I64 => 1,
            KeyType::Bytes => 2,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<KeyType> {
        match c {
            1 => Some(KeyType::I64),
            2 => Some(KeyType::Bytes),
            _ => None,
        }
    }
}

/// A value of the indexed column.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Key {
    I64(i64),
    Bytes(Vec<u8>),
}

impl Key {
    /// The column type this key belongs to.
    pub fn key_type(&self) -> KeyType {
        match self {
            Key::I64(_) => KeyType::I64,
            Key::Bytes(_) => KeyType::Bytes,
        }
    }

    /// The order-preserving stored form.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Key::I64(v) => Key::encode_i64(*v).to_vec(),
            Key::Bytes(b) => b.clone(),
        }
    }

    /// Length of the stored form ([`Key::encode`]) without building it.
    pub fn encoded_len(&self) -> usize {
        match self {
            Key::I64(_) => 8,
            Key::Bytes(b) => b.len(),
        }
    }

    /// The stored form of an `i64` key, on the stack: what
    /// `Key::I64(v).encode()` returns, without allocating.
    pub fn encode_i64(v: i64) -> [u8; 8] {
        ((v as u64) ^ (1 << 63)).to_be_bytes()
    }

    /// The key whose stored form is `bytes`, for a column of type `ty`;
    /// `None` if the bytes cannot be one (an I64 key that is not 8 bytes).
    pub fn decode(ty: KeyType, bytes: &[u8]) -> Option<Key> {
        match ty {
            KeyType::I64 => {
                let b: [u8; 8] = bytes.try_into().ok()?;
                Some(Key::I64((u64::from_be_bytes(b) ^ (1 << 63)) as i64))
            }
            KeyType::Bytes => Some(Key::Bytes(bytes.to_vec())),
        }
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Numeric order for integers, lexicographic for bytes; an integer sorts
/// before any byte string (an index never holds both).
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::I64(a), Key::I64(b)) => a.cmp(b),
            (Key::Bytes(a), Key::Bytes(b)) => a.cmp(b),
            (Key::I64(_), Key::Bytes(_)) => Ordering::Less,
            (Key::Bytes(_), Key::I64(_)) => Ordering::Greater,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::I64(v) => write!(f, "({v})"),
            Key::Bytes(b) if b.len() <= 32 => write!(f, "({})", String::from_utf8_lossy(b)),
            Key::Bytes(b) => write!(
                f,
                "({}... {} bytes)",
                String::from_utf8_lossy(&b[..32]),
                b.len()
            ),
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
}
