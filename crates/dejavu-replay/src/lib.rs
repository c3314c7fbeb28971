//! Replay: walks a trace's records in order and keeps the state every detector needs —
//! per-process descriptor tables (fork inheritance, dup, fcntl, close-on-exec,
//! close_range), working directories, the process tree, and a version for every path
//! (see [`paths`]). Detectors read a [`View`] of each call, taken before its effects are
//! applied, and never re-implement any of this.

pub mod paths;

pub use paths::{PathKey, Paths, Version};

use dejavu_trace::{
    mode, ExitStatus, FileStat, MarkKind, Meta, Record, StatId, StrId, Strings, Sys, Syscall,
};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

/// What a descriptor refers to (one vocabulary with the capture core: dejavu-trace).
pub use dejavu_trace::FdKind;

/// One open descriptor, as replay knows it.
#[derive(Clone, Copy, Debug)]
pub struct Fd {
    /// The path it was opened with (or /proc's name for pipes and sockets).
    pub path: Option<PathKey>,
    /// What it is.
    pub kind: FdKind,
    /// Opened with O_APPEND (or set by F_SETFL).
    pub append: bool,
    /// Closed on exec.
    pub cloexec: bool,
    /// A number unique to the open call that created the open file (shared by dups and
    /// forks of it): tells one open/close cycle from the next.
    pub open_id: u64,
    /// When it was opened (ns), 0 if before the trace.
    pub opened_ts: u64,
    /// The open file's identity when it was opened.
    pub stat: Option<StatId>,
    /// The open flags (O_ACCMODE, O_CREAT, O_TRUNC ...), when known.
    pub flags: u64,
}

/// A descriptor table; shared between tasks created with CLONE_FILES.
#[derive(Clone, Debug, Default)]
pub struct FdTable {
    fds: FxHashMap<i32, Fd>,
}

impl FdTable {
    /// Looks up a descriptor.
    pub fn get(&self, fd: i32) -> Option<&Fd> {
        self.fds.get(&fd)
    }

    /// Number of open descriptors known.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// No known descriptors.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

/// A process in the traced tree.
#[derive(Debug)]
pub struct Proc {
    /// Process id.
    pub pid: u32,
    /// Parent process id (0 for the root or when unknown).
    pub ppid: u32,
    /// The latest exec'd program, when seen.
    pub exe: Option<StrId>,
    /// Its NUL-separated argv, when seen.
    pub argv: Option<StrId>,
    /// When the latest exec happened (or the process appeared).
    pub exec_ts: u64,
    /// Runs Node.js (by its executable's name).
    pub is_node: bool,
    /// Threads seen (including the leader).
    pub threads: u32,
    /// How it ended.
    pub exit: Option<ExitStatus>,
    /// The image it runs now (an index into [`Replay::images`]).
    pub image: u32,
    /// Its working directory, from the last chdir or fchdir the trace holds of it or of an
    /// ancestor before the fork; None when none did (for the command dejavu started and
    /// what it ran, the trace's working directory: [`Replay::image_cwd`]).
    pub cwd: Option<PathKey>,
    fds: Rc<RefCell<FdTable>>,
}

impl Proc {
    fn new(pid: u32, ppid: u32, ts: u64, fds: Rc<RefCell<FdTable>>) -> Proc {
        Proc {
            pid,
            ppid,
            exe: None,
            argv: None,
            exec_ts: ts,
            is_node: false,
            threads: 1,
            exit: None,
            image: 0,
            cwd: None,
            fds,
        }
    }

    /// A descriptor of this process.
    pub fn fd(&self, fd: i32) -> Option<Fd> {
        self.fds.borrow().get(fd).copied()
    }

    /// Shares its table (threads, CLONE_FILES children).
    fn share_fds(&self) -> Rc<RefCell<FdTable>> {
        self.fds.clone()
    }

