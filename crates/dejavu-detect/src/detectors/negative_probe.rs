//! negative-probe: the same call on the same path failing the same way again and again,
//! with nothing changed in between: ENOENT probes (existsSync loops, search paths probed
//! per call), and every other failure that says something lasting about the path
//! (ENOTDIR, EACCES, ELOOP, EEXIST, ENOTEMPTY, ...).

use super::lookup::{is_lookup_call, is_negative, question, Question};
use crate::group::{cache_hazards, count, extras, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{PathKey, Version, View};
use dejavu_trace::{ev, names::errno_label, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "negative-probe",
    summary: "the same call on the same path failing the same way again and again (ENOENT, ENOTDIR, \
EACCES, ELOOP, EEXIST, ...), nothing changed in between",
    explain: "A call that fails is redundant when the same process already made the same call on the \
same path, got the same error, and nothing changed in between: neither the path itself nor any entry \
of its parent directory (a create, rename, unlink, chmod or chown there moves the version dejavu \
compares). The calls are the lookups — the stat family, access, readlink and open (any flags: an \
O_DIRECTORY probe of a file fails with ENOTDIR, an O_NOFOLLOW open of a symlink with ELOOP, an \
O_CREAT|O_EXCL open of an existing file with EEXIST) — and the changes of one path: unlink, rmdir, \
mkdir, symlink, chmod, chown, truncate, utimensat by path, and connect to a Unix socket path. The \
errors are those that say something lasting about the path: ENOENT, ENOTDIR, EACCES, EPERM, ELOOP, \
EISDIR, ENAMETOOLONG, EEXIST, ENOTEMPTY, EROFS. Transient errors (EINTR, EAGAIN, EBUSY, ETXTBSY, \
EMFILE, ENOMEM, EIO ...) are never counted: the next try may succeed. A mkdir failing with EEXIST is \
ensure-dir's finding, not this one's. The same call failing with a different error at the same \
version is counted as a stale answer (caching the failure would have been wrong). Why one detector \
for every error: the fix is the same — remember the failure until the path or its directory \
changes — and so is the hazard (a cached failure hides a later create or permission change); the \
error only changes the wording. Typical sources: existsSync/os.path.exists in a loop, the same \
search path probed for every module or config lookup, an optional file looked for per request, a \
\"is it a directory?\" probe of the same file per item, removal of a file that is long gone. The \
program's first probe of a path the runtime probed (its start-up, before a language agent said \
start-up was over, or its import system or module loader) is its own first, not a repeat.",
    example: "for each request: fs.existsSync('.ignore')   // absent, asked 5,000 times\nfor each item: \
open('settings', O_DIRECTORY)   // a file: ENOTDIR every time",
    fix: "remember the failure (the path is absent, not a directory, not accessible) and retry only \
when the path or its directory changes (or on a timer the program can afford), or look it up once at \
start-up",
    hazards: "Caching a failure is the classic hazard: a file created later (or a permission granted \
later) is missed unless changes in its directory invalidate the entry (dejavu lists those it saw). \
Never cache a failure that may be transient. An EEXIST from an exclusive create may be a lock another \
process holds: retrying it is polling, so wait on the lock (flock, inotify) instead.",
    options: &[],
    make: |_cfg: &Config| Box::new(NegativeProbe::default()),
};

const AT_REMOVEDIR: u64 = 0x200;
const EEXIST: i64 = -17;

/// The call whose failure repeats: a lookup (by the question it asks) or a change of one
/// path (by the call, its `*at` spellings folded in).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Ask {
    Lookup(Question),
    Change(Sys),
}

impl Ask {
    fn name(self) -> &'static str {
        match self {
            Ask::Lookup(q) => q.name(),
            Ask::Change(s) => s.name(),
        }
    }
}

