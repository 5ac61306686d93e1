#![doc = include_str!("../README.md")]

pub mod checkpoint;
pub mod checkpointer;
pub mod control;
pub mod error;
pub mod fs;
pub mod log;
pub mod lsn;
#[cfg(feature = "testing")]
pub mod rates;
pub mod reader;
pub mod record;
pub mod redo;
pub mod segment;
#[cfg(feature = "testing")]
pub mod sim_disk;
pub mod sink;

pub use checkpoint::{CHECKPOINT_ONLINE, CheckpointInfo, CheckpointPayload};
pub use checkpointer::{CheckpointFn, Checkpointer, CheckpointerConfig};
pub use control::{ControlData, control_path, read_control};
pub use error::{ErrorKind, Result, WalError};
pub use fs::{FileSystem, FsFile, OsFileSystem};
pub use log::{ForcedFullPageWrites, Startup, Wal, WalConfig, WalStats};
pub use lsn::Lsn;
pub use reader::{EndReason, Torn, WalEnd, WalReader};
pub use record::{BlockRef, Hole, PageImage, Record, RecordBuilder, RmgrKind, Xid, decode};
pub use redo::redo_full_page;
pub use segment::{DEFAULT_SEGMENT_SIZE, MIN_SEGMENT_SIZE};
pub use sink::{FPI_FOR_HINT, FPI_NEW_PAGE, page_lsn};
