//! open-close-churn: the same file opened, a few small operations, closed, again and again
//! in one process: opened for writing (appendFileSync per record, open+pwrite+close per
//! write), or read-only without reading it in full (6 bytes of /dev/urandom per file, a
//! directory reopened to resolve one name per entry).

use super::reads::{read_of, Coverage, Reads};
use crate::group::{count, extras, uses_fd, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{FdKind, PathKey, Version, View};
use dejavu_trace::{ev, mode, stat_known, StackId, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "open-close-churn",
    summary: "the same file opened, a few small operations (writes, or reads short of the whole \
file), closed, again and again",
    explain: "A cycle is one successful open (open, openat, openat2, creat) until the close of that \
descriptor, with at most max_ops calls on the descriptor in between (writes, reads, lseek, fstat, \
fsync ...). Two kinds count. A write cycle opens a regular file for writing (O_WRONLY or O_RDWR). A \
read cycle opens read-only (O_RDONLY, O_PATH) a regular file, a directory or a device other than a \
terminal and /dev/null (/dev/urandom), and does not read it in full: a cycle that reads a regular \
file from offset 0 to its end (read, pread, readv, sendfile, copy_file_range or mmap, as \
reread-unchanged counts them) or lists a directory to its end is a re-read, and reread-unchanged's; \
a read cycle whose descriptor is duplicated (dup, dup2, fcntl F_DUPFD: handed on, as a shell does \
for a child's stdin) is not counted, nor are files under /proc and /sys (generated on each open). \
Cycles are counted per process (all its threads) and path, write and read cycles apart; a cycle with \
more than max_ops calls is real work and not counted. Every short cycle after the first is a repeat, \
and its open and its close are the redundant calls (so N cycles give 2 x N calls and 2 x (N - 1) \
redundant calls, and the time counted is those opens' and closes' own durations): one handle kept \
open would have carried the same operations. Read cycles count only when one process made at least \
min_read_cycles of them on the path: a file read twice at start-up is not churn. A cycle that opened \
a different file (other device or inode) than the previous cycle is not a repeat when no traced \
process touched the path in between — another program replaced or rotated the file, and reopening \
was needed; when the program itself replaced it (unlink, rename, recreate), the cycle still counts. \
An exclusive create (O_CREAT|O_EXCL: a lock file such as git's config.lock, created, written and \
renamed over config once per setting) is no cycle: each open makes a new file that no kept handle \
could stand for. A directory's cycles in which a name in it was opened (openat relative to its \
descriptor: rsync opens each directory of a file's path O_PATH, opens the next name in it and \
closes it, again for every file) say so, and their fix is to keep the descriptor across names.",
    example: "for each chat record: fs.appendFileSync('chats/session.jsonl', line)   // open + write + \
close, 5,000 times\nfor each file copied: open('/dev/urandom'), read 6 bytes, close   // a temp-file \
suffix, rsync -a",
    fix: "open the file once and keep the handle; buffer the small writes and flush them in batches, on \
exit and on fatal signals (or move the writes off the hot path onto one writer that owns the handle). \
For reads: keep the descriptor and pread what is needed; for a directory opened to resolve names, \
keep its descriptor and use openat/fstatat on it; for random bytes, call getrandom(2)",
    hazards: "Another program may rotate or rename the file (logrotate): with one long-lived handle the \
program keeps writing to the old file, so reopen on rotation (SIGHUP, or when the path's dev/inode no \
longer matches fstat of the handle); a kept read handle likewise keeps reading a file that was \
replaced by rename. Threads or processes sharing one handle need a lock, or O_APPEND with one write \
per record, or pread/pwrite at explicit offsets. Buffered data must be flushed on exit, on signals \
and on a broken pipe, or the last records are lost.",
    options: &[
        (
            "max_ops",
            8,
            "a cycle with at most this many calls between its open and its close is short enough to count",
        ),
        (
            "min_read_cycles",
            10,
            "read-only cycles count only when one process made at least this many on the same path",
        ),
    ],
    make: |cfg: &Config| {
        Box::new(OpenCloseChurn {
            max_ops: cfg.opt("open-close-churn", "max_ops", 8),
            min_read_cycles: cfg.opt("open-close-churn", "min_read_cycles", 10).max(2),
            open: FxHashMap::default(),
            open_dirs: FxHashMap::default(),
            paths: FxHashMap::default(),
            reads: FxHashMap::default(),
            tallies: Tallies::default(),
            extra: FxHashMap::default(),
        })
    },
};

const O_ACCMODE: u64 = 3;
const O_TRUNC: u64 = 0o1000;
const O_CREAT: u64 = 0o100;
const O_EXCL: u64 = 0o200;

/// What a cycle opened.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// A regular file, for writing.
    Write,
    /// A regular file, read-only.
    File,
    /// A directory.
    Dir,
    /// A device (/dev/urandom).
    Device,
}

