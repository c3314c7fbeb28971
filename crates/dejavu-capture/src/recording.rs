//! One capture core for both backends: the state a recording keeps (tasks, processes with
//! their descriptor tables and working directories, stacks, the trace writer) and what
//! happens to it when a task is created, execs or ends, whichever backend saw it. The
//! ptrace backend drives it from its waitpid loop (reading call memory live); the eBPF
//! backend drives it through [`crate::feed::Feed`] (reading the kernel's copies). The call
//! decoder (decode.rs) is made of methods of [`Capture`] too. Why one core:
//! docs/capture-core.md.

use crate::decode::Entry;
use crate::os::{self, Tid};
use crate::snapshot::Snapshot;
use crate::state::{FdTable, FsContext, Process};
use crate::{arch, signals, spawn};
use dejavu_detect::program::ImageRole;
use dejavu_trace::*;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::rc::Rc;

/// What to record.
#[derive(Debug, Clone)]
pub enum Target {
    /// Run this command (argv[0] is looked up along PATH).
    Command(Vec<OsString>),
    /// Attach to these processes and all their threads.
    Attach(Vec<i32>),
}

/// Recording options (plain data; the CLI builds it from its flags).
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Bytes of write payload to keep where `dejavu_trace::payload::keeps_payload` says
    /// (the standard streams, terminals, pipes, sockets, /dev/null, append-mode files and
    /// log files); 0 records none. Every write gets its fingerprint either way.
    pub payload_bytes: u32,
    /// Stat each newly opened descriptor once (through /proc) to record the open file's
    /// identity; lets analysis tell a re-read of an unchanged file.
    pub open_identity: bool,
    /// While one thread makes most of the traced calls, run it and the tracer on one
    /// CPU (invisible to the program; see docs/ptrace-backend.md, "CPU placement").
    pub follow_cpu: bool,
    /// Report progress and decisions on stderr.
    pub verbose: bool,
    /// Record the call stack of every recorded call (docs/ptrace-backend.md, "Stacks").
    pub stacks: crate::stacks::StackMode,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            payload_bytes: 256,
            open_identity: true,
            follow_cpu: true,
            verbose: false,
            stacks: crate::stacks::StackMode::On,
        }
    }
}

/// What happened during a recording.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Exit status of the program dejavu started (None when attached).
    pub exit: Option<ExitStatus>,
    /// Records written.
    pub records: u64,
    /// Syscall records among them.
    pub syscalls: u64,
    /// Processes seen.
    pub processes: u64,
    /// Threads seen (beyond each process's first).
    pub threads: u64,
    /// Bytes of trace written.
    pub bytes: u64,
    /// The first error writing the trace; recording went on without writing.
    pub write_error: Option<String>,
    /// Records not written because of that error.
    pub dropped: u64,
    /// Things the user should know (once each).
    pub warnings: Vec<String>,
    /// Recording ended by detaching (attach mode, or the tracer was interrupted).
    pub detached: bool,
    /// Times a hot thread was pinned to the tracer's CPU (see docs/ptrace-backend.md).
    pub pins: u64,
    /// Calls the language agents made on their own files (not recorded).
    pub agent_calls: u64,
    /// Remarks also written to the trace's end block (agents' statistics).
    pub notes: Vec<String>,
    /// Recording was stopped by this signal while the program still ran (eBPF leaves it
    /// running, without an exit status: dejavu then exits 128 + this, as if interrupted).
    pub stopped_by: Option<i32>,
}

/// Per-task (thread) state.
#[derive(Debug)]
pub struct Task {
    pub pid: Tid,
    /// The call this task is inside, between its entry and exit stops.
    pub entry: Option<Entry>,
    /// Fast path: entry time of the call this task is inside, not yet decoded (the
    /// whole call is decoded at its exit stop; see `Tracer::exit_decode`).
    pub pending_ts: Option<u64>,
    /// (program path, argv) of a successful exec, taken at PTRACE_EVENT_EXEC for the
    /// execve exit stop that follows it.
    pub exec_info: Option<(Rc<[u8]>, Vec<u8>)>,
    /// Not yet past its first exec (the launched child, still running our code).
    pub pre_exec: bool,
    /// A vfork-like child before its exec (ptrace): the native stack of an exec it makes
    /// is taken at the call's entry (`Stacks::exec_entry`).
    pub exec_entry_stack: bool,
}

