//! Paths as small integer keys, their parents, and their versions.
//!
//! A path's *version* moves on every observed mutation of it: a write or truncate
//! through any descriptor, a create, unlink or rename of it, a chmod/chown/utime. Creating
//! or removing an entry also moves the parent directory's version (its listing and its
//! mtime changed), which is what invalidates a cached negative lookup. Renaming or
//! removing a directory moves every path below it: a path's version adds the moves of its
//! ancestors, counted per directory (a global epoch moved every path in the trace, and
//! pytest's or cargo's removal of a temporary directory read as "a change the program
//! made" to /root/.pyenv and the project's sources). A path reached through another name
//! (a symbolic link to the moved directory) is not moved with it: its answer then differs
//! at the same version, which counts as a stale answer, never as a redundant call.

use dejavu_trace::{StrId, Strings, Sys};
use rustc_hash::FxHashMap;

/// A path known to the replay (trace paths and their ancestors).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct PathKey(pub u32);

/// A path's version: equal at two times exactly when no observed mutation touched the
/// path in between.
pub type Version = u64;

/// The path table.
#[derive(Debug, Default)]
pub struct Paths {
    by_str: Vec<u32>, // StrId -> PathKey + 1 (0: not yet known)
    by_bytes: FxHashMap<Box<[u8]>, u32>,
    bytes: Vec<Box<[u8]>>,
    /// Per path key, what a look-up needs together (one cache line fetch, not four).
    info: Vec<Info>,
    /// Directories moved or removed so far (0: no version needs its ancestors' moves).
    moves: u64,
}

const NONE: u32 = 0;

/// A path's state.
#[derive(Clone, Copy, Debug, Default)]
struct Info {
    /// Observed changes of the path.
    own: u64,
    /// Parent PathKey + 1 (0: none).
    parent: u32,
    /// The last call that changed the path (Sys id + 1; 0: none seen).
    changed_by: u16,
    /// Known to be a directory (an ancestor of another path, mkdir'ed, or answered S_IFDIR).
    is_dir: bool,
    /// Times this directory was renamed or removed (every path below it changed).
    moved: u32,
}

impl Paths {
    /// The key of a trace path (interned on first sight).
    #[inline]
    pub fn key(&mut self, id: StrId, strings: &Strings) -> PathKey {
        if id.is_local() {
            // Block-local ids are not stable across blocks: go by the bytes.
            return self.intern(strings.get(id));
        }
        let i = id.0 as usize;
        if let Some(&k) = self.by_str.get(i) {
            if k != NONE {
                return PathKey(k - 1);
            }
        }
        let k = self.intern(strings.get(id));
        if self.by_str.len() <= i {
            self.by_str.resize(i + 1, NONE);
        }
        self.by_str[i] = k.0 + 1;
        k
    }

    /// The key of a path given by its bytes.
    pub fn intern(&mut self, b: &[u8]) -> PathKey {
        if let Some(&k) = self.by_bytes.get(b) {
            return PathKey(k);
        }
        let k = self.bytes.len() as u32;
        self.by_bytes.insert(b.into(), k);
        self.bytes.push(b.into());
        self.info.push(Info::default());
        // Only absolute paths have a meaningful parent; "pipe:[..]" and friends do not.
        if b.len() > 1 && b[0] == b'/' {
            let cut = b.iter().rposition(|&c| c == b'/').unwrap_or(0);
            let parent = if cut == 0 { &b[..1] } else { &b[..cut] };
            let p = self.intern(parent);
            self.info[k as usize].parent = p.0 + 1;
            self.info[p.0 as usize].is_dir = true;
        }
        PathKey(k)
    }

    /// Looks up a path without interning it.
    pub fn find(&self, b: &[u8]) -> Option<PathKey> {
        self.by_bytes.get(b).map(|&k| PathKey(k))
    }

    /// The path's bytes.
    pub fn bytes(&self, k: PathKey) -> &[u8] {
        &self.bytes[k.0 as usize]
    }

    /// The path as text (invalid UTF-8 replaced).
    pub fn display(&self, k: PathKey) -> String {
        String::from_utf8_lossy(self.bytes(k)).into_owned()
    }

    /// Its parent directory, for absolute paths other than `/`.
    #[inline]
    pub fn parent(&self, k: PathKey) -> Option<PathKey> {
        let p = self.info[k.0 as usize].parent;
        (p != NONE).then(|| PathKey(p - 1))
    }

