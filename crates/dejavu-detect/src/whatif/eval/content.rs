//! The content cache (`--cache read:GLOB`): full reads of a file, kept in memory, judged
//! as reread-unchanged judges them.

use super::*;

/// A content cache (`--cache read:GLOB`): a file read in full (a directory listed in full)
/// is kept in memory, and a later full read of it answered from there, as reread-unchanged
/// judges them (one open/close cycle from offset 0 to the end, docs/whatif.md).
#[derive(Default)]
pub(super) struct Content {
    /// Cycles under way, by (pid, descriptor).
    pub(super) cycles: FxHashMap<(u32, i32), Cycle>,
    /// The directories each process holds open: a lookup after such an open checks what
    /// the open reached, which a cache of the answer before it does not serve (as
    /// repeated-lookup does not count it).
    pub(super) open_dirs: crate::detectors::lookup::OpenDirs,
    /// The content kept, by (image, path).
    pub(super) kept: FxHashMap<(u32, PathKey), Kept>,
}

pub(super) struct Cycle {
    /// The replay's open id, learnt at the first call on the descriptor.
    pub(super) open_id: Option<u64>,
    pub(super) path: PathKey,
    pub(super) image: u32,
    pub(super) seq: u64,
    pub(super) ts: u64,
    /// The open's stack: whose read it was.
    pub(super) stack: Option<dejavu_trace::StackId>,
    /// The path's version at the open: a change by anyone during the cycle makes it no
    /// read of one content.
    pub(super) version: dejavu_replay::Version,
    pub(super) ident: Option<u64>,
    pub(super) size: Option<u64>,
    pub(super) dir: bool,
    pub(super) readonly: bool,
    /// (call, duration, removable by a cache, program, site).
    pub(super) members: Vec<(Sys, u64, bool, String, String)>,
    pub(super) reads: crate::detectors::reads::Coverage,
    pub(super) listed: bool,
}

#[derive(Clone, Copy)]
pub(super) struct Kept {
    pub(super) ident: Option<u64>,
    pub(super) snap: u64,
    pub(super) filled_ts: u64,
    pub(super) filled_stack: Option<dejavu_trace::StackId>,
    pub(super) filled_seq: u64,
}

/// What the open's or fstat's answer says about the file: None for a device, FIFO or
/// socket; else (identity hash, size, is a directory), as reread-unchanged reads them.
#[allow(clippy::type_complexity)]
pub(super) fn file_identity(
    cx: &Cx<'_>,
    s: &Syscall,
) -> Option<(Option<u64>, Option<u64>, Option<bool>)> {
    use std::hash::Hasher;
    let Some(id) = s.stat else {
        return Some((None, None, None));
    };
    let st = cx.stat(id);
    let is_dir = if st.known & stat_known::MODE != 0 {
        match st.file_type() {
            dejavu_trace::mode::S_IFDIR => Some(true),
            dejavu_trace::mode::S_IFREG => Some(false),
            _ => return None,
        }
    } else {
        None
    };
    let need = stat_known::IDENTITY | stat_known::SIZE | stat_known::MTIME;
    let ident = (st.known & need == need && s.ev & ev::STAT_PARTIAL == 0).then(|| {
        let mut h = rustc_hash::FxHasher::default();
        h.write_u64(st.dev);
        h.write_u64(st.ino);
        h.write_i64(st.size);
        h.write_i64(st.mtime_ns);
        h.finish()
    });
    let size = (st.known & stat_known::SIZE != 0 && st.size >= 0).then_some(st.size as u64);
    Some((ident, size, is_dir))
}

const O_DIRECTORY: u64 = 0o200000;
const O_WRONLY: u64 = 1;