/// A cycle under way: an open whose close has not come yet.
#[derive(Clone, Copy)]
struct Cycle {
    path: PathKey,
    opened: Opened,
    /// The open's call number in the trace (`View::seq`).
    open_call: u64,
    open_stack: Option<StackId>,
    opened_ts: u64,
    open_dur: u64,
    ops: u64,
    /// The kinds of calls made between the open and the close, with their counts (the
    /// first few kinds; a cycle with more is counted without them).
    kinds: OpKinds,
    ident: Option<(u64, u64)>,
    version_at_open: Version,
    trunc: bool,
    tid: u32,
    /// Read cycles: the file's size (open's or fstat's answer), how far the reads covered
    /// it, whether a listing reached its end, whether the descriptor was duplicated.
    size: Option<u64>,
    reads: Coverage,
    listed: bool,
    dupped: bool,
    /// A directory's: a name in it was opened while it was open (by openat relative to
    /// it, as rsync walks a path one component at a time).
    resolved: bool,
}

impl Cycle {
    /// A read cycle that read the whole file or listed the whole directory: a re-read,
    /// not churn.
    fn read_in_full(&self) -> bool {
        match self.opened {
            Opened::File => self.reads.full(),
            Opened::Dir => self.listed,
            Opened::Write | Opened::Device => false,
        }
    }
}

/// The last finished short cycle of one (pid, path).
#[derive(Clone, Copy)]
struct Last {
    ident: Option<(u64, u64)>,
    version_at_close: Version,
    tid: u32,
}

/// A repeated read cycle held back until its path has `min_read_cycles` cycles.
#[derive(Clone, Copy)]
struct Held {
    cycle: Cycle,
    close_call: u64,
    close_ts: u64,
    close_dur: u64,
    close_stack: Option<StackId>,
    threads: bool,
}

/// Read cycles of one (process image, path).
#[derive(Default)]
struct ReadRun {
    last: Option<Last>,
    /// Short read cycles so far (counted ones and those before --skip-startup).
    cycles: u64,
    /// Counted cycles not yet in the tally: their number, and the repeats among them.
    pending_cycles: u64,
    held: Vec<Held>,
}

/// Call kinds and how many of each, the first few kinds seen.
#[derive(Clone, Copy, Default)]
struct OpKinds([Option<(Sys, u32)>; 4]);

impl OpKinds {
    fn add(&mut self, sys: Sys) {
        for k in self.0.iter_mut() {
            match k {
                Some((s, n)) if *s == sys => {
                    *n += 1;
                    return;
                }
                None => {
                    *k = Some((sys, 1));
                    return;
                }
                Some(_) => {}
            }
        }
    }
}

#[derive(Default)]
struct Extra {
    redundant: u64,
    cycles: u64,
    repeats: u64,
    /// Of `cycles` and `repeats`, the read-only ones.
    read_cycles: u64,
    read_repeats: u64,
    ops: u64,
    /// Calls between open and close in the repeated cycles, by kind.
    op_kinds: Vec<(Sys, u64)>,
    trunc: u64,
    replaced: u64,
    threads: bool,
    /// Repeated cycles of a directory while a name in it was opened.
    resolved: u64,
    /// Read cycles of a regular file, of a directory, of a device.
    files: bool,
    dirs: bool,
    devices: bool,
}

struct OpenCloseChurn {
    max_ops: u64,
    min_read_cycles: u64,
    open: FxHashMap<(u32, i32), Cycle>,
    /// The directories among `open`, by (process, path): their descriptor.
    open_dirs: FxHashMap<(u32, PathKey), i32>,
    paths: FxHashMap<(u32, PathKey), Last>,
    reads: FxHashMap<(u32, PathKey), ReadRun>,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

/// Whether a path's content is generated when it is opened (/proc, /sys): reopening those
/// is how they are read afresh.
fn generated(path: &[u8]) -> bool {
    path.starts_with(b"/proc/") || path.starts_with(b"/sys/")
}

/// Whether a repeat of `prev` that opened `ident` at `version_at_open` is a repeat, and
/// whether another program replaced the file.
fn judge(prev: Option<Last>, ident: Option<(u64, u64)>, version_at_open: Version) -> (bool, bool) {
    match prev {
        None => (false, false),
        Some(p) => match (p.ident, ident) {
            // A different file, and nothing traced touched the path since the previous
            // close: another program replaced it; this reopen was needed.
            (Some(a), Some(b)) if a != b && version_at_open == p.version_at_close => (false, true),
            _ => (true, false),
        },
    }
}

impl OpenCloseChurn {
    fn opened(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let fd = s.ret as i32;
        // The number was free: whatever we thought it was is gone.
        self.open.remove(&(s.pid, fd));
        let Some(path) = v.path else { return };
        let st = s.stat.map(|id| cx.stat(id));
        let bytes = cx.replay.paths.bytes(path);
        let kind = FdKind::classify(bytes, st.as_ref());
        let opened = if s.flags & O_ACCMODE != 0 {
            if s.flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL {
                // An exclusive create: a lock file, or a new file that must not exist
                // (git's `config.lock`, created, written, then renamed over `config`, once
                // per setting). Each open makes a new file no kept handle could stand for.
                return;
            }
            match kind {
                FdKind::File => Opened::Write,
                _ => return,
            }
        } else {
            if generated(bytes) || bytes.first() != Some(&b'/') {
                return;
            }
            // Under /dev, a name without a stat answer is taken for a device (/dev/urandom);
            // regular files there (/dev/shm) are files.
            let regular = st.as_ref().is_some_and(|st| {
                st.known & stat_known::MODE != 0 && st.file_type() == mode::S_IFREG
            });
            match kind {
                FdKind::File | FdKind::Other if bytes.starts_with(b"/dev/") && !regular => {
                    Opened::Device
                }
                FdKind::File => Opened::File,
                FdKind::Dir => Opened::Dir,
                _ => return, // terminals, /dev/null, pipes, sockets
            }
        };
        let ident = st
            .filter(|st| st.known & stat_known::IDENTITY != 0)
            .map(|st| (st.dev, st.ino));
        let size = st
            .filter(|st| st.known & stat_known::SIZE != 0 && st.size >= 0)
            .map(|st| st.size as u64);
        self.open.insert(
            (s.pid, fd),
            Cycle {
                path,
                opened,
                open_call: v.seq,
                open_stack: s.stack,
                opened_ts: s.ts,
                open_dur: s.dur,
                ops: 0,
                kinds: OpKinds::default(),
                ident,
                version_at_open: v.version,
                trunc: s.flags & O_TRUNC != 0,
                tid: s.tid,
                size,
                reads: Coverage::default(),
                listed: false,
                dupped: false,
                resolved: false,
            },
        );
        if opened == Opened::Dir {
            self.open_dirs.insert((s.pid, path), fd);
        }
    }

