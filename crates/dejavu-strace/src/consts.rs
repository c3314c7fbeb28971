//! Name-to-number tables for the symbols strace prints: errno names, signals, and the flag
//! sets of the calls dejavu decodes (open flags, AT_*, clone flags, ...).
//!
//! The numbers are the Linux x86_64 ones, written out rather than taken from `libc` so that
//! an import gives the same trace whatever machine it runs on. Tables are small; a linear
//! scan is as fast as hashing for them. errno names use a hash map because every failed
//! call looks one up.

use rustc_hash::FxHashMap;
use std::sync::OnceLock;

/// A table of symbolic names and their values.
pub type Table = &'static [(&'static str, u64)];

/// Looks `name` up in `table`.
pub fn lookup(table: Table, name: &[u8]) -> Option<u64> {
    table
        .iter()
        .find(|(n, _)| n.as_bytes() == name)
        .map(|&(_, v)| v)
}

/// Linux errno names, including the kernel-internal ERESTART* family strace shows.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("ESRCH", 3),
    ("EINTR", 4),
    ("EIO", 5),
    ("ENXIO", 6),
    ("E2BIG", 7),
    ("ENOEXEC", 8),
    ("EBADF", 9),
    ("ECHILD", 10),
    ("EAGAIN", 11),
    ("EWOULDBLOCK", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("ENOTBLK", 15),
    ("EBUSY", 16),
    ("EEXIST", 17),
    ("EXDEV", 18),
    ("ENODEV", 19),
    ("ENOTDIR", 20),
    ("EISDIR", 21),
    ("EINVAL", 22),
    ("ENFILE", 23),
    ("EMFILE", 24),
    ("ENOTTY", 25),
    ("ETXTBSY", 26),
    ("EFBIG", 27),
    ("ENOSPC", 28),
    ("ESPIPE", 29),
    ("EROFS", 30),
    ("EMLINK", 31),
    ("EPIPE", 32),
    ("EDOM", 33),
    ("ERANGE", 34),
    ("EDEADLK", 35),
    ("EDEADLOCK", 35),
    ("ENAMETOOLONG", 36),
    ("ENOLCK", 37),
    ("ENOSYS", 38),
    ("ENOTEMPTY", 39),
    ("ELOOP", 40),
    ("ENOMSG", 42),
    ("EIDRM", 43),
    ("ECHRNG", 44),
    ("EL2NSYNC", 45),
    ("EL3HLT", 46),
    ("EL3RST", 47),
    ("ELNRNG", 48),
    ("EUNATCH", 49),
    ("ENOCSI", 50),
    ("EL2HLT", 51),
    ("EBADE", 52),
    ("EBADR", 53),
    ("EXFULL", 54),
    ("ENOANO", 55),
    ("EBADRQC", 56),
    ("EBADSLT", 57),
    ("EBFONT", 59),
    ("ENOSTR", 60),
    ("ENODATA", 61),
    ("ETIME", 62),
    ("ENOSR", 63),
    ("ENONET", 64),
    ("ENOPKG", 65),
    ("EREMOTE", 66),
    ("ENOLINK", 67),
    ("EADV", 68),
    ("ESRMNT", 69),
    ("ECOMM", 70),
    ("EPROTO", 71),
    ("EMULTIHOP", 72),
    ("EDOTDOT", 73),
    ("EBADMSG", 74),
    ("EOVERFLOW", 75),
    ("ENOTUNIQ", 76),
    ("EBADFD", 77),
    ("EREMCHG", 78),
    ("ELIBACC", 79),
    ("ELIBBAD", 80),
    ("ELIBSCN", 81),
    ("ELIBMAX", 82),
    ("ELIBEXEC", 83),
    ("EILSEQ", 84),
    ("ERESTART", 85),
    ("ESTRPIPE", 86),
    ("EUSERS", 87),
    ("ENOTSOCK", 88),
    ("EDESTADDRREQ", 89),
    ("EMSGSIZE", 90),
    ("EPROTOTYPE", 91),
    ("ENOPROTOOPT", 92),
    ("EPROTONOSUPPORT", 93),
    ("ESOCKTNOSUPPORT", 94),
    ("EOPNOTSUPP", 95),
    ("ENOTSUP", 95),
    ("EPFNOSUPPORT", 96),
    ("EAFNOSUPPORT", 97),
    ("EADDRINUSE", 98),
    ("EADDRNOTAVAIL", 99),
    ("ENETDOWN", 100),
    ("ENETUNREACH", 101),
    ("ENETRESET", 102),
    ("ECONNABORTED", 103),
    ("ECONNRESET", 104),
    ("ENOBUFS", 105),
    ("EISCONN", 106),
    ("ENOTCONN", 107),
    ("ESHUTDOWN", 108),
    ("ETOOMANYREFS", 109),
    ("ETIMEDOUT", 110),
    ("ECONNREFUSED", 111),
    ("EHOSTDOWN", 112),
    ("EHOSTUNREACH", 113),
    ("EALREADY", 114),
    ("EINPROGRESS", 115),
    ("ESTALE", 116),
    ("EUCLEAN", 117),
    ("ENOTNAM", 118),
    ("ENAVAIL", 119),
    ("EISNAM", 120),
    ("EREMOTEIO", 121),
    ("EDQUOT", 122),
    ("ENOMEDIUM", 123),
    ("EMEDIUMTYPE", 124),
    ("ECANCELED", 125),
    ("ENOKEY", 126),
    ("EKEYEXPIRED", 127),
    ("EKEYREVOKED", 128),
    ("EKEYREJECTED", 129),
    ("EOWNERDEAD", 130),
    ("ENOTRECOVERABLE", 131),
    ("ERFKILL", 132),
    ("EHWPOISON", 133),
    ("ERESTARTSYS", 512),
    ("ERESTARTNOINTR", 513),
    ("ERESTARTNOHAND", 514),
    ("ENOIOCTLCMD", 515),
    ("ERESTART_RESTARTBLOCK", 516),
    ("EPROBE_DEFER", 517),
    ("EOPENSTALE", 518),
    ("ENOPARAM", 519),
    ("EBADHANDLE", 521),
    ("ENOTSYNC", 522),
    ("EBADCOOKIE", 523),
    ("ENOTSUPP", 524),
    ("ETOOSMALL", 525),
    ("ESERVERFAULT", 526),
    ("EBADTYPE", 527),
    ("EJUKEBOX", 528),
    ("EIOCBQUEUED", 529),
    ("ERECALLCONFLICT", 530),
];

