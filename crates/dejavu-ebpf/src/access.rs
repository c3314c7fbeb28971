//! Who may be recorded. The eBPF backend's capabilities (CAP_BPF and CAP_PERFMON, or
//! root) let dejavu load tracing programs that could watch any process; dejavu records
//! only processes its user could ptrace, as the ptrace backend does by construction
//! (docs/ebpf-backend.md, "Who may be recorded"): for `-p`, and for a process that
//! executes a set-user-ID, set-group-ID or file-capability program while being recorded.

use std::io;

/// The kernel's own answer to "may this process ptrace `pid`" (ptrace_may_access with
/// PTRACE_MODE_ATTACH_REALCREDS: same user and dumpable, no capabilities beyond ours, the
/// LSMs' say, or CAP_SYS_PTRACE): process_vm_readv checks exactly that before it reads,
/// so a one-byte read at address 0 fails with EFAULT when it is allowed and EPERM when
/// not. `Err` when there is no such process.
pub fn may_ptrace(pid: i32) -> io::Result<bool> {
    let mut byte = [0u8; 1];
    let local = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 1,
    };
    // SAFETY: one valid local buffer of one byte; the remote address is only read by the
    // kernel, which fails rather than fault.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if r >= 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EFAULT) => Ok(true),
        Some(libc::EPERM) | Some(libc::EACCES) => Ok(false),
        _ => Err(e),
    }
}

/// Whether this process has CAP_SYS_PTRACE in effect (root normally has): then every
/// process may be recorded and nothing here applies.
pub fn can_ptrace_anything() -> bool {
    const CAP_SYS_PTRACE: u64 = 1 << 19;
    crate::effective_caps() & CAP_SYS_PTRACE != 0
}

/// Whether executing `path` gives the process privileges its user lacks: a set-user-ID
/// file owned by another user, a set-group-ID file of a group we are not in, or file
/// capabilities. For a process already gone when dejavu looks (else [`may_ptrace`] asks
/// the kernel); a file that cannot be examined counts as privileged.
pub fn privileged_file(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return true;
    };
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if m.mode() & libc::S_ISUID != 0 && m.uid() != uid {
        return true;
    }
    if m.mode() & libc::S_ISGID != 0 && m.gid() != gid && !in_group(m.gid()) {
        return true;
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return true;
    };
    // SAFETY: a valid C string and attribute name; size 0 asks for the length only.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"security.capability".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    n >= 0
}

fn in_group(gid: u32) -> bool {
    let mut groups = vec![0 as libc::gid_t; 256];
    // SAFETY: a buffer of 256 gids.
    let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
    n > 0 && groups[..n as usize].contains(&gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_may_be_recorded_and_a_missing_one_is_an_error() {
        assert!(may_ptrace(std::process::id() as i32).unwrap());
        assert!(may_ptrace(i32::MAX).is_err());
    }

    #[test]
    fn plain_files_are_not_privileged_and_missing_ones_are() {
        assert!(!privileged_file(std::path::Path::new("/bin/sh")));
        assert!(privileged_file(std::path::Path::new("/no/such/file")));
    }
}
