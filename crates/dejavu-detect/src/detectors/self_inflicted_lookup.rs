//! self-inflicted-lookup: stat/fstat/lseek asked to learn what the process itself just did:
//! the size of a file only it has been writing (seed 004), or its own file position.

use crate::group::{Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{FdKind, PathKey, Version, View};
use dejavu_trace::{ev, mode, stat_known, Record, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "self-inflicted-lookup",
    summary:
        "stat/fstat/lseek to learn a size or offset the process's own writes already determine",
    explain: "Per process and file it writes, dejavu keeps the size the process can know \
without asking: established by a lookup answer (stat, fstat, statx, lseek(fd, 0, SEEK_END)) or by \
an explicit truncation (ftruncate, truncate, an open with O_TRUNC), then carried forward through \
the process's own successful writes (O_APPEND writes add their length; write at a known file \
position and pwrite extend the size to offset + length; ftruncate sets it). Per descriptor opened \
for writing it keeps the file position (0 after open, moved by read, write and lseek). A size \
lookup (the size in a stat answer of a regular file, or lseek(fd, 0, SEEK_END)) or position \
lookup (lseek(fd, 0, SEEK_CUR)) is redundant when the process wrote the file through its own \
calls since its last lookup or open of it, nothing else changed the path meanwhile (its version \
moved only by those writes), and the answer equals the derived value. Not redundant: the first \
lookup (it establishes), a lookup after opening with no write since (buffer sizing, isatty \
checks), a lookup after any change by another traced process (named in the hazards), a lookup \
whose answer differs from the derived value (another program wrote the file: counted as a stale \
answer), a lookup no write of the file by the process follows (its next call on the path, \
lookups, opens and closes aside, is no write or truncation: a lookup before removing the path asks \
what to remove, as Node.js's fs.rm does; one before setting its times asks what kind of file it \
is, as yarn's stat, isDirectory(), open, futimes of each extracted file does; one after the last \
write asks once what a variable would be read for once), and an existence or \
type check (a stat made by Python's os.path.exists, isfile, isdir, islink or pathlib's Path.exists, \
is_file, is_dir: it asks whether the file is there, which a kept size does not answer). Calls counts the size and position lookups of files the process writes or holds open for \
writing; lookups of files it only reads are never considered. Descriptors inherited from before \
the trace or shared with a forked child have no known position. A new program (exec) starts with \
nothing known.",
    example: "fd = open(log, O_WRONLY|O_APPEND); for each record: write(fd, rec, n); \
fstat(fd, &st); offset = st.st_size;   // the size is offset + n",
    fix: "keep the size (or offset) in a variable and add each write's return value (or take \
pwrite's offset + length) instead of asking the kernel; ask again only where another writer may \
have changed the file",
    hazards: "A derived size is right only while this process is the only writer: if another \
process (or another handle) may append, keep the lookup or coordinate (a lock, one writer). With \
several threads writing, keep the running size under the same lock as the writes. dejavu counts \
the answers that differed from the derived size with no change it saw.",
    options: &[],
    make: |_cfg: &Config| Box::new(SelfInflicted::default()),
};

const O_ACCMODE: u64 = 3;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_APPEND: u64 = 0o2000;
const SEEK_CUR: u64 = 1;
const SEEK_END: u64 = 2;
const STATX_SIZE: u64 = 0x200;

/// What the process can know about a file's size. Kept only for files the process
/// writes (or holds open for writing), so memory follows the files written, not looked up.
#[derive(Clone, Copy)]
struct Know {
    /// None: written by the process, size not established yet.
    size: Option<i64>,
    /// What a variable the process keeps would hold: the same, but carried through its
    /// own writes also after a change of the path it could not see (`dejavu whatif
    /// --track-size` serves it).
    blind: Option<i64>,
    /// Such a change happened since the variable was last set from an answer.
    foreign: bool,
    /// The path version this knowledge is valid at (the replay's version after the last
    /// call that set it).
    version: Version,
    /// The process wrote (or truncated) the file since its last lookup or open.
    dirty: bool,
}

/// What the process can know about one descriptor's file position.
#[derive(Clone, Copy)]
struct Pos {
    open_id: Option<u64>,
    pos: Option<i64>,
    append: bool,
    dirty: bool,
}

#[derive(Default)]
struct ProcState {
    know: FxHashMap<PathKey, Know>,
    pos: FxHashMap<i32, Pos>,
}

/// What each process can know of the sizes of the files it writes and of its file
/// positions, followed call by call; it says, for each size or position lookup, what the
/// process could have derived. The detector counts those lookups; `dejavu whatif
/// --track-size` replays them answered from the derived value.
#[derive(Default)]
pub(crate) struct Sizes {
    procs: FxHashMap<u32, ProcState>,
}

/// One size or position lookup of a file the process writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Asked {
    /// The file.
    pub(crate) path: PathKey,
    /// What the process could derive, when it wrote since it last asked and nothing else
    /// changed the path.
    pub(crate) expected: Option<i64>,
    /// What a variable kept by the process would hold, when it wrote since it last asked,
    /// whether or not another process changed the path since (it would not know).
    pub(crate) derived: Option<i64>,
    /// The answer.
    pub(crate) ans: i64,
    /// `size` or `position`.
    pub(crate) what: &'static str,
    /// Another traced process or handle changed the path since the process last knew its
    /// size.
    pub(crate) other_change: bool,
    /// A change the process could not see happened since a variable kept by it was last
    /// set from an answer.
    pub(crate) foreign: bool,
}

