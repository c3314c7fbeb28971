//! Builds small synthetic traces for detector unit tests: each helper appends one call
//! with plausible fields, 1 µs apart, each lasting 500 ns.

use crate::{analyze, Analysis, Config};
use dejavu_trace::*;

/// A trace under construction.
pub struct TraceBuilder {
    w: TraceWriter<Vec<u8>>,
    ts: u64,
    /// The process the next calls belong to.
    pub pid: u32,
    /// The thread (defaults to the pid).
    pub tid: u32,
    /// The stack of the next calls that set none.
    pub stack: Option<StackId>,
}

impl std::fmt::Debug for TraceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceBuilder")
    }
}

impl Default for TraceBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// A stat answer for a regular file with this inode, size and mtime.
pub fn file(ino: u64, size: i64, mtime_ns: i64) -> FileStat {
    FileStat {
        known: stat_known::ALL,
        dev: 0x801,
        ino,
        mode: mode::S_IFREG | 0o644,
        nlink: 1,
        size,
        mtime_ns,
        ctime_ns: mtime_ns,
        ..FileStat::default()
    }
}

/// A stat answer for a directory.
pub fn dir(ino: u64) -> FileStat {
    FileStat {
        mode: mode::S_IFDIR | 0o755,
        ..file(ino, 4096, 1)
    }
}

/// A character device answer (major, minor): (1,3) is /dev/null, (136,0) a pty.
pub fn chardev(major: u32, minor: u32) -> FileStat {
    FileStat {
        mode: mode::S_IFCHR | 0o666,
        rdev: FileStat::makedev(major, minor),
        ..file(99, 0, 1)
    }
}

impl TraceBuilder {
    /// A trace of process 100 running `test`.
    pub fn new() -> Self {
        Self::with_meta(Meta {
            producer: "testkit".into(),
            backend: "synthetic".into(),
            command: vec!["test".into()],
            ..Meta::default()
        })
    }

    /// A trace of process 100 running `test`, started in directory `cwd`.
    pub fn in_dir(cwd: &str) -> Self {
        Self::with_meta(Meta {
            producer: "testkit".into(),
            backend: "synthetic".into(),
            command: vec!["test".into()],
            cwd: cwd.into(),
            ..Meta::default()
        })
    }

    /// A trace of process 100 running `test`, started with environment `env` (the trace's
    /// `env`: `NAME=VALUE`).
    pub fn with_env(env: &[&str]) -> Self {
        Self::with_meta(Meta {
            producer: "testkit".into(),
            backend: "synthetic".into(),
            command: vec!["test".into()],
            env: env.iter().map(|e| e.to_string()).collect(),
            ..Meta::default()
        })
    }

    /// A trace of process 100, already running `test`, that dejavu attached to (-p).
    pub fn attached() -> Self {
        Self::with_meta(Meta {
            producer: "testkit".into(),
            backend: "synthetic".into(),
            command: vec!["test".into()],
            attached: vec![100],
            ..Meta::default()
        })
    }

    fn with_meta(meta: Meta) -> Self {
        let mut w = TraceWriter::new(Vec::new(), &meta, WriterOptions::default())
            .expect("in-memory writer");
        w.push(&Record::Spawn(Spawn {
            ts: 0,
            parent_pid: 0,
            parent_tid: 0,
            pid: 100,
            tid: 100,
            clone_flags: 0,
        }))
        .expect("push");
        TraceBuilder {
            w,
            ts: 1000,
            pid: 100,
            tid: 100,
            stack: None,
        }
    }

    /// Interns a string.
    pub fn s(&mut self, b: &str) -> StrId {
        self.w.intern(b.as_bytes())
    }

    /// Interns a stat answer.
    pub fn st(&mut self, st: FileStat) -> StatId {
        self.w.intern_stat(&st)
    }

    /// Interns a stack of (kind, function, file, line) frames, innermost first.
    pub fn stack(&mut self, frames: &[(FrameKind, &str, &str, u32)]) -> StackId {
        let fs: Vec<Frame> = frames
            .iter()
            .map(|&(kind, function, file, line)| Frame {
                kind,
                function: (!function.is_empty()).then(|| self.w.intern(function.as_bytes())),
                file: (!file.is_empty()).then(|| self.w.intern(file.as_bytes())),
                line,
                column: 0,
                module: None,
                addr: 0,
            })
            .collect();
        self.w.intern_stack(&fs)
    }

    /// Interns a stack of native frames without source files, (function, module) each,
    /// innermost first (a release build without line tables).
    pub fn native_stack(&mut self, frames: &[(&str, &str)]) -> StackId {
        let fs: Vec<Frame> = frames
            .iter()
            .enumerate()
            .map(|(i, &(function, module))| Frame {
                kind: FrameKind::Native,
                function: Some(self.w.intern(function.as_bytes())),
                file: None,
                line: 0,
                column: 0,
                module: Some(self.w.intern(module.as_bytes())),
                addr: 0x1000 + i as u64 * 0x10,
            })
            .collect();
        self.w.intern_stack(&fs)
    }

    /// Appends any record.
    pub fn push(&mut self, rec: Record) -> &mut Self {
        self.w.push(&rec).expect("push");
        self
    }

