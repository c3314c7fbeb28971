//! One pass over a trace: replay each record, show each call to the detectors that asked
//! for it, then collect, filter and rank their findings.

use crate::callsite::{SiteInfo, SiteKey};
use crate::program::Programs;
use crate::{registry, Config, Detector, Finding, Owner};
use dejavu_replay::{Replay, View};
use dejavu_trace::{
    FileStat, Frame, Meta, Record, StackId, StatId, Strings, Sys, TraceError, TraceReader,
};
use rustc_hash::FxHashMap;
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
    pub(crate) stats: &'a dyn Fn(StatId) -> FileStat,
    pub(crate) marks: &'a RefCell<Marks>,
    pub(crate) stacks: &'a dyn Fn(StackId) -> Vec<Frame>,
    pub(crate) programs: &'a RefCell<Programs>,
    pub(crate) site_memo: &'a RefCell<SiteMemo>,
    /// When asked (`dejavu whatif`), the (image, path) pairs each finding made with
    /// [`crate::group`] covers, by finding key.
    pub(crate) coverage: Option<&'a RefCell<Coverage>>,
}

/// What is behind each finding, by finding key: the (image, path) pairs, and for
/// repeated-output the lines (image, target, stream, masked line's hash).
#[derive(Default)]
pub(crate) struct Coverage {
    pub(crate) pairs: FxHashMap<String, Vec<(u32, dejavu_replay::PathKey)>>,
    pub(crate) lines: FxHashMap<String, Vec<(u32, dejavu_replay::PathKey, u8, u64)>>,
    /// repeated-exec: the commands (starting process, command hash) and the PATH probes
    /// (starting process, probed path).
    pub(crate) execs: FxHashMap<String, Vec<(u32, u64)>>,
    pub(crate) probes: FxHashMap<String, Vec<(u32, dejavu_replay::PathKey)>>,
}

/// What each finding covers beyond the few paths and patterns it shows, by finding key,
/// paths spelt out.
#[derive(Debug, Default)]
pub struct Covered {
    pairs: FxHashMap<String, Vec<(u32, String)>>,
    lines: FxHashMap<String, Vec<(u32, String, u8, u64)>>,
    execs: FxHashMap<String, Vec<(u32, u64)>>,
    probes: FxHashMap<String, Vec<(u32, String)>>,
}

impl Covered {
    /// The (process image, path) pairs behind the finding with `key` (findings made by
    /// [`crate::group`]).
    pub fn get(&self, key: &str) -> Option<&Vec<(u32, String)>> {
        self.pairs.get(key)
    }

    /// The lines behind a repeated-output finding: (process image, target written to,
    /// stream: 0-2 or 3 for another descriptor, the masked line's hash or the write's
    /// fingerprint).
    pub fn lines(&self, key: &str) -> Option<&[(u32, String, u8, u64)]> {
        self.lines.get(key).map(|v| v.as_slice())
    }

    /// The commands behind a repeated-exec finding: (the process that started them, the
    /// command's hash, see `repeated_exec::command_hash`).
    pub fn execs(&self, key: &str) -> Option<&[(u32, u64)]> {
        self.execs.get(key).map(|v| v.as_slice())
    }

    /// The PATH probes behind a repeated-exec finding: (the process whose exec they
    /// preceded's parent, the probed path).
    pub fn probes(&self, key: &str) -> Option<&[(u32, String)]> {
        self.probes.get(key).map(|v| v.as_slice())
    }
}

/// What each (stack, image) says about its call, worked out once.
pub(crate) type SiteMemo = FxHashMap<(StackId, u32), SiteInfo>;

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
    /// The image that first made a call from each stack (to tell whose code a stack is).
    stack_image: rustc_hash::FxHashMap<StackId, u32>,
    /// Which detector marked each call first (its index + 1; 0: none).
    who: Vec<u8>,
    /// The detector running now (index + 1).
    cur: u8,
    /// Calls two detectors both marked: (first, second, stack) -> calls.
    overlap: FxHashMap<(u8, u8, Option<StackId>), u64>,
}