#[derive(Default)]
struct SelfInflicted {
    sizes: Sizes,
    tallies: Tallies,
    /// Lookups found redundant, by process and path, not counted yet: each waits for the
    /// process's next call on the path, which drops it when it removes the path
    /// (`is_removal`).
    pending: FxHashMap<(u32, PathKey), Vec<Pending>>,
}

/// A redundant lookup waiting for its thread's next call.
#[derive(Clone, Copy)]
struct Pending {
    image: u32,
    path: PathKey,
    ts: u64,
    dur: u64,
    stack: Option<dejavu_trace::StackId>,
    seq: u64,
}

/// A stat right before the process removes the path (unlink, unlinkat, rmdir: its next
/// call on the path, from any thread, lookups of the path in between) asks what to remove,
/// a file or a directory, not its size: Node.js's fs.rm lstat's a file twice, then unlinks
/// it (each on a thread of libuv's pool), and a program that removes what it wrote has no
/// size to keep (npm's cache: 69 such lookups a run, with the fix "keep the size in a
/// variable"). Not counted: the price, a size asked to decide a removal (a log removed
/// once it is too big) is not counted either. A rename is not a removal: a log rotated by
/// its size asks the size, then renames it.
/// Whether a stat was made by an existence or type check (the innermost interpreted frame
/// is Python's `os.path.exists`/`isfile`/`isdir`/`islink`/`lexists` or pathlib's `Path.exists`,
/// `is_file`, `is_dir`, `is_symlink`): it asks whether the file is there, not its size, and
/// keeping the size would not answer it. pip's `isfile()` of each file it had just written
/// (704 calls) had been read as size lookups, with the fix "keep the size in a variable".
pub(crate) fn existence_check(stack: &[dejavu_trace::Frame], cx: &Cx<'_>) -> bool {
    let Some(f) = stack
        .iter()
        .find(|f| f.kind != dejavu_trace::FrameKind::Native)
    else {
        return false;
    };
    if f.kind != dejavu_trace::FrameKind::Python {
        return false;
    }
    let get = |id: Option<dejavu_trace::StrId>| id.map_or(&[][..], |i| cx.strings.get(i));
    let (function, file) = (get(f.function), get(f.file));
    let module = file.rsplit(|&c| c == b'/').next().unwrap_or(file);
    let module = module.strip_suffix(b">").unwrap_or(module);
    let module = module.strip_suffix(b".py").unwrap_or(module);
    match module {
        b"genericpath" | b"posixpath" | b"<frozen genericpath" | b"<frozen posixpath" => {
            matches!(
                function,
                b"exists" | b"isfile" | b"isdir" | b"islink" | b"lexists"
            )
        }
        b"pathlib" => matches!(
            function,
            b"Path.exists" | b"Path.is_file" | b"Path.is_dir" | b"Path.is_symlink"
        ),
        _ => false,
    }
}

fn pos_of<'a>(ps: &'a mut ProcState, fd: i32, v: &View) -> Option<&'a mut Pos> {
    let f = v.fd?;
    let p = ps.pos.get_mut(&fd)?;
    match p.open_id {
        None => p.open_id = Some(f.open_id),
        // The descriptor number now names another open file.
        Some(id) if id != f.open_id => {
            ps.pos.remove(&fd);
            return None;
        }
        _ => {}
    }
    ps.pos.get_mut(&fd)
}

enum Lookup {
    Size(i64),
    Position(i64),
}

