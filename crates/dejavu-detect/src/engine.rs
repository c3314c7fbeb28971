//! One pass over a trace: replay each record, show each call to the detectors that asked
//! for it, then collect, filter and rank their findings.

use crate::{registry, Config, Detector, Finding};
use dejavu_replay::{Replay, View};
use dejavu_trace::{
    FileStat, Frame, Meta, Record, StackId, StatId, Strings, Sys, TraceError, TraceReader,
};
use std::cell::RefCell;
use std::io::Read;

/// What a detector may consult while it works.
pub struct Cx<'a> {
    /// Replay state (paths, versions, processes, descriptor tables).
    pub replay: &'a Replay,
    /// The trace's strings.
    pub strings: &'a Strings,
    /// The analysis settings.
    pub config: &'a Config,
    stats: &'a dyn Fn(StatId) -> FileStat,
    marks: &'a RefCell<Marks>,
    stacks: &'a dyn Fn(StackId) -> Vec<Frame>,
}

/// Which calls some detector found redundant, each counted once however many detectors
/// flag it (the writes of a log line repeated per request are both small-writes and
/// repeated-output). One bit per syscall record.
#[derive(Debug, Default)]
pub struct Marks {
    bits: Vec<u64>,
    /// Distinct redundant calls.
    pub calls: u64,
    /// Their time, ns.
    pub ns: u64,
    /// Distinct redundant calls and their time, by the stack that made them.
    by_stack: rustc_hash::FxHashMap<StackId, (u64, u64)>,
}

impl Marks {
    fn mark(&mut self, seq: u64, dur: u64, stack: Option<StackId>) {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if w >= self.bits.len() {
            self.bits.resize((w + 1).max(self.bits.len() * 2), 0);
        }
        if self.bits[w] & (1 << b) == 0 {
            self.bits[w] |= 1 << b;
            self.calls += 1;
            self.ns += dur;
            if let Some(st) = stack {
                let e = self.by_stack.entry(st).or_default();
                e.0 += 1;
                e.1 += dur;
            }
        }
    }
}

impl std::fmt::Debug for Cx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cx")
    }
}

impl<'a> Cx<'a> {
    /// Builds a context (for tests and tools that drive detectors themselves).
    pub fn new(
        replay: &'a Replay,
        strings: &'a Strings,
        config: &'a Config,
        stats: &'a dyn Fn(StatId) -> FileStat,
        marks: &'a RefCell<Marks>,
        stacks: &'a dyn Fn(StackId) -> Vec<Frame>,
    ) -> Self {
        Cx {
            replay,
            strings,
            config,
            stats,
            marks,
            stacks,
        }
    }

    /// A recorded call stack, innermost frame first.
    pub fn stack(&self, id: StackId) -> Vec<Frame> {
        (self.stacks)(id)
    }

    /// Notes that call `seq` (its `View::seq`), which took `dur` ns and was made from
    /// `stack`, is redundant. A detector marks every call it counts as redundant, so the
    /// report's totals (and its ranking of call sites) count each call once.
    #[inline]
    pub fn mark(&self, seq: u64, dur: u64, stack: Option<StackId>) {
        self.marks.borrow_mut().mark(seq, dur, stack);
    }

    /// A stat answer.
    pub fn stat(&self, id: StatId) -> FileStat {
        (self.stats)(id)
    }

    /// A path for people.
    pub fn path(&self, k: dejavu_replay::PathKey) -> String {
        self.replay.paths.display(k)
    }

    /// A process's command line for people.
    pub fn command(&self, pid: u32) -> String {
        self.replay.command(pid, self.strings)
    }

    /// The share of all traced syscall time that `ns` is.
    pub fn share(&self, ns: u64) -> f64 {
        if self.replay.syscall_ns == 0 {
            0.0
        } else {
            ns as f64 / self.replay.syscall_ns as f64
        }
    }
}

/// The result of an analysis.
#[derive(Debug)]
pub struct Analysis {
    /// Findings over the thresholds, most time wasted first.
    pub findings: Vec<Finding>,
    /// Findings below the thresholds (hidden by default).
    pub hidden: usize,
    /// Syscall records in the trace.
    pub syscalls: u64,
    /// Their total duration, ns.
    pub syscall_ns: u64,
    /// Processes in the trace.
    pub processes: usize,
    /// The trace's meta.
    pub meta: Meta,
    /// Events the trace says were lost.
    pub lost_events: u64,
    /// How the trace was cut off, if it was.
    pub truncated: Option<dejavu_trace::Truncation>,
    /// Ids of the detectors that ran.
    pub detectors: Vec<&'static str>,
    /// Distinct calls some detector found redundant (over every finding, those below
    /// the thresholds included): each call once, however many findings name it.
    pub redundant_calls: u64,
    /// Their time, ns.
    pub redundant_ns: u64,
    /// Call sites across all findings, each redundant call counted once, most time first
    /// (at most 100; empty without stacks).
    pub callsites: Vec<crate::Callsite>,
    /// Which syscall records (by their number among the trace's syscall records, from 0)
    /// some detector found redundant: one bit each (see [`Analysis::is_redundant`]).
    pub redundant_bits: Vec<u64>,
}

impl Analysis {
    /// Whether the `seq`-th syscall record of the trace is a redundant call.
    pub fn is_redundant(&self, seq: u64) -> bool {
        self.redundant_bits
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }
}

