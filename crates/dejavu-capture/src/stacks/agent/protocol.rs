//! The agents' wire protocol (docs/agents.md, "Protocol") and what the tracer keeps from
//! it: call-site definitions, the wrapped calls each thread is inside, asynchronous calls
//! still pending (matched to a syscall by its path or its descriptor), the processes
//! started inside a wrapped call (a spawn's child gets the spawn's site), and the marks the
//! runtimes reported (an agent ready, the Node.js main module done) for the trace.
//!
//! Nothing here trusts the bytes: the pipe is writable by every process of the program, so
//! a malformed message is counted and skipped, never a panic.

use dejavu_trace::{Frame, FrameKind, MarkKind, StackId, StrId, Sys, TraceWriter};
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::Write;

/// Longest message, and longest write an agent makes: PIPE_BUF, so that writes from many
/// threads and processes never interleave.
pub const MAX_WRITE: usize = 4096;

/// An agent started: `pid u32, ns u32, lang u8`.
pub const HELLO: u8 = 1;
/// A call site: `pid u32, ns u32, site u32, lang u8, n u8`, then n frames of
/// `line u32, column u32, function (u16 len, bytes), file (u16 len, bytes)`.
pub const SITE: u8 = 2;
/// A wrapped synchronous call begins: `pid u32, tid u32, ns u32, site u32, depth u16`.
pub const ENTER: u8 = 3;
/// It returned or threw: `pid u32, tid u32, depth u16` (the depth after it).
pub const EXIT: u8 = 4;
/// An asynchronous call was queued: `pid u32, tid u32, ns u32, site u32, req u32, path`
/// (u16 len, bytes; absolute, resolved as the tracer resolves paths).
pub const ASYNC_BEGIN: u8 = 5;
/// It completed: `pid u32, ns u32, req u32`.
pub const ASYNC_END: u8 = 6;
/// Messages an agent could not write (the pipe was full): `pid u32, ns u32, count u32`.
pub const DROPPED: u8 = 7;
/// Node.js, main thread: the first turn of the event loop after the main module ran:
/// `pid u32, ns u32`.
pub const MAIN_DONE: u8 = 8;
/// Calls on a descriptor belong to a site: `pid u32, tid u32, ns u32, site u32, req u32,
/// fd u32`. Until ASYNC_END of `req` (0: none will come), or until the process closes
/// the descriptor (the close included), a call of any thread of the process on `fd`, made
/// outside a wrapped synchronous call, is the site's (a FileHandle's reads on the
/// threadpool, a stream's queued writes, what a Python file object does after `open`).
pub const FD: u8 = 9;
/// A repeated call's site, said once: `pid u32, tid u32, ns u32, site u32, path (u16 len,
/// bytes)`. From now on a call of thread `tid` whose path (its path argument, or its
/// descriptor's path) is `path`, made outside a wrapped synchronous call and not claimed by
/// a descriptor's site, is the site's, until another STICKY for the same thread and path
/// (the agent checks the site again now and then, and says when it changed). It spares a
/// loop of `statSync(p)` an ENTER and an EXIT per call (docs/agents.md, "Repeated calls").
pub const STICKY: u8 = 10;

/// Most nested wrapped calls kept per thread; deeper ones are not attributed.
const MAX_DEPTH: usize = 64;
/// Most pending asynchronous calls kept per process (the oldest go first): an agent that
/// lost its completion messages must not grow this without bound.
const MAX_PENDING: usize = 4096;
/// Most call sites kept for the whole recording.
const MAX_SITES: usize = 1 << 20;
/// Most frames per site: the runtime's and the libraries' frames between the wrapped call
/// and the program's code (at most 32), then up to 4 of the program's own (the agents keep
/// to this bound).
pub const MAX_FRAMES: usize = 36;
/// Most descriptors with a site kept per process (the oldest go first).
const MAX_FDS: usize = 4096;
/// Most agent stacks remembered for `State::fd_opened` (past it they are forgotten, and
/// the descriptors opened at the forgotten sites get none until the site is used again).
const MAX_AGENT_STACKS: usize = 1 << 16;
/// Most sticky paths kept per thread (past it they are dropped, and the agent's next
/// check of each says it again).
const MAX_STICKY: usize = 4096;
/// Most processes remembered as started inside a wrapped call.
const MAX_SPAWNED: usize = 1 << 16;
/// Most processes remembered as marked (a flood of hellos with made-up pids must not grow
/// this without bound; real processes are forgotten when they exec or exit).
const MAX_MARKED: usize = 1 << 20;

/// What the protocol has told the tracer so far (for tests and `-v`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Well-formed messages applied.
    pub messages: u64,
    /// Agents that said hello (one per Node.js isolate or Python process).
    pub agents: u64,
    /// Messages that were not understood and were skipped.
    pub malformed: u64,
    /// Messages the agents reported they could not write.
    pub dropped_by_agents: u64,
    /// Stops attributed to a synchronous wrapped call.
    pub sync_hits: u64,
    /// Stops attributed to a pending asynchronous call by their path.
    pub async_hits: u64,
    /// Stops attributed to a site by their descriptor (FD).
    pub fd_hits: u64,
    /// Stops attributed to the wrapped call that started their process (a spawn).
    pub spawn_hits: u64,
    /// Stops attributed to a repeated call's site by their thread and path (STICKY).
    pub sticky_hits: u64,
    /// Marks queued for the trace (agent ready, main module done).
    pub marks: u64,
}

/// A mark a runtime reported, for the tracer to write as a [`dejavu_trace::Mark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentMark {
    /// The process (its main thread sent it: hellos and MAIN_DONE carry no thread id).
    pub pid: u32,
    /// What it marks.
    pub kind: MarkKind,
    /// CLOCK_MONOTONIC ns at or after the agent wrote it: when the pipe was read (ptrace),
    /// or when the kernel saw the write (eBPF).
    pub at_ns: u64,
}

#[derive(Debug)]
struct RawFrame {
    function: Box<[u8]>,
    file: Box<[u8]>,
    line: u32,
    column: u32,
}

#[derive(Debug)]
struct Site {
    kind: FrameKind,
    frames: Box<[RawFrame]>,
    /// Interned on first use, so a site no call used costs the trace nothing.
    stack: Option<StackId>,
}

/// (pid, namespace, site): an agent numbers its sites itself, and a process can hold
/// several agents (one per Node.js worker thread).
type SiteKey = (u32, u32, u32);

#[derive(Debug, Default)]
struct Thread {
    pid: u32,
    /// (namespace, site) of the wrapped calls in progress, outermost first.
    calls: Vec<(u32, u32)>,
}

/// A descriptor's site (FD).
#[derive(Debug, Clone, Copy)]
struct FdSite {
    ns: u32,
    req: u32,
    site: u32,
    /// The site's stack, for a descriptor a forked child inherited: resolved in the parent
    /// at the fork (the child's agent numbers its sites anew; the parent may be gone).
    stack: Option<StackId>,
}

/// A process started by a thread inside a wrapped call (`child_process.spawn`,
/// `subprocess.Popen`, `os.system`), or that exec'd inside one (`os.execv`): that call's
/// stack, resolved when the process started (the parent may be gone when the child execs).
#[derive(Debug, Clone, Copy)]
struct Spawned {
    stack: StackId,
    /// It has not exec'd yet: every call it makes (the runtime's code between fork and
    /// exec: dup2, close, the PATH search) is the spawn's.
    pre_exec: bool,
    /// The program it runs is a shell (`sh -c CMD`, `shell: true`): the processes it forks
    /// are running CMD for the spawn, and their execs are the spawn's too.
    shell: bool,
}

/// What the tracer knows of a call when it asks for its site.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallRef {
    /// Its resolved path (its path argument, or its descriptor's path).
    pub path: Option<StrId>,
    /// Its descriptor argument.
    pub fd: Option<i32>,
    /// It is an exec (execve, execveat).
    pub exec: bool,
    /// The system call, where known.
    pub sys: Option<Sys>,
    /// It does not follow a final symbolic link (AT_SYMLINK_NOFOLLOW: lstat, as against
    /// stat, through one system call).
    pub nofollow: bool,
}