impl Marks {
    fn mark(&mut self, seq: u64, dur: u64, stack: Option<StackId>) {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if w >= self.bits.len() {
            self.bits.resize((w + 1).max(self.bits.len() * 2), 0);
        }
        let i = seq as usize;
        if i >= self.who.len() {
            self.who.resize((i + 1).max(self.who.len() * 2), 0);
        }
        let first = self.who[i];
        if first == 0 {
            self.who[i] = self.cur;
        } else if first != self.cur && self.cur != 0 {
            *self.overlap.entry((first, self.cur, stack)).or_default() += 1;
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
    /// The program image `image` runs, and whether it is a launcher (decided once the
    /// trace is over: ask in `finish`).
    pub fn program_name(&self, image: u32) -> (String, bool) {
        let (name, role) = self.program_role(image);
        (name, role == Some(Owner::Launcher))
    }

    /// The program's name, and the owner of all its calls when the program itself decides
    /// it: a launcher, or a tool another program ran.
    pub fn program_role(&self, image: u32) -> (String, Option<Owner>) {
        let mut p = self.programs.borrow_mut();
        let prog = p.get(self.replay, self.strings, image);
        let role = if prog.launcher.is_some() {
            Some(Owner::Launcher)
        } else if prog.tool {
            Some(Owner::Tool)
        } else {
            None
        };
        (prog.name.clone(), role)
    }

    /// Whether a call of `image` at `ts` came before its language agent said the runtime's
    /// start-up was over (`Image::ready_ts`: a Python interpreter before `__main__` runs).
    /// False where no agent said so.
    pub fn in_startup(&self, image: u32, ts: u64) -> bool {
        self.replay
            .images
            .get(image as usize)
            .and_then(|i| i.ready_ts)
            .is_some_and(|r| ts < r)
    }

    /// Whether a repeat at `ts` of what `image` did at `prev_ts` is the program's first:
    /// the earlier one was the runtime's start-up (CPython's import system listing a
    /// directory that `importlib.metadata` lists again), which the program could not have
    /// kept the answer of.
    pub fn first_after_startup(&self, image: u32, prev_ts: u64, ts: u64) -> bool {
        self.in_startup(image, prev_ts) && !self.in_startup(image, ts)
    }

    /// Whose one call is, as its finding's row would name it: the owner its stack's
    /// call site gives (`site`), else, where the stack names no frame or there is none,
    /// by its path (`owner_by_path`). A launcher's or a tool's calls are theirs.
    pub fn call_owner(
        &self,
        image: u32,
        stack: Option<StackId>,
        path: dejavu_replay::PathKey,
        ts: u64,
    ) -> Owner {
        if let (_, Some(role)) = self.program_role(image) {
            return role;
        }
        match stack.map(|s| self.site(s, image).owner) {
            Some(Some(o)) => o,
            named => {
                let unnamed = named.is_some();
                self.owner_by_path(image, self.replay.paths.bytes(path), ts, unnamed)
            }
        }
    }

    /// Whether a repeat at `ts` (stack `stack`) of what `image` did at `prev_ts` (stack
    /// `prev_stack`) on `path` is the program's first, not a repeat: the earlier one was
    /// the runtime's, its start-up ([`Cx::first_after_startup`]) or its module loader or
    /// import system later on (CPython's FileFinder listing a package's directory as it
    /// imports from it, which pylint lists again to find its plugins; Node.js's loader
    /// reading a package.json that webpack reads again), whose answer the program has
    /// no way to keep. A repeat the runtime makes itself stays a repeat (the runtime's).
    pub fn first_after_runtime(
        &self,
        image: u32,
        path: dejavu_replay::PathKey,
        (prev_ts, prev_stack): (u64, Option<StackId>),
        (ts, stack): (u64, Option<StackId>),
    ) -> bool {
        if self.first_after_startup(image, prev_ts, ts) {
            return true;
        }
        if self.in_startup(image, ts) {
            return false;
        }
        self.call_owner(image, prev_stack, path, prev_ts) == Owner::Runtime
            && self.call_owner(image, stack, path, ts) != Owner::Runtime
    }

    /// Whose a call on `path` is when its stack does not tell (`owner::owner_by_path`),
    /// for a call of `image` at `ts`; `unnamed`: the calls had stacks, none of which named
    /// a frame (only plumbing and the interpreter's own code).
    pub fn owner_by_path(&self, image: u32, path: &[u8], ts: u64, unnamed: bool) -> Owner {
        let ready = self
            .replay
            .images
            .get(image as usize)
            .and_then(|i| i.ready_ts);
        let before_ready = ready.is_some_and(|r| ts < r);
        let mut p = self.programs.borrow_mut();
        let prog = p.get(self.replay, self.strings, image);
        // Only where the agent ran: without it no call names a line.
        crate::owner::owner_by_path(path, prog, before_ready, unnamed && ready.is_some())
    }

    /// A call site's key for people and for a finding's key: `function@file`,
    /// `function@file:line` for anonymous code, `module+0xoffset` without symbols.
    pub fn site_label(&self, k: &SiteKey) -> String {
        self.site_label_as(k, false)
    }

    /// The site as a finding's key names it: [`Cx::site_label`] with its file spelled
    /// the same on another machine or checkout ([`crate::portable`]).
    pub fn key_label(&self, k: &SiteKey) -> String {
        self.site_label_as(k, true)
    }

    /// The directory the recording started in, which a key's files are named from; None
    /// when unknown (an attached recording, an import).
    pub fn key_root(&self) -> Option<&str> {
        let cwd = self.replay.meta_cwd();
        (!self.replay.attached && cwd.starts_with('/') && cwd != "/").then_some(cwd)
    }

    fn site_label_as(&self, k: &SiteKey, key: bool) -> String {
        let s = |id: Option<dejavu_trace::StrId>| {
            id.map(|i| self.strings.lossy(i).into_owned())
                .unwrap_or_default()
        };
        let mut out = s(k.function);
        if let Some(f) = k.file {
            out.push('@');
            let f = self.strings.lossy(f);
            if key {
                out.push_str(crate::portable::file(&f, self.key_root()));
            } else {
                out.push_str(&f);
            }
        } else if let Some(m) = k.module {
            let m = self.strings.lossy(m);
            let m = m.rsplit('/').next().unwrap_or(&m).to_string();
            if k.function.is_some() {
                out.push('@');
                out.push_str(&m);
            } else {
                out = format!("{m}+{:#x}", k.addr);
            }
        }
        if k.line != 0 {
            out.push_str(&format!(":{}", k.line));
        }
        out
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

    /// Whether call `seq` was marked redundant so far.
    pub fn is_marked(&self, seq: u64) -> bool {
        let m = self.marks.borrow();
        m.bits
            .get((seq / 64) as usize)
            .is_some_and(|w| w & (1 << (seq % 64)) != 0)
    }

    /// Fills in who a finding made by a detector itself (not through [`crate::group`])
    /// belongs to: program, owner and key, from `image` and its call sites. `subject` is
    /// what the finding is about (a path, a masked line or command): part of the key.
    pub fn label(&self, f: &mut Finding, image: u32, subject: &str) {
        let (name, role) = self.program_role(image);
        f.owner = role.unwrap_or_else(|| f.callsites.first().map_or(Owner::Own, |c| c.owner));
        let subject = crate::pattern::mask(subject.as_bytes());
        let subject = crate::portable::words(&subject, self.key_root());
        let what = match f.callsites.first() {
            Some(c) if !c.function.is_empty() && !c.file.is_empty() => {
                let file = crate::portable::file(&c.file, self.key_root());
                format!("{}@{file}|{subject}", c.function)
            }
            Some(c) => format!("{}|{subject}", c.label()),
            None => format!("path:{subject}"),
        };
        f.key = format!("{name}|{}|{}|{what}", f.detector, f.owner.name());
        f.program = name;
        f.processes = 1;
        if let Some(im) = self.replay.images.get(image as usize) {
            f.pid = im.pid;
            f.command = self.replay.image_command(image, self.strings);
        }
    }

    /// A stat answer.
    pub fn stat(&self, id: StatId) -> FileStat {
        (self.stats)(id)
    }

    /// A path for people.
    pub fn path(&self, k: dejavu_replay::PathKey) -> String {
        self.replay.paths.display(k)
    }

    /// The share of all traced syscall time that `ns` is.
    pub fn share(&self, ns: u64) -> f64 {
        if self.replay.file_ns() == 0 {
            0.0
        } else {
            ns as f64 / self.replay.file_ns() as f64
        }
    }
}

/// The result of an analysis.
#[derive(Debug)]
pub struct Analysis {
    /// Findings over the thresholds: the report's rows first (by owner, then most time
    /// wasted first), then the findings shown in one of them (`shown_in`; see
    /// [`Analysis::rows`]).
    pub findings: Vec<Finding>,
    /// Findings below the thresholds (hidden by default).
    pub hidden: usize,
    /// Their redundant calls (summed: a call two of them flag counts twice).
    pub hidden_calls: u64,
    /// File calls in the trace: its syscall records but for those on a descriptor nobody
    /// was seen opening that name no path (an eventfd's wake-ups: `Replay::unnamed`).
    pub syscalls: u64,
    /// Their total duration, ns.
    pub syscall_ns: u64,
    /// Processes in the trace.
    pub processes: usize,
    /// The trace's meta.
    pub meta: Meta,
    /// Events the trace says were lost.
    pub lost_events: u64,
    /// Programs whose Python or Node.js processes ran without dejavu's agent in a recording
    /// whose agents ran elsewhere (their environment or flags dropped it: pip's build
    /// environment replaces PYTHONPATH; `python -I`, `-E`, `-S`): their calls name no line
    /// of the language's code. Processes that made fewer than [`AGENTLESS_MIN_CALLS`] file
    /// calls, or opened no file of the language's code (`python3 -V` exits before it
    /// imports anything) are left out. Most processes first.
    pub agentless: Vec<crate::Agentless>,
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
    /// Redundant calls by the stack that made them (the HTML report's flame graph).
    pub stacks: crate::profile::Stacks,
    /// Each thread's calls and redundant calls over time (the HTML report's timeline).
    pub timeline: crate::profile::Timeline,
    /// How long the recording ran, ns: to its end record (the program's exit), else to
    /// the end of its last file call. (pylint's last file call comes ~3 s before its exit:
    /// the header had said "in a 7.88s run" of a 10.8 s one.)
    pub run_ns: u64,
    /// Every call by (stack, syscall), when asked for ([`crate::profile::Collect`]).
    pub samples: Option<crate::profile::Samples>,
    /// Calls per (program, syscall) and (program, path), when asked for.
    pub counts: Option<crate::profile::Counts>,
}

impl Analysis {
    /// The findings a report shows as rows: one per call, those shown in another finding
    /// (`shown_in`) left out.
    pub fn rows(&self) -> &[Finding] {
        let n = self
            .findings
            .iter()
            .position(|f| f.shown_in.is_some())
            .unwrap_or(self.findings.len());
        &self.findings[..n]
    }

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
    progress: impl FnMut(u64),
) -> Result<Analysis, TraceError> {
    analyze_inner(
        reader,
        cfg,
        crate::profile::Collect::default(),
        progress,
        None,
    )
}

/// [`analyze`], gathering in the same pass what `collect` asks for.
pub fn analyze_collecting<R: Read>(
    reader: &mut TraceReader<R>,
    cfg: &Config,
    collect: crate::profile::Collect,
    progress: impl FnMut(u64),
) -> Result<Analysis, TraceError> {
    analyze_inner(reader, cfg, collect, progress, None)
}

/// As [`analyze`], and also what each finding covers: every (process image, path) behind
/// it, for findings grouped by [`crate::group`] (`dejavu whatif` scopes a finding's own fix
/// with it).
pub fn analyze_covered<R: Read>(
    reader: &mut TraceReader<R>,
    cfg: &Config,
    progress: impl FnMut(u64),
) -> Result<(Analysis, Covered), TraceError> {
    let mut covered = Covered::default();
    let a = analyze_inner(
        reader,
        cfg,
        crate::profile::Collect::default(),
        progress,
        Some(&mut covered),
    )?;
    Ok((a, covered))
}

fn analyze_inner<R: Read>(
    reader: &mut TraceReader<R>,
    cfg: &Config,
    collect: crate::profile::Collect,
    mut progress: impl FnMut(u64),
    covered: Option<&mut Covered>,
) -> Result<Analysis, TraceError> {
    let cov_cell = RefCell::new(Coverage::default());
    let coverage = covered.is_some().then_some(&cov_cell);
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
    let programs = RefCell::new(Programs::default());
    let site_memo = RefCell::new(SiteMemo::default());
    let mut sequences = crate::sequence::Tracker::default();
    let mut times = crate::profile::TimeIndex::default();
    let mut samples = collect.samples.then(crate::profile::SampleIndex::default);
    let mut counts = collect
        .counts
        .then(|| crate::profile::CountIndex::new(reader.meta()));
    let mut n: u64 = 0;
    // Syscall records per image, and whether it opened a .py or .js file
    // (Analysis::agentless).
    let mut image_calls: Vec<(u64, bool)> = Vec::new();
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
                let im = v.image as usize;
                if image_calls.len() <= im {
                    image_calls.resize(im + 1, (0, false));
                }
                image_calls[im].0 += 1;
                if !image_calls[im].1 && s.ret >= 0 && s.sys.class() == dejavu_trace::SysClass::Open
                {
                    // It loaded code of its language (python3 -V exits before any).
                    if let Some(p) = v.path {
                        let b = replay.paths.bytes(p);
                        image_calls[im].1 = [&b".py"[..], b".pyc", b".js", b".mjs", b".cjs"]
                            .iter()
                            .any(|e| b.ends_with(e));
                    }
                }
                times.call(v.seq, s.ts, s.dur, s.pid, s.tid, v.image);
                if let Some(si) = &mut samples {
                    si.call(v.seq, s.sys, s.stack, v.image, s.dur);
                }
                if let Some(ci) = &mut counts {
                    ci.call(&s);
                }
                let targets = &dispatch[s.sys as usize];
                let cx = Cx {
                    replay: &replay,
                    strings,
                    config: cfg,
                    stats: &stat_of,
                    marks: &marks,
                    stacks: &stack_of,
                    programs: &programs,
                    site_memo: &site_memo,
                    coverage,
                };
                for &i in targets {
                    marks.borrow_mut().cur = i as u8 + 1;
                    dets[i].on_syscall(&s, &v, &cx);
                }
                if let Some(st) = s.stack {
                    marks.borrow_mut().stack_image.entry(st).or_insert(v.image);
                    if cfg.counts(s.ts) {
                        let info = cx.site(st, v.image);
                        if let Some(site) = info.key {
                            sequences.call(&s, &v, site, info.line, &cx);
                        }
                    }
                }
                replay.apply(&s, &v, strings, &stat_of);
            }
            other => {
                if let Some(ci) = &mut counts {
                    ci.record(&other, strings);
                }
                if let (Some(si), Record::Mapping(m)) = (&mut samples, &other) {
                    si.mapping(m, strings);
                }
                replay.apply_record(&other, strings);
                let cx = Cx {
                    replay: &replay,
                    strings,
                    config: cfg,
                    stats: &stat_of,
                    marks: &marks,
                    stacks: &stack_of,
                    programs: &programs,
                    site_memo: &site_memo,
                    coverage,
                };
                for (i, d) in dets.iter_mut().enumerate() {
                    marks.borrow_mut().cur = i as u8 + 1;
                    d.on_record(&other, &cx);
                }
            }
        }
    }
    let strings = reader.strings();
    let stat_of = |id: StatId| reader.stat(id);
    let stack_of = |id: StackId| reader.stack(id).to_vec();
    programs.borrow_mut().decide_launchers(&replay, strings);
    let cx = Cx {
        replay: &replay,
        strings,
        config: cfg,
        stats: &stat_of,
        marks: &marks,
        stacks: &stack_of,
        programs: &programs,
        site_memo: &site_memo,
        coverage,
    };
    let mut all: Vec<Finding> = Vec::new();
    for (i, d) in dets.iter_mut().enumerate() {
        marks.borrow_mut().cur = i as u8 + 1;
        all.extend(d.finish(&cx));
    }
    marks.borrow_mut().cur = 0;
    let all = merge_same_key(all, &cx);
    let ids: Vec<&'static str> = infos.iter().map(|d| d.id).collect();
    let mut all = fold_aspects(all, &marks.borrow(), &ids, &cx);
    let seqs = sequences.finish(&cx);
    for f in &mut all {
        let Some(c) = f.callsites.first() else {
            continue;
        };
        // A function without a name of its own (a module's top level) has a sequence per
        // line: the one of the finding's line.
        if let Some((_, _, seq)) = seqs.iter().find(|(_, _, q)| {
            q.function == c.function
                && q.file == c.file
                && !c.function.is_empty()
                && (q.line == 0 || q.line == c.line)
        }) {
            f.sequence = Some(seq.clone());
        }
    }
    let mut all = fold_same_loop(all);
    let (stacks, timeline) = {
        let m = marks.borrow();
        let timeline = times.finish(
            replay.syscalls,
            |lo, hi| crate::profile::count_bits(&m.bits, lo, hi),
            |image| cx.program_name(image).0,
        );
        (stacks_of(&m, &cx), timeline)
    };
    let samples = samples.map(|si| {
        si.finish(
            &marks.borrow().bits,
            |st| sample_frames(&cx.stack(st), cx.strings),
            |image| cx.program_name(image).0,
        )
    });
    let counts = counts.map(|ci| ci.finish(strings));
    let run_ns = reader.end().map_or(0, |e| e.end_ts).max(timeline.end_ns);
    let (redundant_calls, redundant_ns, callsites, redundant_bits) = {
        let m = marks.borrow();
        let sites = m
            .by_stack
            .iter()
            .map(|(&st, &(n, ns))| (st, m.stack_image.get(&st).copied().unwrap_or(0), n, ns));
        let sites: Vec<_> = sites.collect();
        (
            m.calls,
            m.ns,
            cx.callsites_ranked(sites.into_iter(), 100),
            m.bits.clone(),
        )
    };
    if let Ok(Some(m)) = cfg.program_matcher() {
        all.retain(|f| f.of_program(|p| m.is_match(p)));
    }
    let before = all.len();
    // The hidden findings' calls, but for those of a finding shown in a row that stays:
    // they are that row's (a finding shown in one that is hidden too is hidden with it,
    // and counts here: its calls were in no part of the headline's split).
    let min = cfg.min_calls.max(1);
    // The rows that stay: the findings over the thresholds not shown in another.
    let rows: rustc_hash::FxHashSet<String> = all
        .iter()
        .filter(|f| f.redundant_calls >= min && f.shown_in.is_none())
        .map(|f| f.key.clone())
        .collect();
    let hidden_calls = all
        .iter()
        .filter(|f| {
            f.redundant_calls < min && f.shown_in.as_ref().is_none_or(|k| !rows.contains(k))
        })
        .map(|f| f.redundant_calls)
        .sum();
    all.retain(|f| f.redundant_calls >= min);
    // A finding shown in one the thresholds hid is a row of its own.
    for f in &mut all {
        if f.shown_in.as_ref().is_some_and(|k| !rows.contains(k)) {
            f.shown_in = None;
        }
    }
    let hidden = before - all.len();
    // A finding's grade is bounded by its share of the run, not only of the traced file
    // calls' time: in a program that computes more than it asks the kernel (coverage
    // over a test suite: 34 ms of a 39 s run had been "high, 27.6%").
    for f in &mut all {
        f.severity = f.severity.min(crate::Severity::by_run(f.wasted_ns, run_ns));
    }
    all.sort_by(|a, b| {
        (a.shown_in.is_some(), a.owner)
            .cmp(&(b.shown_in.is_some(), b.owner))
            .then(b.wasted_ns.cmp(&a.wasted_ns))
            .then(b.redundant_calls.cmp(&a.redundant_calls))
            .then(a.detector.cmp(b.detector))
            .then(a.key.cmp(&b.key))
    });
    if let Some(out) = covered {
        let cov = cov_cell.borrow();
        for (key, pairs) in cov.pairs.iter() {
            let v = out.pairs.entry(key.clone()).or_default();
            v.extend(pairs.iter().map(|&(i, p)| (i, replay.paths.display(p))));
        }
        for (key, execs) in cov.execs.iter() {
            out.execs
                .entry(key.clone())
                .or_default()
                .extend_from_slice(execs);
        }
        for (key, probes) in cov.probes.iter() {
            let v = out.probes.entry(key.clone()).or_default();
            v.extend(probes.iter().map(|&(p, k)| (p, replay.paths.display(k))));
        }
        for (key, lines) in cov.lines.iter() {
            let v = out.lines.entry(key.clone()).or_default();
            v.extend(
                lines
                    .iter()
                    .map(|&(i, p, st, h)| (i, replay.paths.display(p), st, h)),
            );
        }
    }
    Ok(Analysis {
        findings: all,
        hidden,
        hidden_calls,
        syscalls: replay.file_calls(),
        syscall_ns: replay.file_ns(),
        processes: replay.procs.len(),
        meta: reader.meta().clone(),
        lost_events: reader
            .lost_events()
            .max(reader.end().map_or(0, |e| e.lost_events)),
        agentless: agentless(&cx, &image_calls),
        truncated: reader.truncation().cloned(),
        detectors: infos.iter().map(|d| d.id).collect(),
        redundant_calls,
        redundant_ns,
        callsites,
        redundant_bits,
        stacks,
        timeline,
        run_ns,
        samples,
        counts,
    })
}

