//! The tracer: one loop over waitpid that turns ptrace stops into trace records, keeps
//! the process tree, descriptor tables and working directories, forwards signals, and
//! handles every kind of stop the way strace does (seccomp, syscall-exit, PTRACE_EVENT
//! fork/clone/exec, group-stop via PTRACE_LISTEN, signal-delivery).

use crate::decode::Entry;
use crate::error::{denied_advice, RecordError};
use crate::kernel::{self, Tid};
use crate::state::{FdTable, FsContext, Process};
use crate::{arch, seccomp, signals, spawn};
use dejavu_trace::*;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{self, Write};
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
pub(crate) struct Task {
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
}

impl Task {
    /// A task of process `pid` outside any call; `pre_exec` for the launched child.
    pub(crate) fn new(pid: Tid, pre_exec: bool) -> Task {
        Task {
            pid,
            entry: None,
            pending_ts: None,
            exec_info: None,
            pre_exec,
        }
    }
}

pub(crate) struct Tracer<W: Write> {
    pub w: TraceWriter<W>,
    pub write_failed: bool,
    pub out: Outcome,
    pub t0: u64,
    pub opts: RecordOptions,
    /// A seccomp filter stops only traced calls (launch mode); without it every call
    /// stops at entry and exit (attach mode).
    pub seccomp: bool,
    /// Decode calls at their exit stop only (seccomp mode on architectures whose
    /// argument registers survive the call): one tracer syscall less per call.
    pub exit_decode: bool,
    pub tasks: FxHashMap<Tid, Task>,
    pub procs: FxHashMap<Tid, Process>,
    /// Initial stops of new tasks whose parent's fork/clone event has not arrived yet.
    early: FxHashMap<Tid, ()>,
    /// New tasks announced by their parent's event, whose initial stop has not arrived.
    expected: FxHashMap<Tid, ()>,
    pub root: Option<Tid>,
    pub buf: Vec<u8>,
    pub buf2: Vec<u8>,
    pub warned: FxHashMap<&'static str, ()>,
    pin: crate::pin::Pinning,
    pub stacks: crate::stacks::Stacks,
    /// The agents' directory (with a trailing slash), and the trace strings under it.
    pub own_prefix: Option<Vec<u8>>,
    pub own_paths: rustc_hash::FxHashSet<u32>,
    /// The call being decoded was copied out by another backend (eBPF): the decoder
    /// reads this copy, never the live process.
    pub snap: Option<crate::snapshot::Snapshot>,
    /// What a signal meant for the program does (forward, or stop recording).
    pub policy: signals::Policy,
    /// When the launched program exited, while processes it started still ran.
    pub root_ended_at: Option<std::time::Instant>,
    /// The processes it left running were named on stderr.
    pub orphans_said: bool,
    /// Recording was stopped by this signal (the remaining processes are being ended).
    pub stopped_by: Option<i32>,
}

fn ptrace_options(seccomp: bool, launched: bool) -> i32 {
    let mut o = libc::PTRACE_O_TRACESYSGOOD
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_TRACEEXEC;
    if seccomp {
        o |= libc::PTRACE_O_TRACESECCOMP;
    }
    if seccomp && arch::ARGS_AT_EXIT {
        // A thread killed inside a call must still be decoded: its exit stop comes too
        // late, PTRACE_EVENT_EXIT does not.
        o |= libc::PTRACE_O_TRACEEXIT;
    }
    if launched {
        // If dejavu dies, so does the program: with the filter installed and no tracer,
        // every traced call would fail with ENOSYS.
        o |= libc::PTRACE_O_EXITKILL;
    }
    o
}

/// What every recording starts from: its clock origin (CLOCK_MONOTONIC ns), dejavu's
/// working directory, and the trace metadata of `backend` with the payload size given.
pub fn start(backend: &str, payload_bytes: u32) -> (u64, Vec<u8>, Meta) {
    let t0 = kernel::now_ns();
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
        ..Meta::default()
    };
    (t0, cwd, meta)
}