/// The call `s` makes on its path, when it is one this detector follows.
pub(crate) fn ask(s: &Syscall) -> Option<Ask> {
    if let Some(q) = question(s) {
        return Some(Ask::Lookup(q));
    }
    if s.ev & ev::PATH_FROM_FD != 0 || s.path.is_none() {
        return None;
    }
    use Sys::*;
    let sys = match s.sys {
        Unlink => Unlink,
        Unlinkat if s.flags & AT_REMOVEDIR != 0 => Rmdir,
        Unlinkat => Unlink,
        Rmdir => Rmdir,
        // EEXIST is ensure-dir's; other failures of mkdir are this detector's.
        Mkdir | Mkdirat if s.ret == EEXIST => return None,
        Mkdir | Mkdirat => Mkdir,
        Symlink | Symlinkat => Symlink,
        Chmod | Fchmodat | Fchmodat2 => Chmod,
        Chown | Lchown | Fchownat => Chown,
        Truncate => Truncate,
        Utimensat => Utimensat,
        Connect => Connect,
        _ => return None,
    };
    Some(Ask::Change(sys))
}

fn wants_call(sys: Sys) -> bool {
    use Sys::*;
    is_lookup_call(sys)
        || matches!(
            sys,
            Unlink
                | Unlinkat
                | Rmdir
                | Mkdir
                | Mkdirat
                | Symlink
                | Symlinkat
                | Chmod
                | Fchmodat
                | Fchmodat2
                | Chown
                | Lchown
                | Fchownat
                | Truncate
                | Utimensat
                | Connect
        )
}

#[derive(Clone, Copy)]
struct Last {
    version: Version,
    errno: i64,
    ts: u64,
    stack: Option<dejavu_trace::StackId>,
}

/// Redundant failures of one (image, path), by call and error, for the example.
#[derive(Default)]
struct Extra {
    by: Vec<(Ask, i64, u64)>,
}

impl Extra {
    fn add(&mut self, ask: Ask, errno: i64, n: u64) {
        match self.by.iter_mut().find(|e| e.0 == ask && e.1 == errno) {
            Some(e) => e.2 += n,
            None => self.by.push((ask, errno, n)),
        }
    }
}

#[derive(Default)]
struct NegativeProbe {
    last: FxHashMap<(u32, PathKey, Ask), Last>,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

impl Detector for NegativeProbe {
    fn wants(&self, sys: Sys) -> bool {
        wants_call(sys)
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if s.ev & ev::UNFINISHED != 0 {
            return;
        }
        let (Some(a), Some(path)) = (ask(s), v.path) else {
            return;
        };
        let key = (v.image, path, a);
        if !is_negative(s) {
            // It worked (or failed for a passing reason): a later failure is a new fact,
            // not a repeat.
            self.last.remove(&key);
            return;
        }
        let prev = self.last.insert(
            key,
            Last {
                version: v.negative_version,
                errno: s.ret,
                ts: s.ts,
                stack: s.stack,
            },
        );
        if !cx.config.counts(s.ts) {
            return;
        }
        let t = self.tallies.get(v.image, path);
        t.calls += 1;
        match prev {
            // The program's first probe of what the runtime probed (its start-up, its
            // import system or module loader): its own first, as repeated-lookup counts it.
            Some(p) if cx.first_after_runtime(v.image, path, (p.ts, p.stack), (s.ts, s.stack)) => {}
            Some(p) if p.version == v.negative_version && p.errno == s.ret => {
                t.redundant(s.ts, s.dur, s.stack);
                cx.mark(v.seq, s.dur, s.stack);
                self.extra
                    .entry((v.image, path))
                    .or_default()
                    .add(a, s.ret, 1);
            }
            Some(p) if p.version == v.negative_version => t.stale += 1,
            Some(_) => {
                t.invalidations += 1;
                let parent = cx.replay.paths.parent(path);
                t.invalidated_by = t
                    .invalidated_by
                    .or(cx.replay.paths.changed_by(path))
                    .or(parent.and_then(|p| cx.replay.paths.changed_by(p)));
            }
            None => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        self.tallies.findings_with(
            &INFO,
            cx,
            Wording { cache: true },
            &|t, _| {
                let mut h = cache_hazards(t, "negative entry");
                h.push(
                    "a cached failure must be dropped when the path or an entry of its directory is \
                     created, renamed, removed or has its permissions changed"
                        .into(),
                );
                h
            },
            &mut extras(
                &self.extra,
                |a, b| {
                    for &(ask, errno, n) in &b.by {
                        a.add(ask, errno, n);
                    }
                },
                |f, e| {
                    let mut by = e.by.clone();
                    by.sort_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)));
                    let parts: Vec<String> = by
                        .iter()
                        .take(3)
                        .map(|&(ask, errno, n)| {
                            format!(
                                "{} {} ({})",
                                count(n),
                                errno_label(-errno as i32),
                                ask.name()
                            )
                        })
                        .collect();
                    let more = if by.len() > 3 { ", ..." } else { "" };
                    f.example = Some(format!(
                        "failed again the same way with nothing changed: {}{more}",
                        parts.join(", ")
                    ));
                    if by.iter().any(|&(_, errno, _)| errno == EEXIST) {
                        f.hazards.push(
                            "EEXIST from an exclusive create may be a lock another process holds: \
                             retrying it is polling; wait on the lock (flock, inotify) instead"
                                .into(),
                        );
                    }
                },
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};
    use dejavu_trace::Sys;