#[derive(Debug)]
struct Pending {
    ns: u32,
    req: u32,
    tid: u32,
    site: u32,
    /// What the call does on its path ([`ASYNC_ANY`], [`ASYNC_STAT`], [`ASYNC_OPEN`]).
    kind: u8,
    path: Box<[u8]>,
    path_id: Option<StrId>,
}

/// ASYNC_BEGIN's kinds: what the queued call does on its path, so that a worker thread's
/// system call is given the site of a pending call of its kind. Concurrent requests queue
/// an `fs.stat` and an `fs.open` of one file: a path alone gave 58 of @fastify/send's 250
/// opens the site of its `fs.stat`. Any call: `ASYNC_ANY` (mkdir, rename, realpath, ...).
pub const ASYNC_ANY: u8 = 0;
/// `fs.stat`, `fs.lstat`, `fs.access`, `fs.exists`: a stat-family call or an access check.
pub const ASYNC_STAT: u8 = 1;
/// `fs.open`, `fs.readFile`, `fs.writeFile`, `fs.appendFile`, `fs.readdir`, `fs.opendir`:
/// an open of the path (what follows is on the descriptor).
pub const ASYNC_OPEN: u8 = 2;

/// Whether a system call is one a pending call of `kind` makes on its path: a stat's is
/// a stat or an access check of the path; an open's, the open and the calls on the
/// descriptor it made (`fs.readFile`'s fstat, reads and close, named by the descriptor's
/// path).
fn kind_fits(kind: u8, call: &CallRef) -> bool {
    let Some(s) = call.sys else { return true };
    let on_fd = call.fd.is_some_and(|fd| fd >= 0);
    match kind {
        ASYNC_STAT => {
            !on_fd
                && matches!(
                    s,
                    Sys::Stat
                        | Sys::Lstat
                        | Sys::Newfstatat
                        | Sys::Statx
                        | Sys::Access
                        | Sys::Faccessat
                        | Sys::Faccessat2
                )
        }
        ASYNC_OPEN => on_fd || s.class() == dejavu_trace::SysClass::Open,
        _ => true,
    }
}

/// A thread's sticky paths (STICKY): the path as the agent sent it, until it is interned
/// at the thread's next lookup, then by its trace string.
#[derive(Debug, Default)]
struct Sticky {
    pid: u32,
    new: Vec<(Box<[u8]>, u32, u32)>,
    by_path: FxHashMap<StrId, StickyPath>,
}

/// What a thread's sticky path names: the site (ns, site), and the kind of the first call
/// on the path it named: its system call, and whether it follows a final symbolic link.
/// A wrapped function's repeated calls make one kind of call on their path (os.stat a
/// newfstatat, os.lstat a newfstatat with AT_SYMLINK_NOFOLLOW, statSync a statx,
/// existsSync a faccessat2, readFileSync an openat): a call of another kind on it, after
/// that, is not theirs but code the agent does not see (a native realpath's readlink, an
/// extension's open of a file the program stat'ed, the import system's stat of a
/// directory whose path a realpath lstat'ed), and gets no line from it rather than a
/// wrong one. Calls on a descriptor (the reads of a file readFileSync opened, a listdir's
/// getdents) take no site from it: the descriptor has the site of the call that opened
/// it, when that call had one (`fd_opened`).
#[derive(Debug, Clone, Copy)]
struct StickyPath {
    ns: u32,
    site: u32,
    kind: Option<(Sys, bool)>,
}

/// The protocol's state for one recording.
#[derive(Debug, Default)]
pub struct State {
    /// Bytes of a message whose end has not been read yet.
    partial: Vec<u8>,
    /// The channel's buffer for reads of the pipe (kept here, under the same lock).
    pub(crate) read_buf: Vec<u8>,
    sites: FxHashMap<SiteKey, Site>,
    threads: FxHashMap<u32, Thread>,
    pending: FxHashMap<u32, Vec<Pending>>,
    /// (pid, fd) -> the sites of calls on that descriptor, oldest first.
    fds: FxHashMap<(u32, u32), Vec<FdSite>>,
    /// pid -> its descriptors with a site, oldest first (for the bound, ASYNC_END, exec).
    fd_order: FxHashMap<u32, std::collections::VecDeque<u32>>,
    /// Processes started inside a wrapped call.
    spawned: FxHashMap<u32, Spawned>,
    /// tid -> its sticky paths.
    sticky: FxHashMap<u32, Sticky>,
    /// Processes whose agent said hello (their program's first hello made the mark).
    ready: FxHashSet<u32>,
    /// Processes whose main module's end was marked.
    main_done: FxHashSet<u32>,
    /// Marks not yet taken by the tracer, in the order they were read.
    marks: Vec<AgentMark>,
    /// The stacks made of the agents' sites (`fd_opened` gives a descriptor the site of
    /// the call that opened it only when that call had one of these).
    agent_stacks: FxHashSet<StackId>,
    /// Public for tests and diagnostics.
    pub counters: Counters,
}

/// A little-endian cursor that says None instead of reading past the end.
struct Rd<'a> {
    b: &'a [u8],
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Some(h)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
    fn done(&self) -> Option<()> {
        self.b.is_empty().then_some(())
    }
}

fn lang(v: u8) -> Option<FrameKind> {
    match v {
        1 => Some(FrameKind::Js),
        2 => Some(FrameKind::Python),
        _ => None,
    }
}

impl State {
    /// Applies every whole message in `bytes` (after what an earlier call left over);
    /// `at_ns` is a CLOCK_MONOTONIC time at or after they were written (for marks).
    pub fn feed(&mut self, bytes: &[u8], at_ns: u64) {
        let mut buf = std::mem::take(&mut self.partial);
        buf.extend_from_slice(bytes);
        let mut at = 0;
        while buf.len() - at >= 2 {
            let len = u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
            if len == 0 || len + 2 > MAX_WRITE {
                // Not a message boundary: someone else wrote to the pipe, or a write was
                // torn. Nothing after it can be framed; drop what we have and start again
                // with the next read (agents' writes are whole messages).
                self.counters.malformed += 1;
                at = buf.len();
                break;
            }
            if buf.len() - at < 2 + len {
                break;
            }
            let msg = &buf[at + 2..at + 2 + len];
            if self.apply(msg, at_ns).is_some() {
                self.counters.messages += 1;
            } else {
                self.counters.malformed += 1;
            }
            at += 2 + len;
        }
        buf.drain(..at);
        self.partial = buf;
    }