/// File calls a Python or Node.js process must make for its missing agent to be said.
pub const AGENTLESS_MIN_CALLS: u64 = 50;

/// [`Analysis::agentless`].
fn agentless(cx: &Cx<'_>, calls: &[(u64, bool)]) -> Vec<crate::Agentless> {
    use crate::program::Runtime;
    let replay = cx.replay;
    // Agents ran in this recording: one said its runtime was ready.
    if !replay.images.iter().any(|i| i.ready_ts.is_some()) {
        return Vec::new();
    }
    let mut by: FxHashMap<String, u64> = FxHashMap::default();
    for (i, im) in replay.images.iter().enumerate() {
        let (n, code) = calls.get(i).copied().unwrap_or((0, false));
        if im.ready_ts.is_some() || n < AGENTLESS_MIN_CALLS || !code {
            continue;
        }
        let mut p = cx.programs.borrow_mut();
        let prog = p.get(replay, cx.strings, i as u32);
        if matches!(prog.runtime, Runtime::Python | Runtime::Node)
            && prog.launcher.is_none()
            && !prog.tool
        {
            *by.entry(prog.name.clone()).or_default() += 1;
        }
    }
    let mut v: Vec<crate::Agentless> = by
        .into_iter()
        .map(|(program, processes)| crate::Agentless { program, processes })
        .collect();
    v.sort_by(|a, b| {
        b.processes
            .cmp(&a.processes)
            .then(a.program.cmp(&b.program))
    });
    v
}

