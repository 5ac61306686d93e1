//! [`RowRef`]: a visible row as a borrowed view of its pinned, share-locked
//! page. Nothing is copied; each accessor decodes only the column asked for.
//!
//! The encoding is drawn in `value`. An accessor finds its column by walking
//! the columns before it (NULLs take no bytes, byte strings carry a length),
//! or, when every column before it is a NOT NULL i64, at the offset its
//! [`Col`] precomputed. Bytes from disk are not trusted: every offset and
//! length is checked against the tuple, and a bad one is
//! [`EngineError::CorruptRow`] naming the table and the row, never a panic.
//! An accessor checks what it reads (the column count, the column's null bit,
//! its bytes); [`RowRef::to_row`] checks the whole row as a full decode does.
//!
//! A `RowRef` lives only inside the callback it is handed to, while the page
//! is share-locked: the callback must not call back into the database (it
//! could wait for a lock this thread holds). Copy out what you need.

use bufmgr::RelId;
use heap::Tid;

use crate::catalog::TableInfo;
use crate::error::{EngineError, Result};
use crate::value::{ColumnType, Row, Value, decode_row};

/// The TID type rows are named by.
pub type RowId = Tid;

/// One column of one table, resolved ([`Table::column`](crate::Table::column)).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Col {
    pub(crate) rel: RelId,
    pub(crate) idx: u32,
    pub(crate) ty: ColumnType,
    pub(crate) nullable: bool,
    /// Byte offset of the value in every row, when it does not depend on
    /// the row (every column before it is a NOT NULL i64).
    pub(crate) fixed: Option<u32>,
}

impl Col {
    /// Position in the table's columns.
    pub fn index(&self) -> usize {
        self.idx as usize
    }

    pub fn ty(&self) -> ColumnType {
        self.ty
    }

    pub fn nullable(&self) -> bool {
        self.nullable
    }
}

/// Column `idx` of table `info` as a [`Col`] (`idx` must be in range).
pub(crate) fn col_of(info: &TableInfo, idx: usize) -> Col {
    let cols = &info.columns;
    // Rows start with the column count (2 bytes) and the null bitmap; if
    // every column before this one is a NOT NULL i64, its value is always at
    // the same offset.
    let fixed = cols[..idx]
        .iter()
        .all(|c| c.ty == ColumnType::I64 && !c.nullable)
        .then(|| 2 + cols.len().div_ceil(8) + 8 * idx)
        .and_then(|o| u32::try_from(o).ok());
    Col {
        rel: info.rel,
        idx: idx as u32,
        ty: cols[idx].ty,
        nullable: cols[idx].nullable,
        fixed,
    }
}

/// A visible row on a share-locked page (module docs).
#[derive(Copy, Clone, Debug)]
pub struct RowRef<'a> {
    id: RowId,
    data: &'a [u8],
    table: &'a TableInfo,
}

const COUNT_LEN: usize = 2;