    /// The process's language agent says the runtime's start-up is over (`AgentReady`).
    pub fn ready(&mut self) -> &mut Self {
        let m = dejavu_trace::Mark {
            ts: self.ts,
            pid: self.pid,
            tid: self.tid,
            kind: dejavu_trace::MarkKind::AgentReady,
        };
        self.ts += 1000;
        self.push(Record::Mark(m))
    }

    /// Advances the clock by `ns`.
    pub fn wait(&mut self, ns: u64) -> &mut Self {
        self.ts += ns;
        self
    }

    /// Appends a call built by `f` from a blank one of `sys`.
    pub fn call(&mut self, sys: Sys, f: impl FnOnce(&mut Syscall, &mut Self)) -> &mut Self {
        let mut c = Syscall::new(self.ts, self.pid, self.tid, sys);
        c.dur = 500;
        c.stack = self.stack;
        f(&mut c, self);
        self.ts += 1000;
        self.w.push(&Record::Syscall(c)).expect("push");
        self
    }

    /// stat(path): `Ok(answer)` or `Err(errno)`.
    pub fn stat(&mut self, path: &str, res: Result<FileStat, i32>) -> &mut Self {
        self.call(Sys::Newfstatat, |c, b| {
            c.path = Some(b.s(path));
            match res {
                Ok(st) => c.stat = Some(b.st(st)),
                Err(e) => c.ret = -(e as i64),
            }
        })
    }

    /// access(path, mode) with result `ret`.
    pub fn access(&mut self, path: &str, mode: u32, ret: i64) -> &mut Self {
        self.call(Sys::Access, |c, b| {
            c.path = Some(b.s(path));
            c.mode = mode;
            c.ret = ret;
        })
    }

    /// openat(path, flags) returning `ret` (an fd or -errno), opened file `st`.
    pub fn open(&mut self, path: &str, flags: u64, ret: i64, st: Option<FileStat>) -> &mut Self {
        self.call(Sys::Openat, |c, b| {
            c.path = Some(b.s(path));
            c.flags = flags;
            c.ret = ret;
            c.stat = st.map(|s| b.st(s));
        })
    }

    /// close(fd) of `path`.
    pub fn close(&mut self, fd: i32, path: &str) -> &mut Self {
        self.call(Sys::Close, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
        })
    }

    /// write(fd, payload) of `path`, all bytes written, with its fingerprint (as the
    /// backends record every write); the bytes are recorded when `keep` (as for the
    /// standard streams, terminals, pipes, /dev/null, append-mode files).
    pub fn write(&mut self, fd: i32, path: &str, payload: &str, keep: bool) -> &mut Self {
        self.call(Sys::Write, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
            c.count = payload.len() as u64;
            c.ret = payload.len() as i64;
            c.fingerprint = Some(dejavu_trace::mask::fingerprint(payload.as_bytes()));
            if keep {
                c.payload = Some(b.s(payload));
            }
        })
    }

    /// read(fd) of `path` returning `n` bytes (0 at end of file).
    pub fn read(&mut self, fd: i32, path: &str, count: u64, n: i64) -> &mut Self {
        self.call(Sys::Read, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
            c.count = count;
            c.ret = n;
        })
    }

    /// mkdir(path) with result `ret` (0 or -17 for EEXIST).
    pub fn mkdir(&mut self, path: &str, ret: i64) -> &mut Self {
        self.call(Sys::Mkdir, |c, b| {
            c.path = Some(b.s(path));
            c.mode = 0o755;
            c.ret = ret;
        })
    }

    /// A new process `child` forked by the current one.
    pub fn fork(&mut self, child: u32) -> &mut Self {
        let (ts, pid, tid) = (self.ts, self.pid, self.tid);
        self.push(Record::Spawn(Spawn {
            ts,
            parent_pid: pid,
            parent_tid: tid,
            pid: child,
            tid: child,
            clone_flags: 17,
        }))
    }

    /// The current process execs `exe` with `argv`.
    pub fn exec(&mut self, exe: &str, argv: &[&str]) -> &mut Self {
        let (ts, pid, tid) = (self.ts, self.pid, self.tid);
        let exe_id = self.s(exe);
        let argv_id = self.s(&argv.join("\0"));
        self.push(Record::Exec(Exec {
            ts,
            pid,
            tid,
            exe: exe_id,
            argv: argv_id,
        }))
    }

    /// The trace's bytes.
    pub fn finish(self) -> Vec<u8> {
        let ts = self.ts;
        self.w
            .finish(End {
                end_ts: ts,
                ..End::default()
            })
            .expect("finish")
    }

    /// Analyzes the trace with `cfg`.
    pub fn analyze_with(self, cfg: &Config) -> Analysis {
        let bytes = self.finish();
        let mut r = TraceReader::new(&bytes[..]).expect("reader");
        analyze(&mut r, cfg, |_| {}).expect("analysis")
    }

    /// Analyzes with `min_calls` 1 and every detector, and returns the findings of
    /// detector `id`.
    pub fn findings(self, id: &str) -> Vec<crate::Finding> {
        let cfg = Config {
            min_calls: 1,
            ..Config::default()
        };
        self.analyze_with(&cfg)
            .findings
            .into_iter()
            .filter(|f| f.detector == id)
            .collect()
    }
}
