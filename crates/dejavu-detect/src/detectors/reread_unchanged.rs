//! reread-unchanged: a file read in full again (or a directory listed in full again) by
//! the same process, with nothing changed in between: what keeping the parsed content in
//! memory would have saved.

use super::reads::{is_read_call, opens_readonly, read_of, same_open_file, Coverage, Reads};
use crate::group::{cache_hazards, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{PathKey, Version, View};
use dejavu_trace::{ev, mode, stat_known, Record, Sys, Syscall};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use std::hash::Hasher;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "reread-unchanged",
    summary: "a file read in full (or a directory listed in full) again, unchanged since the last time",
    explain: "A full read is one open/close cycle of a regular file by one process that reads it \
from offset 0 onwards without skipping, until a read returns 0 or the bytes read reach the file's \
size (from the open's stat answer, or from fstat of the descriptor when the open carried none). \
Reads are read and readv at the file position, pread64/preadv/preadv2 at their offset, sendfile \
and copy_file_range from their input descriptor (copy_file_range's input offset is not recorded: \
it is taken to read at the file position, as whole-file copies do), and file-backed mmap of the \
descriptor (the range mapped, up to the file's size; a mapping counts only when it cannot write \
the file: the descriptor is read-only, the mapping is private, or it has no PROT_WRITE). \
Re-reading bytes already read is allowed (a loader reads the header, then maps the whole file); \
reading past a gap first (a trailer, an index: random access) is not a full read. A full \
listing is an open of a directory whose getdents64 calls go on until one returns 0. A full read or \
listing is redundant when the same process (the same exec'd program) already read that path in full \
at the same path version (no write, truncate, rename, unlink, create, chmod or utime of it by any \
traced process in between, for a directory no entry created or removed in it) and the file had the \
same identity (inode, size and mtime from the open's or fstat's stat answer). The calls of a \
redundant cycle count: the open, fstat, lseek, reads, mmap or getdents, and the close; the time is \
theirs. sendfile and copy_file_range are counted among the cycle's calls but not as redundant: with \
the content in memory the program would still write it out. Not redundant: the first full read; a \
read after an observed change (listed in the hazards as an invalidation point); a read whose \
identity changed with no observed change (another program rewrote the file: counted as a stale \
answer, and caching is then unsafe). Not considered: partial reads, files that yield more bytes \
than their size (/proc, /sys and other generated files), files under /proc, /sys and /dev, \
descriptors written to while open, and reads before --skip-startup. A directory listed again \
and then removed (or renamed away) by the same process before its next use of the path is not \
redundant: a recursive delete lists what it removes (Rust's remove_dir_all, shutil.rmtree after a \
walk of the same tree). The program's first read of what the runtime read is its own first read, \
not a reread: during its start-up (before a language agent said start-up was over: CPython's import \
system listing sys.path, which importlib.metadata lists again) or later in its import system or \
module loader (a package's directory CPython listed to import from it, which pylint lists to find \
its plugins; a package.json Node.js's loader read, which webpack reads again).",
    example: "def handle(req):\n    cfg = json.load(open('config.json'))   # the whole file, every \
request, never changed",
    fix: "keep the parsed content in memory and re-read only on the invalidation points listed in \
the hazards (or when a file watch / an mtime+size check says it changed)",
    hazards: "A cached copy must be dropped when the program itself changes the file (listed per \
finding). If another program may rewrite the file, the cache serves stale content: dejavu counts \
how often the identity changed with nothing it saw, and then says caching is unsafe unless a \
watch (inotify) or a cheap stat check guards it.",
    options: &[],
    make: |_cfg: &Config| Box::new(RereadUnchanged::default()),
};

const O_ACCMODE: u64 = 3;
const O_WRONLY: u64 = 1;
const O_DIRECTORY: u64 = 0o200000;

/// One open/close cycle being followed.
struct Cycle {
    /// The replay's open id, learnt at the first call on the descriptor.
    open_id: Option<u64>,
    path: PathKey,
    ts: u64,
    version: Version,
    ident: Option<u64>,
    size: Option<u64>,
    dir: bool,
    /// Opened O_RDONLY (a mapping of it cannot write the file).
    readonly: bool,
    calls: u64,
    /// The cycle's calls (`View::seq`, duration, stack, whether a cache removes it), to
    /// mark them if it was redundant.
    members: Vec<Member>,
    reads: Coverage,
    /// A listing: getdents64 went on until it returned 0.
    listed: bool,
}

#[derive(Clone, Copy)]
struct Member {
    call: u64,
    dur: u64,
    stack: Option<dejavu_trace::StackId>,
    /// A cache of the content removes this call (not so sendfile and copy_file_range:
    /// their bytes would still be written out).
    removable: bool,
}

impl Cycle {
    fn complete(&self) -> bool {
        if self.dir {
            self.listed && !self.reads.broken
        } else {
            self.reads.full()
        }
    }
}

