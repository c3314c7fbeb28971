//! Shared bookkeeping for detectors: tallies per (process image, path), and turning them
//! into findings that each name one fix: grouped by program, owner and call site (the
//! same problem in 24 processes of cc1 is one finding), and without a call site by path
//! pattern (`/srv/www/files/*`).

use crate::callsite::SiteKey;
use crate::{CacheVerdict, Cx, DetectorInfo, Finding, Owner, PathCount, ProgramCount, Severity};
use dejavu_replay::{FdKind, PathKey};
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
    /// Of the answers that changed with no observed mutation, those that changed only in a
    /// directory's times, size or link count (lookup::dir_times_only), not in `stale`.
    pub stale_times: u64,
    /// Repeats that were necessary because an observed mutation came in between.
    pub invalidations: u64,
    /// One of those mutating calls, for the hazard text.
    pub invalidated_by: Option<Sys>,
    /// Where the redundant calls came from.
    pub sites: Sites,
    /// Where the calls they repeat came from: the first of each chain of repeats (the
    /// call a cache would have been filled by), counted once per redundant call.
    pub firsts: Sites,
}

/// Redundant calls by call stack: up to MAX_SITES distinct stacks per tally, the rest
/// counted; a merge of tallies keeps all of theirs.
#[derive(Clone, Debug, Default)]
pub struct Sites {
    list: Vec<(StackId, u64, u64)>,
    /// Where each stack is in `list`, once it is longer than LINEAR.
    index: Option<FxHashMap<StackId, usize>>,
    /// Redundant calls from stacks beyond the kept ones.
    pub other: u64,
}

/// Distinct stacks kept per tally. A library's call deep in a program without frames of
/// its own has many stacks for one line (a resolver's realpath: its callers' callers
/// differ), and a call from a stack not kept is a call its line does not count.
const MAX_SITES: usize = 4096;
/// Stacks looked for by a walk of the list, below this many; by a hash map above.
const LINEAR: usize = 32;

impl Sites {
    /// Where `st` is in the list, adding it while the list is shorter than `cap`.
    #[inline]
    fn slot(&mut self, st: StackId, cap: usize) -> Option<usize> {
        let at = match &self.index {
            Some(ix) => ix.get(&st).copied(),
            None => self.list.iter().position(|e| e.0 == st),
        };
        if at.is_some() || self.list.len() >= cap {
            return at;
        }
        let i = self.list.len();
        self.list.push((st, 0, 0));
        match &mut self.index {
            Some(ix) => {
                ix.insert(st, i);
            }
            None if self.list.len() > LINEAR => {
                self.index = Some(
                    self.list
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (e.0, i))
                        .collect(),
                );
            }
            None => {}
        }
        Some(i)
    }

    /// Counts `n` calls taking `ns` on `st`'s entry, adding it while the list is shorter
    /// than `cap`; false when it was not kept.
    #[inline]
    fn put(&mut self, st: StackId, n: u64, ns: u64, cap: usize) -> bool {
        let Some(i) = self.slot(st, cap) else {
            return false;
        };
        self.list[i].1 += n;
        self.list[i].2 += ns;
        true
    }

    /// `n` redundant calls taking `ns` from `stack` (calls without a stack are not listed).
    #[inline]
    pub fn add(&mut self, stack: Option<StackId>, n: u64, ns: u64) {
        let Some(st) = stack else { return };
        if !self.put(st, n, ns, MAX_SITES) {
            self.other += n;
        }
    }

    /// Adds another tally's sites, all of them: a finding merges the tallies of its
    /// paths, each with stacks of its own (a resolver's realpath of 90 directories), and
    /// a stack left out there would be calls left out of their line's count.
    pub fn merge(&mut self, o: &Sites) {
        for &(st, n, ns) in &o.list {
            self.put(st, n, ns, usize::MAX);
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
        self.stale_times += o.stale_times;
        self.invalidations += o.invalidations;
        self.invalidated_by = self.invalidated_by.or(o.invalidated_by);
        self.sites.merge(&o.sites);
        self.firsts.merge(&o.firsts);
    }
}

