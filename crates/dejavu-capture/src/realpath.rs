//! The real path (symbolic links resolved) of a file the traced programs exec or map,
//! remembered by the path they gave and checked with one stat.
//!
//! Each exec and each mmap of code names a file by the path the program used
//! (/lib/x86_64-linux-gnu/libc.so.6, /usr/bin/cc); /proc/PID/maps and the frames'
//! modules name it by its real path. Resolving one with realpath(3) costs a readlink per
//! component of the path: a build of 32 files made ~7,500 of them in dejavu's reader, for
//! the same dozen files again and again. Here the answer is kept by the given path, and is
//! used again only while a stat of that path (which follows the links) finds the same
//! file: the same device, inode, size and modification time. A link moved to another file
//! is resolved again; a link moved to another name of the same file keeps the name found
//! first (the same file, so the same frames).

use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What says that a stat found the same file as before (also the key of the ELF heads
/// `stacks::native::layout` keeps).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
    pub(crate) fn of(m: &Metadata) -> Self {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
        }
    }
}

/// Paths remembered at most (a program maps a few dozen files; more are forgotten all
/// at once, and resolved again).
const MAX_PATHS: usize = 4096;

/// Given path -> (real path, the identity it had).
type Known = FxHashMap<Box<[u8]>, (PathBuf, Identity)>;

thread_local! {
    static REAL: RefCell<Known> = RefCell::new(Known::default());
}

/// `given`'s real path and its metadata (None when it cannot be stat'ed: the path is then
/// `given` itself, as `std::fs::canonicalize` failing left it before).
pub fn resolve(given: &Path) -> (PathBuf, Option<Metadata>) {
    let Ok(meta) = std::fs::metadata(given) else {
        return (given.to_path_buf(), None);
    };
    let id = Identity::of(&meta);
    let key = given.as_os_str().as_bytes();
    let known = REAL.with(|r| {
        r.borrow()
            .get(key)
            .filter(|(_, was)| *was == id)
            .map(|(p, _)| p.clone())
    });
    if let Some(real) = known {
        return (real, Some(meta));
    }
    let real = std::fs::canonicalize(given).unwrap_or_else(|_| given.to_path_buf());
    REAL.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() >= MAX_PATHS {
            r.clear();
        }
        r.insert(key.into(), (real.clone(), id));
    });
    (real, Some(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_resolved_and_resolved_again_when_it_names_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (dir.join("a.so"), dir.join("b.so"));
        std::fs::write(&a, b"first").unwrap();
        std::fs::write(&b, b"second file").unwrap();
        let link = dir.join("lib.so");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let (real, meta) = resolve(&link);
        assert_eq!(real, a);
        assert_eq!(meta.unwrap().len(), 5);
        // Remembered: the same answer while the link names the same file.
        assert_eq!(resolve(&link).0, a);
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&b, &link).unwrap();
        let (real, meta) = resolve(&link);
        assert_eq!(real, b, "a link moved to another file is resolved again");
        assert_eq!(meta.unwrap().len(), 11);
        std::fs::remove_file(&link).unwrap();
        let (real, meta) = resolve(&link);
        assert_eq!(real, link, "a path that is gone is given back as it was");
        assert!(meta.is_none());
    }
}
