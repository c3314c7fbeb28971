//! Registers of a task at a syscall stop, read with ptrace (the register layout each
//! architecture's `SyscallRegs` comes from; the eBPF backend gets the same fields from
//! the kernel half).

use dejavu_capture::arch::SyscallRegs;

#[cfg(target_arch = "x86_64")]
/// Registers of a stopped task at a syscall stop.
pub fn syscall_regs(tid: i32) -> std::io::Result<SyscallRegs> {
    // SAFETY: zeroed POD; PTRACE_GETREGS writes exactly one user_regs_struct.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            &mut r as *mut _ as *mut libc::c_void,
        )
    };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(SyscallRegs {
        nr: r.orig_rax,
        args: [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9],
        ret: r.rax as i64,
        ip: r.rip,
        sp: r.rsp,
        fp: r.rbp,
    })
}

#[cfg(target_arch = "aarch64")]
/// Registers of a stopped task at a syscall stop (`ret` is x0).
pub fn syscall_regs(tid: i32) -> std::io::Result<SyscallRegs> {
    // SAFETY: zeroed POD; PTRACE_GETREGSET writes at most iov_len bytes.
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: &mut r as *mut _ as *mut libc::c_void,
        iov_len: std::mem::size_of::<libc::user_regs_struct>(),
    };
    let rc = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid,
            libc::NT_PRSTATUS as usize as *mut libc::c_void,
            &mut iov as *mut _ as *mut libc::c_void,
        )
    };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(SyscallRegs {
        nr: r.regs[8],
        args: [
            r.regs[0], r.regs[1], r.regs[2], r.regs[3], r.regs[4], r.regs[5],
        ],
        ret: r.regs[0] as i64,
        ip: r.pc,
        sp: r.sp,
        fp: r.regs[29],
    })
}
