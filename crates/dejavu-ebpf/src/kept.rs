//! The kernel half kept loaded between recordings (docs/ebpf-backend.md, "Kept loaded").
//!
//! Creating the maps and verifying the programs is most of what `dejavu record` costs
//! before the program runs (~10 ms of the ~14 ms a `record -- true` adds on the machine of
//! bench/RESULTS.md). So a recording pins what it loaded on the BPF filesystem, in a slot
//! directory named after the object and the rings' sizes, and the next one opens those
//! pins instead: no map is created and no program verified again. A slot is used by one
//! recording at a time (an exclusive `flock` on its directory, held while the recording
//! runs; a recording that finds every slot of its key in use loads its own, as before),
//! and every map is put back to its state at creation before the programs are attached
//! (`reset`): nothing one recording left there is seen by the next.
//!
//! Kept programs are not attached: between recordings they cost the system nothing but
//! the maps' memory (22 MB with stacks on, 14 MB without). At most `KEPT_MAX` slots
//! are kept; `rm -r /sys/fs/bpf/dejavu` frees them, and `DEJAVU_BPF_KEEP=off` neither keeps
//! nor uses any. Nothing here is ever an error of the recording: whatever fails, the
//! recording loads its own programs, as it did before this existed.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use aya::maps::{Map, MapData, MapType};

/// The environment variable: `off` (or `0`, or empty) keeps nothing; a directory on a BPF
/// filesystem keeps the slots in its `dejavu` directory instead of /sys/fs/bpf's.
pub(crate) const ENV: &str = "DEJAVU_BPF_KEEP";

/// The BPF filesystem's usual mount point; the slots live in its `dejavu` directory.
const BPFFS: &str = "/sys/fs/bpf";
/// statfs's f_type of a BPF filesystem (include/uapi/linux/magic.h).
const BPF_FS_MAGIC: i64 = 0xcafe4a11;

/// Slots per key: recordings that run at once each need one.
const SLOTS_PER_KEY: u32 = 2;
/// Slots kept in all (a recording with stacks, one without, one more at once); the least
/// recently used others are removed when a recording stores a new one.
const KEPT_MAX: usize = 3;

/// The pin that says a slot is whole: pinned last.
const READY: &str = "ready";

/// The directory of the slots; why not when keeping is off or cannot be done here.
///
/// Only root keeps programs, and only a dejavu that did not gain privileges when it was
/// executed (file capabilities, set-user-ID: AT_SECURE, as for the CO-RE cache): whoever
/// could open a kept map could follow any process and read its calls from the rings. The
/// directory is root's and private (0700; one that is not is not used). The default
/// needs a BPF filesystem at /sys/fs/bpf (systemd mounts one there at boot). dejavu does
/// not mount one itself: a mount made under a chroot's bind-mounted /sys (or anywhere the
/// user did not expect one) would keep that /sys from being unmounted.
pub(crate) fn root() -> Result<PathBuf, String> {
    // SAFETY: geteuid and getauxval have no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root".into());
    }
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        return Err("privileges gained at exec".into());
    }
    let fs = match std::env::var_os(ENV) {
        Some(v) if v.is_empty() || v == "off" || v == "0" => return Err(format!("{ENV}=off")),
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(BPFFS),
    };
    if !is_bpffs(&fs) {
        return Err(format!("{} is not a BPF filesystem", fs.display()));
    }
    let root = fs.join("dejavu");
    let unusable = |why: String| format!("{}: {why}", root.display());
    match std::fs::create_dir(&root) {
        Ok(()) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| unusable(e.to_string()))?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(unusable(e.to_string())),
    }
    let meta = std::fs::symlink_metadata(&root).map_err(|e| unusable(e.to_string()))?;
    use std::os::unix::fs::MetadataExt;
    if meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o077 == 0 {
        Ok(root)
    } else {
        Err(unusable(format!(
            "not a directory of root's that only root may open (mode {:o})",
            meta.mode() & 0o7777
        )))
    }
}

fn is_bpffs(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the struct it is given from a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == BPF_FS_MAGIC }
}

/// The key of a slot: this build's object (as built, before relocation: the kernel is the
/// boot's, and the BPF filesystem does not outlive a boot) and the rings' sizes.
pub(crate) fn key(object: &[u8], ring_bytes: u32, stack_ring_bytes: u32) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for part in [
        b"dejavu kept programs 1".as_slice(),
        env!("CARGO_PKG_VERSION").as_bytes(),
        object,
        &ring_bytes.to_le_bytes(),
        &stack_ring_bytes.to_le_bytes(),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.digest128()
}

