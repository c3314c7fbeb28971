//! Paths as evidence: the parts of a path that change from run to run masked (pipe and
//! socket inodes, pids under /proc, random temporary names, ids and timestamps), and sets
//! of paths grouped into patterns built from the segments that vary
//! (`/srv/www/files/*`, `.../__fragments/*/a0.tdb`), never into a catch-all: a pattern
//! keeps the file's directory, or at least two leading directories, literal.

use rustc_hash::FxHashMap;

fn is_sep(c: u8) -> bool {
    matches!(c, b'-' | b'_' | b'.' | b'+' | b'~' | b',')
}

/// Whether a token looks generated rather than named: a number of six digits or more (a
/// timestamp, an id), letters and digits mixed at random (`tmpk3j2l1x9`, a uuid part), or
/// a long hex string.
fn random_token(t: &[u8]) -> bool {
    if t.len() < 6 {
        return false;
    }
    if t.iter().all(u8::is_ascii_digit) {
        return true;
    }
    if t.len() >= 16 && t.iter().all(u8::is_ascii_hexdigit) {
        return true;
    }
    if !t.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    // Python's tempfile (`tmp` + 8), Rust's tempfile (`.tmp` + 6).
    if t.len() >= 8 && t.starts_with(b"tmp") {
        return true;
    }
    let digit_changes = t
        .windows(2)
        .filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit())
        .count();
    // mkdtemp's XXXXXX: letters of both cases at random (not CamelCase words).
    let case_changes = t
        .windows(2)
        .filter(|w| {
            w[0].is_ascii_alphabetic()
                && w[1].is_ascii_alphabetic()
                && w[0].is_ascii_uppercase() != w[1].is_ascii_uppercase()
        })
        .count();
    // mkdtemp's six characters with a digit and letters of both cases (Node.js's
    // fs.mkdtemp('/tmp/mt-'): `mt-h4gVNo`, `mt-jFsbj2`): a test suite's directory per
    // test had split one log call's repeated-output into a row per directory.
    let six = t.len() == 6
        && t.iter().any(u8::is_ascii_digit)
        && t.iter().any(u8::is_ascii_uppercase)
        && t.iter().any(u8::is_ascii_lowercase);
    six || digit_changes >= 3 || (case_changes >= 4 && case_changes * 2 >= t.len())
}

/// One path component with its per-run parts masked; `after_proc` is true for the
/// component right after `/proc`.
fn mask_component(c: &[u8], after_proc: bool, out: &mut Vec<u8>) {
    if after_proc && !c.is_empty() && c.iter().all(u8::is_ascii_digit) {
        out.push(b'*');
        return;
    }
    // A file made with O_TMPFILE, as /proc names it (`#INODE (deleted)`), or as dejavu
    // does without its identity (`#tmpfile-N (deleted)`): a new inode each run.
    if dejavu_trace::is_unnamed_file_name(c) {
        out.extend_from_slice(b"#* (deleted)");
        return;
    }
    // pipe:[1234], socket:[1234], anon_inode:[eventfd]
    if let Some(i) = c.windows(2).position(|w| w == b":[") {
        out.extend_from_slice(&c[..i + 2]);
        out.extend_from_slice(b"*]");
        return;
    }
    let mut start = 0;
    for i in 0..=c.len() {
        if i == c.len() || is_sep(c[i]) {
            let tok = &c[start..i];
            if random_token(tok) {
                out.push(b'*');
            } else {
                out.extend_from_slice(tok);
            }
            if i < c.len() {
                out.push(c[i]);
            }
            start = i + 1;
        }
    }
}

/// A path with its per-run parts masked, component by component.
pub fn masked_components(path: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut prev_proc = false;
    for c in path.split(|&b| b == b'/') {
        let mut m = Vec::with_capacity(c.len());
        mask_component(c, prev_proc, &mut m);
        prev_proc = c == b"proc" && out.len() == 1;
        out.push(m);
    }
    out
}

