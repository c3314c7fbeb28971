//! How a call reads a file through a descriptor (read, pread, readv, preadv, sendfile's
//! and copy_file_range's input, a file-backed mmap), and whether the reads of one
//! open/close cycle covered the whole file. Shared by reread-unchanged and
//! open-close-churn.

use dejavu_replay::Fd;
use dejavu_trace::{Sys, Syscall};

const O_ACCMODE: u64 = 3;
const PROT_WRITE: u64 = 2;
const MAP_TYPE: u64 = 3;
const MAP_PRIVATE: u64 = 2;

/// One read through a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read {
    /// The descriptor read from.
    pub fd: i32,
    /// Where: `None` at the file position (which then moves by `bytes`), `Some(offset)` at
    /// an offset (the position stays).
    pub at: Option<u64>,
    /// Bytes read; for a mapping, the length mapped.
    pub bytes: u64,
    /// A mapping: the pages are read when touched, the length may run past the end of the
    /// file, and no call reads 0 bytes at the end.
    pub mapped: bool,
    /// The call carries the bytes to another descriptor (sendfile, copy_file_range): with
    /// the content in memory a write would still be needed, so the call is not one a cache
    /// removes.
    pub transfer: bool,
}

/// What a call does to the descriptor it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// A read whose range is known.
    Known(Read),
    /// A read of this descriptor whose range cannot be told (it failed, or its offset was
    /// not recorded): the cycle's coverage is unknown from here on.
    Unknown(i32),
}

/// Calls that can read a file through a descriptor (for `Detector::wants`).
pub fn is_read_call(sys: Sys) -> bool {
    use Sys::*;
    matches!(
        sys,
        Read | Pread64 | Readv | Preadv | Preadv2 | Sendfile | CopyFileRange | Mmap
    )
}

/// The read `s` makes through a descriptor, if it is one.
///
/// `opened_readonly`: the descriptor was opened O_RDONLY. A mapping counts as a read when
/// it cannot write the file: the descriptor is read-only (a shared writable mapping needs
/// O_RDWR), the mapping is private, or its protection has no PROT_WRITE. A mapping
/// recorded without its flags and protection (an strace import) on a read-write
/// descriptor is not known to be a read.
pub fn read_of(s: &Syscall, opened_readonly: bool) -> Option<Reads> {
    let (fd, transfer) = match s.sys {
        Sys::Read | Sys::Pread64 | Sys::Readv | Sys::Preadv | Sys::Preadv2 | Sys::Mmap => {
            (s.fd?, false)
        }
        // fd is the output, fd2 the input.
        Sys::Sendfile | Sys::CopyFileRange => (s.fd2?, true),
        _ => return None,
    };
    if s.ret < 0 {
        return Some(Reads::Unknown(fd));
    }
    let n = s.ret as u64;
    let known = |at: Option<u64>, bytes: u64, mapped: bool| {
        Some(Reads::Known(Read {
            fd,
            at,
            bytes,
            mapped,
            transfer,
        }))
    };
    match s.sys {
        Sys::Read | Sys::Readv => known(None, n, false),
        // preadv2 with offset -1 reads at the file position, like readv.
        Sys::Preadv2 if s.offset == Some(-1) => known(None, n, false),
        Sys::Pread64 | Sys::Preadv | Sys::Preadv2 => match s.offset {
            Some(off) if off >= 0 => known(Some(off as u64), n, false),
            _ => Some(Reads::Unknown(fd)),
        },
        // sendfile with an offset reads there and leaves the position; without, it reads
        // at the position.
        Sys::Sendfile => match s.offset {
            Some(off) if off >= 0 => known(Some(off as u64), n, false),
            Some(_) => Some(Reads::Unknown(fd)),
            None => known(None, n, false),
        },
        // The trace does not record copy_file_range's input offset: it is taken to read at
        // the file position, as callers that copy whole files (cp, shutil) use it.
        Sys::CopyFileRange => known(None, n, false),
        Sys::Mmap => {
            let writable = s.aux & PROT_WRITE != 0;
            let private = s.flags & MAP_TYPE == MAP_PRIVATE;
            let described = s.aux != 0 || s.flags != 0;
            let read_only = opened_readonly || private || (described && !writable);
            match s.offset {
                Some(off) if off >= 0 && read_only => known(Some(off as u64), s.count, true),
                _ => Some(Reads::Unknown(fd)),
            }
        }
        _ => None,
    }
}

/// Whether a descriptor still holds the open file its open/close cycle began with:
/// `open_id` is the cycle's (taken from `seen` the first time), `seen` what replay says the
/// descriptor is now. False when the number was reused (dup2 onto it, close_range, exec)
/// or replay no longer knows it: the cycle ends there. (reread-unchanged and whatif's
/// content cache follow cycles alike.)
pub fn same_open_file(open_id: &mut Option<u64>, seen: Option<Fd>) -> bool {
    match (*open_id, seen) {
        (_, None) => false,
        (None, Some(f)) => {
            *open_id = Some(f.open_id);
            true
        }
        (Some(id), Some(f)) => id == f.open_id,
    }
}

/// Whether open flags open read-only.
pub fn opens_readonly(flags: u64) -> bool {
    flags & O_ACCMODE == 0
}

/// How far one open/close cycle read its file: contiguous bytes from offset 0, the file
/// position, and whether the whole file was read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Coverage {
    /// Contiguous bytes read from offset 0.
    pub covered: u64,
    /// The file position.
    pub pos: u64,
    /// The reads reached the end of the file (a read returned 0, or the bytes covered
    /// reached the size the cycle knew).
    pub complete: bool,
    /// A read jumped past what was covered (random access), or a read's range is unknown.
    pub broken: bool,
}

