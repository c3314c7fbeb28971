//! The trace's Mapping records (docs/trace-format.md, "Mapping"): where each process has
//! a file's code, with the file's identity and GNU build id, so that a module+offset frame
//! can be matched to the build it came from, and a trace symbolized again after the
//! processes (or the machine) are gone.
//!
//! Written only with native stacks on, for what can hold code: the program and its
//! interpreter as the kernel placed them at exec (the native layout, from AT_PHDR and
//! AT_BASE), every mmap of a file with PROT_EXEC, and munmap of a range holding one. Each
//! process's recorded ranges are kept so that a mapping already recorded is not written
//! again and an munmap of memory that held no recorded code writes nothing. Build ids are
//! read once per file (identity and change time), from its note segments only.

use crate::os::Tid;
use crate::recording::Capture;
use dejavu_trace::{Mapping, MappingKind, Record, StrId};
use rustc_hash::FxHashMap;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A recorded range of a process.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Range {
    start: u64,
    end: u64,
    offset: u64,
    path: StrId,
}

/// A file as mapped: its canonical path, identity, build id.
#[derive(Clone, Copy, Debug)]
struct FileInfo {
    path: StrId,
    file: Option<(u64, u64)>,
    build_id: Option<StrId>,
}

/// The mappings recorded so far, per process, and what is known of the files.
#[derive(Debug, Default)]
pub struct CodeMaps {
    procs: FxHashMap<Tid, Vec<Range>>,
    /// By (dev, ino, mtime ns, size): a file rebuilt in place reads again.
    build_ids: FxHashMap<(u64, u64, i64, u64), Option<StrId>>,
    /// Mapping records written.
    pub written: u64,
}

impl CodeMaps {
    /// `child` is a copy of `parent` (fork): it has the same code where it was.
    pub fn forked(&mut self, parent: Tid, child: Tid) {
        if let Some(r) = self.procs.get(&parent).cloned() {
            self.procs.insert(child, r);
        }
    }

    /// `pid` ended: its mappings went with it.
    pub fn exited(&mut self, pid: Tid) {
        self.procs.remove(&pid);
    }
}

/// Removes `start..end` from `ranges`; whether anything was there.
fn cut(ranges: &mut Vec<Range>, start: u64, end: u64) -> bool {
    let before = ranges.len();
    let mut hit = false;
    let mut out = Vec::with_capacity(before + 1);
    for r in ranges.drain(..) {
        if r.end <= start || r.start >= end {
            out.push(r);
            continue;
        }
        hit = true;
        if r.start < start {
            out.push(Range { end: start, ..r });
        }
        if r.end > end {
            out.push(Range {
                offset: r.offset + (end - r.start),
                start: end,
                ..r
            });
        }
    }
    *ranges = out;
    hit
}

impl<W: Write> Capture<W> {
    fn code_file(&mut self, path: &[u8]) -> Option<FileInfo> {
        // By its real path, as /proc/PID/maps and the frames' modules name it.
        let given = Path::new(std::ffi::OsStr::from_bytes(path));
        let (real, meta) = crate::realpath::resolve(given);
        let file = meta.as_ref().map(|m| (m.dev(), m.ino()));
        let build_id = match &meta {
            Some(m) => {
                let key = (
                    m.dev(),
                    m.ino(),
                    m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                    m.size(),
                );
                match self.code_maps.build_ids.get(&key) {
                    Some(&b) => b,
                    None => {
                        let b = crate::stacks::native::build_id(&real).map(|b| self.w.intern(&b));
                        self.code_maps.build_ids.insert(key, b);
                        b
                    }
                }
            }
            None => None,
        };
        Some(FileInfo {
            path: self.w.intern(real.as_os_str().as_bytes()),
            file,
            build_id,
        })
    }

    fn write_map(&mut self, pid: Tid, ts: u64, start: u64, end: u64, offset: u64, f: FileInfo) {
        let ranges = self.code_maps.procs.entry(pid).or_default();
        let r = Range {
            start,
            end,
            offset,
            path: f.path,
        };
        if ranges.contains(&r) {
            return;
        }
        cut(ranges, start, end);
        ranges.push(r);
        self.code_maps.written += 1;
        self.push(Record::Mapping(Mapping {
            ts,
            pid: pid as u32,
            kind: MappingKind::Map,
            start,
            len: end - start,
            offset,
            path: Some(f.path),
            file: f.file,
            build_id: f.build_id,
        }));
    }