    /// A copy of its table (fork).
    fn copy_fds(&self) -> Rc<RefCell<FdTable>> {
        Rc::new(RefCell::new(self.fds.borrow().clone()))
    }
}

/// One program run by one process: from the process's start (or the trace's first sight
/// of it) to its exec, or from an exec to the next. Redundancy is judged per image: a
/// process that execs starts over with nothing cached, and a fork is a process of its own.
#[derive(Clone, Debug)]
pub struct Image {
    /// The process.
    pub pid: u32,
    /// The image that created it: the parent's at the fork, or the one this exec replaced.
    pub parent: Option<u32>,
    /// The executable, when known (a fork child keeps its parent's until it execs).
    pub exe: Option<StrId>,
    /// The NUL-separated argv, when known.
    pub argv: Option<StrId>,
    /// When it started (exec, fork, or first sight), ns.
    pub start_ts: u64,
    /// Started by an exec (false: a fork's copy of its parent, or a process seen running).
    pub execd: bool,
    /// A later exec in the same process replaced it.
    pub replaced: bool,
    /// When its language agent said it was ready ([`MarkKind::AgentReady`]): for Python,
    /// the end of the interpreter's own start-up, before `__main__` runs. The first mark
    /// counts.
    pub ready_ts: Option<u64>,
    /// When the Node.js main module had run ([`MarkKind::MainDone`]). None for a program
    /// that never got there, or that has no agent.
    pub main_done_ts: Option<u64>,
    /// The process's working directory when it started (its [`Proc::cwd`] then).
    pub cwd: Option<PathKey>,
}

/// What replay knows about one syscall before its effects: resolved paths, their
/// versions, and the descriptors it names.
#[derive(Clone, Copy, Debug, Default)]
pub struct View {
    /// The call's primary path (from the record, or from the descriptor table).
    pub path: Option<PathKey>,
    /// Its second path (rename/link target, fd2's path).
    pub path2: Option<PathKey>,
    /// `path`'s version before the call.
    pub version: Version,
    /// The version deciding whether a negative answer about `path` still holds.
    pub negative_version: Version,
    /// The primary descriptor, as it was before the call.
    pub fd: Option<Fd>,
    /// The second descriptor.
    pub fd2: Option<Fd>,
    /// The call's number among the trace's syscall records (0, 1, 2, ...): names a call
    /// for [`View`]-holders that count it later (see `dejavu_detect::Cx::mark`).
    pub seq: u64,
    /// The image of the calling process (an index into [`Replay::images`]).
    pub image: u32,
}

const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_APPEND: u64 = 0o2000;
const O_CLOEXEC: u64 = 0o2000000;
const O_ACCMODE: u64 = 3;
const AT_REMOVEDIR: u64 = 0x200;
const F_DUPFD: u64 = 0;
const F_SETFD: u64 = 2;
const F_SETFL: u64 = 4;
const F_DUPFD_CLOEXEC: u64 = 1030;
const CLONE_FILES: u64 = 0x400;
const CLOSE_RANGE_CLOEXEC: u64 = 4;

/// The replay state. Feed every record in order: for syscalls, [`Replay::view`] first,
/// then [`Replay::apply`]; for everything else, [`Replay::apply_record`].
#[derive(Debug)]
pub struct Replay {
    /// Paths and versions.
    pub paths: Paths,
    /// The process tree.
    pub procs: FxHashMap<u32, Proc>,
    /// The root process, when known.
    pub root: Option<u32>,
    /// Every process image, in the order they appeared ([`Proc::image`], [`View::image`]).
    pub images: Vec<Image>,
    next_open: u64,
    /// Syscall records seen.
    pub syscalls: u64,
    /// Sum of their durations.
    pub syscall_ns: u64,
    /// Of them, calls on a descriptor nobody was seen opening that name no path: an
    /// eventfd or an epoll descriptor made by a call the backend does not trace (libuv's
    /// wake-ups, 8 bytes read and written after each fs.promises call: 6,164 of prettier's
    /// 8,925 calls). Not file calls: left out of the totals a report gives
    /// ([`Replay::file_calls`]).
    pub unnamed: u64,
    /// Their durations.
    pub unnamed_ns: u64,
    meta_command: Vec<String>,
    meta_cwd: String,
    meta_env: Vec<String>,
    /// The recording attached to running processes (-p) instead of starting the program:
    /// the descriptors they had were set up by their own launcher, not by dejavu's user.
    pub attached: bool,
}

impl Replay {
    /// A fresh replay for a trace with this meta.
    /// File calls seen: the syscall records but for the unnamed ones ([`Replay::unnamed`]).
    pub fn file_calls(&self) -> u64 {
        self.syscalls - self.unnamed
    }

    /// Their durations.
    pub fn file_ns(&self) -> u64 {
        self.syscall_ns - self.unnamed_ns
    }