/// Replays `reader` through every enabled detector. `progress(bytes_read)` is called
/// every few thousand records.
pub fn analyze<R: Read>(
    reader: &mut TraceReader<R>,
    cfg: &Config,
    mut progress: impl FnMut(u64),
) -> Result<Analysis, TraceError> {
    let infos: Vec<_> = registry()
        .iter()
        .filter(|d| {
            cfg.only
                .as_ref()
                .is_none_or(|o| o.iter().any(|x| x == d.id))
        })
        .collect();
    let mut dets: Vec<Box<dyn Detector>> = infos.iter().map(|d| (d.make)(cfg)).collect();
    // Which detectors see which calls, decided once.
    let dispatch: Vec<Vec<usize>> = Sys::ALL
        .iter()
        .map(|&s| (0..dets.len()).filter(|&i| dets[i].wants(s)).collect())
        .collect();
    let mut replay = Replay::new(reader.meta());
    let marks = RefCell::new(Marks::default());
    let mut n: u64 = 0;
    while let Some(rec) = reader.next_record()? {
        n += 1;
        if n & 0xffff == 0 {
            progress(reader.bytes_read());
        }
        let strings = reader.strings();
        let stat_of = |id: StatId| reader.stat(id);
        let stack_of = |id: StackId| reader.stack(id).to_vec();
        match rec {
            Record::Syscall(s) => {
                let v: View = replay.view(&s, strings);
                let targets = &dispatch[s.sys as usize];
                if !targets.is_empty() {
                    let cx = Cx {
                        replay: &replay,
                        strings,
                        config: cfg,
                        stats: &stat_of,
                        marks: &marks,
                        stacks: &stack_of,
                    };
                    for &i in targets {
                        dets[i].on_syscall(&s, &v, &cx);
                    }
                }
                replay.apply(&s, &v, strings, &stat_of);
            }
            other => {
                replay.apply_record(&other, strings);
                let cx = Cx {
                    replay: &replay,
                    strings,
                    config: cfg,
                    stats: &stat_of,
                    marks: &marks,
                    stacks: &stack_of,
                };
                for d in dets.iter_mut() {
                    d.on_record(&other, &cx);
                }
            }
        }
    }
    let strings = reader.strings();
    let stat_of = |id: StatId| reader.stat(id);
    let stack_of = |id: StackId| reader.stack(id).to_vec();
    let cx = Cx {
        replay: &replay,
        strings,
        config: cfg,
        stats: &stat_of,
        marks: &marks,
        stacks: &stack_of,
    };
    let mut all: Vec<Finding> = dets.iter_mut().flat_map(|d| d.finish(&cx)).collect();
    let (redundant_calls, redundant_ns, callsites, redundant_bits) = {
        let m = marks.borrow();
        let sites = m.by_stack.iter().map(|(&st, &(n, ns))| (st, n, ns));
        (
            m.calls,
            m.ns,
            cx.callsites_ranked(sites, 100),
            m.bits.clone(),
        )
    };
    let before = all.len();
    all.retain(|f| f.redundant_calls >= cfg.min_calls.max(1));
    let hidden = before - all.len();
    all.sort_by(|a, b| {
        b.wasted_ns
            .cmp(&a.wasted_ns)
            .then(b.redundant_calls.cmp(&a.redundant_calls))
            .then(a.detector.cmp(b.detector))
            .then(a.pid.cmp(&b.pid))
            .then(a.paths.cmp(&b.paths))
    });
    Ok(Analysis {
        findings: all,
        hidden,
        syscalls: replay.syscalls,
        syscall_ns: replay.syscall_ns,
        processes: replay.procs.len(),
        meta: reader.meta().clone(),
        lost_events: reader
            .lost_events()
            .max(reader.end().map_or(0, |e| e.lost_events)),
        truncated: reader.truncation().cloned(),
        detectors: infos.iter().map(|d| d.id).collect(),
        redundant_calls,
        redundant_ns,
        callsites,
        redundant_bits,
    })
}

#[cfg(test)]
mod tests {
    use crate::testkit::TraceBuilder;
    use crate::Config;

    #[test]
    fn a_call_two_detectors_flag_counts_once_in_the_totals() {
        let mut b = TraceBuilder::new();
        for _ in 0..20 {
            b.call(dejavu_trace::Sys::Write, |c, b| {
                c.fd = Some(1);
                c.path = Some(b.s("pipe:[7]"));
                c.ev = dejavu_trace::ev::PATH_FROM_FD;
                c.count = 10;
                c.ret = 10;
                c.payload = Some(b.s("same line\n"));
            });
        }
        let a = b.analyze_with(&Config {
            min_calls: 1,
            ..Config::default()
        });
        let by = |id: &str| {
            a.findings
                .iter()
                .filter(|f| f.detector == id)
                .map(|f| f.redundant_calls)
                .sum::<u64>()
        };
        // small-writes: 20 tiny writes, one would do; repeated-output: the same line 20
        // times (marked from its 10th occurrence on, when it becomes a finding).
        assert_eq!(by("small-writes"), 19);
        assert_eq!(by("repeated-output"), 19);
        assert_eq!(a.redundant_calls, 19, "each write counted once");
        assert_eq!(a.redundant_ns, 19 * 500);
        assert!(a.redundant_calls <= a.syscalls);
    }
}
