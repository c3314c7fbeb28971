//! Decoding calls: at the entry stop, the arguments (paths resolved to absolute against
//! the working directory or directory descriptor, descriptors to their paths); at the exit
//! stop, the result and what the kernel wrote back (stat answers, readlink contents, pipe
//! descriptors), payload prefixes, and the descriptor-table changes the call made.
//! Which field each call fills is documented in docs/trace-format.md.

use crate::arch;
use crate::os::{self, Tid};
use crate::recording::Capture;
use crate::state::{resolve, Fd, FdKind};
use dejavu_trace::*;
use std::io::Write;
use std::rc::Rc;

/// Longest path read from the tracee (PATH_MAX).
const PATH_MAX: usize = 4096;
/// Most argv entries and bytes kept for an exec record.
const ARGV_MAX_ARGS: usize = 512;
const ARGV_MAX_BYTES: usize = 64 << 10;
const AT_FDCWD: i32 = -100;

/// A call between its entry and exit stops.
#[derive(Debug)]
pub struct Entry {
    /// The record being built.
    pub call: Syscall,
    /// Raw arguments.
    pub args: [u64; 6],
    /// The resolved primary path, for calls whose exit updates tracer state.
    pub path_bytes: Option<Rc<[u8]>>,
    /// execve: (absolute program path, NUL-joined argv).
    pub exec: Option<(Rc<[u8]>, Vec<u8>)>,
    /// The descriptor's payload should be recorded (write family; every write gets its
    /// fingerprint).
    pub payload: bool,
    /// Decoded at the exit stop: memory the call updates already holds the new values.
    pub at_exit: bool,
}

fn arg_fd(v: u64) -> i32 {
    v as u32 as i32
}

/// Flags of a clone-family call, from its entry arguments.
pub fn clone_flags(tid: Tid, nr: u64, args: &[u64; 6]) -> u64 {
    if nr == arch::NR_CLONE3 {
        let mut b = [0u8; 8];
        if os::read_mem(tid, args[0], &mut b).ok() == Some(8) {
            return u64::from_le_bytes(b);
        }
        0
    } else if nr == arch::NR_FORK {
        libc::SIGCHLD as u64
    } else if nr == arch::NR_VFORK {
        (libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD) as u64
    } else {
        args[0]
    }
}

/// The stack a clone call gives its child (0: the child goes on with its parent's stack
/// pointer, as after fork and vfork; posix_spawn gives its child a stack of its own).
pub fn clone_stack(tid: Tid, nr: u64, args: &[u64; 6]) -> u64 {
    if nr == arch::NR_CLONE3 {
        // struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, stack.
        let mut b = [0u8; 8];
        if os::read_mem(tid, args[0].wrapping_add(40), &mut b).ok() == Some(8) {
            return u64::from_le_bytes(b);
        }
        0
    } else if nr == arch::NR_FORK || nr == arch::NR_VFORK {
        0
    } else {
        // clone(flags, stack, ...) on x86_64 and aarch64 alike.
        args[1]
    }
}

/// The program path an exec was given, read after the exec from the new stack
/// (auxv AT_EXECFN), resolved against the working directory.
pub fn exec_path<W: Write>(t: &Capture<W>, pid: Tid) -> Rc<[u8]> {
    const AT_EXECFN: u64 = 31;
    let fallback = || {
        Rc::from(
            os::readlink(format!("/proc/{pid}/exe").as_bytes())
                .unwrap_or_default()
                .as_slice(),
        )
    };
    let Ok(auxv) = std::fs::read(format!("/proc/{pid}/auxv")) else {
        return fallback();
    };
    let addr = auxv.chunks_exact(16).find_map(|ch| {
        let k = u64::from_ne_bytes(ch[..8].try_into().unwrap_or([0; 8]));
        (k == AT_EXECFN).then(|| u64::from_ne_bytes(ch[8..].try_into().unwrap_or([0; 8])))
    });
    let mut raw = Vec::new();
    let Some(addr) = addr else { return fallback() };
    if os::read_cstr(pid, addr, PATH_MAX, &mut raw).is_err() {
        return fallback();
    }
    let cwd = t.procs.get(&pid).map(|p| p.fs.borrow().cwd.clone());
    let mut out = Vec::new();
    resolve(cwd.as_deref().unwrap_or(b"/"), &raw, &mut out);
    Rc::from(out.as_slice())
}

/// A process's command line from /proc.
pub fn proc_cmdline(pid: Tid) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn is_restart(ret: i64) -> bool {
    // ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK
    matches!(ret, -516..=-512) && ret != -515
}