    pub fn new(meta: &Meta) -> Replay {
        Replay {
            paths: Paths::default(),
            procs: FxHashMap::default(),
            root: None,
            images: Vec::new(),
            next_open: 1,
            syscalls: 0,
            syscall_ns: 0,
            unnamed: 0,
            unnamed_ns: 0,
            meta_command: meta.command.clone(),
            meta_cwd: meta.cwd.clone(),
            meta_env: meta.env.clone(),
            attached: !meta.attached.is_empty(),
        }
    }

    fn proc_mut(&mut self, pid: u32, ts: u64) -> &mut Proc {
        let root = &mut self.root;
        let images = &mut self.images;
        self.procs.entry(pid).or_insert_with(|| {
            // A process we never saw start (attach, import without -f): its own table.
            root.get_or_insert(pid);
            let mut p = Proc::new(pid, 0, ts, Rc::new(RefCell::new(FdTable::default())));
            p.image = new_image(images, pid, None, None, None, ts, false);
            p
        })
    }

    /// The image `pid` ran at `ts`: the last of its images that started at or before it
    /// (its first when `ts` is earlier still).
    pub fn image_at(&self, pid: u32, ts: u64) -> Option<u32> {
        let mut first = None;
        for (i, im) in self.images.iter().enumerate().rev() {
            if im.pid == pid {
                if im.start_ts <= ts {
                    return Some(i as u32);
                }
                first = Some(i as u32);
            }
        }
        first
    }

    /// The image `pid` runs now, if the process is known.
    pub fn image_of(&self, pid: u32) -> Option<u32> {
        self.procs.get(&pid).map(|p| p.image)
    }

    /// A command line for people of an image: its argv, else its executable, else the
    /// trace's command for the root process.
    pub fn image_command(&self, image: u32, strings: &Strings) -> String {
        let Some(im) = self.images.get(image as usize) else {
            return String::new();
        };
        if let Some(argv) = im.argv {
            let parts: Vec<String> = strings
                .get(argv)
                .split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect();
            if !parts.is_empty() {
                return parts.join(" ");
            }
        }
        if Some(im.pid) == self.root && im.exe.is_none() && !self.meta_command.is_empty() {
            return self.meta_command.join(" ");
        }
        im.exe
            .map(|e| strings.lossy(e).into_owned())
            .unwrap_or_else(|| format!("pid {}", im.pid))
    }

    /// The trace's command (what dejavu ran, or the attached processes' command lines).
    pub fn meta_command(&self) -> &[String] {
        &self.meta_command
    }

    /// The value of environment variable `name` the recorded program was started with, when
    /// the trace keeps it (its `env`: the variables a report speaks of). None when attached:
    /// the environment dejavu had is not the processes'.
    pub fn meta_env(&self, name: &str) -> Option<&str> {
        if self.attached {
            return None;
        }
        self.meta_env
            .iter()
            .find_map(|e| e.strip_prefix(name)?.strip_prefix('='))
    }

    /// The working directory the recorded program started in (empty when the trace does
    /// not say: an import, an older trace).
    pub fn meta_cwd(&self) -> &str {
        &self.meta_cwd
    }

    /// The working directory image `image` started in: its process's last chdir (or an
    /// ancestor's before the fork), else, when dejavu started the program (not attached),
    /// the trace's working directory, where the command and what it ran start. None when
    /// unknown (attached, an import, an older trace without one).
    pub fn image_cwd(&self, image: u32) -> Option<&[u8]> {
        if let Some(k) = self.images.get(image as usize).and_then(|im| im.cwd) {
            return Some(self.paths.bytes(k));
        }
        (!self.attached && self.meta_cwd.starts_with('/')).then_some(self.meta_cwd.as_bytes())
    }

    /// The process, if known.
    pub fn proc(&self, pid: u32) -> Option<&Proc> {
        self.procs.get(&pid)
    }

