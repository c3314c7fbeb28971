//! The BPF object's CO-RE relocations, computed once per kernel and kept between runs.
//!
//! Resolving the object's CO-RE relocations against the kernel's BTF is the biggest part
//! of the eBPF backend's start (aya scans the kernel's ~130,000 types once per local type:
//! 15-30 ms here). Its result is a function of three inputs only: the object (embedded in
//! this binary), the kernel's BTF (`/sys/kernel/btf/vmlinux`, read whole anyway to parse
//! it) and the BTF features aya found in the kernel (which decide how it sanitizes the
//! object's own BTF first). So the relocated instructions are kept in a file, under a key
//! that hashes all three (and this format's version, and aya-obj's), and a later run whose
//! key matches takes them from there; any other run (another kernel, another dejavu,
//! another aya, a file that is missing, short, corrupt, not ours or not private) computes
//! them as before and rewrites the file. The relocated object is then loaded the same way
//! in both cases (with aya's relocation turned off), so the path a cache hit takes is the
//! one every miss takes too.
//!
//! The key is a 128-bit xxh3 of the inputs' full contents: an accidental match between two
//! kernels' BTF is out of reach, and the file is the user's own (a private directory, mode
//! 0600, owner checked), so nobody else can plant one. The file carries a checksum and
//! each patch is bounds-checked before use; what does not pass is ignored and rebuilt.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// What the file starts with; the version changes with the format or what the key covers.
const MAGIC: &[u8; 8] = b"DJVCORE1";
/// The file's name in the cache directory: one entry, the last kernel and build used.
pub(crate) const FILE: &str = "ebpf-core-relocations";
/// The relocation code whose results are kept.
const RELOCATOR: &str = "aya-obj 0.2.1";

/// One relocated instruction: its byte offset in the object and its new 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Patch {
    pub at: u32,
    pub insn: [u8; 8],
}

/// The cache key of `object` relocated against the kernel BTF `kernel_btf`, with aya's
/// detected BTF features written as `features`.
pub(crate) fn key(object: &[u8], kernel_btf: &[u8], features: &str) -> u128 {
    let mut h = Xxh3::new();
    for part in [
        MAGIC.as_slice(),
        RELOCATOR.as_bytes(),
        object,
        features.as_bytes(),
        kernel_btf,
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.digest128()
}

/// The cache directory: `$DEJAVU_CACHE_DIR` (empty: no cache), else
/// `$XDG_CACHE_HOME/dejavu`, else `$HOME/.cache/dejavu`. None where the user's cache
/// directory is not this user's own (`sudo -E` keeps another user's HOME: root's files are
/// not put there).
pub(crate) fn dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("DEJAVU_CACHE_DIR") {
        return (!d.is_empty()).then(|| PathBuf::from(d));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) => PathBuf::from(x),
        None => {
            let home = PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?);
            // SAFETY: geteuid has no preconditions.
            if std::fs::metadata(&home).ok()?.uid() != unsafe { libc::geteuid() } {
                return None;
            }
            home.join(".cache")
        }
    };
    Some(base.join("dejavu"))
}

/// Whether `meta` is this user's own and nobody else may write it (or read it).
fn private(meta: &std::fs::Metadata) -> bool {
    // SAFETY: geteuid has no preconditions.
    meta.uid() == unsafe { libc::geteuid() } && meta.permissions().mode() & 0o077 == 0
}

/// The patches stored in `dir` under `key`, if the file is there, this user's own and
/// private, complete, intact, and every patch lies inside an object of `object_len` bytes.
pub(crate) fn read(dir: &Path, key: u128, object_len: usize) -> Option<Vec<Patch>> {
    let d = std::fs::symlink_metadata(dir).ok()?;
    if !d.is_dir() || !private(&d) {
        return None;
    }
    let path = dir.join(FILE);
    let f = std::fs::symlink_metadata(&path).ok()?;
    if !f.is_file() || !private(&f) || f.len() > 1 << 20 {
        return None;
    }
    parse(&std::fs::read(&path).ok()?, key, object_len)
}

