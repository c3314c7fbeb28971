//! dejavu's cache directory, kept between runs: the eBPF backend's CO-RE relocations
//! (dejavu-ebpf's core_cache) and the Python agent's compiled bytecode
//! (stacks::agent::channel). Each entry there is this user's own and private; what is not
//! is ignored.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The cache directory: `$DEJAVU_CACHE_DIR` (empty: no cache), else
/// `$XDG_CACHE_HOME/dejavu`, else `$HOME/.cache/dejavu`. None where the user's cache
/// directory (or home) is not this user's own (`sudo -E` keeps another user's HOME and
/// XDG_CACHE_HOME: root's files are not put there).
pub fn dir() -> Option<PathBuf> {
    // A dejavu that gained privileges when it was executed (the file capabilities that
    // `setcap cap_bpf,cap_perfmon+ep` gives it, docs/ebpf-backend.md, or set-user-ID) loads
    // programs its user could not: a cache that user can write would let them choose what
    // it loads (a patched relocation reads other kernel memory). No cache there, whatever
    // the environment says. (AT_SECURE: the kernel's word that the exec raised privileges.)
    // SAFETY: getauxval has no preconditions.
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        return None;
    }
    dir_from(
        std::env::var_os("DEJAVU_CACHE_DIR"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    )
}

fn dir_from(
    ours: Option<std::ffi::OsString>,
    xdg: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if let Some(d) = ours {
        return (!d.is_empty()).then(|| PathBuf::from(d));
    }
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let owned = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.uid() == euid);
    let base = match xdg.filter(|v| !v.is_empty()) {
        // A cache directory not made yet is made by whoever comes first; its parent, the
        // home, must then be ours.
        Some(x) => {
            let x = PathBuf::from(x);
            let mine = if x.exists() {
                owned(&x)
            } else {
                x.parent().is_some_and(owned)
            };
            mine.then_some(x)?
        }
        None => {
            let home = PathBuf::from(home.filter(|v| !v.is_empty())?);
            owned(&home).then(|| home.join(".cache"))?
        }
    };
    Some(base.join("dejavu"))
}

/// Whether `meta` is this user's own and nobody else may write it (or read it).
pub fn private(meta: &std::fs::Metadata) -> bool {
    // SAFETY: geteuid has no preconditions.
    meta.uid() == unsafe { libc::geteuid() } && meta.permissions().mode() & 0o077 == 0
}

/// Makes `dir` (a cache directory, or one inside it) if it is missing, mode 0700, and
/// checks that it is this user's own and private.
pub fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // The parent (~/.cache) is missing: made as any program would, then ours.
            std::fs::create_dir_all(dir.parent().unwrap_or(dir))?;
            std::fs::DirBuilder::new().mode(0o700).create(dir)?;
        }
        Err(e) => return Err(e),
    }
    if !private(&std::fs::symlink_metadata(dir)?) {
        return Err(std::io::Error::other("the cache directory is not private"));
    }
    Ok(())
}

/// Writes `bytes` to `dir/name`, private (0600): to a temporary file first
/// (`name.PID.tmp`), renamed over the old one, so that a reader never sees half a file.
/// The temporary file is removed when anything fails.
pub fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let done = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Whether the file at `path` was last modified more than `age` ago (false when that
/// cannot be told).
pub fn older_than(path: &Path, age: std::time::Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|a| a > age)
}

/// Makes `dir`, a directory inside the cache directory, as [`make_private_dir`] does; a
/// missing cache directory around it is made private too, not as `create_dir_all` would
/// (the CO-RE cache refuses one others may read). One that exists is taken as it is (a
/// `$DEJAVU_CACHE_DIR` the user made): `dir` itself is what must be private.
pub fn make_private_subdir(dir: &Path) -> std::io::Result<()> {
    if let Some(root) = dir.parent().filter(|r| !r.exists()) {
        make_private_dir(root)?;
    }
    make_private_dir(dir)
}