/// A stack's frames as profilers name them.
fn sample_frames(frames: &[Frame], strings: &Strings) -> Vec<crate::profile::SampleFrame> {
    frames
        .iter()
        .map(|f| {
            // A stripped file's function (`sub_1c1500`) keeps its own address, as an
            // unnamed one: a symbolizer of the profile names it from the file.
            let function = match (f.function, f.module) {
                (Some(s), Some(m))
                    if f.file.is_none() && dejavu_trace::is_unnamed_function(strings.get(s)) =>
                {
                    format!("{}+{:#x}", strings.lossy(m), f.addr)
                }
                (Some(s), _) => strings.lossy(s).into_owned(),
                (None, Some(m)) => format!("{}+{:#x}", strings.lossy(m), f.addr),
                (None, None) => format!("{:#x}", f.addr),
            };
            crate::profile::SampleFrame {
                function,
                file: f
                    .file
                    .map(|s| strings.lossy(s).into_owned())
                    .unwrap_or_default(),
                line: f.line,
                module: f
                    .module
                    .map(|s| strings.lossy(s).into_owned())
                    .unwrap_or_default(),
                addr: f.addr,
            }
        })
        .collect()
}

/// Redundant calls by stack, the heaviest [`crate::profile::MAX_STACKS`], each frame
/// classified for the program of the process that first made a call from it.
fn stacks_of(m: &Marks, cx: &Cx<'_>) -> crate::profile::Stacks {
    let mut v: Vec<(StackId, u64, u64)> = m
        .by_stack
        .iter()
        .map(|(&st, &(n, ns))| (st, n, ns))
        .collect();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    let stacked: u64 = v.iter().map(|x| x.1).sum();
    let other_calls = v.iter().skip(crate::profile::MAX_STACKS).map(|x| x.1).sum();
    v.truncate(crate::profile::MAX_STACKS);
    let stacks = v
        .into_iter()
        .map(|(st, calls, ns)| {
            let image = m.stack_image.get(&st).copied().unwrap_or(0);
            let frames = cx.stack(st);
            let mut progs = cx.programs.borrow_mut();
            let prog = progs.get(cx.replay, cx.strings, image);
            let frames = frames
                .iter()
                .map(|f| {
                    crate::callsite::frame_out(
                        f,
                        cx.strings,
                        crate::owner::classify(f, cx.strings, prog),
                    )
                })
                .collect();
            let program = prog.name.clone();
            crate::profile::StackCost {
                program,
                frames,
                calls,
                ns,
            }
        })
        .collect();
    crate::profile::Stacks {
        stacks,
        other_calls,
        unstacked_calls: m.calls.saturating_sub(stacked),
    }
}

