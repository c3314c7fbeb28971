//! The fixed sequence of calls a function makes each time it runs: per thread and call
//! site function, its calls are cut into runs where the first call's kind comes round
//! again (stat(guest/NAME) -> ENOENT, stat(host/NAME), lstat(host/NAME), then the next
//! NAME); when one run shape covers most of the function's calls, the finding at that
//! function says "per call of path_filestat_get: 3 calls, 2 redundant". A function that
//! runs once per process (main) repeats a loop's body instead: its runs start wherever
//! the cut fell, so the steps are shown from the body's first line ("per iteration of a
//! loop in main"); a function without a name of its own (a module's top level) is a call
//! site per line, and a run is one execution of that line ("per run of app.py:11").

use crate::callsite::SiteKey;
use crate::detectors::lookup::question;
use crate::{Cx, Sequence};
use dejavu_replay::{PathKey, View};
use dejavu_trace::{StrId, Sys, Syscall};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Longest run kept: a function whose runs are longer is not a small loop body.
const MAX_RUN: usize = 64;
/// Runs needed to call it a sequence.
const MIN_RUNS: u64 = 5;
/// Calls of closed runs kept waiting before their redundant calls are counted: a detector
/// may mark a call well after it was made (open-close-churn holds read cycles back until
/// the path has min_read_cycles of them; a cycle's open is marked at its close).
const LAG_CALLS: usize = 1 << 16;

/// One call's kind: what it did (stat, lstat, openat...), in which directory, and how it
/// failed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Sig {
    verb: &'static str,
    dir: u32,
    errno: i32,
}

/// One call of a run: its kind, its call number, its path, its line in the function.
type Call = (u32, u64, Option<PathKey>, u32);

#[derive(Default)]
struct Run {
    calls: Vec<Call>,
}

#[derive(Default)]
struct Shape {
    runs: u64,
    redundant: u64,
    /// The paths of the first run, and whether each step's path changed between runs.
    paths: Vec<Option<PathKey>>,
    varies: Vec<bool>,
    /// The lines of the first run's calls (0 when unknown).
    lines: Vec<u32>,
}

/// Tracks call sequences over one analysis.
#[derive(Default)]
pub(crate) struct Tracker {
    sigs: Vec<Sig>,
    sig_ids: FxHashMap<Sig, u32>,
    dirs: Vec<String>,
    dir_ids: FxHashMap<Vec<u8>, u32>,
    dir_of: Vec<u32>,
    runs: FxHashMap<(u32, SiteKey), Run>,
    shapes: FxHashMap<(SiteKey, Vec<u32>), Shape>,
    calls: FxHashMap<SiteKey, u64>,
    /// Per thread, the site of its last call.
    last_site: FxHashMap<u32, SiteKey>,
    /// Closed runs whose redundant calls are not counted yet, oldest first, and their
    /// calls.
    pending: VecDeque<(SiteKey, Vec<Call>)>,
    pending_calls: usize,
}

fn parent(p: &[u8]) -> &[u8] {
    match p.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &p[..i],
        None => b"",
    }
}

impl Tracker {
    fn dir(&mut self, cx: &Cx<'_>, p: Option<PathKey>) -> u32 {
        let Some(p) = p else { return u32::MAX };
        let i = p.0 as usize;
        if self.dir_of.len() <= i {
            self.dir_of.resize(i + 1, u32::MAX - 1);
        }
        if self.dir_of[i] == u32::MAX - 1 {
            let d = crate::pattern::mask(parent(cx.replay.paths.bytes(p))).into_bytes();
            let n = self.dir_ids.len() as u32;
            let id = *self.dir_ids.entry(d.clone()).or_insert(n);
            if id == n {
                self.dirs.push(String::from_utf8_lossy(&d).into_owned());
            }
            self.dir_of[i] = id;
        }
        self.dir_of[i]
    }

