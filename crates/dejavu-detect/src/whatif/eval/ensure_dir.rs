//! `--ensure-dir-once`: a per-process flag "this directory exists", with the existence
//! checks around the mkdirs it removes.

use super::*;

#[derive(Default)]
pub(super) struct EnsureDir {
    /// (image, dir) -> the flag is set.
    pub(super) flags: FxHashSet<(u32, PathKey)>,
    /// The images whose flag for a directory is set.
    pub(super) by_dir: FxHashMap<PathKey, Vec<u32>>,
    /// Per thread, the checks of a directory made right before its next call.
    pub(super) pending: FxHashMap<u32, Vec<Pending>>,
    /// Per thread, the directory whose removed mkdir's verifying stat may come next.
    pub(super) after: FxHashMap<u32, PathKey>,
}

#[derive(Clone)]
pub(super) struct Pending {
    pub(super) path: PathKey,
    pub(super) sys: Sys,
    pub(super) dur: u64,
    pub(super) ts: u64,
    pub(super) ret: i64,
    /// Its stack and image: the program and site are named only for a check counted (a
    /// thread's every check is pending for a moment).
    pub(super) stack: Option<dejavu_trace::StackId>,
    pub(super) image: u32,
}

impl Pending {
    fn program_and_site(&self, cx: &Cx<'_>) -> (String, String) {
        (
            cx.program_name(self.image).0,
            site_label(cx, self.stack, self.image, self.sys),
        )
    }
}

pub(super) fn ensure_dir(
    p: &Policy,
    e: &mut EnsureDir,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
    changes: &Changes,
) {
    let s = c.s;
    let image = c.v.image;
    let tid = s.tid;
    match s.sys {
        Sys::Mkdir | Sys::Mkdirat => {
            e.after.remove(&tid);
            if !c.in_scope(p, &mut t.scope) {
                e.pending.remove(&tid);
                return;
            }
            let path = c.path().unwrap_or(PathKey(0));
            let mut pending = e.pending.remove(&tid).unwrap_or_default();
            // The checks of the directory, and a check of a parent of it right before the
            // mkdir (os.makedirs stats the parent first): the flag drops them with it.
            let last = pending.len().saturating_sub(1);
            let cx = c.cx;
            let mut i = 0;
            pending.retain(|x| {
                i += 1;
                x.path == path || (i - 1 == last && is_ancestor(cx, x.path, path))
            });
            if e.flags.contains(&(image, path)) {
                t.removed(c);
                for ch in &pending {
                    let (program, site) = ch.program_and_site(c.cx);
                    t.count_at(&program, &site, true, ch.sys, ch.dur);
                    if ch.ret < 0 {
                        // The check the flag answered "exists" found it missing.
                        let cz = cause(c.cx, image, ch.path, false, 0, changes);
                        t.stale(Stale {
                            ts: ch.ts,
                            pid: s.pid,
                            path: c.cx.path(ch.path),
                            call: ch.sys.name(),
                            site,
                            served: "exists".into(),
                            actual: errno_label((-ch.ret) as i32).into_owned(),
                            cause: cz,
                        });
                    }
                }
                e.after.insert(tid, path);
                if s.ret == 0 {
                    let cz = cause(c.cx, image, path, false, 0, changes);
                    t.stale(Stale {
                        ts: s.ts,
                        pid: s.pid,
                        path: c.cx.path(path),
                        call: s.sys.name(),
                        site: c.site(),
                        served: "exists".into(),
                        actual: "missing (mkdir created it)".into(),
                        cause: cz,
                    });
                }
            } else {
                t.governed(c);
                for ch in &pending {
                    let (program, site) = ch.program_and_site(c.cx);
                    t.count_at(&program, &site, false, ch.sys, ch.dur);
                }
                if (s.ret == 0 || s.ret == -17) && e.flags.insert((image, path)) {
                    e.by_dir.entry(path).or_default().push(image);
                }
            }
        }
        _ => {
            let q = question(s);
            let check = matches!(q, Some(Question::Stat { .. } | Question::Access { .. }));
            if check {
                // Any check is the thread's last call: a check of a parent of an in-scope
                // directory is one (os.makedirs's), whatever the scope says of the parent.
                let in_scope = c.in_scope(p, &mut t.scope);
                let path = c.path().unwrap_or(PathKey(0));
                let after = e.after.remove(&tid);
                if in_scope && after == Some(path) && matches!(q, Some(Question::Stat { .. })) {
                    // mkdir -p's verifying stat of the directory it did not need to make.
                    t.removed(c);
                    if s.ret < 0 {
                        let cz = cause(c.cx, image, path, false, 0, changes);
                        let site = c.site();
                        t.stale(Stale {
                            ts: s.ts,
                            pid: s.pid,
                            path: c.cx.path(path),
                            call: s.sys.name(),
                            site,
                            served: "exists".into(),
                            actual: errno_label((-s.ret) as i32).into_owned(),
                            cause: cz,
                        });
                    }
                    return;
                }
                let pending = e.pending.entry(tid).or_default();
                // A check of a parent on the way (makedirs) leaves the checks of the
                // directory pending.
                let keep = pending
                    .iter()
                    .all(|x| x.path == path || is_ancestor(c.cx, path, x.path));
                if !keep {
                    pending.clear();
                }
                pending.push(Pending {
                    path,
                    sys: s.sys,
                    dur: s.dur,
                    ts: s.ts,
                    ret: s.ret,
                    stack: s.stack,
                    image,
                });
                return;
            }
            if is_plumbing(s, c.v, c.cx) {
                return;
            }
            e.after.remove(&tid);
            e.pending.remove(&tid);
        }
    }
}

pub(super) fn is_ancestor(cx: &Cx<'_>, a: PathKey, p: PathKey) -> bool {
    let mut k = cx.replay.paths.parent(p);
    while let Some(q) = k {
        if q == a {
            return true;
        }
        k = cx.replay.paths.parent(q);
    }
    false
}
