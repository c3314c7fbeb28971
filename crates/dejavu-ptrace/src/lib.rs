//! dejavu's ptrace capture backend: runs a program (or attaches to one) and records every
//! call in the traced set as dejavu trace records, following every process and thread.
//!
//! Launched programs get a seccomp-bpf filter so only traced calls stop them (two stops
//! per traced call, none for the rest); attached processes cannot get a filter and stop
//! at every call, as with strace -p.

pub mod arch;
mod decode;
mod error;
pub mod feed;
pub mod kernel;
mod pin;
pub mod seccomp;
pub mod signals;
pub mod snapshot;
pub mod spawn;
pub mod stacks;
pub mod state;
mod tracer;

pub use decode::proc_cmdline;
pub use error::{denied_advice, RecordError};
pub use stacks::StackMode;
pub use tracer::{
    exit_text, is_zombie, process_names, record, start, unattachable, Outcome, RecordOptions,
    Target,
};