    /// One call of `s` (after the detectors saw it), made from `site`'s function at
    /// `line` (0 when unknown).
    pub fn call(&mut self, s: &Syscall, v: &View, site: SiteKey, line: u32, cx: &Cx<'_>) {
        let verb = match question(s) {
            Some(q) => q.name(),
            // A stat of a descriptor, in any of its spellings.
            None if matches!(s.sys, Sys::Fstat | Sys::Newfstatat | Sys::Statx) => "fstat",
            None => s.sys.name(),
        };
        let sig = Sig {
            verb,
            dir: self.dir(cx, v.path),
            errno: s.errno().unwrap_or(0),
        };
        let n = self.sig_ids.len() as u32;
        let id = *self.sig_ids.entry(sig).or_insert(n);
        if id == n {
            self.sigs.push(sig);
        }
        *self.calls.entry(site).or_default() += 1;
        let key = (s.tid, site);
        // A site that is one line of a function without a name of its own (a module's top
        // level): a call after the thread's calls from elsewhere starts the line's next
        // execution.
        let elsewhere = self
            .last_site
            .insert(s.tid, site)
            .is_some_and(|p| p != site);
        let run = self.runs.entry(key).or_default();
        if run.calls.first().is_some_and(|c| c.0 == id) || (site.line != 0 && elsewhere) {
            let done = std::mem::take(&mut run.calls);
            self.closed(site, done, cx);
        }
        let run = self.runs.entry(key).or_default();
        if run.calls.len() >= MAX_RUN {
            run.calls.clear();
        }
        run.calls.push((id, v.seq, v.path, line));
    }

    /// A run ended: counted once the calls after it had time to be marked.
    fn closed(&mut self, site: SiteKey, run: Vec<Call>, cx: &Cx<'_>) {
        if run.len() < 2 {
            return;
        }
        self.pending_calls += run.len();
        self.pending.push_back((site, run));
        while self.pending_calls > LAG_CALLS {
            let Some((site, run)) = self.pending.pop_front() else {
                break;
            };
            self.pending_calls -= run.len();
            Self::close(&mut self.shapes, site, run, cx);
        }
    }

    fn close(
        shapes: &mut FxHashMap<(SiteKey, Vec<u32>), Shape>,
        site: SiteKey,
        run: Vec<Call>,
        cx: &Cx<'_>,
    ) {
        if run.len() < 2 {
            return;
        }
        let sigs: Vec<u32> = run.iter().map(|c| c.0).collect();
        let sh = shapes.entry((site, sigs)).or_default();
        if sh.runs == 0 {
            sh.paths = run.iter().map(|c| c.2).collect();
            sh.varies = vec![false; run.len()];
            sh.lines = run.iter().map(|c| c.3).collect();
        } else {
            for (i, c) in run.iter().enumerate() {
                if sh.paths[i] != c.2 {
                    sh.varies[i] = true;
                }
            }
        }
        sh.runs += 1;
        sh.redundant += run.iter().filter(|c| cx.is_marked(c.1)).count() as u64;
    }

