//! The decoder without ptrace: another backend (the eBPF one, crates/dejavu-ebpf) feeds
//! it what the kernel reported — new tasks, execs, exits, signals, and each call with the
//! memory it used (`Snapshot`) — and gets the same records, decoded by the same code, as
//! a ptrace recording. The analysis cannot tell which backend ran, because there is only
//! one decoder. Why it lives in this crate: docs/capture-core.md.

use crate::arch;
use crate::os::Tid;
use crate::recording::{CallMemory, Capture, Outcome, RecordOptions, Task};
use crate::snapshot::Snapshot;
use crate::state::{resolve, FdTable};
use dejavu_trace::*;
use std::io::Write;
use std::rc::Rc;

/// One call as the kernel reported it at its exit (timestamps on CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy)]
pub struct RawCall {
    /// When it entered.
    pub enter_ns: u64,
    /// When it returned (or, unfinished, when the task ended).
    pub exit_ns: u64,
    /// Its process (thread group) and thread.
    pub pid: i32,
    /// The thread that made it.
    pub tid: i32,
    /// The syscall number.
    pub nr: u64,
    /// The six argument registers.
    pub args: [u64; 6],
    /// The return value.
    pub ret: i64,
    /// It never returned: the task ended inside it.
    pub unfinished: bool,
    /// Its entry was not seen: `enter_ns` is its exit time, its duration unknown.
    pub no_enter: bool,
    /// Its native stack, as the kernel half reported it.
    pub native: crate::stacks::NativeStack,
}

/// Clone facts the eBPF backend reports for a new task (it sees the new task, not the
/// clone flags).
#[derive(Debug, Clone, Copy, Default)]
pub struct NewTask {
    /// A thread of its parent's process.
    pub thread: bool,
    /// Shares its parent's descriptor table.
    pub files: bool,
    /// Shares its parent's working directory.
    pub fs: bool,
    /// Shares its parent's memory.
    pub vm: bool,
    /// Starts with its parent's stack pointer (no stack of its own: fork, vfork).
    pub same_stack: bool,
}

impl NewTask {
    /// The clone flags a ptrace recording would have recorded.
    pub fn clone_flags(self) -> u64 {
        let mut f = 0;
        if self.thread {
            f |= (libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        } else {
            f |= libc::SIGCHLD as u64;
        }
        if self.files {
            f |= libc::CLONE_FILES as u64;
        }
        if self.fs {
            f |= libc::CLONE_FS as u64;
        }
        if self.vm {
            f |= libc::CLONE_VM as u64;
        }
        f
    }
}

/// A recording fed by another backend.
pub struct Feed<W: Write> {
    t: Capture<W>,
    /// Calls of tasks never announced (their fork report was lost).
    pub unknown_tasks: u64,
}

impl<W: Write> std::fmt::Debug for Feed<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed").finish_non_exhaustive()
    }
}

impl<W: Write> Feed<W> {
    /// A recording into `w`; `t0` is the CLOCK_MONOTONIC time trace timestamps count
    /// from. `stacks` holds the agents set up for the program, if any: their reports come
    /// through `agent`.
    pub fn new(
        w: TraceWriter<W>,
        t0: u64,
        opts: RecordOptions,
        stacks: crate::stacks::Stacks,
    ) -> Feed<W> {
        let mut t = Capture::new(w, t0, opts, CallMemory::copied());
        t.set_stacks(stacks);
        t.stacks.agents().set_external();
        t.stacks.keep_roles();
        Feed {
            t,
            unknown_tasks: 0,
        }
    }

