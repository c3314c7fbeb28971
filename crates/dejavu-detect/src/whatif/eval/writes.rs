//! `--skip-unread` (no-reader's fix: don't make the writes nobody reads) and
//! `--batch-syncs` (fsync-per-op's: one sync per batch), with the bytes each puts at risk.

use super::*;

/// Bytes a policy drops or leaves unsynced: the running worst.
#[derive(Default)]
pub(super) struct Risk {
    pub(super) bytes: u64,
    pub(super) records: u64,
    pub(super) worst: Option<(u64, PathKey)>,
    /// Writes to the standard streams among them (`--skip-unread`).
    pub(super) std_streams: u64,
    /// Writes that failed with EPIPE among them (`--skip-unread`).
    pub(super) epipe: u64,
}

/// `--skip-unread`: the writes dropped, in all.
pub(super) fn skip_unread(p: &Policy, r: &mut Risk, t: &mut Tally, c: &mut Call<'_, '_>) {
    let s = c.s;
    if !(crate::group::is_write(s.sys) || matches!(s.sys, Sys::Sendfile | Sys::Splice)) {
        return;
    }
    let Some(path) = c.path() else { return };
    if !c.in_scope(p, &mut t.scope) {
        return;
    }
    // Nobody reads it: /dev/null (by the descriptor's stat, or by name for one opened
    // before the trace began, but not one dejavu's user gave the program), or a reader
    // gone (EPIPE): as no-reader counts.
    let Some(null) = crate::detectors::no_reader::nobody_reads(s, c.v, path, c.cx) else {
        if s.ret >= 0 {
            t.governed(c);
        }
        return;
    };
    t.removed(c);
    r.bytes += if null { s.ret as u64 } else { s.count };
    r.records += 1;
    r.epipe += u64::from(!null);
    r.std_streams += u64::from(matches!(s.fd, Some(1 | 2)));
    r.worst.get_or_insert((s.ts, path));
}

/// `--batch-syncs`: per process image and file, the bytes written since its previous sync,
/// since the last sync the policy surely makes, and the sync it would drop if another
/// joins the batch.
#[derive(Default)]
pub(super) struct Batches {
    files: FxHashMap<(u32, PathKey), Batch>,
}

#[derive(Default)]
struct Batch {
    /// Bytes and writes since the previous sync (recorded).
    since: (u64, u64),
    /// Bytes and writes since the last sync the policy keeps: what is not durable under it.
    unsynced: (u64, u64),
    /// The batch's last sync so far (dropped if another joins): syscall, duration,
    /// program, call site.
    last: Option<(Sys, u64, String, String)>,
}

pub(super) fn batch_syncs(
    p: &Policy,
    max: u64,
    b: &mut Batches,
    r: &mut Risk,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
) {
    let s = c.s;
    if s.ret < 0 {
        return;
    }
    let sync = matches!(s.sys, Sys::Fsync | Sys::Fdatasync | Sys::SyncFileRange);
    let write = crate::group::is_write(s.sys)
        || matches!(s.sys, Sys::Sendfile | Sys::CopyFileRange | Sys::Splice);
    if !sync && !write {
        return;
    }
    let Some(path) = c.path() else { return };
    if !c.in_scope(p, &mut t.scope) {
        return;
    }
    let e = b.files.entry((c.v.image, path)).or_default();
    if write {
        e.since.0 += s.ret as u64;
        e.since.1 += 1;
        e.unsynced.0 += s.ret as u64;
        e.unsynced.1 += 1;
        return;
    }
    t.governed(c);
    let joins = e.last.is_some() && e.since.0 <= max;
    if joins {
        // The batch's sync so far is not made: this one syncs its bytes too. Until now
        // the bytes since the last sync kept are not durable (the recording had synced
        // them).
        if let Some((sys, dur, prog, site)) = e.last.take() {
            t.promote(&prog, &site, sys, dur);
        }
        if e.unsynced.0 > r.bytes {
            r.bytes = e.unsynced.0;
            r.records = e.unsynced.1;
            r.worst = Some((s.ts, path));
        }
    } else {
        // A new batch: the previous one's last sync is made, so what is unsynced now is
        // what was written since it.
        e.unsynced = e.since;
    }
    e.since = (0, 0);
    let (prog, site) = (c.program(), c.site());
    if let Some(e) = b.files.get_mut(&(c.v.image, path)) {
        e.last = Some((s.sys, s.dur, prog, site));
    }
}

/// What one flush of `--batch-writes`' buffer carries.
pub(super) const BUFFER: u64 = 64 * 1024;

/// Kinds of destination a merged run wrote to, for the hazards.
pub(super) const K_TTY: u8 = 1;
pub(super) const K_PIPE: u8 = 2;
pub(super) const K_SOCKET: u8 = 4;
pub(super) const K_APPEND: u8 = 8;

