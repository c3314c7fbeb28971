//! `dejavu summary`: per-syscall, per-path and per-process totals of a trace, computed in
//! one streaming pass, rendered as an strace -c style text report or as JSON.
//!
//! Memory grows with the number of distinct paths, processes and threads, never with
//! the number of events: a summary of a billion-event trace of one loop is as small as
//! one of a thousand events.

use crate::names::{errno_label, exit_label, signal_label};
use crate::text::{
    fmt_count, fmt_duration, sanitize, shell_join, shorten_end, shorten_middle, wrap,
};
use dejavu_trace::{
    ev, End, ExitStatus, LostReason, MappingKind, Meta, Record, StrId, Sys, Syscall, TraceError,
    TraceReader, Truncation,
};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};

/// Totals of one system call (or of all of them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyscallStats {
    /// Calls made, including unfinished ones.
    pub calls: u64,
    /// Calls that failed (returned an errno). Unfinished calls are never errors.
    pub errors: u64,
    /// Calls that never returned while traced (their `dur` and `ret` mean nothing).
    pub unfinished: u64,
    /// Sum of `dur` of the finished calls, ns.
    pub time_ns: u64,
    /// Failed calls by errno.
    pub errnos: BTreeMap<i32, u64>,
}

impl SyscallStats {
    fn add(&mut self, s: &Syscall) {
        self.calls += 1;
        if s.ev & ev::UNFINISHED != 0 {
            self.unfinished += 1;
        } else {
            self.time_ns = self.time_ns.saturating_add(s.dur);
        }
        if let Some(e) = s.errno() {
            self.errors += 1;
            *self.errnos.entry(e).or_default() += 1;
        }
    }

    fn merge(&mut self, o: &SyscallStats) {
        self.calls += o.calls;
        self.errors += o.errors;
        self.unfinished += o.unfinished;
        self.time_ns = self.time_ns.saturating_add(o.time_ns);
        for (e, n) in &o.errnos {
            *self.errnos.entry(*e).or_default() += n;
        }
    }

    /// Mean duration of a finished call, ns.
    pub fn mean_ns(&self) -> u64 {
        let finished = self.calls - self.unfinished;
        self.time_ns.checked_div(finished).unwrap_or(0)
    }
}

/// Totals of the calls that named one path (as `path`; `path2` is not counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathStats {
    /// The path; non-UTF-8 bytes are replaced by U+FFFD.
    pub path: String,
    /// Calls naming the path.
    pub calls: u64,
    /// Of those, calls that failed.
    pub errors: u64,
    /// Sum of `dur` of the finished calls, ns.
    pub time_ns: u64,
    /// Calls by system call, most frequent first.
    pub by_syscall: Vec<(Sys, u64)>,
}

/// A process of the traced program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Parent's process id as the trace knows it (for an attached process, its real
    /// parent, which was not traced); 0 when unknown (the program dejavu started).
    pub ppid: u32,
    /// The command line: the latest exec's argv; without an exec, the argv the process
    /// inherited from its parent when it was forked, or for the root process the command
    /// in the trace's meta block.
    pub argv: Vec<String>,
    /// The latest exec's executable.
    pub exe: Option<String>,
    /// How the process ended, when the trace saw it end.
    pub exit: Option<ExitStatus>,
    /// Threads seen, including the main thread.
    pub threads: u32,
    /// Traced system calls made by the process's threads.
    pub calls: u64,
    /// Time in those calls, ns.
    pub time_ns: u64,
}

/// Where a process's argv comes from when it never exec'd.
#[derive(Debug, Clone)]
enum Inherited {
    /// Unknown: an attached process, or one whose fork the trace did not show.
    Unknown,
    /// Copied from the parent at fork (the parent had exec'd by then).
    Argv(Vec<u8>),
    /// Whatever the parent (index into the process list) had before its first exec.
    Parent(usize),
}

#[derive(Debug)]
struct ProcAcc {
    pid: u32,
    ppid: u32,
    /// The process did something in the trace. Untraced parents of attached processes
    /// get an entry too (as parents), but are not listed.
    seen: bool,
    /// The entry of the parent when the trace saw the fork.
    parent: Option<usize>,
    exec_argv: Option<Vec<u8>>,
    exe: Option<Vec<u8>>,
    inherited: Inherited,
    exit: Option<ExitStatus>,
    tids: FxHashSet<u32>,
    calls: u64,
    time_ns: u64,
}