/// A slot this recording holds (its directory locked) until it is dropped.
pub(crate) struct Slot {
    pub(crate) dir: PathBuf,
    /// The directory, flock'ed (released when closed).
    _lock: OwnedFd,
    /// Whole: a recording stored it and it can be opened.
    pub(crate) ready: bool,
}

/// Takes a slot of `key` under `root`: the first one no other recording holds (made when
/// missing). None when every slot is held, or the directory cannot be made or locked.
pub(crate) fn checkout(root: &Path, key: u128) -> Option<Slot> {
    for n in 0..SLOTS_PER_KEY {
        // No dot: a BPF filesystem reserves names with one (EPERM).
        let dir = root.join(format!("{key:032x}-{n}"));
        // Twice: an evicting recording may remove the directory between its making and
        // its lock (it locks before it removes, so a directory still linked once we hold
        // its lock stays).
        for _ in 0..2 {
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(_) => return None,
            }
            let Some(lock) = lock_dir(&dir) else {
                break;
            };
            if !still_linked(&lock) {
                continue;
            }
            let ready = dir.join(READY).exists();
            touch(&lock);
            return Some(Slot {
                dir,
                _lock: lock,
                ready,
            });
        }
    }
    None
}

/// Opens `dir` and takes its exclusive lock without waiting; None when another holds it.
fn lock_dir(dir: &Path) -> Option<OwnedFd> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: open(2) of a NUL-terminated path; the descriptor is owned from here.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a descriptor we just opened and own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: flock(2) on a descriptor we own.
    (unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0).then_some(fd)
}

/// Whether the directory behind `fd` is still in its parent (not removed meanwhile).
fn still_linked(fd: &OwnedFd) -> bool {
    // SAFETY: fstat fills the struct it is given.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    unsafe { libc::fstat(fd.as_raw_fd(), &mut st) == 0 && st.st_nlink > 0 }
}

/// Marks a slot as used now (its modification time), for `evict`'s order.
fn touch(fd: &OwnedFd) {
    // SAFETY: futimens with a null times pointer sets both times to now.
    unsafe { libc::futimens(fd.as_raw_fd(), std::ptr::null()) };
}

impl Slot {
    /// Unpins everything in the slot (what an earlier recording left half stored, or what
    /// could not be opened): it is empty and not ready.
    pub(crate) fn clear(&mut self) {
        empty_dir(&self.dir);
        self.ready = false;
    }

    /// Pins a map as `map_NAME` (a dot in NAME, as in `.rodata`, made `_`: a BPF
    /// filesystem reserves names with one).
    pub(crate) fn pin_map(&self, name: &str, map: &Map) -> Result<(), String> {
        map.pin(self.dir.join(format!("map_{}", name.replace('.', "_"))))
            .map_err(|e| format!("pinning map {name}: {e}"))
    }

    /// Pins a program as `prog_NAME`.
    pub(crate) fn pin_program(
        &self,
        name: &str,
        prog: &mut aya::programs::Program,
    ) -> Result<(), String> {
        prog.pin(self.dir.join(format!("prog_{name}")))
            .map_err(|e| format!("pinning program {name}: {e}"))
    }

    /// Says the slot is whole (`READY`, pinned last: `prog` pinned once more).
    pub(crate) fn seal(&mut self, prog: &mut aya::programs::Program) -> Result<(), String> {
        prog.pin(self.dir.join(READY))
            .map_err(|e| format!("pinning {READY}: {e}"))?;
        self.ready = true;
        Ok(())
    }

    /// The names of the maps pinned in the slot.
    pub(crate) fn map_names(&self) -> Vec<String> {
        std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("map_"))
                    .map(str::to_owned)
            })
            .collect()
    }

    /// Opens the pinned map `name`.
    pub(crate) fn open_map(&self, name: &str) -> Result<MapData, String> {
        MapData::from_pin(self.dir.join(format!("map_{name}")))
            .map_err(|e| format!("opening map {name}: {e}"))
    }

    /// Opens the pinned program `name`.
    pub(crate) fn open_program(&self, name: &str) -> Result<aya::programs::BtfTracePoint, String> {
        aya::programs::BtfTracePoint::from_pin(self.dir.join(format!("prog_{name}")))
            .map_err(|e| format!("opening program {name}: {e}"))
    }
}

/// A slot let go before it was whole (a load that failed after its maps were pinned)
/// keeps nothing: its pins would hold the maps' memory until the next recording.
impl Drop for Slot {
    fn drop(&mut self) {
        if !self.ready {
            empty_dir(&self.dir);
        }
    }
}

