//! What another backend copied out of a call at its exit, for the shared decoder to read
//! instead of the live process: the eBPF backend cannot stop the program, so its kernel
//! half copies the strings and buffers each call used (and the identity of each new
//! descriptor's file) and the decoder reads them from here. A read the copy does not
//! cover fails as unmapped memory would, so the decoder marks the call as it marks any
//! unreadable argument. Why the decoder is shared: docs/ebpf-backend.md.

use dejavu_trace::FileStat;
use std::io;
use std::ops::Range;

/// Facts about the file behind a new descriptor, read from the kernel's file and inode.
#[derive(Debug, Clone, Copy)]
pub struct FdFacts {
    /// Its identity, as stat(2) on the descriptor would answer.
    pub stat: FileStat,
    /// The open file's flags (O_APPEND...).
    pub flags: u32,
}

#[derive(Debug, Clone)]
struct Blob {
    addr: u64,
    cstr: bool,
    fault: bool,
    range: Range<usize>,
}

/// One call's copied memory and descriptor facts.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    blobs: Vec<Blob>,
    data: Vec<u8>,
    fds: Vec<(i32, FdFacts)>,
    argv: Option<Vec<u8>>,
}

fn efault() -> io::Error {
    io::Error::from_raw_os_error(libc::EFAULT)
}

impl Snapshot {
    /// Empties it for the next call (keeps its allocations).
    pub fn clear(&mut self) {
        self.blobs.clear();
        self.data.clear();
        self.fds.clear();
        self.argv = None;
    }

    fn push(&mut self, addr: u64, bytes: &[u8], cstr: bool, fault: bool) {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.blobs.push(Blob {
            addr,
            cstr,
            fault,
            range: start..self.data.len(),
        });
    }

    /// `bytes` of memory at `addr`; `fault`: the copy failed (unmapped memory).
    pub fn add_mem(&mut self, addr: u64, bytes: &[u8], fault: bool) {
        self.push(addr, bytes, false, fault);
    }

    /// The NUL-terminated string at `addr` (without its NUL); `fault` as for `add_mem`.
    pub fn add_str(&mut self, addr: u64, bytes: &[u8], fault: bool) {
        self.push(addr, bytes, true, fault);
    }

    /// The file behind descriptor `fd` after the call.
    pub fn add_fd(&mut self, fd: i32, facts: FdFacts) {
        self.fds.push((fd, facts));
    }

    /// execve's argument list, NUL-joined (read by the kernel half, pointer by pointer).
    pub fn set_argv(&mut self, argv: &[u8]) {
        self.argv = Some(argv.to_vec());
    }

    /// The argument list set by `set_argv`.
    pub fn argv(&self) -> Option<&[u8]> {
        self.argv.as_deref()
    }

    /// The facts about descriptor `fd`, if the call's copy has them.
    pub fn fd(&self, fd: i32) -> Option<FdFacts> {
        self.fds.iter().find(|(f, _)| *f == fd).map(|&(_, f)| f)
    }

    /// Like `os::read_mem`: the copied bytes at `addr`, as many as `buf` holds and
    /// the copy has; an address no copy covers is unmapped memory.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        for b in &self.blobs {
            let len = (b.range.end - b.range.start) as u64;
            if b.fault || addr < b.addr || addr - b.addr >= len.max(1) {
                continue;
            }
            let from = b.range.start + (addr - b.addr) as usize;
            let n = buf.len().min(b.range.end - from);
            buf[..n].copy_from_slice(&self.data[from..from + n]);
            return Ok(n);
        }
        Err(efault())
    }

    /// Like `os::read_mem_gather`: several ranges, in order, into one buffer.
    pub fn read_gather(&self, ranges: &[(u64, usize)], buf: &mut Vec<u8>) -> io::Result<usize> {
        buf.clear();
        let mut chunk = Vec::new();
        for &(addr, len) in ranges {
            if len == 0 {
                continue;
            }
            chunk.clear();
            chunk.resize(len, 0);
            match self.read(addr, &mut chunk) {
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if n < len {
                        break;
                    }
                }
                Err(e) if buf.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(buf.len())
    }

    /// Like `os::read_cstr`: the string copied at `addr`, at most `max` bytes;
    /// Ok(true) when it ended within them.
    pub fn cstr(&self, addr: u64, max: usize, out: &mut Vec<u8>) -> io::Result<bool> {
        out.clear();
        let b = self
            .blobs
            .iter()
            .find(|b| b.cstr && b.addr == addr)
            .ok_or_else(efault)?;
        if b.fault {
            return Err(efault());
        }
        let s = &self.data[b.range.clone()];
        out.extend_from_slice(&s[..s.len().min(max)]);
        Ok(s.len() < max)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reads_inside_a_copy_and_fails_outside_it() {
        let mut s = Snapshot::default();
        s.add_mem(0x1000, b"abcdef", false);
        s.add_str(0x2000, b"/etc/passwd", false);
        s.add_str(0x3000, b"", true);
        let mut b = [0u8; 4];
        assert_eq!(s.read(0x1002, &mut b).unwrap(), 4);
        assert_eq!(&b, b"cdef");
        assert_eq!(s.read(0x1004, &mut b).unwrap(), 2);
        assert!(s.read(0x1006, &mut b).is_err());
        assert!(s.read(0x0fff, &mut b).is_err());
        let mut out = Vec::new();
        assert!(s.cstr(0x2000, 4096, &mut out).unwrap());
        assert_eq!(out, b"/etc/passwd");
        assert!(!s.cstr(0x2000, 4, &mut out).unwrap());
        assert_eq!(out, b"/etc");
        assert!(s.cstr(0x3000, 4096, &mut out).is_err());
        assert!(s.cstr(0x2001, 4096, &mut out).is_err());
        let mut g = Vec::new();
        s.read_gather(&[(0x1000, 2), (0x1004, 2)], &mut g).unwrap();
        assert_eq!(g, b"abef");
    }
}
