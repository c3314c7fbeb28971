//! The importer: turns parsed strace lines into dejavu records. It joins
//! `<unfinished ...>`/`<... resumed>` halves, follows the process tree (clone, fork,
//! exec, exit), keeps per-process working directories and descriptor tables so that
//! paths come out absolute even without `-y`, and counts everything it cannot use.

use crate::args::{self, StrArg};
use crate::consts::{self, Table};
use crate::line::{self, Body, Call, Ret, Timestamp};
use crate::paths;
use crate::sink::Sink;
use crate::{ImportError, ImportReport, Unparsed};
use dejavu_trace::{
    ev, mask, payload, stat_known, Exec, Exit, ExitStatus, FileStat, Lost, LostReason, Record,
    Signal, Spawn, StrId, Sys, Syscall,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::rc::Rc;

const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// The errno recorded for a failure whose errno name strace printed but this importer
/// does not know: the largest errno the kernel can return, so `is_error` still holds.
pub const UNKNOWN_ERRNO: i64 = 4095;

/// Turns a file's timestamps into a monotonic-by-day key: `-tt` times of day that jump
/// back by more than 12 hours crossed midnight; `-r` deltas are summed.
#[derive(Debug, Clone, Default)]
pub struct TsUnroller {
    last_tod: Option<u64>,
    day: u64,
    last: Option<u64>,
}

impl TsUnroller {
    /// An unroller whose times of day start on day `day` (0 = the day the trace began).
    pub fn starting_on_day(day: u64) -> Self {
        TsUnroller {
            day,
            ..Default::default()
        }
    }

    /// The absolute key (ns) of a timestamp.
    pub fn key(&mut self, ts: Timestamp) -> u64 {
        let k = match ts {
            Timestamp::TimeOfDay(t) => {
                if let Some(last) = self.last_tod {
                    if t.saturating_add(DAY_NS / 2) < last {
                        self.day += 1;
                    }
                }
                self.last_tod = Some(t);
                self.day.saturating_mul(DAY_NS).saturating_add(t)
            }
            Timestamp::Epoch(e) => e,
            Timestamp::Relative(d) => self.last.unwrap_or(0).saturating_add(d),
        };
        self.last = Some(k);
        k
    }
}

/// What kind of object a descriptor refers to, as far as payload recording cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FdKind {
    File,
    Pipe,
    Socket,
    Tty,
    Null,
    Other,
}

impl FdKind {
    /// What the payload rule (`dejavu_trace::payload`) sees of this kind.
    fn payload_target(self) -> payload::Target {
        match self {
            FdKind::File => payload::Target::File,
            FdKind::Pipe | FdKind::Socket | FdKind::Tty | FdKind::Null => payload::Target::Stream,
            FdKind::Other => payload::Target::Other,
        }
    }

    fn of_path(p: &[u8]) -> FdKind {
        if p.starts_with(b"pipe:") {
            FdKind::Pipe
        } else if p.starts_with(b"socket:") {
            FdKind::Socket
        } else if p == b"/dev/null" {
            FdKind::Null
        } else if p.starts_with(b"/dev/pts/")
            || p.starts_with(b"/dev/tty")
            || p == b"/dev/console"
            || p == b"/dev/ptmx"
        {
            FdKind::Tty
        } else if p.starts_with(b"anon_inode:") {
            FdKind::Other
        } else {
            FdKind::File
        }
    }
}

#[derive(Debug, Clone)]
struct FdInfo {
    path: Option<Rc<[u8]>>,
    kind: FdKind,
    append: bool,
    cloexec: bool,
    /// (dev, ino) learned from an fstat of this descriptor with `-v`.
    ident: Option<(u64, u64)>,
    /// `path`'s string id, once interned (saves hashing the path on every call).
    sid: Option<StrId>,
}

impl FdInfo {
    fn new(path: Option<Rc<[u8]>>, kind: FdKind) -> Self {
        FdInfo {
            path,
            kind,
            append: false,
            cloexec: false,
            ident: None,
            sid: None,
        }
    }
}

/// Per-process state: working directory and descriptor table.
#[derive(Debug, Clone, Default)]
struct Proc {
    cwd: Option<Rc<[u8]>>,
    fds: FxHashMap<i32, FdInfo>,
}

#[derive(Debug)]
struct Pending {
    name: String,
    args: Vec<u8>,
    ts: u64,
}

#[derive(Debug)]
struct Task {
    tgid: u32,
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Source {
    name: String,
    /// The task a line without a pid column belongs to (`-ff` file suffix, or the pid
    /// found by scanning the file), when known.
    implicit_pid: Option<u32>,
    /// Lines of this source carried a pid column (`[pid N]` when strace wrote to stderr).
    saw_pid: bool,
    /// The first part of a line that strace interrupted with a message of its own
    /// (stderr output: `clone(...strace: Process 12 attached`); the next line goes on.
    carry: Option<(u64, Vec<u8>, Option<u64>)>,
    unroll: TsUnroller,
}

/// What [`Importer::finish`] hands back.
#[derive(Debug)]
pub struct Finished<S> {
    /// The sink, with every record pushed.
    pub sink: S,
    /// What was imported, ignored and not understood.
    pub report: ImportReport,
    /// How the first process ended, when its exit was in the log.
    pub exit: Option<ExitStatus>,
    /// ts of the last line, ns.
    pub end_ts: u64,
}

/// Identifies one input of an [`Importer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceId(pub usize);

/// A decoded descriptor argument.
struct FdRef {
    fd: i32,
    path: Option<Rc<[u8]>>,
    kind: FdKind,
    known: bool,
    sid: Option<StrId>,
}

/// Turns strace lines from one or more inputs into records on a [`Sink`].
#[derive(Debug)]
pub struct Importer<S: Sink> {
    sink: S,
    payload_bytes: u32,
    initial_cwd: Option<Rc<[u8]>>,
    sources: Vec<Source>,
    tasks: FxHashMap<u32, Task>,
    procs: FxHashMap<u32, Proc>,
    early_spawned: FxHashSet<u32>,
    origin: Option<u64>,
    last_ts: u64,
    root: Option<u32>,
    root_exit: Option<ExitStatus>,
    report: ImportReport,
    /// Unnamed files (O_TMPFILE) named without an annotation so far (`new_fd`).
    tmpfiles: u64,
}

fn is_spawn_call(name: &str) -> bool {
    matches!(name, "clone" | "clone2" | "clone3" | "fork" | "vfork")
}

impl<S: Sink> Importer<S> {
    /// An importer writing to `sink`. `cwd` is the initial working directory of the first
    /// process (None: unknown); `payload_bytes` limits write payloads (0: none).
    pub fn new(sink: S, cwd: Option<&[u8]>, payload_bytes: u32) -> Self {
        Importer {
            sink,
            payload_bytes,
            initial_cwd: cwd.map(|c| Rc::from(paths::normalize(c))),
            sources: Vec::new(),
            tasks: FxHashMap::default(),
            procs: FxHashMap::default(),
            early_spawned: FxHashSet::default(),
            origin: None,
            last_ts: 0,
            root: None,
            root_exit: None,
            tmpfiles: 0,
            report: ImportReport::default(),
        }
    }

    /// Registers an input. `implicit_pid` is the task of lines without a pid column
    /// (the pid suffix of a `-ff` file), when known.
    pub fn add_source(&mut self, name: &str, implicit_pid: Option<u32>) -> SourceId {
        self.sources.push(Source {
            name: name.to_string(),
            implicit_pid,
            saw_pid: false,
            carry: None,
            unroll: TsUnroller::default(),
        });
        SourceId(self.sources.len() - 1)
    }

    /// Starts `src`'s times of day on day `day` (for merged `-ff` files whose first line
    /// is already past midnight).
    pub fn set_start_day(&mut self, src: SourceId, day: u64) {
        if let Some(s) = self.sources.get_mut(src.0) {
            s.unroll = TsUnroller::starting_on_day(day);
        }
    }

    /// Sets the time origin (ns key of ts 0) instead of taking the first timestamp.
    pub fn set_origin(&mut self, key: u64) {
        self.origin = Some(key);
    }

