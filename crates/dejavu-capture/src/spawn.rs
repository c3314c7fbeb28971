//! Starting the program: fork, install the seccomp filter in the child, stop it so the
//! tracer can seize it, then exec. Everything the child needs is prepared before fork:
//! between fork and exec it only makes raw syscalls.
//!
//! The language agents' channel (stacks/agent.rs) is a pipe whose write end the program
//! inherits at a fixed descriptor number (the agents' channel), passed in by the tracer.

use crate::error::RecordError;
use crate::os::{self, Tid};
use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// The program a command line runs (resolved as `resolve_program` does) and the command
/// line as the trace's metadata records it.
pub fn command(argv: &[OsString]) -> Result<(PathBuf, Vec<String>), RecordError> {
    let prog = argv
        .first()
        .ok_or_else(|| RecordError::NotFound(String::new()))?;
    let path = resolve_program(prog)?;
    let command = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Ok((path, command))
}

/// Finds `prog` the way execvp does: as given when it contains a slash, else along PATH.
/// Resolving here (not with execvp in the child) gives a clear "not found" and makes the
/// program's exec the single execve in the trace, as with strace.
pub fn resolve_program(prog: &OsString) -> Result<PathBuf, RecordError> {
    let name = prog.to_string_lossy().into_owned();
    if prog.is_empty() {
        return Err(RecordError::NotFound(name));
    }
    if prog.as_bytes().contains(&b'/') {
        let p = PathBuf::from(prog);
        return match std::fs::metadata(&p) {
            Ok(_) => Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(RecordError::NotFound(name)),
            Err(e) => Err(RecordError::NotExecutable {
                program: name,
                source: e,
            }),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied = None;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let cand = dir.join(prog);
        let Ok(md) = std::fs::metadata(&cand) else {
            continue;
        };
        if md.is_dir() {
            continue;
        }
        if is_executable(&cand) {
            return Ok(cand);
        }
        denied.get_or_insert(cand);
    }
    match denied {
        Some(p) => Err(RecordError::NotExecutable {
            program: p.display().to_string(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        }),
        None => Err(RecordError::NotFound(name)),
    }
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: valid C string.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// How the child failed before exec, reported through a close-on-exec pipe.
const STAGE_SECCOMP: u8 = 1;
const STAGE_EXEC: u8 = 2;

/// A child that stopped itself with the filter installed, ready to be seized.
#[derive(Debug)]
pub struct Child {
    /// Its pid.
    pub pid: Tid,
    /// Read end of the error pipe (the write end closes at exec).
    err_fd: i32,
}

impl Child {
    /// What the child reported before its exec failed, if anything.
    pub fn failure(&self) -> Option<(u8, i32)> {
        let mut b = [0u8; 5];
        // SAFETY: reading into a local buffer from our own pipe.
        let n = unsafe { libc::read(self.err_fd, b.as_mut_ptr().cast(), 5) };
        (n == 5).then(|| (b[0], i32::from_ne_bytes([b[1], b[2], b[3], b[4]])))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(self.err_fd) };
    }
}

extern "C" {
    static environ: *const *const libc::c_char;
}

/// A descriptor the program inherits at a fixed number, and the calls on it the seccomp
/// filter lets through untraced.
#[derive(Debug)]
pub struct Inherit {
    /// Our descriptor (close-on-exec here); closed in dejavu once the child is forked.
    pub fd: OwnedFd,
    /// The number the program sees it at (not close-on-exec there).
    pub at: i32,
    /// Syscall numbers allowed untraced when their first argument is `at`.
    pub untraced: Vec<u32>,
}

/// Forks the child. It installs `filter` (if any), stops itself with SIGSTOP, then execs
/// `program` with `argv` and the current environment, where `env` adds or replaces
/// variables (the language agents' loaders; empty otherwise, so the environment is passed
/// through untouched).
pub fn fork_child(
    program: &Path,
    argv: &[OsString],
    filter: Option<&[libc::sock_filter]>,
    env: &[(OsString, OsString)],
    inherit: Option<Inherit>,
) -> Result<Child, RecordError> {
    let pass = inherit.as_ref().map(|i| (i.fd.as_raw_fd(), i.at));
    // Built before fork: the child may only make raw syscalls.
    let envp_owned: Option<Vec<CString>> = (!env.is_empty()).then(|| {
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !env.iter().any(|(e, _)| e == k))
            .collect();
        vars.extend(env.iter().cloned());
        vars.into_iter()
            .filter_map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect()
    });
    let mut envp_ptrs: Vec<*const libc::c_char> =
        envp_owned.iter().flatten().map(|c| c.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    let prog_c = CString::new(program.as_os_str().as_bytes())
        .map_err(|_| RecordError::NotFound(program.display().to_string()))?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.clone().into_vec()))
        .collect::<Result<_, _>>()
        .map_err(|_| RecordError::NotExecutable {
            program: program.display().to_string(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                "an argument contains a NUL byte",
            ),
        })?;
    let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    arg_ptrs.push(std::ptr::null());
    let prog = filter.map(|f| libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut _,
    });

    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid out-array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(RecordError::os("pipe2", io::Error::last_os_error()));
    }
    let (rd, wr) = (fds[0], fds[1]);

    // The signals dejavu catches stay blocked from here until the child has reset them
    // (and in the parent until fork returned): see signals::block_for_fork.
    let mask = crate::signals::block_for_fork();
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: fork; the child branch below makes only async-signal-safe raw syscalls on
    // memory prepared before the fork, and always ends in execve or _exit.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        crate::signals::restore_mask(&mask);
    }
    if pid < 0 {
        let e = io::Error::last_os_error();
        unsafe {
            libc::close(rd);
            libc::close(wr);
        }
        return Err(RecordError::os("fork", e));
    }
    if pid == 0 {
        let envp = if envp_owned.is_some() {
            envp_ptrs.as_ptr()
        } else {
            std::ptr::null()
        };
        unsafe {
            child(
                wr,
                &prog_c,
                &arg_ptrs,
                envp,
                prog.as_ref(),
                pass,
                &mask,
                parent,
            )
        }
    }
    // SAFETY: closing our copy of the write end.
    unsafe { libc::close(wr) };
    // Only the program holds the agents' write end now: the reader sees the end of the
    // pipe when the last process holding it is gone.
    drop(inherit);
    Ok(Child { pid, err_fd: rd })
}

