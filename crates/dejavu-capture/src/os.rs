//! Every raw kernel call the backend makes goes through here: ptrace requests, waitpid,
//! reads of tracee memory, and the few /proc look-ups. One choke point keeps the unsafe
//! code small and reviewable, and makes every failure an `io::Error`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

/// A process or thread id.
pub type Tid = i32;

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

/// waitpid(-1, __WALL): the next stop or exit of any tracee.
pub fn wait_any() -> io::Result<(Tid, i32)> {
    let mut status = 0;
    // SAFETY: status is a valid out-pointer.
    let r = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((r, status))
    }
}

/// waitpid(pid, flags) for one task.
pub fn wait_one(tid: Tid, flags: i32) -> io::Result<(Tid, i32)> {
    let mut status = 0;
    // SAFETY: status is a valid out-pointer.
    let r = unsafe { libc::waitpid(tid, &mut status, flags) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((r, status))
    }
}

/// kill(2).
pub fn kill(pid: Tid, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::kill(pid, sig) } as libc::c_long).map(drop)
}

/// tgkill(2): a signal for one thread.
pub fn tgkill(pid: Tid, tid: Tid, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, sig) }).map(drop)
}

/// Reads tracee memory at `addr` into `buf` with process_vm_readv (one syscall, no word
/// peeks). Returns how many bytes were read; a short read means unmapped memory.
pub fn read_mem(pid: Tid, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: local iovec covers `buf`, which we own mutably; remote is only read by the
    // kernel from the other process.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Reads several remote ranges into one local buffer, in order (writev's buffers).
pub fn read_mem_gather(pid: Tid, ranges: &[(u64, usize)], buf: &mut Vec<u8>) -> io::Result<usize> {
    let total: usize = ranges.iter().map(|r| r.1).sum();
    buf.clear();
    buf.resize(total, 0);
    if total == 0 {
        return Ok(0);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: total,
    };
    let remote: Vec<libc::iovec> = ranges
        .iter()
        .filter(|r| r.1 > 0)
        .map(|&(a, l)| libc::iovec {
            iov_base: a as usize as *mut libc::c_void,
            iov_len: l,
        })
        .collect();
    // SAFETY: as read_mem; IOV_MAX is respected by the caller (at most 1024 ranges).
    let r =
        unsafe { libc::process_vm_readv(pid, &local, 1, remote.as_ptr(), remote.len() as u64, 0) };
    if r < 0 {
        buf.clear();
        Err(io::Error::last_os_error())
    } else {
        buf.truncate(r as usize);
        Ok(r as usize)
    }
}

/// Reads a NUL-terminated string of at most `max` bytes from tracee memory, page by page
/// so a string that ends just before an unmapped page is still read.
pub fn read_cstr(pid: Tid, addr: u64, max: usize, out: &mut Vec<u8>) -> io::Result<bool> {
    out.clear();
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut a = addr;
    let mut chunk = [0u8; 4096];
    while out.len() < max {
        let to_page_end = 4096 - (a as usize & 4095);
        let want = to_page_end.min(max - out.len()).min(chunk.len());
        let n = read_mem(pid, a, &mut chunk[..want])?;
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        if let Some(z) = memchr0(&chunk[..n]) {
            out.extend_from_slice(&chunk[..z]);
            return Ok(true);
        }
        out.extend_from_slice(&chunk[..n]);
        a += n as u64;
    }
    Ok(false)
}

fn memchr0(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == 0)
}

/// stat(2) of a path in the tracer (used on /proc/PID/fd/N, which follows to the file).
pub fn stat_path(path: &[u8]) -> io::Result<libc::stat> {
    let c = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: zeroed POD out-parameter, valid C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::stat(c.as_ptr(), &mut st) } as libc::c_long)?;
    Ok(st)
}

/// readlink(2) in the tracer (/proc/PID/fd/N, /proc/PID/cwd).
pub fn readlink(path: &[u8]) -> io::Result<Vec<u8>> {
    let p = std::ffi::OsStr::from_bytes(path);
    std::fs::read_link(p).map(|p| p.into_os_string().into_vec())
}

use std::os::unix::ffi::OsStringExt;

/// The current CLOCK_MONOTONIC time in ns (vDSO, no syscall).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes `data` into tracee memory at `addr` with process_vm_writev.
pub fn write_mem(pid: Tid, addr: u64, data: &[u8]) -> io::Result<usize> {
    if data.is_empty() {
        return Ok(0);
    }
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: local iovec covers `data`, which the kernel only reads; the remote range is
    // the tracee's (a buffer it passed to the kernel for exactly this purpose).
    let r = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}