/// A command-line argument with the values that differ from one run of the same
/// invocation to the next masked: generated names and ids (as in paths), and numbers of
/// four digits or more (ports, pids, timestamps). `-c src/u1.c` stays itself: two
/// arguments that differ there are two different commands.
pub fn mask_arg(arg: &[u8], out: &mut Vec<u8>) {
    let mut first = true;
    for c in arg.split(|&b| b == b'/') {
        if !first {
            out.push(b'/');
        }
        first = false;
        let mut m = Vec::with_capacity(c.len());
        mask_component(c, false, &mut m);
        // Pure numbers of 4+ digits, between separators: a port, a pid.
        let mut start = 0;
        for i in 0..=m.len() {
            if i == m.len() || !m[i].is_ascii_digit() {
                let run = i - start;
                let bounded = (start == 0 || !m[start - 1].is_ascii_alphabetic())
                    && (i == m.len() || !m[i].is_ascii_alphabetic());
                if run >= 4 && bounded {
                    out.push(b'*');
                } else {
                    out.extend_from_slice(&m[start..i]);
                }
                if i < m.len() {
                    out.push(m[i]);
                }
                start = i + 1;
            }
        }
    }
}

/// A path with its per-run parts masked (`pipe:[*]`, `/proc/*/maps`, `/tmp/*/x`,
/// `/tmp/#* (deleted)`).
pub fn mask(path: &[u8]) -> String {
    let parts: Vec<String> = masked_components(path)
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    parts.join("/")
}

/// Paths grouped under one pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// For people: the path itself when the cluster holds one, else the pattern.
    pub display: String,
    /// For a finding's key: the pattern with the per-run parts masked.
    pub key: String,
    /// Indices of the paths it covers, in the order given.
    pub members: Vec<usize>,
    /// Their summed weight.
    pub weight: u64,
}

/// Directory positions a pattern may star, beyond the masked ones.
const MAX_STARS: usize = 2;
/// Components (counting the empty one before the leading `/`) kept literal: `/a/b/...`.
const LITERAL_LEAD: usize = 3;
/// Directories a file name must be looked up in to be a search along a path.
const SEARCH_DIRS: usize = 3;

/// Interned path components: shapes compare and hash ids, not bytes.
#[derive(Default)]
struct Comps<'p> {
    ids: FxHashMap<std::borrow::Cow<'p, [u8]>, u32>,
    strs: Vec<std::borrow::Cow<'p, [u8]>>,
    /// Per id: the component holds a `*` (a mask or a pattern).
    starred: Vec<bool>,
}

impl<'p> Comps<'p> {
    fn id(&mut self, c: std::borrow::Cow<'p, [u8]>) -> u32 {
        if let Some(&i) = self.ids.get(c.as_ref()) {
            return i;
        }
        let i = self.strs.len() as u32;
        self.starred.push(c.contains(&b'*'));
        // Borrowed components cost nothing to keep twice; owned ones are rare (masked).
        self.strs.push(c.clone());
        self.ids.insert(c, i);
        i
    }
    fn star(&mut self) -> u32 {
        self.id(std::borrow::Cow::Borrowed(b"*"))
    }
    fn bytes(&self, i: u32) -> &[u8] {
        &self.strs[i as usize]
    }
    fn join(&self, comps: &[u32]) -> String {
        comps
            .iter()
            .map(|&c| String::from_utf8_lossy(self.bytes(c)).into_owned())
            .collect::<Vec<_>>()
            .join("/")
    }
    /// `path` split and masked, component by component; a component with nothing to
    /// mask is borrowed from the path.
    fn split(&mut self, path: &'p [u8]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut prev_proc = false;
        let mut m = Vec::new();
        for c in path.split(|&b| b == b'/') {
            m.clear();
            mask_component(c, prev_proc, &mut m);
            prev_proc = c == b"proc" && out.len() == 1;
            let cow = if m.as_slice() == c {
                std::borrow::Cow::Borrowed(c)
            } else {
                std::borrow::Cow::Owned(m.clone())
            };
            out.push(self.id(cow));
        }
        out
    }
}