impl SelfInflicted {
    /// One size or position lookup: redundant when its answer is what the process could
    /// derive.
    fn lookup(&mut self, s: &Syscall, v: &View, a: Asked, cx: &Cx<'_>) {
        if !cx.config.counts(s.ts) || s.stack.is_some_and(|id| existence_check(&cx.stack(id), cx)) {
            return;
        }
        let t = self.tallies.get(v.image, a.path);
        t.calls += 1;
        match a.expected {
            Some(e) if e == a.ans => {
                self.pending
                    .entry((s.pid, a.path))
                    .or_default()
                    .push(Pending {
                        image: v.image,
                        path: a.path,
                        ts: s.ts,
                        dur: s.dur,
                        stack: s.stack,
                        seq: v.seq,
                    });
            }
            Some(_) => t.stale += 1,
            _ if a.other_change => {
                t.invalidations += 1;
                t.invalidated_by = t.invalidated_by.or(cx.replay.paths.changed_by(a.path));
            }
            _ => {}
        }
    }

    /// The process's next call on the path of redundant lookups: counts them when it writes
    /// the path again (a size kept from its writes would have served that write: an append
    /// position, a rotation check, a record's offset), waits when it is another lookup of
    /// it or opens or closes it (the next call decides for all), else drops them: a
    /// lookup before removing the path asks what to remove, one before setting its times
    /// asks what kind of file it is (yarn's utimes: stat, isDirectory(), open, futimes,
    /// close, 3,484 calls of an install), one after the last write asks once, at the end,
    /// what a variable would be read for once.
    fn settle(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(path) = v.path else { return };
        let key = (s.pid, path);
        if !self.pending.contains_key(&key)
            || matches!(
                s.sys,
                Sys::Stat
                    | Sys::Lstat
                    | Sys::Fstat
                    | Sys::Newfstatat
                    | Sys::Statx
                    | Sys::Lseek
                    | Sys::Open
                    | Sys::Openat
                    | Sys::Openat2
                    | Sys::Creat
                    | Sys::Close
            )
        {
            // Another lookup, or the file opened or closed on the way to what decides.
            return;
        }
        let list = self.pending.remove(&key).unwrap_or_default();
        if crate::group::is_write(s.sys) || matches!(s.sys, Sys::Truncate | Sys::Ftruncate) {
            self.count(&list, cx);
        }
    }

    fn count(&mut self, list: &[Pending], cx: &Cx<'_>) {
        for p in list {
            self.tallies
                .get(p.image, p.path)
                .redundant(p.ts, p.dur, p.stack);
            cx.mark(p.seq, p.dur, p.stack);
        }
    }
}

impl Sizes {
    fn on_lookup(&mut self, s: &Syscall, v: &View, path: PathKey, l: Lookup) -> Option<Asked> {
        // Only files the process writes can have self-inflicted lookups: a lookup of any
        // other file costs one hash probe and leaves nothing behind.
        let on_fd = s.ev & ev::PATH_FROM_FD != 0 || s.path.is_none();
        let writable = on_fd && v.fd.is_some_and(|f| f.flags & O_ACCMODE != 0);
        let ps = if writable {
            self.procs.entry(s.pid).or_default()
        } else {
            self.procs.get_mut(&s.pid)?
        };
        match l {
            Lookup::Size(ans) => {
                let k = ps.know.get(&path).copied();
                if k.is_none() && !writable {
                    return None;
                }
                let valid = k.filter(|k| k.version == v.version);
                let expected = valid.filter(|k| k.dirty).and_then(|k| k.size);
                let other =
                    k.is_some_and(|k| k.dirty && k.size.is_some() && k.version != v.version);
                let derived = k.filter(|k| k.dirty).and_then(|k| k.blind);
                let foreign = k.is_some_and(|k| k.foreign || k.version != v.version);
                ps.know.insert(
                    path,
                    Know {
                        size: Some(ans),
                        blind: Some(ans),
                        foreign: false,
                        version: v.version,
                        dirty: false,
                    },
                );
                if s.sys == Sys::Lseek {
                    if let Some(p) = s.fd.and_then(|fd| pos_of(ps, fd, v)) {
                        p.pos = Some(ans);
                        p.dirty = false;
                    }
                }
                Some(Asked {
                    path,
                    expected,
                    derived,
                    ans,
                    what: "size",
                    other_change: other,
                    foreign,
                })
            }
            Lookup::Position(ans) => {
                // Positions are followed for descriptors opened for writing.
                let p = s.fd.and_then(|fd| pos_of(ps, fd, v))?;
                let expected = p.pos.filter(|_| p.dirty);
                p.pos = Some(ans);
                p.dirty = false;
                // A position only moves by calls on the open file itself: a difference
                // means a call dejavu did not see (a forked child's, or an untraced one).
                Some(Asked {
                    path,
                    expected,
                    derived: expected,
                    ans,
                    what: "position",
                    other_change: false,
                    foreign: false,
                })
            }
        }
    }