/// Tallies of one detector, by (process image, path) (`View::image`: a process that execs
/// starts over), each with the detector's own per-path state `E` beside it (one look-up
/// per call instead of two).
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
    image: u32,
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
    fn slot(&mut self, image: u32, path: PathKey) -> usize {
        let idx = self
            .index
            .entry(image)
            .or_insert_with(|| Index::Sparse(FxHashMap::default()));
        if let Some(i) = idx.get(path) {
            return i;
        }
        let i = self.entries.len();
        self.entries.push(Entry {
            image,
            path,
            tally: Tally::default(),
            state: E::default(),
        });
        idx.insert(path, i);
        i
    }

    /// The tally of (image, path).
    #[inline]
    pub fn get(&mut self, image: u32, path: PathKey) -> &mut Tally {
        let i = self.slot(image, path);
        &mut self.entries[i].tally
    }

    /// The tally of (image, path) and the detector's state for it.
    #[inline]
    pub fn get_with(&mut self, image: u32, path: PathKey) -> (&mut Tally, &mut E) {
        let i = self.slot(image, path);
        let e = &mut self.entries[i];
        (&mut e.tally, &mut e.state)
    }

    /// The detector's state for (image, path), if any.
    pub fn state(&self, image: u32, path: PathKey) -> Option<&E> {
        let i = self.index.get(&image)?.get(path)?;
        Some(&self.entries[i].state)
    }

    /// Findings: the tallies grouped by program, owner and call site; tallies without a
    /// call site by path pattern. `hazards(tally, cx)` adds the detector's hazards for a
    /// (merged) tally.
    pub fn findings(
        &self,
        info: &DetectorInfo,
        cx: &Cx<'_>,
        wording: Wording,
        hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
    ) -> Vec<Finding> {
        self.findings_with(info, cx, wording, hazards, &mut |_, _| {})
    }

    /// As `findings`, then `each(finding, covered)` with the (image, path) pairs the
    /// finding covers, so a detector can add what its own per-path state says (an
    /// example, hazards).
    pub fn findings_with(
        &self,
        info: &DetectorInfo,
        cx: &Cx<'_>,
        wording: Wording,
        hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
        each: &mut Each<'_>,
    ) -> Vec<Finding> {
        let parts: Vec<Part<'_>> = self
            .entries
            .iter()
            .filter(|e| e.tally.redundant > 0)
            .map(|e| Part {
                image: e.image,
                path: e.path,
                tally: &e.tally,
            })
            .collect();
        group(info, cx, wording, hazards, each, parts)
    }
}

/// Paths (the heaviest) whose patterns name a finding's paths for people.
const DISPLAY_PATHS: usize = 2000;

/// What a detector adds to each finding, given the (image, path) pairs it covers.
pub type Each<'e> = dyn FnMut(&mut Finding, &[(u32, PathKey)]) + 'e;

/// One tally to group: its image and path.
pub(crate) struct Part<'a> {
    pub image: u32,
    pub path: PathKey,
    pub tally: &'a Tally,
}

/// Whose a tally is and where it was made: the site that made most of its redundant calls
/// (with the owner its stack says), else the owner its program and path say.
fn place(cx: &Cx<'_>, p: &Part<'_>) -> (String, Owner, Option<SiteKey>) {
    let mut best: Option<(SiteKey, Option<Owner>, u64)> = None;
    let mut sums: Vec<(SiteKey, Option<Owner>, u64)> = Vec::new();
    for (st, n, _) in p.tally.sites.iter() {
        let s = cx.site(st, p.image);
        let Some(k) = s.key else { continue };
        match sums.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.2 += n,
            None => sums.push((k, s.owner, n)),
        }
    }
    for e in sums {
        if best.is_none_or(|b| e.2 > b.2 || (e.2 == b.2 && e.0 < b.0)) {
            best = Some(e);
        }
    }
    let (name, role) = cx.program_role(p.image);
    let owner = if let Some(r) = role {
        r
    } else if let Some((_, Some(o), _)) = best {
        o
    } else {
        let unnamed = best.is_none() && p.tally.sites.iter().next().is_some();
        cx.owner_by_path(
            p.image,
            cx.replay.paths.bytes(p.path),
            p.tally.last_ts,
            unnamed,
        )
    };
    (name, owner, best.map(|b| b.0))
}