#[derive(Clone, Copy)]
struct Last {
    version: Version,
    ident: Option<u64>,
    /// When the cycle began, and its first call's stack.
    ts: u64,
    stack: Option<dejavu_trace::StackId>,
    /// The stack of the chain's first read: what the repeats repeat.
    first: Option<dejavu_trace::StackId>,
}

#[derive(Default)]
struct ProcState {
    cycles: FxHashMap<i32, Cycle>,
    last: FxHashMap<PathKey, Last>,
    /// Redundant listings of a directory, held until the process next uses its path: a
    /// listing that the removal of the directory follows is a recursive delete reading
    /// what it removes (Rust's remove_dir_all, shutil.rmtree after a walk), not a reread.
    held: FxHashMap<PathKey, Held>,
}

/// A redundant listing held back (see `ProcState::held`).
struct Held {
    image: u32,
    ts: u64,
    members: Vec<Member>,
    verified: bool,
    /// The stack of the read this one repeats (its chain's first).
    first: Option<dejavu_trace::StackId>,
}

#[derive(Default)]
struct RereadUnchanged {
    procs: FxHashMap<u32, ProcState>,
    tallies: Tallies,
    /// Per path key: 0 not yet classified, 1 never a candidate (/proc, /sys, /dev), 2 fine.
    class: Vec<u8>,
    /// (image, path) of redundant reads judged by version alone because the trace has no
    /// identity for them (strace logs: opens carry none, and not every read is fstat'ed).
    unverified: FxHashSet<(u32, PathKey)>,
}

/// What a stat answer of the opened file (the open's own, or fstat's of the descriptor)
/// says about it: `None` when it is neither a regular file nor a directory; else (identity
/// hash, size, is a directory), each `None` when the answer does not tell.
#[allow(clippy::type_complexity)]
fn identity(cx: &Cx<'_>, s: &Syscall) -> Option<(Option<u64>, Option<u64>, Option<bool>)> {
    let Some(id) = s.stat else {
        return Some((None, None, None));
    };
    let st = cx.stat(id);
    let is_dir = if st.known & stat_known::MODE != 0 {
        match st.file_type() {
            mode::S_IFDIR => Some(true),
            mode::S_IFREG => Some(false),
            _ => return None, // a device, FIFO or socket: never "a file read in full"
        }
    } else {
        None
    };
    let need = stat_known::IDENTITY | stat_known::SIZE | stat_known::MTIME;
    let ident = (st.known & need == need && s.ev & ev::STAT_PARTIAL == 0).then(|| {
        let mut h = FxHasher::default();
        h.write_u64(st.dev);
        h.write_u64(st.ino);
        h.write_i64(st.size);
        h.write_i64(st.mtime_ns);
        h.finish()
    });
    let size = (st.known & stat_known::SIZE != 0 && st.size >= 0).then_some(st.size as u64);
    Some((ident, size, is_dir))
}

impl RereadUnchanged {
    fn candidate(&mut self, cx: &Cx<'_>, p: PathKey) -> bool {
        let i = p.0 as usize;
        if self.class.len() <= i {
            self.class.resize(i + 1, 0);
        }
        if self.class[i] == 0 {
            let b = cx.replay.paths.bytes(p);
            let generated = [&b"/proc/"[..], b"/sys/", b"/dev/"]
                .iter()
                .any(|pre| b.starts_with(pre));
            self.class[i] = if generated || b.first() != Some(&b'/') {
                1
            } else {
                2
            };
        }
        self.class[i] == 2
    }

    fn open(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(path) = v.path else { return };
        if s.ret < 0 || s.flags & O_ACCMODE == O_WRONLY || !self.candidate(cx, path) {
            return;
        }
        let Some((ident, size, is_dir)) = identity(cx, s) else {
            return;
        };
        let dir = is_dir.unwrap_or(s.flags & O_DIRECTORY != 0);
        let c = Cycle {
            open_id: None,
            path,
            ts: s.ts,
            version: v.version,
            ident,
            size,
            dir,
            readonly: opens_readonly(s.flags),
            calls: 1,
            members: vec![Member {
                call: v.seq,
                dur: s.dur,
                stack: s.stack,
                removable: true,
            }],
            reads: Coverage::default(),
            listed: false,
        };
        self.procs
            .entry(s.pid)
            .or_default()
            .cycles
            .insert(s.ret as i32, c);
    }