impl<W: Write> Capture<W> {
    /// Reads a path argument and resolves it against `dirfd` (AT_FDCWD: the working
    /// directory). Fills `c.path`; returns the resolved bytes.
    fn path_arg(
        &mut self,
        tid: Tid,
        pid: Tid,
        dirfd: i32,
        addr: u64,
        c: &mut Syscall,
    ) -> Option<Rc<[u8]>> {
        let mut raw = std::mem::take(&mut self.buf);
        let ok = self.mem_cstr(tid, addr, PATH_MAX, &mut raw);
        let r = match ok {
            Ok(_) => {
                let mut out = std::mem::take(&mut self.buf2);
                if raw.first() == Some(&b'/') {
                    resolve(b"/", &raw, &mut out);
                } else {
                    match self.dir_base(pid, dirfd, c) {
                        Some(base) => resolve(&base, &raw, &mut out),
                        None => resolve(b"/", &raw, &mut out),
                    }
                }
                let bytes: Rc<[u8]> = Rc::from(out.as_slice());
                c.path = Some(self.intern_path(&out));
                self.buf2 = out;
                Some(bytes)
            }
            Err(_) => {
                c.ev |= ev::PATH_UNREADABLE;
                None
            }
        };
        self.buf = raw;
        r
    }

    /// Interns a path, noting whether it is one of dejavu's own agent files: the calls
    /// the agents make on their own files are dejavu's, not the program's, and are not
    /// recorded (see `Tracer::push`).
    pub fn intern_path(&mut self, bytes: &[u8]) -> StrId {
        let id = self.w.intern(bytes);
        if let Some(prefix) = &self.own_prefix {
            if bytes.starts_with(prefix) {
                self.own_paths.insert(id.0);
            }
        }
        id
    }

    /// The directory a relative path is resolved against.
    fn dir_base(&mut self, pid: Tid, dirfd: i32, c: &mut Syscall) -> Option<Rc<[u8]>> {
        if dirfd == AT_FDCWD {
            return self.procs.get(&pid).map(|p| p.fs.borrow().cwd.clone());
        }
        match self.fd_lookup(pid, dirfd) {
            Some(f) => Some(f.path),
            None => {
                c.ev |= ev::FD_UNKNOWN;
                None
            }
        }
    }

    /// The table entry for `fd`, asking /proc about descriptors we never saw created
    /// (inherited, opened before attach, or made by an untraced call).
    pub fn fd_lookup(&mut self, pid: Tid, fd: i32) -> Option<Fd> {
        let table = self.procs.get(&pid)?.fds.clone();
        if let Some(f) = table.borrow().get(fd) {
            return Some(f.clone());
        }
        if fd < 0 || self.mem.copy().is_some() {
            // After the fact (eBPF), /proc may describe a later descriptor with this
            // number: unknown is the honest answer (docs/ebpf-backend.md).
            return None;
        }
        let link = os::readlink(format!("/proc/{pid}/fd/{fd}").as_bytes()).ok()?;
        let st = os::stat_path(format!("/proc/{pid}/fd/{fd}").as_bytes())
            .ok()
            .map(|s| arch::from_libc_stat(&s));
        let flags = fdinfo_flags(pid, fd);
        let kind = match &st {
            Some(s) => FdKind::of(s),
            None if link.starts_with(b"pipe:") => FdKind::Pipe,
            None if link.starts_with(b"socket:") => FdKind::Socket,
            None => FdKind::Other,
        };
        let f = Fd {
            path_id: self.intern_path(&link),
            path: Rc::from(link.as_slice()),
            stat: st.map(|s| self.w.intern_stat(&s)),
            kind,
            cloexec: flags & libc::O_CLOEXEC as u64 != 0,
            append: flags & libc::O_APPEND as u64 != 0,
        };
        table.borrow_mut().insert(fd, f.clone());
        Some(f)
    }

