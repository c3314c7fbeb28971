//! Per-architecture facts: syscall numbers of the traced set, the seccomp audit arch, and
//! the layout of `struct stat`. Everything else in the backend is architecture-neutral.

use dejavu_trace::{FileStat, Sys};

#[cfg(target_arch = "aarch64")]
mod aarch64;
#[cfg(target_arch = "x86_64")]
mod x86_64;

#[cfg(target_arch = "aarch64")]
pub use aarch64::*;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("dejavu's ptrace backend supports x86_64 and aarch64; add a table in src/arch/");

/// What a syscall stop's registers say.
#[derive(Clone, Copy, Debug, Default)]
pub struct SyscallRegs {
    /// Syscall number.
    pub nr: u64,
    /// Its six arguments (valid at the exit stop on architectures with `ARGS_AT_EXIT`).
    pub args: [u64; 6],
    /// The return-value register.
    pub ret: i64,
    /// Instruction pointer (just after the syscall instruction).
    pub ip: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (rbp / x29).
    pub fp: u64,
}

/// The traced set as (syscall number, call) pairs for this architecture.
pub fn table() -> &'static [(u32, Sys)] {
    TABLE
}

/// The call for a syscall number, if it is in the traced set. A flat lookup array built
/// once: this runs at every stop.
pub fn sys_of(nr: u64) -> Option<Sys> {
    use std::sync::OnceLock;
    static MAP: OnceLock<Vec<Option<Sys>>> = OnceLock::new();
    let map = MAP.get_or_init(|| {
        let max = TABLE.iter().map(|&(n, _)| n).max().unwrap_or(0) as usize;
        let mut v = vec![None; max + 1];
        for &(n, s) in TABLE {
            v[n as usize] = Some(s);
        }
        v
    });
    map.get(usize::try_from(nr).ok()?).copied().flatten()
}

/// mmap's flags and descriptor arguments (the same on every architecture the backend
/// supports), and MAP_ANONYMOUS.
pub const MMAP_FLAGS_ARG: usize = 3;
/// See [`MMAP_FLAGS_ARG`].
pub const MMAP_FD_ARG: usize = 4;
/// See [`MMAP_FLAGS_ARG`].
pub const MAP_ANONYMOUS: u32 = libc::MAP_ANONYMOUS as u32;

/// Whether a call of the traced set is recorded, from its arguments: all are but an mmap
/// that maps no file (`MAP_ANONYMOUS`, or a negative descriptor). The seccomp filter and
/// the eBPF hooks already leave those out in the kernel; this is the same rule for the
/// paths that see every call (attach mode, a call whose entry the eBPF side missed).
pub fn traced_call(sys: Sys, args: &[u64; 6]) -> bool {
    sys != Sys::Mmap
        || (args[MMAP_FLAGS_ARG] as u32 & MAP_ANONYMOUS == 0
            && args[MMAP_FD_ARG] as u32 as i32 >= 0)
}

