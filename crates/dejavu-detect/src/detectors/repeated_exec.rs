//! repeated-exec: the same program run again and again by one process (a process per
//! operation), and the PATH search (failed execve calls) repeated for every spawn.

use super::repeated_output::shorten;
use crate::{Config, Cx, Detector, DetectorInfo, Finding, Severity};
use dejavu_replay::{PathKey, Version, View};
use dejavu_trace::{ev, Record, StackId, StrId, Sys, Syscall};
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::Hasher;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "repeated-exec",
    summary: "the same program exec'd again and again (a process per operation), or the PATH searched per spawn",
    explain: "Two patterns. (1) Repeated program: successful execs (exec records, or execve/execveat \
calls that returned 0) are grouped by the process that started them and by program path plus \
command line, arguments compared as given except what differs from run to run of the same \
invocation (generated names and ids such as temporary directories, and numbers of four digits or \
more: ports, pids, timestamps), so `cc -c a.c` and `cc -c b.c` are two commands; a shell started per operation (sh -c '...', itself run repeatedly by the same \
parent) is looked through, so the commands it runs count toward the process that started the \
shell. A group with at least min_repeats execs is a finding, unless at least half of its runs did other \
work than the run before: read a regular file that changed since the same command's last run \
(configure's `cat confdefs.h -`, after confdefs.h grew), read data from a pipe or socket on stdin \
(an input the trace does not hold: `cat <<EOF >>confdefs.h`), or removed or renamed a file it had \
not made itself (`rm -f conftest.c` of the file the test just wrote): there is no one result to \
reuse. In a finding every exec after the first is redundant, and the time counted for each is that program's traced syscall time (its execve and \
every call it made until it exec'd again or exited). (2) PATH probes: execve calls failing with \
ENOENT or ENOTDIR in a process that then exec'd successfully are the search along PATH; per \
starting process and probed path, every probe after the first is redundant (resolving the path \
once avoids them), including a directory listed twice in PATH. The starting process is the parent \
of a fork that searches before its first exec (the parent's spawn), and the searching process \
itself when it already runs a program (env in a `#!/usr/bin/env bash` shim looking for bash: \
env's search, not the spawn of the program that ran the shim). Probes of a process whose execs all \
failed (command not found) are not counted, nor execs before --skip-startup. Calls count execs or \
probes; wasted time is the redundant ones'.",
    example: "for f in files: subprocess.run(['git', '--version'])   # 500 processes for one answer; \
each one also tries execve on every PATH entry before /usr/bin",
    fix: "run the program once and reuse its result; keep one long-lived worker (or use a library) \
instead of a process per operation; exec by full path, resolved once, instead of searching PATH \
per spawn",
    hazards: "Reusing a result is right only while what the program reads stays the same (a \
repository, configuration, the clock): re-run it when that changes. A long-lived worker must be \
restarted if it dies and must not leak state between operations. A path resolved once must be \
resolved again if PATH or the installed program changes.",
    options: &[(
        "min_repeats",
        10,
        "the same command must be exec'd at least this many times by one process to be reported",
    )],
    make: |cfg: &Config| {
        Box::new(RepeatedExec {
            min_repeats: cfg.opt(INFO.id, "min_repeats", 10).max(2),
            ..RepeatedExec::default()
        })
    },
};

const ENOENT: i64 = -2;
const ENOTDIR: i64 = -20;
/// Probes remembered per process until its exec succeeds.
const MAX_PENDING: usize = 128;

/// A failed exec waiting for the process's successful one: (probed path, `View::seq`,
/// stack, ts, duration).
type PendingProbe = (PathKey, u64, Option<StackId>, u64, u64);

/// Execs of one command by one (raw) parent.
struct Group {
    /// The parent process (or the process itself when it has none in the trace).
    parent: u32,
    hash: u64,
    exe: StrId,
    argv: StrId,
    count: u64,
    /// Traced syscall time of all runs, and of the first.
    ns: u64,
    first_ns: u64,
    /// First and second exec, and the last.
    ts1: u64,
    ts2: u64,
    last_ts: u64,
    /// The successful execve calls of this group (`View::seq`, duration), to mark all but
    /// the first redundant when the group is a finding.
    execs: Vec<(u64, u64, Option<StackId>)>,
    /// Runs that did other work than the one before: removed or renamed a file that was
    /// there before the run, or read a file that had changed since the run before.
    needed: u64,
}

/// Files a run reads or makes that are followed, at most.
const MAX_RUN_FILES: usize = 64;

/// The program a process runs now, and what it costs.
struct Img {
    group: u32,
    ns: u64,
    first: bool,
    /// It removed or renamed a file it had not made itself, or read data from a pipe on
    /// its stdin: work that may differ from the run before.
    effect: bool,
    /// Paths it made (opened with O_CREAT, mkdir): removing them later is its own business.
    made: Vec<PathKey>,
    /// Regular files it opened to read, with their versions then.
    inputs: Vec<(PathKey, Version)>,
}