/// Gives `path` a new modification time if it was last modified more than `age` ago:
/// used, so not taken for unused by [`remove_unused`].
pub fn renew(path: &Path, age: std::time::Duration) {
    if older_than(path, age) {
        if let Ok(f) = std::fs::File::open(path) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
    }
}

/// Removes the entries of `dir` whose names `which` picks and that were not modified for
/// `age` (a directory with what it holds). Best effort.
pub fn remove_unused(dir: &Path, age: std::time::Duration, which: impl Fn(&str) -> bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if !which(&e.file_name().to_string_lossy()) || !older_than(&path, age) {
            continue;
        }
        let _ = if e.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
    }
}

/// The file whose modification time says when [`sweep`] last looked through its
/// directory.
const SWEPT: &str = ".swept";

/// [`remove_unused`], at most once every `every` for `dir`: a directory that holds an
/// entry per module (the names of native code) has thousands of them after a while, and a
/// look at each (a `statx`) at every recording's end was ~5% of dejavu's CPU on a build
/// (bench/RESULTS.md, twelfth session). The time of the last look is the modification
/// time of `dir/.swept` (made private, as the rest); `which` never sees that file.
pub fn sweep(
    dir: &Path,
    age: std::time::Duration,
    every: std::time::Duration,
    which: impl Fn(&str) -> bool,
) {
    let marker = dir.join(SWEPT);
    match std::fs::symlink_metadata(&marker) {
        Ok(m) if !m.is_file() || !private(&m) => return,
        Ok(_) if !older_than(&marker, every) => return,
        Ok(_) => {
            let Ok(f) = std::fs::File::open(&marker) else {
                return;
            };
            if f.set_modified(std::time::SystemTime::now()).is_err() {
                return;
            }
        }
        Err(_) => {
            if write_private(dir, SWEPT, b"").is_err() {
                return;
            }
        }
    }
    remove_unused(dir, age, |n| n != SWEPT && which(n));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        d
    }

    #[test]
    fn the_cache_is_kept_only_under_this_users_own_directories() {
        use std::ffi::OsString;
        let d = private_dir();
        let mine = d.path().join("mine");
        let theirs = d.path().join("theirs");
        std::fs::create_dir(&mine).expect("mkdir");
        std::fs::create_dir(&theirs).expect("mkdir");
        let os = |p: &Path| Some(OsString::from(p));
        // SAFETY: geteuid has no preconditions.
        let other = if unsafe { libc::geteuid() } == 0 {
            65534
        } else {
            0
        };
        let chowned = std::os::unix::fs::chown(&theirs, Some(other), None).is_ok();
        assert_eq!(
            dir_from(Some("/x".into()), os(&theirs), os(&theirs)),
            Some(PathBuf::from("/x"))
        );
        assert_eq!(dir_from(Some("".into()), os(&mine), os(&mine)), None);
        assert_eq!(dir_from(None, os(&mine), None), Some(mine.join("dejavu")));
        assert_eq!(
            dir_from(None, None, os(&mine)),
            Some(mine.join(".cache").join("dejavu"))
        );
        assert_eq!(
            dir_from(None, os(&mine.join("new")), None),
            Some(mine.join("new").join("dejavu"))
        );
        assert_eq!(dir_from(None, None, None), None);
        if chowned {
            assert_eq!(dir_from(None, os(&theirs), os(&mine)), None);
            assert_eq!(dir_from(None, None, os(&theirs)), None);
            assert_eq!(dir_from(None, os(&theirs.join("new")), None), None);
        }
    }

    #[test]
    fn a_private_file_is_written_whole_and_replaces_the_old_one() {
        let d = private_dir();
        write_private(d.path(), "f", b"one").expect("written");
        write_private(d.path(), "f", b"two").expect("rewritten");
        let m = std::fs::symlink_metadata(d.path().join("f")).expect("stat");
        assert!(private(&m));
        assert_eq!(std::fs::read(d.path().join("f")).expect("read"), b"two");
        // Nothing else is left behind.
        assert_eq!(std::fs::read_dir(d.path()).expect("list").count(), 1);
        assert!(write_private(&d.path().join("missing"), "f", b"x").is_err());
        assert!(!older_than(
            &d.path().join("f"),
            std::time::Duration::from_secs(60)
        ));
        assert!(!older_than(
            &d.path().join("missing"),
            std::time::Duration::ZERO
        ));
        // Unused entries the filter picks go, files and directories alike.
        std::fs::create_dir(d.path().join("sub")).expect("mkdir");
        write_private(&d.path().join("sub"), "x", b"x").expect("written");
        write_private(d.path(), "keep", b"k").expect("written");
        remove_unused(d.path(), std::time::Duration::from_secs(60), |_| true);
        assert_eq!(
            std::fs::read_dir(d.path()).expect("list").count(),
            3,
            "all recent"
        );
        remove_unused(d.path(), std::time::Duration::ZERO, |n| n != "keep");
        let left: Vec<_> = std::fs::read_dir(d.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, ["keep"]);
    }

    #[test]
    fn a_sweep_looks_through_its_directory_once_in_a_while() {
        let d = private_dir();
        let day = std::time::Duration::from_secs(24 * 3600);
        write_private(d.path(), "a", b"a").expect("written");
        // The first sweep looks (every entry is older than no time at all) and leaves its
        // marker.
        sweep(d.path(), std::time::Duration::ZERO, day, |_| true);
        let left = |d: &tempfile::TempDir| {
            let mut v: Vec<_> = std::fs::read_dir(d.path())
                .expect("list")
                .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
                .collect();
            v.sort();
            v
        };
        assert_eq!(left(&d), [".swept"]);
        assert!(private(
            &std::fs::symlink_metadata(d.path().join(".swept")).expect("stat")
        ));
        // The next one, within the day, does not look.
        write_private(d.path(), "b", b"b").expect("written");
        sweep(d.path(), std::time::Duration::ZERO, day, |_| true);
        assert_eq!(left(&d), [".swept", "b"]);
        // A day later it does, and renews its marker.
        let old = std::time::SystemTime::now() - 2 * day;
        std::fs::File::open(d.path().join(".swept"))
            .expect("open")
            .set_modified(old)
            .expect("touch");
        sweep(d.path(), std::time::Duration::ZERO, day, |_| true);
        assert_eq!(left(&d), [".swept"]);
        assert!(!older_than(&d.path().join(".swept"), day));
        // A marker that is not a private file: no sweep.
        write_private(d.path(), "c", b"c").expect("written");
        std::fs::set_permissions(
            d.path().join(".swept"),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        std::fs::File::open(d.path().join(".swept"))
            .expect("open")
            .set_modified(old)
            .expect("touch");
        sweep(d.path(), std::time::Duration::ZERO, day, |_| true);
        assert_eq!(left(&d), [".swept", "c"]);
    }

    #[test]
    fn a_cache_directory_is_made_private_and_one_that_is_not_is_refused() {
        let d = private_dir();
        let sub = d.path().join("a").join("b");
        make_private_dir(&sub).expect("made");
        let m = std::fs::symlink_metadata(&sub).expect("stat");
        assert!(m.is_dir() && private(&m));
        make_private_dir(&sub).expect("already there");
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(make_private_dir(&sub).is_err());
        // A directory inside a cache directory not made yet: both private.
        let root = d.path().join("home").join(".cache").join("dejavu");
        make_private_subdir(&root.join("names")).expect("made");
        for p in [&root, &root.join("names")] {
            let m = std::fs::symlink_metadata(p).expect("stat");
            assert!(m.is_dir() && private(&m), "{p:?}");
        }
        // Inside one the user made readable by others: taken as it is, the new one private.
        let mine = d.path().join("mine");
        std::fs::create_dir(&mine).expect("mkdir");
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        make_private_subdir(&mine.join("names")).expect("made");
        let m = std::fs::symlink_metadata(mine.join("names")).expect("stat");
        assert!(m.is_dir() && private(&m));
    }
}
