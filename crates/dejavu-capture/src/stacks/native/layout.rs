//! A process's code mappings as its exec and mmap calls made them, for naming the frames
//! of a process that has exited before its stacks were unwound (the eBPF backend unwinds
//! after the fact; /proc/PID/maps is gone with the process).
//!
//! At exec the kernel maps the program and its interpreter (ld.so) itself; the kernel
//! half reports where: AT_PHDR (the program's program headers in memory) and AT_BASE
//! (the interpreter's load address) from the auxiliary vector. Their executable PT_LOAD
//! segments, placed by those addresses, are the first code mappings. Each later mmap of a
//! file with PROT_EXEC (ld.so loading a library, dlopen) adds one.

use super::maps::Mapping;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const PAGE: u64 = 4096;

/// A file's identity as /proc/PID/maps gives it: (major, minor), inode.
fn identity(m: &std::fs::Metadata) -> ((u32, u32), u64) {
    let dev = m.dev();
    ((libc::major(dev), libc::minor(dev)), m.ino())
}

/// Bytes read first from a program's file: its ELF header, program headers and
/// interpreter path are nearly always within them.
const HEAD: usize = 16 << 10;
/// Most bytes read for those (a file that puts them further in is not laid out).
const MAX_HEAD: usize = 4 << 20;

/// The start of the ELF file at `path`, as far as its program headers go, and its
/// interpreter path with `interp`: never the whole file, which this read at every exec
/// before (95 MB for node, 33 MB for each cc1 of a build). Only an exec needs the
/// interpreter path, and a library's can lie far in (glibc's libc.so.6, itself runnable,
/// has its PT_INTERP 1.6 MiB in: a build id read that much of it at every recording).
fn head(path: &Path, interp: bool) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let mut data = Vec::with_capacity(HEAD);
    (&mut f).take(HEAD as u64).read_to_end(&mut data).ok()?;
    // Twice at most: the program headers, then the interpreter path they point at.
    for _ in 0..2 {
        let need = headers_end(&data, interp)?;
        if need <= data.len() {
            return Some(data);
        }
        if need > MAX_HEAD {
            return None;
        }
        let more = (need - data.len()) as u64;
        let had = data.len();
        (&mut f).take(more).read_to_end(&mut data).ok()?;
        if data.len() == had {
            return None; // the file is shorter than its headers say
        }
    }
    (headers_end(&data, interp)? <= data.len()).then_some(data)
}

/// Files whose start `head_of` keeps (the programs and interpreters of a recording's
/// execs: a few).
const MAX_HEADS: usize = 64;

type Heads = rustc_hash::FxHashMap<crate::realpath::Identity, std::rc::Rc<Vec<u8>>>;

thread_local! {
    static HEADS: std::cell::RefCell<Heads> = std::cell::RefCell::new(Heads::default());
}

/// `head(path)`, read once per file: kept by the identity `meta` (a stat of `path`) gives
/// it, its device, inode, size and modification time (a build execs the same cc1 and
/// ld.so 32 times, and each exec read both again).
fn head_of(path: &Path, meta: &std::fs::Metadata) -> Option<std::rc::Rc<Vec<u8>>> {
    let key = crate::realpath::Identity::of(meta);
    if let Some(h) = HEADS.with(|h| h.borrow().get(&key).cloned()) {
        return Some(h);
    }
    let data = std::rc::Rc::new(head(path, true)?);
    HEADS.with(|h| {
        let mut h = h.borrow_mut();
        if h.len() >= MAX_HEADS {
            h.clear();
        }
        h.insert(key, data.clone());
    });
    Some(data)
}

/// How many bytes from the start of an ELF file hold its program headers, and its
/// interpreter path with `interp`, as far as `data` (its start) tells; None if it is not a
/// 64-bit ELF file.
fn headers_end(data: &[u8], interp: bool) -> Option<usize> {
    let hdr = elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = hdr.endian().ok()?;
    let ph_end = hdr
        .e_phoff(endian)
        .checked_add(u64::from(hdr.e_phnum(endian)) * u64::from(hdr.e_phentsize(endian)))?;
    let ph_end = usize::try_from(ph_end).ok()?;
    if ph_end > data.len() || !interp {
        return Some(ph_end);
    }
    let phdrs = hdr.program_headers(endian, data).ok()?;
    let interp_end = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_INTERP)
        .filter_map(|p| p.p_offset(endian).checked_add(p.p_filesz(endian)))
        .max()
        .unwrap_or(0);
    Some(ph_end.max(usize::try_from(interp_end).ok()?))
}

/// Most bytes of PT_NOTE segments read for a build id (a build-id note is 36 bytes; the
/// notes of a program are a few hundred).
const MAX_NOTES: u64 = 64 << 10;

