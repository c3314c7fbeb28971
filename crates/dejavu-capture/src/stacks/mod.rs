//! Call stacks for recorded calls: from a language agent inside the program (Node.js,
//! Python) when it says which of its functions is making the call, otherwise from
//! unwinding the program's native stack at the syscall stop.

pub mod agent;
pub mod native;

pub use agent::CallRef;

use crate::arch::SyscallRegs;
use crate::os::Tid;
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
        sys: Some(c.sys),
        nofollow: follows_no_final_link(c),
    }
}

/// Whether `c` is a call of the *at family that does not follow a final symbolic link
/// (AT_SYMLINK_NOFOLLOW: Python's os.lstat and Node.js's lstatSync are the same system
/// call as their stat, with this flag).
fn follows_no_final_link(c: &dejavu_trace::Syscall) -> bool {
    use dejavu_trace::Sys;
    matches!(
        c.sys,
        Sys::Newfstatat | Sys::Statx | Sys::Faccessat2 | Sys::Utimensat | Sys::Fchownat
    ) && c.flags & libc::AT_SYMLINK_NOFOLLOW as u64 != 0
}

/// Whether to record stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackMode {
    /// No stacks: the cheapest recording.
    Off,
    /// Native unwinding, plus the Node.js and Python agents in programs dejavu starts;
    /// no native stacks in the system tools the program runs (a compiler under make,
    /// git, `sh -c`: the report's `tool` owner, whose findings do not need their lines).
    On,
    /// As `On`, with native stacks in the tools too.
    All,
}

impl StackMode {
    /// Whether stacks are recorded at all.
    pub fn on(self) -> bool {
        self != StackMode::Off
    }
}

/// What a process's program is, for its native stacks (see `Stacks::tool_exec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecRole {
    /// A program of the recording's own (not a launcher, not a tool): a system program
    /// its children exec is a tool.
    Program,
    /// A launcher, or a process not known to have exec'd.
    Other,
    /// A system tool the program ran: without native stacks.
    Tool,
}

impl ExecRole {
    /// The role of the program dejavu starts, known before it runs: `path` with `argv`
    /// (the eBPF backend tells its kernel half at once, before the program's first
    /// children run their tools).
    pub fn of_launched(mode: StackMode, path: &[u8], argv: &[OsString]) -> ExecRole {
        if mode != StackMode::On {
            return ExecRole::Other;
        }
        use std::os::unix::ffi::OsStrExt;
        let joined: Vec<u8> = argv
            .iter()
            .map(|a| a.as_bytes())
            .collect::<Vec<_>>()
            .join(&0u8);
        ExecRole::of(&dejavu_detect::program::ImageRole::exec(
            &dejavu_detect::program::ImageRole::unknown(),
            path,
            &joined,
        ))
    }

    /// The role of an image, as the report's rule decides it at its exec.
    pub fn of(image: &dejavu_detect::program::ImageRole) -> ExecRole {
        if image.is_tool() {
            ExecRole::Tool
        } else if image.is_program() {
            ExecRole::Program
        } else {
            ExecRole::Other
        }
    }
}

/// The native stack the eBPF backend reported with a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NativeStack {
    /// None (stacks off, an agent's process, nothing readable).
    #[default]
    None,
    /// Unwound by `Stacks::unwind_slice` for this thread's call, just before.
    Pending,
    /// The kernel found the same stack as one unwound before: this one.
    Known(StackId),
}

/// Where a new process was started (see `Stacks::spawned`).
#[derive(Debug, Clone, Copy)]
struct Spawned {
    /// The parent's native stack in the clone.
    site: StackId,
    /// The child shares its parent's memory and goes on on its stack (vfork, Go's
    /// os/exec): its exec's own stack reaches the program's lines, the parent's may not
    /// (Go's clone wrapper keeps its return address in a register).
    own_stack_better: bool,
}