    /// The sequences found, by function: (function, file) -> sequence.
    pub fn finish(mut self, cx: &Cx<'_>) -> Vec<(Option<StrId>, Option<StrId>, Sequence)> {
        for (site, run) in std::mem::take(&mut self.pending) {
            Self::close(&mut self.shapes, site, run, cx);
        }
        let open: Vec<((u32, SiteKey), Run)> = self.runs.drain().collect();
        for ((_, site), run) in open {
            Self::close(&mut self.shapes, site, run.calls, cx);
        }
        let mut best: FxHashMap<SiteKey, (&Vec<u32>, &Shape)> = FxHashMap::default();
        for ((site, sigs), sh) in &self.shapes {
            let better = match best.get(site) {
                None => true,
                Some((bs, b)) => {
                    (
                        sh.runs * sigs.len() as u64,
                        std::cmp::Reverse(sigs.as_slice()),
                    ) > (b.runs * bs.len() as u64, std::cmp::Reverse(bs.as_slice()))
                }
            };
            if better {
                best.insert(*site, (sigs, sh));
            }
        }
        let mut out = Vec::new();
        for (site, (sigs, sh)) in best {
            let total = self.calls.get(&site).copied().unwrap_or(0);
            let covered = sh.runs * sigs.len() as u64;
            if sh.runs < MIN_RUNS || covered * 2 < total || sh.redundant == 0 {
                continue;
            }
            let s = |id: Option<StrId>| {
                id.map(|i| cx.strings.lossy(i).into_owned())
                    .unwrap_or_default()
            };
            let function = s(site.function);
            let per = if site.line != 0 {
                "line"
            } else if runs_once(&function) {
                "iteration"
            } else {
                "call"
            };
            let mut steps: Vec<String> = sigs
                .iter()
                .enumerate()
                .map(|(i, &g)| {
                    let sig = self.sigs[g as usize];
                    let mut step = sig.verb.to_string();
                    match (sh.paths[i], sh.varies[i]) {
                        (Some(p), false) => {
                            step.push(' ');
                            step.push_str(&cx.path(p));
                        }
                        (Some(p), true) => {
                            // The directory as the first run named it (the signature's
                            // is masked: a generated name is one directory to people).
                            let d = String::from_utf8_lossy(parent(cx.replay.paths.bytes(p)))
                                .into_owned();
                            step.push(' ');
                            step.push_str(d.trim_end_matches('/'));
                            step.push_str("/*");
                        }
                        (None, _) => {}
                    }
                    if sig.errno != 0 {
                        step.push_str(" -> ");
                        step.push_str(
                            dejavu_trace::names::errno_name(sig.errno).unwrap_or("error"),
                        );
                    }
                    step
                })
                .collect();
            if per == "iteration" {
                // The run started where the cut fell: show the body from its first line.
                let lines = &sh.lines;
                if lines.iter().all(|&l| l != 0) {
                    let first = (0..lines.len()).min_by_key(|&i| lines[i]).unwrap_or(0);
                    steps.rotate_left(first);
                }
            }
            out.push((
                site.function,
                site.file,
                Sequence {
                    function,
                    file: s(site.file),
                    per,
                    line: site.line,
                    iterations: sh.runs,
                    calls: sigs.len() as u32,
                    redundant: (sh.redundant as f64 / sh.runs as f64 * 10.0).round() / 10.0,
                    steps,
                },
            ));
        }
        out
    }
}

/// Whether a function runs once per process, so that repeated runs of its calls are a
/// loop in it, not calls of it: C's and C++'s main, Rust's (`crate::main`), Go's
/// (`main.main`).
fn runs_once(function: &str) -> bool {
    function == "main" || function.ends_with("::main") || function == "main.main"
}

#[cfg(test)]
mod tests {
    use crate::testkit::{dir, file, TraceBuilder};
    use crate::Sequence;
    use dejavu_trace::FrameKind;
    use dejavu_trace::FrameKind::{Native, Python};

    const O_CREAT_WRONLY: u64 = 0o101;
    const O_PATH_DIRECTORY: u64 = 0o10200000;

    fn at(b: &mut TraceBuilder, kind: FrameKind, function: &str, file: &str, line: u32) {
        let st = b.stack(&[(kind, function, file, line)]);
        b.stack = Some(st);
    }

    fn sequence(b: TraceBuilder, detector: &str) -> Sequence {
        let f = b.findings(detector);
        assert_eq!(f.len(), 1, "{f:#?}");
        f[0].sequence.clone().expect("a sequence")
    }

    /// open-close-churn's dir_reopen_dirty.c: main makes 50 entries (lines 17, 18), then
    /// for each opens the directory (22), the entry relative to it (25), closes the
    /// directory (26), reads the entry (28) and closes it (29).
    fn dir_reopen(b: &mut TraceBuilder, function: &str) {
        let src = "/src/dir_reopen.c";
        at(b, Native, function, src, 14);
        b.mkdir("/w/tree", 0);
        for i in 0..50 {
            let name = format!("/w/tree/f{i:03}");
            at(b, Native, function, src, 17);
            b.open(&name, O_CREAT_WRONLY, 3, Some(file(10 + i, 0, 1)));
            at(b, Native, function, src, 18);
            b.write(3, &name, "tree/f000", false).close(3, &name);
        }
        for i in 0..50 {
            let name = format!("/w/tree/f{i:03}");
            at(b, Native, function, src, 22);
            b.open("/w/tree", O_PATH_DIRECTORY, 3, Some(dir(9)));
            at(b, Native, function, src, 25);
            b.open(&name, 0, 4, Some(file(10 + i, 9, 1)));
            at(b, Native, function, src, 26);
            b.close(3, "/w/tree");
            at(b, Native, function, src, 28);
            b.read(4, &name, 64, 9);
            at(b, Native, function, src, 29);
            b.close(4, &name);
        }
    }