#[derive(Default)]
struct Shape {
    comps: Vec<u32>,
    members: Vec<usize>,
    weight: u64,
    stars: usize,
    /// How people and keys name it when its components do not say it: a walk up a
    /// path, a name searched along a path.
    special: Option<(String, String)>,
}

impl Shape {
    fn literal(&self, cs: &Comps<'_>) -> bool {
        self.special.is_none() && !self.comps.iter().any(|&c| cs.starred[c as usize])
    }
    fn take(&mut self) -> Shape {
        std::mem::take(self)
    }
    fn absorb(&mut self, o: &mut Shape) {
        self.members.append(&mut o.members);
        self.weight += o.weight;
        self.stars = self.stars.max(o.stars);
    }
}

fn ext(name: &[u8]) -> Option<&[u8]> {
    name.iter()
        .rposition(|&c| c == b'.')
        .filter(|&i| i > 0 && i + 1 < name.len())
        .map(|i| &name[i..])
}

/// Groups `paths` (with a weight each, e.g. redundant calls) into clusters, heaviest
/// first:
/// 1. paths equal once their per-run parts are masked;
/// 2. a walk up a path: directories looked up together with paths below them (`/usr`,
///    `/usr/lib`, ... `/usr/lib/gcc/x/12/include`), named after the deepest;
/// 3. a name searched along a path: the same file name in three directories or more
///    (`cc` in every PATH entry);
/// 4. files of one directory (`dir/*`, `dir/*.ext`);
/// 5. shapes that differ in one directory (`.../fragments/*/a0.tdb`), the first two
///    directories kept literal.
pub fn clusters(paths: &[(&[u8], u64)]) -> Vec<Cluster> {
    clusters_with(paths, false)
}

/// [`clusters`] for a finding's `paths:` line, where the root's files are one pattern too
/// (`/*`): pytest looks for seven config names in every directory up to the root, and the
/// root's seven were seven entries, of which one was shown. (Not for telling findings
/// apart: their keys, which `dejavu diff` and `dejavu check` match, stay as they were.)
pub fn display_clusters(paths: &[(&[u8], u64)]) -> Vec<Cluster> {
    clusters_with(paths, true)
}