    fn on_open(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let flags = if s.sys == Sys::Creat {
            O_CREAT | O_TRUNC | 1
        } else {
            s.flags
        };
        let writable = flags & O_ACCMODE != 0;
        let moves = flags & O_CREAT != 0 || (flags & O_TRUNC != 0 && writable);
        let Some(path) = v.path else { return };
        if !writable && !moves {
            // A read-only open changes nothing, but a lookup right after it is not about
            // the process's own writes any more.
            if let Some(k) = self
                .procs
                .get_mut(&s.pid)
                .and_then(|ps| ps.know.get_mut(&path))
            {
                k.dirty = false;
            }
            return;
        }
        let ps = self.procs.entry(s.pid).or_default();
        if writable {
            ps.pos.insert(
                s.ret as i32,
                Pos {
                    open_id: None,
                    pos: Some(0),
                    append: flags & O_APPEND != 0,
                    dirty: false,
                },
            );
        }
        let st = s.stat.map(|id| cx.stat(id));
        let regular = st
            .is_some_and(|st| st.known & stat_known::MODE != 0 && st.file_type() == mode::S_IFREG);
        if !regular {
            ps.know.remove(&path);
            return;
        }
        // The replay moves the path's version by one for an open that may create or
        // truncate (O_CREAT, or O_TRUNC with write access); knowledge must follow it.
        let after = v.version + u64::from(moves);
        if flags & O_TRUNC != 0 && writable {
            // The process truncated it: the size is 0, and it knows.
            ps.know.insert(
                path,
                Know {
                    size: Some(0),
                    blind: Some(0),
                    foreign: false,
                    version: after,
                    dirty: false,
                },
            );
            return;
        }
        let opened_size = st
            .filter(|st| st.known & stat_known::SIZE != 0)
            .map(|st| st.size);
        match ps.know.get_mut(&path) {
            // Still what the process knew (an O_CREAT of an existing file creates nothing):
            // the knowledge carries over, but a lookup right after an open is not about its
            // own writes any more.
            Some(k) if k.version == v.version && (!moves || opened_size == k.size) => {
                k.version = after;
                k.dirty = false;
            }
            Some(_) => {
                ps.know.remove(&path);
            }
            None => {}
        }
    }

    fn on_write(&mut self, s: &Syscall, v: &View) {
        let (Some(fd), Some(path), Some(f)) = (s.fd, v.path, v.fd) else {
            return;
        };
        if f.kind != FdKind::File || s.ret <= 0 {
            return;
        }
        let ps = self.procs.entry(s.pid).or_default();
        let n = s.ret;
        let k = ps
            .know
            .get(&path)
            .copied()
            .filter(|k| k.version == v.version);
        let positional = matches!(s.sys, Sys::Pwrite64 | Sys::Pwritev | Sys::Pwritev2)
            && s.offset.is_some_and(|o| o >= 0);
        let append = f.append || ps.pos.get(&fd).is_some_and(|p| p.append);
        let p = pos_of(ps, fd, v).copied();
        let size = k.and_then(|k| k.size);
        // The size after this write, from `z` before it.
        let at = p.and_then(|p| p.pos);
        let grow = |z: Option<i64>| {
            if append {
                // Linux appends even for pwrite on an O_APPEND descriptor.
                z.map(|z| z + n)
            } else if positional {
                z.map(|z| z.max(s.offset.unwrap_or(0) + n))
            } else {
                z.zip(at).map(|(z, at)| z.max(at + n))
            }
        };
        let new_size = grow(size);
        let new_pos = if positional {
            at
        } else if append {
            new_size
        } else {
            at.map(|at| at + n)
        };
        // What a variable would hold: it does not see another's change of the file.
        let all = ps.know.get(&path).copied();
        let new_blind = grow(all.and_then(|k| k.blind));
        let foreign = all.is_some_and(|k| k.foreign || k.version != v.version);
        // The replay touches the path once for this write. Without a size the file is
        // still marked as written, so that its next lookup establishes one.
        ps.know.insert(
            path,
            Know {
                size: new_size,
                blind: new_blind,
                foreign,
                version: v.version + 1,
                dirty: true,
            },
        );
        if let Some(p) = pos_of(ps, fd, v) {
            p.pos = new_pos;
            p.dirty = true;
        }
    }