    /// Learns every descriptor a process already has (inherited from dejavu, or open
    /// before we attached), so a call decoded after it closed one still names it.
    pub fn learn_open_fds(&mut self, pid: Tid) {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return;
        };
        let fds: Vec<i32> = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        // The program dejavu started, stopped before its exec, still holds dejavu's own
        // close-on-exec descriptors (the BPF maps, programs and links, the trace): its
        // exec closes them, so they are not looked up (a readlink, a stat and an fdinfo
        // read each: about 10 ms of start-up for the eBPF backend's 30).
        let pre_exec = self.tasks.get(&pid).is_some_and(|t| t.pre_exec);
        for fd in fds {
            if pre_exec && fdinfo_flags(pid, fd) & libc::O_CLOEXEC as u64 != 0 {
                continue;
            }
            self.fd_lookup(pid, fd);
        }
    }

    /// Fills `fd`, `path` and `stat` of a descriptor-based call.
    fn fd_arg(&mut self, pid: Tid, fd: i32, c: &mut Syscall) -> Option<Fd> {
        c.fd = Some(fd);
        let f = self.fd_lookup(pid, fd);
        match &f {
            Some(f) => {
                c.path = Some(f.path_id);
                c.stat = f.stat;
                c.ev |= ev::PATH_FROM_FD;
            }
            None => c.ev |= ev::FD_UNKNOWN,
        }
        f
    }

    /// Decodes a call at its entry stop.
    pub fn decode_entry(&mut self, tid: Tid, pid: Tid, sys: Sys, a: [u64; 6], now: u64) -> Entry {
        use Sys::*;
        let mut c = Syscall::new(now, pid as u32, tid as u32, sys);
        let mut e = Entry {
            call: c,
            args: a,
            path_bytes: None,
            exec: None,
            payload: false,
            at_exit: false,
        };
        match sys {
            Open => {
                e.path_bytes = self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.flags = a[1];
                c.mode = a[2] as u32;
            }
            Creat => {
                e.path_bytes = self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.flags = (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64;
                c.mode = a[1] as u32;
            }
            Openat => {
                e.path_bytes = self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                c.flags = a[2];
                c.mode = a[3] as u32;
            }
            Openat2 => {
                e.path_bytes = self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                let mut how = [0u8; 24];
                if a[3] >= 24 && self.mem_read(tid, a[2], &mut how).ok() == Some(24) {
                    let word = |i: usize| {
                        u64::from_le_bytes(how[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
                    };
                    c.flags = word(0);
                    c.mode = word(1) as u32;
                    c.aux = word(2);
                }
            }
            MemfdCreate => {
                let mut name = Vec::new();
                if self.mem_cstr(tid, a[0], 256, &mut name).is_ok() {
                    c.path2 = Some(self.w.intern(&name));
                    let mut p = b"/memfd:".to_vec();
                    p.extend_from_slice(&name);
                    e.path_bytes = Some(Rc::from(p.as_slice()));
                }
                c.flags = a[1];
            }
            Close | Fsync | Fdatasync | Fchdir | Dup | Accept | IoUringEnter => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                if sys == Accept {
                    c.path = None;
                    c.ev &= !ev::PATH_FROM_FD;
                }
                if sys == IoUringEnter {
                    c.ev |= ev::UNDECODED;
                }
            }
            Accept4 => {
                c.fd = Some(arg_fd(a[0]));
                c.flags = a[3];
            }
            IoUringSetup => c.ev |= ev::UNDECODED,
            Mmap => {
                // mmap(addr, length, prot, flags, fd, offset) of a file.
                self.fd_arg(pid, arg_fd(a[4]), &mut c);
                c.count = a[1];
                c.aux = a[2];
                c.flags = a[3];
                c.offset = Some(a[5] as i64);
            }
            CloseRange => {
                c.fd = Some(a[0] as u32 as i32);
                c.aux = a[1] as u32 as u64;
                c.flags = a[2];
            }
            Read | Write | Readv | Writev => {
                let f = self.fd_arg(pid, arg_fd(a[0]), &mut c);
                if matches!(sys, Read | Write) {
                    c.count = a[2];
                }
                e.payload = matches!(sys, Write | Writev) && keeps_payload(arg_fd(a[0]), f);
            }
            Pread64 | Pwrite64 => {
                let f = self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.count = a[2];
                c.offset = Some(a[3] as i64);
                e.payload = sys == Pwrite64 && keeps_payload(arg_fd(a[0]), f);
            }
            Preadv | Pwritev | Preadv2 | Pwritev2 => {
                let f = self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.offset = Some(a[3] as i64);
                if matches!(sys, Preadv2 | Pwritev2) {
                    c.flags = a[5];
                }
                e.payload = matches!(sys, Pwritev | Pwritev2) && keeps_payload(arg_fd(a[0]), f);
            }
            Lseek => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.offset = Some(a[1] as i64);
                c.aux = a[2];
            }
            Stat | Lstat => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
            }
            Fstat => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.stat = None; // the answer comes at exit
            }
            Newfstatat | Statx => {
                let flags = if sys == Statx { a[2] } else { a[3] };
                c.flags = flags;
                if sys == Statx {
                    c.aux = a[3];
                }
                self.at_path_or_fd(tid, pid, arg_fd(a[0]), a[1], flags, &mut c);
                c.stat = None;
            }
            Access => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.mode = a[1] as u32;
            }
            Faccessat | Faccessat2 => {
                self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                c.mode = a[2] as u32;
                if sys == Faccessat2 {
                    c.flags = a[3];
                }
            }
            Readlink => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.count = a[2];
            }
            Readlinkat => {
                self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                c.count = a[3];
            }
            Getdents64 => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.count = a[2];
            }
            Mkdir => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.mode = a[1] as u32;
            }
            Mkdirat => {
                self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                c.mode = a[2] as u32;
            }
            Rmdir | Unlink | Chdir => {
                e.path_bytes = self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
            }
            Unlinkat => {
                self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                c.flags = a[2];
            }
            Rename | Link => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                let mut c2 = c;
                self.path_arg(tid, pid, AT_FDCWD, a[1], &mut c2);
                c.path2 = c2.path;
                c.ev |= c2.ev;
            }
            Renameat | Renameat2 | Linkat => {
                self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                let mut c2 = c;
                self.path_arg(tid, pid, arg_fd(a[2]), a[3], &mut c2);
                c.path2 = c2.path;
                c.ev |= c2.ev;
                if sys != Renameat {
                    c.flags = a[4];
                }
            }
            Symlink | Symlinkat => {
                let mut target = Vec::new();
                if self.mem_cstr(tid, a[0], PATH_MAX, &mut target).is_ok() {
                    c.path2 = Some(self.w.intern(&target));
                } else {
                    c.ev |= ev::PATH_UNREADABLE;
                }
                if sys == Symlink {
                    self.path_arg(tid, pid, AT_FDCWD, a[1], &mut c);
                } else {
                    self.path_arg(tid, pid, arg_fd(a[1]), a[2], &mut c);
                }
            }
            Chmod => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.mode = a[1] as u32;
            }
            Fchmod => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.mode = a[1] as u32;
            }
            Fchmodat | Fchmodat2 => {
                self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                c.mode = a[2] as u32;
                if sys == Fchmodat2 {
                    c.flags = a[3];
                }
            }
            Chown | Lchown => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.aux = (a[1] & 0xffff_ffff) << 32 | (a[2] & 0xffff_ffff);
            }
            Fchown => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.aux = (a[1] & 0xffff_ffff) << 32 | (a[2] & 0xffff_ffff);
            }
            Fchownat => {
                self.at_path_or_fd(tid, pid, arg_fd(a[0]), a[1], a[4], &mut c);
                c.aux = (a[2] & 0xffff_ffff) << 32 | (a[3] & 0xffff_ffff);
                c.flags = a[4];
            }
            Truncate => {
                self.path_arg(tid, pid, AT_FDCWD, a[0], &mut c);
                c.offset = Some(a[1] as i64);
            }
            Ftruncate => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.offset = Some(a[1] as i64);
            }
            SyncFileRange => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.offset = Some(a[1] as i64);
                c.count = a[2];
                c.flags = a[3];
            }
            Dup2 | Dup3 => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.fd2 = Some(arg_fd(a[1]));
                if sys == Dup3 {
                    c.flags = a[2];
                }
            }
            Fcntl => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                c.flags = a[1];
                c.aux = a[2];
            }
            Pipe => {}
            Pipe2 => c.flags = a[1],
            Socket => {
                c.aux = a[0];
                c.flags = a[1];
                c.mode = a[2] as u32;
            }
            Connect => {
                c.fd = Some(arg_fd(a[0]));
                self.connect_addr(tid, pid, a[1], a[2], &mut c);
            }
            Sendfile => {
                self.fd_arg(pid, arg_fd(a[0]), &mut c);
                let mut c2 = c;
                self.fd_arg(pid, arg_fd(a[1]), &mut c2);
                c.fd2 = c2.fd;
                c.path2 = c2.path;
                c.stat = None;
                if a[2] != 0 {
                    let mut b = [0u8; 8];
                    if self.mem_read(tid, a[2], &mut b).ok() == Some(8) {
                        c.offset = Some(i64::from_le_bytes(b));
                    }
                }
                c.count = a[3];
            }
            CopyFileRange | Splice => {
                self.fd_arg(pid, arg_fd(a[2]), &mut c);
                let mut c2 = c;
                self.fd_arg(pid, arg_fd(a[0]), &mut c2);
                c.fd2 = c2.fd;
                c.path2 = c2.path;
                c.stat = None;
                c.count = a[4];
                c.flags = a[5];
            }
            Utimensat => {
                c.flags = a[3];
                if a[1] == 0 {
                    self.fd_arg(pid, arg_fd(a[0]), &mut c);
                } else {
                    self.path_arg(tid, pid, arg_fd(a[0]), a[1], &mut c);
                }
            }
            Execve | Execveat => {
                let (dirfd, path, argv) = if sys == Execve {
                    (AT_FDCWD, a[0], a[1])
                } else {
                    (arg_fd(a[0]), a[1], a[2])
                };
                if sys == Execveat {
                    c.flags = a[4];
                }
                let exe = self.path_arg(tid, pid, dirfd, path, &mut c);
                let args = self.read_argv(tid, argv);
                c.payload = Some(self.w.intern(&args));
                e.exec = Some((exe.unwrap_or_else(|| Rc::from(&b""[..])), args));
            }
        }
        e.call = c;
        e
    }

    /// `*at` calls that accept AT_EMPTY_PATH: an empty path names the descriptor itself.
    fn at_path_or_fd(
        &mut self,
        tid: Tid,
        pid: Tid,
        dirfd: i32,
        addr: u64,
        flags: u64,
        c: &mut Syscall,
    ) {
        if flags & libc::AT_EMPTY_PATH as u64 != 0 {
            let mut raw = std::mem::take(&mut self.buf);
            let empty = self.mem_cstr(tid, addr, 1, &mut raw).is_ok() && raw.is_empty();
            self.buf = raw;
            if empty {
                self.fd_arg(pid, dirfd, c);
                return;
            }
        }
        self.path_arg(tid, pid, dirfd, addr, c);
    }

    fn connect_addr(&mut self, tid: Tid, pid: Tid, addr: u64, len: u64, c: &mut Syscall) {
        let len = (len as usize).min(110);
        let mut b = [0u8; 110];
        let Ok(n) = self.mem_read(tid, addr, &mut b[..len]) else {
            return;
        };
        if n < 2 {
            return;
        }
        let family = u16::from_ne_bytes([b[0], b[1]]);
        c.aux = family as u64;
        if family as i32 != libc::AF_UNIX || n <= 2 {
            return;
        }
        let sun = &b[2..n];
        if sun[0] == 0 {
            // Abstract socket: no filesystem path.
            let mut p = b"@".to_vec();
            p.extend_from_slice(&sun[1..]);
            c.path = Some(self.w.intern(&p));
        } else {
            let end = sun.iter().position(|&x| x == 0).unwrap_or(sun.len());
            let mut out = Vec::new();
            let base = self.procs.get(&pid).map(|p| p.fs.borrow().cwd.clone());
            resolve(base.as_deref().unwrap_or(b"/"), &sun[..end], &mut out);
            c.path = Some(self.w.intern(&out));
        }
    }

    /// Completes a call at its exit stop and writes its record.
    pub fn exit(&mut self, tid: Tid, e: Entry, ret: i64, now: u64) {
        use Sys::*;
        let mut c = e.call;
        c.ret = ret;
        c.dur = now.saturating_sub(c.ts);
        if is_restart(ret) {
            c.ev |= ev::RESTARTED;
        }
        let pid = c.pid as Tid;
        let a = e.args;
        let ok = ret >= 0;
        let mut code = None;
        match c.sys {
            Open | Openat | Openat2 | Creat | MemfdCreate if ok => {
                let fd = ret as i32;
                let mut path = e.path_bytes.clone().unwrap_or_else(|| Rc::from(&b""[..]));
                let mut path_id = c.path.unwrap_or_else(|| self.intern_path(&path));
                let st = if !self.opts.open_identity {
                    None
                } else if let Some(snap) = self.mem.copy() {
                    snap.fd(fd).map(|f| f.stat)
                } else {
                    os::stat_path(format!("/proc/{pid}/fd/{fd}").as_bytes())
                        .ok()
                        .map(|s| arch::from_libc_stat(&s))
                };
                if let Some(s) = &st {
                    if let Some(named) = self.named_without_dotdot(&path, s) {
                        path = named;
                        path_id = self.intern_path(&path);
                        c.path = Some(path_id);
                    }
                }
                let tmpfile = libc::O_TMPFILE as u64;
                if c.sys != MemfdCreate && c.sys != Creat && c.flags & tmpfile == tmpfile {
                    // An unnamed file (O_TMPFILE) made in the directory the call names:
                    // its descriptor's calls are that file's, not the directory's.
                    path = self.tmpfile_name(pid, fd, &path, st.as_ref());
                    path_id = self.intern_path(&path);
                }
                let kind = match &st {
                    Some(s) => FdKind::of(s),
                    None => guess_kind(&path),
                };
                let stat = st.map(|s| self.w.intern_stat(&s));
                c.stat = stat;
                let cloexec = if c.sys == MemfdCreate {
                    c.flags & libc::MFD_CLOEXEC as u64 != 0
                } else {
                    c.flags & libc::O_CLOEXEC as u64 != 0
                };
                let f = Fd {
                    path,
                    path_id,
                    stat,
                    kind,
                    cloexec,
                    append: c.flags & libc::O_APPEND as u64 != 0,
                };
                self.install_fd(pid, fd, f);
                if let Some(stack) = c.stack {
                    self.stacks.fd_opened(pid, fd, stack);
                }
            }
            Close
                // Linux releases the descriptor even when close reports EINTR/EIO.
                if ret != -(libc::EBADF as i64) => {
                    if let Some(p) = self.procs.get(&pid) {
                        p.fds.borrow_mut().remove(a[0] as u32 as i32);
                    }
                    let fd = a[0] as u32;
                    self.stacks.fds_released(pid, fd, fd);
                }
            // New code (a library loaded): the next stack with an address outside the
            // known code reads the process's mappings again; and where it is, for when
            // the process is gone (stacks/native/layout.rs). Data changes nothing there.
            Mmap if ok && a[2] & libc::PROT_EXEC as u64 != 0 => {
                self.stacks.mappings_changed(pid);
                let path = self.procs.get(&pid).and_then(|p| {
                    p.fds
                        .borrow()
                        .get(a[4] as u32 as i32)
                        .map(|f| f.path.clone())
                });
                if let Some(path) = path {
                    self.stacks.mapped_code(pid, ret as u64, a[1], a[5], &path);
                    // Recorded after the mmap's own record, at its return.
                    code = Some((ret as u64, a[1], a[5], path));
                }
            }
            CloseRange if ok => {
                if let Some(p) = self.procs.get(&pid) {
                    let cloexec_only = a[2] & libc::CLOSE_RANGE_CLOEXEC as u64 != 0;
                    p.fds
                        .borrow_mut()
                        .close_range(a[0] as u32, a[1] as u32, cloexec_only);
                    if !cloexec_only {
                        self.stacks.fds_released(pid, a[0] as u32, a[1] as u32);
                    }
                }
            }
            Dup | Dup2 | Dup3 if ok => {
                let old = a[0] as u32 as i32;
                if ret as i32 != old {
                    if let Some(mut f) = self.fd_lookup(pid, old) {
                        f.cloexec = c.sys == Dup3 && a[2] & libc::O_CLOEXEC as u64 != 0;
                        self.install_fd(pid, ret as i32, f);
                    } else if let Some(p) = self.procs.get(&pid) {
                        // A copy of a descriptor we cannot name (a socketpair made by an
                        // untraced call): whatever the target was is gone; naming it after
                        // its old file would attribute later writes there.
                        p.fds.borrow_mut().remove(ret as i32);
                    }
                }
            }
            Fcntl if ok => self.fcntl_exit(pid, a, ret),
            Sendfile if e.at_exit && ret > 0 => {
                // The kernel advanced *offset by the bytes sent.
                c.offset = c.offset.map(|o| o - ret);
            }
            Pipe | Pipe2 if ok => {
                let mut b = [0u8; 8];
                if self.mem_read(tid, a[0], &mut b).ok() == Some(8) {
                    let r = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                    let w = i32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
                    c.fd = Some(r);
                    c.fd2 = Some(w);
                    let cloexec = c.flags & libc::O_CLOEXEC as u64 != 0;
                    for fd in [r, w] {
                        self.install_proc_fd(pid, fd, FdKind::Pipe, cloexec);
                    }
                }
            }
            Socket | Accept | Accept4 if ok => {
                let cloexec = if c.sys == Socket {
                    c.flags & libc::SOCK_CLOEXEC as u64 != 0
                } else {
                    c.flags & libc::SOCK_CLOEXEC as u64 != 0 && c.sys == Accept4
                };
                self.install_proc_fd(pid, ret as i32, FdKind::Socket, cloexec);
            }
            Chdir | Fchdir if ok => {
                let cwd = if self.mem.copy().is_some() {
                    // After the fact (eBPF): the process may have moved on, so the path as
                    // resolved by us (symlinks in it are not followed; docs/ebpf-backend.md).
                    if c.sys == Chdir {
                        e.path_bytes.clone()
                    } else {
                        self.fd_lookup(pid, a[0] as u32 as i32).map(|f| f.path)
                    }
                } else {
                    // Ask the kernel: it resolved symlinks and `..` for us.
                    os::readlink(format!("/proc/{tid}/cwd").as_bytes())
                        .ok()
                        .map(|v| Rc::from(v.as_slice()))
                        .or(e.path_bytes.clone())
                };
                if let (Some(cwd), Some(p)) = (cwd, self.procs.get(&pid)) {
                    p.fs.borrow_mut().cwd = cwd;
                }
            }
            Stat | Lstat | Fstat | Newfstatat if ok => {
                let ptr = match c.sys {
                    Stat | Lstat | Fstat => a[1],
                    _ => a[2],
                };
                let mut b = [0u8; arch::STAT_SIZE];
                if self.mem_read(tid, ptr, &mut b).ok() == Some(b.len()) {
                    if let Some(st) = arch::parse_stat(&b) {
                        c.stat = Some(self.w.intern_stat(&st));
                    }
                }
            }
            Statx if ok => {
                let mut b = [0u8; arch::STATX_SIZE];
                if self.mem_read(tid, a[4], &mut b).ok() == Some(b.len()) {
                    if let Some(st) = arch::parse_statx(&b) {
                        c.stat = Some(self.w.intern_stat(&st));
                    }
                }
            }
            Readlink | Readlinkat if ret > 0 => {
                let ptr = if c.sys == Readlink { a[1] } else { a[2] };
                let mut b = vec![0u8; (ret as usize).min(PATH_MAX)];
                if let Ok(n) = self.mem_read(tid, ptr, &mut b) {
                    c.path2 = Some(self.w.intern(&b[..n]));
                }
            }
            Readv | Writev | Preadv | Pwritev | Preadv2 | Pwritev2 => {
                let (sum, ranges) = self.read_iovecs(tid, a[1], a[2]);
                c.count = sum;
                if matches!(c.sys, Writev | Pwritev | Pwritev2) && ret > 0 {
                    let want = self.written_bytes(e.payload, ret);
                    let mut take = Vec::new();
                    let mut left = want;
                    for (addr, len) in ranges {
                        if left == 0 {
                            break;
                        }
                        let n = len.min(left);
                        take.push((addr, n));
                        left -= n;
                    }
                    let mut buf = std::mem::take(&mut self.buf);
                    if self.mem_gather(tid, &take, &mut buf).is_ok() {
                        self.written(&mut c, e.payload, &buf);
                    }
                    self.buf = buf;
                }
            }
            Write | Pwrite64 if ret > 0 => {
                let want = self.written_bytes(e.payload, ret);
                let mut buf = std::mem::take(&mut self.buf);
                buf.clear();
                buf.resize(want, 0);
                if let Ok(n) = self.mem_read(tid, a[1], &mut buf) {
                    buf.truncate(n);
                    self.written(&mut c, e.payload, &buf);
                }
                self.buf = buf;
            }
            _ => {}
        }
        self.push(Record::Syscall(c));
        if let Some((start, len, offset, path)) = code {
            self.code_mapped(pid, now, start, len, offset, &path);
        }
    }

    /// How many of the `ret` bytes a write wrote to read back: the first
    /// `FINGERPRINT_BYTES` for its fingerprint, or its payload prefix if that is longer
    /// and kept (`payload`).
    fn written_bytes(&self, payload: bool, ret: i64) -> usize {
        let keep = if payload {
            self.opts.payload_bytes as usize
        } else {
            0
        };
        (ret as u64).min(keep.max(mask::FINGERPRINT_BYTES) as u64) as usize
    }

    /// Fills a successful write's fingerprint from the first bytes it wrote (`data`,
    /// read back), and its payload when the descriptor keeps one: the first
    /// `payload_bytes` of them, `payload_truncated` when the call wrote more.
    fn written(&mut self, c: &mut Syscall, payload: bool, data: &[u8]) {
        c.fingerprint = Some(mask::fingerprint(data));
        let limit = self.opts.payload_bytes as usize;
        if payload && limit > 0 {
            let kept = &data[..data.len().min(limit)];
            c.payload = Some(self.w.intern_local(kept));
            if c.ret as u64 > kept.len() as u64 {
                c.ev |= ev::PAYLOAD_TRUNCATED;
            }
        }
    }

    fn fcntl_exit(&mut self, pid: Tid, a: [u64; 6], ret: i64) {
        let fd = a[0] as u32 as i32;
        match a[1] as i32 {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                if let Some(mut f) = self.fd_lookup(pid, fd) {
                    f.cloexec = a[1] as i32 == libc::F_DUPFD_CLOEXEC;
                    self.install_fd(pid, ret as i32, f);
                }
            }
            libc::F_SETFD => {
                if let Some(p) = self.procs.get(&pid) {
                    if let Some(f) = p.fds.borrow_mut().get_mut(fd) {
                        f.cloexec = a[2] & libc::FD_CLOEXEC as u64 != 0;
                    }
                }
            }
            libc::F_SETFL => {
                if let Some(p) = self.procs.get(&pid) {
                    if let Some(f) = p.fds.borrow_mut().get_mut(fd) {
                        f.append = a[2] & libc::O_APPEND as u64 != 0;
                    }
                }
            }
            _ => {}
        }
    }

    /// The name of an unnamed file (O_TMPFILE) made in directory `dir` and open as `fd`
    /// ([`unnamed_file_path`]): by its inode; without its identity (--no-file-identity),
    /// /proc's own name while the process runs, else a number of the recording's own.
    fn tmpfile_name(&mut self, pid: Tid, fd: i32, dir: &[u8], st: Option<&FileStat>) -> Rc<[u8]> {
        if let Some(s) = st {
            return Rc::from(unnamed_file_path(dir, Some(s.ino), 0));
        }
        // /proc only while the process runs (ptrace), never from a snapshot.
        let link = self
            .mem
            .copy()
            .is_none()
            .then(|| os::readlink(format!("/proc/{pid}/fd/{fd}").as_bytes()).ok())
            .flatten()
            .filter(|l| l.starts_with(b"/"));
        if let Some(link) = link {
            return Rc::from(link);
        }
        self.tmpfiles += 1;
        Rc::from(unnamed_file_path(dir, None, self.tmpfiles))
    }

    /// What an open of `path` that gave the file `st` is named, when its path climbs with
    /// `..`: gnulib's fts (du, find, rm -r, chmod -R) goes back up a tree with
    /// `openat(fd, "..")`, and each name joined to the descriptor's path would grow
    /// (`/usr/lib/debug/../clang/../jvm/...`), one directory under many names. The path
    /// with each `DIR/..` removed is taken only when it names a directory this recording
    /// saw opened and that is the same file (device and inode): with a symbolic link
    /// before the `..`, the text and the kernel's answer differ, and the path stays as
    /// given. A directory opened by a path without `..` is remembered for that.
    fn named_without_dotdot(&mut self, path: &Rc<[u8]>, st: &FileStat) -> Option<Rc<[u8]>> {
        use dejavu_trace::{mode, stat_known};
        if st.known & stat_known::IDENTITY == 0 {
            return None;
        }
        let is_dir = st.known & stat_known::MODE != 0 && st.mode & mode::S_IFMT == mode::S_IFDIR;
        if !path.split(|&c| c == b'/').any(|c| c == b"..") {
            if is_dir && path.first() == Some(&b'/') {
                // Bounded: a walk of a huge tree keeps the last ones (each is looked up
                // by its children's climbs soon after it was opened).
                if self.dirs.len() >= 1 << 20 {
                    self.dirs.clear();
                }
                self.dirs.insert(path.clone(), (st.dev, st.ino));
            }
            return None;
        }
        let mut out: Vec<&[u8]> = Vec::new();
        for comp in path.split(|&c| c == b'/').filter(|c| !c.is_empty()) {
            if comp == b".." {
                out.pop();
            } else {
                out.push(comp);
            }
        }
        let mut named = Vec::with_capacity(path.len());
        for comp in &out {
            named.push(b'/');
            named.extend_from_slice(comp);
        }
        if named.is_empty() {
            named.push(b'/');
        }
        let (dev, ino) = *self.dirs.get(named.as_slice())?;
        (dev == st.dev && ino == st.ino).then(|| Rc::from(named.as_slice()))
    }

    fn install_fd(&mut self, pid: Tid, fd: i32, f: Fd) {
        if let Some(p) = self.procs.get(&pid) {
            p.fds.borrow_mut().insert(fd, f);
        }
        // A new file at that number: what the agents said of the old one is over.
        self.stacks.fds_released(pid, fd as u32, fd as u32);
    }

    /// Installs a pipe or socket, named as /proc names it (`pipe:[INODE]`).
    fn install_proc_fd(&mut self, pid: Tid, fd: i32, kind: FdKind, cloexec: bool) {
        let prefix = if kind == FdKind::Pipe {
            "pipe"
        } else {
            "socket"
        };
        let link = match self.mem.copy() {
            // As /proc names it: the kind and the inode number.
            Some(snap) => match snap.fd(fd) {
                Some(f) => format!("{prefix}:[{}]", f.stat.ino).into_bytes(),
                None => format!("{prefix}:").into_bytes(),
            },
            None => os::readlink(format!("/proc/{pid}/fd/{fd}").as_bytes())
                .unwrap_or_else(|_| format!("{prefix}:").into_bytes()),
        };
        let f = Fd {
            path_id: self.intern_path(&link),
            path: Rc::from(link.as_slice()),
            stat: None,
            kind,
            cloexec,
            append: false,
        };
        self.install_fd(pid, fd, f);
    }
}