fn clusters_with(paths: &[(&[u8], u64)], root_files: bool) -> Vec<Cluster> {
    let mut cs = Comps::default();
    // 1. Identical masked paths.
    let mut shapes: Vec<Shape> = Vec::new();
    let mut by_masked: FxHashMap<Vec<u32>, usize> = FxHashMap::default();
    for (i, (p, w)) in paths.iter().enumerate() {
        let comps = cs.split(p);
        match by_masked.get(&comps) {
            Some(&s) => {
                shapes[s].members.push(i);
                shapes[s].weight += w;
            }
            None => {
                by_masked.insert(comps.clone(), shapes.len());
                shapes.push(Shape {
                    comps,
                    members: vec![i],
                    weight: *w,
                    ..Shape::default()
                });
            }
        }
    }
    drop(by_masked);
    walks(&mut shapes, paths, &cs);
    searches(&mut shapes, &cs);
    siblings(&mut shapes, &mut cs, root_files);
    one_dir_differs(&mut shapes, &mut cs);
    let mut out: Vec<Cluster> = shapes
        .into_iter()
        .filter(|s| !s.members.is_empty())
        .map(|mut s| {
            s.members.sort_unstable();
            let key = match &s.special {
                Some((_, k)) => k.clone(),
                None => cs.join(&s.comps),
            };
            let first = paths[s.members[0]].0;
            let display = match &s.special {
                Some((d, _)) => d.clone(),
                None if s.members.iter().all(|&m| paths[m].0 == first) => {
                    String::from_utf8_lossy(first).into_owned()
                }
                // The pattern, with what every path has in common spelled out (a
                // generated directory name is masked in the key, not for people).
                None => {
                    // Per component: every path has the same one there (and the same
                    // depth): one pass, no copies.
                    let first: Vec<&[u8]> = first.split(|&c| c == b'/').collect();
                    let depth = s.comps.len();
                    let mut same = vec![first.len() == depth; depth];
                    for &m in &s.members[1..] {
                        let mut n = 0;
                        for (i, c) in paths[m].0.split(|&c| c == b'/').enumerate() {
                            n += 1;
                            if i < depth && first.get(i) != Some(&c) {
                                same[i] = false;
                            }
                        }
                        if n != depth {
                            same.iter_mut().for_each(|v| *v = false);
                        }
                    }
                    let parts: Vec<String> = s
                        .comps
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| {
                            if cs.starred[c as usize] && same[i] {
                                String::from_utf8_lossy(first[i]).into_owned()
                            } else {
                                String::from_utf8_lossy(cs.bytes(c)).into_owned()
                            }
                        })
                        .collect();
                    parts.join("/")
                }
            };
            Cluster {
                display,
                key,
                members: s.members,
                weight: s.weight,
            }
        })
        .collect();
    if root_files {
        // For people: of patterns with as many calls, the deepest first (the program's
        // directory before the root's, where a search goes up).
        let depth = |c: &Cluster| c.key.bytes().filter(|&b| b == b'/').count();
        out.sort_by(|a, b| {
            b.weight
                .cmp(&a.weight)
                .then(depth(b).cmp(&depth(a)))
                .then(a.key.cmp(&b.key))
        });
    } else {
        out.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.key.cmp(&b.key)));
    }
    out
}

/// Step 2, walks: literal paths linked by being one another's ancestor (the root
/// excluded) become one cluster, named after its heaviest deepest path.
fn walks(shapes: &mut [Shape], paths: &[(&[u8], u64)], cs: &Comps<'_>) {
    let n = shapes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    // Literal shapes by path; each links to its nearest literal ancestor present.
    let mut index: FxHashMap<&[u32], usize> = FxHashMap::default();
    for (i, s) in shapes.iter().enumerate() {
        let root = s.comps.len() == 2 && cs.bytes(s.comps[1]).is_empty();
        if s.literal(cs) && s.comps.len() >= 2 && !root {
            index.insert(&s.comps[..], i);
        }
    }
    let mut linked = vec![false; n];
    for (i, s) in shapes.iter().enumerate() {
        if !index.contains_key(&s.comps[..]) {
            continue;
        }
        for depth in (2..s.comps.len()).rev() {
            if let Some(&a) = index.get(&s.comps[..depth]) {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, i));
                if ra != rb {
                    parent[rb] = ra;
                }
                linked[a] = true;
                linked[i] = true;
                break;
            }
        }
    }
    drop(index);
    let mut groups: FxHashMap<usize, Vec<usize>> = FxHashMap::default();
    for (i, &l) in linked.iter().enumerate() {
        if l {
            let r = find(&mut parent, i);
            groups.entry(r).or_default().push(i);
        }
    }
    let mut groups: Vec<Vec<usize>> = groups.into_values().collect();
    groups.sort_by_key(|g| g[0]);
    for g in groups {
        // Named after the heaviest path (the deepest of the heaviest: a search walking up
        // asks each directory as often, and starts at the deepest); keyed by the top.
        // Directories made one inside another (zoneinfo/America, zoneinfo/America/Argentina)
        // are named after the one asked most.
        let deepest = *g
            .iter()
            .max_by(|&&a, &&b| {
                (
                    shapes[a].weight,
                    shapes[a].comps.len(),
                    std::cmp::Reverse(a),
                )
                    .cmp(&(
                        shapes[b].weight,
                        shapes[b].comps.len(),
                        std::cmp::Reverse(b),
                    ))
            })
            .unwrap_or(&g[0]);
        let top = *g
            .iter()
            .min_by_key(|&&i| (shapes[i].comps.len(), i))
            .unwrap_or(&g[0]);
        let name = String::from_utf8_lossy(paths[shapes[deepest].members[0]].0).into_owned();
        let more = g.len() - 1;
        let display = format!(
            "{name} and {more} more under {}",
            String::from_utf8_lossy(paths[shapes[top].members[0]].0)
        );
        let key = format!("walk:{}", cs.join(&shapes[top].comps));
        let mut merged = Shape {
            special: Some((display, key)),
            ..Shape::default()
        };
        merged.comps = shapes[top].comps.clone();
        for &i in &g {
            let mut s = shapes[i].take();
            merged.absorb(&mut s);
        }
        shapes[top] = merged;
    }
}