    /// An open of a name in a directory the process holds open in a cycle: the cycle's
    /// descriptor is what the name was resolved against (or could have been).
    fn resolved_in(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(dir) = v.path.and_then(|p| cx.replay.paths.parent(p)) else {
            return;
        };
        let Some(&fd) = self.open_dirs.get(&(s.pid, dir)) else {
            return;
        };
        match self.open.get_mut(&(s.pid, fd)) {
            Some(c) if c.path == dir => c.resolved = true,
            _ => {
                self.open_dirs.remove(&(s.pid, dir));
            }
        }
    }

    /// A call on the descriptor of a read cycle: what it read, what fstat said.
    fn read_op(c: &mut Cycle, s: &Syscall, fd: i32, primary: bool, cx: &Cx<'_>) {
        match s.sys {
            Sys::Dup | Sys::Dup2 | Sys::Dup3 if primary => c.dupped = true,
            // F_DUPFD, F_DUPFD_CLOEXEC.
            Sys::Fcntl if primary && matches!(s.flags, 0 | 1030) => c.dupped = true,
            Sys::Getdents64 if s.ret == 0 => c.listed = true,
            Sys::Lseek if s.ret >= 0 => {
                c.reads.pos = s.ret as u64;
                if s.ret == 0 {
                    c.listed = false; // rewinddir
                }
            }
            Sys::Fstat | Sys::Newfstatat | Sys::Statx if s.ret >= 0 => {
                if let Some(st) = s.stat.map(|id| cx.stat(id)) {
                    if c.size.is_none()
                        && st.known & stat_known::SIZE != 0
                        && st.file_type() == mode::S_IFREG
                        && st.size >= 0
                    {
                        c.size = Some(st.size as u64);
                    }
                    if c.ident.is_none() && st.known & stat_known::IDENTITY != 0 {
                        c.ident = Some((st.dev, st.ino));
                    }
                }
            }
            _ => match read_of(s, true) {
                Some(Reads::Known(r)) if r.fd == fd => c.reads.read(&r, c.size),
                Some(Reads::Unknown(f)) if f == fd => c.reads.broken = true,
                _ => {}
            },
        }
    }

    fn closed(&mut self, s: &Syscall, v: &View, c: Cycle, cx: &Cx<'_>) {
        if c.ops > self.max_ops {
            return;
        }
        if c.opened != Opened::Write {
            self.read_closed(s, v, c, cx);
            return;
        }
        let key = (v.image, c.path);
        let prev = self.paths.insert(
            key,
            Last {
                ident: c.ident,
                version_at_close: v.version,
                tid: c.tid,
            },
        );
        let (repeat, replaced) = judge(prev, c.ident, c.version_at_open);
        if !cx.config.counts(c.opened_ts) {
            return;
        }
        let t = self.tallies.get(v.image, c.path);
        t.calls += 2;
        let e = self.extra.entry(key).or_default();
        e.cycles += 1;
        e.replaced += replaced as u64;
        if !repeat {
            return;
        }
        let threads = prev.is_some_and(|p| p.tid != c.tid);
        self.count_repeat(
            v.image,
            &Held {
                cycle: c,
                close_call: v.seq,
                close_ts: s.ts,
                close_dur: s.dur,
                close_stack: s.stack,
                threads,
            },
            cx,
        );
    }