/// The errno number of a name strace printed (`ENOENT` -> 2).
pub fn errno_from_name(name: &[u8]) -> Option<i32> {
    static MAP: OnceLock<FxHashMap<&'static [u8], i32>> = OnceLock::new();
    MAP.get_or_init(|| ERRNOS.iter().map(|&(n, v)| (n.as_bytes(), v)).collect())
        .get(name)
        .copied()
}

/// Is `errno` one of the ERESTART* codes (the call will be restarted by the kernel)?
pub fn is_restart_errno(errno: i32) -> bool {
    matches!(errno, 512..=514 | 516)
}

/// Signal names (x86_64).
const SIGNALS: &[(&str, i32)] = &[
    ("SIGHUP", 1),
    ("SIGINT", 2),
    ("SIGQUIT", 3),
    ("SIGILL", 4),
    ("SIGTRAP", 5),
    ("SIGABRT", 6),
    ("SIGIOT", 6),
    ("SIGBUS", 7),
    ("SIGFPE", 8),
    ("SIGKILL", 9),
    ("SIGUSR1", 10),
    ("SIGSEGV", 11),
    ("SIGUSR2", 12),
    ("SIGPIPE", 13),
    ("SIGALRM", 14),
    ("SIGTERM", 15),
    ("SIGSTKFLT", 16),
    ("SIGCHLD", 17),
    ("SIGCONT", 18),
    ("SIGSTOP", 19),
    ("SIGTSTP", 20),
    ("SIGTTIN", 21),
    ("SIGTTOU", 22),
    ("SIGURG", 23),
    ("SIGXCPU", 24),
    ("SIGXFSZ", 25),
    ("SIGVTALRM", 26),
    ("SIGPROF", 27),
    ("SIGWINCH", 28),
    ("SIGIO", 29),
    ("SIGPOLL", 29),
    ("SIGPWR", 30),
    ("SIGSYS", 31),
    ("SIGRTMIN", 32),
];

