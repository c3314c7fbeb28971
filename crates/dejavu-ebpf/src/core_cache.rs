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
//! The key is a 128-bit xxh3 of the inputs' full contents, the kernel's BTF named by the
//! boot it belongs to (`kernel_identity`; its bytes when that cannot be read): an
//! accidental match between two kernels' BTF is out of reach, and the file is the user's own (a private directory, mode
//! 0600, owner checked), so nobody else can plant one. The file carries a checksum and
//! each patch is bounds-checked before use; what does not pass is ignored and rebuilt.

use std::path::Path;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// What the file starts with; the version changes with the format or what the key covers.
const MAGIC: &[u8; 8] = b"DJVCORE2";
/// What the files' names start with: one file per build (object), holding the entry of the
/// last kernel it ran on.
const PREFIX: &str = "ebpf-core-";
/// Files of other builds not used for this long are removed when one is written.
const UNUSED: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// The name of the cache file of `object`: two builds used in turn each keep theirs.
pub(crate) fn file(object: &[u8]) -> String {
    format!("{PREFIX}{:016x}", xxh3_64(object))
}
/// The relocation code whose results are kept.
const RELOCATOR: &str = "aya-obj 0.2.1";

/// One relocated instruction: its byte offset in the object and its new 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Patch {
    pub at: u32,
    pub insn: [u8; 8],
}

/// What is kept: the relocated instructions, and the ids of the tracepoints' types in the
/// kernel's BTF (`btf_trace_<name>`, in the order the loader asks for them), which are all
/// that loading the BTF tracepoints needs of that BTF (see `usable_ids`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub attach: Vec<u32>,
    pub patches: Vec<Patch>,
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

/// What names the running kernel's BTF without reading it: the boot's id
/// (/proc/sys/kernel/random/boot_id, new at every boot) and the kernel's release and
/// version (uname). The built-in BTF (/sys/kernel/btf/vmlinux) cannot change while the
/// kernel runs, so within one boot this names it as well as its 5.5 MB do, and the cache
/// key is taken from it instead: reading the BTF to hash it took 0.5 ms where it can be
/// mapped (Linux 6.16 and later) and ~1,350 reads of 4 KiB before. A new boot computes the
/// relocations once again. None when it cannot be read (the BTF's bytes are hashed then).
pub(crate) fn kernel_identity() -> Option<Vec<u8>> {
    let boot = std::fs::read("/proc/sys/kernel/random/boot_id").ok()?;
    if boot.len() < 32 {
        return None;
    }
    // SAFETY: uname fills the struct it is given.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |f: &[libc::c_char]| -> Vec<u8> {
        f.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect()
    };
    let mut id = b"boot ".to_vec();
    id.extend_from_slice(boot.trim_ascii());
    for f in [&u.release[..], &u.version[..], &u.machine[..]] {
        id.push(b'\n');
        id.extend(field(f));
    }
    Some(id)
}

pub(crate) use dejavu_capture::cache::dir;
use dejavu_capture::cache::private;

/// The entry of `object` stored in `dir` under `key`, if the file is there, this user's own
/// and private, complete, intact, and every patch lies inside the object.
pub(crate) fn read(dir: &Path, object: &[u8], key: u128) -> Option<Entry> {
    let d = std::fs::symlink_metadata(dir).ok()?;
    if !d.is_dir() || !private(&d) {
        return None;
    }
    let path = dir.join(file(object));
    let f = std::fs::symlink_metadata(&path).ok()?;
    if !f.is_file() || !private(&f) || f.len() > 1 << 20 {
        return None;
    }
    parse(&std::fs::read(&path).ok()?, key, object.len())
}