impl Task {
    /// A task of process `pid` outside any call; `pre_exec` for the launched child.
    pub fn new(pid: Tid, pre_exec: bool) -> Task {
        Task {
            pid,
            entry: None,
            pending_ts: None,
            exec_info: None,
            pre_exec,
            exec_entry_stack: false,
        }
    }
}

/// The environment variables a report speaks of when the program was started with them
/// (the trace's `env`): Python's unbuffered output makes each print() a write.
const REPORTED_ENV: &[&str] = &["PYTHONUNBUFFERED"];

/// What every recording starts from: its clock origin (CLOCK_MONOTONIC ns), dejavu's
/// working directory, and the trace metadata of `backend` with the payload size given.
pub fn start(backend: &str, payload_bytes: u32) -> (u64, Vec<u8>, Meta) {
    let t0 = os::now_ns();
    let start_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let cwd = std::env::current_dir()
        .map(|p| p.into_os_string().into_vec())
        .unwrap_or_else(|_| b"/".to_vec());
    let meta = Meta {
        producer: format!("dejavu {}", env!("CARGO_PKG_VERSION")),
        backend: backend.into(),
        arch: arch::NAME.into(),
        start_unix_ns,
        cwd: String::from_utf8_lossy(&cwd).into_owned(),
        payload_bytes,
        env: REPORTED_ENV
            .iter()
            .filter_map(|n| {
                let v = std::env::var_os(n)?;
                Some(format!("{n}={}", v.to_string_lossy()))
            })
            .collect(),
        ..Meta::default()
    };
    (t0, cwd, meta)
}

/// Whether process `pid` has exited and waits to be collected (or is being).
pub fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("State:"))
            .is_some_and(|v| matches!(v.trim().chars().next(), Some('Z' | 'X')))
    })
}

/// Why process `pid` cannot be attached to, when it is not a matter of permission: a
/// zombie (nothing left to trace) or a process another tracer holds (one tracer each).
pub fn unattachable(pid: i32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    if is_zombie(pid) {
        return Some(format!(
            "process {pid} is a zombie: it has exited and waits for its parent to collect its \
             status; there is nothing left to record"
        ));
    }
    let tracer: i32 = field("TracerPid:")?.parse().ok()?;
    (tracer != 0).then(|| {
        format!(
            "process {pid} is already traced by process {tracer} ({}): a process has one \
             tracer at a time; stop that one first, or record with --backend ebpf, which \
             needs no ptrace",
            crate::proc_cmdline(tracer).join(" ")
        )
    })
}

/// "COMMAND (pid N)" for each of `pids`: how stderr names the processes a program left.
pub fn process_names(pids: &[Tid]) -> Vec<String> {
    pids.iter()
        .map(|&p| format!("{} (pid {p})", crate::proc_cmdline(p).join(" ")))
        .collect()
}

/// "exit status 3", "killed by SIGTERM".
pub fn exit_text(e: &ExitStatus) -> String {
    match *e {
        ExitStatus::Code(c) => format!("exit status {c}"),
        ExitStatus::Signal { signal, .. } => {
            format!("killed by {}", dejavu_trace::names::signal_label(signal))
        }
    }
}

