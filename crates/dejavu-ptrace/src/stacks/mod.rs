//! Call stacks for recorded calls: from a language agent inside the program (Node.js,
//! Python) when it says which of its functions is making the call, otherwise from
//! unwinding the program's native stack at the syscall stop.

pub mod agent;
pub mod native;

pub use agent::CallRef;

use crate::arch::SyscallRegs;
use crate::kernel::Tid;
use dejavu_trace::{StackId, TraceWriter};
use std::ffi::OsString;
use std::io::Write;

/// What the agents match a recorded call by: its path, its descriptor, whether it execs.
pub fn call_ref(c: &dejavu_trace::Syscall) -> CallRef {
    CallRef {
        path: c.path,
        fd: c.fd,
        exec: matches!(
            c.sys,
            dejavu_trace::Sys::Execve | dejavu_trace::Sys::Execveat
        ),
    }
}

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
    /// `call` says what the agents match asynchronous calls by: the call's recorded path
    /// (`Syscall::path`: its resolved path argument or its descriptor's path), its
    /// descriptor, whether it is an exec.
    pub fn capture<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        regs: &SyscallRegs,
        call: CallRef,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off {
            return None;
        }
        if let Some(id) = self.agent.current(w, pid, tid, call) {
            return Some(id);
        }
        self.native.capture(w, pid, tid, regs)
    }

    /// The stack of a call recorded by the eBPF backend: the agents' report when they
    /// made one, else the user stack the kernel walked by frame pointers (`ips`).
    #[allow(clippy::too_many_arguments)]
    pub fn capture_ips<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        ips: &[u64],
        leaf: u64,
        call: CallRef,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off {
            return None;
        }
        if let Some(id) = self.agent.current(w, pid, tid, call) {
            return Some(id);
        }
        self.native.capture_addrs(w, pid, ips, leaf)
    }

    /// The stack of a successful exec by `tid` of `pid`, recorded after the exec (the
    /// registers and memory are the new program's): the agents' only, the wrapped call
    /// that started the process (a spawn) or that exec'd.
    pub fn exec_stack<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off {
            return None;
        }
        let call = CallRef {
            exec: true,
            ..CallRef::default()
        };
        self.agent.current(w, pid, tid, call)
    }

    /// Thread `ptid` of `ppid` started process `child`.
    pub fn on_fork<W: Write>(&mut self, w: &mut TraceWriter<W>, ppid: Tid, ptid: Tid, child: Tid) {
        if self.mode == StackMode::On {
            self.agent.on_fork(w, ppid, ptid, child);
        }
    }

    /// Thread `tid` of process `pid` exec'd: its mappings and agent state are gone.
    pub fn on_exec<W: Write>(&mut self, w: &mut TraceWriter<W>, pid: Tid, tid: Tid) {
        self.native.on_exec(pid);
        self.agent.on_exec(w, pid, tid);
    }

    /// Process `pid` now runs `exe` (after `on_exec`).
    pub fn exec_image(&mut self, pid: Tid, exe: &[u8]) {
        self.agent.exec_image(pid, exe);
    }

    /// Process `pid` mapped a file (its code may have grown).
    pub fn mappings_changed(&mut self, pid: Tid) {
        self.native.mappings_changed(pid);
    }

    /// Process `pid` ended.
    pub fn on_exit(&mut self, pid: Tid) {
        self.native.on_exit(pid);
        self.agent.on_exit(pid);
    }

    /// Process `pid` closed or replaced its descriptors `lo..=hi`.
    pub fn fds_released(&mut self, pid: Tid, lo: u32, hi: u32) {
        if self.mode == StackMode::On {
            self.agent.fds_released(pid, lo, hi);
        }
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
