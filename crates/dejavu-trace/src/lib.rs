//! dejavu's event model and trace file format.
//!
//! Every capture backend (ptrace, strace import, later eBPF and language agents) produces
//! [`Record`]s through a [`TraceWriter`]; every analysis reads them back with a
//! [`TraceReader`]. The byte layout is documented field by field in docs/trace-format.md.

pub mod codec;
mod error;
mod fdkind;
pub mod mask;
mod model;
pub mod names;
pub mod payload;
mod reader;
mod sys;
pub mod varint;
mod writer;

pub use error::{Result, TraceError};
pub use fdkind::{is_unnamed_file_name, unnamed_file_path, FdKind};
pub use model::*;
pub use reader::{Strings, TraceReader, Truncation};
pub use sys::{Sys, SysClass};
pub use writer::{TraceWriter, WriterOptions};