    /// A short read cycle ended: held back until its path has `min_read_cycles` cycles.
    fn read_closed(&mut self, s: &Syscall, v: &View, c: Cycle, cx: &Cx<'_>) {
        if c.dupped || c.read_in_full() {
            return;
        }
        let key = (v.image, c.path);
        let run = self.reads.entry(key).or_default();
        let prev = run.last.replace(Last {
            ident: c.ident,
            version_at_close: v.version,
            tid: c.tid,
        });
        let (repeat, replaced) = judge(prev, c.ident, c.version_at_open);
        run.cycles += 1;
        if !cx.config.counts(c.opened_ts) {
            return;
        }
        let e = self.extra.entry(key).or_default();
        e.replaced += replaced as u64;
        run.pending_cycles += 1;
        if repeat {
            run.held.push(Held {
                cycle: c,
                close_call: v.seq,
                close_ts: s.ts,
                close_dur: s.dur,
                close_stack: s.stack,
                threads: prev.is_some_and(|p| p.tid != c.tid),
            });
        }
        if run.cycles < self.min_read_cycles {
            return;
        }
        // The path is churned: what was held back counts now, and from here on each cycle
        // as it ends.
        let held = std::mem::take(&mut run.held);
        let cycles = std::mem::take(&mut run.pending_cycles);
        self.tallies.get(v.image, c.path).calls += 2 * cycles;
        let e = self.extra.entry(key).or_default();
        e.cycles += cycles;
        e.read_cycles += cycles;
        for h in &held {
            self.count_repeat(v.image, h, cx);
        }
    }

