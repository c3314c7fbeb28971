//! x86_64: syscall numbers of the traced set and `struct stat` layout.

use dejavu_trace::{FileStat, Sys};

/// AUDIT_ARCH_X86_64: what seccomp's `seccomp_data.arch` holds for native calls.
pub const AUDIT_ARCH: u32 = 0xc000_003e;
/// Name used in trace metadata.
pub const NAME: &str = "x86_64";
/// Size of `struct stat`.
pub const STAT_SIZE: usize = 144;
/// Calls in the model that this architecture does not have.
pub const LEGACY_ABSENT: &[Sys] = &[];

macro_rules! t {
    ($($nr:ident => $s:ident),* $(,)?) => { &[ $( (libc::$nr as u32, Sys::$s), )* ] };
}

/// Syscall number -> call, for the traced set.
pub const TABLE: &[(u32, Sys)] = t![
    SYS_open => Open, SYS_openat => Openat, SYS_openat2 => Openat2, SYS_creat => Creat,
    SYS_close => Close, SYS_close_range => CloseRange,
    SYS_read => Read, SYS_pread64 => Pread64, SYS_readv => Readv, SYS_preadv => Preadv,
    SYS_preadv2 => Preadv2,
    SYS_write => Write, SYS_pwrite64 => Pwrite64, SYS_writev => Writev, SYS_pwritev => Pwritev,
    SYS_pwritev2 => Pwritev2,
    SYS_lseek => Lseek,
    SYS_stat => Stat, SYS_lstat => Lstat, SYS_fstat => Fstat, SYS_newfstatat => Newfstatat,
    SYS_statx => Statx,
    SYS_access => Access, SYS_faccessat => Faccessat, SYS_faccessat2 => Faccessat2,
    SYS_readlink => Readlink, SYS_readlinkat => Readlinkat, SYS_getdents64 => Getdents64,
    SYS_mkdir => Mkdir, SYS_mkdirat => Mkdirat, SYS_rmdir => Rmdir,
    SYS_unlink => Unlink, SYS_unlinkat => Unlinkat,
    SYS_rename => Rename, SYS_renameat => Renameat, SYS_renameat2 => Renameat2,
    SYS_link => Link, SYS_linkat => Linkat, SYS_symlink => Symlink, SYS_symlinkat => Symlinkat,
    SYS_chmod => Chmod, SYS_fchmod => Fchmod, SYS_fchmodat => Fchmodat, SYS_fchmodat2 => Fchmodat2,
    SYS_chown => Chown, SYS_fchown => Fchown, SYS_lchown => Lchown, SYS_fchownat => Fchownat,
    SYS_truncate => Truncate, SYS_ftruncate => Ftruncate,
    SYS_fsync => Fsync, SYS_fdatasync => Fdatasync, SYS_sync_file_range => SyncFileRange,
    SYS_dup => Dup, SYS_dup2 => Dup2, SYS_dup3 => Dup3, SYS_fcntl => Fcntl,
    SYS_pipe => Pipe, SYS_pipe2 => Pipe2,
    SYS_socket => Socket, SYS_accept => Accept, SYS_accept4 => Accept4, SYS_connect => Connect,
    SYS_sendfile => Sendfile, SYS_copy_file_range => CopyFileRange, SYS_splice => Splice,
    SYS_utimensat => Utimensat, SYS_chdir => Chdir, SYS_fchdir => Fchdir,
    SYS_execve => Execve, SYS_execveat => Execveat, SYS_memfd_create => MemfdCreate,
    SYS_io_uring_setup => IoUringSetup, SYS_io_uring_enter => IoUringEnter,
    // File-backed mappings only: the seccomp filter, the eBPF hooks and `traced_call`
    // leave anonymous ones out (see `MAPPING_ARGS`).
    SYS_mmap => Mmap,
];

/// Decodes the kernel's x86_64 `struct stat`.
pub fn parse_stat(b: &[u8]) -> Option<FileStat> {
    use super::{le_u32, le_u64};
    if b.len() < STAT_SIZE {
        return None;
    }
    let ts = |at: usize| {
        (le_u64(b, at) as i64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(le_u64(b, at + 8) as i64)
    };
    Some(FileStat {
        known: dejavu_trace::stat_known::ALL,
        dev: le_u64(b, 0),
        ino: le_u64(b, 8),
        nlink: le_u64(b, 16),
        mode: le_u32(b, 24),
        uid: le_u32(b, 28),
        gid: le_u32(b, 32),
        rdev: le_u64(b, 40),
        size: le_u64(b, 48) as i64,
        mtime_ns: ts(88),
        ctime_ns: ts(104),
    })
}

/// Numbers of clone3, fork and vfork (the flags are not in the first argument).
pub const NR_CLONE3: u64 = libc::SYS_clone3 as u64;
/// fork(2)
pub const NR_FORK: u64 = libc::SYS_fork as u64;
/// vfork(2)
pub const NR_VFORK: u64 = libc::SYS_vfork as u64;

/// On x86_64 a syscall leaves its argument registers untouched, so a syscall-exit stop
/// still shows the number (orig_rax) and all six arguments: the tracer can decode the
/// whole call at its exit stop and skip PTRACE_GET_SYSCALL_INFO at the entry stop.
pub const ARGS_AT_EXIT: bool = true;

/// sched_getaffinity(2): intercepted while a thread is pinned (see `pin.rs`).
pub const NR_SCHED_GETAFFINITY: u64 = libc::SYS_sched_getaffinity as u64;
/// sched_setaffinity(2): a thread that sets its own affinity is left alone.
pub const NR_SCHED_SETAFFINITY: u64 = libc::SYS_sched_setaffinity as u64;
/// munmap(2): traced with native stacks on, never recorded as a call: an Unmap record
/// when the range held code the trace has a Mapping for (codemaps.rs).
pub const NR_MUNMAP: u64 = libc::SYS_munmap as u64;
