//! The raw kernel calls both capture backends make (everything but ptrace requests, which
//! stay in dejavu-ptrace's kernel.rs): waitpid, signals, reads and writes of the traced
//! program's memory, the clock, and the few /proc look-ups. One choke point keeps the
//! unsafe code small and reviewable, and makes every failure an `io::Error`.

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
