//! Shared bookkeeping for detectors: per (process, path) tallies, and turning them into
//! findings with paths grouped into patterns (`/app/node_modules/*/package.json`) when a
//! process repeats the same small work across many paths.

use crate::{CacheVerdict, Cx, DetectorInfo, Finding, Severity};
use dejavu_replay::PathKey;
use dejavu_trace::{StackId, Sys};
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
    /// Where the redundant calls came from.
    pub sites: Sites,
}

/// Redundant calls by call stack: the most frequent few stacks, the rest counted.
#[derive(Clone, Debug, Default)]
pub struct Sites {
    list: Vec<(StackId, u64, u64)>,
    /// Redundant calls from stacks beyond the kept ones.
    pub other: u64,
}

/// Distinct stacks kept per tally.
const MAX_SITES: usize = 32;

impl Sites {
    /// `n` redundant calls taking `ns` from `stack` (calls without a stack are not listed).
    #[inline]
    pub fn add(&mut self, stack: Option<StackId>, n: u64, ns: u64) {
        let Some(st) = stack else { return };
        if let Some(e) = self.list.iter_mut().find(|e| e.0 == st) {
            e.1 += n;
            e.2 += ns;
        } else if self.list.len() < MAX_SITES {
            self.list.push((st, n, ns));
        } else {
            self.other += n;
        }
    }

    /// Adds another tally's sites.
    pub fn merge(&mut self, o: &Sites) {
        for &(st, n, ns) in &o.list {
            self.add(Some(st), n, ns);
        }
        self.other += o.other;
    }

    /// (stack, redundant calls, ns), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (StackId, u64, u64)> + '_ {
        self.list.iter().copied()
    }

    /// No stacks seen.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

impl Tally {
    /// Counts one redundant call, made from `stack` (when the trace has stacks).
    #[inline]
    pub fn redundant(&mut self, ts: u64, dur: u64, stack: Option<StackId>) {
        self.sites.add(stack, 1, dur);
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
        self.sites.merge(&o.sites);
    }
}

/// Tallies of one detector, by (pid, path), each with the detector's own per-path state
/// `E` beside it (one look-up per call instead of two).
///
/// Path keys are dense and handed out in first-seen order, so a process's index is an
/// array by path key once it knows enough paths to fill it (a sweep over many paths then
/// walks memory in order); a process that knows few paths keeps a small hash map.
#[derive(Debug)]
pub struct Tallies<E = ()> {
    index: FxHashMap<u32, Index>,
    entries: Vec<Entry<E>>,
}

#[derive(Debug)]
struct Entry<E> {
    pid: u32,
    path: PathKey,
    tally: Tally,
    state: E,
}

#[derive(Debug)]
enum Index {
    Sparse(FxHashMap<u32, u32>),
    /// Entry index + 1 by path key; 0 is none.
    Dense(Vec<u32>),
}

impl Index {
    #[inline]
    fn get(&self, path: PathKey) -> Option<usize> {
        match self {
            Index::Sparse(m) => m.get(&path.0).map(|&i| i as usize),
            Index::Dense(v) => match v.get(path.0 as usize) {
                Some(&i) if i != 0 => Some(i as usize - 1),
                _ => None,
            },
        }
    }

    fn insert(&mut self, path: PathKey, i: usize) {
        match self {
            Index::Sparse(m) => {
                m.insert(path.0, i as u32);
                // Dense once the array would be at most 8x the entries it holds.
                let max = m.keys().copied().max().unwrap_or(0) as usize;
                if m.len() >= 1024 && max < m.len() * 8 {
                    let mut v = vec![0u32; max + 1];
                    for (&k, &e) in m.iter() {
                        v[k as usize] = e + 1;
                    }
                    *self = Index::Dense(v);
                }
            }
            Index::Dense(v) => {
                let k = path.0 as usize;
                if k >= v.len() {
                    v.resize((k + 1).max(v.len() * 2), 0);
                }
                v[k] = i as u32 + 1;
            }
        }
    }
}

impl<E> Default for Tallies<E> {
    fn default() -> Self {
        Tallies {
            index: FxHashMap::default(),
            entries: Vec::new(),
        }
    }
}

/// How a detector words its findings.
#[derive(Debug, Clone, Copy)]
pub struct Wording {
    /// Include the cache counterfactual.
    pub cache: bool,
}

impl<E: Default> Tallies<E> {
    #[inline]
    fn slot(&mut self, pid: u32, path: PathKey) -> usize {
        let idx = self
            .index
            .entry(pid)
            .or_insert_with(|| Index::Sparse(FxHashMap::default()));
        if let Some(i) = idx.get(path) {
            return i;
        }
        let i = self.entries.len();
        self.entries.push(Entry {
            pid,
            path,
            tally: Tally::default(),
            state: E::default(),
        });
        idx.insert(path, i);
        i
    }

    /// The tally of (pid, path).
    #[inline]
    pub fn get(&mut self, pid: u32, path: PathKey) -> &mut Tally {
        let i = self.slot(pid, path);
        &mut self.entries[i].tally
    }

