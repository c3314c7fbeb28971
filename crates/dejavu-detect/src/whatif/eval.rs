//! The what-if evaluator: one pass over a trace, on the replay state the detectors use,
//! plays every policy at once and counts what each would have removed, the stale answers
//! it would have served (with what made them stale), and the risks of kept-open handles
//! and ensure-once flags.

use super::policy::{Flush, Invalidate, Kind, Policy};
use super::{AtRisk, Cause, Moment, Outcome, Point, RiskKeepOpen, Row, Stale, Verdict, Writer};
use crate::detectors::lookup::{is_negative, is_plumbing, question, Question};
use crate::detectors::negative_probe::{ask, Ask};
use crate::engine::{Marks, SiteMemo};
use crate::program::Programs;
use crate::{Config, Cx};
use dejavu_replay::{FdKind, PathKey, Replay, View};
use dejavu_trace::{
    ev, names::errno_label, stat_known, FileStat, Record, StackId, StatId, Sys, Syscall,
    TraceError, TraceReader,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Read;

mod checks;
mod content;
mod ensure_dir;
mod execs;
mod keep_open;
mod lines;
mod sizes;
mod writes;

use checks::{skip_checks, Checks};
use content::{content_step, Content};
use ensure_dir::{ensure_dir, EnsureDir};
use execs::{exec_once, ExecOnce};
use keep_open::{keep_open, KeepOpen};
use lines::{log_lines, LogLines};
use sizes::track_size;
use writes::{batch_syncs, batch_writes, skip_unread, Batches, Buffers, Risk};

/// Stale answers kept as examples per policy.
const EXAMPLES: usize = 5;
/// Moments (a directory gone, a rename missed) kept per policy.
const MOMENTS: usize = 10;

/// Every policy's outcome over one trace.
#[derive(Debug)]
pub struct Evaluation {
    /// One per policy, in the order of the policies given.
    pub outcomes: Vec<Outcome>,
    /// Syscall records in the trace.
    pub syscalls: u64,
    /// Their recorded time, ns.
    pub syscall_ns: u64,
    /// Events the recorder lost (when not 0, every count is a lower bound).
    pub lost_events: u64,
    /// The backend that recorded the trace (what its durations measure).
    pub backend: String,
    /// Set when the trace was cut off: what was read, for a warning.
    pub truncated: Option<String>,
}

const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_ACCMODE: u64 = 3;

/// A change of a path someone made, as the replay saw it.
#[derive(Clone, Copy, Debug)]
struct Change {
    seq: u64,
    ts: u64,
    pid: u32,
    image: u32,
    sys: Sys,
    stack: Option<StackId>,
    /// The path the call named (a change of a directory's entry is also recorded as a
    /// change of the directory).
    path: PathKey,
}

/// The last change of each path, by anyone; and apart, the last rename of each path (a
/// renamed directory changes every path under it).
#[derive(Default)]
struct Changes {
    last: FxHashMap<PathKey, Change>,
    trees: FxHashMap<PathKey, Change>,
    /// Per path, the newest change before the last one by another process image than the
    /// last one's: with `last`, the newest change by an image other than any given one.
    before_other: FxHashMap<PathKey, Change>,
}

impl Changes {
    fn get(&self, p: &PathKey) -> Option<&Change> {
        self.last.get(p)
    }

    fn insert(&mut self, p: PathKey, c: Change) {
        if let Some(prev) = self.last.insert(p, c) {
            if prev.image != c.image {
                self.before_other.insert(p, prev);
            }
        }
    }

    /// The newest change of `p` by another process image than `image`.
    fn newest_other(&self, p: PathKey, image: u32) -> Option<Change> {
        let last = self.last.get(&p)?;
        if last.image != image {
            return Some(*last);
        }
        self.before_other
            .get(&p)
            .filter(|c| c.image != image)
            .copied()
    }
}

/// The changes each process image made itself (what an in-process cache can see): per
/// path, how many and the last; and apart, its renames, which change every path under
/// the renamed directory.
#[derive(Default)]
struct Own {
    paths: FxHashMap<(u32, PathKey), (u64, Change)>,
    trees: FxHashMap<(u32, PathKey), (u64, Change)>,
}

impl Own {
    fn path(&mut self, image: u32, path: PathKey, c: Change) {
        let e = self.paths.entry((image, path)).or_insert((0, c));
        e.0 += 1;
        e.1 = c;
    }

    fn tree(&mut self, image: u32, path: PathKey, c: Change) {
        let e = self.trees.entry((image, path)).or_insert((0, c));
        e.0 += 1;
        e.1 = c;
    }

    /// The image's changes of `path` itself.
    fn of(&self, image: u32, path: PathKey) -> u64 {
        self.paths.get(&(image, path)).map_or(0, |e| e.0)
    }

    /// The image's renames of the directories above `path`.
    fn above(&self, image: u32, path: PathKey, replay: &Replay) -> u64 {
        if self.trees.is_empty() {
            return 0;
        }
        let mut n = 0;
        let mut k = replay.paths.parent(path);
        while let Some(a) = k {
            n += self.trees.get(&(image, a)).map_or(0, |e| e.0);
            k = replay.paths.parent(a);
        }
        n
    }
}

/// Counts of one policy, filled during the pass.
#[derive(Default)]
struct Tally {
    /// (governed, removed) per syscall id.
    by_sys: BTreeMap<u16, (u64, u64)>,
    /// (governed, removed) per program.
    by_program: BTreeMap<String, (u64, u64)>,
    /// (governed, removed) per call site label.
    by_site: BTreeMap<String, (u64, u64)>,
    governed: u64,
    removed: u64,
    removed_ns: u64,
    stale: u64,
    examples: Vec<Stale>,
    points: BTreeMap<String, u64>,
    moments: Vec<Moment>,
    moments_total: u64,
    /// A moment a kept handle or a flag was wrong about: makes the policy unsafe.
    wrong_moments: u64,
    /// Whether the policy covers a path, per process image and path.
    scope: FxHashMap<(u32, PathKey), bool>,
}

/// Per-policy state.
enum State {
    /// Lookups' answers, and files' contents (`read`).
    Cache(FxHashMap<(u32, PathKey, Question), Entry>, Box<Content>),
    /// Keyed by the call whose failure repeats, as negative-probe asks: a lookup, or a
    /// change of one path (unlink, rmdir, mkdir, chmod ...).
    Negative(FxHashMap<(u32, PathKey, Ask), Entry>),
    KeepOpen(KeepOpen),
    EnsureDir(EnsureDir),
    LogOnce(FxHashSet<(u32, u64, u64)>),
    SkipUnread(Risk),
    BatchSyncs(Batches, Risk),
    BatchWrites(Buffers, Risk),
    SkipChecks(Checks),
    TrackSize(Box<crate::detectors::self_inflicted_lookup::Sizes>),
    LogLines(Box<LogLines>),
    ExecOnce(Box<ExecOnce>),
}

#[derive(Clone, Copy)]
struct Entry {
    answer: u64,
    ret: i64,
    stat: Option<StatId>,
    snap: u64,
    filled_ts: u64,
    filled_stack: Option<dejavu_trace::StackId>,
    filled_seq: u64,
}

/// Replays `reader` under every policy in one pass.
pub fn evaluate<R: Read>(
    reader: &mut TraceReader<R>,
    policies: &[Policy],
    mut progress: impl FnMut(u64),
) -> Result<Evaluation, TraceError> {
    let cfg = Config::default();
    let mut replay = Replay::new(reader.meta());
    let marks = RefCell::new(Marks::default());
    let programs = RefCell::new(Programs::default());
    let site_memo = RefCell::new(SiteMemo::default());
    let mut states: Vec<State> = policies.iter().map(new_state).collect();
    let mut tallies: Vec<Tally> = policies.iter().map(|_| Tally::default()).collect();
    let mut sys_total: FxHashMap<u16, u64> = FxHashMap::default();
    let mut prog_total: FxHashMap<u32, u64> = FxHashMap::default();
    // The last change of each path, by anyone; and the changes each image made itself.
    let mut changes = Changes::default();
    let mut own = Own::default();
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
                *sys_total.entry(s.sys as u16).or_default() += 1;
                *prog_total.entry(v.image).or_default() += 1;
                let cx = Cx {
                    replay: &replay,
                    strings,
                    config: &cfg,
                    stats: &stat_of,
                    marks: &marks,
                    stacks: &stack_of,
                    programs: &programs,
                    site_memo: &site_memo,
                    coverage: None,
                };
                let mut call = Call {
                    s: &s,
                    v: &v,
                    cx: &cx,
                    program: None,
                    site: None,
                };
                for (i, p) in policies.iter().enumerate() {
                    step(
                        p,
                        &mut states[i],
                        &mut tallies[i],
                        &mut call,
                        &changes,
                        &own,
                    );
                }
                let muts = mutations(&s, &v);
                for (path, entry) in muts {
                    let c = Change {
                        seq: v.seq,
                        ts: s.ts,
                        pid: s.pid,
                        image: v.image,
                        sys: s.sys,
                        stack: s.stack,
                        path,
                    };
                    for (st, t) in states.iter_mut().zip(tallies.iter_mut()) {
                        on_change(st, t, path, c, &cx);
                    }
                    changes.insert(path, c);
                    own.path(v.image, path, c);
                    if entry {
                        if let Some(parent) = replay.paths.parent(path) {
                            changes.insert(parent, c);
                            own.path(v.image, parent, c);
                        }
                    }
                    if matches!(s.sys, Sys::Rename | Sys::Renameat | Sys::Renameat2) {
                        // A renamed directory moves every path under it, under either name.
                        changes.trees.insert(path, c);
                        own.tree(v.image, path, c);
                    }
                }
                replay.apply(&s, &v, strings, &stat_of);
            }
            other => {
                replay.apply_record(&other, strings);
                // A new program (or a gone process) has no reads under way.
                let gone = match other {
                    Record::Exec(e) => Some(e.pid),
                    Record::Exit(e) if e.pid == e.tid => Some(e.pid),
                    _ => None,
                };
                if let Some(pid) = gone {
                    for st in &mut states {
                        if let State::Cache(_, content) = st {
                            content.cycles.retain(|k, _| k.0 != pid);
                        }
                    }
                }
                for st in &mut states {
                    if let State::TrackSize(sz) = st {
                        sz.on_record(&other);
                    }
                }
                if let Record::Exec(e) = other {
                    let stat_of = |id: StatId| reader.stat(id);
                    let stack_of = |id: StackId| reader.stack(id).to_vec();
                    let cx = Cx {
                        replay: &replay,
                        strings,
                        config: &cfg,
                        stats: &stat_of,
                        marks: &marks,
                        stacks: &stack_of,
                        programs: &programs,
                        site_memo: &site_memo,
                        coverage: None,
                    };
                    for (i, st) in states.iter_mut().enumerate() {
                        if let (State::ExecOnce(x), Kind::ExecOnce { cmds, probes }) =
                            (st, &policies[i].kind)
                        {
                            let cmd = (strings.get(e.exe), strings.get(e.argv));
                            x.exec(cmds, probes, &mut tallies[i], e.pid, cmd, &cx);
                        }
                    }
                }
                if let Record::Exit(e) = other {
                    for st in &mut states {
                        match st {
                            State::SkipChecks(k) => k.exit(e.tid),
                            State::LogLines(l) if e.pid == e.tid => l.splitter.exit(e.pid),
                            State::ExecOnce(x) if e.pid == e.tid => x.exit(e.pid),
                            _ => {}
                        }
                    }
                    if e.tid == e.pid {
                        for st in &mut states {
                            if let State::KeepOpen(k) = st {
                                let killed =
                                    matches!(e.status, dejavu_trace::ExitStatus::Signal { .. });
                                k.exit(e.pid, killed);
                            }
                        }
                    }
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
        config: &cfg,
        stats: &stat_of,
        marks: &marks,
        stacks: &stack_of,
        programs: &programs,
        site_memo: &site_memo,
        coverage: None,
    };
    let mut sys_names: FxHashMap<u16, u64> = FxHashMap::default();
    for (k, v) in &sys_total {
        sys_names.insert(*k, *v);
    }
    let mut prog_calls: BTreeMap<String, u64> = BTreeMap::new();
    for (&image, &c) in &prog_total {
        *prog_calls.entry(cx.program_name(image).0).or_default() += c;
    }
    // The processes' exits flush the buffers still holding a run.
    for (st, t) in states.iter_mut().zip(tallies.iter_mut()) {
        if let State::BatchWrites(b, _) = st {
            writes::end_all(b, t);
        }
    }
    let outcomes = policies
        .iter()
        .zip(states)
        .zip(tallies)
        .map(|((p, st), t)| outcome(p, st, t, &sys_names, &prog_calls, &cx))
        .collect();
    Ok(Evaluation {
        backend: reader.meta().backend.clone(),
        truncated: reader.truncation().map(|t| t.warning()),
        outcomes,
        syscalls: replay.syscalls,
        syscall_ns: replay.syscall_ns,
        lost_events: reader
            .lost_events()
            .max(reader.end().map_or(0, |e| e.lost_events)),
    })
}

fn new_state(p: &Policy) -> State {
    match p.kind {
        Kind::Cache { .. } => State::Cache(FxHashMap::default(), Box::default()),
        Kind::NegativeCache { .. } => State::Negative(FxHashMap::default()),
        Kind::KeepOpen { .. } => State::KeepOpen(KeepOpen::default()),
        Kind::EnsureDirOnce => State::EnsureDir(EnsureDir::default()),
        Kind::LogOnce => State::LogOnce(FxHashSet::default()),
        Kind::SkipUnread => State::SkipUnread(Risk::default()),
        Kind::BatchSyncs { .. } => State::BatchSyncs(Batches::default(), Risk::default()),
        Kind::BatchWrites { .. } => State::BatchWrites(Buffers::default(), Risk::default()),
        Kind::SkipChecks => State::SkipChecks(Checks::default()),
        Kind::TrackSize => State::TrackSize(Box::default()),
        Kind::LogLines { .. } => State::LogLines(Box::default()),
        Kind::ExecOnce { .. } => State::ExecOnce(Box::default()),
    }
}

/// One call with what is worked out about it on demand (its program and call site).
struct Call<'a, 'c> {
    s: &'a Syscall,
    v: &'a View,
    cx: &'a Cx<'c>,
    program: Option<String>,
    site: Option<String>,
}

impl Call<'_, '_> {
    fn program(&mut self) -> String {
        if self.program.is_none() {
            self.program = Some(self.cx.program_name(self.v.image).0);
        }
        self.program.clone().unwrap_or_default()
    }

    fn site(&mut self) -> String {
        if self.site.is_none() {
            self.site = Some(site_label(self.cx, self.s.stack, self.v.image, self.s.sys));
        }
        self.site.clone().unwrap_or_default()
    }

    fn path(&self) -> Option<PathKey> {
        self.v.path
    }

    /// Whether the policy covers this call's path (the glob match remembered per path in
    /// `memo`: a path is asked about again and again) and program.
    fn in_scope(&mut self, p: &Policy, memo: &mut FxHashMap<(u32, PathKey), bool>) -> bool {
        let Some(path) = self.v.path else {
            return false;
        };
        let (paths, image) = (&self.cx.replay.paths, self.v.image);
        if !*memo
            .entry((image, path))
            .or_insert_with(|| p.scope.covers(image, paths.bytes(path)))
        {
            return false;
        }
        p.scope.programs.is_empty() || {
            let prog = self.program();
            p.scope.covers_program(&prog)
        }
    }
}

/// An invalidation point: `write at save@/app/serve.py:42`, or without a stack the call
/// and its path.
fn change_label(cx: &Cx<'_>, ch: &Change) -> String {
    match ch.stack {
        Some(_) => format!(
            "{} at {}",
            ch.sys.name(),
            site_label(cx, ch.stack, ch.image, ch.sys)
        ),
        None => format!(
            "{} of {} (no stack recorded)",
            ch.sys.name(),
            cx.path(ch.path)
        ),
    }
}

/// `function file:line` of the innermost frame of the program's own code, else the call's
/// name: how whatif names where a call came from.
fn site_label(cx: &Cx<'_>, stack: Option<StackId>, image: u32, sys: Sys) -> String {
    let Some(st) = stack else {
        return format!("({} without a stack)", sys.name());
    };
    let info = cx.site(st, image);
    match info.key {
        Some(k) => {
            let mut l = cx.site_label(&k);
            if k.line == 0 && info.line != 0 {
                l.push_str(&format!(":{}", info.line));
            }
            l
        }
        None => format!("({} from an unnamed site)", sys.name()),
    }
}

impl Tally {
    fn governed(&mut self, c: &mut Call<'_, '_>) {
        self.count(c, false, c.s.sys, c.s.dur);
    }

    fn removed(&mut self, c: &mut Call<'_, '_>) {
        self.count(c, true, c.s.sys, c.s.dur);
    }

    fn count(&mut self, c: &mut Call<'_, '_>, removed: bool, sys: Sys, dur: u64) {
        let (program, site) = (c.program(), c.site());
        self.count_at(&program, &site, removed, sys, dur);
    }

    fn count_at(&mut self, program: &str, site: &str, removed: bool, sys: Sys, dur: u64) {
        let r = u64::from(removed);
        let e = self.by_sys.entry(sys as u16).or_default();
        e.0 += 1;
        e.1 += r;
        let e = self.by_program.entry(program.to_string()).or_default();
        e.0 += 1;
        e.1 += r;
        let e = self.by_site.entry(site.to_string()).or_default();
        e.0 += 1;
        e.1 += r;
        self.governed += 1;
        self.removed += r;
        if removed {
            self.removed_ns += dur;
        }
    }

    /// A counted change that turns an earlier governed call into a removed one (a close
    /// that a kept handle makes unnecessary once the file is opened again).
    fn promote(&mut self, program: &str, site: &str, sys: Sys, dur: u64) {
        for e in [
            self.by_sys.entry(sys as u16).or_default(),
            self.by_program.entry(program.to_string()).or_default(),
            self.by_site.entry(site.to_string()).or_default(),
        ] {
            e.1 += 1;
        }
        self.removed += 1;
        self.removed_ns += dur;
    }

    fn stale(&mut self, st: Stale) {
        self.stale += 1;
        if self.examples.len() < EXAMPLES {
            self.examples.push(st);
        }
    }

    fn moment(&mut self, m: Moment, wrong: bool) {
        self.moments_total += 1;
        self.wrong_moments += u64::from(wrong);
        if self.moments.len() < MOMENTS {
            self.moments.push(m);
        }
    }

    fn point(&mut self, site: String) {
        *self.points.entry(site).or_default() += 1;
    }
}

/// The snapshot a cache entry keeps of the changes it is invalidated on.
fn snapshot(inv: Invalidate, image: u32, path: PathKey, replay: &Replay, own: &Own) -> u64 {
    let get = |p: PathKey| own.of(image, p);
    match inv {
        Invalidate::Never => 0,
        Invalidate::OnWrite => get(path) + own.above(image, path, replay),
        Invalidate::OnDirChange => {
            get(path) + replay.paths.parent(path).map_or(0, get) + own.above(image, path, replay)
        }
    }
}

/// The newest own change of the path (or, for `dir`, of its directory too) after `seq`.
fn own_change_after(
    image: u32,
    path: PathKey,
    dir: bool,
    seq: u64,
    replay: &Replay,
    own: &Own,
) -> Option<Change> {
    let mut best: Option<Change> = None;
    let mut consider = |m: &FxHashMap<(u32, PathKey), (u64, Change)>, p: PathKey| {
        if let Some(&(_, c)) = m.get(&(image, p)) {
            if c.seq > seq && best.is_none_or(|b| c.seq > b.seq) {
                best = Some(c);
            }
        }
    };
    consider(&own.paths, path);
    if dir {
        if let Some(p) = replay.paths.parent(path) {
            consider(&own.paths, p);
        }
    }
    if !own.trees.is_empty() {
        let mut k = replay.paths.parent(path);
        while let Some(a) = k {
            consider(&own.trees, a);
            k = replay.paths.parent(a);
        }
    }
    best
}

/// Why an answer served from memory was wrong: the newest change of the path (and of its
/// directory for answers about absence) since the entry was filled.
fn cause(
    cx: &Cx<'_>,
    image: u32,
    path: PathKey,
    dir: bool,
    since: u64,
    changes: &Changes,
) -> Cause {
    let mut best: Option<Change> = None;
    let mut consider = |p: PathKey| {
        if let Some(&c) = changes.get(&p) {
            if c.seq > since && best.is_none_or(|b| c.seq > b.seq) {
                best = Some(c);
            }
        }
    };
    consider(path);
    if dir {
        if let Some(p) = cx.replay.paths.parent(path) {
            consider(p);
        }
    }
    // A rename of a directory above it.
    if !changes.trees.is_empty() {
        let mut k = cx.replay.paths.parent(path);
        while let Some(a) = k {
            if let Some(&c) = changes.trees.get(&a) {
                if c.seq > since && best.is_none_or(|b| c.seq > b.seq) {
                    best = Some(c);
                }
            }
            k = cx.replay.paths.parent(a);
        }
    }
    match best {
        Some(c) if c.image == image => Cause {
            kind: "own_change",
            pid: Some(c.pid),
            command: None,
            call: Some(c.sys.name()),
            site: Some(site_label(cx, c.stack, c.image, c.sys)),
            ts: Some(c.ts),
            text: format!(
                "the process itself changed {} ({}) and the policy did not drop the entry there",
                what(cx, path, &c),
                change_label(cx, &c)
            ),
        },
        Some(c) => {
            let command = cx.replay.image_command(c.image, cx.strings);
            Cause {
                kind: "other_process",
                pid: Some(c.pid),
                command: Some(command.clone()),
                call: Some(c.sys.name()),
                site: None,
                ts: Some(c.ts),
                text: format!(
                    "another traced process changed {}: pid {} ({command}), {}",
                    what(cx, path, &c),
                    c.pid,
                    c.sys.name()
                ),
            }
        }
        None => Cause {
            kind: "untraced",
            pid: None,
            command: None,
            call: None,
            site: None,
            ts: None,
            text:
                "the answer changed with no change dejavu saw (a program outside the recording): \
                   the recording cannot rule out more such changes"
                    .to_string(),
        },
    }
}

/// What a change touched, seen from `path`: `it`, or `its directory (create of X)`.
fn what(cx: &Cx<'_>, path: PathKey, c: &Change) -> String {
    if c.path == path {
        "it".to_string()
    } else if cx.replay.paths.parent(path) == Some(c.path) {
        format!("its directory ({} of {})", c.sys.name(), cx.path(c.path))
    } else {
        format!(
            "a directory above it ({} of {})",
            c.sys.name(),
            cx.path(c.path)
        )
    }
}

/// An answer for people: `ENOENT`, `size 14, inode 5`, `0`; with `other`, the answer it
/// is compared with, the mtime too when size and inode do not tell them apart.
fn describe(cx: &Cx<'_>, ret: i64, stat: Option<StatId>, other: Option<StatId>) -> String {
    if ret < 0 {
        return errno_label((-ret) as i32).into_owned();
    }
    match stat.map(|id| cx.stat(id)) {
        Some(st) if st.known & stat_known::SIZE != 0 => {
            let o = other.map(|id| cx.stat(id));
            if o.is_some_and(|o| o.size == st.size && o.ino == st.ino) {
                format!("size {}, inode {}, mtime {}", st.size, st.ino, st.mtime_ns)
            } else {
                format!("size {}, inode {}", st.size, st.ino)
            }
        }
        _ => format!("{ret}"),
    }
}

fn step(
    p: &Policy,
    st: &mut State,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
    changes: &Changes,
    own: &Own,
) {
    let s = c.s;
    if let (Kind::TrackSize, State::TrackSize(sz)) = (&p.kind, &mut *st) {
        // The size tracking follows unfinished calls too (it forgets what they touched).
        return track_size(p, sz, t, c, changes);
    }
    if s.ev & ev::UNFINISHED != 0 {
        return;
    }
    match (&p.kind, st) {
        (
            Kind::Cache {
                calls,
                invalidate,
                ttl,
            },
            State::Cache(map, content),
        ) => {
            if calls.read {
                content_step(p, content, t, c, (*invalidate, *ttl), changes, own);
            }
            content.open_dirs.follow(s, c.v, c.cx);
            let Some(q) = question(s) else { return };
            let asked = match q {
                Question::Stat { .. } => calls.stat,
                Question::Access { .. } => calls.access,
                Question::Readlink => calls.readlink,
                Question::Open => false,
            };
            if !asked || !c.in_scope(p, &mut t.scope) {
                return;
            }
            let path = c.path().unwrap_or(PathKey(0));
            let opened = content.open_dirs.opened_since(s.pid, path);
            lookup(
                c,
                t,
                map,
                (path, q),
                (*invalidate, *ttl, opened),
                false,
                changes,
                own,
            );
        }
        (Kind::NegativeCache { invalidate, ttl }, State::Negative(map)) => {
            let Some(q) = ask(s) else { return };
            if !c.in_scope(p, &mut t.scope) {
                return;
            }
            let path = c.path().unwrap_or(PathKey(0));
            lookup(
                c,
                t,
                map,
                (path, q),
                (*invalidate, *ttl, None),
                true,
                changes,
                own,
            );
        }
        (Kind::KeepOpen { flush }, State::KeepOpen(k)) => keep_open(p, *flush, k, t, c, changes),
        (Kind::EnsureDirOnce, State::EnsureDir(e)) => ensure_dir(p, e, t, c, changes),
        (Kind::SkipUnread, State::SkipUnread(r)) => skip_unread(p, r, t, c),
        (Kind::BatchSyncs { bytes }, State::BatchSyncs(b, r)) => batch_syncs(p, *bytes, b, r, t, c),
        (Kind::SkipChecks, State::SkipChecks(k)) => skip_checks(p, k, t, c),
        (Kind::LogLines { lines }, State::LogLines(st)) => log_lines(p, lines, st, t, c),
        (Kind::ExecOnce { .. }, State::ExecOnce(x)) => exec_once(x, t, c),
        (Kind::BatchWrites { max_bytes, gap_ns }, State::BatchWrites(b, r)) => {
            batch_writes(p, (*max_bytes, *gap_ns), b, r, t, c)
        }
        (Kind::LogOnce, State::LogOnce(seen)) => {
            if !crate::group::is_write(s.sys) || s.ret <= 0 {
                return;
            }
            // With globs, the outputs they name (a finding's log file); without, the
            // standard streams, terminals and append-mode files: where log lines go.
            let out = if p.scope.globs.is_empty() {
                match c.v.fd {
                    Some(f) => {
                        matches!(s.fd, Some(1) | Some(2))
                            || matches!(f.kind, FdKind::Tty)
                            || (f.kind == FdKind::File && f.append)
                    }
                    None => matches!(s.fd, Some(1) | Some(2)),
                }
            } else {
                c.v.path
                    .is_some_and(|k| p.scope.matches(c.cx.replay.paths.bytes(k)))
            };
            if !out {
                return;
            }
            if !p.scope.programs.is_empty() {
                let prog = c.program();
                if !p.scope.covers_program(&prog) {
                    return;
                }
            }
            let Some(fp) = s.fingerprint else { return };
            let dest = c.v.path.map_or(u64::from(s.fd.unwrap_or(-1) as u32), |k| {
                u64::from(k.0) | 1 << 40
            });
            if seen.insert((c.v.image, dest, fp)) {
                t.governed(c);
            } else {
                t.removed(c);
            }
        }
        _ => {}
    }
}

#[allow(clippy::too_many_arguments)]
fn lookup<Q: Copy + Eq + std::hash::Hash>(
    c: &mut Call<'_, '_>,
    t: &mut Tally,
    map: &mut FxHashMap<(u32, PathKey, Q), Entry>,
    (path, q): (PathKey, Q),
    (inv, ttl, opened): (Invalidate, Option<u64>, Option<u64>),
    negative: bool,
    changes: &Changes,
    own: &Own,
) {
    let s = c.s;
    let image = c.v.image;
    let key = (image, path, q);
    let answer = crate::detectors::lookup::answer(s);
    let snap = snapshot(inv, image, path, c.cx.replay, own);
    // An entry the runtime filled (its start-up, before the agent's ready mark, or its
    // import system or module loader later) is not the program's to answer from: its
    // first lookup fills its own (as repeated-lookup counts it).
    let fresh = |e: &Entry| {
        e.snap == snap
            && ttl.is_none_or(|l| s.ts.saturating_sub(e.filled_ts) < l)
            && !c.cx.first_after_runtime(
                image,
                path,
                (e.filled_ts, e.filled_stack),
                (s.ts, s.stack),
            )
            // The process opened the directory since, and holds it open: the lookup checks
            // what the open reached (an automount), as repeated-lookup judges it.
            && opened.is_none_or(|at| at <= e.filled_ts)
    };
    match map.get(&key).copied() {
        Some(e) if fresh(&e) => {
            t.removed(c);
            use crate::detectors::lookup::{kept_answers, stats_agree};
            if e.answer != answer && e.ret == s.ret && stats_agree(c.cx, e.stat, s.stat) {
                // The same file's answer with fewer or more fields (a statx that asked for
                // some only: the JDK's leaves out the times): no change; the fuller one is
                // kept.
                if !kept_answers(c.cx, (e.answer, e.stat), (answer, s.stat)) {
                    if let Some(e) = map.get_mut(&key) {
                        (e.answer, e.stat) = (answer, s.stat);
                    }
                }
            } else if e.answer != answer {
                let cause = cause(c.cx, image, path, negative, e.filled_seq, changes);
                let st = Stale {
                    ts: s.ts,
                    pid: s.pid,
                    path: c.cx.path(path),
                    call: s.sys.name(),
                    site: c.site(),
                    served: describe(c.cx, e.ret, e.stat, s.stat),
                    actual: describe(c.cx, s.ret, s.stat, e.stat),
                    cause,
                };
                t.stale(st);
            }
        }
        prev => {
            t.governed(c);
            // An entry the policy dropped on the program's own change, whose answer did
            // change: an invalidation point the policy needs.
            if let Some(e) = prev {
                if e.snap != snap && e.answer != answer {
                    if let Some(ch) = own_change_after(
                        image,
                        path,
                        inv == Invalidate::OnDirChange,
                        e.filled_seq,
                        c.cx.replay,
                        own,
                    ) {
                        t.point(change_label(c.cx, &ch));
                    }
                }
            }
            if is_negative(s) == negative {
                map.insert(
                    key,
                    Entry {
                        answer,
                        ret: s.ret,
                        stat: s.stat,
                        snap,
                        filled_ts: s.ts,
                        filled_stack: s.stack,
                        filled_seq: c.v.seq,
                    },
                );
            } else {
                map.remove(&key);
            }
        }
    }
}

/// A change of `path` (made by call `c`): kept handles and ensure-once flags learn of it.
fn on_change(st: &mut State, t: &mut Tally, path: PathKey, c: Change, cx: &Cx<'_>) {
    let removal = matches!(
        c.sys,
        Sys::Rmdir | Sys::Unlink | Sys::Unlinkat | Sys::Rename | Sys::Renameat | Sys::Renameat2
    );
    if !removal {
        return;
    }
    match st {
        State::EnsureDir(e) => {
            let flagged: Vec<u32> = e.by_dir.get(&path).cloned().unwrap_or_default();
            for image in flagged {
                if image == c.image {
                    // The program removed it itself: the flag must be cleared there.
                    e.flags.remove(&(image, path));
                    if let Some(v) = e.by_dir.get_mut(&path) {
                        v.retain(|&i| i != image);
                    }
                    t.point(format!(
                        "clear the flag at {} ({})",
                        site_label(cx, c.stack, c.image, c.sys),
                        c.sys.name()
                    ));
                    continue;
                }
                let command = cx.replay.image_command(c.image, cx.strings);
                let holder = cx.replay.images.get(image as usize).map_or(0, |i| i.pid);
                t.moment(
                    Moment {
                        ts: c.ts,
                        pid: c.pid,
                        path: cx.path(path),
                        call: c.sys.name(),
                        text: format!(
                            "the directory disappeared ({} by pid {} ({command})) while pid {holder}'s flag \
                             said it exists",
                            c.sys.name(),
                            c.pid
                        ),
                    },
                    true,
                );
            }
        }
        State::KeepOpen(k) => {
            let held: Vec<(u32, u32)> = k.holders(path).to_vec();
            for (image, pid) in held {
                if image == c.image {
                    continue; // its own rename: the reopen that follows is the point
                }
                let command = cx.replay.image_command(c.image, cx.strings);
                t.moment(
                    Moment {
                        ts: c.ts,
                        pid: c.pid,
                        path: cx.path(path),
                        call: c.sys.name(),
                        text: format!(
                            "pid {} ({command}) {} the file while pid {pid} kept it open: the handle \
                             would miss it (writes go to the old file)",
                            c.pid,
                            if c.sys == Sys::Rmdir || c.sys == Sys::Unlink || c.sys == Sys::Unlinkat {
                                "removed"
                            } else {
                                "renamed"
                            }
                        ),
                    },
                    true,
                );
            }
        }
        _ => {}
    }
}

/// The paths `s` changed if it succeeded, each with whether an entry appeared or
/// disappeared (so its directory changed too).
fn mutations(s: &Syscall, v: &View) -> Vec<(PathKey, bool)> {
    use Sys::*;
    if s.ret < 0 || s.ev & ev::UNFINISHED != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    match s.sys {
        Open | Openat | Openat2 | Creat => {
            if let Some(p) = v.path {
                if s.flags & O_CREAT != 0 || s.sys == Creat {
                    out.push((p, true));
                } else if s.flags & O_TRUNC != 0 && s.flags & O_ACCMODE != 0 {
                    out.push((p, false));
                }
            }
        }
        Write | Pwrite64 | Writev | Pwritev | Pwritev2 | Sendfile | CopyFileRange | Splice
            if s.ret > 0 =>
        {
            if let (Some(p), Some(f)) = (v.path, v.fd) {
                if f.kind == FdKind::File {
                    out.push((p, false));
                }
            }
        }
        Truncate | Ftruncate | Chmod | Fchmod | Fchmodat | Fchmodat2 | Chown | Fchown | Lchown
        | Fchownat | Utimensat => {
            if let Some(p) = v.path {
                out.push((p, false));
            }
        }
        Mkdir | Mkdirat | Unlink | Rmdir | Unlinkat | Symlink | Symlinkat => {
            if let Some(p) = v.path {
                out.push((p, true));
            }
        }
        Rename | Renameat | Renameat2 => {
            out.extend(v.path.map(|p| (p, true)));
            out.extend(v.path2.map(|p| (p, true)));
        }
        Link | Linkat => {
            out.extend(v.path.map(|p| (p, false)));
            out.extend(v.path2.map(|p| (p, true)));
        }
        _ => {}
    }
    out
}

fn outcome(
    p: &Policy,
    st: State,
    mut t: Tally,
    sys_total: &FxHashMap<u16, u64>,
    prog_total: &BTreeMap<String, u64>,
    cx: &Cx<'_>,
) -> Outcome {
    let mut keep = None;
    if let State::KeepOpen(k) = &st {
        let mut writers = Vec::new();
        for (path, ws) in &k.writers {
            let holders: FxHashSet<u32> = k.holders(*path).iter().map(|h| h.1).collect();
            if ws.len() < 2 {
                continue;
            }
            // Two processes writing one kept file: each holds its own buffer, so their
            // writes reach the file in another order than recorded (seed 004's question).
            let lead = ws
                .keys()
                .map(|k| k.0)
                .find(|p| holders.contains(p))
                .unwrap_or(0);
            if let Some((&(pid, _), &(writes, bytes, first))) =
                ws.iter().find(|((p, _), _)| *p != lead)
            {
                let command = cx
                    .replay
                    .image_of(pid)
                    .map(|i| cx.replay.image_command(i, cx.strings))
                    .unwrap_or_default();
                t.moment(
                    Moment {
                        ts: first,
                        pid,
                        path: cx.path(*path),
                        call: "write",
                        text: format!(
                            "pid {pid} ({command}) wrote {} too ({writes} writes, {bytes} bytes) while pid {lead} \
                             kept it open: buffered writes would reach it in another order",
                            cx.path(*path)
                        ),
                    },
                    true,
                );
            }
            // Threads of one process sharing the kept handle need a lock around it.
            let mut by_pid: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for &(pid, tid) in ws.keys() {
                by_pid.entry(pid).or_default().push(tid);
            }
            for (pid, tids) in by_pid.iter().filter(|(_, t)| t.len() > 1) {
                let tids: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
                t.point(format!(
                    "a lock around the kept handle of {}: threads {} of pid {pid} write it",
                    cx.path(*path),
                    tids.join(", ")
                ));
            }
            for (&(pid, tid), &(writes, bytes, _)) in ws {
                let image = cx.replay.image_of(pid);
                writers.push(Writer {
                    path: cx.path(*path),
                    pid,
                    tid,
                    command: image
                        .map(|i| cx.replay.image_command(i, cx.strings))
                        .unwrap_or_default(),
                    writes,
                    bytes,
                    holder: holders.contains(&pid),
                });
            }
        }
        keep = Some(RiskKeepOpen {
            bytes_at_risk: k.bytes_at_risk,
            records_at_risk: k.records_at_risk,
            worst_ts: k.worst.map(|w| w.0),
            worst_path: k.worst.map(|w| cx.path(w.2)),
            writers,
            killed: k.killed.clone(),
            writes_before: k.merged_writes().0,
            writes_after: k.merged_writes().1,
        });
    }
    let (at_risk, hazards) = risks(&st, cx);
    let rows = |m: &BTreeMap<String, (u64, u64)>, total: &dyn Fn(&str) -> u64| {
        let mut v: Vec<Row> = m
            .iter()
            .map(|(k, &(_, removed))| {
                let before = total(k);
                Row {
                    name: k.clone(),
                    before,
                    after: before.saturating_sub(removed),
                }
            })
            .collect();
        v.sort_by(|a, b| {
            (b.before - b.after)
                .cmp(&(a.before - a.after))
                .then(a.name.cmp(&b.name))
        });
        v
    };
    let mut by_syscall: Vec<Row> = t
        .by_sys
        .iter()
        .map(|(&id, &(_, removed))| {
            let before = sys_total.get(&id).copied().unwrap_or(0);
            Row {
                name: Sys::from_id(id).map_or("?", |s| s.name()).to_string(),
                before,
                after: before.saturating_sub(removed),
            }
        })
        .collect();
    by_syscall.sort_by(|a, b| {
        (b.before - b.after)
            .cmp(&(a.before - a.after))
            .then(a.name.cmp(&b.name))
    });
    let by_program = rows(&t.by_program, &|k| prog_total.get(k).copied().unwrap_or(0));
    let mut by_callsite: Vec<Row> = t
        .by_site
        .iter()
        .map(|(k, &(g, r))| Row {
            name: k.clone(),
            before: g,
            after: g - r,
        })
        .collect();
    by_callsite.sort_by(|a, b| {
        (b.before - b.after)
            .cmp(&(a.before - a.after))
            .then(a.name.cmp(&b.name))
    });
    by_callsite.truncate(10);
    let points: Vec<Point> = t
        .points
        .iter()
        .map(|(k, &n)| Point {
            at: k.clone(),
            times: n,
        })
        .collect();
    let (verdict, text) = if t.stale > 0 || t.wrong_moments > 0 {
        let ex = t
            .examples
            .first()
            .map(|e| {
                format!(
                    "{} of {} at {} served {} where the call returned {}: {}",
                    e.call, e.path, e.site, e.served, e.actual, e.cause.text
                )
            })
            .or_else(|| t.moments.iter().find(|_| true).map(|m| m.text.clone()))
            .unwrap_or_default();
        (Verdict::Unsafe, format!("unsafe: {ex}"))
    } else if !points.is_empty() {
        let list: Vec<&str> = points.iter().map(|p| p.at.as_str()).collect();
        (
            Verdict::SafeWithInvalidation,
            format!(
                "safe with the listed invalidation points: {}",
                list.join("; ")
            ),
        )
    } else {
        (Verdict::Safe, "safe on this recording".to_string())
    };
    Outcome {
        policy: p.spelling(),
        kind: kind_name(&p.kind),
        finding: None,
        calls_before: t.governed,
        calls_after: t.governed - t.removed,
        removed_calls: t.removed,
        removed_ns: t.removed_ns,
        by_syscall,
        by_program,
        by_callsite,
        stale_answers: t.stale,
        stale_examples: t.examples,
        invalidation_points: points,
        moments: t.moments,
        moments_total: t.moments_total,
        keep_open: keep,
        lines: match &st {
            State::LogLines(l) => Some(super::Lines {
                before: l.before,
                after: l.before - l.removed,
                removed: l.removed,
            }),
            _ => None,
        },
        execs: match &st {
            State::ExecOnce(x) if x.execs.0 > 0 => Some(super::Execs {
                before: x.execs.0,
                after: x.execs.0 - x.execs.1,
                removed: x.execs.1,
            }),
            _ => None,
        },
        at_risk,
        hazards,
        verdict,
        verdict_text: text,
    }
}

/// What `--skip-unread` and `--batch-syncs` put at risk, and the hazards they leave to
/// the fix, as the detectors' hazards say them.
fn risks(st: &State, cx: &Cx<'_>) -> (Option<AtRisk>, Vec<String>) {
    let mut hazards = Vec::new();
    let at = |r: &Risk, text: String| AtRisk {
        bytes: r.bytes,
        records: r.records,
        worst_ts: r.worst.map(|w| w.0),
        worst_path: r.worst.map(|w| cx.path(w.1)),
        text,
    };
    match st {
        State::SkipUnread(r) if r.records > 0 => {
            if r.records > r.epipe {
                hazards.push(
                    "/dev/null may be a deliberate way to silence this output: make the producer \
                     quiet (log level, isatty(), a --quiet flag) rather than remove the redirection"
                        .to_string(),
                );
            }
            if r.epipe > 0 {
                hazards.push(format!(
                    "{} writes failed with EPIPE after the reader had gone: stop producing on the \
                     first one, but flush and close files and queues before exiting",
                    r.epipe
                ));
            }
            if r.std_streams > 0 {
                hazards.push(format!(
                    "{} of these writes went to stdout/stderr, which the parent pointed at /dev/null \
                     or a closed pipe: the fix may belong in how the parent starts this program",
                    r.std_streams
                ));
            }
            let text = "bytes not written at all: nobody read them in this recording, but a \
                        reader that needs them (a redirection changed, a reader that stays) \
                        would not get them"
                .to_string();
            (Some(at(r, text)), hazards)
        }
        State::BatchSyncs(_, r) if r.records > 0 || r.bytes > 0 => {
            hazards.push(
                "a program that promises durability per record (acknowledges each after its sync) \
                 must delay the acknowledgements to the batch's sync (group commit): dropping the \
                 syncs alone breaks the promise"
                    .to_string(),
            );
            let text = "the most bytes written and not yet synced at any moment under the fix, \
                        where the recording had synced them: what a crash (of the machine) then \
                        would lose"
                .to_string();
            (Some(at(r, text)), hazards)
        }
        State::BatchWrites(b, r) if r.records > 0 => {
            use writes::{K_APPEND, K_PIPE, K_SOCKET, K_TTY};
            if b.kinds & K_TTY != 0 {
                hazards.push(
                    "a terminal: interactive output needs line buffering (flush at each newline and \
                     before reading input), not a buffer that fills"
                        .to_string(),
                );
            }
            if b.kinds & K_PIPE != 0 {
                hazards.push(
                    "a pipe: its reader may wait for each line or record, so flush at record \
                     boundaries; writes above PIPE_BUF (4 KiB) are not atomic when several processes \
                     write to it"
                        .to_string(),
                );
            }
            if b.kinds & K_SOCKET != 0 {
                hazards.push(
                    "a socket: on a datagram or SEQPACKET socket every write is one message and must \
                     not be merged"
                        .to_string(),
                );
            }
            if b.kinds & K_APPEND != 0 {
                hazards.push(
                    "an O_APPEND file, maybe shared with other writers: keep each record in one write \
                     so records do not interleave"
                        .to_string(),
                );
            }
            hazards.push(
                "flush the buffer on exit, on fatal signals and on errors, or the tail of the output \
                 is lost"
                    .to_string(),
            );
            let text = "the most bytes held in a buffer at any moment that the recording had \
                        already written: what a crash then would lose"
                .to_string();
            (Some(at(r, text)), hazards)
        }
        State::ExecOnce(x) if x.execs.1 > 0 => {
            hazards.push(
                "reuse a run's result only while what it reads stays the same (a repository, the \
                 configuration, the clock): run it again when that changes"
                    .to_string(),
            );
            (None, hazards)
        }
        State::ExecOnce(_) => {
            hazards.push(
                "a path resolved once must be resolved again if PATH or the installed program \
                 changes"
                    .to_string(),
            );
            (None, hazards)
        }
        State::LogLines(l) if l.removed > 0 => {
            hazards.push(
                "if each occurrence carries detail someone needs (which request, which user), \
                 aggregate it (a counter per interval) or sample it rather than drop it"
                    .to_string(),
            );
            (None, hazards)
        }
        State::TrackSize(_) => {
            hazards.push(
                "the kept size holds only while this process is the only writer: if another \
                 process or handle may write the file, keep the lookup or coordinate (a lock, one \
                 writer); with several writing threads, keep it under the same lock as the writes"
                    .to_string(),
            );
            (None, hazards)
        }
        State::SkipChecks(k) if k.access + k.stat_open + k.probes > 0 => {
            hazards.push(if k.access + k.stat_open == 0 {
                "removing the probe also removes a race (the path can change between the two \
                 opens); handle the single open's errors (ENOENT, EACCES, ELOOP) where the probe's \
                 other failures were handled"
                    .to_string()
            } else {
                "removing the check also removes a time-of-check-to-time-of-use race; handle the \
                 act's ENOENT/EACCES where the check's false branch was"
                    .to_string()
            });
            if k.act_failed > 0 {
                hazards.push(format!(
                    "{} acts failed right after their check succeeded (the path changed between \
                     them): the act's error handling is what runs there now",
                    k.act_failed
                ));
            }
            if k.stat_open > 0 {
                hazards.push(format!(
                    "{} stats before an open: if their answer (size, mtime, type) is used, take it \
                     from fstat of the opened descriptor, which describes the file actually opened",
                    k.stat_open
                ));
            }
            if k.probes > 0 {
                hazards.push(format!(
                    "{} O_DIRECTORY probes: a probe with O_NOFOLLOW also refused a symbolic link, so \
                     the single open must keep O_NOFOLLOW, and tell a directory apart by fstat",
                    k.probes
                ));
            }
            if k.access > 0 {
                hazards.push(format!(
                    "{} access checks: access() uses the real uid, open the effective one; in a \
                     setuid program only the open's answer is authoritative",
                    k.access
                ));
            }
            (None, hazards)
        }
        _ => (None, hazards),
    }
}

fn kind_name(k: &Kind) -> &'static str {
    match k {
        Kind::Cache { .. } => "cache",
        Kind::NegativeCache { .. } => "negative-cache",
        Kind::KeepOpen { .. } => "keep-open",
        Kind::EnsureDirOnce => "ensure-dir-once",
        Kind::LogOnce => "log-once",
        Kind::SkipUnread => "skip-unread",
        Kind::BatchSyncs { .. } => "batch-syncs",
        Kind::BatchWrites { .. } => "batch-writes",
        Kind::SkipChecks => "skip-checks",
        Kind::TrackSize => "track-size",
        Kind::LogLines { .. } => "log-once",
        Kind::ExecOnce { .. } => "exec-once",
    }
}
