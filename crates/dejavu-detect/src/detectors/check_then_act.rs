//! check-then-act: an access/stat of a path immediately followed by the open or stat that
//! answers the same question (os.path.exists(p) then open(p)), or an O_DIRECTORY probe of a
//! file right before opening it as a file (rsync, per file): the check is redundant, and a
//! race (TOCTOU).

use super::lookup::{is_plumbing, question, Question};
use crate::group::{count, extras, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{PathKey, View};
use dejavu_trace::{ev, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "check-then-act",
    summary: "access/stat of a path right before the open or stat that answers the same question",
    explain: "A check is a successful access/faccessat or stat/newfstatat/statx that follows \
symbolic links, naming a path. Its act is the next call of the same thread on the same path, if it \
comes within `window` calls of that thread (window 1: the very next call; runtime plumbing — calls on \
eventfds, pipes, sockets and terminals — does not count) and is an open (open, \
openat, openat2, creat; success or failure) or a stat following symlinks. Any other call on the path \
in between (by that thread) means there is no act. The check is redundant, and counted, in two cases: \
(1) an access check followed by an act that answers the same question: existence (F_OK) is answered \
by any open or stat, R_OK and W_OK only by an open for reading or writing, X_OK by neither (only an \
exec would answer it, as in a shell's PATH search); (2) a stat check followed by a successful open \
of a non-directory, only when the descriptor that open returned is fstat'ed (fstat, or \
newfstatat/statx with AT_EMPTY_PATH) before any other use of it except lseek and fcntl (a read, \
write, getdents or close first means no): the program re-derived the metadata from the descriptor, so \
the stat served only to learn that the file exists. This includes runtimes whose open itself calls \
fstat (Python's open, C stdio before the first read). Never counted: lstat and AT_SYMLINK_NOFOLLOW \
checks (tar and friends: whether the path is a symlink decides what happens next), failed checks \
(the answer chose a branch, e.g. create instead of append), a stat followed by a stat (the \
repeated-lookup detector's), a stat followed by an open whose descriptor is read before any fstat \
(the stat's answer may be used differently from the open's, say the size for a buffer), a stat \
followed by opening a directory (opendir fstats by itself; the stat usually wanted the mtime), and \
checks of a path made by one thread and acted on by another. One failed check is counted, as a \
third case: (3) a directory probe — an open with O_DIRECTORY that fails with ENOTDIR — followed by a \
successful open of the same path without O_DIRECTORY whose descriptor is fstat'ed first, as in (2): \
\"try it as a directory, else open it as a file\" (rsync does it for every file it sends), where one \
open and the fstat the program makes anyway tell both. A finding's calls are the check/act pairs of \
those three kinds that were found, its redundant calls the checks counted, and its time the checks' \
own.",
    example: "if os.path.exists(path):\n    with open(path) as f: ...   # stat + openat + fstat: the \
stat is redundant",
    fix: "just do the act and handle its error: open (or stat) the path and treat ENOENT/EACCES where \
the check's false branch was (try/except FileNotFoundError, catch ENOENT); take metadata from fstat of \
the opened descriptor. For a directory probe: open the path once (with O_NOFOLLOW if refusing \
symlinks was the point) and tell a directory from a file by fstat of the descriptor",
    hazards: "The check and the act are two lookups: the file can appear, disappear or change between \
them (a time-of-check-to-time-of-use race), so removing the check also removes a race. The act's error \
handling must cover every case the check covered (ENOENT, EACCES, ENOTDIR, EISDIR). access() checks \
with the real user id and open uses the effective one: in a setuid program they can disagree, and only \
the open's answer counts.",
    options: &[(
        "window",
        3,
        "the act must come within this many calls of the same thread after the check (1 = the very next call)",
    )],
    make: |cfg: &Config| {
        Box::new(CheckThenAct {
            window: cfg.opt("check-then-act", "window", 3).max(1),
            threads: FxHashMap::default(),
            verify: FxHashMap::default(),
            tallies: Tallies::default(),
            extra: FxHashMap::default(),
        })
    },
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Access,
    Stat,
    /// An open with O_DIRECTORY that failed with ENOTDIR.
    DirProbe,
}

#[derive(Clone, Copy)]
struct Check {
    path: PathKey,
    /// The thread's call number of the check.
    seq: u64,
    /// The check's call number in the trace (`View::seq`).
    call: u64,
    stack: Option<dejavu_trace::StackId>,
    ts: u64,
    dur: u64,
    kind: Kind,
    /// access's mode (F_OK 0, R_OK 4, W_OK 2, X_OK 1).
    mode: u32,
    sys: Sys,
}

#[derive(Default)]
struct Thread {
    /// Calls of this thread so far.
    seq: u64,
    /// Checks still waiting for their act: at most `window`, one per path.
    checks: Vec<Check>,
}

/// A stat check whose act opened this descriptor: confirmed if the descriptor is fstat'ed
/// before it is used.
#[derive(Clone, Copy)]
struct Verify {
    opened_ts: u64,
    check: Check,
    act: Sys,
}

#[derive(Default)]
struct Extra {
    redundant: u64,
    access_open: u64,
    access_stat: u64,
    stat_open: u64,
    dir_probe: u64,
    check_sys: Option<Sys>,
    act_sys: Option<Sys>,
}

struct CheckThenAct {
    window: u64,
    threads: FxHashMap<u32, Thread>,
    verify: FxHashMap<(u32, i32), Verify>,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

pub(crate) fn is_open(sys: Sys) -> bool {
    matches!(sys, Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat)
}

const O_ACCMODE: u64 = 3;
pub(crate) const O_DIRECTORY: u64 = 0o200000;
pub(crate) const ENOTDIR: i64 = -20;

/// Whether the act answers an access check of `mode`: existence (F_OK) is answered by any
/// open or stat; R_OK and W_OK only by an open for reading or writing; X_OK by neither
/// (only an exec would answer it).
pub(crate) fn answers(mode: u32, act: &Syscall, act_open: bool) -> bool {
    const R_OK: u32 = 4;
    const W_OK: u32 = 2;
    const X_OK: u32 = 1;
    if mode & X_OK != 0 {
        return false;
    }
    if mode & (R_OK | W_OK) == 0 {
        return true;
    }
    if !act_open {
        return false;
    }
    let acc = act.flags & O_ACCMODE;
    let reads = acc == 0 || acc == 2;
    let writes = acc == 1 || acc == 2;
    (mode & R_OK == 0 || reads) && (mode & W_OK == 0 || writes)
}

/// An open of a directory (opendir): its fstat is the C library's own, whatever the
/// program did with the stat before it (Python's import system stats a directory for its
/// mtime, then lists it).
pub(crate) fn opens_dir(s: &Syscall, cx: &Cx<'_>) -> bool {
    s.flags & O_DIRECTORY != 0
        || s.stat.is_some_and(|id| {
            let st = cx.stat(id);
            st.known & dejavu_trace::stat_known::MODE != 0
                && st.file_type() == dejavu_trace::mode::S_IFDIR
        })
}

/// fstat of a descriptor, in any of its spellings.
pub(crate) fn is_fstat(s: &Syscall) -> bool {
    s.sys == Sys::Fstat
        || (matches!(s.sys, Sys::Newfstatat | Sys::Statx) && s.ev & ev::PATH_FROM_FD != 0)
}

impl CheckThenAct {
    fn confirm(&mut self, image: u32, c: &Check, act: Sys, cx: &Cx<'_>) {
        if !cx.config.counts(c.ts) {
            return;
        }
        self.tallies
            .get(image, c.path)
            .redundant(c.ts, c.dur, c.stack);
        cx.mark(c.call, c.dur, c.stack);
        let e = self.extra.entry((image, c.path)).or_default();
        e.redundant += 1;
        match (c.kind, is_open(act)) {
            (Kind::Access, true) => e.access_open += 1,
            (Kind::Access, false) => e.access_stat += 1,
            (Kind::Stat, _) => e.stat_open += 1,
            (Kind::DirProbe, _) => e.dir_probe += 1,
        }
        e.check_sys = Some(c.sys);
        e.act_sys = Some(act);
    }

    /// A call on a descriptor that a stat check's act opened.
    fn verify_use(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let Some(fd) = s.fd else { return };
        let key = (s.pid, fd);
        let Some(p) = self.verify.get(&key).copied() else {
            return;
        };
        if v.fd.map(|f| f.opened_ts) != Some(p.opened_ts) {
            self.verify.remove(&key); // not the descriptor we opened any more
            return;
        }
        if is_fstat(s) && s.ev & ev::UNFINISHED == 0 {
            self.verify.remove(&key);
            self.confirm(v.image, &p.check, p.act, cx);
        } else if !matches!(s.sys, Sys::Lseek | Sys::Fcntl) {
            // Read, written, listed or closed before any fstat: the stat's answer may be
            // what the program used.
            self.verify.remove(&key);
        }
    }
}

impl Detector for CheckThenAct {
    fn wants(&self, _sys: Sys) -> bool {
        // "Within `window` calls of the thread" needs to count every call of the thread.
        true
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if !self.verify.is_empty() {
            self.verify_use(s, v, cx);
        }
        if is_plumbing(s, v, cx) {
            // Not a call on files: does not count towards the window (lookup::is_plumbing).
            return;
        }
        let finished = s.ev & ev::UNFINISHED == 0;
        let path_based = s.ev & ev::PATH_FROM_FD == 0;
        // This call may itself be a check (an act can be the check of the next act).
        let kind = match question(s) {
            Some(Question::Open) if finished && s.ret == ENOTDIR && s.flags & O_DIRECTORY != 0 => {
                Some(Kind::DirProbe)
            }
            _ if !finished || s.ret < 0 => None,
            Some(Question::Access {
                nofollow: false, ..
            }) => Some(Kind::Access),
            Some(Question::Stat { nofollow: false }) => Some(Kind::Stat),
            _ => None,
        };
        let window = self.window;
        let t = self.threads.entry(s.tid).or_default();
        t.seq += 1;
        let seq = t.seq;
        let mut ended = None;
        if !t.checks.is_empty() {
            t.checks.retain(|c| {
                if seq - c.seq > window {
                    return false;
                }
                if v.path == Some(c.path) || v.path2 == Some(c.path) {
                    // The next call on the path: the act, or the end of the check.
                    ended = Some(*c);
                    return false;
                }
                true
            });
        }
        if let (Some(kind), Some(path)) = (kind, v.path) {
            t.checks.push(Check {
                path,
                seq,
                call: v.seq,
                stack: s.stack,
                ts: s.ts,
                dur: s.dur,
                kind,
                mode: s.mode,
                sys: s.sys,
            });
        }
        let Some(c) = ended else { return };
        let act_open = is_open(s.sys) && path_based && finished;
        let act_stat = question(s) == Some(Question::Stat { nofollow: false }) && finished;
        match c.kind {
            Kind::Access if (act_open || act_stat) && answers(c.mode, s, act_open) => {
                if cx.config.counts(c.ts) {
                    self.tallies.get(v.image, c.path).calls += 1;
                }
                self.confirm(v.image, &c, s.sys, cx);
            }
            // The probe said "not a directory"; an open as a file whose descriptor is
            // fstat'ed learns that anyway.
            Kind::Stat | Kind::DirProbe if act_open && !opens_dir(s, cx) => {
                if cx.config.counts(c.ts) {
                    self.tallies.get(v.image, c.path).calls += 1;
                }
                if s.ret >= 0 {
                    self.verify.insert(
                        (s.pid, s.ret as i32),
                        Verify {
                            opened_ts: s.ts,
                            check: c,
                            act: s.sys,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    fn on_record(&mut self, rec: &dejavu_trace::Record, _cx: &Cx<'_>) {
        // A thread that ended frees its slot (bounded by live threads, not by all threads
        // the trace ever had).
        if let dejavu_trace::Record::Exit(e) = rec {
            self.threads.remove(&e.tid);
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let out = self.tallies.findings_with(
            &INFO, cx, Wording { cache: false }, &|_, _| Vec::new(),
            &mut extras(
                &self.extra,
                |a, b| {
                    a.redundant += b.redundant;
                    a.access_open += b.access_open;
                    a.access_stat += b.access_stat;
                    a.stat_open += b.stat_open;
                    a.dir_probe += b.dir_probe;
                    a.check_sys = a.check_sys.or(b.check_sys);
                    a.act_sys = a.act_sys.or(b.act_sys);
                },
                |f, e| {
                    let mut parts = Vec::new();
                    if e.access_open > 0 {
                        parts.push(format!("{} access then open", count(e.access_open)));
                    }
                    if e.access_stat > 0 {
                        parts.push(format!("{} access then stat", count(e.access_stat)));
                    }
                    if e.stat_open > 0 {
                        parts.push(format!(
                            "{} stat then open and fstat of the descriptor",
                            count(e.stat_open)
                        ));
                    }
                    if e.dir_probe > 0 {
                        parts.push(format!(
                            "{} O_DIRECTORY probe{} failing with ENOTDIR then open and fstat of the \
                             descriptor",
                            count(e.dir_probe),
                            if e.dir_probe == 1 { "" } else { "s" }
                        ));
                    }
                    let probes_only = e.dir_probe == e.redundant;
                    f.example = Some(format!(
                        "{} check{} answered by the call right after {}{}: {}",
                        count(e.redundant),
                        if e.redundant == 1 { "" } else { "s" },
                        if e.redundant == 1 { "it" } else { "them" },
                        // "e.g. openat then openat" says nothing the probes' part does not.
                        match (e.check_sys, e.act_sys) {
                            _ if probes_only => String::new(),
                            (Some(c), Some(a)) => format!(" (e.g. {} then {})", c.name(), a.name()),
                            _ => " (check then act)".into(),
                        },
                        parts.join(", ")
                    ));
                    f.hazards.push(if probes_only {
                        // The probe's "false branch" (ENOTDIR) is the program's normal path.
                        "removing the probe also removes a race (the path can change between the two \
                         opens); handle the single open's errors (ENOENT, EACCES, ELOOP) where the \
                         probe's other failures were handled"
                            .into()
                    } else {
                        "removing the check also removes a time-of-check-to-time-of-use race; handle the \
                         act's ENOENT/EACCES where the check's false branch was"
                            .into()
                    });
                    if probes_only {
                        f.fix = "open the path once, as a file (with O_NOFOLLOW if refusing symbolic \
                                 links was the point), and tell a directory from a file by the fstat of \
                                 the descriptor the program makes anyway; drop the O_DIRECTORY probe"
                            .into();
                    }
                    if e.dir_probe > 0 {
                        f.hazards.push(
                            "a probe with O_NOFOLLOW also refused a symbolic link: the single open must \
                             keep O_NOFOLLOW, and a directory it opens must be told apart by fstat"
                                .into(),
                        );
                    }
                    if e.stat_open > 0 {
                        f.hazards.push(
                            "if the stat's answer (size, mtime, type) is used, take it from fstat of the \
                             opened descriptor instead: it describes the file actually opened"
                                .into(),
                        );
                    }
                    if e.access_open + e.access_stat > 0 {
                        f.hazards.push(
                            "access() uses the real uid, open the effective uid: in a setuid program only \
                             the open's answer is authoritative"
                                .into(),
                        );
                    }
                },
            ),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{dir, file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::{ev, Sys};

    const P: &str = "/srv/data/input.txt";

    fn fstat(b: &mut TraceBuilder, fd: i32, path: &str) {
        b.call(Sys::Newfstatat, |c, b| {
            c.fd = Some(fd);
            c.path = Some(b.s(path));
            c.ev = ev::PATH_FROM_FD;
            c.flags = 0x1000; // AT_EMPTY_PATH
            c.stat = Some(b.st(file(3, 6, 1)));
        });
    }

    fn lstat(b: &mut TraceBuilder, path: &str) {
        b.call(Sys::Newfstatat, |c, b| {
            c.path = Some(b.s(path));
            c.flags = 0x100; // AT_SYMLINK_NOFOLLOW
            c.stat = Some(b.st(file(3, 6, 1)));
        });
    }

    /// Python: `if os.path.exists(p): open(p).read()` (stat, openat, fstat, lseek, read).
    fn exists_then_open(b: &mut TraceBuilder) {
        b.stat(P, Ok(file(3, 6, 1)));
        b.open(P, 0o2000000, 3, Some(file(3, 6, 1)));
        fstat(b, 3, P);
        b.call(Sys::Lseek, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s(P));
        });
        b.read(3, P, 4096, 6);
        b.close(3, P);
    }

    const O_DIRECTORY: u64 = 0o200000;
    const O_NOFOLLOW: u64 = 0o400000;
    const O_PATH: u64 = 0o10000000;

    /// rsync's sender per file: open the directory, probe the file as a directory
    /// (ENOTDIR), open it as a file, close the directory, fstat the file, read, close.
    fn rsync_send(b: &mut TraceBuilder, i: u64, fstat_it: bool) {
        let f = format!("/src/dir00/f{i:04}.txt");
        b.open("/src/dir00", O_PATH | O_DIRECTORY, 6, Some(dir(40)));
        b.open(&f, O_NOFOLLOW | O_PATH | O_DIRECTORY, -20, None);
        b.open(&f, O_NOFOLLOW, 7, Some(file(100 + i, 6, 1)));
        b.close(6, "/src/dir00");
        if fstat_it {
            fstat(b, 7, &f);
        }
        b.read(7, &f, 6, 6);
        b.close(7, &f);
    }

    #[test]
    fn a_directory_probe_then_an_open_as_a_file_and_its_fstat_is_redundant() {
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            rsync_send(&mut b, i, true);
        }
        let f = b.findings("check-then-act");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (12, 12));
        assert_eq!(f[0].paths, vec!["/src/dir00/*.txt".to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some(
                "12 checks answered by the call right after them: 12 O_DIRECTORY probes failing \
                 with ENOTDIR then open and fstat of the descriptor"
            )
        );
        assert!(
            f[0].hazards[0].starts_with("removing the probe also removes a race"),
            "{:?}",
            f[0].hazards
        );
        assert!(
            f[0].fix.contains("drop the O_DIRECTORY probe"),
            "{}",
            f[0].fix
        );
    }

    #[test]
    fn a_directory_probe_is_not_counted_without_the_fstat_or_before_a_directory() {
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            // Read before any fstat: the probe's answer may be what the program used.
            rsync_send(&mut b, i, false);
        }
        for _ in 0..12 {
            // It was a directory after all (opened as one next): not this case.
            b.open("/src/sub", O_DIRECTORY, -20, None);
            b.open("/src/sub", O_DIRECTORY | O_NOFOLLOW, 8, Some(dir(41)));
            fstat(&mut b, 8, "/src/sub");
            b.close(8, "/src/sub");
        }
        assert!(b.findings("check-then-act").is_empty());
    }

    #[test]
    fn access_then_an_open_that_answers_it_is_redundant() {
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.access(P, 4, 0); // R_OK
            b.open(P, 0, 3, Some(file(3, 6, 1)));
            b.read(3, P, 4096, 6);
            b.close(3, P);
        }
        let f = b.findings("check-then-act");
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (5, 5, 5 * 500)
        );
        assert_eq!(f[0].paths, vec![P.to_string()]);
        assert_eq!(
            f[0].example.as_deref(),
            Some("5 checks answered by the call right after them (e.g. access then openat): 5 access then open")
        );
    }

    #[test]
    fn stat_then_open_counts_when_the_descriptor_is_fstated_first() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            exists_then_open(&mut b);
        }
        let f = b.findings("check-then-act");
        assert_eq!((f[0].calls, f[0].redundant_calls), (4, 4));
        assert!(f[0].hazards.iter().any(|h| h.contains("fstat")));
    }

    #[test]
    fn just_opening_is_clean() {
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.open(P, 0o2000000, 3, Some(file(3, 6, 1)));
            fstat(&mut b, 3, P);
            b.read(3, P, 4096, 6);
            b.close(3, P);
        }
        assert!(b.findings("check-then-act").is_empty());
    }

    #[test]
    fn tar_style_lstat_then_open_is_not_a_check() {
        let mut b = TraceBuilder::new();
        for i in 0..5 {
            let p = format!("/src/f{i}");
            lstat(&mut b, &p);
            b.open(&p, 0o400000, 4, Some(file(10 + i, 6, 1))); // O_NOFOLLOW
            fstat(&mut b, 4, &p);
            b.read(4, &p, 4096, 6);
            b.close(4, &p);
        }
        assert!(b.findings("check-then-act").is_empty());
    }

    #[test]
    fn stat_then_open_then_read_is_not_counted() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.stat(P, Ok(file(3, 6, 1))); // the size sizes the buffer
            b.open(P, 0, 3, Some(file(3, 6, 1)));
            b.read(3, P, 6, 6);
            fstat(&mut b, 3, P); // too late: it was read first
            b.close(3, P);
        }
        let f = b.findings("check-then-act");
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn failed_checks_stat_then_stat_and_other_threads_are_not_counted() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            b.access(P, 2, -13); // W_OK denied: the program chose another branch
            b.open(P, 0, 3, Some(file(3, 6, 1)));
            b.close(3, P);
            b.stat(P, Ok(file(3, 6, 1)));
            b.stat(P, Ok(file(3, 6, 1))); // repeated-lookup's, not ours
            b.access(P, 0, 0);
            b.tid = 101; // another thread opens it
            b.open(P, 0, 4, Some(file(3, 6, 1)));
            b.tid = 100;
            b.close(4, P);
        }
        assert!(b.findings("check-then-act").is_empty());
    }

    #[test]
    fn another_call_on_the_path_in_between_cancels_the_check() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            b.access(P, 0, 0);
            b.call(Sys::Chmod, |c, b| c.path = Some(b.s(P)));
            b.open(P, 0, 3, Some(file(3, 6, 1)));
            b.close(3, P);
        }
        assert!(b.findings("check-then-act").is_empty());
    }

    #[test]
    fn an_access_counts_only_when_the_act_answers_its_mode() {
        let mut b = TraceBuilder::new();
        for _ in 0..2 {
            b.access(P, 1, 0); // X_OK: only exec answers it (bash's PATH search)
            b.stat(P, Ok(file(3, 6, 1)));
            b.access(P, 4, 0); // R_OK: a stat does not answer it
            b.stat(P, Ok(file(3, 6, 1)));
            b.access(P, 2, 0); // W_OK: an open for reading does not answer it
            b.open(P, 0, 3, Some(file(3, 6, 1)));
            b.close(3, P);
        }
        assert!(b.findings("check-then-act").is_empty());
        let mut b = TraceBuilder::new();
        for _ in 0..2 {
            b.access(P, 0, 0); // F_OK: the stat answers it
            b.stat(P, Ok(file(3, 6, 1)));
            b.access(P, 6, 0); // R_OK|W_OK: O_RDWR answers it
            b.open(P, 2, 3, Some(file(3, 6, 1)));
            b.close(3, P);
        }
        let f = b.findings("check-then-act");
        assert_eq!((f[0].calls, f[0].redundant_calls), (4, 4));
    }

    #[test]
    fn stat_then_opendir_is_not_counted() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            // Python's import system: stat the directory for its mtime, then list it.
            b.stat("/usr/lib/py", Ok(dir(2)));
            b.open("/usr/lib/py", 0o2200000, 3, Some(dir(2)));
            fstat(&mut b, 3, "/usr/lib/py");
            b.call(Sys::Getdents64, |c, b| {
                c.fd = Some(3);
                c.path = Some(b.s("/usr/lib/py"));
                c.ret = 0;
            });
            b.close(3, "/usr/lib/py");
        }
        assert!(b.findings("check-then-act").is_empty());
    }

    #[test]
    fn the_window_decides_how_far_the_act_may_be() {
        let run = |window: Option<&str>| {
            let mut b = TraceBuilder::new();
            for _ in 0..6 {
                b.access(P, 0, 0);
                b.stat("/etc/localtime", Ok(file(9, 1, 1)));
                b.stat("/srv", Ok(dir(2)));
                b.open(P, 0, 3, Some(file(3, 6, 1))); // the 3rd call after the check
                b.close(3, P);
            }
            let mut cfg = Config {
                min_calls: 1,
                ..Config::default()
            };
            if let Some(w) = window {
                cfg.options.insert("check-then-act.window".into(), w.into());
            }
            b.analyze_with(&cfg)
                .findings
                .iter()
                .filter(|f| f.detector == "check-then-act")
                .map(|f| f.redundant_calls)
                .sum::<u64>()
        };
        assert_eq!(run(None), 6);
        assert_eq!(run(Some("2")), 0);
    }

    #[test]
    fn access_then_stat_counts_and_the_stat_can_check_the_next_open() {
        let mut b = TraceBuilder::new();
        for _ in 0..2 {
            b.access(P, 0, 0);
            exists_then_open(&mut b);
        }
        let f = b.findings("check-then-act");
        assert_eq!((f[0].calls, f[0].redundant_calls), (4, 4));
        let example = f[0].example.as_deref().unwrap_or_default();
        assert!(
            example.ends_with("2 access then stat, 2 stat then open and fstat of the descriptor"),
            "{example}"
        );
    }
}
