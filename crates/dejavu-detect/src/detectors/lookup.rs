//! What counts as a path lookup, which lookups ask the same question, and what their
//! answer is. Shared by repeated-lookup, negative-probe and check-then-act.

use dejavu_trace::{ev, Sys, Syscall};

const AT_SYMLINK_NOFOLLOW: u64 = 0x100;

/// The question a lookup asks.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Question {
    /// Metadata (stat, lstat, statx, newfstatat), following the last symlink or not.
    Stat {
        /// lstat / AT_SYMLINK_NOFOLLOW.
        nofollow: bool,
    },
    /// Access check with this mode (F_OK, R_OK, ...).
    Access {
        /// The mode bits.
        mode: u32,
        /// AT_SYMLINK_NOFOLLOW.
        nofollow: bool,
    },
    /// A symlink's target.
    Readlink,
    /// Whether the file can be opened (only failed opens count as lookups).
    Open,
}

impl Question {
    /// Short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Question::Stat { nofollow: false } => "stat",
            Question::Stat { nofollow: true } => "lstat",
            Question::Access { .. } => "access",
            Question::Readlink => "readlink",
            Question::Open => "open",
        }
    }
}

/// The question `s` asks about its path, when it is a path lookup. Calls on a descriptor
/// (fstat, AT_EMPTY_PATH) are never lookups of a path.
#[inline]
pub fn question(s: &Syscall) -> Option<Question> {
    if s.ev & ev::PATH_FROM_FD != 0 || s.path.is_none() {
        return None;
    }
    Some(match s.sys {
        Sys::Stat => Question::Stat { nofollow: false },
        Sys::Lstat => Question::Stat { nofollow: true },
        Sys::Newfstatat | Sys::Statx => Question::Stat {
            nofollow: s.flags & AT_SYMLINK_NOFOLLOW != 0,
        },
        Sys::Access => Question::Access {
            mode: s.mode,
            nofollow: false,
        },
        Sys::Faccessat | Sys::Faccessat2 => Question::Access {
            mode: s.mode,
            nofollow: s.flags & AT_SYMLINK_NOFOLLOW != 0,
        },
        Sys::Readlink | Sys::Readlinkat => Question::Readlink,
        Sys::Open | Sys::Openat | Sys::Openat2 => Question::Open,
        _ => return None,
    })
}

/// Whether the call's kind can be a lookup at all (for `Detector::wants`).
pub fn is_lookup_call(sys: Sys) -> bool {
    use Sys::*;
    matches!(
        sys,
        Stat | Lstat
            | Newfstatat
            | Statx
            | Access
            | Faccessat
            | Faccessat2
            | Readlink
            | Readlinkat
            | Open
            | Openat
            | Openat2
    )
}

/// The answer, comparable between two lookups of the same question: the result and what
/// the kernel wrote back (stat answers are interned by value, atime excluded).
#[inline]
pub fn answer(s: &Syscall) -> u64 {
    let extra = match s.sys {
        Sys::Readlink | Sys::Readlinkat => s.path2.map_or(u32::MAX, |p| p.0),
        _ => s.stat.map_or(u32::MAX, |p| p.0),
    };
    ((s.ret as u64) << 32) ^ extra as u64
}

/// Whether two answers (see [`answer`]) hold the same return value: the upper half.
pub fn same_result(a: u64, b: u64) -> bool {
    a >> 32 == b >> 32
}

/// Whether a kept lookup's answer (`kept`, with its stat `kept_stat`) answers a lookup
/// that got `answer` (`stat`): the same, or the same result with a stat answer that holds
/// every field the new one does, with the same values (a `statx` that asked for fewer
/// fields; the JDK asks without the times).
pub fn kept_answers(
    cx: &crate::Cx<'_>,
    (kept, kept_stat): (u64, Option<dejavu_trace::StatId>),
    (answer, stat): (u64, Option<dejavu_trace::StatId>),
) -> bool {
    kept == answer
        || (same_result(kept, answer)
            && matches!((kept_stat, stat), (Some(a), Some(b)) if cx.stat(a).answers(&cx.stat(b))))
}

/// Whether two stat answers agree on every field both hold (one asked for fewer).
pub fn stats_agree(
    cx: &crate::Cx<'_>,
    a: Option<dejavu_trace::StatId>,
    b: Option<dejavu_trace::StatId>,
) -> bool {
    matches!((a, b), (Some(a), Some(b)) if cx.stat(a).agrees(&cx.stat(b)))
}

/// Whether two stat answers of one path differ only as a directory's do when entries are
/// made or removed in it: both the same directory (device, inode, type and permissions,
/// owner), with other times, size or link count. Such a change makes a cached answer's
/// times stale, not whether the path exists or what it is (what realpath, isdir and
/// exists use).
pub fn dir_times_only(a: &dejavu_trace::FileStat, b: &dejavu_trace::FileStat) -> bool {
    use dejavu_trace::{mode, stat_known};
    let need = stat_known::IDENTITY | stat_known::MODE;
    a.known & need == need
        && b.known & need == need
        && a.mode & mode::S_IFMT == mode::S_IFDIR
        && (a.dev, a.ino, a.mode) == (b.dev, b.ino, b.mode)
        && (a.known & b.known & stat_known::OWNER == 0 || (a.uid, a.gid) == (b.uid, b.gid))
}