/// Unpins every entry of `dir` (the directory stays).
fn empty_dir(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let _ = std::fs::remove_file(e.path());
    }
}

/// Removes the slots under `root` beyond the `KEPT_MAX` most recently used (`keep`, the
/// slot just stored, counts as one), and those an earlier recording left half stored;
/// never one another recording holds.
pub(crate) fn evict(root: &Path, keep: &Path) {
    let mut others: Vec<(std::time::SystemTime, PathBuf, OwnedFd)> = Vec::new();
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let path = e.path();
        if path == keep || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Some(lock) = lock_dir(&path) else {
            continue;
        };
        if !path.join(READY).exists() {
            empty_dir(&path);
            let _ = std::fs::remove_dir(&path);
            continue;
        }
        let when = e
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        others.push((when, path, lock));
    }
    others.sort_by_key(|o| std::cmp::Reverse(o.0));
    for (_, path, _lock) in others.into_iter().skip(KEPT_MAX - 1) {
        empty_dir(&path);
        let _ = std::fs::remove_dir(&path);
    }
}

/// Wraps a map opened from a pin as the `Map` its kernel type is (for aya's typed maps).
pub(crate) fn as_map(data: MapData) -> Result<Map, String> {
    let ty = data
        .info()
        .and_then(|i| i.map_type())
        .map_err(|e| e.to_string())?;
    Ok(match ty {
        MapType::Array => Map::Array(data),
        MapType::PerCpuArray => Map::PerCpuArray(data),
        MapType::Hash => Map::HashMap(data),
        MapType::LruHash => Map::LruHashMap(data),
        MapType::RingBuf => Map::RingBuf(data),
        other => return Err(format!("unexpected map type {other:?}")),
    })
}

/// What the kernel says of a map: its type, descriptor and sizes.
struct Shape {
    ty: MapType,
    fd: i32,
    key_size: usize,
    value_size: usize,
    entries: u32,
    flags: u32,
}

fn shape(data: &MapData) -> Result<Shape, String> {
    let info = data.info().map_err(|e| e.to_string())?;
    Ok(Shape {
        ty: info.map_type().map_err(|e| e.to_string())?,
        fd: data.fd().as_fd().as_raw_fd(),
        key_size: info.key_size() as usize,
        value_size: info.value_size() as usize,
        entries: info.max_entries(),
        flags: info.map_flags(),
    })
}

/// Puts a kept map back to its state at creation: arrays zeroed (each CPU's value of a
/// per-CPU one), hashes emptied; the object's constants left as they are. Ring buffers
/// are drained by their reader (`RingBuf`) before the programs are attached.
pub(crate) fn reset(data: &MapData) -> Result<(), String> {
    let Shape {
        ty,
        fd,
        key_size,
        value_size,
        entries,
        flags,
    } = shape(data)?;
    let err = |what: &str, e: io::Error| format!("{what}: {e}");
    match ty {
        MapType::RingBuf => Ok(()),
        // The object's constants (`.rodata`, frozen at load): read-only to the programs,
        // nothing to reset.
        MapType::Array if flags & BPF_F_RDONLY_PROG != 0 => Ok(()),
        MapType::Array if flags & BPF_F_MMAPABLE != 0 => {
            zero_mapped(fd, value_size.next_multiple_of(8) * entries as usize)
                .map_err(|e| err("zeroing a mapped array", e))
        }
        MapType::Array => {
            let keys: Vec<u32> = (0..entries).collect();
            let values = vec![0u8; value_size * entries as usize];
            update_batch(fd, &keys, &values, entries).or_else(|_| {
                keys.iter().try_for_each(|k| {
                    update_elem(fd, k, &values[..value_size])
                        .map_err(|e| err("zeroing an array", e))
                })
            })
        }
        MapType::PerCpuArray => {
            let cpus = aya::util::nr_cpus().map_err(|(_, e)| err("counting CPUs", e))?;
            let values = vec![0u8; value_size.next_multiple_of(8) * cpus];
            (0..entries).try_for_each(|k| {
                update_elem(fd, &k, &values).map_err(|e| err("zeroing a per-CPU array", e))
            })
        }
        MapType::Hash | MapType::LruHash => {
            clear_hash(fd, key_size, value_size).map_err(|e| err("emptying a hash map", e))
        }
        other => Err(format!("unexpected map type {other:?}")),
    }
}

/// BPF_F_MMAPABLE and BPF_F_RDONLY_PROG (include/uapi/linux/bpf.h).
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_F_RDONLY_PROG: u32 = 1 << 7;

