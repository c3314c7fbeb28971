//! dejavu's capture core, shared by both capture backends as peers: the call decoder, the
//! process and descriptor state, stacks (native unwinding and the language agents), the
//! copies of call memory another backend makes, starting the program, signals and the
//! errors a recording can end with. dejavu-ptrace drives it from its waitpid loop and
//! reads call memory live; dejavu-ebpf feeds it the kernel's reports through [`feed`].
//! Neither backend decodes a call itself: the analysis cannot tell which one ran.

pub mod arch;
pub mod cache;
pub mod codemaps;
pub mod decode;
mod error;
pub mod feed;
pub mod os;
pub mod realpath;
pub mod recording;
pub mod signals;
pub mod snapshot;
pub mod spawn;
pub mod stacks;
pub mod state;

pub use crate::recording::{
    exit_text, is_zombie, process_names, start, unattachable, CallMemory, Capture, Outcome,
    RecordOptions, Target, Task,
};
pub use decode::proc_cmdline;
pub use error::{denied_advice, RecordError};
pub use stacks::StackMode;