/// Whether a write to `fd` keeps its payload: by what the descriptor is (`f`), and for
/// descriptors 0-2 whatever it is, even when unknown.
fn keeps_payload(fd: i32, f: Option<Fd>) -> bool {
    match f {
        Some(f) => f.keeps_payload(fd),
        None => (0..=2).contains(&fd),
    }
}

fn guess_kind(path: &[u8]) -> FdKind {
    if path == b"/dev/null" {
        FdKind::DevNull
    } else if path.starts_with(b"/dev/pts/") || path.starts_with(b"/dev/tty") {
        FdKind::Tty
    } else {
        FdKind::File
    }
}

/// The open file's flags of descriptor `fd` of `pid`, from /proc (0 when unknown). One
/// read: "flags:" is the second line of every fdinfo file, well within 256 bytes (reading
/// it whole took four reads of growing size).
fn fdinfo_flags(pid: Tid, fd: i32) -> u64 {
    use std::io::Read;
    let mut buf = [0u8; 256];
    let n = std::fs::File::open(format!("/proc/{pid}/fdinfo/{fd}"))
        .and_then(|mut f| f.read(&mut buf))
        .unwrap_or(0);
    buf[..n]
        .split(|&c| c == b'\n')
        .find_map(|l| l.strip_prefix(b"flags:"))
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| u64::from_str_radix(v.trim(), 8).ok())
        .unwrap_or(0)
}