    /// What has been counted so far.
    pub fn report(&self) -> &ImportReport {
        &self.report
    }

    /// Imports one line of `src` (1-based `lineno`, no newline).
    pub fn feed(&mut self, src: SourceId, lineno: u64, text: &[u8]) -> Result<(), ImportError> {
        let (_, ts) = line::parse_prefix(text);
        let key = match (ts, self.sources.get_mut(src.0)) {
            (Some(ts), Some(s)) => Some(s.unroll.key(ts)),
            _ => None,
        };
        self.feed_keyed(src, lineno, text, key)
    }

    /// [`Importer::feed`] with the line's absolute time key already computed (by a
    /// merger that needed it to order the inputs).
    pub fn feed_keyed(
        &mut self,
        src: SourceId,
        lineno: u64,
        text: &[u8],
        key: Option<u64>,
    ) -> Result<(), ImportError> {
        self.report.lines += 1;
        let carried = self.sources.get_mut(src.0).and_then(|s| s.carry.take());
        if let Some((first_lineno, mut joined, first_key)) = carried {
            joined.extend_from_slice(text);
            self.report.lines -= 1;
            return self.feed_keyed(src, first_lineno, &joined, first_key.or(key));
        }
        // strace writing to stderr prints its own messages in the middle of a line.
        let interrupted = text.ends_with(b"attached") || text.ends_with(b"detached");
        if let Some(p) = interrupted
            .then(|| args::find(text, b"strace: Process "))
            .flatten()
            .filter(|&p| p > 0)
        {
            if let Ok(line::Line {
                body: body @ (Body::Attached(_) | Body::Detached(_)),
                ..
            }) = line::parse_line_bytes(&text[p..])
            {
                self.report.info_lines += 1;
                if let Body::Attached(pid) = body {
                    self.touch_task(pid, self.last_ts)?;
                }
                if let Some(s) = self.sources.get_mut(src.0) {
                    s.carry = Some((lineno, text[..p].to_vec(), key));
                }
                return Ok(());
            }
        }
        if let Some(k) = key {
            let origin = *self.origin.get_or_insert(k);
            self.last_ts = k.saturating_sub(origin);
        }
        let ts = self.last_ts;
        let parsed = match line::parse_line_bytes(text) {
            Ok(l) => l,
            Err(e) => {
                let (pid, _) = line::parse_prefix(text);
                let tid = self.line_tid(src, pid);
                return self.unparsed(src, lineno, text, &e.to_string(), ts, tid);
            }
        };
        if parsed.pid.is_some() {
            if let Some(s) = self.sources.get_mut(src.0) {
                s.saw_pid = true;
            }
        }
        let tid = self.line_tid(src, parsed.pid);
        match parsed.body {
            Body::Blank => {}
            Body::Summary => self.report.summary_lines += 1,
            Body::Info | Body::Detached(_) => self.report.info_lines += 1,
            Body::Attached(pid) => {
                self.report.info_lines += 1;
                self.touch_task(pid, ts)?;
            }
            Body::Call(c) => {
                self.touch_task(tid, ts)?;
                self.call(tid, ts, &c)?;
            }
            Body::Unfinished { name, args } => {
                self.touch_task(tid, ts)?;
                let old = self.tasks.get_mut(&tid).and_then(|t| t.pending.take());
                if let Some(old) = old {
                    self.flush_pending(tid, old)?;
                }
                if let Some(t) = self.tasks.get_mut(&tid) {
                    t.pending = Some(Pending {
                        name: name.to_string(),
                        args: args.to_vec(),
                        ts,
                    });
                }
            }
            Body::Resumed { name, tail, dur_ns } => {
                self.touch_task(tid, ts)?;
                self.resumed(src, lineno, text, tid, ts, name, tail, dur_ns)?;
            }
            Body::Signal(signal) => {
                self.touch_task(tid, ts)?;
                let pid = self.tgid(tid);
                self.push(Record::Signal(Signal {
                    ts,
                    pid,
                    tid,
                    signal,
                }))?;
            }
            Body::Exited(code) => self.exit(tid, ts, ExitStatus::Code(code))?,
            Body::Killed { signal, core } => {
                self.exit(tid, ts, ExitStatus::Signal { signal, core })?
            }
            Body::Superseded(old) => {
                // Thread `old` exec'd; its unfinished execve resumes under this pid.
                self.touch_task(tid, ts)?;
                let pending = self.tasks.remove(&old).and_then(|t| t.pending);
                let stale = self.tasks.get_mut(&tid).and_then(|t| t.pending.take());
                if let Some(p) = stale {
                    self.flush_pending(tid, p)?;
                }
                if let Some(t) = self.tasks.get_mut(&tid) {
                    t.pending = pending;
                }
            }
        }
        Ok(())
    }

    /// Ends the import: calls still waiting for their `resumed` half are written as
    /// unfinished. Returns the sink, the report, and what the end block needs.
    pub fn finish(mut self) -> Result<Finished<S>, ImportError> {
        // A line strace interrupted with a message and never continued.
        for i in 0..self.sources.len() {
            if let Some((lineno, text, key)) = self.sources[i].carry.take() {
                self.report.lines -= 1;
                self.feed_keyed(SourceId(i), lineno, &text, key)?;
            }
        }
        let mut tids: Vec<u32> = self.tasks.keys().copied().collect();
        tids.sort_unstable();
        for tid in tids {
            if let Some(p) = self.tasks.get_mut(&tid).and_then(|t| t.pending.take()) {
                self.flush_pending(tid, p)?;
            }
        }
        Ok(Finished {
            sink: self.sink,
            report: self.report,
            exit: self.root_exit,
            end_ts: self.last_ts,
        })
    }

    fn push(&mut self, rec: Record) -> Result<(), ImportError> {
        self.report.records += 1;
        if let Record::Syscall(_) = rec {
            self.report.syscalls += 1;
        }
        self.sink.push(&rec)
    }

    fn unparsed(
        &mut self,
        src: SourceId,
        lineno: u64,
        text: &[u8],
        reason: &str,
        ts: u64,
        tid: u32,
    ) -> Result<(), ImportError> {
        const MAX_TEXT: usize = 512;
        let shown = &text[..text.len().min(MAX_TEXT)];
        self.report.unparsed.push(Unparsed {
            file: self
                .sources
                .get(src.0)
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            line: lineno,
            text: String::from_utf8_lossy(shown).into_owned(),
            reason: reason.to_string(),
        });
        let pid = if tid == 0 { 0 } else { self.tgid(tid) };
        self.push(Record::Lost(Lost {
            ts,
            pid,
            count: 1,
            reason: LostReason::Unparsed,
        }))
    }

    /// The task a line belongs to.
    fn line_tid(&self, src: SourceId, pid: Option<u32>) -> u32 {
        if let Some(p) = pid {
            return p;
        }
        let Some(s) = self.sources.get(src.0) else {
            return 0;
        };
        // strace writing `-f` output to stderr omits `[pid N]` while only one task is
        // traced: the line belongs to that task.
        if s.saw_pid && self.tasks.len() == 1 {
            if let Some(&tid) = self.tasks.keys().next() {
                return tid;
            }
        }
        s.implicit_pid.unwrap_or(0)
    }

    fn tgid(&self, tid: u32) -> u32 {
        self.tasks.get(&tid).map_or(tid, |t| t.tgid)
    }

    fn proc_mut(&mut self, tgid: u32) -> &mut Proc {
        self.procs.entry(tgid).or_default()
    }

