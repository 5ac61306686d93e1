//! Transactions: xids, the commit log, snapshots, and their recovery.
//!
//! ```text
//!   TransactionManager ── RunningSet (snapshot.rs): next xid + running xids, sharded
//!          │           └─ Clog (clog.rs): 2 status bits per xid + commit LSN per 32, in pages
//!          │                              of relation CLOG_REL, through the BufferPool
//!          ├── Wal: Xact COMMIT / ABORT records (xact.rs), flushed for synchronous commit
//!          └── impl heap::txn::TransactionStatus: status(xid), flushed_lsn()
//! ```

pub mod clog;
pub(crate) mod registry;
pub mod snapshot;
pub mod xact;

pub use wal::Xid;
