//! The tracer: one loop over waitpid that turns ptrace stops into trace records, keeps
//! the process tree, descriptor tables and working directories, forwards signals, and
//! handles every kind of stop the way strace does (seccomp, syscall-exit, PTRACE_EVENT
//! fork/clone/exec, group-stop via PTRACE_LISTEN, signal-delivery).

use crate::kernel;
use crate::regs::syscall_regs;
use crate::seccomp;
use dejavu_capture::os::{self, Tid};
use dejavu_capture::{
    arch, denied_advice, exit_text, process_names, signals, spawn, start, unattachable, CallMemory,
    Capture, Outcome, RecordError, RecordOptions, Target,
};
use dejavu_trace::names::signal_label;
use dejavu_trace::*;
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use std::rc::Rc;

pub(crate) struct Tracer<W: Write> {
    /// What both backends keep: tasks, processes, stacks, the trace.
    core: Capture<W>,
    /// A seccomp filter stops only traced calls (launch mode); without it every call
    /// stops at entry and exit (attach mode).
    seccomp: bool,
    /// Decode calls at their exit stop only (seccomp mode on architectures whose
    /// argument registers survive the call): one tracer syscall less per call.
    exit_decode: bool,
    /// Initial stops of new tasks whose parent's fork/clone event has not arrived yet.
    early: FxHashMap<Tid, ()>,
    /// New tasks announced by their parent's event, whose initial stop has not arrived.
    expected: FxHashMap<Tid, ()>,
    pin: crate::pin::Pinning,
    /// What a signal meant for the program does (forward, or stop recording).
    policy: signals::Policy,
    /// The processes the launched program left running were named on stderr.
    orphans_said: bool,
    /// Recording was stopped by this signal (the remaining processes are being ended).
    stopped_by: Option<i32>,
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
            if opts.stacks.on() {
                // For the trace's Unmap records (dejavu_capture::codemaps), not recorded.
                table.push(arch::NR_MUNMAP as u32);
            }
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
            let mut stacks = dejavu_capture::stacks::Stacks::new(opts.stacks);
            let (env, inherit) = stacks.program_env();
            // The agents' writes on their descriptor are let through before the traced set.
            let filter = match &inherit {
                Some(i) => {
                    seccomp::allow_on_fd(&filter, arch::AUDIT_ARCH, i.at as u32, &i.untraced)
                }
                None => filter,
            };
            let child = spawn::fork_child(&path, argv, Some(&filter), &env, inherit)?;
            let pid = child.pid;
            let res = (|| {
                spawn::wait_stopped(&child, &path)?;
                if let Err(e) = kernel::seize(pid, ptrace_options(true, true)) {
                    let _ = os::kill(pid, libc::SIGKILL);
                    let _ = os::wait_one(pid, libc::__WALL);
                    return Err(denied(e, false, Some(pid)));
                }
                let w = make_writer(&meta)?;
                let mut t = Tracer::new(w, t0, opts.clone(), true);
                t.core.set_stacks(std::mem::replace(
                    &mut stacks,
                    dejavu_capture::stacks::Stacks::new(dejavu_capture::StackMode::Off),
                ));
                t.core.launched(pid, Rc::from(cwd.as_slice()));
                os::kill(pid, libc::SIGCONT).map_err(|e| RecordError::os("kill(SIGCONT)", e))?;
                t.run()?;
                Ok(t)
            })();
            let t = res?;
            if let Some((stage, errno)) = child.failure() {
                if stage == 2 && t.core.out.exit == Some(ExitStatus::Code(127)) {
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
                .map(|&p| dejavu_capture::proc_cmdline(p))
                .unwrap_or_default();
            if let Some(&p) = pids.first() {
                if let Ok(c) = os::readlink(format!("/proc/{p}/cwd").as_bytes()) {
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
            t.core.out.detached = true;
            for (p, tids) in &seized {
                t.attach_process(*p, tids);
            }
            t.run()?;
            t.finish()
        }
    }
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

impl<W: Write> Tracer<W> {
    pub(crate) fn new(w: TraceWriter<W>, t0: u64, opts: RecordOptions, seccomp: bool) -> Self {
        Tracer {
            pin: crate::pin::Pinning::new(seccomp && arch::ARGS_AT_EXIT && opts.follow_cpu),
            core: Capture::new(w, t0, opts, CallMemory::live()),
            seccomp,
            exit_decode: seccomp && arch::ARGS_AT_EXIT,
            early: FxHashMap::default(),
            expected: FxHashMap::default(),
            policy: signals::Policy::default(),
            orphans_said: false,
            stopped_by: None,
        }
    }

    /// At each tick (twice a second): the pending records reach the file within about a
    /// second even when no new one comes, and a launched program that exited leaving
    /// processes running is said.
    fn tick(&mut self) {
        self.core.tick();
        if self.seccomp
            && !self.orphans_said
            && self.stopped_by.is_none()
            && self
                .core
                .root_ended_at
                .is_some_and(|t| t.elapsed() >= std::time::Duration::from_secs(1))
        {
            let left = self.core.left_running();
            if !left.is_empty() {
                self.orphans_said = true;
                let names = process_names(&left);
                eprintln!(
                    "dejavu: the program exited ({}) and left running: {}. Recording goes on \
                     until they end; Ctrl-C (or SIGTERM) stops it and ends them (under ptrace \
                     a process cannot run on untraced: its traced calls would fail once \
                     dejavu let go; --backend ebpf leaves them running)",
                    self.core
                        .out
                        .exit
                        .map_or_else(String::new, |e| exit_text(&e)),
                    names.join(", "),
                );
            }
        }
    }

    fn task_exited(&mut self, tid: Tid, st: ExitStatus, now: u64) {
        self.early.remove(&tid);
        self.expected.remove(&tid);
        self.pin.on_exit(tid);
        self.core.task_exited(tid, st, now);
    }

    /// Registers a process seized by `seize_threads`: its tree, command line, threads.
    fn attach_process(&mut self, pid: Tid, tids: &[Tid]) {
        self.core.attach_process(pid, tids);
        // Their interrupt stops arrive in the main loop like any new task's.
        for &tid in tids {
            self.expected.insert(tid, ());
        }
    }

    fn finish(mut self) -> Result<(Outcome, W), RecordError> {
        self.pin.unpin();
        self.core.out.pins = self.pin.pins;
        Ok(self.core.finish())
    }

    fn resume(&mut self, tid: Tid, sig: i32) {
        let in_call = self
            .core
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
                self.core
                    .warn_once("resume", format!("could not resume task {tid}: {e}"));
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
            if self.core.tasks.is_empty() && self.early.is_empty() {
                return Ok(());
            }
            let (tid, status) = match os::wait_any() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => return Ok(()),
                Err(e) => return Err(RecordError::os("waitpid", e)),
            };
            let now = self.core.now();
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
            if !self.core.tasks.contains_key(&tid) {
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
                let pre_exec = self.core.tasks.get(&tid).is_some_and(|t| t.pre_exec);
                if pre_exec && sig == libc::SIGCONT {
                    // Our own SIGCONT that woke the child after seize.
                    self.resume(tid, 0);
                    continue;
                }
                let pid = self.core.tasks.get(&tid).map_or(tid, |t| t.pid);
                self.core.push(Record::Signal(Signal {
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
            let ended = self.core.out.exit.is_some();
            match self.policy.on_signal(sig, ended) {
                signals::Action::Forward => {
                    if !from_tty {
                        if let Some(root) =
                            self.core.root.filter(|r| self.core.tasks.contains_key(r))
                        {
                            let _ = os::kill(root, sig);
                        }
                    }
                }
                signals::Action::Stop => self.stop_recording(sig, ended),
            }
            false
        } else {
            if self.core.opts.verbose {
                eprintln!("dejavu: detaching after {}", signal_label(sig));
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
        let left = self.core.left_running();
        let names = process_names(&left);
        eprintln!(
            "dejavu: {}: stopped recording; ended {} (under ptrace a traced process cannot run \
             on untraced; --backend ebpf leaves it running)",
            if ended {
                signal_label(sig).into_owned()
            } else {
                format!(
                    "a second {} within {} s",
                    signal_label(sig),
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
            let _ = os::kill(p, libc::SIGKILL);
        }
    }

    /// Detaches from every task, leaving the processes running.
    fn detach_all(&mut self) {
        let now = self.core.now();
        let tids: Vec<Tid> = self.core.tasks.keys().copied().collect();
        for &tid in &tids {
            let _ = kernel::interrupt(tid);
        }
        let mut left: FxHashMap<Tid, ()> = tids.iter().map(|&t| (t, ())).collect();
        while !left.is_empty() {
            let (tid, status) = match os::wait_any() {
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
            if let Some(entry) = self.core.tasks.get_mut(&tid).and_then(|t| t.entry.take()) {
                self.core.unfinished(tid, entry, now);
            }
        }
        self.core.tasks.clear();
    }

    fn seccomp_stop(&mut self, tid: Tid, now: u64) {
        if self.exit_decode {
            let mut entry_stack = false;
            if let Some(t) = self.core.tasks.get_mut(&tid) {
                t.pending_ts = Some(now);
                entry_stack = t.exec_entry_stack;
            }
            if entry_stack {
                self.exec_entry_stack(tid);
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
        if let Some(ts) = self
            .core
            .tasks
            .get_mut(&tid)
            .and_then(|t| t.pending_ts.take())
        {
            self.exit_decoded(tid, ts, now);
            self.resume(tid, 0);
            return;
        }
        match kernel::syscall_info(tid) {
            Ok(kernel::SyscallInfo::Entry { arch, nr, args }) => {
                self.entry(tid, arch, nr, args, now)
            }
            Ok(kernel::SyscallInfo::Exit { rval, .. }) => {
                let entry = self.core.tasks.get_mut(&tid).and_then(|t| t.entry.take());
                if let Some(e) = entry {
                    self.core.exit(tid, e, rval, now);
                }
                self.resume(tid, 0);
            }
            _ => self.resume(tid, 0),
        }
    }

    fn entry(&mut self, tid: Tid, audit_arch: u32, nr: u64, args: [u64; 6], now: u64) {
        if audit_arch != arch::AUDIT_ARCH {
            // Attach mode sees a 32-bit program's calls; we do not decode that ABI.
            self.core.warn_once(
                "abi",
                "a traced process uses a 32-bit ABI; its calls are not recorded".into(),
            );
            self.resume(tid, 0);
            return;
        }
        if nr == arch::NR_MUNMAP {
            // Decoding at entry (attach mode, aarch64): recorded as the call starts (an
            // munmap of a mapped range does not fail).
            if let Some(pid) = self.core.tasks.get(&tid).map(|t| t.pid) {
                self.core.code_unmapped(pid, now, args[0], args[1]);
            }
            self.resume(tid, 0);
            return;
        }
        let Some(sys) = arch::sys_of(nr).filter(|&s| arch::traced_call(s, &args)) else {
            self.resume(tid, 0);
            return;
        };
        let Some(pid) = self.core.tasks.get(&tid).map(|t| t.pid) else {
            self.resume(tid, 0);
            return;
        };
        let mut e = self.core.decode_entry(tid, pid, sys, args, now);
        if self.core.stacks.enabled() {
            // Entry decoding (attach mode, aarch64): the stack is the entry stop's.
            if let Ok(regs) = syscall_regs(tid) {
                let call = dejavu_capture::stacks::call_ref(&e.call);
                e.call.stack = self
                    .core
                    .stacks
                    .capture(&mut self.core.w, pid, tid, &regs, call);
            }
        }
        if let Some(t) = self.core.tasks.get_mut(&tid) {
            if let Some(old) = t.entry.replace(e) {
                // An entry without exit: should not happen, keep it honest.
                self.core.unfinished(tid, old, now);
            }
        }
        self.resume(tid, 0);
    }

    /// At a call's entry in a vfork-like child (see `Task::exec_entry_stack`): an exec's
    /// native stack, taken while the old program's memory is there.
    fn exec_entry_stack(&mut self, tid: Tid) {
        let Ok(regs) = syscall_regs(tid) else {
            return;
        };
        if !matches!(arch::sys_of(regs.nr), Some(Sys::Execve | Sys::Execveat)) {
            return;
        }
        let Some(pid) = self.core.tasks.get(&tid).map(|t| t.pid) else {
            return;
        };
        let id = self
            .core
            .stacks
            .native_here(&mut self.core.w, pid, tid, &regs);
        self.core.stacks.exec_entry(tid, id);
    }

    /// Fast path: the whole call, decoded at its exit stop from the registers.
    fn exit_decoded(&mut self, tid: Tid, ts: u64, now: u64) {
        let Ok(regs) = syscall_regs(tid) else {
            return;
        };
        let (nr, args, ret) = (regs.nr, regs.args, regs.ret);
        if nr == arch::NR_SCHED_GETAFFINITY || nr == arch::NR_SCHED_SETAFFINITY {
            self.affinity_call(tid, nr, &args, ret);
            return;
        }
        if nr == arch::NR_MUNMAP {
            if let (Some(pid), 0) = (self.core.tasks.get(&tid).map(|t| t.pid), ret) {
                self.core.code_unmapped(pid, now, args[0], args[1]);
            }
            return;
        }
        let Some(sys) = arch::sys_of(nr).filter(|&s| arch::traced_call(s, &args)) else {
            return;
        };
        let Some(task) = self.core.tasks.get_mut(&tid) else {
            return;
        };
        let pid = task.pid;
        if let (Sys::Execve | Sys::Execveat, Some((exe, argv))) = (sys, task.exec_info.take()) {
            // A successful exec: the registers and memory belong to the new program.
            let mut c = Syscall::new(ts, pid as u32, tid as u32, sys);
            c.dur = now.saturating_sub(ts);
            c.ret = ret;
            c.path = Some(self.core.w.intern(&exe));
            c.payload = Some(self.core.w.intern(&argv));
            c.stack = self.core.stacks.exec_stack(&mut self.core.w, pid, tid);
            self.core.push(Record::Syscall(c));
            return;
        }
        let mut e = self.core.decode_entry(tid, pid, sys, args, ts);
        e.at_exit = true;
        let call = dejavu_capture::stacks::call_ref(&e.call);
        e.call.stack = self
            .core
            .stacks
            .capture(&mut self.core.w, pid, tid, &regs, call);
        self.core.exit(tid, e, ret, now);
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
                let _ = os::write_mem(tid, args[2], &mask[..n]);
            }
        } else if ret == 0 {
            let mut mask = [0u8; 128];
            let n = (args[1] as usize).min(mask.len());
            if os::read_mem(tid, args[2], &mut mask[..n]).is_ok() {
                self.pin.user_set(target, mask);
            }
        }
    }

    /// PTRACE_EVENT_EXIT: the task is about to die. A call it was inside never
    /// returns; decode it now, while its registers are still readable.
    fn exit_event(&mut self, tid: Tid, now: u64) {
        let Some(ts) = self
            .core
            .tasks
            .get_mut(&tid)
            .and_then(|t| t.pending_ts.take())
        else {
            return;
        };
        let Ok(regs) = syscall_regs(tid) else {
            return;
        };
        let (nr, args) = (regs.nr, regs.args);
        let Some(sys) = arch::sys_of(nr).filter(|&s| arch::traced_call(s, &args)) else {
            return;
        };
        let Some(pid) = self.core.tasks.get(&tid).map(|t| t.pid) else {
            return;
        };
        let e = self.core.decode_entry(tid, pid, sys, args, ts);
        self.core.unfinished(tid, e, now);
    }

    fn clone_event(&mut self, tid: Tid, event: i32, now: u64) {
        let Ok(child) = kernel::event_msg(tid) else {
            return;
        };
        let child = child as Tid;
        let Some(parent) = self.core.tasks.get_mut(&tid) else {
            return;
        };
        let ppid = parent.pid;
        // The clone call is still in progress: its registers hold its arguments.
        let regs = syscall_regs(tid);
        let flags = match &regs {
            Ok(r) => dejavu_capture::decode::clone_flags(tid, r.nr, &r.args),
            Err(_) => match event {
                libc::PTRACE_EVENT_FORK => libc::SIGCHLD as u64,
                libc::PTRACE_EVENT_VFORK => {
                    (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64
                }
                _ => thread_flags_from_proc(child),
            },
        };
        self.core.new_task(tid, ppid, child, flags, now);
        if let (Ok(r), 0) = (&regs, flags & libc::CLONE_THREAD as u64) {
            // A new process: where the parent started it names its exec (see
            // `Stacks::spawned`).
            let at = self.core.stacks.native_here(&mut self.core.w, ppid, tid, r);
            let vfork_like = flags & libc::CLONE_VM as u64 != 0
                && dejavu_capture::decode::clone_stack(tid, r.nr, &r.args) == 0;
            self.core.stacks.spawned(child, at, vfork_like);
            if vfork_like && self.core.stacks.enabled() {
                // It runs on its parent's stack until its exec, which its parent waits
                // for: its exec's stack is taken at the call's entry (a few calls).
                if let Some(t) = self.core.tasks.get_mut(&child) {
                    t.exec_entry_stack = true;
                }
            }
        }
        self.pin.on_clone(tid, child);
        if self.early.remove(&child).is_some() {
            self.resume(child, 0);
        } else {
            self.expected.insert(child, ());
        }
    }

    fn exec_event(&mut self, tid: Tid, now: u64) {
        let former = kernel::event_msg(tid).map(|v| v as Tid).unwrap_or(tid);
        let Some(pid) = self.core.exec_begin(tid, former, now) else {
            return;
        };
        let (exe, argv) = match self
            .core
            .tasks
            .get(&tid)
            .and_then(|t| t.entry.as_ref())
            .and_then(|e| e.exec.clone())
        {
            Some(x) => x,
            None => {
                // Decoding at exit: the old memory is gone, but the kernel left the
                // path as given to execve on the new stack (AT_EXECFN), and argv.
                let exe = dejavu_capture::decode::exec_path(&self.core, pid);
                let argv = dejavu_capture::proc_cmdline(pid).join("\0").into_bytes();
                (exe, argv)
            }
        };
        let keep = self
            .core
            .tasks
            .get(&tid)
            .is_some_and(|t| t.pending_ts.is_some());
        self.core.exec_end(tid, pid, exe, argv, keep, now);
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