#[derive(Clone, Default)]
struct Probe {
    count: u64,
    ns: u64,
    first_ns: u64,
    ts1: u64,
    ts2: u64,
    last_ts: u64,
    /// The group of the exec that followed (for the example).
    then: u32,
    /// The probing execve calls (`View::seq`, duration, stack).
    calls: Vec<(u64, u64, Option<StackId>)>,
}

impl Probe {
    fn add(&mut self, call: u64, stack: Option<StackId>, ts: u64, dur: u64, then: u32) {
        self.calls.push((call, dur, stack));
        if self.count == 0 || ts < self.ts1 {
            self.ts2 = if self.count == 0 { 0 } else { self.ts1 };
            self.ts1 = ts;
            self.first_ns = dur;
        } else if self.count == 1 || ts < self.ts2 {
            self.ts2 = ts;
        }
        self.count += 1;
        self.ns += dur;
        self.last_ts = self.last_ts.max(ts);
        self.then = then;
    }

    fn merge(&mut self, o: &Probe) {
        if self.count == 0 {
            *self = o.clone();
            return;
        }
        self.calls.extend_from_slice(&o.calls);
        let first_ns = if o.ts1 < self.ts1 {
            o.first_ns
        } else {
            self.first_ns
        };
        // The two earliest occurrences of both (a second one exists when count > 1).
        let mut ts = [self.ts1, o.ts1, u64::MAX, u64::MAX];
        if self.count > 1 {
            ts[2] = self.ts2;
        }
        if o.count > 1 {
            ts[3] = o.ts2;
        }
        ts.sort_unstable();
        self.ts1 = ts[0];
        self.ts2 = ts[1];
        self.first_ns = first_ns;
        self.count += o.count;
        self.ns += o.ns;
        self.last_ts = self.last_ts.max(o.last_ts);
    }
}

#[derive(Default)]
struct RepeatedExec {
    min_repeats: u64,
    groups: Vec<Group>,
    by_key: FxHashMap<(u32, u64), u32>,
    imgs: FxHashMap<u32, Img>,
    /// The group of each process's first exec (to recognise per-operation shells).
    first_group: FxHashMap<u32, u32>,
    /// Failed execve calls per process, waiting for its exec to succeed.
    pending: FxHashMap<u32, Vec<PendingProbe>>,
    probes: FxHashMap<(u32, PathKey), Probe>,
    /// Time of each process's last exec record, and of an exec counted from its syscall
    /// whose exec record may still come (strace imports write the record after the call).
    exec_rec_ts: FxHashMap<u32, u64>,
    exec_sys_ts: FxHashMap<u32, u64>,
    scratch: Vec<u8>,
    /// The files the last run of each command (by hash) read, with their versions then.
    last_inputs: FxHashMap<u64, Vec<(PathKey, Version)>>,
}

/// A command's identity: the program's path and its arguments, each masked of what differs
/// from run to run of the same invocation (generated names, long numbers).
pub(crate) fn command_hash(exe: &[u8], argv: &[u8], scratch: &mut Vec<u8>) -> u64 {
    scratch.clear();
    for a in argv.split(|&c| c == 0) {
        crate::pattern::mask_arg(a, scratch);
        scratch.push(0);
    }
    let mut h = FxHasher::default();
    h.write(exe);
    h.write_u8(0xff);
    h.write(scratch);
    h.finish()
}

/// The process a run's exec counts toward before shells are looked through: its parent,
/// or itself when it has none in the trace.
pub(crate) fn raw_parent(pid: u32, cx: &Cx<'_>) -> u32 {
    match cx.replay.proc(pid).map_or(0, |p| p.ppid) {
        0 => pid,
        p => p,
    }
}

fn is_shell(exe: &[u8]) -> bool {
    let base = exe.rsplit(|&c| c == b'/').next().unwrap_or(exe);
    matches!(
        base,
        b"sh" | b"bash" | b"dash" | b"zsh" | b"ksh" | b"mksh" | b"ash" | b"busybox" | b"fish"
    )
}

impl RepeatedExec {
    fn close_img(&mut self, pid: u32) {
        if let Some(img) = self.imgs.remove(&pid) {
            let g = &mut self.groups[img.group as usize];
            g.ns += img.ns;
            if img.first {
                g.first_ns = img.ns;
            }
            // Against the last run of the same command, by any process (a shell per
            // operation runs each in a fork of its own).
            let last = self.last_inputs.entry(g.hash).or_default();
            let changed_input = img
                .inputs
                .iter()
                .any(|(p, v)| last.iter().any(|(q, w)| q == p && w != v));
            if img.effect || changed_input {
                g.needed += 1;
            }
            *last = img.inputs;
        }
    }