/// The GNU build id of the ELF file at `path`: the descriptor of its `NT_GNU_BUILD_ID`
/// note, found through its PT_NOTE program headers. Reads the headers (as at exec) and
/// the note segments, never the whole file; None for a file without one (or not ELF).
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let data = head(path, false)?;
    let hdr = elf::FileHeader64::<object::Endianness>::parse(&data[..]).ok()?;
    let endian = hdr.endian().ok()?;
    let phdrs = hdr.program_headers(endian, &data[..]).ok()?;
    let mut file = None;
    for p in phdrs.iter().filter(|p| p.p_type(endian) == elf::PT_NOTE) {
        let (off, len) = (p.p_offset(endian), p.p_filesz(endian).min(MAX_NOTES));
        let end = usize::try_from(off.checked_add(len)?).ok()?;
        let owned;
        let notes: &[u8] = if end <= data.len() {
            &data[off as usize..end]
        } else {
            let f = match &file {
                Some(f) => f,
                None => file.insert(std::fs::File::open(path).ok()?),
            };
            let mut b = vec![0u8; len as usize];
            f.read_exact_at(&mut b, off).ok()?;
            owned = b;
            &owned
        };
        let align = if p.p_align(endian) == 8 { 8 } else { 4 };
        if let Some(id) = gnu_build_id(notes, endian, align) {
            return Some(id);
        }
    }
    None
}

/// The `NT_GNU_BUILD_ID` descriptor among the notes in `b` (entries aligned to `align`).
fn gnu_build_id(mut b: &[u8], endian: object::Endianness, align: usize) -> Option<Vec<u8>> {
    use object::Endian;
    let word = |b: &[u8], at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(endian.read_u32_bytes(w))
    };
    let up = |n: usize| n.checked_add(align - 1).map(|n| n & !(align - 1));
    while b.len() >= 12 {
        let namesz = word(b, 0)? as usize;
        let descsz = word(b, 4)? as usize;
        let kind = word(b, 8)?;
        let desc_at = up(12usize.checked_add(namesz)?)?;
        let next = up(desc_at.checked_add(descsz)?)?;
        let name = b.get(12..12 + namesz)?;
        let desc = b.get(desc_at..desc_at + descsz)?;
        if kind == elf::NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc.to_vec());
        }
        b = b.get(next..)?;
    }
    None
}

/// The executable PT_LOAD segments of the ELF file at `path` loaded with `bias` (memory
/// address = file address + bias), as mappings; and its interpreter (PT_INTERP), if any.
/// `at_phdr`, when given, says where its program headers are in memory and so decides the
/// bias (the program's own image, whose bias the kernel chose).
fn load(
    path: &Path,
    bias: Option<u64>,
    at_phdr: Option<u64>,
) -> Option<(Vec<Mapping>, Option<Vec<u8>>)> {
    let meta = std::fs::metadata(path).ok()?;
    let data = head_of(path, &meta)?;
    let data = data.as_slice();
    let hdr = elf::FileHeader64::<object::Endianness>::parse(data).ok()?;
    let endian = hdr.endian().ok()?;
    let phdrs = hdr.program_headers(endian, data).ok()?;
    let bias = match (bias, at_phdr) {
        (Some(b), _) => b,
        (None, Some(at)) => {
            // Where the program headers are, by the file's own addresses: PT_PHDR, else
            // the segment that maps the file's start plus their file offset.
            let vaddr = phdrs
                .iter()
                .find(|p| p.p_type(endian) == elf::PT_PHDR)
                .map(|p| p.p_vaddr(endian))
                .or_else(|| {
                    phdrs
                        .iter()
                        .find(|p| p.p_type(endian) == elf::PT_LOAD && p.p_offset(endian) == 0)
                        .map(|p| p.p_vaddr(endian) + hdr.e_phoff(endian))
                })?;
            at.wrapping_sub(vaddr)
        }
        (None, None) => return None,
    };
    let (dev, inode) = identity(&meta);
    let interp = phdrs
        .iter()
        .find_map(|p| p.interpreter(endian, data).ok().flatten())
        .map(|i| i.to_vec());
    let maps = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD && p.p_flags(endian) & elf::PF_X != 0)
        .filter_map(|p| {
            let vaddr = p.p_vaddr(endian);
            let start = bias.checked_add(vaddr & !(PAGE - 1))?;
            let end = bias
                .checked_add(vaddr.checked_add(p.p_memsz(endian))?)?
                .checked_add(PAGE - 1)?
                & !(PAGE - 1);
            Some(Mapping {
                start,
                end,
                exec: true,
                read: true,
                offset: p.p_offset(endian) & !(PAGE - 1),
                dev,
                inode,
                path: path.as_os_str().as_bytes().to_vec(),
                deleted: false,
            })
        })
        .collect();
    Some((maps, interp))
}

