//! What pictures of an analysis need, gathered in the analysis's one pass over the trace:
//! redundant calls by the stack that made them (a flame graph) and each thread's calls
//! and redundant calls over time (a timeline). Nothing here reads the trace again.
//!
//! The timeline is built without keeping a timestamp per call: while the trace is read,
//! [`TimeIndex`] notes a checkpoint (call number, time, thread) whenever the thread
//! changes or the clock passes into the next tick. Calls between two checkpoints are one
//! thread's, made within one tick, so once the detectors have marked the redundant calls
//! (some only at the end of the trace), each stretch's redundant calls are the marked bits
//! in its range of call numbers.

use crate::CallFrame;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Redundant calls made from one recorded stack.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StackCost {
    /// The program of the process that first made a call from it.
    pub program: String,
    /// The stack, innermost frame first; `internal` marks runtime and library plumbing.
    pub frames: Vec<CallFrame>,
    /// Redundant calls made from it (each counted once, however many findings name it).
    pub calls: u64,
    /// Their time, ns.
    pub ns: u64,
}

/// Redundant calls by stack: the flame graph's data.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stacks {
    /// The stacks with the most redundant calls (at most [`MAX_STACKS`]), most first.
    pub stacks: Vec<StackCost>,
    /// Redundant calls from stacks left out of `stacks` (over the limit).
    pub other_calls: u64,
    /// Redundant calls recorded without a stack.
    pub unstacked_calls: u64,
}

/// Most stacks kept for the flame graph: enough for every stack of real programs we have
/// seen, and a bound on the report's size.
pub const MAX_STACKS: usize = 2000;

/// One thread's calls over time.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ThreadLine {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The program it ran: the last it exec'd, `first -> last` when it exec'd another
    /// (a launcher that became the program).
    pub program: String,
    /// All its traced calls.
    pub calls: u64,
    /// Of them, redundant.
    pub redundant_calls: u64,
    /// Non-empty buckets: (bucket index, calls, redundant calls).
    pub buckets: Vec<(u32, u32, u32)>,
}

/// Calls over time, per thread.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Timeline {
    /// The trace's length as seen: the end of its last call, ns since the start.
    pub end_ns: u64,
    /// Width of a bucket, ns.
    pub bucket_ns: u64,
    /// Number of buckets.
    pub buckets: u32,
    /// How finely calls were placed in time, ns: a call is in the bucket of a time at
    /// most this much before it.
    pub resolution_ns: u64,
    /// Threads, most redundant calls first (at most [`MAX_THREADS`]).
    pub threads: Vec<ThreadLine>,
    /// Threads left out.
    pub other_threads: usize,
}

/// Buckets of the timeline.
pub const BUCKETS: u32 = 1500;
/// Most threads drawn.
pub const MAX_THREADS: usize = 64;
/// Checkpoints held before the tick first doubles (16 bytes each).
const MAX_CHECKPOINTS: usize = 1 << 19;
/// The finest tick, ns: checkpoints keep time in these units.
const BASE_TICK_NS: u64 = 100_000;

/// Where each call is in time and which thread made it, in a few checkpoints.
#[derive(Debug)]
pub(crate) struct TimeIndex {
    /// (first call number, its time, thread index).
    /// (first call number, its time in [`BASE_TICK_NS`] units, thread index).
    points: Vec<(u64, u32, u32)>,
    tick_ns: u64,
    /// Checkpoints held before the tick doubles: [`MAX_CHECKPOINTS`], doubled when thread
    /// switches alone fill it (coarsening cannot drop those), so each coarsening pass is
    /// paid for by as many new checkpoints.
    limit: usize,
    /// Thread index by tid; the threads: (pid, tid, first image, last image).
    index: FxHashMap<u32, u32>,
    threads: Vec<(u32, u32, u32, u32)>,
    end_ns: u64,
}

