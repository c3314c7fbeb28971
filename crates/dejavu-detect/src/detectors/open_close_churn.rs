//! open-close-churn: the same file opened for writing, a few small operations, closed,
//! again and again in one process (appendFileSync per record, open+pwrite+close per write).

use crate::group::{count, extras, uses_fd, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{FdKind, PathKey, Version, View};
use dejavu_trace::{ev, stat_known, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "open-close-churn",
    summary: "the same file opened, written a little, closed, again and again",
    explain: "A cycle is one successful open of a regular file for writing (O_WRONLY or O_RDWR: open, \
openat, openat2, creat) until the close of that descriptor, with at most max_ops calls on the \
descriptor in between (writes, reads, lseek, fstat, fsync ...). Cycles are counted per process and \
path; read-only opens are left to reread-unchanged, and a cycle with more than max_ops calls is real \
work and not counted. Every short cycle after the first is a repeat, and its open and its close are \
the redundant calls (so N cycles give 2 x N calls and 2 x (N - 1) redundant calls, and the time \
counted is those opens' and closes' own durations): one handle kept open would have carried the same operations. A \
cycle that opened a different file (other device or inode) than the previous cycle is not a repeat \
when no traced process touched the path in between — another program replaced or rotated the file, \
and reopening was needed; when the program itself replaced it (unlink, rename, recreate), the cycle \
still counts.",
    example: "for each chat record: fs.appendFileSync('chats/session.jsonl', line)   // open + write + \
close, 5,000 times",
    fix: "open the file once and keep the handle; buffer the small writes and flush them in batches, on \
exit and on fatal signals (or move the writes off the hot path onto one writer that owns the handle)",
    hazards: "Another program may rotate or rename the file (logrotate): with one long-lived handle the \
program keeps writing to the old file, so reopen on rotation (SIGHUP, or when the path's dev/inode no \
longer matches fstat of the handle). Threads or processes sharing one handle need a lock, or O_APPEND \
with one write per record. Buffered data must be flushed on exit, on signals and on a broken pipe, or \
the last records are lost.",
    options: &[(
        "max_ops",
        8,
        "a cycle with at most this many calls between its open and its close is short enough to count",
    )],
    make: |cfg: &Config| {
        Box::new(OpenCloseChurn {
            max_ops: cfg.opt("open-close-churn", "max_ops", 8),
            open: FxHashMap::default(),
            paths: FxHashMap::default(),
            tallies: Tallies::default(),
            extra: FxHashMap::default(),
        })
    },
};

const O_ACCMODE: u64 = 3;
const O_TRUNC: u64 = 0o1000;

/// A cycle under way: an open for writing whose close has not come yet.
#[derive(Clone, Copy)]
struct Cycle {
    path: PathKey,
    /// The open's call number in the trace (`View::seq`).
    open_call: u64,
    open_stack: Option<dejavu_trace::StackId>,
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
}

/// The last finished short cycle of one (pid, path).
#[derive(Clone, Copy)]
struct Last {
    ident: Option<(u64, u64)>,
    version_at_close: Version,
    tid: u32,
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
    ops: u64,
    /// Calls between open and close in the repeated cycles, by kind.
    op_kinds: Vec<(Sys, u64)>,
    trunc: u64,
    replaced: u64,
    threads: bool,
}

struct OpenCloseChurn {
    max_ops: u64,
    open: FxHashMap<(u32, i32), Cycle>,
    paths: FxHashMap<(u32, PathKey), Last>,
    tallies: Tallies,
    extra: FxHashMap<(u32, PathKey), Extra>,
}

impl OpenCloseChurn {
    fn opened(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let fd = s.ret as i32;
        // The number was free: whatever we thought it was is gone.
        self.open.remove(&(s.pid, fd));
        let Some(path) = v.path else { return };
        if s.flags & O_ACCMODE == 0 {
            return;
        }
        let st = s.stat.map(|id| cx.stat(id));
        if FdKind::classify(cx.replay.paths.bytes(path), st.as_ref()) != FdKind::File {
            return;
        }
        let ident = st
            .filter(|st| st.known & stat_known::IDENTITY != 0)
            .map(|st| (st.dev, st.ino));
        self.open.insert(
            (s.pid, fd),
            Cycle {
                path,
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
            },
        );
    }

    fn closed(&mut self, s: &Syscall, v: &View, c: Cycle, cx: &Cx<'_>) {
        if c.ops > self.max_ops {
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
        let (repeat, replaced) = match prev {
            None => (false, false),
            Some(p) => match (p.ident, c.ident) {
                // A different file, and nothing traced touched the path since the previous
                // close: another program replaced it; this reopen was needed.
                (Some(a), Some(b)) if a != b && c.version_at_open == p.version_at_close => {
                    (false, true)
                }
                _ => (true, false),
            },
        };
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
        t.redundant(c.opened_ts, c.open_dur, c.open_stack);
        t.redundant(s.ts, s.dur, s.stack);
        cx.mark(c.open_call, c.open_dur, c.open_stack);
        cx.mark(v.seq, s.dur, s.stack);
        e.redundant += 2;
        e.repeats += 1;
        e.ops += c.ops;
        for (sys, n) in c.kinds.0.into_iter().flatten() {
            add_kind(&mut e.op_kinds, sys, n as u64);
        }
        e.trunc += c.trunc as u64;
        e.threads |= prev.is_some_and(|p| p.tid != c.tid);
    }
}

impl Detector for OpenCloseChurn {
    fn wants(&self, sys: Sys) -> bool {
        uses_fd(sys) || matches!(sys, Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat)
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if matches!(s.sys, Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat) {
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
                    a.ops += b.ops;
                    for &(sys, n) in &b.op_kinds {
                        add_kind(&mut a.op_kinds, sys, n);
                    }
                    a.trunc += b.trunc;
                    a.replaced += b.replaced;
                    a.threads |= b.threads;
                },
                |f, e| {
                    let per = e.ops as f64 / e.repeats.max(1) as f64;
                    f.example = Some(format!(
                        "{} of {} open/close cycles repeated, {:.1} call{} in between on average{}",
                        count(e.repeats),
                        count(e.cycles),
                        per,
                        if per == 1.0 { "" } else { "s" },
                        op_names(&e.op_kinds)
                    ));
                    if e.threads {
                        f.hazards.push(
                            "the cycles come from several threads: one shared handle needs a lock, or \
                             O_APPEND with one write per record"
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
                    f.hazards.push(
                        "reopen the kept handle when the file is rotated or renamed, and flush buffered \
                         data on exit and on signals"
                            .into(),
                    );
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
    use crate::testkit::{dir, file, TraceBuilder};
    use crate::Config;
    use dejavu_trace::{ev, Sys};

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