/// How long an interpreter whose environment loads an agent goes without native stacks
/// waiting for the agent's hello: an agent that failed to load says none, and the
/// interpreter's calls then take stacks again. (A Python start-up says hello within tens
/// of milliseconds.)
const AGENT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Stack capture for one recording.
#[derive(Debug)]
pub struct Stacks {
    mode: StackMode,
    native: native::Native,
    agent: agent::Agents,
    /// Per thread, the stack unwound from the copy its next call will refer to (and the
    /// thread's process).
    pending: rustc_hash::FxHashMap<Tid, (Tid, Option<StackId>)>,
    /// The last call decoded took an agent's site.
    named: bool,
    /// New processes, until their first exec: the parent's native stack at the fork or
    /// clone, which names where the exec was asked for. A child of posix_spawn or vfork
    /// has only a few frames of libc's on a stack of its own; a forked child's stack at
    /// its exec is its parent's at the fork, plus the lines between (taken alike by both
    /// backends: ptrace sees the exec's own stack only at a cost on every call).
    spawned: rustc_hash::FxHashMap<Tid, Spawned>,
    /// Per thread, the native stack of the exec it is making, taken at the call's entry
    /// (its exit is in the new program).
    exec_entry: rustc_hash::FxHashMap<Tid, StackId>,
    /// Processes recorded without native stacks: system tools the program ran
    /// (`StackMode::On`; see `tool_exec`), and their forks.
    quiet: rustc_hash::FxHashSet<Tid>,
    /// What each exec'd program is, for the eBPF backend's kernel half, since it last
    /// asked (`StackMode::On` only; kept only when `keep_roles` said so).
    roles: Vec<(Tid, ExecRole)>,
    /// Whether a backend reads `roles` (the eBPF one).
    keep_roles: bool,
    /// Interpreters whose language agent has not said hello yet, and since when
    /// (`StackMode::On`): their calls until then are the runtime's start-up and go without
    /// native stacks (see `exec_start_up`; under eBPF the kernel half decides, and these
    /// are kept only to end a wait longer than AGENT_WAIT).
    awaiting: rustc_hash::FxHashMap<Tid, std::time::Instant>,
    /// Processes the eBPF kernel half waits for that no agent will come to, since it last
    /// asked (`take_no_agent`).
    no_agent: Vec<Tid>,
}

impl Stacks {
    /// Capture as `mode` says.
    pub fn new(mode: StackMode) -> Stacks {
        let on = mode.on();
        let mut native = native::Native::new(on);
        if on {
            native.keep_names_in(crate::cache::dir().map(|d| d.join("names")));
        }
        Stacks {
            mode,
            native,
            agent: agent::Agents::new(on),
            pending: rustc_hash::FxHashMap::default(),
            named: false,
            spawned: rustc_hash::FxHashMap::default(),
            exec_entry: rustc_hash::FxHashMap::default(),
            quiet: rustc_hash::FxHashSet::default(),
            roles: Vec::new(),
            keep_roles: false,
            awaiting: rustc_hash::FxHashMap::default(),
            no_agent: Vec::new(),
        }
    }

    /// Whether stacks are recorded at all.
    pub fn enabled(&self) -> bool {
        self.mode.on()
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
        if let Some(id) = self.spawn_site(pid, call) {
            return Some(id);
        }
        if self.quiet.contains(&pid) || self.starting(pid) {
            return None;
        }
        self.native.capture(w, pid, tid, regs)
    }

    /// Whether `pid` is an interpreter still in its start-up (ptrace): its agent has not
    /// said hello, for at most AGENT_WAIT.
    fn starting(&mut self, pid: Tid) -> bool {
        if self.awaiting.is_empty() || self.keep_roles {
            return false;
        }
        let Some(since) = self.awaiting.get(&pid) else {
            return false;
        };
        if since.elapsed() > AGENT_WAIT || self.agent.ready(pid) {
            self.awaiting.remove(&pid);
            return false;
        }
        true
    }