impl Default for TimeIndex {
    fn default() -> Self {
        TimeIndex {
            points: Vec::new(),
            // 100 µs: finer than a bucket of any trace longer than 0.15 s.
            tick_ns: BASE_TICK_NS,
            limit: MAX_CHECKPOINTS,
            index: FxHashMap::default(),
            threads: Vec::new(),
            end_ns: 0,
        }
    }
}

impl TimeIndex {
    /// Call number `seq` at `ts` by thread `tid` of `pid`, running `image`.
    #[inline]
    pub(crate) fn call(&mut self, seq: u64, ts: u64, dur: u64, pid: u32, tid: u32, image: u32) {
        self.end_ns = self.end_ns.max(ts.saturating_add(dur));
        // Most calls come from the thread of the call before: no lookup then.
        let t = match self.points.last() {
            Some(&(_, _, pt)) if self.threads[pt as usize].1 == tid => pt,
            _ => {
                let next = self.threads.len() as u32;
                let t = *self.index.entry(tid).or_insert(next);
                if t == next {
                    self.threads.push((pid, tid, image, image));
                }
                t
            }
        };
        self.threads[t as usize].3 = image;
        let q = (ts / BASE_TICK_NS).min(u32::MAX as u64) as u32;
        let f = (self.tick_ns / BASE_TICK_NS) as u32;
        let new = match self.points.last() {
            None => true,
            Some(&(_, pq, pt)) => pt != t || q / f != pq / f,
        };
        if new {
            self.points.push((seq, q, t));
            if self.points.len() > self.limit {
                self.coarsen();
                if self.points.len() > self.limit / 2 {
                    self.limit *= 2;
                }
            }
        }
    }

    /// Doubles the tick and drops the checkpoints it no longer needs.
    fn coarsen(&mut self) {
        self.tick_ns *= 2;
        let f = (self.tick_ns / BASE_TICK_NS) as u32;
        let mut last: Option<(u32, u32)> = None;
        self.points.retain(|&(_, q, t)| {
            let keep = last.is_none_or(|(lq, lthread)| lthread != t || lq != q / f);
            if keep {
                last = Some((q / f, t));
            }
            keep
        });
    }

    /// The timeline of `calls` calls, `redundant(lo, hi)` counting the redundant ones among
    /// call numbers lo..hi; `program(image)` names a thread's program.
    pub(crate) fn finish(
        &self,
        calls: u64,
        redundant: impl Fn(u64, u64) -> u64,
        program: impl Fn(u32) -> String,
    ) -> Timeline {
        let bucket_ns = (self.end_ns / BUCKETS as u64 + 1).max(1);
        let mut per: Vec<FxHashMap<u32, (u32, u32)>> =
            vec![FxHashMap::default(); self.threads.len()];
        let mut totals = vec![(0u64, 0u64); self.threads.len()];
        for (i, &(seq, q, t)) in self.points.iter().enumerate() {
            let ts = q as u64 * BASE_TICK_NS;
            let end = self.points.get(i + 1).map_or(calls, |p| p.0);
            let n = end.saturating_sub(seq);
            let r = redundant(seq, end);
            let b = ((ts / bucket_ns) as u32).min(BUCKETS - 1);
            let e = per[t as usize].entry(b).or_default();
            e.0 = e.0.saturating_add(n as u32);
            e.1 = e.1.saturating_add(r as u32);
            totals[t as usize].0 += n;
            totals[t as usize].1 += r;
        }
        let mut threads: Vec<ThreadLine> = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, &(pid, tid, first, last))| {
                let mut buckets: Vec<(u32, u32, u32)> =
                    per[i].iter().map(|(&b, &(n, r))| (b, n, r)).collect();
                buckets.sort_unstable();
                ThreadLine {
                    pid,
                    tid,
                    program: if first == last || program(first) == program(last) {
                        program(last)
                    } else {
                        format!("{} -> {}", program(first), program(last))
                    },
                    calls: totals[i].0,
                    redundant_calls: totals[i].1,
                    buckets,
                }
            })
            .filter(|t| t.calls > 0)
            .collect();
        // Most redundant calls first, then busiest; processes then threads in order.
        threads.sort_by(|a, b| {
            b.redundant_calls
                .cmp(&a.redundant_calls)
                .then(b.calls.cmp(&a.calls))
                .then((a.pid, a.tid).cmp(&(b.pid, b.tid)))
        });
        let other_threads = threads.len().saturating_sub(MAX_THREADS);
        threads.truncate(MAX_THREADS);
        Timeline {
            end_ns: self.end_ns,
            bucket_ns,
            buckets: BUCKETS,
            resolution_ns: self.tick_ns,
            threads,
            other_threads,
        }
    }
}