    fn apply(&mut self, msg: &[u8], at_ns: u64) -> Option<()> {
        let mut r = Rd { b: msg };
        match r.u8()? {
            HELLO => {
                let (pid, _ns, _lang) = (r.u32()?, r.u32()?, r.u8()?);
                r.done()?;
                self.counters.agents += 1;
                // The process's first agent (a Node.js worker's comes later, a forked
                // Python child's has its own pid) marks the end of its start-up.
                self.mark(pid, MarkKind::AgentReady, at_ns);
            }
            MAIN_DONE => {
                let (pid, _ns) = (r.u32()?, r.u32()?);
                r.done()?;
                self.mark(pid, MarkKind::MainDone, at_ns);
            }
            SITE => {
                let (pid, ns, site) = (r.u32()?, r.u32()?, r.u32()?);
                let kind = lang(r.u8()?)?;
                let n = r.u8()? as usize;
                if n == 0 || n > MAX_FRAMES {
                    return None;
                }
                let mut frames = Vec::with_capacity(n);
                for _ in 0..n {
                    let (line, column) = (r.u32()?, r.u32()?);
                    let function = r.bytes()?.into();
                    let file = r.bytes()?.into();
                    frames.push(RawFrame {
                        function,
                        file,
                        line,
                        column,
                    });
                }
                r.done()?;
                let key = (pid, ns, site);
                if self.sites.len() >= MAX_SITES && !self.sites.contains_key(&key) {
                    return Some(());
                }
                // A redefinition (an agent of a new process or thread reusing the
                // numbers) replaces the old site and its interned stack.
                self.sites.insert(
                    key,
                    Site {
                        kind,
                        frames: frames.into(),
                        stack: None,
                    },
                );
            }
            ENTER => {
                let (pid, tid, ns, site) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                let depth = r.u16()? as usize;
                r.done()?;
                let t = self.threads.entry(tid).or_default();
                if t.pid != pid {
                    *t = Thread {
                        pid,
                        calls: Vec::new(),
                    };
                }
                // The depth, not a push, makes a lost message harmless: the next one
                // from the thread puts its stack right again.
                t.calls.truncate(depth);
                if t.calls.len() == depth && depth < MAX_DEPTH {
                    t.calls.push((ns, site));
                }
            }
            EXIT => {
                let (pid, tid) = (r.u32()?, r.u32()?);
                let depth = r.u16()? as usize;
                r.done()?;
                if let Some(t) = self.threads.get_mut(&tid) {
                    if t.pid == pid {
                        t.calls.truncate(depth);
                    }
                }
            }
            ASYNC_BEGIN => {
                let (pid, tid, ns, site, req) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                // A kind this build does not know: any call.
                let kind = match r.u8()? {
                    k @ (ASYNC_STAT | ASYNC_OPEN) => k,
                    _ => ASYNC_ANY,
                };
                let path = r.bytes()?;
                r.done()?;
                if path.is_empty() {
                    return None;
                }
                let list = self.pending.entry(pid).or_default();
                if list.len() >= MAX_PENDING {
                    list.remove(0);
                }
                list.push(Pending {
                    ns,
                    req,
                    tid,
                    site,
                    kind,
                    path: path.into(),
                    path_id: None,
                });
            }
            ASYNC_END => {
                let (pid, ns, req) = (r.u32()?, r.u32()?, r.u32()?);
                r.done()?;
                if let Some(list) = self.pending.get_mut(&pid) {
                    // A call may name several paths (rename): one entry per path.
                    list.retain(|p| !(p.ns == ns && p.req == req));
                    if list.is_empty() {
                        self.pending.remove(&pid);
                    }
                }
                if req != 0 {
                    self.end_fd_req(pid, ns, req);
                }
            }
            FD => {
                let (pid, _tid, ns, site) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                let (req, fd) = (r.u32()?, r.u32()?);
                r.done()?;
                if fd > i32::MAX as u32 {
                    return None;
                }
                let order = self.fd_order.entry(pid).or_default();
                let list = self.fds.entry((pid, fd)).or_default();
                if req == 0 {
                    // A descriptor's site for good (until it is closed): it replaces
                    // whatever the number had (a lost close).
                    list.retain(|e| e.req != 0);
                }
                if list.is_empty() {
                    order.push_back(fd);
                }
                list.push(FdSite {
                    ns,
                    req,
                    site,
                    stack: None,
                });
                if list.len() > MAX_PENDING {
                    list.remove(0);
                }
                if order.len() > MAX_FDS {
                    if let Some(old) = order.pop_front() {
                        self.fds.remove(&(pid, old));
                    }
                }
            }
            STICKY => {
                let (pid, tid, ns, site) = (r.u32()?, r.u32()?, r.u32()?, r.u32()?);
                let path = r.bytes()?;
                r.done()?;
                if path.is_empty() {
                    return None;
                }
                let t = self.sticky.entry(tid).or_default();
                if t.pid != pid {
                    *t = Sticky {
                        pid,
                        ..Sticky::default()
                    };
                }
                if t.new.len() + t.by_path.len() >= MAX_STICKY {
                    t.new.clear();
                    t.by_path.clear();
                }
                t.new.push((path.into(), ns, site));
            }
            DROPPED => {
                let (_pid, _ns, count) = (r.u32()?, r.u32()?, r.u32()?);
                r.done()?;
                self.counters.dropped_by_agents += count as u64;
            }
            _ => return None,
        }
        Some(())
    }

    /// Whether `pid`'s agent said hello (since its last exec).
    pub fn is_ready(&self, pid: u32) -> bool {
        self.ready.contains(&pid)
    }

    /// Queues a mark of `kind` for `pid`, once per process and program.
    fn mark(&mut self, pid: u32, kind: MarkKind, at_ns: u64) {
        let seen = match kind {
            MarkKind::AgentReady => &mut self.ready,
            MarkKind::MainDone => &mut self.main_done,
        };
        if seen.len() >= MAX_MARKED || !seen.insert(pid) {
            return;
        }
        self.counters.marks += 1;
        self.marks.push(AgentMark { pid, kind, at_ns });
    }

    /// The marks read since the last call, oldest first.
    pub fn take_marks(&mut self) -> Vec<AgentMark> {
        std::mem::take(&mut self.marks)
    }

    /// Whether marks wait to be taken.
    pub fn has_marks(&self) -> bool {
        !self.marks.is_empty()
    }

    /// Process `pid` is gone or runs a new program: its agents' state goes with it. (Its
    /// marks already read stay queued: they belong before the exec or exit.) What made
    /// the process (`Spawned`) is not its agents' state: see `on_exec` and `on_exit`.
    pub fn forget_process(&mut self, pid: u32) {
        self.sites.retain(|&(p, _, _), _| p != pid);
        self.threads.retain(|_, t| t.pid != pid);
        self.sticky.retain(|_, t| t.pid != pid);
        self.pending.remove(&pid);
        if let Some(order) = self.fd_order.remove(&pid) {
            for fd in order {
                self.fds.remove(&(pid, fd));
            }
        }
        self.ready.remove(&pid);
        self.main_done.remove(&pid);
    }

    /// Ends the FD entries of request `req` of agent (`pid`, `ns`).
    fn end_fd_req(&mut self, pid: u32, ns: u32, req: u32) {
        let Some(order) = self.fd_order.get_mut(&pid) else {
            return;
        };
        let fds = &mut self.fds;
        order.retain(|&fd| {
            let Some(list) = fds.get_mut(&(pid, fd)) else {
                return false;
            };
            list.retain(|e| !(e.ns == ns && e.req == req));
            if list.is_empty() {
                fds.remove(&(pid, fd));
                return false;
            }
            true
        });
    }

    /// Process `pid` closed (or replaced: dup2, a new open) its descriptors `lo..=hi`:
    /// their sites end (after the close itself was attributed).
    pub fn fds_released(&mut self, pid: u32, lo: u32, hi: u32) {
        let Some(order) = self.fd_order.get_mut(&pid) else {
            return;
        };
        let fds = &mut self.fds;
        order.retain(|&fd| {
            if fd < lo || fd > hi {
                return true;
            }
            fds.remove(&(pid, fd));
            false
        });
        if order.is_empty() {
            self.fd_order.remove(&pid);
        }
    }

    /// Thread `ptid` of process `ppid` started process `child` (fork, vfork, clone
    /// without CLONE_THREAD). Inside a wrapped call, the child is that call's until it
    /// execs (and its execs are); a child of such a process before its exec, or of a shell
    /// it became, is the same call's too.
    pub fn on_fork<W: Write>(&mut self, w: &mut TraceWriter<W>, ppid: u32, ptid: u32, child: u32) {
        let own = self
            .threads
            .get(&ptid)
            .filter(|t| t.pid == ppid)
            .and_then(|t| t.calls.last().copied());
        let spawned = match own {
            Some((ns, site)) => self.stack(w, (ppid, ns, site)).map(|stack| Spawned {
                stack,
                pre_exec: true,
                shell: false,
            }),
            None => match self.spawned.get(&ppid) {
                Some(s) if s.pre_exec => Some(*s),
                Some(s) if s.shell => Some(Spawned {
                    pre_exec: false,
                    ..*s
                }),
                _ => None,
            },
        };
        match spawned {
            Some(s) if self.spawned.len() < MAX_SPAWNED || self.spawned.contains_key(&child) => {
                self.spawned.insert(child, s);
            }
            _ => {
                self.spawned.remove(&child);
            }
        }
        self.inherit_fds(w, ppid, child);
    }