/// Standard descriptors (bit N for descriptor N, 0-2) that were closed when dejavu started.
/// The Rust runtime opens /dev/null on a closed 0, 1 or 2 before main; the program must
/// find them closed, as it would without dejavu (`prog >&-`).
static CLOSED_STD_FDS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Tells the spawner which of descriptors 0-2 were closed when the process started (read
/// before the Rust runtime's start-up, e.g. from an `.init_array` constructor): the
/// program is started with those closed again.
pub fn set_closed_std_fds(mask: u8) {
    CLOSED_STD_FDS.store(mask & 7, std::sync::atomic::Ordering::Relaxed);
}

/// The child between fork and exec (`parent`: dejavu's pid). Never returns.
#[allow(clippy::too_many_arguments)]
unsafe fn child(
    err: i32,
    prog: &CString,
    argv: &[*const libc::c_char],
    envp: *const *const libc::c_char,
    filter: Option<&libc::sock_fprog>,
    pass: Option<(i32, i32)>,
    mask: &libc::sigset_t,
    parent: libc::pid_t,
) -> ! {
    let fail = |stage: u8, errno: i32| -> ! {
        let mut b = [stage, 0, 0, 0, 0];
        b[1..].copy_from_slice(&errno.to_ne_bytes());
        // SAFETY: writing a local buffer to our pipe, then exiting without unwinding.
        unsafe {
            libc::write(err, b.as_ptr().cast(), 5);
            libc::_exit(if stage == STAGE_EXEC { 127 } else { 125 });
        }
    };
    let errno = || io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY (whole block): raw syscalls on prepared memory.
    unsafe {
        // The Rust runtime ignores SIGPIPE; programs expect the default (as
        // std::process::Command also restores).
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        // A SIGTERM forwarded before exec must reach the program's default action, not
        // dejavu's handler copied into this process: the caught signals were blocked
        // before the fork; reset, then unblocked (one that came meanwhile is delivered
        // now, with its default action), with the mask dejavu was started with.
        crate::signals::reset_in_child();
        crate::signals::restore_mask(mask);
        // Before the filter: dup2 is a traced call, and with the filter installed but no
        // tracer yet it would fail with ENOSYS. dup2 clears close-on-exec on the copy. A
        // failure only means no agent channel (the agents check the descriptor), never
        // a program that does not start.
        if let Some((from, at)) = pass {
            libc::dup2(from, at);
        }
        // Close again what was closed when dejavu started (before the filter, as dup2).
        let closed = CLOSED_STD_FDS.load(std::sync::atomic::Ordering::Relaxed);
        for fd in 0..3 {
            if closed & (1 << fd) != 0 {
                libc::close(fd);
            }
        }
        if let Some(f) = filter {
            let flags = libc::SECCOMP_FILTER_FLAG_SPEC_ALLOW;
            let mut r = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                f as *const _,
            );
            if r != 0 && errno() == libc::EINVAL {
                // Kernels before 4.17 lack SPEC_ALLOW.
                r = libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    f as *const _,
                );
            }
            if r != 0 && errno() == libc::EACCES {
                // Without CAP_SYS_ADMIN a filter requires no_new_privs (as strace does).
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                r = libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    f as *const _,
                );
            }
            if r != 0 {
                fail(STAGE_SECCOMP, errno());
            }
        }
        // Stopped until dejavu has its capture ready: if dejavu dies meanwhile (killed
        // with SIGKILL during its start), nothing would ever continue this process, and
        // it would stay stopped for good, holding the pipes it inherited. The kernel kills
        // it then (dejavu already gone before the prctl: getppid says so); once continued,
        // the program outlives dejavu as it would without it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(125);
        }
        libc::kill(libc::getpid(), libc::SIGSTOP);
        libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
        let envp = if envp.is_null() { environ } else { envp };
        libc::execve(prog.as_ptr(), argv.as_ptr(), envp);
        fail(STAGE_EXEC, errno())
    }
}

