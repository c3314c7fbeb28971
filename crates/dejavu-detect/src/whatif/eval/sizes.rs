//! `--track-size`: self-inflicted-lookup's fix, "keep the size (or offset) in a variable":
//! a size or position lookup of a file the process writes is answered from what its own
//! writes imply, on the size tracking the detector uses.

use super::*;
use crate::detectors::self_inflicted_lookup::Sizes;

pub(super) fn track_size(
    p: &Policy,
    sz: &mut Sizes,
    t: &mut Tally,
    c: &mut Call<'_, '_>,
    changes: &Changes,
) {
    let Some(a) = sz.on_syscall(c.s, c.v, c.cx) else {
        return;
    };
    // An existence check asks whether the file is there: a kept size does not answer it
    // (the detector does not count it either).
    if c.s.stack.is_some_and(|id| {
        crate::detectors::self_inflicted_lookup::existence_check(&c.cx.stack(id), c.cx)
    }) {
        return;
    }
    if !c.in_scope(p, &mut t.scope) {
        return;
    }
    let Some(d) = a.derived else {
        // Nothing written since the process last asked (or opened): it asks.
        t.governed(c);
        return;
    };
    // The variable answers, whatever another process did meanwhile: it would not know.
    t.removed(c);
    if d == a.ans {
        return;
    }
    let s = c.s;
    let other = changes
        .newest_other(a.path, c.v.image)
        .filter(|_| a.foreign || a.other_change);
    let cause = if let Some(ch) = other {
        let command = c.cx.replay.image_command(ch.image, c.cx.strings);
        Cause {
            kind: "other_process",
            pid: Some(ch.pid),
            command: Some(command.clone()),
            call: Some(ch.sys.name()),
            site: None,
            ts: Some(ch.ts),
            text: format!(
                "another traced process changed it: pid {} ({command}), {}; the kept size \
                 could not see it",
                ch.pid,
                ch.sys.name()
            ),
        }
    } else {
        Cause {
            kind: "untraced",
            pid: None,
            command: None,
            call: None,
            site: None,
            ts: None,
            text: "the file's size changed with no change dejavu saw (a program outside the \
                   recording, or a handle it does not follow): the recording cannot rule out \
                   more such changes"
                .to_string(),
        }
    };
    let st = Stale {
        ts: s.ts,
        pid: s.pid,
        path: c.cx.path(a.path),
        call: s.sys.name(),
        site: c.site(),
        served: format!("{} {d}", a.what),
        actual: format!("{} {}", a.what, a.ans),
        cause,
    };
    t.stale(st);
}
