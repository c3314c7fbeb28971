//! dejavu's ptrace capture backend: runs a program (or attaches to one) and records every
//! call in the traced set as dejavu trace records, following every process and thread.
//!
//! Launched programs get a seccomp-bpf filter so only traced calls stop them (two stops
//! per traced call, none for the rest); attached processes cannot get a filter and stop
//! at every call, as with strace -p. What this crate holds is what only ptrace needs: the
//! waitpid loop, ptrace requests, the seccomp filter and CPU placement. Decoding calls,
//! the process and descriptor state and stacks are dejavu-capture's, shared with the
//! eBPF backend.

pub mod kernel;
mod pin;
pub mod regs;
pub mod seccomp;
mod tracer;

pub use tracer::record;