    /// What a detector sees of `s`: state before the call.
    #[inline]
    pub fn view(&mut self, s: &Syscall, strings: &Strings) -> View {
        let mut v = View {
            seq: self.syscalls,
            ..View::default()
        };
        let p = self.proc_mut(s.pid, s.ts);
        v.image = p.image;
        let fds = p.fds.clone();
        {
            let t = fds.borrow();
            if let Some(fd) = s.fd {
                v.fd = t.get(fd).copied();
            }
            if let Some(fd) = s.fd2 {
                v.fd2 = t.get(fd).copied();
            }
        }
        v.path = match s.path {
            Some(id) => Some(self.paths.key(id, strings)),
            None => v.fd.and_then(|f| f.path),
        };
        v.path2 = match s.path2 {
            // readlink's answer and symlink's target are contents, not paths to version.
            Some(id)
                if !matches!(
                    s.sys,
                    Sys::Readlink
                        | Sys::Readlinkat
                        | Sys::Symlink
                        | Sys::Symlinkat
                        | Sys::MemfdCreate
                ) =>
            {
                Some(self.paths.key(id, strings))
            }
            _ => v.fd2.and_then(|f| f.path),
        };
        if let Some(p) = v.path {
            v.version = self.paths.version(p);
            v.negative_version = self.paths.negative_version(p);
        }
        v
    }

