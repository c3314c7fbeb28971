//! The event model every capture backend emits and every analysis reads.
//!
//! Nothing backend-specific lives here: no registers, no strace text, no BPF structs.
//! Byte strings (paths, command lines, payloads) and stat answers are interned by the
//! trace writer and referenced by id, so a record is small and `Copy`.

use crate::sys::Sys;
use serde::{Deserialize, Serialize};

/// An interned byte string: a path, a NUL-separated argv, a payload prefix.
///
/// Ids with the high bit set are *block-local* (see [`StrId::is_local`]): the writer
/// deduplicates payloads only within a block so that neither it nor a reader keeps every
/// distinct payload of a long recording in memory. A block-local id is valid while the
/// record that carries it is being processed, and two block-local ids are only comparable
/// within one block: compare payload bytes, never payload ids.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct StrId(pub u32);

impl StrId {
    /// The bit that marks a block-local id.
    pub const LOCAL: u32 = 1 << 31;

    /// A block-local id, valid only within the block that defines it.
    pub fn is_local(self) -> bool {
        self.0 & Self::LOCAL != 0
    }
}

/// An interned stat answer ([`FileStat`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct StatId(pub u32);

/// An interned call stack ([`Frame`]s, innermost first).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct StackId(pub u32);

/// Where a frame comes from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum FrameKind {
    /// Machine code: C, C++, Rust, Go, or a runtime's own native code.
    Native = 0,
    /// A JavaScript function (Node.js agent).
    Js = 1,
    /// A Python function (Python agent).
    Python = 2,
}

impl FrameKind {
    /// Inverse of `as u8`.
    pub fn from_u8(v: u8) -> Option<FrameKind> {
        Some(match v {
            0 => FrameKind::Native,
            1 => FrameKind::Js,
            2 => FrameKind::Python,
            _ => return None,
        })
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Native => "native",
            FrameKind::Js => "js",
            FrameKind::Python => "python",
        }
    }
}

/// One frame of a call stack. Strings are trace strings (never block-local).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Frame {
    /// Native, JavaScript or Python.
    pub kind: FrameKind,
    /// Function name (demangled), when known.
    pub function: Option<StrId>,
    /// Source file, when known (absolute, or as the runtime reports it).
    pub file: Option<StrId>,
    /// Source line (1-based); 0 when unknown.
    pub line: u32,
    /// Source column (1-based); 0 when unknown.
    pub column: u32,
    /// Native frames: the executable or shared object; else unset.
    pub module: Option<StrId>,
    /// Native frames: the instruction address, relative to the module's load address
    /// (file offset space), so it is stable across runs; else 0.
    pub addr: u64,
}

/// The name the recorder gives a native function its file has no symbol for, by where it
/// starts (its address in the file's own address space, from the file's unwind tables, as
/// `objdump --start-address` takes it): `sub_1c1500`, as disassemblers name such functions.
/// One name for all of a function's addresses makes its calls one call site.
pub fn unnamed_function(start: u64) -> String {
    format!("sub_{start:x}")
}

/// Whether a native frame's function name is one [`unnamed_function`] made (a stripped
/// file's), which names where the function starts, not what it is: profiles keep such a
/// frame's own address for a symbolizer.
pub fn is_unnamed_function(name: &[u8]) -> bool {
    name.strip_prefix(b"sub_")
        .is_some_and(|h| !h.is_empty() && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
}

/// Whether a native module (path or file name) is the C or C++ runtime or the dynamic
/// loader: libc, libm, libpthread, libdl, librt, libstdc++, libgcc_s, ld-linux, the
/// vDSO. Their frames are plumbing between the program and the kernel: reports never
/// pick one as a call site, and the recorder names them from their symbol tables
/// without loading their separate debug files' line tables.
pub fn is_runtime_module(module: &[u8]) -> bool {
    let base = module.rsplit(|&c| c == b'/').next().unwrap_or(module);
    const RUNTIME: &[&[u8]] = &[
        b"libc.so",
        b"libc-",
        b"ld-linux",
        b"ld-2.",
        b"libpthread",
        b"libstdc++",
        b"libgcc_s",
        b"libm.so",
        b"libm-",
        b"linux-vdso",
        b"libdl",
        b"librt",
    ];
    RUNTIME.iter().any(|p| base.starts_with(p))
}

/// One thing that happened in the traced program, in the order the backend saw it end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Record {
    /// A traced system call, with its result.
    Syscall(Syscall),
    /// A new process or thread.
    Spawn(Spawn),
    /// A successful exec: the process now runs a new program.
    Exec(Exec),
    /// A thread or process ended.
    Exit(Exit),
    /// A signal was delivered to the program.
    Signal(Signal),
    /// The backend knows it lost events here.
    Lost(Lost),
    /// A runtime said where it stands (a language agent loaded, the main module ran).
    Mark(Mark),
    /// A file mapped into a process where it can run as code, or such a range unmapped
    /// (format 2.1: kept in mapping blocks beside the data blocks).
    Mapping(Mapping),
}