    fn finish_cycle(
        &mut self,
        pid: u32,
        image: u32,
        c: Cycle,
        close_version: Version,
        cx: &Cx<'_>,
    ) {
        let grew = !c.dir && c.size.is_some_and(|n| c.reads.covered > n);
        if !c.complete() || grew || close_version != c.version {
            return;
        }
        let Some(ps) = self.procs.get_mut(&pid) else {
            return;
        };
        let stack = c.members.iter().find_map(|m| m.stack);
        let prev = ps.last.insert(
            c.path,
            Last {
                version: c.version,
                ident: c.ident,
                ts: c.ts,
                stack,
                first: stack,
            },
        );
        if !cx.config.counts(c.ts) {
            return;
        }
        let t = self.tallies.get(image, c.path);
        t.calls += c.calls;
        match prev {
            // The program's first read of what the runtime read (its start-up, its
            // import system or module loader).
            Some(p) if cx.first_after_runtime(image, c.path, (p.ts, p.stack), (c.ts, stack)) => {}
            Some(p) if p.version == c.version && p.ident == c.ident => {
                if let Some(l) = ps.last.get_mut(&c.path) {
                    l.first = p.first;
                }
                let held = Held {
                    image,
                    ts: c.ts,
                    members: c.members,
                    verified: c.ident.is_some(),
                    first: p.first,
                };
                if c.dir {
                    // Counted at the process's next use of the path, unless that removes it.
                    if let Some(old) = ps.held.insert(c.path, held) {
                        Self::count(&mut self.tallies, &mut self.unverified, c.path, old, cx);
                    }
                } else {
                    Self::count(&mut self.tallies, &mut self.unverified, c.path, held, cx);
                }
            }
            Some(p) if p.version == c.version => t.stale += 1,
            Some(_) => {
                t.invalidations += 1;
                t.invalidated_by = t.invalidated_by.or(cx.replay.paths.changed_by(c.path));
            }
            None => {}
        }
    }
}

impl RereadUnchanged {
    /// One redundant cycle: all of its calls a cache removes, and their time.
    fn count(
        tallies: &mut Tallies,
        unverified: &mut FxHashSet<(u32, PathKey)>,
        path: PathKey,
        h: Held,
        cx: &Cx<'_>,
    ) {
        let t = tallies.get(h.image, path);
        let removable = h.members.iter().filter(|m| m.removable);
        let (n, ns) = removable.fold((0, 0), |(n, ns), m| (n + 1, ns + m.dur));
        if n == 0 {
            return;
        }
        t.redundant(h.ts, ns, None);
        t.redundant += n - 1;
        t.firsts.add(h.first, n, 0);
        for m in h.members.iter().filter(|m| m.removable) {
            cx.mark(m.call, m.dur, m.stack);
            t.sites.add(m.stack, 1, m.dur);
        }
        if !h.verified {
            unverified.insert((h.image, path));
        }
    }

    /// Counts the listings `pid` holds back (its process ends or execs).
    fn release(&mut self, pid: u32, cx: &Cx<'_>) {
        if let Some(ps) = self.procs.get_mut(&pid) {
            let mut held: Vec<(PathKey, Held)> = ps.held.drain().collect();
            held.sort_by_key(|(p, _)| *p);
            for (path, h) in held {
                Self::count(&mut self.tallies, &mut self.unverified, path, h, cx);
            }
        }
    }
}

/// Calls that remove a directory (or move it away): `unlinkat` with AT_REMOVEDIR, rmdir,
/// rename from it.
fn removes_dir(s: &Syscall) -> bool {
    const AT_REMOVEDIR: u64 = 0x200;
    match s.sys {
        Sys::Rmdir | Sys::Rename | Sys::Renameat | Sys::Renameat2 => true,
        Sys::Unlinkat => s.flags & AT_REMOVEDIR != 0,
        _ => false,
    }
}

