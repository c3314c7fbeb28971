//! The names of code addresses, kept between recordings.
//!
//! Naming a code address (function, file, line, inlined frames) means reading the module's
//! DWARF: for libpython or node, 25-40 ms of dejavu's CPU per recording (the sections
//! read, the units and line programs parsed), most of the reader's work on a short program
//! and time the program waits for at its end. What an address is named is a function of
//! the module's file (and of its separate debug file, if one is installed) and of the
//! naming code, so it is kept, per module, in dejavu's cache directory (`names/`, one file
//! per module), under a key that hashes the module file's identity (path, device, inode,
//! size, modification time), its build id, its debug file's identity, and the identity of
//! the dejavu executable itself (another build of dejavu, whose naming may differ, keeps
//! its own). A later recording that needs an address kept there takes its frames from the
//! file and never opens the module's DWARF; the addresses it had to name itself are added
//! when it ends. Like the CO-RE cache: this user's own files only, private, checksummed,
//! bounds-checked; what does not pass is ignored and rewritten. Files not used for 30 days
//! are removed when one is written.

use super::elf::SourceFrame;
use rustc_hash::FxHashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// What a file starts with; changes with the format.
const MAGIC: &[u8; 8] = b"DJVNAME1";
/// Addresses kept per module at most, and a file's largest size.
const MAX_ENTRIES: usize = 200_000;
const MAX_BYTES: u64 = 64 << 20;
/// Frames per address at most (as `ElfModule::symbolize` gives).
const MAX_FRAMES: usize = 32;
/// Files not used for this long are removed when one is written (looking through the
/// directory at most once every SWEEP).
const UNUSED: Duration = Duration::from_secs(30 * 24 * 3600);
/// A file used again after this long gets its modification time renewed (so that it is
/// not taken for unused).
const RENEW: Duration = Duration::from_secs(24 * 3600);
/// How often the directory is looked through for unused files (cache::sweep).
const SWEEP: Duration = Duration::from_secs(24 * 3600);

/// A stable hasher (SipHash-1-3 with fixed keys: the same value for the same input in
/// every run of one dejavu build, which is all the key needs: another build has another
/// key anyway).
fn hasher() -> std::collections::hash_map::DefaultHasher {
    std::collections::hash_map::DefaultHasher::new()
}

/// The identity of the dejavu executable that runs (device, inode, size, mtime of
/// /proc/self/exe), hashed into every key.
fn own_identity() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    *ID.get_or_init(|| {
        let mut h = hasher();
        MAGIC.hash(&mut h);
        super::elf::FileKey::stat(Path::new("/proc/self/exe")).hash(&mut h);
        h.finish()
    })
}

/// The key of a module whose naming depends on `parts` (its identity, see the module's
/// `names_key`).
pub(crate) fn key(parts: impl Hash) -> u64 {
    let mut h = hasher();
    own_identity().hash(&mut h);
    parts.hash(&mut h);
    h.finish()
}

/// One module's kept names: those read at the start, and those named since.
#[derive(Debug)]
pub(crate) struct KeptNames {
    path: PathBuf,
    key: u64,
    known: FxHashMap<u64, Box<[SourceFrame]>>,
    new: Vec<(u64, Box<[SourceFrame]>)>,
}

impl KeptNames {
    /// The names kept in `dir` for the module of `key` (none yet if the file is missing
    /// or does not pass).
    pub(crate) fn open(dir: &Path, key: u64) -> KeptNames {
        let path = dir.join(file_name(key));
        let known = read(dir, &path, key).unwrap_or_default();
        if !known.is_empty() {
            crate::cache::renew(&path, RENEW);
        }
        KeptNames {
            path,
            key,
            known,
            new: Vec::new(),
        }
    }

    /// The frames kept for `svma`.
    pub(crate) fn get(&self, svma: u64) -> Option<&[SourceFrame]> {
        self.known.get(&svma).map(|f| &**f)
    }

    /// `frames` were named at `svma` in this recording: kept when it ends.
    pub(crate) fn add(&mut self, svma: u64, frames: &[SourceFrame]) {
        let fits = frames.len() <= MAX_FRAMES
            && frames.iter().all(|f| {
                f.function
                    .as_ref()
                    .is_none_or(|s| s.len() <= u16::MAX as usize)
                    && f.file.as_ref().is_none_or(|s| s.len() <= u16::MAX as usize)
            });
        if fits && self.known.len() + self.new.len() < MAX_ENTRIES {
            self.new.push((svma, frames.into()));
        }
    }

    /// Adds what was named in this recording to the file (merged with what it holds now:
    /// another recording may have added to it meanwhile). Best effort.
    pub(crate) fn save(&mut self) {
        if self.new.is_empty() {
            return;
        }
        let Some(dir) = self.path.parent() else {
            return;
        };
        if crate::cache::make_private_subdir(dir).is_err() {
            return;
        }
        let mut all = read(dir, &self.path, self.key).unwrap_or_default();
        for (svma, frames) in self.new.drain(..) {
            if all.len() >= MAX_ENTRIES {
                break;
            }
            all.entry(svma).or_insert(frames);
        }
        let _ = crate::cache::write_private(dir, &file_name(self.key), &encode(self.key, &all));
        crate::cache::sweep(dir, UNUSED, SWEEP, |_| true);
    }
}

/// The file of the module of `key`.
fn file_name(key: u64) -> String {
    format!("{key:016x}")
}