impl ProcAcc {
    fn new(pid: u32) -> ProcAcc {
        let mut tids = FxHashSet::default();
        tids.insert(pid);
        ProcAcc {
            pid,
            ppid: 0,
            seen: false,
            parent: None,
            exec_argv: None,
            exe: None,
            inherited: Inherited::Unknown,
            exit: None,
            tids,
            calls: 0,
            time_ns: 0,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct PathAcc {
    calls: u64,
    errors: u64,
    time_ns: u64,
    // Few distinct calls name one path, so a short list beats a map or a 74-slot array
    // (which would cost 600 bytes for each of possibly millions of paths).
    by_sys: Vec<(Sys, u64)>,
}

/// Accumulates a [`Summary`] record by record, for callers that run several analyses in
/// one pass over a trace; [`Summary::from_reader`] does the whole pass.
#[derive(Debug)]
pub struct SummaryBuilder {
    meta: Meta,
    syscalls: Vec<SyscallStats>,
    paths: FxHashMap<StrId, PathAcc>,
    local_paths: FxHashMap<Box<[u8]>, PathAcc>,
    procs: Vec<ProcAcc>,
    by_pid: FxHashMap<u32, usize>,
    last_pid: Option<(u32, usize)>,
    lost: Vec<(LostReason, u64)>,
    records: u64,
    last_ts: u64,
    mappings: MappingCounts,
}

impl SummaryBuilder {
    /// A builder for a trace with this meta block.
    pub fn new(meta: &Meta) -> SummaryBuilder {
        SummaryBuilder {
            meta: meta.clone(),
            syscalls: vec![SyscallStats::default(); Sys::ALL.len()],
            paths: FxHashMap::default(),
            local_paths: FxHashMap::default(),
            procs: Vec::new(),
            by_pid: FxHashMap::default(),
            last_pid: None,
            lost: Vec::new(),
            records: 0,
            last_ts: 0,
            mappings: MappingCounts::default(),
        }
    }

    /// The index of the live process `pid`, which did something: created on first sight.
    fn proc(&mut self, pid: u32) -> usize {
        // Consecutive records mostly come from the same process.
        if let Some((p, i)) = self.last_pid {
            if p == pid {
                return i;
            }
        }
        let i = self.parent_proc(pid);
        self.procs[i].seen = true;
        self.last_pid = Some((pid, i));
        i
    }

    /// The index of the live process `pid`, named as a parent only.
    fn parent_proc(&mut self, pid: u32) -> usize {
        match self.by_pid.get(&pid) {
            Some(&i) => i,
            None => self.new_proc(pid),
        }
    }

    fn new_proc(&mut self, pid: u32) -> usize {
        let i = self.procs.len();
        self.procs.push(ProcAcc::new(pid));
        self.by_pid.insert(pid, i);
        // The cache may hold an older process with this pid.
        self.last_pid = None;
        i
    }

    /// Adds one record; `str_of` resolves the trace's string ids.
    fn record<'s>(&mut self, rec: &Record, str_of: impl Fn(StrId) -> &'s [u8]) {
        self.records += 1;
        let ts = rec.ts();
        match rec {
            Record::Syscall(s) => {
                let end = if s.ev & ev::UNFINISHED == 0 {
                    ts.saturating_add(s.dur)
                } else {
                    ts
                };
                self.last_ts = self.last_ts.max(end);
                self.syscalls[s.sys as usize].add(s);
                if let Some(p) = s.path {
                    // A block-local id means something else in the next block: key such
                    // paths by their bytes. (Writers use local ids for payloads, so this
                    // is the rare case, and a global id is the cheap key.)
                    let acc = if p.is_local() {
                        let bytes = str_of(p);
                        if !self.local_paths.contains_key(bytes) {
                            self.local_paths.insert(bytes.into(), PathAcc::default());
                        }
                        self.local_paths.get_mut(bytes).expect("inserted above")
                    } else {
                        self.paths.entry(p).or_default()
                    };
                    acc.calls += 1;
                    if s.is_error() {
                        acc.errors += 1;
                    }
                    if s.ev & ev::UNFINISHED == 0 {
                        acc.time_ns = acc.time_ns.saturating_add(s.dur);
                    }
                    match acc.by_sys.iter_mut().find(|(sys, _)| *sys == s.sys) {
                        Some((_, n)) => *n += 1,
                        None => acc.by_sys.push((s.sys, 1)),
                    }
                }
                let i = self.proc(s.pid);
                let p = &mut self.procs[i];
                p.calls += 1;
                if s.ev & ev::UNFINISHED == 0 {
                    p.time_ns = p.time_ns.saturating_add(s.dur);
                }
                if s.tid != s.pid {
                    p.tids.insert(s.tid);
                }
            }
            Record::Spawn(s) => {
                self.last_ts = self.last_ts.max(ts);
                if s.pid == s.parent_pid {
                    let p = self.proc(s.pid);
                    self.procs[p].tids.insert(s.tid);
                    return;
                }
                // The child may already be known: the backend can report its first calls
                // before the parent's fork returns. A known pid that has exited is a new
                // process reusing the pid.
                let child = match self.by_pid.get(&s.pid) {
                    Some(&i) if self.procs[i].exit.is_none() && self.procs[i].parent.is_none() => i,
                    _ => self.new_proc(s.pid),
                };
                self.procs[child].seen = true;
                self.procs[child].tids.insert(s.tid);
                // Parent 0: the backend announcing the program it started.
                if s.parent_pid == 0 {
                    return;
                }
                let parent = self.parent_proc(s.parent_pid);
                let inherited = match &self.procs[parent].exec_argv {
                    Some(a) => Inherited::Argv(a.clone()),
                    None => Inherited::Parent(parent),
                };
                let exe = self.procs[parent].exe.clone();
                let c = &mut self.procs[child];
                c.ppid = s.parent_pid;
                c.parent = Some(parent);
                c.inherited = inherited;
                if c.exe.is_none() {
                    c.exe = exe;
                }
            }
            Record::Exec(e) => {
                self.last_ts = self.last_ts.max(ts);
                let i = self.proc(e.pid);
                let argv = str_of(e.argv).to_vec();
                let exe = str_of(e.exe).to_vec();
                let p = &mut self.procs[i];
                p.exec_argv = Some(argv);
                p.exe = Some(exe);
            }
            Record::Exit(x) => {
                self.last_ts = self.last_ts.max(ts);
                let i = self.proc(x.pid);
                if x.tid == x.pid {
                    self.procs[i].exit = Some(x.status);
                } else {
                    self.procs[i].tids.insert(x.tid);
                }
            }
            Record::Signal(s) => {
                self.last_ts = self.last_ts.max(ts);
                self.proc(s.pid);
            }
            Record::Mark(m) => {
                self.last_ts = self.last_ts.max(ts);
                self.proc(m.pid);
            }
            Record::Mapping(m) => {
                self.last_ts = self.last_ts.max(ts);
                match m.kind {
                    MappingKind::Map => {
                        self.mappings.mapped += 1;
                        if m.build_id.is_some() {
                            self.mappings.with_build_id += 1;
                        }
                    }
                    MappingKind::Unmap => self.mappings.unmapped += 1,
                }
            }
            Record::Lost(l) => {
                self.last_ts = self.last_ts.max(ts);
                // LostReason has no Ord or Hash: a short list, kept in reason order.
                match self.lost.iter_mut().find(|(r, _)| *r == l.reason) {
                    Some((_, n)) => *n = n.saturating_add(l.count),
                    None => {
                        self.lost.push((l.reason, l.count));
                        self.lost.sort_by_key(|(r, _)| *r as u8);
                    }
                }
            }
        }
    }

    /// Adds one record read from `reader` (which resolves its string ids).
    pub fn record_from<R: Read>(&mut self, rec: &Record, reader: &TraceReader<R>) {
        self.record(rec, |id| reader.str(id));
    }

    /// The summary of the records added, with the facts only the end of `reader` knows
    /// (end block, truncation) and its strings to name the paths.
    pub fn finish<R: Read>(self, reader: &TraceReader<R>) -> Summary {
        self.finish_with(reader.end(), reader.truncation(), |id| reader.str(id))
    }

    fn finish_with<'s>(
        self,
        end: Option<&End>,
        truncation: Option<&Truncation>,
        str_of: impl Fn(StrId) -> &'s [u8],
    ) -> Summary {
        let mut syscalls = BTreeMap::new();
        let mut totals = SyscallStats::default();
        for (i, st) in self.syscalls.into_iter().enumerate() {
            if st.calls > 0 {
                totals.merge(&st);
                syscalls.insert(Sys::ALL[i], st);
            }
        }

        // Writers intern each path once, but nothing forbids a producer from defining the
        // same bytes twice: merge by bytes so a path is never listed twice.
        let mut merged: FxHashMap<&[u8], PathAcc> = FxHashMap::default();
        let global = self.paths.into_iter().map(|(id, acc)| (str_of(id), acc));
        let local = self
            .local_paths
            .iter()
            .map(|(bytes, acc)| (&bytes[..], acc.clone()));
        for (bytes, acc) in global.chain(local) {
            let m = merged.entry(bytes).or_default();
            m.calls += acc.calls;
            m.errors += acc.errors;
            m.time_ns = m.time_ns.saturating_add(acc.time_ns);
            for (sys, n) in acc.by_sys {
                match m.by_sys.iter_mut().find(|(s, _)| *s == sys) {
                    Some((_, k)) => *k += n,
                    None => m.by_sys.push((sys, n)),
                }
            }
        }
        let mut paths: Vec<(&[u8], PathStats)> = merged
            .into_iter()
            .map(|(bytes, mut acc)| {
                acc.by_sys.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let st = PathStats {
                    path: String::from_utf8_lossy(bytes).into_owned(),
                    calls: acc.calls,
                    errors: acc.errors,
                    time_ns: acc.time_ns,
                    by_syscall: acc.by_sys,
                };
                (bytes, st)
            })
            .collect();
        paths.sort_by(|(ab, a), (bb, b)| {
            b.time_ns
                .cmp(&a.time_ns)
                .then(b.calls.cmp(&a.calls))
                .then(ab.cmp(bb))
        });
        let paths = paths.into_iter().map(|(_, p)| p).collect();

        let processes = resolve_processes(&self.procs, &self.meta, end);
        let lost_records: u64 = self.lost.iter().map(|(_, n)| n).sum();
        Summary {
            lost_events: lost_records.max(end.map_or(0, |e| e.lost_events)),
            lost_by_reason: self.lost,
            truncation: truncation.cloned(),
            records: self.records,
            mappings: self.mappings,
            duration_ns: end.map_or(self.last_ts, |e| e.end_ts.max(self.last_ts)),
            end_exit: end.and_then(|e| e.exit),
            meta: self.meta,
            syscalls,
            totals,
            paths,
            processes,
        }
    }
}

fn split_argv(bytes: &[u8]) -> Vec<String> {
    if bytes.is_empty() {
        return Vec::new();
    }
    // A trailing NUL (argv written C-style) does not make an empty last argument.
    let bytes = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    bytes
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn resolve_processes(procs: &[ProcAcc], meta: &Meta, end: Option<&End>) -> Vec<Process> {
    // The program dejavu started is the first process no traced process forked; with -p,
    // the meta command is that of the attached process only when there is exactly one.
    let root = procs
        .iter()
        .position(|p| p.seen && p.parent.is_none_or(|k| !procs[k].seen))
        .filter(|&i| match meta.attached.as_slice() {
            [] => true,
            [pid] => *pid == procs[i].pid,
            _ => false,
        });
    let started_by_dejavu = meta.attached.is_empty();

    // argv before the first exec, by process; resolved parents first, iteratively, so a
    // long fork chain cannot overflow the stack and a malformed cycle cannot loop.
    let mut pre_exec: Vec<Option<Vec<String>>> = vec![None; procs.len()];
    for i in 0..procs.len() {
        let mut chain = vec![i];
        let resolved = loop {
            let j = *chain.last().unwrap_or(&i);
            if let Some(a) = &pre_exec[j] {
                break a.clone();
            }
            match &procs[j].inherited {
                Inherited::Argv(a) => break split_argv(a),
                // The parent had not exec'd when it forked j: j runs the parent's own
                // inherited command line. A chain longer than the list is a cycle.
                Inherited::Parent(_) if chain.len() > procs.len() => break Vec::new(),
                Inherited::Parent(k) => chain.push(*k),
                Inherited::Unknown if Some(j) == root => break meta.command.clone(),
                Inherited::Unknown => break Vec::new(),
            }
        };
        for j in chain {
            pre_exec[j] = Some(resolved.clone());
        }
    }

    procs
        .iter()
        .enumerate()
        .filter(|(_, p)| p.seen)
        .map(|(i, p)| {
            let argv = match &p.exec_argv {
                Some(a) => split_argv(a),
                None => pre_exec[i].clone().unwrap_or_default(),
            };
            let mut exit = p.exit;
            if exit.is_none() && Some(i) == root && started_by_dejavu {
                exit = end.and_then(|e| e.exit);
            }
            Process {
                pid: p.pid,
                ppid: p.ppid,
                argv,
                exe: p
                    .exe
                    .as_deref()
                    .map(|e| String::from_utf8_lossy(e).into_owned()),
                exit,
                threads: p.tids.len().max(1) as u32,
                calls: p.calls,
                time_ns: p.time_ns,
            }
        })
        .collect()
}

/// What a trace did, in totals: see the module documentation.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The trace's meta block.
    pub meta: Meta,
    /// Totals by system call (only calls that occur).
    pub syscalls: BTreeMap<Sys, SyscallStats>,
    /// Totals over all system calls.
    pub totals: SyscallStats,
    /// Totals by path, by time then calls, descending.
    pub paths: Vec<PathStats>,
    /// Processes in the order the trace first mentions them.
    pub processes: Vec<Process>,
    /// Events the backend knows it lost: the larger of the Lost records' sum and the end
    /// block's count.
    pub lost_events: u64,
    /// The Lost records' counts by reason, in reason order.
    pub lost_by_reason: Vec<(LostReason, u64)>,
    /// How the trace was cut off, if it was.
    pub truncation: Option<Truncation>,
    /// Records read.
    pub records: u64,
    /// Mapping records (format 2.1): where processes had files' code.
    pub mappings: MappingCounts,
    /// Trace duration, ns: the end block's end time, or for a cut-off trace the end of the
    /// last record seen.
    pub duration_ns: u64,
    /// The exit status in the end block (the program dejavu started).
    pub end_exit: Option<ExitStatus>,
}

/// The mapping records of a trace, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MappingCounts {
    /// Files mapped as code.
    pub mapped: u64,
    /// Of those, with a GNU build id.
    pub with_build_id: u64,
    /// Ranges unmapped.
    pub unmapped: u64,
}

