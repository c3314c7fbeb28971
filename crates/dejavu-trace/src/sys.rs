//! The traced system call set, independent of architecture.
//!
//! `Sys` names a system call by what it does, not by its number: the per-architecture
//! number tables live in the capture backends (see `dejavu-capture`'s `arch` module).
//! The discriminants are part of the trace format: never renumber, only append.

use std::fmt;

macro_rules! syscalls {
    ($( $variant:ident = $id:literal => $name:literal, )*) => {
        /// A system call in dejavu's traced set. The numeric value is stored in traces.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
        #[repr(u16)]
        pub enum Sys {
            $( #[doc = concat!("`", $name, "`")] $variant = $id, )*
        }

        impl Sys {
            /// Every traced system call, in trace-id order.
            pub const ALL: &'static [Sys] = &[ $( Sys::$variant, )* ];

            /// The name strace and the kernel use for this call.
            pub const fn name(self) -> &'static str {
                match self { $( Sys::$variant => $name, )* }
            }

            /// The inverse of [`Sys::name`].
            pub fn from_name(name: &str) -> Option<Sys> {
                match name { $( $name => Some(Sys::$variant), )* _ => None }
            }

            /// The inverse of `sys as u16`, for trace readers.
            pub const fn from_id(id: u16) -> Option<Sys> {
                match id { $( $id => Some(Sys::$variant), )* _ => None }
            }
        }
    };
}

syscalls! {
    Open = 0 => "open",
    Openat = 1 => "openat",
    Openat2 = 2 => "openat2",
    Creat = 3 => "creat",
    Close = 4 => "close",
    CloseRange = 5 => "close_range",
    Read = 6 => "read",
    Pread64 = 7 => "pread64",
    Readv = 8 => "readv",
    Preadv = 9 => "preadv",
    Preadv2 = 10 => "preadv2",
    Write = 11 => "write",
    Pwrite64 = 12 => "pwrite64",
    Writev = 13 => "writev",
    Pwritev = 14 => "pwritev",
    Pwritev2 = 15 => "pwritev2",
    Lseek = 16 => "lseek",
    Stat = 17 => "stat",
    Lstat = 18 => "lstat",
    Fstat = 19 => "fstat",
    Newfstatat = 20 => "newfstatat",
    Statx = 21 => "statx",
    Access = 22 => "access",
    Faccessat = 23 => "faccessat",
    Faccessat2 = 24 => "faccessat2",
    Readlink = 25 => "readlink",
    Readlinkat = 26 => "readlinkat",
    Getdents64 = 27 => "getdents64",
    Mkdir = 28 => "mkdir",
    Mkdirat = 29 => "mkdirat",
    Rmdir = 30 => "rmdir",
    Unlink = 31 => "unlink",
    Unlinkat = 32 => "unlinkat",
    Rename = 33 => "rename",
    Renameat = 34 => "renameat",
    Renameat2 = 35 => "renameat2",
    Link = 36 => "link",
    Linkat = 37 => "linkat",
    Symlink = 38 => "symlink",
    Symlinkat = 39 => "symlinkat",
    Chmod = 40 => "chmod",
    Fchmod = 41 => "fchmod",
    Fchmodat = 42 => "fchmodat",
    Fchmodat2 = 43 => "fchmodat2",
    Chown = 44 => "chown",
    Fchown = 45 => "fchown",
    Lchown = 46 => "lchown",
    Fchownat = 47 => "fchownat",
    Truncate = 48 => "truncate",
    Ftruncate = 49 => "ftruncate",
    Fsync = 50 => "fsync",
    Fdatasync = 51 => "fdatasync",
    SyncFileRange = 52 => "sync_file_range",
    Dup = 53 => "dup",
    Dup2 = 54 => "dup2",
    Dup3 = 55 => "dup3",
    Fcntl = 56 => "fcntl",
    Pipe = 57 => "pipe",
    Pipe2 = 58 => "pipe2",
    Socket = 59 => "socket",
    Accept = 60 => "accept",
    Accept4 = 61 => "accept4",
    Connect = 62 => "connect",
    Sendfile = 63 => "sendfile",
    CopyFileRange = 64 => "copy_file_range",
    Splice = 65 => "splice",
    Utimensat = 66 => "utimensat",
    Chdir = 67 => "chdir",
    Fchdir = 68 => "fchdir",
    Execve = 69 => "execve",
    Execveat = 70 => "execveat",
    MemfdCreate = 71 => "memfd_create",
    IoUringSetup = 72 => "io_uring_setup",
    IoUringEnter = 73 => "io_uring_enter",
    Mmap = 74 => "mmap",
}

/// What a call does, coarsely; used for decoding and by analyses that group calls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SysClass {
    /// Creates a file descriptor from a path (open family, creat, memfd_create).
    Open,
    /// Closes descriptors.
    Close,
    /// Reads data through a descriptor.
    Read,
    /// Writes data through a descriptor.
    Write,
    /// Asks about a path or descriptor without changing it (stat family, access, readlink, getdents).
    Lookup,
    /// Changes the namespace or metadata (mkdir, unlink, rename, chmod, truncate, ...).
    Mutate,
    /// Flushes to storage.
    Sync,
    /// Creates or duplicates descriptors without a path (dup, pipe, socket, accept, fcntl).
    Descriptor,
    /// Moves the file position.
    Seek,
    /// Changes the working directory.
    Cwd,
    /// Runs a program.
    Exec,
    /// Counted but not decoded (io_uring).
    Undecoded,
}

impl Sys {
    /// The call's coarse class.
    pub const fn class(self) -> SysClass {
        use Sys::*;
        match self {
            Open | Openat | Openat2 | Creat | MemfdCreate => SysClass::Open,
            Close | CloseRange => SysClass::Close,
            // A file-backed mmap reads the file through memory.
            Read | Pread64 | Readv | Preadv | Preadv2 | Mmap => SysClass::Read,
            Write | Pwrite64 | Writev | Pwritev | Pwritev2 | Sendfile | CopyFileRange | Splice => {
                SysClass::Write
            }
            Stat | Lstat | Fstat | Newfstatat | Statx | Access | Faccessat | Faccessat2
            | Readlink | Readlinkat | Getdents64 => SysClass::Lookup,
            Mkdir | Mkdirat | Rmdir | Unlink | Unlinkat | Rename | Renameat | Renameat2 | Link
            | Linkat | Symlink | Symlinkat | Chmod | Fchmod | Fchmodat | Fchmodat2 | Chown
            | Fchown | Lchown | Fchownat | Truncate | Ftruncate | Utimensat => SysClass::Mutate,
            Fsync | Fdatasync | SyncFileRange => SysClass::Sync,
            Dup | Dup2 | Dup3 | Fcntl | Pipe | Pipe2 | Socket | Accept | Accept4 | Connect => {
                SysClass::Descriptor
            }
            Lseek => SysClass::Seek,
            Chdir | Fchdir => SysClass::Cwd,
            Execve | Execveat => SysClass::Exec,
            IoUringSetup | IoUringEnter => SysClass::Undecoded,
        }
    }
}

impl fmt::Display for Sys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_dense_and_round_trip() {
        for (i, s) in Sys::ALL.iter().enumerate() {
            assert_eq!(*s as u16 as usize, i, "{s} is out of order");
            assert_eq!(Sys::from_id(*s as u16), Some(*s));
            assert_eq!(Sys::from_name(s.name()), Some(*s));
        }
        assert_eq!(Sys::from_id(Sys::ALL.len() as u16), None);
        assert_eq!(Sys::from_name("mmap"), Some(Sys::Mmap));
    }
}