    const O_DIRECTORY: u64 = 0o200000;
    const O_NOFOLLOW: u64 = 0o400000;

    #[test]
    fn gettexts_catalog_probes_under_a_parser_are_the_runtimes() {
        // argparse translates its messages: each parser made looks for messages.mo in
        // every language's LC_MESSAGES (gettext.find). The same probes from another
        // function of the standard library, at the program's line, are its own.
        use dejavu_trace::FrameKind::Python;
        let run = |inner: (&str, &str)| {
            let mut b = TraceBuilder::new();
            b.exec("/usr/bin/python3", &["python3", "/app/cli.py"]);
            b.ready();
            let s = b.stack(&[
                (Python, "exists", "<frozen genericpath>", 19),
                (Python, inner.0, inner.1, 507),
                (
                    Python,
                    "ArgumentParser.__init__",
                    "/usr/lib/python3.11/argparse.py",
                    1741,
                ),
                (Python, "build", "/app/cli.py", 12),
            ]);
            b.stack = Some(s);
            for _ in 0..12 {
                b.stat("/usr/share/locale/en/LC_MESSAGES/messages.mo", Err(2));
                b.stat("/opt/py/share/locale/en/LC_MESSAGES/messages.mo", Err(2));
            }
            let f = b.findings("negative-probe");
            assert_eq!(f.len(), 1, "{f:?}");
            (f[0].owner, f[0].callsites[0].function.clone())
        };
        assert_eq!(
            run(("find", "/usr/lib/python3.11/gettext.py")),
            (crate::Owner::Runtime, "build".to_string())
        );
        assert_eq!(
            run(("guess_type", "/usr/lib/python3.11/mimetypes.py")),
            (crate::Owner::Own, "build".to_string())
        );
    }