/// When two findings flag (mostly) the same calls, the one whose detector names the more
/// specific fix owns them; how the calls are made (small, on the main thread) is an aspect
/// of it. Detectors not listed rank just above small-writes.
const PRECEDENCE: [&str; 13] = [
    "repeated-output",
    "ensure-dir",
    "self-inflicted-lookup",
    "check-then-act",
    "reread-unchanged",
    "negative-probe",
    "open-close-churn",
    "fsync-per-op",
    "repeated-lookup",
    "repeated-exec",
    "no-reader",
    "small-writes",
    "sync-io-main-thread",
];

fn precedence(id: &str) -> usize {
    PRECEDENCE
        .iter()
        .position(|x| *x == id)
        .unwrap_or(PRECEDENCE.len() - 2)
}

/// A call site's identity for matching two findings: `function@file` (or the module for
/// native code), else the label.
fn site_id(c: &crate::Callsite) -> String {
    if c.function.is_empty() {
        return c.label();
    }
    let place = if c.file.is_empty() {
        c.module.rsplit('/').next().unwrap_or(&c.module)
    } else {
        &c.file
    };
    format!("{}@{place}", c.function)
}

/// The same identity from a site key.
fn key_site_id(k: &crate::callsite::SiteKey, cx: &Cx<'_>) -> String {
    let s = |id: Option<dejavu_trace::StrId>| {
        id.map(|i| cx.strings.lossy(i).into_owned())
            .unwrap_or_default()
    };
    let module = s(k.module);
    let module = module.rsplit('/').next().unwrap_or(&module).to_string();
    match (k.function, k.file) {
        (Some(_), Some(_)) => format!("{}@{}", s(k.function), s(k.file)),
        (Some(_), None) => format!("{}@{module}", s(k.function)),
        (None, Some(_)) if k.line != 0 => format!("{}:{}", s(k.file), k.line),
        (None, Some(_)) => s(k.file),
        (None, None) => format!("{module}+{:#x}", k.addr),
    }
}