/// union bpf_attr's members for element and batch operations (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
pub(crate) struct BatchAttr {
    pub(crate) in_batch: u64,
    pub(crate) out_batch: u64,
    pub(crate) keys: u64,
    pub(crate) values: u64,
    pub(crate) count: u32,
    pub(crate) map_fd: u32,
    pub(crate) elem_flags: u64,
    pub(crate) flags: u64,
}

const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;
pub(crate) const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;

/// bpf(2) with `attr`; the error is errno's.
pub(crate) fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<()> {
    // SAFETY: `attr` is one of the bpf_attr members above, alive for the call, and every
    // pointer in it points at memory of the sizes the map's key and value sizes say.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn update_elem(fd: i32, key: &u32, value: &[u8]) -> io::Result<()> {
    let mut a = ElemAttr {
        map_fd: fd as u32,
        key: key as *const u32 as u64,
        value: value.as_ptr() as u64,
        ..ElemAttr::default()
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a)
}

fn update_batch(fd: i32, keys: &[u32], values: &[u8], count: u32) -> io::Result<()> {
    let mut a = BatchAttr {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count,
        map_fd: fd as u32,
        ..BatchAttr::default()
    };
    sys_bpf(BPF_MAP_UPDATE_BATCH, &mut a)
}

/// Deletes every entry of a hash map: in batches of lookups and deletes (Linux 5.6), else
/// one key at a time.
fn clear_hash(fd: i32, key_size: usize, value_size: usize) -> io::Result<()> {
    const CHUNK: usize = 1024;
    let mut keys = vec![0u8; key_size * CHUNK];
    let mut values = vec![0u8; value_size * CHUNK];
    let mut token = 0u64;
    let mut first = true;
    loop {
        let mut a = BatchAttr {
            in_batch: if first {
                0
            } else {
                &token as *const u64 as u64
            },
            out_batch: &mut token as *mut u64 as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: CHUNK as u32,
            map_fd: fd as u32,
            ..BatchAttr::default()
        };
        match sys_bpf(BPF_MAP_LOOKUP_AND_DELETE_BATCH, &mut a) {
            Ok(()) => first = false,
            // The last batch (or an empty map).
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(_) => break,
        }
    }
    // One at a time: the first key, deleted, until there is none.
    let mut key = vec![0u8; key_size];
    loop {
        let mut a = ElemAttr {
            map_fd: fd as u32,
            key: 0,
            value: key.as_mut_ptr() as u64,
            ..ElemAttr::default()
        };
        match sys_bpf(BPF_MAP_GET_NEXT_KEY, &mut a) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Err(e) => return Err(e),
        }
        let mut d = ElemAttr {
            map_fd: fd as u32,
            key: key.as_ptr() as u64,
            ..ElemAttr::default()
        };
        match sys_bpf(BPF_MAP_DELETE_ELEM, &mut d) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Zeroes the first `bytes` of a mappable array through a mapping of it.
fn zero_mapped(fd: i32, bytes: usize) -> io::Result<()> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let len = bytes.next_multiple_of(page);
    // SAFETY: a shared mapping of the map's data, `len` bytes (the kernel refuses more
    // than the map holds); written, then unmapped before returning.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        std::ptr::write_bytes(p.cast::<u8>(), 0, bytes);
        libc::munmap(p, len);
    }
    Ok(())
}

/// For tests: every entry of a map given a value that is not its creation's (arrays and
/// per-CPU arrays: their first and last index, all bytes 0xff; hashes: one key of 0x01
/// bytes); the object's constants and the rings are left.
#[cfg(test)]
pub(crate) fn dirty(data: &MapData) -> Result<(), String> {
    let Shape {
        ty,
        fd,
        key_size: ks,
        value_size: vs,
        entries: n,
        flags,
    } = shape(data)?;
    let e = |e: io::Error| e.to_string();
    match ty {
        MapType::RingBuf => Ok(()),
        MapType::Array if flags & BPF_F_RDONLY_PROG != 0 => Ok(()),
        MapType::Array => [0, n - 1]
            .iter()
            .try_for_each(|k| update_elem(fd, k, &vec![0xff; vs]).map_err(e)),
        MapType::PerCpuArray => {
            let cpus = aya::util::nr_cpus().map_err(|(_, e)| e.to_string())?;
            let v = vec![0xff; vs.next_multiple_of(8) * cpus];
            [0, n - 1]
                .iter()
                .try_for_each(|k| update_elem(fd, k, &v).map_err(e))
        }
        _ => {
            let (key, value) = (vec![1u8; ks], vec![0xffu8; vs]);
            let mut a = ElemAttr {
                map_fd: fd as u32,
                key: key.as_ptr() as u64,
                value: value.as_ptr() as u64,
                ..ElemAttr::default()
            };
            sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map_err(e)
        }
    }
}