/// Groups tallies into findings (see [`Tallies::findings`]).
pub(crate) fn group(
    info: &DetectorInfo,
    cx: &Cx<'_>,
    wording: Wording,
    hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
    each: &mut Each<'_>,
    parts: Vec<Part<'_>>,
) -> Vec<Finding> {
    // The program's own code and its libraries at one call site are one fix whatever
    // program made the calls (a crate's function in each of `cargo test`'s test binaries):
    // grouped without the program (None), which `make` names from the members. Elsewhere
    // the program is part of the group.
    type GroupKey = (Option<String>, Owner, Option<SiteKey>);
    let mut groups: FxHashMap<GroupKey, Vec<Part<'_>>> = FxHashMap::default();
    for p in parts {
        let (name, owner, site) = place(cx, &p);
        let across = site.is_some() && matches!(owner, Owner::Own | Owner::Dependency);
        let k = ((!across).then_some(name), owner, site);
        groups.entry(k).or_default().push(p);
    }
    let mut keys: Vec<GroupKey> = groups.keys().cloned().collect();
    keys.sort();
    let mut out = Vec::new();
    for k in keys {
        let members = groups.remove(&k).unwrap_or_default();
        // A call site is one fix; so is the runtime's or a launcher's work without one
        // (reports fold those into one line each): only the program's own and its
        // dependencies' calls without a site are told apart by path pattern.
        if k.2.is_some() || k.1.folded() {
            out.push(make(info, cx, wording, hazards, each, &k, &members, None));
            continue;
        }
        // No call site: one finding per path pattern, over the distinct paths (the same
        // path in several processes is one).
        let mut distinct: FxHashMap<PathKey, usize> = FxHashMap::default();
        let mut paths: Vec<(PathKey, u64)> = Vec::new();
        let mut of_path: Vec<usize> = Vec::with_capacity(members.len());
        for m in &members {
            let p = m.path;
            let i = *distinct.entry(p).or_insert_with(|| {
                paths.push((p, 0));
                paths.len() - 1
            });
            paths[i].1 += m.tally.redundant;
            of_path.push(i);
        }
        let items: Vec<(&[u8], u64)> = paths
            .iter()
            .map(|&(p, w)| (cx.replay.paths.bytes(p), w))
            .collect();
        let clusters = crate::pattern::clusters(&items);
        let mut cluster_of = vec![0usize; paths.len()];
        for (ci, c) in clusters.iter().enumerate() {
            for &m in &c.members {
                cluster_of[m] = ci;
            }
        }
        let mut parts: Vec<Vec<Part<'_>>> = (0..clusters.len()).map(|_| Vec::new()).collect();
        for (m, pi) in members.into_iter().zip(of_path) {
            parts[cluster_of[pi]].push(m);
        }
        for (c, part) in clusters.iter().zip(parts) {
            out.push(make(info, cx, wording, hazards, each, &k, &part, Some(c)));
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn make(
    info: &DetectorInfo,
    cx: &Cx<'_>,
    wording: Wording,
    hazards: &dyn Fn(&Tally, &Cx<'_>) -> Vec<String>,
    each: &mut Each<'_>,
    (program, owner, site): &(Option<String>, Owner, Option<SiteKey>),
    members: &[Part<'_>],
    cluster: Option<&crate::pattern::Cluster>,
) -> Finding {
    let mut t = Tally::default();
    for m in members {
        t.merge(m.tally);
    }
    // The programs the calls came from, most redundant calls first (then by name).
    let mut programs: Vec<ProgramCount> = Vec::new();
    let mut image_names: FxHashMap<u32, String> = FxHashMap::default();
    match program {
        Some(p) => programs.push(ProgramCount {
            program: p.clone(),
            redundant_calls: t.redundant,
        }),
        None => {
            // Named once per image (a finding's members are its paths in a few images).
            let mut by_image: FxHashMap<u32, u64> = FxHashMap::default();
            for m in members {
                *by_image.entry(m.image).or_default() += m.tally.redundant;
            }
            for (image, n) in by_image {
                let name = cx.program_role(image).0;
                image_names.insert(image, name.clone());
                match programs.iter_mut().find(|p| p.program == name) {
                    Some(p) => p.redundant_calls += n,
                    None => programs.push(ProgramCount {
                        program: name,
                        redundant_calls: n,
                    }),
                }
            }
            programs.sort_by(|a, b| {
                b.redundant_calls
                    .cmp(&a.redundant_calls)
                    .then_with(|| a.program.cmp(&b.program))
            });
        }
    }
    // The key names every program, in the order of their names (not of their calls,
    // which move between runs).
    let mut names: Vec<&str> = programs.iter().map(|p| p.program.as_str()).collect();
    names.sort_unstable();
    let key_program = names.join("+");
    let lead_program = programs
        .first()
        .map(|p| p.program.clone())
        .unwrap_or_default();
    // The image whose calls weigh most names the finding's process (of the program named,
    // when the calls came from several).
    let lead = members
        .iter()
        .filter(|m| program.is_some() || image_names.get(&m.image) == Some(&lead_program))
        .max_by(|a, b| {
            a.tally
                .redundant
                .cmp(&b.tally.redundant)
                .then(b.image.cmp(&a.image))
        })
        .map_or(0, |m| m.image);
    let mut pids: Vec<u32> = members
        .iter()
        .filter_map(|m| cx.replay.images.get(m.image as usize).map(|i| i.pid))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    // Paths: redundant calls per distinct path, then patterns over them.
    let mut per_path: FxHashMap<PathKey, u64> = FxHashMap::default();
    for m in members {
        *per_path.entry(m.path).or_default() += m.tally.redundant;
    }
    let mut by_count: Vec<(PathKey, u64)> = per_path.into_iter().collect();
    by_count.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let items: Vec<(&[u8], u64)> = by_count
        .iter()
        .map(|&(p, n)| (cx.replay.paths.bytes(p), n))
        .collect();
    // Up to three paths are shown as they are; more, as the patterns they make (the
    // finding's own pattern when it is one).
    let clusters = match cluster {
        Some(c) => vec![crate::pattern::Cluster {
            display: c.display.clone(),
            key: c.key.clone(),
            members: Vec::new(),
            weight: c.weight,
        }],
        // For display only: the heaviest paths make the patterns people read.
        None if by_count.len() > 3 => {
            crate::pattern::display_clusters(&items[..items.len().min(DISPLAY_PATHS)])
        }
        None => Vec::new(),
    };
    let shown: Vec<String> = if by_count.len() <= 3 {
        by_count.iter().map(|&(p, _)| cx.path(p)).collect()
    } else {
        clusters.iter().take(3).map(|c| c.display.clone()).collect()
    };
    let top_paths = by_count
        .iter()
        .take(5)
        .map(|&(p, n)| PathCount {
            path: cx.path(p),
            redundant_calls: n,
        })
        .collect();
    let share = cx.share(t.wasted_ns);
    let portable = |p: &str| crate::portable::pattern(p, cx.key_root()).into_owned();
    let what = match (site, cluster) {
        (Some(s), _) => cx.key_label(s),
        (None, Some(c)) => format!("path:{}", portable(&c.key)),
        (None, None) => match clusters.first() {
            Some(c) => format!("path:{}", portable(&c.key)),
            None => match by_count.first() {
                Some(&(p, _)) => format!(
                    "path:{}",
                    portable(&crate::pattern::mask(cx.replay.paths.bytes(p)))
                ),
                None => String::new(),
            },
        },
    };
    let key = format!("{key_program}|{}|{}|{what}", info.id, owner.name());
    // Each program's stacks are read as its own (which frames are its code), when the
    // calls came from several.
    let callsites = if programs.len() > 1 {
        cx.callsites_of(
            members.iter().flat_map(|m| {
                m.tally
                    .sites
                    .iter()
                    .map(move |(st, n, ns)| (st, m.image, n, ns))
            }),
            t.redundant,
        )
    } else {
        cx.callsites(&t.sites, lead, t.redundant)
    };
    // Where the repeated calls were first made, when no site of the repeats made them
    // (one program's stacks: across programs, a site's label may name two places).
    let first_sites = if programs.len() > 1 || t.firsts.iter().next().is_none() {
        Vec::new()
    } else {
        let shown: Vec<String> = callsites.iter().map(|c| c.label()).collect();
        cx.callsites(&t.firsts, lead, t.redundant)
            .into_iter()
            .filter(|c| !shown.contains(&c.label()))
            .take(2)
            .collect()
    };
    let programs = if programs.len() > 1 {
        programs
    } else {
        Vec::new()
    };
    let mut f = Finding {
        detector: info.id,
        severity: Severity::grade(share, t.redundant),
        owner: *owner,
        program: lead_program,
        programs,
        key,
        processes: pids.len() as u64,
        pid: cx.replay.images.get(lead as usize).map_or(0, |i| i.pid),
        command: cx.replay.image_command(lead, cx.strings),
        paths: shown,
        path_count: by_count.len() as u64,
        top_paths,
        calls: t.calls,
        redundant_calls: t.redundant,
        wasted_ns: t.wasted_ns,
        share,
        first_ts: t.first_ts,
        last_ts: t.last_ts,
        fix: info.fix.to_string(),
        hazards: hazards(&t, cx),
        cache: wording.cache.then_some(CacheVerdict {
            saved_calls: t.redundant,
            stale_answers: t.stale,
            stale_times: t.stale_times,
            safe: t.stale == 0,
        }),
        example: None,
        callsites,
        first_sites,
        sequence: None,
        stream: None,
        also: Vec::new(),
        shown_in: None,
    };
    let covered: Vec<(u32, PathKey)> = members.iter().map(|m| (m.image, m.path)).collect();
    each(&mut f, &covered);
    if let Some(c) = cx.coverage {
        c.borrow_mut()
            .pairs
            .entry(f.key.clone())
            .or_default()
            .extend_from_slice(&covered);
    }
    f
}

/// Adds a detector's own per-(image, path) data to findings made by
/// [`Tallies::findings_with`]: `add` merges the data of the paths a finding covers, `apply`
/// writes the sum into the finding (an example, hazards).
pub fn extras<'m, E: Default>(
    map: &'m FxHashMap<(u32, PathKey), E>,
    add: impl Fn(&mut E, &E) + 'm,
    mut apply: impl FnMut(&mut Finding, &E) + 'm,
) -> impl FnMut(&mut Finding, &[(u32, PathKey)]) + 'm {
    move |f, covered| {
        let mut sum = E::default();
        let mut any = false;
        for &k in covered {
            if let Some(e) = map.get(&k) {
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
    if t.stale_times > 0 {
        h.push(format!(
            "a directory's times changed {} time(s) with no change dejavu saw (another program \
             added or removed entries in it): a cache of whether it exists and what it is stays \
             right, one of its times (an mtime check) does not",
            t.stale_times
        ));
    }
    h
}

/// Where output on stream `stream` went, for people: `stderr -> /var/log/app.log`,
/// `stdout (pipe)`, `stderr (terminal)`; None for descriptors other than 0-2.
pub(crate) fn stream_label(stream: u8, kind: FdKind, path: &str) -> Option<String> {
    let name = match stream {
        0 => "stdin",
        1 => "stdout",
        2 => "stderr",
        _ => return None,
    };
    Some(match kind {
        FdKind::Pipe => format!("{name} (pipe)"),
        FdKind::Socket => format!("{name} (socket)"),
        FdKind::Tty => format!("{name} (terminal)"),
        _ => format!("{name} -> {path}"),
    })
}