/// One row per call: a finding whose redundant calls are at least half another's (same
/// program, same call site, or without call sites the same path), by a detector of higher
/// precedence, is shown in that one (`also`) and marked `shown_in`.
fn fold_aspects(
    mut all: Vec<Finding>,
    marks: &Marks,
    ids: &[&'static str],
    cx: &Cx<'_>,
) -> Vec<Finding> {
    if marks.overlap.is_empty() {
        return all;
    }
    // Shared calls per detector pair (by id, ordered) and call site ("" without a stack).
    let mut shared: FxHashMap<(&str, &str, String), u64> = FxHashMap::default();
    for (&(a, b, st), &n) in &marks.overlap {
        let (Some(a), Some(b)) = (ids.get(a as usize - 1), ids.get(b as usize - 1)) else {
            continue;
        };
        let (a, b) = if a <= b { (*a, *b) } else { (*b, *a) };
        let site = st
            .and_then(|st| {
                let image = marks.stack_image.get(&st).copied().unwrap_or(0);
                cx.site(st, image).key
            })
            .map(|k| key_site_id(&k, cx))
            .unwrap_or_default();
        *shared.entry((a, b, site)).or_default() += n;
    }
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| {
        (
            precedence(all[i].detector),
            std::cmp::Reverse(all[i].redundant_calls),
        )
    });
    let mut folded: Vec<Option<(usize, u64)>> = vec![None; all.len()];
    for (n, &j) in order.iter().enumerate() {
        let b = &all[j];
        let sb = b.callsites.first().map(site_id);
        let mut best: Option<(usize, u64)> = None;
        for &i in &order[..n] {
            let a = &all[i];
            if folded[i].is_some()
                || a.detector == b.detector
                || a.program_names() != b.program_names()
                || precedence(a.detector) >= precedence(b.detector)
            {
                continue;
            }
            let sa = a.callsites.first().map(site_id);
            let site = match (&sa, &sb) {
                (Some(x), Some(y)) if x == y => x.clone(),
                (None, None) if a.paths.first() == b.paths.first() => String::new(),
                _ => continue,
            };
            let pair = if a.detector <= b.detector {
                (a.detector, b.detector, site)
            } else {
                (b.detector, a.detector, site)
            };
            let o = shared
                .get(&pair)
                .copied()
                .unwrap_or(0)
                .min(b.redundant_calls);
            if o > 0 && o * 2 >= b.redundant_calls && best.is_none_or(|(_, x)| o > x) {
                best = Some((i, o));
            }
        }
        folded[j] = best;
    }
    for (j, f) in folded.into_iter().enumerate() {
        if let Some((i, o)) = f {
            show_in(&mut all, i, j, o, false);
        }
    }
    all
}

/// Shows finding `guest` in finding `host`: an `also` entry there (`shared_calls` of its
/// calls the host flags too; `same_loop` for the other calls of one loop), `shown_in` here.
fn show_in(all: &mut [Finding], host: usize, guest: usize, shared_calls: u64, same_loop: bool) {
    let aspect = crate::Aspect {
        detector: all[guest].detector,
        key: all[guest].key.clone(),
        redundant_calls: all[guest].redundant_calls,
        shared_calls,
        same_loop,
    };
    all[guest].shown_in = Some(all[host].key.clone());
    all[host].also.push(aspect);
}

/// The lookup detectors whose findings at one call site one cache fixes together: the
/// answers asked again (repeated-lookup) and the failures asked again (negative-probe).
const ONE_CACHE: [&str; 2] = ["repeated-lookup", "negative-probe"];

