//! `--skip-unread` (no-reader's fix: don't make the writes nobody reads) and
//! `--batch-syncs` (fsync-per-op's: one sync per batch), with the bytes each puts at risk.

use super::*;

const EPIPE: i64 = -32;

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
    // before the trace began), or a reader gone (EPIPE).
    let null = s.ret >= 0
        && match c.v.fd {
            Some(f) => f.kind == FdKind::DevNull,
            None => c.cx.replay.paths.bytes(path) == b"/dev/null",
        };
    if !(null || s.ret == EPIPE) {
        if s.ret >= 0 {
            t.governed(c);
        }
        return;
    }
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