    /// One repeated cycle: its open and its close are redundant.
    fn count_repeat(&mut self, image: u32, h: &Held, cx: &Cx<'_>) {
        let c = &h.cycle;
        let t = self.tallies.get(image, c.path);
        t.redundant(c.opened_ts, c.open_dur, c.open_stack);
        t.redundant(h.close_ts, h.close_dur, h.close_stack);
        cx.mark(c.open_call, c.open_dur, c.open_stack);
        cx.mark(h.close_call, h.close_dur, h.close_stack);
        let e = self.extra.entry((image, c.path)).or_default();
        e.redundant += 2;
        e.repeats += 1;
        e.resolved += c.resolved as u64;
        e.ops += c.ops;
        for (sys, n) in c.kinds.0.into_iter().flatten() {
            add_kind(&mut e.op_kinds, sys, n as u64);
        }
        e.trunc += c.trunc as u64;
        e.threads |= h.threads;
        if c.opened != Opened::Write {
            e.read_repeats += 1;
        }
        e.files |= c.opened == Opened::File;
        e.dirs |= c.opened == Opened::Dir;
        e.devices |= c.opened == Opened::Device;
    }
}

impl Detector for OpenCloseChurn {
    fn wants(&self, sys: Sys) -> bool {
        uses_fd(sys)
            || matches!(
                sys,
                Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat | Sys::Mmap
            )
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if matches!(s.sys, Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat) {
            if !self.open_dirs.is_empty() {
                self.resolved_in(s, v, cx);
            }
            if s.ev & ev::UNFINISHED == 0 && s.ret >= 0 {
                self.opened(s, v, cx);
            }
            return;
        }
        if self.open.is_empty() {
            return;
        }
        for fd in [s.fd, s.fd2].into_iter().flatten() {
            let key = (s.pid, fd);
            let Some(c) = self.open.get_mut(&key) else {
                continue;
            };
            let primary = Some(fd) == s.fd;
            let seen = if primary { v.fd } else { v.fd2 };
            // The descriptor table must agree that this is still the open we saw; dup2 onto
            // the descriptor replaces it without a close of ours.
            if seen.is_some_and(|f| f.opened_ts != c.opened_ts)
                || (!primary && matches!(s.sys, Sys::Dup2 | Sys::Dup3))
            {
                self.open.remove(&key);
                continue;
            }
            if s.sys == Sys::Close && primary {
                if s.ret == -9 {
                    continue; // EBADF: nothing was closed
                }
                let c = *c;
                self.open.remove(&key);
                self.closed(s, v, c, cx);
            } else {
                c.ops += 1;
                c.kinds.add(s.sys);
                if c.opened != Opened::Write {
                    Self::read_op(c, s, fd, primary, cx);
                }
            }
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let out = self.tallies.findings_with(
            &INFO, cx, Wording { cache: false }, &|_, _| Vec::new(),
            &mut extras(
                &self.extra,
                |a, b| {
                    a.redundant += b.redundant;
                    a.cycles += b.cycles;
                    a.repeats += b.repeats;
                    a.read_cycles += b.read_cycles;
                    a.read_repeats += b.read_repeats;
                    a.ops += b.ops;
                    for &(sys, n) in &b.op_kinds {
                        add_kind(&mut a.op_kinds, sys, n);
                    }
                    a.trunc += b.trunc;
                    a.replaced += b.replaced;
                    a.threads |= b.threads;
                    a.resolved += b.resolved;
                    a.files |= b.files;
                    a.dirs |= b.dirs;
                    a.devices |= b.devices;
                },
                |f, e| {
                    let per = e.ops as f64 / e.repeats.max(1) as f64;
                    let reads_only = e.read_repeats == e.repeats;
                    let kind = match (reads_only, e.read_repeats) {
                        (true, _) => "read-only open/close cycles",
                        (false, 0) => "open/close cycles",
                        (false, _) => "open/close cycles (some read-only)",
                    };
                    // A directory opened only to resolve names relative to it (openat on
                    // its descriptor is no call on it) has nothing in between.
                    // Most repeats held the directory only while a name in it was opened.
                    let walked = e.resolved * 2 >= e.repeats;
                    let between = if e.ops == 0 && walked {
                        "open only while a name in it was opened: the directory opened again \
                         for each name"
                            .to_string()
                    } else if e.ops == 0 {
                        "no call on the descriptor in between".to_string()
                    } else {
                        format!(
                            "{:.1} call{} in between on average{}",
                            per,
                            if per == 1.0 { "" } else { "s" },
                            op_names(&e.op_kinds)
                        )
                    };
                    f.example = Some(format!(
                        "{} of {} {kind} repeated, {between}",
                        count(e.repeats),
                        count(e.cycles),
                    ));
                    if reads_only {
                        let mut fix = Vec::new();
                        if e.files {
                            fix.push(
                                "open the file once, keep the descriptor and pread what is needed at its offset",
                            );
                        }
                        if e.dirs && walked {
                            fix.push(
                                "keep the directory's descriptor open across the names resolved in \
                                 it (one open per directory for the run, a small cache of descriptors \
                                 by directory path) instead of opening it again for each name",
                            );
                        } else if e.dirs {
                            fix.push(
                                "open the directory once, keep its descriptor and resolve names with \
                                 openat/fstatat relative to it",
                            );
                        }
                        if e.devices {
                            fix.push(
                                "for random bytes call getrandom(2), which needs no descriptor (or open \
                                 /dev/urandom once and keep it)",
                            );
                        }
                        f.fix = fix.join("; ");
                    }
                    if e.threads {
                        f.hazards.push(
                            "the cycles come from several threads: one shared handle needs a lock, or \
                             O_APPEND with one write per record, or pread/pwrite at explicit offsets"
                                .into(),
                        );
                    }
                    if e.trunc > 0 {
                        f.hazards.push(format!(
                            "{} cycle(s) opened with O_TRUNC: the program rewrites the whole file each time; \
                             keep the handle and rewrite in place (ftruncate + pwrite), or rewrite once per \
                             batch of changes",
                            count(e.trunc)
                        ));
                    }
                    if e.replaced > 0 {
                        f.hazards.push(format!(
                            "another program replaced the file {} time(s) during the trace (a different \
                             inode, no traced change): a kept handle must be reopened when that happens",
                            count(e.replaced)
                        ));
                    }
                    if !reads_only || e.files || e.dirs {
                        f.hazards.push(if reads_only {
                            "a kept descriptor keeps referring to what it opened: if the path may be \
                             replaced (renamed over, rotated, the directory moved), compare fstat's \
                             dev/inode with the path's now and then, or reopen on the program's own \
                             renames"
                                .into()
                        } else {
                            "reopen the kept handle when the file is rotated or renamed, and flush \
                             buffered data on exit and on signals"
                                .into()
                        });
                    } else {
                        f.hazards.push(
                            "a descriptor kept for the program's lifetime should be O_CLOEXEC, so \
                             programs it runs do not inherit it"
                                .into(),
                        );
                    }
                },
            ),
        );
        out
    }
}

fn add_kind(kinds: &mut Vec<(Sys, u64)>, sys: Sys, n: u64) {
    match kinds.iter_mut().find(|k| k.0 == sys) {
        Some(k) => k.1 += n,
        None => kinds.push((sys, n)),
    }
}

/// The calls between open and close for the example: ` (pwrite64)` when they are all of
/// one kind, else the kinds by count, most first: ` (3,999 pwrite64, 1 fsync)`.
fn op_names(kinds: &[(Sys, u64)]) -> String {
    let mut k: Vec<(Sys, u64)> = kinds.to_vec();
    k.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.name().cmp(b.0.name())));
    match k.as_slice() {
        [] => String::new(),
        [(s, _)] => format!(" ({})", s.name()),
        more => {
            let parts: Vec<String> = more
                .iter()
                .take(3)
                .map(|(s, n)| format!("{} {}", count(*n), s.name()))
                .collect();
            let rest = if more.len() > 3 { ", ..." } else { "" };
            format!(" ({}{rest})", parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{chardev, dir, file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::{ev, Sys};

    const O_CLOEXEC: u64 = 0o2000000;
    const O_DIRECTORY: u64 = 0o200000;
    const O_PATH: u64 = 0o10000000;
    const URANDOM: &str = "/dev/urandom";

    /// rsync's temp-file suffix: open /dev/urandom, read 6 bytes, close, per file.
    fn urandom(b: &mut TraceBuilder, n: usize) {
        for _ in 0..n {
            b.open(URANDOM, O_CLOEXEC, 3, Some(chardev(1, 9)));
            b.read(3, URANDOM, 6, 6);
            b.close(3, URANDOM);
        }
    }

    fn churn_with(b: TraceBuilder, opts: &[(&str, &str)]) -> Vec<crate::Finding> {
        let mut cfg = Config {
            min_calls: 1,
            ..Config::default()
        };
        for (k, v) in opts {
            cfg.options
                .insert(format!("open-close-churn.{k}"), v.to_string());
        }
        b.analyze_with(&cfg)
            .findings
            .into_iter()
            .filter(|f| f.detector == "open-close-churn")
            .collect()
    }

    const APPEND: u64 = 0o2101; // O_WRONLY|O_CREAT|O_APPEND

    fn pwrite(b: &mut TraceBuilder, fd: i32, path: &str, off: i64) {
        b.call(Sys::Pwrite64, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
            c.offset = Some(off);
            c.count = 8;
            c.ret = 8;
        });
    }

    /// Seed 004: open + pwrite + close per small write.
    fn per_write(b: &mut TraceBuilder, n: i64, ino: impl Fn(i64) -> u64) {
        for i in 0..n {
            b.open("/data/tile.bin", 0o101, 5, Some(file(ino(i), i * 8, 1)));
            pwrite(b, 5, "/data/tile.bin", i * 8);
            b.close(5, "/data/tile.bin");
        }
    }

    #[test]
    fn every_cycle_after_the_first_is_two_redundant_calls() {
        let mut b = TraceBuilder::new();
        per_write(&mut b, 10, |_| 7);
        let f = b.findings("open-close-churn");
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (20, 18, 18 * 500)
        );
        assert_eq!(f[0].paths, vec!["/data/tile.bin".to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("9 of 10 open/close cycles repeated, 1.0 call in between on average (pwrite64)")
        );
        assert_eq!(f[0].first_ts, 4000, "the second open");
    }

    #[test]
    fn a_lock_file_created_exclusively_per_update_is_no_churn() {
        // git's config.lock per setting: open(O_WRONLY|O_CREAT|O_EXCL), write, close, then
        // renamed over config. The same cycles without O_EXCL are churn.
        let run = |flags: u64| {
            let mut b = TraceBuilder::new();
            for i in 0..10 {
                b.open("/r/.git/config.lock", flags, 5, Some(file(100 + i, 0, 1)));
                pwrite(&mut b, 5, "/r/.git/config.lock", 0);
                b.close(5, "/r/.git/config.lock");
                b.call(Sys::Rename, |c, b| {
                    c.path = Some(b.s("/r/.git/config.lock"));
                    c.path2 = Some(b.s("/r/.git/config"));
                });
            }
            b.findings("open-close-churn").len()
        };
        assert_eq!(run(0o301), 0);
        assert_eq!(run(0o101), 1);
    }

    #[test]
    fn the_example_names_the_calls_the_cycles_made_not_the_last_cycles_first() {
        // TileDB's shape (seed 004): open + pwrite + close per write, then one flush that
        // opens, fsyncs and closes. The report once said "(fsync)" for 4,000 pwrites.
        let mut b = TraceBuilder::new();
        per_write(&mut b, 10, |_| 7);
        b.open("/data/tile.bin", 0o101, 5, Some(file(7, 80, 1)));
        b.call(Sys::Fsync, |c, b| {
            c.fd = Some(5);
            c.path = Some(b.s("/data/tile.bin"));
            c.ev = ev::PATH_FROM_FD;
        });
        b.close(5, "/data/tile.bin");
        let f = b.findings("open-close-churn");
        assert_eq!(
            f[0].example.as_deref(),
            Some("10 of 11 open/close cycles repeated, 1.0 call in between on average (9 pwrite64, 1 fsync)")
        );
    }

    #[test]
    fn a_device_opened_read_and_closed_per_item_is_churn() {
        let mut b = TraceBuilder::new();
        urandom(&mut b, 20);
        let f = b.findings("open-close-churn");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (40, 38));
        assert_eq!(f[0].paths, vec![URANDOM.to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("19 of 20 read-only open/close cycles repeated, 1.0 call in between on average (read)")
        );
        assert!(f[0].fix.contains("getrandom"), "{}", f[0].fix);
        assert!(
            !f[0].fix.contains("buffer the small writes"),
            "{}",
            f[0].fix
        );
    }

    #[test]
    fn read_cycles_need_min_read_cycles_on_one_path_in_one_process() {
        let mut b = TraceBuilder::new();
        urandom(&mut b, 9);
        assert!(b.findings("open-close-churn").is_empty(), "9 < 10 cycles");
        // Nine in each of two processes: neither reaches ten.
        let mut b = TraceBuilder::new();
        urandom(&mut b, 9);
        b.fork(200);
        b.pid = 200;
        b.tid = 200;
        urandom(&mut b, 9);
        assert!(b.findings("open-close-churn").is_empty());
        // Ten: the cycles held back count too.
        let mut b = TraceBuilder::new();
        urandom(&mut b, 10);
        let f = b.findings("open-close-churn");
        assert_eq!((f[0].calls, f[0].redundant_calls), (20, 18));
        // The option moves the threshold.
        let mut b = TraceBuilder::new();
        urandom(&mut b, 3);
        let f = churn_with(b, &[("min_read_cycles", "3")]);
        assert_eq!((f[0].calls, f[0].redundant_calls), (6, 4));
    }

    #[test]
    fn a_directory_reopened_to_resolve_one_name_per_entry_is_churn() {
        // rsync's sender: per file, open the file's directory O_PATH, openat the file
        // relative to it, close the directory.
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            b.open(
                "/src/dir00",
                O_PATH | O_DIRECTORY | O_CLOEXEC,
                6,
                Some(dir(40)),
            );
            let f = format!("/src/dir00/f{i:04}.txt");
            b.open(&f, 0o400000, 7, Some(file(100 + i, 50, 1))); // O_NOFOLLOW
            b.close(6, "/src/dir00");
            b.read(7, &f, 50, 50);
            b.close(7, &f);
        }
        let f = b.findings("open-close-churn");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].paths, vec!["/src/dir00".to_string()]);
        assert_eq!((f[0].calls, f[0].redundant_calls), (24, 22));
        // The descriptor is what the file's name was resolved against: the fix is to keep
        // it across names, which rsync already resolves relative to it.
        assert_eq!(
            f[0].example.as_deref(),
            Some(
                "11 of 12 read-only open/close cycles repeated, open only while a name in it was \
                 opened: the directory opened again for each name"
            )
        );
        assert!(f[0].fix.contains("across the names"), "{}", f[0].fix);
        // A directory opened and closed with nothing opened in it.
        let mut b = TraceBuilder::new();
        for _ in 0..12 {
            b.open(
                "/src/dir00",
                O_PATH | O_DIRECTORY | O_CLOEXEC,
                6,
                Some(dir(40)),
            );
            b.close(6, "/src/dir00");
        }
        let f = b.findings("open-close-churn");
        assert_eq!(
            f[0].example.as_deref(),
            Some("11 of 12 read-only open/close cycles repeated, no call on the descriptor in between")
        );
        assert!(f[0].fix.contains("relative to it"), "{}", f[0].fix);
    }