impl Summary {
    /// Reads the rest of `reader` and summarizes it.
    pub fn from_reader<R: Read>(reader: &mut TraceReader<R>) -> Result<Summary, TraceError> {
        let mut b = SummaryBuilder::new(reader.meta());
        while let Some(rec) = reader.next_record()? {
            b.record_from(&rec, reader);
        }
        Ok(b.finish(reader))
    }

    /// Distinct threads over all processes.
    pub fn threads(&self) -> u64 {
        self.processes.iter().map(|p| p.threads as u64).sum()
    }

    /// The summary as JSON (`dejavu summary --format json`):
    ///
    /// ```text
    /// {"command": [..], "backend": "..", "arch": "..", "records": N, "duration_ns": N,
    ///  "totals": {"calls", "errors", "unfinished", "time_ns", "errnos": {"ENOENT": N}},
    ///  "syscalls": {"<name>": {same fields as totals}},
    ///  "paths": [{"path", "calls", "errors", "time_ns", "by_syscall": {"<name>": N}}],
    ///  "processes": [{"pid", "ppid", "argv": [..], "exit": N|null, "exe", "threads",
    ///                 "calls", "time_ns", and when killed: "signal": "SIGKILL", "core"}],
    ///  "lost_events": N, "lost_by_reason": {"buffer_full": N}, "truncated": null|{..}}
    /// ```
    ///
    /// Paths are ordered as in [`Summary::paths`] (all of them, not only the top N);
    /// `exit` is the shell's code (128 + signal when killed); non-UTF-8 paths and
    /// arguments are converted lossily (the JSON Lines export keeps their bytes).
    pub fn to_json(&self) -> Value {
        let syscalls: Map<String, Value> = self
            .syscalls
            .iter()
            .map(|(sys, st)| (sys.name().to_string(), stats_json(st)))
            .collect();
        let paths: Vec<Value> = self
            .paths
            .iter()
            .map(|p| {
                let by: Map<String, Value> = p
                    .by_syscall
                    .iter()
                    .map(|(s, n)| (s.name().to_string(), json!(n)))
                    .collect();
                json!({
                    "path": p.path,
                    "calls": p.calls,
                    "errors": p.errors,
                    "time_ns": p.time_ns,
                    "by_syscall": by,
                })
            })
            .collect();
        let processes: Vec<Value> = self
            .processes
            .iter()
            .map(|p| {
                let mut o = json!({
                    "pid": p.pid,
                    "ppid": p.ppid,
                    "argv": p.argv,
                    "exit": p.exit.map(|e| e.shell_code()),
                    "exe": p.exe,
                    "threads": p.threads,
                    "calls": p.calls,
                    "time_ns": p.time_ns,
                });
                if let Some(ExitStatus::Signal { signal, core }) = p.exit {
                    o["signal"] = json!(signal_label(signal));
                    o["core"] = json!(core);
                }
                o
            })
            .collect();
        let lost_by_reason: Map<String, Value> = self
            .lost_by_reason
            .iter()
            .map(|(r, n)| (r.name().to_string(), json!(n)))
            .collect();
        json!({
            "command": self.meta.command,
            "backend": self.meta.backend,
            "arch": self.meta.arch,
            "records": self.records,
            "duration_ns": self.duration_ns,
            "totals": stats_json(&self.totals),
            "syscalls": syscalls,
            "paths": paths,
            "processes": processes,
            "lost_events": self.lost_events,
            "lost_by_reason": lost_by_reason,
            "mappings": {
                "mapped": self.mappings.mapped,
                "with_build_id": self.mappings.with_build_id,
                "unmapped": self.mappings.unmapped,
            },
            "truncated": self.truncation.as_ref().map(|t| json!({
                "valid_bytes": t.valid_bytes,
                "lost_bytes": t.lost_bytes,
            })),
        })
    }