/// The file's contents: MAGIC, key (16 bytes), count (u32), count x (offset u32, 8 bytes),
/// then an xxh3-64 of everything before it. Little-endian.
fn encode(key: u128, patches: &[Patch]) -> Vec<u8> {
    let mut b = Vec::with_capacity(36 + patches.len() * 12);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&key.to_le_bytes());
    b.extend_from_slice(&(patches.len() as u32).to_le_bytes());
    for p in patches {
        b.extend_from_slice(&p.at.to_le_bytes());
        b.extend_from_slice(&p.insn);
    }
    let sum = xxh3_64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

fn parse(b: &[u8], key: u128, object_len: usize) -> Option<Vec<Patch>> {
    let (body, sum) = b.split_at_checked(b.len().checked_sub(8)?)?;
    if xxh3_64(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let rest = body.strip_prefix(MAGIC.as_slice())?;
    let (k, rest) = rest.split_at_checked(16)?;
    if u128::from_le_bytes(k.try_into().ok()?) != key {
        return None;
    }
    let (n, rest) = rest.split_at_checked(4)?;
    let n = u32::from_le_bytes(n.try_into().ok()?) as usize;
    if rest.len() != n.checked_mul(12)? {
        return None;
    }
    rest.chunks_exact(12)
        .map(|c| {
            let at = u32::from_le_bytes(c[..4].try_into().ok()?);
            let insn: [u8; 8] = c[4..].try_into().ok()?;
            (at % 8 == 0 && (at as usize).checked_add(8)? <= object_len)
                .then_some(Patch { at, insn })
        })
        .collect()
}

/// Stores `patches` under `key` in `dir` (created private if missing): written to a
/// temporary file and renamed over the old one, so a reader never sees half a file.
pub(crate) fn write(dir: &Path, key: u128, patches: &[Patch]) -> std::io::Result<()> {
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
    let tmp = dir.join(format!("{FILE}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let done = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&encode(key, patches))?;
        std::fs::rename(&tmp, dir.join(FILE))
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// The instructions of `object` that CO-RE relocation against `kernel` changes, computed
/// as aya's loader does it (the object parsed, its BTF sanitized for the kernel's
/// features, then relocated), compared with the object's own bytes.
pub(crate) fn relocate(
    object: &[u8],
    kernel: &aya::Btf,
    features: &aya_obj::btf::BtfFeatures,
) -> Result<Vec<Patch>, String> {
    use object::{Object as _, ObjectSection as _};
    let mut obj = aya_obj::Object::parse(object).map_err(|e| e.to_string())?;
    obj.patch_map_data(Default::default())
        .map_err(|e| e.to_string())?;
    obj.fixup_and_sanitize_btf(features)
        .map_err(|e| e.to_string())?;
    obj.relocate_btf(kernel).map_err(|e| e.to_string())?;
    let elf = object::File::parse(object).map_err(|e| e.to_string())?;
    let mut patches = Vec::new();
    for f in obj.functions.values() {
        let section = elf
            .section_by_index(f.section_index)
            .map_err(|e| e.to_string())?;
        let (start, size) = section
            .file_range()
            .ok_or_else(|| format!("section {} has no bytes", f.section_index.0))?;
        for (i, ins) in f.instructions.iter().enumerate() {
            let rel = f.section_offset + i * 8;
            if rel + 8 > size as usize {
                return Err(format!("{}: instruction {i} past its section", f.name));
            }
            let at = start as usize + rel;
            let mut new = [0u8; 8];
            new[0] = ins.code;
            new[1] = ins.dst_reg() | (ins.src_reg() << 4);
            new[2..4].copy_from_slice(&ins.off.to_le_bytes());
            new[4..].copy_from_slice(&ins.imm.to_le_bytes());
            if object.get(at..at + 8) != Some(new.as_slice()) {
                let at = u32::try_from(at).map_err(|e| e.to_string())?;
                patches.push(Patch { at, insn: new });
            }
        }
    }
    Ok(patches)
}

/// `object` with `patches` applied, in memory aligned as the ELF parser wants it (the
/// embedded object is aligned by `include_bytes_aligned`).
pub(crate) fn apply(object: &[u8], patches: &[Patch]) -> AlignedBytes {
    let mut out = AlignedBytes {
        words: vec![0u64; object.len().div_ceil(8)],
        len: object.len(),
    };
    let bytes = out.bytes_mut();
    bytes.copy_from_slice(object);
    for p in patches {
        let at = p.at as usize;
        bytes[at..at + 8].copy_from_slice(&p.insn);
    }
    out
}

/// Bytes in 8-byte aligned storage.
#[derive(Debug)]
pub(crate) struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialized bytes; u8 has no alignment.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patches() -> Vec<Patch> {
        vec![
            Patch {
                at: 64,
                insn: [0x61, 0x12, 0, 0, 0x18, 0, 0, 0],
            },
            Patch {
                at: 1024,
                insn: [0xb7, 0x01, 0, 0, 1, 0, 0, 0],
            },
        ]
    }

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        d
    }

    #[test]
    fn a_written_entry_is_read_back_under_its_key_only() {
        let d = private_dir();
        let dir = d.path().join("dejavu");
        write(&dir, 7, &patches()).expect("write");
        assert_eq!(read(&dir, 7, 4096), Some(patches()));
        // Another kernel (or build): another key, a miss.
        assert_eq!(read(&dir, 8, 4096), None);
        // Patches that would land past the object are refused.
        assert_eq!(read(&dir, 7, 1024), None);
        let m = std::fs::metadata(dir.join(FILE)).expect("file");
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let m = std::fs::metadata(&dir).expect("dir");
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        // A rewrite replaces the entry.
        write(&dir, 8, &patches()[..1]).expect("rewrite");
        assert_eq!(read(&dir, 7, 4096), None);
        assert_eq!(read(&dir, 8, 4096), Some(patches()[..1].to_vec()));
    }

    #[test]
    fn a_corrupt_short_or_foreign_file_is_ignored() {
        let d = private_dir();
        let dir = d.path().join("dejavu");
        write(&dir, 7, &patches()).expect("write");
        let path = dir.join(FILE);
        let good = std::fs::read(&path).expect("read");
        // Every single flipped byte is caught (the checksum, or the checks behind it).
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).expect("write");
            assert_eq!(read(&dir, 7, 4096), None, "byte {i} flipped");
        }
        // Every truncation too.
        for n in 0..good.len() {
            std::fs::write(&path, &good[..n]).expect("write");
            assert_eq!(read(&dir, 7, 4096), None, "cut at {n}");
        }
        std::fs::write(&path, &good).expect("write");
        assert_eq!(read(&dir, 7, 4096), Some(patches()));
        // A file or directory others may write is not trusted.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(read(&dir, 7, 4096), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(read(&dir, 7, 4096), None);
        assert!(write(&dir, 7, &patches()).is_err());
    }

    #[test]
    fn the_key_covers_every_input() {
        let k = key(b"object", b"kernel", "features");
        assert_ne!(k, key(b"object", b"kernel!", "features"));
        assert_ne!(k, key(b"object!", b"kernel", "features"));
        assert_ne!(k, key(b"object", b"kernel", "features!"));
        // Lengths are part of it: moving bytes from one input to the next changes it.
        assert_ne!(key(b"ab", b"c", ""), key(b"a", b"bc", ""));
        assert_eq!(k, key(b"object", b"kernel", "features"));
    }

    #[test]
    fn apply_writes_each_patch_in_place() {
        let object: Vec<u8> = (0..2048u32).map(|i| i as u8).collect();
        let out = apply(&object, &patches());
        let b = out.bytes();
        assert_eq!(b.len(), object.len());
        assert_eq!(b.as_ptr() as usize % 8, 0);
        assert_eq!(&b[64..72], &patches()[0].insn);
        assert_eq!(&b[1024..1032], &patches()[1].insn);
        assert_eq!(&b[..64], &object[..64]);
        assert_eq!(&b[72..1024], &object[72..1024]);
        assert_eq!(&b[1032..], &object[1032..]);
    }
}
