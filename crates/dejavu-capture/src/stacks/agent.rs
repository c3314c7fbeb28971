//! Language agents: code dejavu loads into the Node.js and Python programs it starts
//! (through NODE_OPTIONS and a sitecustomize on PYTHONPATH) that reports, over an
//! inherited pipe, which line of JavaScript or Python makes each file call. The tracer
//! turns those reports into the stacks of the calls it records. How it works, and what
//! the agents cannot see: docs/agents.md.

mod channel;
mod protocol;

pub use protocol::{AgentMark, CallRef, Counters};

use crate::os::Tid;
use dejavu_trace::{StackId, TraceWriter};
use std::ffi::OsString;
use std::io::Write;

/// The agents of one recording.
#[derive(Debug)]
pub struct Agents {
    enabled: bool,
    channel: Option<channel::Channel>,
}

impl Agents {
    /// Agents; `enabled` false loads none.
    pub fn new(enabled: bool) -> Agents {
        Agents {
            enabled,
            channel: None,
        }
    }

    /// Environment additions that load the agents in the program dejavu starts, and the
    /// channel's write end for `spawn::fork_child` to hand to the program. Agents are a
    /// nicety: if anything here fails, the program runs without them (and its calls get
    /// native stacks only).
    pub fn program_env(&mut self) -> (Vec<(OsString, OsString)>, Option<crate::spawn::Inherit>) {
        if !self.enabled {
            return (Vec::new(), None);
        }
        let Ok(setup) = channel::Channel::open() else {
            return (Vec::new(), None);
        };
        let env = setup.channel.env();
        let inherit = crate::spawn::Inherit {
            fd: setup.write,
            at: setup.channel.at(),
            untraced: untraced_calls(),
        };
        self.channel = Some(setup.channel);
        (env, Some(inherit))
    }

    /// The descriptor number the program sees the channel at, when the agents are set up.
    pub fn channel_fd(&self) -> Option<i32> {
        self.channel.as_ref().map(|c| c.at())
    }

    /// The reports come from the eBPF backend (`feed`), not from reading the pipe.
    pub fn set_external(&self) {
        if let Some(c) = &self.channel {
            c.set_external();
        }
    }

    /// Reports the agents wrote, as the eBPF backend saw them written (at `at_ns`,
    /// CLOCK_MONOTONIC).
    pub fn feed(&self, bytes: &[u8], at_ns: u64) {
        if let Some(c) = &self.channel {
            c.feed(bytes, at_ns);
        }
    }

    /// The marks the agents reported (an agent ready, a main module done) and the tracer
    /// has not written yet. `drain`: read the pipe first (before an exec or exit record).
    pub fn take_marks(&self, drain: bool) -> Vec<AgentMark> {
        match &self.channel {
            Some(c) => c.take_marks(drain),
            None => Vec::new(),
        }
    }