    #[test]
    fn files_read_in_full_are_rereads_not_churn() {
        let mut b = TraceBuilder::new();
        for _ in 0..12 {
            // Read to the end: reread-unchanged's.
            b.open("/etc/app.json", O_CLOEXEC, 3, Some(file(5, 100, 1)));
            b.read(3, "/etc/app.json", 4096, 100);
            b.read(3, "/etc/app.json", 4096, 0);
            b.close(3, "/etc/app.json");
            // Listed to the end: reread-unchanged's too.
            b.open("/srv/plugins", O_DIRECTORY, 4, Some(dir(40)));
            b.call(Sys::Getdents64, |c, b| {
                c.fd = Some(4);
                c.path = Some(b.s("/srv/plugins"));
                c.ev = ev::PATH_FROM_FD;
            });
            b.close(4, "/srv/plugins");
            // Mapped in full (git's loose objects).
            b.open(
                "/repo/.git/objects/ab/cd",
                O_CLOEXEC,
                5,
                Some(file(6, 131, 1)),
            );
            b.call(Sys::Mmap, |c, b| {
                c.fd = Some(5);
                c.path = Some(b.s("/repo/.git/objects/ab/cd"));
                c.ev = ev::PATH_FROM_FD;
                c.offset = Some(0);
                c.count = 131;
                c.ret = 0x7f00_0000_0000;
            });
            b.close(5, "/repo/.git/objects/ab/cd");
        }
        assert!(b.findings("open-close-churn").is_empty());
        // The header of a file, again and again: churn.
        let mut b = TraceBuilder::new();
        for _ in 0..12 {
            b.open("/data/big.db", O_CLOEXEC, 3, Some(file(5, 100_000, 1)));
            b.read(3, "/data/big.db", 100, 100);
            b.close(3, "/data/big.db");
        }
        let f = b.findings("open-close-churn");
        assert_eq!((f[0].calls, f[0].redundant_calls), (24, 22));
    }

