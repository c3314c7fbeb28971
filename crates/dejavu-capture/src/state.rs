//! What the tracer knows about the traced programs: per-process descriptor tables and
//! working directories (shared between tasks exactly as the kernel shares them, via
//! CLONE_FILES and CLONE_FS), and lexical path resolution.
//!
//! Keeping descriptors here is what makes `path` on fd-based calls cheap: strace -y pays
//! a readlink of /proc/PID/fd/N per event; we pay it once per descriptor, and only for
//! descriptors we did not see being created.

use dejavu_trace::{StatId, StrId};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::rc::Rc;

/// What a descriptor refers to (one vocabulary with replay: dejavu-trace).
pub use dejavu_trace::FdKind;

/// One open descriptor.
#[derive(Clone, Debug)]
pub struct Fd {
    /// Its path bytes (needed to resolve `*at` calls relative to it).
    pub path: Rc<[u8]>,
    /// Interned path.
    pub path_id: StrId,
    /// Interned identity of the open file, when known.
    pub stat: Option<StatId>,
    /// What it is.
    pub kind: FdKind,
    /// Closed on exec.
    pub cloexec: bool,
    /// Opened with O_APPEND.
    pub append: bool,
}

impl Fd {
    /// Writes to this descriptor, as descriptor number `fd`, get their payload prefix
    /// recorded (`dejavu_trace::payload::keeps_payload`).
    pub fn keeps_payload(&self, fd: i32) -> bool {
        use dejavu_trace::payload::{keeps_payload, Target};
        let target = match self.kind {
            FdKind::File => Target::File,
            FdKind::Tty | FdKind::DevNull | FdKind::Pipe | FdKind::Socket => Target::Stream,
            FdKind::Dir | FdKind::Other => Target::Other,
        };
        keeps_payload(fd, target, self.append, &self.path)
    }
}

/// A descriptor table; shared by tasks created with CLONE_FILES.
#[derive(Clone, Debug, Default)]
pub struct FdTable {
    fds: FxHashMap<i32, Fd>,
}

impl FdTable {
    /// Looks up a descriptor.
    pub fn get(&self, fd: i32) -> Option<&Fd> {
        self.fds.get(&fd)
    }

    /// Mutable look-up.
    pub fn get_mut(&mut self, fd: i32) -> Option<&mut Fd> {
        self.fds.get_mut(&fd)
    }

    /// Installs `fd`, replacing whatever was there.
    pub fn insert(&mut self, fd: i32, f: Fd) {
        self.fds.insert(fd, f);
    }

    /// Removes `fd`.
    pub fn remove(&mut self, fd: i32) {
        self.fds.remove(&fd);
    }

    /// close_range(first, last): removes or marks close-on-exec.
    pub fn close_range(&mut self, first: u32, last: u32, cloexec_only: bool) {
        let in_range = |fd: i32| fd >= 0 && (fd as u32) >= first && (fd as u32) <= last;
        if cloexec_only {
            for (fd, f) in self.fds.iter_mut() {
                if in_range(*fd) {
                    f.cloexec = true;
                }
            }
        } else {
            self.fds.retain(|fd, _| !in_range(*fd));
        }
    }

    /// What exec leaves: everything not close-on-exec.
    pub fn after_exec(&self) -> FdTable {
        FdTable {
            fds: self
                .fds
                .iter()
                .filter(|(_, f)| !f.cloexec)
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        }
    }

    /// Number of known descriptors.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// No known descriptors.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

/// Filesystem context (working directory); shared by tasks created with CLONE_FS.
#[derive(Clone, Debug)]
pub struct FsContext {
    /// Absolute working directory.
    pub cwd: Rc<[u8]>,
}

/// A traced process (thread group).
#[derive(Debug)]
pub struct Process {
    /// Its descriptor table.
    pub fds: Rc<RefCell<FdTable>>,
    /// Its working directory.
    pub fs: Rc<RefCell<FsContext>>,
    /// Live tasks (threads) in it.
    pub tasks: usize,
    /// What it runs, as far as leaving native stacks out of a system tool goes.
    pub image: Rc<dejavu_detect::program::ImageRole>,
}

/// Resolves `rel` against the absolute directory `base`, lexically: removes `.` and
/// empty components, keeps `..` (with symlinks it cannot be resolved without the
/// filesystem). An empty `rel` stays empty: the kernel answers ENOENT without a lookup.
pub fn resolve(base: &[u8], rel: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if rel.is_empty() {
        return;
    }
    if rel[0] != b'/' {
        push_components(out, base);
    }
    push_components(out, rel);
    if out.is_empty() {
        out.push(b'/');
    }
}

fn push_components(out: &mut Vec<u8>, p: &[u8]) {
    for comp in p.split(|&c| c == b'/') {
        if comp.is_empty() || comp == b"." {
            continue;
        }
        out.push(b'/');
        out.extend_from_slice(comp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dejavu_trace::FileStat;

    fn r(base: &str, rel: &str) -> String {
        let mut out = Vec::new();
        resolve(base.as_bytes(), rel.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn resolves_like_the_kernel_would_without_touching_dotdot() {
        assert_eq!(r("/home/u", "a.txt"), "/home/u/a.txt");
        assert_eq!(r("/home/u", "./a//b/./c"), "/home/u/a/b/c");
        assert_eq!(r("/home/u", "/etc//passwd"), "/etc/passwd");
        assert_eq!(r("/home/u", "../x"), "/home/u/../x");
        assert_eq!(r("/", "."), "/");
        assert_eq!(r("/", "tmp/"), "/tmp");
        assert_eq!(r("/a", ""), "");
    }

    #[test]
    fn classifies_devices() {
        let chr = |ma, mi| FileStat {
            mode: dejavu_trace::mode::S_IFCHR | 0o666,
            rdev: FileStat::makedev(ma, mi),
            ..FileStat::default()
        };
        assert_eq!(FdKind::of(&chr(1, 3)), FdKind::DevNull);
        assert_eq!(FdKind::of(&chr(136, 2)), FdKind::Tty);
        assert_eq!(FdKind::of(&chr(1, 5)), FdKind::Other); // /dev/zero
        let fifo = FileStat {
            mode: dejavu_trace::mode::S_IFIFO,
            ..FileStat::default()
        };
        assert_eq!(FdKind::of(&fifo), FdKind::Pipe);
    }

    #[test]
    fn close_range_and_exec_follow_the_kernel() {
        let f = |cloexec| Fd {
            path: Rc::from(&b"/x"[..]),
            path_id: StrId(0),
            stat: None,
            kind: FdKind::File,
            cloexec,
            append: false,
        };
        let mut t = FdTable::default();
        for i in 0..10 {
            t.insert(i, f(i % 2 == 0));
        }
        assert_eq!(t.after_exec().len(), 5);
        t.close_range(3, 5, true);
        assert!(t.get(3).unwrap().cloexec);
        t.close_range(7, u32::MAX, false);
        assert_eq!(t.len(), 7);
        assert!(t.get(8).is_none());
    }
}