impl Coverage {
    /// Applies one read; `size` is the file's size if the cycle knows it.
    pub fn read(&mut self, r: &Read, size: Option<u64>) {
        let at = r.at.unwrap_or(self.pos);
        let mut n = r.bytes;
        if r.mapped {
            // A mapping past the end of the file reads nothing there; and without the size,
            // how much of the length is file is unknown.
            match size {
                Some(size) => n = n.min(size.saturating_sub(at)),
                None => {
                    self.broken = true;
                    return;
                }
            }
            if n == 0 {
                return;
            }
        } else if r.at.is_none() {
            self.pos += n;
        }
        if at <= self.covered {
            // Contiguous with what is covered (re-reading covered bytes is harmless: a
            // loader reads the header, then maps the whole file).
            self.covered = self.covered.max(at + n);
            if (n == 0 && at == self.covered) || size.is_some_and(|size| self.covered >= size) {
                self.complete = true;
            }
        } else {
            // A read beyond what is covered (a trailer or an index first): random access,
            // not a read of the whole file.
            self.broken = true;
        }
    }

    /// A full read: complete, and nothing jumped.
    pub fn full(&self) -> bool {
        self.complete && !self.broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(sys: Sys, f: impl FnOnce(&mut Syscall)) -> Syscall {
        let mut s = Syscall::new(0, 1, 1, sys);
        s.fd = Some(3);
        f(&mut s);
        s
    }

    fn known(r: Option<Reads>) -> Read {
        match r {
            Some(Reads::Known(r)) => r,
            other => panic!("not a known read: {other:?}"),
        }
    }

    #[test]
    fn every_read_family_call_names_its_input_descriptor_and_range() {
        let r = known(read_of(&call(Sys::Read, |s| s.ret = 10), true));
        assert_eq!((r.fd, r.at, r.bytes, r.transfer), (3, None, 10, false));
        let r = known(read_of(
            &call(Sys::Pread64, |s| {
                s.offset = Some(4096);
                s.ret = 5;
            }),
            true,
        ));
        assert_eq!((r.at, r.bytes), (Some(4096), 5));
        let r = known(read_of(
            &call(Sys::Preadv2, |s| {
                s.offset = Some(-1);
                s.ret = 5;
            }),
            true,
        ));
        assert_eq!(r.at, None, "preadv2 at -1 reads at the position");
        let r = known(read_of(
            &call(Sys::Sendfile, |s| {
                s.fd = Some(9); // the socket
                s.fd2 = Some(4);
                s.ret = 100;
            }),
            true,
        ));
        assert_eq!((r.fd, r.at, r.bytes, r.transfer), (4, None, 100, true));
        let r = known(read_of(
            &call(Sys::CopyFileRange, |s| {
                s.fd = Some(9);
                s.fd2 = Some(4);
                s.ret = 100;
            }),
            true,
        ));
        assert_eq!((r.fd, r.transfer), (4, true));
        assert_eq!(
            read_of(&call(Sys::Read, |s| s.ret = -5), true),
            Some(Reads::Unknown(3))
        );
        assert_eq!(read_of(&call(Sys::Write, |s| s.ret = 5), true), None);
    }

    #[test]
    fn a_mapping_is_a_read_only_when_it_cannot_write_the_file() {
        let map = |flags: u64, prot: u64| {
            call(Sys::Mmap, |s| {
                s.offset = Some(0);
                s.count = 131;
                s.ret = 0x7f00_0000_0000;
                s.flags = flags;
                s.aux = prot;
            })
        };
        // An strace import: no flags, no protection.
        let r = known(read_of(&map(0, 0), true));
        assert_eq!((r.at, r.bytes, r.mapped), (Some(0), 131, true));
        assert_eq!(read_of(&map(0, 0), false), Some(Reads::Unknown(3)));
        // MAP_PRIVATE on a read-write descriptor: copy-on-write, the file is not written.
        assert!(matches!(read_of(&map(2, 3), false), Some(Reads::Known(_))));
        // MAP_SHARED, PROT_READ|PROT_WRITE on a read-write descriptor: writes the file.
        assert_eq!(read_of(&map(1, 3), false), Some(Reads::Unknown(3)));
        // MAP_SHARED, PROT_READ.
        assert!(matches!(read_of(&map(1, 1), false), Some(Reads::Known(_))));
    }

    #[test]
    fn coverage_of_reads_and_mappings() {
        let rd = |n| Read {
            fd: 3,
            at: None,
            bytes: n,
            mapped: false,
            transfer: false,
        };
        let mut c = Coverage::default();
        c.read(&rd(100), None);
        assert!(!c.full());
        c.read(&rd(0), None);
        assert!(c.full(), "a read of 0 bytes at the end");
        let mut c = Coverage::default();
        c.read(&rd(100), Some(100));
        assert!(c.full(), "the size reached");
        let map = |at, n| Read {
            fd: 3,
            at: Some(at),
            bytes: n,
            mapped: true,
            transfer: false,
        };
        let mut c = Coverage::default();
        c.read(&map(0, 4096), Some(131));
        assert!(c.full() && c.covered == 131, "a page-rounded mapping");
        let mut c = Coverage::default();
        c.read(&map(0, 4096), None);
        assert!(!c.full(), "without the size a mapping says nothing");
        let mut c = Coverage::default();
        c.read(&map(4096, 100), Some(4196));
        assert!(!c.full(), "a mapping of the tail only");
        let mut c = Coverage::default();
        c.read(&rd(832), Some(20_000));
        c.read(&map(0, 24_576), Some(20_000));
        assert!(
            c.full(),
            "a loader's header read, then the whole file mapped"
        );
    }
}