    /// What call `s` of a run in progress says about the run's work: the files it reads,
    /// makes, removes and renames.
    fn follow_run(img: &mut Img, s: &Syscall, v: &View, cx: &Cx<'_>) {
        const O_ACCMODE: u64 = 0o3;
        const O_CREAT: u64 = 0o100;
        if s.ret < 0 || s.ev & ev::UNFINISHED != 0 {
            return;
        }
        let Some(path) = v.path else { return };
        match s.sys {
            Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat => {
                if s.sys == Sys::Creat || s.flags & O_CREAT != 0 {
                    if img.made.len() < MAX_RUN_FILES {
                        img.made.push(path);
                    }
                } else if s.flags & O_ACCMODE == 0
                    && dejavu_replay::FdKind::classify(cx.replay.paths.bytes(path), None)
                        == dejavu_replay::FdKind::File
                    && img.inputs.len() < MAX_RUN_FILES
                    && !img.inputs.iter().any(|(p, _)| *p == path)
                {
                    img.inputs.push((path, v.version));
                }
            }
            Sys::Mkdir | Sys::Mkdirat if img.made.len() < MAX_RUN_FILES => img.made.push(path),
            // Data read from a pipe or socket on stdin (`cat <<EOF >>confdefs.h`, `echo $x |
            // sed ...`): an input the trace does not hold, which may differ each run.
            Sys::Read | Sys::Readv | Sys::Pread64 | Sys::Preadv | Sys::Preadv2
                if s.fd == Some(0)
                    && s.ret > 0
                    && matches!(
                        v.fd.map_or_else(
                            || dejavu_replay::FdKind::classify(cx.replay.paths.bytes(path), None),
                            |f| f.kind
                        ),
                        dejavu_replay::FdKind::Pipe | dejavu_replay::FdKind::Socket
                    ) =>
            {
                img.effect = true;
            }
            Sys::Unlink
            | Sys::Unlinkat
            | Sys::Rmdir
            | Sys::Rename
            | Sys::Renameat
            | Sys::Renameat2
                if !img.made.contains(&path) =>
            {
                img.effect = true;
            }
            _ => {}
        }
    }

    /// A successful exec of `exe` with `argv` by `pid`; `ns` is the execve call's time
    /// when already known.
    #[allow(clippy::too_many_arguments)]
    fn exec(
        &mut self,
        pid: u32,
        exe: StrId,
        argv: StrId,
        ts: u64,
        ns: u64,
        call: Option<(u64, Option<StackId>)>,
        cx: &Cx<'_>,
    ) {
        // A process that runs a program already (it exec'd before in the trace) and
        // searches PATH for the next one searches for itself: `#!/usr/bin/env bash` in a
        // version manager's shim looks for bash along PATH, which is env's search, not
        // the spawn of the program that ran the shim (cmake's 231 failed execve of
        // `*/bin/bash` had been its own row). A fork's search is its parent's spawn.
        let searcher = self.imgs.contains_key(&pid);
        self.close_img(pid);
        let probes = self.pending.remove(&pid);
        if !cx.config.counts(ts) {
            return;
        }
        let parent = raw_parent(pid, cx);
        let prober = if searcher { pid } else { parent };
        let hash = command_hash(cx.strings.get(exe), cx.strings.get(argv), &mut self.scratch);
        let next = self.groups.len() as u32;
        let gi = *self.by_key.entry((parent, hash)).or_insert(next);
        if gi == next {
            self.groups.push(Group {
                parent,
                hash,
                exe,
                argv,
                count: 0,
                ns: 0,
                first_ns: 0,
                ts1: ts,
                ts2: 0,
                last_ts: ts,
                execs: Vec::new(),
                needed: 0,
            });
        }
        let g = &mut self.groups[gi as usize];
        g.count += 1;
        if let Some(c) = call {
            g.execs.push((c.0, ns, c.1));
        }
        if g.count == 2 {
            g.ts2 = ts;
        }
        g.last_ts = g.last_ts.max(ts);
        self.imgs.insert(
            pid,
            Img {
                group: gi,
                ns,
                first: g.count == 1,
                effect: false,
                made: Vec::new(),
                inputs: Vec::new(),
            },
        );
        self.first_group.entry(pid).or_insert(gi);
        for (path, call, stack, pts, dur) in probes.into_iter().flatten() {
            self.probes
                .entry((prober, path))
                .or_default()
                .add(call, stack, pts, dur, gi);
        }
    }
}

/// Resolves the process that a command's execs count toward, looking through shells
/// started per operation.
struct Anchors<'a> {
    groups: &'a [Group],
    first_group: &'a FxHashMap<u32, u32>,
    /// Per group: its program is a shell.
    shell: Vec<bool>,
    /// Shell groups by command hash.
    by_hash: FxHashMap<u64, Vec<u32>>,
    memo: FxHashMap<u32, u32>,
}