    fn ts(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.t.t0)
    }

    /// The program dejavu started, stopped before its exec: its descriptors are read now.
    pub fn launched(&mut self, pid: i32, cwd: &[u8]) {
        // Its descriptors from /proc, not from a call's snapshot.
        let mem = std::mem::replace(&mut self.t.mem, CallMemory::live());
        self.t.launched(pid, Rc::from(cwd));
        self.t.mem = mem;
    }

    /// A running process dejavu attached to, with its threads.
    pub fn attached(&mut self, pid: i32, tids: &[i32]) {
        self.t.attach_process(pid, tids);
        self.learn_open_fds(pid);
    }

    /// The descriptors `pid` has now, from /proc (it is stopped, or they predate us).
    fn learn_open_fds(&mut self, pid: Tid) {
        let mem = std::mem::replace(&mut self.t.mem, CallMemory::live());
        self.t.learn_open_fds(pid);
        self.t.mem = mem;
    }

    /// A copy of the top of `tid`'s stack that the kernel half sent just before `tid`'s
    /// next call (see `stacks::Stacks::unwind_slice`); `deps` receives what the unwind
    /// depended on (nothing unless `remember`). The stack's id, when one could be unwound.
    pub fn stack_slice(
        &mut self,
        pid: i32,
        tid: i32,
        regs: &arch::SyscallRegs,
        bytes: &[u8],
        deps: &mut crate::stacks::native::Deps,
        remember: bool,
    ) -> Option<StackId> {
        self.t
            .stacks
            .unwind_slice(&mut self.t.w, pid, tid, regs, bytes, deps, remember)
    }

    /// The copy of the memory of the next call: fill it, then call `call`.
    pub fn snapshot(&mut self) -> &mut Snapshot {
        self.t.mem.copy_mut()
    }

    /// The roles of the programs exec'd since the last call (see
    /// `stacks::Stacks::tool_exec`): for the kernel half, which leaves the tools' native
    /// stacks out.
    pub fn take_roles(&mut self) -> Vec<(Tid, crate::stacks::ExecRole)> {
        self.t.stacks.take_roles()
    }

    /// The processes exec'd since the last call that no language agent will come to (see
    /// `stacks::Stacks::exec_start_up`): the kernel half stops waiting for their hello.
    pub fn take_no_agent(&mut self) -> Vec<Tid> {
        self.t.stacks.take_no_agent()
    }

    /// The agents' channel descriptor in the program, if agents are loaded.
    pub fn agent_fd(&mut self) -> Option<i32> {
        self.t.stacks.agents().channel_fd()
    }

    /// Task `child_tid` of process `child_pid` was created by `parent_tid`. `native`: for a
    /// new process, the parent's native stack in the clone (see
    /// `stacks::Stacks::spawned`).
    pub fn fork(
        &mut self,
        ns: u64,
        parent_tid: i32,
        child_tid: i32,
        new: NewTask,
        native: crate::stacks::NativeStack,
    ) {
        let now = self.ts(ns);
        let spawner = self.t.stacks.reported(parent_tid, native);
        let Some(ppid) = self.t.tasks.get(&parent_tid).map(|t| t.pid) else {
            self.unknown_tasks += 1;
            return;
        };
        if self.t.tasks.contains_key(&child_tid) {
            return;
        }
        self.t
            .new_task(parent_tid, ppid, child_tid, new.clone_flags(), now);
        if !new.thread {
            self.t
                .stacks
                .spawned(child_tid, spawner, new.vm && new.same_stack);
        }
    }

    /// Thread `old_tid` exec'd `filename` (as given to execve) with `argv` (NUL-joined),
    /// and is now `tid`. `image`: the auxiliary vector's AT_PHDR and AT_BASE, which say
    /// where the kernel put the program's and its interpreter's code. `native`: the
    /// execve's native stack, taken at its entry in the old program. `awaiting`: the kernel
    /// half took the new program for an interpreter and waits for its agent's hello.
    #[allow(clippy::too_many_arguments)]
    pub fn exec(
        &mut self,
        ns: u64,
        tid: i32,
        old_tid: i32,
        filename: &[u8],
        argv: &[u8],
        image: Option<(u64, u64)>,
        native: crate::stacks::NativeStack,
        awaiting: bool,
    ) {
        let now = self.ts(ns);
        let entry = self.t.stacks.reported(old_tid, native);
        self.t.stacks.exec_entry(old_tid, entry);
        let Some(pid) = self.t.exec_begin(tid, old_tid, now) else {
            return;
        };
        let cwd = self.t.procs.get(&pid).map(|p| p.fs.borrow().cwd.clone());
        let mut exe = Vec::new();
        resolve(cwd.as_deref().unwrap_or(b"/"), filename, &mut exe);
        let argv = argv.strip_suffix(b"\0").unwrap_or(argv).to_vec();
        if let Some((phdr, base)) = image {
            self.t.stacks.exec_layout(pid, &exe, phdr, base);
        }
        self.t
            .exec_end(tid, pid, Rc::from(exe.as_slice()), argv, true, now);
        if awaiting {
            self.t.stacks.kernel_awaits(pid);
        }
    }

    /// Task `tid` ended with the kernel's exit code (`task_struct.exit_code`: the wait
    /// status bits).
    pub fn exit(&mut self, ns: u64, tid: i32, code: i32) {
        let now = self.ts(ns);
        let st = if code & 0x7f == 0 {
            ExitStatus::Code((code >> 8) & 0xff)
        } else {
            ExitStatus::Signal {
                signal: code & 0x7f,
                core: code & 0x80 != 0,
            }
        };
        self.t.task_exited(tid, st, now);
    }

    /// Signal `sig` was delivered to `tid` of `pid`.
    pub fn signal(&mut self, ns: u64, pid: i32, tid: i32, sig: i32) {
        let Some(task) = self.t.tasks.get(&tid) else {
            return;
        };
        if task.pre_exec && sig == libc::SIGCONT {
            // Ours: it woke the program we started stopped.
            return;
        }
        let ts = self.ts(ns);
        self.t.push(Record::Signal(Signal {
            ts,
            pid: pid as u32,
            tid: tid as u32,
            signal: sig,
        }));
    }

    /// Bytes an agent wrote to its channel, at `ns` (CLOCK_MONOTONIC): applied in order
    /// with the calls around them, and the marks they hold written right away.
    pub fn agent(&mut self, ns: u64, bytes: &[u8]) {
        self.t.stacks.agents().feed(bytes, ns);
        self.t.write_marks(false, None);
    }

    /// `count` records the kernel could not hand over (its buffer was full).
    pub fn lost(&mut self, ns: u64, count: u64) {
        let ts = self.ts(ns);
        self.t.push(Record::Lost(Lost {
            ts,
            pid: 0,
            count,
            reason: LostReason::BufferFull,
        }));
    }

    /// Whether the last call given to `call` took a language agent's call site.
    pub fn named_by_agent(&self) -> bool {
        self.t.stacks.named_by_agent()
    }

    /// Decodes one call, reading its memory from `snapshot()`.
    pub fn call(&mut self, c: &RawCall) {
        self.t.stacks.next_call();
        if c.nr == arch::NR_MUNMAP {
            // Traced only for the trace's Unmap records (codemaps.rs), never recorded.
            let pid = self.t.tasks.get(&c.tid).map(|t| t.pid);
            if let (Some(pid), false, 0) = (pid, c.unfinished, c.ret) {
                let now = self.ts(c.exit_ns);
                self.t.code_unmapped(pid, now, c.args[0], c.args[1]);
            }
            return;
        }
        let Some(sys) = arch::sys_of(c.nr).filter(|&s| arch::traced_call(s, &c.args)) else {
            return;
        };
        let (tid, enter, now) = (c.tid, self.ts(c.enter_ns), self.ts(c.exit_ns));
        if !self.t.tasks.contains_key(&tid) {
            // Its fork report was lost, or it raced our start: adopt it.
            self.unknown_tasks += 1;
            if !self.t.procs.contains_key(&c.pid) {
                let cwd = crate::os::readlink(format!("/proc/{}/cwd", c.pid).as_bytes())
                    .unwrap_or_else(|_| b"/".to_vec());
                self.t
                    .add_process(c.pid, Rc::from(cwd.as_slice()), FdTable::default());
            }
            self.t.tasks.insert(tid, Task::new(c.pid, false));
        }
        let Some(pid) = self.t.tasks.get(&tid).map(|t| t.pid) else {
            return;
        };
        if c.unfinished {
            let e = self.t.decode_entry(tid, pid, sys, c.args, enter);
            self.t.unfinished(tid, e, now);
            return;
        }
        if matches!(sys, Sys::Execve | Sys::Execveat) && c.ret == 0 {
            // A successful exec: the kernel reported the program and its arguments.
            let info = self.t.tasks.get_mut(&tid).and_then(|t| t.exec_info.take());
            if let Some((exe, argv)) = info {
                let mut s = Syscall::new(enter, pid as u32, tid as u32, sys);
                s.dur = now.saturating_sub(enter);
                s.ret = c.ret;
                s.path = Some(self.t.w.intern(&exe));
                s.payload = Some(self.t.w.intern(&argv));
                s.stack = self.t.stacks.exec_stack(&mut self.t.w, pid, tid);
                self.t.push(Record::Syscall(s));
                return;
            }
        }
        let mut e = self.t.decode_entry(tid, pid, sys, c.args, enter);
        e.at_exit = true;
        if c.no_enter {
            e.call.ev |= ev::NO_DURATION;
        }
        let call = crate::stacks::call_ref(&e.call);
        e.call.stack = self
            .t
            .stacks
            .capture_native(&mut self.t.w, pid, tid, c.native, call);
        self.t.exit(tid, e, c.ret, now);
    }

    /// Tasks that no longer exist (no /proc entry). Their ends may still be on their
    /// way: read what the kernel wrote before calling `forget` with them.
    pub fn vanished(&self) -> Vec<Tid> {
        self.t
            .tasks
            .keys()
            .copied()
            .filter(|t| !std::path::Path::new(&format!("/proc/{t}")).exists())
            .collect()
    }

    /// Forgets those of `gone` (from `vanished`, before the last read) whose end never
    /// arrived: it was lost with a full buffer. Returns how many.
    pub fn forget(&mut self, gone: &[Tid]) -> usize {
        let mut n = 0;
        for t in gone {
            n += self.t.tasks.remove(t).is_some() as usize;
        }
        if n > 0 {
            self.t.warn_once(
                "vanished",
                format!("{n} tasks ended without their end being recorded"),
            );
        }
        n
    }

    /// At the tracer's tick: the pending records reach the file (see `Capture::tick`).
    pub fn tick(&mut self) {
        self.t.tick();
    }

    /// The processes still traced, by pid.
    pub fn processes(&self) -> Vec<Tid> {
        self.t.left_running()
    }

    /// Recording was stopped by `sig` with the program still running.
    pub fn set_stopped_by(&mut self, sig: i32) {
        self.t.out.stopped_by = Some(sig);
    }

    /// Tasks still running (attach mode ends with some).
    pub fn tasks(&self) -> usize {
        self.t.tasks.len()
    }

    /// The exit status of the program dejavu started, from waiting for it.
    pub fn set_exit(&mut self, st: ExitStatus) {
        self.t.out.exit = Some(st);
    }

    /// A warning for the end of the recording (once per key).
    pub fn warn_once(&mut self, key: &'static str, msg: String) {
        self.t.warn_once(key, msg);
    }

    /// A remark for the trace's end block.
    pub fn note(&mut self, msg: String) {
        self.t.out.notes.push(msg);
    }

    /// Ends the recording: writes the end block.
    pub fn finish(mut self, detached: bool) -> (Outcome, W) {
        self.t.out.detached = detached;
        self.t.tasks.clear();
        self.t.finish()
    }
}