impl Record {
    /// Time of the record in ns since the trace started (entry time for syscalls).
    pub fn ts(&self) -> u64 {
        match self {
            Record::Syscall(s) => s.ts,
            Record::Spawn(s) => s.ts,
            Record::Exec(e) => e.ts,
            Record::Exit(e) => e.ts,
            Record::Signal(s) => s.ts,
            Record::Lost(l) => l.ts,
            Record::Mark(m) => m.ts,
            Record::Mapping(m) => m.ts,
        }
    }
}

/// Bits of [`Syscall::ev`].
pub mod ev {
    /// The call never returned while traced (thread exited, exec replaced it, trace ended,
    /// or the tracer detached); `ret` and `dur` are meaningless.
    pub const UNFINISHED: u16 = 1 << 0;
    /// The backend counted this call but did not decode its arguments (io_uring).
    pub const UNDECODED: u16 = 1 << 1;
    /// The payload holds only a prefix of the bytes the call transferred.
    pub const PAYLOAD_TRUNCATED: u16 = 1 << 2;
    /// `path` was taken from the descriptor table, not from an argument of the call.
    pub const PATH_FROM_FD: u16 = 1 << 3;
    /// A path argument could not be read from the tracee (bad pointer, or too long).
    pub const PATH_UNREADABLE: u16 = 1 << 4;
    /// The call was interrupted by a signal and will be restarted (ERESTART* results).
    pub const RESTARTED: u16 = 1 << 5;
    /// The descriptor's target is unknown to the backend (opened before tracing began and
    /// not resolvable, or created by an untraced call).
    pub const FD_UNKNOWN: u16 = 1 << 6;
    /// The stat answer is partial (strace without -v prints only mode and size).
    pub const STAT_PARTIAL: u16 = 1 << 7;
    /// The call's entry was not seen, so its duration is unknown (recorded as 0): the eBPF
    /// backend, for a call in progress when it attached or whose per-thread slot another
    /// thread took (docs/ebpf-backend.md).
    pub const NO_DURATION: u16 = 1 << 8;
}

/// A traced system call. Which fields a call fills is documented per call in
/// docs/trace-format.md ("Syscall fields by call").
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Syscall {
    /// Entry time, ns since the trace started.
    pub ts: u64,
    /// Entry to exit, ns (0 when unknown).
    pub dur: u64,
    /// Process id (thread group id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Which call.
    pub sys: Sys,
    /// The result: >= 0 success value, < 0 a negated errno.
    pub ret: i64,
    /// Bits from [`ev`].
    pub ev: u16,
    /// The primary descriptor argument (read's fd, fstat's fd, dup's oldfd, ...).
    pub fd: Option<i32>,
    /// A second descriptor: dup2/dup3 newfd, pipe's write end, sendfile's in_fd, ...
    pub fd2: Option<i32>,
    /// The absolute path the call names, or the primary descriptor's path.
    pub path: Option<StrId>,
    /// A second path: rename/link target, symlink target, readlink's answer, fd2's path.
    pub path2: Option<StrId>,
    /// The call's flags argument (open flags, AT_* flags, access mode, fcntl cmd, ...).
    pub flags: u64,
    /// The mode argument (open's create mode, mkdir, chmod).
    pub mode: u32,
    /// The file offset argument (pread, pwrite, lseek, ...).
    pub offset: Option<i64>,
    /// Bytes requested (read/write count, sum of iovec lengths, sendfile count).
    pub count: u64,
    /// A further argument some calls carry (fcntl's arg, statx's mask, lseek's whence,
    /// close_range's last descriptor).
    pub aux: u64,
    /// The stat answer of a stat-family call; for an open or a descriptor-based call,
    /// the identity of the open file as the backend knows it.
    pub stat: Option<StatId>,
    /// A prefix of the bytes written, or for execve/execveat the NUL-separated argv.
    pub payload: Option<StrId>,
    /// The call stack that made the call, when stacks were recorded.
    pub stack: Option<StackId>,
    /// Write family: a fingerprint of what was written, its varying parts (numbers, hex
    /// ids, UUIDs, timestamps) masked: two writes of the same template have the same one,
    /// whether or not their bytes were kept (docs/trace-format.md).
    pub fingerprint: Option<u64>,
}