    /// Process `pid` exec'd `exe` (as named) with `argv` (NUL-separated): with
    /// `StackMode::On`, an interpreter the language agents load into (its file's real name
    /// begins with `python3`, or is `node` or `nodejs`, as the eBPF kernel half decides at
    /// the exec) goes without native stacks until its agent says hello, when its
    /// environment loads one: its calls until then are the runtime's start-up (the
    /// report's rule), about a thousand of them, each at a new place (1,033 stack copies
    /// in a Python start-up under eBPF). One whose agent will not load (its environment
    /// does not name the agents', it does not hold their channel, `python3 -I`, `-E`,
    /// `-S`) keeps its stacks (under eBPF, from when the reader reads the exec:
    /// `kernel_awaits`).
    pub fn exec_start_up(&mut self, pid: Tid, exe: &[u8], argv: &[u8]) {
        self.awaiting.remove(&pid);
        if self.mode != StackMode::On {
            return;
        }
        if self.agent.will_load(pid, exe, argv) {
            self.awaiting.insert(pid, std::time::Instant::now());
        }
    }

    /// The eBPF kernel half took `pid`'s new program (after `exec_start_up`) for an
    /// interpreter and waits for its agent's hello: it need not when no agent will come.
    pub fn kernel_awaits(&mut self, pid: Tid) {
        if !self.awaiting.contains_key(&pid) {
            self.no_agent.push(pid);
        }
    }

    /// The processes that no agent will come to, since the last call: exec'd with none to
    /// load, or waiting for their agent's hello longer than AGENT_WAIT (an agent that
    /// failed to load says none). The eBPF backend's kernel half stops waiting for them.
    pub fn take_no_agent(&mut self) -> Vec<Tid> {
        if !self.awaiting.is_empty() {
            let (agent, no_agent) = (&self.agent, &mut self.no_agent);
            self.awaiting.retain(|&pid, since| {
                if agent.ready(pid) {
                    return false; // the kernel half saw the hello
                }
                if since.elapsed() > AGENT_WAIT {
                    no_agent.push(pid);
                    return false;
                }
                true
            });
        }
        std::mem::take(&mut self.no_agent)
    }

    /// Process `pid` exec'd a program whose role is `role`: with `StackMode::On` a system
    /// tool another program of the recording ran is recorded without native stacks from
    /// now on (its findings are the tool's, folded in the report; how often the program ran
    /// it keeps the program's line), with `All` it keeps them.
    pub fn tool_exec(&mut self, pid: Tid, role: ExecRole) {
        if self.mode != StackMode::On {
            return;
        }
        if role == ExecRole::Tool {
            self.quiet.insert(pid);
        } else {
            self.quiet.remove(&pid);
        }
        // Each time: the kernel half may have decided otherwise at the exec (it takes any
        // system program a program's child runs for a tool).
        if self.keep_roles {
            self.roles.push((pid, role));
        }
    }

    /// The backend reads each exec'd program's role (`take_roles`): the eBPF one,
    /// for its kernel half. Without it they are not kept.
    pub fn keep_roles(&mut self) {
        self.keep_roles = true;
    }

    /// The roles of the programs exec'd since the last call (the eBPF backend tells its
    /// kernel half).
    pub fn take_roles(&mut self) -> Vec<(Tid, ExecRole)> {
        std::mem::take(&mut self.roles)
    }