    /// Applies the effects of `s` (whose view is `v`): descriptor tables, working
    /// directories, path versions.
    pub fn apply(
        &mut self,
        s: &Syscall,
        v: &View,
        strings: &Strings,
        stats: &dyn Fn(StatId) -> FileStat,
    ) {
        use Sys::*;
        self.syscalls += 1;
        self.syscall_ns += s.dur;
        if s.fd.is_some() && s.path.is_none() && v.fd.is_none() && v.path.is_none() {
            self.unnamed += 1;
            self.unnamed_ns += s.dur;
        }
        if s.ev & dejavu_trace::ev::UNFINISHED != 0 {
            // It may or may not have taken effect; assume it did for mutations (safe: a
            // version that moves needlessly only makes fewer calls redundant).
            if let (Some(p), true) = (v.path, is_mutation(s.sys)) {
                self.paths.entry_changed(p, s.sys);
            }
            return;
        }
        let ok = s.ret >= 0;
        let pid = s.pid;
        match s.sys {
            Open | Openat | Openat2 | Creat if ok => {
                let st = s.stat.map(stats);
                let kind =
                    FdKind::classify(v.path.map_or(&[][..], |p| self.paths.bytes(p)), st.as_ref());
                if let Some(p) = v.path {
                    if kind == FdKind::Dir {
                        self.paths.mark_dir(p);
                    }
                    if s.flags & O_CREAT != 0 {
                        // Maybe created (we cannot tell): the parent may have changed.
                        self.paths.entry_changed(p, s.sys);
                    } else if s.flags & O_TRUNC != 0 && s.flags & O_ACCMODE != 0 {
                        self.paths.touch(p, s.sys);
                    }
                }
                let fd = Fd {
                    path: v.path,
                    kind,
                    append: s.flags & O_APPEND != 0,
                    cloexec: s.flags & O_CLOEXEC != 0,
                    open_id: self.next_open(),
                    opened_ts: s.ts,
                    stat: s.stat,
                    flags: s.flags,
                };
                self.install(pid, s.ret as i32, fd, s.ts);
            }
            MemfdCreate if ok => {
                let fd = Fd {
                    path: None,
                    kind: FdKind::Other,
                    append: false,
                    cloexec: s.flags & 1 != 0,
                    open_id: self.next_open(),
                    opened_ts: s.ts,
                    stat: None,
                    flags: 2,
                };
                self.install(pid, s.ret as i32, fd, s.ts);
            }
            // The working directory a process execs in says whose program it runs (cargo
            // runs a crate's build script in the crate's directory).
            Chdir | Fchdir if ok => {
                if let Some(p) = v.path {
                    self.proc_mut(pid, s.ts).cwd = Some(p);
                }
            }
            // Linux releases the descriptor even when close reports an error other than
            // EBADF.
            Close if s.ret != -9 => {
                if let Some(fd) = s.fd {
                    self.proc_mut(pid, s.ts).fds.borrow_mut().fds.remove(&fd);
                }
            }
            CloseRange if ok => {
                let (first, last) = (s.fd.unwrap_or(0) as u32, s.aux as u32);
                let cloexec = s.flags & CLOSE_RANGE_CLOEXEC != 0;
                let p = self.proc_mut(pid, s.ts);
                let mut t = p.fds.borrow_mut();
                let in_range = |fd: i32| fd >= 0 && (fd as u32) >= first && (fd as u32) <= last;
                if cloexec {
                    t.fds
                        .iter_mut()
                        .filter(|(fd, _)| in_range(**fd))
                        .for_each(|(_, f)| f.cloexec = true);
                } else {
                    t.fds.retain(|fd, _| !in_range(*fd));
                }
            }
            Dup | Dup2 | Dup3 if ok => {
                let new = s.ret as i32;
                if new != s.fd.unwrap_or(-1) {
                    match v.fd {
                        Some(mut f) => {
                            f.cloexec = s.sys == Dup3 && s.flags & O_CLOEXEC != 0;
                            self.install(pid, new, f, s.ts);
                        }
                        // A copy of a descriptor we never knew: whatever `new` was is
                        // gone, and what it is now is unknown.
                        None => {
                            self.proc_mut(pid, s.ts).fds.borrow_mut().fds.remove(&new);
                        }
                    }
                }
            }
            Fcntl if ok => match s.flags {
                F_DUPFD | F_DUPFD_CLOEXEC => {
                    if let Some(mut f) = v.fd {
                        f.cloexec = s.flags == F_DUPFD_CLOEXEC;
                        self.install(pid, s.ret as i32, f, s.ts);
                    }
                }
                F_SETFD | F_SETFL => {
                    if let Some(fd) = s.fd {
                        let p = self.proc_mut(pid, s.ts);
                        if let Some(f) = p.fds.borrow_mut().fds.get_mut(&fd) {
                            if s.flags == F_SETFD {
                                f.cloexec = s.aux & 1 != 0;
                            } else {
                                f.append = s.aux & O_APPEND != 0;
                            }
                        }
                    }
                }
                _ => {}
            },
            Pipe | Pipe2 | Socket | Accept | Accept4 if ok => {
                let kind = if matches!(s.sys, Pipe | Pipe2) {
                    FdKind::Pipe
                } else {
                    FdKind::Socket
                };
                let cloexec = s.flags & O_CLOEXEC != 0;
                let new: Vec<i32> = match s.sys {
                    Pipe | Pipe2 => [s.fd, s.fd2].into_iter().flatten().collect(),
                    _ => vec![s.ret as i32],
                };
                for fd in new {
                    let f = Fd {
                        path: None,
                        kind,
                        append: false,
                        cloexec,
                        open_id: self.next_open(),
                        opened_ts: s.ts,
                        stat: None,
                        flags: 2,
                    };
                    self.install(pid, fd, f, s.ts);
                }
            }
            Write | Pwrite64 | Writev | Pwritev | Pwritev2 | Sendfile | CopyFileRange | Splice
                if ok && s.ret > 0 =>
            {
                let target = v.fd.filter(|f| f.kind == FdKind::File).and(v.path);
                if let Some(p) = target {
                    self.paths.touch(p, s.sys);
                }
            }
            Truncate | Ftruncate | Chmod | Fchmod | Fchmodat | Fchmodat2 | Chown | Fchown
            | Lchown | Fchownat | Utimensat
                if ok =>
            {
                if let Some(p) = v.path {
                    self.paths.touch(p, s.sys);
                }
            }
            Mkdir | Mkdirat if ok => {
                if let Some(p) = v.path {
                    self.paths.entry_changed(p, s.sys);
                    self.paths.mark_dir(p);
                }
            }
            Mkdir | Mkdirat if s.ret == -17 => {
                // EEXIST: whatever is there exists; nothing changed.
            }
            Unlink | Rmdir | Unlinkat if ok => {
                if let Some(p) = v.path {
                    if s.sys == Rmdir || s.flags & AT_REMOVEDIR != 0 {
                        self.paths.moved(p, s.sys);
                    } else {
                        self.paths.entry_changed(p, s.sys);
                    }
                }
            }
            Rename | Renameat | Renameat2 if ok => {
                if let Some(p) = v.path {
                    self.paths.moved(p, s.sys);
                }
                if let Some(p) = v.path2 {
                    self.paths.moved(p, s.sys);
                }
            }
            Link | Linkat if ok => {
                if let Some(p) = v.path {
                    self.paths.touch(p, s.sys); // its link count changed
                }
                if let Some(p) = v.path2 {
                    self.paths.entry_changed(p, s.sys);
                }
            }
            Symlink | Symlinkat if ok => {
                if let Some(p) = v.path {
                    self.paths.entry_changed(p, s.sys);
                }
            }
            Stat | Lstat | Fstat | Newfstatat | Statx if ok => {
                if let (Some(p), Some(st)) = (v.path, s.stat) {
                    if stats(st).file_type() == mode::S_IFDIR
                        && stats(st).known & dejavu_trace::stat_known::MODE != 0
                    {
                        self.paths.mark_dir(p);
                    }
                }
            }
            Execve | Execveat if ok => {
                // The exec record (which comes with it) applies close-on-exec.
                let _ = strings;
            }
            _ => {}
        }
    }