impl Syscall {
    /// A call with every optional field empty.
    pub fn new(ts: u64, pid: u32, tid: u32, sys: Sys) -> Syscall {
        Syscall {
            ts,
            dur: 0,
            pid,
            tid,
            sys,
            ret: 0,
            ev: 0,
            fd: None,
            fd2: None,
            path: None,
            path2: None,
            flags: 0,
            mode: 0,
            offset: None,
            count: 0,
            aux: 0,
            stat: None,
            payload: None,
            stack: None,
            fingerprint: None,
        }
    }

    /// The call failed: it returned a negated errno.
    pub fn is_error(&self) -> bool {
        self.ret < 0 && self.ret >= -4095 && self.ev & ev::UNFINISHED == 0
    }

    /// The errno, when the call failed.
    pub fn errno(&self) -> Option<i32> {
        self.is_error().then_some((-self.ret) as i32)
    }
}

/// A new process or thread.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Spawn {
    /// When the backend saw it, ns since start.
    pub ts: u64,
    /// The creating process.
    pub parent_pid: u32,
    /// The creating thread.
    pub parent_tid: u32,
    /// The new task's process id (== parent_pid for a thread).
    pub pid: u32,
    /// The new task's thread id.
    pub tid: u32,
    /// `clone` flags when known (CLONE_THREAD, CLONE_FILES, CLONE_FS, CLONE_VFORK ...).
    pub clone_flags: u64,
}

impl Spawn {
    /// The new task is a thread of an existing process.
    pub fn is_thread(&self) -> bool {
        self.pid == self.parent_pid && self.tid != self.parent_tid
    }
}

/// A successful exec.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Exec {
    /// When, ns since start.
    pub ts: u64,
    /// The process.
    pub pid: u32,
    /// The thread that called exec (it becomes the process leader: tid == pid afterwards).
    pub tid: u32,
    /// The executable's absolute path.
    pub exe: StrId,
    /// The command line, NUL-separated.
    pub argv: StrId,
}

/// How a task ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// Normal exit with this code.
    Code(i32),
    /// Killed by this signal.
    Signal {
        /// The signal number.
        signal: i32,
        /// A core dump was written.
        core: bool,
    },
}

impl ExitStatus {
    /// The status a shell reports in `$?`: the code, or 128 + the signal.
    pub fn shell_code(&self) -> i32 {
        match *self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal { signal, .. } => 128 + signal,
        }
    }
}

/// A task ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Exit {
    /// When, ns since start.
    pub ts: u64,
    /// The process.
    pub pid: u32,
    /// The thread (== pid for the process leader, whose exit is the process's exit).
    pub tid: u32,
    /// How.
    pub status: ExitStatus,
}

/// A signal delivered to the traced program.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Signal {
    /// When, ns since start.
    pub ts: u64,
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The signal number.
    pub signal: i32,
}

/// Why events were lost.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum LostReason {
    /// A kernel buffer overflowed (eBPF ring buffer full).
    BufferFull = 0,
    /// An imported log line could not be parsed.
    Unparsed = 1,
    /// A call was seen in a state the backend could not decode (exit without entry ...).
    Undecodable = 2,
    /// Calls of a foreign ABI (32-bit on a 64-bit kernel) that the backend does not trace.
    ForeignAbi = 3,
}

impl LostReason {
    /// Inverse of `as u8`.
    pub fn from_u8(v: u8) -> Option<LostReason> {
        Some(match v {
            0 => LostReason::BufferFull,
            1 => LostReason::Unparsed,
            2 => LostReason::Undecodable,
            3 => LostReason::ForeignAbi,
            _ => return None,
        })
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            LostReason::BufferFull => "buffer_full",
            LostReason::Unparsed => "unparsed",
            LostReason::Undecodable => "undecodable",
            LostReason::ForeignAbi => "foreign_abi",
        }
    }
}

/// The backend knows `count` events were lost at about this time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Lost {
    /// When, ns since start.
    pub ts: u64,
    /// The process, when known (0 otherwise).
    pub pid: u32,
    /// How many events.
    pub count: u64,
    /// Why.
    pub reason: LostReason,
}

/// What a [`Mark`] says about the process.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum MarkKind {
    /// A language agent finished loading in this process: for Python, the end of the
    /// interpreter's own start-up, before `__main__` runs; for Node.js, the agent's
    /// `--require` ran, before the main module is loaded. After a fork, the child's agent
    /// marks the child.
    AgentReady = 1,
    /// Node.js: the first turn of the event loop after the main module ran (a CommonJS
    /// main's synchronous evaluation, an ES module's evaluation with its top-level await).
    /// A program that never returns to the event loop has none.
    MainDone = 2,
}