/// Waits for the child to stop itself. Returns Err with the child's own failure when it
/// exited instead.
pub fn wait_stopped(child: &Child, program: &Path) -> Result<(), RecordError> {
    loop {
        match os::wait_one(child.pid, libc::WUNTRACED | libc::__WALL) {
            Ok((_, st)) if libc::WIFSTOPPED(st) => return Ok(()),
            Ok(_) => {
                return Err(match child.failure() {
                    Some((STAGE_SECCOMP, e)) => RecordError::Denied {
                        what: format!("installing the seccomp filter: {}", io::Error::from_raw_os_error(e)),
                        advice: "the kernel needs CONFIG_SECCOMP_FILTER; in a container, allow the seccomp syscall"
                            .into(),
                    },
                    Some((_, e)) => exec_error(program, e),
                    None => RecordError::os("starting the program", io::Error::other("the child exited before exec")),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(RecordError::os("waitpid", e)),
        }
    }
}

/// The error for a failed exec in the child.
pub fn exec_error(program: &Path, errno: i32) -> RecordError {
    let e = io::Error::from_raw_os_error(errno);
    if errno == libc::ENOENT {
        RecordError::NotFound(program.display().to_string())
    } else {
        RecordError::NotExecutable {
            program: program.display().to_string(),
            source: e,
        }
    }
}

/// Only used to check ELF class at exec: is `/proc/PID/exe` a 32-bit program?
pub fn is_32bit(pid: Tid) -> bool {
    let mut b = [0u8; 5];
    let Ok(mut f) = std::fs::File::open(format!("/proc/{pid}/exe")) else {
        return false;
    };
    use std::io::Read;
    f.read_exact(&mut b).is_ok() && &b[..4] == b"\x7fELF" && b[4] == 1
}