/// The parent of process `pid`, from /proc (0 when unknown).
fn proc_ppid(pid: Tid) -> Tid {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.to_string()))
        .and_then(|rest| rest.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Where the decoder reads a call's memory from: the live process (ptrace: the task is
/// stopped at the call, read with process_vm_readv) or the copy another backend made at
/// the call's exit (eBPF: the kernel half copied what the call used).
#[derive(Debug, Default)]
pub struct CallMemory {
    copy: Option<Snapshot>,
}

/// A recording's state, shared by both backends (see the module doc).
pub struct Capture<W: Write> {
    /// The trace being written.
    pub w: TraceWriter<W>,
    /// Writing failed once: later records are counted, not written.
    pub write_failed: bool,
    /// What happened, for the caller.
    pub out: Outcome,
    /// CLOCK_MONOTONIC ns that trace timestamps count from.
    pub t0: u64,
    /// The recording's options.
    pub opts: RecordOptions,
    /// Every traced task (thread), by tid.
    pub tasks: FxHashMap<Tid, Task>,
    /// Every traced process, by pid.
    pub procs: FxHashMap<Tid, Process>,
    /// The program dejavu started (None when attached).
    pub root: Option<Tid>,
    /// When the launched program exited, while processes it started still ran.
    pub root_ended_at: Option<std::time::Instant>,
    /// Scratch buffers for the decoder.
    pub buf: Vec<u8>,
    pub buf2: Vec<u8>,
    /// Warnings given (once per key).
    pub warned: FxHashMap<&'static str, ()>,
    /// Call stacks: native unwinding and the language agents.
    pub stacks: crate::stacks::Stacks,
    /// The code mappings written to the trace (`codemaps`).
    pub code_maps: crate::codemaps::CodeMaps,
    /// The agents' directory (with a trailing slash), and the trace strings under it.
    pub own_prefix: Option<Vec<u8>>,
    pub own_paths: rustc_hash::FxHashSet<u32>,
    /// Unnamed files (O_TMPFILE) named without their inode so far (decode.rs,
    /// `tmpfile_name`).
    pub tmpfiles: u64,
    /// Directories opened by a path without `..`, and what they were (device, inode): an
    /// open of `DIR/..` that gives one of them is named by its path (decode.rs,
    /// `named_without_dotdot`).
    pub dirs: FxHashMap<Rc<[u8]>, (u64, u64)>,
    /// Where the call being decoded is read from.
    pub mem: CallMemory,
}

impl<W: Write> std::fmt::Debug for Capture<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("tasks", &self.tasks.len())
            .field("procs", &self.procs.len())
            .finish_non_exhaustive()
    }
}

impl<W: Write> Capture<W> {
    /// A recording into `w` from `t0`, reading calls from `mem`.
    pub fn new(w: TraceWriter<W>, t0: u64, opts: RecordOptions, mem: CallMemory) -> Self {
        Capture {
            w,
            write_failed: false,
            out: Outcome::default(),
            t0,
            stacks: crate::stacks::Stacks::new(opts.stacks),
            code_maps: crate::codemaps::CodeMaps::default(),
            own_prefix: None,
            own_paths: rustc_hash::FxHashSet::default(),
            tmpfiles: 0,
            dirs: FxHashMap::default(),
            mem,
            opts,
            tasks: FxHashMap::default(),
            procs: FxHashMap::default(),
            root: None,
            root_ended_at: None,
            buf: Vec::with_capacity(4096),
            buf2: Vec::with_capacity(4096),
            warned: FxHashMap::default(),
        }
    }

    /// At each tick (twice a second): the pending records reach the file within about a
    /// second even when no new one comes.
    pub fn tick(&mut self) {
        let now = self.now();
        if !self.write_failed {
            if let Err(e) = self.w.flush_if_older(now, signals::TICK.as_nanos() as u64) {
                self.write_failed = true;
                self.out.write_error = Some(e.to_string());
                eprintln!("dejavu: cannot write the trace ({e}); the program keeps running, events from now on are lost");
            }
        }
    }