/// One row per loop: a repeated-lookup and a negative-probe finding of one program whose
/// first call site is the same function, which runs a sequence of calls again and again
/// (sphinx's SphinxTranslator.__init__: a stat of a missing css file, then a stat of the
/// one that exists), are one cache's work: the one with fewer redundant calls (of as many,
/// the later in the precedence) is shown in the other (`also`, `same_loop`). Findings
/// already folded, or hosting others, stay as they are.
fn fold_same_loop(mut all: Vec<Finding>) -> Vec<Finding> {
    let candidates: Vec<usize> = (0..all.len())
        .filter(|&i| {
            let f = &all[i];
            ONE_CACHE.contains(&f.detector)
                && f.shown_in.is_none()
                && f.also.is_empty()
                && f.sequence.is_some()
                && !f.callsites.is_empty()
        })
        .collect();
    let mut done = vec![false; all.len()];
    for (n, &i) in candidates.iter().enumerate() {
        for &j in &candidates[n + 1..] {
            if done[i] || done[j] {
                continue;
            }
            let (a, b) = (&all[i], &all[j]);
            let same = a.detector != b.detector
                && a.program_names() == b.program_names()
                && a.owner == b.owner
                && a.sequence == b.sequence
                && a.callsites.first().map(site_id) == b.callsites.first().map(site_id);
            if !same {
                continue;
            }
            // The host: more redundant calls, else the higher precedence.
            let rank = |f: &Finding| (std::cmp::Reverse(f.redundant_calls), precedence(f.detector));
            let (host, guest) = if rank(a) <= rank(b) { (i, j) } else { (j, i) };
            show_in(&mut all, host, guest, 0, true);
            done[i] = true;
            done[j] = true;
        }
    }
    all
}

