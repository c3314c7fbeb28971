//! Shared bookkeeping for detectors: per (process, path) tallies, and turning them into
//! findings with paths grouped into patterns (`/app/node_modules/*/package.json`) when a
//! process repeats the same small work across many paths.

use crate::{CacheVerdict, Cx, DetectorInfo, Finding, Severity};
use dejavu_replay::PathKey;
use dejavu_trace::Sys;
use rustc_hash::FxHashMap;

/// Counts for one (process, path).
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Calls of the pattern.
    pub calls: u64,
    /// Of which redundant.
    pub redundant: u64,
    /// Time in the redundant ones, ns.
    pub wasted_ns: u64,
    /// First redundant call, ns.
    pub first_ts: u64,
    /// Last redundant call, ns.
    pub last_ts: u64,
    /// Answers that changed with no observed mutation (another program changed the file).
    pub stale: u64,
    /// Repeats that were necessary because an observed mutation came in between.
    pub invalidations: u64,
    /// One of those mutating calls, for the hazard text.
    pub invalidated_by: Option<Sys>,
}

impl Tally {
    /// Counts one redundant call.
    #[inline]
    pub fn redundant(&mut self, ts: u64, dur: u64) {
        if self.redundant == 0 || ts < self.first_ts {
            self.first_ts = ts;
        }
        self.last_ts = self.last_ts.max(ts);
        self.redundant += 1;
        self.wasted_ns += dur;
    }

    fn merge(&mut self, o: &Tally) {
        if o.redundant > 0 && (self.redundant == 0 || o.first_ts < self.first_ts) {
            self.first_ts = o.first_ts;
        }
        self.last_ts = self.last_ts.max(o.last_ts);
        self.calls += o.calls;
        self.redundant += o.redundant;
        self.wasted_ns += o.wasted_ns;
        self.stale += o.stale;
        self.invalidations += o.invalidations;
        self.invalidated_by = self.invalidated_by.or(o.invalidated_by);
    }
}

/// Tallies of one detector, by (pid, path).
#[derive(Debug, Default)]
pub struct Tallies {
    map: FxHashMap<(u32, PathKey), Tally>,
}

/// How a detector words its findings.
#[derive(Debug, Clone, Copy)]
pub struct Wording {
    /// Include the cache counterfactual.
    pub cache: bool,
}

impl Tallies {
    /// The tally of (pid, path).
    #[inline]
    pub fn get(&mut self, pid: u32, path: PathKey) -> &mut Tally {
        self.map.entry((pid, path)).or_default()
    }

    /// Findings: per process, each path with at least `min_calls` redundant calls on its
    /// own, the rest together under one pattern. `hazards(tally, cx)` adds the
    /// detector's hazards for a (merged) tally.
    pub fn findings(
        &self,
        info: &DetectorInfo,
        cx: &Cx<'_>,
        wording: Wording,
        hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
    ) -> Vec<Finding> {
        let min = cx.config.min_calls.max(1);
        let mut by_pid: FxHashMap<u32, Vec<(PathKey, &Tally)>> = FxHashMap::default();
        for ((pid, path), t) in &self.map {
            if t.redundant > 0 {
                by_pid.entry(*pid).or_default().push((*path, t));
            }
        }
        let mut out = Vec::new();
        for (pid, mut items) in by_pid {
            items.sort_by(|a, b| b.1.redundant.cmp(&a.1.redundant).then(a.0.cmp(&b.0)));
            let (big, small): (Vec<_>, Vec<_>) =
                items.into_iter().partition(|(_, t)| t.redundant >= min);
            for (path, t) in big {
                out.push(make(info, cx, wording, hazards, pid, &[path], t));
            }
            if !small.is_empty() {
                let mut merged = Tally::default();
                for (_, t) in &small {
                    merged.merge(t);
                }
                let paths: Vec<PathKey> = small.iter().map(|(p, _)| *p).collect();
                out.push(make(info, cx, wording, hazards, pid, &paths, &merged));
            }
        }
        out
    }
}