impl<'a> RowRef<'a> {
    #[inline]
    pub(crate) fn new(id: RowId, data: &'a [u8], table: &'a TableInfo) -> RowRef<'a> {
        RowRef { id, data, table }
    }

    /// The row's id (its heap TID).
    #[inline]
    pub fn id(&self) -> RowId {
        self.id
    }

    /// The definition of the row's table.
    pub fn table(&self) -> &'a TableInfo {
        self.table
    }

    /// The encoded row (the tuple's data part).
    pub fn raw(&self) -> &'a [u8] {
        self.data
    }

    /// The non-NULL `I64` column `col`.
    #[inline]
    pub fn i64(&self, col: Col) -> Result<i64> {
        self.i64_opt(col)?
            .ok_or_else(|| self.wrong(col, "is NULL (read it with i64_opt)"))
    }

    /// The `I64` column `col`, `None` if NULL.
    #[inline]
    pub fn i64_opt(&self, col: Col) -> Result<Option<i64>> {
        if col.ty != ColumnType::I64 {
            return Err(self.wrong(col, "is not an i64 column"));
        }
        match self.locate(col)? {
            None => Ok(None),
            Some(start) => {
                let b = self.data.get(start..start + 8).ok_or_else(|| {
                    self.corrupt(format!("i64 column ends past byte {}", self.data.len()))
                })?;
                Ok(Some(i64::from_le_bytes(b.try_into().expect("8 bytes"))))
            }
        }
    }

    /// The non-NULL `Bytes` column `col`, borrowed from the page.
    #[inline]
    pub fn bytes(&self, col: Col) -> Result<&'a [u8]> {
        self.bytes_opt(col)?
            .ok_or_else(|| self.wrong(col, "is NULL (read it with bytes_opt)"))
    }

    /// The `Bytes` column `col`, `None` if NULL.
    pub fn bytes_opt(&self, col: Col) -> Result<Option<&'a [u8]>> {
        if col.ty != ColumnType::Bytes {
            return Err(self.wrong(col, "is not a bytes column"));
        }
        match self.locate(col)? {
            None => Ok(None),
            Some(start) => {
                let (len, body) = self.len_prefixed(start)?;
                Ok(Some(&self.data[body..body + len]))
            }
        }
    }

    /// Column `col` as an owned [`Value`].
    pub fn value(&self, col: Col) -> Result<Value> {
        Ok(match col.ty {
            ColumnType::I64 => self.i64_opt(col)?.map_or(Value::Null, Value::I64),
            ColumnType::Bytes => self
                .bytes_opt(col)?
                .map_or(Value::Null, |b| Value::Bytes(b.to_vec())),
        })
    }

    /// The whole row, decoded and checked as every owned read is.
    pub fn to_row(&self) -> Result<Row> {
        decode_row(&self.table.columns, self.data, |d| self.corrupt(d))
    }

    /// The byte offset of column `col`'s value, `None` if it is NULL.
    #[inline]
    fn locate(&self, col: Col) -> Result<Option<usize>> {
        if col.rel != self.table.rel {
            return Err(EngineError::WrongColumn {
                table: self.table.name.clone(),
                detail: format!(
                    "column handle {} belongs to another table ({})",
                    col.idx, col.rel
                ),
            });
        }
        let cols = &self.table.columns;
        let n = cols.len();
        let stored = self
            .data
            .get(..COUNT_LEN)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
        if stored != Some(n) {
            return Err(self.corrupt(match stored {
                Some(s) => format!("{s} columns stored, the table has {n}"),
                None => "row shorter than its column count".into(),
            }));
        }
        let bitmap = self
            .data
            .get(COUNT_LEN..COUNT_LEN + n.div_ceil(8))
            .ok_or_else(|| self.corrupt("row ends inside its null bitmap".into()))?;
        let is_null = |i: usize| bitmap[i / 8] & (1 << (i % 8)) != 0;
        let idx = col.idx as usize;
        if is_null(idx) {
            if !cols[idx].nullable {
                return Err(self.corrupt(format!(
                    "NULL stored in NOT NULL column {:?}",
                    cols[idx].name
                )));
            }
            return Ok(None);
        }
        if let Some(off) = col.fixed {
            return Ok(Some(off as usize));
        }
        let mut pos = COUNT_LEN + bitmap.len();
        for (i, c) in cols[..idx].iter().enumerate() {
            if is_null(i) {
                continue;
            }
            pos = match c.ty {
                ColumnType::I64 => pos + 8,
                ColumnType::Bytes => {
                    let (len, body) = self.len_prefixed(pos)?;
                    body + len
                }
            };
        }
        Ok(Some(pos))
    }

    /// A length-prefixed value at `start`: (length, offset of the bytes),
    /// checked to lie inside the row.
    fn len_prefixed(&self, start: usize) -> Result<(usize, usize)> {
        let l = self.data.get(start..start + 4).ok_or_else(|| {
            self.corrupt(format!("length prefix at byte {start} past the row's end"))
        })?;
        let len = u32::from_le_bytes(l.try_into().expect("4 bytes")) as usize;
        let body = start + 4;
        if body
            .checked_add(len)
            .is_none_or(|end| end > self.data.len())
        {
            return Err(self.corrupt(format!(
                "a value of {len} bytes at byte {body} runs past the row's {} bytes",
                self.data.len()
            )));
        }
        Ok((len, body))
    }

    fn wrong(&self, col: Col, what: &str) -> EngineError {
        let name = self
            .table
            .columns
            .get(col.idx as usize)
            .map_or("?", |c| c.name.as_str());
        EngineError::WrongColumn {
            table: self.table.name.clone(),
            detail: format!("column {name:?} {what}"),
        }
    }

    fn corrupt(&self, detail: String) -> EngineError {
        EngineError::CorruptRow {
            table: self.table.name.clone(),
            row_id: self.id,
            detail,
        }
    }
}