impl<W: Write> Capture<W> {
    /// Memory of the call being decoded: the live tracee's, or another backend's copy.
    pub fn mem_read(&self, tid: Tid, addr: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        self.mem.read(tid, addr, buf)
    }

    /// A string of the call being decoded (see `mem_read`).
    pub fn mem_cstr(
        &self,
        tid: Tid,
        addr: u64,
        max: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<bool> {
        self.mem.cstr(tid, addr, max, out)
    }

    fn mem_gather(
        &self,
        tid: Tid,
        ranges: &[(u64, usize)],
        buf: &mut Vec<u8>,
    ) -> std::io::Result<usize> {
        self.mem.gather(tid, ranges, buf)
    }

    /// Reads an iovec array: (sum of lengths, the ranges). At most 1024 entries (IOV_MAX).
    fn read_iovecs(&self, tid: Tid, ptr: u64, cnt: u64) -> (u64, Vec<(u64, usize)>) {
        let cnt = cnt.min(1024) as usize;
        let mut b = vec![0u8; cnt * 16];
        let Ok(n) = self.mem_read(tid, ptr, &mut b) else {
            return (0, Vec::new());
        };
        let mut sum = 0u64;
        let mut ranges = Vec::with_capacity(n / 16);
        for ch in b[..n - n % 16].chunks_exact(16) {
            let base = u64::from_ne_bytes(ch[..8].try_into().unwrap_or([0; 8]));
            let len = u64::from_ne_bytes(ch[8..].try_into().unwrap_or([0; 8]));
            sum = sum.saturating_add(len);
            ranges.push((base, len as usize));
        }
        (sum, ranges)
    }

    /// Reads execve's argv (bounded), joined by NUL.
    fn read_argv(&self, tid: Tid, ptr: u64) -> Vec<u8> {
        if let Some(argv) = self.mem.copy().and_then(|s| s.argv()) {
            return argv.to_vec();
        }
        let mut out = Vec::new();
        if ptr == 0 {
            return out;
        }
        let mut ptrs = vec![0u8; 8 * 64];
        let mut idx = 0usize;
        let mut s = Vec::new();
        'outer: while idx < ARGV_MAX_ARGS {
            let Ok(n) = self.mem_read(tid, ptr + (idx * 8) as u64, &mut ptrs) else {
                break;
            };
            if n < 8 {
                break;
            }
            for ch in ptrs[..n - n % 8].chunks_exact(8) {
                let p = u64::from_ne_bytes(ch.try_into().unwrap_or([0; 8]));
                if p == 0 {
                    break 'outer;
                }
                if idx > 0 {
                    out.push(0);
                }
                if self.mem_cstr(tid, p, 4096, &mut s).is_ok() {
                    out.extend_from_slice(&s);
                }
                idx += 1;
                if out.len() > ARGV_MAX_BYTES || idx >= ARGV_MAX_ARGS {
                    out.extend_from_slice(b"\0...");
                    break 'outer;
                }
            }
        }
        out
    }
}