/// Records `target` into the trace that `make_writer` creates from the trace metadata.
pub fn record<W: Write>(
    target: Target,
    opts: &RecordOptions,
    make_writer: impl FnOnce(&Meta) -> Result<TraceWriter<W>, TraceError>,
) -> Result<(Outcome, W), RecordError> {
    let (t0, cwd, mut meta) = start("ptrace", opts.payload_bytes);
    // Caught from the start: a SIGTERM while the program is being set up is forwarded to it
    // once it runs (or ends an attach), never the death of dejavu.
    let _sig = signals::install(matches!(target, Target::Command(_)));
    match &target {
        Target::Command(argv) => {
            let (path, command) = spawn::command(argv)?;
            meta.command = command;
            meta.notes
                .push("seccomp-bpf filter: only traced calls stop the program".into());
            let mut table: Vec<u32> = arch::table().iter().map(|&(n, _)| n).collect();
            if opts.follow_cpu && arch::ARGS_AT_EXIT {
                // Intercepted so that a pinned thread never sees its pin (pin.rs).
                table.extend([
                    arch::NR_SCHED_GETAFFINITY as u32,
                    arch::NR_SCHED_SETAFFINITY as u32,
                ]);
            }
            let filter = seccomp::build_filter_checked(
                arch::AUDIT_ARCH,
                &table,
                &arch::seccomp_arg_checks(),
            );
            let mut stacks = crate::stacks::Stacks::new(opts.stacks);
            let (env, inherit) = stacks.program_env();
            let child = spawn::fork_child(&path, argv, Some(&filter), &env, inherit)?;
            let pid = child.pid;
            let res = (|| {
                spawn::wait_stopped(&child, &path)?;
                if let Err(e) = kernel::seize(pid, ptrace_options(true, true)) {
                    let _ = kernel::kill(pid, libc::SIGKILL);
                    let _ = kernel::wait_one(pid, libc::__WALL);
                    return Err(denied(e, false, Some(pid)));
                }
                let w = make_writer(&meta)?;
                let mut t = Tracer::new(w, t0, opts.clone(), true);
                t.set_stacks(std::mem::replace(
                    &mut stacks,
                    crate::stacks::Stacks::new(crate::stacks::StackMode::Off),
                ));
                t.launched(pid, Rc::from(cwd.as_slice()));
                kernel::kill(pid, libc::SIGCONT)
                    .map_err(|e| RecordError::os("kill(SIGCONT)", e))?;
                t.run()?;
                Ok(t)
            })();
            let t = res?;
            if let Some((stage, errno)) = child.failure() {
                if stage == 2 && t.out.exit == Some(ExitStatus::Code(127)) {
                    return Err(spawn::exec_error(&path, errno));
                }
            }
            t.finish()
        }
        Target::Attach(pids) => {
            for &p in pids {
                if !std::path::Path::new(&format!("/proc/{p}")).exists() {
                    return Err(RecordError::NoSuchProcess(p));
                }
            }
            meta.attached = pids.iter().map(|&p| p as u32).collect();
            meta.command = pids
                .first()
                .map(|&p| crate::decode::proc_cmdline(p))
                .unwrap_or_default();
            if let Some(&p) = pids.first() {
                if let Ok(c) = kernel::readlink(format!("/proc/{p}/cwd").as_bytes()) {
                    meta.cwd = String::from_utf8_lossy(&c).into_owned();
                }
            }
            meta.notes
                .push("attached: every call stops the program (no seccomp filter)".into());
            // Seize first: a refused attach must not leave an empty trace behind.
            let mut seized = Vec::new();
            for &p in pids {
                seized.push((p, seize_threads(p)?));
            }
            let w = make_writer(&meta)?;
            let mut t = Tracer::new(w, t0, opts.clone(), false);
            t.out.detached = true;
            for (p, tids) in &seized {
                t.attach_process(*p, tids);
            }
            t.run()?;
            t.finish()
        }
    }
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

fn denied(e: io::Error, attaching: bool, pid: Option<i32>) -> RecordError {
    if let Some(what) = pid.filter(|_| attaching).and_then(unattachable) {
        return RecordError::Unattachable(what);
    }
    if e.raw_os_error() == Some(libc::EPERM) || e.raw_os_error() == Some(libc::ENOSYS) {
        RecordError::Denied {
            what: format!("ptrace(PTRACE_SEIZE, {}): {e}", pid.unwrap_or(0)),
            advice: denied_advice(attaching, pid),
        }
    } else if e.raw_os_error() == Some(libc::ESRCH) {
        RecordError::NoSuchProcess(pid.unwrap_or(0))
    } else {
        RecordError::os("ptrace(PTRACE_SEIZE)", e)
    }
}

use std::os::unix::ffi::{OsStrExt, OsStringExt};

impl<W: Write> Tracer<W> {
    pub(crate) fn new(w: TraceWriter<W>, t0: u64, opts: RecordOptions, seccomp: bool) -> Self {
        Tracer {
            w,
            write_failed: false,
            out: Outcome::default(),
            t0,
            pin: crate::pin::Pinning::new(seccomp && arch::ARGS_AT_EXIT && opts.follow_cpu),
            stacks: crate::stacks::Stacks::new(opts.stacks),
            own_prefix: None,
            own_paths: rustc_hash::FxHashSet::default(),
            snap: None,
            opts,
            seccomp,
            exit_decode: seccomp && arch::ARGS_AT_EXIT,
            tasks: FxHashMap::default(),
            procs: FxHashMap::default(),
            early: FxHashMap::default(),
            expected: FxHashMap::default(),
            root: None,
            buf: Vec::with_capacity(4096),
            buf2: Vec::with_capacity(4096),
            warned: FxHashMap::default(),
            policy: signals::Policy::default(),
            root_ended_at: None,
            orphans_said: false,
            stopped_by: None,
        }
    }

    /// At each tick (twice a second): the pending records reach the file within about a
    /// second even when no new one comes, and a launched program that exited leaving processes running is said.
    pub(crate) fn tick(&mut self) {
        let now = self.now();
        if !self.write_failed {
            if let Err(e) = self.w.flush_if_older(now, signals::TICK.as_nanos() as u64) {
                self.write_failed = true;
                self.out.write_error = Some(e.to_string());
                eprintln!("dejavu: cannot write the trace ({e}); the program keeps running, events from now on are lost");
            }
        }
        // (Launch mode under ptrace; the eBPF recorder says it for its own.)
        if self.seccomp
            && !self.orphans_said
            && self.stopped_by.is_none()
            && self
                .root_ended_at
                .is_some_and(|t| t.elapsed() >= std::time::Duration::from_secs(1))
        {
            let left = self.left_running();
            if !left.is_empty() {
                self.orphans_said = true;
                let names = process_names(&left);
                eprintln!(
                    "dejavu: the program exited ({}) and left running: {}. Recording goes on \
                     until they end; Ctrl-C (or SIGTERM) stops it and ends them (under ptrace \
                     a process cannot run on untraced: its traced calls would fail once \
                     dejavu let go; --backend ebpf leaves them running)",
                    self.out.exit.map_or_else(String::new, |e| exit_text(&e)),
                    names.join(", "),
                );
            }
        }
    }

    /// The processes still traced (the launched program's leftovers once it exited).
    pub(crate) fn left_running(&self) -> Vec<Tid> {
        let mut pids: Vec<Tid> = self.tasks.values().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    pub fn now(&self) -> u64 {
        kernel::now_ns().saturating_sub(self.t0)
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
    pub(crate) fn set_stacks(&mut self, stacks: crate::stacks::Stacks) {
        self.stacks = stacks;
        self.own_prefix = self.stacks.agents().dir().map(|d| {
            let mut p = d.as_os_str().as_bytes().to_vec();
            p.push(b'/');
            p
        });
    }

    /// The program dejavu started, stopped before its exec: its process, its first task,
    /// the descriptors it has now, and its Spawn record.
    pub(crate) fn launched(&mut self, pid: Tid, cwd: Rc<[u8]>) {
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

    pub(crate) fn add_process(&mut self, pid: Tid, cwd: Rc<[u8]>, fds: FdTable) {
        self.procs.insert(
            pid,
            Process {
                fds: Rc::new(RefCell::new(fds)),
                fs: Rc::new(RefCell::new(FsContext { cwd })),
                tasks: 1,
            },
        );
        self.out.processes += 1;
    }

    fn resume(&mut self, tid: Tid, sig: i32) {
        let in_call = self
            .tasks
            .get(&tid)
            .is_some_and(|t| t.entry.is_some() || t.pending_ts.is_some());
        let r = if !self.seccomp || in_call {
            kernel::syscall(tid, sig)
        } else {
            kernel::cont(tid, sig)
        };
        // ESRCH: the task was killed meanwhile (SIGKILL, exit_group from another thread);
        // its exit is reported by waitpid.
        if let Err(e) = r {
            if e.raw_os_error() != Some(libc::ESRCH) {
                self.warn_once("resume", format!("could not resume task {tid}: {e}"));
            }
        }
    }

    /// The main loop: until no traced task is left.
    fn run(&mut self) -> Result<(), RecordError> {
        let _tick = signals::Ticker::start();
        loop {
            if signals::take_tick() {
                self.tick();
            }
            while let Some((sig, from_tty)) = signals::take() {
                if self.handle_own_signal(sig, from_tty) {
                    return Ok(());
                }
            }
            if self.tasks.is_empty() && self.early.is_empty() {
                return Ok(());
            }
            let (tid, status) = match kernel::wait_any() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => return Ok(()),
                Err(e) => return Err(RecordError::os("waitpid", e)),
            };
            let now = self.now();
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                let st = if libc::WIFEXITED(status) {
                    ExitStatus::Code(libc::WEXITSTATUS(status))
                } else {
                    ExitStatus::Signal {
                        signal: libc::WTERMSIG(status),
                        core: libc::WCOREDUMP(status),
                    }
                };
                self.task_exited(tid, st, now);
                continue;
            }
            if !libc::WIFSTOPPED(status) {
                continue;
            }
            if !self.tasks.contains_key(&tid) {
                // A new task reporting before its parent's fork/clone event: keep it
                // stopped until we know whose it is.
                if self.expected.remove(&tid).is_none() {
                    self.early.insert(tid, ());
                    continue;
                }
            }
            self.pin.observe(tid, now);
            let sig = libc::WSTOPSIG(status);
            let event = (status >> 16) & 0xff;
            if sig == (libc::SIGTRAP | 0x80) {
                self.syscall_stop(tid, now);
            } else if event == libc::PTRACE_EVENT_SECCOMP {
                self.seccomp_stop(tid, now);
            } else if event == libc::PTRACE_EVENT_FORK
                || event == libc::PTRACE_EVENT_VFORK
                || event == libc::PTRACE_EVENT_CLONE
            {
                self.clone_event(tid, event, now);
                self.resume(tid, 0);
            } else if event == libc::PTRACE_EVENT_EXEC {
                self.exec_event(tid, now);
                self.resume(tid, 0);
            } else if event == libc::PTRACE_EVENT_EXIT {
                self.exit_event(tid, now);
                self.resume(tid, 0);
            } else if event == libc::PTRACE_EVENT_STOP {
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) {
                    // Group-stop: stay stopped as the program asked, but let the kernel
                    // tell us about SIGCONT.
                    if let Err(e) = kernel::listen(tid) {
                        if e.raw_os_error() != Some(libc::ESRCH) {
                            self.resume(tid, 0);
                        }
                    }
                } else {
                    // Initial stop of a new task, or PTRACE_INTERRUPT, or SIGCONT after
                    // a listen.
                    self.resume(tid, 0);
                }
            } else {
                // Signal-delivery-stop: the program's own signal; deliver it.
                let pre_exec = self.tasks.get(&tid).is_some_and(|t| t.pre_exec);
                if pre_exec && sig == libc::SIGCONT {
                    // Our own SIGCONT that woke the child after seize.
                    self.resume(tid, 0);
                    continue;
                }
                let pid = self.tasks.get(&tid).map_or(tid, |t| t.pid);
                self.push(Record::Signal(Signal {
                    ts: now,
                    pid: pid as u32,
                    tid: tid as u32,
                    signal: sig,
                }));
                self.resume(tid, sig);
            }
        }
    }

    /// A signal to dejavu itself. Returns true when the loop should end (detached).
    fn handle_own_signal(&mut self, sig: i32, from_tty: bool) -> bool {
        if self.seccomp {
            // We started the program: it decides what the signal means (a terminal
            // already delivered it to the program's process group), until a second
            // request to stop soon after the first, or the first once the program has
            // exited, stops the recording.
            let ended = self.out.exit.is_some();
            match self.policy.on_signal(sig, ended) {
                signals::Action::Forward => {
                    if !from_tty {
                        if let Some(root) = self.root.filter(|r| self.tasks.contains_key(r)) {
                            let _ = kernel::kill(root, sig);
                        }
                    }
                }
                signals::Action::Stop => self.stop_recording(sig, ended),
            }
            false
        } else {
            if self.opts.verbose {
                eprintln!("dejavu: detaching after {}", signal_name(sig));
            }
            self.detach_all();
            true
        }
    }

    /// Stops recording after `sig` (a second request to stop, or one after the program
    /// exited): every process still traced is ended with SIGKILL (under ptrace a process
    /// cannot be let go: its seccomp filter would make its traced calls fail with ENOSYS),
    /// and the loop ends as they exit.
    fn stop_recording(&mut self, sig: i32, ended: bool) {
        if self.stopped_by.is_some() {
            return;
        }
        self.stopped_by = Some(sig);
        let left = self.left_running();
        let names = process_names(&left);
        eprintln!(
            "dejavu: {}: stopped recording; ended {} (under ptrace a traced process cannot run \
             on untraced; --backend ebpf leaves it running)",
            if ended {
                signal_name(sig)
            } else {
                format!(
                    "a second {} within {} s",
                    signal_name(sig),
                    signals::SECOND_SIGNAL.as_secs()
                )
            },
            if names.is_empty() {
                "nothing: no process was left".to_string()
            } else {
                names.join(", ")
            }
        );
        for p in left {
            let _ = kernel::kill(p, libc::SIGKILL);
        }
    }

    /// Detaches from every task, leaving the processes running.
    fn detach_all(&mut self) {
        let now = self.now();
        let tids: Vec<Tid> = self.tasks.keys().copied().collect();
        for &tid in &tids {
            let _ = kernel::interrupt(tid);
        }
        let mut left: FxHashMap<Tid, ()> = tids.iter().map(|&t| (t, ())).collect();
        while !left.is_empty() {
            let (tid, status) = match kernel::wait_any() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                left.remove(&tid);
                continue;
            }
            let sig = libc::WSTOPSIG(status);
            let event = (status >> 16) & 0xff;
            // Pass the program's own pending signal along; tracer stops pass nothing.
            let deliver = if event == 0 && sig != (libc::SIGTRAP | 0x80) {
                sig
            } else {
                0
            };
            let _ = kernel::detach(tid, deliver);
            left.remove(&tid);
        }
        for tid in tids {
            if let Some(entry) = self.tasks.get_mut(&tid).and_then(|t| t.entry.take()) {
                self.unfinished(tid, entry, now);
            }
        }
        self.tasks.clear();
    }

    fn seccomp_stop(&mut self, tid: Tid, now: u64) {
        if self.exit_decode {
            if let Some(t) = self.tasks.get_mut(&tid) {
                t.pending_ts = Some(now);
            }
            self.resume(tid, 0);
            return;
        }
        match kernel::syscall_info(tid) {
            Ok(kernel::SyscallInfo::Entry { arch, nr, args }) => {
                self.entry(tid, arch, nr, args, now)
            }
            _ => self.resume(tid, 0),
        }
    }

    fn syscall_stop(&mut self, tid: Tid, now: u64) {
        if let Some(ts) = self.tasks.get_mut(&tid).and_then(|t| t.pending_ts.take()) {
            self.exit_decoded(tid, ts, now);
            self.resume(tid, 0);
            return;
        }
        match kernel::syscall_info(tid) {
            Ok(kernel::SyscallInfo::Entry { arch, nr, args }) => {
                self.entry(tid, arch, nr, args, now)
            }
            Ok(kernel::SyscallInfo::Exit { rval, .. }) => {
                let entry = self.tasks.get_mut(&tid).and_then(|t| t.entry.take());
                if let Some(e) = entry {
                    self.exit(tid, e, rval, now);
                }
                self.resume(tid, 0);
            }
            _ => self.resume(tid, 0),
        }
    }

    fn entry(&mut self, tid: Tid, audit_arch: u32, nr: u64, args: [u64; 6], now: u64) {
        if audit_arch != arch::AUDIT_ARCH {
            // Attach mode sees a 32-bit program's calls; we do not decode that ABI.
            self.warn_once(
                "abi",
                "a traced process uses a 32-bit ABI; its calls are not recorded".into(),
            );
            self.resume(tid, 0);
            return;
        }
        let Some(sys) = arch::sys_of(nr).filter(|&s| arch::traced_call(s, &args)) else {
            self.resume(tid, 0);
            return;
        };
        let Some(pid) = self.tasks.get(&tid).map(|t| t.pid) else {
            self.resume(tid, 0);
            return;
        };
        let mut e = self.decode_entry(tid, pid, sys, args, now);
        if self.stacks.enabled() {
            // Entry decoding (attach mode, aarch64): the stack is the entry stop's.
            if let Ok(regs) = arch::syscall_regs(tid) {
                let call = crate::stacks::call_ref(&e.call);
                e.call.stack = self.stacks.capture(&mut self.w, pid, tid, &regs, call);
            }
        }
        if let Some(t) = self.tasks.get_mut(&tid) {
            if let Some(old) = t.entry.replace(e) {
                // An entry without exit: should not happen, keep it honest.
                self.unfinished(tid, old, now);
            }
        }
        self.resume(tid, 0);
    }

    pub fn unfinished(&mut self, _tid: Tid, e: Entry, _now: u64) {
        let mut c = e.call;
        c.ev |= ev::UNFINISHED;
        self.push(Record::Syscall(c));
    }

    /// Fast path: the whole call, decoded at its exit stop from the registers.
    fn exit_decoded(&mut self, tid: Tid, ts: u64, now: u64) {
        let Ok(regs) = arch::syscall_regs(tid) else {
            return;
        };
        let (nr, args, ret) = (regs.nr, regs.args, regs.ret);
        if nr == arch::NR_SCHED_GETAFFINITY || nr == arch::NR_SCHED_SETAFFINITY {
            self.affinity_call(tid, nr, &args, ret);
            return;
        }
        let Some(sys) = arch::sys_of(nr).filter(|&s| arch::traced_call(s, &args)) else {
            return;
        };
        let Some(task) = self.tasks.get_mut(&tid) else {
            return;
        };
        let pid = task.pid;
        if let (Sys::Execve | Sys::Execveat, Some((exe, argv))) = (sys, task.exec_info.take()) {
            // A successful exec: the registers and memory belong to the new program.
            let mut c = Syscall::new(ts, pid as u32, tid as u32, sys);
            c.dur = now.saturating_sub(ts);
            c.ret = ret;
            c.path = Some(self.w.intern(&exe));
            c.payload = Some(self.w.intern(&argv));
            c.stack = self.stacks.exec_stack(&mut self.w, pid, tid);
            self.push(Record::Syscall(c));
            return;
        }
        let mut e = self.decode_entry(tid, pid, sys, args, ts);
        e.at_exit = true;
        let call = crate::stacks::call_ref(&e.call);
        e.call.stack = self.stacks.capture(&mut self.w, pid, tid, &regs, call);
        self.exit(tid, e, ret, now);
    }

    /// sched_getaffinity/sched_setaffinity (traced only for CPU placement, never
    /// recorded): a pinned thread is told the mask it would have had; a thread that sets
    /// an affinity keeps it.
    fn affinity_call(&mut self, tid: Tid, nr: u64, args: &[u64; 6], ret: i64) {
        let target = match args[0] as u32 as i32 {
            0 => tid,
            t => t,
        };
        if nr == arch::NR_SCHED_GETAFFINITY {
            // ret: bytes the kernel copied into the buffer.
            if ret > 0 && self.pin.is_pinned(target) {
                let mask = self.pin.mask_of(target);
                let n = (ret as usize).min(mask.len());
                let _ = kernel::write_mem(tid, args[2], &mask[..n]);
            }
        } else if ret == 0 {
            let mut mask = [0u8; 128];
            let n = (args[1] as usize).min(mask.len());
            if kernel::read_mem(tid, args[2], &mut mask[..n]).is_ok() {
                self.pin.user_set(target, mask);
            }
        }
    }

    /// PTRACE_EVENT_EXIT: the task is about to die. A call it was inside never
    /// returns; decode it now, while its registers are still readable.
    fn exit_event(&mut self, tid: Tid, now: u64) {
        let Some(ts) = self.tasks.get_mut(&tid).and_then(|t| t.pending_ts.take()) else {
            return;
        };
        let Ok(regs) = arch::syscall_regs(tid) else {
            return;
        };
        let (nr, args) = (regs.nr, regs.args);
        let Some(sys) = arch::sys_of(nr).filter(|&s| arch::traced_call(s, &args)) else {
            return;
        };
        let Some(pid) = self.tasks.get(&tid).map(|t| t.pid) else {
            return;
        };
        let e = self.decode_entry(tid, pid, sys, args, ts);
        self.unfinished(tid, e, now);
    }

    fn clone_event(&mut self, tid: Tid, event: i32, now: u64) {
        let Ok(child) = kernel::event_msg(tid) else {
            return;
        };
        let child = child as Tid;
        let Some(parent) = self.tasks.get_mut(&tid) else {
            return;
        };
        let ppid = parent.pid;
        // The clone call is still in progress: its registers hold its arguments.
        let flags = match arch::syscall_regs(tid) {
            Ok(r) => crate::decode::clone_flags(tid, r.nr, &r.args),
            Err(_) => match event {
                libc::PTRACE_EVENT_FORK => libc::SIGCHLD as u64,
                libc::PTRACE_EVENT_VFORK => {
                    (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64
                }
                _ => thread_flags_from_proc(child),
            },
        };
        self.new_task(tid, ppid, child, flags, now);
        self.pin.on_clone(tid, child);
        if self.early.remove(&child).is_some() {
            self.resume(child, 0);
        } else {
            self.expected.insert(child, ());
        }
    }

    /// Task `child` was created by `tid` (of process `ppid`) with clone `flags`: a new
    /// thread of `ppid`, or a new process with a copy or a share of its descriptor table
    /// and working directory.
    pub(crate) fn new_task(&mut self, tid: Tid, ppid: Tid, child: Tid, flags: u64, now: u64) {
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
            self.procs.insert(child, Process { fds, fs, tasks: 1 });
            self.out.processes += 1;
            // A process started inside a wrapped call (a spawn) is that call's.
            self.stacks.on_fork(&mut self.w, ppid, tid, child);
            self.stacks.forked(ppid, child);
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

    fn exec_event(&mut self, tid: Tid, now: u64) {
        let former = kernel::event_msg(tid).map(|v| v as Tid).unwrap_or(tid);
        let Some(pid) = self.exec_begin(tid, former, now) else {
            return;
        };
        let (exe, argv) = match self
            .tasks
            .get(&tid)
            .and_then(|t| t.entry.as_ref())
            .and_then(|e| e.exec.clone())
        {
            Some(x) => x,
            None => {
                // Decoding at exit: the old memory is gone, but the kernel left the
                // path as given to execve on the new stack (AT_EXECFN), and argv.
                let exe = crate::decode::exec_path(self, pid);
                let argv = crate::decode::proc_cmdline(pid).join("\0").into_bytes();
                (exe, argv)
            }
        };
        let keep = self.tasks.get(&tid).is_some_and(|t| t.pending_ts.is_some());
        self.exec_end(tid, pid, exe, argv, keep, now);
    }

    /// Thread `former` exec'd and is now `tid` (the process's leader): the process's other
    /// threads are gone and its close-on-exec descriptors closed. Returns the process.
    pub(crate) fn exec_begin(&mut self, tid: Tid, former: Tid, now: u64) -> Option<Tid> {
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
    pub(crate) fn exec_end(
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
        let exe = self.w.intern(&exe);
        let argv = self.w.intern(&argv);
        self.push(Record::Exec(Exec {
            ts: now,
            pid: pid as u32,
            tid: tid as u32,
            exe,
            argv,
        }));
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

    pub(crate) fn task_exited(&mut self, tid: Tid, st: ExitStatus, now: u64) {
        self.early.remove(&tid);
        self.expected.remove(&tid);
        let Some(mut task) = self.tasks.remove(&tid) else {
            return;
        };
        self.pin.on_exit(tid);
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
            }
        }
        if Some(tid) == self.root {
            self.out.exit = Some(st);
            self.root_ended_at = Some(std::time::Instant::now());
        }
    }

    /// Registers a process seized by `seize_threads`: its tree, command line, threads.
    pub(crate) fn attach_process(&mut self, pid: Tid, tids: &[Tid]) {
        let now = self.now();
        let cwd = kernel::readlink(format!("/proc/{pid}/cwd").as_bytes())
            .unwrap_or_else(|_| b"/".to_vec());
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
        let exe = kernel::readlink(format!("/proc/{pid}/exe").as_bytes()).unwrap_or_default();
        let argv = crate::decode::proc_cmdline(pid).join("\0").into_bytes();
        let (exe, argv) = (self.w.intern(&exe), self.w.intern(&argv));
        self.push(Record::Exec(Exec {
            ts: now,
            pid: pid as u32,
            tid: pid as u32,
            exe,
            argv,
        }));
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
            // Its interrupt stop arrives in the main loop like any new task's.
            if self.snap.is_none() {
                self.expected.insert(tid, ());
            }
        }
    }

    pub(crate) fn finish(mut self) -> Result<(Outcome, W), RecordError> {
        self.pin.unpin();
        self.out.pins = self.pin.pins;
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
        Ok((out, w))
    }
}

/// Seizes every thread of `pid` and asks each to stop. Threads can appear while we
/// attach, so the task list is read until no new one shows up. On failure the tasks
/// already seized are released when dejavu exits (the kernel detaches them).
fn seize_threads(pid: Tid) -> Result<Vec<Tid>, RecordError> {
    let mut seized: Vec<Tid> = Vec::new();
    loop {
        let mut new = 0;
        let dir = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(|_| RecordError::NoSuchProcess(pid))?;
        for ent in dir.flatten() {
            let Some(tid) = ent.file_name().to_str().and_then(|s| s.parse::<Tid>().ok()) else {
                continue;
            };
            if seized.contains(&tid) {
                continue;
            }
            match kernel::seize(tid, ptrace_options(false, false)) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => continue,
                Err(e) => return Err(denied(e, true, Some(pid))),
            }
            let _ = kernel::interrupt(tid);
            seized.push(tid);
            new += 1;
        }
        if new == 0 {
            break;
        }
    }
    Ok(seized)
}

fn thread_flags_from_proc(tid: Tid) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).unwrap_or_default();
    let field = |name: &str| {
        s.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|v| v.trim().parse::<i32>().ok())
        })
    };
    match (field("Tgid:"), field("Pid:")) {
        (Some(tg), Some(p)) if tg != p => {
            (libc::CLONE_THREAD | libc::CLONE_FILES | libc::CLONE_FS | libc::CLONE_VM) as u64
        }
        _ => libc::SIGCHLD as u64,
    }
}

fn proc_ppid(pid: Tid) -> Tid {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.to_string()))
        .and_then(|rest| rest.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// A signal's name for messages.
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
        ExitStatus::Signal { signal, .. } => format!("killed by {}", signal_name(signal)),
    }
}

pub fn signal_name(sig: i32) -> String {
    let names = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match names.get(sig as usize) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => format!("signal {sig}"),
    }
}