    /// Registers a task the first time it shows up. A task nobody spawned (yet) while
    /// exactly one other task is inside clone/fork is that call's child: strace printed
    /// the parent's call as unfinished and the child ran first.
    fn touch_task(&mut self, tid: u32, ts: u64) -> Result<(), ImportError> {
        if self.tasks.contains_key(&tid) {
            return Ok(());
        }
        if self.root.is_none() {
            self.root = Some(tid);
            self.tasks.insert(
                tid,
                Task {
                    tgid: tid,
                    pending: None,
                },
            );
            let cwd = self.initial_cwd.clone();
            self.proc_mut(tid).cwd = cwd;
            return Ok(());
        }
        let mut cloning = self.tasks.iter().filter_map(|(&t, task)| {
            let p = task.pending.as_ref()?;
            is_spawn_call(&p.name).then(|| (t, p.name.clone(), p.args.clone()))
        });
        let parent = match (cloning.next(), cloning.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        };
        match parent {
            Some((ptid, name, args)) => {
                let flags = spawn_flags(&name, &args, &mut self.report.unknown_symbols);
                self.spawn(ptid, tid, flags, ts)?;
                self.early_spawned.insert(tid);
            }
            None => {
                self.tasks.insert(
                    tid,
                    Task {
                        tgid: tid,
                        pending: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Records a new task `child` created by `parent_tid` with `flags`.
    fn spawn(
        &mut self,
        parent_tid: u32,
        child: u32,
        flags: u64,
        ts: u64,
    ) -> Result<(), ImportError> {
        let parent_pid = self.tgid(parent_tid);
        let thread = flags & consts::CLONE_THREAD != 0;
        let pid = if thread { parent_pid } else { child };
        self.tasks.insert(
            child,
            Task {
                tgid: pid,
                pending: None,
            },
        );
        if !thread {
            let copy = self.procs.get(&parent_pid).cloned().unwrap_or_default();
            self.procs.insert(child, copy);
        }
        self.push(Record::Spawn(Spawn {
            ts,
            parent_pid,
            parent_tid,
            pid,
            tid: child,
            clone_flags: flags,
        }))
    }

    fn exit(&mut self, tid: u32, ts: u64, status: ExitStatus) -> Result<(), ImportError> {
        self.touch_task(tid, ts)?;
        if let Some(p) = self.tasks.get_mut(&tid).and_then(|t| t.pending.take()) {
            self.flush_pending(tid, p)?;
        }
        let pid = self.tgid(tid);
        self.push(Record::Exit(Exit {
            ts,
            pid,
            tid,
            status,
        }))?;
        self.tasks.remove(&tid);
        // The process's state goes with its last task (pids are reused).
        if !self.tasks.values().any(|t| t.tgid == pid) {
            self.procs.remove(&pid);
        }
        if Some(tid) == self.root {
            self.root_exit = Some(status);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn resumed(
        &mut self,
        src: SourceId,
        lineno: u64,
        text: &[u8],
        tid: u32,
        ts: u64,
        name: &str,
        tail: &[u8],
        dur_ns: Option<u64>,
    ) -> Result<(), ImportError> {
        let pending = self.tasks.get_mut(&tid).and_then(|t| t.pending.take());
        match pending {
            Some(p) if p.name == name => {
                let mut joined = p.args;
                joined.push(b' ');
                joined.extend_from_slice(tail);
                match line::call_rest(name, &joined, dur_ns) {
                    Ok(c) => self.call(tid, p.ts, &c),
                    Err(e) => self.unparsed(src, lineno, text, &e.to_string(), ts, tid),
                }
            }
            other => {
                if let Some(p) = other {
                    self.flush_pending(tid, p)?;
                }
                self.report.unmatched_resumed += 1;
                // The call happened; its arguments are gone. Count it, undecoded.
                let Ok(c) = line::call_rest(name, tail, dur_ns) else {
                    return self.unparsed(src, lineno, text, "unmatched resumed line", ts, tid);
                };
                match Sys::from_name(name) {
                    Some(sys) => {
                        let mut s = Syscall::new(ts, self.tgid(tid), tid, sys);
                        set_result(&mut s, &c, &mut self.report.unknown_errno);
                        s.ev |= ev::UNDECODED;
                        self.push(Record::Syscall(s))
                    }
                    None => {
                        self.ignore(name);
                        Ok(())
                    }
                }
            }
        }
    }

    /// Writes a call whose exit strace never printed.
    fn flush_pending(&mut self, tid: u32, p: Pending) -> Result<(), ImportError> {
        self.report.unfinished_never_resumed += 1;
        let c = Call {
            name: &p.name,
            args: &p.args,
            ret: Ret::NoReturn,
            dur_ns: None,
        };
        self.call(tid, p.ts, &c)
    }

    fn ignore(&mut self, name: &str) {
        match self.report.ignored_syscalls.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.report.ignored_syscalls.insert(name.to_string(), 1);
            }
        }
    }

    /// One complete call.
    fn call(&mut self, tid: u32, ts: u64, c: &Call<'_>) -> Result<(), ImportError> {
        let Some(sys) = Sys::from_name(c.name) else {
            if is_spawn_call(c.name) {
                if let Ret::Val { val, .. } = c.ret {
                    if val > 0 && val <= u32::MAX as i64 {
                        self.spawned(tid, ts, c, val as u32)?;
                    }
                }
            }
            self.ignore(c.name);
            return Ok(());
        };
        let mut s = Syscall::new(ts, self.tgid(tid), tid, sys);
        set_result(&mut s, c, &mut self.report.unknown_errno);
        let mut a: Vec<&[u8]> = Vec::with_capacity(6);
        args::split_top(c.args, &mut a);
        // dejavu traces file-backed mappings only, as the live backends do: a descriptor,
        // and not MAP_ANONYMOUS (which makes the kernel ignore the descriptor).
        if sys == Sys::Mmap
            && (a.get(4).and_then(|f| args::fd(f)).is_none_or(|f| f.fd < 0)
                || a.get(3).is_some_and(|f| {
                    args::flags(f, &[consts::MAP_FLAGS], &mut 0) & consts::MAP_ANONYMOUS != 0
                }))
        {
            self.ignore(c.name);
            return Ok(());
        }
        self.decode(&mut s, &a, c)?;
        self.push(Record::Syscall(s))?;
        if matches!(sys, Sys::Execve | Sys::Execveat) && s.ret == 0 && s.ev & ev::UNFINISHED == 0 {
            self.exec(&s, &a)?;
        }
        Ok(())
    }

    /// A clone-family call returned `child` in the parent.
    fn spawned(&mut self, tid: u32, ts: u64, c: &Call<'_>, child: u32) -> Result<(), ImportError> {
        if self.early_spawned.remove(&child) {
            return Ok(());
        }
        let flags = spawn_flags(c.name, c.args, &mut self.report.unknown_symbols);
        self.spawn(tid, child, flags, ts)
    }

    fn exec(&mut self, s: &Syscall, a: &[&[u8]]) -> Result<(), ImportError> {
        let argv_arg = if s.sys == Sys::Execveat {
            a.get(2)
        } else {
            a.get(1)
        };
        let (argv, _) = argv_bytes(argv_arg.copied());
        let argv = self.sink.intern(&argv);
        let exe = match s.path {
            Some(p) => p,
            None => self.sink.intern(b""),
        };
        let pid = s.pid;
        // The calling thread becomes the process leader; the other threads are gone, and
        // close-on-exec descriptors are closed.
        let mut others: Vec<u32> = self
            .tasks
            .iter()
            .filter(|(&t, task)| task.tgid == pid && t != pid)
            .map(|(&t, _)| t)
            .collect();
        others.sort_unstable();
        for t in others {
            // Their calls in progress end with the exec: written as unfinished.
            if let Some(p) = self.tasks.get_mut(&t).and_then(|x| x.pending.take()) {
                self.flush_pending(t, p)?;
            }
            self.tasks.remove(&t);
        }
        self.tasks
            .entry(pid)
            .or_insert(Task {
                tgid: pid,
                pending: None,
            })
            .tgid = pid;
        self.proc_mut(pid).fds.retain(|_, f| !f.cloexec);
        self.push(Record::Exec(Exec {
            ts: s.ts.saturating_add(s.dur),
            pid,
            tid: s.tid,
            exe,
            argv,
        }))
    }

    // ---- argument decoding -------------------------------------------------------

    fn intern_opt(&mut self, b: Option<&[u8]>) -> Option<dejavu_trace::StrId> {
        b.map(|b| self.sink.intern(b))
    }

    /// Decodes a descriptor argument against the annotation or the descriptor table, and
    /// learns the annotation into the table.
    fn fd_ref(&mut self, pid: u32, a: Option<&[u8]>) -> Option<FdRef> {
        let f = args::fd(a?)?;
        let fd = i32::try_from(f.fd).ok()?;
        if let Some(ann) = f.ann {
            let (path, kind) = annotation_path(ann, f.deleted);
            if fd == consts::AT_FDCWD as i32 {
                let path: Rc<[u8]> = Rc::from(path);
                self.proc_mut(pid).cwd = Some(path.clone());
                return Some(FdRef {
                    fd,
                    path: Some(path),
                    kind: FdKind::File,
                    known: true,
                    sid: None,
                });
            }
            let proc = self.proc_mut(pid);
            let entry = proc
                .fds
                .entry(fd)
                .or_insert_with(|| FdInfo::new(None, kind));
            // `-yy` names a connected socket by its addresses, not its inode: keep the
            // inode name learned when the socket was created.
            let verbatim_socket = kind == FdKind::Socket && !path.starts_with(b"socket:[");
            let same = entry.path.as_deref() == Some(path.as_slice());
            let keep_inode_name =
                verbatim_socket && entry.kind == FdKind::Socket && entry.path.is_some();
            if !same && !keep_inode_name {
                entry.path = Some(Rc::from(path));
                entry.kind = kind;
                entry.ident = None;
                entry.sid = None;
            }
            return Some(FdRef {
                fd,
                path: entry.path.clone(),
                kind: entry.kind,
                known: true,
                sid: entry.sid,
            });
        }
        if fd == consts::AT_FDCWD as i32 {
            let cwd = self.procs.get(&pid).and_then(|p| p.cwd.clone());
            let known = cwd.is_some();
            return Some(FdRef {
                fd,
                path: cwd,
                kind: FdKind::File,
                known,
                sid: None,
            });
        }
        match self.procs.get(&pid).and_then(|p| p.fds.get(&fd)) {
            Some(e) => Some(FdRef {
                fd,
                path: e.path.clone(),
                kind: e.kind,
                known: e.path.is_some(),
                sid: e.sid,
            }),
            None => Some(FdRef {
                fd,
                path: None,
                kind: FdKind::Other,
                known: false,
                sid: None,
            }),
        }
    }

    /// Fills `fd` and the fd path of `s` from argument `a`.
    fn fd_field(&mut self, s: &mut Syscall, a: Option<&[u8]>) -> Option<FdRef> {
        let r = self.fd_ref(s.pid, a)?;
        s.fd = Some(r.fd);
        self.set_fd_path(s, &r);
        if let Some((dev, ino)) = self
            .procs
            .get(&s.pid)
            .and_then(|p| p.fds.get(&r.fd))
            .and_then(|e| e.ident)
        {
            let st = FileStat {
                known: stat_known::IDENTITY,
                dev,
                ino,
                ..Default::default()
            };
            s.stat = Some(self.sink.intern_stat(&st));
        }
        Some(r)
    }

    fn set_fd_path(&mut self, s: &mut Syscall, r: &FdRef) {
        match (&r.path, r.known) {
            (Some(p), true) => {
                let id = match r.sid {
                    Some(id) => id,
                    None => {
                        let id = self.sink.intern(p);
                        let entry = self
                            .procs
                            .get_mut(&s.pid)
                            .and_then(|pr| pr.fds.get_mut(&r.fd));
                        if let Some(e) = entry {
                            if e.path.as_ref().is_some_and(|ep| Rc::ptr_eq(ep, p)) {
                                e.sid = Some(id);
                            }
                        }
                        id
                    }
                };
                s.path = Some(id);
                s.ev |= ev::PATH_FROM_FD;
            }
            _ => {
                s.ev |= ev::FD_UNKNOWN;
                self.report.fd_unknown += 1;
            }
        }
    }

    /// Resolves a path argument against `dirfd` (an `*at` call) or the cwd. Returns the
    /// resolved bytes; `None` for NULL, an unreadable address, or a non-string.
    fn path_of(
        &mut self,
        s: &mut Syscall,
        dirfd: Option<&[u8]>,
        a: Option<&[u8]>,
    ) -> Option<Vec<u8>> {
        let raw = match args::string(a?)? {
            StrArg::Str { bytes, .. } => bytes,
            StrArg::Null => return None,
            StrArg::Pointer => {
                s.ev |= ev::PATH_UNREADABLE;
                return None;
            }
        };
        if raw.first() == Some(&b'/') {
            return Some(if paths::is_normal(&raw) {
                raw
            } else {
                paths::normalize(&raw)
            });
        }
        let base = match dirfd {
            Some(d) => self
                .fd_ref(s.pid, Some(d))
                .and_then(|r| if r.known { r.path } else { None }),
            None => self.procs.get(&s.pid).and_then(|p| p.cwd.clone()),
        };
        match base {
            Some(b) if b.first() == Some(&b'/') => Some(paths::join(&b, &raw)),
            _ => {
                self.report.relative_paths_unresolved += 1;
                Some(paths::normalize(&raw))
            }
        }
    }

    /// `path_of` into `s.path`.
    fn path_field(
        &mut self,
        s: &mut Syscall,
        dirfd: Option<&[u8]>,
        a: Option<&[u8]>,
    ) -> Option<Vec<u8>> {
        let p = self.path_of(s, dirfd, a)?;
        s.path = Some(self.sink.intern(&p));
        Some(p)
    }

    /// `path_of` into `s.path2`.
    fn path2_field(&mut self, s: &mut Syscall, dirfd: Option<&[u8]>, a: Option<&[u8]>) {
        if let Some(p) = self.path_of(s, dirfd, a) {
            s.path2 = Some(self.sink.intern(&p));
        }
    }

    /// For `*at` calls with `AT_EMPTY_PATH` (or a NULL path for utimensat): the call is
    /// about `dirfd` itself.
    fn empty_path_means_fd(
        &mut self,
        s: &mut Syscall,
        dirfd: Option<&[u8]>,
        path: Option<&[u8]>,
        flags: u64,
    ) -> bool {
        let empty = match path.and_then(args::string) {
            Some(StrArg::Str { bytes, .. }) => {
                bytes.is_empty() && flags & consts::AT_EMPTY_PATH != 0
            }
            Some(StrArg::Null) => s.sys == Sys::Utimensat,
            _ => false,
        };
        if empty {
            self.fd_field(s, dirfd);
        }
        empty
    }

    fn flags_of(&mut self, a: Option<&[u8]>, tables: &[Table]) -> u64 {
        a.map_or(0, |a| {
            args::flags(a, tables, &mut self.report.unknown_symbols)
        })
    }

    fn mode_of(&mut self, a: Option<&[u8]>) -> u32 {
        a.map_or(0, |a| args::mode(a, &mut self.report.unknown_symbols))
    }

    fn stat_field(&mut self, s: &mut Syscall, a: Option<&[u8]>, statx: bool) {
        if s.ret != 0 || s.ev & ev::UNFINISHED != 0 {
            return;
        }
        let Some(a) = a else { return };
        let Some(st) = parse_stat(a, statx, &mut self.report.unknown_symbols) else {
            return;
        };
        if st.known & stat_known::IDENTITY == 0
            || st.known & stat_known::MTIME == 0
            || st.known & stat_known::CTIME == 0
        {
            s.ev |= ev::STAT_PARTIAL;
        }
        s.stat = Some(self.sink.intern_stat(&st));
        // An fstat tells the identity of the open file for later calls on it.
        if s.ev & ev::PATH_FROM_FD != 0 && st.known & stat_known::IDENTITY != 0 {
            if let Some(fd) = s.fd {
                if let Some(e) = self.procs.get_mut(&s.pid).and_then(|p| p.fds.get_mut(&fd)) {
                    e.ident = Some((st.dev, st.ino));
                }
            }
        }
    }

    /// A write's bytes as strace printed them (`truncated`: it printed fewer than the
    /// call was given): a successful write's fingerprint from what it shows of the bytes
    /// written (strace's `-s` limits it; at most `FINGERPRINT_BYTES`), and the payload
    /// where `dejavu_trace::payload` keeps one.
    fn written(&mut self, s: &mut Syscall, mut data: Vec<u8>, truncated: bool, r: &FdRef) {
        if s.ret > 0 && s.ev & ev::UNFINISHED == 0 {
            // Only what the call wrote (a short write printed its whole buffer).
            data.truncate(s.ret as usize);
            s.fingerprint = Some(mask::fingerprint(&data));
        }
        let append = self
            .procs
            .get(&s.pid)
            .and_then(|p| p.fds.get(&r.fd))
            .is_some_and(|e| e.append);
        let path = r.path.as_deref().filter(|_| r.known).unwrap_or_default();
        if self.payload_bytes == 0
            || !payload::keeps_payload(r.fd, r.kind.payload_target(), append, path)
        {
            return;
        }
        let limit = self.payload_bytes as usize;
        let cut = data.len() > limit;
        let data = &data[..data.len().min(limit)];
        if cut || truncated {
            s.ev |= ev::PAYLOAD_TRUNCATED;
        }
        s.payload = Some(self.sink.intern(data));
    }

    fn new_fd(
        &mut self,
        pid: u32,
        fd: i64,
        ann: Option<&[u8]>,
        fallback: Option<Vec<u8>>,
        kind: FdKind,
        flags: u64,
    ) {
        let Ok(fd) = i32::try_from(fd) else { return };
        let (path, kind) = match ann {
            Some(a) => {
                let (p, k) = annotation_path(a, false);
                (Some(p), k)
            }
            None => match fallback {
                Some(dir) if flags & consts::O_TMPFILE_BIT != 0 => {
                    // A file made without a name in directory `dir`: not the directory's
                    // (as the backends name it, docs/trace-format.md "Paths"; with -y,
                    // strace's annotation gives /proc's name, `DIR/#INODE (deleted)`).
                    self.tmpfiles += 1;
                    let p = dejavu_trace::unnamed_file_path(&dir, None, self.tmpfiles);
                    (Some(p), FdKind::File)
                }
                Some(p) => {
                    let k = if kind == FdKind::File {
                        FdKind::of_path(&p)
                    } else {
                        kind
                    };
                    (Some(p), k)
                }
                None => (None, kind),
            },
        };
        let mut info = FdInfo::new(path.map(Rc::from), kind);
        info.append = flags & consts::O_APPEND != 0;
        info.cloexec = flags & consts::O_CLOEXEC != 0;
        self.proc_mut(pid).fds.insert(fd, info);
    }

    fn dup_fd(&mut self, pid: u32, from: i32, to: i64, cloexec: bool, ann: Option<&[u8]>) {
        let Ok(to) = i32::try_from(to) else { return };
        let proc = self.proc_mut(pid);
        let mut info = match proc.fds.get(&from) {
            Some(e) => e.clone(),
            None => match ann {
                Some(a) => {
                    let (p, k) = annotation_path(a, false);
                    FdInfo::new(Some(Rc::from(p)), k)
                }
                None => FdInfo::new(None, FdKind::Other),
            },
        };
        info.cloexec = cloexec;
        proc.fds.insert(to, info);
    }

    /// Fills the fields of `s` from the arguments, per docs/trace-format.md "Syscall
    /// fields by call", and applies the call's effect on the descriptor table and cwd.
    fn decode(&mut self, s: &mut Syscall, a: &[&[u8]], c: &Call<'_>) -> Result<(), ImportError> {
        use Sys::*;
        let arg = |i: usize| a.get(i).copied();
        let ok = s.ret >= 0 && s.ev & ev::UNFINISHED == 0;
        let (ret_val, ret_ann) = match c.ret {
            Ret::Val { val, ann } => (val, ann),
            _ => (-1, None),
        };
        let pid = s.pid;
        match s.sys {
            Open | Openat | Openat2 | Creat => {
                let (dirfd, p, fl, md) = match s.sys {
                    Open => (None, arg(0), arg(1), arg(2)),
                    Creat => (None, arg(0), None, arg(1)),
                    _ => (arg(0), arg(1), arg(2), arg(3)),
                };
                let resolved = self.path_field(s, dirfd, p);
                if s.sys == Openat2 {
                    if let Some(how) = fl {
                        let f = args::fields(how);
                        s.flags = self.flags_of(args::field(&f, b"flags"), &[consts::OPEN_FLAGS]);
                        s.mode = self.mode_of(args::field(&f, b"mode"));
                        s.aux =
                            self.flags_of(args::field(&f, b"resolve"), &[consts::RESOLVE_FLAGS]);
                    }
                } else if s.sys == Creat {
                    s.flags = consts::CREAT_FLAGS;
                    s.mode = self.mode_of(md);
                } else {
                    s.flags = self.flags_of(fl, &[consts::OPEN_FLAGS]);
                    s.mode = self.mode_of(md);
                }
                if ok {
                    self.new_fd(pid, ret_val, ret_ann, resolved, FdKind::File, s.flags);
                }
            }
            Close => {
                let r = self.fd_field(s, arg(0));
                if let Some(r) = r {
                    if s.ret != -9 && s.ev & ev::UNFINISHED == 0 {
                        self.proc_mut(pid).fds.remove(&r.fd);
                    }
                }
            }
            CloseRange => {
                let first = arg(0).and_then(args::int).unwrap_or(0);
                let last = arg(1).and_then(args::int).unwrap_or(0) as u64 & u32::MAX as u64;
                s.fd = i32::try_from(first).ok();
                s.aux = last;
                s.flags = self.flags_of(arg(2), &[consts::CLOSE_RANGE_FLAGS]);
                if ok {
                    let cloexec = s.flags & consts::CLOSE_RANGE_CLOEXEC != 0;
                    let (lo, hi) = (first, last as i64);
                    let fds = &mut self.proc_mut(pid).fds;
                    if cloexec {
                        fds.iter_mut()
                            .filter(|(&fd, _)| (lo..=hi).contains(&(fd as i64)))
                            .for_each(|(_, e)| e.cloexec = true);
                    } else {
                        fds.retain(|&fd, _| !(lo..=hi).contains(&(fd as i64)));
                    }
                }
            }
            Read | Pread64 => {
                self.fd_field(s, arg(0));
                s.count = arg(2).and_then(args::int).unwrap_or(0) as u64;
                if s.sys == Pread64 {
                    s.offset = arg(3).and_then(args::int);
                }
            }
            Readv | Preadv | Preadv2 => {
                self.fd_field(s, arg(0));
                s.count = iov_total(arg(1));
                if s.sys != Readv {
                    s.offset = arg(3).and_then(args::int);
                }
                if s.sys == Preadv2 {
                    s.flags = self.flags_of(arg(4), &[consts::RWF_FLAGS]);
                }
            }
            Write | Pwrite64 => {
                let r = self.fd_field(s, arg(0));
                s.count = arg(2).and_then(args::int).unwrap_or(0) as u64;
                if s.sys == Pwrite64 {
                    s.offset = arg(3).and_then(args::int);
                }
                if let (Some(r), Some(StrArg::Str { bytes, truncated })) =
                    (r, arg(1).and_then(args::string))
                {
                    let truncated = truncated || (bytes.len() as u64) < s.count;
                    self.written(s, bytes, truncated, &r);
                }
            }
            Writev | Pwritev | Pwritev2 => {
                let r = self.fd_field(s, arg(0));
                s.count = iov_total(arg(1));
                if s.sys != Writev {
                    s.offset = arg(3).and_then(args::int);
                }
                if s.sys == Pwritev2 {
                    s.flags = self.flags_of(arg(4), &[consts::RWF_FLAGS]);
                }
                if let (Some(r), Some((data, truncated))) = (r, iov_data(arg(1))) {
                    let truncated = truncated || (data.len() as u64) < s.count;
                    self.written(s, data, truncated, &r);
                }
            }
            Lseek => {
                self.fd_field(s, arg(0));
                s.offset = arg(1).and_then(args::int);
                s.aux = self.flags_of(arg(2), &[consts::SEEK_WHENCE]);
            }
            Stat | Lstat => {
                self.path_field(s, None, arg(0));
                self.stat_field(s, arg(1), false);
            }
            Fstat => {
                self.fd_field(s, arg(0));
                self.stat_field(s, arg(1), false);
            }
            Newfstatat => {
                s.flags = self.flags_of(arg(3), &[consts::AT_FLAGS]);
                if !self.empty_path_means_fd(s, arg(0), arg(1), s.flags) {
                    self.path_field(s, arg(0), arg(1));
                }
                self.stat_field(s, arg(2), false);
            }
            Statx => {
                s.flags = self.flags_of(arg(2), &[consts::AT_FLAGS]);
                s.aux = self.flags_of(arg(3), &[consts::STATX_MASK]);
                if !self.empty_path_means_fd(s, arg(0), arg(1), s.flags) {
                    self.path_field(s, arg(0), arg(1));
                }
                self.stat_field(s, arg(4), true);
            }
            Access => {
                self.path_field(s, None, arg(0));
                s.mode = self.flags_of(arg(1), &[consts::ACCESS_MODES]) as u32;
            }
            Faccessat | Faccessat2 => {
                self.path_field(s, arg(0), arg(1));
                s.mode = self.flags_of(arg(2), &[consts::ACCESS_MODES]) as u32;
                s.flags = self.flags_of(arg(3), &[consts::AT_FLAGS]);
            }
            Readlink | Readlinkat => {
                let (dirfd, p, buf, size) = if s.sys == Readlink {
                    (None, arg(0), arg(1), arg(2))
                } else {
                    (arg(0), arg(1), arg(2), arg(3))
                };
                self.path_field(s, dirfd, p);
                s.count = size.and_then(args::int).unwrap_or(0) as u64;
                if ok {
                    if let Some(StrArg::Str { bytes, .. }) = buf.and_then(args::string) {
                        s.path2 = Some(self.sink.intern(&bytes));
                    }
                }
            }
            Getdents64 => {
                self.fd_field(s, arg(0));
                s.count = arg(2).and_then(args::int).unwrap_or(0) as u64;
            }
            Mkdir => {
                self.path_field(s, None, arg(0));
                s.mode = self.mode_of(arg(1));
            }
            Mkdirat => {
                self.path_field(s, arg(0), arg(1));
                s.mode = self.mode_of(arg(2));
            }
            Rmdir | Unlink => {
                self.path_field(s, None, arg(0));
            }
            Unlinkat => {
                self.path_field(s, arg(0), arg(1));
                s.flags = self.flags_of(arg(2), &[consts::AT_FLAGS]);
            }
            Rename | Link => {
                self.path_field(s, None, arg(0));
                self.path2_field(s, None, arg(1));
            }
            Renameat | Renameat2 | Linkat => {
                self.path_field(s, arg(0), arg(1));
                self.path2_field(s, arg(2), arg(3));
                let table = if s.sys == Linkat {
                    consts::AT_FLAGS
                } else {
                    consts::RENAME_FLAGS
                };
                s.flags = self.flags_of(arg(4), &[table]);
            }
            Symlink | Symlinkat => {
                let (dirfd, link) = if s.sys == Symlink {
                    (None, arg(1))
                } else {
                    (arg(1), arg(2))
                };
                self.path_field(s, dirfd, link);
                if let Some(StrArg::Str { bytes, .. }) = arg(0).and_then(args::string) {
                    s.path2 = Some(self.sink.intern(&bytes));
                }
            }
            Chmod => {
                self.path_field(s, None, arg(0));
                s.mode = self.mode_of(arg(1));
            }
            Fchmod => {
                self.fd_field(s, arg(0));
                s.mode = self.mode_of(arg(1));
            }
            Fchmodat | Fchmodat2 => {
                self.path_field(s, arg(0), arg(1));
                s.mode = self.mode_of(arg(2));
                s.flags = self.flags_of(arg(3), &[consts::AT_FLAGS]);
            }
            Chown | Lchown => {
                self.path_field(s, None, arg(0));
                s.aux = owner(arg(1), arg(2));
            }
            Fchown => {
                self.fd_field(s, arg(0));
                s.aux = owner(arg(1), arg(2));
            }
            Fchownat => {
                self.path_field(s, arg(0), arg(1));
                s.aux = owner(arg(2), arg(3));
                s.flags = self.flags_of(arg(4), &[consts::AT_FLAGS]);
            }
            Truncate => {
                self.path_field(s, None, arg(0));
                s.offset = arg(1).and_then(args::int);
            }
            Ftruncate => {
                self.fd_field(s, arg(0));
                s.offset = arg(1).and_then(args::int);
            }
            Fsync | Fdatasync => {
                self.fd_field(s, arg(0));
            }
            SyncFileRange => {
                self.fd_field(s, arg(0));
                s.offset = arg(1).and_then(args::int);
                s.count = arg(2).and_then(args::int).unwrap_or(0) as u64;
                s.flags = self.flags_of(arg(3), &[consts::SYNC_FILE_RANGE_FLAGS]);
            }
            Dup => {
                let r = self.fd_field(s, arg(0));
                if let (true, Some(r)) = (ok, r) {
                    self.dup_fd(pid, r.fd, ret_val, false, ret_ann);
                }
            }
            Dup2 | Dup3 => {
                let r = self.fd_field(s, arg(0));
                s.fd2 = arg(1)
                    .and_then(args::fd)
                    .and_then(|f| i32::try_from(f.fd).ok());
                if s.sys == Dup3 {
                    s.flags = self.flags_of(arg(2), &[consts::OPEN_FLAGS]);
                }
                if let (true, Some(r)) = (ok, r) {
                    self.dup_fd(
                        pid,
                        r.fd,
                        ret_val,
                        s.flags & consts::O_CLOEXEC != 0,
                        ret_ann,
                    );
                }
            }
            Fcntl => {
                let r = self.fd_field(s, arg(0));
                s.flags = self.flags_of(arg(1), &[consts::FCNTL_CMDS]);
                let third = arg(2).map(|v| {
                    if v.first() == Some(&b'{') {
                        0
                    } else {
                        self.flags_of(Some(v), &[consts::OPEN_FLAGS, consts::FCNTL_ARGS])
                    }
                });
                s.aux = third.unwrap_or(0);
                if let (true, Some(r)) = (ok, r) {
                    match s.flags {
                        consts::F_DUPFD | consts::F_DUPFD_CLOEXEC => {
                            let cloexec = s.flags == consts::F_DUPFD_CLOEXEC;
                            self.dup_fd(pid, r.fd, ret_val, cloexec, ret_ann);
                        }
                        consts::F_SETFL => {
                            if let Some(e) = self.proc_mut(pid).fds.get_mut(&r.fd) {
                                e.append = s.aux & consts::O_APPEND != 0;
                            }
                        }
                        consts::F_SETFD => {
                            if let Some(e) = self.proc_mut(pid).fds.get_mut(&r.fd) {
                                e.cloexec = s.aux & 1 != 0;
                            }
                        }
                        _ => {}
                    }
                }
            }
            Pipe | Pipe2 => {
                if s.sys == Pipe2 {
                    s.flags = self.flags_of(arg(1), &[consts::OPEN_FLAGS]);
                }
                if let Some((ends, _)) = arg(0).and_then(args::array) {
                    let read = ends.first().and_then(|e| args::fd(e));
                    let write = ends.get(1).and_then(|e| args::fd(e));
                    s.fd = read.and_then(|f| i32::try_from(f.fd).ok());
                    s.fd2 = write.and_then(|f| i32::try_from(f.fd).ok());
                    if ok {
                        for f in [read, write].into_iter().flatten() {
                            self.new_fd(pid, f.fd, f.ann, None, FdKind::Pipe, s.flags);
                        }
                    }
                }
            }
            Socket => {
                s.aux = self.flags_of(arg(0), &[consts::ADDRESS_FAMILIES]);
                s.flags = self.flags_of(arg(1), &[consts::SOCK_TYPES]);
                s.mode = self.flags_of(arg(2), &[consts::PROTOCOLS]) as u32;
                if ok {
                    let cloexec = if s.flags & consts::SOCK_CLOEXEC != 0 {
                        consts::O_CLOEXEC
                    } else {
                        0
                    };
                    self.new_fd(pid, ret_val, ret_ann, None, FdKind::Socket, cloexec);
                }
            }
            Accept | Accept4 => {
                self.fd_field(s, arg(0));
                if s.sys == Accept4 {
                    s.flags = self.flags_of(arg(3), &[consts::SOCK_TYPES]);
                }
                if ok {
                    let cloexec = if s.flags & consts::SOCK_CLOEXEC != 0 {
                        consts::O_CLOEXEC
                    } else {
                        0
                    };
                    self.new_fd(pid, ret_val, ret_ann, None, FdKind::Socket, cloexec);
                }
            }
            Connect => {
                if let Some(r) = self.fd_ref(pid, arg(0)) {
                    s.fd = Some(r.fd);
                }
                if let Some(addr) = arg(1) {
                    let f = args::fields(addr);
                    s.aux =
                        self.flags_of(args::field(&f, b"sa_family"), &[consts::ADDRESS_FAMILIES]);
                    if let Some(sun) = args::field(&f, b"sun_path") {
                        if let Some(abs) = sun.strip_prefix(b"@") {
                            if let Some(StrArg::Str { bytes, .. }) = args::string(abs) {
                                let mut p = b"@".to_vec();
                                p.extend_from_slice(&bytes);
                                s.path = Some(self.sink.intern(&p));
                            }
                        } else {
                            self.path_field(s, None, Some(sun));
                        }
                    }
                }
            }
            Sendfile => {
                let out = self.fd_ref(pid, arg(0));
                let inp = self.fd_ref(pid, arg(1));
                self.two_fds(s, out, inp);
                if let Some(off) = arg(2) {
                    if args::value_part(off) != b"NULL" {
                        s.offset = args::int(off);
                    }
                }
                s.count = arg(3).and_then(args::int).unwrap_or(0) as u64;
            }
            CopyFileRange | Splice => {
                let inp = self.fd_ref(pid, arg(0));
                let out = self.fd_ref(pid, arg(2));
                self.two_fds(s, out, inp);
                s.count = arg(4).and_then(args::int).unwrap_or(0) as u64;
                let table = if s.sys == Splice {
                    consts::SPLICE_FLAGS
                } else {
                    consts::OPEN_FLAGS
                };
                s.flags = self.flags_of(arg(5), &[table]);
            }
            Utimensat => {
                s.flags = self.flags_of(arg(3), &[consts::AT_FLAGS]);
                if !self.empty_path_means_fd(s, arg(0), arg(1), s.flags) {
                    self.path_field(s, arg(0), arg(1));
                }
            }
            Chdir => {
                let p = self.path_field(s, None, arg(0));
                if let (true, Some(p)) = (ok, p) {
                    if p.first() == Some(&b'/') {
                        self.proc_mut(pid).cwd = Some(Rc::from(p));
                    }
                }
            }
            Fchdir => {
                let r = self.fd_field(s, arg(0));
                if let (
                    true,
                    Some(FdRef {
                        path: Some(p),
                        known: true,
                        ..
                    }),
                ) = (ok, r)
                {
                    self.proc_mut(pid).cwd = Some(p);
                }
            }
            Execve | Execveat => {
                let (argv_arg, flags_arg) = if s.sys == Execve {
                    (arg(1), None)
                } else {
                    (arg(2), arg(4))
                };
                s.flags = self.flags_of(flags_arg, &[consts::AT_FLAGS]);
                if s.sys == Execve {
                    self.path_field(s, None, arg(0));
                } else if !self.empty_path_means_fd(s, arg(0), arg(1), s.flags) {
                    self.path_field(s, arg(0), arg(1));
                }
                if self.payload_bytes > 0 {
                    let (argv, truncated) = argv_bytes(argv_arg);
                    if truncated {
                        s.ev |= ev::PAYLOAD_TRUNCATED;
                    }
                    s.payload = Some(self.sink.intern(&argv));
                }
            }
            MemfdCreate => {
                let name = match arg(0).and_then(args::string) {
                    Some(StrArg::Str { bytes, .. }) => Some(bytes),
                    _ => None,
                };
                s.path2 = self.intern_opt(name.as_deref());
                s.flags = self.flags_of(arg(1), &[consts::MFD_FLAGS]);
                if ok {
                    let fallback = name.map(|n| {
                        let mut p = b"/memfd:".to_vec();
                        p.extend_from_slice(&n);
                        p.extend_from_slice(b" (deleted)");
                        p
                    });
                    let cloexec = if s.flags & consts::MFD_CLOEXEC != 0 {
                        consts::O_CLOEXEC
                    } else {
                        0
                    };
                    // The annotation (`3</memfd:x>(deleted)`) names the same thing.
                    let ann = if fallback.is_none() { ret_ann } else { None };
                    self.new_fd(pid, ret_val, ann, fallback, FdKind::File, cloexec);
                }
            }
            Mmap => {
                // mmap(addr, length, prot, flags, fd, offset): a file mapped in.
                self.fd_field(s, arg(4));
                s.count = arg(1).and_then(args::int).unwrap_or(0) as u64;
                s.aux = self.flags_of(arg(2), &[consts::PROT_FLAGS]);
                s.flags = self.flags_of(arg(3), &[consts::MAP_FLAGS]);
                s.offset = arg(5).and_then(args::int);
            }
            IoUringSetup => s.ev |= ev::UNDECODED,
            IoUringEnter => {
                s.ev |= ev::UNDECODED;
                s.fd = arg(0)
                    .and_then(args::fd)
                    .and_then(|f| i32::try_from(f.fd).ok());
            }
        }
        Ok(())
    }

    /// sendfile/copy_file_range/splice: fd = out, fd2 = in, path/path2 their paths.
    fn two_fds(&mut self, s: &mut Syscall, out: Option<FdRef>, inp: Option<FdRef>) {
        if let Some(o) = out {
            s.fd = Some(o.fd);
            self.set_fd_path(s, &o);
        }
        if let Some(i) = inp {
            s.fd2 = Some(i.fd);
            if let (Some(p), true) = (&i.path, i.known) {
                s.path2 = Some(self.sink.intern(p));
            }
        }
    }
}

/// Sets `ret`, `dur` and the result flags of `s`.
fn set_result(s: &mut Syscall, c: &Call<'_>, unknown_errno: &mut u64) {
    s.dur = c.dur_ns.unwrap_or(0);
    match c.ret {
        Ret::Val { val, .. } => s.ret = val,
        Ret::Err(e) => {
            s.ret = -(e as i64);
            if consts::is_restart_errno(e) {
                s.ev |= ev::RESTARTED;
            }
        }
        Ret::UnknownErr => {
            *unknown_errno += 1;
            s.ret = -UNKNOWN_ERRNO;
        }
        Ret::NoReturn => {
            s.ev |= ev::UNFINISHED;
            s.dur = 0;
        }
    }
}

/// The clone flags of a clone-family call from its (entry) arguments.
fn spawn_flags(name: &str, args_text: &[u8], unknown: &mut u64) -> u64 {
    match name {
        "fork" => consts::FORK_FLAGS,
        "vfork" => consts::VFORK_FLAGS,
        "clone3" => {
            let mut a = Vec::new();
            args::split_top(args_text, &mut a);
            let f = a.first().map(|s| args::fields(s)).unwrap_or_default();
            let flags = args::field(&f, b"flags")
                .map_or(0, |v| args::flags(v, &[consts::CLONE_FLAGS], unknown));
            let sig =
                args::field(&f, b"exit_signal").map_or(0, |v| args::flags(v, &[], unknown) & 0xff);
            flags | sig
        }
        _ => {
            let f = args::fields(args_text);
            args::field(&f, b"flags").map_or(0, |v| args::flags(v, &[consts::CLONE_FLAGS], unknown))
        }
    }
}

/// The path and kind a `-y`/`-yy` annotation names. Socket names are brought to the
/// kernel's `socket:[INODE]` form when `-yy` printed the inode.
fn annotation_path(ann: &[u8], deleted: bool) -> (Vec<u8>, FdKind) {
    let mut path = Vec::with_capacity(ann.len());
    let stop = args::unescape_into(ann, Some(b'<'), &mut path);
    let detail = ann.get(stop + 1..).unwrap_or(&[]);
    if deleted {
        path.extend_from_slice(b" (deleted)");
    }
    // `-yy` devices: `/dev/null<char 1:3>`.
    if let Some(dev) = detail.strip_prefix(b"char ") {
        let major = dev
            .split(|&c| c == b':')
            .next()
            .and_then(args::number)
            .unwrap_or(-1);
        let kind = match major {
            1 if dev.starts_with(b"1:3") => FdKind::Null,
            4 | 5 | 136..=143 => FdKind::Tty,
            _ => FdKind::of_path(&path),
        };
        return (path, kind);
    }
    // `-yy` sockets: `UNIX-STREAM:[123]`, `TCP:[1.2.3.4:5->6.7.8.9:10]`, `NETLINK:[456]`.
    let proto_len = path
        .iter()
        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || **c == b'-' || **c == b'v')
        .count();
    if proto_len > 0 && path[proto_len..].starts_with(b":[") {
        let inner = &path[proto_len + 2..];
        let digits = inner.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 && matches!(inner.get(digits), Some(b']' | b'-' | b',')) {
            let mut p = b"socket:[".to_vec();
            p.extend_from_slice(&inner[..digits]);
            p.push(b']');
            return (p, FdKind::Socket);
        }
        return (path, FdKind::Socket);
    }
    let kind = FdKind::of_path(&path);
    (path, kind)
}

/// Sum of the `iov_len` of an iovec array.
fn iov_total(a: Option<&[u8]>) -> u64 {
    let Some((elems, _)) = a.and_then(args::array) else {
        return 0;
    };
    elems
        .iter()
        .filter_map(|e| args::field(&args::fields(e), b"iov_len").and_then(args::int))
        .fold(0u64, |sum, n| sum.saturating_add(n as u64))
}

/// The bytes of an iovec array as strace printed them, stopping at the first element
/// that was cut off (what follows would not be contiguous); true when incomplete.
fn iov_data(a: Option<&[u8]>) -> Option<(Vec<u8>, bool)> {
    let (elems, elided) = a.and_then(args::array)?;
    let mut out = Vec::new();
    for e in &elems {
        let f = args::fields(e);
        match args::field(&f, b"iov_base").and_then(args::string) {
            Some(StrArg::Str { bytes, truncated }) => {
                out.extend_from_slice(&bytes);
                if truncated {
                    return Some((out, true));
                }
            }
            _ => return Some((out, true)),
        }
    }
    Some((out, elided))
}

/// An argv array joined by NUL bytes; true when strace printed it incompletely.
fn argv_bytes(a: Option<&[u8]>) -> (Vec<u8>, bool) {
    let Some((elems, elided)) = a.and_then(args::array) else {
        return (Vec::new(), true);
    };
    let mut out = Vec::new();
    let mut truncated = elided;
    for (i, e) in elems.iter().enumerate() {
        if i > 0 {
            out.push(0);
        }
        if let Some(StrArg::Str {
            bytes,
            truncated: t,
        }) = args::string(e)
        {
            out.extend_from_slice(&bytes);
            truncated |= t;
        }
    }
    (out, truncated)
}

/// chown's `uid << 32 | gid`, 32 bits each (-1 is 0xffffffff).
fn owner(uid: Option<&[u8]>, gid: Option<&[u8]>) -> u64 {
    let id = |a: Option<&[u8]>| a.and_then(args::int).unwrap_or(-1) as u64 & 0xffff_ffff;
    (id(uid) << 32) | id(gid)
}

/// `makedev(0xfe, 0x1)` as a kernel dev_t.
fn makedev(v: &[u8]) -> Option<u64> {
    let inner = v.strip_prefix(b"makedev(")?.strip_suffix(b")")?;
    let mut parts = Vec::new();
    args::split_top(inner, &mut parts);
    let major = args::int(parts.first()?)?;
    let minor = args::int(parts.get(1)?)?;
    Some(FileStat::makedev(major as u32, minor as u32))
}

/// Seconds, possibly with a fraction (`1700000000.123456789`), as ns.
fn secs_ns(v: &[u8]) -> Option<i64> {
    let v = args::value_part(v);
    match v.iter().position(|&c| c == b'.') {
        Some(dot) => {
            let secs = args::number(&v[..dot])?;
            let frac = &v[dot + 1..];
            let mut ns = 0i64;
            for i in 0..9 {
                ns = ns * 10 + frac.get(i).map_or(0, |&c| (c - b'0') as i64);
            }
            secs.checked_mul(1_000_000_000)?.checked_add(ns)
        }
        None => args::number(v)?.checked_mul(1_000_000_000),
    }
}

/// A stat or statx struct into a [`FileStat`], with `known` bits for what strace printed.
fn parse_stat(a: &[u8], statx: bool, unknown: &mut u64) -> Option<FileStat> {
    let a = args::trim(a);
    if a.first() != Some(&b'{') {
        return None;
    }
    let f = args::fields(a);
    let get = |k: &[u8]| args::field(&f, k);
    let mut st = FileStat::default();
    let mut known = 0u8;
    // Field names: (stat, statx).
    let key = |k: (&'static [u8], &'static [u8])| if statx { k.1 } else { k.0 };
    if let Some(m) = get(key((b"st_mode", b"stx_mode"))) {
        st.mode = args::mode(m, unknown);
        known |= stat_known::MODE;
    }
    if let Some(v) = get(key((b"st_size", b"stx_size"))).and_then(args::int) {
        st.size = v;
        known |= stat_known::SIZE;
    }
    if let (Some(n), Some(u), Some(g)) = (
        get(key((b"st_nlink", b"stx_nlink"))).and_then(args::int),
        get(key((b"st_uid", b"stx_uid"))).and_then(args::int),
        get(key((b"st_gid", b"stx_gid"))).and_then(args::int),
    ) {
        st.nlink = n as u64;
        st.uid = u as u32;
        st.gid = g as u32;
        known |= stat_known::OWNER;
    }
    if statx {
        let dev = get(b"stx_dev_major")
            .and_then(args::int)
            .zip(get(b"stx_dev_minor").and_then(args::int));
        if let (Some((ma, mi)), Some(ino)) = (dev, get(b"stx_ino").and_then(args::int)) {
            st.dev = FileStat::makedev(ma as u32, mi as u32);
            st.ino = ino as u64;
            known |= stat_known::IDENTITY;
        }
        let is_dev = matches!(st.mode & dejavu_trace::mode::S_IFMT, 0o020000 | 0o060000);
        if let (true, Some((ma, mi))) = (
            is_dev,
            get(b"stx_rdev_major")
                .and_then(args::int)
                .zip(get(b"stx_rdev_minor").and_then(args::int)),
        ) {
            st.rdev = FileStat::makedev(ma as u32, mi as u32);
            known |= stat_known::RDEV;
        }
        let ts = |k: &[u8]| {
            let t = args::fields(get(k)?);
            let sec = args::field(&t, b"tv_sec").and_then(args::int)?;
            let nsec = args::field(&t, b"tv_nsec").and_then(args::int).unwrap_or(0);
            sec.checked_mul(1_000_000_000)?.checked_add(nsec)
        };
        if let Some(m) = ts(b"stx_mtime") {
            st.mtime_ns = m;
            known |= stat_known::MTIME;
        }
        if let Some(c) = ts(b"stx_ctime") {
            st.ctime_ns = c;
            known |= stat_known::CTIME;
        }
    } else {
        if let (Some(dev), Some(ino)) = (
            get(b"st_dev").and_then(makedev),
            get(b"st_ino").and_then(args::int),
        ) {
            st.dev = dev;
            st.ino = ino as u64;
            known |= stat_known::IDENTITY;
        }
        if let Some(r) = get(b"st_rdev").and_then(makedev) {
            st.rdev = r;
            known |= stat_known::RDEV;
        }
        let ts = |sec: &[u8], nsec: &[u8]| {
            let s = secs_ns(get(sec)?)?;
            let n = get(nsec).and_then(args::int).unwrap_or(0);
            s.checked_add(n)
        };
        if let Some(m) = ts(b"st_mtime", b"st_mtime_nsec") {
            st.mtime_ns = m;
            known |= stat_known::MTIME;
        }
        if let Some(c) = ts(b"st_ctime", b"st_ctime_nsec") {
            st.ctime_ns = c;
            known |= stat_known::CTIME;
        }
    }
    if known == 0 {
        return None;
    }
    st.known = known;
    Some(st)
}