    #[test]
    fn a_loop_in_main_is_per_iteration_shown_from_the_top_of_its_body() {
        let mut b = TraceBuilder::new();
        dir_reopen(&mut b, "main");
        let q = sequence(b, "open-close-churn");
        assert_eq!(
            (q.per, q.line, q.function.as_str()),
            ("iteration", 0, "main")
        );
        assert_eq!(q.calls, 5, "{q:#?}");
        // Each iteration reopens the directory: its open and its close are redundant.
        assert_eq!(q.redundant, 2.0, "{q:#?}");
        // The run was cut wherever it fell; the steps start at line 22.
        assert_eq!(
            q.steps,
            vec![
                "open /w/tree",
                "open /w/tree/*",
                "close /w/tree",
                "read /w/tree/*",
                "close /w/tree/*"
            ],
            "{q:#?}"
        );
    }

    #[test]
    fn rusts_main_runs_once_too_and_another_function_is_per_call() {
        let mut b = TraceBuilder::new();
        dir_reopen(&mut b, "reopen::main");
        assert_eq!(sequence(b, "open-close-churn").per, "iteration");
        // urandom_dirty.c: suffix() opens /dev/urandom (9), reads 6 bytes (11), closes it
        // (12), once per item: each call of suffix is a run, in the order it made them.
        let mut b = TraceBuilder::new();
        for _ in 0..100 {
            at(&mut b, Native, "suffix", "/src/urandom.c", 9);
            b.open(
                "/dev/urandom",
                0o2000000,
                3,
                Some(crate::testkit::chardev(1, 9)),
            );
            at(&mut b, Native, "suffix", "/src/urandom.c", 11);
            b.read(3, "/dev/urandom", 6, 6);
            at(&mut b, Native, "suffix", "/src/urandom.c", 12);
            b.close(3, "/dev/urandom");
        }
        let q = sequence(b, "open-close-churn");
        assert_eq!((q.per, q.line, q.calls), ("call", 0, 3), "{q:#?}");
        // 99 of the 100 runs have a redundant open and close, the first 9 among them
        // marked only when the tenth cycle made /dev/urandom churn.
        assert_eq!(q.redundant, 2.0, "{q:#?}");
        assert_eq!(
            q.steps,
            vec![
                "open /dev/urandom",
                "read /dev/urandom",
                "close /dev/urandom"
            ]
        );
    }

    /// makedirs_dirty.py: per record, os.path.exists(d) on line 9 stats d; line 11's
    /// os.makedirs(d, exist_ok=True) stats the parent, mkdirs d (EEXIST) and stats d.
    #[test]
    fn a_module_top_level_is_per_run_of_its_line_from_its_first_call() {
        let mut b = TraceBuilder::new();
        let script = "/app/makedirs.py";
        at(&mut b, Python, "<module>", script, 11);
        b.mkdir("/w/out", 0).mkdir("/w/out/chats", 0);
        for _ in 0..100 {
            at(&mut b, Python, "<module>", script, 9);
            b.stat("/w/out/chats", Ok(dir(2)));
            at(&mut b, Python, "<module>", script, 11);
            b.stat("/w/out", Ok(dir(1)));
            b.mkdir("/w/out/chats", -17);
            b.stat("/w/out/chats", Ok(dir(2)));
        }
        let q = sequence(b, "ensure-dir");
        assert_eq!(
            (q.per, q.line, q.function.as_str()),
            ("line", 11, "<module>")
        );
        assert_eq!(
            q.steps,
            vec![
                "stat /w/out",
                "mkdir /w/out/chats -> EEXIST",
                "stat /w/out/chats"
            ],
            "{q:#?}"
        );
    }
}