    #[test]
    fn handed_on_generated_terminal_and_null_read_cycles_are_not_churn() {
        let mut b = TraceBuilder::new();
        for _ in 0..12 {
            // A shell's `cmd < input` per command: the descriptor is handed on.
            b.open("/w/input", 0, 3, Some(file(5, 100, 1)));
            b.call(Sys::Dup2, |c, b| {
                c.fd = Some(3);
                c.fd2 = Some(0);
                c.path = Some(b.s("/w/input"));
                c.ret = 0;
            });
            b.close(3, "/w/input");
            // Generated on each open.
            b.open("/proc/self/stat", 0, 4, Some(file(9, 0, 1)));
            b.read(4, "/proc/self/stat", 1024, 300);
            b.close(4, "/proc/self/stat");
            b.open("/dev/tty", 0, 5, Some(chardev(5, 0)));
            b.read(5, "/dev/tty", 1, 1);
            b.close(5, "/dev/tty");
            b.open("/dev/null", 0, 6, Some(chardev(1, 3)));
            b.close(6, "/dev/null");
        }
        let f = b.findings("open-close-churn");
        assert!(f.is_empty(), "{f:#?}");
    }

    #[test]
    fn one_kept_handle_is_clean() {
        let mut b = TraceBuilder::new();
        b.open("/data/tile.bin", 0o101, 5, Some(file(7, 0, 1)));
        for i in 0..10 {
            pwrite(&mut b, 5, "/data/tile.bin", i * 8);
        }
        b.close(5, "/data/tile.bin");
        assert!(b.findings("open-close-churn").is_empty());
    }