    fn on_truncate(&mut self, s: &Syscall, v: &View) {
        let (Some(path), Some(len)) = (v.path, s.offset) else {
            return;
        };
        if s.ret < 0 {
            return;
        }
        if s.sys == Sys::Ftruncate && !matches!(v.fd, Some(f) if f.kind == FdKind::File) {
            return;
        }
        self.procs.entry(s.pid).or_default().know.insert(
            path,
            Know {
                size: Some(len),
                blind: Some(len),
                foreign: false,
                version: v.version + 1,
                dirty: true,
            },
        );
    }
}

impl Detector for SelfInflicted {
    fn wants(&self, sys: Sys) -> bool {
        use Sys::*;
        matches!(
            sys,
            Open | Openat
                | Openat2
                | Creat
                | Close
                | Read
                | Readv
                | Write
                | Writev
                | Pwrite64
                | Pwritev
                | Pwritev2
                | Sendfile
                | CopyFileRange
                | Splice
                | Lseek
                | Stat
                | Lstat
                | Fstat
                | Newfstatat
                | Statx
                | Truncate
                | Ftruncate
                | Unlink
                | Unlinkat
                | Rmdir
        )
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if !self.pending.is_empty() {
            self.settle(s, v, cx);
        }
        if let Some(a) = self.sizes.on_syscall(s, v, cx) {
            self.lookup(s, v, a, cx);
        }
    }

    fn on_record(&mut self, rec: &Record, _cx: &Cx<'_>) {
        self.sizes.on_record(rec);
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        // Lookups no write followed: asked once the writing was done.
        self.pending.clear();
        self.tallies
            .findings(&INFO, cx, Wording { cache: false }, &|t, _| {
                let mut h = vec![
                    "the derived size holds only while this process is the only writer; with \
                     several writing threads, keep it under the same lock as the writes"
                        .to_string(),
                ];
                if t.stale > 0 {
                    h.push(format!(
                        "{} answer(s) differed from the size this process's own writes imply, \
                         with no change dejavu saw: another program writes this file, so those \
                         lookups are needed",
                        t.stale
                    ));
                }
                if t.invalidations > 0 {
                    let by = t.invalidated_by.map(|s| s.name()).unwrap_or("a write");
                    h.push(format!(
                        "{} lookup(s) followed a change by another traced process or handle \
                         ({by}): a derived size must be re-established there",
                        t.invalidations
                    ));
                }
                h
            })
    }
}