/// A failure that says something lasting about the path, so that the same call fails the
/// same way until the path or its directory changes: it does not exist (ENOENT), a
/// directory on the way is not one (ENOTDIR), it may not be accessed (EACCES, EPERM), it is
/// a symbolic link where none may be (ELOOP), it is a directory (EISDIR), its name is too
/// long (ENAMETOOLONG), it already exists (EEXIST), it is not empty (ENOTEMPTY), it is on a
/// read-only file system (EROFS). Transient failures (EINTR, EAGAIN, EBUSY, ETXTBSY, EMFILE,
/// ENOMEM, EIO, ...) are not: the next try may succeed. These are negative-probe's
/// findings, not repeated-lookup's.
#[inline]
pub fn is_negative(s: &Syscall) -> bool {
    s.ev & ev::UNFINISHED == 0 && LASTING.contains(&s.ret)
}

/// The failures [`is_negative`] accepts, as negated errnos.
const LASTING: [i64; 10] = [
    -2,  // ENOENT
    -20, // ENOTDIR
    -13, // EACCES
    -1,  // EPERM
    -40, // ELOOP
    -21, // EISDIR
    -36, // ENAMETOOLONG
    -17, // EEXIST
    -39, // ENOTEMPTY
    -30, // EROFS
];

/// Whether a call is the thread's runtime plumbing rather than a question about files: a
/// call on a descriptor that is not a file or directory (an eventfd or other anonymous
/// inode, a pipe, a socket, a terminal, /dev/null), or on one nobody saw opened and that
/// names no path (the eBPF backend cannot name descriptors made by untraced calls such as
/// eventfd or epoll_create). An event loop's wakeup write or a log line says nothing about
/// files, and a runtime makes them at moments of its own (a garbage collection, a worker's
/// wakeup): the "right before" and "within N calls" rules of ensure-dir and
/// check-then-act see through them.
pub fn is_plumbing(s: &Syscall, v: &dejavu_replay::View, cx: &crate::Cx<'_>) -> bool {
    use dejavu_replay::FdKind;
    if s.fd.is_none() {
        return false; // a call with a path of its own
    }
    let kind = match (v.fd, v.path) {
        (Some(f), _) => f.kind,
        (None, Some(p)) => FdKind::classify(cx.replay.paths.bytes(p), None),
        (None, None) => return true,
    };
    !matches!(kind, FdKind::File | FdKind::Dir)
}

/// The directories each process holds open, to tell a lookup that checks what an open
/// reached from a repeat: opening a directory can mount a file system on it (autofs), and
/// gnulib's fts (du, find) stats each directory again after opening it for that reason.
/// repeated-lookup does not count such a lookup, and whatif's stat cache does not serve it.
#[derive(Default)]
pub(crate) struct OpenDirs {
    /// By (process, descriptor).
    by_fd: rustc_hash::FxHashMap<(u32, i32), dejavu_replay::PathKey>,
    /// When each (process, path) was last opened, while still open (and by which
    /// descriptor).
    opened_at: rustc_hash::FxHashMap<(u32, dejavu_replay::PathKey), (i32, u64)>,
}

impl OpenDirs {
    /// Follows what `s` opens (a directory: held from now on) and closes.
    pub(crate) fn follow(&mut self, s: &Syscall, v: &dejavu_replay::View, cx: &crate::Cx<'_>) {
        const O_DIRECTORY: u64 = 0o200000;
        let fd = match s.sys {
            Sys::Open | Sys::Openat | Sys::Openat2 if s.ret >= 0 => s.ret as i32,
            Sys::Close => match s.fd {
                Some(fd) => fd,
                None => return,
            },
            _ => return,
        };
        // Closed, or a new file at that number: the old directory's entry goes.
        if let Some(old) = self.by_fd.remove(&(s.pid, fd)) {
            if self.opened_at.get(&(s.pid, old)).is_some_and(|o| o.0 == fd) {
                self.opened_at.remove(&(s.pid, old));
            }
        }
        if s.sys == Sys::Close {
            return;
        }
        let Some(path) = v.path else { return };
        let dir = match s.stat {
            Some(st) => {
                cx.stat(st).mode & dejavu_trace::mode::S_IFMT == dejavu_trace::mode::S_IFDIR
            }
            None => s.flags & O_DIRECTORY != 0,
        };
        if dir {
            self.by_fd.insert((s.pid, fd), path);
            self.opened_at.insert((s.pid, path), (fd, s.ts));
        }
    }

    /// When process `pid` opened directory `path`, if it holds it open.
    pub(crate) fn opened_since(&self, pid: u32, path: dejavu_replay::PathKey) -> Option<u64> {
        self.opened_at.get(&(pid, path)).map(|o| o.1)
    }
}
