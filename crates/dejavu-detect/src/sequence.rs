//! The fixed sequence of calls a function makes each time it runs: per thread and call
//! site function, its calls are cut into runs where the first call's kind comes round
//! again (stat(guest/NAME) -> ENOENT, stat(host/NAME), lstat(host/NAME), then the next
//! NAME); when one run shape covers most of the function's calls, the finding at that
//! function says "per call of path_filestat_get: 3 calls, 2 redundant".

use crate::callsite::SiteKey;
use crate::detectors::lookup::question;
use crate::{Cx, Sequence};
use dejavu_replay::{PathKey, View};
use dejavu_trace::{StrId, Sys, Syscall};
use rustc_hash::FxHashMap;

/// Longest run kept: a function whose runs are longer is not a small loop body.
const MAX_RUN: usize = 64;
/// Runs needed to call it a sequence.
const MIN_RUNS: u64 = 5;

/// One call's kind: what it did (stat, lstat, openat...), in which directory, and how it
/// failed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Sig {
    verb: &'static str,
    dir: u32,
    errno: i32,
}

#[derive(Default)]
struct Run {
    calls: Vec<(u32, u64, Option<PathKey>)>,
}

#[derive(Default)]
struct Shape {
    runs: u64,
    redundant: u64,
    /// The paths of the first run, and whether each step's path changed between runs.
    paths: Vec<Option<PathKey>>,
    varies: Vec<bool>,
}

/// Tracks call sequences over one analysis.
#[derive(Default)]
pub(crate) struct Tracker {
    sigs: Vec<Sig>,
    sig_ids: FxHashMap<Sig, u32>,
    dirs: Vec<String>,
    dir_ids: FxHashMap<Vec<u8>, u32>,
    dir_of: Vec<u32>,
    runs: FxHashMap<(u32, SiteKey), Run>,
    shapes: FxHashMap<(SiteKey, Vec<u32>), Shape>,
    calls: FxHashMap<SiteKey, u64>,
}

fn parent(p: &[u8]) -> &[u8] {
    match p.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &p[..i],
        None => b"",
    }
}

impl Tracker {
    fn dir(&mut self, cx: &Cx<'_>, p: Option<PathKey>) -> u32 {
        let Some(p) = p else { return u32::MAX };
        let i = p.0 as usize;
        if self.dir_of.len() <= i {
            self.dir_of.resize(i + 1, u32::MAX - 1);
        }
        if self.dir_of[i] == u32::MAX - 1 {
            let d = crate::pattern::mask(parent(cx.replay.paths.bytes(p))).into_bytes();
            let n = self.dir_ids.len() as u32;
            let id = *self.dir_ids.entry(d.clone()).or_insert(n);
            if id == n {
                self.dirs.push(String::from_utf8_lossy(&d).into_owned());
            }
            self.dir_of[i] = id;
        }
        self.dir_of[i]
    }

    /// One call of `s` (after the detectors saw it), made from `site`'s function.
    pub fn call(&mut self, s: &Syscall, v: &View, site: SiteKey, cx: &Cx<'_>) {
        let verb = match question(s) {
            Some(q) => q.name(),
            // A stat of a descriptor, in any of its spellings.
            None if matches!(s.sys, Sys::Fstat | Sys::Newfstatat | Sys::Statx) => "fstat",
            None => s.sys.name(),
        };
        let sig = Sig {
            verb,
            dir: self.dir(cx, v.path),
            errno: s.errno().unwrap_or(0),
        };
        let n = self.sig_ids.len() as u32;
        let id = *self.sig_ids.entry(sig).or_insert(n);
        if id == n {
            self.sigs.push(sig);
        }
        *self.calls.entry(site).or_default() += 1;
        let key = (s.tid, site);
        let run = self.runs.entry(key).or_default();
        if run.calls.first().is_some_and(|c| c.0 == id) {
            let done = std::mem::take(&mut run.calls);
            Self::close(&mut self.shapes, site, done, cx);
        }
        let run = self.runs.entry(key).or_default();
        if run.calls.len() >= MAX_RUN {
            run.calls.clear();
        }
        run.calls.push((id, v.seq, v.path));
    }