impl Anchors<'_> {
    fn of(&mut self, p: u32, depth: u32) -> u32 {
        if let Some(&a) = self.memo.get(&p) {
            return a;
        }
        let a = self.resolve(p, depth);
        self.memo.insert(p, a);
        a
    }

    fn resolve(&mut self, p: u32, depth: u32) -> u32 {
        let Some(&gs) = self.first_group.get(&p) else {
            return p;
        };
        let shell = &self.groups[gs as usize];
        if depth > 16 || shell.parent == p || !self.shell[gs as usize] {
            return p;
        }
        let (parent, hash) = (shell.parent, shell.hash);
        let a = self.of(parent, depth + 1);
        // The shell's command, run by the same (resolved) starter more than once: a shell
        // per operation.
        let same: Vec<u32> = self.by_hash.get(&hash).cloned().unwrap_or_default();
        let mut runs = 0;
        for g in same {
            let gp = self.groups[g as usize].parent;
            if self.of(gp, depth + 1) == a {
                runs += self.groups[g as usize].count;
            }
        }
        if runs >= 2 {
            a
        } else {
            p
        }
    }
}

impl Detector for RepeatedExec {
    fn wants(&self, _sys: Sys) -> bool {
        // Every call of an exec'd program is part of what one run costs.
        true
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        let is_exec = matches!(s.sys, Sys::Execve | Sys::Execveat);
        if !is_exec || s.ret != 0 || s.ev & ev::UNFINISHED != 0 {
            if let Some(img) = self.imgs.get_mut(&s.pid) {
                img.ns += s.dur;
                Self::follow_run(img, s, v, cx);
            }
        }
        if !is_exec || s.ev & ev::UNFINISHED != 0 {
            return;
        }
        match s.ret {
            0 => {
                if self.exec_rec_ts.get(&s.pid).is_some_and(|&t| t >= s.ts) {
                    // Its exec record came first (ptrace): the run started there.
                    if let Some(img) = self.imgs.get_mut(&s.pid) {
                        img.ns += s.dur;
                        self.groups[img.group as usize]
                            .execs
                            .push((v.seq, s.dur, s.stack));
                    }
                } else if let (Some(exe), Some(argv)) = (s.path, s.payload) {
                    // No exec record yet: count the exec from the call; a record that
                    // follows (strace import) is the same exec.
                    self.exec_sys_ts.insert(s.pid, s.ts);
                    self.exec(s.pid, exe, argv, s.ts, s.dur, Some((v.seq, s.stack)), cx);
                }
            }
            ENOENT | ENOTDIR => {
                if let Some(path) = v.path {
                    let p = self.pending.entry(s.pid).or_default();
                    if p.len() < MAX_PENDING {
                        p.push((path, v.seq, s.stack, s.ts, s.dur));
                    }
                }
            }
            _ => {}
        }
    }