    /// The processes still traced (the launched program's leftovers once it exited).
    pub fn left_running(&self) -> Vec<Tid> {
        let mut pids: Vec<Tid> = self.tasks.values().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    pub fn now(&self) -> u64 {
        os::now_ns().saturating_sub(self.t0)
    }

    /// Appends a record, after the marks the agents reported before it; after the first
    /// write error, counts instead of writing.
    pub fn push(&mut self, rec: Record) {
        if self.stacks.enabled() {
            // An exec or a process's end: whatever its agents wrote before is read first,
            // so their marks land before it (and a new program's after).
            let drain = match rec {
                Record::Exec(_) => true,
                Record::Exit(e) => e.tid == e.pid,
                _ => false,
            };
            self.write_marks(drain, Some(&rec));
        }
        self.write(rec);
    }

    /// Writes the marks the agents reported and the trace does not have yet (`drain`:
    /// read the pipe for them first), before `next`, the record about to be written.
    ///
    /// A mark's time is when dejavu read it (ptrace) or when the kernel saw it written
    /// (eBPF), so at or after the agent wrote it. The process's main thread wrote it
    /// (both messages come from there), before the call that thread is inside now and
    /// before `next` if that is one of its calls: the time is capped to just before them,
    /// so that it is in order with the calls around it.
    pub fn write_marks(&mut self, drain: bool, next: Option<&Record>) {
        let marks = self.stacks.agents().take_marks(drain);
        for m in marks {
            let mut ts = m.at_ns.saturating_sub(self.t0);
            if let Some(t) = self.tasks.get(&(m.pid as Tid)) {
                if let Some(start) = t.pending_ts.or(t.entry.as_ref().map(|e| e.call.ts)) {
                    ts = ts.min(start.saturating_sub(1));
                }
            }
            if let Some(Record::Syscall(s)) = next {
                if s.tid == m.pid {
                    ts = ts.min(s.ts.saturating_sub(1));
                }
            }
            self.write(Record::Mark(Mark {
                ts,
                pid: m.pid,
                tid: m.pid,
                kind: m.kind,
            }));
        }
    }

    fn write(&mut self, rec: Record) {
        if let Record::Syscall(s) = rec {
            if s.path.is_some_and(|p| self.own_paths.contains(&p.0)) {
                // The agents loading their own files: dejavu's calls, not the program's.
                self.out.agent_calls += 1;
                return;
            }
            self.out.syscalls += 1;
        }
        if self.write_failed {
            self.out.dropped += 1;
            return;
        }
        if let Err(e) = self.w.push(&rec) {
            self.write_failed = true;
            self.out.dropped += 1;
            self.out.write_error = Some(e.to_string());
            eprintln!("dejavu: cannot write the trace ({e}); the program keeps running, events from now on are lost");
        }
    }

    pub fn warn_once(&mut self, key: &'static str, msg: String) {
        if self.warned.insert(key, ()).is_none() {
            self.out.warnings.push(msg);
        }
    }

    /// Takes over the agents set up for the program; their own files (under their
    /// directory) are left out of the trace.
    pub fn set_stacks(&mut self, stacks: crate::stacks::Stacks) {
        self.stacks = stacks;
        self.own_prefix = self.stacks.agents().dir().map(|d| {
            let mut p = d.as_os_str().as_bytes().to_vec();
            p.push(b'/');
            p
        });
    }

    /// The program dejavu started, stopped before its exec: its process, its first task,
    /// the descriptors it has now, and its Spawn record.
    pub fn launched(&mut self, pid: Tid, cwd: Rc<[u8]>) {
        self.root = Some(pid);
        self.add_process(pid, cwd, FdTable::default());
        self.tasks.insert(pid, Task::new(pid, true));
        self.learn_open_fds(pid);
        self.push(Record::Spawn(Spawn {
            ts: 0,
            parent_pid: 0,
            parent_tid: 0,
            pid: pid as u32,
            tid: pid as u32,
            clone_flags: 0,
        }));
    }

    pub fn add_process(&mut self, pid: Tid, cwd: Rc<[u8]>, fds: FdTable) {
        self.procs.insert(
            pid,
            Process {
                fds: Rc::new(RefCell::new(fds)),
                fs: Rc::new(RefCell::new(FsContext { cwd })),
                tasks: 1,
                image: ImageRole::unknown(),
            },
        );
        self.out.processes += 1;
    }

    pub fn unfinished(&mut self, _tid: Tid, e: Entry, _now: u64) {
        let mut c = e.call;
        c.ev |= ev::UNFINISHED;
        self.push(Record::Syscall(c));
    }

    /// Task `child` was created by `tid` (of process `ppid`) with clone `flags`: a new
    /// thread of `ppid`, or a new process with a copy or a share of its descriptor table
    /// and working directory.
    pub fn new_task(&mut self, tid: Tid, ppid: Tid, child: Tid, flags: u64, now: u64) {
        let is_thread = flags & libc::CLONE_THREAD as u64 != 0;
        let new_pid = if is_thread { ppid } else { child };
        if is_thread {
            if let Some(p) = self.procs.get_mut(&ppid) {
                p.tasks += 1;
            }
            self.out.threads += 1;
        } else {
            let (fds, fs) = match self.procs.get(&ppid) {
                Some(p) => (
                    if flags & libc::CLONE_FILES as u64 != 0 {
                        p.fds.clone()
                    } else {
                        Rc::new(RefCell::new(p.fds.borrow().clone()))
                    },
                    if flags & libc::CLONE_FS as u64 != 0 {
                        p.fs.clone()
                    } else {
                        Rc::new(RefCell::new(p.fs.borrow().clone()))
                    },
                ),
                None => (
                    Rc::new(RefCell::new(FdTable::default())),
                    Rc::new(RefCell::new(FsContext {
                        cwd: Rc::from(&b"/"[..]),
                    })),
                ),
            };
            let image = match self.procs.get(&ppid) {
                Some(p) => ImageRole::fork(&p.image),
                None => ImageRole::unknown(),
            };
            self.procs.insert(
                child,
                Process {
                    fds,
                    fs,
                    tasks: 1,
                    image,
                },
            );
            self.out.processes += 1;
            // A process started inside a wrapped call (a spawn) is that call's.
            self.stacks.on_fork(&mut self.w, ppid, tid, child);
            self.stacks.forked(ppid, child);
            self.code_maps.forked(ppid, child);
        }
        self.tasks.insert(child, Task::new(new_pid, false));
        self.push(Record::Spawn(Spawn {
            ts: now,
            parent_pid: ppid as u32,
            parent_tid: tid as u32,
            pid: new_pid as u32,
            tid: child as u32,
            clone_flags: flags,
        }));
    }

    /// Thread `former` exec'd and is now `tid` (the process's leader): the process's other
    /// threads are gone and its close-on-exec descriptors closed. Returns the process.
    pub fn exec_begin(&mut self, tid: Tid, former: Tid, now: u64) -> Option<Tid> {
        if former != tid {
            // A non-leader thread called exec: it takes over the leader's tid. The old
            // leader's pending call (if any) never returns.
            if let Some(mut old_leader) = self.tasks.remove(&tid) {
                if let Some(e) = old_leader.entry.take() {
                    self.unfinished(tid, e, now);
                }
            }
            if let Some(t) = self.tasks.remove(&former) {
                self.tasks.insert(tid, t);
            }
        }
        let task = self.tasks.get_mut(&tid)?;
        task.pre_exec = false;
        task.exec_entry_stack = false;
        let pid = task.pid;
        self.stacks.on_exec(&mut self.w, pid, former);
        // Every other thread of the process is gone now.
        let others: Vec<Tid> = self
            .tasks
            .iter()
            .filter(|(&k, t)| t.pid == pid && k != tid)
            .map(|(&k, _)| k)
            .collect();
        for o in others {
            if let Some(mut t) = self.tasks.remove(&o) {
                if let Some(e) = t.entry.take() {
                    self.unfinished(o, e, now);
                }
            }
        }
        if let Some(p) = self.procs.get_mut(&pid) {
            p.tasks = 1;
            // exec unshares the descriptor table and closes close-on-exec descriptors.
            let after = p.fds.borrow().after_exec();
            p.fds = Rc::new(RefCell::new(after));
        }
        Some(pid)
    }

    /// Records the exec of `exe` with `argv` by `tid` of `pid`; `keep`: remember them for
    /// the execve call's record, which comes after (its registers and memory are the new
    /// program's by then).
    pub fn exec_end(
        &mut self,
        tid: Tid,
        pid: Tid,
        exe: Rc<[u8]>,
        argv: Vec<u8>,
        keep: bool,
        now: u64,
    ) {
        if keep {
            if let Some(t) = self.tasks.get_mut(&tid) {
                t.exec_info = Some((exe.clone(), argv.clone()));
            }
        }
        self.stacks.exec_image(pid, &exe);
        if let Some(p) = self.procs.get_mut(&pid) {
            p.image = ImageRole::exec(&p.image, &exe, &argv);
            let role = crate::stacks::ExecRole::of(&p.image);
            self.stacks.tool_exec(pid, role);
        }
        self.stacks.exec_start_up(pid, &exe, &argv);
        let exe_id = self.w.intern(&exe);
        let argv = self.w.intern(&argv);
        self.push(Record::Exec(Exec {
            ts: now,
            pid: pid as u32,
            tid: tid as u32,
            exe: exe_id,
            argv,
        }));
        self.code_at_exec(pid, &exe, now);
        if spawn::is_32bit(pid) {
            self.push(Record::Lost(Lost {
                ts: now,
                pid: pid as u32,
                count: 0,
                reason: LostReason::ForeignAbi,
            }));
            self.warn_once(
                "abi32",
                format!("process {pid} runs a 32-bit program; dejavu does not trace the 32-bit ABI, so its calls are missing"),
            );
        }
    }

    pub fn task_exited(&mut self, tid: Tid, st: ExitStatus, now: u64) {
        let Some(mut task) = self.tasks.remove(&tid) else {
            return;
        };
        if let Some(e) = task.entry.take() {
            self.unfinished(tid, e, now);
        }
        let pid = task.pid;
        self.push(Record::Exit(Exit {
            ts: now,
            pid: pid as u32,
            tid: tid as u32,
            status: st,
        }));
        if let Some(p) = self.procs.get_mut(&pid) {
            p.tasks = p.tasks.saturating_sub(1);
            if tid == pid {
                self.procs.remove(&pid);
                self.stacks.on_exit(pid);
                self.code_maps.exited(pid);
            }
        }
        if Some(tid) == self.root {
            self.out.exit = Some(st);
            self.root_ended_at = Some(std::time::Instant::now());
        }
    }

    /// Registers a process seized by `seize_threads`: its tree, command line, threads.
    pub fn attach_process(&mut self, pid: Tid, tids: &[Tid]) {
        let now = self.now();
        let cwd =
            os::readlink(format!("/proc/{pid}/cwd").as_bytes()).unwrap_or_else(|_| b"/".to_vec());
        self.add_process(pid, Rc::from(cwd.as_slice()), FdTable::default());
        let ppid = proc_ppid(pid);
        self.push(Record::Spawn(Spawn {
            ts: now,
            parent_pid: ppid as u32,
            parent_tid: ppid as u32,
            pid: pid as u32,
            tid: pid as u32,
            clone_flags: 0,
        }));
        let exe = os::readlink(format!("/proc/{pid}/exe").as_bytes()).unwrap_or_default();
        let argv = crate::proc_cmdline(pid).join("\0").into_bytes();
        let (exe, argv) = (self.w.intern(&exe), self.w.intern(&argv));
        self.push(Record::Exec(Exec {
            ts: now,
            pid: pid as u32,
            tid: pid as u32,
            exe,
            argv,
        }));
        self.code_attached(pid, now);
        for &tid in tids {
            self.tasks.insert(tid, Task::new(pid, false));
            if tid != pid {
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.tasks += 1;
                }
                self.out.threads += 1;
                self.push(Record::Spawn(Spawn {
                    ts: now,
                    parent_pid: pid as u32,
                    parent_tid: pid as u32,
                    pid: pid as u32,
                    tid: tid as u32,
                    clone_flags: libc::CLONE_THREAD as u64,
                }));
            }
        }
    }