    /// The report for people: see [`TextOptions`].
    pub fn render_text(&self, w: &mut impl Write, opts: &TextOptions) -> io::Result<()> {
        let width = opts.width.max(MIN_WIDTH);
        self.render_header(w, width)?;
        self.render_syscalls(w, width)?;
        self.render_paths(w, opts, width)?;
        self.render_processes(w, opts, width)?;
        self.render_warnings(w, width)
    }

    fn render_header(&self, w: &mut impl Write, width: usize) -> io::Result<()> {
        let cmd = if self.meta.command.is_empty() {
            "(unknown command)".to_string()
        } else {
            shell_join(&self.meta.command)
        };
        writeln!(
            w,
            "{}",
            shorten_end(&format!("dejavu summary: {}", sanitize(&cmd)), width)
        )?;
        let facts = [
            format!(
                "{} records over {}",
                fmt_count(self.records),
                fmt_duration(self.duration_ns)
            ),
            plural(self.processes.len() as u64, "process", "processes"),
            plural(self.threads(), "thread", "threads"),
            plural(self.paths.len() as u64, "path", "paths"),
        ];
        let origin: Vec<&str> = [self.meta.backend.as_str(), self.meta.arch.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let mut facts = facts.join(", ");
        if self.mappings.mapped > 0 {
            facts = format!(
                "{facts}, {} ({} with a build id)",
                plural(self.mappings.mapped, "code mapping", "code mappings"),
                fmt_count(self.mappings.with_build_id)
            );
        }
        if !origin.is_empty() {
            facts = format!("{facts} ({})", origin.join(" on "));
        }
        writeln!(w, "{}", shorten_end(&facts, width))?;
        writeln!(w)
    }

    fn render_syscalls(&self, w: &mut impl Write, width: usize) -> io::Result<()> {
        writeln!(w, "System calls")?;
        if self.syscalls.is_empty() {
            writeln!(w, "  (no system calls in this trace)")?;
            return writeln!(w);
        }
        let mut rows: Vec<(&Sys, &SyscallStats)> = self.syscalls.iter().collect();
        rows.sort_by(|a, b| {
            b.1.time_ns
                .cmp(&a.1.time_ns)
                .then(b.1.calls.cmp(&a.1.calls))
                .then(a.0.cmp(b.0))
        });
        let total_ns = self.totals.time_ns;
        // The layout of strace -c, so eyes (and scripts) used to it read it at once.
        let rule = "------ ----------- ----------- --------- --------- ----------------";
        writeln!(
            w,
            "% time     seconds  usecs/call     calls    errors syscall"
        )?;
        writeln!(w, "{rule}")?;
        let line = |w: &mut dyn Write, name: &str, st: &SyscallStats| -> io::Result<()> {
            let pct = if total_ns == 0 {
                0.0
            } else {
                st.time_ns as f64 * 100.0 / total_ns as f64
            };
            let errors = if st.errors == 0 {
                String::new()
            } else {
                st.errors.to_string()
            };
            writeln!(
                w,
                "{:>6.2} {:>11.6} {:>11} {:>9} {:>9} {}",
                pct,
                st.time_ns as f64 / 1e9,
                st.mean_ns() / 1000,
                st.calls,
                errors,
                name
            )
        };
        for (sys, st) in &rows {
            line(w, sys.name(), st)?;
        }
        writeln!(w, "{rule}")?;
        line(w, "total", &self.totals)?;
        if total_ns == 0 {
            writeln!(
                w,
                "  (the trace has no call durations; rows are sorted by calls)"
            )?;
        }

        let failing: Vec<&(&Sys, &SyscallStats)> =
            rows.iter().filter(|(_, st)| st.errors > 0).collect();
        if !failing.is_empty() {
            writeln!(w)?;
            writeln!(w, "Errors by errno")?;
            let name_w = failing
                .iter()
                .map(|(s, _)| s.name().len())
                .max()
                .unwrap_or(0);
            for (sys, st) in failing {
                let mut errnos: Vec<(&i32, &u64)> = st.errnos.iter().collect();
                errnos.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let list: Vec<String> = errnos
                    .iter()
                    .map(|(e, n)| format!("{} {}", errno_label(**e), n))
                    .collect();
                let text = format!("  {:<name_w$}  {}", sys.name(), list.join(", "));
                writeln!(w, "{}", shorten_end(&text, width))?;
            }
        }
        if self.totals.unfinished > 0 {
            let mut unf: Vec<(&Sys, u64)> = rows
                .iter()
                .filter(|(_, st)| st.unfinished > 0)
                .map(|(s, st)| (*s, st.unfinished))
                .collect();
            unf.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let list: Vec<String> = unf.iter().map(|(s, n)| format!("{s} {n}")).collect();
            writeln!(w)?;
            let text = format!(
                "{} never returned while traced ({}): counted as calls, but not in time or errors.",
                plural(self.totals.unfinished, "call", "calls"),
                list.join(", ")
            );
            for l in wrap(&text, width, "", "  ") {
                writeln!(w, "{l}")?;
            }
        }
        writeln!(w)
    }

    fn render_paths(&self, w: &mut impl Write, opts: &TextOptions, width: usize) -> io::Result<()> {
        if self.paths.is_empty() {
            return Ok(());
        }
        let shown = self.paths.len().min(opts.top);
        if shown == self.paths.len() {
            writeln!(w, "Paths, by time")?;
        } else {
            writeln!(
                w,
                "Top {} of {} paths, by time",
                shown,
                fmt_count(self.paths.len() as u64)
            )?;
        }
        if shown == 0 {
            writeln!(
                w,
                "... and {} more paths",
                fmt_count(self.paths.len() as u64)
            )?;
            return writeln!(w);
        }
        let by_syscall: Vec<String> = self.paths[..shown]
            .iter()
            .map(|p| {
                let by: Vec<String> = p
                    .by_syscall
                    .iter()
                    .map(|(s, n)| format!("{s} {n}"))
                    .collect();
                by.join(", ")
            })
            .collect();
        // As wide as the breakdowns need, within bounds: the rest goes to the paths.
        const HEADER: &str = "calls by syscall";
        let by_w = by_syscall
            .iter()
            .map(|b| b.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(HEADER.len(), 26);
        let path_w = width
            .saturating_sub(9 + 1 + 9 + 1 + 8 + 2 + by_w + 2)
            .max(16);
        writeln!(
            w,
            "{:>9} {:>9} {:>8}  {:<by_w$}  path",
            "time", "calls", "errors", HEADER
        )?;
        writeln!(
            w,
            "{} {} {}  {}  {}",
            "-".repeat(9),
            "-".repeat(9),
            "-".repeat(8),
            "-".repeat(by_w),
            "-".repeat(path_w)
        )?;
        for (p, by) in self.paths[..shown].iter().zip(&by_syscall) {
            let errors = if p.errors == 0 {
                String::new()
            } else {
                p.errors.to_string()
            };
            let line = format!(
                "{:>9} {:>9} {:>8}  {:<by_w$}  {}",
                fmt_duration(p.time_ns),
                p.calls,
                errors,
                shorten_end(by, by_w),
                shorten_middle(&sanitize(&p.path), path_w),
            );
            writeln!(w, "{}", line.trim_end())?;
        }
        if shown < self.paths.len() {
            let rest = &self.paths[shown..];
            let calls: u64 = rest.iter().map(|p| p.calls).sum();
            let time: u64 = rest.iter().map(|p| p.time_ns).sum();
            writeln!(
                w,
                "... and {} more paths ({} calls, {})",
                fmt_count(rest.len() as u64),
                fmt_count(calls),
                fmt_duration(time)
            )?;
        }
        writeln!(w)
    }

    fn render_processes(
        &self,
        w: &mut impl Write,
        opts: &TextOptions,
        width: usize,
    ) -> io::Result<()> {
        if self.processes.is_empty() {
            return Ok(());
        }
        writeln!(
            w,
            "Processes ({}, {})",
            plural(self.processes.len() as u64, "process", "processes"),
            plural(self.threads(), "thread", "threads")
        )?;
        let cmd_w = width
            .saturating_sub(8 + 1 + 8 + 2 + 12 + 1 + 7 + 1 + 9 + 2)
            .max(16);
        writeln!(
            w,
            "{:>8} {:>8}  {:<12} {:>7} {:>9}  command",
            "pid", "ppid", "exit", "threads", "calls"
        )?;
        writeln!(
            w,
            "{} {}  {} {} {}  {}",
            "-".repeat(8),
            "-".repeat(8),
            "-".repeat(12),
            "-".repeat(7),
            "-".repeat(9),
            "-".repeat(cmd_w)
        )?;
        let tree = process_tree(&self.processes);
        let shown = tree.len().min(opts.max_processes);
        for (i, prefix) in &tree[..shown] {
            let p = &self.processes[*i];
            let ppid = if p.ppid == 0 {
                "-".to_string()
            } else {
                p.ppid.to_string()
            };
            let exit = p.exit.as_ref().map_or_else(|| "?".to_string(), exit_label);
            let argv = if p.argv.is_empty() {
                "?".to_string()
            } else {
                shell_join(&p.argv)
            };
            let cmd = format!("{prefix}{}", sanitize(&argv));
            let line = format!(
                "{:>8} {:>8}  {:<12} {:>7} {:>9}  {}",
                p.pid,
                ppid,
                exit,
                p.threads,
                p.calls,
                shorten_end(&cmd, cmd_w)
            );
            writeln!(w, "{}", line.trim_end())?;
        }
        if shown < tree.len() {
            writeln!(
                w,
                "... and {} more processes",
                fmt_count((tree.len() - shown) as u64)
            )?;
        }
        writeln!(w)
    }

    fn render_warnings(&self, w: &mut impl Write, width: usize) -> io::Result<()> {
        let mut warnings = Vec::new();
        if self.lost_events > 0 {
            let reasons: Vec<String> = self
                .lost_by_reason
                .iter()
                .map(|(r, n)| format!("{} {}", r.name(), fmt_count(*n)))
                .collect();
            let why = if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            };
            warnings.push(format!(
                "{} lost{why}: the counts above miss them.",
                plural(self.lost_events, "event was", "events were"),
            ));
        }
        if let Some(t) = &self.truncation {
            warnings.push(format!("{}.", t.warning()));
        }
        if warnings.is_empty() {
            return Ok(());
        }
        writeln!(w, "Warnings")?;
        for warning in warnings {
            for l in wrap(&warning, width, "  ! ", "    ") {
                writeln!(w, "{l}")?;
            }
        }
        Ok(())
    }
}

/// The narrowest report `render_text` draws; tables need this much.
const MIN_WIDTH: usize = 72;

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", fmt_count(n), if n == 1 { one } else { many })
}