    fn on_record(&mut self, rec: &Record, cx: &Cx<'_>) {
        match *rec {
            Record::Exec(e) => {
                self.exec_rec_ts.insert(e.pid, e.ts);
                if self.exec_sys_ts.remove(&e.pid).is_some_and(|t| e.ts >= t) {
                    return; // already counted from its execve call
                }
                self.exec(e.pid, e.exe, e.argv, e.ts, 0, None, cx);
            }
            Record::Exit(e) if e.pid == e.tid => {
                self.close_img(e.pid);
                self.pending.remove(&e.pid);
                self.exec_rec_ts.remove(&e.pid);
                self.exec_sys_ts.remove(&e.pid);
            }
            _ => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        let pids: Vec<u32> = self.imgs.keys().copied().collect();
        for pid in pids {
            self.close_img(pid);
        }
        let shell: Vec<bool> = self
            .groups
            .iter()
            .map(|g| is_shell(cx.strings.get(g.exe)))
            .collect();
        let mut by_hash: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        for (i, g) in self.groups.iter().enumerate() {
            if shell[i] {
                by_hash.entry(g.hash).or_default().push(i as u32);
            }
        }
        // Only processes that started as a shell are looked through.
        let shells: Vec<u32> = self
            .first_group
            .iter()
            .filter(|(_, &g)| shell[g as usize])
            .map(|(&p, _)| p)
            .collect();
        let mut anchors = Anchors {
            groups: &self.groups,
            first_group: &self.first_group,
            shell,
            by_hash,
            memo: FxHashMap::default(),
        };
        let mut anchor_of: FxHashMap<u32, u32> = FxHashMap::default();
        for p in shells {
            anchor_of.insert(p, anchors.of(p, 0));
        }
        let anchor = |p: u32| anchor_of.get(&p).copied().unwrap_or(p);

        let mut out = Vec::new();
        // (1) the same command, again and again.
        let mut merged: FxHashMap<(u32, u64), Vec<u32>> = FxHashMap::default();
        for (i, g) in self.groups.iter().enumerate() {
            merged
                .entry((anchor(g.parent), g.hash))
                .or_default()
                .push(i as u32);
        }
        for ((pid, _), members) in merged {
            let gs: Vec<&Group> = members.iter().map(|&i| &self.groups[i as usize]).collect();
            let count: u64 = gs.iter().map(|g| g.count).sum();
            if count < self.min_repeats {
                continue;
            }
            // Runs that each did other work (configure's `cat confdefs.h`, rewritten between
            // runs; `rm -f conftest*` of files made since): not one result to reuse.
            let needed: u64 = gs.iter().map(|g| g.needed).sum();
            if needed * 2 >= count {
                continue;
            }
            let Some(first) = gs.iter().min_by_key(|g| g.ts1) else {
                continue;
            };
            let mut ts: Vec<u64> = gs
                .iter()
                .flat_map(|g| std::iter::once(g.ts1).chain((g.count > 1).then_some(g.ts2)))
                .collect();
            ts.sort_unstable();
            let ns: u64 = gs.iter().map(|g| g.ns).sum();
            let wasted = ns.saturating_sub(first.first_ns);
            let share = cx.share(wasted);
            let mut execs: Vec<(u64, u64, Option<StackId>)> =
                gs.iter().flat_map(|g| g.execs.iter().copied()).collect();
            execs.sort_unstable();
            let mut sites = crate::group::Sites::default();
            for &(call, dur, stack) in execs.iter().skip(1) {
                cx.mark(call, dur, stack);
                sites.add(stack, 1, dur);
            }
            let exe = cx.strings.lossy(first.exe).into_owned();
            let cmdline: Vec<u8> = cx
                .strings
                .get(first.argv)
                .iter()
                .map(|&c| if c == 0 { b' ' } else { c })
                .collect();
            let image = cx.replay.image_at(pid, first.ts1).unwrap_or(0);
            let mut f = Finding {
                detector: INFO.id,
                severity: Severity::grade(share, count - 1),
                owner: crate::Owner::Own,
                program: String::new(),
                programs: Vec::new(),
                key: String::new(),
                processes: 1,
                pid,
                command: String::new(),
                paths: vec![exe.clone()],
                path_count: 1,
                top_paths: vec![crate::PathCount {
                    path: exe.clone(),
                    redundant_calls: count - 1,
                }],
                calls: count,
                redundant_calls: count - 1,
                wasted_ns: wasted,
                share,
                first_ts: ts.get(1).copied().unwrap_or(first.ts1),
                last_ts: gs.iter().map(|g| g.last_ts).max().unwrap_or(0),
                fix: "run it once and reuse the result, or keep one long-lived worker (or use a \
                      library) instead of a process per operation"
                    .into(),
                hazards: vec![
                    format!(
                        "{exe} ran {count} times with the same arguments; reuse its \
                         output only while what it reads stays the same"
                    ),
                    "the time counted is each run's traced syscall time; process creation and \
                     the program's own CPU time come on top"
                        .into(),
                ],
                cache: None,
                example: Some(shorten(&cmdline, 120)),
                callsites: cx.callsites(&sites, image, count - 1),
                first_sites: Vec::new(),
                sequence: None,
                stream: None,
                also: Vec::new(),
                shown_in: None,
            };
            cx.label(&mut f, image, &String::from_utf8_lossy(&cmdline));
            if let Some(c) = cx.coverage {
                // The commands behind it, for `dejavu whatif` to replay "run it once".
                c.borrow_mut()
                    .execs
                    .entry(f.key.clone())
                    .or_default()
                    .extend(gs.iter().map(|g| (g.parent, g.hash)));
            }
            out.push(f);
        }

        // (2) the PATH search, per spawn.
        let mut per: FxHashMap<u32, FxHashMap<PathKey, Probe>> = FxHashMap::default();
        // The (process, probed path) pairs behind each starter's finding.
        let mut raw: FxHashMap<u32, Vec<(u32, PathKey)>> = FxHashMap::default();
        for (&(parent, path), p) in &self.probes {
            per.entry(anchor(parent))
                .or_default()
                .entry(path)
                .or_default()
                .merge(p);
            raw.entry(anchor(parent)).or_default().push((parent, path));
        }
        for (pid, paths) in per {
            let mut items: Vec<(PathKey, Probe)> = paths.into_iter().collect();
            let redundant: u64 = items.iter().map(|(_, p)| p.count - 1).sum();
            if redundant == 0 {
                continue;
            }
            items.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(&b.0)));
            let mut sites = crate::group::Sites::default();
            for (_, p) in &mut items {
                p.calls.sort_unstable();
                for &(call, dur, stack) in p.calls.iter().skip(1) {
                    cx.mark(call, dur, stack);
                    sites.add(stack, 1, dur);
                }
            }
            let calls: u64 = items.iter().map(|(_, p)| p.count).sum();
            let wasted: u64 = items
                .iter()
                .map(|(_, p)| p.ns.saturating_sub(p.first_ns))
                .sum();
            let names: Vec<String> = items.iter().map(|(k, _)| cx.path(*k)).collect();
            let paths: Vec<String> = if names.len() <= 3 {
                names.clone()
            } else {
                let items: Vec<(&[u8], u64)> = names.iter().map(|n| (n.as_bytes(), 1)).collect();
                crate::pattern::display_clusters(&items)
                    .into_iter()
                    .take(3)
                    .map(|c| c.display)
                    .collect()
            };
            let top_paths = items
                .iter()
                .take(5)
                .map(|(k, p)| crate::PathCount {
                    path: cx.path(*k),
                    redundant_calls: p.count - 1,
                })
                .collect();
            let then = &self.groups[items[0].1.then as usize];
            let cmdline: Vec<u8> = cx
                .strings
                .get(then.argv)
                .iter()
                .map(|&c| if c == 0 { b' ' } else { c })
                .collect();
            let share = cx.share(wasted);
            let spawns = items.iter().map(|(_, p)| p.count).max().unwrap_or(0);
            let first_ts = items
                .iter()
                .filter(|(_, p)| p.count > 1)
                .map(|(_, p)| p.ts2)
                .min()
                .unwrap_or(0);
            let image = cx.replay.image_at(pid, first_ts).unwrap_or(0);
            let mut f = Finding {
                detector: INFO.id,
                severity: Severity::grade(share, redundant),
                owner: crate::Owner::Own,
                program: String::new(),
                programs: Vec::new(),
                key: String::new(),
                processes: 1,
                pid,
                command: String::new(),
                path_count: names.len() as u64,
                paths,
                top_paths,
                calls,
                redundant_calls: redundant,
                wasted_ns: wasted,
                share,
                first_ts: items
                    .iter()
                    .filter(|(_, p)| p.count > 1)
                    .map(|(_, p)| p.ts2)
                    .min()
                    .unwrap_or(0),
                last_ts: items.iter().map(|(_, p)| p.last_ts).max().unwrap_or(0),
                fix: "resolve the program's full path once (shutil.which, `command -v`, at \
                      start-up) and exec that path instead of searching PATH for every spawn"
                    .into(),
                hazards: vec![format!(
                    "failed execve along PATH before {} (up to {spawns} times per path); a path \
                     resolved once must be resolved again if PATH or the installation changes",
                    cx.strings.lossy(then.exe)
                )],
                cache: None,
                example: Some(shorten(&cmdline, 120)),
                callsites: cx.callsites(&sites, image, redundant),
                first_sites: Vec::new(),
                sequence: None,
                stream: None,
                also: Vec::new(),
                shown_in: None,
            };
            let exe = cx.strings.lossy(then.exe).into_owned();
            let base = exe.rsplit('/').next().unwrap_or(&exe).to_string();
            cx.label(&mut f, image, &format!("PATH search for {base}"));
            if let Some(c) = cx.coverage {
                // The probes behind it, for `dejavu whatif` to replay "resolve it once".
                c.borrow_mut()
                    .probes
                    .entry(f.key.clone())
                    .or_default()
                    .extend(raw.get(&pid).into_iter().flatten().copied());
            }
            out.push(f);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::TraceBuilder;
    use dejavu_trace::{Record, Spawn, Sys};

    /// The current process forks `child`, which fails execve on `probes` and then execs.
    fn spawn(b: &mut TraceBuilder, child: u32, probes: &[&str], exe: &str, argv: &[&str]) {
        spawn_doing(b, child, probes, exe, argv, |_| {});
    }

    /// `spawn`, the child's program making the calls `run` makes.
    fn spawn_doing(
        b: &mut TraceBuilder,
        child: u32,
        probes: &[&str],
        exe: &str,
        argv: &[&str],
        run: impl FnOnce(&mut TraceBuilder),
    ) {
        let parent = b.pid;
        b.fork(child);
        b.pid = child;
        b.tid = child;
        for p in probes {
            b.call(Sys::Execve, |c, b| {
                c.path = Some(b.s(p));
                c.payload = Some(b.s(&argv.join("\0")));
                c.ret = -2;
            });
        }
        // As the ptrace backend writes it: the exec record, then the call.
        b.exec(exe, argv);
        b.call(Sys::Execve, |c, b| {
            c.path = Some(b.s(exe));
            c.payload = Some(b.s(&argv.join("\0")));
            c.dur = 3000;
        });
        b.stat("/etc/gitconfig", Err(2));
        run(b);
        let ts = 0;
        b.push(Record::Exit(dejavu_trace::Exit {
            ts,
            pid: child,
            tid: child,
            status: dejavu_trace::ExitStatus::Code(0),
        }));
        b.pid = parent;
        b.tid = parent;
    }

    #[test]
    fn runs_that_read_changed_input_or_remove_files_do_other_work_each_time() {
        // configure: `cat confdefs.h -` after confdefs.h grew, `cat >>confdefs.h` of a
        // here-document on a pipe, `rm -f conftest.c` of the file the test just wrote.
        // Each run did other work: no result to reuse. The same `cat conf.h` of an
        // unchanged file is a repeat.
        for (case, found) in [("unchanged", 1), ("changed", 0), ("stdin", 0), ("rm", 0)] {
            let mut b = TraceBuilder::new();
            for i in 0..12u32 {
                if case == "changed" {
                    b.open(
                        "/w/confdefs.h",
                        0o2001,
                        5,
                        Some(crate::testkit::file(9, i as i64, 1)),
                    );
                    b.write(5, "/w/confdefs.h", "#define X 1\n", false);
                    b.close(5, "/w/confdefs.h");
                }
                if case == "rm" {
                    b.open(
                        "/w/conftest.c",
                        0o1101,
                        5,
                        Some(crate::testkit::file(10, 0, 1)),
                    );
                    b.close(5, "/w/conftest.c");
                }
                let argv: &[&str] = match case {
                    "stdin" => &["cat"],
                    "rm" => &["rm", "-f", "conftest.c"],
                    _ => &["cat", "confdefs.h"],
                };
                let exe = if case == "rm" {
                    "/usr/bin/rm"
                } else {
                    "/usr/bin/cat"
                };
                spawn_doing(&mut b, 200 + i, &[], exe, argv, |b| match case {
                    "stdin" => {
                        b.call(Sys::Read, |c, b| {
                            c.fd = Some(0);
                            c.path = Some(b.s("pipe:[77]"));
                            c.ev = dejavu_trace::ev::PATH_FROM_FD;
                            c.ret = 40;
                        });
                    }
                    "rm" => {
                        b.call(Sys::Unlinkat, |c, b| {
                            c.path = Some(b.s("/w/conftest.c"));
                        });
                    }
                    _ => {
                        b.open("/w/confdefs.h", 0, 3, Some(crate::testkit::file(9, 1, 1)));
                        b.read(3, "/w/confdefs.h", 12, 12);
                        b.close(3, "/w/confdefs.h");
                    }
                });
            }
            let f = b.findings("repeated-exec");
            assert_eq!(f.len(), found, "{case}: {f:#?}");
        }
    }

    #[test]
    fn compiles_of_different_files_are_different_commands() {
        // make -j2: `cc -c src/u1.c` ... `cc -c src/u24.c` is the build, not a repeat.
        let mut b = TraceBuilder::new();
        for i in 0..24 {
            let src = format!("src/u{i}.c");
            let obj = format!("src/u{i}.o");
            spawn(
                &mut b,
                200 + i,
                &[],
                "/usr/bin/cc",
                &["cc", "-O2", "-c", &src, "-o", &obj],
            );
        }
        assert!(b.findings("repeated-exec").is_empty());
        // The same file compiled again and again, on a port that changes per run: a repeat.
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            let port = format!("--port={}", 40000 + i);
            spawn(
                &mut b,
                200 + i,
                &[],
                "/usr/bin/cc",
                &["cc", "-c", "src/u1.c", &port],
            );
        }
        assert_eq!(b.findings("repeated-exec").len(), 1);
    }