impl MarkKind {
    /// Inverse of `as u8`.
    pub fn from_u8(v: u8) -> Option<MarkKind> {
        Some(match v {
            1 => MarkKind::AgentReady,
            2 => MarkKind::MainDone,
            _ => return None,
        })
    }

    /// A short name for exports and reports.
    pub fn name(self) -> &'static str {
        match self {
            MarkKind::AgentReady => "agent_ready",
            MarkKind::MainDone => "main_done",
        }
    }
}

/// A point in a process's life that its runtime reported (through a language agent),
/// in order with the calls around it: where start-up ends, from the runtime itself.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Mark {
    /// When, ns since start.
    pub ts: u64,
    /// The process.
    pub pid: u32,
    /// The thread that reported it.
    pub tid: u32,
    /// What it marks.
    pub kind: MarkKind,
}

/// What a [`Mapping`] record says happened to its range.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u8)]
pub enum MappingKind {
    /// A file was mapped at `start..start+len`, executable (an mmap with `PROT_EXEC`, or the
    /// program and its interpreter placed by the kernel at exec). It replaces whatever an
    /// earlier mapping of the process held in that range.
    Map = 0,
    /// `start..start+len` was unmapped (munmap): what the process had mapped there is gone.
    Unmap = 1,
}

impl MappingKind {
    /// Inverse of `as u8`.
    pub fn from_u8(v: u8) -> Option<MappingKind> {
        Some(match v {
            0 => MappingKind::Map,
            1 => MappingKind::Unmap,
            _ => return None,
        })
    }

    /// A short name for exports and reports.
    pub fn name(self) -> &'static str {
        match self {
            MappingKind::Map => "map",
            MappingKind::Unmap => "unmap",
        }
    }
}

/// Where a process has a file's code: what a module+offset frame of that process refers
/// to, and which build of the file it is, so a trace can be symbolized again later or on
/// another machine. An exec drops every mapping of the process (its Exec record says so);
/// so does its exit. See docs/trace-format.md, "Mapping".
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Mapping {
    /// When, ns since start (the mmap's entry time; the exec's time for the program's own).
    pub ts: u64,
    /// The process.
    pub pid: u32,
    /// Mapped or unmapped.
    pub kind: MappingKind,
    /// First address of the range.
    pub start: u64,
    /// Bytes in the range.
    pub len: u64,
    /// [`MappingKind::Map`]: the offset in the file that `start` maps (0 for an unmap).
    pub offset: u64,
    /// [`MappingKind::Map`]: the file, an absolute path (a trace string, never
    /// block-local), as /proc/PID/maps names it.
    pub path: Option<StrId>,
    /// [`MappingKind::Map`]: the file's identity (`st_dev` in the kernel's encoding,
    /// `st_ino`), when known.
    pub file: Option<(u64, u64)>,
    /// [`MappingKind::Map`]: the file's GNU build id, the raw bytes of its
    /// `NT_GNU_BUILD_ID` note (a trace string), when it has one.
    pub build_id: Option<StrId>,
}

impl Mapping {
    /// End of the range (exclusive), saturating.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }
}

/// Which fields of a [`FileStat`] are known.
pub mod stat_known {
    /// st_dev and st_ino.
    pub const IDENTITY: u8 = 1 << 0;
    /// st_mode.
    pub const MODE: u8 = 1 << 1;
    /// st_size.
    pub const SIZE: u8 = 1 << 2;
    /// st_mtime.
    pub const MTIME: u8 = 1 << 3;
    /// st_ctime.
    pub const CTIME: u8 = 1 << 4;
    /// st_nlink, st_uid, st_gid.
    pub const OWNER: u8 = 1 << 5;
    /// st_rdev.
    pub const RDEV: u8 = 1 << 6;
    /// Everything.
    pub const ALL: u8 = 0x7f;
}

/// The answer of a stat-family call, enough to tell whether two lookups got the same
/// answer: identity, type and permissions, size, and change times.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct FileStat {
    /// Bits from [`stat_known`].
    pub known: u8,
    /// st_dev, as the kernel's encoded dev_t (use [`FileStat::dev_major`]).
    pub dev: u64,
    /// st_ino.
    pub ino: u64,
    /// st_mode: file type and permission bits.
    pub mode: u32,
    /// st_nlink.
    pub nlink: u64,
    /// st_uid.
    pub uid: u32,
    /// st_gid.
    pub gid: u32,
    /// st_rdev for device files.
    pub rdev: u64,
    /// st_size.
    pub size: i64,
    /// st_mtime in ns since the epoch.
    pub mtime_ns: i64,
    /// st_ctime in ns since the epoch.
    pub ctime_ns: i64,
}

