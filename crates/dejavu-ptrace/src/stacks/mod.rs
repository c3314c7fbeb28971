//! Call stacks for recorded calls: from a language agent inside the program (Node.js,
//! Python) when it says which of its functions is making the call, otherwise from
//! unwinding the program's native stack at the syscall stop.

pub mod agent;
pub mod native;

use crate::arch::SyscallRegs;
use crate::kernel::Tid;
use dejavu_trace::{StackId, StrId, TraceWriter};
use std::ffi::OsString;
use std::io::Write;

/// Whether to record stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackMode {
    /// No stacks: the cheapest recording.
    Off,
    /// Native unwinding, plus the Node.js and Python agents in programs dejavu starts.
    On,
}

/// Stack capture for one recording.
#[derive(Debug)]
pub struct Stacks {
    mode: StackMode,
    native: native::Native,
    agent: agent::Agents,
}

impl Stacks {
    /// Capture as `mode` says.
    pub fn new(mode: StackMode) -> Stacks {
        let on = mode == StackMode::On;
        Stacks {
            mode,
            native: native::Native::new(on),
            agent: agent::Agents::new(on),
        }
    }

    /// Whether stacks are recorded at all.
    pub fn enabled(&self) -> bool {
        self.mode == StackMode::On
    }

    /// The language agents, for setting up the program dejavu starts.
    pub fn agents(&mut self) -> &mut agent::Agents {
        &mut self.agent
    }

    /// The stack of the call `tid` (of process `pid`) is making, at its syscall stop.
    /// `path` is the call's recorded path (`Syscall::path`: its resolved path argument or
    /// its descriptor's path): the agents match asynchronous calls by it.
    pub fn capture<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        regs: &SyscallRegs,
        path: Option<StrId>,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off {
            return None;
        }
        if let Some(id) = self.agent.current(w, pid, tid, path) {
            return Some(id);
        }
        self.native.capture(w, pid, tid, regs)
    }

    /// The stack of a call recorded by the eBPF backend: the agents' report when they
    /// made one, else the user stack the kernel walked by frame pointers (`ips`).
    pub fn capture_ips<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        ips: &[u64],
        leaf: u64,
        path: Option<StrId>,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off {
            return None;
        }
        if let Some(id) = self.agent.current(w, pid, tid, path) {
            return Some(id);
        }
        self.native.capture_addrs(w, pid, ips, leaf)
    }

    /// Process `pid` now runs a new program: its mappings and agent state are gone.
    pub fn on_exec(&mut self, pid: Tid) {
        self.native.on_exec(pid);
        self.agent.on_exec(pid);
    }

    /// Process `pid` ended.
    pub fn on_exit(&mut self, pid: Tid) {
        self.native.on_exit(pid);
        self.agent.on_exit(pid);
    }

    /// Environment additions for the program dejavu starts (the agents' loaders), and the
    /// descriptor it must inherit (the agents' channel).
    pub fn program_env(&mut self) -> (Vec<(OsString, OsString)>, Option<crate::spawn::Inherit>) {
        if self.mode == StackMode::Off {
            return (Vec::new(), None);
        }
        self.agent.program_env()
    }
}
