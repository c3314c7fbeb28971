//! A repeated-output finding's own fix, "log it once": its lines written once per process
//! and output, cut and masked by the detector's own [`Splitter`] and counted by line.

use super::*;
use crate::detectors::repeated_output::Splitter;

#[derive(Default)]
pub(super) struct LogLines {
    pub(super) splitter: Splitter,
    /// Lines written once already: (image, target, stream, hash).
    seen: FxHashSet<(u32, PathKey, u8, u64)>,
    /// Whether each target is one the finding's lines were written to, as a string.
    names: FxHashMap<PathKey, String>,
    pub(super) before: u64,
    pub(super) removed: u64,
}

pub(super) fn log_lines(
    p: &Policy,
    lines: &FxHashSet<(u32, String, u8, u64)>,
    st: &mut LogLines,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
) {
    let s = c.s;
    if s.sys == Sys::Close {
        if let Some(fd) = s.fd {
            st.splitter.close(s.pid, fd);
        }
        return;
    }
    if !crate::group::is_write(s.sys) {
        return;
    }
    if !p.scope.programs.is_empty() {
        let prog = c.program();
        if !p.scope.covers_program(&prog) {
            return;
        }
    }
    // Each line of the write: one of the finding's, written already (removed) or not.
    let (mut mine, mut gone, mut other) = (0u64, 0u64, 0u64);
    let LogLines {
        splitter,
        seen,
        names,
        ..
    } = st;
    splitter.write(s, c.v, c.cx, &mut |o| {
        let Some(h) = o.h else {
            other += 1;
            return;
        };
        let name = names.entry(o.target).or_insert_with(|| c.cx.path(o.target));
        if !lines.contains(&(o.image, name.clone(), o.stream, h)) {
            other += 1;
            return;
        }
        mine += 1;
        if !seen.insert((o.image, o.target, o.stream, h)) {
            gone += 1;
        }
    });
    if mine == 0 {
        return;
    }
    st.before += mine;
    st.removed += gone;
    // The write goes when every line it carried does.
    if gone == mine && other == 0 {
        t.removed(c);
    } else {
        t.governed(c);
    }
}
