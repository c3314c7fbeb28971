//! `--skip-checks`: check-then-act's fix, "just do the act and handle its error": a check
//! (access, a stat following links, an O_DIRECTORY probe) whose act right after answers the
//! same question is not made.

use super::*;
use crate::detectors::check_then_act::{
    answers, is_fstat, is_open, opens_dir, ENOTDIR, O_DIRECTORY,
};

/// The act must come within this many calls of the thread (check-then-act's `window`).
pub(super) const WINDOW: u64 = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Access,
    Stat,
    /// An open with O_DIRECTORY that failed with ENOTDIR.
    DirProbe,
}

/// A check waiting for its act.
struct Check {
    path: PathKey,
    /// The thread's call number of the check.
    seq: u64,
    what: What,
    /// access's mode.
    mode: u32,
    sys: Sys,
    dur: u64,
    program: String,
    site: String,
}

#[derive(Default)]
pub(super) struct Checks {
    /// Per thread: its calls so far and its checks under way.
    threads: FxHashMap<u32, (u64, Vec<Check>)>,
    /// A stat check (or probe) whose act opened this (pid, fd): it goes if the descriptor
    /// is fstat'ed before any other use.
    verify: FxHashMap<(u32, i32), (u64, Check)>,
    /// Checks removed, by what answered them: access, stat then open, probes.
    pub(super) access: u64,
    pub(super) stat_open: u64,
    pub(super) probes: u64,
    /// Acts that failed right after a check that succeeded, among the removed.
    pub(super) act_failed: u64,
}

impl Checks {
    /// A thread ended: its slot goes.
    pub(super) fn exit(&mut self, tid: u32) {
        self.threads.remove(&tid);
    }

    fn removed(&mut self, t: &mut Tally, c: &Check, promote: bool) {
        if promote {
            t.promote(&c.program, &c.site, c.sys, c.dur);
        } else {
            t.count_at(&c.program, &c.site, true, c.sys, c.dur);
        }
        match c.what {
            What::Access => self.access += 1,
            What::Stat => self.stat_open += 1,
            What::DirProbe => self.probes += 1,
        }
    }
}

pub(super) fn skip_checks(p: &Policy, k: &mut Checks, t: &mut Tally, c: &mut Call<'_, '_>) {
    let s = c.s;
    // A descriptor a stat check's act opened: fstat'ed first, the check goes; used
    // otherwise first (read, write, close), the stat's answer may be what was used.
    if let Some(fd) = s.fd {
        if let Some((opened, _)) = k.verify.get(&(s.pid, fd)) {
            if c.v.fd.map(|f| f.opened_ts) != Some(*opened) {
                k.verify.remove(&(s.pid, fd));
            } else if is_fstat(s) {
                if let Some((_, ch)) = k.verify.remove(&(s.pid, fd)) {
                    k.removed(t, &ch, true);
                }
            } else if !matches!(s.sys, Sys::Lseek | Sys::Fcntl) {
                k.verify.remove(&(s.pid, fd));
            }
        }
    }
    if is_plumbing(s, c.v, c.cx) {
        return;
    }
    let path_based = s.ev & ev::PATH_FROM_FD == 0;
    let what = match question(s) {
        Some(Question::Open) if s.ret == ENOTDIR && s.flags & O_DIRECTORY != 0 => {
            Some(What::DirProbe)
        }
        _ if s.ret < 0 => None,
        Some(Question::Access {
            nofollow: false, ..
        }) => Some(What::Access),
        Some(Question::Stat { nofollow: false }) => Some(What::Stat),
        _ => None,
    };
    let (seq, ended) = {
        let th = k.threads.entry(s.tid).or_default();
        th.0 += 1;
        let seq = th.0;
        let mut ended = None;
        if !th.1.is_empty() {
            let mut i = 0;
            while i < th.1.len() {
                let ch = &th.1[i];
                if seq - ch.seq > WINDOW {
                    th.1.swap_remove(i);
                } else if c.v.path == Some(ch.path) || c.v.path2 == Some(ch.path) {
                    // The next call on the path: the act, or the end of the check.
                    ended = Some(th.1.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        (seq, ended)
    };
    if let (Some(what), Some(path)) = (what, c.v.path) {
        if c.in_scope(p, &mut t.scope) {
            let (program, site) = (c.program(), c.site());
            if let Some(th) = k.threads.get_mut(&s.tid) {
                th.1.push(Check {
                    path,
                    seq,
                    what,
                    mode: s.mode,
                    sys: s.sys,
                    dur: s.dur,
                    program,
                    site,
                });
            }
        }
    }
    let Some(ch) = ended else { return };
    let act_open = is_open(s.sys) && path_based;
    let act_stat = question(s) == Some(Question::Stat { nofollow: false });
    match ch.what {
        What::Access if (act_open || act_stat) && answers(ch.mode, s, act_open) => {
            k.act_failed += u64::from(s.ret < 0);
            k.removed(t, &ch, false);
        }
        What::Stat | What::DirProbe if act_open && !opens_dir(s, c.cx) => {
            // Governed now; removed once the descriptor is fstat'ed first.
            t.count_at(&ch.program, &ch.site, false, ch.sys, ch.dur);
            if s.ret >= 0 {
                k.verify.insert((s.pid, s.ret as i32), (s.ts, ch));
            }
        }
        _ => {}
    }
}