    fn close(
        shapes: &mut FxHashMap<(SiteKey, Vec<u32>), Shape>,
        site: SiteKey,
        run: Vec<(u32, u64, Option<PathKey>)>,
        cx: &Cx<'_>,
    ) {
        if run.len() < 2 {
            return;
        }
        let sigs: Vec<u32> = run.iter().map(|c| c.0).collect();
        let sh = shapes.entry((site, sigs)).or_default();
        if sh.runs == 0 {
            sh.paths = run.iter().map(|c| c.2).collect();
            sh.varies = vec![false; run.len()];
        } else {
            for (i, c) in run.iter().enumerate() {
                if sh.paths[i] != c.2 {
                    sh.varies[i] = true;
                }
            }
        }
        sh.runs += 1;
        sh.redundant += run.iter().filter(|c| cx.is_marked(c.1)).count() as u64;
    }

    /// The sequences found, by function: (function, file) -> sequence.
    pub fn finish(mut self, cx: &Cx<'_>) -> Vec<(Option<StrId>, Option<StrId>, Sequence)> {
        let open: Vec<((u32, SiteKey), Run)> = self.runs.drain().collect();
        for ((_, site), run) in open {
            Self::close(&mut self.shapes, site, run.calls, cx);
        }
        let mut best: FxHashMap<SiteKey, (&Vec<u32>, &Shape)> = FxHashMap::default();
        for ((site, sigs), sh) in &self.shapes {
            let better = match best.get(site) {
                None => true,
                Some((bs, b)) => {
                    (
                        sh.runs * sigs.len() as u64,
                        std::cmp::Reverse(sigs.as_slice()),
                    ) > (b.runs * bs.len() as u64, std::cmp::Reverse(bs.as_slice()))
                }
            };
            if better {
                best.insert(*site, (sigs, sh));
            }
        }
        let mut out = Vec::new();
        for (site, (sigs, sh)) in best {
            let total = self.calls.get(&site).copied().unwrap_or(0);
            let covered = sh.runs * sigs.len() as u64;
            if sh.runs < MIN_RUNS || covered * 2 < total || sh.redundant == 0 {
                continue;
            }
            let steps = sigs
                .iter()
                .enumerate()
                .map(|(i, &g)| {
                    let sig = self.sigs[g as usize];
                    let mut step = sig.verb.to_string();
                    match (sh.paths[i], sh.varies[i]) {
                        (Some(p), false) => {
                            step.push(' ');
                            step.push_str(&cx.path(p));
                        }
                        (Some(p), true) => {
                            // The directory as the first run named it (the signature's
                            // is masked: a generated name is one directory to people).
                            let d = String::from_utf8_lossy(parent(cx.replay.paths.bytes(p)))
                                .into_owned();
                            step.push(' ');
                            step.push_str(d.trim_end_matches('/'));
                            step.push_str("/*");
                        }
                        (None, _) => {}
                    }
                    if sig.errno != 0 {
                        step.push_str(" -> ");
                        step.push_str(
                            dejavu_trace::names::errno_name(sig.errno).unwrap_or("error"),
                        );
                    }
                    step
                })
                .collect();
            let s = |id: Option<StrId>| {
                id.map(|i| cx.strings.lossy(i).into_owned())
                    .unwrap_or_default()
            };
            out.push((
                site.function,
                site.file,
                Sequence {
                    function: s(site.function),
                    file: s(site.file),
                    iterations: sh.runs,
                    calls: sigs.len() as u32,
                    redundant: (sh.redundant as f64 / sh.runs as f64 * 10.0).round() / 10.0,
                    steps,
                },
            ));
        }
        out
    }
}
