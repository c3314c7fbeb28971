//! Errors of the trace reader and writer. Every corruption error names a byte offset.

use std::io;

/// What can go wrong reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The input does not start like a dejavu trace.
    #[error("not a dejavu trace: {what} at byte offset {offset}")]
    NotATrace {
        /// Byte offset of the problem.
        offset: u64,
        /// What was found instead.
        what: String,
    },
    /// A trace written by an incompatible version of dejavu.
    #[error(
        "unsupported trace format version {major}.{minor} (byte offset 8): this dejavu reads versions {}.x to {}.x",
        crate::codec::OLDEST_MAJOR,
        crate::codec::FORMAT_MAJOR
    )]
    Version {
        /// The file's major version.
        major: u16,
        /// The file's minor version.
        minor: u16,
    },
    /// The bytes are damaged.
    #[error("corrupt trace at byte offset {offset}: {what}")]
    Corrupt {
        /// Byte offset of the block (or header) that is damaged.
        offset: u64,
        /// What is wrong, and where inside the block.
        what: String,
    },
    /// The underlying file or stream failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl TraceError {
    pub(crate) fn corrupt(offset: u64, what: impl Into<String>) -> Self {
        TraceError::Corrupt {
            offset,
            what: what.into(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = TraceError> = std::result::Result<T, E>;