/// The code mappings of a process right after it exec'd `exe` (an absolute path), with
/// the auxiliary vector's AT_PHDR and AT_BASE (0: no interpreter).
pub fn at_exec(exe: &Path, at_phdr: u64, at_base: u64) -> Vec<Mapping> {
    let Some((mut maps, interp)) = load(exe, None, Some(at_phdr)) else {
        return Vec::new();
    };
    if let (Some(i), true) = (interp, at_base != 0) {
        let i = i.strip_suffix(b"\0").unwrap_or(&i).to_vec();
        // By its real path (/lib64/ld-linux-x86-64.so.2 is a link), as /proc names it.
        let given = Path::new(std::ffi::OsStr::from_bytes(&i));
        let ipath = crate::realpath::resolve(given).0;
        if let Some((m, _)) = load(&ipath, Some(at_base), None) {
            maps.extend(m);
        }
    }
    maps.sort_by_key(|m| m.start);
    maps
}

/// Adds a file mapping made by mmap (`start..start+len` of `path` from `offset`) to
/// `maps`, replacing what it overlaps (MAP_FIXED over a reservation, as ld.so does).
pub fn mapped(maps: &mut Vec<Mapping>, start: u64, len: u64, offset: u64, path: &[u8]) {
    let Some(end) = start.checked_add(len) else {
        return;
    };
    // By its real path, as /proc names it (ld.so opens libraries by their search path).
    let given = Path::new(std::ffi::OsStr::from_bytes(path));
    let (real, meta) = crate::realpath::resolve(given);
    let Some(m) = meta else {
        return;
    };
    let (dev, inode) = identity(&m);
    unmapped(maps, start, len);
    maps.push(Mapping {
        start,
        end: (end + PAGE - 1) & !(PAGE - 1),
        exec: true,
        read: true,
        offset,
        dev,
        inode,
        path: real.as_os_str().as_bytes().to_vec(),
        deleted: false,
    });
    maps.sort_by_key(|m| m.start);
}