    #[test]
    fn the_same_command_per_item_is_redundant_after_the_first_run() {
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            spawn(
                &mut b,
                200 + i,
                &[],
                "/usr/bin/git",
                &[
                    "git",
                    "log",
                    "-1",
                    &format!("{:040x}", 0xabcdef12u64 + i as u64),
                ],
            );
        }
        let f = b.findings("repeated-exec");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].pid, f[0].calls, f[0].redundant_calls), (100, 12, 11));
        assert_eq!(f[0].paths, vec!["/usr/bin/git".to_string()]);
        // Each run: its execve (3000 ns) and one stat (500 ns).
        assert_eq!(f[0].wasted_ns, 11 * 3500);
        assert!(
            f[0].example
                .as_deref()
                .is_some_and(|e| e.starts_with("git log -1 0000")),
            "{:?}",
            f[0].example
        );
    }

    #[test]
    fn path_probes_repeated_per_spawn_are_redundant_after_the_first_spawn() {
        let mut b = TraceBuilder::new();
        let probes = ["/opt/a/bin/true", "/home/u/bin/true", "/home/u/bin/true"];
        for i in 0..4 {
            spawn(&mut b, 300 + i, &probes, "/usr/bin/true", &["true"]);
        }
        let f = b.findings("repeated-exec");
        assert_eq!(f.len(), 1, "4 runs are below min_repeats: {f:?}");
        assert_eq!((f[0].calls, f[0].redundant_calls), (12, 10));
        assert_eq!(f[0].path_count, 2);
        assert_eq!(f[0].wasted_ns, 10 * 500);
        assert_eq!(f[0].example.as_deref(), Some("true"));
    }

    #[test]
    fn a_programs_own_path_search_is_its_own_not_its_spawners() {
        // The parent runs a shim (`#!/usr/bin/env bash`) per item: env, in the child,
        // searches PATH for bash, failing in a directory listed twice. That search is
        // env's, in each child: no finding of the parent's.
        let mut b = TraceBuilder::new();
        for i in 0..12u32 {
            let child = 500 + i;
            b.fork(child);
            b.pid = child;
            b.tid = child;
            b.exec(
                "/usr/bin/env",
                &["/usr/bin/env", "bash", "/home/u/.pyenv/shims/python3"],
            );
            for p in ["/home/u/.cargo/bin/bash", "/home/u/.cargo/bin/bash"] {
                b.call(Sys::Execve, |c, b| {
                    c.path = Some(b.s(p));
                    c.ret = -2;
                });
            }
            b.exec("/usr/bin/bash", &["bash", "/home/u/.pyenv/shims/python3"]);
            b.pid = 100;
            b.tid = 100;
        }
        let f = b.findings("repeated-exec");
        let search: Vec<_> = f
            .iter()
            .filter(|f| f.paths.iter().any(|p| p.contains(".cargo")))
            .collect();
        assert!(!search.is_empty(), "{f:#?}");
        assert!(search.iter().all(|f| f.pid != 100), "{search:#?}");
        // Per child, one probe of the two is redundant (the children's findings are one
        // finding of env's); not 23, as when the parent's spawns counted them all.
        let redundant: u64 = search.iter().map(|f| f.redundant_calls).sum();
        assert_eq!(redundant, 12, "{search:#?}");
    }

    #[test]
    fn different_commands_few_runs_and_failed_searches_are_quiet() {
        let mut b = TraceBuilder::new();
        for i in 0..12 {
            let name = format!("/usr/bin/tool-{}", ["a", "b", "c", "d"][i % 4]);
            spawn(&mut b, 400 + i as u32, &[], &name, &[&name]);
        }
        // "command not found": every probe fails, nothing to resolve once.
        for i in 0..5 {
            b.fork(500 + i);
            b.pid = 500 + i;
            b.tid = 500 + i;
            b.call(Sys::Execve, |c, b| {
                c.path = Some(b.s("/usr/bin/nope"));
                c.ret = -2;
            });
            b.pid = 100;
            b.tid = 100;
        }
        assert!(b.findings("repeated-exec").is_empty());
    }

    #[test]
    fn commands_run_through_a_shell_per_operation_count_toward_its_starter() {
        let mut b = TraceBuilder::new();
        for i in 0..10u32 {
            // node runs `sh -c 'git --version; true'`; the shell forks git.
            let sh = 600 + 2 * i;
            b.fork(sh);
            b.pid = sh;
            b.tid = sh;
            b.exec("/bin/sh", &["sh", "-c", "git --version; true"]);
            spawn(&mut b, sh + 1, &[], "/usr/bin/git", &["git", "--version"]);
            b.pid = 100;
            b.tid = 100;
        }
        let f = b.findings("repeated-exec");
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|f| f.pid == 100 && f.calls == 10), "{f:?}");
        let mut paths: Vec<_> = f.iter().map(|f| f.paths[0].clone()).collect();
        paths.sort();
        assert_eq!(
            paths,
            vec!["/bin/sh".to_string(), "/usr/bin/git".to_string()]
        );
    }

    #[test]
    fn a_long_lived_shell_script_is_the_starter_of_its_commands() {
        let mut b = TraceBuilder::new();
        b.fork(150);
        b.pid = 150;
        b.tid = 150;
        b.exec("/bin/bash", &["bash", "loop.sh"]);
        for i in 0..10u32 {
            spawn(&mut b, 800 + i, &[], "/usr/bin/git", &["git", "--version"]);
        }
        let f = b.findings("repeated-exec");
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].pid, f[0].calls), (150, 10));
    }

    #[test]
    fn an_exec_seen_only_as_a_call_counts_once_in_either_order() {
        let mut b = TraceBuilder::new();
        for i in 0..10u32 {
            let child = 700 + i;
            b.push(Record::Spawn(Spawn {
                ts: 0,
                parent_pid: 100,
                parent_tid: 100,
                pid: child,
                tid: child,
                clone_flags: 17,
            }));
            b.pid = child;
            b.tid = child;
            // strace order: the call, then (for even runs) the record.
            b.call(Sys::Execve, |c, b| {
                c.path = Some(b.s("/bin/date"));
                c.payload = Some(b.s("date\0+%s"));
            });
            if i % 2 == 0 {
                b.exec("/bin/date", &["date", "+%s"]);
            }
            b.pid = 100;
            b.tid = 100;
        }
        let f = b.findings("repeated-exec");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (10, 9));
    }
}
