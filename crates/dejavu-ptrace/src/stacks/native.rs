//! Native stacks: unwinding the stopped thread's user stack (DWARF CFI, frame pointers as
//! fallback) and symbolizing to function, file and line. (Not built yet.)

use crate::arch::SyscallRegs;
use crate::kernel::Tid;
use dejavu_trace::{StackId, TraceWriter};
use std::io::Write;

/// The native unwinder and its caches.
#[derive(Debug)]
pub struct Native {
    enabled: bool,
}

impl Native {
    /// An unwinder; `enabled` false captures nothing.
    pub fn new(enabled: bool) -> Native {
        Native { enabled }
    }

    /// The native stack of `tid` at its syscall stop.
    pub fn capture<W: Write>(
        &mut self,
        _w: &mut TraceWriter<W>,
        _pid: Tid,
        _tid: Tid,
        _regs: &SyscallRegs,
    ) -> Option<StackId> {
        let _ = self.enabled;
        None
    }

    /// `pid` exec'd: forget its mappings.
    pub fn on_exec(&mut self, _pid: Tid) {}

    /// `pid` ended.
    pub fn on_exit(&mut self, _pid: Tid) {}
}