    /// Ends the recording: calls still pending are written as unfinished, then the
    /// agents' last marks and the end block. A write error is in the outcome, never lost.
    pub fn finish(mut self) -> (Outcome, W) {
        let now = self.now();
        // Anything still inside a call (attach/detach) never returned while traced.
        let pending: Vec<(Tid, Entry)> = self
            .tasks
            .iter_mut()
            .filter_map(|(&tid, t)| t.entry.take().map(|e| (tid, e)))
            .collect();
        for (tid, e) in pending {
            self.unfinished(tid, e, now);
        }
        if self.stacks.enabled() {
            self.write_marks(true, None);
        }
        let mut out = std::mem::take(&mut self.out);
        out.records = self.w.records();
        let mut notes = std::mem::take(&mut out.notes);
        if out.agent_calls > 0 {
            notes.push(format!(
                "{} calls the language agents made on their own files were not recorded",
                out.agent_calls
            ));
        }
        let c = self.stacks.agents().counters();
        if c.agents > 0 {
            notes.push(format!(
                "language agents: {} loaded, {} reports ({} the agents could not write, {} malformed); \
                 {} calls attributed to a wrapped synchronous call, {} to an asynchronous one, \
                 {} by their descriptor, {} to a repeated call's site by their path, {} to \
                 the call that started their process",
                c.agents,
                c.messages,
                c.dropped_by_agents,
                c.malformed,
                c.sync_hits,
                c.async_hits,
                c.fd_hits,
                c.sticky_hits,
                c.spawn_hits
            ));
        }
        out.notes = notes.clone();
        let end = End {
            end_ts: now,
            exit: out.exit,
            notes,
            ..End::default()
        };
        // A write that failed (a full disk) does not lose the program's status: the
        // outcome says what went wrong and how many records the trace lacks (those of the
        // blocks that failed, and those not written after), and the trace keeps its
        // complete blocks.
        let (w, err, unwritten) = self.w.finish_keeping(end);
        out.dropped += unwritten;
        if let Some(e) = err {
            if out.write_error.is_none() {
                out.write_error = Some(e.to_string());
            }
        }
        (out, w)
    }
}