    /// The tally of (pid, path) and the detector's state for it.
    #[inline]
    pub fn get_with(&mut self, pid: u32, path: PathKey) -> (&mut Tally, &mut E) {
        let i = self.slot(pid, path);
        let e = &mut self.entries[i];
        (&mut e.tally, &mut e.state)
    }

    /// The detector's state for (pid, path), if any.
    pub fn state(&self, pid: u32, path: PathKey) -> Option<&E> {
        let i = self.index.get(&pid)?.get(path)?;
        Some(&self.entries[i].state)
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
        self.findings_with(info, cx, wording, hazards, &mut |_, _, _| {})
    }

    /// As `findings`, then `each(finding, pid, paths)` with the paths the finding covers,
    /// so a detector can add what its own per-path state says (an example, hazards).
    pub fn findings_with(
        &self,
        info: &DetectorInfo,
        cx: &Cx<'_>,
        wording: Wording,
        hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
        each: &mut dyn FnMut(&mut Finding, u32, &[PathKey]),
    ) -> Vec<Finding> {
        let min = cx.config.min_calls.max(1);
        let mut by_pid: FxHashMap<u32, Vec<(PathKey, &Tally)>> = FxHashMap::default();
        for e in &self.entries {
            if e.tally.redundant > 0 {
                by_pid.entry(e.pid).or_default().push((e.path, &e.tally));
            }
        }
        let mut pids: Vec<u32> = by_pid.keys().copied().collect();
        pids.sort_unstable();
        let mut out = Vec::new();
        for pid in pids {
            let items = by_pid.remove(&pid).unwrap_or_default();
            let (mut big, mut small): (Vec<_>, Vec<_>) =
                items.into_iter().partition(|(_, t)| t.redundant >= min);
            big.sort_unstable_by(|a, b| b.1.redundant.cmp(&a.1.redundant).then(a.0.cmp(&b.0)));
            for (path, t) in big {
                let mut f = make(info, cx, wording, hazards, pid, &[path], t);
                each(&mut f, pid, &[path]);
                out.push(f);
            }
            if !small.is_empty() {
                let mut merged = Tally::default();
                for (_, t) in &small {
                    merged.merge(t);
                }
                // Only the examples need sorting: the most redundant few, then by path.
                let n = small.len().min(5);
                if small.len() > n {
                    small.select_nth_unstable_by(n - 1, |a, b| {
                        b.1.redundant.cmp(&a.1.redundant).then(a.0.cmp(&b.0))
                    });
                }
                small[..n]
                    .sort_unstable_by(|a, b| b.1.redundant.cmp(&a.1.redundant).then(a.0.cmp(&b.0)));
                let paths: Vec<PathKey> = small.iter().map(|(p, _)| *p).collect();
                let mut f = make(info, cx, wording, hazards, pid, &paths, &merged);
                each(&mut f, pid, &paths);
                out.push(f);
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
    let (shown, examples) = if paths.len() <= 3 {
        (paths.iter().map(|&p| cx.path(p)).collect(), Vec::new())
    } else {
        let mut b = PatternBuilder::default();
        for &p in paths {
            b.add(cx.replay.paths.bytes(p));
        }
        (
            vec![b.finish()],
            paths.iter().take(5).map(|&p| cx.path(p)).collect(),
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
        callsites: cx.callsites(&t.sites),
    }
}

/// One pattern covering every path: differing components become `*`, differing depths
/// `**`, and differing file names that share an extension `*.ext`.
pub fn pattern(paths: &[String]) -> String {
    let mut b = PatternBuilder::default();
    for p in paths {
        b.add(p.as_bytes());
    }
    b.finish()
}

/// Builds [`pattern`] one path at a time, keeping only the first path and a few flags, so
/// a finding over a million paths does not need a million strings.
#[derive(Debug, Default)]
pub struct PatternBuilder {
    first: Vec<u8>,
    /// Component spans of `first`.
    comps: Vec<(usize, usize)>,
    /// Per component: equal in every path so far.
    equal: Vec<bool>,
    same_depth: bool,
    /// Leading components equal in every path, counted over the shortest depth.
    lead: usize,
    min_depth: usize,
    names_equal: bool,
    /// Every file name so far has the first one's extension.
    ext_shared: bool,
    n: usize,
}

fn components(p: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        match p[start..].iter().position(|&c| c == b'/') {
            Some(i) => {
                let span = (start, start + i);
                start += i + 1;
                Some(span)
            }
            None => {
                done = true;
                Some((start, p.len()))
            }
        }
    })
}

fn ext(name: &[u8]) -> Option<&[u8]> {
    name.iter()
        .rposition(|&c| c == b'.')
        .filter(|&i| i > 0)
        .map(|i| &name[i..])
}

impl PatternBuilder {
    /// Adds one path.
    pub fn add(&mut self, p: &[u8]) {
        self.n += 1;
        if self.n == 1 {
            self.first = p.to_vec();
            self.comps = components(p).collect();
            self.equal = vec![true; self.comps.len()];
            self.same_depth = true;
            self.lead = self.comps.len();
            self.min_depth = self.comps.len();
            self.names_equal = true;
            self.ext_shared = true;
            return;
        }
        let mut depth = 0;
        let mut last = (0, 0);
        let mut lead_ok = true;
        for (i, (a, b)) in components(p).enumerate() {
            depth += 1;
            last = (a, b);
            let same = self
                .comps
                .get(i)
                .is_some_and(|&(fa, fb)| self.first[fa..fb] == p[a..b]);
            if let Some(e) = self.equal.get_mut(i) {
                *e &= same;
            }
            if lead_ok && !same {
                lead_ok = false;
                self.lead = self.lead.min(i);
            }
        }
        if depth != self.comps.len() {
            self.same_depth = false;
        }
        self.min_depth = self.min_depth.min(depth);
        let name = &p[last.0..last.1];
        let first_name = self
            .comps
            .last()
            .map_or(&[][..], |&(a, b)| &self.first[a..b]);
        self.names_equal &= name == first_name;
        self.ext_shared &= ext(first_name).is_some() && ext(first_name) == ext(name);
    }

    fn star_name(&self) -> String {
        let first_name = self
            .comps
            .last()
            .map_or(&[][..], |&(a, b)| &self.first[a..b]);
        if self.names_equal {
            String::from_utf8_lossy(first_name).into_owned()
        } else if self.ext_shared {
            format!(
                "*{}",
                String::from_utf8_lossy(ext(first_name).unwrap_or_default())
            )
        } else {
            "*".to_string()
        }
    }

    /// The pattern.
    pub fn finish(&self) -> String {
        if self.n <= 1 {
            return String::from_utf8_lossy(&self.first).into_owned();
        }
        let comp = |i: usize| {
            let (a, b) = self.comps[i];
            String::from_utf8_lossy(&self.first[a..b]).into_owned()
        };
        let depth = self.comps.len();
        if self.same_depth {
            let parts: Vec<String> = (0..depth)
                .map(|i| {
                    if self.equal[i] {
                        comp(i)
                    } else if i == depth - 1 {
                        self.star_name()
                    } else {
                        "*".to_string()
                    }
                })
                .collect();
            return parts.join("/");
        }
        // Different depths: the common leading directories, `**`, the common or starred
        // file name. The name itself never counts as a leading directory.
        let lead = self.lead.min(self.min_depth.saturating_sub(1));
        let mut parts: Vec<String> = (0..lead).map(comp).collect();
        parts.push("**".into());
        parts.push(self.star_name());
        parts.join("/")
    }
}

/// Adds a detector's own per-(pid, path) data to findings made by
/// [`Tallies::findings_with`]: `add` merges the data of the paths a finding covers, `apply`
/// writes the sum into the finding (an example, hazards).
pub fn extras<'m, E: Default>(
    map: &'m FxHashMap<(u32, PathKey), E>,
    add: impl Fn(&mut E, &E) + 'm,
    mut apply: impl FnMut(&mut Finding, &E) + 'm,
) -> impl FnMut(&mut Finding, u32, &[PathKey]) + 'm {
    move |f, pid, paths| {
        let mut sum = E::default();
        let mut any = false;
        for &p in paths {
            if let Some(e) = map.get(&(pid, p)) {
                add(&mut sum, e);
                any = true;
            }
        }
        if any {
            apply(f, &sum);
        }
    }
}