/// What the analysis's one pass gathers beyond findings, stacks and the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collect {
    /// Every call counted by (stack, syscall), with how many were redundant and their
    /// time: a profile's samples (`--format pprof`). Costs 4 bytes per call while the
    /// trace is read.
    pub samples: bool,
    /// Calls per (program, syscall) and per (program, path), programs named by
    /// [`crate::program::ExecNames`]: what `dejavu diff` and `dejavu check` compare.
    pub counts: bool,
}

/// Calls per (program, syscall) and per (program, path).
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// (program, syscall) -> calls.
    pub syscalls: std::collections::BTreeMap<(String, String), u64>,
    /// (program, path) -> calls naming it (its path argument or its descriptor's).
    pub paths: FxHashMap<(String, String), u64>,
}

/// [`Counts`] while the trace is read: programs and paths by number, named at the end.
#[derive(Debug)]
pub(crate) struct CountIndex {
    names: crate::program::ExecNames,
    ids: FxHashMap<String, u32>,
    programs: Vec<String>,
    /// Each process's program number, until its next spawn or exec record.
    of_pid: FxHashMap<u32, u32>,
    /// Calls by program number * syscalls + syscall.
    sys: Vec<u64>,
    paths: FxHashMap<(u32, dejavu_trace::StrId), u64>,
}

impl CountIndex {
    pub(crate) fn new(meta: &dejavu_trace::Meta) -> CountIndex {
        CountIndex {
            names: crate::program::ExecNames::new(meta),
            ids: FxHashMap::default(),
            programs: Vec::new(),
            of_pid: FxHashMap::default(),
            sys: Vec::new(),
            paths: FxHashMap::default(),
        }
    }

    /// A spawn or exec record.
    pub(crate) fn record(&mut self, rec: &dejavu_trace::Record, strings: &dejavu_trace::Strings) {
        self.names.record(rec, strings);
        match rec {
            dejavu_trace::Record::Spawn(s) => {
                self.of_pid.remove(&s.pid);
            }
            dejavu_trace::Record::Exec(e) => {
                self.of_pid.remove(&e.pid);
            }
            _ => {}
        }
    }

    /// One call.
    #[inline]
    pub(crate) fn call(&mut self, s: &dejavu_trace::Syscall) {
        let prog = match self.of_pid.get(&s.pid) {
            Some(&p) => p,
            None => {
                let name = self.names.of(s.pid);
                let p = match self.ids.get(name) {
                    Some(&p) => p,
                    None => {
                        let p = self.programs.len() as u32;
                        self.programs.push(name.to_string());
                        self.ids.insert(name.to_string(), p);
                        self.sys
                            .resize(self.programs.len() * dejavu_trace::Sys::ALL.len(), 0);
                        p
                    }
                };
                self.of_pid.insert(s.pid, p);
                p
            }
        };
        self.sys[prog as usize * dejavu_trace::Sys::ALL.len() + s.sys as usize] += 1;
        if let Some(path) = s.path {
            *self.paths.entry((prog, path)).or_default() += 1;
        }
    }