impl CallMemory {
    /// Calls are read from the live, stopped process.
    pub fn live() -> CallMemory {
        CallMemory { copy: None }
    }

    /// Calls are read from copies (filled through `copy_mut` before each call).
    pub fn copied() -> CallMemory {
        CallMemory {
            copy: Some(Snapshot::default()),
        }
    }

    /// The copy, when calls are read from one.
    pub fn copy(&self) -> Option<&Snapshot> {
        self.copy.as_ref()
    }

    /// The copy to fill for the next call (reading from copies from now on).
    pub fn copy_mut(&mut self) -> &mut Snapshot {
        self.copy.get_or_insert_with(Snapshot::default)
    }

    /// Like `os::read_mem`: bytes of the call's memory at `addr`.
    pub fn read(&self, tid: Tid, addr: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        match &self.copy {
            None => os::read_mem(tid, addr, buf),
            Some(s) => s.read(addr, buf),
        }
    }

    /// Like `os::read_cstr`: the string at `addr`, at most `max` bytes.
    pub fn cstr(
        &self,
        tid: Tid,
        addr: u64,
        max: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<bool> {
        match &self.copy {
            None => os::read_cstr(tid, addr, max, out),
            Some(s) => s.cstr(addr, max, out),
        }
    }

    /// Like `os::read_mem_gather`: several ranges, in order, into one buffer.
    pub fn gather(
        &self,
        tid: Tid,
        ranges: &[(u64, usize)],
        buf: &mut Vec<u8>,
    ) -> std::io::Result<usize> {
        match &self.copy {
            None => os::read_mem_gather(tid, ranges, buf),
            Some(s) => s.read_gather(ranges, buf),
        }
    }
}
