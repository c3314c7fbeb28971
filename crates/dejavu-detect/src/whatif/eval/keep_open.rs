//! `--keep-open`: one handle per process and file, kept open; what its buffer risks, who
//! else writes the file, the renames it would miss.

use super::*;

#[derive(Default)]
pub(super) struct KeepOpen {
    pub(super) held: FxHashMap<(u32, PathKey), Held>,
    /// Writes by (pid, tid) to each held path: who else wrote the same file.
    pub(super) writers: FxHashMap<PathKey, Writes>,
    pub(super) bytes_at_risk: u64,
    pub(super) records_at_risk: u64,
    pub(super) worst: Option<(u64, u32, PathKey)>,
    pub(super) killed: Vec<u32>,
    /// Who holds each path: (image, pid).
    pub(super) by_path: FxHashMap<PathKey, Vec<(u32, u32)>>,
    /// What each process holds: (image, path).
    pub(super) by_pid: FxHashMap<u32, Vec<(u32, PathKey)>>,
    /// Bytes and writes buffered now, over every handle.
    pub(super) live_bytes: u64,
    pub(super) live_records: u64,
    /// With `--flush on-exit`: the holders' writes to their kept files, and the writes a
    /// 64 KiB buffer would have made of them (merged while each continues where the last
    /// ended).
    pub(super) writes_before: u64,
    pub(super) writes_after: u64,
}

impl KeepOpen {
    pub(super) fn hold(&mut self, image: u32, path: PathKey, h: Held) {
        self.by_path.entry(path).or_default().push((image, h.pid));
        self.by_pid.entry(h.pid).or_default().push((image, path));
        self.held.insert((image, path), h);
    }

    /// The (image, pid) pairs keeping `path` open.
    pub(super) fn holders(&self, path: PathKey) -> &[(u32, u32)] {
        self.by_path.get(&path).map_or(&[], |v| v.as_slice())
    }

    /// Process `pid` ended: its buffers are flushed (or, killed, lost).
    pub(super) fn exit(&mut self, pid: u32, killed: bool) {
        let Some(keys) = self.by_pid.get(&pid) else {
            return;
        };
        if killed {
            self.killed.push(pid);
        }
        for k in keys {
            if let Some(h) = self.held.get_mut(k) {
                self.live_bytes -= h.bytes;
                self.live_records -= h.records;
                h.bytes = 0;
                h.records = 0;
                self.writes_after += u64::from(h.merge.0 > 0);
                h.merge = (0, None);
            }
        }
    }

    /// The trace is over: what is still buffered is written at the processes' exits.
    pub(super) fn merged_writes(&self) -> (u64, u64) {
        let left: u64 = self.held.values().map(|h| u64::from(h.merge.0 > 0)).sum();
        (self.writes_before, self.writes_after + left)
    }
}

/// What one flush of a merging buffer carries.
const BUFFER: u64 = 64 * 1024;

/// (writes, bytes, first write's ts) per (pid, tid).
pub(super) type Writes = BTreeMap<(u32, u32), (u64, u64, u64)>;

pub(super) struct Held {
    pub(super) pid: u32,
    pub(super) ident: Option<(u64, u64)>,
    /// The last close, to be removed if the file is opened again.
    pub(super) pending_close: Option<(Sys, u64, String, String)>,
    pub(super) bytes: u64,
    pub(super) records: u64,
    /// The merging buffer: bytes in it, and the file offset the next write must start at
    /// to join it (None: where the last non-positional write left off).
    pub(super) merge: (u64, Option<i64>),
}

pub(super) fn identity(cx: &Cx<'_>, stat: Option<StatId>) -> Option<(u64, u64)> {
    let st: FileStat = cx.stat(stat?);
    (st.known & stat_known::IDENTITY != 0).then_some((st.dev, st.ino))
}

