//! repeated-lookup: the same lookup of the same path, at the same path version, with the
//! same answer, by the same process: what a perfect cache with exact invalidation would
//! have answered from memory.

use super::lookup::{
    answer, dir_times_only, is_lookup_call, is_negative, kept_answers, question, same_result,
    stats_agree, OpenDirs, Question,
};
use crate::group::{cache_hazards, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::PathKey;
use dejavu_replay::{Version, View};
use dejavu_trace::{ev, Record, StackId, StatId, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "repeated-lookup",
    summary: "the same stat/access/readlink of an unchanged path, with the same answer",
    explain: "A lookup (stat, lstat, statx, newfstatat, access, faccessat, readlink) is redundant when \
the same process already made the same lookup of the same path at the same path version and got the \
same answer: a cache with exact invalidation would have answered it from memory. A lookup after an \
observed mutation of the path (a write, truncate, rename, unlink, create, chmod, chown or utime by any \
traced process) is not redundant; the finding lists such mutations as the invalidation points a cache \
must honour. When the answer changed although dejavu saw no mutation, another program changed the file: \
the finding says caching is unsafe and counts the stale answers a cache would have served. A directory \
whose answer changed only in its times, size or link count (the same directory, in which another program \
made or removed entries: /tmp under a realpath chain) is counted apart: a cache of whether it exists and \
what it is stays right there, one of its times does not (the finding's hazard says so). fstat of an \
open descriptor is never a lookup of the path. Failures that say something lasting about the path \
(ENOENT, ENOTDIR, EACCES, EPERM, ELOOP, ENAMETOOLONG ...) are the negative-probe detector's; other \
failures (readlink's EINVAL on a file that is not a symlink) are answers like any other. When two \
thirds of a finding's lookups are readlink or lstat and its paths include a directory and what is \
in it, the finding's example says the paths are resolved again one component at a time: \
realpath() (or fs.realpathSync, os.path.realpath, Path.resolve(), fs::canonicalize) asked again \
for the same path, whose result can be kept. The last lookup of a path before the same process \
removes it (unlink, rmdir, a rename away) is a check before a delete, not counted (Rust's \
remove_dir_all statx'es each directory it removes, after a test that made the tree stat'ed it). \
A lookup the runtime made is not one the program could have kept: its start-up's (before a language \
agent said start-up was over: Python's, before __main__ runs) and its module loader's or import \
system's later on (Node.js's loader stats a package's files as it loads them, CPython's FileFinder \
lists a package's directory as it imports from it). The program's first lookup of such a path is its \
own first, not a repeat; the runtime's own repeats are counted, as the runtime's. A lookup of a \
directory the process opened since its last lookup and still holds open is a check of what the open \
reached, not a repeat: opening a directory can mount a file system on it (autofs), and gnulib's fts \
(du, find) stats each directory again after opening it for that reason.",
    example: "for each request: fs.statSync('config.json')   // 10,000 stats, 1 distinct answer",
    fix: "cache the answer per path and drop it on the invalidation points in the hazards, or pass the \
result along instead of asking again",
    hazards: "A cache must be dropped when the program itself changes the path (listed per finding). If \
another program may change the file, a cache serves stale answers: dejavu counts how many it would have \
served in this trace.",
    options: &[],
    make: |_cfg: &Config| Box::new(RepeatedLookup::default()),
};

#[derive(Clone, Copy)]
struct Last {
    question: Question,
    version: Version,
    answer: u64,
    /// The stat answer, when the lookup was a stat.
    stat: Option<StatId>,
    /// When it was asked, and from where.
    ts: u64,
    stack: Option<dejavu_trace::StackId>,
    /// The stack of the chain's first lookup: what the repeats repeat.
    first: Option<dejavu_trace::StackId>,
}

/// The last answer per question asked about one path: almost always one, kept inline.
#[derive(Default)]
struct Answers {
    first: Option<Last>,
    more: Vec<Last>,
    /// Redundant lookups of this path, and of them those that resolve a path one
    /// component at a time would make: readlink, lstat.
    redundant: u64,
    components: u64,
}

impl Answers {
    /// Records the new answer; returns the previous one to the same question.
    #[inline]
    /// The entry of `question`, just swapped in, learns what its chain began with.
    fn set_first(&mut self, question: Question, first: Option<StackId>) {
        let l = match &mut self.first {
            Some(l) if l.question == question => Some(l),
            _ => self.more.iter_mut().find(|l| l.question == question),
        };
        if let Some(l) = l {
            l.first = first;
        }
    }

    /// The entry of `question`, just swapped in, keeps an earlier answer that holds more.
    fn keep(&mut self, question: Question, answer: u64, stat: Option<StatId>) {
        let l = match &mut self.first {
            Some(l) if l.question == question => Some(l),
            _ => self.more.iter_mut().find(|l| l.question == question),
        };
        if let Some(l) = l {
            (l.answer, l.stat) = (answer, stat);
        }
    }

    fn swap(&mut self, new: Last) -> Option<Last> {
        match &mut self.first {
            None => {
                self.first = Some(new);
                return None;
            }
            Some(l) if l.question == new.question => return Some(std::mem::replace(l, new)),
            Some(_) => {}
        }
        match self.more.iter_mut().find(|l| l.question == new.question) {
            Some(l) => Some(std::mem::replace(l, new)),
            None => {
                self.more.push(new);
                None
            }
        }
    }
}

#[derive(Default)]
struct RepeatedLookup {
    tallies: Tallies<Answers>,
    /// Per (process, path), its last redundant lookup, held until the process looks the
    /// path up again (counted) or removes it (not counted: a check before a delete, as
    /// Rust's remove_dir_all statx'es each directory it is about to remove).
    held: FxHashMap<u32, FxHashMap<PathKey, Held>>,
    /// Directories each process holds open: a lookup of one opened since its last lookup
    /// checks what the open reached, not a repeat.
    open_dirs: OpenDirs,
}

/// A redundant lookup held back (see `RepeatedLookup::held`).
#[derive(Clone, Copy)]
struct Held {
    image: u32,
    seq: u64,
    ts: u64,
    dur: u64,
    stack: Option<StackId>,
    component: bool,
    /// The stack of the lookup this one repeats (its chain's first).
    first: Option<StackId>,
}

impl RepeatedLookup {
    fn count(&mut self, path: PathKey, h: Held, cx: &Cx<'_>) {
        let (t, answers) = self.tallies.get_with(h.image, path);
        t.redundant(h.ts, h.dur, h.stack);
        t.firsts.add(h.first, 1, 0);
        cx.mark(h.seq, h.dur, h.stack);
        answers.redundant += 1;
        answers.components += h.component as u64;
    }

    /// Counts what `pid` holds.
    fn release(&mut self, pid: u32, cx: &Cx<'_>) {
        let Some(held) = self.held.remove(&pid) else {
            return;
        };
        let mut held: Vec<(PathKey, Held)> = held.into_iter().collect();
        held.sort_unstable_by_key(|(p, _)| *p);
        for (path, h) in held {
            self.count(path, h, cx);
        }
    }

    /// Takes what `pid` holds for `path`.
    fn take(&mut self, pid: u32, path: PathKey) -> Option<Held> {
        self.held.get_mut(&pid)?.remove(&path)
    }
}

impl Detector for RepeatedLookup {
    fn wants(&self, sys: Sys) -> bool {
        is_lookup_call(sys) || removes_path(sys) || sys == Sys::Close
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if s.ev & ev::UNFINISHED != 0 {
            return;
        }
        if matches!(s.sys, Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Close) {
            self.open_dirs.follow(s, v, cx);
            return;
        }
        if removes_path(s.sys) {
            // The path removed (or moved away): its last lookup was a check before it.
            if let (Some(path), true) = (v.path, s.ret >= 0) {
                self.take(s.pid, path);
            }
            return;
        }
        if is_negative(s) {
            return;
        }
        let (Some(question), Some(path)) = (question(s), v.path) else {
            return;
        };
        // Looked up again: the held lookup was no check before a delete.
        if let Some(h) = self.take(s.pid, path) {
            self.count(path, h, cx);
        }
        let answer = answer(s);
        let (t, answers) = self.tallies.get_with(v.image, path);
        let prev = answers.swap(Last {
            question,
            version: v.version,
            answer,
            stat: s.stat,
            ts: s.ts,
            stack: s.stack,
            first: s.stack,
        });
        if !cx.config.counts(s.ts) {
            return;
        }
        t.calls += 1;
        match prev {
            // The program's first lookup of what the runtime looked up (its start-up, its
            // import system or module loader).
            Some(p) if cx.first_after_runtime(v.image, path, (p.ts, p.stack), (s.ts, s.stack)) => {}
            // The process opened the directory since, and holds it open: this looks at what
            // the open reached (gnulib's fts in du and find stats each directory again
            // after opening it, as the open may have mounted a file system there).
            Some(p)
                if self
                    .open_dirs
                    .opened_since(s.pid, path)
                    .is_some_and(|at| at > p.ts) => {}
            Some(p)
                if p.version == v.version
                    && kept_answers(cx, (p.answer, p.stat), (answer, s.stat)) =>
            {
                answers.set_first(question, p.first);
                if p.answer != answer {
                    // A statx that asked for fewer fields: the fuller answer stays kept.
                    answers.keep(question, p.answer, p.stat);
                }
                let h = Held {
                    image: v.image,
                    seq: v.seq,
                    ts: s.ts,
                    dur: s.dur,
                    stack: s.stack,
                    component: matches!(
                        question,
                        Question::Readlink | Question::Stat { nofollow: true }
                    ),
                    first: p.first,
                };
                self.held.entry(s.pid).or_default().insert(path, h);
            }
            // The same file's answer with more fields than the kept one (a full stat
            // after a statx that asked for fewer): neither a repeat nor a change.
            Some(p)
                if p.version == v.version
                    && same_result(p.answer, answer)
                    && stats_agree(cx, p.stat, s.stat) => {}
            Some(p) if p.version == v.version => match (p.stat, s.stat) {
                // A directory another program made or removed entries in (/tmp under a
                // realpath chain): its times went stale, not what it is.
                (Some(a), Some(b)) if dir_times_only(&cx.stat(a), &cx.stat(b)) => {
                    t.stale_times += 1
                }
                _ => t.stale += 1,
            },
            Some(_) => {
                t.invalidations += 1;
                t.invalidated_by = t.invalidated_by.or(cx.replay.paths.changed_by(path));
            }
            None => {}
        }
    }

    fn on_record(&mut self, rec: &Record, cx: &Cx<'_>) {
        match rec {
            Record::Exec(e) => self.release(e.pid, cx),
            Record::Exit(e) if e.pid == e.tid => self.release(e.pid, cx),
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let mut pids: Vec<u32> = self.held.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.release(pid, cx);
        }
        let tallies = &self.tallies;
        tallies.findings_with(
            &INFO,
            cx,
            Wording { cache: true },
            &|t, _| cache_hazards(t, "cached answer"),
            &mut |f, covered| {
                if let Some(e) = resolved_again(tallies, cx, covered) {
                    f.example = Some(e);
                }
            },
        )
    }
}

/// A call that takes its path away: unlink, rmdir, a rename (of its first path).
fn removes_path(sys: Sys) -> bool {
    matches!(
        sys,
        Sys::Unlink | Sys::Unlinkat | Sys::Rmdir | Sys::Rename | Sys::Renameat | Sys::Renameat2
    )
}

/// What a finding's lookups are when they resolve one path again and again, component by
/// component (realpath() and its kin: readlink of each component, which answers EINVAL where
/// it is no symlink; os.path.realpath and Path.resolve() lstat each): two thirds of them
/// readlink or lstat, and among the paths some the parent of another. Its wording for the
/// example.
fn resolved_again(
    tallies: &Tallies<Answers>,
    cx: &Cx<'_>,
    covered: &[(u32, dejavu_replay::PathKey)],
) -> Option<String> {
    let (mut redundant, mut components) = (0u64, 0u64);
    for &(image, path) in covered {
        if let Some(a) = tallies.state(image, path) {
            redundant += a.redundant;
            components += a.components;
        }
    }
    // Two thirds: Path.resolve() then a stat of what it resolved is 7 lstats and a stat.
    if redundant == 0 || components * 3 < redundant * 2 {
        return None;
    }
    let paths: rustc_hash::FxHashSet<_> = covered.iter().map(|&(_, p)| p).collect();
    let nested = covered.iter().any(|&(_, p)| {
        cx.replay
            .paths
            .parent(p)
            .is_some_and(|q| paths.contains(&q))
    });
    nested.then(|| {
        "the same paths resolved again, one component at a time (a readlink or lstat per \
         directory: realpath(), fs.realpathSync, os.path.realpath, Path.resolve(), \
         fs::canonicalize): keep the resolved path"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};
    use dejavu_trace::{FrameKind, Sys};

    #[test]
    fn the_last_lookup_before_the_path_is_removed_is_a_check_not_a_repeat() {
        // A test stats its temporary directory, then its cleanup (Rust's remove_dir_all)
        // statx'es it again, lists it and removes it: a check before the delete.
        let mut b = TraceBuilder::new();
        for i in 0..20 {
            let d = format!("/tmp/t/{i}");
            b.stat(&d, Ok(crate::testkit::dir(100 + i)));
            b.stat(&d, Ok(crate::testkit::dir(100 + i)));
            b.open(&d, 0o200000, 5, Some(crate::testkit::dir(100 + i)));
            b.close(5, &d);
            b.call(Sys::Unlinkat, |c, b| {
                c.path = Some(b.s(&d));
                c.flags = 0x200; // AT_REMOVEDIR
            });
        }
        assert!(b.findings("repeated-lookup").is_empty());
        // Looked up five times, then removed: the repeats before the last one count.
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.stat("/tmp/lock", Ok(file(7, 0, 1)));
        }
        b.call(Sys::Unlink, |c, b| {
            c.path = Some(b.s("/tmp/lock"));
        });
        let cfg = crate::Config {
            min_calls: 1,
            ..crate::Config::default()
        };
        let a = b.analyze_with(&cfg);
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.detector == "repeated-lookup")
            .collect();
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].redundant_calls, 3);
    }

    #[test]
    fn the_same_answer_at_the_same_version_is_redundant() {
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.stat("/etc/app.conf", Ok(file(7, 100, 1)));
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f.len(), 1);
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (5, 4, 2000)
        );
        assert_eq!(f[0].paths, vec!["/etc/app.conf".to_string()]);
        let cache = f[0].cache.clone().unwrap();
        assert!(cache.safe && cache.saved_calls == 4 && cache.stale_answers == 0);
    }

    #[test]
    fn a_path_resolved_again_component_by_component_says_so() {
        // realpath("/srv/app/lib/x.js") per call: readlink of each component, EINVAL where
        // it is no symlink (glibc, Node.js's realpathSync.native, Rust's canonicalize).
        let walk = |b: &mut TraceBuilder| {
            for p in ["/srv", "/srv/app", "/srv/app/lib", "/srv/app/lib/x.js"] {
                b.call(Sys::Readlink, |c, b| {
                    c.path = Some(b.s(p));
                    c.ret = -22;
                });
            }
        };
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            walk(&mut b);
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].redundant_calls, 16);
        let ex = f[0].example.clone().unwrap_or_default();
        assert!(ex.contains("one component at a time"), "{ex}");
        // The same readlinks of one path (no walk), and stats of a path and its parent:
        // no such example.
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.call(Sys::Readlink, |c, b| {
                c.path = Some(b.s("/srv/app/current"));
                c.ret = -22;
            });
            b.stat("/srv/app", Ok(file(3, 10, 1)));
            b.stat("/srv/app/lib", Ok(file(4, 10, 1)));
        }
        let f = b.findings("repeated-lookup");
        assert!(!f.is_empty());
        assert!(f.iter().all(|f| f.example.is_none()), "{f:#?}");
    }

    #[test]
    fn a_stat_after_a_real_change_is_not_redundant_and_names_the_invalidation() {
        let mut b = TraceBuilder::new();
        b.stat("/d/f", Ok(file(7, 100, 1)));
        b.open("/d/f", 0o1, 3, Some(file(7, 100, 1)));
        b.write(3, "/d/f", "more", false);
        b.stat("/d/f", Ok(file(7, 104, 2)));
        b.stat("/d/f", Ok(file(7, 104, 2)));
        let f = b.findings("repeated-lookup");
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].redundant_calls, 1,
            "only the stat after the stat after the write"
        );
        assert!(
            f[0].hazards.iter().any(|h| h.contains("write")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn an_answer_that_changed_without_a_mutation_is_unsafe_to_cache() {
        let mut b = TraceBuilder::new();
        b.stat("/d/f", Ok(file(7, 100, 1)));
        b.stat("/d/f", Ok(file(7, 100, 1)));
        b.stat("/d/f", Ok(file(7, 250, 9))); // another program rewrote it
        let f = b.findings("repeated-lookup");
        let cache = f[0].cache.clone().unwrap();
        assert_eq!(
            (cache.saved_calls, cache.stale_answers, cache.safe),
            (1, 1, false)
        );
        assert!(f[0].hazards.iter().any(|h| h.contains("unsafe")));
    }

    /// A statx answer without the times (the JDK's `UnixNativeDispatcher.stat1` asks
    /// for fewer fields than `stat0`).
    fn no_times(st: dejavu_trace::FileStat) -> dejavu_trace::FileStat {
        use dejavu_trace::stat_known::{CTIME, MTIME};
        dejavu_trace::FileStat {
            known: st.known & !(MTIME | CTIME),
            mtime_ns: 0,
            ctime_ns: 0,
            ..st
        }
    }

    #[test]
    fn a_statx_that_asked_for_fewer_fields_got_the_same_answer() {
        // Maven's JVM stats its unchanged sources with both: the answers hold other
        // fields, not other values. They had made its Top row "unsafe to cache: 18 stale
        // answers ... another program changed it".
        let full = file(7, 90, 1_796_011_195_258_908_769);
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            b.stat("/src/Greeter.java", Ok(full));
            b.stat("/src/Greeter.java", Ok(no_times(full)));
        }
        let f = b.findings("repeated-lookup");
        let cache = f[0].cache.clone().unwrap();
        assert_eq!(
            (cache.saved_calls, cache.stale_answers, cache.safe),
            (5, 0, true),
            "{f:#?}"
        );
        // A field both hold that differs is a change.
        let mut b = TraceBuilder::new();
        b.stat("/src/Greeter.java", Ok(full));
        b.stat("/src/Greeter.java", Ok(full));
        b.stat("/src/Greeter.java", Ok(no_times(file(7, 91, 1))));
        let f = b.findings("repeated-lookup");
        let cache = f[0].cache.clone().unwrap();
        assert_eq!((cache.stale_answers, cache.safe), (1, false), "{f:#?}");
    }

    #[test]
    fn a_directory_whose_times_changed_under_another_program_is_said_apart() {
        use crate::testkit::dir;
        let mut b = TraceBuilder::new();
        // /tmp looked up again and again (a realpath chain), while another program makes
        // files in it: its mtime, ctime and size move, what it is does not.
        b.stat("/tmp", Ok(dir(2)));
        b.stat("/tmp", Ok(dir(2)));
        let later = dejavu_trace::FileStat {
            mtime_ns: 50,
            ctime_ns: 50,
            size: 8192,
            nlink: 3,
            ..dir(2)
        };
        b.stat("/tmp", Ok(later));
        b.stat("/tmp", Ok(later));
        let f = b.findings("repeated-lookup");
        let cache = f[0].cache.clone().unwrap();
        assert_eq!(
            (
                cache.saved_calls,
                cache.stale_answers,
                cache.stale_times,
                cache.safe
            ),
            (2, 0, 1, true)
        );
        assert!(
            f[0].hazards
                .iter()
                .any(|h| h.contains("a directory's times")),
            "{:?}",
            f[0].hazards
        );
        assert!(!f[0].hazards.iter().any(|h| h.contains("unsafe")));

        // Another directory put in its place (a new inode), or a file: what it is changed.
        for other in [dir(3), crate::testkit::file(2, 4096, 1)] {
            let mut b = TraceBuilder::new();
            b.stat("/w/out", Ok(dir(2)));
            b.stat("/w/out", Ok(dir(2)));
            b.stat("/w/out", Ok(other));
            let f = b.findings("repeated-lookup");
            let cache = f[0].cache.clone().unwrap();
            assert_eq!(
                (cache.stale_answers, cache.stale_times, cache.safe),
                (1, 0, false),
                "{other:?}"
            );
        }
    }

    #[test]
    fn the_programs_first_lookup_of_what_start_up_looked_up_is_not_redundant() {
        let mut b = TraceBuilder::new();
        b.stat("/venv/bin", Ok(file(7, 100, 1)));
        b.ready();
        for _ in 0..3 {
            b.stat("/venv/bin", Ok(file(7, 100, 1)));
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f[0].redundant_calls, 2, "the program's second and third");
    }

    #[test]
    fn the_programs_first_lookup_of_what_the_module_loader_looked_up_is_not_redundant() {
        // Node.js's module loader stats a package's file as it loads it; the program's
        // line stats it again: its own first. Its second is a repeat.
        let run = |by_program: &[bool]| {
            let mut b = TraceBuilder::new();
            b.exec("/usr/bin/node", &["node", "/app/build.js"]);
            b.ready();
            let loader = b.stack(&[(
                FrameKind::Js,
                "toRealPath",
                "node:internal/modules/helpers",
                58,
            )]);
            let own = b.stack(&[(FrameKind::Js, "resolveConfig", "/app/build.js", 10)]);
            for &p in by_program {
                b.stack = Some(if p { own } else { loader });
                b.stat("/app/node_modules/x/package.json", Ok(file(7, 100, 1)));
            }
            b.findings("repeated-lookup")
        };
        assert!(run(&[false, true]).is_empty());
        assert_eq!(run(&[false, true, true])[0].redundant_calls, 1);
        assert_eq!(
            run(&[false, false])[0].redundant_calls,
            1,
            "the loader's repeat"
        );
    }

    #[test]
    fn a_repeat_asked_elsewhere_than_the_first_lookup_names_the_first_ones_line() {
        let mut b = TraceBuilder::new();
        b.exec("/usr/bin/node", &["node", "/app/server.js"]);
        b.ready();
        let boot = b.stack(&[(FrameKind::Js, "boot", "/app/server.js", 4)]);
        let handler = b.stack(&[(FrameKind::Js, "handle", "/app/server.js", 12)]);
        b.stack = Some(boot);
        b.stat("/app/config.json", Ok(file(7, 100, 1)));
        b.stack = Some(handler);
        for _ in 0..3 {
            b.stat("/app/config.json", Ok(file(7, 100, 1)));
        }
        let f = b.findings("repeated-lookup");
        assert_eq!(f[0].callsites[0].function, "handle");
        let first: Vec<(&str, u64)> = f[0]
            .first_sites
            .iter()
            .map(|c| (c.function.as_str(), c.redundant_calls))
            .collect();
        assert_eq!(first, [("boot", 3)]);
    }

    #[test]
    fn a_lookup_of_a_directory_the_process_opened_and_holds_open_is_a_check_of_the_open() {
        const O_DIRECTORY: u64 = 0o200000;
        // gnulib's fts (du, find): lstat, open, fstat, lstat again while open.
        let mut b = TraceBuilder::new();
        for i in 0..20 {
            let d = format!("/w/d{i}");
            b.stat(&d, Ok(crate::testkit::dir(i + 10)));
            b.open(&d, O_DIRECTORY, 3, Some(crate::testkit::dir(i + 10)));
            b.stat(&d, Ok(crate::testkit::dir(i + 10)));
            b.close(3, &d);
        }
        assert!(b.findings("repeated-lookup").is_empty());
        // A loop that stats, lists and closes a directory each turn: its stats repeat.
        let mut b = TraceBuilder::new();
        for _ in 0..20 {
            b.stat("/w/spool", Ok(crate::testkit::dir(5)));
            b.open("/w/spool", O_DIRECTORY, 3, Some(crate::testkit::dir(5)));
            b.close(3, "/w/spool");
        }
        assert_eq!(b.findings("repeated-lookup")[0].redundant_calls, 19);
    }

    #[test]
    fn one_lookup_per_distinct_path_is_not_reported() {
        let mut b = TraceBuilder::new();
        for i in 0..100 {
            b.stat(&format!("/repo/file{i}"), Ok(file(i, 1, 1)));
        }
        assert!(
            b.findings("repeated-lookup").is_empty(),
            "git-status style: nothing repeated"
        );
    }

    #[test]
    fn different_processes_and_fstat_do_not_count() {
        let mut b = TraceBuilder::new();
        b.stat("/x", Ok(file(1, 1, 1)));
        b.fork(200);
        b.pid = 200;
        b.tid = 200;
        b.stat("/x", Ok(file(1, 1, 1)));
        b.call(Sys::Newfstatat, |c, b| {
            c.fd = Some(3);
            c.path = Some(b.s("/x"));
            c.ev = dejavu_trace::ev::PATH_FROM_FD;
            c.stat = Some(b.st(file(1, 1, 1)));
        });
        assert!(b.findings("repeated-lookup").is_empty());
    }

    #[test]
    fn many_paths_each_repeated_a_little_are_grouped_into_a_pattern() {
        let mut b = TraceBuilder::new();
        for round in 0..3 {
            for m in ["a", "b", "c", "d", "e"] {
                let _ = round;
                b.stat(
                    &format!("/app/node_modules/{m}/package.json"),
                    Ok(file(m.len() as u64 + m.as_bytes()[0] as u64, 1, 1)),
                );
            }
        }
        let cfg = crate::Config {
            min_calls: 5,
            ..crate::Config::default()
        };
        let a = b.analyze_with(&cfg);
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.detector == "repeated-lookup")
            .collect();
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].paths,
            vec!["/app/node_modules/*/package.json".to_string()]
        );
        assert_eq!((f[0].path_count, f[0].redundant_calls), (5, 10));
    }
}
