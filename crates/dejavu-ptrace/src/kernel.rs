//! ptrace requests: the one choke point for them (everything else the backends ask the
//! kernel goes through dejavu-capture's `os`). Every failure is an `io::Error`.

use dejavu_capture::os::Tid;
use std::io;

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn ptrace(req: libc::c_uint, tid: Tid, addr: usize, data: usize) -> io::Result<libc::c_long> {
    // SAFETY: ptrace with integer arguments; pointer arguments are only passed by the
    // helpers below, which own the memory they point to.
    check(unsafe {
        libc::ptrace(
            req,
            tid,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    })
}

/// PTRACE_SEIZE with options.
pub fn seize(tid: Tid, options: libc::c_int) -> io::Result<()> {
    ptrace(libc::PTRACE_SEIZE, tid, 0, options as usize).map(drop)
}

/// PTRACE_CONT, delivering `sig` (0 for none).
pub fn cont(tid: Tid, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_CONT, tid, 0, sig as usize).map(drop)
}

/// PTRACE_SYSCALL: continue and stop at the next syscall entry or exit.
pub fn syscall(tid: Tid, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_SYSCALL, tid, 0, sig as usize).map(drop)
}

/// PTRACE_LISTEN: leave a group-stopped tracee stopped, but report SIGCONT.
pub fn listen(tid: Tid) -> io::Result<()> {
    ptrace(libc::PTRACE_LISTEN, tid, 0, 0).map(drop)
}

/// PTRACE_INTERRUPT: make a running tracee stop.
pub fn interrupt(tid: Tid) -> io::Result<()> {
    ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0).map(drop)
}

/// PTRACE_DETACH, delivering `sig`.
pub fn detach(tid: Tid, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_DETACH, tid, 0, sig as usize).map(drop)
}

/// PTRACE_GETEVENTMSG.
pub fn event_msg(tid: Tid) -> io::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    ptrace(
        libc::PTRACE_GETEVENTMSG,
        tid,
        0,
        &mut msg as *mut libc::c_ulong as usize,
    )?;
    Ok(msg as u64)
}

/// What PTRACE_GET_SYSCALL_INFO says about the current stop.
#[derive(Debug, Clone, Copy)]
pub enum SyscallInfo {
    /// Syscall-enter-stop or seccomp stop: number and arguments.
    Entry {
        /// AUDIT_ARCH_* of the call.
        arch: u32,
        /// Syscall number.
        nr: u64,
        /// Arguments.
        args: [u64; 6],
    },
    /// Syscall-exit-stop: the result.
    Exit {
        /// Return value (negated errno when `is_error`).
        rval: i64,
        /// The kernel says the value is an error.
        is_error: bool,
    },
    /// Not a syscall stop.
    None,
}

/// PTRACE_GET_SYSCALL_INFO (Linux 5.3+).
pub fn syscall_info(tid: Tid) -> io::Result<SyscallInfo> {
    // SAFETY: zeroed POD struct; the kernel writes at most size_of bytes into it.
    let mut info: libc::ptrace_syscall_info = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::ptrace_syscall_info>();
    ptrace(
        libc::PTRACE_GET_SYSCALL_INFO,
        tid,
        size,
        &mut info as *mut _ as usize,
    )?;
    // SAFETY: the union member read matches the `op` the kernel set.
    Ok(unsafe {
        match info.op {
            libc::PTRACE_SYSCALL_INFO_ENTRY => SyscallInfo::Entry {
                arch: info.arch,
                nr: info.u.entry.nr,
                args: info.u.entry.args,
            },
            libc::PTRACE_SYSCALL_INFO_SECCOMP => SyscallInfo::Entry {
                arch: info.arch,
                nr: info.u.seccomp.nr,
                args: info.u.seccomp.args,
            },
            libc::PTRACE_SYSCALL_INFO_EXIT => SyscallInfo::Exit {
                rval: info.u.exit.sval,
                is_error: info.u.exit.is_error != 0,
            },
            _ => SyscallInfo::None,
        }
    })
}