    /// `pid` exec'd (its Exec record just written): the program's and its interpreter's
    /// code as the kernel placed them. The backend gave their addresses (AT_PHDR, AT_BASE)
    /// to the native layout already, or they are read from /proc now (ptrace: the process
    /// is stopped at its exec).
    pub fn code_at_exec(&mut self, pid: Tid, exe: &[u8], now: u64) {
        // exec drops every mapping (the reader knows: the Exec record says so).
        self.code_maps.procs.remove(&pid);
        if !self.stacks.enabled() {
            return;
        }
        if self.stacks.exec_code(pid).is_none() {
            if let Some((phdr, base)) = auxv_image(pid) {
                self.stacks.exec_layout(pid, exe, phdr, base);
            }
        }
        let Some(code) = self.stacks.exec_code(pid) else {
            return;
        };
        for (start, end, offset, path) in code {
            if let Some(f) = self.code_file(&path) {
                self.write_map(pid, now, start, end, offset, f);
            }
        }
    }

    /// `pid` was attached to (its Exec record just written): the code it has now, from
    /// /proc/PID/maps (it is stopped, or about to be).
    pub fn code_attached(&mut self, pid: Tid, now: u64) {
        self.code_maps.procs.remove(&pid);
        if !self.stacks.enabled() {
            return;
        }
        for (start, end, offset, path) in crate::stacks::native::Native::proc_code(pid) {
            if let Some(f) = self.code_file(&path) {
                self.write_map(pid, now, start, end, offset, f);
            }
        }
    }

    /// `pid` mapped `len` bytes of `path` from `offset` at `start` with PROT_EXEC.
    pub fn code_mapped(
        &mut self,
        pid: Tid,
        now: u64,
        start: u64,
        len: u64,
        offset: u64,
        path: &[u8],
    ) {
        if !self.stacks.enabled() || len == 0 {
            return;
        }
        let Some(end) = start.checked_add(len).and_then(|e| e.checked_add(4095)) else {
            return;
        };
        if let Some(f) = self.code_file(path) {
            self.write_map(pid, now, start, end & !4095, offset, f);
        }
    }

    /// `pid` unmapped `start..start+len`: an Unmap record if it held recorded code.
    pub fn code_unmapped(&mut self, pid: Tid, now: u64, start: u64, len: u64) {
        if !self.stacks.enabled() || len == 0 {
            return;
        }
        let end = start.saturating_add(len).saturating_add(4095) & !4095;
        let Some(ranges) = self.code_maps.procs.get_mut(&pid) else {
            return;
        };
        if !cut(ranges, start, end) {
            return;
        }
        self.code_maps.written += 1;
        self.push(Record::Mapping(Mapping {
            ts: now,
            pid: pid as u32,
            kind: MappingKind::Unmap,
            start,
            len: end - start,
            offset: 0,
            path: None,
            file: None,
            build_id: None,
        }));
    }
}

/// AT_PHDR and AT_BASE of `pid`'s auxiliary vector, from /proc.
fn auxv_image(pid: Tid) -> Option<(u64, u64)> {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let (mut phdr, mut base) = (None, 0);
    for pair in auxv.chunks_exact(16) {
        let k = u64::from_ne_bytes(pair[..8].try_into().ok()?);
        let v = u64::from_ne_bytes(pair[8..].try_into().ok()?);
        match k {
            3 => phdr = Some(v),
            7 => base = v,
            _ => {}
        }
    }
    Some((phdr?, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_a_range_keeps_what_is_outside_it() {
        let r = |s: u64, e: u64, o: u64| Range {
            start: s,
            end: e,
            offset: o,
            path: StrId(1),
        };
        let mut v = vec![r(0x1000, 0x5000, 0)];
        assert!(!cut(&mut v, 0x6000, 0x7000));
        assert!(cut(&mut v, 0x2000, 0x3000));
        assert_eq!(v, [r(0x1000, 0x2000, 0), r(0x3000, 0x5000, 0x2000)]);
        assert!(cut(&mut v, 0, 0x10000));
        assert!(v.is_empty());
    }
}