    /// The directory the agents' files are in (their own calls on it are not the
    /// program's and are not recorded).
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.channel.as_ref().map(|c| c.dir())
    }

    /// The stack the agents reported for the call `tid` of `pid` is making, if any: the
    /// wrapped synchronous call that thread is inside, else the wrapped call that started
    /// the process (a spawn), else the site of the call's descriptor, else a pending
    /// asynchronous call of the process that names the call's path (its resolved path, or
    /// its descriptor's).
    pub fn current<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        call: CallRef,
    ) -> Option<StackId> {
        let ch = self.channel.as_ref()?;
        ch.state().lookup(w, pid as u32, tid as u32, call)
    }

    /// Thread `ptid` of `ppid` started process `child`: inside a wrapped call (a spawn),
    /// the child's calls until its exec, and its execs, are that call's.
    pub fn on_fork<W: Write>(&mut self, w: &mut TraceWriter<W>, ppid: Tid, ptid: Tid, child: Tid) {
        if let Some(ch) = &self.channel {
            ch.state()
                .on_fork(w, ppid as u32, ptid as u32, child as u32);
        }
    }

    /// Thread `tid` of `pid` exec'd: what its old program's agents said no longer applies.
    /// (Everything they wrote before the exec is read first, so none of it is applied
    /// afterwards.)
    pub fn on_exec<W: Write>(&mut self, w: &mut TraceWriter<W>, pid: Tid, tid: Tid) {
        if let Some(ch) = &self.channel {
            ch.state().on_exec(w, pid as u32, tid as u32);
        }
    }

    /// `pid` now runs `exe` (after `on_exec`).
    pub fn exec_image(&mut self, pid: Tid, exe: &[u8]) {
        if let Some(ch) = &self.channel {
            ch.state_undrained().exec_image(pid as u32, exe);
        }
    }

    /// Whether `pid`'s agent said hello (the pipe read first).
    pub fn ready(&self, pid: Tid) -> bool {
        self.channel
            .as_ref()
            .is_some_and(|c| c.state().is_ready(pid as u32))
    }

    /// Whether process `pid`, which just exec'd `exe` (as named) with `argv`
    /// (NUL-separated), is an interpreter this recording's agent will load into: named
    /// `python*` or `node*` (the other programs, a build's thousands of compilers and
    /// shells, cost no look at /proc), its file's real name begins with `python3` or is
    /// `node` or `nodejs` (as the eBPF kernel half's test at the exec), its environment loads the agent (`Channel::loads_agent`), and a Python
    /// one's options do not skip it (`-I`, `-E`: PYTHONPATH ignored; `-S`: no site, so no
    /// sitecustomize), and it holds the channel (`Channel::held_by`). False when the
    /// process is gone.
    pub fn will_load(&self, pid: Tid, exe: &[u8], argv: &[u8]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let Some(ch) = &self.channel else {
            return false;
        };
        let given = exe.rsplit(|&c| c == b'/').next().unwrap_or(exe);
        if !given.starts_with(b"python") && !given.starts_with(b"node") {
            return false;
        }
        let Ok(real) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return false;
        };
        let name = real.file_name().map(|n| n.as_bytes()).unwrap_or_default();
        let python = name.starts_with(b"python3");
        if !python && name != b"node" && name != b"nodejs" {
            return false;
        }
        if python && python_skips_agent(argv) {
            return false;
        }
        ch.held_by(pid)
            && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| ch.loads_agent(&env, python))
    }

    /// `pid` ended.
    pub fn on_exit(&mut self, pid: Tid) {
        if let Some(ch) = &self.channel {
            ch.state().on_exit(pid as u32);
        }
    }

    /// `pid` closed or replaced its descriptors `lo..=hi` (after the call's stack was
    /// taken: the pipe was read then, so no report written before the call is missed).
    pub fn fds_released(&mut self, pid: Tid, lo: u32, hi: u32) {
        if let Some(ch) = &self.channel {
            ch.state_undrained().fds_released(pid as u32, lo, hi);
        }
    }

    /// `pid` opened descriptor `fd` in a call whose stack is `stack` (see
    /// `State::fd_opened`).
    pub fn fd_opened(&mut self, pid: Tid, fd: i32, stack: StackId) {
        if let Some(ch) = &self.channel {
            ch.state_undrained().fd_opened(pid as u32, fd as u32, stack);
        }
    }

    /// What the agents reported so far (zeros when none was loaded).
    pub fn counters(&self) -> Counters {
        self.channel
            .as_ref()
            .map(|c| c.state().counters)
            .unwrap_or_default()
    }
}

/// Calls the seccomp filter lets through untraced on the agents' descriptor: their writes
/// (one per report), and the fstat each agent checks the descriptor with (glibc's fstat
/// is newfstatat, libuv's is statx).
fn untraced_calls() -> Vec<u32> {
    [
        libc::SYS_write,
        libc::SYS_writev,
        libc::SYS_fstat,
        libc::SYS_newfstatat,
        libc::SYS_statx,
    ]
    .iter()
    .map(|&n| n as u32)
    .collect()
}

/// Whether a Python command line (`argv`, NUL-separated) has an interpreter option that
/// keeps the agent out: `-I` or `-E` (PYTHONPATH ignored), `-S` (no `site`, so no
/// sitecustomize), alone or in a cluster (`-IS`), before the script, `-c` or `-m`.
fn python_skips_agent(argv: &[u8]) -> bool {
    let mut args = argv.split(|&b| b == 0).skip(1);
    while let Some(a) = args.next() {
        if a == b"-" || a == b"--" || !a.starts_with(b"-") {
            return false;
        }
        if a.starts_with(b"--") {
            continue; // --check-hash-based-pycs MODE and the like: none keeps it out
        }
        let opts = &a[1..];
        for (i, &c) in opts.iter().enumerate() {
            match c {
                b'I' | b'E' | b'S' => return true,
                b'c' | b'm' => return false,
                b'W' | b'X' => {
                    if i + 1 == opts.len() {
                        args.next(); // the option's argument
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::python_skips_agent;

    #[test]
    fn python_options_that_keep_the_agent_out() {
        let skips = |a: &str| python_skips_agent(a.replace(' ', "\0").as_bytes());
        assert!(skips("python3 -I x.py"));
        assert!(skips("python3 -u -S x.py"));
        assert!(skips("python3 -uE -c pass"));
        assert!(skips("python3 -W ignore -I x.py"));
        assert!(!skips("python3 x.py -I"));
        assert!(!skips("python3 -c import"));
        assert!(!skips("python3 -cI"));
        assert!(!skips("python3 -m pytest -S"));
        assert!(!skips("python3 -X importtime x.py"));
        assert!(!skips("python3 -WI x.py"));
        assert!(!skips("python3 --check-hash-based-pycs never x.py"));
        assert!(!skips("python3"));
    }
}