    pub(crate) fn finish(self, strings: &dejavu_trace::Strings) -> Counts {
        let n = dejavu_trace::Sys::ALL.len();
        let mut c = Counts::default();
        for (i, &calls) in self.sys.iter().enumerate() {
            if calls > 0 {
                let prog = self.programs[i / n].clone();
                c.syscalls.insert(
                    (prog, dejavu_trace::Sys::ALL[i % n].name().to_string()),
                    calls,
                );
            }
        }
        for ((prog, path), calls) in self.paths {
            let key = (
                self.programs[prog as usize].clone(),
                strings.lossy(path).into_owned(),
            );
            *c.paths.entry(key).or_default() += calls;
        }
        c
    }
}

/// One frame of a sample's stack, named as profilers name frames: the function, else
/// `module+0xoffset`, else `0xoffset`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SampleFrame {
    /// Function name.
    pub function: String,
    /// Source file ("" when unknown).
    pub file: String,
    /// Line (0 when unknown).
    pub line: u32,
    /// Native frames: the executable or shared object ("" otherwise).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub module: String,
    /// Native frames: the address in `module`, a file offset (0 otherwise).
    #[serde(skip_serializing_if = "is_zero")]
    pub addr: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// A file whose code the trace's Mapping records place (format 2.1), with its build id.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct SampleModule {
    /// Its path, as native frames' modules name it.
    pub path: String,
    /// Its GNU build id in lower-case hex ("" when it has none).
    pub build_id: String,
}

/// Calls of one syscall from one stack (or, without a stack, by one program).
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Sample {
    /// Index into [`Samples::stacks`]; None: recorded without a stack.
    pub stack: Option<u32>,
    /// The syscall.
    pub syscall: &'static str,
    /// Without a stack: the program that made the calls ("" with one).
    pub program: String,
    /// Calls.
    pub calls: u64,
    /// Of them, redundant.
    pub redundant: u64,
    /// Their time, ns.
    pub ns: u64,
}

/// Every call by (stack, syscall): what a pprof profile holds.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Samples {
    /// The samples, in a stable order (stack, syscall, program).
    pub samples: Vec<Sample>,
    /// The stacks they name, innermost frame first.
    pub stacks: Vec<Vec<SampleFrame>>,
    /// The files the trace's Mapping records say were mapped as code, in the order first
    /// mapped (the first program first; the first build id seen for a path), so that a
    /// profile names the build of each module.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<SampleModule>,
}

/// Which sample each call belongs to, while the trace is read.
#[derive(Debug, Default)]
pub(crate) struct SampleIndex {
    index: FxHashMap<(Option<dejavu_trace::StackId>, dejavu_trace::Sys, u32), u32>,
    keys: Vec<(Option<dejavu_trace::StackId>, dejavu_trace::Sys, u32)>,
    totals: Vec<(u64, u64)>,
    /// The sample of each call, by call number.
    of_call: Vec<u32>,
    /// Mapped files (path, build id in hex or ""), from Mapping records, in the order
    /// first mapped (the program first), and their index by path.
    modules: Vec<SampleModule>,
    module_ix: FxHashMap<String, usize>,
}

impl SampleIndex {
    /// A Mapping record: its file and build id, for the profile's mapping table.
    pub(crate) fn mapping(&mut self, m: &dejavu_trace::Mapping, strings: &dejavu_trace::Strings) {
        let (dejavu_trace::MappingKind::Map, Some(path)) = (m.kind, m.path) else {
            return;
        };
        let hex = m
            .build_id
            .map(|b| strings.get(b).iter().map(|x| format!("{x:02x}")).collect())
            .unwrap_or_default();
        let path = strings.lossy(path).into_owned();
        match self.module_ix.get(&path) {
            Some(&i) => {
                let m = &mut self.modules[i];
                if m.build_id.is_empty() {
                    m.build_id = hex;
                }
            }
            None => {
                self.module_ix.insert(path.clone(), self.modules.len());
                self.modules.push(SampleModule {
                    path,
                    build_id: hex,
                });
            }
        }
    }