/// The entries of the file at `path` in `dir`, if both are this user's own and private,
/// and the file is complete, intact and of `key`.
fn read(dir: &Path, path: &Path, key: u64) -> Option<FxHashMap<u64, Box<[SourceFrame]>>> {
    let d = std::fs::symlink_metadata(dir).ok()?;
    if !d.is_dir() || !crate::cache::private(&d) {
        return None;
    }
    let f = std::fs::symlink_metadata(path).ok()?;
    if !f.is_file() || !crate::cache::private(&f) || f.len() > MAX_BYTES {
        return None;
    }
    parse(&std::fs::read(path).ok()?, key)
}

fn checksum(b: &[u8]) -> u64 {
    let mut h = hasher();
    b.hash(&mut h);
    h.finish()
}

/// MAGIC, key (u64), count (u32), then per entry: address (u64), frame count (u8), and
/// per frame: which names it has (u8: 1 function, 2 file), each name present as a length
/// (u16) and its bytes, line (u32), column (u32); then a checksum of all that (u64).
/// Little-endian.
fn encode(key: u64, entries: &FxHashMap<u64, Box<[SourceFrame]>>) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + entries.len() * 64);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&key.to_le_bytes());
    b.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (svma, frames) in entries {
        b.extend_from_slice(&svma.to_le_bytes());
        b.push(frames.len() as u8);
        for f in frames.iter() {
            let flags = u8::from(f.function.is_some()) | (u8::from(f.file.is_some()) << 1);
            b.push(flags);
            for s in [&f.function, &f.file].into_iter().flatten() {
                b.extend_from_slice(&(s.len() as u16).to_le_bytes());
                b.extend_from_slice(s.as_bytes());
            }
            b.extend_from_slice(&f.line.to_le_bytes());
            b.extend_from_slice(&f.column.to_le_bytes());
        }
    }
    let sum = checksum(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// Reads `encode`'s bytes, front to back.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn name(&mut self) -> Option<String> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

fn parse(b: &[u8], key: u64) -> Option<FxHashMap<u64, Box<[SourceFrame]>>> {
    let (body, sum) = b.split_at_checked(b.len().checked_sub(8)?)?;
    if checksum(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut c = Cursor(body.strip_prefix(MAGIC.as_slice())?);
    if c.u64()? != key {
        return None;
    }
    let n = c.u32()? as usize;
    if n > MAX_ENTRIES {
        return None;
    }
    let mut out = FxHashMap::default();
    out.reserve(n);
    for _ in 0..n {
        let svma = c.u64()?;
        let frames = c.u8()? as usize;
        if frames > MAX_FRAMES {
            return None;
        }
        let mut v = Vec::with_capacity(frames);
        for _ in 0..frames {
            let flags = c.u8()?;
            if flags > 3 {
                return None;
            }
            let function = if flags & 1 != 0 {
                Some(c.name()?)
            } else {
                None
            };
            let file = if flags & 2 != 0 {
                Some(c.name()?)
            } else {
                None
            };
            v.push(SourceFrame {
                function,
                file,
                line: c.u32()?,
                column: c.u32()?,
            });
        }
        out.insert(svma, v.into_boxed_slice());
    }
    c.0.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn frames() -> Vec<SourceFrame> {
        vec![
            SourceFrame {
                function: Some("inlined_here".into()),
                file: Some("/src/a.c".into()),
                line: 12,
                column: 5,
            },
            SourceFrame {
                function: Some("outer".into()),
                file: None,
                line: 0,
                column: 0,
            },
        ]
    }

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn names_saved_by_one_recording_are_read_by_the_next_under_their_key_only() {
        let d = private_dir();
        let dir = d.path().join("names");
        let mut a = KeptNames::open(&dir, 7);
        assert_eq!(a.get(0x1000), None);
        a.add(0x1000, &frames());
        a.add(0x2000, &[]);
        a.save();
        let f = std::fs::metadata(dir.join(format!("{:016x}", 7))).unwrap();
        assert_eq!(f.permissions().mode() & 0o777, 0o600);
        let b = KeptNames::open(&dir, 7);
        assert_eq!(b.get(0x1000), Some(&frames()[..]));
        assert_eq!(b.get(0x2000), Some(&[][..]));
        assert_eq!(b.get(0x3000), None);
        // Another recording adds to the file, keeping what it held.
        let mut c = KeptNames::open(&dir, 7);
        c.add(0x3000, &frames()[1..]);
        c.save();
        let e = KeptNames::open(&dir, 7);
        assert_eq!(e.get(0x1000), Some(&frames()[..]));
        assert_eq!(e.get(0x3000), Some(&frames()[1..]));
        // Another module (another key) has nothing of these.
        assert_eq!(KeptNames::open(&dir, 8).get(0x1000), None);
    }

    #[test]
    fn a_damaged_or_foreign_file_is_not_read() {
        let d = private_dir();
        let dir = d.path().join("names");
        let mut a = KeptNames::open(&dir, 9);
        a.add(0x1000, &frames());
        a.save();
        let path = dir.join(format!("{:016x}", 9));
        let good = std::fs::read(&path).unwrap();
        // Every single damaged byte, and every cut, is refused (never a panic).
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x41;
            assert_eq!(parse(&bad, 9), None, "byte {i}");
            assert_eq!(parse(&good[..i], 9), None, "cut at {i}");
        }
        assert!(parse(&good, 9).is_some());
        // The right bytes under another key are not this module's.
        assert_eq!(parse(&good, 10), None);
        // A file others may write is not read.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(KeptNames::open(&dir, 9).get(0x1000), None);
    }

    #[test]
    fn the_key_covers_the_modules_identity() {
        assert_ne!(key(("a", 1u64)), key(("a", 2u64)));
        assert_eq!(key(("a", 1u64)), key(("a", 1u64)));
    }
}