/// Step 3: the same file name looked up in several directories: a search along a path.
fn searches(shapes: &mut [Shape], cs: &Comps<'_>) {
    let mut by_name: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    for (i, s) in shapes.iter().enumerate() {
        if s.members.is_empty() || !s.literal(cs) || s.comps.len() < 3 {
            continue;
        }
        let name = s.comps[s.comps.len() - 1];
        if !cs.bytes(name).is_empty() {
            by_name.entry(name).or_default().push(i);
        }
    }
    let mut groups: Vec<(u32, Vec<usize>)> = by_name
        .into_iter()
        .filter(|(_, v)| v.len() >= SEARCH_DIRS)
        .collect();
    groups.sort_by_key(|(_, v)| v[0]);
    for (name, g) in groups {
        // Directories that differ in one place make a plain pattern (step 5):
        // `/app/node_modules/*/package.json`.
        let depth = shapes[g[0]].comps.len();
        if g.iter().all(|&i| shapes[i].comps.len() == depth) {
            let differ: Vec<usize> = (0..depth)
                .filter(|&p| {
                    g.iter()
                        .any(|&i| shapes[i].comps[p] != shapes[g[0]].comps[p])
                })
                .collect();
            if differ.len() == 1 && differ[0] >= LITERAL_LEAD {
                continue;
            }
        }
        let name = String::from_utf8_lossy(cs.bytes(name)).into_owned();
        let mut dirs: Vec<String> = g
            .iter()
            .map(|&i| cs.join(&shapes[i].comps[..shapes[i].comps.len() - 1]))
            .collect();
        dirs.sort();
        let shown: Vec<&str> = dirs.iter().take(3).map(String::as_str).collect();
        let display = format!(
            "{name} in {} directories ({}{})",
            dirs.len(),
            shown.join(", "),
            if dirs.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        );
        let key = format!("search:{name}");
        let first = g[0];
        let mut merged = Shape {
            special: Some((display, key)),
            ..Shape::default()
        };
        merged.comps = shapes[first].comps.clone();
        for &i in &g {
            let mut s = shapes[i].take();
            merged.absorb(&mut s);
        }
        shapes[first] = merged;
    }
}

/// Step 4, files of one directory: `dir/*.ext` when they share an extension, else `dir/*`
/// (with `root_files`, the root's too: `/*`).
fn siblings(shapes: &mut [Shape], cs: &mut Comps<'_>, root_files: bool) {
    let mut by_dir: FxHashMap<&[u32], Vec<usize>> = FxHashMap::default();
    let least = if root_files { 2 } else { 3 };
    for (i, s) in shapes.iter().enumerate() {
        if s.members.is_empty()
            || s.special.is_some()
            || s.comps.len() < least
            || s.comps.last().is_none_or(|&c| cs.bytes(c).is_empty())
        {
            continue;
        }
        by_dir
            .entry(&s.comps[..s.comps.len() - 1])
            .or_default()
            .push(i);
    }
    let mut dirs: Vec<(Vec<u32>, Vec<usize>)> = by_dir
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(d, v)| (d.to_vec(), v))
        .collect();
    dirs.sort_by_key(|(_, v)| v[0]);
    for (dir, idx) in dirs {
        let names: Vec<u32> = idx
            .iter()
            .map(|&i| shapes[i].comps.last().copied().unwrap_or(0))
            .collect();
        let e = ext(cs.bytes(names[0])).map(<[u8]>::to_vec);
        let name = match e {
            Some(e)
                if names
                    .iter()
                    .all(|&n| ext(cs.bytes(n)) == Some(e.as_slice())) =>
            {
                cs.id(std::borrow::Cow::Owned([&b"*"[..], &e].concat()))
            }
            _ => cs.star(),
        };
        let mut comps = dir;
        comps.push(name);
        let mut merged = Shape {
            comps,
            ..Shape::default()
        };
        for &i in &idx {
            let mut s = shapes[i].take();
            merged.absorb(&mut s);
        }
        shapes[idx[0]] = merged;
    }
}