pub(super) fn keep_open(
    p: &Policy,
    flush: Flush,
    k: &mut KeepOpen,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
    changes: &Changes,
) {
    let s = c.s;
    let image = c.v.image;
    match s.sys {
        Sys::Open | Sys::Openat | Sys::Openat2 | Sys::Creat if s.ret >= 0 => {
            if !c.in_scope(p, &mut t.scope) {
                return;
            }
            let path = c.path().unwrap_or(PathKey(0));
            let ident = identity(c.cx, s.stat);
            let kind = FdKind::classify(
                c.cx.replay.paths.bytes(path),
                s.stat.map(|i| c.cx.stat(i)).as_ref(),
            );
            // Files, directories (kept for openat) and devices such as /dev/urandom; a
            // terminal, /dev/null, pipes and sockets are not reopened per use.
            if !matches!(kind, FdKind::File | FdKind::Dir | FdKind::Other) {
                return;
            }
            match k.held.get_mut(&(image, path)) {
                None => {
                    t.governed(c);
                    k.hold(
                        image,
                        path,
                        Held {
                            pid: s.pid,
                            ident,
                            pending_close: None,
                            bytes: 0,
                            records: 0,
                            merge: (0, None),
                        },
                    );
                }
                Some(h) if h.ident.is_some() && ident.is_some() && h.ident != ident => {
                    // Another file now has the name: the kept handle would still write to
                    // the old one.
                    t.governed(c);
                    let cz = cause(c.cx, image, path, false, 0, changes);
                    if cz.kind == "own_change" {
                        t.point(format!(
                            "reopen after {} at {}",
                            cz.call.unwrap_or("a change"),
                            cz.site.clone().unwrap_or_default()
                        ));
                    } else {
                        let m = Moment {
                            ts: s.ts,
                            pid: s.pid,
                            path: c.cx.path(path),
                            call: s.sys.name(),
                            text: format!(
                                "the file was replaced (another inode has the name); the kept handle would \
                                 still write to the old one: {}",
                                cz.text
                            ),
                        };
                        t.moment(m, true);
                    }
                    h.ident = ident;
                    h.pending_close = None;
                }
                Some(h) => {
                    t.removed(c);
                    if let Some((sys, dur, prog, site)) = h.pending_close.take() {
                        t.promote(&prog, &site, sys, dur);
                    }
                }
            }
        }
        Sys::Close => {
            let (Some(_), Some(path)) = (c.v.fd, c.v.path) else {
                return;
            };
            if !k.held.contains_key(&(image, path)) {
                return;
            }
            t.governed(c);
            let (prog, site) = (c.program(), c.site());
            if let Some(h) = k.held.get_mut(&(image, path)) {
                h.pending_close = Some((s.sys, s.dur, prog, site));
            }
        }
        sys if crate::group::is_write(sys) && s.ret > 0 => {
            let Some(path) =
                c.v.path
                    .filter(|_| c.v.fd.is_some_and(|f| f.kind == FdKind::File))
            else {
                return;
            };
            if k.holders(path).is_empty() {
                return;
            }
            let w = k
                .writers
                .entry(path)
                .or_default()
                .entry((s.pid, s.tid))
                .or_insert((0, 0, s.ts));
            w.0 += 1;
            w.1 += s.ret as u64;
            if let Some(h) = k.held.get_mut(&(image, path)) {
                if flush == Flush::OnExit {
                    // Merged into the buffer while it continues where the last write ended;
                    // a write elsewhere, or a full buffer, flushes it (one write).
                    let n = s.ret as u64;
                    let at = matches!(s.sys, Sys::Pwrite64 | Sys::Pwritev | Sys::Pwritev2)
                        .then_some(s.offset)
                        .flatten();
                    let joins = h.merge.0 > 0 && at == h.merge.1 && h.merge.0 + n <= BUFFER;
                    if !joins && h.merge.0 > 0 {
                        k.writes_after += 1;
                        h.merge.0 = 0;
                    }
                    h.merge = (h.merge.0 + n, at.map(|o| o + n as i64));
                    k.writes_before += 1;
                    h.bytes += s.ret as u64;
                    h.records += 1;
                    k.live_bytes += s.ret as u64;
                    k.live_records += 1;
                    if k.live_bytes > k.bytes_at_risk {
                        k.bytes_at_risk = k.live_bytes;
                        k.records_at_risk = k.live_records;
                        k.worst = Some((s.ts, s.pid, path));
                    }
                }
            }
        }
        _ => {}
    }
}