    /// The native stack of `tid` (of `pid`) now, at a stop outside a recorded call's
    /// decoding (an exec's entry, a parent in its clone): no agent's site.
    pub fn native_here<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        regs: &SyscallRegs,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off || self.quiet.contains(&pid) || self.starting(pid) {
            return None;
        }
        self.native.capture(w, pid, tid, regs)
    }

    /// A native stack the eBPF backend reported outside a call (a fork's, an exec's), as
    /// `capture_native` takes it for a call.
    pub fn reported(&mut self, tid: Tid, native: NativeStack) -> Option<StackId> {
        match native {
            NativeStack::None => None,
            NativeStack::Pending => self.pending.remove(&tid).and_then(|p| p.1),
            NativeStack::Known(id) => Some(id),
        }
    }

    /// Process `child` was started (fork, vfork, posix_spawn: not a thread), and `stack`
    /// is the parent's native stack in the clone: the site of the child's exec calls until
    /// its first exec (see `spawned`). `vfork_like`: the child shares its parent's memory
    /// and goes on on its parent's stack (no stack of its own), so that the native stack
    /// of its exec, where one is taken, names the program's line better.
    pub fn spawned(&mut self, child: Tid, stack: Option<StackId>, vfork_like: bool) {
        if let (true, Some(site)) = (self.mode.on(), stack) {
            self.spawned.insert(
                child,
                Spawned {
                    site,
                    own_stack_better: vfork_like,
                },
            );
        }
    }

    /// `tid` is making an exec whose native stack, at the call's entry, is `stack`.
    pub fn exec_entry(&mut self, tid: Tid, stack: Option<StackId>) {
        match stack {
            Some(id) if self.mode.on() => {
                self.exec_entry.insert(tid, id);
            }
            _ => {
                self.exec_entry.remove(&tid);
            }
        }
    }

    /// An exec call of a process not yet past its first exec: where its parent started
    /// it.
    fn spawn_site(&self, pid: Tid, call: CallRef) -> Option<StackId> {
        if !call.exec {
            return None;
        }
        self.spawned
            .get(&pid)
            .filter(|s| !s.own_stack_better)
            .map(|s| s.site)
    }

    /// A copy of the top of `tid`'s stack (of process `pid`), sent by the eBPF backend
    /// just before the call it belongs to: unwound now, kept for that call. `deps`
    /// receives what the unwind depended on (see `native::Native::capture_slice`;
    /// `remember` false for a copy shorter than usual, whose unwind may stop short).
    #[allow(clippy::too_many_arguments)]
    pub fn unwind_slice<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        regs: &SyscallRegs,
        bytes: &[u8],
        deps: &mut native::Deps,
        remember: bool,
    ) -> Option<StackId> {
        deps.words.clear();
        if self.mode == StackMode::Off {
            return None;
        }
        let id = self
            .native
            .capture_slice(w, pid, regs, bytes, deps, remember);
        self.pending.insert(tid, (pid, id));
        id
    }

    /// The stack of a call recorded by the eBPF backend: the agents' report when they
    /// made one, else the native stack the kernel half reported (`native`).
    pub fn capture_native<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
        native: NativeStack,
        call: CallRef,
    ) -> Option<StackId> {
        if self.mode == StackMode::Off {
            return None;
        }
        let unwound = self.reported(tid, native);
        if let Some(id) = self.agent.current(w, pid, tid, call) {
            self.named = true;
            return Some(id);
        }
        self.spawn_site(pid, call).or(unwound)
    }

    /// Whether the last call given to `capture_native` took an agent's site.
    pub fn named_by_agent(&self) -> bool {
        self.named
    }

    /// A new call is being decoded (see `named_by_agent`).
    pub fn next_call(&mut self) {
        self.named = false;
    }

    /// The stack of a successful exec by `tid` of `pid`, recorded after the exec (the
    /// registers and memory are the new program's): the agents' site (the wrapped call
    /// that started the process, a spawn, or that exec'd), else, for a process's first
    /// exec, where its parent started it, else the native stack taken at the call's entry
    /// (eBPF; both backends for a vfork-like child, whose own stack goes first).
    pub fn exec_stack<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: Tid,
        tid: Tid,
    ) -> Option<StackId> {
        let spawned = self.spawned.remove(&pid);
        let entry = self.exec_entry.remove(&tid);
        if self.mode == StackMode::Off {
            return None;
        }
        let call = CallRef {
            exec: true,
            ..CallRef::default()
        };
        let site = match spawned {
            Some(s) if s.own_stack_better => entry.or(Some(s.site)),
            Some(s) => Some(s.site),
            None => entry,
        };
        self.agent.current(w, pid, tid, call).or(site)
    }

    /// Thread `ptid` of `ppid` started process `child`.
    pub fn on_fork<W: Write>(&mut self, w: &mut TraceWriter<W>, ppid: Tid, ptid: Tid, child: Tid) {
        if self.mode.on() {
            self.agent.on_fork(w, ppid, ptid, child);
        }
    }

    /// Thread `tid` of process `pid` exec'd: its mappings and agent state are gone.
    pub fn on_exec<W: Write>(&mut self, w: &mut TraceWriter<W>, pid: Tid, tid: Tid) {
        self.native.on_exec(pid);
        self.agent.on_exec(w, pid, tid);
        // A non-leader thread's exec goes on as the leader: its entry's stack with it.
        if tid != pid {
            if let Some(id) = self.exec_entry.remove(&tid) {
                self.exec_entry.insert(pid, id);
            }
        }
    }

    /// Process `pid` now runs `exe` (after `on_exec`).
    pub fn exec_image(&mut self, pid: Tid, exe: &[u8]) {
        self.agent.exec_image(pid, exe);
    }

    /// Process `pid` mapped a file (its code may have grown).
    pub fn mappings_changed(&mut self, pid: Tid) {
        self.native.mappings_changed(pid);
    }

    /// The code mappings known for `pid` from its exec (and mmap calls since), when stacks
    /// are on: (start, end, file offset, path); None before its exec layout.
    pub fn exec_code(&self, pid: Tid) -> Option<Vec<native::CodeRange>> {
        if !self.mode.on() {
            return None;
        }
        self.native.layout(pid)
    }

    /// Process `pid` now runs `exe`, whose program headers the kernel put at `at_phdr`
    /// and whose interpreter at `at_base` (see `native::Native::exec_layout`).
    pub fn exec_layout(&mut self, pid: Tid, exe: &[u8], at_phdr: u64, at_base: u64) {
        if self.mode.on() {
            self.native.exec_layout(pid, exe, at_phdr, at_base);
        }
    }

    /// Process `pid` mapped `len` bytes of the file at `path` from `offset` at `start`,
    /// executable.
    pub fn mapped_code(&mut self, pid: Tid, start: u64, len: u64, offset: u64, path: &[u8]) {
        if self.mode.on() {
            self.native.mapped_code(pid, start, len, offset, path);
        }
    }

    /// Process `child` was forked from `parent` (a copy of its memory).
    pub fn forked(&mut self, parent: Tid, child: Tid) {
        if self.mode.on() {
            self.native.forked(parent, child);
            // The kernel half's child inherits its parent's setting alike.
            if self.quiet.contains(&parent) && self.quiet.insert(child) && self.keep_roles {
                // (Said again, in case the kernel half forked it before it knew.)
                self.roles.push((child, ExecRole::Tool));
            }
        }
    }

    /// Process `pid` ended.
    pub fn on_exit(&mut self, pid: Tid) {
        self.native.on_exit(pid);
        // A copy whose call never came (the call's record was lost).
        self.pending.retain(|_, p| p.0 != pid);
        self.spawned.remove(&pid);
        // (A vfork-like child whose exec failed, which then exited.)
        self.exec_entry.remove(&pid);
        self.quiet.remove(&pid);
        self.awaiting.remove(&pid);
        self.agent.on_exit(pid);
    }

    /// Process `pid` opened `fd` in a call whose stack is `stack` (an agent's site gives
    /// the descriptor's later calls that site).
    pub fn fd_opened(&mut self, pid: Tid, fd: i32, stack: StackId) {
        if self.mode.on() {
            self.agent.fd_opened(pid, fd, stack);
        }
    }

    /// Process `pid` closed or replaced its descriptors `lo..=hi`.
    pub fn fds_released(&mut self, pid: Tid, lo: u32, hi: u32) {
        if self.mode.on() {
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