/// Step 5: shapes that differ in one directory (deepest first), the leading ones literal.
fn one_dir_differs(shapes: &mut [Shape], cs: &mut Comps<'_>) {
    let star = cs.star();
    let max_depth = shapes.iter().map(|s| s.comps.len()).max().unwrap_or(0);
    for pos in (LITERAL_LEAD..max_depth.saturating_sub(1)).rev() {
        let mut groups: FxHashMap<Vec<u32>, Vec<usize>> = FxHashMap::default();
        for (i, s) in shapes.iter().enumerate() {
            if s.members.is_empty()
                || s.special.is_some()
                || pos + 1 >= s.comps.len()
                || s.stars >= MAX_STARS
                || s.comps[pos] == star
            {
                continue;
            }
            let mut k = s.comps.clone();
            k[pos] = star;
            groups.entry(k).or_default().push(i);
        }
        let mut groups: Vec<(Vec<u32>, Vec<usize>)> =
            groups.into_iter().filter(|(_, v)| v.len() > 1).collect();
        groups.sort_by_key(|(_, v)| v[0]);
        for (k, idx) in groups {
            let mut merged = Shape {
                comps: k,
                ..Shape::default()
            };
            for &i in &idx {
                let mut s = shapes[i].take();
                merged.absorb(&mut s);
            }
            merged.stars += 1;
            shapes[idx[0]] = merged;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cl(v: &[&str]) -> Vec<String> {
        let items: Vec<(&[u8], u64)> = v.iter().map(|p| (p.as_bytes(), 1)).collect();
        clusters(&items).into_iter().map(|c| c.display).collect()
    }

    #[test]
    fn per_run_parts_are_masked() {
        assert_eq!(mask(b"pipe:[123456]"), "pipe:[*]");
        assert_eq!(mask(b"socket:[99]"), "socket:[*]");
        assert_eq!(mask(b"/tmp/#9977914 (deleted)"), "/tmp/#* (deleted)");
        assert_eq!(mask(b"/w/#tmpfile-3 (deleted)"), "/w/#* (deleted)");
        assert_eq!(mask(b"/w/#notes"), "/w/#notes");
        assert_eq!(mask(b"/proc/4242/maps"), "/proc/*/maps");
        assert_eq!(mask(b"/tmp/tmpk3j2l1x9/out.txt"), "/tmp/*/out.txt");
        assert_eq!(
            mask(b"/tmp/pytest-of-root/pytest-12/x"),
            "/tmp/pytest-of-root/pytest-12/x"
        );
        assert_eq!(
            mask(b"/a/__fragments/__1700000000000_1700000000001_4b1c6e7f8a9d4e2f9a8b7c6d5e4f3a2b_22/a0.tdb"),
            "/a/__fragments/__*_*_*_22/a0.tdb"
        );
        assert_eq!(
            mask(b"/usr/lib/python3.11/x86_64-linux-gnu/u12.c"),
            "/usr/lib/python3.11/x86_64-linux-gnu/u12.c"
        );
        assert_eq!(mask(b"/usr/bin/sha256sum"), "/usr/bin/sha256sum");
        assert_eq!(mask(b"/tmp/.tmpAbCdEf/x"), "/tmp/.*/x");
        assert_eq!(mask(b"/tmp/.tmpUee3g6/x"), "/tmp/.*/x");
        assert_eq!(
            mask(b"/tmp/dejavu-agents-xYzAbQ/n.js"),
            "/tmp/dejavu-agents-*/n.js"
        );
        assert_eq!(mask(b"/src/getConfigFile.js"), "/src/getConfigFile.js");
        assert_eq!(mask(b"/src/template.txt"), "/src/template.txt");
        // Node.js's fs.mkdtemp: six characters, a digit and both cases.
        for dir in ["mt-h4gVNo", "mt-jFsbj2", "mt-Q9nEy9", "mt-xhh7rC"] {
            assert_eq!(
                mask(format!("/tmp/{dir}/data/log.log").as_bytes()),
                "/tmp/mt-*/data/log.log"
            );
        }
        // Names with a digit and both cases that are no mkdtemp suffix.
        for name in ["libQt5Core.so.5", "Win32Api.h", "sha256Sum"] {
            assert_eq!(mask(name.as_bytes()), name);
        }
    }

    #[test]
    fn arguments_keep_what_makes_two_commands_different() {
        let m = |a: &str| {
            let mut out = Vec::new();
            mask_arg(a.as_bytes(), &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(m("src/u1.c"), "src/u1.c");
        assert_eq!(m("src/u24.c"), "src/u24.c");
        assert_eq!(m("--port=43817"), "--port=*");
        assert_eq!(m("43817"), "*");
        assert_eq!(m("/tmp/tmpk3j2l1x9/out.json"), "/tmp/*/out.json");
        assert_eq!(m("-O2"), "-O2");
        assert_eq!(m("x86_64"), "x86_64");
    }

    #[test]
    fn files_of_one_directory_make_one_pattern() {
        assert_eq!(
            cl(&["/srv/www/files/a.txt", "/srv/www/files/b.txt"]),
            vec!["/srv/www/files/*.txt"]
        );
        assert_eq!(cl(&["/src/a.js", "/src/b.ts"]), vec!["/src/*"]);
        assert_eq!(cl(&["/x/y"]), vec!["/x/y"]);
        // For display, the root's files too (pytest looks for its config files in every
        // directory up to the root: without it, the root's seven made seven entries and
        // one was shown); not for telling findings apart.
        let dl = |v: &[&str]| -> Vec<String> {
            let items: Vec<(&[u8], u64)> = v.iter().map(|p| (p.as_bytes(), 1)).collect();
            let mut c: Vec<String> = display_clusters(&items)
                .into_iter()
                .map(|c| c.display)
                .collect();
            c.sort();
            c
        };
        let pytest = [
            "/tmp/p/pytest.ini",
            "/tmp/p/tox.ini",
            "/tmp/pytest.ini",
            "/tmp/tox.ini",
            "/pytest.ini",
            "/tox.ini",
        ];
        assert_eq!(dl(&pytest), vec!["/*.ini", "/tmp/*.ini", "/tmp/p/*.ini"]);
        // As many calls each: the deepest first.
        let items: Vec<(&[u8], u64)> = pytest.iter().map(|p| (p.as_bytes(), 1)).collect();
        let order: Vec<String> = display_clusters(&items)
            .into_iter()
            .map(|c| c.display)
            .collect();
        assert_eq!(order, vec!["/tmp/p/*.ini", "/tmp/*.ini", "/*.ini"]);
        let mut c = cl(&pytest);
        c.sort();
        assert_eq!(
            c,
            vec!["/pytest.ini", "/tmp/*.ini", "/tmp/p/*.ini", "/tox.ini"]
        );
        // Not the root itself.
        assert_eq!(dl(&["/", "/a"]), vec!["/", "/a"]);
    }

    #[test]
    fn one_varying_directory_is_starred_but_never_the_leading_ones() {
        assert_eq!(
            cl(&[
                "/a/node_modules/x/package.json",
                "/a/node_modules/y/package.json"
            ]),
            vec!["/a/node_modules/*/package.json"]
        );
        // Unrelated trees stay apart: no `/**/*`.
        let mut c = cl(&[
            "/etc/gitconfig",
            "/root/.gitconfig",
            "/tmp/r/.git/HEAD",
            "/tmp/r/.git/config",
        ]);
        c.sort();
        assert_eq!(
            c,
            vec!["/etc/gitconfig", "/root/.gitconfig", "/tmp/r/.git/*"]
        );
        // The first two directories stay literal.
        let mut c = cl(&["/usr/x/f", "/opt/x/f"]);
        c.sort();
        assert_eq!(c, vec!["/opt/x/f", "/usr/x/f"]);
    }

    #[test]
    fn a_walk_up_a_path_is_one_cluster() {
        let mut c = cl(&[
            "/usr",
            "/usr/lib",
            "/usr/lib/gcc",
            "/usr/lib/gcc/x/12/include",
            "/usr/include",
            "/usr/include/x86_64-linux-gnu",
            "/etc/a",
        ]);
        c.sort();
        assert_eq!(
            c,
            vec!["/etc/a", "/usr/lib/gcc/x/12/include and 5 more under /usr"]
        );
        // Keyed by the top of the walk: the same walk gives the same key.
        let k = clusters(&[(b"/usr".as_slice(), 1), (b"/usr/lib".as_slice(), 1)]);
        assert_eq!(k[0].key, "walk:/usr");
        // Named after the path asked most, the deepest of those asked as often: a pip
        // install makes zoneinfo/America for 143 files and America/Argentina for 12.
        let z = "/v/tzdata/zoneinfo";
        let named = |w: [u64; 3]| {
            let paths = [
                z.to_string(),
                format!("{z}/America"),
                format!("{z}/America/Argentina"),
            ];
            let items: Vec<(&[u8], u64)> = paths
                .iter()
                .zip(w)
                .map(|(p, w)| (p.as_bytes(), w))
                .collect();
            display_clusters(&items)[0].display.clone()
        };
        assert_eq!(
            named([4, 143, 12]),
            format!("{z}/America and 2 more under {z}")
        );
        assert_eq!(
            named([5, 5, 5]),
            format!("{z}/America/Argentina and 2 more under {z}")
        );
    }

    #[test]
    fn a_name_searched_along_a_path_is_one_cluster() {
        let c = cl(&[
            "/root/.cargo/bin/cc",
            "/usr/local/go/bin/cc",
            "/usr/sbin/cc",
            "/etc/x",
        ]);
        assert!(
            c.contains(
                &"cc in 3 directories (/root/.cargo/bin, /usr/local/go/bin, /usr/sbin)".to_string()
            ),
            "{c:?}"
        );
        // Two directories are not a search.
        let c = cl(&["/a/b/cc", "/x/y/cc"]);
        assert_eq!(c.len(), 2, "{c:?}");
    }

    #[test]
    fn a_generated_directory_is_masked_in_the_key_but_shown_as_it_is() {
        let c = clusters(&[
            (b"/tmp/.tmpUee3g6/host/a.txt".as_slice(), 1),
            (b"/tmp/.tmpUee3g6/host/b.txt".as_slice(), 1),
        ]);
        assert_eq!(c[0].display, "/tmp/.tmpUee3g6/host/*.txt");
        assert_eq!(c[0].key, "/tmp/.*/host/*.txt");
    }

    #[test]
    fn the_same_path_in_two_runs_has_one_key() {
        let a = clusters(&[(b"pipe:[111]".as_slice(), 3)]);
        let b = clusters(&[(b"pipe:[222]".as_slice(), 3)]);
        assert_eq!(a[0].key, b[0].key);
        assert_eq!(a[0].display, "pipe:[111]");
    }
}