fn make(
    info: &DetectorInfo,
    cx: &Cx<'_>,
    wording: Wording,
    hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
    pid: u32,
    paths: &[PathKey],
    t: &Tally,
) -> Finding {
    let names: Vec<String> = paths.iter().map(|&p| cx.path(p)).collect();
    let (shown, examples) = if names.len() <= 3 {
        (names.clone(), Vec::new())
    } else {
        (
            vec![pattern(&names)],
            names.iter().take(5).cloned().collect(),
        )
    };
    let share = cx.share(t.wasted_ns);
    Finding {
        detector: info.id,
        severity: Severity::grade(share, t.redundant),
        pid,
        command: cx.command(pid),
        paths: shown,
        path_count: paths.len() as u64,
        example_paths: examples,
        calls: t.calls,
        redundant_calls: t.redundant,
        wasted_ns: t.wasted_ns,
        share,
        first_ts: t.first_ts,
        last_ts: t.last_ts,
        fix: info.fix.to_string(),
        hazards: hazards(t, cx),
        cache: wording.cache.then_some(CacheVerdict {
            saved_calls: t.redundant,
            stale_answers: t.stale,
            safe: t.stale == 0,
        }),
        example: None,
        callsites: Vec::new(),
    }
}

/// One pattern covering every path: differing components become `*`, differing depths
/// `**`, and differing file names that share an extension `*.ext`.
pub fn pattern(paths: &[String]) -> String {
    match paths {
        [] => String::new(),
        [one] => one.clone(),
        _ => {
            let split: Vec<Vec<&str>> = paths.iter().map(|p| p.split('/').collect()).collect();
            let depth = split[0].len();
            if split.iter().all(|c| c.len() == depth) {
                let comps: Vec<String> = (0..depth)
                    .map(|i| {
                        let first = split[0][i];
                        if split.iter().all(|c| c[i] == first) {
                            first.to_string()
                        } else if i == depth - 1 {
                            star_name(split.iter().map(|c| c[i]))
                        } else {
                            "*".to_string()
                        }
                    })
                    .collect();
                return comps.join("/");
            }
            // Different depths: common leading directories, `**`, common or starred name.
            let min = split.iter().map(|c| c.len()).min().unwrap_or(0);
            let mut lead = 0;
            while lead + 1 < min && split.iter().all(|c| c[lead] == split[0][lead]) {
                lead += 1;
            }
            let mut out: Vec<String> = split[0][..lead].iter().map(|s| s.to_string()).collect();
            out.push("**".into());
            out.push(star_name(split.iter().map(|c| *c.last().unwrap_or(&""))));
            out.join("/")
        }
    }
}

fn star_name<'a>(mut names: impl Iterator<Item = &'a str> + Clone) -> String {
    let first = names.clone().next().unwrap_or("");
    if names.clone().all(|n| n == first) {
        return first.to_string();
    }
    let ext = |n: &str| n.rfind('.').filter(|&i| i > 0).map(|i| n[i..].to_string());
    match ext(first) {
        Some(e) if names.all(|n| ext(n).as_deref() == Some(e.as_str())) => format!("*{e}"),
        _ => "*".to_string(),
    }
}

/// The usual cache hazards, from a tally: invalidation points and external changes.
pub fn cache_hazards(t: &Tally, what: &str) -> Vec<String> {
    let mut h = Vec::new();
    if t.invalidations > 0 {
        let by = t.invalidated_by.map(|s| s.name()).unwrap_or("a write");
        h.push(format!(
            "{} repeat(s) followed a change the program itself made ({by}): a cache must drop the {what} \
             on that call",
            t.invalidations
        ));
    }
    if t.stale > 0 {
        h.push(format!(
            "the answer changed {} time(s) with no change dejavu saw (another program changed it): \
             caching it is unsafe unless those changes can be ignored or detected",
            t.stale
        ));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::pattern;

    fn p(v: &[&str]) -> String {
        pattern(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn patterns_read_like_globs() {
        assert_eq!(
            p(&[
                "/a/node_modules/x/package.json",
                "/a/node_modules/y/package.json"
            ]),
            "/a/node_modules/*/package.json"
        );
        assert_eq!(p(&["/src/a.js", "/src/b.js"]), "/src/*.js");
        assert_eq!(p(&["/src/a.js", "/src/b.ts"]), "/src/*");
        assert_eq!(
            p(&["/usr/lib/py/os.py", "/usr/lib/py/enc/utf_8.py"]),
            "/usr/lib/py/**/*.py"
        );
        assert_eq!(p(&["/x/y"]), "/x/y");
    }
}