pub(super) fn content_step(
    p: &Policy,
    k: &mut Content,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
    (inv, ttl): (Invalidate, Option<u64>),
    changes: &Changes,
    own: &Own,
) {
    use crate::detectors::reads::{opens_readonly, read_of, same_open_file, Reads};
    let s = c.s;
    if matches!(s.sys, Sys::Open | Sys::Openat | Sys::Openat2) {
        if s.ret < 0 || s.flags & O_ACCMODE == O_WRONLY || !c.in_scope(p, &mut t.scope) {
            return;
        }
        let path = c.path().unwrap_or(PathKey(0));
        let b = c.cx.replay.paths.bytes(path);
        // Generated files are new on every read.
        if [&b"/proc/"[..], b"/sys/", b"/dev/"]
            .iter()
            .any(|pre| b.starts_with(pre))
            || b.first() != Some(&b'/')
        {
            return;
        }
        let Some((ident, size, is_dir)) = file_identity(c.cx, s) else {
            return;
        };
        let (prog, site) = (c.program(), c.site());
        k.cycles.insert(
            (s.pid, s.ret as i32),
            Cycle {
                open_id: None,
                path,
                image: c.v.image,
                seq: c.v.seq,
                ts: s.ts,
                stack: s.stack,
                version: c.v.version,
                ident,
                size,
                dir: is_dir.unwrap_or(s.flags & O_DIRECTORY != 0),
                readonly: opens_readonly(s.flags),
                members: vec![(s.sys, s.dur, true, prog, site)],
                reads: Default::default(),
                listed: false,
            },
        );
        return;
    }
    let wanted = crate::detectors::reads::is_read_call(s.sys)
        || matches!(
            s.sys,
            Sys::Close | Sys::Lseek | Sys::Fstat | Sys::Newfstatat | Sys::Statx | Sys::Getdents64
        );
    if !wanted {
        return;
    }
    let (fd, seen) = match s.sys {
        Sys::Sendfile | Sys::CopyFileRange => (s.fd2, c.v.fd2),
        _ => (s.fd, c.v.fd),
    };
    let Some(fd) = fd else { return };
    if matches!(s.sys, Sys::Newfstatat | Sys::Statx) && s.ev & ev::PATH_FROM_FD == 0 {
        return; // a lookup by path, not a call on the descriptor
    }
    let key = (s.pid, fd);
    let Some(cy) = k.cycles.get_mut(&key) else {
        return;
    };
    // The descriptor number may have been reused (dup2 onto it, close_range, exec).
    if !same_open_file(&mut cy.open_id, seen) {
        k.cycles.remove(&key);
        return;
    }
    let read = read_of(s, cy.readonly);
    let removable = !matches!(read, Some(Reads::Known(r)) if r.transfer);
    let (prog, site) = (c.program(), c.site());
    cy.members.push((s.sys, s.dur, removable, prog, site));
    match s.sys {
        Sys::Close => {
            if let Some(cy) = k.cycles.remove(&key) {
                finish_cycle(k, t, cy, c, (inv, ttl), changes, own);
            }
            return;
        }
        _ if s.ret < 0 => {
            cy.reads.broken = true;
            return;
        }
        Sys::Lseek => {
            cy.reads.pos = s.ret as u64;
            if cy.dir && s.ret == 0 {
                cy.listed = false; // rewinddir: the listing starts over
            }
            return;
        }
        Sys::Getdents64 => {
            if !cy.dir {
                cy.reads.broken = true;
            } else if s.ret == 0 {
                cy.listed = true;
            }
            return;
        }
        Sys::Fstat | Sys::Newfstatat | Sys::Statx => {
            if cy.ident.is_none() || cy.size.is_none() {
                match file_identity(c.cx, s) {
                    None => {
                        k.cycles.remove(&key);
                    }
                    Some((ident, size, is_dir)) => {
                        cy.ident = cy.ident.or(ident);
                        cy.size = cy.size.or(size);
                        cy.dir = is_dir.unwrap_or(cy.dir);
                    }
                }
            }
            return;
        }
        _ => {}
    }
    match read {
        Some(Reads::Known(r)) if !cy.dir => cy.reads.read(&r, cy.size),
        Some(_) => cy.reads.broken = true,
        None => {}
    }
}

/// A cycle ended: a full read is governed; one the kept content answers is removed (and
/// stale when the file's identity changed since).
pub(super) fn finish_cycle(
    k: &mut Content,
    t: &mut Tally,
    cy: Cycle,
    c: &mut Call<'_, '_>,
    (inv, ttl): (Invalidate, Option<u64>),
    changes: &Changes,
    own: &Own,
) {
    let complete = if cy.dir {
        cy.listed && !cy.reads.broken
    } else {
        cy.reads.full()
    };
    let grew = !cy.dir && cy.size.is_some_and(|n| cy.reads.covered > n);
    if !complete || grew || c.v.version != cy.version {
        return;
    }
    let snap = snapshot(inv, cy.image, cy.path, c.cx.replay, own);
    let key = (cy.image, cy.path);
    // (Content the runtime read, in its start-up or its import system, is not the
    // program's to keep: as for lookups.)
    let fresh = |e: &Kept| {
        e.snap == snap
            && ttl.is_none_or(|l| cy.ts.saturating_sub(e.filled_ts) < l)
            && !c.cx.first_after_runtime(
                cy.image,
                cy.path,
                (e.filled_ts, e.filled_stack),
                (cy.ts, cy.stack),
            )
    };
    match k.kept.get(&key).copied() {
        Some(e) if fresh(&e) => {
            for (sys, dur, removable, prog, site) in &cy.members {
                t.count_at(prog, site, *removable, *sys, *dur);
            }
            if e.ident != cy.ident {
                let cause = cause(c.cx, cy.image, cy.path, false, e.filled_seq, changes);
                t.stale(Stale {
                    ts: cy.ts,
                    pid: c.s.pid,
                    path: c.cx.path(cy.path),
                    call: "read",
                    site: cy.members.first().map(|m| m.4.clone()).unwrap_or_default(),
                    served: "the content kept at the last full read".into(),
                    actual: "another content (the file's inode, size or mtime changed)".into(),
                    cause,
                });
            }
        }
        prev => {
            for (sys, dur, _, prog, site) in &cy.members {
                t.count_at(prog, site, false, *sys, *dur);
            }
            if let Some(e) = prev {
                if e.snap != snap && e.ident != cy.ident {
                    if let Some(ch) = own_change_after(
                        cy.image,
                        cy.path,
                        inv == Invalidate::OnDirChange,
                        e.filled_seq,
                        c.cx.replay,
                        own,
                    ) {
                        t.point(change_label(c.cx, &ch));
                    }
                }
            }
            k.kept.insert(
                key,
                Kept {
                    ident: cy.ident,
                    snap,
                    filled_ts: cy.ts,
                    filled_stack: cy.stack,
                    filled_seq: cy.seq,
                },
            );
        }
    }
}