/// The file's contents: MAGIC, key (16 bytes), count (u32) and that many type ids (u32),
/// count (u32) and that many patches (offset u32, 8 bytes), then an xxh3-64 of everything
/// before it. Little-endian.
fn encode(key: u128, e: &Entry) -> Vec<u8> {
    let mut b = Vec::with_capacity(44 + e.attach.len() * 4 + e.patches.len() * 12);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&key.to_le_bytes());
    b.extend_from_slice(&(e.attach.len() as u32).to_le_bytes());
    for id in &e.attach {
        b.extend_from_slice(&id.to_le_bytes());
    }
    b.extend_from_slice(&(e.patches.len() as u32).to_le_bytes());
    for p in &e.patches {
        b.extend_from_slice(&p.at.to_le_bytes());
        b.extend_from_slice(&p.insn);
    }
    let sum = xxh3_64(&b);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// A count (u32) and the bytes of that many items of `size` bytes.
fn counted(b: &[u8], size: usize) -> Option<(&[u8], &[u8])> {
    let (n, rest) = b.split_at_checked(4)?;
    let n = u32::from_le_bytes(n.try_into().ok()?) as usize;
    rest.split_at_checked(n.checked_mul(size)?)
}

fn parse(b: &[u8], key: u128, object_len: usize) -> Option<Entry> {
    let (body, sum) = b.split_at_checked(b.len().checked_sub(8)?)?;
    if xxh3_64(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let rest = body.strip_prefix(MAGIC.as_slice())?;
    let (k, rest) = rest.split_at_checked(16)?;
    if u128::from_le_bytes(k.try_into().ok()?) != key {
        return None;
    }
    let (ids, rest) = counted(rest, 4)?;
    let (patches, rest) = counted(rest, 12)?;
    if !rest.is_empty() {
        return None;
    }
    let attach = ids
        .chunks_exact(4)
        .map(|c| Some(u32::from_le_bytes(c.try_into().ok()?)))
        .collect::<Option<Vec<u32>>>()?;
    let patches = patches
        .chunks_exact(12)
        .map(|c| {
            let at = u32::from_le_bytes(c[..4].try_into().ok()?);
            let insn: [u8; 8] = c[4..].try_into().ok()?;
            (at % 8 == 0 && (at as usize).checked_add(8)? <= object_len)
                .then_some(Patch { at, insn })
        })
        .collect::<Option<Vec<Patch>>>()?;
    Some(Entry { attach, patches })
}

/// Stores the `entry` of `object` under `key` in `dir` (created private if missing):
/// written to a temporary file and renamed over the old one, so a reader never sees half a
/// file. Other builds' files not rewritten for 30 days are removed.
pub(crate) fn write(dir: &Path, object: &[u8], key: u128, entry: &Entry) -> std::io::Result<()> {
    dejavu_capture::cache::make_private_dir(dir)?;
    let name = file(object);
    let done = dejavu_capture::cache::write_private(dir, &name, &encode(key, entry));
    dejavu_capture::cache::remove_unused(dir, UNUSED, |n| n.starts_with(PREFIX) && n != name);
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

/// Kernel types this large are not believed (the kernel's own BTF has ~130,000).
const MAX_TYPE_ID: u32 = 1 << 22;

/// Whether `ids` can be the kernel's type ids of the typedefs `btf_trace_<names[i]>`: one
/// per name, none zero, none twice, none past what a kernel's BTF holds. The programs are
/// loaded with them as they are (aya's `BtfTracePoint::load_by_id`, the vendored patch):
/// no BTF is searched, none built (until 2026-11-28 a BTF of placeholders up to the largest
/// id, ~130,000 types, was built and parsed for aya to search, ~1 ms of every start); the
/// kernel checks that each names a tracepoint's typedef, and refuses the load otherwise.
pub(crate) fn usable_ids(names: &[&str], ids: &[u32]) -> bool {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    names.len() == ids.len()
        && sorted.len() == ids.len()
        && !ids.contains(&0)
        && ids.iter().all(|&id| id <= MAX_TYPE_ID)
}

/// The ids of the typedefs `btf_trace_<name>` in `btf`, kept with the relocations.
pub(crate) fn attach_ids(btf: &aya::Btf, names: &[&str]) -> Result<Vec<u32>, String> {
    names
        .iter()
        .map(|n| {
            btf.id_by_type_name_kind(&format!("btf_trace_{n}"), aya_obj::btf::BtfKind::Typedef)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The bytes of a file: mapped where the kernel allows it, else read.
#[derive(Debug)]
pub(crate) enum FileBytes {
    Mapped { at: *mut libc::c_void, len: usize },
    Read(Vec<u8>),
}

impl FileBytes {
    /// `path` mapped read-only, or read when it cannot be mapped. The kernel's BTF
    /// (/sys/kernel/btf/vmlinux) can be mapped since Linux 6.16: no copy, and none of the
    /// ~1,350 reads of 4 KiB (sysfs gives no more per call) that reading it takes.
    pub(crate) fn open(path: &str) -> std::io::Result<FileBytes> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len() as usize;
        if len > 0 {
            // SAFETY: a new private read-only mapping of an open file, of its length; it is
            // only read (as a byte slice) while mapped, and unmapped on drop. The kernel's
            // BTF never changes while the kernel runs.
            let at = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    f.as_raw_fd(),
                    0,
                )
            };
            if at != libc::MAP_FAILED {
                return Ok(FileBytes::Mapped { at, len });
            }
        }
        let mut v = Vec::with_capacity(len);
        std::io::Read::read_to_end(&mut &f, &mut v)?;
        Ok(FileBytes::Read(v))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: mapped readable for `len` bytes until drop (see `open`).
            FileBytes::Mapped { at, len } => unsafe {
                std::slice::from_raw_parts(at.cast::<u8>(), *len)
            },
            FileBytes::Read(v) => v,
        }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        if let FileBytes::Mapped { at, len } = *self {
            // SAFETY: the mapping made in `open`, no longer borrowed.
            unsafe { libc::munmap(at, len) };
        }
    }
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
    use std::os::unix::fs::PermissionsExt;

    fn entry() -> Entry {
        Entry {
            attach: vec![11318, 9865],
            patches: patches(),
        }
    }

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

    const OBJECT: &[u8] = &[0; 4096];

    fn private_dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
        d
    }

    #[test]
    fn a_written_entry_is_read_back_under_its_key_only() {
        let d = private_dir();
        let dir = d.path().join("dejavu");
        write(&dir, OBJECT, 7, &entry()).expect("write");
        assert_eq!(read(&dir, OBJECT, 7), Some(entry()));
        // Another kernel (or build): another key, a miss.
        assert_eq!(read(&dir, OBJECT, 8), None);
        // Another build: another file, a miss.
        assert_eq!(read(&dir, &OBJECT[..4095], 7), None);
        // Patches that would land past the object are refused.
        std::fs::rename(dir.join(file(OBJECT)), dir.join(file(&OBJECT[..1024]))).expect("mv");
        assert_eq!(read(&dir, &OBJECT[..1024], 7), None);
        std::fs::rename(dir.join(file(&OBJECT[..1024])), dir.join(file(OBJECT))).expect("mv");
        let m = std::fs::metadata(dir.join(file(OBJECT))).expect("file");
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let m = std::fs::metadata(&dir).expect("dir");
        assert_eq!(m.permissions().mode() & 0o777, 0o700);
        // A rewrite replaces the entry.
        let mut other = entry();
        other.patches.pop();
        write(&dir, OBJECT, 8, &other).expect("rewrite");
        assert_eq!(read(&dir, OBJECT, 7), None);
        assert_eq!(read(&dir, OBJECT, 8), Some(other));
    }

    #[test]
    fn a_corrupt_short_or_foreign_file_is_ignored() {
        let d = private_dir();
        let dir = d.path().join("dejavu");
        write(&dir, OBJECT, 7, &entry()).expect("write");
        let path = dir.join(file(OBJECT));
        let good = std::fs::read(&path).expect("read");
        // Every single flipped byte is caught (the checksum, or the checks behind it).
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).expect("write");
            assert_eq!(read(&dir, OBJECT, 7), None, "byte {i} flipped");
        }
        // Every truncation too.
        for n in 0..good.len() {
            std::fs::write(&path, &good[..n]).expect("write");
            assert_eq!(read(&dir, OBJECT, 7), None, "cut at {n}");
        }
        std::fs::write(&path, &good).expect("write");
        assert_eq!(read(&dir, OBJECT, 7), Some(entry()));
        // A file or directory others may write is not trusted.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(read(&dir, OBJECT, 7), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(read(&dir, OBJECT, 7), None);
        assert!(write(&dir, OBJECT, 7, &entry()).is_err());
    }

    #[test]
    fn other_builds_files_are_removed_once_unused_for_a_month() {
        let d = private_dir();
        let dir = d.path().join("dejavu");
        write(&dir, OBJECT, 7, &entry()).expect("write");
        let set_age = |path: &Path, days: u64| {
            let t = std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86400);
            let f = std::fs::File::options()
                .write(true)
                .open(path)
                .expect("open");
            f.set_modified(t).expect("touch");
        };
        let recent = dir.join(file(b"recent build"));
        let old = dir.join(file(b"old build"));
        let other = dir.join("not-ours");
        for p in [&recent, &old, &other] {
            std::fs::write(p, b"x").expect("write");
        }
        set_age(&recent, 29);
        set_age(&old, 31);
        set_age(&other, 400);
        // Our own file is rewritten, however old.
        set_age(&dir.join(file(OBJECT)), 400);
        write(&dir, OBJECT, 7, &entry()).expect("write");
        assert!(recent.exists() && other.exists());
        assert!(!old.exists());
        assert_eq!(read(&dir, OBJECT, 7), Some(entry()));
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
    fn the_kernels_identity_is_its_boot_and_release() {
        let id = kernel_identity().expect("boot_id and uname on Linux");
        assert_eq!(
            kernel_identity(),
            Some(id.clone()),
            "the same all boot long"
        );
        let text = String::from_utf8(id).unwrap();
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert!(
            text.starts_with(&format!("boot {}\n", boot.trim())),
            "{text}"
        );
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert!(text.contains(&format!("\n{}\n", release.trim())), "{text}");
    }

    #[test]
    fn only_ids_that_can_be_the_kernels_are_used() {
        let names = ["sys_enter", "sys_exit", "signal_generate"];
        assert!(usable_ids(&names, &[11318, 11322, 9865]));
        assert!(!usable_ids(&names, &[1, 1, 2]), "twice");
        assert!(!usable_ids(&names, &[0, 1, 2]), "zero");
        assert!(!usable_ids(&names, &[1, 2]), "one short");
        assert!(!usable_ids(&names, &[1, 2, u32::MAX]), "past any kernel's");
    }

    #[test]
    fn a_file_mapped_or_read_gives_its_bytes() {
        let d = private_dir();
        let path = d.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let f = FileBytes::open(path.to_str().expect("utf-8")).expect("open");
        assert!(matches!(f, FileBytes::Mapped { .. }));
        assert_eq!(f.bytes(), data);
        // A file that cannot be mapped (or says its size is 0, as /proc's do) is read.
        let status = FileBytes::open("/proc/self/status").expect("open");
        assert!(matches!(status, FileBytes::Read(_)));
        assert!(status.bytes().starts_with(b"Name:"));
        if let Ok(btf) = FileBytes::open("/sys/kernel/btf/vmlinux") {
            assert_eq!(
                btf.bytes(),
                std::fs::read("/sys/kernel/btf/vmlinux").expect("read")
            );
        }
        assert!(FileBytes::open("/nonexistent").is_err());
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