/// Removes `start..start+len` from `maps` (munmap, or a new mapping over it).
pub fn unmapped(maps: &mut Vec<Mapping>, start: u64, len: u64) {
    let end = start.saturating_add(len);
    let mut out = Vec::with_capacity(maps.len() + 1);
    for m in maps.drain(..) {
        if m.end <= start || m.start >= end {
            out.push(m);
            continue;
        }
        if m.start < start {
            out.push(Mapping {
                end: start,
                ..m.clone()
            });
        }
        if m.end > end {
            out.push(Mapping {
                offset: m.offset + (end - m.start),
                start: end,
                ..m
            });
        }
    }
    *maps = out;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The headers are read, not the file: a few KiB of a test binary of megabytes; and a
    /// file whose program headers lie past the first read is read as far as they go.
    #[test]
    fn only_the_headers_of_a_program_are_read() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let whole = std::fs::read(&exe).unwrap();
        let h = head(&exe, true).unwrap();
        assert!(
            h.len() <= HEAD && h.len() < whole.len(),
            "{} of {}",
            h.len(),
            whole.len()
        );
        assert_eq!(&h[..], &whole[..h.len()]);

        // The same headers with the program header table moved to 20 KiB in.
        let hdr = elf::FileHeader64::<object::Endianness>::parse(&whole[..]).unwrap();
        let endian = hdr.endian().unwrap();
        let (off, n) = (hdr.e_phoff(endian) as usize, hdr.e_phnum(endian) as usize);
        let size = n * hdr.e_phentsize(endian) as usize;
        let mut moved = whole[..HEAD].to_vec();
        moved.resize(20 << 10, 0);
        moved.extend_from_slice(&whole[off..off + size]);
        moved.extend_from_slice(&[0; 4096]);
        moved[32..40].copy_from_slice(&(20u64 << 10).to_le_bytes()); // e_phoff
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("moved");
        std::fs::write(&f, &moved).unwrap();
        let h = head(&f, true).unwrap();
        assert!(
            h.len() >= (20 << 10) + size && h.len() < moved.len(),
            "{}",
            h.len()
        );
        assert_eq!(headers_end(&h, true), headers_end(&moved, true));
        // Cut short inside its program headers: no layout, and no panic.
        std::fs::write(&f, &moved[..(20 << 10) + size / 2]).unwrap();
        assert!(head(&f, true).is_none());
    }

    /// A build id reads the program headers and the notes, not as far as the interpreter
    /// path: a library whose PT_INTERP lies far in (glibc's libc.so.6, 1.6 MiB) is not read
    /// that far for it; an exec's layout still reads the path.
    #[test]
    fn a_build_id_does_not_read_as_far_as_the_interpreter_path() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let whole = std::fs::read(&exe).unwrap();
        let hdr = elf::FileHeader64::<object::Endianness>::parse(&whole[..]).unwrap();
        let endian = hdr.endian().unwrap();
        let phdrs = hdr.program_headers(endian, &whole[..]).unwrap();
        let (at, interp) = phdrs
            .iter()
            .enumerate()
            .find(|(_, p)| p.p_type(endian) == elf::PT_INTERP)
            .map(|(i, p)| {
                let off = p.p_offset(endian) as usize;
                (i, whole[off..off + p.p_filesz(endian) as usize].to_vec())
            })
            .expect("the test binary has an interpreter");
        // The same file with its interpreter path moved to 2 MiB in (the program header's
        // p_offset, the 8 bytes after p_type and p_flags).
        let far = 2usize << 20;
        let mut moved = whole[..HEAD.min(whole.len())].to_vec();
        moved.resize(far, 0);
        moved.extend_from_slice(&interp);
        let ph = hdr.e_phoff(endian) as usize + at * hdr.e_phentsize(endian) as usize;
        moved[ph + 8..ph + 16].copy_from_slice(&(far as u64).to_le_bytes());
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("far-interp");
        std::fs::write(&f, &moved).unwrap();
        assert!(head(&f, false).unwrap().len() <= HEAD);
        assert!(head(&f, true).unwrap().len() >= far + interp.len());
        // The notes lie in the first KiB of a linked program, kept in the copy: the same
        // build id as the test binary's (None only where a linker adds none).
        assert_eq!(build_id(&f), build_id(&exe));
    }

    /// Our own process: the layout built from the auxiliary vector (read from /proc here)
    /// holds the same code mappings for the program and ld.so as /proc/self/maps.
    #[test]
    fn the_exec_layout_matches_proc_maps_for_the_program_and_its_interpreter() {
        let auxv = std::fs::read("/proc/self/auxv").unwrap();
        let mut at = std::collections::HashMap::new();
        for pair in auxv.chunks_exact(16) {
            let k = u64::from_ne_bytes(pair[..8].try_into().unwrap());
            let v = u64::from_ne_bytes(pair[8..].try_into().unwrap());
            at.insert(k, v);
        }
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let got = at_exec(&exe, at[&3], at.get(&7).copied().unwrap_or(0));
        let real = super::super::maps::read(std::process::id() as i32).unwrap();
        let exe_b = exe.as_os_str().as_bytes();
        let code: Vec<&Mapping> = real
            .iter()
            .filter(|m| m.exec && (m.path == exe_b || m.path.windows(5).any(|w| w == b"ld-li")))
            .collect();
        assert!(!code.is_empty());
        for m in code {
            let g = got
                .iter()
                .find(|g| g.start == m.start)
                .unwrap_or_else(|| panic!("{m:x?} not in {got:x?}"));
            assert_eq!(
                (g.end, g.offset, g.inode),
                (m.end, m.offset, m.inode),
                "{m:x?}"
            );
        }
    }

    /// Our own test binary's build id, as the note reader finds it, is what `readelf -n`
    /// prints; a file without notes has none, and a non-ELF file none, without a panic.
    #[test]
    fn the_build_id_is_read_from_the_notes() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let got = build_id(&exe);
        // readelf comes with binutils, which gcc (the tests' C workloads) needs.
        let out = std::process::Command::new("readelf")
            .arg("-n")
            .arg(&exe)
            .output()
            .expect("readelf runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let want = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
            .map(|h| h.trim().to_string());
        assert!(
            want.is_some(),
            "rustc gives test binaries a build id: {text}"
        );
        let got = got.map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>());
        assert_eq!(got, want);
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x");
        std::fs::write(&f, b"#!/bin/sh\n").unwrap();
        assert_eq!(build_id(&f), None);
        // A note list that claims more than it holds.
        let mut notes = vec![4, 0, 0, 0, 200, 0, 0, 0, 3, 0, 0, 0];
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(&[1, 2, 3]);
        assert_eq!(gnu_build_id(&notes, object::Endianness::Little, 4), None);
        notes[4] = 3;
        assert_eq!(
            gnu_build_id(&notes, object::Endianness::Little, 4),
            Some(vec![1, 2, 3])
        );
    }

    #[test]
    fn a_mapping_over_others_replaces_what_it_covers() {
        let m = |s: u64, e: u64, o: u64| Mapping {
            start: s,
            end: e,
            exec: true,
            read: true,
            offset: o,
            dev: (0, 0),
            inode: 1,
            path: b"/x".to_vec(),
            deleted: false,
        };
        let mut maps = vec![m(0x1000, 0x5000, 0)];
        unmapped(&mut maps, 0x2000, 0x1000);
        assert_eq!(maps, [m(0x1000, 0x2000, 0), m(0x3000, 0x5000, 0x2000)]);
        unmapped(&mut maps, 0, 0x10000);
        assert!(maps.is_empty());
    }
}
