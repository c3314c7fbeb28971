//! What a descriptor refers to: one vocabulary for the capture core (which classifies the
//! descriptors it learns, to decide what payload to keep) and replay (which classifies the
//! descriptors of a trace for the detectors).

use crate::{mode, stat_known, FileStat};

/// What a descriptor refers to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FdKind {
    /// A regular file (or something opened by path whose type is unknown).
    File,
    /// A directory.
    Dir,
    /// A terminal.
    Tty,
    /// /dev/null.
    DevNull,
    /// A pipe or FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// Anything else: other devices, anon inodes, memfds.
    Other,
}

impl FdKind {
    /// Classifies a stat answer by its file type (and, for character devices, by the
    /// device number).
    pub fn of(st: &FileStat) -> FdKind {
        match st.file_type() {
            mode::S_IFREG => FdKind::File,
            mode::S_IFDIR => FdKind::Dir,
            mode::S_IFIFO => FdKind::Pipe,
            mode::S_IFSOCK => FdKind::Socket,
            mode::S_IFCHR => match (FileStat::major(st.rdev), FileStat::minor(st.rdev)) {
                (1, 3) => FdKind::DevNull,
                // tty, console/ptmx, pty slaves (Documentation/admin-guide/devices.txt)
                (4, _) | (5, 0..=2) | (136..=143, _) => FdKind::Tty,
                _ => FdKind::Other,
            },
            _ => FdKind::Other,
        }
    }

    /// Classifies by stat answer when it has the file type, else by the path's name
    /// (/proc's `pipe:[N]`, `socket:[N]`, `anon_inode:...` included).
    pub fn classify(path: &[u8], st: Option<&FileStat>) -> FdKind {
        if let Some(st) = st.filter(|s| s.known & stat_known::MODE != 0) {
            return match FdKind::of(st) {
                // A character device named /dev/null that is not 1:3 (a container's).
                FdKind::Other if st.file_type() == mode::S_IFCHR && path == b"/dev/null" => {
                    FdKind::DevNull
                }
                k => k,
            };
        }
        if path == b"/dev/null" {
            FdKind::DevNull
        } else if path.starts_with(b"/dev/pts/")
            || path.starts_with(b"/dev/tty")
            || path == b"/dev/console"
        {
            FdKind::Tty
        } else if path.starts_with(b"pipe:") {
            FdKind::Pipe
        } else if path.starts_with(b"socket:") {
            FdKind::Socket
        } else if path.starts_with(b"anon_inode:") || path.starts_with(b"/memfd:") {
            FdKind::Other
        } else {
            FdKind::File
        }
    }
}

/// The name the calls on a file made without one (`open(DIR, O_TMPFILE)`) carry
/// (docs/trace-format.md, "Paths"): `DIR/#INODE (deleted)`, as /proc and `strace -y` name
/// it, or, when its inode is unknown, `DIR/#tmpfile-N (deleted)` with a number `n` of the
/// recording's own, so that two such files are never taken for one.
pub fn unnamed_file_path(dir: &[u8], inode: Option<u64>, n: u64) -> Vec<u8> {
    let mut p = dir.strip_suffix(b"/").unwrap_or(dir).to_vec();
    match inode {
        Some(ino) => p.extend_from_slice(format!("/#{ino} (deleted)").as_bytes()),
        None => p.extend_from_slice(format!("/#tmpfile-{n} (deleted)").as_bytes()),
    }
    p
}

/// Whether a path component is the name of a file made without one
/// ([`unnamed_file_path`], or /proc's): `#... (deleted)`.
pub fn is_unnamed_file_name(component: &[u8]) -> bool {
    component.first() == Some(&b'#') && component.ends_with(b" (deleted)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_answer_decides_and_the_name_stands_in_without_one() {
        let chr = |ma, mi| FileStat {
            known: stat_known::MODE,
            mode: mode::S_IFCHR | 0o666,
            rdev: FileStat::makedev(ma, mi),
            ..FileStat::default()
        };
        assert_eq!(FdKind::classify(b"/x", Some(&chr(1, 3))), FdKind::DevNull);
        assert_eq!(
            FdKind::classify(b"/dev/pts/3", Some(&chr(136, 3))),
            FdKind::Tty
        );
        // A container's /dev/null that is not 1:3 is still /dev/null by its name.
        assert_eq!(
            FdKind::classify(b"/dev/null", Some(&chr(10, 1))),
            FdKind::DevNull
        );
        assert_eq!(FdKind::of(&chr(10, 1)), FdKind::Other);
        // A stat answer without its mode says nothing: the name decides.
        let no_mode = FileStat::default();
        assert_eq!(FdKind::classify(b"pipe:[12]", Some(&no_mode)), FdKind::Pipe);
        assert_eq!(FdKind::classify(b"socket:[9]", None), FdKind::Socket);
        assert_eq!(
            FdKind::classify(b"anon_inode:[eventfd]", None),
            FdKind::Other
        );
        assert_eq!(FdKind::classify(b"/etc/passwd", None), FdKind::File);
    }
}