    #[test]
    fn repeated_enoent_is_redundant_until_something_is_created_in_the_directory() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            b.access("/w/.ignore", 0, -2);
        }
        // A sibling is created: the directory changed, the next ENOENT is a new fact.
        b.open("/w/other", 0o101, 3, Some(file(5, 0, 1)));
        b.access("/w/.ignore", 0, -2);
        b.access("/w/.ignore", 0, -2);
        let f = b.findings("negative-probe");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 3));
        assert!(
            f[0].hazards.iter().any(|h| h.contains("openat")),
            "{:?}",
            f[0].hazards
        );
        assert_eq!(
            f[0].example.as_deref(),
            Some("failed again the same way with nothing changed: 3 ENOENT (access)")
        );
    }

    #[test]
    fn the_programs_first_probe_of_what_start_up_probed_is_not_redundant() {
        let mut b = TraceBuilder::new();
        b.access("/venv/lib/missing.pth", 0, -2);
        b.access("/venv/lib/missing.pth", 0, -2);
        b.ready();
        for _ in 0..3 {
            b.access("/venv/lib/missing.pth", 0, -2);
        }
        let f = b.findings("negative-probe");
        assert_eq!(
            (f[0].calls, f[0].redundant_calls),
            (5, 3),
            "start-up's second, and the program's second and third"
        );
    }

    #[test]
    fn a_path_that_appears_resets_the_probe() {
        let mut b = TraceBuilder::new();
        b.stat("/w/lock", Err(2));
        b.stat("/w/lock", Ok(file(1, 0, 1))); // created by someone else
        b.stat("/w/lock", Err(2)); // and removed again
        assert!(b.findings("negative-probe").is_empty());
    }

    #[test]
    fn an_o_directory_probe_of_the_same_file_per_item_is_redundant() {
        let mut b = TraceBuilder::new();
        for _ in 0..10 {
            b.open("/app/settings", O_DIRECTORY, -20, None); // ENOTDIR
            b.open("/app/link", O_NOFOLLOW, -40, None); // ELOOP
        }
        let f = b.findings("negative-probe");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (20, 18));
        assert_eq!(
            f[0].example.as_deref(),
            Some(
                "failed again the same way with nothing changed: 9 ENOTDIR (open), 9 ELOOP (open)"
            )
        );
    }

    #[test]
    fn eacces_and_failed_changes_repeat_too_until_a_chmod() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.stat("/root/secret", Err(13)); // EACCES
            b.call(Sys::Rmdir, |c, b| {
                c.path = Some(b.s("/w/cache"));
                c.ret = -39; // ENOTEMPTY
            });
            b.call(Sys::Unlink, |c, b| {
                c.path = Some(b.s("/w/gone.pid"));
                c.ret = -2;
            });
        }
        // Permission granted: the next EACCES is news.
        b.call(Sys::Chmod, |c, b| {
            c.path = Some(b.s("/root/secret"));
            c.mode = 0o644;
        });
        b.stat("/root/secret", Err(13));
        let f = b.findings("negative-probe");
        let total: u64 = f.iter().map(|f| f.redundant_calls).sum();
        assert_eq!(
            total, 9,
            "3 of each, the EACCES after the chmod not: {f:#?}"
        );
        let ex: Vec<&str> = f.iter().filter_map(|f| f.example.as_deref()).collect();
        let all = ex.join(" | ");
        for want in [
            "3 EACCES (stat)",
            "3 ENOTEMPTY (rmdir)",
            "3 ENOENT (unlink)",
        ] {
            assert!(all.contains(want), "{want}: {all}");
        }
    }

    #[test]
    fn repeated_lookup_leaves_lasting_failures_to_this_detector() {
        let trace = || {
            let mut b = TraceBuilder::new();
            for _ in 0..4 {
                b.stat("/root/secret", Err(13));
            }
            b
        };
        assert!(trace().findings("repeated-lookup").is_empty());
        assert_eq!(trace().findings("negative-probe")[0].redundant_calls, 3);
    }

    #[test]
    fn transient_failures_and_mkdir_eexist_are_not_counted() {
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.open("/w/busy", 0o1, -26, None); // ETXTBSY
            b.open("/w/fd", 0, -24, None); // EMFILE
            b.mkdir("/w/out", -17); // ensure-dir's
        }
        assert!(b.findings("negative-probe").is_empty());
        let mut b = TraceBuilder::new();
        for _ in 0..5 {
            b.mkdir("/w/out", -17);
        }
        assert_eq!(b.findings("ensure-dir")[0].redundant_calls, 4);
    }

    #[test]
    fn an_exclusive_create_failing_with_eexist_warns_that_it_may_be_a_lock() {
        let mut b = TraceBuilder::new();
        for _ in 0..4 {
            b.open("/w/app.lock", 0o301, -17, None); // O_CREAT|O_EXCL|O_WRONLY
        }
        let f = b.findings("negative-probe");
        assert_eq!(f[0].redundant_calls, 3);
        assert!(f[0].hazards.iter().any(|h| h.contains("polling")));
    }
}