/// For tests: whether a map holds what its creation gave it (arrays all zero, hashes
/// empty); an error says where it does not.
#[cfg(test)]
pub(crate) fn as_new(data: &MapData) -> Result<(), String> {
    const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
    let Shape {
        ty,
        fd,
        key_size: ks,
        value_size: vs,
        entries: n,
        flags,
    } = shape(data)?;
    match ty {
        MapType::RingBuf => Ok(()),
        MapType::Array if flags & BPF_F_RDONLY_PROG != 0 => Ok(()),
        MapType::Array | MapType::PerCpuArray => {
            let cpus = aya::util::nr_cpus().map_err(|(_, e)| e.to_string())?;
            let per = if ty == MapType::Array { 1 } else { cpus };
            let mut v = vec![0u8; vs.next_multiple_of(8) * per];
            for k in 0..n {
                let mut a = ElemAttr {
                    map_fd: fd as u32,
                    key: &k as *const u32 as u64,
                    value: v.as_mut_ptr() as u64,
                    ..ElemAttr::default()
                };
                sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut a).map_err(|e| e.to_string())?;
                if v.iter().any(|&b| b != 0) {
                    return Err(format!("index {k} is not zero"));
                }
            }
            Ok(())
        }
        _ => {
            let mut key = vec![0u8; ks];
            let mut a = ElemAttr {
                map_fd: fd as u32,
                key: 0,
                value: key.as_mut_ptr() as u64,
                ..ElemAttr::default()
            };
            match sys_bpf(BPF_MAP_GET_NEXT_KEY, &mut a) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                Err(e) => Err(e.to_string()),
                Ok(()) => Err(format!("holds a key {key:02x?}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_the_object_and_each_rings_size() {
        let k = key(b"object", 4 << 20, 8 << 20);
        assert_eq!(k, key(b"object", 4 << 20, 8 << 20));
        assert_ne!(k, key(b"object2", 4 << 20, 8 << 20));
        assert_ne!(k, key(b"object", 8 << 20, 8 << 20));
        assert_ne!(k, key(b"object", 4 << 20, 4096));
    }

    #[test]
    fn a_slot_is_held_by_one_recording_at_a_time() {
        // flock works on any directory: a temporary one stands in for the BPF filesystem.
        let root = tempfile::tempdir().unwrap();
        let a = checkout(root.path(), 7).expect("a first slot");
        let b = checkout(root.path(), 7).expect("a second slot");
        assert_ne!(a.dir, b.dir);
        assert!(!a.ready && !b.ready);
        assert!(
            checkout(root.path(), 7).is_none(),
            "every slot of the key is held"
        );
        let other = checkout(root.path(), 8).expect("another key has its own slots");
        drop(a);
        let again = checkout(root.path(), 7).expect("a slot let go is taken again");
        assert!(again.dir.ends_with(format!("{:032x}-0", 7u128)));
        drop((b, other));
    }

    #[test]
    fn evict_keeps_the_most_recent_slots_and_never_a_held_one() {
        let root = tempfile::tempdir().unwrap();
        let mut dirs = Vec::new();
        for k in 0..5u128 {
            let mut s = checkout(root.path(), k).unwrap();
            std::fs::write(s.dir.join(READY), b"").unwrap();
            s.ready = true;
            // Older first: each one a second later.
            let t = libc::timespec {
                tv_sec: 1_000_000 + k as i64,
                tv_nsec: 0,
            };
            // SAFETY: futimens with two valid timespecs.
            unsafe { libc::futimens(s._lock.as_raw_fd(), [t, t].as_ptr()) };
            dirs.push(s.dir.clone());
        }
        // A half-stored slot (no READY; what a recording that died while pinning leaves)
        // goes whatever its age.
        let half_dir = root.path().join(format!("{:032x}-0", 9u128));
        std::fs::create_dir(&half_dir).unwrap();
        std::fs::write(half_dir.join("map_x"), b"").unwrap();
        // The oldest is held by a recording: it stays.
        let held = lock_dir(&dirs[0]).unwrap();
        evict(root.path(), &dirs[4]);
        let left: Vec<bool> = dirs.iter().map(|d| d.exists()).collect();
        assert_eq!(left, [true, false, true, true, true]);
        assert!(!half_dir.exists());
        drop(held);
    }
}