    /// The child of a fork has its parent's descriptors: each keeps the line that opened
    /// it (its own site, not the parent's calls queued on it), so that a worker's writes
    /// on a pipe or file its parent made (multiprocessing's result sends) name that line,
    /// as the parent's own do. Until the child closes or replaces the descriptor, or
    /// execs (a new program's writes are its own).
    fn inherit_fds<W: Write>(&mut self, w: &mut TraceWriter<W>, ppid: u32, child: u32) {
        self.fds_released(child, 0, u32::MAX);
        let Some(order) = self.fd_order.get(&ppid) else {
            return;
        };
        let own: Vec<(u32, FdSite)> = order
            .iter()
            .filter_map(|&fd| {
                let e = self.fds.get(&(ppid, fd))?.iter().find(|e| e.req == 0)?;
                Some((fd, *e))
            })
            .collect();
        for (fd, e) in own {
            if let Some(stack) = e.stack.or_else(|| self.stack(w, (ppid, e.ns, e.site))) {
                self.set_fd_stack(child, fd, stack);
            }
        }
    }

    /// Thread `tid` of process `pid` exec'd: its agents' state is gone; a wrapped call it
    /// was inside (Python's `os.execv`) makes the process that call's, as a spawn's child.
    pub fn on_exec<W: Write>(&mut self, w: &mut TraceWriter<W>, pid: u32, tid: u32) {
        let own = self
            .threads
            .get(&tid)
            .filter(|t| t.pid == pid)
            .and_then(|t| t.calls.last().copied());
        if let Some(stack) = own.and_then(|(ns, site)| self.stack(w, (pid, ns, site))) {
            if self.spawned.len() < MAX_SPAWNED || self.spawned.contains_key(&pid) {
                self.spawned.insert(
                    pid,
                    Spawned {
                        stack,
                        pre_exec: false,
                        shell: false,
                    },
                );
            }
        } else if let Some(s) = self.spawned.get_mut(&pid) {
            s.pre_exec = false;
        }
        self.forget_process(pid);
    }

    /// Process `pid` now runs `exe` (after `on_exec`): whether it is a shell, whose
    /// children run commands for the spawn that started it.
    pub fn exec_image(&mut self, pid: u32, exe: &[u8]) {
        if let Some(s) = self.spawned.get_mut(&pid) {
            s.shell = is_shell(exe);
        }
    }

    /// Process `pid` ended.
    pub fn on_exit(&mut self, pid: u32) {
        self.forget_process(pid);
        self.spawned.remove(&pid);
    }

    /// The stack for the call `tid` of `pid` is making: the innermost wrapped synchronous
    /// call of that thread; else, in a process started inside a wrapped call, that call
    /// (every call before the process exec'd, its execs after); else the site of the
    /// call's descriptor (FD: the oldest call queued on it, else the descriptor's own
    /// site); else the site a STICKY gave the thread for the call's path; else the oldest
    /// pending asynchronous call of the
    /// process, issued by another thread, that names the call's path and makes its kind of
    /// call ([`ASYNC_STAT`], [`ASYNC_OPEN`]).
    pub fn lookup<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        tid: u32,
        call: CallRef,
    ) -> Option<StackId> {
        if let Some(&(ns, site)) = self
            .threads
            .get(&tid)
            .filter(|t| t.pid == pid)
            .and_then(|t| t.calls.last())
        {
            let s = self.stack(w, (pid, ns, site));
            if s.is_some() {
                self.counters.sync_hits += 1;
            }
            return s;
        }
        if let Some(s) = self.spawned.get(&pid) {
            if s.pre_exec || call.exec {
                self.counters.spawn_hits += 1;
                return Some(s.stack);
            }
        }
        if let Some(fd) = call.fd.filter(|&fd| fd >= 0) {
            // A call queued on it (a FileHandle read) before the descriptor's own site
            // (the line that opened it).
            if let Some(&e) = self
                .fds
                .get(&(pid, fd as u32))
                .and_then(|l| l.iter().find(|e| e.req != 0).or(l.first()))
            {
                let s = e.stack.or_else(|| self.stack(w, (pid, e.ns, e.site)));
                if s.is_some() {
                    self.counters.fd_hits += 1;
                    return s;
                }
            }
        }
        let path = call.path?;
        // A call through a descriptor takes a site from the descriptor only (above: the
        // site of the call that opened it, when that was an agent's, a sticky path's
        // included), never from a sticky path by the descriptor's path: a directory the
        // import system listed (its own open, fstat and reads) is not the line that
        // stat'ed that directory.
        let on_path = call.fd.is_none_or(|fd| fd < 0);
        if let Some(t) = self
            .sticky
            .get_mut(&tid)
            .filter(|t| t.pid == pid && on_path)
        {
            for (p, ns, site) in t.new.drain(..) {
                let path = w.intern(&p);
                if site == 0 {
                    // The agent forgot the path: no line from it any more.
                    t.by_path.remove(&path);
                    continue;
                }
                let e = StickyPath {
                    ns,
                    site,
                    kind: None,
                };
                t.by_path.insert(path, e);
            }
            // A call on the path is held to the kind of the first one the entry named
            // (StickyPath).
            let kind = call.sys.map(|s| (s, call.nofollow));
            let found = t.by_path.get_mut(&path).and_then(|e| {
                let fits = kind.is_none() || e.kind.is_none_or(|k| Some(k) == kind);
                if fits && e.kind.is_none() {
                    e.kind = kind;
                }
                fits.then_some((e.ns, e.site))
            });
            if let Some((ns, site)) = found {
                let s = self.stack(w, (pid, ns, site));
                if s.is_some() {
                    self.counters.sticky_hits += 1;
                    return s;
                }
            }
        }
        let list = self.pending.get_mut(&pid)?;
        let mut found = None;
        for p in list.iter_mut() {
            if p.tid == tid || !kind_fits(p.kind, &call) {
                continue;
            }
            let id = *p.path_id.get_or_insert_with(|| w.intern(&p.path));
            if id == path {
                found = Some((p.ns, p.site));
                break;
            }
        }
        let (ns, site) = found?;
        let s = self.stack(w, (pid, ns, site));
        if s.is_some() {
            self.counters.async_hits += 1;
        }
        s
    }

    fn stack<W: Write>(&mut self, w: &mut TraceWriter<W>, key: SiteKey) -> Option<StackId> {
        let site = self.sites.get_mut(&key)?;
        if let Some(id) = site.stack {
            return Some(id);
        }
        let mut intern = |b: &[u8]| (!b.is_empty()).then(|| w.intern(b));
        let frames: Vec<Frame> = site
            .frames
            .iter()
            .map(|f| Frame {
                kind: site.kind,
                function: intern(&f.function),
                file: intern(&f.file),
                line: f.line,
                column: f.column,
                module: None,
                addr: 0,
            })
            .collect();
        let id = w.intern_stack(&frames);
        site.stack = Some(id);
        if self.agent_stacks.len() >= MAX_AGENT_STACKS {
            self.agent_stacks.clear();
        }
        self.agent_stacks.insert(id);
        Some(id)
    }

    /// Process `pid` opened descriptor `fd` in a call whose stack is `stack`: when that is
    /// an agent's site (the open made inside a wrapped call, or named by a STICKY path),
    /// the descriptor's later calls are that site's too, as if the agent had sent FD for
    /// it. The agents send FD only where the function gives the descriptor back (open,
    /// os.open, os.pipe); os.scandir's and fs.opendirSync's reads of the directory, made
    /// after the wrapped call returned, had no line. An FD message for the descriptor
    /// replaces it; a close ends it.
    pub fn fd_opened(&mut self, pid: u32, fd: u32, stack: StackId) {
        if fd <= i32::MAX as u32 && self.agent_stacks.contains(&stack) {
            self.set_fd_stack(pid, fd, stack);
        }
    }

    /// Descriptor `fd` of `pid` has `stack` (resolved already) as its own site, in place of
    /// whatever it had (`fd_opened`, `inherit_fds`).
    fn set_fd_stack(&mut self, pid: u32, fd: u32, stack: StackId) {
        let site = FdSite {
            ns: 0,
            req: 0,
            site: 0,
            stack: Some(stack),
        };
        let order = self.fd_order.entry(pid).or_default();
        if self.fds.insert((pid, fd), vec![site]).is_none() {
            order.push_back(fd);
        }
        if order.len() > MAX_FDS {
            if let Some(old) = order.pop_front() {
                self.fds.remove(&(pid, old));
            }
        }
    }
}