/// Findings that share a key (a detector's own findings for several processes of one
/// program, made without [`crate::group`]) become one: counts added, hazards and call
/// sites merged.
fn merge_same_key(all: Vec<Finding>, cx: &Cx<'_>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::with_capacity(all.len());
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    for f in all {
        match index.get(&f.key) {
            None => {
                index.insert(f.key.clone(), out.len());
                out.push(f);
            }
            Some(&i) => {
                let g = &mut out[i];
                // One process's findings of several targets (repeated-output's log line in a
                // log file per test directory): one process, their paths apart.
                let same_process = f.pid != 0 && f.pid == g.pid;
                if f.redundant_calls > g.redundant_calls {
                    g.pid = f.pid;
                    g.command = f.command.clone();
                    g.example = f.example.clone().or(g.example.take());
                }
                if !same_process {
                    g.processes += f.processes;
                }
                g.calls += f.calls;
                g.redundant_calls += f.redundant_calls;
                g.wasted_ns += f.wasted_ns;
                g.first_ts = g.first_ts.min(f.first_ts);
                g.last_ts = g.last_ts.max(f.last_ts);
                for h in f.hazards {
                    if !g.hazards.contains(&h) {
                        g.hazards.push(h);
                    }
                }
                for p in f.paths {
                    if !g.paths.contains(&p) && g.paths.len() < 3 {
                        g.paths.push(p);
                    }
                }
                g.path_count = if same_process {
                    g.path_count + f.path_count
                } else {
                    g.path_count.max(g.paths.len() as u64)
                };
                for t in f.top_paths {
                    match g.top_paths.iter_mut().find(|x| x.path == t.path) {
                        Some(x) => x.redundant_calls += t.redundant_calls,
                        None => g.top_paths.push(t),
                    }
                }
                g.top_paths.sort_by(|a, b| {
                    b.redundant_calls
                        .cmp(&a.redundant_calls)
                        .then(a.path.cmp(&b.path))
                });
                g.top_paths.truncate(5);
                if let (Some(a), Some(b)) = (&mut g.cache, &f.cache) {
                    a.saved_calls += b.saved_calls;
                    a.stale_answers += b.stale_answers;
                    a.stale_times += b.stale_times;
                    a.safe = a.stale_answers == 0;
                }
                for c in f.callsites {
                    match g.callsites.iter_mut().find(|x| x.label() == c.label()) {
                        Some(x) => {
                            x.redundant_calls += c.redundant_calls;
                            x.wasted_ns += c.wasted_ns;
                        }
                        None => g.callsites.push(c),
                    }
                }
                let total = g.redundant_calls.max(1) as f64;
                for c in &mut g.callsites {
                    c.share = (c.redundant_calls as f64 / total).min(1.0);
                }
                g.callsites
                    .sort_by_key(|c| std::cmp::Reverse(c.redundant_calls));
                g.callsites.truncate(5);
                g.share = cx.share(g.wasted_ns);
                g.severity = crate::Severity::grade(g.share, g.redundant_calls);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::testkit::TraceBuilder;
    use crate::Config;

    #[test]
    fn a_findings_grade_is_bounded_by_its_share_of_the_run() {
        // 20 stats of 1 ms: 19 ms redundant, 95% of the traced time. Alone that is high;
        // in a run that then computes for 10 s it is 0.19% of the run (medium), for 100 s
        // 0.019% (low). The run lasts to the recording's end, not to the last file call.
        for (then, grade) in [
            (0, crate::Severity::High),
            (10_000_000_000, crate::Severity::Medium),
            (100_000_000_000, crate::Severity::Low),
        ] {
            let mut b = TraceBuilder::new();
            let st = b.st(crate::testkit::file(7, 10, 1));
            for _ in 0..20 {
                b.call(dejavu_trace::Sys::Newfstatat, |c, b| {
                    c.path = Some(b.s("/srv/app/config.json"));
                    c.stat = Some(st);
                    c.dur = 1_000_000;
                });
                b.wait(1_000_000);
            }
            b.wait(then);
            let a = b.analyze_with(&Config::default());
            let f = a
                .findings
                .iter()
                .find(|f| f.detector == "repeated-lookup")
                .expect("finding");
            assert!(f.share > 0.9, "{}", f.share);
            assert_eq!(f.severity, grade, "{then}");
            let run = 20_000_000 + then;
            assert!((run..run + 1_000_000).contains(&a.run_ns), "{}", a.run_ns);
        }
    }

    /// The keys of a trace (started in project `dir`, or attached) that rereads a file
    /// of the project from the project's code and one from a dependency's, and stats a
    /// missing file from a place without a stack.
    fn keys_of(mut b: TraceBuilder, dir: &str) -> Vec<String> {
        use crate::testkit::file;
        use dejavu_trace::FrameKind::Python;
        b.exec("/usr/bin/python3", &["python3", &format!("{dir}/app.py")]);
        b.ready();
        let own = b.stack(&[(Python, "load", &format!("{dir}/lib/config.py"), 7)]);
        let dep = b.stack(&[(
            Python,
            "Loader.read",
            &format!("{dir}/.venv/lib/python3.11/site-packages/yaml/loader.py"),
            40,
        )]);
        for (stack, path) in [
            (own, format!("{dir}/conf/app.json")),
            (dep, format!("{dir}/conf/app.yaml")),
        ] {
            for _ in 0..5 {
                b.stack = Some(stack);
                b.open(&path, 0, 3, Some(file(9, 10, 1)));
                b.read(3, &path, 4096, 10);
                b.read(3, &path, 4096, 0);
                b.close(3, &path);
            }
        }
        b.stack = None;
        for _ in 0..5 {
            b.stat(&format!("{dir}/conf/local.json"), Err(2));
        }
        let a = b.analyze_with(&Config {
            min_calls: 1,
            ..Config::default()
        });
        let mut keys: Vec<String> = a.findings.iter().map(|f| f.key.clone()).collect();
        keys.sort();
        keys
    }

    #[test]
    fn a_findings_key_names_its_files_the_same_in_any_checkout() {
        let here = keys_of(TraceBuilder::in_dir("/home/a/proj"), "/home/a/proj");
        assert_eq!(
            here,
            [
                "app.py|negative-probe|own|path:conf/local.json",
                "app.py|reread-unchanged|dependency|Loader.read@site-packages/yaml/loader.py",
                "app.py|reread-unchanged|own|load@lib/config.py",
            ]
        );
        // In another checkout, with a trailing slash: the same keys.
        let there = keys_of(TraceBuilder::in_dir("/builds/ci/proj/"), "/builds/ci/proj");
        assert_eq!(here, there);
        // Where the recording did not start the program, the project's files keep their
        // paths (a package folder's are still named from it).
        let attached = keys_of(TraceBuilder::attached(), "/home/a/proj");
        assert_eq!(
            attached,
            [
                "app.py|negative-probe|own|path:/home/a/proj/conf/local.json",
                "app.py|reread-unchanged|dependency|Loader.read@site-packages/yaml/loader.py",
                "app.py|reread-unchanged|own|load@/home/a/proj/lib/config.py",
            ]
        );
    }

    #[test]
    fn calls_on_a_descriptor_nobody_opened_that_name_no_path_are_not_file_calls() {
        // libuv's wake-ups: 8 bytes written to and read from an eventfd that an untraced
        // call made, around each file call.
        let mut b = TraceBuilder::new();
        b.stat("/w/a", Ok(crate::testkit::file(1, 1, 1)));
        for _ in 0..10 {
            b.call(dejavu_trace::Sys::Write, |c, _| {
                c.fd = Some(16);
                c.count = 8;
                c.ret = 8;
            });
        }
        b.write(1, "pipe:[7]", "x\n", true);
        let a = b.analyze_with(&Config::default());
        assert_eq!((a.syscalls, a.syscall_ns), (2, 1000));
    }

    #[test]
    fn a_call_two_detectors_flag_counts_once_in_the_totals() {
        let mut b = TraceBuilder::new();
        for _ in 0..20 {
            b.call(dejavu_trace::Sys::Write, |c, b| {
                c.fd = Some(1);
                c.path = Some(b.s("pipe:[7]"));
                c.ev = dejavu_trace::ev::PATH_FROM_FD;
                c.count = 21;
                c.ret = 21;
                c.payload = Some(b.s("same line here again\n"));
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
        // times, all of stdout.
        assert_eq!(by("small-writes"), 19);
        assert_eq!(by("repeated-output"), 19);
        assert_eq!(a.redundant_calls, 19, "each write counted once");
        assert_eq!(a.redundant_ns, 19 * 500);
        assert!(a.redundant_calls <= a.syscalls);
        // One row per call: the small writes are an aspect of the repeated line.
        let out = a.findings.iter().find(|f| f.detector == "repeated-output");
        let small = a.findings.iter().find(|f| f.detector == "small-writes");
        let (out, small) = (out.unwrap(), small.unwrap());
        assert_eq!(small.shown_in.as_deref(), Some(out.key.as_str()));
        assert_eq!(out.shown_in, None);
        assert_eq!(out.also.len(), 1);
        assert_eq!(out.also[0].detector, "small-writes");
        assert_eq!(out.also[0].shared_calls, 19);
    }

    #[test]
    fn findings_on_different_calls_stay_apart() {
        let mut b = TraceBuilder::new();
        // Twenty tiny distinct writes (small-writes) and a line repeated on stderr
        // (repeated-output): different calls, two rows.
        for i in 0..20 {
            b.write(1, "pipe:[7]", &format!("{}\n", "x".repeat(i % 7 + 1)), true);
        }
        for _ in 0..20 {
            b.write(2, "pipe:[8]", "retrying the request now\n", true);
        }
        let a = b.analyze_with(&Config {
            min_calls: 1,
            ..Config::default()
        });
        assert!(a.findings.iter().any(|f| f.detector == "small-writes"));
        assert!(a.findings.iter().any(|f| f.detector == "repeated-output"));
        assert!(
            a.findings
                .iter()
                .all(|f| f.shown_in.is_none() && f.also.is_empty()),
            "{:?}",
            a.findings
        );
    }
}