impl Detector for RereadUnchanged {
    fn wants(&self, sys: Sys) -> bool {
        use Sys::*;
        is_read_call(sys)
            || matches!(
                sys,
                Open | Openat
                    | Openat2
                    | Close
                    | Lseek
                    | Fstat
                    | Newfstatat
                    | Statx
                    | Getdents64
                    | Rmdir
                    | Unlinkat
                    | Rename
                    | Renameat
                    | Renameat2
            )
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if s.ev & ev::UNFINISHED != 0 {
            return;
        }
        // A held listing's path used again: counted, unless this call removes it.
        if let Some(path) = v.path {
            if let Some(h) = self
                .procs
                .get_mut(&s.pid)
                .and_then(|ps| ps.held.remove(&path))
            {
                if !(removes_dir(s) && s.ret >= 0) {
                    Self::count(&mut self.tallies, &mut self.unverified, path, h, cx);
                }
            }
        }
        if matches!(
            s.sys,
            Sys::Rmdir | Sys::Unlinkat | Sys::Rename | Sys::Renameat | Sys::Renameat2
        ) {
            return;
        }
        if matches!(s.sys, Sys::Open | Sys::Openat | Sys::Openat2) {
            self.open(s, v, cx);
            return;
        }
        // sendfile and copy_file_range read their second descriptor.
        let (fd, seen) = match s.sys {
            Sys::Sendfile | Sys::CopyFileRange => (s.fd2, v.fd2),
            _ => (s.fd, v.fd),
        };
        let Some(fd) = fd else { return };
        if matches!(s.sys, Sys::Newfstatat | Sys::Statx) && s.ev & ev::PATH_FROM_FD == 0 {
            return; // a lookup by path, not a call on the descriptor
        }
        let Some(ps) = self.procs.get_mut(&s.pid) else {
            return;
        };
        let Some(c) = ps.cycles.get_mut(&fd) else {
            return;
        };
        // The descriptor number may have been reused (dup2 onto it, close_range, exec).
        if !same_open_file(&mut c.open_id, seen) {
            ps.cycles.remove(&fd);
            return;
        }
        let read = read_of(s, c.readonly);
        c.calls += 1;
        c.members.push(Member {
            call: v.seq,
            dur: s.dur,
            stack: s.stack,
            removable: !matches!(read, Some(Reads::Known(r)) if r.transfer),
        });
        let ret = s.ret;
        match s.sys {
            Sys::Close => {
                if let Some(c) = ps.cycles.remove(&fd) {
                    self.finish_cycle(s.pid, v.image, c, v.version, cx);
                }
                return;
            }
            _ if ret < 0 => {
                c.reads.broken = true;
                return;
            }
            Sys::Lseek => {
                c.reads.pos = ret as u64;
                if c.dir && ret == 0 {
                    c.listed = false; // rewinddir: the listing starts over
                }
                return;
            }
            Sys::Getdents64 => {
                if !c.dir {
                    c.reads.broken = true;
                } else if ret == 0 {
                    c.listed = true;
                }
                return;
            }
            Sys::Fstat | Sys::Newfstatat | Sys::Statx => {
                // The open's answer may have lacked what fstat tells (an strace import
                // records no stat with the open): the identity and size come from here.
                if c.ident.is_none() || c.size.is_none() {
                    match identity(cx, s) {
                        None => {
                            ps.cycles.remove(&fd); // a device, FIFO or socket
                        }
                        Some((ident, size, is_dir)) => {
                            c.ident = c.ident.or(ident);
                            c.size = c.size.or(size);
                            c.dir = is_dir.unwrap_or(c.dir);
                        }
                    }
                }
                return;
            }
            _ => {}
        }
        // A whole-file read goes from offset 0 onwards: reads at the edge of what is
        // covered extend it, re-reads inside it are harmless, and a read beyond it (a
        // trailer or an index first) is random access, not a read of the whole file.
        match read {
            Some(Reads::Known(r)) if !c.dir => c.reads.read(&r, c.size),
            Some(_) => c.reads.broken = true,
            None => {}
        }
    }

    fn on_record(&mut self, rec: &Record, cx: &Cx<'_>) {
        // A new program (or a gone process) remembers nothing of what the old one read.
        match rec {
            Record::Exec(e) => {
                self.release(e.pid, cx);
                self.procs.remove(&e.pid);
            }
            Record::Exit(e) if e.pid == e.tid => {
                self.release(e.pid, cx);
                self.procs.remove(&e.pid);
            }
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let mut pids: Vec<u32> = self.procs.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.release(pid, cx);
        }
        let unverified = &self.unverified;
        self.tallies.findings_with(
            &INFO,
            cx,
            Wording { cache: true },
            &|t, _| {
                let mut h = cache_hazards(t, "cached content");
                h.push(
                    "a cache keyed by path must also be dropped when the file is replaced \
                     (renamed over, deleted and recreated)"
                        .into(),
                );
                h
            },
            // Only a finding that has such files says so.
            &mut |f, covered| {
                if covered.iter().any(|k| unverified.contains(k)) {
                    f.hazards.push(
                        "the trace has no identity (inode, size, mtime) for some of these files, \
                         so changes by other programs could not be ruled out for them"
                            .into(),
                    );
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{dir, file, TraceBuilder};
    use crate::Owner;
    use dejavu_trace::{ev, FrameKind, Sys};

    const CFG: &str = "/srv/app/config.json";

    /// Python's way: open, fstat, read(size+1), read -> 0, close (5 calls).
    fn read_config(b: &mut TraceBuilder, st: dejavu_trace::FileStat) {
        let size = st.size;
        b.open(CFG, 0o2000000, 3, Some(st));
        b.call(Sys::Fstat, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s(CFG));
            c.ev = ev::PATH_FROM_FD;
            c.stat = Some(b.st(st));
        });
        b.read(3, CFG, size as u64 + 1, size);
        b.read(3, CFG, 1, 0);
        b.close(3, CFG);
    }

    #[test]
    fn the_same_file_read_in_full_again_unchanged_is_redundant_with_all_its_calls() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            read_config(&mut b, file(7, 120, 1));
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (20, 15));
        assert_eq!(f[0].wasted_ns, 15 * 500);
        assert_eq!(f[0].paths, vec![CFG.to_string()]);
        let cache = f[0].cache.clone().unwrap_or_default();
        assert!(cache.safe && cache.saved_calls == 15 && cache.stale_answers == 0);
    }