/// Whether `exe` is a shell: the processes it forks run the command it was given.
fn is_shell(exe: &[u8]) -> bool {
    let base = exe.rsplit(|&c| c == b'/').next().unwrap_or(exe);
    matches!(
        base,
        b"sh" | b"bash" | b"dash" | b"zsh" | b"ksh" | b"mksh" | b"ash" | b"busybox"
    )
}

/// Message builders, as the agents encode them (for tests, and the reference for
/// docs/agents.md).
#[cfg(test)]
pub mod encode {
    use super::*;

    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(body.len() + 3);
        v.extend_from_slice(&((body.len() + 1) as u16).to_le_bytes());
        v.push(kind);
        v.extend_from_slice(body);
        v
    }

    fn u32s(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        out.extend_from_slice(&(b.len() as u16).to_le_bytes());
        out.extend_from_slice(b);
    }

    pub fn hello(pid: u32, ns: u32, lang: u8) -> Vec<u8> {
        let mut b = u32s(&[pid, ns]);
        b.push(lang);
        msg(HELLO, &b)
    }

    /// `frames`: (function, file, line, column).
    pub fn site(
        pid: u32,
        ns: u32,
        site: u32,
        lang: u8,
        frames: &[(&str, &str, u32, u32)],
    ) -> Vec<u8> {
        let mut b = u32s(&[pid, ns, site]);
        b.push(lang);
        b.push(frames.len() as u8);
        for (f, file, line, col) in frames {
            b.extend(u32s(&[*line, *col]));
            bytes(&mut b, f.as_bytes());
            bytes(&mut b, file.as_bytes());
        }
        msg(SITE, &b)
    }

    pub fn enter(pid: u32, tid: u32, ns: u32, site: u32, depth: u16) -> Vec<u8> {
        let mut b = u32s(&[pid, tid, ns, site]);
        b.extend_from_slice(&depth.to_le_bytes());
        msg(ENTER, &b)
    }

    pub fn exit(pid: u32, tid: u32, depth: u16) -> Vec<u8> {
        let mut b = u32s(&[pid, tid]);
        b.extend_from_slice(&depth.to_le_bytes());
        msg(EXIT, &b)
    }

    pub fn async_begin(pid: u32, tid: u32, ns: u32, site: u32, req: u32, path: &str) -> Vec<u8> {
        async_begin_kind(pid, tid, ns, site, req, super::ASYNC_ANY, path)
    }

    pub fn async_begin_kind(
        pid: u32,
        tid: u32,
        ns: u32,
        site: u32,
        req: u32,
        kind: u8,
        path: &str,
    ) -> Vec<u8> {
        let mut b = u32s(&[pid, tid, ns, site, req]);
        b.push(kind);
        bytes(&mut b, path.as_bytes());
        msg(ASYNC_BEGIN, &b)
    }

    pub fn async_end(pid: u32, ns: u32, req: u32) -> Vec<u8> {
        msg(ASYNC_END, &u32s(&[pid, ns, req]))
    }

    pub fn dropped(pid: u32, ns: u32, count: u32) -> Vec<u8> {
        msg(DROPPED, &u32s(&[pid, ns, count]))
    }

    pub fn main_done(pid: u32, ns: u32) -> Vec<u8> {
        msg(MAIN_DONE, &u32s(&[pid, ns]))
    }

    pub fn sticky(pid: u32, tid: u32, ns: u32, site: u32, path: &str) -> Vec<u8> {
        let mut b = u32s(&[pid, tid, ns, site]);
        bytes(&mut b, path.as_bytes());
        msg(STICKY, &b)
    }

    pub fn fd(pid: u32, tid: u32, ns: u32, site: u32, req: u32, fd: u32) -> Vec<u8> {
        msg(FD, &u32s(&[pid, tid, ns, site, req, fd]))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::encode::*;
    use super::*;
    use dejavu_trace::{Meta, Record, Sys, Syscall, TraceReader, WriterOptions};

    /// A call on `path`.
    fn on(path: StrId) -> CallRef {
        CallRef {
            path: Some(path),
            ..CallRef::default()
        }
    }

    fn writer() -> TraceWriter<Vec<u8>> {
        TraceWriter::new(Vec::new(), &Meta::default(), WriterOptions::default()).unwrap()
    }

    /// The frames of `id` as (function, file, line, column), read back from a trace.
    fn frames_of(mut w: TraceWriter<Vec<u8>>, id: StackId) -> Vec<(String, String, u32, u32)> {
        let mut c = Syscall::new(0, 1, 1, Sys::Stat);
        c.stack = Some(id);
        w.push(&Record::Syscall(c)).unwrap();
        let bytes = w.finish(Default::default()).unwrap();
        let mut r = TraceReader::new(&bytes[..]).unwrap();
        while r.next_record().unwrap().is_some() {}
        r.stack(id)
            .iter()
            .map(|f| {
                let s = |id: Option<StrId>| {
                    id.map(|i| r.strings().lossy(i).into_owned())
                        .unwrap_or_default()
                };
                (s(f.function), s(f.file), f.line, f.column)
            })
            .collect()
    }

    fn js_site(pid: u32, ns: u32, site: u32, line: u32) -> Vec<u8> {
        super::encode::site(
            pid,
            ns,
            site,
            1,
            &[
                ("probe", "/app/a.js", line, 5),
                ("main", "/app/a.js", 40, 1),
            ],
        )
    }

    #[test]
    fn a_thread_inside_a_wrapped_call_gets_its_site_and_nothing_after_it() {
        let mut w = writer();
        let mut s = State::default();
        let mut bytes = hello(10, 10, 1);
        bytes.extend(js_site(10, 10, 1, 12));
        bytes.extend(enter(10, 10, 10, 1, 0));
        s.feed(&bytes, 0);
        let id = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        assert_eq!(
            s.lookup(&mut w, 10, 11, CallRef::default()),
            None,
            "another thread"
        );
        assert_eq!(
            s.lookup(&mut w, 11, 10, CallRef::default()),
            None,
            "another process"
        );
        s.feed(&exit(10, 10, 0), 0);
        assert_eq!(
            s.lookup(&mut w, 10, 10, CallRef::default()),
            None,
            "after the call returned"
        );
        assert_eq!(s.counters.agents, 1);
        assert_eq!(s.counters.messages, 4);
        assert_eq!(
            frames_of(w, id),
            vec![
                ("probe".into(), "/app/a.js".into(), 12, 5),
                ("main".into(), "/app/a.js".into(), 40, 1)
            ]
        );
    }

    #[test]
    fn a_sticky_site_names_the_threads_calls_on_its_path_until_another_replaces_it() {
        let mut w = writer();
        let mut s = State::default();
        let (p, q) = (w.intern(b"/app/config.json"), w.intern(b"/app/other.json"));
        let mut b = js_site(10, 10, 1, 12);
        b.extend(js_site(10, 10, 2, 20));
        b.extend(sticky(10, 10, 10, 1, "/app/config.json"));
        s.feed(&b, 0);
        let first = s.lookup(&mut w, 10, 10, on(p)).unwrap();
        assert_eq!(
            s.lookup(&mut w, 10, 10, on(p)),
            Some(first),
            "every call after it"
        );
        assert_eq!(s.lookup(&mut w, 10, 10, on(q)), None, "another path");
        assert_eq!(s.lookup(&mut w, 10, 11, on(p)), None, "another thread");
        assert_eq!(s.lookup(&mut w, 11, 10, on(p)), None, "another process");
        // A wrapped call in progress comes first.
        s.feed(&enter(10, 10, 10, 2, 0), 0);
        let inside = s.lookup(&mut w, 10, 10, on(p)).unwrap();
        assert_ne!(inside, first);
        s.feed(&exit(10, 10, 0), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, on(p)), Some(first));
        // The agent saw the path called from another line: that site from then on.
        s.feed(&sticky(10, 10, 10, 2, "/app/config.json"), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, on(p)), Some(inside));
        assert_eq!(s.counters.sticky_hits, 4);
        // Site 0: the agent forgot the path (the import system stats it too).
        s.feed(&sticky(10, 10, 10, 0, "/app/config.json"), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, on(p)), None, "forgotten");
        s.feed(&sticky(10, 10, 10, 2, "/app/config.json"), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, on(p)), Some(inside), "said again");
        // The process execs or exits: its sticky paths go with it.
        s.forget_process(10);
        assert_eq!(s.lookup(&mut w, 10, 10, on(p)), None);
        // An empty path is malformed.
        s.feed(&sticky(10, 10, 10, 2, ""), 0);
        assert_eq!(s.counters.malformed, 1);
    }

    #[test]
    fn a_sticky_path_names_only_the_kind_of_call_it_named_first_and_no_calls_on_descriptors() {
        let mut w = writer();
        let mut s = State::default();
        let p = w.intern(b"/app/data.db");
        let call = |sys: Sys, fd: Option<i32>| CallRef {
            path: Some(p),
            fd,
            sys: Some(sys),
            ..CallRef::default()
        };
        let mut b = js_site(10, 10, 1, 12);
        b.extend(js_site(10, 10, 2, 20));
        b.extend(sticky(10, 10, 10, 1, "/app/data.db"));
        s.feed(&b, 0);
        let stat = s.lookup(&mut w, 10, 10, call(Sys::Statx, None)).unwrap();
        assert_eq!(s.lookup(&mut w, 10, 10, call(Sys::Statx, None)), Some(stat));
        // Another kind of call on the path: not the wrapped function's (a native
        // realpath's readlink, an extension opening the file).
        assert_eq!(s.lookup(&mut w, 10, 10, call(Sys::Readlink, None)), None);
        assert_eq!(
            s.lookup(&mut w, 10, 10, call(Sys::Openat, Some(-100))),
            None
        );
        // A call through a descriptor on that path takes no site from it (only from its
        // descriptor's opening call).
        assert_eq!(s.lookup(&mut w, 10, 10, call(Sys::Read, Some(3))), None);
        // The same system call without following a final link (lstat, as against stat):
        // another function's (the import system's stat of a directory a realpath lstat'ed
        // is the other way round).
        assert_eq!(
            s.lookup(
                &mut w,
                10,
                10,
                CallRef {
                    nofollow: true,
                    ..call(Sys::Statx, None)
                }
            ),
            None
        );
        // The agent says the path again (another line, another function): bound anew.
        s.feed(&sticky(10, 10, 10, 2, "/app/data.db"), 0);
        let open = s
            .lookup(&mut w, 10, 10, call(Sys::Openat, Some(-100)))
            .unwrap();
        assert_ne!(open, stat);
        assert_eq!(s.lookup(&mut w, 10, 10, call(Sys::Statx, None)), None);
        assert_eq!(s.counters.sticky_hits, 3);
    }

    #[test]
    fn a_forked_child_keeps_the_sites_of_the_descriptors_it_inherited_until_it_execs() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(fd(10, 10, 10, 1, 0, 5));
        // A call queued on descriptor 6: the parent's, not inherited.
        b.extend(js_site(10, 10, 2, 20));
        b.extend(fd(10, 10, 10, 2, 7, 6));
        s.feed(&b, 0);
        let made = s.lookup(&mut w, 10, 10, fd_call(5)).unwrap();
        s.on_fork(&mut w, 10, 10, 11);
        assert_eq!(s.lookup(&mut w, 11, 11, fd_call(5)), Some(made));
        assert_eq!(s.lookup(&mut w, 11, 11, fd_call(6)), None);
        // The parent exits: the child's still has it.
        s.forget_process(10);
        assert_eq!(s.lookup(&mut w, 11, 11, fd_call(5)), Some(made));
        // A child of the child too.
        s.on_fork(&mut w, 11, 11, 12);
        assert_eq!(s.lookup(&mut w, 12, 12, fd_call(5)), Some(made));
        // Closed, or a new program: gone.
        s.fds_released(11, 5, 5);
        assert_eq!(s.lookup(&mut w, 11, 11, fd_call(5)), None);
        s.forget_process(12);
        assert_eq!(s.lookup(&mut w, 12, 12, fd_call(5)), None);
    }

    #[test]
    fn a_descriptor_opened_at_an_agents_site_is_that_sites_until_it_is_closed() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        let p = w.intern(b"/app/dir");
        let open = s.lookup(&mut w, 10, 10, on(p)).unwrap();
        s.feed(&exit(10, 10, 0), 0);
        s.fd_opened(10, 7, open);
        assert_eq!(s.lookup(&mut w, 10, 10, fd_call(7)), Some(open));
        // A stack that is not an agent's (a native one) gives the descriptor nothing.
        let native = w.intern_stack(&[]);
        s.fd_opened(10, 8, native);
        assert_eq!(s.lookup(&mut w, 10, 10, fd_call(8)), None);
        s.fds_released(10, 7, 7);
        assert_eq!(s.lookup(&mut w, 10, 10, fd_call(7)), None);
    }

    #[test]
    fn messages_split_across_reads_are_put_back_together() {
        let mut w = writer();
        let mut s = State::default();
        let mut bytes = js_site(10, 10, 1, 12);
        bytes.extend(enter(10, 10, 10, 1, 0));
        for b in &bytes {
            s.feed(std::slice::from_ref(b), 0);
        }
        assert!(s.lookup(&mut w, 10, 10, CallRef::default()).is_some());
        assert_eq!(s.counters.malformed, 0);
    }

    #[test]
    fn nested_calls_unwind_to_the_outer_site_and_a_lost_exit_heals_at_the_next_enter() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(js_site(10, 10, 2, 20));
        b.extend(enter(10, 10, 10, 1, 0));
        b.extend(enter(10, 10, 10, 2, 1));
        s.feed(&b, 0);
        let inner = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        s.feed(&exit(10, 10, 1), 0);
        let outer = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        assert_ne!(inner, outer);
        // The outer call's exit is lost (pipe full); the next call at depth 0 replaces it.
        s.feed(&enter(10, 10, 10, 2, 0), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, CallRef::default()), Some(inner));
        s.feed(&exit(10, 10, 0), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, CallRef::default()), None);
    }

    #[test]
    fn an_async_call_is_found_by_path_on_other_threads_until_it_ends() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(js_site(10, 10, 2, 20));
        b.extend(async_begin(10, 10, 10, 1, 7, "/data/x"));
        b.extend(async_begin(10, 10, 10, 2, 8, "/data/x"));
        s.feed(&b, 0);
        let x = w.intern(b"/data/x");
        let y = w.intern(b"/data/y");
        let first = s.lookup(&mut w, 10, 12, on(x)).unwrap();
        assert_eq!(s.lookup(&mut w, 10, 12, on(y)), None, "another path");
        assert_eq!(
            s.lookup(&mut w, 10, 12, CallRef::default()),
            None,
            "no path"
        );
        assert_eq!(
            s.lookup(&mut w, 10, 10, on(x)),
            None,
            "the issuing thread itself"
        );
        assert_eq!(s.lookup(&mut w, 11, 12, on(x)), None, "another process");
        s.feed(&async_end(10, 10, 7), 0);
        let second = s.lookup(&mut w, 10, 12, on(x)).unwrap();
        assert_ne!(first, second, "the oldest pending call first");
        s.feed(&async_end(10, 10, 8), 0);
        assert_eq!(s.lookup(&mut w, 10, 12, on(x)), None);
        assert_eq!(s.counters.async_hits, 2);
    }

    #[test]
    fn a_worker_threads_call_takes_the_site_of_a_pending_call_of_its_kind() {
        // Two requests: one queued fs.stat of /srv/p.html (site 1), then one's fs.open of
        // it (site 2). The worker's openat is the open's, its statx the stat's; a call of
        // no known kind, or a pending call of any kind, goes by the path alone.
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 406);
        b.extend(js_site(10, 10, 2, 611));
        b.extend(async_begin_kind(
            10,
            10,
            10,
            1,
            7,
            ASYNC_STAT,
            "/srv/p.html",
        ));
        b.extend(async_begin_kind(
            10,
            10,
            10,
            2,
            8,
            ASYNC_OPEN,
            "/srv/p.html",
        ));
        s.feed(&b, 0);
        let p = w.intern(b"/srv/p.html");
        let call = |sys| CallRef {
            sys: Some(sys),
            ..on(p)
        };
        let open = s.lookup(&mut w, 10, 12, call(Sys::Openat)).unwrap();
        let stat = s.lookup(&mut w, 10, 12, call(Sys::Statx)).unwrap();
        assert_ne!(open, stat);
        // A kind neither makes: nothing (a mkdir of the path is not theirs).
        assert_eq!(s.lookup(&mut w, 10, 12, call(Sys::Mkdir)), None);
        // A read on a descriptor of the path: the open's (readFile's reads), not the stat's.
        let read = CallRef {
            fd: Some(5),
            ..call(Sys::Read)
        };
        assert_eq!(s.lookup(&mut w, 10, 12, read), Some(open));
        // An fstat of such a descriptor too.
        let fstat = CallRef {
            fd: Some(5),
            ..call(Sys::Fstat)
        };
        assert_eq!(s.lookup(&mut w, 10, 12, fstat), Some(open));
        // An unknown system call: the oldest, as before.
        assert_eq!(s.lookup(&mut w, 10, 12, on(p)), Some(stat));
        // A pending call of any kind (fs.mkdir with recursive: stats and mkdirs).
        s.feed(&async_begin(10, 10, 10, 1, 9, "/srv/d"), 0);
        let d = w.intern(b"/srv/d");
        assert!(s
            .lookup(
                &mut w,
                10,
                12,
                CallRef {
                    sys: Some(Sys::Mkdir),
                    ..on(d)
                }
            )
            .is_some());
        assert_eq!(frames_of(w, open)[0].2, 611, "the open's site");
    }

    #[test]
    fn sites_are_per_agent_so_worker_threads_do_not_mix_their_numbers() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(js_site(10, 13, 1, 99)); // a worker thread's agent, same number
        b.extend(enter(10, 13, 13, 1, 0));
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        let worker = s.lookup(&mut w, 10, 13, CallRef::default()).unwrap();
        let main = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        assert_ne!(worker, main);
        assert_eq!(frames_of(w, worker)[0].2, 99);
    }

    #[test]
    fn a_process_that_execs_or_exits_leaves_nothing_behind() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(enter(10, 10, 10, 1, 0));
        b.extend(async_begin(10, 10, 10, 1, 7, "/data/x"));
        s.feed(&b, 0);
        s.forget_process(10);
        let x = w.intern(b"/data/x");
        assert_eq!(s.lookup(&mut w, 10, 10, CallRef::default()), None);
        assert_eq!(s.lookup(&mut w, 10, 12, on(x)), None);
        // The new program's agent uses site 1 without defining it: no stale stack.
        s.feed(&enter(10, 10, 10, 1, 0), 0);
        assert_eq!(s.lookup(&mut w, 10, 10, CallRef::default()), None);
    }

    #[test]
    fn garbage_is_counted_and_skipped_never_a_panic() {
        let mut w = writer();
        let mut s = State::default();
        // Unknown kind, truncated body, trailing bytes, zero frames: each skipped alone.
        let mut b = vec![2, 0, 99, 0];
        b.extend([3, 0, ENTER, 1, 2]);
        let mut long = enter(10, 10, 10, 1, 0);
        long[0] += 1;
        long.push(0);
        b.extend(long);
        b.extend(super::encode::site(10, 10, 1, 1, &[]));
        b.extend(super::encode::site(10, 10, 1, 9, &[("f", "g", 1, 1)]));
        b.extend(js_site(10, 10, 1, 12));
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        assert_eq!(s.counters.malformed, 5);
        assert!(
            s.lookup(&mut w, 10, 10, CallRef::default()).is_some(),
            "framing survived"
        );
        // A length that cannot be a message: everything buffered is dropped, and the
        // next read starts clean.
        s.feed(&[0, 0, 1, 2, 3], 0);
        s.feed(&exit(10, 10, 0), 0);
        assert_eq!(s.counters.malformed, 6);
        // Arbitrary bytes never panic.
        let mut x: u32 = 12345;
        for _ in 0..2000 {
            let n = (x % 40) as usize;
            let chunk: Vec<u8> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            s.feed(&chunk, 0);
            let _ = s.lookup(&mut w, x % 3, x % 5, on(StrId(0)));
        }
    }

    #[test]
    fn the_first_hello_of_a_process_and_its_main_done_are_marked_once_per_program() {
        let mut s = State::default();
        let mut b = hello(10, 10, 1);
        b.extend(hello(10, 13, 1)); // a worker thread's agent: no second mark
        b.extend(hello(20, 20, 2)); // another process (a forked Python child)
        s.feed(&b, 100);
        s.feed(&main_done(10, 10), 200);
        s.feed(&main_done(10, 10), 300); // once per process
        let marks = s.take_marks();
        let got: Vec<(u32, MarkKind, u64)> =
            marks.iter().map(|m| (m.pid, m.kind, m.at_ns)).collect();
        assert_eq!(
            got,
            vec![
                (10, MarkKind::AgentReady, 100),
                (20, MarkKind::AgentReady, 100),
                (10, MarkKind::MainDone, 200),
            ]
        );
        assert!(s.take_marks().is_empty(), "taken once");
        assert_eq!(s.counters.marks, 3);
        // An exec: the new program's agent marks the process again.
        s.feed(&hello(10, 10, 1), 400);
        assert!(!s.has_marks());
        s.forget_process(10);
        s.feed(&hello(10, 10, 2), 500);
        s.feed(&main_done(10, 10), 600);
        let got: Vec<(MarkKind, u64)> = s.take_marks().iter().map(|m| (m.kind, m.at_ns)).collect();
        assert_eq!(
            got,
            vec![(MarkKind::AgentReady, 500), (MarkKind::MainDone, 600)]
        );
        // A MAIN_DONE with bytes missing or over is skipped, never a mark.
        let mut bad = main_done(30, 30);
        bad.pop();
        bad[0] -= 1;
        s.feed(&bad, 700);
        let mut long = main_done(30, 30);
        long[0] += 1;
        long.push(0);
        s.feed(&long, 700);
        assert!(!s.has_marks());
        assert_eq!(s.counters.malformed, 2);
    }

    #[test]
    fn a_site_holds_up_to_36_frames_runtime_ones_first() {
        let mut w = writer();
        let mut s = State::default();
        let mut frames: Vec<(String, String, u32, u32)> = (0..32)
            .map(|i| {
                (
                    format!("internal{i}"),
                    "node:internal/modules/cjs/loader".to_string(),
                    i + 1,
                    3,
                )
            })
            .collect();
        for i in 0..4 {
            frames.push((format!("user{i}"), "/app/main.js".into(), 10 + i, 1));
        }
        let borrowed: Vec<(&str, &str, u32, u32)> = frames
            .iter()
            .map(|(f, file, l, c)| (f.as_str(), file.as_str(), *l, *c))
            .collect();
        let mut b = super::encode::site(10, 10, 1, 1, &borrowed);
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        let id = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        assert_eq!(frames_of(w, id), frames);
        // One frame more is not a site this protocol defines.
        let mut more = borrowed.clone();
        more.push(("x", "/app/main.js", 1, 1));
        s.feed(&super::encode::site(10, 10, 2, 1, &more), 0);
        assert_eq!(s.counters.malformed, 1);
    }

    fn exec_call() -> CallRef {
        CallRef {
            exec: true,
            ..CallRef::default()
        }
    }

    fn fd_call(fd: i32) -> CallRef {
        CallRef {
            fd: Some(fd),
            ..CallRef::default()
        }
    }

    #[test]
    fn a_process_started_inside_a_wrapped_call_is_that_calls_until_it_execs_then_its_execs_are() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        let spawn = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        // child_process.spawn forks on the calling thread, inside the wrapped call.
        s.on_fork(&mut w, 10, 10, 20);
        // The call returns before the child runs.
        s.feed(&exit(10, 10, 0), 0);
        // Between fork and exec (dup2, close, the PATH search): the spawn's.
        assert_eq!(s.lookup(&mut w, 20, 20, CallRef::default()), Some(spawn));
        assert_eq!(s.lookup(&mut w, 20, 20, exec_call()), Some(spawn));
        // The parent exits before its child execs: the child keeps the stack.
        s.on_exit(10);
        s.on_exec(&mut w, 20, 20);
        s.exec_image(20, b"/usr/bin/git");
        assert_eq!(
            s.lookup(&mut w, 20, 20, exec_call()),
            Some(spawn),
            "the exec"
        );
        assert_eq!(
            s.lookup(&mut w, 20, 20, CallRef::default()),
            None,
            "git's own calls are git's"
        );
        // git's own children are not the spawn's: it is not a shell.
        s.on_fork(&mut w, 20, 20, 21);
        assert_eq!(s.lookup(&mut w, 21, 21, exec_call()), None);
        // Gone with the process.
        s.on_exit(20);
        assert_eq!(s.lookup(&mut w, 20, 20, exec_call()), None);
        assert_eq!(s.counters.spawn_hits, 3);
    }

    #[test]
    fn a_fork_outside_a_wrapped_call_or_on_another_thread_is_nobodys() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        s.on_fork(&mut w, 10, 11, 30); // another thread of the process forks
        assert_eq!(s.lookup(&mut w, 30, 30, CallRef::default()), None);
        s.feed(&exit(10, 10, 0), 0);
        s.on_fork(&mut w, 10, 10, 31); // after the call returned
        assert_eq!(s.lookup(&mut w, 31, 31, exec_call()), None);
        // A pid reused by a later fork outside a call: nothing left over.
        s.feed(&enter(10, 10, 10, 1, 0), 0);
        s.on_fork(&mut w, 10, 10, 32);
        s.feed(&exit(10, 10, 0), 0);
        s.on_exit(32);
        s.on_fork(&mut w, 10, 10, 32);
        assert_eq!(s.lookup(&mut w, 32, 32, exec_call()), None);
    }

    #[test]
    fn a_shell_started_by_a_spawn_passes_it_on_to_the_commands_it_runs() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(enter(10, 10, 10, 1, 0));
        s.feed(&b, 0);
        let spawn = s.lookup(&mut w, 10, 10, CallRef::default()).unwrap();
        s.on_fork(&mut w, 10, 10, 40);
        s.feed(&exit(10, 10, 0), 0);
        // exec('git rev-parse'): /bin/sh -c 'git rev-parse'
        s.on_exec(&mut w, 40, 40);
        s.exec_image(40, b"/bin/sh");
        s.on_fork(&mut w, 40, 40, 41);
        assert_eq!(
            s.lookup(&mut w, 41, 41, CallRef::default()),
            None,
            "the shell's own work before the exec is the shell's"
        );
        assert_eq!(s.lookup(&mut w, 41, 41, exec_call()), Some(spawn));
        s.on_exec(&mut w, 41, 41);
        s.exec_image(41, b"/usr/bin/git");
        assert_eq!(s.lookup(&mut w, 41, 41, exec_call()), Some(spawn));
        // A shell that execs the command in its place (dash -c 'git ...'): the same.
        s.on_exec(&mut w, 40, 40);
        s.exec_image(40, b"/usr/bin/git");
        assert_eq!(s.lookup(&mut w, 40, 40, exec_call()), Some(spawn));
        s.on_fork(&mut w, 40, 40, 42);
        assert_eq!(s.lookup(&mut w, 42, 42, exec_call()), None);
    }

    #[test]
    fn an_exec_inside_a_wrapped_call_is_that_calls() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(50, 50, 1, 7);
        b.extend(js_site(50, 50, 2, 9));
        b.extend(enter(50, 51, 50, 1, 0)); // os.execv on thread 51
        b.extend(enter(50, 50, 50, 2, 0)); // another thread's call
        s.feed(&b, 0);
        let execv = s.lookup(&mut w, 50, 51, CallRef::default()).unwrap();
        // Thread 51 exec'd: it is the process's only thread now (tid 50).
        s.on_exec(&mut w, 50, 51);
        s.exec_image(50, b"/usr/bin/env");
        assert_eq!(s.lookup(&mut w, 50, 50, exec_call()), Some(execv));
        assert_eq!(s.lookup(&mut w, 50, 50, CallRef::default()), None);
    }

    #[test]
    fn a_descriptors_site_covers_its_calls_until_it_ends_or_is_closed() {
        let mut w = writer();
        let mut s = State::default();
        let mut b = js_site(10, 10, 1, 12);
        b.extend(js_site(10, 10, 2, 20));
        b.extend(js_site(10, 10, 3, 30));
        // open() returned descriptor 7: its later reads and writes are the open's line.
        b.extend(fd(10, 10, 10, 1, 0, 7));
        // A FileHandle's read queued on descriptor 8 (request 5).
        b.extend(fd(10, 10, 10, 2, 5, 8));
        s.feed(&b, 0);
        let opened = s.lookup(&mut w, 10, 12, fd_call(7)).unwrap();
        assert_eq!(
            s.lookup(&mut w, 10, 10, fd_call(7)),
            Some(opened),
            "any thread, the one that opened it too"
        );
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(9)), None, "another fd");
        assert_eq!(
            s.lookup(&mut w, 11, 12, fd_call(7)),
            None,
            "another process"
        );
        let read = s.lookup(&mut w, 10, 12, fd_call(8)).unwrap();
        assert_ne!(read, opened);
        // A call queued on a descriptor that has a site of its own comes first.
        s.feed(&fd(10, 10, 10, 2, 6, 7), 0);
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(7)), Some(read));
        s.feed(&async_end(10, 10, 6), 0);
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(7)), Some(opened));
        // A wrapped synchronous call comes first.
        s.feed(&enter(10, 10, 10, 3, 0), 0);
        let sync = s.lookup(&mut w, 10, 10, fd_call(7)).unwrap();
        assert_ne!(sync, opened);
        s.feed(&exit(10, 10, 0), 0);
        // The request ends: its descriptor is nobody's; the close ends the other.
        s.feed(&async_end(10, 10, 5), 0);
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(8)), None);
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(7)), Some(opened));
        s.fds_released(10, 7, 7);
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(7)), None);
        // close_range and exec end them too.
        s.feed(&fd(10, 10, 10, 1, 0, 3), 0);
        s.feed(&fd(10, 10, 10, 1, 0, 4), 0);
        s.fds_released(10, 4, u32::MAX);
        assert!(s.lookup(&mut w, 10, 12, fd_call(3)).is_some());
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(4)), None);
        s.forget_process(10);
        assert_eq!(s.lookup(&mut w, 10, 12, fd_call(3)), None);
        assert!(s.fds.is_empty() && s.fd_order.is_empty());
        // A descriptor number past i32 is not one.
        s.feed(&fd(10, 10, 10, 1, 0, u32::MAX), 0);
        assert_eq!(s.counters.malformed, 1);
    }

    #[test]
    fn descriptor_sites_are_bounded_per_process() {
        let mut w = writer();
        let mut s = State::default();
        s.feed(&js_site(10, 10, 1, 12), 0);
        for fd_no in 0..(MAX_FDS as u32 + 10) {
            s.feed(&fd(10, 10, 10, 1, 0, fd_no), 0);
        }
        assert_eq!(s.fds.len(), MAX_FDS);
        assert_eq!(
            s.lookup(&mut w, 10, 10, fd_call(0)),
            None,
            "the oldest went"
        );
        assert!(s
            .lookup(&mut w, 10, 10, fd_call(MAX_FDS as i32 + 9))
            .is_some());
    }

    #[test]
    fn dropped_counts_add_up() {
        let mut s = State::default();
        s.feed(&dropped(1, 1, 3), 0);
        s.feed(&dropped(2, 2, 4), 0);
        assert_eq!(s.counters.dropped_by_agents, 7);
    }
}