/// `--batch-writes`: the run of tiny writes under way on each (pid, fd), as small-writes
/// delimits one.
#[derive(Default)]
pub(super) struct Buffers {
    runs: FxHashMap<(u32, i32), Run>,
    /// Destinations seen (`K_*`).
    pub(super) kinds: u8,
}

struct Run {
    open_id: u64,
    path: PathKey,
    bytes: u64,
    last_end: u64,
    next_offset: Option<i64>,
    /// Bytes and writes in the buffer now (since its last flush when full).
    buffered: (u64, u64),
    /// Each write of the run: syscall, duration, program, call site (those beyond the
    /// flushes a buffer needs are removed when the run ends).
    members: Vec<(Sys, u64, String, String)>,
}

/// The tiny writes of a run go into a 64 KiB buffer; the run's end (another call on the
/// descriptor, a larger or failed write, a pause longer than `gap` ns, a positional write
/// elsewhere) flushes it: the run's bytes go out in ceil(bytes / 64 KiB) writes, the rest
/// of its writes are removed.
pub(super) fn batch_writes(
    p: &Policy,
    (max, gap): (u64, u64),
    b: &mut Buffers,
    r: &mut Risk,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
) {
    let s = c.s;
    if !crate::group::uses_fd(s.sys) {
        return;
    }
    let Some(fd) = s.fd else { return };
    if let Some(fd2) = s.fd2 {
        end_run(b, t, s.pid, fd2);
    }
    let kind = match (c.v.fd, c.v.path) {
        (Some(f), _) => f.kind,
        (None, Some(p)) => FdKind::classify(c.cx.replay.paths.bytes(p), None),
        (None, None) => FdKind::Other,
    };
    // As small-writes: a one-byte token on a pipe, stderr (unbuffered so that diagnostics
    // survive a crash) and /dev/null (no-reader's) are not merged.
    let token = s.ret == 1 && s.count <= 1 && kind == FdKind::Pipe;
    let tiny = crate::group::is_write(s.sys)
        && s.ret >= 0
        && !token
        && fd != 2
        && kind != FdKind::DevNull
        && s.count.max(s.ret as u64) <= max;
    let path = match c.v.path {
        Some(path) if tiny => path,
        _ => {
            end_run(b, t, s.pid, fd);
            return;
        }
    };
    if !c.in_scope(p, &mut t.scope) {
        end_run(b, t, s.pid, fd);
        return;
    }
    let open_id = c.v.fd.map_or(0, |f| f.open_id);
    let n = s.ret as u64;
    let key = (s.pid, fd);
    let continues = b.runs.get(&key).is_some_and(|run| {
        run.open_id == open_id
            && run.path == path
            && s.ts.saturating_sub(run.last_end) <= gap
            && run.next_offset == s.offset
    });
    if !continues {
        end_run(b, t, s.pid, fd);
    }
    t.governed(c);
    let (program, site) = (c.program(), c.site());
    b.kinds |= match kind {
        FdKind::Tty => K_TTY,
        FdKind::Pipe => K_PIPE,
        FdKind::Socket => K_SOCKET,
        _ => 0,
    } | if c.v.fd.is_some_and(|f| f.append) {
        K_APPEND
    } else {
        0
    };
    let run = b.runs.entry(key).or_insert_with(|| Run {
        open_id,
        path,
        bytes: 0,
        last_end: 0,
        next_offset: None,
        buffered: (0, 0),
        members: Vec::new(),
    });
    run.bytes += n;
    run.last_end = run.last_end.max(s.ts + s.dur);
    run.next_offset = s.offset.map(|o| o + n as i64);
    run.members.push((s.sys, s.dur, program, site));
    // A full buffer is flushed (those flushes are the writes the run keeps); what is in
    // it is what a crash now would lose.
    run.buffered.0 += n;
    run.buffered.1 += 1;
    while run.buffered.0 > BUFFER {
        run.buffered.0 -= BUFFER;
        run.buffered.1 = 1;
    }
    if run.members.len() > 1 && run.buffered.0 > r.bytes {
        r.bytes = run.buffered.0;
        r.records = run.buffered.1;
        r.worst = Some((s.ts, path));
    }
}

/// The run on (pid, fd) ends: its writes beyond the flushes a buffer needs are removed.
fn end_run(b: &mut Buffers, t: &mut Tally, pid: u32, fd: i32) {
    let Some(run) = b.runs.remove(&(pid, fd)) else {
        return;
    };
    let needed = run.bytes.div_ceil(BUFFER).max(1) as usize;
    for (sys, dur, prog, site) in run.members.iter().skip(needed) {
        t.promote(prog, site, *sys, *dur);
    }
}

/// The trace is over: every run ends (the process's exit flushes its buffer).
pub(super) fn end_all(b: &mut Buffers, t: &mut Tally) {
    let mut keys: Vec<(u32, i32)> = b.runs.keys().copied().collect();
    keys.sort_unstable();
    for (pid, fd) in keys {
        end_run(b, t, pid, fd);
    }
}
