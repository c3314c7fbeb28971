//! ensure-dir: mkdir of a directory the process already knows exists (EEXIST), per event,
//! and the existence checks wrapped around it (existsSync(dir) + mkdirSync(dir) per record).

use super::lookup::{is_plumbing, question, Question};
use crate::group::{count, extras, Tallies, Tally, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{PathKey, View};
use dejavu_trace::{ev, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "ensure-dir",
    summary: "mkdir of a directory that already exists (EEXIST), with its existence checks, per event",
    explain: "A process learns that directory D exists from its own mkdir(D): a success, or a failure \
with EEXIST. From then on, every further mkdir(D) by that process that fails with EEXIST is \
redundant, unless a traced process removed or renamed D or one of its parents in between (rmdir, \
unlink, rename in or out) — then D was recreated by someone and the next answer is news. A successful \
mkdir is never redundant (the directory was missing; when no traced removal explains it, another \
program removed it, which the finding reports). A mkdir failing otherwise (ENOENT, EACCES, EROFS) is \
not redundant and makes the process forget D. The existence checks that make up the ensure-dir idiom \
are redundant along with the mkdir, and counted in its calls and time: the \
stat/lstat/statx/newfstatat/access/faccessat of D that the same thread made immediately before the \
redundant mkdir (no other call of that thread in between, runtime plumbing aside — calls on \
eventfds, pipes, sockets and terminals — and checks of D's parent directories, which mkdir helpers \
make on their way: existsSync(dir), os.path.exists(d) before os.makedirs(d, exist_ok=True), which \
stats the parent first), the check of a parent of D made immediately before the redundant mkdir \
(os.makedirs(d) stats the parent before its mkdir: ensuring d once drops both), and the stat of D it \
made immediately after (mkdir -p, recursive: true and exist_ok=True verify that the existing entry is \
a directory). Checks around a mkdir that is not redundant are not counted. A finding's calls are the \
process's mkdir calls of D with the checks right before them and the verifying stats after the \
redundant ones; its time is the redundant calls' own. The cache verdict replays the fix (an ensured flag per directory): a \
directory that vanished with no traced removal is an answer the flag would have got wrong.",
    example: "for each chat record: if (!fs.existsSync(dir)) {...}; fs.mkdirSync(dir, {recursive: true})   \
// access + mkdir (EEXIST) + statx per record",
    fix: "ensure the directory once: remember per directory that it exists, set the flag only after \
mkdir succeeded or failed with EEXIST (a failed mkdir must not poison the cache), \
and drop the separate existence check — mkdir -p semantics already tolerate an existing directory",
    hazards: "Another program (a cleanup job, the user) may remove the directory while the flag says it \
exists: the next create inside it fails with ENOENT, so on that error clear the flag, recreate the \
directory and retry once. If the program removes or renames the directory itself, it must clear the \
flag there. EEXIST also comes back when a file, not a directory, has the name: check the type once \
before setting the flag.",
    options: &[],
    make: |_cfg: &Config| Box::new(EnsureDir::default()),
};

const EEXIST: i64 = -17;

/// A check the thread just made (its last call).
#[derive(Clone, Copy)]
struct Check {
    path: PathKey,
    /// Its call number in the trace (`View::seq`).
    call: u64,
    stack: Option<dejavu_trace::StackId>,
    ts: u64,
    dur: u64,
    sys: Sys,
    /// Already counted, as the verifying stat of the redundant mkdir before it: a loop of
    /// check + mkdir makes one call both, and it is removed once.
    counted: bool,
}

/// What the thread's last call leaves pending.
#[derive(Clone, Copy, Default)]
struct Thread {
    /// The last call was a check of this path: a mkdir of it may follow.
    check: Option<Check>,
    /// A check of a path below `check`'s, made before it with only checks of its ancestors
    /// since (Python's `os.path.exists(d)` then `os.makedirs(d, exist_ok=True)`, which stats
    /// the parent before its mkdir): a mkdir of it may follow too.
    held: Option<Check>,
    /// The last call was a redundant mkdir of this path: a verifying stat may follow.
    after: Option<PathKey>,
}

impl Thread {
    fn is_empty(&self) -> bool {
        self.check.is_none() && self.held.is_none() && self.after.is_none()
    }
}

#[derive(Default)]
struct Extra {
    redundant: u64,
    mkdirs: u64,
    before: u64,
    before_sys: Option<Sys>,
    after: u64,
    after_sys: Option<Sys>,
}

#[derive(Default)]
struct EnsureDir {
    /// (pid, directory) -> the removal sequence number when the process learned it exists.
    ensured: FxHashMap<(u32, PathKey), u64>,
    /// Path -> sequence number and call of its latest removal or rename (in or out).
    removed: FxHashMap<PathKey, (u64, Sys)>,
    seq: u64,
    threads: FxHashMap<u32, Thread>,
    /// Threads whose state is not empty; when 0, unrelated calls need no lookup.
    armed: usize,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

impl EnsureDir {
    /// Replaces the thread's state, keeping `armed` in step.
    fn set(&mut self, tid: u32, new: Thread) -> Thread {
        let slot = self.threads.entry(tid).or_default();
        let old = std::mem::replace(slot, new);
        match (old.is_empty(), new.is_empty()) {
            (true, false) => self.armed += 1,
            (false, true) => self.armed -= 1,
            _ => {}
        }
        old
    }

    fn clear(&mut self, tid: u32) -> Thread {
        if self.armed == 0 {
            return Thread::default();
        }
        match self.threads.get(&tid) {
            Some(t) if !t.is_empty() => self.set(tid, Thread::default()),
            _ => Thread::default(),
        }
    }

    /// The call that removed or renamed `d` or a parent of it after sequence number
    /// `since`, if any did.
    fn removed_since(&self, cx: &Cx<'_>, d: PathKey, since: u64) -> Option<Sys> {
        if self.removed.is_empty() {
            return None;
        }
        let mut k = Some(d);
        while let Some(p) = k {
            match self.removed.get(&p) {
                Some(&(seq, by)) if seq > since => return Some(by),
                _ => k = cx.replay.paths.parent(p),
            }
        }
        None
    }

    fn mkdir(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let prev = self.clear(s.tid);
        let Some(d) = v.path else { return };
        if s.ev & ev::UNFINISHED != 0 {
            return;
        }
        // The check of D right before (or held while its parents were checked), and a
        // check of one of D's parents right before: os.makedirs(d) stats its parent first
        // (pip's ensure_dir per file of a wheel: stat(parent), mkdir(d) -> EEXIST). When
        // the mkdir is redundant, so is the parent's check: ensuring d once drops both.
        let own = prev
            .check
            .filter(|c| c.path == d)
            .or(prev.held.filter(|c| c.path == d));
        let parent = prev.check.filter(|c| is_ancestor(cx, c.path, d));
        let checks = [own, parent];
        let key = (v.image, d);
        let known = self.ensured.get(&key).copied();
        let counting = cx.config.counts(s.ts);
        match s.ret {
            0 | EEXIST => {
                self.ensured.insert(key, self.seq);
            }
            // Not created, not known to exist: forget it (a failure must not poison).
            _ => {
                self.ensured.remove(&key);
            }
        }
        if !counting {
            return;
        }
        let removed = known.and_then(|since| self.removed_since(cx, d, since));
        let t = self.tallies.get(v.image, d);
        let uncounted = || checks.into_iter().flatten().filter(|c| !c.counted);
        t.calls += 1 + uncounted().count() as u64;
        if known.is_none() {
            return;
        }
        match s.ret {
            EEXIST if removed.is_none() => {
                t.redundant(s.ts, s.dur, s.stack);
                cx.mark(v.seq, s.dur, s.stack);
                let e = self.extra.entry(key).or_default();
                e.redundant += 1;
                e.mkdirs += 1;
                for c in uncounted() {
                    t.redundant(c.ts, c.dur, c.stack);
                    cx.mark(c.call, c.dur, c.stack);
                    e.redundant += 1;
                    e.before += 1;
                    e.before_sys = e.before_sys.or(Some(c.sys));
                }
                self.set(
                    s.tid,
                    Thread {
                        check: None,
                        held: None,
                        after: Some(d),
                    },
                );
            }
            0 | EEXIST if removed.is_some() => {
                t.invalidations += 1;
                t.invalidated_by = t.invalidated_by.or(removed);
            }
            // Created although the process knew it existed, and no traced removal: another
            // program removed it.
            0 => t.stale += 1,
            _ => {}
        }
    }

    fn check(&mut self, s: &Syscall, v: &View, q: Question, cx: &Cx<'_>) {
        let Some(path) = v.path else {
            self.clear(s.tid);
            return;
        };
        // A check of an ancestor of the pending check (a mkdir helper walking up) keeps the
        // pending one: its mkdir may still come.
        let cur = self.threads.get(&s.tid).copied().unwrap_or_default();
        let held = cur
            .held
            .or(cur.check)
            .filter(|c| is_ancestor(cx, path, c.path));
        // mkdir -p's verification of the entry a redundant mkdir ran into.
        // A stat that fails (the directory was removed meanwhile) verifies nothing: it is
        // news, not a repeat.
        let after = cur.after == Some(path)
            && matches!(q, Question::Stat { .. })
            && s.ret >= 0
            && cx.config.counts(s.ts);
        self.set(
            s.tid,
            Thread {
                check: Some(Check {
                    path,
                    call: v.seq,
                    stack: s.stack,
                    ts: s.ts,
                    dur: s.dur,
                    sys: s.sys,
                    counted: after,
                }),
                held,
                after: None,
            },
        );
        if after {
            let t = self.tallies.get(v.image, path);
            t.calls += 1;
            t.redundant(s.ts, s.dur, s.stack);
            cx.mark(v.seq, s.dur, s.stack);
            let e = self.extra.entry((v.image, path)).or_default();
            e.redundant += 1;
            e.after += 1;
            e.after_sys = Some(s.sys);
        }
    }

    fn removal(&mut self, s: &Syscall, v: &View) {
        if s.ret < 0 && s.ev & ev::UNFINISHED == 0 {
            return;
        }
        self.seq += 1;
        for p in [v.path, v.path2].into_iter().flatten() {
            self.removed.insert(p, (self.seq, s.sys));
        }
    }
}

impl Detector for EnsureDir {
    fn wants(&self, _sys: Sys) -> bool {
        // "Immediately before/after" needs to see every call of the thread.
        true
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        match s.sys {
            Sys::Mkdir | Sys::Mkdirat => self.mkdir(s, v, cx),
            Sys::Rmdir
            | Sys::Unlink
            | Sys::Unlinkat
            | Sys::Rename
            | Sys::Renameat
            | Sys::Renameat2 => {
                self.clear(s.tid);
                self.removal(s, v);
            }
            _ => match question(s) {
                Some(q @ (Question::Stat { .. } | Question::Access { .. }))
                    if s.ev & ev::UNFINISHED == 0 =>
                {
                    self.check(s, v, q, cx)
                }
                // An eventfd wakeup or a log line between the check and the mkdir does
                // not separate them (lookup::is_plumbing).
                _ if is_plumbing(s, v, cx) => {}
                _ => {
                    self.clear(s.tid);
                }
            },
        }
    }

    fn on_record(&mut self, rec: &dejavu_trace::Record, _cx: &Cx<'_>) {
        // An ended thread frees its slot: memory follows live threads.
        if let dejavu_trace::Record::Exit(e) = rec {
            if self.threads.remove(&e.tid).is_some_and(|t| !t.is_empty()) {
                self.armed -= 1;
            }
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let out = self.tallies.findings_with(
            // The ensured flag is a cache of "D exists": its counterfactual is the finding's
            // cache verdict (a vanished directory is a stale answer).
            &INFO, cx, Wording { cache: true }, &hazards,
            &mut extras(
                &self.extra,
                |a, b| {
                    a.redundant += b.redundant;
                    a.mkdirs += b.mkdirs;
                    a.before += b.before;
                    a.before_sys = a.before_sys.or(b.before_sys);
                    a.after += b.after;
                    a.after_sys = a.after_sys.or(b.after_sys);
                },
                |f, e| {
                    let mut text = format!(
                        "{} mkdir call{} failed with EEXIST on a directory the process already knew existed",
                        count(e.mkdirs),
                        if e.mkdirs == 1 { "" } else { "s" }
                    );
                    let checks = |n: u64, sys: Option<Sys>, place: &str| {
                        format!(
                            "{} {} check{} {place}",
                            count(n),
                            sys.map_or("stat", |s| s.name()),
                            if n == 1 { "" } else { "s" }
                        )
                    };
                    match (e.before, e.after) {
                        (0, 0) => {}
                        (b, 0) => text += &format!(", with {}", checks(b, e.before_sys, "before them")),
                        (0, a) => text += &format!(", with {}", checks(a, e.after_sys, "after them")),
                        (b, a) => {
                            text += &format!(
                                ", with {} and {}",
                                checks(b, e.before_sys, "before them"),
                                checks(a, e.after_sys, "after them")
                            )
                        }
                    }
                    f.example = Some(text);
                },
            ),
        );
        out
    }
}

/// Whether `a` is a proper ancestor of `p`.
fn is_ancestor(cx: &Cx<'_>, a: PathKey, p: PathKey) -> bool {
    let mut k = cx.replay.paths.parent(p);
    while let Some(q) = k {
        if q == a {
            return true;
        }
        k = cx.replay.paths.parent(q);
    }
    false
}

fn hazards(t: &Tally, _cx: &Cx<'_>) -> Vec<String> {
    let mut h = vec![
        "set the ensured flag only after mkdir succeeded or failed with EEXIST; a failed mkdir must \
         leave it unset so the next event retries"
            .to_string(),
    ];
    if t.invalidations > 0 {
        h.push(format!(
            "a traced process removed or renamed the directory (or a parent) {} time(s) ({}): the flag \
             must be cleared there",
            t.invalidations,
            t.invalidated_by.map_or("rmdir/rename", |s| s.name())
        ));
    }
    if t.stale > 0 {
        h.push(format!(
            "{} time(s) the directory had disappeared with no traced removal (another program removed \
             it): on ENOENT when creating a file inside it, clear the flag, recreate and retry",
            t.stale
        ));
    } else {
        h.push(
            "another program may remove the directory: on ENOENT when creating a file inside it, clear \
             the flag, recreate and retry"
                .into(),
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use crate::testkit::{dir, file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::Sys;

    const D: &str = "/home/u/.app/chats";
    const F: &str = "/home/u/.app/chats/s.jsonl";

    /// Seed 000 as Node.js does it: existsSync(dir) + mkdirSync(dir, {recursive: true})
    /// (mkdir, then statx when it exists) + appendFileSync(file) per record.
    fn seed_000(b: &mut TraceBuilder, records: usize) {
        for i in 0..records {
            b.access(D, 0, if i == 0 { -2 } else { 0 });
            b.mkdir(D, if i == 0 { 0 } else { -17 });
            if i > 0 {
                b.call(Sys::Statx, |c, b| {
                    c.path = Some(b.s(D));
                    c.stat = Some(b.st(dir(5)));
                });
            }
            b.access(F, 0, if i == 0 { -2 } else { 0 });
            b.open(F, 0o2101, 18, Some(file(6, i as i64 * 8, 1)));
            b.write(18, F, "{\"i\":1}\n", true);
            b.close(18, F);
        }
    }

    #[test]
    fn mkdir_eexist_per_record_with_its_checks_is_redundant() {
        let mut b = TraceBuilder::new();
        seed_000(&mut b, 10);
        let f = b.findings("ensure-dir");
        assert_eq!(f.len(), 1);
        // 10 mkdirs + 10 access before + 9 statx after; all but the first record's.
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (29, 27, 27 * 500)
        );
        assert_eq!(f[0].paths, vec![D.to_string()]);
        let cache = f[0].cache.clone().unwrap_or_default();
        assert_eq!(
            (cache.saved_calls, cache.stale_answers, cache.safe),
            (27, 0, true)
        );
        assert_eq!(
            f[0].example.as_deref(),
            Some(
                "9 mkdir calls failed with EEXIST on a directory the process already knew existed, \
                 with 9 access checks before them and 9 statx checks after them"
            )
        );
    }

    #[test]
    fn a_stat_that_verifies_one_mkdir_and_checks_the_next_counts_once() {
        // for each record: stat(d); mkdir(d): from the second record on, each stat comes
        // right after a redundant mkdir (its verification) and right before the next one
        // (its check). Found by `dejavu whatif`, whose ensure-once flag removed 18 calls
        // where the finding said 23.
        let mut b = TraceBuilder::new();
        b.stat(D, Err(2));
        b.mkdir(D, 0);
        for _ in 0..9 {
            b.stat(D, Ok(dir(4)));
            b.mkdir(D, -17);
        }
        let f = b.findings("ensure-dir");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (20, 18));
    }

    #[test]
    fn a_failing_stat_after_a_redundant_mkdir_verifies_nothing() {
        // Another process removes the directory right after a redundant mkdir: the stat
        // that follows finds it missing, and the mkdir after it creates it again.
        let mut b = TraceBuilder::new();
        b.stat(D, Err(2));
        b.mkdir(D, 0);
        b.stat(D, Ok(dir(4)));
        b.mkdir(D, -17);
        b.fork(300);
        b.pid = 300;
        b.tid = 300;
        b.call(Sys::Rmdir, |c, b| c.path = Some(b.s(D)));
        b.pid = 100;
        b.tid = 100;
        b.stat(D, Err(2));
        b.mkdir(D, 0);
        let f = b.findings("ensure-dir");
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].redundant_calls, 2,
            "the second mkdir and its check only"
        );
    }

    #[test]
    fn an_event_loop_wakeup_between_check_and_mkdir_does_not_separate_them() {
        // Node.js writes its eventfd from the main thread at moments of its own (seen in a
        // recording: once, between an existsSync and its mkdirSync).
        let mut plain = TraceBuilder::new();
        seed_000(&mut plain, 4);
        let mut woken = TraceBuilder::new();
        for i in 0..4 {
            woken.access(D, 0, if i == 0 { -2 } else { 0 });
            woken.write(9, "anon_inode:[eventfd]", "", false);
            woken.mkdir(D, if i == 0 { 0 } else { -17 });
            if i > 0 {
                woken.call(Sys::Statx, |c, b| {
                    c.path = Some(b.s(D));
                    c.stat = Some(b.st(dir(5)));
                });
            }
            woken.access(F, 0, if i == 0 { -2 } else { 0 });
            woken.open(F, 0o2101, 18, Some(file(6, i as i64 * 8, 1)));
            woken.write(18, F, "{\"i\":1}\n", true);
            woken.close(18, F);
        }
        let (a, b) = (plain.findings("ensure-dir"), woken.findings("ensure-dir"));
        assert_eq!((a[0].calls, a[0].redundant_calls), (11, 9));
        assert_eq!((b[0].calls, b[0].redundant_calls), (11, 9));
    }

    #[test]
    fn an_exists_check_before_a_mkdir_helper_that_stats_the_parent_counts() {
        // Python: `if not os.path.exists(d): ...` then `os.makedirs(d, exist_ok=True)`:
        // stat(d), stat(parent), mkdir(d) -> EEXIST, stat(d).
        let mut b = TraceBuilder::new();
        for i in 0..5 {
            b.stat(D, if i == 0 { Err(2) } else { Ok(dir(5)) });
            b.stat("/home/u/.app", Ok(dir(4)));
            b.mkdir(D, if i == 0 { 0 } else { -17 });
            if i > 0 {
                b.stat(D, Ok(dir(5)));
            }
        }
        let f = b.findings("ensure-dir");
        assert_eq!(f.len(), 1, "{f:#?}");
        // 5 mkdirs + 10 checks before them (d's and its parent's) + 4 stats after; the
        // first record's are needed.
        assert_eq!(
            (f[0].calls, f[0].redundant_calls, f[0].wasted_ns),
            (19, 16, 16 * 500)
        );
        assert_eq!(
            f[0].example.as_deref(),
            Some(
                "4 mkdir calls failed with EEXIST on a directory the process already knew existed, \
                 with 8 newfstatat checks before them and 4 newfstatat checks after them"
            )
        );
        // A check of an unrelated path in between still separates them.
        let mut b = TraceBuilder::new();
        b.mkdir(D, 0);
        for _ in 0..4 {
            b.read(7, "/etc/app.conf", 1, 1); // not a stat right after the previous mkdir
            b.stat(D, Ok(dir(5)));
            b.stat("/etc/app.conf", Ok(file(9, 1, 1)));
            b.mkdir(D, -17);
        }
        let f = b.findings("ensure-dir");
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 4));
    }

    #[test]
    fn ensuring_once_is_clean() {
        let mut b = TraceBuilder::new();
        b.mkdir(D, 0);
        for i in 0..10 {
            b.open(F, 0o2101, 18, Some(file(6, i * 8, 1)));
            b.write(18, F, "{\"i\":1}\n", true);
            b.close(18, F);
        }
        assert!(b.findings("ensure-dir").is_empty());
    }

    #[test]
    fn the_first_eexist_establishes_and_only_later_ones_count() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.mkdir("/tmp/cache", -17);
        }
        let f = b.findings("ensure-dir");
        assert_eq!((f[0].calls, f[0].redundant_calls), (4, 3));
    }

    #[test]
    fn a_failed_mkdir_does_not_establish_and_makes_the_process_forget() {
        let mut b = TraceBuilder::new();
        b.mkdir("/ro/dir", -13); // EACCES
        b.mkdir("/ro/dir", -17); // now it exists: establishes, not redundant
        b.mkdir("/ro/dir", -2); // ENOENT: the parent went away
        b.mkdir("/ro/dir", -17); // establishes again
        assert!(b.findings("ensure-dir").is_empty());
    }

    #[test]
    fn a_removal_by_the_program_is_an_invalidation_not_a_repeat() {
        let mut b = TraceBuilder::new();
        b.mkdir("/w/tmp/x", 0);
        b.mkdir("/w/tmp/x", -17); // redundant
        b.call(Sys::Rmdir, |c, b| c.path = Some(b.s("/w/tmp/x")));
        b.mkdir("/w/tmp/x", 0); // needed
        b.mkdir("/w/tmp/x", -17); // redundant
        b.call(Sys::Rename, |c, b| {
            c.path = Some(b.s("/w/tmp"));
            c.path2 = Some(b.s("/w/old"));
        }); // a parent moved away
        b.mkdir("/w/tmp/x", -17); // someone recreated it: news, not a repeat
        let f = b.findings("ensure-dir");
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 2));
        assert!(
            f[0].hazards.iter().any(|h| h.contains("2 time(s) (rmdir)")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn a_directory_that_vanished_without_a_traced_removal_is_reported_as_external() {
        let mut b = TraceBuilder::new();
        b.mkdir("/spool", 0);
        b.mkdir("/spool", -17);
        b.mkdir("/spool", 0); // another program removed it
        let f = b.findings("ensure-dir");
        assert_eq!(f[0].redundant_calls, 1);
        assert!(f[0].hazards.iter().any(|h| h.contains("no traced removal")));
        let cache = f[0].cache.clone().unwrap_or_default();
        assert_eq!((cache.stale_answers, cache.safe), (1, false));
    }

    #[test]
    fn only_checks_immediately_around_the_mkdir_in_the_same_thread_count() {
        let mut b = TraceBuilder::new();
        b.mkdir(D, 0);
        for _ in 0..3 {
            b.access(D, 0, 0);
            b.read(7, "/etc/app.conf", 1, 1); // a call on a file in between
            b.mkdir(D, -17);
            b.stat("/other", Ok(file(1, 1, 1))); // a stat, but of another path
            b.stat(D, Ok(dir(5)));
        }
        // Another thread's check does not belong to this thread's mkdir.
        b.read(7, "/etc/app.conf", 1, 1);
        b.tid = 101;
        b.access(D, 0, 0);
        b.tid = 100;
        b.mkdir(D, -17);
        let f = b.findings("ensure-dir");
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 4));
    }

    #[test]
    fn a_failing_check_before_a_redundant_mkdir_counts_too() {
        let mut b = TraceBuilder::new();
        b.mkdir("/srv/out", 0);
        for _ in 0..3 {
            b.access("/srv/out", 2, -13); // W_OK denied, then mkdir anyway
            b.mkdir("/srv/out", -17);
        }
        let f = b.findings("ensure-dir");
        assert_eq!((f[0].calls, f[0].redundant_calls), (7, 6));
    }

    #[test]
    fn processes_learn_separately() {
        let mut b = TraceBuilder::new();
        b.mkdir("/out", 0);
        b.fork(200);
        b.pid = 200;
        b.tid = 200;
        b.mkdir("/out", -17); // first for this process
        assert!(b.findings("ensure-dir").is_empty());
    }

    #[test]
    fn skip_startup_ignores_early_repeats() {
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.mkdir("/out", -17);
        }
        let cfg = Config {
            min_calls: 1,
            skip_startup_ns: 5_000,
            ..Config::default()
        };
        let a = b.analyze_with(&cfg);
        let f: Vec<_> = a
            .findings
            .iter()
            .filter(|f| f.detector == "ensure-dir")
            .collect();
        assert_eq!(f[0].redundant_calls, 1, "only the mkdir at 5 µs counts");
    }
}