/// Calls of the traced set that the seccomp filter lets through untraced on their
/// arguments: (syscall number, [(argument, bits)]): the call runs untraced when the low 32
/// bits of any listed argument have any of the bits set. mmap: `MAP_ANONYMOUS` in its
/// flags, or the sign bit of its descriptor (`traced_call`'s rule, in the kernel).
pub fn seccomp_arg_checks() -> Vec<(u32, Vec<(usize, u32)>)> {
    vec![(
        libc::SYS_mmap as u32,
        vec![(MMAP_FLAGS_ARG, MAP_ANONYMOUS), (MMAP_FD_ARG, 0x8000_0000)],
    )]
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Bytes of a `struct statx` that are read and decoded: its first 144, up to and with
/// `stx_dev_minor` (the fields after it, `stx_mnt_id` and later additions, are not used).
/// The whole struct is 256 bytes; copying 144 of them keeps the eBPF backend's `statx`
/// records 112 bytes shorter (docs/ebpf-backend.md). Keep in step with the kernel half's
/// copy plan for `statx` (bpf/dejavu.bpf.c, `STATX_USED`).
pub const STATX_SIZE: usize = 144;

/// Decodes a `struct statx` (the same on every architecture).
pub fn parse_statx(b: &[u8]) -> Option<FileStat> {
    use dejavu_trace::stat_known as k;
    if b.len() < STATX_SIZE {
        return None;
    }
    let mask = le_u32(b, 0);
    let ts = |at: usize| {
        (le_u64(b, at) as i64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(le_u32(b, at + 8) as i64)
    };
    let mut st = FileStat {
        known: k::IDENTITY | k::RDEV,
        ..FileStat::default()
    };
    st.dev = FileStat::makedev(le_u32(b, 136), le_u32(b, 140));
    st.rdev = FileStat::makedev(le_u32(b, 128), le_u32(b, 132));
    st.ino = le_u64(b, 32);
    if mask & (libc::STATX_TYPE | libc::STATX_MODE) != 0 {
        st.known |= k::MODE;
        st.mode = le_u16(b, 28) as u32;
    }
    if mask & libc::STATX_SIZE != 0 {
        st.known |= k::SIZE;
        st.size = le_u64(b, 40) as i64;
    }
    if mask & libc::STATX_MTIME != 0 {
        st.known |= k::MTIME;
        st.mtime_ns = ts(112);
    }
    if mask & libc::STATX_CTIME != 0 {
        st.known |= k::CTIME;
        st.ctime_ns = ts(96);
    }
    if mask & (libc::STATX_NLINK | libc::STATX_UID | libc::STATX_GID)
        == (libc::STATX_NLINK | libc::STATX_UID | libc::STATX_GID)
    {
        st.known |= k::OWNER;
        st.nlink = le_u32(b, 16) as u64;
        st.uid = le_u32(b, 20);
        st.gid = le_u32(b, 24);
    }
    if mask & libc::STATX_INO == 0 {
        st.known &= !k::IDENTITY;
    }
    Some(st)
}

/// Converts the tracer's own `libc::stat` (from stat(2) on /proc/PID/fd/N).
pub fn from_libc_stat(s: &libc::stat) -> FileStat {
    FileStat {
        known: dejavu_trace::stat_known::ALL,
        dev: s.st_dev,
        ino: s.st_ino,
        mode: s.st_mode,
        #[allow(clippy::useless_conversion)] // u32 on aarch64
        nlink: s.st_nlink.into(),
        uid: s.st_uid,
        gid: s.st_gid,
        rdev: s.st_rdev,
        size: s.st_size,
        mtime_ns: s
            .st_mtime
            .wrapping_mul(1_000_000_000)
            .wrapping_add(s.st_mtime_nsec),
        ctime_ns: s
            .st_ctime
            .wrapping_mul(1_000_000_000)
            .wrapping_add(s.st_ctime_nsec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statx_buffers_first_bytes_decode_as_stat_does() {
        // The kernel fills 256 bytes; only the first STATX_SIZE are copied and decoded
        // (the eBPF backend's records carry no more): they must give what stat(2) gives.
        let path = std::ffi::CString::new("/proc/self/exe").unwrap();
        let mut buf = [0xa5u8; 256];
        // SAFETY: statx writes at most sizeof(struct statx) = 256 bytes into `buf`.
        let r = unsafe {
            libc::statx(
                libc::AT_FDCWD,
                path.as_ptr(),
                0,
                libc::STATX_BASIC_STATS,
                buf.as_mut_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "statx: {}", std::io::Error::last_os_error());
        let got = parse_statx(&buf[..STATX_SIZE]).expect("decoded");
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: stat writes one `struct stat` into `st`.
        assert_eq!(unsafe { libc::stat(path.as_ptr(), &mut st) }, 0);
        let want = from_libc_stat(&st);
        assert_eq!(
            (got.dev, got.ino, got.mode, got.nlink, got.uid, got.gid, got.size),
            (want.dev, want.ino, want.mode, want.nlink, want.uid, want.gid, want.size)
        );
        assert_eq!((got.mtime_ns, got.ctime_ns), (want.mtime_ns, want.ctime_ns));
        assert!(
            parse_statx(&buf[..STATX_SIZE - 1]).is_none(),
            "a short copy is not decoded"
        );
    }

    #[test]
    fn table_has_every_call_once() {
        let mut seen = std::collections::HashSet::new();
        for &(n, s) in table() {
            assert!(seen.insert(s), "{s} twice");
            assert_eq!(sys_of(n as u64), Some(s));
        }
        // Every call in the model exists on this architecture, or is a legacy call the
        // architecture never had.
        for s in Sys::ALL {
            assert!(
                seen.contains(s) || LEGACY_ABSENT.contains(s),
                "{s} has no number"
            );
        }
        assert_eq!(sys_of(u64::MAX), None);
    }

    #[test]
    fn stat_layout_matches_the_kernel() {
        // stat(2) a known file through libc and through our layout decoder.
        let path = std::ffi::CString::new("/").unwrap();
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::stat(path.as_ptr(), &mut st) }, 0);
        let bytes = unsafe {
            std::slice::from_raw_parts(
                &st as *const libc::stat as *const u8,
                std::mem::size_of::<libc::stat>(),
            )
        };
        assert_eq!(STAT_SIZE, bytes.len());
        assert_eq!(parse_stat(bytes), Some(from_libc_stat(&st)));
    }
}