/// File type bits of `st_mode`.
pub mod mode {
    /// Mask of the type bits.
    pub const S_IFMT: u32 = 0o170000;
    /// Socket.
    pub const S_IFSOCK: u32 = 0o140000;
    /// Symbolic link.
    pub const S_IFLNK: u32 = 0o120000;
    /// Regular file.
    pub const S_IFREG: u32 = 0o100000;
    /// Block device.
    pub const S_IFBLK: u32 = 0o060000;
    /// Directory.
    pub const S_IFDIR: u32 = 0o040000;
    /// Character device.
    pub const S_IFCHR: u32 = 0o020000;
    /// FIFO (pipe).
    pub const S_IFIFO: u32 = 0o010000;
}

impl FileStat {
    /// The file type bits.
    pub fn file_type(&self) -> u32 {
        self.mode & mode::S_IFMT
    }

    /// Whether this answer, kept, answers a call that got `other`: it knows every field
    /// `other` holds, with the same values. A `statx` asks for some fields only (the JDK's
    /// `UnixNativeDispatcher.stat1` leaves out the times): its answer is another answer
    /// than a full stat's of the same unchanged file, not a change of the file.
    pub fn answers(&self, other: &FileStat) -> bool {
        use stat_known::*;
        let k = other.known;
        let same = |bit: u8, eq: bool| k & bit == 0 || eq;
        self.known & k == k
            && same(IDENTITY, (self.dev, self.ino) == (other.dev, other.ino))
            && same(MODE, self.mode == other.mode)
            && same(SIZE, self.size == other.size)
            && same(MTIME, self.mtime_ns == other.mtime_ns)
            && same(CTIME, self.ctime_ns == other.ctime_ns)
            && same(
                OWNER,
                (self.nlink, self.uid, self.gid) == (other.nlink, other.uid, other.gid),
            )
            && same(RDEV, self.rdev == other.rdev)
    }

    /// Whether two answers agree on every field both hold.
    pub fn agrees(&self, other: &FileStat) -> bool {
        let both = self.known & other.known;
        let a = FileStat {
            known: both,
            ..*self
        };
        let b = FileStat {
            known: both,
            ..*other
        };
        a.answers(&b)
    }

    /// Major number of a kernel dev_t.
    pub fn major(dev: u64) -> u32 {
        (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)) as u32
    }

    /// Minor number of a kernel dev_t.
    pub fn minor(dev: u64) -> u32 {
        (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32
    }

    /// Builds a kernel dev_t from major and minor numbers.
    pub fn makedev(major: u32, minor: u32) -> u64 {
        let (ma, mi) = (major as u64, minor as u64);
        ((ma & 0xffff_f000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffff_ff00) << 12) | (mi & 0xff)
    }
}

/// Trace-wide facts written once at the start of a trace.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    /// The program that wrote the trace, e.g. "dejavu 0.1.0".
    pub producer: String,
    /// The capture backend: "ptrace", "strace-import", "synthetic", ...
    pub backend: String,
    /// The traced machine's architecture ("x86_64", "aarch64").
    pub arch: String,
    /// Wall-clock time of ts 0, ns since the Unix epoch (0 when unknown).
    pub start_unix_ns: u64,
    /// The command that was run, or the attached pids' command lines.
    pub command: Vec<String>,
    /// Pids attached to with -p (empty when dejavu started the program).
    #[serde(default)]
    pub attached: Vec<u32>,
    /// The working directory the program started in.
    #[serde(default)]
    pub cwd: String,
    /// Payload prefix limit in bytes (0: payloads not recorded).
    #[serde(default)]
    pub payload_bytes: u32,
    /// Free-form notes from the backend (options, import statistics).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Variables of the environment dejavu started the program with that change what the
    /// report says about it, as `NAME=VALUE` (`PYTHONUNBUFFERED=1`: every print() a write
    /// of its own). Empty when attached, or when none is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// Facts known only at the end, written in the end block.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct End {
    /// Time the recording ended, ns since start.
    pub end_ts: u64,
    /// Records written.
    pub records: u64,
    /// Events the backend knows it lost (sum of Lost records).
    pub lost_events: u64,
    /// The exit status of the program dejavu started (none when attached).
    pub exit: Option<ExitStatus>,
    /// Remarks known only at the end (import statistics, warnings given during recording).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}