impl Sizes {
    /// Follows one call; a size or position lookup of a file the process writes says
    /// what the process could have derived.
    pub(crate) fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) -> Option<Asked> {
        use Sys::*;
        if s.ev & ev::UNFINISHED != 0 {
            // It may or may not have happened: forget what it could have changed.
            if let Some(ps) = self.procs.get_mut(&s.pid) {
                if let Some(p) = v.path {
                    ps.know.remove(&p);
                }
                if let Some(fd) = s.fd {
                    ps.pos.remove(&fd);
                }
            }
            return None;
        }
        match s.sys {
            Open | Openat | Openat2 | Creat if s.ret >= 0 => self.on_open(s, v, cx),
            Close => {
                if let (Some(ps), Some(fd)) = (self.procs.get_mut(&s.pid), s.fd) {
                    ps.pos.remove(&fd);
                }
            }
            Read | Readv if s.ret > 0 => {
                if let (Some(ps), Some(fd)) = (self.procs.get_mut(&s.pid), s.fd) {
                    if let Some(p) = pos_of(ps, fd, v) {
                        p.pos = p.pos.map(|x| x + s.ret);
                    }
                }
            }
            Write | Writev | Pwrite64 | Pwritev | Pwritev2 => self.on_write(s, v),
            Sendfile | CopyFileRange | Splice if s.ret > 0 => {
                // Offsets of these are not modelled: forget the size of what they wrote
                // and the positions they moved.
                if let Some(ps) = self.procs.get_mut(&s.pid) {
                    if let Some(p) = v.path {
                        ps.know.remove(&p);
                    }
                    for fd in [s.fd, s.fd2].into_iter().flatten() {
                        ps.pos.remove(&fd);
                    }
                }
            }
            Truncate | Ftruncate => self.on_truncate(s, v),
            Lseek if s.ret >= 0 => {
                let (Some(path), Some(fd)) = (v.path, s.fd) else {
                    return None;
                };
                if !matches!(v.fd, Some(f) if f.kind == FdKind::File) {
                    return None;
                }
                let off = s.offset.unwrap_or(0);
                match s.aux {
                    SEEK_CUR if off == 0 => {
                        return self.on_lookup(s, v, path, Lookup::Position(s.ret))
                    }
                    SEEK_END if off == 0 => return self.on_lookup(s, v, path, Lookup::Size(s.ret)),
                    whence => {
                        let ps = self.procs.get_mut(&s.pid)?;
                        if let Some(p) = pos_of(ps, fd, v) {
                            p.pos = Some(s.ret);
                            p.dirty = false;
                        }
                        // A move, not a question; SEEK_END relative to the end also tells
                        // the size (kept for files the process writes).
                        let writable = v.fd.is_some_and(|f| f.flags & O_ACCMODE != 0);
                        if whence == SEEK_END && (writable || ps.know.contains_key(&path)) {
                            let k = Know {
                                size: Some(s.ret - off),
                                blind: Some(s.ret - off),
                                foreign: false,
                                version: v.version,
                                dirty: false,
                            };
                            ps.know.insert(path, k);
                        }
                    }
                }
            }
            Stat | Lstat | Fstat | Newfstatat | Statx if s.ret >= 0 => {
                let (Some(path), Some(id)) = (v.path, s.stat) else {
                    return None;
                };
                if s.sys == Statx && s.aux != 0 && s.aux & STATX_SIZE == 0 {
                    return None; // a statx that did not ask for the size
                }
                // The common case, a file this process does not write: one probe, no more.
                let writable = (s.ev & ev::PATH_FROM_FD != 0 || s.path.is_none())
                    && v.fd.is_some_and(|f| f.flags & O_ACCMODE != 0);
                if !writable
                    && !self
                        .procs
                        .get(&s.pid)
                        .is_some_and(|ps| ps.know.contains_key(&path))
                {
                    return None;
                }
                let st = cx.stat(id);
                let need = stat_known::MODE | stat_known::SIZE;
                if st.known & need != need || st.file_type() != mode::S_IFREG {
                    return None;
                }
                return self.on_lookup(s, v, path, Lookup::Size(st.size));
            }
            _ => {}
        }
        None
    }

    /// A new program knows nothing; a fork shares positions.
    pub(crate) fn on_record(&mut self, rec: &Record) {
        match rec {
            // A new program knows nothing of what the old one wrote; a gone process nothing.
            Record::Exec(e) => {
                self.procs.remove(&e.pid);
            }
            Record::Exit(e) if e.pid == e.tid => {
                self.procs.remove(&e.pid);
            }
            // A forked child shares the parent's open files and their positions.
            Record::Spawn(sp) if !sp.is_thread() => {
                if let Some(ps) = self.procs.get_mut(&sp.parent_pid) {
                    ps.pos.clear();
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};
    use dejavu_trace::{ev, FrameKind, Sys};

    const LOG: &str = "/data/tile.log";
    const O_WRONLY: u64 = 0o1;
    const O_CREAT: u64 = 0o100;
    const O_TRUNC: u64 = 0o1000;
    const O_APPEND: u64 = 0o2000;

    fn fstat(b: &mut TraceBuilder, fd: i32, size: i64) {
        b.call(Sys::Fstat, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(LOG));
            c.ev = ev::PATH_FROM_FD;
            c.stat = Some(b.st(file(5, size, size)));
        });
    }

    fn lseek(b: &mut TraceBuilder, fd: i32, off: i64, whence: u64, ret: i64) {
        b.call(Sys::Lseek, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(LOG));
            c.ev = ev::PATH_FROM_FD;
            c.offset = Some(off);
            c.aux = whence;
            c.ret = ret;
        });
    }

    #[test]
    fn fstat_after_each_append_is_redundant_after_the_first() {
        let mut b = TraceBuilder::new();
        b.open(LOG, O_WRONLY | O_CREAT | O_APPEND, 3, Some(file(5, 100, 1)));
        let mut size = 100;
        for _ in 0..20 {
            b.write(3, LOG, "0123456789", false);
            size += 10;
            fstat(&mut b, 3, size);
        }
        let f = b.findings("self-inflicted-lookup");
        assert_eq!(f.len(), 1, "{f:?}");
        // The first establishes the size; the last, after the last write, is asked once.
        assert_eq!((f[0].calls, f[0].redundant_calls), (20, 18));
        assert_eq!(f[0].wasted_ns, 18 * 500);
        assert_eq!(f[0].paths, vec![LOG.to_string()]);
        assert!(f[0].cache.is_none());
    }

    #[test]
    fn a_truncating_open_establishes_the_size_and_stat_by_path_counts_too() {
        let mut b = TraceBuilder::new();
        b.open(LOG, O_WRONLY | O_CREAT | O_TRUNC, 3, Some(file(5, 0, 1)));
        for i in 1..=5 {
            b.write(3, LOG, "abcd", false);
            b.stat(LOG, Ok(file(5, 4 * i, 1)));
        }
        let f = b.findings("self-inflicted-lookup");
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 4));
    }

    #[test]
    fn lseek_to_the_end_or_the_current_position_after_own_writes() {
        let mut b = TraceBuilder::new();
        b.open(LOG, O_WRONLY | O_CREAT, 3, Some(file(5, 0, 1)));
        lseek(&mut b, 3, 0, 2, 0); // establishes: size 0, position 0
        for i in 1..=4 {
            b.write(3, LOG, "12345678", false);
            lseek(&mut b, 3, 0, 1, 8 * i); // where am I? (tell)
            lseek(&mut b, 3, 0, 2, 8 * i); // how big is it?
        }
        // pwrite past the end, then the size.
        b.call(Sys::Pwrite64, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s(LOG));
            c.ev = ev::PATH_FROM_FD;
            c.offset = Some(100);
            c.ret = 10;
        });
        fstat(&mut b, 3, 110);
        b.write(3, LOG, "1", false);
        let f = b.findings("self-inflicted-lookup");
        assert_eq!((f[0].calls, f[0].redundant_calls), (10, 9));
    }

    #[test]
    fn a_stat_right_before_the_process_removes_the_file_asks_its_type_not_its_size() {
        // A file written, then removed with Node.js's fs.rm (lstat, lstat, unlink), ten
        // times: the lstats ask what to remove. The twin, the same stats followed by
        // another write, asks the size its writes determine.
        let written = |b: &mut TraceBuilder, p: &str, ino: u64| {
            b.open(p, O_WRONLY | O_CREAT | O_TRUNC, 3, Some(file(ino, 0, 1)));
            b.write(3, p, "hello", false);
            b.close(3, p);
            b.stat(p, Ok(file(ino, 5, 1)));
        };
        let mut b = TraceBuilder::new();
        for i in 0..10 {
            let p = format!("/cache/tmp/f{i}");
            written(&mut b, &p, 40 + i);
            b.stat(&p, Ok(file(40 + i, 5, 1)));
            b.call(Sys::Unlink, |c, b| c.path = Some(b.s(&p)));
        }
        let f = b.findings("self-inflicted-lookup");
        assert!(f.iter().all(|f| f.redundant_calls == 0), "{f:?}");
        let mut b = TraceBuilder::new();
        for i in 0..10 {
            let p = format!("/cache/tmp/f{i}");
            written(&mut b, &p, 40 + i);
            b.open(&p, O_WRONLY | O_APPEND, 3, Some(file(40 + i, 5, 1)));
            b.write(3, &p, "hello", false);
            b.close(3, &p);
            b.stat(&p, Ok(file(40 + i, 10, 1)));
        }
        b.write(3, "/cache/tmp/f9", "!", false);
        let f = b.findings("self-inflicted-lookup");
        // Each file's stats before its second write (open, write); the last file's after
        // it too, which a third write follows.
        assert_eq!(
            f.iter().map(|f| f.redundant_calls).sum::<u64>(),
            11,
            "{f:?}"
        );
    }

    #[test]
    fn a_stat_no_write_follows_asks_something_else() {
        // yarn sets each extracted file's times: fs.stat (isDirectory()?), open 'a',
        // futimes, close; each file written once. The size is never used to write.
        let mut b = TraceBuilder::new();
        for i in 0..10 {
            let p = format!("/proj/node_modules/lodash/f{i}.js");
            b.open(
                &p,
                O_WRONLY | O_CREAT | O_TRUNC,
                3,
                Some(file(60 + i, 0, 1)),
            );
            b.write(3, &p, "module.exports = 1;\n", false);
            b.close(3, &p);
            for _ in 0..2 {
                b.stat(&p, Ok(file(60 + i, 20, 1)));
                b.open(
                    &p,
                    O_WRONLY | O_APPEND | O_CREAT,
                    4,
                    Some(file(60 + i, 20, 1)),
                );
                b.close(4, &p);
            }
        }
        let f = b.findings("self-inflicted-lookup");
        assert!(f.iter().all(|f| f.redundant_calls == 0), "{f:?}");
    }

    #[test]
    fn lookups_without_own_writes_or_with_counted_sizes_are_quiet() {
        let mut b = TraceBuilder::new();
        // Python-style: fstat and tell right after each open, no write in between.
        for _ in 0..10 {
            b.open(LOG, 0, 3, Some(file(5, 100, 1)));
            fstat(&mut b, 3, 100);
            lseek(&mut b, 3, 0, 1, 0);
            b.read(3, LOG, 200, 100);
            b.close(3, LOG);
        }
        // A database opened for writing, fstat per query, no write in between: a plain
        // repeat (not about the process's own writes).
        b.open("/data/app.db", 0o2, 5, Some(file(8, 4096, 1)));
        for _ in 0..10 {
            b.call(Sys::Fstat, |c, b| {
                c.fd = Some(5);
                c.path = Some(b.s("/data/app.db"));
                c.ev = ev::PATH_FROM_FD;
                c.stat = Some(b.st(file(8, 4096, 1)));
            });
            b.read(5, "/data/app.db", 4096, 4096);
        }
        // The clean twin of the append loop: one fstat up front, the size counted.
        b.open(LOG, O_WRONLY | O_APPEND, 4, Some(file(5, 100, 1)));
        fstat(&mut b, 4, 100);
        for _ in 0..20 {
            b.write(4, LOG, "0123456789", false);
        }
        assert!(b.findings("self-inflicted-lookup").is_empty());
    }

    #[test]
    fn another_writer_makes_the_lookup_necessary() {
        let mut b = TraceBuilder::new();
        b.open(LOG, O_WRONLY | O_APPEND, 3, Some(file(5, 100, 1)));
        fstat(&mut b, 3, 100);
        b.write(3, LOG, "0123456789", false);
        fstat(&mut b, 3, 110); // redundant
                               // Another traced process appends between our write and our fstat.
        b.write(3, LOG, "0123456789", false);
        b.fork(300);
        b.pid = 300;
        b.tid = 300;
        b.write(3, LOG, "xxxxx", false);
        b.pid = 100;
        b.tid = 100;
        fstat(&mut b, 3, 125); // needed
                               // An untraced program appends: the answer differs at the same version.
        b.write(3, LOG, "0123456789", false);
        fstat(&mut b, 3, 142); // needed: 135 expected
        let f = b.findings("self-inflicted-lookup");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (4, 1));
        let h = f[0].hazards.join("\n");
        assert!(
            h.contains("another program") && h.contains("another traced process"),
            "{h}"
        );
    }

    #[test]
    fn an_existence_check_of_a_file_it_wrote_is_no_size_lookup() {
        // pip: write each file, close it, then `os.path.isfile(path)`: the stat asks
        // whether it is there. A getsize() (os.stat from the program's line) is a lookup.
        let run = |frames: &[(FrameKind, &str, &str, u32)]| {
            let mut b = TraceBuilder::new();
            let st = b.stack(frames);
            for i in 0..4 {
                let f = format!("/venv/lib/m{i}.py");
                b.open(&f, 0o1101, 5, Some(file(20 + i, 0, 1)));
                b.write(5, &f, "x".repeat(100).as_str(), false);
                b.close(5, &f);
                b.stack = Some(st);
                b.stat(&f, Ok(file(20 + i, 100, 1)));
                b.stack = None;
                b.open(&f, 0o2001, 5, Some(file(20 + i, 100, 1)));
                b.write(5, &f, "y", false);
                b.close(5, &f);
            }
            b.findings("self-inflicted-lookup")
                .iter()
                .map(|f| f.redundant_calls)
                .sum::<u64>()
        };
        let isfile = (FrameKind::Python, "isfile", "<frozen genericpath>", 30);
        let line = (FrameKind::Python, "install", "/venv/lib/pip/wheel.py", 601);
        assert_eq!(run(&[isfile, line]), 0);
        let exists = (
            FrameKind::Python,
            "Path.exists",
            "/usr/lib/python3.11/pathlib.py",
            1235,
        );
        assert_eq!(run(&[exists, line]), 0);
        let getsize = (FrameKind::Python, "getsize", "<frozen genericpath>", 50);
        assert_eq!(run(&[getsize, line]), 4);
    }

    #[test]
    fn a_new_program_knows_nothing() {
        let mut b = TraceBuilder::new();
        b.open(LOG, O_WRONLY | O_APPEND, 3, Some(file(5, 100, 1)));
        fstat(&mut b, 3, 100);
        b.write(3, LOG, "0123456789", false);
        b.exec("/usr/bin/tool", &["tool"]);
        fstat(&mut b, 3, 110);
        assert!(b.findings("self-inflicted-lookup").is_empty());
    }
}