    /// Call number `seq` of `sys` from `stack` (or, without one, by a process running
    /// `image`) took `dur` ns.
    #[inline]
    pub(crate) fn call(
        &mut self,
        seq: u64,
        sys: dejavu_trace::Sys,
        stack: Option<dejavu_trace::StackId>,
        image: u32,
        dur: u64,
    ) {
        let key = (stack, sys, if stack.is_some() { u32::MAX } else { image });
        let next = self.keys.len() as u32;
        let i = *self.index.entry(key).or_insert(next);
        if i == next {
            self.keys.push(key);
            self.totals.push((0, 0));
        }
        let t = &mut self.totals[i as usize];
        t.0 += 1;
        t.1 += dur;
        let seq = seq as usize;
        if self.of_call.len() <= seq {
            self.of_call.resize(seq + 1, u32::MAX);
        }
        self.of_call[seq] = i;
    }

    /// The samples, redundant calls counted from `bits` (one per call number), stacks
    /// named by `frames`, stackless programs by `program(image)`.
    pub(crate) fn finish(
        &self,
        bits: &[u64],
        frames: impl Fn(dejavu_trace::StackId) -> Vec<SampleFrame>,
        program: impl Fn(u32) -> String,
    ) -> Samples {
        let mut redundant = vec![0u64; self.keys.len()];
        for (w, &word) in bits.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let b = word.trailing_zeros() as usize;
                word &= word - 1;
                if let Some(&i) = self.of_call.get(w * 64 + b) {
                    if let Some(r) = redundant.get_mut(i as usize) {
                        *r += 1;
                    }
                }
            }
        }
        let mut stack_ix: FxHashMap<dejavu_trace::StackId, u32> = FxHashMap::default();
        let mut out = Samples::default();
        let mut order: Vec<usize> = (0..self.keys.len()).collect();
        order.sort_by_key(|&i| {
            let (st, sys, image) = self.keys[i];
            (st.map(|s| s.0), sys.name(), image)
        });
        for i in order {
            let (st, sys, image) = self.keys[i];
            let stack = st.map(|s| {
                *stack_ix.entry(s).or_insert_with(|| {
                    out.stacks.push(frames(s));
                    out.stacks.len() as u32 - 1
                })
            });
            out.samples.push(Sample {
                stack,
                syscall: sys.name(),
                program: if st.is_none() {
                    program(image)
                } else {
                    String::new()
                },
                calls: self.totals[i].0,
                redundant: redundant[i],
                ns: self.totals[i].1,
            });
        }
        out.modules = self.modules.clone();
        out
    }
}