/// The write family: calls that write through their `fd` argument.
pub fn is_write(sys: Sys) -> bool {
    matches!(
        sys,
        Sys::Write | Sys::Pwrite64 | Sys::Writev | Sys::Pwritev | Sys::Pwritev2
    )
}

/// Calls whose `fd` (or `fd2`) argument is an open file they act on.
pub fn uses_fd(sys: Sys) -> bool {
    use Sys::*;
    matches!(
        sys,
        Close
            | Read
            | Pread64
            | Readv
            | Preadv
            | Preadv2
            | Write
            | Pwrite64
            | Writev
            | Pwritev
            | Pwritev2
            | Lseek
            | Fstat
            | Newfstatat
            | Statx
            | Getdents64
            | Fchmod
            | Fchown
            | Ftruncate
            | Fsync
            | Fdatasync
            | SyncFileRange
            | Dup
            | Dup2
            | Dup3
            | Fcntl
            | Sendfile
            | CopyFileRange
            | Splice
            | Utimensat
            | Fchdir
    )
}

/// 12345 -> "12,345".
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte count for people: "512 bytes", "12.3 kB", "1.2 MB", "3.4 GB" (powers of 1000).
pub fn bytes(n: u64) -> String {
    match n {
        0..=999 => format!("{n} byte{}", plural(n)),
        1_000..=999_999 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.1} GB", n as f64 / 1e9),
    }
}

/// "s" unless `n` is 1.
pub fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
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
