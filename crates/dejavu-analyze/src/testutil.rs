//! Builders for small synthetic traces, shared by the unit tests.

// A failed unwrap is a failed test, with the backtrace to find it.
#![allow(clippy::unwrap_used)]

use dejavu_trace::*;

/// A trace being written to memory.
pub struct TestTrace {
    pub w: TraceWriter<Vec<u8>>,
}

pub fn meta(command: &[&str]) -> Meta {
    Meta {
        producer: "dejavu-analyze tests".into(),
        backend: "synthetic".into(),
        arch: "x86_64".into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        cwd: "/app".into(),
        ..Meta::default()
    }
}

/// A full stat answer for a regular file of `size` bytes.
pub fn file_stat(ino: u64, size: i64) -> FileStat {
    FileStat {
        known: stat_known::ALL,
        dev: FileStat::makedev(8, 1),
        ino,
        mode: mode::S_IFREG | 0o644,
        nlink: 1,
        uid: 1000,
        gid: 1000,
        rdev: 0,
        size,
        mtime_ns: 1_700_000_000_000_000_000 + ino as i64,
        ctime_ns: 1_700_000_000_000_000_000 + ino as i64,
    }
}

impl TestTrace {
    pub fn new(meta: &Meta) -> TestTrace {
        // Small blocks, so tests cross block boundaries (string ids, deltas) as real
        // traces do.
        let opts = WriterOptions {
            block_bytes: 512,
            ..WriterOptions::default()
        };
        TestTrace {
            w: TraceWriter::new(Vec::new(), meta, opts).unwrap(),
        }
    }

    pub fn s(&mut self, bytes: impl AsRef<[u8]>) -> StrId {
        self.w.intern(bytes.as_ref())
    }

    /// A finished call naming `path` (when not empty), returning `ret` after `dur` ns.
    pub fn call(&mut self, ts: u64, pid: u32, sys: Sys, path: &str, ret: i64, dur: u64) -> Syscall {
        let mut s = Syscall::new(ts, pid, pid, sys);
        s.ret = ret;
        s.dur = dur;
        if !path.is_empty() {
            s.path = Some(self.s(path));
        }
        s
    }

    pub fn push(&mut self, rec: Record) {
        self.w.push(&rec).unwrap();
    }

    pub fn sys(&mut self, s: Syscall) {
        self.push(Record::Syscall(s));
    }

    pub fn finish(self, end: End) -> Vec<u8> {
        self.w.finish(end).unwrap()
    }

    /// The trace as if the recorder was killed after its last complete block.
    pub fn cut_off(mut self) -> Vec<u8> {
        self.w.flush_block().unwrap();
        let mut bytes = self.w.finish(End::default()).unwrap();
        // Drop the end block: the last "DVBK" header and its payload.
        let at = bytes.windows(4).rposition(|w| w == b"DVBK").unwrap();
        bytes.truncate(at);
        bytes
    }
}

pub fn reader(bytes: &[u8]) -> TraceReader<&[u8]> {
    TraceReader::new(bytes).unwrap()
}
