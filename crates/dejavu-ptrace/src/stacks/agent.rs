//! Language agents: code dejavu loads into Node.js and Python programs (through
//! NODE_OPTIONS and a sitecustomize path) that tells it which function of the program is
//! making each call. (Not built yet.)

use crate::kernel::Tid;
use dejavu_trace::{StackId, TraceWriter};
use std::ffi::OsString;
use std::io::Write;

/// The agents of one recording.
#[derive(Debug)]
pub struct Agents {
    enabled: bool,
}

impl Agents {
    /// Agents; `enabled` false loads none.
    pub fn new(enabled: bool) -> Agents {
        Agents { enabled }
    }

    /// Environment additions that load the agents in the program dejavu starts.
    pub fn program_env(&mut self) -> Vec<(OsString, OsString)> {
        let _ = self.enabled;
        Vec::new()
    }

    /// The stack the agent of `pid` reported for the call `tid` is making, if any.
    pub fn current<W: Write>(
        &mut self,
        _w: &mut TraceWriter<W>,
        _pid: Tid,
        _tid: Tid,
    ) -> Option<StackId> {
        None
    }

    /// `pid` exec'd.
    pub fn on_exec(&mut self, _pid: Tid) {}

    /// `pid` ended.
    pub fn on_exit(&mut self, _pid: Tid) {}
}
