#![doc = include_str!("../README.md")]

pub mod error;
pub mod recovery;
pub mod reserved;
pub mod txn;

pub use error::{EngineError, ErrorKind, Result};
pub use recovery::{RecoveryStats, recover, recover_from};
pub use reserved::{CLOG_REL, FIRST_USER_REL};
pub use txn::clog::{Clog, ClogStatus, XIDS_PER_PAGE};
pub use txn::snapshot::RunningSet;
pub use txn::xact::{
    CommitMode, Transaction, TransactionManager, TxnStats, XactRecord, next_xid_hint, redo_xact,
};