    #[test]
    fn append_per_record_is_caught_and_read_only_opens_are_not() {
        let mut b = TraceBuilder::new();
        for i in 0..5 {
            b.open("/app/chats/s.jsonl", APPEND, 18, Some(file(9, i * 10, 1)));
            b.write(18, "/app/chats/s.jsonl", "{\"i\":1}\n", true);
            b.close(18, "/app/chats/s.jsonl");
            b.open("/app/config.json", 0, 19, Some(file(10, 100, 1)));
            b.read(19, "/app/config.json", 4096, 100);
            b.close(19, "/app/config.json");
        }
        let f = b.findings("open-close-churn");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].paths, vec!["/app/chats/s.jsonl".to_string()]);
        assert_eq!(f[0].redundant_calls, 8);
    }

    #[test]
    fn long_cycles_are_real_work() {
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.open("/out/batch", 1, 3, Some(file(4, 0, 1)));
            for _ in 0..9 {
                b.write(3, "/out/batch", "x", false);
            }
            b.close(3, "/out/batch");
        }
        assert!(b.findings("open-close-churn").is_empty());
        // With max_ops 9 the same cycles are short.
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.open("/out/batch", 1, 3, Some(file(4, 0, 1)));
            for _ in 0..9 {
                b.write(3, "/out/batch", "x", false);
            }
            b.close(3, "/out/batch");
        }
        let mut cfg = Config {
            min_calls: 1,
            ..Config::default()
        };
        cfg.options
            .insert("open-close-churn.max_ops".into(), "9".into());
        let a = b.analyze_with(&cfg);
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.detector == "open-close-churn")
            .collect();
        assert_eq!(f[0].redundant_calls, 8);
    }

    #[test]
    fn a_file_replaced_by_another_program_makes_the_reopen_needed() {
        let mut b = TraceBuilder::new();
        // Rotated behind the program's back at cycles 3 and 4: new inodes, no traced change.
        per_write(&mut b, 6, |i| {
            if i < 3 {
                7
            } else if i < 4 {
                8
            } else {
                9
            }
        });
        let f = b.findings("open-close-churn");
        assert_eq!(
            f[0].redundant_calls, 6,
            "cycles 2, 3 and 6 repeat; 4 and 5 reopen a replaced file"
        );
        assert!(
            f[0].hazards
                .iter()
                .any(|h| h.contains("replaced the file 2 time")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn a_file_the_program_replaces_itself_still_counts() {
        let mut b = TraceBuilder::new();
        for i in 0..4 {
            b.call(Sys::Unlink, |c, b| c.path = Some(b.s("/data/tile.bin")));
            b.open("/data/tile.bin", 0o101, 5, Some(file(20 + i, 0, 1)));
            pwrite(&mut b, 5, "/data/tile.bin", 0);
            b.close(5, "/data/tile.bin");
        }
        let f = b.findings("open-close-churn");
        assert_eq!(f[0].redundant_calls, 6);
    }

    #[test]
    fn directories_processes_and_unclosed_handles_are_separate() {
        let mut b = TraceBuilder::new();
        b.open("/data/tile.bin", 0o101, 5, Some(file(7, 0, 1)));
        b.close(5, "/data/tile.bin");
        b.fork(200);
        b.pid = 200;
        b.tid = 200;
        b.open("/data/tile.bin", 0o101, 5, Some(file(7, 0, 1)));
        b.close(5, "/data/tile.bin");
        b.open("/data/tile.bin", 0o101, 6, Some(file(7, 0, 1)));
        b.open("/data", 0o200002, 7, Some(dir(3))); // a directory: not a file cycle
        b.close(7, "/data");
        b.open("/data", 0o200002, 7, Some(dir(3)));
        b.close(7, "/data");
        assert!(b.findings("open-close-churn").is_empty());
    }

    #[test]
    fn a_descriptor_replaced_by_dup2_is_not_a_cycle() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.open("/data/tile.bin", 0o101, 5, Some(file(7, 0, 1)));
            pwrite(&mut b, 5, "/data/tile.bin", 0);
            b.call(Sys::Dup2, |c, b| {
                c.fd = Some(1);
                c.fd2 = Some(5);
                c.path = Some(b.s("/dev/pts/0"));
                c.ret = 5;
            });
            b.close(5, "/dev/pts/0");
        }
        assert!(b.findings("open-close-churn").is_empty());
    }

    #[test]
    fn threads_and_truncation_add_hazards() {
        let mut b = TraceBuilder::new();
        for i in 0..4 {
            b.tid = if i % 2 == 0 { 100 } else { 101 };
            b.open("/state.json", 0o1101, 5, Some(file(7, 0, 1)));
            b.write(5, "/state.json", "{}", false);
            b.close(5, "/state.json");
        }
        let f = b.findings("open-close-churn");
        assert!(f[0].hazards.iter().any(|h| h.contains("several threads")));
        assert!(f[0].hazards.iter().any(|h| h.contains("O_TRUNC")));
    }
}
