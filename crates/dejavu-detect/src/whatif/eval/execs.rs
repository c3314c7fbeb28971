//! A repeated-exec finding's own fix: "run it once and reuse the result" (each of the
//! finding's commands run once per starting process: its later runs, and every call they
//! made, go) or "resolve the path once" (its PATH probes after the first per probed path
//! go). Commands are told apart as the detector tells them (`command_hash`).

use super::*;
use crate::detectors::repeated_exec::{command_hash, raw_parent};

/// At most this many failed execve calls wait per process for its exec (as the detector).
const MAX_PENDING: usize = 128;

/// A failed execve waiting for its process's exec: path, syscall, duration, program, call
/// site.
type Probe = (PathKey, Sys, u64, String, String);

#[derive(Default)]
pub(super) struct ExecOnce {
    scratch: Vec<u8>,
    /// Commands run once already (a finding is one command of one starter, looked through
    /// the shells it runs per operation: its runs have many parents, one hash).
    seen: FxHashSet<u64>,
    /// The process images that are runs of the finding's commands: whether each goes.
    runs: FxHashMap<u32, bool>,
    /// Failed execve calls per process, waiting for its exec.
    pending: FxHashMap<u32, Vec<Probe>>,
    /// Probed paths searched once already (a finding is one starter's, looked through its
    /// shells).
    probed: FxHashSet<PathKey>,
    /// Runs of the finding's commands, and those that go.
    pub(super) execs: (u64, u64),
}

impl ExecOnce {
    /// Process `pid` exec'd `exe` with `argv` (the replay has applied it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn exec(
        &mut self,
        cmds: &FxHashSet<(u32, u64)>,
        probes: &FxHashSet<(u32, String)>,
        t: &mut Tally,
        pid: u32,
        (exe, argv): (&[u8], &[u8]),
        cx: &Cx<'_>,
    ) {
        let parent = raw_parent(pid, cx);
        for (path, sys, dur, prog, site) in self.pending.remove(&pid).into_iter().flatten() {
            if !probes.contains(&(parent, cx.path(path))) {
                continue;
            }
            let again = !self.probed.insert(path);
            t.count_at(&prog, &site, again, sys, dur);
        }
        let hash = command_hash(exe, argv, &mut self.scratch);
        if !cmds.contains(&(parent, hash)) {
            return;
        }
        let Some(image) = cx.replay.image_of(pid) else {
            return;
        };
        let again = !self.seen.insert(hash);
        self.execs.0 += 1;
        self.execs.1 += u64::from(again);
        self.runs.insert(image, again);
    }

    pub(super) fn exit(&mut self, pid: u32) {
        self.pending.remove(&pid);
    }
}

pub(super) fn exec_once(x: &mut ExecOnce, t: &mut Tally, c: &mut Call<'_, '_>) {
    let s = c.s;
    if let Some(&gone) = x.runs.get(&c.v.image) {
        // A call of a run of the finding's commands: it goes with the run.
        if gone {
            t.removed(c);
        } else {
            t.governed(c);
        }
        return;
    }
    if matches!(s.sys, Sys::Execve | Sys::Execveat) && matches!(s.ret, -2 | -20) {
        if let Some(path) = c.v.path {
            let (prog, site) = (c.program(), c.site());
            let p = x.pending.entry(s.pid).or_default();
            if p.len() < MAX_PENDING {
                p.push((path, s.sys, s.dur, prog, site));
            }
        }
    }
}