/// The number of a signal name: `SIGCHLD`, `SIGRTMIN`, `SIGRT_3` (SIGRTMIN + 3), or a
/// bare number.
pub fn signal_from_name(name: &[u8]) -> Option<i32> {
    if let Some(&(_, v)) = SIGNALS.iter().find(|(n, _)| n.as_bytes() == name) {
        return Some(v);
    }
    if let Some(rest) = name.strip_prefix(b"SIGRT_") {
        let n: i32 = std::str::from_utf8(rest).ok()?.parse().ok()?;
        return Some(32 + n);
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}

/// `open` flags. `O_RDONLY` is 0; `O_SYNC` includes `O_DSYNC`, `O_TMPFILE` includes
/// `O_DIRECTORY`, as in the kernel headers.
pub const OPEN_FLAGS: Table = &[
    ("O_RDONLY", 0),
    ("O_WRONLY", 0o1),
    ("O_RDWR", 0o2),
    ("O_ACCMODE", 0o3),
    ("O_CREAT", 0o100),
    ("O_EXCL", 0o200),
    ("O_NOCTTY", 0o400),
    ("O_TRUNC", 0o1000),
    ("O_APPEND", 0o2000),
    ("O_NONBLOCK", 0o4000),
    ("O_NDELAY", 0o4000),
    ("O_DSYNC", 0o10000),
    ("O_ASYNC", 0o20000),
    ("FASYNC", 0o20000),
    ("O_DIRECT", 0o40000),
    ("O_LARGEFILE", 0o100000),
    ("O_DIRECTORY", 0o200000),
    ("O_NOFOLLOW", 0o400000),
    ("O_NOATIME", 0o1000000),
    ("O_CLOEXEC", 0o2000000),
    ("__O_SYNC", 0o4000000),
    ("O_SYNC", 0o4010000),
    ("O_RSYNC", 0o4010000),
    ("O_PATH", 0o10000000),
    ("__O_TMPFILE", 0o20000000),
    ("O_TMPFILE", 0o20200000),
];

/// `O_APPEND`.
pub const O_APPEND: u64 = 0o2000;
/// `__O_TMPFILE`, the bit of `O_TMPFILE` that is its own (the other is `O_DIRECTORY`).
pub const O_TMPFILE_BIT: u64 = 0o20000000;
/// `O_CLOEXEC`.
pub const O_CLOEXEC: u64 = 0o2000000;
/// `O_CREAT|O_WRONLY|O_TRUNC`, what `creat` means.
pub const CREAT_FLAGS: u64 = 0o100 | 0o1 | 0o1000;

/// `AT_*` flags of the *at calls, and `AT_FDCWD`'s neighbours used as flags.
pub const AT_FLAGS: Table = &[
    ("AT_SYMLINK_NOFOLLOW", 0x100),
    ("AT_REMOVEDIR", 0x200),
    ("AT_EACCESS", 0x200),
    ("AT_SYMLINK_FOLLOW", 0x400),
    ("AT_NO_AUTOMOUNT", 0x800),
    ("AT_EMPTY_PATH", 0x1000),
    ("AT_STATX_SYNC_AS_STAT", 0),
    ("AT_STATX_FORCE_SYNC", 0x2000),
    ("AT_STATX_DONT_SYNC", 0x4000),
    ("AT_RECURSIVE", 0x8000),
];

/// `AT_EMPTY_PATH`.
pub const AT_EMPTY_PATH: u64 = 0x1000;
/// `AT_FDCWD`.
pub const AT_FDCWD: i64 = -100;

/// `statx` mask bits.
pub const STATX_MASK: Table = &[
    ("STATX_TYPE", 0x1),
    ("STATX_MODE", 0x2),
    ("STATX_NLINK", 0x4),
    ("STATX_UID", 0x8),
    ("STATX_GID", 0x10),
    ("STATX_ATIME", 0x20),
    ("STATX_MTIME", 0x40),
    ("STATX_CTIME", 0x80),
    ("STATX_INO", 0x100),
    ("STATX_SIZE", 0x200),
    ("STATX_BLOCKS", 0x400),
    ("STATX_BASIC_STATS", 0x7ff),
    ("STATX_BTIME", 0x800),
    ("STATX_ALL", 0xfff),
    ("STATX_MNT_ID", 0x1000),
    ("STATX_DIOALIGN", 0x2000),
    ("STATX_MNT_ID_UNIQUE", 0x4000),
];

/// `access` modes.
pub const ACCESS_MODES: Table = &[("F_OK", 0), ("X_OK", 1), ("W_OK", 2), ("R_OK", 4)];

/// File mode symbols strace prints in front of octal permissions.
pub const MODE_BITS: Table = &[
    ("S_IFSOCK", 0o140000),
    ("S_IFLNK", 0o120000),
    ("S_IFREG", 0o100000),
    ("S_IFBLK", 0o060000),
    ("S_IFDIR", 0o040000),
    ("S_IFCHR", 0o020000),
    ("S_IFIFO", 0o010000),
    ("S_ISUID", 0o4000),
    ("S_ISGID", 0o2000),
    ("S_ISVTX", 0o1000),
    ("S_IRWXU", 0o700),
    ("S_IRUSR", 0o400),
    ("S_IWUSR", 0o200),
    ("S_IXUSR", 0o100),
    ("S_IRWXG", 0o70),
    ("S_IRGRP", 0o40),
    ("S_IWGRP", 0o20),
    ("S_IXGRP", 0o10),
    ("S_IRWXO", 0o7),
    ("S_IROTH", 0o4),
    ("S_IWOTH", 0o2),
    ("S_IXOTH", 0o1),
];

/// `clone` flags; the low byte of `clone`'s flags is the exit signal (see [`SIGNALS`]).
pub const CLONE_FLAGS: Table = &[
    ("CLONE_NEWTIME", 0x80),
    ("CLONE_VM", 0x100),
    ("CLONE_FS", 0x200),
    ("CLONE_FILES", 0x400),
    ("CLONE_SIGHAND", 0x800),
    ("CLONE_PIDFD", 0x1000),
    ("CLONE_PTRACE", 0x2000),
    ("CLONE_VFORK", 0x4000),
    ("CLONE_PARENT", 0x8000),
    ("CLONE_THREAD", 0x10000),
    ("CLONE_NEWNS", 0x20000),
    ("CLONE_SYSVSEM", 0x40000),
    ("CLONE_SETTLS", 0x80000),
    ("CLONE_PARENT_SETTID", 0x100000),
    ("CLONE_CHILD_CLEARTID", 0x200000),
    ("CLONE_DETACHED", 0x400000),
    ("CLONE_UNTRACED", 0x800000),
    ("CLONE_CHILD_SETTID", 0x1000000),
    ("CLONE_NEWCGROUP", 0x2000000),
    ("CLONE_NEWUTS", 0x4000000),
    ("CLONE_NEWIPC", 0x8000000),
    ("CLONE_NEWUSER", 0x10000000),
    ("CLONE_NEWPID", 0x20000000),
    ("CLONE_NEWNET", 0x40000000),
    ("CLONE_IO", 0x80000000),
    ("CLONE_CLEAR_SIGHAND", 0x100000000),
    ("CLONE_INTO_CGROUP", 0x200000000),
];

/// `CLONE_THREAD`.
pub const CLONE_THREAD: u64 = 0x10000;
/// `CLONE_VM|CLONE_VFORK|SIGCHLD`: what `vfork` means.
pub const VFORK_FLAGS: u64 = 0x100 | 0x4000 | 17;
/// `SIGCHLD`: what `fork` means (`clone(SIGCHLD)`).
pub const FORK_FLAGS: u64 = 17;

/// `renameat2` flags.
pub const RENAME_FLAGS: Table = &[
    ("RENAME_NOREPLACE", 1),
    ("RENAME_EXCHANGE", 2),
    ("RENAME_WHITEOUT", 4),
];

/// `close_range` flags.
pub const CLOSE_RANGE_FLAGS: Table = &[("CLOSE_RANGE_UNSHARE", 2), ("CLOSE_RANGE_CLOEXEC", 4)];

/// `CLOSE_RANGE_CLOEXEC`.
pub const CLOSE_RANGE_CLOEXEC: u64 = 4;

/// `preadv2`/`pwritev2` flags.
pub const RWF_FLAGS: Table = &[
    ("RWF_HIPRI", 1),
    ("RWF_DSYNC", 2),
    ("RWF_SYNC", 4),
    ("RWF_NOWAIT", 8),
    ("RWF_APPEND", 0x10),
    ("RWF_NOAPPEND", 0x20),
];

/// `lseek` whence values.
pub const SEEK_WHENCE: Table = &[
    ("SEEK_SET", 0),
    ("SEEK_CUR", 1),
    ("SEEK_END", 2),
    ("SEEK_DATA", 3),
    ("SEEK_HOLE", 4),
];

/// `sync_file_range` flags.
pub const SYNC_FILE_RANGE_FLAGS: Table = &[
    ("SYNC_FILE_RANGE_WAIT_BEFORE", 1),
    ("SYNC_FILE_RANGE_WRITE", 2),
    ("SYNC_FILE_RANGE_WAIT_AFTER", 4),
];

/// `fcntl` commands.
pub const FCNTL_CMDS: Table = &[
    ("F_DUPFD", 0),
    ("F_GETFD", 1),
    ("F_SETFD", 2),
    ("F_GETFL", 3),
    ("F_SETFL", 4),
    ("F_GETLK", 5),
    ("F_SETLK", 6),
    ("F_SETLKW", 7),
    ("F_SETOWN", 8),
    ("F_GETOWN", 9),
    ("F_SETSIG", 10),
    ("F_GETSIG", 11),
    ("F_SETOWN_EX", 15),
    ("F_GETOWN_EX", 16),
    ("F_GETOWNER_UIDS", 17),
    ("F_OFD_GETLK", 36),
    ("F_OFD_SETLK", 37),
    ("F_OFD_SETLKW", 38),
    ("F_SETLEASE", 1024),
    ("F_GETLEASE", 1025),
    ("F_NOTIFY", 1026),
    ("F_DUPFD_CLOEXEC", 1030),
    ("F_SETPIPE_SZ", 1031),
    ("F_GETPIPE_SZ", 1032),
    ("F_ADD_SEALS", 1033),
    ("F_GET_SEALS", 1034),
    ("F_GET_RW_HINT", 1035),
    ("F_SET_RW_HINT", 1036),
    ("F_GET_FILE_RW_HINT", 1037),
    ("F_SET_FILE_RW_HINT", 1038),
];

/// `fcntl` commands the importer acts on.
pub const F_DUPFD: u64 = 0;
/// `F_SETFD`.
pub const F_SETFD: u64 = 2;
/// `F_SETFL`.
pub const F_SETFL: u64 = 4;
/// `F_DUPFD_CLOEXEC`.
pub const F_DUPFD_CLOEXEC: u64 = 1030;

/// Values of `fcntl`'s third argument: descriptor flags, lease and notify constants.
pub const FCNTL_ARGS: Table = &[
    ("FD_CLOEXEC", 1),
    ("F_RDLCK", 0),
    ("F_WRLCK", 1),
    ("F_UNLCK", 2),
    ("DN_ACCESS", 1),
    ("DN_MODIFY", 2),
    ("DN_CREATE", 4),
    ("DN_DELETE", 8),
    ("DN_RENAME", 0x10),
    ("DN_ATTRIB", 0x20),
    ("DN_MULTISHOT", 0x80000000),
    ("F_SEAL_SEAL", 1),
    ("F_SEAL_SHRINK", 2),
    ("F_SEAL_GROW", 4),
    ("F_SEAL_WRITE", 8),
    ("F_SEAL_FUTURE_WRITE", 0x10),
];

/// Socket address families.
pub const ADDRESS_FAMILIES: Table = &[
    ("AF_UNSPEC", 0),
    ("AF_UNIX", 1),
    ("AF_LOCAL", 1),
    ("AF_FILE", 1),
    ("AF_INET", 2),
    ("AF_AX25", 3),
    ("AF_IPX", 4),
    ("AF_APPLETALK", 5),
    ("AF_NETROM", 6),
    ("AF_BRIDGE", 7),
    ("AF_ATMPVC", 8),
    ("AF_X25", 9),
    ("AF_INET6", 10),
    ("AF_ROSE", 11),
    ("AF_DECnet", 12),
    ("AF_NETBEUI", 13),
    ("AF_SECURITY", 14),
    ("AF_KEY", 15),
    ("AF_NETLINK", 16),
    ("AF_ROUTE", 16),
    ("AF_PACKET", 17),
    ("AF_ASH", 18),
    ("AF_ECONET", 19),
    ("AF_ATMSVC", 20),
    ("AF_RDS", 21),
    ("AF_SNA", 22),
    ("AF_IRDA", 23),
    ("AF_PPPOX", 24),
    ("AF_WANPIPE", 25),
    ("AF_LLC", 26),
    ("AF_IB", 27),
    ("AF_MPLS", 28),
    ("AF_CAN", 29),
    ("AF_TIPC", 30),
    ("AF_BLUETOOTH", 31),
    ("AF_IUCV", 32),
    ("AF_RXRPC", 33),
    ("AF_ISDN", 34),
    ("AF_PHONET", 35),
    ("AF_IEEE802154", 36),
    ("AF_CAIF", 37),
    ("AF_ALG", 38),
    ("AF_NFC", 39),
    ("AF_VSOCK", 40),
    ("AF_KCM", 41),
    ("AF_QIPCRTR", 42),
    ("AF_SMC", 43),
    ("AF_XDP", 44),
    ("AF_MCTP", 45),
];

/// Socket types and the flags `socket`/`accept4` accept with them.
pub const SOCK_TYPES: Table = &[
    ("SOCK_STREAM", 1),
    ("SOCK_DGRAM", 2),
    ("SOCK_RAW", 3),
    ("SOCK_RDM", 4),
    ("SOCK_SEQPACKET", 5),
    ("SOCK_DCCP", 6),
    ("SOCK_PACKET", 10),
    ("SOCK_NONBLOCK", 0o4000),
    ("SOCK_CLOEXEC", 0o2000000),
];

/// `SOCK_CLOEXEC`.
pub const SOCK_CLOEXEC: u64 = 0o2000000;

/// Socket protocols strace names (IP protocols and netlink families share the field).
pub const PROTOCOLS: Table = &[
    ("IPPROTO_IP", 0),
    ("IPPROTO_ICMP", 1),
    ("IPPROTO_IGMP", 2),
    ("IPPROTO_TCP", 6),
    ("IPPROTO_UDP", 17),
    ("IPPROTO_IPV6", 41),
    ("IPPROTO_ICMPV6", 58),
    ("IPPROTO_SCTP", 132),
    ("IPPROTO_UDPLITE", 136),
    ("IPPROTO_MPTCP", 262),
    ("IPPROTO_RAW", 255),
    ("NETLINK_ROUTE", 0),
    ("NETLINK_UNUSED", 1),
    ("NETLINK_USERSOCK", 2),
    ("NETLINK_FIREWALL", 3),
    ("NETLINK_SOCK_DIAG", 4),
    ("NETLINK_NFLOG", 5),
    ("NETLINK_XFRM", 6),
    ("NETLINK_SELINUX", 7),
    ("NETLINK_ISCSI", 8),
    ("NETLINK_AUDIT", 9),
    ("NETLINK_FIB_LOOKUP", 10),
    ("NETLINK_CONNECTOR", 11),
    ("NETLINK_NETFILTER", 12),
    ("NETLINK_IP6_FW", 13),
    ("NETLINK_DNRTMSG", 14),
    ("NETLINK_KOBJECT_UEVENT", 15),
    ("NETLINK_GENERIC", 16),
    ("NETLINK_SCSITRANSPORT", 18),
    ("NETLINK_ECRYPTFS", 19),
    ("NETLINK_RDMA", 20),
    ("NETLINK_CRYPTO", 21),
    ("NETLINK_SMC", 22),
];

/// `dup3`/`pipe2` flags (`O_CLOEXEC`, `O_NONBLOCK`, `O_DIRECT`) are open flags.
/// `memfd_create` flags.
pub const MFD_FLAGS: Table = &[
    ("MFD_CLOEXEC", 1),
    ("MFD_ALLOW_SEALING", 2),
    ("MFD_HUGETLB", 4),
    ("MFD_NOEXEC_SEAL", 8),
    ("MFD_EXEC", 0x10),
];

/// `MFD_CLOEXEC`.
pub const MFD_CLOEXEC: u64 = 1;

/// `splice`/`tee`/`vmsplice` flags.
pub const SPLICE_FLAGS: Table = &[
    ("SPLICE_F_MOVE", 1),
    ("SPLICE_F_NONBLOCK", 2),
    ("SPLICE_F_MORE", 4),
    ("SPLICE_F_GIFT", 8),
];

/// `openat2`'s `resolve` bits.
pub const RESOLVE_FLAGS: Table = &[
    ("RESOLVE_NO_XDEV", 1),
    ("RESOLVE_NO_MAGICLINKS", 2),
    ("RESOLVE_NO_SYMLINKS", 4),
    ("RESOLVE_BENEATH", 8),
    ("RESOLVE_IN_ROOT", 0x10),
    ("RESOLVE_CACHED", 0x20),
];

/// `mmap`'s `prot`.
pub const PROT_FLAGS: Table = &[
    ("PROT_NONE", 0),
    ("PROT_READ", 1),
    ("PROT_WRITE", 2),
    ("PROT_EXEC", 4),
    ("PROT_SEM", 8),
    ("PROT_GROWSDOWN", 0x0100_0000),
    ("PROT_GROWSUP", 0x0200_0000),
];

/// `mmap`'s `flags`.
pub const MAP_FLAGS: Table = &[
    ("MAP_SHARED", 1),
    ("MAP_PRIVATE", 2),
    ("MAP_SHARED_VALIDATE", 3),
    ("MAP_FIXED", 0x10),
    ("MAP_ANONYMOUS", 0x20),
    ("MAP_32BIT", 0x40),
    ("MAP_GROWSDOWN", 0x100),
    ("MAP_DENYWRITE", 0x800),
    ("MAP_EXECUTABLE", 0x1000),
    ("MAP_LOCKED", 0x2000),
    ("MAP_NORESERVE", 0x4000),
    ("MAP_POPULATE", 0x8000),
    ("MAP_NONBLOCK", 0x10000),
    ("MAP_STACK", 0x20000),
    ("MAP_HUGETLB", 0x40000),
    ("MAP_SYNC", 0x80000),
    ("MAP_FIXED_NOREPLACE", 0x10_0000),
    ("MAP_UNINITIALIZED", 0x400_0000),
    ("MAP_HUGE_64KB", 16 << 26),
    ("MAP_HUGE_2MB", 21 << 26),
    ("MAP_HUGE_1GB", 30 << 26),
];

/// `MAP_ANONYMOUS`.
pub const MAP_ANONYMOUS: u64 = 0x20;

/// `execveat` takes AT_* flags.
/// Numeric names strace uses for "all ones" values.
pub fn special_number(name: &[u8]) -> Option<u64> {
    match name {
        b"~0U" | b"~0" => Some(u32::MAX as u64),
        b"~0UL" | b"~0ULL" => Some(u64::MAX),
        b"NULL" => Some(0),
        b"AT_FDCWD" => Some(AT_FDCWD as u64),
        b"UTIME_NOW" => Some((1 << 30) - 1),
        b"UTIME_OMIT" => Some((1 << 30) - 2),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_and_signal_names() {
        assert_eq!(errno_from_name(b"ENOENT"), Some(2));
        assert_eq!(errno_from_name(b"ERESTARTSYS"), Some(512));
        assert_eq!(errno_from_name(b"EWOULDBLOCK"), Some(11));
        assert_eq!(errno_from_name(b"ENOPE"), None);
        assert_eq!(signal_from_name(b"SIGCHLD"), Some(17));
        assert_eq!(signal_from_name(b"SIGUSR2"), Some(12));
        assert_eq!(signal_from_name(b"SIGRT_2"), Some(34));
        assert_eq!(signal_from_name(b"SIGBOGUS"), None);
        assert!(is_restart_errno(512) && !is_restart_errno(4));
    }

    #[test]
    fn flag_values_match_the_kernel_headers() {
        // A few values checked against /usr/include (x86_64) by hand.
        assert_eq!(lookup(OPEN_FLAGS, b"O_CLOEXEC"), Some(0x80000));
        assert_eq!(lookup(OPEN_FLAGS, b"O_DIRECTORY"), Some(0x10000));
        assert_eq!(lookup(OPEN_FLAGS, b"O_APPEND"), Some(0x400));
        assert_eq!(lookup(AT_FLAGS, b"AT_EMPTY_PATH"), Some(0x1000));
        assert_eq!(lookup(CLONE_FLAGS, b"CLONE_THREAD"), Some(0x10000));
        assert_eq!(lookup(STATX_MASK, b"STATX_BASIC_STATS"), Some(0x7ff));
    }

    /// Every errno the kernel headers define has the same number here.
    #[test]
    fn errno_table_matches_the_kernel_headers() {
        let mut defined = std::collections::HashMap::new();
        for h in [
            "/usr/include/asm-generic/errno-base.h",
            "/usr/include/asm-generic/errno.h",
        ] {
            let Ok(text) = std::fs::read_to_string(h) else {
                println!("SKIPPED: {h} is not installed");
                return;
            };
            for line in text.lines() {
                let w: Vec<&str> = line.split_whitespace().collect();
                if w.len() >= 3 && w[0] == "#define" && w[1].starts_with('E') {
                    let v = w[2]
                        .parse::<i32>()
                        .ok()
                        .or_else(|| defined.get(w[2]).copied());
                    if let Some(v) = v {
                        defined.insert(w[1].to_string(), v);
                    }
                }
            }
        }
        assert!(
            defined.len() > 100,
            "headers parsed badly: {}",
            defined.len()
        );
        for (name, v) in &defined {
            assert_eq!(errno_from_name(name.as_bytes()), Some(*v), "{name}");
        }
    }

    /// The x86_64 flag values agree with the C library's. (Not O_LARGEFILE: glibc
    /// defines it as 0 on 64-bit, but the kernel sets 0o100000 and strace prints it.)
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn flags_match_libc() {
        let pairs: &[(Table, &str, i64)] = &[
            (OPEN_FLAGS, "O_WRONLY", libc::O_WRONLY as i64),
            (OPEN_FLAGS, "O_RDWR", libc::O_RDWR as i64),
            (OPEN_FLAGS, "O_CREAT", libc::O_CREAT as i64),
            (OPEN_FLAGS, "O_EXCL", libc::O_EXCL as i64),
            (OPEN_FLAGS, "O_NOCTTY", libc::O_NOCTTY as i64),
            (OPEN_FLAGS, "O_TRUNC", libc::O_TRUNC as i64),
            (OPEN_FLAGS, "O_APPEND", libc::O_APPEND as i64),
            (OPEN_FLAGS, "O_NONBLOCK", libc::O_NONBLOCK as i64),
            (OPEN_FLAGS, "O_DSYNC", libc::O_DSYNC as i64),
            (OPEN_FLAGS, "O_DIRECT", libc::O_DIRECT as i64),
            (OPEN_FLAGS, "O_DIRECTORY", libc::O_DIRECTORY as i64),
            (OPEN_FLAGS, "O_NOFOLLOW", libc::O_NOFOLLOW as i64),
            (OPEN_FLAGS, "O_NOATIME", libc::O_NOATIME as i64),
            (OPEN_FLAGS, "O_CLOEXEC", libc::O_CLOEXEC as i64),
            (OPEN_FLAGS, "O_SYNC", libc::O_SYNC as i64),
            (OPEN_FLAGS, "O_PATH", libc::O_PATH as i64),
            (OPEN_FLAGS, "O_TMPFILE", libc::O_TMPFILE as i64),
            (
                AT_FLAGS,
                "AT_SYMLINK_NOFOLLOW",
                libc::AT_SYMLINK_NOFOLLOW as i64,
            ),
            (AT_FLAGS, "AT_REMOVEDIR", libc::AT_REMOVEDIR as i64),
            (
                AT_FLAGS,
                "AT_SYMLINK_FOLLOW",
                libc::AT_SYMLINK_FOLLOW as i64,
            ),
            (AT_FLAGS, "AT_NO_AUTOMOUNT", libc::AT_NO_AUTOMOUNT as i64),
            (AT_FLAGS, "AT_EMPTY_PATH", libc::AT_EMPTY_PATH as i64),
            (AT_FLAGS, "AT_EACCESS", libc::AT_EACCESS as i64),
            (CLONE_FLAGS, "CLONE_VM", libc::CLONE_VM as i64),
            (CLONE_FLAGS, "CLONE_FS", libc::CLONE_FS as i64),
            (CLONE_FLAGS, "CLONE_FILES", libc::CLONE_FILES as i64),
            (CLONE_FLAGS, "CLONE_SIGHAND", libc::CLONE_SIGHAND as i64),
            (CLONE_FLAGS, "CLONE_VFORK", libc::CLONE_VFORK as i64),
            (CLONE_FLAGS, "CLONE_THREAD", libc::CLONE_THREAD as i64),
            (CLONE_FLAGS, "CLONE_SETTLS", libc::CLONE_SETTLS as i64),
            (
                CLONE_FLAGS,
                "CLONE_PARENT_SETTID",
                libc::CLONE_PARENT_SETTID as i64,
            ),
            (
                CLONE_FLAGS,
                "CLONE_CHILD_CLEARTID",
                libc::CLONE_CHILD_CLEARTID as i64,
            ),
            (
                CLONE_FLAGS,
                "CLONE_CHILD_SETTID",
                libc::CLONE_CHILD_SETTID as i64,
            ),
            (CLONE_FLAGS, "CLONE_NEWNS", libc::CLONE_NEWNS as i64),
            (CLONE_FLAGS, "CLONE_NEWPID", libc::CLONE_NEWPID as i64),
            (
                STATX_MASK,
                "STATX_BASIC_STATS",
                libc::STATX_BASIC_STATS as i64,
            ),
            (STATX_MASK, "STATX_ALL", libc::STATX_ALL as i64),
            (STATX_MASK, "STATX_BTIME", libc::STATX_BTIME as i64),
            (SOCK_TYPES, "SOCK_CLOEXEC", libc::SOCK_CLOEXEC as i64),
            (SOCK_TYPES, "SOCK_NONBLOCK", libc::SOCK_NONBLOCK as i64),
            (SOCK_TYPES, "SOCK_DGRAM", libc::SOCK_DGRAM as i64),
            (ADDRESS_FAMILIES, "AF_INET6", libc::AF_INET6 as i64),
            (ADDRESS_FAMILIES, "AF_NETLINK", libc::AF_NETLINK as i64),
            (FCNTL_CMDS, "F_DUPFD_CLOEXEC", libc::F_DUPFD_CLOEXEC as i64),
            (FCNTL_CMDS, "F_SETFL", libc::F_SETFL as i64),
            (FCNTL_CMDS, "F_OFD_SETLK", libc::F_OFD_SETLK as i64),
            (SEEK_WHENCE, "SEEK_DATA", libc::SEEK_DATA as i64),
            (
                MFD_FLAGS,
                "MFD_ALLOW_SEALING",
                libc::MFD_ALLOW_SEALING as i64,
            ),
            (
                RENAME_FLAGS,
                "RENAME_EXCHANGE",
                libc::RENAME_EXCHANGE as i64,
            ),
        ];
        for &(table, name, want) in pairs {
            assert_eq!(lookup(table, name.as_bytes()), Some(want as u64), "{name}");
        }
        for (name, want) in [
            ("SIGCHLD", libc::SIGCHLD),
            ("SIGUSR1", libc::SIGUSR1),
            ("SIGSYS", libc::SIGSYS),
        ] {
            assert_eq!(signal_from_name(name.as_bytes()), Some(want), "{name}");
        }
    }
}