    #[test]
    fn the_programs_first_read_of_what_start_up_read_is_not_redundant() {
        // CPython's import system read it during start-up; the program reads it once after
        // (importlib.metadata listing sys.path): its own first read. A second one is a reread.
        let mut b = TraceBuilder::new();
        read_config(&mut b, file(7, 120, 1));
        b.ready();
        read_config(&mut b, file(7, 120, 1));
        assert!(b.findings("reread-unchanged").is_empty());
        let mut b = TraceBuilder::new();
        read_config(&mut b, file(7, 120, 1));
        b.ready();
        read_config(&mut b, file(7, 120, 1));
        read_config(&mut b, file(7, 120, 1));
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].redundant_calls, 5, "the third read's calls");
        // Both reads in start-up: the runtime's reread, counted (as its finding).
        let mut b = TraceBuilder::new();
        read_config(&mut b, file(7, 120, 1));
        read_config(&mut b, file(7, 120, 1));
        b.ready();
        assert_eq!(b.findings("reread-unchanged").len(), 1);
    }

    #[test]
    fn the_programs_first_read_of_what_the_import_system_read_is_not_redundant() {
        // After start-up: CPython's import system (no frame the agent names: the
        // interpreter's own C code) reads a file, then the program's line reads it. The
        // program could not have kept the import system's read: its first. A second read
        // from the program's line is a reread; the import system's own repeat stays one.
        let run = |reads: &[bool]| {
            let mut b = TraceBuilder::new();
            b.exec("/usr/bin/python3.11", &["python3", "/app/lint.py"]);
            b.ready();
            let runtime = b.native_stack(&[("_posix_listdir", "/usr/bin/python3.11")]);
            let own = b.stack(&[(FrameKind::Python, "register_plugins", "/app/lint.py", 172)]);
            for &by_program in reads {
                b.stack = Some(if by_program { own } else { runtime });
                read_config(&mut b, file(7, 120, 1));
            }
            b.findings("reread-unchanged")
        };
        assert!(run(&[false, true]).is_empty());
        let f = run(&[false, true, true]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].redundant_calls, 5, "the program's second read");
        assert_eq!(run(&[false, false]).len(), 1, "the import system's reread");
    }

    /// A frame for [`TraceBuilder::stack`]: kind, function, file, line.
    type Frame<'a> = (FrameKind, &'a str, &'a str, u32);

    /// A file read three times from `frames` after the agent's ready mark, in a process
    /// running `argv`: the reread's owner and its first site's function.
    fn reread_from(exe: &str, argv: &[&str], frames: &[Frame<'_>]) -> (Owner, Option<String>) {
        let mut b = TraceBuilder::new();
        b.exec(exe, argv);
        b.ready();
        let s = b.stack(frames);
        b.stack = Some(s);
        for _ in 0..3 {
            read_config(&mut b, file(7, 120, 1));
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1, "{f:?}");
        let c = f[0].callsites.first().map(|c| c.function.clone());
        (f[0].owner, c)
    }

    #[test]
    fn an_executable_a_package_installed_is_a_dependencys_code() {
        // esbuild's Go executable in node_modules, which its JavaScript library runs: its
        // code is esbuild's, not the program's. The same code in an executable of the
        // project's own is its own.
        let run = |exe: &str| {
            let mut b = TraceBuilder::new();
            b.exec(exe, &["esbuild", "--bundle"]);
            let s = b.native_stack(&[(
                "github.com/evanw/esbuild/internal/fs.(*realFS).ReadFile",
                exe,
            )]);
            b.stack = Some(s);
            for _ in 0..3 {
                read_config(&mut b, file(7, 120, 1));
            }
            let f = b.findings("reread-unchanged");
            assert_eq!(f.len(), 1, "{f:?}");
            f[0].owner
        };
        assert_eq!(
            run("/p/node_modules/@esbuild/linux-x64/bin/esbuild"),
            Owner::Dependency
        );
        assert_eq!(run("/p/build/esbuild"), Owner::Own);
    }

    #[test]
    fn jests_module_system_is_a_loader() {
        // A test file's require() goes through jest-runtime and @jest/transform: what
        // they read is the runtime's; what the transformer (babel) does there is babel's.
        let run = |frames: &[Frame<'_>]| {
            reread_from(
                "/usr/bin/node",
                &["node", "/p/node_modules/.bin/jest"],
                frames,
            )
        };
        const NM: &str = "/p/node_modules";
        let test = (
            FrameKind::Js,
            "Object.<anonymous>",
            "/p/__tests__/a.test.js",
            4,
        );
        let runtime = format!("{NM}/jest-runtime/build/index.js");
        let require = (
            FrameKind::Js,
            "Runtime.requireModule",
            runtime.as_str(),
            900,
        );
        let read = (
            FrameKind::Js,
            "Runtime.readFileBuffer",
            runtime.as_str(),
            2291,
        );
        let transform = format!("{NM}/@jest/transform/build/ScriptTransformer.js");
        let transform = (
            FrameKind::Js,
            "ScriptTransformer.transform",
            transform.as_str(),
            500,
        );
        let babel = format!("{NM}/@babel/core/lib/config/files/configuration.js");
        let babel = (FrameKind::Js, "readConfigCode", babel.as_str(), 69);
        assert_eq!(run(&[read, require, test]).0, Owner::Runtime);
        assert_eq!(
            run(&[babel, transform, require, test]),
            (Owner::Dependency, Some("readConfigCode".to_string()))
        );
    }

    #[test]
    fn djangos_manage_py_is_an_entry_point_and_pkgutil_a_library() {
        // `python manage.py test`: Django's code under manage.py's main() (the template
        // `django-admin startproject` writes) is a dependency's, named at Django's line,
        // and so is a listing made in pkgutil for Django (its migrations, its
        // templatetags), which is not the import system. The project's own code under
        // the same main() is its own.
        let run = |frames: &[Frame<'_>]| {
            reread_from(
                "/venv/bin/python3.11",
                &["python3", "/p/manage.py", "test"],
                frames,
            )
        };
        const SP: &str = "/venv/lib/python3.11/site-packages";
        let main = (FrameKind::Python, "main", "/p/manage.py", 18);
        let module = (FrameKind::Python, "<module>", "/p/manage.py", 22);
        let django = format!("{SP}/django/db/migrations/loader.py");
        let load_disk = (FrameKind::Python, "load_disk", django.as_str(), 111);
        assert_eq!(
            run(&[load_disk, main, module]),
            (Owner::Dependency, Some("load_disk".to_string()))
        );
        let iter_modules = (
            FrameKind::Python,
            "iter_modules",
            "/usr/lib/python3.11/pkgutil.py",
            130,
        );
        assert_eq!(
            run(&[iter_modules, load_disk, main, module]),
            (Owner::Dependency, Some("load_disk".to_string()))
        );
        let own = (FrameKind::Python, "setUp", "/p/shop/tests.py", 9);
        assert_eq!(
            run(&[load_disk, own, main, module]),
            (Owner::Own, Some("setUp".to_string()))
        );
    }

    #[test]
    fn a_reread_made_elsewhere_than_the_first_read_names_the_first_reads_line() {
        // The module index reads the file first; FileHash reads it again, twice.
        let run = |first_by_index: bool| {
            let mut b = TraceBuilder::new();
            b.exec("/usr/bin/python3.11", &["python3", "/app/build.py"]);
            b.ready();
            let index = b.stack(&[(FrameKind::Python, "get_file_info", "/app/index.py", 255)]);
            let hash = b.stack(&[(FrameKind::Python, "file_hash", "/app/hash.py", 168)]);
            b.stack = Some(if first_by_index { index } else { hash });
            read_config(&mut b, file(7, 120, 1));
            b.stack = Some(hash);
            read_config(&mut b, file(7, 120, 1));
            read_config(&mut b, file(7, 120, 1));
            b.findings("reread-unchanged")
        };
        let f = run(true);
        assert_eq!(f[0].callsites[0].function, "file_hash");
        let first: Vec<(&str, u32, u64)> = f[0]
            .first_sites
            .iter()
            .map(|c| (c.function.as_str(), c.line, c.redundant_calls))
            .collect();
        assert_eq!(
            first,
            [("get_file_info", 255, 10)],
            "both rereads repeat it"
        );
        // The rereads' own line read it first: nothing more to say.
        assert!(run(false)[0].first_sites.is_empty());
    }

    #[test]
    fn reading_once_or_partially_is_not_redundant() {
        let mut b = TraceBuilder::new();
        read_config(&mut b, file(7, 120, 1));
        for _ in 0..5 {
            // Only the header: not a full read.
            b.open(CFG, 0, 3, Some(file(7, 120, 1)));
            b.read(3, CFG, 16, 16);
            b.close(3, CFG);
        }
        assert!(b.findings("reread-unchanged").is_empty());
    }

    #[test]
    fn preads_from_offset_zero_are_a_full_read_and_a_gap_is_not() {
        let pread = |b: &mut TraceBuilder, off: i64, n: i64| {
            b.call(Sys::Pread64, |c, b| {
                c.fd = Some(3);
                c.path = Some(b.s(CFG));
                c.ev = ev::PATH_FROM_FD;
                c.offset = Some(off);
                c.count = 4096;
                c.ret = n;
            });
        };
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            // An index read in two chunks, to its size (no EOF read needed).
            b.open(CFG, 0, 3, Some(file(7, 6000, 1)));
            pread(&mut b, 0, 4096);
            pread(&mut b, 4096, 1904);
            b.close(3, CFG);
        }
        for _ in 0..3 {
            // Header, then the index at the end, then the rest: random access, even though
            // every byte is read in the end.
            b.open(CFG, 0, 3, Some(file(7, 6000, 1)));
            pread(&mut b, 0, 100);
            pread(&mut b, 4096, 1904);
            pread(&mut b, 100, 5900);
            b.close(3, CFG);
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (12, 8));
    }

    #[test]
    fn a_file_rewritten_by_another_program_is_not_redundant_and_unsafe_to_cache() {
        let mut b = TraceBuilder::new();
        read_config(&mut b, file(7, 120, 1));
        read_config(&mut b, file(7, 120, 1));
        // Rewritten by something dejavu did not trace: same path version, new identity.
        read_config(&mut b, file(7, 133, 2));
        read_config(&mut b, file(7, 133, 2));
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (20, 10));
        let cache = f[0].cache.clone().unwrap_or_default();
        assert_eq!((cache.stale_answers, cache.safe), (1, false));
        assert!(
            f[0].hazards.iter().any(|h| h.contains("unsafe")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn a_change_by_the_traced_program_is_an_invalidation_point() {
        let mut b = TraceBuilder::new();
        read_config(&mut b, file(7, 120, 1));
        b.open(CFG, 0o1, 4, Some(file(7, 120, 1)));
        b.write(4, CFG, "{\"x\":1}", false);
        b.close(4, CFG);
        read_config(&mut b, file(7, 127, 2));
        read_config(&mut b, file(7, 127, 2));
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].redundant_calls, 5, "only the read after the re-read");
        assert!(
            f[0].hazards.iter().any(|h| h.contains("write")),
            "{:?}",
            f[0].hazards
        );
        assert!(f[0].cache.clone().unwrap_or_default().safe);
    }

    #[test]
    fn a_directory_listed_in_full_again_unchanged_is_redundant() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            b.open("/srv/plugins", 0o200000, 5, Some(dir(40)));
            b.call(Sys::Getdents64, |c, b| {
                c.fd = Some(5);
                c.path = Some(b.s("/srv/plugins"));
                c.ev = ev::PATH_FROM_FD;
                c.count = 32768;
                c.ret = 400;
            });
            b.call(Sys::Getdents64, |c, b| {
                c.fd = Some(5);
                c.path = Some(b.s("/srv/plugins"));
                c.ev = ev::PATH_FROM_FD;
                c.count = 32768;
            });
            b.close(5, "/srv/plugins");
        }
        // A plugin is added: the listing changed.
        b.open("/srv/plugins/new.so", 0o101, 6, Some(file(41, 0, 5)));
        b.open("/srv/plugins", 0o200000, 5, Some(dir(40)));
        b.call(Sys::Getdents64, |c, b| {
            c.fd = Some(5);
            c.path = Some(b.s("/srv/plugins"));
            c.ev = ev::PATH_FROM_FD;
        });
        b.close(5, "/srv/plugins");
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (15, 8));
    }

    #[test]
    fn a_directory_listed_again_to_be_removed_is_no_reread() {
        // A test walks its temporary tree, then its cleanup (Rust's remove_dir_all,
        // shutil.rmtree) lists each directory again and removes it: a delete reading what
        // it removes. Listed a third time and kept instead, it is a reread.
        let list = |b: &mut TraceBuilder, d: &str| {
            b.open(d, 0o200000, 5, Some(dir(40)));
            b.call(Sys::Getdents64, |c, b| {
                c.fd = Some(5);
                c.path = Some(b.s(d));
                c.ev = ev::PATH_FROM_FD;
                c.count = 32768;
                c.ret = 48;
            });
            b.call(Sys::Getdents64, |c, b| {
                c.fd = Some(5);
                c.path = Some(b.s(d));
                c.ev = ev::PATH_FROM_FD;
                c.count = 32768;
            });
            b.close(5, d);
        };
        let mut b = TraceBuilder::new();
        for i in 0..20 {
            let d = format!("/tmp/t/{i}/leaf");
            list(&mut b, &d); // the walk
            list(&mut b, &d); // the cleanup
            b.call(Sys::Unlinkat, |c, b| {
                c.path = Some(b.s(&d));
                c.flags = 0x200; // AT_REMOVEDIR
            });
        }
        assert!(b.findings("reread-unchanged").is_empty());
        let mut b = TraceBuilder::new();
        for i in 0..20 {
            let d = format!("/tmp/t/{i}/leaf");
            list(&mut b, &d);
            list(&mut b, &d);
            b.stat(&d, Ok(dir(40)));
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].redundant_calls, 20 * 4);
    }

    const OBJ: &str = "/repo/.git/objects/4b/81f2b07056da780721e3f91801ab9f7b5cb88d";

    /// git's loose object read: open (no stat with it, as an strace import records it),
    /// fstat, mmap of the whole file, close.
    fn map_object(b: &mut TraceBuilder, st: dejavu_trace::FileStat, flags: u64, prot: u64) {
        b.open(OBJ, 0o2000000, 3, None);
        b.call(Sys::Newfstatat, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s(OBJ));
            c.ev = ev::PATH_FROM_FD;
            c.flags = 0x1000; // AT_EMPTY_PATH
            c.stat = Some(b.st(st));
        });
        b.call(Sys::Mmap, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s(OBJ));
            c.ev = ev::PATH_FROM_FD;
            c.offset = Some(0);
            c.count = st.size as u64;
            c.flags = flags;
            c.aux = prot;
            c.ret = 0x7efe_b13c_2000;
        });
        b.close(3, OBJ);
    }

    #[test]
    fn a_file_mapped_in_full_again_unchanged_is_a_reread() {
        // git log -p maps every loose object twice, back to back.
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            map_object(&mut b, file(70, 131, 1), 0, 0);
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (12, 8, 8 * 500)
        );
        assert!(
            !f[0].hazards.iter().any(|h| h.contains("no identity")),
            "the identity came from fstat: {:?}",
            f[0].hazards
        );
    }

    #[test]
    fn only_a_finding_with_files_of_unknown_identity_says_so() {
        // An strace log: git fstats the objects it maps, not .git/HEAD, which it reads.
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            map_object(&mut b, file(70, 131, 1), 0, 0);
            b.open("/repo/.git/HEAD", 0, 4, None);
            b.read(4, "/repo/.git/HEAD", 256, 23);
            b.read(4, "/repo/.git/HEAD", 233, 0);
            b.close(4, "/repo/.git/HEAD");
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 2, "{f:#?}");
        let unknown = |p: &str| {
            let f = f.iter().find(|f| f.paths[0] == p).expect(p);
            f.hazards.iter().any(|h| h.contains("no identity"))
        };
        assert!(unknown("/repo/.git/HEAD"));
        assert!(!unknown(OBJ), "the objects' identity came from fstat");
    }

    #[test]
    fn a_mapping_that_could_write_the_file_or_covers_part_of_it_is_not_a_read() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            // Opened read-write, MAP_SHARED with PROT_WRITE.
            b.open(OBJ, 0o2, 3, Some(file(70, 131, 1)));
            b.call(Sys::Mmap, |c, b| {
                c.fd = Some(3);
                c.path = Some(b.s(OBJ));
                c.ev = ev::PATH_FROM_FD;
                c.offset = Some(0);
                c.count = 131;
                c.flags = 1;
                c.aux = 3;
                c.ret = 0x7efe_b13c_2000;
            });
            b.close(3, OBJ);
        }
        for _ in 0..3 {
            // Only the second page of a bigger file.
            b.open(CFG, 0, 3, Some(file(7, 10_000, 1)));
            b.call(Sys::Mmap, |c, b| {
                c.fd = Some(3);
                c.path = Some(b.s(CFG));
                c.ev = ev::PATH_FROM_FD;
                c.offset = Some(4096);
                c.count = 4096;
                c.ret = 0x7efe_b13c_2000;
            });
            b.close(3, CFG);
        }
        assert!(b.findings("reread-unchanged").is_empty());
    }

    #[test]
    fn sendfile_and_copy_file_range_read_their_input_and_stay_needed() {
        let mut b = TraceBuilder::new();
        for sys in [Sys::Sendfile, Sys::Sendfile, Sys::CopyFileRange] {
            b.open(CFG, 0, 4, Some(file(7, 120, 1)));
            b.call(sys, |c, b| {
                c.fd = Some(9); // a socket, or the copy's destination
                c.fd2 = Some(4);
                c.path = Some(b.s("socket:[77]"));
                c.path2 = Some(b.s(CFG));
                c.count = 120;
                c.ret = 120;
            });
            b.close(4, CFG);
        }
        let f = b.findings("reread-unchanged");
        assert_eq!(f.len(), 1, "{f:?}");
        // 3 cycles of 3 calls; the 2 repeats' opens and closes are redundant, their
        // transfers are not (with the content cached, a write would still send it).
        assert_eq!((f[0].calls, f[0].redundant_calls), (9, 4));
    }

    #[test]
    fn readv_and_preadv_read_in_full_count_like_read() {
        let mut b = TraceBuilder::new();
        for sys in [Sys::Readv, Sys::Preadv, Sys::Preadv2] {
            b.open(CFG, 0, 3, Some(file(7, 120, 1)));
            b.call(sys, |c, b| {
                c.fd = Some(3);
                c.path = Some(b.s(CFG));
                c.ev = ev::PATH_FROM_FD;
                if sys != Sys::Readv {
                    c.offset = Some(0);
                }
                c.count = 4096;
                c.ret = 120;
            });
            b.close(3, CFG);
        }
        let f = b.findings("reread-unchanged");
        assert_eq!((f[0].calls, f[0].redundant_calls), (9, 6));
    }

    #[test]
    fn generated_files_other_processes_and_new_programs_do_not_count() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            // /proc files: size 0, content generated on read.
            b.open("/proc/self/stat", 0, 3, Some(file(9, 0, 1)));
            b.read(3, "/proc/self/stat", 1024, 300);
            b.read(3, "/proc/self/stat", 1024, 0);
            b.close(3, "/proc/self/stat");
        }
        read_config(&mut b, file(7, 120, 1));
        b.exec("/usr/bin/python3", &["python3", "other.py"]);
        read_config(&mut b, file(7, 120, 1));
        b.fork(200);
        b.pid = 200;
        b.tid = 200;
        read_config(&mut b, file(7, 120, 1));
        assert!(b.findings("reread-unchanged").is_empty());
    }
}