    fn next_open(&mut self) -> u64 {
        let id = self.next_open;
        self.next_open += 1;
        id
    }

    fn install(&mut self, pid: u32, fd: i32, f: Fd, ts: u64) {
        self.proc_mut(pid, ts).fds.borrow_mut().fds.insert(fd, f);
    }

    /// Applies a non-syscall record: the process tree, exec, exit, the runtime's marks.
    pub fn apply_record(&mut self, rec: &Record, strings: &Strings) {
        match *rec {
            Record::Spawn(sp) => {
                if sp.is_thread() {
                    self.proc_mut(sp.pid, sp.ts).threads += 1;
                    return;
                }
                if sp.parent_pid == 0 || !self.procs.contains_key(&sp.parent_pid) {
                    self.root.get_or_insert(sp.pid);
                    let images = &mut self.images;
                    self.procs.entry(sp.pid).or_insert_with(|| {
                        let mut p = Proc::new(
                            sp.pid,
                            sp.parent_pid,
                            sp.ts,
                            Rc::new(RefCell::new(FdTable::default())),
                        );
                        p.image = new_image(images, sp.pid, None, None, None, sp.ts, false);
                        p
                    });
                    return;
                }
                let (fds, parent_node, parent_exe, parent_argv, parent_image, cwd) = {
                    let parent = &self.procs[&sp.parent_pid];
                    let fds = if sp.clone_flags & CLONE_FILES != 0 {
                        parent.share_fds()
                    } else {
                        parent.copy_fds()
                    };
                    (
                        fds,
                        parent.is_node,
                        parent.exe,
                        parent.argv,
                        parent.image,
                        parent.cwd,
                    )
                };
                let mut p = Proc::new(sp.pid, sp.parent_pid, sp.ts, fds);
                // A fork runs the parent's program until it execs, where the parent was.
                p.is_node = parent_node;
                p.exe = parent_exe;
                p.argv = parent_argv;
                p.cwd = cwd;
                p.image = new_image(
                    &mut self.images,
                    sp.pid,
                    Some(parent_image),
                    parent_exe,
                    parent_argv,
                    sp.ts,
                    false,
                );
                if let Some(im) = self.images.last_mut() {
                    im.cwd = cwd;
                }
                self.procs.insert(sp.pid, p);
            }
            Record::Exec(e) => {
                let old = self.proc_mut(e.pid, e.ts).image;
                if let Some(im) = self.images.get_mut(old as usize) {
                    im.replaced = true;
                }
                let image = new_image(
                    &mut self.images,
                    e.pid,
                    Some(old),
                    Some(e.exe),
                    Some(e.argv),
                    e.ts,
                    true,
                );
                let p = self.proc_mut(e.pid, e.ts);
                p.image = image;
                let cwd = p.cwd;
                if let Some(im) = self.images.get_mut(image as usize) {
                    im.cwd = cwd;
                }
                let p = self.proc_mut(e.pid, e.ts);
                p.exe = Some(e.exe);
                p.argv = Some(e.argv);
                p.exec_ts = e.ts;
                p.threads = 1;
                // A new program: its start-up is still to come.
                let exe = strings.get(e.exe);
                let base = exe.rsplit(|&c| c == b'/').next().unwrap_or(exe);
                p.is_node = base == b"node"
                    || base == b"nodejs"
                    || base.starts_with(b"node-")
                    || base == b"bun";
                // exec closes close-on-exec descriptors and unshares the table.
                let kept: FdTable = {
                    let t = p.fds.borrow();
                    FdTable {
                        fds: t
                            .fds
                            .iter()
                            .filter(|(_, f)| !f.cloexec)
                            .map(|(k, v)| (*k, *v))
                            .collect(),
                    }
                };
                p.fds = Rc::new(RefCell::new(kept));
            }
            Record::Exit(e) => {
                if e.tid == e.pid {
                    self.proc_mut(e.pid, e.ts).exit = Some(e.status);
                }
            }
            Record::Mark(m) => {
                // The image the mark ends the start-up of: the first mark of a kind counts;
                // an exec starts a new image without one, and a forked child's own agent
                // marks the child.
                let image = self.proc_mut(m.pid, m.ts).image;
                if let Some(im) = self.images.get_mut(image as usize) {
                    let slot = match m.kind {
                        MarkKind::AgentReady => &mut im.ready_ts,
                        MarkKind::MainDone => &mut im.main_done_ts,
                    };
                    slot.get_or_insert(m.ts);
                }
            }
            // Where code was mapped changes no file state.
            Record::Signal(_) | Record::Lost(_) | Record::Syscall(_) | Record::Mapping(_) => {}
        }
    }
}

fn new_image(
    images: &mut Vec<Image>,
    pid: u32,
    parent: Option<u32>,
    exe: Option<StrId>,
    argv: Option<StrId>,
    ts: u64,
    execd: bool,
) -> u32 {
    images.push(Image {
        pid,
        parent,
        exe,
        argv,
        start_ts: ts,
        execd,
        replaced: false,
        ready_ts: None,
        main_done_ts: None,
        cwd: None,
    });
    (images.len() - 1) as u32
}

/// Calls that change the filesystem when they succeed.
pub fn is_mutation(sys: Sys) -> bool {
    use Sys::*;
    matches!(
        sys,
        Write
            | Pwrite64
            | Writev
            | Pwritev
            | Pwritev2
            | Truncate
            | Ftruncate
            | Mkdir
            | Mkdirat
            | Rmdir
            | Unlink
            | Unlinkat
            | Rename
            | Renameat
            | Renameat2
            | Link
            | Linkat
            | Symlink
            | Symlinkat
            | Chmod
            | Fchmod
            | Fchmodat
            | Fchmodat2
            | Chown
            | Fchown
            | Lchown
            | Fchownat
            | Utimensat
            | Creat
            | Sendfile
            | CopyFileRange
            | Splice
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use dejavu_trace::{Exec, Mark, Spawn};

    fn mark(ts: u64, pid: u32, kind: MarkKind) -> Record {
        Record::Mark(Mark {
            ts,
            pid,
            tid: pid,
            kind,
        })
    }

    #[test]
    fn marks_set_the_process_start_up_times_until_an_exec_clears_them() {
        let strings = Strings::default();
        let mut r = Replay::new(&Meta::default());
        let spawn = |ts, parent_pid, pid| {
            Record::Spawn(Spawn {
                ts,
                parent_pid,
                parent_tid: parent_pid,
                pid,
                tid: pid,
                clone_flags: 17,
            })
        };
        r.apply_record(&spawn(0, 0, 10), &strings);
        assert_eq!(r.images[r.proc(10).unwrap().image as usize].ready_ts, None);
        r.apply_record(&mark(100, 10, MarkKind::AgentReady), &strings);
        r.apply_record(&mark(300, 10, MarkKind::MainDone), &strings);
        // The first of each counts.
        r.apply_record(&mark(400, 10, MarkKind::AgentReady), &strings);
        let p = &r.images[r.proc(10).unwrap().image as usize];
        assert_eq!((p.ready_ts, p.main_done_ts), (Some(100), Some(300)));

        // A forked child starts without marks: its own agent marks it.
        r.apply_record(&spawn(500, 10, 11), &strings);
        assert_eq!(r.images[r.proc(11).unwrap().image as usize].ready_ts, None);
        r.apply_record(&mark(510, 11, MarkKind::AgentReady), &strings);
        assert_eq!(
            r.images[r.proc(11).unwrap().image as usize].ready_ts,
            Some(510)
        );
        assert_eq!(
            r.images[r.proc(11).unwrap().image as usize].main_done_ts,
            None
        );

        // An exec is a new program, whose start-up is still to come.
        r.apply_record(
            &Record::Exec(Exec {
                ts: 600,
                pid: 10,
                tid: 10,
                exe: StrId(0),
                argv: StrId(0),
            }),
            &strings,
        );
        let p = &r.images[r.proc(10).unwrap().image as usize];
        assert_eq!((p.ready_ts, p.main_done_ts), (None, None));
        r.apply_record(&mark(700, 10, MarkKind::AgentReady), &strings);
        assert_eq!(
            r.images[r.proc(10).unwrap().image as usize].ready_ts,
            Some(700)
        );
        assert_eq!(
            r.images[r.proc(11).unwrap().image as usize].ready_ts,
            Some(510),
            "per process"
        );
    }
}
