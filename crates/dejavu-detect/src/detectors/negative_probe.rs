//! negative-probe: the same lookup answered ENOENT/ENOTDIR again and again, with nothing
//! created in between (existsSync loops, search paths probed per call).

use super::lookup::{is_lookup_call, is_negative, question, Question};
use crate::group::{cache_hazards, Tallies, Wording};
use crate::{Config, Cx, Detector, DetectorInfo, Finding};
use dejavu_replay::{PathKey, Version, View};
use dejavu_trace::{ev, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Documentation and constructor.
pub static INFO: DetectorInfo = DetectorInfo {
    id: "negative-probe",
    summary: "the same lookup failing with ENOENT again and again, nothing created in between",
    explain: "A lookup (stat family, access, readlink, or an open) that fails with ENOENT or ENOTDIR is \
redundant when the same process already got the same failure for the same path and nothing was created \
in between: neither the path itself nor any entry of its parent directory changed (a create, rename or \
unlink there moves the version dejavu compares). Typical sources: existsSync/os.path.exists in a loop, \
the same search path probed for every module or config lookup, an optional file looked for per request.",
    example: "for each request: fs.existsSync('.ignore')   // absent, asked 5,000 times",
    fix: "remember that the path is absent and recheck only when the directory changes (or on a timer \
the program can afford), or look it up once at start-up",
    hazards: "Caching a negative answer is the classic hazard: a file created later is missed unless \
creates in its directory invalidate the entry (dejavu lists those it saw). Never cache a failure that \
may be transient.",
    options: &[],
    make: |_cfg: &Config| Box::new(NegativeProbe::default()),
};

#[derive(Clone, Copy)]
struct Last {
    version: Version,
    errno: i64,
}

#[derive(Default)]
struct NegativeProbe {
    last: FxHashMap<(u32, PathKey, Question), Last>,
    tallies: Tallies,
}

impl Detector for NegativeProbe {
    fn wants(&self, sys: Sys) -> bool {
        is_lookup_call(sys)
    }

    fn on_syscall(&mut self, s: &Syscall, v: &View, cx: &Cx<'_>) {
        if s.ev & ev::UNFINISHED != 0 {
            return;
        }
        let (Some(q), Some(path)) = (question(s), v.path) else {
            return;
        };
        let key = (v.image, path, q);
        if !is_negative(s) {
            // The path exists now: a later ENOENT is a new fact, not a repeat.
            self.last.remove(&key);
            return;
        }
        let prev = self.last.insert(
            key,
            Last {
                version: v.negative_version,
                errno: s.ret,
            },
        );
        if !cx.config.counts(s.ts) {
            return;
        }
        let t = self.tallies.get(v.image, path);
        t.calls += 1;
        match prev {
            Some(p) if p.version == v.negative_version && p.errno == s.ret => {
                t.redundant(s.ts, s.dur, s.stack);
                cx.mark(v.seq, s.dur, s.stack);
            }
            Some(p) if p.version == v.negative_version => t.stale += 1,
            Some(_) => {
                t.invalidations += 1;
                let parent = cx.replay.paths.parent(path);
                t.invalidated_by = t
                    .invalidated_by
                    .or(cx.replay.paths.changed_by(path))
                    .or(parent.and_then(|p| cx.replay.paths.changed_by(p)));
            }
            None => {}
        }
    }

    fn finish(&mut self, cx: &Cx<'_>) -> Vec<Finding> {
        self.tallies.findings(&INFO, cx, Wording { cache: true }, &|t, _| {
            let mut h = cache_hazards(t, "negative entry");
            h.push(
                "a negative cache must be dropped when the path or an entry of its directory is created, \
                 renamed or removed"
                    .into(),
            );
            h
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{file, TraceBuilder};

    #[test]
    fn repeated_enoent_is_redundant_until_something_is_created_in_the_directory() {
        let mut b = TraceBuilder::new();
        for _ in 0..3 {
            b.access("/w/.ignore", 0, -2);
        }
        // A sibling is created: the directory changed, the next ENOENT is a new fact.
        b.open("/w/other", 0o101, 3, Some(file(5, 0, 1)));
        b.access("/w/.ignore", 0, -2);
        b.access("/w/.ignore", 0, -2);
        let f = b.findings("negative-probe");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].calls, f[0].redundant_calls), (5, 3));
        assert!(
            f[0].hazards.iter().any(|h| h.contains("openat")),
            "{:?}",
            f[0].hazards
        );
    }

    #[test]
    fn a_path_that_appears_resets_the_probe() {
        let mut b = TraceBuilder::new();
        b.stat("/w/lock", Err(2));
        b.stat("/w/lock", Ok(file(1, 0, 1))); // created by someone else
        b.stat("/w/lock", Err(2)); // and removed again
        assert!(b.findings("negative-probe").is_empty());
    }
}