fn stats_json(st: &SyscallStats) -> Value {
    let errnos: Map<String, Value> = st
        .errnos
        .iter()
        .map(|(e, n)| (errno_label(*e).into_owned(), json!(n)))
        .collect();
    json!({
        "calls": st.calls,
        "errors": st.errors,
        "unfinished": st.unfinished,
        "time_ns": st.time_ns,
        "errnos": errnos,
    })
}

/// The processes in tree order (depth first, children in order of appearance), each with
/// the box-drawing prefix that shows its place in the tree.
fn process_tree(procs: &[Process]) -> Vec<(usize, String)> {
    // A parent is the latest process with that pid that appeared before the child: pids
    // are reused, and a parent appears before its children.
    let mut latest: FxHashMap<u32, usize> = FxHashMap::default();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); procs.len()];
    let mut roots = Vec::new();
    for (i, p) in procs.iter().enumerate() {
        match latest.get(&p.ppid) {
            Some(&parent) if p.ppid != 0 => children[parent].push(i),
            _ => roots.push(i),
        }
        latest.insert(p.pid, i);
    }
    let mut out = Vec::with_capacity(procs.len());
    // (index, prefix for its children, prefix for itself); an explicit stack keeps deep
    // fork chains from overflowing the call stack.
    let mut stack: Vec<(usize, String, String)> = roots
        .iter()
        .rev()
        .map(|&r| (r, String::new(), String::new()))
        .collect();
    while let Some((i, inherited, own)) = stack.pop() {
        out.push((i, own));
        let kids = &children[i];
        for (k, &c) in kids.iter().enumerate().rev() {
            let last = k + 1 == kids.len();
            let own = format!("{inherited}{}", if last { "└─ " } else { "├─ " });
            let next = format!("{inherited}{}", if last { "   " } else { "│  " });
            stack.push((c, next, own));
        }
    }
    out
}

/// How [`Summary::render_text`] lays out its report.
#[derive(Debug, Clone, Copy)]
pub struct TextOptions {
    /// Paths to list (`--top N`).
    pub top: usize,
    /// Processes to list in the process tree.
    pub max_processes: usize,
    /// Columns to fit (at least 72).
    pub width: usize,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            top: 20,
            max_processes: 50,
            width: 100,
        }
    }
}

#[cfg(test)]
mod tests;