/// Set bits among bits lo..hi of `bits`.
pub(crate) fn count_bits(bits: &[u64], lo: u64, hi: u64) -> u64 {
    let mut n = 0u64;
    let mut i = lo;
    while i < hi {
        let w = (i / 64) as usize;
        let Some(&word) = bits.get(w) else { break };
        let b = i % 64;
        let take = (64 - b).min(hi - i);
        let mask = if take == 64 {
            u64::MAX
        } else {
            ((1u64 << take) - 1) << b
        };
        n += (word & mask).count_ones() as u64;
        i += take;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_bits_counts_a_range_across_words() {
        let bits = [u64::MAX, 0b1011, 1 << 63];
        assert_eq!(count_bits(&bits, 0, 64), 64);
        assert_eq!(count_bits(&bits, 60, 68), 4 + 3);
        assert_eq!(count_bits(&bits, 64, 66), 2);
        assert_eq!(count_bits(&bits, 127, 192), 1);
        assert_eq!(count_bits(&bits, 130, 500), 1);
        assert_eq!(count_bits(&bits, 5, 5), 0);
    }

    #[test]
    fn the_timeline_puts_each_threads_calls_in_their_buckets() {
        let mut ix = TimeIndex::default();
        // Thread 1: calls 0..10 at t=0..; thread 2: calls 10..15 at the end.
        for i in 0..10 {
            ix.call(i, i * 1_000, 10, 1, 1, 0);
        }
        for i in 10..15 {
            ix.call(i, 2_000_000_000, 10, 1, 2, 0);
        }
        // Calls 2, 3 and 12 are redundant.
        let bits = [0b1_0000_0000_1100u64];
        let t = ix.finish(15, |lo, hi| count_bits(&bits, lo, hi), |_| "p".into());
        assert_eq!(t.threads.len(), 2);
        let by = |tid| t.threads.iter().find(|x| x.tid == tid).unwrap();
        assert_eq!((by(1).calls, by(1).redundant_calls), (10, 2));
        assert_eq!((by(2).calls, by(2).redundant_calls), (5, 1));
        assert_eq!(by(1).buckets, vec![(0, 10, 2)]);
        assert_eq!(by(2).buckets, vec![(BUCKETS - 1, 5, 1)]);
        // Most redundant calls first.
        assert_eq!(t.threads[0].tid, 1);
    }

    #[test]
    fn samples_count_calls_by_stack_and_syscall_and_their_redundant_ones() {
        use dejavu_trace::{StackId, Sys};
        let mut ix = SampleIndex::default();
        // Calls 0..4: statx from stack 7; 4..6: write without a stack, image 2; 6: statx
        // from stack 7 again.
        for seq in 0..4 {
            ix.call(seq, Sys::Statx, Some(StackId(7)), 1, 10);
        }
        ix.call(4, Sys::Write, None, 2, 5);
        ix.call(5, Sys::Write, None, 2, 5);
        ix.call(6, Sys::Statx, Some(StackId(7)), 1, 10);
        // Redundant: 1, 2, 3, 6 (the stats after the first) and 5.
        let bits = [0b110_1110u64];
        let s = ix.finish(
            &bits,
            |st| {
                vec![SampleFrame {
                    function: format!("f{}", st.0),
                    file: String::new(),
                    line: 0,
                    module: String::new(),
                    addr: 0,
                }]
            },
            |image| format!("prog{image}"),
        );
        assert_eq!(s.samples.len(), 2);
        let stat = s.samples.iter().find(|x| x.syscall == "statx").unwrap();
        assert_eq!((stat.calls, stat.redundant, stat.ns), (5, 4, 50));
        assert_eq!(s.stacks[stat.stack.unwrap() as usize][0].function, "f7");
        let write = s.samples.iter().find(|x| x.syscall == "write").unwrap();
        assert_eq!((write.calls, write.redundant, write.stack), (2, 1, None));
        assert_eq!(write.program, "prog2");
    }

    #[test]
    fn thread_switches_that_fill_the_index_raise_its_limit_instead_of_coarsening_per_call() {
        let mut ix = TimeIndex::default();
        // Every call on another thread, all in one tick: no checkpoint can be dropped.
        let n = MAX_CHECKPOINTS as u64 * 3;
        for i in 0..n {
            ix.call(i, 0, 1, 1, 1 + (i % 2) as u32, 0);
        }
        assert_eq!(ix.points.len() as u64, n);
        assert_eq!(ix.limit, MAX_CHECKPOINTS * 4);
        let t = ix.finish(n, |_, _| 0, |_| String::new());
        assert_eq!(t.threads.iter().map(|x| x.calls).sum::<u64>(), n);
    }

    #[test]
    fn coarsening_keeps_thread_changes() {
        let mut ix = TimeIndex::default();
        for i in 0..(MAX_CHECKPOINTS as u64 + 10) {
            ix.call(i, i * 100_000, 1, 1, 1 + (i / 1000 % 2) as u32, 0);
        }
        assert!(ix.points.len() <= MAX_CHECKPOINTS);
        assert_eq!(ix.tick_ns, 200_000);
        let t = ix.finish(MAX_CHECKPOINTS as u64 + 10, |_, _| 0, |_| String::new());
        let total: u64 = t.threads.iter().map(|x| x.calls).sum();
        assert_eq!(total, MAX_CHECKPOINTS as u64 + 10);
        assert_eq!(t.threads.len(), 2);
    }
}