    /// The current version of a path.
    #[inline]
    pub fn version(&self, k: PathKey) -> Version {
        let own = self.info[k.0 as usize].own;
        if self.moves == 0 {
            return own;
        }
        // The moves of the path and of every directory above it.
        let mut moved = 0u64;
        let mut at = Some(k);
        while let Some(a) = at {
            let i = &self.info[a.0 as usize];
            moved += u64::from(i.moved);
            at = (i.parent != NONE).then(|| PathKey(i.parent - 1));
        }
        own + moved
    }

    /// The version that decides whether a negative answer (ENOENT) could have changed:
    /// the path's own and its parent directory's (a create in the parent makes it exist).
    #[inline]
    pub fn negative_version(&self, k: PathKey) -> Version {
        let parent = self.parent(k).map_or(0, |p| self.info[p.0 as usize].own);
        // Both counters only grow, so their sum changes whenever either does.
        self.version(k) + parent
    }

    /// Whether the path is known to be a directory.
    pub fn is_dir(&self, k: PathKey) -> bool {
        self.info[k.0 as usize].is_dir
    }

    /// Notes that `k` is a directory.
    pub fn mark_dir(&mut self, k: PathKey) {
        self.info[k.0 as usize].is_dir = true;
    }

    /// The content or metadata of `k` changed, by call `by`.
    #[inline]
    pub fn touch(&mut self, k: PathKey, by: Sys) {
        let i = &mut self.info[k.0 as usize];
        i.own += 1;
        i.changed_by = by as u16 + 1;
    }

    /// An entry named `k` appeared or disappeared (by call `by`): `k` and its parent
    /// directory change.
    pub fn entry_changed(&mut self, k: PathKey, by: Sys) {
        self.touch(k, by);
        if let Some(p) = self.parent(k) {
            self.touch(p, by);
        }
    }

    /// A rename or removal of `k`, which may be a directory with paths below it.
    pub fn moved(&mut self, k: PathKey, by: Sys) {
        self.entry_changed(k, by);
        if self.is_dir(k) {
            self.info[k.0 as usize].moved += 1;
            self.moves += 1;
        }
    }

    /// The last observed call that changed `k` (for invalidation hazards).
    pub fn changed_by(&self, k: PathKey) -> Option<Sys> {
        match self.info[k.0 as usize].changed_by {
            0 => None,
            v => Sys::from_id(v - 1),
        }
    }

    /// Number of known paths.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// No paths yet.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_interned_and_marked_as_directories() {
        let mut p = Paths::default();
        let f = p.intern(b"/a/b/c.txt");
        let b = p.parent(f).unwrap();
        assert_eq!(p.bytes(b), b"/a/b");
        assert!(p.is_dir(b));
        let a = p.parent(b).unwrap();
        let root = p.parent(a).unwrap();
        assert_eq!(p.bytes(root), b"/");
        assert_eq!(p.parent(root), None);
        let pipe = p.intern(b"pipe:[12]");
        assert_eq!(p.parent(pipe), None);
    }

    #[test]
    fn versions_move_on_mutation_and_negative_versions_on_parent_changes() {
        let mut p = Paths::default();
        let f = p.intern(b"/d/f");
        let g = p.intern(b"/d/g");
        let (v, nv) = (p.version(f), p.negative_version(f));
        p.entry_changed(g, Sys::Openat); // a sibling was created: /d changed
        assert_eq!(p.version(f), v, "a positive answer about f still holds");
        assert_ne!(p.negative_version(f), nv, "an ENOENT about f may not");
        let d = p.intern(b"/d");
        p.moved(d, Sys::Rename); // renaming a directory moves everything below it
        assert_ne!(p.version(f), v);
        assert_eq!(p.changed_by(d), Some(Sys::Rename));
    }

    #[test]
    fn removing_a_directory_moves_the_paths_below_it_and_no_others() {
        // pytest removes a temporary directory: the sources and the interpreter's files
        // are as they were.
        let mut p = Paths::default();
        let tmp = p.intern(b"/tmp/pytest-0/test_a0");
        let inside = p.intern(b"/tmp/pytest-0/test_a0/data/x.txt");
        let src = p.intern(b"/src/attr/_make.py");
        let tmp_parent = p.intern(b"/tmp/pytest-0");
        let (vi, vs, vp) = (p.version(inside), p.version(src), p.version(tmp_parent));
        p.mark_dir(tmp);
        p.moved(tmp, Sys::Rmdir);
        assert_ne!(p.version(inside), vi, "below the removed directory");
        assert_eq!(p.version(src), vs, "elsewhere");
        assert_ne!(p.version(tmp_parent), vp, "its parent's listing changed");
        // Each later change still moves the version, never back to an earlier one.
        let v = p.version(inside);
        p.moved(tmp, Sys::Rename);
        assert!(p.version(inside) > v);
        p.touch(inside, Sys::Write);
        assert!(p.version(inside) > v + 1);
    }
}
